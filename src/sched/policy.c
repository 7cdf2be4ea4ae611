/*
 * The routing policies: each chooses a bucket from the trajectory's state and the event, and
 * nothing else (placement is router.c's); see router.h for what each one does and
 * docs/routing.md for why the baselines are defined as they are.
 */
#include "sched/policy.h"

#include <math.h>
#include <string.h>

#include "util/map.h"

static int last_bucket(const struct sched_router *r)
{
    return r->cfg.layout.n - 1;
}

/* The bucket of a token count: the first whose max_tokens covers it, else the last. */
static int bucket_of(const struct sched_router *r, double tokens)
{
    return spec_bucket_index(&r->cfg.layout, (int64_t)ceil(tokens));
}

/* Sets c to bucket with the reason its direction from t's bucket gives. */
static void target(const struct sched_traj *t, int bucket, struct sched_choice *c)
{
    c->bucket = bucket;
    c->reason = bucket > t->bucket   ? SCHED_REASON_PROMOTE
                : bucket < t->bucket ? SCHED_REASON_DEMOTE
                                     : SCHED_REASON_STAY;
}

static void start_shortest(struct sched_router *r, const struct sched_traj *t,
                           const struct sched_event *ev, struct sched_choice *c)
{
    c->bucket = 0;
    c->reason = SCHED_REASON_FIRST;
}

/* C-MLFQ's move rule on an estimate: no trusted exact estimate, or mean and p90 disagree,
 * stay; else go where both point. */
static void agree_rule(const struct sched_router *r, const struct sched_traj *t,
                       struct sched_choice *c)
{
    const struct sched_estimate *e = &c->est;
    c->bucket = t->bucket;
    if (!e->found || !e->exact || e->visits < r->cfg.lookup.min_visits) {
        c->reason = SCHED_REASON_NO_NODE;
        return;
    }
    int by_mean = bucket_of(r, e->mean_tokens), by_p90 = bucket_of(r, e->p90_tokens);
    if (by_mean != by_p90)
        c->reason = SCHED_REASON_DISAGREE;
    else
        target(t, by_mean, c);
}

/* The generated-token quantum: one bucket up per quantum_tokens of one turn. */
static void quantum(struct sched_router *r, const struct sched_traj *t, struct sched_choice *c)
{
    c->bucket = t->bucket;
    c->reason = SCHED_REASON_STAY;
    int64_t q = r->cfg.quantum_tokens;
    if (q > 0 && t->turn_tokens - t->quantum_mark >= q && t->bucket < last_bucket(r)) {
        c->bucket = t->bucket + 1;
        c->reason = SCHED_REASON_QUANTUM;
    }
}

/* ---- cmlfq and predictor -------------------------------------------------------------------- */

static void cmlfq_start(struct sched_router *r, const struct sched_traj *t,
                        const struct sched_event *ev, struct sched_choice *c)
{
    start_shortest(r, t, ev, c);
    sched_model_estimate(r->model, t->prompt, NULL, 0, &r->cfg.lookup, &c->est);
}

static void cmlfq_return(struct sched_router *r, const struct sched_traj *t,
                         const struct sched_event *ev, struct sched_choice *c)
{
    sched_model_estimate(r->model, t->prompt, t->states, t->n, &r->cfg.lookup, &c->est);
    agree_rule(r, t, c);
}

static void predictor_estimate(struct sched_router *r, const struct sched_traj *t,
                               const struct sched_event *ev, struct sched_estimate *e)
{
    struct sched_pred_features f = {
        .states = t->states,
        .n = t->n,
        .generated_tokens = t->generated_tokens,
        .sibling_mean_tokens = ev->sibling_mean_tokens,
    };
    sched_model_predict(r->model, &f, e);
}

static void predictor_start(struct sched_router *r, const struct sched_traj *t,
                            const struct sched_event *ev, struct sched_choice *c)
{
    start_shortest(r, t, ev, c);
    predictor_estimate(r, t, ev, &c->est);
}

static void predictor_return(struct sched_router *r, const struct sched_traj *t,
                             const struct sched_event *ev, struct sched_choice *c)
{
    predictor_estimate(r, t, ev, &c->est);
    agree_rule(r, t, c);
}

/* ---- oracle --------------------------------------------------------------------------------- */

static void oracle_choose(struct sched_router *r, const struct sched_traj *t,
                          const struct sched_event *ev, struct sched_choice *c)
{
    if (ev->true_remaining_tokens < 0) {
        c->bucket = t->bucket < 0 ? 0 : t->bucket;
        c->reason = t->bucket < 0 ? SCHED_REASON_FIRST : SCHED_REASON_NO_NODE;
        return;
    }
    double truth = (double)ev->true_remaining_tokens;
    c->est.found = c->est.exact = true;
    c->est.mean_tokens = c->est.p90_tokens = truth;
    target(t, bucket_of(r, truth), c);
    if (t->bucket < 0)
        c->reason = SCHED_REASON_FIRST;
}

/* ---- length_aware --------------------------------------------------------------------------- */

static void length_choose(struct sched_router *r, const struct sched_traj *t,
                          const struct sched_event *ev, struct sched_choice *c)
{
    int cls = 0;
    for (int i = 0; i < 3; i++)
        cls += ev->context_tokens > r->cfg.length_thresholds_tokens[i];
    target(t, cls < last_bucket(r) ? cls : last_bucket(r), c);
    if (t->bucket < 0)
        c->reason = SCHED_REASON_FIRST;
}

/* ---- la_mlfq -------------------------------------------------------------------------------- */

static void la_start(struct sched_router *r, const struct sched_traj *t,
                     const struct sched_event *ev, struct sched_choice *c)
{
    uint64_t v;
    start_shortest(r, t, ev, c);
    if (intmap_get(&r->last_bucket, t->prompt, &v) &&
        t->epoch - (int64_t)(v / 256) <= r->cfg.la_ttl_epochs && (int)(v % 256) <= last_bucket(r))
        c->bucket = (int)(v % 256);
}

static void la_level(struct sched_router *r, const struct sched_traj *t, int64_t generated,
                     struct sched_choice *c)
{
    int64_t q = r->cfg.la_quantum_tokens > 0 ? r->cfg.la_quantum_tokens : 1;
    int64_t level = generated / q;
    int bucket = level < last_bucket(r) ? (int)level : last_bucket(r);
    target(t, bucket > t->bucket ? bucket : t->bucket, c);
}

static void la_return(struct sched_router *r, const struct sched_traj *t,
                      const struct sched_event *ev, struct sched_choice *c)
{
    la_level(r, t, t->generated_tokens, c);
}

static void la_progress(struct sched_router *r, const struct sched_traj *t, struct sched_choice *c)
{
    la_level(r, t, t->generated_tokens + t->turn_tokens, c);
}

/* ---- plas ----------------------------------------------------------------------------------- */

static void plas_level(struct sched_router *r, const struct sched_traj *t, int64_t attained,
                       struct sched_choice *c)
{
    int bucket = bucket_of(r, (double)attained);
    target(t, bucket > t->bucket ? bucket : t->bucket, c);
}

static void plas_return(struct sched_router *r, const struct sched_traj *t,
                        const struct sched_event *ev, struct sched_choice *c)
{
    plas_level(r, t, t->generated_tokens, c);
}

static void plas_progress(struct sched_router *r, const struct sched_traj *t,
                          struct sched_choice *c)
{
    plas_level(r, t, t->generated_tokens + t->turn_tokens, c);
}

/* ---- load_balance --------------------------------------------------------------------------- */

static void any_bucket(struct sched_router *r, const struct sched_traj *t,
                       const struct sched_event *ev, struct sched_choice *c)
{
    c->bucket = -1;
    c->reason = t->bucket < 0 && t->instance_id < 0 ? SCHED_REASON_FIRST : SCHED_REASON_ANY;
}

const struct sched_policy_ops sched_policies[SCHED_POLICY_COUNT] = {
    [SCHED_CMLFQ] = {true, cmlfq_start, cmlfq_return, quantum},
    [SCHED_LOAD_BALANCE] = {false, any_bucket, any_bucket, NULL},
    [SCHED_LENGTH_AWARE] = {false, length_choose, length_choose, NULL},
    [SCHED_LA_MLFQ] = {false, la_start, la_return, la_progress},
    [SCHED_ORACLE] = {false, oracle_choose, oracle_choose, NULL},
    [SCHED_PLAS] = {false, start_shortest, plas_return, plas_progress},
    [SCHED_PREDICTOR] = {true, predictor_start, predictor_return, quantum},
};
