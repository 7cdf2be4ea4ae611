/*
 * The run's summary, from the step records and the counters kept during the run.
 *
 * Rates follow libra-spec §5: trained tokens are the generated tokens of trajectories in
 * trained groups, over the steps after the warm-up, divided by the simulated time from the
 * end of the warm-up to the end of the last step; everything else (prompt and tool tokens,
 * re-prefills, filtered, stale and aborted work) is waste, counted by cause. Utilisation is
 * busy GPU-seconds over available GPU-seconds in the same window: an instance is busy while
 * its engine runs iterations (counted exactly up to the window's ends, engine_busy_at), the
 * trainer while it computes a step. The window is the union of the measured steps' windows, so
 * the run's rollout utilisation is the steps' weighted by their durations.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"

void sim_hist_add(struct sim_hist *h, double v)
{
    double b = floor(SIM_HIST_PER_DECADE * log10(v / h->lo));
    h->count[!(b > 0) ? 0 : b >= SIM_HIST_BINS ? SIM_HIST_BINS - 1 : (int)b]++;
}

void sim_hist_merge(struct sim_hist *into, const struct sim_hist *h)
{
    for (int b = 0; b < SIM_HIST_BINS; b++)
        into->count[b] += h->count[b];
}

double sim_hist_edge(const struct sim_hist *h, int b)
{
    return h->lo * pow(10, (double)b / SIM_HIST_PER_DECADE);
}

/* Trained tokens/s over each half of the measured steps (sim_result.half_tokens_per_s). */
static void halves(const struct sim *s, struct sim_result *o)
{
    size_t first = 0, n = 0;
    for (size_t i = 0; i < s->steps.n; i++)
        if (s->steps.v[i].step >= o->warmup && n++ == 0)
            first = i;
    if (n < 2)
        return;
    size_t mid = first + n / 2; /* the second half's first step */
    int64_t tokens[2] = {0, 0};
    for (size_t i = first; i < first + n; i++)
        tokens[i >= mid] += s->steps.v[i].trained_tokens;
    double split_s = s->steps.v[mid - 1].end_s;
    double span_s[2] = {split_s - s->measure_from_s, s->now - split_s};
    for (int h = 0; h < 2; h++)
        o->half_tokens_per_s[h] = span_s[h] > 0 ? (double)tokens[h] / span_s[h] : 0;
}

void sim_metrics_finish(struct sim *s)
{
    struct sim_result *o = s->out;
    o->steps_run = (int)s->steps.n;
    o->steps = xcalloc(s->steps.n ? s->steps.n : 1, sizeof *o->steps);
    if (s->steps.n)
        memcpy(o->steps, s->steps.v, s->steps.n * sizeof *o->steps);
    o->end_s = s->now;
    o->warmup = s->opts->warmup;
    o->n_tool_pools = s->n_pools;
    o->tool_pools = xcalloc(s->n_pools ? s->n_pools : 1, sizeof *o->tool_pools);
    for (size_t i = 0; i < s->n_pools; i++) {
        const struct sim_pool *p = &s->pools[i];
        struct sim_tool_pool *q = &o->tool_pools[i];
        *q = (struct sim_tool_pool){.workers = p->workers,
                                    .calls = p->calls,
                                    .wait_s = p->wait_s,
                                    .busy_s = sim_pool_busy_s(s, p)};
        snprintf(q->tool, sizeof q->tool, "%s", p->name);
    }
    double n = 0, step = 0, train = 0, roll = 0, tail = 0;
    for (size_t i = 0; i < s->steps.n; i++) {
        const struct sim_step *st = &s->steps.v[i];
        o->trained_tokens_all += st->trained_tokens;
        if (st->step < o->warmup)
            continue;
        o->trained_tokens += st->trained_tokens;
        o->trajectories += st->trajectories;
        step += st->step_s;
        train += st->train_s;
        roll += st->rollout_s;
        tail += st->tail_share;
        n++;
    }
    o->measured_s = s->now - s->measure_from_s;
    if (o->measured_s > 0) {
        o->tokens_per_s = (double)o->trained_tokens / o->measured_s;
        o->trajectories_per_s = (double)o->trajectories / o->measured_s;
    }
    halves(s, o);
    if (n > 0) {
        o->mean_step_s = step / n;
        o->mean_train_s = train / n;
        o->mean_rollout_s = roll / n;
        o->tail_share = tail / n;
    }
    o->generated_tokens_per_s = s->now > 0 ? (double)o->generated_tokens / s->now : 0;
    o->rollout_gpu_s = sim_avail_gpu_s(s, &s->measure_avail);
    o->rollout_util = sim_util(sim_fleet_busy_gpu_s(s) - s->measure_busy_gpu_s, o->rollout_gpu_s);
    o->train_util = sim_util(s->train_busy_s, o->measured_s);
    for (size_t i = 0; i < s->traj.n; i++) /* a released slot is accounted */
        if (!s->traj.v[i].accounted)
            o->unconsumed_tokens += s->traj.v[i].generated;
    if (s->rmetrics)
        o->routing = sched_metrics_to_json(s->rmetrics, sched_policy_bucketless(s->lay->policy));
    o->replans = s->replans.v;
    o->n_replans = s->replans.n;
    s->replans.v = NULL;
    s->replans.n = s->replans.cap = 0;
    sim_trace_finish(s);
}
