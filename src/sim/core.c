/*
 * The simulator's core: one run's setup, the event loop, the instances and their requests.
 *
 * Each instance is an engine (engine/engine.h) advanced by the simulated clock. An engine
 * answers "when do you next have something to do"; that answer changes whenever a request is
 * sent to it or taken from it, so an instance that changed is marked dirty and asked again
 * only once the clock is about to move past the current instant: every request sent at one
 * instant is in the engine before it composes the iteration that starts then (engine.h), and
 * stale events of an instance are recognised by a generation counter instead of being
 * removed from the heap. Events at one time run in the order they were scheduled (the heap
 * compares (time, sequence number)), so a run is a deterministic function of its inputs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"
#include "util/error.h"

static int event_cmp(const void *a, const void *b, void *ctx)
{
    const struct sim_event *x = a, *y = b;
    (void)ctx;
    if (x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

void sim_schedule(struct sim *s, double t_s, enum sim_ev_kind kind, uint32_t gen, uint64_t arg)
{
    struct sim_event e = {t_s < s->now ? s->now : t_s, s->seq++, (uint32_t)kind, gen, arg};
    heap_push(&s->events, &e);
}

int sim_fail(struct sim *s, int rc, const char *fmt, ...)
{
    if (s->rc)
        return s->rc;
    s->rc = rc;
    if (s->err) {
        va_list ap;
        va_start(ap, fmt);
        memset(s->err, 0, sizeof *s->err);
        vsnprintf(s->err->msg, sizeof s->err->msg, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static void mark_dirty(struct sim *s, int i)
{
    if (!s->inst[i].dirty) {
        s->inst[i].dirty = true;
        vec_push(&s->dirty, i);
    }
}

/* ---- requests ------------------------------------------------------------------------- */

/*
 * The leading tokens of t's current prompt that the previous request's context shares (what
 * the engine may serve from its cache), and in *in_kv how many of them that request left in
 * KV: all but its last sampled token, which was never fed back. Tokens beyond *in_kv are new
 * work, not a re-prefill.
 */
static int64_t reusable_prefix(const struct sim *s, const struct sim_traj *t, int64_t prompt,
                               int64_t *in_kv)
{
    int64_t r = 0, ctx = 0;
    if (t->turn_base) { /* a resumed turn: its own prompt and partial output */
        r = ctx = prompt;
    } else if (t->turn > 0) {
        const struct sim_turn *p = &t->turns[t->turn - 1];
        ctx = p->prompt_tokens + p->gen_tokens;
        r = s->chat ? p->prompt_tokens : ctx;
    }
    r = r < prompt ? r : prompt;
    *in_kv = r < ctx - 1 ? r : ctx > 0 ? ctx - 1 : 0;
    return r;
}

void sim_submit(struct sim *s, struct sim_traj *t)
{
    if (s->hold) {
        t->state = SIM_T_HELD;
        vec_push(&s->held, sim_traj_ref(s, t));
        return;
    }
    struct sim_inst *in = &s->inst[t->inst];
    if (!in->eng) {
        sim_fail(s, LIBRA_EINVAL,
                 "every rollout instance has failed or is lent: no instance left for "
                 "the remaining turns");
        return;
    }
    const struct sim_turn *u = &t->turns[t->turn];
    int64_t prompt = u->prompt_tokens + t->turn_base, in_kv;
    struct engine_request r = {.id = ++s->next_req,
                               .tag = (uint64_t)(t - s->traj.v),
                               .prefix_key = t->uid + 1,
                               .prompt_tokens = prompt,
                               .reusable_prefix_tokens = reusable_prefix(s, t, prompt, &in_kv),
                               .gen_tokens = u->gen_tokens - t->turn_base,
                               .attained_service = (double)t->generated};
    if (engine_submit(in->eng, s->now, &r) != 0) {
        sim_fail(s, LIBRA_EINVAL,
                 "a turn of %lld prompt and %lld generated tokens does not fit rollout instance "
                 "%d (TP%d holds %lld tokens of KV): the workload's context is too long for it",
                 (long long)r.prompt_tokens, (long long)r.gen_tokens, t->inst, in->tp,
                 (long long)s->pre[spec_tp_index(in->tp)].kv_capacity_tokens);
        return;
    }
    t->state = SIM_T_GEN;
    t->req = r.id;
    t->reusable = in_kv;
    t->submit_version = in->version;
    t->split_tokens = -1;
    t->turn_start_s = s->now;
    in->live++;
    s->live_requests++;
    s->reg[t->inst].queued++;
    s->out->requests++;
    s->out->requests_by_instance[t->inst]++;
    mark_dirty(s, t->inst);
}

/* Counts a request's prefill work as waste (prompt, re-prefill, preemption recompute). */
static void account_prefill(struct sim *s, const struct sim_traj *t, const struct engine_done *d)
{
    int64_t computed = d->prefill_tokens - d->recompute_tokens;
    int64_t fresh = d->prompt_tokens - t->reusable;
    int64_t prompt = computed < fresh ? computed : fresh;
    s->out->waste[SIM_WASTE_PROMPT] += prompt;
    s->out->waste[SIM_WASTE_REPREFILL] += computed - prompt;
    s->out->waste[SIM_WASTE_PREEMPT] += d->recompute_tokens;
    s->out->cached_tokens += d->cached_tokens;
    s->out->preemptions += d->preemptions;
    s->out->generated_tokens += d->gen_tokens;
    s->inst[t->inst].gen_tokens += d->gen_tokens;
}

/* A request left instance i (finished or aborted). The router's view loses it at once, as a
 * gateway's does when the answer arrives; the engine's exact counts replace the view when the
 * event is done (flush_dirty). */
static void request_gone(struct sim *s, int i)
{
    s->inst[i].live--;
    s->live_requests--;
    struct sched_instance *r = &s->reg[i];
    if (r->running > 0)
        r->running--;
    else if (r->queued > 0)
        r->queued--;
    mark_dirty(s, i);
}

/* A finished request whose report is still waiting in s->done (its engine is being
 * advanced): takes the report (id 0 marks it taken). */
static bool take_pending(struct sim *s, uint64_t req, struct engine_done *out)
{
    for (size_t k = 0; k < s->done.n; k++)
        if (s->done.v[k].id == req) {
            *out = s->done.v[k];
            s->done.v[k].id = 0;
            return true;
        }
    return false;
}

int64_t sim_abort_request(struct sim *s, struct sim_traj *t)
{
    if (t->state != SIM_T_GEN)
        return 0;
    struct sim_inst *in = &s->inst[t->inst];
    struct engine_done d;
    if (engine_abort(in->eng, s->now, t->req, &d) != 0 && !take_pending(s, t->req, &d)) {
        sim_fail(s, LIBRA_EINTERNAL, "internal: request %llu of trajectory %llu is not live",
                 (unsigned long long)t->req, (unsigned long long)t->uid);
        return 0;
    }
    account_prefill(s, t, &d);
    request_gone(s, t->inst);
    t->state = SIM_T_HELD; /* the caller decides what follows */
    /* A drain may be waiting for this very request: an instance failing or a group aborted
     * during the update can take the last live request without a completion to report it. */
    sim_sync_poll(s);
    return d.gen_tokens;
}

/* ---- the fleet ------------------------------------------------------------------------ */

void sim_fleet_update(struct sim *s, int64_t version)
{
    for (int i = 0; i < s->n_inst; i++) {
        struct sim_inst *in = &s->inst[i];
        if (!in->eng)
            continue;
        engine_flush_cache(in->eng, s->now);
        in->version = version;
        s->out->cache_flushes++;
        mark_dirty(s, i);
    }
    s->rollout_version = version;
}

void sim_fleet_ready(struct sim *s, bool ready)
{
    s->fleet_paused = !ready;
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].state == SIM_INST_SERVING) {
            engine_set_ready(s->inst[i].eng, s->now, ready);
            mark_dirty(s, i);
        }
}

/* Every engine has composed what runs up to now: an instance changed at now has its clock at
 * now, and any other was asked for its next event, which is not before now. */
double sim_inst_busy_s(struct sim *s, int i)
{
    const struct sim_inst *in = &s->inst[i];
    double busy = 0;
    if (!in->eng)
        return in->busy_prev_s;
    if (engine_busy_at(in->eng, s->now, &busy) != 0)
        sim_fail(s, LIBRA_EINTERNAL, "internal: instance %d cannot say its busy time at %.6f s", i,
                 s->now);
    return in->busy_prev_s + busy;
}

double sim_fleet_busy_gpu_s(struct sim *s)
{
    double busy = 0;
    for (int i = 0; i < s->n_inst; i++)
        busy += sim_inst_busy_s(s, i) * s->inst[i].tp;
    return busy;
}

void sim_measure_begin(struct sim *s)
{
    s->measure_from_s = s->now;
    s->train_busy_s = 0;
    s->measure_busy_gpu_s = sim_fleet_busy_gpu_s(s);
    sim_avail_restart(s, &s->measure_avail);
}

/* ---- a fleet that grows and shrinks ----------------------------------------------------- */

/* With no change in a window this is Σ TP × (now − start), the same product as before the
 * fleet could change, so a fixed fleet's figures keep every bit. */
double sim_avail_gpu_s(const struct sim *s, const struct sim_gpu_window *w)
{
    return w->acc_gpu_s + s->rollout_gpus * (s->now - w->mark_s);
}

void sim_avail_restart(const struct sim *s, struct sim_gpu_window *w)
{
    *w = (struct sim_gpu_window){0, s->now};
}

/* The rollout fleet gains (or loses) delta GPUs now. */
static void rollout_gpus_change(struct sim *s, int delta)
{
    struct sim_gpu_window *w[] = {&s->step_avail, &s->measure_avail};
    for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
        w[k]->acc_gpu_s = sim_avail_gpu_s(s, w[k]);
        w[k]->mark_s = s->now;
    }
    s->rollout_gpus += delta;
}

/* Instance i's engine, new; it is counted busy from now on (its earlier engines' busy time
 * stays in busy_prev_s). */
static int inst_engine(struct sim *s, int i)
{
    struct sim_inst *in = &s->inst[i];
    const struct cost_rollout_pre *pre = &s->pre[spec_tp_index(in->tp)];
    struct engine_config c;
    engine_config_default(&c, pre);
    c.max_seqs = s->st.max_seqs;
    c.max_batched_tokens = (int64_t)s->st.chunk_tokens;
    c.prefix_cache = s->cfg->sim.prefix_cache; /* max_batched_tokens >= max_seqs: config */
    if (pre->tp != in->tp) /* cost_rollout_pre_init refused the TP: it splits heads evenly */
        return sim_fail(s, LIBRA_EINVAL,
                        "model %s does not take a TP%d rollout instance: TP %d does not divide "
                        "its %.0f attention heads",
                        s->in->model->name, in->tp, in->tp, s->shape.heads);
    if (pre->kv_capacity_tokens < 1 || engine_new(&in->eng, &c) != 0)
        return sim_fail(s, LIBRA_EINVAL,
                        "model %s does not fit a TP%d rollout instance on %s (no KV left after "
                        "the weights)",
                        s->in->model->name, in->tp, s->in->hw->name);
    return 0;
}

/* Instance i's engine stops for good (failed) or until it returns (lent): its busy time is
 * kept and the router stops sending it turns. */
static void inst_stop(struct sim *s, int i, enum sim_inst_state to)
{
    struct sim_inst *in = &s->inst[i];
    in->busy_prev_s = sim_inst_busy_s(s, i);
    engine_free(in->eng);
    in->eng = NULL;
    in->state = to;
    s->reg[i].ready = false;
}

/* Takes instance i out of rollout into state `to`: its live turns resume elsewhere with their
 * output kept. */
static void take_out(struct sim *s, int i, enum sim_inst_state to, const char *why)
{
    struct sim_inst *in = &s->inst[i];
    if (!in->eng)
        return;
    uint32_t *hit;
    size_t n = sim_trajs_in(s, SIM_T_GEN, i, &hit);
    for (size_t k = 0; k < n; k++)
        sim_traj_suspend(s, &s->traj.v[hit[k]]);
    inst_stop(s, i, to);
    rollout_gpus_change(s, -in->tp);
    sim_trace_instant(s, SIM_PID_INSTANCES, (uint64_t)i, why, NULL);
    for (size_t k = 0; k < n && !s->rc; k++)
        sim_reroute(s, &s->traj.v[hit[k]]);
    free(hit);
}

void sim_inst_lend(struct sim *s, int i)
{
    take_out(s, i, SIM_INST_LENT, "instance lent");
}

void sim_inst_retire(struct sim *s, int i)
{
    take_out(s, i, SIM_INST_RETIRED, "instance retired");
}

/* Instance i, new or lent, starts: STARTING until ready_in_s from now, with the fleet's
 * weights; its GPUs count as rollout GPUs at once. */
static void inst_start(struct sim *s, int i, double ready_in_s)
{
    struct sim_inst *in = &s->inst[i];
    engine_set_ready(in->eng, s->now, false);
    in->state = SIM_INST_STARTING;
    in->version = s->rollout_version; /* it loads the newest checkpoint */
    in->epoch++;
    rollout_gpus_change(s, in->tp);
    mark_dirty(s, i);
    sim_trace_instant(s, SIM_PID_INSTANCES, (uint64_t)i, "instance starting", NULL);
    sim_schedule(s, s->now + ready_in_s, SIM_EV_READY, in->epoch, (uint64_t)i);
}

int sim_inst_add(struct sim *s, int tp, int gpu, int bucket, double ready_in_s)
{
    int i = s->n_inst;
    s->inst = xreallocarray(s->inst, (size_t)i + 1, sizeof *s->inst);
    s->reg = xreallocarray(s->reg, (size_t)i + 1, sizeof *s->reg);
    s->out->requests_by_instance = xreallocarray(s->out->requests_by_instance, (size_t)i + 1,
                                                 sizeof *s->out->requests_by_instance);
    s->inst[i] = (struct sim_inst){.tp = tp, .bucket = bucket, .gpu = gpu, .last_count = -1};
    s->reg[i] = (struct sched_instance){
        .id = i, .tp = tp, .bucket = bucket, .cap = s->cfg->sim.queue_cap, .ready = false};
    s->out->requests_by_instance[i] = 0;
    s->n_inst = s->out->n_instances = i + 1;
    sim_timeline_grow(s);
    if (inst_engine(s, i) != 0)
        return -1;
    inst_start(s, i, ready_in_s);
    return i;
}

void sim_inst_return(struct sim *s, int i, double ready_in_s)
{
    if (s->inst[i].state != SIM_INST_LENT || inst_engine(s, i) != 0)
        return;
    inst_start(s, i, ready_in_s);
}

double sim_queue_pressure(const struct sim *s)
{
    double waiting = 0, cap = 0;
    for (int i = 0; i < s->n_inst; i++)
        if (s->inst[i].state == SIM_INST_SERVING) {
            waiting += s->reg[i].queued;
            cap += s->reg[i].cap;
        }
    return cap > 0 ? waiting / cap : 0;
}

double sim_active_pressure(const struct sim *s)
{
    double live = 0;
    for (size_t k = 0; k < s->traj.n; k++)
        live += sim_traj_in_flight(&s->traj.v[k]);
    return live / ((double)(s->staleness + 1) * s->batch);
}

/* Instance i's start ended (epoch: which start): it serves, unless the fleet is paused for an
 * update, whose end resumes it with the others. */
static void on_ready(struct sim *s, int i, uint32_t epoch)
{
    struct sim_inst *in = &s->inst[i];
    if (in->state != SIM_INST_STARTING || in->epoch != epoch)
        return;
    in->state = SIM_INST_SERVING;
    s->reg[i].ready = true;
    if (!s->fleet_paused)
        engine_set_ready(in->eng, s->now, true);
    mark_dirty(s, i);
    sim_trace_instant(s, SIM_PID_INSTANCES, (uint64_t)i, "instance ready", NULL);
}

/* A scripted change (sim_run_opts.fleet[k]). */
static void on_fleet(struct sim *s, size_t k)
{
    const struct sim_fleet_change *c = &s->opts->fleet[k];
    if (c->op == SIM_FLEET_LEND)
        sim_inst_lend(s, c->instance);
    else
        sim_inst_return(s, c->instance, cost_cold_start_s(&s->st.lifecycle, &s->shape));
}

/* ---- events --------------------------------------------------------------------------- */

static void collect_done(void *ctx, const struct engine_done *d)
{
    struct sim *s = ctx;
    vec_push(&s->done, *d);
}

static void on_engine(struct sim *s, int i)
{
    struct sim_inst *in = &s->inst[i];
    s->done.n = 0;
    engine_advance(in->eng, s->now, collect_done, s);
    mark_dirty(s, i);
    size_t n = s->done.n;
    for (size_t k = 0; k < s->done.n && !s->rc; k++) {
        struct engine_done d = s->done.v[k];
        if (d.id == 0) /* taken by an abort while an earlier report was handled */
            continue;
        struct sim_traj *t = &s->traj.v[d.tag];
        account_prefill(s, t, &d);
        request_gone(s, i);
        sim_turn_done(s, t, &d);
    }
    s->done.n = 0;
    if (n)
        sim_sync_poll(s);
}

/* Asks every changed instance for its next event and refreshes the router's view. */
static void flush_dirty(struct sim *s)
{
    for (size_t k = 0; k < s->dirty.n; k++) {
        int i = s->dirty.v[k];
        struct sim_inst *in = &s->inst[i];
        in->dirty = false;
        if (!in->eng)
            continue;
        double t = engine_next_event_s(in->eng);
        struct engine_stats st;
        engine_stats(in->eng, &st);
        s->reg[i].queued = (int)st.waiting;
        s->reg[i].running = (int)st.running;
        int64_t held = st.running + st.waiting;
        if (held < in->live) /* aborted ones stay until their iteration ends */
            sim_fail(s, LIBRA_EINTERNAL,
                     "internal: instance %d holds %lld requests, the simulator sent %d", i,
                     (long long)held, in->live);
        if (isfinite(t)) /* in the events' order: as sim_schedule would number it */
            heap_indexed_set(&s->engine_events, (uint32_t)i, t < s->now ? s->now : t,
                             (int64_t)s->seq++);
        else
            heap_indexed_remove(&s->engine_events, (uint32_t)i);
        sim_trace_instance(s, i);
    }
    s->dirty.n = 0;
}

/* Failure injection: instance i dies; its turns are sent again elsewhere (their output is
 * lost). On a lent instance's GPUs it is the hybrid replica's member that fails: the pool
 * rolls the replica back to rollout (training does not wait for it). */
static void on_fail(struct sim *s, int i)
{
    struct sim_inst *in = &s->inst[i];
    sim_elastic_member_failed(s, i); /* lent or serving, a hybrid replica's is lost */
    if (!in->eng)
        return;
    uint32_t *hit;
    size_t n = sim_trajs_in(s, SIM_T_GEN, i, &hit);
    for (size_t k = 0; k < n; k++) {
        int64_t lost = sim_abort_request(s, &s->traj.v[hit[k]]);
        s->out->waste[SIM_WASTE_FAILURE] += lost;
        s->out->failed_turns++;
    }
    inst_stop(s, i, SIM_INST_FAILED);
    s->failed_gpus += in->tp;
    sim_trace_instant(s, SIM_PID_INSTANCES, (uint64_t)i, "instance failed", NULL);
    for (size_t k = 0; k < n && !s->rc; k++)
        sim_reroute(s, &s->traj.v[hit[k]]);
    free(hit);
}

static void dispatch(struct sim *s, const struct sim_event *e)
{
    switch ((enum sim_ev_kind)e->kind) {
    case SIM_EV_TOOL:
        sim_tool_done(s, e->arg, e->gen);
        break;
    case SIM_EV_MODE:
        s->ops->timer(s, e->arg);
        break;
    case SIM_EV_SYNC:
        sim_sync_event(s, e->arg);
        break;
    case SIM_EV_FAIL:
        on_fail(s, (int)e->arg);
        break;
    case SIM_EV_READY:
        on_ready(s, (int)e->arg, e->gen);
        break;
    case SIM_EV_FLEET:
        on_fleet(s, (size_t)e->arg);
        break;
    case SIM_EV_POOL:
        sim_elastic_event(s, e->gen, e->arg);
        break;
    case SIM_EV_SETUP:
        sim_setup_done(s, e->arg);
        break;
    case SIM_EV_TIMEOUT:
        sim_traj_timeout(s, e->arg);
        break;
    }
}

/* Whether the next engine event eng runs before the next other event top (either may be
 * NULL): by time, then by sequence, one order over both. */
static bool engine_first(const struct heap_entry *eng, const struct sim_event *top)
{
    return eng &&
           (!top || eng->k1 < top->t_s || (eng->k1 == top->t_s && (uint64_t)eng->k2 < top->seq));
}

static void loop(struct sim *s)
{
    while (!s->finished && !s->rc) {
        const struct sim_event *top = heap_peek(&s->events);
        const struct heap_entry *eng = heap_indexed_top(&s->engine_events);
        bool engine = engine_first(eng, top);
        if (s->dirty.n && (engine ? eng->k1 : top ? top->t_s : INFINITY) > s->now) {
            flush_dirty(s);
            continue;
        }
        if (engine) {
            int i = (int)eng->id;
            double t = eng->k1;
            heap_indexed_remove(&s->engine_events, (uint32_t)i);
            if (s->inst[i].eng) { /* an engine stopped since keeps its event: skip it */
                s->now = t;
                on_engine(s, i);
            }
            continue;
        }
        if (!top)
            break;
        struct sim_event e;
        heap_pop(&s->events, &e);
        s->now = e.t_s;
        dispatch(s, &e);
    }
    if (!s->finished && !s->rc)
        sim_fail(s, LIBRA_EINTERNAL,
                 "internal: the run stalled at %.3f s after %d of %d steps with nothing to do",
                 s->now, (int)s->version, s->opts->steps);
}

/* ---- setup ---------------------------------------------------------------------------- */

int sim_input_check(const struct sim_input *in, struct libra_error *err)
{
    size_t samples = (size_t)in->cfg->rl.samples;
    int64_t group = in->trace ? in->trace->group_size : 0;
    int64_t most = (int64_t)spec_config_field("rl.samples")->max;
    if (group > most)
        return error_set(err, in->cfg->workload.trace, 1, 1,
                         "the trace's GRPO groups are %lld trajectories (its header's group_size), "
                         "more than rl.samples can be (%lld): its groups cannot be trained",
                         (long long)group, (long long)most);
    if (group > 0 && group != in->cfg->rl.samples) /* its groups would be cut across prompts */
        return error_set(err, in->cfg->workload.trace, 1, 1,
                         "the trace's GRPO groups are %lld trajectories (its header's group_size), "
                         "not rl.samples = %zu: set rl.samples to %lld",
                         (long long)group, samples, (long long)group);
    if (in->cfg->rl.batch_trajectories % in->cfg->rl.samples != 0) /* a caller's config */
        return error_set(err, NULL, 0, 0,
                         "rl.batch_trajectories %d is not a multiple of rl.samples (%d): "
                         "training takes whole groups",
                         in->cfg->rl.batch_trajectories, in->cfg->rl.samples);
    if (in->trace && in->trace->n < samples)
        return error_set(err, NULL, 0, 0,
                         "the trace holds %zu trajector%s, fewer than one group of rl.samples = "
                         "%zu",
                         in->trace->n, in->trace->n == 1 ? "y" : "ies", samples);
    if (!in->trace && !in->workload)
        return error_set(err, NULL, 0, 0, "workload.name: no workload preset '%s' to generate from",
                         in->cfg->workload.name);
    char why[256];
    if (in->trace && workload_trace_never_fills(in->cfg->rl.dynamic_sampling, in->trace->trajs,
                                                in->trace->n, samples, why, sizeof why))
        return error_set(err, NULL, 0, 0, "%s", why);
    return 0;
}

static int check_settings(struct sim *s)
{
    const struct spec_rl_config *rl = &s->cfg->rl;
    struct libra_error e = {0};
    if (sim_mode_desc(s->lay->mode)->streams &&
        spec_rl_async_check(rl, sim_mode_name(s->lay->mode), &e) != 0)
        return sim_fail(s, LIBRA_EINVAL, "%s", e.msg);
    if (s->lay->n_inst < 1)
        return sim_fail(s, LIBRA_EINVAL, "the %s layout has no rollout instance",
                        sim_mode_name(s->lay->mode));
    const struct sim_run_opts *o = s->opts;
    if (o->timeline && !(o->timeline_first >= 0 && o->timeline_first <= o->timeline_last &&
                         o->timeline_last < o->steps))
        return sim_fail(s, LIBRA_EINVAL, "timeline steps %lld:%lld are not within the %d steps run",
                        (long long)o->timeline_first, (long long)o->timeline_last, o->steps);
    return 0;
}

static int setup_instances(struct sim *s)
{
    const struct libra_config *cfg = s->cfg;
    s->n_inst = s->lay->n_inst;
    s->inst = xcalloc((size_t)s->n_inst, sizeof *s->inst);
    s->out->requests_by_instance = xcalloc((size_t)s->n_inst, sizeof *s->out->requests_by_instance);
    s->out->n_instances = s->n_inst;
    s->reg = xcalloc((size_t)s->n_inst, sizeof *s->reg);
    for (int k = 0; k < PLAN_NTP; k++)
        cost_rollout_pre_init(&s->pre[k], &s->shape, s->in->hw, &s->st.rollout, 1 << k);
    for (int i = 0; i < s->n_inst; i++) {
        const struct sim_instance_spec *sp = &s->lay->inst[i];
        s->inst[i].tp = sp->tp;
        if (inst_engine(s, i) != 0)
            return s->rc;
        s->rollout_gpus += sp->tp;
        s->inst[i].bucket = sp->bucket;
        s->inst[i].gpu = sp->gpu;
        s->inst[i].hybrid = sp->hybrid;
        s->inst[i].last_count = -1;
        s->reg[i] = (struct sched_instance){
            .id = i, .tp = sp->tp, .bucket = sp->bucket, .cap = cfg->sim.queue_cap, .ready = true};
    }
    return 0;
}

/* The router of the layout's policy over its buckets, with cache-aware moves and cmlfq_h's
 * decision costs on the fleet's own rollout model (cost/move.h). The deadline starts at the
 * planner's predicted step and follows the simulated ones (sim_trainer's step end). */
static int setup_router(struct sim *s)
{
    memcpy(s->move.pre, s->pre, sizeof s->move.pre);
    s->move.chunk_tokens = s->st.chunk_tokens;
    s->move.max_seqs = s->st.max_seqs;
    struct sched_costs costs = {
        .decode_s = cost_move_decode_s,
        .move_s = cost_move_s,
        .ctx = &s->move,
        .decision = {.rate = cost_move_rate,
                     .ctx = &s->move,
                     .deadline_s = s->lay->planned
                                       ? (s->cfg->rl.max_staleness + 1) * s->lay->pred_step_s
                                       : 0.0,
                     .late_gpus = s->cfg->cluster.gpus,
                     .live = true}};
    struct spec_sched_config sc = s->cfg->sched;
    sc.policy = s->lay->policy; /* a homogeneous fleet's load_balance */
    /* Every policy chooses the one bucket of a one-bucket layout, and load_balance places as
     * they do then, so a run that scores no decisions and keeps its buckets (no hybrids, no
     * replans) routes alike without a model to learn (most of a candidate's cost). */
    if (s->opts->rates_only && s->lay->buckets.n == 1 && !s->lay->n_hybrid && !sim_replans(s))
        sc.policy = SCHED_LOAD_BALANCE;
    s->rmetrics = s->opts->rates_only ? NULL : sched_metrics_new(&s->lay->buckets);
    struct libra_error e = {0};
    if (sched_router_from_config(&s->router, &sc, &s->lay->buckets, &costs, &e) != 0)
        return sim_fail(s, LIBRA_EINVAL, "router: %s", e.msg);
    return 0;
}

static int setup(struct sim *s)
{
    const struct libra_config *cfg = s->cfg;
    if (sim_input_check(s->in, s->err) != 0)
        return s->rc = LIBRA_EINVAL;
    s->batch = cfg->rl.batch_trajectories;
    s->samples = cfg->rl.samples;
    s->groups_per_batch = s->batch / s->samples;
    s->staleness = cfg->rl.max_staleness;
    job_rules_from_config(&s->job, cfg);
    s->chat = cfg->sim.context_mode == SPEC_CONTEXT_CHAT;
    heap_init(&s->events, sizeof(struct sim_event), event_cmp, NULL);
    if (check_settings(s))
        return s->rc;
    if (cost_shape_init(&s->shape, s->in->model) != 0)
        return sim_fail(s, LIBRA_EINVAL, "model %s: the cost model rejects its shape",
                        s->in->model->name);
    plan_settings_from_config(&s->st, s->in->hw, cfg);
    s->out->staleness_n = s->staleness + 2;
    s->out->staleness = xcalloc((size_t)s->out->staleness_n, sizeof *s->out->staleness);
    s->out->tokens_hist.lo = s->batch_tokens.lo = 1;        /* tokens */
    s->out->duration_hist.lo = s->batch_duration.lo = 0.01; /* seconds */
    if (setup_instances(s) || setup_router(s) || (s->lay->n_hybrid && sim_elastic_init(s)))
        return s->rc;
    if (sim_replans(s))
        sim_replan_init(s);
    sim_source_init(s);
    if (s->rc)
        return s->rc;
    s->ops = sim_mode_desc(s->lay->mode)->ops;
    for (size_t k = 0; k < s->opts->n_fleet; k++) {
        const struct sim_fleet_change *c = &s->opts->fleet[k];
        if (c->instance < 0 || c->instance >= s->n_inst)
            return sim_fail(s, LIBRA_EINVAL, "fleet change %zu: no instance %d (the layout has %d)",
                            k, c->instance, s->n_inst);
        sim_schedule(s, c->at_s, SIM_EV_FLEET, 0, k);
    }
    if (cfg->sim.fail_time_s >= 0)
        sim_schedule(s, cfg->sim.fail_time_s, SIM_EV_FAIL, 0,
                     (uint64_t)(cfg->sim.fail_instance % s->n_inst));
    sim_trace_init(s);
    return 0;
}

static void teardown(struct sim *s)
{
    for (int i = 0; i < s->n_inst; i++)
        engine_free(s->inst[i].eng);
    free(s->inst);
    free(s->reg);
    heap_free(&s->events);
    heap_indexed_free(&s->engine_events);
    vec_free(&s->dirty);
    vec_free(&s->done);
    vec_free(&s->held);
    sim_source_free(s);
    sim_elastic_free(s);
    sim_replan_free(s);
    vec_free(&s->replans);
    sched_router_free(s->router);
    sched_metrics_free(s->rmetrics);
    cost_train_seqs_free(&s->seqs);
    cost_train_scratch_free(&s->scratch);
    vec_free(&s->lens);
    vec_free(&s->ends);
    vec_free(&s->steps);
    if (s->ops)
        s->ops->release(s);
    free(s->mode);
    sim_trace_release(s);
}

/* A run whose measured steps trained nothing is an error naming the key that made it so, not a
 * table of zeros (its figures are the measured steps'; warm-up steps may have trained). A step
 * trains every group it takes but the trajectories masked by the timeout and the groups dynamic
 * sampling dropped (a synchronous step's rounds end at rl.max_gen_batches; the async modes stop
 * sooner), so those two keys are the only ways to train nothing. */
static void check_something_trained(struct sim *s)
{
    const struct sim_result *o = s->out;
    int64_t trained = 0;
    for (size_t i = 0; i < s->steps.n; i++)
        if (s->steps.v[i].step >= s->opts->warmup)
            trained += s->steps.v[i].trained_tokens;
    if (trained > 0)
        return;
    if (o->timed_out == 0) {
        sim_fail(s, LIBRA_EINVAL,
                 "rl.dynamic_sampling %s dropped every group the run generated: their rewards "
                 "are all equal (a workload whose reward never varies), so nothing trained",
                 spec_dynamic_sampling_names[s->cfg->rl.dynamic_sampling]);
        return;
    }
    char stopped[160];
    if (o->finished == 0)
        snprintf(stopped, sizeof stopped, "every trajectory the run started (%lld): none finished",
                 (long long)o->started);
    else
        snprintf(stopped, sizeof stopped,
                 "%lld of the %lld trajectories the run started: the steps measured (after "
                 "sim.warmup_steps) took none that finished",
                 (long long)o->timed_out, (long long)o->started);
    sim_fail(s, LIBRA_EINVAL,
             "rl.trajectory_timeout_s %g s stopped %s, so nothing trained; the limit must exceed "
             "the workload's trajectories (run.trajectory_lengths.duration_s of libra sim --json "
             "without it)",
             s->cfg->rl.trajectory_timeout_s, stopped);
}

int sim_run(const struct sim_input *in, const struct sim_layout *l, const struct sim_run_opts *opts,
            struct sim_result *out, struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    out->mode = l->mode;
    struct sim s = {.in = in, .cfg = in->cfg, .lay = l, .opts = opts, .out = out, .err = err};
    if (setup(&s) == 0) {
        sim_trace_start(&s);
        if (opts->warmup == 0)
            sim_measure_begin(&s);
        s.ops->begin(&s);
        loop(&s);
    }
    if (s.rc == 0)
        check_something_trained(&s);
    if (s.rc == 0)
        sim_metrics_finish(&s);
    if (in->progress) /* a run cut short by an error is done all the same */
        atomic_fetch_add(&in->progress->steps_done, opts->steps - (long long)s.steps.n);
    int rc = s.rc;
    teardown(&s);
    return rc;
}
