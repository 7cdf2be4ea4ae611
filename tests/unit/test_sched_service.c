/*
 * Tests of what attained service and earlier attempts say (src/sched/service.c): the
 * population's remaining tokens past a point, at evenly spaced ranks; a prompt's last attempts;
 * the window that forgets the oldest (its sorted copy against a sort of the ring after every
 * learn, ties and all); the log-normal through a mean and a p90; every source's points
 * ascending, and the expected cost over them the mean of sched_cost at each.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/cost.h"
#include "sched/service.h"
#include "util/rng.h"

static double mean_of(const struct sched_dist *d)
{
    return sched_dist_mean(d);
}

static void test_population_past_the_attained_tokens(void **state)
{
    struct sched_service s;
    sched_service_init(&s, 16);
    struct sched_dist d;
    sched_service_population(&s, 0, &d);
    assert_int_equal(d.n, 0); /* nothing learnt */
    for (int k = 1; k <= 16; k++)
        sched_service_learn(&s, 7, 100.0 * k); /* totals 100 .. 1600 */
    sched_service_population(&s, 0, &d);
    assert_int_equal(d.n, SCHED_DIST_POINTS);
    for (int j = 0; j < d.n; j++) /* ranks (j + 0.5) / 8 of 16: 1, 3, 5, ... -> 200, 400, ... */
        assert_close(d.tokens[j], 200.0 * (j + 1), 1e-9);
    assert_close(mean_of(&d), 900, 1e-9);
    sched_service_population(&s, 1450, &d); /* only 1500 and 1600 are above: 50 and 150 left */
    assert_int_equal(d.n, 2);
    assert_close(d.tokens[0], 50, 1e-9);
    assert_close(d.tokens[1], 150, 1e-9);
    sched_service_population(&s, 1600, &d); /* it has outlived every total */
    assert_int_equal(d.n, 0);
    sched_service_free(&s);
}

static void test_attempts_per_prompt_and_the_window(void **state)
{
    struct sched_service s;
    sched_service_init(&s, 1); /* one prompt's attempts kept */
    struct sched_dist d;
    assert_int_equal(sched_service_prompt(&s, 3, 0, &d), 0);
    for (int k = 0; k < SCHED_SERVICE_ATTEMPTS + 2; k++) /* the first two fall out */
        sched_service_learn(&s, 3, k < 2 ? 99999 : 1000 + k);
    sched_service_learn(&s, 4, 5); /* a second prompt: past the cap, not kept */
    assert_int_equal(sched_service_prompt(&s, 4, 0, &d), 0);
    assert_int_equal(sched_service_prompt(&s, 3, 0, &d), SCHED_SERVICE_ATTEMPTS);
    for (int j = 0; j < d.n; j++)
        assert_true(d.tokens[j] >= 1002 && d.tokens[j] <= 1009);
    assert_int_equal(sched_service_prompt(&s, 3, 1007.5, &d), 2); /* 1008 and 1009 */
    assert_close(d.tokens[0], 0.5, 1e-9);
    assert_close(d.tokens[1], 1.5, 1e-9);
    for (int k = 0; k < SCHED_SERVICE_WINDOW; k++) /* the population forgets the oldest */
        sched_service_learn(&s, 4, 10);
    sched_service_population(&s, 10, &d);
    assert_int_equal(d.n, 0);
    sched_service_free(&s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void test_sorted_window_equals_the_sorted_ring(void **state)
{
    static struct sched_service s;
    static double want[SCHED_SERVICE_WINDOW];
    sched_service_init(&s, 4);
    struct rng r = rng_keyed(42, 0, 0, 0);
    for (int k = 0; k < 3 * SCHED_SERVICE_WINDOW; k++) {
        /* few distinct values, so that leaving and entering totals often tie */
        double total = k % 7 == 0 ? 500 : floor(rng_uniform(&r) * 40) * 25;
        sched_service_learn(&s, (uint64_t)k % 5, total);
        memcpy(want, s.ring, s.n * sizeof *want);
        qsort(want, s.n, sizeof *want, cmp_double);
        assert_int_equal(s.n, k + 1 < SCHED_SERVICE_WINDOW ? k + 1 : SCHED_SERVICE_WINDOW);
        assert_memory_equal(s.sorted, want, s.n * sizeof *want);
    }
    sched_service_free(&s);
}

static void test_lognormal_through_mean_and_p90(void **state)
{
    struct sched_dist d;
    sched_dist_lognormal(0, 10, &d);
    assert_int_equal(d.n, 0);             /* no estimate */
    sched_dist_lognormal(1000, 1000, &d); /* no spread: every point at the mean */
    assert_int_equal(d.n, SCHED_DIST_POINTS);
    for (int j = 0; j < d.n; j++)
        assert_close(d.tokens[j], 1000, 1e-6);
    sched_dist_lognormal(1000, 2500, &d);
    for (int j = 1; j < d.n; j++)
        assert_true(d.tokens[j] > d.tokens[j - 1]);
    /* the points' mean approaches the mean from below (eight points miss the far tail) */
    assert_true(mean_of(&d) < 1000 && mean_of(&d) > 800);
}

/* True when d's points are ascending (struct sched_dist's promise, which sched_expected_cost
 * relies on). */
static bool ascending(const struct sched_dist *d)
{
    for (int j = 1; j < d->n; j++)
        if (d->tokens[j] < d->tokens[j - 1])
            return false;
    return true;
}

/*
 * Every source's points are ascending, and the expected cost over them is the mean of
 * sched_cost at each point: with and without a deadline, before it and past it, with and
 * without a move.
 */
static void test_expected_cost_is_the_mean_cost(void **state)
{
    struct sched_service s;
    sched_service_init(&s, 16);
    struct rng r = rng_keyed(3, 0, 0, 0);
    for (int i = 0; i < 300; i++)
        sched_service_learn(&s, (uint64_t)(i % 4), 100.0 + 20000.0 * rng_uniform(&r));
    struct sched_dist d[3];
    sched_service_population(&s, 500, &d[0]);
    assert_int_equal(sched_service_prompt(&s, 2, 500, &d[1]) > 0, true);
    sched_dist_lognormal(3000, 9000, &d[2]);
    const struct cost_rate rate = {
        .token_s = 0.02, .gpu_token_s = 0.01, .move_s = 3, .move_gpu_s = 12};
    const double deadlines[] = {0, 100, 400};
    for (int k = 0; k < 3; k++) {
        assert_true(d[k].n > 0 && ascending(&d[k]));
        for (int dl = 0; dl < 3; dl++)
            for (double elapsed = 0; elapsed < 500; elapsed += 37)
                for (int move = 0; move < 2; move++) {
                    struct sched_cost_model m = {.deadline_s = deadlines[dl], .late_gpus = 48};
                    double sum = 0;
                    for (int j = 0; j < d[k].n; j++)
                        sum +=
                            d[k].weight[j] * sched_cost(&m, &rate, d[k].tokens[j], elapsed, move);
                    double got = sched_expected_cost(&m, &rate, d[k].tokens, d[k].weight, d[k].n,
                                                     sched_dist_mean(&d[k]), elapsed, move);
                    assert_close(got, sum, 1e-9);
                }
    }
    sched_service_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_population_past_the_attained_tokens),
        cmocka_unit_test(test_attempts_per_prompt_and_the_window),
        cmocka_unit_test(test_sorted_window_equals_the_sorted_ring),
        cmocka_unit_test(test_lognormal_through_mean_and_p90),
        cmocka_unit_test(test_expected_cost_is_the_mean_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
