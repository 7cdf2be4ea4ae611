/* Tests of the least-squares fit of cost constants (src/cost/fit.c): exact recovery of a line,
 * one point fixing one constant to the bit, the refusal of constants the points cannot tell
 * apart, standard errors that match the noise, malformed systems, and the bisection. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "cost/fit.h"
#include "util/rng.h"

/* y = base + 3·x0 + 0.5·x1 exactly, over points that separate the two columns. */
static void test_recovers_an_exact_line(void **state)
{
    double y[5], base[5], x[10];
    for (int i = 0; i < 5; i++) {
        base[i] = 10.0 + i;
        x[2 * i] = 1.0;
        x[2 * i + 1] = 1.0 + 7.0 * i;
        y[i] = base[i] + 3.0 * x[2 * i] + 0.5 * x[2 * i + 1];
    }
    struct cost_fit_system s = {5, 2, y, base, x};
    struct cost_fit_result r;
    assert_int_equal(cost_fit_linear(&s, &r), 0);
    assert_close(r.value[0], 3.0, 1e-12);
    assert_close(r.value[1], 0.5, 1e-12);
    assert_int_equal(r.undetermined, -1);
    assert_true(r.rms_error < 1e-14 && r.max_error < 1e-14);
    assert_true(r.sd[0] < 1e-10 && r.sd[1] < 1e-10);
    for (int i = 0; i < 5; i++)
        assert_close(cost_fit_modelled(&s, &r, (size_t)i), y[i], 1e-14);
}

/* One point, one constant: value = (measured − base)/x exactly (the project's t_fix fit). */
static void test_one_point_is_exact(void **state)
{
    double y = 11.9e-3, base = 9.81234567e-3, x = 1.0;
    struct cost_fit_system s = {1, 1, &y, &base, &x};
    struct cost_fit_result r;
    assert_int_equal(cost_fit_linear(&s, &r), 0);
    assert_true(r.value[0] == y - base);
    assert_true(isnan(r.sd[0]));
    assert_true(r.rms_error == 0.0);
}

/* Every point at one batch size: the per-sequence column is the fixed column scaled. */
static void test_refuses_collinear_columns(void **state)
{
    double y[4], base[4], x[8];
    for (int i = 0; i < 4; i++) {
        base[i] = 0.01 * (i + 1);
        x[2 * i] = 1.0;
        x[2 * i + 1] = 64.0;
        y[i] = base[i] + 0.002 + 64.0 * 30e-6;
    }
    struct cost_fit_system s = {4, 2, y, base, x};
    struct cost_fit_result r;
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINFEAS);
    assert_int_equal(r.undetermined, 1);
    assert_true(r.independence[0] > 0.99);
    assert_true(r.independence[1] < 1e-6);
    assert_true(isnan(r.value[0]) && isnan(r.value[1]));
    /* one point cannot determine two constants either */
    s.n_points = 1;
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINFEAS);
    assert_int_equal(r.undetermined, 1);
    /* a column that never moves a point is not determined */
    for (int i = 0; i < 4; i++)
        x[2 * i + 1] = 0.0;
    s.n_points = 4;
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINFEAS);
    assert_int_equal(r.undetermined, 1);
    assert_true(r.independence[1] == 0.0);
}

/* Multiplicative noise of 1 % (fixed seed): the estimates land within three standard errors of
 * the truth, and the residual matches the noise. */
static void test_standard_errors_match_the_noise(void **state)
{
    enum { N = 200 };
    double y[N], base[N], x[2 * N];
    struct rng g = rng_keyed(7, 1, 2, 3);
    for (int i = 0; i < N; i++) {
        double seqs = 1.0 + (double)(i % 50) * 5.0;
        base[i] = 0.01 + 1e-4 * seqs;
        x[2 * i] = 1.0;
        x[2 * i + 1] = seqs;
        y[i] = (base[i] + 0.004 + seqs * 50e-6) * (1.0 + 0.01 * rng_normal(&g));
    }
    struct cost_fit_system s = {N, 2, y, base, x};
    struct cost_fit_result r;
    assert_int_equal(cost_fit_linear(&s, &r), 0);
    assert_true(fabs(r.value[0] - 0.004) <= 3.0 * r.sd[0]);
    assert_true(fabs(r.value[1] - 50e-6) <= 3.0 * r.sd[1]);
    assert_true(r.sd[0] < 0.0005 && r.sd[1] < 5e-6);
    assert_true(r.rms_error > 0.008 && r.rms_error < 0.012);
}

static void test_rejects_malformed_systems(void **state)
{
    double y[2] = {1.0, 2.0}, base[2] = {0.0, 0.0}, x[2] = {1.0, 1.0};
    struct cost_fit_result r;
    struct cost_fit_system s = {0, 1, y, base, x};
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINVAL);
    s = (struct cost_fit_system){2, 0, y, base, x};
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINVAL);
    s = (struct cost_fit_system){2, COST_FIT_MAX_PARAMS + 1, y, base, x};
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINVAL);
    y[1] = 0.0; /* a measured value must be > 0: errors are relative to it */
    s = (struct cost_fit_system){2, 1, y, base, x};
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINVAL);
    y[1] = 2.0;
    base[0] = NAN;
    assert_int_equal(cost_fit_linear(&s, &r), LIBRA_EINVAL);
}

static bool cube_below(void *ctx, double m)
{
    return m * m * m < *(const double *)ctx;
}

static void test_bisect(void **state)
{
    double target = 10.0;
    double root = cost_fit_bisect(0.0, 10.0, 60, cube_below, &target);
    assert_close(root, cbrt(10.0), 1e-12);
    assert_true(root * root * root < target); /* lo stays below */
    assert_true(cost_fit_bisect(0.0, 1.0, 0, cube_below, &target) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recovers_an_exact_line),
        cmocka_unit_test(test_one_point_is_exact),
        cmocka_unit_test(test_refuses_collinear_columns),
        cmocka_unit_test(test_standard_errors_match_the_noise),
        cmocka_unit_test(test_rejects_malformed_systems),
        cmocka_unit_test(test_bisect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
