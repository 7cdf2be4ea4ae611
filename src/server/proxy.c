/*
 * One generation request, from arrival to answer: read the routing fields (request.h), route
 * the turn (traj.c), forward the body as bytes without libra's object, and answer with the
 * engine's bytes. A streamed answer (SSE) passes through as it arrives, paused while the
 * client's connection holds more than PROXY_HIGH_WATER bytes, and one its engine cuts ends as
 * cut (net_stream_fail), never as a whole answer; any other answer is held until complete, so
 * that a turn whose engine dies before answering can go, whole, to another engine when the
 * request opted in (libra.resume), and the gateway can read the token counts it learns from.
 * The client going away aborts the engine's transfer.
 *
 * While a pause the gateway forwarded holds (gw_hold), turns are not sent: new requests, turns
 * sent again after an abort (abort-and-resume) and turns moving off a failed engine wait in
 * arrival order, each still under the request cap and cancelled when its client leaves, and go
 * when the fleet carries on (gw_release) — routed then, on the engines as they are then.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"
#include "util/strbuf.h"

#define PROXY_HIGH_WATER ((size_t)4 << 20)   /* bytes queued to a client before pausing */
#define PROXY_LOW_WATER ((size_t)1 << 20)    /* ... and resuming */
#define PROXY_SSE_LINE_MAX ((size_t)4 << 20) /* an SSE line longer than this is not read */
#define PROXY_RESUBMITS_MAX 3                /* engines tried for one turn */
#define PROXY_RESERVE_MAX ((size_t)64 << 20) /* most bytes reserved on an answer's word */

struct proxy {
    struct gw *g;
    struct net_call *call;
    struct net_transfer *xfer;
    struct gw_traj *traj;
    struct sched_decision decision;
    struct gw_engine *engine;   /* referenced; NULL before the turn is routed */
    bool elsewhere;             /* the engine failed: the turn goes to another */
    bool held;                  /* in gw.held */
    struct list_node held_link; /* ... */
    struct list_node turn_link; /* in engine->turns while xfer runs */
    int64_t step; /* the turn goes to engines of this step or later: its trajectory's */
    int tries;
    int sends;      /* to an engine: a turn sent once is timed (the capture's timing) ... */
    bool disturbed; /* ... unless a control call reached its engine meanwhile */
    double start_s; /* gw_now() when last sent */
    double first_s; /* ... when its first streamed chunk came; < 0 before */
    double done_s;  /* ... when its transfer ended */
    int status;
    char content_type[128];
    bool started;   /* streaming answer started */
    VEC(char) body; /* a held answer; or the SSE line being read */
    int64_t generated, cached;
    int64_t sse_chunks;
    char version[GW_VERSION_MAX];
    struct gw_resume resume; /* segments before an abort (abort-and-resume) */
    char *resend;            /* the body asking for the rest, owned */
    size_t resend_len;
    struct gw_request req; /* last: generate clears what comes before it, the parse the rest */
};

static const char *header_of(void *ctx, const char *name)
{
    return net_call_header(ctx, name);
}

/* ---- what an answer says -------------------------------------------------------------------- */

/* The first element of an array member, or nothing. */
static bool first_of(struct jscan_value obj, const char *key, struct jscan_value *out)
{
    struct jscan_value a;
    struct jscan_iter it = {0};
    return jscan_get_lazy(obj, key, &a) && a.type == 'a' && jscan_next(a, &it, out);
}

/* Reads the counts of one answer object (or one SSE chunk): later chunks overwrite. Each
 * member is found once and looked into, since finding one skips every member before it (a
 * 1 MiB answer is mostly output ids, text and log-probs); meta_info and choices are entered
 * without skipping them (jscan_get_lazy), since the counts come before SGLang's log-probs in
 * meta_info and the first choice is all that is read. */
static void read_counts(struct proxy *p, struct jscan_value o)
{
    struct jscan_value meta, usage, v, choice;
    int64_t n;
    if (p->req.api == GW_SGLANG_GENERATE) { /* SGLang: everything is in meta_info */
        if (!jscan_get_lazy(o, "meta_info", &meta) || meta.type != 'o')
            return;
        if (jscan_get(meta, "completion_tokens", &v) && jscan_int(v, &n))
            p->generated = n;
        if (jscan_get(meta, "cached_tokens", &v) && jscan_int(v, &n))
            p->cached = n;
        char text[GW_VERSION_TEXT_MAX]; /* a longer one is known by its key */
        if (jscan_get(meta, "weight_version", &v) && jscan_string(v, text, sizeof text))
            gw_version_key(p->version, text, strlen(text));
        return;
    }
    if (jscan_get(o, "usage", &usage) && usage.type == 'o') { /* vLLM */
        if (jscan_get(usage, "completion_tokens", &v) && jscan_int(v, &n))
            p->generated = n;
        if (jscan_path(usage, "prompt_tokens_details.cached_tokens", &v) && jscan_int(v, &n))
            p->cached = n;
    }
    if (first_of(o, "choices", &choice)) {
        p->sse_chunks++;
        long ids = jscan_get(choice, "token_ids", &v) ? jscan_count(v) : -1;
        if (ids >= 0 && p->req.api == GW_VLLM_GENERATE)
            p->generated = ids;
    }
}

/*
 * Reads an answer's counts without validating it first: a full jscan_check of a 1 MiB answer
 * cost more than the rest of the proxy's work on it, for the four scalars read. On text that
 * is not JSON the scanner stays inside the buffer (util/jscan.h, fuzz_jscan); its answers are
 * then unspecified, but each count is taken only when its value reads as an integer (a
 * version as a string), so the worst a malformed answer does is misreport its own counts.
 * The bytes go to the client as the engine sent them either way.
 */
static void read_answer(struct proxy *p, const char *buf, size_t len)
{
    read_counts(p, jscan_root(buf, len));
}

/* Reads the complete lines of an SSE stream as they pass ("data: {...}"). */
static void read_sse(struct proxy *p, const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n') {
            if (p->body.n < PROXY_SSE_LINE_MAX)
                vec_push(&p->body, buf[i]);
            continue;
        }
        const char *line = p->body.v;
        size_t n = p->body.n;
        if (n > 6 && memcmp(line, "data: ", 6) == 0 && n < PROXY_SSE_LINE_MAX)
            read_answer(p, line + 6, n - 6);
        p->body.n = 0;
    }
}

/* ---- the end of a request ------------------------------------------------------------------- */

/* The engine's transfer ended. */
static void engine_done(struct proxy *p)
{
    list_unlink(&p->engine->turns, &p->turn_link);
    p->done_s = gw_now();
    gw_observe_latency(p->engine, p->done_s - p->start_s);
    gw_engine_turn_done(p->engine);
}

static void unhold(struct proxy *p)
{
    if (!p->held)
        return;
    list_unlink(&p->g->held, &p->held_link);
    p->g->n_held--;
    p->held = false;
}

static void proxy_free(struct proxy *p)
{
    unhold(p);
    gw_engine_unref(p->engine);
    vec_free(&p->body);
    gw_resume_free(&p->resume);
    free(p->resend);
    free(p);
}

static int64_t to_us(double s)
{
    return (int64_t)llround(s * 1e6);
}

/* The turn ended (generated -1: it failed); the call is answered or gone. A turn one engine
 * answered in one transfer, undisturbed, is timed; one sent again (resubmitted, resumed), or
 * in flight while its engine paused or took weights, is not. */
static void end_turn(struct proxy *p, int64_t generated)
{
    struct gw *g = p->g;
    if (generated >= 0 && p->version[0] && p->engine)
        gw_engine_version(g, p->engine, p->version);
    struct trace_turn_timing timing = {0};
    if (generated >= 0 && p->sends == 1 && !p->disturbed && p->engine && p->engine->tp > 0)
        timing = (struct trace_turn_timing){.instance = p->engine->id,
                                            .tp = p->engine->tp,
                                            .sent_us = to_us(p->start_s),
                                            .first_us = p->first_s >= 0 ? to_us(p->first_s) : -1,
                                            .done_us = to_us(p->done_s)};
    gw_turn_end(g, p->traj, &p->req, p->engine, generated, p->cached, &timing);
    proxy_free(p);
}

static void on_cancel(void *arg, struct net_call *c, enum net_cancel why)
{
    struct proxy *p = arg;
    (void)c;
    if (p->xfer) {
        net_transfer_cancel(p->xfer);
        engine_done(p);
    }
    p->g->errors_client_gone += why == NET_CANCEL_CLIENT_GONE;
    end_turn(p, -1);
}

static void add_headers(struct proxy *p)
{
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)p->decision.instance_id);
    net_call_add_header(p->call, "X-Libra-Instance", v);
    snprintf(v, sizeof v, "%d", p->decision.placed_bucket);
    net_call_add_header(p->call, "X-Libra-Bucket", v);
    /* a turn beside its trajectory's running one (no trajectory of its own) had no decision */
    net_call_add_header(p->call, "X-Libra-Decision",
                        p->traj ? sched_reason_name(p->decision.reason) : "none");
}

/* The turn failed for want of an engine's whole answer: the client gets 502, or a stream
 * already started is cut (net_stream_fail). */
static void fail_upstream(struct proxy *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail_upstream(struct proxy *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->g->errors_upstream++;
    if (p->started) /* the client must not take the cut answer for a whole one */
        net_stream_fail(p->call, 502, "upstream_error", "%s; the answer is cut", msg);
    else
        net_reply_error(p->call, 502, "upstream_error", "%s", msg);
    end_turn(p, -1);
}

/* ---- the engine's transfer ------------------------------------------------------------------ */

/* An answer held whole has passed --max-answer-bytes: the transfer stops (cancelled, so done
 * is not called) and the client gets 502, not a gateway that holds what an engine never stops
 * sending. */
static bool answer_too_long(struct proxy *p)
{
    p->xfer = NULL;
    engine_done(p);
    p->engine->errors++;
    fail_upstream(p, "engine %s: its answer passed --max-answer-bytes (%lld)", p->engine->url,
                  (long long)p->g->opt.max_answer_bytes);
    return false;
}

static bool on_head(void *arg, int status, const char *content_type)
{
    struct proxy *p = arg;
    p->status = status;
    snprintf(p->content_type, sizeof p->content_type, "%s",
             content_type ? content_type : "application/json");
    if (!p->req.stream || status != 200) { /* held: sized once when the engine says its length */
        long long n = net_transfer_length(p->xfer);
        if (n > p->g->opt.max_answer_bytes)
            return answer_too_long(p);
        if (n > 0)
            vec_reserve(&p->body, p->body.n + ((size_t)n < PROXY_RESERVE_MAX ? (size_t)n
                                                                             : PROXY_RESERVE_MAX));
        return true;
    }
    add_headers(p);
    net_stream_start(p->call, status, p->content_type);
    p->started = true;
    return true;
}

static void on_drain(void *arg, struct net_call *c)
{
    struct proxy *p = arg;
    (void)c;
    if (p->xfer)
        net_transfer_pause(p->xfer, false);
}

static bool on_data(void *arg, const char *buf, size_t len)
{
    struct proxy *p = arg;
    if (!p->started) {
        if ((int64_t)(p->body.n + len) > p->g->opt.max_answer_bytes)
            return answer_too_long(p);
        vec_reserve(&p->body, p->body.n + len);
        memcpy(p->body.v + p->body.n, buf, len);
        p->body.n += len;
        return true;
    }
    if (p->first_s < 0)
        p->first_s = gw_now();
    read_sse(p, buf, len);
    net_stream_write(p->call, buf, len);
    if (net_stream_pending(p->call) > PROXY_HIGH_WATER) {
        net_transfer_pause(p->xfer, true);
        net_stream_on_drain(p->call, PROXY_LOW_WATER, on_drain, p);
    }
    return true;
}

static void send_turn(struct proxy *p);
static bool resume(struct proxy *p);
static void reply_held(struct proxy *p);
static void go(struct proxy *p);

/* The engine could not be reached or cut the answer before any byte reached the client. */
static bool resubmit(struct proxy *p, const char *error)
{
    struct gw *g = p->g;
    struct gw_engine *e = p->engine;
    gw_engine_failed(e, error);
    e->errors++;
    if (!p->req.resume || p->started || ++p->tries >= PROXY_RESUBMITS_MAX)
        return false;
    if (!g->holding && !gw_engine_pick(g, p->step, e))
        return false;
    fprintf(stderr, "libra: serve: %s failed (%s); the turn goes to another engine\n", e->url,
            error);
    g->resumed++;
    p->elsewhere = true;
    p->body.n = 0;
    go(p);
    return true;
}

/* Answers the held answer (merged with earlier segments when the turn was resumed). */
static void reply_held(struct proxy *p)
{
    const char *body = p->body.v ? p->body.v : "";
    size_t len = p->body.n;
    if (p->status == 200)
        read_answer(p, body, len);
    int64_t generated = p->status == 200 ? (p->generated >= 0 ? p->generated : 0) : -1;
    char *merged = NULL;
    if (p->resume.segments && p->status == 200)
        merged = gw_resume_finish(&p->resume, body, len, p->decision.instance_id, &len, &generated);
    add_headers(p);
    if (merged) {
        net_reply_owned(p->call, p->status, p->content_type, merged, len);
    } else if (p->body.v) { /* the held answer goes out as it is, not copied again */
        net_reply_owned(p->call, p->status, p->content_type, p->body.v, len);
        p->body.v = NULL;
        p->body.n = p->body.cap = 0;
    } else {
        net_reply_raw(p->call, p->status, p->content_type, "", 0);
    }
    end_turn(p, generated);
}

/* An abort with budget left, on a turn that opted in: asks the engine for the rest. */
static bool resume(struct proxy *p)
{
    size_t len, n;
    const char *body = net_call_body(p->call, &len);
    char *next = gw_resume_next(&p->resume, &p->req, body, len, p->body.v ? p->body.v : "",
                                p->body.n, p->decision.instance_id, &n);
    if (!next)
        return false;
    free(p->resend);
    p->resend = next;
    p->resend_len = n;
    p->g->resumed_aborts++;
    p->body.n = 0;
    go(p); /* the same engine, once the gateway no longer holds turns */
    return true;
}

static void on_done(void *arg, const char *error)
{
    struct proxy *p = arg;
    p->xfer = NULL;
    engine_done(p);
    if (error && resubmit(p, error))
        return;
    if (error) {
        fail_upstream(p, "engine %s: %s", p->engine->url, error);
        return;
    }
    if (p->started) {
        net_stream_end(p->call);
        end_turn(p, p->generated >= 0 ? p->generated : p->sse_chunks);
        return;
    }
    if (p->status == 200 && resume(p))
        return;
    reply_held(p);
}

static void send_turn(struct proxy *p)
{
    struct gw *g = p->g;
    struct gw_engine *e = p->engine;
    static const struct net_stream_ops ops = {on_head, on_data, on_done};
    size_t len;
    const char *body = net_call_body(p->call, &len);
    struct net_iov iov[2] = {{body, len}, {NULL, 0}};
    size_t n_iov = 1;
    if (p->resend) { /* the rest of a turn its engine aborted */
        iov[0] = (struct net_iov){p->resend, p->resend_len};
    } else if (p->req.has_libra) { /* the bytes before libra's member and after it */
        iov[0].len = p->req.cut.head_len;
        iov[1] = (struct net_iov){body + p->req.cut.tail_off, len - p->req.cut.tail_off};
        n_iov = 2;
    }
    char url[320];
    snprintf(url, sizeof url, "%s%s", e->url, gw_api_path(p->req.api));
    /* the client's credential goes on whole (a JWT runs to kilobytes); the line is copied */
    const char *auth = net_call_header(p->call, "Authorization");
    struct strbuf auth_line = {0};
    if (auth)
        strbuf_printf(&auth_line, "Authorization: %s", auth);
    const char *headers[2] = {"Content-Type: application/json", auth_line.data};
    gw_engine_turn_start(e);
    p->sends++;
    p->disturbed |= e->loading > 0;
    p->start_s = gw_now();
    p->first_s = -1;
    p->generated = p->cached = -1;
    p->sse_chunks = 0;
    p->xfer = net_client_send(g->client, "POST", url, headers, auth ? 2 : 1, iov, n_iov, &ops, p);
    strbuf_free(&auth_line);
    list_push_front(&e->turns, &p->turn_link);
}

void gw_engine_turns_disturbed(struct gw_engine *e)
{
    for (struct list_node *n = e->turns.front; n; n = n->next)
        list_entry(n, struct proxy, turn_link)->disturbed = true;
}

void gw_engine_turns_fail(struct gw_engine *e)
{
    while (e->turns.front) {
        struct proxy *p = list_entry(e->turns.front, struct proxy, turn_link);
        net_transfer_cancel(p->xfer);
        on_done(p, "the engine was declared dead"); /* off e->turns: engine_done */
    }
}

/* ---- routing, and holding while paused ------------------------------------------------------ */

/* No engine takes the turn: 503, nothing of the request read. */
static void no_engine(struct proxy *p)
{
    p->g->errors_no_engine++;
    if (gw_engine_pick(p->g, 0, NULL)) /* engines take turns, all older than its trajectory's */
        net_reply_error(p->call, 503, "server_error",
                        "no engine that takes turns has weights of step %lld or later, as the "
                        "engine of the trajectory's last turn had: send the turn again once one "
                        "has",
                        (long long)p->step);
    else
        net_reply_error(p->call, 503, "server_error",
                        "no engine takes turns (every one is dead, draining or lent)");
    proxy_free(p);
}

/* Routes a new turn and sends it. */
static void route_new(struct proxy *p)
{
    if (gw_route_busy(p->g, &p->req)) {
        p->g->errors_bad_request++;
        net_reply_error(p->call, 409, "conflict_error",
                        "the request finishes a trajectory whose turn is in flight: send it "
                        "once that turn is answered");
        proxy_free(p);
        return;
    }
    p->step = gw_route_step(p->g, &p->req);
    struct gw_engine *e = NULL;
    if (gw_engine_pick(p->g, p->step, NULL))
        e = gw_route_turn(p->g, &p->req, &p->traj, &p->decision);
    if (!e) {
        no_engine(p);
        return;
    }
    p->engine = gw_engine_ref(e);
    send_turn(p);
}

/* Moves a routed turn to engine e. */
static void move_to(struct proxy *p, struct gw_engine *e)
{
    gw_engine_unref(p->engine);
    p->engine = gw_engine_ref(e);
    gw_turn_moved(p->g, p->traj, &p->decision, e);
}

/* Sends the turn where it goes now, or holds it while the gateway holds turns. */
static void go(struct proxy *p)
{
    struct gw *g = p->g;
    if (g->holding) {
        list_push_front(&g->held, &p->held_link);
        g->n_held++;
        p->held = true;
        return;
    }
    if (!p->engine) {
        route_new(p);
        return;
    }
    if (p->elsewhere || !gw_engine_routable(p->engine)) {
        struct gw_engine *next = gw_engine_pick(g, p->step, p->engine);
        if (!next) {
            fail_upstream(p,
                          "engine %s cannot take the turn, and no other engine of step %lld or "
                          "later (its trajectory's) takes turns",
                          p->engine->url, (long long)p->step);
            return;
        }
        move_to(p, next);
        p->elsewhere = false;
    }
    send_turn(p);
}

void gw_hold(struct gw *g)
{
    g->holding = true;
}

void gw_release(struct gw *g)
{
    g->holding = false;
    while (g->held.back) { /* the oldest first */
        struct proxy *p = list_entry(g->held.back, struct proxy, held_link);
        unhold(p);
        go(p);
    }
}

static void generate(struct gw *g, struct net_call *c, enum gw_api api)
{
    struct proxy *p = xmalloc(sizeof *p);
    memset(p, 0, offsetof(struct proxy, req));
    p->g = g;
    p->call = c;
    size_t len;
    const char *body = net_call_body(c, &len);
    char err[256];
    g->requests[api]++;
    if (gw_request_parse(api, body, len, header_of, c, &g->opt.parse, &p->req, err, sizeof err) !=
        0) {
        g->errors_bad_request++;
        net_reply_error(c, 400, "invalid_request_error", "%s", err);
        proxy_free(p);
        return;
    }
    net_call_defer(c, on_cancel, p);
    go(p);
}

void gw_generate_sglang(void *ctx, struct net_call *c)
{
    generate(ctx, c, GW_SGLANG_GENERATE);
}

void gw_generate_vllm(void *ctx, struct net_call *c)
{
    generate(ctx, c, GW_VLLM_GENERATE);
}

void gw_completions(void *ctx, struct net_call *c)
{
    generate(ctx, c, GW_COMPLETIONS);
}

void gw_chat(void *ctx, struct net_call *c)
{
    generate(ctx, c, GW_CHAT);
}
