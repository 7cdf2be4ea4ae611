/*
 * The planner's differential test at 64 and 96 GPUs (label slow): the plan equals the brute
 * force of plan_brute.h over every feasible configuration, as test_plan_search.c checks on up
 * to 32 GPUs.
 */
#include "testutil.h"

#include "plan/plan.h"
#include "plan_brute.h"

static struct spec_presets presets;
static struct plan_settings settings;

static int setup(void **state)
{
    struct libra_error err;
    if (spec_presets_init(&presets, &err) != 0)
        return -1;
    plan_settings_default(&settings, spec_hardware_find(&presets, "a800-80g"));
    return 0;
}

static int teardown(void **state)
{
    spec_presets_free(&presets);
    return 0;
}

static void check(uint64_t seed, int gpus)
{
    struct brute_case bc;
    brute_case_make(&bc, &presets, &settings, seed, gpus);
    bc.cfg.cluster.gpus = gpus;
    struct plan_result r;
    struct libra_error err = {0};
    assert_int_equal(plan_solve(&bc.p, &r, &err), 0);
    struct brute_best b;
    brute_solve(&bc, &b);
    bool same = brute_same(&r, &b);
    if (!same)
        print_error("seed %llu at %d GPUs: plan %d %.17g n_train %d counts %d %d %d %d; brute %d "
                    "%.17g n_train %d counts %d %d %d %d\n",
                    (unsigned long long)seed, bc.cfg.cluster.gpus, r.feasible, r.step_s, r.n_train,
                    r.counts[0], r.counts[1], r.counts[2], r.counts[3], b.found, b.obj, b.n_train,
                    b.c[0], b.c[1], b.c[2], b.c[3]);
    assert_true(same);
    plan_result_free(&r);
    brute_case_free(&bc);
}

static void test_differential_64(void **state)
{
    for (uint64_t seed = 1; seed <= 60; seed++)
        check(seed, 64);
}

static void test_differential_96(void **state)
{
    for (uint64_t seed = 101; seed <= 140; seed++)
        check(seed, 96);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_differential_64),
        cmocka_unit_test(test_differential_96),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
