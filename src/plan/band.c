/*
 * Contiguous bands of the sorted length sample (model in roll.h): the cover test the search
 * prunes with, the exact least largest band load Z, and the banding the router follows.
 *
 * Every comparison goes through the same floating-point expression, (P[j] − P[i]) / c, whose
 * rounding is monotone in j, in i and in c; so "some banding keeps every load under thr" is
 * monotone in thr, the greedy cover test decides it exactly, and Z is the least double for
 * which it holds.
 */
#include <math.h>

#include "plan/roll.h"

bool plan_pred_pass(const struct plan_pred *p, double v)
{
    double x = p->mul * v / p->div;
    return p->strict ? x < p->thr : x <= p->thr;
}

static double load(const struct plan_view *v, int t, double c, size_t i, size_t j)
{
    return (v->prefix[t][j] - v->prefix[t][i]) / c;
}

/* The largest j in [i, next_bad) whose band [i, j) on TP t passes p; i when none does. */
static size_t reach(const struct plan_view *v, int t, double c, size_t i, const struct plan_pred *p)
{
    size_t lo = i, hi = v->next_bad[t][i]; /* [i, lo) passes; answer in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (plan_pred_pass(p, load(v, t, c, i, mid)))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

bool plan_band_cover(const struct plan_view *v, const double c[PLAN_NTP], const struct plan_pred *p)
{
    size_t i = 0;
    for (int t = 0; t < PLAN_NTP && i < v->m; t++)
        if (c[t] > 0.0)
            i = reach(v, t, c[t], i, p);
    return i == v->m;
}

/* Runs the greedy cover at threshold thr; returns the largest load it used (<= thr). */
static double greedy_max(const struct plan_view *v, const double c[PLAN_NTP], double thr,
                         bool *covered)
{
    struct plan_pred p = {1.0, 1.0, thr, false};
    size_t i = 0;
    double most = 0.0;
    for (int t = 0; t < PLAN_NTP && i < v->m; t++) {
        if (c[t] <= 0.0)
            continue;
        size_t j = reach(v, t, c[t], i, &p);
        most = fmax(most, load(v, t, c[t], i, j));
        i = j;
    }
    *covered = i == v->m;
    return most;
}

/*
 * Z by bracketing: lo from the GPU-seconds relaxation (Z >= wmin / Σ TP·c), hi from the load a
 * covering greedy actually used; bisection until the bracket is tight, then stepping hi down
 * to the next double below the load in use until the cover fails. Each covering probe snaps hi
 * to an attained load, so the answer is a load some banding attains.
 */
double plan_band_z(const struct plan_view *v, const double c[PLAN_NTP], unsigned mask)
{
    bool cov;
    double hi = greedy_max(v, c, INFINITY, &cov);
    if (!cov)
        return INFINITY;
    if (v->m == 0 || hi == 0.0)
        return hi;
    double gpus = 0.0;
    for (int t = 0; t < PLAN_NTP; t++)
        gpus += (double)(1 << t) * c[t];
    double lo = v->wmin[mask] / gpus * (1.0 - 1e-9);
    if (!(lo > 0.0) || !isfinite(lo)) {
        lo = 0.0;
    } else {
        double used = greedy_max(v, c, lo, &cov);
        if (cov) { /* the relaxation is tight up to rounding: search below it */
            hi = used;
            lo = 0.0;
        }
        for (int step = 0; !cov && step < 8; step++) {
            double probe = lo * (1.0 + 1e-4 * (double)(1 << 3 * step)); /* 1e-4, 8e-4, ... */
            if (probe >= hi)
                break;
            used = greedy_max(v, c, probe, &cov);
            if (cov)
                hi = used;
            else
                lo = probe;
        }
    }
    while (hi - lo > 1e-12 * hi) {
        double mid = lo + (hi - lo) / 2.0, used = greedy_max(v, c, mid, &cov);
        if (cov)
            hi = used;
        else
            lo = mid;
    }
    for (;;) {
        double used = greedy_max(v, c, nextafter(hi, 0.0), &cov);
        if (!cov)
            return hi;
        hi = used;
    }
}

/* The smallest i <= j such that band [i, j) on TP t fits the KV and has load <= z. */
static size_t lowest_start(const struct plan_view *v, int t, double c, size_t j, double z)
{
    size_t lo = 0, hi = j; /* answer in [lo, hi]; hi always qualifies (empty band) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v->next_bad[t][mid] >= j && load(v, t, c, mid, j) <= z)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

void plan_band_right(const struct plan_view *v, const double c[PLAN_NTP], double z,
                     uint32_t lo[PLAN_NTP], uint32_t hi[PLAN_NTP])
{
    size_t j = v->m;
    int lowest = -1;
    for (int t = PLAN_NTP - 1; t >= 0; t--) {
        size_t i = c[t] > 0.0 ? lowest_start(v, t, c[t], j, z) : j;
        lo[t] = (uint32_t)i;
        hi[t] = (uint32_t)j;
        if (c[t] > 0.0)
            lowest = t;
        j = i;
    }
    /* z >= Z makes the lowest band start at 0 (docs/planner.md); pin it against rounding in
     * z, and put the empty bands of absent sizes below it at 0 */
    for (int t = 0; lowest >= 0 && t <= lowest; t++) {
        lo[t] = 0;
        if (t < lowest)
            hi[t] = 0;
    }
}

double plan_fixed_point(const double *lam, size_t m, double bz)
{
    if (m == 0)
        return INFINITY;
    /* h(i) = max(lam[i-1], bz/i) falls while bz/i dominates and rises after: find the first i
     * where lam[i-1] >= bz/i and compare it with its predecessor */
    size_t lo = 1, hi = m + 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lam[mid - 1] >= bz / (double)mid)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo > m)
        return bz / (double)m;
    double t = lam[lo - 1];
    if (lo > 1)
        t = fmin(t, bz / (double)(lo - 1));
    return t;
}
