/*
 * Trajectories as the gateway sees them: a turn starts one or continues it after its tool
 * returns (explicit events, else one return derived from the prompt-length delta), the answer
 * ends the turn, a finish event (or idleness) ends the trajectory. Ended trajectories are
 * captured at once and learnt at the next step, in the order they ended.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"

/* ---- the output files ----------------------------------------------------------------------- */

/* Appends len bytes of whole lines to f (what: its flag). The first failure is said on standard
 * error and nothing more is written; gw_free reports it again, and the exit status is 3.
 * Returns 0, or -1 when f has failed. */
static int output(struct gw_outfile *f, const char *what, const char *line, size_t len)
{
    if (f->error[0])
        return -1;
    if (gw_outfile_write(f, line, len) == 0)
        return 0;
    fprintf(stderr, "libra: serve: %s: %s; %s stopped\n", what, f->error, what);
    return -1;
}

/* Appends o (taken) to f as one line. */
static void output_json(struct gw_outfile *f, const char *what, json_t *o)
{
    size_t n = json_dumpb(o, NULL, 0, JSON_COMPACT);
    char *line = xmalloc(n + 1);
    json_dumpb(o, line, n, JSON_COMPACT);
    line[n] = '\n';
    output(f, what, line, n + 1);
    free(line);
    json_decref(o);
}

/* One line of --decisions, written through jansson: an identity is free text (quotes,
 * backslashes, control characters, a SkyRL trajectory_id object as written), and one that is
 * not UTF-8 is the array of its bytes, as in the state. */
static void log_decision(struct gw *g, const struct gw_traj *t, size_t turn, bool again,
                         const struct sched_decision *routed, const struct sched_decision *other)
{
    if (g->decisions.fd < 0)
        return;
    const struct sched_decision *p = g->shadow ? other : routed;
    const char *policy = sched_policy_name(g->cfg->sched.policy);
    json_t *o = json_pack(
        "{s:o, s:I, s:s, s:I, s:i, s:{s:s, s:i, s:s}}", "trajectory", gw_bytes_json(t ? t->id : ""),
        "turn", (json_int_t)turn, "mode", g->shadow ? "shadow" : policy, "instance",
        (json_int_t)routed->instance_id, "bucket", routed->placed_bucket, "policy", "name", policy,
        "bucket", p->to_bucket, "reason", sched_reason_name(p->reason));
    const struct gw_engine *e = gw_engine_by_id(g, routed->instance_id);
    if (e) /* the gateway step of the weights it holds */
        json_object_set_new(o, "step", json_integer(e->generation));
    if (again) /* the turn's engine failed it, or takes turns no more */
        json_object_set_new(o, "again", json_true());
    if (g->shadow)
        json_object_set_new(o, "sticky",
                            json_pack("{s:I, s:s}", "instance", (json_int_t)routed->instance_id,
                                      "reason", sched_place_name(routed->place)));
    output_json(&g->decisions, "--decisions", o);
}

/* Logs decision d (the other mode's beside it) and counts it: a line of --decisions for each
 * decision counted. */
static void record(struct gw *g, const struct gw_traj *t, size_t turn, bool again,
                   const struct sched_decision *d, const struct sched_decision *other)
{
    log_decision(g, t, turn, again, d, other);
    if (d->placed_bucket >= 0 && d->placed_bucket < SPEC_BUCKETS_MAX) {
        g->decisions_by_bucket[d->placed_bucket]++;
        if (d->prev_instance_id >= 0 && d->prev_instance_id != d->instance_id)
            g->moves_by_bucket[d->placed_bucket]++;
    }
}

/* Carries out a pair of decisions made on r: the mode's applies, the other is logged beside
 * it. Returns the engine. */
static struct gw_engine *apply(struct gw *g, const struct gw_registry *r, struct gw_traj *t,
                               size_t turn, bool again, const struct sched_decision *pol,
                               const struct sched_decision *sticky, struct sched_decision *applied)
{
    const struct sched_decision *d = g->shadow ? sticky : pol;
    *applied = *d;
    t->other = g->shadow ? *pol : *sticky;
    record(g, t, turn, again, d, &t->other);
    return r->engine[d->instance];
}

void gw_turn_moved(struct gw *g, struct gw_traj *t, struct sched_decision *d,
                   const struct gw_engine *e)
{
    d->instance_id = e->id;
    d->placed_bucket = e->bucket;
    if (!t) /* a turn beside its trajectory's running one: not recorded */
        return;
    t->instance = e->id;
    record(g, t, t->turns.n, true, d, &t->other);
}

/* ---- trajectories --------------------------------------------------------------------------- */

static struct gw_traj *traj_new(struct gw *g, const struct gw_request *r)
{
    struct gw_traj *t = xcalloc(1, sizeof *t);
    t->rid = g->next_rid++;
    snprintf(t->id, sizeof t->id, "%s", r->id);
    t->prompt = r->prompt;
    t->instance = -1;
    t->version_start = g->step;
    t->start_tokens = r->prompt_tokens;
    return t;
}

void gw_traj_clear(struct gw_traj *t)
{
    for (size_t i = 0; i < t->turns.n; i++) {
        for (size_t k = 0; k < t->turns.v[i].n_calls; k++)
            free(t->turns.v[i].calls[k].tool);
        free(t->turns.v[i].calls);
    }
    for (size_t k = 0; k < t->pending.n; k++)
        free(t->pending.v[k].tool);
    vec_free(&t->turns);
    vec_free(&t->obs);
    vec_free(&t->returns_at);
    vec_free(&t->pending);
}

static void traj_free(struct gw_traj *t)
{
    gw_traj_clear(t);
    free(t);
}

/* Classifies one return and records it as a call of t's last turn. */
static void add_observed(struct gw *g, struct gw_traj *t, const struct sched_tool_return *in,
                         double exec_s)
{
    struct sched_obs o;
    sched_obs_classify(&g->obs_config, in, &o);
    vec_push(&t->obs, o);
    vec_push(&t->pending, gw_call_from(&o, exec_s >= 0 ? (int64_t)llround(exec_s * 1e6) : -1));
}

/* A return the client announced (an event, or nothing but the prompt's growth). */
static void add_return(struct gw *g, struct gw_traj *t, const char *tool, int status,
                       int64_t payload_tokens, double exec_s)
{
    struct sched_tool_return in = {.tool = tool,
                                   .payload_tokens = payload_tokens,
                                   .payload_chars = -1,
                                   .status = status,
                                   .reward = NAN,
                                   .correct = -1};
    add_observed(g, t, &in, exec_s);
}

/* The returns before this turn: the events, else one derived from the prompt-length delta. */
static void gather_returns(struct gw *g, struct gw_traj *t, const struct gw_request *r)
{
    for (size_t i = 0; i < r->n_events; i++) {
        const struct gw_event *e = &r->events[i];
        if (e->kind == GW_EVENT_TOOL_RETURN)
            add_return(g, t, e->tool, e->status, e->payload_tokens, e->exec_s);
    }
    bool from_chat = t->pending.n == 0; /* chat without events: its messages say */
    for (size_t i = 0; from_chat && i < r->n_chat; i++) {
        const struct gw_chat_return *c = &r->chat[i];
        struct sched_tool_return in = {.tool = c->tool,
                                       .payload_tokens = -1,
                                       .payload_chars = (int64_t)c->text_len,
                                       .text = c->text,
                                       .text_len = c->text_len,
                                       .status = SCHED_STATUS_UNSET,
                                       .reward = NAN,
                                       .correct = -1};
        add_observed(g, t, &in, -1);
    }
    if (t->pending.n == 0) {
        int64_t delta = r->prompt_tokens - t->last_prompt_tokens - t->last_generated;
        add_return(g, t, "", SCHED_STATUS_UNSET, delta >= 0 ? delta : -1, -1);
    }
    struct trace_turn *last = &t->turns.v[t->turns.n - 1];
    last->calls = t->pending.v;
    last->n_calls = t->pending.n;
    t->pending.v = NULL;
    t->pending.n = t->pending.cap = 0;
}

/* Starts t: the first turn. */
static struct gw_engine *route_start(struct gw *g, struct gw_traj *t, const struct gw_request *r,
                                     struct sched_decision *applied)
{
    struct gw_registry reg;
    gw_registry(g, t, &reg);
    struct sched_start s = {.traj = t->rid,
                            .prompt = t->prompt,
                            .prompt_tokens = r->prompt_tokens,
                            .true_remaining_tokens = -1,
                            .now_s = gw_now()};
    struct sched_decision pol, sticky;
    if (sched_router_start(g->router, &reg.reg, &s, &pol) ||
        sched_router_start(g->sticky, &reg.reg, &s, &sticky))
        return NULL;
    return apply(g, &reg, t, 0, false, &pol, &sticky, applied);
}

/* Continues t after the returns of its last turn. */
static struct gw_engine *route_next(struct gw *g, struct gw_traj *t, const struct gw_request *r,
                                    struct sched_decision *applied)
{
    size_t first = t->obs.n - t->pending.n; /* returns announced by the events call count */
    t->announced = t->pending.n;
    gather_returns(g, t, r);
    vec_push(&t->returns_at, first);
    struct gw_registry reg;
    gw_registry(g, t, &reg);
    struct sched_return ev = {.traj = t->rid,
                              .obs = t->obs.v + first,
                              .n_obs = t->obs.n - first,
                              .context_tokens = r->prompt_tokens,
                              .true_remaining_tokens = -1,
                              .sibling_mean_tokens = NAN,
                              .now_s = gw_now()};
    struct sched_decision pol, sticky;
    if (sched_router_tool_return(g->router, &reg.reg, &ev, &pol) ||
        sched_router_tool_return(g->sticky, &reg.reg, &ev, &sticky))
        return NULL;
    return apply(g, &reg, t, t->turns.n, false, &pol, &sticky, applied);
}

/* Sends t's failed turn again: where the policy keeps it (another engine when its own is
 * down), with no new returns — the client resends the same turn. */
static struct gw_engine *route_again(struct gw *g, struct gw_traj *t,
                                     struct sched_decision *applied)
{
    struct gw_registry reg;
    gw_registry(g, t, &reg);
    struct sched_decision pol, sticky;
    if (sched_router_progress(g->router, &reg.reg, t->rid, 0, &pol) ||
        sched_router_progress(g->sticky, &reg.reg, t->rid, 0, &sticky))
        return NULL;
    return apply(g, &reg, t, t->turns.n, true, &pol, &sticky, applied);
}

static void finish(struct gw *g, struct gw_traj *t, enum trace_finish how, bool has_reward,
                   double reward);

bool gw_events_finish(const struct gw_event *ev, size_t n)
{
    return n > 0 && ev[n - 1].kind == GW_EVENT_FINISH; /* a finish is the last (request.c) */
}

/* Applies events ev to t, the events call's way: each tool return, then the finish that ends
 * them if any (t is freed). Returns whether t finished. */
static bool apply_events(struct gw *g, struct gw_traj *t, const struct gw_event *ev, size_t n)
{
    bool ends = gw_events_finish(ev, n);
    for (size_t i = 0; i < n - ends; i++)
        add_return(g, t, ev[i].tool, ev[i].status, ev[i].payload_tokens, ev[i].exec_s);
    if (ends)
        finish(g, t, ev[n - 1].finish, ev[n - 1].has_reward, ev[n - 1].reward);
    return ends;
}

bool gw_route_busy(struct gw *g, const struct gw_request *r)
{
    union map_value v;
    return r->id_source != GW_ID_NONE && gw_events_finish(r->events, r->n_events) &&
           map_get(&g->trajs, r->id, &v) && ((struct gw_traj *)v.ptr)->in_flight;
}

int64_t gw_route_step(struct gw *g, const struct gw_request *r)
{
    union map_value v;
    if (r->id_source == GW_ID_NONE || gw_events_finish(r->events, r->n_events) ||
        !map_get(&g->trajs, r->id, &v))
        return 0; /* a new trajectory (or one reusing the id of one r ends) */
    return ((struct gw_traj *)v.ptr)->generation;
}

/* A second turn of t while one runs (parallel sampling): where the first runs, while that
 * engine takes turns. It is counted, not recorded: t's record is one sequence of turns; no
 * routing decision is made for it (its X-Libra-Decision is "none"). */
static struct gw_engine *route_beside(struct gw *g, const struct gw_traj *t,
                                      struct sched_decision *applied)
{
    g->parallel++;
    struct gw_engine *e = gw_engine_by_id(g, t->instance);
    if (!e || !gw_engine_routable(e))
        e = gw_engine_pick(g, t->generation, NULL);
    memset(applied, 0, sizeof *applied);
    applied->instance_id = e ? e->id : -1;
    applied->placed_bucket = e ? e->bucket : -1;
    return e;
}

struct gw_engine *gw_route_turn(struct gw *g, const struct gw_request *r, struct gw_traj **out,
                                struct sched_decision *applied)
{
    *out = NULL;
    union map_value v;
    struct gw_traj *t = NULL;
    if (r->id_source != GW_ID_NONE && map_get(&g->trajs, r->id, &v))
        t = v.ptr;
    if (t && gw_events_finish(r->events, r->n_events)) { /* the id is reused: the old one ended */
        apply_events(g, t, r->events, r->n_events);
        t = NULL;
    }
    if (t && t->in_flight)
        return route_beside(g, t, applied);
    struct gw_engine *e;
    if (!t) {
        t = traj_new(g, r);
        if (r->id_source == GW_ID_NONE)
            g->single_turn++;
        else
            map_put(&g->trajs, t->id, (union map_value){.ptr = t});
        e = route_start(g, t, r, applied);
    } else {
        e = t->failed ? route_again(g, t, applied) : route_next(g, t, r, applied);
    }
    if (!e) {
        if (r->id_source == GW_ID_NONE)
            traj_free(t);
        return NULL;
    }
    t->in_flight = true;
    t->instance = e->id;
    t->last_active_s = gw_now();
    gw_persist_traj(g, t);
    *out = t;
    return e;
}

void gw_turn_end(struct gw *g, struct gw_traj *t, const struct gw_request *r,
                 const struct gw_engine *e, int64_t generated, int64_t cached,
                 const struct trace_turn_timing *timing)
{
    if (!t)
        return;
    t->in_flight = false;
    t->last_active_s = gw_now();
    t->failed = generated < 0;
    if (generated > TRACE_MAX_TOKENS) /* an engine's bug: a trace could not hold it */
        generated = 0;                /* not taken, as an unreadable count is not */
    if (generated >= 0) {
        struct trace_turn turn = {.prompt_tokens = r->prompt_tokens,
                                  .cached_tokens =
                                      cached >= 0 && cached <= r->prompt_tokens ? cached : -1,
                                  .generated_tokens = generated,
                                  .timing = *timing};
        vec_push(&t->turns, turn);
        t->last_prompt_tokens = r->prompt_tokens;
        t->last_generated = generated;
        if (e && e->generation > t->generation)
            t->generation = e->generation;
        sched_router_turn_done(g->router, t->rid, generated);
        sched_router_turn_done(g->sticky, t->rid, generated);
    }
    if (r->id_source == GW_ID_NONE) /* one turn is the whole trajectory */
        finish(g, t, generated >= 0 ? TRACE_FINISH_COMPLETED : TRACE_FINISH_ABORTED, false, 0);
    else
        gw_persist_traj(g, t);
}

/* ---- the end of a trajectory ---------------------------------------------------------------- */

/* Adds t to the step's finished trajectories, as a replay of the capture reads it, and to the
 * journal, as its replay reads it. */
static void queue_learning(struct gw *g, const struct gw_traj *t, enum trace_finish how)
{
    if (!sched_router_model(g->router) || t->turns.n == 0)
        return;
    struct gw_learn_rec rec;
    gw_learn_rec_from(&rec, t, g->step,
                      how == TRACE_FINISH_TRUNCATED || how == TRACE_FINISH_ABORTED, how);
    gw_learn_rec_add(&g->finished, &rec);
    gw_persist_learnt(g, &rec);
    gw_learn_rec_free(&rec);
}

/* Appends t's record to the capture, written before the call that ended t is answered; with a
 * state dir the commit that journals its end syncs it first. */
static void capture(struct gw *g, struct gw_traj *t, enum trace_finish how, bool has_reward,
                    double reward)
{
    if (g->capture.fd < 0 || g->capture.error[0] || t->turns.n == 0)
        return;
    struct trace_traj rec = {.step = g->step,
                             .prompt_id = (int64_t)t->prompt,
                             .version_start = t->version_start,
                             .version_end = g->step,
                             .turns = t->turns.v,
                             .n_turns = t->turns.n,
                             .finish = how,
                             .has_reward = has_reward,
                             .reward = reward,
                             .extra = json_pack("{s:o}", "id", gw_bytes_json(t->id))};
    struct libra_error err = {0};
    g->capture_line.len = 0;
    if (trace_check_traj(&rec, 0, &err) != 0) { /* a record a trace cannot hold stops it */
        snprintf(g->capture.error, sizeof g->capture.error, "a record the trace refuses: %s",
                 err.msg);
        fprintf(stderr, "libra: serve: --capture: %s; --capture stopped\n", g->capture.error);
    } else {
        trace_format_traj(&g->capture_line, &rec);
        if (output(&g->capture, "--capture", g->capture_line.data, g->capture_line.len) == 0 &&
            g->persist)
            gw_store_sync(g->persist->st, g->capture.fd, "--capture");
    }
    json_decref(rec.extra);
}

static void finish(struct gw *g, struct gw_traj *t, enum trace_finish how, bool has_reward,
                   double reward)
{
    if (t->pending.n && t->turns.n) { /* returns after the last turn: it was cut */
        struct trace_turn *last = &t->turns.v[t->turns.n - 1];
        /* after those a failed turn took, when it has any */
        last->calls = xreallocarray(last->calls, last->n_calls + t->pending.n, sizeof *last->calls);
        memcpy(last->calls + last->n_calls, t->pending.v, t->pending.n * sizeof *last->calls);
        last->n_calls += t->pending.n;
        vec_free(&t->pending);
        if (how == TRACE_FINISH_COMPLETED || how == TRACE_FINISH_FILTERED)
            how = TRACE_FINISH_TRUNCATED;
    }
    enum sched_finish sf = how == TRACE_FINISH_COMPLETED || how == TRACE_FINISH_FILTERED
                               ? SCHED_FINISH_COMPLETED
                           : how == TRACE_FINISH_TRUNCATED ? SCHED_FINISH_TRUNCATED
                                                           : SCHED_FINISH_ABORTED;
    sched_router_finish(g->router, t->rid, sf, false);
    sched_router_finish(g->sticky, t->rid, sf, false);
    queue_learning(g, t, how);
    gw_persist_ended(g, t);
    capture(g, t, how, has_reward, reward);
    if (t->turns.n)
        gw_window_add(g, t->turns.v, t->turns.n, how == TRACE_FINISH_FILTERED);
    g->trajectories_finished++;
    if (t->id[0])
        map_del(&g->trajs, t->id, NULL);
    traj_free(t);
}

int gw_traj_events(struct gw *g, const char *id, const struct gw_event *ev, size_t n)
{
    union map_value v;
    if (!map_get(&g->trajs, id, &v))
        return -1;
    struct gw_traj *t = v.ptr;
    if (gw_events_finish(ev, n) && t->in_flight) /* the turn's proxy holds t until it ends */
        return -2;
    if (apply_events(g, t, ev, n))
        return 0;
    t->last_active_s = gw_now();
    gw_persist_traj(g, t);
    return 0;
}

void gw_traj_expire(struct gw *g, double now_s)
{
    size_t pos = 0;
    const char *key;
    union map_value v;
    VEC(struct gw_traj *) idle = {0};
    while (map_next(&g->trajs, &pos, &key, &v)) {
        struct gw_traj *t = v.ptr;
        if (!t->in_flight && now_s - t->last_active_s > g->opt.idle_s)
            vec_push(&idle, t);
    }
    for (size_t i = 0; i < idle.n; i++)
        finish(g, idle.v[i], TRACE_FINISH_ABORTED, false, 0);
    vec_free(&idle);
}

void gw_learn_finished(struct sched_router *r, struct sched_eval_trace *finished, double *learnt)
{
    struct sched_model *m = sched_router_model(r);
    size_t n = finished->trajs.n;
    if (m && sched_eval_learn(m, finished, NULL, 0, n, *learnt, false) != 0)
        fprintf(stderr, "libra: serve: internal: a trajectory could not be learnt\n");
    *learnt += (double)n;
    sched_eval_trace_free(finished);
    sched_router_tick(r);
}

void gw_learn_step(struct gw *g)
{
    int64_t n = (int64_t)g->finished.trajs.n;
    gw_learn_finished(g->router, &g->finished, &g->learnt);
    g->learn_steps++;
    /* cmlfq_h's deadline: k + 1 of the steps measured so far (the first one's end starts it) */
    double now = gw_now(), deadline_s = NAN;
    if (g->first_step_s < 0) {
        g->first_step_s = now;
        g->first_step = g->step;
    } else if (g->step > g->first_step) {
        double step_s = (now - g->first_step_s) / (double)(g->step - g->first_step);
        deadline_s = (g->cfg->rl.max_staleness + 1) * step_s;
        sched_router_set_deadline(g->router, deadline_s);
    }
    gw_persist_step(g, n, deadline_s);
}

void gw_traj_free_all(struct gw *g)
{
    size_t pos = 0;
    const char *key;
    union map_value v;
    VEC(struct gw_traj *) all = {0};
    while (map_next(&g->trajs, &pos, &key, &v))
        vec_push(&all, (struct gw_traj *)v.ptr);
    for (size_t i = 0; i < all.n; i++) {
        if (g->opt.state_dir) /* they live on in the state dir */
            traj_free(all.v[i]);
        else
            finish(g, all.v[i], TRACE_FINISH_ABORTED, false, 0);
    }
    vec_free(&all);
    sched_eval_trace_free(&g->finished);
}
