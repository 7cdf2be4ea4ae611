/*
 * Engine lifecycle costs: what it takes to start, wake, refill or reshape an inference
 * instance, to move a trajectory's KV between instances, and to move a training replica's
 * state and gradients between nodes.
 *
 * The planner prices a reconfiguration with these (stop/start of changed instances, lost KV,
 * weight-group rebuild) instead of a constant, the simulator charges them at every weight
 * sync and role change, and the elastic pool (ehp/) prices a replica's join (trainer start,
 * state fetch, group rebuild) and its per-step gradient exchange with them (libra-spec.md §3,
 * §5). Every constant here is an assumption anchored on the published ranges of calibration.md
 * §3.7; docs/calibration.md compares the resulting figures with those points.
 */
#ifndef COST_LIFECYCLE_H
#define COST_LIFECYCLE_H

#include <stdbool.h>

#include "cost/rollout.h"
#include "cost/shape.h"
#include "cost/train.h"
#include "spec/config.h"
#include "spec/preset.h"

struct cost_lifecycle_params {
    double engine_init_s;       /* engine start without weight loading: process, memory profile,
                                 * CUDA-graph capture (assumed) */
    double disk_bw_bytes_per_s; /* reading a checkpoint from local disk, per instance (assumed) */
    double h2d_bw_bytes_per_s;  /* pinned host→GPU copy, per GPU (assumed) */
    double wake_fixed_s;        /* re-allocating KV and resuming the scheduler (assumed) */
    double bucket_bytes;        /* weight-update bucket of a bucketed NCCL broadcast */
    double bucket_overhead_s;   /* per bucket: pack on the trainer, load into the engine
                                 * (assumed) */
    double switch_fixed_s;      /* in-place train↔rollout switch besides moving weights:
                                 * offload/onload of optimizer state, freeing memory (assumed) */
    double weight_dtype_bytes;  /* bytes per weight element moved (2: bf16) */
    double group_fixed_s;       /* weight-update group rebuild besides its ranks: destroying
                                 * the old communicator, the store rendezvous (assumed) */
    double group_per_rank_s;    /* per rank of the new group: NCCL's bootstrap all-gather and
                                 * topology setup grow with the ranks (assumed) */
    double trainer_init_s;      /* a training replica's GPUs change sides: the inference engine
                                 * stops and trainer processes start (CUDA context, model built
                                 * without weights, communicators) (assumed) */
    double fetch_fixed_s;       /* a state fetch besides its bytes: checkpoint metadata, the
                                 * members' agreement on the version (assumed) */
};

/* Fills lp with the defaults documented in docs/calibration.md (all assumed). */
void cost_lifecycle_params_default(struct cost_lifecycle_params *lp);

/* Seconds for a cold engine start that loads the weights from disk (a full restart; the
 * reference's disk_restart weight sync). */
double cost_cold_start_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s);

/* Seconds to wake a sleeping engine whose weights wait in host memory (vLLM sleep level 1):
 * each GPU copies its 1/tp share. */
double cost_wake_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s, int tp);

/* Seconds to reload new weights from disk into a running or level-2-sleeping engine without a
 * restart (disk_reload). */
double cost_disk_reload_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s);

/* Seconds to rebuild the NCCL weight-update group for world_size ranks (trainer rank 0 plus
 * every rollout GPU, 1 + Σ TP): needed whenever the rollout fleet changes (libra-spec.md §5). */
double cost_group_rebuild_s(const struct cost_lifecycle_params *lp, int world_size);

/*
 * Seconds of a bucketed NCCL broadcast of the full weights from the trainer to rollout
 * engines: pipelined, so the time is the bytes over the slowest link plus a per-bucket cost.
 * cross_node selects the per-GPU inter-node bandwidth, else the intra-node bus bandwidth.
 */
double cost_broadcast_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s,
                        const struct spec_hardware *hw, bool cross_node);

/* One weight update of a disaggregated job, by rl.transport (sim/sync.c runs it in this order). */
struct cost_weight_update {
    double save_s;          /* the trainer writes a checkpoint (disk transports), busy */
    double transfer_s;      /* the weights reach the fleet: broadcast, reload or restart */
    bool trainer_transfers; /* the trainer takes part in the transfer (NCCL broadcast) */
};

/* The update by transport tr (NCCL, disk reload, disk restart; reshard is colocated-only and
 * costs nothing here); cross_node as cost_broadcast_s. */
void cost_weight_update(const struct cost_lifecycle_params *lp, const struct cost_shape *s,
                        const struct spec_hardware *hw, enum spec_transport tr, bool cross_node,
                        struct cost_weight_update *out);

/* Bytes of a training replica's whole state under train params tp: the compute copy of the
 * weights, fp32 master weights and Adam's m and v (2 + 12 = 14 bytes per parameter by default:
 * ~207 GB for 14.8 B parameters, libra-spec.md §5). What an elastic replica fetches to join. */
double cost_state_bytes(const struct cost_train_params *tp, const struct cost_shape *s);

/* Bytes of one full gradient (fp32 by default: ~59 GB for 14.8 B parameters): what an elastic
 * replica sends to its core lane each step, and what it receives back reduced. */
double cost_grad_bytes(const struct cost_train_params *tp, const struct cost_shape *s);

/*
 * Seconds for a replica whose state is split into `shards` shards (TP·PP, or an HSDP shard
 * group; ranks that hold a copy of a shard fetch it in parallel) to fetch state_bytes
 * (cost_state_bytes) from a sharded checkpoint on other nodes: each GPU reads its 1/shards
 * share over its inter-node link, plus the fixed part (lp->fetch_fixed_s).
 */
double cost_state_fetch_s(const struct cost_lifecycle_params *lp, const struct spec_hardware *hw,
                          double state_bytes, int shards);

/*
 * Seconds of one gradient exchange between an elastic replica of `shards` shards (as
 * cost_state_fetch_s) and its core lane on another node: each GPU sends its 1/shards share of
 * grad_bytes (cost_grad_bytes) and receives the reduced share back, one after the other (the
 * core averages in between), over its inter-node link, each way paying the small-message
 * latency.
 */
double cost_grad_exchange_s(const struct spec_hardware *hw, double grad_bytes, int shards);

/*
 * Seconds to turn training weights sharded over train_shard_gpus GPUs (the model over what one
 * GPU holds of it) into a rollout layout of TP rollout_tp on the same GPUs (verl's hybrid
 * engine): every GPU gathers the share of its
 * rollout shard it does not hold, over NVLink or, when the training shards span nodes
 * (cross_node), the inter-node network, plus the switch's fixed cost. The way back (rollout →
 * training) costs only the fixed part: training shards never left the GPUs or host memory.
 */
double cost_reshard_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s,
                      const struct spec_hardware *hw, double train_shard_gpus, int rollout_tp,
                      bool cross_node);

/* Moving a sequence's KV to another instance versus recomputing it there. */
struct cost_kv_move {
    double migrate_s;   /* copy the KV shards, each GPU in parallel */
    double recompute_s; /* prefill the context again on the destination */
    bool migrate;       /* migration is the cheaper */
};

/*
 * Costs moving ctx_tokens of context from instance src to instance dst (recompute in chunks of
 * chunk_tokens on dst). cross_node selects the inter-node bandwidth for the copy.
 */
void cost_kv_move(const struct cost_rollout_pre *src, const struct cost_rollout_pre *dst,
                  const struct spec_hardware *hw, double ctx_tokens, double chunk_tokens,
                  bool cross_node, struct cost_kv_move *out);

#endif
