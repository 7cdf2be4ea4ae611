/*
 * Online replanning in the libra mode (libra-spec §2 "When it runs"; docs/sim.md "Online
 * replanning").
 *
 * The length model is a window of the trajectories that finished last among launches older
 * than every trajectory still in flight (later launches' finished ones are their short ones):
 * at most HISTORY in whole batches (the reference keeps 4,096; docs/sim.md says why fewer), at
 * least plan_sample_size(batch) (the sample `libra plan` and the gateway plan on) before the
 * first evaluation, so it follows the workload as it drifts while its tail, which the
 * planner's span charges, is not one sample's accident. At the end of a step a
 * trigger may fire: every plan.replan_interval_steps steps, or (plan.replan_pressure) on queue
 * pressure >= 0.75, active-rollout pressure >= 0.85, >= 8 trajectories rejected as stale since
 * the last accepted replan, or a rollout/train ratio >= 1.25, more than max(1, interval / 2)
 * steps after the last evaluation (a lasting pressure would plan every other step); never
 * during the warm-up
 * (sim.warmup_steps) or before the window holds its least. The planner then plans the rollout fleet
 * on the window with the split and the training layout pinned (a change of the training
 * topology needs a restart: not online), and predicts the running fleet on the same window
 * (plan_solve_against: one length model for both).
 *
 * The analytic model ranks fleets with a bias the start has measured: the verification may
 * have chosen the running fleet by simulation over one the model predicted faster. So a
 * replan acts on how the ranking moved since the start, not on the ranking itself: the
 * candidate's predicted step is divided by the model's ratio of candidate to running fleet on
 * the start's length sample over the ratio the verification measured between the two where it
 * simulated both, and else by the model's ratio when that is below 1 (on a workload that has
 * not moved, the two cancel and nothing changes). Both predictions are then scaled by the observed
 * ratio of the simulated step to the running fleet's prediction (the mean of the last steps since
 * the fleet last changed), and plan_replan_decide weighs the gain over plan.replan_horizon_steps
 * (or the steps left, when fewer) against the cost of stopping and starting the instances the new
 * placement does not keep. An accepted replan retires those instances (their live turns resume
 * elsewhere, as a lend's do), starts the new ones cold, routes over the new buckets (the routing
 * figures restart on them) and owes the weight-update group a rebuild. Hybrid replicas of the
 * elastic pool are the pool's: a replan plans the core rollout fleet beside them, counting them as
 * training GPUs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/fleet.h"
#include "plan/replan.h"
#include "plan/sample.h"
#include "sim/internal.h"
#include "util/alloc.h"

/* The reference's pressure triggers (libra-spec §2). */
#define QUEUE_PRESSURE 0.75
#define ACTIVE_PRESSURE 0.85
#define STALE_REJECTED 8
#define ROLLOUT_TRAIN_RATIO 1.25
#define OBSERVED_STEPS 5 /* simulated steps the correction averages, at most */
#define HISTORY 1024     /* finished trajectories the window holds, at most */

/* A finished trajectory, as the planner's sample holds it, and its group's launch. */
struct record {
    int64_t prompt, generated, tool, turns;
    double tool_s;
    bool filtered;
    int64_t group; /* the group's launch index */
};

struct sim_replan {
    struct record *ring; /* finished trajectories, oldest at head */
    size_t cap, n, head;
    size_t most;               /* trajectories the window holds, at most */
    size_t least;              /* ... before the first evaluation */
    int64_t last_eval;         /* step of the last evaluation; -1: none */
    int64_t last_interval;     /* step of the last scheduled one */
    int64_t last_change;       /* step at which the fleet last changed */
    int64_t stale_mark;        /* trajectories rejected as stale at the last accepted replan */
    struct plan_lengths start; /* the length sample the start was planned on */
    int n_train;               /* the pinned split: GPUs training, hybrids included */
    struct plan_train_layout train;
    struct spec_bucket_layout buckets; /* routed over now */
};

bool sim_replans(const struct sim *s)
{
    const struct spec_plan_config *pc = &s->cfg->plan;
    return s->lay->mode == SIM_LIBRA && s->lay->planned &&
           (pc->replan_interval_steps > 0 || pc->replan_pressure);
}

void sim_replan_init(struct sim *s)
{
    const struct sim_layout *l = s->lay;
    struct sim_replan *r = xcalloc(1, sizeof *r);
    size_t batch = (size_t)s->batch;
    r->least = plan_sample_size(batch);
    r->most = HISTORY / batch * batch > r->least ? HISTORY / batch * batch : r->least;
    /* and the launches still in flight (at most staleness + 1 batches' worth, and their
     * replacements) finished early beside them */
    r->cap = r->most + (size_t)(s->staleness + 3) * batch;
    r->ring = xcalloc(r->cap, sizeof *r->ring);
    r->last_eval = r->last_interval = -1;
    r->train = l->train;
    r->train.dp += l->n_hybrid;
    r->n_train = l->n_train + l->n_hybrid * l->replica_gpus;
    r->buckets = l->buckets;
    sim_layout_sample(s->in, &r->start);
    s->replan = r;
    s->out->replanning = true;
}

void sim_replan_free(struct sim *s)
{
    if (!s->replan)
        return;
    free(s->replan->ring);
    plan_lengths_free(&s->replan->start);
    free(s->replan);
    s->replan = NULL;
}

void sim_replan_group(struct sim *s, const struct sim_group *g)
{
    struct sim_replan *r = s->replan;
    for (uint32_t k = 0; k < g->n; k++) {
        const struct sim_traj *t = &s->traj.v[g->first + k];
        if (t->state == SIM_T_ABORTED)
            continue; /* timed out: its whole length was never seen */
        struct record rec = {t->first_prompt, t->total_tokens, t->tool_tokens, t->n_turns,
                             t->tool_s,       g->filtered,     g->index};
        if (r->n < r->cap)
            r->ring[(r->head + r->n++) % r->cap] = rec;
        else {
            r->ring[r->head] = rec;
            r->head = (r->head + 1) % r->cap;
        }
    }
}

/* ---- triggers ------------------------------------------------------------------------- */

static int64_t stale_rejected(const struct sim *s)
{
    return s->out->staleness[s->out->staleness_n - 1];
}

/* The trigger that fires at the end of step st, or NULL. */
static const char *trigger(struct sim *s, const struct sim_step *st)
{
    struct sim_replan *r = s->replan;
    const struct spec_plan_config *pc = &s->cfg->plan;
    if (s->version <= s->cfg->sim.warmup_steps || r->n < r->least + (r->cap - r->most))
        return NULL;
    if (pc->replan_interval_steps > 0 &&
        s->version - (r->last_interval < 0 ? 0 : r->last_interval) >= pc->replan_interval_steps) {
        r->last_interval = s->version;
        return "interval";
    }
    int cooldown = pc->replan_interval_steps / 2 > 1 ? pc->replan_interval_steps / 2 : 1;
    if (!pc->replan_pressure || (r->last_eval >= 0 && s->version - r->last_eval <= cooldown))
        return NULL;
    if (sim_queue_pressure(s) >= QUEUE_PRESSURE)
        return "queue pressure";
    if (sim_active_pressure(s) >= ACTIVE_PRESSURE)
        return "active-rollout pressure";
    if (stale_rejected(s) - r->stale_mark >= STALE_REJECTED)
        return "stale rejections";
    if (st->train_s > 0 && st->rollout_util * st->step_s / st->train_s >= ROLLOUT_TRAIN_RATIO)
        return "rollout/train ratio";
    return NULL;
}

/* ---- evaluation ----------------------------------------------------------------------- */

/* Whether instance i is a core rollout instance in rollout now. */
static bool core_live(const struct sim *s, int i)
{
    const struct sim_inst *in = &s->inst[i];
    return !in->hybrid && (in->state == SIM_INST_SERVING || in->state == SIM_INST_STARTING);
}

/* The oldest launch a trajectory of which is still in flight (INT64_MAX: none). */
static int64_t oldest_in_flight(const struct sim *s)
{
    int64_t oldest = INT64_MAX;
    for (size_t k = 0; k < s->traj.n; k++) {
        const struct sim_traj *t = &s->traj.v[k];
        if (sim_traj_in_flight(t) && s->groups.v[t->group].index < oldest)
            oldest = s->groups.v[t->group].index;
    }
    return oldest;
}

/* The window: the finished trajectories of launches older than every one still in flight,
 * the newest r->most of them in whole batches, in finishing order. Trajectories of later
 * launches are left out: those that finished so far are the short ones, and a window of them
 * would plan for a workload shorter than the run's. Returns the trajectories appended. */
static size_t window(const struct sim *s, struct plan_lengths *out)
{
    const struct sim_replan *r = s->replan;
    int64_t frontier = oldest_in_flight(s);
    size_t have = 0;
    for (size_t k = 0; k < r->n; k++)
        have += r->ring[(r->head + k) % r->cap].group < frontier;
    size_t n = (have < r->most ? have : r->most) / (size_t)s->batch * (size_t)s->batch;
    size_t skip = have - n;
    for (size_t k = 0, seen = 0; k < r->n; k++) {
        const struct record *x = &r->ring[(r->head + k) % r->cap];
        if (x->group >= frontier || seen++ < skip)
            continue;
        plan_lengths_add(out, x->prompt, x->generated, x->tool, x->turns, x->tool_s, x->filtered);
    }
    out->pool_s = r->start.pool_s; /* the workload's pools, as the start was planned on */
    return n;
}

/* Plans sample w with the split and training layout pinned (and the multiset `pinned` too,
 * when not NULL) into *out, and the multiset `given` on the same pins into *scored. */
static int solve(struct sim *s, const struct plan_lengths *w, const int *pinned, const int *given,
                 struct plan_result *out, struct plan_result *scored)
{
    struct libra_config cfg = *s->cfg;
    cfg.plan.mode = SPEC_PLAN_ASYNC;
    struct plan_pin pin = {s->replan->n_train, &s->replan->train, pinned};
    struct plan_problem p = {.cfg = &cfg,
                             .hw = s->in->hw,
                             .model = s->in->model,
                             .settings = &s->st,
                             .sample = plan_lengths_view(w),
                             .tool_s = w->tool_s.v,
                             .filtered = w->filtered.v,
                             .pool_s = w->pool_s,
                             .pin = &pin};
    struct libra_error err = {0};
    return plan_solve_against(&p, given, out, scored, &err);
}

/* Mean simulated step over the last steps since the fleet last changed (at most
 * OBSERVED_STEPS), or NAN when none. */
static double observed_step_s(const struct sim *s)
{
    double sum = 0;
    int n = 0;
    for (size_t k = s->steps.n; k-- > 0 && n < OBSERVED_STEPS;) {
        if ((int64_t)k < s->replan->last_change || (int64_t)k < s->cfg->sim.warmup_steps)
            break;
        sum += s->steps.v[k].step_s;
        n++;
    }
    return n ? sum / n : NAN;
}

/* Mean context (KV in use and kept for reuse) of the serving core instances of each TP. */
static void resident(struct sim *s, double out[PLAN_NTP])
{
    int n[PLAN_NTP] = {0};
    memset(out, 0, PLAN_NTP * sizeof *out);
    for (int i = 0; i < s->n_inst; i++)
        if (core_live(s, i) && s->inst[i].eng) {
            struct engine_stats st;
            engine_stats(s->inst[i].eng, &st);
            int t = spec_tp_index(s->inst[i].tp);
            out[t] += (double)(st.kv_used_tokens + st.cache_tokens);
            n[t]++;
        }
    for (int t = 0; t < PLAN_NTP; t++)
        out[t] = n[t] ? out[t] / n[t] : 0;
}

/* Running core instance of TP tp on first GPU gpu not yet matched, or -1. */
static int running_at(const struct sim *s, const bool *matched, int tp, int gpu)
{
    for (int i = 0; i < s->n_inst; i++)
        if (core_live(s, i) && !matched[i] && s->inst[i].tp == tp && s->inst[i].gpu == gpu)
            return i;
    return -1;
}

/* A replan's fleet: the candidate's placement, then the hybrids' instances, with buckets of
 * the candidate's layout; from[j]: the running instance new instance j is (the same TP on the
 * same GPUs, or a hybrid's), -1 for one to start; kept: the running core instances it keeps,
 * by TP. */
struct next {
    struct sim_layout l;
    int *from;
    int kept[PLAN_NTP];
};

static int next_fleet(struct sim *s, const struct plan_result *cand, struct next *n)
{
    memset(n, 0, sizeof *n);
    sim_layout_plan_instances(cand, &n->l);
    n->l.buckets = cand->layout;
    int core = n->l.n_inst;
    size_t most = (size_t)core + (size_t)s->n_inst; /* with every hybrid instance */
    n->l.inst = xreallocarray(n->l.inst, most, sizeof *n->l.inst);
    n->from = xmallocarray(most, sizeof *n->from);
    bool *matched = xcalloc((size_t)s->n_inst, sizeof *matched);
    for (int j = 0; j < core; j++) {
        const struct sim_instance_spec *sp = &n->l.inst[j];
        n->from[j] = running_at(s, matched, sp->tp, sp->gpu);
        if (n->from[j] >= 0) {
            matched[n->from[j]] = true;
            n->kept[spec_tp_index(sp->tp)]++;
        }
    }
    free(matched);
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].hybrid) {
            sim_buckets_serve(&n->l.buckets, s->inst[i].tp);
            n->from[n->l.n_inst] = i;
            n->l.inst[n->l.n_inst++] =
                (struct sim_instance_spec){s->inst[i].tp, 0, s->inst[i].gpu, s->inst[i].hybrid};
        }
    struct libra_error err = {0};
    if (sim_layout_assign_buckets(&n->l, &err) != 0)
        return sim_fail(s, LIBRA_EINTERNAL, "internal: a replan's buckets: %s", err.msg);
    return 0;
}

static void next_free(struct next *n)
{
    sim_layout_free(&n->l);
    free(n->from);
}

/* Routes over layout b from now on; the routing figures restart on it. */
static void route_over(struct sim *s, const struct spec_bucket_layout *b)
{
    struct sim_replan *r = s->replan;
    if (plan_layout_same(&r->buckets, b))
        return;
    struct libra_error err = {0};
    if (sched_router_set_layout(s->router, b, &err) != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: a replan's buckets: %s", err.msg);
        return;
    }
    if (s->rmetrics) {
        sched_metrics_free(s->rmetrics);
        s->rmetrics = sched_metrics_new(b);
    }
    s->out->routing_since_step = s->version;
    r->buckets = *b;
}

/* Plays an accepted replan: the router on the new buckets, the new instances started (cold),
 * then the ones not kept retired (their turns resume on the instances left, or wait on a
 * starting one), and the group rebuild owed. */
static void apply(struct sim *s, const struct next *n, struct sim_replan_eval *ev)
{
    struct sim_replan *r = s->replan;
    route_over(s, &n->l.buckets);
    int before = s->n_inst;
    bool *stays = xcalloc((size_t)before, sizeof *stays);
    double cold = cost_cold_start_s(&s->st.lifecycle, &s->shape);
    for (int j = 0; j < n->l.n_inst && !s->rc; j++) {
        const struct sim_instance_spec *sp = &n->l.inst[j];
        if (n->from[j] >= 0) {
            stays[n->from[j]] = true;
            s->inst[n->from[j]].bucket = s->reg[n->from[j]].bucket = sp->bucket;
        } else if (sim_inst_add(s, sp->tp, sp->gpu, sp->bucket, cold) >= 0) {
            ev->started++;
        }
    }
    for (int i = 0; i < before && !s->rc; i++)
        if (core_live(s, i) && !stays[i]) {
            sim_inst_retire(s, i);
            ev->stopped++;
        }
    free(stays);
    s->rebuild_s = cost_group_rebuild_s(&s->st.lifecycle, 1 + s->rollout_gpus);
    r->last_change = s->version;
    r->stale_mark = stale_rejected(s);
}

/* The model's ratio of fleet `cand` to fleet `cur` (counts) on the start's sample: 1 when
 * either cannot be scored there. */
static double start_ratio(struct sim *s, const int *cur, const int *cand)
{
    if (memcmp(cur, cand, PLAN_NTP * sizeof *cur) == 0)
        return 1.0;
    struct plan_result a, b;
    int rc = solve(s, &s->replan->start, cand, cur, &b, &a);
    double ratio = rc == 0 && a.feasible && b.feasible && a.step_s > 0 ? b.step_s / a.step_s : 1.0;
    plan_result_free(&a);
    plan_result_free(&b);
    return ratio;
}

/* The verification's trained tokens/s of fleet counts at the start's split, or NAN when it did
 * not simulate that fleet. */
static double measured_rate(const struct sim_layout *l, const int *counts)
{
    for (int i = 0; i < l->n_measured; i++)
        if (memcmp(l->measured[i].counts, counts, PLAN_NTP * sizeof *counts) == 0)
            return l->measured[i].tokens_per_s;
    return NAN;
}

/* The start's bias of the model for cand over cur, which a candidate's prediction is divided
 * by: the model's ratio over the one the verification measured where it simulated both, else
 * the model's ratio when below 1 (the verification chose cur over a fleet the model put
 * ahead: at least as fast, as far as the start knows). */
static double start_bias(struct sim *s, struct sim_replan_eval *ev)
{
    double cur = measured_rate(s->lay, ev->cur), cand = measured_rate(s->lay, ev->cand);
    ev->measured_ratio = cur > 0 && cand > 0 ? cur / cand : NAN; /* steps: tokens/s inverted */
    return isnan(ev->measured_ratio) ? fmin(ev->start_ratio, 1.0)
                                     : ev->start_ratio / ev->measured_ratio;
}

/* The steps a replan's gain is counted over: plan.replan_horizon_steps, or the steps the run
 * has left when fewer (a gain after the last step buys nothing). */
static int horizon_steps(const struct sim *s)
{
    int64_t left = s->cfg->rl.steps - s->version;
    int h = s->cfg->plan.replan_horizon_steps;
    return left < h ? (int)(left > 1 ? left : 1) : h;
}

/* Weighs candidate cand against the running fleet cur (both planned on the window) and plays
 * it when accepted. */
static void decide(struct sim *s, const struct plan_result *cur, const struct plan_result *cand,
                   struct sim_replan_eval *ev)
{
    double obs = observed_step_s(s);
    ev->correction = isfinite(obs) && cur->step_s > 0 ? obs / cur->step_s : 1.0;
    ev->start_ratio = start_ratio(s, ev->cur, cand->counts);
    memcpy(ev->cand, cand->counts, sizeof ev->cand);
    double bias = start_bias(s, ev);
    struct next n;
    if (next_fleet(s, cand, &n) == 0) {
        double unbiased = cand->step_s / bias;
        struct plan_replan_input in = {.fit = ev->correction,
                                       .cur_step_s = cur->step_s * ev->correction,
                                       .cand_step_s = unbiased * ev->correction,
                                       .kept = n.kept,
                                       .min_gain_frac = s->cfg->plan.replan_min_gain_frac,
                                       .horizon_steps = horizon_steps(s)};
        memcpy(in.cur_counts, ev->cur, sizeof ev->cur);
        memcpy(in.cand_counts, cand->counts, sizeof cand->counts);
        resident(s, in.resident_tokens);
        struct plan_replan_decision d;
        plan_replan_decide(&s->shape, s->in->hw, &s->st, &in, &d);
        ev->why = d.why;
        ev->accepted = d.accept;
        ev->cur_step_s = in.cur_step_s;
        ev->cand_step_s = in.cand_step_s;
        ev->gain_s = d.gain_s;
        ev->cost_s = d.cost_s;
        if (d.accept)
            apply(s, &n, ev);
    }
    next_free(&n);
}

/* Plans the window after trigger `why` fired at the end of step st, and decides. */
static void evaluate(struct sim *s, const struct sim_step *st, const char *why)
{
    struct sim_replan *r = s->replan;
    struct sim_replan_eval ev = {
        .step = st->step, .trigger = why, .correction = 1.0, .measured_ratio = NAN};
    for (int i = 0; i < s->n_inst; i++)
        if (core_live(s, i))
            ev.cur[spec_tp_index(s->inst[i].tp)]++;
    struct plan_lengths w = {0};
    struct plan_result cur = {0}, cand = {0};
    int rc = window(s, &w) >= r->least ? solve(s, &w, NULL, ev.cur, &cand, &cur) : -1;
    plan_lengths_free(&w);
    if (rc < 0)
        ev.why = "too few trajectories of finished launches";
    else if (rc != 0)
        ev.why = "the window cannot be planned";
    else if (!cur.feasible || !cand.feasible)
        ev.why = plan_why_text(cur.feasible ? cand.why : cur.why);
    else
        decide(s, &cur, &cand, &ev);
    plan_result_free(&cur);
    plan_result_free(&cand);
    r->last_eval = s->version;
    vec_push(&s->replans, ev);
}

void sim_replan_steer(struct sim *s, const struct sim_step *st)
{
    const char *why = trigger(s, st);
    if (why)
        evaluate(s, st, why);
}
