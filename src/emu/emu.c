/*
 * The emulator's top: starting and stopping the instances, the route table of both engines'
 * APIs, and what they share — health, Prometheus metrics, the model list — plus the pieces of
 * answers both API files build (generated text and ids).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/internal.h"
#include "util/alloc.h"
#include "util/version.h"

/* ---- shared pieces of answers --------------------------------------------------------------- */

json_t *emu_body(struct net_call *c)
{
    size_t len;
    const char *text = net_call_body(c, &len);
    if (len == 0)
        return json_object();
    char err[256];
    json_t *v = emu_body_parse(text, len, 0, err, sizeof err);
    if (!v)
        emu_reply_error(c, 400, "%s", err);
    return v;
}

char *emu_text(const struct emu_req *r, int64_t from, int64_t to)
{
    size_t n = to > from ? (size_t)(to - from) : 0;
    char *s = xmalloc(4 * n + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t id = emu_token(r->inst, r->content, from + (int64_t)i);
        for (int k = 0; k < 4; k++, id /= 26)
            s[4 * i + (size_t)k] = (char)('a' + id % 26);
    }
    s[4 * n] = '\0';
    return s;
}

const char *emu_req_id(const struct emu_req *r, char buf[EMU_ID_SIZE])
{
    if (r->g.rid)
        return r->g.rid;
    snprintf(buf, EMU_ID_SIZE, "emu%d-%llx", r->inst->index, (unsigned long long)r->serial);
    return buf;
}

json_t *emu_ids(const struct emu_req *r, int64_t from, int64_t to)
{
    json_t *a = json_array();
    for (int64_t i = from; i < to; i++)
        json_array_append_new(a, json_integer(emu_token(r->inst, r->content, i)));
    return a;
}

json_t *emu_stream_chunk(const struct emu_req *r, int64_t from, int64_t to,
                         const struct engine_done *d)
{
    return r->g.api == EMU_SGLANG_GENERATE ? emu_sglang_stream_chunk(r, to, d)
                                           : emu_vllm_stream_chunk(r, from, to, d);
}

void emu_reply_error(struct net_call *c, int status, const char *fmt, ...)
{
    char msg[512]; /* net_reply_error's own bound on a message */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    net_reply_error(c, status, status == 404 ? "not_found_error" : "invalid_request_error", "%s",
                    msg);
}

void emu_not_found(struct net_call *c)
{
    emu_reply_error(c, 404, "no such path: %s", net_call_path(c));
}

/* ---- endpoints both engines have ------------------------------------------------------------ */

static void health(void *ctx, struct net_call *c)
{
    net_reply_raw(c, 200, "application/json", "", 0);
}

/* vLLM's GET /version: the engine software's version. */
static void version(void *ctx, struct net_call *c)
{
    char v[64];
    snprintf(v, sizeof v, "libra-emu %s", libra_version_string);
    net_reply_json(c, 200, json_pack("{s:s}", "version", v));
}

static void models(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    const char *m = in->emu->cfg.model;
    json_t *model = json_pack("{s:s, s:s, s:I, s:s, s:s, s:I}", "id", m, "object", "model",
                              "created", (json_int_t)time(NULL), "owned_by", "libra-emu", "root", m,
                              "max_model_len", (json_int_t)in->cfg.engine.max_model_tokens);
    net_reply_json(c, 200, json_pack("{s:s, s:[o]}", "object", "list", "data", model));
}

static void metric(char **buf, size_t *len, size_t *cap, const char *name, const char *help,
                   const char *type, double value)
{
    char line[512];
    int n = snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
                     type, name, value);
    while (*len + (size_t)n + 1 > *cap)
        *buf = xrealloc(*buf, *cap = 2 * *cap + 512);
    memcpy(*buf + *len, line, (size_t)n + 1);
    *len += (size_t)n;
}

static void metrics(void *ctx, struct net_call *c)
{
    struct emu_instance *in = ctx;
    struct engine_stats st;
    emu_sync(in);
    engine_stats(in->eng, &st);
    int held = emu_live(in) - (int)(st.running + st.waiting);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    struct {
        const char *name, *help, *type;
        double value;
    } rows[] = {
        {"libra_emu_running_requests", "Sequences in the running batch.", "gauge",
         (double)st.running},
        {"libra_emu_queued_requests", "Requests waiting in the engine's queue or at the gate.",
         "gauge", (double)(st.waiting + held)},
        {"libra_emu_kv_used_tokens", "KV slots held by running sequences.", "gauge",
         (double)st.kv_used_tokens},
        {"libra_emu_kv_capacity_tokens", "KV slots of the instance.", "gauge",
         (double)st.kv_capacity_tokens},
        {"libra_emu_prefix_cache_tokens", "Freed KV kept for prefix reuse.", "gauge",
         (double)st.cache_tokens},
        {"libra_emu_prefix_hit_tokens_total", "Prompt tokens served by the prefix cache.",
         "counter", (double)st.cached_tokens},
        {"libra_emu_prompt_tokens_total", "Prompt tokens of the requests received.", "counter",
         (double)in->prompt_tokens_total},
        {"libra_emu_generation_tokens_total", "Tokens generated.", "counter",
         (double)in->generated_tokens_total},
        {"libra_emu_requests_total", "Generation requests received.", "counter",
         (double)in->requests_total},
        {"libra_emu_preemptions_total", "Sequences preempted for KV.", "counter",
         (double)st.preemptions},
        {"libra_emu_busy_seconds_total", "Emulated seconds spent in iterations.", "counter",
         st.busy_s},
        {"libra_emu_engine_events_total",
         "Changes of the running batch the engine model computed (its cost driver).", "counter",
         (double)st.runs},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        metric(&buf, &len, &cap, rows[i].name, rows[i].help, rows[i].type, rows[i].value);
    net_reply_raw(c, 200, "text/plain; version=0.0.4", buf, len);
    free(buf);
}

const struct net_route emu_routes[] = {
    {"/health", NET_GET, health, NULL},
    {"/health_generate", NET_GET, health, NULL},
    {"/v1/models", NET_GET, models, NULL},
    {"/version", NET_GET, version, NULL},
    {"/metrics", NET_GET, metrics, NULL},
    /* SGLang */
    {"/generate", NET_POST | NET_PUT, emu_sglang_generate, NULL},
    {"/abort_request", NET_POST, emu_sglang_abort, NULL},
    {"/pause_generation", NET_POST, emu_sglang_pause, NULL},
    {"/continue_generation", NET_POST, emu_sglang_continue, NULL},
    {"/flush_cache", NET_GET | NET_POST, emu_sglang_flush, NULL},
    {"/update_weights_from_disk", NET_POST, emu_sglang_update_disk, NULL},
    {"/init_weights_update_group", NET_POST, emu_sglang_init_group, NULL},
    {"/update_weights_from_distributed", NET_POST, emu_sglang_update_distributed, NULL},
    {"/release_memory_occupation", NET_GET | NET_POST, emu_sglang_release, NULL},
    {"/resume_memory_occupation", NET_GET | NET_POST, emu_sglang_resume, NULL},
    {"/get_server_info", NET_GET, emu_sglang_server_info, NULL},
    {"/get_model_info", NET_GET, emu_sglang_model_info, NULL},
    {"/get_weight_version", NET_GET, emu_sglang_weight_version, NULL},
    {"/v1/loads", NET_GET, emu_sglang_loads, NULL},
    /* vLLM */
    {"/v1/completions", NET_POST, emu_vllm_completions, NULL},
    {"/v1/chat/completions", NET_POST, emu_vllm_chat, NULL},
    {"/inference/v1/generate", NET_POST, emu_vllm_generate, NULL},
    {"/pause", NET_POST, emu_vllm_pause, NULL},
    {"/resume", NET_POST, emu_vllm_resume, NULL},
    {"/is_paused", NET_GET, emu_vllm_is_paused, NULL},
    {"/sleep", NET_POST, emu_vllm_sleep, NULL},
    {"/wake_up", NET_POST, emu_vllm_wake_up, NULL},
    {"/is_sleeping", NET_GET, emu_vllm_is_sleeping, NULL},
    {"/reset_prefix_cache", NET_POST, emu_vllm_reset_prefix_cache, NULL},
    {"/init_weight_transfer_engine", NET_POST, emu_vllm_init_transfer, NULL},
    {"/update_weights", NET_POST, emu_vllm_update_weights, NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- life ----------------------------------------------------------------------------------- */

int emu_new(struct emu **out, struct event_base *base, const struct emu_config *c, char *err,
            size_t err_size)
{
    struct emu *e = xcalloc(1, sizeof *e);
    e->base = base;
    e->cfg = *c;
    e->inst_cfg = xmallocarray((size_t)c->n_inst, sizeof *e->inst_cfg);
    memcpy(e->inst_cfg, c->inst, (size_t)c->n_inst * sizeof *e->inst_cfg);
    e->cfg.inst = e->inst_cfg;
    e->inst = xcalloc((size_t)c->n_inst, sizeof *e->inst);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    e->t0_wall_s = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
    for (int i = 0; i < c->n_inst; i++) {
        e->n_inst = i + 1;
        if (emu_instance_init(&e->inst[i], e, i, err, err_size)) {
            emu_free(e);
            *out = NULL;
            return -1;
        }
    }
    *out = e;
    return 0;
}

int emu_port(const struct emu *e, int i)
{
    return e->inst[i].server ? net_server_port(e->inst[i].server) : -1;
}

void emu_free(struct emu *e)
{
    if (!e)
        return;
    for (int i = 0; i < e->n_inst; i++)
        emu_instance_fini(&e->inst[i]);
    free(e->inst);
    free(e->inst_cfg);
    free(e);
}
