/* Tests of the replan acceptance rule (src/plan/replan.c). */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/lifecycle.h"
#include "plan/replan.h"
#include "qwen14b_a800.h"

static struct plan_replan_input base(void)
{
    return (struct plan_replan_input){.fit = 1.0,
                                      .cur_step_s = 100.0,
                                      .cand_step_s = 80.0,
                                      .cur_counts = {4, 2, 1, 0},
                                      .cand_counts = {2, 2, 2, 0},
                                      .resident_tokens = {20000, 40000, 80000, 0},
                                      .min_gain_frac = 0.05,
                                      .horizon_steps = 10};
}

static void test_no_change(void **state)
{
    struct plan_replan_input in = base();
    memcpy(in.cand_counts, in.cur_counts, sizeof in.cur_counts);
    struct plan_replan_decision d;
    plan_replan_decide(&shape, hw, &settings, &in, &d);
    assert_false(d.accept);
    assert_false(d.differs);
    assert_string_equal(d.why, "no change");
}

static void test_costs_come_from_the_model(void **state)
{
    struct plan_replan_input in = base();
    struct plan_replan_decision d;
    plan_replan_decide(&shape, hw, &settings, &in, &d);
    assert_true(d.differs);
    assert_true(d.start_s > 0.0 && d.lost_kv_s > 0.0);
    /* the new group: trainer rank 0 plus every rollout GPU of the candidate fleet */
    int world = 1;
    for (int t = 0; t < PLAN_NTP; t++)
        world += (1 << t) * in.cand_counts[t];
    assert_true(d.group_rebuild_s == cost_group_rebuild_s(&settings.lifecycle, world));
    assert_true(d.group_rebuild_s > settings.lifecycle.group_fixed_s);
    assert_true(d.cost_s == d.start_s + d.lost_kv_s + d.group_rebuild_s);
    /* more resident context on the stopped TP1 instances costs more */
    in.resident_tokens[0] *= 2;
    struct plan_replan_decision more;
    plan_replan_decide(&shape, hw, &settings, &in, &more);
    assert_true(more.lost_kv_s > d.lost_kv_s);
    assert_true(more.start_s == d.start_s);
}

static void test_rules(void **state)
{
    struct plan_replan_input in = base();
    struct plan_replan_decision d;
    plan_replan_decide(&shape, hw, &settings, &in, &d);
    assert_true(d.accept);
    assert_string_equal(d.why, "accepted");
    in.cand_step_s = 97.0; /* 3 % < 5 % */
    plan_replan_decide(&shape, hw, &settings, &in, &d);
    assert_false(d.accept);
    assert_string_equal(d.why, "gain below plan.replan_min_gain_frac");
    in.cand_step_s = 80.0;
    in.horizon_steps = 1;
    in.cur_step_s = 80.0 + d.cost_s * 0.5 + 1e-9; /* gain below the cost over one step */
    in.min_gain_frac = 0.0;
    plan_replan_decide(&shape, hw, &settings, &in, &d);
    assert_false(d.accept);
    assert_string_equal(d.why, "gain does not repay the reconfiguration");
    in.cand_step_s = 120.0;
    plan_replan_decide(&shape, hw, &settings, &in, &d);
    assert_false(d.accept);
}

/* A model that mispredicts the running plan by more than PLAN_REPLAN_FIT ranks nothing: the
 * same large gain is refused at either side of the band and accepted at its edges. */
static void test_model_must_fit_the_running_plan(void **state)
{
    struct plan_replan_input in = base();
    struct plan_replan_decision d;
    const double fits[] = {1.0 / PLAN_REPLAN_FIT, PLAN_REPLAN_FIT};
    for (int i = 0; i < 2; i++) {
        in.fit = fits[i];
        plan_replan_decide(&shape, hw, &settings, &in, &d);
        assert_true(d.accept);
    }
    const double misfits[] = {0.42, 1.0 / PLAN_REPLAN_FIT - 1e-9, PLAN_REPLAN_FIT + 1e-9, 2.4, NAN};
    for (int i = 0; i < 5; i++) {
        in.fit = misfits[i];
        plan_replan_decide(&shape, hw, &settings, &in, &d);
        assert_false(d.accept);
        assert_true(d.differs);
        assert_string_equal(d.why, "the model does not fit the running plan");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_change),
        cmocka_unit_test(test_costs_come_from_the_model),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_model_must_fit_the_running_plan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
