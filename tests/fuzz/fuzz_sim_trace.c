/*
 * Fuzz harness for the simulator on a replayed trace (src/sim/): whatever trajectories a trace
 * holds — none, fewer than a group, one of a thousand turns, lengths past a model's context,
 * tool times of years — an experiment either runs or fails with an error; it never crashes,
 * divides by zero or stalls. The input is a trace (line 1 the header, then one trajectory per
 * line; lines the parser refuses are skipped); the experiment is small and fixed: 16 A800
 * GPUs, Qwen3-4B, groups of 2, batch 4, one step of colocated at TP8 and of libra (its layout
 * planned on the trace's lengths).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "trace/trace.h"
#include "util/arena.h"
#include "util/vec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TRAJS 64 /* more add run time, not new paths */

static struct spec_presets presets;
static struct workload_presets workloads;

/* A copy of t in a, as the simulator borrows it for the whole run. */
static struct trace_traj copy_traj(struct arena *a, const struct trace_traj *t)
{
    struct trace_traj c = *t;
    c.extra = NULL;
    c.turns = arena_calloc(a, t->n_turns, sizeof *c.turns);
    for (size_t i = 0; i < t->n_turns; i++) {
        c.turns[i] = t->turns[i];
        c.turns[i].calls = arena_calloc(a, t->turns[i].n_calls, sizeof *c.turns[i].calls);
        for (size_t k = 0; k < t->turns[i].n_calls; k++) {
            c.turns[i].calls[k] = t->turns[i].calls[k];
            c.turns[i].calls[k].tool = arena_strdup(a, t->turns[i].calls[k].tool);
        }
    }
    return c;
}

static void simulate(const struct trace_header *h, const struct trace_traj *trajs, size_t n)
{
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    cfg.cluster.gpus = 16;
    cfg.cluster.gpus_per_node = 8;
    snprintf(cfg.model.name, sizeof cfg.model.name, "qwen3-4b");
    cfg.rl.samples = 2;
    cfg.rl.batch_trajectories = 4;
    cfg.rl.steps = 1;
    cfg.sim.warmup_steps = 0;
    cfg.sim.colocated_tp = 8;
    cfg.sim.modes = SPEC_SIM_COLOCATED | SPEC_SIM_LIBRA;
    struct sim_trace st = {trajs, n, h->workload, h->model, h->group_size};
    struct sim_input in = {.cfg = &cfg,
                           .hw = spec_hardware_find(&presets, cfg.cluster.hardware),
                           .model = spec_model_find(&presets, cfg.model.name),
                           .workload = workload_preset_find(&workloads, h->workload),
                           .trace = &st};
    struct sim_experiment e;
    struct libra_error err = {0};
    int rc = sim_experiment_run(&in, &e, &err);
    if (rc != 0 && (rc == LIBRA_EINTERNAL || !err.msg[0]))
        abort(); /* an invariant broke, or an error without a message */
    sim_experiment_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        struct libra_error err = {0};
        if (spec_presets_init(&presets, &err) || workload_presets_init(&workloads, &err))
            abort();
        ready = true;
    }
    const char *s = (const char *)data, *end = s + size;
    struct trace_parser *p = trace_parser_new("fuzz");
    const struct trace_header *h = NULL;
    struct arena a;
    arena_init(&a, 0);
    VEC(struct trace_traj) trajs = {0};
    for (int64_t lineno = 1; s < end && trajs.n < MAX_TRAJS; lineno++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        const struct trace_traj *t;
        if (lineno == 1) {
            if (trace_parser_header(p, s, len, lineno, &h, NULL) != 0)
                break;
        } else if (trace_parser_traj(p, s, len, lineno, &t, NULL) == 0) {
            vec_push(&trajs, copy_traj(&a, t));
        }
        s += len + 1;
    }
    if (h)
        simulate(h, trajs.v, trajs.n);
    vec_free(&trajs);
    arena_free(&a);
    trace_parser_free(p);
    return 0;
}
