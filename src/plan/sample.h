/*
 * The planner's length sample as the commands and the gateway build it: how many trajectories
 * it holds, an owned buffer of per-trajectory lengths to append to, and one solve on it under
 * an experiment config.
 *
 * `libra plan` and the simulator's libra mode fill the buffer from the workload generator or
 * a trace (sim/layout.c), `libra serve` from the trajectories it saw finish (server/planning.c);
 * all of them then solve through plan_solve_lengths, so the same lengths under the same config
 * give the same plan whichever drew them. Pure: no clocks or I/O (a search budget is the
 * caller's callback, as in plan.h). Reentrant.
 */
#ifndef PLAN_SAMPLE_H
#define PLAN_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"
#include "util/vec.h"

/*
 * Trajectories in the planner's length sample of a job of batch trajectories per step: the
 * fewest whole batches holding PLAN_SAMPLE_MIN (the spec's profile at start-up, 64 prompts of
 * 4), at most PLAN_SAMPLE_BATCHES_MAX batches. `libra plan`, the simulator's libra mode and the
 * gateway's window of finished trajectories (docs/serve.md) have this size.
 */
#define PLAN_SAMPLE_MIN 256
#define PLAN_SAMPLE_BATCHES_MAX 8
size_t plan_sample_size(size_t batch);

/* Per-trajectory lengths in batch order (struct plan_sample's arrays, owned). A zeroed buffer
 * is empty; free it with plan_lengths_free. */
struct plan_lengths {
    VEC(int64_t) prompt, generated, tool, turns;
    VEC(double) tool_s;
    VEC(bool) filtered;
    double pool_s; /* plan_problem.pool_s of these trajectories (0: none known) */
};

/* Appends one trajectory: prompt and generated tokens below 1 are counted as 1 (a record cut
 * before its first token still held a slot), tool_tokens as given (>= 0), turns (>= 1),
 * tool_s seconds waited on tools (>= 0), filtered: dropped by dynamic sampling. */
void plan_lengths_add(struct plan_lengths *l, int64_t prompt_tokens, int64_t generated_tokens,
                      int64_t tool_tokens, int64_t turns, double tool_s, bool filtered);

/* The sample view of l (borrowed: valid until l changes). */
struct plan_sample plan_lengths_view(const struct plan_lengths *l);

void plan_lengths_free(struct plan_lengths *l);

/*
 * Plans l under cfg (its cluster, rl, plan, ehp and sched.buckets; engine limits and trainer
 * passes through plan_settings_from_config) for hardware hw and model (cfg's presets), in
 * cfg's plan.mode. should_stop and stop_arg as plan_problem's (may be NULL). Returns what
 * plan_solve returns, with *out as it leaves it (free it with plan_result_free).
 */
int plan_solve_lengths(const struct plan_lengths *l, const struct libra_config *cfg,
                       const struct spec_hardware *hw, const struct spec_model *model,
                       bool (*should_stop)(void *), void *stop_arg, struct plan_result *out,
                       struct libra_error *err);

#endif
