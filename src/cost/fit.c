/*
 * The least-squares fit of cost-model constants (fit.h). The systems are tiny (a handful of
 * constants, tens to thousands of points), so the normal equations of the column-normalised
 * system are accumulated in one pass and factored by Cholesky: the factor's diagonal is each
 * column's independence from the ones before it, which is the test that refuses an
 * undetermined constant, and the same factor gives the solution and its standard errors.
 */
#include "cost/fit.h"

#include <math.h>
#include <string.h>

#define P COST_FIT_MAX_PARAMS

static double x_at(const struct cost_fit_system *s, size_t i, size_t j)
{
    return s->x[i * s->n_params + j];
}

static bool well_formed(const struct cost_fit_system *s)
{
    if (s->n_points == 0 || s->n_params == 0 || s->n_params > P)
        return false;
    for (size_t i = 0; i < s->n_points; i++) {
        if (!isfinite(s->measured[i]) || s->measured[i] <= 0.0 || !isfinite(s->base[i]))
            return false;
        for (size_t j = 0; j < s->n_params; j++)
            if (!isfinite(x_at(s, i, j)))
                return false;
    }
    return true;
}

/* Gram matrix and right-hand side of the relative system: rows x_i/y_i, targets
 * (y_i − base_i)/y_i. */
static void normal_equations(const struct cost_fit_system *s, double gram[P][P], double rhs[P])
{
    size_t p = s->n_params;
    for (size_t i = 0; i < s->n_points; i++) {
        double y = s->measured[i], b = (y - s->base[i]) / y;
        for (size_t j = 0; j < p; j++) {
            double aj = x_at(s, i, j) / y;
            rhs[j] += aj * b;
            for (size_t k = 0; k < p; k++)
                gram[j][k] += aj * x_at(s, i, k) / y;
        }
    }
}

/*
 * Cholesky factor chol of the correlation matrix of the columns (gram scaled by the column
 * norms). Its diagonal is each column's independence: the length of what remains of the unit
 * column once its projection on the columns before it is removed. Returns the first column
 * below COST_FIT_MIN_INDEPENDENCE, or -1.
 */
static int factor(size_t p, double gram[P][P], const double norm[P], double chol[P][P],
                  double independence[P])
{
    for (size_t j = 0; j < p; j++) {
        for (size_t k = 0; k <= j; k++) {
            double v = norm[j] > 0.0 && norm[k] > 0.0 ? gram[j][k] / (norm[j] * norm[k]) : 0.0;
            for (size_t m = 0; m < k; m++)
                v -= chol[j][m] * chol[k][m];
            if (k < j) {
                chol[j][k] = v / chol[k][k];
                continue;
            }
            independence[j] = v > 0.0 ? sqrt(v) : 0.0;
            if (independence[j] < COST_FIT_MIN_INDEPENDENCE)
                return (int)j;
            chol[j][j] = independence[j];
        }
    }
    return -1;
}

/* Solves (chol·cholᵀ) z = c. */
static void chol_solve(size_t p, double chol[P][P], const double c[P], double z[P])
{
    for (size_t j = 0; j < p; j++) {
        double v = c[j];
        for (size_t m = 0; m < j; m++)
            v -= chol[j][m] * z[m];
        z[j] = v / chol[j][j];
    }
    for (size_t j = p; j-- > 0;) {
        double v = z[j];
        for (size_t m = j + 1; m < p; m++)
            v -= chol[m][j] * z[m];
        z[j] = v / chol[j][j];
    }
}

/* As many points as constants: X·c = measured − base by Gaussian elimination with partial
 * pivoting, unweighted (weights do not move an exact solution, and one point then fixes one
 * constant to the bit). */
static void solve_square(const struct cost_fit_system *s, double value[P])
{
    size_t p = s->n_params;
    double a[P][P + 1];
    for (size_t i = 0; i < p; i++) {
        for (size_t j = 0; j < p; j++)
            a[i][j] = x_at(s, i, j);
        a[i][p] = s->measured[i] - s->base[i];
    }
    for (size_t col = 0; col < p; col++) {
        size_t best = col;
        for (size_t r = col + 1; r < p; r++)
            if (fabs(a[r][col]) > fabs(a[best][col]))
                best = r;
        for (size_t j = 0; j <= p; j++) {
            double t = a[col][j];
            a[col][j] = a[best][j];
            a[best][j] = t;
        }
        for (size_t r = col + 1; r < p; r++) {
            double f = a[r][col] / a[col][col];
            for (size_t j = col; j <= p; j++)
                a[r][j] -= f * a[col][j];
        }
    }
    for (size_t j = p; j-- > 0;) {
        double v = a[j][p];
        for (size_t m = j + 1; m < p; m++)
            v -= a[j][m] * value[m];
        value[j] = v / a[j][j];
    }
}

double cost_fit_modelled(const struct cost_fit_system *s, const struct cost_fit_result *r, size_t i)
{
    double v = s->base[i];
    for (size_t j = 0; j < s->n_params; j++)
        v += x_at(s, i, j) * r->value[j];
    return v;
}

/* Relative errors of the fitted model; returns their sum of squares. */
static double errors(const struct cost_fit_system *s, struct cost_fit_result *r)
{
    double ss = 0.0;
    for (size_t i = 0; i < s->n_points; i++) {
        double e = (cost_fit_modelled(s, r, i) - s->measured[i]) / s->measured[i];
        ss += e * e;
        r->max_error = fmax(r->max_error, fabs(e));
    }
    r->rms_error = sqrt(ss / (double)s->n_points);
    return ss;
}

/* Standard errors: the residual variance times the diagonal of the inverse normal matrix. */
static void standard_errors(const struct cost_fit_system *s, double ss, double chol[P][P],
                            const double norm[P], struct cost_fit_result *r)
{
    size_t p = s->n_params;
    if (s->n_points <= p)
        return; /* exact: no residual to measure the noise by */
    double sigma = sqrt(ss / (double)(s->n_points - p));
    for (size_t j = 0; j < p; j++) {
        double unit[P] = {0}, z[P];
        unit[j] = 1.0;
        chol_solve(p, chol, unit, z);
        r->sd[j] = sigma * sqrt(z[j]) / norm[j];
    }
}

int cost_fit_linear(const struct cost_fit_system *s, struct cost_fit_result *out)
{
    memset(out, 0, sizeof *out);
    out->undetermined = -1;
    for (size_t j = 0; j < P; j++)
        out->value[j] = out->sd[j] = NAN;
    if (!well_formed(s))
        return LIBRA_EINVAL;
    size_t p = s->n_params;
    double gram[P][P] = {{0}}, rhs[P] = {0}, norm[P], chol[P][P] = {{0}};
    normal_equations(s, gram, rhs);
    for (size_t j = 0; j < p; j++)
        norm[j] = sqrt(gram[j][j]);
    out->undetermined = factor(p, gram, norm, chol, out->independence);
    if (out->undetermined >= 0)
        return LIBRA_EINFEAS;
    if (s->n_points == p) {
        solve_square(s, out->value);
    } else {
        double c[P], z[P];
        for (size_t j = 0; j < p; j++)
            c[j] = rhs[j] / norm[j];
        chol_solve(p, chol, c, z);
        for (size_t j = 0; j < p; j++)
            out->value[j] = z[j] / norm[j];
    }
    standard_errors(s, errors(s, out), chol, norm, out);
    return 0;
}

double cost_fit_bisect(double lo, double hi, int iterations, bool (*below)(void *ctx, double m),
                       void *ctx)
{
    for (int it = 0; it < iterations; it++) {
        double mid = (lo + hi) / 2.0;
        if (below(ctx, mid))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
