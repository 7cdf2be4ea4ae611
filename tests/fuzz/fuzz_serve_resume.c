/*
 * Fuzz harness for abort-and-resume (src/server/resume.c, and gw_resume_body in
 * src/server/request.c): what the gateway reads of an SGLang engine's answers to a turn it resumes.
 * Line 1 of the input is the client's /generate body, each later line one 200 answer of the
 * engine, in order, as src/server/proxy.c hands them over: each but the last may be resumed
 * (gw_resume_next); the first that is not, or the last, is folded into the merged answer
 * (gw_resume_finish) once a segment was. Besides not crashing or leaking:
 *
 *   - only a turn that opted in (libra.resume) with a budget is resumed, at most
 *     RESUME_SEGMENTS_MAX times, and its generated tokens stay below the budget;
 *   - the body sent again is one JSON object that reads as an SGLang turn whose budget is what
 *     is left and whose prompt holds the ids the engine returned (on bodies without duplicate
 *     names, where which member is read is not a choice);
 *   - the merged answer is JSON, counts the tokens of every segment, and, when its first segment
 *     had meta_info, lists every segment in meta_info.libra_segments, whose tokens add up.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "server/internal.h"

#define SEGMENTS_MAX 16 /* RESUME_SEGMENTS_MAX of resume.c */

/* The output ids an answer carries, as fold counts them. */
static size_t output_ids(const char *answer, size_t len)
{
    json_t *doc = json_loadb(answer, len, 0, NULL);
    size_t n = json_array_size(json_object_get(doc, "output_ids"));
    json_decref(doc);
    return n;
}

static void check_next(const struct gw_request *r, const struct gw_resume *s, const char *next,
                       size_t len, size_t ids, bool strict)
{
    size_t off;
    const char *msg;
    fuzz_require(jscan_check(next, len, &off, &msg) == 0,
                 "the body sent again is not a JSON object");
    fuzz_require(next[len] == '\0', "the body sent again is not terminated");
    if (!strict)
        return;
    struct gw_parse_config c = {.prompt_tokens = GW_PROMPT_TOKENS};
    struct gw_request *again = malloc(sizeof *again);
    char err[256];
    fuzz_require(gw_request_parse(GW_SGLANG_GENERATE, next, len, NULL, NULL, &c, again, err,
                                  sizeof err) == 0,
                 "the body sent again is refused");
    fuzz_require(again->max_new_tokens == r->max_new_tokens - s->tokens,
                 "the body sent again has another budget than what is left");
    fuzz_require(again->prompt_tokens == r->prompt_tokens + (int64_t)ids,
                 "the body sent again lacks the ids generated");
    fuzz_require(!again->has_libra, "the body sent again carries libra's member");
    free(again);
}

static void check_merged(const struct gw_resume *s, const char *merged, size_t len, int64_t total,
                         bool first_meta)
{
    fuzz_require(merged[len] == '\0' && strlen(merged) == len,
                 "the merged answer's length is wrong");
    fuzz_require(total == s->tokens && total >= 0, "the merged answer's tokens are not the sum");
    json_t *doc = json_loadb(merged, len, 0, NULL);
    fuzz_require(doc != NULL, "the merged answer is not JSON");
    json_t *meta = json_object_get(doc, "meta_info");
    if (first_meta) {
        fuzz_require(json_integer_value(json_object_get(meta, "completion_tokens")) == total,
                     "meta_info.completion_tokens is not the sum of the segments");
        json_t *seg = json_object_get(meta, "libra_segments");
        fuzz_require(json_array_size(seg) == (size_t)s->segments,
                     "meta_info.libra_segments does not list every segment");
        json_int_t sum = 0;
        for (size_t i = 0; i < json_array_size(seg); i++) {
            json_t *e = json_array_get(seg, i);
            fuzz_require(json_object_get(e, "weight_version") != NULL &&
                             json_is_integer(json_object_get(e, "instance")),
                         "a segment without its engine or weight version");
            sum += json_integer_value(json_object_get(e, "completion_tokens"));
        }
        fuzz_require(sum == total, "the segments' tokens do not add up");
    }
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size;
    const char *nl = memchr(s, '\n', size);
    size_t body_len = nl ? (size_t)(nl - s) : size;
    char *body = malloc(body_len + 1);
    memcpy(body, s, body_len);
    body[body_len] = '\0';
    struct gw_parse_config c = {.prompt_tokens = GW_PROMPT_TOKENS};
    struct gw_request *r = malloc(sizeof *r);
    char err[256];
    if (!nl || gw_request_parse(GW_SGLANG_GENERATE, body, body_len, NULL, NULL, &c, r, err,
                                sizeof err) != 0) {
        free(r);
        free(body);
        return 0;
    }
    json_t *strict_doc = json_loadb(body, body_len, JSON_REJECT_DUPLICATES, NULL);
    bool strict = strict_doc != NULL;
    json_decref(strict_doc);
    struct gw_resume st = {0};
    size_t ids = 0;
    bool first_meta = false;
    for (int64_t instance = 1, last = 0; !last; instance++) {
        const char *a = nl + 1;
        nl = memchr(a, '\n', (size_t)(end - a));
        last = !nl;
        size_t len = nl ? (size_t)(nl - a) : (size_t)(end - a);
        if (!last) {
            size_t n = 0;
            int64_t before = st.segments;
            char *next = gw_resume_next(&st, r, body, body_len, a, len, instance, &n);
            if (next) {
                fuzz_require(r->resume && r->max_new_tokens >= 0,
                             "a turn resumed without opting in");
                fuzz_require(st.segments == before + 1 && st.segments <= SEGMENTS_MAX,
                             "segments miscounted");
                fuzz_require(st.tokens >= 0 && st.tokens < r->max_new_tokens,
                             "a turn resumed past its budget");
                if (before == 0) {
                    json_t *doc = json_loadb(a, len, 0, NULL);
                    first_meta = json_is_object(json_object_get(doc, "meta_info"));
                    json_decref(doc);
                }
                ids += output_ids(a, len);
                check_next(r, &st, next, n, ids, strict);
                free(next);
                continue;
            }
            fuzz_require(st.segments == before, "a segment folded without a resumption");
        }
        if (st.segments) {
            size_t n = 0;
            int64_t total = -1;
            int64_t before = st.segments;
            char *merged = gw_resume_finish(&st, a, len, instance, &n, &total);
            if (merged) {
                fuzz_require(st.segments == before + 1, "the last segment is not counted");
                check_merged(&st, merged, n, total, first_meta);
            }
            free(merged);
        }
        break;
    }
    gw_resume_free(&st);
    free(r);
    free(body);
    return 0;
}
