/*
 * Trajectory records: how one agentic rollout is written down.
 *
 * Everything downstream (planner, router evaluation, simulator) consumes these records,
 * whether they come from a user's trace file (docs/trace-format.md) or from a synthetic
 * generator (workload/). A trajectory is a prompt followed by turns; each turn sends a prompt
 * (the full context, of which cached_tokens may hit the prefix cache), generates tokens, and
 * — unless it is the last — makes one or more tool calls whose returns are appended to the
 * context of the next turn. Token counts are integers; times are integer microseconds.
 *
 * This header also holds the pure codec of the trace format: parsing one line from a buffer
 * into a record and formatting one record into a buffer. It does no file I/O; trace/file.h
 * streams whole files through it.
 */
#ifndef TRACE_TRACE_H
#define TRACE_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"

/* The schema version this code reads and writes (the header's "libra_trace"). */
#define TRACE_SCHEMA_VERSION 1

/* Longest line the parser accepts, bytes (a bound on per-record memory). */
#define TRACE_MAX_LINE_BYTES ((size_t)64 << 20)

/* Most tokens of each kind (prompt, generated, tool payload) a trajectory may hold, summed over
 * its turns, and most microseconds off the GPU (the setup, and every call's queue and
 * execution): far above any real run, they keep every total libra takes of a trajectory exact in 64
 * bits. */
#define TRACE_MAX_TOKENS ((int64_t)1 << 40)
#define TRACE_MAX_TOOL_US ((int64_t)1 << 50)

/* Largest TP size a turn's timing may name: far above any engine. */
#define TRACE_MAX_TP 1024

enum trace_tool_status {
    TRACE_TOOL_SUCCESS,
    TRACE_TOOL_FAILURE,
    TRACE_TOOL_TIMEOUT,
    TRACE_TOOL_OTHER,
};
#define TRACE_TOOL_STATUS_COUNT 4

enum trace_finish {
    TRACE_FINISH_COMPLETED, /* the agent answered */
    TRACE_FINISH_TRUNCATED, /* hit a turn, token or context cap */
    TRACE_FINISH_ABORTED,   /* stopped by the system (timeout, staleness, failure) */
    TRACE_FINISH_FILTERED,  /* completed but dropped by dynamic sampling */
};
#define TRACE_FINISH_COUNT 4

/* One tool call made at the end of a turn and its return. */
struct trace_tool_call {
    char *tool; /* tool name, e.g. "search", "bash", "validator"; never NULL or empty */
    enum trace_tool_status status;
    int64_t payload_tokens; /* tokens of the return appended to the context */
    int64_t queue_us;       /* waiting for a tool worker, microseconds; -1 when unknown */
    int64_t exec_us;        /* execution, microseconds; -1 when unknown */
};

/* When and where a turn was served, as the gateway that sent it measured (`libra serve
 * --capture`): the engine's instance and TP size, and three moments in microseconds on one
 * clock (an arbitrary origin) shared by the trace's turns. tp 0: not recorded (then every
 * field is 0). */
struct trace_turn_timing {
    int64_t instance; /* the engine that served the turn (the gateway's instance id) */
    int64_t tp;       /* its tensor-parallel size; 0 when the turn carries no timing */
    int64_t sent_us;  /* the request sent to the engine */
    int64_t first_us; /* the answer's first streamed chunk; -1: the answer was not streamed */
    int64_t done_us;  /* the answer complete */
};

/* One LLM call of a trajectory. */
struct trace_turn {
    int64_t prompt_tokens;         /* tokens sent (the whole context) */
    int64_t cached_tokens;         /* of which served from the prefix cache; -1 when unknown */
    int64_t generated_tokens;      /* tokens generated in this turn */
    struct trace_tool_call *calls; /* tool calls after this turn (see trace_check_traj) */
    size_t n_calls;
    struct trace_turn_timing timing; /* tp 0: not recorded */
};

/* The microseconds a turn's tools took: every call's queue and execution, summed (unknown
 * parts count 0). The one count the planner's lengths, the load client and `route eval` share. */
static inline int64_t trace_turn_tool_us(const struct trace_turn *t)
{
    int64_t us = 0;
    for (size_t k = 0; k < t->n_calls; k++)
        us += (t->calls[k].queue_us > 0 ? t->calls[k].queue_us : 0) +
              (t->calls[k].exec_us > 0 ? t->calls[k].exec_us : 0);
    return us;
}

/* One trajectory (one GRPO sample of one prompt). */
struct trace_traj {
    int64_t step;          /* training step that consumed (or generated) it */
    int64_t prompt_id;     /* index into the workload's prompt pool */
    int64_t epoch;         /* pass over the prompt pool */
    int64_t sample;        /* index within the GRPO group */
    int64_t version_start; /* policy version when the first turn started */
    int64_t version_end;   /* policy version when the last token was generated; -1 unknown */
    bool has_start;        /* start_us is known */
    int64_t start_us;      /* start of the first turn, microseconds since an arbitrary origin
                            * shared by the trace's trajectories; >= 0 when has_start */
    int64_t setup_us;      /* the environment's setup before the first turn (a sandbox
                            * container's start), microseconds; 0 when none or unknown */
    struct trace_turn *turns;
    size_t n_turns;
    enum trace_finish finish;
    bool has_reward;
    double reward;
    json_t *extra; /* arbitrary user data kept verbatim on round trip; may be NULL */
};

/* What the planner reads of a trajectory: its lengths and the time it waited on tools. */
struct trace_lengths {
    int64_t prompt_tokens;    /* the first turn's prompt; 0 without turns */
    int64_t generated_tokens; /* all turns */
    int64_t tool_tokens;      /* all tool returns */
    int64_t turns;
    double tool_s; /* off the GPU: the setup and every call's queue + execution
                    * (trace_turn_tool_us), seconds */
};

/* The lengths of t, a generated record or one read from a trace or captured by the gateway:
 * the one reading `libra plan`, the simulator and `libra serve` share. */
static inline void trace_traj_lengths(const struct trace_traj *t, struct trace_lengths *out)
{
    int64_t tool_us = t->setup_us;
    *out = (struct trace_lengths){.prompt_tokens = t->n_turns ? t->turns[0].prompt_tokens : 0,
                                  .turns = (int64_t)t->n_turns};
    for (size_t k = 0; k < t->n_turns; k++) {
        out->generated_tokens += t->turns[k].generated_tokens;
        for (size_t c = 0; c < t->turns[k].n_calls; c++)
            out->tool_tokens += t->turns[k].calls[c].payload_tokens;
        tool_us += trace_turn_tool_us(&t->turns[k]);
    }
    out->tool_s = (double)tool_us * 1e-6;
}

/* Line 1 of a trace file: what the trajectories are. */
struct trace_header {
    int64_t version;    /* TRACE_SCHEMA_VERSION */
    char *workload;     /* e.g. "r2e-gym" or "unknown"; never NULL */
    char *model;        /* e.g. "qwen3-14b"; NULL when unknown */
    int64_t group_size; /* samples per prompt (GRPO n); 0 when unknown */
    bool lossy;         /* some fields were estimated by an importer */
    json_t *generator;  /* synthetic traces: the generator and its parameters, verbatim */
    json_t *import;     /* imported traces: what was imported and estimated; may be NULL */
    json_t *extra;      /* arbitrary user data kept verbatim; may be NULL */
};

/* Lower-case names used in the format ("success", "completed"); static storage. */
const char *trace_tool_status_name(enum trace_tool_status s);
const char *trace_finish_name(enum trace_finish f);

/* Whether name (a header's workload or model) holds a control character (U+0000-U+001F,
 * U+007F), which a header refuses with TRACE_NO_CONTROL. */
bool trace_name_has_control(const char *name);
#define TRACE_NO_CONTROL "must not hold control characters"

/*
 * Checks a header built in memory: version TRACE_SCHEMA_VERSION, a non-empty workload,
 * group_size >= 0, generator/import/extra NULL or objects. Returns 0, or LIBRA_EINVAL with
 * err (optional) holding "FIELD: REASON".
 */
int trace_check_header(const struct trace_header *h, struct libra_error *err);

/*
 * Checks the rules a well-formed record obeys beyond its types (docs/trace-format.md,
 * "Semantic rules"): counts non-negative, cached <= prompt, at least one turn, tool calls
 * between turns (and after the last only when truncated or aborted), version_end >=
 * version_start when known, sample < group_size when group_size > 0, non-empty tool names,
 * a turn's timing (when recorded) in order: sent <= first (when streamed) <= done.
 * Returns 0, or LIBRA_EINVAL with err (optional) holding "FIELD: REASON" (e.g.
 * "turns.2.cached_tokens: 900 exceeds prompt_tokens 800") and no position.
 */
int trace_check_traj(const struct trace_traj *t, int64_t group_size, struct libra_error *err);

/* Whether a recorded timing (m->tp > 0) obeys trace_check_traj's rule for it: TP 1 to
 * TRACE_MAX_TP, counts >= 0, sent <= first (when streamed) <= done. */
bool trace_timing_ok(const struct trace_turn_timing *m);

/* ---- parsing ----------------------------------------------------------------------------- */

/*
 * A parser turns lines of a trace into records, reusing its buffers so that parsing a file
 * allocates per line only what jansson does. Records it returns are owned by the parser and
 * valid until its next call or its free. Not thread-safe; use one per thread.
 */
struct trace_parser;

/* Creates a parser; name labels error messages (a file name). Never returns NULL. */
struct trace_parser *trace_parser_new(const char *name);

/* Releases the parser and the last record it returned; NULL is a no-op. */
void trace_parser_free(struct trace_parser *p);

/*
 * Parses a header line of len bytes (no newline needed) reported as line lineno. On success
 * *out points at the parsed header (owned by the parser, valid until trace_parser_free) and
 * later trajectories are checked against its group_size. Returns 0, or LIBRA_EINVAL with err
 * set to name:lineno:col and "FIELD: REASON".
 */
int trace_parser_header(struct trace_parser *p, const char *line, size_t len, int64_t lineno,
                        const struct trace_header **out, struct libra_error *err);

/*
 * Parses one trajectory line (type checks, unknown keys, then trace_check_traj). On success
 * *out points at a record valid until the next call on p. Returns 0, or LIBRA_EINVAL with err
 * set to name:lineno:col and "FIELD: REASON"; p stays usable for the next line.
 */
int trace_parser_traj(struct trace_parser *p, const char *line, size_t len, int64_t lineno,
                      const struct trace_traj **out, struct libra_error *err);

/* ---- formatting -------------------------------------------------------------------------- */

/* A growable output buffer; zero-initialise, reuse across records, release with _free. */
struct trace_text {
    char *data; /* NUL-terminated when len > 0 */
    size_t len; /* bytes */
    size_t cap; /* bytes allocated */
};

void trace_text_free(struct trace_text *b);

/*
 * Appends the header / one trajectory as one line, newline included, in the format's fixed
 * key order: the same record always gives the same bytes, and what trace_parser_* read from
 * a line formatted here formats back to the same bytes. Records are not checked here
 * (trace_check_traj; the trace writer in trace/file.h does).
 */
void trace_format_header(struct trace_text *b, const struct trace_header *h);
void trace_format_traj(struct trace_text *b, const struct trace_traj *t);

#endif
