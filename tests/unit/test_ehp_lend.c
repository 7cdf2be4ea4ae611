/* Tests of what the elastic pool lends (src/ehp/lend.c): which layouts can lend, what a lent
 * replica holds and costs, by hand from cost/, and the step with hybrids beside the core
 * against the plain cost model. */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/lifecycle.h"
#include "ehp/lend.h"
#include "plan/train.h"
#include "qwen14b_a800.h"

static struct plan_train_layout megatron(int tp, int pp, int dp)
{
    return (struct plan_train_layout){
        .tp = tp, .pp = pp, .cp = 1, .dp = dp, .budget_tokens = 16384, .recompute = true};
}

/* The reference's R2E layout (TP8 × DP4): a replica is one node; it holds the whole optimizer
 * state where a core GPU holds a quarter of it; each move costs what cost/ says. */
static void test_megatron_replica(void **state)
{
    struct plan_train_layout l = megatron(8, 1, 4);
    struct ehp_lend e;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_true(e.can_lend);
    assert_int_equal(e.why, EHP_LEND_OK);
    assert_int_equal(e.replica_gpus, 8);
    assert_int_equal(e.shards, 8);
    assert_int_equal(e.dp_ranks, 1);
    assert_int_equal(e.core_replicas, 4);
    double params_gpu = shape.params_total / 8;
    assert_close(e.memory.optimizer_bytes, params_gpu * 12.0, 1e-12);
    assert_close(e.core_memory.optimizer_bytes, params_gpu * 12.0 / 4, 1e-12);
    assert_close(e.memory.weights_bytes, e.core_memory.weights_bytes, 1e-12);
    assert_true(e.memory.total_bytes > e.core_memory.total_bytes);
    assert_true(e.memory.fits);

    const struct cost_lifecycle_params *lp = &settings.lifecycle;
    double state_b = 14.0 * shape.params_total, grad_b = 4.0 * shape.params_total;
    assert_close(e.state_bytes, state_b, 1e-12);
    assert_close(e.grad_bytes, grad_b, 1e-12);
    assert_close(e.exchange_s, 2.0 * (hw->allreduce_latency_s + grad_b / 8 / 12.5e9), 1e-12);
    assert_close(e.times.start_s, lp->trainer_init_s, 1e-12);
    assert_close(e.times.fetch_s, lp->fetch_fixed_s + state_b / 8 / 12.5e9, 1e-12);
    assert_close(e.times.zero_sync_s, cost_group_rebuild_s(lp, 16) + e.exchange_s, 1e-12);
    assert_close(e.times.return_s, cost_cold_start_s(lp, &shape), 1e-12);
    assert_close(e.join_s, e.times.start_s + e.times.fetch_s + e.times.zero_sync_s, 1e-12);
    /* well inside the reference's 180 s join timeout */
    assert_true(e.join_s < 60.0);
}

/* A TP4 × CP2 replica (the default experiment's training layout, TP4 CP2 DP3): its two CP
 * ranks split the state as DP ranks do, so it holds the whole optimizer state over 8 GPUs and
 * each fetches and exchanges an eighth. */
static void test_context_parallel_replica_splits_its_state(void **state)
{
    struct plan_train_layout l = megatron(4, 1, 3);
    l.cp = 2;
    struct ehp_lend e;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_int_equal(e.replica_gpus, 8);
    assert_int_equal(e.shards, 8);
    double params_gpu = shape.params_total / 4;
    assert_close(e.memory.optimizer_bytes, params_gpu * 12.0 / 2, 1e-12);
    assert_close(e.core_memory.optimizer_bytes, params_gpu * 12.0 / 6, 1e-12);
    double state_b = 14.0 * shape.params_total;
    assert_close(e.times.fetch_s, settings.lifecycle.fetch_fixed_s + state_b / 8 / 12.5e9, 1e-12);
}

/* A core replica fits because its optimizer state is sharded over DP; the same replica lent
 * holds all of it and does not. */
static void test_full_state_may_not_fit(void **state)
{
    struct plan_train_layout l = megatron(2, 1, 16);
    struct ehp_lend e;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_true(e.core_memory.fits);
    assert_false(e.memory.fits);
    assert_false(e.can_lend);
    assert_int_equal(e.why, EHP_LEND_MEMORY);
    assert_int_equal(e.replica_gpus, 2);
    assert_true(e.times.fetch_s > 0.0); /* what it would cost is still given */
}

/* FSDP shards over every DP rank: nothing to lend unless it runs as HSDP, whose shard group
 * must divide DP. */
static void test_fsdp_lends_only_as_hsdp(void **state)
{
    struct plan_train_layout l = {.tp = 1,
                                  .pp = 1,
                                  .cp = 1,
                                  .dp = 32,
                                  .budget_tokens = 8192,
                                  .recompute = true,
                                  .fsdp = true};
    struct ehp_lend e;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_false(e.can_lend);
    assert_int_equal(e.why, EHP_LEND_FULL_SHARD);
    assert_int_equal(e.replica_gpus, 0);
    assert_true(e.core_memory.fits);

    l.shard_dp = 3;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_int_equal(e.why, EHP_LEND_SHARD_GROUP);
    assert_false(e.can_lend);

    l.shard_dp = 8;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_true(e.can_lend);
    assert_int_equal(e.replica_gpus, 8);
    assert_int_equal(e.shards, 8);
    assert_int_equal(e.dp_ranks, 8);
    assert_int_equal(e.core_replicas, 4);
    /* HSDP: the hybrid and the core both shard everything over the group of 8 */
    assert_close(e.memory.total_bytes, e.core_memory.total_bytes, 1e-12);
    assert_close(e.memory.optimizer_bytes, shape.params_total * 12.0 / 8, 1e-12);

    /* an HSDP group on a Megatron layout, or a negative one, is an error */
    struct plan_train_layout m = megatron(8, 1, 4);
    m.shard_dp = 2;
    assert_int_equal(ehp_lend_layout(&m, &settings, &shape, hw, &e), LIBRA_EINVAL);
    l.shard_dp = -1;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), LIBRA_EINVAL);
    m.shard_dp = 0;
    m.dp = 0;
    assert_int_equal(ehp_lend_layout(&m, &settings, &shape, hw, &e), LIBRA_EINVAL);
    m = megatron(3, 1, 4); /* 40 heads: TP3 does not divide them */
    assert_int_equal(ehp_lend_layout(&m, &settings, &shape, hw, &e), LIBRA_EINVAL);
}

/* A replica is the unit of elasticity and sits on one host. */
static void test_replica_fits_a_node(void **state)
{
    struct plan_train_layout l = megatron(8, 2, 2);
    struct ehp_lend e;
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, &e), 0);
    assert_int_equal(e.replica_gpus, 16);
    assert_int_equal(e.why, EHP_LEND_NODE);
    assert_false(e.can_lend);
}

/* Under EP a replica lends whole expert groups only: EP 8 over TP 4 × CP 2 is one replica's
 * (the model's 4 KV heads bound TP at 4), EP 8 over TP 2 spans four replicas. */
static void test_replica_holds_whole_expert_groups(void **state)
{
    struct cost_shape moe;
    assert_int_equal(cost_shape_init(&moe, spec_model_find(&presets, "qwen3-30b-a3b")), 0);
    struct plan_train_layout l = megatron(4, 1, 4);
    l.cp = 2;
    l.ep = 8;
    struct ehp_lend e;
    assert_int_equal(ehp_lend_layout(&l, &settings, &moe, hw, &e), 0);
    assert_true(e.why != EHP_LEND_EXPERTS);
    l = megatron(2, 1, 16);
    l.ep = 8;
    assert_int_equal(ehp_lend_layout(&l, &settings, &moe, hw, &e), 0);
    assert_int_equal(e.why, EHP_LEND_EXPERTS);
    assert_false(e.can_lend);
}

static void seqs_of(struct cost_train_seqs *q, size_t n)
{
    uint32_t *len = xmallocarray(n, sizeof *len);
    for (size_t i = 0; i < n; i++)
        len[i] = 2000 + (uint32_t)(i * 397 % 9000);
    assert_int_equal(cost_train_seqs_init(q, &shape, len, n), 0);
    free(len);
}

/* The reference's layout (TP8 × DP4) with what it lends, its trainer configuration, and n
 * sequences to step it on. */
static struct plan_train_layout lendable(struct ehp_lend *e, struct cost_train_config *c,
                                         struct cost_train_seqs *q, size_t n)
{
    struct plan_train_layout l = megatron(8, 1, 4);
    assert_int_equal(ehp_lend_layout(&l, &settings, &shape, hw, e), 0);
    plan_train_config(&l, &settings, c);
    seqs_of(q, n);
    return l;
}

/* The plain cost model's step of config c on q. */
static double plain_step_s(const struct cost_train_config *c, const struct cost_train_seqs *q,
                           struct cost_train_scratch *sc)
{
    struct cost_train_load load;
    struct cost_train_step out;
    assert_int_equal(cost_train_deal(q, &shape, c->dp, c->minibatches, c->micro_batch_tokens,
                                     c->balance_each_minibatch, sc, &load),
                     0);
    assert_int_equal(cost_train_step_time(&shape, hw, &settings.train, c, &load, &out), 0);
    return out.step_s;
}

/* Without hybrids the step is the layout's own (the planner's costing); with them the fixed
 * batch is dealt over more ranks and the exchanges are exposed, a core lane serving
 * ceil(active / core replicas) of them. */
static void test_step_with_hybrids(void **state)
{
    struct ehp_lend e;
    struct cost_train_config c;
    struct cost_train_seqs q;
    struct cost_train_scratch sc = {0};
    struct plan_train_layout l = lendable(&e, &c, &q, 32);
    double plain = plain_step_s(&c, &q, &sc);

    struct ehp_step_cost s0, s2, s5;
    assert_int_equal(ehp_train_step(&l, &e, &settings, &shape, hw, &q, 0, &sc, &s0), 0);
    assert_close(s0.step_s, plain, 1e-12);
    assert_true(s0.exchange_s == 0.0);
    assert_int_equal(s0.dp_ranks, 4);

    assert_int_equal(ehp_train_step(&l, &e, &settings, &shape, hw, &q, 2, &sc, &s2), 0);
    assert_int_equal(s2.dp_ranks, 6);
    assert_close(s2.exchange_s, e.exchange_s, 1e-12);
    assert_true(s2.train.compute_s < s0.train.compute_s);
    assert_close(s2.step_s, s2.train.step_s + s2.exchange_s, 1e-12);

    assert_int_equal(ehp_train_step(&l, &e, &settings, &shape, hw, &q, 5, &sc, &s5), 0);
    assert_close(s5.exchange_s, 2.0 * e.exchange_s, 1e-12);

    /* a growing batch (the labelled option): each hybrid brings a core replica's share, so the
     * most loaded rank does about what it did alone */
    struct cost_train_seqs grown;
    struct ehp_step_cost g2;
    seqs_of(&grown, 48);
    assert_int_equal(ehp_train_step(&l, &e, &settings, &shape, hw, &grown, 2, &sc, &g2), 0);
    assert_true(g2.train.compute_s > s2.train.compute_s);

    /* more ranks than sequences cannot be dealt; a layout that cannot lend is refused */
    assert_int_equal(ehp_train_step(&l, &e, &settings, &shape, hw, &q, 40, &sc, &s5),
                     LIBRA_EINFEAS);
    assert_int_equal(ehp_train_step(&l, &e, &settings, &shape, hw, &q, -1, &sc, &s5), LIBRA_EINVAL);
    struct ehp_lend no = e;
    no.can_lend = false;
    assert_int_equal(ehp_train_step(&l, &no, &settings, &shape, hw, &q, 1, &sc, &s5), LIBRA_EINVAL);
    cost_train_seqs_free(&grown);
    cost_train_seqs_free(&q);
    cost_train_scratch_free(&sc);
}

/* A batch's step as the simulator's trainer costs it: without the pool the layout's own step on
 * the batch at hand (DP ranks at most the sequences, micro-batches at least the longest); with
 * it ehp_train_step's, hybrids beyond one sequence per rank left idle. */
static void test_batch_step(void **state)
{
    struct ehp_lend e;
    struct cost_train_config c;
    struct cost_train_seqs q;
    struct cost_train_scratch sc = {0};
    struct plan_train_layout l = lendable(&e, &c, &q, 6);

    /* the core alone, on the 4 DP ranks six sequences fill */
    c.minibatches = 1;
    c.micro_batch_tokens =
        q.longest_tokens > c.micro_batch_tokens ? q.longest_tokens : c.micro_batch_tokens;
    c.balance_each_minibatch = true;
    double core, pool0, pool1, pool9;
    assert_int_equal(ehp_batch_step_s(&l, &settings, NULL, 3, &shape, hw, &q, &sc, &core), 0);
    assert_close(core, plain_step_s(&c, &q, &sc), 1e-12); /* no pool: active is not read */

    /* with the pool: no hybrid is the core's step; six sequences leave room for two hybrids
     * of one rank each beside the four core ranks, so nine train as two */
    assert_int_equal(ehp_batch_step_s(&l, &settings, &e, 0, &shape, hw, &q, &sc, &pool0), 0);
    assert_close(pool0, core, 1e-12);
    assert_int_equal(ehp_batch_step_s(&l, &settings, &e, 1, &shape, hw, &q, &sc, &pool1), 0);
    assert_int_equal(ehp_batch_step_s(&l, &settings, &e, 9, &shape, hw, &q, &sc, &pool9), 0);
    struct ehp_step_cost two;
    struct plan_train_layout core_l = l;
    core_l.budget_tokens = (int)ceil(c.micro_batch_tokens / core_l.cp);
    struct plan_settings one_mb = settings;
    one_mb.minibatches = 1;
    assert_int_equal(ehp_train_step(&core_l, &e, &one_mb, &shape, hw, &q, 2, &sc, &two), 0);
    assert_close(pool9, two.step_s, 1e-12);
    assert_true(pool1 != pool0);
    cost_train_seqs_free(&q);
    cost_train_scratch_free(&sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_replica),
        cmocka_unit_test(test_context_parallel_replica_splits_its_state),
        cmocka_unit_test(test_full_state_may_not_fit),
        cmocka_unit_test(test_fsdp_lends_only_as_hsdp),
        cmocka_unit_test(test_replica_fits_a_node),
        cmocka_unit_test(test_replica_holds_whole_expert_groups),
        cmocka_unit_test(test_step_with_hybrids),
        cmocka_unit_test(test_batch_step),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
