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
                         bool censored)
{
    struct sched_eval_traj x = {.step = step,
                                .prompt = prompt,
                                .epoch = epoch,
                                .censored = censored,
                                .order = ev->trajs.n,
                                .turn = ev->turns.n};
    vec_push(&ev->trajs, x);
}

void sched_eval_turn_add(struct sched_eval_trace *ev, int64_t generated_tokens,
                         int64_t context_tokens, const struct sched_obs *obs, size_t n_obs)
{
    struct sched_eval_traj *t = &ev->trajs.v[ev->trajs.n - 1];
    struct sched_eval_turn e = {generated_tokens, context_tokens, (uint32_t)ev->obs.n,
                                (uint32_t)n_obs};
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
    intmap_free(&first_step);
}

size_t sched_eval_steps(const struct sched_eval_trace *ev)
{
    return ev->step_start.n ? ev->step_start.n - 1 : 0;
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
                        const struct sched_router_options *opt,
                        const struct sched_move_costs *costs, bool shuffled,
                        struct libra_error *err)
{
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->policy = sc->policy;
    a->shuffled = shuffled;
    a->depth_only = opt && opt->depth_only;
    a->layout = *layout;
    a->metrics = sched_metrics_new(layout);
    return sched_router_from_config_opts(&a->router, sc, layout, costs, opt, err);
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

static void score(struct sched_eval_arm *a, const struct sched_eval_traj *t, size_t turn,
                  const struct sched_decision *d, int64_t remaining)
{
    bool first = turn == 0;
    if (a->on_decision)
        a->on_decision(a->decision_ctx, a, t->order, turn, d);
    struct sched_metric_point p = {
        .split = t->seen ? SCHED_SPLIT_SEEN : SCHED_SPLIT_NEVER,
        .first = first,
        .from_bucket = d->from_bucket,
        .chosen_bucket = d->to_bucket,
        .true_remaining_tokens = remaining,
        .predicted_tokens = d->est.found && d->est.exact ? d->est.mean_tokens : NAN,
    };
    sched_metrics_add(a->metrics, &p);
}

/* Routes every turn of trajectory i as the gateway would see it, scoring each decision. */
static int replay(struct sched_eval_arm *a, const struct sched_eval_trace *ev, size_t i,
                  const struct sched_registry *reg)
{
    const struct sched_eval_traj *t = &ev->trajs.v[i];
    const struct sched_eval_turn *turns = arm_turns(a, ev) + t->turn;
    struct sched_start s = {.traj = i,
                            .prompt = t->prompt,
                            .epoch = t->epoch,
                            .prompt_tokens = t->n_turns ? turns[0].context_tokens : 0,
                            .true_remaining_tokens = t->total_tokens,
                            .now_s = (double)i};
    struct sched_decision d;
    int rc = sched_router_start(a->router, reg, &s, &d);
    sched_metrics_add_traj(a->metrics, t->seen ? SCHED_SPLIT_SEEN : SCHED_SPLIT_NEVER);
    if (rc == 0)
        score(a, t, 0, &d, t->total_tokens);
    int64_t gen = 0;
    for (size_t k = 0; rc == 0 && k < t->n_turns; k++) {
        gen += turns[k].generated_tokens;
        rc = sched_router_turn_done(a->router, i, turns[k].generated_tokens);
        if (rc || !turns[k].n_obs)
            continue;
        struct sched_return r = {.traj = i,
                                 .obs = ev->obs.v + turns[k].obs,
                                 .n_obs = turns[k].n_obs,
                                 .context_tokens = turns[k + 1].context_tokens,
                                 .true_remaining_tokens = t->total_tokens - gen,
                                 .sibling_mean_tokens = NAN};
        rc = sched_router_tool_return(a->router, reg, &r, &d);
        if (rc == 0) {
            score(a, t, k + 1, &d, t->total_tokens - gen);
            a->reasons[d.reason]++;
        }
    }
    /* la_mlfq's siblings follow their scout's last bucket: as if every scout finished within
     * the 30 s wait (an upper bound for la_mlfq; the wait itself is the simulator's). */
    if (rc == 0)
        rc = sched_router_finish(a->router, i,
                                 t->censored ? SCHED_FINISH_TRUNCATED : SCHED_FINISH_COMPLETED,
                                 a->policy == SCHED_LA_MLFQ);
    return rc;
}

/* Teaches m trajectory i of ev, its returns those of turns (ev->turns or ev->shuffled). */
static int learn_one(struct sched_model *m, const struct sched_eval_trace *ev,
                     const struct sched_eval_turn *all_turns, size_t i, double start,
                     bool depth_only)
{
    const struct sched_eval_traj *t = &ev->trajs.v[i];
    const struct sched_eval_turn *turns = all_turns + t->turn;
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

int sched_eval_arm_run(struct sched_eval_arm *a, const struct sched_eval_trace *ev,
                       int64_t train_steps, void (*on_step)(void *ctx), void *ctx)
{
    const struct spec_bucket_layout *l = &a->layout;
    struct sched_instance inst[SPEC_BUCKETS_MAX * SPEC_BUCKET_TPS_MAX];
    size_t n_inst = 0;
    for (int b = 0; b < l->n; b++) /* one idle instance per bucket and TP size */
        for (int k = 0; k < l->bucket[b].n_tp; k++, n_inst++)
            inst[n_inst] = (struct sched_instance){.id = (int64_t)n_inst,
                                                   .tp = l->bucket[b].tp[k],
                                                   .bucket = b,
                                                   .cap = INT_MAX,
                                                   .ready = true};
    struct sched_registry reg = {inst, n_inst};
    struct sched_model *m = sched_router_model(a->router);
    size_t steps = sched_eval_steps(ev);
    int rc = 0;
    for (size_t s = 0; s < steps && !rc; s++) {
        size_t from = ev->step_start.v[s], to = ev->step_start.v[s + 1];
        for (size_t i = from; (int64_t)s >= train_steps && i < to && !rc; i++)
            rc = replay(a, ev, i, &reg);
        if (m && !rc)
            rc = sched_eval_learn(m, ev, arm_turns(a, ev), from, to, 0, a->depth_only);
        sched_router_tick(a->router);
        if (on_step)
            on_step(ctx);
    }
    return rc;
}
