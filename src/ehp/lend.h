/*
 * What the Elastic Hybrid Pool lends: for a trainer layout, whether a whole training replica
 * can change sides at all, what one is (GPUs, memory per GPU when it trains), what moving it
 * costs (time to join training, time back to rollout), and what a step costs with some of
 * them training beside the core (libra-spec.md §3, §5).
 *
 * The unit of elasticity is one whole DP replica on one host. A hybrid replica trains in its
 * own communication domain beside the core and steps its optimizer in lockstep with it, so,
 * unlike a core replica whose optimizer state is sharded over DP (Megatron's distributed
 * optimizer), it holds a full copy of the weights, the fp32 master weights and Adam's state
 * over its own GPUs; joining fetches all of that (about 14 bytes per parameter: ~207 GB for
 * 14.8 B parameters) and every step exchanges the fp32 gradient with its core lane both ways
 * (~59 GB each way). Under FSDP (ZeRO-3 over the whole DP group) no replica holds a whole
 * copy, so nothing can be lent; HSDP (sharding inside groups of S DP ranks, replicating
 * across them) has one: a shard group. plan/ has no HSDP layouts yet, so the caller says
 * whether an FSDP layout runs as HSDP and with which group.
 *
 * By default a hybrid that trains shares the fixed global batch with the core (the batch is
 * dealt to more DP ranks); a batch that grows with the pool (the reference's) is the labelled
 * option EHP_BATCH_GROW of ehp/pool.h, and ehp_train_step costs either: the caller passes the
 * step's sequences.
 *
 * Pure: every figure comes from cost/ (train.h, lifecycle.h). Reentrant.
 */
#ifndef EHP_LEND_H
#define EHP_LEND_H

#include <stdbool.h>

#include "cost/shape.h"
#include "cost/train.h"
#include "plan/plan.h"
#include "spec/preset.h"

/* Why a layout can or cannot lend. */
enum ehp_lend_why {
    EHP_LEND_OK,
    EHP_LEND_FULL_SHARD,  /* FSDP over the whole DP group: no replica holds a whole copy */
    EHP_LEND_SHARD_GROUP, /* the HSDP shard group does not divide DP */
    EHP_LEND_NODE,        /* a replica spans nodes */
    EHP_LEND_EXPERTS,     /* EP: a replica holds part of an expert group (EP not dividing TP·CP) */
    EHP_LEND_MEMORY,      /* a replica's full state and activations do not fit its GPUs */
};

/* Seconds of each move of one replica (the pool's phases, ehp/pool.h). */
struct ehp_times {
    double start_s;     /* REQUESTED: its engine stops, trainer processes start */
    double fetch_s;     /* FETCHING_STATE: every member fetches its shard of the state */
    double zero_sync_s; /* ZERO_SYNC: the link to its core lane is built and one exchange of
                         * zero gradients shows it in lockstep */
    double return_s;    /* back to rollout: trainers stop, the engine cold-starts with the
                         * current weights from disk (the reference's path) */
};

/* One replica of a layout, as the pool lends it. */
struct ehp_lend {
    bool can_lend;
    enum ehp_lend_why why;
    int replica_gpus;   /* GPUs of one replica: TP·PP·CP, or S·CP under HSDP; 0 when no
                         * replica exists (FSDP without HSDP) */
    int shards;         /* distinct state shards of a replica: TP·PP·CP, or S·CP under HSDP
                         * (its CP ranks split the state as its DP ranks do) */
    int dp_ranks;       /* DP ranks of one replica: 1, or S under HSDP */
    int core_replicas;  /* replicas of the layout's core: DP, or DP / S */
    double state_bytes; /* the whole state a join fetches (cost_state_bytes) */
    double grad_bytes;  /* one full gradient, each way per step (cost_grad_bytes) */
    struct cost_train_memory memory;      /* per GPU of a hybrid replica while it trains */
    struct cost_train_memory core_memory; /* per GPU of a core replica, for comparison */
    struct ehp_times times;
    double join_s;     /* request to ACTIVATING: start + fetch + zero sync */
    double exchange_s; /* one gradient exchange with the core lane (cost_grad_exchange_s) */
};

/*
 * Describes a replica of layout l with settings st (trainer passes, cost constants) for model
 * shape s on hardware hw: an HSDP layout (l->shard_dp) lends a shard group, plain FSDP nothing,
 * a Megatron layout a DP rank's replica. Returns 0 with out->can_lend saying whether it can lend
 * and out->why why not (every field that exists is filled either way; times are 0 without a
 * replica); LIBRA_EINVAL when l is inconsistent (a size below 1, a TP that does not divide the
 * heads, a negative shard group or one on a non-FSDP layout).
 */
int ehp_lend_layout(const struct plan_train_layout *l, const struct plan_settings *st,
                    const struct cost_shape *s, const struct spec_hardware *hw,
                    struct ehp_lend *out);

/* The DP ranks of one replica of l, the unit the pool lends: an HSDP layout's shard group, else
 * one (l's DP replicas are l->dp / this). */
int ehp_replica_ranks(const struct plan_train_layout *l);

/* One training step with some hybrid replicas training beside the core. */
struct ehp_step_cost {
    double step_s;                /* train.step_s + exchange_s */
    double exchange_s;            /* gradient exchanges on the busiest core lane: a lane serves
                                   * ceil(active / core replicas) hybrids one after the other;
                                   * 0 without hybrids */
    int dp_ranks;                 /* DP ranks the sequences were dealt to */
    struct cost_train_step train; /* the step on the core and active hybrids' ranks */
};

/*
 * Costs a step of layout l (lend from ehp_lend_layout with the same arguments, can_lend) with
 * `active` hybrid replicas training, on the step's sequences seqs: the fixed batch (default)
 * or the grown one (EHP_BATCH_GROW), whichever the caller passes. The sequences are dealt to
 * the core's DP ranks plus the hybrids' (each hybrid is a DP rank, or S under HSDP) and the
 * step is costed by cost_train_step_time on that many ranks (under HSDP its parameter gathers
 * as FSDP's over all of them: an overestimate), plus the exchanges; core lanes wait for the
 * hybrids' payloads, so those are exposed. Returns 0; LIBRA_EINVAL when active < 0 or lend
 * cannot lend; LIBRA_EINFEAS when the sequences cannot be dealt (fewer than ranks ×
 * mini-batches, or one longer than a micro-batch). sc grows as needed.
 */
int ehp_train_step(const struct plan_train_layout *l, const struct ehp_lend *lend,
                   const struct plan_settings *st, const struct cost_shape *s,
                   const struct spec_hardware *hw, const struct cost_train_seqs *seqs, int active,
                   struct cost_train_scratch *sc, struct ehp_step_cost *out);

/*
 * Seconds of one training step of layout l on the batch it took (seqs), as libra sim's trainer
 * costs it and every trainer that should agree with it: the planner's configuration on the
 * batch at hand (no more DP ranks than sequences, no more mini-batches than they fill,
 * micro-batches at least the longest sequence). With lend (the pool's: can_lend), the step of
 * the core and min(active, what the batch leaves a hybrid) hybrid replicas, by ehp_train_step;
 * with lend NULL, the core's step alone. Into *step_s. Returns 0, or what costing the step
 * returned (LIBRA_EINVAL, LIBRA_EINFEAS). sc grows as needed.
 */
int ehp_batch_step_s(const struct plan_train_layout *l, const struct plan_settings *st,
                     const struct ehp_lend *lend, int active, const struct cost_shape *s,
                     const struct spec_hardware *hw, const struct cost_train_seqs *seqs,
                     struct cost_train_scratch *sc, double *step_s);

#endif
