/* Tests of the calibration (src/cost/calib.c): the evidence points land in their bands, the
 * fitted constants reproduce their fit points, and docs/calibration.md shows exactly the table
 * the code computes. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "spec/preset.h"

/* Rows known to miss their band, explained in docs/calibration.md. When the model changes so
 * that one lands, this list and the document change with it. */
static const char *const known_misses[] = {"train.verl.ratio64", "train.verl.ratio128"};

static bool known_miss(const char *id)
{
    for (size_t i = 0; i < sizeof known_misses / sizeof known_misses[0]; i++)
        if (strcmp(id, known_misses[i]) == 0)
            return true;
    return false;
}

/* The status a row must show for its error and band. */
static enum cost_calib_status band_status(const struct cost_calib_row *r)
{
    return fabs(r->error) <= r->tolerance ? COST_CALIB_IN_BAND : COST_CALIB_MISS;
}

static void test_evidence_lands_in_its_bands(void **state)
{
    size_t n = cost_calibration_rows(NULL, 0);
    struct cost_calib_row *rows = calloc(n, sizeof *rows);
    assert_int_equal(cost_calibration_rows(rows, n), n);
    size_t banded = 0, fitted = 0;
    for (size_t i = 0; i < n; i++) {
        const struct cost_calib_row *r = &rows[i];
        if (r->status == COST_CALIB_FITTED) {
            fitted++;
            if (fabs(r->error) > 0.01)
                print_error("%s: fit off by %.2f %%\n", r->id, r->error * 100.0);
            assert_true(fabs(r->error) <= 0.01);
        } else if (r->tolerance > 0.0) {
            banded++;
            /* the table shows each row's status as its error says, guarded or not */
            assert_int_equal(r->status, band_status(r));
            enum cost_calib_status want = known_miss(r->id) ? COST_CALIB_MISS : COST_CALIB_IN_BAND;
            if (r->status != want)
                print_error("%s: error %+.1f %% against ±%.0f %%\n", r->id, r->error * 100.0,
                            r->tolerance * 100.0);
            assert_int_equal(r->status, want);
        }
    }
    /* 3 decode rows, 32 Qwen3 speed rows (12 of them MoE), 8 Vidur H100 rows, 2 training
     * ratios, the MoE training step; 6 fit points (Qwen2.5-7B, the Qwen3 rig's four) */
    assert_int_equal(banded, 46);
    assert_int_equal(fitted, 6);
    free(rows);
}

static const struct cost_calib_row *find(const struct cost_calib_row *rows, size_t n,
                                         const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].id, id) == 0)
            return &rows[i];
    fail_msg("no row %s", id);
    return NULL;
}

/* The brief's evidence points by name, with their published values. */
static void test_named_evidence_points(void **state)
{
    size_t n = cost_calibration_rows(NULL, 0);
    struct cost_calib_row *rows = calloc(n, sizeof *rows);
    assert_int_equal(cost_calibration_rows(rows, n), n);
    const struct cost_calib_row *r = find(rows, n, "decode.qwen2.5-7b");
    assert_close(r->modelled, 11.9, 1e-9);
    r = find(rows, n, "decode.qwen2.5-14b");
    assert_true(r->published == 21.6 && fabs(r->error) <= 0.10);
    r = find(rows, n, "decode.qwen2.5-32b");
    assert_true(r->published == 45.2 && fabs(r->error) <= 0.10);
    static const char *h100[] = {"vidur.h100.34b.1.tp1", "vidur.h100.34b.1.tp8",
                                 "vidur.h100.34b.4096.tp1", "vidur.h100.34b.4096.tp8"};
    static const double published[] = {0.508, 0.091, 8.818, 1.306};
    for (int i = 0; i < 4; i++) {
        r = find(rows, n, h100[i]);
        assert_true(r->published == published[i] && fabs(r->error) <= 0.15);
    }
    r = find(rows, n, "train.verl.32");
    assert_close(r->published, 269.80, 1e-12);
    free(rows);
}

/* Qwen3's speed benchmark (H20, SGLang 0.4.6.post1, BF16, batch 1, 2048 tokens out): every BF16
 * row of Qwen3-4B to -32B and of the MoE Qwen3-30B-A3B and -235B-A22B, at every input length,
 * with its published speed and GPU count, in the table; the four dense fit points fitted, every
 * other dense row within ±10 % and every MoE row (never a fit point) within ±15 %. */
static void test_qwen3_speed_points(void **state)
{
    size_t n = cost_calibration_rows(NULL, 0);
    struct cost_calib_row *rows = calloc(n, sizeof *rows);
    assert_int_equal(cost_calibration_rows(rows, n), n);
    static const double prompt[6] = {1.0, 6144.0, 14336.0, 30720.0, 63488.0, 129024.0};
    static const char *const suffix[6] = {"", ".6k", ".14k", ".30k", ".62k", ".126k"};
    static const struct {
        const char *name;
        int tp[6];
        double speed[6]; /* as published: (prompt + 2048) tokens / s */
    } model[] = {
        {"qwen3-4b", {1, 1, 1, 1, 1, 1}, {133.13, 466.19, 789.25, 1165.75, 1423.98, 1371.04}},
        {"qwen3-8b", {1, 1, 1, 1, 1, 1}, {81.73, 296.25, 524.70, 832.67, 1112.78, 1173.32}},
        {"qwen3-14b", {1, 1, 1, 1, 1, 1}, {47.10, 174.85, 317.56, 525.80, 742.36, 826.15}},
        {"qwen3-32b", {1, 1, 1, 1, 1, 2}, {20.72, 77.82, 143.08, 240.75, 342.96, 711.40}},
        {"qwen3-30b-a3b", {1, 1, 1, 1, 1, 1}, {137.18, 490.10, 849.62, 1283.94, 1538.79, 1385.65}},
        {"qwen3-235b-a22b", {8, 8, 8, 8, 8, 8}, {74.50, 289.03, 546.73, 979.41, 1493.91, 1639.54}},
    };
    const struct cost_sheet_decode *d;
    size_t nd = cost_qwen3_speed_points(&d);
    assert_int_equal(nd, 36);
    size_t n_moe = 0;
    for (size_t m = 0; m < sizeof model / sizeof model[0]; m++)
        for (int k = 0; k < 6; k++) {
            char id[64], tp[8] = "";
            if (model[m].tp[k] > 1)
                snprintf(tp, sizeof tp, ".tp%d", model[m].tp[k]);
            snprintf(id, sizeof id, "decode.h20.%s%s%s", model[m].name, tp, suffix[k]);
            const struct cost_sheet_decode *p = NULL;
            for (size_t i = 0; i < nd; i++)
                if (strcmp(d[i].id, id) == 0)
                    p = &d[i];
            if (!p)
                fail_msg("no point %s", id);
            bool fit = p < d + 4;
            bool moe = cost_ref_model(p->model)->experts > 0;
            assert_string_equal(cost_ref_model(p->model)->name, model[m].name);
            assert_int_equal(p->point.tp, model[m].tp[k]);
            assert_true(p->point.prompt_tokens == prompt[k] && p->point.gen_tokens == 2048.0);
            /* Qwen3-8B at 1, 30 720 and 129 024 tokens in; Qwen3-32B at 1 */
            assert_true(fit == ((m == 1 && (k == 0 || k == 3 || k == 5)) || (m == 3 && k == 0)));
            n_moe += moe;
            const struct cost_calib_row *r = find(rows, n, id);
            assert_close(r->published, (prompt[k] + 2048.0) / model[m].speed[k] / 2048.0 * 1e3,
                         1e-9);
            assert_true(r->tolerance == (fit ? 0.0 : moe ? 0.15 : 0.10));
            assert_int_equal(r->status, fit ? COST_CALIB_FITTED : band_status(r));
            if (fit)
                continue;
            if (r->status != COST_CALIB_IN_BAND)
                print_error("%s: error %+.1f %% outside ±%.0f %%\n", id, r->error * 100.0,
                            r->tolerance * 100.0);
            assert_int_equal(r->status, COST_CALIB_IN_BAND);
        }
    assert_int_equal(n_moe, 12);
    free(rows);
}

/* The rig fit reproduces its four dense points (Qwen3-8B's first within 1 %, where t_fix is held
 * at 0), with physical constants, and does not depend on the H20 t_fix it is handed. */
static void test_qwen3_rig_fit(void **state)
{
    struct cost_rollout_params p, q, q2;
    struct cost_qwen3_rig rig, rig2;
    cost_rollout_params_default(&p, cost_ref_hardware(COST_REF_H20));
    cost_fit_qwen3_rig(&p, &rig, &q);
    assert_true(rig.eta_scale > 0.0 && rig.eta_scale <= 1.0);
    assert_true(rig.eta_kv > 0.0 && rig.eta_kv <= 1.0 && q.eta_kv == rig.eta_kv);
    assert_true(rig.mfu_attn > 0.0 && rig.mfu_attn <= 1.0 && q.mfu_attn == rig.mfu_attn);
    assert_true(rig.t_fix_s >= 0.0 && rig.t_fix_s < 4e-3);
    assert_true(q.t_fix_s == rig.t_fix_s);
    for (int i = 0; i < q.eta.n; i++)
        assert_close(q.eta.eff[i], p.eta.eff[i] * rig.eta_scale, 1e-12);
    const struct cost_sheet_decode *d;
    assert_true(cost_qwen3_speed_points(&d) >= 4);
    for (int i = 0; i < 4; i++) {
        struct cost_shape s;
        struct cost_rollout_pre pre;
        cost_shape_init(&s, cost_ref_model(d[i].model));
        assert_int_equal(
            cost_rollout_pre_init(&pre, &s, cost_ref_hardware(COST_REF_H20), &q, d[i].point.tp), 0);
        double tol = i == 0 && rig.t_fix_s == 0.0 ? 0.01 : 1e-5; /* rounds of coupled fits */
        assert_close(cost_decode_point_time(&pre, &d[i].point), d[i].point.measured_s, tol);
    }
    p.t_fix_s = 1.0;
    cost_fit_qwen3_rig(&p, &rig2, &q2);
    assert_true(rig2.eta_scale == rig.eta_scale && rig2.t_fix_s == rig.t_fix_s);
    assert_true(rig2.eta_kv == rig.eta_kv && rig2.mfu_attn == rig.mfu_attn);
}

/* Re-indexed by layer bytes per GPU, the curves give back calibration.md §3.3b's η(TP). */
static void test_curves_reproduce_eta_table(void **state)
{
    struct cost_curve eta, mu;
    cost_vidur_curves(&eta, &mu);
    assert_int_equal(eta.n, 8);
    assert_int_equal(mu.n, 8);
    struct cost_shape s8, s34;
    cost_shape_init(&s8, cost_ref_model(COST_REF_LLAMA3_8B));
    cost_shape_init(&s34, cost_ref_model(COST_REF_CODELLAMA_34B));
    static const double want8[] = {0.71, 0.60, 0.50, 0.41}, want34[] = {0.74, 0.73, 0.67, 0.56};
    for (int i = 0, tp = 1; i < 4; i++, tp *= 2) {
        assert_close(cost_curve_eval(&eta, 2.0 * s8.layer_params / tp), want8[i], 0.015);
        assert_close(cost_curve_eval(&eta, 2.0 * s34.layer_params / tp), want34[i], 0.015);
    }
    for (int i = 0; i < mu.n; i++) /* GEMM efficiency: 53-73 % of peak (§3.3b) */
        assert_true(mu.eff[i] > 0.5 && mu.eff[i] < 0.75);
}

static void test_t_fix_fit(void **state)
{
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, cost_ref_hardware(COST_REF_A800));
    /* calibration.md §3.4: t_fix = 2.06 ms with a coarser η; the range is 1-4 ms */
    assert_true(p.t_fix_s > 1e-3 && p.t_fix_s < 4e-3);
    /* the fit is exact: refitting with the fitted value changes nothing */
    assert_close(cost_fit_t_fix(&p), p.t_fix_s, 1e-12);
}

static void test_training_fit(void **state)
{
    struct cost_train_params p;
    struct cost_train_fit f;
    cost_train_params_default(&p);
    cost_fit_train(&p, &f);
    assert_close(f.t_s[0], 269.80, 0.01);
    assert_true(f.mfu == p.mfu);
    assert_true(f.mean_response_tokens > 100.0 && f.mean_response_tokens < 28672.0);
    assert_true(f.t_s[2] < f.t_s[1] && f.t_s[1] < f.t_s[0]);
    /* the other direction: at a given mean response, the fitted MFU reproduces 32 GPUs */
    cost_fit_train_mfu(&p, 800.0, &f);
    assert_close(f.t_s[0], 269.80, 1e-6);
    assert_true(f.mfu > 0.2 && f.mfu < 0.9);

    uint32_t len[COST_DAPO_SEQS];
    cost_dapo_lengths(len, 2000.0);
    double sum = 0.0;
    for (size_t i = 0; i < COST_DAPO_SEQS; i++) {
        assert_true(len[i] > 200 && len[i] <= 200 + 28672);
        sum += len[i] - 200.0;
    }
    assert_close(sum / COST_DAPO_SEQS, 2000.0, 0.01);
}

static void test_document_matches_the_code(void **state)
{
    static const char begin[] = "<!-- BEGIN cost calibration -->\n";
    static const char end[] = "<!-- END cost calibration -->";
    size_t len;
    char *doc = test_read_file(test_source_path("docs/calibration.md"), &len);
    char *from = strstr(doc, begin), *to = strstr(doc, end);
    assert_non_null(from);
    assert_non_null(to);
    from += strlen(begin);
    *to = '\0';
    char *want = cost_calibration_markdown();
    if (strcmp(from, want) != 0)
        print_error("docs/calibration.md is stale: regenerate its section with "
                    "`libra cost calibration`\n");
    assert_string_equal(from, want);
    free(want);
    free(doc);
}

/* The calibration's reference GPUs and Qwen shapes are copies kept in cost/ (pure, no preset
 * registry to hand); they must equal the built-in presets, or evidence and users' runs drift. */
static void test_references_equal_the_builtin_presets(void **state)
{
    struct spec_presets p;
    struct libra_error err;
    assert_int_equal(spec_presets_init(&p, &err), 0);
    for (int h = COST_REF_A100; h <= COST_REF_H20; h++) {
        const struct spec_hardware *r = cost_ref_hardware(h);
        const struct spec_hardware *b = spec_hardware_find(&p, r->name);
        assert_non_null(b);
        assert_true(r->bf16_flops_per_s == b->bf16_flops_per_s);
        assert_true(r->hbm_bytes == b->hbm_bytes);
        assert_true(r->hbm_bw_bytes_per_s == b->hbm_bw_bytes_per_s);
        assert_true(r->nvlink_bw_bytes_per_s == b->nvlink_bw_bytes_per_s);
        assert_true(r->allreduce_bus_bw_bytes_per_s == b->allreduce_bus_bw_bytes_per_s);
        assert_true(r->allreduce_latency_s == b->allreduce_latency_s);
        assert_true(r->inter_node_bw_bytes_per_s == b->inter_node_bw_bytes_per_s);
        assert_int_equal(r->gpus_per_node, b->gpus_per_node);
    }
    static const enum cost_ref_model qwen[] = {
        COST_REF_QWEN25_7B, COST_REF_QWEN25_14B,    COST_REF_QWEN25_32B,
        COST_REF_QWEN3_4B,  COST_REF_QWEN3_8B,      COST_REF_QWEN3_14B,
        COST_REF_QWEN3_32B, COST_REF_QWEN3_30B_A3B, COST_REF_QWEN3_235B_A22B};
    for (size_t m = 0; m < sizeof qwen / sizeof qwen[0]; m++) {
        const struct spec_model *r = cost_ref_model(qwen[m]);
        const struct spec_model *b = spec_model_find(&p, r->name);
        assert_non_null(b);
        assert_int_equal(r->layers, b->layers);
        assert_int_equal(r->hidden, b->hidden);
        assert_int_equal(r->heads, b->heads);
        assert_int_equal(r->kv_heads, b->kv_heads);
        assert_int_equal(r->head_dim, b->head_dim);
        assert_int_equal(r->ffn, b->ffn);
        assert_int_equal(r->vocab, b->vocab);
        assert_int_equal(r->tied_embeddings, b->tied_embeddings);
        assert_int_equal(r->qkv_bias, b->qkv_bias);
        assert_int_equal(r->experts, b->experts);
        assert_int_equal(r->top_k, b->top_k);
        assert_int_equal(r->expert_ffn, b->expert_ffn);
    }
    spec_presets_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evidence_lands_in_its_bands),
        cmocka_unit_test(test_named_evidence_points),
        cmocka_unit_test(test_qwen3_speed_points),
        cmocka_unit_test(test_qwen3_rig_fit),
        cmocka_unit_test(test_curves_reproduce_eta_table),
        cmocka_unit_test(test_t_fix_fit),
        cmocka_unit_test(test_training_fit),
        cmocka_unit_test(test_document_matches_the_code),
        cmocka_unit_test(test_references_equal_the_builtin_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
