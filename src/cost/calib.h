/*
 * The evidence behind the cost model: published measurements (calibration.md), the fits that
 * turn some of them into constants, and the table that compares the model with every one of
 * them.
 *
 * The reference shapes and GPUs are fixed here rather than looked up among the presets, so the
 * evidence does not move when a user overrides a preset. docs/calibration.md embeds the table
 * that cost_calibration_markdown renders, and a unit test compares the two, so the document
 * cannot drift from the code.
 */
#ifndef COST_CALIB_H
#define COST_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "cost/points.h"
#include "cost/rollout.h"
#include "cost/train.h"
#include "spec/preset.h"

/* Reference shapes of calibration.md §2 and §2.2 (Llama-3-8B and CodeLlama-34B are test-only
 * proxies of Vidur's profiled models; Qwen3-30B-A3B, §2, is the MoE of the training check; the
 * Qwen3 models from 4B on are those of Qwen3's speed benchmark, Qwen3-235B-A22B's shape from
 * slime's scripts/models/qwen3-235B-A22B.sh). */
enum cost_ref_model {
    COST_REF_QWEN25_7B,
    COST_REF_QWEN25_14B,
    COST_REF_QWEN25_32B,
    COST_REF_LLAMA3_8B,
    COST_REF_CODELLAMA_34B,
    COST_REF_QWEN3_30B_A3B,
    COST_REF_QWEN3_4B,
    COST_REF_QWEN3_8B,
    COST_REF_QWEN3_14B,
    COST_REF_QWEN3_32B,
    COST_REF_QWEN3_235B_A22B,
};

/* Reference GPUs of calibration.md §3.1, §2.1, §3.2 and §6 (H20's network values are the
 * sheet's assumptions, §2.2), as in the built-in presets. */
enum cost_ref_hw {
    COST_REF_A100,
    COST_REF_A800,
    COST_REF_H100,
    COST_REF_H20,
};

const struct spec_model *cost_ref_model(enum cost_ref_model m);
const struct spec_hardware *cost_ref_hardware(enum cost_ref_hw h);

/*
 * Builds the η (weight streaming) and μ (GEMM) efficiency curves from Vidur's A100 per-layer
 * medians of Llama-3-8B and CodeLlama-34B at 1 and 4096 tokens, TP 1–8 (calibration.md
 * §3.3b): η = layer bytes per GPU / (HBM BW · time at 1 token), μ = 2·P·4096/TP / (peak · time
 * at 4096 tokens), each point at its layer bytes per GPU.
 */
void cost_vidur_curves(struct cost_curve *eta, struct cost_curve *mu);

/* A published decode measurement — calibration.md §3.3a: Qwen's speed table (vLLM 0.6.3, A100,
 * batch 1, 2048 tokens out), or Qwen3's (below) — as a calibration point of its reference
 * model. */
struct cost_sheet_decode {
    const char *id;   /* "decode.qwen2.5-14b" */
    const char *what; /* the conditions, for the evidence table */
    enum cost_ref_model model;
    double published_ms; /* per output token */
    struct cost_decode_point point;
};

/* The sheet's decode points (the first, Qwen2.5-7B, fixes t_fix) into *out. Returns their
 * number. */
size_t cost_sheet_decode_points(const struct cost_sheet_decode **out);

/*
 * The decode points of Qwen3's speed benchmark (SGLang 0.4.6.post1, H20 96 GB, BF16, batch 1,
 * 2048 tokens out, speed published as (prompt + generated tokens) / time): every BF16 row of dense
 * Qwen3 4B-32B (TP1; TP2 for Qwen3-32B at 129 024 tokens in) and of the MoE Qwen3-30B-A3B (TP1)
 * and Qwen3-235B-A22B (TP8), at each of the inputs 1, 6144, 14336, 30720, 63488 and 129024
 * tokens, each as a calibration point of its reference model at ms per output token. The first
 * two (Qwen3-8B and -32B, 1 token in) fix the rig (cost_fit_qwen3_rig); the rest are out of
 * sample. Returns their number.
 */
size_t cost_qwen3_speed_points(const struct cost_sheet_decode **out);

/* The rig of Qwen3's speed benchmark as the cost model sees it. */
struct cost_qwen3_rig {
    double eta_scale; /* its weight-streaming efficiency over the A100-derived η curve */
    double eta_kv;    /* its KV reads' share of HBM bandwidth in decode attention */
    double mfu_attn;  /* its prefill attention's share of bf16 peak */
    double t_fix_s;   /* its fixed cost per iteration */
};

/*
 * Fits the rig of Qwen3's speed benchmark on its four dense fit points, one constant each:
 * t_fix (linear) so that Qwen3-8B with 1 token in takes its measured time, a factor on the η
 * curve so that Qwen3-32B with 1 token in does, η_kv so that Qwen3-8B after 30 720 tokens does
 * (KV reads) and mfu_attn so that Qwen3-8B after 129 024 tokens does (prefill attention); each
 * by bisection with the others held, in rounds until they settle. The other constants are p's
 * (p->t_fix_s and p's H20 values ignored: the rig is the reference H20). Into *rig, and the
 * rig's constants into *q.
 */
void cost_fit_qwen3_rig(const struct cost_rollout_params *p, struct cost_qwen3_rig *rig,
                        struct cost_rollout_params *q);

/*
 * The fixed per-iteration overhead that makes Qwen2.5-7B at batch 1 on A100 (1 token in, 2048
 * out, vLLM 0.6.3) take the measured 11.9 ms per output token under constants p (p->t_fix_s
 * ignored): the first sheet point fitted alone (cost/points.h). Seconds.
 */
double cost_fit_t_fix(const struct cost_rollout_params *p);

/*
 * The training evidence: verl's colocated DAPO runs of Qwen2.5-Math-7B on H20 (calibration.md
 * §3.6, §4): 512 prompts × 16 samples, responses capped at 28 K, FSDP2 with Ulysses SP 4,
 * dynamic batching, 16 PPO mini-batches, gradient checkpointing.
 */
struct cost_train_fit {
    double mfu;                  /* given or fitted at 32 GPUs */
    double mean_response_tokens; /* of the length sample (cost_dapo_lengths), given or fitted */
    double t_s[3];               /* modelled update_actor at 32, 64, 128 GPUs */
    double ratio_64_32;          /* modelled t(64)/t(32) */
    double ratio_128_64;         /* modelled t(128)/t(64) */
    struct cost_train_step step[3];
};

#define COST_DAPO_SEQS (512 * 16)

/*
 * Fills lengths (tokens, in step order: prompt by prompt) with a deterministic DAPO-like sample
 * whose responses average mean_response tokens: log-normal around a per-prompt scale shared by
 * the 16 siblings, capped at 28 K, plus a 200-token prompt. The shape is assumed (documented in
 * docs/calibration.md); no per-sequence lengths of these runs are published.
 */
void cost_dapo_lengths(uint32_t lengths[COST_DAPO_SEQS], double mean_response);

/* The verl layout at `gpus` GPUs (SP 4 as CP, DP = gpus/4, 61 440·4-token micro-batches). */
void cost_verl_config(struct cost_train_config *c, int gpus);

/*
 * The 32-GPU time fixes only work ÷ MFU, so one of the two is given: cost_fit_train takes
 * p->mfu (the sheet's central trainer MFU by default) and fits the mean response of the sample;
 * cost_fit_train_mfu takes the mean response and fits the MFU. Both then predict 64 and 128
 * GPUs under constants p.
 */
void cost_fit_train(const struct cost_train_params *p, struct cost_train_fit *out);
void cost_fit_train_mfu(const struct cost_train_params *p, double mean_response,
                        struct cost_train_fit *out);

/* Where a row stands against its band. */
enum cost_calib_status {
    COST_CALIB_FITTED,   /* the constant was fitted on this point */
    COST_CALIB_IN_BAND,  /* out of sample, |error| within the band */
    COST_CALIB_MISS,     /* out of sample, outside the band */
    COST_CALIB_REPORTED, /* no band: a comparison with a derived or loosely defined value */
};

/* One row of the evidence table. */
struct cost_calib_row {
    const char *id;       /* stable key, e.g. "decode.qwen2.5-14b" */
    const char *quantity; /* what is compared, with its conditions */
    const char *unit;     /* of published and modelled */
    const char *source;   /* where the published value comes from */
    double published;
    double modelled;
    double error;     /* (modelled − published) / published */
    double tolerance; /* band on |error|; 0: none */
    enum cost_calib_status status;
};

/* One assumed constant: its default and the range the sheet gives or we assume. */
struct cost_assumption {
    const char *name;
    double value; /* the default, in unit */
    const char *unit;
    const char *range;
    const char *basis;
};

/* Computes the evidence table into rows (at most cap). Returns the number of rows there are. */
size_t cost_calibration_rows(struct cost_calib_row *rows, size_t cap);

/* The assumed constants with their current defaults into out (at most cap). Returns their
 * number. */
size_t cost_assumptions(struct cost_assumption *out, size_t cap);

/* The markdown of the evidence, the training sensitivity and the assumptions (what
 * docs/calibration.md embeds between its markers). Returns a malloc'd string the caller
 * frees. */
char *cost_calibration_markdown(void);

#endif
