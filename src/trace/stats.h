/*
 * Summary statistics of a trace (`libra trace stats`), computed in memory from records.
 *
 * What a planner or a router cares about in a workload is its shape: how many turns, how
 * long the generations and how heavy their tail, what the tools return and how long they
 * take, how often prompts recur (per-prompt prefix trees only help when they do) and whether
 * lengths drift as the policy trains. The accumulator keeps one small row per trajectory and
 * per tool call (not the records), so a trace of millions of trajectories fits; quantiles are
 * exact.
 */
#ifndef TRACE_STATS_H
#define TRACE_STATS_H

#include <jansson.h>

#include "trace/trace.h"

struct trace_stats;

/* Creates an empty accumulator. Never returns NULL. */
struct trace_stats *trace_stats_new(void);

/* Adds one trajectory (copied as summary rows; t may be freed afterwards). */
void trace_stats_add(struct trace_stats *s, const struct trace_traj *t);

/*
 * The statistics as a new JSON object (caller owns it), documented in docs/trace-format.md
 * ("Statistics"):
 *   {"overall": BLOCK, "steps": [{"step": N, ...BLOCK}...], "prompts": {...}, "drift": {...}}
 * where BLOCK holds per-trajectory distributions (turns, tool_calls, generated_tokens,
 * prompt_tokens, tool_tokens), per-call latency distributions (queue_us, exec_us, over calls
 * where known), the finish and tool-status mix, and the share of generated tokens held by the
 * longest 5 % and 10 % of trajectories. A distribution is {"n", "mean", "p50", "p90", "p99",
 * "max"} (quantiles interpolated linearly between order statistics), or {"n": 0}.
 */
json_t *trace_stats_json(const struct trace_stats *s);

/* Frees s; NULL is a no-op. */
void trace_stats_free(struct trace_stats *s);

#endif
