/*
 * Calibration points: measurements the cost model's engine and trainer constants are fitted
 * on, each with the model's prediction of it, and the fit of those constants (cost/fit.h) over
 * a set of them. The project's own calibration (cost/calib.h: Qwen's batch-1 speed table) and
 * `libra calibrate` (a user's serving benchmarks and trainer logs, cost/import.h) build points
 * of these kinds and fit them here, so both go through one model of a measurement and one
 * solver.
 *
 * Three constants are fitted (the rest are measured or assumed, docs/calibration.md):
 *   decode_t_fix_s  fixed cost of an engine iteration        (linear: every iteration adds it)
 *   decode_t_seq_s  cost per running sequence per iteration  (linear: times the sequences)
 *   train_mfu       the trainer's FLOP efficiency            (compute time is linear in 1/MFU;
 *                                                             solved by re-linearising)
 * A decode point is one of:
 *   - serving: the mean iteration a decoding sequence saw in a benchmark run at steady load or
 *     in a band of a gateway's capture — decode_seqs sequences decoding at ctx_tokens of
 *     context each, with prefill_seqs prompts (prefill_tokens tokens) per iteration prefilled
 *     beside them (chunked prefill), each prompt in an iteration of its own while there are
 *     fewer prompts than iterations: the linear layers' roofline makes a prompt concentrated
 *     in one iteration cost compute that spread thin over every iteration it would not;
 *   - single request: a request alone on the engine (batch 1), prompt_tokens in and
 *     gen_tokens out, timed as total time / gen_tokens (vendor speed tables).
 * A training point is one training step's update phase: its sequences, its layout, its time.
 *
 * Pure; the fit allocates its per-point arrays. Thread-safe on distinct outcomes.
 */
#ifndef COST_POINTS_H
#define COST_POINTS_H

#include <stdbool.h>
#include <stddef.h>

#include "cost/fit.h"
#include "cost/rollout.h"
#include "cost/shape.h"
#include "cost/train.h"
#include "spec/preset.h"

enum cost_constant {
    COST_CONST_T_FIX,     /* decode_t_fix_s: rollout t_fix_s */
    COST_CONST_T_SEQ,     /* decode_t_seq_s: rollout t_seq_s */
    COST_CONST_TRAIN_MFU, /* train_mfu: train mfu */
    COST_N_CONSTANTS,
};

/* Name of c as hardware presets and `libra calibrate` spell it ("decode_t_fix_s"). */
const char *cost_constant_name(enum cost_constant c);

/* The constant named name, or -1. */
int cost_constant_find(const char *name);

enum cost_decode_kind {
    COST_DECODE_SERVING, /* the mean iteration of a serving run */
    COST_DECODE_SINGLE,  /* one request at batch 1, per output token */
};

struct cost_decode_point {
    enum cost_decode_kind kind;
    const struct cost_shape *shape; /* the model measured; NULL: the fit input's */
    int tp;                         /* tensor-parallel size of the engine */
    double measured_s; /* serving: seconds per iteration; single: seconds per output token */
    /* serving: per iteration, means over the run */
    double decode_seqs;    /* sequences generating a token */
    double ctx_tokens;     /* context of one decoding sequence */
    double prefill_tokens; /* prompt tokens prefilled */
    double prefill_seqs;   /* prompts (chunks) among them */
    double prefill_pairs;  /* attention (query, key) pairs of those prompt tokens */
    /* single */
    double prompt_tokens;
    double gen_tokens; /* >= 1 */
};

/* The model's value of pt (same unit as measured_s) under pre. */
double cost_decode_point_time(const struct cost_rollout_pre *pre,
                              const struct cost_decode_point *pt);

/* What one second of t_fix (terms[0]) and of t_seq (terms[1]) add to pt's value: the model is
 * exactly linear in both. */
void cost_decode_point_terms(const struct cost_decode_point *pt, double terms[2]);

struct cost_train_point {
    double measured_s;                  /* the update phase of one step */
    const struct cost_train_seqs *seqs; /* the step's sequences (the caller's) */
    struct cost_train_config config;    /* the layout it ran on */
};

/* A set of points and the constants to fit on them. */
struct cost_fit_input {
    const struct cost_shape *shape;
    const struct spec_hardware *hw;
    struct cost_rollout_params rollout; /* every other constant, and held t_fix, t_seq */
    struct cost_train_params train;     /* every other constant, and a held mfu */
    const struct cost_decode_point *decode;
    size_t n_decode;
    const struct cost_train_point *train_points;
    size_t n_train;
    unsigned fit; /* 1u << cost_constant for each constant to fit; the others are held */
};

/* What cost_fit_constants found. */
struct cost_fit_outcome {
    bool fitted[COST_N_CONSTANTS];
    /* fitted, or held at the input's value; a train_mfu fitted past 1 is the first estimate
     * past 1, a lower bound of the fit (points.c fit_mfu), INFINITY where that estimate of
     * 1/MFU is <= 0 (no MFU gives steps that short) */
    double value[COST_N_CONSTANTS];
    double sd[COST_N_CONSTANTS];   /* standard error of a fitted constant; NAN otherwise or
                                    * when the fit is exact */
    struct cost_fit_result decode; /* the fit over the decode points (when one ran) */
    struct cost_fit_result train;  /* over the training points */
    double *decode_modelled;       /* per decode point, under value[]; owned */
    double *train_modelled;        /* per training point; owned */
    int undetermined;              /* the constant the points do not determine, or -1 */
    double independence;           /* its independence (cost_fit_result) */
};

/*
 * Fits in->fit's decode constants on the decode points and train_mfu on the training points;
 * a constant to fit whose kind of point is absent is held. Returns 0; LIBRA_EINFEAS when a
 * constant is not determined by its points (out->undetermined); LIBRA_EINVAL when a point
 * cannot be costed (a TP that does not divide the heads, a layout that does not suit the model
 * or its sequences) or a measured value is not > 0. A fitted value may come out non-physical
 * (negative, an MFU above 1): the caller judges. Free out with cost_fit_outcome_free in every
 * case.
 */
int cost_fit_constants(const struct cost_fit_input *in, struct cost_fit_outcome *out);

void cost_fit_outcome_free(struct cost_fit_outcome *out);

#endif
