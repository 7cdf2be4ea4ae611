/* Tests of dynamic sampling's rounds (src/plan/sampling.c): the round sizes the simulator
 * launches, and the planner's expected rounds against a Monte Carlo run of the same rule. */
#include <math.h>

#include "testutil.h"

#include "plan/sampling.h"
#include "util/rng.h"

static void test_round_sizes_follow_the_rule(void **state)
{
    (void)state;
    struct plan_sampling off = {.mode = SPEC_DS_OFF, .groups = 10, .factor = 3, .max_rounds = 4};
    assert_int_equal(plan_round_groups(&off, 1, 0), 10);
    assert_int_equal(plan_round_groups(&off, 2, 3), 0); /* no second round */
    off.overprovision_frac = 0.25;
    assert_int_equal(plan_round_groups(&off, 1, 0), 13); /* ceil(12.5) */

    struct plan_sampling regen = off;
    regen.mode = SPEC_DS_REGENERATE;
    assert_int_equal(plan_round_groups(&regen, 2, 6), 5); /* ceil(4 · 1.25) missing */
    assert_int_equal(plan_round_groups(&regen, 4, 9), 2);
    assert_int_equal(plan_round_groups(&regen, 5, 9), 0);  /* past rl.max_gen_batches */
    assert_int_equal(plan_round_groups(&regen, 2, 10), 0); /* full */
    assert_false(plan_round_runs_out(&regen));

    struct plan_sampling gen = {
        .mode = SPEC_DS_GEN_BATCH, .groups = 10, .factor = 3, .max_rounds = 4};
    assert_int_equal(plan_round_groups(&gen, 1, 0), 30);
    assert_int_equal(plan_round_groups(&gen, 2, 9), 30); /* a whole generation batch again */
    assert_int_equal(plan_round_groups(&gen, 2, 10), 0);
    assert_int_equal(plan_round_groups(&gen, 5, 0), 0);
    assert_int_equal(plan_round_groups(&gen, 0, 0), 0);
    assert_true(plan_round_runs_out(&gen));
}

/* Rounds of one step when every group is kept with probability keep, by the rule itself. */
static int simulate_rounds(const struct plan_sampling *p, double keep, struct rng *r)
{
    int64_t kept = 0;
    int round = 0;
    for (int64_t n; (n = plan_round_groups(p, round + 1, kept)) > 0; round++)
        for (int64_t i = 0; i < n; i++)
            kept += rng_uniform(r) < keep;
    return round;
}

/* The mean of many simulated steps lies within five standard errors of the expectation. */
static void check_expectation(const struct plan_sampling *p, double keep)
{
    enum { N = 20000 };
    struct rng r = rng_keyed(7, (uint64_t)p->mode, (uint64_t)p->groups, (uint64_t)(keep * 1e6));
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < N; i++) {
        double x = simulate_rounds(p, keep, &r);
        sum += x;
        sq += x * x;
    }
    double mean = sum / N, se = sqrt(fmax(sq / N - mean * mean, 1e-12) / N);
    double e = plan_expected_rounds(p, keep);
    if (fabs(mean - e) > 5.0 * se + 1e-6)
        fail_msg("mode %d, G %lld, keep %.2f: expected %.4f rounds, simulated %.4f (se %.4f)",
                 (int)p->mode, (long long)p->groups, keep, e, mean, se);
}

static void test_expected_rounds_match_the_rule(void **state)
{
    (void)state;
    const double keeps[] = {0.05, 0.3, 0.41, 0.7, 0.95};
    for (size_t k = 0; k < sizeof keeps / sizeof *keeps; k++) {
        check_expectation(
            &(struct plan_sampling){.mode = SPEC_DS_REGENERATE, .groups = 16, .max_rounds = 10},
            keeps[k]);
        check_expectation(
            &(struct plan_sampling){
                .mode = SPEC_DS_GEN_BATCH, .groups = 16, .factor = 3, .max_rounds = 10},
            keeps[k]);
        check_expectation(
            &(struct plan_sampling){
                .mode = SPEC_DS_GEN_BATCH, .groups = 3, .factor = 1, .max_rounds = 6},
            keeps[k]);
    }
}

/* Generations until n of `slots` groups, each regenerated until kept, have kept one: the
 * n-th smallest of `slots` geometric counts, drawn. */
static int simulate_generations(int n, int slots, double keep, struct rng *r)
{
    int counts[64] = {0}; /* how many slots first kept at generation g (capped) */
    for (int i = 0; i < slots; i++) {
        int g = 1;
        while (rng_uniform(r) >= keep && g < 63)
            g++;
        counts[g]++;
    }
    int g = 0;
    for (int seen = 0; seen < n; seen += counts[++g])
        ;
    return g;
}

static void test_regenerations_match_a_draw(void **state)
{
    (void)state;
    enum { N = 20000 };
    const int cases[][2] = {{8, 8}, {5, 8}, {1, 2}, {10, 40}, {30, 31}};
    const double keeps[] = {0.1, 0.5, 0.9};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t k = 0; k < sizeof keeps / sizeof *keeps; k++) {
            int n = cases[c][0], slots = cases[c][1];
            struct rng r = rng_keyed(11, (uint64_t)n, (uint64_t)slots, (uint64_t)k);
            double sum = 0.0, sq = 0.0;
            for (int i = 0; i < N; i++) {
                double x = simulate_generations(n, slots, keeps[k], &r);
                sum += x;
                sq += x * x;
            }
            double mean = sum / N, se = sqrt(fmax(sq / N - mean * mean, 1e-12) / N);
            double e = plan_regenerations(n, slots, keeps[k], 0);
            if (fabs(mean - e) > 5.0 * se + 1e-6)
                fail_msg("%d of %d, keep %.2f: expected %.4f generations, drawn %.4f (se %.4f)", n,
                         slots, keeps[k], e, mean, se);
        }
    /* one of two: the smaller of two geometric counts, Σ 0.25^g at keep 0.5 */
    assert_float_equal(plan_regenerations(1, 2, 0.5, 0), 4.0 / 3.0, 1e-9);
}

static void test_expected_rounds_at_the_edges(void **state)
{
    (void)state;
    struct plan_sampling gen = {
        .mode = SPEC_DS_GEN_BATCH, .groups = 512, .factor = 3, .max_rounds = 10};
    assert_float_equal(plan_expected_rounds(&gen, 1.0), 1.0, 0);
    assert_float_equal(plan_expected_rounds(&gen, 0.0), 10.0, 0); /* never full: every round */
    /* 3 · 512 groups kept at 0.41 give 630 on average, 512 lies 6.1 standard deviations below */
    assert_float_equal(plan_expected_rounds(&gen, 0.41), 1.0, 1e-8);
    assert_true(plan_expected_rounds(&gen, 0.3) > 1.9); /* 461 on average: a second round */
    /* a batch of a million groups stays cheap and exact to the rounding */
    gen.groups = 1 << 20;
    assert_float_equal(plan_expected_rounds(&gen, 0.5), 1.0, 1e-12);
    assert_float_equal(plan_expected_rounds(&gen, 1.0 / 3.0), 1.5,
                       0.01); /* mean G: short half the time */
    struct plan_sampling off = {.mode = SPEC_DS_OFF, .groups = 8, .max_rounds = 10};
    assert_float_equal(plan_expected_rounds(&off, 0.1), 1.0, 0);
    assert_float_equal(plan_regenerations(8, 8, 1.0, 0), 1.0, 0);
    assert_float_equal(plan_regenerations(8, 8, 0.5, 3),
                       1.0 + (1 - pow(0.5, 8)) + (1 - pow(0.75, 8)), 1e-12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_sizes_follow_the_rule),
        cmocka_unit_test(test_expected_rounds_match_the_rule),
        cmocka_unit_test(test_expected_rounds_at_the_edges),
        cmocka_unit_test(test_regenerations_match_a_draw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
