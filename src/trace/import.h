/*
 * Importers: trajectories from logs users already have (`libra trace import`).
 *
 * Few teams log what a trace holds, but most have something: a per-turn table exported from
 * their own agent loop (JSON Lines or CSV, one row per turn), or the rollout dumps verl writes
 * to `trainer.rollout_data_dir` (one JSON line per sample: decoded input and output text, score,
 * step), or an agent framework's own logs (tau-bench's result files, SWE-agent's .traj files:
 * whole JSON documents, read when the file ends), or OpenAI chat transcripts, one JSON line per
 * trajectory (the shape of most agent SFT/RL datasets). An importer turns such lines into records;
 * docs/trace-format.md ("Importing") gives every column and what is estimated. verl dumps carry no
 * token counts, turns or tool latencies, so those are estimated from the text and the header is
 * marked lossy.
 *
 * Importers are pure: the caller reads the lines (cli/) and writes the records (trace/file.h).
 */
#ifndef TRACE_IMPORT_H
#define TRACE_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

enum trace_import_format {
    TRACE_IMPORT_JSONL,       /* one JSON object per turn */
    TRACE_IMPORT_CSV,         /* one CSV row per turn, column names on each file's first line */
    TRACE_IMPORT_VERL,        /* verl rollout_data_dir dumps, one JSON object per trajectory */
    TRACE_IMPORT_TAU_BENCH,   /* tau-bench results: one JSON array of runs per file */
    TRACE_IMPORT_SWE_AGENT,   /* SWE-agent .traj files: one run per file */
    TRACE_IMPORT_OPENAI_CHAT, /* OpenAI chat messages, one JSON object per trajectory */
};

/*
 * The default tool-status rules of the text importers (tau-bench, swe-agent, openai-chat):
 * comma-separated texts, each matched case-sensitively anywhere in a tool output, or at its
 * start when it begins with '^'. A call is a timeout when its output matches a timeout text;
 * else, when an exit-code pattern is followed by an integer, a failure for a non-zero one and
 * a success for 0; else a failure when it matches a failure text; else a success.
 * docs/trace-format.md ("Tool-status rules") says where each default comes from.
 */
#define TRACE_TAU_FAILURE_TEXT "^Error:"
#define TRACE_SWE_FAILURE_TEXT "Traceback,Error,command not found"
#define TRACE_CHAT_FAILURE_TEXT TRACE_SWE_FAILURE_TEXT
#define TRACE_TAU_TIMEOUT_TEXT ""
#define TRACE_SWE_TIMEOUT_TEXT                                                                     \
    "timed out,TimeoutError,was cancelled because it took more than,has no new output after"
#define TRACE_CHAT_TIMEOUT_TEXT TRACE_SWE_TIMEOUT_TEXT
#define TRACE_TAU_EXIT_CODE_PATTERN ""
#define TRACE_SWE_EXIT_CODE_PATTERN ""
#define TRACE_CHAT_EXIT_CODE_PATTERN "exit code,<returncode>"

struct trace_import_options {
    enum trace_import_format format;
    const char *workload;   /* header workload; NULL: "unknown" */
    const char *model;      /* header model; NULL: unknown */
    int64_t group_size;     /* header group_size (samples per prompt); 0: unknown */
    double chars_per_token; /* verl, tau-bench, swe-agent, openai-chat: characters per
                             * estimated token (> 0); 0: 4 */
    /* The tool-status rules of tau-bench, swe-agent and openai-chat (see above); NULL: the
     * format's default (TRACE_*_FAILURE_TEXT etc.); "": none. Other formats take none. */
    const char *failure_text;      /* a matching output is a failure */
    const char *timeout_text;      /* a matching output is a timeout */
    const char *exit_code_pattern; /* a text followed by the command's exit code */
};

/*
 * The step a verl dump file's name gives: name, after its last '/', is {step}.jsonl as verl
 * writes it (digits only, of any length). Returns the step's digits without leading zeros
 * ("01.jsonl": "1", "0.jsonl": "0"), *n bytes of them, pointing into name; NULL for any other
 * name. Compared as text, so that no step is too long to order.
 */
const char *trace_verl_file_step(const char *name, size_t *n);

/* The --from name of a format ("tau-bench"); static storage. */
const char *trace_import_format_name(enum trace_import_format f);

struct trace_importer;

/*
 * Creates an importer; fails with LIBRA_EINVAL (err says why) when an option is out of range
 * or a status rule is given that the format does not use or that makes no sense (an empty
 * text in a list, a bare '^', an exit-code pattern ending in a digit, a text given twice) or
 * that the header cannot hold (not valid UTF-8); a rule's message starts with its `libra trace
 * import` flag ("--timeout-text: ..."). Returns 0 with *out set.
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

/*
 * The trajectories of an import, held so that each GRPO group's records are written together:
 * readers take consecutive runs of group_size records as one group (docs/trace-format.md).
 * A group is a (step, prompt_id); groups come in the order of their first record, a group's
 * records by sample (equal samples as they came). Not thread-safe.
 */
struct trace_groups;

/* Never returns NULL. */
struct trace_groups *trace_groups_new(void);

/* Frees g and every record it returned. NULL is a no-op. */
void trace_groups_free(struct trace_groups *g);

/* Holds a copy of t (its extra deep-copied): t need not outlive the call. */
void trace_groups_add(struct trace_groups *g, const struct trace_traj *t);

/* Where the records added next come from, for trace_groups_check's error: file (NULL: none;
 * it must outlive g) and line (0: unknown). */
void trace_groups_source(struct trace_groups *g, const char *file, int64_t line);

/*
 * Checks that every group holds exactly group_size records, as readers of a trace with that
 * group_size need. Returns 0, or LIBRA_EINVAL with err at the first short or long group's first
 * record (file, line when known) naming the prompt (by the name its log gives it, when the
 * record's extra keeps one), its count and group_size (as --samples) and what to do.
 */
int trace_groups_check(struct trace_groups *g, int64_t group_size, struct libra_error *err);

/* The i-th record held, in group order (ordered on the first call after an add); NULL when
 * i is past the last. Owned by g, valid until the next add or the free. */
const struct trace_traj *trace_groups_get(struct trace_groups *g, size_t i);

#endif
