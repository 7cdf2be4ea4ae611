/* Tests of the calibration points and the constant fit (src/cost/points.c): the fit recovers
 * known constants from noisy points the cost model itself generates, within the noise; refuses
 * point sets that cannot determine a constant; and, on the calibration sheet's decode points,
 * a fit on some predicts the others within the sheet's stated error. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/points.h"
#include "util/rng.h"

#define TRUE_T_FIX 3.5e-3
#define TRUE_T_SEQ 45e-6
#define TRUE_MFU 0.42
#define NOISE 0.01 /* relative sd of the synthetic measurements */

struct bench {
    struct cost_shape shape;
    const struct spec_hardware *hw;
    struct cost_fit_input in;
};

static void bench_init(struct bench *b, enum cost_ref_model m, enum cost_ref_hw h)
{
    memset(b, 0, sizeof *b);
    cost_shape_init(&b->shape, cost_ref_model(m));
    b->hw = cost_ref_hardware(h);
    b->in.shape = &b->shape;
    b->in.hw = b->hw;
    cost_rollout_params_default(&b->in.rollout, b->hw);
    cost_train_params_default(&b->in.train);
}

/* A serving point at batch seqs, TP tp: 2000 tokens of context, prompts of 1000 tokens arriving
 * at one per 200 decode steps of each sequence. */
static struct cost_decode_point serving_point(double seqs, int tp)
{
    double prompts = seqs / 200.0;
    return (struct cost_decode_point){.kind = COST_DECODE_SERVING,
                                      .tp = tp,
                                      .decode_seqs = seqs,
                                      .ctx_tokens = 2000.0,
                                      .prefill_tokens = prompts * 1000.0,
                                      .prefill_seqs = prompts,
                                      .prefill_pairs = prompts * 1000.0 * 1001.0 / 2.0};
}

/* Sets every point's measurement to the model's value under the true constants times
 * (1 + NOISE·N(0,1)), from a fixed seed. Returns the rms relative error of the truth against
 * these measurements: a least-squares fit can only do better. */
static double measure_decode(const struct bench *b, struct cost_decode_point *pts, size_t n,
                             double *truth_s)
{
    double ss = 0.0;
    struct cost_rollout_params truth = b->in.rollout;
    truth.t_fix_s = TRUE_T_FIX;
    truth.t_seq_s = TRUE_T_SEQ;
    struct rng g = rng_keyed(11, 0, 0, 0);
    for (size_t i = 0; i < n; i++) {
        struct cost_rollout_pre pre;
        assert_int_equal(cost_rollout_pre_init(&pre, &b->shape, b->hw, &truth, pts[i].tp), 0);
        double t = cost_decode_point_time(&pre, &pts[i]);
        if (truth_s)
            truth_s[i] = t;
        pts[i].measured_s = t * (1.0 + NOISE * rng_normal(&g));
        ss += pow(t / pts[i].measured_s - 1.0, 2.0);
    }
    return sqrt(ss / (double)n);
}

/* A serving point's prompts, fewer than its iterations, are each prefilled in an iteration of
 * their own: the point is the mean of those iterations and the others, slower than the prompts
 * spread thin over every iteration (the linear layers turn from streaming weights to
 * computing), and still exactly linear in t_seq with the fit's column. With a prompt or more
 * per iteration, every iteration carries its share. */
static void test_prefill_in_iterations_of_their_own(void **state)
{
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_A100);
    struct cost_rollout_pre pre;
    assert_int_equal(cost_rollout_pre_init(&pre, &b.shape, b.hw, &b.in.rollout, 1), 0);
    struct cost_decode_point pt = serving_point(16.0, 1); /* 0.08 prompts of 1000 tokens */
    double f = pt.prefill_seqs;
    struct cost_batch with = {.decode_seqs = 16.0,
                              .decode_ctx_tokens = 16.0 * 2000.0,
                              .prefill_seqs = 1.0,
                              .prefill_tokens = 1000.0,
                              .prefill_pairs = 1000.0 * 1001.0 / 2.0,
                              .prefill_done_seqs = 1.0};
    struct cost_batch without = {.decode_seqs = 16.0, .decode_ctx_tokens = 16.0 * 2000.0};
    struct cost_batch spread = with;
    spread.prefill_seqs = spread.prefill_done_seqs = f;
    spread.prefill_tokens *= f;
    spread.prefill_pairs *= f;
    double t = cost_decode_point_time(&pre, &pt);
    double want = f * cost_iter_time(&pre, &with) + (1.0 - f) * cost_iter_time(&pre, &without);
    assert_true(fabs(t / want - 1.0) < 1e-12);
    assert_true(t > cost_iter_time(&pre, &spread) * 1.01);

    double terms[2];
    cost_decode_point_terms(&pt, terms);
    struct cost_rollout_pre more = pre;
    more.t_seq_s += 1e-3;
    assert_true(fabs((cost_decode_point_time(&more, &pt) - t) / 1e-3 - terms[1]) < 1e-9);

    struct cost_decode_point busy = serving_point(400.0, 1); /* 2 prompts per iteration */
    struct cost_batch all = {.decode_seqs = 400.0,
                             .decode_ctx_tokens = 400.0 * 2000.0,
                             .prefill_seqs = 2.0,
                             .prefill_tokens = 2000.0,
                             .prefill_pairs = 2.0 * 1000.0 * 1001.0 / 2.0,
                             .prefill_done_seqs = 2.0};
    assert_true(cost_decode_point_time(&pre, &busy) == cost_iter_time(&pre, &all));
}

static void test_decode_recovers_known_constants(void **state)
{
    static const double batches[] = {1, 4, 16, 32, 64, 128, 200};
    struct cost_decode_point pts[14];
    size_t n = 0;
    for (int tp = 1; tp <= 2; tp *= 2)
        for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++)
            pts[n++] = serving_point(batches[i], tp);
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_A800);
    double truth_s[14], truth_rms = measure_decode(&b, pts, n, truth_s);
    b.in.decode = pts;
    b.in.n_decode = n;
    b.in.fit = 1u << COST_CONST_T_FIX | 1u << COST_CONST_T_SEQ;
    struct cost_fit_outcome o;
    assert_int_equal(cost_fit_constants(&b.in, &o), 0);
    print_message(
        "t_fix %.4f ms ± %.4f (true %.4f), t_seq %.2f us ± %.2f (true %.2f), rms %.2f %%\n",
        o.value[COST_CONST_T_FIX] * 1e3, o.sd[COST_CONST_T_FIX] * 1e3, TRUE_T_FIX * 1e3,
        o.value[COST_CONST_T_SEQ] * 1e6, o.sd[COST_CONST_T_SEQ] * 1e6, TRUE_T_SEQ * 1e6,
        o.decode.rms_error * 100.0);
    assert_true(o.fitted[COST_CONST_T_FIX] && o.fitted[COST_CONST_T_SEQ]);
    assert_false(o.fitted[COST_CONST_TRAIN_MFU]);
    assert_true(fabs(o.value[COST_CONST_T_FIX] - TRUE_T_FIX) <= 3.0 * o.sd[COST_CONST_T_FIX]);
    assert_true(fabs(o.value[COST_CONST_T_SEQ] - TRUE_T_SEQ) <= 3.0 * o.sd[COST_CONST_T_SEQ]);
    /* within the noise: the standard errors are small against the values */
    assert_true(o.sd[COST_CONST_T_FIX] < 0.1 * TRUE_T_FIX);
    assert_true(o.sd[COST_CONST_T_SEQ] < 0.2 * TRUE_T_SEQ);
    assert_true(o.decode.rms_error <= truth_rms && o.decode.rms_error > 0.8 * truth_rms);
    for (size_t i = 0; i < n; i++) /* the fitted model is closer to the truth than the noise */
        assert_true(fabs(o.decode_modelled[i] / truth_s[i] - 1.0) < NOISE);
    assert_true(o.train.rms_error == 0.0); /* no training fit ran */
    cost_fit_outcome_free(&o);
}

/* Every point at one batch size, or one point: the per-sequence cost is not determined; held
 * at its value, the fixed cost is. */
static void test_decode_refuses_one_batch_size(void **state)
{
    struct cost_decode_point pts[3] = {serving_point(64, 1), serving_point(64, 1),
                                       serving_point(64, 1)};
    pts[1].ctx_tokens = 500.0; /* other contexts do not help: context is costed, not fitted */
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_A800);
    measure_decode(&b, pts, 3, NULL);
    b.in.decode = pts;
    b.in.n_decode = 3;
    b.in.fit = 1u << COST_CONST_T_FIX | 1u << COST_CONST_T_SEQ;
    struct cost_fit_outcome o;
    assert_int_equal(cost_fit_constants(&b.in, &o), LIBRA_EINFEAS);
    assert_int_equal(o.undetermined, COST_CONST_T_SEQ);
    assert_true(o.independence < COST_FIT_MIN_INDEPENDENCE);
    cost_fit_outcome_free(&o);

    b.in.n_decode = 1;
    assert_int_equal(cost_fit_constants(&b.in, &o), LIBRA_EINFEAS);
    assert_int_equal(o.undetermined, COST_CONST_T_SEQ);
    cost_fit_outcome_free(&o);

    /* held: t_seq stays, t_fix absorbs its error (64 × 15 us) plus the noise */
    b.in.n_decode = 3;
    b.in.fit = 1u << COST_CONST_T_FIX;
    assert_int_equal(cost_fit_constants(&b.in, &o), 0);
    assert_false(o.fitted[COST_CONST_T_SEQ]);
    assert_true(o.value[COST_CONST_T_SEQ] == b.in.rollout.t_seq_s);
    double absorbed = TRUE_T_FIX + 64.0 * (TRUE_T_SEQ - b.in.rollout.t_seq_s);
    assert_true(fabs(o.value[COST_CONST_T_FIX] - absorbed) < 0.002);
    cost_fit_outcome_free(&o);
}

/* Training steps of several sizes and layouts, measured under a known MFU with noise. */
static void test_train_recovers_known_mfu(void **state)
{
    enum { STEPS = 12 };
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_H20);
    struct cost_train_seqs seqs[STEPS];
    struct cost_train_point pts[STEPS];
    struct cost_train_params truth = b.in.train;
    truth.mfu = TRUE_MFU;
    struct rng g = rng_keyed(12, 0, 0, 0);
    for (int i = 0; i < STEPS; i++) {
        uint32_t len[1024];
        size_t n = 512 + 64 * (size_t)(i % 4);
        for (size_t k = 0; k < n; k++)
            len[k] = (uint32_t)(600 + 400 * i + (k % 7) * 50);
        cost_train_seqs_init(&seqs[i], &b.shape, len, n);
        pts[i] = (struct cost_train_point){.seqs = &seqs[i],
                                           .config = {.tp = 1,
                                                      .pp = 1,
                                                      .cp = i % 2 ? 2 : 1,
                                                      .dp = 8 << (i % 3),
                                                      .micro_batch_tokens = 16384.0 * 2,
                                                      .minibatches = 1 + i % 2,
                                                      .zero_stage = 3,
                                                      .full_recompute = true}};
        struct cost_train_load load;
        struct cost_train_step st;
        struct cost_train_scratch sc = {0};
        const struct cost_train_config *c = &pts[i].config;
        assert_int_equal(cost_train_deal(&seqs[i], &b.shape, c->dp, c->minibatches,
                                         c->micro_batch_tokens, false, &sc, &load),
                         0);
        cost_train_scratch_free(&sc);
        assert_int_equal(cost_train_step_time(&b.shape, b.hw, &truth, c, &load, &st), 0);
        pts[i].measured_s = st.step_s * (1.0 + NOISE * rng_normal(&g));
    }
    b.in.train_points = pts;
    b.in.n_train = STEPS;
    b.in.fit = 1u << COST_CONST_TRAIN_MFU;
    struct cost_fit_outcome o;
    assert_int_equal(cost_fit_constants(&b.in, &o), 0);
    double mfu = o.value[COST_CONST_TRAIN_MFU], sd = o.sd[COST_CONST_TRAIN_MFU];
    print_message("mfu %.4f ± %.4f (true %.2f), rms %.2f %%\n", mfu, sd, TRUE_MFU,
                  o.train.rms_error * 100.0);
    assert_true(o.fitted[COST_CONST_TRAIN_MFU]);
    assert_true(fabs(mfu - TRUE_MFU) <= 3.0 * sd && sd < 0.02 * TRUE_MFU);
    assert_true(o.train.rms_error < 1.5 * NOISE);
    cost_fit_outcome_free(&o);
    /* steps shorter than any MFU gives: the estimate of 1/MFU is < 0, the MFU no negative
     * number but past every bound */
    for (int i = 0; i < STEPS; i++)
        pts[i].measured_s *= 1e-3;
    assert_int_equal(cost_fit_constants(&b.in, &o), 0);
    print_message("mfu of steps 1000 times shorter: %g\n", o.value[COST_CONST_TRAIN_MFU]);
    assert_true(isinf(o.value[COST_CONST_TRAIN_MFU]) && o.value[COST_CONST_TRAIN_MFU] > 0.0);
    cost_fit_outcome_free(&o);
    for (int i = 0; i < STEPS; i++)
        cost_train_seqs_free(&seqs[i]);
}

/* Steps shorter than the model gives at any MFU, on a layout whose compute hides behind the
 * ZeRO-3 gathers at a low MFU (no recompute, 256 sequences of 4096 over 16 DP ranks of TP 2):
 * the MFU the fit starts from does not decide the outcome (a flat start read as undetermined). */
static void test_train_outcome_does_not_depend_on_the_start(void **state)
{
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_A800);
    uint32_t len[256];
    for (size_t k = 0; k < 256; k++)
        len[k] = 4096;
    struct cost_train_seqs seqs;
    cost_train_seqs_init(&seqs, &b.shape, len, 256);
    struct cost_train_point pt = {.seqs = &seqs,
                                  .measured_s = 14.89,
                                  .config = {.tp = 2,
                                             .pp = 1,
                                             .cp = 1,
                                             .dp = 16,
                                             .micro_batch_tokens = 4096.0,
                                             .minibatches = 1,
                                             .zero_stage = 3,
                                             .full_recompute = false}};
    b.in.train_points = &pt;
    b.in.n_train = 1;
    b.in.fit = 1u << COST_CONST_TRAIN_MFU;
    static const double starts[] = {0.05, 0.35, 0.9};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        struct cost_fit_outcome o;
        b.in.train.mfu = starts[i];
        assert_int_equal(cost_fit_constants(&b.in, &o), 0);
        print_message("from mfu %.2f: %g\n", starts[i], o.value[COST_CONST_TRAIN_MFU]);
        assert_true(isinf(o.value[COST_CONST_TRAIN_MFU]));
        cost_fit_outcome_free(&o);
    }
    cost_train_seqs_free(&seqs);
}

/* The project's own t_fix fit is the points fit of the first sheet point, to the bit. */
static void test_project_fit_goes_through_points(void **state)
{
    const struct cost_sheet_decode *sheet;
    assert_int_equal(cost_sheet_decode_points(&sheet), 4);
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_A100);
    b.in.decode = &sheet[0].point;
    b.in.n_decode = 1;
    b.in.fit = 1u << COST_CONST_T_FIX;
    struct cost_fit_outcome o;
    assert_int_equal(cost_fit_constants(&b.in, &o), 0);
    assert_true(o.value[COST_CONST_T_FIX] == cost_fit_t_fix(&b.in.rollout));
    assert_true(o.value[COST_CONST_T_FIX] == b.in.rollout.t_fix_s);
    cost_fit_outcome_free(&o);
}

/* Fits t_fix on the sheet points in `fit` (a mask) and returns the relative error of the
 * prediction of point `held`. */
static double sheet_prediction(unsigned fit, size_t held)
{
    const struct cost_sheet_decode *sheet;
    size_t n = cost_sheet_decode_points(&sheet);
    struct cost_shape shapes[8];
    struct cost_decode_point pts[8];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        cost_shape_init(&shapes[i], cost_ref_model(sheet[i].model));
        if (fit & (1u << i)) {
            pts[k] = sheet[i].point;
            pts[k++].shape = &shapes[i];
        }
    }
    struct bench b;
    bench_init(&b, COST_REF_QWEN25_7B, COST_REF_A100);
    b.in.decode = pts;
    b.in.n_decode = k;
    b.in.fit = 1u << COST_CONST_T_FIX;
    struct cost_fit_outcome o;
    assert_int_equal(cost_fit_constants(&b.in, &o), 0);
    struct cost_rollout_params p = b.in.rollout;
    p.t_fix_s = o.value[COST_CONST_T_FIX];
    cost_fit_outcome_free(&o);
    struct cost_rollout_pre pre;
    assert_int_equal(cost_rollout_pre_init(&pre, &shapes[held], b.hw, &p, sheet[held].point.tp), 0);
    return cost_decode_point_time(&pre, &sheet[held].point) / sheet[held].point.measured_s - 1.0;
}

/*
 * calibration.md §3.4 states its decode formula's error: fitted on the 7B's batch-1 speed, it
 * predicts the 14B and 32B within ±2 % (−2 %, −1 %); for the TP2 30K-token point it states no
 * band (its formula is −5 % there, "measured includes the 30K prefill"), and
 * docs/calibration.md's band is ±10 %. Here t_fix is fitted on every non-empty subset of the
 * three batch-1 TP1 points and every other point is predicted. Two predictions miss ±2 %: the
 * 7B from the 14B alone, or from the 14B and 32B, by under half a point (the 14B sits 1.3 %
 * below the model fitted on the 7B, and the 7B's 11.9 ms moves most with t_fix); they are
 * listed, bounded, and documented (docs/calibrate.md).
 */
static const struct {
    unsigned fit;
    size_t held;
    double bound;
} sheet_misses[] = {{2, 0, 0.025}, {6, 0, 0.025}};

static double sheet_band(unsigned fit, size_t held, const struct cost_sheet_decode *p)
{
    for (size_t i = 0; i < sizeof sheet_misses / sizeof sheet_misses[0]; i++)
        if (sheet_misses[i].fit == fit && sheet_misses[i].held == held)
            return sheet_misses[i].bound;
    return p->point.tp == 1 ? 0.02 : 0.10;
}

static void test_sheet_held_out_points(void **state)
{
    const struct cost_sheet_decode *sheet;
    size_t n = cost_sheet_decode_points(&sheet), misses = 0;
    for (unsigned fit = 1; fit < 8; fit++) {
        for (size_t held = 0; held < n; held++) {
            if (fit & (1u << held))
                continue;
            double err = sheet_prediction(fit, held), band = sheet_band(fit, held, &sheet[held]);
            bool stated = band == (sheet[held].point.tp == 1 ? 0.02 : 0.10);
            print_message("fit on {%s%s%s } predicts %-26s %+6.2f %% (%s ±%.1f %%)\n",
                          fit & 1 ? " 7B" : "", fit & 2 ? " 14B" : "", fit & 4 ? " 32B" : "",
                          sheet[held].id, err * 100.0, stated ? "band" : "known miss, bound",
                          band * 100.0);
            assert_true(fabs(err) <= band);
            misses += !stated && fabs(err) > 0.02;
        }
    }
    /* the known misses still miss: when the model changes so that one lands, update the list */
    assert_int_equal(misses, sizeof sheet_misses / sizeof sheet_misses[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_in_iterations_of_their_own),
        cmocka_unit_test(test_decode_recovers_known_constants),
        cmocka_unit_test(test_decode_refuses_one_batch_size),
        cmocka_unit_test(test_train_recovers_known_mfu),
        cmocka_unit_test(test_train_outcome_does_not_depend_on_the_start),
        cmocka_unit_test(test_project_fit_goes_through_points),
        cmocka_unit_test(test_sheet_held_out_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
