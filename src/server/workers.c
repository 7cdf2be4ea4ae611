/*
 * The routes that manage engines. SGLang's model gateway worker API (/add_worker,
 * /remove_worker, /list_workers, /workers, /workers/{id}), so that slime, verl and other
 * clients of SGLang's router drive the gateway as they drive it; and libra's own
 * (/libra/v1/engines: ids, states, rank offsets; drain, lend, reclaim). Reads need nothing;
 * every call that changes the registry needs the admin token, checked before its input is read.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/internal.h"
#include "util/alloc.h"

/* An engine as SGLang's router lists a worker, with libra's fields beside. */
static json_t *worker_json(const struct gw *g, const struct gw_engine *e)
{
    json_t *o = gw_engine_json(e, gw_engine_rank_offset(g, e));
    enum gw_engine_state s = gw_engine_state(e);
    json_object_set_new(o, "model_id", json_string(e->model));
    json_object_set_new(o, "worker_type", json_string("regular"));
    json_object_set_new(o, "is_healthy",
                        json_boolean(s != GW_ENGINE_DEAD && s != GW_ENGINE_SUSPECT));
    json_object_set_new(o, "load", json_integer(e->in_flight));
    return o;
}

/* ---- adding --------------------------------------------------------------------------------- */

/* A registration an admin call waits for. */
struct adding {
    struct gw *g;
    struct net_call *call; /* NULL once the client left (the registration goes on) */
};

static void on_adding_cancel(void *arg, struct net_call *c, enum net_cancel why)
{
    struct adding *a = arg;
    a->call = NULL;
}

static void on_added(void *arg, struct gw_engine *e, int status, const char *msg)
{
    struct adding *a = arg;
    /* a pool replica's engine listed anew is not known to serve: it takes turns once the pool
     * wakes it, if its replica serves rollout */
    if (e && gw_pool_engine_off(a->g, e)) {
        e->lent = true;
        gw_persist_engines(a->g);
    }
    if (a->call && e) {
        char text[GW_URL_MAX + 64];
        snprintf(text, sizeof text, "added %s as engine %lld", e->url, (long long)e->id);
        gw_reply_durable(a->g, a->call, 200,
                         json_pack("{s:b, s:s, s:I, s:o}", "success", 1, "message", text,
                                   "worker_id", (json_int_t)e->id, "worker", worker_json(a->g, e)));
    } else if (a->call && status) {
        net_reply_error(a->call, status,
                        status == 502   ? "upstream_error"
                        : status == 409 ? "conflict_error"
                                        : "invalid_request_error",
                        "%s", msg);
    }
    free(a);
}

static void add(struct gw *g, struct net_call *c, const struct gw_worker_spec *spec)
{
    int port = net_server_port(g->server);
    if (gw_url_is_gateway(spec->url, g->opt.host, port)) { /* its calls would loop through it */
        char at[GW_URL_MAX];
        gw_listen_text(g->opt.host, port, at, sizeof at);
        net_reply_error(c, 400, "invalid_request_error",
                        "url: %s is this gateway (it listens on %s), not an engine", spec->url, at);
        return;
    }
    if (gw_durable_refused(g, c))
        return;
    struct adding *a = xcalloc(1, sizeof *a);
    *a = (struct adding){.g = g, .call = c};
    net_call_defer(c, on_adding_cancel, a);
    gw_engine_register(g, spec, true, on_added, a);
}

void gw_add_worker(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    struct gw_worker_spec spec;
    char err[256];
    if (!gw_admin(g, c))
        return;
    if (gw_worker_query_parse(net_call_query(c, "url"), net_call_query(c, "tp"),
                              net_call_query(c, "worker_type"), &spec, err, sizeof err) != 0) {
        net_reply_error(c, 400, "invalid_request_error", "%s", err);
        return;
    }
    add(g, c, &spec);
}

/* ---- removing ------------------------------------------------------------------------------- */

/* Removes e (at once when idle or dead, else once its turns end) and answers c. */
static void remove_engine(struct gw *g, struct net_call *c, struct gw_engine *e)
{
    if (gw_durable_refused(g, c))
        return;
    gw_engine_ref(e);
    int in_flight = e->in_flight;
    bool gone = gw_engine_remove(e);
    char text[GW_URL_MAX + 128];
    if (gone)
        snprintf(text, sizeof text, "removed engine %lld (%s)", (long long)e->id, e->url);
    else
        snprintf(text, sizeof text,
                 "engine %lld (%s) drains: it is removed once its %d turns in flight end",
                 (long long)e->id, e->url, in_flight);
    gw_reply_durable(g, c, 200,
                     json_pack("{s:b, s:s, s:I, s:s, s:s}", "success", 1, "message", text,
                               "worker_id", (json_int_t)e->id, "url", e->url, "state",
                               gone ? "removed" : "draining"));
    gw_engine_unref(e);
}

/* The listed engine a path segment or query value names, or NULL with c answered 400/404. */
static struct gw_engine *named(struct gw *g, struct net_call *c, const char *text)
{
    int64_t id;
    char url[GW_URL_MAX], err[256];
    if (!text || gw_engine_ref_parse(text, &id, url, err, sizeof err) != 0) {
        net_reply_error(c, 400, "invalid_request_error", "%s",
                        text ? err : "url: missing (?url=http://HOST:PORT)");
        return NULL;
    }
    struct gw_engine *e = url[0] ? gw_engine_by_url(g, url) : gw_engine_by_id(g, id);
    if (!e)
        net_reply_error(c, 404, "not_found_error", "no engine %s is listed", text);
    return e;
}

void gw_remove_worker(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    if (!gw_admin(g, c))
        return;
    const char *url = net_call_query(c, "url");
    if (url && strncasecmp(url, "http://", 7) != 0) {
        net_reply_error(c, 400, "invalid_request_error", "url: expected http://HOST:PORT");
        return;
    }
    struct gw_engine *e = named(g, c, url);
    if (e)
        remove_engine(g, c, e);
}

/* ---- listing -------------------------------------------------------------------------------- */

void gw_list_workers(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    json_t *urls = json_array();
    for (size_t i = 0; i < g->engines.n; i++)
        json_array_append_new(urls, json_string(g->engines.v[i]->url));
    net_reply_json(c, 200, json_pack("{s:o}", "urls", urls));
}

void gw_workers(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    if (net_call_method(c) == NET_POST) {
        struct gw_worker_spec spec;
        char err[256];
        size_t len;
        if (!gw_admin(g, c))
            return;
        const char *body = net_call_body(c, &len);
        if (gw_worker_body_parse(body, len, &spec, err, sizeof err) != 0) {
            net_reply_error(c, 400, "invalid_request_error", "%s", err);
            return;
        }
        add(g, c, &spec);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < g->engines.n; i++)
        json_array_append_new(list, worker_json(g, g->engines.v[i]));
    net_reply_json(c, 200,
                   json_pack("{s:o, s:I}", "workers", list, "total", (json_int_t)g->engines.n));
}

void gw_worker(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    bool delete = net_call_method(c) == NET_DELETE;
    if (delete &&!gw_admin(g, c))
        return;
    struct gw_engine *e = named(g, c, net_call_path(c) + strlen("/workers/"));
    if (e && delete)
        remove_engine(g, c, e);
    else if (e)
        net_reply_json(c, 200, worker_json(g, e));
}

/* ---- libra's engine routes ------------------------------------------------------------------ */

void gw_engines(void *ctx, struct net_call *c)
{
    net_reply_json(c, 200, gw_engines_json(ctx));
}

void gw_engine_action(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    int64_t id;
    char action[GW_ACTION_MAX], err[256] = "";
    if (!gw_admin(g, c))
        return;
    const char *rest = net_call_path(c) + strlen("/libra/v1/engines/");
    if (gw_engine_action_parse(rest, &id, action, err, sizeof err) != 0) {
        net_reply_error(c, 404, "not_found_error", "%s (actions: drain, lend, reclaim)", err);
        return;
    }
    struct gw_engine *e = gw_engine_by_id(g, id);
    if (!e) {
        net_reply_error(c, 404, "not_found_error", "no engine %lld is listed", (long long)id);
        return;
    }
    if (strcmp(action, "drain") == 0) {
        remove_engine(g, c, e);
        return;
    }
    if (gw_pool_serves(g, e->url)) { /* its GPUs change sides only by the pool's handshake */
        net_reply_error(c, 409, "conflict_error",
                        "engine %lld is an elastic pool replica's: lend and reclaim it through "
                        "/libra/v1/pool",
                        (long long)id);
        return;
    }
    enum gw_engine_state s = gw_engine_state(e);
    if (strcmp(action, "lend") == 0 && (s == GW_ENGINE_DEAD || s == GW_ENGINE_DRAINING)) {
        net_reply_error(c, 409, "conflict_error", "engine %lld is %s: it cannot be lent",
                        (long long)id, gw_engine_state_name(s));
        return;
    }
    if (strcmp(action, "reclaim") == 0 && !e->lent) { /* a lent engine may also be dead */
        net_reply_error(c, 409, "conflict_error",
                        "engine %lld is %s: it is not lent, so it cannot be reclaimed",
                        (long long)id, gw_engine_state_name(s));
        return;
    }
    if (gw_durable_refused(g, c))
        return;
    e->lent = strcmp(action, "lend") == 0;
    gw_persist_engines(g);
    gw_reply_durable(g, c, 200, worker_json(g, e));
}
