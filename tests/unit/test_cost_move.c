/*
 * Tests of the move costs (src/cost/move.c): the callbacks are the rollout model's figures on
 * an idle instance (batch-1 decode at the stretch's mid context, chunked re-prefill on the
 * destination), larger TP decodes faster, a re-prefill grows with the context and does not
 * depend on where the trajectory came from, and the model survives the trip through the
 * router's void *ctx (sched_costs) as a copy of plain data.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/move.h"
#include "libra/libra.h"
#include "sched/router.h"

static void model_of(struct cost_move_model *m, enum cost_ref_model which, double chunk)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, cost_ref_model(which)), 0);
    assert_int_equal(cost_move_model_init(m, &s, hw, &p, chunk, 256), 0);
}

static void test_init_derives_every_tp_that_divides_the_heads(void **state)
{
    struct cost_move_model m;
    model_of(&m, COST_REF_QWEN25_32B, 2048); /* 40 heads: TP 1, 2, 4, 8 */
    for (int k = 0; k < SPEC_TP_SIZES; k++)
        assert_int_equal(m.pre[k].tp, 1 << k);
    assert_true(m.chunk_tokens == 2048);
    model_of(&m, COST_REF_QWEN25_7B, 2048); /* 28 heads: no TP8 instance */
    assert_int_equal(m.pre[2].tp, 4);
    assert_int_equal(m.pre[3].tp, 0);
    assert_true(m.pre[3].kv_capacity_tokens == 0);

    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, cost_ref_model(COST_REF_QWEN25_7B)), 0);
    s.heads = 0.5; /* no TP size divides it */
    assert_int_equal(cost_move_model_init(&m, &s, hw, &p, 2048, 256), LIBRA_EINVAL);
}

static void test_costs_are_the_rollout_model_on_an_idle_instance(void **state)
{
    struct cost_move_model m;
    model_of(&m, COST_REF_QWEN25_32B, 2048);
    for (int k = 0; k < SPEC_TP_SIZES; k++) {
        int tp = 1 << k;
        double decode = 3000 * cost_decode_time(&m.pre[k], 1.0, 10000 + 3000 / 2.0);
        assert_true(cost_move_decode_s(&m, tp, 10000, 3000) == decode);
        double prefill = cost_prefill_time(&m.pre[k], 0.0, 10000, 2048);
        assert_true(cost_move_s(&m, 1, tp, 10000) == prefill);
    }
    assert_true(cost_move_decode_s(&m, 2, 5000, 0) == 0);
    assert_true(cost_move_s(&m, 1, 2, 0) == 0);
}

static void test_larger_tp_decodes_faster(void **state)
{
    struct cost_move_model m;
    model_of(&m, COST_REF_QWEN25_32B, 2048);
    double tp1 = cost_move_decode_s(&m, 1, 8000, 4000);
    double tp2 = cost_move_decode_s(&m, 2, 8000, 4000);
    double tp4 = cost_move_decode_s(&m, 4, 8000, 4000);
    assert_true(tp1 > tp2);
    assert_true(tp2 > tp4);
    /* more tokens, or the same tokens after a longer context, take longer */
    assert_true(cost_move_decode_s(&m, 2, 8000, 8000) > tp2);
    assert_true(cost_move_decode_s(&m, 2, 30000, 4000) > tp2);
}

static void test_reprefill_grows_with_context_not_with_origin(void **state)
{
    struct cost_move_model m;
    model_of(&m, COST_REF_QWEN25_7B, 2048);
    double prev = 0;
    for (int64_t ctx = 1000; ctx <= 64000; ctx *= 2) {
        double t = cost_move_s(&m, 1, 2, ctx);
        assert_true(t > prev);
        prev = t;
        for (int from = 1; from <= 4; from *= 2) /* nothing is migrated: the cache is lost */
            assert_true(cost_move_s(&m, from, 2, ctx) == t);
    }
    /* smaller chunks pay the weights and the fixed overhead more often */
    struct cost_move_model small;
    model_of(&small, COST_REF_QWEN25_7B, 256);
    assert_true(cost_move_s(&small, 1, 2, 16000) > cost_move_s(&m, 1, 2, 16000));
}

/* The rate is the planner's concurrency limit: the batch the KV cache holds, capped by
 * max_seqs, one iteration per token, the instance's GPU time shared by the batch. */
static void test_rate_is_the_planned_batch_share(void **state)
{
    struct cost_move_model m;
    model_of(&m, COST_REF_QWEN25_32B, 2048);
    for (int k = 0; k < SPEC_TP_SIZES; k++) {
        int tp = 1 << k;
        struct cost_rate r;
        cost_move_rate(&m, tp, 8000, 0, &r);
        double batch = floor(m.pre[k].kv_capacity_tokens / 8000);
        batch = batch > 256 ? 256 : batch < 1 ? 1 : batch;
        double iter = cost_decode_time(&m.pre[k], batch, batch * 8000);
        assert_true(r.token_s == iter);
        assert_true(fabs(r.gpu_token_s - tp * iter / batch) <= 1e-15);
        assert_true(r.move_s == cost_move_s(&m, tp, tp, 8000));
        assert_true(r.move_gpu_s == tp * r.move_s);
    }
    struct cost_rate short_ctx, long_ctx; /* a longer context: fewer fit, each costs more */
    cost_move_rate(&m, 2, 1000, 0, &short_ctx);
    cost_move_rate(&m, 2, 60000, 0, &long_ctx);
    assert_true(long_ctx.gpu_token_s > short_ctx.gpu_token_s);
    struct cost_rate alone; /* latency at the batch running; the GPU share stays the planned one */
    cost_move_rate(&m, 2, 1000, 1, &alone);
    assert_true(alone.token_s == cost_decode_time(&m.pre[1], 1, 1000));
    assert_true(alone.token_s < short_ctx.token_s && alone.gpu_token_s == short_ctx.gpu_token_s);
}

static void test_ctx_round_trip(void **state)
{
    struct cost_move_model m;
    model_of(&m, COST_REF_QWEN25_14B, 4096);
    struct cost_move_model copy;
    memcpy(&copy, &m, sizeof copy); /* plain data: a copy costs the same */
    struct sched_costs k = {.decode_s = cost_move_decode_s, .move_s = cost_move_s, .ctx = &copy};
    for (int to = 1; to <= 4; to *= 2) {
        assert_true(k.decode_s(k.ctx, to, 12000, 2500) == cost_move_decode_s(&m, to, 12000, 2500));
        assert_true(k.move_s(k.ctx, 4, to, 12000) == cost_move_s(&m, 4, to, 12000));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_derives_every_tp_that_divides_the_heads),
        cmocka_unit_test(test_costs_are_the_rollout_model_on_an_idle_instance),
        cmocka_unit_test(test_larger_tp_decodes_faster),
        cmocka_unit_test(test_reprefill_grows_with_context_not_with_origin),
        cmocka_unit_test(test_rate_is_the_planned_batch_share),
        cmocka_unit_test(test_ctx_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
