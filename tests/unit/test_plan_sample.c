/*
 * Tests of the length sample (src/plan/sample.c): its size rule, the buffer's view and clamps,
 * and a solve on it against plan_solve on the same arrays assembled by hand.
 */
#include "testutil.h"

#include <string.h>

#include "plan/sample.h"

static void test_sample_size(void **state)
{
    (void)state;
    assert_int_equal(plan_sample_size(32), 256);  /* 8 batches hold 256 */
    assert_int_equal(plan_sample_size(100), 300); /* the fewest whole batches holding 256 */
    assert_int_equal(plan_sample_size(8), 64);    /* at most 8 batches */
    assert_int_equal(plan_sample_size(1), 8);
    assert_int_equal(plan_sample_size(1024), 1024); /* one batch even when it holds more */
}

static void test_lengths_view_and_clamps(void **state)
{
    (void)state;
    struct plan_lengths l = {0};
    plan_lengths_add(&l, 100, 900, 30, 3, 2.5, false);
    plan_lengths_add(&l, 0, -4, 0, 1, 0.0, true); /* cut before its first token */
    struct plan_sample s = plan_lengths_view(&l);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.prompt_tokens[0], 100);
    assert_int_equal(s.generated_tokens[0], 900);
    assert_int_equal(s.tool_tokens[0], 30);
    assert_int_equal(s.turns[0], 3);
    assert_int_equal(s.prompt_tokens[1], 1);
    assert_int_equal(s.generated_tokens[1], 1);
    assert_true(l.tool_s.v[0] == 2.5 && l.filtered.v[1] && !l.filtered.v[0]);
    plan_lengths_free(&l);
    assert_int_equal(l.prompt.n, 0);
    plan_lengths_free(&l); /* twice is fine */
}

/* plan_solve_lengths is plan_solve with the config's settings on the buffer's arrays. */
static void test_solve_is_plan_solve(void **state)
{
    (void)state;
    struct spec_presets presets;
    struct libra_error err = {0};
    assert_int_equal(spec_presets_init(&presets, &err), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    cfg.cluster.gpus = 16;
    cfg.cluster.gpus_per_node = 8;
    cfg.rl.batch_trajectories = 8;
    cfg.rl.samples = 4;
    const struct spec_hardware *hw = spec_hardware_find(&presets, cfg.cluster.hardware);
    const struct spec_model *model = spec_model_find(&presets, cfg.model.name);
    struct plan_lengths l = {0};
    for (int i = 0; i < 16; i++)
        plan_lengths_add(&l, 500 + 10 * i, 1000 + 700 * i, 40 * i, 1 + i % 5, 0.5 * i, false);
    struct plan_result a, b;
    int rc = plan_solve_lengths(&l, &cfg, hw, model, NULL, NULL, &a, &err);
    if (rc)
        fail_msg("%s", err.msg);
    struct plan_settings st;
    plan_settings_from_config(&st, hw, &cfg);
    struct plan_problem p = {.cfg = &cfg,
                             .hw = hw,
                             .model = model,
                             .settings = &st,
                             .sample = plan_lengths_view(&l),
                             .tool_s = l.tool_s.v,
                             .filtered = l.filtered.v};
    assert_int_equal(plan_solve(&p, &b, &err), 0);
    assert_true(a.feasible && b.feasible);
    assert_true(a.step_s == b.step_s);
    assert_memory_equal(a.counts, b.counts, sizeof a.counts);
    assert_memory_equal(&a.layout, &b.layout, sizeof a.layout);
    assert_true(a.tool_s_mean == b.tool_s_mean);
    plan_result_free(&a);
    plan_result_free(&b);
    /* fewer trajectories than a batch: the planner's own refusal */
    struct plan_lengths few = {0};
    plan_lengths_add(&few, 10, 10, 0, 1, 0, false);
    assert_int_equal(plan_solve_lengths(&few, &cfg, hw, model, NULL, NULL, &a, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "fewer than one batch"));
    plan_result_free(&a);
    plan_lengths_free(&few);
    plan_lengths_free(&l);
    spec_presets_free(&presets);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_size),
        cmocka_unit_test(test_lengths_view_and_clamps),
        cmocka_unit_test(test_solve_is_plan_solve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
