/*
 * The gateway's registry of engines: registering one (at start-up from --engine, at run time
 * from the worker calls) by asking it what it is, listing it under an id never reused, its
 * state, its health, and taking it out again.
 *
 * Why engines are allocated one by one and counted: a generation request, a control call or a
 * health check in flight points at its engine, and the engine may be removed meanwhile (an
 * admin call, a drain that ends). Removing only unlists it; the last call that points at it
 * frees it. Ids come from a counter, so an id names one engine for the gateway's life.
 *
 * Health: every tick (--poll-s) each listed engine is asked GET /health with a limit of
 * GW_CHECK_LIMIT_S; GW_SUSPECT_CHECKS failures in a row make it suspect (a transfer to it that
 * fails makes it suspect at once, without counting as a check), GW_DEAD_CHECKS make it dead —
 * except while it is paused or loading weights, for up to GW_UPDATE_GRACE_S from the pause or the
 * update's start: an engine busy with a 30-100 s update may not answer. A check that passes clears
 * the count. Dead is final: an engine that comes back is registered again (its weights and TP are
 * asked anew). After a check that passes, an SGLang engine is asked its weight version and a vLLM
 * engine (when it has the call) whether it is paused: trainers may talk to engines directly.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/internal.h"
#include "util/alloc.h"

/* ---- references and look-ups ---------------------------------------------------------------- */

static struct gw_engine *engine_new(struct gw *g, const char *url)
{
    struct gw_engine *e = xcalloc(1, sizeof *e);
    e->g = g;
    e->refs = 1;
    e->id = -1;
    e->bucket = -1;
    snprintf(e->url, sizeof e->url, "%s", url);
    net_url_endpoint(url, e->endpoint, sizeof e->endpoint);
    list_push_front(&g->all, &e->link);
    return e;
}

static void engine_free(struct gw_engine *e)
{
    list_unlink(&e->g->all, &e->link);
    free(e);
}

struct gw_engine *gw_engine_stored(struct gw *g, int64_t id, const char *url)
{
    struct gw_engine *e = engine_new(g, url);
    e->id = id;
    return e;
}

struct gw_engine *gw_engine_ref(struct gw_engine *e)
{
    e->refs++;
    return e;
}

void gw_engine_unref(struct gw_engine *e)
{
    if (e && --e->refs == 0)
        engine_free(e);
}

struct gw_engine *gw_engine_by_id(const struct gw *g, int64_t id)
{
    for (size_t i = 0; i < g->engines.n; i++)
        if (g->engines.v[i]->id == id)
            return g->engines.v[i];
    return NULL;
}

struct gw_engine *gw_engine_by_url(const struct gw *g, const char *url)
{
    for (size_t i = 0; i < g->engines.n; i++)
        if (strcmp(g->engines.v[i]->url, url) == 0)
            return g->engines.v[i];
    if (g->engines.n == 0)
        return NULL;
    char key[sizeof g->engines.v[0]->endpoint];
    net_url_endpoint(url, key, sizeof key);
    for (size_t i = 0; i < g->engines.n; i++)
        if (strcmp(g->engines.v[i]->endpoint, key) == 0)
            return g->engines.v[i];
    return NULL;
}

/* ---- the gateway's own address -------------------------------------------------------------- */

/* Whether host is a wildcard address (0.0.0.0, ::): a server bound to it takes connections to
 * every address of the machine. */
static bool wildcard(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    return (inet_pton(AF_INET, host, &a4) == 1 && a4.s_addr == htonl(INADDR_ANY)) ||
           (inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&a6));
}

/* Whether the numeric address addr is one of this machine's: a socket can be bound to it. */
static bool local_address(const char *addr)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_DGRAM}, *res;
    if (getaddrinfo(addr, NULL, &hints, &res) != 0)
        return false;
    int fd = socket(res->ai_family, SOCK_DGRAM, 0);
    bool local = fd >= 0 && bind(fd, res->ai_addr, res->ai_addrlen) == 0;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return local;
}

/* The address (without brackets) and port of an endpoint key "ADDR:PORT" or "[ADDR]:PORT";
 * false for a key with a path, whose URL reaches no route of a gateway (they have no prefix). */
static bool endpoint_parts(const char *key, char *addr, size_t size, int *port)
{
    const char *colon = strrchr(key, ':');
    if (strchr(key, '/') || !colon)
        return false;
    bool bracketed = key[0] == '[';
    snprintf(addr, size, "%.*s", (int)(colon - key) - (bracketed ? 2 : 0), key + bracketed);
    *port = (int)strtol(colon + 1, NULL, 10); /* digits: net_url_endpoint wrote them */
    return true;
}

void gw_listen_text(const char *host, int port, char *out, size_t size)
{
    snprintf(out, size, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

bool gw_url_is_gateway(const char *url, const char *host, int port)
{
    if (port == 0)
        return false;
    char at[GW_URL_MAX], mine[GW_URL_MAX + 16], self[GW_URL_MAX + 64], key[GW_URL_MAX + 64],
        addr[GW_URL_MAX];
    gw_listen_text(host, port, at, sizeof at);
    snprintf(mine, sizeof mine, "http://%s", at);
    net_url_endpoint(mine, self, sizeof self);
    net_url_endpoint(url, key, sizeof key);
    if (strcmp(key, self) == 0)
        return true;
    int key_port;
    if (!endpoint_parts(key, addr, sizeof addr, &key_port) || key_port != port)
        return false;
    if (wildcard(host))
        return local_address(addr);
    /* a connection to a wildcard address goes to the loopback address of its family */
    snprintf(mine, sizeof mine, strchr(addr, ':') ? "[::1]:%d" : "127.0.0.1:%d", port);
    return wildcard(addr) && strcmp(mine, self) == 0;
}

/* ---- states --------------------------------------------------------------------------------- */

enum gw_engine_state gw_engine_state(const struct gw_engine *e)
{
    if (e->dead)
        return GW_ENGINE_DEAD;
    if (e->draining)
        return GW_ENGINE_DRAINING;
    if (e->lent)
        return GW_ENGINE_LENT;
    if (gw_engine_suspect(e))
        return GW_ENGINE_SUSPECT;
    if (e->loading > 0)
        return GW_ENGINE_LOADING;
    return e->paused ? GW_ENGINE_PAUSED : GW_ENGINE_ACTIVE;
}

const char *gw_engine_state_name(enum gw_engine_state s)
{
    static const char *const names[] = {
        [GW_ENGINE_DEAD] = "dead",       [GW_ENGINE_DRAINING] = "draining",
        [GW_ENGINE_LENT] = "lent",       [GW_ENGINE_SUSPECT] = "suspect",
        [GW_ENGINE_LOADING] = "loading", [GW_ENGINE_PAUSED] = "paused",
        [GW_ENGINE_ACTIVE] = "active",
    };
    return names[s];
}

bool gw_engine_routable(const struct gw_engine *e)
{
    return e->listed && !e->dead && !e->draining && !e->lent;
}

bool gw_engine_suspect(const struct gw_engine *e)
{
    return e->cut || e->fails >= GW_SUSPECT_CHECKS;
}

void gw_registry(const struct gw *g, const struct gw_traj *t, struct gw_registry *r)
{
    size_t n = 0;
    for (size_t i = 0; i < g->engines.n; i++) {
        struct gw_engine *e = g->engines.v[i];
        if (!gw_engine_routable(e) || (t && e->generation < t->generation))
            continue;
        r->inst[n] = (struct sched_instance){
            .id = e->id,
            .tp = e->tp,
            .bucket = e->bucket,
            .running = e->in_flight,
            .cap = INT_MAX,
            .ready = !gw_engine_suspect(e),
        };
        r->engine[n++] = e;
    }
    r->reg.inst = r->inst;
    r->reg.n = n;
}

struct gw_engine *gw_engine_pick(const struct gw *g, int64_t step, const struct gw_engine *except)
{
    struct gw_engine *best = NULL;
    bool best_healthy = false;
    for (size_t i = 0; i < g->engines.n; i++) {
        struct gw_engine *e = g->engines.v[i];
        if (e == except || !gw_engine_routable(e) || e->generation < step)
            continue;
        bool healthy = !gw_engine_suspect(e);
        if (!best || healthy > best_healthy ||
            (healthy == best_healthy && e->in_flight < best->in_flight)) {
            best = e;
            best_healthy = healthy;
        }
    }
    return best;
}

void gw_engine_failed(struct gw_engine *e, const char *why)
{
    if (!gw_engine_suspect(e))
        fprintf(stderr, "libra: serve: engine %lld (%s) is suspect: a transfer failed (%s)\n",
                (long long)e->id, e->url, why);
    e->cut = true; /* the health checks count on: dead after GW_DEAD_CHECKS of them */
}

void gw_engine_pause(struct gw_engine *e, bool paused)
{
    if (paused && !e->paused && e->loading == 0)
        e->held_s = gw_now();
    e->paused = paused;
}

void gw_engine_loading(struct gw_engine *e, int delta)
{
    if (delta > 0 && e->loading == 0 && !e->paused)
        e->held_s = gw_now();
    e->loading += delta;
}

/* ---- buckets -------------------------------------------------------------------------------- */

/* The first bucket of l that lists TP size tp; -1 when none does. */
int gw_bucket_of(const struct spec_bucket_layout *l, int tp)
{
    for (int b = 0; b < l->n; b++)
        if (spec_bucket_has_tp(&l->bucket[b], tp))
            return b;
    return -1;
}

int gw_engine_buckets(const struct gw *g, const struct spec_bucket_layout *l, int *bucket,
                      char *err, size_t err_size)
{
    for (size_t i = 0; i < g->engines.n; i++) {
        const struct gw_engine *e = g->engines.v[i];
        bucket[i] = gw_bucket_of(l, e->tp);
        if (bucket[i] < 0) {
            char text[SPEC_BUCKET_TEXT_MAX];
            spec_bucket_format(l, text, sizeof text);
            snprintf(err, err_size, "engine %s is TP%d, which no bucket of %s serves", e->url,
                     e->tp, text);
            return -1;
        }
    }
    return 0;
}

/* ---- listing and removal -------------------------------------------------------------------- */

static void unlist(struct gw_engine *e)
{
    struct gw *g = e->g;
    size_t i = 0;
    while (g->engines.v[i] != e)
        i++;
    memmove(g->engines.v + i, g->engines.v + i + 1, (g->engines.n - i - 1) * sizeof e);
    g->engines.n--;
    e->listed = false;
    fprintf(stderr, "libra: serve: engine %lld (%s) removed\n", (long long)e->id, e->url);
    gw_persist_engines(g);
    gw_engine_unref(e);
}

bool gw_engine_remove(struct gw_engine *e)
{
    e->draining = true;
    gw_persist_engines(e->g);
    if (e->in_flight > 0 && !e->dead)
        return false;
    unlist(e);
    return true;
}

void gw_engine_turn_start(struct gw_engine *e)
{
    if (e->in_flight++ == 0)
        e->busy_from_s = gw_now();
    e->requests++;
}

double gw_engine_busy_s(const struct gw_engine *e, double now_s)
{
    return e->busy_s + (e->in_flight > 0 ? now_s - e->busy_from_s : 0.0);
}

void gw_engine_turn_done(struct gw_engine *e)
{
    if (--e->in_flight == 0)
        e->busy_s += gw_now() - e->busy_from_s;
    if (e->listed && e->draining && e->in_flight == 0)
        unlist(e);
}

void gw_engine_list(struct gw *g, struct gw_engine *e)
{
    struct gw_engine *old = gw_engine_by_url(g, e->url);
    if (old && old->dead) /* a live one made the registration fail (place) */
        unlist(old);
    if (e->id < 0)
        e->id = g->next_engine_id;
    if (e->id >= g->next_engine_id)
        g->next_engine_id = e->id + 1;
    e->listed = true;
    vec_push(&g->engines, e);
    gw_persist_engines(g);
    if (g->server)
        fprintf(stderr, "libra: serve: engine %lld (%s) added: %s, TP%d, bucket %d\n",
                (long long)e->id, e->url, e->kind == GW_KIND_SGLANG ? "sglang" : "vllm", e->tp,
                e->bucket);
}

int gw_engine_ranks(const struct gw_engine *e)
{
    return e->dead ? 0 : e->tp;
}

int64_t gw_engine_rank_offset(const struct gw *g, const struct gw_engine *e)
{
    int64_t rank = 0;
    for (size_t i = 0; i < g->engines.n && g->engines.v[i] != e; i++)
        rank += gw_engine_ranks(g->engines.v[i]);
    return rank;
}

json_t *gw_engine_json(const struct gw_engine *e, int64_t rank_offset)
{
    return json_pack("{s:I, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:I, s:i, s:I, s:I, s:i, s:I}",
                     "id", (json_int_t)e->id, "url", e->url, "kind",
                     e->kind == GW_KIND_SGLANG ? "sglang" : "vllm", "version", e->software, "model",
                     e->model, "tp", e->tp, "bucket", e->bucket, "state",
                     gw_engine_state_name(gw_engine_state(e)), "weight_version", e->version, "step",
                     (json_int_t)e->generation, "in_flight", e->in_flight, "requests",
                     (json_int_t)e->requests, "errors", (json_int_t)e->errors, "ranks",
                     gw_engine_ranks(e), "rank_offset", (json_int_t)rank_offset);
}

json_t *gw_engines_list(const struct gw *g)
{
    json_t *list = json_array();
    int64_t ranks = 0; /* of the engines listed so far */
    for (size_t i = 0; i < g->engines.n; i++) {
        json_array_append_new(list, gw_engine_json(g->engines.v[i], ranks));
        ranks += gw_engine_ranks(g->engines.v[i]);
    }
    return list;
}

json_t *gw_engines_json(const struct gw *g)
{
    int64_t world = 1; /* rank 0 is the trainer */
    for (size_t i = 0; i < g->engines.n; i++)
        world += gw_engine_ranks(g->engines.v[i]);
    return json_pack("{s:o, s:I, s:I}", "engines", gw_engines_list(g), "total",
                     (json_int_t)g->engines.n, "world_size", (json_int_t)world);
}

/* ---- registration --------------------------------------------------------------------------- */

/* One engine being registered: the calls that ask it what it is, one after another. */
struct probe {
    struct list_node link; /* in gw.probes */
    struct gw *g;
    struct gw_engine *e; /* not listed yet; the probe holds its reference */
    int given_tp;        /* 0: not given */
    int said_tp;         /* what the engine said; 0: nothing */
    bool list;
    int info_status; /* /get_server_info's answer, for the message */
    char weight_version[GW_VERSION_MAX];
    gw_registered_fn done;
    void *arg;
};

static void probe_free(struct probe *p)
{
    list_unlink(&p->g->probes, &p->link);
    gw_engine_unref(p->e);
    free(p);
}

/* Ends the registration: status 0 registered, else the HTTP status to answer and why. */
static void finish(struct probe *p, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void finish(struct probe *p, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct gw *g = p->g;
    struct gw_engine *e = p->e;
    if (status != 0) {
        p->done(p->arg, NULL, status, msg);
        probe_free(p);
        return;
    }
    if (e->kind == GW_KIND_SGLANG)
        gw_engine_version(g, e, p->weight_version);
    p->e = NULL; /* the reference goes to the listing, or to the caller who lists it */
    if (p->list)
        gw_engine_list(g, e);
    p->done(p->arg, e, 0, NULL);
    probe_free(p);
}

static void ask(struct probe *p, const char *path, net_response_fn fn)
{
    char url[GW_URL_MAX + 32];
    snprintf(url, sizeof url, "%s%s", p->e->url, path);
    net_client_request_within(p->g->client, "GET", url, NULL, NULL, 0, GW_CHECK_LIMIT_S, fn, p);
}

/* A JSON object answer, or NULL. */
static json_t *object_of(int status, const char *body, size_t len)
{
    json_t *doc = status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
    if (json_is_object(doc))
        return doc;
    json_decref(doc);
    return NULL;
}

static void copy_string(char *out, size_t size, const json_t *v)
{
    if (json_is_string(v))
        snprintf(out, size, "%s", json_string_value(v));
}

/* Its TP, a bucket that serves it, a place in the listing: the last checks. */
static void place(struct probe *p)
{
    struct gw *g = p->g;
    struct gw_engine *e = p->e;
    const struct gw_engine *same = gw_engine_by_url(g, e->url);
    if (same && !same->dead) {
        if (strcmp(same->url, e->url) == 0)
            finish(p, 409, "engine %s is registered already, as engine %lld", e->url,
                   (long long)same->id);
        else
            finish(p, 409, "engine %s is registered already, as engine %lld (%s: both reach %s)",
                   e->url, (long long)same->id, same->url, e->endpoint);
        return;
    }
    if (p->given_tp && p->said_tp && p->given_tp != p->said_tp) {
        finish(p, 400, "engine %s says it is TP%d, not TP%d as given", e->url, p->said_tp,
               p->given_tp);
        return;
    }
    e->tp = p->said_tp ? p->said_tp : p->given_tp;
    if (e->tp < 1) {
        finish(p, 400,
               "engine %s: TP unknown (%s): give it (--engine %s,tp=N; /add_worker?url=...&tp=N; "
               "{\"tp\": N})",
               e->url,
               e->kind == GW_KIND_SGLANG ? "its /get_server_info has no tp_size of 1 or more"
                                         : "it does not answer SGLang's /get_server_info",
               e->url);
        return;
    }
    e->bucket = gw_bucket_of(&g->layout, e->tp);
    char text[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&g->layout, text, sizeof text);
    if (e->bucket < 0) {
        finish(p, 400, "engine %s is TP%d, which no bucket of %s serves (%s)", e->url, e->tp, text,
               g->opt.plan ? "--plan's layout" : "--set sched.buckets=...");
        return;
    }
    if (g->engines.n >= GW_ENGINES_MAX) {
        finish(p, 400, "the gateway serves at most %d engines", GW_ENGINES_MAX);
        return;
    }
    finish(p, 0, "%s", "");
}

static void on_models(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct probe *p = arg;
    json_t *doc = object_of(status, body, len);
    json_t *first = json_array_get(json_object_get(doc, "data"), 0);
    copy_string(p->e->model, sizeof p->e->model, json_object_get(first, "id"));
    json_decref(doc);
    place(p);
}

static void on_is_paused(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct probe *p = arg;
    json_t *doc = object_of(status, body, len);
    json_t *v = json_object_get(doc, "is_paused");
    p->e->polls_pause = json_is_boolean(v); /* only in vLLM's development mode */
    p->e->paused = json_is_true(v);
    json_decref(doc);
    ask(p, "/v1/models", on_models);
}

static void on_weight_version(void *arg, int status, const char *body, size_t len,
                              const char *error)
{
    struct probe *p = arg;
    json_t *doc = object_of(status, body, len);
    json_t *v = json_object_get(doc, "weight_version");
    bool ok = json_is_string(v);
    if (ok)
        gw_version_key(p->weight_version, json_string_value(v), json_string_length(v));
    json_decref(doc);
    if (!ok) {
        finish(p, 502,
               "engine %s: /get_weight_version answered %d without a weight_version: the "
               "gateway polls SGLang engines' weight versions with it",
               p->e->url, status);
        return;
    }
    place(p);
}

static void on_health(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct probe *p = arg;
    if (status != 200) {
        finish(p, 502,
               "engine %s: /health answered %d%s%s: the gateway checks engines' health "
               "with it",
               p->e->url, status, error ? ": " : "", error ? error : "");
        return;
    }
    if (p->e->kind == GW_KIND_SGLANG)
        ask(p, "/get_weight_version", on_weight_version);
    else
        ask(p, "/is_paused", on_is_paused);
}

static void on_version(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct probe *p = arg;
    json_t *doc = object_of(status, body, len);
    json_t *v = json_object_get(doc, "version");
    bool vllm = json_is_string(v);
    copy_string(p->e->software, sizeof p->e->software, v);
    json_decref(doc);
    if (!vllm) { /* a 200 without a version is not vLLM's answer: say so, not just "200" */
        finish(p, 502,
               "engine %s answers neither SGLang's /get_server_info (%d) nor vLLM's "
               "/version (%d%s%s): not an engine the gateway can drive",
               p->e->url, p->info_status, status,
               error           ? ": "
               : status == 200 ? " without a version string"
                               : "",
               error ? error : "");
        return;
    }
    p->e->kind = GW_KIND_VLLM;
    ask(p, "/health", on_health);
}

static void on_info(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct probe *p = arg;
    struct gw_engine *e = p->e;
    if (status == 0) {
        finish(p, 502, "engine %s cannot be reached: %s", e->url, error);
        return;
    }
    json_t *doc = object_of(status, body, len);
    p->info_status = status;
    if (!doc) {
        ask(p, "/version", on_version);
        return;
    }
    e->kind = GW_KIND_SGLANG;
    json_int_t tp = json_integer_value(json_object_get(doc, "tp_size"));
    p->said_tp = tp >= 1 && tp <= INT_MAX ? (int)tp : 0;
    copy_string(e->software, sizeof e->software, json_object_get(doc, "version"));
    copy_string(e->model, sizeof e->model, json_object_get(doc, "model_path"));
    json_decref(doc);
    ask(p, "/health", on_health);
}

void gw_engine_register(struct gw *g, const struct gw_worker_spec *spec, bool list,
                        gw_registered_fn done, void *arg)
{
    struct probe *p = xcalloc(1, sizeof *p);
    *p = (struct probe){.g = g, .given_tp = spec->tp, .list = list, .done = done, .arg = arg};
    p->e = engine_new(g, spec->url);
    list_push_front(&g->probes, &p->link);
    ask(p, "/get_server_info", on_info);
}

/* ---- health --------------------------------------------------------------------------------- */

static void check_done(struct gw_engine *e)
{
    e->checking = false;
    gw_engine_unref(e);
}

/* e is dead: final (an engine that comes back is registered anew). */
static void die(struct gw_engine *e)
{
    e->dead = true;
    gw_engine_turns_fail(e);
    if (e->draining && e->listed)
        unlist(e);
}

/* One more failed health check (error: why, when the engine gave no answer). The check's own
 * reference keeps e alive through the failing of its turns, which may unlist it. */
static void check_failed(struct gw_engine *e, const char *error)
{
    bool held = e->paused || e->loading > 0;
    if (++e->fails == GW_SUSPECT_CHECKS && !e->cut)
        fprintf(stderr, "libra: serve: engine %lld (%s) is suspect: /health %s\n", (long long)e->id,
                e->url, error ? error : "did not answer 200");
    if (e->fails < GW_DEAD_CHECKS || (held && gw_now() - e->held_s < GW_UPDATE_GRACE_S))
        return;
    fprintf(stderr, "libra: serve: engine %lld (%s) is dead: %d health checks failed in a row\n",
            (long long)e->id, e->url, e->fails);
    die(e);
}

/* Reads an answer of /get_weight_version. */
static void read_version(struct gw_engine *e, int status, const char *body, size_t len)
{
    json_t *doc = e->listed ? object_of(status, body, len) : NULL;
    const char *v = json_string_value(json_object_get(doc, "weight_version"));
    if (v)
        gw_engine_version(e->g, e, v);
    json_decref(doc);
}

static void on_poll_version(void *arg, int status, const char *body, size_t len, const char *error)
{
    read_version(arg, status, body, len);
    check_done(arg);
}

static void on_asked_version(void *arg, int status, const char *body, size_t len, const char *error)
{
    read_version(arg, status, body, len);
    gw_engine_unref(arg);
}

static void on_poll_paused(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct gw_engine *e = arg;
    json_t *doc = e->listed ? object_of(status, body, len) : NULL;
    json_t *v = json_object_get(doc, "is_paused");
    if (json_is_boolean(v))
        gw_engine_pause(e, json_is_true(v));
    json_decref(doc);
    check_done(e);
}

static void poll(struct gw_engine *e, const char *path, net_response_fn fn)
{
    char url[GW_URL_MAX + 32];
    snprintf(url, sizeof url, "%s%s", e->url, path);
    net_client_request_within(e->g->client, "GET", url, NULL, NULL, 0, GW_CHECK_LIMIT_S, fn, e);
}

/* A health check passed: then the engine's weight version, or whether it is paused. */
static void check_passed(struct gw_engine *e)
{
    e->fails = 0;
    e->cut = false;
    e->unverified = false;
    if (e->kind == GW_KIND_SGLANG)
        poll(e, "/get_weight_version", on_poll_version);
    else if (e->polls_pause)
        poll(e, "/is_paused", on_poll_paused);
    else
        check_done(e);
}

/* An engine listed from its state-dir row (it did not answer at start) answers its health
 * check: one restarted with another TP than its row's would be routed to a wrong bucket, so it
 * is dead instead (registered anew, it is asked everything). No answer: asked at the next. */
static void on_poll_info(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct gw_engine *e = arg;
    json_t *doc = e->listed && !e->dead ? object_of(status, body, len) : NULL;
    bool answered = doc != NULL;
    json_int_t tp = json_integer_value(json_object_get(doc, "tp_size"));
    json_decref(doc);
    if (!answered) {
        check_done(e);
    } else if (tp && tp != e->tp) { /* one that does not say was given it */
        fprintf(stderr,
                "libra: serve: engine %lld (%s) of the state dir says it is TP%lld, not TP%d as "
                "its row lists it: dead (register it anew)\n",
                (long long)e->id, e->url, (long long)tp, e->tp);
        die(e);
        check_done(e);
    } else {
        check_passed(e);
    }
}

static void on_check(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct gw_engine *e = arg;
    if (!e->listed || e->dead) {
        check_done(e);
        return;
    }
    if (status != 200) {
        check_failed(e, error);
        check_done(e);
        return;
    }
    if (e->unverified && e->kind == GW_KIND_SGLANG) /* vLLM does not say its TP */
        poll(e, "/get_server_info", on_poll_info);
    else
        check_passed(e);
}

void gw_engine_ask_version(struct gw_engine *e)
{
    poll(gw_engine_ref(e), "/get_weight_version", on_asked_version);
}

void gw_engines_tick(struct gw *g)
{
    for (size_t i = 0; i < g->engines.n; i++) {
        struct gw_engine *e = g->engines.v[i];
        if (e->checking || e->dead)
            continue;
        e->checking = true;
        poll(gw_engine_ref(e), "/health", on_check);
    }
}

void gw_engines_free_all(struct gw *g)
{
    struct list_node *n = g->probes.front, *next;
    for (; n; n = next) { /* abandoned: their callers free what they hold */
        struct probe *p = list_entry(n, struct probe, link);
        next = n->next;
        p->done(p->arg, NULL, 0, "the gateway stopped");
        free(p);
    }
    for (n = g->all.front; n; n = next) { /* the probes' engines too */
        next = n->next;
        free(list_entry(n, struct gw_engine, link));
    }
    g->probes = g->all = (struct list){0};
    vec_free(&g->engines);
}
