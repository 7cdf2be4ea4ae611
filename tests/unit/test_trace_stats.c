/* Tests of trace statistics (src/trace/stats.c) on hand-built traces whose figures are worked
 * out in the comments: quantiles, tail shares, mixes, per-step blocks, recurrence, drift. */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "trace/stats.h"

static double num(const json_t *root, const char *path)
{
    const json_t *v = root;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save, *tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(tok)) : json_object_get(v, tok);
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
    json_decref(j);
    trace_stats_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overall_distributions),
        cmocka_unit_test(test_steps_prompts_and_drift),
        cmocka_unit_test(test_empty_and_single_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
