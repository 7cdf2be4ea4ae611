/*
 * Figures for plan/: one exact plan of an A800 cluster for Qwen3-14B on an R2E-Gym length
 * sample (the r2e-gym workload preset, seed 1), async mode, 4 samples per prompt, at the four
 * sizes of the planner issue: 48 / 128 / 512 / 4096 GPUs with batches of 32 / 84 / 340 / 2728
 * trajectories and samples of 256 / 680 / 2728 / 21840. The reference implementation took
 * ~11 s (48 GPUs) and ~62 s (128) with a truncated search; the targets are 50 M, 250 M and
 * 5 G instructions for 48, 128 and 4096 GPUs, with a zero gap up to 512.
 *
 * One operation is one plan_solve (tables, search and result; the settings' cost-model fits
 * and the sample are built in setup). After the timed figures the program prints, for each
 * size, the search statistics of that plan as figures of their own (space, candidates
 * scored, pruned, gap), with no timing. Smoke runs plan 512 GPUs for the 4096-GPU figures. Command
 * figures time the whole `libra plan` process on the built-in default, with the verification by
 * simulation (target: at most 1 s) and without.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "plan/plan.h"
#include "spec/config.h"
#include "util/alloc.h"
#include "util/json.h"
#include "workload/workload.h"

struct bench_case {
    int gpus, batch;
    size_t sample;
    double gap_tolerance; /* plan.gap_tolerance: 0 exact */
};

static const struct bench_case cases[] = {
    {48, 32, 256, 0},       {128, 84, 680, 0},          {512, 340, 2728, 0},
    {4096, 2728, 21840, 0}, {4096, 2728, 21840, 0.005}, /* the issue allows a 0.5 % gap at 4096 GPUs
                                                         */
};
#define N_CASES (sizeof cases / sizeof cases[0])

struct plan_state {
    struct spec_presets presets;
    struct libra_config cfg;
    struct plan_settings settings;
    int64_t *prompt, *gen, *tool, *turns;
    double *tool_s; /* per trajectory, seconds */
    struct plan_problem problem;
};

static void die(const char *what, const struct libra_error *err)
{
    fprintf(stderr, "bench_plan: %s: %s\n", what, err->msg);
    exit(1);
}

static struct plan_state *setup_case(const struct bench_case *bc)
{
    struct plan_state *s = xcalloc(1, sizeof *s);
    struct libra_error err = {0};
    struct workload_presets wp;
    if (spec_presets_init(&s->presets, &err) || workload_presets_init(&wp, &err))
        die("built-in presets unusable", &err);
    spec_config_defaults(&s->cfg);
    s->cfg.cluster.gpus = bc->gpus;
    s->cfg.cluster.gpus_per_node = 8;
    s->cfg.rl.batch_trajectories = bc->batch;
    s->cfg.rl.samples = 4;
    s->cfg.plan.mode = SPEC_PLAN_ASYNC;
    s->cfg.plan.gap_tolerance = bc->gap_tolerance;
    s->cfg.plan.max_scored = 0; /* the exact search (or the stated tolerance), never cut short */
    const struct spec_hardware *hw = spec_hardware_find(&s->presets, "a800-80g");
    plan_settings_default(&s->settings, hw);
    struct workload_length *l = xmallocarray(bc->sample, sizeof *l);
    const struct workload_preset *r2e = workload_preset_find(&wp, "r2e-gym");
    size_t b = (size_t)r2e->batch_trajectories; /* one step per batch: the run's first batches */
    workload_lengths(r2e, r2e->dynamic_sampling, 1, b, (size_t)r2e->samples,
                     (bc->sample + b - 1) / b, bc->sample, l);
    s->prompt = xmallocarray(bc->sample, sizeof *s->prompt);
    s->gen = xmallocarray(bc->sample, sizeof *s->gen);
    s->tool = xmallocarray(bc->sample, sizeof *s->tool);
    s->turns = xmallocarray(bc->sample, sizeof *s->turns);
    s->tool_s = xmallocarray(bc->sample, sizeof *s->tool_s);
    for (size_t i = 0; i < bc->sample; i++) {
        s->prompt[i] = l[i].len.prompt_tokens;
        s->gen[i] = l[i].len.generated_tokens;
        s->tool[i] = l[i].len.tool_tokens;
        s->turns[i] = l[i].len.turns;
        s->tool_s[i] = l[i].len.tool_s;
    }
    free(l);
    workload_presets_free(&wp);
    s->problem = (struct plan_problem){
        .cfg = &s->cfg,
        .hw = hw,
        .model = spec_model_find(&s->presets, "qwen3-14b"),
        .settings = &s->settings,
        .sample = {bc->sample, s->prompt, s->gen, s->tool, s->turns},
        .tool_s = s->tool_s,
    };
    return s;
}

static void *setup_48(uint64_t n)
{
    (void)n;
    return setup_case(&cases[0]);
}

static void *setup_128(uint64_t n)
{
    (void)n;
    return setup_case(&cases[1]);
}

static void *setup_512(uint64_t n)
{
    (void)n;
    return setup_case(&cases[2]);
}

static bool smoke; /* --smoke: the 4096-GPU figures plan 512 GPUs (sanitizer builds are slow) */

static void *setup_4096(uint64_t n)
{
    (void)n;
    return setup_case(&cases[smoke ? 2 : 3]);
}

static void *setup_4096_tol(uint64_t n)
{
    (void)n;
    return setup_case(&cases[smoke ? 2 : 4]);
}

/* Solves once into r; exits on an error (the inputs are fixed, so one is a bug). */
static void solve(struct plan_state *s, struct plan_result *r)
{
    struct libra_error err = {0};
    if (plan_solve(&s->problem, r, &err) != 0)
        die("plan_solve", &err);
}

static uint64_t plan_run(void *state, uint64_t n)
{
    uint64_t sink = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct plan_result r;
        solve(state, &r);
        sink += (uint64_t)r.n_train + (uint64_t)r.instances;
        plan_result_free(&r);
    }
    return sink;
}

static void plan_teardown(void *state)
{
    struct plan_state *s = state;
    spec_presets_free(&s->presets);
    free(s->prompt);
    free(s->gen);
    free(s->tool);
    free(s->turns);
    free(s->tool_s);
    free(s);
}

/* ---- search statistics as figures ----------------------------------------------------------- */

static void print_stat(const char *name, const char *unit, double value, const char *input)
{
    json_t *line = json_pack("{s:s, s:s, s:f, s:i, s:s, s:n}", "name", name, "unit", unit, "value",
                             value, "n", 1, "input", input, "instructions");
    char *text = ujson_dump(line, false);
    printf("%s\n", text);
    free(text);
    json_decref(line);
}

static void print_stats(size_t k)
{
    const struct bench_case *bc = &cases[k];
    struct plan_state *s = setup_case(bc);
    struct plan_result r;
    solve(s, &r);
    char input[256], name[64];
    snprintf(input, sizeof input,
             "%d x A800, Qwen3-14B, r2e-gym seed 1, %zu trajectories, batch %d of 4, async, gap "
             "tolerance %g: T_step %.6g s, %d train GPUs, %d instances",
             bc->gpus, bc->sample, bc->batch, bc->gap_tolerance, r.step_s, r.n_train, r.instances);
    const struct plan_stats *st = &r.stats;
    static const char *const what[] = {"space", "candidates", "pruned", "gap"};
    static const char *const unit[] = {"pairs", "scored", "pruned", "fraction"};
    double value[] = {st->space, st->train_scored + st->rollout_scored,
                      st->train_pruned + st->rollout_pruned, st->gap};
    for (size_t i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "plan_%d%s_%s", bc->gpus, bc->gap_tolerance > 0 ? "_tol" : "",
                 what[i]);
        print_stat(name, unit[i], value[i], input);
    }
    plan_result_free(&r);
    plan_teardown(s);
}

#define INPUT(g, n, b)                                                                             \
#g " x A800 (8/node), Qwen3-14B, r2e-gym length sample seed 1 of " #n                          \
       " trajectories, batch " #b " of 4, async; op = one plan_solve"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        smoke = smoke || strcmp(argv[i], "--smoke") == 0;
    static const struct bench_figure figures[] = {
        {"plan_48", INPUT(48, 256, 32), BENCH_NS_PER_OP, 1, 1, setup_48, plan_run, plan_teardown},
        {"plan_128", INPUT(128, 680, 84), BENCH_NS_PER_OP, 1, 1, setup_128, plan_run,
         plan_teardown},
        {"plan_512", INPUT(512, 2728, 340), BENCH_NS_PER_OP, 1, 1, setup_512, plan_run,
         plan_teardown},
        {"plan_4096", INPUT(4096, 21840, 2728), BENCH_NS_PER_OP, 1, 1, setup_4096, plan_run,
         plan_teardown},
        {"plan_4096_tol", INPUT(4096, 21840, 2728) " with plan.gap_tolerance 0.005 (exact: 0)",
         BENCH_NS_PER_OP, 1, 1, setup_4096_tol, plan_run, plan_teardown},
    };
    static const char *const verified[] = {LIBRA_BIN, "plan", NULL};
    static const char *const analytic[] = {LIBRA_BIN, "plan", "--verify", "0", NULL};
    static const char *const verified_smoke[] = {LIBRA_BIN,        "plan", "--verify", "2",
                                                 "--verify-steps", "2",    NULL};
    static const struct bench_command commands[] = {
        {"plan_command_verified",
         "libra plan (the built-in default: 48 x A800, Qwen3-14B, r2e-gym seed 1, batch 32; 16 "
         "candidates verified for 10 steps each, default --jobs: every core); op = the whole "
         "command",
         verified, verified_smoke, NULL, NULL},
        {"plan_command_analytic",
         "libra plan --verify 0 (the built-in default, the analytic optimum alone); op = the "
         "whole command",
         analytic, analytic, NULL, NULL},
    };
    int rc = bench_main_commands(argc, argv, figures, sizeof figures / sizeof figures[0], commands,
                                 sizeof commands / sizeof commands[0]);
    bool stats = rc == 0;
    for (int i = 1; i < argc; i++)
        stats = stats && strcmp(argv[i], "--callgrind-child") != 0 &&
                strcmp(argv[i], "--filter") != 0 && strcmp(argv[i], "--help") != 0;
    for (size_t k = 0; stats && k < (smoke ? 1 : N_CASES); k++)
        print_stats(k);
    return rc;
}
