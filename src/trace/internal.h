/*
 * Declarations shared by the files of trace/ and nobody else: the column finder the parser
 * and the importers report positions with, the token estimate, the tool-status rules, and the
 * verl, tau-bench, SWE-agent and OpenAI-chat importers behind trace/import.h.
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

/* The 1-based column, in UTF-8 characters, of byte offset off of line. */
int trace_char_col(const char *line, size_t off);

/*
 * Refuses line lineno of file name (len bytes) where it holds a NUL byte, naming its column in
 * characters: JSON and CSV text hold none, C's string functions would end a value there, and a
 * zero-filled line is what a crash can leave in a file. Returns 0, or LIBRA_EINVAL with err.
 */
int trace_line_nul(const char *name, int64_t lineno, const char *line, size_t len,
                   struct libra_error *err);

/* The verl rollout-dump importer (import_verl.c); see trace_importer_* in import.h. */
struct trace_verl;

/* chars_per_token > 0; group_size is the header's (0: unknown; a trajectory whose sample is not
 * below it is an error). Never returns NULL. */
struct trace_verl *trace_verl_new(double chars_per_token, int64_t group_size);
void trace_verl_free(struct trace_verl *v);

/*
 * Converts one dump line (line lineno of file name) into a trajectory valid until the next
 * call, checked as a trace's (trace_check_traj). A file named {step}.jsonl holds only rows of
 * that step. Returns 1 with *out set, or LIBRA_EINVAL with err at name:lineno:col.
 */
int trace_verl_line(struct trace_verl *v, const char *name, int64_t lineno, const char *line,
                    size_t len, const struct trace_traj **out, struct libra_error *err);

/* Estimated tokens of n bytes of UTF-8 text: characters (code points) / chars_per_token,
 * rounded up. */
int64_t trace_estimate_tokens(const char *s, size_t n, double chars_per_token);

/* ---- tool-status rules (import_status.c) ------------------------------------------------ */

/* A list of texts; a leading '^' anchors a text at the start of the output. */
struct trace_text_list {
    char **v; /* owned */
    size_t n;
};

/* The rules of import.h ("tool-status rules"), in their order of precedence. */
struct trace_status_rules {
    struct trace_text_list timeout, exit_code, failure;
};

/*
 * Reads the rules of o (the format's defaults where NULL) into r. Fails with LIBRA_EINVAL, err
 * starting with the rule's flag, for a rule given to a format that takes none, an empty or
 * blank text, or an exit-code pattern ending in a digit; r is then empty. Formats without
 * rules get empty lists.
 */
int trace_status_rules_init(struct trace_status_rules *r, enum trace_import_format format,
                            const struct trace_import_options *o, struct libra_error *err);
void trace_status_rules_free(struct trace_status_rules *r);

/* The status of a tool output (NUL-terminated; NULL reads as ""). */
enum trace_tool_status trace_status_of(const struct trace_status_rules *r, const char *out);

/* Sets failure_text, timeout_text, exit_code_pattern (arrays) and status_precedence in the
 * header's import object. */
void trace_status_rules_describe(const struct trace_status_rules *r, json_t *import);

/* ---- agent logs (import_agent.c) ---------------------------------------------------------- */

/*
 * The importer of agent logs (import_agent.c): whole-document ones (TRACE_IMPORT_TAU_BENCH,
 * TRACE_IMPORT_SWE_AGENT: lines are kept until the file ends) and chat transcripts one per line
 * (TRACE_IMPORT_OPENAI_CHAT). chars_per_token > 0; group_size is the header's (0: unknown;
 * a trajectory whose sample is not below it is an error); rules is copied (the lists stay owned
 * by the caller and must outlive a). Never returns NULL.
 */
struct trace_agentlog;

/* What ends a tau-bench run with the agent's answer (for the header's import object). */
#define TAU_TERMINAL_TOOL_DOC                                                                      \
    "a run that ends with the customer's message or a transfer_to_human_agents call is "           \
    "completed and that last call is dropped (what came back never reaches the model); a run "     \
    "cut after another call is truncated (the step cap)"
/* What ends an OpenAI-chat trajectory with the agent's answer (for the header). */
#define CHAT_TERMINAL_TOOL_DOC                                                                     \
    "a trajectory whose last assistant message calls finish or submit is completed and those "     \
    "calls are dropped (what came back never reaches the model); one that ends after another "     \
    "call, or with a user message, is truncated"
struct trace_agentlog *trace_agentlog_new(enum trace_import_format format, double chars_per_token,
                                          int64_t group_size,
                                          const struct trace_status_rules *rules);
void trace_agentlog_free(struct trace_agentlog *a);

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

/*
 * TRACE_IMPORT_OPENAI_CHAT: converts line lineno (len bytes, not blank) of the current file
 * into a trajectory valid until the next call. Returns 1 with *out set, or LIBRA_EINVAL with err
 * at name:lineno:col and "PATH: REASON" (e.g. "messages.4.tool_call_id: ...").
 */
int trace_agentlog_line(struct trace_agentlog *a, int64_t lineno, const char *line, size_t len,
                        const struct trace_traj **out, struct libra_error *err);

#endif
