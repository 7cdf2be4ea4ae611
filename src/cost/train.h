/*
 * Training-side cost model: the time of one RL training step for a parallel layout on an
 * actual list of sequence lengths, and whether the layout fits in GPU memory.
 *
 * Work is counted in FLOPs, k·N per token plus attention, where k sums switchable terms: 6 for
 * forward+backward, +2 for full activation recompute, +2 for an old-log-prob forward, +2 for a
 * reference-model forward (attention scales by the same k/2 forwards). Sequences are dealt to
 * DP ranks longest first to the least loaded rank, each rank taking an equal share of them
 * (verl's balance_batch), and inside a rank packed by tokens into micro-batches; the step is
 * as slow as the most loaded rank of every mini-batch (optimizer step), because ranks meet at
 * the gradient reduction. Communication: TP all-reduces (exposed), CP KV exchange (exposed
 * beyond the attention it overlaps), PP 1F1B bubble and point-to-point sends, DP gradient
 * reduction (a fraction hidden behind backward), ZeRO-3 parameter gathers (exposed beyond the
 * micro-batch they prefetch for). Under hybrid sharding (shard_dp < dp) the gathers and the
 * gradient reduce-scatter stay inside a shard group (NVLink when it fits a node) and only the
 * gradient shards cross groups, at the price of a copy of the state per group.
 *
 * MoE: FLOPs are the active parameters' (router and top-k experts per token). Under expert
 * parallelism (ep > 1) a GPU holds 1/ep of each layer's routed experts (not split by TP), so
 * their state is sharded and their gradients reduced among the GPUs of a stage that hold the
 * same experts; each MoE layer sends every token's top-k copies to their experts' GPUs and
 * back, once per forward sweep and twice in the backward, over NVLink within a node and the
 * NICs between nodes (the slower of the two sets the time; experts are taken to be loaded
 * evenly, and the all-to-alls not to overlap compute).
 *
 * Speed: the sequence-dependent part (dealing, O(n log DP)) is cost_train_deal: the dealing
 * itself (cost_train_assign), which the planner runs once per DP, then the load of each
 * micro-batch budget on it (cost_train_deal_ranks, O(n)); cost_train_step_time is then
 * O(1) per (TP, PP, CP) candidate. Neither allocates once the scratch has grown. Pure and
 * reentrant: no globals; threads need their own scratch.
 */
#ifndef COST_TRAIN_H
#define COST_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cost/shape.h"
#include "spec/preset.h"

/* Constants of the training model; provenance in docs/calibration.md. */
struct cost_train_params {
    double mfu;              /* FLOPs achieved / bf16 peak on training work (assumed: the
                              * sheet's central trainer MFU; the verl runs fix only work/MFU) */
    double dp_overlap;       /* share of the DP gradient reduction hidden behind backward
                              * (assumed) */
    double t_microbatch_s;   /* fixed cost per micro-batch: launches, packing, loss
                              * (assumed) */
    double weight_bytes;     /* bytes per parameter of the compute copy (2: bf16) */
    double grad_bytes;       /* bytes per gradient element (4: fp32 accumulation) */
    double optimizer_bytes;  /* bytes per parameter of optimizer state (12: fp32 master,
                              * Adam m and v) */
    double act_bytes;        /* bytes per activation element (2: bf16) */
    double optimizer_bw_eff; /* HBM efficiency of the optimizer step (assumed) */
    double logits_factor;    /* temporaries of the log-prob/loss over logits (1.5, spec) */
    double workspace_bytes;  /* per GPU: allocator, NCCL and kernel buffers (assumed) */
    double margin_frac;      /* share of HBM kept free (assumed) */
};

/* Fills p with the defaults documented in docs/calibration.md. */
void cost_train_params_default(struct cost_train_params *p);

/* The defaults for hardware hw: as cost_train_params_default, with hw's train_mfu (`libra
 * calibrate`) where it is set (> 0). */
void cost_train_params_for(struct cost_train_params *p, const struct spec_hardware *hw);

/* A training layout. GPUs = tp·pp·cp·dp. */
struct cost_train_config {
    int tp, pp, cp, dp;
    int ep;                      /* expert parallel size (MoE): each layer's routed experts are
                                  * split over groups of ep consecutive GPUs of a pipeline stage
                                  * (Megatron's expert_model_parallel_size with its MoE parallel
                                  * folding, expert TP 1), and a token's top-k copies travel to
                                  * their experts' GPUs and back (all-to-all); 0 or 1: no EP, the
                                  * experts split by TP as the dense layers. Divides tp·cp·dp and
                                  * the experts; 1 for a dense model; not with shard_dp */
    double micro_batch_tokens;   /* token budget of one micro-batch of one DP replica (its CP
                                  * ranks share it); every sequence must fit in it */
    int minibatches;             /* optimizer steps per training step (PPO mini-batches), >= 1 */
    int zero_stage;              /* 0–3: what is sharded over the DP·CP ranks, which hold the
                                  * same weights (1 optimizer, 2 +gradients, 3 +weights) */
    int shard_dp;                /* DP ranks the sharded state is split over (with their CP
                                  * ranks): 0 (or dp) all of them; less: hybrid sharding (FSDP's
                                  * HSDP), each group of shard_dp·cp GPUs holds one copy, the
                                  * groups all-reduce the gradient shards; a divisor of dp */
    bool distributed_optimizer;  /* Megatron's: optimizer state sharded over DP·CP (as ZeRO-1) */
    bool full_recompute;         /* recompute activations in backward: +2N, activations shrink */
    bool old_logprob;            /* trainer computes old log-probs: +2N forward */
    bool reference;              /* reference-model forward for a KL term: +2N */
    bool balance_each_minibatch; /* deal every mini-batch separately (AReaL, Megatron dynamic
                                  * batching); false: balance the whole step, then split each
                                  * rank's share in order into mini-batches (verl) */
};

/* The sequences of one step, prepared once: per-sequence tokens and forward FLOPs, and an
 * order by decreasing work for the dealing. Owns its arrays. */
struct cost_train_seqs {
    size_t n;
    double *tokens;  /* tokens of sequence i (prompt + response) */
    double *work;    /* forward FLOPs of sequence i (cost_seq_forward_flops) */
    uint32_t *order; /* indices by decreasing work, ties by index */
    double total_tokens;
    double total_work;
    double longest_tokens;
};

/*
 * Prepares seqs from n sequence lengths (tokens, in step order). Returns 0, or LIBRA_EINVAL
 * when n is 0 or a length is 0. seqs is zeroed on error.
 */
int cost_train_seqs_init(struct cost_train_seqs *seqs, const struct cost_shape *s,
                         const uint32_t *tokens, size_t n);

/* Releases seqs' arrays; a zeroed seqs is fine. */
void cost_train_seqs_free(struct cost_train_seqs *seqs);

/* What one DP rank holds in one mini-batch. */
struct cost_train_cell {
    double tokens;
    double work; /* forward FLOPs */
    double attn; /* the attention part of work */
    double seqs;
    double big; /* sequences longer than half a micro-batch: each needs its own */
};

/* Reusable scratch of cost_train_deal; zero-initialise, free with cost_train_scratch_free. */
struct cost_train_scratch {
    struct cost_train_cell *cell; /* mini-batches × ranks */
    uint32_t *rank;               /* per sequence: its DP rank */
    uint32_t *heap;               /* per rank */
    uint32_t *count;              /* per rank: sequences in the step */
    size_t cap_cells;
    size_t cap_seqs;
    size_t cap_ranks;
};

void cost_train_scratch_free(struct cost_train_scratch *sc);

/* What the step time needs from the dealing, summed over mini-batches. */
struct cost_train_load {
    int dp;
    int minibatches;
    double micro_batch_tokens;
    double tokens;         /* all tokens of the step */
    double work;           /* forward FLOPs of the step (all ranks) */
    double attn_work;      /* the attention part of work */
    double work_max;       /* Σ over mini-batches of the most loaded rank's forward FLOPs */
    double tokens_max;     /* Σ over mini-batches of that rank's tokens */
    double attn_work_max;  /* the attention part of work_max */
    double microbatches;   /* Σ over mini-batches of the largest micro-batch count of a rank
                            * (ranks step through micro-batches together) */
    double longest_tokens; /* the longest sequence */
};

/*
 * Deals seqs to dp ranks and packs micro-batches of micro_batch_tokens (see
 * cost_train_config.balance_each_minibatch for the order). Returns 0; LIBRA_EINVAL when dp or
 * minibatches < 1; LIBRA_EINFEAS when the longest sequence exceeds micro_batch_tokens or there
 * are fewer sequences than dp·minibatches (a rank would get an empty mini-batch). sc grows as
 * needed (allocation only then).
 */
int cost_train_deal(const struct cost_train_seqs *seqs, const struct cost_shape *s, int dp,
                    int minibatches, double micro_batch_tokens, bool balance_each_minibatch,
                    struct cost_train_scratch *sc, struct cost_train_load *out);

/* The dealing of cost_train_deal alone, which does not depend on the micro-batch budget: each
 * step-order sequence i's DP rank into rank[i] (seqs->n entries; dp >= 1, minibatches >= 1). */
void cost_train_assign(const struct cost_train_seqs *seqs, int dp, int minibatches,
                       bool balance_each_minibatch, struct cost_train_scratch *sc, uint32_t *rank);

/* cost_train_deal on the ranks cost_train_assign gave for the same seqs, dp, minibatches and
 * balance_each_minibatch (the planner deals once for several micro-batch budgets). */
int cost_train_deal_ranks(const struct cost_train_seqs *seqs, const struct cost_shape *s, int dp,
                          int minibatches, double micro_batch_tokens, bool balance_each_minibatch,
                          const uint32_t *rank, struct cost_train_scratch *sc,
                          struct cost_train_load *out);

/* One step's time and where it goes (seconds unless named). */
struct cost_train_step {
    double step_s;
    double compute_s;      /* most loaded ranks' FLOPs at mfu, PP bubble excluded */
    double pp_bubble_s;    /* 1F1B fill and drain */
    double pp_p2p_s;       /* activation sends between stages */
    double tp_comm_s;      /* TP all-reduces */
    double cp_comm_s;      /* CP KV exchange not hidden by attention */
    double dp_comm_s;      /* exposed gradient reduction */
    double ep_comm_s;      /* expert all-to-alls (dispatch and combine), exposed */
    double zero3_gather_s; /* exposed ZeRO-3 parameter gathers */
    double optimizer_s;    /* optimizer steps */
    double microbatch_s;   /* fixed per-micro-batch costs */
    double k_update;       /* FLOP multipliers of N per token, each as configured */
    double k_recompute;
    double k_old_logprob;
    double k_reference;
    double flops;         /* FLOPs of the step, all GPUs */
    double flops_attn;    /* the attention part */
    double imbalance;     /* most loaded rank's work ÷ mean rank work, over the step */
    double mfu_effective; /* flops / (GPUs · peak · step_s) */
};

/*
 * Step time of config c on load (from cost_train_deal with the same dp, minibatches and
 * micro_batch_tokens). Returns 0, or LIBRA_EINVAL when c is inconsistent (sizes < 1, load dealt
 * for another dp, tp not dividing the heads).
 */
int cost_train_step_time(const struct cost_shape *s, const struct spec_hardware *hw,
                         const struct cost_train_params *p, const struct cost_train_config *c,
                         const struct cost_train_load *load, struct cost_train_step *out);

/* Per-GPU memory of a layout (bytes). */
struct cost_train_memory {
    double weights_bytes;
    double grads_bytes;
    double optimizer_bytes;
    double activations_bytes; /* PP in-flight micro-batches of the first stage */
    double logits_bytes;      /* old-log-prob/loss logits: b·L·V/TP·4 B·logits_factor */
    double workspace_bytes;
    double total_bytes;
    double capacity_bytes; /* HBM · (1 − margin) */
    double headroom_bytes; /* capacity − total; negative when it does not fit */
    bool fits;
};

/*
 * Whether config c suits shape s (model names it in messages): positive sizes, TP dividing the
 * heads, PP at most the layers, EP (ep > 1) only on an MoE model and dividing its experts and
 * the GPUs of a pipeline stage, not with hybrid sharding. Returns 0, or LIBRA_EINVAL with why
 * (size bytes; NULL: none) saying which. The costing functions check the same.
 */
int cost_train_config_check(const struct cost_shape *s, const struct cost_train_config *c,
                            const char *model, char *why, size_t size);

/* Memory of config c per GPU. Returns 0 or LIBRA_EINVAL (as cost_train_step_time). */
int cost_train_memory(const struct cost_shape *s, const struct spec_hardware *hw,
                      const struct cost_train_params *p, const struct cost_train_config *c,
                      struct cost_train_memory *out);

#endif
