/*
 * What attained service and earlier attempts say about a trajectory's remaining work: the
 * distributions cmlfq_h weighs beside the prefix trees (docs/routing.md "cmlfq_h").
 *
 * MLFQ's premise is that a job's service so far predicts what is left; RL adds that a prompt is
 * attempted again and again (a GRPO group's siblings, every epoch's pass over the pool), and on
 * real agent runs earlier attempts at a task predict the next attempt's length better than its
 * tool returns do (docs/routing.md "Real data"). So the model keeps, from every trajectory it
 * learns: the total generated tokens of the last SCHED_SERVICE_WINDOW (the population), and of
 * the last SCHED_SERVICE_ATTEMPTS at each prompt. A truncated trajectory's total enters as it is:
 * for what a bucket spends, the work it was cut at is its work.
 *
 * A distribution is a small set of weighted points of remaining tokens, given the tokens a
 * trajectory has generated so far (attained): the totals above attained, less attained, at
 * evenly spaced ranks. Rebuilding the trees leaves this alone (it is a window already). Pure.
 */
#ifndef SCHED_SERVICE_H
#define SCHED_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/intmap.h"

#define SCHED_SERVICE_WINDOW 2048       /* totals of the population kept */
#define SCHED_SERVICE_ATTEMPTS 8        /* totals kept per prompt */
#define SCHED_SERVICE_PROMPTS (1 << 18) /* prompts whose attempts are kept (about 40 B each) */
#define SCHED_DIST_POINTS 8 /* points of one source's distribution (its quartile midpoints) */

/* Remaining tokens as weighted points, ascending (weights sum to 1 when n > 0; n 0: nothing
 * known). */
struct sched_dist {
    int n;
    double tokens[SCHED_DIST_POINTS];
    double weight[SCHED_DIST_POINTS];
};

/* One prompt's last attempts. */
struct sched_attempts {
    uint32_t n, next; /* held, and the ring slot written next */
    float total[SCHED_SERVICE_ATTEMPTS];
};

struct sched_service {
    double sorted[SCHED_SERVICE_WINDOW]; /* the population's totals, ascending */
    double ring[SCHED_SERVICE_WINDOW];   /* the same in arrival order (the oldest leaves) */
    size_t n, next;
    struct intmap prompts; /* prompt -> index into attempts */
    struct sched_attempts *attempts;
    size_t n_attempts, cap_attempts, max_prompts;
};

/* An empty service history keeping at most max_prompts prompts' attempts. */
void sched_service_init(struct sched_service *s, size_t max_prompts);
void sched_service_free(struct sched_service *s);

/* Learns a trajectory of prompt that generated total tokens. */
void sched_service_learn(struct sched_service *s, uint64_t prompt, double total);

/* The population's remaining tokens past attained into out (out->n 0 when no total exceeds it). */
void sched_service_population(const struct sched_service *s, double attained,
                              struct sched_dist *out);

/* The prompt's attempts' remaining tokens past attained into out, and how many attempts
 * exceeded it (0: out->n 0). */
int sched_service_prompt(const struct sched_service *s, uint64_t prompt, double attained,
                         struct sched_dist *out);

/* d's mean; NAN when empty. */
double sched_dist_mean(const struct sched_dist *d);

/* A log-normal through mean and p90 as SCHED_DIST_POINTS points (the trees' estimate). */
void sched_dist_lognormal(double mean, double p90, struct sched_dist *out);

#endif
