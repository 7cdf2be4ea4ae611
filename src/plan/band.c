/*
 * Contiguous bands of the sorted length sample (model in roll.h): the cover test the search
 * prunes with, the exact least largest band load Z, and the banding the router follows.
 *
 * Every comparison goes through the same floating-point expression, (P[j] − P[i]) / c, whose
 * rounding is monotone in j, in i and in c; so "some banding keeps every load under thr" is
 * monotone in thr, a greedy (from either end) decides it exactly, and Z is the least double for
 * which it holds. The same monotonicity bounds each greedy's boundaries by those of another
 * threshold, which narrows the binary searches (docs/planner.md §2.3).
 */
#include <math.h>
#include <string.h>

#include "plan/roll.h"

static double load(const struct plan_view *v, int t, double c, size_t i, size_t j)
{
    return (v->prefix[t][j] - v->prefix[t][i]) / c;
}

/* The largest j in [i, next_bad) whose band [i, j) on TP t has load <= thr; i when none does. The
 * answer is searched in [max(i, at_least), min(next_bad, at_most)]: callers pass bounds they know
 * hold (0 and m when none). */
static size_t reach(const struct plan_view *v, int t, double c, size_t i, double thr,
                    size_t at_least, size_t at_most)
{
    size_t lo = at_least > i ? at_least : i, hi = v->next_bad[t][i];
    hi = at_most < hi ? at_most : hi;
    lo = lo < hi ? lo : hi; /* [i, lo) passes; answer in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (load(v, t, c, i, mid) <= thr)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/*
 * The band ends of the greedy cover at one threshold (m for the sizes after it reached m), kept
 * for a threshold that failed (below) and one that covered (above): the greedy's end of band t
 * is nondecreasing in its start and in the threshold, so at a threshold between the two every
 * end lies between theirs (docs/planner.md §2.3) and each binary search narrows to that range.
 */
struct ends {
    size_t below[PLAN_NTP], above[PLAN_NTP];
};

/* Runs the greedy cover at threshold thr within the ends e brackets, storing its ends in out;
 * returns the largest load it used (<= thr). */
static double greedy_max(const struct plan_view *v, const double c[PLAN_NTP], double thr,
                         const struct ends *e, size_t out[PLAN_NTP], bool *covered)
{
    size_t i = 0;
    double most = 0.0;
    for (int t = 0; t < PLAN_NTP; t++) {
        if (c[t] > 0.0 && i < v->m) {
            size_t j = reach(v, t, c[t], i, thr, e->below[t], e->above[t]);
            double l = load(v, t, c[t], i, j);
            most = l > most ? l : most;
            i = j;
        }
        out[t] = i;
    }
    *covered = i == v->m;
    return most;
}

/* One probe of plan_band_z at thr: a cover moves the upper end (hi, snapped to the load used,
 * at which the greedy's ends are the same), a failure the lower one. */
static void probe(const struct plan_view *v, const double c[PLAN_NTP], double thr, struct ends *e,
                  double *lo, double *hi, bool *covered)
{
    size_t out[PLAN_NTP];
    double used = greedy_max(v, c, thr, e, out, covered);
    if (*covered) {
        *hi = used;
        memcpy(e->above, out, sizeof out);
    } else {
        *lo = thr;
        memcpy(e->below, out, sizeof out);
    }
}

/*
 * Z by bracketing: lo from the GPU-seconds relaxation (Z >= wmin / Σ TP·c), hi from the load a
 * covering greedy actually used at the caller's hint (or at +inf); bisection until the bracket is
 * within 1e-4 of hi, then stepping hi down to the next double below the load in use until the cover
 * fails. Each covering probe snaps hi to an attained load, so the answer is a load some banding
 * attains, and the steps walk only the attained loads inside the bracket, which a 1e-4 bracket
 * holds few of on samples of thousands (docs/planner.md §2.3).
 */
double plan_band_z(const struct plan_view *v, const double c[PLAN_NTP], unsigned mask,
                   double covers)
{
    struct ends e;
    for (int t = 0; t < PLAN_NTP; t++) {
        e.below[t] = 0;
        e.above[t] = v->m;
    }
    bool cov;
    double lo = 0.0, hi = INFINITY;
    probe(v, c, covers, &e, &lo, &hi, &cov);
    if (!cov && !isinf(covers)) /* a wrong hint still bounds Z from below */
        probe(v, c, INFINITY, &e, &lo, &hi, &cov);
    if (!cov)
        return INFINITY;
    if (v->m == 0 || hi == 0.0)
        return hi;
    double gpus = 0.0;
    for (int t = 0; t < PLAN_NTP; t++)
        gpus += (double)(1 << t) * c[t];
    double rel = v->wmin[mask] / gpus * (1.0 - 1e-9);
    if (rel > 0.0 && isfinite(rel)) {
        probe(v, c, rel, &e, &lo, &hi, &cov);
        if (cov) /* the relaxation is tight up to rounding: search below it */
            lo = 0.0;
        for (int step = 0; !cov && step < 8; step++) {
            double thr = lo * (1.0 + 1e-4 * (double)(1 << 3 * step)); /* 1e-4, 8e-4, ... */
            if (thr >= hi)
                break;
            probe(v, c, thr, &e, &lo, &hi, &cov);
        }
    }
    while (hi - lo > 1e-4 * hi)
        probe(v, c, lo + (hi - lo) / 2.0, &e, &lo, &hi, &cov);
    for (;;) {
        double was = hi;
        probe(v, c, nextafter(hi, 0.0), &e, &lo, &hi, &cov);
        if (!cov)
            return was;
    }
}

/* Whether band [i, j) on TP t fits the KV and has load <= z: false then true as i rises to j. */
static bool starts(const struct plan_view *v, int t, double c, size_t i, size_t j, double z)
{
    return v->next_bad[t][i] >= j && load(v, t, c, i, j) <= z;
}

/* The smallest i in [from, j] such that band [i, j) on TP t starts (see starts), given that none
 * below from does: a binary search over the whole range from 0, else a gallop up from from (the
 * start a previous, larger z found, which a smaller z can only raise). */
static size_t lowest_start(const struct plan_view *v, int t, double c, size_t from, size_t j,
                           double z)
{
    size_t lo = from, hi = j; /* answer in [lo, hi]; hi always qualifies (empty band) */
    for (size_t step = 1; from > 0 && lo < hi; step *= 2) {
        size_t x = hi - lo >= step ? lo + step - 1 : hi;
        if (starts(v, t, c, x, j, z)) {
            hi = x;
            break;
        }
        lo = x + 1;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (starts(v, t, c, mid, j, z))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* The right greedy at z: each band from the top down starts as low as its end and z allow, no
 * lower than from[t]. Returns whether the lowest present band starts at 0. */
static bool right_greedy(const struct plan_view *v, const double c[PLAN_NTP], double z,
                         const uint32_t from[PLAN_NTP], uint32_t lo[PLAN_NTP],
                         uint32_t hi[PLAN_NTP], int *lowest)
{
    size_t j = v->m;
    *lowest = -1;
    for (int t = PLAN_NTP - 1; t >= 0; t--) {
        size_t i = c[t] > 0.0 ? lowest_start(v, t, c[t], from[t], j, z) : j;
        lo[t] = (uint32_t)i;
        hi[t] = (uint32_t)j;
        if (c[t] > 0.0)
            *lowest = t;
        j = i;
    }
    return j == 0;
}

/* Puts the empty bands of the absent sizes below the lowest present one at 0. */
static void pin_below(int lowest, uint32_t lo[PLAN_NTP], uint32_t hi[PLAN_NTP])
{
    for (int t = 0; t < lowest; t++)
        lo[t] = hi[t] = 0;
}

void plan_band_right(const struct plan_view *v, const double c[PLAN_NTP], double z,
                     uint32_t lo[PLAN_NTP], uint32_t hi[PLAN_NTP])
{
    static const uint32_t none[PLAN_NTP];
    int lowest;
    right_greedy(v, c, z, none, lo, hi, &lowest);
    /* z >= Z makes the lowest band start at 0 (docs/planner.md); pin it against rounding in z */
    if (lowest >= 0)
        lo[lowest] = 0;
    pin_below(lowest, lo, hi);
}

bool plan_band_fit(const struct plan_view *v, const double c[PLAN_NTP], double z,
                   uint32_t lo[PLAN_NTP], uint32_t hi[PLAN_NTP])
{
    uint32_t from[PLAN_NTP];
    memcpy(from, lo, sizeof from);
    int lowest;
    bool fit = right_greedy(v, c, z, from, lo, hi, &lowest);
    pin_below(lowest, lo, hi);
    return fit;
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
