/*
 * Everything but generation: control calls a trainer makes on "the engine" (pause, abort,
 * weight updates, loads), sent on to every engine; trajectory events; the admin call that
 * switches the mode; status, Prometheus metrics and health.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"

/* ---- fan-out -------------------------------------------------------------------------------- */

/* One control call on its way to every engine. */
struct fan {
    struct list_node link; /* in gw.fans while answers are awaited */
    struct gw *g;
    struct net_call *call;
    char path[128];
    bool update;        /* a weight update: engines that took it have the new version */
    bool sglang_update; /* SGLang's (/update_weights_from_*): the engine names the version */
    char version[GW_VERSION_MAX];
    int waiting;
    struct fan_answer {
        struct fan *f;
        size_t engine;
        int status;
        char *body;
        size_t len;
    } answers[GW_ENGINES_MAX];
    size_t n;
};

static bool is_update(const char *path)
{
    return strncmp(path, "/update_weights", 15) == 0;
}

/* The merged answer of /v1/loads: every engine's loads, in engine order. */
static void reply_loads(struct fan *f)
{
    json_t *loads = json_array();
    for (size_t i = 0; i < f->n; i++) {
        json_t *doc = json_loadb(f->answers[i].body, f->answers[i].len, 0, NULL);
        json_array_extend(loads, json_object_get(doc, "loads"));
        json_decref(doc);
    }
    net_reply_json(f->call, 200, json_pack("{s:o}", "loads", loads));
}

static void fan_free(struct fan *f)
{
    list_unlink(&f->g->fans, &f->link);
    for (size_t i = 0; i < f->n; i++)
        free(f->answers[i].body);
    free(f);
}

void gw_fan_free_all(struct gw *g)
{
    while (g->fans.front)
        fan_free(list_entry(g->fans.front, struct fan, link));
}

static void fan_reply(struct fan *f)
{
    struct gw *g = f->g;
    const struct fan_answer *pick = NULL;
    bool all_ok = true;
    for (size_t i = 0; i < f->n; i++) {
        const struct fan_answer *a = &f->answers[i];
        if (a->status == 0)
            continue; /* an engine gone: the others answer */
        struct gw_engine *e = &g->engines[a->engine];
        if (a->status / 100 == 2 && f->update && f->sglang_update && e->sglang)
            gw_poll_engine(g, e); /* it names its new version */
        else if (a->status / 100 == 2 && f->update)
            gw_engine_version(g, e, f->version);
        if (!pick || (all_ok && a->status / 100 != 2))
            pick = a;
        all_ok &= a->status / 100 == 2;
    }
    if (!f->call)
        ; /* the client went away */
    else if (!pick)
        net_reply_error(f->call, 502, "upstream_error", "no engine answered %s", f->path);
    else if (all_ok && strcmp(f->path, "/v1/loads") == 0)
        reply_loads(f);
    else
        net_reply_raw(f->call, pick->status, "application/json", pick->body, pick->len);
    fan_free(f);
}

static void on_answer(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct fan_answer *a = arg;
    struct fan *f = a->f;
    (void)error;
    a->status = status;
    a->body = xmalloc(len + 1);
    memcpy(a->body, body, len);
    a->body[len] = '\0';
    a->len = len;
    if (status == 0)
        f->g->engines[a->engine].up = false;
    if (--f->waiting == 0)
        fan_reply(f);
}

static void on_fan_cancel(void *arg, struct net_call *c, enum net_cancel why)
{
    struct fan *f = arg;
    (void)c;
    (void)why;
    f->call = NULL; /* the answers still arrive; nobody to tell */
}

/* The weight version an update names ("weight_version" in its body), else one of the
 * gateway's own, for engines that cannot be asked theirs (vLLM): the step still changes. */
static void update_version(struct fan *f, const char *body, size_t len)
{
    json_t *doc = json_loadb(body, len, 0, NULL);
    const char *v = json_string_value(json_object_get(doc, "weight_version"));
    if (v)
        snprintf(f->version, sizeof f->version, "%s", v);
    else
        snprintf(f->version, sizeof f->version, "libra-update-%llu",
                 (unsigned long long)++f->g->updates);
    json_decref(doc);
}

void gw_fan_out(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    struct fan *f = xcalloc(1, sizeof *f);
    f->g = g;
    f->call = c;
    snprintf(f->path, sizeof f->path, "%s", net_call_path(c));
    size_t len;
    const char *body = net_call_body(c, &len);
    f->update = is_update(f->path) && net_call_method(c) == NET_POST;
    f->sglang_update = strncmp(f->path, "/update_weights_from_", 21) == 0;
    if (f->update)
        update_version(f, body, len);
    const char *method = net_call_method(c) == NET_GET ? "GET" : "POST";
    /* a read goes to one engine (the first up); everything else to every engine */
    bool read_one = net_call_method(c) == NET_GET && strcmp(f->path, "/v1/loads") != 0;
    for (size_t i = 0; i < g->n_engines; i++) {
        if (read_one && (f->n || !g->engines[i].up))
            continue;
        struct fan_answer *a = &f->answers[f->n++];
        a->f = f;
        a->engine = i;
        char url[512];
        snprintf(url, sizeof url, "%s%s", g->engines[i].url, net_call_uri(c));
        net_client_request(g->client, method, url, NULL, len ? body : NULL, len, on_answer, a);
    }
    list_push_front(&g->fans, &f->link);
    if (f->n == 0) {
        net_reply_error(c, 503, "service_unavailable", "no engine is up");
        fan_free(f);
        return;
    }
    f->waiting = (int)f->n;
    net_call_defer(c, on_fan_cancel, f);
}

/* ---- events --------------------------------------------------------------------------------- */

/* The trajectory named by a path's {id}: each identity source in the order of precedence. */
static int events_for(struct gw *g, const char *id, const struct gw_event *ev, size_t n)
{
    static const char *const tags[] = {"libra",      "trajectory_id", "routing_key",
                                       "program_id", "session",       "rid"};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        char key[GW_ID_MAX];
        snprintf(key, sizeof key, "%s:%s", tags[i], id);
        if (gw_traj_events(g, key, ev, n) == 0)
            return 0;
    }
    return -1;
}

void gw_events_call(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    static const char prefix[] = "/libra/v1/trajectories/", suffix[] = "/events";
    const char *path = net_call_path(c);
    size_t n = strlen(path), pre = sizeof prefix - 1, suf = sizeof suffix - 1;
    if (n <= pre + suf || strcmp(path + n - suf, suffix) != 0) {
        net_reply_error(c, 404, "not_found", "expected POST /libra/v1/trajectories/{id}/events");
        return;
    }
    char id[GW_ID_MAX];
    size_t id_len = n - pre - suf; /* the path is decoded already */
    if (id_len >= sizeof id - 32) {
        net_reply_error(c, 400, "invalid_request_error", "trajectory id: too long");
        return;
    }
    memcpy(id, path + pre, id_len);
    id[id_len] = '\0';
    size_t len, n_ev;
    const char *body = net_call_body(c, &len);
    struct gw_event ev[GW_EVENTS_MAX];
    char err[256];
    if (gw_events_parse(body, len, ev, &n_ev, err, sizeof err) != 0) {
        g->errors_bad_request++;
        net_reply_error(c, 400, "invalid_request_error", "%s", err);
        return;
    }
    if (gw_durable_refused(g, c))
        return;
    if (events_for(g, id, ev, n_ev) != 0) {
        net_reply_error(c, 404, "not_found", "no live trajectory '%s'", id);
        return;
    }
    gw_reply_durable(
        g, c, 200,
        json_pack("{s:o, s:I}", "trajectory", gw_bytes_json(id), "events", (json_int_t)n_ev));
}

/* ---- admin ---------------------------------------------------------------------------------- */

/* Whether the call carries the admin token, compared in constant time. */
static bool authorised(const struct gw *g, const struct net_call *c)
{
    const char *h = net_call_header(c, "Authorization");
    const char *tok = g->opt.admin_token;
    if (!tok || !h || strncmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    size_t a = strlen(h), b = strlen(tok);
    unsigned diff = a != b;
    for (size_t i = 0; i < b; i++)
        diff |= (unsigned)(unsigned char)tok[i] ^ (unsigned)(unsigned char)(i < a ? h[i] : 0);
    return diff == 0;
}

bool gw_admin(struct gw *g, struct net_call *c)
{
    if (authorised(g, c))
        return true;
    net_call_add_header(c, "WWW-Authenticate", "Bearer");
    net_reply_error(c, 401, "authentication_error",
                    g->opt.admin_token ? "admin calls need Authorization: Bearer TOKEN"
                                       : "admin calls are off: start with "
                                         "--admin-token-file or LIBRA_ADMIN_TOKEN");
    return false;
}

static json_t *mode_json(const struct gw *g)
{
    return json_pack("{s:s, s:s}", "mode",
                     g->shadow ? "shadow" : sched_policy_name(g->cfg->sched.policy), "policy",
                     sched_policy_name(g->cfg->sched.policy));
}

void gw_admin_mode(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    if (!gw_admin(g, c))
        return;
    if (net_call_method(c) == NET_POST && gw_durable_refused(g, c))
        return;
    if (net_call_method(c) == NET_POST) {
        size_t len;
        const char *body = net_call_body(c, &len);
        json_t *doc = json_loadb(body, len, 0, NULL);
        const char *mode = json_string_value(json_object_get(doc, "mode"));
        const char *policy = sched_policy_name(g->cfg->sched.policy);
        bool shadow = mode && strcmp(mode, "shadow") == 0;
        if (!mode || (!shadow && strcmp(mode, policy) != 0)) {
            net_reply_error(c, 400, "invalid_request_error",
                            "mode: expected \"shadow\" or \"%s\" (sched.policy)", policy);
            json_decref(doc);
            return;
        }
        json_decref(doc);
        g->shadow = shadow;
        fprintf(stderr, "libra: serve: mode %s\n", shadow ? "shadow" : policy);
        gw_reply_durable(g, c, 200, mode_json(g));
        return;
    }
    net_reply_json(c, 200, mode_json(g));
}

/* ---- status, metrics, health ------------------------------------------------------------------
 */

void gw_status(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    json_t *engines = json_array();
    for (size_t i = 0; i < g->n_engines; i++) {
        const struct gw_engine *e = &g->engines[i];
        json_array_append_new(
            engines,
            json_pack("{s:I, s:s, s:i, s:i, s:s, s:s, s:I, s:i, s:I, s:I}", "id", (json_int_t)e->id,
                      "url", e->url, "tp", e->tp, "bucket", e->bucket, "state",
                      e->up ? "active" : "down", "weight_version", e->version, "step",
                      (json_int_t)e->generation, "in_flight", e->in_flight, "requests",
                      (json_int_t)e->requests, "errors", (json_int_t)e->errors));
    }
    json_t *o = mode_json(g);
    json_object_set_new(o, "step", json_integer(g->step));
    json_object_set_new(o, "live_trajectories", json_integer((json_int_t)map_size(&g->trajs)));
    json_object_set_new(o, "learn_pending", json_integer((json_int_t)g->finished.trajs.n));
    json_object_set_new(o, "engines", engines);
    net_reply_json(c, 200, o);
}

/* Upper bounds of the latency buckets, seconds (Prometheus' le). */
static const double latency_le[GW_LATENCY_BUCKETS] = {0.005, 0.01, 0.05, 0.1, 0.5, 1,
                                                      5,     10,   30,   60,  300, 1800};

void gw_observe_latency(struct gw_engine *e, double seconds)
{
    for (int i = 0; i < GW_LATENCY_BUCKETS; i++)
        e->latency[i] += seconds <= latency_le[i];
    e->latency[GW_LATENCY_BUCKETS]++;
    e->latency_sum_s += seconds;
}

static void metrics_engines(const struct gw *g, FILE *out)
{
    fputs("# HELP libra_engine_in_flight Turns being proxied to an engine.\n"
          "# TYPE libra_engine_in_flight gauge\n",
          out);
    for (size_t i = 0; i < g->n_engines; i++)
        fprintf(out, "libra_engine_in_flight{instance=\"%zu\",tp=\"%d\"} %d\n", i, g->engines[i].tp,
                g->engines[i].in_flight);
    fputs("# HELP libra_engine_up Whether an engine answered its last call.\n"
          "# TYPE libra_engine_up gauge\n",
          out);
    for (size_t i = 0; i < g->n_engines; i++)
        fprintf(out, "libra_engine_up{instance=\"%zu\"} %d\n", i, g->engines[i].up);
    fputs("# HELP libra_upstream_seconds Time from sending a turn to an engine to its last byte.\n"
          "# TYPE libra_upstream_seconds histogram\n",
          out);
    for (size_t i = 0; i < g->n_engines; i++) {
        const struct gw_engine *e = &g->engines[i];
        for (int b = 0; b < GW_LATENCY_BUCKETS; b++)
            fprintf(out, "libra_upstream_seconds_bucket{instance=\"%zu\",le=\"%g\"} %llu\n", i,
                    latency_le[b], (unsigned long long)e->latency[b]);
        fprintf(out, "libra_upstream_seconds_bucket{instance=\"%zu\",le=\"+Inf\"} %llu\n", i,
                (unsigned long long)e->latency[GW_LATENCY_BUCKETS]);
        fprintf(out, "libra_upstream_seconds_sum{instance=\"%zu\"} %.6f\n", i, e->latency_sum_s);
        fprintf(out, "libra_upstream_seconds_count{instance=\"%zu\"} %llu\n", i,
                (unsigned long long)e->latency[GW_LATENCY_BUCKETS]);
    }
}

/* One counter with a bucket label. */
static void per_bucket(const struct gw *g, FILE *out, const char *name, const char *help,
                       const uint64_t *by_bucket)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int b = 0; b < g->layout.n; b++)
        fprintf(out, "%s{bucket=\"%d\"} %llu\n", name, b, (unsigned long long)by_bucket[b]);
}

static void metrics_routing(const struct gw *g, FILE *out)
{
    static const char *const apis[] = {"sglang_generate", "vllm_generate", "completions", "chat"};
    fputs("# HELP libra_requests_total Generation requests by API.\n"
          "# TYPE libra_requests_total counter\n",
          out);
    for (int a = 0; a < 4; a++)
        fprintf(out, "libra_requests_total{api=\"%s\"} %llu\n", apis[a],
                (unsigned long long)g->requests[a]);
    fprintf(out,
            "# HELP libra_single_turn_requests_total Requests without a trajectory identity.\n"
            "# TYPE libra_single_turn_requests_total counter\n"
            "libra_single_turn_requests_total %llu\n",
            (unsigned long long)g->single_turn);
    per_bucket(g, out, "libra_decisions_total", "Turns routed, by the bucket of the engine chosen.",
               g->decisions_by_bucket);
    per_bucket(g, out, "libra_moves_total",
               "Turns sent to another engine than the previous turn's.", g->moves_by_bucket);
}

void gw_metrics(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    char *text;
    size_t len;
    FILE *out = open_memstream(&text, &len);
    metrics_routing(g, out);
    metrics_engines(g, out);
    fprintf(out,
            "# HELP libra_errors_total Requests that failed, by cause.\n"
            "# TYPE libra_errors_total counter\n"
            "libra_errors_total{cause=\"bad_request\"} %llu\n"
            "libra_errors_total{cause=\"upstream\"} %llu\n"
            "libra_errors_total{cause=\"client_gone\"} %llu\n"
            "# HELP libra_turns_resubmitted_total Turns sent again after their engine failed.\n"
            "# TYPE libra_turns_resubmitted_total counter\n"
            "libra_turns_resubmitted_total %llu\n"
            "# HELP libra_turns_resumed_total Turns continued after their engine aborted them.\n"
            "# TYPE libra_turns_resumed_total counter\n"
            "libra_turns_resumed_total %llu\n"
            "# HELP libra_trajectories_live Trajectories the gateway is following.\n"
            "# TYPE libra_trajectories_live gauge\n"
            "libra_trajectories_live %zu\n"
            "# HELP libra_trajectories_finished_total Trajectories ended.\n"
            "# TYPE libra_trajectories_finished_total counter\n"
            "libra_trajectories_finished_total %llu\n"
            "# HELP libra_step Weight-version changes of the fleet seen.\n"
            "# TYPE libra_step gauge\n"
            "libra_step %lld\n",
            (unsigned long long)g->errors_bad_request, (unsigned long long)g->errors_upstream,
            (unsigned long long)g->errors_client_gone, (unsigned long long)g->resumed,
            (unsigned long long)g->resumed_aborts, map_size(&g->trajs),
            (unsigned long long)g->trajectories_finished, (long long)g->step);
    fclose(out);
    net_reply_raw(c, 200, "text/plain; version=0.0.4", text, len);
    free(text);
}

void gw_healthz(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    size_t up = 0;
    for (size_t i = 0; i < g->n_engines; i++)
        up += g->engines[i].up;
    net_reply_json(c, up ? 200 : 503,
                   json_pack("{s:s, s:I, s:I}", "status", up ? "ok" : "no engine up", "engines",
                             (json_int_t)g->n_engines, "up", (json_int_t)up));
}
