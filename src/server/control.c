/*
 * Everything but generation: control calls a trainer makes on "the engine" (pause, abort,
 * weight updates, loads), sent on to every engine and answered with every engine's result;
 * trajectory events; the admin check and the admin call that switches the mode; status,
 * Prometheus metrics and health.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/admin.h"
#include "server/internal.h"
#include "util/alloc.h"
#include "util/strbuf.h"

/* ---- fan-out -------------------------------------------------------------------------------- */

/* What a control call is to the gateway, by its path. */
enum fan_kind {
    FAN_READ,     /* a read one engine answers, passed through as it answered */
    FAN_LOADS,    /* /v1/loads: every engine's loads, merged */
    FAN_PAUSE,    /* SGLang /pause_generation, vLLM /pause: turns are held meanwhile */
    FAN_CONTINUE, /* SGLang /continue_generation, vLLM /resume: the held turns go */
    FAN_UPDATE,   /* a weight update: engines that took it have the new version */
    FAN_OTHER,    /* any other call that changes the engines */
};

/* One control call on its way to every engine. */
struct fan {
    struct list_node link; /* in gw.fans while answers are awaited */
    struct gw *g;
    struct net_call *call;
    char path[128];
    enum fan_kind kind;
    bool sglang_update; /* SGLang's (/update_weights_from_*): the engine names the version */
    bool numbered;      /* the update names no version: version is the gateway's number */
    char version[GW_VERSION_MAX];
    int waiting;
    struct fan_answer {
        struct fan *f;
        struct gw_engine *engine; /* referenced */
        int status;               /* 0: no answer (body is the client's reason) */
        char *body;
        size_t len;
    } answers[GW_ENGINES_MAX];
    size_t n;
};

static enum fan_kind kind_of(const char *path, enum net_method method)
{
    static const char *const reads[] = {"/v1/models",       "/get_model_info",
                                        "/get_server_info", "/get_weight_version",
                                        "/is_paused",       "/is_sleeping"};
    for (size_t i = 0; method == NET_GET && i < sizeof reads / sizeof reads[0]; i++)
        if (strcmp(path, reads[i]) == 0)
            return FAN_READ;
    /* vLLM's tokenizer calls: a POST that reads (SkyRL sends them to its proxy) */
    if (strcmp(path, "/tokenize") == 0 || strcmp(path, "/detokenize") == 0)
        return FAN_READ;
    if (method == NET_GET && strcmp(path, "/v1/loads") == 0)
        return FAN_LOADS;
    if (strcmp(path, "/pause_generation") == 0 || strcmp(path, "/pause") == 0)
        return FAN_PAUSE;
    if (strcmp(path, "/continue_generation") == 0 || strcmp(path, "/resume") == 0)
        return FAN_CONTINUE;
    if (strncmp(path, "/update_weights", 15) == 0 && method == NET_POST)
        return FAN_UPDATE;
    return FAN_OTHER;
}

static void fan_free(struct fan *f)
{
    list_unlink(&f->g->fans, &f->link);
    for (size_t i = 0; i < f->n; i++) {
        free(f->answers[i].body);
        gw_engine_unref(f->answers[i].engine);
    }
    free(f);
}

void gw_fan_free_all(struct gw *g)
{
    while (g->fans.front)
        fan_free(list_entry(g->fans.front, struct fan, link));
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

/* One engine's result in the merged answer: its JSON answer, else its text. */
static json_t *answer_json(const struct fan_answer *a)
{
    const struct gw_engine *e = a->engine;
    json_t *o =
        json_pack("{s:I, s:s, s:i}", "id", (json_int_t)e->id, "url", e->url, "status", a->status);
    if (a->status == 0) {
        json_object_set_new(o, "error", json_string(a->body));
        return o;
    }
    json_t *body = json_loadb(a->body, a->len, JSON_DECODE_ANY, NULL);
    if (!body)
        body = json_stringn(a->body, a->len);
    json_object_set_new(o, "body", body ? body : json_string("(not UTF-8 text)"));
    return o;
}

/* How the engines answered a call: took it (2xx), refused it (any other status), or gave no
 * answer at all (unreachable, cut: on its way to dead, it does not fail the call). */
struct tally {
    size_t took, refused, gone;
    int first_refusal; /* its status; 0 when none */
    bool all_4xx;      /* every refusal was a 4xx */
};

static struct tally tally_of(const struct fan *f)
{
    struct tally t = {.all_4xx = true};
    for (size_t i = 0; i < f->n; i++) {
        int status = f->answers[i].status;
        if (status == 0) {
            t.gone++;
        } else if (status / 100 == 2) {
            t.took++;
        } else {
            t.refused++;
            t.first_refusal = t.first_refusal ? t.first_refusal : status;
            t.all_4xx &= status / 100 == 4;
        }
    }
    return t;
}

/* Whether the call succeeded: no engine refused it and one took it at least. */
static bool succeeded(const struct tally *t)
{
    return t->refused == 0 && t->took > 0;
}

/*
 * The merged answer of a call to every engine: {"success", "message", "engines": [{"id", "url",
 * "status", "body" or "error"}]}: 200 when it succeeded; when no engine took it and every refusal
 * was a 4xx, the first refusal's status; else 502.
 */
static void reply_merged(struct fan *f, const struct tally *t)
{
    json_t *list = json_array();
    for (size_t i = 0; i < f->n; i++)
        json_array_append_new(list, answer_json(&f->answers[i]));
    int status = succeeded(t)                               ? 200
                 : t->took == 0 && t->refused && t->all_4xx ? t->first_refusal
                                                            : 502;
    char msg[192];
    snprintf(msg, sizeof msg, "%s: %zu of %zu engines took it, %zu refused it, %zu did not answer",
             f->path, t->took, f->n, t->refused, t->gone);
    net_reply_json(
        f->call, status,
        json_pack("{s:b, s:s, s:o}", "success", succeeded(t), "message", msg, "engines", list));
}

/* What an engine's acceptance of the call changes in the registry. */
static void took(struct fan *f, struct gw_engine *e)
{
    if (f->kind == FAN_PAUSE || f->kind == FAN_CONTINUE)
        gw_engine_pause(e, f->kind == FAN_PAUSE);
    else if (f->kind == FAN_UPDATE && f->numbered)
        gw_engine_numbered(f->g, e, f->version);
    else if (f->kind == FAN_UPDATE && f->sglang_update && e->kind == GW_KIND_SGLANG)
        gw_engine_ask_version(e); /* it names its new version */
    else if (f->kind == FAN_UPDATE)
        gw_engine_version(f->g, e, f->version);
}

/* Keeps f, a weight update from disk some engine took, for the pool replicas that missed it. */
static void keep_update(struct fan *f)
{
    struct gw *g = f->g;
    size_t len;
    const char *body = f->call ? net_call_body(f->call, &len) : NULL;
    if (!body)
        return; /* the client went away: its body with it */
    gw_update_rec_free(&g->update);
    g->update.body = xmalloc(len + 1);
    memcpy(g->update.body, body, len);
    g->update.body[len] = '\0';
    g->update.len = len;
    snprintf(g->update.path, sizeof g->update.path, "%s", f->path);
    snprintf(g->update.version, sizeof g->update.version, "%s", f->version);
    gw_persist_update(g);
}

static void fan_reply(struct fan *f)
{
    for (size_t i = 0; i < f->n; i++) {
        struct fan_answer *a = &f->answers[i];
        if (f->kind == FAN_UPDATE)
            gw_engine_loading(a->engine, -1);
        if (a->status / 100 == 2 && a->engine->listed)
            took(f, a->engine);
    }
    struct tally t = tally_of(f);
    if (f->kind == FAN_UPDATE && t.took > 0 && strcmp(f->path, "/update_weights_from_disk") == 0)
        keep_update(f);
    if ((f->kind == FAN_PAUSE && !succeeded(&t)) || (f->kind == FAN_CONTINUE && t.took > 0))
        gw_release(f->g); /* a pause that did not succeed holds nothing */
    const struct fan_answer *one = &f->answers[0];
    if (!f->call)
        ; /* the client went away */
    else if (f->kind == FAN_READ && one->status == 0)
        net_reply_error(f->call, 502, "upstream_error", "engine %s: %s", one->engine->url,
                        one->body);
    else if (f->kind == FAN_READ)
        net_reply_raw(f->call, one->status, "application/json", one->body, one->len);
    else if (f->kind == FAN_LOADS && succeeded(&t))
        reply_loads(f);
    else
        reply_merged(f, &t);
    fan_free(f);
}

static void on_answer(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct fan_answer *a = arg;
    struct fan *f = a->f;
    if (status == 0) {
        gw_engine_failed(a->engine, error);
        body = error;
        len = strlen(error);
    }
    a->status = status;
    a->body = xmalloc(len + 1);
    memcpy(a->body, body, len);
    a->body[len] = '\0';
    a->len = len;
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

bool gw_update_named(const char *body, size_t len, char version[GW_VERSION_MAX])
{
    json_t *doc = json_loadb(body, len, 0, NULL);
    const char *v = json_string_value(json_object_get(doc, "weight_version"));
    if (v)
        gw_version_key(version, v, strlen(v));
    json_decref(doc);
    return v != NULL;
}

/* The weight version an update names, else one of the gateway's own (vLLM's updates name none,
 * SGLang's may not): the step still changes. */
static void update_version(struct fan *f, const char *body, size_t len)
{
    f->numbered = !gw_update_named(body, len, f->version);
    if (f->numbered)
        snprintf(f->version, sizeof f->version, "libra-update-%llu",
                 (unsigned long long)++f->g->updates);
}

/* The engine a read goes to: the first active one, else the first that is not dead. */
static struct gw_engine *reader(const struct gw *g)
{
    struct gw_engine *alive = NULL;
    for (size_t i = 0; i < g->engines.n; i++) {
        struct gw_engine *e = g->engines.v[i];
        if (gw_engine_state(e) == GW_ENGINE_ACTIVE)
            return e;
        if (!alive && !e->dead)
            alive = e;
    }
    return alive;
}

/* Sends the call to engine e. */
static void send_to(struct fan *f, struct net_call *c, struct gw_engine *e)
{
    struct fan_answer *a = &f->answers[f->n++];
    a->f = f;
    a->engine = gw_engine_ref(e);
    if (f->kind == FAN_UPDATE)
        gw_engine_loading(e, +1);
    if (f->kind != FAN_READ && f->kind != FAN_LOADS)
        gw_engine_turns_disturbed(e);
    size_t len;
    const char *body = net_call_body(c, &len);
    struct strbuf url = {0}; /* the query goes on whole, however long */
    strbuf_printf(&url, "%s%s", e->url, net_call_uri(c));
    net_client_request(f->g->client, net_call_method(c) == NET_GET ? "GET" : "POST", url.data, NULL,
                       len ? body : NULL, len, on_answer, a);
    strbuf_free(&url);
}

void gw_fan_out(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    enum fan_kind kind = kind_of(net_call_path(c), net_call_method(c));
    if (kind != FAN_READ && kind != FAN_LOADS && !gw_admin(g, c))
        return;
    struct fan *f = xcalloc(1, sizeof *f);
    f->g = g;
    f->call = c;
    f->kind = kind;
    snprintf(f->path, sizeof f->path, "%s", net_call_path(c));
    f->sglang_update = strncmp(f->path, "/update_weights_from_", 21) == 0;
    list_push_front(&g->fans, &f->link);
    size_t len;
    const char *body = net_call_body(c, &len);
    if (kind == FAN_UPDATE)
        update_version(f, body, len);
    struct gw_engine *one = kind == FAN_READ ? reader(g) : NULL;
    bool disk = strcmp(f->path, "/update_weights_from_disk") == 0;
    for (size_t i = 0; i < g->engines.n; i++) {
        struct gw_engine *e = g->engines.v[i];
        if (disk && !e->dead && gw_pool_engine_off(g, e)) {
            e->missed_update = true; /* it loads the weights when it wakes */
            gw_persist_update(g);
        } else if (one ? e == one : !e->dead) {
            send_to(f, c, e);
        }
    }
    if (f->n == 0) {
        net_reply_error(c, 503, "server_error", "no engine is alive");
        fan_free(f);
        return;
    }
    if (kind == FAN_PAUSE)
        gw_hold(g); /* from now: a turn sent now would meet a pausing engine */
    f->waiting = (int)f->n;
    net_call_defer(c, on_fan_cancel, f);
}

void gw_per_engine(void *ctx, struct net_call *c)
{
    (void)ctx;
    net_reply_error(c, 400, "invalid_request_error",
                    "%s takes a rank offset of its own on each engine, so the gateway does not "
                    "send it on: call each engine at its URL with the rank_offset and world_size "
                    "that GET /libra/v1/engines lists",
                    net_call_path(c));
}

/* ---- events --------------------------------------------------------------------------------- */

/* The trajectory named by a path's {id}: each identity source in the order of precedence.
 * Returns as gw_traj_events. */
static int events_for(struct gw *g, const char *id, size_t id_len, const struct gw_event *ev,
                      size_t n)
{
    for (int src = GW_ID_LIBRA; src <= GW_ID_RID; src++) {
        char key[GW_ID_MAX];
        gw_id_key(key, (enum gw_id_source)src, id, id_len);
        int rc = gw_traj_events(g, key, ev, n);
        if (rc != -1)
            return rc;
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
        net_reply_error(c, 404, "not_found_error",
                        "expected POST /libra/v1/trajectories/{id}/events");
        return;
    }
    size_t id_len = n - pre - suf;  /* the path is decoded already */
    if (id_len > GW_ID_VALUE_MAX) { /* the limit a request's identity has */
        net_reply_error(c, 400, "invalid_request_error", "trajectory id: expected at most %d bytes",
                        GW_ID_VALUE_MAX);
        return;
    }
    char id[GW_ID_VALUE_MAX + 1];
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
    int rc = events_for(g, id, id_len, ev, n_ev);
    if (rc == -2) {
        g->errors_bad_request++;
        net_reply_error(c, 409, "conflict_error",
                        "trajectory '%s' has a turn in flight: post its finish once that turn is "
                        "answered; nothing was changed",
                        id);
        return;
    }
    if (rc != 0) {
        net_reply_error(c, 404, "not_found_error", "no live trajectory '%s'", id);
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
    if (!tok || !h || strncasecmp(h, "Bearer ", 7) != 0) /* the scheme is case-insensitive */
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
        const char *policy = sched_policy_name(g->cfg->sched.policy);
        bool shadow;
        char err[256];
        if (gw_mode_body_parse(body, len, policy, &shadow, err, sizeof err) != 0) {
            net_reply_error(c, 400, "invalid_request_error", "%s", err);
            return;
        }
        g->shadow = shadow;
        fprintf(stderr, "libra: serve: mode %s\n", shadow ? "shadow" : policy);
        gw_reply_durable(g, c, 200, mode_json(g));
        return;
    }
    net_reply_json(c, 200, mode_json(g));
}

/* ---- status, metrics, health ---------------------------------------------------------------- */

void gw_status(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    json_t *o = mode_json(g);
    json_object_set_new(o, "step", json_integer(g->step));
    json_object_set_new(o, "live_trajectories", json_integer((json_int_t)map_size(&g->trajs)));
    json_object_set_new(o, "learn_pending", json_integer((json_int_t)g->finished.trajs.n));
    json_object_set_new(o, "holding", json_boolean(g->holding));
    json_object_set_new(o, "held", json_integer((json_int_t)g->n_held));
    json_object_set_new(o, "engines", gw_engines_list(g));
    net_reply_json(c, 200, o);
}

/* Whether e passes its health checks. */
static bool up(const struct gw_engine *e)
{
    enum gw_engine_state s = gw_engine_state(e);
    return s != GW_ENGINE_DEAD && s != GW_ENGINE_SUSPECT;
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
    for (size_t i = 0; i < g->engines.n; i++)
        fprintf(out, "libra_engine_in_flight{instance=\"%lld\",tp=\"%d\"} %d\n",
                (long long)g->engines.v[i]->id, g->engines.v[i]->tp, g->engines.v[i]->in_flight);
    fputs("# HELP libra_engine_up Whether an engine passes its health checks (not suspect or "
          "dead).\n"
          "# TYPE libra_engine_up gauge\n",
          out);
    for (size_t i = 0; i < g->engines.n; i++)
        fprintf(out, "libra_engine_up{instance=\"%lld\"} %d\n", (long long)g->engines.v[i]->id,
                up(g->engines.v[i]));
    fputs("# HELP libra_upstream_seconds Time from sending a turn to an engine to its last byte.\n"
          "# TYPE libra_upstream_seconds histogram\n",
          out);
    for (size_t i = 0; i < g->engines.n; i++) {
        const struct gw_engine *e = g->engines.v[i];
        long long id = (long long)e->id;
        for (int b = 0; b < GW_LATENCY_BUCKETS; b++)
            fprintf(out, "libra_upstream_seconds_bucket{instance=\"%lld\",le=\"%g\"} %llu\n", id,
                    latency_le[b], (unsigned long long)e->latency[b]);
        fprintf(out, "libra_upstream_seconds_bucket{instance=\"%lld\",le=\"+Inf\"} %llu\n", id,
                (unsigned long long)e->latency[GW_LATENCY_BUCKETS]);
        fprintf(out, "libra_upstream_seconds_sum{instance=\"%lld\"} %.6f\n", id, e->latency_sum_s);
        fprintf(out, "libra_upstream_seconds_count{instance=\"%lld\"} %llu\n", id,
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
            "libra_single_turn_requests_total %llu\n"
            "# HELP libra_parallel_turns_total Turns sent while their trajectory had one in "
            "flight: routed beside it, not recorded.\n"
            "# TYPE libra_parallel_turns_total counter\n"
            "libra_parallel_turns_total %llu\n",
            (unsigned long long)g->single_turn, (unsigned long long)g->parallel);
    per_bucket(g, out, "libra_decisions_total",
               "Routing decisions (a turn sent again to another engine is decided again), by the "
               "bucket of the engine chosen.",
               g->decisions_by_bucket);
    per_bucket(g, out, "libra_moves_total",
               "Turns sent to another engine than the previous turn's.", g->moves_by_bucket);
}

/* Every request answered with an error, once, and every one whose client left: the gateway's
 * causes, the HTTP layer's refusals and caps, and the rest of its handlers' error answers. */
static void metrics_errors(const struct gw *g, FILE *out)
{
    struct net_errors net = net_server_errors(g->server);
    uint64_t own =
        g->errors_bad_request + g->errors_upstream + g->errors_no_engine + g->errors_no_route;
    const struct {
        const char *cause;
        uint64_t n;
    } by[] = {{"bad_request", g->errors_bad_request},
              {"upstream", g->errors_upstream},
              {"no_engine", g->errors_no_engine},
              {"client_gone", g->errors_client_gone},
              {"refused", net.refused + g->errors_no_route},
              {"cap", net.capped},
              {"other", net.handled - own}};
    fputs("# HELP libra_errors_total Requests that failed, by cause.\n"
          "# TYPE libra_errors_total counter\n",
          out);
    for (size_t i = 0; i < sizeof by / sizeof *by; i++)
        fprintf(out, "libra_errors_total{cause=\"%s\"} %llu\n", by[i].cause,
                (unsigned long long)by[i].n);
}

void gw_metrics(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    char *text;
    size_t len;
    FILE *out = open_memstream(&text, &len);
    metrics_routing(g, out);
    metrics_engines(g, out);
    gw_pool_metrics(g, out);
    metrics_errors(g, out);
    fprintf(out,
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
            "libra_step %lld\n"
            "# HELP libra_requests_held Generation requests held while the fleet is paused.\n"
            "# TYPE libra_requests_held gauge\n"
            "libra_requests_held %zu\n",
            (unsigned long long)g->resumed, (unsigned long long)g->resumed_aborts,
            map_size(&g->trajs), (unsigned long long)g->trajectories_finished, (long long)g->step,
            g->n_held);
    fclose(out);
    net_reply_raw(c, 200, "text/plain; version=0.0.4", text, len);
    free(text);
}

void gw_healthz(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    size_t n_up = 0;
    for (size_t i = 0; i < g->engines.n; i++)
        n_up += up(g->engines.v[i]);
    net_reply_json(c, n_up ? 200 : 503,
                   json_pack("{s:s, s:I, s:I}", "status", n_up ? "ok" : "no engine up", "engines",
                             (json_int_t)g->engines.n, "up", (json_int_t)n_up));
}
