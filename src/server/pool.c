/*
 * The elastic pool live (docs/serve.md "The elastic pool"): the gateway lends hybrid training
 * replicas to rollout and takes them back, with the trainer's consent, carrying out what the
 * pure pool (ehp/pool.h) decides. Every state decision is the pure pool's: this file adds only
 * the requests the trainer is asked to act on, the engines' sleep and wake calls, and the
 * durable record of each change.
 *
 * The pool's words: a hybrid replica serves rollout until it *joins* training (ehp_pool_join)
 * and goes back when *released* (ehp_pool_release). The trainer's words are the other way
 * round: it *lends* a replica to rollout and *reclaims* it. So:
 *
 *   reclaim   ehp_pool_join at once (REQUESTED, the pool's deadline); the engine is drained
 *             (new turns go elsewhere, its turns are aborted and resumed elsewhere) and its
 *             memory released; then the request is ready and the trainer, at a step boundary,
 *             confirms `retaken` before it touches the GPUs: STARTED, FETCHED and SYNCED at
 *             its version, ACTIVATING, ACTIVE from its next step. Not confirmed by the
 *             deadline: the pool fails the join, and the engine is woken again.
 *   lend      a request held here (the replica still trains); the trainer frees the GPUs at a
 *             step boundary and confirms `released`: ehp_pool_release (RETURNED) and the
 *             engine is woken and serves again. Not confirmed in --pool-timeout-s: the request
 *             expires and the replica goes on training. A lend of a replica whose reclaim is
 *             not yet taken cancels that reclaim (CANCELLED).
 *
 * The gateway is the one place both sides meet, so a race ends the same way every time: a
 * confirmation is accepted only while its request is pending (request id, and the replica's
 * generation for reclaims), and the trainer acts on a `retaken` only once it is accepted, so a
 * reclaim that timed out cannot leave the GPUs to both; a `released` that comes too late is
 * refused and the trainer takes its GPUs back.
 *
 * Durability: each change is one journal record (server/pool_rec.h) committed before its call
 * is answered; a restart replays them through apply(), the same function, on the pool's clock
 * (which does not count the time the gateway was down), so a handshake under way resumes. The
 * engines' state is not kept: at start each is put to sleep or woken as its role says.
 */
#include <errno.h>
#include <event2/event.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ehp/pool.h"
#include "server/internal.h"
#include "server/pool_rec.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

#define POOL_TICK_S 0.1     /* deadlines and retries are looked at this often */
#define POOL_RETRY_S 0.2    /* a sleep or wake call that failed is tried again after this */
#define POOL_WAIT_MAX_S 300 /* a long poll waits at most this long */
/* `after` without wait_s: a long poll still (what a client giving `after` wants), within the
 * minute most HTTP clients wait for an answer */
#define POOL_WAIT_DEFAULT_S 30
/* A restart resumes `changes` this far past the count its state dir kept: the changes shown
 * after the last commit and lost with a crash are far fewer (each asks for a commit). */
#define POOL_RESTART_CHANGES (UINT64_C(1) << 20)

enum engine_state { ENGINE_UNKNOWN, ENGINE_AWAKE, ENGINE_ASLEEP };

struct replica {
    struct gw_pool *pl;
    int index;
    char url[GW_URL_MAX];
    enum engine_state engine; /* as its last sleep or wake call left it */
    /* the listed engine `engine` is of: one listed anew at the URL (removed and added back)
     * is in an unknown state, and takes no turn until put in its replica's role */
    int64_t engine_id;
    struct gw_engine *calling; /* the engine a sleep or wake call is in flight to (a ref) */
    double retry_at_s;         /* gw_now() before which no call is tried again */
    /* the request the trainer is to act on: GW_POOL_OP_LEND, GW_POOL_OP_RECLAIM or NONE */
    enum gw_pool_op req;
    int64_t req_id;
    int64_t confirmed_id;    /* the last request confirmed (a late repeat is told so), or 0 */
    uint64_t req_generation; /* the replica's generation when it was made */
    double req_deadline_s;   /* the pool's clock: a lend expires then */
    char reason[GW_POOL_REASON_MAX];
};

struct waiter {
    struct gw_pool *pl;
    struct net_call *call;
    struct event *timer;
    uint64_t after; /* answered once `changes` is past it (or at its timer, or a stop) */
};

struct gw_pool {
    struct gw *g;
    struct ehp_pool *pool;
    int n;
    struct replica *rep;
    double timeout_s;
    bool live;           /* false while the journal is replayed */
    double clock_base_s; /* the pool's clock at wall_base_s */
    double wall_base_s;
    double resume_s; /* the clock a graceful stop kept (meta.pool_clock); 0: none */
    double last_t_s; /* of the last record applied */
    int64_t next_request;
    uint64_t changes; /* every change, for long polls */
    ehp_decision_vec dec;
    VEC(struct waiter *) waiters; /* long polls held, in no order */
    struct event *tick;
    uint64_t counts[4]; /* lends, reclaims, expired, failed joins */
    bool steer;         /* --pool-steer: the signal at each step end asks for lends, reclaims */
    int core;           /* the trainer's core replicas (--pool-core-replicas) */
    int replica_gpus;   /* GPUs of a hybrid replica: its engine's TP when steered, else 1 */
    double step_mark_s; /* gw_now() at the last step end (the rollout is measured since) */
    double avail_gpu_s; /* rollout GPU-seconds from step_mark_s to avail_mark_s */
    double avail_mark_s;
    bool signalled; /* a signal was issued */
};

enum { COUNT_LENDS, COUNT_RECLAIMS, COUNT_EXPIRED, COUNT_FAILED };

/* ---- set-up --------------------------------------------------------------------------------- */

int gw_pool_new(struct gw *g, char *err, size_t err_size)
{
    const struct gw_options *o = &g->opt;
    if (o->n_pool == 0)
        return 0;
    if (o->n_pool > GW_POOL_REPLICAS_MAX)
        return error_text(err, err_size, "--pool-replica: more than %d replicas",
                          GW_POOL_REPLICAS_MAX);
    int n = (int)o->n_pool, core = o->pool_core_replicas;
    /* The gateway knows the trainer's GPUs only as far as steering needs: its core replicas
     * (GPUs 0 ..) and one hybrid replica per --pool-replica after them, each of its engine's
     * TP (1 when not steered: the roles are per replica anyway). */
    int rg = o->pool_steer ? o->pool[0].tp : 1;
    int *gpu = xmallocarray((size_t)(core + n) * (size_t)rg, sizeof *gpu);
    for (int k = 0; k < (core + n) * rg; k++)
        gpu[k] = k;
    struct ehp_pool_config c = {
        .gpus = (core + n) * rg,
        .gpus_per_node = rg,
        .replica_gpus = rg,
        .core_replicas = core,
        .core_gpu = gpu,
        .hybrid_replicas = n,
        .hybrid_gpu = gpu + core * rg,
        .batch_trajectories = core,
    };
    ehp_params_default(&c.params);
    c.params.join_timeout_s = o->pool_timeout_s;
    c.params.rule =
        g->cfg->ehp.signal == SPEC_EHP_REFERENCE ? EHP_RULE_REFERENCE : EHP_RULE_BALANCE;
    cost_lifecycle_params_default(&c.lifecycle);
    struct gw_pool *pl = xcalloc(1, sizeof *pl);
    struct libra_error e = {0};
    int rc = ehp_pool_new(&c, &pl->pool, &e);
    free(gpu);
    if (rc != 0) {
        free(pl);
        return error_text(err, err_size, "--pool-replica: %s", e.msg);
    }
    pl->g = g;
    pl->n = n;
    pl->timeout_s = o->pool_timeout_s;
    pl->steer = o->pool_steer;
    pl->core = core;
    pl->replica_gpus = rg;
    pl->next_request = 1;
    pl->rep = xcalloc((size_t)n, sizeof *pl->rep);
    for (int h = 0; h < n; h++) {
        pl->rep[h].pl = pl;
        pl->rep[h].index = h;
        pl->rep[h].engine_id = -1;
        snprintf(pl->rep[h].url, sizeof pl->rep[h].url, "%s", o->pool[h].url);
    }
    g->pool = pl;
    return 0;
}

/* ---- the pool's clock ----------------------------------------------------------------------- */

static double clock_now(const struct gw_pool *pl)
{
    double t = pl->clock_base_s + (gw_now() - pl->wall_base_s);
    return t > pl->last_t_s ? t : pl->last_t_s;
}

void gw_pool_free(struct gw *g)
{
    struct gw_pool *pl = g->pool;
    if (!pl)
        return;
    if (pl->live && g->persist) { /* goes into the stop's last commit: the clock resumes here */
        char text[32];
        snprintf(text, sizeof text, "%.17g", clock_now(pl));
        gw_store_put(g->persist->st, GW_STORE_META, "pool_clock", 0, xstrdup(text));
    }
    for (size_t i = 0; i < pl->waiters.n; i++) { /* none once the server is freed */
        event_free(pl->waiters.v[i]->timer);
        free(pl->waiters.v[i]);
    }
    vec_free(&pl->waiters);
    if (pl->tick)
        event_free(pl->tick);
    /* a sleep or wake call in flight never answers now (the loop has stopped); the engine it
     * holds goes with every other (gw_engines_free_all) */
    ehp_pool_free(pl->pool);
    vec_free(&pl->dec);
    free(pl->rep);
    free(pl);
    g->pool = NULL;
}

/* ---- applying a change: the live gateway and the replay ------------------------------------- */

static const struct ehp_hybrid *hybrid(const struct gw_pool *pl, int h)
{
    return ehp_pool_hybrid(pl->pool, h);
}

static int conflict(char *msg, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int conflict(char *msg, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return 409;
}

static const char *join_name(enum ehp_join j)
{
    static const char *const names[] = {"none",       "requested", "fetching_state", "zero_sync",
                                        "activating", "active",    "cancelled",      "failed"};
    return names[j];
}

static const char *role_name(enum ehp_role r)
{
    static const char *const names[] = {"core_training", "core_rollout", "hybrid_rollout",
                                        "hybrid_joining", "hybrid_training"};
    return names[r];
}

static enum ehp_role role_of(const struct gw_pool *pl, int h)
{
    return ehp_pool_role(pl->pool, hybrid(pl, h)->gpu[0]);
}

/* A join of h ended (cancelled, failed, returned): its reclaim, if pending, is no more. */
static void joins_ended(struct gw_pool *pl)
{
    for (size_t i = 0; i < pl->dec.n; i++) {
        const struct ehp_decision *d = &pl->dec.v[i];
        if (d->replica < 0 || (d->kind != EHP_DEC_CANCELLED && d->kind != EHP_DEC_FAILED &&
                               d->kind != EHP_DEC_RETURNED))
            continue;
        struct replica *r = &pl->rep[d->replica];
        pl->counts[COUNT_FAILED] += d->kind == EHP_DEC_FAILED;
        if (r->req == GW_POOL_OP_RECLAIM && r->req_generation == d->generation)
            r->req = GW_POOL_OP_NONE;
    }
}

static int apply_reclaim(struct gw_pool *pl, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    struct replica *r = &pl->rep[rc->replica];
    if (r->req != GW_POOL_OP_NONE)
        return conflict(msg, size, "replica %d has a %s request (%lld) pending", r->index,
                        gw_pool_op_name(r->req), (long long)r->req_id);
    if (hybrid(pl, r->index)->join != EHP_JOIN_NONE)
        return conflict(msg, size, "replica %d is not serving rollout (it is %s)", r->index,
                        role_name(role_of(pl, r->index)));
    struct ehp_handle hd;
    if (ehp_pool_join(pl->pool, rc->t_s, r->index, &hd, &pl->dec) != 0)
        return conflict(msg, size, "replica %d cannot join training now", r->index);
    r->req = GW_POOL_OP_RECLAIM;
    r->req_id = rc->request;
    r->req_generation = hd.generation;
    snprintf(r->reason, sizeof r->reason, "%s", rc->reason);
    pl->counts[COUNT_RECLAIMS]++;
    return 0;
}

/* The reclaim a lend of rc's replica would cancel (one not yet taken), or -1: such a lend
 * asks the trainer nothing, so it takes no request id of its own. */
static int64_t reclaim_cancelled(const struct gw_pool *pl, const struct gw_pool_rec *rc)
{
    if (rc->op != GW_POOL_OP_LEND || rc->replica < 0 || rc->replica >= pl->n)
        return -1;
    const struct replica *r = &pl->rep[rc->replica];
    bool taken = hybrid(pl, r->index)->join != EHP_JOIN_REQUESTED;
    return r->req == GW_POOL_OP_RECLAIM && !taken ? r->req_id : -1;
}

static int apply_lend(struct gw_pool *pl, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    struct replica *r = &pl->rep[rc->replica];
    const struct ehp_hybrid *hy = hybrid(pl, r->index);
    if (reclaim_cancelled(pl, rc) >= 1) {
        ehp_pool_release(pl->pool, rc->t_s, r->index, &pl->dec); /* CANCELLED */
        return 0;
    }
    if (r->req != GW_POOL_OP_NONE)
        return conflict(msg, size, "replica %d has a %s request (%lld) pending", r->index,
                        gw_pool_op_name(r->req), (long long)r->req_id);
    if (hy->join != EHP_JOIN_ACTIVE || hy->leaving)
        return conflict(msg, size, "replica %d is not training (it is %s, join %s)", r->index,
                        role_name(role_of(pl, r->index)), join_name(hy->join));
    r->req = GW_POOL_OP_LEND;
    r->req_id = rc->request;
    r->req_generation = hy->generation;
    r->req_deadline_s = rc->t_s + pl->timeout_s;
    snprintf(r->reason, sizeof r->reason, "%s", rc->reason);
    pl->counts[COUNT_LENDS]++;
    return 0;
}

/* A confirmation must name the request pending for its replica, at its generation. */
static int pending(const struct gw_pool *pl, const struct gw_pool_rec *rc, enum gw_pool_op want,
                   char *msg, size_t size)
{
    const struct replica *r = &pl->rep[rc->replica];
    bool stale = r->req != want || r->req_id != rc->request ||
                 (rc->generation >= 0 && (uint64_t)rc->generation != r->req_generation);
    if (stale && rc->request == r->confirmed_id)
        return conflict(msg, size,
                        "request %lld of replica %d was confirmed already: the replica is %s "
                        "now (GET /libra/v1/pool)",
                        (long long)rc->request, r->index, role_name(role_of(pl, r->index)));
    if (stale)
        return conflict(msg, size,
                        "no %s request %lld is pending for replica %d (it was cancelled, expired "
                        "or confirmed): do not act on it",
                        gw_pool_op_name(want), (long long)rc->request, r->index);
    return 0;
}

static int apply_released(struct gw_pool *pl, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    int st = pending(pl, rc, GW_POOL_OP_LEND, msg, size);
    if (st)
        return st;
    if (ehp_pool_step(pl->pool)->open)
        return conflict(msg, size, "step %lld is open: confirm at a step boundary",
                        (long long)ehp_pool_step(pl->pool)->step);
    if (ehp_pool_release(pl->pool, rc->t_s, rc->replica, &pl->dec) != 0)
        return conflict(msg, size, "replica %d cannot leave training now", rc->replica);
    pl->rep[rc->replica].req = GW_POOL_OP_NONE;
    pl->rep[rc->replica].confirmed_id = rc->request;
    return 0;
}

static int apply_retaken(struct gw_pool *pl, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    struct replica *r = &pl->rep[rc->replica];
    int st = pending(pl, rc, GW_POOL_OP_RECLAIM, msg, size);
    if (st)
        return st;
    const struct ehp_hybrid *hy = hybrid(pl, r->index);
    if (hy->join != EHP_JOIN_REQUESTED || hy->generation != r->req_generation)
        return conflict(msg, size, "replica %d's join is %s: the reclaim is stale", r->index,
                        join_name(hy->join));
    if (pl->live && r->engine != ENGINE_ASLEEP)
        return conflict(msg, size,
                        "replica %d's engine still holds its GPUs: wait until the request is "
                        "ready",
                        r->index);
    struct ehp_event ev = {.now_s = rc->t_s,
                           .replica = r->index,
                           .generation = hy->generation,
                           .version = rc->version};
    ev.kind = EHP_EV_STARTED;
    ehp_pool_event(pl->pool, &ev, &pl->dec);
    ev.kind = EHP_EV_FETCHED; /* retaken: every member of the replica holds its shard */
    for (ev.member = 0; ev.member < pl->replica_gpus; ev.member++)
        ehp_pool_event(pl->pool, &ev, &pl->dec);
    ev.kind = EHP_EV_SYNCED;
    ehp_pool_event(pl->pool, &ev, &pl->dec);
    r->req = GW_POOL_OP_NONE;
    r->confirmed_id = rc->request;
    return 0;
}

/* The signal at the end of a step (--pool-steer, the trainer's train_s, the rollout the
 * gateway measured: rc), by the simulator's calls (sim_elastic_steer): the pure pool's rule,
 * then its moves carried out through the handshake, a join as a reclaim and a release as a
 * lend the trainer confirms. A function of the pool and rc alone, so a replay makes the same
 * requests with the same ids. */
static void steer(struct gw_pool *pl, const struct gw_pool_rec *rc)
{
    struct ehp_signal_input in = {
        .train_s = rc->train_s,
        .rollout_s = rc->rollout_s,
        .active_pressure = rc->pressure,
        .train_replicas = pl->core + ehp_pool_step(pl->pool)->active,
        .rollout_gpus = (int)rc->rollout_gpus,
    };
    size_t before = pl->dec.n;
    if (ehp_pool_signal(pl->pool, rc->t_s, &in, &pl->dec) != 0)
        return;
    for (size_t i = before; i < pl->dec.n; i++)
        pl->signalled |= pl->dec.v[i].kind == EHP_DEC_SIGNAL;
    const struct ehp_signal *sig = ehp_pool_signal_now(pl->pool);
    bool leaving[GW_POOL_REPLICAS_MAX] = {false};
    for (int h = 0; h < pl->n; h++)
        leaving[h] = pl->rep[h].req == GW_POOL_OP_LEND;
    struct ehp_move m[GW_POOL_REPLICAS_MAX];
    int n = ehp_pool_moves(pl->pool, leaving, m);
    for (int i = 0; i < n; i++) {
        struct gw_pool_rec mv =
            gw_pool_rec_absent(m[i].join ? GW_POOL_OP_RECLAIM : GW_POOL_OP_LEND, rc->t_s);
        mv.replica = m[i].replica;
        mv.request = pl->next_request;
        snprintf(mv.reason, sizeof mv.reason,
                 "signal at step %lld: T_train / T_rollout %.3g, pressure %.2f: %d of %d train "
                 "(%s)",
                 (long long)sig->issued_step, sig->ratio, sig->pressure, sig->target, sig->capacity,
                 ehp_signal_why_name(sig->why));
        char msg[256];
        if ((m[i].join ? apply_reclaim : apply_lend)(pl, &mv, msg, sizeof msg) != 0)
            continue;
        if (pl->rep[mv.replica].req_id == mv.request)
            pl->next_request++;
        if (pl->live)
            fprintf(stderr, "libra: serve: pool: %s of replica %d asked: %s\n",
                    m[i].join ? "reclaim" : "lend", mv.replica, mv.reason);
    }
}

static int apply_step(struct gw_pool *pl, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    struct ehp_event ev = {.kind = rc->phase == 1 ? EHP_EV_STEP_BEGIN : EHP_EV_STEP_END,
                           .now_s = rc->t_s,
                           .step = rc->step,
                           .version = rc->version};
    if (rc->phase == 1 && rc->train_s > 0)
        return snprintf(msg, size, "train_s: only at a step's end"), 400;
    if (rc->phase == 1 && rc->version >= GW_POOL_VERSION_MAX) /* its end would pass it */
        return snprintf(msg, size,
                        "version: a step begins at 0 to %lld (its end makes the next version)",
                        (long long)GW_POOL_VERSION_MAX - 1),
               400;
    if (ehp_pool_event(pl->pool, &ev, &pl->dec) == 0) {
        if (pl->steer && rc->phase == 2 && rc->train_s > 0 && rc->rollout_s >= 0)
            steer(pl, rc);
        return 0;
    }
    const struct ehp_step *s = ehp_pool_step(pl->pool);
    return conflict(msg, size,
                    "step %lld cannot %s: the last step is %lld (%s), at version %lld; a step "
                    "begins after the last, from its version or later, and ends once begun",
                    (long long)rc->step, rc->phase == 1 ? "begin" : "end", (long long)s->step,
                    s->open ? "open" : "ended", (long long)ehp_pool_version(pl->pool));
}

/*
 * Applies record rc (its time rc->t_s on the pool's clock, at or after the last) to the pool
 * and the requests; the decisions are in pl->dec. Returns 0, 400 when rc lacks a member its op
 * needs, or 409 when it does not fit the state (msg says why; nothing but the pool's clock
 * changed).
 */
static int apply(struct gw_pool *pl, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    pl->dec.n = 0;
    bool needs_replica = rc->op != GW_POOL_OP_STEP && rc->op != GW_POOL_OP_TICK;
    if (needs_replica && rc->replica < 0)
        return snprintf(msg, size, "replica: missing"), 400;
    if (needs_replica && rc->replica >= pl->n)
        return snprintf(msg, size, "replica: expected an integer from 0 to %d", pl->n - 1), 400;
    if ((rc->op == GW_POOL_OP_RELEASED || rc->op == GW_POOL_OP_RETAKEN ||
         rc->op == GW_POOL_OP_EXPIRE || rc->op == GW_POOL_OP_LEND ||
         rc->op == GW_POOL_OP_RECLAIM) &&
        rc->request < 1)
        return snprintf(msg, size, "request: missing"), 400;
    if ((rc->op == GW_POOL_OP_RETAKEN || rc->op == GW_POOL_OP_STEP) && rc->version < 0)
        return snprintf(msg, size, "version: missing"), 400;
    if (rc->op == GW_POOL_OP_STEP && (rc->step < 0 || !rc->phase))
        return snprintf(msg, size, "step and phase: expected both"), 400;
    int st = 0;
    struct ehp_event tick = {.kind = EHP_EV_TICK, .now_s = rc->t_s};
    switch (rc->op) {
    case GW_POOL_OP_RECLAIM:
        st = apply_reclaim(pl, rc, msg, size);
        break;
    case GW_POOL_OP_LEND:
        st = apply_lend(pl, rc, msg, size);
        break;
    case GW_POOL_OP_RELEASED:
        st = apply_released(pl, rc, msg, size);
        break;
    case GW_POOL_OP_RETAKEN:
        st = apply_retaken(pl, rc, msg, size);
        break;
    case GW_POOL_OP_STEP:
        st = apply_step(pl, rc, msg, size);
        break;
    case GW_POOL_OP_EXPIRE:
        st = pending(pl, rc, GW_POOL_OP_LEND, msg, size);
        if (st == 0) {
            pl->rep[rc->replica].req = GW_POOL_OP_NONE;
            pl->counts[COUNT_EXPIRED]++;
        }
        break;
    case GW_POOL_OP_TICK:
        ehp_pool_event(pl->pool, &tick, &pl->dec);
        break;
    default:
        return snprintf(msg, size, "op: missing"), 400;
    }
    joins_ended(pl);
    if (st == 0 && rc->request >= pl->next_request) /* ids of refused calls are not kept */
        pl->next_request = rc->request + 1;
    pl->last_t_s = rc->t_s;
    return st;
}

int gw_pool_replay(struct gw *g, const char *body, size_t len, char *err, size_t err_size)
{
    struct gw_pool *pl = g->pool;
    struct gw_pool_rec rc;
    char msg[256];
    if (!pl)
        return error_text(err, err_size,
                          "a pool record, and no --pool-replica: give the state dir's replicas");
    if (gw_pool_rec_parse(body, len, &rc, msg, sizeof msg) != 0)
        return error_text(err, err_size, "pool: %s", msg);
    if (rc.t_s < pl->last_t_s || rc.op == GW_POOL_OP_NONE)
        return error_text(err, err_size, "pool: an op and a time no earlier than the last");
    if (apply(pl, &rc, msg, sizeof msg) != 0)
        return error_text(err, err_size, "pool: %s record refused: %s", gw_pool_op_name(rc.op),
                          msg);
    return 0;
}

/* ---- the engines ---------------------------------------------------------------------------- */

static void reconcile(struct gw_pool *pl);
static void changed(struct gw_pool *pl);

/* The GPUs of the engines serving rollout now. */
static int64_t rollout_gpus(const struct gw *g)
{
    int64_t gpus = 0;
    for (size_t i = 0; i < g->engines.n; i++)
        gpus += gw_engine_routable(g->engines.v[i]) ? g->engines.v[i]->tp : 0;
    return gpus;
}

/* The rollout GPU-seconds are counted up to now: called before a replica's engine leaves
 * rollout or comes back to it. */
static void avail_to(struct gw_pool *pl, double now)
{
    pl->avail_gpu_s += (double)rollout_gpus(pl->g) * (now - pl->avail_mark_s);
    pl->avail_mark_s = now;
}

/* Whether the replica's engine should serve: only while its GPUs are rollout's. */
static bool should_serve(const struct gw_pool *pl, int h)
{
    return role_of(pl, h) == EHP_ROLE_HYBRID_ROLLOUT;
}

static void call_ended(struct replica *r, bool ok, enum engine_state now)
{
    struct gw_engine *e = r->calling;
    r->calling = NULL;
    if (ok) {
        r->engine = now;
        if (now == ENGINE_AWAKE) {
            avail_to(r->pl, gw_now());
            e->lent = false;
            gw_persist_engines(e->g);
            if (e->kind == GW_KIND_SGLANG)
                gw_engine_ask_version(e); /* the weights it woke with */
            fprintf(stderr, "libra: serve: pool: replica %d serves rollout (engine %lld)\n",
                    r->index, (long long)e->id);
        } else {
            fprintf(stderr, "libra: serve: pool: replica %d's engine released its GPUs\n",
                    r->index);
        }
    } else {
        r->retry_at_s = gw_now() + POOL_RETRY_S;
    }
    gw_engine_unref(e);
    changed(r->pl);
    reconcile(r->pl);
}

/* The engine loaded the weight update it missed while asleep: it has the fleet's weights, and
 * takes the update's version as the engines that took it did (control.c's took). */
static void on_caught_up(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct replica *r = arg;
    struct gw_engine *e = r->calling;
    const struct gw_update_rec *u = &e->g->update;
    char named[GW_VERSION_MAX];
    (void)body;
    (void)len;
    (void)error;
    if (status == 200) {
        e->missed_update = false;
        gw_persist_update(e->g);
        if (!gw_update_named(u->body, u->len, named))
            gw_engine_numbered(e->g, e, u->version);
        else if (e->kind == GW_KIND_VLLM) /* an SGLang engine names its own (asked at the end) */
            gw_engine_version(e->g, e, u->version);
    }
    call_ended(r, status == 200, ENGINE_AWAKE);
}

/* Awake: an engine that missed a weight update from disk while asleep loads it first, and
 * takes turns only then. */
static void on_woken(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct replica *r = arg;
    struct gw_engine *e = r->calling;
    struct gw *g = e->g;
    (void)body;
    (void)len;
    (void)error;
    if (status != 200 || !e->missed_update || !g->update.body) {
        call_ended(r, status == 200, ENGINE_AWAKE);
        return;
    }
    char url[GW_URL_MAX + 64];
    snprintf(url, sizeof url, "%s%s", e->url, g->update.path);
    fprintf(stderr, "libra: serve: pool: replica %d's engine loads the weights it missed (%s)\n",
            r->index, g->update.version);
    net_client_request(g->client, "POST", url, NULL, g->update.body, g->update.len, on_caught_up,
                       r);
}

static void on_released(void *arg, int status, const char *body, size_t len, const char *error)
{
    (void)body;
    (void)len;
    (void)error;
    call_ended(arg, status == 200, ENGINE_ASLEEP);
}

/* SGLang: the engine aborted what it ran (the turns resume elsewhere); now its memory. */
static void on_aborted(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct replica *r = arg;
    (void)body;
    (void)len;
    (void)error;
    struct gw_engine *e = r->calling;
    if (status != 200) {
        call_ended(r, false, ENGINE_UNKNOWN);
        return;
    }
    char url[GW_URL_MAX + 64];
    snprintf(url, sizeof url, "%s/release_memory_occupation", e->url);
    net_client_request_within(e->g->client, "POST", url, NULL, "{}", 2, GW_CHECK_LIMIT_S,
                              on_released, r);
}

static void start_call(struct replica *r, struct gw_engine *e, bool wake)
{
    struct gw *g = e->g;
    char url[GW_URL_MAX + 64];
    r->calling = gw_engine_ref(e);
    bool sglang = e->kind == GW_KIND_SGLANG;
    if (wake) {
        snprintf(url, sizeof url, "%s%s", e->url,
                 sglang ? "/resume_memory_occupation" : "/wake_up");
        net_client_request_within(g->client, "POST", url, NULL, sglang ? "{}" : NULL,
                                  sglang ? 2 : 0, GW_CHECK_LIMIT_S, on_woken, r);
        return;
    }
    if (!e->lent) { /* no new turn from now on */
        avail_to(r->pl, gw_now());
        e->lent = true;
        gw_persist_engines(g);
    }
    if (sglang) { /* release needs an idle engine: abort first (the turns resume elsewhere) */
        snprintf(url, sizeof url, "%s/abort_request", e->url);
        static const char all[] = "{\"abort_all\": true}";
        net_client_request_within(g->client, "POST", url, NULL, all, sizeof all - 1,
                                  GW_CHECK_LIMIT_S, on_aborted, r);
    } else {
        snprintf(url, sizeof url, "%s/sleep?level=1&mode=abort", e->url);
        net_client_request_within(g->client, "POST", url, NULL, NULL, 0, GW_CHECK_LIMIT_S,
                                  on_released, r);
    }
}

/* Puts each replica's engine to sleep or wakes it, as its role says (one call at a time). */
static void reconcile(struct gw_pool *pl)
{
    double now = gw_now();
    for (int h = 0; h < pl->n; h++) {
        struct replica *r = &pl->rep[h];
        struct gw_engine *e = gw_engine_by_url(pl->g, r->url);
        if (!e || r->calling || e->dead || now < r->retry_at_s)
            continue;
        if (e->id != r->engine_id) { /* listed anew: whatever the last one was, not known */
            r->engine = ENGINE_UNKNOWN;
            r->engine_id = e->id;
        }
        bool serve = should_serve(pl, h);
        if (serve && (r->engine != ENGINE_AWAKE || e->lent))
            start_call(r, e, true);
        else if (!serve && r->engine != ENGINE_ASLEEP)
            start_call(r, e, false);
    }
}

/* ---- GET /libra/v1/pool --------------------------------------------------------------------- */

static const char *engine_name(enum engine_state s)
{
    return s == ENGINE_AWAKE ? "serving" : s == ENGINE_ASLEEP ? "released" : "unknown";
}

static json_t *replica_json(const struct gw_pool *pl, int h)
{
    const struct replica *r = &pl->rep[h];
    const struct ehp_hybrid *hy = hybrid(pl, h);
    const struct gw_engine *e = gw_engine_by_url(pl->g, r->url);
    return json_pack("{s:i, s:s, s:s, s:s, s:I, s:b, s:s, s:b, s:I}", "replica", h, "url", r->url,
                     "role", role_name(role_of(pl, h)), "join", join_name(hy->join), "generation",
                     (json_int_t)hy->generation, "leaving", hy->leaving, "engine",
                     engine_name(r->engine), "engine_call", r->calling != NULL, "engine_id",
                     (json_int_t)(e ? e->id : -1));
}

static json_t *request_json(const struct gw_pool *pl, int h, double now_s)
{
    const struct replica *r = &pl->rep[h];
    const struct ehp_hybrid *hy = hybrid(pl, h);
    bool lend = r->req == GW_POOL_OP_LEND;
    double deadline = lend ? r->req_deadline_s : hy->deadline_s;
    bool ready = lend || r->engine == ENGINE_ASLEEP;
    return json_pack("{s:I, s:s, s:i, s:I, s:s, s:b, s:o}", "request", (json_int_t)r->req_id,
                     "kind", gw_pool_op_name(r->req), "replica", h, "generation",
                     (json_int_t)r->req_generation, "reason", r->reason, "ready", ready,
                     "deadline_in_s", json_real(fmax(0.0, deadline - now_s)));
}

/* The signal last issued (null before the first): its target, rule and what it saw. */
static json_t *signal_json(const struct gw_pool *pl)
{
    const struct ehp_signal *sig = ehp_pool_signal_now(pl->pool);
    if (!pl->signalled)
        return json_null();
    return json_pack("{s:b, s:i, s:i, s:s, s:f, s:f, s:I, s:I}", "live", sig->live, "target",
                     sig->target, "capacity", sig->capacity, "why", ehp_signal_why_name(sig->why),
                     "ratio", sig->ratio, "pressure", sig->pressure, "step",
                     (json_int_t)sig->issued_step, "expires_step", (json_int_t)sig->expires_step);
}

static json_t *pool_json(const struct gw_pool *pl)
{
    double now = clock_now(pl);
    const struct ehp_step *s = ehp_pool_step(pl->pool);
    json_t *replicas = json_array(), *requests = json_array();
    for (int h = 0; h < pl->n; h++) {
        json_array_append_new(replicas, replica_json(pl, h));
        if (pl->rep[h].req != GW_POOL_OP_NONE)
            json_array_append_new(requests, request_json(pl, h, now));
    }
    return json_pack(
        "{s:s, s:I, s:o, s:f, s:{s:b, s:I, s:I}, s:I, s:o, s:o, s:{s:I, s:I, s:I, "
        "s:I}, s:b, s:i, s:o}",
        "schema", "libra.pool/1", "changes", (json_int_t)pl->changes, "clock_s", json_real(now),
        "timeout_s", pl->timeout_s, "step", "open", s->open, "step", (json_int_t)s->step, "version",
        (json_int_t)s->version, "version", (json_int_t)ehp_pool_version(pl->pool), "replicas",
        replicas, "requests", requests, "counts", "lends", (json_int_t)pl->counts[COUNT_LENDS],
        "reclaims", (json_int_t)pl->counts[COUNT_RECLAIMS], "expired",
        (json_int_t)pl->counts[COUNT_EXPIRED], "failed", (json_int_t)pl->counts[COUNT_FAILED],
        "steer", pl->steer, "core_replicas", pl->core, "signal", signal_json(pl));
}

static void waiter_free(struct waiter *w)
{
    struct gw_pool *pl = w->pl;
    for (size_t i = 0; i < pl->waiters.n; i++)
        if (pl->waiters.v[i] == w) {
            pl->waiters.v[i] = pl->waiters.v[--pl->waiters.n];
            break;
        }
    event_free(w->timer);
    free(w);
}

static void on_wait_cancel(void *arg, struct net_call *c, enum net_cancel why)
{
    (void)c;
    (void)why;
    waiter_free(arg);
}

static void on_wait_timer(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    (void)fd;
    (void)what;
    net_reply_json(w->call, 200, pool_json(w->pl));
    waiter_free(w);
}

/* Answers the long polls held whose `after` the count of changes is past (every one with all,
 * as a stop does) with the pool as it is now. */
static void answer_held(struct gw_pool *pl, bool all)
{
    size_t i = 0;
    while (i < pl->waiters.n) {
        struct waiter *w = pl->waiters.v[i];
        if (!all && pl->changes <= w->after) {
            i++;
            continue;
        }
        pl->waiters.v[i] = pl->waiters.v[--pl->waiters.n]; /* before the answer: not held */
        net_reply_json(w->call, 200, pool_json(pl));
        event_free(w->timer);
        free(w);
    }
}

/* Something changed: long polls are answered. The count goes into the state dir's next commit
 * (a restart resumes past it): written here, as a change is made, so that a stop's last
 * commit, made once the pool is freed, has it too. */
static void changed(struct gw_pool *pl)
{
    pl->changes++;
    if (pl->g->persist) {
        char text[32];
        snprintf(text, sizeof text, "%llu", (unsigned long long)pl->changes);
        gw_store_put(pl->g->persist->st, GW_STORE_META, "pool_changes", 0, xstrdup(text));
    }
    answer_held(pl, false);
}

void gw_pool_resume_clock(struct gw *g, double t_s)
{
    if (g->pool)
        g->pool->resume_s = t_s;
}

void gw_pool_resume_changes(struct gw *g, uint64_t kept)
{
    if (g->pool)
        g->pool->changes = kept + POOL_RESTART_CHANGES;
}

void gw_pool_stop(struct gw *g)
{
    if (g->pool)
        answer_held(g->pool, true);
}

static bool no_pool(struct gw *g, struct net_call *c)
{
    if (g->pool)
        return false;
    net_reply_error(c, 404, "not_found_error",
                    "no elastic pool: start libra serve with --pool-replica URL");
    return true;
}

/* GET /libra/v1/pool[?after=N&wait_s=S]: at once, or once `changes` is past N (a long poll:
 * an N at or above the count is held until the count passes it, or for S seconds, by default
 * POOL_WAIT_DEFAULT_S). */
void gw_pool_call(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    if (no_pool(g, c))
        return;
    struct gw_pool *pl = g->pool;
    const char *after = net_call_query(c, "after"), *wait = net_call_query(c, "wait_s");
    char *end = NULL;
    errno = 0;
    long long seen = after ? strtoll(after, &end, 10) : -1;
    if (after && (end == after || *end || seen < 0 || errno == ERANGE)) { /* not saturated */
        net_reply_error(c, 400, "invalid_request_error", "after: expected a count >= 0");
        return;
    }
    double wait_s = wait ? strtod(wait, &end) : POOL_WAIT_DEFAULT_S;
    if (wait && (end == wait || *end || !(wait_s >= 0.0 && wait_s <= POOL_WAIT_MAX_S))) {
        net_reply_error(c, 400, "invalid_request_error", "wait_s: expected 0 to %d seconds",
                        POOL_WAIT_MAX_S);
        return;
    }
    if (!after || pl->changes > (uint64_t)seen || wait_s == 0.0 || g->stop) {
        net_reply_json(c, 200, pool_json(pl));
        return;
    }
    struct waiter *w = xcalloc(1, sizeof *w);
    w->pl = pl;
    w->call = c;
    w->after = (uint64_t)seen;
    w->timer = evtimer_new(g->base, on_wait_timer, w);
    struct timeval tv = {(time_t)wait_s, (suseconds_t)((wait_s - floor(wait_s)) * 1e6)};
    evtimer_add(w->timer, &tv);
    vec_push(&pl->waiters, w);
    net_call_defer(c, on_wait_cancel, w);
}

/* ---- changes -------------------------------------------------------------------------------- */

static void journal(struct gw_pool *pl, const struct gw_pool_rec *rc)
{
    if (pl->g->persist)
        gw_store_journal(pl->g->persist->st, "pool", gw_pool_rec_text(rc));
}

/* Time passes to t: joins past their deadline fail (journalled when one did). */
static bool tick_to(struct gw_pool *pl, double t)
{
    struct gw_pool_rec rc = gw_pool_rec_absent(GW_POOL_OP_TICK, t);
    char msg[64];
    apply(pl, &rc, msg, sizeof msg);
    if (pl->dec.n == 0)
        return false;
    for (size_t i = 0; i < pl->dec.n; i++)
        if (pl->dec.v[i].kind == EHP_DEC_FAILED)
            fprintf(stderr,
                    "libra: serve: pool: replica %d's reclaim timed out: back to "
                    "rollout\n",
                    pl->dec.v[i].replica);
    journal(pl, &rc);
    return true;
}

static void on_pool_tick(evutil_socket_t fd, short what, void *arg)
{
    struct gw_pool *pl = arg;
    (void)fd;
    (void)what;
    double t = clock_now(pl);
    bool any = tick_to(pl, t);
    for (int h = 0; h < pl->n; h++) {
        struct replica *r = &pl->rep[h];
        if (r->req != GW_POOL_OP_LEND || r->req_deadline_s > t)
            continue;
        struct gw_pool_rec rc = gw_pool_rec_absent(GW_POOL_OP_EXPIRE, t);
        rc.replica = h;
        rc.request = r->req_id;
        char msg[256];
        if (apply(pl, &rc, msg, sizeof msg) == 0) {
            fprintf(stderr,
                    "libra: serve: pool: lend %lld of replica %d not confirmed in %g s: "
                    "cancelled\n",
                    (long long)rc.request, h, pl->timeout_s);
            journal(pl, &rc);
            any = true;
        }
    }
    if (any)
        changed(pl);
    reconcile(pl);
}

/* What the steering signal sees of the rollout at a step's end, now (gw_now()), into rc, as
 * the simulator measures it: the rollout's busy share since the last step end — the busy
 * GPU-seconds of every engine over the GPU-seconds of those serving rollout, which change as
 * replicas leave and come back — times that interval (rollout_s), the GPUs serving rollout
 * now, and the live trajectories over the rl.max_staleness + 1 batches admission allows
 * (pressure). The gateway holds no queue of its own, so the signal's queue pressure is 0. */
static void measure(struct gw_pool *pl, double now, struct gw_pool_rec *rc)
{
    const struct gw *g = pl->g;
    double busy_gpu_s = 0, span = now - pl->step_mark_s;
    for (size_t i = 0; i < g->engines.n; i++) {
        const struct gw_engine *e = g->engines.v[i];
        busy_gpu_s += (gw_engine_busy_s(e, now) - e->busy_mark_s) * e->tp;
    }
    avail_to(pl, now);
    rc->rollout_gpus = rollout_gpus(g);
    rc->rollout_s = pl->avail_gpu_s > 0 ? fmin(busy_gpu_s * span / pl->avail_gpu_s, span) : 0.0;
    const struct spec_rl_config *rl = &g->cfg->rl;
    rc->pressure = (double)g->trajs.live / ((rl->max_staleness + 1.0) * rl->batch_trajectories);
}

/* The rollout is measured from now on. */
static void mark(struct gw_pool *pl, double now)
{
    for (size_t i = 0; i < pl->g->engines.n; i++)
        pl->g->engines.v[i]->busy_mark_s = gw_engine_busy_s(pl->g->engines.v[i], now);
    pl->step_mark_s = pl->avail_mark_s = now;
    pl->avail_gpu_s = 0;
}

void gw_pool_start(struct gw *g)
{
    struct gw_pool *pl = g->pool;
    if (!pl)
        return;
    pl->live = true;
    pl->clock_base_s = fmax(pl->last_t_s, pl->resume_s);
    pl->wall_base_s = gw_now();
    mark(pl, pl->wall_base_s);
    pl->tick = event_new(g->base, -1, EV_PERSIST, on_pool_tick, pl);
    struct timeval tv = {0, (suseconds_t)(POOL_TICK_S * 1e6)};
    event_add(pl->tick, &tv);
    reconcile(pl);
}

/* The route's suffix as an op: lend, reclaim, step, confirm (the body's event). */
static enum gw_pool_op route_op(const char *path, const struct gw_pool_rec *rc)
{
    const char *s = path + strlen("/libra/v1/pool/");
    if (strcmp(s, "lend") == 0)
        return GW_POOL_OP_LEND;
    if (strcmp(s, "reclaim") == 0)
        return GW_POOL_OP_RECLAIM;
    if (strcmp(s, "step") == 0)
        return GW_POOL_OP_STEP;
    if (strcmp(s, "confirm") == 0)
        return rc->event ? (enum gw_pool_op)rc->event : GW_POOL_OP_NONE;
    return GW_POOL_OP_NONE;
}

/* Whether the body of the pool call at path names only members that call takes (docs/serve.md
 * "The elastic pool"), and an integer `replica` only of the pool's n: any other member, the
 * journal's own among them, is refused by name in msg, and another replica with the pool's
 * range (the record's parse knows only the most a pool has). A body that is not an object
 * passes: the record's parse says what it is. */
static bool call_keys_ok(const char *path, const char *body, size_t len, int n, char *msg,
                         size_t size)
{
    static const char *const step[] = {"step", "version", "phase", "train_s", NULL};
    static const char *const confirm[] = {"event",      "request", "replica",
                                          "generation", "version", NULL};
    static const char *const other[] = {"replica", "reason", NULL};
    const char *s = path + strlen("/libra/v1/pool/"), *key;
    const char *const *takes = strcmp(s, "step") == 0      ? step
                               : strcmp(s, "confirm") == 0 ? confirm
                                                           : other;
    json_t *doc = json_loadb(body, len, 0, NULL), *v;
    const char *unknown = NULL;
    json_object_foreach(doc, key, v)
    {
        size_t i = 0;
        while (takes[i] && strcmp(takes[i], key) != 0)
            i++;
        if (!takes[i] && !unknown)
            unknown = key;
    }
    if (unknown) {
        struct strbuf list = {0};
        for (size_t i = 0; takes[i]; i++)
            strbuf_printf(&list, "%s%s", i ? ", " : "", takes[i]);
        snprintf(msg, size, "%s takes %s only, not '%.64s'", path, list.data, unknown);
        strbuf_free(&list);
    }
    json_t *h = json_object_get(doc, "replica");
    bool out =
        !unknown && json_is_integer(h) && (json_integer_value(h) < 0 || json_integer_value(h) >= n);
    if (out)
        snprintf(msg, size, "replica: expected an integer from 0 to %d", n - 1);
    json_decref(doc);
    return !unknown && !out;
}

/* Whether a confirm's record rc names its event, and a version only when retaken. */
static bool confirm_ok(const char *path, const struct gw_pool_rec *rc, char *msg, size_t size)
{
    if (!rc->event)
        snprintf(msg, size, "%s: event is required (released or retaken)", path);
    else if (rc->event == GW_POOL_OP_RELEASED && rc->version >= 0)
        snprintf(msg, size, "%s: version belongs to a retaken event only", path);
    return rc->event && !(rc->event == GW_POOL_OP_RELEASED && rc->version >= 0);
}

/* The answer to the pool call rc, accepted: the pool with the request it made, or the reclaim
 * it cancelled (cancelled >= 1; it made none); an error when it failed a join. */
static json_t *answer_json(const struct gw_pool *pl, const struct gw_pool_rec *rc,
                           int64_t cancelled, bool failed)
{
    if (failed) /* a retaken at another version than the core's: rolled back, journalled */
        return json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message",
                         "the join failed: the version retaken is not the core's (the replica "
                         "is back in rollout; do not train on it)",
                         "type", "conflict_error", "param", "code", 409);
    json_t *out = pool_json(pl);
    json_object_set_new(out, "accepted", json_string(gw_pool_op_name(rc->op)));
    if (cancelled >= 1)
        json_object_set_new(out, "cancelled", json_integer(cancelled));
    else if (rc->request >= 1)
        json_object_set_new(out, "request", json_integer(rc->request));
    return out;
}

/* POST /libra/v1/pool/{lend,reclaim,step,confirm} (admin). */
void gw_pool_post(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    if (!gw_admin(g, c) || no_pool(g, c))
        return;
    struct gw_pool *pl = g->pool;
    const char *path = net_call_path(c), *s = path + strlen("/libra/v1/pool/");
    if (strcmp(s, "lend") != 0 && strcmp(s, "reclaim") != 0 && strcmp(s, "step") != 0 &&
        strcmp(s, "confirm") != 0) {
        net_reply_error(c, 404, "not_found_error",
                        "%s: no such pool call (lend, reclaim, step, confirm)", path);
        return;
    }
    size_t len;
    const char *body = net_call_body(c, &len);
    struct gw_pool_rec rc;
    char msg[512];
    if (!call_keys_ok(path, body ? body : "", len, pl->n, msg, sizeof msg) ||
        gw_pool_rec_parse(body ? body : "", len, &rc, msg, sizeof msg) != 0 ||
        (strcmp(s, "confirm") == 0 && !confirm_ok(path, &rc, msg, sizeof msg))) {
        net_reply_error(c, 400, "invalid_request_error", "%s", msg);
        return;
    }
    rc.op = route_op(path, &rc);
    if (gw_durable_refused(g, c))
        return;
    double t = clock_now(pl), wall = gw_now();
    bool ticked = tick_to(pl, t), step_end = rc.op == GW_POOL_OP_STEP && rc.phase == 2;
    rc.t_s = t;
    /* after the tick: a reclaim past its deadline has failed and is not cancelled */
    int64_t cancelled = reclaim_cancelled(pl, &rc);
    if (rc.op == GW_POOL_OP_LEND || rc.op == GW_POOL_OP_RECLAIM)
        rc.request = cancelled >= 1 ? cancelled : pl->next_request;
    if (step_end && pl->steer && rc.train_s > 0)
        measure(pl, wall, &rc);
    const struct ehp_step *open = ehp_pool_step(pl->pool);
    int st = step_end && open->open && open->step == rc.step && rc.version != open->version
                 ? conflict(msg, sizeof msg, "version: step %lld began at version %lld, not %lld",
                            (long long)rc.step, (long long)open->version, (long long)rc.version)
                 : apply(pl, &rc, msg, sizeof msg);
    if (st == 0 && step_end)
        mark(pl, wall);
    if (ticked || st == 0)
        changed(pl);
    if (st != 0) {
        reconcile(pl);
        net_reply_error(c, st, st == 409 ? "conflict_error" : "invalid_request_error", "%s", msg);
        return;
    }
    journal(pl, &rc);
    bool failed = false;
    for (size_t i = 0; i < pl->dec.n; i++)
        failed |= pl->dec.v[i].kind == EHP_DEC_FAILED;
    reconcile(pl);
    gw_reply_durable(g, c, failed ? 409 : 200, answer_json(pl, &rc, cancelled, failed));
}

bool gw_pool_engine_off(const struct gw *g, const struct gw_engine *e)
{
    if (!g->pool)
        return false;
    for (int h = 0; h < g->pool->n; h++) {
        const struct replica *r = &g->pool->rep[h];
        if (gw_engine_by_url(g, r->url) == e)
            return r->engine_id != e->id || r->engine != ENGINE_AWAKE || e->lent;
    }
    return false;
}

bool gw_pool_serves(const struct gw *g, const char *url)
{
    if (!g->pool)
        return false;
    char key[GW_URL_MAX + 64], mine[GW_URL_MAX + 64]; /* any spelling of a replica's URL */
    net_url_endpoint(url, key, sizeof key);
    for (int h = 0; h < g->pool->n; h++) {
        net_url_endpoint(g->pool->rep[h].url, mine, sizeof mine);
        if (strcmp(mine, key) == 0)
            return true;
    }
    return false;
}

void gw_pool_urls(const struct gw *g, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t h = 0; h < g->opt.n_pool && n < size; h++) {
        int w = snprintf(out + n, size - n, "%s%s", h ? " " : "", g->opt.pool[h].url);
        n += w > 0 ? (size_t)w : 0;
    }
}

void gw_pool_steering(const struct gw *g, char *out, size_t size)
{
    const struct gw_options *o = &g->opt;
    if (o->n_pool == 0 || !o->pool_steer)
        snprintf(out, size, "%s", o->n_pool ? "off" : "");
    else
        snprintf(out, size, "core=%d tp=%d%s", o->pool_core_replicas, o->pool[0].tp,
                 g->cfg->ehp.signal == SPEC_EHP_REFERENCE ? " ehp.signal=reference" : "");
}

void gw_pool_metrics(const struct gw *g, FILE *out)
{
    const struct gw_pool *pl = g->pool;
    if (!pl)
        return;
    int by_role[EHP_ROLES] = {0};
    for (int h = 0; h < pl->n; h++)
        by_role[role_of(pl, h)]++;
    fputs("# HELP libra_pool_replicas Elastic pool replicas by role.\n"
          "# TYPE libra_pool_replicas gauge\n",
          out);
    for (int r = EHP_ROLE_HYBRID_ROLLOUT; r <= EHP_ROLE_HYBRID_TRAINING; r++)
        fprintf(out, "libra_pool_replicas{role=\"%s\"} %d\n", role_name((enum ehp_role)r),
                by_role[r]);
    fprintf(out,
            "# HELP libra_pool_requests_total Lends and reclaims asked of the trainer.\n"
            "# TYPE libra_pool_requests_total counter\n"
            "libra_pool_requests_total{kind=\"lend\"} %llu\n"
            "libra_pool_requests_total{kind=\"reclaim\"} %llu\n"
            "# HELP libra_pool_cancelled_total Requests not confirmed in time: lends expired, "
            "reclaims failed.\n"
            "# TYPE libra_pool_cancelled_total counter\n"
            "libra_pool_cancelled_total{kind=\"lend\"} %llu\n"
            "libra_pool_cancelled_total{kind=\"reclaim\"} %llu\n",
            (unsigned long long)pl->counts[COUNT_LENDS],
            (unsigned long long)pl->counts[COUNT_RECLAIMS],
            (unsigned long long)pl->counts[COUNT_EXPIRED],
            (unsigned long long)pl->counts[COUNT_FAILED]);
}
