/*
 * Calibration points and the fit of the engine and trainer constants on them (points.h). The
 * decode constants enter the iteration time as plain sums, so their fit is one linear solve;
 * the trainer's MFU enters as 1/MFU in the compute time and, through the overlaps (ZeRO-3
 * gathers, the CP ring, the PP bubble), piecewise-linearly elsewhere, so its fit re-linearises
 * at each estimate until it stops moving.
 */
#include "cost/points.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static const char *const constant_names[COST_N_CONSTANTS] = {
    [COST_CONST_T_FIX] = "decode_t_fix_s",
    [COST_CONST_T_SEQ] = "decode_t_seq_s",
    [COST_CONST_TRAIN_MFU] = "train_mfu",
};

const char *cost_constant_name(enum cost_constant c)
{
    return constant_names[c];
}

int cost_constant_find(const char *name)
{
    for (int c = 0; c < COST_N_CONSTANTS; c++)
        if (strcmp(name, constant_names[c]) == 0)
            return c;
    return -1;
}

/* ---- decode points ------------------------------------------------------------------------ */

/* An iteration of pt's decoding batch with `scale` times its mean prefill per iteration. */
static void serving_batch(const struct cost_decode_point *pt, double scale, struct cost_batch *b)
{
    memset(b, 0, sizeof *b);
    b->decode_seqs = pt->decode_seqs;
    b->decode_ctx_tokens = pt->decode_seqs * pt->ctx_tokens;
    b->prefill_seqs = scale * pt->prefill_seqs;
    b->prefill_tokens = scale * pt->prefill_tokens;
    b->prefill_pairs = scale * pt->prefill_pairs;
    b->prefill_done_seqs = b->prefill_seqs; /* each prompt's last chunk samples a token */
}

double cost_decode_point_time(const struct cost_rollout_pre *pre,
                              const struct cost_decode_point *pt)
{
    if (pt->kind == COST_DECODE_SINGLE)
        return cost_single_request_s_per_token(pre, pt->prompt_tokens, pt->gen_tokens);
    struct cost_batch b;
    double f = pt->prefill_seqs; /* the share of iterations that carry a prompt */
    if (!(f > 0.0 && f < 1.0)) {
        serving_batch(pt, 1.0, &b);
        return cost_iter_time(pre, &b);
    }
    /* the prompts' iterations and the others: the mean of the two kinds */
    serving_batch(pt, 1.0 / f, &b);
    double with = cost_iter_time(pre, &b);
    serving_batch(pt, 0.0, &b);
    return f * with + (1.0 - f) * cost_iter_time(pre, &b);
}

void cost_decode_point_terms(const struct cost_decode_point *pt, double terms[2])
{
    if (pt->kind == COST_DECODE_SINGLE) {
        /* a prefill iteration, then one decode iteration per further token, each one sequence */
        double iterations = (pt->prompt_tokens > 0.0 ? 1.0 : 0.0) + floor(pt->gen_tokens) - 1.0;
        terms[0] = terms[1] = iterations / pt->gen_tokens;
        return;
    }
    terms[0] = 1.0;
    terms[1] = pt->decode_seqs + pt->prefill_seqs;
}

/* The decode constants to fit, in the order of the fit's columns. */
static size_t decode_fitted(unsigned fit, enum cost_constant fitted[2])
{
    size_t n = 0;
    for (int c = COST_CONST_T_FIX; c <= COST_CONST_T_SEQ; c++)
        if (fit & (1u << c))
            fitted[n++] = (enum cost_constant)c;
    return n;
}

static double *rollout_field(struct cost_rollout_params *p, enum cost_constant c)
{
    return c == COST_CONST_T_FIX ? &p->t_fix_s : &p->t_seq_s;
}

/* Each decode point's value under q, into v. Returns 0 or LIBRA_EINVAL (a TP the shape does not
 * divide). */
static int decode_values(const struct cost_fit_input *in, const struct cost_rollout_params *q,
                         double *v)
{
    for (size_t i = 0; i < in->n_decode; i++) {
        struct cost_rollout_pre pre;
        const struct cost_shape *shape = in->decode[i].shape ? in->decode[i].shape : in->shape;
        if (cost_rollout_pre_init(&pre, shape, in->hw, q, in->decode[i].tp))
            return LIBRA_EINVAL;
        v[i] = cost_decode_point_time(&pre, &in->decode[i]);
    }
    return 0;
}

static void record_undetermined(struct cost_fit_outcome *out, const struct cost_fit_result *r,
                                enum cost_constant c)
{
    out->undetermined = (int)c;
    out->independence = r->independence[r->undetermined];
}

static int fit_decode(const struct cost_fit_input *in, struct cost_fit_outcome *out)
{
    enum cost_constant fitted[2];
    size_t n = in->n_decode, p = decode_fitted(in->fit, fitted);
    struct cost_rollout_params q = in->rollout;
    for (size_t j = 0; j < p; j++)
        *rollout_field(&q, fitted[j]) = 0.0;
    /* with nothing to fit, the values under the held constants are the modelled ones */
    int rc = decode_values(in, &q, out->decode_modelled);
    if (rc || n == 0 || p == 0)
        return rc;
    double *y = xmallocarray(n, sizeof *y), *base = xmallocarray(n, sizeof *base),
           *x = xmallocarray(n * p, sizeof *x);
    for (size_t i = 0; i < n; i++) {
        double terms[2];
        y[i] = in->decode[i].measured_s;
        base[i] = out->decode_modelled[i];
        cost_decode_point_terms(&in->decode[i], terms);
        for (size_t j = 0; j < p; j++)
            x[i * p + j] = terms[fitted[j]];
    }
    struct cost_fit_system s = {n, p, y, base, x};
    rc = cost_fit_linear(&s, &out->decode);
    if (rc == LIBRA_EINFEAS)
        record_undetermined(out, &out->decode, fitted[out->decode.undetermined]);
    for (size_t j = 0; rc == 0 && j < p; j++) {
        out->fitted[fitted[j]] = true;
        out->value[fitted[j]] = out->decode.value[j];
        out->sd[fitted[j]] = out->decode.sd[j];
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        out->decode_modelled[i] = cost_fit_modelled(&s, &out->decode, i);
    free(y);
    free(base);
    free(x);
    return rc;
}

/* ---- training points ---------------------------------------------------------------------- */

/* The points' dealt loads, which do not depend on the MFU. */
struct train_state {
    const struct cost_fit_input *in;
    struct cost_train_load *load;
};

static int deal_points(struct train_state *t)
{
    const struct cost_fit_input *in = t->in;
    struct cost_train_scratch sc = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < in->n_train; i++) {
        const struct cost_train_point *pt = &in->train_points[i];
        const struct cost_train_config *c = &pt->config;
        rc = cost_train_deal(pt->seqs, in->shape, c->dp, c->minibatches, c->micro_batch_tokens,
                             c->balance_each_minibatch, &sc, &t->load[i]);
        if (rc == 0 && !(pt->measured_s > 0.0 && isfinite(pt->measured_s)))
            rc = LIBRA_EINVAL;
    }
    cost_train_scratch_free(&sc);
    return rc ? LIBRA_EINVAL : 0;
}

static double train_step(const struct train_state *t, size_t i, double mfu)
{
    struct cost_train_params p = t->in->train;
    struct cost_train_step st;
    p.mfu = mfu;
    if (cost_train_step_time(t->in->shape, t->in->hw, &p, &t->in->train_points[i].config,
                             &t->load[i], &st))
        return NAN;
    return st.step_s;
}

/* One linear fit of inv = 1/MFU around inv, into r. */
static int train_linear_fit(const struct train_state *t, double inv, double *y, double *base,
                            double *x, struct cost_fit_result *r)
{
    const double h = 1e-6;
    size_t n = t->in->n_train;
    for (size_t i = 0; i < n; i++) {
        double s0 = train_step(t, i, 1.0 / inv), s1 = train_step(t, i, 1.0 / (inv * (1.0 + h)));
        y[i] = t->in->train_points[i].measured_s;
        x[i] = (s1 - s0) / (inv * h);
        base[i] = s0 - x[i] * inv;
    }
    struct cost_fit_system s = {n, 1, y, base, x};
    return cost_fit_linear(&s, r);
}

/*
 * Where no step depends on 1/MFU at *inv (the compute hides behind the ZeRO-3 gathers or the
 * pipeline), none does at a smaller one either: the step rises with 1/MFU, convexly. So the
 * starting MFU does not decide the outcome: steps longer than modelled there (in sum of relative
 * differences) are looked for at half the MFU (*inv doubled, true returned); shorter ones no MFU
 * gives (*inv = 0, false returned).
 */
static bool flat_steps(const double *y, const double *modelled, size_t n, double *inv)
{
    double longer = 0.0;
    for (size_t i = 0; i < n; i++)
        longer += (y[i] - modelled[i]) / y[i];
    *inv = longer > 0.0 ? *inv * 2.0 : 0.0;
    return longer > 0.0;
}

/* Re-linearises until 1/MFU stops moving (it is exact on each linear piece). */
static int fit_mfu(const struct train_state *t, struct cost_fit_outcome *out)
{
    size_t n = t->in->n_train;
    double *y = xmallocarray(n, sizeof *y), *base = xmallocarray(n, sizeof *base),
           *x = xmallocarray(n, sizeof *x);
    double inv = 1.0 / t->in->train.mfu;
    int rc = 0;
    for (int it = 0; it < 50; it++) {
        rc = train_linear_fit(t, inv, y, base, x, &out->train);
        if (rc == LIBRA_EINFEAS && flat_steps(y, base, n, &inv))
            continue; /* longer than modelled: at a lower MFU */
        if (rc == LIBRA_EINFEAS) {
            rc = 0; /* shorter than modelled: no MFU gives them (inv 0) */
            break;
        }
        double next = out->train.value[0];
        /* an estimate past MFU 1 is refused, and the fit lies further out still (the step
         * rises with 1/MFU, convexly): beyond MFU 1 the compute hides behind the gathers, the
         * step stops depending on 1/MFU and the next iterate would divide by a slope near 0 */
        if (rc || !(next >= 1.0)) {
            inv = rc ? inv : next;
            break;
        }
        bool settled = fabs(next - inv) <= 1e-12 * inv;
        inv = next;
        if (settled)
            break;
    }
    if (rc == LIBRA_EINFEAS)
        record_undetermined(out, &out->train, COST_CONST_TRAIN_MFU);
    out->fitted[COST_CONST_TRAIN_MFU] = rc == 0;
    /* 1/MFU <= 0: the steps are shorter than the model gives with no compute time at all, so
     * no MFU gives them; INFINITY says so rather than a negative MFU */
    out->value[COST_CONST_TRAIN_MFU] = inv > 0.0 ? 1.0 / inv : INFINITY;
    out->sd[COST_CONST_TRAIN_MFU] = out->train.sd[0] / (inv * inv);
    free(y);
    free(base);
    free(x);
    return rc;
}

static int fit_train(const struct cost_fit_input *in, struct cost_fit_outcome *out)
{
    struct train_state t = {in, xcalloc(in->n_train + 1, sizeof *t.load)};
    int rc = deal_points(&t);
    if (rc == 0 && in->n_train > 0 && (in->fit & (1u << COST_CONST_TRAIN_MFU)))
        rc = fit_mfu(&t, out);
    double mfu = out->value[COST_CONST_TRAIN_MFU];
    for (size_t i = 0; rc == 0 && i < in->n_train; i++)
        out->train_modelled[i] = mfu > 0.0 ? train_step(&t, i, mfu) : NAN;
    free(t.load);
    return rc;
}

/* ---- both --------------------------------------------------------------------------------- */

int cost_fit_constants(const struct cost_fit_input *in, struct cost_fit_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->undetermined = -1;
    out->value[COST_CONST_T_FIX] = in->rollout.t_fix_s;
    out->value[COST_CONST_T_SEQ] = in->rollout.t_seq_s;
    out->value[COST_CONST_TRAIN_MFU] = in->train.mfu;
    for (int c = 0; c < COST_N_CONSTANTS; c++)
        out->sd[c] = NAN;
    out->decode_modelled = xcalloc(in->n_decode + 1, sizeof *out->decode_modelled);
    out->train_modelled = xcalloc(in->n_train + 1, sizeof *out->train_modelled);
    int rc = fit_decode(in, out);
    return rc ? rc : fit_train(in, out);
}

void cost_fit_outcome_free(struct cost_fit_outcome *out)
{
    free(out->decode_modelled);
    free(out->train_modelled);
    out->decode_modelled = out->train_modelled = NULL;
}
