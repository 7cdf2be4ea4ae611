/*
 * workload: the causal knob. At causal strength 0 a tool's return must carry no information
 * about the remaining work: at every turn depth, the mean remaining generated tokens after a
 * return differ by less than 5 % across tool statuses and across payload size classes. At
 * full strength (1, the links the preset's causal fields define) the same statistic must
 * exceed 5 % somewhere, or the knob would not be the link it claims to be. The presets' own
 * strengths are calibrated far below 1 (docs/workloads.md); what they give is checked as a
 * rank correlation in test_workload_targets.c.
 *
 * Size classes are the terciles of the payload sizes (stricter than the router's fixed
 * small/medium/large thresholds, under which most returns of a preset share one class). A
 * (depth, class) cell is compared only when its mean's standard error is below 1 % of the
 * depth mean, so a 5 % gap is at least 5 standard errors: a miss cannot be noise, and a pass
 * is not for lack of data. The checked cells must hold at least 90 % of all tool returns.
 * The only link left at strength 0 is mechanical — a large return fills the context and can
 * truncate a trajectory earlier — and the presets keep it small (docs/workloads.md).
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "workload/workload.h"

#define MAX_DEPTH 16
#define N_CLASSES (TRACE_TOOL_STATUS_COUNT + 3) /* statuses, then three size classes */
#define MAX_SE 0.01
#define GAP 0.05

struct cell {
    double n, sum, sum2;
};

static struct workload_presets presets;
static struct cell cells[MAX_DEPTH][N_CLASSES];

static int setup(void **state)
{
    (void)state;
    struct libra_error err = {0};
    return workload_presets_init(&presets, &err);
}

static int teardown(void **state)
{
    (void)state;
    workload_presets_free(&presets);
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Tercile bounds of payload sizes from a pilot of trajectories. */
static void terciles(const struct workload_gen *g, int64_t bound[2])
{
    const struct workload_preset *w = g->preset;
    size_t n = 0, cap = 20000 * (size_t)w->max_turns;
    int64_t *sizes = malloc(cap * sizeof *sizes);
    struct arena a;
    arena_init(&a, 0);
    for (int64_t i = 0; i < 20000; i++) {
        struct trace_traj t;
        workload_gen_traj(g, w->prompts - 1 - i % w->prompts, i, 1, &t, &a);
        for (size_t k = 0; k < t.n_turns; k++)
            for (size_t c = 0; c < t.turns[k].n_calls; c++)
                sizes[n++] = t.turns[k].calls[c].payload_tokens;
        arena_reset(&a);
    }
    arena_free(&a);
    qsort(sizes, n, sizeof *sizes, cmp_i64);
    bound[0] = sizes[n / 3];
    bound[1] = sizes[2 * n / 3];
    free(sizes);
}

static void add(struct cell *c, double remaining)
{
    c->n++;
    c->sum += remaining;
    c->sum2 += remaining * remaining;
}

/* Fills cells with the remaining generated tokens after every tool return of n trajectories. */
static void collect(const struct workload_preset *w, int64_t n)
{
    memset(cells, 0, sizeof cells);
    struct workload_gen g;
    workload_gen_init(&g, w, 7);
    int64_t bound[2];
    terciles(&g, bound);
    struct arena a;
    arena_init(&a, 0);
    for (int64_t i = 0; i < n; i++) {
        struct trace_traj t;
        /* Distinct (prompt, sample) keys: every trajectory is an independent draw. */
        workload_gen_traj(&g, i % w->prompts, i / w->prompts, 0, &t, &a);
        double total = 0, done = 0;
        for (size_t k = 0; k < t.n_turns; k++)
            total += (double)t.turns[k].generated_tokens;
        for (size_t k = 0; k < t.n_turns && k < MAX_DEPTH; k++) {
            done += (double)t.turns[k].generated_tokens;
            for (size_t c = 0; c < t.turns[k].n_calls; c++) {
                const struct trace_tool_call *call = &t.turns[k].calls[c];
                int size = (call->payload_tokens > bound[0]) + (call->payload_tokens > bound[1]);
                add(&cells[k][call->status], total - done);
                add(&cells[k][TRACE_TOOL_STATUS_COUNT + size], total - done);
            }
        }
        arena_reset(&a);
    }
    arena_free(&a);
}

/*
 * The largest gap, relative to the depth's mean, between the mean remaining tokens of two
 * classes of one family (statuses, or size classes) at one depth, over the cells precise
 * enough to compare. *coverage receives the share of tool returns in compared cells (each
 * return belongs to one cell of each family and is counted in both).
 */
static double largest_gap(double *coverage)
{
    double worst = 0, compared = 0, all = 0;
    for (int d = 0; d < MAX_DEPTH; d++) {
        const int first[2] = {0, TRACE_TOOL_STATUS_COUNT},
                  last[2] = {TRACE_TOOL_STATUS_COUNT, N_CLASSES};
        double depth_n = 0, depth_sum = 0;
        for (int c = 0; c < TRACE_TOOL_STATUS_COUNT; c++) {
            depth_n += cells[d][c].n;
            depth_sum += cells[d][c].sum;
        }
        if (depth_n == 0)
            continue;
        double mean = depth_sum / depth_n;
        all += 2 * depth_n;
        for (int f = 0; f < 2; f++) {
            double lo = INFINITY, hi = -INFINITY;
            for (int c = first[f]; c < last[f]; c++) {
                const struct cell *x = &cells[d][c];
                if (x->n < 2)
                    continue;
                double m = x->sum / x->n, var = x->sum2 / x->n - m * m;
                if (sqrt(var / x->n) > MAX_SE * mean)
                    continue;
                compared += x->n;
                lo = fmin(lo, m);
                hi = fmax(hi, m);
            }
            if (hi > lo && (hi - lo) / mean > worst)
                worst = (hi - lo) / mean;
        }
    }
    *coverage = compared / all;
    return worst;
}

static void check_knob(const char *name, int64_t n)
{
    struct workload_preset w = *workload_preset_find(&presets, name);
    assert_true(w.causal.strength > 0);
    w.causal.strength = 1;
    double coverage, gap;

    collect(&w, n);
    gap = largest_gap(&coverage);
    if (gap < GAP || coverage < 0.9) {
        print_error("%s at strength %.2f: largest gap %.3f, expected > %.2f, coverage %.3f\n", name,
                    w.causal.strength, gap, GAP, coverage);
        fail();
    }

    print_message("%s: strength %.2f, largest gap %.3f (coverage %.3f)\n", name, w.causal.strength,
                  gap, coverage);

    w.causal.strength = 0;
    collect(&w, n);
    gap = largest_gap(&coverage);
    print_message("%s: strength 0, largest gap %.3f (coverage %.3f)\n", name, gap, coverage);
    if (gap >= GAP || coverage < 0.9) {
        print_error("%s at strength 0: largest gap %.3f (limit %.2f), coverage %.3f\n", name, gap,
                    GAP, coverage);
        fail();
    }
}

static void test_search_r1(void **state)
{
    (void)state;
    check_knob("search-r1", 200000);
}

static void test_dapo_math(void **state)
{
    (void)state;
    check_knob("dapo-math", 400000);
}

static void test_r2e_gym(void **state)
{
    (void)state;
    check_knob("r2e-gym", 300000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_r1),
        cmocka_unit_test(test_dapo_math),
        cmocka_unit_test(test_r2e_gym),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
