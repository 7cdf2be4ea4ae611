/*
 * ehp/pool: each transition of the join state machine, the step's frozen membership, the
 * batch shares, the signal's rule and its time-to-live; then properties over random event
 * sequences (fixed seeds, util's keyed rng) checked after every call — no GPU in two roles, a
 * replica wholly in or out, the core's membership never changing, cancelled and failed joins
 * leaving no trace, signals expiring, a step's membership frozen until it ends, deadlines
 * enforced, refused calls changing nothing — and two differential checks: the pool against a
 * naive model of the join machine written from the spec, and a run with a join that is
 * cancelled or fails against the same run without it.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ehp/pool.h"
#include "util/rng.h"

/* 32 GPUs in 4 nodes of 8: the core is 2 replicas of 4 (node 0), 4 hybrid replicas (nodes 1
 * and 2), core rollout on node 3. */
enum { GPUS = 32, R = 4, CORE = 2, HYB = 4, BATCH = 32 };
static const int core_gpu[CORE * R] = {0, 1, 2, 3, 4, 5, 6, 7};
static const int hybrid_gpu[HYB * R] = {8,  9,  10, 11, 12, 13, 14, 15,
                                        16, 17, 18, 19, 20, 21, 22, 23};

static struct ehp_pool_config config(void)
{
    struct ehp_pool_config c = {
        .gpus = GPUS,
        .gpus_per_node = 8,
        .replica_gpus = R,
        .core_replicas = CORE,
        .core_gpu = core_gpu,
        .hybrid_replicas = HYB,
        .hybrid_gpu = hybrid_gpu,
        .batch_trajectories = BATCH,
        .min_rollout_gpus = 8,
        .times = {.start_s = 10.0, .fetch_s = 20.0, .zero_sync_s = 5.0, .return_s = 40.0},
    };
    ehp_params_default(&c.params);
    cost_lifecycle_params_default(&c.lifecycle);
    return c;
}

static struct ehp_pool *pool_of(const struct ehp_pool_config *c)
{
    struct ehp_pool *p;
    struct libra_error err = {0};
    assert_int_equal(ehp_pool_new(c, &p, &err), 0);
    return p;
}

static struct ehp_pool *new_pool(void)
{
    struct ehp_pool_config c = config();
    return pool_of(&c);
}

static int ev(struct ehp_pool *p, enum ehp_event_kind kind, double now_s, int replica, int member,
              uint64_t generation, int64_t step, int64_t version, ehp_decision_vec *out)
{
    struct ehp_event e = {kind, now_s, replica, member, generation, step, version};
    return ehp_pool_event(p, &e, out);
}

static const struct ehp_decision *last(const ehp_decision_vec *d)
{
    assert_true(d->n > 0);
    return &d->v[d->n - 1];
}

static void assert_roles(const struct ehp_pool *p, int h, enum ehp_role r)
{
    for (int m = 0; m < R; m++)
        assert_int_equal(ehp_pool_role(p, hybrid_gpu[h * R + m]), r);
}

/* Brings replica h from rollout to ACTIVATING at now_s (the pool's version). */
static struct ehp_handle to_activating(struct ehp_pool *p, int h, double now_s, ehp_decision_vec *d)
{
    struct ehp_handle hd;
    assert_int_equal(ehp_pool_join(p, now_s, h, &hd, d), 0);
    int64_t v = ehp_pool_version(p);
    assert_int_equal(ev(p, EHP_EV_STARTED, now_s, h, 0, hd.generation, 0, 0, d), 0);
    for (int m = 0; m < R; m++)
        assert_int_equal(ev(p, EHP_EV_FETCHED, now_s, h, m, hd.generation, 0, v, d), 0);
    assert_int_equal(ev(p, EHP_EV_SYNCED, now_s, h, 0, hd.generation, 0, v, d), 0);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_ACTIVATING);
    return hd;
}

/* ---- unit tests ----------------------------------------------------------------------------- */

static void test_config_is_checked(void **state)
{
    struct ehp_pool *p;
    struct libra_error err = {0};
    int dup[HYB * R];
    memcpy(dup, hybrid_gpu, sizeof dup);
    struct ehp_pool_config c = config();
    c.hybrid_gpu = dup;
    dup[5] = 3; /* a core GPU */
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "listed twice"));
    dup[5] = 40;
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "out of range"));
    dup[5] = 24; /* replica 1 would span nodes 1 and 3 */
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "spans nodes"));
    c = config();
    c.params.release_ratio = 1.2; /* above borrow_ratio: no hysteresis band */
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    c = config();
    c.batch_trajectories = 1;
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    c = config();
    c.hybrid_replicas = 7; /* 9 replicas of 4 on 32 GPUs */
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    c = config();
    c.times.fetch_s = -1.0;
    assert_int_equal(ehp_pool_new(&c, &p, &err), LIBRA_EINVAL);
    ehp_pool_free(NULL);
}

static void test_defaults_are_the_references(void **state)
{
    struct ehp_params p;
    ehp_params_default(&p);
    assert_true(p.pressure_guard == 0.80 && p.borrow_ratio == 1.15 && p.release_ratio == 0.90);
    assert_int_equal(p.signal_ttl_steps, 20);
    assert_true(p.join_timeout_s == 180.0);
    assert_int_equal(p.batch, EHP_BATCH_FIXED);
}

static void test_initial_roles(void **state)
{
    struct ehp_pool *p = new_pool();
    assert_int_equal(ehp_pool_role_gpus(p, EHP_ROLE_CORE_TRAINING), 8);
    assert_int_equal(ehp_pool_role_gpus(p, EHP_ROLE_HYBRID_ROLLOUT), 16);
    assert_int_equal(ehp_pool_role_gpus(p, EHP_ROLE_CORE_ROLLOUT), 8);
    assert_int_equal(ehp_pool_role(p, 0), EHP_ROLE_CORE_TRAINING);
    assert_int_equal(ehp_pool_role(p, 31), EHP_ROLE_CORE_ROLLOUT);
    assert_false(ehp_pool_step(p)->open);
    assert_false(ehp_pool_signal_now(p)->live);
    ehp_pool_free(p);
}

/* requested → fetching state → zero sync → activating → active, each with its record. */
static void test_join_phases(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle hd;
    assert_int_equal(ehp_pool_join(p, 5.0, 1, &hd, &d), 0);
    assert_int_equal(hd.replica, 1);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_REQUESTED);
    const struct ehp_decision *j = last(&d);
    assert_int_equal(j->kind, EHP_DEC_JOIN);
    assert_true(j->expect_s == 10.0 && j->deadline_s == 185.0);
    assert_int_equal(j->rollout_gpus, 8 + 12); /* the replica left the fleet */
    struct cost_lifecycle_params lp;
    cost_lifecycle_params_default(&lp);
    assert_close(j->group_rebuild_s, cost_group_rebuild_s(&lp, 21), 1e-12);
    assert_roles(p, 1, EHP_ROLE_HYBRID_JOINING);
    assert_int_equal(ehp_pool_join(p, 5.0, 1, NULL, &d), LIBRA_EINVAL); /* already joining */

    assert_int_equal(ev(p, EHP_EV_STARTED, 15.0, 1, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_FETCH);
    assert_true(last(&d)->expect_s == 20.0);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_FETCHING_STATE);
    for (int m = 0; m < R; m++) {
        assert_int_equal(ehp_pool_hybrid(p, 1)->fetched, m);
        assert_int_equal(ev(p, EHP_EV_FETCHED, 30.0, 1, m, hd.generation, 0, 0, &d), 0);
    }
    assert_int_equal(last(&d)->kind, EHP_DEC_ZERO_SYNC);
    assert_true(last(&d)->expect_s == 5.0);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_ZERO_SYNC);
    assert_int_equal(ev(p, EHP_EV_SYNCED, 36.0, 1, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_ACTIVATING);
    assert_true(isinf(ehp_pool_hybrid(p, 1)->deadline_s));
    assert_roles(p, 1, EHP_ROLE_HYBRID_JOINING);

    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 40.0, 0, 0, 0, 0, 0, &d), 0);
    assert_int_equal(d.v[d.n - 2].kind, EHP_DEC_ACTIVE);
    assert_int_equal(last(&d)->kind, EHP_DEC_STEP);
    assert_int_equal(last(&d)->active, 1);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_ACTIVE);
    assert_roles(p, 1, EHP_ROLE_HYBRID_TRAINING);
    assert_int_equal(ehp_pool_role_gpus(p, EHP_ROLE_HYBRID_TRAINING), R);
    const struct ehp_step *s = ehp_pool_step(p);
    assert_int_equal(s->member[1], EHP_MEMBER_ACTIVE);
    assert_int_equal(s->epoch, 1);
    /* a fixed batch of 32 over three replicas */
    assert_int_equal(s->share[0], 11);
    assert_int_equal(s->share[1], 11);
    assert_int_equal(s->share[CORE + 1], 10);
    assert_int_equal(s->batch_trajectories, BATCH);
    vec_free(&d);
    ehp_pool_free(p);
}

/* A join in progress at a step start is a zero-gradient placeholder: in the domain, no share;
 * one that is synced mid-step waits for the next start. */
static void test_placeholders_and_frozen_steps(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle a, b;
    assert_int_equal(ehp_pool_join(p, 0.0, 0, &a, &d), 0);
    assert_int_equal(ehp_pool_join(p, 0.0, 2, &b, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STARTED, 10.0, 0, 0, a.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 11.0, 0, 0, 0, 7, 3, &d), 0);
    const struct ehp_step *s = ehp_pool_step(p);
    assert_int_equal(s->member[0], EHP_MEMBER_PLACEHOLDER); /* trainers up */
    assert_int_equal(s->member[2], EHP_MEMBER_OUT);         /* still stopping its engine */
    assert_int_equal(s->placeholders, 1);
    assert_int_equal(s->active, 0);
    assert_int_equal(s->share[CORE + 0], 0);
    assert_int_equal(s->share[0] + s->share[1], BATCH);
    assert_int_equal(s->version, 3);

    for (int m = 0; m < R; m++)
        assert_int_equal(ev(p, EHP_EV_FETCHED, 20.0, 0, m, a.generation, 0, 3, &d), 0);
    assert_int_equal(ev(p, EHP_EV_SYNCED, 25.0, 0, 0, a.generation, 0, 3, &d), 0);
    assert_int_equal(ehp_pool_join_state(p, a), EHP_JOIN_ACTIVATING);
    assert_int_equal(s->member[0], EHP_MEMBER_PLACEHOLDER); /* frozen */
    assert_int_equal(s->active, 0);
    assert_int_equal(ev(p, EHP_EV_STEP_END, 30.0, 0, 0, 0, 7, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_STEP_END);
    assert_int_equal(last(&d)->trajectories, BATCH);
    assert_int_equal(ehp_pool_version(p), 4);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 31.0, 0, 0, 0, 8, 4, &d), 0);
    assert_int_equal(s->member[0], EHP_MEMBER_ACTIVE);
    assert_int_equal(s->active, 1);
    vec_free(&d);
    ehp_pool_free(p);
}

/* Any member's failure rolls every member back; the old generation's events are dropped. */
static void test_member_failure_rolls_back(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle hd;
    assert_int_equal(ehp_pool_join(p, 0.0, 3, &hd, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STARTED, 10.0, 3, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_FETCHED, 12.0, 3, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_FETCHED, 12.0, 3, 2, hd.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_MEMBER_FAILED, 14.0, 3, 1, hd.generation, 0, 0, &d), 0);
    const struct ehp_decision *f = &d.v[d.n - 2]; /* then EHP_DEC_LOST */
    assert_int_equal(f->kind, EHP_DEC_FAILED);
    assert_int_equal(f->why, EHP_WHY_MEMBER_FAILED);
    assert_int_equal(f->member, 1);
    assert_true(f->expect_s == 40.0);
    assert_int_equal(f->rollout_gpus, 8 + 16);
    assert_roles(p, 3, EHP_ROLE_HYBRID_ROLLOUT);
    const struct ehp_hybrid *hy = ehp_pool_hybrid(p, 3);
    assert_int_equal(hy->join, EHP_JOIN_NONE);
    assert_int_equal(hy->fetched, 0);
    for (int m = 0; m < R; m++)
        assert_false(hy->member_fetched[m]);
    assert_true(hy->rollout_ready_s == 54.0);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_FAILED);

    /* a late shard of the failed join is dropped; the replica is lost (below) */
    assert_int_equal(ev(p, EHP_EV_FETCHED, 15.0, 3, 3, hd.generation, 0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_DROPPED);
    assert_int_equal(last(&d)->why, EHP_WHY_STALE);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_FAILED);
    vec_free(&d);
    ehp_pool_free(p);
}

/* A replica with a failed member leaves the pool for good, whether it was joining, training or
 * serving rollout: it is never joined again, steering and capacity pass it by, and its events
 * are dropped. */
static void test_failed_member_loses_its_replica(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle hd = to_activating(p, 3, 0.0, &d);
    assert_int_equal(ev(p, EHP_EV_MEMBER_FAILED, 1.0, 3, 2, hd.generation, 0, 0, &d), 0);
    assert_int_equal(d.v[d.n - 2].kind, EHP_DEC_FAILED);
    assert_int_equal(last(&d)->kind, EHP_DEC_LOST);
    assert_int_equal(last(&d)->replica, 3);
    assert_int_equal(last(&d)->member, 2);
    assert_true(ehp_pool_hybrid(p, 3)->lost);
    assert_roles(p, 3, EHP_ROLE_HYBRID_ROLLOUT);
    assert_int_equal(ehp_pool_join(p, 2.0, 3, NULL, &d), LIBRA_EINVAL);

    /* a member of a replica serving rollout: lost at once, nothing to roll back */
    uint64_t gen = ehp_pool_hybrid(p, 1)->generation;
    size_t n = d.n;
    assert_int_equal(ev(p, EHP_EV_MEMBER_FAILED, 3.0, 1, 0, gen, 0, 0, &d), 0);
    assert_int_equal(d.n, n + 1);
    assert_int_equal(last(&d)->kind, EHP_DEC_LOST);
    assert_true(ehp_pool_hybrid(p, 1)->lost);
    assert_int_equal(ehp_pool_hybrid(p, 1)->generation, gen);
    assert_int_equal(ev(p, EHP_EV_MEMBER_FAILED, 3.0, 1, 1, gen, 0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_DROPPED);
    assert_int_equal(last(&d)->why, EHP_WHY_STALE);
    assert_int_equal(ehp_pool_join(p, 3.0, 1, NULL, &d), LIBRA_EINVAL);

    /* every replica wanted: only the two left can train */
    struct ehp_signal_input in = {.train_s = 1.0, .rollout_s = 1.0, .want_train_gpus = 16};
    assert_int_equal(ehp_pool_signal(p, 4.0, &in, &d), 0);
    assert_int_equal(ehp_pool_signal_now(p)->capacity, 2);
    assert_int_equal(ehp_pool_steer(p, 4.0, &d), 0);
    for (int h = 0; h < HYB; h++)
        assert_int_equal(ehp_pool_hybrid(p, h)->join,
                         h == 0 || h == 2 ? EHP_JOIN_REQUESTED : EHP_JOIN_NONE);
    vec_free(&d);
    ehp_pool_free(p);
}

/* Not ACTIVATING by the deadline: failed at the deadline, whatever the time of the call that
 * notices. */
static void test_timeout(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle hd;
    assert_int_equal(ehp_pool_join(p, 20.0, 0, &hd, &d), 0);
    assert_int_equal(ev(p, EHP_EV_TICK, 199.0, 0, 0, 0, 0, 0, &d), 0);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_REQUESTED);
    assert_int_equal(ev(p, EHP_EV_TICK, 500.0, 0, 0, 0, 0, 0, &d), 0);
    const struct ehp_decision *f = last(&d);
    assert_int_equal(f->kind, EHP_DEC_FAILED);
    assert_int_equal(f->why, EHP_WHY_TIMEOUT);
    assert_true(f->at_s == 200.0);
    assert_true(ehp_pool_hybrid(p, 0)->rollout_ready_s == 240.0);
    assert_int_equal(ehp_pool_join_state(p, hd), EHP_JOIN_FAILED);
    vec_free(&d);
    ehp_pool_free(p);
}

/* Members must agree on the version they fetched, and the replica must sync to the core's. */
static void test_versions(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle hd;
    assert_int_equal(ehp_pool_join(p, 0.0, 0, &hd, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STARTED, 1.0, 0, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_FETCHED, 2.0, 0, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_FETCHED, 2.0, 0, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_DROPPED); /* a repeat */
    assert_int_equal(last(&d)->why, EHP_WHY_PHASE);
    assert_int_equal(ev(p, EHP_EV_FETCHED, 2.0, 0, 1, hd.generation, 0, 1, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_FAILED);
    assert_int_equal(last(&d)->why, EHP_WHY_VERSION);

    struct ehp_handle old = hd; /* its late events must not move the new join */
    assert_int_equal(ehp_pool_join(p, 3.0, 0, &hd, &d), 0);
    assert_true(hd.generation > old.generation);
    assert_int_equal(ev(p, EHP_EV_STARTED, 3.0, 0, 0, old.generation, 0, 0, &d), 0);
    assert_int_equal(last(&d)->why, EHP_WHY_STALE);
    assert_int_equal(ehp_pool_join_state(p, old), EHP_JOIN_FAILED);
    assert_int_equal(ev(p, EHP_EV_SYNCED, 3.0, 0, 0, hd.generation, 0, 0, &d), 0);
    assert_int_equal(last(&d)->why, EHP_WHY_PHASE); /* not zero-syncing yet */
    assert_int_equal(ev(p, EHP_EV_STARTED, 4.0, 0, 0, hd.generation, 0, 0, &d), 0);
    for (int m = 0; m < R; m++)
        assert_int_equal(ev(p, EHP_EV_FETCHED, 5.0, 0, m, hd.generation, 0, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_SYNCED, 6.0, 0, 0, hd.generation, 0, 1, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_FAILED);
    assert_int_equal(last(&d)->why, EHP_WHY_OUT_OF_STEP);
    vec_free(&d);
    ehp_pool_free(p);
}

/* A release cancels a join before ACTIVE at once; an active replica leaves at the step end. */
static void test_release(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle a;
    assert_int_equal(ehp_pool_release(p, 0.0, 0, &d), LIBRA_EINVAL); /* serving rollout */
    assert_int_equal(ehp_pool_join(p, 0.0, 0, &a, &d), 0);
    assert_int_equal(ehp_pool_release(p, 1.0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_CANCELLED);
    assert_int_equal(ehp_pool_join_state(p, a), EHP_JOIN_CANCELLED);
    assert_roles(p, 0, EHP_ROLE_HYBRID_ROLLOUT);

    struct ehp_handle b = to_activating(p, 1, 2.0, &d);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 3.0, 0, 0, 0, 0, 0, &d), 0);
    assert_int_equal(ehp_pool_release(p, 4.0, 1, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_RELEASE);
    assert_true(ehp_pool_hybrid(p, 1)->leaving);
    assert_roles(p, 1, EHP_ROLE_HYBRID_TRAINING);                    /* until the step ends */
    assert_int_equal(ehp_pool_release(p, 4.0, 1, &d), LIBRA_EINVAL); /* already leaving */
    assert_int_equal(ehp_pool_join(p, 4.0, 1, NULL, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_STEP_END, 5.0, 0, 0, 0, 0, 0, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_RETURNED);
    assert_roles(p, 1, EHP_ROLE_HYBRID_ROLLOUT);
    assert_int_equal(ehp_pool_join_state(p, b), EHP_JOIN_ACTIVE); /* trained, then returned */

    /* between steps an active replica leaves at once */
    to_activating(p, 2, 6.0, &d);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 7.0, 0, 0, 0, 1, 1, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STEP_END, 8.0, 0, 0, 0, 1, 0, &d), 0);
    assert_int_equal(ehp_pool_release(p, 9.0, 2, &d), 0);
    assert_int_equal(last(&d)->kind, EHP_DEC_RETURNED);
    assert_roles(p, 2, EHP_ROLE_HYBRID_ROLLOUT);
    vec_free(&d);
    ehp_pool_free(p);
}

/* An active replica that fails mid-step: rolled back at once, its payload lost for the step,
 * the step's membership unchanged. */
static void test_active_failure_mid_step(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_handle hd = to_activating(p, 2, 0.0, &d);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 1.0, 0, 0, 0, 0, 0, &d), 0);
    const struct ehp_step *s = ehp_pool_step(p);
    int share = s->share[CORE + 2];
    assert_int_equal(share, 10);
    assert_int_equal(ev(p, EHP_EV_MEMBER_FAILED, 2.0, 2, 3, hd.generation, 0, 0, &d), 0);
    assert_int_equal(d.v[d.n - 2].kind, EHP_DEC_FAILED);
    assert_int_equal(last(&d)->kind, EHP_DEC_LOST);
    assert_roles(p, 2, EHP_ROLE_HYBRID_ROLLOUT);
    assert_int_equal(s->member[2], EHP_MEMBER_ACTIVE);
    assert_true(s->lost[2]);
    assert_int_equal(s->lost_count, 1);
    assert_int_equal(ev(p, EHP_EV_STEP_END, 3.0, 0, 0, 0, 0, 0, &d), 0);
    assert_int_equal(last(&d)->lost, 1);
    assert_int_equal(last(&d)->trajectories, BATCH - share);
    vec_free(&d);
    ehp_pool_free(p);
}

/* The labelled option: each active hybrid adds a core replica's share. */
static void test_growing_batch(void **state)
{
    struct ehp_pool_config c = config();
    c.params.batch = EHP_BATCH_GROW;
    struct ehp_pool *p = pool_of(&c);
    ehp_decision_vec d = {0};
    to_activating(p, 0, 0.0, &d);
    to_activating(p, 3, 0.0, &d);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 1.0, 0, 0, 0, 0, 0, &d), 0);
    const struct ehp_step *s = ehp_pool_step(p);
    assert_int_equal(s->batch_trajectories, BATCH + 2 * BATCH / CORE);
    assert_int_equal(s->share[0], 16);
    assert_int_equal(s->share[CORE + 0], 16);
    assert_int_equal(s->share[CORE + 1], 0);
    assert_int_equal(s->share[CORE + 3], 16);
    vec_free(&d);
    ehp_pool_free(p);
}

/* The signal's rule, in the reference's order. */
static void test_signal_rule(void **state)
{
    struct ehp_params p;
    ehp_params_default(&p);
    struct ehp_signal s;
    struct ehp_signal_input in = {.train_s = 100.0, .rollout_s = 80.0};
    /* ratio 1.25 >= 1.15: borrow everything rollout can spare */
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_BORROW);
    assert_int_equal(s.target, 3);
    assert_true(s.live && s.issued_step == 10 && s.expires_step == 30);
    /* pressure guard first, even when the plan wants GPUs */
    in.active_pressure = 0.8;
    in.want_train_gpus = 16;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_GUARD);
    assert_int_equal(s.target, 0);
    assert_true(s.pressure == 0.8);
    /* the plan's want, in whole replicas, at most the capacity */
    in.active_pressure = 0.79;
    in.want_train_gpus = 9;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_PLAN);
    assert_int_equal(s.target, 2);
    in.want_train_gpus = 64;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.target, 3);
    /* release at or below 0.90; hold in between */
    in.want_train_gpus = 0;
    in.rollout_s = 100.0 / 0.9;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 2, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_RELEASE);
    assert_int_equal(s.target, 0);
    in.rollout_s = 100.0;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 2, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_HOLD);
    assert_int_equal(s.target, 2);
    assert_int_equal(ehp_signal_decide(&p, &in, 1, 8, 2, 2, 10, &s), 0);
    assert_int_equal(s.target, 1);
    /* bad input leaves out untouched */
    struct ehp_signal before = s;
    in.rollout_s = 0.0;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 2, 10, &s), LIBRA_EINVAL);
    in.rollout_s = 1.0;
    in.queue_pressure = NAN;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 2, 10, &s), LIBRA_EINVAL);
    assert_memory_equal(&before, &s, sizeof s);
}

/*
 * The balance rule, by hand: 2 core replicas of 8 GPUs and 1 hybrid training over the step
 * observed (3 replicas), 16 GPUs in rollout now, T_train 90 s and T_rollout 60 s. Holding 1,
 * with k hybrids training T_train(k) = 90·3/(2 + k) and T_rollout(k) = 60·16/(16 − 8(k − 1)):
 * k = 0 gives max(135, 40) = 135, k = 1 gives 90, k = 2 gives max(67.5, 120) = 120, k = 3
 * leaves rollout no GPU. Holding 1 is best: hold.
 */
static void test_signal_balance_rule(void **state)
{
    struct ehp_params p;
    ehp_params_default(&p);
    assert_int_equal(p.rule, EHP_RULE_BALANCE);
    struct ehp_signal s;
    struct ehp_signal_input in = {
        .train_s = 90.0, .rollout_s = 60.0, .train_replicas = 3, .rollout_gpus = 16};
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_HOLD);
    assert_int_equal(s.target, 1);
    /* the reference's rule borrows everything at ratio 1.5 */
    struct ehp_params r = p;
    r.rule = EHP_RULE_REFERENCE;
    assert_int_equal(ehp_signal_decide(&r, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_BORROW);
    assert_int_equal(s.target, 3);
    /* holding none (a join was undone), 16 GPUs in rollout: k = 0 gives 135, k = 1 gives
     * max(90, 60·16/8) = 120, k = 2 leaves rollout nothing: borrow one */
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 0, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_BALANCE);
    assert_int_equal(s.target, 1);
    /* a gain of min_gain_frac or less does not move it: holding 1 with T_train 38 s, k = 0
     * gives max(57, 40) = 57 against max(38, 60) = 60, exactly 5 % less; at 37 s, 55.5 */
    in.train_s = 38.0;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_HOLD);
    assert_int_equal(s.target, 1);
    in.train_s = 37.0;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_BALANCE);
    assert_int_equal(s.target, 0);
    /* without the observation's sizes, the reference's rule decides */
    in.train_replicas = 0;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_RELEASE); /* 37 / 60 <= 0.90 */
    /* the guard comes first */
    in.train_replicas = 3;
    in.queue_pressure = 0.9;
    assert_int_equal(ehp_signal_decide(&p, &in, 3, 8, 2, 1, 10, &s), 0);
    assert_int_equal(s.why, EHP_SIGNAL_GUARD);
    assert_int_equal(s.target, 0);
}

/* A signal steers the pool while it lives, and the pool goes back to rollout when it
 * expires. */
static void test_signal_steers_and_expires(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_signal_input in = {.train_s = 120.0, .rollout_s = 100.0};
    assert_int_equal(ehp_pool_signal(p, 0.0, &in, &d), 0);
    const struct ehp_signal *s = ehp_pool_signal_now(p);
    /* (8 core rollout + 16 hybrid − 8 kept) / 4 */
    assert_int_equal(s->capacity, 4);
    assert_int_equal(s->target, 4);
    assert_int_equal(last(&d)->kind, EHP_DEC_SIGNAL);
    assert_int_equal(ehp_pool_steer(p, 0.0, &d), 0);
    for (int h = 0; h < HYB; h++)
        assert_int_equal(ehp_pool_hybrid(p, h)->join, EHP_JOIN_REQUESTED);
    /* no rollout work seen (T_rollout 0): no signal, the one there is stays */
    size_t records = d.n;
    struct ehp_signal_input idle = {.train_s = 1.0, .rollout_s = 0.0, .want_train_gpus = 4};
    assert_int_equal(ehp_pool_signal(p, 0.5, &idle, &d), 0);
    assert_int_equal(d.n, records);
    assert_int_equal(s->target, 4);
    /* fewer wanted: the highest-numbered joins are cancelled first */
    in.want_train_gpus = 5;
    assert_int_equal(ehp_pool_signal(p, 1.0, &in, &d), 0);
    assert_int_equal(s->target, 2);
    assert_int_equal(ehp_pool_steer(p, 1.0, &d), 0);
    assert_int_equal(ehp_pool_hybrid(p, 0)->join, EHP_JOIN_REQUESTED);
    assert_int_equal(ehp_pool_hybrid(p, 1)->join, EHP_JOIN_REQUESTED);
    assert_int_equal(ehp_pool_hybrid(p, 2)->join, EHP_JOIN_NONE);
    assert_int_equal(ehp_pool_hybrid(p, 3)->join, EHP_JOIN_NONE);
    /* issued before the first step (-1): live through step 18, expired at step 19 */
    for (int64_t k = 0; k < 19; k++) {
        assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 2.0, 0, 0, 0, k, k, &d), 0);
        assert_int_equal(ev(p, EHP_EV_STEP_END, 2.0, 0, 0, 0, k, 0, &d), 0);
        assert_true(s->live);
    }
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 2.0, 0, 0, 0, 19, 19, &d), 0);
    assert_false(s->live);
    bool expired = false;
    for (size_t i = 0; i < d.n; i++)
        expired |= d.v[i].kind == EHP_DEC_SIGNAL_EXPIRED;
    assert_true(expired);
    assert_int_equal(ehp_pool_steer(p, 2.0, &d), 0);
    for (int h = 0; h < HYB; h++)
        assert_int_equal(ehp_pool_hybrid(p, h)->join, EHP_JOIN_NONE);
    vec_free(&d);
    ehp_pool_free(p);
}

/* The moves are steer's, unmade: steering after reading them lands where they say; a replica
 * the caller already asked to leave is neither counted as held nor picked. */
static void test_moves_are_steers_and_skip_those_leaving(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    struct ehp_move m[HYB];
    struct ehp_signal_input in = {.train_s = 1.0, .rollout_s = 1.0, .want_train_gpus = 12};
    assert_int_equal(ehp_pool_signal(p, 0.0, &in, &d), 0);
    assert_int_equal(ehp_pool_moves(p, NULL, m), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(m[i].replica, i);
        assert_true(m[i].join);
    }
    bool leaving[HYB] = {[1] = true};
    assert_int_equal(ehp_pool_moves(p, leaving, m), 3); /* 1 is skipped: 0, 2, 3 */
    assert_int_equal(m[1].replica, 2);
    assert_int_equal(m[2].replica, 3);
    assert_int_equal(ehp_pool_steer(p, 0.0, &d), 0);
    for (int h = 0; h < HYB; h++)
        assert_int_equal(ehp_pool_hybrid(p, h)->join, h < 3 ? EHP_JOIN_REQUESTED : EHP_JOIN_NONE);
    assert_int_equal(ehp_pool_moves(p, NULL, m), 0);
    /* one asked to leave counts as not held: another joins in its place */
    bool going[HYB] = {[2] = true};
    assert_int_equal(ehp_pool_moves(p, going, m), 1);
    assert_int_equal(m[0].replica, 3);
    assert_true(m[0].join);
    /* fewer wanted: the highest-numbered joins go first, never one already leaving */
    in.want_train_gpus = 4;
    assert_int_equal(ehp_pool_signal(p, 1.0, &in, &d), 0);
    assert_int_equal(ehp_pool_moves(p, going, m), 1);
    assert_int_equal(m[0].replica, 1);
    assert_false(m[0].join);
    vec_free(&d);
    ehp_pool_free(p);
}

/* Malformed calls are refused without a change. */
static void test_protocol_errors(void **state)
{
    struct ehp_pool *p = new_pool();
    ehp_decision_vec d = {0};
    assert_int_equal(ev(p, EHP_EV_STEP_END, 1.0, 0, 0, 0, 0, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 1.0, 0, 0, 0, 5, 2, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 1.0, 0, 0, 0, 6, 2, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_STEP_END, 1.0, 0, 0, 0, 4, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_STEP_END, 1.0, 0, 0, 0, 5, 0, &d), 0);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 1.0, 0, 0, 0, 5, 3, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_STEP_BEGIN, 1.0, 0, 0, 0, 6, 2, &d), LIBRA_EINVAL); /* < 3 */
    assert_int_equal(ev(p, EHP_EV_TICK, 0.5, 0, 0, 0, 0, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_TICK, INFINITY, 0, 0, 0, 0, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_STARTED, 2.0, HYB, 0, 0, 0, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, EHP_EV_FETCHED, 2.0, 0, R, 0, 0, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ev(p, (enum ehp_event_kind)99, 2.0, 0, 0, 0, 0, 0, &d), LIBRA_EINVAL);
    assert_int_equal(ehp_pool_join(p, 2.0, -1, NULL, &d), LIBRA_EINVAL);
    assert_int_equal(ehp_pool_join(p, 0.0, 0, NULL, &d), LIBRA_EINVAL);
    assert_int_equal(ehp_pool_steer(p, 0.0, &d), LIBRA_EINVAL);
    struct ehp_signal_input in = {.train_s = 1.0, .rollout_s = -1.0};
    assert_int_equal(ehp_pool_signal(p, 2.0, &in, &d), LIBRA_EINVAL);
    assert_int_equal(d.n, 2); /* the one step's two records */
    /* an event for a replica with no join is dropped as stale, not refused */
    assert_int_equal(ev(p, EHP_EV_SYNCED, 2.0, 1, 0, 0, 0, 0, &d), 0);
    assert_int_equal(last(&d)->why, EHP_WHY_STALE);
    vec_free(&d);
    ehp_pool_free(p);
}

/* ---- random sequences ----------------------------------------------------------------------- */

enum act_kind { ACT_EVENT, ACT_JOIN, ACT_RELEASE, ACT_SIGNAL, ACT_STEER };

struct act {
    enum act_kind kind;
    struct ehp_event ev; /* ev.now_s and ev.replica serve every kind */
    struct ehp_signal_input in;
};

static int apply(struct ehp_pool *p, const struct act *a, ehp_decision_vec *out)
{
    switch (a->kind) {
    case ACT_EVENT:
        return ehp_pool_event(p, &a->ev, out);
    case ACT_JOIN:
        return ehp_pool_join(p, a->ev.now_s, a->ev.replica, NULL, out);
    case ACT_RELEASE:
        return ehp_pool_release(p, a->ev.now_s, a->ev.replica, out);
    case ACT_SIGNAL:
        return ehp_pool_signal(p, a->ev.now_s, &a->in, out);
    case ACT_STEER:
        return ehp_pool_steer(p, a->ev.now_s, out);
    }
    return LIBRA_EINTERNAL;
}

/*
 * Draws the next call for pool p at about *now: mostly plausible (the event that moves a join
 * on, the replica's current generation, the core's version, steps in order), sometimes stale,
 * out of phase or malformed, now and then after a long wait (deadlines). steer: whether
 * signals and steering may be drawn (the differential checks leave them out: their choices
 * depend on every replica).
 */
static struct act draw(struct rng *r, const struct ehp_pool *p, double *now, bool steer)
{
    struct act a = {0};
    if (rng_bernoulli(r, 0.3))
        *now += rng_bernoulli(r, 0.05) ? 200.0 : rng_uniform(r) * 20.0;
    a.ev.now_s = rng_bernoulli(r, 0.01) ? *now - 1.0 : *now;
    a.ev.replica = (int)rng_uniform_int(r, HYB);
    int busy[HYB], n_busy = 0; /* replicas with a join, which replica events favour */
    for (int h = 0; h < HYB; h++)
        if (ehp_pool_hybrid(p, h)->join != EHP_JOIN_NONE)
            busy[n_busy++] = h;
    if (n_busy > 0 && rng_bernoulli(r, 0.8))
        a.ev.replica = busy[rng_uniform_int(r, (uint64_t)n_busy)];
    if (rng_bernoulli(r, 0.01))
        a.ev.replica = rng_bernoulli(r, 0.5) ? -1 : HYB;
    const struct ehp_hybrid *y =
        ehp_pool_hybrid(p, a.ev.replica < 0 || a.ev.replica >= HYB ? 0 : a.ev.replica);
    double u = rng_uniform(r);
    a.ev.generation = u < 0.9 ? y->generation : u < 0.97 ? y->generation - 1 : rng_u64(r) % 8;
    a.ev.member = (int)rng_uniform_int(r, R + (rng_bernoulli(r, 0.02) ? 2 : 0));
    int64_t v = ehp_pool_version(p);
    if (y->join == EHP_JOIN_FETCHING_STATE && y->fetched > 0)
        v = y->fetch_version; /* members fetch the version the first one did */
    a.ev.version = rng_bernoulli(r, 0.97) ? v : v + (int64_t)rng_uniform_int(r, 3) - 1;
    const struct ehp_step *s = ehp_pool_step(p);

    double k = rng_uniform(r) * (steer ? 1.0 : 0.94);
    if (k < 0.06) {
        a.ev.kind = EHP_EV_TICK;
    } else if (k < 0.28) {
        a.ev.kind = s->open ^ rng_bernoulli(r, 0.03) ? EHP_EV_STEP_END : EHP_EV_STEP_BEGIN;
        a.ev.step = s->step + (rng_bernoulli(r, 0.97) ? (a.ev.kind == EHP_EV_STEP_BEGIN) : 2);
    } else if (k < 0.38) {
        a.kind = ACT_JOIN;
    } else if (k < 0.41) {
        a.kind = ACT_RELEASE;
    } else if (k < 0.937) {
        /* mostly the event the join's phase waits for, else any but a failure */
        static const enum ehp_event_kind next[] = {
            [EHP_JOIN_NONE] = EHP_EV_STARTED,           [EHP_JOIN_REQUESTED] = EHP_EV_STARTED,
            [EHP_JOIN_FETCHING_STATE] = EHP_EV_FETCHED, [EHP_JOIN_ZERO_SYNC] = EHP_EV_SYNCED,
            [EHP_JOIN_ACTIVATING] = EHP_EV_SYNCED,      [EHP_JOIN_ACTIVE] = EHP_EV_SYNCED,
        };
        static const enum ehp_event_kind any[] = {EHP_EV_STARTED, EHP_EV_FETCHED, EHP_EV_SYNCED};
        a.ev.kind = rng_bernoulli(r, 0.9) ? next[y->join] : any[rng_uniform_int(r, 3)];
        if (y->join == EHP_JOIN_NONE && rng_bernoulli(r, 0.7))
            a.kind = ACT_JOIN; /* nothing to move on: start something */
        if (a.ev.kind == EHP_EV_FETCHED && rng_bernoulli(r, 0.9))
            for (int m = 0; m < R; m++)
                if (!y->member_fetched[m] && a.ev.member < R) {
                    a.ev.member = m; /* the first member still fetching */
                    break;
                }
    } else if (k < 0.94) {
        a.ev.kind = EHP_EV_MEMBER_FAILED; /* rare: it loses the replica for good */
    } else if (k < 0.97) {
        a.kind = ACT_SIGNAL;
        a.in = (struct ehp_signal_input){
            .train_s = rng_bernoulli(r, 0.05) ? -1.0 : 80.0 + rng_uniform(r) * 100.0,
            .rollout_s = 50.0 + rng_uniform(r) * 100.0,
            .queue_pressure = rng_uniform(r) * 0.9,
            .active_pressure = rng_uniform(r) * 0.9,
            .want_train_gpus = rng_bernoulli(r, 0.2) ? (int)rng_uniform_int(r, 20) : 0,
        };
    } else {
        a.kind = ACT_STEER;
    }
    return a;
}

/* A digest of everything observable, to show that a refused call changed nothing. */
static uint64_t mix(uint64_t h, uint64_t x)
{
    return rng_mix64(h ^ x) + 0x9e3779b97f4a7c15u;
}

static uint64_t dbl(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint64_t digest(const struct ehp_pool *p)
{
    uint64_t h = 1;
    for (int g = 0; g < GPUS; g++)
        h = mix(h, ehp_pool_role(p, g));
    for (int r = 0; r < EHP_ROLES; r++)
        h = mix(h, (uint64_t)ehp_pool_role_gpus(p, r));
    for (int k = 0; k < HYB; k++) {
        const struct ehp_hybrid *y = ehp_pool_hybrid(p, k);
        h = mix(h, y->join);
        h = mix(h, y->generation);
        h = mix(h, y->leaving);
        h = mix(h, y->lost);
        h = mix(h, dbl(y->requested_s));
        h = mix(h, dbl(y->deadline_s));
        h = mix(h, (uint64_t)y->fetched);
        h = mix(h, (uint64_t)y->fetch_version);
        h = mix(h, dbl(y->rollout_ready_s));
        h = mix(h, y->ended_generation);
        h = mix(h, y->ended);
        for (int m = 0; m < R; m++)
            h = mix(h, y->member_fetched[m]);
    }
    const struct ehp_step *s = ehp_pool_step(p);
    h = mix(h, s->open);
    h = mix(h, (uint64_t)s->step);
    h = mix(h, (uint64_t)s->version);
    h = mix(h, s->epoch);
    h = mix(h, (uint64_t)s->lost_count);
    for (int k = 0; k < HYB; k++)
        h = mix(h, (uint64_t)s->member[k] << 8 | s->lost[k]);
    for (int k = 0; k < CORE + HYB; k++)
        h = mix(h, (uint64_t)s->share[k]);
    const struct ehp_signal *sg = ehp_pool_signal_now(p);
    h = mix(h, sg->live);
    h = mix(h, (uint64_t)sg->target);
    h = mix(h, (uint64_t)sg->expires_step);
    return mix(h, (uint64_t)ehp_pool_version(p));
}

/* A step's frozen part. */
struct frozen {
    int64_t step, version;
    double begin_s;
    uint64_t epoch;
    int active, placeholders, batch;
    uint8_t member[HYB];
    int share[CORE + HYB];
};

static void freeze(const struct ehp_step *s, struct frozen *f)
{
    memset(f, 0, sizeof *f); /* padding too: frozen steps are compared with memcmp */
    f->step = s->step;
    f->version = s->version;
    f->begin_s = s->begin_s;
    f->epoch = s->epoch;
    f->active = s->active;
    f->placeholders = s->placeholders;
    f->batch = s->batch_trajectories;
    memcpy(f->member, s->member, sizeof f->member);
    memcpy(f->share, s->share, sizeof f->share);
}

static enum ehp_role role_of(const struct ehp_hybrid *y)
{
    switch (y->join) {
    case EHP_JOIN_NONE:
        return EHP_ROLE_HYBRID_ROLLOUT;
    case EHP_JOIN_ACTIVE:
        return EHP_ROLE_HYBRID_TRAINING;
    default:
        return EHP_ROLE_HYBRID_JOINING;
    }
}

/* Every invariant, after a call at the pool's clock now_s. Names the first one broken. */
static void check(const struct ehp_pool *p, const struct ehp_pool_config *c, double now_s,
                  const struct frozen *open_step, const char *where)
{
    /* no GPU in two roles: each GPU's role is its owner's, and the counts add up */
    int count[EHP_ROLES] = {0}, owner[GPUS];
    for (int g = 0; g < GPUS; g++)
        owner[g] = -2; /* core rollout */
    for (int i = 0; i < CORE * R; i++)
        owner[core_gpu[i]] = -1;
    for (int i = 0; i < HYB * R; i++)
        owner[hybrid_gpu[i]] = i / R;
    for (int g = 0; g < GPUS; g++) {
        enum ehp_role want = owner[g] == -2   ? EHP_ROLE_CORE_ROLLOUT
                             : owner[g] == -1 ? EHP_ROLE_CORE_TRAINING
                                              : role_of(ehp_pool_hybrid(p, owner[g]));
        if (ehp_pool_role(p, g) != want)
            fail_msg("%s: GPU %d has role %d, its owner says %d", where, g, ehp_pool_role(p, g),
                     want);
        count[want]++;
    }
    for (int r = 0; r < EHP_ROLES; r++)
        if (ehp_pool_role_gpus(p, r) != count[r])
            fail_msg("%s: role %d counted %d GPUs, holds %d", where, r, ehp_pool_role_gpus(p, r),
                     count[r]);

    for (int h = 0; h < HYB; h++) {
        const struct ehp_hybrid *y = ehp_pool_hybrid(p, h);
        /* a replica wholly in or out */
        for (int m = 1; m < R; m++)
            if (ehp_pool_role(p, y->gpu[m]) != ehp_pool_role(p, y->gpu[0]))
                fail_msg("%s: replica %d split between roles", where, h);
        if (y->lost && y->join != EHP_JOIN_NONE)
            fail_msg("%s: replica %d lost, yet joining or training", where, h);
        /* no trace of a join that ended, none of one that never was */
        if (y->join == EHP_JOIN_NONE) {
            bool any = false;
            for (int m = 0; m < R; m++)
                any |= y->member_fetched[m];
            if (any || y->fetched != 0 || y->fetch_version != -1 || y->leaving ||
                !isinf(y->deadline_s) || y->requested_s != 0.0)
                fail_msg("%s: replica %d serves rollout with a join's trace", where, h);
        }
        /* deadlines enforced; fetched counts the members */
        bool timed = y->join >= EHP_JOIN_REQUESTED && y->join <= EHP_JOIN_ZERO_SYNC;
        if (timed && !(y->deadline_s > now_s))
            fail_msg("%s: replica %d joining past its deadline", where, h);
        if (!timed && !isinf(y->deadline_s))
            fail_msg("%s: replica %d has a deadline outside the timed phases", where, h);
        int n = 0;
        for (int m = 0; m < R; m++)
            n += y->member_fetched[m];
        if (n != y->fetched)
            fail_msg("%s: replica %d counts %d shards, holds %d", where, h, y->fetched, n);
        if (y->leaving && (y->join != EHP_JOIN_ACTIVE || !ehp_pool_step(p)->open))
            fail_msg("%s: replica %d leaving outside an open step", where, h);
    }

    const struct ehp_step *s = ehp_pool_step(p);
    if (s->open) {
        /* the step's membership never changes while it runs */
        struct frozen now;
        freeze(s, &now);
        if (memcmp(&now, open_step, sizeof now) != 0)
            fail_msg("%s: step %lld changed while open", where, (long long)s->step);
        for (int h = 0; h < HYB; h++)
            if (s->member[h] == EHP_MEMBER_ACTIVE && !s->lost[h] &&
                ehp_pool_hybrid(p, h)->join != EHP_JOIN_ACTIVE)
                fail_msg("%s: replica %d active in the step, neither training nor lost", where, h);
    }
    if (s->step >= 0) {
        /* the core always trains, with a share that differs from the others' by at most one */
        int lo = BATCH, hi = 0, sum = 0, active = 0;
        for (int i = 0; i < CORE + HYB; i++) {
            bool in = i < CORE || s->member[i - CORE] == EHP_MEMBER_ACTIVE;
            active += i >= CORE && in;
            if (!in && s->share[i] != 0)
                fail_msg("%s: replica %d has a share without training", where, i);
            if (i < CORE && s->share[i] < 1)
                fail_msg("%s: core replica %d trains nothing", where, i);
            if (in && c->params.batch == EHP_BATCH_FIXED) {
                lo = s->share[i] < lo ? s->share[i] : lo;
                hi = s->share[i] > hi ? s->share[i] : hi;
            }
            sum += s->share[i];
        }
        if (active != s->active || sum != s->batch_trajectories)
            fail_msg("%s: the step's counts disagree with its members", where);
        if (c->params.batch == EHP_BATCH_FIXED && (sum != BATCH || hi - lo > 1 || lo < 1))
            fail_msg("%s: shares %d..%d summing to %d", where, lo, hi, sum);
    }
    /* signals expire after their time-to-live */
    const struct ehp_signal *sg = ehp_pool_signal_now(p);
    if (sg->live && (s->step >= sg->expires_step ||
                     sg->expires_step - sg->issued_step != c->params.signal_ttl_steps))
        fail_msg("%s: signal issued at step %lld still live at step %lld", where,
                 (long long)sg->issued_step, (long long)s->step);
}

/* Drives pools with random calls, checking every invariant after each one, and that a
 * refused call changes nothing. Both batch modes. */
static void test_invariants_under_random_calls(void **state)
{
    int seen[EHP_DEC_LOST + 1] = {0}, lost = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        struct ehp_pool_config c = config();
        c.params.batch = seed % 3 == 0 ? EHP_BATCH_GROW : EHP_BATCH_FIXED;
        c.params.signal_ttl_steps = 1 + (int)(seed % 20);
        struct ehp_pool *p = pool_of(&c);
        struct rng r = rng_keyed(seed, 0xe4b, 1, 0);
        ehp_decision_vec d = {0};
        struct frozen open_step = {0};
        double now = 0.0, clock = 0.0; /* the draws' time; the pool's */
        int refused = 0, accepted = 0;
        char where[64];
        for (int i = 0; i < 400; i++) {
            struct act a = draw(&r, p, &now, true);
            snprintf(where, sizeof where, "seed %llu call %d", (unsigned long long)seed, i);
            /* time passes first, so that a refused call has nothing else to change */
            struct ehp_event tick = {.kind = EHP_EV_TICK, .now_s = a.ev.now_s};
            if (ehp_pool_event(p, &tick, &d) == 0)
                clock = a.ev.now_s;
            check(p, &c, clock, &open_step, where);
            uint64_t before = digest(p);
            bool was_open = ehp_pool_step(p)->open;
            int rc = apply(p, &a, &d);
            if (rc != 0) {
                assert_int_equal(rc, LIBRA_EINVAL);
                if (digest(p) != before)
                    fail_msg("%s: a refused call changed the pool", where);
                refused++;
                continue;
            }
            accepted++;
            if (!was_open && ehp_pool_step(p)->open) {
                /* a step starts with the active replicas training and the joins whose trainers
                 * are up as placeholders */
                const struct ehp_step *s = ehp_pool_step(p);
                for (int h = 0; h < HYB; h++) {
                    enum ehp_join j = ehp_pool_hybrid(p, h)->join;
                    enum ehp_member want = j == EHP_JOIN_ACTIVE ? EHP_MEMBER_ACTIVE
                                           : j == EHP_JOIN_FETCHING_STATE || j == EHP_JOIN_ZERO_SYNC
                                               ? EHP_MEMBER_PLACEHOLDER
                                               : EHP_MEMBER_OUT;
                    if (s->member[h] != want)
                        fail_msg("%s: replica %d (join %d) starts the step as %d", where, h, j,
                                 s->member[h]);
                }
                freeze(s, &open_step);
            }
            check(p, &c, clock, &open_step, where);
        }
        for (size_t q = 0; q < d.n; q++) {
            seen[d.v[q].kind]++;
            lost += d.v[q].kind == EHP_DEC_STEP_END ? d.v[q].lost : 0;
        }
        assert_true(accepted > 250 && refused > 10);
        vec_free(&d);
        ehp_pool_free(p);
    }
    /* the sequences reach every decision, so every invariant was put to the test */
    for (int k = 0; k <= EHP_DEC_LOST; k++)
        if (seen[k] < 10)
            fail_msg("decision %d made only %d times", k, seen[k]);
    assert_true(lost >= 10);
}

/* ---- differential: a naive model of the join machine ---------------------------------------- */

struct model_rep {
    enum ehp_join join;
    uint64_t gen;
    unsigned mask; /* members holding their shard */
    int64_t version;
    double deadline_s;
    bool leaving;
    bool lost; /* a member failed: never joins again */
};

struct model {
    struct model_rep rep[HYB];
    bool open;
    int64_t step, version, last_step;
    double now_s;
};

static void model_end(struct model_rep *m)
{
    *m = (struct model_rep){.gen = m->gen + 1, .version = -1, .deadline_s = INFINITY};
}

/* The spec's rules, one replica at a time, written without the pool's code. */
static int model_apply(struct model *md, const struct act *a)
{
    const struct ehp_event *e = &a->ev;
    bool replica_ok = e->replica >= 0 && e->replica < HYB;
    bool member_ok = e->member >= 0 && e->member < R;
    if (!isfinite(e->now_s) || e->now_s < md->now_s)
        return LIBRA_EINVAL;
    if (a->kind == ACT_EVENT) {
        switch (e->kind) {
        case EHP_EV_TICK:
            break;
        case EHP_EV_STEP_BEGIN:
            if (md->open || e->step <= md->last_step || e->version < md->version)
                return LIBRA_EINVAL;
            break;
        case EHP_EV_STEP_END:
            if (!md->open || e->step != md->step)
                return LIBRA_EINVAL;
            break;
        case EHP_EV_FETCHED:
        case EHP_EV_MEMBER_FAILED:
            if (!replica_ok || !member_ok)
                return LIBRA_EINVAL;
            break;
        default:
            if (!replica_ok)
                return LIBRA_EINVAL;
        }
    } else if (!replica_ok) {
        return LIBRA_EINVAL;
    }
    md->now_s = e->now_s;
    for (int h = 0; h < HYB; h++)
        if (md->rep[h].deadline_s <= md->now_s)
            model_end(&md->rep[h]);
    struct model_rep *m = replica_ok ? &md->rep[e->replica] : NULL;
    if (a->kind == ACT_JOIN) {
        if (m->join != EHP_JOIN_NONE || m->lost)
            return LIBRA_EINVAL;
        m->gen++;
        m->join = EHP_JOIN_REQUESTED;
        m->deadline_s = md->now_s + 180.0;
        return 0;
    }
    if (a->kind == ACT_RELEASE) {
        if (m->join == EHP_JOIN_NONE || m->leaving)
            return LIBRA_EINVAL;
        if (m->join == EHP_JOIN_ACTIVE && md->open)
            m->leaving = true;
        else
            model_end(m);
        return 0;
    }
    switch (e->kind) {
    case EHP_EV_TICK:
        return 0;
    case EHP_EV_STEP_BEGIN:
        md->open = true;
        md->step = md->last_step = e->step;
        md->version = e->version;
        for (int h = 0; h < HYB; h++)
            if (md->rep[h].join == EHP_JOIN_ACTIVATING)
                md->rep[h].join = EHP_JOIN_ACTIVE;
        return 0;
    case EHP_EV_STEP_END:
        md->open = false;
        md->version++;
        for (int h = 0; h < HYB; h++)
            if (md->rep[h].leaving)
                model_end(&md->rep[h]);
        return 0;
    default:
        break;
    }
    if (e->generation != m->gen || m->lost)
        return 0; /* stale */
    if (e->kind == EHP_EV_MEMBER_FAILED) {
        if (m->join != EHP_JOIN_NONE)
            model_end(m);
        m->lost = true;
    } else if (m->join == EHP_JOIN_NONE) {
        return 0; /* stale */
    } else if (e->kind == EHP_EV_STARTED && m->join == EHP_JOIN_REQUESTED) {
        m->join = EHP_JOIN_FETCHING_STATE;
    } else if (e->kind == EHP_EV_FETCHED && m->join == EHP_JOIN_FETCHING_STATE) {
        if (m->mask != 0 && e->version != m->version) {
            model_end(m);
        } else {
            m->mask |= 1u << e->member;
            m->version = e->version;
            if (m->mask == (1u << R) - 1)
                m->join = EHP_JOIN_ZERO_SYNC;
        }
    } else if (e->kind == EHP_EV_SYNCED && m->join == EHP_JOIN_ZERO_SYNC) {
        if (e->version != md->version) {
            model_end(m);
        } else {
            m->join = EHP_JOIN_ACTIVATING;
            m->deadline_s = INFINITY;
        }
    }
    return 0;
}

static void test_pool_matches_a_naive_model(void **state)
{
    for (uint64_t seed = 1; seed <= 300; seed++) {
        struct ehp_pool *p = new_pool();
        struct model md = {.step = -1, .last_step = -1};
        for (int h = 0; h < HYB; h++)
            md.rep[h] = (struct model_rep){.version = -1, .deadline_s = INFINITY};
        struct rng r = rng_keyed(seed, 0xe4b, 2, 0);
        ehp_decision_vec d = {0};
        double now = 0.0;
        for (int i = 0; i < 400; i++) {
            struct act a = draw(&r, p, &now, false);
            int rc = apply(p, &a, &d), want = model_apply(&md, &a);
            if (rc != want)
                fail_msg("seed %llu call %d: pool answered %d, model %d", (unsigned long long)seed,
                         i, rc, want);
            for (int h = 0; h < HYB; h++) {
                const struct ehp_hybrid *y = ehp_pool_hybrid(p, h);
                const struct model_rep *m = &md.rep[h];
                unsigned mask = 0;
                for (int k = 0; k < R; k++)
                    mask |= (unsigned)y->member_fetched[k] << k;
                if (y->join != m->join || y->generation != m->gen || mask != m->mask ||
                    y->fetch_version != m->version || y->leaving != m->leaving ||
                    y->lost != m->lost || dbl(y->deadline_s) != dbl(m->deadline_s))
                    fail_msg("seed %llu call %d: replica %d is (%d, gen %llu), the model says "
                             "(%d, gen %llu)",
                             (unsigned long long)seed, i, h, y->join,
                             (unsigned long long)y->generation, m->join,
                             (unsigned long long)m->gen);
            }
        }
        vec_free(&d);
        ehp_pool_free(p);
    }
}

/* ---- differential: a join that is cancelled or fails leaves no trace ------------------------ */

/* What training saw: each step's active replicas and shares, in order. */
struct training_log {
    int steps;
    int active[512];
    int share[512][CORE + HYB];
};

static void log_step(const struct ehp_pool *p, struct training_log *t)
{
    const struct ehp_step *s = ehp_pool_step(p);
    assert_true(t->steps < 512);
    int mask = 0;
    for (int h = 0; h < HYB; h++)
        mask |= (s->member[h] == EHP_MEMBER_ACTIVE) << h;
    t->active[t->steps] = mask;
    memcpy(t->share[t->steps], s->share, sizeof t->share[0]);
    t->steps++;
}

/*
 * For each seed, a random run on the other replicas, and the same run with a join of a ghost
 * replica woven in that never gets past ZERO_SYNC and ends by a release, a member's failure or
 * its deadline. Training — every step's active replicas and shares, every other replica's
 * state and records — must be the same in both, and the ghost must be back where it started
 * except for its generation and its engine's restart.
 */
static void test_ended_join_leaves_no_trace(void **state)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct rng r = rng_keyed(seed, 0xe4b, 3, 0);
        int ghost = (int)rng_uniform_int(&r, HYB);
        struct ehp_pool *with = new_pool(), *without = new_pool();
        ehp_decision_vec dw = {0}, dn = {0};
        struct training_log lw = {0}, ln = {0};
        double now = 0.0;
        int begin = 20 + (int)rng_uniform_int(&r, 100), end_how = (int)(seed % 3);
        bool ghost_on = false;
        for (int i = 0; i < 300; i++) {
            struct act a = draw(&r, without, &now, false);
            a.ev.now_s = now; /* the ghost's calls move one clock only: keep both valid */
            /* the ghost's join: requested at `begin`, then its phases up to ZERO_SYNC */
            struct ehp_event tick = {.kind = EHP_EV_TICK, .now_s = now};
            assert_int_equal(ehp_pool_event(with, &tick, &dw), 0); /* its deadline first */
            if (i == begin) {
                assert_int_equal(ehp_pool_join(with, now, ghost, NULL, &dw), 0);
                ghost_on = true;
            } else if (ghost_on && ehp_pool_hybrid(with, ghost)->join != EHP_JOIN_NONE &&
                       rng_bernoulli(&r, 0.5)) {
                const struct ehp_hybrid *y = ehp_pool_hybrid(with, ghost);
                struct ehp_event e = {.now_s = now,
                                      .replica = ghost,
                                      .generation = y->generation,
                                      .version = y->fetched > 0 ? y->fetch_version
                                                                : ehp_pool_version(with)};
                bool end = end_how < 2 && (y->join == EHP_JOIN_ZERO_SYNC || rng_bernoulli(&r, 0.1));
                if (end && end_how == 0) {
                    assert_int_equal(ehp_pool_release(with, now, ghost, &dw), 0);
                } else if (end) {
                    e.kind = EHP_EV_MEMBER_FAILED;
                    e.member = (int)rng_uniform_int(&r, R);
                } else if (y->join == EHP_JOIN_REQUESTED) {
                    e.kind = EHP_EV_STARTED;
                } else if (y->join == EHP_JOIN_FETCHING_STATE) {
                    e.kind = EHP_EV_FETCHED;
                    e.member = (int)rng_uniform_int(&r, R);
                } /* else ZERO_SYNC until the deadline */
                if (e.kind != EHP_EV_TICK)
                    assert_int_equal(ehp_pool_event(with, &e, &dw), 0);
            }
            if (a.ev.replica == ghost)
                continue; /* the other replicas only */
            bool step_begin = a.kind == ACT_EVENT && a.ev.kind == EHP_EV_STEP_BEGIN;
            int rw = apply(with, &a, &dw), rn = apply(without, &a, &dn);
            assert_int_equal(rw, rn);
            if (step_begin && rw == 0) {
                log_step(with, &lw);
                log_step(without, &ln);
            }
        }
        /* long after every deadline */
        struct ehp_event tick = {.kind = EHP_EV_TICK, .now_s = now + 1000.0};
        assert_int_equal(ehp_pool_event(with, &tick, &dw), 0);
        assert_int_equal(ehp_pool_event(without, &tick, &dn), 0);
        assert_true(ghost_on);

        assert_int_equal(lw.steps, ln.steps);
        for (int k = 0; k < lw.steps; k++) {
            assert_int_equal(lw.active[k], ln.active[k]);
            assert_memory_equal(lw.share[k], ln.share[k], sizeof lw.share[k]);
        }
        for (int g = 0; g < GPUS; g++)
            assert_int_equal(ehp_pool_role(with, g), ehp_pool_role(without, g));
        for (int h = 0; h < HYB; h++) {
            const struct ehp_hybrid *a = ehp_pool_hybrid(with, h), *b = ehp_pool_hybrid(without, h);
            assert_int_equal(a->join, b->join);
            assert_int_equal(a->fetched, b->fetched);
            assert_int_equal(a->fetch_version, b->fetch_version);
            assert_int_equal(a->leaving, b->leaving);
            assert_true(dbl(a->deadline_s) == dbl(b->deadline_s));
            assert_true(a->requested_s == b->requested_s);
            assert_memory_equal(a->member_fetched, b->member_fetched, R * sizeof(bool));
            if (h != ghost) {
                assert_int_equal(a->generation, b->generation);
                assert_true(a->rollout_ready_s == b->rollout_ready_s);
            }
        }
        assert_int_equal(ehp_pool_version(with), ehp_pool_version(without));
        /* the other replicas' records, and every step's, are the same in both runs */
        size_t i = 0, j = 0;
        for (;;) {
            while (i < dw.n && dw.v[i].replica == ghost)
                i++;
            while (j < dn.n && dn.v[j].replica == ghost)
                j++;
            if (i == dw.n || j == dn.n)
                break;
            assert_int_equal(dw.v[i].kind, dn.v[j].kind);
            assert_true(dw.v[i].at_s == dn.v[j].at_s);
            assert_int_equal(dw.v[i].replica, dn.v[j].replica);
            assert_int_equal(dw.v[i].generation, dn.v[j].generation);
            assert_int_equal(dw.v[i].active, dn.v[j].active);
            assert_int_equal(dw.v[i].trajectories, dn.v[j].trajectories);
            i++;
            j++;
        }
        assert_true(i == dw.n && j == dn.n);
        vec_free(&dw);
        vec_free(&dn);
        ehp_pool_free(with);
        ehp_pool_free(without);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_is_checked),
        cmocka_unit_test(test_defaults_are_the_references),
        cmocka_unit_test(test_initial_roles),
        cmocka_unit_test(test_join_phases),
        cmocka_unit_test(test_placeholders_and_frozen_steps),
        cmocka_unit_test(test_member_failure_rolls_back),
        cmocka_unit_test(test_failed_member_loses_its_replica),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_active_failure_mid_step),
        cmocka_unit_test(test_growing_batch),
        cmocka_unit_test(test_signal_rule),
        cmocka_unit_test(test_signal_balance_rule),
        cmocka_unit_test(test_signal_steers_and_expires),
        cmocka_unit_test(test_moves_are_steers_and_skip_those_leaving),
        cmocka_unit_test(test_protocol_errors),
        cmocka_unit_test(test_invariants_under_random_calls),
        cmocka_unit_test(test_pool_matches_a_naive_model),
        cmocka_unit_test(test_ended_join_leaves_no_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
