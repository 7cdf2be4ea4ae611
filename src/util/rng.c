/* Keyed counter-based generator and distributions; see rng.h for why. */
#include "util/rng.h"

#include <math.h>

#define GOLDEN 0x9e3779b97f4a7c15u          /* 2^64 / golden ratio, odd: the SplitMix64 increment */
#define HALF_LOG_2PI 0.91893853320467274178 /* log(2 pi) / 2 */

uint64_t rng_hash(uint64_t seed, const uint64_t *keys, size_t n)
{
    uint64_t h = rng_mix64(seed + GOLDEN);
    for (size_t i = 0; i < n; i++)
        h = rng_mix64((h ^ keys[i]) + GOLDEN);
    return rng_mix64(h ^ n);
}

struct rng rng_keyed(uint64_t seed, uint64_t k1, uint64_t k2, uint64_t k3)
{
    const uint64_t keys[3] = {k1, k2, k3};
    return (struct rng){rng_hash(seed, keys, 3), 0};
}

uint64_t rng_u64(struct rng *r)
{
    r->ctr++;
    return rng_mix64(rng_mix64(r->key + r->ctr * GOLDEN) ^ r->key);
}

double rng_uniform(struct rng *r)
{
    return (double)(rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t rng_uniform_int(struct rng *r, uint64_t n)
{
    if (n == 0)
        return 0;
    /* Reject the lowest 2^64 mod n values so every residue has the same number of sources. */
    uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t x = rng_u64(r);
        if (x >= threshold)
            return x % n;
    }
}

double rng_normal(struct rng *r)
{
    for (;;) {
        double u = 2.0 * rng_uniform(r) - 1.0;
        double v = 2.0 * rng_uniform(r) - 1.0;
        double s = u * u + v * v;
        if (s > 0.0 && s < 1.0)
            return u * sqrt(-2.0 * log(s) / s);
    }
}

double rng_lognormal(struct rng *r, double mu, double sigma)
{
    return exp(mu + sigma * rng_normal(r));
}

double rng_exponential(struct rng *r, double rate)
{
    return -log1p(-rng_uniform(r)) / rate;
}

double rng_gamma(struct rng *r, double shape, double scale)
{
    if (shape < 1.0) {
        double u = 1.0 - rng_uniform(r); /* (0, 1] */
        return rng_gamma(r, shape + 1.0, scale) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = rng_uniform(r);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x))
            return d * v * scale;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v * scale;
    }
}

double rng_beta(struct rng *r, double a, double b)
{
    double x = rng_gamma(r, a, 1.0), y = rng_gamma(r, b, 1.0);
    if (x + y == 0.0) /* both underflowed (tiny shapes): Beta tends to Bernoulli(a / (a + b)) */
        return rng_uniform(r) < a / (a + b) ? 1.0 : 0.0;
    return x / (x + y);
}

bool rng_bernoulli(struct rng *r, double p)
{
    return rng_uniform(r) < p;
}

/* log Gamma(x) for x >= 1: Stirling's series after shifting x to >= 7 (as in NumPy).
 * lgamma() is avoided because it writes the global signgam. */
static double log_gamma(double x)
{
    static const double a[10] = {8.333333333333333e-02, -2.777777777777778e-03,
                                 7.936507936507937e-04, -5.952380952380952e-04,
                                 8.417508417508418e-04, -1.917526917526918e-03,
                                 6.410256410256410e-03, -2.955065359477124e-02,
                                 1.796443723688307e-01, -1.39243221690590e+00};
    if (x == 1.0 || x == 2.0)
        return 0.0;
    int shift = x < 7.0 ? (int)(7.0 - x) : 0;
    double x0 = x + shift, x2 = 1.0 / (x0 * x0), series = a[9];
    for (int k = 8; k >= 0; k--)
        series = series * x2 + a[k];
    double gl = series / x0 + HALF_LOG_2PI + (x0 - 0.5) * log(x0) - x0;
    for (int k = 0; k < shift; k++) {
        x0 -= 1.0;
        gl -= log(x0);
    }
    return gl;
}

/* Hörmann's PTRS for lambda >= 10, constants as in the paper. */
static uint64_t poisson_ptrs(struct rng *r, double lambda)
{
    double slam = sqrt(lambda), loglam = log(lambda);
    double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
    double inv_alpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2.0);
    for (;;) {
        double u = rng_uniform(r) - 0.5, v = rng_uniform(r);
        double us = 0.5 - fabs(u);
        double k = floor((2.0 * a / us + b) * u + lambda + 0.43);
        if (us >= 0.07 && v <= vr)
            return (uint64_t)k; /* k >= 0 in this region for lambda >= 10 */
        if (!(k >= 0.0) || (us < 0.013 && v > us))
            continue;
        if (log(v) + log(inv_alpha) - log(a / (us * us) + b) <=
            -lambda + k * loglam - log_gamma(k + 1.0))
            return (uint64_t)k;
    }
}

uint64_t rng_poisson(struct rng *r, double lambda)
{
    if (!(lambda > 0.0))
        return 0;
    if (lambda >= 10.0)
        return poisson_ptrs(r, lambda);
    double limit = exp(-lambda), prod = 1.0;
    for (uint64_t k = 0;; k++) {
        prod *= rng_uniform(r);
        if (prod <= limit)
            return k;
    }
}

size_t rng_categorical(struct rng *r, const double *weights, size_t n)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++)
        total += weights[i];
    if (!(total > 0.0))
        return n;
    double u = rng_uniform(r) * total, acc = 0.0;
    size_t last = n;
    for (size_t i = 0; i < n; i++) {
        if (weights[i] <= 0.0)
            continue;
        acc += weights[i];
        last = i;
        if (u < acc)
            return i;
    }
    return last; /* rounding left u at or above the running sum: the last positive weight */
}
