/*
 * The client side of an RL job's rollout (load/load.h): trajectories turn by turn, batches one
 * after another, weight updates between them.
 */
#include "load/load.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"
#include "util/rng.h"

struct run;

/* One trajectory in flight. */
struct traj {
    struct run *run;
    const struct trace_traj *rec;
    size_t index;  /* in the config's trajs */
    size_t turn;   /* the turn being generated or next */
    uint32_t *ctx; /* the context: prompt, outputs, tool payloads */
    size_t n_ctx, cap_ctx;
    int64_t left; /* tokens the current turn still generates (after an abort: the rest) */
    int engine;   /* sticky; -1 before the first turn */
    struct event *tool_timer;
};

struct run {
    const struct load_config *c;
    struct event_base *base;
    struct net_client *client;
    struct load_result *res;
    struct traj *trajs; /* of the current step */
    size_t n_trajs, first;
    int live;       /* trajectories of the step not finished */
    int *in_flight; /* per engine */
    int step;
    double step_t0;
    int updates_left; /* engines whose weight update has not finished */
    bool update_due;  /* an overlapping update waits for the step's first answer */
    bool failed;
};

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Stops the run with the first reason given. */
__attribute__((format(printf, 2, 3))) static void stop(struct run *r, const char *fmt, ...)
{
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->res->error, sizeof r->res->error, fmt, ap);
        va_end(ap);
    }
    r->failed = true;
    event_base_loopbreak(r->base);
}

static struct load_step *cur_step(struct run *r)
{
    return &r->res->steps[r->res->n_steps - 1];
}

static void ctx_push(struct traj *t, uint32_t id)
{
    if (t->n_ctx == t->cap_ctx) {
        t->cap_ctx = t->cap_ctx ? 2 * t->cap_ctx : 1024;
        t->ctx = xreallocarray(t->ctx, t->cap_ctx, sizeof *t->ctx);
    }
    t->ctx[t->n_ctx++] = id;
}

/* Appends n token ids keyed by (what, a, b, position): prompts and tool payloads. */
static void ctx_fill(struct traj *t, int64_t n, uint64_t what, uint64_t a, uint64_t b)
{
    const struct load_config *c = t->run->c;
    for (int64_t i = 0; i < n; i++) {
        uint64_t keys[4] = {what, a, b, (uint64_t)i};
        ctx_push(t, (uint32_t)(rng_hash(c->seed, keys, 4) % c->vocab));
    }
}

/* The engine with the fewest requests in flight among the live ones; -1 when none is. */
static int least_loaded(const struct run *r)
{
    int best = -1;
    for (int i = 0; i < r->c->n_urls; i++)
        if (!r->res->dead[i] && (best < 0 || r->in_flight[i] < r->in_flight[best]))
            best = i;
    return best;
}

/* ---- a turn --------------------------------------------------------------------------------- */

static void send_turn(struct traj *t);
static void update_weights(struct run *r);

/* The body of the current turn: the context as ids, the script, the tool returns since the
 * previous turn. Written by hand: a 30 K-token context is a 200 KB array. */
static char *turn_body(const struct traj *t, size_t *len)
{
    size_t cap = 256 + 12 * t->n_ctx, n = 0;
    char *s = xmalloc(cap);
    n += (size_t)snprintf(s + n, cap - n, "{\"input_ids\": [");
    for (size_t i = 0; i < t->n_ctx; i++)
        n += (size_t)snprintf(s + n, cap - n, i ? ",%u" : "%u", t->ctx[i]);
    char rid[64];
    snprintf(rid, sizeof rid, "t%zu-%zu", t->index, t->turn);
    json_t *events = json_array();
    json_t *rest = json_pack("{s:{s:I}, s:s, s:{s:I, s:I, s:I, s:O, s:{s:I}}}", "sampling_params",
                             "max_new_tokens", (json_int_t)t->left, "rid", rid, "libra",
                             "trajectory", (json_int_t)t->index, "prompt",
                             (json_int_t)t->rec->prompt_id, "sample", (json_int_t)t->rec->sample,
                             "events", events, "emu", "gen_tokens", (json_int_t)t->left);
    if (t->turn > 0) {
        const struct trace_turn *prev = &t->rec->turns[t->turn - 1];
        for (size_t k = 0; k < prev->n_calls; k++) {
            const struct trace_tool_call *call = &prev->calls[k];
            json_array_append_new(
                events, json_pack("{s:s, s:s, s:s, s:I, s:f}", "kind", "tool_return", "tool",
                                  call->tool, "status", trace_tool_status_name(call->status),
                                  "payload_tokens", (json_int_t)call->payload_tokens, "exec_s",
                                  call->exec_us > 0 ? (double)call->exec_us * 1e-6 : 0.0));
        }
    }
    char *tail = json_dumps(rest, JSON_COMPACT);
    json_decref(rest);
    json_decref(events);
    size_t tail_n = strlen(tail);
    s = xrealloc(s, n + tail_n + 4);
    n += (size_t)sprintf(s + n, "], %s", tail + 1); /* tail without its '{' */
    free(tail);
    *len = n;
    return s;
}

static void finish_traj(struct traj *t)
{
    struct run *r = t->run;
    cur_step(r)->trajectories++;
    r->live--;
    if (r->live == 0) {
        cur_step(r)->wall_s = wall_s() - r->step_t0;
        if (r->updates_left == 0)
            event_base_loopbreak(r->base); /* the step loop takes over */
    }
}

static void on_tool_done(evutil_socket_t fd, short what, void *arg)
{
    send_turn(arg);
}

/* The turn is done: wait the tool time and build the next prompt, or finish. */
static void next_turn(struct traj *t)
{
    const struct trace_traj *rec = t->rec;
    if (t->turn + 1 >= rec->n_turns) {
        finish_traj(t);
        return;
    }
    const struct trace_turn *turn = &rec->turns[t->turn];
    double tool_s = 0;
    int64_t payload = 0;
    for (size_t k = 0; k < turn->n_calls; k++) {
        tool_s += (double)((turn->calls[k].queue_us > 0 ? turn->calls[k].queue_us : 0) +
                           (turn->calls[k].exec_us > 0 ? turn->calls[k].exec_us : 0)) *
                  1e-6;
        payload += turn->calls[k].payload_tokens;
    }
    t->turn++;
    /* The next prompt is the record's: what the context grew to, the tools' returns included. */
    int64_t grow = rec->turns[t->turn].prompt_tokens - (int64_t)t->n_ctx;
    ctx_fill(t, grow > 0 ? grow : payload, 2, t->index, t->turn);
    t->left = rec->turns[t->turn].generated_tokens;
    double wall = tool_s * t->run->c->time_scale;
    struct timeval tv = {(time_t)wall, (suseconds_t)((wall - floor(wall)) * 1e6)};
    evtimer_add(t->tool_timer, &tv);
}

static void on_turn(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct traj *t = arg;
    struct run *r = t->run;
    r->in_flight[t->engine]--;
    if (r->failed)
        return;
    if (status == 0) { /* the engine is gone: the turn goes elsewhere, whole */
        r->res->dead[t->engine] = 1;
        cur_step(r)->resubmitted++;
        t->engine = least_loaded(r);
        if (t->engine < 0) {
            stop(r, "every engine stopped answering (last: %s)", error);
            return;
        }
        send_turn(t);
        return;
    }
    json_error_t je;
    json_t *doc = status == 200 ? json_loadb(body, len, 0, &je) : NULL;
    json_t *ids = json_object_get(doc, "output_ids"), *meta = json_object_get(doc, "meta_info");
    if (!json_is_array(ids) || !json_is_object(meta)) {
        json_decref(doc);
        stop(r, "an engine answered a turn with status %d: %.160s", status, body);
        return;
    }
    struct load_step *st = cur_step(r);
    st->turns++;
    if (r->update_due) { /* no trainer yet: the update starts with the step's first answer and
                          * meets the rest of the step in flight */
        r->update_due = false;
        update_weights(r);
    }
    st->prompt_tokens += (int64_t)t->n_ctx;
    st->cached_tokens += json_integer_value(json_object_get(meta, "cached_tokens"));
    r->res->served[t->engine]++;
    size_t n = json_array_size(ids);
    for (size_t i = 0; i < n; i++)
        ctx_push(t, (uint32_t)json_integer_value(json_array_get(ids, i)));
    st->generated_tokens += (int64_t)n;
    t->left -= (int64_t)n;
    const char *reason =
        json_string_value(json_object_get(json_object_get(meta, "finish_reason"), "type"));
    bool aborted = reason && strcmp(reason, "abort") == 0;
    json_decref(doc);
    if (aborted && t->left > 0) { /* resubmit what is left, the partial output in context */
        st->resubmitted++;
        send_turn(t);
        return;
    }
    next_turn(t);
}

static void send_turn(struct traj *t)
{
    struct run *r = t->run;
    if (t->engine < 0 || r->res->dead[t->engine])
        t->engine = least_loaded(r);
    if (t->engine < 0) {
        stop(r, "every engine stopped answering");
        return;
    }
    size_t len;
    char *body = turn_body(t, &len);
    char url[512];
    snprintf(url, sizeof url, "%s/generate", r->c->urls[t->engine]);
    r->in_flight[t->engine]++;
    net_client_request(r->client, "POST", url, body, len, on_turn, t);
    free(body);
}

/* ---- steps ---------------------------------------------------------------------------------- */

static void start_step(struct run *r)
{
    const struct load_config *c = r->c;
    size_t n = (size_t)c->groups_per_batch * (size_t)c->group_size;
    r->res->steps =
        xreallocarray(r->res->steps, (size_t)r->res->n_steps + 1, sizeof *r->res->steps);
    r->res->steps[r->res->n_steps++] = (struct load_step){.step = r->step};
    r->trajs = xcalloc(n, sizeof *r->trajs);
    r->n_trajs = n;
    r->live = (int)n;
    r->step_t0 = wall_s();
    for (size_t i = 0; i < n; i++) {
        struct traj *t = &r->trajs[i];
        t->run = r;
        t->index = r->first + i;
        t->rec = &c->trajs[t->index];
        t->engine = -1;
        t->left = t->rec->turns[0].generated_tokens;
        t->tool_timer = evtimer_new(r->base, on_tool_done, t);
        /* Every sample of a group gets the same prompt: the engines' prefix cache shares it. */
        ctx_fill(t, t->rec->turns[0].prompt_tokens, 1, (uint64_t)t->rec->prompt_id, 0);
    }
    for (size_t i = 0; i < n; i++)
        send_turn(&r->trajs[i]);
}

static void end_step(struct run *r)
{
    for (size_t i = 0; i < r->n_trajs; i++) {
        event_free(r->trajs[i].tool_timer);
        free(r->trajs[i].ctx);
    }
    free(r->trajs);
    r->trajs = NULL;
    r->first += r->n_trajs;
}

/* A weight update on one engine: the calls of the sync mode and transport, in order. */
struct update {
    struct run *run;
    int engine;
    int phase, n_phases;
    char path[4][64];
    char body[4][192];
};

static void update_next(struct update *u);

static void on_update(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct update *u = arg;
    struct run *r = u->run;
    if (status == 0) { /* a dead engine gets no update */
        r->res->dead[u->engine] = 1;
        u->phase = u->n_phases;
    } else if (status != 200) {
        stop(r, "a weight update failed on %s%s with status %d: %.160s", r->c->urls[u->engine],
             u->path[u->phase], status, body);
        u->phase = u->n_phases;
    } else {
        u->phase++;
    }
    update_next(u);
}

static void update_next(struct update *u)
{
    struct run *r = u->run;
    if (u->phase >= u->n_phases || r->failed) {
        free(u);
        if (--r->updates_left == 0 && (r->live == 0 || r->failed))
            event_base_loopbreak(r->base);
        return;
    }
    char url[512];
    snprintf(url, sizeof url, "%s%s", r->c->urls[u->engine], u->path[u->phase]);
    net_client_request(r->client, "POST", url, u->body[u->phase], strlen(u->body[u->phase]),
                       on_update, u);
}

static void add_call(struct update *u, const char *path, const char *body)
{
    snprintf(u->path[u->n_phases], sizeof u->path[0], "%s", path);
    snprintf(u->body[u->n_phases], sizeof u->body[0], "%s", body);
    u->n_phases++;
}

/* The calls of one update (SGLang's API): the sync mode's pause around the transport's load. */
static void plan_update(const struct run *r, struct update *u)
{
    const struct load_config *c = r->c;
    static const char *const pause[] = {[SPEC_SYNC_ABORT_RESUME] = "{\"mode\": \"abort\"}",
                                        [SPEC_SYNC_KEEP] = "{\"mode\": \"in_place\"}"};
    char body[192];
    if (c->sync_mode != SPEC_SYNC_DRAIN) /* drain: the update itself waits for the drain */
        add_call(u, "/pause_generation", pause[c->sync_mode]);
    if (c->nccl) {
        if (r->res->weight_updates == 1)
            add_call(u, "/init_weights_update_group",
                     "{\"master_address\": \"127.0.0.1\", \"master_port\": 29500, "
                     "\"rank_offset\": 1, \"world_size\": 2}");
        snprintf(body, sizeof body,
                 "{\"names\": [\"all\"], \"dtypes\": [\"bfloat16\"], \"shapes\": [[1]], "
                 "\"weight_version\": \"%d\"}",
                 r->res->weight_updates);
        add_call(u, "/update_weights_from_distributed", body);
    } else {
        snprintf(body, sizeof body, "{\"model_path\": \"libra-load\", \"weight_version\": \"%d\"}",
                 r->res->weight_updates);
        add_call(u, "/update_weights_from_disk", body);
    }
    if (c->sync_mode != SPEC_SYNC_DRAIN)
        add_call(u, "/continue_generation", "{}");
}

/* Starts a weight update on every live engine; the run's loop waits for it with the step. */
static void update_weights(struct run *r)
{
    r->res->weight_updates++;
    for (int i = 0; i < r->c->n_urls; i++) {
        if (r->res->dead[i])
            continue;
        struct update *u = xcalloc(1, sizeof *u);
        *u = (struct update){.run = r, .engine = i};
        plan_update(r, u);
        r->updates_left++;
        update_next(u);
    }
}

int load_run(const struct load_config *c, struct event_base *base, struct net_client *client,
             struct load_result *res)
{
    memset(res, 0, sizeof *res);
    res->served = xcalloc((size_t)c->n_urls, sizeof *res->served);
    res->dead = xcalloc((size_t)c->n_urls, sizeof *res->dead);
    struct run r = {.c = c, .base = base, .client = client, .res = res};
    r.in_flight = xcalloc((size_t)c->n_urls, sizeof *r.in_flight);
    size_t per_step = (size_t)c->groups_per_batch * (size_t)c->group_size;
    for (r.step = 0; r.step < c->steps && !r.failed; r.step++) {
        if ((size_t)(r.step + 1) * per_step > c->n_trajs) {
            snprintf(res->error, sizeof res->error,
                     "the source holds %zu trajectories, fewer than %d steps of %zu", c->n_trajs,
                     c->steps, per_step);
            r.failed = true;
            break;
        }
        bool due = r.step > 0 && c->sync_interval > 0 && r.step % c->sync_interval == 0;
        if (due && !c->overlap) { /* the update first, then this step */
            update_weights(&r);
            if (r.updates_left > 0)
                event_base_dispatch(base);
        }
        r.update_due = due && c->overlap;
        start_step(&r);
        if (!r.failed && (r.live > 0 || r.updates_left > 0))
            event_base_dispatch(base);
        end_step(&r);
    }
    free(r.in_flight);
    return r.failed ? -1 : 0;
}

void load_result_free(struct load_result *r)
{
    free(r->steps);
    free(r->served);
    free(r->dead);
    memset(r, 0, sizeof *r);
}
