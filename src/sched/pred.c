/*
 * The baseline predictor's regression; see pred.h.
 *
 * Ridge (lambda 1 on every weight but the intercept) keeps the system positive definite when
 * a hashed slot or the sibling feature never fires. The fit runs in O(d^3) with d = 44, a few
 * tens of microseconds, only after new data.
 */
#include "sched/pred.h"

#include <math.h>
#include <string.h>

#include "sched/obs.h"
#include "sched/tree.h"

#define RIDGE_LAMBDA 1.0
#define Z90 1.2815515655446004 /* standard normal 0.9 quantile */

enum {
    F_BIAS,
    F_TURN,
    F_LOG_GEN,
    F_STATUS,                         /* 4 slots */
    F_SIZE = F_STATUS + 4,            /* 3 slots */
    F_LAST = F_SIZE + 3,              /* SCHED_PRED_HASH slots */
    F_SIB = F_LAST + SCHED_PRED_HASH, /* has siblings, log sibling mean */
};

void sched_pred_features(const struct sched_state_info *info, const uint32_t *states, size_t n,
                         int64_t generated_tokens, double sibling_mean_tokens, double *x)
{
    memset(x, 0, sizeof(double) * SCHED_PRED_DIM);
    x[F_BIAS] = 1.0;
    x[F_TURN] = (double)n;
    x[F_LOG_GEN] = log1p((double)(generated_tokens > 0 ? generated_tokens : 0));
    for (size_t i = 0; i < n; i++) {
        if (states[i] == SCHED_STATE_NONE)
            continue;
        for (int k = 0; k < 4; k++)
            x[F_STATUS + k] += info[states[i]].status_count[k];
        for (int k = 0; k < 3; k++)
            x[F_SIZE + k] += info[states[i]].size_count[k];
    }
    if (n > 0 && states[n - 1] != SCHED_STATE_NONE)
        x[F_LAST + states[n - 1] % SCHED_PRED_HASH] = 1.0;
    if (!isnan(sibling_mean_tokens)) {
        x[F_SIB] = 1.0;
        x[F_SIB + 1] = log1p(sibling_mean_tokens > 0 ? sibling_mean_tokens : 0);
    }
}

void sched_pred_reset(struct sched_pred *p)
{
    memset(p, 0, sizeof *p);
}

void sched_pred_add(struct sched_pred *p, const double *x, double remaining_tokens)
{
    double y = log1p(remaining_tokens > 0 ? remaining_tokens : 0);
    for (int i = 0; i < SCHED_PRED_DIM; i++) {
        if (x[i] == 0)
            continue;
        for (int j = 0; j < SCHED_PRED_DIM; j++)
            p->xtx[i * SCHED_PRED_DIM + j] += x[i] * x[j];
        p->xty[i] += x[i] * y;
    }
    p->yty += y * y;
    p->n++;
    p->stale = true;
}

/* Solves (A + lambda I') w = b by Cholesky; A is SCHED_PRED_DIM square. */
static void ridge_solve(const double *a, const double *b, double *w)
{
    enum { D = SCHED_PRED_DIM };
    double l[D * D];
    memset(l, 0, sizeof l);
    for (int i = 0; i < D; i++) {
        for (int j = 0; j <= i; j++) {
            double s = a[i * D + j] + (i == j && i != F_BIAS ? RIDGE_LAMBDA : 0.0);
            if (i == j && i == F_BIAS)
                s += 1e-9; /* keeps an empty intercept column definite */
            for (int k = 0; k < j; k++)
                s -= l[i * D + k] * l[j * D + k];
            l[i * D + j] = i == j ? sqrt(s > 1e-12 ? s : 1e-12) : s / l[j * D + j];
        }
    }
    double z[D];
    for (int i = 0; i < D; i++) {
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= l[i * D + k] * z[k];
        z[i] = s / l[i * D + i];
    }
    for (int i = D - 1; i >= 0; i--) {
        double s = z[i];
        for (int k = i + 1; k < D; k++)
            s -= l[k * D + i] * w[k];
        w[i] = s / l[i * D + i];
    }
}

static void fit(struct sched_pred *p)
{
    enum { D = SCHED_PRED_DIM };
    ridge_solve(p->xtx, p->xty, p->w);
    /* SSE = y'y - 2 w'X'y + w'X'X w */
    double sse = p->yty;
    for (int i = 0; i < D; i++) {
        double xw = 0;
        for (int j = 0; j < D; j++)
            xw += p->xtx[i * D + j] * p->w[j];
        sse += p->w[i] * (xw - 2.0 * p->xty[i]);
    }
    p->sigma = p->n > 1 && sse > 0 ? sqrt(sse / (double)(p->n - 1)) : 0.0;
    p->stale = false;
}

bool sched_pred_estimate(struct sched_pred *p, const double *x, double *mean_tokens,
                         double *p90_tokens)
{
    if (p->n == 0)
        return false;
    if (p->stale)
        fit(p);
    double mu = 0;
    for (int i = 0; i < SCHED_PRED_DIM; i++)
        mu += p->w[i] * x[i];
    *mean_tokens = fmax(0.0, exp(mu + 0.5 * p->sigma * p->sigma) - 1.0);
    *p90_tokens = fmax(0.0, exp(mu + Z90 * p->sigma) - 1.0);
    return true;
}
