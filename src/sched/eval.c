/*
 * The prequential evaluator (eval.h): the trace in memory, the placebo shuffle, and one arm's
 * pass — replay and score a step, learn it, tick. Moved out of `libra route eval` unchanged,
 * so its numbers are the command's.
 */
#include "sched/eval.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/config.h"
#include "util/alloc.h"
#include "util/intmap.h"
#include "util/rng.h"

/* ---- the trace ------------------------------------------------------------------------------ */

void sched_eval_traj_add(struct sched_eval_trace *ev, int64_t step, uint64_t prompt, int64_t epoch,
                         int64_t sample, bool censored)
{
    struct sched_eval_traj x = {.step = step,
                                .prompt = prompt,
                                .epoch = epoch,
                                .sample = sample,
                                .censored = censored,
                                .order = ev->trajs.n,
                                .turn = ev->turns.n};
    vec_push(&ev->trajs, x);
}

void sched_eval_turn_add(struct sched_eval_trace *ev, int64_t generated_tokens,
                         int64_t context_tokens, const struct sched_obs *obs, size_t n_obs,
                         double tool_s)
{
    struct sched_eval_traj *t = &ev->trajs.v[ev->trajs.n - 1];
    struct sched_eval_turn e = {generated_tokens, context_tokens, (uint32_t)ev->obs.n,
                                (uint32_t)n_obs, tool_s};
    for (size_t k = 0; k < n_obs; k++)
        vec_push(&ev->obs, obs[k]);
    vec_push(&ev->turns, e);
    t->total_tokens += generated_tokens;
    t->n_turns++;
}

static int cmp_traj(const void *a, const void *b)
{
    const struct sched_eval_traj *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

void sched_eval_trace_index(struct sched_eval_trace *ev)
{
    if (ev->trajs.n) /* an empty trace has no array, and qsort takes none even for 0 elements */
        qsort(ev->trajs.v, ev->trajs.n, sizeof *ev->trajs.v, cmp_traj);
    ev->step_start.n = 0;
    struct intmap first_step = {0}; /* prompt -> index of the first step it appeared in */
    for (size_t i = 0; i < ev->trajs.n; i++) {
        struct sched_eval_traj *t = &ev->trajs.v[i];
        if (t->n_turns)
            ev->turns.v[t->turn + t->n_turns - 1].n_obs = 0;
        if (i == 0 || t->step != ev->trajs.v[i - 1].step)
            vec_push(&ev->step_start, i);
        uint64_t first;
        if (!intmap_get(&first_step, t->prompt, &first)) {
            first = ev->step_start.n;
            intmap_put(&first_step, t->prompt, first);
        }
        t->seen = first < ev->step_start.n;
    }
    vec_push(&ev->step_start, ev->trajs.n);
    ev->n_prompts = first_step.n;
    intmap_free(&first_step);
}

size_t sched_eval_steps(const struct sched_eval_trace *ev)
{
    return ev->step_start.n ? ev->step_start.n - 1 : 0;
}

size_t sched_eval_prompts(const struct sched_eval_trace *ev)
{
    return ev->n_prompts;
}

void sched_eval_shuffle(struct sched_eval_trace *ev, uint64_t seed)
{
    ev->shuffled.n = 0;
    for (size_t i = 0; i < ev->turns.n; i++)
        vec_push(&ev->shuffled, ev->turns.v[i]);
    VEC(size_t) at = {0};
    for (size_t depth = 0;; depth++) {
        at.n = 0;
        for (size_t i = 0; i < ev->trajs.n; i++) {
            const struct sched_eval_traj *t = &ev->trajs.v[i];
            if (depth < t->n_turns && ev->turns.v[t->turn + depth].n_obs)
                vec_push(&at, t->turn + depth);
        }
        if (at.n == 0)
            break;
        struct rng r = rng_keyed(seed, 0x706c616365626fULL /* "placebo" */, depth, 0);
        for (size_t i = at.n - 1; i > 0; i--) { /* Fisher-Yates over the returns */
            size_t j = (size_t)(rng_u64(&r) % (i + 1));
            struct sched_eval_turn *a = &ev->shuffled.v[at.v[i]], *b = &ev->shuffled.v[at.v[j]];
            uint32_t obs = a->obs, n = a->n_obs;
            a->obs = b->obs;
            a->n_obs = b->n_obs;
            b->obs = obs;
            b->n_obs = n;
        }
    }
    vec_free(&at);
}

void sched_eval_trace_free(struct sched_eval_trace *ev)
{
    vec_free(&ev->trajs);
    vec_free(&ev->turns);
    vec_free(&ev->shuffled);
    vec_free(&ev->obs);
    vec_free(&ev->step_start);
}

/* ---- arms ----------------------------------------------------------------------------------- */

int sched_eval_arm_init(struct sched_eval_arm *a, const char *name,
                        const struct spec_sched_config *sc, const struct spec_bucket_layout *layout,
                        const struct sched_router_options *opt, const struct sched_costs *costs,
                        bool shuffled, struct libra_error *err)
{
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->policy = sc->policy;
    a->shuffled = shuffled;
    a->depth_only = opt && opt->depth_only;
    a->layout = *layout;
    a->metrics = sched_metrics_new(layout);
    sched_metrics_without_siblings(a->metrics); /* a trajectory is seen or never, by step */
    a->sc = *sc;
    if (opt)
        a->opt = *opt;
    if (costs)
        a->costs = *costs;
    return sched_router_from_config_opts(&a->router, sc, layout, costs, opt, err);
}

/* A fresh router for arm a, as sched_eval_arm_init made it (a fold starts from nothing). */
static int arm_renew(struct sched_eval_arm *a)
{
    sched_router_free(a->router);
    a->router = NULL;
    return sched_router_from_config_opts(&a->router, &a->sc, &a->layout,
                                         a->costs.decode_s ? &a->costs : NULL, &a->opt, NULL);
}

void sched_eval_arm_free(struct sched_eval_arm *a)
{
    sched_router_free(a->router);
    sched_metrics_free(a->metrics);
    a->router = NULL;
    a->metrics = NULL;
}

static const struct sched_eval_turn *arm_turns(const struct sched_eval_arm *a,
                                               const struct sched_eval_trace *ev)
{
    return a->shuffled ? ev->shuffled.v : ev->turns.v;
}

/* The turns of trajectory t within all (its trace's turns or their shuffle); NULL when it has
 * none, since a trace of no turns has no array to offset into. */
static const struct sched_eval_turn *traj_turns(const struct sched_eval_turn *all,
                                                const struct sched_eval_traj *t)
{
    return t->n_turns ? all + t->turn : NULL;
}

/* ---- regret --------------------------------------------------------------------------------- */

/* A path of buckets so far: the time it took and the GPU time it spent. */
struct path {
    double elapsed_s, gpu_s;
};

/* What one trajectory's replay has cost: the policy's path and always bucket b's beside it. */
struct paths {
    const struct sched_cost_model *m; /* NULL: nothing is costed */
    int n;                            /* buckets */
    int bucket;                       /* the policy's bucket of the current turn; -1 before */
    bool moved;                       /* the current turn came from another bucket */
    struct cost_rate rate[SPEC_BUCKETS_MAX]; /* of the current turn's context */
    struct path policy, fixed[SPEC_BUCKETS_MAX];
    struct sched_traj_regret regret; /* its decisions' regrets summed so far */
};

/* Rates for the turn about to run at context_tokens. */
static void paths_turn(struct paths *p, const struct spec_bucket_layout *l, int64_t context_tokens)
{
    if (p->m)
        sched_cost_rates(p->m, l, context_tokens, p->rate);
}

/* The least of cost[0, n). */
static double least(const double *cost, int n)
{
    double x = cost[0];
    for (int b = 1; b < n; b++)
        x = cost[b] < x ? cost[b] : x;
    return x;
}

/* Charges decision d (the policy now in `chosen`, from `from`; -1: the first placement) with R
 * remaining tokens into pt: its regret and every constant bucket's at the same point. */
static void paths_charge(struct paths *p, int from, int chosen, double remaining,
                         struct sched_metric_point *pt)
{
    double cost[SPEC_BUCKETS_MAX] = {0};
    for (int b = 0; b < p->n; b++)
        cost[b] =
            sched_cost(p->m, &p->rate[b], remaining, p->policy.elapsed_s, from >= 0 && b != from);
    pt->scored = true;
    pt->regret_gpu_s = cost[chosen] - least(cost, p->n);
    p->regret.decisions_gpu_s += pt->regret_gpu_s;
    for (int f = 0; f < p->n; f++) {
        for (int b = 0; b < p->n; b++)
            cost[b] = sched_cost(p->m, &p->rate[b], remaining, p->fixed[f].elapsed_s,
                                 from >= 0 && b != f);
        pt->const_regret_gpu_s[f] = cost[f] - least(cost, p->n);
        p->regret.const_decisions_gpu_s[f] += pt->const_regret_gpu_s[f];
    }
}

static void path_run(struct path *x, const struct cost_rate *r, double tokens, double tool_s,
                     bool moved)
{
    x->elapsed_s += tokens * r->token_s + tool_s + (moved ? r->move_s : 0.0);
    x->gpu_s += tokens * r->gpu_token_s + (moved ? r->move_gpu_s : 0.0);
}

/* The current turn ran: tokens generated, then tool_s on its tools. */
static void paths_advance(struct paths *p, double tokens, double tool_s)
{
    if (!p->m || p->bucket < 0)
        return;
    path_run(&p->policy, &p->rate[p->bucket], tokens, tool_s, p->moved);
    for (int b = 0; b < p->n; b++)
        path_run(&p->fixed[b], &p->rate[b], tokens, tool_s, false);
    p->moved = false;
}

/* The policy's bucket for the next turn. */
static void paths_follow(struct paths *p, int bucket)
{
    p->moved = p->bucket >= 0 && bucket != p->bucket;
    p->bucket = bucket;
}

/* What a path cost: its GPU time, and lateness past the deadline (sched_cost of nothing left). */
static double path_cost(const struct sched_cost_model *m, const struct path *x)
{
    static const struct cost_rate done = {0};
    return x->gpu_s + sched_cost(m, &done, 0.0, x->elapsed_s, false);
}

/* The trajectory's regrets: its decisions' sums, and its path over the best constant bucket's
 * (each constant's too). */
static void paths_finish(struct paths *p, struct sched_metrics *metrics, enum sched_split split)
{
    double fixed[SPEC_BUCKETS_MAX] = {0};
    for (int b = 0; b < p->n; b++)
        fixed[b] = path_cost(p->m, &p->fixed[b]);
    double best = least(fixed, p->n);
    for (int b = 0; b < p->n; b++)
        p->regret.const_path_gpu_s[b] = fixed[b] - best;
    p->regret.path_gpu_s = path_cost(p->m, &p->policy) - best;
    sched_metrics_add_traj_regret(metrics, split, &p->regret);
}

/* ---- replay --------------------------------------------------------------------------------- */

static void score(struct sched_eval_arm *a, const struct sched_eval_traj *t, size_t turn,
                  const struct sched_decision *d, int64_t remaining, struct paths *p)
{
    bool first = turn == 0;
    int chosen = d->to_bucket >= 0 ? d->to_bucket : d->placed_bucket;
    if (a->on_decision)
        a->on_decision(a->decision_ctx, a, t->order, turn, d);
    struct sched_metric_point pt = {
        .split = t->seen ? SCHED_SPLIT_SEEN : SCHED_SPLIT_NEVER,
        .first = first,
        .from_bucket = d->from_bucket,
        .chosen_bucket = d->to_bucket,
        .true_remaining_tokens = remaining,
        .predicted_tokens = d->est.found && d->est.exact ? d->est.mean_tokens : NAN,
    };
    /* from where the last turn ran; load_balance chooses no bucket (-1) and is charged the one
     * the idle registry placed it in, an artefact its JSON leaves null (bucketless); the
     * constant buckets' regrets charged beside it are real */
    if (p->m)
        paths_charge(p, p->bucket, chosen, (double)remaining, &pt);
    sched_metrics_add(a->metrics, &pt);
}

/* Routes every turn of trajectory i as the gateway would see it, scoring each decision when
 * scoring; its router id is i. The trajectory stays live: the caller finishes it. */
static int replay(struct sched_eval_arm *a, const struct sched_eval_trace *ev, size_t i,
                  const struct sched_registry *reg, bool scoring)
{
    const struct sched_eval_traj *t = &ev->trajs.v[i];
    const struct sched_eval_turn *turns = traj_turns(arm_turns(a, ev), t);
    enum sched_split split = t->seen ? SCHED_SPLIT_SEEN : SCHED_SPLIT_NEVER;
    const struct sched_cost_model *m = a->costs.decision.rate ? &a->costs.decision : NULL;
    /* costed whether or not scored: the router's clock (now_s) runs on the path's time */
    struct paths p = {.m = m, .n = a->layout.n, .bucket = -1};
    double start_s = (double)i; /* orders rebuilds; elapsed time is added to it */
    struct sched_start s = {.traj = i,
                            .prompt = t->prompt,
                            .epoch = t->epoch,
                            .prompt_tokens = t->n_turns ? turns[0].context_tokens : 0,
                            .true_remaining_tokens = t->total_tokens,
                            .now_s = start_s};
    struct sched_decision d;
    int rc = sched_router_start(a->router, reg, &s, &d);
    if (scoring)
        sched_metrics_add_traj(a->metrics, split);
    paths_turn(&p, &a->layout, s.prompt_tokens);
    if (rc == 0 && scoring)
        score(a, t, 0, &d, t->total_tokens, &p);
    if (rc == 0)
        paths_follow(&p, d.to_bucket >= 0 ? d.to_bucket : d.placed_bucket);
    int64_t gen = 0;
    for (size_t k = 0; rc == 0 && k < t->n_turns; k++) {
        gen += turns[k].generated_tokens;
        paths_advance(&p, (double)turns[k].generated_tokens, turns[k].tool_s);
        rc = sched_router_turn_done(a->router, i, turns[k].generated_tokens);
        if (k + 1 < t->n_turns)
            paths_turn(&p, &a->layout, turns[k + 1].context_tokens);
        if (rc || !turns[k].n_obs)
            continue;
        struct sched_return r = {.traj = i,
                                 .obs = ev->obs.v + turns[k].obs,
                                 .n_obs = turns[k].n_obs,
                                 .context_tokens = turns[k + 1].context_tokens,
                                 .true_remaining_tokens = t->total_tokens - gen,
                                 .sibling_mean_tokens = NAN,
                                 .now_s = start_s + p.policy.elapsed_s};
        rc = sched_router_tool_return(a->router, reg, &r, &d);
        if (rc == 0 && scoring) {
            score(a, t, k + 1, &d, t->total_tokens - gen, &p);
            a->reasons[d.reason]++;
        }
        if (rc == 0)
            paths_follow(&p, d.to_bucket >= 0 ? d.to_bucket : d.placed_bucket);
    }
    if (rc == 0 && p.m && scoring)
        paths_finish(&p, a->metrics, split);
    return rc;
}

/* Ends trajectory i in a's router. la_mlfq's finished trajectories pass their bucket on to
 * their prompt's next ones (as if every scout finished within the 30 s wait: an upper bound for
 * la_mlfq; the wait itself is the simulator's). */
static int finish(struct sched_eval_arm *a, const struct sched_eval_trace *ev, size_t i)
{
    return sched_router_finish(
        a->router, i, ev->trajs.v[i].censored ? SCHED_FINISH_TRUNCATED : SCHED_FINISH_COMPLETED,
        a->policy == SCHED_LA_MLFQ);
}

/* Teaches m trajectory i of ev, its returns those of turns (ev->turns or ev->shuffled). */
static int learn_one(struct sched_model *m, const struct sched_eval_trace *ev,
                     const struct sched_eval_turn *all_turns, size_t i, double start,
                     bool depth_only)
{
    const struct sched_eval_traj *t = &ev->trajs.v[i];
    const struct sched_eval_turn *turns = traj_turns(all_turns, t);
    VEC(uint32_t) states = {0};
    VEC(int64_t) gen_before = {0};
    struct sched_obs_config oc = {.depth_only = depth_only};
    int64_t gen = 0;
    for (size_t k = 0; k < t->n_turns; k++) {
        gen += turns[k].generated_tokens;
        if (!turns[k].n_obs)
            continue;
        char key[SCHED_STATE_KEY_MAX];
        sched_state_key(&oc, ev->obs.v + turns[k].obs, turns[k].n_obs, key, sizeof key);
        vec_push(&states, sched_model_state(m, key));
        vec_push(&gen_before, gen);
    }
    struct sched_traj_summary s = {.prompt = t->prompt,
                                   .start = start,
                                   .censored = t->censored,
                                   .total_tokens = t->total_tokens,
                                   .n = states.n,
                                   .states = states.v,
                                   .gen_before = gen_before.v};
    int rc = sched_model_insert(m, &s);
    vec_free(&states);
    vec_free(&gen_before);
    return rc;
}

int sched_eval_learn(struct sched_model *m, const struct sched_eval_trace *ev,
                     const struct sched_eval_turn *turns, size_t from, size_t to, double base,
                     bool depth_only)
{
    int rc = 0;
    for (size_t i = from; i < to && !rc; i++)
        rc = learn_one(m, ev, turns ? turns : ev->turns.v, i, base + (double)i, depth_only);
    return rc;
}

/* One idle instance per bucket and TP size into inst (SPEC_BUCKETS_MAX * SPEC_BUCKET_TPS_MAX). */
static struct sched_registry idle_registry(const struct spec_bucket_layout *l,
                                           struct sched_instance *inst)
{
    size_t n = 0;
    for (int b = 0; b < l->n; b++)
        for (int k = 0; k < l->bucket[b].n_tp; k++, n++)
            inst[n] = (struct sched_instance){.id = (int64_t)n,
                                              .tp = l->bucket[b].tp[k],
                                              .bucket = b,
                                              .cap = INT_MAX,
                                              .ready = true};
    return (struct sched_registry){inst, n};
}

/* Replays trajectories [from, to) of a step, scoring them when scoring, then finishes them: a
 * step's trajectories run side by side, so none is finished before all have been routed (but
 * la_mlfq's, which pass their bucket on at once). */
static int replay_step(struct sched_eval_arm *a, const struct sched_eval_trace *ev, size_t from,
                       size_t to, const struct sched_registry *reg, bool scoring)
{
    int rc = 0;
    for (size_t i = from; i < to && !rc; i++) {
        rc = replay(a, ev, i, reg, scoring);
        if (rc == 0 && a->policy == SCHED_LA_MLFQ)
            rc = finish(a, ev, i);
    }
    for (size_t i = from; i < to && !rc && a->policy != SCHED_LA_MLFQ; i++)
        rc = finish(a, ev, i);
    return rc;
}

int sched_eval_arm_run(struct sched_eval_arm *a, const struct sched_eval_trace *ev,
                       int64_t train_steps, void (*on_step)(void *ctx), void *ctx)
{
    struct sched_instance inst[SPEC_BUCKETS_MAX * SPEC_BUCKET_TPS_MAX];
    struct sched_registry reg = idle_registry(&a->layout, inst);
    struct sched_model *m = sched_router_model(a->router);
    size_t steps = sched_eval_steps(ev);
    int rc = 0;
    for (size_t s = 0; s < steps && !rc; s++) {
        size_t from = ev->step_start.v[s], to = ev->step_start.v[s + 1];
        rc = replay_step(a, ev, from, to, &reg, (int64_t)s >= train_steps);
        if (m && !rc)
            rc = sched_eval_learn(m, ev, arm_turns(a, ev), from, to, 0, a->depth_only);
        sched_router_tick(a->router);
        if (on_step)
            on_step(ctx);
    }
    return rc;
}

/* A trajectory's place in a fold's replay: attempt order, by step, then sample, then index. */
struct attempt {
    int64_t step, sample;
    size_t i;
    uint32_t fold;
};

static int cmp_attempt(const void *x, const void *y)
{
    const struct attempt *a = x, *b = y;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->sample != b->sample)
        return a->sample < b->sample ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* Routes, finishes and then learns trajectory i (a fold's sequential replay). */
static int replay_learn(struct sched_eval_arm *a, const struct sched_eval_trace *ev, size_t i,
                        const struct sched_registry *reg, bool scoring)
{
    int rc = replay(a, ev, i, reg, scoring);
    if (rc == 0)
        rc = finish(a, ev, i);
    struct sched_model *m = sched_router_model(a->router);
    if (rc == 0 && m)
        rc = sched_eval_learn(m, ev, arm_turns(a, ev), i, i + 1, 0, a->depth_only);
    return rc;
}

int sched_eval_arm_run_folds(struct sched_eval_arm *a, const struct sched_eval_trace *ev, int folds,
                             void (*on_step)(void *ctx), void *ctx)
{
    struct sched_instance inst[SPEC_BUCKETS_MAX * SPEC_BUCKET_TPS_MAX];
    struct sched_registry reg = idle_registry(&a->layout, inst);
    size_t n = ev->trajs.n;
    struct attempt *at = xmallocarray(n ? n : 1, sizeof *at);
    struct intmap rank = {0}; /* prompt -> rank of its first appearance */
    for (size_t i = 0; i < n; i++) {
        const struct sched_eval_traj *t = &ev->trajs.v[i];
        uint64_t r;
        if (!intmap_get(&rank, t->prompt, &r)) {
            r = rank.n;
            intmap_put(&rank, t->prompt, r);
        }
        at[i] = (struct attempt){t->step, t->sample, i, (uint32_t)(r % (uint64_t)folds)};
    }
    intmap_free(&rank);
    qsort(at, n, sizeof *at, cmp_attempt);
    int rc = 0;
    for (int f = 0; f < folds && !rc; f++) {
        rc = arm_renew(a);
        for (int held = 0; held < 2; held++) /* the other folds train, then this one */
            for (size_t k = 0; k < n && !rc; k++)
                if ((at[k].fold == (uint32_t)f) == held)
                    rc = replay_learn(a, ev, at[k].i, &reg, held);
        if (on_step)
            on_step(ctx);
    }
    free(at);
    return rc;
}
