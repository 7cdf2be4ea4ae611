/*
 * Declarations shared by the files of trace/ and nobody else: the column finder the parser
 * and the importers report positions with, the token estimate, and the verl, tau-bench and
 * SWE-agent importers behind trace/import.h.
 */
#ifndef TRACE_INTERNAL_H
#define TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "trace/import.h"
#include "trace/trace.h"

/*
 * The 1-based column (in characters) of the value or key that JSON Pointer ptr names in line
 * (one valid JSON value of len bytes), or of its nearest enclosing element when it is absent
 * (the line's first value when none is present). Scans the text; meant for error reports.
 */
int trace_line_col(const char *line, size_t len, const char *ptr);

/* The verl rollout-dump importer (import_verl.c); see trace_importer_* in import.h. */
struct trace_verl;

/* chars_per_token > 0. Never returns NULL. */
struct trace_verl *trace_verl_new(double chars_per_token);
void trace_verl_free(struct trace_verl *v);

/*
 * Converts one dump line (line lineno of file name) into a trajectory valid until the next
 * call. Returns 1 with *out set, or LIBRA_EINVAL with err at name:lineno:col.
 */
int trace_verl_line(struct trace_verl *v, const char *name, int64_t lineno, const char *line,
                    size_t len, const struct trace_traj **out, struct libra_error *err);

/* Estimated tokens of n bytes of UTF-8 text: characters (code points) / chars_per_token,
 * rounded up. */
int64_t trace_estimate_tokens(const char *s, size_t n, double chars_per_token);

/*
 * The importer of whole-document agent logs (import_agent.c): format is
 * TRACE_IMPORT_TAU_BENCH or TRACE_IMPORT_SWE_AGENT, chars_per_token > 0, failure_text as in
 * struct trace_import_options. Never returns NULL.
 */
struct trace_agentlog;

/* What ends a tau-bench run with the agent's answer (for the header's import object). */
#define TAU_TERMINAL_TOOL_DOC                                                                      \
    "a run that ends with the customer's message or a transfer_to_human_agents call is "           \
    "completed and that last call is dropped (what came back never reaches the model); a run "     \
    "cut after another call is truncated (the step cap)"
struct trace_agentlog *trace_agentlog_new(enum trace_import_format format, double chars_per_token,
                                          const char *failure_text);
void trace_agentlog_free(struct trace_agentlog *a);

/* The failure texts in use, as a new JSON array of strings (for the header). */
json_t *trace_agentlog_marks_json(const struct trace_agentlog *a);

/* Starts file name; its lines are kept (add) until next is called. */
void trace_agentlog_begin(struct trace_agentlog *a, const char *name);
void trace_agentlog_add(struct trace_agentlog *a, const char *line, size_t len);

/*
 * Parses the file's document on the first call and returns its trajectories one per call: 1
 * with *out set (valid until the next call), 0 when none is left, or LIBRA_EINVAL with err at
 * name:line:col and "PATH: REASON" (PATH the JSON path, e.g. "17.traj.4.tool_call_id"); after
 * an error it returns 0.
 */
int trace_agentlog_next(struct trace_agentlog *a, const struct trace_traj **out,
                        struct libra_error *err);

#endif
