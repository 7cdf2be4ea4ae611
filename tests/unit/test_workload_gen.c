/*
 * workload/gen: the properties of the generator that are not calibration targets —
 * determinism and purity per key, a well-formed trace record with consistent contexts, the
 * prompt pool (every prompt once per epoch, epochs in different orders), a prompt's
 * difficulty shared by its samples and kept across epochs, the direction of drift, dynamic
 * sampling, and the tool time model against closed forms.
 *
 * Statistical checks compare means over N trajectories against Z = 5 standard errors, so a
 * correct generator fails with probability below 1e-6; the seeds are fixed.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "workload/workload.h"

#define Z 5.0

static struct workload_presets presets;

static int setup(void **state)
{
    (void)state;
    struct libra_error err = {0};
    return workload_presets_init(&presets, &err);
}

static int teardown(void **state)
{
    (void)state;
    workload_presets_free(&presets);
    return 0;
}

static const struct workload_preset *preset(const char *name)
{
    const struct workload_preset *w = workload_preset_find(&presets, name);
    assert_non_null(w);
    return w;
}

/* The trace line of (prompt, sample, version): what "the same trajectory" means. */
static char *traj_line(const struct workload_gen *g, int64_t p, int64_t s, int64_t v)
{
    struct arena a;
    arena_init(&a, 0);
    struct trace_traj t;
    workload_gen_traj(g, p, s, v, &t, &a);
    struct trace_text b = {0};
    trace_format_traj(&b, &t);
    arena_free(&a);
    return b.data;
}

/* a and b have the same trace line. */
static void assert_same_line(const struct trace_traj *a, const struct trace_traj *b)
{
    struct trace_text x = {0}, y = {0};
    trace_format_traj(&x, a);
    trace_format_traj(&y, b);
    assert_string_equal(x.data, y.data);
    trace_text_free(&x);
    trace_text_free(&y);
}

static void test_same_keys_same_trajectory(void **state)
{
    (void)state;
    const char *names[] = {"search-r1", "dapo-math", "dapo-math-verl", "r2e-gym"};
    for (size_t n = 0; n < 4; n++) {
        struct workload_gen g1, g2, other_seed;
        workload_gen_init(&g1, preset(names[n]), 42);
        workload_gen_init(&g2, preset(names[n]), 42);
        workload_gen_init(&other_seed, preset(names[n]), 43);
        int differ_seed = 0, differ_sample = 0;
        /* g2 walks the keys backwards: order must not matter. */
        for (int64_t k = 0; k < 200; k++) {
            char *a = traj_line(&g1, k, k % 3, k % 5);
            char *b = traj_line(&g2, 199 - k, (199 - k) % 3, (199 - k) % 5);
            char *again = traj_line(&g2, k, k % 3, k % 5);
            char *c = traj_line(&other_seed, k, k % 3, k % 5);
            char *d = traj_line(&g1, k, k % 3 + 1, k % 5);
            assert_string_equal(a, again);
            differ_seed += strcmp(a, c) != 0;
            differ_sample += strcmp(a, d) != 0;
            free(a);
            free(b);
            free(again);
            free(c);
            free(d);
        }
        /* Identical lines are possible only by chance (a one-turn trajectory of equal
         * length and reward), never for most keys. */
        assert_true(differ_seed > 150);
        assert_true(differ_sample > 150);
    }
}

/* Checks one record against the trace rules and the preset's caps and context accounting. */
static void check_record(const struct workload_preset *w, const struct trace_traj *t)
{
    struct libra_error err = {0};
    if (trace_check_traj(t, w->samples, &err) != 0) {
        print_error("%s: %s\n", w->name, err.msg);
        fail();
    }
    assert_true(t->n_turns >= 1 && t->n_turns <= (size_t)w->max_turns);
    int64_t context = t->turns[0].prompt_tokens, generated = 0;
    assert_true(context >= w->prompt_tokens.min && context <= w->prompt_tokens.max);
    for (size_t k = 0; k < t->n_turns; k++) {
        const struct trace_turn *u = &t->turns[k];
        assert_int_equal(u->prompt_tokens, context);
        assert_true(u->generated_tokens >= 1);
        assert_true(u->generated_tokens <= w->max_turn_generated_tokens);
        context += u->generated_tokens;
        generated += u->generated_tokens;
        assert_true(context <= w->context_tokens);
        assert_true(u->n_calls <= 1);
        if (u->n_calls && k + 1 == t->n_turns)
            assert_int_equal(t->finish, TRACE_FINISH_TRUNCATED);
        for (size_t c = 0; c < u->n_calls; c++) {
            const struct trace_tool_call *call = &u->calls[c];
            assert_true(call->queue_us >= 0 && call->exec_us > 0);
            context += call->payload_tokens;
        }
    }
    assert_true(generated <= w->max_generated_tokens);
    assert_true(t->has_reward && (t->reward == 0 || t->reward == 1));
    if (t->finish == TRACE_FINISH_TRUNCATED)
        assert_true(t->reward == 0);
}

static void test_records_are_well_formed(void **state)
{
    (void)state;
    struct arena a;
    arena_init(&a, 0);
    for (size_t n = 0; n < presets.n; n++) {
        const struct workload_preset *w = &presets.items[n];
        struct workload_gen g;
        workload_gen_init(&g, w, 3);
        for (int64_t i = 0; i < 5000; i++) {
            struct trace_traj t;
            workload_gen_traj(&g, i % w->prompts, i % w->samples, i % 7, &t, &a);
            assert_int_equal(t.prompt_id, i % w->prompts);
            assert_int_equal(t.sample, i % w->samples);
            assert_int_equal(t.version_start, i % 7);
            check_record(w, &t);
            arena_reset(&a);
        }
    }
    arena_free(&a);
}

/* A copy of r2e-gym with another pool size. */
static struct workload_preset with_pool(int64_t prompts)
{
    struct workload_preset w = *preset("r2e-gym");
    w.prompts = prompts;
    return w;
}

static void test_pool_without_replacement(void **state)
{
    (void)state;
    const int64_t sizes[] = {1, 2, 3, 5, 17, 64, 1000, 4578, 169615};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        struct workload_preset w = with_pool(sizes[s]);
        struct workload_gen g;
        workload_gen_init(&g, &w, 9);
        int64_t n = sizes[s];
        unsigned char *seen = calloc((size_t)n, 1);
        int64_t same_position = 0;
        for (int64_t epoch = 0; epoch < 3; epoch++) {
            memset(seen, 0, (size_t)n);
            for (int64_t i = 0; i < n; i++) {
                int64_t p = workload_prompt_for(&g, epoch, i);
                assert_true(p >= 0 && p < n);
                assert_int_equal(seen[p], 0);
                seen[p] = 1;
                if (epoch == 1)
                    same_position += p == workload_prompt_for(&g, 0, i);
            }
        }
        /* Epochs are different orders: a random permutation keeps about one position. */
        if (n >= 64)
            assert_true(same_position < n / 8);
        free(seen);
    }
}

static void test_difficulty_shared_and_kept(void **state)
{
    (void)state;
    const struct workload_preset *w = preset("r2e-gym");
    struct workload_gen g;
    workload_gen_init(&g, w, 5);
    struct workload_prompt a, b;
    workload_prompt(&g, 77, &a);
    workload_prompt(&g, 77, &b);
    assert_true(a.difficulty == b.difficulty && a.prompt_tokens == b.prompt_tokens);

    /* Behavioural check: a prompt's mean log length over its samples at version 0 predicts
     * the same at version 100 (another epoch, other noise). Independent prompts would give a
     * correlation within 5 / sqrt(P) of 0. */
    enum { P = 2000, S = 4 };
    struct arena ar;
    arena_init(&ar, 0);
    double x[P], y[P];
    for (int p = 0; p < P; p++) {
        for (int pass = 0; pass < 2; pass++) {
            double sum = 0;
            for (int s = 0; s < S; s++) {
                struct trace_traj t;
                workload_gen_traj(&g, p, s, pass ? 100 : 0, &t, &ar);
                int64_t gen = 0;
                for (size_t k = 0; k < t.n_turns; k++)
                    gen += t.turns[k].generated_tokens;
                sum += log((double)gen);
                arena_reset(&ar);
            }
            (pass ? y : x)[p] = sum / S;
        }
    }
    arena_free(&ar);
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int p = 0; p < P; p++) {
        mx += x[p] / P;
        my += y[p] / P;
    }
    for (int p = 0; p < P; p++) {
        sxy += (x[p] - mx) * (y[p] - my);
        sxx += (x[p] - mx) * (x[p] - mx);
        syy += (y[p] - my) * (y[p] - my);
    }
    double corr = sxy / sqrt(sxx * syy);
    if (corr < Z / sqrt(P)) {
        print_error("correlation of per-prompt lengths across epochs %.3f\n", corr);
        fail();
    }
}

/* Mean generated tokens and turns per trajectory at one version, with standard errors. */
struct means {
    double gen, gen_se, turns, turns_se;
};

static struct means measure(const struct workload_preset *w, int64_t version)
{
    enum { N = 20000 };
    struct workload_gen g;
    workload_gen_init(&g, w, 11);
    struct arena a;
    arena_init(&a, 0);
    double sg = 0, sg2 = 0, st = 0, st2 = 0;
    for (int64_t i = 0; i < N; i++) {
        struct trace_traj t;
        workload_gen_traj(&g, i % w->prompts, i / w->prompts, version, &t, &a);
        double gen = 0;
        for (size_t k = 0; k < t.n_turns; k++)
            gen += (double)t.turns[k].generated_tokens;
        sg += gen;
        sg2 += gen * gen;
        st += (double)t.n_turns;
        st2 += (double)t.n_turns * (double)t.n_turns;
        arena_reset(&a);
    }
    arena_free(&a);
    struct means m = {sg / N, 0, st / N, 0};
    m.gen_se = sqrt((sg2 / N - m.gen * m.gen) / N);
    m.turns_se = sqrt((st2 / N - m.turns * m.turns) / N);
    return m;
}

/* Asserts that b - a has the sign of dir, by more than Z combined standard errors. */
static void assert_moved(const char *what, double a, double a_se, double b, double b_se, int dir)
{
    double se = sqrt(a_se * a_se + b_se * b_se);
    if (dir * (b - a) <= Z * se) {
        print_error("%s: %.2f -> %.2f (se %.2f), expected to %s\n", what, a, b, se,
                    dir > 0 ? "grow" : "shrink");
        fail();
    }
}

static void test_drift_direction(void **state)
{
    (void)state;
    struct workload_preset w = *preset("r2e-gym");
    w.drift.enabled = true;
    w.drift.versions = 100;
    w.drift.generated_scale = 1.5;
    w.drift.finish_logit = -0.5; /* longer turns, more of them: DAPO-style growth */
    struct means m0 = measure(&w, 0), m100 = measure(&w, 100), m300 = measure(&w, 300);
    assert_moved("generated tokens", m0.gen, m0.gen_se, m100.gen, m100.gen_se, +1);
    assert_moved("turns", m0.turns, m0.turns_se, m100.turns, m100.turns_se, +1);
    /* The ramp holds after `versions`: 300 draws from the same distribution as 100. */
    assert_true(fabs(m300.gen - m100.gen) < Z * sqrt(2) * m100.gen_se);

    w.drift.generated_scale = 0.6;
    w.drift.finish_logit = 0.5; /* ReTool-style: shorter responses, fewer turns */
    struct means s100 = measure(&w, 100);
    assert_moved("generated tokens", m0.gen, m0.gen_se, s100.gen, s100.gen_se, -1);
    assert_moved("turns", m0.turns, m0.turns_se, s100.turns, s100.turns_se, -1);

    /* Switched off, the version changes the noise but not the distribution. */
    w.drift.enabled = false;
    struct means off0 = measure(&w, 0), off100 = measure(&w, 100);
    assert_true(fabs(off100.gen - off0.gen) < Z * sqrt(2) * off0.gen_se);
    assert_true(fabs(off100.turns - off0.turns) < Z * sqrt(2) * off0.turns_se);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A setup is drawn from a stream of its own: the rest of every trajectory is what the preset
 * without one generates, and the setups' median is the preset's. */
static void test_setup_leaves_the_rest(void **state)
{
    (void)state;
    struct workload_preset w = *preset("search-r1");
    w.setup.median_s = 0;
    struct workload_gen none, with;
    workload_gen_init(&none, &w, 7);
    struct workload_preset ws = w;
    ws.setup.median_s = 3.0;
    ws.setup.sigma = 0.5;
    workload_gen_init(&with, &ws, 7);
    enum { N = 2001 };
    double *setup = test_calloc(N, sizeof *setup);
    for (int64_t k = 0; k < N; k++) {
        struct arena a;
        arena_init(&a, 0);
        struct trace_traj t0, t1;
        workload_gen_traj(&none, k, 0, 3, &t0, &a);
        workload_gen_traj(&with, k, 0, 3, &t1, &a);
        assert_int_equal(t0.setup_us, 0);
        assert_true(t1.setup_us > 0);
        setup[k] = (double)t1.setup_us;
        t1.setup_us = 0;
        assert_same_line(&t0, &t1);
        arena_free(&a);
    }
    /* the sample median of a log-normal: within 4 standard errors (sigma sqrt(pi / 2 / N)) */
    qsort(setup, N, sizeof *setup, cmp_double);
    assert_true(fabs(log(setup[N / 2] / 3e6)) < 4 * 0.5 * sqrt(3.14159265358979 / 2 / N));
    test_free(setup);
}

static void test_filter_group(void **state)
{
    (void)state;
    struct trace_traj group[3] = {{.finish = TRACE_FINISH_COMPLETED, .reward = 1},
                                  {.finish = TRACE_FINISH_TRUNCATED, .reward = 1},
                                  {.finish = TRACE_FINISH_COMPLETED, .reward = 1}};
    assert_false(workload_filter_group(preset("r2e-gym")->dynamic_sampling, group, 3)); /* off */
    assert_int_equal(group[0].finish, TRACE_FINISH_COMPLETED);
    enum spec_dynamic_sampling v = preset("dapo-math-verl")->dynamic_sampling;
    assert_true(workload_filter_group(v, group, 3));
    assert_int_equal(group[0].finish, TRACE_FINISH_FILTERED);
    assert_int_equal(group[1].finish, TRACE_FINISH_TRUNCATED);
    assert_int_equal(group[2].finish, TRACE_FINISH_FILTERED);
    struct trace_traj mixed[2] = {{.finish = TRACE_FINISH_COMPLETED, .reward = 1},
                                  {.finish = TRACE_FINISH_COMPLETED, .reward = 0}};
    assert_false(workload_filter_group(v, mixed, 2));
    assert_int_equal(mixed[0].finish, TRACE_FINISH_COMPLETED);
}

static void test_group_filtered_reads_only(void **state)
{
    (void)state;
    const struct trace_traj same[2] = {{.finish = TRACE_FINISH_COMPLETED, .reward = 1},
                                       {.finish = TRACE_FINISH_TRUNCATED, .reward = 1}};
    const struct trace_traj mixed[2] = {{.finish = TRACE_FINISH_COMPLETED, .reward = 1},
                                        {.finish = TRACE_FINISH_COMPLETED, .reward = 0}};
    enum spec_dynamic_sampling v = preset("dapo-math-verl")->dynamic_sampling;
    assert_true(workload_group_filtered(v, same, 2));
    assert_true(workload_group_filtered(SPEC_DS_REGENERATE, same, 2)); /* either rule judges */
    assert_int_equal(same[0].finish, TRACE_FINISH_COMPLETED);          /* judged, not marked */
    assert_false(workload_group_filtered(v, mixed, 2));
    assert_false(workload_group_filtered(SPEC_DS_OFF, same, 2));
    assert_true(workload_group_filtered(v, mixed, 1)); /* one sample: nothing to compare */
}

/* The n-th group launched is the prompt drawn n-th, epoch after epoch, at the version asked. */
static void test_group_traj_draws_the_pool_in_order(void **state)
{
    (void)state;
    struct workload_preset w = with_pool(5);
    struct workload_gen g;
    workload_gen_init(&g, &w, 9);
    struct arena a;
    arena_init(&a, 0);
    for (int64_t index = 0; index < 12; index++) {
        int64_t epoch = index / 5, prompt = workload_prompt_for(&g, epoch, index % 5);
        struct trace_traj got, want;
        workload_group_traj(&g, index, 1, 3, &got, &a);
        workload_gen_traj(&g, prompt, 1, 3, &want, &a);
        assert_int_equal(got.epoch, epoch);
        assert_int_equal(got.prompt_id, prompt);
        assert_int_equal(got.version_start, 3);
        want.epoch = epoch;
        assert_same_line(&got, &want);
    }
    arena_free(&a);
}

static void test_tool_time_model(void **state)
{
    (void)state;
    /* Exponential-like service (CV^2 = 1): Allen-Cunneen is exact M/M/c. M/M/2 at rho 0.5
     * waits with probability 2 rho^2 / (1 + rho) = 1/3, for E[S] / (c (1 - rho)) = E[S]. */
    struct workload_pool p = {.workers = 2,
                              .utilisation = 0.5,
                              .service_median_s = 1.0,
                              .service_sigma = sqrt(log(2.0)),
                              .timeout_s = 100};
    struct workload_pool_model m;
    workload_pool_model(&p, &m);
    assert_close(m.wait_probability, 1.0 / 3.0, 1e-12);
    assert_close(m.mean_service_s, sqrt(2.0), 1e-12);
    assert_close(m.mean_wait_s, m.mean_service_s, 1e-12);
    /* One worker: the wait probability is the utilisation. */
    p.workers = 1;
    p.utilisation = 0.8;
    workload_pool_model(&p, &m);
    assert_close(m.wait_probability, 0.8, 1e-12);
    assert_true(workload_pool_wait_s(&m, 0.79, 0.5) > 0);
    assert_true(workload_pool_wait_s(&m, 0.81, 0.5) == 0);
    assert_close(workload_pool_wait_s(&m, 0.0, 1 - exp(-1.0)), m.mean_wait_s, 1e-12);
    /* A dedicated sandbox never queues. */
    p.workers = 0;
    workload_pool_model(&p, &m);
    assert_true(m.wait_probability == 0 && workload_pool_wait_s(&m, 0.0, 0.9) == 0);
    /* Executions beyond the timeout are cut there. */
    bool timed_out;
    assert_close(workload_pool_exec_s(&p, 0.0, &timed_out), 1.0, 1e-12);
    assert_false(timed_out);
    assert_true(workload_pool_exec_s(&p, 20.0, &timed_out) == 100 && timed_out);
}

static void test_lengths_match_generator(void **state)
{
    (void)state;
    const struct workload_preset *w = preset("r2e-gym");
    enum { N = 64 };
    struct workload_length l[N], again[N];
    int with_tools = 0;
    size_t batch = (size_t)w->batch_trajectories, samples = (size_t)w->samples;
    workload_lengths(w, w->dynamic_sampling, 1, batch, samples, N / batch, N,
                     l); /* one step per batch: in order */
    workload_lengths(w, w->dynamic_sampling, 1, batch, samples, N / batch, N, again);
    for (int i = 0; i < N; i++) {
        assert_memory_equal(&l[i].len, &again[i].len, sizeof l[i].len);
        assert_int_equal(l[i].filtered, again[i].filtered);
    }
    struct workload_gen g;
    workload_gen_init(&g, w, 1);
    struct arena a;
    arena_init(&a, 0);
    for (int i = 0; i < N; i++) {
        int64_t group = i / w->samples;
        int64_t prompt = workload_prompt_for(&g, 0, group);
        struct trace_traj t;
        workload_gen_traj(&g, prompt, i % w->samples, group / (w->batch_trajectories / w->samples),
                          &t, &a);
        int64_t gen = 0, tool = 0, tool_us = t.setup_us; /* off the GPU, as the tools */
        double exec_s[WORKLOAD_MAX_TOOLS] = {0};         /* the calls between turns, by tool */
        for (size_t k = 0; k < t.n_turns; k++) {
            gen += t.turns[k].generated_tokens;
            for (size_t c = 0; c < t.turns[k].n_calls; c++) {
                const struct trace_tool_call *call = &t.turns[k].calls[c];
                tool += call->payload_tokens;
                tool_us += call->queue_us + call->exec_us;
                int x = workload_tool_index(w, call->tool);
                assert_true(x >= 0);
                if (k + 1 < t.n_turns)
                    exec_s[x] += (double)call->exec_us / 1e6;
            }
        }
        assert_memory_equal(l[i].tool_exec_s, exec_s, sizeof exec_s);
        assert_int_equal(l[i].len.prompt_tokens, t.turns[0].prompt_tokens);
        assert_int_equal(l[i].len.generated_tokens, gen);
        assert_int_equal(l[i].len.tool_tokens, tool);
        assert_int_equal(l[i].len.turns, (int64_t)t.n_turns);
        assert_true(l[i].len.tool_s == (double)tool_us * 1e-6);
        with_tools += l[i].len.tool_s > 0;
        arena_reset(&a);
    }
    assert_true(with_tools > 0);
    arena_free(&a);
}

/* A tool's index by name, its calls' execution between turns, and the busiest bounded pool. */
static void test_pool_load(void **state)
{
    (void)state;
    struct workload_preset w = *preset("r2e-gym"); /* validator: 64 workers; the rest 0 */
    int validator = workload_tool_index(&w, "validator");
    assert_true(validator >= 0);
    assert_int_equal(workload_tool_index(&w, "no-such-tool"), -1);
    struct trace_tool_call first[] = {{.tool = "validator", .exec_us = 3000000},
                                      {.tool = "no-such-tool", .exec_us = 5000000},
                                      {.tool = "validator", .exec_us = -1}};
    struct trace_tool_call last[] = {{.tool = "validator", .exec_us = 7000000}};
    struct trace_turn turns[] = {{.calls = first, .n_calls = 3}, {.calls = last, .n_calls = 1}};
    struct trace_traj t = {.turns = turns, .n_turns = 2};
    double exec_s[WORKLOAD_MAX_TOOLS] = {0};
    workload_tool_exec(&w, &t, exec_s);
    workload_tool_exec(&w, &t, exec_s);             /* adds */
    for (size_t i = 0; i < WORKLOAD_MAX_TOOLS; i++) /* only the validator, not after the end */
        assert_true(exec_s[i] == ((int)i == validator ? 6.0 : 0.0));
    /* 6 s over 2 trajectories on 64 workers; the sandboxes never bind */
    assert_close(workload_pool_load_s(&w, exec_s, 2), 6.0 / 2 / 64, 1e-15);
    assert_true(workload_pool_load_s(&w, exec_s, 0) == 0.0);
    w.tools[validator].pool.workers = 0;
    assert_true(workload_pool_load_s(&w, exec_s, 2) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_keys_same_trajectory),
        cmocka_unit_test(test_records_are_well_formed),
        cmocka_unit_test(test_pool_without_replacement),
        cmocka_unit_test(test_difficulty_shared_and_kept),
        cmocka_unit_test(test_drift_direction),
        cmocka_unit_test(test_setup_leaves_the_rest),
        cmocka_unit_test(test_filter_group),
        cmocka_unit_test(test_group_filtered_reads_only),
        cmocka_unit_test(test_group_traj_draws_the_pool_in_order),
        cmocka_unit_test(test_tool_time_model),
        cmocka_unit_test(test_lengths_match_generator),
        cmocka_unit_test(test_pool_load),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
