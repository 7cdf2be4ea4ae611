/* Tests of the rules of an RL job (src/job/job.c). */
#include "testutil.h"

#include "job/job.h"

static void test_admission_staleness_and_schedule(void **state)
{
    struct job_rules j = {
        .groups_per_batch = 8, .max_staleness = 2, .sync_interval = 3, .extra_groups = 1};
    /* At version 0 the groups of batches 0..2 may run, plus the extra one. */
    assert_int_equal(job_admit_limit(&j, 0, 0), 3 * 8 + 1);
    /* Each lost group is replaced; each version admits one more batch. */
    assert_int_equal(job_admit_limit(&j, 1, 5), 4 * 8 + 5 + 1);
    assert_true(job_fresh(&j, 5, 3));
    assert_false(job_fresh(&j, 6, 3));
    assert_true(job_fresh(&j, 0, 0));
    assert_false(job_sync_due(&j, 1));
    assert_true(job_sync_due(&j, 3));
    assert_true(job_sync_due(&j, 6));
}

static void test_a_run_admits_no_group_past_its_last_batch(void **state)
{
    struct job_rules j = {
        .groups_per_batch = 4, .max_staleness = 2, .sync_interval = 1, .extra_groups = 2};
    /* Three batches of a five-batch run may start, and the extra groups. */
    assert_int_equal(job_admit_limit_run(&j, 0, 0, 5), 3 * 4 + 2);
    /* A two-batch run needs its eight groups, and a replacement for each lost one. */
    assert_int_equal(job_admit_limit_run(&j, 0, 0, 2), 2 * 4);
    assert_int_equal(job_admit_limit_run(&j, 1, 3, 2), 2 * 4 + 3);
    /* Near the end the window is wider than the run: the run's need decides. */
    assert_int_equal(job_admit_limit_run(&j, 4, 1, 5), 5 * 4 + 1);
}

static void test_rules_from_the_config(void **state)
{
    struct libra_config cfg = {0};
    cfg.rl.batch_trajectories = 32;
    cfg.rl.samples = 4;
    cfg.rl.max_staleness = 4;
    cfg.rl.sync_interval = 5;
    cfg.rl.overprovision_frac = 0.2;
    struct job_rules j;
    job_rules_from_config(&j, &cfg);
    assert_int_equal(j.groups_per_batch, 8);
    assert_int_equal(j.max_staleness, 4);
    assert_int_equal(j.sync_interval, 5);
    assert_int_equal(j.extra_groups, 2); /* ceil(0.2 * 8) */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_staleness_and_schedule),
        cmocka_unit_test(test_a_run_admits_no_group_past_its_last_batch),
        cmocka_unit_test(test_rules_from_the_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
