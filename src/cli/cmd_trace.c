/*
 * `libra trace validate|stats|import|gen`: trace files (docs/trace-format.md). validate is for
 * scripts and editors (exit 1 when the file is invalid); stats summarises a trace's shape
 * (what the planner and the router depend on); import turns logs users already have into a
 * trace; gen (cmd_trace_gen.c) writes a synthetic one from a workload preset.
 */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "trace/file.h"
#include "trace/import.h"
#include "trace/stats.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/vec.h"

#define STATS_SCHEMA "libra.trace-stats/1"

static const char help[] =
    "usage: libra trace validate FILE [--all] [--progress]\n"
    "       libra trace stats FILE [--json] [-o FILE] [--progress]\n"
    "       libra trace import --from jsonl|csv|verl|tau-bench|swe-agent|openai-chat IN...\n"
    "                          [-o FILE] [--workload NAME] [--model NAME] [--samples N]\n"
    "                          [--chars-per-token X] [--timeout-text LIST]\n"
    "                          [--exit-code-pattern LIST] [--failure-text LIST]\n"
    "       libra trace gen WORKLOAD [flags] (libra trace gen --help)\n"
    "\n"
    "validate checks every line of a trace (docs/trace-format.md) and prints \"FILE: valid, N\n"
    "trajectories\" (exit 0), or the first error as FILE:LINE:COL: FIELD: REASON (exit 1);\n"
    "--all reports every bad line. stats prints, per step and overall, turns, tool calls and\n"
    "generated / prompt / tool tokens per trajectory (mean, p50, p90, p99, max), tool latencies,\n"
    "the finish and tool-status mix, how often prompts recur, the share of generated tokens\n"
    "held by the longest 5 % and 10 % of trajectories, and the drift of mean generated tokens\n"
    "per step, and whether routing by tool returns can pay: the within-depth Spearman of each\n"
    "return's bad status and payload against the generated tokens still to come (and of depth\n"
    "itself), and the ICC(1) of log(1 + generated tokens) by prompt; --json prints one document\n"
    "(schema libra.trace-stats/1). import converts a\n"
    "per-turn table (jsonl, csv), verl rollout_data_dir dumps (verl; IN may be the\n"
    "directory), tau-bench result files (tau-bench: a JSON array of runs, each a chat\n"
    "transcript; one trajectory per run, prompt_id = task_id, sample = trial), SWE-agent\n"
    ".traj files (swe-agent: one trajectory per file, a turn per step, the tool is the\n"
    "action's first word) or OpenAI chat transcripts (openai-chat: one JSON object per line\n"
    "with \"messages\"; a turn per assistant message, its tool_calls (or function_call) the\n"
    "calls, joined to tool messages by tool_call_id; the prompt from task_id, instance_id,\n"
    "prompt_id or id, else the prompt's text; the sample from trial, sample or attempt) into\n"
    "a trace. These logs hold text, not token counts, so tokens are estimated (characters /\n"
    "--chars-per-token), except where a log gives provider counts: an assistant message's\n"
    "usage is taken as is, and SWE-agent's info.model_stats or an openai-chat line's usage\n"
    "totals scale the estimates. A tool call's status comes from its output by three rules,\n"
    "first match wins: --timeout-text (timeout), --exit-code-pattern (a non-zero exit code is\n"
    "a failure, 0 a success), --failure-text (failure), else success. The trace is marked\n"
    "lossy (docs/trace-format.md, \"Importing\"). A trace that fails to read makes stats and\n"
    "import exit 2.\n"
    "\n"
    "flags:\n"
    "  --all                  validate: report every bad line, not only the first\n"
    "  --json                 stats: print one JSON document\n"
    "  -o, --output FILE      stats, import: write to FILE instead of standard output\n"
    "  --from FORMAT          import: jsonl, csv, verl, tau-bench, swe-agent or openai-chat\n"
    "                         (required)\n"
    "  --workload NAME        import: workload named in the header (default unknown)\n"
    "  --model NAME           import: model named in the header\n"
    "  --samples N            import: GRPO group size for the header, 1 to 1024 (as\n"
    "                         rl.samples); samples must be below it, and every prompt\n"
    "                         of a step must have exactly N trajectories\n"
    "  --chars-per-token X    import --from verl|tau-bench|swe-agent|openai-chat: characters\n"
    "                         per estimated token, 0.01 to 1000 (default 4); refused by\n"
    "                         jsonl and csv, which give token counts\n"
    "The status rules (import --from tau-bench|swe-agent|openai-chat) take comma-separated\n"
    "texts matched case-sensitively anywhere in a tool output (a leading ^: at its start);\n"
    "\"\" gives none:\n"
    "  --timeout-text LIST    an output containing one is a timeout (default tau-bench: none;\n"
    "                         swe-agent, openai-chat: \"timed out,TimeoutError,was cancelled\n"
    "                         because it took more than,has no new output after\")\n"
    "  --exit-code-pattern LIST\n"
    "                         a text followed by an integer (after blanks, ':' or '=') gives\n"
    "                         the exit code; the last in the output counts (default\n"
    "                         openai-chat: \"" TRACE_CHAT_EXIT_CODE_PATTERN "\"; tau-bench,\n"
    "                         swe-agent: none)\n"
    "  --failure-text LIST    an output containing one is a failure (default tau-bench:\n"
    "                         \"" TRACE_TAU_FAILURE_TEXT "\"; swe-agent, openai-chat:\n"
    "                         \"" TRACE_SWE_FAILURE_TEXT "\")\n"
    "  --progress             validate, stats: trajectories read so far on stderr even when\n"
    "                         it is not a terminal (on a terminal it is always shown)\n";

/* Trajectories read so far, for the progress line of a long file. */
static void read_progress(void *ctx, struct cli_progress_state *out)
{
    out->unit = "trajectories read";
    out->done = atomic_load((atomic_llong *)ctx);
}

/* Reports a trace error as "libra: FILE:LINE:COL: MSG"; returns the exit code for rc. */
static int report(int rc, const struct libra_error *err)
{
    cli_report_error(err);
    return rc == LIBRA_EIO ? LIBRA_EXIT_IO : LIBRA_EXIT_USAGE;
}

/* ---- validate ---------------------------------------------------------------------------- */

static int validate(const char *path, bool all, atomic_llong *read)
{
    struct trace_reader *r;
    struct libra_error err = {0};
    if (trace_reader_open(&r, path, &err))
        return report(LIBRA_EIO, &err);
    const struct trace_header *h;
    const struct trace_traj *t;
    int64_t errors = 0, records = 0;
    int rc = trace_reader_header(r, &h, &err);
    if (rc == LIBRA_EINVAL) {
        cli_report_error(&err);
        errors++;
    }
    while (rc != LIBRA_EIO && (all || errors == 0) && (rc = trace_reader_next(r, &t, &err))) {
        records += rc == 1;
        atomic_fetch_add(read, 1);
        if (rc == LIBRA_EINVAL) {
            cli_report_error(&err);
            errors++;
        }
    }
    trace_reader_close(r);
    if (rc == LIBRA_EIO)
        return report(rc, &err);
    if (errors) {
        if (all)
            cli_errorf("%s: %lld invalid line%s", path, (long long)errors, errors > 1 ? "s" : "");
        return LIBRA_EXIT_NEGATIVE;
    }
    char line[512];
    snprintf(line, sizeof line, "%s: valid, %lld trajector%s\n", path, (long long)records,
             records == 1 ? "y" : "ies");
    return cli_write_output(NULL, line);
}

/* ---- stats ------------------------------------------------------------------------------- */

/* Reads every record of path into s; *hdr_json gets the header's summary. */
static int read_stats(const char *path, struct trace_stats *s, json_t **hdr_json,
                      atomic_llong *read)
{
    struct trace_reader *r;
    struct libra_error err = {0};
    if (trace_reader_open(&r, path, &err))
        return report(LIBRA_EIO, &err);
    const struct trace_header *h;
    const struct trace_traj *t;
    int rc = trace_reader_header(r, &h, &err);
    if (rc == 0) {
        /* the envelope's seed is one a computation used: an integer >= 0, as libra's
         * generators write it; a foreign generator's other value is not one */
        const json_t *seed = json_object_get(h->generator, "seed");
        if (!json_is_integer(seed) || json_integer_value(seed) < 0)
            seed = NULL;
        /* an unknown group size (0 in memory) is absent from the header: null, as model */
        json_t *group = h->group_size ? json_integer(h->group_size) : NULL;
        *hdr_json = json_pack("{s:s,s:s?,s:b,s:o?,s:O?}", "workload", h->workload, "model",
                              h->model, "lossy", h->lossy, "group_size", group, "seed", seed);
        while ((rc = trace_reader_next(r, &t, &err)) == 1) {
            trace_stats_add(s, t);
            atomic_fetch_add(read, 1);
        }
    }
    trace_reader_close(r);
    return rc ? report(rc, &err) : 0;
}

static void dist_row(FILE *out, const char *label, const json_t *d)
{
    if (json_integer_value(json_object_get(d, "n")) == 0) {
        fprintf(out, "  %-18s %10s\n", label, "-");
        return;
    }
    fprintf(out, "  %-18s", label);
    static const char *const keys[] = {"mean", "p50", "p90", "p99", "max"};
    for (int i = 0; i < 5; i++)
        fprintf(out, " %10.1f", json_number_value(json_object_get(d, keys[i])));
    fprintf(out, "\n");
}

static void mix_row(FILE *out, const char *label, const json_t *counts)
{
    double total = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)counts, k, v) total += (double)json_integer_value(v);
    if (total == 0) { /* no trajectory or no call: a share of none is undefined */
        fprintf(out, "%s: -\n", label);
        return;
    }
    fprintf(out, "%s:", label);
    json_object_foreach((json_t *)counts, k, v)
    {
        fprintf(out, " %s %.1f%%", k, 100.0 * (double)json_integer_value(v) / total);
    }
    fprintf(out, "\n");
}

/* A token share as a percentage into buf, "-" where the JSON has null (nothing generated). */
static const char *share(char *buf, size_t size, const json_t *block, const char *key)
{
    const json_t *v = json_object_get(block, key);
    if (!json_is_number(v))
        return "-";
    snprintf(buf, size, "%.1f%%", 100.0 * json_number_value(v));
    return buf;
}

/* One pooled correlation: "  LABEL  +0.123  (N returns, D depths WHERE)", "-" when null. */
static void rho_row(FILE *out, const char *label, const json_t *pooled, const char *where)
{
    const json_t *rho = json_object_get(pooled, "rho");
    if (json_is_number(rho))
        fprintf(out, "  %-18s %+.3f", label, json_number_value(rho));
    else
        fprintf(out, "  %-18s %6s", label, "-");
    fprintf(out, "  (%lld returns",
            (long long)json_integer_value(json_object_get(pooled, "returns")));
    if (json_object_get(pooled, "depths"))
        fprintf(out, ", %lld depths",
                (long long)json_integer_value(json_object_get(pooled, "depths")));
    fprintf(out, "%s)\n", where);
}

/* The two figures that decide whether routing by tool returns can pay (docs/trace-format.md). */
static void signal_text(FILE *out, const json_t *doc)
{
    const json_t *sig = json_object_get(doc, "return_signal");
    const json_t *eff = json_object_get(doc, "task_effect");
    fprintf(out,
            "return signal: Spearman vs generated tokens still to come; %lld truncated or "
            "aborted\ntrajectories (%lld returns) excluded as lower bounds\n",
            (long long)json_integer_value(json_object_get(sig, "censored_trajectories")),
            (long long)json_integer_value(json_object_get(sig, "censored_returns")));
    fprintf(out,
            "  within a turn depth, pooled weighted by returns (%lld depths of < %lld returns, "
            "%lld returns, skipped):\n",
            (long long)json_integer_value(json_object_get(sig, "skipped_depths")),
            (long long)json_integer_value(json_object_get(sig, "min_returns_per_depth")),
            (long long)json_integer_value(json_object_get(sig, "skipped_returns")));
    rho_row(out, "  bad status", json_object_get(sig, "status"), " where it varies");
    rho_row(out, "  payload tokens", json_object_get(sig, "payload"), "");
    rho_row(out, "depth itself", json_object_get(sig, "depth"), ", all depths pooled");
    const json_t *icc = json_object_get(eff, "icc1");
    fprintf(out, "task effect: ICC(1) of log(1 + generated tokens) by prompt ");
    if (json_is_number(icc))
        fprintf(out, "%.3f", json_number_value(icc));
    else
        fprintf(out, "-");
    fprintf(out, " (%lld prompts with >= 2\ntrajectories, %lld trajectories)\n",
            (long long)json_integer_value(json_object_get(eff, "prompts")),
            (long long)json_integer_value(json_object_get(eff, "trajectories")));
}

static char *stats_text(const char *path, const json_t *doc)
{
    const json_t *all = json_object_get(doc, "overall"), *trace = json_object_get(doc, "trace");
    const json_t *prompts = json_object_get(doc, "prompts"), *drift = json_object_get(doc, "drift");
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort(); /* only when memory ran out, fatal as in util/alloc.h */
    fprintf(out, "trace %s: workload %s, %lld trajectories in %lld steps%s\n", path,
            json_string_value(json_object_get(trace, "workload")),
            (long long)json_integer_value(json_object_get(all, "trajectories")),
            (long long)json_integer_value(json_object_get(drift, "steps")),
            json_is_true(json_object_get(trace, "lossy")) ? " (lossy import: estimates)" : "");
    fprintf(out, "\nper trajectory             mean        p50        p90        p99        max\n");
    static const char *const metrics[] = {"turns", "tool_calls", "generated_tokens",
                                          "prompt_tokens", "tool_tokens"};
    for (int i = 0; i < 5; i++)
        dist_row(out, metrics[i], json_object_get(all, metrics[i]));
    const json_t *setup = json_object_get(all, "setup_us");
    if (json_integer_value(json_object_get(setup, "n")) > 0)
        dist_row(out, "setup_us", setup);
    fprintf(out, "per tool call\n");
    dist_row(out, "queue_us", json_object_get(all, "queue_us"));
    dist_row(out, "exec_us", json_object_get(all, "exec_us"));
    fprintf(out, "\n");
    mix_row(out, "finish", json_object_get(all, "finish"));
    mix_row(out, "tool status", json_object_get(all, "tool_status"));
    char s5[16], s10[16];
    fprintf(out,
            "tail: the longest 5%% of trajectories hold %s of generated tokens, the longest "
            "10%% %s\n",
            share(s5, sizeof s5, all, "longest_5pct_token_share"),
            share(s10, sizeof s10, all, "longest_10pct_token_share"));
    fprintf(out,
            "prompts: %lld distinct, %lld seen in more than one step, %lld in more than one "
            "epoch\n",
            (long long)json_integer_value(json_object_get(prompts, "distinct")),
            (long long)json_integer_value(json_object_get(prompts, "in_multiple_steps")),
            (long long)json_integer_value(json_object_get(prompts, "in_multiple_epochs")));
    const json_t *slope = json_object_get(drift, "generated_tokens_per_step");
    if (json_is_number(slope))
        fprintf(out, "drift: %+.2f mean generated tokens per trajectory per step\n",
                json_number_value(slope));
    else
        fprintf(out, "drift: - (fewer than two steps)\n");
    signal_text(out, doc);
    fprintf(out, "\n%8s %12s %10s %14s %14s %10s\n", "step", "trajectories", "turns", "generated",
            "generated p90", "tool calls");
    size_t i;
    const json_t *b;
    json_array_foreach(json_object_get(doc, "steps"), i, b)
    {
        const json_t *gen = json_object_get(b, "generated_tokens");
        fprintf(out, "%8lld %12lld %10.2f %14.1f %14.1f %10.2f\n",
                (long long)json_integer_value(json_object_get(b, "step")),
                (long long)json_integer_value(json_object_get(b, "trajectories")),
                json_number_value(json_object_get(json_object_get(b, "turns"), "mean")),
                json_number_value(json_object_get(gen, "mean")),
                json_number_value(json_object_get(gen, "p90")),
                json_number_value(json_object_get(json_object_get(b, "tool_calls"), "mean")));
    }
    fclose(out);
    return text;
}

/* The default config, which stats' envelope names: stats takes no presets, so LIBRA_PRESETS is
 * not read (a broken one elsewhere must not fail it). */
static int default_config(const struct cli_common *cc, struct api_presets *p,
                          struct libra_config *cfg)
{
    struct libra_error err = {0};
    int rc = api_presets_builtin(p, &err);
    if (rc)
        return cli_report(rc, &err);
    return cli_common_resolve(cc, NULL, p, NULL, 0, NULL, NULL, cfg);
}

static int stats(struct cli_common *cc, const char *path)
{
    struct api_presets p = {0};
    struct libra_config cfg;
    struct trace_stats *s = trace_stats_new();
    json_t *hdr = NULL;
    atomic_llong read = 0;
    struct cli_progress *line =
        cli_progress_start("trace stats", read_progress, &read, cc->progress);
    int rc = read_stats(path, s, &hdr, &read);
    cli_progress_stop(line);
    if (rc == 0)
        rc = default_config(cc, &p, &cfg);
    if (rc == 0) {
        json_t *doc = spec_config_envelope(STATS_SCHEMA, &cfg);
        /* no randomness is involved: the seed reported is the generator's, if any */
        json_t *seed = json_object_get(hdr, "seed");
        json_object_set(doc, "seed", seed ? seed : json_null());
        json_object_del(hdr, "seed");
        json_object_set(doc, "trace", hdr);
        json_t *body = trace_stats_json(s);
        json_object_update_missing(doc, body);
        json_decref(body);
        if (cc->json) {
            rc = cli_emit_json(cc, doc);
        } else {
            char *text = stats_text(path, doc);
            rc = cli_write_output(cc->output, text);
            free(text);
        }
        json_decref(doc);
    }
    json_decref(hdr);
    trace_stats_free(s);
    api_presets_free(&p);
    return rc;
}

/* ---- import ------------------------------------------------------------------------------ */

struct import_flags {
    struct trace_import_options o;
    bool have_format;
};

/* An input file: an operand, or a file of the verl dump directory an operand names. */
struct input {
    char *path;
    const char *arg; /* the operand it came from (path itself, or its dump directory) */
};

typedef VEC(struct input) input_vec;

/* scandir filter: a verl dump file, named {step}.jsonl. */
static int is_step_file(const struct dirent *e)
{
    size_t n;
    return trace_verl_file_step(e->d_name, &n) != NULL;
}

/* Orders the steps of two dump file names; 0 when they are the same step. */
static int step_order(const char *a, const char *b)
{
    size_t m, n;
    const char *x = trace_verl_file_step(a, &m), *y = trace_verl_file_step(b, &n);
    return m != n ? (m > n) - (m < n) : memcmp(x, y, m);
}

/* scandir order: by step, then by name, so that two files of one step (which add_dump_dir
 * refuses) are named in an order that does not depend on the filesystem. */
static int by_step(const struct dirent **a, const struct dirent **b)
{
    int c = step_order((*a)->d_name, (*b)->d_name);
    return c ? c : strcmp((*a)->d_name, (*b)->d_name);
}

/* Refuses two dump files of one step ("1.jsonl", "01.jsonl"): which comes first would be a
 * guess. names are in by_step order. Returns 0 or LIBRA_EXIT_USAGE. */
static int check_steps(const char *dir, struct dirent **names, int n)
{
    for (int i = 1; i < n; i++) {
        if (step_order(names[i - 1]->d_name, names[i]->d_name) == 0) {
            size_t len;
            const char *step = trace_verl_file_step(names[i]->d_name, &len);
            cli_errorf("%s: '%s' and '%s' are both step %.*s (one file per step)", dir,
                       names[i - 1]->d_name, names[i]->d_name, (int)len, step);
            return LIBRA_EXIT_USAGE;
        }
    }
    return 0;
}

/* Adds the verl dump files of directory dir ({step}.jsonl) in step order. */
static int add_dump_dir(input_vec *in, const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, is_step_file, by_step);
    if (n < 0) {
        cli_errorf("cannot read '%s': %s", dir, strerror(errno));
        return LIBRA_EXIT_IO;
    }
    int rc = check_steps(dir, names, n);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
        char *path = xmalloc(len);
        snprintf(path, len, "%s/%s", dir, names[i]->d_name);
        vec_push(in, ((struct input){path, dir}));
        free(names[i]);
    }
    free(names);
    if (rc == 0 && n == 0) {
        cli_errorf("%s: no verl dump files ({step}.jsonl) in the directory", dir);
        rc = LIBRA_EXIT_USAGE;
    }
    return rc;
}

/* How an error names input x: "input 'P'", or "'P' of input 'DIR'" for a dump directory's. */
static const char *input_name(const struct input *x, char *buf, size_t size)
{
    if (x->path == x->arg || strcmp(x->path, x->arg) == 0)
        snprintf(buf, size, "input '%s'", x->path);
    else
        snprintf(buf, size, "'%s' of input '%s'", x->path, x->arg);
    return buf;
}

/* Refuses a regular file given again (by device and inode: "x", "./x", a link to x; a verl
 * dump directory and a file of it too), naming the operand that brought it first: its
 * trajectories would be imported twice. */
static int check_not_again(const struct cli_command *cmd, const input_vec *in)
{
    char name[4200];
    for (size_t i = 1; i < in->n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(in->v[i].path, "-") != 0 && strcmp(in->v[j].path, "-") != 0 &&
                cli_same_regular_file(in->v[j].path, in->v[i].path))
                return cli_usage_error(cmd,
                                       "%s is the file of input '%s' again: its trajectories "
                                       "would be imported twice",
                                       input_name(&in->v[i], name, sizeof name), in->v[j].arg);
    return 0;
}

/* Refuses -o naming a file of a dump directory (the operands themselves are checked with every
 * command's): writing it would replace the input. */
static int check_output_not_input(const struct cli_common *cc, const input_vec *in)
{
    for (size_t i = 0; cc->output && i < in->n; i++)
        if (in->v[i].path != in->v[i].arg && cli_same_regular_file(cc->output, in->v[i].path))
            return cli_usage_error(cc->cmd,
                                   "-o '%s' names the file '%s' of input '%s': writing it would "
                                   "replace the input",
                                   cc->output, in->v[i].path, in->v[i].arg);
    return 0;
}

/* The input files: the operands, a verl dump directory expanded. */
static int input_paths(const struct cli_common *cc, const struct import_flags *f, int argc,
                       char **argv, input_vec *in)
{
    for (int i = 0; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            if (f->o.format != TRACE_IMPORT_VERL) { /* unreadable as a file: an I/O error */
                cli_errorf("cannot read '%s': %s (only --from verl reads a dump directory)",
                           argv[i], error_strerror(EISDIR));
                return LIBRA_EXIT_IO;
            }
            int rc = add_dump_dir(in, argv[i]);
            if (rc)
                return rc;
        } else {
            char *path = xstrdup(argv[i]);
            vec_push(in, ((struct input){path, path}));
        }
    }
    int rc = check_not_again(cc->cmd, in);
    return rc ? rc : check_output_not_input(cc, in);
}

/* Whether --from's files are documents read whole (tau-bench, SWE-agent), which hold at most
 * API_MAX_FILE_BYTES, rather than read a line of at most TRACE_MAX_LINE_BYTES at a time. */
static bool reads_whole(const struct import_flags *f)
{
    return f->o.format == TRACE_IMPORT_TAU_BENCH || f->o.format == TRACE_IMPORT_SWE_AGENT;
}

/* The size of path when it is a regular file (standard input too), else -1: a pipe or a
 * device has none. */
static off_t regular_size(const char *path)
{
    struct stat st;
    int rc = strcmp(path, "-") == 0 ? fstat(0, &st) : stat(path, &st);
    return rc == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
}

/* An input's name in errors: standard input's as the reader names it. */
static const char *error_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

static int larger_than_whole(const char *path, struct libra_error *err)
{
    return error_set(err, error_name(path), 0, 0,
                     "larger than %zu bytes, the most a file read whole may hold",
                     API_MAX_FILE_BYTES);
}

/*
 * The longest next line of a document read whole, used bytes of it read (newlines included):
 * what the file may still hold. A stream's stops a byte short, since a line of all that is left
 * would end past the limit unless the stream ends there, and reading on to tell would grow the
 * reader's buffer (doubled when full) to twice the limit: a stream that ends exactly at the
 * limit without a newline is refused too. A regular file's size is known to be within it.
 */
static size_t whole_line_max(bool sized, size_t used)
{
    size_t left = used < API_MAX_FILE_BYTES ? API_MAX_FILE_BYTES - used : 0;
    return sized || left == 0 ? left : left - 1;
}

/* Whether each trajectory of the format is one input line, which its errors can name. */
static bool line_per_traj(const struct import_flags *f)
{
    return f->o.format == TRACE_IMPORT_VERL || f->o.format == TRACE_IMPORT_OPENAI_CHAT;
}

/* Feeds the lines of r through the importer into held; a document read whole stops at
 * API_MAX_FILE_BYTES, a regular file's before it is read. */
static int import_lines(struct trace_importer *im, struct trace_groups *held,
                        struct trace_reader *r, const char *path, const struct import_flags *f,
                        struct libra_error *err)
{
    bool whole = reads_whole(f);
    off_t size = whole ? regular_size(path) : -1;
    if (size > (off_t)API_MAX_FILE_BYTES)
        return larger_than_whole(path, err);
    const char *line;
    size_t len, used = 0;
    const struct trace_traj *t;
    for (;;) {
        size_t max = whole ? whole_line_max(size >= 0, used) : TRACE_MAX_LINE_BYTES;
        int rc = trace_reader_text_line(r, max, &line, &len, err);
        if (whole && (rc == LIBRA_EINVAL || (rc == 1 && used >= API_MAX_FILE_BYTES)))
            return larger_than_whole(path, err); /* its only EINVAL: a line past max */
        if (rc != 1)
            return rc;
        used += len + 1;
        if ((rc = trace_importer_line(im, line, len, &t, err)) < 0)
            return rc;
        if (rc == 1) {
            trace_groups_source(held, error_name(path),
                                line_per_traj(f) ? trace_reader_line(r) : 0);
            trace_groups_add(held, t);
        }
    }
}

/* Feeds one input file through the importer into held. */
static int import_file(struct trace_importer *im, struct trace_groups *held, const char *path,
                       const struct import_flags *f, struct libra_error *err)
{
    struct trace_reader *r;
    if (trace_reader_open(&r, path, err))
        return LIBRA_EIO;
    trace_importer_begin(im, path);
    const struct trace_traj *t;
    int rc = import_lines(im, held, r, path, f, err);
    trace_groups_source(held, error_name(path), 0); /* a document's records: no line */
    while (rc >= 0 && (rc = trace_importer_end(im, &t, err)) == 1)
        trace_groups_add(held, t);
    trace_reader_close(r);
    return rc < 0 ? rc : 0;
}

static int run_import(struct cli_common *cc, const struct import_flags *f, const input_vec *in)
{
    struct trace_importer *im;
    struct trace_writer *w = NULL;
    struct libra_error err = {0};
    int rc = trace_importer_new(&im, &f->o, &err);
    if (rc) { /* a flag's bad value: the message names the flag */
        cli_errorf("%s: %s", cc->cmd->name, err.msg);
        return LIBRA_EXIT_USAGE;
    }
    const char *out = cc->output ? cc->output : "-";
    rc = cli_trace_open(&w, out, trace_importer_header(im), &err);
    /* held to the end: the logs' order need not keep a GRPO group's records together */
    struct trace_groups *held = trace_groups_new();
    for (size_t i = 0; rc == 0 && i < in->n; i++)
        rc = import_file(im, held, in->v[i].path, f, &err);
    if (rc == 0 && f->o.group_size) /* readers take runs of group_size records as groups */
        rc = trace_groups_check(held, f->o.group_size, &err);
    const struct trace_traj *t;
    size_t written = 0;
    while (rc == 0 && (t = trace_groups_get(held, written)) && !(rc = trace_writer_put(w, t, &err)))
        written++;
    trace_groups_free(held);
    if (rc == 0 && written == 0) { /* a header alone is a trace no command can run */
        error_set(&err, NULL, 0, 0, "%s%s: nothing to import: no trajectory in the input",
                  in->v[0].path, in->n > 1 ? " ..." : "");
        rc = LIBRA_EINVAL;
    }
    rc = cli_trace_close(w, rc, &err);
    trace_importer_free(im);
    return rc ? report(rc, &err) : 0;
}

#define FORMATS "jsonl, csv, verl, tau-bench, swe-agent or openai-chat"

/* --from and friends (cli_common_getopt has already handled -o and --help). */
static int import_flag(struct cli_common *cc, struct import_flags *f, int c, const char *arg)
{
    switch (c) {
    case 'f':
        for (int i = 0; i <= TRACE_IMPORT_OPENAI_CHAT; i++) {
            if (strcmp(arg, trace_import_format_name((enum trace_import_format)i)) == 0) {
                f->o.format = (enum trace_import_format)i;
                f->have_format = true;
                return 0;
            }
        }
        cli_errorf("%s: --from: expected " FORMATS ", not '%s'", cc->cmd->name, arg);
        return LIBRA_EXIT_USAGE;
    case 'x':
        f->o.failure_text = arg;
        return 0;
    case 't':
        f->o.timeout_text = arg;
        return 0;
    case 'e':
        f->o.exit_code_pattern = arg;
        return 0;
    case 'w':
    case 'm': /* checked here, where the error can name the flag */
        if (!ujson_utf8_valid(arg))
            return cli_value_error(cc->cmd, c == 'w' ? "--workload" : "--model",
                                   "must be valid UTF-8");
        if (trace_name_has_control(arg))
            return cli_value_error(cc->cmd, c == 'w' ? "--workload" : "--model", TRACE_NO_CONTROL);
        if (c == 'w')
            f->o.workload = arg;
        else
            f->o.model = arg;
        return 0;
    case 's': { /* rl.samples' range: sim replays a trace only with rl.samples its group size */
        const struct spec_field *samples = spec_config_field("rl.samples");
        return cli_parse_int(cc->cmd, "--samples", arg, (int64_t)samples->min,
                             (int64_t)samples->max, &f->o.group_size);
    }
    default: /* 'c' */
        return cli_parse_double(cc->cmd, "--chars-per-token", arg, 0.01, 1000,
                                &f->o.chars_per_token);
    }
}

static int import(const struct cli_command *cmd, int argc, char **argv)
{
    static const struct option own[] = {
        {"from", required_argument, NULL, 'f'},
        {"workload", required_argument, NULL, 'w'},
        {"model", required_argument, NULL, 'm'},
        {"samples", required_argument, NULL, 's'},
        {"chars-per-token", required_argument, NULL, 'c'},
        {"failure-text", required_argument, NULL, 'x'},
        {"timeout-text", required_argument, NULL, 't'},
        {"exit-code-pattern", required_argument, NULL, 'e'},
        {0},
    };
    struct cli_common cc;
    struct import_flags f = {0};
    input_vec in = {0};
    cli_common_init(&cc, cmd, CLI_FLAGS_OUTPUT, "", own);
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            fputs(help, stdout);
            goto out;
        }
        rc = c == '?' ? LIBRA_EXIT_USAGE : import_flag(&cc, &f, c, optarg);
    }
    if (rc == 0 && !f.have_format)
        rc = cli_usage_error(cmd, "import needs --from " FORMATS);
    if (rc == 0 && optind >= argc)
        rc = cli_usage_error(cmd, "import needs at least one input file");
    if (rc == 0)
        rc = input_paths(&cc, &f, argc - optind, argv + optind, &in);
    if (rc == 0)
        rc = run_import(&cc, &f, &in);
out:
    for (size_t i = 0; i < in.n; i++)
        free(in.v[i].path);
    vec_free(&in);
    cli_common_free(&cc);
    return rc;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

/*
 * The flag loop of validate and stats: --help, --all (validate), the common flags of groups,
 * then exactly one FILE. Returns -1 to go on, else the exit code.
 */
static int one_file_flags(struct cli_common *cc, int argc, char **argv, bool *all)
{
    int c;
    while ((c = cli_common_getopt(cc, argc, argv)) != -1) {
        if (c == 'h') {
            fputs(help, stdout);
            return LIBRA_EXIT_OK;
        }
        if (c != 'a')
            return LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
        *all = true;
    }
    if (argc - optind != 1)
        return cli_usage_error(cc->cmd, "%s needs one trace FILE", argv[0]);
    return -1;
}

static int validate_cmd(const struct cli_command *cmd, int argc, char **argv)
{
    static const struct option own[] = {{"all", no_argument, NULL, 'a'}, {0}};
    struct cli_common cc;
    bool all = false;
    cli_common_init(&cc, cmd, CLI_FLAGS_PROGRESS, "", own);
    int rc = one_file_flags(&cc, argc, argv, &all);
    if (rc < 0) {
        atomic_llong read = 0;
        struct cli_progress *line =
            cli_progress_start("trace validate", read_progress, &read, cc.progress);
        rc = validate(argv[optind], all, &read);
        cli_progress_stop(line);
    }
    cli_common_free(&cc);
    return rc;
}

static int stats_cmd(const struct cli_command *cmd, int argc, char **argv)
{
    struct cli_common cc;
    bool all = false;
    cli_common_init(&cc, cmd, CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT | CLI_FLAGS_PROGRESS, "", NULL);
    int rc = one_file_flags(&cc, argc, argv, &all);
    if (rc < 0)
        rc = stats(&cc, argv[optind]);
    cli_common_free(&cc);
    return rc;
}

/* Each subcommand with its own usage line, the one its usage errors print. */
static const struct {
    const char *name;
    const char *usage;
    int (*run)(const struct cli_command *cmd, int argc, char **argv);
    const char *help; /* its own --help, where `libra trace --help` does not list its flags */
} subcommands[] = {
    {"validate", "libra trace validate FILE [--all] [--progress]", validate_cmd, NULL},
    {"stats", "libra trace stats FILE [--json] [-o FILE] [--progress]", stats_cmd, NULL},
    {"import", "libra trace import --from FORMAT IN... [-o FILE] [flags]", import, NULL},
    {"gen", "libra trace gen WORKLOAD [flags]", cmd_trace_gen, "libra trace gen"},
};

int cmd_trace(int argc, char **argv)
{
    const struct cli_command *cmd = cli_find("trace");
    if (argc < 2 || !*argv[1])
        return cli_usage_error(cmd, "%s subcommand: expected validate, stats, import or gen",
                               argc < 2 ? "no" : "an empty");
    const char *name = argv[1];
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        if (strcmp(subcommands[i].name, name) == 0) {
            struct cli_command sub = *cmd;
            sub.usage = subcommands[i].usage;
            sub.help = subcommands[i].help;
            return subcommands[i].run(&sub, argc - 1, argv + 1);
        }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        fputs(help, stdout);
        return LIBRA_EXIT_OK;
    }
    return cli_usage_error(cmd, "expected validate, stats, import or gen, not '%s'", name);
}
