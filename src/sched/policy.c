/*
 * The routing policies: each chooses a bucket from the trajectory's state and the event, and
 * nothing else (placement is router.c's); see router.h for what each one does and
 * docs/routing.md for why the baselines are defined as they are.
 */
#include "sched/policy.h"

#include <math.h>
#include <string.h>

#include "sched/cost.h"

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

/* ---- cmlfq_h -------------------------------------------------------------------------------- */

#define H_MEMORY 1000.0 /* scored decisions over which an expert's past regret fades (by 1/e) */

/* Every bucket's rates at the planned batch at context key `key` (the router's memo). */
static void h_rates(struct sched_router *r, uint32_t key, struct cost_rate *out)
{
    for (int b = 0; b < r->cfg.layout.n; b++)
        sched_rate_memo_get(&r->rates, &r->cfg.costs.decision, r->cfg.layout.bucket[b].tp[0], key,
                            0.0, &out[b]);
}

/* The expected cost of each bucket under d (of mean `mean`; empty: left alone), the trajectory
 * having run elapsed_s[b] by the time bucket b would start it. */
static void expected_costs(const struct sched_router *r, const struct cost_rate *rate,
                           const struct sched_dist *d, double mean, const double *elapsed_s,
                           int from, double *out)
{
    for (int b = 0; d->n && b < r->cfg.layout.n; b++)
        out[b] = sched_expected_cost(&r->cfg.costs.decision, &rate[b], d->tokens, d->weight, d->n,
                                     mean, elapsed_s[b], from >= 0 && b != from);
}

/*
 * When each bucket would start the turn: now, plus the wait behind the turns queued on the
 * instance placement would pick (its least loaded ready one): a slot frees as one of its
 * running turns ends, each about the average turn long, so q queued turns wait about
 * q * turn / running (Little's law). With live load (sched_cost_model.live) the bucket's
 * latency per token is also taken at that instance's batch, not the planned one, and its GPU
 * time per token scaled by how full the instance is (running + 1 over the planned batch, at
 * most 1): an idle instance's GPUs cost nothing to use. open[b]: bucket b has a ready instance
 * under its cap (placement would not fall back from it).
 */
static void bucket_start(struct sched_router *r, const struct sched_event *ev, uint32_t key,
                         struct cost_rate *rate, double elapsed_s, double *out, bool *open)
{
    const struct sched_cost_model *m = &r->cfg.costs.decision;
    const struct sched_instance *best[SPEC_BUCKETS_MAX] = {0};
    for (int b = 0; b < r->cfg.layout.n; b++)
        open[b] = !ev->reg; /* no registry: nothing is known to be full */
    for (size_t i = 0; ev->reg && i < ev->reg->n; i++) {
        const struct sched_instance *in = &ev->reg->inst[i];
        if ((unsigned)in->bucket >= (unsigned)r->cfg.layout.n || !in->ready)
            continue;
        open[in->bucket] |= in->queued < in->cap;
        const struct sched_instance **b = &best[in->bucket];
        if (!*b || in->running + in->queued < (*b)->running + (*b)->queued)
            *b = in;
    }
    for (int b = 0; b < r->cfg.layout.n; b++) {
        if (m->live && best[b]) { /* latency at the batch it would join */
            struct cost_rate now;
            int tp = r->cfg.layout.bucket[b].tp[0];
            sched_rate_memo_get(&r->rates, m, tp, key, best[b]->running + 1.0, &now);
            double planned = tp * rate[b].token_s / rate[b].gpu_token_s;
            double fill = (best[b]->running + 1.0) / planned;
            rate[b].gpu_token_s *= fill < 1 ? fill : 1;
            rate[b].token_s = now.token_s;
        }
        double wait = best[b] && best[b]->queued > 0
                          ? best[b]->queued * r->turn_tokens_avg * rate[b].token_s /
                                (best[b]->running > 1 ? best[b]->running : 1)
                          : 0.0;
        out[b] = elapsed_s + wait;
    }
}

/* Where placement puts a choice of bucket b (router.c's place): b while it has an instance
 * under its cap, else the nearest such bucket outward, larger first; b when none has. */
static int effective_bucket(const bool *open, int n, int b)
{
    for (int d = 0; d < n; d++) {
        if (b + d < n && open[b + d])
            return b + d;
        if (b - d >= 0 && open[b - d])
            return b - d;
    }
    return b;
}

static int argmin(const double *v, int n)
{
    int best = 0;
    for (int b = 1; b < n; b++)
        best = v[b] < v[best] ? b : best;
    return best;
}

/* One source's expected costs per bucket and mean remaining tokens; known false: no data. */
struct h_source {
    bool known;
    double mean;
    double cost[SPEC_BUCKETS_MAX];
};

static void source_of(const struct sched_router *r, const struct cost_rate *rate,
                      const struct sched_dist *d, const double *elapsed_s, int from,
                      struct h_source *out)
{
    out->known = d->n > 0;
    out->mean = sched_dist_mean(d);
    expected_costs(r, rate, d, out->mean, elapsed_s, from, out->cost);
}

/* out = the weighted sum of the known sources among src[0, n) (weights renormalised). */
static void blend(const struct h_source *const *src, const double *w, int n, int buckets,
                  struct h_source *out)
{
    double total = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++)
        total += src[i]->known ? w[i] : 0;
    if (!(total > 0))
        return;
    out->known = true;
    for (int i = 0; i < n; i++) {
        if (!src[i]->known)
            continue;
        double x = w[i] / total;
        out->mean += x * src[i]->mean;
        for (int b = 0; b < buckets; b++)
            out->cost[b] += x * src[i]->cost[b];
    }
}

/* The leader among the experts awake[e] (ties: the shortest bucket's constant, then the lower
 * index, as h_choose picks it). */
static int h_leader(const struct sched_router *r, const bool *awake)
{
    int leader = H_FIXED;
    for (int e = 0; e < H_FIXED + r->cfg.layout.n; e++)
        if (awake[e] && r->h_score[e] < r->h_score[leader])
            leader = e;
    return leader;
}

/*
 * How many decisions the trees' answer stands for here: a look-up costs more than every other
 * source together, so the trees (and the mix, which holds them) are consulted on every decision
 * only while one of them would lead were every expert awake, and otherwise on one decision in
 * H_TREE_SAMPLE, their regret counted that many times over; 0: not consulted (both asleep).
 * Skipping them changes a decision only when the expert that would lead sleeps (has no data)
 * and the trees are next in line.
 */
static int tree_weight(const struct sched_router *r)
{
    bool awake[SCHED_H_EXPERTS];
    for (int e = 0; e < SCHED_H_EXPERTS; e++)
        awake[e] = true;
    int leader = h_leader(r, awake);
    if (leader == H_MIX || leader == H_TREE)
        return 1;
    return r->h_decisions % H_TREE_SAMPLE == 0 ? H_TREE_SAMPLE : 0;
}

/* The experts' sources at this decision: the population past the tokens attained, the
 * prompt's attempts shrunk toward it, and, when trees, the trees' estimate and the three
 * together (else both unknown). */
static void h_sources(struct sched_router *r, const struct sched_traj *t,
                      const struct cost_rate *rate, const double *elapsed_s, bool trees,
                      struct sched_estimate *est, struct h_source src[H_FIXED])
{
    const struct sched_service *sv = sched_model_service(r->model);
    double attained = (double)t->generated_tokens;
    int n = r->cfg.layout.n;
    struct sched_dist d;
    sched_service_population(sv, attained, &d);
    source_of(r, rate, &d, elapsed_s, t->bucket, &src[H_SERVICE]);
    struct h_source attempts;
    int seen = sched_service_prompt(sv, t->prompt, attained, &d);
    source_of(r, rate, &d, elapsed_s, t->bucket, &attempts);
    const struct h_source *pa[2] = {&attempts, &src[H_SERVICE]};
    double k = r->cfg.attempt_shrink;
    blend(pa, (double[]){seen, k > 0 ? k : 0}, seen ? 2 : 1, n, &src[H_PROMPT]);
    if (!seen)
        src[H_PROMPT] = src[H_SERVICE];
    src[H_TREE].known = src[H_MIX].known = false;
    if (!trees)
        return;
    sched_model_estimate(r->model, t->prompt, t->states, t->n, &r->cfg.lookup, est);
    d.n = 0;
    if (est->found && est->exact)
        sched_dist_lognormal(est->mean_tokens, est->p90_tokens, &d);
    source_of(r, rate, &d, elapsed_s, t->bucket, &src[H_TREE]);
    const struct h_source *all[3] = {&src[H_PROMPT], &src[H_TREE], &src[H_SERVICE]};
    blend(all, (double[]){1, 1, 1}, 3, n, &src[H_MIX]);
}

/* Chooses by the awake expert that has beaten the router by most (h_leader). */
static void h_choose(struct sched_router *r, const struct sched_traj *t,
                     const struct sched_event *ev, struct sched_choice *c)
{
    int n = r->cfg.layout.n;
    double elapsed_s = ev->now_s - t->start_s > 0 ? ev->now_s - t->start_s : 0;
    struct cost_rate rate[SPEC_BUCKETS_MAX];
    uint32_t key = sched_rate_context_key(ev->context_tokens);
    h_rates(r, key, rate);
    double start_s[SPEC_BUCKETS_MAX];
    bool open[SPEC_BUCKETS_MAX];
    bucket_start(r, ev, key, rate, elapsed_s, start_s, open);
    int weight = tree_weight(r);
    r->h_decisions++;
    struct h_source src[H_FIXED];
    h_sources(r, t, rate, start_s, weight > 0, &c->est, src);
    struct sched_h_record *h = &c->h;
    *h = (struct sched_h_record){.context_tokens = ev->context_tokens,
                                 .attained = t->generated_tokens,
                                 .from = (int8_t)t->bucket,
                                 .tree_weight = (uint8_t)weight};
    for (int b = 0; b < n; b++) {
        h->start_s[b] = (float)start_s[b];
        h->token_s[b] = (float)rate[b].token_s;
        h->gpu_token_s[b] = (float)rate[b].gpu_token_s;
    }
    bool awake[SCHED_H_EXPERTS] = {0};
    for (int e = 0; e < H_FIXED + n; e++) {
        h->bucket[e] = (int8_t)(e >= H_FIXED   ? e - H_FIXED
                                : src[e].known ? argmin(src[e].cost, n)
                                               : -1);
        awake[e] = h->bucket[e] >= 0;
    }
    for (int e = H_FIXED + n; e < SCHED_H_EXPERTS; e++)
        h->bucket[e] = -1;
    /* the shortest bucket (cmlfq's start) until another expert has done better than the router */
    int leader = h_leader(r, awake);
    c->recorded = true;
    target(t, h->bucket[leader], c);
    /* each expert is scored on where its choice would have run: a full bucket's fallback */
    for (int e = 0; e < H_FIXED + n; e++)
        if (h->bucket[e] >= 0)
            h->bucket[e] = (int8_t)effective_bucket(open, n, h->bucket[e]);
    h->chosen = h->bucket[leader];
    if (t->bucket < 0)
        c->reason = SCHED_REASON_FIRST;
    bool known = leader < H_FIXED;
    c->est.found = c->est.exact = known;
    c->est.mean_tokens = known ? src[leader].mean : NAN;
    c->est.p90_tokens = NAN;
}

void sched_h_score(struct sched_router *r, const struct sched_traj *t, int64_t total)
{
    const struct sched_cost_model *m = &r->cfg.costs.decision;
    int n = r->cfg.layout.n;
    const double keep = 1.0 - 1.0 / H_MEMORY;
    for (uint32_t i = 0; i < t->n_rec; i++) {
        const struct sched_h_record *h = &t->rec[i];
        double left = (double)(total - h->attained);
        left = left > 0 ? left : 0;
        struct cost_rate rate[SPEC_BUCKETS_MAX];
        double cost[SPEC_BUCKETS_MAX] = {0};
        h_rates(r, sched_rate_context_key(h->context_tokens), rate);
        for (int b = 0; b < n; b++) { /* as the decision saw the buckets */
            rate[b].token_s = h->token_s[b];
            rate[b].gpu_token_s = h->gpu_token_s[b];
            cost[b] = sched_cost(m, &rate[b], left, h->start_s[b], h->from >= 0 && b != h->from);
        }
        for (int e = 0; e < H_FIXED + n; e++) {
            if (h->bucket[e] < 0)
                continue;
            double times = e == H_MIX || e == H_TREE ? h->tree_weight : 1;
            r->h_score[e] =
                r->h_score[e] * pow(keep, times) + times * (cost[h->bucket[e]] - cost[h->chosen]);
        }
    }
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
    [SCHED_CMLFQ_H] = {true, h_choose, h_choose, NULL},
};
