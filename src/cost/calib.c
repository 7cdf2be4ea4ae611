/*
 * Calibration data, fits and the evidence table (see calib.h). Every published number the cost
 * model is fitted on or checked against is in this file, with its source, so that one place
 * answers "where does this constant come from" and "how far off is the model".
 */
#include "cost/calib.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/fit.h"
#include "cost/lifecycle.h"
#include "util/alloc.h"
#include "util/vec.h"

/* ---- reference shapes and GPUs (calibration.md §2, §2.1, §2.2, §3.1, §3.2) ------------------ */

static const struct spec_model ref_models[] = {
    [COST_REF_QWEN25_7B] = {.name = "qwen2.5-7b",
                            .layers = 28,
                            .hidden = 3584,
                            .heads = 28,
                            .kv_heads = 4,
                            .head_dim = 128,
                            .ffn = 18944,
                            .vocab = 152064,
                            .qkv_bias = true},
    [COST_REF_QWEN25_14B] = {.name = "qwen2.5-14b",
                             .layers = 48,
                             .hidden = 5120,
                             .heads = 40,
                             .kv_heads = 8,
                             .head_dim = 128,
                             .ffn = 13824,
                             .vocab = 152064,
                             .qkv_bias = true},
    [COST_REF_QWEN25_32B] = {.name = "qwen2.5-32b",
                             .layers = 64,
                             .hidden = 5120,
                             .heads = 40,
                             .kv_heads = 8,
                             .head_dim = 128,
                             .ffn = 27648,
                             .vocab = 152064,
                             .qkv_bias = true},
    [COST_REF_LLAMA3_8B] = {.name = "llama-3-8b",
                            .layers = 32,
                            .hidden = 4096,
                            .heads = 32,
                            .kv_heads = 8,
                            .head_dim = 128,
                            .ffn = 14336,
                            .vocab = 128256},
    [COST_REF_CODELLAMA_34B] = {.name = "codellama-34b",
                                .layers = 48,
                                .hidden = 8192,
                                .heads = 64,
                                .kv_heads = 8,
                                .head_dim = 128,
                                .ffn = 22016,
                                .vocab = 32000},
    [COST_REF_QWEN3_30B_A3B] = {.name = "qwen3-30b-a3b",
                                .layers = 48,
                                .hidden = 2048,
                                .heads = 32,
                                .kv_heads = 4,
                                .head_dim = 128,
                                .vocab = 151936,
                                .experts = 128,
                                .top_k = 8,
                                .expert_ffn = 768},
    [COST_REF_QWEN3_4B] = {.name = "qwen3-4b",
                           .layers = 36,
                           .hidden = 2560,
                           .heads = 32,
                           .kv_heads = 8,
                           .head_dim = 128,
                           .ffn = 9728,
                           .vocab = 151936,
                           .tied_embeddings = true},
    [COST_REF_QWEN3_8B] = {.name = "qwen3-8b",
                           .layers = 36,
                           .hidden = 4096,
                           .heads = 32,
                           .kv_heads = 8,
                           .head_dim = 128,
                           .ffn = 12288,
                           .vocab = 151936},
    [COST_REF_QWEN3_14B] = {.name = "qwen3-14b",
                            .layers = 40,
                            .hidden = 5120,
                            .heads = 40,
                            .kv_heads = 8,
                            .head_dim = 128,
                            .ffn = 17408,
                            .vocab = 151936},
    [COST_REF_QWEN3_32B] = {.name = "qwen3-32b",
                            .layers = 64,
                            .hidden = 5120,
                            .heads = 64,
                            .kv_heads = 8,
                            .head_dim = 128,
                            .ffn = 25600,
                            .vocab = 151936},
    /* slime scripts/models/qwen3-235B-A22B.sh: 94 layers, hidden 4096, 64 heads, 4 query
     * groups, kv-channels 128, 128 experts, top-8, moe-ffn-hidden-size 1536, untied */
    [COST_REF_QWEN3_235B_A22B] = {.name = "qwen3-235b-a22b",
                                  .layers = 94,
                                  .hidden = 4096,
                                  .heads = 64,
                                  .kv_heads = 4,
                                  .head_dim = 128,
                                  .vocab = 151936,
                                  .experts = 128,
                                  .top_k = 8,
                                  .expert_ffn = 1536},
};

static const struct spec_hardware ref_hardware[] = {
    [COST_REF_A100] = {.name = "a100-80g",
                       .bf16_flops_per_s = 312e12,
                       .hbm_bytes = 81152.0 * 1048576, /* MiB, as the device reports it */
                       .hbm_bw_bytes_per_s = 2.039e12,
                       .nvlink_bw_bytes_per_s = 600e9,
                       .allreduce_bus_bw_bytes_per_s = 208e9,
                       .allreduce_latency_s = 30e-6,
                       .inter_node_bw_bytes_per_s = 12.5e9,
                       .gpus_per_node = 8},
    [COST_REF_A800] = {.name = "a800-80g",
                       .bf16_flops_per_s = 312e12,
                       .hbm_bytes = 81234.0 * 1048576,
                       .hbm_bw_bytes_per_s = 2.039e12,
                       .nvlink_bw_bytes_per_s = 400e9,
                       .allreduce_bus_bw_bytes_per_s = 150e9,
                       .allreduce_latency_s = 30e-6,
                       .inter_node_bw_bytes_per_s = 12.5e9,
                       .gpus_per_node = 8},
    [COST_REF_H100] = {.name = "h100-sxm",
                       .bf16_flops_per_s = 989e12,
                       .hbm_bytes = 81559.0 * 1048576,
                       .hbm_bw_bytes_per_s = 3.35e12,
                       .nvlink_bw_bytes_per_s = 900e9,
                       .allreduce_bus_bw_bytes_per_s = 340e9,
                       .allreduce_latency_s = 30e-6,
                       .inter_node_bw_bytes_per_s = 25e9,
                       .gpus_per_node = 8},
    [COST_REF_H20] = {.name = "h20",
                      .bf16_flops_per_s = 148e12,
                      .hbm_bytes = 97285.0 * 1048576,
                      .hbm_bw_bytes_per_s = 4.0e12,
                      .nvlink_bw_bytes_per_s = 900e9,
                      .allreduce_bus_bw_bytes_per_s = 350e9,
                      .allreduce_latency_s = 30e-6,
                      .inter_node_bw_bytes_per_s = 25e9,
                      .gpus_per_node = 8},
};

const struct spec_model *cost_ref_model(enum cost_ref_model m)
{
    return &ref_models[m];
}

const struct spec_hardware *cost_ref_hardware(enum cost_ref_hw h)
{
    return &ref_hardware[h];
}

/* ---- Vidur per-layer linear-operator medians, ms (calibration.md §3.3b) ---------------------- */

struct vidur_row {
    enum cost_ref_model model;
    enum cost_ref_hw hw;
    double tokens;
    double ms[4]; /* TP 1, 2, 4, 8; 0: not in the sheet */
};

static const struct vidur_row vidur[] = {
    {COST_REF_LLAMA3_8B, COST_REF_A100, 1, {0.303, 0.178, 0.106, 0.065}},
    {COST_REF_LLAMA3_8B, COST_REF_A100, 64, {0.351, 0.186, 0.113, 0.074}},
    {COST_REF_LLAMA3_8B, COST_REF_A100, 256, {0.609, 0.362, 0.235, 0.136}},
    {COST_REF_LLAMA3_8B, COST_REF_A100, 1024, {2.348, 1.148, 0.654, 0.345}},
    {COST_REF_LLAMA3_8B, COST_REF_A100, 4096, {8.549, 4.442, 2.414, 1.351}},
    {COST_REF_CODELLAMA_34B, COST_REF_A100, 1, {0.920, 0.465, 0.254, 0.151}},
    {COST_REF_CODELLAMA_34B, COST_REF_A100, 64, {0.963, 0.501, 0.273, 0.165}},
    {COST_REF_CODELLAMA_34B, COST_REF_A100, 256, {1.795, 0.896, 0.516, 0.310}},
    {COST_REF_CODELLAMA_34B, COST_REF_A100, 4096, {24.96, 12.88, 6.535, 3.549}},
    {COST_REF_CODELLAMA_34B, COST_REF_H100, 1, {0.508, 0.268, 0.147, 0.091}},
    {COST_REF_CODELLAMA_34B, COST_REF_H100, 4096, {8.818, 4.428, 2.348, 1.306}},
};

static double vidur_ms(enum cost_ref_model m, enum cost_ref_hw h, double tokens, int tp_index)
{
    for (size_t v = 0; v < sizeof vidur / sizeof vidur[0]; v++)
        if (vidur[v].model == m && vidur[v].hw == h && vidur[v].tokens == tokens)
            return vidur[v].ms[tp_index];
    return 0.0;
}

static void insert_point(struct cost_curve *c, double bytes, double eff)
{
    int i = c->n++;
    for (; i > 0 && c->bytes[i - 1] > bytes; i--) {
        c->bytes[i] = c->bytes[i - 1];
        c->eff[i] = c->eff[i - 1];
    }
    c->bytes[i] = bytes;
    c->eff[i] = eff;
}

void cost_vidur_curves(struct cost_curve *eta, struct cost_curve *mu)
{
    memset(eta, 0, sizeof *eta);
    memset(mu, 0, sizeof *mu);
    for (size_t r = 0; r < sizeof vidur / sizeof vidur[0]; r++) {
        const struct vidur_row *v = &vidur[r];
        if (v->hw != COST_REF_A100 || (v->tokens != 1 && v->tokens != 4096))
            continue; /* H100 rows and the knee rows are the out-of-sample checks */
        const struct spec_hardware *hw = &ref_hardware[v->hw];
        struct cost_shape s;
        cost_shape_init(&s, &ref_models[v->model]);
        for (int i = 0, tp = 1; i < 4; i++, tp *= 2) {
            double bytes = 2.0 * s.layer_params / tp, t = v->ms[i] * 1e-3;
            double t1 = vidur_ms(v->model, v->hw, 1, i) * 1e-3; /* streaming alone */
            if (v->tokens == 1)
                insert_point(eta, bytes, bytes / (hw->hbm_bw_bytes_per_s * t));
            else /* compute is what remains of the 2-norm once streaming is taken out */
                insert_point(mu, bytes,
                             2.0 * s.layer_params * v->tokens / tp /
                                 (hw->bf16_flops_per_s * sqrt(t * t - t1 * t1)));
        }
    }
}

/* ---- the decode points: Qwen's speed table, batch 1, A100, vLLM 0.6.3 (calibration.md §3.3a) */

#define QWEN_SPEED_PROMPT 1.0
#define QWEN_SPEED_GEN 2048.0
#define QWEN7B_MS_PER_TOKEN 11.9

#define QWEN_SPEED(id_, what_, model_, tp_, prompt_, ms_)                                          \
    {                                                                                              \
        .id = (id_), .what = (what_), .model = (model_), .published_ms = (ms_),                    \
        .point = {.kind = COST_DECODE_SINGLE,                                                      \
                  .tp = (tp_),                                                                     \
                  .measured_s = (ms_)*1e-3,                                                        \
                  .prompt_tokens = (prompt_),                                                      \
                  .gen_tokens = QWEN_SPEED_GEN},                                                   \
    }

static const struct cost_sheet_decode sheet_decode[] = {
    QWEN_SPEED("decode.qwen2.5-7b", "Qwen2.5-7B, TP1, batch 1, 1 in / 2048 out", COST_REF_QWEN25_7B,
               1, QWEN_SPEED_PROMPT, QWEN7B_MS_PER_TOKEN),
    QWEN_SPEED("decode.qwen2.5-14b", "Qwen2.5-14B, TP1, batch 1, 1 in / 2048 out",
               COST_REF_QWEN25_14B, 1, QWEN_SPEED_PROMPT, 21.6),
    QWEN_SPEED("decode.qwen2.5-32b", "Qwen2.5-32B, TP1, batch 1, 1 in / 2048 out",
               COST_REF_QWEN25_32B, 1, QWEN_SPEED_PROMPT, 45.2),
    QWEN_SPEED("decode.qwen2.5-32b.tp2.30k", "Qwen2.5-32B, TP2, batch 1, 30720 in / 2048 out",
               COST_REF_QWEN25_32B, 2, 30720, 31.4),
};

size_t cost_sheet_decode_points(const struct cost_sheet_decode **out)
{
    *out = sheet_decode;
    return sizeof sheet_decode / sizeof sheet_decode[0];
}

/* The t_fix that makes decode point d take its measured time on GPU h under constants p. */
static double fit_t_fix_on(const struct cost_rollout_params *p, enum cost_ref_hw h,
                           const struct cost_sheet_decode *d)
{
    struct cost_shape s;
    struct cost_fit_outcome f;
    cost_shape_init(&s, &ref_models[d->model]);
    struct cost_fit_input in = {.shape = &s,
                                .hw = &ref_hardware[h],
                                .rollout = *p,
                                .decode = &d->point,
                                .n_decode = 1,
                                .fit = 1u << COST_CONST_T_FIX};
    cost_fit_constants(&in, &f); /* one point, one constant: always determined */
    double t_fix = f.value[COST_CONST_T_FIX];
    cost_fit_outcome_free(&f);
    return t_fix;
}

double cost_fit_t_fix(const struct cost_rollout_params *p)
{
    return fit_t_fix_on(p, COST_REF_A100, &sheet_decode[0]);
}

/* ---- Qwen3's speed benchmark: batch 1, H20, SGLang 0.4.6.post1, BF16 (docs/calibration.md) - */

/* Published as (prompt + generated tokens) / time, in tokens per second; 2048 tokens out. */
#define QWEN3_MS(prompt_, speed_) (((prompt_) + QWEN_SPEED_GEN) / (speed_) / QWEN_SPEED_GEN * 1e3)

/* A row: its conditions' text is made from its numbers, so the two cannot disagree. */
#define QWEN3_SPEED(id_, name_, model_, tp_, prompt_, speed_)                                      \
    QWEN_SPEED(id_, name_ ", TP" #tp_ ", batch 1, " #prompt_ " in / 2048 out (" #speed_ " tok/s)", \
               model_, tp_, (double)(prompt_), QWEN3_MS((double)(prompt_), speed_))

static const struct cost_sheet_decode qwen3_speed[] = {
    /* the fit points, one per constant of the rig: t_fix, the η factor, η_kv, mfu_attn */
    QWEN3_SPEED("decode.h20.qwen3-8b", "Qwen3-8B", COST_REF_QWEN3_8B, 1, 1, 81.73),
    QWEN3_SPEED("decode.h20.qwen3-32b", "Qwen3-32B", COST_REF_QWEN3_32B, 1, 1, 20.72),
    QWEN3_SPEED("decode.h20.qwen3-8b.30k", "Qwen3-8B", COST_REF_QWEN3_8B, 1, 30720, 832.67),
    QWEN3_SPEED("decode.h20.qwen3-8b.126k", "Qwen3-8B", COST_REF_QWEN3_8B, 1, 129024, 1173.32),
    /* out of sample: every other BF16 SGLang row of the benchmark, dense then MoE, each model
     * by input length (the 129 024-token rows are published under "129042"; calibration.md) */
    QWEN3_SPEED("decode.h20.qwen3-4b", "Qwen3-4B", COST_REF_QWEN3_4B, 1, 1, 133.13),
    QWEN3_SPEED("decode.h20.qwen3-4b.6k", "Qwen3-4B", COST_REF_QWEN3_4B, 1, 6144, 466.19),
    QWEN3_SPEED("decode.h20.qwen3-4b.14k", "Qwen3-4B", COST_REF_QWEN3_4B, 1, 14336, 789.25),
    QWEN3_SPEED("decode.h20.qwen3-4b.30k", "Qwen3-4B", COST_REF_QWEN3_4B, 1, 30720, 1165.75),
    QWEN3_SPEED("decode.h20.qwen3-4b.62k", "Qwen3-4B", COST_REF_QWEN3_4B, 1, 63488, 1423.98),
    QWEN3_SPEED("decode.h20.qwen3-4b.126k", "Qwen3-4B", COST_REF_QWEN3_4B, 1, 129024, 1371.04),
    QWEN3_SPEED("decode.h20.qwen3-8b.6k", "Qwen3-8B", COST_REF_QWEN3_8B, 1, 6144, 296.25),
    QWEN3_SPEED("decode.h20.qwen3-8b.14k", "Qwen3-8B", COST_REF_QWEN3_8B, 1, 14336, 524.70),
    QWEN3_SPEED("decode.h20.qwen3-8b.62k", "Qwen3-8B", COST_REF_QWEN3_8B, 1, 63488, 1112.78),
    QWEN3_SPEED("decode.h20.qwen3-14b", "Qwen3-14B", COST_REF_QWEN3_14B, 1, 1, 47.10),
    QWEN3_SPEED("decode.h20.qwen3-14b.6k", "Qwen3-14B", COST_REF_QWEN3_14B, 1, 6144, 174.85),
    QWEN3_SPEED("decode.h20.qwen3-14b.14k", "Qwen3-14B", COST_REF_QWEN3_14B, 1, 14336, 317.56),
    QWEN3_SPEED("decode.h20.qwen3-14b.30k", "Qwen3-14B", COST_REF_QWEN3_14B, 1, 30720, 525.80),
    QWEN3_SPEED("decode.h20.qwen3-14b.62k", "Qwen3-14B", COST_REF_QWEN3_14B, 1, 63488, 742.36),
    QWEN3_SPEED("decode.h20.qwen3-14b.126k", "Qwen3-14B", COST_REF_QWEN3_14B, 1, 129024, 826.15),
    QWEN3_SPEED("decode.h20.qwen3-32b.6k", "Qwen3-32B", COST_REF_QWEN3_32B, 1, 6144, 77.82),
    QWEN3_SPEED("decode.h20.qwen3-32b.14k", "Qwen3-32B", COST_REF_QWEN3_32B, 1, 14336, 143.08),
    QWEN3_SPEED("decode.h20.qwen3-32b.30k", "Qwen3-32B", COST_REF_QWEN3_32B, 1, 30720, 240.75),
    QWEN3_SPEED("decode.h20.qwen3-32b.62k", "Qwen3-32B", COST_REF_QWEN3_32B, 1, 63488, 342.96),
    QWEN3_SPEED("decode.h20.qwen3-32b.tp2.126k", "Qwen3-32B", COST_REF_QWEN3_32B, 2, 129024,
                711.40),
    QWEN3_SPEED("decode.h20.qwen3-30b-a3b", "Qwen3-30B-A3B (MoE)", COST_REF_QWEN3_30B_A3B, 1, 1,
                137.18),
    QWEN3_SPEED("decode.h20.qwen3-30b-a3b.6k", "Qwen3-30B-A3B (MoE)", COST_REF_QWEN3_30B_A3B, 1,
                6144, 490.10),
    QWEN3_SPEED("decode.h20.qwen3-30b-a3b.14k", "Qwen3-30B-A3B (MoE)", COST_REF_QWEN3_30B_A3B, 1,
                14336, 849.62),
    QWEN3_SPEED("decode.h20.qwen3-30b-a3b.30k", "Qwen3-30B-A3B (MoE)", COST_REF_QWEN3_30B_A3B, 1,
                30720, 1283.94),
    QWEN3_SPEED("decode.h20.qwen3-30b-a3b.62k", "Qwen3-30B-A3B (MoE)", COST_REF_QWEN3_30B_A3B, 1,
                63488, 1538.79),
    QWEN3_SPEED("decode.h20.qwen3-30b-a3b.126k", "Qwen3-30B-A3B (MoE)", COST_REF_QWEN3_30B_A3B, 1,
                129024, 1385.65),
    QWEN3_SPEED("decode.h20.qwen3-235b-a22b.tp8", "Qwen3-235B-A22B (MoE)", COST_REF_QWEN3_235B_A22B,
                8, 1, 74.50),
    QWEN3_SPEED("decode.h20.qwen3-235b-a22b.tp8.6k", "Qwen3-235B-A22B (MoE)",
                COST_REF_QWEN3_235B_A22B, 8, 6144, 289.03),
    QWEN3_SPEED("decode.h20.qwen3-235b-a22b.tp8.14k", "Qwen3-235B-A22B (MoE)",
                COST_REF_QWEN3_235B_A22B, 8, 14336, 546.73),
    QWEN3_SPEED("decode.h20.qwen3-235b-a22b.tp8.30k", "Qwen3-235B-A22B (MoE)",
                COST_REF_QWEN3_235B_A22B, 8, 30720, 979.41),
    QWEN3_SPEED("decode.h20.qwen3-235b-a22b.tp8.62k", "Qwen3-235B-A22B (MoE)",
                COST_REF_QWEN3_235B_A22B, 8, 63488, 1493.91),
    QWEN3_SPEED("decode.h20.qwen3-235b-a22b.tp8.126k", "Qwen3-235B-A22B (MoE)",
                COST_REF_QWEN3_235B_A22B, 8, 129024, 1639.54),
};
#undef QWEN3_SPEED
#undef QWEN3_MS
#undef QWEN_SPEED

#define QWEN3_FIT_POINTS 4 /* the first four */
#define QWEN3_ETA_SCALE_MAX 2.0
#define QWEN3_FIT_ROUNDS 8 /* the four fits couple weakly: a few rounds settle them */

size_t cost_qwen3_speed_points(const struct cost_sheet_decode **out)
{
    *out = qwen3_speed;
    return sizeof qwen3_speed / sizeof qwen3_speed[0];
}

/* p with η scaled by the rig's factor, its η_kv and mfu_attn, and t_fix fitted on the first
 * point (Qwen3-8B), into *q. */
static void qwen3_rig_params(const struct cost_rollout_params *p, const struct cost_qwen3_rig *rig,
                             struct cost_rollout_params *q)
{
    *q = *p;
    for (int i = 0; i < q->eta.n; i++)
        q->eta.eff[i] *= rig->eta_scale;
    q->eta_kv = rig->eta_kv;
    q->mfu_attn = rig->mfu_attn;
    /* a fixed cost is not negative: held at 0 where the fit would take it below */
    q->t_fix_s = fmax(0.0, fit_t_fix_on(q, COST_REF_H20, &qwen3_speed[0]));
}

static double qwen3_point_s(const struct cost_rollout_params *q, const struct cost_sheet_decode *d)
{
    struct cost_rollout_pre pre;
    struct cost_shape s;
    cost_shape_init(&s, &ref_models[d->model]);
    cost_rollout_pre_init(&pre, &s, &ref_hardware[COST_REF_H20], q, d->point.tp);
    return cost_decode_point_time(&pre, &d->point);
}

/* One constant of the rig solved on its fit point, the others held. */
struct qwen3_solve {
    const struct cost_rollout_params *p;
    struct cost_qwen3_rig rig;
    double *x; /* the constant solved: a member of rig */
    const struct cost_sheet_decode *point;
};

/* Every constant of the rig makes its point faster as it grows (with t_fix refitted on
 * Qwen3-8B's first point, a higher η factor speeds Qwen3-32B up): below the solution the
 * modelled time is still above the measured one. */
static bool qwen3_rig_below(void *ctx, double m)
{
    struct qwen3_solve *v = ctx;
    *v->x = m;
    struct cost_rollout_params q;
    qwen3_rig_params(v->p, &v->rig, &q);
    return qwen3_point_s(&q, v->point) > v->point->point.measured_s;
}

void cost_fit_qwen3_rig(const struct cost_rollout_params *p, struct cost_qwen3_rig *rig,
                        struct cost_rollout_params *q)
{
    struct qwen3_solve v = {
        .p = p, .rig = {.eta_scale = 1.0, .eta_kv = p->eta_kv, .mfu_attn = p->mfu_attn}};
    struct {
        double *x, hi;
        int point;
    } fits[] = {{&v.rig.eta_scale, QWEN3_ETA_SCALE_MAX, 1},
                {&v.rig.eta_kv, 1.0, 2},
                {&v.rig.mfu_attn, 1.0, 3}};
    for (int round = 0; round < QWEN3_FIT_ROUNDS; round++)
        for (size_t f = 0; f < sizeof fits / sizeof fits[0]; f++) {
            v.x = fits[f].x;
            v.point = &qwen3_speed[fits[f].point];
            *v.x = cost_fit_bisect(0.0, fits[f].hi, 50, qwen3_rig_below, &v);
        }
    qwen3_rig_params(p, &v.rig, q);
    *rig = v.rig;
    rig->t_fix_s = q->t_fix_s;
}

/* ---- the training evidence: verl DAPO 7B colocated on H20 (calibration.md §3.6, §4) --------- */

#define DAPO_PROMPTS 512
#define DAPO_SAMPLES 16
#define DAPO_PROMPT_TOKENS 200.0  /* assumed: DAPO-Math prompts are short (max 2048) */
#define DAPO_MAX_RESPONSE 28672.0 /* max_response_length 28 K */
#define DAPO_SIGMA_PROMPT 0.8     /* assumed: log-normal spread between prompts */
#define DAPO_SIGMA_SAMPLE 0.6     /* assumed: spread between the 16 siblings of a prompt */

/* Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9). */
static double norm_quantile(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549671010243764e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    if (p < 0.02425 || p > 1.0 - 0.02425) {
        double q = sqrt(-2.0 * log(p < 0.5 ? p : 1.0 - p));
        double x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
                   ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
        return p < 0.5 ? x : -x;
    }
    double q = p - 0.5, r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

/* Log-scale offset of sequence i: a prompt factor and a sibling factor, each at an evenly
 * spaced normal quantile visited in a scrambled order (odd multipliers permute powers of two). */
static double dapo_z(size_t i)
{
    size_t p = i / DAPO_SAMPLES, s = i % DAPO_SAMPLES;
    size_t qp = (p * 389 + 17) % DAPO_PROMPTS, qs = (s * 5 + p) % DAPO_SAMPLES;
    return DAPO_SIGMA_PROMPT * norm_quantile((qp + 0.5) / DAPO_PROMPTS) +
           DAPO_SIGMA_SAMPLE * norm_quantile((qs + 0.5) / DAPO_SAMPLES);
}

static double dapo_response(double mu, size_t i)
{
    return fmin(DAPO_MAX_RESPONSE, fmax(1.0, round(exp(mu + dapo_z(i)))));
}

/* Fills lengths at log-scale mu; returns the mean response. */
static double dapo_fill(uint32_t *lengths, double mu)
{
    double sum = 0.0;
    for (size_t i = 0; i < COST_DAPO_SEQS; i++) {
        double r = dapo_response(mu, i);
        lengths[i] = (uint32_t)(DAPO_PROMPT_TOKENS + r);
        sum += r;
    }
    return sum / COST_DAPO_SEQS;
}

struct dapo_target {
    uint32_t *lengths;
    double mean_response;
};

static bool dapo_below(void *ctx, double mu)
{
    struct dapo_target *t = ctx;
    return dapo_fill(t->lengths, mu) < t->mean_response;
}

void cost_dapo_lengths(uint32_t lengths[COST_DAPO_SEQS], double mean_response)
{
    struct dapo_target t = {lengths, mean_response};
    dapo_fill(lengths, cost_fit_bisect(0.0, log(DAPO_MAX_RESPONSE), 50, dapo_below, &t));
}

void cost_verl_config(struct cost_train_config *c, int gpus)
{
    *c = (struct cost_train_config){
        .tp = 1,
        .pp = 1,
        .cp = 4, /* ulysses_sequence_parallel_size 4 */
        .dp = gpus / 4,
        .micro_batch_tokens = 61440.0 * 4, /* ppo_max_token_len_per_gpu × SP */
        .minibatches = 16,                 /* 512 prompts / ppo_mini_batch_size 32 */
        .zero_stage = 3,        /* FSDP2 at verl's default fsdp_size -1 (assumed): every rank */
        .full_recompute = true, /* enable_gradient_checkpointing */
    };
}

/* Measured update_actor seconds of the colocated runs at 32, 64 and 128 GPUs (§4). */
static const int verl_gpus[3] = {32, 64, 128};
static const double verl_update_s[3] = {269.80, 133.41, 113.81};

/* One verl experiment: the shape, a length sample and the dealing scratch. */
struct verl_run {
    struct cost_shape shape;
    uint32_t *lengths;
    double mean_response;
    struct cost_train_seqs seqs;
    struct cost_train_scratch sc;
};

static void verl_run_init(struct verl_run *v)
{
    memset(v, 0, sizeof *v);
    cost_shape_init(&v->shape, &ref_models[COST_REF_QWEN25_7B]);
    v->lengths = xmallocarray(COST_DAPO_SEQS, sizeof *v->lengths);
}

static void verl_run_free(struct verl_run *v)
{
    free(v->lengths);
    cost_train_seqs_free(&v->seqs);
    cost_train_scratch_free(&v->sc);
}

/* Draws the sample at log-scale mu. */
static void verl_run_sample(struct verl_run *v, double mu)
{
    v->mean_response = dapo_fill(v->lengths, mu);
    cost_train_seqs_free(&v->seqs);
    cost_train_seqs_init(&v->seqs, &v->shape, v->lengths, COST_DAPO_SEQS);
}

/* Step time of the verl layout at `gpus` GPUs, under p. */
static double verl_step(const struct cost_train_params *p, struct verl_run *v, int gpus,
                        struct cost_train_step *out)
{
    struct cost_train_config c;
    struct cost_train_load load;
    cost_verl_config(&c, gpus);
    cost_train_deal(&v->seqs, &v->shape, c.dp, c.minibatches, c.micro_batch_tokens,
                    c.balance_each_minibatch, &v->sc, &load);
    cost_train_step_time(&v->shape, &ref_hardware[COST_REF_H20], p, &c, &load, out);
    return out->step_s;
}

static void verl_predict(const struct cost_train_params *p, struct verl_run *v,
                         struct cost_train_fit *out)
{
    memset(out, 0, sizeof *out);
    out->mfu = p->mfu;
    out->mean_response_tokens = v->mean_response;
    for (int i = 0; i < 3; i++)
        out->t_s[i] = verl_step(p, v, verl_gpus[i], &out->step[i]);
    out->ratio_64_32 = out->t_s[1] / out->t_s[0];
    out->ratio_128_64 = out->t_s[2] / out->t_s[1];
}

/* The fit of the mean response: the step at 32 GPUs grows with the responses. */
struct verl_target {
    const struct cost_train_params *p;
    struct verl_run *v;
};

static bool verl_below(void *ctx, double mu)
{
    struct verl_target *t = ctx;
    struct cost_train_step st;
    verl_run_sample(t->v, mu);
    return verl_step(t->p, t->v, verl_gpus[0], &st) < verl_update_s[0];
}

/* The step is a saw-tooth in mu at fine scale (the dealing moves whole sequences between
 * ranks), so the bisection brackets a crossing that may sit on a
 * tooth; the sample within ±0.8 % of it whose step is nearest the measured one is taken. */
static double verl_nearest(struct verl_target *t, double mu)
{
    struct cost_train_step st;
    double best = mu, best_err = INFINITY;
    for (int j = -8; j <= 8; j++) {
        verl_run_sample(t->v, mu + j * 1e-3);
        double err = fabs(verl_step(t->p, t->v, verl_gpus[0], &st) - verl_update_s[0]);
        if (err < best_err)
            best = mu + j * 1e-3, best_err = err;
    }
    return best;
}

void cost_fit_train(const struct cost_train_params *p, struct cost_train_fit *out)
{
    struct verl_run v;
    verl_run_init(&v);
    struct verl_target t = {p, &v};
    double mu = cost_fit_bisect(0.0, log(DAPO_MAX_RESPONSE), 40, verl_below, &t);
    verl_run_sample(&v, verl_nearest(&t, mu));
    verl_predict(p, &v, out);
    verl_run_free(&v);
}

void cost_fit_train_mfu(const struct cost_train_params *p, double mean_response,
                        struct cost_train_fit *out)
{
    struct verl_run v;
    struct cost_fit_outcome f;
    verl_run_init(&v);
    cost_dapo_lengths(v.lengths, mean_response);
    v.mean_response = mean_response;
    cost_train_seqs_init(&v.seqs, &v.shape, v.lengths, COST_DAPO_SEQS);
    struct cost_train_point pt = {.measured_s = verl_update_s[0], .seqs = &v.seqs};
    cost_verl_config(&pt.config, verl_gpus[0]);
    struct cost_fit_input in = {.shape = &v.shape,
                                .hw = &ref_hardware[COST_REF_H20],
                                .train = *p,
                                .train_points = &pt,
                                .n_train = 1,
                                .fit = 1u << COST_CONST_TRAIN_MFU};
    cost_fit_constants(&in, &f); /* one point, one constant: always determined */
    struct cost_train_params q = *p;
    q.mfu = f.value[COST_CONST_TRAIN_MFU];
    cost_fit_outcome_free(&f);
    verl_predict(&q, &v, out);
    verl_run_free(&v);
}

/* ---- the evidence table --------------------------------------------------------------------- */

struct rows {
    struct cost_calib_row *v;
    size_t n, cap;
};

static void add_row(struct rows *r, const char *id, const char *quantity, const char *unit,
                    const char *source, double published, double modelled, double tolerance,
                    bool fitted)
{
    struct cost_calib_row row = {id,
                                 quantity,
                                 unit,
                                 source,
                                 published,
                                 modelled,
                                 (modelled - published) / published,
                                 tolerance,
                                 COST_CALIB_REPORTED};
    if (fitted)
        row.status = COST_CALIB_FITTED;
    else if (tolerance > 0.0)
        row.status = fabs(row.error) <= tolerance ? COST_CALIB_IN_BAND : COST_CALIB_MISS;
    if (r->n < r->cap)
        r->v[r->n] = row;
    r->n++;
}

static void ref_pre(struct cost_rollout_pre *pre, enum cost_ref_model m, enum cost_ref_hw h, int tp)
{
    struct cost_rollout_params p;
    struct cost_shape s;
    cost_rollout_params_default(&p, &ref_hardware[h]);
    cost_shape_init(&s, &ref_models[m]);
    cost_rollout_pre_init(pre, &s, &ref_hardware[h], &p, tp);
}

#define SRC_QWEN "calibration.md 3.3a: Qwen speed benchmark, vLLM 0.6.3, A100"
#define SRC_VIDUR "calibration.md 3.3b: Vidur mlp.csv medians"

static void decode_rows(struct rows *r)
{
    for (size_t i = 0; i < sizeof sheet_decode / sizeof sheet_decode[0]; i++) {
        const struct cost_sheet_decode *q = &sheet_decode[i];
        struct cost_rollout_pre pre;
        ref_pre(&pre, q->model, COST_REF_A100, q->point.tp);
        double ms = 1e3 * cost_decode_point_time(&pre, &q->point);
        add_row(r, q->id, q->what, "ms/token", SRC_QWEN, q->published_ms, ms, i == 0 ? 0.0 : 0.10,
                i == 0);
    }
}

#define SRC_QWEN3                                                                                  \
    "Qwen3 speed benchmark, SGLang 0.4.6.post1, H20, BF16 "                                        \
    "(qwen.readthedocs.io getting_started/speed_benchmark)"

/* Qwen3's speed benchmark on its rig (the reference H20 with the rig's four fitted constants):
 * the dense fit points, then the dense checks at the Qwen2.5 rows' band and the MoE checks at
 * ±15 %. */
static void qwen3_rows(struct rows *r)
{
    struct cost_rollout_params p, q;
    struct cost_qwen3_rig rig;
    cost_rollout_params_default(&p, &ref_hardware[COST_REF_H20]);
    cost_fit_qwen3_rig(&p, &rig, &q);
    for (size_t i = 0; i < sizeof qwen3_speed / sizeof qwen3_speed[0]; i++) {
        const struct cost_sheet_decode *d = &qwen3_speed[i];
        bool fitted = i < QWEN3_FIT_POINTS;
        double tol = fitted ? 0.0 : ref_models[d->model].experts > 0 ? 0.15 : 0.10;
        add_row(r, d->id, d->what, "ms/token", SRC_QWEN3, d->published_ms,
                1e3 * qwen3_point_s(&q, d), tol, fitted);
    }
}

/* Out of sample: the H100 rows (the curves come from A100) and the A100 knee at 256 tokens
 * (the curves use 1 and 4096 tokens only). */
static void vidur_rows(struct rows *r)
{
#define H100_34B(tok, i, tp)                                                                       \
    {                                                                                              \
        "vidur.h100.34b." #tok ".tp" #tp,                                                          \
            "CodeLlama-34B layer linear ops, H100, TP" #tp ", " #tok " tok",                       \
            COST_REF_CODELLAMA_34B, COST_REF_H100, tok, i, 0.15                                    \
    }
#define KNEE(name, model, i, tp)                                                                   \
    {                                                                                              \
        "vidur.a100." name ".256.tp" #tp, name " layer linear ops, A100, TP" #tp ", 256 tok",      \
            model, COST_REF_A100, 256, i, 0.0                                                      \
    }
    static const struct {
        const char *id, *what;
        enum cost_ref_model m;
        enum cost_ref_hw h;
        double tokens;
        int tp_index;
        double tol;
    } q[] = {
        H100_34B(1, 0, 1),
        H100_34B(1, 1, 2),
        H100_34B(1, 2, 4),
        H100_34B(1, 3, 8),
        H100_34B(4096, 0, 1),
        H100_34B(4096, 1, 2),
        H100_34B(4096, 2, 4),
        H100_34B(4096, 3, 8),
        KNEE("llama-3-8b", COST_REF_LLAMA3_8B, 0, 1),
        KNEE("llama-3-8b", COST_REF_LLAMA3_8B, 3, 8),
        KNEE("codellama-34b", COST_REF_CODELLAMA_34B, 0, 1),
        KNEE("codellama-34b", COST_REF_CODELLAMA_34B, 3, 8),
    };
#undef H100_34B
#undef KNEE
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        struct cost_rollout_pre pre;
        ref_pre(&pre, q[i].m, q[i].h, 1 << q[i].tp_index);
        add_row(r, q[i].id, q[i].what, "ms", SRC_VIDUR,
                vidur_ms(q[i].m, q[i].h, q[i].tokens, q[i].tp_index),
                1e3 * cost_linear_layer_time(&pre, q[i].tokens), q[i].tol, false);
    }
}

/* Prefill and capacity: comparisons with values the sheet derived or other simulators fitted. */
static void rollout_check_rows(struct rows *r)
{
    struct cost_rollout_pre pre;
    struct cost_shape s;
    cost_shape_init(&s, &ref_models[COST_REF_QWEN25_7B]);
    ref_pre(&pre, COST_REF_QWEN25_7B, COST_REF_A100, 1);
    double t = cost_prefill_time(&pre, 0.0, 4096.0, 4096.0);
    double flops = cost_seq_forward_flops(&s, 4096.0) - 2.0 * s.head_params * 4095.0;
    add_row(r, "prefill.mfu.qwen2.5-7b", "Qwen2.5-7B prefill of 4096 tokens, TP1 A100: MFU",
            "fraction", "calibration.md 3.5, 5.1: BLIS end-to-end fit (C)", 0.38,
            flops / (t * ref_hardware[COST_REF_A100].bf16_flops_per_s), 0.0, false);

    static const struct {
        const char *id, *what;
        enum cost_ref_model m;
        int tp;
        double tokens;
    } kv[] = {
        {"kv.qwen2.5-7b.tp1", "KV capacity, Qwen2.5-7B, TP1 A800", COST_REF_QWEN25_7B, 1, 0.95e6},
        {"kv.qwen2.5-32b.tp2", "KV capacity, Qwen2.5-32B, TP2 A800", COST_REF_QWEN25_32B, 2,
         0.28e6},
        {"kv.qwen2.5-32b.tp4", "KV capacity, Qwen2.5-32B, TP4 A800", COST_REF_QWEN25_32B, 4,
         0.82e6},
        {"kv.qwen2.5-32b.tp8", "KV capacity, Qwen2.5-32B, TP8 A800", COST_REF_QWEN25_32B, 8, 1.9e6},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
        ref_pre(&pre, kv[i].m, COST_REF_A800, kv[i].tp);
        add_row(r, kv[i].id, kv[i].what, "tokens", "calibration.md 2 (D: 90 % of HBM, ~2 GB)",
                kv[i].tokens, pre.kv_capacity_tokens, 0.0, false);
    }
}

static void lifecycle_rows(struct rows *r)
{
    struct cost_lifecycle_params lp;
    struct cost_shape s;
    cost_lifecycle_params_default(&lp);
    cost_shape_init(&s, &ref_models[COST_REF_QWEN25_7B]);
    add_row(r, "sync.nccl.7b.h20", "NCCL weight sync, 7B, H20, trainer and rollout in a node", "s",
            "calibration.md 3.7: verl one-step-off, \"mostly < 300 ms\"", 0.3,
            cost_broadcast_s(&lp, &s, &ref_hardware[COST_REF_H20], false), 0.0, false);
    add_row(r, "restart.7b", "engine cold restart with weights from disk, 7B", "s",
            "calibration.md 6: vLLM cold restart central 45 s (30-100)", 45.0,
            cost_cold_start_s(&lp, &s), 0.0, false);
}

static void train_rows(struct rows *r)
{
    struct cost_train_params p;
    struct cost_train_fit f;
    cost_train_params_default(&p);
    cost_fit_train(&p, &f);
    const char *src = "calibration.md 3.6, 4: verl colocated DAPO 7B, H20";
    add_row(r, "train.verl.32", "update_actor, 32 H20 (fits the mean response)", "s", src,
            verl_update_s[0], f.t_s[0], 0.0, true);
    add_row(r, "train.verl.ratio64", "update_actor t(64)/t(32)", "ratio", src,
            verl_update_s[1] / verl_update_s[0], f.ratio_64_32, 0.15, false);
    add_row(r, "train.verl.ratio128", "update_actor t(128)/t(64)", "ratio", src,
            verl_update_s[2] / verl_update_s[1], f.ratio_128_64, 0.15, false);
    add_row(r, "train.verl.64", "update_actor, 64 H20", "s", src, verl_update_s[1], f.t_s[1], 0.0,
            false);
    add_row(r, "train.verl.128", "update_actor, 128 H20", "s", src, verl_update_s[2], f.t_s[2], 0.0,
            false);
}

/* MoE training, against a published pre-training throughput: NeMo AutoModel's Qwen3 MoE 30B on
 * one DGX-H100 (BF16, EP 8, FSDP 8, 512 sequences of 4,096 tokens per step in micro-batches of 4,
 * one optimizer step; 21.77 s per step, 327 model TFLOP/s per GPU), costed on the same layout:
 * the experts split over EP 8 with their all-to-alls on NVLink, the rest ZeRO-3 over the 8 GPUs,
 * no recompute (the published TFLOP/s count 6N), at the default MFU. */
static void moe_train_row(struct rows *r)
{
    enum { SEQS = 512, SEQ_TOKENS = 4096, GPUS = 8 };
    struct cost_train_params p;
    struct cost_shape s;
    cost_train_params_default(&p);
    cost_shape_init(&s, &ref_models[COST_REF_QWEN3_30B_A3B]);
    uint32_t tokens[SEQS];
    for (size_t i = 0; i < SEQS; i++)
        tokens[i] = SEQ_TOKENS;
    struct cost_train_seqs seqs;
    struct cost_train_scratch sc = {0};
    struct cost_train_load load;
    struct cost_train_step st = {0};
    struct cost_train_config c = {.tp = 1,
                                  .pp = 1,
                                  .cp = 1,
                                  .dp = GPUS,
                                  .micro_batch_tokens = 4.0 * SEQ_TOKENS,
                                  .minibatches = 1,
                                  .zero_stage = 3,
                                  .ep = GPUS};
    cost_train_seqs_init(&seqs, &s, tokens, SEQS);
    cost_train_deal(&seqs, &s, GPUS, 1, c.micro_batch_tokens, false, &sc, &load);
    cost_train_step_time(&s, &ref_hardware[COST_REF_H100], &p, &c, &load, &st);
    add_row(r, "train.moe.qwen3-30b-a3b.h100.8",
            "Qwen3-30B-A3B step, 8 H100, EP 8 / FSDP 8, 512 x 4096 tokens", "s",
            "NeMo AutoModel performance summary (DGX-H100 BF16 pre-training, Qwen3 MoE 30B), "
            "github.com/NVIDIA-NeMo/Automodel docs/performance-summary.md",
            21.77, st.step_s, 0.25, false);
    cost_train_scratch_free(&sc);
    cost_train_seqs_free(&seqs);
}

size_t cost_calibration_rows(struct cost_calib_row *rows, size_t cap)
{
    struct rows r = {rows, 0, cap};
    decode_rows(&r);
    qwen3_rows(&r);
    vidur_rows(&r);
    rollout_check_rows(&r);
    lifecycle_rows(&r);
    train_rows(&r);
    moe_train_row(&r);
    return r.n;
}

/* ---- assumed constants ---------------------------------------------------------------------- */

size_t cost_assumptions(struct cost_assumption *out, size_t cap)
{
    struct cost_rollout_params rp;
    struct cost_train_params tp;
    struct cost_lifecycle_params lp;
    cost_rollout_params_default(&rp, &ref_hardware[COST_REF_A800]);
    cost_train_params_default(&tp);
    cost_lifecycle_params_default(&lp);
    const struct cost_assumption all[] = {
        {"rollout eta_kv", rp.eta_kv, "of HBM BW", "0.7-0.9", "calibration.md 5.1 (assumed)"},
        {"rollout mfu_attn", rp.mfu_attn, "of bf16 peak", "0.3-0.7",
         "FlashAttention-2 forward reaches 50-70 % of A100 peak on long sequences, less on short "
         "chunks"},
        {"rollout t_seq", rp.t_seq_s * 1e6, "us per running sequence", "20-40",
         "calibration.md 5.1 (assumption, confidence L; not fitted)"},
        {"rollout mem_util", rp.mem_util, "of HBM", "0.8-0.95", "vLLM gpu_memory_utilization"},
        {"rollout workspace", rp.workspace_bytes / 1073741824.0, "GiB per GPU", "1-4",
         "calibration.md 2 (~2 GB/GPU)"},
        {"train mfu", tp.mfu, "of bf16 peak", "0.25-0.45",
         "calibration.md 6 central trainer MFU (D); the verl runs fix only work/MFU"},
        {"train dp_overlap", tp.dp_overlap, "of the DP reduction", "0.3-0.9",
         "calibration.md 5.2 (Libra reference: 30-50 %)"},
        {"train t_microbatch", tp.t_microbatch_s, "s per micro-batch", "0-0.2",
         "launches, packing, loss per micro-batch"},
        {"train optimizer_bw_eff", tp.optimizer_bw_eff, "of HBM BW", "0.3-0.8",
         "fused Adam is memory bound"},
        {"train grad_bytes", tp.grad_bytes, "B per parameter", "2-4", "fp32 gradient buffers"},
        {"train optimizer_bytes", tp.optimizer_bytes, "B per parameter", "12-16",
         "fp32 master weights and Adam m, v"},
        {"train workspace", tp.workspace_bytes / 1e9, "GB per GPU", "2-8",
         "allocator, NCCL and kernel buffers"},
        {"train margin", tp.margin_frac, "of HBM", "0-0.1", "fragmentation headroom"},
        {"lifecycle engine_init", lp.engine_init_s, "s", "20-60",
         "calibration.md 3.7: vLLM restart 30-100 s including weight loading"},
        {"lifecycle disk_bw", lp.disk_bw_bytes_per_s / 1e9, "GB/s", "1-5",
         "calibration.md 3.7 (derived: disk at 2 GB/s)"},
        {"lifecycle h2d_bw", lp.h2d_bw_bytes_per_s / 1e9, "GB/s per GPU", "10-25",
         "pinned PCIe copies; matches the 3-6 s wake of 59 GB per GPU in 3.7"},
        {"lifecycle wake_fixed", lp.wake_fixed_s, "s", "0.1-1",
         "calibration.md 3.7: sleep-mode wake 0.1-0.8 s for small models"},
        {"lifecycle bucket", lp.bucket_bytes / 1e6, "MB", "512-4096",
         "calibration.md 3.7: 512 MB (verl+SGLang), 4096 MB (checkpoint-engine)"},
        {"lifecycle bucket_overhead", lp.bucket_overhead_s * 1e3, "ms per bucket", "1-150",
         "calibration.md 3.7: bucketed 16 s vs per-tensor 200 s for a 30B MoE"},
        {"lifecycle switch_fixed", lp.switch_fixed_s, "s", "1-10",
         "calibration.md 3.7: slime colocated sync 7 s (30B-A3B) after optimisation"},
        {"lifecycle group_fixed", lp.group_fixed_s, "s", "0.5-5",
         "weight-update group rebuild: old communicator torn down, store rendezvous; no "
         "published figure"},
        {"lifecycle group_per_rank", lp.group_per_rank_s * 1e3, "ms per rank", "2-50",
         "NCCL bootstrap all-gather and ring/tree setup per rank; no published figure"},
        {"lifecycle trainer_init", lp.trainer_init_s, "s", "5-60",
         "elastic join: engine stopped, trainer processes started without weights; no "
         "published figure"},
        {"lifecycle fetch_fixed", lp.fetch_fixed_s, "s", "0.5-5",
         "elastic join: checkpoint metadata and the members' version agreement; no published "
         "figure"},
        {"dapo prompt", DAPO_PROMPT_TOKENS, "tokens", "100-2048", "DAPO-Math prompts (max 2048)"},
        {"dapo sigma_prompt", DAPO_SIGMA_PROMPT, "log-normal", "0.5-1.0",
         "total sigma 1.0 from calibration.md 1.4 (p99/median ~ 10)"},
        {"dapo sigma_sample", DAPO_SIGMA_SAMPLE, "log-normal", "0.3-0.8",
         "spread between the 16 siblings of a prompt"},
    };
    size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n && i < cap; i++)
        out[i] = all[i];
    return n;
}

/* ---- markdown ------------------------------------------------------------------------------- */

typedef VEC(char) text_vec;

static void appendf(text_vec *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void appendf(text_vec *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    vec_reserve(t, t->n + (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(t->v + t->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)n;
}

static const char *status_name(enum cost_calib_status s)
{
    static const char *names[] = {"fitted", "in band", "MISS", "reported"};
    return names[s];
}

static void evidence_table(text_vec *t)
{
    size_t n = cost_calibration_rows(NULL, 0);
    struct cost_calib_row *rows = xmallocarray(n, sizeof *rows);
    cost_calibration_rows(rows, n);
    appendf(t, "| id | compared | unit | published | modelled | error | band | status | source "
               "|\n|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const struct cost_calib_row *r = &rows[i];
        char band[16] = "-";
        if (r->tolerance > 0.0)
            snprintf(band, sizeof band, "±%.0f %%", r->tolerance * 100.0);
        double pct = fabs(r->error) < 5e-4 ? 0.0 : r->error * 100.0; /* no "-0.0 %" */
        appendf(t, "| %s | %s | %s | %.4g | %.4g | %+.1f %% | %s | %s | %s |\n", r->id, r->quantity,
                r->unit, r->published, r->modelled, pct, band, status_name(r->status), r->source);
    }
    free(rows);
}

static void sensitivity_table(text_vec *t)
{
    struct cost_train_params p;
    struct cost_train_fit f;
    cost_train_params_default(&p);
    appendf(t, "| mean response (tokens) | MFU | t(32) s | t(64) s | t(128) s | t(64)/t(32) | "
               "t(128)/t(64) | imbalance 32/64/128 |\n|---|---|---|---|---|---|---|---|\n");
    static const double means[] = {400.0, 800.0, 1200.0};
    for (size_t i = 0; i <= sizeof means / sizeof means[0]; i++) {
        if (i == 0)
            cost_fit_train(&p, &f); /* the central fit: MFU given, response fitted */
        else
            cost_fit_train_mfu(&p, means[i - 1], &f);
        appendf(t, "| %.0f%s | %.3f%s | %.1f | %.1f | %.1f | %.3f | %.3f | %.2f / %.2f / %.2f |\n",
                f.mean_response_tokens, i == 0 ? " (fitted)" : "", f.mfu,
                i == 0 ? " (given)" : " (fitted)", f.t_s[0], f.t_s[1], f.t_s[2], f.ratio_64_32,
                f.ratio_128_64, f.step[0].imbalance, f.step[1].imbalance, f.step[2].imbalance);
    }
}

static void assumption_table(text_vec *t)
{
    size_t n = cost_assumptions(NULL, 0);
    struct cost_assumption *a = xmallocarray(n, sizeof *a);
    cost_assumptions(a, n);
    appendf(t, "| constant | default | unit | range | basis |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++)
        appendf(t, "| %s | %.4g | %s | %s | %s |\n", a[i].name, a[i].value, a[i].unit, a[i].range,
                a[i].basis);
    free(a);
}

char *cost_calibration_markdown(void)
{
    text_vec t = {0};
    appendf(&t, "<!-- generated by `libra cost calibration`; a unit test keeps it current -->\n\n"
                "#### Calibration points\n\n");
    evidence_table(&t);
    struct cost_rollout_params p, q;
    struct cost_qwen3_rig rig;
    cost_rollout_params_default(&p, &ref_hardware[COST_REF_H20]);
    cost_fit_qwen3_rig(&p, &rig, &q);
    appendf(&t,
            "\nThe rig of the `decode.h20.*` rows, fitted on its first four rows, one constant "
            "each: t_fix %.3f ms (`decode.h20.qwen3-8b`%s), weights stream at %.3f × the "
            "A100-derived η (`decode.h20.qwen3-32b`), KV reads at η_kv %.3f of HBM bandwidth "
            "(`decode.h20.qwen3-8b.30k`), prefill attention at mfu_attn %.3f of bf16 peak "
            "(`decode.h20.qwen3-8b.126k`).\n",
            rig.t_fix_s * 1e3, rig.t_fix_s > 0.0 ? "" : "; held at 0, where its fit would go below",
            rig.eta_scale, rig.eta_kv, rig.mfu_attn);
    appendf(&t, "\n#### Training prediction along the MFU / response-length line\n\n");
    sensitivity_table(&t);
    appendf(&t, "\n#### Assumed constants\n\n");
    assumption_table(&t);
    return t.v;
}
