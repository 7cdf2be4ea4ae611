/*
 * Trajectory records: how one agentic rollout is written down.
 *
 * Everything downstream (planner, router evaluation, simulator) consumes these records,
 * whether they come from a user's trace file (docs/trace-format.md) or from a synthetic
 * generator (workload/). A trajectory is a prompt followed by turns; each turn sends a prompt
 * (the full context, of which cached_tokens may hit the prefix cache), generates tokens, and
 * — unless it is the last — makes one or more tool calls whose returns are appended to the
 * context of the next turn. Token counts are integers; times are integer microseconds.
 */
#ifndef TRACE_TRACE_H
#define TRACE_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum trace_tool_status {
    TRACE_TOOL_SUCCESS,
    TRACE_TOOL_FAILURE,
    TRACE_TOOL_TIMEOUT,
    TRACE_TOOL_OTHER,
};

enum trace_finish {
    TRACE_FINISH_COMPLETED, /* the agent answered */
    TRACE_FINISH_TRUNCATED, /* hit a turn, token or context cap */
    TRACE_FINISH_ABORTED,   /* stopped by the system (timeout, staleness, failure) */
    TRACE_FINISH_FILTERED,  /* completed but dropped by dynamic sampling */
};

/* One tool call made at the end of a turn and its return. */
struct trace_tool_call {
    char *tool; /* tool name, e.g. "search", "bash", "validator" */
    enum trace_tool_status status;
    int64_t payload_tokens; /* tokens of the return appended to the context */
    int64_t queue_us;       /* waiting for a tool worker, microseconds */
    int64_t exec_us;        /* execution, microseconds */
};

/* One LLM call of a trajectory. */
struct trace_turn {
    int64_t prompt_tokens;         /* tokens sent (the whole context) */
    int64_t cached_tokens;         /* of which served from the prefix cache; -1 when unknown */
    int64_t generated_tokens;      /* tokens generated in this turn */
    struct trace_tool_call *calls; /* tool calls after this turn; none after the last turn */
    size_t n_calls;
};

/* One trajectory (one GRPO sample of one prompt). */
struct trace_traj {
    int64_t step;          /* training step that consumed (or generated) it */
    int64_t prompt_id;     /* index into the workload's prompt pool */
    int64_t epoch;         /* pass over the prompt pool */
    int64_t sample;        /* index within the GRPO group */
    int64_t version_start; /* policy version when the first turn started */
    int64_t version_end;   /* policy version when the last token was generated; -1 unknown */
    struct trace_turn *turns;
    size_t n_turns;
    enum trace_finish finish;
    bool has_reward;
    double reward;
    json_t *extra; /* arbitrary user data kept verbatim on round trip; may be NULL */
};

#endif
