/*
 * The client side of an RL job's rollout (load/load.h): trajectories turn by turn, groups
 * admitted and trained by the job's rules (job/job.h), weight updates between batches.
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
#include "util/vec.h"
#include "workload/workload.h"

struct run;
struct group;

/* Answers in a row that a turn gets nothing from (502, 503, an abort without a token outside a
 * weight update) before the run stops. */
#define LOAD_RETRIES_MAX 50
#define LOAD_RETRY_WAIT_US 100000                /* wall wait before sending such a turn again */
#define LOAD_ANSWER_MAX_BYTES ((size_t)64 << 20) /* a turn's answer held, at most */
#define LOAD_FINISH_WAIT_S 5.0 /* wall wait for the answer to a trajectory's finish event */

/* One trajectory in flight. */
struct traj {
    struct run *run;
    struct group *group;
    const struct trace_traj *rec;
    size_t index;  /* in launch order: group index x group size + sample */
    size_t turn;   /* the turn being generated or next */
    uint32_t *ctx; /* the context: prompt, outputs, tool payloads */
    size_t n_ctx, cap_ctx;
    int64_t left;  /* tokens the current turn still generates (after an abort: the rest) */
    int engine;    /* sticky; -1 before the first turn */
    int retries;   /* the current turn's answers 502/503 in a row (a gateway without engine) */
    bool answered; /* the current turn has had an answer: a resubmission continues it */
    int64_t version_end; /* the fleet's version when its last turn was answered */
    struct event *tool_timer;
    struct net_transfer *req; /* the turn in flight; NULL between turns */
    struct event *timeout;    /* config.trajectory_timeout_s after its launch; NULL: none */
    bool ended;               /* finished, or stopped by its timeout */
    bool timed_out;           /* stopped by its timeout: masked, not trained */
    struct trace_turn *seen;  /* per turn, what the client saw (record: the finished trace) */
};

/* One GRPO group, from its launch until it is trained or dropped. */
struct group {
    struct run *run;
    int64_t index;   /* launch order */
    int64_t version; /* the fleet's version at launch */
    const struct trace_traj *recs;
    struct arena arena;     /* generated records */
    struct traj *trajs;     /* group_size */
    int live;               /* trajectories not finished */
    double first_s, last_s; /* wall clock: its first request, its last answer */
    struct load_step tally; /* its turns and tokens (the counters only) */
};

typedef VEC(struct group *) group_vec;

struct run {
    const struct load_config *c;
    struct event_base *base;
    struct net_client *client;
    struct load_result *res;
    struct workload_gen gen;      /* without a trace */
    int *in_flight;               /* requests per engine */
    group_vec flying;             /* launched, not complete */
    group_vec buffer;             /* complete, oldest first: the trainer's next batches */
    int64_t lost;                 /* groups dropped (filtered or too stale): each is replaced */
    int64_t fleet_version;        /* the trainer's version at the last weight update */
    int64_t version;              /* the trainer's: batches trained */
    struct load_step dropped;     /* drops since the last batch was taken */
    int updates_left;             /* engines whose weight update has not finished (and 1 while
                                   * they are being started) */
    int updates_begun;            /* weight updates started (res->weight_updates: finished) */
    bool update_due;              /* the style's update waits for the groups in flight */
    struct event *train_timer;    /* the trainer's step on the last batch */
    bool training;                /* ... is running */
    double train_wall_s;          /* ... for this long (wall seconds) */
    struct event *save_timer;     /* the trainer's checkpoint before a disk update */
    bool saving;                  /* ... is being written */
    struct load_trainer *trainer; /* config.pool_trainer's; NULL without */
    VEC(uint32_t) lens;           /* the batch's contexts, tokens, for config.step_cost */
    int finishing;                /* trajectory-end events on their way to a gateway */
    struct load_call *owed;       /* by engine: the call that ends its update's pause, while
                                   * it has not been answered (owed[i].resumes) */
    VEC(struct update *) updates; /* the engines' updates running (freed by a stopped run) */
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

/* A record's token count as played: at least 1, as the simulator plays it (copy_record in
 * sim/traj.c), since an engine takes no empty prompt and generates at least one token. */
static int64_t played_tokens(int64_t n)
{
    return n > 0 ? n : 1;
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
static void group_done(struct group *g);

/* Whether the trainer frees replicas it lends (no step starts meanwhile). */
static bool releasing(const struct run *r)
{
    return r->trainer && load_trainer_releasing(r->trainer);
}

/* Whether every batch was taken and nothing the client started is running: the last batch
 * leaves nothing in flight (job_admit_limit_run) and is not trained. */
static bool run_done(const struct run *r)
{
    return r->res->n_steps == r->c->steps && r->flying.n == 0 && r->updates_left == 0 &&
           !r->training && !releasing(r) && !r->saving && r->finishing == 0;
}

static void break_when_done(struct run *r)
{
    if (r->failed || run_done(r))
        event_base_loopbreak(r->base);
}

static void on_finish_event(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct run *r = arg;
    r->finishing--; /* an engine answers 404, a gateway 200: either way it is told */
    break_when_done(r);
}

/* Tells the trajectory's engine (a gateway) that it ended, in the styles that do. */
static void send_finish(struct traj *t)
{
    struct run *r = t->run;
    struct load_request q;
    if (t->engine < 0 || !load_finish_request(r->c->style, t->index, t->rec, &q))
        return; /* stopped before its first turn: no engine knows it */
    char url[512];
    snprintf(url, sizeof url, "%s%s", r->c->urls[t->engine], q.path);
    r->finishing++;
    net_client_request_within(r->client, "POST", url, NULL, q.body, q.len, LOAD_FINISH_WAIT_S,
                              on_finish_event, r);
    free(q.body);
}

static void finish_traj(struct traj *t)
{
    struct group *g = t->group;
    t->ended = true;
    if (t->timeout)
        evtimer_del(t->timeout);
    send_finish(t);
    t->version_end = t->run->fleet_version;
    if (t->timed_out) {
        g->tally.timed_out++;
        for (size_t k = 0; k < t->rec->n_turns; k++)
            g->tally.timed_out_tokens += t->seen[k].generated_tokens;
    } else {
        g->tally.trajectories++;
    }
    if (--g->live == 0) {
        g->last_s = wall_s();
        group_done(g);
    }
}

static void on_tool_done(evutil_socket_t fd, short what, void *arg)
{
    send_turn(arg);
}

/* The trajectory's timeout: its turn in flight is cancelled (the engine sees its client leave),
 * its tool wait dropped, and it ends masked. */
static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct traj *t = arg;
    struct run *r = t->run;
    if (t->ended || r->failed)
        return;
    if (t->req) {
        net_transfer_cancel(t->req);
        t->req = NULL;
        r->in_flight[t->engine]--;
    }
    evtimer_del(t->tool_timer);
    t->timed_out = true;
    finish_traj(t);
}

/* The turn is done: wait the tool time and build the next prompt, or finish. */
static void next_turn(struct traj *t)
{
    const struct trace_traj *rec = t->rec;
    if (t->turn + 1 >= rec->n_turns) {
        finish_traj(t);
        return;
    }
    double tool_s = (double)trace_turn_tool_us(&rec->turns[t->turn]) * 1e-6;
    t->turn++;
    t->answered = false;
    /* The next prompt is the record's size: what the context grew to, the tools' returns
     * included, or — a client that condensed it — the context's first tokens, a prefix the
     * engine may still hold (the simulator's reusable prefix is as long). */
    int64_t prompt = played_tokens(rec->turns[t->turn].prompt_tokens);
    if (prompt < (int64_t)t->n_ctx)
        t->n_ctx = (size_t)prompt;
    else
        ctx_fill(t, prompt - (int64_t)t->n_ctx, 2, t->index, t->turn);
    t->left = played_tokens(rec->turns[t->turn].generated_tokens);
    struct timeval tv = load_wall_tv(tool_s * t->run->c->time_scale);
    evtimer_add(t->tool_timer, &tv);
}

/* The turn t sends next, as the styles read it. */
static struct load_turn turn_of(const struct traj *t)
{
    return (struct load_turn){.ctx = t->ctx,
                              .n_ctx = t->n_ctx,
                              .gen_tokens = t->left,
                              .trajectory = t->index,
                              .turn = t->turn,
                              .rec = t->rec,
                              .model = t->run->c->model,
                              .vocab = t->run->c->vocab};
}

/* The turn's engine could not be reached: it is dead, and the turn goes elsewhere, whole. */
static void turn_lost(struct traj *t, const char *error)
{
    struct run *r = t->run;
    r->res->dead[t->engine] = 1;
    t->group->tally.resubmitted++;
    t->engine = least_loaded(r);
    if (t->engine < 0) {
        stop(r, "every engine stopped answering (last: %s)", error);
        return;
    }
    send_turn(t);
}

/* Nothing came of the turn (a 502 or 503, an abort without a token): it is sent again after
 * LOAD_RETRY_WAIT_US, at most LOAD_RETRIES_MAX times in a row; then the run stops with "engine
 * URL <what> a turn N times in a row<tail>". */
static void retry_later(struct traj *t, const char *what, const char *tail)
{
    struct run *r = t->run;
    if (++t->retries > LOAD_RETRIES_MAX) {
        stop(r, "engine %s %s a turn %d times in a row%s", r->c->urls[t->engine], what, t->retries,
             tail);
        return;
    }
    t->group->tally.resubmitted++;
    struct timeval tv = {0, LOAD_RETRY_WAIT_US};
    evtimer_add(t->tool_timer, &tv);
}

/* Counts a good answer into the turn and the group, and goes on: the rest of an aborted turn,
 * or the next turn. */
static void take_answer(struct traj *t, struct load_answer *a)
{
    struct run *r = t->run;
    struct load_step *st = &t->group->tally;
    st->turns++;
    /* A resubmission continues the turn: the record keeps the prompt it first sent (send_turn)
     * and the cache hits of that prompt, and counts every token generated. */
    struct trace_turn *seen = &t->seen[t->turn];
    if (!t->answered)
        seen->cached_tokens = a->cached_tokens;
    t->answered = true;
    seen->generated_tokens += (int64_t)a->n;
    st->prompt_tokens += (int64_t)t->n_ctx;
    st->cached_tokens += a->cached_tokens;
    r->res->served[t->engine]++;
    for (size_t i = 0; i < a->n; i++)
        ctx_push(t, a->ids[i]);
    st->generated_tokens += (int64_t)a->n;
    t->left -= (int64_t)a->n; /* the answer had at most left (load_turn_read) */
    if (!a->aborted || t->left == 0) {
        t->retries = 0;
        next_turn(t);
    } else if (a->n > 0 || r->updates_left > 0) { /* progress, or the update's pause */
        t->retries = 0;
        st->resubmitted++; /* the rest, the partial output in context */
        send_turn(t);
    } else {
        retry_later(t, "aborted", " without a token, outside a weight update");
    }
}

static void on_turn(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct traj *t = arg;
    struct run *r = t->run;
    const char *url = r->c->urls[t->engine];
    t->req = NULL;
    r->in_flight[t->engine]--;
    if (r->failed)
        return;
    if (status == 0) {
        turn_lost(t, error);
        return;
    }
    if (error) { /* it answered, with more than a turn's answer may hold */
        stop(r, "engine %s answered a turn with more than %zu bytes", url, LOAD_ANSWER_MAX_BYTES);
        return;
    }
    if (status == 502 || status == 503) { /* a gateway lost the turn's engine: again, soon */
        char what[32], tail[168];
        snprintf(what, sizeof what, "answered %d to", status);
        snprintf(tail, sizeof tail, "%s%.160s", *body ? ": " : "", body);
        retry_later(t, what, tail);
        return;
    }
    if (status != 200) {
        stop(r, "engine %s answered a turn with status %d: %.160s", url, status, body);
        return;
    }
    struct load_answer a;
    struct load_turn turn = turn_of(t);
    char why[192];
    if (load_turn_read(r->c->style, &turn, body, len, &a, why, sizeof why) != 0) {
        stop(r, "engine %s: its answer to a turn is not one: %s", url, why);
        return;
    }
    take_answer(t, &a);
    free(a.ids);
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
    if (t->seen[t->turn].prompt_tokens == 0) /* its first send (a context is never empty) */
        t->seen[t->turn].prompt_tokens = (int64_t)t->n_ctx;
    struct load_turn turn = turn_of(t);
    struct load_request q;
    load_turn_request(r->c->style, &turn, &q);
    char url[512];
    snprintf(url, sizeof url, "%s%s", r->c->urls[t->engine], q.path);
    r->in_flight[t->engine]++;
    t->req = net_client_request_capped(r->client, "POST", url, q.header, q.body, q.len,
                                       LOAD_ANSWER_MAX_BYTES, on_turn, t);
    free(q.body);
}

/* ---- groups -------------------------------------------------------------------------------- */

/* The records of the group launched index-th: the trace's (cycled), or generated at the fleet's
 * version into the group's arena. */
static void draw_group(struct run *r, struct group *g)
{
    const struct load_config *c = r->c;
    size_t n = (size_t)c->group_size;
    if (c->trace) {
        size_t groups = c->n_trace / n;
        g->recs = &c->trace[(size_t)g->index % groups * n];
        return;
    }
    arena_init(&g->arena, 0);
    struct trace_traj *recs = arena_calloc(&g->arena, n, sizeof *recs);
    for (size_t k = 0; k < n; k++)
        workload_group_traj(&r->gen, g->index, (int64_t)k, g->version, &recs[k], &g->arena);
    g->recs = recs;
}

/* Starts the next group at the fleet's version: every trajectory's first turn. */
static void launch_group(struct run *r)
{
    const struct load_config *c = r->c;
    size_t n = (size_t)c->group_size;
    struct group *g = xcalloc(1, sizeof *g);
    g->run = r;
    g->index = r->res->groups_launched++;
    g->version = r->fleet_version;
    draw_group(r, g);
    g->trajs = xcalloc(n, sizeof *g->trajs);
    g->live = (int)n;
    g->first_s = wall_s();
    vec_push(&r->flying, g);
    for (size_t k = 0; k < n; k++) {
        struct traj *t = &g->trajs[k];
        t->run = r;
        t->group = g;
        t->index = (size_t)g->index * n + k;
        t->rec = &g->recs[k];
        t->engine = -1;
        t->left = played_tokens(t->rec->turns[0].generated_tokens);
        t->tool_timer = evtimer_new(r->base, on_tool_done, t);
        if (c->trajectory_timeout_s > 0) {
            t->timeout = evtimer_new(r->base, on_timeout, t);
            struct timeval tv = load_wall_tv(c->trajectory_timeout_s * c->time_scale);
            evtimer_add(t->timeout, &tv);
        }
        t->seen = xcalloc(t->rec->n_turns, sizeof *t->seen);
        /* Every sample of a group gets the same prompt: the engines' prefix cache shares it. */
        ctx_fill(t, played_tokens(t->rec->turns[0].prompt_tokens), 1, (uint64_t)t->rec->prompt_id,
                 0);
    }
    for (size_t k = 0; k < n && !r->failed; k++) {
        struct traj *t = &g->trajs[k];
        if (t->rec->setup_us > 0) { /* its environment starts first, off the engines */
            struct timeval tv = load_wall_tv((double)t->rec->setup_us * 1e-6 * c->time_scale);
            evtimer_add(t->tool_timer, &tv);
        } else {
            send_turn(t);
        }
    }
}

/* Appends t as the client saw it to the result's trace: its record with the turns it played
 * — every one, or up to the one its timeout cut (sent: without its calls, which it never made;
 * not yet sent: the turns before it) — their prompt, cached and generated tokens measured, its
 * versions, the step and how it ended. One stopped in its setup keeps its first turn, unsent,
 * so that its group stays whole in the trace. */
static void record_traj(struct run *r, const struct traj *t, int64_t step, enum trace_finish finish)
{
    struct trace_traj out = *t->rec;
    bool sent = t->seen[t->turn].prompt_tokens > 0;
    if (t->timed_out)
        out.n_turns = t->turn + (sent || t->turn == 0);
    struct trace_turn *turns = xmallocarray(out.n_turns, sizeof *turns);
    for (size_t k = 0; k < out.n_turns; k++) {
        turns[k] = t->rec->turns[k];
        turns[k].prompt_tokens = t->seen[k].prompt_tokens;
        turns[k].cached_tokens = t->seen[k].cached_tokens;
        turns[k].generated_tokens = t->seen[k].generated_tokens;
        turns[k].timing = (struct trace_turn_timing){0}; /* the input's, not this run's */
    }
    if (t->timed_out && t->turn + 1 == out.n_turns) { /* cut: its calls never made */
        turns[t->turn].n_calls = 0;
        turns[t->turn].calls = NULL;
        if (!sent) /* stopped in its setup: the prompt it had ready */
            turns[0].prompt_tokens = (int64_t)t->n_ctx;
    }
    out.turns = turns;
    out.step = step;
    out.version_start = t->group->version;
    out.version_end = t->version_end;
    out.finish = finish;
    trace_format_traj(&r->res->trace, &out);
    free(turns);
}

/*
 * Records the group's trajectories when asked, with step and the group's fate: completed
 * (trained: each keeps its finish), filtered (the completed ones marked so, as
 * workload_filter_group marks them) or aborted (dropped as too stale: every one).
 */
static void record_group(struct run *r, const struct group *g, int64_t step, enum trace_finish fate)
{
    for (int k = 0; r->c->record && k < r->c->group_size; k++) {
        const struct traj *t = &g->trajs[k];
        enum trace_finish finish = t->timed_out ? TRACE_FINISH_ABORTED : t->rec->finish;
        if (fate == TRACE_FINISH_ABORTED ||
            (fate == TRACE_FINISH_FILTERED && finish == TRACE_FINISH_COMPLETED))
            finish = fate;
        record_traj(r, t, step, finish);
    }
}

static void group_free(struct group *g, int n)
{
    for (int k = 0; k < n; k++) {
        event_free(g->trajs[k].tool_timer);
        if (g->trajs[k].timeout)
            event_free(g->trajs[k].timeout);
        free(g->trajs[k].ctx);
        free(g->trajs[k].seen);
    }
    free(g->trajs);
    arena_free(&g->arena); /* empty with a trace */
    free(g);
}

/* A complete group the job does not train: counted as waste, recorded, replaced (by the next
 * admission: job_admit_limit counts it lost). */
static void drop_group(struct run *r, struct group *g, bool filtered)
{
    r->lost++;
    if (filtered) {
        r->dropped.filtered_groups++;
        r->dropped.filtered_tokens += g->tally.generated_tokens;
    } else {
        r->dropped.stale_groups++;
        r->dropped.stale_tokens += g->tally.generated_tokens;
    }
    record_group(r, g, r->res->n_steps, filtered ? TRACE_FINISH_FILTERED : TRACE_FINISH_ABORTED);
    group_free(g, r->c->group_size);
}

static int by_index(const void *a, const void *b)
{
    int64_t x = (*(struct group *const *)a)->index, y = (*(struct group *const *)b)->index;
    return (x > y) - (x < y);
}

/* The trainer's step on the batch's contexts (r->lens): into st, with the hybrids active. Returns
 * false, the run stopped, when the batch cannot be costed. */
static bool cost_step(struct run *r, struct load_step *st)
{
    const struct load_config *c = r->c;
    st->active_hybrids = r->trainer ? load_trainer_active(r->trainer) : 0;
    if (r->lens.n == 0) { /* every trajectory of the batch timed out: nothing to train */
        st->train_s = 0;
        return true;
    }
    if (c->step_cost(c->step_cost_arg, r->lens.v, r->lens.n, st->active_hybrids, &st->train_s) !=
            0 ||
        !(st->train_s >= 0) || isinf(st->train_s)) {
        stop(r,
             "the trainer's step %lld on %zu trajectories with %d hybrid replicas cannot be "
             "costed",
             (long long)st->step, r->lens.n, st->active_hybrids);
        return false;
    }
    return true;
}

/* The trainer takes the oldest complete groups as the batch of its version: the step's record
 * (the groups' counters, the drops since the previous batch, what training it costs unless it
 * is the last), then the groups, in launch order, to the trace. Returns false when the step
 * cannot be costed (the run stopped). */
static bool take_batch(struct run *r)
{
    size_t n = (size_t)r->c->job.groups_per_batch;
    struct group **batch = r->buffer.v;
    qsort(batch, n, sizeof *batch, by_index);
    struct load_step st = r->dropped;
    st.step = r->version;
    r->lens.n = 0;
    double first = batch[0]->first_s, last = batch[0]->last_s, staleness = 0;
    for (size_t i = 0; i < n; i++) {
        const struct load_step *g = &batch[i]->tally;
        st.trajectories += g->trajectories;
        st.turns += g->turns;
        st.prompt_tokens += g->prompt_tokens;
        st.cached_tokens += g->cached_tokens;
        st.generated_tokens += g->generated_tokens;
        st.resubmitted += g->resubmitted;
        st.timed_out += g->timed_out;
        st.timed_out_tokens += g->timed_out_tokens;
        staleness += (double)(g->trajectories * (r->version - batch[i]->version));
        first = fmin(first, batch[i]->first_s);
        last = fmax(last, batch[i]->last_s);
        for (int k = 0; k < r->c->group_size; k++) {
            size_t ctx = batch[i]->trajs[k].n_ctx;
            if (!batch[i]->trajs[k].timed_out) /* masked: not trained */
                vec_push(&r->lens, ctx > UINT32_MAX ? UINT32_MAX : (uint32_t)ctx);
        }
    }
    st.wall_s = last - first;
    st.mean_staleness = st.trajectories ? staleness / (double)st.trajectories : 0;
    bool costed = r->res->n_steps + 1 == r->c->steps || cost_step(r, &st);
    r->res->steps =
        xreallocarray(r->res->steps, (size_t)r->res->n_steps + 1, sizeof *r->res->steps);
    r->res->steps[r->res->n_steps++] = st;
    if (r->c->steps_done)
        atomic_store(r->c->steps_done, r->res->n_steps);
    memset(&r->dropped, 0, sizeof r->dropped);
    for (size_t i = 0; i < n; i++) {
        record_group(r, batch[i], st.step, TRACE_FINISH_COMPLETED);
        group_free(batch[i], r->c->group_size);
    }
    r->buffer.n -= n;
    memmove(r->buffer.v, r->buffer.v + n, r->buffer.n * sizeof *r->buffer.v);
    return costed;
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
static void updates_done(struct run *r);

/* Sends an update's call c to engine e on client, its answer to done(arg). */
static void send_call(const struct run *r, struct net_client *client, int e,
                      const struct load_call *c, net_response_fn done, void *arg)
{
    char url[512], auth[300] = "";
    snprintf(url, sizeof url, "%s%s", r->c->urls[e], c->path);
    if (r->c->admin_token)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->c->admin_token);
    bool post = strcmp(c->method, "POST") == 0;
    net_client_request(client, c->method, url, auth, post ? c->body : NULL, strlen(c->body), done,
                       arg);
}
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
    if (r->failed) { /* it sends no more of the update: its end frees it */
        update_next(u);
        return;
    }
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

/* The engine's pause (its update's first call) succeeded: a run stopped before the update's
 * end owes it the call that ends the pause, if the update has one. */
static void owe_resume(struct run *r, const struct update *u)
{
    for (int k = 1; k < u->n_phases; k++)
        if (u->calls[k].resumes)
            r->owed[u->engine] = u->calls[k];
}

static void on_update(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct update *u = arg;
    struct run *r = u->run;
    const struct load_call *c = &u->calls[u->phase];
    if (status == 0 || (status == 200 && c->resumes)) /* nothing owed it any more */
        r->owed[u->engine].resumes = false;
    else if (status == 200 && u->phase == 0)
        owe_resume(r, u);
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

/* Frees an engine's update, done or abandoned. */
static void update_free(struct run *r, struct update *u)
{
    for (size_t i = 0; i < r->updates.n; i++)
        if (r->updates.v[i] == u)
            r->updates.v[i] = r->updates.v[--r->updates.n];
    event_free(u->poll);
    free(u);
}

static void update_next(struct update *u)
{
    struct run *r = u->run;
    if (u->phase >= u->n_phases || r->failed) {
        update_free(r, u);
        if (--r->updates_left == 0)
            updates_done(r);
        return;
    }
    const struct load_call *c = &u->calls[u->phase];
    char url[512];
    if (c->group_init) {
        snprintf(url, sizeof url, "%s/libra/v1/engines", r->c->urls[u->engine]);
        net_client_request(r->client, "GET", url, NULL, NULL, 0, on_fleet, u);
        return;
    }
    send_call(r, r->client, u->engine, c, on_update, u);
}

/* Starts a weight update on every live engine; updates_done follows the last to finish. */
static void update_weights(struct run *r)
{
    r->updates_begun++;
    r->updates_left = 1; /* until every engine's update is started */
    for (int i = 0; i < r->c->n_urls; i++) {
        if (r->res->dead[i])
            continue;
        struct update *u = xcalloc(1, sizeof *u);
        *u = (struct update){.run = r, .engine = i};
        u->n_phases =
            load_update_calls(r->c->style, r->c->sync_mode, r->c->nccl, r->updates_begun, u->calls);
        u->poll = evtimer_new(r->base, on_poll, u);
        vec_push(&r->updates, u);
        r->updates_left++;
        update_next(u);
    }
    if (--r->updates_left == 0)
        updates_done(r);
}

/* ---- the job -------------------------------------------------------------------------------- */

/* Whether the trainer may take a batch: not training, and no weight update due or running
 * (the trainer takes part in it). */
static bool trainer_free(const struct run *r)
{
    return !r->training && !releasing(r) && !r->saving && !r->update_due && r->updates_left == 0;
}

/* Launches the groups the job admits at the fleet's version (job_admit_limit_run); none while
 * a weight update is due or running: they start on the new weights. */
static void admit(struct run *r)
{
    const struct load_config *c = r->c;
    if (r->update_due || r->updates_left > 0)
        return;
    int64_t limit = job_admit_limit_run(&c->job, r->fleet_version, r->lost, c->steps);
    while (r->res->groups_launched < limit && !r->failed)
        launch_group(r);
}

/* Drops the complete groups too stale for the trainer's version. */
static void drop_stale(struct run *r)
{
    size_t w = 0;
    for (size_t i = 0; i < r->buffer.n; i++) {
        struct group *g = r->buffer.v[i];
        if (job_fresh(&r->c->job, r->version, g->version))
            r->buffer.v[w++] = g;
        else
            drop_group(r, g, false);
    }
    r->buffer.n = w;
}

/* The trainer, when free, takes its next batch once enough fresh groups are complete and
 * trains on it (the last batch only ends the run); dropped groups are replaced. */
static void try_train(struct run *r)
{
    const struct load_config *c = r->c;
    if (r->failed || !trainer_free(r) || r->res->n_steps == c->steps)
        return;
    drop_stale(r);
    if (r->buffer.n >= (size_t)c->job.groups_per_batch) {
        if (!take_batch(r))
            return;
        if (r->res->n_steps < c->steps) {
            r->training = true;
            if (r->trainer)
                load_trainer_step(r->trainer, true, r->version, 0);
            r->train_wall_s = r->res->steps[r->res->n_steps - 1].train_s * c->time_scale;
            struct timeval tv = load_wall_tv(r->train_wall_s);
            evtimer_add(r->train_timer, &tv);
        }
    }
    admit(r);
}

/* Starts the update a style that waits for its rollout has due, once no group is in flight. */
static void update_when_idle(struct run *r)
{
    if (r->update_due && r->flying.n == 0 && !r->failed) {
        r->update_due = false;
        update_weights(r);
    }
}

/* The weights go out: at once, or once no group is in flight for a style whose update waits for
 * its rollout. */
static void start_update(struct run *r)
{
    if (load_style_update_waits(r->c->style)) {
        r->update_due = true;
        update_when_idle(r); /* or when the last group in flight is done */
    } else {
        update_weights(r);
    }
}

/* The trainer reached a new version: the weights go out when the schedule says so (with a disk
 * transport, after the trainer has written its checkpoint). */
static void on_trained(evutil_socket_t fd, short what, void *arg)
{
    struct run *r = arg;
    r->training = false;
    if (r->trainer)
        load_trainer_step(r->trainer, false, r->version, r->train_wall_s);
    r->version++;
    if (!job_sync_due(&r->c->job, r->version)) {
        try_train(r);
    } else if (r->c->save_s > 0) {
        r->saving = true;
        struct timeval tv = load_wall_tv(r->c->save_s * r->c->time_scale);
        evtimer_add(r->save_timer, &tv);
    } else {
        start_update(r);
    }
    break_when_done(r);
}

/* The trainer's checkpoint is written: the engines may reload it. */
static void on_saved(evutil_socket_t fd, short what, void *arg)
{
    struct run *r = arg;
    r->saving = false;
    start_update(r);
    break_when_done(r);
}

static void updates_done(struct run *r)
{
    if (!r->failed) /* counted once whole: one that failed did not update the fleet */
        r->res->weight_updates++;
    r->fleet_version = r->version;
    try_train(r); /* and admit: the window moved */
    break_when_done(r);
}

/* Whether dynamic sampling drops g: its records' rewards, a timed-out one's taken as 0. */
static bool filtered(const struct run *r, const struct group *g)
{
    size_t n = (size_t)r->c->group_size;
    struct trace_traj *recs = xmallocarray(n, sizeof *recs);
    for (size_t k = 0; k < n; k++) {
        recs[k] = g->recs[k];
        if (g->trajs[k].timed_out) {
            recs[k].finish = TRACE_FINISH_ABORTED;
            recs[k].reward = 0;
        }
    }
    bool out = workload_group_filtered(r->c->dynamic_sampling, recs, n);
    free(recs);
    return out;
}

/* Every trajectory of g finished: dynamic sampling drops it (replaced), or the trainer may take
 * it. */
static void group_done(struct group *g)
{
    struct run *r = g->run;
    size_t i = 0;
    while (r->flying.v[i] != g)
        i++;
    r->flying.v[i] = r->flying.v[--r->flying.n]; /* in no order */
    if (filtered(r, g)) {
        drop_group(r, g, true);
        admit(r);
    } else {
        vec_push(&r->buffer, g);
        try_train(r);
    }
    update_when_idle(r);
    break_when_done(r);
}

/* The trainer freed the replicas it lends: it may take its next batch. */
static void on_boundary_done(void *arg)
{
    struct run *r = arg;
    try_train(r);
    break_when_done(r);
}

static void on_trainer_failed(void *arg, const char *why)
{
    stop(arg, "%s", why);
}

int load_check_source(const struct load_config *c, char *why, size_t size)
{
    size_t n = (size_t)c->group_size, groups = c->trace ? c->n_trace / n : 1;
    if (c->trace && groups == 0) {
        snprintf(why, size, "the trace holds %zu trajectories, fewer than one group of %zu",
                 c->n_trace, n);
        return -1;
    }
    if (!c->trace && !c->workload) {
        snprintf(why, size, "neither a trace nor a workload preset to draw groups from");
        return -1;
    }
    return c->trace && workload_trace_never_fills(c->dynamic_sampling, c->trace, c->n_trace, n, why,
                                                  size)
               ? -1
               : 0;
}

/* Frees the groups a stopped run leaves (a finished one leaves none). */
static void free_groups(struct run *r, group_vec *v)
{
    for (size_t i = 0; i < v->n; i++)
        group_free(v->v[i], r->c->group_size);
    vec_free(v);
}

/* The engines' answers to the resumes a stopped run owes them. */
struct resuming {
    struct event_base *base;
    int waiting; /* answers still to come */
    int refused; /* resumes not answered 200 */
};

static void on_resumed(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct resuming *w = arg;
    w->refused += status != 200;
    if (--w->waiting == 0)
        event_base_loopbreak(w->base);
}

static void on_resume_deadline(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(arg);
}

/* A run stopped between an update's pause and its end: sends each live engine paused by it the
 * call that ends the pause, on a loop of its own (the run's holds the turns and timers it left),
 * for at most LOAD_RESUME_WAIT_S; says in the run's error how many engines may still hold
 * their turns. */
static void resume_owed(struct run *r)
{
    enum { LOAD_RESUME_WAIT_S = 10 }; /* wall seconds (docs/load.md) */
    int owed = 0;
    for (int i = 0; i < r->c->n_urls; i++)
        owed += r->owed[i].resumes && !r->res->dead[i];
    if (!owed)
        return;
    struct resuming w = {.base = event_base_new(), .waiting = owed};
    struct net_client *client = net_client_new(w.base);
    for (int i = 0; i < r->c->n_urls; i++)
        if (r->owed[i].resumes && !r->res->dead[i])
            send_call(r, client, i, &r->owed[i], on_resumed, &w);
    struct event *deadline = evtimer_new(w.base, on_resume_deadline, w.base);
    struct timeval wait = {LOAD_RESUME_WAIT_S, 0};
    evtimer_add(deadline, &wait);
    event_base_dispatch(w.base);
    event_free(deadline);
    net_client_free(client);
    event_base_free(w.base);
    int left = w.waiting + w.refused;
    size_t len = strlen(r->res->error);
    if (left > 0)
        snprintf(r->res->error + len, sizeof r->res->error - len,
                 "; %d of the %d engines paused for the weight update did not resume", left, owed);
}

/* A stopped run: its turns in flight are cancelled (the engines see their client leave) and the
 * timers that would carry the job on are disarmed, so that its loop may run for what is left
 * to deliver. */
static void halt(struct run *r)
{
    for (size_t i = 0; i < r->flying.n; i++)
        for (int k = 0; k < r->c->group_size; k++) {
            struct traj *t = &r->flying.v[i]->trajs[k];
            if (t->req)
                net_transfer_cancel(t->req);
            t->req = NULL;
            evtimer_del(t->tool_timer);
            if (t->timeout)
                evtimer_del(t->timeout);
        }
    evtimer_del(r->train_timer);
    evtimer_del(r->save_timer);
}

/* A stopped run tells the gateway of the trajectories that ended before it stopped, as a
 * finished one does: the loop runs, the job halted, until their finish events are answered,
 * each within LOAD_FINISH_WAIT_S of its sending (a signal meanwhile changes nothing). */
static void deliver_finishes(struct run *r)
{
    halt(r);
    int rc = 0; /* 1: nothing left pending, -1: the loop failed; neither brings an answer */
    while (r->finishing > 0 && rc == 0)
        rc = event_base_loop(r->base, EVLOOP_ONCE);
}

/* A run whose every trajectory reached the timeout trained nothing, which its zeros would not
 * say: an error naming the key, as libra sim's. */
static void check_some_trained(struct run *r)
{
    int64_t trained = 0, timed_out = 0;
    for (int i = 0; i < r->res->n_steps; i++) {
        trained += r->res->steps[i].trajectories;
        timed_out += r->res->steps[i].timed_out;
    }
    if (trained == 0 && timed_out > 0)
        stop(r,
             "rl.trajectory_timeout_s %g s stopped every trajectory of the %d steps (%lld): "
             "nothing trained; the limit must exceed the workload's trajectories",
             r->c->trajectory_timeout_s, r->res->n_steps, (long long)timed_out);
}

int load_run(const struct load_config *c, struct event_base *base, struct net_client *client,
             struct load_result *res)
{
    memset(res, 0, sizeof *res);
    res->served = xcalloc((size_t)c->n_urls, sizeof *res->served);
    res->dead = xcalloc((size_t)c->n_urls, sizeof *res->dead);
    if (load_check_source(c, res->error, sizeof res->error) != 0)
        return -1;
    struct run r = {.c = c, .base = base, .client = client, .res = res};
    if (!c->trace)
        workload_gen_init(&r.gen, c->workload, c->seed);
    r.in_flight = xcalloc((size_t)c->n_urls, sizeof *r.in_flight);
    r.owed = xcalloc((size_t)c->n_urls, sizeof *r.owed);
    r.train_timer = evtimer_new(base, on_trained, &r);
    r.save_timer = evtimer_new(base, on_saved, &r);
    if (c->pool_trainer) {
        struct load_trainer_config tc = {.url = c->urls[0],
                                         .admin_token = c->admin_token,
                                         .release_s = c->release_s,
                                         .retake_s = c->retake_s,
                                         .time_scale = c->time_scale};
        r.trainer =
            load_trainer_new(base, client, &tc,
                             &(struct load_trainer_hooks){on_boundary_done, on_trainer_failed, &r});
    }
    admit(&r);
    if (!r.failed && !run_done(&r))
        event_base_dispatch(base);
    if (!r.failed && !run_done(&r)) { /* a break not ours is the caller's: a signal, say */
        snprintf(res->error, sizeof res->error,
                 event_base_got_break(base)
                     ? "interrupted after %d of %d steps"
                     : "internal: the run stalled after %d of %d steps with nothing in flight",
                 res->n_steps, c->steps);
        r.failed = true;
    }
    if (!r.failed)
        check_some_trained(&r);
    if (r.trainer) {   /* first: a stopped run's loop runs on for the finish events alone */
        if (!r.failed) /* the last step's end reaches the gateway */
            load_trainer_flush(r.trainer, 5.0);
        load_trainer_counts(r.trainer, &res->pool);
        load_trainer_free(r.trainer);
    }
    if (r.failed) {
        deliver_finishes(&r);
        resume_owed(&r);
    }
    free_groups(&r, &r.flying);
    free_groups(&r, &r.buffer);
    event_free(r.train_timer);
    event_free(r.save_timer);
    while (r.updates.n) /* stopped in the middle: their answers will not come */
        update_free(&r, r.updates.v[0]);
    vec_free(&r.updates);
    free(r.in_flight);
    free(r.owed);
    vec_free(&r.lens);
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
