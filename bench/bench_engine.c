/*
 * Figures for engine/: how much simulated work one busy inference instance costs. The simulator
 * runs hundreds of instances for hours of simulated time, so the engine must cost per change
 * (a turn arriving, a prefill completing, a sequence finishing, a preemption), not per token.
 *
 * Input: Qwen3-14B TP2 on A800 (built-in presets, default cost constants, vLLM's default
 * limits: 256 sequences, 8192 batched tokens, prefix cache on, 40960-token context), driven by
 * 256 concurrent multi-turn trajectories (seed 1): a first prompt of U[500, 2500) tokens, then
 * 1 + U[0, 8) turns each generating 1 + lognormal(ln 300, 0.8) tokens (at most 4096), a tool
 * call of exponential mean 2 s between turns returning U[50, 550) tokens, the next turn's prompt
 * appending to the previous context (a token-in client: the whole context is reusable). A
 * finished trajectory, or one whose next turn would not fit the context, is replaced by a new
 * one after that tool call. The driver's own work (a heap of tool returns, the random draws) is
 * inside the measured region; it is small next to the engine's.
 *
 * engine_busy_tokens: op = one sampled token (op/s = simulated tokens per wall second).
 * engine_busy_events: op = one engine event, a run of identical iterations composed
 * (engine_stats.runs): ns and instructions per event.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cost/rollout.h"
#include "cost/shape.h"
#include "engine/engine.h"
#include "harness.h"
#include "spec/preset.h"
#include "util/alloc.h"
#include "util/heap.h"
#include "util/rng.h"

#define TRAJS 256
#define CONTEXT 40960

struct traj {
    uint64_t key;     /* prefix key: one per trajectory */
    int64_t ctx;      /* tokens of context after the last turn */
    int turns_left;   /* turns still to run after the current one */
    int64_t next_gen; /* tokens the next turn generates */
};

struct tool_return {
    double t_s;
    uint32_t traj;
    uint64_t seq;
};

struct state {
    struct cost_rollout_pre pre;
    struct engine_stats last; /* the last run's, printed with its input's figures */
    double last_s;            /* simulated seconds the last run took */
};

struct drive {
    struct engine *e;
    struct rng r;
    struct traj traj[TRAJS];
    struct heap returns;
    uint64_t seq, next_key, next_id;
};

static int return_cmp(const void *a, const void *b, void *ctx)
{
    const struct tool_return *x = a, *y = b;
    if (x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void *setup(uint64_t n)
{
    (void)n;
    struct state *s = xcalloc(1, sizeof *s);
    struct spec_presets ps;
    struct libra_error err = {0};
    struct cost_shape shape;
    struct cost_rollout_params p;
    const struct spec_hardware *hw;
    if (spec_presets_init(&ps, &err) || !(hw = spec_hardware_find(&ps, "a800-80g")) ||
        cost_shape_init(&shape, spec_model_find(&ps, "qwen3-14b"))) {
        fprintf(stderr, "bench_engine: built-in presets unusable: %s\n", err.msg);
        exit(1);
    }
    cost_rollout_params_default(&p, hw);
    cost_rollout_pre_init(&s->pre, &shape, hw, &p, 2);
    spec_presets_free(&ps);
    return s;
}

/* What the last run simulated, on stderr (once per figure: its repetitions run alike): the
 * figures that explain its cost per event. */
static void teardown(void *state)
{
    static int64_t printed_runs;
    struct state *s = state;
    const struct engine_stats *st = &s->last;
    if (st->runs == printed_runs) {
        free(state);
        return;
    }
    printed_runs = st->runs;
    fprintf(stderr,
            "bench_engine: last run: %lld tokens in %.0f s simulated, %lld iterations in %lld "
            "events (%.0f tokens, %.2f iterations per event), %lld turns finished, %lld "
            "preemptions, %lld tokens prefilled (%lld recomputed), %lld prompt tokens from the "
            "prefix cache, %lld KV tokens\n",
            (long long)st->sampled_tokens, s->last_s, (long long)st->iterations,
            (long long)st->runs, (double)st->sampled_tokens / (double)st->runs,
            (double)st->iterations / (double)st->runs, (long long)st->finished,
            (long long)st->preemptions, (long long)st->prefill_tokens,
            (long long)st->recompute_tokens, (long long)st->cached_tokens,
            (long long)st->kv_capacity_tokens);
    free(state);
}

static int64_t draw_gen(struct rng *r)
{
    double g = 1.0 + rng_lognormal(r, log(300.0), 0.8);
    return g > 4096.0 ? 4096 : (int64_t)g;
}

/* Submits trajectory i's next turn at now_s: a new trajectory when it has none left. */
static void next_turn(struct drive *d, uint32_t i, double now_s, int64_t tool_tokens)
{
    struct traj *t = &d->traj[i];
    int64_t prompt = t->ctx + tool_tokens;
    if (t->turns_left == 0 || prompt + t->next_gen > CONTEXT) {
        t->key = ++d->next_key;
        t->turns_left = 1 + (int)rng_uniform_int(&d->r, 8);
        prompt = 500 + (int64_t)rng_uniform_int(&d->r, 2000);
        t->ctx = 0;
    }
    struct engine_request rq = {.id = ++d->next_id,
                                .tag = i,
                                .prefix_key = t->key,
                                .prompt_tokens = prompt,
                                .reusable_prefix_tokens = t->ctx,
                                .gen_tokens = t->next_gen};
    t->turns_left--;
    t->ctx = prompt + t->next_gen;
    t->next_gen = draw_gen(&d->r);
    if (engine_submit(d->e, now_s, &rq) != 0) {
        fprintf(stderr, "bench_engine: submit refused\n");
        exit(1);
    }
}

static void on_done(void *ctx, const struct engine_done *done)
{
    struct drive *d = ctx;
    struct tool_return tr = {done->end_s + rng_exponential(&d->r, 0.5), (uint32_t)done->tag,
                             d->seq++};
    heap_push(&d->returns, &tr);
}

/* Runs the busy instance until it has sampled `tokens` tokens or composed `runs` runs. */
static uint64_t drive(struct state *s, uint64_t tokens, uint64_t runs)
{
    struct drive d = {.r = rng_keyed(1, 0xb, 0, 0)};
    struct engine_config c;
    engine_config_default(&c, &s->pre);
    c.max_model_tokens = CONTEXT;
    if (engine_new(&d.e, &c) != 0)
        exit(1);
    heap_init(&d.returns, sizeof(struct tool_return), return_cmp, NULL);
    for (uint32_t i = 0; i < TRAJS; i++) {
        d.traj[i].next_gen = draw_gen(&d.r);
        next_turn(&d, i, 0.0, 0);
    }
    struct engine_stats st;
    double now_s = 0.0;
    for (;;) {
        engine_stats(d.e, &st);
        if ((uint64_t)st.sampled_tokens >= tokens || (uint64_t)st.runs >= runs)
            break;
        const struct tool_return *top = heap_peek(&d.returns);
        double t = engine_next_event_s(d.e);
        if (top && top->t_s < t)
            t = top->t_s;
        engine_advance(d.e, t, on_done, &d);
        now_s = t;
        struct tool_return tr;
        while ((top = heap_peek(&d.returns)) && top->t_s <= t) {
            heap_pop(&d.returns, &tr);
            next_turn(&d, tr.traj, t, 50 + (int64_t)rng_uniform_int(&d.r, 500));
        }
    }
    heap_free(&d.returns);
    engine_free(d.e);
    s->last = st;
    s->last_s = now_s;
    return (uint64_t)st.sampled_tokens + (uint64_t)st.runs;
}

static uint64_t run_tokens(void *state, uint64_t n)
{
    return drive(state, n, UINT64_MAX);
}

static uint64_t run_events(void *state, uint64_t n)
{
    return drive(state, UINT64_MAX, n);
}

#define INPUT                                                                                      \
    "qwen3-14b tp2 on a800-80g, vLLM default limits, 256 concurrent multi-turn trajectories "      \
    "(bench_engine.c), seed 1"

int main(int argc, char **argv)
{
    const struct bench_figure figures[] = {
        {"engine_busy_tokens", INPUT "; op = one sampled token", BENCH_OPS_PER_S, 20000000, 20000,
         setup, run_tokens, teardown},
        {"engine_busy_events", INPUT "; op = one engine event (a run of identical iterations)",
         BENCH_NS_PER_OP, 100000, 200, setup, run_events, teardown},
    };
    return bench_main(argc, argv, figures, sizeof figures / sizeof figures[0]);
}
