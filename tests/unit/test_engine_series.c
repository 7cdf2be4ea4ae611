/*
 * Tests of the closed-form run times (src/engine/series.c): S(j) against summing cost_iter_time
 * over the explicit batches of each iteration, with the attention bounds crossing in either
 * direction or not at all, and the search for the iterations that end by a given time.
 */
#include "testutil.h"

#include <math.h>

#include "cost/rollout.h"
#include "engine/series.h"
#include "util/rng.h"

/* Round-number instance; s_per_attn_pair varies so that either attention bound can bind. */
static struct cost_rollout_pre pre_with(double s_per_attn_pair)
{
    return (struct cost_rollout_pre){.tp = 2,
                                     .layers = 4.0,
                                     .t_layer_weights_s = 0.004,
                                     .s_per_layer_token = 1e-6,
                                     .t_head_weights_s = 0.001,
                                     .s_per_head_token = 2e-6,
                                     .kv_bytes_per_token = 1000.0,
                                     .s_per_kv_byte = 1e-10,
                                     .s_per_attn_pair = s_per_attn_pair,
                                     .t_allreduce_fixed_s = 2e-4,
                                     .s_allreduce_per_token = 1e-7,
                                     .t_fix_s = 0.003,
                                     .t_seq_s = 3e-5};
}

/* Σ of cost_iter_time over iterations 0 .. j-1 built one by one. */
static double stepped(const struct cost_rollout_pre *pre, int64_t n, int64_t ctx, int64_t m,
                      int64_t cached, int64_t j)
{
    double t = 0.0;
    for (int64_t i = 0; i < j; i++) {
        struct cost_batch b = {.decode_seqs = (double)n,
                               .decode_ctx_tokens = (double)(ctx + i * n)};
        if (m > 0)
            cost_batch_add_prefill(&b, (double)(cached + i * m), (double)m, false);
        t += cost_iter_time(pre, &b);
    }
    return t;
}

static void test_sum_matches_stepping(void **state)
{
    struct rng g = rng_keyed(3, 0, 0, 0);
    int crossings_up = 0, crossings_down = 0;
    for (int trial = 0; trial < 5000; trial++) {
        /* KV bound at 1e-7 s/token against compute at 1e-9 .. 1e-6 s/pair */
        struct cost_rollout_pre pre = pre_with(pow(10.0, -9.0 + 3.0 * rng_uniform(&g)));
        int64_t n = (int64_t)rng_uniform_int(&g, 2000);
        int64_t m = rng_bernoulli(&g, 0.6) ? 1 + (int64_t)rng_uniform_int(&g, 200) : 0;
        if (n + m == 0)
            n = 1;
        /* short decode contexts against a long cached prefix let compute bind first */
        int64_t ctx = n * (int64_t)rng_uniform_int(&g, rng_bernoulli(&g, 0.5) ? 50 : 5000);
        int64_t cached = m ? (int64_t)rng_uniform_int(&g, 100000) : 0;
        int64_t j = 1 + (int64_t)rng_uniform_int(&g, 400);
        struct engine_series s;
        engine_series_init(&s, &pre, n, ctx, m, cached);
        assert_close(engine_series_sum(&s, j), stepped(&pre, n, ctx, m, cached, j), 1e-11);
        assert_close(engine_series_sum(&s, 1), stepped(&pre, n, ctx, m, cached, 1), 1e-13);
        assert_true(engine_series_sum(&s, 0) == 0.0);
        /* count the runs whose bounds cross inside [0, j) */
        double g0 = s.kv0 - s.cp0, g1 = s.kv1 - s.cp1, gj = g0 + g1 * (double)(j - 1);
        crossings_up += g0 < 0.0 && gj > 0.0;
        crossings_down += g0 > 0.0 && gj < 0.0;
    }
    /* both shapes of max() were exercised */
    assert_true(crossings_up > 10);
    assert_true(crossings_down > 10);
}

static void test_single_is_flat(void **state)
{
    struct engine_series s;
    engine_series_single(&s, 0.25);
    assert_close(engine_series_sum(&s, 1), 0.25, 1e-15);
    assert_close(engine_series_sum(&s, 4), 1.0, 1e-15);
}

static void test_count_finds_the_iterations_ending_by_a_time(void **state)
{
    struct cost_rollout_pre pre = pre_with(1e-8);
    struct engine_series s;
    engine_series_init(&s, &pre, 8, 8000, 0, 0);
    double t0 = 100.0;
    for (int64_t j = 0; j <= 50; j++) {
        double end = t0 + engine_series_sum(&s, j);
        assert_int_equal(engine_series_count(&s, 0, 50, t0, end), j);
        if (j > 0)
            assert_int_equal(engine_series_count(&s, 0, 50, t0, nextafter(end, 0.0)), j - 1);
    }
    assert_int_equal(engine_series_count(&s, 7, 50, t0, 1e9), 50);
    assert_int_equal(engine_series_count(&s, 7, 50, t0, t0 + engine_series_sum(&s, 7)), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_matches_stepping),
        cmocka_unit_test(test_single_is_flat),
        cmocka_unit_test(test_count_finds_the_iterations_ending_by_a_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
