/*
 * The router: live trajectory states, the shared placement rules and the events; see
 * router.h. Policies (policy.c) choose buckets; everything about instances is here, so every
 * policy gets the same stickiness, fallback order and never-refuse guarantee.
 */
#include "sched/router.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/policy.h"
#include "spec/config.h"
#include "util/alloc.h"
#include "util/error.h"

#define TRAJ_ALLOC_OVERHEAD 16 /* malloc's bookkeeping per block, about (glibc: 8-16) */

void sched_router_config_default(struct sched_router_config *c, enum sched_policy policy,
                                 const struct spec_bucket_layout *layout)
{
    memset(c, 0, sizeof *c);
    c->policy = policy;
    c->layout = *layout;
    c->max_live = (size_t)1 << 20;
    c->lookup.min_visits = 1;
    c->lookup.shrink_visits = SCHED_SHRINK_VISITS;
    c->lookup.empirical_shrink = true; /* sched.empirical_shrink's default */
    c->la_quantum_tokens = 3000;
    c->la_ttl_epochs = 5;
    c->attempt_shrink = 2;
    c->length_thresholds_tokens[0] = 5000;
    c->length_thresholds_tokens[1] = 10000;
    c->length_thresholds_tokens[2] = 15000;
}

bool sched_policy_learns(enum sched_policy p)
{
    return (unsigned)p < SCHED_POLICY_COUNT && sched_policies[p].learns;
}

struct sched_model *sched_policy_model_new(enum sched_policy p)
{
    if (!sched_policy_learns(p))
        return NULL;
    struct sched_model_config c;
    sched_model_config_default(&c);
    c.learn_predictor = p == SCHED_PREDICTOR;
    c.learn_service = p == SCHED_CMLFQ_H;
    return sched_model_new(&c);
}

int sched_router_new(struct sched_router **out, const struct sched_router_config *c,
                     struct sched_model *model, struct libra_error *err)
{
    *out = NULL;
    if ((unsigned)c->policy >= SCHED_POLICY_COUNT)
        return error_set(err, NULL, 0, 0, "unknown policy %d", (int)c->policy);
    int rc = spec_bucket_validate(&c->layout, err);
    if (rc)
        return rc;
    if (sched_policies[c->policy].learns && !model)
        return error_set(err, NULL, 0, 0, "policy %s needs a model", sched_policy_name(c->policy));
    if (c->policy == SCHED_CMLFQ_H && !c->costs.decision.rate)
        return error_set(err, NULL, 0, 0,
                         "policy cmlfq_h needs the fleet's decision costs (sched_costs.decision)");
    if (!(c->attempt_shrink >= 0))
        return error_set(err, NULL, 0, 0, "attempt_shrink must be >= 0");
    if (c->max_live < 1 || c->quantum_tokens < 0 || c->la_quantum_tokens < 1 ||
        c->la_ttl_epochs < 0 || c->rebuild_interval < 0)
        return error_set(err, NULL, 0, 0,
                         "max_live and la_quantum_tokens must be >= 1, quantum_tokens, "
                         "la_ttl_epochs and rebuild_interval >= 0");
    const int64_t *th = c->length_thresholds_tokens;
    if (th[0] < 0 || th[1] < th[0] || th[2] < th[1])
        return error_set(err, NULL, 0, 0, "length thresholds must be ascending and >= 0");
    struct sched_router *r = xcalloc(1, sizeof *r);
    r->cfg = *c;
    r->model = model;
    *out = r;
    return 0;
}

int sched_router_from_config_opts(struct sched_router **out, const struct spec_sched_config *sc,
                                  const struct spec_bucket_layout *layout,
                                  const struct sched_costs *costs,
                                  const struct sched_router_options *opt, struct libra_error *err)
{
    *out = NULL;
    if (sc->shrink_visits < 0)
        return error_set(err, NULL, 0, 0, "sched.shrink_visits must be >= 0");
    struct sched_router_config c;
    sched_router_config_default(&c, sc->policy, layout);
    c.lookup.shrink_visits = (uint32_t)sc->shrink_visits;
    c.lookup.empirical_shrink = sc->empirical_shrink;
    c.rebuild_interval = sc->rebuild_interval;
    c.attempt_shrink = sc->attempt_shrink;
    if (costs)
        c.costs = *costs;
    if (opt && opt->min_visits)
        c.lookup.min_visits = opt->min_visits;
    if (opt)
        c.depth_only = opt->depth_only;
    struct sched_model *model = sched_policy_model_new(sc->policy);
    int rc = sched_router_new(out, &c, model, err);
    if (rc) {
        sched_model_free(model);
        return rc;
    }
    (*out)->owns_model = true;
    return 0;
}

int sched_router_from_config(struct sched_router **out, const struct spec_sched_config *sc,
                             const struct spec_bucket_layout *layout,
                             const struct sched_costs *costs, struct libra_error *err)
{
    return sched_router_from_config_opts(out, sc, layout, costs, NULL, err);
}

void sched_router_tick(struct sched_router *r)
{
    r->ticks++;
    if (r->model && r->cfg.rebuild_interval > 0 && r->ticks % r->cfg.rebuild_interval == 0)
        sched_model_rebuild(r->model);
}

void sched_router_set_deadline(struct sched_router *r, double deadline_s)
{
    r->cfg.costs.decision.deadline_s = deadline_s;
}

struct sched_model *sched_router_model(struct sched_router *r)
{
    return r->model;
}

/* ---- live trajectory states ----------------------------------------------------------------- */

/* The trajectory whose LRU node n is; NULL when n is NULL. */
static struct sched_traj *traj_of(struct list_node *n)
{
    return n ? list_entry(n, struct sched_traj, lru) : NULL;
}

static void traj_drop(struct sched_router *r, struct sched_traj *t)
{
    intmap_del(&r->live, t->id);
    list_unlink(&r->lru, &t->lru);
    r->path_bytes -=
        t->cap * (sizeof *t->states + sizeof *t->gen_before) + t->cap_rec * sizeof *t->rec;
    free(t->states);
    free(t->gen_before);
    free(t->rec);
    free(t);
}

void sched_router_free(struct sched_router *r)
{
    if (!r)
        return;
    while (r->lru.front)
        traj_drop(r, traj_of(r->lru.front));
    intmap_free(&r->live);
    intmap_free(&r->last_bucket);
    sched_rate_memo_free(&r->rates);
    if (r->owns_model)
        sched_model_free(r->model);
    free(r);
}

static struct sched_traj *traj_find(struct sched_router *r, uint64_t id)
{
    uint64_t v;
    if (!intmap_get(&r->live, id, &v))
        return NULL;
    struct sched_traj *t = (struct sched_traj *)(uintptr_t)v;
    list_move_front(&r->lru, &t->lru);
    return t;
}

static void traj_push_return(struct sched_router *r, struct sched_traj *t, uint32_t state)
{
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        t->states = xreallocarray(t->states, cap, sizeof *t->states);
        t->gen_before = xreallocarray(t->gen_before, cap, sizeof *t->gen_before);
        r->path_bytes += (cap - t->cap) * (sizeof *t->states + sizeof *t->gen_before);
        t->cap = cap;
    }
    t->states[t->n] = state;
    t->gen_before[t->n++] = t->generated_tokens;
}

size_t sched_router_live(const struct sched_router *r)
{
    return r->live.n;
}

size_t sched_router_bytes(const struct sched_router *r)
{
    size_t live = r->live.n;
    size_t map_bytes = r->live.slots ? (r->live.mask + 1) * sizeof(struct intmap_slot) : 0;
    size_t per_traj = sizeof(struct sched_traj) + 2 * TRAJ_ALLOC_OVERHEAD;
    return sizeof *r + map_bytes + live * per_traj + r->path_bytes;
}

int sched_router_set_layout(struct sched_router *r, const struct spec_bucket_layout *l,
                            struct libra_error *err)
{
    int rc = spec_bucket_validate(l, err);
    if (rc)
        return rc;
    const struct spec_bucket_layout old = r->cfg.layout;
    r->cfg.layout = *l;
    for (struct list_node *n = r->lru.front; n; n = n->next) {
        struct sched_traj *t = traj_of(n);
        if (t->bucket >= 0)
            t->bucket = spec_bucket_index(l, old.bucket[t->bucket].max_tokens);
        t->n_rec = 0;
    }
    for (int e = H_FIXED; e < SCHED_H_EXPERTS; e++)
        r->h_score[e] = 0;
    intmap_free(&r->last_bucket);
    return 0;
}

/* ---- placement ------------------------------------------------------------------------------ */

static bool under_cap(const struct sched_instance *in)
{
    return in->ready && in->queued < in->cap;
}

static long load(const struct sched_instance *in)
{
    return (long)in->running + in->queued;
}

/* The least-loaded instance of bucket (-1: any) passing ok; ties go to the lowest index.
 * Returns its index, or -1. */
static long least_loaded(const struct sched_registry *reg, int bucket,
                         bool (*ok)(const struct sched_instance *))
{
    long best = -1;
    for (size_t i = 0; i < reg->n; i++) {
        const struct sched_instance *in = &reg->inst[i];
        if ((bucket >= 0 && in->bucket != bucket) || (ok && !ok(in)))
            continue;
        if (best < 0 || load(in) < load(&reg->inst[best]))
            best = (long)i;
    }
    return best;
}

static bool is_ready(const struct sched_instance *in)
{
    return in->ready;
}

/* The registry index of t's instance, or -1 when it is gone. */
static long current_instance(const struct sched_registry *reg, const struct sched_traj *t)
{
    if (t->instance_id < 0)
        return -1;
    if (t->instance < reg->n && reg->inst[t->instance].id == t->instance_id)
        return (long)t->instance;
    for (size_t i = 0; i < reg->n; i++)
        if (reg->inst[i].id == t->instance_id)
            return (long)i;
    return -1;
}

static long place(const struct sched_router *r, const struct sched_registry *reg,
                  const struct sched_traj *t, int target, bool moved, enum sched_place *how)
{
    long cur = current_instance(reg, t);
    if (!moved && cur >= 0 && under_cap(&reg->inst[cur])) {
        *how = SCHED_PLACE_STICKY;
        return cur;
    }
    if (target < 0) {
        long any = least_loaded(reg, -1, under_cap);
        *how = any >= 0 ? SCHED_PLACE_BUCKET : SCHED_PLACE_OVERFLOW;
        if (any >= 0)
            return any;
    }
    for (int d = 0; target >= 0 && d < r->cfg.layout.n; d++) {
        int cand[2] = {target + d, target - d};
        for (int k = 0; k < (d ? 2 : 1); k++) {
            if (cand[k] < 0 || cand[k] >= r->cfg.layout.n)
                continue;
            long i = least_loaded(reg, cand[k], under_cap);
            if (i >= 0) {
                *how = d ? SCHED_PLACE_FALLBACK : SCHED_PLACE_BUCKET;
                return i;
            }
        }
    }
    *how = SCHED_PLACE_OVERFLOW;
    long i = least_loaded(reg, -1, is_ready);
    return i >= 0 ? i : least_loaded(reg, -1, NULL);
}

/* ---- decisions ------------------------------------------------------------------------------ */

static bool has_costs(const struct sched_router *r)
{
    return r->cfg.costs.decode_s && r->cfg.costs.move_s;
}

/* Whether a move of t to bucket `to` is worth losing its cache (router.h). */
static bool move_pays(const struct sched_router *r, const struct sched_registry *reg,
                      const struct sched_traj *t, int to, const struct sched_choice *c,
                      int64_t context_tokens)
{
    long cur = current_instance(reg, t);
    if (cur < 0 || !c->est.found || isnan(c->est.mean_tokens))
        return true;
    const struct sched_costs *k = &r->cfg.costs;
    const struct sched_instance *from = &reg->inst[cur];
    int to_tp = r->cfg.layout.bucket[to].tp[0];
    double rem = c->est.mean_tokens;
    double d_from = k->decode_s(k->ctx, from->tp, context_tokens, rem);
    double d_to = k->decode_s(k->ctx, to_tp, context_tokens, rem);
    double move = k->move_s(k->ctx, from->tp, to_tp, context_tokens);
    if (to > t->bucket)
        return d_from - d_to > move;
    return from->tp * d_from - to_tp * d_to > to_tp * move;
}

static int decide(struct sched_router *r, const struct sched_registry *reg, struct sched_traj *t,
                  struct sched_choice *c, int64_t context_tokens, struct sched_decision *d)
{
    if (reg->n == 0)
        return LIBRA_ENOENT;
    bool moving = c->bucket != t->bucket && t->bucket >= 0 && c->bucket >= 0;
    /* cmlfq_h's expected cost has the move in it already */
    if (moving && has_costs(r) && c->reason != SCHED_REASON_QUANTUM &&
        r->cfg.policy != SCHED_CMLFQ_H && !move_pays(r, reg, t, c->bucket, c, context_tokens)) {
        c->bucket = t->bucket;
        c->reason = SCHED_REASON_COST_VETO;
        moving = false;
    }
    memset(d, 0, sizeof *d);
    d->traj = t->id;
    d->from_bucket = t->bucket;
    d->to_bucket = c->bucket;
    d->reason = c->reason;
    d->est = c->est;
    d->prev_instance_id = t->instance_id;
    long i = place(r, reg, t, c->bucket, moving, &d->place);
    d->instance = (size_t)i;
    d->instance_id = reg->inst[i].id;
    d->placed_bucket = reg->inst[i].bucket;
    t->bucket = c->bucket;
    t->instance = (size_t)i;
    t->instance_id = d->instance_id;
    return 0;
}

/* Keeps a cmlfq_h decision's record with its trajectory. */
static void keep_record(struct sched_router *r, struct sched_traj *t, const struct sched_choice *c)
{
    if (!c->recorded)
        return;
    if (t->n_rec == t->cap_rec) {
        uint32_t cap = t->cap_rec ? t->cap_rec * 2 : 4;
        t->rec = xreallocarray(t->rec, cap, sizeof *t->rec);
        r->path_bytes += (cap - t->cap_rec) * sizeof *t->rec;
        t->cap_rec = cap;
    }
    t->rec[t->n_rec++] = c->h;
}

static void choice_init(struct sched_choice *c, const struct sched_traj *t)
{
    memset(c, 0, sizeof *c);
    c->bucket = t->bucket;
    c->reason = SCHED_REASON_STAY;
    c->est.mean_tokens = c->est.p90_tokens = NAN;
}

int sched_router_start(struct sched_router *r, const struct sched_registry *reg,
                       const struct sched_start *ev, struct sched_decision *out)
{
    if (intmap_get(&r->live, ev->traj, NULL))
        return LIBRA_EINVAL;
    if (reg->n == 0)
        return LIBRA_ENOENT;
    if (r->live.n >= r->cfg.max_live)
        traj_drop(r, traj_of(r->lru.back));
    struct sched_traj *t = xcalloc(1, sizeof *t);
    *t = (struct sched_traj){.id = ev->traj,
                             .prompt = ev->prompt,
                             .epoch = ev->epoch,
                             .start_s = ev->now_s,
                             .bucket = -1,
                             .instance_id = -1};
    intmap_put(&r->live, ev->traj, (uint64_t)(uintptr_t)t);
    list_push_front(&r->lru, &t->lru);
    struct sched_event e = {ev->prompt_tokens, ev->true_remaining_tokens, NAN, ev->now_s, reg};
    struct sched_choice c;
    choice_init(&c, t);
    sched_policies[r->cfg.policy].start(r, t, &e, &c);
    keep_record(r, t, &c);
    return decide(r, reg, t, &c, ev->prompt_tokens, out);
}

int sched_router_turn_done(struct sched_router *r, uint64_t traj, int64_t generated_tokens)
{
    struct sched_traj *t = traj_find(r, traj);
    if (!t)
        return LIBRA_ENOENT;
    int64_t turn = generated_tokens > 0 ? generated_tokens : 0;
    t->generated_tokens += turn;
    t->turn_tokens = t->quantum_mark = 0;
    r->turn_tokens_avg +=
        (r->turn_tokens_avg > 0 ? 0.01 : 1.0) * ((double)turn - r->turn_tokens_avg);
    return 0;
}

int sched_router_tool_return(struct sched_router *r, const struct sched_registry *reg,
                             const struct sched_return *ev, struct sched_decision *out)
{
    struct sched_traj *t = traj_find(r, ev->traj);
    if (!t)
        return LIBRA_ENOENT;
    if (reg->n == 0 || ev->n_obs == 0)
        return reg->n == 0 ? LIBRA_ENOENT : LIBRA_EINVAL;
    char key[SCHED_STATE_KEY_MAX];
    struct sched_obs_config oc = {.depth_only = r->cfg.depth_only};
    sched_state_key(&oc, ev->obs, ev->n_obs, key, sizeof key);
    uint32_t state = r->model ? sched_model_state(r->model, key) : SCHED_STATE_NONE;
    traj_push_return(r, t, state);
    struct sched_event e = {ev->context_tokens, ev->true_remaining_tokens, ev->sibling_mean_tokens,
                            ev->now_s, reg};
    struct sched_choice c;
    choice_init(&c, t);
    sched_policies[r->cfg.policy].tool_return(r, t, &e, &c);
    keep_record(r, t, &c);
    int rc = decide(r, reg, t, &c, ev->context_tokens, out);
    for (size_t i = 0; i < ev->n_obs; i++)
        out->status_classified |= ev->obs[i].status_from >= SCHED_FROM_TEXT;
    return rc;
}

int sched_router_progress(struct sched_router *r, const struct sched_registry *reg, uint64_t traj,
                          int64_t turn_tokens, struct sched_decision *out)
{
    struct sched_traj *t = traj_find(r, traj);
    if (!t)
        return LIBRA_ENOENT;
    t->turn_tokens = turn_tokens > 0 ? turn_tokens : 0;
    struct sched_choice c;
    choice_init(&c, t);
    const struct sched_policy_ops *p = &sched_policies[r->cfg.policy];
    if (p->progress)
        p->progress(r, t, &c);
    if (c.reason == SCHED_REASON_QUANTUM)
        t->quantum_mark = t->turn_tokens;
    return decide(r, reg, t, &c, 0, out);
}

static void remember_bucket(struct sched_router *r, const struct sched_traj *t)
{
    bool known = intmap_get(&r->last_bucket, t->prompt, NULL);
    if (t->bucket < 0 || (!known && r->last_bucket.n >= r->cfg.max_live))
        return;
    uint64_t epoch = t->epoch > 0 ? (uint64_t)t->epoch : 0;
    intmap_put(&r->last_bucket, t->prompt, epoch * 256 + (uint64_t)t->bucket);
}

int sched_router_finish(struct sched_router *r, uint64_t traj, enum sched_finish finish, bool learn)
{
    struct sched_traj *t = traj_find(r, traj);
    if (!t)
        return LIBRA_ENOENT;
    int rc = 0;
    if (r->cfg.policy == SCHED_CMLFQ_H && finish != SCHED_FINISH_ABORTED)
        sched_h_score(r, t, t->generated_tokens + t->turn_tokens);
    if (learn && r->model) {
        struct sched_traj_summary s = {
            .prompt = t->prompt,
            .start = t->start_s,
            .censored = finish != SCHED_FINISH_COMPLETED,
            .total_tokens = t->generated_tokens + t->turn_tokens,
            .n = t->n,
            .states = t->states,
            .gen_before = t->gen_before,
        };
        rc = sched_model_insert(r->model, &s);
    }
    if (learn && r->cfg.policy == SCHED_LA_MLFQ)
        remember_bucket(r, t);
    traj_drop(r, t);
    return rc;
}

/* ---- names ---------------------------------------------------------------------------------- */

const char *sched_policy_name(enum sched_policy p)
{
    return (unsigned)p < SCHED_POLICY_COUNT ? spec_policy_names[p] : "unknown";
}

int sched_policy_parse(const char *name, enum sched_policy *out)
{
    for (int p = 0; p < SCHED_POLICY_COUNT; p++)
        if (strcmp(name, spec_policy_names[p]) == 0) {
            *out = (enum sched_policy)p;
            return 0;
        }
    return LIBRA_ENOENT;
}

bool sched_policy_bucketless(enum sched_policy p)
{
    return p == SCHED_LOAD_BALANCE;
}

const char *sched_reason_name(enum sched_reason r)
{
    static const char *const names[] = {"first",  "stay",      "no_node", "disagree", "promote",
                                        "demote", "cost_veto", "quantum", "any"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}

const char *sched_place_name(enum sched_place p)
{
    static const char *const names[] = {"sticky", "bucket", "fallback", "overflow"};
    return (unsigned)p < sizeof names / sizeof names[0] ? names[p] : "unknown";
}
