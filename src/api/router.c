/*
 * Routing in process (include/libra/libra.h, "routing in process"): the router calls the
 * gateway makes on each event (src/server/traj.c), behind string trajectory ids, for
 * frameworks that pick an engine per turn themselves. Like the gateway, it keeps each
 * trajectory's turns and returns, learns the trajectories that finished in a step at the
 * step's end (sched_eval_learn, in the order they finished), and counts the turns in flight on
 * an instance as its load.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/experiment.h"
#include "api/internal.h"
#include "sched/eval.h"
#include "server/request.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/map.h"
#include "util/vec.h"

#define INSTANCES_MAX 4096
/* sched_router_config_default's max_live: the router never evicts a trajectory held here */
#define LIVE_MAX ((size_t)1 << 20)
#define RETURNS_MAX ((size_t)1 << 16) /* tool returns of one trajectory */

/* A live trajectory. */
struct traj {
    uint64_t rid;                      /* its id in the router */
    uint64_t prompt;                   /* prompt key */
    bool started;                      /* its first turn was routed */
    bool in_flight;                    /* a turn was routed and is not done */
    bool failed;                       /* its last turn failed: the next route places it again */
    size_t instance;                   /* registry index of the turn in flight */
    int64_t context;                   /* the last turn's request, tokens (-1: unknown) */
    int64_t generated;                 /* the last turn's answer, tokens */
    int64_t generated_sum;             /* every turn's answers, tokens (<= TRACE_MAX_TOKENS) */
    VEC(struct sched_eval_turn) turns; /* done; obs, n_obs: the returns routed on after it */
    VEC(struct sched_obs) obs;         /* every return, classified */
    size_t routed;                     /* obs[routed..] arrived since the last route */
};

struct libra_router {
    struct api_presets presets;
    struct libra_config cfg;
    struct cost_move_model move; /* costs.ctx */
    struct sched_costs costs;
    struct spec_bucket_layout layout;
    char buckets[SPEC_BUCKET_TEXT_MAX];
    struct sched_router *router;
    struct sched_obs_config oc;
    VEC(struct sched_instance) inst; /* the registry; running: turns in flight */
    struct map trajs;                /* id -> struct traj * */
    uint64_t next_rid;
    struct sched_eval_trace finished; /* learnt at the next step */
    double learnt;                    /* trajectories learnt so far (the order rebuilds keep) */
    int64_t steps;                    /* steps ended */
    double first_step_s;              /* when the first step ended; NAN before */
    double last_step_s;               /* when the last step ended; NAN before */
    int64_t first_step;
};

/* Checks a time argument: NAN (the library's clock) or finite. Returns 0, or LIBRA_EINVAL. */
static int check_now(double now_s, struct libra_error *err)
{
    if (isnan(now_s) || isfinite(now_s))
        return 0;
    return error_set(err, NULL, 0, 0,
                     "now_s: expected seconds on a monotonic clock, or NAN for the library's, not "
                     "%g",
                     now_s);
}

/* Checks a token count argument: -1 (unknown), or 0 to what a trace holds (TRACE_MAX_TOKENS),
 * so that sums over a trajectory stay exact. Returns 0, or LIBRA_EINVAL naming what. */
static int check_tokens(const char *trajectory, const char *what, int64_t tokens,
                        struct libra_error *err)
{
    if (tokens >= -1 && tokens <= TRACE_MAX_TOKENS)
        return 0;
    return error_set(err, NULL, 0, 0,
                     "trajectory '%s': %s: expected 0 to 2^40 (-1: unknown), not %lld", trajectory,
                     what, (long long)tokens);
}

static double clock_or(double now_s)
{
    if (!isnan(now_s))
        return now_s;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void traj_free(struct traj *t)
{
    vec_free(&t->turns);
    vec_free(&t->obs);
    free(t);
}

/* ---- the router ----------------------------------------------------------------------------- */

/* sched.buckets, else the workload's reference layout on its model. */
static int make_layout(struct libra_router *r, struct libra_error *err)
{
    const struct libra_config *cfg = &r->cfg;
    int rc = 0;
    if (cfg->sched.buckets[0])
        rc = spec_bucket_parse(&r->layout, cfg->sched.buckets, "sched.buckets", err);
    else if (spec_bucket_default(&r->layout, cfg->workload.name, cfg->model.name) != 0)
        rc = error_set(err, NULL, 0, 0,
                       "sched.buckets: workload '%s' on model '%s' has no reference layout: set "
                       "one",
                       cfg->workload.name, cfg->model.name);
    if (rc == 0)
        spec_bucket_format(&r->layout, r->buckets, sizeof r->buckets);
    return rc;
}

/* Refuses a policy that cannot act here: oracle routes by each trajectory's true remaining
 * tokens, which a live router is never told (it would answer the shortest bucket every time).
 * Returns 0, or LIBRA_EINVAL naming sched.policy at its place in config_json (parsed again:
 * the error path alone pays for it). */
static int check_policy(const struct libra_config *cfg, const char *config_json, const char *name,
                        struct libra_error *err)
{
    const char *why = spec_policy_live_refusal(cfg->sched.policy);
    if (!why)
        return 0;
    /* oracle is set by the text, which api_config_from_text parsed already */
    const char *text = api_config_text(config_json);
    struct ujson_doc doc = {0};
    struct libra_error ignored;
    (void)ujson_doc_parse(&doc, name && name[0] ? name : "config", text, strlen(text), &ignored);
    ujson_errorf(err, &doc, "sched/policy", "%s", why);
    ujson_doc_free(&doc);
    return LIBRA_EINVAL;
}

int libra_router_new(const char *config_json, const char *name, struct libra_router **out,
                     struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!out)
        return error_set(err, NULL, 0, 0, "out: expected a place for the router");
    struct libra_router *r = xcalloc(1, sizeof *r);
    map_init(&r->trajs);
    r->first_step_s = NAN;
    r->last_step_s = NAN;
    int rc = api_config_from_text(config_json, name, &r->presets, &r->cfg, err);
    if (rc == 0)
        rc = check_policy(&r->cfg, config_json, name, err);
    if (rc == 0)
        rc = make_layout(r, err);
    if (rc == 0)
        rc = api_move_costs(&r->presets, &r->cfg, &r->move, &r->costs, err);
    r->costs.decision.live = true; /* the turns in flight are the load cmlfq_h sees */
    if (rc == 0)
        rc = sched_router_from_config(&r->router, &r->cfg.sched, &r->layout, &r->costs, err);
    if (rc) {
        libra_router_free(r);
        *out = NULL;
        return rc;
    }
    sched_obs_defaults(&r->oc, r->cfg.workload.name, r->cfg.model.name);
    *out = r;
    return 0;
}

void libra_router_free(struct libra_router *r)
{
    if (!r)
        return;
    size_t pos = 0;
    union map_value v;
    while (map_next(&r->trajs, &pos, NULL, &v))
        traj_free(v.ptr);
    map_free(&r->trajs);
    sched_eval_trace_free(&r->finished);
    sched_router_free(r->router);
    vec_free(&r->inst);
    api_presets_free(&r->presets);
    free(r);
}

const char *libra_router_buckets(const struct libra_router *r)
{
    return r ? r->buckets : "";
}

int libra_router_add_instance(struct libra_router *r, int64_t id, int tp, int *bucket,
                              struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!r)
        return error_set(err, NULL, 0, 0, "router: expected a router");
    /* the router takes a negative id for "no previous instance" (prev_instance -1) */
    if (id < 0)
        return error_set(err, NULL, 0, 0, "instance %lld: expected an id from 0 to %lld",
                         (long long)id, (long long)INT64_MAX);
    if (r->inst.n >= INSTANCES_MAX) {
        error_set(err, NULL, 0, 0, "instance %lld: more than %d instances", (long long)id,
                  INSTANCES_MAX);
        return LIBRA_ENOMEM;
    }
    for (size_t i = 0; i < r->inst.n; i++)
        if (r->inst.v[i].id == id)
            return error_set(err, NULL, 0, 0, "instance %lld: registered already", (long long)id);
    int b = 0;
    while (b < r->layout.n && !spec_bucket_has_tp(&r->layout.bucket[b], tp))
        b++;
    if (b == r->layout.n)
        return error_set(err, NULL, 0, 0, "instance %lld: TP%d, which no bucket of %s serves",
                         (long long)id, tp, r->buckets);
    struct sched_instance in = {.id = id, .tp = tp, .bucket = b, .cap = INT_MAX, .ready = true};
    vec_push(&r->inst, in);
    if (bucket)
        *bucket = b;
    return 0;
}

/* ---- trajectories --------------------------------------------------------------------------- */

/* Checks the handle and the id. Returns 0, or LIBRA_EINVAL with err. */
static int check(const struct libra_router *r, const char *id, struct libra_error *err)
{
    if (!r)
        return error_set(err, NULL, 0, 0, "router: expected a router");
    if (!id)
        return error_set(err, NULL, 0, 0, "trajectory: expected an id");
    return 0;
}

/* The live trajectory id, or NULL with *rc and err set (LIBRA_ENOENT, or check's). */
static struct traj *find(struct libra_router *r, const char *id, int *rc, struct libra_error *err)
{
    union map_value v;
    if ((*rc = check(r, id, err)) != 0)
        return NULL;
    if (map_get(&r->trajs, id, &v))
        return v.ptr;
    error_set(err, NULL, 0, 0, "trajectory '%s': not started, or finished", id);
    *rc = LIBRA_ENOENT;
    return NULL;
}

/* A per-trajectory call's start: *err prepared (scratch when the caller passed NULL) and the
 * trajectory id names, or NULL with *rc and *err set. */
static struct traj *begin(struct libra_router *r, const char *id, struct libra_error **err,
                          struct libra_error *scratch, int *rc)
{
    *err = api_error_init(*err, scratch);
    return find(r, id, rc, *err);
}

int libra_router_start(struct libra_router *r, const char *trajectory, uint64_t prompt,
                       struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    int rc = check(r, trajectory, err);
    if (rc)
        return rc;
    if (prompt > (uint64_t)INT64_MAX)
        return error_set(err, NULL, 0, 0, "trajectory '%s': prompt: expected 0..%lld", trajectory,
                         (long long)INT64_MAX);
    if (map_get(&r->trajs, trajectory, NULL))
        return error_set(err, NULL, 0, 0, "trajectory '%s': started already", trajectory);
    if (map_size(&r->trajs) >= LIVE_MAX) {
        error_set(err, NULL, 0, 0, "trajectory '%s': %zu trajectories are live already", trajectory,
                  LIVE_MAX);
        return LIBRA_ENOMEM;
    }
    struct traj *t = xcalloc(1, sizeof *t);
    *t = (struct traj){.rid = r->next_rid++, .prompt = prompt, .context = -1};
    map_put(&r->trajs, trajectory, (union map_value){.ptr = t});
    return 0;
}

/* Parses a status name of n names (name_of); NULL is fallback. Returns the index or -1. */
static int parse_name(const char *s, int n, const char *(*name_of)(int), int fallback)
{
    if (!s)
        return fallback;
    for (int i = 0; i < n; i++)
        if (strcmp(s, name_of(i)) == 0)
            return i;
    return -1;
}

static const char *status_name(int s)
{
    return sched_status_name((enum sched_status)s);
}

static const char *finish_name(int f)
{
    return trace_finish_name((enum trace_finish)f);
}

/* Classifies a return and adds it to t's. */
static void add_return(const struct libra_router *r, struct traj *t, const char *tool, int status,
                       int64_t payload_tokens)
{
    struct sched_tool_return in = {.tool = tool,
                                   .payload_tokens = payload_tokens >= 0 ? payload_tokens : -1,
                                   .payload_chars = -1,
                                   .status = status,
                                   .reward = NAN,
                                   .correct = -1};
    struct sched_obs o;
    sched_obs_classify(&r->oc, &in, &o);
    vec_push(&t->obs, o);
}

int libra_router_tool_return(struct libra_router *r, const char *trajectory, const char *tool,
                             const char *status, int64_t payload_tokens, struct libra_error *err)
{
    struct libra_error scratch;
    int rc;
    struct traj *t = begin(r, trajectory, &err, &scratch, &rc);
    if (!t)
        return rc;
    int s = parse_name(status, SCHED_STATUS_COUNT, status_name, SCHED_STATUS_UNSET);
    if (s == -1 && status)
        return error_set(err, NULL, 0, 0,
                         "trajectory '%s': status: expected success, failure, timeout or other, "
                         "not '%s'",
                         trajectory, status);
    if (!t->started)
        return error_set(err, NULL, 0, 0, "trajectory '%s': no turn was routed yet", trajectory);
    if ((rc = check_tokens(trajectory, "payload_tokens", payload_tokens, err)) != 0)
        return rc;
    if (t->obs.n >= RETURNS_MAX) {
        error_set(err, NULL, 0, 0, "trajectory '%s': more than %zu tool returns", trajectory,
                  RETURNS_MAX);
        return LIBRA_ENOMEM;
    }
    add_return(r, t, tool, s, payload_tokens);
    return 0;
}

/* A context size for the router, whose costs take no negative sizes: unknown (-1) reads 0. */
static int64_t known(int64_t tokens)
{
    return tokens >= 0 ? tokens : 0;
}

/* Routes t's next turn on the returns since the last (none announced: one sized by the
 * context's growth, as the gateway derives it). */
static int route_next(struct libra_router *r, struct traj *t, int64_t context_tokens, double now,
                      const struct sched_registry *reg, struct sched_decision *d)
{
    if (t->routed == t->obs.n) {
        int64_t delta = context_tokens >= 0 && t->context >= 0
                            ? context_tokens - t->context - t->generated
                            : -1;
        add_return(r, t, "", SCHED_STATUS_UNSET, delta);
    }
    struct sched_eval_turn *last = &t->turns.v[t->turns.n - 1];
    last->obs = (uint32_t)t->routed;
    last->n_obs = (uint32_t)(t->obs.n - t->routed);
    struct sched_return ev = {.traj = t->rid,
                              .obs = t->obs.v + t->routed,
                              .n_obs = t->obs.n - t->routed,
                              .context_tokens = known(context_tokens),
                              .true_remaining_tokens = -1,
                              .sibling_mean_tokens = NAN,
                              .now_s = now};
    t->routed = t->obs.n;
    return sched_router_tool_return(r->router, reg, &ev, d);
}

static void decision_out(const struct sched_decision *d, struct libra_decision *out)
{
    *out = (struct libra_decision){.instance = d->instance_id,
                                   .bucket = d->placed_bucket,
                                   .policy_bucket = d->to_bucket,
                                   .from_bucket = d->from_bucket,
                                   .prev_instance = d->prev_instance_id,
                                   .reason = sched_reason_name(d->reason),
                                   .place = sched_place_name(d->place)};
}

int libra_router_route(struct libra_router *r, const char *trajectory, int64_t context_tokens,
                       double now_s, struct libra_decision *out, struct libra_error *err)
{
    struct libra_error scratch;
    int rc;
    struct traj *t = begin(r, trajectory, &err, &scratch, &rc);
    if (!t)
        return rc;
    if (!out)
        return error_set(err, NULL, 0, 0, "out: expected a place for the decision");
    if ((rc = check_tokens(trajectory, "context_tokens", context_tokens, err)) != 0 ||
        (rc = check_now(now_s, err)) != 0)
        return rc;
    if (t->in_flight)
        return error_set(err, NULL, 0, 0, "trajectory '%s': a turn is in flight", trajectory);
    if (!r->inst.n) {
        error_set(err, NULL, 0, 0, "no instance is registered");
        return LIBRA_ENOENT;
    }
    context_tokens = context_tokens >= 0 ? context_tokens : -1; /* -1: unknown */
    double now = clock_or(now_s);
    const struct sched_registry reg = {r->inst.v, r->inst.n};
    struct sched_decision d;
    if (!t->started)
        rc = sched_router_start(r->router, &reg,
                                &(struct sched_start){.traj = t->rid,
                                                      .prompt = t->prompt,
                                                      .prompt_tokens = known(context_tokens),
                                                      .true_remaining_tokens = -1,
                                                      .now_s = now},
                                &d);
    else if (t->failed)
        rc = sched_router_progress(r->router, &reg, t->rid, 0, &d);
    else
        rc = route_next(r, t, context_tokens, now, &reg, &d);
    if (rc) {
        error_set(err, NULL, 0, 0, "internal: trajectory '%s': the router answered %d", trajectory,
                  rc);
        return LIBRA_EINTERNAL;
    }
    t->started = true;
    t->failed = false;
    t->in_flight = true;
    t->instance = d.instance;
    t->context = context_tokens;
    r->inst.v[d.instance].running++;
    decision_out(&d, out);
    return 0;
}

int libra_router_turn_done(struct libra_router *r, const char *trajectory, int64_t generated_tokens,
                           struct libra_error *err)
{
    struct libra_error scratch;
    int rc;
    struct traj *t = begin(r, trajectory, &err, &scratch, &rc);
    if (!t)
        return rc;
    if (!t->in_flight)
        return error_set(err, NULL, 0, 0, "trajectory '%s': no turn is in flight", trajectory);
    if (generated_tokens < -1)
        return error_set(err, NULL, 0, 0,
                         "trajectory '%s': generated_tokens: expected 0 to 2^40 (-1: failed), not "
                         "%lld",
                         trajectory, (long long)generated_tokens);
    if (generated_tokens > TRACE_MAX_TOKENS - t->generated_sum)
        return error_set(err, NULL, 0, 0,
                         "trajectory '%s': generated_tokens: %lld would take its turns' total "
                         "past 2^40, the most a trace holds",
                         trajectory, (long long)generated_tokens);
    t->in_flight = false;
    r->inst.v[t->instance].running--;
    t->failed = generated_tokens < 0;
    if (t->failed)
        return 0;
    struct sched_eval_turn turn = {.generated_tokens = generated_tokens,
                                   .context_tokens = t->context};
    vec_push(&t->turns, turn);
    t->generated = generated_tokens;
    t->generated_sum += generated_tokens;
    sched_router_turn_done(r->router, t->rid, generated_tokens);
    return 0;
}

/* Keeps t for the next step's learning, as the gateway's capture of it replays. */
static void keep_finished(struct libra_router *r, const struct traj *t, bool censored)
{
    sched_eval_traj_add(&r->finished, r->steps, t->prompt, 0, 0, censored);
    for (size_t k = 0; k < t->turns.n; k++) {
        const struct sched_eval_turn *tu = &t->turns.v[k];
        bool returns = k + 1 < t->turns.n; /* after the last turn they lead nowhere */
        sched_eval_turn_add(&r->finished, tu->generated_tokens, tu->context_tokens,
                            returns ? t->obs.v + tu->obs : NULL, returns ? tu->n_obs : 0, 0.0);
    }
}

int libra_router_finish(struct libra_router *r, const char *trajectory, const char *status,
                        struct libra_error *err)
{
    struct libra_error scratch;
    int rc;
    struct traj *t = begin(r, trajectory, &err, &scratch, &rc);
    if (!t)
        return rc;
    int how = parse_name(status, TRACE_FINISH_COUNT, finish_name, TRACE_FINISH_COMPLETED);
    if (how < 0)
        return error_set(err, NULL, 0, 0,
                         "trajectory '%s': status: expected completed, truncated, aborted or "
                         "filtered, not '%s'",
                         trajectory, status);
    if (t->in_flight)
        r->inst.v[t->instance].running--;
    bool cut = t->routed < t->obs.n && t->turns.n; /* returns after the last turn */
    if (cut && (how == TRACE_FINISH_COMPLETED || how == TRACE_FINISH_FILTERED))
        how = TRACE_FINISH_TRUNCATED;
    bool censored = how == TRACE_FINISH_TRUNCATED || how == TRACE_FINISH_ABORTED;
    struct sched_model *m = sched_router_model(r->router);
    if (t->started)
        sched_router_finish(r->router, t->rid,
                            how == TRACE_FINISH_TRUNCATED ? SCHED_FINISH_TRUNCATED
                            : how == TRACE_FINISH_ABORTED ? SCHED_FINISH_ABORTED
                                                          : SCHED_FINISH_COMPLETED,
                            m == NULL);
    if (m && t->turns.n)
        keep_finished(r, t, censored);
    map_del(&r->trajs, trajectory, NULL);
    traj_free(t);
    return 0;
}

int libra_router_step(struct libra_router *r, double now_s, struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!r)
        return error_set(err, NULL, 0, 0, "router: expected a router");
    int rc = check_now(now_s, err);
    if (rc)
        return rc;
    /* cmlfq_h's deadline: k + 1 of the steps measured so far (the first one's end starts it) */
    double now = clock_or(now_s);
    if (now < r->last_step_s)
        return error_set(err, NULL, 0, 0,
                         "now_s: %g is before the previous step's end, %g: the clock must not run "
                         "backwards",
                         now, r->last_step_s);
    r->last_step_s = now;
    struct sched_model *m = sched_router_model(r->router);
    size_t n = r->finished.trajs.n;
    rc = m ? sched_eval_learn(m, &r->finished, NULL, 0, n, r->learnt, false) : 0;
    r->learnt += (double)n;
    sched_eval_trace_free(&r->finished);
    sched_router_tick(r->router);
    r->steps++;
    if (isnan(r->first_step_s)) {
        r->first_step_s = now;
        r->first_step = r->steps;
    } else if (r->steps > r->first_step) {
        double step_s = (now - r->first_step_s) / (double)(r->steps - r->first_step);
        sched_router_set_deadline(r->router, (r->cfg.rl.max_staleness + 1) * step_s);
    }
    if (rc) {
        error_set(err, NULL, 0, 0, "internal: a finished trajectory could not be learnt");
        return LIBRA_EINTERNAL;
    }
    return 0;
}

uint64_t libra_prompt_key(const void *text, size_t len)
{
    return gw_hash(GW_HASH_SEED, text ? text : "", text ? len : 0) & GW_PROMPT_MASK;
}
