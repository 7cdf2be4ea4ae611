/*
 * The trainer: what a step costs on the trajectories it actually got, and the step records.
 *
 * A step takes whole GRPO groups. Its time is cost/train.h's on the step's real sequences
 * (each trajectory's whole context: prompt, generated and tool tokens), dealt to DP ranks and
 * packed by tokens into micro-batches, so the most loaded rank sets the pace, with the
 * old-log-prob and reference forwards the config asks for. Staleness is counted at a
 * trajectory's start (libra-spec §5): the trainer at version V accepts a group started at
 * version v while V - v <= rl.max_staleness.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ehp/lend.h"
#include "sim/internal.h"
#include "util/stats.h"

uint32_t sim_group_kept(const struct sim *s, const struct sim_group *g)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < g->n; k++)
        kept += s->traj.v[g->first + k].state != SIM_T_ABORTED;
    return kept;
}

void sim_group_waste(struct sim *s, struct sim_group *g, enum sim_waste why)
{
    for (uint32_t k = 0; k < g->n; k++) {
        struct sim_traj *t = &s->traj.v[g->first + k];
        if (!t->accounted) {
            s->out->waste[why] += t->generated;
            t->accounted = true;
        }
    }
    sim_group_release(s, g);
}

bool sim_group_stale(struct sim *s, struct sim_group *g)
{
    if (job_fresh(&s->job, s->version, g->version))
        return false;
    s->out->staleness[s->staleness + 1] += sim_group_kept(s, g);
    sim_group_waste(s, g, SIM_WASTE_STALE);
    return true;
}

/* Share of [first_start, last end] after the end of the trajectory that precedes the last
 * 10 % (at least one) to finish: two order statistics of ends (reordered), by selection. */
static double tail_share(double *ends, size_t n, double first_start)
{
    if (n == 0)
        return 0;
    size_t tail = (size_t)ceil(0.1 * (double)n);
    double last = stats_select(ends, n, n - 1);
    double t90 = n > tail ? stats_select(ends, n - 1, n - tail - 1) : first_start;
    double span = last - first_start;
    return span > 0 ? (last - t90) / span : 0;
}

void sim_batch_stats(struct sim *s, const uint32_t *g, size_t n, double first_start_s,
                     struct sim_step *st)
{
    s->lens.n = 0;
    s->ends.n = 0;
    double first = first_start_s, stale = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sim_group *gr = &s->groups.v[g[i]];
        for (uint32_t k = 0; k < gr->n; k++) {
            struct sim_traj *t = &s->traj.v[gr->first + k];
            if (t->state == SIM_T_ABORTED) /* timed out: masked, its tokens already waste */
                continue;
            int64_t ctx = t->final_context;
            vec_push(&s->lens, ctx > UINT32_MAX ? UINT32_MAX : (uint32_t)ctx);
            vec_push(&s->ends, t->end_s);
            if (isnan(first_start_s) && (isnan(first) || t->start_s < first))
                first = t->start_s;
            st->trained_tokens += t->generated;
            sim_hist_add(&s->batch_tokens, (double)t->generated);
            sim_hist_add(&s->batch_duration, t->end_s - t->start_s);
            stale += (double)(s->version - t->version_start);
            t->accounted = true;
        }
    }
    for (size_t i = 0; i < n; i++)
        sim_group_release(s, &s->groups.v[g[i]]);
    st->trajectories = (int64_t)s->lens.n;
    st->mean_staleness = s->lens.n ? stale / (double)s->lens.n : 0;
    st->tail_share = tail_share(s->ends.v, s->ends.n, first);
}

/* Seconds of one step of the layout on the sequences in s->lens, with the hybrids the pool has
 * training beside the core. */
static double step_time(struct sim *s)
{
    size_t n = s->lens.n;
    cost_train_seqs_free(&s->seqs);
    if (cost_train_seqs_init(&s->seqs, &s->shape, s->lens.v, n) != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: a training step without sequences");
        return 0;
    }
    const struct ehp_lend *lend = NULL;
    int active = s->elastic ? sim_elastic_step_begin(s, &lend) : 0;
    double step_s;
    if (ehp_batch_step_s(&s->lay->train, &s->st, lend, active, &s->shape, s->in->hw, &s->seqs,
                         &s->scratch, &step_s) != 0) {
        sim_fail(s, LIBRA_EINTERNAL,
                 "internal: a training step of %zu sequences with %d hybrid replicas cannot be "
                 "costed on tp%d pp%d cp%d dp%d",
                 n, active, s->lay->train.tp, s->lay->train.pp, s->lay->train.cp, s->lay->train.dp);
        return 0;
    }
    return step_s;
}

double sim_train_begin(struct sim *s, const uint32_t *g, size_t n)
{
    struct sim_step *st = &s->cur;
    memset(st, 0, sizeof *st);
    st->step = s->version;
    for (size_t i = 0; i < n; i++) {
        const struct sim_group *gr = &s->groups.v[g[i]];
        int64_t k = s->version - gr->version;
        s->out->staleness[k < 0 ? 0 : k > s->staleness ? s->staleness : k] += sim_group_kept(s, gr);
    }
    sim_batch_stats(s, g, n, NAN, st);
    st->train_s = s->lens.n ? step_time(s) : 0;
    s->train_start_s = s->now;
    return st->train_s;
}

/* The step's training and rollout shares and its waste: the counters' change since the
 * previous step ended. */
static void step_deltas(struct sim *s, struct sim_step *st)
{
    double busy = sim_fleet_busy_gpu_s(s);
    st->train_util = sim_util(st->train_s, st->step_s);
    st->rollout_gpu_s = sim_avail_gpu_s(s, &s->step_avail);
    st->rollout_util = sim_util(busy - s->step_busy_gpu_s, st->rollout_gpu_s);
    s->step_busy_gpu_s = busy;
    sim_avail_restart(s, &s->step_avail);
    for (int w = 0; w < SIM_WASTES; w++) {
        st->waste[w] = s->out->waste[w] - s->step_waste[w];
        s->step_waste[w] = s->out->waste[w];
    }
}

void sim_step_record(struct sim *s, struct sim_step *st)
{
    step_deltas(s, st);
    if (st->step >= s->opts->warmup) {
        s->train_busy_s += st->train_s;
        sim_hist_merge(&s->out->tokens_hist, &s->batch_tokens);
        sim_hist_merge(&s->out->duration_hist, &s->batch_duration);
    }
    memset(s->batch_tokens.count, 0, sizeof s->batch_tokens.count);
    memset(s->batch_duration.count, 0, sizeof s->batch_duration.count);
    if (st->train_s > 0)
        sim_trace_train(s, st);
    vec_push(&s->steps, *st);
    if (s->in->progress)
        atomic_fetch_add(&s->in->progress->steps_done, 1);
    sched_router_tick(s->router); /* every sched.rebuild_interval steps: follow drift */
    /* cmlfq_h's deadline: k + 1 of the steps simulated so far (the planner's guess before) */
    sched_router_set_deadline(s->router,
                              (s->cfg->rl.max_staleness + 1) * st->end_s / (double)s->steps.n);
    if (st->step + 1 == s->opts->warmup)
        sim_measure_begin(s);
    if (st->step + 1 >= s->opts->steps)
        s->finished = true;
}
