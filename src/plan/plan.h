/*
 * The Global Resource Planner (libra-spec.md §2): how to split a GPU cluster between training
 * and rollout, which training layout to run, and which heterogeneous multiset of rollout
 * instances (TP 1, 2, 4, 8, each inside one node) to start, with the bucket layout C-MLFQ
 * routes over and a GPU-by-GPU placement.
 *
 * The search is exact: every candidate (training layout × rollout multiset) is either scored
 * or excluded by a bound that is proven admissible in docs/planner.md, so the returned plan is
 * optimal for the planner's model unless the caller's budget stopped the search, in which case
 * the result carries a proven optimality gap. Ties are broken by fewer training GPUs, then
 * smaller TP, smaller PP, smaller CP, smaller micro-batch budget, then fewer rollout instances
 * (docs/planner.md gives the whole order).
 *
 * The model (docs/planner.md): a length sample of trajectories in batch order; training time
 * from cost/train.h on each batch of the sample; rollout from cost/rollout.h with every
 * instance at its concurrency limit, lengths sorted and dealt in contiguous bands to TP sizes
 * in ascending order so that each band's work matches its instances' capacity. Modes:
 * colocated (T_step = T_rollout + T_train + T_switch on all GPUs) and async
 * (T_step = max(T_train, B / R_eff), R_eff the accepted-trajectory rate after staleness).
 *
 * Pure: no clocks or I/O. A search budget is a callback the caller implements (the CLI reads a
 * clock in it). Reentrant; one solve uses only its own memory.
 */
#ifndef PLAN_PLAN_H
#define PLAN_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cost/lifecycle.h"
#include "cost/rollout.h"
#include "cost/train.h"
#include "libra/libra.h"
#include "spec/bucket.h"
#include "spec/config.h"
#include "spec/preset.h"

#define PLAN_NTP SPEC_TP_SIZES /* rollout TP sizes 1, 2, 4, 8; arrays are indexed by log2(TP) */
#define PLAN_BUDGETS 3         /* micro-batch token budgets searched: 8192, 16384, 32768 */

/*
 * The length sample: one entry per trajectory, in batch order (consecutive runs of
 * rl.batch_trajectories trajectories form the training steps the trainer is costed on). The
 * arrays are borrowed for the duration of the call.
 */
struct plan_sample {
    size_t n;
    const int64_t *prompt_tokens;    /* initial prompt, > 0 */
    const int64_t *generated_tokens; /* all turns, > 0 */
    const int64_t *tool_tokens;      /* all tool returns, >= 0; NULL means none */
    const int64_t *turns;            /* >= 1; NULL means one turn each */
};

/* Engine and trainer settings the experiment config does not carry, with the cost model's
 * constants. */
struct plan_settings {
    struct cost_rollout_params rollout;
    struct cost_train_params train;
    struct cost_lifecycle_params lifecycle;
    int max_seqs;        /* concurrent sequences per rollout instance (vLLM max_num_seqs) */
    double chunk_tokens; /* prefill chunk, tokens (max_num_batched_tokens) */
    int minibatches;     /* optimizer steps per training step */
    bool old_logprob;    /* the trainer recomputes old log-probs (+2N per token) */
    bool reference;      /* reference-model forward for a KL term (+2N) */
};

/* Fills s with the defaults for hardware hw (docs/planner.md lists them). Costs the cost
 * model's fits (milliseconds): call once per hardware. */
void plan_settings_default(struct plan_settings *s, const struct spec_hardware *hw);

/* The defaults with the engine limits and trainer passes the config sets for the simulator
 * too (sim.max_seqs, sim.max_batched_tokens, rl.minibatches, rl.old_logprob, rl.reference),
 * so that the planner and the simulator model the same job. */
void plan_settings_from_config(struct plan_settings *s, const struct spec_hardware *hw,
                               const struct libra_config *cfg);

struct plan_train_layout;

/*
 * A restriction of the space to what a running job can change (online replanning,
 * plan/replan.h): the split and the training layout as they run — a change of the training
 * topology needs a restart — and, to predict the running fleet on a new sample, its rollout
 * multiset too.
 */
struct plan_pin {
    int n_train;                           /* GPUs training; the rest roll out */
    const struct plan_train_layout *train; /* the training layout (n_train GPUs) */
    const int *counts;                     /* PLAN_NTP rollout instances by log2(TP), scored as
                                            * given; NULL: searched */
};

/* What one solve needs. Everything is borrowed. */
struct plan_problem {
    const struct libra_config *cfg; /* cluster, rl, plan and ehp sections */
    const struct spec_hardware *hw; /* cfg's hardware preset */
    const struct spec_model *model; /* cfg's model preset */
    const struct plan_settings *settings;
    struct plan_sample sample;
    /* Per trajectory of sample: seconds it waits on tools (queue + execution, summed over its
     * calls), >= 0; NULL means none. A trajectory holds its concurrency slot while it waits
     * (docs/planner.md §2.2). Beside the sample rather than in it so that positional
     * initialisers of struct plan_sample stay valid. */
    const double *tool_s;
    /* Per trajectory of sample: dropped by dynamic sampling (its group's rewards are all
     * equal), so generated but never trained; NULL means none. At least one is not. */
    const bool *filtered;
    /* The busiest bounded tool pool (a fixed set of workers the whole fleet's calls queue
     * for): its execution seconds over its workers per trajectory rolled out, >= 0; 0 when
     * none is known. However fast the fleet, a step waits at least this per trajectory
     * (docs/planner.md §2.4). */
    double pool_s;
    /* Search budget: polled between candidates; returning true stops the search, which then
     * reports the best plan so far and its proven gap. NULL: no budget. */
    bool (*should_stop)(void *arg);
    void *stop_arg;
    /* NULL: the whole space; else only the pinned split and layout (plan.min_train_gpus,
     * min_rollout_gpus and granularity_gpus are not applied: the pin is a running plan's). */
    const struct plan_pin *pin;
};

/* One training layout: GPUs = tp·pp·cp·dp. */
struct plan_train_layout {
    int tp, pp, cp, dp;
    int budget_tokens; /* micro-batch token budget per GPU; a replica's micro-batch holds
                        * budget_tokens·cp tokens */
    bool recompute;    /* full activation recompute in backward: +2N per token, activations
                        * kept only at layer boundaries */
    bool fsdp;         /* FSDP (ZeRO-3): weights, gradients and optimizer state sharded over
                        * DP, parameters gathered each pass; else Megatron's distributed
                        * optimizer (optimizer state sharded) */
    int shard_dp;      /* FSDP only: DP ranks the state is sharded over, a node's worth (HSDP:
                        * gathers on NVLink, a copy of the state per node); 0: all of DP */
    int ep;            /* MoE with the distributed optimizer only: expert parallel size, the
                        * GPUs of a stage each layer's routed experts are split over, expert TP 1
                        * (cost_train_config.ep); 0 or 1: none */
};

/* How l shards the training state: "distributed_optimizer", "fsdp" or "hsdp". */
const char *plan_train_sharding(const struct plan_train_layout *l);

/* A GPU's role in the placement. */
enum plan_role { PLAN_ROLE_TRAIN, PLAN_ROLE_ROLLOUT, PLAN_ROLE_IDLE };

struct plan_gpu {
    int node, local;     /* node index and GPU index inside it */
    enum plan_role role; /* colocated plans list both roles: see plan_result.colocated */
    int tp_rank, cp_rank, dp_rank, pp_rank; /* training ranks (Megatron order tp, cp, dp, pp) */
    int instance;                           /* rollout instance id, -1 when none */
    int instance_tp;                        /* its TP size */
};

/* Search statistics. Every candidate of the space is either scored or pruned. */
struct plan_stats {
    double space;          /* (training layout, rollout multiset) pairs over all splits */
    double train_space;    /* training layouts over all splits */
    double rollout_space;  /* rollout multisets over all splits */
    double train_scored;   /* training layouts whose step time was computed */
    double rollout_scored; /* rollout multisets whose rollout time was computed */
    double train_pruned;   /* train_space − train_scored: excluded by a bound or constraint */
    double rollout_pruned; /* rollout_space − rollout_scored */
    double splits;         /* training/rollout GPU splits in the space */
    double gap;            /* proven relative optimality gap, 0 when the search completed */
    bool stopped;          /* the budget stopped the search */
    bool stopped_by_count; /* ... the count of plan.max_scored, not the caller's */
};

/* Constraints that can make a problem infeasible; plan_why_text names them. Each side's
 * checks run in this order, and a side reports the furthest one its candidates reached (the
 * constraint that rejected the candidates that passed every earlier one). */
enum plan_why {
    PLAN_WHY_NONE,
    PLAN_WHY_SPLIT,       /* plan.min_train_gpus / min_rollout_gpus / granularity_gpus */
    PLAN_WHY_TP,          /* no training TP divides the heads and fits a node */
    PLAN_WHY_EHP,         /* ehp.enabled: a replica must fit a node and hold whole EP groups */
    PLAN_WHY_DP,          /* DP exceeds the batch */
    PLAN_WHY_GROUPS,      /* plan.group_integrity */
    PLAN_WHY_BUDGET,      /* the longest sequence exceeds every micro-batch budget */
    PLAN_WHY_MEMORY,      /* training memory */
    PLAN_WHY_TP_SIZES,    /* plan.min_tp_sizes */
    PLAN_WHY_HOMOGENEOUS, /* plan.homogeneous_rollout */
    PLAN_WHY_BUCKETS,     /* sched.buckets: the fleet uses only the TP sizes they serve */
    PLAN_WHY_KV,          /* the longest request fits no rollout instance */
    PLAN_WHY_PATTERN,     /* plan.tp_pattern */
    PLAN_WHY_PACKING,     /* rollout instances cannot be packed into the rollout nodes */
    PLAN_WHY_BUDGET_STOP, /* the search budget ran out before any plan was found */
};

/* A sentence naming the constraint, e.g. "training memory: no layout fits 80 GB". */
const char *plan_why_text(enum plan_why why);

/* Where the rollout sample goes: band b of the sorted sample runs on TP 2^tp_log2. */
struct plan_band {
    int tp;                /* TP size */
    int instances;         /* instances of that TP */
    size_t first, last;    /* ranks of the sorted sample, [first, last) */
    int64_t max_generated; /* longest generation in the band, tokens */
    double work_s;         /* instance-seconds of the band over the whole sample */
    double load_s;         /* work_s / instances */
};

/* An async step's parts (docs/planner.md §2.4), seconds per step unless named: the step is
 * the largest of the train side (T_train + update_train_s), fixed_point_s, fleet_s, span_s
 * and pool_s. */
struct plan_async_parts {
    double update_train_s; /* the trainer's share of the weight updates */
    double fixed_point_s;  /* the staleness fixed point, B·Z/A(T) */
    double work_s;         /* B·Z/M: the fleet's work at the concurrency limit */
    double little_s;       /* mean latency in the window over the window (Little's law) */
    double pool_s;         /* the busiest bounded tool pool's work (plan_problem.pool_s) */
    double tail_s;         /* one admission's expected slowest trajectory (not per step) */
    double update_s;       /* per update: the fleet stopped (save, transfer, drain, re-prefill) */
    double drain_s;        /* per update: the longest live turn when updates drain */
    double reprefill_s;    /* per update: carried-over contexts prefilled again */
    double fleet_s;        /* the fleet: max(work_s, little_s) + update_s / interval */
    double span_s;         /* the span: (one admission's queue + the trainer's chain through
                            * it, the slowest trajectory last + update_s) / window */
    int interval, window;  /* steps between updates; rl.max_staleness + 1 */
};

struct plan_result {
    bool feasible;
    enum plan_why why; /* when infeasible: the constraint that rejected the last candidates */
    enum spec_plan_mode mode;
    bool colocated; /* every GPU trains and rolls out in turn */
    int gpus, gpus_per_node;
    int n_train, n_rollout; /* GPUs of each side (both = gpus when colocated) */

    double step_s;          /* the objective T_step */
    double train_s;         /* T_train: mean over the sample's batches */
    double rollout_s;       /* async: the rollout side, the largest of the terms below;
                             * colocated: mean batch makespan */
    double switch_s;        /* colocated: training → rollout → training switch; 0 in async */
    double rate_traj_per_s; /* async: fleet rate at the concurrency limit (M / Z) */
    double f_stale;         /* async: share of the sample predicted stale at step_s */
    double banded_batch_s;  /* makespan of one batch under the banded assignment */
    double greedy_batch_s;  /* the reference's greedy longest-first estimate of the same */
    bool train_bound;       /* async: the train side >= the rollout side */
    struct plan_async_parts async; /* async: what the step is made of */

    struct plan_train_layout train;
    struct cost_train_step train_step;  /* mean over batches of the chosen layout */
    struct cost_train_memory train_mem; /* per GPU */

    int counts[PLAN_NTP]; /* rollout instances by log2(TP) */
    int instances;
    double rollout_mem_util; /* fraction of HBM each rollout engine holds in the KV model (the
                              * engines' --mem-fraction-static / --gpu-memory-utilization) */
    int n_bands;
    struct plan_band band[PLAN_NTP];
    struct spec_bucket_layout layout;

    struct plan_gpu *gpu; /* gpus entries, owned; free with plan_result_free */
    struct plan_stats stats;
    size_t sample_n;
    int batches;        /* whole batches in the sample */
    double tool_s_mean; /* the sample's tool time per trajectory, seconds (0 without tool_s) */
    double kept_share;  /* the sample's trajectories that train (dynamic sampling drops the rest) */
    double gen_rounds;  /* a synchronous step's expected generation rounds (plan/sampling.h) */
};

/*
 * Plans problem p into *out. Returns 0 with out->feasible telling whether a plan exists (when
 * not, out->why names the constraint that rejected the last candidates); LIBRA_EINVAL with err
 * set when the input is malformed (a sample smaller than one batch, a non-positive length, a
 * bad plan.tp_pattern, a model the cost model rejects). out is zeroed first and owns memory
 * afterwards in every case: free it with plan_result_free.
 */
int plan_solve(const struct plan_problem *p, struct plan_result *out, struct libra_error *err);

/*
 * Plans pinned problem p (p->pin set) into *out, and scores the pinned split and layout with
 * the rollout multiset counts into *given, from one length model: a running fleet beside the
 * plan a replan proposes, at the cost of about one solve. Returns and owns as plan_solve (free
 * both).
 */
int plan_solve_against(const struct plan_problem *p, const int counts[PLAN_NTP],
                       struct plan_result *out, struct plan_result *given, struct libra_error *err);

/* Releases what r owns; a zeroed r is fine. */
void plan_result_free(struct plan_result *r);

/* The plan as a JSON object (no envelope: the caller adds schema, version, seed, digest). */
json_t *plan_result_to_json(const struct plan_result *r);

#define PLAN_SCHEMA "libra.plan/1" /* the schema of `libra plan --json`'s document */

/*
 * `libra plan --json`'s document for plan r under cfg: cfg's envelope (schema PLAN_SCHEMA), r's
 * JSON form with sample.source set to source (where the lengths came from), the search
 * statistics of searched (the solve whose search found r: r itself, or the analytic optimum
 * when a verification chose another candidate) and, when het is the free fleet's feasible
 * optimum under plan.homogeneous_rollout (NULL or infeasible: none), what it would gain. The
 * caller adds "verification" (and anything of its own). Returns a new reference.
 */
json_t *plan_document(const struct libra_config *cfg, const struct plan_result *r,
                      const struct plan_result *searched, const struct plan_result *het,
                      const char *source);

/* Which side bounds a feasible async plan's step: "training", "span", "fleet" or
 * "fixed point" (the first that attains it in that order). */
const char *plan_async_bound(const struct plan_result *r);

#endif
