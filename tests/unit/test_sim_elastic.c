/*
 * sim/: the elastic hybrid pool in the libra mode, on a layout built by hand: a core training
 * replica (TP2, GPUs 0-1), one hybrid replica of the same layout (GPUs 2-3) serving rollout as
 * a TP2 instance until borrowed, and a core rollout instance (GPUs 4-5). Short turns make the
 * run training-bound, so the signal borrows the hybrid after the first step: its instance is
 * lent, its join runs through the pool's phases (ehp/pool.h) and it trains from a later step,
 * the batch shared with the core. A failure of a member mid-join rolls the join back and loses
 * the replica for good: it is never lent again, and training never waits for it.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "sim/sim.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "workload/preset.h"

struct fixture {
    struct spec_presets presets;
    struct libra_config cfg;
    struct workload_preset pools;
    struct trace_traj trajs[4];
    struct trace_turn turns[4][2];
    struct trace_tool_call calls[4];
    struct sim_trace trace;
    struct sim_input in;
    struct sim_instance_spec inst[2];
    struct sim_layout lay;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    struct libra_error err = {0};
    assert_int_equal(spec_presets_init(&f->presets, &err), 0);
    spec_config_defaults(&f->cfg);
    snprintf(f->cfg.model.name, sizeof f->cfg.model.name, "qwen3-4b");
    f->cfg.cluster.gpus = 6;
    f->cfg.cluster.gpus_per_node = 8;
    f->cfg.rl.batch_trajectories = 4;
    f->cfg.rl.samples = 4;
    f->cfg.rl.steps = 8;
    f->cfg.rl.sync_interval = 1;
    f->cfg.rl.max_staleness = 1;
    f->cfg.rl.transport = SPEC_TRANSPORT_NCCL;
    f->cfg.sim.warmup_steps = 0;
    f->cfg.sim.modes = SPEC_SIM_LIBRA;
    f->cfg.ehp.enabled = true;
    f->cfg.plan.min_rollout_gpus = 2;
    snprintf(f->pools.name, sizeof f->pools.name, "toy");
    f->pools.n_tools = 1;
    snprintf(f->pools.tools[0].name, sizeof f->pools.tools[0].name, "bash");
    f->in = (struct sim_input){.cfg = &f->cfg,
                               .hw = spec_hardware_find(&f->presets, "a800-80g"),
                               .model = spec_model_find(&f->presets, "qwen3-4b"),
                               .workload = &f->pools,
                               .trace = &f->trace};
    /* a group of four two-turn trajectories of long contexts and short generations: a
     * step trains far longer than its rollout takes */
    for (int i = 0; i < 4; i++) {
        f->calls[i] = (struct trace_tool_call){.tool = "bash",
                                               .status = TRACE_TOOL_SUCCESS,
                                               .payload_tokens = 200,
                                               .queue_us = -1,
                                               .exec_us = 500000};
        f->turns[i][0] = (struct trace_turn){.prompt_tokens = 6000,
                                             .cached_tokens = -1,
                                             .generated_tokens = 50 + 10 * i,
                                             .calls = &f->calls[i],
                                             .n_calls = 1};
        f->turns[i][1] = (struct trace_turn){
            .prompt_tokens = 6300 + 10 * i, .cached_tokens = -1, .generated_tokens = 40};
        f->trajs[i] = (struct trace_traj){.prompt_id = 0,
                                          .sample = i,
                                          .turns = f->turns[i],
                                          .n_turns = 2,
                                          .finish = TRACE_FINISH_COMPLETED};
    }
    f->trace = (struct sim_trace){.trajs = f->trajs, .n = 4, .workload = "toy"};
    f->inst[0] = (struct sim_instance_spec){.tp = 2, .bucket = 0, .gpu = 4, .hybrid = 0};
    f->inst[1] = (struct sim_instance_spec){.tp = 2, .bucket = 0, .gpu = 2, .hybrid = 1};
    f->lay = (struct sim_layout){
        .mode = SIM_LIBRA,
        .n_train = 2,
        .train = {.tp = 2, .pp = 1, .cp = 1, .dp = 1, .budget_tokens = 8192},
        .n_inst = 2,
        .inst = f->inst,
        .buckets = {.n = 1,
                    .bucket = {{.max_tokens = 1000000, .n_tp = 1, .tp = {2}, .instances = {2}}}},
        .policy = SCHED_LOAD_BALANCE,
        .pool = true,
        .n_hybrid = 1,
        .replica_gpus = 2};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    spec_presets_free(&f->presets);
    test_free(f);
    return 0;
}

static void run(struct fixture *f, struct sim_result *r)
{
    struct sim_run_opts o = {.steps = f->cfg.rl.steps, .warmup = 0, .perfetto_step = -1};
    struct libra_error err = {0};
    if (sim_run(&f->in, &f->lay, &o, r, &err) != 0)
        fail_msg("sim_run: %s", err.msg);
}

static void assert_books(const struct sim_result *r)
{
    int64_t discarded = 0;
    for (int w = SIM_WASTE_FILTERED; w < SIM_WASTES; w++)
        discarded += r->waste[w];
    assert_int_equal(r->generated_tokens, r->trained_tokens_all + discarded + r->unconsumed_tokens);
    for (int k = 0; k < r->steps_run; k++)
        assert_true(r->steps[k].rollout_util >= 0 && r->steps[k].rollout_util <= 1);
}

/* The first step of r whose membership has the hybrid training; -1 when none. */
static int first_borrowed(const struct sim_result *r)
{
    for (int k = 0; k < r->steps_run; k++)
        if (r->steps[k].pool.hybrid_gpus > 0)
            return k;
    return -1;
}

/* Training-bound: the hybrid is borrowed after the first step and trains from a later one,
 * which then takes less time than the core alone took on the same batch. */
static void test_borrow(void **state)
{
    struct fixture *f = *state;
    struct sim_result r;
    run(f, &r);
    assert_int_equal(r.steps_run, 8);
    assert_int_equal(r.steps[0].pool.hybrid_gpus, 0);
    assert_int_equal(r.steps[0].pool.train_gpus, 2);
    assert_int_equal(r.steps[0].pool.replicas[0], 1); /* in rollout at the step's end: */
    assert_int_equal(r.steps[0].pool.joins, 0);       /* the signal comes after it */
    assert_true(r.pool.joins >= 1);
    assert_true(r.pool.activated >= 1);
    int k = first_borrowed(&r);
    assert_true(k >= 1);
    assert_int_equal(r.steps[k].pool.train_gpus, 4);
    /* the batch is the same every step (one trace group): shared, it trains faster */
    assert_true(r.steps[k].train_s < r.steps[0].train_s);
    /* the hybrid's instance was lent: the core rollout instance served the turns meanwhile */
    assert_true(r.requests_by_instance[0] > r.requests_by_instance[1]);
    assert_books(&r);
    sim_result_free(&r);
}

/* Without the pool's hybrids in the layout nothing is lent and every step is the core's. */
static void test_no_hybrid(void **state)
{
    struct fixture *f = *state;
    f->lay.n_hybrid = 0;
    f->inst[1].hybrid = 0;
    struct sim_result r;
    run(f, &r);
    assert_int_equal(r.pool.joins, 0);
    assert_int_equal(first_borrowed(&r), -1);
    sim_result_free(&r);
}

/* A member of the hybrid fails while it joins: the join rolls back, the replica leaves the pool
 * (never lent again; its dead GPUs counted nowhere) and no step waits: every step until the
 * failed join would have activated ends when it ends without the failure. (Weights go by disk here:
 * an NCCL update would rebuild its group for the fleet that changed back, a cost of the update, not
 * of the join.) */
static void test_member_fails_mid_join(void **state)
{
    struct fixture *f = *state;
    struct sim_result base, r;
    f->cfg.rl.transport = SPEC_TRANSPORT_DISK_RELOAD;
    run(f, &base);
    int k = first_borrowed(&base);
    assert_true(k >= 1);
    double join_from = base.steps[0].end_s;
    f->cfg.sim.fail_time_s = join_from + 1; /* seconds: trainers are still starting */
    f->cfg.sim.fail_instance = 1;           /* the hybrid's instance */
    run(f, &r);
    assert_int_equal(r.pool.failed, 1);
    assert_int_equal(r.failed_turns, 0); /* its engine was stopped already: no turn lost */
    for (int s = 0; s < k; s++)
        assert_close(r.steps[s].end_s, base.steps[s].end_s, 1e-12);
    assert_int_equal(first_borrowed(&r), -1); /* the lost replica never trained */
    assert_int_equal(r.pool.joins, 1);
    assert_int_equal(r.steps_run, 8);
    for (int s = 0; s < r.steps_run; s++) {
        int dead = r.steps[s].end_s > f->cfg.sim.fail_time_s ? 2 : 0;
        assert_true(r.steps[s].pool.train_gpus + r.steps[s].pool.rollout_gpus <= 6 - dead);
    }
    assert_books(&r);
    sim_result_free(&base);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_borrow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_hybrid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_member_fails_mid_join, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
