/*
 * Figures for cost/: the evaluations in the simulator's and planner's inner loops. The engine
 * model costs every batch-composition change with cost_iter_time; the planner scores every
 * training candidate with cost_train_step_time on a dealing it computes once per DP size
 * (cost_train_deal). Inputs are built from the built-in Qwen3-14B and A800 presets and fixed
 * seeds in setup, outside the measured region.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cost/rollout.h"
#include "cost/train.h"
#include "harness.h"
#include "spec/preset.h"
#include "util/alloc.h"
#include "util/rng.h"

#define N_BATCHES 4096

struct presets {
    struct spec_presets p;
    const struct spec_hardware *hw;
    struct cost_shape shape;
};

static void load_presets(struct presets *ps)
{
    struct libra_error err = {0};
    if (spec_presets_init(&ps->p, &err) || !(ps->hw = spec_hardware_find(&ps->p, "a800-80g")) ||
        cost_shape_init(&ps->shape, spec_model_find(&ps->p, "qwen3-14b"))) {
        fprintf(stderr, "bench_cost: built-in presets unusable: %s\n", err.msg);
        exit(1);
    }
}

/* ---- iteration time ------------------------------------------------------------------------ */

struct iter_state {
    struct cost_rollout_pre pre;
    struct cost_batch batch[N_BATCHES];
};

static void *iter_setup(uint64_t n)
{
    struct presets ps;
    struct cost_rollout_params p;
    struct iter_state *st = xmalloc(sizeof *st);
    load_presets(&ps);
    cost_rollout_params_default(&p, ps.hw);
    cost_rollout_pre_init(&st->pre, &ps.shape, ps.hw, &p, 2);
    spec_presets_free(&ps.p);
    struct rng r = rng_keyed(1, 0, 0, 0);
    for (size_t i = 0; i < N_BATCHES; i++) {
        struct cost_batch *b = &st->batch[i];
        *b = (struct cost_batch){0};
        b->decode_seqs = 1.0 + (double)rng_uniform_int(&r, 256);
        b->decode_ctx_tokens = b->decode_seqs * (double)rng_uniform_int(&r, 32768);
        if (rng_bernoulli(&r, 0.3))
            cost_batch_add_prefill(b, (double)rng_uniform_int(&r, 16384),
                                   1.0 + (double)rng_uniform_int(&r, 2048), true);
    }
    return st;
}

static uint64_t iter_run(void *state, uint64_t n)
{
    const struct iter_state *st = state;
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++)
        sum += cost_iter_time(&st->pre, &st->batch[i % N_BATCHES]);
    return (uint64_t)(sum * 1e6);
}

/* ---- training ------------------------------------------------------------------------------ */

struct train_state {
    struct presets ps;
    struct cost_train_params p;
    struct cost_train_seqs seqs;
    struct cost_train_scratch sc;
    struct cost_train_load load;
};

/* 512 trajectories (R2E-Gym-like: log-normal around 8 K tokens, capped at 32 K), DP 4. */
static void *train_setup(uint64_t n)
{
    struct train_state *st = xcalloc(1, sizeof *st);
    load_presets(&st->ps);
    cost_train_params_default(&st->p);
    uint32_t len[512];
    struct rng r = rng_keyed(1, 0, 0, 0);
    for (size_t i = 0; i < 512; i++) {
        double x = rng_lognormal(&r, 8.6, 0.8);
        len[i] = (uint32_t)(x < 1.0 ? 1.0 : x > 32768.0 ? 32768.0 : x);
    }
    cost_train_seqs_init(&st->seqs, &st->ps.shape, len, 512);
    cost_train_deal(&st->seqs, &st->ps.shape, 4, 4, 32768, false, &st->sc, &st->load);
    return st;
}

static void train_teardown(void *state)
{
    struct train_state *st = state;
    cost_train_seqs_free(&st->seqs);
    cost_train_scratch_free(&st->sc);
    spec_presets_free(&st->ps.p);
    free(st);
}

/* One candidate (TP, PP, CP) per operation, cycling through 8·4·2 layouts on DP 4. */
static uint64_t step_run(void *state, uint64_t n)
{
    struct train_state *st = state;
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        struct cost_train_config c = {.tp = 1 << (i % 4),
                                      .pp = 1 << (i / 4 % 4),
                                      .cp = 1 << (i / 16 % 2),
                                      .dp = 4,
                                      .micro_batch_tokens = 32768,
                                      .minibatches = 4,
                                      .zero_stage = 1,
                                      .full_recompute = true,
                                      .old_logprob = true};
        struct cost_train_step s = {0};
        cost_train_step_time(&st->ps.shape, st->ps.hw, &st->p, &c, &st->load, &s);
        sum += s.step_s;
    }
    return (uint64_t)sum;
}

/* One dealing of the 512 trajectories per operation, DP cycling through 1–32. */
static uint64_t deal_run(void *state, uint64_t n)
{
    struct train_state *st = state;
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        struct cost_train_load load;
        cost_train_deal(&st->seqs, &st->ps.shape, 1 << (i % 6), 4, 32768, i % 2, &st->sc, &load);
        sum += load.work_max;
    }
    return (uint64_t)(sum * 1e-9);
}

int main(int argc, char **argv)
{
    static const struct bench_figure figures[] = {
        {"cost_iter_time",
         "qwen3-14b a800 TP2, 4096 batches: 1-256 decode seqs, context "
         "U[0,32K) tokens, 30 % with a prefill chunk, seed 1",
         BENCH_NS_PER_OP, 1000000, 1000, iter_setup, iter_run, free},
        {"cost_train_step_time",
         "qwen3-14b a800, 512 trajectories lognormal(8.6, 0.8) capped "
         "32K, seed 1, DP 4, one (TP, PP, CP) candidate per op",
         BENCH_NS_PER_OP, 1000000, 1000, train_setup, step_run, train_teardown},
        {"cost_train_deal", "the same 512 trajectories dealt to DP 1-32, 4 mini-batches, per op",
         BENCH_NS_PER_OP, 2000, 10, train_setup, deal_run, train_teardown},
    };
    return bench_main(argc, argv, figures, sizeof figures / sizeof figures[0]);
}
