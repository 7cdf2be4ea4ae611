/* Generation request bodies of both engines' APIs (emu/request.h). */
#include "emu/request.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/json.h"
#include "util/rng.h"

#define TOKEN_BYTES 4

/* The id emu_text (emu.c) writes as the four letters at s, base 26 with the least significant
 * digit first; -1 when they are not lowercase letters or spell no id below vocab. */
static int64_t letters_id(const char *s, uint32_t vocab)
{
    int64_t id = 0;
    for (int k = TOKEN_BYTES - 1; k >= 0; k--) {
        if (s[k] < 'a' || s[k] > 'z')
            return -1;
        id = id * 26 + (s[k] - 'a');
    }
    return id < (int64_t)vocab ? id : -1;
}

/* The id of the (up to) four bytes at s: the one emu_text spells so, else a hash. */
static uint32_t word_id(const char *s, size_t len, uint32_t vocab)
{
    int64_t id = len == TOKEN_BYTES ? letters_id(s, vocab) : -1;
    if (id >= 0)
        return (uint32_t)id;
    uint64_t word = 0;
    for (size_t b = 0; b < len; b++)
        word |= (uint64_t)(unsigned char)s[b] << (8 * b);
    return (uint32_t)(rng_mix64(word + 1) % vocab);
}

uint32_t *emu_tokenize(const char *text, size_t len, uint32_t vocab, size_t *n)
{
    size_t count = len ? (len + TOKEN_BYTES - 1) / TOKEN_BYTES : 1;
    uint32_t *ids = xmallocarray(count, sizeof *ids);
    for (size_t i = 0; i < count; i++) {
        size_t at = i * TOKEN_BYTES, left = len > at ? len - at : 0;
        ids[i] = word_id(text + at, left < TOKEN_BYTES ? left : TOKEN_BYTES, vocab);
    }
    *n = count;
    return ids;
}

void emu_request_free(struct emu_gen_request *r)
{
    free(r->ids);
    free(r->rid);
    memset(r, 0, sizeof *r);
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

json_t *emu_body_parse(const char *body, size_t len, size_t flags, char *err, size_t size)
{
    if (len == 0) {
        fail(err, size, "body: expected a JSON object, got an empty body");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, flags, &je);
    if (!root) { /* placed as every file reader places it */
        int line, col;
        ujson_error_at(body, len, &je, &line, &col);
        fail(err, size, "body: invalid JSON at line %d column %d: %s", line, col,
             ujson_error_text(&je));
    } else if (!json_is_object(root)) {
        json_decref(root);
        root = NULL;
        fail(err, size, "body: expected a JSON object");
    }
    return root;
}

/* Reads an optional positive integer member (a count of tokens to generate: none is no turn;
 * SGLang's prompt-only max_new_tokens 0 is not emulated); -1 when absent or null. */
static int opt_count(const json_t *obj, const char *key, const char *label, int64_t *out, char *err,
                     size_t size)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    *out = -1;
    if (!v || json_is_null(v))
        return 0;
    int64_t x;
    if (!json_is_integer(v) || !ujson_as_int64(v, &x) || x < 1 || x > INT32_MAX)
        return fail(err, size, "%s: expected an integer in [1, %d]", label, INT32_MAX);
    *out = x;
    return 0;
}

/* Reads an optional boolean member key of obj, named label in a refusal. */
static int opt_bool(const json_t *obj, const char *key, const char *label, bool *out, char *err,
                    size_t size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return fail(err, size, "%s: expected true or false", label);
    *out = json_is_true(v);
    return 0;
}

/* A request id: a string, as SGLang's rid (GenerateReqInput, AbortReq) and vLLM's request_id. */
static int opt_id(const json_t *obj, const char *key, char **out, char *err, size_t size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) /* SGLang's rid and vLLM's request_id are str (pydantic: no int) */
        return fail(err, size, "%s: expected a string", key);
    *out = xstrdup(json_string_value(v));
    return 0;
}

/* The number of samples, n: absent, null or 1. More changes the answer's shape (n choices) as a
 * batch does, so it is refused the same way. */
static int one_sample(const json_t *obj, const char *label, char *err, size_t size)
{
    const json_t *v = obj ? json_object_get(obj, "n") : NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return fail(err, size, "%s: expected an integer >= 1", label);
    if (json_integer_value(v) > 1)
        return fail(err, size,
                    "%s: more than one sample per request is not emulated; send one request "
                    "per sample",
                    label);
    return 0;
}

/* OpenAI's stream_options: include_usage (honoured: a last chunk with the usage) and
 * continuous_usage_stats (vLLM's usage in every chunk, not emulated). */
static int stream_options(const json_t *root, struct emu_gen_request *r, char *err, size_t size)
{
    const json_t *so = json_object_get(root, "stream_options");
    if (!so || json_is_null(so))
        return 0;
    if (!json_is_object(so))
        return fail(err, size, "stream_options: expected an object");
    bool every = false;
    if (opt_bool(so, "include_usage", "stream_options.include_usage", &r->usage, err, size) ||
        opt_bool(so, "continuous_usage_stats", "stream_options.continuous_usage_stats", &every, err,
                 size))
        return -1;
    if (every)
        return fail(err, size,
                    "stream_options.continuous_usage_stats: usage in every chunk is not "
                    "emulated; use include_usage");
    return 0;
}

/* Whether the array a holds prompts, as a batched request sends them: its first element is one
 * (a string or an array), as the engines tell a batch from one prompt of ids. A later element
 * that is no id is a bad id of one prompt. */
static bool is_batch(const json_t *a)
{
    const json_t *first = json_array_get(a, 0);
    return json_is_string(first) || json_is_array(first);
}

static int token_array(const json_t *a, const char *label, uint32_t vocab,
                       struct emu_gen_request *r, char *err, size_t size)
{
    size_t n = json_array_size(a);
    if (n == 0)
        return fail(err, size, "%s: expected a non-empty array of token ids", label);
    if (is_batch(a))
        return fail(err, size,
                    "%s: a batch of prompts is not emulated; send one prompt per request", label);
    r->ids = xmallocarray(n, sizeof *r->ids);
    r->n_ids = n;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_integer(v))
            return fail(err, size, "%s[%zu]: expected an integer token id, not %s", label, i,
                        ujson_type_name(v));
        if (json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)vocab)
            return fail(err, size, "%s[%zu]: expected a token id in [0, %u)", label, i, vocab);
        r->ids[i] = (uint32_t)json_integer_value(v);
    }
    return 0;
}

static void text_tokens(const char *s, size_t len, uint32_t vocab, struct emu_gen_request *r)
{
    r->ids = emu_tokenize(s, len, vocab, &r->n_ids);
}

/* A prompt: token ids or text (vLLM's prompt and SGLang's input_ids / text). */
static int prompt(const json_t *v, const char *label, uint32_t vocab, struct emu_gen_request *r,
                  char *err, size_t size)
{
    if (json_is_array(v))
        return token_array(v, label, vocab, r, err, size);
    if (json_is_string(v) && json_string_length(v) == 0)
        return fail(err, size, "%s: expected a non-empty prompt", label);
    if (json_is_string(v)) {
        text_tokens(json_string_value(v), json_string_length(v), vocab, r);
        return 0;
    }
    return fail(err, size,
                "%s: expected one prompt (a string or an array of token ids); "
                "batches are not emulated",
                label);
}

/* Appends len bytes of s to text[0..*n) of *cap bytes, with room for a line's end after. */
static void append(char **text, size_t *n, size_t *cap, const char *s, size_t len)
{
    while (*n + len + 1 + TOKEN_BYTES > *cap)
        *text = xrealloc(*text, *cap *= 2);
    memcpy(*text + *n, s, len);
    *n += len;
}

/* Ends a line: a newline, then NUL bytes up to a whole token (they hash as the bytes a short
 * last token lacks), so that the next line starts a token whatever this one held. */
static void end_line(char **text, size_t *n, size_t *cap)
{
    append(text, n, cap, "", 0);
    (*text)[(*n)++] = '\n';
    while (*n % TOKEN_BYTES)
        (*text)[(*n)++] = '\0';
}

static void append_line(char **text, size_t *n, size_t *cap, const char *s, size_t len)
{
    append(text, n, cap, s, len);
    end_line(text, n, cap);
}

/* A message's content onto text as one line: a string, an array of text parts (vLLM joins
 * their texts with newlines), or none (null or absent: an assistant turn that only calls
 * tools). */
static int chat_content(const json_t *content, size_t i, char **text, size_t *n, size_t *cap,
                        char *err, size_t size)
{
    if (json_is_string(content)) {
        append_line(text, n, cap, json_string_value(content), json_string_length(content));
        return 0;
    }
    if (content && !json_is_null(content) && !json_is_array(content))
        return fail(err, size, "messages[%zu].content: expected a string or an array of parts", i);
    for (size_t k = 0; k < json_array_size(content); k++) {
        const json_t *part = json_array_get(content, k);
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *t = json_object_get(part, "text");
        if (!type || strcmp(type, "text") != 0 || !json_is_string(t))
            return fail(err, size,
                        "messages[%zu].content[%zu]: expected a text part {\"type\": \"text\", "
                        "\"text\": ...} (the emulator reads text only)",
                        i, k);
        if (k)
            append(text, n, cap, "\n", 1);
        append(text, n, cap, json_string_value(t), json_string_length(t));
    }
    end_line(text, n, cap);
    return 0;
}

/* Chat messages: each one's role, then its content, a line each, then the role of the answer
 * (the generation prompt a chat template ends with). Every line is whole tokens, so the
 * answer's text, whole tokens too, keeps its ids when the next turn's prompt carries it. */
static int chat_prompt(const json_t *msgs, uint32_t vocab, struct emu_gen_request *r, char *err,
                       size_t size)
{
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return fail(err, size, "messages: expected a non-empty array");
    size_t cap = 64, n = 0;
    char *text = xmalloc(cap);
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        const json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m)) {
            free(text);
            return fail(err, size, "messages[%zu]: expected an object", i);
        }
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) {
            free(text);
            return fail(err, size, "messages[%zu].role: expected a string", i);
        }
        append_line(&text, &n, &cap, json_string_value(role), json_string_length(role));
        if (chat_content(json_object_get(m, "content"), i, &text, &n, &cap, err, size)) {
            free(text);
            return -1;
        }
    }
    append_line(&text, &n, &cap, "assistant", strlen("assistant"));
    text_tokens(text, n, vocab, r);
    free(text);
    return 0;
}

/* A member naming a trajectory, its prompt or its sample: a string or an integer, or absent. */
static int opt_name(const json_t *lo, const char *key, char *err, size_t size)
{
    const json_t *v = json_object_get(lo, key);
    if (!v || json_is_null(v) || json_is_string(v) || json_is_integer(v))
        return 0;
    return fail(err, size, "libra.%s: expected a string or an integer", key);
}

/* libra's request object: only emu.gen_tokens matters to an engine. */
static int libra_object(const json_t *root, struct emu_gen_request *r, char *err, size_t size)
{
    const json_t *lo = json_object_get(root, "libra");
    if (!lo || json_is_null(lo))
        return 0;
    if (!json_is_object(lo))
        return fail(err, size, "libra: expected an object");
    const json_t *emu = json_object_get(lo, "emu");
    if (emu && !json_is_object(emu))
        return fail(err, size, "libra.emu: expected an object");
    if (opt_count(emu, "gen_tokens", "libra.emu.gen_tokens", &r->gen_tokens, err, size) ||
        opt_name(lo, "trajectory", err, size) || opt_name(lo, "prompt", err, size) ||
        opt_name(lo, "sample", err, size))
        return -1;
    const json_t *events = json_object_get(lo, "events");
    if (events && !json_is_array(events))
        return fail(err, size, "libra.events: expected an array");
    return 0;
}

static int sglang(const json_t *root, uint32_t vocab, struct emu_gen_request *r, char *err,
                  size_t size)
{
    const json_t *ids = json_object_get(root, "input_ids"), *text = json_object_get(root, "text");
    if ((ids && !json_is_null(ids)) == (text && !json_is_null(text)))
        return fail(err, size, "input_ids, text: expected exactly one of them");
    if (ids && !json_is_null(ids) ? token_array(ids, "input_ids", vocab, r, err, size)
                                  : prompt(text, "text", vocab, r, err, size))
        return -1;
    const json_t *sp = json_object_get(root, "sampling_params");
    if (sp && !json_is_null(sp) && !json_is_object(sp))
        return fail(err, size, "sampling_params: expected an object");
    if (opt_count(sp, "max_new_tokens", "sampling_params.max_new_tokens", &r->max_new_tokens, err,
                  size) ||
        one_sample(sp, "sampling_params.n", err, size))
        return -1;
    r->token_ids = true;
    return opt_id(root, "rid", &r->rid, err, size) ||
                   opt_bool(root, "return_logprob", "return_logprob", &r->logprobs, err, size)
               ? -1
               : 0;
}

/* Completions' logprobs: how many top log-probabilities per token (vLLM refuses a negative
 * count; the emulator returns the sampled token's only). */
static int completion_logprobs(const json_t *root, struct emu_gen_request *r, char *err,
                               size_t size)
{
    const json_t *lp = json_object_get(root, "logprobs");
    if (!lp || json_is_null(lp))
        return 0;
    if (!json_is_integer(lp) || json_integer_value(lp) < 0)
        return fail(err, size, "logprobs: expected an integer >= 0");
    r->logprobs = true;
    return 0;
}

/* Chat's logprobs, a boolean, and top_logprobs, a count (-1: the whole vocabulary) that vLLM
 * takes only with logprobs true unless it is 0. */
static int chat_logprobs(const json_t *root, struct emu_gen_request *r, char *err, size_t size)
{
    if (opt_bool(root, "logprobs", "logprobs", &r->logprobs, err, size))
        return -1;
    const json_t *top = json_object_get(root, "top_logprobs");
    if (!top || json_is_null(top))
        return 0;
    if (!json_is_integer(top) || json_integer_value(top) < -1)
        return fail(err, size, "top_logprobs: expected an integer >= -1");
    if (json_integer_value(top) != 0 && !r->logprobs)
        return fail(err, size, "top_logprobs: expected 0 or null unless logprobs is true");
    return 0;
}

/* vLLM's cap on generated tokens: chat's max_completion_tokens unless absent or null, else
 * max_tokens (in sampling_params on /inference/v1/generate). */
static int vllm_cap(enum emu_api api, const json_t *root, struct emu_gen_request *r, char *err,
                    size_t size)
{
    const json_t *sp = api == EMU_VLLM_GENERATE ? json_object_get(root, "sampling_params") : root;
    if (sp && !json_is_null(sp) && !json_is_object(sp))
        return fail(err, size, "sampling_params: expected an object");
    const json_t *mct = json_object_get(root, "max_completion_tokens");
    const char *cap =
        api == EMU_VLLM_CHAT && mct && !json_is_null(mct) ? "max_completion_tokens" : "max_tokens";
    return opt_count(sp, cap, cap, &r->max_new_tokens, err, size) ||
                   one_sample(sp, api == EMU_VLLM_GENERATE ? "sampling_params.n" : "n", err, size)
               ? -1
               : 0;
}

static int vllm_logprobs(enum emu_api api, const json_t *root, struct emu_gen_request *r, char *err,
                         size_t size)
{
    if (api == EMU_VLLM_COMPLETIONS)
        return completion_logprobs(root, r, err, size);
    return api == EMU_VLLM_CHAT ? chat_logprobs(root, r, err, size) : 0;
}

static int vllm(enum emu_api api, const json_t *root, uint32_t vocab, struct emu_gen_request *r,
                char *err, size_t size)
{
    int rc = 0;
    if (api == EMU_VLLM_CHAT)
        rc = chat_prompt(json_object_get(root, "messages"), vocab, r, err, size);
    else if (api == EMU_VLLM_GENERATE)
        rc = token_array(json_object_get(root, "token_ids"), "token_ids", vocab, r, err, size);
    else
        rc = prompt(json_object_get(root, "prompt"), "prompt", vocab, r, err, size);
    if (rc || vllm_cap(api, root, r, err, size))
        return -1;
    const json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model))
            return fail(err, size, "model: expected a string");
        snprintf(r->model, sizeof r->model, "%s", json_string_value(model));
    }
    r->token_ids = api == EMU_VLLM_GENERATE;
    return vllm_logprobs(api, root, r, err, size) ||
                   opt_id(root, "request_id", &r->rid, err, size) ||
                   opt_bool(root, "stream", "stream", &r->stream, err, size) ||
                   stream_options(root, r, err, size) ||
                   (api != EMU_VLLM_GENERATE &&
                    opt_bool(root, "return_token_ids", "return_token_ids", &r->token_ids, err,
                             size))
               ? -1
               : 0;
}

int emu_request_parse(enum emu_api api, const char *body, size_t len, uint32_t vocab,
                      struct emu_gen_request *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof *out);
    out->api = api;
    out->max_new_tokens = out->gen_tokens = -1;
    json_t *root = emu_body_parse(body, len, JSON_REJECT_DUPLICATES, err, err_size);
    int rc;
    if (!root)
        rc = -1;
    else if (api == EMU_SGLANG_GENERATE)
        rc = sglang(root, vocab, out, err, err_size) ||
             opt_bool(root, "stream", "stream", &out->stream, err, err_size);
    else
        rc = vllm(api, root, vocab, out, err, err_size);
    if (!rc)
        rc = libra_object(root, out, err, err_size);
    json_decref(root);
    if (rc) {
        emu_request_free(out);
        out->api = api;
        return -1;
    }
    return 0;
}
