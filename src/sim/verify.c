/*
 * Simulation in the loop: libra's layout chosen among the planner's candidates by a short
 * simulation of the job, not by the analytic objective alone.
 *
 * The planner's step model ranks layouts well on training and badly on rollout (it misses the
 * staleness window's batch span and the weight-update stall, docs/planner.md §6), so its
 * optimum can lose to a plain sweep. The exact search stays as it is and proposes; the
 * simulator disposes. Candidates are the planner's own optima under narrower constraints —
 * its unconstrained optimum, and at its optimum's split and the splits nearest it, its best
 * heterogeneous fleet and its best fleet of each single TP size (the async baseline's grid
 * there, proposed by the planner with its own training layouts) — never a baseline's winner.
 * The plan.verify_candidates best by analytic objective run for plan.verify_steps steps (the
 * measured ones rounded up to whole weight-update intervals, and at most rl.steps) on a seed
 * other than the length sample's, so that the choice is not fitted to the trajectories the planner
 * saw; the highest trained tokens/s wins (ties: the better analytic rank). The analytic optimality
 * gap the planner proves still holds for the analytic objective only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/rng.h"
#include "util/workers.h"

#define VERIFY_SEED_KEY 0x766572696679ull /* "verify": derives the verification's seed */
#define NEAREST_SPLITS 6                  /* splits beside the optimum's that propose plans */
/* every proposal: at the optimum and each near split, a heterogeneous plan and one per TP, and
 * a colocated plan per TP */
#define PROPOSALS_MAX ((2 + NEAREST_SPLITS) * (1 + PLAN_NTP) + PLAN_NTP)

struct candidate {
    struct sim_layout layout;
    char origin[32];
    int split, tp;   /* what it was pinned to (struct sim_verified) */
    bool colocated;  /* a colocated plan (struct sim_verified) */
    size_t proposed; /* order of proposal: breaks ties of the analytic objective */
    bool twin;       /* with the pool on, a candidate without it: ranked after a pooled tie */
    double tokens_per_s;
};

struct verification {
    const struct sim_input *in; /* with the verification's seed */
    int steps, warmup;
    struct candidate *c;
    size_t n;
};

static bool same_training(const struct plan_train_layout *a, const struct plan_train_layout *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->cp == b->cp && a->dp == b->dp &&
           a->budget_tokens == b->budget_tokens && a->recompute == b->recompute &&
           a->fsdp == b->fsdp && a->shard_dp == b->shard_dp;
}

/* Adds the planner's plan at split (0: free) with every instance of TP tp (0: free) unless it
 * fails or repeats one already there. */
static void propose(const struct sim_input *in, int split, int tp, struct candidate *c, size_t *n)
{
    struct candidate x = {.split = split, .tp = tp, .tokens_per_s = NAN};
    struct libra_config cfg;
    sim_verified_config(in->cfg, &(struct sim_verified){.split = split, .tp = tp}, &cfg);
    if (sim_layout_plan(in, &cfg, &x.layout, NULL) != 0) {
        sim_layout_free(&x.layout);
        return;
    }
    char fleet[64], other[64];
    sim_fleet_text(&x.layout, fleet, sizeof fleet);
    for (size_t i = 0; i < *n; i++) {
        sim_fleet_text(&c[i].layout, other, sizeof other);
        if (c[i].layout.n_train == x.layout.n_train && strcmp(fleet, other) == 0 &&
            same_training(&c[i].layout.train, &x.layout.train)) {
            sim_layout_free(&x.layout);
            return;
        }
    }
    char where[24] = "";
    if (split)
        snprintf(where, sizeof where, " at %d", split);
    if (tp)
        snprintf(x.origin, sizeof x.origin, "all TP%d%s", tp, where);
    else
        snprintf(x.origin, sizeof x.origin, "%s%s", split ? "best" : "optimum", where);
    x.proposed = *n;
    c[(*n)++] = x;
}

/* The splits of in's cluster the planner may use, nearest to n_train first (at most max). */
static int nearest_splits(const struct libra_config *cfg, int n_train, int *out, int max)
{
    const struct spec_plan_config *pc = &cfg->plan;
    int gpus = cfg->cluster.gpus, k = 0;
    for (int d = pc->granularity_gpus; k < max && d < gpus; d += pc->granularity_gpus)
        for (int sign = -1; sign <= 1 && k < max; sign += 2) {
            int n = n_train + sign * d;
            if (n > 0 && n < gpus && n % pc->granularity_gpus == 0 && n >= pc->min_train_gpus &&
                gpus - n >= pc->min_rollout_gpus)
                out[k++] = n;
        }
    return k;
}

static int by_prediction(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    if (x->layout.pred_step_s != y->layout.pred_step_s)
        return x->layout.pred_step_s < y->layout.pred_step_s ? -1 : 1;
    if (x->proposed != y->proposed)
        return x->proposed < y->proposed ? -1 : 1;
    return (int)x->twin - (int)y->twin;
}

/* Proposes, at training split n (0: the planner's choice), the best heterogeneous plan and,
 * when the fleet is free, the best of one TP size for each size that fits a node. */
static void propose_at(const struct sim_input *in, int n, struct candidate *c, size_t *k)
{
    propose(in, n, 0, c, k);
    if (in->cfg->plan.tp_pattern[0])
        return; /* the fleet is pinned */
    int gpn = in->cfg->cluster.gpus_per_node;
    for (int tp = 1; tp <= 8 && tp <= gpn; tp *= 2)
        if (gpn % tp == 0)
            propose(in, n, tp, c, k);
}

/* Adds the planner's colocated plan with every instance of TP tp: every GPU trains, then rolls
 * out, the simulator's colocated mode on the planner's training layout and prediction. */
static void propose_colocated(const struct sim_input *in, int tp, struct candidate *c, size_t *n)
{
    struct candidate x = {.tp = tp, .colocated = true, .tokens_per_s = NAN};
    struct libra_config cfg;
    sim_verified_config(in->cfg, &(struct sim_verified){.tp = tp, .colocated = true}, &cfg);
    struct plan_result r;
    if (sim_plan(in, &cfg, NULL, NULL, &r, NULL) == 0 && r.feasible &&
        sim_layout_make(in, SIM_COLOCATED, 0, tp, &x.layout, NULL) == 0) {
        x.layout.train = r.train;
        x.layout.planned = true;
        x.layout.pred_step_s = r.step_s;
        x.layout.pred_train_s = r.train_s;
        x.layout.pred_rollout_s = r.rollout_s;
        x.layout.pred_switch_s = r.switch_s;
        snprintf(x.origin, sizeof x.origin, "colocated TP%d", tp);
        x.proposed = *n;
        c[(*n)++] = x;
    } else {
        sim_layout_free(&x.layout);
    }
    plan_result_free(&r);
}

/*
 * Adds to the first keep of c[0, n) (sorted by prediction) every colocated plan ranked below
 * them (there is one per TP size), and returns how many are kept: the analytic step rates
 * colocated plans worse than the simulator does where one batch's rollout fills the whole
 * cluster (docs/planner.md §8), so ranking alone can leave them all unsimulated, and taking
 * the places of ranked plans would drop the split that wins elsewhere. The kept stay sorted.
 */
static size_t keep_colocated(struct candidate *c, size_t n, size_t keep)
{
    struct candidate *sorted = xmallocarray(n ? n : 1, sizeof *c);
    memcpy(sorted, c, n * sizeof *c);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (i < keep || sorted[i].colocated)
            c[kept++] = sorted[i];
    size_t dropped = kept;
    for (size_t i = keep; i < n; i++)
        if (!sorted[i].colocated)
            c[dropped++] = sorted[i];
    free(sorted);
    return kept;
}

/* The planner's candidates, best analytic objective first (ties: the order proposed). */
static size_t proposals(const struct sim_input *in, struct candidate *c, size_t max)
{
    size_t n = 0;
    propose_at(in, 0, c, &n);
    if (n == 0)
        return 0;
    int gpn = in->cfg->cluster.gpus_per_node;
    for (int tp = 1; tp <= 8 && tp <= gpn && !in->cfg->plan.tp_pattern[0]; tp *= 2)
        if (gpn % tp == 0)
            propose_colocated(in, tp, c, &n);
    int splits[NEAREST_SPLITS];
    int k = nearest_splits(in->cfg, c[0].layout.n_train, splits, NEAREST_SPLITS);
    propose_at(in, c[0].layout.n_train, c, &n);
    for (int i = 0; i < k; i++)
        propose_at(in, splits[i], c, &n);
    qsort(c, n, sizeof *c, by_prediction);
    size_t keep = n < max ? n : max;
    keep = keep_colocated(c, n, keep);
    for (size_t i = keep; i < n; i++)
        sim_layout_free(&c[i].layout);
    return keep;
}

/*
 * The candidates, best analytic objective first. With the elastic pool on, the candidates with
 * hybrids and, beside them, those the verification would simulate without the pool ("..., no
 * pool"): lending takes a training layout that can lend, slower than the planner's on some
 * jobs before anything is lent, and a pooled proposal can coincide with another one's, so the
 * static candidates are proposed on their own and the simulator chooses among both
 * (docs/reproduction.md "The elastic pool"). c holds 2 · PROPOSALS_MAX.
 */
static size_t candidates(const struct sim_input *in, struct candidate *c, size_t max)
{
    if (!in->cfg->ehp.enabled)
        return proposals(in, c, max);
    struct libra_config cfg = *in->cfg;
    cfg.ehp.enabled = false;
    struct sim_input without = *in;
    without.cfg = &cfg;
    size_t n = proposals(&without, c, max);
    for (size_t i = 0; i < n; i++) {
        c[i].twin = true;
        char origin[sizeof c[i].origin];
        snprintf(origin, sizeof origin, "%.22s, no pool", c[i].origin);
        memcpy(c[i].origin, origin, sizeof origin);
    }
    size_t pooled = proposals(in, c + n, max);
    for (size_t i = n; i < n + pooled; i++) {
        if (c[i].layout.n_hybrid)
            c[n++] = c[i]; /* one without hybrids repeats a static candidate */
        else
            sim_layout_free(&c[i].layout);
    }
    qsort(c, n, sizeof *c, by_prediction);
    return n;
}

static void simulate(void *arg, size_t i)
{
    struct verification *v = arg;
    struct candidate *c = &v->c[i];
    struct sim_run_opts o = {.steps = v->steps, .warmup = v->warmup, .perfetto_step = -1};
    struct sim_result r;
    if (sim_run(v->in, &c->layout, &o, &r, NULL) == 0)
        c->tokens_per_s = r.tokens_per_s;
    sim_result_free(&r);
}

void sim_verified_config(const struct libra_config *cfg, const struct sim_verified *v,
                         struct libra_config *out)
{
    *out = *cfg;
    if (v->colocated)
        out->plan.mode = SPEC_PLAN_COLOCATED;
    if (v->split > 0) {
        out->plan.min_train_gpus = v->split;
        out->plan.min_rollout_gpus = cfg->cluster.gpus - v->split;
    }
    if (v->tp > 0) {
        int gpn = cfg->cluster.gpus_per_node;
        size_t used = 0;
        for (int i = 0; i < gpn / v->tp; i++) /* every node: gpn/tp instances of TP tp */
            used +=
                (size_t)snprintf(out->plan.tp_pattern + used, sizeof out->plan.tp_pattern - used,
                                 "%s%d", i ? "," : "", v->tp);
    }
}

int sim_verify(const struct sim_input *in, struct sim_mode_result *mr, struct libra_error *err)
{
    const struct libra_config *cfg = in->cfg;
    size_t max = (size_t)cfg->plan.verify_candidates;
    struct candidate *c = xcalloc(2 * (size_t)PROPOSALS_MAX, sizeof *c);
    size_t n = candidates(in, c, max);
    if (n == 0) {
        free(c);
        return sim_layout_make(in, SIM_LIBRA, 0, 0, &mr->layout, err); /* the planner's error */
    }
    struct libra_config vcfg = *cfg;
    vcfg.plan.replan_interval_steps = 0; /* the candidates are judged as they start: static */
    vcfg.plan.replan_pressure = false;
    vcfg.sim.seed =
        (int64_t)(rng_hash((uint64_t)cfg->sim.seed, (const uint64_t[]){VERIFY_SEED_KEY}, 1) >>
                  11); /* below 2^53, as sim.seed */
    struct sim_input vin = *in;
    vin.cfg = &vcfg;
    vin.perfetto = false;
    /* the measured steps, after the warm-up, are whole weight-update intervals (an async
     * step's length depends on where it falls in its interval), and no more than the
     * experiment runs */
    int warmup = cfg->sim.warmup_steps < cfg->plan.verify_steps ? cfg->sim.warmup_steps
                                                                : cfg->plan.verify_steps - 1;
    int s = cfg->rl.sync_interval, measured = cfg->plan.verify_steps - warmup;
    int steps = warmup + (measured + s - 1) / s * s;
    if (steps > cfg->rl.steps) {
        steps = cfg->rl.steps;
        warmup = cfg->sim.warmup_steps < steps ? cfg->sim.warmup_steps : steps - 1;
    }
    struct verification v = {&vin, steps, warmup, c, n};
    if (in->progress)
        atomic_fetch_add(&in->progress->steps_planned, (long long)n * v.steps);
    workers_for(in->workers, n, simulate, &v);
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (!isnan(c[i].tokens_per_s) &&
            (isnan(c[best].tokens_per_s) || c[i].tokens_per_s > c[best].tokens_per_s))
            best = i;
    mr->verified = xcalloc(n, sizeof *mr->verified);
    mr->n_verified = (int)n;
    mr->verify_steps = v.steps;
    mr->verify_seed = vcfg.sim.seed;
    for (size_t i = 0; i < n; i++) {
        struct sim_verified *out = &mr->verified[i];
        snprintf(out->origin, sizeof out->origin, "%s", c[i].origin);
        out->split = c[i].split;
        out->tp = c[i].tp;
        out->colocated = c[i].colocated;
        out->n_train = c[i].layout.n_train;
        sim_fleet_text(&c[i].layout, out->instances, sizeof out->instances);
        out->pred_step_s = c[i].layout.pred_step_s;
        out->tokens_per_s = c[i].tokens_per_s;
        out->chosen = i == best;
        if (i != best)
            sim_layout_free(&c[i].layout);
    }
    mr->layout = c[best].layout;
    snprintf(mr->layout.origin, sizeof mr->layout.origin, "verified");
    free(c);
    return 0;
}
