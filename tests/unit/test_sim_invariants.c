/*
 * sim/: invariants of random runs. Small clusters and batches of the built-in workloads under
 * every mode, sync mode and transport, with failure injection, over-provisioning, trajectory
 * timeouts and dynamic sampling drawn at random (fixed seeds), instances lent and returned mid-run,
 * and libra with the elastic pool. Every run must keep its books: each trajectory ends once (the
 * simulator stops with LIBRA_EINTERNAL otherwise), every generated token is trained, wasted or
 * still in flight, per-step utilisations lie in [0, 1] and add up to the run's, trained
 * trajectories respect the staleness bound, each weight update flushes every live instance's cache,
 * no GPU serves two roles, and the same inputs give the same results (again as a rates-only
 * candidate run, without routing figures; a one-bucket fleet's under every router).
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_draw.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "util/rng.h"
#include "workload/preset.h"

struct world {
    struct spec_presets spec;
    struct workload_presets wl;
};

static int setup(void **state)
{
    struct world *w = test_calloc(1, sizeof *w);
    struct libra_error err = {0};
    assert_int_equal(spec_presets_init(&w->spec, &err), 0);
    assert_int_equal(workload_presets_init(&w->wl, &err), 0);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    spec_presets_free(&w->spec);
    workload_presets_free(&w->wl);
    test_free(w);
    return 0;
}

static struct sim_input input(const struct world *w, struct libra_config *c)
{
    return (struct sim_input){.cfg = c,
                              .hw = spec_hardware_find(&w->spec, c->cluster.hardware),
                              .model = spec_model_find(&w->spec, c->model.name),
                              .workload = workload_preset_find(&w->wl, c->workload.name)};
}

/* GPU ranges of instances are disjoint, inside one node, and clear of the training GPUs of a
 * disaggregated layout. */
static void check_roles(const struct sim_layout *l, const struct libra_config *c)
{
    int gpn = c->cluster.gpus_per_node;
    char used[256] = {0};
    assert_true(c->cluster.gpus <= (int)sizeof used);
    if (l->mode != SIM_COLOCATED)
        for (int g = 0; g < l->n_train; g++)
            used[g] = 'T';
    for (int i = 0; i < l->n_inst; i++) {
        const struct sim_instance_spec *in = &l->inst[i];
        assert_true(in->gpu >= 0 && in->gpu + in->tp <= c->cluster.gpus);
        assert_int_equal(in->gpu / gpn, (in->gpu + in->tp - 1) / gpn);
        for (int g = in->gpu; g < in->gpu + in->tp; g++) {
            if (used[g])
                fail_msg("GPU %d serves instance %d and %s", g, i,
                         used[g] == 'T' ? "training" : "another instance");
            used[g] = 'R';
        }
    }
}

static void check_books(const struct sim_result *r, const struct libra_config *c,
                        const struct sim_layout *l, bool fleet_changes)
{
    assert_int_equal(r->steps_run, c->rl.steps);
    assert_true(r->finished + r->aborted <= r->started);
    assert_true(r->timed_out <= r->aborted &&
                (r->timed_out == 0 || c->rl.trajectory_timeout_s > 0));
    int64_t discarded = 0;
    for (int w = SIM_WASTE_FILTERED; w < SIM_WASTES; w++)
        discarded += r->waste[w];
    assert_int_equal(r->generated_tokens, r->trained_tokens_all + discarded + r->unconsumed_tokens);
    int64_t trained = 0, hist = 0;
    int64_t waste[SIM_WASTES] = {0};
    double roll_busy_gpu_s = 0; /* Σ over measured steps of rollout utilisation × GPU-s */
    for (int s = 0; s < r->steps_run; s++) {
        for (int w = 0; w < SIM_WASTES; w++)
            waste[w] += r->steps[s].waste[w];
        assert_true(r->steps[s].train_util >= 0 && r->steps[s].train_util <= 1 + 1e-9);
        assert_true(r->steps[s].rollout_util >= 0 && r->steps[s].rollout_util <= 1 + 1e-9);
        if (s >= r->warmup)
            roll_busy_gpu_s += r->steps[s].rollout_util * r->steps[s].rollout_gpu_s;
        trained += r->steps[s].trajectories;
        assert_true(r->steps[s].mean_staleness <= c->rl.max_staleness);
        assert_true(r->steps[s].step_s > 0);
        assert_true(s == 0 || r->steps[s].end_s > r->steps[s - 1].end_s);
    }
    assert_memory_equal(waste, r->waste, sizeof waste);
    /* the run's rollout utilisation is its measured steps' weighted by their GPU-seconds in
     * rollout (by their durations while the fleet is fixed) */
    assert_close(roll_busy_gpu_s, r->rollout_util * r->rollout_gpu_s, 1e-9);
    for (int k = 0; k <= c->rl.max_staleness; k++)
        hist += r->staleness[k];
    if (l->mode != SIM_ROLLOUT)
        assert_int_equal(hist, trained);
    if (l->mode == SIM_COLOCATED)
        assert_int_equal(hist, r->staleness[0]);
    if (c->sim.fail_time_s < 0 && !fleet_changes && !l->n_hybrid) {
        int64_t updates = l->mode == SIM_COLOCATED ? r->steps_run
                          : l->mode == SIM_ROLLOUT ? 0
                                                   : r->syncs;
        assert_int_equal(r->cache_flushes, updates * l->n_inst);
        assert_int_equal(r->failed_turns, 0);
    }
    if (l->mode == SIM_ASYNC || l->mode == SIM_LIBRA) {
        int64_t due = (c->rl.steps - 1) / c->rl.sync_interval;
        assert_true(r->syncs <= due && r->syncs >= due - 1);
    }
}

/* Random lends and returns of instances other than the first (one always serves), on
 * their own stream so that the other draws stay as they were. Returns their count. */
static size_t draw_fleet(int i, const struct sim_layout *l, struct sim_fleet_change *out)
{
    struct rng g = rng_keyed(20260101, 0x666c6565, (uint64_t)i, 0);
    if (l->n_inst < 2 || !rng_bernoulli(&g, 0.4))
        return 0;
    size_t n = 1 + rng_uniform_int(&g, 4);
    for (size_t k = 0; k < n; k++)
        out[k] = (struct sim_fleet_change){5.0 + 200.0 * rng_uniform(&g),
                                           1 + (int)rng_uniform_int(&g, (uint64_t)l->n_inst - 1),
                                           (enum sim_fleet_op)rng_uniform_int(&g, 2)};
    return n;
}

static void run_one(const struct world *w, struct libra_config *c, enum sim_mode mode, int i)
{
    struct rng g = rng_keyed(20260102, 0x656870, (uint64_t)i, 0); /* the pool, on its own */
    c->ehp.enabled = mode == SIM_LIBRA && rng_bernoulli(&g, 0.6);
    struct sim_input in = input(w, c);
    struct sim_layout l;
    struct sim_result r, again;
    struct libra_error err = {0};
    int tp = 1 << (int)(i % 3);
    int rc = sim_layout_make(&in, mode, 8, tp, &l, &err);
    if (rc)
        fail_msg("run %d (%s, %s): layout: %s", i, sim_mode_name(mode), c->workload.name, err.msg);
    check_roles(&l, c);
    if (l.n_inst < 2)
        c->sim.fail_time_s = -1; /* a lone instance's failure ends the run (test_sim_core) */
    struct sim_fleet_change fleet[4];
    struct sim_run_opts o = {.steps = c->rl.steps, .warmup = 1, .perfetto_step = -1};
    o.fleet = fleet;
    o.n_fleet = draw_fleet(i, &l, fleet);
    rc = sim_run(&in, &l, &o, &r, &err);
    if (rc)
        fail_msg("run %d (%s, %s, sync %d, transport %d, %zu fleet changes): %s", i,
                 sim_mode_name(mode), c->workload.name, c->rl.sync_mode, c->rl.transport, o.n_fleet,
                 err.msg);
    check_books(&r, c, &l, o.n_fleet > 0);
    o.rates_only = true; /* the same run without its routing figures (a candidate's) */
    assert_int_equal(sim_run(&in, &l, &o, &again, &err), 0);
    assert_non_null(r.routing);
    assert_null(again.routing);
    assert_true(again.tokens_per_s == r.tokens_per_s);
    assert_int_equal(again.steps_run, r.steps_run);
    assert_memory_equal(again.steps, r.steps, sizeof *r.steps * (size_t)r.steps_run);
    assert_memory_equal(again.waste, r.waste, sizeof r.waste);
    sim_result_free(&again);
    sim_result_free(&r);
    sim_layout_free(&l);
}

static void test_random_runs(void **state)
{
    const struct world *w = *state;
    struct rng g = rng_keyed(20251130, 0x73696d, 0, 0);
    for (int i = 0; i < 40; i++) {
        struct libra_config c;
        enum sim_mode mode;
        sim_draw(&g, &c, &mode);
        run_one(w, &c, mode, i);
    }
}

/* A fleet of one bucket under every router: a candidate's rates-only run routes it without the
 * router's model (sim/core.c), and must place every turn as the full run does. */
static void test_one_bucket_runs(void **state)
{
    const struct world *w = *state;
    struct rng g = rng_keyed(20261205, 0x6f6e65, 0, 0);
    for (int i = 0; i < 3 * SCHED_POLICY_COUNT; i++) {
        struct libra_config c;
        enum sim_mode mode;
        sim_draw(&g, &c, &mode);
        c.sim.planner = false;
        snprintf(c.sched.buckets, sizeof c.sched.buckets, "%s",
                 i % 2 ? "tp2x4:40000" : "tp1x8:500");
        c.sched.policy = (enum sched_policy)(i % SCHED_POLICY_COUNT);
        run_one(w, &c, SIM_LIBRA, 100 + i);
    }
}

/* The planner's layout for the paper's R2E-Gym setup keeps roles apart too. */
static void test_planner_roles(void **state)
{
    const struct world *w = *state;
    struct libra_config c;
    spec_config_defaults(&c);
    c.cluster.gpus_per_node = 8;
    c.rl.samples = 4;
    struct sim_input in = input(w, &c);
    struct sim_layout l;
    struct libra_error err = {0};
    assert_int_equal(sim_layout_make(&in, SIM_LIBRA, 0, 0, &l, &err), 0);
    assert_true(l.planned);
    assert_int_equal(l.policy, SCHED_CMLFQ);
    int roll = 0;
    for (int i = 0; i < l.n_inst; i++)
        roll += l.inst[i].tp;
    assert_true(l.n_train + roll <= c.cluster.gpus);
    check_roles(&l, &c);
    sim_layout_free(&l);
}

/* Settings a disaggregated mode cannot run are refused, not simulated. */
static void test_refusals(void **state)
{
    const struct world *w = *state;
    struct libra_config c;
    spec_config_defaults(&c);
    c.cluster.gpus_per_node = 8;
    c.rl.samples = 4;
    c.rl.steps = 2;
    struct sim_input in = input(w, &c);
    struct sim_layout l;
    struct sim_result r;
    struct libra_error err = {0};
    struct sim_run_opts o = {.steps = 2, .warmup = 0, .perfetto_step = -1};
    assert_int_equal(sim_layout_make(&in, SIM_ASYNC, 32, 2, &l, &err), 0);
    c.rl.transport = SPEC_TRANSPORT_RESHARD;
    assert_int_equal(sim_run(&in, &l, &o, &r, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "rl.transport: reshard"));
    sim_result_free(&r);
    c.rl.transport = SPEC_TRANSPORT_DISK_RESTART;
    c.rl.sync_mode = SPEC_SYNC_KEEP;
    assert_int_equal(sim_run(&in, &l, &o, &r, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "rl.sync_mode: keep"));
    sim_result_free(&r);
    c.rl.sync_mode = SPEC_SYNC_DRAIN;
    c.rl.max_staleness = 3;
    assert_int_equal(sim_run(&in, &l, &o, &r, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "rl.max_staleness: 3 is below"));
    sim_result_free(&r);
    sim_layout_free(&l);
    assert_int_equal(sim_layout_make(&in, SIM_ROLLOUT, 0, 0, &l, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "sched.buckets"));
    sim_layout_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_runs),
        cmocka_unit_test(test_one_bucket_runs),
        cmocka_unit_test(test_planner_roles),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
