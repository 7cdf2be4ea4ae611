/*
 * The planner's reference for the differential tests (test_plan_search*.c): random problems
 * and a brute force that scores every (training layout, rollout multiset) pair of every split
 * and keeps the least under the documented tie-break order.
 *
 * It shares with the planner only the per-candidate model (plan_train_check/time,
 * plan_roll_score, plan_train_switch_s, the usable TP sizes): the enumeration of splits,
 * layouts and multisets, the packing test (first-fit decreasing into the actual nodes), the
 * constraints and the tie-break are written again here, naively.
 */
#ifndef TESTS_PLAN_BRUTE_H
#define TESTS_PLAN_BRUTE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/shape.h"
#include "plan/plan.h"
#include "plan/roll.h"
#include "plan/train.h"
#include "util/rng.h"

/* A random problem and everything it borrows. */
struct brute_case {
    struct libra_config cfg;
    const struct spec_hardware *hw;
    const struct spec_model *model;
    int64_t *prompt, *gen, *tool, *turns;
    double *tool_s;
    bool *filtered;
    struct plan_problem p;
};

static inline int64_t brute_pick(struct rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)rng_uniform_int(r, (uint64_t)(hi - lo + 1));
}

/* Fills c with problem number seed on at most max_gpus GPUs; settings st are shared. */
static inline void brute_case_make(struct brute_case *c, const struct spec_presets *ps,
                                   const struct plan_settings *st, uint64_t seed, int max_gpus)
{
    static const char *const models[] = {"qwen3-14b", "qwen3-14b", "qwen3-4b",
                                         "qwen3-4b",  "qwen3-32b", "qwen3-30b-a3b"};
    static const char *const pat8[] = {"1,1,2,4", "8", "4,4", "2,2,2,2"};
    static const char *const pat4[] = {"1,1,2", "4", "2,2"};
    struct rng r = rng_keyed(seed, 0x706c616e, 0, 0);
    memset(c, 0, sizeof *c);
    spec_config_defaults(&c->cfg);
    struct libra_config *cfg = &c->cfg;
    cfg->cluster.gpus_per_node = rng_uniform(&r) < 0.7 ? 8 : 4;
    cfg->cluster.gpus = (int)brute_pick(&r, max_gpus / 4, max_gpus);
    c->hw = spec_hardware_find(ps, "a800-80g");
    c->model = spec_model_find(ps, models[rng_uniform_int(&r, 6)]);
    cfg->rl.samples = (int)(1 << rng_uniform_int(&r, 3));
    cfg->rl.batch_trajectories = cfg->rl.samples * (int)brute_pick(&r, 1, 24 / cfg->rl.samples);
    cfg->rl.max_staleness = (int)brute_pick(&r, 0, 4);
    /* weight updates the async rules allow (spec_rl_async_check) */
    cfg->rl.sync_interval = (int)brute_pick(&r, 1, cfg->rl.max_staleness + 1);
    cfg->rl.transport = (enum spec_transport)rng_uniform_int(&r, 3); /* nccl, reload, restart */
    cfg->rl.sync_mode = (enum spec_sync_mode)rng_uniform_int(&r, 3);
    if (cfg->rl.sync_mode == SPEC_SYNC_KEEP && cfg->rl.transport == SPEC_TRANSPORT_DISK_RESTART)
        cfg->rl.sync_mode = SPEC_SYNC_DRAIN;
    cfg->plan.mode = rng_uniform(&r) < 0.25 ? SPEC_PLAN_COLOCATED : SPEC_PLAN_ASYNC;
    cfg->plan.granularity_gpus = (int)(1 << rng_uniform_int(&r, cfg->cluster.gpus >= 16 ? 4 : 2));
    int quarter = cfg->cluster.gpus / 4 > 1 ? cfg->cluster.gpus / 4 : 1;
    cfg->plan.min_train_gpus = (int)brute_pick(&r, 1, quarter < 8 ? quarter : 8);
    cfg->plan.min_rollout_gpus = (int)brute_pick(&r, 1, quarter < 8 ? quarter : 8);
    cfg->plan.group_integrity = rng_uniform(&r) < 0.25;
    cfg->plan.homogeneous_rollout = rng_uniform(&r) < 0.15;
    cfg->plan.min_tp_sizes = rng_uniform(&r) < 0.2 ? 2 : 1;
    cfg->plan.cp_min_seq_tokens = rng_uniform(&r) < 0.5 ? 16384 : 4096;
    /* the memory options: mostly fallback (the default), sometimes off or always searched */
    static const enum spec_layout_option options[] = {SPEC_OPTION_FALLBACK, SPEC_OPTION_FALLBACK,
                                                      SPEC_OPTION_OFF, SPEC_OPTION_SEARCH};
    cfg->plan.recompute = options[rng_uniform_int(&r, 4)];
    cfg->plan.fsdp = options[rng_uniform_int(&r, 4)];
    cfg->ehp.enabled = rng_uniform(&r) < 0.2;
    if (rng_uniform(&r) < 0.1) {
        const char *pat = cfg->cluster.gpus_per_node == 8 ? pat8[rng_uniform_int(&r, 4)]
                                                          : pat4[rng_uniform_int(&r, 3)];
        snprintf(cfg->plan.tp_pattern, sizeof cfg->plan.tp_pattern, "%s", pat);
    }
    int B = cfg->rl.batch_trajectories;
    size_t n = (size_t)B * (size_t)brute_pick(&r, 1, 3) + (size_t)brute_pick(&r, 0, B - 1);
    c->prompt = calloc(n, sizeof *c->prompt);
    c->gen = calloc(n, sizeof *c->gen);
    c->tool = calloc(n, sizeof *c->tool);
    c->turns = calloc(n, sizeof *c->turns);
    c->tool_s = calloc(n, sizeof *c->tool_s);
    for (size_t i = 0; i < n; i++) {
        c->prompt[i] = brute_pick(&r, 100, 2000);
        c->gen[i] = (int64_t)fmin(16000.0, fmax(16.0, rng_lognormal(&r, log(800.0), 1.0)));
        c->turns[i] = brute_pick(&r, 1, 12);
        c->tool[i] = c->turns[i] > 1 ? brute_pick(&r, 0, 3000) : 0;
        c->tool_s[i] = (double)(c->turns[i] - 1) * rng_lognormal(&r, log(10.0), 1.5);
    }
    c->p = (struct plan_problem){.cfg = cfg, .hw = c->hw, .model = c->model, .settings = st};
    c->p.sample = (struct plan_sample){n, c->prompt, c->gen, c->tool, c->turns};
    c->p.tool_s = rng_uniform(&r) < 0.75 ? c->tool_s : NULL;
    /* dynamic sampling in a third of the cases: whole groups dropped, the first one kept */
    c->filtered = calloc(n, sizeof *c->filtered);
    bool dynamic = rng_uniform(&r) < 0.3;
    for (size_t i = cfg->rl.samples; dynamic && i < n; i += (size_t)cfg->rl.samples) {
        bool drop = rng_uniform(&r) < 0.4;
        for (size_t k = i; k < i + (size_t)cfg->rl.samples && k < n; k++)
            c->filtered[k] = drop;
    }
    c->p.filtered = dynamic ? c->filtered : NULL;
    /* a bounded tool pool in a quarter of the cases, binding on some of their fleets */
    c->p.pool_s = rng_uniform(&r) < 0.25 ? rng_lognormal(&r, 0.0, 1.0) : 0.0;
}

static inline void brute_case_free(struct brute_case *c)
{
    free(c->prompt);
    free(c->gen);
    free(c->tool);
    free(c->turns);
    free(c->tool_s);
    free(c->filtered);
}

/* The best pair found, with the fields of the tie-break order. */
struct brute_best {
    bool found;
    double obj;
    int n_train;
    struct plan_train_layout l;
    double train_s; /* async: its train side */
    int inst;
    double roll_s;
    int c[PLAN_NTP];
    double space; /* pairs of structural layouts and packable multisets */
};

/* -1, 0, 1 as (obj, n_train, async train side, tp, pp, cp, budget, instances, rollout time,
 * then more large instances) of a orders before, with or after b's. */
static inline int brute_cmp(const struct brute_best *a, const struct brute_best *b)
{
#define BRUTE_CMP(x, y)                                                                            \
    if ((x) != (y))                                                                                \
        return (x) < (y) ? -1 : 1;
    BRUTE_CMP(a->obj, b->obj)
    BRUTE_CMP(a->n_train, b->n_train)
    BRUTE_CMP(a->train_s, b->train_s) /* async: the fastest layout; colocated: 0 */
    BRUTE_CMP(a->l.tp, b->l.tp)
    BRUTE_CMP(a->l.pp, b->l.pp)
    BRUTE_CMP(a->l.cp, b->l.cp)
    BRUTE_CMP(a->l.budget_tokens, b->l.budget_tokens)
    BRUTE_CMP(a->l.recompute, b->l.recompute)
    BRUTE_CMP(a->l.fsdp, b->l.fsdp)
    BRUTE_CMP(a->l.shard_dp, b->l.shard_dp) /* FSDP before HSDP */
    BRUTE_CMP(a->l.ep, b->l.ep)
    BRUTE_CMP(a->inst, b->inst)
    BRUTE_CMP(a->roll_s, b->roll_s)
    for (int t = PLAN_NTP - 1; t > 0; t--)
        BRUTE_CMP(b->c[t], a->c[t])
#undef BRUTE_CMP
    return 0;
}

/* First-fit decreasing of the multiset into nodes with free[] GPUs. */
static inline bool brute_packs(const int *free_gpus, int nodes, const int c[PLAN_NTP])
{
    int room[256];
    memcpy(room, free_gpus, (size_t)nodes * sizeof *room);
    for (int t = PLAN_NTP - 1; t >= 0; t--)
        for (int k = 0; k < c[t]; k++) {
            int node = 0;
            while (node < nodes && room[node] < 1 << t)
                node++;
            if (node == nodes)
                return false;
            room[node] -= 1 << t;
        }
    return true;
}

/* Whether multiset c (class cls) meets the rollout constraints on these nodes. */
static inline bool brute_rollout_ok(const struct brute_case *bc, const struct plan_roll *roll,
                                    const int *free_gpus, int nodes, const int c[PLAN_NTP])
{
    const struct spec_plan_config *pc = &bc->cfg.plan;
    int sizes = 0, top = -1;
    for (int t = 0; t < PLAN_NTP; t++)
        if (c[t] > 0) {
            if (!roll->usable[t])
                return false;
            sizes++;
            top = t;
        }
    if (!roll->fits_all[top] || sizes < pc->min_tp_sizes || (pc->homogeneous_rollout && sizes != 1))
        return false;
    int pat[PLAN_NTP], pat_gpus;
    spec_tp_pattern_parse(pc->tp_pattern, "test", pat, &pat_gpus, NULL);
    if (!pat_gpus)
        return true;
    int rollout_nodes = 0;
    for (int i = 0; i < nodes; i++) {
        if (free_gpus[i] != 0 && free_gpus[i] != bc->cfg.cluster.gpus_per_node)
            return false;
        rollout_nodes += free_gpus[i] != 0;
    }
    for (int t = 0; t < PLAN_NTP; t++)
        if (c[t] != rollout_nodes * pat[t])
            return false;
    return true;
}

/* Scores every pair of one split, updating best. */
static inline void brute_split(const struct brute_case *bc, struct plan_roll *roll,
                               struct plan_train *train, int n_train, bool colocated,
                               struct brute_best *best)
{
    int N = bc->cfg.cluster.gpus, G = bc->cfg.cluster.gpus_per_node, nodes = (N + G - 1) / G;
    int n_roll = colocated ? N : N - n_train, free_gpus[256];
    for (int i = 0; i < nodes; i++) {
        int size = N - i * G < G ? N - i * G : G, taken = colocated ? 0 : n_train - i * G;
        taken = taken < 0 ? 0 : taken > size ? size : taken;
        free_gpus[i] = size - taken;
    }
    int cps = train->longest > bc->cfg.plan.cp_min_seq_tokens ? 4 : 1;
    struct plan_train_layout ls[PLAN_LAYOUTS_MAX];
    double tt[PLAN_LAYOUTS_MAX];
    int nl = 0, structural = 0;
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int pp = 1; pp <= 8; pp *= 2)
            for (int cp = 1; cp <= cps; cp *= 2)
                for (int bi = 0; bi < PLAN_BUDGETS * 6; bi++) {
                    /* budget × recompute × sharding (distributed optimizer, FSDP, HSDP) */
                    int sharding = bi % 3, dp = n_train / (tp * pp * cp), shard = G / cp;
                    bool rc = bi / 3 % 2 == 1, fs = sharding > 0, hsdp = sharding == 2;
                    if (n_train % (tp * pp * cp) != 0 || (rc && !train->recompute) ||
                        (fs && !(train->fsdp && tp == 1 && pp == 1)) ||
                        (hsdp && !(shard > 1 && shard < dp && dp % shard == 0)))
                        continue;
                    /* expert parallel sizes: MoE under the distributed optimizer only */
                    for (int ep = 1; ep <= 64; ep *= 2) {
                        if (ep > 1 && (fs || !bc->model->experts || (tp * cp * dp) % ep != 0 ||
                                       bc->model->experts % ep != 0))
                            continue;
                        structural++;
                        struct plan_train_layout l = {
                            tp, pp, cp, dp, plan_budgets[bi / 6], rc, fs, hsdp ? shard : 0, ep};
                        if (plan_train_check(train, &l, NULL) == PLAN_WHY_NONE) {
                            ls[nl] = l;
                            /* async: the train side adds the trainer's share of the updates */
                            tt[nl++] = plan_train_time(train, &l, NULL) +
                                       (colocated ? 0.0 : roll->job.train_add_s);
                        }
                    }
                }
    double train_min = INFINITY; /* the split's least train side, which the span charges */
    for (int i = 0; i < nl; i++)
        train_min = fmin(train_min, tt[i]);
    /* and the first layout's that takes it, by batch of an admission in finish order */
    double order[64];
    bool ordered = false;
    for (int i = 0; i < nl && !colocated && roll->job.interval >= 2; i++)
        if (tt[i] == train_min) {
            ordered = roll->job.interval <= 64 && plan_train_order(train, &ls[i], order);
            break;
        }
    for (int c8 = 0; 8 * c8 <= n_roll; c8++)
        for (int c4 = 0; 8 * c8 + 4 * c4 <= n_roll; c4++)
            for (int c2 = 0; 8 * c8 + 4 * c4 + 2 * c2 <= n_roll; c2++) {
                int c[PLAN_NTP] = {n_roll - 8 * c8 - 4 * c4 - 2 * c2, c2, c4, c8};
                if (!brute_packs(free_gpus, nodes, c))
                    continue;
                best->space += structural;
                if (!brute_rollout_ok(bc, roll, free_gpus, nodes, c))
                    continue;
                struct plan_roll_score sc;
                plan_roll_score(roll, c, colocated, NAN, train_min, ordered ? order : NULL, &sc);
                for (int i = 0; i < nl; i++) {
                    struct brute_best cand = {.found = true,
                                              .n_train = n_train,
                                              .l = ls[i],
                                              .train_s = colocated ? 0.0 : tt[i],
                                              .roll_s = sc.t_s};
                    double sw = 0.0;
                    for (int t = 0; t < PLAN_NTP; t++) {
                        cand.c[t] = c[t];
                        cand.inst += c[t];
                        if (colocated && c[t] > 0)
                            sw = fmax(sw, plan_train_switch_s(train, &ls[i], 1 << t));
                    }
                    cand.obj = colocated ? sc.t_s + (tt[i] + sw) : fmax(tt[i], sc.t_s);
                    if (!isinf(cand.obj) && (!best->found || brute_cmp(&cand, best) < 0)) {
                        cand.space = best->space;
                        *best = cand;
                    }
                }
            }
}

/* The brute-force optimum of bc. */
static inline void brute_solve(const struct brute_case *bc, struct brute_best *best)
{
    const struct libra_config *cfg = &bc->cfg;
    struct cost_shape sh;
    cost_shape_init(&sh, bc->model);
    struct plan_roll roll;
    struct plan_train train;
    struct plan_roll_job job;
    plan_roll_job_init(&job, &bc->p, &sh);
    plan_roll_init(&roll, &bc->p.sample, bc->p.tool_s, bc->p.filtered, &sh, bc->hw, bc->p.settings,
                   &job);
    plan_train_init(&train, &bc->p.sample, bc->p.filtered, &sh, bc->hw, bc->p.settings, cfg);
    memset(best, 0, sizeof *best);
    int N = cfg->cluster.gpus;
    const struct spec_plan_config *pc = &cfg->plan;
    bool colocated = cfg->plan.mode == SPEC_PLAN_COLOCATED;
    int splits[1024], n_splits = 0;
    if (colocated) {
        if (N % pc->granularity_gpus == 0 && N >= pc->min_train_gpus && N >= pc->min_rollout_gpus)
            splits[n_splits++] = N;
    } else {
        for (int n = 1; n < N; n++)
            if (n % pc->granularity_gpus == 0 && n >= pc->min_train_gpus &&
                N - n >= pc->min_rollout_gpus)
                splits[n_splits++] = n;
    }
    for (int i = 0; i < n_splits; i++) {
        /* plan.recompute / plan.fsdp fallback: a split's layouts with the options on fallback
         * when none fits without them */
        bool fits = pc->recompute != SPEC_OPTION_FALLBACK && pc->fsdp != SPEC_OPTION_FALLBACK;
        train.recompute = pc->recompute == SPEC_OPTION_SEARCH;
        train.fsdp = pc->fsdp == SPEC_OPTION_SEARCH;
        struct plan_train_layout ls[PLAN_LAYOUTS_MAX];
        size_t k = fits ? 0 : plan_train_layouts(&train, splits[i], ls);
        for (size_t j = 0; j < k && !fits; j++)
            fits = plan_train_check(&train, &ls[j], NULL) == PLAN_WHY_NONE;
        train.recompute =
            pc->recompute == SPEC_OPTION_SEARCH || (!fits && pc->recompute == SPEC_OPTION_FALLBACK);
        train.fsdp = pc->fsdp == SPEC_OPTION_SEARCH || (!fits && pc->fsdp == SPEC_OPTION_FALLBACK);
        brute_split(bc, &roll, &train, splits[i], colocated, best);
    }
    plan_roll_free(&roll);
    plan_train_free(&train);
}

/* Whether plan r is the brute force's b: feasibility, search space, objective (relative
 * 1e-9) and, under the tie-break order, the same training layout and multiset. */
static inline bool brute_same(const struct plan_result *r, const struct brute_best *b)
{
    if (r->feasible != b->found || r->stats.space != b->space)
        return false;
    return !b->found ||
           (fabs(r->step_s - b->obj) <= 1e-9 * b->obj && r->n_train == b->n_train &&
            r->train.tp == b->l.tp && r->train.pp == b->l.pp && r->train.cp == b->l.cp &&
            r->train.budget_tokens == b->l.budget_tokens && r->train.recompute == b->l.recompute &&
            r->train.fsdp == b->l.fsdp && memcmp(r->counts, b->c, sizeof b->c) == 0);
}

#endif
