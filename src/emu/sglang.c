/*
 * SGLang's native HTTP API (sgl-project/sglang, python/sglang/srt/entrypoints/http_server.py
 * and managers/io_struct.py of the 0.5 series; docs/emu.md lists what is emulated and how).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "emu/internal.h"
#include "util/alloc.h"
#include "util/version.h"

static json_t *finish_reason(const struct emu_req *r, const struct engine_done *d)
{
    if (d->end == ENGINE_ABORTED)
        return json_pack("{s:s, s:s, s:n, s:n}", "type", "abort", "message",
                         d->gen_tokens == 0 && !r->admitted_once ? "Abort in waiting queue"
                                                                 : "Aborted",
                         "status_code", "err_type");
    if (d->gen_tokens >= r->g.max_new_tokens)
        return json_pack("{s:s, s:I}", "type", "length", "length", (json_int_t)r->g.max_new_tokens);
    return json_pack("{s:s, s:I}", "type", "stop", "matched",
                     (json_int_t)(r->inst->emu->cfg.vocab - 1)); /* the emulated EOS */
}

/* The answer for tokens [0, to) of r; d final or NULL while streaming. */
static json_t *answer_upto(const struct emu_req *r, int64_t to, const struct engine_done *d)
{
    char id[32];
    if (!r->g.rid)
        snprintf(id, sizeof id, "emu%d-%llx", r->inst->index, (unsigned long long)r->serial);
    char *text = emu_text(r, 0, to);
    json_t *meta =
        json_pack("{s:s, s:o, s:I, s:s, s:I, s:I}", "id", r->g.rid ? r->g.rid : id, "finish_reason",
                  d ? finish_reason(r, d) : json_null(), "prompt_tokens", (json_int_t)r->g.n_ids,
                  "weight_version", r->inst->weight_version, "completion_tokens", (json_int_t)to,
                  "cached_tokens", (json_int_t)r->cached);
    if (d)
        json_object_set_new(meta, "e2e_latency", json_real(d->end_s - d->submit_s));
    if (r->g.logprobs) {
        json_t *lp = json_array();
        for (int64_t i = 0; i < to; i++)
            json_array_append_new(lp, json_pack("[f, i, n]", emu_logprob(r->inst, r->content, i),
                                                (int)emu_token(r->inst, r->content, i)));
        json_object_set_new(meta, "output_token_logprobs", lp);
    }
    json_t *out = json_pack("{s:s, s:o, s:o}", "text", text, "output_ids", emu_ids(r, 0, to),
                            "meta_info", meta);
    free(text);
    return out;
}

json_t *emu_sglang_answer(const struct emu_req *r, const struct engine_done *d)
{
    return answer_upto(r, d->gen_tokens, d);
}

json_t *emu_sglang_stream_chunk(const struct emu_req *r, int64_t to, const struct engine_done *d)
{
    return answer_upto(r, to, d);
}

void emu_sglang_generate(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    size_t len;
    const char *body = net_call_body(c, &len);
    struct emu_gen_request g;
    char err[256];
    if (emu_request_parse(EMU_SGLANG_GENERATE, body, len, in->emu->cfg.vocab, &g, err,
                          sizeof err)) {
        net_reply_error(c, 400, "BadRequestError", "%s", err);
        return;
    }
    emu_generate(in, c, &g);
}

static const char *opt_string(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool opt_flag(const json_t *o, const char *key, bool dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

void emu_sglang_abort(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    json_t *b = emu_body(c);
    if (!b)
        return;
    const char *rid = opt_string(b, "rid");
    if (opt_flag(b, "abort_all", false))
        emu_abort(in, NULL);
    else if (rid && *rid) /* SGLang matches rids by prefix */
        emu_abort(in, rid);
    json_decref(b);
    net_reply_raw(c, 200, "application/json", "", 0);
}

static json_t *status(const char *message)
{
    return json_pack("{s:s, s:s}", "message", message, "status", "ok");
}

void emu_sglang_pause(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    json_t *b = emu_body(c);
    if (!b)
        return;
    const char *mode = opt_string(b, "mode");
    if (!mode || strcmp(mode, "abort") == 0) {
        emu_abort(in, NULL);
        emu_pause(in, false);
    } else if (strcmp(mode, "retract") == 0) {
        emu_pause(in, false);
        emu_retract(in);
    } else if (strcmp(mode, "in_place") == 0) {
        emu_pause(in, true);
    } else {
        json_decref(b);
        net_reply_error(c, 400, "BadRequestError",
                        "mode: expected \"abort\", \"retract\" or \"in_place\"");
        return;
    }
    json_decref(b);
    net_reply_json(c, 200, status("Generation paused successfully."));
}

void emu_sglang_continue(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    emu_resume(in);
    net_reply_json(c, 200, status("Generation continued successfully."));
}

void emu_sglang_flush(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    static const char text[] = "Cache flushed.\nPlease check backend logs for more details. "
                               "(When there are running or waiting requests, the operation "
                               "will not be performed.)\n";
    bool idle = emu_live(in) == 0;
    if (idle)
        emu_flush(in);
    net_reply_raw(c, idle ? 200 : 400, "text/plain", text, sizeof text - 1);
}

/* Starts a weight operation of kind k for call c with body b's options. */
static void start_op(struct emu_instance *in, struct net_call *c, const json_t *b,
                     enum emu_op_kind k)
{
    if (opt_flag(b, "abort_all_requests", false))
        emu_abort(in, NULL);
    struct emu_op *op = xcalloc(1, sizeof *op);
    op->kind = k;
    op->call = c;
    op->sglang = true;
    op->flush = opt_flag(b, "flush_cache", true);
    const char *v = opt_string(b, "weight_version");
    snprintf(op->version, sizeof op->version, "%s", v ? v : "");
    emu_op_start(in, op);
}

/* Answers 400 unless b has every key in keys (NULL-terminated) with the expected JSON type. */
static bool require(struct net_call *c, const json_t *b, const char *const *keys,
                    const json_type *types)
{
    for (int i = 0; keys[i]; i++) {
        const json_t *v = json_object_get(b, keys[i]);
        if (!v || json_typeof(v) != types[i]) {
            net_reply_error(c, 400, "BadRequestError", "%s: missing or of the wrong type", keys[i]);
            return false;
        }
    }
    return true;
}

static void weight_call(struct emu_instance *in, struct net_call *c, enum emu_op_kind k,
                        const char *const *keys, const json_type *types)
{
    json_t *b = emu_body(c);
    if (!b)
        return;
    if (require(c, b, keys, types))
        start_op(in, c, b, k);
    json_decref(b);
}

void emu_sglang_update_disk(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    static const char *const keys[] = {"model_path", NULL};
    static const json_type types[] = {JSON_STRING};
    weight_call(in, c, EMU_OP_UPDATE_DISK, keys, types);
}

void emu_sglang_init_group(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    static const char *const keys[] = {"master_address", "master_port", "rank_offset", "world_size",
                                       NULL};
    static const json_type types[] = {JSON_STRING, JSON_INTEGER, JSON_INTEGER, JSON_INTEGER};
    weight_call(in, c, EMU_OP_GROUP_INIT, keys, types);
}

void emu_sglang_update_distributed(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    static const char *const keys[] = {"names", "dtypes", "shapes", NULL};
    static const json_type types[] = {JSON_ARRAY, JSON_ARRAY, JSON_ARRAY};
    weight_call(in, c, EMU_OP_UPDATE_BROADCAST, keys, types);
}

void emu_sglang_release(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (emu_live(in) > 0) {
        net_reply_error(c, 400, "BadRequestError",
                        "release_memory_occupation should be called only when server is idle.");
        return;
    }
    emu_release(in);
    net_reply_json(c, 200, json_null());
}

void emu_sglang_resume(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!in->released) {
        net_reply_json(c, 200, json_null());
        return;
    }
    struct emu_op *op = xcalloc(1, sizeof *op);
    *op = (struct emu_op){.kind = EMU_OP_WAKE, .call = c, .sglang = true};
    emu_op_start(in, op);
}

void emu_sglang_server_info(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    const struct engine_config *e = &in->cfg.engine;
    char version[64];
    snprintf(version, sizeof version, "libra-emu %s", libra_version_string);
    net_reply_json(c, 200,
                   json_pack("{s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:i, s:I, s:s, s:s, s:s}",
                             "model_path", in->emu->cfg.model, "served_model_name",
                             in->emu->cfg.model, "tp_size", in->cfg.tp, "dp_size", 1, "pp_size", 1,
                             "context_length", (json_int_t)e->max_model_tokens,
                             "max_total_num_tokens", (json_int_t)e->kv_capacity_tokens,
                             "max_running_requests", e->max_seqs, "chunked_prefill_size",
                             (json_int_t)e->max_batched_tokens, "weight_version",
                             in->weight_version, "status", "ready", "version", version));
}

void emu_sglang_model_info(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    net_reply_json(c, 200,
                   json_pack("{s:s, s:s, s:b, s:s}", "model_path", in->emu->cfg.model,
                             "tokenizer_path", in->emu->cfg.model, "is_generation", 1,
                             "weight_version", in->weight_version));
}

void emu_sglang_weight_version(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    net_reply_json(c, 200, json_pack("{s:s}", "weight_version", in->weight_version));
}

void emu_sglang_loads(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    struct engine_stats st;
    emu_sync(in);
    engine_stats(in->eng, &st);
    int held = emu_live(in) - (int)(st.running + st.waiting);
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    double used = (double)st.kv_used_tokens / (double)st.kv_capacity_tokens;
    json_t *load = json_pack(
        "{s:i, s:I, s:I, s:I, s:I, s:i, s:f, s:{s:I, s:i}}", "dp_rank", 0, "num_running_reqs",
        (json_int_t)st.running, "num_waiting_reqs", (json_int_t)st.waiting + held,
        "num_used_tokens", (json_int_t)st.kv_used_tokens, "max_total_num_tokens",
        (json_int_t)st.kv_capacity_tokens, "max_running_requests", in->cfg.engine.max_seqs,
        "token_usage", used, "queues", "waiting", (json_int_t)st.waiting, "paused", held);
    net_reply_json(c, 200,
                   json_pack("{s:s, s:s, s:[o]}", "timestamp", stamp, "version",
                             libra_version_string, "loads", load));
}
