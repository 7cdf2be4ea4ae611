/* Tests of the rollout cost model (src/cost/shape.c, src/cost/rollout.c): shapes and KV bytes
 * against calibration.md §2, a hand-computed iteration, and the properties every caller relies
 * on (more work never takes less time, more TP streams less per GPU). */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/rollout.h"
#include "cost/shape.h"
#include "util/rng.h"

static struct cost_shape shape_of(enum cost_ref_model m)
{
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, cost_ref_model(m)), 0);
    return s;
}

static void test_shapes_match_the_sheet(void **state)
{
    struct cost_shape s = shape_of(COST_REF_QWEN25_7B);
    assert_close(s.params_total, 7.62e9, 0.005);
    assert_close(cost_kv_bytes_per_token(&s, 1, 2.0), 56.0 * 1024, 1e-12);
    /* 4 KV heads: TP2 halves them, TP8 replicates one head per GPU */
    assert_close(cost_kv_bytes_per_token(&s, 2, 2.0), 28.0 * 1024, 1e-12);
    assert_close(cost_kv_bytes_per_token(&s, 8, 2.0), 14.0 * 1024, 1e-12);
    s = shape_of(COST_REF_QWEN25_32B);
    assert_close(s.params_total, 32.76e9, 0.005);
    assert_close(cost_kv_bytes_per_token(&s, 1, 2.0), 256.0 * 1024, 1e-12);
    s = shape_of(COST_REF_QWEN25_14B);
    assert_close(cost_kv_bytes_per_token(&s, 1, 2.0), 192.0 * 1024, 1e-12);
}

/* Qwen3-30B-A3B (calibration.md §2.1): 30.5 B total, 3.3 B active */
static const struct spec_model qwen3_30b_a3b = {.name = "qwen3-30b-a3b",
                                                .layers = 48,
                                                .hidden = 2048,
                                                .heads = 32,
                                                .kv_heads = 4,
                                                .head_dim = 128,
                                                .ffn = 6144,
                                                .vocab = 151936,
                                                .experts = 128,
                                                .top_k = 8,
                                                .expert_ffn = 768};

static void test_moe_counts_active_and_total_parameters(void **state)
{
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, &qwen3_30b_a3b), 0);
    assert_true(s.moe);
    assert_close(s.params_total, 30.5e9, 0.02);
    assert_close(s.params_active + s.embed_params, 3.3e9, 0.03);
    assert_true(s.layer_params < s.layer_params_total);
    assert_close(s.layer_params_total - s.layer_params, (128 - 8) * s.expert_params, 1e-12);
}

/* The experts T tokens touch: against a Monte Carlo of T tokens each drawing 8 distinct experts
 * of 128 uniformly (1,000 trials, within 1.5 %), and their streaming in the iteration: one token
 * reads 8 experts, 256 read essentially all 128, so batch-256 decode reads the whole model. */
static void test_moe_streams_the_experts_its_tokens_touch(void **state)
{
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, &qwen3_30b_a3b), 0);
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct cost_rollout_pre pre;
    assert_int_equal(cost_rollout_pre_init(&pre, &s, hw, &p, 1), 0);
    struct rng r = rng_keyed(7, 0, 0, 0);
    const int tokens[] = {1, 4, 16, 64, 256};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        double sum = 0;
        for (int trial = 0; trial < 1000; trial++) {
            bool hit[128] = {false};
            int distinct = 0;
            for (int t = 0; t < tokens[i]; t++) {
                int chosen[8], k = 0;
                while (k < 8) { /* 8 distinct experts per token */
                    int e = (int)rng_uniform_int(&r, 128);
                    bool dup = false;
                    for (int j = 0; j < k; j++)
                        dup |= chosen[j] == e;
                    if (dup)
                        continue;
                    chosen[k++] = e;
                    distinct += !hit[e];
                    hit[e] = true;
                }
            }
            sum += distinct;
        }
        assert_close(cost_experts_touched(&pre, tokens[i]), sum / 1000, 0.015);
    }
    assert_close(cost_experts_touched(&pre, 1), 8, 1e-12);
    assert_true(cost_experts_touched(&pre, 256) > 127.99);
    /* one token streams what a dense model of the active parameters does; 256 stream the whole
     * layer, at the efficiency of its bytes */
    assert_close(cost_layer_stream_time(&pre, 1), pre.t_layer_weights_s, 1e-12);
    double all_bytes = s.layer_params_total * p.weight_dtype_bytes;
    assert_close(cost_layer_stream_time(&pre, 256),
                 all_bytes / (hw->hbm_bw_bytes_per_s * cost_curve_eval(&p.eta, all_bytes)), 1e-6);
    for (double t = 1; t < 512; t *= 2)
        assert_true(cost_decode_time(&pre, 2 * t, 0) > cost_decode_time(&pre, t, 0));
    /* a dense model's streaming does not depend on the batch */
    struct cost_shape d = shape_of(COST_REF_QWEN25_7B);
    struct cost_rollout_pre dp;
    assert_int_equal(cost_rollout_pre_init(&dp, &d, hw, &p, 1), 0);
    assert_true(cost_experts_touched(&dp, 256) == 0.0);
    assert_true(cost_layer_stream_time(&dp, 1) == cost_layer_stream_time(&dp, 256));
}

static void test_impossible_shapes_are_rejected(void **state)
{
    struct spec_model m = *cost_ref_model(COST_REF_QWEN25_7B);
    struct cost_shape s;
    m.kv_heads = 3; /* does not divide 28 */
    assert_int_equal(cost_shape_init(&s, &m), LIBRA_EINVAL);
    m = *cost_ref_model(COST_REF_QWEN25_7B);
    m.ffn = 0;
    assert_int_equal(cost_shape_init(&s, &m), LIBRA_EINVAL);
    m.experts = 4; /* MoE without top_k */
    assert_int_equal(cost_shape_init(&s, &m), LIBRA_EINVAL);
}

static void test_curve_interpolates_in_log_bytes(void **state)
{
    struct cost_curve c = {.n = 2, .bytes = {100.0, 10000.0}, .eff = {0.4, 0.8}};
    assert_close(cost_curve_eval(&c, 1.0), 0.4, 1e-12);
    assert_close(cost_curve_eval(&c, 1000.0), 0.6, 1e-12); /* halfway in ln */
    assert_close(cost_curve_eval(&c, 1e9), 0.8, 1e-12);
}

/* A toy model and GPU with round numbers, so the iteration can be computed by hand. */
static const struct spec_model toy_model = {.name = "toy",
                                            .layers = 2,
                                            .hidden = 64,
                                            .heads = 4,
                                            .kv_heads = 2,
                                            .head_dim = 16,
                                            .ffn = 128,
                                            .vocab = 1000};
static const struct spec_hardware toy_gpu = {.name = "toy",
                                             .bf16_flops_per_s = 1e12,
                                             .hbm_bytes = 1e11,
                                             .hbm_bw_bytes_per_s = 1e12,
                                             .allreduce_bus_bw_bytes_per_s = 1e11,
                                             .allreduce_latency_s = 1e-5,
                                             .gpus_per_node = 8};

static struct cost_rollout_params toy_params(void)
{
    return (struct cost_rollout_params){
        .eta = {.n = 1, .bytes = {1.0}, .eff = {0.5}},
        .mu = {.n = 1, .bytes = {1.0}, .eff = {0.5}},
        .eta_kv = 0.5,
        .mfu_attn = 0.25,
        .t_fix_s = 1e-3,
        .t_seq_s = 1e-4,
        .ar_latency_s = 1e-5,
        .ar_bus_bw_bytes_per_s = 1e11,
        .weight_dtype_bytes = 2,
        .kv_dtype_bytes = 2,
        .act_dtype_bytes = 2,
        .mem_util = 1.0,
    };
}

static void test_hand_computed_iteration(void **state)
{
    struct cost_shape s;
    struct cost_rollout_pre pre;
    struct cost_rollout_params p = toy_params();
    assert_int_equal(cost_shape_init(&s, &toy_model), 0);
    assert_int_equal(cost_rollout_pre_init(&pre, &s, &toy_gpu, &p, 2), 0);

    /* 3 decode sequences holding 300 tokens, one 50-token chunk after a 100-token prefix */
    struct cost_batch b = {0};
    cost_batch_add_decode(&b, 100);
    cost_batch_add_decode(&b, 120);
    cost_batch_add_decode(&b, 80);
    cost_batch_add_prefill(&b, 100, 50, true);
    struct cost_iter_parts parts;
    cost_iter_parts(&pre, &b, &parts);

    /* layer: 64·64 (q) + 2·64·32 (k, v) + 64·64 (o) + 3·64·128 (MLP) = 36864 parameters;
     * per GPU at TP2 36864 bytes: streaming 36864/(1e12·0.5) s; compute per token the same */
    double w = 36864.0 / 0.5e12, tokens = 53.0;
    assert_close(parts.linear_s, 2.0 * w * sqrt(1.0 + tokens * tokens), 1e-12);
    /* head 64·1000 parameters, 64000 bytes per GPU, 4 sampled tokens */
    double hw = 64000.0 / 0.5e12;
    assert_close(parts.head_s, hw * sqrt(17.0), 1e-12);
    /* attention: pairs 300 + 3 + 50·100 + 50·51/2 = 6578 at 4·64·2/2 FLOPs over 0.25e12;
     * KV bytes (300 + 100 + 53)·2 layers·1 head·16·2 (K,V)·2 B = 57984 B over 0.5e12 */
    assert_close(parts.attn_s, 6578.0 * 256.0 / 0.25e12, 1e-12);
    assert_true(parts.attn_compute_bound);
    /* all-reduce: 2·L·α + 2·L·(2·1/2)·53·64·2 B / 1e11 */
    assert_close(parts.allreduce_s, 4e-5 + 4.0 * 53.0 * 128.0 / 1e11, 1e-12);
    assert_close(parts.fixed_s, 1e-3, 1e-12);
    assert_close(parts.seq_s, 4e-4, 1e-12);
    assert_close(parts.total_s,
                 parts.linear_s + parts.head_s + parts.attn_s + parts.allreduce_s + 1.4e-3, 1e-12);
    assert_close(cost_iter_time(&pre, &b), parts.total_s, 0.0);

    struct cost_batch empty = {0};
    assert_true(cost_iter_time(&pre, &empty) == 0.0);
}

static void test_tp_must_divide_heads(void **state)
{
    struct cost_shape s;
    struct cost_rollout_pre pre;
    struct cost_rollout_params p = toy_params();
    cost_shape_init(&s, &toy_model);
    assert_int_equal(cost_rollout_pre_init(&pre, &s, &toy_gpu, &p, 3), LIBRA_EINVAL);
    assert_int_equal(cost_rollout_pre_init(&pre, &s, &toy_gpu, &p, 0), LIBRA_EINVAL);
}

/* Random batches: adding a decode sequence, context or prefill tokens never makes the
 * iteration faster, on every reference model and TP. */
static void test_more_work_never_takes_less_time(void **state)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct rng rng = rng_keyed(7, 0, 0, 0);
    for (int m = COST_REF_QWEN25_7B; m <= COST_REF_QWEN25_32B; m++) {
        struct cost_shape s = shape_of((enum cost_ref_model)m);
        for (int tp = 1; tp <= 4; tp *= 2) {
            struct cost_rollout_pre pre;
            assert_int_equal(cost_rollout_pre_init(&pre, &s, hw, &p, tp), 0);
            for (int trial = 0; trial < 200; trial++) {
                struct cost_batch b = {0};
                int seqs = (int)rng_uniform_int(&rng, 300);
                for (int i = 0; i < seqs; i++)
                    cost_batch_add_decode(&b, (double)rng_uniform_int(&rng, 20000));
                if (rng_uniform_int(&rng, 2))
                    cost_batch_add_prefill(&b, (double)rng_uniform_int(&rng, 8000),
                                           1.0 + (double)rng_uniform_int(&rng, 4096), true);
                double t = cost_iter_time(&pre, &b);
                struct cost_batch more = b;
                cost_batch_add_decode(&more, (double)rng_uniform_int(&rng, 20000));
                assert_true(cost_iter_time(&pre, &more) >= t);
                more = b;
                more.decode_ctx_tokens += 1000.0;
                assert_true(cost_iter_time(&pre, &more) >= t);
                more = b;
                cost_batch_add_prefill(&more, 0.0, 512.0, false);
                assert_true(cost_iter_time(&pre, &more) >= t);
            }
        }
    }
}

static void test_more_tp_streams_less_per_gpu(void **state)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    for (int m = COST_REF_QWEN25_7B; m <= COST_REF_CODELLAMA_34B; m++) {
        struct cost_shape s = shape_of((enum cost_ref_model)m);
        double prev_w = INFINITY, prev_c = INFINITY, prev_kv = 0.0;
        for (int tp = 1; tp <= 8; tp *= 2) {
            struct cost_rollout_pre pre;
            if (cost_rollout_pre_init(&pre, &s, hw, &p, tp))
                continue; /* heads not divisible */
            assert_true(pre.t_layer_weights_s < prev_w);
            assert_true(pre.s_per_layer_token < prev_c);
            assert_true(pre.kv_capacity_tokens >= prev_kv); /* more GPUs hold more KV */
            prev_w = pre.t_layer_weights_s;
            prev_c = pre.s_per_layer_token;
            prev_kv = pre.kv_capacity_tokens;
        }
    }
}

static void test_kv_capacity(void **state)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct cost_shape s = shape_of(COST_REF_QWEN25_7B);
    struct cost_rollout_pre pre;
    cost_rollout_pre_init(&pre, &s, hw, &p, 1);
    double free_bytes = 81234.0 * 1048576 * 0.9 - s.params_total * 2.0 - 2.0 * 1024 * 1024 * 1024;
    assert_close(pre.kv_capacity_tokens, floor(free_bytes / (56.0 * 1024)), 1e-12);
    /* weights that do not fit leave no KV (an answer, not an error) */
    struct spec_hardware small = *hw;
    small.hbm_bytes = 16e9;
    assert_int_equal(cost_rollout_pre_init(&pre, &s, &small, &p, 1), 0);
    assert_true(pre.kv_capacity_tokens == 0.0);
}

/* The decode line equals the decode time at every batch and context, both attention regimes
 * (memory-bound KV reads on A800, and a GPU whose attention compute binds). */
static void test_decode_line(void **state)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct spec_hardware slow = *hw;
    slow.bf16_flops_per_s = hw->bf16_flops_per_s / 500.0;
    const struct spec_hardware *gpus[] = {hw, &slow};
    struct cost_shape s = shape_of(COST_REF_QWEN25_7B);
    for (int g = 0; g < 2; g++)
        for (int tp = 1; tp <= 4; tp *= 2) {
            struct cost_rollout_params p;
            cost_rollout_params_default(&p, gpus[g]);
            struct cost_rollout_pre pre;
            assert_int_equal(cost_rollout_pre_init(&pre, &s, gpus[g], &p, tp), 0);
            for (double seqs = 1; seqs <= 256; seqs *= 4) {
                double base, per;
                cost_decode_line(&pre, seqs, &base, &per);
                for (double ctx = 0; ctx <= 2e6; ctx += 250000) {
                    double want = cost_decode_time(&pre, seqs, ctx);
                    assert_close(base + per * ctx, want, 1e-12);
                }
            }
        }
}

/* The default rollout terms of model m at TP tp on an A800. */
static struct cost_rollout_pre a800_pre(enum cost_ref_model m, int tp)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct cost_shape s = shape_of(m);
    struct cost_rollout_pre pre;
    assert_int_equal(cost_rollout_pre_init(&pre, &s, hw, &p, tp), 0);
    return pre;
}

static void test_prefill_chunks_and_cached_prefix(void **state)
{
    struct cost_rollout_pre pre = a800_pre(COST_REF_QWEN25_7B, 1);
    double whole = cost_prefill_time(&pre, 0, 8192, 8192);
    double chunked = cost_prefill_time(&pre, 0, 8192, 2048);
    assert_true(chunked > whole); /* each chunk pays the iteration overheads again */
    /* a suffix after a cached prefix costs less than recomputing everything, more than the
     * same suffix alone (attention reads the prefix) */
    double suffix = cost_prefill_time(&pre, 6000, 2192, 8192);
    assert_true(suffix < whole);
    assert_true(suffix > cost_prefill_time(&pre, 0, 2192, 8192));
    assert_true(cost_prefill_time(&pre, 0, 0, 2048) == 0.0);
}

/* The engine's way: one iteration per chunk, the last sampling a token. */
static double prefill_chunk_by_chunk(const struct cost_rollout_pre *pre, double cached,
                                     double tokens, double chunk, int *bound_changes)
{
    double t = 0.0;
    bool was_compute_bound = false;
    *bound_changes = 0;
    for (double done = 0.0; done < tokens; done += chunk) {
        struct cost_batch b = {0};
        cost_batch_add_prefill(&b, cached + done, fmin(chunk, tokens - done),
                               done + chunk >= tokens);
        struct cost_iter_parts parts;
        cost_iter_parts(pre, &b, &parts);
        if (done > 0.0 && done + chunk < tokens && parts.attn_compute_bound != was_compute_bound)
            ++*bound_changes;
        was_compute_bound = parts.attn_compute_bound;
        t += parts.total_s;
    }
    return t;
}

/* cost_prefill_time sums its chunks in closed form: equal to the chunk-by-chunk sum, including
 * prompts whose attention turns from KV-bound to compute-bound part way through. */
static void test_prefill_equals_its_chunks(void **state)
{
    const enum cost_ref_model models[] = {COST_REF_QWEN25_7B, COST_REF_QWEN25_32B};
    const double chunks[] = {1, 7, 64, 512, 2048, 8192};
    const double cached[] = {0, 100, 30000};
    const double tokens[] = {1, 999, 8192, 20001};
    int crossings = 0;
    for (size_t m = 0; m < 2; m++)
        for (int tp = 1; tp <= 4; tp *= 2) { /* 28 heads do not split 8 ways */
            struct cost_rollout_pre pre = a800_pre(models[m], tp);
            for (size_t c = 0; c < 6; c++)
                for (size_t k = 0; k < 3; k++)
                    for (size_t n = 0; n < 4; n++) {
                        int changes;
                        double want =
                            prefill_chunk_by_chunk(&pre, cached[k], tokens[n], chunks[c], &changes);
                        crossings += changes;
                        assert_close(cost_prefill_time(&pre, cached[k], tokens[n], chunks[c]), want,
                                     1e-9);
                    }
            /* chunks a little longer than the ratio of the bounds' rates per token turn from
             * KV-bound to compute-bound after a few chunks */
            double chunk =
                ceil(1.1 * pre.kv_bytes_per_token * pre.s_per_kv_byte / pre.s_per_attn_pair);
            int changes;
            double want = prefill_chunk_by_chunk(&pre, 0.0, 40.0 * chunk, chunk, &changes);
            crossings += changes;
            assert_close(cost_prefill_time(&pre, 0.0, 40.0 * chunk, chunk), want, 1e-9);
        }
    assert_int_equal(crossings, 6); /* once in each model and TP: the split was exercised */
}

/* A single request's rate sums its decodes in closed form: equal to the token-by-token sum. */
static void test_single_request_equals_its_iterations(void **state)
{
    struct cost_rollout_pre pre = a800_pre(COST_REF_QWEN25_7B, 2);
    const double prompts[] = {0, 1, 2048, 30000};
    const double gens[] = {1, 2, 2.5, 1000};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++) {
            double t = cost_prefill_time(&pre, 0.0, prompts[i], prompts[i]);
            for (long g = 1; g < (long)gens[j]; g++)
                t += cost_decode_time(&pre, 1.0, prompts[i] + (double)g - 1.0);
            assert_close(cost_single_request_s_per_token(&pre, prompts[i], gens[j]), t / gens[j],
                         1e-9);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_match_the_sheet),
        cmocka_unit_test(test_moe_counts_active_and_total_parameters),
        cmocka_unit_test(test_moe_streams_the_experts_its_tokens_touch),
        cmocka_unit_test(test_impossible_shapes_are_rejected),
        cmocka_unit_test(test_curve_interpolates_in_log_bytes),
        cmocka_unit_test(test_hand_computed_iteration),
        cmocka_unit_test(test_tp_must_divide_heads),
        cmocka_unit_test(test_more_work_never_takes_less_time),
        cmocka_unit_test(test_more_tp_streams_less_per_gpu),
        cmocka_unit_test(test_kv_capacity),
        cmocka_unit_test(test_decode_line),
        cmocka_unit_test(test_prefill_chunks_and_cached_prefix),
        cmocka_unit_test(test_prefill_equals_its_chunks),
        cmocka_unit_test(test_single_request_equals_its_iterations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
