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
 * there, proposed by the planner with its own training layouts), and its colocated plans —
 * never a baseline's winner. The plan.verify_candidates best by analytic objective, every
 * colocated plan and the best of each kind of fleet run for plan.verify_steps steps (the measured
 * ones rounded up to whole weight-update intervals, and at most rl.steps) on a seed other than
 * the length sample's, so that the choice is not fitted to the trajectories the planner saw;
 * then a pattern search walks the split from the fastest (climb), the candidates close to the
 * fastest run again on a second seed (race), and the highest trained tokens/s wins (ties: the
 * better analytic rank). The analytic optimality gap the planner
 * proves still holds for the analytic objective only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/workers.h"

#define VERIFY_SEED_KEY 0x766572696679ull /* "verify": derives the verification's seed */
#define RACE_SEED_KEY 0x72616365ull       /* "race": derives the second seed's */
#define RACE_MARGIN 0.05 /* candidates this close to the fastest run again on a second seed */
#define RACE_MAX 4       /* at most this many of them, the fastest first */
#define NEAREST_SPLITS 6 /* splits beside the optimum's that propose plans */
#define CLIMB_WAVES 12   /* waves of the search around the fastest (climb) */
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
    bool simulated;  /* tokens_per_s is its figure (NAN: the run failed) */
    double tokens_per_s;
    int error_rc; /* the run's failure (struct sim_verified) */
    char error[512];
    bool near;  /* proposed at the optimum's split or one nearest it (first_of_kind) */
    bool raced; /* run again on the second seed */
    double second_tokens_per_s; /* its figure there (NAN: the run failed) */
};

struct verification {
    const struct sim_input *plan_in; /* the caller's: the planner plans on its length sample */
    const struct sim_input *in;      /* with the verification's seed */
    const struct sim_input *second;  /* with the second seed, for the race */
    bool racing;                     /* simulate() runs the wave on the second seed */
    int steps, warmup;
    struct candidate *c;
    size_t n;
    size_t *wave; /* indices into c simulated together */
    size_t n_wave;
};

static bool same_training(const struct plan_train_layout *a, const struct plan_train_layout *b)
{
    return a->tp == b->tp && a->pp == b->pp && a->cp == b->cp && a->dp == b->dp &&
           a->budget_tokens == b->budget_tokens && a->recompute == b->recompute &&
           a->fsdp == b->fsdp && a->shard_dp == b->shard_dp && a->ep == b->ep;
}

/* Marks c as proposed without the pool (its origin says so). */
static void mark_twin(struct candidate *c)
{
    c->twin = true;
    char origin[sizeof c->origin];
    snprintf(origin, sizeof origin, "%.22s, no pool", c->origin);
    memcpy(c->origin, origin, sizeof origin);
}

/* The index in c[0, n) of a candidate of the same fleet and training layout as x, or -1. */
static long find_same(const struct candidate *x, const struct candidate *c, size_t n)
{
    char fleet[64], other[64];
    sim_fleet_text(&x->layout, fleet, sizeof fleet);
    for (size_t i = 0; i < n; i++) {
        sim_fleet_text(&c[i].layout, other, sizeof other);
        if (c[i].twin == x->twin && c[i].colocated == x->colocated &&
            c[i].layout.n_train == x->layout.n_train && strcmp(fleet, other) == 0 &&
            same_training(&c[i].layout.train, &x->layout.train))
            return (long)i;
    }
    return -1;
}

/*
 * A plan to propose: the planner's at training split `split` (0: its own choice) with every
 * instance of TP tp (0: a free fleet), or its colocated plan with every instance of TP tp (every
 * GPU trains, then rolls out: the simulator's colocated mode on the planner's training layout
 * and prediction); without the pool when twin. Planned into x (ok) on a worker.
 */
struct proposal {
    int split, tp;
    bool colocated, twin;
    bool ok;
    struct candidate x;
};

struct proposing {
    const struct sim_input *in;
    struct proposal *p;
};

/* Plans x as the colocated plan of cfg (pinned to x->tp); returns whether it is feasible. */
static bool plan_colocated(const struct sim_input *in, const struct libra_config *cfg,
                           struct candidate *x)
{
    struct plan_result r;
    bool ok = sim_plan(in, cfg, NULL, NULL, &r, NULL) == 0 && r.feasible &&
              sim_layout_make(in, SIM_COLOCATED, 0, x->tp, &x->layout, NULL) == 0;
    if (ok) {
        x->layout.train = r.train;
        x->layout.planned = true;
        x->layout.pred_step_s = r.step_s;
        x->layout.pred_train_s = r.train_s;
        x->layout.pred_rollout_s = r.rollout_s;
        x->layout.pred_switch_s = r.switch_s;
    }
    plan_result_free(&r);
    return ok;
}

/* Names x by what proposed it ("optimum", "best at 24", "all TP4 at 24", "colocated TP8"). */
static void name_proposal(const struct proposal *p, struct candidate *x)
{
    char where[24] = "";
    if (p->split)
        snprintf(where, sizeof where, " at %d", p->split);
    if (p->colocated)
        snprintf(x->origin, sizeof x->origin, "colocated TP%d", p->tp);
    else if (p->tp)
        snprintf(x->origin, sizeof x->origin, "all TP%d%s", p->tp, where);
    else
        snprintf(x->origin, sizeof x->origin, "%s%s", p->split ? "best" : "optimum", where);
    if (p->twin)
        mark_twin(x);
}

/* Plans proposal i (a loop body of the workers: it touches its own slot alone). */
static void plan_proposal(void *arg, size_t i)
{
    const struct proposing *g = arg;
    struct proposal *p = &g->p[i];
    struct candidate *x = &p->x;
    *x = (struct candidate){.split = p->split,
                            .tp = p->tp,
                            .colocated = p->colocated,
                            .tokens_per_s = NAN,
                            .second_tokens_per_s = NAN};
    struct libra_config cfg;
    sim_verified_config(
        g->in->cfg,
        &(struct sim_verified){.split = p->split, .tp = p->tp, .colocated = p->colocated}, &cfg);
    p->ok = p->colocated ? plan_colocated(g->in, &cfg, x)
                         : sim_layout_plan(g->in, &cfg, &x->layout, NULL) == 0;
    if (p->ok)
        name_proposal(p, x);
    else
        sim_layout_free(&x->layout);
}

/* Adds p's candidate to c[0, *n) unless it failed (-1) or repeats one already there (that
 * one's index). Returns the index of the candidate in c. */
static long add_proposal(struct proposal *p, struct candidate *c, size_t *n)
{
    if (!p->ok)
        return -1;
    long same = find_same(&p->x, c, *n);
    if (same >= 0) {
        sim_layout_free(&p->x.layout);
        return same;
    }
    p->x.proposed = *n;
    c[*n] = p->x;
    return (long)(*n)++;
}

/* Plans p[0, k) on in's workers, then adds each in order (add_proposal, its index into at when
 * at is not NULL): the candidates are the same whatever the threads. */
static void propose(const struct sim_input *in, struct proposal *p, size_t k, struct candidate *c,
                    size_t *n, long *at)
{
    workers_for(in->workers, k, plan_proposal, &(struct proposing){in, p});
    for (size_t i = 0; i < k; i++) {
        long index = add_proposal(&p[i], c, n);
        if (at)
            at[i] = index;
    }
}

/* Whether the planner may train on n of cfg's GPUs. */
static bool allowed_split(const struct libra_config *cfg, int n)
{
    const struct spec_plan_config *pc = &cfg->plan;
    int gpus = cfg->cluster.gpus;
    return n > 0 && n < gpus && n % pc->granularity_gpus == 0 && n >= pc->min_train_gpus &&
           gpus - n >= pc->min_rollout_gpus;
}

/* The splits of cfg's cluster the planner may use, nearest to n_train first (at most max). */
static int nearest_splits(const struct libra_config *cfg, int n_train, int *out, int max)
{
    int gpus = cfg->cluster.gpus, g = cfg->plan.granularity_gpus, k = 0;
    for (int d = g; k < max && d < gpus; d += g)
        for (int sign = -1; sign <= 1 && k < max; sign += 2)
            if (allowed_split(cfg, n_train + sign * d))
                out[k++] = n_train + sign * d;
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

/* Whether a node of gpn GPUs holds whole instances of TP tp that a plan.tp_pattern can list
 * (sim_verified_config pins the fleet by one): at most SPEC_PATTERN_MAX of them, as a node of
 * 64 GPUs holds of TP 4 but not of TP 1. */
static bool node_of_tp(int gpn, int tp)
{
    return gpn % tp == 0 && gpn / tp <= SPEC_PATTERN_MAX;
}

/* Appends to p[0, k), at training split n (0: the planner's choice), the best heterogeneous
 * plan and, when the fleet is free, the best of one TP size for each size that fits a node;
 * returns the new count. */
static size_t at_split(const struct libra_config *cfg, int n, struct proposal *p, size_t k)
{
    p[k++] = (struct proposal){.split = n};
    if (cfg->plan.tp_pattern[0])
        return k; /* the fleet is pinned */
    int gpn = cfg->cluster.gpus_per_node;
    for (int tp = 1; tp <= 8 && tp <= gpn; tp *= 2)
        if (node_of_tp(gpn, tp))
            p[k++] = (struct proposal){.split = n, .tp = tp};
    return k;
}

/* The fleet's one TP size, or 0 for a fleet of several. */
static int fleet_tp(const struct sim_layout *l)
{
    for (int i = 1; i < l->n_inst; i++)
        if (l->inst[i].tp != l->inst[0].tp)
            return 0;
    return l->n_inst ? l->inst[0].tp : 0;
}

/* Whether c[i] of c[0, n) (sorted by prediction) is the best ranked of its kind of fleet (one
 * TP size, each size its own kind, or several) among the plans proposed at the optimum's split
 * and the splits nearest it (near: a free optimum that such a proposal repeats counts too). */
static bool first_of_kind(const struct candidate *c, size_t i)
{
    if (!c[i].near)
        return false;
    int tp = fleet_tp(&c[i].layout);
    for (size_t j = 0; j < i; j++)
        if (c[j].near && fleet_tp(&c[j].layout) == tp)
            return false;
    return true;
}

/*
 * Keeps the first keep disaggregated plans of c[0, n) (sorted by prediction) and, in their
 * order, every colocated plan (one per TP size) and the best ranked plan of each kind of fleet
 * near the optimum's split (first_of_kind); returns how many are kept, sorted, the others after
 * them. The colocated plans, another mode with its own step model, are always simulated, so
 * they take no place of a disaggregated one; the analytic step misranks TP sizes against each
 * other on some jobs (docs/planner.md §7.2: random-7's TP4 fleets near its optimum's split
 * ranked 18th and below), so ranking alone can leave a winning kind unsimulated; taking the
 * places of ranked plans would drop the split that wins elsewhere.
 */
static size_t keep_diverse(struct candidate *c, size_t n, size_t keep)
{
    struct candidate *sorted = xmallocarray(n ? n : 1, sizeof *c);
    memcpy(sorted, c, n * sizeof *c);
    bool *kept = xcalloc(n ? n : 1, sizeof *kept);
    size_t k = 0, ranked = 0; /* disaggregated plans seen */
    for (size_t i = 0; i < n; i++) {
        bool in_top = !sorted[i].colocated && ranked++ < keep;
        if ((kept[i] = in_top || sorted[i].colocated || first_of_kind(sorted, i)))
            c[k++] = sorted[i];
    }
    size_t dropped = k;
    for (size_t i = 0; i < n; i++)
        if (!kept[i])
            c[dropped++] = sorted[i];
    free(kept);
    free(sorted);
    return k;
}

/* The planner's candidates, best analytic objective first (ties: the order proposed): its
 * optimum's and each colocated plan, then those at the optimum's split and the splits nearest
 * it. */
static size_t proposals(const struct sim_input *in, struct candidate *c, size_t max)
{
    const struct libra_config *cfg = in->cfg;
    struct proposal *p = xcalloc(PROPOSALS_MAX, sizeof *p);
    size_t free_k = at_split(cfg, 0, p, 0), k = free_k, n = 0;
    int gpn = cfg->cluster.gpus_per_node;
    for (int tp = 1; tp <= 8 && tp <= gpn && !cfg->plan.tp_pattern[0]; tp *= 2)
        if (node_of_tp(gpn, tp))
            p[k++] = (struct proposal){.tp = tp, .colocated = true};
    workers_for(in->workers, k, plan_proposal, &(struct proposing){in, p});
    for (size_t i = 0; i < k; i++)
        if (i < free_k || n > 0) /* no colocated plan without an async one */
            add_proposal(&p[i], c, &n);
        else if (p[i].ok)
            sim_layout_free(&p[i].x.layout);
    if (n > 0) {
        int splits[NEAREST_SPLITS];
        int near = nearest_splits(cfg, c[0].layout.n_train, splits, NEAREST_SPLITS);
        k = at_split(cfg, c[0].layout.n_train, p, 0);
        for (int i = 0; i < near; i++)
            k = at_split(cfg, splits[i], p, k);
        long at[PROPOSALS_MAX];
        propose(in, p, k, c, &n, at);
        for (size_t i = 0; i < k; i++)
            if (at[i] >= 0)
                c[at[i]].near = true;
    }
    free(p);
    if (n == 0)
        return 0;
    qsort(c, n, sizeof *c, by_prediction);
    size_t keep = n < max ? n : max;
    keep = keep_diverse(c, n, keep);
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
    for (size_t i = 0; i < n; i++)
        mark_twin(&c[i]);
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
    struct candidate *c = &v->c[v->wave[i]];
    struct sim_run_opts o = {
        .steps = v->steps, .warmup = v->warmup, .perfetto_step = -1, .rates_only = true};
    struct sim_result r;
    struct libra_error err = {0};
    double *figure = v->racing ? &c->second_tokens_per_s : &c->tokens_per_s;
    int rc = sim_run(v->racing ? v->second : v->in, &c->layout, &o, &r, &err);
    if (rc == 0)
        *figure = r.tokens_per_s;
    else if (!v->racing) { /* the first seed's failure: the one a NAN figure reports */
        c->error_rc = rc;
        snprintf(c->error, sizeof c->error, "%s", err.msg);
        ujson_utf8_repair(c->error); /* cut to its size: whole characters for its JSON */
    }
    c->simulated = true;
    sim_result_free(&r);
}

/* Simulates the wave on the workers. */
static void simulate_wave(struct verification *v)
{
    if (v->in->progress)
        atomic_fetch_add(&v->in->progress->steps_planned, (long long)v->n_wave * v->steps);
    workers_for(v->in->workers, v->n_wave, simulate, v);
}

/* Simulates, on the workers, every candidate not simulated yet. */
static void run_wave(struct verification *v)
{
    v->n_wave = 0;
    for (size_t i = 0; i < v->n; i++)
        if (!v->c[i].simulated)
            v->wave[v->n_wave++] = i;
    simulate_wave(v);
}

/* Whether a simulated faster than b (a failed run is slower than any). */
static bool faster(const struct candidate *a, const struct candidate *b)
{
    return !isnan(a->tokens_per_s) && (isnan(b->tokens_per_s) || a->tokens_per_s > b->tokens_per_s);
}

/* The fastest candidate (ties: the first). */
static size_t fastest(const struct verification *v)
{
    size_t best = 0;
    for (size_t i = 1; i < v->n; i++)
        if (faster(&v->c[i], &v->c[best]))
            best = i;
    return best;
}

/*
 * A pattern search over the split from the fastest candidate, its fleet pinned as it was
 * proposed (every instance of one TP size, or the planner's free fleet): the splits a step away
 * on either side are simulated; a faster one becomes the centre and the step doubles, else the
 * step halves, until a step of plan.granularity_gpus finds nothing faster on either side (at
 * most CLIMB_WAVES waves). The planner's ranking of splits is where its model errs most (§7.2:
 * random-8's fastest split lies 24 GPUs below every proposal's), so the simulator walks there.
 * A colocated or pooled winner has no split to walk.
 */
static void climb(struct verification *v)
{
    size_t centre = fastest(v);
    const struct candidate *w = &v->c[centre];
    if (isnan(w->tokens_per_s) || w->colocated || w->layout.n_hybrid)
        return;
    const struct libra_config *cfg = v->plan_in->cfg;
    struct libra_config without = *cfg;
    without.ehp.enabled = false;
    struct sim_input in = *v->plan_in;
    if (w->twin)
        in.cfg = &without;
    int g = cfg->plan.granularity_gpus, step = g, tp = w->tp;
    bool twin = w->twin;
    size_t n_splits = (size_t)(cfg->cluster.gpus / g) + 1;
    long *at = xmallocarray(n_splits, sizeof *at); /* by split / g: index into v->c; -1 failed */
    for (size_t i = 0; i < n_splits; i++)
        at[i] = -2; /* not proposed */
    for (int wave = 0; wave < CLIMB_WAVES; wave++) {
        int x = v->c[centre].layout.n_train, s[2] = {x - step, x + step};
        struct proposal p[2];
        long index[2];
        size_t n_p = 0;
        for (int j = 0; j < 2; j++)
            if (allowed_split(cfg, s[j]) && at[s[j] / g] == -2)
                p[n_p++] = (struct proposal){.split = s[j], .tp = tp, .twin = twin};
        propose(&in, p, n_p, v->c, &v->n, index);
        for (size_t j = 0; j < n_p; j++)
            at[p[j].split / g] = index[j];
        run_wave(v);
        size_t was = centre;
        for (int k = 0; k < 2; k++)
            if (allowed_split(cfg, s[k]) && at[s[k] / g] >= 0 &&
                faster(&v->c[at[s[k] / g]], &v->c[centre]))
                centre = (size_t)at[s[k] / g];
        if (centre != was)
            step *= 2;
        else if (step > g)
            step /= 2;
        else
            break;
    }
    free(at);
}

/* The mean of a raced candidate's two figures; the one figure of another. */
static double score(const struct candidate *c)
{
    return c->raced ? (c->tokens_per_s + c->second_tokens_per_s) / 2 : c->tokens_per_s;
}

static int by_first_figure(const void *a, const void *b)
{
    const struct candidate *x = *(const struct candidate *const *)a,
                           *y = *(const struct candidate *const *)b;
    return faster(x, y) ? -1 : faster(y, x) ? 1 : (x > y) - (x < y); /* ties: analytic rank */
}

/*
 * The winner. A short simulation of a few dozen groups ranks candidates within a few per cent
 * of each other by its seed's long trajectories as much as by their layouts (docs/planner.md
 * §7.2), so the RACE_MAX fastest within RACE_MARGIN of the fastest run again on a second seed
 * and the best mean of the two wins among them; the rest stay out. Returns its index.
 */
static size_t race(struct verification *v)
{
    size_t best = fastest(v);
    if (isnan(v->c[best].tokens_per_s))
        return best;
    struct candidate **close = xmallocarray(v->n, sizeof *close);
    size_t n_close = 0;
    for (size_t i = 0; i < v->n; i++)
        if (!isnan(v->c[i].tokens_per_s) &&
            v->c[i].tokens_per_s >= (1 - RACE_MARGIN) * v->c[best].tokens_per_s)
            close[n_close++] = &v->c[i];
    qsort(close, n_close, sizeof *close, by_first_figure);
    n_close = n_close < RACE_MAX ? n_close : RACE_MAX;
    if (n_close > 1) {
        v->n_wave = n_close;
        for (size_t i = 0; i < n_close; i++) {
            v->wave[i] = (size_t)(close[i] - v->c);
            close[i]->raced = true;
        }
        v->racing = true;
        simulate_wave(v);
        v->racing = false;
        const struct candidate *won = close[0];
        for (size_t i = 1; i < n_close; i++)
            if (!isnan(score(close[i])) && (isnan(score(won)) || score(close[i]) > score(won)))
                won = close[i];
        best = (size_t)(won - v->c);
    }
    free(close);
    return best;
}

/* Into the chosen layout l: the async fleets simulated at its split and with its hybrid
 * replicas, by analytic rank, each by its core instances (as a replan counts the running
 * fleet) with its score. */
static void keep_measured(const struct candidate *c, size_t n, struct sim_layout *l)
{
    l->n_measured = 0;
    for (size_t i = 0; i < n && l->n_measured < SIM_MEASURED_MAX; i++) {
        const struct sim_layout *cl = &c[i].layout;
        if (c[i].colocated || cl->n_train != l->n_train || cl->n_hybrid != l->n_hybrid ||
            !(score(&c[i]) > 0))
            continue;
        struct sim_measured_fleet *m = &l->measured[l->n_measured++];
        sim_layout_counts(cl, true, m->counts);
        m->tokens_per_s = score(&c[i]);
    }
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

/* A seed of the verification's, derived from the experiment's by key: below 2^53, as sim.seed. */
static int64_t derived_seed(int64_t seed, uint64_t key)
{
    return (int64_t)(rng_hash((uint64_t)seed, (const uint64_t[]){key}, 1) >> 11);
}

int sim_verify(const struct sim_input *in, struct sim_mode_result *mr, struct libra_error *err)
{
    const struct libra_config *cfg = in->cfg;
    size_t cap = 2 * (size_t)PROPOSALS_MAX + 2 * CLIMB_WAVES;
    struct candidate *c = xcalloc(cap, sizeof *c);
    size_t n = candidates(in, c, (size_t)cfg->plan.verify_candidates);
    if (n == 0) {
        free(c);
        return sim_layout_make(in, SIM_LIBRA, 0, 0, &mr->layout, err); /* the planner's error */
    }
    struct libra_config vcfg = *cfg;
    vcfg.plan.replan_interval_steps = 0; /* the candidates are judged as they start: static */
    vcfg.plan.replan_pressure = false;
    vcfg.sim.seed = derived_seed(cfg->sim.seed, VERIFY_SEED_KEY);
    struct libra_config rcfg = vcfg;
    rcfg.sim.seed = derived_seed(cfg->sim.seed, RACE_SEED_KEY);
    struct sim_input vin = *in, rin;
    vin.cfg = &vcfg;
    vin.perfetto = false;
    rin = vin;
    rin.cfg = &rcfg;
    /* the measured steps, after the warm-up, are whole weight-update intervals (an async
     * step's length depends on where it falls in its interval), and no more than the
     * experiment runs */
    int warmup = sim_warmup_steps(cfg, cfg->plan.verify_steps);
    int s = cfg->rl.sync_interval, measured = cfg->plan.verify_steps - warmup;
    int steps = warmup + (measured + s - 1) / s * s;
    if (steps > cfg->rl.steps) {
        steps = cfg->rl.steps;
        warmup = sim_warmup_steps(cfg, steps);
    }
    struct verification v = {.plan_in = in,
                             .in = &vin,
                             .second = &rin,
                             .steps = steps,
                             .warmup = warmup,
                             .c = c,
                             .n = n,
                             .wave = xcalloc(cap, sizeof(size_t))};
    run_wave(&v);
    climb(&v);
    qsort(c, v.n, sizeof *c, by_prediction); /* the analytic rank of each simulated */
    size_t best = race(&v);
    keep_measured(c, v.n, &c[best].layout);
    mr->verified = xcalloc(v.n, sizeof *mr->verified);
    mr->n_verified = (int)v.n;
    mr->verify_steps = v.steps;
    mr->verify_seed = vcfg.sim.seed;
    mr->race_seed = rcfg.sim.seed;
    for (size_t i = 0; i < v.n; i++) {
        struct sim_verified *out = &mr->verified[i];
        snprintf(out->origin, sizeof out->origin, "%s", c[i].origin);
        out->split = c[i].split;
        out->tp = c[i].tp;
        out->colocated = c[i].colocated;
        out->n_train = c[i].layout.n_train;
        sim_fleet_text(&c[i].layout, out->instances, sizeof out->instances);
        out->pred_step_s = c[i].layout.pred_step_s;
        out->tokens_per_s = c[i].tokens_per_s;
        out->error_rc = c[i].error_rc;
        snprintf(out->error, sizeof out->error, "%s", c[i].error);
        out->raced = c[i].raced;
        out->second_tokens_per_s = c[i].second_tokens_per_s;
        out->chosen = i == best;
        if (i != best)
            sim_layout_free(&c[i].layout);
    }
    mr->layout = c[best].layout;
    snprintf(mr->layout.origin, sizeof mr->layout.origin, "verified");
    free(v.wave);
    free(c);
    return 0;
}
