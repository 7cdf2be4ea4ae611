/*
 * What moving a trajectory to another instance costs, for the router's cache-aware moves.
 *
 * A move loses the trajectory's prefix cache: its next turn re-prefills the whole context on
 * the destination. The router (sched/router.h struct sched_costs) weighs that against the
 * gain of decoding the expected remaining tokens on another TP size, through two callbacks,
 * because sched/ routes on observations and takes its costs from the caller. The simulator and
 * the gateway give it these two, over one struct cost_move_model, so that a move the simulator
 * takes is the move the gateway takes on the same observations (DESIGN.md "observation
 * parity"). The figures are the rollout cost model's (cost/rollout.h) on an idle instance:
 * decode at batch 1 and a chunked prefill from an empty cache. What load adds is the same on
 * either side of a move to first order, and the router compares the two sides only.
 */
#ifndef COST_MOVE_H
#define COST_MOVE_H

#include <stdint.h>

#include "cost/rollout.h"
#include "cost/shape.h"
#include "spec/bucket.h"
#include "spec/preset.h"

/* The rollout model of every TP size a router may move between. Plain data: copy it. */
struct cost_move_model {
    struct cost_rollout_pre pre[SPEC_TP_SIZES]; /* by log2(TP); zeroed (tp 0) where the TP
                                                   size does not divide the model's heads */
    double chunk_tokens; /* prefill chunk of the engines (max batched tokens), tokens */
    double max_seqs;     /* sequences an engine runs at once (vLLM max_num_seqs) */
};

/*
 * Fills m for model shape s on hardware hw under the rollout constants p, with the engines'
 * prefill chunk chunk_tokens (<= 0: one chunk) and max_seqs sequences at most per engine, as
 * the simulator derives its instances (cost_rollout_pre_init at TP 1, 2, 4, 8). A TP size that does
 * not divide the query heads is left zeroed: no instance of it exists to move to or from. Returns
 * 0, or LIBRA_EINVAL when no TP size can be derived. Pure.
 */
int cost_move_model_init(struct cost_move_model *m, const struct cost_shape *s,
                         const struct spec_hardware *hw, const struct cost_rollout_params *p,
                         double chunk_tokens, int max_seqs);

/*
 * The decode_s callback of struct sched_costs, ctx a struct cost_move_model: seconds to
 * generate tokens more at batch 1 on TP tp (1, 2, 4 or 8) after context_tokens of context,
 * each token costed at the mid context of the stretch (context_tokens + tokens / 2).
 */
double cost_move_decode_s(void *ctx, int tp, int64_t context_tokens, double tokens);

/*
 * The move_s callback of struct sched_costs, ctx a struct cost_move_model: seconds to
 * re-prefill context_tokens on an idle instance of TP to_tp in chunks of chunk_tokens (the
 * cache is lost; from_tp does not change it: nothing is migrated).
 */
double cost_move_s(void *ctx, int from_tp, int to_tp, int64_t context_tokens);

/* One trajectory's rates on an instance (sched/cost.h charges decisions with them). */
struct cost_rate {
    double token_s;     /* seconds per generated token */
    double gpu_token_s; /* GPU-seconds per generated token: its share of the instance */
    double move_s;      /* seconds to re-prefill its context after a move to the instance */
    double move_gpu_s;  /* GPU-seconds of that */
};

/*
 * The rate callback of struct sched_cost_model (sched/cost.h), ctx a struct cost_move_model:
 * one trajectory at context_tokens on an instance of TP tp. Its planned batch is as many
 * sequences of that context as the KV cache holds, at most max_seqs (the planner's concurrency
 * limit, plan/roll.h): gpu_token_s is TP times one decode iteration at that batch over the
 * batch, what the trajectory takes from a saturated fleet. token_s is one iteration at batch
 * sequences (<= 0: the planned batch). The move is cost_move_s's re-prefill, on TP GPUs.
 */
void cost_move_rate(void *ctx, int tp, int64_t context_tokens, double batch, struct cost_rate *out);

#endif
