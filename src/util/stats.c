/* Welford accumulators, windowed and exact R-7 quantiles, rank correlation; see stats.h. */
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/sort.h"

void stats_running_init(struct stats_running *s)
{
    memset(s, 0, sizeof *s);
}

void stats_running_add(struct stats_running *s, double x)
{
    s->n++;
    double delta = x - s->mean;
    s->mean += delta / (double)s->n;
    s->m2 += delta * (x - s->mean);
    if (s->n == 1 || x < s->min)
        s->min = x;
    if (s->n == 1 || x > s->max)
        s->max = x;
}

double stats_running_variance(const struct stats_running *s)
{
    return s->n < 2 ? 0.0 : s->m2 / (double)(s->n - 1);
}

void stats_window_init(struct stats_window *w, size_t cap)
{
    memset(w, 0, sizeof *w);
    w->cap = cap ? cap : 1;
    w->buf = xmallocarray(w->cap, sizeof *w->buf);
    w->scratch = xmallocarray(w->cap, sizeof *w->scratch);
}

void stats_window_free(struct stats_window *w)
{
    if (!w)
        return;
    free(w->buf);
    free(w->scratch);
    memset(w, 0, sizeof *w);
}

void stats_window_add(struct stats_window *w, double x)
{
    w->buf[w->next] = x;
    w->next = (w->next + 1) % w->cap;
    if (w->n < w->cap)
        w->n++;
}

double stats_window_mean(const struct stats_window *w)
{
    if (w->n == 0)
        return NAN;
    double sum = 0.0;
    for (size_t i = 0; i < w->n; i++)
        sum += w->buf[i];
    return sum / (double)w->n;
}

double stats_window_quantile(struct stats_window *w, double q)
{
    /* Order within buf does not matter for a quantile: the held samples are buf[0..n). */
    memcpy(w->scratch, w->buf, w->n * sizeof *w->buf);
    return stats_quantile(w->scratch, w->n, q);
}

/* h = (n - 1) q for q clamped to [0, 1], split into index lo and fraction. */
static size_t r7_position(size_t n, double q, double *frac)
{
    q = q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
    double h = (double)(n - 1) * q, lo = floor(h);
    *frac = h - lo;
    return (size_t)lo;
}

double stats_quantile_sorted(const double *v, size_t n, double q)
{
    if (n == 0 || isnan(q))
        return NAN;
    double frac;
    size_t lo = r7_position(n, q, &frac);
    if (frac == 0.0)
        return v[lo];
    return v[lo] + frac * (v[lo + 1] - v[lo]);
}

double stats_quantile(double *v, size_t n, double q)
{
    if (n == 0 || isnan(q))
        return NAN;
    double frac;
    size_t lo = r7_position(n, q, &frac);
    double a = stats_select(v, n, lo);
    if (frac == 0.0)
        return a;
    double b = v[lo + 1]; /* the next order statistic: the least value after lo */
    for (size_t i = lo + 2; i < n; i++)
        if (v[i] < b)
            b = v[i];
    return a + frac * (b - a);
}

static void swap(double *v, size_t i, size_t j)
{
    double t = v[i];
    v[i] = v[j];
    v[j] = t;
}

static double median3(double a, double b, double c)
{
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    return c < a ? a : c > b ? b : c;
}

double stats_select(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* k is in [lo, hi) */
    while (hi - lo > 1) {
        double pivot = median3(v[lo], v[lo + (hi - lo) / 2], v[hi - 1]);
        /* Partition [lo, hi) into < pivot [lo, lt), == pivot [lt, gt), > pivot [gt, hi). */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (v[i] < pivot)
                swap(v, lt++, i++);
            else if (v[i] > pivot)
                swap(v, i, --gt);
            else
                i++;
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return v[k];
    }
    return v[k];
}

void stats_ranks(const double *v, size_t n, double *ranks)
{
    struct sort_pair *r = xmallocarray(2 * n, sizeof *r);
    for (size_t i = 0; i < n; i++)
        r[i] = (struct sort_pair){sort_key_double(v[i]), (uint32_t)i};
    sort_pairs(r, n, r + n);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && r[j].key == r[i].key)
            j++;
        double avg = (double)(i + 1 + j) / 2.0; /* mean of the ranks i+1 .. j */
        for (; i < j; i++)
            ranks[r[i].index] = avg;
    }
    free(r);
}

double stats_pearson(const double *x, const double *y, size_t n)
{
    if (n < 2)
        return NAN;
    double mx = 0.0, my = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double sxy = 0.0, sxx = 0.0, syy = 0.0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx == 0.0 || syy == 0.0)
        return NAN;
    double r = sxy / sqrt(sxx * syy);
    return r > 1.0 ? 1.0 : r < -1.0 ? -1.0 : r; /* rounding may step just outside */
}

double stats_spearman(const double *x, const double *y, size_t n)
{
    if (n < 2)
        return NAN;
    double *rx = xmallocarray(2 * n, sizeof *rx), *ry = rx + n;
    stats_ranks(x, n, rx);
    stats_ranks(y, n, ry);
    double rho = stats_pearson(rx, ry, n);
    free(rx);
    return rho;
}
