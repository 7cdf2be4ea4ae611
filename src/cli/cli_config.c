/*
 * Common flags and config loading for every command; see cli_config.h.
 *
 * The experiment flags are generated from the schema rows that name one, so adding a common
 * flag is setting the row's flag column in spec/config.c; help text and validation follow.
 */
#include "cli/cli_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/workers.h"

enum {
    OPT_SET = CLI_OPT_BASE,
    OPT_PRESETS,
    OPT_JSON,
    OPT_JSONL,
    OPT_JOBS,
    OPT_PROGRESS,
    OPT_FIELD = CLI_OPT_BASE + 0x100 /* + index of a schema row with a flag */
};

static void add_option(struct cli_common *cc, size_t *n, const char *name, int has_arg, int val)
{
    cc->options[(*n)++] = (struct option){name, has_arg, NULL, val};
}

/* Whether the command has an option of its own named name (serve's --mode is not plan.mode). */
static bool own_option(const struct cli_common *cc, const char *name)
{
    for (size_t i = 0; i < cc->n_own; i++)
        if (strcmp(cc->options[i].name, name) == 0)
            return true;
    return false;
}

void cli_common_init(struct cli_common *cc, const struct cli_command *cmd, unsigned groups,
                     const char *shortopts, const struct option *own)
{
    memset(cc, 0, sizeof *cc);
    cc->cmd = cmd;
    cc->groups = groups;
    cc->jobs = workers_cpus();
    size_t n_fields, n_own = 0, n = 0;
    const struct spec_field *fields = spec_config_fields(&n_fields);
    while (own && own[n_own].name)
        n_own++;
    cc->options = xcalloc(n_own + n_fields + 8, sizeof *cc->options);
    for (size_t i = 0; i < n_own; i++)
        cc->options[n++] = own[i];
    cc->n_own = n_own;
    add_option(cc, &n, "help", no_argument, 'h');
    if (groups & CLI_FLAGS_CONFIG) {
        add_option(cc, &n, "set", required_argument, OPT_SET);
        for (size_t i = 0; i < n_fields; i++)
            if (fields[i].flag && !own_option(cc, fields[i].flag))
                add_option(cc, &n, fields[i].flag, required_argument, OPT_FIELD + (int)i);
    }
    if (groups & CLI_FLAGS_PRESETS)
        add_option(cc, &n, "presets", required_argument, OPT_PRESETS);
    if (groups & CLI_FLAGS_JSON)
        add_option(cc, &n, "json", no_argument, OPT_JSON);
    if (groups & CLI_FLAGS_JSONL)
        add_option(cc, &n, "jsonl", no_argument, OPT_JSONL);
    if (groups & CLI_FLAGS_OUTPUT)
        add_option(cc, &n, "output", required_argument, 'o');
    if (groups & CLI_FLAGS_JOBS)
        add_option(cc, &n, "jobs", required_argument, OPT_JOBS);
    if (groups & CLI_FLAGS_PROGRESS)
        add_option(cc, &n, "progress", no_argument, OPT_PROGRESS);
    snprintf(cc->shortopts, sizeof cc->shortopts, "%sh%s", shortopts ? shortopts : "",
             groups & CLI_FLAGS_OUTPUT ? "o:" : "");
    optind = 0; /* GNU getopt: full reinitialisation */
}

/* Records KEY=VALUE; label names the flag in error messages ("--gpus", "--set rl.steps"). */
static void add_override(struct cli_common *cc, const char *key, size_t key_len, const char *value,
                         const char *label)
{
    cc->overrides = xreallocarray(cc->overrides, cc->n_overrides + 1, sizeof *cc->overrides);
    struct spec_config_override *o = &cc->overrides[cc->n_overrides++];
    o->key = xstrndup(key, key_len);
    o->value = xstrdup(value);
    o->label = xstrdup(label);
}

const char *cli_common_flag(const struct cli_common *cc, const char *key)
{
    const char *label = NULL;
    for (size_t i = 0; i < cc->n_overrides; i++)
        if (strcmp(cc->overrides[i].key, key) == 0)
            label = cc->overrides[i].label;
    return label;
}

void cli_common_set(struct cli_common *cc, const char *key, const char *value, const char *label)
{
    add_override(cc, key, strlen(key), value, label);
}

/* Consumes one common flag; returns 0, or '?' after a usage error. */
static int common_option(struct cli_common *cc, int c, const char *arg)
{
    if (c >= OPT_FIELD) {
        size_t n;
        const struct spec_field *f = &spec_config_fields(&n)[c - OPT_FIELD];
        char label[80];
        snprintf(label, sizeof label, "--%s", f->flag);
        add_override(cc, f->key, strlen(f->key), arg, label);
        return 0;
    }
    switch (c) {
    case OPT_SET: {
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
            cli_usage_error(cc->cmd, "--set needs KEY=VALUE, not '%s'", arg);
            return '?';
        }
        char label[160];
        snprintf(label, sizeof label, "--set %.*s", (int)(eq - arg), arg);
        add_override(cc, arg, (size_t)(eq - arg), eq + 1, label);
        return 0;
    }
    case OPT_PRESETS:
        cc->preset_files =
            xreallocarray(cc->preset_files, cc->n_preset_files + 1, sizeof *cc->preset_files);
        cc->preset_files[cc->n_preset_files++] = arg;
        return 0;
    case OPT_JSON:
        cc->json = true;
        break;
    case OPT_JSONL:
        cc->jsonl = true;
        break;
    case OPT_JOBS: {
        int64_t jobs;
        if (cli_parse_int(cc->cmd, "--jobs", arg, 1, 1024, &jobs) != 0)
            return '?';
        cc->jobs = (int)jobs;
        return 0;
    }
    case OPT_PROGRESS:
        cc->progress = true;
        return 0;
    }
    if (cc->json && cc->jsonl) {
        cli_usage_error(cc->cmd, "--json and --jsonl exclude each other");
        return '?';
    }
    return 0;
}

/* Flags that add one more of something each time they are given (docs/cli.md "Flags"). */
static const char *const repeatable[] = {"set",          "presets", "sweep", "engine",
                                         "pool-replica", "fail",    "stall"};

/* The long name of option c, or NULL when it has none. */
static const char *option_name(const struct cli_common *cc, int c)
{
    for (const struct option *o = cc->options; o->name; o++)
        if (o->val == c)
            return o->name;
    return NULL;
}

/* The flags whose empty value means something: an empty list of tool-status rules
 * (docs/trace-format.md, "Tool-status rules"). */
static const char *const may_be_empty[] = {"timeout-text", "exit-code-pattern", "failure-text"};

/* The flag of option c as a message names it: both spellings where it has two (-o/--output),
 * since the message cannot tell which one was typed. */
static const char *flag_label(const struct cli_common *cc, int c, char *buf, size_t size)
{
    const char *name = option_name(cc, c);
    bool short_form = c > 0 && c < 128 && isalpha(c) && strchr(cc->shortopts, c);
    if (name && short_form)
        snprintf(buf, size, "-%c/--%s", c, name);
    else if (name)
        snprintf(buf, size, "--%s", name);
    else
        snprintf(buf, size, "-%c", c);
    return buf;
}

/* Refuses an empty value where it means nothing (an empty -o is no file to write). */
static int not_empty(struct cli_common *cc, int c, const char *value)
{
    const char *name = option_name(cc, c);
    for (size_t i = 0; name && i < sizeof may_be_empty / sizeof *may_be_empty; i++)
        if (strcmp(name, may_be_empty[i]) == 0)
            return 0;
    if (*value)
        return 0;
    char label[64];
    cli_usage_error(cc->cmd, "%s: an empty value", flag_label(cc, c, label, sizeof label));
    return '?';
}

/*
 * Refuses a flag that takes one value when it was given before: taking the last would let a
 * script's default and an override both look effective (a switch may be repeated: it says one
 * thing). Returns 0, or '?' after the usage error.
 */
static int given_once(struct cli_common *cc, int c)
{
    const char *name = option_name(cc, c);
    for (size_t i = 0; name && i < sizeof repeatable / sizeof *repeatable; i++)
        if (strcmp(name, repeatable[i]) == 0)
            return 0;
    for (size_t i = 0; i < cc->n_given; i++)
        if (cc->given[i] == c) {
            char label[64];
            cli_usage_error(cc->cmd, "%s given twice: it takes one value",
                            flag_label(cc, c, label, sizeof label));
            return '?';
        }
    cc->given = xreallocarray(cc->given, cc->n_given + 1, sizeof *cc->given);
    cc->given[cc->n_given++] = c;
    return 0;
}

/* Refuses a key that two different flags set (--gpus 8 --set cluster.gpus=16): the one given
 * last would win unseen. --set given twice for a key takes its last value, as documented. */
static int keys_set_once(struct cli_common *cc)
{
    for (size_t i = 0; i < cc->n_overrides; i++)
        for (size_t j = 0; j < i; j++) {
            const struct spec_config_override *a = &cc->overrides[j], *b = &cc->overrides[i];
            bool both_set =
                strncmp(a->label, "--set ", 6) == 0 && strncmp(b->label, "--set ", 6) == 0;
            if (strcmp(a->key, b->key) == 0 && !both_set) {
                cli_usage_error(cc->cmd, "%s and %s both set %s", a->label, b->label, a->key);
                return '?';
            }
        }
    return -1;
}

/* Refuses an output (-o, --perfetto, ...) naming path, a file of LIBRA_PRESETS: writing it would
 * replace an input. Returns 0, or '?' after the usage error. */
static int output_not_env_preset(void *ctx, const char *path)
{
    const struct cli_common *cc = ctx;
    const char *out, *flag;
    if (!cli_output_naming(path, &out, &flag))
        return 0;
    cli_usage_error(cc->cmd,
                    "%s '%s' names the LIBRA_PRESETS file '%s': writing it would replace the input",
                    flag, out, path);
    return '?';
}

int cli_common_getopt(struct cli_common *cc, int argc, char **argv)
{
    for (;;) {
        int c = cli_getopt(cc->cmd, argc, argv, cc->shortopts, cc->options);
        if (c == -1)
            return (cc->groups & CLI_FLAGS_PRESETS) &&
                           api_env_preset_files(output_not_env_preset, cc)
                       ? '?'
                       : keys_set_once(cc);
        if (c != -1 && c != '?' && optarg && (not_empty(cc, c, optarg) || given_once(cc, c)))
            return '?';
        if (c == 'o' && (cc->groups & CLI_FLAGS_OUTPUT)) {
            cc->output = optarg;
            continue;
        }
        if (c < CLI_OPT_BASE)
            return c;
        if (common_option(cc, c, optarg) != 0)
            return '?';
    }
}

/* The placeholder of a flag's value in help text. */
static const char *metavar(const struct spec_field *f)
{
    switch (f->type) {
    case SPEC_INT:
        return "N";
    case SPEC_DOUBLE:
        return "X";
    case SPEC_SET:
    case SPEC_LIST:
        return "A,B";
    default:
        return "NAME";
    }
}

void cli_common_help(const struct cli_common *cc, const char *text, FILE *out)
{
    fputs(text, out);
    size_t n;
    const struct spec_field *fields = spec_config_fields(&n);
    fprintf(out, "\ncommon flags:\n");
    if (cc->groups & CLI_FLAGS_CONFIG) {
        for (size_t i = 0; i < n; i++) {
            if (!fields[i].flag || own_option(cc, fields[i].flag) ||
                (cc->cmd->reads && !(fields[i].readers & cc->cmd->reads)))
                continue;
            char flag[64];
            snprintf(flag, sizeof flag, "--%s %s", fields[i].flag, metavar(&fields[i]));
            fprintf(out, "  %-20s %s: %s\n", flag, fields[i].key, fields[i].doc);
        }
        fprintf(out,
                "  %-20s set a config key this command reads (libra config --help lists them)\n",
                "--set KEY=VALUE");
    }
    if (cc->groups & CLI_FLAGS_PRESETS)
        fprintf(out, "  %-20s add presets from FILE (repeatable; also LIBRA_PRESETS=F1:F2)\n",
                "--presets FILE");
    if (cc->groups & CLI_FLAGS_JSON)
        fprintf(out, "  %-20s print one JSON document\n", "--json");
    if (cc->groups & CLI_FLAGS_JSONL)
        fprintf(out, "  %-20s print JSON Lines; the first line is a header\n", "--jsonl");
    if (cc->groups & CLI_FLAGS_OUTPUT)
        fprintf(out, "  %-20s %s\n", "-o, --output FILE",
                cc->output_doc ? cc->output_doc : "write to FILE instead of stdout");
    if (cc->groups & CLI_FLAGS_JOBS)
        fprintf(out,
                "  %-20s threads for independent runs (default: the machine's cores, %d);\n"
                "  %-20s results do not depend on it\n",
                "--jobs J", workers_cpus(), "");
    if (cc->groups & CLI_FLAGS_PROGRESS)
        fprintf(out,
                "  %-20s progress on stderr even when it is not a terminal (on a\n"
                "  %-20s terminal it is always shown)\n",
                "--progress", "");
    fprintf(out, "  %-20s print this help\n", "-h, --help");
}

void cli_common_free(struct cli_common *cc)
{
    for (size_t i = 0; i < cc->n_overrides; i++) {
        free((char *)cc->overrides[i].key);
        free((char *)cc->overrides[i].value);
        free((char *)cc->overrides[i].label);
    }
    free(cc->overrides);
    free(cc->preset_files);
    free(cc->options);
    free(cc->given);
    memset(cc, 0, sizeof *cc);
}

static bool is_stdin(const char *path)
{
    return path && strcmp(path, "-") == 0;
}

/* Whether the config's trace is standard input while the config or a --presets file is too
 * (the flag loop refuses '-' twice among the flags and operands, before a config names one). */
static bool stdin_twice(const struct cli_common *cc, const char *config_file, const char *trace)
{
    bool other = is_stdin(config_file);
    for (size_t i = 0; i < cc->n_preset_files; i++)
        other |= is_stdin(cc->preset_files[i]);
    return other && is_stdin(trace);
}

/* The trace cfg names where the command reads workload.trace, or NULL. */
static const char *trace_read(const struct cli_common *cc, const struct libra_config *cfg)
{
    const struct spec_field *f = spec_config_field("workload.trace");
    return cfg->workload.trace[0] && (f->readers & cc->cmd->reads) ? cfg->workload.trace : NULL;
}

/* The input a resolved config adds, its workload.trace (from the file, --trace or --set), under
 * the rules the flag loop applies to the flags' inputs: read from standard input once, and not
 * replaced by an output. Returns 0 or LIBRA_EXIT_USAGE after the usage error. */
static int trace_guard(const struct cli_common *cc, const char *config_file,
                       const struct libra_config *cfg)
{
    const char *trace = trace_read(cc, cfg), *out, *flag;
    if (!trace)
        return 0;
    if (stdin_twice(cc, config_file, trace))
        return cli_usage_error(cc->cmd, "workload.trace '-': standard input is read already, "
                                        "and can be read once");
    if (!is_stdin(trace) && cli_output_naming(trace, &out, &flag))
        return cli_usage_error(cc->cmd,
                               "%s '%s' names the workload.trace file '%s': writing it would "
                               "replace the input",
                               flag, out, trace);
    return 0;
}

int cli_common_load_doc(const struct cli_common *cc, const char *config_file, struct api_presets *p,
                        struct ujson_doc *config, struct spec_deferred *deferred,
                        struct libra_config *cfg)
{
    struct libra_error err = {0};
    memset(config, 0, sizeof *config);
    int rc = api_presets_load(p, cc->preset_files, cc->n_preset_files, &err);
    if (rc)
        return cli_report(rc, &err);
    if (config_file) {
        char *text;
        size_t len;
        rc = cli_read_file(config_file, &text, &len);
        if (rc)
            return rc;
        rc = ujson_doc_parse(config, config_file, text, len, &err);
        free(text);
        if (rc)
            return cli_report_error(&err);
    }
    return cli_common_resolve(cc, config, p, NULL, 0, NULL, deferred, cfg);
}

int cli_common_load(const struct cli_common *cc, const char *config_file, struct api_presets *p,
                    struct libra_config *cfg)
{
    struct ujson_doc config;
    int rc = cli_common_load_doc(cc, config_file, p, &config, NULL, cfg);
    ujson_doc_free(&config);
    return rc;
}

/* Whether err opens with the label of one of the n settings (it names them already). */
static bool names_one(const struct libra_error *err, const struct spec_config_override *o, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(o[i].label);
        if (strncmp(err->msg, o[i].label, len) == 0 && err->msg[len] == ':')
            return true;
    }
    return false;
}

int cli_common_resolve(const struct cli_common *cc, const struct ujson_doc *config,
                       const struct api_presets *p, const struct spec_config_override *extra,
                       size_t n_extra, const char *where, struct spec_deferred *deferred,
                       struct libra_config *cfg)
{
    struct libra_error err = {0};
    struct spec_config_override *flags = xmallocarray(cc->n_overrides + n_extra + 1, sizeof *flags);
    for (size_t i = 0; i < cc->n_overrides; i++)
        flags[i] = cc->overrides[i];
    for (size_t i = 0; i < n_extra; i++)
        flags[cc->n_overrides + i] = extra[i];
    const struct ujson_doc *file = config && config->root ? config : NULL;
    int rc = api_config_resolve(p, file, flags, cc->n_overrides + n_extra, cc->cmd->reads, deferred,
                                cfg, &err);
    free(flags);
    if (rc && where && *where && !names_one(&err, extra, n_extra))
        error_prefix(&err, where);
    return rc ? cli_report_error(&err) : trace_guard(cc, file ? file->name : NULL, cfg);
}

int cli_sim_input(const struct api_presets *p, struct api_traces *ts,
                  const struct libra_config *cfg, bool perfetto, struct sim_input *in)
{
    struct libra_error err = {0};
    int rc = api_sim_input(p, ts, cfg, perfetto, in, &err);
    return rc ? cli_report(rc, &err) : 0;
}

void cli_note_leftover_records(const char *cmd, const struct sim_input *in, int samples)
{
    size_t n = in->trace ? in->trace->n : 0; /* fewer than a group: an error of the run's */
    size_t left = samples > 0 && n >= (size_t)samples ? n % (size_t)samples : 0;
    if (left > 0)
        cli_errorf("%s: note: the trace's last %zu trajector%s fill%s no group of %d "
                   "(rl.samples): %s never played",
                   cmd, left, left == 1 ? "y" : "ies", left == 1 ? "s" : "", samples,
                   left == 1 ? "it is" : "they are");
}

int cli_emit_json(const struct cli_common *cc, const json_t *doc)
{
    char *text = api_json_text(doc);
    int rc = cli_write_output(cc->output, text);
    free(text);
    return rc;
}

int cli_move_costs(const struct api_presets *p, const struct libra_config *cfg,
                   struct cost_move_model *m, struct sched_costs *out)
{
    struct libra_error err = {0};
    int rc = api_move_costs(p, cfg, m, out, &err);
    return rc ? cli_report(rc, &err) : 0;
}

const char *cli_constant_source(const struct spec_hardware *h, double v, const char *built_in,
                                const char *calibrated, char buf[CLI_CONSTANT_SOURCE_MAX])
{
    if (v <= 0.0)
        return built_in;
    if (h->calibration[0])
        return calibrated;
    snprintf(buf, CLI_CONSTANT_SOURCE_MAX, "preset file %s", h->origin);
    return buf;
}
