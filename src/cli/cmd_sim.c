/*
 * `libra sim [EXPERIMENT]`: simulate an RL job under several resource managers.
 *
 * The simulator itself (src/sim/) is pure; this file resolves the experiment (built-in
 * defaults < presets < the file < flags), reads a trace into memory when the experiment
 * replays one, and writes what the simulator formats: the table, one JSON document, JSON
 * Lines, and with --perfetto a Chrome trace-event file of one step.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "sim/sim.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/arena.h"
#include "util/vec.h"
#include "util/workers.h"

static const char help[] =
    "usage: libra sim [EXPERIMENT] [--json|--jsonl] [--steps N] [--seed S] [--perfetto FILE]\n"
    "                 [--trace FILE] [flags]\n"
    "\n"
    "Simulates the RL job of EXPERIMENT (a config file, docs/config.md; without one the\n"
    "built-in default: 48 x A800, Qwen3-14B, r2e-gym, batch 32 = 8 x 4, 100 steps) under each\n"
    "resource manager of sim.modes: colocated (verl's hybrid engine), async (a static split,\n"
    "one rollout TP, bounded staleness), libra (the planner's split and heterogeneous\n"
    "instances, routed by C-MLFQ) and rollout (a fixed fleet, no trainer). Baselines are\n"
    "tuned in the simulator unless pinned (sim.colocated_tp, sim.async_train_gpus,\n"
    "sim.async_tp). Reports trained tokens/s and trajectories/s, waste by cause, utilisation,\n"
    "the tail's share of rollout time, staleness, routing metrics and the planner's predicted\n"
    "times beside the simulated ones (docs/sim.md).\n"
    "\n"
    "flags:\n"
    "  --perfetto FILE    write one step of the last mode as a Chrome trace-event file\n"
    "                     (open it in ui.perfetto.dev); the step is sim.trace_step\n"
    "  --trace FILE       replay the trajectories of a trace (workload.trace)\n";

/* ---- the trace in memory ---------------------------------------------------------------- */

struct loaded_trace {
    struct arena arena;
    VEC(struct trace_traj) trajs;
    char *workload, *model;
};

static void copy_traj(struct loaded_trace *lt, const struct trace_traj *t)
{
    struct trace_traj c = *t;
    c.extra = NULL;
    c.turns = arena_calloc(&lt->arena, t->n_turns, sizeof *c.turns);
    for (size_t i = 0; i < t->n_turns; i++) {
        c.turns[i] = t->turns[i];
        c.turns[i].calls = arena_calloc(&lt->arena, t->turns[i].n_calls, sizeof(*c.turns[i].calls));
        for (size_t k = 0; k < t->turns[i].n_calls; k++) {
            c.turns[i].calls[k] = t->turns[i].calls[k];
            c.turns[i].calls[k].tool = arena_strdup(&lt->arena, t->turns[i].calls[k].tool);
        }
    }
    vec_push(&lt->trajs, c);
}

static int load_trace(const char *path, struct loaded_trace *lt)
{
    struct trace_reader *r;
    struct libra_error err = {0};
    const struct trace_header *h;
    const struct trace_traj *t;
    arena_init(&lt->arena, 0);
    int rc = trace_reader_open(&r, path, &err);
    if (rc == 0)
        rc = trace_reader_header(r, &h, &err);
    if (rc == 0) {
        lt->workload = xstrdup(h->workload);
        lt->model = h->model ? xstrdup(h->model) : NULL;
        while ((rc = trace_reader_next(r, &t, &err)) == 1)
            copy_traj(lt, t);
    }
    trace_reader_close(r);
    if (rc < 0) {
        cli_report_error(&err);
        return rc == LIBRA_EIO ? LIBRA_EXIT_IO : LIBRA_EXIT_USAGE;
    }
    return 0;
}

static void loaded_trace_free(struct loaded_trace *lt)
{
    arena_free(&lt->arena);
    vec_free(&lt->trajs);
    free(lt->workload);
    free(lt->model);
}

/* ---- the command ------------------------------------------------------------------------ */

static int exit_code(int rc)
{
    return rc == LIBRA_EINFEAS     ? LIBRA_EXIT_NEGATIVE
           : rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL
                                   : LIBRA_EXIT_USAGE;
}

static int emit(const struct cli_common *cc, const struct sim_experiment *e,
                const struct libra_config *cfg)
{
    if (cc->json) {
        json_t *doc = sim_experiment_to_json(e, cfg);
        int rc = cli_emit_json(cc, doc);
        json_decref(doc);
        return rc;
    }
    char *text = cc->jsonl ? sim_experiment_jsonl(e, cfg) : sim_experiment_text(e, cfg);
    int rc = cli_write_output(cc->output, text);
    free(text);
    return rc;
}

static int write_perfetto(const struct sim_experiment *e, const char *path)
{
    for (int i = 0; i < e->n; i++)
        if (e->mode[i].run.perfetto)
            return cli_write_output(path, e->mode[i].run.perfetto);
    cli_errorf("sim: --perfetto: no step was recorded (sim.trace_step beyond rl.steps?)");
    return LIBRA_EXIT_USAGE;
}

static int run(const struct cli_common *cc, const char *file, const char *trace,
               const char *perfetto, int jobs)
{
    struct cli_presets p = {0};
    struct libra_config cfg;
    struct loaded_trace lt = {0};
    struct sim_experiment e = {0};
    int rc = cli_common_load(cc, file, &p, &cfg);
    if (rc == 0 && trace)
        snprintf(cfg.workload.trace, sizeof cfg.workload.trace, "%s", trace);
    if (rc == 0 && cfg.workload.trace[0])
        rc = load_trace(cfg.workload.trace, &lt);
    if (rc == 0) {
        struct sim_trace st = {lt.trajs.v, lt.trajs.n, lt.workload, lt.model};
        struct sim_input in = {.cfg = &cfg,
                               .hw = spec_hardware_find(&p.spec, cfg.cluster.hardware),
                               .model = spec_model_find(&p.spec, cfg.model.name),
                               .workload = workload_preset_find(&p.workloads, cfg.workload.name),
                               .trace = cfg.workload.trace[0] ? &st : NULL,
                               .perfetto = perfetto != NULL,
                               .workers = workers_new(jobs)};
        struct libra_error err = {0};
        int src = sim_experiment_run(&in, &e, &err);
        workers_free(in.workers);
        if (src) {
            cli_errorf("sim: %s", err.msg);
            rc = exit_code(src);
        }
    }
    if (rc == 0)
        rc = emit(cc, &e, &cfg);
    if (rc == 0 && perfetto)
        rc = write_perfetto(&e, perfetto);
    sim_experiment_free(&e);
    loaded_trace_free(&lt);
    cli_presets_free(&p);
    return rc;
}

int cmd_sim(int argc, char **argv)
{
    enum { OPT_PERFETTO = 0x100, OPT_TRACE, OPT_JOBS };
    static const struct option own[] = {
        {"perfetto", required_argument, NULL, OPT_PERFETTO},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"jobs", required_argument, NULL, OPT_JOBS},
        {0},
    };
    const char *perfetto = NULL, *trace = NULL;
    int64_t jobs = workers_cpus();
    struct cli_common cc;
    cli_common_init(&cc, cli_find("sim"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_JSONL |
                        CLI_FLAGS_OUTPUT,
                    "", own);
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            cli_common_help(&cc, help, stdout);
            cli_common_free(&cc);
            return LIBRA_EXIT_OK;
        case OPT_PERFETTO:
            perfetto = optarg;
            break;
        case OPT_TRACE:
            trace = optarg;
            break;
        case OPT_JOBS:
            rc = cli_parse_int(cc.cmd, "--jobs", optarg, 1, 1024, &jobs);
            break;
        default:
            rc = LIBRA_EXIT_USAGE;
        }
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "expected at most one experiment file");
    if (rc == 0)
        rc = run(&cc, optind < argc ? argv[optind] : NULL, trace, perfetto, (int)jobs);
    cli_common_free(&cc);
    return rc;
}
