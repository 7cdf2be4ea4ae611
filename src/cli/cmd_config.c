/*
 * `libra config show|check|doc`: the experiment config as libra sees it. show prints the
 * effective config after every layer (defaults, presets, file, flags) so a user can see what a
 * run will use; check validates a file for scripts and editors (exit 1 when invalid); doc
 * prints the reference generated from the schema table (committed as docs/config.md).
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "sim/sim.h"

#define SCHEMA SPEC_CONFIG_SCHEMA

static const char help[] =
    "usage: libra config show [FILE] [flags]\n"
    "       libra config check FILE [flags]\n"
    "       libra config doc [-o FILE]\n"
    "\n"
    "show prints the effective config as one JSON document: the defaults, overridden by the\n"
    "presets it names, by FILE, then by the flags. Its output is itself a valid config file.\n"
    "check validates FILE and prints \"ok\" (exit 0), or the first error as FILE:LINE:COL\n"
    "(exit 1). doc prints the markdown reference of every key (docs/config.md).\n"
    "\n"
    "keys (--set KEY=VALUE; in a file, {\"SECTION\": {\"KEY\": VALUE}}):\n";

static void print_help(const struct cli_common *cc)
{
    char *keys = spec_config_keys_text();
    fputs(help, stdout);
    cli_common_help(cc, keys, stdout);
    free(keys);
}

/* Runs the flag loop; returns -1 to go on, else the exit code (--help or a usage error). */
static int parse_flags(struct cli_common *cc, int argc, char **argv, int max_args)
{
    int c;
    while ((c = cli_common_getopt(cc, argc, argv)) != -1) {
        if (c != 'h')
            return LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
        print_help(cc);
        return LIBRA_EXIT_OK;
    }
    if (argc - optind > max_args)
        return cli_usage_error(cc->cmd, "unexpected argument '%s'", argv[optind + max_args]);
    return -1;
}

/* The trace cfg names (workload.trace), read as libra plan and libra sim read it, and what they
 * refuse of it beside the config (its groups against rl.samples, fewer trajectories than a
 * group). Returns 0, the exit code of a trace that cannot be read, or -1 after the error. */
static int trace_refused(const struct api_presets *p, const struct libra_config *cfg)
{
    if (!cfg->workload.trace[0])
        return 0;
    struct api_traces ts = {0};
    struct sim_input in;
    struct libra_error err = {0};
    int rc = api_sim_input(p, &ts, cfg, false, &in, &err);
    if (rc == 0)
        rc = sim_input_check(&in, &err);
    api_traces_free(&ts);
    if (rc == 0)
        return 0;
    int code = cli_report(rc, &err);
    return rc == LIBRA_EIO ? code : -1;
}

/* Prints a refusal msg, "KEY: why", where its value came from: "FLAG: why" for the flag that
 * set KEY (as the key checks name a flag's value), else "LABEL: KEY: why"; then suffix. */
static void report_refusal(const struct cli_common *cc, const char *msg, const char *label,
                           const char *suffix)
{
    char key[64];
    size_t len = strcspn(msg, ":");
    snprintf(key, sizeof key, "%.*s", (int)len, msg);
    const char *flag = cli_common_flag(cc, key);
    if (flag && msg[len])
        cli_errorf("%s%s%s", flag, msg + len, suffix);
    else
        cli_errorf("%s: %s%s", label, msg, suffix);
}

/* What the commands refuse of a config beyond its keys' own checks: libra sim's rules before a
 * run (its trace's too), and the update rules libra load (and plan, route eval with plan.mode
 * async) refuse. Prints the error against the flag that set the key at fault, else label (the
 * file, or "config" for flags alone). Returns 0 when cfg passes, the exit code of a trace that
 * cannot be read, or -1. */
static int refused(const struct cli_common *cc, const struct api_presets *p,
                   const struct libra_config *cfg, const char *label)
{
    struct libra_error err = {0};
    if (sim_config_check(cfg, &err) != 0) {
        report_refusal(cc, err.msg, label, "");
        return -1;
    }
    /* libra load (and libra plan and route eval with plan.mode async) run the job
     * asynchronously whatever sim.modes: update rules that only a colocated or rollout run
     * would take are refused by them */
    if (spec_rl_async_check(&cfg->rl, "async", &err) != 0) {
        report_refusal(
            cc, err.msg, label,
            " (libra load refuses it, as libra plan and route eval do with plan.mode async)");
        return -1;
    }
    return trace_refused(p, cfg);
}

static int show(struct cli_common *cc, const char *file)
{
    struct api_presets p = {0};
    struct libra_config cfg;
    int rc = cli_common_load(cc, file, &p, &cfg);
    int why = rc == 0 ? refused(cc, &p, &cfg, file ? file : "config") : 0;
    if (why)
        rc = why > 0 ? why : LIBRA_EXIT_USAGE; /* its output would be a config they refuse */
    if (rc == 0) {
        json_t *doc = spec_config_envelope(SCHEMA, &cfg);
        json_t *sections = spec_config_to_json(&cfg);
        json_object_update(doc, sections);
        rc = cli_emit_json(cc, doc);
        json_decref(sections);
        json_decref(doc);
    }
    api_presets_free(&p);
    return rc;
}

static int check(struct cli_common *cc, const char *file)
{
    if (!file)
        return cli_usage_error(cc->cmd, "check needs a FILE");
    struct api_presets p = {0};
    struct libra_config cfg;
    int rc = cli_common_load(cc, file, &p, &cfg);
    int why = rc == 0 ? refused(cc, &p, &cfg, file) : 0;
    api_presets_free(&p);
    if (rc == LIBRA_EXIT_USAGE || why < 0)
        return LIBRA_EXIT_NEGATIVE; /* the input is invalid: check's negative result */
    if (why)
        return why;
    if (rc == 0)
        rc = cli_write_output(NULL, "ok\n");
    return rc;
}

/* file is always NULL: doc takes no positional argument. */
static int doc(struct cli_common *cc, const char *file)
{
    char *text = spec_config_doc_markdown();
    int rc = cli_write_output(cc->output, text);
    free(text);
    return rc;
}

static const struct subcommand {
    const char *name;
    unsigned groups; /* common flags it takes */
    int max_args;    /* positional arguments (the config FILE) */
    int (*run)(struct cli_common *cc, const char *file);
} subcommands[] = {
    {"show", CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT, 1, show},
    {"check", CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS, 1, check},
    {"doc", CLI_FLAGS_OUTPUT, 0, doc},
};

int cmd_config(int argc, char **argv)
{
    const struct cli_command *cmd = cli_find("config");
    const char *name = argc > 1 ? argv[1] : "";
    const struct subcommand *sub = NULL;
    for (size_t i = 0; i < sizeof subcommands / sizeof *subcommands; i++)
        if (strcmp(subcommands[i].name, name) == 0)
            sub = &subcommands[i];
    struct cli_common cc;
    cli_common_init(&cc, cmd, sub ? sub->groups : subcommands[0].groups, "", NULL);
    int rc;
    if (!sub && (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)) {
        print_help(&cc);
        rc = LIBRA_EXIT_OK;
    } else if (!sub && !*name) {
        rc = cli_usage_error(cmd, "missing subcommand: show, check or doc");
    } else if (!sub) {
        rc = cli_usage_error(cmd, "expected show, check or doc, not '%s'", name);
    } else if ((rc = parse_flags(&cc, argc - 1, argv + 1, sub->max_args)) < 0) {
        rc = sub->run(&cc, optind < argc - 1 ? argv[1 + optind] : NULL);
    }
    cli_common_free(&cc);
    return rc;
}
