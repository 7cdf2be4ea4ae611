/* Tests of the engine lifecycle costs (src/cost/lifecycle.c): hand-computed values under the
 * defaults and the directions every caller relies on, the elastic pool's state and gradient
 * moves included. */
#include "testutil.h"

#include <math.h>

#include "cost/calib.h"
#include "cost/lifecycle.h"

static struct cost_shape shape(enum cost_ref_model m)
{
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, cost_ref_model(m)), 0);
    return s;
}

static void test_values_by_hand(void **state)
{
    struct cost_lifecycle_params lp;
    cost_lifecycle_params_default(&lp);
    struct cost_shape s = shape(COST_REF_QWEN25_7B);
    const struct spec_hardware *h20 = cost_ref_hardware(COST_REF_H20);
    double bytes = 2.0 * s.params_total; /* bf16 */
    assert_close(cost_cold_start_s(&lp, &s), 30.0 + bytes / 2e9, 1e-12);
    assert_close(cost_wake_s(&lp, &s, 4), 0.3 + bytes / 4 / 20e9, 1e-12);
    assert_close(cost_disk_reload_s(&lp, &s), 0.3 + bytes / 2e9, 1e-12);
    double buckets = ceil(bytes / 512e6);
    assert_close(cost_broadcast_s(&lp, &s, h20, false), buckets * 5e-3 + bytes / 350e9, 1e-12);
    assert_close(cost_broadcast_s(&lp, &s, h20, true), buckets * 5e-3 + bytes / 25e9, 1e-12);
    /* FSDP shards over 8 GPUs, rollout TP2: each GPU gathers 1/2 − 1/8 of the weights */
    assert_close(cost_reshard_s(&lp, &s, h20, 8, 2, false), 2.0 + bytes * 0.375 / 350e9, 1e-12);
    /* a rollout shard no larger than the training shard needs no gather */
    assert_close(cost_reshard_s(&lp, &s, h20, 4, 8, false), 2.0, 1e-12);
}

static void test_bigger_and_farther_cost_more(void **state)
{
    struct cost_lifecycle_params lp;
    cost_lifecycle_params_default(&lp);
    struct cost_shape s7 = shape(COST_REF_QWEN25_7B), s32 = shape(COST_REF_QWEN25_32B);
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    assert_true(cost_cold_start_s(&lp, &s32) > cost_cold_start_s(&lp, &s7));
    assert_true(cost_wake_s(&lp, &s32, 8) < cost_wake_s(&lp, &s32, 2));
    assert_true(cost_broadcast_s(&lp, &s7, hw, true) > cost_broadcast_s(&lp, &s7, hw, false));
    assert_true(cost_reshard_s(&lp, &s7, hw, 8, 1, true) >
                cost_reshard_s(&lp, &s7, hw, 8, 1, false));
    /* waking beats restarting, restarting beats nothing */
    assert_true(cost_wake_s(&lp, &s7, 1) < cost_disk_reload_s(&lp, &s7));
    assert_true(cost_disk_reload_s(&lp, &s7) < cost_cold_start_s(&lp, &s7));
}

/* The elastic pool's moves: ~14 bytes per parameter fetched, fp32 gradients exchanged (the
 * spec's ~207 GB and ~59 GB for a 14.8 B model), each GPU of the replica moving its share. */
static void test_elastic_state_and_gradients(void **state)
{
    struct cost_lifecycle_params lp;
    struct cost_train_params tp;
    cost_lifecycle_params_default(&lp);
    cost_train_params_default(&tp);
    struct cost_shape s = shape(COST_REF_QWEN25_14B);
    const struct spec_hardware *a800 = cost_ref_hardware(COST_REF_A800);
    double state_b = cost_state_bytes(&tp, &s), grad_b = cost_grad_bytes(&tp, &s);
    assert_close(state_b, 14.0 * s.params_total, 1e-12);
    assert_close(grad_b, 4.0 * s.params_total, 1e-12);
    assert_true(state_b > 190e9 && state_b < 230e9);
    assert_true(grad_b > 54e9 && grad_b < 66e9);
    /* TP8: each GPU fetches 1/8 over its 12.5 GB/s link */
    assert_close(cost_state_fetch_s(&lp, a800, state_b, 8), 1.0 + state_b / 8 / 12.5e9, 1e-12);
    assert_close(cost_grad_exchange_s(a800, grad_b, 8), 2.0 * (30e-6 + grad_b / 8 / 12.5e9), 1e-12);
    /* fewer shards move more bytes per GPU */
    assert_true(cost_state_fetch_s(&lp, a800, state_b, 2) >
                cost_state_fetch_s(&lp, a800, state_b, 8));
    assert_true(cost_grad_exchange_s(a800, grad_b, 2) > cost_grad_exchange_s(a800, grad_b, 8));
}

static void test_kv_move(void **state)
{
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_rollout_params p;
    cost_rollout_params_default(&p, hw);
    struct cost_shape s = shape(COST_REF_QWEN25_7B);
    struct cost_rollout_pre src, dst;
    cost_rollout_pre_init(&src, &s, hw, &p, 1);
    cost_rollout_pre_init(&dst, &s, hw, &p, 2);
    struct cost_kv_move mv;
    cost_kv_move(&src, &dst, hw, 20000.0, 8192.0, false, &mv);
    assert_close(mv.migrate_s, 30e-6 + 20000.0 * 56.0 * 1024 / 150e9, 1e-12);
    assert_close(mv.recompute_s, cost_prefill_time(&dst, 0.0, 20000.0, 8192.0), 1e-12);
    assert_true(mv.migrate); /* NVLink moves 1.1 GB in ms; recomputing 20 K tokens takes longer */
    /* across nodes at 12.5 GB/s per GPU the copy takes longer than inside the node */
    struct cost_kv_move far;
    cost_kv_move(&src, &dst, hw, 20000.0, 8192.0, true, &far);
    assert_true(far.migrate_s > mv.migrate_s);
    assert_true(far.migrate == (far.migrate_s < far.recompute_s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_by_hand),
        cmocka_unit_test(test_bigger_and_farther_cost_more),
        cmocka_unit_test(test_elastic_state_and_gradients),
        cmocka_unit_test(test_kv_move),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
