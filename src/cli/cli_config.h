/*
 * The common flags (DESIGN.md "Common flags") and the effective config every command starts
 * from, in one place so that `--gpus` or `--presets` means the same thing in every command.
 *
 * A command names the groups of common flags it accepts, adds its own options, and loops on
 * cli_common_getopt, which consumes the common flags and returns the command's own ones:
 *
 *     struct cli_common cc;
 *     cli_common_init(&cc, cmd, CLI_FLAGS_CONFIG | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT, "", own);
 *     while ((c = cli_common_getopt(&cc, argc, argv)) != -1)
 *         switch (c) { case 'h': ...help...; case '?': ...exit 2...; own flags... }
 *     rc = cli_common_load(&cc, argv[optind], &presets, &cfg);
 *
 * The experiment flags (--hardware, --model, --gpus, --workload, --batch, --samples, --steps,
 * --seed) are the schema rows of spec/config.c that name a flag; `--set KEY=VALUE` reaches any
 * row. They form the top layer of the config, checked by the same schema as the file, and may
 * set only the keys the command reads (its cli_command.reads in each row's readers) to other
 * than their defaults. Presets, config resolution, traces and costs are api/experiment.h's,
 * which the public API shares; the functions here add the flags and print what fails.
 */
#ifndef CLI_CLI_CONFIG_H
#define CLI_CLI_CONFIG_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "api/experiment.h"
#include "cli/cli.h"
#include "cost/move.h"
#include "sched/router.h"
#include "spec/config.h"
#include "util/json.h"

/* Groups of common flags a command accepts. --help/-h is always accepted. */
enum {
    CLI_FLAGS_CONFIG = 1u << 0,  /* experiment flags and --set KEY=VALUE */
    CLI_FLAGS_PRESETS = 1u << 1, /* --presets FILE (repeatable) */
    CLI_FLAGS_JSON = 1u << 2,    /* --json: one JSON document */
    CLI_FLAGS_JSONL = 1u << 3,   /* --jsonl: JSON Lines, header line first */
    CLI_FLAGS_OUTPUT = 1u << 4,  /* -o/--output FILE */
    CLI_FLAGS_JOBS = 1u << 5,    /* --jobs J: threads for independent work */
    CLI_FLAGS_PROGRESS = 1u << 6 /* --progress: the progress line even off a terminal */
};

/* Option values cli_common_getopt keeps for itself; a command's own long options use values
 * below CLI_OPT_BASE (a short option character, or 0x100 and up). */
#define CLI_OPT_BASE 0x1000

struct cli_common {
    const struct cli_command *cmd;
    unsigned groups;
    struct spec_config_override *overrides; /* flags in command-line order; strings owned */
    size_t n_overrides;
    const char **preset_files; /* --presets values (argv strings) */
    size_t n_preset_files;
    bool json, jsonl;
    const char *output;     /* -o value, or NULL for stdout */
    const char *output_doc; /* what -o writes, for the help; NULL: the result, not to stdout */
    int jobs;               /* --jobs; default: the machine's cores */
    bool progress;          /* --progress */
    struct option *options; /* the command's options, then the common ones; owned */
    size_t n_own;           /* the command's options, first in options */
    char shortopts[64];
    int *given; /* option values of the single-valued flags seen, to refuse a second */
    size_t n_given;
};

/*
 * Prepares cc for a command accepting the given groups of common flags, its own short options
 * (getopt syntax, without 'h' or 'o' when it takes CLI_FLAGS_OUTPUT) and its own long options
 * (terminated by a zeroed entry; NULL when none). Resets getopt's state.
 */
void cli_common_init(struct cli_common *cc, const struct cli_command *cmd, unsigned groups,
                     const char *shortopts, const struct option *own);

/*
 * Like cli_getopt, consuming the common flags: returns the command's own option characters,
 * 'h' for --help/-h, -1 at the end, or '?' after printing a usage error (unknown flag,
 * --set without '=', --json with --jsonl, a flag that takes one value given twice or empty, a
 * key two different flags set, such as --gpus and --set cluster.gpus). The flags
 * that may be given more than once are the repeatable ones docs/cli.md lists: --set,
 * --presets, --sweep, --engine, --pool-replica, --fail and --stall.
 */
int cli_common_getopt(struct cli_common *cc, int argc, char **argv);

/* Adds KEY=VALUE after the flags seen so far, as --set would (a command's flag that stands for
 * a config key); label names it in errors. */
void cli_common_set(struct cli_common *cc, const char *key, const char *value, const char *label);

/* The label of the last flag that set key (--set KEY, or a command's flag that stands for it),
 * or NULL when no flag did. */
const char *cli_common_flag(const struct cli_common *cc, const char *key);

/* Bytes cli_constant_source may write: "preset file " and a preset's origin. */
#define CLI_CONSTANT_SOURCE_MAX (SPEC_ORIGIN_MAX + 16)

/* Where hardware h's constant of value v comes from, as `libra presets` and `libra cost` name
 * it: built_in where v is 0 (the built-in one), calibrated where the preset records a
 * calibration, else "preset file FILE" (written into buf): set by hand, fitted on nothing. */
const char *cli_constant_source(const struct spec_hardware *h, double v, const char *built_in,
                                const char *calibrated, char buf[CLI_CONSTANT_SOURCE_MAX]);

/* Prints a command's --help: its own text, then the accepted common flags, one per line under
 * "common flags:" (the experiment flags of the keys the command reads, less those its own
 * options shadow). */
void cli_common_help(const struct cli_common *cc, const char *text, FILE *out);

/* Releases what cc owns. */
void cli_common_free(struct cli_common *cc);

/*
 * Loads the presets (api_presets_load: built-in, then each file of LIBRA_PRESETS, then each
 * --presets file) into p and resolves the effective config into cfg from config_file (NULL for
 * none) and the flags: defaults < hardware preset < workload preset (rl.samples,
 * rl.batch_trajectories) < file < flags. Prints the error on failure. Returns 0,
 * LIBRA_EXIT_USAGE (invalid preset file, config or flag value, unknown preset),
 * LIBRA_EXIT_IO (unreadable file) or LIBRA_EXIT_INTERNAL (a broken built-in preset). p must
 * be zeroed; the caller frees it (api_presets_free) in every case.
 */
int cli_common_load(const struct cli_common *cc, const char *config_file, struct api_presets *p,
                    struct libra_config *cfg);

/* cli_common_load, keeping the config file's parsed document in *config (zeroed first; empty
 * without a file) for cli_common_resolve, so that a file read from standard input is read once.
 * The caller frees it (ujson_doc_free) in every case. A key inert in cfg is refused, or, with
 * deferred (not NULL), deferred there as cli_common_resolve does: for a sweep, whose cells judge
 * it where they set what it acts with. */
int cli_common_load_doc(const struct cli_common *cc, const char *config_file, struct api_presets *p,
                        struct ujson_doc *config, struct spec_deferred *deferred,
                        struct libra_config *cfg);

/*
 * Resolves another config from cli_common_load_doc's sources (p and config as it loaded them),
 * with extra settings after the flags, which they override (a sweep cell's; label names each in
 * errors), and, with deferred, the keys inert there taken and listed (a grid's point: struct
 * spec_deferred). where (NULL or "": none) prefixes a config error that does not open with an
 * extra setting's label, naming what the extra settings are (a grid's point: an error of another
 * key, such as a preset's value against a swept one, does not name them). Returns and prints as
 * cli_common_load.
 */
int cli_common_resolve(const struct cli_common *cc, const struct ujson_doc *config,
                       const struct api_presets *p, const struct spec_config_override *extra,
                       size_t n_extra, const char *where, struct spec_deferred *deferred,
                       struct libra_config *cfg);

/* Notes on standard error ("CMD: note: ...") the records of in's trace past its last whole
 * group of samples, which neither libra sim nor libra load ever draws (nothing without a trace
 * or leftover). */
void cli_note_leftover_records(const char *cmd, const struct sim_input *in, int samples);

/* api_sim_input, printing the trace's error (FILE:LINE:COL). Returns 0 or an exit code. */
int cli_sim_input(const struct api_presets *p, struct api_traces *ts,
                  const struct libra_config *cfg, bool perfetto, struct sim_input *in);

/*
 * api_move_costs (the routers' costs), printing what fails. Returns 0, or LIBRA_EXIT_USAGE
 * after saying why (a model no TP size can serve).
 */
int cli_move_costs(const struct api_presets *p, const struct libra_config *cfg,
                   struct cost_move_model *m, struct sched_costs *out);

/* Writes doc as pretty JSON plus a newline to cc's output. Returns 0 or LIBRA_EXIT_IO. */
int cli_emit_json(const struct cli_common *cc, const json_t *doc);

#endif
