/*
 * Synthetic agentic trajectories: the generative process of docs/workloads.md.
 *
 * A trajectory is a pure function of (seed, prompt, sample, policy version): every random
 * value is drawn from util/rng.h streams named by those keys (one stream per prompt, one per
 * trajectory, one per turn), so a simulator gets the same trajectory for the same keys in
 * every mode it compares (common random numbers) and in any order it asks. Nothing here
 * depends on what was generated before.
 *
 * The process, in short (the doc gives every parameter and its source): each prompt has a
 * latent difficulty z ~ N(0, 1) and a prompt length, shared by its samples and kept across
 * epochs; each trajectory has a verbosity v ~ N(0, 1). Turn by turn the agent generates
 * log-normal tokens, then finishes with a hazard that falls with z and v, or calls a tool
 * (chosen by weight). The tool's outcome is bad with a probability that rises with z and v in
 * proportion to the causal strength k, its status and payload follow from the outcome and its
 * latency from the tool's pool (tooltime.h). Each outcome moves a running deficit D, which
 * slows finishing and lengthens later turns, again in proportion to k. At k = 0 the tool
 * returns are independent of everything that decides the remaining work.
 */
#ifndef WORKLOAD_WORKLOAD_H
#define WORKLOAD_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"
#include "util/arena.h"
#include "workload/preset.h"
#include "workload/tooltime.h"

/* A generator: a preset, a seed and what follows from them. Plain data; reentrant. */
struct workload_gen {
    const struct workload_preset *preset; /* not owned; must outlive the generator */
    uint64_t seed;
    uint64_t prompt_key; /* stream keys derived from the seed, one per purpose */
    uint64_t traj_key;
    uint64_t perm_key;
    unsigned perm_half_bits; /* the permutation acts on 4^perm_half_bits >= prompts ids */
    double tool_cum_weight[WORKLOAD_MAX_TOOLS]; /* cumulative weights, normalised to 1 */
    double tool_bad0[WORKLOAD_MAX_TOOLS];       /* P(bad outcome) at causal strength 0 */
    struct workload_pool_model pools[WORKLOAD_MAX_TOOLS];
};

/* The latent facts of one prompt. */
struct workload_prompt {
    double difficulty;     /* z ~ N(0, 1); higher is harder */
    int64_t prompt_tokens; /* tokens of the initial prompt */
};

/* Prepares g for preset w (validated by the preset parser) and seed. */
void workload_gen_init(struct workload_gen *g, const struct workload_preset *w, uint64_t seed);

/*
 * The prompt drawn index-th (0 <= index < prompts) in the given epoch (>= 0): a keyed
 * permutation of the pool per (seed, epoch), so every prompt is drawn exactly once per epoch,
 * in an order that differs between epochs. O(1) memory, a pure function.
 */
int64_t workload_prompt_for(const struct workload_gen *g, int64_t epoch, int64_t index);

/* The latent facts of prompt_id (0 <= prompt_id < prompts): a function of (seed, prompt_id)
 * only, the same for every sample, version and epoch. */
void workload_prompt(const struct workload_gen *g, int64_t prompt_id, struct workload_prompt *out);

/*
 * Generates the trajectory of (prompt_id, sample, version): turns with their context, cached
 * (-1: left to the engine), generated tokens and tool calls (queue_us from the pool
 * approximation, exec_us the execution time), the finish status and the reward. Sets step to
 * version and epoch to 0 (callers that know better overwrite them); version_start and
 * version_end are version. Turn and call arrays come from arena a; tool names point into the
 * preset. The record is never passed to a free function of trace/.
 */
void workload_gen_traj(const struct workload_gen *g, int64_t prompt_id, int64_t sample,
                       int64_t version, struct trace_traj *out, struct arena *a);

/*
 * The trajectory of sample (0 <= sample < the group size) of the group launched index-th
 * (>= 0) in a run, generated at policy version: the prompt drawn index % prompts-th in epoch
 * index / prompts (workload_prompt_for), and workload_gen_traj's record with epoch set. Every
 * party that launches groups in order (the simulator, `libra trace gen`, `libra load`) draws
 * them through this call, so they see the same workload.
 */
void workload_group_traj(const struct workload_gen *g, int64_t index, int64_t sample,
                         int64_t version, struct trace_traj *out, struct arena *a);

/*
 * Dynamic sampling (DAPO): whether sampling ds is on (the experiment's rl.dynamic_sampling, or a
 * preset's own) and the n trajectories of one group (n >= 1) all have the same reward, so that
 * the group is not trained. Reads only.
 */
bool workload_group_filtered(enum spec_dynamic_sampling ds, const struct trace_traj *group,
                             size_t n);

/*
 * workload_group_filtered, and when it holds marks the completed trajectories filtered
 * (truncated ones keep their status; they are dropped with the group). Returns true when the
 * group was filtered.
 */
bool workload_filter_group(enum spec_dynamic_sampling ds, struct trace_traj *group, size_t n);

/*
 * Whether dynamic sampling ds filters every whole group of the trace trajectories t[0..n)
 * (consecutive runs of samples, as a run takes them), so that no batch could ever fill; then
 * writes into why (size bytes) the sentence that says so. A replayed trace with no group kept
 * would have the runs replace dropped groups forever.
 */
bool workload_trace_never_fills(enum spec_dynamic_sampling ds, const struct trace_traj *t, size_t n,
                                size_t samples, char *why, size_t size);

/* Per-trajectory lengths and tool time: what the planner needs from a workload. */
struct workload_length {
    struct trace_lengths len; /* trace_traj_lengths of the trajectory */
    bool filtered;            /* its group is dropped by dynamic sampling (workload_filter_group) */
    double tool_exec_s[WORKLOAD_MAX_TOOLS]; /* by tool of the preset: workload_tool_exec */
};

/* The index of w's tool named name, compared as the simulator names its tool pools (the first
 * WORKLOAD_TOOL_NAME_MAX - 1 bytes), or -1 when w has no such tool. */
int workload_tool_index(const struct workload_preset *w, const char *name);

/* Adds to exec_s[i] the execution seconds of t's calls to w's tool i: the calls between its
 * turns, those a run makes (a call after the last turn ends the trajectory). Calls to a tool w
 * does not name, and unknown execution times, add nothing. */
void workload_tool_exec(const struct workload_preset *w, const struct trace_traj *t,
                        double exec_s[WORKLOAD_MAX_TOOLS]);

/*
 * The load of the busiest of w's bounded pools (workers > 0) under n trajectories whose calls
 * to tool i execute for exec_s[i] seconds in all: its execution seconds over its workers, per
 * trajectory — the least pool time a trajectory costs when the pool is saturated. 0 when w
 * has no bounded pool or n is 0.
 */
double workload_pool_load_s(const struct workload_preset *w,
                            const double exec_s[WORKLOAD_MAX_TOOLS], size_t n);

/*
 * Lengths of n trajectories (whole batches) of a job of steps steps on preset w with seed, batch
 * trajectories per step in groups of samples: the sample's batches are the run's batches at
 * evenly spaced steps (batch j of nb at step floor(j·steps/nb); consecutive from 0 when the
 * run has fewer steps than the sample batches), so that the sample spans a drifting workload
 * as the run does; each holds the groups a run launches first for that step (prompts in the order
 * workload_prompt_for gives, policy version = step; `libra trace gen` writes the same), each group
 * judged by workload_filter_group under ds, with its tools' execution seconds
 * (workload_tool_exec). A pure function of its arguments; out has n elements.
 */
void workload_lengths(const struct workload_preset *w, enum spec_dynamic_sampling ds, uint64_t seed,
                      size_t batch, size_t samples, size_t steps, size_t n,
                      struct workload_length *out);

#endif
