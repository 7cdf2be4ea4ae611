/*
 * Abort-and-resume of one SGLang turn (opt-in: libra.resume). An engine paused in abort mode
 * (a weight update, a drain) answers the turn with finish_reason "abort" and the tokens it had
 * generated; the gateway sends input_ids plus those tokens again with the rest of the budget,
 * and answers the client once, with every segment merged: output ids, text and log-probs
 * concatenated in order, completion_tokens and e2e_latency summed, finish_reason the last
 * segment's (a length end at the client's cap), the other members the first segment's (the
 * client's prompt), and meta_info.libra_segments listing each segment's engine, weight
 * version and tokens — a trainer's importance ratios depend on which weights produced which
 * token. The merged answer is the gateway's own, so it is written anew; every other answer
 * passes as the engine sent it.
 */
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"

#define RESUME_SEGMENTS_MAX 16 /* aborts of one turn followed, beyond: the last is answered */

/* v's integer when from 0 to TRACE_MAX_TOKENS, else -1: an engine's bogus count must not
 * overflow a sum over the segments. */
static json_int_t tokens_of(const json_t *v)
{
    json_int_t n = json_integer_value(v);
    return json_is_integer(v) && n >= 0 && n <= TRACE_MAX_TOKENS ? n : -1;
}

/* A segment's completion_tokens; 0 when bogus. */
static json_int_t segment_tokens(const json_t *meta)
{
    json_int_t n = tokens_of(json_object_get(meta, "completion_tokens"));
    return n >= 0 ? n : 0;
}

/* The merged answer's finish reason: the last segment's, but a length end counted from the
 * turn's start. The segment was sent the budget left after the before tokens of the earlier
 * segments, and its engine names that cap; the client asked for the whole, which the engine
 * would have named had the turn run unaborted. */
static json_t *turn_finish(json_t *why, json_int_t before)
{
    json_t *out = json_copy(why);
    json_int_t cap = tokens_of(json_object_get(out, "length"));
    const char *type = json_string_value(json_object_get(out, "type"));
    if (type && strcmp(type, "length") == 0 && cap >= 0)
        json_object_set_new(out, "length", json_integer(cap + before));
    return out;
}

/* Whether answer says abort, with budget left for r. */
static bool aborted(const struct gw_resume *s, const struct gw_request *r, json_t *answer)
{
    json_t *meta = json_object_get(answer, "meta_info");
    const char *type =
        json_string_value(json_object_get(json_object_get(meta, "finish_reason"), "type"));
    json_int_t n = segment_tokens(meta);
    return type && strcmp(type, "abort") == 0 && s->segments < RESUME_SEGMENTS_MAX &&
           s->tokens + n < r->max_new_tokens;
}

/* Whether the answer's bytes plainly say another end than abort (meta_info.finish_reason.type,
 * read by the scanner without parsing the answer): most answers, which then cost no DOM of a
 * MiB of log-probs. False when the type cannot be read that way, so that the parse decides. */
static bool plainly_not_aborted(const char *answer, size_t len)
{
    struct jscan_value meta, why, type;
    char s[16];
    return jscan_get_lazy(jscan_root(answer, len), "meta_info", &meta) && meta.type == 'o' &&
           jscan_get(meta, "finish_reason", &why) && jscan_get(why, "type", &type) &&
           jscan_string(type, s, sizeof s) && strcmp(s, "abort") != 0;
}

/* Appends array b's elements to array a (both may be absent). */
static void extend(json_t *a, json_t *b)
{
    if (json_is_array(a) && json_is_array(b))
        json_array_extend(a, b);
}

/* Folds one segment's answer into the merged one. */
static void fold(struct gw_resume *s, json_t *answer, int64_t instance)
{
    json_t *meta = json_object_get(answer, "meta_info");
    json_int_t n = segment_tokens(meta);
    json_t *segment =
        json_pack("{s:I, s:O?, s:I}", "instance", (json_int_t)instance, "weight_version",
                  json_object_get(meta, "weight_version"), "completion_tokens", n);
    s->tokens += n;
    s->segments++;
    json_t *ids = json_object_get(answer, "output_ids");
    for (size_t i = 0; i < json_array_size(ids); i++) {
        char id[24];
        snprintf(id, sizeof id, s->ids.n ? ",%lld" : "%lld",
                 (long long)json_integer_value(json_array_get(ids, i)));
        for (const char *c = id; *c; c++)
            vec_push(&s->ids, *c);
    }
    if (!s->merged) {
        s->merged = json_incref(answer);
        json_object_set_new(json_object_get(s->merged, "meta_info"), "libra_segments",
                            json_pack("[o]", segment));
        return;
    }
    json_t *m = s->merged, *mm = json_object_get(m, "meta_info");
    extend(json_object_get(m, "output_ids"), ids);
    extend(json_object_get(mm, "output_token_logprobs"),
           json_object_get(meta, "output_token_logprobs"));
    const char *a = json_string_value(json_object_get(m, "text"));
    const char *b = json_string_value(json_object_get(answer, "text"));
    if (a && b) {
        char *text = xmalloc(strlen(a) + strlen(b) + 1);
        strcpy(text, a);
        strcat(text, b);
        json_object_set_new(m, "text", json_string(text));
        free(text);
    }
    json_object_set_new(mm, "finish_reason",
                        turn_finish(json_object_get(meta, "finish_reason"), s->tokens - n));
    json_object_set(mm, "weight_version", json_object_get(meta, "weight_version"));
    json_object_set_new(mm, "completion_tokens", json_integer(s->tokens));
    json_t *was = json_object_get(mm, "e2e_latency"), *more = json_object_get(meta, "e2e_latency");
    if (json_is_number(was) && json_is_number(more)) /* the engines' time on the turn */
        json_object_set_new(mm, "e2e_latency",
                            json_real(json_number_value(was) + json_number_value(more)));
    json_array_append_new(json_object_get(mm, "libra_segments"), segment);
}

char *gw_resume_next(struct gw_resume *s, const struct gw_request *r, const char *body, size_t len,
                     const char *answer, size_t answer_len, int64_t instance, size_t *out_len)
{
    if (!r->resume || !gw_resume_fits(body, len, r)) /* a segment folded is sent again */
        return NULL;
    if (plainly_not_aborted(answer, answer_len))
        return NULL;
    json_t *doc = json_loadb(answer, answer_len, 0, NULL);
    if (!doc || !aborted(s, r, doc)) {
        json_decref(doc);
        return NULL;
    }
    fold(s, doc, instance);
    json_decref(doc);
    return gw_resume_body(body, len, r, s->ids.v, s->ids.n, s->tokens, out_len);
}

char *gw_resume_finish(struct gw_resume *s, const char *answer, size_t len, int64_t instance,
                       size_t *out_len, int64_t *total)
{
    json_t *doc = json_loadb(answer, len, 0, NULL);
    if (!doc)
        return NULL;
    fold(s, doc, instance);
    json_decref(doc);
    char *text = json_dumps(s->merged, JSON_COMPACT);
    *out_len = strlen(text);
    *total = s->tokens;
    return text;
}

void gw_resume_free(struct gw_resume *s)
{
    json_decref(s->merged);
    vec_free(&s->ids);
    memset(s, 0, sizeof *s);
}
