/*
 * Figures for workload/: the cost of a synthetic trajectory. `libra trace gen` and the
 * simulator draw hundreds of thousands of trajectories per run, so generating and
 * serialising one must stay far below the work the simulator then does with it: the issue's
 * target is 100 k r2e-gym trajectories generated and serialised in at most 2 s and 5 G
 * instructions (20 us and 50 k instructions per trajectory).
 *
 * Input: the r2e-gym preset, seed 1, drawn as `libra trace gen r2e-gym --seed 1` draws it
 * (steps of 8 prompts x 4 samples, prompts from the pool permutation, policy version = step).
 * One op is one trajectory. gen_r2e_serialise also formats each record as its trace line
 * into a reused buffer (the trace writer's work without the file); gen_r2e generates only.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "trace/trace.h"
#include "workload/workload.h"

#define INPUT "r2e-gym preset, seed 1, as libra trace gen draws it; op = one trajectory"

struct state {
    struct workload_presets presets;
    struct workload_gen gen;
    struct arena arena;
    struct trace_text text;
};

static void *setup(uint64_t n)
{
    (void)n;
    struct state *s = calloc(1, sizeof *s);
    struct libra_error err = {0};
    if (!s || workload_presets_init(&s->presets, &err) != 0) {
        fprintf(stderr, "bench_workload: cannot load presets: %s\n", err.msg);
        exit(1);
    }
    workload_gen_init(&s->gen, workload_preset_find(&s->presets, "r2e-gym"), 1);
    arena_init(&s->arena, 0);
    return s;
}

static void teardown(void *state)
{
    struct state *s = state;
    arena_free(&s->arena);
    trace_text_free(&s->text);
    workload_presets_free(&s->presets);
    free(s);
}

/* Draws trajectories 0..n-1 in trace gen's order; serialises each when text is set. */
static uint64_t draw(struct state *s, uint64_t n, bool serialise)
{
    const struct workload_preset *w = s->gen.preset;
    int64_t per_step = w->batch_trajectories / w->samples;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        int64_t k = (int64_t)i / w->samples;
        int64_t prompt = workload_prompt_for(&s->gen, k / w->prompts, k % w->prompts);
        struct trace_traj t;
        workload_gen_traj(&s->gen, prompt, (int64_t)i % w->samples, k / per_step, &t, &s->arena);
        if (serialise) {
            s->text.len = 0;
            trace_format_traj(&s->text, &t);
            sum += s->text.len;
        } else {
            sum += (uint64_t)t.n_turns;
        }
        arena_reset(&s->arena);
    }
    return sum;
}

static uint64_t run_serialise(void *state, uint64_t n)
{
    return draw(state, n, true);
}

static uint64_t run_gen(void *state, uint64_t n)
{
    return draw(state, n, false);
}

int main(int argc, char **argv)
{
    static const struct bench_figure figures[] = {
        {"gen_r2e_serialise", INPUT, BENCH_NS_PER_OP, 100000, 1000, setup, run_serialise, teardown},
        {"gen_r2e", INPUT, BENCH_NS_PER_OP, 100000, 1000, setup, run_gen, teardown},
    };
    return bench_main(argc, argv, figures, sizeof figures / sizeof figures[0]);
}
