/*
 * util/rng: purity and stream independence, the SplitMix64 reference vector, and statistical
 * sanity of every distribution over N = 200000 draws from fixed keys.
 *
 * Tolerances come from standard errors, not taste: a sample mean must lie within Z standard
 * errors sqrt(var / N) of the true mean, a sample variance within Z standard errors
 * sqrt((m4 - var^2) / N) of the true variance (m4, the fourth central moment, estimated from
 * the sample), and a chi-square statistic with df degrees of freedom below
 * df + Z sqrt(2 df). With Z = 5 a correct generator fails a check with probability below
 * 1e-6; the keys are fixed, so the outcome is deterministic either way.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "util/rng.h"

#define N 200000
#define Z 5.0

static double draws[N];

/* ---- helpers ------------------------------------------------------------------------------- */

static void check_moments(const char *what, double mean, double var)
{
    double m = 0.0, m2 = 0.0, m4 = 0.0;
    for (size_t i = 0; i < N; i++)
        m += draws[i];
    m /= N;
    for (size_t i = 0; i < N; i++) {
        double d = (draws[i] - m) * (draws[i] - m);
        m2 += d;
        m4 += d * d;
    }
    m2 /= N - 1;
    m4 /= N;
    double mean_tol = Z * sqrt(var / N), var_tol = Z * sqrt(fabs(m4 - var * var) / N);
    if (fabs(m - mean) > mean_tol || fabs(m2 - var) > var_tol) {
        print_error("%s: mean %.6g (want %.6g +- %.3g), variance %.6g (want %.6g +- %.3g)\n", what,
                    m, mean, mean_tol, m2, var, var_tol);
        fail();
    }
}

/* Chi-square of observed counts against probabilities p over k cells (N draws in all). */
static void check_chi_square(const char *what, const uint64_t *count, const double *p, size_t k)
{
    double chi2 = 0.0, covered = 0.0;
    size_t df = k - 1;
    for (size_t i = 0; i < k; i++) {
        double expect = p[i] * N;
        assert_true(expect >= 5.0); /* the approximation needs populated cells */
        chi2 += (count[i] - expect) * (count[i] - expect) / expect;
        covered += p[i];
    }
    assert_true(fabs(covered - 1.0) < 1e-9);
    double limit = (double)df + Z * sqrt(2.0 * (double)df);
    if (chi2 > limit) {
        print_error("%s: chi-square %.1f over %zu degrees of freedom exceeds %.1f\n", what, chi2,
                    df, limit);
        fail();
    }
}

/* Poisson(lambda) probability of k. */
static double poisson_pmf(double lambda, uint64_t k)
{
    return exp((double)k * log(lambda) - lambda - lgamma((double)k + 1.0));
}

/* ---- purity and independence --------------------------------------------------------------- */

/* rng_mix64 is SplitMix64's finaliser: the published first outputs for seed 0. */
static void test_splitmix_reference(void **state)
{
    const uint64_t golden = 0x9e3779b97f4a7c15u;
    assert_int_equal(rng_mix64(golden), 0xe220a8397b1dcdafu);
    assert_int_equal(rng_mix64(2 * golden), 0x6e789e6aa1b965f4u);
    assert_int_equal(rng_mix64(3 * golden), 0x06c45d188009454fu);
}

static void test_pure_function_of_keys(void **state)
{
    struct rng a = rng_keyed(1, 10, 20, 30), b = rng_keyed(1, 10, 20, 30);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(rng_u64(&a), rng_u64(&b));
    /* The i-th value depends only on (key, i): restarting at a counter reproduces it. */
    struct rng c = rng_keyed(1, 10, 20, 30);
    c.ctr = 500;
    struct rng d = rng_keyed(1, 10, 20, 30);
    for (int i = 0; i < 500; i++)
        rng_u64(&d);
    assert_int_equal(rng_u64(&c), rng_u64(&d));
    /* Distributions consume the stream deterministically too. */
    struct rng e = rng_keyed(2, 0, 0, 0), f = rng_keyed(2, 0, 0, 0);
    for (int i = 0; i < 1000; i++) {
        assert_true(rng_gamma(&e, 0.7, 2.0) == rng_gamma(&f, 0.7, 2.0));
        assert_int_equal(rng_poisson(&e, 40.0), rng_poisson(&f, 40.0));
    }
}

static void test_hash_sensitive_to_order_and_length(void **state)
{
    const uint64_t ab[2] = {1, 2}, ba[2] = {2, 1}, a0[2] = {1, 0};
    assert_int_not_equal(rng_hash(0, ab, 2), rng_hash(0, ba, 2));
    assert_int_not_equal(rng_hash(0, ab, 1), rng_hash(0, a0, 2));
    assert_int_not_equal(rng_hash(0, ab, 2), rng_hash(1, ab, 2));
    assert_int_not_equal(rng_hash(0, NULL, 0), rng_hash(1, NULL, 0));
    struct rng x = rng_keyed(7, 1, 2, 0), y = rng_keyed(7, 2, 1, 0);
    assert_int_not_equal(x.key, y.key);
}

/* Neighbouring keys give uncorrelated streams with no shared values. */
static void test_streams_independent(void **state)
{
    enum { M = 100000 };
    static uint64_t va[M];
    struct rng a = rng_keyed(1, 5, 0, 0), b = rng_keyed(1, 6, 0, 0);
    double sxy = 0.0, sx = 0.0, sy = 0.0, sxx = 0.0, syy = 0.0;
    for (size_t i = 0; i < M; i++) {
        va[i] = rng_u64(&a);
        uint64_t vb = rng_u64(&b);
        assert_int_not_equal(va[i], vb);
        double x = (double)(va[i] >> 11) * 0x1.0p-53, y = (double)(vb >> 11) * 0x1.0p-53;
        sx += x;
        sy += y;
        sxx += x * x;
        syy += y * y;
        sxy += x * y;
    }
    double r = (sxy - sx * sy / M) / sqrt((sxx - sx * sx / M) * (syy - sy * sy / M));
    assert_true(fabs(r) < Z / sqrt(M)); /* the standard error of r is 1 / sqrt(M) */
    /* Bits: each of the 64 output bits is set about half the time in stream a. */
    for (int bit = 0; bit < 64; bit++) {
        size_t ones = 0;
        for (size_t i = 0; i < M; i++)
            ones += (va[i] >> bit) & 1;
        assert_true(fabs((double)ones - M / 2.0) < Z * sqrt(M / 4.0));
    }
}

/* ---- distributions ------------------------------------------------------------------------- */

static void test_uniform(void **state)
{
    enum { BINS = 100 };
    uint64_t count[BINS] = {0};
    double p[BINS];
    struct rng r = rng_keyed(11, 0, 0, 0);
    for (size_t i = 0; i < N; i++) {
        draws[i] = rng_uniform(&r);
        assert_true(draws[i] >= 0.0 && draws[i] < 1.0);
        count[(size_t)(draws[i] * BINS)]++;
    }
    for (size_t i = 0; i < BINS; i++)
        p[i] = 1.0 / BINS;
    check_moments("uniform", 0.5, 1.0 / 12.0);
    check_chi_square("uniform", count, p, BINS);
}

static void test_uniform_int(void **state)
{
    enum { K = 7 };
    uint64_t count[K] = {0};
    double p[K];
    struct rng r = rng_keyed(12, 0, 0, 0);
    for (size_t i = 0; i < N; i++) {
        uint64_t x = rng_uniform_int(&r, K);
        assert_true(x < K);
        count[x]++;
    }
    for (size_t i = 0; i < K; i++)
        p[i] = 1.0 / K;
    check_chi_square("uniform_int(7)", count, p, K);
    assert_int_equal(rng_uniform_int(&r, 1), 0);
    assert_int_equal(rng_uniform_int(&r, 0), 0);

    /* n near 2/3 of 2^64: plain x % n would land below 2^64 - n (about n / 2) with probability
     * 2/3; without bias it is 1/2. */
    const uint64_t n = 0xaaaaaaaaaaaaaaaau, low = 0 - n;
    size_t below = 0;
    for (size_t i = 0; i < N; i++) {
        uint64_t x = rng_uniform_int(&r, n);
        assert_true(x < n);
        below += x < low;
    }
    double want = (double)low / (double)n;
    assert_true(fabs((double)below / N - want) < Z * sqrt(want * (1.0 - want) / N));
}

static void test_normal_and_lognormal(void **state)
{
    enum { BINS = 18 };
    uint64_t count[BINS] = {0};
    double p[BINS];
    struct rng r = rng_keyed(13, 0, 0, 0);
    /* Cells: (-inf, -4), [-4, -3.5), ..., [3.5, 4), [4, inf) */
    for (size_t i = 0; i < N; i++) {
        draws[i] = rng_normal(&r);
        double cell = floor((draws[i] + 4.0) * 2.0) + 1.0;
        count[cell < 0.0 ? 0 : cell > BINS - 1 ? BINS - 1 : (size_t)cell]++;
    }
    check_moments("normal", 0.0, 1.0);
    for (size_t i = 0; i < BINS; i++) {
        double lo = i == 0 ? -INFINITY : -4.0 + 0.5 * (double)(i - 1);
        double hi = i == BINS - 1 ? INFINITY : -4.0 + 0.5 * (double)i;
        p[i] = 0.5 * (erfc(-hi / sqrt(2.0)) - erfc(-lo / sqrt(2.0)));
    }
    /* The extreme cells hold ~6 draws in expectation; merge them into their neighbours. */
    count[1] += count[0];
    p[1] += p[0];
    count[BINS - 2] += count[BINS - 1];
    p[BINS - 2] += p[BINS - 1];
    check_chi_square("normal", count + 1, p + 1, BINS - 2);

    const double mu = 0.5, sigma = 0.5;
    for (size_t i = 0; i < N; i++)
        draws[i] = rng_lognormal(&r, mu, sigma);
    check_moments("lognormal", exp(mu + sigma * sigma / 2.0),
                  (exp(sigma * sigma) - 1.0) * exp(2.0 * mu + sigma * sigma));
}

static void test_exponential(void **state)
{
    struct rng r = rng_keyed(14, 0, 0, 0);
    for (size_t i = 0; i < N; i++) {
        draws[i] = rng_exponential(&r, 2.0);
        assert_true(draws[i] >= 0.0 && isfinite(draws[i]));
    }
    check_moments("exponential(2)", 0.5, 0.25);
}

static void test_gamma(void **state)
{
    const double shapes[] = {0.3, 1.0, 3.0, 50.0}, scale = 2.0;
    struct rng r = rng_keyed(15, 0, 0, 0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t i = 0; i < N; i++) {
            draws[i] = rng_gamma(&r, shapes[s], scale);
            assert_true(draws[i] >= 0.0);
        }
        check_moments("gamma", shapes[s] * scale, shapes[s] * scale * scale);
    }
}

static void test_beta(void **state)
{
    const double ab[][2] = {{2.0, 5.0}, {0.5, 0.5}, {1.0, 1.0}};
    struct rng r = rng_keyed(16, 0, 0, 0);
    for (size_t s = 0; s < sizeof ab / sizeof ab[0]; s++) {
        double a = ab[s][0], b = ab[s][1];
        for (size_t i = 0; i < N; i++) {
            draws[i] = rng_beta(&r, a, b);
            assert_true(draws[i] >= 0.0 && draws[i] <= 1.0);
        }
        check_moments("beta", a / (a + b), a * b / ((a + b) * (a + b) * (a + b + 1.0)));
    }
}

static void test_bernoulli(void **state)
{
    struct rng r = rng_keyed(17, 0, 0, 0);
    for (size_t i = 0; i < N; i++)
        draws[i] = rng_bernoulli(&r, 0.3);
    check_moments("bernoulli(0.3)", 0.3, 0.21);
    assert_false(rng_bernoulli(&r, 0.0));
    assert_true(rng_bernoulli(&r, 1.0));
}

/* Chi-square of Poisson(lambda) draws over cells [lo, hi) and the two tails. */
static void check_poisson_pmf(struct rng *r, double lambda, uint64_t lo, uint64_t hi)
{
    enum { MAX_CELLS = 64 };
    uint64_t count[MAX_CELLS] = {0};
    double p[MAX_CELLS] = {0};
    size_t cells = hi - lo + 2;
    assert_true(cells <= MAX_CELLS);
    for (size_t i = 0; i < N; i++) {
        uint64_t k = rng_poisson(r, lambda);
        draws[i] = (double)k;
        count[k < lo ? 0 : k >= hi ? cells - 1 : k - lo + 1]++;
    }
    double inner = 0.0, below = 0.0;
    for (uint64_t k = 0; k < lo; k++)
        below += poisson_pmf(lambda, k);
    for (uint64_t k = lo; k < hi; k++)
        inner += p[k - lo + 1] = poisson_pmf(lambda, k);
    p[0] = below;
    p[cells - 1] = 1.0 - below - inner;
    check_moments("poisson", lambda, lambda);
    check_chi_square("poisson", count + (lo == 0), p + (lo == 0), cells - (lo == 0));
}

static void test_poisson(void **state)
{
    struct rng r = rng_keyed(18, 0, 0, 0);
    check_poisson_pmf(&r, 3.0, 0, 9);    /* multiplication of uniforms */
    check_poisson_pmf(&r, 9.99, 2, 20);  /* just below the switch */
    check_poisson_pmf(&r, 10.0, 2, 20);  /* PTRS at its lower limit */
    check_poisson_pmf(&r, 25.0, 12, 40); /* PTRS */
    check_poisson_pmf(&r, 400.0, 350, 410);
    for (size_t i = 0; i < N; i++)
        draws[i] = (double)rng_poisson(&r, 1e5);
    check_moments("poisson(1e5)", 1e5, 1e5);
    assert_int_equal(rng_poisson(&r, 0.0), 0);
    assert_int_equal(rng_poisson(&r, -1.0), 0);
}

static void test_categorical(void **state)
{
    const double w[6] = {1.0, 2.0, 0.0, 3.0, 4.0, 0.0};
    uint64_t count[6] = {0};
    struct rng r = rng_keyed(19, 0, 0, 0);
    for (size_t i = 0; i < N; i++) {
        size_t k = rng_categorical(&r, w, 6);
        assert_true(k < 6);
        count[k]++;
    }
    assert_int_equal(count[2], 0);
    assert_int_equal(count[5], 0);
    const uint64_t kept[4] = {count[0], count[1], count[3], count[4]};
    const double p[4] = {0.1, 0.2, 0.3, 0.4};
    check_chi_square("categorical", kept, p, 4);
    const double zero[3] = {0.0, 0.0, 0.0};
    assert_int_equal(rng_categorical(&r, zero, 3), 3);
    assert_int_equal(rng_categorical(&r, w, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splitmix_reference),
        cmocka_unit_test(test_pure_function_of_keys),
        cmocka_unit_test(test_hash_sensitive_to_order_and_length),
        cmocka_unit_test(test_streams_independent),
        cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_uniform_int),
        cmocka_unit_test(test_normal_and_lognormal),
        cmocka_unit_test(test_exponential),
        cmocka_unit_test(test_gamma),
        cmocka_unit_test(test_beta),
        cmocka_unit_test(test_bernoulli),
        cmocka_unit_test(test_poisson),
        cmocka_unit_test(test_categorical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
