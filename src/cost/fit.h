/*
 * Fitting the cost model's constants to measurements: the one solver behind the project's own
 * calibration (docs/calibration.md, cost/calib.h) and `libra calibrate` (docs/calibrate.md).
 *
 * The constants fitted are additive terms of the model (a fixed cost per engine iteration, a
 * cost per running sequence) or inverse rates (1/MFU), so near a solution every prediction is
 * a line in them: modelled_i = base_i + Σ_j x_ij·c_j. A fit is a least-squares problem over
 * relative residuals (modelled − measured)/measured, because points span milliseconds to
 * minutes and their noise scales with them. Before solving, every constant's column is tested
 * for independence from the columns before it: where the points cannot tell a constant from
 * the others (decode points all at one batch size cannot separate the fixed per-iteration cost
 * from the per-sequence cost), the fit refuses instead of returning an arbitrary split.
 *
 * Pure and reentrant: no allocation beyond the caller's arrays, no globals.
 */
#ifndef COST_FIT_H
#define COST_FIT_H

#include <stdbool.h>
#include <stddef.h>

#include "libra/libra.h"

#define COST_FIT_MAX_PARAMS 4

/*
 * A column whose share not explained by the columns before it (after scaling by 1/measured
 * and to unit length) is below this is not determined by the points: its constant could trade
 * against the others by a factor of 100 or more without changing the fit.
 */
#define COST_FIT_MIN_INDEPENDENCE 0.01

/* A linear fitting problem. Arrays are the caller's. */
struct cost_fit_system {
    size_t n_points;
    size_t n_params;        /* 1..COST_FIT_MAX_PARAMS */
    const double *measured; /* per point, > 0 and finite */
    const double *base;     /* per point: the model with every fitted constant at 0 */
    const double *x;        /* n_points × n_params, row-major: what one unit of constant j
                             * adds to point i */
};

/* What a fit found. Values are in the units of the constants. */
struct cost_fit_result {
    double value[COST_FIT_MAX_PARAMS];
    double sd[COST_FIT_MAX_PARAMS]; /* standard error from the residuals; NAN when there are
                                     * no more points than constants (the fit is exact) */
    double independence[COST_FIT_MAX_PARAMS]; /* 0..1, see COST_FIT_MIN_INDEPENDENCE */
    int undetermined;                         /* first constant the points do not determine; -1 */
    double rms_error;                         /* relative, over the points */
    double max_error;                         /* largest |relative error| */
};

/*
 * Fits s's constants. With as many points as constants the system is solved exactly (so one
 * point fixes one constant to the bit: value = (measured − base)/x). Returns 0; LIBRA_EINVAL
 * when s is malformed (no point, n_params out of range, a measured value not > 0 or a
 * non-finite entry); LIBRA_EINFEAS when a constant is not determined (out->undetermined names
 * it, out->independence[] says by how much; values are NAN).
 */
int cost_fit_linear(const struct cost_fit_system *s, struct cost_fit_result *out);

/* The fitted model's value of point i: base_i + Σ_j x_ij·value_j. */
double cost_fit_modelled(const struct cost_fit_system *s, const struct cost_fit_result *r,
                         size_t i);

/*
 * Solves a monotone equation by bisection: halves [lo, hi] `iterations` times, moving lo up to
 * the midpoint m whenever below(ctx, m) (the model at m is still below its target) and hi down
 * otherwise. Returns lo. For fits of one constant whose effect is a step function of it (a
 * length sample's rounded lengths), where the linear form does not hold.
 */
double cost_fit_bisect(double lo, double hi, int iterations, bool (*below)(void *ctx, double m),
                       void *ctx);

#endif
