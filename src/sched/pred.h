/*
 * The baseline predictor: a ridge regression of log(1 + remaining tokens) on the features a
 * prefix tree sees (the `predictor` policy, "does causal signal beat prediction?").
 *
 * Features of a decision point: an intercept; the turn index; log(1 + tokens generated so
 * far); the path's counts of returns by status and by size class; the last state's id hashed
 * into SCHED_PRED_HASH one-hot slots; and, when the caller knows it, whether siblings have
 * finished and log(1 + their mean total). The normal equations are accumulated as data arrive
 * and solved (Cholesky) lazily before the next prediction, so learning is O(d^2) per point and
 * prediction O(d). Used through sched/model.h; internal to sched/.
 */
#ifndef SCHED_PRED_H
#define SCHED_PRED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_PRED_HASH 32
#define SCHED_PRED_DIM (3 + 4 + 3 + SCHED_PRED_HASH + 2)

struct sched_state_info;

struct sched_pred {
    double xtx[SCHED_PRED_DIM * SCHED_PRED_DIM]; /* sum of x x^T */
    double xty[SCHED_PRED_DIM];                  /* sum of x y */
    double yty;                                  /* sum of y^2 */
    uint64_t n;                                  /* points */
    double w[SCHED_PRED_DIM];                    /* fitted weights */
    double sigma;                                /* residual standard deviation of the log */
    bool stale;                                  /* data added since the last fit */
};

/* Builds the feature vector x (SCHED_PRED_DIM doubles) of a decision point. */
void sched_pred_features(const struct sched_state_info *info, const uint32_t *states, size_t n,
                         int64_t generated_tokens, double sibling_mean_tokens, double *x);

/* Empties p. */
void sched_pred_reset(struct sched_pred *p);

/* Adds one point: features x and remaining tokens y (>= 0). */
void sched_pred_add(struct sched_pred *p, const double *x, double remaining_tokens);

/*
 * Predicts for x: *mean_tokens and *p90_tokens from the log-normal fit. Returns false when p
 * has no data (outputs untouched).
 */
bool sched_pred_estimate(struct sched_pred *p, const double *x, double *mean_tokens,
                         double *p90_tokens);

#endif
