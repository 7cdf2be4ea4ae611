/* Tests of the training cost model (src/cost/train.c): the dealing against a naive reference,
 * hand-computed step times and memory thresholds, and the FLOP terms. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/rollout.h"
#include "cost/train.h"
#include "spec/preset.h"
#include "util/rng.h"

static struct cost_shape qwen7b(void)
{
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, cost_ref_model(COST_REF_QWEN25_7B)), 0);
    return s;
}

/* ---- the dealing against a naive O(n·dp) reference ------------------------------------------ */

struct naive {
    double work_max, tokens_max, attn_max, micro;
};

static void naive_deal(const struct cost_train_seqs *q, const struct cost_shape *s, int dp, int mb,
                       double budget, bool each, struct naive *out)
{
    size_t n = q->n;
    int *rank = calloc(n, sizeof *rank), *group = calloc(n, sizeof *group);
    double *cell = calloc((size_t)mb * dp * 5, sizeof *cell); /* work, tokens, attn, big, cnt */
    int groups = each ? mb : 1;
    for (int g = 0; g < groups; g++) {
        /* mini-batch g: the sequences i with i·mb/n == g */
        size_t lo = 0, hi = n;
        if (each) {
            while (lo * mb / n < (size_t)g)
                lo++;
            hi = lo;
            while (hi < n && hi * mb / n == (size_t)g)
                hi++;
        }
        size_t cap = (hi - lo + dp - 1) / dp;
        double *load = calloc(dp, sizeof *load);
        size_t *count = calloc(dp, sizeof *count);
        for (size_t k = 0; k < n; k++) { /* q->order is by decreasing work */
            size_t i = q->order[k];
            if (i < lo || i >= hi)
                continue;
            int best = -1;
            for (int r = 0; r < dp; r++)
                if (count[r] < cap && (best < 0 || load[r] < load[best]))
                    best = r;
            rank[i] = best;
            group[i] = g;
            load[best] += q->work[i];
            count[best]++;
        }
        free(load);
        free(count);
    }
    size_t *total = calloc(dp, sizeof *total), *seen = calloc(dp, sizeof *seen);
    for (size_t i = 0; i < n; i++)
        total[rank[i]]++;
    for (size_t i = 0; i < n; i++) {
        int r = rank[i];
        size_t m = each ? (size_t)group[i] : seen[r]++ * mb / total[r]; /* where it was dealt */
        double *c = &cell[(m * dp + r) * 5];
        c[0] += q->work[i];
        c[1] += q->tokens[i];
        c[2] += q->work[i] - 2.0 * s->params_active * q->tokens[i];
        c[3] += q->tokens[i] > budget / 2 ? 1.0 : 0.0;
    }
    memset(out, 0, sizeof *out);
    for (int m = 0; m < mb; m++) {
        int worst = 0;
        double micro = 0.0;
        for (int r = 0; r < dp; r++) {
            double *c = &cell[(m * dp + r) * 5];
            if (c[0] > cell[(m * dp + worst) * 5])
                worst = r;
            micro = fmax(micro, fmax(ceil(c[1] / budget), c[3]));
        }
        double *w = &cell[(m * dp + worst) * 5];
        out->work_max += w[0];
        out->tokens_max += w[1];
        out->attn_max += w[2];
        out->micro += micro;
    }
    free(rank);
    free(group);
    free(cell);
    free(total);
    free(seen);
}

static void test_deal_matches_naive_reference(void **state)
{
    struct cost_shape s = qwen7b();
    struct rng rng = rng_keyed(11, 0, 0, 0);
    struct cost_train_scratch sc = {0};
    for (int trial = 0; trial < 60; trial++) {
        size_t n = 8 + rng_uniform_int(&rng, 400);
        uint32_t *len = malloc(n * sizeof *len);
        for (size_t i = 0; i < n; i++)
            len[i] = 1 + (uint32_t)rng_lognormal(&rng, 7.0, 1.0) % 30000;
        struct cost_train_seqs q;
        assert_int_equal(cost_train_seqs_init(&q, &s, len, n), 0);
        int dp = 1 + (int)rng_uniform_int(&rng, 8);
        int mb = 1 + (int)rng_uniform_int(&rng, 4);
        bool each = rng_uniform_int(&rng, 2);
        double budget = 30000.0 + (double)rng_uniform_int(&rng, 60000);
        struct cost_train_load load, again;
        int rc = cost_train_deal(&q, &s, dp, mb, budget, each, &sc, &load);
        /* the dealing alone, then the load on its ranks: the same, whatever the budget */
        uint32_t *rank = malloc(n * sizeof *rank);
        cost_train_assign(&q, dp, mb, each, &sc, rank);
        assert_int_equal(cost_train_deal_ranks(&q, &s, dp, mb, budget, each, rank, &sc, &again),
                         rc);
        if (rc == 0)
            assert_memory_equal(&again, &load, sizeof load);
        free(rank);
        if (n < (size_t)dp * mb) {
            assert_int_equal(rc, LIBRA_EINFEAS);
        } else {
            assert_int_equal(rc, 0);
            struct naive ref;
            naive_deal(&q, &s, dp, mb, budget, each, &ref);
            assert_close(load.work_max, ref.work_max, 1e-12);
            assert_close(load.tokens_max, ref.tokens_max, 1e-12);
            assert_close(load.attn_work_max, ref.attn_max, 1e-12);
            assert_close(load.microbatches, ref.micro, 0.0);
            assert_close(load.work, q.total_work, 0.0);
            /* the most loaded rank is at least the mean */
            assert_true(load.work_max * dp >= load.work * (1.0 - 1e-12));
        }
        cost_train_seqs_free(&q);
        free(len);
    }
    cost_train_scratch_free(&sc);
}

static void test_deal_rejects_what_cannot_run(void **state)
{
    struct cost_shape s = qwen7b();
    uint32_t len[4] = {100, 200, 9000, 300};
    struct cost_train_seqs q;
    struct cost_train_scratch sc = {0};
    struct cost_train_load load;
    assert_int_equal(cost_train_seqs_init(&q, &s, len, 4), 0);
    /* the 9000-token sequence does not fit an 8192-token micro-batch */
    assert_int_equal(cost_train_deal(&q, &s, 1, 1, 8192, false, &sc, &load), LIBRA_EINFEAS);
    /* 4 sequences cannot give 2 ranks 3 mini-batches each */
    assert_int_equal(cost_train_deal(&q, &s, 2, 3, 16384, false, &sc, &load), LIBRA_EINFEAS);
    assert_int_equal(cost_train_deal(&q, &s, 0, 1, 16384, false, &sc, &load), LIBRA_EINVAL);
    assert_int_equal(cost_train_deal(&q, &s, 2, 2, 16384, false, &sc, &load), 0);
    cost_train_seqs_free(&q);
    cost_train_scratch_free(&sc);
    uint32_t zero[2] = {10, 0};
    assert_int_equal(cost_train_seqs_init(&q, &s, zero, 2), LIBRA_EINVAL);
}

/* 27 equal sequences, 2 mini-batches of 14 and 13 on 12 ranks: at most 2 a rank in each, so
 * the slowest rank runs 4 sequences (counted in the mini-batch they were dealt with). */
static void test_uneven_minibatches_count_where_dealt(void **state)
{
    struct cost_shape s = qwen7b();
    uint32_t len[27];
    for (size_t i = 0; i < 27; i++)
        len[i] = 4000;
    struct cost_train_seqs q;
    struct cost_train_scratch sc = {0};
    struct cost_train_load load;
    assert_int_equal(cost_train_seqs_init(&q, &s, len, 27), 0);
    assert_int_equal(cost_train_deal(&q, &s, 12, 2, 16384, true, &sc, &load), 0);
    assert_close(load.work_max, 4.0 * q.work[0], 1e-12);
    assert_close(load.tokens_max, 4.0 * 4000, 0.0);
    cost_train_seqs_free(&q);
    cost_train_scratch_free(&sc);
}

/* ---- step time ----------------------------------------------------------------------------- */

static void deal(const struct cost_shape *s, const uint32_t *len, size_t n,
                 const struct cost_train_config *c, struct cost_train_load *load)
{
    struct cost_train_seqs q;
    struct cost_train_scratch sc = {0};
    assert_int_equal(cost_train_seqs_init(&q, s, len, n), 0);
    assert_int_equal(cost_train_deal(&q, s, c->dp, c->minibatches, c->micro_batch_tokens,
                                     c->balance_each_minibatch, &sc, load),
                     0);
    cost_train_seqs_free(&q);
    cost_train_scratch_free(&sc);
}

static void test_single_gpu_step_by_hand(void **state)
{
    struct cost_shape s = qwen7b();
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_train_params p;
    cost_train_params_default(&p);
    uint32_t len[3] = {1000, 3000, 2000};
    struct cost_train_config c = {
        .tp = 1, .pp = 1, .cp = 1, .dp = 1, .micro_batch_tokens = 4096, .minibatches = 1};
    struct cost_train_load load;
    struct cost_train_step st;
    deal(&s, len, 3, &c, &load);
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &st), 0);

    double fwd = 0.0;
    for (int i = 0; i < 3; i++) /* 2·N per token plus 2·L·q_dim·len·(len+1) */
        fwd += 2.0 * s.params_active * len[i] + 2.0 * 28 * 3584 * len[i] * (len[i] + 1.0);
    assert_close(st.compute_s, 3.0 * fwd / (312e12 * p.mfu), 1e-12);
    /* 6000 tokens in 4096-token micro-batches: 2; the 3000-token one needs its own */
    assert_close(st.microbatch_s, 2.0 * p.t_microbatch_s, 1e-12);
    double opt_bytes = s.params_total * (2.0 * 12.0 + 4.0 + 2.0);
    assert_close(st.optimizer_s, opt_bytes / (2.039e12 * p.optimizer_bw_eff), 1e-12);
    assert_true(st.tp_comm_s == 0.0 && st.dp_comm_s == 0.0 && st.pp_bubble_s == 0.0 &&
                st.cp_comm_s == 0.0 && st.pp_p2p_s == 0.0);
    assert_close(st.step_s, st.compute_s + st.microbatch_s + st.optimizer_s, 1e-12);
    assert_close(st.imbalance, 1.0, 1e-12);
}

static void test_flop_terms_switch(void **state)
{
    struct cost_shape s = qwen7b();
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_train_params p;
    cost_train_params_default(&p);
    uint32_t len[8] = {800, 1200, 4000, 700, 2500, 3000, 100, 9000};
    struct cost_train_config c = {
        .tp = 2, .pp = 2, .cp = 1, .dp = 2, .micro_batch_tokens = 16384, .minibatches = 2};
    struct cost_train_load load;
    struct cost_train_step base, more;
    deal(&s, len, 8, &c, &load);
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &base), 0);
    assert_true(base.k_update == 6.0 && base.k_recompute == 0.0 && base.k_old_logprob == 0.0 &&
                base.k_reference == 0.0);
    c.full_recompute = c.old_logprob = c.reference = true;
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &more), 0);
    assert_true(more.k_recompute == 2.0 && more.k_old_logprob == 2.0 && more.k_reference == 2.0);
    assert_close(more.flops, base.flops * 12.0 / 6.0, 1e-12);
    assert_close(more.compute_s, base.compute_s * 2.0, 1e-12);
    assert_true(more.tp_comm_s > base.tp_comm_s && more.pp_p2p_s > base.pp_p2p_s);
    assert_true(base.pp_bubble_s > 0.0 && base.dp_comm_s > 0.0);
    /* a load dealt for another DP size is refused */
    c.dp = 4;
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &more), LIBRA_EINVAL);
}

static void test_more_gpus_less_compute(void **state)
{
    struct cost_shape s = qwen7b();
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_train_params p;
    cost_train_params_default(&p);
    uint32_t len[64];
    for (int i = 0; i < 64; i++)
        len[i] = 2048; /* equal lengths: the dealing is exact */
    double prev = INFINITY;
    for (int dp = 1; dp <= 16; dp *= 2) {
        struct cost_train_config c = {.tp = 1,
                                      .pp = 1,
                                      .cp = 1,
                                      .dp = dp,
                                      .micro_batch_tokens = 8192,
                                      .minibatches = 4,
                                      .balance_each_minibatch = true};
        struct cost_train_load load;
        struct cost_train_step st;
        deal(&s, len, 64, &c, &load);
        assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &st), 0);
        if (dp > 1)
            assert_close(st.compute_s, prev / 2.0, 1e-12);
        assert_close(st.imbalance, 1.0, 1e-12);
        prev = st.compute_s;
    }
}

/* ---- memory -------------------------------------------------------------------------------- */

static struct cost_train_memory memory(const struct cost_train_config *c)
{
    struct cost_shape s = qwen7b();
    struct cost_train_params p;
    struct cost_train_memory m;
    cost_train_params_default(&p);
    assert_int_equal(cost_train_memory(&s, cost_ref_hardware(COST_REF_A800), &p, c, &m), 0);
    assert_true(m.fits == (m.headroom_bytes >= 0.0));
    return m;
}

/*
 * Qwen2.5-7B (7.615 B parameters) on an A800 (85.18 GB as the device reports it) with 5 % margin
 * (80.92 GB) and 4 GB workspace, full recompute. Per token: layer inputs 28·3584·2 B, one layer's
 * activations (4·3584 + 2·3584 + 2·512 + 4·18944)·2 B and logits 152064·4·1.5 B: ≈ 1.31 MB.
 * ZeRO-1 over 8 ranks keeps 2 + 4 + 12/8 = 7.5 B per parameter (57.1 GB): room for ≈ 15.1 K
 * tokens. ZeRO-2 keeps 2 + 4/8 + 12/8 = 4 B (30.5 GB): ≈ 35.5 K tokens.
 */
static void test_memory_fits_flips_where_computed(void **state)
{
    struct cost_train_config c = {.tp = 1,
                                  .pp = 1,
                                  .cp = 1,
                                  .dp = 8,
                                  .minibatches = 1,
                                  .zero_stage = 1,
                                  .full_recompute = true};
    c.micro_batch_tokens = 14800;
    assert_true(memory(&c).fits);
    c.micro_batch_tokens = 15500;
    assert_false(memory(&c).fits);
    c.zero_stage = 2;
    c.micro_batch_tokens = 35000;
    assert_true(memory(&c).fits);
    c.micro_batch_tokens = 36000;
    assert_false(memory(&c).fits);
    /* without recompute every layer's activations stay: far less fits */
    c.full_recompute = false;
    c.micro_batch_tokens = 8192;
    assert_false(memory(&c).fits);
    c.zero_stage = 0; /* 16 B per parameter: 122 GB, never fits on one 80 GB GPU */
    c.full_recompute = true;
    c.micro_batch_tokens = 1;
    assert_false(memory(&c).fits);
}

static void test_memory_shrinks_with_sharding(void **state)
{
    struct cost_train_config c = {
        .tp = 1, .pp = 1, .cp = 1, .dp = 8, .minibatches = 1, .micro_batch_tokens = 8192};
    double prev = INFINITY;
    for (int z = 0; z <= 3; z++) {
        c.zero_stage = z;
        struct cost_train_memory m = memory(&c);
        assert_true(m.total_bytes < prev);
        prev = m.total_bytes;
    }
    c.zero_stage = 0;
    c.distributed_optimizer = true; /* = ZeRO-1 */
    struct cost_train_memory d = memory(&c);
    c.distributed_optimizer = false;
    c.zero_stage = 1;
    assert_close(d.total_bytes, memory(&c).total_bytes, 1e-12);
    struct cost_train_memory t1 = memory(&c);
    c.tp = 4;
    struct cost_train_memory t4 = memory(&c);
    assert_true(t4.weights_bytes < t1.weights_bytes &&
                t4.activations_bytes < t1.activations_bytes && t4.logits_bytes < t1.logits_bytes);
    c.tp = 3; /* does not divide 28 heads */
    struct cost_shape s = qwen7b();
    struct cost_train_params p;
    struct cost_train_memory m;
    cost_train_params_default(&p);
    assert_int_equal(cost_train_memory(&s, cost_ref_hardware(COST_REF_A800), &p, &c, &m),
                     LIBRA_EINVAL);
}

/*
 * Hybrid sharding (HSDP) on 4 A800 nodes, DP 32, ZeRO-3: the state is split over a node's 8
 * ranks instead of all 32 (four times the weights, gradients and optimizer state per GPU), and
 * in exchange the parameter gathers and the gradient reduce-scatter run on NVLink (150 GB/s bus)
 * rather than the NICs (12.5 GB/s); only each rank's gradient shard crosses nodes, all-reduced
 * over the 4 groups. With 7.615 B parameters at 4 B per gradient and 30 µs per collective, per
 * mini-batch: reduce-scatter 7/8·30.46 GB / 150 GB/s + 30 µs, plus the shards' all-reduce
 * 2·3/4·3.81 GB / 12.5 GB/s + 30 µs.
 */
static void test_hybrid_sharding(void **state)
{
    struct cost_shape s = qwen7b();
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_train_params p;
    cost_train_params_default(&p);
    uint32_t len[64];
    for (int i = 0; i < 64; i++)
        len[i] = 2048;
    struct cost_train_config full = {.tp = 1,
                                     .pp = 1,
                                     .cp = 1,
                                     .dp = 32,
                                     .micro_batch_tokens = 8192,
                                     .minibatches = 1,
                                     .zero_stage = 3};
    struct cost_train_config hybrid = full;
    hybrid.shard_dp = 8;
    struct cost_train_memory mf = memory(&full), mh = memory(&hybrid);
    assert_close(mh.weights_bytes, 4.0 * mf.weights_bytes, 1e-12);
    assert_close(mh.grads_bytes, 4.0 * mf.grads_bytes, 1e-12);
    assert_close(mh.optimizer_bytes, 4.0 * mf.optimizer_bytes, 1e-12);
    assert_close(mh.activations_bytes, mf.activations_bytes, 1e-12);

    struct cost_train_load load;
    struct cost_train_step sf, sh;
    deal(&s, len, 64, &full, &load);
    assert_int_equal(cost_train_step_time(&s, hw, &p, &full, &load, &sf), 0);
    assert_int_equal(cost_train_step_time(&s, hw, &p, &hybrid, &load, &sh), 0);
    double grads = s.params_total * 4.0, alpha = 30e-6;
    double sync =
        7.0 / 8.0 * grads / 150e9 + alpha + 2.0 * 3.0 / 4.0 * (grads / 8.0) / 12.5e9 + alpha;
    assert_close(sh.dp_comm_s, (1.0 - p.dp_overlap) * sync, 1e-9);
    assert_true(sh.zero3_gather_s < sf.zero3_gather_s);
    assert_close(sh.optimizer_s, 4.0 * sf.optimizer_s, 1e-12);
    assert_close(sh.compute_s, sf.compute_s, 1e-12);
    /* shard_dp == dp is full sharding; a shard that does not divide DP is refused */
    hybrid.shard_dp = 32;
    struct cost_train_step same;
    assert_int_equal(cost_train_step_time(&s, hw, &p, &hybrid, &load, &same), 0);
    assert_close(same.step_s, sf.step_s, 1e-12);
    hybrid.shard_dp = 5;
    assert_int_equal(cost_train_step_time(&s, hw, &p, &hybrid, &load, &same), LIBRA_EINVAL);
}

/*
 * Context parallelism shards the state as data parallelism does: CP ranks hold the same weights
 * and each a part of its sequences' gradients, so Megatron's distributed optimizer shards over
 * the DP·CP ranks (its intra_dp_cp_group) and FSDP's mesh spans them. Qwen2.5-7B (7.615 B
 * parameters) at TP 4 CP 2 DP 1 on one A800 node: the optimizer state per GPU is N/4·12 B / 2,
 * as at TP 4 DP 2, and the gradients are reduce-scattered and the weights all-gathered between
 * the 2 CP ranks over NVLink (150 GB/s bus, 30 µs each): 1/2·N/4·4 B / 150 GB/s + 1/2·N/4·2 B /
 * 150 GB/s + 60 µs per mini-batch. FSDP at CP 2 DP 4 splits everything 8 ways.
 */
static void test_context_parallel_ranks_share_the_sharded_state(void **state)
{
    struct cost_shape s = qwen7b();
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
    struct cost_train_params p;
    cost_train_params_default(&p);
    double n = s.params_total;
    struct cost_train_config cp2 = {.tp = 4,
                                    .pp = 1,
                                    .cp = 2,
                                    .dp = 1,
                                    .micro_batch_tokens = 16384,
                                    .minibatches = 1,
                                    .distributed_optimizer = true};
    struct cost_train_config dp2 = cp2;
    dp2.cp = 1;
    dp2.dp = 2;
    dp2.micro_batch_tokens = 8192;
    struct cost_train_memory mc = memory(&cp2);
    assert_close(mc.optimizer_bytes, n / 4 * p.optimizer_bytes / 2, 1e-12);
    assert_close(mc.optimizer_bytes, memory(&dp2).optimizer_bytes, 1e-12);
    assert_close(mc.grads_bytes, n / 4 * p.grad_bytes, 1e-12); /* not sharded: ZeRO-1 */

    uint32_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = 4096;
    struct cost_train_load load;
    struct cost_train_step st;
    deal(&s, len, 8, &cp2, &load);
    assert_int_equal(cost_train_step_time(&s, hw, &p, &cp2, &load, &st), 0);
    double sync =
        0.5 * n / 4 * p.grad_bytes / 150e9 + 0.5 * n / 4 * p.weight_bytes / 150e9 + 2 * 30e-6;
    assert_close(st.dp_comm_s, (1.0 - p.dp_overlap) * sync, 1e-9);

    struct cost_train_config fsdp = {.tp = 1,
                                     .pp = 1,
                                     .cp = 2,
                                     .dp = 4,
                                     .micro_batch_tokens = 16384,
                                     .minibatches = 1,
                                     .zero_stage = 3};
    struct cost_train_memory mf = memory(&fsdp);
    assert_close(mf.weights_bytes, n * p.weight_bytes / 8, 1e-12);
    assert_close(mf.grads_bytes, n * p.grad_bytes / 8, 1e-12);
    assert_close(mf.optimizer_bytes, n * p.optimizer_bytes / 8, 1e-12);
}

/*
 * Expert parallelism on Qwen3-30B-A3B (48 layers of 128 experts, top-8, hidden 2048), 16 H100
 * on two nodes, TP 1, Megatron's distributed optimizer. EP 8 keeps 16 of each layer's experts
 * on a GPU: their weights and gradients shrink 8-fold and their optimizer state is sharded
 * over the 2 GPUs that hold the same experts, while the rest (attention, router, embeddings)
 * stays as it was. A rank sends each of its 7 node peers 1/8 of its tokens' top-8 copies of the
 * hidden state (2 B each) per all-to-all, over the 340 GB/s bus; EP 16 sends 8 of its 15 peers'
 * shares over the 25 GB/s NICs, which then set the time. FLOPs do not change.
 */
static void test_expert_parallelism(void **state)
{
    struct cost_shape s;
    assert_int_equal(cost_shape_init(&s, cost_ref_model(COST_REF_QWEN3_30B_A3B)), 0);
    const struct spec_hardware *hw = cost_ref_hardware(COST_REF_H100);
    struct cost_train_params p;
    cost_train_params_default(&p);
    struct cost_train_config c = {.tp = 1,
                                  .pp = 1,
                                  .cp = 1,
                                  .dp = 16,
                                  .micro_batch_tokens = 8192,
                                  .minibatches = 1,
                                  .distributed_optimizer = true,
                                  .full_recompute = true};
    uint32_t len[64];
    for (int i = 0; i < 64; i++)
        len[i] = 4096;
    struct cost_train_load load;
    deal(&s, len, 64, &c, &load);
    struct cost_train_step st[3];
    struct cost_train_memory m[3];
    const int eps[3] = {1, 8, 16};
    for (int i = 0; i < 3; i++) {
        c.ep = eps[i];
        assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &st[i]), 0);
        assert_int_equal(cost_train_memory(&s, hw, &p, &c, &m[i]), 0);
    }
    double experts = s.layers * s.experts * s.expert_params, dense = s.params_total - experts;
    assert_close(m[0].weights_bytes, 2.0 * s.params_total, 1e-12);
    assert_close(m[1].weights_bytes, 2.0 * (dense + experts / 8.0), 1e-12);
    assert_close(m[1].grads_bytes, 4.0 * (dense + experts / 8.0), 1e-12);
    assert_close(m[1].optimizer_bytes, 12.0 * (dense / 16.0 + experts / 8.0 / 2.0), 1e-12);
    assert_close(m[1].activations_bytes, m[0].activations_bytes, 1e-12);

    assert_true(st[0].ep_comm_s == 0.0);
    double sweeps = 2.0 * 2.0 + 2.0; /* each way in the forward and recompute; backward */
    double peer8 = load.tokens_max * 8.0 * 2048.0 * 2.0 / 8.0, alpha = 30e-6;
    assert_close(st[1].ep_comm_s, sweeps * 48.0 * (load.microbatches * alpha + 7.0 * peer8 / 340e9),
                 1e-9);
    double peer16 = peer8 / 2.0;
    assert_close(st[2].ep_comm_s, sweeps * 48.0 * (load.microbatches * alpha + 8.0 * peer16 / 25e9),
                 1e-9);
    for (int i = 1; i < 3; i++) {
        assert_close(st[i].compute_s, st[0].compute_s, 1e-12);
        assert_close(st[i].flops, st[0].flops, 1e-12);
        assert_close(st[i].optimizer_s, st[0].optimizer_s, 1e-12); /* 1/16 of it either way */
    }

    /* slime's Qwen3-30B-A3B layout, 8 GPUs at TP 4 and EP 8: the experts split 8 ways, not by
     * TP; the rest by TP; every GPU sends its quarter of a replica's tokens */
    struct cost_train_config folded = c;
    folded.tp = 4;
    folded.dp = 2;
    folded.ep = 8;
    struct cost_train_load fl;
    struct cost_train_memory fm;
    struct cost_train_step fs;
    deal(&s, len, 64, &folded, &fl);
    assert_int_equal(cost_train_memory(&s, hw, &p, &folded, &fm), 0);
    assert_close(fm.weights_bytes, 2.0 * (dense / 4.0 + experts / 8.0), 1e-12);
    assert_close(fm.optimizer_bytes, 12.0 * (dense / 4.0 / 2.0 + experts / 8.0), 1e-12);
    assert_int_equal(cost_train_step_time(&s, hw, &p, &folded, &fl, &fs), 0);
    double peer = fl.tokens_max / 4.0 * 8.0 * 2048.0 * 2.0 / 8.0;
    assert_close(fs.ep_comm_s, sweeps * 48.0 * (fl.microbatches * alpha + 7.0 * peer / 340e9),
                 1e-9);

    /* EP that does not divide the stage or the experts, EP of a dense model, with HSDP: refused */
    struct cost_train_step bad;
    c.ep = 32; /* > the 16 GPUs */
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &bad), LIBRA_EINVAL);
    c.ep = 3;
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &bad), LIBRA_EINVAL);
    c.ep = 8;
    c.zero_stage = 3;
    c.distributed_optimizer = false;
    c.shard_dp = 8;
    assert_int_equal(cost_train_step_time(&s, hw, &p, &c, &load, &bad), LIBRA_EINVAL);
    struct cost_shape d = qwen7b();
    struct cost_train_memory dm;
    c.shard_dp = 0;
    c.ep = 2;
    assert_int_equal(cost_train_memory(&d, hw, &p, &c, &dm), LIBRA_EINVAL);
}

/* The capacity the cost model works with is the built-in preset's, for every GPU: the engine's
 * KV budget is its memory fraction of it and training's fit is it less the margin. */
static void test_capacity_is_the_presets(void **state)
{
    struct spec_presets presets;
    struct libra_error err;
    assert_int_equal(spec_presets_init(&presets, &err), 0);
    struct cost_shape s = qwen7b();
    struct cost_train_params tp;
    cost_train_params_default(&tp);
    struct cost_train_config c = {
        .tp = 1, .pp = 1, .cp = 1, .dp = 1, .micro_batch_tokens = 4096, .minibatches = 1};
    for (size_t i = 0; i < presets.n_hardware; i++) {
        const struct spec_hardware *hw = &presets.hardware[i];
        struct cost_rollout_params rp;
        struct cost_rollout_pre pre;
        cost_rollout_params_default(&rp, hw);
        assert_int_equal(cost_rollout_pre_init(&pre, &s, hw, &rp, 1), 0);
        double free_bytes =
            hw->hbm_bytes * rp.mem_util - pre.weight_bytes_per_gpu - rp.workspace_bytes;
        assert_true(pre.kv_capacity_tokens == floor(free_bytes / pre.kv_bytes_per_token));
        struct cost_train_memory m;
        assert_int_equal(cost_train_memory(&s, hw, &tp, &c, &m), 0);
        assert_true(m.capacity_bytes == hw->hbm_bytes * (1.0 - tp.margin_frac));
    }
    spec_presets_free(&presets);
}

/* Checks that c does not suit s (named name), for the reason want. */
static void refused(const struct cost_shape *s, const struct cost_train_config *c, const char *name,
                    const char *want)
{
    char why[240];
    assert_int_equal(cost_train_config_check(s, c, name, why, sizeof why), LIBRA_EINVAL);
    assert_string_equal(why, want);
}

/* A layout that does not suit the model is refused, saying why in the model's terms. */
static void test_config_check_says_why(void **state)
{
    struct cost_shape dense, moe;
    assert_int_equal(cost_shape_init(&dense, cost_ref_model(COST_REF_QWEN25_7B)), 0);
    assert_int_equal(cost_shape_init(&moe, cost_ref_model(COST_REF_QWEN3_30B_A3B)), 0);
    struct cost_train_config c = {
        .tp = 1, .pp = 1, .cp = 1, .dp = 16, .micro_batch_tokens = 8192, .minibatches = 1};
    assert_int_equal(cost_train_config_check(&dense, &c, "7b", NULL, 0), 0);
    c.tp = 3;
    refused(&dense, &c, "7b",
            "training layout tp 3 pp 1 cp 1 dp 16 does not suit 7b (tp must divide its 28 heads "
            "and its 4 KV heads, pp at most its 28 layers)");
    c.tp = 7; /* divides the heads, not the KV heads: a TP rank would hold part of a KV head */
    refused(&dense, &c, "7b",
            "training layout tp 7 pp 1 cp 1 dp 16 does not suit 7b (tp must divide its 28 heads "
            "and its 4 KV heads, pp at most its 28 layers)");
    c.tp = 1;
    c.ep = 8;
    refused(&dense, &c, "7b", "ep 8: 7b is dense (expert parallelism needs an MoE model)");
    assert_int_equal(cost_train_config_check(&moe, &c, "30b", NULL, 0), 0);
    c.ep = 3;
    refused(&moe, &c, "30b",
            "ep 3 must divide the 16 GPUs of a pipeline stage (tp·cp·dp) and the 128 experts of "
            "30b");
    c.ep = 8;
    c.shard_dp = 8;
    refused(&moe, &c, "30b", "ep 8 with hybrid sharding (HSDP) is not modelled");
    c.minibatches = 0;
    refused(&moe, &c, "30b", "an invalid training layout");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deal_matches_naive_reference),
        cmocka_unit_test(test_deal_rejects_what_cannot_run),
        cmocka_unit_test(test_uneven_minibatches_count_where_dealt),
        cmocka_unit_test(test_single_gpu_step_by_hand),
        cmocka_unit_test(test_flop_terms_switch),
        cmocka_unit_test(test_more_gpus_less_compute),
        cmocka_unit_test(test_memory_fits_flips_where_computed),
        cmocka_unit_test(test_memory_shrinks_with_sharding),
        cmocka_unit_test(test_hybrid_sharding),
        cmocka_unit_test(test_context_parallel_ranks_share_the_sharded_state),
        cmocka_unit_test(test_expert_parallelism),
        cmocka_unit_test(test_capacity_is_the_presets),
        cmocka_unit_test(test_config_check_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
