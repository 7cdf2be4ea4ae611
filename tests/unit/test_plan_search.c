/*
 * Tests of the planner's search (src/plan/search.c and plan.c): the plan equals a brute force
 * over every feasible configuration on random small clusters, invariants hold on random
 * larger ones, bad input is refused and infeasible problems name their constraint.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "plan_brute.h"
#include "spec/bucket.h"

static struct spec_presets presets;
static struct plan_settings settings;

static int setup(void **state)
{
    struct libra_error err;
    if (spec_presets_init(&presets, &err) != 0)
        return -1;
    plan_settings_default(&settings, spec_hardware_find(&presets, "a800-80g"));
    return 0;
}

static int teardown(void **state)
{
    spec_presets_free(&presets);
    return 0;
}

static void solve_ok(const struct plan_problem *p, struct plan_result *r)
{
    struct libra_error err = {0};
    int rc = plan_solve(p, r, &err);
    if (rc)
        print_error("plan_solve: %s\n", err.msg);
    assert_int_equal(rc, 0);
}

static void describe(uint64_t seed, const struct brute_case *bc, const struct plan_result *r,
                     const struct brute_best *b)
{
    const struct libra_config *c = &bc->cfg;
    print_error("seed %llu: %d GPUs (%d/node) %s B=%d n=%d k=%d gran=%d min %d/%d groups=%d "
                "homog=%d min_tp=%d ehp=%d pattern='%s' sample=%zu\n",
                (unsigned long long)seed, c->cluster.gpus, c->cluster.gpus_per_node,
                bc->model->name, c->rl.batch_trajectories, c->rl.samples, c->rl.max_staleness,
                c->plan.granularity_gpus, c->plan.min_train_gpus, c->plan.min_rollout_gpus,
                c->plan.group_integrity, c->plan.homogeneous_rollout, c->plan.min_tp_sizes,
                c->ehp.enabled, c->plan.tp_pattern, bc->p.sample.n);
    print_error("  plan : feasible %d obj %.17g n_train %d tp%d pp%d cp%d b%d counts %d %d %d %d\n",
                r->feasible, r->step_s, r->n_train, r->train.tp, r->train.pp, r->train.cp,
                r->train.budget_tokens, r->counts[0], r->counts[1], r->counts[2], r->counts[3]);
    print_error("  brute: feasible %d obj %.17g n_train %d tp%d pp%d cp%d b%d counts %d %d %d %d\n",
                b->found, b->obj, b->n_train, b->l.tp, b->l.pp, b->l.cp, b->l.budget_tokens,
                b->c[0], b->c[1], b->c[2], b->c[3]);
}

/* The plan of case seed equals the brute force's, objective and tie-break both. */
static void check_differential(uint64_t seed, int max_gpus)
{
    struct brute_case bc;
    brute_case_make(&bc, &presets, &settings, seed, max_gpus);
    struct plan_result r;
    solve_ok(&bc.p, &r);
    struct brute_best b;
    brute_solve(&bc, &b);
    bool same = brute_same(&r, &b);
    if (!same) {
        describe(seed, &bc, &r, &b);
        print_error("  space: plan %.0f brute %.0f\n", r.stats.space, b.space);
    }
    assert_true(same);
    assert_false(r.stats.stopped);
    assert_true(r.stats.gap == 0.0);
    plan_result_free(&r);
    brute_case_free(&bc);
}

static void test_differential_small_clusters(void **state)
{
    for (uint64_t seed = 1; seed <= 160; seed++)
        check_differential(seed, 32);
}

/* ---- invariants ----------------------------------------------------------------------------- */

static void check_placement(const struct plan_result *r)
{
    int train = 0, instances = 0, gpus_of[PLAN_NTP] = {0};
    for (int g = 0; g < r->gpus; g++) {
        const struct plan_gpu *u = &r->gpu[g];
        assert_int_equal(u->node, g / r->gpus_per_node);
        train += u->role == PLAN_ROLE_TRAIN;
        if (u->instance < 0) {
            assert_true(u->role == PLAN_ROLE_TRAIN && !r->colocated);
            continue;
        }
        int t = __builtin_ctz((unsigned)u->instance_tp);
        gpus_of[t]++;
        /* an instance's GPUs are contiguous and inside one node */
        bool first = g == 0 || r->gpu[g - 1].instance != u->instance;
        if (first) {
            instances++;
            for (int k = 1; k < u->instance_tp; k++) {
                assert_int_equal(r->gpu[g + k].instance, u->instance);
                assert_int_equal(r->gpu[g + k].node, u->node);
            }
        }
    }
    assert_int_equal(train, r->colocated ? r->gpus : r->n_train);
    assert_int_equal(instances, r->instances);
    for (int t = 0; t < PLAN_NTP; t++)
        assert_int_equal(gpus_of[t], r->counts[t] << t);
}

static void check_invariants(const struct brute_case *bc, const struct plan_result *r)
{
    const struct libra_config *c = &bc->cfg;
    if (!r->feasible) {
        assert_int_not_equal(r->why, PLAN_WHY_NONE);
        return;
    }
    int rollout = 0, sizes = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        rollout += r->counts[t] << t;
        sizes += r->counts[t] > 0;
    }
    assert_int_equal(rollout, r->n_rollout);
    assert_int_equal(r->train.tp * r->train.pp * r->train.cp * r->train.dp, r->n_train);
    if (r->colocated) {
        assert_int_equal(r->n_train, c->cluster.gpus);
        assert_int_equal(r->n_rollout, c->cluster.gpus);
        assert_true(r->step_s == r->rollout_s + (r->train_s + r->switch_s));
    } else {
        assert_int_equal(r->n_train + r->n_rollout, c->cluster.gpus);
        assert_true(r->n_rollout >= c->plan.min_rollout_gpus);
        assert_true(r->step_s == fmax(r->train_s, r->rollout_s));
        assert_true(r->f_stale >= 0.0 && r->f_stale <= 1.0);
    }
    assert_int_equal(r->n_train % c->plan.granularity_gpus, 0);
    assert_true(r->n_train >= c->plan.min_train_gpus);
    assert_true(sizes >= c->plan.min_tp_sizes);
    if (c->plan.homogeneous_rollout)
        assert_int_equal(sizes, 1);
    if (c->ehp.enabled)
        assert_true(r->train.tp * r->train.pp * r->train.cp <= c->cluster.gpus_per_node);
    if (c->plan.group_integrity)
        assert_int_equal(c->rl.batch_trajectories % (r->train.dp * c->rl.samples), 0);
    assert_true(r->train_mem.fits);
    assert_int_equal(spec_bucket_validate(&r->layout, NULL), 0);
    int in_buckets = 0;
    for (int i = 0; i < r->layout.n; i++)
        for (int k = 0; k < r->layout.bucket[i].n_tp; k++)
            in_buckets += r->layout.bucket[i].instances[k];
    assert_int_equal(in_buckets, r->instances);
    size_t covered = 0;
    for (int i = 0; i < r->n_bands; i++)
        covered += r->band[i].last - r->band[i].first;
    assert_int_equal(covered, bc->p.sample.n);
    check_placement(r);
}

static void check_stats(const struct plan_result *r)
{
    const struct plan_stats *s = &r->stats;
    assert_true(s->train_scored + s->train_pruned == s->train_space);
    assert_true(s->rollout_scored + s->rollout_pruned == s->rollout_space);
    assert_true(s->train_scored <= s->train_space && s->rollout_scored <= s->rollout_space);
    assert_true(s->space >= s->rollout_space || s->train_space == 0);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The rollout tables of case bc with its sample's groups filtered as given (bc's own by
 * default); sh must outlive roll. */
static void roll_of(const struct brute_case *bc, const bool *filtered, struct cost_shape *sh,
                    struct plan_roll *roll)
{
    cost_shape_init(sh, bc->model);
    struct plan_problem p = bc->p;
    p.filtered = filtered;
    struct plan_roll_job job;
    plan_roll_job_init(&job, &p, sh);
    plan_roll_init(roll, &bc->p.sample, bc->p.tool_s, filtered, sh, bc->hw, bc->p.settings, &job);
}

/* Random case `seed` (up to 32 GPUs) and the length model of its sample. */
static void case_roll(uint64_t seed, struct brute_case *bc, struct cost_shape *sh,
                      struct plan_roll *roll)
{
    brute_case_make(bc, &presets, &settings, seed, 32);
    roll_of(bc, bc->p.filtered, sh, roll);
}

/* plan_roll_lam_min merges the per-TP latency orders; it must equal the plain definition:
 * every rank's least latency / k1 over the mask's sizes, sorted. */
static void test_lam_min_is_the_sorted_least_latencies(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        struct brute_case bc;
        struct cost_shape sh;
        struct plan_roll roll;
        case_roll(seed, &bc, &sh, &roll);
        double *want = malloc(roll.m * sizeof *want);
        for (unsigned mask = 1; mask < 1u << PLAN_NTP; mask++) {
            for (size_t k = 0; k < roll.m; k++) {
                want[k] = INFINITY;
                for (int t = 0; t < PLAN_NTP; t++)
                    if (mask >> t & 1)
                        want[k] = fmin(want[k], roll.lat[t][k] / roll.k1);
            }
            qsort(want, roll.m, sizeof *want, by_double);
            assert_memory_equal(plan_roll_lam_min(&roll, mask), want, roll.m * sizeof *want);
        }
        free(want);
        plan_roll_free(&roll);
        brute_case_free(&bc);
    }
}

/* The async terms (docs/planner.md §2.4) compose as documented, every term stays above the
 * bounds the search prunes with, and dynamic sampling scales the fleet's work by 1 / kept. */
static void test_async_terms(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct brute_case bc;
        struct cost_shape sh;
        struct plan_roll roll;
        case_roll(seed, &bc, &sh, &roll);
        const struct plan_roll_job job = roll.job;
        assert_true(roll.per_step >= bc.cfg.rl.batch_trajectories);
        for (int t = 0; t < PLAN_NTP; t++) {
            if (!roll.fits_all[t])
                continue;
            int c[PLAN_NTP] = {0};
            c[t] = 1 + (int)(seed % 3);
            struct plan_roll_score sc;
            plan_roll_score(&roll, c, false, NAN, 5.0, NULL, &sc);
            double update = job.save_s + job.transfer_s + sc.drain_s + sc.reprefill_s;
            assert_true(sc.update_s == update);
            assert_true(sc.pool_s == roll.per_step * job.pool_s);
            assert_true(sc.fleet_s == fmax(sc.work_s, sc.little_s) + update / job.interval);
            assert_true(sc.t_s == fmax(fmax(sc.fixed_s, sc.pool_s), fmax(sc.fleet_s, sc.span_s)));
            assert_true(sc.work_s >= roll.per_step * sc.z_s / (double)roll.m);
            if (job.k1 == job.interval)
                assert_true(sc.drain_s == 0.0 && sc.reprefill_s == 0.0);
            /* the span's bound: each rank alone on the class's smallest TP, no queue */
            double lb = (plan_roll_tail_lb(&roll, 1u << t) + 5.0 + job.save_s + job.transfer_s) /
                        job.k1 * (1.0 - 1e-12); /* summed in another order: as the search */
            /* in real arithmetic; the two sum in other orders, and the search shaves (§3.4) */
            assert_true(sc.tail_s >= plan_roll_tail_lb(&roll, 1u << t) * (1.0 - 1e-12));
            assert_true(sc.span_s >= lb);
        }
        plan_roll_free(&roll);
        brute_case_free(&bc);
    }
}

/* plan_train_order: an admission's batches in finish order cost ascending times whose mean is
 * 1, the last at least the mean; charged in the span they lengthen it (the chain trains the
 * heaviest batches last), and weights of 1 charge what no weights charge. */
static void test_train_order(void **state)
{
    (void)state;
    int ordered = 0, skewed = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        struct brute_case bc;
        struct cost_shape sh;
        struct plan_roll roll;
        case_roll(seed, &bc, &sh, &roll);
        struct plan_train train;
        plan_train_init(&train, &bc.p.sample, bc.p.filtered, &sh, bc.hw, bc.p.settings, &bc.cfg);
        int iv = roll.job.interval, n = bc.cfg.cluster.gpus / 2;
        struct plan_train_layout ls[PLAN_LAYOUTS_MAX];
        size_t k = plan_train_layouts(&train, n, ls), i = 0;
        while (i < k && plan_train_check(&train, &ls[i], NULL) != PLAN_WHY_NONE)
            i++;
        double w[64], ones[64];
        if (iv >= 2 && i < k && plan_train_order(&train, &ls[i], w)) {
            ordered++;
            double sum = 0.0;
            for (int b = 0; b < iv; b++) {
                assert_true(b == 0 || w[b] >= w[b - 1]);
                sum += w[b];
                ones[b] = 1.0;
            }
            assert_true(fabs(sum - iv) <= 1e-9 * iv && w[iv - 1] >= 1.0 - 1e-12);
            skewed += w[iv - 1] > 1.05 * w[0];
            for (int t = 0; t < PLAN_NTP; t++) {
                if (!roll.fits_all[t])
                    continue;
                int c[PLAN_NTP] = {0};
                c[t] = 1;
                struct plan_roll_score flat, even, heavy;
                double train_s = 5.0 + roll.job.train_add_s; /* T_train 5 s and the updates */
                plan_roll_score(&roll, c, false, NAN, train_s, NULL, &flat);
                plan_roll_score(&roll, c, false, NAN, train_s, ones, &even);
                plan_roll_score(&roll, c, false, NAN, train_s, w, &heavy);
                assert_true(fabs(even.span_s - flat.span_s) <= 1e-12 * flat.span_s);
                assert_true(heavy.span_s >= flat.span_s * (1.0 - 1e-12));
            }
        }
        plan_train_free(&train);
        plan_roll_free(&roll);
        brute_case_free(&bc);
    }
    assert_true(ordered >= 5 && skewed >= 3); /* the draws reach both (9 and 8 of 40) */
}

/* Repeats bc's sample times over, each copy's generations a token longer than the last, so
 * that a bound over the slowest few ranks leaves most ranks out. */
static void stretch_sample(struct brute_case *bc, size_t times)
{
    size_t n = bc->p.sample.n, m = n * times;
    int64_t **cols[] = {&bc->prompt, &bc->gen, &bc->tool, &bc->turns};
    for (size_t a = 0; a < sizeof cols / sizeof *cols; a++) {
        *cols[a] = realloc(*cols[a], m * sizeof **cols[a]);
        for (size_t i = n; i < m; i++)
            (*cols[a])[i] = (*cols[a])[i % n] + (cols[a] == &bc->gen ? (int64_t)(i / n) : 0);
    }
    bc->tool_s = realloc(bc->tool_s, m * sizeof *bc->tool_s);
    bc->filtered = realloc(bc->filtered, m * sizeof *bc->filtered);
    for (size_t i = n; i < m; i++) {
        bc->tool_s[i] = bc->tool_s[i % n];
        bc->filtered[i] = bc->filtered[i % n];
    }
    bool tools = bc->p.tool_s != NULL, dynamic = bc->p.filtered != NULL;
    bc->p.sample = (struct plan_sample){m, bc->prompt, bc->gen, bc->tool, bc->turns};
    bc->p.tool_s = tools ? bc->tool_s : NULL;
    bc->p.filtered = dynamic ? bc->filtered : NULL;
}

/* Calls f(c, arg) for every multiset over {1, 2, 4, 8} of n GPUs whose sizes are usable and whose
 * largest size holds every context (plan_roll_score's domain). */
static void each_multiset(const struct plan_roll *roll, int n,
                          void (*f)(const int c[PLAN_NTP], void *arg), void *arg)
{
    for (int c8 = 0; 8 * c8 <= n; c8++)
        for (int c4 = 0; 8 * c8 + 4 * c4 <= n; c4++)
            for (int c2 = 0; 8 * c8 + 4 * c4 + 2 * c2 <= n; c2++) {
                int c[PLAN_NTP] = {n - 8 * c8 - 4 * c4 - 2 * c2, c2, c4, c8}, top = -1;
                bool ok = true;
                for (int t = 0; t < PLAN_NTP; t++)
                    if (c[t] > 0) {
                        ok = ok && roll->usable[t];
                        top = t;
                    }
                if (ok && roll->fits_all[top])
                    f(c, arg);
            }
}

struct span_check {
    struct plan_roll *roll;
    double train_s;
    int checked;
};

static void check_span_lb(const int c[PLAN_NTP], void *arg)
{
    struct span_check *k = arg;
    struct plan_roll_score sc;
    plan_roll_score(k->roll, c, false, NAN, k->train_s, NULL, &sc);
    double lb = plan_roll_span_lb(k->roll, c, sc.z_s, k->train_s);
    if (!(lb <= sc.span_s))
        print_error("counts %d %d %d %d: span bound %.17g above the span %.17g\n", c[0], c[1], c[2],
                    c[3], lb, sc.span_s);
    assert_true(lb <= sc.span_s); /* exactly: the search compares it unshaved */
    k->checked++;
}

/* plan_roll_span_lb (docs/planner.md §3.3 rule 5) is at most the span plan_roll_score gives,
 * in floating point as computed, on every multiset of random problems (tool times, dynamic
 * sampling, drains, every staleness), with samples both small (every rank computed) and large
 * enough that most ranks are left out of it. */
static void test_span_bound_random(void **state)
{
    (void)state;
    int partial = 0, drained = 0, checked = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        struct brute_case bc;
        brute_case_make(&bc, &presets, &settings, seed, 32);
        if (seed % 2 == 0)
            stretch_sample(&bc, 8);
        struct cost_shape sh;
        struct plan_roll roll;
        roll_of(&bc, bc.p.filtered, &sh, &roll);
        struct span_check k = {&roll, 0.5 + (double)(seed % 7), 0};
        for (int n = 1; n <= 16; n++)
            each_multiset(&roll, n, check_span_lb, &k);
        partial += roll.tail_n > 0 && roll.tail_n < roll.m;
        drained += roll.turn_n > 0 && roll.turn_n < roll.m;
        checked += k.checked;
        plan_roll_free(&roll);
        brute_case_free(&bc);
    }
    assert_true(checked > 1000);
    assert_true(partial > 0 && drained > 0);
}

static void test_dynamic_sampling_rolls_out_more(void **state)
{
    (void)state;
    struct brute_case bc;
    brute_case_make(&bc, &presets, &settings, 7, 32);
    const struct libra_config *cfg = &bc.cfg;
    bool *half = calloc(bc.p.sample.n, sizeof *half);
    for (size_t i = 0; i < bc.p.sample.n; i++) /* every other group dropped */
        half[i] = i / (size_t)cfg->rl.samples % 2 == 1;
    double work[2];
    for (int with = 0; with < 2; with++) {
        struct cost_shape sh;
        struct plan_roll roll;
        roll_of(&bc, with ? half : NULL, &sh, &roll);
        assert_true(roll.job.kept_share == (with ? plan_kept_share(&bc.p.sample, half) : 1.0));
        int c[PLAN_NTP] = {0, 0, 0, 1};
        struct plan_roll_score sc;
        plan_roll_score(&roll, c, false, NAN, 1.0, NULL, &sc);
        work[with] = sc.work_s;
        plan_roll_free(&roll);
    }
    assert_float_equal(work[1], work[0] / plan_kept_share(&bc.p.sample, half), 1e-9 * work[0]);
    free(half);
    brute_case_free(&bc);
}

/* Groups of the sample by their longest generation, ascending (a group: rl.samples in a row). */
static int by_longest(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* An async step's span waits for the dropped groups' replacements, each after the group it
 * replaces, and the last generation is a kept group's: with three groups in four dropped (more
 * than two generations for the neediest place), dropping the groups with the longest
 * generations takes longer than dropping as many of the shortest, at the same kept share. */
static void test_a_replacement_waits_for_the_group_dropped(void **state)
{
    (void)state;
    struct brute_case bc;
    brute_case_make(&bc, &presets, &settings, 7, 32);
    bc.cfg.rl.max_staleness = 0; /* each batch's regenerations in its own step */
    bc.cfg.rl.sync_interval = 1;
    bc.p.tool_s = NULL; /* a trajectory's latency its generation's */
    size_t n = bc.p.sample.n, samples = (size_t)bc.cfg.rl.samples, groups = n / samples;
    int64_t(*order)[2] = calloc(groups, sizeof *order); /* longest generation, group */
    for (size_t g = 0; g < groups; g++) {
        order[g][1] = (int64_t)g;
        for (size_t i = g * samples; i < (g + 1) * samples; i++)
            if (bc.p.sample.generated_tokens[i] > order[g][0])
                order[g][0] = bc.p.sample.generated_tokens[i];
    }
    qsort(order, groups, sizeof *order, by_longest);
    double span[2]; /* dropping the shortest three quarters, the longest */
    bool *drop = calloc(n, sizeof *drop);
    for (int longest = 0; longest < 2; longest++) {
        for (size_t r = 0; r < groups; r++)
            for (size_t i = 0; i < samples; i++)
                drop[(size_t)order[r][1] * samples + i] =
                    longest ? r >= groups / 4 : r < groups - groups / 4;
        struct cost_shape sh;
        struct plan_roll roll;
        roll_of(&bc, drop, &sh, &roll);
        int c[PLAN_NTP] = {0, 0, 0, 1};
        struct plan_roll_score sc;
        plan_roll_score(&roll, c, false, NAN, 1.0, NULL, &sc);
        span[longest] = sc.span_s;
        plan_roll_free(&roll);
    }
    assert_true(span[1] > span[0]);
    free(drop);
    free(order);
    brute_case_free(&bc);
}

/* A colocated step's rollout is the mean over sample batches of their rounds' makespans as
 * dynamic sampling expects them (plan/sampling.h): one round without it or when every group is
 * kept; more with either rule when some are dropped. */
static void test_colocated_rollout_charges_the_rounds(void **state)
{
    (void)state;
    struct brute_case bc;
    brute_case_make(&bc, &presets, &settings, 7, 32);
    bool *half = calloc(bc.p.sample.n, sizeof *half);
    for (size_t i = 0; i < bc.p.sample.n; i++) /* every other group dropped */
        half[i] = i / (size_t)bc.cfg.rl.samples % 2 == 1;
    const enum spec_dynamic_sampling modes[] = {SPEC_DS_OFF, SPEC_DS_REGENERATE, SPEC_DS_GEN_BATCH};
    double t[3][2]; /* by mode, without and with the dropped groups */
    bc.cfg.rl.gen_batch_factor = 1;
    for (int m = 0; m < 3; m++)
        for (int with = 0; with < 2; with++) {
            bc.cfg.rl.dynamic_sampling = modes[m];
            struct cost_shape sh;
            struct plan_roll roll;
            roll_of(&bc, with ? half : NULL, &sh, &roll);
            assert_float_equal(roll.rounds,
                               plan_expected_rounds(&roll.job.sampling, roll.job.kept_share), 0);
            int c[PLAN_NTP] = {0, 0, 0, 1};
            struct plan_roll_score sc;
            plan_roll_score(&roll, c, true, NAN, 1.0, NULL, &sc);
            t[m][with] = sc.t_s;
            plan_roll_free(&roll);
        }
    assert_float_equal(t[0][1], t[0][0], 0); /* off: the batch once */
    assert_float_equal(t[1][0], t[0][0], 0); /* everything kept: one round */
    assert_float_equal(t[2][0], t[0][0], 0); /* a generation batch of one batch */
    assert_true(t[1][1] > t[0][0] && t[2][1] > t[0][0]);
    bc.cfg.rl.gen_batch_factor = 3; /* three batches a round: more work, fewer rounds */
    struct cost_shape sh;
    struct plan_roll roll;
    roll_of(&bc, half, &sh, &roll);
    struct plan_sampling one = roll.job.sampling;
    one.factor = 1;
    assert_true(roll.rounds < plan_expected_rounds(&one, roll.job.kept_share));
    plan_roll_free(&roll);
    free(half);
    brute_case_free(&bc);
}

/* With plan.gap_tolerance, the plan is within the tolerance of the brute force's optimum and
 * its stated gap covers the real one. */
static void test_gap_tolerance_bounds_the_plan(void **state)
{
    (void)state;
    const double tol = 0.05;
    int looser = 0;
    for (uint64_t seed = 1; seed <= 80; seed++) {
        struct brute_case bc;
        brute_case_make(&bc, &presets, &settings, seed, 32);
        bc.cfg.plan.gap_tolerance = tol;
        struct plan_result r;
        solve_ok(&bc.p, &r);
        struct brute_best b;
        brute_solve(&bc, &b);
        assert_int_equal(r.feasible, b.found);
        if (b.found) {
            assert_true(r.step_s >= b.obj * (1.0 - 1e-12));
            assert_true(r.step_s <= b.obj * (1.0 + tol) * (1.0 + 1e-12));
            assert_true(r.stats.gap >= (r.step_s - b.obj) / r.step_s - 1e-12);
            assert_true(r.stats.gap <= tol / (1.0 + tol) + 1e-15);
            looser += r.step_s > b.obj * (1.0 + 1e-9);
        }
        check_stats(&r);
        plan_result_free(&r);
        brute_case_free(&bc);
    }
    print_message("tolerance %.2f: %d of 80 plans above the optimum\n", tol, looser);
}

static void test_invariants_random(void **state)
{
    for (uint64_t seed = 1000; seed < 1060; seed++) {
        struct brute_case bc;
        brute_case_make(&bc, &presets, &settings, seed, 128);
        struct plan_result r;
        solve_ok(&bc.p, &r);
        check_invariants(&bc, &r);
        check_stats(&r);
        plan_result_free(&r);
        brute_case_free(&bc);
    }
}

/* ---- pins ----------------------------------------------------------------------------------- */

/* Solves bc pinned to split n_train with layout l (and counts when given). */
static void solve_pinned(struct brute_case *bc, int n_train, const struct plan_train_layout *l,
                         const int *counts, struct plan_result *r)
{
    struct plan_pin pin = {n_train, l, counts};
    bc->p.pin = &pin;
    solve_ok(&bc->p, r);
    bc->p.pin = NULL;
}

/* Pinned to the optimum's split and layout, the search finds the optimum again; pinned to its
 * counts too, it scores them as the search did; pinned elsewhere, it is never better and keeps
 * the pin. */
static void test_pin_restricts_the_space(void **state)
{
    int pinned_elsewhere = 0;
    for (uint64_t seed = 2000; seed < 2040; seed++) {
        struct brute_case bc;
        brute_case_make(&bc, &presets, &settings, seed, 64);
        bc.cfg.plan.mode = SPEC_PLAN_ASYNC;
        struct plan_result r, same, scored;
        solve_ok(&bc.p, &r);
        if (!r.feasible) {
            brute_case_free(&bc);
            continue;
        }
        solve_pinned(&bc, r.n_train, &r.train, NULL, &same);
        assert_true(same.feasible);
        assert_memory_equal(same.counts, r.counts, sizeof r.counts);
        assert_true(same.step_s == r.step_s);
        solve_pinned(&bc, r.n_train, &r.train, r.counts, &scored);
        assert_true(scored.feasible && scored.step_s == r.step_s);
        int one[PLAN_NTP] = {r.n_rollout, 0, 0, 0}; /* every rollout GPU a TP1 instance */
        struct plan_result other;
        solve_pinned(&bc, r.n_train, &r.train, one, &other);
        if (other.feasible) {
            assert_memory_equal(other.counts, one, sizeof one);
            assert_true(other.step_s >= r.step_s);
            pinned_elsewhere++;
        }
        plan_result_free(&r);
        plan_result_free(&same);
        plan_result_free(&scored);
        plan_result_free(&other);
        brute_case_free(&bc);
    }
    assert_true(pinned_elsewhere > 0);
}

/* ---- bad input and infeasible problems ------------------------------------------------------ */

/* A fixed, feasible case to vary. */
static void base_case(struct brute_case *bc)
{
    brute_case_make(bc, &presets, &settings, 7, 32);
    struct libra_config *c = &bc->cfg;
    c->cluster.gpus = 32;
    c->cluster.gpus_per_node = 8;
    c->plan = (struct spec_plan_config){.mode = SPEC_PLAN_ASYNC,
                                        .time_limit_s = 10,
                                        .min_train_gpus = 8,
                                        .min_rollout_gpus = 8,
                                        .granularity_gpus = 8,
                                        .cp_min_seq_tokens = 16384,
                                        .min_tp_sizes = 1};
    c->ehp.enabled = false;
}

/* Tool time only lengthens trajectories and holds slots longer: the optimum cannot get faster,
 * and when every trajectory waits tool_s on tools, T_r is at least tool_s / (k + 1) (the
 * fixed point is at least the least latency over k + 1). */
static void test_tool_time_slows_rollout(void **state)
{
    (void)state;
    struct brute_case bc;
    base_case(&bc);
    bc.p.tool_s = NULL;
    struct plan_result without, with;
    struct libra_error err = {0};
    assert_int_equal(plan_solve(&bc.p, &without, &err), 0);
    const double tool_s = 600.0;
    for (size_t i = 0; i < bc.p.sample.n; i++)
        bc.tool_s[i] = tool_s;
    bc.p.tool_s = bc.tool_s;
    assert_int_equal(plan_solve(&bc.p, &with, &err), 0);
    assert_true(without.feasible && with.feasible);
    assert_true(with.step_s >= without.step_s);
    assert_true(with.rollout_s >= tool_s / (bc.cfg.rl.max_staleness + 1));
    assert_false(with.train_bound);
    plan_result_free(&without);
    plan_result_free(&with);
    brute_case_free(&bc);
}

/* A bounded tool pool charges every trajectory rolled out its time: an async step is at least
 * B'·pool_s (the fleet term), a colocated one rolls out for at least B·pool_s, and the
 * plan reports the term. */
static void test_tool_pool_bounds_the_step(void **state)
{
    (void)state;
    for (int colocated = 0; colocated < 2; colocated++) {
        struct brute_case bc;
        base_case(&bc);
        bc.cfg.plan.mode = colocated ? SPEC_PLAN_COLOCATED : SPEC_PLAN_ASYNC;
        struct plan_result without, with;
        struct libra_error err = {0};
        bc.p.pool_s = 0.0;
        assert_int_equal(plan_solve(&bc.p, &without, &err), 0);
        double per_step =
            bc.cfg.rl.batch_trajectories / plan_kept_share(&bc.p.sample, bc.p.filtered);
        bc.p.pool_s = 4.0 * without.step_s / per_step; /* far beyond the fleet's work */
        assert_int_equal(plan_solve(&bc.p, &with, &err), 0);
        assert_true(without.feasible && with.feasible);
        if (colocated) {
            assert_true(with.rollout_s >= bc.cfg.rl.batch_trajectories * bc.p.pool_s);
        } else {
            assert_true(without.async.pool_s == 0.0);
            assert_close(with.async.pool_s, per_step * bc.p.pool_s, 1e-9 * with.async.pool_s);
            assert_true(with.rollout_s >= with.async.pool_s);
            /* the pool itself, or the span whose chain waits for it batch by batch */
            const char *bound = plan_async_bound(&with);
            assert_true(strcmp(bound, "tool pool") == 0 || strcmp(bound, "span") == 0);
        }
        assert_true(with.step_s > 3.0 * without.step_s);
        plan_result_free(&without);
        plan_result_free(&with);
        brute_case_free(&bc);
    }
}

static void expect_einval(struct brute_case *bc, const char *needle)
{
    struct plan_result r;
    struct libra_error err = {0};
    assert_int_equal(plan_solve(&bc->p, &r, &err), LIBRA_EINVAL);
    if (!strstr(err.msg, needle))
        print_error("message '%s' lacks '%s'\n", err.msg, needle);
    assert_non_null(strstr(err.msg, needle));
    plan_result_free(&r);
}

static void test_bad_input(void **state)
{
    struct brute_case bc;
    base_case(&bc);
    bc.p.sample.n = (size_t)bc.cfg.rl.batch_trajectories - 1;
    expect_einval(&bc, "fewer than one batch");
    bc.p.sample.n = (size_t)bc.cfg.rl.batch_trajectories;
    bc.gen[3] = 0;
    expect_einval(&bc, "trajectory 3");
    bc.gen[3] = 100;
    bc.tool[2] = -1;
    expect_einval(&bc, "trajectory 2");
    bc.tool[2] = 0;
    bc.p.tool_s = bc.tool_s;
    bc.tool_s[4] = -1.0;
    expect_einval(&bc, "trajectory 4 of the length sample has an impossible tool time");
    bc.tool_s[4] = NAN;
    expect_einval(&bc, "trajectory 4");
    bc.tool_s[4] = 0.0;
    bc.p.pool_s = -1.0;
    expect_einval(&bc, "tool pool load is impossible");
    bc.p.pool_s = INFINITY;
    expect_einval(&bc, "tool pool load is impossible");
    bc.p.pool_s = 0.0;
    snprintf(bc.cfg.plan.tp_pattern, sizeof bc.cfg.plan.tp_pattern, "1,3");
    expect_einval(&bc, "plan.tp_pattern");
    snprintf(bc.cfg.plan.tp_pattern, sizeof bc.cfg.plan.tp_pattern, "4,2");
    expect_einval(&bc, "a node has 8");
    brute_case_free(&bc);
}

static void expect_infeasible(struct brute_case *bc, enum plan_why why)
{
    struct plan_result r;
    solve_ok(&bc->p, &r);
    assert_false(r.feasible);
    if (r.why != why)
        print_error("why: %s\n", plan_why_text(r.why));
    assert_int_equal(r.why, why);
    plan_result_free(&r);
}

static void test_infeasible_names_constraint(void **state)
{
    struct brute_case bc;
    base_case(&bc);
    bc.cfg.plan.min_train_gpus = 28;
    expect_infeasible(&bc, PLAN_WHY_SPLIT);
    bc.cfg.plan.min_train_gpus = 8;
    bc.cfg.plan.min_tp_sizes = 2;
    bc.cfg.plan.homogeneous_rollout = true;
    expect_infeasible(&bc, PLAN_WHY_HOMOGENEOUS);
    bc.cfg.plan.homogeneous_rollout = false;
    bc.cfg.plan.min_tp_sizes = 4;
    bc.cfg.cluster.gpus_per_node = 2;
    bc.cfg.plan.granularity_gpus = 2;
    expect_infeasible(&bc, PLAN_WHY_TP_SIZES);
    brute_case_free(&bc);
}

/* A budget that stops at once returns the best so far with a proven gap, or no plan. */
static bool stop_now(void *arg)
{
    (void)arg;
    return true;
}

static void test_budget_stop(void **state)
{
    struct brute_case bc;
    base_case(&bc);
    bc.cfg.cluster.gpus = 1024;
    bc.p.should_stop = stop_now;
    struct plan_result r;
    solve_ok(&bc.p, &r);
    if (r.feasible) {
        assert_true(r.stats.stopped);
        assert_true(r.stats.gap >= 0.0);
    } else {
        assert_int_equal(r.why, PLAN_WHY_BUDGET_STOP);
    }
    plan_result_free(&r);
    brute_case_free(&bc);
}

/* The colocated switch gathers what a GPU lacks of its rollout shard: a dense layout holds
 * 1/(TP·PP) of the weights; under EP a GPU holds 1/EP of the experts and 1/TP of the rest, and
 * an EP group wider than a node gathers over the NICs. */
static void test_reshard_counts_what_a_gpu_holds(void **state)
{
    (void)state;
    const struct spec_hardware *hw = spec_hardware_find(&presets, "h100-sxm");
    struct cost_shape moe;
    assert_int_equal(cost_shape_init(&moe, spec_model_find(&presets, "qwen3-30b-a3b")), 0);
    const struct cost_lifecycle_params *lp = &settings.lifecycle;
    struct plan_train_layout dense = {.tp = 4, .pp = 2, .cp = 1, .dp = 1, .ep = 1};
    assert_true(plan_train_reshard_s(&dense, &settings, &moe, hw, 8, 8) ==
                cost_reshard_s(lp, &moe, hw, 8, 8, false));
    struct plan_train_layout ep = {.tp = 2, .pp = 1, .cp = 1, .dp = 4, .ep = 8};
    double experts = moe.layers * moe.experts * moe.expert_params;
    double shards = moe.params_total / ((moe.params_total - experts) / 2.0 + experts / 8.0);
    assert_close(plan_train_reshard_s(&ep, &settings, &moe, hw, 8, 8),
                 cost_reshard_s(lp, &moe, hw, shards, 8, false), 1e-12);
    ep.dp = 8;
    ep.ep = 16; /* two nodes' worth */
    shards = moe.params_total / ((moe.params_total - experts) / 2.0 + experts / 16.0);
    assert_close(plan_train_reshard_s(&ep, &settings, &moe, hw, 8, 8),
                 cost_reshard_s(lp, &moe, hw, shards, 8, true), 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_differential_small_clusters),
        cmocka_unit_test(test_gap_tolerance_bounds_the_plan),
        cmocka_unit_test(test_lam_min_is_the_sorted_least_latencies),
        cmocka_unit_test(test_async_terms),
        cmocka_unit_test(test_train_order),
        cmocka_unit_test(test_span_bound_random),
        cmocka_unit_test(test_dynamic_sampling_rolls_out_more),
        cmocka_unit_test(test_a_replacement_waits_for_the_group_dropped),
        cmocka_unit_test(test_colocated_rollout_charges_the_rounds),
        cmocka_unit_test(test_invariants_random),
        cmocka_unit_test(test_pin_restricts_the_space),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_tool_time_slows_rollout),
        cmocka_unit_test(test_tool_pool_bounds_the_step),
        cmocka_unit_test(test_infeasible_names_constraint),
        cmocka_unit_test(test_budget_stop),
        cmocka_unit_test(test_reshard_counts_what_a_gpu_holds),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
