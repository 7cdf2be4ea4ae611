/*
 * Figures for util/jscan: what the gateway pays per request body to read the fields routing
 * needs and to forward the body without one member, against a jansson DOM of the same body.
 *
 * Input (util/rng seed 1): an SGLang-style /generate body
 *   {"model":"qwen3-14b","rid":"traj-...","input_ids":[50,000 ids U[0, 151646)],
 *    "sampling_params":{"max_new_tokens":512,"temperature":1.0,"stop":["</tool_call>"]},
 *    "stream":false}
 * compact, 313,578 bytes (ids of a real 151,646-token vocabulary are mostly 5-6 digits, so the
 * 50,000 ids take more than the ~200 KB of a typical body; cost is linear in bytes). One op is
 * one body:
 *   jscan_check    validate the body
 *   jscan_fields   jscan_get model and rid, jscan_path sampling_params.max_new_tokens
 *   jscan_count    jscan_get input_ids + jscan_count
 *   jscan_cut      jscan_cut input_ids (the gateway forwards head + tail)
 *   jscan_request  all of the above in sequence: what a routed request costs
 *   jansson_loadb  json_loadb + json_decref of the same body (the DOM jscan avoids)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util/alloc.h"
#include "util/jscan.h"
#include "util/rng.h"

#define INPUT_BODY                                                                                 \
    "SGLang /generate body: 50,000 input_ids U[0, 151646) + model, rid, sampling_params, "         \
    "stream; compact, 313,578 bytes (bench_jscan.c, seed 1); op = one body"
#define IDS 50000
#define INPUT_SPACED                                                                               \
    "the same body with Python's json.dumps separators (\", \" and \": \"), 363,577 bytes; op = "  \
    "one body"
#define GEN 24160
#define INPUT_ANSWER                                                                               \
    "SGLang /generate answer of 24,160 tokens with output_token_logprobs, members as libra emu "   \
    "orders them (weight_version after the log-probs); op = one answer"

struct body {
    char *text;
    size_t len;
};

/* The body with its separators: ",", ":" (compact) or ", ", ": " (Python's json.dumps). */
static struct body *body_make(const char *comma, const char *colon)
{
    struct body *b = xmalloc(sizeof *b);
    size_t cap = (size_t)IDS * 9 + 256;
    b->text = xmalloc(cap);
    struct rng r = rng_keyed(1, 0, 0, 0);
    size_t len = (size_t)snprintf(
        b->text, cap, "{\"model\"%s\"qwen3-14b\"%s\"rid\"%s\"traj-%016llx\"%s\"input_ids\"%s[",
        colon, comma, colon, (unsigned long long)rng_u64(&r), comma, colon);
    for (int i = 0; i < IDS; i++)
        len += (size_t)snprintf(b->text + len, cap - len, "%s%llu", i ? comma : "",
                                (unsigned long long)rng_uniform_int(&r, 151646));
    len +=
        (size_t)snprintf(b->text + len, cap - len,
                         "]%s\"sampling_params\"%s{\"max_new_tokens\"%s512%s\"temperature\"%s1.0%s"
                         "\"stop\"%s[\"</tool_call>\"]}%s\"stream\"%sfalse}",
                         comma, colon, colon, comma, colon, comma, colon, comma, colon);
    b->len = len;
    if (jscan_check(b->text, b->len, NULL, NULL) != 0) {
        fprintf(stderr, "bench_jscan: the generated body is not valid\n");
        exit(4);
    }
    return b;
}

static void *body_setup(uint64_t n)
{
    (void)n;
    return body_make(",", ":");
}

static void *spaced_setup(uint64_t n)
{
    (void)n;
    return body_make(", ", ": ");
}

/* An SGLang /generate answer of GEN tokens with log-probs, as libra emu writes it (sorted
 * members: meta_info first, its weight_version after the log-probs). */
static void *answer_setup(uint64_t n)
{
    (void)n;
    struct body *b = xmalloc(sizeof *b);
    size_t cap = (size_t)GEN * 48 + 256;
    b->text = xmalloc(cap);
    struct rng r = rng_keyed(1, 1, 0, 0);
    size_t len = (size_t)snprintf(b->text, cap,
                                  "{\"meta_info\":{\"cached_tokens\":0,\"completion_tokens\":%d,"
                                  "\"e2e_latency\":12.5,\"finish_reason\":{\"length\":%d,\"type\":"
                                  "\"length\"},\"id\":\"emu0-1\",\"output_token_logprobs\":[",
                                  GEN, GEN);
    for (int i = 0; i < GEN; i++)
        len += (size_t)snprintf(b->text + len, cap - len, "%s[%.17g,%llu,null]", i ? "," : "",
                                -3.0 * rng_uniform(&r),
                                (unsigned long long)rng_uniform_int(&r, 151646));
    len += (size_t)snprintf(
        b->text + len, cap - len,
        "],\"prompt_tokens\":28000,\"weight_version\":\"default\"},\"output_ids\":[1]}");
    b->len = len;
    if (jscan_check(b->text, b->len, NULL, NULL) != 0) {
        fprintf(stderr, "bench_jscan: the generated answer is not valid\n");
        exit(4);
    }
    return b;
}

static void body_teardown(void *state)
{
    struct body *b = state;
    free(b->text);
    free(b);
}

static uint64_t check_run(void *state, uint64_t n)
{
    const struct body *b = state;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)(jscan_check(b->text, b->len, NULL, NULL) + 1);
    return sum;
}

static uint64_t fields(const struct body *b)
{
    struct jscan_value root = jscan_root(b->text, b->len), v;
    char model[64], rid[64];
    int64_t max_new = 0;
    uint64_t sum = 0;
    sum += jscan_get(root, "model", &v) && jscan_string(v, model, sizeof model);
    sum += jscan_get(root, "rid", &v) && jscan_string(v, rid, sizeof rid);
    if (jscan_path(root, "sampling_params.max_new_tokens", &v) && jscan_int(v, &max_new))
        sum += (uint64_t)max_new;
    return sum;
}

static uint64_t count(const struct body *b)
{
    struct jscan_value ids;
    jscan_get(jscan_root(b->text, b->len), "input_ids", &ids);
    return (uint64_t)jscan_count(ids);
}

static uint64_t cut(const struct body *b)
{
    struct jscan_cut c = {0, 0};
    jscan_cut(jscan_root(b->text, b->len), "input_ids", &c);
    return c.head_len + c.tail_off;
}

static uint64_t fields_run(void *state, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += fields(state);
    return sum;
}

static uint64_t count_run(void *state, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += count(state);
    return sum;
}

static uint64_t cut_run(void *state, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += cut(state);
    return sum;
}

static uint64_t request_run(void *state, uint64_t n)
{
    const struct body *b = state;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (jscan_check(b->text, b->len, NULL, NULL) != 0)
            continue;
        sum += fields(b) + count(b) + cut(b);
    }
    return sum;
}

/* What the gateway reads of an SGLang answer (server/proxy.c read_counts). */
static uint64_t answer_run(void *state, uint64_t n)
{
    const struct body *b = state;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct jscan_value meta, v;
        int64_t k = 0;
        char version[64];
        if (!jscan_get_lazy(jscan_root(b->text, b->len), "meta_info", &meta))
            continue;
        sum += jscan_get(meta, "completion_tokens", &v) && jscan_int(v, &k) ? (uint64_t)k : 0;
        sum += jscan_get(meta, "cached_tokens", &v) && jscan_int(v, &k) ? (uint64_t)k : 0;
        sum += jscan_get(meta, "weight_version", &v) && jscan_string(v, version, sizeof version);
    }
    return sum;
}

static uint64_t loadb_run(void *state, uint64_t n)
{
    const struct body *b = state;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        json_t *j = json_loadb(b->text, b->len, 0, NULL);
        sum += json_array_size(json_object_get(j, "input_ids"));
        json_decref(j);
    }
    return sum;
}

int main(int argc, char **argv)
{
    const struct bench_figure figures[] = {
        {"jscan_check", INPUT_BODY, BENCH_NS_PER_OP, 500, 1, body_setup, check_run, body_teardown},
        {"jscan_fields", INPUT_BODY, BENCH_NS_PER_OP, 500, 1, body_setup, fields_run,
         body_teardown},
        {"jscan_count", INPUT_BODY, BENCH_NS_PER_OP, 500, 1, body_setup, count_run, body_teardown},
        {"jscan_cut", INPUT_BODY, BENCH_NS_PER_OP, 500, 1, body_setup, cut_run, body_teardown},
        {"jscan_request", INPUT_BODY, BENCH_NS_PER_OP, 200, 1, body_setup, request_run,
         body_teardown},
        {"jscan_check_spaced", INPUT_SPACED, BENCH_NS_PER_OP, 500, 1, spaced_setup, check_run,
         body_teardown},
        {"jscan_request_spaced", INPUT_SPACED, BENCH_NS_PER_OP, 200, 1, spaced_setup, request_run,
         body_teardown},
        {"jscan_answer", INPUT_ANSWER, BENCH_NS_PER_OP, 200, 1, answer_setup, answer_run,
         body_teardown},
        {"jansson_loadb", INPUT_BODY, BENCH_NS_PER_OP, 20, 1, body_setup, loadb_run, body_teardown},
    };
    return bench_main(argc, argv, figures, sizeof figures / sizeof figures[0]);
}
