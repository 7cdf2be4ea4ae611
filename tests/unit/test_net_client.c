/*
 * The HTTP/1.1 client (src/net/client.c) against a scripted server on the same event_base:
 * a raw TCP listener that answers each request head with bytes a test chose, written in two
 * parts a few milliseconds apart (so the client reads them apart), or closes, or stays silent.
 * What test_net_proxy.c does not reach through evhttp: framing split at every byte, interim
 * answers, idle connections the peer closed, bodies read to the close, pause and cancel inside
 * data, refused connections and the _within limit.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "net/client.h"

/* ---- the scripted server -------------------------------------------------------------------- */

/* One accepted connection. */
struct peer {
    int fd;
    struct event *rev, *wev, *later;
    char req[8192];
    size_t req_n;
    int requests;
    char *out; /* bytes queued for writing */
    size_t out_n, out_at;
    bool close_when_written;
};

static struct {
    struct event_base *base;
    struct net_client *client;
    int lfd;
    struct event *lev;
    int port;
    char url[128];
    /* the script */
    const char *answer;
    size_t answer_len;
    size_t split;     /* bytes written at once; the rest 2 ms later */
    bool close_after; /* close once the answer is written */
    bool drop_second; /* close a connection at its second request, without answering */
    bool silent;      /* never answer */
    /* what the server saw */
    int accepted, requests, gone;
    struct peer *peers[64]; /* by order of acceptance; NULL once closed */
} S;

static void peer_free(struct peer *p)
{
    for (int i = 0; i < S.accepted; i++)
        if (S.peers[i] == p)
            S.peers[i] = NULL;
    event_free(p->rev);
    event_free(p->wev);
    event_free(p->later);
    close(p->fd);
    free(p->out);
    free(p);
}

/* Writes what p holds; false when p was closed. */
static bool peer_flush(struct peer *p)
{
    while (p->out_at < p->out_n) {
        ssize_t k = write(p->fd, p->out + p->out_at, p->out_n - p->out_at);
        if (k < 0 && errno == EAGAIN) {
            event_add(p->wev, NULL);
            return true;
        }
        if (k <= 0)
            break;
        p->out_at += (size_t)k;
    }
    if (!p->close_when_written)
        return true;
    peer_free(p);
    return false;
}

static void peer_queue(struct peer *p, const char *bytes, size_t n)
{
    p->out = realloc(p->out, p->out_n + n);
    memcpy(p->out + p->out_n, bytes, n);
    p->out_n += n;
}

static void on_peer_writable(evutil_socket_t fd, short what, void *arg)
{
    peer_flush(arg);
}

static void on_peer_later(evutil_socket_t fd, short what, void *arg)
{
    struct peer *p = arg;
    peer_queue(p, S.answer + S.split, S.answer_len - S.split);
    p->close_when_written = S.close_after;
    peer_flush(p);
}

/* A complete request head came on p; false when p was closed. */
static bool peer_request(struct peer *p)
{
    p->requests++;
    S.requests++;
    if (S.silent)
        return true;
    if (S.drop_second && p->requests == 2) {
        peer_free(p);
        return false;
    }
    peer_queue(p, S.answer, S.split);
    struct timeval tv = {0, 2000};
    evtimer_add(p->later, &tv);
    return peer_flush(p);
}

/* Where the first blank line in buf[0, n) ends, or 0. */
static size_t head_end(const char *buf, size_t n)
{
    for (size_t i = 3; i < n; i++)
        if (memcmp(buf + i - 3, "\r\n\r\n", 4) == 0)
            return i + 1;
    return 0;
}

static void on_peer_readable(evutil_socket_t fd, short what, void *arg)
{
    struct peer *p = arg;
    ssize_t k = read(fd, p->req + p->req_n, sizeof p->req - p->req_n);
    if (k <= 0) {
        S.gone++;
        peer_free(p);
        return;
    }
    p->req_n += (size_t)k;
    size_t used;
    while ((used = head_end(p->req, p->req_n))) { /* requests here have no body */
        memmove(p->req, p->req + used, p->req_n - used);
        p->req_n -= used;
        if (!peer_request(p))
            return;
    }
}

static void on_accept(evutil_socket_t fd, short what, void *arg)
{
    int s = accept(fd, NULL, NULL);
    if (s < 0)
        return;
    fcntl(s, F_SETFL, O_NONBLOCK);
    struct peer *p = calloc(1, sizeof *p);
    p->fd = s;
    p->rev = event_new(S.base, s, EV_READ | EV_PERSIST, on_peer_readable, p);
    p->wev = event_new(S.base, s, EV_WRITE, on_peer_writable, p);
    p->later = evtimer_new(S.base, on_peer_later, p);
    event_add(p->rev, NULL);
    S.peers[S.accepted++] = p;
}

static void script(const char *answer, size_t split)
{
    S.answer = answer;
    S.answer_len = strlen(answer);
    S.split = split;
}

static int setup(void **state)
{
    memset(&S, 0, sizeof S);
    S.base = event_base_new();
    S.client = net_client_new(S.base);
    S.lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(S.lfd, (struct sockaddr *)&a, sizeof a) || listen(S.lfd, 16) ||
        getsockname(S.lfd, (struct sockaddr *)&a, &len))
        return -1;
    S.port = ntohs(a.sin_port);
    snprintf(S.url, sizeof S.url, "http://127.0.0.1:%d/x", S.port);
    S.lev = event_new(S.base, S.lfd, EV_READ | EV_PERSIST, on_accept, NULL);
    event_add(S.lev, NULL);
    return 0;
}

static int teardown(void **state)
{
    net_client_free(S.client);
    for (int i = 0; i < S.accepted; i++)
        if (S.peers[i])
            peer_free(S.peers[i]);
    event_free(S.lev);
    close(S.lfd);
    event_base_free(S.base);
    return 0;
}

/* ---- the client's side ---------------------------------------------------------------------- */

/* Runs the loop until *flag is true; fails the test after 10 s. */
static void run_until(const bool *flag)
{
    test_loop_until(S.base, flag, 10);
}

static void run_for(int ms)
{
    test_loop_for(S.base, ms, 10);
}

/* What one streamed transfer told its owner. */
struct rec {
    struct net_transfer *t;
    int heads, status, dones;
    long long length;
    char type[64];
    char *body;
    size_t len;
    bool done;
    char error[256];
    bool in_api;     /* inside a net_client_* call: no callback may run */
    bool pause_each; /* pause after each data, resumed 1 ms later from a timer */
    bool paused;     /* paused by the test, not resumed yet */
    int data_while_paused;
    struct event *resume;
    size_t cancel_after; /* cancel from inside data once this many bytes came (0: never) */
};

static bool rec_head(void *arg, int status, const char *content_type)
{
    struct rec *r = arg;
    if (r->in_api)
        fail_msg("head ran inside an API call");
    r->heads++;
    r->status = status;
    r->length = net_transfer_length(r->t);
    snprintf(r->type, sizeof r->type, "%s", content_type ? content_type : "");
    return true;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    r->paused = false;
    r->in_api = true;
    net_transfer_pause(r->t, false);
    r->in_api = false;
}

static bool rec_data(void *arg, const char *buf, size_t len)
{
    struct rec *r = arg;
    if (r->in_api)
        fail_msg("data ran inside an API call");
    r->data_while_paused += r->paused;
    r->body = realloc(r->body, r->len + len + 1);
    memcpy(r->body + r->len, buf, len);
    r->len += len;
    r->body[r->len] = '\0';
    if (r->cancel_after && r->len >= r->cancel_after) {
        r->in_api = true;
        net_transfer_cancel(r->t);
        r->in_api = false;
        return true; /* cancelled already: nothing more may come */
    }
    if (r->pause_each) {
        r->in_api = true;
        net_transfer_pause(r->t, true);
        r->in_api = false;
        r->paused = true;
        struct timeval tv = {0, 1000};
        evtimer_add(r->resume, &tv);
    }
    return true;
}

static void rec_done(void *arg, const char *error)
{
    struct rec *r = arg;
    if (r->in_api)
        fail_msg("done ran inside an API call");
    r->dones++;
    r->done = true;
    snprintf(r->error, sizeof r->error, "%s", error ? error : "");
}

static const struct net_stream_ops rec_ops = {rec_head, rec_data, rec_done};

static void send_get(struct rec *r, const char *u)
{
    r->resume = evtimer_new(S.base, on_resume, r);
    r->in_api = true;
    r->t = net_client_send(S.client, "GET", u, NULL, 0, NULL, 0, &rec_ops, r);
    r->in_api = false;
}

static void rec_free(struct rec *r)
{
    event_free(r->resume);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* One GET to the scripted server, run to its done. */
static void fetch(struct rec *r)
{
    memset(r, 0, sizeof *r);
    send_get(r, S.url);
    run_until(&r->done);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static const char CHUNKED[] = "HTTP/1.1 200 OK\r\n"
                              "Content-Type: text/event-stream\r\n"
                              "Transfer-Encoding: chunked\r\n"
                              "\r\n"
                              "6;name=value\r\n"
                              "data: \r\n"
                              "b\r\n"
                              "hello world\r\n"
                              "1\r\n"
                              "\n\r\n"
                              "0\r\n"
                              "X-Checksum: 1\r\n"
                              "\r\n";

static void test_chunked_split_at_every_byte(void **state)
{
    size_t n = strlen(CHUNKED);
    for (size_t split = 0; split <= n; split++) {
        script(CHUNKED, split);
        struct rec r;
        fetch(&r);
        assert_string_equal(r.error, "");
        assert_int_equal(r.heads, 1);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.length, -1);
        assert_string_equal(r.type, "text/event-stream");
        assert_int_equal(r.len, 18);
        assert_memory_equal(r.body, "data: hello world\n", 18);
        rec_free(&r);
    }
    assert_int_equal(S.accepted, 1); /* one kept-alive connection carried them all */
    assert_int_equal(S.requests, (int)n + 1);
}

static void test_interim_answer_is_skipped(void **state)
{
    static const char A[] = "HTTP/1.1 100 Continue\r\n\r\n"
                            "HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
                            "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
    script(A, 30);
    struct rec r;
    fetch(&r);
    assert_string_equal(r.error, "");
    assert_int_equal(r.heads, 1);
    assert_int_equal(r.status, 201);
    assert_int_equal(r.length, 2);
    assert_string_equal(r.type, "");
    assert_string_equal(r.body, "ok");
    rec_free(&r);
}

static void test_idle_connection_closed_by_peer_then_next_succeeds(void **state)
{
    script("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none", 5);
    struct rec r;
    fetch(&r);
    assert_string_equal(r.body, "one");
    rec_free(&r);
    assert_non_null(S.peers[0]);
    peer_free(S.peers[0]); /* the server closes the idle connection */
    run_for(20);
    fetch(&r);
    assert_string_equal(r.error, "");
    assert_string_equal(r.body, "one");
    assert_int_equal(S.accepted, 2);
    rec_free(&r);
}

static void test_reused_connection_dropped_is_retried_once(void **state)
{
    script("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo", 40);
    S.drop_second = true; /* closes as the second request arrives: a race the client loses */
    struct rec r;
    fetch(&r);
    assert_string_equal(r.body, "two");
    rec_free(&r);
    fetch(&r);
    assert_string_equal(r.error, "");
    assert_string_equal(r.body, "two");
    assert_int_equal(S.accepted, 2);
    assert_int_equal(S.requests, 3);
    rec_free(&r);
}

static void test_pause_resume_delivers_every_byte_in_order(void **state)
{
    enum { BODY = 3 << 20 };
    static char answer[BODY + 64];
    int head = snprintf(answer, 64, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BODY);
    for (int i = 0; i < BODY; i++)
        answer[head + i] = (char)('a' + (i * 7 + i / 1000) % 26);
    answer[head + BODY] = '\0';
    script(answer, (size_t)head + 1000);
    struct rec r = {0};
    r.pause_each = true;
    send_get(&r, S.url);
    run_until(&r.done);
    assert_string_equal(r.error, "");
    assert_int_equal(r.data_while_paused, 0);
    assert_int_equal(r.len, BODY);
    assert_memory_equal(r.body, answer + head, BODY);
    assert_int_equal(r.dones, 1);
    rec_free(&r);
}

static void test_cancel_inside_data(void **state)
{
    script("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", 43);
    struct rec r = {0};
    r.cancel_after = 1;
    send_get(&r, S.url);
    while (r.len == 0)
        event_base_loop(S.base, EVLOOP_ONCE);
    run_for(20);
    assert_int_equal(r.len, 4); /* the first part only: nothing after the cancel */
    assert_int_equal(r.dones, 0);
    assert_int_equal(S.gone, 1); /* the server saw the connection close */
    rec_free(&r);
    fetch(&r); /* the client goes on */
    assert_string_equal(r.body, "0123456789");
    rec_free(&r);
}

static void test_connection_refused(void **state)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &len), 0);
    close(s); /* a port nobody listens on */
    char u[64], expect[96];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/", ntohs(a.sin_port));
    snprintf(expect, sizeof expect, "connect to 127.0.0.1:%d: Connection refused",
             ntohs(a.sin_port));
    struct rec r = {0};
    send_get(&r, u);
    run_until(&r.done);
    assert_string_equal(r.error, expect);
    assert_int_equal(r.heads, 0);
    rec_free(&r);

    send_get(&r, "https://127.0.0.1:1/"); /* refused without a connect */
    run_until(&r.done);
    assert_non_null(strstr(r.error, "only http://"));
    rec_free(&r);
}

static void test_answer_read_to_close(void **state)
{
    script("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end", 50);
    S.close_after = true;
    struct rec r;
    fetch(&r);
    assert_string_equal(r.error, "");
    assert_int_equal(r.length, -1);
    assert_string_equal(r.type, "text/plain");
    assert_string_equal(r.body, "until the end");
    rec_free(&r);
    fetch(&r); /* a new connection: that one could not be kept */
    assert_string_equal(r.body, "until the end");
    assert_int_equal(S.accepted, 2);
    rec_free(&r);
}

struct outcome {
    bool done;
    int status;
    char error[256];
};

static void on_outcome(void *arg, int status, const char *body, size_t len, const char *error)
{
    struct outcome *o = arg;
    o->done = true;
    o->status = status;
    snprintf(o->error, sizeof o->error, "%s", error ? error : "");
}

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static void test_within_times_out_on_a_silent_server(void **state)
{
    S.silent = true;
    struct outcome o = {0};
    double t0 = now_s();
    net_client_request_within(S.client, "GET", S.url, NULL, NULL, 0, 0.2, on_outcome, &o);
    assert_false(o.done);
    run_until(&o.done);
    double took = now_s() - t0;
    assert_int_equal(o.status, 0);
    assert_string_equal(o.error, "timed out after 200 ms");
    assert_true(took >= 0.19 && took < 5);
    assert_int_equal(S.requests, 1);
    run_for(20);
    assert_int_equal(S.gone, 1); /* the abandoned connection was closed */
}

/* A buffered request cancelled through its handle: its callback never runs, its connection is
 * closed (the server sees the client leave), and what it held is freed (the sanitizers' leak
 * check). */
static void test_buffered_request_cancelled(void **state)
{
    S.silent = true;
    struct outcome o = {0};
    struct net_transfer *t =
        net_client_request(S.client, "POST", S.url, NULL, "{\"a\": 1}", 8, on_outcome, &o);
    assert_non_null(t);
    run_for(20);
    assert_int_equal(S.requests, 1);
    net_transfer_cancel(t);
    run_for(20);
    assert_false(o.done);
    assert_int_equal(S.gone, 1);
}

/* Every spelling of one server's URL gets one key; other servers, ports and paths do not. */
static void test_url_endpoint_keys(void **state)
{
    (void)state;
    static const struct {
        const char *url, *key;
    } cases[] = {
        {"http://127.0.0.1:8000", "127.0.0.1:8000"},
        {"http://localhost:8000/", "127.0.0.1:8000"}, /* /etc/hosts: IPv4 first */
        {"HTTP://LOCALHOST:8000", "127.0.0.1:8000"},
        {"http://127.0.0.1", "127.0.0.1:80"},
        {"http://127.0.0.1:80/v1//", "127.0.0.1:80/v1"},
        {"http://127.0.0.1:80/v1?x=1#y", "127.0.0.1:80/v1"},
        {"http://[::1]:9/a", "[::1]:9/a"},
        {"http://[::ffff:127.0.0.1]:8000", "127.0.0.1:8000"}, /* reaches the IPv4 listener */
        {"http://[::FFFF:7f00:1]:8000/", "127.0.0.1:8000"},
        {"http://127.0.0.1:0", "http://127.0.0.1:0"}, /* refused by net_url_problem: itself */
    };
    char key[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        net_url_endpoint(cases[i].url, key, sizeof key);
        assert_string_equal(key, cases[i].key);
    }
}

/* The first pair of one server's spellings, by index; none among distinct servers or one URL. */
static void test_urls_twins(void **state)
{
    (void)state;
    const char *urls[] = {"http://127.0.0.1:9", "http://127.0.0.1:10", "http://localhost:10/",
                          "http://127.0.0.1:9"};
    size_t a = 99, b = 99;
    assert_true(net_urls_twins(urls, 4, &a, &b));
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_false(net_urls_twins(urls, 2, &a, &b));
    const char *one[] = {"http://no-such-host.invalid:1"}; /* not looked up */
    assert_false(net_urls_twins(one, 1, &a, &b));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_endpoint_keys),
        cmocka_unit_test(test_urls_twins),
        cmocka_unit_test_setup_teardown(test_chunked_split_at_every_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interim_answer_is_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_connection_closed_by_peer_then_next_succeeds,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_reused_connection_dropped_is_retried_once, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_pause_resume_delivers_every_byte_in_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_cancel_inside_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffered_request_cancelled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answer_read_to_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_within_times_out_on_a_silent_server, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
