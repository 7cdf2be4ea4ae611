/*
 * util/stats: hand-computed cases (NumPy's linear quantiles, SciPy's spearmanr example), and
 * differential tests against naive implementations on random inputs: two-pass moments,
 * sort-then-interpolate quantiles, a naive window, O(n^2) average ranks.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"
#include "util/stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Random values; with levels > 0, drawn from that many distinct values (ties galore). */
static void fill(struct rng *r, double *v, size_t n, uint64_t levels)
{
    for (size_t i = 0; i < n; i++)
        v[i] = levels ? (double)rng_uniform_int(r, levels) : rng_normal(r) * 100.0;
}

/* ---- running moments ----------------------------------------------------------------------- */

static void test_running_vs_two_pass(void **state)
{
    enum { M = 100000 };
    static double v[M];
    struct rng r = rng_keyed(1, 0, 0, 0);
    for (size_t i = 0; i < M; i++)
        v[i] = 1e9 + rng_normal(&r); /* a large offset breaks the naive sum-of-squares */
    struct stats_running s;
    stats_running_init(&s);
    double mean = 0.0, min = v[0], max = v[0];
    for (size_t i = 0; i < M; i++) {
        stats_running_add(&s, v[i]);
        mean += v[i];
        min = fmin(min, v[i]);
        max = fmax(max, v[i]);
    }
    mean /= M;
    double ss = 0.0;
    for (size_t i = 0; i < M; i++)
        ss += (v[i] - mean) * (v[i] - mean);
    assert_int_equal(s.n, M);
    assert_close(s.mean, mean, 1e-12);
    assert_close(stats_running_variance(&s), ss / (M - 1), 1e-6);
    assert_true(s.min == min && s.max == max);
}

static void test_running_small(void **state)
{
    struct stats_running s = {0};
    assert_true(stats_running_variance(&s) == 0.0);
    stats_running_add(&s, -3.0);
    assert_true(s.min == -3.0 && s.max == -3.0 && stats_running_variance(&s) == 0.0);
    const double xs[] = {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0};
    stats_running_init(&s);
    for (size_t i = 0; i < 8; i++)
        stats_running_add(&s, xs[i]);
    assert_true(s.mean == 5.0);
    assert_close(stats_running_variance(&s), 32.0 / 7.0, 1e-15);
    assert_true(s.min == 2.0 && s.max == 9.0);
}

/* ---- quantiles ----------------------------------------------------------------------------- */

/* Values from numpy.quantile(..., method="linear"). */
static void test_quantile_hand(void **state)
{
    const double a[4] = {1.0, 2.0, 3.0, 4.0}, b[3] = {10.0, 20.0, 30.0};
    assert_true(stats_quantile_sorted(a, 4, 0.5) == 2.5);
    assert_true(stats_quantile_sorted(a, 4, 0.25) == 1.75);
    assert_true(stats_quantile_sorted(a, 4, 0.0) == 1.0);
    assert_true(stats_quantile_sorted(a, 4, 1.0) == 4.0);
    assert_true(stats_quantile_sorted(a, 4, 7.0) == 4.0);  /* clamped */
    assert_true(stats_quantile_sorted(a, 4, -1.0) == 1.0); /* clamped */
    assert_close(stats_quantile_sorted(b, 3, 0.9), 28.0, 1e-15);
    double c[5] = {7.0, 1.0, 5.0, 3.0, 9.0}; /* sorted 1 3 5 7 9; p99: h = 3.96 */
    assert_close(stats_quantile(c, 5, 0.99), 8.92, 1e-15);
    double one = 42.0;
    assert_true(stats_quantile(&one, 1, 0.3) == 42.0);
    assert_true(isnan(stats_quantile(NULL, 0, 0.5)));
    assert_true(isnan(stats_quantile_sorted(NULL, 0, 0.5)));
}

/* Selection-based quantiles equal sort-based ones exactly (same order statistics, same rule). */
static void test_quantile_differential(void **state)
{
    enum { MAX = 2000 };
    static double v[MAX], sorted[MAX], work[MAX];
    const double qs[] = {0.0, 0.01, 0.1, 0.25, 0.333, 0.5, 0.9, 0.99, 0.999, 1.0};
    struct rng r = rng_keyed(2, 0, 0, 0);
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + rng_uniform_int(&r, MAX);
        fill(&r, v, n, round % 3 == 0 ? 0 : 1 + rng_uniform_int(&r, 20));
        memcpy(sorted, v, n * sizeof *v);
        qsort(sorted, n, sizeof *v, cmp_double);
        for (size_t j = 0; j < sizeof qs / sizeof qs[0]; j++) {
            memcpy(work, v, n * sizeof *v);
            assert_true(stats_quantile(work, n, qs[j]) == stats_quantile_sorted(sorted, n, qs[j]));
        }
        size_t k = rng_uniform_int(&r, n);
        memcpy(work, v, n * sizeof *v);
        assert_true(stats_select(work, n, k) == sorted[k]);
        for (size_t i = 0; i < n; i++) /* partitioned around k */
            assert_true(i < k ? work[i] <= work[k] : work[i] >= work[k]);
    }
}

/* Sorted, reversed and constant inputs (the usual quickselect killers) stay correct and fast. */
static void test_select_adversarial(void **state)
{
    enum { M = 200000 };
    static double v[M];
    for (size_t i = 0; i < M; i++)
        v[i] = 5.0;
    assert_true(stats_quantile(v, M, 0.37) == 5.0);
    for (size_t i = 0; i < M; i++)
        v[i] = (double)i;
    assert_true(stats_select(v, M, 12345) == 12345.0);
    for (size_t i = 0; i < M; i++)
        v[i] = (double)(M - i);
    assert_true(stats_select(v, M, M / 2) == (double)(M / 2 + 1));
}

static void test_window_vs_naive(void **state)
{
    enum { W = 100, STEPS = 5000 };
    static double hist[STEPS], tail[W];
    struct stats_window w;
    stats_window_init(&w, W);
    assert_true(isnan(stats_window_quantile(&w, 0.5)));
    assert_true(isnan(stats_window_mean(&w)));
    struct rng r = rng_keyed(3, 0, 0, 0);
    for (size_t t = 0; t < STEPS; t++) {
        hist[t] = rng_exponential(&r, 1.0);
        stats_window_add(&w, hist[t]);
        if (t % 37 != 0 && t != STEPS - 1)
            continue;
        size_t held = t + 1 < W ? t + 1 : W;
        memcpy(tail, hist + t + 1 - held, held * sizeof *tail);
        double sum = 0.0;
        for (size_t i = 0; i < held; i++)
            sum += tail[i];
        qsort(tail, held, sizeof *tail, cmp_double);
        assert_int_equal(w.n, held);
        assert_close(stats_window_mean(&w), sum / (double)held, 1e-12);
        assert_true(stats_window_quantile(&w, 0.5) == stats_quantile_sorted(tail, held, 0.5));
        assert_true(stats_window_quantile(&w, 0.99) == stats_quantile_sorted(tail, held, 0.99));
        assert_true(stats_window_quantile(&w, 0.0) == tail[0]);
    }
    stats_window_free(&w);
    stats_window_free(NULL);
}

/* ---- ranks and correlation ----------------------------------------------------------------- */

static double naive_rank(const double *v, size_t n, size_t i)
{
    size_t less = 0, equal = 0;
    for (size_t j = 0; j < n; j++) {
        less += v[j] < v[i];
        equal += v[j] == v[i];
    }
    return (double)less + ((double)equal + 1.0) / 2.0;
}

static void test_ranks_vs_naive(void **state)
{
    enum { MAX = 300 };
    double v[MAX], ranks[MAX];
    struct rng r = rng_keyed(4, 0, 0, 0);
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + rng_uniform_int(&r, MAX);
        fill(&r, v, n, round % 2 ? 0 : 1 + rng_uniform_int(&r, 10));
        stats_ranks(v, n, ranks);
        for (size_t i = 0; i < n; i++)
            assert_true(ranks[i] == naive_rank(v, n, i));
    }
}

static void test_spearman(void **state)
{
    /* scipy.stats.spearmanr([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) = 0.8207826816681233 */
    const double x[5] = {1, 2, 3, 4, 5}, y[5] = {5, 6, 7, 8, 7};
    assert_close(stats_spearman(x, y, 5), 0.8207826816681233, 1e-14);
    const double up[5] = {0.1, 5.0, 7.0, 100.0, 1e6}, down[5] = {9, 8, 3, 2, -1};
    assert_true(stats_spearman(x, up, 5) == 1.0);
    assert_true(stats_spearman(x, down, 5) == -1.0);
    const double flat[5] = {3, 3, 3, 3, 3};
    assert_true(isnan(stats_spearman(x, flat, 5)));
    assert_true(isnan(stats_spearman(x, y, 1)));

    /* Differential: Pearson over naive average ranks. */
    enum { M = 200 };
    double a[M], b[M], ra[M], rb[M];
    struct rng r = rng_keyed(5, 0, 0, 0);
    for (int round = 0; round < 50; round++) {
        fill(&r, a, M, 7);
        for (size_t i = 0; i < M; i++)
            b[i] = a[i] + (double)rng_uniform_int(&r, 4); /* correlated, with ties */
        for (size_t i = 0; i < M; i++) {
            ra[i] = naive_rank(a, M, i);
            rb[i] = naive_rank(b, M, i);
        }
        assert_close(stats_spearman(a, b, M), stats_pearson(ra, rb, M), 1e-12);
    }
}

static void test_pearson_hand(void **state)
{
    const double x[4] = {1, 2, 3, 4}, y[4] = {2, 4, 5, 9};
    /* mean y = 5; deviations x: -1.5 -0.5 0.5 1.5; y: -3 -1 0 4; sxy = 11, sxx = 5, syy = 26 */
    assert_close(stats_pearson(x, y, 4), 11.0 / sqrt(5.0 * 26.0), 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_running_vs_two_pass), cmocka_unit_test(test_running_small),
        cmocka_unit_test(test_quantile_hand),       cmocka_unit_test(test_quantile_differential),
        cmocka_unit_test(test_select_adversarial),  cmocka_unit_test(test_window_vs_naive),
        cmocka_unit_test(test_ranks_vs_naive),      cmocka_unit_test(test_spearman),
        cmocka_unit_test(test_pearson_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
