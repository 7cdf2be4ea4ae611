/*
 * sim/timeline.c: the GPU timeline of a step range. Hand-computed runs (one instance, a tool
 * wait between two turns; a colocated step on one GPU) whose intervals are the closed forms of
 * test_sim_core.c, then random runs of every mode, sync mode and transport, with failures and
 * over-provisioning (fixed seeds), whose timelines must keep their books: rows sorted and
 * disjoint with touching intervals of one use merged; in every step of the range, the rollout
 * intervals weighted by TP add up to the step's rollout utilisation (the simulator's own
 * accounting of busy GPU time) and the trainer's to its training and update times; over the
 * whole run, requests and tokens add up to the run's; recording changes nothing else; and a
 * cap on intervals cuts them at one time while the totals stay exact.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/rollout.h"
#include "cost/shape.h"
#include "plan/plan.h"
#include "sim/sim.h"
#include "sim_draw.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "util/rng.h"
#include "workload/preset.h"

#define REL 1e-9

struct world {
    struct spec_presets spec;
    struct workload_presets wl;
    struct workload_preset pools; /* the hand-computed runs replay a trace */
    struct trace_traj trajs[2];
    struct trace_turn turns[2][2];
    struct trace_tool_call calls[2];
    struct sim_trace trace;
};

static int setup(void **state)
{
    struct world *w = test_calloc(1, sizeof *w);
    struct libra_error err = {0};
    assert_int_equal(spec_presets_init(&w->spec, &err), 0);
    assert_int_equal(workload_presets_init(&w->wl, &err), 0);
    snprintf(w->pools.name, sizeof w->pools.name, "toy");
    w->pools.n_tools = 1;
    snprintf(w->pools.tools[0].name, sizeof w->pools.tools[0].name, "bash");
    w->pools.tools[0].pool.workers = 1;
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

/* ---- checks every timeline passes ------------------------------------------------------- */

static double overlap(const struct sim_timeline_row *row, enum sim_use u, double a, double b)
{
    double sum = 0;
    for (size_t k = 0; k < row->n; k++)
        if (row->iv[k].use == u)
            sum += fmax(0, fmin(b, row->iv[k].to_s) - fmax(a, row->iv[k].from_s));
    return sum;
}

/* Sorted, disjoint, inside the window, touching intervals of one use merged. */
static void check_row(const struct sim_timeline *t, const struct sim_timeline_row *row)
{
    for (size_t k = 0; k < row->n; k++) {
        const struct sim_interval *x = &row->iv[k];
        assert_true(x->from_s < x->to_s);
        assert_true(x->from_s >= t->from_s && x->to_s <= t->complete_to_s);
        if (k == 0)
            continue;
        const struct sim_interval *p = &row->iv[k - 1];
        if (x->from_s < p->to_s)
            fail_msg("intervals overlap: [%.9f, %.9f] then [%.9f, %.9f]", p->from_s, p->to_s,
                     x->from_s, x->to_s);
        assert_false(x->use == p->use && x->from_s == p->to_s);
    }
}

/* The run's step k, whose window is [end of step k - 1, its end]. */
static void step_window(const struct sim_result *r, int k, double *a, double *b)
{
    *b = r->steps[k].end_s;
    *a = *b - r->steps[k].step_s;
}

/* The timeline against the step records: each step of the range, and the whole window. */
static void check_books(const struct sim_result *r, const struct sim_layout *l)
{
    const struct sim_timeline *t = r->timeline;
    assert_non_null(t);
    assert_int_equal(t->n_inst, l->n_inst);
    assert_int_equal(t->has_trainer, l->n_train > 0);
    double a, b, gpus = 0;
    step_window(r, (int)t->first_step, &a, &b);
    assert_close(t->from_s, a, REL);
    assert_close(t->to_s, r->steps[t->last_step].end_s, REL);
    check_row(t, &t->trainer);
    for (int i = 0; i < t->n_inst; i++) {
        const struct sim_timeline_row *row = &t->inst[i];
        check_row(t, row);
        gpus += l->inst[i].tp;
        double window = t->to_s - t->from_s;
        assert_true(row->use_s[SIM_USE_ROLLOUT] <= window * (1 + REL));
        if (!t->truncated) /* the intervals are the busy time of the simulator's accounting */
            assert_close(overlap(row, SIM_USE_ROLLOUT, a, t->to_s), row->use_s[SIM_USE_ROLLOUT],
                         1e-6);
    }
    for (int64_t k = t->first_step; k <= t->last_step && !t->truncated; k++) {
        const struct sim_step *st = &r->steps[k];
        step_window(r, (int)k, &a, &b);
        double busy = 0;
        for (int i = 0; i < t->n_inst; i++)
            busy += l->inst[i].tp * overlap(&t->inst[i], SIM_USE_ROLLOUT, a, b);
        assert_close(busy, st->rollout_util * gpus * st->step_s, 1e-6);
        if (!t->has_trainer)
            continue;
        assert_close(overlap(&t->trainer, SIM_USE_TRAIN, a, b), st->train_s, 1e-9);
        double sync = l->mode == SIM_COLOCATED ? st->switch_s
                      : k > t->first_step      ? r->steps[k - 1].sync_s
                                               : NAN; /* the update may start before the window */
        if (!isnan(sync))
            assert_close(overlap(&t->trainer, SIM_USE_SYNC, a, b), sync, 1e-9);
    }
}

/* Over the whole run the instances' requests and tokens are the run's. */
static void check_whole_run(const struct sim_result *r)
{
    const struct sim_timeline *t = r->timeline;
    int64_t requests = 0, tokens = 0;
    for (int i = 0; i < t->n_inst; i++) {
        requests += t->inst[i].requests;
        tokens += t->inst[i].generated_tokens;
        assert_int_equal(t->inst[i].requests, r->requests_by_instance[i]);
    }
    assert_int_equal(requests, r->requests);
    assert_int_equal(tokens, r->generated_tokens);
}

/* ---- hand-computed runs ----------------------------------------------------------------- */

/* The config of a one-instance run replaying w's trace. */
static void toy_config(struct world *w, struct libra_config *c, struct sim_input *in)
{
    spec_config_defaults(c);
    c->cluster.gpus = 1;
    c->cluster.gpus_per_node = 8;
    c->rl.batch_trajectories = 1;
    c->rl.samples = 1;
    c->rl.steps = 1;
    c->sim.warmup_steps = 0;
    w->trace = (struct sim_trace){.trajs = w->trajs, .n = 1, .workload = "toy"};
    *in = (struct sim_input){.cfg = c,
                             .hw = spec_hardware_find(&w->spec, "a800-80g"),
                             .model = spec_model_find(&w->spec, "qwen3-14b"),
                             .workload = &w->pools,
                             .trace = &w->trace};
}

/* One trajectory of n turns (prompt, generated), a 2.5 s call after each but the last. */
static void toy_traj(struct world *w, int n, const int64_t (*turns)[2])
{
    struct trace_traj *t = &w->trajs[0];
    memset(t, 0, sizeof *t);
    t->turns = w->turns[0];
    t->n_turns = (size_t)n;
    t->finish = TRACE_FINISH_COMPLETED;
    for (int k = 0; k < n; k++) {
        w->turns[0][k] = (struct trace_turn){
            .prompt_tokens = turns[k][0], .cached_tokens = -1, .generated_tokens = turns[k][1]};
        if (k + 1 < n) {
            w->calls[k] = (struct trace_tool_call){.tool = "bash",
                                                   .status = TRACE_TOOL_SUCCESS,
                                                   .payload_tokens = 200,
                                                   .queue_us = -1,
                                                   .exec_us = 2500000};
            w->turns[0][k].calls = &w->calls[k];
            w->turns[0][k].n_calls = 1;
        }
    }
}

static void one_gpu(struct sim_layout *l, enum sim_mode m, struct sim_instance_spec *inst)
{
    memset(l, 0, sizeof *l);
    l->mode = m;
    l->n_inst = 1;
    l->inst = inst;
    inst[0] = (struct sim_instance_spec){.tp = 1, .bucket = 0, .gpu = 0};
    l->buckets.n = 1;
    l->buckets.bucket[0] = (struct spec_bucket){.max_tokens = 1000000, .n_tp = 1, .tp = {1}};
    l->policy = SCHED_LOAD_BALANCE;
}

static const struct sim_run_opts whole_step = {
    .steps = 1, .perfetto_step = -1, .timeline = true, .timeline_first = 0, .timeline_last = 0};

static void run_ok(const struct sim_input *in, const struct sim_layout *l,
                   const struct sim_run_opts *o, struct sim_result *r)
{
    struct libra_error err = {0};
    if (sim_run(in, l, o, r, &err) != 0)
        fail_msg("sim_run: %s", err.msg);
}

static void assert_interval(const struct sim_interval *x, double from, double to, enum sim_use u)
{
    assert_int_equal(x->use, u);
    assert_close(x->from_s, from, REL);
    assert_close(x->to_s, to, REL);
}

/* Two turns around a 2.5 s tool call: busy, idle while the tool runs, busy. */
static void test_tool_wait_is_idle(void **state)
{
    struct world *w = *state;
    struct libra_config c;
    struct sim_input in;
    toy_config(w, &c, &in);
    c.sim.modes = SPEC_SIM_ROLLOUT;
    toy_traj(w, 2, (const int64_t[][2]){{1000, 50}, {1250, 30}});
    struct sim_layout l;
    struct sim_instance_spec inst[1];
    one_gpu(&l, SIM_ROLLOUT, inst);
    struct sim_result r;
    run_ok(&in, &l, &whole_step, &r);
    const struct sim_timeline *t = r.timeline;
    assert_false(t->has_trainer);
    assert_false(t->truncated);
    const struct sim_timeline_row *row = &t->inst[0];
    assert_int_equal(row->n, 2);
    double end = r.steps[0].end_s, first = row->iv[0].to_s;
    assert_interval(&row->iv[0], 0, first, SIM_USE_ROLLOUT);
    assert_interval(&row->iv[1], first + 2.5, end, SIM_USE_ROLLOUT);
    assert_close(row->use_s[SIM_USE_ROLLOUT], end - 2.5, REL);
    assert_int_equal(row->requests, 2);
    assert_int_equal(row->generated_tokens, 80);
    check_books(&r, &l);
    check_whole_run(&r);
    sim_result_free(&r);
}

/* A colocated step on one GPU: rollout, switch, training, reshard, on both rows. */
static void test_colocated_phases(void **state)
{
    struct world *w = *state;
    struct libra_config c;
    struct sim_input in;
    toy_config(w, &c, &in);
    c.sim.modes = SPEC_SIM_COLOCATED;
    toy_traj(w, 1, (const int64_t[][2]){{3000, 500}});
    struct sim_layout l;
    struct sim_instance_spec inst[1];
    one_gpu(&l, SIM_COLOCATED, inst);
    l.n_train = 1;
    l.train = (struct plan_train_layout){.tp = 1, .pp = 1, .cp = 1, .dp = 1, .budget_tokens = 8192};
    struct sim_result r;
    run_ok(&in, &l, &whole_step, &r);
    const struct sim_step *st = &r.steps[0];
    double roll = st->rollout_s, sw = st->switch_s / 2, train = st->train_s;
    const struct sim_timeline *t = r.timeline;
    assert_true(t->has_trainer);
    const struct sim_timeline_row *tr = &t->trainer, *in0 = &t->inst[0];
    assert_int_equal(tr->n, 3);
    assert_interval(&tr->iv[0], roll, roll + sw, SIM_USE_SYNC);
    assert_interval(&tr->iv[1], roll + sw, roll + sw + train, SIM_USE_TRAIN);
    assert_interval(&tr->iv[2], roll + sw + train, st->end_s, SIM_USE_SYNC);
    assert_int_equal(in0->n, 4); /* the instance's GPU trains too */
    assert_interval(&in0->iv[0], 0, roll, SIM_USE_ROLLOUT);
    for (int k = 1; k < 4; k++)
        assert_interval(&in0->iv[k], tr->iv[k - 1].from_s, tr->iv[k - 1].to_s, tr->iv[k - 1].use);
    assert_close(tr->use_s[SIM_USE_TRAIN], train, REL);
    assert_close(tr->use_s[SIM_USE_SYNC], 2 * sw, REL);
    check_books(&r, &l);
    sim_result_free(&r);
}

/* A range that is not within the steps run is refused. */
static void test_range_refused(void **state)
{
    struct world *w = *state;
    struct libra_config c;
    struct sim_input in;
    toy_config(w, &c, &in);
    c.sim.modes = SPEC_SIM_ROLLOUT;
    toy_traj(w, 1, (const int64_t[][2]){{100, 10}});
    struct sim_layout l;
    struct sim_instance_spec inst[1];
    one_gpu(&l, SIM_ROLLOUT, inst);
    struct sim_run_opts o = whole_step;
    o.timeline_last = 1;
    struct sim_result r;
    struct libra_error err = {0};
    assert_int_equal(sim_run(&in, &l, &o, &r, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "timeline steps 0:1"));
    sim_result_free(&r);
}

/* ---- random runs ---------------------------------------------------------------------- */

static struct sim_input world_input(const struct world *w, const struct libra_config *c)
{
    return (struct sim_input){.cfg = c,
                              .hw = spec_hardware_find(&w->spec, c->cluster.hardware),
                              .model = spec_model_find(&w->spec, c->model.name),
                              .workload = workload_preset_find(&w->wl, c->workload.name)};
}

/* Runs l on in with and without a timeline of a random range: the timeline keeps its books and
 * changes nothing else. */
static void run_pair(struct rng *g, const struct sim_input *in, const struct sim_layout *l,
                     const struct libra_config *c, int i)
{
    struct sim_run_opts plain = {.steps = c->rl.steps, .warmup = 1, .perfetto_step = -1};
    struct sim_run_opts o = plain;
    o.timeline = true;
    bool whole = rng_bernoulli(g, 0.3);
    o.timeline_first = whole ? 0 : (int64_t)rng_uniform_int(g, (uint64_t)c->rl.steps);
    o.timeline_last = whole ? c->rl.steps - 1
                            : o.timeline_first + (int64_t)rng_uniform_int(
                                                     g, (uint64_t)(c->rl.steps - o.timeline_first));
    struct sim_result r, bare;
    struct libra_error err = {0};
    if (sim_run(in, l, &o, &r, &err) != 0)
        fail_msg("run %d (%s): %s", i, sim_mode_name(l->mode), err.msg);
    check_books(&r, l);
    if (whole)
        check_whole_run(&r);
    assert_int_equal(sim_run(in, l, &plain, &bare, &err), 0);
    assert_null(bare.timeline);
    assert_int_equal(bare.steps_run, r.steps_run);
    assert_memory_equal(bare.steps, r.steps, sizeof *r.steps * (size_t)r.steps_run);
    assert_int_equal(bare.generated_tokens, r.generated_tokens);
    sim_result_free(&bare);
    sim_result_free(&r);
}

static void test_random_runs(void **state)
{
    const struct world *w = *state;
    struct rng g = rng_keyed(20260215, 0x746c, 0, 0);
    for (int i = 0; i < 24; i++) {
        struct libra_config c;
        enum sim_mode mode;
        sim_draw(&g, &c, &mode);
        struct sim_input in = world_input(w, &c);
        struct sim_layout l;
        struct libra_error err = {0};
        if (sim_layout_make(&in, mode, 8, 1 << (int)(i % 3), &l, &err) != 0)
            fail_msg("run %d (%s): layout: %s", i, sim_mode_name(mode), err.msg);
        if (l.n_inst < 2)
            c.sim.fail_time_s = -1; /* a lone instance's failure ends the run */
        run_pair(&g, &in, &l, &c, i);
        sim_layout_free(&l);
    }
}

/* ---- the cap ------------------------------------------------------------------------------ */

static size_t intervals(const struct sim_timeline *t)
{
    size_t n = t->trainer.n;
    for (int i = 0; i < t->n_inst; i++)
        n += t->inst[i].n;
    return n;
}

/* A colocated run with few intervals allowed: they stop at one time, the totals do not. */
static void test_cap(void **state)
{
    const struct world *w = *state;
    struct libra_config c;
    spec_config_defaults(&c);
    snprintf(c.model.name, sizeof c.model.name, "qwen3-4b");
    c.cluster.gpus = 16;
    c.cluster.gpus_per_node = 8;
    c.rl.samples = 4;
    c.rl.batch_trajectories = 8;
    c.rl.steps = 3;
    struct sim_input in = world_input(w, &c);
    struct sim_layout l;
    struct libra_error err = {0};
    assert_int_equal(sim_layout_make(&in, SIM_COLOCATED, 0, 2, &l, &err), 0);
    struct sim_run_opts o = {
        .steps = 3, .perfetto_step = -1, .timeline = true, .timeline_first = 0, .timeline_last = 2};
    struct sim_result all, cut;
    run_ok(&in, &l, &o, &all);
    assert_false(all.timeline->truncated);
    assert_int_equal(all.timeline->max_intervals, SIM_TIMELINE_MAX_INTERVALS);
    size_t n = intervals(all.timeline);
    assert_true(n > 12);
    o.timeline_max_intervals = 12;
    run_ok(&in, &l, &o, &cut);
    const struct sim_timeline *t = cut.timeline;
    assert_true(t->truncated);
    assert_true(intervals(t) <= 12);
    assert_true(t->complete_to_s < t->to_s);
    check_books(&cut, &l); /* rows end by complete_to_s */
    for (int i = 0; i < t->n_inst; i++) {
        for (int u = 0; u < SIM_USES; u++)
            assert_close(t->inst[i].use_s[u], all.timeline->inst[i].use_s[u], REL);
        assert_int_equal(t->inst[i].generated_tokens, all.timeline->inst[i].generated_tokens);
        /* what is kept is the whole recording's, cut at complete_to_s */
        const struct sim_timeline_row *a = &all.timeline->inst[i], *b = &t->inst[i];
        for (size_t k = 0; k < b->n; k++) {
            assert_close(b->iv[k].from_s, a->iv[k].from_s, REL);
            assert_close(b->iv[k].to_s, fmin(a->iv[k].to_s, t->complete_to_s), REL);
        }
    }
    sim_result_free(&cut);
    sim_result_free(&all);
    sim_layout_free(&l);
}

/* ---- JSON --------------------------------------------------------------------------------- */

static void test_json(void **state)
{
    struct world *w = *state;
    struct libra_config c;
    struct sim_input in;
    toy_config(w, &c, &in);
    c.sim.modes = SPEC_SIM_ROLLOUT;
    toy_traj(w, 2, (const int64_t[][2]){{1000, 50}, {1250, 30}});
    struct sim_layout l;
    struct sim_instance_spec inst[1];
    one_gpu(&l, SIM_ROLLOUT, inst);
    struct sim_result r;
    run_ok(&in, &l, &whole_step, &r);
    json_t *o = sim_timeline_to_json(r.timeline, &l);
    assert_true(json_is_null(json_object_get(o, "trainer")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "steps"), "last")), 0);
    json_t *i0 = json_array_get(json_object_get(o, "instances"), 0);
    assert_int_equal(json_integer_value(json_object_get(i0, "requests")), 2);
    json_t *iv = json_object_get(i0, "intervals");
    assert_int_equal(json_array_size(iv), 2);
    assert_string_equal(json_string_value(json_array_get(json_array_get(iv, 1), 2)), "rollout");
    assert_close(json_number_value(json_array_get(json_array_get(iv, 1), 1)), r.steps[0].end_s,
                 REL);
    assert_close(json_number_value(json_object_get(i0, "busy_share")),
                 (r.steps[0].end_s - 2.5) / r.steps[0].end_s, REL);
    json_decref(o);
    sim_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tool_wait_is_idle),
        cmocka_unit_test(test_colocated_phases),
        cmocka_unit_test(test_range_refused),
        cmocka_unit_test(test_random_runs),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
