/*
 * vLLM's OpenAI-compatible server and its RL endpoints (vllm-project/vllm,
 * vllm/entrypoints/serve/ of the 0.16 series: completions, chat, the tokens-in/tokens-out
 * generate, and the development-mode endpoints — pause, sleep, cache reset, weight transfer —
 * which answer 404 unless the emulator runs with --dev-mode, as vLLM gates them behind
 * VLLM_SERVER_DEV_MODE=1). docs/emu.md lists what is emulated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "emu/internal.h"
#include "util/alloc.h"

static const char *finish_reason(const struct emu_req *r, const struct engine_done *d)
{
    if (d->end == ENGINE_ABORTED)
        return "abort";
    return d->gen_tokens >= r->g.max_new_tokens ? "length" : "stop";
}

static json_t *usage(const struct emu_req *r, int64_t gen)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)r->g.n_ids,
                     "total_tokens", (json_int_t)r->g.n_ids + gen, "completion_tokens",
                     (json_int_t)gen, "prompt_tokens_details", "cached_tokens",
                     (json_int_t)r->cached);
}

static json_t *prompt_ids(const struct emu_req *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->g.n_ids; i++)
        json_array_append_new(a, json_integer(r->g.ids[i]));
    return a;
}

/* Completions' logprobs object for tokens [from, to). */
static json_t *logprobs(const struct emu_req *r, int64_t from, int64_t to)
{
    json_t *tokens = json_array(), *lps = json_array(), *offsets = json_array();
    for (int64_t i = from; i < to; i++) {
        char *t = emu_text(r, i, i + 1);
        json_array_append_new(tokens, json_string(t));
        free(t);
        json_array_append_new(lps, json_real(emu_logprob(r->inst, r->content, i)));
        json_array_append_new(offsets, json_integer(4 * (i - from)));
    }
    return json_pack("{s:o, s:o, s:n, s:o}", "tokens", tokens, "token_logprobs", lps,
                     "top_logprobs", "text_offset", offsets);
}

static json_t *id_of(const struct emu_req *r, const char *prefix)
{
    char buf[EMU_ID_SIZE], id[160];
    snprintf(id, sizeof id, "%s%s", prefix, emu_req_id(r, buf));
    return json_string(id);
}

/* One choice with tokens [from, to); d final or NULL. */
static json_t *choice(const struct emu_req *r, int64_t from, int64_t to,
                      const struct engine_done *d, bool chunk)
{
    json_t *fr = d ? json_string(finish_reason(r, d)) : json_null();
    if (r->g.api == EMU_VLLM_GENERATE)
        return json_pack("{s:i, s:n, s:o, s:o}", "index", 0, "logprobs", "finish_reason", fr,
                         "token_ids", emu_ids(r, from, to));
    char *text = emu_text(r, from, to);
    json_t *c;
    if (r->g.api == EMU_VLLM_CHAT) {
        c = json_pack("{s:i, s:{s:s, s:s}, s:n, s:o}", "index", 0, chunk ? "delta" : "message",
                      "role", "assistant", "content", text, "logprobs", "finish_reason", fr);
    } else {
        c = json_pack(
            "{s:i, s:s, s:o, s:o, s:n, s:o, s:n, s:o}", "index", 0, "text", text, "logprobs",
            r->g.logprobs ? logprobs(r, from, to) : json_null(), "finish_reason", fr, "stop_reason",
            "token_ids", r->g.token_ids ? emu_ids(r, from, to) : json_null(), "prompt_logprobs",
            "prompt_token_ids", r->g.token_ids && from == 0 ? prompt_ids(r) : json_null());
    }
    free(text);
    return c;
}

static json_t *envelope(const struct emu_req *r, json_t *choice_v, bool chunk)
{
    bool chat = r->g.api == EMU_VLLM_CHAT;
    const char *object =
        chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    json_t *choices = json_array();
    if (choice_v) /* none: the usage chunk */
        json_array_append_new(choices, choice_v);
    return json_pack("{s:o, s:s, s:I, s:s, s:o}", "id", id_of(r, chat ? "chatcmpl-" : "cmpl-"),
                     "object", object, "created", (json_int_t)time(NULL), "model",
                     r->inst->emu->cfg.model, "choices", choices);
}

json_t *emu_vllm_answer(const struct emu_req *r, const struct engine_done *d)
{
    json_t *ch = choice(r, 0, d->gen_tokens, d, false);
    if (r->g.api == EMU_VLLM_GENERATE)
        return json_pack("{s:o, s:[o], s:n, s:n}", "request_id", id_of(r, ""), "choices", ch,
                         "prompt_logprobs", "kv_transfer_params");
    json_t *out = envelope(r, ch, false);
    json_object_set_new(out, "usage", usage(r, d->gen_tokens));
    return out;
}

json_t *emu_vllm_stream_chunk(const struct emu_req *r, int64_t from, int64_t to,
                              const struct engine_done *d)
{
    return envelope(r, choice(r, from, to, d, true), true);
}

json_t *emu_vllm_usage_chunk(const struct emu_req *r, const struct engine_done *d)
{
    if (!r->g.usage)
        return NULL;
    json_t *out = envelope(r, NULL, true);
    json_object_set_new(out, "usage", usage(r, d->gen_tokens));
    return out;
}

/* ---- generation ----------------------------------------------------------------------------- */

static void generate(struct emu_instance *in, struct net_call *c, enum emu_api api)
{
    size_t len;
    const char *body = net_call_body(c, &len);
    struct emu_gen_request g;
    char err[256];
    if (emu_request_parse(api, body, len, in->emu->cfg.vocab, &g, err, sizeof err)) {
        emu_reply_error(c, 400, "%s", err);
        return;
    }
    if (g.model[0] && strcmp(g.model, in->emu->cfg.model) != 0) {
        emu_reply_error(c, 404, "The model `%s` does not exist.", g.model);
        emu_request_free(&g);
        return;
    }
    if (g.stream && api == EMU_VLLM_GENERATE) {
        emu_reply_error(c, 400, "stream: streaming is not emulated on /inference/v1/generate");
        emu_request_free(&g);
        return;
    }
    emu_generate(in, c, &g);
}

void emu_vllm_completions(void *ctx, struct net_call *c)
{
    generate(ctx, c, EMU_VLLM_COMPLETIONS);
}

void emu_vllm_chat(void *ctx, struct net_call *c)
{
    generate(ctx, c, EMU_VLLM_CHAT);
}

void emu_vllm_generate(void *ctx, struct net_call *c)
{
    generate(ctx, c, EMU_VLLM_GENERATE);
}

/* ---- development-mode endpoints ------------------------------------------------------------- */

/* True when the call may go on: the development-mode endpoints are exposed (else 404). */
static bool dev_call(struct emu_instance *in, struct net_call *c)
{
    if (in->emu->cfg.dev_mode)
        return true;
    emu_not_found(c);
    return false;
}

static void empty_ok(struct net_call *c)
{
    net_reply_raw(c, 200, "application/json", "", 0);
}

/* Whether v is one of words (NULL-ended), in any case. */
static bool is_word(const char *v, const char *const *words)
{
    for (; *words; words++)
        if (strcasecmp(v, *words) == 0)
            return true;
    return false;
}

/* A boolean query parameter, false when absent, read as vLLM's FastAPI reads one (pydantic's
 * words in any case); any other value is answered 400 naming it, and -1 returned, rather than
 * taken as false. */
static int query_bool(struct net_call *c, const char *key, bool *out)
{
    static const char *const yes[] = {"1", "t", "true", "y", "yes", "on", NULL};
    static const char *const no[] = {"0", "f", "false", "n", "no", "off", NULL};
    const char *v = net_call_query(c, key);
    *out = v && is_word(v, yes);
    if (!v || *out || is_word(v, no))
        return 0;
    emu_reply_error(c, 400, "%s: expected true or false", key);
    return -1;
}

void emu_vllm_pause(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!dev_call(in, c))
        return;
    const char *mode = net_call_query(c, "mode");
    bool clear;
    if (query_bool(c, "clear_cache", &clear))
        return;
    if (mode && strcmp(mode, "wait") == 0) {
        struct emu_op *op = xcalloc(1, sizeof *op);
        *op = (struct emu_op){.kind = EMU_OP_PAUSE_WAIT, .call = c, .flush = clear};
        emu_op_start(in, op);
        return;
    }
    if (!mode || strcmp(mode, "abort") == 0) {
        emu_abort(in, NULL);
        emu_pause(in, false);
    } else if (strcmp(mode, "keep") == 0) {
        emu_pause(in, true);
    } else {
        emu_reply_error(c, 400, "mode: expected abort, wait or keep");
        return;
    }
    if (clear)
        emu_flush(in);
    net_reply_json(c, 200, json_pack("{s:s}", "status", "paused"));
}

void emu_vllm_resume(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!dev_call(in, c))
        return;
    emu_resume(in);
    net_reply_json(c, 200, json_pack("{s:s}", "status", "resumed"));
}

void emu_vllm_is_paused(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (dev_call(in, c))
        net_reply_json(c, 200, json_pack("{s:b}", "is_paused", in->paused));
}

void emu_vllm_sleep(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!dev_call(in, c))
        return;
    const char *mode = net_call_query(c, "mode"), *level = net_call_query(c, "level");
    if (level && strcmp(level, "1") != 0 && strcmp(level, "2") != 0) {
        emu_reply_error(c, 400, "level: expected 1 or 2");
        return;
    }
    if (mode && strcmp(mode, "abort") != 0) {
        emu_reply_error(c, 400, "mode: expected abort (the mode emulated)");
        return;
    }
    emu_abort(in, NULL);
    emu_release(in);
    empty_ok(c);
}

void emu_vllm_wake_up(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!dev_call(in, c))
        return;
    if (!in->released) {
        empty_ok(c);
        return;
    }
    struct emu_op *op = xcalloc(1, sizeof *op);
    *op = (struct emu_op){.kind = EMU_OP_WAKE, .call = c};
    emu_op_start(in, op);
}

void emu_vllm_is_sleeping(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (dev_call(in, c))
        net_reply_json(c, 200, json_pack("{s:b}", "is_sleeping", in->released));
}

void emu_vllm_reset_prefix_cache(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!dev_call(in, c))
        return;
    emu_flush(in);
    empty_ok(c);
}

/* A weight-transfer call: its body must hold the object member key. */
static void transfer(struct emu_instance *in, struct net_call *c, const char *key,
                     enum emu_op_kind kind)
{
    json_t *b = emu_body(c);
    if (!b)
        return;
    bool ok = json_is_object(json_object_get(b, key));
    json_decref(b);
    if (!ok) {
        emu_reply_error(c, 400, "%s: expected an object", key);
        return;
    }
    struct emu_op *op = xcalloc(1, sizeof *op);
    *op = (struct emu_op){.kind = kind, .call = c, .flush = kind == EMU_OP_UPDATE_BROADCAST};
    emu_op_start(in, op);
}

void emu_vllm_init_transfer(void *ctx, struct net_call *c)
{
    if (dev_call(ctx, c))
        transfer(ctx, c, "init_info", EMU_OP_GROUP_INIT);
}

void emu_vllm_update_weights(void *ctx, struct net_call *c)
{
    if (dev_call(ctx, c))
        transfer(ctx, c, "update_info", EMU_OP_UPDATE_BROADCAST);
}
