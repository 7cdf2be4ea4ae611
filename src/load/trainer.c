/*
 * `libra load --trainer`: the trainer's side of the elastic pool's handshake (trainer.h).
 *
 * The gateway decides; the trainer only reports its steps and confirms what it was asked,
 * when it has done it. Its calls queue here and go one at a time: a confirmation must reach
 * the gateway before the report of the step that follows it, and a step's end before the next
 * one's begin.
 */
#include "load/trainer.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/alloc.h"
#include "util/vec.h"

#define POLL_WAIT_S 5    /* a long poll waits at most this long */
#define POLL_RETRY_S 0.2 /* after a failed poll */
#define REPLICAS_MAX 64  /* the gateway's GW_POOL_REPLICAS_MAX */

enum call_kind { CALL_STEP, CALL_RELEASED, CALL_RETAKEN };

struct call {
    enum call_kind kind;
    bool begin;      /* CALL_STEP */
    double train_s;  /* CALL_STEP, an end: wall seconds trained */
    int64_t step;    /* the trainer's (before the base is added), or the gateway's */
    int64_t version; /* likewise */
    bool absolute;   /* step and version are the gateway's own */
    int64_t request; /* confirmations */
    int replica;
    int64_t generation;
};

struct request {
    int64_t id;
    bool lend; /* else a reclaim */
    int replica;
    int64_t generation;
    bool ready;
};

struct load_trainer {
    struct event_base *base;
    struct net_client *client;
    struct load_trainer_config c;
    struct load_trainer_hooks hooks;
    bool started;                    /* the first snapshot came: the bases are known */
    int64_t step_base, version_base; /* the gateway's next step and its version then */
    long long changes;               /* of the last snapshot */
    VEC(struct request) requests;    /* of the last snapshot */
    VEC(int64_t) handled;            /* request ids acted on */
    VEC(struct call) queue;          /* not yet sent, oldest first */
    bool sending;                    /* the head of the queue is in flight */
    struct call releasing[REPLICAS_MAX];
    int n_releasing;
    double loaded_at_s[REPLICAS_MAX]; /* wall: a reclaimed replica trains again from then */
    struct event *release_timer, *poll_timer, *flush_timer;
    bool flushing;
    bool stopped; /* a call was refused for good (hooks.failed): nothing more is sent */
    struct load_trainer_counts counts;
    bool held[REPLICAS_MAX]; /* the hybrid replicas it trains on: the first snapshot's active
                              * and activating ones, then those it retook and has not lent */
    bool between;            /* no step is running: requests are acted on as they are ready */
    int64_t boundary;        /* the version the next step will train from */
};

static double wall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct timeval load_wall_tv(double s)
{
    s = s > 0 ? s : 0;
    return (struct timeval){(time_t)s, (suseconds_t)((s - floor(s)) * 1e6)};
}

/* ---- calls, one at a time ------------------------------------------------------------------- */

static void send_next(struct load_trainer *t);

static const char *call_path(enum call_kind kind)
{
    return kind == CALL_STEP ? "step" : "confirm";
}

/* The gateway's error message in body (its error.message, else other) into out. */
static void error_message(const char *body, size_t len, const char *other, char *out, size_t size)
{
    json_t *doc = body ? json_loadb(body, len, 0, NULL) : NULL;
    const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
    snprintf(out, size, "%.200s", msg ? msg : other);
    json_decref(doc);
}

/* A refusal no retry can change: the call is not the trainer's to make (401, 403), is
 * malformed (400) or has nowhere to go (404). A conflict (409) is the pool's state of the
 * moment, and a failure (no answer, 5xx) may pass: those are counted and the trainer goes on. */
static bool lasting(int status)
{
    return status >= 400 && status < 500 && status != 409;
}

/* Call c was refused (or failed): counts it and goes on, or, when no retry can change the
 * refusal, stops the trainer through hooks.failed. Returns whether it goes on. */
static bool refused(struct load_trainer *t, const struct call *c, int status, const char *body,
                    size_t len, const char *error)
{
    char msg[208], why[800];
    error_message(body, len, body && *body ? body : error ? error : "", msg, sizeof msg);
    t->counts.refused++;
    if (lasting(status)) { /* the trainer cannot play its side: the run stops here */
        t->stopped = true;
        snprintf(why, sizeof why,
                 "--trainer: the gateway refused POST %s/libra/v1/pool/%s (%d): %s", t->c.url,
                 call_path(c->kind), status, msg);
        t->hooks.failed(t->hooks.arg, why);
        return false;
    }
    if (c->kind == CALL_RETAKEN) /* the reclaim was cancelled or expired: not ours */
        t->held[c->replica] = false;
    fprintf(stderr, "libra: load: trainer: the gateway refused a pool call (%d): %s\n", status,
            msg);
    return true;
}

static void on_sent(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct load_trainer *t = arg;
    struct call c = t->queue.v[0];
    t->sending = false;
    memmove(t->queue.v, t->queue.v + 1, (t->queue.n - 1) * sizeof *t->queue.v);
    t->queue.n--;
    if (status == 200) {
        t->counts.released += c.kind == CALL_RELEASED;
        t->counts.retaken += c.kind == CALL_RETAKEN;
        t->counts.steps += c.kind == CALL_STEP;
    } else if (!refused(t, &c, status, body, len, error)) {
        return;
    }
    send_next(t);
}

static void send_next(struct load_trainer *t)
{
    if (t->stopped || t->sending || !t->started || t->queue.n == 0) {
        if (t->flushing && t->queue.n == 0 && !t->sending)
            event_base_loopbreak(t->base);
        return;
    }
    const struct call *c = &t->queue.v[0];
    char url[512], body[256], auth[300] = "", train[64] = "";
    int64_t step = c->absolute ? c->step : t->step_base + c->step;
    int64_t version = c->absolute ? c->version : t->version_base + c->version;
    if (c->kind == CALL_STEP && c->train_s > 0)
        snprintf(train, sizeof train, ", \"train_s\": %.9g", c->train_s);
    if (c->kind == CALL_STEP)
        snprintf(body, sizeof body, "{\"step\": %lld, \"version\": %lld, \"phase\": \"%s\"%s}",
                 (long long)step, (long long)version, c->begin ? "begin" : "end", train);
    else if (c->kind == CALL_RELEASED)
        snprintf(body, sizeof body,
                 "{\"event\": \"released\", \"request\": %lld, \"replica\": %d, "
                 "\"generation\": %lld}",
                 (long long)c->request, c->replica, (long long)c->generation);
    else
        snprintf(body, sizeof body,
                 "{\"event\": \"retaken\", \"request\": %lld, \"replica\": %d, "
                 "\"generation\": %lld, \"version\": %lld}",
                 (long long)c->request, c->replica, (long long)c->generation, (long long)version);
    snprintf(url, sizeof url, "%s/libra/v1/pool/%s", t->c.url, call_path(c->kind));
    if (t->c.admin_token)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", t->c.admin_token);
    t->sending = true;
    net_client_request(t->client, "POST", url, auth[0] ? auth : NULL, body, strlen(body), on_sent,
                       t);
}

static void enqueue(struct load_trainer *t, struct call c)
{
    vec_push(&t->queue, c);
    send_next(t);
}

/* ---- the pool, watched ---------------------------------------------------------------------- */

static void poll_pool(struct load_trainer *t);
static void act(struct load_trainer *t);

static void read_requests(struct load_trainer *t, json_t *doc)
{
    json_t *reqs = json_object_get(doc, "requests"), *r;
    size_t i;
    t->requests.n = 0;
    json_array_foreach(reqs, i, r)
    {
        const char *kind = json_string_value(json_object_get(r, "kind"));
        json_int_t replica = json_integer_value(json_object_get(r, "replica"));
        if (!kind || replica < 0 || replica >= REPLICAS_MAX)
            continue;
        struct request q = {
            .id = json_integer_value(json_object_get(r, "request")),
            .lend = strcmp(kind, "lend") == 0,
            .replica = (int)replica,
            .generation = json_integer_value(json_object_get(r, "generation")),
            .ready = json_is_true(json_object_get(r, "ready")),
        };
        vec_push(&t->requests, q);
    }
}

/* The replicas a trainer that stopped left training (the pool makes one that is activating
 * active at the next step's begin). */
static void read_held(struct load_trainer *t, json_t *doc)
{
    json_t *reps = json_object_get(doc, "replicas"), *r;
    size_t i;
    json_array_foreach(reps, i, r)
    {
        const char *join = json_string_value(json_object_get(r, "join"));
        json_int_t h = json_integer_value(json_object_get(r, "replica"));
        if (join && h >= 0 && h < REPLICAS_MAX)
            t->held[h] = strcmp(join, "active") == 0 || strcmp(join, "activating") == 0;
    }
}

int load_trainer_active(const struct load_trainer *t)
{
    double now = wall_now();
    int n = 0;
    for (int h = 0; h < REPLICAS_MAX; h++)
        n += t->held[h] && t->loaded_at_s[h] <= now;
    return n;
}

bool load_trainer_releasing(const struct load_trainer *t)
{
    return t->n_releasing > 0;
}

/* The first snapshot: steps are numbered after the gateway's last; one left open ends. */
static void start(struct load_trainer *t, json_t *doc)
{
    json_t *step = json_object_get(doc, "step");
    int64_t last = json_integer_value(json_object_get(step, "step"));
    int64_t version = json_integer_value(json_object_get(doc, "version"));
    t->step_base = last + 1;
    t->version_base = version;
    if (json_is_true(json_object_get(step, "open"))) {
        struct call c = {.kind = CALL_STEP, .step = last, .version = version, .absolute = true};
        vec_push(&t->queue, c); /* before any of this trainer's */
        memmove(t->queue.v + 1, t->queue.v, (t->queue.n - 1) * sizeof *t->queue.v);
        t->queue.v[0] = c;
        t->version_base = json_integer_value(json_object_get(step, "version")) + 1;
    }
    t->started = true;
    send_next(t);
}

static void on_pool(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct load_trainer *t = arg;
    (void)error;
    if (status == 404) { /* nothing there will ever answer: no pool to play the trainer of */
        char msg[208], why[800];
        error_message(body, len, "no elastic pool there", msg, sizeof msg);
        snprintf(why, sizeof why, "--trainer: GET %s/libra/v1/pool answered 404: %s", t->c.url,
                 msg);
        t->hooks.failed(t->hooks.arg, why);
        return;
    }
    json_t *doc = status == 200 ? json_loadb(body, len, 0, NULL) : NULL;
    if (!doc) {
        struct timeval tv = load_wall_tv(POLL_RETRY_S);
        evtimer_add(t->poll_timer, &tv);
        return;
    }
    t->changes = json_integer_value(json_object_get(doc, "changes"));
    read_requests(t, doc);
    if (!t->started) {
        read_held(t, doc);
        start(t, doc);
    }
    json_decref(doc);
    if (t->between)
        act(t);
    poll_pool(t);
}

static void poll_pool(struct load_trainer *t)
{
    char url[512];
    if (t->started)
        snprintf(url, sizeof url, "%s/libra/v1/pool?after=%lld&wait_s=%d", t->c.url, t->changes,
                 POLL_WAIT_S);
    else
        snprintf(url, sizeof url, "%s/libra/v1/pool", t->c.url);
    net_client_request(t->client, "GET", url, NULL, NULL, 0, on_pool, t);
}

static void on_poll_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    poll_pool(arg);
}

/* ---- steps and boundaries ------------------------------------------------------------------- */

void load_trainer_step(struct load_trainer *t, bool begin, int64_t version, double train_s)
{
    enqueue(t, (struct call){.kind = CALL_STEP,
                             .begin = begin,
                             .train_s = begin ? 0 : train_s,
                             .step = version,
                             .version = version});
    t->between = !begin;
    if (!begin) {
        t->boundary = version + 1;
        act(t);
    }
}

static bool handled(const struct load_trainer *t, int64_t id)
{
    for (size_t i = 0; i < t->handled.n; i++)
        if (t->handled.v[i] == id)
            return true;
    return false;
}

static void on_released(evutil_socket_t fd, short what, void *arg)
{
    struct load_trainer *t = arg;
    (void)fd;
    (void)what;
    for (int i = 0; i < t->n_releasing; i++)
        enqueue(t, t->releasing[i]);
    t->n_releasing = 0;
    t->hooks.boundary_done(t->hooks.arg);
}

/* Between steps: acts on the requests that are ready, unless a release is under way (the next
 * snapshot after it looks again). */
static void act(struct load_trainer *t)
{
    if (t->n_releasing > 0)
        return;
    double now = wall_now();
    for (size_t i = 0; i < t->requests.n; i++) {
        const struct request *q = &t->requests.v[i];
        if (!q->ready || handled(t, q->id) || t->n_releasing == REPLICAS_MAX)
            continue;
        struct call c = {.kind = q->lend ? CALL_RELEASED : CALL_RETAKEN,
                         .request = q->id,
                         .replica = q->replica,
                         .generation = q->generation,
                         .version = t->boundary};
        if (q->lend && t->loaded_at_s[q->replica] > now)
            continue; /* still taking it back: at a later boundary */
        vec_push(&t->handled, q->id);
        t->held[q->replica] = !q->lend;
        if (q->lend) {
            t->releasing[t->n_releasing++] = c;
        } else {
            enqueue(t, c); /* claimed before the GPUs are touched */
            t->loaded_at_s[q->replica] = now + t->c.retake_s * t->c.time_scale;
        }
    }
    if (t->n_releasing == 0)
        return;
    struct timeval tv = load_wall_tv(t->c.release_s * t->c.time_scale);
    evtimer_add(t->release_timer, &tv);
}

/* ---- life ----------------------------------------------------------------------------------- */

struct load_trainer *load_trainer_new(struct event_base *base, struct net_client *client,
                                      const struct load_trainer_config *c,
                                      const struct load_trainer_hooks *hooks)
{
    struct load_trainer *t = xcalloc(1, sizeof *t);
    t->base = base;
    t->client = client;
    t->c = *c;
    t->hooks = *hooks;
    t->release_timer = evtimer_new(base, on_released, t);
    t->poll_timer = evtimer_new(base, on_poll_timer, t);
    t->between = true; /* before its first step */
    poll_pool(t);
    return t;
}

static void on_flush_limit(evutil_socket_t fd, short what, void *arg)
{
    struct load_trainer *t = arg;
    (void)fd;
    (void)what;
    event_base_loopbreak(t->base);
}

void load_trainer_flush(struct load_trainer *t, double limit_s)
{
    if (!t->started || (t->queue.n == 0 && !t->sending))
        return;
    t->flushing = true;
    t->flush_timer = evtimer_new(t->base, on_flush_limit, t);
    struct timeval tv = load_wall_tv(limit_s);
    evtimer_add(t->flush_timer, &tv);
    event_base_dispatch(t->base);
    t->flushing = false;
}

void load_trainer_counts(const struct load_trainer *t, struct load_trainer_counts *out)
{
    *out = t->counts;
}

void load_trainer_free(struct load_trainer *t)
{
    if (!t)
        return;
    event_free(t->release_timer);
    event_free(t->poll_timer);
    if (t->flush_timer)
        event_free(t->flush_timer);
    vec_free(&t->requests);
    vec_free(&t->handled);
    vec_free(&t->queue);
    free(t);
}
