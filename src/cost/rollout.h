/*
 * Rollout-side cost model: how long one iteration of a continuous-batching inference engine
 * (vLLM/SGLang with chunked prefill) takes for a given mix of work, and how much KV fits.
 *
 * The engine model and the simulator call cost_iter_time for every batch composition change,
 * and the planner for every candidate instance, so the split is: cost_rollout_pre_init derives
 * everything that depends only on (model, hardware, TP, constants) once; cost_iter_time is then
 * a handful of multiply-adds with no allocation and no branches on strings.
 *
 * The formula is calibration.md §3.4/§5.1 with each kernel class its own roofline (kernels run
 * one after another, so their times add):
 *   linear  = L · ‖W_layer/(BW·η(W_layer)), 2·P_layer·tokens/(TP·F·μ(W_layer))‖₂
 *   head    = ‖W_head/(BW·η(W_head)), 2·P_head·sampled/(TP·F·μ(W_head))‖₂
 *   attn    = max(KV bytes read and written/(BW·η_kv), 4·q_dim·L·pairs/(TP·F·mfu_attn))
 *   allred  = 2·L·(α + 2(TP−1)/TP · tokens·hidden·2 B / busBW)          (TP > 1)
 *   t       = linear + head + attn + allred + t_fix + running_seqs·t_seq
 * W are weight bytes held by one GPU. For a mixture of experts W_layer is what the iteration's
 * tokens touch: the attention and router weights, and every expert any token selects — with T
 * tokens each choosing top_k of E experts uniformly, E·(1 − (1 − top_k/E)^T) of them — so a
 * batch of 256 decoding tokens of Qwen3-30B-A3B streams all 30 B parameters while computing with
 * 3.3 B per token; η is taken at the bytes the iteration streams, so that one token costs what
 * a dense model of the active parameters does. Uniform routing is an assumption: skewed
 * routing touches fewer experts. η and μ are
 * weight-streaming and GEMM efficiencies interpolated over the bytes of one layer per GPU; the
 * table is Vidur's A100 per-layer profiles (calibration.md §3.3b) re-indexed by bytes per GPU
 * so that it applies to any shape and TP: for the two profiled shapes it reproduces η(TP) of
 * §3.3b exactly. GEMMs combine streaming and compute as a 2-norm rather than a max: near the
 * knee neither hides the other, and Vidur's 64- and 256-token rows (not used by the fit) sit on
 * the 2-norm, 10–15 % above the max (docs/calibration.md). t_fix is fitted (cost_fit_t_fix);
 * t_seq is an assumption.
 */
#ifndef COST_ROLLOUT_H
#define COST_ROLLOUT_H

#include <stdbool.h>

#include "cost/shape.h"
#include "spec/preset.h"

#define COST_CURVE_MAX 16

/* A piecewise-linear efficiency curve over ln(bytes): points sorted by x, clamped at both
 * ends. */
struct cost_curve {
    int n;
    double bytes[COST_CURVE_MAX]; /* weight bytes of one layer held by one GPU, ascending */
    double eff[COST_CURVE_MAX];   /* efficiency in (0, 1] at that size */
};

/* Calibration constants of the rollout model; units in the names. Defaults and provenance:
 * cost_rollout_params_default and docs/calibration.md. */
struct cost_rollout_params {
    struct cost_curve eta; /* weight-streaming efficiency η vs layer bytes per GPU (measured) */
    struct cost_curve mu;  /* GEMM efficiency (fraction of bf16 peak) vs the same (measured) */
    double eta_kv;         /* efficiency of KV reads, fraction of HBM BW (assumed) */
    double mfu_attn;       /* attention kernels, fraction of bf16 peak (assumed) */
    double t_fix_s;        /* fixed per-iteration engine overhead (fitted) */
    double t_seq_s;        /* per running sequence per iteration (assumed) */
    double ar_latency_s;   /* small-message all-reduce latency α (from the hardware) */
    double ar_bus_bw_bytes_per_s; /* all-reduce bus bandwidth inside a node (from hardware) */
    double weight_dtype_bytes;    /* bytes per weight element (2: bf16) */
    double kv_dtype_bytes;        /* bytes per KV element (2: bf16) */
    double act_dtype_bytes;       /* bytes per activation element in all-reduces (2) */
    double mem_util;              /* fraction of HBM the engine may use (vLLM 0.9 default) */
    double workspace_bytes;       /* per GPU: activations, CUDA graphs, allocator slack */
};

/*
 * Fills p with the calibrated defaults for hardware hw: the η and μ curves from Vidur's A100
 * rows, t_fix fitted on Qwen2.5-7B batch 1 on A100 (11.9 ms/token), η_kv 0.8, mfu_attn 0.5,
 * t_seq 30 µs, all-reduce latency and bandwidth from hw, memory utilisation 0.9, 2 GiB
 * workspace. hw's decode_t_fix_s and decode_t_seq_s (`libra calibrate`) replace t_fix and
 * t_seq where they are set (> 0). Pure; costs a few thousand model evaluations (the t_fix fit)
 * unless hw sets t_fix, so call it once.
 */
void cost_rollout_params_default(struct cost_rollout_params *p, const struct spec_hardware *hw);

/* Where a decode constant of cost_rollout_params_default comes from: what it rests on and the
 * serving engine (and version) behind those measurements, "none" where no engine ran. */
struct cost_decode_source {
    const char *constant; /* "t_fix", "eta, mu", ... */
    const char *basis;
    const char *engine;
};

/* The decode constants' sources, in a static table of *n rows. */
const struct cost_decode_source *cost_decode_sources(size_t *n);

/* Efficiency at x bytes: linear interpolation in ln(x) between the two neighbouring points,
 * the end values outside. c->n must be >= 1. */
double cost_curve_eval(const struct cost_curve *c, double bytes);

/*
 * Everything the iteration time needs for one (model, hardware, TP, constants) triple.
 * Plain data: copy it, keep arrays of it (one per TP size), share it across threads.
 */
struct cost_rollout_pre {
    int tp;
    bool moe; /* a mixture of experts: the weights streamed grow with the tokens */
    double layers;
    double t_layer_weights_s; /* streaming one layer's weights on one GPU (dense only) */
    /* MoE only (0 when dense): what an iteration streams per layer on one GPU is dense_bytes
     * plus expert_bytes per expert touched, at bandwidth bw_bytes_per_s · η(those bytes) */
    double experts, top_k;        /* routed experts per layer, chosen per token */
    double dense_bytes;           /* attention and router weights of one layer, per GPU */
    double expert_bytes;          /* one expert of one layer, per GPU */
    double bw_bytes_per_s;        /* HBM bandwidth */
    struct cost_curve eta;        /* weight-streaming efficiency (the constants' η) */
    double s_per_layer_token;     /* GEMM seconds per token per layer on one GPU */
    double t_head_weights_s;      /* streaming the output projection */
    double s_per_head_token;      /* output-projection seconds per sampled token */
    double kv_bytes_per_token;    /* per GPU, all layers */
    double s_per_kv_byte;         /* 1/(BW·η_kv) */
    double s_per_attn_pair;       /* attention seconds per (query, key) pair, all layers */
    double t_allreduce_fixed_s;   /* 2·L·α, 0 at TP 1 */
    double s_allreduce_per_token; /* 2·L·2(TP−1)/TP·hidden·bytes/busBW, 0 at TP 1 */
    double t_fix_s;
    double t_seq_s;
    double weight_bytes_per_gpu; /* total parameters (memory), per GPU */
    double kv_capacity_tokens;   /* KV tokens the instance holds; 0 when weights do not fit */
};

/*
 * Derives pre for model shape s on hardware hw at tensor-parallel size tp under constants p.
 * Returns 0, or LIBRA_EINVAL when tp < 1 or tp does not divide the query heads. A model whose
 * weights do not fit gets kv_capacity_tokens = 0 (not an error: the caller decides).
 */
int cost_rollout_pre_init(struct cost_rollout_pre *pre, const struct cost_shape *s,
                          const struct spec_hardware *hw, const struct cost_rollout_params *p,
                          int tp);

/* Seconds of one layer's linear operators (projections and MLP, what Vidur's mlp profiles
 * time) for `tokens` tokens on one GPU: weight streaming and GEMM compute, 2-norm combined. */
double cost_linear_layer_time(const struct cost_rollout_pre *pre, double tokens);

/* Experts of one layer that `tokens` tokens touch, in expectation (uniform top-k routing);
 * 0 for a dense model. */
double cost_experts_touched(const struct cost_rollout_pre *pre, double tokens);

/* Seconds of streaming the weights of one layer that `tokens` tokens touch on one GPU. */
double cost_layer_stream_time(const struct cost_rollout_pre *pre, double tokens);

/*
 * The work of one engine iteration. Decode sequences each generate one token; prefill chunks
 * compute new prompt tokens, possibly after a cached prefix (the suffix of a multi-turn
 * context, or a later chunk of a long prompt). Sums, so that a batch of any size is O(1) to
 * cost: build it with the helpers below or keep the sums incrementally.
 */
struct cost_batch {
    double decode_seqs;        /* sequences generating one token */
    double decode_ctx_tokens;  /* Σ context tokens already in KV over decode sequences */
    double prefill_seqs;       /* prefill chunks in the iteration */
    double prefill_tokens;     /* Σ new tokens over chunks */
    double prefill_ctx_tokens; /* Σ tokens already in KV before each chunk (cached prefix) */
    double prefill_pairs;      /* Σ n·c + n(n+1)/2 over chunks (n new, c cached): attention */
    double prefill_done_seqs;  /* chunks that finish their prompt and sample a token */
};

/* Adds one decode sequence whose KV holds ctx_tokens. */
void cost_batch_add_decode(struct cost_batch *b, double ctx_tokens);

/* Adds one prefill chunk of new_tokens after cached_tokens already in KV; done when the chunk
 * completes the prompt (the engine samples the first output token). */
void cost_batch_add_prefill(struct cost_batch *b, double cached_tokens, double new_tokens,
                            bool done);

/* An iteration's time split by kernel class (seconds); total_s is their sum. */
struct cost_iter_parts {
    double linear_s;
    double head_s;
    double attn_s;
    double allreduce_s;
    double fixed_s; /* t_fix */
    double seq_s;   /* running sequences · t_seq */
    double total_s;
    bool linear_compute_bound;
    bool attn_compute_bound;
};

/* Breakdown of one iteration of batch b; an empty batch costs 0 (no iteration runs). */
void cost_iter_parts(const struct cost_rollout_pre *pre, const struct cost_batch *b,
                     struct cost_iter_parts *out);

/* Seconds for one iteration of batch b (the total of cost_iter_parts). */
double cost_iter_time(const struct cost_rollout_pre *pre, const struct cost_batch *b);

/* Seconds per decode iteration of `seqs` sequences holding ctx_tokens of context in total. */
double cost_decode_time(const struct cost_rollout_pre *pre, double seqs, double ctx_tokens);

/* cost_decode_time as a line in the context for a fixed seqs: base_s + per_ctx_token_s ·
 * ctx_tokens (every term of a decode iteration is constant in the context or proportional to
 * it plus seqs), equal to it up to rounding; for callers that cost many contexts at one batch. */
void cost_decode_line(const struct cost_rollout_pre *pre, double seqs, double *base_s,
                      double *per_ctx_token_s);

/*
 * Seconds to prefill new_tokens after cached_tokens on an otherwise idle instance, in chunks
 * of at most chunk_tokens (the engine's max batched tokens), the last one sampling a token.
 * Used for re-prefill after a lost cache and KV recompute.
 */
double cost_prefill_time(const struct cost_rollout_pre *pre, double cached_tokens,
                         double new_tokens, double chunk_tokens);

/*
 * Mean seconds per output token of one request generating gen_tokens after a prompt of
 * prompt_tokens at batch 1 (prefill in one chunk, then one decode iteration per further token,
 * context growing): total time / gen_tokens, as vendor speed tables measure it.
 */
double cost_single_request_s_per_token(const struct cost_rollout_pre *pre, double prompt_tokens,
                                       double gen_tokens);

#endif
