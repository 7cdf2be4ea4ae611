/*
 * Figures for sim/: what a simulated RL job costs to run. `libra sim` with no argument is the
 * README's main job, so it must answer in seconds; a planner or a tuner calls the simulator
 * for many candidates, so one step must be cheap; and a large cluster must stay within
 * reach. Targets: every file in examples/ at most 3 s and 100 MB (command figures: the whole
 * `libra sim FILE` process on all cores, its peak resident memory, its instructions); 1024
 * GPUs x Search-R1 x 5 steps at most 10 s; one step of 512 trajectories on 48 GPUs at most
 * 50 ms; 4096 GPUs with 16 k trajectories per step for 10 steps at most 30 s.
 *
 * Inputs (r2e-gym, seed 1, Qwen3-14B on A800 unless named): each example file; `libra sim
 * --gpus 1024 --workload search-r1 --steps 5`; the built-in default experiment; libra's
 * planned layout for batch 512 on 48 GPUs (planned in setup, not measured); a static split
 * of 4096 GPUs (2048 training, 1024 TP2 rollout instances) with batch 16384. Smoke runs use
 * 2 default steps, one 512 step, 256 GPUs with batch 1024, each example for one step and 64
 * GPUs for the cluster command. After the harness's figures the program prints simulated
 * generated tokens per wall-clock second on the large input.
 */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "sim/sim.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "util/alloc.h"
#include "util/json.h"
#include "workload/preset.h"

#define INPUT_DEFAULT                                                                              \
    "built-in default experiment (48 x a800-80g, qwen3-14b, r2e-gym seed 1, batch 32, modes "      \
    "colocated + async + libra, tuning sweeps of 10 steps) run for n steps; op = one step"
#define INPUT_512                                                                                  \
    "libra's planned layout, 48 x a800-80g, qwen3-14b, r2e-gym seed 1, batch 512 (128 x 4); "      \
    "op = one simulated step"
#define LARGE                                                                                      \
    "async split of 4096 x a800-80g (2048 train, 1024 x TP2 rollout), qwen3-14b, r2e-gym seed "    \
    "1, batch 16384 (4096 x 4)"
#define INPUT_LARGE LARGE "; op = one simulated step"

struct bench_sim {
    struct spec_presets spec;
    struct workload_presets wl;
    struct libra_config cfg;
    struct sim_input in;
    struct sim_layout layout;
};

static struct bench_sim *sim_setup(int gpus, int batch, int steps)
{
    struct bench_sim *b = xcalloc(1, sizeof *b);
    struct libra_error err = {0};
    if (spec_presets_init(&b->spec, &err) || workload_presets_init(&b->wl, &err)) {
        fprintf(stderr, "bench_sim: presets: %s\n", err.msg);
        exit(4);
    }
    spec_config_defaults(&b->cfg);
    b->cfg.cluster.gpus = gpus;
    b->cfg.cluster.gpus_per_node = 8;
    b->cfg.rl.samples = 4;
    b->cfg.rl.batch_trajectories = batch;
    b->cfg.rl.steps = steps;
    b->in = (struct sim_input){.cfg = &b->cfg,
                               .hw = spec_hardware_find(&b->spec, b->cfg.cluster.hardware),
                               .model = spec_model_find(&b->spec, b->cfg.model.name),
                               .workload = workload_preset_find(&b->wl, b->cfg.workload.name)};
    return b;
}

static void sim_teardown(void *state)
{
    struct bench_sim *b = state;
    sim_layout_free(&b->layout);
    spec_presets_free(&b->spec);
    workload_presets_free(&b->wl);
    free(b);
}

static void die(const char *what, const struct libra_error *err)
{
    fprintf(stderr, "bench_sim: %s: %s\n", what, err->msg);
    exit(4);
}

/* ---- the default experiment ----------------------------------------------------------- */

static void *default_setup(uint64_t n)
{
    return sim_setup(48, 32, (int)n);
}

static uint64_t default_run(void *state, uint64_t n)
{
    struct bench_sim *b = state;
    struct sim_experiment e;
    struct libra_error err = {0};
    (void)n;
    if (sim_experiment_run(&b->in, &e, &err))
        die("default experiment", &err);
    uint64_t tokens = 0;
    for (int i = 0; i < e.n; i++)
        tokens += (uint64_t)e.mode[i].run.trained_tokens;
    sim_experiment_free(&e);
    return tokens;
}

/* ---- single runs on a fixed layout ------------------------------------------------------- */

static uint64_t layout_run(void *state, uint64_t n)
{
    struct bench_sim *b = state;
    struct sim_run_opts o = {.steps = (int)n, .warmup = 0, .perfetto_step = -1};
    struct sim_result r;
    struct libra_error err = {0};
    if (sim_run(&b->in, &b->layout, &o, &r, &err))
        die("run", &err);
    uint64_t tokens = (uint64_t)r.generated_tokens;
    sim_result_free(&r);
    return tokens;
}

static void *step512_setup(uint64_t n)
{
    struct bench_sim *b = sim_setup(48, 512, (int)n);
    struct libra_error err = {0};
    if (sim_layout_make(&b->in, SIM_LIBRA, 0, 0, &b->layout, &err))
        die("plan", &err);
    return b;
}

/* The large input; smaller under --smoke (fewer steps than the figure's n). */
static void *large_setup(uint64_t n)
{
    bool small = n < 10;
    struct bench_sim *b = sim_setup(small ? 256 : 4096, small ? 1024 : 16384, (int)n);
    struct libra_error err = {0};
    if (sim_layout_make(&b->in, SIM_ASYNC, b->cfg.cluster.gpus / 2, 2, &b->layout, &err))
        die("layout", &err);
    return b;
}

/* ---- generated tokens per wall second ----------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void tokens_per_wall_second(bool smoke)
{
    uint64_t steps = smoke ? 1 : 10;
    struct bench_sim *b = large_setup(steps);
    double t0 = now_s();
    uint64_t tokens = layout_run(b, steps);
    double wall = now_s() - t0;
    sim_teardown(b);
    json_t *line =
        json_pack("{s:s,s:s,s:f,s:I,s:s,s:n}", "name", "sim_generated_tokens_per_s", "unit", "op/s",
                  "value", round(tokens / wall), "n", (json_int_t)tokens, "input",
                  smoke ? LARGE " (smoke: 256 GPUs, batch 1024, one step); op = "
                                "one generated token"
                        : LARGE ", 10 steps; op = one generated token",
                  "instructions");
    char *text = ujson_dump(line, false);
    printf("%s\n", text);
    free(text);
    json_decref(line);
}

/* ---- whole commands ---------------------------------------------------------------------- */

#define MAX_EXAMPLES 64

/* The example figures' storage: names, inputs, paths and argv arrays. */
struct examples {
    char name[MAX_EXAMPLES][96], input[MAX_EXAMPLES][160], path[MAX_EXAMPLES][4096];
    const char *argv[MAX_EXAMPLES][4], *smoke[MAX_EXAMPLES][10];
    struct bench_command cmd[MAX_EXAMPLES + 1];
    size_t n;
};

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A figure per .json file of examples/, in name order: `libra sim FILE` (smoke: one step). */
static void add_examples(struct examples *x)
{
    DIR *d = opendir(LIBRA_SOURCE_DIR "/examples");
    char *names[MAX_EXAMPLES];
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < MAX_EXAMPLES;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0)
            names[n++] = xstrdup(e->d_name);
    }
    if (d)
        closedir(d);
    qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n; i++) {
        size_t k = x->n++;
        snprintf(x->name[k], sizeof x->name[k], "example_%.*s", (int)(strlen(names[i]) - 5),
                 names[i]);
        snprintf(x->path[k], sizeof x->path[k], "%s/examples/%s", LIBRA_SOURCE_DIR, names[i]);
        snprintf(x->input[k], sizeof x->input[k],
                 "libra sim examples/%s (default --jobs: every core); op = the whole command",
                 names[i]);
        const char *run[] = {LIBRA_BIN, "sim", x->path[k], NULL};
        /* one step: tuning runs min(sim.tune_steps, steps) */
        const char *smoke[] = {LIBRA_BIN, "sim",   x->path[k],           "--steps",
                               "1",       "--set", "sim.warmup_steps=0", NULL};
        memcpy(x->argv[k], run, sizeof run);
        memcpy(x->smoke[k], smoke, sizeof smoke);
        x->cmd[k] =
            (struct bench_command){x->name[k], x->input[k], x->argv[k], x->smoke[k], NULL, NULL};
        free(names[i]);
    }
}

int main(int argc, char **argv)
{
    static const struct bench_figure figures[] = {
        {"sim_default_experiment", INPUT_DEFAULT, BENCH_NS_PER_OP, 100, 2, default_setup,
         default_run, sim_teardown},
        {"sim_step_512", INPUT_512, BENCH_NS_PER_OP, 10, 1, step512_setup, layout_run,
         sim_teardown},
        {"sim_step_4096_gpus", INPUT_LARGE, BENCH_NS_PER_OP, 10, 1, large_setup, layout_run,
         sim_teardown},
    };
    static const char *const cluster[] = {LIBRA_BIN,   "sim",     "--gpus", "1024", "--workload",
                                          "search-r1", "--steps", "5",      NULL};
    static const char *const cluster_smoke[] = {
        LIBRA_BIN, "sim", "--gpus", "64", "--workload", "search-r1", "--steps", "1", NULL};
    static struct examples x;
    add_examples(&x);
    x.cmd[x.n] = (struct bench_command){
        "sim_1024_gpus_search_r1",
        "libra sim --gpus 1024 --workload search-r1 --steps 5 (default --jobs: every core); op = "
        "the whole command",
        cluster,
        cluster_smoke,
        NULL,
        NULL};
    int rc = bench_main_commands(argc, argv, figures, sizeof figures / sizeof figures[0], x.cmd,
                                 x.n + 1);
    bool extras = rc == 0, smoke = false;
    for (int i = 1; i < argc; i++) {
        extras = extras && strcmp(argv[i], "--callgrind-child") != 0 &&
                 strcmp(argv[i], "--filter") != 0 && strcmp(argv[i], "--help") != 0;
        smoke = smoke || strcmp(argv[i], "--smoke") == 0;
    }
    if (extras)
        tokens_per_wall_second(smoke);
    return rc;
}
