/*
 * Tests of the router (src/sched/router.c, policy.c): every rule of spec §4 — start short,
 * missing node → stay, agreement of mean and p90, promotion and demotion, stickiness, the
 * fallback order, caps and never-refuse — the options (cache-aware moves, token quantum) and
 * each baseline policy.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "sched/policy.h"
#include "sched/router.h"
#include "spec/config.h"

struct fixture {
    struct spec_bucket_layout layout;
    struct sched_instance inst[8];
    struct sched_registry reg;
    struct sched_model *model;
    struct sched_router *r;
    struct sched_obs_config obs;
};

/* Two instances per bucket of "tp1:4000,tp2:12000,tp4:30000,tp8:60000", ids 10*bucket+k. */
static void setup(struct fixture *f, enum sched_policy policy,
                  void (*tweak)(struct sched_router_config *))
{
    memset(f, 0, sizeof *f);
    assert_int_equal(
        spec_bucket_parse(&f->layout, "tp1:4000,tp2:12000,tp4:30000,tp8:60000", "test", NULL), 0);
    for (int i = 0; i < 8; i++)
        f->inst[i] = (struct sched_instance){.id = 10 * (i / 2) + i % 2,
                                             .tp = 1 << (i / 2),
                                             .bucket = i / 2,
                                             .cap = 3,
                                             .ready = true};
    f->reg = (struct sched_registry){f->inst, 8};
    f->model = sched_model_new(NULL);
    sched_obs_defaults(&f->obs, NULL, NULL);
    struct sched_router_config c;
    sched_router_config_default(&c, policy, &f->layout);
    if (tweak)
        tweak(&c);
    assert_int_equal(sched_router_new(&f->r, &c, f->model, NULL), 0);
}

/* A toy fleet for cmlfq_h: TP t decodes a token in 0.04 / sqrt(t) s at a batch of 32, so a
 * larger TP is faster and spends more GPU time per token; a move costs 1 s on TP GPUs; a
 * trajectory later than 100 s holds 16 GPUs. */
static void toy_rate(void *ctx, int tp, int64_t context_tokens, double batch, struct cost_rate *out)
{
    (void)ctx;
    (void)context_tokens;
    (void)batch;
    out->token_s = 0.04 / sqrt(tp);
    out->gpu_token_s = tp * out->token_s / 32;
    out->move_s = 1;
    out->move_gpu_s = tp;
}

static const struct sched_costs toy_costs = {
    .decision = {.rate = toy_rate, .deadline_s = 100, .late_gpus = 16}};

static void with_toy_costs(struct sched_router_config *c)
{
    c->costs = toy_costs;
}

static void with_toy_costs_attempts_alone(struct sched_router_config *c)
{
    c->costs = toy_costs;
    c->attempt_shrink = 0;
}

static void teardown(struct fixture *f)
{
    sched_router_free(f->r);
    sched_model_free(f->model);
}

static struct sched_obs obs_of(const char *tool, int64_t tokens, enum sched_status st)
{
    struct sched_obs_config c;
    sched_obs_defaults(&c, NULL, NULL);
    struct sched_tool_return r = {.tool = tool,
                                  .payload_tokens = tokens,
                                  .payload_chars = -1,
                                  .status = (int)st,
                                  .reward = NAN,
                                  .correct = -1};
    struct sched_obs o;
    sched_obs_classify(&c, &r, &o);
    return o;
}

/* Teaches the model: trajectories of prompt whose first return is o, `remaining` after it. */
static void teach(struct fixture *f, uint64_t prompt, const struct sched_obs *o,
                  const int64_t *remaining, size_t n)
{
    char key[SCHED_STATE_KEY_MAX];
    sched_state_key(&f->obs, o, 1, key, sizeof key);
    uint32_t id = sched_model_state(f->model, key);
    for (size_t i = 0; i < n; i++) {
        int64_t gen[] = {100};
        struct sched_traj_summary s = {.prompt = prompt,
                                       .total_tokens = 100 + remaining[i],
                                       .n = 1,
                                       .states = &id,
                                       .gen_before = gen};
        assert_int_equal(sched_model_insert(f->model, &s), 0);
    }
}

static struct sched_decision start(struct fixture *f, uint64_t traj, uint64_t prompt)
{
    struct sched_start ev = {
        .traj = traj, .prompt = prompt, .prompt_tokens = 300, .true_remaining_tokens = -1};
    struct sched_decision d;
    assert_int_equal(sched_router_start(f->r, &f->reg, &ev, &d), 0);
    return d;
}

static struct sched_decision tool_return(struct fixture *f, uint64_t traj,
                                         const struct sched_obs *o, int64_t generated)
{
    assert_int_equal(sched_router_turn_done(f->r, traj, generated), 0);
    struct sched_return ev = {.traj = traj,
                              .obs = o,
                              .n_obs = 1,
                              .context_tokens = 1000,
                              .true_remaining_tokens = -1,
                              .sibling_mean_tokens = NAN};
    struct sched_decision d;
    assert_int_equal(sched_router_tool_return(f->r, &f->reg, &ev, &d), 0);
    return d;
}

static void test_start_short_and_missing_node_stays(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, NULL);
    struct sched_decision d = start(&f, 1, 5);
    assert_int_equal(d.from_bucket, -1);
    assert_int_equal(d.to_bucket, 0);
    assert_int_equal(d.reason, SCHED_REASON_FIRST);
    assert_int_equal(d.place, SCHED_PLACE_BUCKET);
    assert_int_equal(d.instance_id, 0);
    struct sched_obs o = obs_of("bash", 100, SCHED_FAILURE);
    d = tool_return(&f, 1, &o, 200);
    assert_int_equal(d.reason, SCHED_REASON_NO_NODE);
    assert_int_equal(d.to_bucket, 0);
    assert_false(d.est.found);
    teardown(&f);
}

/* The rule on a node's own estimate: no shrinkage toward its depth node. */
static void no_shrink(struct sched_router_config *c)
{
    c->lookup.shrink_visits = 0;
}

static void test_agreement_promotion_and_demotion(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, no_shrink);
    struct sched_obs bad = obs_of("bash", 8000, SCHED_FAILURE);
    struct sched_obs good = obs_of("bash", 10, SCHED_SUCCESS);
    struct sched_obs mixed = obs_of("edit", 10, SCHED_SUCCESS);
    int64_t long_rem[] = {20000, 21000, 22000, 25000};     /* mean and p90 in bucket 2 */
    int64_t short_rem[] = {100, 200, 300, 400};            /* both in bucket 0 */
    int64_t split_rem[] = {1000, 1000, 1000, 1000, 50000}; /* mean 1 (10800), p90 3 */
    teach(&f, 5, &bad, long_rem, 4);
    teach(&f, 5, &good, short_rem, 4);
    teach(&f, 5, &mixed, split_rem, 5);

    start(&f, 1, 5);
    struct sched_decision d = tool_return(&f, 1, &bad, 100);
    assert_int_equal(d.reason, SCHED_REASON_PROMOTE);
    assert_int_equal(d.from_bucket, 0);
    assert_int_equal(d.to_bucket, 2);
    assert_true(d.est.exact && d.est.from_prompt);
    assert_close(d.est.mean_tokens, 22000.0, 1e-12);

    start(&f, 2, 5);
    d = tool_return(&f, 2, &mixed, 100);
    assert_int_equal(d.reason, SCHED_REASON_DISAGREE);
    assert_int_equal(d.to_bucket, 0);

    teardown(&f);

    /* Demotion: prompt 7's trajectories are long after a bad return and short after a good
     * one that follows it (20200 in all: 20100 left after the first return, 200 after the
     * second). */
    setup(&f, SCHED_CMLFQ, no_shrink);
    char k1[SCHED_STATE_KEY_MAX], k2[SCHED_STATE_KEY_MAX];
    sched_state_key(&f.obs, &bad, 1, k1, sizeof k1);
    sched_state_key(&f.obs, &good, 1, k2, sizeof k2);
    uint32_t ids[] = {sched_model_state(f.model, k1), sched_model_state(f.model, k2)};
    int64_t gen[] = {100, 20000};
    for (int i = 0; i < 3; i++) {
        struct sched_traj_summary s = {
            .prompt = 7, .total_tokens = 20200, .n = 2, .states = ids, .gen_before = gen};
        assert_int_equal(sched_model_insert(f.model, &s), 0);
    }
    start(&f, 3, 7);
    d = tool_return(&f, 3, &bad, 100);
    assert_int_equal(d.reason, SCHED_REASON_PROMOTE);
    assert_int_equal(d.to_bucket, 2);
    d = tool_return(&f, 3, &good, 19900);
    assert_int_equal(d.reason, SCHED_REASON_DEMOTE);
    assert_int_equal(d.from_bucket, 2);
    assert_int_equal(d.to_bucket, 0);
    assert_int_equal(d.place, SCHED_PLACE_BUCKET);
    teardown(&f);
}

static void min_visits_3(struct sched_router_config *c)
{
    c->lookup.min_visits = 3;
}

static void test_min_visits(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, min_visits_3);
    struct sched_obs bad = obs_of("bash", 8000, SCHED_FAILURE);
    int64_t rem[] = {20000, 20000};
    teach(&f, 5, &bad, rem, 2);
    start(&f, 1, 5);
    assert_int_equal(tool_return(&f, 1, &bad, 100).reason, SCHED_REASON_NO_NODE);
    teach(&f, 5, &bad, rem, 1);
    start(&f, 2, 5);
    assert_int_equal(tool_return(&f, 2, &bad, 100).reason, SCHED_REASON_PROMOTE);
    teardown(&f);
}

static void test_stickiness(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, NULL);
    struct sched_obs o = obs_of("bash", 100, SCHED_SUCCESS);
    struct sched_decision d = start(&f, 1, 5);
    assert_int_equal(d.instance_id, 0);
    f.inst[0].running = 2; /* instance 1 is now less loaded, but the trajectory stays */
    d = tool_return(&f, 1, &o, 10);
    assert_int_equal(d.place, SCHED_PLACE_STICKY);
    assert_int_equal(d.instance_id, 0);
    assert_int_equal(d.prev_instance_id, 0);
    f.inst[0].ready = false; /* not ready: least loaded of the bucket */
    d = tool_return(&f, 1, &o, 10);
    assert_int_equal(d.place, SCHED_PLACE_BUCKET);
    assert_int_equal(d.instance_id, 1);
    f.inst[0].ready = true;
    f.inst[1].queued = 3; /* at its cap (3): moves off it */
    d = tool_return(&f, 1, &o, 10);
    assert_int_equal(d.instance_id, 0);
    /* the registry may be reordered between calls: stickiness follows the id */
    struct sched_instance tmp = f.inst[0];
    f.inst[0] = f.inst[5];
    f.inst[5] = tmp;
    d = tool_return(&f, 1, &o, 10);
    assert_int_equal(d.place, SCHED_PLACE_STICKY);
    assert_int_equal(d.instance, 5);
    assert_int_equal(d.instance_id, 0);
    teardown(&f);
}

static void test_fallback_order_and_never_refuse(void **state)
{
    struct fixture f;
    setup(&f, SCHED_ORACLE, NULL);
    struct sched_start ev = {.traj = 1, .true_remaining_tokens = 10000}; /* bucket 1 */
    struct sched_decision d;
    for (int i = 0; i < 8; i++)
        f.inst[i].queued = f.inst[i].bucket == 1 ? 3 : 0; /* bucket 1 full */
    f.inst[4].running = 5;
    f.inst[5].running = 5;
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.to_bucket, 1);
    assert_int_equal(d.place, SCHED_PLACE_FALLBACK);
    assert_int_equal(d.placed_bucket, 2); /* larger first, however loaded */
    assert_int_equal(sched_router_finish(f.r, 1, SCHED_FINISH_COMPLETED, false), 0);

    for (int i = 4; i < 6; i++)
        f.inst[i].queued = 3; /* bucket 2 full too: then the smaller one */
    ev.traj = 2;
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.placed_bucket, 0);
    for (int i = 0; i < 2; i++)
        f.inst[i].queued = 3; /* 0, 1, 2 full: then 3, two steps outward */
    ev.traj = 3;
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.placed_bucket, 3);
    assert_int_equal(d.place, SCHED_PLACE_FALLBACK);

    for (int i = 0; i < 8; i++) /* everything full: least loaded overall, above its cap */
        f.inst[i].queued = 3 + (i != 6);
    ev.traj = 4;
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.place, SCHED_PLACE_OVERFLOW);
    assert_int_equal(d.instance, 6);
    for (int i = 0; i < 8; i++) /* nothing ready at all: still an answer */
        f.inst[i].ready = false;
    ev.traj = 5;
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.place, SCHED_PLACE_OVERFLOW);
    assert_int_equal(d.instance, 6);
    struct sched_registry empty = {f.inst, 0};
    ev.traj = 6;
    assert_int_equal(sched_router_start(f.r, &empty, &ev, &d), LIBRA_ENOENT);
    teardown(&f);
}

static double decode_s(void *ctx, int tp, int64_t context_tokens, double tokens)
{
    return tokens * 0.02 / tp; /* 20 ms per token at TP1, perfectly parallel */
}

static double move_s(void *ctx, int from_tp, int to_tp, int64_t context_tokens)
{
    return *(double *)ctx;
}

static double move_cost = 1e6;

static void cache_aware(struct sched_router_config *c)
{
    c->costs = (struct sched_costs){.decode_s = decode_s, .move_s = move_s, .ctx = &move_cost};
}

static void test_cache_aware_moves(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, cache_aware);
    struct sched_obs bad = obs_of("bash", 8000, SCHED_FAILURE);
    int64_t rem[] = {20000, 20000};
    teach(&f, 5, &bad, rem, 2);
    start(&f, 1, 5);
    struct sched_decision d = tool_return(&f, 1, &bad, 100);
    assert_int_equal(d.reason, SCHED_REASON_COST_VETO); /* 1e6 s to move: never pays */
    assert_int_equal(d.to_bucket, 0);
    assert_int_equal(d.place, SCHED_PLACE_STICKY);
    move_cost = 10; /* 20000 tokens: 400 s at TP1, 100 s at TP4; 300 s saved > 10 s */
    start(&f, 2, 5);
    d = tool_return(&f, 2, &bad, 100);
    assert_int_equal(d.reason, SCHED_REASON_PROMOTE);
    teardown(&f);
}

static void quantum_1000(struct sched_router_config *c)
{
    c->quantum_tokens = 1000;
}

static void test_token_quantum(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, quantum_1000);
    start(&f, 1, 5);
    struct sched_decision d;
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 999, &d), 0);
    assert_int_equal(d.to_bucket, 0);
    assert_int_equal(d.place, SCHED_PLACE_STICKY);
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 1000, &d), 0);
    assert_int_equal(d.reason, SCHED_REASON_QUANTUM);
    assert_int_equal(d.to_bucket, 1);
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 1999, &d), 0);
    assert_int_equal(d.to_bucket, 1); /* the quantum counts from the last promotion */
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 2000, &d), 0);
    assert_int_equal(d.to_bucket, 2);
    teardown(&f);

    setup(&f, SCHED_CMLFQ, NULL); /* off by default */
    start(&f, 1, 5);
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 100000, &d), 0);
    assert_int_equal(d.to_bucket, 0);
    teardown(&f);
}

static void test_baselines(void **state)
{
    struct fixture f;
    struct sched_decision d;
    struct sched_obs o = obs_of("bash", 10, SCHED_SUCCESS);

    setup(&f, SCHED_LOAD_BALANCE, NULL);
    f.inst[0].running = 1;
    d = start(&f, 1, 5);
    assert_int_equal(d.to_bucket, -1);
    assert_int_equal(d.instance, 1); /* least connections over all buckets */
    f.inst[1].running = 9;
    d = tool_return(&f, 1, &o, 10);
    assert_int_equal(d.place, SCHED_PLACE_STICKY);
    assert_true(sched_policy_bucketless(SCHED_LOAD_BALANCE));
    teardown(&f);

    setup(&f, SCHED_LENGTH_AWARE, NULL);
    struct sched_start ev = {.traj = 1, .prompt_tokens = 12000, .true_remaining_tokens = -1};
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.to_bucket, 2); /* > 10000: long */
    struct sched_return rv = {.traj = 1,
                              .obs = &o,
                              .n_obs = 1,
                              .context_tokens = 20000,
                              .true_remaining_tokens = -1,
                              .sibling_mean_tokens = NAN};
    assert_int_equal(sched_router_tool_return(f.r, &f.reg, &rv, &d), 0);
    assert_int_equal(d.to_bucket, 3);
    assert_int_equal(d.reason, SCHED_REASON_PROMOTE);
    teardown(&f);

    setup(&f, SCHED_LA_MLFQ, NULL);
    d = start(&f, 1, 5);
    assert_int_equal(d.to_bucket, 0);
    assert_int_equal(tool_return(&f, 1, &o, 2999).to_bucket, 0);
    assert_int_equal(tool_return(&f, 1, &o, 1).to_bucket, 1); /* 3000 generated */
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 3000, &d), 0);
    assert_int_equal(d.to_bucket, 2); /* mid-turn, 6000 */
    assert_int_equal(sched_router_finish(f.r, 1, SCHED_FINISH_COMPLETED, true), 0);
    struct sched_start sib = {.traj = 2, .prompt = 5, .epoch = 5, .true_remaining_tokens = -1};
    assert_int_equal(sched_router_start(f.r, &f.reg, &sib, &d), 0);
    assert_int_equal(d.to_bucket, 2); /* follows the prompt's last trajectory (TTL 5) */
    sib = (struct sched_start){.traj = 3, .prompt = 5, .epoch = 6, .true_remaining_tokens = -1};
    assert_int_equal(sched_router_start(f.r, &f.reg, &sib, &d), 0);
    assert_int_equal(d.to_bucket, 0); /* expired */
    teardown(&f);

    setup(&f, SCHED_PLAS, NULL);
    start(&f, 1, 5);
    assert_int_equal(tool_return(&f, 1, &o, 4000).to_bucket, 0);
    assert_int_equal(tool_return(&f, 1, &o, 1).to_bucket, 1); /* attained 4001 > 4000 */
    assert_int_equal(tool_return(&f, 1, &o, 30000).to_bucket, 3);
    teardown(&f);

    setup(&f, SCHED_ORACLE, NULL);
    ev = (struct sched_start){.traj = 1, .true_remaining_tokens = 4001};
    assert_int_equal(sched_router_start(f.r, &f.reg, &ev, &d), 0);
    assert_int_equal(d.to_bucket, 1);
    assert_int_equal(d.reason, SCHED_REASON_FIRST);
    rv.true_remaining_tokens = 10;
    assert_int_equal(sched_router_tool_return(f.r, &f.reg, &rv, &d), 0);
    assert_int_equal(d.reason, SCHED_REASON_DEMOTE);
    assert_int_equal(d.to_bucket, 0);
    teardown(&f);
}

/* Each policy's model learns what the policy reads: nothing for the load-only ones, the trees
 * without the regression for cmlfq, the regression for predictor. */
static void test_policy_models(void **state)
{
    (void)state;
    for (int p = 0; p < SCHED_POLICY_COUNT; p++) {
        struct sched_model *m = sched_policy_model_new((enum sched_policy)p);
        if (p != SCHED_CMLFQ && p != SCHED_PREDICTOR && p != SCHED_CMLFQ_H) {
            assert_null(m);
            continue;
        }
        uint32_t id = sched_model_state(m, "bash:small:success");
        int64_t gen[] = {100};
        for (uint64_t k = 0; k < 50; k++) {
            struct sched_traj_summary s = {.prompt = k % 5,
                                           .start = (double)k,
                                           .total_tokens = 300 + 10 * (int64_t)k,
                                           .n = 1,
                                           .states = &id,
                                           .gen_before = gen};
            assert_int_equal(sched_model_insert(m, &s), 0);
        }
        struct sched_estimate tree, reg;
        sched_model_lookup(m, 0, &id, 1, &tree);
        struct sched_pred_features f = {&id, 1, 100, NAN};
        sched_model_predict(m, &f, &reg);
        assert_true(tree.found);
        assert_int_equal(reg.found, p == SCHED_PREDICTOR);
        struct sched_dist served; /* the service history: cmlfq_h's alone */
        sched_service_population(sched_model_service(m), 0, &served);
        assert_int_equal(served.n > 0, p == SCHED_CMLFQ_H);
        sched_model_free(m);
    }
}

static void test_predictor_learns_the_same_signal(void **state)
{
    struct fixture f;
    setup(&f, SCHED_PREDICTOR, NULL);
    struct sched_obs bad = obs_of("bash", 8000, SCHED_FAILURE);
    struct sched_obs good = obs_of("bash", 10, SCHED_SUCCESS);
    int64_t long_rem[] = {20000, 20500, 21000, 21500, 22000, 22500};
    int64_t short_rem[] = {100, 120, 140, 160, 180, 200};
    for (uint64_t p = 0; p < 20; p++) {
        teach(&f, p, &bad, long_rem, 6);
        teach(&f, p, &good, short_rem, 6);
    }
    start(&f, 1, 99);
    struct sched_decision d = tool_return(&f, 1, &bad, 100);
    assert_true(d.est.found);
    assert_int_equal(d.to_bucket, 2);
    start(&f, 2, 99);
    d = tool_return(&f, 2, &good, 100);
    assert_int_equal(d.to_bucket, 0);
    teardown(&f);
}

static void max_live_2(struct sched_router_config *c)
{
    c->max_live = 2;
}

static void test_live_states_and_learning(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, max_live_2);
    struct sched_obs o = obs_of("bash", 10, SCHED_SUCCESS);
    start(&f, 1, 5);
    start(&f, 2, 5);
    struct sched_start dup = {.traj = 2};
    struct sched_decision d;
    assert_int_equal(sched_router_start(f.r, &f.reg, &dup, &d), LIBRA_EINVAL);
    tool_return(&f, 1, &o, 10); /* 1 is now the most recently active */
    start(&f, 3, 5);            /* evicts 2 */
    assert_int_equal(sched_router_live(f.r), 2);
    assert_int_equal(sched_router_turn_done(f.r, 2, 1), LIBRA_ENOENT);
    assert_int_equal(sched_router_finish(f.r, 2, SCHED_FINISH_COMPLETED, true), LIBRA_ENOENT);
    assert_int_equal(sched_router_turn_done(f.r, 1, 500), 0);
    assert_int_equal(sched_router_finish(f.r, 1, SCHED_FINISH_TRUNCATED, true), 0);
    struct sched_estimate e;
    sched_model_lookup(f.model, 5, NULL, 0, &e);
    assert_int_equal(e.visits, 1);
    assert_close(e.mean_tokens, 510.0, 0); /* censored, nothing above it: the bound itself */
    assert_int_equal(sched_router_live(f.r), 1);
    assert_true(sched_router_bytes(f.r) > 0);
    teardown(&f);
}

static void test_config_errors_and_names(void **state)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, "tp1:100", "t", NULL), 0);
    struct sched_router_config c;
    struct sched_router *r;
    struct libra_error err;
    sched_router_config_default(&c, SCHED_CMLFQ, &l);
    assert_int_equal(sched_router_new(&r, &c, NULL, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "needs a model"));
    sched_router_config_default(&c, SCHED_PLAS, &l);
    c.layout.n = 0;
    assert_int_equal(sched_router_new(&r, &c, NULL, &err), LIBRA_EINVAL);
    sched_router_config_default(&c, SCHED_PLAS, &l);
    c.length_thresholds_tokens[1] = 1;
    assert_int_equal(sched_router_new(&r, &c, NULL, &err), LIBRA_EINVAL);
    for (int p = 0; p < SCHED_POLICY_COUNT; p++) {
        enum sched_policy back;
        assert_int_equal(sched_policy_parse(sched_policy_name((enum sched_policy)p), &back), 0);
        assert_int_equal(back, p);
    }
    enum sched_policy back;
    assert_int_equal(sched_policy_parse("random", &back), LIBRA_ENOENT);
    assert_string_equal(sched_reason_name(SCHED_REASON_COST_VETO), "cost_veto");
    assert_string_equal(sched_place_name(SCHED_PLACE_OVERFLOW), "overflow");
    /* The router's default shrinkage is sched.shrink_visits' default (a copy across layers). */
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    sched_router_config_default(&c, SCHED_CMLFQ, &l);
    assert_int_equal(c.lookup.shrink_visits, cfg.sched.shrink_visits);
    assert_int_equal(c.lookup.min_visits, 1);
}

/* The entry point the commands use: a model owned by the router for the policies that learn,
 * none for the others; errors leave no router. */
static void test_router_from_config(void **state)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, "tp1:4000,tp2:12000,tp4:30000", "t", NULL), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    struct sched_router *r;
    for (int p = 0; p < SCHED_POLICY_COUNT; p++) {
        struct spec_sched_config sc = cfg.sched;
        sc.policy = (enum sched_policy)p;
        assert_int_equal(sched_router_from_config(&r, &sc, &l, &toy_costs, NULL), 0);
        bool learns = p == SCHED_CMLFQ || p == SCHED_PREDICTOR || p == SCHED_CMLFQ_H;
        assert_int_equal(sched_policy_learns(sc.policy), learns);
        assert_int_equal(sched_router_model(r) != NULL, learns);
        sched_router_tick(r);
        sched_router_free(r); /* and the model it owns: ASan finds a leak or a double free */
    }
    assert_false(sched_policy_learns((enum sched_policy)SCHED_POLICY_COUNT));
    struct spec_sched_config h = cfg.sched; /* cmlfq_h decides by cost: no costs, no router */
    h.policy = SCHED_CMLFQ_H;
    struct libra_error herr = {0};
    assert_int_equal(sched_router_from_config(&r, &h, &l, NULL, &herr), LIBRA_EINVAL);
    assert_non_null(strstr(herr.msg, "cmlfq_h"));
    struct spec_bucket_layout none = l;
    none.n = 0;
    struct libra_error err = {0};
    assert_int_equal(sched_router_from_config(&r, &cfg.sched, &none, NULL, &err), LIBRA_EINVAL);
    assert_null(r);
    assert_true(err.msg[0] != '\0');
}

/* sched.rebuild_interval = 3: the third and sixth ticks rebuild the model from its history.
 * Trees merged in from another model are not in the history, so a rebuild drops them. */
static void test_tick_rebuilds_every_interval(void **state)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, "tp1:4000,tp2:12000", "t", NULL), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    cfg.sched.rebuild_interval = 3;
    struct sched_router *r;
    assert_int_equal(sched_router_from_config(&r, &cfg.sched, &l, NULL, NULL), 0);
    struct sched_model *m = sched_router_model(r);
    struct sched_model *other = sched_model_new(NULL);
    uint32_t id = sched_model_state(other, "bash:small:success");
    int64_t gen[] = {100};
    struct sched_traj_summary s = {
        .prompt = 9, .total_tokens = 500, .n = 1, .states = &id, .gen_before = gen};
    assert_int_equal(sched_model_insert(other, &s), 0);
    struct sched_model_stats empty, st;
    sched_model_stats(m, &empty);
    for (int tick = 1; tick <= 7; tick++) {
        sched_model_merge(m, other);
        sched_router_tick(r);
        sched_model_stats(m, &st);
        assert_int_equal(st.nodes == empty.nodes, tick % 3 == 0);
    }
    sched_model_free(other);
    sched_router_free(r);
}

/* The options route eval's arms take: min_visits, and depth-only states ("*"). */
static void test_router_options(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, NULL);
    sched_router_free(f.r);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    struct sched_router_options opt = {.min_visits = 3};
    assert_int_equal(sched_router_from_config_opts(&f.r, &cfg.sched, &f.layout, NULL, &opt, NULL),
                     0);
    sched_model_free(f.model);
    f.model = sched_router_model(f.r); /* owned by the router now */
    struct sched_obs bad = obs_of("bash", 8000, SCHED_FAILURE);
    int64_t rem[] = {20000, 20000};
    teach(&f, 5, &bad, rem, 2);
    start(&f, 1, 5);
    assert_int_equal(tool_return(&f, 1, &bad, 100).reason, SCHED_REASON_NO_NODE);
    sched_router_free(f.r);

    opt = (struct sched_router_options){.depth_only = true};
    assert_int_equal(sched_router_from_config_opts(&f.r, &cfg.sched, &f.layout, NULL, &opt, NULL),
                     0);
    f.model = sched_router_model(f.r);
    start(&f, 1, 5);
    tool_return(&f, 1, &bad, 100);
    struct sched_model_stats st;
    sched_model_stats(f.model, &st);
    assert_int_equal(st.states, 1);
    assert_string_equal(sched_model_state_key(f.model, 0), SCHED_DEPTH_KEY);
    sched_router_free(f.r);
}

/* Runs one trajectory of prompt to its end: a first turn of first tokens, a return, the rest. */
static void run_attempt(struct fixture *f, uint64_t traj, uint64_t prompt, int64_t first,
                        int64_t total)
{
    struct sched_obs o = obs_of("bash", 50, SCHED_SUCCESS);
    start(f, traj, prompt);
    tool_return(f, traj, &o, first);
    assert_int_equal(sched_router_turn_done(f->r, traj, total - first), 0);
    assert_int_equal(sched_router_finish(f->r, traj, SCHED_FINISH_COMPLETED, true), 0);
}

/* With nothing learnt, cmlfq_h starts where cmlfq does: the shortest bucket. */
static void test_cmlfq_h_knows_nothing_starts_short(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ_H, with_toy_costs);
    struct sched_decision d = start(&f, 1, 7);
    assert_int_equal(d.to_bucket, 0);
    assert_int_equal(d.reason, SCHED_REASON_FIRST);
    teardown(&f);
}

/* Earlier attempts at a task predict the next: even prompts always run 20000 tokens, odd ones
 * 300, and their first turns look alike. Once it has seen a few attempts of each, cmlfq_h starts
 * a long task's next attempt in a larger bucket (at TP1 it would be 700 s late) and a short one's
 * in the shortest (a larger TP only spends more GPU time), which no look at the first turn can
 * tell apart. The attempts are taken alone here (attempt_shrink 0): with the population beside
 * them, a 10 % chance of a 20000-token attempt makes a larger bucket the cheaper bet for the
 * short tasks too, as it should. */
static void test_cmlfq_h_follows_earlier_attempts(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ_H, with_toy_costs_attempts_alone);
    uint64_t id = 1;
    for (int round = 0; round < 300; round++) /* past the first rounds' credit */
        for (uint64_t p = 0; p < 10; p++)
            run_attempt(&f, id++, p, 100, p % 2 ? 300 : 20000);
    struct sched_decision lng = start(&f, id++, 4), shrt = start(&f, id++, 5);
    assert_true(lng.to_bucket >= 2);
    assert_int_equal(shrt.to_bucket, 0);
    assert_true(lng.est.found && lng.est.mean_tokens > 10000);
    teardown(&f);
}

/* A decision's regret is charged to every expert when the trajectory ends; a router that keeps
 * losing with one expert follows another: here every attempt is long, so the shortest bucket's
 * constant expert and everything that starts short lose, and later attempts start large. */
static void test_cmlfq_h_scores_its_experts(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ_H, with_toy_costs);
    for (uint64_t id = 1; id <= 40; id++)
        run_attempt(&f, id, 1000 + id, 100, 20000); /* new prompts: no attempts to go by */
    struct sched_decision d = start(&f, 99, 5000);
    assert_true(d.to_bucket >= 2);
    assert_true(f.r->h_score[H_FIXED + 0] > f.r->h_score[H_SERVICE]);
    teardown(&f);
}

/*
 * sched_router_set_layout keeps what is in tokens and drops what names old buckets: a live
 * trajectory keeps its instance (sticky) and its bucket becomes the new layout's bucket of its
 * old bound; the trees, untouched, route the next return by the new bounds; cmlfq_h's
 * constant-bucket experts start afresh; a bad layout changes nothing.
 */
static void test_set_layout_keeps_what_is_in_tokens(void **state)
{
    struct fixture f;
    setup(&f, SCHED_CMLFQ, no_shrink);
    struct sched_obs bad = obs_of("bash", 8000, SCHED_FAILURE);
    int64_t rem[] = {20000, 21000, 22000, 25000}; /* bucket 2 of tp1:4000,...,tp4:30000 */
    teach(&f, 5, &bad, rem, 4);
    start(&f, 1, 5);
    struct sched_decision d = tool_return(&f, 1, &bad, 100);
    assert_int_equal(d.to_bucket, 2);
    int64_t inst = d.instance_id;

    struct spec_bucket_layout bad_layout = f.layout, l;
    bad_layout.bucket[1].max_tokens = 1; /* not ascending */
    assert_int_equal(sched_router_set_layout(f.r, &bad_layout, NULL), LIBRA_EINVAL);
    /* two buckets: 30000 falls in the second (<= 40000); the trees' 22000 now in the first */
    assert_int_equal(spec_bucket_parse(&l, "tp1+tp2:25000,tp4+tp8:40000", "test", NULL), 0);
    assert_int_equal(sched_router_set_layout(f.r, &l, NULL), 0);
    for (int i = 0; i < 8; i++)
        f.inst[i].bucket = i < 4 ? 0 : 1;
    assert_int_equal(sched_router_turn_done(f.r, 1, 100), 0);
    struct sched_decision again;
    assert_int_equal(sched_router_progress(f.r, &f.reg, 1, 0, &again), 0);
    assert_int_equal(again.from_bucket, 1);    /* its old bucket 2 (<= 30000) is now bucket 1 */
    assert_int_equal(again.instance_id, inst); /* sticky */
    start(&f, 2, 5);
    d = tool_return(&f, 2, &bad, 100);
    assert_int_equal(d.to_bucket, 0); /* the same estimate, the new bounds */
    assert_int_equal(d.placed_bucket, 0);
    teardown(&f);

    setup(&f, SCHED_CMLFQ_H, with_toy_costs);
    for (uint64_t id = 1; id <= 40; id++)
        run_attempt(&f, id, 1000 + id, 100, 20000);
    double service = f.r->h_score[H_SERVICE];
    assert_true(f.r->h_score[H_FIXED + 0] > 0);
    assert_int_equal(sched_router_set_layout(f.r, &l, NULL), 0);
    assert_true(f.r->h_score[H_FIXED + 0] == 0 && f.r->h_score[H_FIXED + 1] == 0);
    assert_true(f.r->h_score[H_SERVICE] == service);
    teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_short_and_missing_node_stays),
        cmocka_unit_test(test_agreement_promotion_and_demotion),
        cmocka_unit_test(test_min_visits),
        cmocka_unit_test(test_stickiness),
        cmocka_unit_test(test_fallback_order_and_never_refuse),
        cmocka_unit_test(test_cache_aware_moves),
        cmocka_unit_test(test_token_quantum),
        cmocka_unit_test(test_baselines),
        cmocka_unit_test(test_policy_models),
        cmocka_unit_test(test_predictor_learns_the_same_signal),
        cmocka_unit_test(test_live_states_and_learning),
        cmocka_unit_test(test_config_errors_and_names),
        cmocka_unit_test(test_router_from_config),
        cmocka_unit_test(test_tick_rebuilds_every_interval),
        cmocka_unit_test(test_router_options),
        cmocka_unit_test(test_cmlfq_h_knows_nothing_starts_short),
        cmocka_unit_test(test_cmlfq_h_follows_earlier_attempts),
        cmocka_unit_test(test_cmlfq_h_scores_its_experts),
        cmocka_unit_test(test_set_layout_keeps_what_is_in_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
