/*
 * SGLang's native HTTP API (sgl-project/sglang, python/sglang/srt/entrypoints/http_server.py
 * and managers/io_struct.py of the 0.5 series; docs/emu.md lists what is emulated and how).
 */
#include <stdint.h>
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
    char id[EMU_ID_SIZE];
    char *text = emu_text(r, 0, to);
    json_t *meta =
        json_pack("{s:s, s:o, s:I, s:s, s:I, s:I}", "id", emu_req_id(r, id), "finish_reason",
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
        emu_reply_error(c, 400, "%s", err);
        return;
    }
    emu_generate(in, c, &g);
}

/* A member of a control call's body, typed as SGLang's request class types it (io_struct.py:
 * pydantic refuses another type, so the emulator does too rather than ignore it). */
enum kind { KIND_STRING, KIND_BOOL, KIND_INT, KIND_ARRAY };

struct member {
    const char *key;
    enum kind kind;
    bool required;
    long long min, max; /* KIND_INT: the range the call can work with */
};

static bool of_kind(const json_t *v, const struct member *m)
{
    switch (m->kind) {
    case KIND_STRING:
        return json_is_string(v);
    case KIND_BOOL:
        return json_is_boolean(v);
    case KIND_INT:
        return json_is_integer(v) && json_integer_value(v) >= m->min &&
               json_integer_value(v) <= m->max;
    default:
        return json_is_array(v);
    }
}

/* Whether body b has each member of the table ms (ending with a NULL key) as typed, null
 * counting as absent; else answers 400 naming the first that is not. */
static bool members_ok(struct net_call *c, const json_t *b, const struct member *ms)
{
    for (const struct member *m = ms; m->key; m++) {
        const json_t *v = json_object_get(b, m->key);
        bool absent = !v || json_is_null(v);
        if (absent ? !m->required : of_kind(v, m))
            continue;
        if (m->kind == KIND_INT)
            emu_reply_error(c, 400, "%s: %sexpected an integer in [%lld, %lld]", m->key,
                            absent ? "missing; " : "", m->min, m->max);
        else
            emu_reply_error(c, 400, "%s: %sexpected %s", m->key, absent ? "missing; " : "",
                            m->kind == KIND_STRING ? "a string"
                            : m->kind == KIND_BOOL ? "true or false"
                                                   : "an array");
        return false;
    }
    return true;
}

/* The body of a control call whose members ms are checked: NULL after answering 400. */
static json_t *checked_body(struct net_call *c, const struct member *ms)
{
    json_t *b = emu_body(c);
    if (b && !members_ok(c, b, ms)) {
        json_decref(b);
        return NULL;
    }
    return b;
}

/* A string member checked by members_ok, or NULL when absent. */
static const char *opt_string(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* A boolean member checked by members_ok, or dflt when absent. */
static bool opt_flag(const json_t *o, const char *key, bool dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

void emu_sglang_abort(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    static const struct member ms[] = {
        {.key = "rid", .kind = KIND_STRING}, {.key = "abort_all", .kind = KIND_BOOL}, {0}};
    json_t *b = checked_body(c, ms);
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
    static const struct member ms[] = {{.key = "mode", .kind = KIND_STRING}, {0}};
    json_t *b = checked_body(c, ms);
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
        emu_reply_error(c, 400, "mode: expected \"abort\", \"retract\" or \"in_place\"");
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
    op->version = v ? xstrdup(v) : NULL;
    emu_op_start(in, op);
}

/* SGLang's group_name where a weight-update call leaves it out */
#define DEFAULT_GROUP "weight_update_group"

/* Whether body b's group fits operation k, else answers as SGLang does (400, success false): a
 * set-up needs a name, which it records; a broadcast needs a group set up, for without one
 * SGLang's receive finds no process group. */
static bool group_ok(struct emu_instance *in, struct net_call *c, const json_t *b,
                     enum emu_op_kind k)
{
    const char *name = opt_string(b, "group_name");
    name = name ? name : DEFAULT_GROUP;
    char why[256] = "";
    if (k == EMU_OP_GROUP_INIT && !*name)
        snprintf(why, sizeof why, "Group name cannot be empty");
    else if (k == EMU_OP_GROUP_INIT)
        emu_group_add(in, name);
    else if (k == EMU_OP_UPDATE_BROADCAST && !emu_group_known(in, name))
        snprintf(why, sizeof why,
                 "Failed to update parameter online: no group '%.128s' was set up "
                 "(POST /init_weights_update_group)",
                 name);
    if (why[0])
        net_reply_json(c, 400, json_pack("{s:b, s:s}", "success", 0, "message", why));
    return !why[0];
}

/* Starts weight operation k for call c once its body has the call's members ms and those
 * start_op reads. */
static void weight_call(struct emu_instance *in, struct net_call *c, enum emu_op_kind k,
                        const struct member *ms)
{
    static const struct member common[] = {{.key = "weight_version", .kind = KIND_STRING},
                                           {.key = "abort_all_requests", .kind = KIND_BOOL},
                                           {.key = "flush_cache", .kind = KIND_BOOL},
                                           {0}};
    json_t *b = checked_body(c, ms);
    if (!b)
        return;
    if (members_ok(c, b, common) && group_ok(in, c, b, k))
        start_op(in, c, b, k);
    json_decref(b);
}

void emu_sglang_update_disk(void *ctx, struct net_call *c)
{
    static const struct member ms[] = {{.key = "model_path", .kind = KIND_STRING, .required = true},
                                       {0}};
    weight_call(ctx, c, EMU_OP_UPDATE_DISK, ms);
}

void emu_sglang_init_group(void *ctx, struct net_call *c)
{
    /* what torch.distributed can take: a port, a world of at least one rank */
    static const struct member ms[] = {
        {.key = "master_address", .kind = KIND_STRING, .required = true},
        {.key = "master_port", .kind = KIND_INT, .required = true, .min = 1, .max = 65535},
        {.key = "rank_offset", .kind = KIND_INT, .required = true, .min = 0, .max = INT32_MAX},
        {.key = "world_size", .kind = KIND_INT, .required = true, .min = 1, .max = INT32_MAX},
        {.key = "group_name", .kind = KIND_STRING},
        {.key = "backend", .kind = KIND_STRING},
        {0}};
    weight_call(ctx, c, EMU_OP_GROUP_INIT, ms);
}

void emu_sglang_update_distributed(void *ctx, struct net_call *c)
{
    static const struct member ms[] = {{.key = "names", .kind = KIND_ARRAY, .required = true},
                                       {.key = "dtypes", .kind = KIND_ARRAY, .required = true},
                                       {.key = "shapes", .kind = KIND_ARRAY, .required = true},
                                       {.key = "group_name", .kind = KIND_STRING},
                                       {0}};
    weight_call(ctx, c, EMU_OP_UPDATE_BROADCAST, ms);
}

/* Whether the call's tags (SGLang's memory kinds; the emulator releases them all at once) are
 * an array of the kinds SGLang names; else answers 400. */
static bool tags_ok(struct net_call *c)
{
    static const struct member ms[] = {{.key = "tags", .kind = KIND_ARRAY}, {0}};
    json_t *b = checked_body(c, ms);
    if (!b)
        return false;
    const json_t *tags = json_object_get(b, "tags"), *t;
    size_t i;
    bool ok = true;
    json_array_foreach(tags, i, t)
    {
        const char *s = json_string_value(t);
        ok &= s && (strcmp(s, "kv_cache") == 0 || strcmp(s, "weights") == 0 ||
                    strcmp(s, "cuda_graph") == 0);
    }
    json_decref(b);
    if (!ok)
        emu_reply_error(c, 400,
                        "tags: expected an array of \"kv_cache\", \"weights\" or \"cuda_graph\"");
    return ok;
}

void emu_sglang_release(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!tags_ok(c))
        return;
    if (emu_live(in) > 0) {
        emu_reply_error(c, 400,
                        "release_memory_occupation should be called only when server is idle.");
        return;
    }
    emu_release(in);
    net_reply_json(c, 200, json_null());
}

void emu_sglang_resume(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    if (!tags_ok(c))
        return;
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
