/* Attained service and earlier attempts (service.h). */
#include "sched/service.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/sort.h"

void sched_service_init(struct sched_service *s, size_t max_prompts)
{
    memset(s, 0, sizeof *s);
    s->max_prompts = max_prompts;
}

void sched_service_free(struct sched_service *s)
{
    intmap_free(&s->prompts);
    free(s->attempts);
    memset(s, 0, sizeof *s);
}

/* The sorted copy gains total and, when full, loses the oldest: one shift of the entries between
 * where the oldest leaves and where total enters (a third of the window on average), not two
 * shifts of everything past each. */
static void population_learn(struct sched_service *s, double total)
{
    size_t to = sort_upper_bound(s->sorted, s->n, total); /* total's place among the kept */
    if (s->n < SCHED_SERVICE_WINDOW) {
        memmove(&s->sorted[to + 1], &s->sorted[to], (s->n - to) * sizeof *s->sorted);
        s->sorted[to] = total;
        s->n++;
    } else {
        size_t from = sort_upper_bound(s->sorted, s->n, s->ring[s->next]) - 1; /* the oldest */
        if (from < to) { /* those between move down; total lands just below its bound */
            to--;
            memmove(&s->sorted[from], &s->sorted[from + 1], (to - from) * sizeof *s->sorted);
        } else { /* those between move up */
            memmove(&s->sorted[to + 1], &s->sorted[to], (from - to) * sizeof *s->sorted);
        }
        s->sorted[to] = total;
    }
    s->ring[s->next] = total;
    s->next = (s->next + 1) % SCHED_SERVICE_WINDOW;
}

void sched_service_learn(struct sched_service *s, uint64_t prompt, double total)
{
    population_learn(s, total);
    uint64_t i;
    if (!intmap_get(&s->prompts, prompt, &i)) {
        if (s->n_attempts >= s->max_prompts)
            return;
        if (s->n_attempts == s->cap_attempts) {
            s->cap_attempts = s->cap_attempts ? 2 * s->cap_attempts : 64;
            s->attempts = xreallocarray(s->attempts, s->cap_attempts, sizeof *s->attempts);
        }
        i = s->n_attempts++;
        memset(&s->attempts[i], 0, sizeof s->attempts[i]);
        intmap_put(&s->prompts, prompt, i);
    }
    struct sched_attempts *a = &s->attempts[i];
    a->total[a->next] = (float)total;
    a->next = (a->next + 1) % SCHED_SERVICE_ATTEMPTS;
    a->n += a->n < SCHED_SERVICE_ATTEMPTS;
}

/* Points at evenly spaced ranks of the m values v[0, m) (ascending), less attained. */
static void ranks(const double *v, size_t m, double attained, struct sched_dist *out)
{
    int q = m < SCHED_DIST_POINTS ? (int)m : SCHED_DIST_POINTS;
    out->n = q;
    for (int j = 0; j < q; j++) {
        size_t k = (size_t)(((double)j + 0.5) / q * (double)m);
        out->tokens[j] = v[k] - attained;
        out->weight[j] = 1.0 / q;
    }
}

void sched_service_population(const struct sched_service *s, double attained,
                              struct sched_dist *out)
{
    size_t at = sort_upper_bound(s->sorted, s->n, attained);
    out->n = 0;
    if (at < s->n)
        ranks(s->sorted + at, s->n - at, attained, out);
}

int sched_service_prompt(const struct sched_service *s, uint64_t prompt, double attained,
                         struct sched_dist *out)
{
    uint64_t i;
    out->n = 0;
    if (!intmap_get(&s->prompts, prompt, &i))
        return 0;
    const struct sched_attempts *a = &s->attempts[i];
    double above[SCHED_SERVICE_ATTEMPTS];
    size_t m = 0;
    for (uint32_t k = 0; k < a->n; k++) { /* insertion: at most SCHED_SERVICE_ATTEMPTS */
        double x = a->total[k];
        if (!(x > attained))
            continue;
        size_t j = m++;
        for (; j > 0 && above[j - 1] > x; j--)
            above[j] = above[j - 1];
        above[j] = x;
    }
    if (m)
        ranks(above, m, attained, out);
    return (int)m;
}

double sched_dist_mean(const struct sched_dist *d)
{
    double sum = 0, w = 0;
    for (int k = 0; k < d->n; k++) {
        sum += d->weight[k] * d->tokens[k];
        w += d->weight[k];
    }
    return w > 0 ? sum / w : NAN;
}

void sched_dist_lognormal(double mean, double p90, struct sched_dist *out)
{
    /* standard normal quantiles at (j + 0.5) / 4, the upper half (the lower is their mirror) */
    static const double z[SCHED_DIST_POINTS / 2] = {0.1573, 0.4888, 0.8871, 1.5341};
    const double z90 = 1.2816;
    out->n = 0;
    if (!(mean > 0) || !(p90 > 0))
        return;
    /* mean = exp(mu + s^2 / 2), p90 = exp(mu + z90 s): s^2 / 2 - z90 s + log(p90 / mean) = 0 */
    double disc = z90 * z90 - 2 * log(p90 / mean);
    double sigma = disc > 0 ? z90 - sqrt(disc) : z90;
    sigma = sigma > 0 ? sigma : 0;
    double mu = log(mean) - sigma * sigma / 2;
    const int half = SCHED_DIST_POINTS / 2;
    double median = exp(mu);
    out->n = SCHED_DIST_POINTS;
    for (int j = 0; j < half; j++) {
        double up = exp(sigma * z[j]);
        out->tokens[half + j] = median * up;
        out->tokens[half - 1 - j] = median / up;
        out->weight[half + j] = out->weight[half - 1 - j] = 1.0 / SCHED_DIST_POINTS;
    }
}
