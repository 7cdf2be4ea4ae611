/*
 * The state dir at start-up: the gateway picks up where it stopped (docs/serve.md "Durable
 * state").
 *
 * Why a replay and not a snapshot of the trees: the trees are not all the model is (its
 * rebuild history, the predictor, the per-prompt service statistics and the intern table all
 * feed later learning), and none of it has an exact export. The journal holds what the
 * gateway learnt from, in order, so running it through the very calls the live gateway made —
 * gw_learn_rec_add as each trajectory was queued, gw_learn_finished at each step, the deadline
 * the step set — gives back the same model, bit for bit. Then each live trajectory re-enters
 * the routers: started with its first context, told each turn's tokens and, between turns,
 * the returns it observed, so its next turn is routed from the path it had. How long a replay
 * takes: docs/serve.md "Durable state".
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"
#include "util/parse.h"

/* What a row reader needs: the gateway and where to say what is wrong. */
struct reader {
    struct gw *g;
    char *err;
    size_t size;
};

static int row_error(struct reader *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int row_error(struct reader *rd, const char *fmt, ...)
{
    int n = snprintf(rd->err, rd->size, "state dir '%s': ", rd->g->opt.state_dir);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < rd->size)
        vsnprintf(rd->err + n, rd->size - (size_t)n, fmt, ap);
    va_end(ap);
    return LIBRA_EINVAL;
}

/* ---- scalars, versions, engines ------------------------------------------------------------- */

/* A decimal integer in [0, GW_COUNTER_MAX]: a value strtoll cannot hold is out of range too,
 * not the LLONG_MAX it saturates to. */
static bool counter_value(const char *s, long long *out)
{
    char *end = NULL;
    errno = 0;
    *out = s ? strtoll(s, &end, 10) : 0;
    return s && end != s && !*end && errno == 0 && *out >= 0 && *out <= GW_COUNTER_MAX;
}

static int read_meta(void *arg, const struct gw_store_row *row)
{
    struct reader *rd = arg;
    struct gw *g = rd->g;
    struct libra_error e = {0};
    long long n;
    if (strcmp(row->key, "schema_version") == 0)
        return 0;
    if (strcmp(row->key, "mode") == 0) {
        if (!row->body || (strcmp(row->body, "shadow") != 0 && strcmp(row->body, "policy") != 0))
            return row_error(rd, "meta.mode: expected shadow or policy");
        bool shadow = strcmp(row->body, "shadow") == 0;
        if (shadow != g->shadow)
            fprintf(stderr, "libra: serve: state: mode %s, as the state dir has it\n",
                    shadow ? "shadow" : sched_policy_name(g->cfg->sched.policy));
        g->shadow = shadow;
    } else if (strcmp(row->key, "layout") == 0) {
        if (spec_bucket_parse(&g->persist->layout, row->body ? row->body : "", "meta.layout", &e))
            return row_error(rd, "meta.layout '%.200s': column %d: %s", row->body ? row->body : "",
                             e.col, e.msg);
        g->persist->has_layout = true;
    } else if (strcmp(row->key, "step") == 0) {
        if (!counter_value(row->body, &n))
            return row_error(rd, "meta.step: expected a step number from 0 to 2^62");
        g->step = n;
    } else if (strcmp(row->key, "pool") == 0) {
        char mine[GW_POOL_REPLICAS_MAX * (GW_URL_MAX + 1)];
        gw_pool_urls(g, mine, sizeof mine);
        if (!row->body || strcmp(row->body, mine) != 0)
            return row_error(rd,
                             "meta.pool: the state's pool replicas are '%s'; give the same "
                             "--pool-replica flags in that order (now '%s')",
                             row->body ? row->body : "", mine);
    } else if (strcmp(row->key, "pool_steer") == 0) {
        char mine[64];
        gw_pool_steering(g, mine, sizeof mine);
        if (!row->body || strcmp(row->body, mine) != 0)
            return row_error(rd,
                             "meta.pool_steer: the state's pool was steered '%s' (its journal "
                             "replays the signals by it); give the same --pool-steer, "
                             "--pool-core-replicas, tp= and ehp.signal (now '%s')",
                             row->body ? row->body : "", mine);
    } else if (strcmp(row->key, "pool_changes") == 0) {
        if (!counter_value(row->body, &n))
            return row_error(rd, "meta.pool_changes: expected a count from 0 to 2^62");
        gw_pool_resume_changes(g, (uint64_t)n);
    } else if (strcmp(row->key, "pool_clock") == 0) {
        double t;
        char why[64 + PARSE_WHY_EXTRA];
        if (parse_double(row->body ? row->body : "", 0, 9007199254740992.0, &t, why, sizeof why))
            return row_error(rd, "meta.pool_clock: %s", why);
        gw_pool_resume_clock(g, t);
    } else if (strcmp(row->key, "pool_timeout") == 0) {
        char mine[32];
        snprintf(mine, sizeof mine, "%.17g", g->opt.pool_timeout_s);
        if (!row->body || strcmp(row->body, mine) != 0)
            return row_error(rd,
                             "meta.pool_timeout: the state's pool gave a handshake %s s (its "
                             "journal replays their deadlines by it); give the same "
                             "--pool-timeout-s (now %s)",
                             row->body ? row->body : "", mine);
    } else if (strcmp(row->key, "update") == 0) {
        char msg[256];
        gw_update_rec_free(&g->persist->update);
        if (gw_update_rec_parse(row->body ? row->body : "", row->len, &g->persist->update, msg,
                                sizeof msg) != 0)
            return row_error(rd, "meta.update.%s", msg);
    } else if (strcmp(row->key, "next_engine_id") == 0) {
        if (!counter_value(row->body, &n))
            return row_error(rd, "meta.next_engine_id: expected an id from 0 to 2^62");
        if (n > g->next_engine_id) /* a removed engine's id is not given again */
            g->next_engine_id = n;
    } else if (strcmp(row->key, "updates") == 0) {
        if (!counter_value(row->body, &n))
            return row_error(rd, "meta.updates: expected a count from 0 to 2^62");
        g->updates = (uint64_t)n;
    } else {
        return row_error(rd, "meta.%s: unknown key", row->key);
    }
    return 0;
}

static int read_version(void *arg, const struct gw_store_row *row)
{
    struct reader *rd = arg;
    struct gw *g = rd->g;
    if (!row->key || strlen(row->key) >= GW_VERSION_MAX || row->num < 0 ||
        row->num > GW_COUNTER_MAX)
        return row_error(rd,
                         "versions: a version of at most %d bytes with a step from 0 to 2^62 "
                         "is expected",
                         GW_VERSION_MAX - 1);
    vec_push(&g->versions, xstrdup(row->key));
    vec_push(&g->version_steps, row->num);
    return 0;
}

static int read_engine(void *arg, const struct gw_store_row *row)
{
    struct reader *rd = arg;
    struct gw *g = rd->g;
    struct gw_persist *p = g->persist;
    char msg[256], url[GW_URL_MAX];
    int64_t last = p->engines.n ? p->engines.v[p->engines.n - 1]->id : -1;
    if (row->num < 0 || row->num > GW_COUNTER_MAX) /* the next one registered takes the next */
        return row_error(rd, "engines: id %lld is outside 0 to 2^62", (long long)row->num);
    if (row->num <= last)
        return row_error(rd, "engines: ids are not ascending (id %lld)", (long long)row->num);
    if (p->engines.n == GW_ENGINES_MAX)
        return row_error(rd, "engines: more than %d rows", GW_ENGINES_MAX);
    if (!row->key || gw_engine_url(row->key, strlen(row->key), url, msg, sizeof msg) != 0)
        return row_error(rd, "engines.%lld: %s", (long long)row->num, row->key ? msg : "no URL");
    struct gw_engine *e = gw_engine_stored(g, row->num, url);
    vec_push(&p->engines, e);
    if (gw_engine_rec_parse(row->body ? row->body : "", row->len, e, msg, sizeof msg) != 0)
        return row_error(rd, "engines.%lld.%s", (long long)row->num, msg);
    return 0;
}

/* The weight update the state kept becomes the gateway's, its engines flagged as missing it. */
static int take_update(struct reader *rd)
{
    struct gw *g = rd->g;
    struct gw_persist *p = g->persist;
    for (size_t i = 0; i < p->update.n_missed; i++) {
        struct gw_engine *e = NULL;
        for (size_t k = 0; k < p->engines.n && !e; k++)
            if (p->engines.v[k]->id == p->update.missed[i])
                e = p->engines.v[k];
        if (!e)
            return row_error(rd, "meta.update.missed: engine %lld is not in the state",
                             (long long)p->update.missed[i]);
        e->missed_update = true;
    }
    free(p->update.missed);
    p->update.missed = NULL;
    p->update.n_missed = 0;
    gw_update_rec_free(&g->update);
    g->update = p->update;
    p->update = (struct gw_update_rec){0};
    return 0;
}

int gw_persist_open(struct gw *g, char *err, size_t err_size)
{
    struct gw_persist *p = xcalloc(1, sizeof *p);
    map_init(&p->dirty);
    int rc = gw_store_open(&p->st, g->opt.state_dir, err, err_size);
    if (rc != 0) {
        free(p);
        return rc;
    }
    g->persist = p;
    struct reader rd = {.g = g, .err = err, .size = err_size};
    rc = gw_store_read(p->st, GW_STORE_META, read_meta, &rd, err, err_size);
    if (rc == 0)
        rc = gw_store_read(p->st, GW_STORE_VERSIONS, read_version, &rd, err, err_size);
    if (rc == 0)
        rc = gw_store_read(p->st, GW_STORE_ENGINES, read_engine, &rd, err, err_size);
    if (rc == 0)
        rc = take_update(&rd);
    p->versions_loaded = p->versions_saved = g->versions.n;
    return rc;
}

/* ---- the journal ---------------------------------------------------------------------------- */

struct replayer {
    struct gw_replay *rp;
    struct gw_store *st;
    char *err;
    size_t size;
    struct gw_learn_rec rec; /* reused */
};

static int journal_error(struct replayer *r, int64_t seq, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int journal_error(struct replayer *r, int64_t seq, const char *fmt, ...)
{
    int n = snprintf(r->err, r->size, "state dir '%s': journal seq %lld: ", gw_store_dir(r->st),
                     (long long)seq);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->size)
        vsnprintf(r->err + n, r->size - (size_t)n, fmt, ap);
    va_end(ap);
    return LIBRA_EINVAL;
}

/* One journal record, applied as the live gateway applied it. */
static int replay_row(void *arg, const struct gw_store_row *row)
{
    struct replayer *r = arg;
    struct gw_replay *rp = r->rp;
    char msg[256];
    bool learns = sched_router_model(rp->router) != NULL;
    const char *body = row->body ? row->body : "";
    if (row->key && strcmp(row->key, "learn") == 0) {
        if (gw_learn_rec_parse(body, row->len, &r->rec, msg, sizeof msg))
            return journal_error(r, row->num, "%s", msg);
        if (learns)
            gw_learn_rec_add(rp->finished, &r->rec);
        rp->trajs++;
        return 0;
    }
    if (row->key && strcmp(row->key, "pool") == 0) {
        if (!rp->g)
            return 0; /* a replay of what was learnt only */
        if (gw_pool_replay(rp->g, body, row->len, msg, sizeof msg) != 0)
            return journal_error(r, row->num, "%s", msg);
        return 0;
    }
    struct gw_step_rec s;
    if (!row->key || strcmp(row->key, "step") != 0)
        return journal_error(r, row->num, "unknown kind (expected learn, step or pool)");
    if (gw_step_rec_parse(body, row->len, &s, msg, sizeof msg))
        return journal_error(r, row->num, "%s", msg);
    if (learns && s.learnt != (int64_t)rp->finished->trajs.n)
        return journal_error(r, row->num,
                             "the step learnt %lld trajectories, the journal has %zu since the "
                             "step before",
                             (long long)s.learnt, rp->finished->trajs.n);
    gw_learn_finished(rp->router, rp->finished, rp->learnt);
    if (isfinite(s.deadline_s))
        sched_router_set_deadline(rp->router, s.deadline_s);
    rp->steps++;
    return 0;
}

int gw_journal_replay(struct gw_store *st, struct gw_replay *rp, char *err, size_t err_size)
{
    struct replayer r = {.rp = rp, .st = st, .err = err, .size = err_size};
    int rc = gw_store_read(st, GW_STORE_JOURNAL, replay_row, &r, err, err_size);
    gw_learn_rec_free(&r.rec);
    return rc;
}

/* ---- live trajectories ---------------------------------------------------------------------- */

/* Re-enters t into router r: its start, each turn's tokens and the returns between turns. */
static void rejoin(struct gw *g, struct sched_router *r, const struct gw_traj *t)
{
    struct gw_registry gr;
    struct sched_decision d;
    /* any engine that takes turns, older ones too: the placements made here only rebuild the
     * path (t's next turn is placed anew, without them), and an empty registry would lose t */
    gw_registry(g, NULL, &gr);
    const struct sched_registry *regp = &gr.reg;
    struct sched_start s = {.traj = t->rid,
                            .prompt = t->prompt,
                            .prompt_tokens = t->start_tokens,
                            .true_remaining_tokens = -1,
                            .now_s = gw_now()};
    if (sched_router_start(r, regp, &s, &d) != 0)
        return;
    for (size_t k = 0; k < t->turns.n; k++) {
        const struct trace_turn *tu = &t->turns.v[k];
        sched_router_turn_done(r, t->rid, tu->generated_tokens);
        if (k + 1 == t->turns.n || tu->n_calls == 0)
            continue;
        struct sched_return ev = {.traj = t->rid,
                                  .obs = t->obs.v + t->returns_at.v[k],
                                  .n_obs = tu->n_calls,
                                  .context_tokens = t->turns.v[k + 1].prompt_tokens,
                                  .true_remaining_tokens = -1,
                                  .sibling_mean_tokens = NAN,
                                  .now_s = s.now_s};
        sched_router_tool_return(r, regp, &ev, &d);
    }
}

static int restore_traj(void *arg, const struct gw_store_row *row)
{
    struct reader *rd = arg;
    struct gw *g = rd->g;
    char msg[256];
    struct gw_traj *t = xcalloc(1, sizeof *t);
    int rc = 0;
    if (gw_traj_rec_parse(row->body ? row->body : "", row->len, t, msg, sizeof msg) != 0)
        rc = row_error(rd, "trajectories '%s': %s", row->key ? row->key : "", msg);
    else if (!row->key || strcmp(row->key, t->id) != 0 || map_get(&g->trajs, t->id, NULL))
        rc = row_error(rd, "trajectories '%s': the row's key and its id differ",
                       row->key ? row->key : "");
    if (rc != 0) {
        gw_traj_clear(t);
        free(t);
        return rc;
    }
    if (!gw_engine_by_id(g, t->instance))
        t->instance = -1;
    t->rid = g->next_rid++;
    t->last_active_s = gw_now();
    t->failed = t->turns.n == 0; /* its first turn is to be sent again */
    map_put(&g->trajs, t->id, (union map_value){.ptr = t});
    rejoin(g, g->router, t);
    rejoin(g, g->sticky, t);
    g->persist->restored_live++;
    return 0;
}

/* Each weight version the engines had at this start and the state did not is a step, as it
 * would have been had the gateway been running. */
static void new_versions(struct gw *g)
{
    struct gw_persist *p = g->persist;
    for (size_t i = p->versions_loaded; p->versions_loaded && i < g->versions.n; i++) {
        g->step++;
        g->version_steps.v[i] = g->step;
        for (size_t k = 0; k < g->engines.n; k++)
            if (strcmp(g->engines.v[k]->version, g->versions.v[i]) == 0)
                g->engines.v[k]->generation = g->step;
        gw_learn_step(g);
    }
}

int gw_persist_restore(struct gw *g, char *err, size_t err_size)
{
    struct gw_persist *p = g->persist;
    struct reader rd = {.g = g, .err = err, .size = err_size};
    struct gw_replay rp = {g, g->router, &g->finished, &g->learnt, 0, 0};
    double t0 = gw_now();
    int rc = gw_journal_replay(p->st, &rp, err, err_size);
    p->replayed_trajs = rp.trajs;
    p->replayed_steps = rp.steps;
    g->learn_steps = rp.steps;
    if (rc == 0)
        rc = gw_store_read(p->st, GW_STORE_TRAJS, restore_traj, &rd, err, err_size);
    if (rc != 0)
        return rc;
    new_versions(g);
    p->replay_ms = (gw_now() - t0) * 1e3;
    fprintf(stderr, /* nothing replayed too: the operator sees which state dir was taken */
            "libra: serve: state: %s: replayed %lld learnt trajectories and %lld steps, "
            "restored %lld live trajectories, in %.0f ms\n",
            g->opt.state_dir, (long long)p->replayed_trajs, (long long)p->replayed_steps,
            (long long)p->restored_live, p->replay_ms);
    return 0;
}
