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
#define LOAD_RETRIES_MAX 50       /* 502/503 answers to one turn before the run stops */
#define LOAD_RETRY_WAIT_US 100000 /* wall wait before sending such a turn again */

struct traj {
    struct run *run;
    const struct trace_traj *rec;
    size_t index;  /* in the config's trajs */
    size_t turn;   /* the turn being generated or next */
    uint32_t *ctx; /* the context: prompt, outputs, tool payloads */
    size_t n_ctx, cap_ctx;
    int64_t left; /* tokens the current turn still generates (after an abort: the rest) */
    int engine;   /* sticky; -1 before the first turn */
    int retries;  /* the current turn's answers 502/503 in a row (a gateway without engine) */
    struct event *tool_timer;
    struct trace_turn *seen; /* per turn, what the client saw (record: the finished trace) */
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
    int updates_left;          /* engines whose weight update has not finished */
    struct event *train_timer; /* the trainer's step on the last batch */
    bool training;             /* ... is running */
    bool update_after;         /* the weights go out when it ends */
    int finishing;             /* trajectory-end events on their way to a gateway */
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

/* The step loop takes over once the step's trajectories, the trainer and the update are done. */
static void break_when_idle(struct run *r)
{
    if (r->failed || (r->live == 0 && r->updates_left == 0 && !r->training && r->finishing == 0))
        event_base_loopbreak(r->base);
}

static void on_finish_event(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct run *r = arg;
    r->finishing--; /* an engine answers 404, a gateway 200: either way it is told */
    break_when_idle(r);
}

/* Tells the trajectory's engine (a gateway) that it ended, in the styles that do. */
static void send_finish(struct traj *t)
{
    struct run *r = t->run;
    struct load_request q;
    if (!load_finish_request(r->c->style, t->index, t->rec, &q))
        return;
    char url[512];
    snprintf(url, sizeof url, "%s%s", r->c->urls[t->engine], q.path);
    r->finishing++;
    net_client_request(r->client, "POST", url, NULL, q.body, q.len, on_finish_event, r);
    free(q.body);
}

static void finish_traj(struct traj *t)
{
    struct run *r = t->run;
    send_finish(t);
    cur_step(r)->trajectories++;
    r->live--;
    if (r->live == 0) {
        cur_step(r)->wall_s = wall_s() - r->step_t0;
        break_when_idle(r);
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
    double tool_s = (double)trace_turn_tool_us(turn) * 1e-6;
    int64_t payload = 0;
    for (size_t k = 0; k < turn->n_calls; k++)
        payload += turn->calls[k].payload_tokens;
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
    if (status == 502 || status == 503) { /* a gateway lost the turn's engine: again, soon */
        if (++t->retries > LOAD_RETRIES_MAX) {
            stop(r, "a turn was answered %d %d times in a row: %.160s", status, t->retries, body);
            return;
        }
        cur_step(r)->resubmitted++;
        struct timeval tv = {0, LOAD_RETRY_WAIT_US};
        evtimer_add(t->tool_timer, &tv);
        return;
    }
    t->retries = 0;
    struct load_answer a;
    if (status != 200 || load_turn_answer(r->c->style, body, len, &a) != 0) {
        stop(r, "an engine answered a turn with status %d: %.160s", status, body);
        return;
    }
    struct load_step *st = cur_step(r);
    st->turns++;
    struct trace_turn *seen = &t->seen[t->turn];
    if (seen->prompt_tokens == 0) /* a resubmission adds to the turn, it is not another */
        seen->prompt_tokens = (int64_t)t->n_ctx;
    seen->cached_tokens += a.cached_tokens;
    seen->generated_tokens += (int64_t)a.n;
    st->prompt_tokens += (int64_t)t->n_ctx;
    st->cached_tokens += a.cached_tokens;
    r->res->served[t->engine]++;
    for (size_t i = 0; i < a.n; i++)
        ctx_push(t, a.ids[i]);
    free(a.ids);
    st->generated_tokens += (int64_t)a.n;
    t->left -= (int64_t)a.n;
    if (a.aborted && t->left > 0) { /* resubmit what is left, the partial output in context */
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
    struct load_turn turn = {.ctx = t->ctx,
                             .n_ctx = t->n_ctx,
                             .gen_tokens = t->left,
                             .trajectory = t->index,
                             .turn = t->turn,
                             .rec = t->rec,
                             .model = r->c->model};
    struct load_request q;
    load_turn_request(r->c->style, &turn, &q);
    char url[512];
    snprintf(url, sizeof url, "%s%s", r->c->urls[t->engine], q.path);
    r->in_flight[t->engine]++;
    net_client_request(r->client, "POST", url, q.header, q.body, q.len, on_turn, t);
    free(q.body);
}

/* ---- steps ---------------------------------------------------------------------------------- */

static void start_step(struct run *r)
{
    const struct load_config *c = r->c;
    size_t n = (size_t)c->job.groups_per_batch * (size_t)c->group_size;
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
        t->seen = xcalloc(t->rec->n_turns, sizeof *t->seen);
        /* Every sample of a group gets the same prompt: the engines' prefix cache shares it. */
        ctx_fill(t, t->rec->turns[0].prompt_tokens, 1, (uint64_t)t->rec->prompt_id, 0);
    }
    for (size_t i = 0; i < n; i++)
        send_turn(&r->trajs[i]);
}

/* Appends t as the client saw it to the result's trace: its record with the turns' prompt,
 * cached and generated tokens measured, and the step it ran in. */
static void record_traj(struct run *r, const struct traj *t)
{
    struct trace_traj out = *t->rec;
    struct trace_turn *turns = xmallocarray(out.n_turns, sizeof *turns);
    for (size_t k = 0; k < out.n_turns; k++) {
        turns[k] = t->rec->turns[k];
        turns[k].prompt_tokens = t->seen[k].prompt_tokens;
        turns[k].cached_tokens = t->seen[k].cached_tokens;
        turns[k].generated_tokens = t->seen[k].generated_tokens;
    }
    out.turns = turns;
    out.step = r->step;
    trace_format_traj(&r->res->trace, &out);
    free(turns);
}

static void end_step(struct run *r)
{
    for (size_t i = 0; i < r->n_trajs; i++) {
        if (r->c->record && !r->failed)
            record_traj(r, &r->trajs[i]);
        event_free(r->trajs[i].tool_timer);
        free(r->trajs[i].ctx);
        free(r->trajs[i].seen);
    }
    free(r->trajs);
    r->trajs = NULL;
    r->first += r->n_trajs;
}

/* A weight update on one engine: the style's calls, in order. */
struct update {
    struct run *run;
    int engine;
    int phase, n_phases;
    struct load_call calls[LOAD_UPDATE_CALLS];
    struct event *poll; /* a repeated call (until idle) waits on it */
    int members;        /* a group set-up through a gateway: its engines' answers awaited */
    int refused;        /* ... the first status other than 200 among them (0: none) */
};

static void update_next(struct update *u);
static void on_update(void *arg, int status, const char *body, size_t len, const char *error);

/* Ends a group set-up sent to the engines behind a gateway once each has answered. */
static void on_member(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct update *u = arg;
    /* One that cannot be reached (status 0) is gone: its ranks stay unused, as a dead one's. */
    if (status != 200 && status != 0 && !u->refused)
        u->refused = status;
    if (--u->members > 0)
        return;
    if (u->refused)
        stop(u->run, "a weight-update group set-up through %s failed on an engine (status %d)",
             u->run->c->urls[u->engine], u->refused);
    u->phase = u->refused ? u->n_phases : u->phase + 1;
    update_next(u);
}

/*
 * The answer of GET /libra/v1/engines before a group set-up: a gateway lists its engines, each
 * of which takes the set-up itself with its rank offset (the trainer is rank 0); an engine
 * answers 404 and takes the call as it is.
 */
static void on_fleet(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct update *u = arg;
    struct run *r = u->run;
    const struct load_call *c = &u->calls[u->phase];
    json_t *doc = status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
    json_t *engines = json_object_get(doc, "engines");
    json_int_t world = json_integer_value(json_object_get(doc, "world_size"));
    char url[512];
    if (json_array_size(engines) == 0) {
        json_decref(doc);
        snprintf(url, sizeof url, "%s%s", r->c->urls[u->engine], c->path);
        net_client_request(r->client, "POST", url, NULL, c->body, strlen(c->body), on_update, u);
        return;
    }
    u->members = 1; /* until every engine is sent its set-up */
    for (size_t i = 0; i < json_array_size(engines); i++) {
        json_t *e = json_array_get(engines, i);
        const char *state = json_string_value(json_object_get(e, "state"));
        if (state && strcmp(state, "dead") == 0)
            continue; /* its ranks stay unused */
        u->members++;
        char member[224];
        json_int_t before = json_integer_value(json_object_get(e, "rank_offset"));
        load_group_init_body(r->c->style, 1 + before, world, member,
                             sizeof member); /* trainer: 0 */
        snprintf(url, sizeof url, "%s%s", json_string_value(json_object_get(e, "url")), c->path);
        net_client_request(r->client, "POST", url, NULL, member, strlen(member), on_member, u);
    }
    json_decref(doc);
    on_member(u, 200, "", 0, NULL);
}

static void on_update(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct update *u = arg;
    struct run *r = u->run;
    const struct load_call *c = &u->calls[u->phase];
    if (status == 0) { /* a dead engine gets no update */
        r->res->dead[u->engine] = 1;
        u->phase = u->n_phases;
    } else if (status != 200) {
        stop(r, "a weight update failed on %s%s with status %d: %.160s", r->c->urls[u->engine],
             c->path, status, body);
        u->phase = u->n_phases;
    } else if (c->until_idle && !load_loads_idle(body, len)) {
        struct timeval tv = {0, 20000}; /* ask again in 20 ms */
        evtimer_add(u->poll, &tv);
        return;
    } else {
        u->phase++;
    }
    update_next(u);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    update_next(arg);
}

static void update_next(struct update *u)
{
    struct run *r = u->run;
    if (u->phase >= u->n_phases || r->failed) {
        event_free(u->poll);
        free(u);
        r->updates_left--;
        break_when_idle(r);
        return;
    }
    const struct load_call *c = &u->calls[u->phase];
    char url[512];
    if (c->group_init) {
        snprintf(url, sizeof url, "%s/libra/v1/engines", r->c->urls[u->engine]);
        net_client_request(r->client, "GET", url, NULL, NULL, 0, on_fleet, u);
        return;
    }
    snprintf(url, sizeof url, "%s%s", r->c->urls[u->engine], c->path);
    bool post = strcmp(c->method, "POST") == 0;
    char auth[300] = "";
    if (r->c->admin_token)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->c->admin_token);
    net_client_request(r->client, c->method, url, auth, post ? c->body : NULL, strlen(c->body),
                       on_update, u);
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
        u->n_phases = load_update_calls(r->c->style, r->c->sync_mode, r->c->nccl,
                                        r->res->weight_updates, u->calls);
        u->poll = evtimer_new(r->base, on_poll, u);
        r->updates_left++;
        update_next(u);
    }
}

static void on_trained(evutil_socket_t fd, short what, void *arg)
{
    struct run *r = arg;
    r->training = false;
    if (r->update_after && !r->failed) {
        r->update_after = false;
        update_weights(r);
    }
    break_when_idle(r);
}

/* The trainer takes the batch just finished: train_s of emulated time, then (when due) the
 * weight update. With overlap the next batch rolls out meanwhile and meets the update. */
static void start_training(struct run *r, bool update)
{
    if (r->c->train_s <= 0) {
        if (update)
            update_weights(r);
        return;
    }
    r->training = true;
    r->update_after = update;
    double wall = r->c->train_s * r->c->time_scale;
    struct timeval tv = {(time_t)wall, (suseconds_t)((wall - floor(wall)) * 1e6)};
    evtimer_add(r->train_timer, &tv);
}

/* Runs the loop until the step, the trainer and the update are done. */
static void wait_idle(struct run *r)
{
    if (!r->failed && (r->live > 0 || r->updates_left > 0 || r->training))
        event_base_dispatch(r->base);
}

int load_run(const struct load_config *c, struct event_base *base, struct net_client *client,
             struct load_result *res)
{
    memset(res, 0, sizeof *res);
    res->served = xcalloc((size_t)c->n_urls, sizeof *res->served);
    res->dead = xcalloc((size_t)c->n_urls, sizeof *res->dead);
    struct run r = {.c = c, .base = base, .client = client, .res = res};
    r.in_flight = xcalloc((size_t)c->n_urls, sizeof *r.in_flight);
    r.train_timer = evtimer_new(base, on_trained, &r);
    size_t per_step = (size_t)c->job.groups_per_batch * (size_t)c->group_size;
    bool overlap = c->overlap && load_style_overlaps(c->style);
    for (r.step = 0; r.step < c->steps && !r.failed; r.step++) {
        if ((size_t)(r.step + 1) * per_step > c->n_trajs) {
            snprintf(res->error, sizeof res->error,
                     "the source holds %zu trajectories, fewer than %d steps of %zu", c->n_trajs,
                     c->steps, per_step);
            r.failed = true;
            break;
        }
        start_step(&r);
        wait_idle(&r); /* with overlap, the trainer's last step and update end in here too */
        end_step(&r);
        bool last = r.step + 1 == c->steps;
        if (!last && !r.failed) { /* train this batch: version step + 1 */
            start_training(&r, job_sync_due(&c->job, r.step + 1));
            if (!overlap)
                wait_idle(&r);
        }
    }
    event_free(r.train_timer);
    free(r.in_flight);
    return r.failed ? -1 : 0;
}

void load_result_free(struct load_result *r)
{
    trace_text_free(&r->trace);
    free(r->steps);
    free(r->served);
    free(r->dead);
    memset(r, 0, sizeof *r);
}
