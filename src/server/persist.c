/*
 * What the gateway writes into its state dir, and when (docs/serve.md "Durable state").
 *
 * The journal gets a record the moment the gateway learns from something: a trajectory as it
 * is queued for learning, a step as it ends. Everything else is state that is only ever needed
 * as it stands, so it is marked dirty and written once per commit, serialised on the loop when
 * the store's worker collects: a trajectory that takes twenty turns in one commit window is
 * written once. A trajectory's row goes in the commit that journals its end, so a restart finds
 * each trajectory in exactly one of the two.
 *
 * Calls that change persisted state are answered once their change is committed
 * (gw_reply_durable); while commits fail they are refused before they change anything.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"
#include "util/json.h"

#define STATE_LIST_DEFAULT 100 /* live trajectories GET /libra/v1/state lists by default */
#define STATE_LIST_MAX 1000000 /* ... at most (?limit=N) */

/* ---- what changes --------------------------------------------------------------------------- */

void gw_persist_traj(struct gw *g, const struct gw_traj *t)
{
    if (!g->persist || !t->id[0])
        return;
    map_put(&g->persist->dirty, t->id, (union map_value){.i64 = 0});
    gw_store_kick(g->persist->st);
}

void gw_persist_learnt(struct gw *g, const struct gw_learn_rec *r)
{
    if (g->persist)
        gw_store_journal(g->persist->st, "learn", gw_learn_rec_text(r));
}

void gw_persist_ended(struct gw *g, const struct gw_traj *t)
{
    if (!g->persist || !t->id[0])
        return;
    map_del(&g->persist->dirty, t->id, NULL);
    gw_store_del(g->persist->st, GW_STORE_TRAJS, t->id, 0);
}

void gw_persist_step(struct gw *g, int64_t learnt, double deadline_s)
{
    if (!g->persist)
        return;
    struct gw_step_rec s = {g->step, learnt, deadline_s};
    gw_store_journal(g->persist->st, "step", gw_step_rec_text(&s));
}

void gw_persist_engines(struct gw *g)
{
    if (!g->persist)
        return;
    g->persist->engines_dirty = true;
    gw_store_kick(g->persist->st);
}

void gw_persist_update(struct gw *g)
{
    if (!g->persist)
        return;
    g->persist->update_dirty = true;
    gw_store_kick(g->persist->st);
}

/* The weight update kept, with the engines that missed it, as meta "update". */
static void collect_update(struct gw *g, struct gw_store *st)
{
    struct gw_update_rec u = g->update;
    int64_t missed[GW_ENGINES_MAX];
    u.n_missed = 0;
    for (size_t i = 0; i < g->engines.n; i++)
        if (g->engines.v[i]->missed_update)
            missed[u.n_missed++] = g->engines.v[i]->id;
    u.missed = missed;
    gw_store_put(st, GW_STORE_META, "update", 0, gw_update_rec_text(&u));
}

static void put_meta(struct gw_store *st, const char *key, const char *value)
{
    gw_store_put(st, GW_STORE_META, key, 0, xstrdup(value));
}

static void put_meta_int(struct gw_store *st, const char *key, long long value)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", value);
    put_meta(st, key, text);
}

/* The gateway's scalars: small, so written with every commit. */
static void collect_meta(struct gw *g, struct gw_store *st)
{
    char layout[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&g->layout, layout, sizeof layout);
    put_meta(st, "mode", g->shadow ? "shadow" : "policy");
    put_meta(st, "layout", layout);
    put_meta_int(st, "step", (long long)g->step);
    put_meta_int(st, "updates", (long long)g->updates);
    put_meta_int(st, "next_engine_id", (long long)g->next_engine_id); /* ids are never reused */
    char pool[GW_POOL_REPLICAS_MAX * (GW_URL_MAX + 1)];
    gw_pool_urls(g, pool, sizeof pool);
    put_meta(st, "pool", pool);
    gw_pool_steering(g, pool, sizeof pool);
    put_meta(st, "pool_steer", pool);
    if (g->opt.n_pool) { /* the journal's deadlines replay by it */
        snprintf(pool, sizeof pool, "%.17g", g->opt.pool_timeout_s);
        put_meta(st, "pool_timeout", pool);
    }
}

void gw_persist_collect(void *arg)
{
    struct gw *g = arg;
    struct gw_persist *p = g->persist;
    size_t pos = 0;
    const char *id;
    union map_value v;
    while (map_next(&p->dirty, &pos, &id, NULL))
        if (map_get(&g->trajs, id, &v))
            gw_store_put(p->st, GW_STORE_TRAJS, id, 0, gw_traj_rec_text(v.ptr));
    map_free(&p->dirty);
    /* the update names engines by id: written with the engines, so its ids are theirs */
    bool update = (p->update_dirty || p->engines_dirty) && g->update.body;
    if (p->engines_dirty) {
        gw_store_clear(p->st, GW_STORE_ENGINES);
        for (size_t i = 0; i < g->engines.n; i++)
            gw_store_put(p->st, GW_STORE_ENGINES, g->engines.v[i]->url, g->engines.v[i]->id,
                         gw_engine_rec_text(g->engines.v[i]));
        p->engines_dirty = false;
    }
    for (; p->versions_saved < g->versions.n; p->versions_saved++)
        gw_store_put(p->st, GW_STORE_VERSIONS, g->versions.v[p->versions_saved],
                     g->version_steps.v[p->versions_saved], NULL);
    if (update)
        collect_update(g, p->st);
    p->update_dirty = false;
    collect_meta(g, p->st);
}

/* ---- durable answers ------------------------------------------------------------------------ */

struct durable {
    struct net_call *call; /* NULL once the client went away */
    int status;
    json_t *body;
};

static void on_durable_cancel(void *arg, struct net_call *c, enum net_cancel why)
{
    struct durable *d = arg;
    (void)c;
    (void)why;
    d->call = NULL; /* the commit still happens; nobody to tell */
}

static void on_durable(void *arg, bool ok)
{
    struct durable *d = arg;
    if (d->call && ok) {
        net_reply_json(d->call, d->status, d->body);
        d->body = NULL;
    } else if (d->call) {
        net_reply_error(d->call, 503, "server_error",
                        "state: the commit failed: the change is made but not on disk (it is "
                        "retried; GET /libra/v1/state says when commits succeed again)");
    }
    json_decref(d->body);
    free(d);
}

bool gw_durable_refused(struct gw *g, struct net_call *c)
{
    const char *why = g->persist ? gw_store_failing(g->persist->st) : NULL;
    if (!why)
        return false;
    net_reply_error(c, 503, "server_error", "state: commits fail (%s): nothing was changed", why);
    return true;
}

void gw_reply_durable(struct gw *g, struct net_call *c, int status, json_t *body)
{
    if (!g->persist) {
        net_reply_json(c, status, body);
        return;
    }
    struct durable *d = xcalloc(1, sizeof *d);
    *d = (struct durable){c, status, body};
    net_call_defer(c, on_durable_cancel, d);
    gw_store_wait(g->persist->st, on_durable, d);
}

int gw_persist_close(struct gw *g, char *err, size_t err_size)
{
    struct gw_persist *p = g->persist;
    if (!p)
        return 0;
    int rc = gw_store_close(p->st, err, err_size);
    map_free(&p->dirty);
    for (size_t i = 0; i < p->engines.n; i++)
        gw_engine_unref(p->engines.v[i]);
    vec_free(&p->engines);
    gw_update_rec_free(&p->update);
    free(p);
    g->persist = NULL;
    return rc;
}

/* ---- GET /libra/v1/state -------------------------------------------------------------------- */

/* The trees: a digest of their export, their size, and the export itself when full. */
static json_t *trees_json(struct gw *g, bool full)
{
    struct sched_model *m = sched_router_model(g->router);
    if (!m)
        return json_null();
    json_t *doc = sched_model_to_json(m);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    char digest[17];
    sched_hex_key(gw_hash(GW_HASH_SEED, text, strlen(text)), digest);
    free(text);
    struct sched_model_stats ms;
    sched_model_stats(m, &ms);
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "digest", digest, "prompts",
                          (json_int_t)ms.trees, "nodes", (json_int_t)ms.nodes, "learnt",
                          (json_int_t)g->learnt, "learn_pending", (json_int_t)g->finished.trajs.n,
                          "steps", (json_int_t)g->learn_steps);
    if (full)
        json_object_set_new(o, "json", doc);
    else
        json_decref(doc);
    return o;
}

/* The first limit live trajectories, in the order they started. */
static json_t *trajs_json(const struct gw *g, size_t limit)
{
    json_t *a = json_array();
    size_t pos = 0;
    union map_value v;
    while (json_array_size(a) < limit && map_next(&g->trajs, &pos, NULL, &v)) {
        const struct gw_traj *t = v.ptr;
        json_array_append_new(a, json_pack("{s:o, s:I, s:I, s:I, s:I, s:b}", "id",
                                           gw_bytes_json(t->id), "prompt", (json_int_t)t->prompt,
                                           "turns", (json_int_t)t->turns.n, "observations",
                                           (json_int_t)t->obs.n, "pending",
                                           (json_int_t)t->pending.n, "in_flight", t->in_flight));
    }
    return a;
}

static json_t *store_json(const struct gw *g)
{
    const struct gw_persist *p = g->persist;
    if (!p)
        return json_null();
    struct gw_store_stats s;
    gw_store_stats(p->st, &s);
    const char *failing = gw_store_failing(p->st);
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:{s:I, s:I, s:I, s:f}}", "dir",
                     gw_store_dir(p->st), "journal_rows", (json_int_t)s.journal_rows, "last_seq",
                     (json_int_t)s.last_seq, "next_seq", (json_int_t)s.next_seq, "commits",
                     (json_int_t)s.commits, "failures", (json_int_t)s.failures, "last_commit_ms",
                     s.last_commit_ms, "failing", failing ? json_string(failing) : json_null(),
                     "restored", "learnt", (json_int_t)p->replayed_trajs, "steps",
                     (json_int_t)p->replayed_steps, "live", (json_int_t)p->restored_live, "ms",
                     p->replay_ms);
}

/* ?trees=0|1 and ?limit=N into *full and *limit; answers 400 and returns -1 when malformed. */
static int state_query(struct net_call *c, bool *full, size_t *limit)
{
    const char *trees = net_call_query(c, "trees"), *lim = net_call_query(c, "limit");
    char *end = NULL;
    long long n = lim ? strtoll(lim, &end, 10) : STATE_LIST_DEFAULT;
    if (trees && strcmp(trees, "0") != 0 && strcmp(trees, "1") != 0) {
        net_reply_error(c, 400, "invalid_request_error", "trees: expected 0 or 1, not '%s'", trees);
        return -1;
    }
    if (lim && (end == lim || *end || n < 0 || n > STATE_LIST_MAX)) {
        net_reply_error(c, 400, "invalid_request_error", "limit: expected 0 to %d, not '%s'",
                        STATE_LIST_MAX, lim);
        return -1;
    }
    *full = trees && strcmp(trees, "1") == 0;
    *limit = (size_t)n;
    return 0;
}

void gw_state(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    bool full;
    size_t limit;
    if (state_query(c, &full, &limit) != 0)
        return;
    char layout[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&g->layout, layout, sizeof layout);
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:o, s:I, s:o, s:o}", "schema", "libra.state/1",
                  "mode", g->shadow ? "shadow" : sched_policy_name(g->cfg->sched.policy), "policy",
                  sched_policy_name(g->cfg->sched.policy), "step", (json_int_t)g->step, "layout",
                  layout, "engines", gw_engines_list(g), "trees", trees_json(g, full),
                  "live_trajectories", (json_int_t)map_size(&g->trajs), "trajectories",
                  trajs_json(g, limit), "store", store_json(g));
    net_reply_json(c, 200, o);
}
