/*
 * `libra trace gen WORKLOAD`: writes a synthetic trace from a workload preset
 * (docs/workloads.md), for users who have no trace of their own and for the planner, the
 * router evaluation and the simulator to share one workload.
 *
 * Step s draws batch/samples prompts from the pool without replacement (the epoch advances
 * when the pool is exhausted) and generates `samples` trajectories for each at policy
 * version s. Every trajectory is a pure function of (seed, prompt, sample, version), so the
 * same flags always give the same bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/error.h"
#include "workload/workload.h"

#define DEFAULT_STEPS 10

/* The help, the built-in presets' names between its two parts (print_help). */
static const char help_head[] =
    "usage: libra trace gen WORKLOAD [--steps N] [--batch B] [--samples n] [--seed S]\n"
    "                       [-o FILE] [--presets FILE]\n"
    "\n"
    "Writes a synthetic trace (docs/trace-format.md) of the workload preset WORKLOAD, one\n"
    "built in or one from a preset file (docs/workloads.md). Built in:\n"
    "  ";
static const char help[] =
    "\n"
    "Each of the N steps draws B/n prompts from the prompt pool without replacement (a new\n"
    "epoch, in a new order, when the pool is exhausted) and n trajectories (a GRPO group) for\n"
    "each, at policy version = step. The same flags give the same bytes.\n"
    "\n"
    "flags:\n"
    "  --steps N          training steps (default 10)\n"
    "  --batch B          trajectories per step, a multiple of n (default: the preset's\n"
    "                     prompts per step times n)\n"
    "  --samples n        trajectories per prompt (default: the preset's)\n"
    "  --seed S           keys every random draw (default 1)\n";

struct gen_flags {
    int64_t steps, batch, samples;
    uint64_t seed;
};

/* The range of config key `key` (an integer), so that a trace gen writes only what libra sim can
 * replay (rl.batch_trajectories, rl.samples) and draw again (sim.seed). */
static void key_range(const char *key, int64_t *lo, int64_t *hi)
{
    const struct spec_field *f = spec_config_field(key);
    *lo = (int64_t)f->min;
    *hi = (int64_t)f->max;
}

static int gen_flag(const struct cli_command *cmd, struct gen_flags *f, int c, const char *arg)
{
    int64_t seed = 0, lo, hi; /* seed: read below even when refused */
    int rc;
    switch (c) {
    case 'n':
        return cli_parse_int(cmd, "--steps", arg, 1, INT32_MAX, &f->steps);
    case 'b':
        key_range("rl.batch_trajectories", &lo, &hi);
        return cli_parse_int(cmd, "--batch", arg, lo, hi, &f->batch);
    case 's':
        key_range("rl.samples", &lo, &hi);
        return cli_parse_int(cmd, "--samples", arg, lo, hi, &f->samples);
    default: /* 'S' */
        key_range("sim.seed", &lo, &hi);
        rc = cli_parse_int(cmd, "--seed", arg, lo, hi, &seed);
        f->seed = (uint64_t)seed;
        return rc;
    }
}

/* The header's generator object: what produced the trace, with every parameter. */
static json_t *generator_json(const struct workload_preset *w, const struct gen_flags *f)
{
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:o}", "name", "libra trace gen",
                     "preset", w->name, "seed", (json_int_t)f->seed, "steps", (json_int_t)f->steps,
                     "batch_trajectories", (json_int_t)f->batch, "samples", (json_int_t)f->samples,
                     "version", "policy version = step", "params", workload_preset_to_json(w));
}

/* Says which trajectory of preset w the trace refused (err: "FIELD: REASON"): a preset whose
 * values are each in range can still draw one past the trace's bounds (docs/trace-format.md,
 * rule 4), such as tool waits that add up to more than 2^50 microseconds. */
static int refused_traj(const struct workload_preset *w, const struct trace_traj *t,
                        struct libra_error *err)
{
    char why[sizeof err->msg];
    snprintf(why, sizeof why, "%s", err->msg);
    return error_set(err, NULL, 0, 0,
                     "workload preset '%s' draws a trajectory a trace cannot hold (step %lld, "
                     "prompt %lld, sample %lld): %s",
                     w->name, (long long)t->step, (long long)t->prompt_id, (long long)t->sample,
                     why);
}

/* Generates and writes every step's groups. */
static int write_steps(struct trace_writer *wr, const struct workload_preset *w,
                       const struct gen_flags *f, struct libra_error *err)
{
    struct workload_gen g;
    workload_gen_init(&g, w, f->seed);
    struct arena a;
    arena_init(&a, 0);
    struct trace_traj *group = xcalloc((size_t)f->samples, sizeof *group);
    int64_t per_step = f->batch / f->samples;
    int rc = 0;
    for (int64_t step = 0; step < f->steps && rc == 0; step++) {
        for (int64_t j = 0; j < per_step && rc == 0; j++) {
            for (int64_t s = 0; s < f->samples; s++)
                workload_group_traj(&g, step * per_step + j, s, step, &group[s], &a);
            workload_filter_group(w->dynamic_sampling, group, (size_t)f->samples);
            for (int64_t s = 0; s < f->samples && rc == 0; s++)
                if ((rc = trace_writer_put(wr, &group[s], err)) == LIBRA_EINVAL)
                    refused_traj(w, &group[s], err);
            arena_reset(&a);
        }
    }
    free(group);
    arena_free(&a);
    return rc;
}

static int run(const struct cli_common *cc, const char *name, struct gen_flags *f)
{
    struct api_presets p = {0};
    struct libra_config cfg;
    int rc = cli_common_load(cc, NULL, &p, &cfg);
    const struct workload_preset *w = rc ? NULL : workload_preset_find(&p.workloads, name);
    if (!w) {
        api_presets_free(&p);
        if (!rc)
            cli_errorf("%s: unknown workload preset '%s' (libra presets lists them)", cc->cmd->name,
                       name);
        return rc ? rc : LIBRA_EXIT_USAGE;
    }
    if (!f->samples)
        f->samples = w->samples;
    int64_t lo, hi, prompts = w->batch_trajectories / w->samples;
    key_range("rl.batch_trajectories", &lo, &hi);
    if (!f->batch && prompts > hi / f->samples) {
        api_presets_free(&p);
        cli_errorf("%s: --samples %lld: the preset's %lld prompts per step would make a batch "
                   "past rl.batch_trajectories' %lld: give --batch",
                   cc->cmd->name, (long long)f->samples, (long long)prompts, (long long)hi);
        return LIBRA_EXIT_USAGE;
    }
    if (!f->batch) /* the preset's prompts per step, each with f->samples trajectories */
        f->batch = prompts * f->samples;
    if (f->batch % f->samples) {
        api_presets_free(&p);
        cli_errorf("%s: --batch %lld is not a multiple of --samples %lld", cc->cmd->name,
                   (long long)f->batch, (long long)f->samples);
        return LIBRA_EXIT_USAGE;
    }
    struct trace_header h = {.version = TRACE_SCHEMA_VERSION,
                             .workload = (char *)w->name,
                             .group_size = f->samples,
                             .generator = generator_json(w, f)};
    struct libra_error err = {0};
    struct trace_writer *wr = NULL;
    rc = cli_trace_open(&wr, cc->output ? cc->output : "-", &h, &err);
    if (rc == 0)
        rc = write_steps(wr, w, f, &err);
    rc = cli_trace_close(wr, rc, &err);
    json_decref(h.generator);
    api_presets_free(&p);
    if (rc == 0)
        return LIBRA_EXIT_OK;
    return cli_report(rc, &err);
}

/* The help naming the built-in workload presets from their table, so it lists every one. */
static void print_help(const struct cli_common *cc)
{
    struct workload_presets w = {0};
    struct libra_error err = {0};
    char names[512] = "";
    if (workload_presets_init(&w, &err) == 0)
        workload_preset_names(&w, names, sizeof names);
    workload_presets_free(&w);
    char text[sizeof help_head + sizeof names + sizeof help];
    snprintf(text, sizeof text, "%s%s%s", help_head, names, help);
    cli_common_help(cc, text, stdout);
}

int cmd_trace_gen(const struct cli_command *cmd, int argc, char **argv)
{
    static const struct option own[] = {
        {"steps", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},
        {"samples", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {0},
    };
    struct cli_common cc;
    struct gen_flags f = {.steps = DEFAULT_STEPS, .seed = 1};
    cli_common_init(&cc, cmd, CLI_FLAGS_PRESETS | CLI_FLAGS_OUTPUT, "", own);
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            print_help(&cc);
            goto out;
        }
        rc = c == '?' ? LIBRA_EXIT_USAGE : gen_flag(cc.cmd, &f, c, optarg);
    }
    if (rc == 0 && argc - optind != 1)
        rc = cli_usage_error(cc.cmd, "gen needs one WORKLOAD (e.g. r2e-gym)");
    if (rc == 0)
        rc = run(&cc, argv[optind], &f);
out:
    cli_common_free(&cc);
    return rc;
}
