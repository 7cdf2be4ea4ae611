/*
 * What a byte-for-byte proxy needs from net/ (src/net/http.c, src/net/client.c), over real
 * loopback sockets: one event_base drives a net_server on port 0 and a net_client, so each
 * test plays both ends. Bodies are compared byte for byte against a generator, streamed chunks
 * in order and before done, and cancellation, pause and drain are checked from both sides:
 * the server sees its client leave, no callback runs after a cancel, no data while paused.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/client.h"
#include "net/http.h"

/* ---- bytes ---------------------------------------------------------------------------------- */

/* Byte i of an endless pattern without short periods (a shifted or dropped piece shows). */
static unsigned char pattern(size_t i)
{
    uint32_t x = (uint32_t)i * 0x9E3779B1u + (uint32_t)(i >> 32);
    x ^= x >> 15;
    x *= 0x85EBCA77u;
    x ^= x >> 13;
    return (unsigned char)x;
}

static void fill(char *buf, size_t offset, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)pattern(offset + i);
}

/* How many of len bytes at buf differ from the pattern at offset. */
static size_t mismatches(const char *buf, size_t offset, size_t len)
{
    size_t bad = 0;
    for (size_t i = 0; i < len; i++)
        bad += (unsigned char)buf[i] != pattern(offset + i);
    return bad;
}

/* ---- the two ends --------------------------------------------------------------------------- */

#define BIG_BYTES ((size_t)1 << 20)
#define N_CHUNKS 6
#define CHUNK_TEXT_BYTES 9 /* "chunk-00\n" */
#define FLOOD_BYTES ((size_t)32 << 20)
#define FLOOD_WRITE ((size_t)64 << 10)
#define FLOOD_HIGH ((size_t)1 << 20)
#define FLOOD_LOW ((size_t)256 << 10)

/* Everything both ends share; reset before each test. */
static struct {
    struct event_base *base;
    struct net_server *server;
    struct net_client *client;
    int port;
    char url[512];
    /* /echo */
    char *echo_body;
    size_t echo_len;
    int echo_calls;
    bool echo_expect; /* an Expect header came */
    char echo_type[64];
    /* /stream */
    struct net_call *st_call;
    struct event *st_timer;
    int st_next;          /* chunks written */
    size_t st_written;    /* bytes written */
    size_t st_client_got; /* bytes the client has seen */
    /* /tick */
    struct event *tk_timer;
    bool tk_timer_started;
    bool tk_gone;
    int tk_cancels;
    enum net_cancel tk_why;
    /* /created */
    int cr_drained;
    int cr_drained_inside; /* cr_drained right after net_stream_on_drain returned */
    /* /flood */
    char *fl_chunk;
    size_t fl_sent;
    bool fl_blocked; /* waiting for a drain */
    int fl_waits, fl_drains, fl_early;
    int fl_cancels;
} S;

static const char *url(const char *path)
{
    snprintf(S.url, sizeof S.url, "http://127.0.0.1:%d%s", S.port, path);
    return S.url;
}

/* Runs the loop until *flag is true; fails the test after 20 s. */
static void run_until(const bool *flag)
{
    test_loop_until(S.base, flag, 20);
}

static void run_for(int ms)
{
    test_loop_for(S.base, ms, 20);
}

static void add_ms(struct event *ev, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(ev, &tv);
}

/* ---- server handlers ------------------------------------------------------------------------ */

static void h_big(void *ctx, struct net_call *c)
{
    char *b = malloc(BIG_BYTES);
    fill(b, 0, BIG_BYTES);
    net_reply_raw(c, 200, "application/octet-stream", b, BIG_BYTES);
    free(b);
}

static void h_echo(void *ctx, struct net_call *c)
{
    size_t len;
    const char *body = net_call_body(c, &len);
    assert_int_equal(body[len], '\0'); /* one read or many: the body ends with a NUL */
    free(S.echo_body);
    S.echo_body = malloc(len + 1);
    memcpy(S.echo_body, body, len + 1);
    S.echo_len = len;
    S.echo_calls++;
    S.echo_expect = net_call_header(c, "Expect") != NULL;
    const char *type = net_call_header(c, "Content-Type");
    snprintf(S.echo_type, sizeof S.echo_type, "%s", type ? type : "-");
    net_reply_raw(c, 200, "text/plain", "ok", 2);
}

/* Writes the next chunk only once the client has seen every byte written so far: a client
 * that buffered the answer until its end would never see the stream finish. */
static void stream_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_call *c = S.st_call;
    if (!c)
        return;
    if (S.st_client_got < S.st_written) {
        add_ms(S.st_timer, 2);
        return;
    }
    if (S.st_next == N_CHUNKS) {
        S.st_call = NULL;
        net_stream_end(c);
        return;
    }
    char chunk[16];
    int n = snprintf(chunk, sizeof chunk, "chunk-%02d\n", S.st_next++);
    net_stream_write(c, chunk, (size_t)n);
    S.st_written += (size_t)n;
    add_ms(S.st_timer, 10);
}

static void stream_cancelled(void *arg, struct net_call *c, enum net_cancel why)
{
    S.st_call = NULL;
}

static void h_stream(void *ctx, struct net_call *c)
{
    net_call_defer(c, stream_cancelled, NULL);
    net_stream_start(c, 200, "text/event-stream");
    S.st_call = c;
    S.st_timer = evtimer_new(S.base, stream_tick, NULL);
    add_ms(S.st_timer, 10);
}

/* Writes "tick\n" three times (three HTTP chunks, which the client reads at once) every 5 ms
 * until the client leaves. */
static void tick(evutil_socket_t fd, short what, void *arg)
{
    for (int i = 0; i < 3; i++)
        net_stream_write(arg, "tick\n", 5);
}

static void tick_cancelled(void *arg, struct net_call *c, enum net_cancel why)
{
    S.tk_why = why;
    S.tk_cancels++;
    S.tk_gone = true;
    event_free(S.tk_timer);
    S.tk_timer = NULL;
}

static void h_tick(void *ctx, struct net_call *c)
{
    net_call_defer(c, tick_cancelled, NULL);
    net_stream_start(c, 200, "text/plain");
    S.tk_timer = event_new(S.base, -1, EV_PERSIST, tick, c);
    add_ms(S.tk_timer, 5);
    S.tk_timer_started = true;
}

/* Answers what it found in the request's headers, under headers of its own. */
static void h_headers(void *ctx, struct net_call *c)
{
    const char *a = net_call_header(c, "X-Test-Token");
    const char *b = net_call_header(c, "x-test-TOKEN");
    const char *type = net_call_header(c, "content-type");
    char body[256];
    snprintf(body, sizeof body, "%s|%s|%s", a ? a : "-", b ? b : "-", type ? type : "-");
    net_call_add_header(c, "X-Reply", "yes");
    net_call_add_header(c, "Content-Type", "text/x-mine");
    net_reply_raw(c, 200, NULL, body, strlen(body));
}

static void h_query(void *ctx, struct net_call *c)
{
    const char *a = net_call_query(c, "a"), *bb = net_call_query(c, "bb");
    char body[256];
    snprintf(body, sizeof body, "%s|%s", a ? a : "-", bb ? bb : "-");
    net_reply_raw(c, 200, NULL, body, strlen(body));
}

static void created_drained(void *arg, struct net_call *c)
{
    S.cr_drained++;
    net_stream_write(c, "y", 1);
    net_stream_end(c);
}

static void h_created(void *ctx, struct net_call *c)
{
    net_call_defer(c, NULL, NULL);
    net_stream_start(c, 201, "application/x-ndjson");
    net_stream_write(c, "x", 1);
    net_stream_on_drain(c, (size_t)1 << 30, created_drained, NULL);
    S.cr_drained_inside = S.cr_drained;
}

static void flood_pump(struct net_call *c);

static void flood_drained(void *arg, struct net_call *c)
{
    S.fl_drains++;
    if (net_stream_pending(c) > FLOOD_LOW)
        S.fl_early++;
    S.fl_blocked = false;
    flood_pump(c);
}

/* Writes while the client keeps up (at most FLOOD_HIGH bytes pending), then waits for the
 * pending bytes to drain to FLOOD_LOW. */
static void flood_pump(struct net_call *c)
{
    while (S.fl_sent < FLOOD_BYTES && net_stream_pending(c) <= FLOOD_HIGH) {
        size_t n = FLOOD_BYTES - S.fl_sent < FLOOD_WRITE ? FLOOD_BYTES - S.fl_sent : FLOOD_WRITE;
        fill(S.fl_chunk, S.fl_sent, n);
        net_stream_write(c, S.fl_chunk, n);
        S.fl_sent += n;
    }
    if (S.fl_sent == FLOOD_BYTES) {
        net_stream_end(c);
        return;
    }
    S.fl_blocked = true;
    S.fl_waits++;
    net_stream_on_drain(c, FLOOD_LOW, flood_drained, NULL);
}

static void flood_cancelled(void *arg, struct net_call *c, enum net_cancel why)
{
    S.fl_cancels++;
}

static void h_flood(void *ctx, struct net_call *c)
{
    net_call_defer(c, flood_cancelled, NULL);
    net_stream_start(c, 200, "application/octet-stream");
    flood_pump(c);
}

static const struct net_route routes[] = {
    {"/big", NET_GET, h_big, NULL},
    {"/echo", NET_POST, h_echo, NULL},
    {"/stream", NET_GET, h_stream, NULL},
    {"/tick", NET_GET, h_tick, NULL},
    {"/headers", NET_GET | NET_POST, h_headers, ""},
    {"/created", NET_GET, h_created, NULL},
    {"/flood", NET_GET, h_flood, NULL},
    {"/query", NET_GET, h_query, "a,bb"},
    {NULL, 0, NULL, NULL},
};

static int setup(void **state)
{
    memset(&S, 0, sizeof S);
    S.base = net_base_new();
    struct net_limits limits;
    net_limits_default(&limits);
    char err[256];
    if (net_server_new(&S.server, S.base, "127.0.0.1", 0, &limits, routes, NULL, NULL, err,
                       sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    S.port = net_server_port(S.server);
    S.client = net_client_new(S.base);
    return S.client ? 0 : -1;
}

static int teardown(void **state)
{
    net_client_free(S.client);
    net_server_free(S.server);
    if (S.st_timer)
        event_free(S.st_timer);
    event_base_free(S.base);
    free(S.echo_body);
    free(S.fl_chunk);
    return 0;
}

/* ---- a client that records what it is told -------------------------------------------------- */

struct rec {
    struct net_transfer *t;
    int heads, datas, dones;
    int status;
    char type[64];
    char *buf;
    size_t len, cap;
    char *error;
    bool done;
    char log[32]; /* 'h' head, 'd' data (a run of them once), 'D' done */
    size_t n_log;
    bool cancelled; /* the test cancelled it: nothing may come after */
    int late;       /* callbacks after cancelled, or after done */
    bool (*on_data)(struct rec *r);
    void *ctx;
};

static void rec_log(struct rec *r, char what)
{
    if (what == 'd' && r->n_log > 0 && r->log[r->n_log - 1] == 'd')
        return;
    if (r->n_log + 1 < sizeof r->log)
        r->log[r->n_log++] = what;
}

static bool rec_head(void *arg, int status, const char *content_type)
{
    struct rec *r = arg;
    r->late += r->cancelled || r->done;
    r->heads++;
    r->status = status;
    snprintf(r->type, sizeof r->type, "%s", content_type ? content_type : "-");
    rec_log(r, 'h');
    return true;
}

static bool rec_data(void *arg, const char *data, size_t len)
{
    struct rec *r = arg;
    r->late += r->cancelled || r->done;
    r->datas++;
    if (r->len + len + 1 > r->cap) {
        r->cap = 2 * (r->len + len + 1);
        r->buf = realloc(r->buf, r->cap);
    }
    memcpy(r->buf + r->len, data, len);
    r->len += len;
    r->buf[r->len] = '\0';
    rec_log(r, 'd');
    return r->on_data ? r->on_data(r) : true;
}

static void rec_done(void *arg, const char *error)
{
    struct rec *r = arg;
    r->late += r->cancelled || r->done;
    r->dones++;
    r->error = error ? strdup(error) : NULL;
    r->done = true;
    rec_log(r, 'D');
}

static const struct net_stream_ops rec_ops = {rec_head, rec_data, rec_done};

static void rec_free(struct rec *r)
{
    free(r->buf);
    free(r->error);
}

/* Sends and waits for done. */
static void fetch(struct rec *r, const char *method, const char *path, const char *const *headers,
                  size_t n_headers, const struct net_iov *body, size_t n_body)
{
    r->t =
        net_client_send(S.client, method, url(path), headers, n_headers, body, n_body, &rec_ops, r);
    assert_int_equal(r->heads + r->datas + r->dones, 0); /* nothing from inside the call */
    run_until(&r->done);
    if (r->error)
        fail_msg("%s %s failed: %s", method, path, r->error);
}

/* ---- (1) large bodies both ways ------------------------------------------------------------ */

struct buffered {
    int status;
    char *body;
    size_t len;
    char *error;
    bool done;
};

static void on_response(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct buffered *b = arg;
    b->status = status;
    b->body = malloc(len + 1);
    memcpy(b->body, body, len + 1);
    b->len = len;
    b->error = error ? strdup(error) : NULL;
    b->done = true;
}

static void test_large_bodies_arrive_byte_identical(void **state)
{
    struct rec r = {0};
    fetch(&r, "GET", "/big", NULL, 0, NULL, 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.type, "application/octet-stream");
    assert_int_equal(r.len, BIG_BYTES);
    assert_int_equal(mismatches(r.buf, 0, r.len), 0);
    assert_int_equal(r.heads, 1);
    assert_int_equal(r.dones, 1);
    assert_true(r.datas > 1); /* 1 MiB comes in pieces: it was streamed, not handed over once */
    assert_string_equal(r.log, "hdD");
    rec_free(&r);

    /* 200 KB as two borrowed pieces, cut at an odd offset. */
    size_t n = 200 * 1000, cut = 70001;
    char *src = malloc(n);
    fill(src, 7, n);
    struct net_iov two[2] = {{src, cut}, {src + cut, n - cut}};
    struct rec e = {0};
    fetch(&e, "POST", "/echo", NULL, 0, two, 2);
    assert_int_equal(e.status, 200);
    assert_string_equal(e.buf, "ok");
    assert_int_equal(S.echo_calls, 1);
    assert_int_equal(S.echo_len, n);
    assert_memory_equal(S.echo_body, src, n);
    assert_string_equal(S.echo_type, "application/json");
    rec_free(&e);
    free(src);

    /* 2 MiB in one piece: over the 1 MiB at which curl would ask `Expect: 100-continue`. */
    size_t m = (size_t)2 << 20;
    src = malloc(m);
    fill(src, 3, m);
    struct net_iov one = {src, m};
    struct rec f = {0};
    fetch(&f, "POST", "/echo", NULL, 0, &one, 1);
    assert_int_equal(S.echo_calls, 2);
    assert_int_equal(S.echo_len, m);
    assert_memory_equal(S.echo_body, src, m);
    assert_false(S.echo_expect);
    rec_free(&f);
    free(src);

    /* Three pieces either side of the size up to which pieces are joined and sent with the
     * headers (60 KiB), so that both ways of sending them are taken. */
    for (size_t total = (60u << 10) - 1; total <= (60u << 10) + 1; total++) {
        src = malloc(total);
        fill(src, 11, total);
        struct net_iov pieces[3] = {{src, 1000}, {src + 1000, 0}, {src + 1000, total - 1000}};
        struct rec p = {0};
        fetch(&p, "POST", "/echo", NULL, 0, pieces, 3);
        assert_int_equal(p.status, 200);
        assert_int_equal(S.echo_len, total);
        assert_memory_equal(S.echo_body, src, total);
        rec_free(&p);
        free(src);
    }

    /* Three pieces, one of them empty; and the buffered call on the same engine. */
    struct net_iov three[3] = {{"{\"a\":", 5}, {NULL, 0}, {"1}", 2}};
    struct rec g = {0};
    fetch(&g, "POST", "/echo", NULL, 0, three, 3);
    assert_string_equal(S.echo_body, "{\"a\":1}");
    rec_free(&g);
    struct buffered b = {0};
    net_client_request(S.client, "GET", url("/big"), NULL, NULL, 0, on_response, &b);
    assert_false(b.done);
    run_until(&b.done);
    assert_null(b.error);
    assert_int_equal(b.status, 200);
    assert_int_equal(b.len, BIG_BYTES);
    assert_int_equal(mismatches(b.body, 0, b.len), 0);
    free(b.body);
    free(b.error);
}

/* ---- (2) streaming -------------------------------------------------------------------------- */

static bool stream_seen(struct rec *r)
{
    S.st_client_got = r->len;
    return true;
}

static void test_stream_chunks_arrive_in_order_before_done(void **state)
{
    struct rec r = {.on_data = stream_seen};
    fetch(&r, "GET", "/stream", NULL, 0, NULL, 0);
    char want[N_CHUNKS * CHUNK_TEXT_BYTES + 1] = "";
    for (int i = 0; i < N_CHUNKS; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "chunk-%02d\n", i);
    assert_string_equal(r.buf, want);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.type, "text/event-stream");
    assert_true(r.datas >= N_CHUNKS); /* the server waited for each chunk to arrive */
    assert_string_equal(r.log, "hdD");
    assert_int_equal(r.late, 0);
    rec_free(&r);
}

/* ---- (3) cancel ----------------------------------------------------------------------------- */

enum how_cancel { CANCEL_FROM_LOOP, CANCEL_INSIDE_DATA, CANCEL_RETURN_FALSE };

static void cancel_later(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    r->cancelled = true;
    net_transfer_cancel(r->t);
}

static bool tick_seen(struct rec *r)
{
    enum how_cancel how = *(enum how_cancel *)r->ctx;
    if (r->datas != 1 || r->cancelled)
        return true;
    switch (how) {
    case CANCEL_FROM_LOOP:
        event_base_once(S.base, -1, EV_TIMEOUT, cancel_later, r, &(struct timeval){0, 0});
        return true;
    case CANCEL_INSIDE_DATA:
        r->cancelled = true;
        net_transfer_cancel(r->t);
        return true;
    case CANCEL_RETURN_FALSE:
    default:
        r->cancelled = true;
        return false;
    }
}

static void test_cancel_mid_stream_tells_the_server(void **state)
{
    for (enum how_cancel how = CANCEL_FROM_LOOP; how <= CANCEL_RETURN_FALSE; how++) {
        S.tk_gone = false;
        S.tk_cancels = 0;
        struct rec r = {.on_data = tick_seen, .ctx = &how};
        r.t = net_client_send(S.client, "GET", url("/tick"), NULL, 0, NULL, 0, &rec_ops, &r);
        run_until(&S.tk_gone);
        run_for(30); /* time for anything late to show */
        assert_true(r.cancelled);
        assert_int_equal(S.tk_cancels, 1);
        assert_int_equal(S.tk_why, NET_CANCEL_CLIENT_GONE);
        assert_int_equal(r.heads, 1);
        assert_int_equal(r.dones, 0);
        assert_int_equal(r.late, 0);
        assert_true(r.len >= 5 && strncmp(r.buf, "tick\n", 5) == 0);
        rec_free(&r);
    }
}

/* ---- (4) headers ---------------------------------------------------------------------------- */

struct ev_answer {
    bool done;
    int status;
    char reply[16];
    int n_types;
    char type[64];
    char body[256];
};

static void on_ev_answer(struct evhttp_request *req, void *arg)
{
    struct ev_answer *a = arg;
    a->done = true;
    if (!req)
        return;
    a->status = evhttp_request_get_response_code(req);
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *reply = evhttp_find_header(h, "x-reply");
    snprintf(a->reply, sizeof a->reply, "%s", reply ? reply : "-");
    for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next) {
        if (strcasecmp(kv->key, "Content-Type") == 0) {
            a->n_types++;
            snprintf(a->type, sizeof a->type, "%s", kv->value);
        }
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    if (n >= sizeof a->body)
        n = sizeof a->body - 1;
    evbuffer_remove(in, a->body, n);
    a->body[n] = '\0';
}

static void test_headers_round_trip_case_insensitive(void **state)
{
    struct net_iov body = {"{}", 2};
    const char *mixed[] = {"x-TEST-token: abc"};
    struct rec a = {0};
    fetch(&a, "POST", "/headers", mixed, 1, &body, 1);
    assert_string_equal(a.buf, "abc|abc|application/json");
    assert_string_equal(a.type, "text/x-mine"); /* added by the handler, not replaced */
    rec_free(&a);

    const char *typed[] = {"X-Test-Token: abc", "Content-Type: text/plain"};
    struct rec b = {0};
    fetch(&b, "POST", "/headers", typed, 2, &body, 1);
    assert_string_equal(b.buf, "abc|abc|text/plain"); /* the first Content-Type is the given one */
    rec_free(&b);

    const char *none[] = {"Content-Type:"};
    struct rec c = {0};
    fetch(&c, "POST", "/headers", none, 1, &body, 1);
    assert_string_equal(c.buf, "-|-|-");
    rec_free(&c);

    struct rec d = {0};
    fetch(&d, "GET", "/headers", NULL, 0, NULL, 0);
    assert_string_equal(d.buf, "-|-|-"); /* no body, no Content-Type */
    rec_free(&d);

    /* The answer's own headers, as another HTTP client sees them. */
    struct evhttp_connection *evcon =
        evhttp_connection_base_new(S.base, NULL, "127.0.0.1", (ev_uint16_t)S.port);
    struct ev_answer ans = {0};
    struct evhttp_request *req = evhttp_request_new(on_ev_answer, &ans);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "Host", "127.0.0.1");
    evhttp_add_header(out, "X-TEST-TOKEN", "xyz");
    assert_int_equal(evhttp_make_request(evcon, req, EVHTTP_REQ_GET, "/headers"), 0);
    run_until(&ans.done);
    evhttp_connection_free(evcon);
    assert_int_equal(ans.status, 200);
    assert_string_equal(ans.reply, "yes");
    assert_int_equal(ans.n_types, 1);
    assert_string_equal(ans.type, "text/x-mine");
    assert_string_equal(ans.body, "xyz|xyz|-");
}

/* A route that names its query parameters takes those and answers 400 to any other, unrouted;
 * one that names none ("") takes none. */
static void test_a_route_refuses_query_parameters_it_does_not_read(void **state)
{
    static const struct {
        const char *path;
        int status;
        const char *body; /* its start */
    } cases[] = {
        {"/query", 200, "-|-"},     {"/query?a=1&bb=x%20y", 200, "1|x y"}, {"/query?bb", 200, "-|"},
        {"/query?b=1", 400, "{"},   {"/query?a=1&abb=2", 400, "{"},        {"/headers?x", 400, "{"},
        {"/headers", 200, "-|-|-"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct rec r = {0};
        fetch(&r, "GET", cases[i].path, NULL, 0, NULL, 0);
        assert_int_equal(r.status, cases[i].status);
        assert_non_null(r.buf);
        assert_memory_equal(r.buf, cases[i].body, strlen(cases[i].body));
        if (r.status == 400)
            assert_non_null(strstr(r.buf, "takes no query parameter"));
        rec_free(&r);
    }
}

/* ---- (5) a stream's status ------------------------------------------------------------------ */

static void test_stream_status_and_immediate_drain(void **state)
{
    struct rec r = {0};
    fetch(&r, "GET", "/created", NULL, 0, NULL, 0);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.type, "application/x-ndjson");
    assert_string_equal(r.buf, "xy");
    assert_int_equal(S.cr_drained, 1);
    assert_int_equal(S.cr_drained_inside, 0); /* from the loop, not inside the registration */
    rec_free(&r);
}

/* ---- (6) backpressure ----------------------------------------------------------------------- */

/* A client of /flood that checks the bytes as they pass instead of keeping them. */
struct flood {
    struct net_transfer *t;
    struct event *check;
    int status;
    size_t got, bad; /* bytes seen; of them, bytes that differ from the pattern */
    bool done;
    char *error;
    bool paused;         /* by the test */
    int phase;           /* 0: pause inside data; 2: pause from the loop; odd: paused */
    int held;            /* check ticks spent paused once the server waits */
    int pauses, resumes; /* done */
    int blocked_seen;    /* resumes while the server was still waiting for a drain */
    int data_while_paused;
};

/* While paused: once the server waits for a drain (or wrote everything), stay paused 50 ms
 * more, then resume. */
static void flood_check(evutil_socket_t fd, short what, void *arg)
{
    struct flood *f = arg;
    if ((!S.fl_blocked && S.fl_sent < FLOOD_BYTES) || f->held++ < 10) {
        add_ms(f->check, 5);
        return;
    }
    f->blocked_seen += S.fl_blocked;
    f->held = 0;
    f->paused = false;
    f->resumes++;
    f->phase++;
    net_transfer_pause(f->t, false);
}

static void flood_pause_from_loop(evutil_socket_t fd, short what, void *arg)
{
    struct flood *f = arg;
    if (f->done)
        return;
    net_transfer_pause(f->t, true);
    f->paused = true;
    f->pauses++;
    add_ms(f->check, 5);
}

static bool flood_head(void *arg, int status, const char *content_type)
{
    struct flood *f = arg;
    f->status = status;
    return true;
}

static bool flood_data(void *arg, const char *buf, size_t len)
{
    struct flood *f = arg;
    f->data_while_paused += f->paused;
    f->bad += mismatches(buf, f->got, len);
    f->got += len;
    if (f->phase == 0) {
        net_transfer_pause(f->t, true);
        f->paused = true;
        f->pauses++;
        f->phase = 1;
        add_ms(f->check, 5);
    } else if (f->phase == 2 && f->got >= FLOOD_BYTES / 2) {
        f->phase = 3;
        event_base_once(S.base, -1, EV_TIMEOUT, flood_pause_from_loop, f, &(struct timeval){0, 0});
    }
    return true;
}

static void flood_done(void *arg, const char *error)
{
    struct flood *f = arg;
    f->error = error ? strdup(error) : NULL;
    f->done = true;
}

static const struct net_stream_ops flood_ops = {flood_head, flood_data, flood_done};

static void test_backpressure_pause_resume_and_drain(void **state)
{
    S.fl_chunk = malloc(FLOOD_WRITE);
    struct flood f = {0};
    f.check = evtimer_new(S.base, flood_check, &f);
    f.t = net_client_send(S.client, "GET", url("/flood"), NULL, 0, NULL, 0, &flood_ops, &f);
    run_until(&f.done);
    event_free(f.check);
    print_message("flood: %d waits for a drain, %d resumes while the server waited\n", S.fl_waits,
                  f.blocked_seen);
    if (f.error)
        fail_msg("the flood failed: %s", f.error);
    assert_int_equal(f.status, 200);
    assert_int_equal(f.got, FLOOD_BYTES);
    assert_int_equal(f.bad, 0);
    assert_int_equal(f.pauses, 2); /* once from inside data, once from the loop */
    assert_int_equal(f.resumes, 2);
    assert_int_equal(f.data_while_paused, 0);
    assert_true(f.blocked_seen >= 1); /* the pause reached back to the server's writes */
    assert_true(S.fl_waits >= 1);
    assert_int_equal(S.fl_drains, S.fl_waits); /* every wait ended in a drain */
    assert_int_equal(S.fl_early, 0);           /* and none came above the low water */
    assert_int_equal(S.fl_cancels, 0);
}

/* A transfer paused from the loop, then resumed and cancelled in one callback: the queued
 * resume must not touch it. */
static void resume_and_cancel(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    net_transfer_pause(r->t, false);
    r->cancelled = true;
    net_transfer_cancel(r->t);
}

static void pause_from_loop(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    net_transfer_pause(r->t, true);
    event_base_once(S.base, -1, EV_TIMEOUT, resume_and_cancel, r, &(struct timeval){0, 20000});
}

static bool pause_then_cancel(struct rec *r)
{
    if (r->datas == 1)
        event_base_once(S.base, -1, EV_TIMEOUT, pause_from_loop, r, &(struct timeval){0, 0});
    return true;
}

static void test_cancel_while_resuming(void **state)
{
    struct rec r = {.on_data = pause_then_cancel};
    r.t = net_client_send(S.client, "GET", url("/tick"), NULL, 0, NULL, 0, &rec_ops, &r);
    run_until(&S.tk_gone);
    run_for(30);
    assert_true(r.cancelled);
    assert_int_equal(S.tk_why, NET_CANCEL_CLIENT_GONE);
    assert_int_equal(r.dones, 0);
    assert_int_equal(r.late, 0);
    rec_free(&r);
}

/* net_client_free with transfers in flight: their servers see them leave, their callbacks
 * never run, and what they hold is freed (ASan's leak check). */
static void test_client_free_cancels_in_flight(void **state)
{
    struct buffered b = {0};
    net_client_request(S.client, "GET", url("/tick"), NULL, NULL, 0, on_response, &b);
    struct rec r = {0};
    r.t = net_client_send(S.client, "GET", url("/stream"), NULL, 0, NULL, 0, &rec_ops, &r);
    run_until(&S.tk_timer_started);
    run_for(20);
    net_client_free(S.client);
    S.client = NULL;
    run_until(&S.tk_gone);
    assert_int_equal(S.tk_why, NET_CANCEL_CLIENT_GONE);
    assert_false(b.done);
    assert_int_equal(r.dones, 0);
    rec_free(&r);
}

/* ---- (7) errors ----------------------------------------------------------------------------- */

/* A loopback port nothing listens on (bound, then closed). */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_connect_error_reports_reason(void **state)
{
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/x", closed_port());
    struct net_iov body = {"{}", 2};
    struct rec r = {0};
    r.t = net_client_send(S.client, "POST", u, NULL, 0, &body, 1, &rec_ops, &r);
    assert_int_equal(r.dones, 0); /* never from inside the call */
    run_until(&r.done);
    assert_non_null(r.error);
    assert_true(strlen(r.error) > 0);
    print_message("connect error: %s\n", r.error);
    assert_int_equal(r.heads, 0);
    assert_int_equal(r.datas, 0);
    assert_int_equal(r.dones, 1);
    rec_free(&r);

    struct buffered b = {0};
    net_client_request(S.client, "GET", u, NULL, NULL, 0, on_response, &b);
    run_until(&b.done);
    assert_int_equal(b.status, 0);
    assert_non_null(b.error);
    assert_int_equal(b.len, 0);
    free(b.body);
    free(b.error);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_large_bodies_arrive_byte_identical, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_chunks_arrive_in_order_before_done, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_mid_stream_tells_the_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headers_round_trip_case_insensitive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_status_and_immediate_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_route_refuses_query_parameters_it_does_not_read,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_backpressure_pause_resume_and_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_while_resuming, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_free_cancels_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_error_reports_reason, setup, teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed;
}
