/*
 * Importers: trajectories from logs users already have (`libra trace import`).
 *
 * Few teams log what a trace holds, but most have something: a per-turn table exported from
 * their own agent loop (JSON Lines or CSV, one row per turn), or the rollout dumps verl writes
 * to `trainer.rollout_data_dir` (one JSON line per sample: decoded input and output text, score,
 * step), or an agent framework's own logs (tau-bench's result files, SWE-agent's .traj files:
 * whole JSON documents, read when the file ends). An importer turns such lines into trace records;
 * docs/trace-format.md ("Importing") gives every column and what is estimated. verl dumps carry no
 * token counts, turns or tool latencies, so those are estimated from the text and the header is
 * marked lossy.
 *
 * Importers are pure: the caller reads the lines (cli/) and writes the records (trace/file.h).
 */
#ifndef TRACE_IMPORT_H
#define TRACE_IMPORT_H

#include <stdint.h>

#include "trace/trace.h"

enum trace_import_format {
    TRACE_IMPORT_JSONL,     /* one JSON object per turn */
    TRACE_IMPORT_CSV,       /* one CSV row per turn, column names on each file's first line */
    TRACE_IMPORT_VERL,      /* verl rollout_data_dir dumps, one JSON object per trajectory */
    TRACE_IMPORT_TAU_BENCH, /* tau-bench results: one JSON array of runs per file */
    TRACE_IMPORT_SWE_AGENT, /* SWE-agent .traj files: one run per file */
};

/* The default failure texts of tool outputs (comma-separated; a leading '^' anchors a text
 * at the start of the output, otherwise it may occur anywhere). */
#define TRACE_TAU_FAILURE_TEXT "^Error:"
#define TRACE_SWE_FAILURE_TEXT "Traceback,Error,command not found"

struct trace_import_options {
    enum trace_import_format format;
    const char *workload;     /* header workload; NULL: "unknown" */
    const char *model;        /* header model; NULL: unknown */
    int64_t group_size;       /* header group_size (samples per prompt); 0: unknown */
    double chars_per_token;   /* verl, tau-bench, swe-agent: characters per estimated token
                               * (> 0); 0: 4 */
    const char *failure_text; /* tau-bench, swe-agent: a tool output matching one of these
                               * comma-separated texts is a failure, else a success; NULL:
                               * TRACE_TAU_FAILURE_TEXT / TRACE_SWE_FAILURE_TEXT; "": never */
};

struct trace_importer;

/*
 * Creates an importer; fails with LIBRA_EINVAL (err says why) when an option is out of range.
 * Returns 0 with *out set.
 */
int trace_importer_new(struct trace_importer **out, const struct trace_import_options *o,
                       struct libra_error *err);

/* Frees im and everything it returned. NULL is a no-op. */
void trace_importer_free(struct trace_importer *im);

/* The header of the imported trace (owned by im; valid until trace_importer_free). */
const struct trace_header *trace_importer_header(const struct trace_importer *im);

/*
 * Starts an input file; name labels errors and line numbers restart at 1. A trajectory never
 * spans files: call trace_importer_end before the next begin.
 */
void trace_importer_begin(struct trace_importer *im, const char *name);

/*
 * Feeds the next line (len bytes, without its newline). Returns 1 with *out set when a
 * trajectory is complete (owned by im, valid until the next call), 0 when the line was
 * consumed without completing one, or LIBRA_EINVAL with err at FILE:LINE:COL and "FIELD:
 * REASON". After an error the importer must not be fed further.
 */
int trace_importer_line(struct trace_importer *im, const char *line, size_t len,
                        const struct trace_traj **out, struct libra_error *err);

/*
 * Ends the current file: returns 1 with *out set for a pending trajectory (valid until the next
 * call), 0 when none is left, or LIBRA_EINVAL. Call it until it returns 0: a file that is one
 * document (tau-bench, SWE-agent) yields its trajectories here, one per call.
 */
int trace_importer_end(struct trace_importer *im, const struct trace_traj **out,
                       struct libra_error *err);

#endif
