/*
 * Trajectories in the simulator: where they come from, and what happens to them between
 * their first turn and their group's completion.
 *
 * A group is drawn whole when it is launched: from the generator, the trajectory of
 * (prompt, sample, policy version) with the fleet's version at launch (the same in every mode
 * that launches it at that version: common random numbers), or from a trace, its next group.
 * The record fixes each turn's context, generated tokens and tool calls; the simulation
 * decides only when things happen. Every turn is placed by the router through the calls the
 * gateway makes, with observations built by sched_obs_classify from what a gateway sees (tool
 * name, payload tokens, the status the client reports).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"

/* ---- source --------------------------------------------------------------------------- */

static uint32_t pool_add(struct sim *s, const char *name, int64_t workers)
{
    s->pools = xreallocarray(s->pools, s->n_pools + 1, sizeof *s->pools);
    struct sim_pool *p = &s->pools[s->n_pools];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->workers = workers;
    return (uint32_t)s->n_pools++;
}

/* The pool of a tool: the preset's tools hold the first pools, in order (workload_tool_index);
 * a tool the preset does not name gets a pool of its own, with a worker per call. A run has a
 * handful of tools, so a scan beats hashing the name. */
static uint32_t pool_of(struct sim *s, const char *tool)
{
    const struct workload_preset *w = s->in->workload;
    int known = w ? workload_tool_index(w, tool) : -1;
    if (known >= 0)
        return (uint32_t)known;
    for (size_t i = w ? w->n_tools : 0; i < s->n_pools; i++)
        if (strncmp(s->pools[i].name, tool, WORKLOAD_TOOL_NAME_MAX - 1) == 0)
            return (uint32_t)i;
    return pool_add(s, tool, 0);
}

void sim_source_init(struct sim *s)
{
    const struct sim_input *in = s->in;
    arena_init(&s->arena, 0);
    for (size_t i = 0; in->workload && i < in->workload->n_tools; i++)
        pool_add(s, in->workload->tools[i].name, in->workload->tools[i].pool.workers);
    if (in->trace) {
        sched_obs_defaults(&s->oc, in->trace->workload, in->trace->model);
    } else {
        sched_obs_defaults(&s->oc, s->cfg->workload.name, s->cfg->model.name);
        workload_gen_init(&s->gen, in->workload, (uint64_t)s->cfg->sim.seed);
    }
}

void sim_source_free(struct sim *s)
{
    for (size_t i = 0; i < s->traj.n; i++)
        free(s->traj.v[i].turns);
    vec_free(&s->traj);
    vec_free(&s->groups);
    vec_free(&s->free_groups);
    for (size_t i = 0; i < s->n_pools; i++)
        vec_free(&s->pools[i].queue);
    free(s->pools);
    intmap_free(&s->prompt_seen);
    arena_free(&s->arena);
}

/* Copies record r into t: turns (at least one token generated each) and the tool calls
 * between them (calls after the last turn end the trajectory and are not simulated). */
static void copy_record(struct sim *s, struct sim_traj *t, const struct trace_traj *r)
{
    size_t n_calls = 0;
    for (size_t i = 0; i + 1 < r->n_turns; i++)
        n_calls += r->turns[i].n_calls;
    t->turns = xmalloc(r->n_turns * sizeof *t->turns + n_calls * sizeof *t->calls);
    t->calls = (struct sim_call *)(t->turns + r->n_turns);
    t->n_turns = (uint32_t)r->n_turns;
    uint32_t c = 0;
    for (size_t i = 0; i < r->n_turns; i++) {
        const struct trace_turn *u = &r->turns[i];
        struct sim_turn *v = &t->turns[i];
        v->prompt_tokens = u->prompt_tokens > 0 ? u->prompt_tokens : 1;
        v->gen_tokens = u->generated_tokens > 0 ? u->generated_tokens : 1;
        v->call = c;
        v->n_calls = i + 1 < r->n_turns ? (uint32_t)u->n_calls : 0;
        for (uint32_t k = 0; k < v->n_calls; k++, c++) {
            const struct trace_tool_call *x = &u->calls[k];
            t->calls[c] =
                (struct sim_call){.pool = pool_of(s, x->tool),
                                  .status = x->status,
                                  .payload_tokens = x->payload_tokens,
                                  .exec_s = x->exec_us > 0 ? (double)x->exec_us / 1e6 : 0.0};
            t->tool_tokens += x->payload_tokens;
        }
        t->total_tokens += v->gen_tokens;
    }
    const struct sim_turn *last = &t->turns[t->n_turns - 1];
    t->final_context = last->prompt_tokens + last->gen_tokens;
    t->first_prompt = t->turns[0].prompt_tokens;
    t->setup_s = (double)r->setup_us / 1e6;
    t->finish = r->finish;
    t->reward = r->reward;
    t->has_reward = r->has_reward;
    t->prompt = r->prompt_id;
    t->epoch = r->epoch;
}

/* The record of sample k of group gi at version v. */
static const struct trace_traj *draw(struct sim *s, int64_t gi, int64_t k, int64_t v,
                                     struct trace_traj *buf)
{
    if (s->in->trace) {
        size_t groups = s->in->trace->n / (size_t)s->samples;
        return &s->in->trace->trajs[(size_t)gi % groups * (size_t)s->samples + (size_t)k];
    }
    workload_group_traj(&s->gen, gi, k, v, buf, &s->arena);
    return buf;
}

/* ---- routing -------------------------------------------------------------------------- */

/* Whether t's prompt was seen finished in another group, only by its siblings, or never. */
static enum sched_split split_of(const struct sim *s, const struct sim_traj *t)
{
    uint64_t v, group = (uint64_t)s->groups.v[t->group].index;
    if (!intmap_get(&s->prompt_seen, (uint64_t)t->prompt, &v))
        return SCHED_SPLIT_NEVER;
    bool other = (v & 1) || (v >> 1) != group;
    return other ? SCHED_SPLIT_SEEN : SCHED_SPLIT_SIBLINGS;
}

/* Remembers that a trajectory of t's prompt finished (group index << 1 | seen in several). */
static void note_finished(struct sim *s, const struct sim_traj *t)
{
    uint64_t v, group = (uint64_t)s->groups.v[t->group].index;
    if (!intmap_get(&s->prompt_seen, (uint64_t)t->prompt, &v))
        intmap_put(&s->prompt_seen, (uint64_t)t->prompt, group << 1);
    else if ((v >> 1) != group)
        intmap_put(&s->prompt_seen, (uint64_t)t->prompt, group << 1 | 1);
}

/* Scores decision d of t (a rates-only run keeps no routing figures), counting t in its split
 * the first time one of its decisions falls there. */
static void score(struct sim *s, struct sim_traj *t, bool first, const struct sched_decision *d)
{
    if (!s->rmetrics)
        return;
    enum sched_split split = split_of(s, t);
    if (first)
        sched_metrics_add_traj(s->rmetrics, split);
    else if (!(t->splits & 1u << split))
        sched_metrics_add_traj_split(s->rmetrics, split);
    t->splits |= (uint8_t)(1u << split);
    struct sched_metric_point p = {
        .split = split,
        .first = first,
        .from_bucket = d->from_bucket,
        .chosen_bucket = d->to_bucket,
        .true_remaining_tokens = t->total_tokens - t->generated,
        .predicted_tokens = d->est.found && d->est.exact ? d->est.mean_tokens : NAN,
    };
    sched_metrics_add(s->rmetrics, &p);
}

/* The true remaining tokens, for the oracle policy only (observation parity). */
static int64_t oracle(const struct sim *s, const struct sim_traj *t)
{
    return s->lay->policy == SCHED_ORACLE ? t->total_tokens - t->generated : -1;
}

/* The router's choice, or, when it has no engine (the router falls back on any instance when
 * none is ready, and lent ones are not), the least-loaded instance that has one: a starting
 * instance holds the turn until it is ready. */
static int engine_for(const struct sim *s, int to)
{
    if (s->inst[to].eng)
        return to;
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].eng && (!s->inst[to].eng || s->inst[i].live < s->inst[to].live))
            to = i;
    return to;
}

static void place(struct sim *s, struct sim_traj *t, const struct sched_decision *d)
{
    int to = engine_for(s, (int)d->instance);
    if (t->inst >= 0 && to != t->inst) {
        s->out->moves++;
        if (s->trace.on) /* the event's arguments cost more than the move */
            sim_trace_instant(s, SIM_PID_TRAJECTORIES, t->uid, "move",
                              json_pack("{s:i,s:i,s:s}", "from", t->inst, "to", to, "reason",
                                        sched_reason_name(d->reason)));
    }
    t->inst = to;
    sim_submit(s, t);
}

/* t's first turn: the router's first decision. */
static void traj_start(struct sim *s, struct sim_traj *t)
{
    uint64_t id = t->uid;
    t->inst = -1;
    t->split_tokens = -1;
    t->version_start = t->version_end = s->rollout_version;
    struct sched_registry reg = sim_registry(s);
    struct sched_start ev = {.traj = id,
                             .prompt = (uint64_t)t->prompt,
                             .epoch = t->epoch,
                             .prompt_tokens = t->turns[0].prompt_tokens,
                             .true_remaining_tokens = oracle(s, t),
                             .now_s = s->now};
    struct sched_decision d;
    if (sched_router_start(s->router, &reg, &ev, &d) != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: the router refused trajectory %llu",
                 (unsigned long long)id);
        return;
    }
    score(s, t, true, &d);
    place(s, t, &d);
}

/* Launches t: its environment's setup first, when it has one, then its first turn. */
static void traj_launch(struct sim *s, struct sim_traj *t)
{
    t->start_s = s->now;
    s->out->started++;
    double timeout = s->cfg->rl.trajectory_timeout_s;
    if (timeout > 0)
        sim_schedule(s, s->now + timeout, SIM_EV_TIMEOUT, 0, sim_traj_ref(s, t));
    if (t->setup_s <= 0) {
        traj_start(s, t);
        return;
    }
    t->state = SIM_T_SETUP;
    t->tool_start_s = s->now;
    sim_schedule(s, s->now + t->setup_s, SIM_EV_SETUP, 0, sim_traj_ref(s, t));
}

void sim_setup_done(struct sim *s, uint64_t ref)
{
    struct sim_traj *t = sim_traj_deref(s, ref);
    if (!t || t->state != SIM_T_SETUP) /* aborted meanwhile */
        return;
    t->tool_s += s->now - t->tool_start_s;
    if (s->trace.on)
        sim_trace_slice(s, SIM_PID_TRAJECTORIES, t->uid, "setup", t->tool_start_s, s->now, NULL);
    traj_start(s, t);
}

/* A free group slot with its trajectory slots, the array grown when none is free. */
static uint32_t take_group_slot(struct sim *s)
{
    if (s->free_groups.n)
        return s->free_groups.v[--s->free_groups.n];
    uint32_t gi = (uint32_t)s->groups.n;
    vec_push(&s->groups, (struct sim_group){0});
    for (int k = 0; k < s->samples; k++)
        vec_push(&s->traj, (struct sim_traj){0});
    return gi;
}

uint32_t sim_launch_group(struct sim *s, int round)
{
    uint32_t gi = take_group_slot(s);
    int64_t index = s->launched++;
    struct sim_group *g = &s->groups.v[gi];
    *g = (struct sim_group){.index = index,
                            .first = gi * (uint32_t)s->samples,
                            .n = (uint32_t)s->samples,
                            .version = s->rollout_version,
                            .round = round};
    for (int k = 0; k < s->samples; k++) {
        struct trace_traj buf;
        const struct trace_traj *r = draw(s, index, k, s->rollout_version, &buf);
        struct sim_traj *t = &s->traj.v[g->first + (uint32_t)k];
        *t = (struct sim_traj){.uid = (uint64_t)(index * s->samples + k),
                               .use = t->use + 1,
                               .group = gi,
                               .sample = (uint32_t)k};
        copy_record(s, t, r);
    }
    arena_reset(&s->arena);
    uint32_t first = g->first;
    for (int k = 0; k < s->samples && !s->rc; k++)
        traj_launch(s, &s->traj.v[first + (uint32_t)k]);
    return gi;
}

void sim_group_release(struct sim *s, struct sim_group *g)
{
    vec_push(&s->free_groups, (uint32_t)(g - s->groups.v));
}

struct uid_slot {
    uint64_t uid;
    uint32_t slot;
};

static int by_uid(const void *a, const void *b)
{
    uint64_t x = ((const struct uid_slot *)a)->uid, y = ((const struct uid_slot *)b)->uid;
    return (x > y) - (x < y);
}

size_t sim_trajs_in(struct sim *s, enum sim_traj_state state, int inst, uint32_t **slots)
{
    VEC(struct uid_slot) found = {0};
    for (size_t k = 0; k < s->traj.n; k++) {
        const struct sim_traj *t = &s->traj.v[k];
        if (t->use && t->state == state && (inst < 0 || t->inst == inst))
            vec_push(&found, ((struct uid_slot){t->uid, (uint32_t)k}));
    }
    if (found.n)
        qsort(found.v, found.n, sizeof *found.v, by_uid);
    *slots = xmallocarray(found.n ? found.n : 1, sizeof **slots);
    for (size_t k = 0; k < found.n; k++)
        (*slots)[k] = found.v[k].slot;
    size_t n = found.n;
    vec_free(&found);
    return n;
}

/* ---- turns ---------------------------------------------------------------------------- */

/* Tokens of a finished request by policy version: an in-place update splits them. */
void sim_account_versions(struct sim *s, struct sim_traj *t, int64_t kept)
{
    int64_t now_v = s->inst[t->inst].version;
    int64_t before = t->split_tokens >= 0 ? t->split_tokens : kept;
    if (t->submit_version != t->version_start)
        s->out->offpolicy_tokens += before;
    if (now_v != t->version_start)
        s->out->offpolicy_tokens += kept - before;
    int64_t last = kept > before ? now_v : t->submit_version;
    if (last != t->version_start || t->submit_version != t->version_start)
        t->mixed = true;
    t->version_end = last;
}

static void group_complete(struct sim *s, struct sim_group *g)
{
    g->done_s = s->now;
    if (s->cfg->rl.dynamic_sampling != SPEC_DS_OFF && !g->aborted) {
        struct trace_traj *arr = xcalloc(g->n, sizeof *arr);
        for (uint32_t k = 0; k < g->n; k++) {
            const struct sim_traj *t = &s->traj.v[g->first + k];
            arr[k] = (struct trace_traj){.finish = t->finish, .reward = t->reward};
        }
        g->filtered = workload_group_filtered(s->cfg->rl.dynamic_sampling, arr, g->n);
        free(arr);
    }
    if (s->replan && !g->aborted)
        sim_replan_group(s, g);
    s->ops->group_done(s, g);
}

static void traj_end(struct sim *s, struct sim_traj *t, enum sched_finish how)
{
    uint64_t id = t->uid;
    if (!t->turns) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: trajectory %llu ended twice",
                 (unsigned long long)id);
        return;
    }
    t->end_s = s->now;
    free(t->turns);
    t->turns = NULL;
    t->calls = NULL;
    if (t->mixed)
        s->out->mixed_trajectories++;
    sched_router_finish(s->router, id, how, true);
    if (s->rmetrics)
        note_finished(s, t);
    struct sim_group *g = &s->groups.v[t->group];
    if (++g->done == g->n && !g->aborted)
        group_complete(s, g);
}

void sim_turn_done(struct sim *s, struct sim_traj *t, const struct engine_done *d)
{
    uint64_t id = t->uid;
    const struct sim_turn *u = &t->turns[t->turn];
    sim_account_versions(s, t, d->gen_tokens);
    t->generated += d->gen_tokens;
    int64_t got = t->turn_base + d->gen_tokens;
    if (got != u->gen_tokens) {
        sim_fail(s, LIBRA_EINTERNAL,
                 "internal: turn %u of trajectory %llu generated %lld tokens, %lld expected",
                 t->turn, (unsigned long long)id, (long long)got, (long long)u->gen_tokens);
        return;
    }
    if (s->trace.on) {
        char name[48];
        snprintf(name, sizeof name, "turn %u", t->turn + 1);
        sim_trace_slice(
            s, SIM_PID_TRAJECTORIES, id, name, t->turn_start_s, s->now,
            json_pack("{s:i,s:i,s:I,s:I,s:I}", "instance", t->inst, "tp", s->inst[t->inst].tp,
                      "prompt_tokens", (json_int_t)d->prompt_tokens, "cached_tokens",
                      (json_int_t)d->cached_tokens, "generated_tokens", (json_int_t)d->gen_tokens));
    }
    t->turn_base = 0;
    sched_router_turn_done(s->router, id, u->gen_tokens);
    if (++t->turn < t->n_turns) {
        sim_tools_start(s, t);
        return;
    }
    t->state = SIM_T_DONE;
    s->out->finished++;
    traj_end(s, t,
             t->finish == TRACE_FINISH_TRUNCATED ? SCHED_FINISH_TRUNCATED
             : t->finish == TRACE_FINISH_ABORTED ? SCHED_FINISH_ABORTED
                                                 : SCHED_FINISH_COMPLETED);
}

void sim_observe_call(const struct sched_obs_config *oc, const char *tool, int64_t payload_tokens,
                      enum trace_tool_status status, struct sched_obs *out)
{
    static const int sched_status[] = {
        [TRACE_TOOL_SUCCESS] = SCHED_SUCCESS,
        [TRACE_TOOL_FAILURE] = SCHED_FAILURE,
        [TRACE_TOOL_TIMEOUT] = SCHED_TIMEOUT,
        [TRACE_TOOL_OTHER] = SCHED_OTHER,
    };
    struct sched_tool_return r = {.tool = tool,
                                  .payload_tokens = payload_tokens,
                                  .payload_chars = -1,
                                  .status = sched_status[status],
                                  .reward = NAN,
                                  .correct = -1};
    sched_obs_classify(oc, &r, out);
}

void sim_tools_returned(struct sim *s, struct sim_traj *t)
{
    uint64_t id = t->uid;
    const struct sim_turn *prev = &t->turns[t->turn - 1];
    t->tool_s += s->now - t->tool_start_s;
    if (s->trace.on)
        sim_trace_slice(s, SIM_PID_TRAJECTORIES, id, "tools", t->tool_start_s, s->now,
                        json_pack("{s:s,s:i}", "tool", s->pools[t->calls[prev->call].pool].name,
                                  "calls", (int)prev->n_calls));
    if (prev->n_calls == 0) {
        sim_reroute(s, t);
        return;
    }
    struct sched_obs obs_buf[8],
        *obs = prev->n_calls <= 8 ? obs_buf : xcalloc(prev->n_calls, sizeof *obs);
    for (uint32_t k = 0; k < prev->n_calls; k++) {
        const struct sim_call *c = &t->calls[prev->call + k];
        sim_observe_call(&s->oc, s->pools[c->pool].name, c->payload_tokens, c->status, &obs[k]);
    }
    struct sched_registry reg = sim_registry(s);
    struct sched_return ev = {.traj = id,
                              .obs = obs,
                              .n_obs = prev->n_calls,
                              .context_tokens = t->turns[t->turn].prompt_tokens,
                              .true_remaining_tokens = oracle(s, t),
                              .sibling_mean_tokens = NAN,
                              .now_s = s->now};
    struct sched_decision d;
    int rc = sched_router_tool_return(s->router, &reg, &ev, &d);
    if (obs != obs_buf)
        free(obs);
    if (rc != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: the router lost trajectory %llu",
                 (unsigned long long)id);
        return;
    }
    score(s, t, false, &d);
    place(s, t, &d);
}

void sim_traj_suspend(struct sim *s, struct sim_traj *t)
{
    int64_t kept = sim_abort_request(s, t);
    sim_account_versions(s, t, kept);
    t->generated += kept;
    t->turn_base += kept;
    s->out->resumed++;
}

void sim_reroute(struct sim *s, struct sim_traj *t)
{
    uint64_t id = t->uid;
    struct sched_registry reg = sim_registry(s);
    struct sched_decision d;
    if (sched_router_progress(s->router, &reg, id, t->turn_base, &d) != 0) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: the router lost trajectory %llu",
                 (unsigned long long)id);
        return;
    }
    place(s, t, &d);
}

void sim_traj_abort(struct sim *s, struct sim_traj *t, enum sim_waste why)
{
    if (t->state == SIM_T_DONE || t->state == SIM_T_ABORTED)
        return;
    bool live = t->state == SIM_T_GEN;
    int64_t kept = sim_abort_request(s, t);
    if (live)
        sim_account_versions(s, t, kept);
    t->generated += kept;
    s->out->waste[why] += t->generated;
    t->accounted = true;
    t->state = SIM_T_ABORTED;
    s->out->aborted++;
    traj_end(s, t, SCHED_FINISH_ABORTED);
}

void sim_traj_timeout(struct sim *s, uint64_t ref)
{
    struct sim_traj *t = sim_traj_deref(s, ref);
    if (!t || t->state == SIM_T_DONE || t->state == SIM_T_ABORTED || s->groups.v[t->group].aborted)
        return;
    /* as the trainer and dynamic sampling see it: stopped, no reward (set before the abort,
     * which may complete the group) */
    t->finish = TRACE_FINISH_ABORTED;
    t->reward = 0;
    s->out->timed_out++;
    sim_traj_abort(s, t, SIM_WASTE_ABORTED);
}

void sim_group_abort(struct sim *s, struct sim_group *g, enum sim_waste why)
{
    g->aborted = true;
    for (uint32_t k = 0; k < g->n && !s->rc; k++) {
        struct sim_traj *t = &s->traj.v[g->first + k];
        if (t->state == SIM_T_DONE && !t->accounted) {
            s->out->waste[why] += t->generated;
            t->accounted = true;
        } else {
            sim_traj_abort(s, t, why);
        }
    }
    sim_group_release(s, g);
}
