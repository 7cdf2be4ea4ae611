/*
 * Tests of the banding primitives (src/plan/band.c) against exhaustive enumeration on small
 * random views: Z is the least largest band load over every banding, the cover test agrees
 * with it at every threshold, the router's banding attains Z with the lowest boundaries, and
 * the staleness fixed point is min over i of max(lam_i, bz/i).
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/roll.h"
#include "util/rng.h"

#define M_MAX 9

struct small_view {
    struct plan_view v;
    double prefix[PLAN_NTP][M_MAX + 1];
    uint32_t next_bad[PLAN_NTP][M_MAX + 1];
};

/* Random works in (0, 10] per (rank, TP); a rank is bad on TP t with probability 0.15 unless
 * t is 3 (so the top TP always fits). */
static void make_view(struct small_view *s, struct rng *r, size_t m)
{
    memset(s, 0, sizeof *s);
    s->v.m = m;
    double work[PLAN_NTP][M_MAX];
    bool bad[PLAN_NTP][M_MAX];
    for (int t = 0; t < PLAN_NTP; t++) {
        s->v.prefix[t] = s->prefix[t];
        s->v.next_bad[t] = s->next_bad[t];
        for (size_t k = 0; k < m; k++) {
            work[t][k] = 0.25 * (double)(1 + rng_uniform_int(r, 40));
            bad[t][k] = t < 3 && rng_uniform(r) < 0.15;
            s->prefix[t][k + 1] = s->prefix[t][k] + work[t][k];
        }
        s->next_bad[t][m] = (uint32_t)m;
        for (size_t k = m; k-- > 0;)
            s->next_bad[t][k] = bad[t][k] ? (uint32_t)k : s->next_bad[t][k + 1];
    }
    for (unsigned mask = 1; mask < 1u << PLAN_NTP; mask++) {
        double sum = 0.0;
        for (size_t k = 0; k < m; k++) {
            double best = INFINITY;
            for (int t = 0; t < PLAN_NTP; t++)
                if (mask >> t & 1 && !bad[t][k])
                    best = fmin(best, (double)(1 << t) * work[t][k]);
            sum += best;
        }
        s->v.wmin[mask] = sum;
    }
}

static double load(const struct plan_view *v, int t, double c, size_t i, size_t j)
{
    if (v->next_bad[t][i] < j)
        return INFINITY;
    return (v->prefix[t][j] - v->prefix[t][i]) / c;
}

/* Calls fn for every banding: bounds b[0..4] with b[0] = 0, b[4] = m, absent sizes empty. */
struct banding {
    uint32_t lo[PLAN_NTP], hi[PLAN_NTP];
    double max_load;
};

static size_t all_bandings(const struct plan_view *v, const double c[PLAN_NTP], struct banding *out)
{
    size_t n = 0, m = v->m;
    for (size_t b1 = 0; b1 <= m; b1++)
        for (size_t b2 = b1; b2 <= m; b2++)
            for (size_t b3 = b2; b3 <= m; b3++) {
                size_t b[5] = {0, b1, b2, b3, m};
                struct banding x = {.max_load = 0.0};
                bool ok = true;
                for (int t = 0; t < PLAN_NTP; t++) {
                    x.lo[t] = (uint32_t)b[t];
                    x.hi[t] = (uint32_t)b[t + 1];
                    if (c[t] == 0.0)
                        ok = ok && b[t] == b[t + 1];
                    else
                        x.max_load = fmax(x.max_load, load(v, t, c[t], b[t], b[t + 1]));
                }
                if (ok)
                    out[n++] = x;
            }
    return n;
}

static int by_load_descending(const void *a, const void *b)
{
    double x = ((const struct banding *)a)->max_load, y = ((const struct banding *)b)->max_load;
    return x > y ? -1 : x < y;
}

/* plan_band_fit at every banding's largest load, descending, each call starting from the
 * previous fitting call's starts: fits iff the least largest load best is at most the threshold,
 * and then with plan_band_right's banding. */
static void check_fit_descending(const struct plan_view *v, const double c[PLAN_NTP],
                                 struct banding *bands, size_t n, double best)
{
    qsort(bands, n, sizeof *bands, by_load_descending);
    uint32_t from[PLAN_NTP] = {0};
    for (size_t i = 0; i < n; i++) {
        double thr = bands[i].max_load;
        if (isinf(thr))
            continue;
        uint32_t lo[PLAN_NTP], hi[PLAN_NTP], rlo[PLAN_NTP], rhi[PLAN_NTP];
        memcpy(lo, from, sizeof lo);
        bool fit = plan_band_fit(v, c, thr, lo, hi);
        assert_int_equal(fit, best <= thr);
        if (!fit)
            continue;
        plan_band_right(v, c, thr, rlo, rhi);
        assert_memory_equal(lo, rlo, sizeof lo);
        assert_memory_equal(hi, rhi, sizeof hi);
        memcpy(from, lo, sizeof from);
    }
}

static void test_z_cover_right_exhaustive(void **state)
{
    static struct banding bands[(M_MAX + 1) * (M_MAX + 1) * (M_MAX + 1)];
    struct rng r = rng_keyed(42, 0, 0, 0);
    for (int round = 0; round < 400; round++) {
        struct small_view s;
        make_view(&s, &r, 1 + rng_uniform_int(&r, M_MAX));
        double c[PLAN_NTP];
        unsigned mask = 0;
        for (int t = 0; t < PLAN_NTP; t++) {
            c[t] = rng_uniform(&r) < 0.4 ? 0.0 : (double)(1 + rng_uniform_int(&r, 4));
            mask |= c[t] > 0.0 ? 1u << t : 0;
        }
        if (!mask)
            c[3] = 1.0, mask = 8;
        size_t n = all_bandings(&s.v, c, bands);
        double best = INFINITY;
        for (size_t i = 0; i < n; i++)
            best = fmin(best, bands[i].max_load);
        double z = plan_band_z(&s.v, c, mask, INFINITY);
        assert_true(z == best);
        /* a hint that covers, one that is exact and one that is wrong change nothing */
        if (!isinf(best)) {
            assert_true(plan_band_z(&s.v, c, mask, best * 1.5) == best);
            assert_true(plan_band_z(&s.v, c, mask, best) == best);
            assert_true(plan_band_z(&s.v, c, mask, nextafter(best, 0.0)) == best);
        }
        for (size_t i = 0; i < n; i++) {
            /* an infeasible banding (a context over its TP's KV) fits at no threshold */
            uint32_t lo[PLAN_NTP] = {0}, hi[PLAN_NTP];
            double thr = bands[i].max_load, below = nextafter(thr, 0.0);
            assert_int_equal(plan_band_fit(&s.v, c, thr, lo, hi), !isinf(best) && best <= thr);
            memset(lo, 0, sizeof lo);
            assert_int_equal(plan_band_fit(&s.v, c, below, lo, hi), !isinf(best) && best <= below);
        }
        check_fit_descending(&s.v, c, bands, n, best);
        if (isinf(z))
            continue;
        uint32_t lo[PLAN_NTP], hi[PLAN_NTP];
        plan_band_right(&s.v, c, z, lo, hi);
        double got = 0.0;
        for (int t = 0; t < PLAN_NTP; t++) {
            if (c[t] > 0.0)
                got = fmax(got, load(&s.v, t, c[t], lo[t], hi[t]));
            else
                assert_int_equal(lo[t], hi[t]);
        }
        assert_true(got <= z);
        assert_int_equal(hi[3] - lo[3] + (hi[2] - lo[2]) + (hi[1] - lo[1]) + (hi[0] - lo[0]),
                         s.v.m);
        /* every banding within z has boundaries at or above these */
        for (size_t i = 0; i < n; i++)
            if (bands[i].max_load <= z)
                for (int t = 1; t < PLAN_NTP; t++)
                    assert_true(bands[i].lo[t] >= lo[t] || c[t] == 0.0);
    }
}

static void test_fixed_point_naive(void **state)
{
    struct rng r = rng_keyed(43, 0, 0, 0);
    for (int round = 0; round < 2000; round++) {
        size_t m = 1 + rng_uniform_int(&r, 30);
        double lam[30];
        for (size_t i = 0; i < m; i++)
            lam[i] = (double)rng_uniform_int(&r, 50);
        for (size_t i = 1; i < m; i++) /* ascending */
            for (size_t k = i; k > 0 && lam[k] < lam[k - 1]; k--) {
                double x = lam[k];
                lam[k] = lam[k - 1];
                lam[k - 1] = x;
            }
        double bz = (double)rng_uniform_int(&r, 400), best = INFINITY;
        for (size_t i = 1; i <= m; i++)
            best = fmin(best, fmax(lam[i - 1], bz / (double)i));
        assert_true(plan_fixed_point(lam, m, bz) == best);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_z_cover_right_exhaustive),
        cmocka_unit_test(test_fixed_point_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
