/*
 * sim/: online replanning in the libra mode (sim/replan.c). R2E-Gym on Qwen3-4B, 24 GPUs,
 * batch 64, the planner held to two TP sizes and verification off: the first window of
 * finished launches plans another fleet than the one the run starts on, and a rule forced to
 * accept any gain (plan.replan_min_gain_frac 0, a horizon of every step left) replans. The run
 * keeps its books through the replans, keeps the split's GPUs in rollout, and is a pure
 * function of its input; evaluations that accept nothing leave every step as a run without
 * replanning has it; a candidate the start's verification measured is weighed by that, and a
 * gain is counted over the steps left. Random experiments under the forced rule (workload, GPUs,
 * group size, TP sizes, triggers, seed) hold the same books.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "sim/sim.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "util/rng.h"
#include "workload/preset.h"

struct world {
    struct spec_presets spec;
    struct workload_presets wl;
    struct libra_config cfg;
    struct sim_input in;
    struct sim_layout lay;
};

static int setup(void **state)
{
    struct world *w = test_calloc(1, sizeof *w);
    struct libra_error err = {0};
    assert_int_equal(spec_presets_init(&w->spec, &err), 0);
    assert_int_equal(workload_presets_init(&w->wl, &err), 0);
    struct libra_config *c = &w->cfg;
    spec_config_defaults(c);
    snprintf(c->model.name, sizeof c->model.name, "qwen3-4b");
    snprintf(c->workload.name, sizeof c->workload.name, "r2e-gym");
    c->cluster.gpus = 24;
    c->cluster.gpus_per_node = 8;
    c->rl.batch_trajectories = 64;
    c->rl.samples = 16;
    c->rl.steps = 24;
    c->sim.modes = SPEC_SIM_LIBRA;
    c->plan.min_tp_sizes = 2;
    c->plan.verify_candidates = 0;
    c->sim.seed = 3; /* a seed whose first window plans another fleet */
    w->in = (struct sim_input){.cfg = c,
                               .hw = spec_hardware_find(&w->spec, c->cluster.hardware),
                               .model = spec_model_find(&w->spec, c->model.name),
                               .workload = workload_preset_find(&w->wl, c->workload.name)};
    if (sim_layout_make(&w->in, SIM_LIBRA, 0, 0, &w->lay, &err) != 0)
        fail_msg("layout: %s", err.msg);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;
    sim_layout_free(&w->lay);
    spec_presets_free(&w->spec);
    workload_presets_free(&w->wl);
    test_free(w);
    return 0;
}

/* Runs w's experiment, recording the timeline of steps 2..20 and the trace of step 11 when
 * record is set (the replans fall inside them). */
static void run(struct world *w, bool record, struct sim_result *r)
{
    struct libra_error err = {0};
    struct sim_run_opts o = {.steps = w->cfg.rl.steps,
                             .warmup = 2,
                             .perfetto_step = record ? 11 : -1,
                             .timeline = record,
                             .timeline_first = 2,
                             .timeline_last = 20};
    if (sim_run(&w->in, &w->lay, &o, r, &err) != 0)
        fail_msg("sim_run: %s", err.msg);
}

static int fleet_gpus(const int c[PLAN_NTP])
{
    int g = 0;
    for (int t = 0; t < PLAN_NTP; t++)
        g += c[t] << t;
    return g;
}

static void assert_books(const struct sim_result *r, const struct world *w)
{
    assert_int_equal(r->steps_run, w->cfg.rl.steps);
    int64_t discarded = 0;
    for (int k = SIM_WASTE_FILTERED; k < SIM_WASTES; k++)
        discarded += r->waste[k];
    assert_int_equal(r->generated_tokens, r->trained_tokens_all + discarded + r->unconsumed_tokens);
    assert_true(r->finished + r->aborted <= r->started);
}

/* The rule forced to accept any gain that repays its cost over the steps left. */
static void force(struct libra_config *c)
{
    c->plan.replan_min_gain_frac = 0;
    c->plan.replan_horizon_steps = 1000000;
}

static void test_forced_replans(void **state)
{
    struct world *w = *state;
    force(&w->cfg);
    struct sim_result r, again;
    run(w, true, &r);
    assert_true(r.replanning);
    assert_books(&r, w);
    int rollout = w->cfg.cluster.gpus - w->lay.n_train, accepted = 0, started = 0;
    for (size_t k = 0; k < r.n_replans; k++) {
        const struct sim_replan_eval *ev = &r.replans[k];
        assert_int_equal(fleet_gpus(ev->cur), rollout); /* the split's GPUs, always */
        assert_true(k == 0 || ev->step > r.replans[k - 1].step);
        if (ev->accepted) {
            accepted++;
            started += ev->started;
            assert_true(ev->started + ev->stopped > 0);
            assert_int_equal(fleet_gpus(ev->cand), rollout);
        }
    }
    assert_true(accepted >= 1);
    assert_int_equal(r.n_instances, w->lay.n_inst + started);
    assert_true(r.routing_since_step > 0);
    assert_non_null(r.perfetto);
    assert_int_equal(r.timeline->n_inst, r.n_instances); /* a row for each instance started */
    run(w, false, &again); /* a pure function of its input, recorded or not */
    assert_int_equal(again.n_replans, r.n_replans);
    assert_memory_equal(again.steps, r.steps, sizeof *r.steps * (size_t)r.steps_run);
    sim_result_free(&again);
    sim_result_free(&r);
}

static void test_evaluations_that_accept_nothing_change_nothing(void **state)
{
    struct world *w = *state;
    struct sim_result on, off;
    w->cfg.plan.replan_min_gain_frac = 1; /* no step can be cut by all of itself */
    run(w, false, &on);
    assert_true(on.replanning && on.n_replans > 0);
    for (size_t k = 0; k < on.n_replans; k++)
        assert_false(on.replans[k].accepted);
    w->cfg.plan.replan_interval_steps = 0;
    w->cfg.plan.replan_pressure = false;
    run(w, false, &off);
    assert_false(off.replanning);
    assert_int_equal(off.n_replans, 0);
    assert_memory_equal(on.steps, off.steps, sizeof *on.steps * (size_t)on.steps_run);
    assert_int_equal(on.n_instances, off.n_instances);
    sim_result_free(&on);
    sim_result_free(&off);
}

/* The evaluation of w's run after step `step`, or its first accepted one when step is -1,
 * copied to *out; false when none. */
static bool eval_of(struct world *w, int64_t step, struct sim_replan_eval *out)
{
    struct sim_result r;
    run(w, false, &r);
    bool found = false;
    for (size_t k = 0; k < r.n_replans && !found; k++)
        if (step < 0 ? r.replans[k].accepted : r.replans[k].step == step) {
            *out = r.replans[k];
            found = true;
        }
    sim_result_free(&r);
    return found;
}

/* Where the start's verification simulated both fleets, a replan weighs the candidate by what
 * it measured: a candidate measured at half the running fleet's rate is refused where the
 * model alone took it, and a fleet the verification did not simulate keeps the model's rule. */
static void test_measured_fleets_weigh_a_replan(void **state)
{
    struct world *w = *state;
    force(&w->cfg);
    struct sim_replan_eval took = {0};
    assert_true(eval_of(w, -1, &took));
    assert_true(isnan(took.measured_ratio));
    w->lay.n_measured = 1; /* the running fleet alone: nothing to weigh the candidate by */
    memcpy(w->lay.measured[0].counts, took.cur, sizeof took.cur);
    w->lay.measured[0].tokens_per_s = 1000;
    struct sim_replan_eval again = {0};
    assert_true(eval_of(w, -1, &again));
    assert_int_equal(again.step, took.step);
    assert_true(isnan(again.measured_ratio));
    w->lay.n_measured = 2;
    memcpy(w->lay.measured[1].counts, took.cand, sizeof took.cand);
    w->lay.measured[1].tokens_per_s = 500;
    struct sim_replan_eval now = {0};
    assert_true(eval_of(w, took.step, &now));
    assert_true(now.measured_ratio == 2.0);
    assert_false(now.accepted);
}

/* The verification keeps, in the layout it chooses, every async fleet it simulated at that
 * split with its figure (the mean of both seeds when raced): what a replan weighs by. */
static void test_the_verification_keeps_its_measured_fleets(void **state)
{
    struct world *w = *state;
    w->cfg.plan.verify_candidates = 4;
    w->cfg.plan.verify_steps = 4;
    struct sim_mode_result mr = {.mode = SIM_LIBRA};
    struct libra_error err = {0};
    if (sim_verify(&w->in, &mr, &err) != 0)
        fail_msg("sim_verify: %s", err.msg);
    int chosen[PLAN_NTP] = {0}, at_split = 0;
    for (int i = 0; i < mr.layout.n_inst; i++)
        chosen[spec_tp_index(mr.layout.inst[i].tp)]++;
    bool found = false;
    for (int i = 0; i < mr.n_verified; i++) {
        const struct sim_verified *v = &mr.verified[i];
        at_split += !v->colocated && v->n_train == mr.layout.n_train;
        if (!v->chosen)
            continue;
        double figure = v->raced ? (v->tokens_per_s + v->second_tokens_per_s) / 2 : v->tokens_per_s;
        for (int k = 0; k < mr.layout.n_measured; k++)
            found |= memcmp(mr.layout.measured[k].counts, chosen, sizeof chosen) == 0 &&
                     mr.layout.measured[k].tokens_per_s == figure;
    }
    assert_true(found);
    assert_int_equal(mr.layout.n_measured,
                     at_split < SIM_MEASURED_MAX ? at_split : SIM_MEASURED_MAX);
    sim_mode_result_free(&mr);
}

/* A replan's gain is counted over the steps the run has left when they are fewer than
 * plan.replan_horizon_steps: the forced run's first accepted replan, in a run that ends before
 * its gain repays its cost, is refused for that at the same step. */
static void test_a_replan_counts_its_gain_over_the_steps_left(void **state)
{
    struct world *w = *state;
    force(&w->cfg);
    struct sim_replan_eval took = {0};
    assert_true(eval_of(w, -1, &took));
    assert_true(took.gain_s > 0 && took.cost_s > took.gain_s);
    w->cfg.rl.steps = (int)took.step + (int)floor(took.cost_s / took.gain_s);
    struct sim_replan_eval now = {0};
    assert_true(eval_of(w, took.step, &now));
    assert_false(now.accepted);
    assert_string_equal(now.why, "gain does not repay the reconfiguration");
}

/* Random experiments under the forced rule: every one keeps its books and its split's GPUs in
 * rollout through whatever replans it makes, and runs the same twice. */
static void test_random_forced_replans(void **state)
{
    static const char *const workloads[] = {"dapo-math", "search-r1", "r2e-gym"};
    struct world *w = *state;
    struct rng g = rng_keyed(20261202, 0x72706c6e, 0, 0);
    int replans = 0;
    for (int i = 0; i < 5; i++) { /* the 4th and 5th draws replan */
        struct libra_config *c = &w->cfg;
        snprintf(c->workload.name, sizeof c->workload.name, "%s",
                 workloads[rng_uniform_int(&g, 3)]);
        c->cluster.gpus = 16 + 8 * (int)rng_uniform_int(&g, 3);
        c->rl.samples = 4 << rng_uniform_int(&g, 3);
        c->rl.batch_trajectories = 64;
        c->rl.steps = 30 + (int)rng_uniform_int(&g, 6);
        c->plan.min_tp_sizes = 1 + (int)rng_uniform_int(&g, 3);
        c->plan.replan_interval_steps = 1 + (int)rng_uniform_int(&g, 4);
        c->plan.replan_pressure = rng_bernoulli(&g, 0.5);
        force(c);
        c->sim.seed = 1 + (int64_t)rng_uniform_int(&g, 1000);
        w->in.workload = workload_preset_find(&w->wl, c->workload.name);
        sim_layout_free(&w->lay);
        struct libra_error err = {0};
        if (sim_layout_make(&w->in, SIM_LIBRA, 0, 0, &w->lay, &err) != 0)
            continue; /* no plan meets the draw (three TP sizes on 16 GPUs, say) */
        struct sim_result r, again;
        run(w, false, &r);
        assert_books(&r, w);
        int rollout = c->cluster.gpus - w->lay.n_train;
        for (size_t k = 0; k < r.n_replans; k++) {
            assert_int_equal(fleet_gpus(r.replans[k].cur), rollout);
            replans += r.replans[k].accepted;
        }
        run(w, false, &again);
        assert_memory_equal(again.steps, r.steps, sizeof *r.steps * (size_t)r.steps_run);
        sim_result_free(&again);
        sim_result_free(&r);
    }
    assert_true(replans > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_forced_replans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evaluations_that_accept_nothing_change_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_measured_fleets_weigh_a_replan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_verification_keeps_its_measured_fleets, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_replan_counts_its_gain_over_the_steps_left, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_random_forced_replans, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
