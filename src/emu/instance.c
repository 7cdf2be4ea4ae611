/*
 * One emulated instance: an engine model driven in scaled wall-clock time, the requests it
 * serves, the gate that holds new ones while it is paused or updating, and the control calls
 * that wait for a drain or an emulated duration (emu/internal.h).
 *
 * The engine model is told the emulated time at every call; a libevent timer fires at its next
 * event (converted to wall time by the time scale) and runs it there, so an idle instance costs
 * nothing and a busy one costs one wake-up per change of its batch.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/internal.h"
#include "net/query.h"
#include "util/alloc.h"
#include "util/rng.h"
#include "util/vec.h"

#define STREAM_PERIOD_S 0.02 /* wall seconds between streamed chunks */

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double emu_now(const struct emu *e)
{
    return (wall_s() - e->t0_wall_s) / e->cfg.time_scale;
}

/* Arms ev to fire at emulated time at_s (at once when it is past). */
static void arm(const struct emu *e, struct event *ev, double at_s)
{
    double delay = at_s * e->cfg.time_scale - (wall_s() - e->t0_wall_s);
    if (delay < 0)
        delay = 0;
    double whole = floor(delay);
    struct timeval tv = {(time_t)whole, (suseconds_t)((delay - whole) * 1e6)};
    evtimer_add(ev, &tv);
}

uint32_t emu_token(const struct emu_instance *in, uint64_t content, int64_t i)
{
    uint64_t keys[2] = {content, (uint64_t)i};
    return (uint32_t)(rng_hash(in->emu->cfg.seed, keys, 2) % in->emu->cfg.vocab);
}

double emu_logprob(const struct emu_instance *in, uint64_t content, int64_t i)
{
    uint64_t keys[3] = {content, (uint64_t)i, 1};
    return -3.0 * (double)(rng_hash(in->emu->cfg.seed, keys, 3) >> 11) * 0x1p-53;
}

/* ---- the request list ----------------------------------------------------------------------- */

static void link_req(struct emu_instance *in, struct emu_req *r)
{
    r->next = in->first;
    if (in->first)
        in->first->prev = r;
    in->first = r;
}

static void unlink_req(struct emu_instance *in, struct emu_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        in->first = r->next;
    if (r->next)
        r->next->prev = r->prev;
}

static void free_req(struct emu_instance *in, struct emu_req *r)
{
    unlink_req(in, r);
    if (r->g.stream && r->call)
        in->n_streaming--;
    emu_request_free(&r->g);
    free(r);
}

int emu_live(const struct emu_instance *in)
{
    int n = 0;
    for (const struct emu_req *r = in->first; r; r = r->next)
        n++;
    return n;
}

/* Records the context r's KV left in the cache: its prompt and the first gen tokens. */
static void record_context(struct emu_instance *in, const struct emu_req *r, int64_t gen)
{
    size_t n = r->g.n_ids + (size_t)gen;
    uint32_t *ids = xmallocarray(n, sizeof *ids);
    memcpy(ids, r->g.ids, r->g.n_ids * sizeof *ids);
    for (int64_t i = 0; i < gen; i++)
        ids[r->g.n_ids + (size_t)i] = emu_token(in, r->content, i);
    emu_prefix_record(&in->prefix, r->key, ids, n);
    free(ids);
}

/* ---- state ---------------------------------------------------------------------------------- */

static bool op_gates(const struct emu_op *op)
{
    return op && op->kind != EMU_OP_GROUP_INIT;
}

static bool op_freezes(const struct emu_op *op)
{
    return op && op->until_s >= 0 &&
           (op->kind == EMU_OP_UPDATE_DISK || op->kind == EMU_OP_UPDATE_BROADCAST);
}

static bool stalled(const struct emu_instance *in)
{
    return in->stall_until_s >= 0;
}

static bool gate_open(const struct emu_instance *in)
{
    return !in->paused && !in->released && !in->dead && !stalled(in) && !op_gates(in->ops);
}

static void submit(struct emu_instance *in, struct emu_req *r, double now);
static void schedule(struct emu_instance *in);

/* Sets the engine's readiness from the state, lets held requests in when the gate is open and
 * re-arms the engine's timer. */
static void apply_state(struct emu_instance *in)
{
    if (in->dead)
        return;
    double now = emu_now(in->emu);
    bool ready = !in->frozen && !stalled(in) && !in->released && !op_freezes(in->ops);
    engine_set_ready(in->eng, now, ready);
    if (gate_open(in)) {
        struct emu_req *last = NULL;
        for (struct emu_req *r = in->first; r; r = r->next)
            last = r;
        for (struct emu_req *r = last; r; r = r->prev) /* oldest first */
            if (!r->submitted)
                submit(in, r, now);
    }
    schedule(in);
}

/* ---- answers -------------------------------------------------------------------------------- */

static const char sse_done[] = "data: [DONE]\n\n";

static void send_json_event(struct net_call *c, json_t *chunk)
{
    char *text = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    size_t len;
    char *framed = net_sse_frame(text, strlen(text), &len);
    net_stream_write(c, framed, len);
    free(framed);
    free(text);
}

/* Answers r's client with its record d (gen_tokens counts every token r generated). */
static void answer(struct emu_instance *in, struct emu_req *r, const struct engine_done *d)
{
    if (!r->call)
        return;
    struct net_call *c = r->call;
    r->call = NULL;
    if (r->g.stream) {
        in->n_streaming--;
        send_json_event(c, emu_stream_chunk(r, r->streamed, d->gen_tokens, d));
        json_t *usage = r->g.api == EMU_SGLANG_GENERATE ? NULL : emu_vllm_usage_chunk(r, d);
        if (usage)
            send_json_event(c, usage);
        net_stream_write(c, sse_done, sizeof sse_done - 1);
        net_stream_end(c);
        return;
    }
    json_t *body =
        r->g.api == EMU_SGLANG_GENERATE ? emu_sglang_answer(r, d) : emu_vllm_answer(r, d);
    net_reply_json(c, 200, body);
}

/* r left the engine with record d (finished, aborted or retracted): account for it. */
static void left_engine(struct emu_instance *in, struct emu_req *r, struct engine_done *d)
{
    intmap_del(&in->by_id, r->id);
    r->submitted = false;
    if (!r->admitted_once && d->first_token_s >= 0) {
        r->cached = d->cached_tokens;
        r->admitted_once = true;
    }
    r->done += d->gen_tokens;
    in->generated_tokens_total += d->gen_tokens;
    record_context(in, r, r->done);
}

/* Completes r with what it has at emulated time end_s: answered, then freed. */
static void complete(struct emu_instance *in, struct emu_req *r, enum engine_end end, double end_s)
{
    struct engine_done d = {.end = end,
                            .submit_s = r->arrival_s,
                            .end_s = end_s,
                            .prompt_tokens = (int64_t)r->g.n_ids,
                            .gen_tokens = r->done,
                            .cached_tokens = r->cached};
    answer(in, r, &d);
    free_req(in, r);
}

static void collect(void *ctx, const struct engine_done *d)
{
    VEC(struct engine_done) *out = ctx;
    vec_push(out, *d);
}

static void ops_check(struct emu_instance *in);

/* Runs the engine to now and completes what finished. */
static void advance(struct emu_instance *in)
{
    VEC(struct engine_done) done = {0};
    engine_advance(in->eng, emu_now(in->emu), collect, &done);
    for (size_t i = 0; i < done.n; i++) {
        uint64_t v;
        if (!intmap_get(&in->by_id, done.v[i].id, &v))
            continue;
        struct emu_req *r = (struct emu_req *)(uintptr_t)v;
        left_engine(in, r, &done.v[i]);
        complete(in, r, ENGINE_FINISHED, done.v[i].end_s); /* the model's time, not the timer's */
    }
    vec_free(&done);
    ops_check(in);
}

void emu_sync(struct emu_instance *in)
{
    advance(in);
    schedule(in);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    emu_sync(arg);
}

static void schedule(struct emu_instance *in)
{
    if (in->dead)
        return;
    evtimer_del(in->tick);
    double t = engine_next_event_s(in->eng);
    if (isfinite(t))
        arm(in->emu, in->tick, t);
    if (in->n_streaming > 0 && !evtimer_pending(in->stream, NULL)) {
        struct timeval tv = {0, (suseconds_t)(STREAM_PERIOD_S * 1e6)};
        evtimer_add(in->stream, &tv);
    }
}

/* Sends each streaming client the tokens generated since its last chunk. */
static void on_stream(evutil_socket_t fd, short what, void *arg)
{
    struct emu_instance *in = arg;
    advance(in);
    for (struct emu_req *r = in->first; r; r = r->next) {
        int64_t gen = 0;
        if (!r->g.stream || !r->call || !r->submitted ||
            engine_generated_tokens(in->eng, r->id, &gen) != 0 || r->done + gen <= r->streamed)
            continue;
        send_json_event(r->call, emu_stream_chunk(r, r->streamed, r->done + gen, NULL));
        r->streamed = r->done + gen;
    }
    schedule(in);
}

/* ---- requests ------------------------------------------------------------------------------- */

static void submit(struct emu_instance *in, struct emu_req *r, double now)
{
    int64_t context = (int64_t)r->g.n_ids + r->done, reuse = context;
    if (r->done == 0) { /* a new context, or one the cache already knows by content */
        r->key = emu_prefix_match(&in->prefix, r->g.ids, r->g.n_ids, &reuse);
        if (!r->key)
            r->key = ++in->next_key;
    }
    r->id = ++in->emu->next_id;
    struct engine_request er = {.id = r->id,
                                .prefix_key = r->key,
                                .prompt_tokens = context,
                                .reusable_prefix_tokens = reuse < context ? reuse : context,
                                .gen_tokens = r->target - r->done};
    engine_submit(in->eng, now, &er); /* lengths were checked on arrival */
    intmap_put(&in->by_id, r->id, (uint64_t)(uintptr_t)r);
    r->submitted = true;
}

/* Takes r out of the engine now (if it is there): its partial tokens count as done. */
/* Takes r out of the engine now, if it is there; its partial tokens count as done. Returns
 * false when r finished in the engine just before (between the last report and now): its
 * report is pending and the next advance completes it, so r must stay. */
static bool take_out(struct emu_instance *in, struct emu_req *r)
{
    struct engine_done d;
    if (!r->submitted)
        return true;
    if (engine_abort(in->eng, emu_now(in->emu), r->id, &d) != 0)
        return false;
    left_engine(in, r, &d);
    return true;
}

/* The client of r went away (or the cap passed, or the server stops): drop r. */
static void req_cancelled(void *arg, struct net_call *c, enum net_cancel why)
{
    struct emu_req *r = arg;
    struct emu_instance *in = r->inst;
    if (r->g.stream)
        in->n_streaming--;
    r->call = NULL;
    if (in->dead || take_out(in, r)) /* else the pending report frees it, unanswered */
        free_req(in, r);
    if (!in->dead) {
        ops_check(in);
        schedule(in);
    }
}

/* The default cap on generated tokens when the request sets none. */
static int64_t default_max(const struct emu_instance *in, const struct emu_gen_request *g)
{
    switch (g->api) {
    case EMU_SGLANG_GENERATE:
        return 128; /* SGLang's sampling_params default */
    case EMU_VLLM_COMPLETIONS:
        return 16; /* the OpenAI completions default vLLM keeps */
    default:
        return in->cfg.engine.max_model_tokens - (int64_t)g->n_ids;
    }
}

/* The key of r's output ids: the seed, the prompt's ids and the request id it answers with
 * (equal prompts under different ids are different samples). */
static uint64_t content_key(const struct emu_req *r)
{
    uint64_t k = rng_hash(r->inst->emu->cfg.seed, (const uint64_t *)NULL, 0);
    for (size_t i = 0; i < r->g.n_ids; i++)
        k = rng_mix64(k ^ r->g.ids[i]);
    char buf[EMU_ID_SIZE];
    for (const char *p = emu_req_id(r, buf); *p; p++)
        k = rng_mix64(k ^ (unsigned char)*p);
    return k;
}

void emu_generate(struct emu_instance *in, struct net_call *call, struct emu_gen_request *g)
{
    int64_t max = g->max_new_tokens >= 0 ? g->max_new_tokens : default_max(in, g);
    int64_t target = g->gen_tokens >= 1 && g->gen_tokens < max ? g->gen_tokens : max;
    int64_t limit = in->cfg.engine.max_model_tokens;
    if (target < 1 || (int64_t)g->n_ids + target > limit) { /* < 1: the prompt fills it */
        emu_reply_error(call, 400,
                        "this model's maximum context length is %lld tokens; the request has "
                        "%zu prompt tokens and asks for %s%lld more",
                        (long long)limit, g->n_ids, target < 1 ? "at least " : "",
                        (long long)(target < 1 ? 1 : target));
        emu_request_free(g);
        return;
    }
    struct emu_req *r = xcalloc(1, sizeof *r);
    r->inst = in;
    r->g = *g;
    memset(g, 0, sizeof *g);
    r->g.max_new_tokens = max;
    r->target = target;
    r->arrival_s = emu_now(in->emu);
    r->serial = ++in->requests_total;
    r->content = content_key(r);
    r->call = call;
    link_req(in, r);
    in->prompt_tokens_total += (int64_t)r->g.n_ids;
    net_call_defer(call, req_cancelled, r);
    net_call_drop_body(call); /* parsed: a held turn keeps its token ids, not its JSON */
    if (r->g.stream) {
        in->n_streaming++;
        net_stream_start(call, 200, "text/event-stream");
    }
    if (gate_open(in))
        submit(in, r, r->arrival_s);
    schedule(in);
}

int emu_abort(struct emu_instance *in, const char *rid_prefix)
{
    advance(in);
    int n = 0;
    struct emu_req *r = in->first;
    while (r) {
        struct emu_req *next = r->next;
        if (!rid_prefix || (r->g.rid && strncmp(r->g.rid, rid_prefix, strlen(rid_prefix)) == 0)) {
            if (take_out(in, r)) { /* else it finished: the next advance answers it */
                complete(in, r, ENGINE_ABORTED, emu_now(in->emu));
                n++;
            }
        }
        r = next;
    }
    ops_check(in);
    schedule(in);
    return n;
}

void emu_retract(struct emu_instance *in)
{
    advance(in);
    for (struct emu_req *r = in->first; r; r = r->next)
        take_out(in, r);
    ops_check(in);
    schedule(in);
}

void emu_pause(struct emu_instance *in, bool in_place)
{
    in->paused = true;
    in->frozen = in_place;
    apply_state(in);
}

void emu_resume(struct emu_instance *in)
{
    in->paused = false;
    in->frozen = false;
    apply_state(in);
}

void emu_flush(struct emu_instance *in)
{
    engine_flush_cache(in->eng, emu_now(in->emu));
    emu_prefix_clear(&in->prefix);
}

void emu_release(struct emu_instance *in)
{
    emu_flush(in);
    in->released = true;
    apply_state(in);
}

/* ---- control calls that wait ---------------------------------------------------------------- */

bool emu_group_known(const struct emu_instance *in, const char *name)
{
    for (size_t i = 0; i < in->n_groups; i++)
        if (strcmp(in->groups[i], name) == 0)
            return true;
    return false;
}

void emu_group_add(struct emu_instance *in, const char *name)
{
    if (emu_group_known(in, name))
        return;
    in->groups = xreallocarray(in->groups, in->n_groups + 1, sizeof *in->groups);
    in->groups[in->n_groups++] = xstrdup(name);
}

static double op_duration(const struct emu_instance *in, enum emu_op_kind k)
{
    const struct emu_times *t = &in->cfg.times;
    switch (k) {
    case EMU_OP_UPDATE_DISK:
        return t->load_disk_s;
    case EMU_OP_UPDATE_BROADCAST:
        return t->broadcast_s;
    case EMU_OP_GROUP_INIT:
        return t->group_init_s;
    case EMU_OP_WAKE:
        return t->wake_s;
    default:
        return 0;
    }
}

static void op_answer(struct emu_instance *in, struct emu_op *op)
{
    if (!op->call)
        return;
    struct net_call *c = op->call;
    op->call = NULL;
    json_t *body = NULL;
    switch (op->kind) {
    case EMU_OP_UPDATE_DISK:
    case EMU_OP_UPDATE_BROADCAST:
    case EMU_OP_GROUP_INIT:
        if (!op->sglang) {
            body = json_pack("{s:s}", "message",
                             op->kind == EMU_OP_GROUP_INIT ? "Weight transfer initialized"
                                                           : "Weights updated");
            break;
        }
        body = json_pack("{s:b, s:s}", "success", 1, "message",
                         op->kind == EMU_OP_GROUP_INIT ? "Succeeded to initialize group."
                                                       : "Succeeded in updating model weights.");
        if (op->kind == EMU_OP_UPDATE_DISK)
            json_object_set_new(body, "num_paused_requests", json_integer(0));
        break;
    case EMU_OP_WAKE:
        if (op->sglang) {
            net_reply_json(c, 200, json_null());
            return;
        }
        net_reply_raw(c, 200, "application/json", "", 0);
        return;
    case EMU_OP_PAUSE_WAIT:
        body = json_pack("{s:s}", "status", "paused");
        break;
    }
    net_reply_json(c, 200, body);
}

/* Frees op with its timer and the version it did not hand to the instance. */
static void op_free(struct emu_op *op)
{
    if (op->timer)
        event_free(op->timer);
    free(op->version);
    free(op);
}

/* The head op's work is done: apply its effect, answer, and start the next. */
static void op_finish(struct emu_instance *in)
{
    struct emu_op *op = in->ops;
    in->ops = op->next;
    if (op->kind == EMU_OP_UPDATE_DISK || op->kind == EMU_OP_UPDATE_BROADCAST) {
        if (op->version && op->version[0]) {
            free(in->weight_version);
            in->weight_version = op->version;
            op->version = NULL;
        }
        if (op->flush)
            emu_flush(in);
    } else if (op->kind == EMU_OP_WAKE) {
        in->released = false;
    } else if (op->kind == EMU_OP_PAUSE_WAIT) {
        in->paused = true;
    }
    op_answer(in, op);
    op_free(op);
    apply_state(in);
    ops_check(in);
}

static void on_op_timer(evutil_socket_t fd, short what, void *arg)
{
    struct emu_instance *in = arg;
    advance(in);
    op_finish(in);
}

static bool engine_idle(const struct emu_instance *in)
{
    for (const struct emu_req *r = in->first; r; r = r->next)
        if (r->submitted)
            return false;
    return true;
}

/* Starts the head op's work once what it waits for is done (re-entered after each change). */
static void ops_check(struct emu_instance *in)
{
    struct emu_op *op = in->ops;
    if (!op || op->until_s >= 0 || in->dead)
        return;
    bool drains =
        op->kind == EMU_OP_PAUSE_WAIT ||
        ((op->kind == EMU_OP_UPDATE_DISK || op->kind == EMU_OP_UPDATE_BROADCAST) && !in->paused);
    if (drains && !engine_idle(in))
        return;
    op->until_s = emu_now(in->emu) + op_duration(in, op->kind);
    if (!op->timer)
        op->timer = evtimer_new(in->emu->base, on_op_timer, in);
    arm(in->emu, op->timer, op->until_s);
    apply_state(in);
}

/* The client of a waiting control call left: the work goes on, unanswered. */
static void op_cancelled(void *arg, struct net_call *c, enum net_cancel why)
{
    struct emu_op *op = arg;
    op->call = NULL;
}

void emu_op_start(struct emu_instance *in, struct emu_op *op)
{
    op->until_s = -1;
    net_call_defer(op->call, op_cancelled, op);
    struct emu_op **tail = &in->ops;
    while (*tail)
        tail = &(*tail)->next;
    *tail = op;
    apply_state(in);
    ops_check(in);
}

/* ---- faults --------------------------------------------------------------------------------- */

static void held_cancelled(void *arg, struct net_call *c, enum net_cancel why)
{
    struct emu_instance *in = arg;
    for (size_t i = 0; i < in->n_held; i++)
        if (in->held[i].call == c)
            in->held[i].call = NULL;
}

bool emu_hold_if_stalled(void *ctx, struct net_call *call, net_handler_fn fn)
{
    struct emu_instance *in = ctx;
    if (!stalled(in))
        return false;
    if (in->n_held == in->cap_held) {
        in->cap_held = in->cap_held ? 2 * in->cap_held : 8;
        in->held = xreallocarray(in->held, in->cap_held, sizeof *in->held);
    }
    in->held[in->n_held++] = (struct emu_held_call){fn, call};
    net_call_defer(call, held_cancelled, in);
    return true;
}

static void arm_fault(struct emu_instance *in);

/* The stall ends: the engine runs again and the calls held meanwhile are served in order. */
static void stall_end(struct emu_instance *in)
{
    in->stall_until_s = -1;
    apply_state(in);
    struct emu_held_call *held = in->held;
    size_t n = in->n_held;
    in->held = NULL;
    in->n_held = in->cap_held = 0;
    for (size_t i = 0; i < n; i++)
        if (held[i].call) {
            net_call_defer(held[i].call, NULL, NULL); /* back to its handler's care */
            held[i].fn(in, held[i].call);
        }
    free(held);
}

/* The instance dies: its port closes and every request it held is cut. */
static void die(struct emu_instance *in)
{
    in->dead = true;
    net_server_free(in->server); /* cancels every kept call: req_cancelled frees them */
    in->server = NULL;
    evtimer_del(in->tick);
    evtimer_del(in->stream);
}

static void on_fault(evutil_socket_t fd, short what, void *arg)
{
    struct emu_instance *in = arg;
    struct emu_fault *f = &in->cfg.fault;
    double now = emu_now(in->emu);
    if (f->fail_after_s >= 0 && now >= f->fail_after_s) {
        die(in);
        return;
    }
    if (stalled(in) && now >= in->stall_until_s) {
        stall_end(in);
    } else if (f->stall_after_s >= 0 && now >= f->stall_after_s) {
        in->stall_until_s = f->stall_after_s + f->stall_for_s;
        f->stall_after_s = -1;
        apply_state(in);
    }
    arm_fault(in);
}

/* Arms the fault timer at the next fault event, if any. */
static void arm_fault(struct emu_instance *in)
{
    const struct emu_fault *f = &in->cfg.fault;
    double next = INFINITY;
    if (f->fail_after_s >= 0)
        next = f->fail_after_s;
    if (stalled(in))
        next = fmin(next, in->stall_until_s);
    else if (f->stall_after_s >= 0)
        next = fmin(next, f->stall_after_s);
    if (isfinite(next))
        arm(in->emu, in->fault, next);
}

/* ---- life ----------------------------------------------------------------------------------- */

int emu_instance_init(struct emu_instance *in, struct emu *e, int index, char *err, size_t n)
{
    memset(in, 0, sizeof *in);
    in->emu = e;
    in->index = index;
    in->cfg = e->inst_cfg[index];
    in->stall_until_s = -1;
    in->weight_version = xstrdup("default");
    if (engine_new(&in->eng, &in->cfg.engine) != 0) {
        snprintf(err, n, "instance %d: the engine limits are inconsistent", index);
        return -1;
    }
    emu_prefix_init(&in->prefix,
                    (size_t)(4 * in->cfg.engine.kv_capacity_tokens / EMU_BLOCK_TOKENS) + 1024);
    in->tick = evtimer_new(e->base, on_tick, in);
    in->stream = evtimer_new(e->base, on_stream, in);
    in->fault = evtimer_new(e->base, on_fault, in);
    char why[256];
    if (net_server_new(&in->server, e->base, e->cfg.host, in->cfg.port, &e->cfg.limits, emu_routes,
                       emu_hold_if_stalled, in, why, sizeof why)) {
        snprintf(err, n, "instance %d: %s", index, why);
        return -1;
    }
    arm_fault(in);
    return 0;
}

void emu_instance_fini(struct emu_instance *in)
{
    if (!in->emu)
        return;
    in->dead = true;
    net_server_free(in->server);
    while (in->ops) {
        struct emu_op *op = in->ops;
        in->ops = op->next;
        op_free(op);
    }
    while (in->first)
        free_req(in, in->first);
    free(in->held);
    for (size_t i = 0; i < in->n_groups; i++)
        free(in->groups[i]);
    free(in->groups);
    free(in->weight_version);
    if (in->tick)
        event_free(in->tick);
    if (in->stream)
        event_free(in->stream);
    if (in->fault)
        event_free(in->fault);
    intmap_free(&in->by_id);
    emu_prefix_free(&in->prefix);
    engine_free(in->eng);
}
