/* Dynamic sampling's rounds; see sampling.h. */
#include "plan/sampling.h"

#include <math.h>

#define UNCAPPED 10000 /* generations summed at most when there is no cap */

void plan_sampling_from_config(struct plan_sampling *p, const struct libra_config *cfg)
{
    const struct spec_rl_config *rl = &cfg->rl;
    *p = (struct plan_sampling){.mode = rl->dynamic_sampling,
                                .groups = rl->batch_trajectories / rl->samples,
                                .factor = rl->gen_batch_factor,
                                .max_rounds = rl->max_gen_batches,
                                .overprovision_frac = rl->overprovision_frac};
}

int64_t plan_round_groups(const struct plan_sampling *p, int round, int64_t kept)
{
    if (round < 1 || kept >= p->groups)
        return 0;
    if (round > 1 && (p->mode == SPEC_DS_OFF || round > p->max_rounds))
        return 0;
    if (p->mode == SPEC_DS_GEN_BATCH)
        return (int64_t)p->factor * p->groups;
    return (int64_t)ceil((double)(p->groups - kept) * (1.0 + p->overprovision_frac));
}

bool plan_round_runs_out(const struct plan_sampling *p)
{
    return p->mode == SPEC_DS_GEN_BATCH;
}

/* log P(X = k) for X ~ Bin(n, q), 0 < q < 1. */
static double log_pmf(double n, double k, double q)
{
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) + k * log(q) +
           (n - k) * log1p(-q);
}

/* P(X < k) for X ~ Bin(n, q): the terms below k when k - 1 is at most the mean, else 1 - the
 * terms from k up, summed outward from k, where they fall, so that a few standard deviations
 * of terms suffice whatever n. */
static double binomial_below(double n, double k, double q)
{
    if (k <= 0.0 || q >= 1.0)
        return k > n ? 1.0 : 0.0;
    if (k > n || q <= 0.0)
        return 1.0;
    double sum = 0.0;
    if (k - 1.0 <= n * q) { /* the lower tail, from k - 1 down */
        double x = k - 1.0, t = exp(log_pmf(n, x, q));
        for (;;) {
            sum += t;
            if (t <= 1e-17 * sum || x < 1.0)
                return fmin(sum, 1.0);
            t *= x * (1.0 - q) / ((n - x + 1.0) * q);
            x -= 1.0;
        }
    }
    double x = k, t = exp(log_pmf(n, x, q)); /* the upper tail, from k up */
    for (;;) {
        sum += t;
        if (t <= 1e-17 * sum || x >= n)
            return 1.0 - fmin(sum, 1.0);
        t *= (n - x) * q / ((x + 1.0) * (1.0 - q));
        x += 1.0;
    }
}

double plan_regenerations(double n, double slots, double keep, int cap)
{
    if (keep >= 1.0)
        return 1.0;
    int limit = cap > 0 ? cap : UNCAPPED;
    double e = 0.0;
    for (int g = 0; g < limit; g++) {
        double done = 1.0 - pow(1.0 - keep, g); /* a slot's chance to have kept one by g */
        /* P(the n-th slot to keep one needs more than g); the largest of n in closed form */
        double over = slots <= n ? 1.0 - pow(done, n) : binomial_below(slots, n, done);
        e += over;
        if (over < 1e-9)
            break;
    }
    return e;
}

double plan_expected_rounds(const struct plan_sampling *p, double keep)
{
    if (p->mode == SPEC_DS_OFF)
        return 1.0;
    if (p->mode == SPEC_DS_REGENERATE)
        return plan_regenerations((double)p->groups, (double)p->groups, keep, p->max_rounds);
    /* gen_batch: R > r once r rounds of factor·G groups kept fewer than G */
    double e = 1.0, g = (double)p->groups;
    for (int r = 1; r < p->max_rounds; r++) {
        double short_after = binomial_below((double)r * p->factor * g, g, keep);
        e += short_after;
        if (short_after < 1e-12)
            break;
    }
    return e;
}
