/*
 * Figures for util/: the primitives every simulated event, routed turn and planner step pays
 * for. The random-number figures bound the workload generator's cost per drawn quantity; the
 * heap figure is the simulator's event queue; the map figure is per-trajectory state lookup;
 * the arena figure is per-request allocation; the window-quantile figure is the gateway's
 * rolling p99. Inputs are generated from fixed seeds in setup, outside the measured region.
 */
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "util/alloc.h"
#include "util/arena.h"
#include "util/heap.h"
#include "util/map.h"
#include "util/rng.h"
#include "util/stats.h"

/* ---- rng ----------------------------------------------------------------------------------- */

static void *rng_setup(uint64_t n)
{
    struct rng *r = xmalloc(sizeof *r);
    *r = rng_keyed(1, 1, 2, 3);
    return r;
}

static uint64_t rng_uniform_run(void *state, uint64_t n)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++)
        sum += rng_uniform(state);
    return (uint64_t)sum;
}

static uint64_t rng_normal_run(void *state, uint64_t n)
{
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++)
        sum += rng_normal(state);
    return (uint64_t)(sum * sum);
}

static uint64_t rng_poisson_run(void *state, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += rng_poisson(state, 30.0);
    return sum;
}

/* ---- heap: the simulator's event queue ------------------------------------------------------ */

struct event {
    double t_s;
    uint64_t seq;
};

static int event_cmp(const void *a, const void *b, void *ctx)
{
    const struct event *x = a, *y = b;
    if (x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static void *events_setup(uint64_t n)
{
    struct event *ev = xmallocarray(n, sizeof *ev);
    struct rng r = rng_keyed(1, 0, 0, 0);
    for (uint64_t i = 0; i < n; i++)
        ev[i] = (struct event){rng_uniform(&r) * 1000.0, i};
    return ev;
}

static uint64_t heap_run(void *state, uint64_t n)
{
    const struct event *ev = state;
    struct heap h;
    heap_init(&h, sizeof(struct event), event_cmp, NULL);
    for (uint64_t i = 0; i < n; i++)
        heap_push(&h, &ev[i]);
    uint64_t check = 0;
    struct event e;
    while (heap_pop(&h, &e))
        check = check * 31 + e.seq;
    heap_free(&h);
    return check;
}

/* ---- map: per-trajectory state by id -------------------------------------------------------- */

struct keys {
    char **k;
    uint64_t n;
};

static void *keys_setup(uint64_t n)
{
    struct keys *keys = xmalloc(sizeof *keys);
    keys->k = xmallocarray(n, sizeof *keys->k);
    keys->n = n;
    struct rng r = rng_keyed(1, 0, 0, 0);
    char buf[32];
    for (uint64_t i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "traj-%llx", (unsigned long long)rng_u64(&r));
        keys->k[i] = xstrdup(buf);
    }
    return keys;
}

static void keys_teardown(void *state)
{
    struct keys *keys = state;
    for (uint64_t i = 0; i < keys->n; i++)
        free(keys->k[i]);
    free(keys->k);
    free(keys);
}

static uint64_t map_run(void *state, uint64_t n)
{
    char **keys = ((struct keys *)state)->k;
    struct map m;
    map_init(&m);
    for (uint64_t i = 0; i < n; i++)
        map_put(&m, keys[i], (union map_value){.i64 = (int64_t)i});
    uint64_t check = 0;
    union map_value v;
    for (uint64_t i = 0; i < n; i++)
        if (map_get(&m, keys[i], &v))
            check += (uint64_t)v.i64;
    map_free(&m);
    return check;
}

/* ---- arena: per-request allocation ---------------------------------------------------------- */

static void *sizes_setup(uint64_t n)
{
    uint8_t *sizes = xmalloc(n);
    struct rng r = rng_keyed(1, 0, 0, 0);
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = (uint8_t)(1 + rng_uniform_int(&r, 128));
    return sizes;
}

static uint64_t arena_run(void *state, uint64_t n)
{
    const uint8_t *sizes = state;
    struct arena a;
    arena_init(&a, 4096);
    uint64_t check = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (i % 1024 == 0)
            arena_reset(&a);
        char *p = arena_alloc(&a, sizes[i]);
        p[0] = (char)i;
        check += (uint64_t)(uintptr_t)p & 0xff;
    }
    arena_free(&a);
    return check;
}

/* ---- stats: rolling p99 --------------------------------------------------------------------- */

static void *samples_setup(uint64_t n)
{
    double *x = xmallocarray(n, sizeof *x);
    struct rng r = rng_keyed(1, 0, 0, 0);
    for (uint64_t i = 0; i < n; i++)
        x[i] = rng_exponential(&r, 1.0);
    return x;
}

static uint64_t window_run(void *state, uint64_t n)
{
    const double *x = state;
    struct stats_window w;
    stats_window_init(&w, 1000);
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        stats_window_add(&w, x[i]);
        sum += stats_window_quantile(&w, 0.99);
    }
    stats_window_free(&w);
    return (uint64_t)sum;
}

static void free_state(void *state)
{
    free(state);
}

int main(int argc, char **argv)
{
    const struct bench_figure figures[] = {
        {"rng_uniform", "draws from one stream (seed 1; keys 1, 2, 3)", BENCH_OPS_PER_S, 10000000,
         1000, rng_setup, rng_uniform_run, free_state},
        {"rng_normal", "standard normal draws, polar method (seed 1; keys 1, 2, 3)",
         BENCH_NS_PER_OP, 1000000, 1000, rng_setup, rng_normal_run, free_state},
        {"rng_poisson", "Poisson(30) draws, PTRS (seed 1; keys 1, 2, 3)", BENCH_NS_PER_OP, 1000000,
         1000, rng_setup, rng_poisson_run, free_state},
        {"heap_push_pop",
         "events with time U[0, 1000) s (seed 1) in (time, seq) order: push n, then pop n; "
         "op = push + pop",
         BENCH_NS_PER_OP, 1000000, 1000, events_setup, heap_run, free_state},
        {"map_put_get",
         "distinct keys \"traj-<hex u64>\" (seed 1): put n into an empty map, then get n; "
         "op = put + get",
         BENCH_NS_PER_OP, 1000000, 1000, keys_setup, map_run, keys_teardown},
        {"arena_alloc",
         "allocations of U{1..128} bytes (seed 1) from a 4 KiB-first-chunk arena reset every 1024",
         BENCH_NS_PER_OP, 10000000, 5000, sizes_setup, arena_run, free_state},
        {"window_p99",
         "Exp(1) samples (seed 1) into a 1000-sample window; op = add + exact p99 of the window",
         BENCH_NS_PER_OP, 20000, 2000, samples_setup, window_run, free_state},
    };
    return bench_main(argc, argv, figures, sizeof figures / sizeof figures[0]);
}
