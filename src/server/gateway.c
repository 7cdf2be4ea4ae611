/*
 * The gateway's set-up and its fleet: asking every engine what it is, the bucket layout and the
 * routers, the routes, the weight versions that make the gateway's steps, and the periodic
 * tick (engine polls, idle trajectories).
 */
#include "server/gateway.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/internal.h"
#include "spec/preset.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

void gw_options_default(struct gw_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->parse.prompt_tokens = GW_PROMPT_TOKENS;
    o->idle_s = 7200;
    o->poll_s = 2;
    o->grace_s = 20;
    o->pool_timeout_s = 180; /* libra-spec.md §3's join timeout */
    o->pool_core_replicas = 1;
    o->max_answer_bytes = INT64_C(1) << 30;
    net_limits_default(&o->limits);
    o->limits.single_fields = "x-session-id,x-smg-routing-key"; /* each names one trajectory */
}

double gw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- weight versions and the step ----------------------------------------------------------- */

/* The step a version string belongs to; -1 when the fleet has not seen it. */
static int64_t version_step(const struct gw *g, const char *v)
{
    for (size_t i = g->versions.n; i-- > 0;)
        if (strcmp(g->versions.v[i], v) == 0)
            return g->version_steps.v[i];
    return -1;
}

void gw_version_key(char out[GW_VERSION_MAX], const char *v, size_t len)
{
    if (len < GW_VERSION_MAX) {
        memcpy(out, v, len);
        out[len] = '\0';
        return;
    }
    /* too long to keep whole: a prefix to read (cut at a character) and the whole's hash, so
     * that two versions sharing the prefix (checkpoint paths) stay two steps */
    size_t keep = GW_VERSION_MAX - 18;
    while (keep > 0 && ((unsigned char)v[keep] & 0xC0) == 0x80)
        keep--;
    snprintf(out, GW_VERSION_MAX, "%.*s#%016llx", (int)keep, v,
             (unsigned long long)gw_hash(GW_HASH_SEED, v, len));
}

/* Whether an engine saying version v says what it said before the gateway numbered its
 * update: the number the gateway gave then stands. */
static bool says_before_numbered(const struct gw_engine *e, const char *v)
{
    return e->reported[0] && strcmp(e->reported, v) == 0;
}

void gw_engine_version(struct gw *g, struct gw_engine *e, const char *text)
{
    char v[GW_VERSION_MAX];
    gw_version_key(v, text, strlen(text));
    if (strcmp(e->version, v) == 0 || says_before_numbered(e, v))
        return;
    e->reported[0] = '\0';
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

void gw_engine_numbered(struct gw *g, struct gw_engine *e, const char *number)
{
    char before[GW_VERSION_MAX];
    snprintf(before, sizeof before, "%s", e->reported[0] ? e->reported : e->version);
    gw_engine_version(g, e, number);
    snprintf(e->reported, sizeof e->reported, "%s", before);
}

/* e registered at start is the engine of the state dir's row stored: the row's version stands
 * when the engine reports none (vLLM) or what it reported before the update the gateway
 * numbered, so no acknowledged step is lost (docs/serve.md "Steps and learning"). */
static void keep_version(struct gw_engine *e, const struct gw_engine *stored)
{
    if (e->kind == GW_KIND_SGLANG && !says_before_numbered(stored, e->version))
        return; /* it reports its own: that is taken */
    snprintf(e->version, sizeof e->version, "%s", stored->version);
    snprintf(e->reported, sizeof e->reported, "%s", stored->reported);
    e->generation = stored->generation;
}

/* ---- routes --------------------------------------------------------------------------------- */

/* Another method than POST on /libra/v1/engines/...: the route takes every method, or its '*'
 * would answer 405 for paths that are no route; those (no {id}/{action}) are 404 as any unknown
 * path, and an action is 405 as a route taking POST alone. */
static void engine_path_not_posted(struct gw *g, struct net_call *c)
{
    g->errors_no_route++;
    const char *path = net_call_path(c);
    int64_t id;
    char action[GW_ACTION_MAX], err[160];
    if (gw_engine_action_parse(path + strlen("/libra/v1/engines/"), &id, action, err, sizeof err) !=
        0) {
        net_reply_error(c, 404, "not_found_error", "no such path: %s", path);
        return;
    }
    net_call_add_header(c, "Allow", "POST");
    net_reply_error(c, 405, "invalid_request_error", "method not allowed on %s", path);
}

/* POST /libra/v1/engines/{id}/{action} takes no body (docs/serve.md): one sent is refused, once
 * the caller is known to be an admin, rather than ignored. */
static void engine_action(void *ctx, struct net_call *c)
{
    if (net_call_method(c) != NET_POST) {
        engine_path_not_posted(ctx, c);
        return;
    }
    size_t len;
    net_call_body(c, &len);
    if (len == 0)
        gw_engine_action(ctx, c);
    else if (gw_admin(ctx, c))
        net_reply_error(c, 400, "invalid_request_error",
                        "body: an engine action takes none (%zu bytes sent)", len);
}

/* libra's own routes and the worker calls name the query parameters they read
 * (net_route.query); the routes of an engine's API take any, as the engines do. */
static const struct net_route routes[] = {
    {"/generate", NET_POST | NET_PUT, gw_generate_sglang, NULL},
    {"/inference/v1/generate", NET_POST, gw_generate_vllm, NULL},
    {"/v1/completions", NET_POST, gw_completions, NULL},
    {"/v1/chat/completions", NET_POST, gw_chat, NULL},
    {"/libra/v1/trajectories/*", NET_POST, gw_events_call, ""},
    {"/libra/v1/admin/mode", NET_GET | NET_POST, gw_admin_mode, ""},
    {"/libra/v1/status", NET_GET, gw_status, ""},
    {"/libra/v1/state", NET_GET, gw_state, "trees,limit"},
    {"/libra/v1/engines", NET_GET, gw_engines, ""},
    {"/libra/v1/engines/*", NET_GET | NET_POST | NET_PUT | NET_DELETE, engine_action, ""},
    {"/libra/v1/plan", NET_GET, gw_plan_call, ""},
    {"/libra/v1/buckets", NET_POST, gw_buckets_call, ""},
    {"/libra/v1/pool", NET_GET, gw_pool_call, "after,wait_s"},
    {"/libra/v1/pool/*", NET_POST, gw_pool_post, ""},
    {"/metrics", NET_GET, gw_metrics, ""},
    {"/healthz", NET_GET, gw_healthz, ""},
    {"/health", NET_GET, gw_healthz, NULL},
    /* SGLang's model gateway: worker management */
    {"/add_worker", NET_POST, gw_add_worker, "url,tp,worker_type"},
    {"/remove_worker", NET_POST, gw_remove_worker, "url"},
    {"/list_workers", NET_GET, gw_list_workers, ""},
    {"/workers", NET_GET | NET_POST, gw_workers, ""},
    {"/workers/*", NET_GET | NET_DELETE, gw_worker, ""},
    /* control calls a trainer makes on "the engine": reads go to one, the rest to every one */
    {"/v1/models", NET_GET, gw_fan_out, NULL},
    {"/get_model_info", NET_GET, gw_fan_out, NULL},
    {"/get_server_info", NET_GET, gw_fan_out, NULL},
    {"/get_weight_version", NET_GET, gw_fan_out, NULL},
    {"/tokenize", NET_POST, gw_fan_out, NULL},
    {"/detokenize", NET_POST, gw_fan_out, NULL},
    {"/v1/loads", NET_GET, gw_fan_out, NULL},
    {"/abort_request", NET_POST, gw_fan_out, NULL},
    {"/pause_generation", NET_POST, gw_fan_out, NULL},
    {"/continue_generation", NET_POST, gw_fan_out, NULL},
    {"/flush_cache", NET_GET | NET_POST, gw_fan_out, NULL},
    {"/update_weights_from_disk", NET_POST, gw_fan_out, NULL},
    {"/update_weights_from_distributed", NET_POST, gw_fan_out, NULL},
    {"/update_weights_from_tensor", NET_POST, gw_fan_out, NULL},
    {"/release_memory_occupation", NET_GET | NET_POST, gw_fan_out, NULL},
    {"/resume_memory_occupation", NET_GET | NET_POST, gw_fan_out, NULL},
    {"/pause", NET_POST, gw_fan_out, NULL},
    {"/resume", NET_POST, gw_fan_out, NULL},
    {"/is_paused", NET_GET, gw_fan_out, NULL},
    {"/sleep", NET_POST, gw_fan_out, NULL},
    {"/wake_up", NET_POST, gw_fan_out, NULL},
    {"/is_sleeping", NET_GET, gw_fan_out, NULL},
    {"/reset_prefix_cache", NET_POST, gw_fan_out, NULL},
    {"/update_weights", NET_POST, gw_fan_out, NULL},
    /* each engine takes its own rank offset: the trainer calls them itself */
    {"/init_weights_update_group", NET_POST, gw_per_engine, NULL},
    {"/init_weight_transfer_engine", NET_POST, gw_per_engine, NULL},
    {NULL, 0, NULL, NULL},
};

/* ---- the periodic tick ---------------------------------------------------------------------- */

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct gw *g = arg;
    (void)fd;
    (void)what;
    gw_engines_tick(g);
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

/* The built-in models workload has a reference layout for, written "a, b" into b (nothing:
 * none). The model presets are the names a user can give --model. */
static void reference_models(const char *workload, struct strbuf *b)
{
    struct spec_presets p = {0};
    struct spec_bucket_layout l;
    if (spec_presets_init(&p, NULL) == 0)
        for (size_t i = 0; i < p.n_models; i++)
            if (spec_bucket_default(&l, workload, p.models[i].name) == 0)
                strbuf_printf(b, "%s%s", b->len ? ", " : "", p.models[i].name);
    spec_presets_free(&p);
}

/* The layout: the state dir's (what the gateway ran with, re-bucketing included), else
 * --plan's (over sched.buckets), else sched.buckets, else the reference of the workload on the
 * model. Returns 0, or -1 with err. */
static int make_layout(struct gw *g, char *err, size_t err_size)
{
    struct libra_error e = {0};
    const struct libra_config *cfg = g->cfg;
    if (g->persist && g->persist->has_layout) {
        g->layout = g->persist->layout;
        return 0;
    }
    if (gw_plan_layout(g, &g->layout))
        return 0;
    if (cfg->sched.buckets[0]) {
        if (spec_bucket_parse(&g->layout, cfg->sched.buckets, "sched.buckets", &e) == 0)
            return 0;
        snprintf(err, err_size, "%s", e.msg);
        return -1;
    }
    if (spec_bucket_default(&g->layout, cfg->workload.name, cfg->model.name) == 0)
        return 0;
    struct strbuf models = {0};
    reference_models(cfg->workload.name, &models);
    snprintf(err, err_size,
             "no reference bucket layout for workload '%s' on model '%s' (it has %s%s): give "
             "the layout, --set sched.buckets=tp1:4000,tp2:12000,tp4:30000 say, or %s with one "
             "(docs/routing.md \"Bucket layouts\")",
             cfg->workload.name, cfg->model.name, models.len ? "one for " : "none for any model",
             models.len ? models.data : "", models.len ? "a --model" : "a --workload and --model");
    strbuf_free(&models);
    return -1;
}

static int make_routers(struct gw *g, char *err, size_t err_size)
{
    struct libra_error e = {0};
    const struct libra_config *cfg = g->cfg;
    const struct sched_costs *costs = g->opt.costs.decode_s ? &g->opt.costs : NULL;
    struct spec_sched_config sticky = cfg->sched;
    sticky.policy = SCHED_LOAD_BALANCE;
    if (sched_router_from_config(&g->router, &cfg->sched, &g->layout, costs, &e) != 0 ||
        sched_router_from_config(&g->sticky, &sticky, &g->layout, NULL, &e) != 0) {
        snprintf(err, err_size, "router: %s", e.msg);
        return -1;
    }
    sched_obs_defaults(&g->obs_config, cfg->workload.name, cfg->model.name);
    return 0;
}

/* A kept capture, read line by line: it must be the trace this gateway writes (its header's
 * workload and model) and hold nothing else than its trajectories, or what is appended would
 * be read as another trace's, or not read at all. */
struct kept_trace {
    struct trace_parser *p;
    const struct gw_outfile *f;
    const struct trace_header *h;
    char *err;
    size_t err_size;
};

static int kept_trace_line(void *arg, const char *line, size_t len, int64_t lineno)
{
    struct kept_trace *k = arg;
    const struct trace_header *kept;
    const struct trace_traj *traj;
    struct libra_error e = {0};
    char where[512];
    if (lineno == 1 ? trace_parser_header(k->p, line, len, 1, &kept, &e) != 0
                    : trace_parser_traj(k->p, line, len, lineno, &traj, &e) != 0) {
        snprintf(k->err, k->err_size, "%s: not a trace to append to",
                 error_format(&e, where, sizeof where));
        return LIBRA_EINVAL;
    }
    if (lineno == 1 && (strcmp(kept->workload, k->h->workload) != 0 ||
                        strcmp(kept->model ? kept->model : "", k->h->model) != 0)) {
        snprintf(k->err, k->err_size,
                 "'%s' is a trace of workload '%s' and model '%s', not of this gateway's '%s' "
                 "and '%s': give another file",
                 k->f->path, kept->workload, kept->model ? kept->model : "", k->h->workload,
                 k->h->model);
        return LIBRA_EINVAL;
    }
    return 0;
}

/* Returns 0, or LIBRA_EINVAL (another file) or LIBRA_EIO with err. */
static int same_trace(const struct gw_outfile *f, const struct trace_header *h, char *err,
                      size_t err_size)
{
    struct kept_trace k = {trace_parser_new(f->path), f, h, err, err_size};
    int rc = gw_outfile_lines(f, kept_trace_line, &k, err, err_size);
    trace_parser_free(k.p);
    return rc;
}

/* --capture: a new (or empty) file starts with the trace's header; a kept one must be this
 * trace, and its last line is mended. */
static int open_capture(struct gw *g)
{
    const struct libra_config *cfg = g->cfg;
    struct trace_header h = {.version = TRACE_SCHEMA_VERSION,
                             .workload = (char *)cfg->workload.name,
                             .model = (char *)cfg->model.name};
    char err[768];
    int rc = gw_outfile_open(&g->capture, g->opt.capture_path, "{\"libra_trace\":", "--capture",
                             err, sizeof err);
    if (rc == 0 && g->capture.head)
        rc = same_trace(&g->capture, &h, err, sizeof err);
    if (rc == 0 && g->capture.head) {
        rc = gw_outfile_mend(&g->capture, "--capture", err, sizeof err);
    } else if (rc == 0) {
        trace_format_header(&g->capture_line, &h);
        if (gw_outfile_write(&g->capture, g->capture_line.data, g->capture_line.len) != 0) {
            snprintf(err, sizeof err, "%s", g->capture.error);
            rc = LIBRA_EIO;
        }
    }
    return rc ? fail(g, rc, "--capture: %s", err) : 0;
}

/* A kept decisions log, read line by line: every line an object naming a trajectory. */
struct kept_log {
    const struct gw_outfile *f;
    char *err;
    size_t err_size;
};

static int kept_decision(void *arg, const char *line, size_t len, int64_t lineno)
{
    struct kept_log *k = arg;
    json_error_t je;
    json_t *d = json_loadb(line, len, 0, &je);
    bool json = d != NULL, ok = json_object_get(d, "trajectory") != NULL;
    json_decref(d);
    if (ok)
        return 0;
    if (lineno == 1)
        snprintf(k->err, k->err_size,
                 "'%s': its first line is not a decision: not a decisions log to append to",
                 k->f->path);
    else
        snprintf(k->err, k->err_size, "%s:%lld:%d: %s: not a decisions log to append to",
                 k->f->path, (long long)lineno, json ? 1 : je.column,
                 json ? "not a decision (an object with \"trajectory\")" : je.text);
    return LIBRA_EINVAL;
}

/* --decisions: a kept file must be a decisions log, and its last line is mended. */
static int open_decisions(struct gw *g)
{
    char err[768];
    struct gw_outfile *f = &g->decisions;
    int rc = gw_outfile_open(f, g->opt.decisions_path, "{\"trajectory\":", "--decisions", err,
                             sizeof err);
    struct kept_log k = {f, err, sizeof err};
    if (rc == 0 && f->head)
        rc = gw_outfile_lines(f, kept_decision, &k, err, sizeof err);
    if (rc == 0)
        rc = gw_outfile_mend(f, "--decisions", err, sizeof err);
    return rc ? fail(g, rc, "--decisions: %s", err) : 0;
}

static int open_outputs(struct gw *g)
{
    if (g->opt.capture_path && open_capture(g))
        return -1;
    return g->opt.decisions_path ? open_decisions(g) : 0;
}

/* One engine on its way to registration at start-up: an --engine, the state dir's, or both. */
struct gw_start {
    struct gw *g;
    struct gw_worker_spec spec;
    bool flag;                /* an --engine names it: failing to register fails the start */
    struct gw_engine *stored; /* the state dir's record of it (its id), or NULL */
    struct gw_engine *e;      /* registered, not listed yet */
};

/* The state dir's trees, trajectories and steps, once the engines are listed; the registry
 * as it starts is written. */
static int restore(struct gw *g)
{
    char err[256];
    int rc = g->persist ? gw_persist_restore(g, err, sizeof err) : 0;
    gw_persist_engines(g);
    return rc ? fail(g, rc, "%s", err) : 0;
}

/* The store's commits begin: what the start changed (the registry, a step) is written. */
static int start_commits(struct gw *g)
{
    char err[256];
    int rc = g->persist
                 ? gw_store_start(g->persist->st, g->base, gw_persist_collect, g, err, sizeof err)
                 : 0;
    return rc ? fail(g, rc, "%s", err) : 0;
}

/* Every engine registered: listed (the state dir's under their ids first), the state restored,
 * and the gateway listens. */
static void started(struct gw *g)
{
    for (size_t i = 0; i < g->n_starting; i++) {
        struct gw_engine *e = g->starting[i].e;
        g->starting[i].e = NULL;
        gw_engine_list(g, e);
        if (e->draining) /* removed while it drained: idle now, so gone */
            gw_engine_remove(e);
    }
    /* listening first (nothing is served before this returns to the loop), committing last:
     * a start refused on the way changes nothing in the state dir */
    char err[256] = "";
    if (net_server_new(&g->server, g->base, g->opt.host, g->opt.port, &g->opt.limits, routes, NULL,
                       g, err, sizeof err) != 0)
        fail(g, LIBRA_EIO, "%s", err); /* "cannot listen on HOST:PORT: why" */
    else if (restore(g) == 0 && open_outputs(g) == 0)
        start_commits(g);
    if (g->start_error[0]) {
        g->ready(g->ready_arg, g->start_rc, g->start_error);
        return;
    }
    gw_plan_check_fleet(g);
    gw_pool_start(g);
    g->tick = event_new(g->base, -1, EV_PERSIST, on_tick, g);
    struct timeval tv = {(time_t)g->opt.poll_s,
                         (suseconds_t)((g->opt.poll_s - (double)(time_t)g->opt.poll_s) * 1e6)};
    event_add(g->tick, &tv);
    g->ready(g->ready_arg, 0, NULL);
}

static void on_registered(void *arg, struct gw_engine *e, int status, const char *msg)
{
    struct gw_start *s = arg;
    struct gw *g = s->g;
    if (!e && status == 0)
        return; /* the gateway stops before it started */
    if (e && s->stored && s->spec.tp == 0 && e->tp != s->stored->tp) {
        /* restarted with another TP while the gateway was down: its row's bucket is wrong */
        fail(g, LIBRA_EINVAL,
             "state dir '%s': engine %lld (%s) says it is TP%d, not TP%d as the state dir lists "
             "it: restart it as TP%d, or give --engine %s,tp=%d to keep it as engine %lld with "
             "the TP it has now",
             g->opt.state_dir, (long long)s->stored->id, e->url, e->tp, s->stored->tp,
             s->stored->tp, e->url, e->tp, (long long)s->stored->id);
    } else if (e && s->stored) { /* the same engine: its id and the admin's settings stay */
        e->id = s->stored->id;
        e->lent = s->stored->lent;
        e->draining = s->stored->draining;
        e->missed_update = s->stored->missed_update;
        keep_version(e, s->stored);
    } else if (!e && status == 502 && s->stored && !s->flag &&
               gw_bucket_of(&g->layout, s->stored->tp) >= 0) { /* it did not answer */
        fprintf(stderr, "libra: serve: engine %lld (%s) of the state dir: %s; listed as suspect\n",
                (long long)s->stored->id, s->stored->url, msg);
        e = gw_engine_ref(s->stored); /* listed from its record, suspect */
        e->cut = true;                /* said just above: not gw_engine_failed's note */
        e->unverified = true;
        e->bucket = gw_bucket_of(&g->layout, e->tp);
    }
    gw_engine_unref(s->stored);
    s->stored = NULL;
    s->e = e;
    if (!e)
        fail(g, status == 502 ? LIBRA_EIO : LIBRA_EINVAL, "%s", msg);
    if (--g->asking > 0)
        return;
    if (g->start_error[0])
        g->ready(g->ready_arg, g->start_rc, g->start_error);
    else
        started(g);
}

/* Whether host is a loopback address: 127.0.0.0/8, ::1 or localhost. */
static bool loopback(const char *host)
{
    struct in_addr a;
    if (strcmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
        return true;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* The options' checks before anything is asked. Returns 0, or -1 with err. */
/* Steering counts GPUs: every hybrid replica is one training replica of the core's layout, so
 * its engine's TP is given and the same for all. */
static bool pool_tp_ok(const struct gw_options *o, char *err, size_t err_size)
{
    for (size_t i = 0; i < o->n_pool; i++)
        if (o->pool[i].tp == 0 || o->pool[i].tp != o->pool[0].tp) {
            snprintf(err, err_size,
                     "--pool-steer: every --pool-replica needs the same tp=N (a hybrid replica's "
                     "GPUs); %s has %s",
                     o->pool[i].url, o->pool[i].tp ? "another" : "none");
            return false;
        }
    return true;
}

/* Whether no two --engine URLs name one server (net_urls_twins: localhost and 127.0.0.1 are
 * one); err says which two when some do. */
static bool engines_distinct(const struct gw_options *o, char *err, size_t err_size)
{
    const char **urls = xmallocarray(o->n_engines ? o->n_engines : 1, sizeof *urls);
    for (size_t i = 0; i < o->n_engines; i++)
        urls[i] = o->engines[i].url;
    size_t a, b;
    bool twins = net_urls_twins(urls, o->n_engines, &a, &b);
    char key[GW_URL_MAX + 64];
    if (twins && strcmp(urls[a], urls[b]) == 0) {
        snprintf(err, err_size, "--engine %s: given twice", urls[b]);
    } else if (twins) {
        net_url_endpoint(urls[b], key, sizeof key);
        snprintf(err, err_size, "--engine %s and --engine %s: one engine (both reach %s)", urls[a],
                 urls[b], key);
    }
    free(urls);
    return !twins;
}

/* Whether url (what names it: "--engine URL") is another server than this gateway at --listen;
 * err says so when it is not. At start-up only a port given to --listen is known. */
static bool not_the_gateway(const char *url, const char *what, const struct gw_options *o,
                            char *err, size_t err_size)
{
    if (!gw_url_is_gateway(url, o->host, o->port))
        return true;
    char at[GW_URL_MAX];
    gw_listen_text(o->host, o->port, at, sizeof at);
    snprintf(err, err_size,
             "%s: this gateway's own address (--listen %s): its calls would come back to it; an "
             "engine is another server",
             what, at);
    return false;
}

static int check_options(const struct gw_options *o, char *err, size_t err_size)
{
    if ((o->n_engines == 0 && !o->state_dir) || o->n_engines > GW_ENGINES_MAX) {
        snprintf(err, err_size, "give 1 to %d engines (--engine URL[,tp=N])", GW_ENGINES_MAX);
        return -1;
    }
    if (o->parse.prompt_tokens < 1 || !(o->idle_s > 0) || !(o->poll_s > 0) || !(o->grace_s >= 0)) {
        snprintf(err, err_size,
                 "prompt tokens, idle and poll times must be positive, the grace not negative");
        return -1;
    }
    if (!o->hw || !o->model) {
        snprintf(err, err_size, "the experiment's hardware and model presets are needed");
        return -1;
    }
    if (!engines_distinct(o, err, err_size))
        return -1;
    for (size_t i = 0; i < o->n_engines; i++) {
        char what[GW_URL_MAX + 16];
        snprintf(what, sizeof what, "--engine %s", o->engines[i].url);
        if (!not_the_gateway(o->engines[i].url, what, o, err, err_size))
            return -1;
    }
    for (size_t i = 0; i < o->n_pool; i++) {
        bool listed = false;
        for (size_t k = 0; k < o->n_engines; k++)
            listed |= strcmp(o->pool[i].url, o->engines[k].url) == 0;
        for (size_t k = 0; k < i; k++)
            if (strcmp(o->pool[i].url, o->pool[k].url) == 0)
                listed = false;
        if (!listed) {
            snprintf(err, err_size, "--pool-replica %s: given twice, or not an engine",
                     o->pool[i].url);
            return -1;
        }
    }
    if (o->pool_steer && !pool_tp_ok(o, err, err_size))
        return -1;
    if (!(o->pool_timeout_s > 0) || !(o->pool_timeout_s < 1e9)) {
        snprintf(err, err_size, "--pool-timeout-s: expected a positive number of seconds");
        return -1;
    }
    if (!o->admin_token && !loopback(o->host)) {
        snprintf(err, err_size,
                 "--listen %s: a gateway other machines can reach needs an admin token "
                 "(--admin-token-file or LIBRA_ADMIN_TOKEN); without one, listen on a loopback "
                 "address (127.0.0.1, ::1, localhost)",
                 o->host);
        return -1;
    }
    return 0;
}

/* Whether URLs a and b reach one server (net_urls_twins: localhost and 127.0.0.1 are one). */
static bool one_server(const char *a, const char *b)
{
    const char *urls[] = {a, b};
    size_t i, k;
    return net_urls_twins(urls, 2, &i, &k);
}

/* The start-up registrations: the state dir's engines (an --engine that reaches one, under any
 * spelling of its URL, gives its TP), then the other --engine flags. Returns 0, or -1 with err
 * when there is none. */
static int plan_start(struct gw *g, char *err, size_t err_size)
{
    const struct gw_options *o = &g->opt;
    size_t n_stored = g->persist ? g->persist->engines.n : 0;
    for (size_t i = 0; i < n_stored; i++) { /* listen elsewhere to start, then remove it */
        const struct gw_engine *e = g->persist->engines.v[i];
        char what[GW_URL_MAX + 64];
        snprintf(what, sizeof what, "state dir '%s': engine %lld (%s)", o->state_dir,
                 (long long)e->id, e->url);
        if (!not_the_gateway(e->url, what, o, err, err_size))
            return -1;
    }
    g->starting = xcalloc(n_stored + o->n_engines, sizeof *g->starting);
    for (size_t i = 0; i < n_stored; i++) {
        struct gw_start *s = &g->starting[g->n_starting++];
        s->stored = g->persist->engines.v[i];
        snprintf(s->spec.url, sizeof s->spec.url, "%s", s->stored->url);
        /* an SGLang engine is asked its TP, so one restarted with another is caught
         * (on_registered); vLLM does not say it */
        s->spec.tp = s->stored->kind == GW_KIND_VLLM ? s->stored->tp : 0;
    }
    if (g->persist)
        g->persist->engines.n = 0; /* the slots hold them now */
    for (size_t i = 0; i < o->n_engines; i++) {
        struct gw_start *s = NULL;
        for (size_t k = 0; k < n_stored && !s; k++)
            if (one_server(g->starting[k].spec.url, o->engines[i].url))
                s = &g->starting[k];
        if (!s) {
            s = &g->starting[g->n_starting++];
            snprintf(s->spec.url, sizeof s->spec.url, "%s", o->engines[i].url);
        }
        if (o->engines[i].tp) /* a flag's tp= wins; else the row's, or the engine's own */
            s->spec.tp = o->engines[i].tp;
        s->flag = true;
    }
    for (size_t i = 0; i < g->n_starting; i++)
        g->starting[i].g = g;
    if (g->n_starting == 0) {
        snprintf(err, err_size,
                 "give 1 to %d engines (--engine URL[,tp=N]); the state dir has none",
                 GW_ENGINES_MAX);
        return -1;
    }
    return 0;
}

int gw_new(struct gw **out, struct event_base *base, const struct libra_config *cfg,
           const struct gw_options *o, gw_ready_fn ready, void *arg, char *err, size_t err_size)
{
    *out = NULL;
    if (check_options(o, err, err_size))
        return LIBRA_EINVAL;
    struct gw *g = xcalloc(1, sizeof *g);
    g->base = base;
    g->cfg = cfg;
    g->opt = *o;
    g->ready = ready;
    g->ready_arg = arg;
    g->shadow = o->shadow;
    g->first_step_s = -1;
    g->capture.fd = g->decisions.fd = -1; /* none until they are opened */
    map_init(&g->trajs);
    g->client = net_client_new(base);
    g->planning = gw_planning_new(g);
    int rc = LIBRA_EINTERNAL;
    if (!g->client)
        snprintf(err, err_size, "cannot make the HTTP client");
    else if ((rc = gw_pool_new(g, err, err_size)) == 0 &&
             (!o->state_dir || (rc = gw_persist_open(g, err, err_size)) == 0) &&
             (rc = make_layout(g, err, err_size)) == 0 &&
             (rc = make_routers(g, err, err_size)) == 0)
        rc = plan_start(g, err, err_size);
    if (rc != 0) { /* each step's own code: LIBRA_EIO for a state dir that cannot be used */
        gw_free(g, NULL, 0);
        return rc;
    }
    g->asking = (int)g->n_starting;
    for (size_t i = 0; i < g->n_starting; i++)
        gw_engine_register(g, &g->starting[i].spec, false, on_registered, &g->starting[i]);
    *out = g;
    return 0;
}

char *gw_ready_line(const struct gw *g)
{
    json_t *engines = json_array();
    for (size_t i = 0; i < g->engines.n; i++) {
        const struct gw_engine *e = g->engines.v[i];
        json_array_append_new(engines, json_pack("{s:I, s:s, s:s, s:i, s:i}", "id",
                                                 (json_int_t)e->id, "url", e->url, "kind",
                                                 e->kind == GW_KIND_SGLANG ? "sglang" : "vllm",
                                                 "tp", e->tp, "bucket", e->bucket));
    }
    int port = net_server_port(g->server);
    /* an IPv6 address is bracketed in a URL; a host of any length is written whole */
    struct strbuf url = {0};
    strbuf_printf(&url, strchr(g->opt.host, ':') ? "http://[%s]:%d" : "http://%s:%d", g->opt.host,
                  port);
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:o}", "url", url.data, "port", port, "mode",
                          g->shadow ? "shadow" : sched_policy_name(g->cfg->sched.policy), "policy",
                          sched_policy_name(g->cfg->sched.policy), "engines", engines);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    strbuf_free(&url);
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
    gw_pool_free(g);
    gw_update_rec_free(&g->update);
    if (gw_persist_close(g, err, err_size) != 0)
        rc = -1;
    gw_traj_free_all(g); /* each is kept in the window as it ends */
    gw_planning_free(g->planning);
    net_client_free(g->client); /* no answer comes back after this */
    gw_fan_free_all(g);
    gw_engines_free_all(g);
    for (size_t i = 0; i < g->n_starting; i++)
        gw_engine_unref(g->starting[i].stored);
    free(g->starting);
    map_free(&g->trajs);
    sched_router_free(g->router);
    sched_router_free(g->sticky);
    for (size_t i = 0; i < g->versions.n; i++)
        free(g->versions.v[i]);
    vec_free(&g->versions);
    vec_free(&g->version_steps);
    if (gw_outfile_close(&g->capture) != 0 && rc == 0) {
        snprintf(err, err_size, "--capture: %s", g->capture.error);
        rc = -1;
    }
    if (gw_outfile_close(&g->decisions) != 0 && rc == 0) {
        snprintf(err, err_size, "--decisions: %s", g->decisions.error);
        rc = -1;
    }
    trace_text_free(&g->capture_line);
    free(g);
    return rc;
}
