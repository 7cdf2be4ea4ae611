/*
 * Summary statistics of a trace (`libra trace stats`), computed in memory from records.
 *
 * What a planner or a router cares about in a workload is its shape: how many turns, how
 * long the generations and how heavy their tail, what the tools return and how long they
 * take, how often prompts recur (per-prompt prefix trees only help when they do) and whether
 * lengths drift as the policy trains — and whether routing by tool returns can pay at all:
 * how much a return says about the remaining work beyond its depth, and how much of the
 * length is the task's rather than the attempt's. The accumulator keeps one small row per
 * trajectory, per tool call and per tool return (not the records), so a trace of millions of
 * trajectories fits; quantiles are exact.
 */
#ifndef TRACE_STATS_H
#define TRACE_STATS_H

#include <jansson.h>

#include "trace/trace.h"

struct trace_stats;

/* Depths with fewer tool returns than this are left out of the within-depth correlations
 * (a rank correlation over a handful of points is noise). */
#define TRACE_STATS_MIN_DEPTH_RETURNS 10

/* Creates an empty accumulator. Never returns NULL. */
struct trace_stats *trace_stats_new(void);

/* Adds one trajectory (copied as summary rows; t may be freed afterwards). */
void trace_stats_add(struct trace_stats *s, const struct trace_traj *t);

/*
 * The statistics as a new JSON object (caller owns it), documented in docs/trace-format.md
 * ("Statistics"):
 *   {"overall": BLOCK, "steps": [{"step": N, ...BLOCK}...], "prompts": {...}, "drift": {...},
 *    "return_signal": {...}, "task_effect": {...}}
 * where BLOCK holds per-trajectory distributions (turns, tool_calls, generated_tokens,
 * prompt_tokens, tool_tokens), per-call latency distributions (queue_us, exec_us, over calls
 * where known), the setup's per trajectory (setup_us, over those that record one), the finish
 * and tool-status mix, and the share of generated tokens held by the
 * longest 5 % and 10 % of trajectories. A distribution is {"n", "mean", "p50", "p90", "p99",
 * "max"} (quantiles interpolated linearly between order statistics), or {"n": 0}.
 * return_signal: Spearman's rho (average ranks for ties) of each tool return's bad status
 * (failure or timeout) and payload tokens against the generated tokens still to come, within
 * each turn depth of at least TRACE_STATS_MIN_DEPTH_RETURNS returns and pooled weighted by
 * returns, and of depth itself over all returns; returns of truncated and aborted
 * trajectories (lower bounds) are excluded and counted. task_effect: ICC(1) of
 * log(1 + generated tokens) by prompt_id over prompts with at least two trajectories.
 */
json_t *trace_stats_json(const struct trace_stats *s);

/* Frees s; NULL is a no-op. */
void trace_stats_free(struct trace_stats *s);

#endif
