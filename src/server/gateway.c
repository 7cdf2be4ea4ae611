/*
 * The gateway's set-up and its fleet: asking every engine what it is, the bucket layout and the
 * routers, the routes, the weight versions that make the gateway's steps, and the periodic
 * tick (engine polls, idle trajectories).
 */
#include "server/gateway.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/internal.h"
#include "util/alloc.h"

void gw_options_default(struct gw_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->parse.prompt_tokens = GW_PROMPT_TOKENS;
    o->idle_s = 7200;
    o->poll_s = 2;
    o->grace_s = 20;
    net_limits_default(&o->limits);
}

double gw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- weight versions and the step ------------------------------------------------------------ */

/* The step a version string belongs to; -1 when the fleet has not seen it. */
static int64_t version_step(const struct gw *g, const char *v)
{
    for (size_t i = g->versions.n; i-- > 0;)
        if (strcmp(g->versions.v[i], v) == 0)
            return g->version_steps.v[i];
    return -1;
}

void gw_engine_version(struct gw *g, struct gw_engine *e, const char *v)
{
    if (strcmp(e->version, v) == 0)
        return;
    snprintf(e->version, sizeof e->version, "%s", v);
    int64_t step = version_step(g, v);
    if (step < 0) { /* new to the fleet: the next step (at start-up, the first) */
        if (g->server) {
            g->step++;
            gw_learn_step(g);
        }
        step = g->step;
        vec_push(&g->versions, xstrdup(v));
        vec_push(&g->version_steps, step);
    }
    e->generation = step;
    gw_persist_engines(g);
}

void gw_registry(const struct gw *g, const struct gw_traj *t, struct sched_instance *inst,
                 struct sched_registry *reg)
{
    for (size_t i = 0; i < g->n_engines; i++) {
        const struct gw_engine *e = &g->engines[i];
        inst[i] = (struct sched_instance){.id = e->id,
                                          .tp = e->tp,
                                          .bucket = e->bucket,
                                          .running = e->in_flight,
                                          .cap = INT_MAX,
                                          .ready = e->up && (!t || e->generation >= t->generation)};
    }
    reg->inst = inst;
    reg->n = g->n_engines;
}

/* ---- routes --------------------------------------------------------------------------------- */

static const struct net_route routes[] = {
    {"/generate", NET_POST | NET_PUT, gw_generate_sglang},
    {"/inference/v1/generate", NET_POST, gw_generate_vllm},
    {"/v1/completions", NET_POST, gw_completions},
    {"/v1/chat/completions", NET_POST, gw_chat},
    {"/libra/v1/trajectories/*", NET_POST, gw_events_call},
    {"/libra/v1/admin/mode", NET_GET | NET_POST, gw_admin_mode},
    {"/libra/v1/status", NET_GET, gw_status},
    {"/libra/v1/state", NET_GET, gw_state},
    {"/metrics", NET_GET, gw_metrics},
    {"/healthz", NET_GET, gw_healthz},
    {"/health", NET_GET, gw_healthz},
    /* control calls a trainer makes on "the engine": every engine gets them */
    {"/v1/models", NET_GET, gw_fan_out},
    {"/get_model_info", NET_GET, gw_fan_out},
    {"/get_server_info", NET_GET, gw_fan_out},
    {"/get_weight_version", NET_GET, gw_fan_out},
    {"/v1/loads", NET_GET, gw_fan_out},
    {"/abort_request", NET_POST, gw_fan_out},
    {"/pause_generation", NET_POST, gw_fan_out},
    {"/continue_generation", NET_POST, gw_fan_out},
    {"/flush_cache", NET_GET | NET_POST, gw_fan_out},
    {"/update_weights_from_disk", NET_POST, gw_fan_out},
    {"/init_weights_update_group", NET_POST, gw_fan_out},
    {"/update_weights_from_distributed", NET_POST, gw_fan_out},
    {"/update_weights_from_tensor", NET_POST, gw_fan_out},
    {"/release_memory_occupation", NET_GET | NET_POST, gw_fan_out},
    {"/resume_memory_occupation", NET_GET | NET_POST, gw_fan_out},
    {"/pause", NET_POST, gw_fan_out},
    {"/resume", NET_POST, gw_fan_out},
    {"/is_paused", NET_GET, gw_fan_out},
    {"/sleep", NET_POST, gw_fan_out},
    {"/wake_up", NET_POST, gw_fan_out},
    {"/is_sleeping", NET_GET, gw_fan_out},
    {"/reset_prefix_cache", NET_POST, gw_fan_out},
    {"/init_weight_transfer_engine", NET_POST, gw_fan_out},
    {"/update_weights", NET_POST, gw_fan_out},
    {NULL, 0, NULL},
};

/* ---- the periodic tick ------------------------------------------------------------------------
 */

static void on_poll(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct gw_engine *e = arg;
    struct gw *g = e->g;
    (void)error;
    e->polling = false;
    e->up = status == 200;
    if (status != 200 || !e->sglang)
        return;
    json_t *doc = json_loadb(body, len, 0, NULL);
    const char *v = json_string_value(json_object_get(doc, "weight_version"));
    if (v)
        gw_engine_version(g, e, v);
    json_decref(doc);
}

void gw_poll_engine(struct gw *g, struct gw_engine *e)
{
    if (e->polling)
        return;
    char url[320];
    snprintf(url, sizeof url, "%s%s", e->url, e->sglang ? "/get_weight_version" : "/health");
    e->polling = true;
    net_client_request(g->client, "GET", url, NULL, NULL, 0, on_poll, e);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct gw *g = arg;
    (void)fd;
    (void)what;
    for (size_t i = 0; i < g->n_engines; i++)
        gw_poll_engine(g, &g->engines[i]);
    gw_traj_expire(g, gw_now());
}

/* ---- start-up ------------------------------------------------------------------------------- */

/* Records why the start failed (the first reason only): rc LIBRA_EINVAL for what the
 * command line or the engines' own answers got wrong, LIBRA_EIO for sockets and files. */
static int fail(struct gw *g, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct gw *g, int rc, const char *fmt, ...)
{
    if (g->start_error[0])
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->start_error, sizeof g->start_error, fmt, ap);
    va_end(ap);
    g->start_rc = rc;
    return -1;
}

/* The layout: the state dir's, else sched.buckets, else the workload's reference; every
 * engine's TP must be in it. */
static int place_engines(struct gw *g)
{
    struct libra_error err = {0};
    const struct libra_config *cfg = g->cfg;
    if (g->persist && g->persist->has_layout) {
        g->layout = g->persist->layout;
    } else if (cfg->sched.buckets[0]) {
        if (spec_bucket_parse(&g->layout, cfg->sched.buckets, "sched.buckets", &err))
            return fail(g, LIBRA_EINVAL, "%s", err.msg);
    } else if (spec_bucket_default(&g->layout, cfg->workload.name, cfg->model.name)) {
        return fail(g, LIBRA_EINVAL,
                    "no reference bucket layout for workload '%s': give --set sched.buckets",
                    cfg->workload.name);
    }
    char text[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&g->layout, text, sizeof text);
    for (size_t i = 0; i < g->n_engines; i++) {
        struct gw_engine *e = &g->engines[i];
        e->bucket = -1;
        for (int b = 0; b < g->layout.n && e->bucket < 0; b++)
            if (spec_bucket_has_tp(&g->layout.bucket[b], e->tp))
                e->bucket = b;
        if (e->bucket < 0)
            return fail(g, LIBRA_EINVAL,
                        "engine %s is TP%d, which no bucket of %s serves (--set "
                        "sched.buckets=...)",
                        e->url, e->tp, text);
    }
    return 0;
}

static int make_routers(struct gw *g)
{
    struct libra_error err = {0};
    const struct libra_config *cfg = g->cfg;
    const struct sched_costs *costs = g->opt.costs.decode_s ? &g->opt.costs : NULL;
    if (sched_router_from_config(&g->router, &cfg->sched, &g->layout, costs, &err) != 0)
        return fail(g, LIBRA_EINVAL, "router: %s", err.msg);
    struct spec_sched_config sticky = cfg->sched;
    sticky.policy = SCHED_LOAD_BALANCE;
    if (sched_router_from_config(&g->sticky, &sticky, &g->layout, NULL, &err) != 0)
        return fail(g, LIBRA_EINVAL, "router: %s", err.msg);
    sched_obs_defaults(&g->obs_config, cfg->workload.name, cfg->model.name);
    return 0;
}

static int open_outputs(struct gw *g)
{
    struct libra_error err = {0};
    const struct libra_config *cfg = g->cfg;
    if (g->opt.capture_path) {
        struct trace_header h = {.version = TRACE_SCHEMA_VERSION,
                                 .workload = (char *)cfg->workload.name,
                                 .model = (char *)cfg->model.name,
                                 .group_size = 0};
        if (trace_writer_open(&g->capture, g->opt.capture_path, &h, &err) != 0)
            return fail(g, LIBRA_EIO, "--capture: %s", err.msg);
    }
    if (g->opt.decisions_path && !(g->decisions = fopen(g->opt.decisions_path, "w")))
        return fail(g, LIBRA_EIO, "--decisions: cannot open '%s': %s", g->opt.decisions_path,
                    strerror(errno));
    return 0;
}

/* The state dir's trees, trajectories and steps, once the routers are made; the registry as
 * it starts is written. */
static int restore(struct gw *g)
{
    char err[256];
    int rc = g->persist ? gw_persist_restore(g, err, sizeof err) : 0;
    gw_persist_engines(g);
    return rc ? fail(g, rc, "%s", err) : 0;
}

static void started(struct gw *g)
{
    for (size_t i = 0; i < g->n_engines; i++)
        if (g->engines[i].tp < 1) {
            fail(g, LIBRA_EINVAL,
                 "engine %s: TP unknown (it does not answer SGLang's /get_server_info): give "
                 "--engine %s,tp=N",
                 g->engines[i].url, g->engines[i].url);
            g->ready(g->ready_arg, g->start_rc, g->start_error);
            return;
        }
    char err[256] = "";
    if (place_engines(g) || make_routers(g) || restore(g) || open_outputs(g) ||
        net_server_new(&g->server, g->base, g->opt.host, g->opt.port, &g->opt.limits, routes, NULL,
                       g, err, sizeof err) != 0) {
        if (err[0])
            fail(g, LIBRA_EIO, "cannot listen on %s:%d: %s", g->opt.host, g->opt.port, err);
        g->ready(g->ready_arg, g->start_rc, g->start_error);
        return;
    }
    g->tick = event_new(g->base, -1, EV_PERSIST, on_tick, g);
    struct timeval tv = {(time_t)g->opt.poll_s,
                         (suseconds_t)((g->opt.poll_s - (double)(time_t)g->opt.poll_s) * 1e6)};
    event_add(g->tick, &tv);
    g->ready(g->ready_arg, 0, NULL);
}

/* What an engine said about itself at start-up (SGLang's /get_server_info; others 404). */
static void on_info(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct gw_engine *e = arg;
    struct gw *g = e->g;
    if (status == 0 && !e->restored)
        fail(g, LIBRA_EIO, "engine %s: %s", e->url, error ? error : "no answer");
    e->up = status != 0;
    if (status == 200) {
        json_t *doc = json_loadb(body, len, 0, NULL);
        json_int_t tp = json_integer_value(json_object_get(doc, "tp_size"));
        const char *v = json_string_value(json_object_get(doc, "weight_version"));
        e->sglang = true;
        if (tp >= 1 && e->tp >= 1 && tp != e->tp && !e->restored)
            fail(g, LIBRA_EINVAL, "engine %s says it is TP%lld, not TP%d as --engine says", e->url,
                 (long long)tp, e->tp);
        if (tp >= 1)
            e->tp = (int)tp;
        gw_engine_version(g, e, v ? v : "");
        json_decref(doc);
    }
    if (--g->asking > 0)
        return;
    if (g->start_error[0])
        g->ready(g->ready_arg, g->start_rc, g->start_error);
    else
        started(g);
}

/* Adds the engine spec names, or, when the state dir has it already, makes it the command
 * line's (its TP when given, else asked again of SGLang). */
static int add_engine(struct gw *g, const struct gw_engine_spec *spec, char *err, size_t err_size)
{
    for (size_t i = 0; i < g->n_engines; i++) {
        struct gw_engine *e = &g->engines[i];
        if (strcmp(e->url, spec->url) == 0) {
            e->restored = false;
            e->tp = spec->tp ? spec->tp : e->sglang ? 0 : e->tp;
            return 0;
        }
    }
    if (g->n_engines == GW_ENGINES_MAX) {
        snprintf(err, err_size, "more than %d engines (the state dir's and --engine's)",
                 GW_ENGINES_MAX);
        return LIBRA_EINVAL;
    }
    struct gw_engine *e = &g->engines[g->n_engines];
    e->id = (int64_t)g->n_engines++;
    snprintf(e->url, sizeof e->url, "%s", spec->url);
    e->tp = spec->tp;
    return 0;
}

/* The state dir's engines, then the command line's; each is then asked what it is. */
static int register_engines(struct gw *g, char *err, size_t err_size)
{
    int rc = g->opt.state_dir ? gw_persist_open(g, err, err_size) : 0;
    for (size_t i = 0; rc == 0 && i < g->opt.n_engines; i++)
        rc = add_engine(g, &g->opt.engines[i], err, err_size);
    if (rc == 0 && g->n_engines == 0) {
        snprintf(err, err_size,
                 "give 1 to %d engines (--engine URL[,tp=N]); the state dir has none",
                 GW_ENGINES_MAX);
        rc = LIBRA_EINVAL;
    }
    if (rc == 0 && !(g->client = net_client_new(g->base))) {
        snprintf(err, err_size, "cannot make a curl multi handle");
        rc = LIBRA_EIO;
    }
    return rc;
}

int gw_new(struct gw **out, struct event_base *base, const struct libra_config *cfg,
           const struct gw_options *o, gw_ready_fn ready, void *arg, char *err, size_t err_size)
{
    *out = NULL;
    if ((o->n_engines == 0 && !o->state_dir) || o->n_engines > GW_ENGINES_MAX) {
        snprintf(err, err_size, "give 1 to %d engines (--engine URL[,tp=N])", GW_ENGINES_MAX);
        return LIBRA_EINVAL;
    }
    if (o->parse.prompt_tokens < 1 || !(o->idle_s > 0) || !(o->poll_s > 0) || !(o->grace_s >= 0)) {
        snprintf(err, err_size,
                 "prompt tokens, idle and poll times must be positive, the grace not negative");
        return LIBRA_EINVAL;
    }
    struct gw *g = xcalloc(1, sizeof *g);
    g->base = base;
    g->cfg = cfg;
    g->opt = *o;
    g->ready = ready;
    g->ready_arg = arg;
    g->shadow = o->shadow;
    g->first_step_s = -1;
    map_init(&g->trajs);
    int rc = register_engines(g, err, err_size);
    if (rc != 0) {
        char ignored[8];
        gw_free(g, ignored, sizeof ignored);
        return rc;
    }
    g->asking = (int)g->n_engines;
    for (size_t i = 0; i < g->n_engines; i++) {
        struct gw_engine *e = &g->engines[i];
        e->g = g;
        char url[320];
        snprintf(url, sizeof url, "%s/get_server_info", e->url);
        net_client_request(g->client, "GET", url, NULL, NULL, 0, on_info, e);
    }
    *out = g;
    return 0;
}

char *gw_ready_line(const struct gw *g)
{
    json_t *engines = json_array();
    for (size_t i = 0; i < g->n_engines; i++) {
        const struct gw_engine *e = &g->engines[i];
        json_array_append_new(engines, json_pack("{s:I, s:s, s:i, s:i}", "id", (json_int_t)e->id,
                                                 "url", e->url, "tp", e->tp, "bucket", e->bucket));
    }
    char url[128];
    int port = net_server_port(g->server);
    snprintf(url, sizeof url, "http://%s:%d", g->opt.host, port);
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:o}", "url", url, "port", port, "mode",
                          g->shadow ? "shadow" : sched_policy_name(g->cfg->sched.policy), "policy",
                          sched_policy_name(g->cfg->sched.policy), "engines", engines);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

int gw_free(struct gw *g, char *err, size_t err_size)
{
    if (!g)
        return 0;
    int rc = 0;
    net_server_free(g->server); /* cancels the calls held: their turns end */
    if (g->tick)
        event_free(g->tick);
    gw_stop_free(g);
    if (gw_persist_close(g, err, err_size) != 0)
        rc = -1;
    gw_traj_free_all(g);
    net_client_free(g->client); /* no answer comes back after this */
    gw_fan_free_all(g);
    map_free(&g->trajs);
    sched_router_free(g->router);
    sched_router_free(g->sticky);
    for (size_t i = 0; i < g->versions.n; i++)
        free(g->versions.v[i]);
    vec_free(&g->versions);
    vec_free(&g->version_steps);
    struct libra_error e = {0};
    if (g->capture_error[0] && rc == 0) {
        snprintf(err, err_size, "--capture: stopped early: %s", g->capture_error);
        rc = -1;
    } else if (g->capture && trace_writer_close(g->capture, &e) != 0 && rc == 0) {
        snprintf(err, err_size, "--capture: %s", e.msg);
        rc = -1;
    }
    if (g->decisions && fclose(g->decisions) != 0 && rc == 0) {
        snprintf(err, err_size, "--decisions: %s", strerror(errno));
        rc = -1;
    }
    free(g);
    return rc;
}
