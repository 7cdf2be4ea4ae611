/*
 * The elastic hybrid pool in the libra mode (libra-spec §3): the simulator drives the pool's
 * state machine (ehp/pool.h) with the events it simulates, and plays the pool's decisions on
 * the fleet and the trainer.
 *
 * Hybrid replicas are training replicas of the core's layout (sim_layout: every replica beyond
 * what the core needs to hold the model state) that serve rollout as instances until the pool
 * borrows them. Once per step, at its end, the signal is issued from what the step showed:
 * T_train, the step's training time with its membership; T_rollout, the time the step's
 * rollout work took the fleet at full use (its utilisation times the step: the interval
 * between batches says little once rollout outpaces training, as admission then paces it);
 * the pressure, the larger of the waiting turns over the serving instances' queue caps and
 * the trajectories in flight over the (rl.max_staleness + 1) batches admission allows. The pool
 * is then steered toward the signal. A join lends the replica's instances at once (their live
 * turns resume elsewhere) and runs its phases, each ended by an event after the time the
 * decision says (cost/ through ehp/lend.h): trainers start, every member fetches its shard of
 * the state, zero sync, then it trains from the next step start. A step's membership is frozen
 * at its start (ehp_pool_event STEP_BEGIN) and costed by ehp_train_step: the fixed batch dealt
 * to the core's and the active hybrids' ranks, plus the gradient exchanges; joining replicas
 * are placeholders, so training never waits for a join. A return, a cancel or a failed join
 * brings the replica's instances back through a cold start; every change of the rollout fleet
 * owes the NCCL weight-update group a rebuild, paid by the next update. A failed member loses
 * its replica for good (the pool never lends it again): its other instances serve on.
 */
#include <math.h>
#include <stdlib.h>

#include "ehp/lend.h"
#include "ehp/pool.h"
#include "sim/internal.h"
#include "util/alloc.h"

enum { PHASE_STARTED = 1, PHASE_FETCHED, PHASE_SYNCED, PHASE_DEADLINE };

struct sim_elastic {
    struct ehp_pool *pool;
    struct ehp_lend lend;
    ehp_decision_vec dec;
    int *core_gpu, *hybrid_gpu;
    double *borrowed_s;       /* per replica: since when training has it back; NaN: serving */
    double *phase_s;          /* per replica: when the phase the trace shows began */
    const char **phase;       /* ... and its name, NULL when none is shown */
    int step_gpus;            /* GPUs training the step as frozen at its start (the signal) */
    struct sim_pool_step cur; /* decisions since the last step ended */
};

static const char *const join_names[SIM_JOIN_STATES] = {"rollout",   "requested",  "fetching_state",
                                                        "zero_sync", "activating", "active"};

const char *sim_join_state_name(int state)
{
    return state >= 0 && state < SIM_JOIN_STATES ? join_names[state] : "unknown";
}

/* The event of a phase of replica h: arg = version << 32 | member << 20 | phase << 16 | h. */
static uint64_t pack_arg(int h, int phase, int member, int64_t version)
{
    return (uint64_t)version << 32 | (uint64_t)member << 20 | (uint64_t)phase << 16 | (uint64_t)h;
}

/* ---- the trace ------------------------------------------------------------------------ */

/* Replica h's shown phase ends now; `next` (or none) begins. */
static void phase_to(struct sim *s, int h, const char *next)
{
    struct sim_elastic *e = s->elastic;
    if (e->phase[h])
        sim_trace_slice(s, SIM_PID_POOL, (uint64_t)h, e->phase[h], e->phase_s[h], s->now, NULL);
    e->phase[h] = next;
    e->phase_s[h] = s->now;
}

void sim_elastic_trace_end(struct sim *s)
{
    struct sim_elastic *e = s->elastic;
    for (int h = 0; h < s->lay->n_hybrid; h++)
        if (e->phase[h])
            sim_trace_slice(s, SIM_PID_POOL, (uint64_t)h, e->phase[h], e->phase_s[h], s->now, NULL);
}

/* ---- decisions ------------------------------------------------------------------------ */

/* Replica h's time with the trainer, from borrowed_s[h] to now, on its instances' rows. */
static void record_borrowed(struct sim *s, int h)
{
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].hybrid == h + 1)
            sim_timeline_borrowed(s, i, s->elastic->borrowed_s[h]);
}

/* The trainer takes replica h back: its instances stop serving. */
static void lend_replica(struct sim *s, int h)
{
    s->elastic->borrowed_s[h] = s->now;
    for (int i = 0; i < s->n_inst && !s->rc; i++)
        if (s->inst[i].hybrid == h + 1)
            sim_inst_lend(s, i);
}

/* Replica h goes back to rollout: its instances start again, ready after ready_in_s. */
static void return_replica(struct sim *s, int h, double ready_in_s, const char *why)
{
    phase_to(s, h, NULL);
    sim_trace_instant(s, SIM_PID_POOL, (uint64_t)h, why, NULL);
    record_borrowed(s, h);
    s->elastic->borrowed_s[h] = NAN;
    for (int i = 0; i < s->n_inst && !s->rc; i++)
        if (s->inst[i].hybrid == h + 1)
            sim_inst_return(s, i, ready_in_s);
}

void sim_elastic_timeline_end(struct sim *s)
{
    for (int h = 0; h < s->lay->n_hybrid; h++)
        if (!isnan(s->elastic->borrowed_s[h])) {
            record_borrowed(s, h);
            s->elastic->borrowed_s[h] = s->now;
        }
}

static void schedule_phase(struct sim *s, const struct ehp_decision *d, int phase, int member)
{
    sim_schedule(s, s->now + d->expect_s, SIM_EV_POOL, (uint32_t)d->generation,
                 pack_arg(d->replica, phase, member, d->version));
}

/* Plays one decision on the fleet, the event queue and the counts. */
static void play(struct sim *s, const struct ehp_decision *d)
{
    struct sim_elastic *e = s->elastic;
    switch (d->kind) {
    case EHP_DEC_JOIN:
        e->cur.joins++;
        lend_replica(s, d->replica);
        phase_to(s, d->replica, "starting trainers");
        schedule_phase(s, d, PHASE_STARTED, 0);
        /* the pool fails a late join at its next call: make that call at the deadline */
        sim_schedule(s, d->deadline_s, SIM_EV_POOL, (uint32_t)d->generation,
                     pack_arg(d->replica, PHASE_DEADLINE, 0, 0));
        break;
    case EHP_DEC_FETCH:
        phase_to(s, d->replica, "fetching state");
        for (int m = 0; m < e->lend.replica_gpus; m++)
            schedule_phase(s, d, PHASE_FETCHED, m);
        break;
    case EHP_DEC_ZERO_SYNC:
        phase_to(s, d->replica, "zero sync");
        schedule_phase(s, d, PHASE_SYNCED, 0);
        break;
    case EHP_DEC_ACTIVATING:
        phase_to(s, d->replica, "activating");
        break;
    case EHP_DEC_ACTIVE:
        e->cur.activated++;
        phase_to(s, d->replica, "training");
        break;
    case EHP_DEC_CANCELLED:
        e->cur.cancelled++;
        return_replica(s, d->replica, d->expect_s, "join cancelled");
        break;
    case EHP_DEC_FAILED:
        e->cur.failed++;
        return_replica(s, d->replica, d->expect_s, "join failed");
        break;
    case EHP_DEC_RETURNED:
        e->cur.returned++;
        return_replica(s, d->replica, d->expect_s, "returned to rollout");
        break;
    case EHP_DEC_LOST:
        sim_trace_instant(s, SIM_PID_POOL, (uint64_t)d->replica, "replica lost", NULL);
        break;
    default:
        break;
    }
    if (d->group_rebuild_s > 0)
        s->rebuild_s = d->group_rebuild_s; /* one rebuild for the fleet as it is now */
}

static void play_all(struct sim *s)
{
    struct sim_elastic *e = s->elastic;
    for (size_t k = 0; k < e->dec.n && !s->rc; k++)
        play(s, &e->dec.v[k]);
    e->dec.n = 0;
}

/* Feeds ev to the pool and plays what it decides. */
static void pool_event(struct sim *s, struct ehp_event ev)
{
    ev.now_s = s->now;
    if (ehp_pool_event(s->elastic->pool, &ev, &s->elastic->dec) != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: the elastic pool refused event %d at %.3f s",
                 (int)ev.kind, s->now);
        return;
    }
    play_all(s);
}

/* ---- the run -------------------------------------------------------------------------- */

int sim_elastic_init(struct sim *s)
{
    const struct sim_layout *l = s->lay;
    struct sim_elastic *e = xcalloc(1, sizeof *e);
    s->elastic = e;
    if (ehp_lend_layout(&l->train, &s->st, &s->shape, s->in->hw, &e->lend) != 0 ||
        !e->lend.can_lend || e->lend.replica_gpus != l->replica_gpus)
        return sim_fail(s, LIBRA_EINTERNAL, "internal: the layout's hybrid replicas cannot lend");
    int nh = l->n_hybrid, r = l->replica_gpus;
    e->core_gpu = xmallocarray((size_t)l->n_train, sizeof *e->core_gpu);
    e->hybrid_gpu = xmallocarray((size_t)nh * (size_t)r, sizeof *e->hybrid_gpu);
    for (int g = 0; g < l->n_train; g++)
        e->core_gpu[g] = g;
    for (int g = 0; g < nh * r; g++)
        e->hybrid_gpu[g] = l->n_train + g;
    e->borrowed_s = xmallocarray((size_t)nh, sizeof *e->borrowed_s);
    for (int h = 0; h < nh; h++)
        e->borrowed_s[h] = NAN;
    e->phase_s = xcalloc((size_t)nh, sizeof *e->phase_s);
    e->phase = xcalloc((size_t)nh, sizeof *e->phase);
    struct ehp_pool_config c = {.gpus = s->cfg->cluster.gpus,
                                .gpus_per_node = s->cfg->cluster.gpus_per_node,
                                .replica_gpus = r,
                                .core_replicas = l->train.dp / ehp_replica_ranks(&l->train),
                                .core_gpu = e->core_gpu,
                                .hybrid_replicas = nh,
                                .hybrid_gpu = e->hybrid_gpu,
                                .batch_trajectories = s->batch,
                                .min_rollout_gpus = s->cfg->plan.min_rollout_gpus,
                                .times = e->lend.times,
                                .lifecycle = s->st.lifecycle};
    ehp_params_default(&c.params);
    c.params.rule =
        s->cfg->ehp.signal == SPEC_EHP_REFERENCE ? EHP_RULE_REFERENCE : EHP_RULE_BALANCE;
    struct libra_error err = {0};
    if (ehp_pool_new(&c, &e->pool, &err) != 0)
        return sim_fail(s, LIBRA_EINVAL, "the elastic pool: %s", err.msg);
    return 0;
}

void sim_elastic_free(struct sim *s)
{
    struct sim_elastic *e = s->elastic;
    if (!e)
        return;
    ehp_pool_free(e->pool);
    vec_free(&e->dec);
    free(e->core_gpu);
    free(e->hybrid_gpu);
    free(e->borrowed_s);
    free(e->phase_s);
    free(e->phase);
    free(e);
}

void sim_elastic_event(struct sim *s, uint32_t gen, uint64_t arg)
{
    static const enum ehp_event_kind kinds[] = {
        [PHASE_STARTED] = EHP_EV_STARTED,
        [PHASE_FETCHED] = EHP_EV_FETCHED,
        [PHASE_SYNCED] = EHP_EV_SYNCED,
        [PHASE_DEADLINE] = EHP_EV_TICK,
    };
    int phase = (int)(arg >> 16 & 0xf);
    struct ehp_event ev = {.kind = kinds[phase],
                           .replica = (int)(arg & 0xffff),
                           .member = (int)(arg >> 20 & 0xfff),
                           .generation = gen,
                           .version = (int64_t)(arg >> 32)};
    if (phase == PHASE_SYNCED) /* zero sync ends in lockstep with the core as it is now */
        ev.version = ehp_pool_version(s->elastic->pool);
    pool_event(s, ev);
}

int sim_elastic_step_begin(struct sim *s, const struct ehp_lend **lend)
{
    struct sim_elastic *e = s->elastic;
    pool_event(s, (struct ehp_event){
                      .kind = EHP_EV_STEP_BEGIN, .step = s->version, .version = s->version});
    const struct ehp_step *step = ehp_pool_step(e->pool);
    e->step_gpus = s->lay->n_train + step->active * e->lend.replica_gpus;
    *lend = &e->lend;
    return step->active;
}

void sim_elastic_step_end(struct sim *s, struct sim_step *st)
{
    struct sim_elastic *e = s->elastic;
    pool_event(s, (struct ehp_event){.kind = EHP_EV_STEP_END, .step = st->step});
    /* every count at the step's end: a member failing mid-step moves its replica's GPUs from
     * training to rollout at once */
    for (int h = 0; h < s->lay->n_hybrid; h++)
        e->cur.replicas[ehp_pool_hybrid(e->pool, h)->join]++;
    e->cur.hybrid_gpus = e->cur.replicas[EHP_JOIN_ACTIVE] * e->lend.replica_gpus;
    e->cur.train_gpus = s->lay->n_train + e->cur.hybrid_gpus;
    /* the fleet keeps its failed GPUs (idle, for utilisation); they neither serve nor train */
    e->cur.rollout_gpus = s->rollout_gpus - s->failed_gpus;
    st->pool = e->cur;
    s->out->pool.joins += e->cur.joins;
    s->out->pool.activated += e->cur.activated;
    s->out->pool.cancelled += e->cur.cancelled;
    s->out->pool.failed += e->cur.failed;
    s->out->pool.returned += e->cur.returned;
    e->cur = (struct sim_pool_step){0};
}

void sim_elastic_steer(struct sim *s, const struct sim_step *st)
{
    struct sim_elastic *e = s->elastic;
    if (st->train_s <= 0)
        return;
    struct ehp_signal_input in = {.train_s = st->train_s,
                                  .rollout_s = st->rollout_util * st->step_s,
                                  .queue_pressure = sim_queue_pressure(s),
                                  .active_pressure = sim_active_pressure(s),
                                  .train_replicas = e->step_gpus / s->lay->replica_gpus,
                                  .rollout_gpus = st->pool.rollout_gpus};
    if (ehp_pool_signal(e->pool, s->now, &in, &e->dec) != 0 ||
        ehp_pool_steer(e->pool, s->now, &e->dec) != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: the elastic pool refused its signal at %.3f s",
                 s->now);
        return;
    }
    play_all(s);
}

void sim_elastic_member_failed(struct sim *s, int i)
{
    struct sim_elastic *e = s->elastic;
    int h = s->inst[i].hybrid - 1;
    if (!e || h < 0)
        return;
    int first = s->lay->n_train + h * s->lay->replica_gpus;
    pool_event(s, (struct ehp_event){.kind = EHP_EV_MEMBER_FAILED,
                                     .replica = h,
                                     .member = s->inst[i].gpu - first,
                                     .generation = ehp_pool_hybrid(e->pool, h)->generation});
}
