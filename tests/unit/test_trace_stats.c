/* Tests of trace statistics (src/trace/stats.c) on hand-built traces whose figures are worked
 * out in the comments: quantiles, tail shares, mixes, per-step blocks, recurrence, drift, the
 * within-depth return signal (ties, censored trajectories, small depths) and the task effect
 * (ICC(1) of a prompt effect of known size). */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "trace/stats.h"

/* The value at path ("a/b/0/c": members and array indices); NULL when absent. */
static const json_t *at(const json_t *root, const char *path)
{
    const json_t *v = root;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save, *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
    return v;
}

static double num(const json_t *root, const char *path)
{
    const json_t *v = at(root, path);
    if (!json_is_number(v)) {
        print_error("%s is not a number\n", path);
        fail();
    }
    return json_number_value(v);
}

/*
 * 20 trajectories: trajectory i (1..20) generates i tokens in its last turn, has 1 + i % 3
 * turns, is in step (i - 1) / 10 and belongs to prompt i % 7 in epoch i / 15.
 */
static struct trace_stats *twenty(void)
{
    struct trace_stats *s = trace_stats_new();
    for (int i = 1; i <= 20; i++) {
        struct trace_turn turns[3] = {0};
        struct trace_tool_call calls[2] = {
            {.tool = "bash",
             .status = TRACE_TOOL_FAILURE,
             .payload_tokens = 4,
             .queue_us = -1,
             .exec_us = 100},
            {.tool = "bash",
             .status = TRACE_TOOL_SUCCESS,
             .payload_tokens = 6,
             .queue_us = 10,
             .exec_us = 300},
        };
        size_t n = 1 + (size_t)(i % 3);
        for (size_t k = 0; k < n; k++) {
            turns[k].prompt_tokens = 100;
            turns[k].cached_tokens = -1;
            if (k + 1 < n) {
                turns[k].calls = &calls[k];
                turns[k].n_calls = 1;
            }
        }
        turns[n - 1].generated_tokens = i;
        struct trace_traj t = {.step = (i - 1) / 10,
                               .prompt_id = i % 7,
                               .epoch = i / 15,
                               .turns = turns,
                               .n_turns = n,
                               .finish = i == 20 ? TRACE_FINISH_TRUNCATED : TRACE_FINISH_COMPLETED};
        trace_stats_add(s, &t);
    }
    return s;
}

static void test_overall_distributions(void **state)
{
    struct trace_stats *s = twenty();
    json_t *j = trace_stats_json(s);
    /* generated tokens 1..20: mean 10.5; type-7 p50 at h = 9.5 -> 10.5, p90 at h = 17.1 ->
     * 18.1, p99 at h = 18.81 -> 19.81 */
    assert_close(num(j, "overall/generated_tokens/mean"), 10.5, 1e-12);
    assert_close(num(j, "overall/generated_tokens/p50"), 10.5, 1e-12);
    assert_close(num(j, "overall/generated_tokens/p90"), 18.1, 1e-12);
    assert_close(num(j, "overall/generated_tokens/p99"), 19.81, 1e-12);
    assert_close(num(j, "overall/generated_tokens/max"), 20, 0);
    assert_close(num(j, "overall/trajectories"), 20, 0);
    /* longest 5 %: ceil(1) = the 20-token one of 210; 10 %: 20 + 19 */
    assert_close(num(j, "overall/longest_5pct_token_share"), 20.0 / 210.0, 1e-12);
    assert_close(num(j, "overall/longest_10pct_token_share"), 39.0 / 210.0, 1e-12);
    /* turns 1 + i % 3: i % 3 == 0 for 6 of them, 1 for 7, 2 for 7 -> 6*1 + 7*2 + 7*3 = 41 */
    assert_close(num(j, "overall/turns/mean"), 41.0 / 20.0, 1e-12);
    /* prompt tokens: 100 per turn */
    assert_close(num(j, "overall/prompt_tokens/mean"), 4100.0 / 20.0, 1e-12);
    /* tool calls: 7 trajectories with one (first call, 4 tokens, failure) and 7 with two */
    assert_close(num(j, "overall/tool_tokens/mean"), (7 * 4 + 7 * 10) / 20.0, 1e-12);
    assert_close(num(j, "overall/tool_status/failure"), 14, 0);
    assert_close(num(j, "overall/tool_status/success"), 7, 0);
    assert_close(num(j, "overall/tool_status/timeout"), 0, 0);
    assert_close(num(j, "overall/finish/truncated"), 1, 0);
    assert_close(num(j, "overall/finish/completed"), 19, 0);
    /* queue known only on the 7 second calls; exec on all 21 */
    assert_close(num(j, "overall/queue_us/n"), 7, 0);
    assert_close(num(j, "overall/queue_us/max"), 10, 0);
    assert_close(num(j, "overall/exec_us/n"), 21, 0);
    assert_close(num(j, "overall/exec_us/mean"), (14 * 100 + 7 * 300) / 21.0, 1e-12);
    json_decref(j);
    trace_stats_free(s);
}

static void test_steps_prompts_and_drift(void **state)
{
    struct trace_stats *s = twenty();
    json_t *j = trace_stats_json(s);
    assert_int_equal(json_array_size(json_object_get(j, "steps")), 2);
    assert_close(num(j, "steps/0/step"), 0, 0);
    assert_close(num(j, "steps/1/step"), 1, 0);
    assert_close(num(j, "steps/0/generated_tokens/mean"), 5.5, 1e-12);
    assert_close(num(j, "steps/1/generated_tokens/mean"), 15.5, 1e-12);
    assert_close(num(j, "steps/1/finish/truncated"), 1, 0);
    /* two steps, means 5.5 and 15.5: slope 10 tokens per step */
    assert_close(num(j, "drift/generated_tokens_per_step"), 10, 1e-12);
    assert_close(num(j, "drift/steps"), 2, 0);
    /* prompts i % 7: steps 1..10 and 11..20 each cover all 7 residues; epoch 1 (15..20)
     * covers residues 1..6, which epoch 0 has too, while residue 0 (7, 14) is epoch 0 only */
    assert_close(num(j, "prompts/distinct"), 7, 0);
    assert_close(num(j, "prompts/in_multiple_steps"), 7, 0);
    assert_close(num(j, "prompts/in_multiple_epochs"), 6, 0);
    json_decref(j);
    trace_stats_free(s);
}

/*
 * Adds a trajectory of prompt_id whose turns generate gen[0..n_turns) tokens; turn i < n_calls
 * ends in one call with status[i] and payload[i] (a truncated or aborted trajectory may call
 * after its last turn: n_calls == n_turns).
 */
static void add_traj(struct trace_stats *s, int64_t prompt_id, enum trace_finish finish,
                     const int64_t *gen, size_t n_turns, const enum trace_tool_status *status,
                     const int64_t *payload, size_t n_calls)
{
    struct trace_turn turns[8] = {0};
    struct trace_tool_call calls[8] = {0};
    assert_true(n_turns <= 8 && n_calls <= n_turns);
    for (size_t i = 0; i < n_turns; i++) {
        turns[i].prompt_tokens = 100;
        turns[i].cached_tokens = -1;
        turns[i].generated_tokens = gen[i];
        if (i < n_calls) {
            calls[i] = (struct trace_tool_call){.tool = "t",
                                                .status = status[i],
                                                .payload_tokens = payload[i],
                                                .queue_us = -1,
                                                .exec_us = -1};
            turns[i].calls = &calls[i];
            turns[i].n_calls = 1;
        }
    }
    struct trace_traj t = {
        .prompt_id = prompt_id, .turns = turns, .n_turns = n_turns, .finish = finish};
    trace_stats_add(s, &t);
}

/*
 * Ten completed trajectories with one return at depth 1 whose remaining tokens are 10, 20, …,
 * 100 (ranks 1..10, mean 5.5, sum of squared deviations 82.5):
 *   bad    = 0 0 0 1 0 1 0 1 1 1   (0s share rank 3, 1s rank 8: deviations -2.5 / +2.5)
 *     sxy = 2.5 (-1.5 + 0.5 + 2.5 + 3.5 + 4.5) - 2.5 (-4.5 - 3.5 - 2.5 - 0.5 + 1.5) = 47.5,
 *     sxx = 10 * 6.25 = 62.5, rho = 47.5 / sqrt(62.5 * 82.5) = 0.661487…
 *   payload = 5 5 1 2 3 3 3 9 8 7 (ranks 6.5 6.5 1 2 4 4 4 10 9 8)
 *     sxy = 41, sxx = 80, rho = 41 / sqrt(80 * 82.5) = 0.504673…
 * The last three (remaining 80, 90, 100) go on for a third turn after a second return whose
 * remaining tokens are 5, 6, 7: depth 2 has 3 returns, under 10, so it is skipped. Depth
 * itself over all 13 returns: depth ranks 5.5 (x10) and 12 (x3), remaining ranks 4..13 and
 * 1..3, so sxy = -1.5 * 15 + 5 * (-15) = -97.5, sxx = 97.5, syy = 182 and rho =
 * -sqrt(97.5 / 182) = -0.731925…
 * Three censored trajectories (two truncated, one aborted after a call on its last turn) with
 * 2 + 2 + 2 returns, whose bad returns at depth 1 have the most remaining tokens, would change
 * every figure if they counted.
 */
static void test_return_signal_ties_depths_and_censoring(void **state)
{
    struct trace_stats *s = trace_stats_new();
    static const int bad[10] = {0, 0, 0, 1, 0, 1, 0, 1, 1, 1};
    static const int64_t payload[10] = {5, 5, 1, 2, 3, 3, 3, 9, 8, 7};
    for (int i = 0; i < 10; i++) {
        int64_t remaining = 10 * (i + 1);
        enum trace_tool_status st[2] = {bad[i] ? (i == 9 ? TRACE_TOOL_TIMEOUT : TRACE_TOOL_FAILURE)
                                               : (i == 0 ? TRACE_TOOL_OTHER : TRACE_TOOL_SUCCESS),
                                        TRACE_TOOL_SUCCESS};
        int64_t pay[2] = {payload[i], 50};
        if (i < 7) {
            int64_t gen[2] = {1000, remaining};
            add_traj(s, i, TRACE_FINISH_COMPLETED, gen, 2, st, pay, 1);
        } else {
            int64_t last = i - 2; /* 5, 6, 7 */
            int64_t gen[3] = {1000, remaining - last, last};
            add_traj(s, i, i == 8 ? TRACE_FINISH_FILTERED : TRACE_FINISH_COMPLETED, gen, 3, st, pay,
                     2);
        }
    }
    enum trace_tool_status fail2[2] = {TRACE_TOOL_FAILURE, TRACE_TOOL_FAILURE};
    int64_t big[2] = {1, 1}, gen3[3] = {1, 5000, 9000};
    add_traj(s, 20, TRACE_FINISH_TRUNCATED, gen3, 3, fail2, big, 2);
    add_traj(s, 21, TRACE_FINISH_TRUNCATED, gen3, 3, fail2, big, 2);
    add_traj(s, 22, TRACE_FINISH_ABORTED, gen3, 2, fail2, big, 2);

    json_t *j = trace_stats_json(s);
    assert_close(num(j, "return_signal/returns"), 13, 0);
    assert_close(num(j, "return_signal/censored_trajectories"), 3, 0);
    assert_close(num(j, "return_signal/censored_returns"), 6, 0);
    assert_close(num(j, "return_signal/min_returns_per_depth"), 10, 0);
    assert_close(num(j, "return_signal/skipped_depths"), 1, 0);
    assert_close(num(j, "return_signal/skipped_returns"), 3, 0);
    assert_close(num(j, "return_signal/status/rho"), 47.5 / sqrt(62.5 * 82.5), 1e-12);
    assert_close(num(j, "return_signal/status/returns"), 10, 0);
    assert_close(num(j, "return_signal/status/depths"), 1, 0);
    assert_close(num(j, "return_signal/payload/rho"), 41 / sqrt(80 * 82.5), 1e-12);
    assert_close(num(j, "return_signal/payload/returns"), 10, 0);
    assert_close(num(j, "return_signal/depth/rho"), -sqrt(97.5 / 182), 1e-12);
    assert_close(num(j, "return_signal/depth/returns"), 13, 0);
    assert_int_equal(json_array_size(at(j, "return_signal/by_depth")), 1);
    assert_close(num(j, "return_signal/by_depth/0/depth"), 1, 0);
    assert_close(num(j, "return_signal/by_depth/0/returns"), 10, 0);
    assert_close(num(j, "return_signal/by_depth/0/status_rho"), 47.5 / sqrt(62.5 * 82.5), 1e-12);
    json_decref(j);
    trace_stats_free(s);
}

/*
 * Pooling: ten completed trajectories of three turns. Depth 1 is the case above (remaining
 * 10, 20, …, 100: turn 2 generates 9 (i + 1), turn 3 i + 1). At depth 2 the status is always
 * success (rho undefined: null and not pooled) while the payload 100 + i rises with the
 * remaining i + 1 (rho 1). Payload pools both depths weighted by returns, (10 * 0.504673… +
 * 10 * 1) / 20; status covers only depth 1's 10 returns.
 */
static void test_return_signal_pools_by_returns_and_skips_constant_features(void **state)
{
    struct trace_stats *s = trace_stats_new();
    static const int bad[10] = {0, 0, 0, 1, 0, 1, 0, 1, 1, 1};
    static const int64_t payload[10] = {5, 5, 1, 2, 3, 3, 3, 9, 8, 7};
    for (int i = 0; i < 10; i++) {
        enum trace_tool_status st[2] = {bad[i] ? TRACE_TOOL_FAILURE : TRACE_TOOL_SUCCESS,
                                        TRACE_TOOL_SUCCESS};
        int64_t pay[2] = {payload[i], 100 + i}, gen[3] = {1, 9 * (i + 1), i + 1};
        add_traj(s, i, TRACE_FINISH_COMPLETED, gen, 3, st, pay, 2);
    }
    json_t *j = trace_stats_json(s);
    double status1 = 47.5 / sqrt(62.5 * 82.5), payload1 = 41 / sqrt(80 * 82.5);
    assert_close(num(j, "return_signal/by_depth/1/depth"), 2, 0);
    assert_close(num(j, "return_signal/by_depth/1/returns"), 10, 0);
    assert_close(num(j, "return_signal/by_depth/1/payload_rho"), 1, 1e-12);
    assert_true(json_is_null(at(j, "return_signal/by_depth/1/status_rho")));
    assert_close(num(j, "return_signal/status/rho"), status1, 1e-12);
    assert_close(num(j, "return_signal/status/returns"), 10, 0);
    assert_close(num(j, "return_signal/status/depths"), 1, 0);
    assert_close(num(j, "return_signal/payload/rho"), (10 * payload1 + 10 * 1.0) / 20, 1e-12);
    assert_close(num(j, "return_signal/payload/returns"), 20, 0);
    assert_close(num(j, "return_signal/payload/depths"), 2, 0);
    assert_close(num(j, "return_signal/skipped_depths"), 0, 0);
    assert_close(num(j, "return_signal/censored_trajectories"), 0, 0);
    json_decref(j);
    trace_stats_free(s);
}

/*
 * Adds, for each group, trajectories of prompt_id = group index whose generated tokens are
 * 2^a - 1, so that log(1 + tokens) = a ln 2; ICC(1) does not change with the scale, so the
 * figures below are worked out on a directly.
 */
static struct trace_stats *groups_of(const int *const *a, const size_t *sizes, size_t n_groups)
{
    struct trace_stats *s = trace_stats_new();
    for (size_t g = 0; g < n_groups; g++)
        for (size_t k = 0; k < sizes[g]; k++) {
            int64_t gen[1] = {((int64_t)1 << a[g][k]) - 1};
            add_traj(s, (int64_t)g, TRACE_FINISH_COMPLETED, gen, 1, NULL, NULL, 0);
        }
    return s;
}

static void test_task_effect_icc(void **state)
{
    /*
     * Balanced: {1, 3}, {5, 7}, {9, 11}, plus a prompt seen once ({4}: left out). Means 2, 6,
     * 10, grand 6: SSB = 2 (16 + 0 + 16) = 64, MSB = 32; SSW = 3 * 2 = 6, MSW = 6 / 3 = 2;
     * n0 = 2: ICC = (32 - 2) / (32 + 2) = 30 / 34.
     */
    static const int b0[] = {1, 3}, b1[] = {5, 7}, b2[] = {9, 11}, b3[] = {4};
    const int *balanced[] = {b0, b1, b2, b3};
    struct trace_stats *s = groups_of(balanced, (const size_t[]){2, 2, 2, 1}, 4);
    json_t *j = trace_stats_json(s);
    assert_close(num(j, "task_effect/icc1"), 30.0 / 34.0, 1e-12);
    assert_close(num(j, "task_effect/prompts"), 3, 0);
    assert_close(num(j, "task_effect/trajectories"), 6, 0);
    assert_close(num(j, "task_effect/mean_square_between"), 32 * log(2.0) * log(2.0), 1e-12);
    assert_close(num(j, "task_effect/mean_square_within"), 2 * log(2.0) * log(2.0), 1e-12);
    json_decref(j);
    trace_stats_free(s);

    /*
     * Unbalanced: {1, 3, 5}, {7, 9}. N = 5, k = 2, grand mean 5, means 3 and 8: SSB = 3 * 4 +
     * 2 * 9 = 30 = MSB; SSW = 8 + 2 = 10, MSW = 10 / 3; n0 = 5 - 13 / 5 = 2.4: ICC =
     * (30 - 10/3) / (30 + 1.4 * 10/3) = 80 / 104.
     */
    static const int u0[] = {1, 3, 5}, u1[] = {7, 9};
    const int *unbalanced[] = {u0, u1};
    s = groups_of(unbalanced, (const size_t[]){3, 2}, 2);
    j = trace_stats_json(s);
    assert_close(num(j, "task_effect/icc1"), 80.0 / 104.0, 1e-12);
    json_decref(j);
    trace_stats_free(s);

    /* No prompt effect: {1, 5}, {2, 4} have equal means: MSB = 0, MSW = 5, ICC = -1 -> 0. */
    static const int n0[] = {1, 5}, n1[] = {2, 4};
    const int *none[] = {n0, n1};
    s = groups_of(none, (const size_t[]){2, 2}, 2);
    j = trace_stats_json(s);
    assert_close(num(j, "task_effect/icc1"), 0, 0);
    json_decref(j);
    trace_stats_free(s);

    /* One prompt with repeats is not enough: null, 1 prompt counted. */
    const int *one[] = {u0, b3};
    s = groups_of(one, (const size_t[]){3, 1}, 2);
    j = trace_stats_json(s);
    assert_true(json_is_null(at(j, "task_effect/icc1")));
    assert_close(num(j, "task_effect/prompts"), 1, 0);
    json_decref(j);
    trace_stats_free(s);
}

static void test_empty_and_single_step(void **state)
{
    struct trace_stats *s = trace_stats_new();
    json_t *j = trace_stats_json(s);
    assert_close(num(j, "overall/generated_tokens/n"), 0, 0);
    assert_null(json_object_get(json_object_get(json_object_get(j, "overall"), "generated_tokens"),
                                "mean"));
    assert_true(
        json_is_null(json_object_get(json_object_get(j, "drift"), "generated_tokens_per_step")));
    assert_true(
        json_is_null(json_object_get(json_object_get(j, "overall"), "longest_5pct_token_share")));
    assert_true(json_is_null(at(j, "return_signal/status/rho")));
    assert_true(json_is_null(at(j, "return_signal/depth/rho")));
    assert_true(json_is_null(at(j, "task_effect/icc1")));
    json_decref(j);
    trace_stats_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overall_distributions),
        cmocka_unit_test(test_steps_prompts_and_drift),
        cmocka_unit_test(test_empty_and_single_step),
        cmocka_unit_test(test_return_signal_ties_depths_and_censoring),
        cmocka_unit_test(test_return_signal_pools_by_returns_and_skips_constant_features),
        cmocka_unit_test(test_task_effect_icc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
