/*
 * Streaming and exact statistics.
 *
 * The simulator reports means and tail latencies; the router's prediction quality is a rank
 * correlation between predicted and actual remaining work; the gateway keeps recent turn times
 * to advise re-planning. These need: a running mean/variance that is numerically stable over
 * millions of samples (Welford), exact quantiles of a recent window (a ring buffer of the last
 * W samples; quantiles by selection on a scratch copy, O(W) expected per query), exact
 * quantiles of an array, and Spearman's correlation with ties.
 *
 * Quantiles use one rule everywhere, Hyndman and Fan's R-7 (NumPy's default "linear", Excel's
 * PERCENTILE.INC): for sorted v[0..n) and q in [0, 1], h = (n - 1) q and the quantile is
 * v[floor h] + (h - floor h) (v[floor h + 1] - v[floor h]). q outside [0, 1] is clamped.
 * Inputs must not contain NaN. Nothing here keeps global state; a struct is used by one thread
 * at a time.
 */
#ifndef UTIL_STATS_H
#define UTIL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Count, mean, variance, min and max of a stream, in O(1) memory (Welford's algorithm). */
struct stats_running {
    uint64_t n;
    double mean;
    double m2; /* sum of squared deviations from the mean */
    double min, max;
};

/* Makes s empty. A zeroed struct is also empty. */
void stats_running_init(struct stats_running *s);

/* Adds one sample. */
void stats_running_add(struct stats_running *s, double x);

/* Sample variance (divisor n - 1); 0 when fewer than two samples. */
double stats_running_variance(const struct stats_running *s);

/* The last cap samples of a stream (a ring buffer) and their exact quantiles. */
struct stats_window {
    double *buf;     /* cap samples, ring order */
    double *scratch; /* cap doubles for selection */
    size_t cap;      /* samples kept */
    size_t n;        /* samples held, <= cap */
    size_t next;     /* slot the next sample overwrites */
};

/* Initialises an empty window keeping the last cap (>= 1) samples. Aborts on OOM. */
void stats_window_init(struct stats_window *w, size_t cap);

/* Frees the buffers. w may be NULL. */
void stats_window_free(struct stats_window *w);

/* Adds x, evicting the oldest sample when the window is full. */
void stats_window_add(struct stats_window *w, double x);

/* Mean of the samples held; NaN when empty. */
double stats_window_mean(const struct stats_window *w);

/* R-7 quantile q of the samples held; NaN when empty. O(n) expected; uses w's scratch. */
double stats_window_quantile(struct stats_window *w, double q);

/* R-7 quantile q of v[0..n), which must be sorted ascending; NaN when n is 0. */
double stats_quantile_sorted(const double *v, size_t n, double q);

/* R-7 quantile q of v[0..n) in any order, by selection; reorders v. NaN when n is 0. */
double stats_quantile(double *v, size_t n, double q);

/*
 * Reorders v[0..n) so that v[k] is the value sorted order puts there, with nothing greater
 * before it and nothing smaller after it; returns v[k]. k < n. Expected O(n) (quickselect,
 * median-of-three pivot, three-way partition so repeated values cost nothing extra).
 */
double stats_select(double *v, size_t n, size_t k);

/* Writes to ranks[i] the 1-based rank of v[i], tied values sharing their average rank. v holds
 * no NaN. */
void stats_ranks(const double *v, size_t n, double *ranks);

/* Pearson correlation of x and y; NaN when n < 2 or either is constant. */
double stats_pearson(const double *x, const double *y, size_t n);

/* Spearman rank correlation (Pearson over average ranks, so ties are handled); NaN when n < 2
 * or either variable is constant. x and y hold no NaN. Allocates O(n) scratch. */
double stats_spearman(const double *x, const double *y, size_t n);

#endif
