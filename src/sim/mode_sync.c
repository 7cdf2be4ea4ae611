/*
 * The colocated and rollout modes: one batch at a time.
 *
 * colocated is verl's synchronous hybrid engine: every GPU serves rollout instances of one TP;
 * a step launches the batch's groups at the current policy version and waits for the last of
 * them; then the GPUs switch to training (freeing rollout memory: the lifecycle's fixed switch
 * cost), train the step on every GPU, and switch back, resharding the new weights into the
 * rollout layout in place (cost_reshard_s), which is also the weight update: prefix caches are
 * flushed and every trajectory is on-policy. A step generates in rounds as dynamic sampling's
 * rule says (plan/sampling.h, the planner's too): filtered groups are replaced by further
 * rounds, of the missing groups or of rl.gen_batch_factor batches, until the batch is full or
 * rl.max_gen_batches rounds ran; rl.overprovision_frac launches that share more groups per round
 * and aborts the slowest once the batch is full (APRIL / slime). rollout runs the same rounds
 * on a fixed fleet with no trainer: its steps are batches.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/sampling.h"
#include "plan/train.h"
#include "sim/internal.h"
#include "util/alloc.h"

enum { TIMER_TO_TRAIN = 1, TIMER_TRAINED, TIMER_TO_ROLLOUT };

struct sync_mode {
    struct plan_sampling sampling; /* how many groups each round launches */
    int rounds;                    /* generation rounds of the step so far */
    int live;                      /* groups of the round not yet complete */
    VEC(uint32_t) accepted;        /* groups for the batch */
    VEC(uint32_t) round_groups;    /* groups of the current round */
    double phase_start_s;          /* start of the step's rollout */
    double rollout_s;              /* rollout phase of the step */
    double switch_s;               /* both switches */
    double phase_from_s;           /* start of the switch or training in progress */
    int64_t step;                  /* steps done (the rollout mode has no trainer version) */
};

static struct sync_mode *state(struct sim *s)
{
    return s->mode;
}

/* Launches the next round's groups; returns false when the rule says the step generates no
 * more. */
static bool launch_round(struct sim *s)
{
    struct sync_mode *m = state(s);
    size_t n = (size_t)plan_round_groups(&m->sampling, m->rounds + 1, (int64_t)m->accepted.n);
    if (n == 0)
        return false;
    m->rounds++;
    m->round_groups.n = 0;
    m->live = (int)n;
    for (size_t i = 0; i < n && !s->rc; i++)
        vec_push(&m->round_groups, sim_launch_group(s, m->rounds));
    return true;
}

static void start_step(struct sim *s)
{
    struct sync_mode *m = state(s);
    m->rounds = 0;
    m->accepted.n = 0;
    m->phase_start_s = s->now;
    m->switch_s = 0;
    launch_round(s);
}

static void record(struct sim *s, struct sim_step *st)
{
    struct sync_mode *m = state(s);
    st->step = m->step++;
    st->end_s = s->now;
    st->step_s = s->now - s->last_step_end_s;
    st->rollout_s = m->rollout_s;
    st->switch_s = m->switch_s;
    s->last_step_end_s = s->now;
    sim_step_record(s, st);
    sim_trace_step_done(s, st->step);
    if (!s->finished)
        start_step(s);
}

static void rollout_done(struct sim *s)
{
    struct sync_mode *m = state(s);
    m->rollout_s = s->now - m->phase_start_s;
    if (!sim_mode_desc(s->lay->mode)->trains) {
        struct sim_step st = {0};
        /* one policy rolls out every batch: each is of staleness 0, as colocated's */
        for (size_t i = 0; i < m->accepted.n; i++)
            s->out->staleness[0] += sim_group_kept(s, &s->groups.v[m->accepted.v[i]]);
        sim_batch_stats(s, m->accepted.v, m->accepted.n, m->phase_start_s, &st);
        record(s, &st);
        return;
    }
    m->switch_s = s->st.lifecycle.switch_fixed_s;
    m->phase_from_s = s->now;
    sim_schedule(s, s->now + m->switch_s, SIM_EV_MODE, 0, TIMER_TO_TRAIN);
}

static void round_end(struct sim *s)
{
    if (!launch_round(s))
        rollout_done(s);
}

/* Aborts the groups of the round still running: the batch is full. */
static void abort_rest(struct sim *s)
{
    struct sync_mode *m = state(s);
    for (size_t i = 0; i < m->round_groups.n && !s->rc; i++) {
        struct sim_group *g = &s->groups.v[m->round_groups.v[i]];
        if (g->done < g->n && !g->aborted)
            sim_group_abort(s, g, SIM_WASTE_ABORTED);
    }
    m->live = 0;
}

/* A kept group joins the batch while it is short; beyond it the group is surplus. */
static void take(struct sim *s, struct sim_group *g)
{
    struct sync_mode *m = state(s);
    if (m->accepted.n < (size_t)s->groups_per_batch)
        vec_push(&m->accepted, (uint32_t)(g - s->groups.v));
    else
        sim_group_waste(s, g, SIM_WASTE_SURPLUS);
}

/*
 * A group of the round is complete. Kept groups join the batch as they complete, and once it is
 * full the rest of the round is aborted; a round that runs out (gen_batch) fills the batch when
 * it ends, in launch order, as verl truncates its generation batch in the dataloader's order.
 */
static void group_done(struct sim *s, struct sim_group *g)
{
    struct sync_mode *m = state(s);
    bool runs_out = plan_round_runs_out(&m->sampling);
    m->live--;
    if (g->filtered)
        sim_group_waste(s, g, SIM_WASTE_FILTERED);
    else if (!runs_out)
        take(s, g);
    if (m->accepted.n == (size_t)s->groups_per_batch && m->live > 0 && !runs_out)
        abort_rest(s);
    if (m->live > 0)
        return;
    /* a round that ran out: its kept groups fill the batch in launch order */
    for (size_t i = 0; runs_out && i < m->round_groups.n; i++) {
        struct sim_group *r = &s->groups.v[m->round_groups.v[i]];
        if (!r->filtered && !r->aborted)
            take(s, r);
    }
    round_end(s);
}

/* The way back to rollout: the new weights resharded into the rollout layout in place. */
static double reshard_s(const struct sim *s)
{
    return plan_train_reshard_s(&s->lay->train, &s->st, &s->shape, s->in->hw,
                                s->cfg->cluster.gpus_per_node, s->lay->inst[0].tp);
}

/* A switch of every GPU between rollout and training ended now: the trainer's weight-update
 * track and the timeline's rows show it. */
static void switched(struct sim *s, const char *name)
{
    struct sync_mode *m = state(s);
    sim_trace_phase(s, SIM_USE_SYNC, m->phase_from_s, SIM_ROW_TRAINER | SIM_ROW_FLEET);
    sim_trace_slice(s, SIM_PID_TRAINER, 1, name, m->phase_from_s, s->now, NULL);
    m->phase_from_s = s->now;
}

static void timer(struct sim *s, uint64_t what)
{
    struct sync_mode *m = state(s);
    switch (what) {
    case TIMER_TO_TRAIN: {
        switched(s, "switch to training");
        double d = m->accepted.n ? sim_train_begin(s, m->accepted.v, m->accepted.n) : 0;
        if (!m->accepted.n)
            memset(&s->cur, 0, sizeof s->cur);
        sim_schedule(s, s->now + d, SIM_EV_MODE, 0, TIMER_TRAINED);
        break;
    }
    case TIMER_TRAINED: {
        sim_trace_phase(s, SIM_USE_TRAIN, m->phase_from_s, SIM_ROW_FLEET); /* the same GPUs */
        m->phase_from_s = s->now;
        double r = reshard_s(s);
        m->switch_s += r;
        sim_schedule(s, s->now + r, SIM_EV_MODE, 0, TIMER_TO_ROLLOUT);
        break;
    }
    case TIMER_TO_ROLLOUT: {
        switched(s, "reshard to rollout");
        s->version++;
        sim_fleet_update(s, s->version);
        struct sim_step st = s->cur;
        record(s, &st);
        break;
    }
    }
}

static void begin(struct sim *s)
{
    s->mode = xcalloc(1, sizeof(struct sync_mode));
    plan_sampling_from_config(&state(s)->sampling, s->cfg);
    start_step(s);
}

static void resume(struct sim *s)
{
    (void)s;
}

static void release(struct sim *s)
{
    struct sync_mode *m = state(s);
    if (m) {
        vec_free(&m->accepted);
        vec_free(&m->round_groups);
    }
}

const struct sim_mode_ops sim_mode_sync_ops = {begin, group_done, timer, resume, release};
