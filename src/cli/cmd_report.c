/*
 * `libra report RESULT.json [MORE.json...]`: the evidence of a run as one HTML page and, with
 * --svg, one SVG file per figure (docs/report.md).
 *
 * The report itself (src/report/) is pure: this file reads the inputs, hands them over by
 * name (so that errors say FILE:LINE:COL) and writes what comes back. Nothing is written
 * unless every input was read and the whole report rendered, and each file is written whole
 * (a temporary file renamed into place), so a failure never leaves a partial page.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "report/report.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/parse.h"

static const char help[] =
    "usage: libra report RESULT.json [MORE.json...] [-o FILE] [--svg DIR] [--steps A:B]\n"
    "\n"
    "Turns results of libra sim --json (one run, or a sweep with --sweep/--seeds/\n"
    "--attribution), libra load --json, libra plan --json and libra route eval --json,\n"
    "alone or together, into one self-contained HTML page (inline SVG and CSS, no script,\n"
    "no network reference): per run, step time, GPU utilisation, GPU time by use and the\n"
    "tail's share per step, trajectory length CDFs, the planner's prediction beside the\n"
    "simulation, the throughput of each resource manager, routing accuracy, and for a run\n"
    "made with --timeline A:B a Gantt chart of every mode's GPUs (lent ones marked) and\n"
    "each rollout instance's load; per sweep, each metric's median and interquartile range\n"
    "across seeds at every grid point (an attribution: its ladder and leave-one-out bars);\n"
    "per load run, wall time and tokens per step and turns per engine; the plan's layout;\n"
    "route eval's accuracy, regret, moves and confusion matrices. Inputs are told apart by\n"
    "their schema member; each figure's caption names the command that made its input, and\n"
    "its elements carry the data they draw (data-* attributes, the figure's data as JSON in\n"
    "its <desc>). The same inputs give the same bytes.\n"
    "\n"
    "flags:\n"
    "  --svg DIR          also write each figure alone as DIR/ID.svg (DIR and its missing\n"
    "                     parents are created)\n"
    "  --steps A:B        per-step figures and Gantt charts draw steps A to B only (the\n"
    "                     step numbers of libra sim --json, from 0)\n";

enum { OPT_SVG = 0x100, OPT_STEPS };

struct report_flags {
    const char *svg_dir;
    struct report_options opt;
};

static int parse_steps(const struct cli_command *cmd, const char *arg, struct report_options *o)
{
    size_t size = strlen(arg) + PARSE_WHY_EXTRA;
    char *why = xmalloc(size);
    int rc = 0;
    if (parse_int_range(arg, 0, INT64_MAX, &o->step_first, &o->step_last, why, size) == 0)
        o->step_range = true;
    else
        rc = cli_value_error(cmd, "--steps", why);
    free(why);
    return rc;
}

/* Creates directory dir and the parents it lacks (mkdir -p); one that exists is fine. Returns
 * 0, or -1 with errno. */
static int make_dirs(const char *dir)
{
    char *path = xstrdup(dir);
    int rc = 0;
    for (char *slash = strchr(path + 1, '/'); rc == 0 && slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        rc = mkdir(path, 0777) != 0 && errno != EEXIST ? -1 : 0;
        *slash = '/';
    }
    if (rc == 0 && mkdir(path, 0777) != 0 && errno != EEXIST)
        rc = -1;
    int errnum = errno;
    free(path);
    errno = errnum;
    return rc;
}

/* DIR/ID.svg of figure i. Malloc'd. */
static char *svg_path(const char *dir, const struct report_output *out, size_t i)
{
    size_t n = strlen(dir) + strlen(out->figures.v[i].id) + sizeof "/.svg";
    char *path = xmalloc(n);
    snprintf(path, n, "%s/%s.svg", dir, out->figures.v[i].id);
    return path;
}

/* Refuses, before any file is written, a figure's file that is an input or -o's file (one
 * would replace the other) or that cannot be written (a directory of its name): a failure
 * half-way would leave some figures of this run beside others of an older one. */
static int check_svgs(const struct cli_common *cc, const char *dir, const struct report_output *out,
                      char **files, int n_files)
{
    int rc = 0;
    for (size_t i = 0; i < out->figures.n && rc == 0; i++) {
        char *path = svg_path(dir, out, i);
        for (int k = 0; k < n_files && rc == 0; k++)
            if (strcmp(files[k], "-") != 0 && cli_same_regular_file(files[k], path))
                rc =
                    cli_usage_error(cc->cmd, "--svg '%s' would write '%s' over the input file '%s'",
                                    dir, path, files[k]);
        if (rc == 0 && cc->output && strcmp(cc->output, "-") != 0 &&
            cli_same_output(cc->output, path))
            rc = cli_usage_error(cc->cmd,
                                 "-o and --svg name one file, '%s': one would replace "
                                 "the other",
                                 path);
        if (rc == 0)
            rc = cli_check_output(path);
        free(path);
    }
    return rc;
}

/* Writes each figure as DIR/ID.svg. */
static int write_svgs(const struct cli_common *cc, const char *dir, const struct report_output *out,
                      char **files, int n_files)
{
    if (make_dirs(dir) != 0) {
        cli_errorf("report: cannot create '%s': %s", dir, error_strerror(errno));
        return LIBRA_EXIT_IO;
    }
    int rc = check_svgs(cc, dir, out, files, n_files);
    for (size_t i = 0; i < out->figures.n && rc == 0; i++) {
        char *path = svg_path(dir, out, i);
        rc = cli_write_output(path, out->figures.v[i].svg);
        free(path);
    }
    return rc;
}

/* Refuses an input that is the file of an earlier one (by device and inode, or by name): its
 * runs would be drawn twice, as two. */
static int check_inputs_distinct(const struct cli_common *cc, char **files, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = 0; j < i; j++)
            if (cli_same_file(files[j], files[i]))
                return cli_value_errorf(cc->cmd,
                                        "'%s' is the file of '%s' again: its runs would be drawn "
                                        "twice",
                                        files[i], files[j]);
    return 0;
}

static int run(const struct cli_common *cc, const struct report_flags *f, char **files, int n)
{
    struct report r;
    report_init(&r, &f->opt);
    struct report_output out = {0};
    struct libra_error err = {0};
    int rc = check_inputs_distinct(cc, files, n);
    for (int i = 0; i < n && rc == 0; i++) {
        char *text;
        size_t len;
        rc = cli_read_file(files[i], &text, &len);
        if (rc == 0) {
            if (report_add(&r, files[i], text, len, &err) != 0)
                rc = cli_report_error(&err);
            free(text);
        }
    }
    if (rc == 0 && report_render(&r, &out, &err) != 0)
        rc = cli_report_error(&err);
    if (rc == 0 && f->svg_dir)
        rc = write_svgs(cc, f->svg_dir, &out, files, n);
    if (rc == 0)
        rc = cli_write_output(cc->output, out.html);
    report_output_free(&out);
    report_free(&r);
    return rc;
}

int cmd_report(int argc, char **argv)
{
    static const struct option own[] = {
        {"svg", required_argument, NULL, OPT_SVG},
        {"steps", required_argument, NULL, OPT_STEPS},
        {0},
    };
    struct report_flags f = {0};
    struct cli_common cc;
    cli_common_init(&cc, cli_find("report"), CLI_FLAGS_OUTPUT, "", own);
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            cli_common_free(&cc);
            return LIBRA_EXIT_OK;
        }
        if (c == OPT_SVG)
            f.svg_dir = optarg;
        else if (c == OPT_STEPS)
            rc = parse_steps(cc.cmd, optarg, &f.opt);
        else
            rc = LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
    if (rc == 0 && optind >= argc)
        rc = cli_usage_error(cc.cmd, "no result to report (libra sim --json writes one)");
    if (rc == 0)
        rc = run(&cc, &f, argv + optind, argc - optind);
    cli_common_free(&cc);
    return rc;
}
