/*
 * workload presets: the pinned targets of issue 5, measured on the first N trajectories of
 * `libra trace gen PRESET --seed 1` (groups of `samples`, prompts in pool order, policy
 * version = step; drift is off in the built-in presets).
 *
 * Hard caps (turns, tokens, context) must hold for every trajectory. A statistical target
 * must hold with margin: the estimate plus or minus Z standard errors lies inside the pinned
 * range, so the check passes for the preset's true value, not for a lucky sample. Standard
 * errors of means are sqrt(var / n); those of the tail share, the rank correlations and the
 * ICC come from B batches of whole groups (none is a mean of independent terms).
 *
 * Every preset is also calibrated on the two figures `libra trace stats` reports for routing
 * (docs/workloads.md, "Calibration"): within a turn depth, a tool return's status and payload
 * say almost nothing about the generated tokens still to come (Spearman within [-0.1, 0.1]; the
 * real tau-bench set gives +0.07 and +0.01), while the prompt carries much of the length
 * (ICC(1) of log(1 + generated tokens) within [0.5, 0.75]; tau-bench 0.63).
 */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "trace/stats.h"
#include "workload/workload.h"

#define N 40000
#define B 20 /* batches for the standard error of the tail share */
#define Z 4.0

/* Per-trajectory figures and running sums over one preset's sample. */
struct sample {
    double gen[N];        /* generated tokens per trajectory */
    double turn_count[N]; /* turns per trajectory */
    int64_t max_turns;    /* most turns seen */
    int64_t max_calls;    /* most tool calls in one trajectory */
    int64_t max_turn_gen; /* most tokens in one turn */
    int64_t max_payload;  /* largest tool return */
    int64_t max_context;  /* largest context a turn reached (prompt + generated) */
    double turns, calls, payload, payload2;
    double identical_groups; /* share of groups whose rewards are all equal */
    int64_t filtered;        /* trajectories marked filtered */
    int64_t validator_calls;
    int64_t calls_not_validator_failure;
    int64_t bad_calls;   /* failure or timeout */
    int64_t large_calls; /* payload above 5,000 tokens (the router's default large class) */
    int64_t at_turn_cap; /* trajectories that used every turn */
    struct trace_stats *all, *batch[B]; /* routing figures: whole sample, and per batch */
};

static struct workload_presets presets;
static struct sample S;

static int setup(void **state)
{
    (void)state;
    struct libra_error err = {0};
    return workload_presets_init(&presets, &err);
}

/* Frees the statistics accumulators of the last sample. */
static void release(void)
{
    trace_stats_free(S.all);
    for (int b = 0; b < B; b++)
        trace_stats_free(S.batch[b]);
    S.all = NULL;
    memset(S.batch, 0, sizeof S.batch);
}

static int teardown(void **state)
{
    (void)state;
    release();
    workload_presets_free(&presets);
    return 0;
}

static void add_traj(const struct trace_traj *t, size_t i)
{
    int64_t calls = 0;
    S.gen[i] = 0;
    for (size_t k = 0; k < t->n_turns; k++) {
        const struct trace_turn *u = &t->turns[k];
        S.gen[i] += (double)u->generated_tokens;
        if (u->prompt_tokens + u->generated_tokens > S.max_context)
            S.max_context = u->prompt_tokens + u->generated_tokens;
        if (u->generated_tokens > S.max_turn_gen)
            S.max_turn_gen = u->generated_tokens;
        for (size_t c = 0; c < u->n_calls; c++) {
            const struct trace_tool_call *call = &u->calls[c];
            double p = (double)call->payload_tokens;
            S.payload += p;
            S.payload2 += p * p;
            if (call->payload_tokens > S.max_payload)
                S.max_payload = call->payload_tokens;
            S.bad_calls += call->status == TRACE_TOOL_FAILURE || call->status == TRACE_TOOL_TIMEOUT;
            S.large_calls += call->payload_tokens > 5000;
            bool validator = strcmp(call->tool, "validator") == 0;
            S.validator_calls += validator;
            S.calls_not_validator_failure += !validator || call->status != TRACE_TOOL_FAILURE;
            calls++;
        }
    }
    if ((int64_t)t->n_turns > S.max_turns)
        S.max_turns = (int64_t)t->n_turns;
    trace_stats_add(S.all, t);
    trace_stats_add(S.batch[i / (N / B)], t);
    if (calls > S.max_calls)
        S.max_calls = calls;
    S.turn_count[i] = (double)t->n_turns;
    S.turns += (double)t->n_turns;
    S.calls += (double)calls;
    S.filtered += t->finish == TRACE_FINISH_FILTERED;
}

static const struct workload_preset *draw(const char *name)
{
    const struct workload_preset *w = workload_preset_find(&presets, name);
    assert_non_null(w);
    release();
    memset(&S, 0, sizeof S);
    S.all = trace_stats_new();
    for (int b = 0; b < B; b++)
        S.batch[b] = trace_stats_new();
    struct workload_gen g;
    workload_gen_init(&g, w, 1);
    struct arena a;
    arena_init(&a, 0);
    struct trace_traj *group = calloc((size_t)w->samples, sizeof *group);
    int64_t groups = N / w->samples, identical = 0, per_step = w->batch_trajectories / w->samples;
    for (int64_t k = 0; k < groups; k++) {
        int64_t prompt = workload_prompt_for(&g, k / w->prompts, k % w->prompts);
        for (int64_t s = 0; s < w->samples; s++)
            workload_gen_traj(&g, prompt, s, k / per_step, &group[s], &a);
        identical += workload_filter_group(w->dynamic_sampling, group, (size_t)w->samples);
        for (int64_t s = 0; s < w->samples; s++) {
            S.at_turn_cap += (int64_t)group[s].n_turns == w->max_turns;
            add_traj(&group[s], (size_t)(k * w->samples + s));
        }
        arena_reset(&a);
    }
    S.identical_groups = (double)identical / (double)groups;
    free(group);
    arena_free(&a);
    assert_int_equal(groups * w->samples, N);
    return w;
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Share of the tokens held by the longest 5 % of trajectories among n. Sorts v. */
static double top5_share(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_desc);
    double top = 0, all = 0;
    for (size_t i = 0; i < n; i++) {
        all += v[i];
        if (i < n / 20)
            top += v[i];
    }
    return top / all;
}

static void assert_within(const char *what, double v, double se, double lo, double hi)
{
    if (v - Z * se < lo || v + Z * se > hi) {
        print_error("%s = %.4g (se %.3g) not within [%g, %g] by %g standard errors\n", what, v, se,
                    lo, hi, Z);
        fail();
    }
}

/* Every preset: the longest 5 % of trajectories hold 30-50 % of the generated tokens. */
static void check_tail(const char *name)
{
    double batch[B], mean = 0, var = 0;
    for (int b = 0; b < B; b++) {
        batch[b] = top5_share(S.gen + (size_t)b * (N / B), N / B);
        mean += batch[b] / B;
    }
    for (int b = 0; b < B; b++)
        var += (batch[b] - mean) * (batch[b] - mean) / (B - 1);
    char what[80];
    snprintf(what, sizeof what, "%s top-5%% token share", name);
    assert_within(what, top5_share(S.gen, N), sqrt(var / B), 0.30, 0.50);
}

static double gen_total(void)
{
    double sum = 0;
    for (size_t i = 0; i < N; i++)
        sum += S.gen[i];
    return sum;
}

/* Generated tokens per turn over all turns (a ratio of sums) and its delta-method se. */
static void tokens_per_turn(double *ratio, double *se)
{
    double r = gen_total() / S.turns, ss = 0;
    for (size_t i = 0; i < N; i++)
        ss += (S.gen[i] - r * S.turn_count[i]) * (S.gen[i] - r * S.turn_count[i]);
    *ratio = r;
    *se = sqrt(ss / N) / (S.turns / N) / sqrt(N);
}

/* The number at path (a/b/c) in a statistics document; NAN when null or absent. */
static double stat(const json_t *doc, const char *a, const char *b, const char *c)
{
    const json_t *v = json_object_get(json_object_get(doc, a), b);
    if (c)
        v = json_object_get(v, c);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/*
 * The routing calibration of docs/workloads.md: the within-depth Spearman of each return
 * feature that varies (status where statuses mix, payload where returns exist) within
 * [-0.1, 0.1], the ICC within [0.5, 0.75], each by Z batch standard errors. A feature whose
 * pooled figure is null (no tool, or one status only) has nothing to check.
 */
static void check_routing(const char *name)
{
    static const char *const what[3][3] = {{"return_signal", "status", "rho"},
                                           {"return_signal", "payload", "rho"},
                                           {"task_effect", "icc1", NULL}};
    static const double lo[3] = {-0.1, -0.1, 0.5}, hi[3] = {0.1, 0.1, 0.75};
    json_t *all = trace_stats_json(S.all), *batch[B];
    for (int b = 0; b < B; b++)
        batch[b] = trace_stats_json(S.batch[b]);
    for (int k = 0; k < 3; k++) {
        double v = stat(all, what[k][0], what[k][1], what[k][2]);
        if (isnan(v)) {
            assert_true(k < 2); /* a sample of whole groups always has an ICC */
            continue;
        }
        double mean = 0, var = 0, x[B];
        for (int b = 0; b < B; b++) {
            x[b] = stat(batch[b], what[k][0], what[k][1], what[k][2]);
            assert_false(isnan(x[b]));
            mean += x[b] / B;
        }
        for (int b = 0; b < B; b++)
            var += (x[b] - mean) * (x[b] - mean) / (B - 1);
        char label[80];
        snprintf(label, sizeof label, "%s %s", name, what[k][1]);
        print_message("%s = %.3f (batch se %.3f)\n", label, v, sqrt(var / B));
        assert_within(label, v, sqrt(var / B), lo[k], hi[k]);
    }
    json_decref(all);
    for (int b = 0; b < B; b++)
        json_decref(batch[b]);
}

static void test_search_r1(void **state)
{
    (void)state;
    const struct workload_preset *w = draw("search-r1");
    assert_int_equal(w->prompts, 169615);
    assert_true(S.max_turns <= 5 && S.max_calls <= 4); /* <= 4 searches + answer */
    assert_true(S.max_turn_gen <= 1024 && S.max_payload <= 8192);
    /* Calls per trajectory are bounded (<= 4), so var(calls) <= 4 bounds its se. */
    assert_within("searches per trajectory", S.calls / N, 2.0 / sqrt(N), 1.0, 3.0);
    /* Not degenerate: misses are failures, a few pages are large, some trajectories search
     * to the turn cap, and the length tail reaches far beyond the median. */
    double miss = (double)S.bad_calls / S.calls;
    assert_within("miss share", miss, sqrt(miss * (1 - miss) / S.calls), 0.1, 0.4);
    assert_true(S.large_calls > 0);
    assert_true(S.at_turn_cap > N / 100);
    static double sorted[N];
    memcpy(sorted, S.gen, sizeof sorted);
    qsort(sorted, N, sizeof *sorted, cmp_desc);
    assert_true(sorted[N / 100] > 10 * sorted[N / 2]); /* p99 more than 10x p50 */
    double r, r_se;
    tokens_per_turn(&r, &r_se);
    assert_within("generated tokens per turn", r, r_se, 100, 300);
    double m = S.payload / S.calls, se = sqrt((S.payload2 / S.calls - m * m) / S.calls);
    assert_within("observation tokens per search", m, se, 350, 450);
    check_tail(w->name);
    check_routing(w->name);
}

static void test_dapo_math(void **state)
{
    (void)state;
    const struct workload_preset *w = draw("dapo-math");
    assert_int_equal(w->prompts, 17900);
    assert_true(S.max_turns <= 2); /* <= 2 attempts */
    assert_true(S.max_turns == 2); /* wrong first answers get feedback and a retry */
    assert_int_equal(S.calls_not_validator_failure, 0); /* every call is validator feedback */
    assert_true(S.max_context <= w->context_tokens);
    for (size_t i = 0; i < N; i++)
        assert_true(S.gen[i] <= 32768);
    /* Long chain of thought: attempts of thousands of tokens on average. */
    double r, r_se;
    tokens_per_turn(&r, &r_se);
    assert_within("generated tokens per attempt", r, r_se, 2000, 32768);
    check_tail(w->name);
    check_routing(w->name);
}

static void test_dapo_math_verl(void **state)
{
    (void)state;
    const struct workload_preset *w = draw("dapo-math-verl");
    assert_int_equal(w->prompts, 17900);
    assert_int_equal(w->samples, 16);
    assert_true(S.max_turns == 1 && S.calls == 0);
    for (size_t i = 0; i < N; i++)
        assert_true(S.gen[i] <= 20480);
    /* A fraction of the groups have identical rewards and are filtered (calibrated 0.2-0.5,
     * docs/workloads.md); groups are independent, so the se is binomial. */
    double groups = (double)N / 16, f = S.identical_groups;
    assert_within("identical-reward groups", f, sqrt(f * (1 - f) / groups), 0.2, 0.5);
    assert_true(S.filtered > 0 && S.filtered <= (int64_t)(f * N + 0.5));
    check_tail(w->name);
    check_routing(w->name);
}

static void test_r2e_gym(void **state)
{
    (void)state;
    const struct workload_preset *w = draw("r2e-gym");
    assert_int_equal(w->prompts, 4578);
    assert_true(S.max_turns <= 12);
    assert_true(S.max_context <= 32768);
    for (size_t i = 0; i < N; i++)
        assert_true(S.gen[i] <= 30000);
    assert_true(S.max_turns == 12 && S.turns / N > 3); /* multi-turn, reaching the cap */
    assert_true(S.validator_calls > 0);                /* test/validator feedback */
    check_tail(w->name);
    check_routing(w->name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_r1),
        cmocka_unit_test(test_dapo_math),
        cmocka_unit_test(test_dapo_math_verl),
        cmocka_unit_test(test_r2e_gym),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
