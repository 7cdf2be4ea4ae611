/*
 * The evhttp server (net/http.h). Each client connection gets a record (found by the
 * connection's address) that counts it against the limit and holds the call it is serving, so
 * that whichever comes first — the answer, the client leaving, the cap, the server's end —
 * finishes the call exactly once.
 *
 * Every accepted connection also has a link (made in evhttp's bevcb, holding a reference to
 * its bufferevent) that a sweep checks for the reading deadline: evhttp's own timeout restarts
 * on every byte, so a client that trickles its request would hold a connection for ever.
 *
 * Backpressure reads the connection's bufferevent output buffer: its length is what the client
 * has not taken yet, and a callback on that buffer notices when it drained far enough. That
 * callback runs inside libevent's write path, so it only schedules the owner's (drain_ev).
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "net/query.h"
#include "util/alloc.h"
#include "util/intmap.h"
#include "util/json.h"

/* The most one write to a client may carry (libevent's default: 16 KiB). */
#define NET_MAX_SINGLE_WRITE (1 << 20)

struct net_conn {
    struct net_server *server;
    struct evhttp_connection *evcon;
    struct net_call *call;        /* the call being served, NULL between requests */
    struct net_conn *prev, *next; /* the server's list */
};

/* An accepted connection, from its accept to its end, for the reading deadline. */
struct net_link {
    struct bufferevent *bev; /* a reference of ours; its fd is -1 once evhttp closed it */
    double owing_since_s;    /* monotonic: when it began owing a request */
    bool serving;            /* a request arrived whole; until its answer, nothing is owed */
    bool cut;                /* shut down by the sweep; evhttp frees it on the next read */
    struct net_link *next;
};

struct net_server {
    struct event_base *base;
    struct evhttp *http;
    int port;
    struct net_limits limits;
    const struct net_route *routes;
    net_gate_fn gate;
    void *ctx;
    struct intmap conns;    /* evhttp_connection address -> struct net_conn * */
    struct net_conn *first; /* every connection, for the server's end */
    int n_conns;
    struct net_link *links;            /* every accepted connection */
    struct intmap link_of;             /* bufferevent address -> struct net_link * */
    struct event *sweep;               /* checks the reading deadline */
    struct evhttp_bound_socket *bound; /* the listening socket; NULL once draining */
    bool draining;                     /* net_server_drain: new requests answer 503 */
};

struct net_call {
    struct net_server *server;
    struct net_conn *conn;
    struct evhttp_request *req;
    char *path;
    struct net_kv *query;
    size_t n_query;
    const char *body; /* in the request's input buffer (or ""), NUL-terminated */
    size_t body_len;
    bool deferred, streaming;
    net_cancel_fn cancel;
    void *cancel_arg;
    struct event *cap_timer;    /* while deferred */
    struct event *client_watch; /* while deferred: readable socket = the client left or sent more */
    /* net_stream_on_drain: drain_cb watches the connection's output buffer (drain_buf) and,
     * once it is at most drain_low bytes, makes drain_ev run drain_fn from the loop. */
    void (*drain_fn)(void *arg, struct net_call *c);
    void *drain_arg;
    size_t drain_low;
    struct event *drain_ev;
    struct evbuffer *drain_buf;
    struct evbuffer_cb_entry *drain_cb;
};

void net_limits_default(struct net_limits *l)
{
    *l = (struct net_limits){.max_body_bytes = 64 << 20,
                             .max_header_bytes = 64 << 10,
                             .max_connections = 4096,
                             .request_cap_s = 3600,
                             .request_read_s = 60};
}

struct event_base *net_base_new(void)
{
    struct event_config *cfg = event_config_new();
    if (!cfg)
        return NULL;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- calls ---------------------------------------------------------------------------------- */

/* Forgets a drain registration; the watch leaves the output buffer, which may go with the
 * connection as soon as the call lets go of it. */
static void drain_clear(struct net_call *c)
{
    c->drain_fn = NULL;
    if (c->drain_cb) {
        evbuffer_remove_cb_entry(c->drain_buf, c->drain_cb);
        c->drain_cb = NULL;
        c->drain_buf = NULL;
    }
    if (c->drain_ev)
        event_del(c->drain_ev);
}

static void call_free(struct net_call *c)
{
    if (c->conn && c->conn->call == c)
        c->conn->call = NULL;
    drain_clear(c);
    if (c->drain_ev)
        event_free(c->drain_ev);
    if (c->cap_timer)
        event_free(c->cap_timer);
    if (c->client_watch)
        event_free(c->client_watch);
    net_kv_free(c->query, c->n_query);
    free(c->path);
    free(c);
}

/* Ends a kept call without an answer: its owner hears why, then it is gone. */
static void call_cancel(struct net_call *c, enum net_cancel why)
{
    if (c->cancel)
        c->cancel(c->cancel_arg, c, why);
    call_free(c);
}

const char *net_call_path(const struct net_call *c)
{
    return c->path;
}

const char *net_call_uri(const struct net_call *c)
{
    return evhttp_request_get_uri(c->req);
}

enum net_method net_call_method(const struct net_call *c)
{
    switch (evhttp_request_get_command(c->req)) {
    case EVHTTP_REQ_GET:
        return NET_GET;
    case EVHTTP_REQ_POST:
        return NET_POST;
    case EVHTTP_REQ_PUT:
        return NET_PUT;
    case EVHTTP_REQ_DELETE:
        return NET_DELETE;
    default:
        return 0;
    }
}

const char *net_call_body(struct net_call *c, size_t *len)
{
    *len = c->body_len;
    return c->body;
}

void net_call_drop_body(struct net_call *c)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
    evbuffer_drain(in, evbuffer_get_length(in));
    c->body = "";
    c->body_len = 0;
}

const char *net_call_header(const struct net_call *c, const char *name)
{
    return evhttp_find_header(evhttp_request_get_input_headers(c->req), name);
}

void net_call_add_header(struct net_call *c, const char *name, const char *value)
{
    evhttp_add_header(evhttp_request_get_output_headers(c->req), name, value);
}

const char *net_call_query(const struct net_call *c, const char *key)
{
    for (size_t i = 0; i < c->n_query; i++)
        if (strcmp(c->query[i].key, key) == 0)
            return c->query[i].value;
    return NULL;
}

/* The cap passed: tell the owner, then answer 504 ourselves. */
static void cap_passed(evutil_socket_t fd, short what, void *arg)
{
    struct net_call *c = arg;
    if (c->cancel)
        c->cancel(c->cancel_arg, c, NET_CANCEL_CAP);
    c->cancel = NULL;
    if (c->streaming) { /* the status is sent: all that is left is to stop */
        net_stream_end(c);
        return;
    }
    net_reply_error(c, 504, "timeout", "the request ran past the server's cap of %g s",
                    c->server->limits.request_cap_s);
}

/*
 * The socket of a kept call turned readable: the client closed it (recv returns 0 or fails) or
 * sent its next request early (pipelining: nothing to learn, stop watching). Freeing the
 * connection makes evhttp call conn_closed, which cancels the call.
 */
static void client_readable(evutil_socket_t fd, short what, void *arg)
{
    struct net_call *c = arg;
    char byte;
    ssize_t r = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    event_free(c->client_watch);
    c->client_watch = NULL;
    if (r > 0)
        return;
    evhttp_connection_free(c->conn->evcon);
}

void net_call_defer(struct net_call *c, net_cancel_fn cancel, void *arg)
{
    struct net_server *s = c->server;
    c->cancel = cancel;
    c->cancel_arg = arg;
    if (c->deferred) /* kept already: a new owner, the same cap */
        return;
    c->deferred = true;
    double cap = s->limits.request_cap_s;
    struct timeval tv = {(time_t)cap, (suseconds_t)((cap - (double)(time_t)cap) * 1e6)};
    c->cap_timer = evtimer_new(s->base, cap_passed, c);
    evtimer_add(c->cap_timer, &tv);
    struct bufferevent *bev = evhttp_connection_get_bufferevent(c->conn->evcon);
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    if (fd >= 0) {
        c->client_watch = event_new(s->base, fd, EV_READ | EV_PERSIST, client_readable, c);
        event_add(c->client_watch, NULL);
    }
}

/* ---- links: the reading deadline ------------------------------------------------------------ */

/* evhttp's bevcb: the bufferevent of a connection being accepted, with a link watching it. */
static struct bufferevent *link_new(struct event_base *base, void *arg)
{
    struct net_server *s = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    /* An answer leaves in writes as large as the socket takes, not libevent's 16 KiB each:
     * 64 writev calls fewer for a 1 MiB answer. */
    bufferevent_set_max_single_write(bev, NET_MAX_SINGLE_WRITE);
    bufferevent_incref(bev);
    struct net_link *l = xcalloc(1, sizeof *l);
    *l = (struct net_link){.bev = bev, .owing_since_s = mono_s(), .next = s->links};
    s->links = l;
    intmap_put(&s->link_of, (uint64_t)(uintptr_t)bev, (uint64_t)(uintptr_t)l);
    return bev;
}

/* A request on evcon arrived whole (serving) or was answered (owing again from now). */
static void link_serving(struct net_server *s, struct evhttp_connection *evcon, bool serving)
{
    uint64_t v;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    if (!bev || !intmap_get(&s->link_of, (uint64_t)(uintptr_t)bev, &v))
        return;
    struct net_link *l = (struct net_link *)(uintptr_t)v;
    l->serving = serving;
    l->owing_since_s = mono_s();
}

/* Drops the links evhttp closed; shuts the sockets of those past the deadline (evhttp then
 * reads their end and frees them, cancelling nothing: no call is held on them). The deadline
 * starts once an answer has left: a slow reader of a large answer is not cut. */
static void sweep(evutil_socket_t fd, short what, void *arg)
{
    struct net_server *s = arg;
    (void)fd;
    (void)what;
    double now = mono_s();
    for (struct net_link **p = &s->links; *p;) {
        struct net_link *l = *p;
        evutil_socket_t sock = bufferevent_getfd(l->bev);
        if (sock < 0) {
            *p = l->next;
            intmap_del(&s->link_of, (uint64_t)(uintptr_t)l->bev);
            bufferevent_decref(l->bev);
            free(l);
            continue;
        }
        if (evbuffer_get_length(bufferevent_get_output(l->bev)) > 0)
            l->owing_since_s = now; /* an answer is still being written: nothing is owed yet */
        else if (!l->serving && !l->cut && now - l->owing_since_s > s->limits.request_read_s) {
            shutdown(sock, SHUT_RDWR);
            l->cut = true;
        }
        p = &l->next;
    }
}

static void links_free(struct net_server *s)
{
    while (s->links) {
        struct net_link *l = s->links;
        s->links = l->next;
        bufferevent_decref(l->bev);
        free(l);
    }
    intmap_free(&s->link_of);
    if (s->sweep)
        event_free(s->sweep);
}

/* ---- answers -------------------------------------------------------------------------------- */

/* Detaches c from its connection before evhttp writes: a write that fails frees the
 * connection at once (conn_closed), which must find no call to cancel. */
static struct evhttp_request *take_request(struct net_call *c)
{
    drain_clear(c);
    if (c->conn) {
        c->conn->call = NULL;
        link_serving(c->server, c->conn->evcon, false);
    }
    c->conn = NULL;
    if (c->client_watch) {
        event_free(c->client_watch);
        c->client_watch = NULL;
    }
    return c->req;
}

/* Sets the answer's Content-Type, replacing one added with net_call_add_header. */
static void set_content_type(struct evhttp_request *req, const char *content_type)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (!content_type)
        return;
    evhttp_remove_header(h, "Content-Type");
    evhttp_add_header(h, "Content-Type", content_type);
}

void net_reply_raw(struct net_call *c, int status, const char *content_type, const char *data,
                   size_t len)
{
    struct evhttp_request *req = take_request(c);
    set_content_type(req, content_type);
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add(buf, data, len);
    evhttp_send_reply(req, status, NULL, buf);
    evbuffer_free(buf);
    call_free(c);
}

static void free_data(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
}

void net_reply_owned(struct net_call *c, int status, const char *content_type, char *data,
                     size_t len)
{
    struct evhttp_request *req = take_request(c);
    set_content_type(req, content_type);
    struct evbuffer *buf = evbuffer_new();
    if (evbuffer_add_reference(buf, data, len, free_data, NULL) != 0)
        free(data);
    evhttp_send_reply(req, status, NULL, buf); /* moves the reference: no copy */
    evbuffer_free(buf);
    call_free(c);
}

void net_reply_json(struct net_call *c, int status, json_t *body)
{
    char *text = ujson_dump(body, false);
    json_decref(body);
    net_reply_owned(c, status, "application/json", text, strlen(text));
}

void net_reply_error(struct net_call *c, int status, const char *type, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg, "type", type,
                            "param", "code", status);
    net_reply_json(c, status, err);
}

void net_stream_start(struct net_call *c, int status, const char *content_type)
{
    c->streaming = true;
    struct evkeyvalq *h = evhttp_request_get_output_headers(c->req);
    set_content_type(c->req, content_type);
    if (!evhttp_find_header(h, "Cache-Control"))
        evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(c->req, status, NULL); /* NULL: the status's standard phrase */
}

void net_stream_write(struct net_call *c, const char *data, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add(buf, data, len);
    evhttp_send_reply_chunk(c->req, buf);
    evbuffer_free(buf);
}

void net_stream_end(struct net_call *c)
{
    evhttp_send_reply_end(take_request(c));
    call_free(c);
}

/* The output buffer of c's connection, NULL once c let go of it. */
static struct evbuffer *output_of(const struct net_call *c)
{
    struct bufferevent *bev = c->conn ? evhttp_connection_get_bufferevent(c->conn->evcon) : NULL;
    return bev ? bufferevent_get_output(bev) : NULL;
}

size_t net_stream_pending(const struct net_call *c)
{
    struct evbuffer *out = output_of(c);
    return out ? evbuffer_get_length(out) : 0;
}

/* drain_ev: the output drained to drain_low at some point since the registration. */
static void drain_fire(evutil_socket_t fd, short what, void *arg)
{
    struct net_call *c = arg;
    void (*fn)(void *, struct net_call *) = c->drain_fn;
    c->drain_fn = NULL;
    if (fn)
        fn(c->drain_arg, c); /* may end c */
}

/* The output buffer changed (runs inside libevent's write path: only look, then leave the
 * owner's callback to the loop). */
static void drain_check(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct net_call *c = arg;
    if (!c->drain_fn || evbuffer_get_length(buf) > c->drain_low)
        return;
    evbuffer_cb_clear_flags(buf, c->drain_cb, EVBUFFER_CB_ENABLED);
    event_active(c->drain_ev, EV_TIMEOUT, 0);
}

void net_stream_on_drain(struct net_call *c, size_t low_water,
                         void (*fn)(void *arg, struct net_call *c), void *arg)
{
    drain_clear(c);
    if (!fn)
        return;
    c->drain_fn = fn;
    c->drain_arg = arg;
    c->drain_low = low_water;
    if (!c->drain_ev)
        c->drain_ev = event_new(c->server->base, -1, 0, drain_fire, c);
    struct evbuffer *out = output_of(c);
    if (!out || evbuffer_get_length(out) <= low_water) {
        event_active(c->drain_ev, EV_TIMEOUT, 0);
        return;
    }
    c->drain_buf = out;
    c->drain_cb = evbuffer_add_cb(out, drain_check, c);
}

/* ---- connections ---------------------------------------------------------------------------- */

static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
    struct net_conn *conn = arg;
    struct net_server *s = conn->server;
    intmap_del(&s->conns, (uint64_t)(uintptr_t)evcon);
    s->n_conns--;
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        s->first = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    if (conn->call) {
        struct net_call *c = conn->call;
        struct evhttp_request *req = c->req;
        /* A write that failed mid-stream makes evhttp let go of the request before it frees
         * the connection (it waits for the owner's evhttp_send_reply_end): free it here. */
        bool orphan = evhttp_request_get_connection(req) == NULL;
        c->conn = NULL;
        call_cancel(c, NET_CANCEL_CLIENT_GONE);
        if (orphan)
            evhttp_request_free(req);
    }
    free(conn);
}

/* The record of req's connection, made on its first request. */
static struct net_conn *conn_of(struct net_server *s, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    uint64_t v;
    if (intmap_get(&s->conns, (uint64_t)(uintptr_t)evcon, &v))
        return (struct net_conn *)(uintptr_t)v;
    struct net_conn *conn = xcalloc(1, sizeof *conn);
    *conn = (struct net_conn){.server = s, .evcon = evcon, .next = s->first};
    if (s->first)
        s->first->prev = conn;
    s->first = conn;
    intmap_put(&s->conns, (uint64_t)(uintptr_t)evcon, (uint64_t)(uintptr_t)conn);
    s->n_conns++;
    evhttp_connection_set_closecb(evcon, conn_closed, conn);
    return conn;
}

static const struct net_route *route_of(const struct net_server *s, const char *path)
{
    for (const struct net_route *r = s->routes; r->path; r++) {
        size_t n = strlen(r->path);
        bool prefix = n && r->path[n - 1] == '*';
        if (prefix ? strncmp(r->path, path, n - 1) == 0 : strcmp(r->path, path) == 0)
            return r;
    }
    return NULL;
}

/* Builds the call; answers 400 itself (and returns NULL) for a malformed URI or query. */
static struct net_call *call_new(struct net_server *s, struct evhttp_request *req)
{
    struct net_call *c = xcalloc(1, sizeof *c);
    c->server = s;
    c->req = req;
    c->conn = conn_of(s, req);
    c->conn->call = c;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    c->path = evhttp_uridecode(path && *path ? path : "/", 0, NULL);
    /* The body stays where evhttp read it: one contiguous piece with a NUL after it (pullup
     * copies only a body that arrived in more than one read). */
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    c->body_len = evbuffer_get_length(in);
    evbuffer_add(in, "", 1);
    c->body = (const char *)evbuffer_pullup(in, -1);
    if (!c->path || (query && net_query_parse(query, strlen(query), &c->query, &c->n_query))) {
        net_reply_error(c, 400, "invalid_request_error", "malformed URI or query string");
        return NULL;
    }
    return c;
}

static void handle(struct evhttp_request *req, void *arg)
{
    struct net_server *s = arg;
    struct net_call *c = call_new(s, req);
    if (!c)
        return;
    link_serving(s, evhttp_request_get_connection(req), true);
    if (s->draining) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        net_reply_error(c, 503, "server_error", "the server is stopping");
        return;
    }
    if (s->n_conns > s->limits.max_connections) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        net_reply_error(c, 503, "server_error", "too many connections (at most %d)",
                        s->limits.max_connections);
        return;
    }
    const struct net_route *r = route_of(s, c->path);
    if (!r) {
        net_reply_error(c, 404, "not_found_error", "no such path: %s", c->path);
        return;
    }
    if (!(net_call_method(c) & r->methods)) {
        net_reply_error(c, 405, "invalid_request_error", "method not allowed on %s", c->path);
        return;
    }
    if (!s->gate || !s->gate(s->ctx, c, r->fn))
        r->fn(s->ctx, c);
}

int net_server_new(struct net_server **out, struct event_base *base, const char *host, int port,
                   const struct net_limits *limits, const struct net_route *routes,
                   net_gate_fn gate, void *ctx, char *err, size_t err_size)
{
    struct net_server *s = xcalloc(1, sizeof *s);
    *s = (struct net_server){
        .base = base, .limits = *limits, .routes = routes, .gate = gate, .ctx = ctx};
    s->http = evhttp_new(base);
    evhttp_set_max_body_size(s->http, limits->max_body_bytes);
    evhttp_set_max_headers_size(s->http, limits->max_header_bytes);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                            EVHTTP_REQ_DELETE);
    evhttp_set_gencb(s->http, handle, s);
    evhttp_set_bevcb(s->http, link_new, s);
    double every_s = limits->request_read_s / 4 < 1 ? limits->request_read_s / 4 : 1;
    struct timeval tv = {(time_t)every_s, (suseconds_t)((every_s - (double)(time_t)every_s) * 1e6)};
    s->sweep = event_new(base, -1, EV_PERSIST, sweep, s);
    event_add(s->sweep, &tv);
    struct evhttp_bound_socket *bound = evhttp_bind_socket_with_handle(s->http, host, port);
    s->bound = bound;
    if (!bound) {
        snprintf(err, err_size, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        net_server_free(s);
        *out = NULL;
        return -1;
    }
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr;
    memset(&addr, 0, sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(evhttp_bound_socket_get_fd(bound), &addr.sa, &len);
    s->port = ntohs(addr.sa.sa_family == AF_INET6 ? addr.in6.sin6_port : addr.in4.sin_port);
    *out = s;
    return 0;
}

int net_server_port(const struct net_server *s)
{
    return s->port;
}

void net_server_drain(struct net_server *s)
{
    if (s->bound)
        evhttp_del_accept_socket(s->http, s->bound); /* closes the listening socket */
    s->bound = NULL;
    s->draining = true;
}

/* Bytes queued on conn that the client has not taken yet. */
static size_t conn_pending(const struct net_conn *conn)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(conn->evcon);
    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

size_t net_server_held(const struct net_server *s)
{
    size_t n = 0;
    for (const struct net_conn *conn = s->first; conn; conn = conn->next)
        n += conn->call != NULL || conn_pending(conn) > 0;
    return n;
}

/* Cancels every kept call (their connections go with the evhttp object). */
static void cancel_calls(struct net_server *s)
{
    for (struct net_conn *conn = s->first; conn; conn = conn->next) {
        struct net_call *c = conn->call;
        if (!c)
            continue;
        conn->call = NULL;
        c->conn = NULL;
        call_cancel(c, NET_CANCEL_SHUTDOWN);
    }
}

void net_server_free(struct net_server *s)
{
    if (!s)
        return;
    cancel_calls(s);
    if (s->http)
        evhttp_free(s->http); /* frees the connections: conn_closed frees their records */
    links_free(s);
    intmap_free(&s->conns);
    free(s);
}
