/*
 * The HTTP/1.1 server (net/http.h) on bare sockets and libevent's event loop.
 *
 * A connection reads into one buffer, sized at once to the whole request when its head
 * announces a Content-Length (a 200 KB body arrives in a few reads, not fifty 4 KiB ones), and
 * answers by writing at once: an answer leaves in the same turn of the loop as the call that
 * made it, and the socket is watched for writing only while the kernel's buffer is full.
 *
 * A request that arrived whole becomes a call, which holds the connection until answered: the
 * body stays where it was read (the gateway forwards it from there) and nothing more is read
 * meanwhile. A kept call's socket is only peeked at, to notice the client leaving. Whichever
 * comes first — the answer, the client leaving, the cap, the server's end — finishes the call
 * exactly once. A connection is closed only from the loop's own callbacks, never inside a
 * call's owner: a failure found while writing an answer closes it on the next turn.
 */
#include "net/http.h"

#include <errno.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "net/head.h"
#include "net/query.h"
#include "util/alloc.h"
#include "util/json.h"
#include "util/list.h"
#include "util/strbuf.h"

#define READ_MIN (64u << 10) /* room made for each read while the request's size is unknown */
#define WRITE_IOVS 16        /* pieces of output one writev takes */
#define BULK_BYTES READ_MIN  /* a request with a body this large waits for the bulk priority */
#define DISCARD_READS 16     /* reads of a refused request's rest per readiness report */

/* The loop's priorities (net_base_new): events are made at NET_PRIO_NORMAL; a request with a
 * large body is handed to its handler at NET_PRIO_BULK, one per turn of the loop, so that a
 * burst of them (2000 bodies of 200 KB read at once take seconds to parse) does not hold up the
 * small requests, health checks among them, that arrive meanwhile. */
enum { NET_PRIO_NORMAL = 1, NET_PRIO_BULK = 2, NET_PRIOS = 3 };

/* Output the client has not taken yet, in order. */
struct piece {
    char *data; /* owned */
    size_t len, off;
    struct piece *next;
};

struct net_conn {
    struct net_server *server;
    evutil_socket_t fd;
    struct event *rev, *wev;
    struct event *later; /* runs step() from the loop: the next request, or the close */
    struct event *bulk;  /* at NET_PRIO_BULK: hands a large request to its handler */
    bool bulk_due;       /* the bulk event ran: the large request read may be handed over */
    char *in;            /* what was read and not yet consumed */
    size_t in_len, in_cap;
    struct piece *out, *out_last;
    size_t pending; /* bytes queued in out */
    struct net_call *call;
    double owing_since_s; /* monotonic: since when a request is owed (accept, last answer) */
    bool closing;         /* close once the output is sent (Connection: close) */
    bool discarding;      /* refused: the rest of its input is read and dropped (refuse) */
    bool broken;          /* a read or write failed: close from the loop */
    bool stepping;        /* inside step(): a call answered there needs no later */
    bool continued;       /* 100 Continue sent for the request being read */
    bool over_limit;      /* accepted past limits.max_connections: answered 503, then closed */
    /* the request being read */
    bool have_head;
    struct net_head head;
    struct net_chunked chunks;
    size_t chunk_in, chunk_out; /* chunked body: raw bytes consumed, data bytes decoded */
    struct list_node link;      /* in the server's connections */
};

struct net_server {
    struct event_base *base;
    struct evconnlistener *listener; /* NULL once draining */
    int port;
    struct net_limits limits;
    const struct net_route *routes;
    net_gate_fn gate;
    void *ctx;
    struct list conns; /* of struct net_conn: every connection */
    int n_conns;
    struct event *sweep; /* checks the reading deadline */
    bool draining;       /* net_server_drain: new requests answer 503 */
    struct net_errors errors;
};

struct net_call {
    struct net_server *server;
    struct net_conn *conn; /* NULL once answered or the connection went */
    struct net_head head;  /* spans into head_bytes */
    char *head_bytes;      /* the request's head, copied out of the connection's buffer */
    char *path;
    struct net_kv *query;
    size_t n_query;
    enum net_method method;
    bool head_only;   /* a HEAD request: answered as its GET, without the body */
    bool http10;      /* an HTTP/1.0 request: a stream ends with the connection */
    bool close;       /* the connection ends after the answer */
    const char *body; /* in the connection's buffer (or ""), NUL-terminated */
    size_t body_len;
    size_t consumed; /* bytes of the connection's buffer the request took */
    char *next_byte; /* the byte the body's NUL replaced (pipelining), restored after */
    char saved;
    char **add; /* response header lines "Name: value" */
    size_t n_add;
    char *content_type; /* added with net_call_add_header */
    bool has_cache_control;
    bool deferred, streaming;
    bool by_server; /* answered by the server itself: before its handler, or at the cap */
    bool capped;    /* ... at the cap */
    bool failed;    /* an error answer counted in net_errors */
    bool sse;       /* the stream is text/event-stream */
    char end[2];    /* the stream's last two bytes written ("\n\n" before any) */
    net_cancel_fn cancel;
    void *cancel_arg;
    struct event *cap_timer; /* while deferred */
    void (*drain_fn)(void *arg, struct net_call *c);
    void *drain_arg;
    size_t drain_low;
    struct event *drain_ev;
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
    event_config_set_max_dispatch_interval(cfg, NULL, 1, NET_PRIO_BULK);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    if (base && event_base_priority_init(base, NET_PRIOS) != 0) {
        event_base_free(base);
        return NULL;
    }
    return base;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timeval timeval_of(double s)
{
    return (struct timeval){(time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6)};
}

/* ---- output --------------------------------------------------------------------------------- */

static void later(struct net_conn *conn)
{
    event_active(conn->later, EV_TIMEOUT, 0);
}

/* The drain registration of conn's call is due once its output is low enough. */
static void drain_check(struct net_conn *conn)
{
    struct net_call *c = conn->call;
    if (c && c->drain_fn && conn->pending <= c->drain_low)
        event_active(c->drain_ev, EV_TIMEOUT, 0);
}

/* Writes what the socket takes; watches for writing while some is left. */
static void flush(struct net_conn *conn)
{
    while (conn->out && !conn->broken) {
        struct iovec iov[WRITE_IOVS];
        int n = 0;
        for (struct piece *p = conn->out; p && n < WRITE_IOVS; p = p->next)
            iov[n++] = (struct iovec){p->data + p->off, p->len - p->off};
        ssize_t w = writev(conn->fd, iov, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            event_add(conn->wev, NULL);
            return;
        }
        if (w < 0) {
            conn->broken = true;
            later(conn);
            return;
        }
        conn->pending -= (size_t)w;
        while (w > 0 && conn->out) { /* the written bytes are the queue's first */
            struct piece *p = conn->out;
            size_t take = p->len - p->off < (size_t)w ? p->len - p->off : (size_t)w;
            p->off += take;
            w -= (ssize_t)take;
            if (p->off == p->len) {
                conn->out = p->next;
                free(p->data);
                free(p);
            }
        }
    }
    if (!conn->out) {
        conn->out_last = NULL;
        event_del(conn->wev);
        if (conn->closing && !conn->call)
            later(conn);
    }
    drain_check(conn);
}

/* Queues len bytes of data (taken: freed once sent) and writes what the socket takes now. */
static void send_owned(struct net_conn *conn, char *data, size_t len)
{
    if (len == 0 || conn->broken) {
        free(data);
        return;
    }
    struct piece *p = xmalloc(sizeof *p);
    *p = (struct piece){.data = data, .len = len};
    if (conn->out_last)
        conn->out_last->next = p;
    else
        conn->out = p;
    conn->out_last = p;
    conn->pending += len;
    if (!event_pending(conn->wev, EV_WRITE, NULL))
        flush(conn);
}

static void send_copy(struct net_conn *conn, const char *data, size_t len)
{
    char *copy = xmalloc(len ? len : 1);
    memcpy(copy, data, len);
    send_owned(conn, copy, len);
}

/* ---- calls ---------------------------------------------------------------------------------- */

static void drain_clear(struct net_call *c)
{
    c->drain_fn = NULL;
    if (c->drain_ev)
        event_del(c->drain_ev);
}

static void call_free(struct net_call *c)
{
    drain_clear(c);
    if (c->drain_ev)
        event_free(c->drain_ev);
    if (c->cap_timer)
        event_free(c->cap_timer);
    for (size_t i = 0; i < c->n_add; i++)
        free(c->add[i]);
    free(c->add);
    free(c->content_type);
    net_kv_free(c->query, c->n_query);
    free(c->path);
    free(c->head_bytes);
    free(c);
}

/* Ends a kept call without an answer: its owner hears why, then it is gone. */
static void call_cancel(struct net_call *c, enum net_cancel why)
{
    if (c->cancel)
        c->cancel(c->cancel_arg, c, why);
    call_free(c);
}

/* The call's request leaves the connection's buffer; the connection owes the next one. */
static void release_input(struct net_conn *conn, struct net_call *c)
{
    if (c->next_byte)
        *c->next_byte = c->saved;
    size_t rest = conn->in_len - c->consumed;
    if (rest)
        memmove(conn->in, conn->in + c->consumed, rest);
    conn->in_len = rest;
    conn->have_head = false;
    conn->continued = false;
}

/* c's answer is queued in full: the connection lets go of it and reads the next request. */
static void call_done(struct net_call *c)
{
    struct net_conn *conn = c->conn;
    drain_clear(c);
    if (!conn)
        return;
    c->conn = NULL;
    conn->call = NULL;
    release_input(conn, c);
    conn->owing_since_s = mono_s();
    conn->closing |= c->close;
    event_add(conn->rev, NULL);
    if (!conn->stepping && (conn->in_len || (conn->closing && !conn->out)))
        later(conn);
}

const char *net_call_path(const struct net_call *c)
{
    return c->path;
}

const char *net_call_uri(const struct net_call *c)
{
    return c->head.start[1].p;
}

enum net_method net_call_method(const struct net_call *c)
{
    return c->method;
}

const char *net_call_body(struct net_call *c, size_t *len)
{
    *len = c->body_len;
    return c->body;
}

void net_call_drop_body(struct net_call *c)
{
    struct net_conn *conn = c->conn;
    c->body = "";
    c->body_len = 0;
    if (!conn || c->consumed == 0)
        return;
    release_input(conn, c); /* keeps what came after the request, if anything */
    c->next_byte = NULL;
    c->consumed = 0;
    if (conn->in_len == 0) {
        free(conn->in);
        conn->in = NULL;
        conn->in_cap = 0;
    }
}

const char *net_call_header(const struct net_call *c, const char *name)
{
    size_t n;
    return net_head_field(&c->head, name, &n);
}

static bool header_safe(const char *s)
{
    return !strpbrk(s, "\r\n");
}

void net_call_add_header(struct net_call *c, const char *name, const char *value)
{
    if (!header_safe(name) || !header_safe(value) || !*name || strchr(name, ':'))
        return;
    if (strcasecmp(name, "Content-Type") == 0) {
        free(c->content_type);
        c->content_type = xstrdup(value);
        return;
    }
    c->has_cache_control |= strcasecmp(name, "Cache-Control") == 0;
    if (strcasecmp(name, "Connection") == 0 && strcasecmp(value, "close") == 0)
        c->close = true;
    struct strbuf line = {0};
    strbuf_puts(&line, name);
    strbuf_add(&line, ": ", 2);
    strbuf_puts(&line, value);
    c->add = xreallocarray(c->add, c->n_add + 1, sizeof *c->add);
    c->add[c->n_add++] = strbuf_detach(&line);
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
    (void)fd;
    (void)what;
    struct net_call *c = arg;
    if (c->cancel)
        c->cancel(c->cancel_arg, c, NET_CANCEL_CAP);
    c->cancel = NULL;
    c->by_server = c->capped = true;
    double cap = c->server->limits.request_cap_s;
    if (c->streaming) /* the status is sent: the stream can only say it is cut */
        net_stream_fail(c, 504, "timeout", "the request ran past the server's cap of %g s", cap);
    else
        net_reply_error(c, 504, "timeout", "the request ran past the server's cap of %g s", cap);
}

void net_call_defer(struct net_call *c, net_cancel_fn cancel, void *arg)
{
    c->cancel = cancel;
    c->cancel_arg = arg;
    if (c->deferred) /* kept already: a new owner, the same cap */
        return;
    c->deferred = true;
    struct timeval tv = timeval_of(c->server->limits.request_cap_s);
    c->cap_timer = evtimer_new(c->server->base, cap_passed, c);
    evtimer_add(c->cap_timer, &tv);
}

/* ---- answers -------------------------------------------------------------------------------- */

static const char *reason_of(int status)
{
    static const struct {
        int status;
        const char *reason;
    } reasons[] = {{200, "OK"},
                   {201, "Created"},
                   {202, "Accepted"},
                   {204, "No Content"},
                   {400, "Bad Request"},
                   {401, "Unauthorized"},
                   {403, "Forbidden"},
                   {404, "Not Found"},
                   {405, "Method Not Allowed"},
                   {408, "Request Timeout"},
                   {409, "Conflict"},
                   {413, "Content Too Large"},
                   {422, "Unprocessable Content"},
                   {429, "Too Many Requests"},
                   {500, "Internal Server Error"},
                   {501, "Not Implemented"},
                   {502, "Bad Gateway"},
                   {503, "Service Unavailable"},
                   {504, "Gateway Timeout"}};
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++)
        if (reasons[i].status == status)
            return reasons[i].reason;
    return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
}

/* Appends the decimal digits of v. */
static void put_uint(struct strbuf *b, unsigned long long v)
{
    char digits[24], *p = digits + sizeof digits;
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    strbuf_add(b, p, (size_t)(digits + sizeof digits - p));
}

static void put_field(struct strbuf *b, const char *name, const char *value)
{
    strbuf_puts(b, name);
    strbuf_puts(b, value);
    strbuf_add(b, "\r\n", 2);
}

/* The status line and headers of c's answer; framing: a Content-Length of len (len >= 0),
 * chunked (-1), the body ends with the connection (-2), or no body at all (-3). Built without
 * printf: it is a tenth of a small request's work otherwise. */
static char *head_of(const struct net_call *c, int status, const char *content_type, long long len,
                     size_t *out_len)
{
    struct strbuf b = {0};
    strbuf_add(&b, "HTTP/1.1 ", 9);
    put_uint(&b, (unsigned)status);
    strbuf_add(&b, " ", 1);
    strbuf_puts(&b, reason_of(status));
    strbuf_add(&b, "\r\n", 2);
    for (size_t i = 0; i < c->n_add; i++)
        put_field(&b, c->add[i], "");
    if (content_type)
        put_field(&b, "Content-Type: ", content_type);
    if (len >= 0) {
        strbuf_puts(&b, "Content-Length: ");
        put_uint(&b, (unsigned long long)len);
        strbuf_add(&b, "\r\n", 2);
    } else if (len == -1) {
        strbuf_puts(&b, "Transfer-Encoding: chunked\r\n");
    }
    if (c->close || len == -2)
        strbuf_puts(&b, "Connection: close\r\n");
    else if (c->http10)
        strbuf_puts(&b, "Connection: keep-alive\r\n");
    strbuf_add(&b, "\r\n", 2);
    *out_len = b.len;
    return strbuf_detach(&b);
}

/* Counts c's error answer (status >= 400, or a stream cut) once, by who gave it; a call whose
 * client is gone gets no answer and is not counted. */
static void count_error(struct net_call *c)
{
    if (!c->conn || c->failed)
        return;
    c->failed = true;
    struct net_errors *e = &c->server->errors;
    if (c->capped)
        e->capped++;
    else if (c->by_server)
        e->refused++;
    else
        e->handled++;
}

/* Queues c's whole answer (the body taken, may be NULL for none) and ends the call. */
static void answer(struct net_call *c, int status, const char *content_type, char *body, size_t len)
{
    struct net_conn *conn = c->conn;
    if (status >= 400)
        count_error(c);
    if (conn) {
        const char *type = content_type ? content_type : c->content_type;
        bool bodiless = status < 200 || status == 204 || status == 304;
        size_t head_len;
        char *head = head_of(c, status, type, bodiless ? -3 : (long long)len, &head_len);
        bodiless |= c->head_only;
        if (!bodiless && len && len <= READ_MIN) { /* one piece: one writev, one segment */
            head = xrealloc(head, head_len + len);
            memcpy(head + head_len, body, len);
            head_len += len;
            len = 0;
        }
        send_owned(conn, head, head_len);
        if (!bodiless && len) {
            send_owned(conn, body, len);
            body = NULL;
        }
        call_done(c);
    }
    free(body);
    call_free(c);
}

void net_reply_raw(struct net_call *c, int status, const char *content_type, const char *data,
                   size_t len)
{
    char *copy = xmalloc(len ? len : 1);
    memcpy(copy, data, len);
    answer(c, status, content_type, copy, len);
}

void net_reply_owned(struct net_call *c, int status, const char *content_type, char *data,
                     size_t len)
{
    answer(c, status, content_type, data, len);
}

void net_reply_json(struct net_call *c, int status, json_t *body)
{
    if (!body) { /* json_pack refused a value: an answer's bug, not the daemon's end */
        net_reply_error(c, 500, "internal_error", "internal: the answer could not be encoded");
        return;
    }
    char *text = ujson_dump(body, false);
    json_decref(body);
    net_reply_owned(c, status, "application/json", text, strlen(text));
}

/* OpenAI's error object as JSON text (malloc'd, *len its length). */
static char *error_body(int status, const char *type, const char *msg, size_t *len)
{
    json_t *err = json_pack("{s:{s:s, s:s, s:n, s:i}}", "error", "message", msg, "type", type,
                            "param", "code", status);
    char *text = ujson_dump(err, false);
    json_decref(err);
    *len = strlen(text);
    return text;
}

/* error_body of a printf-formatted message, made valid UTF-8 (it may quote a percent-decoded
 * path, or be cut mid-character). */
static char *error_body_v(int status, const char *type, size_t *len, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static char *error_body_v(int status, const char *type, size_t *len, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return error_body(status, type, ujson_utf8_repair(msg), len);
}

void net_reply_error(struct net_call *c, int status, const char *type, const char *fmt, ...)
{
    size_t len;
    va_list ap;
    va_start(ap, fmt);
    char *body = error_body_v(status, type, &len, fmt, ap);
    va_end(ap);
    net_reply_owned(c, status, "application/json", body, len);
}

void net_stream_start(struct net_call *c, int status, const char *content_type)
{
    const char *type = content_type ? content_type : c->content_type;
    c->streaming = true;
    if (status >= 400)
        count_error(c);
    c->sse = type && strncasecmp(type, "text/event-stream", 17) == 0;
    memcpy(c->end, "\n\n", 2);
    if (!c->has_cache_control)
        net_call_add_header(c, "Cache-Control", "no-cache");
    if (!c->conn)
        return;
    size_t len;
    char *head = head_of(c, status, type, c->http10 ? -2 : -1, &len);
    send_owned(c->conn, head, len);
}

void net_stream_write(struct net_call *c, const char *data, size_t len)
{
    if (!c->conn || len == 0 || c->head_only)
        return;
    c->end[0] = len > 1 ? data[len - 2] : c->end[1];
    c->end[1] = data[len - 1];
    if (c->http10) {
        send_copy(c->conn, data, len);
        return;
    }
    char size[24]; /* the chunk: its size line, the data, CRLF */
    size_t k = (size_t)snprintf(size, sizeof size, "%zx\r\n", len);
    char *chunk = xmalloc(k + len + 2);
    memcpy(chunk, size, k);
    memcpy(chunk + k, data, len);
    chunk[k + len] = '\r';
    chunk[k + len + 1] = '\n';
    send_owned(c->conn, chunk, k + len + 2);
}

void net_stream_end(struct net_call *c)
{
    if (c->conn) {
        if (c->http10)
            c->close = true;
        else if (!c->head_only)
            send_copy(c->conn, "0\r\n\r\n", 5);
        call_done(c);
    }
    call_free(c);
}

/* What ends the line and the event an SSE stream stopped in, if any: a proxied engine's bytes
 * may be cut anywhere, and an event written after a partial one would join it. */
static const char *sse_break(const struct net_call *c)
{
    if (c->end[1] != '\n')
        return "\n\n";
    return c->end[0] == '\n' ? "" : "\n";
}

void net_stream_fail(struct net_call *c, int status, const char *type, const char *fmt, ...)
{
    count_error(c);
    if (c->conn && c->sse) {
        size_t len;
        va_list ap;
        va_start(ap, fmt);
        char *body = error_body_v(status, type, &len, fmt, ap);
        va_end(ap);
        struct strbuf ev = {0};
        strbuf_puts(&ev, sse_break(c));
        strbuf_add(&ev, "data: ", 6);
        strbuf_add(&ev, body, len);
        strbuf_add(&ev, "\n\n", 2);
        net_stream_write(c, ev.data, ev.len);
        strbuf_free(&ev);
        free(body);
    }
    c->close = true; /* no last chunk: the framing too says the body is incomplete */
    if (c->conn)
        call_done(c);
    call_free(c);
}

size_t net_stream_pending(const struct net_call *c)
{
    return c->conn ? c->conn->pending : 0;
}

/* drain_ev: the output drained to drain_low since the registration. */
static void drain_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct net_call *c = arg;
    void (*fn)(void *, struct net_call *) = c->drain_fn;
    c->drain_fn = NULL;
    if (fn)
        fn(c->drain_arg, c); /* may end c */
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
    if (!c->conn || c->conn->pending <= low_water)
        event_active(c->drain_ev, EV_TIMEOUT, 0);
}

/* ---- requests ------------------------------------------------------------------------------- */

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

static enum net_method method_of(struct net_span m)
{
    static const struct {
        const char *name;
        enum net_method method;
    } methods[] = {{"GET", NET_GET}, {"POST", NET_POST}, {"PUT", NET_PUT}, {"DELETE", NET_DELETE}};
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
        if (m.n == strlen(methods[i].name) && memcmp(m.p, methods[i].name, m.n) == 0)
            return methods[i].method;
    return 0;
}

/* Copies the head out of the connection's buffer into c, NUL-terminating the target and each
 * field's value (the byte after each is framing). */
static void take_head(struct net_call *c, const struct net_conn *conn)
{
    const struct net_head *h = &conn->head;
    c->head_bytes = xmalloc(h->length + 1);
    memcpy(c->head_bytes, conn->in, h->length);
    c->head_bytes[h->length] = '\0';
    c->head = *h;
    ptrdiff_t shift = c->head_bytes - conn->in;
    for (int i = 0; i < 3; i++)
        c->head.start[i].p += shift;
    for (size_t i = 0; i < c->head.n_fields; i++) {
        c->head.field[i].name.p += shift;
        c->head.field[i].value.p += shift;
        ((char *)c->head.field[i].value.p)[c->head.field[i].value.n] = '\0';
    }
    ((char *)c->head.start[1].p)[c->head.start[1].n] = '\0';
}

/* The request target parsed: an origin-form target (RFC 9112 3.2.1: "/path?query") as a path
 * whatever it opens with — a URI parser reads "//x/pause" as host x and path /pause, another
 * endpoint than the one asked — and an absolute-form one ("http://h/path") as a URI. */
static struct evhttp_uri *parse_target(const char *target)
{
    if (target[0] != '/')
        return evhttp_uri_parse_with_flags(target, 0);
    size_t n = strlen(target) + sizeof "http://h";
    char *uri_text = xmalloc(n);
    snprintf(uri_text, n, "http://h%s", target);
    struct evhttp_uri *uri = evhttp_uri_parse_with_flags(uri_text, 0);
    free(uri_text);
    return uri;
}

/* The call for the request whose head and body[0..body_len) are read; NULL after answering
 * 400 itself for a malformed target. */
static struct net_call *call_new(struct net_conn *conn, size_t body_len, size_t consumed)
{
    struct net_server *s = conn->server;
    struct net_call *c = xcalloc(1, sizeof *c);
    /* the server's own until dispatch hands it to a handler */
    *c = (struct net_call){.server = s, .conn = conn, .consumed = consumed, .by_server = true};
    conn->call = c;
    take_head(c, conn);
    c->head_only = c->head.start[0].n == 4 && memcmp(c->head.start[0].p, "HEAD", 4) == 0;
    c->method = c->head_only ? NET_GET : method_of(c->head.start[0]);
    c->http10 = c->head.minor == 0;
    c->close = c->head.close;
    char *body = conn->in + conn->head.length;
    if (conn->in_len > conn->head.length + body_len) { /* pipelined bytes follow */
        c->next_byte = body + body_len;
        c->saved = *c->next_byte;
    }
    body[body_len] = '\0'; /* in_cap always keeps a byte past what was read */
    c->body = body;
    c->body_len = body_len;
    struct evhttp_uri *uri = parse_target(c->head.start[1].p);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    c->path = uri ? evhttp_uridecode(path && *path ? path : "/", 0, NULL) : NULL;
    bool bad = !c->path || (query && net_query_parse(query, strlen(query), &c->query, &c->n_query));
    if (uri)
        evhttp_uri_free(uri);
    if (bad) {
        net_reply_error(c, 400, "invalid_request_error", "malformed URI or query string");
        return NULL;
    }
    return c;
}

/* Whether the comma-separated list names holds name[0..n) (any case: a header field's name; else
 * exactly: a query parameter's). */
static bool listed(const char *names, const char *name, size_t n, bool any_case)
{
    for (const char *at = names; at; at = (at = strchr(at, ',')) ? at + 1 : NULL)
        if ((any_case ? strncasecmp(at, name, n) : strncmp(at, name, n)) == 0 &&
            (at[n] == ',' || !at[n]))
            return true;
    return false;
}

/* Answers 400 when c has a query parameter that r (naming those it reads) does not read, or
 * one given twice; returns whether it did. */
static bool refused_query(const struct net_route *r, struct net_call *c)
{
    for (size_t i = 0; i < c->n_query; i++) {
        const char *key = c->query[i].key;
        if (!listed(r->query, key, strlen(key), false)) {
            net_reply_error(c, 400, "invalid_request_error",
                            "%s takes no query parameter '%.100s'%s%s", c->path, key,
                            *r->query ? "; it reads " : "", r->query);
            return true;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(key, c->query[j].key) == 0) {
                net_reply_error(c, 400, "invalid_request_error",
                                "query parameter '%.100s' given twice", key);
                return true;
            }
    }
    return false;
}

/* Adds the Allow header: the methods r takes (HEAD with GET). */
static void add_allow(struct net_call *c, const struct net_route *r)
{
    static const struct {
        unsigned method;
        const char *names;
    } m[] = {{NET_GET, "GET, HEAD"}, {NET_POST, "POST"}, {NET_PUT, "PUT"}, {NET_DELETE, "DELETE"}};
    char allow[64] = "";
    for (size_t i = 0; i < sizeof m / sizeof *m; i++)
        if (r->methods & m[i].method)
            snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s",
                     *allow ? ", " : "", m[i].names);
    net_call_add_header(c, "Allow", allow);
}

/* Routes the call c. */
static void dispatch(struct net_server *s, struct net_call *c)
{
    if (s->draining || c->conn->over_limit) {
        c->close = true;
        if (s->draining)
            net_reply_error(c, 503, "server_error", "the server is stopping");
        else
            net_reply_error(c, 503, "server_error", "too many connections (at most %d)",
                            s->limits.max_connections);
        return;
    }
    const struct net_route *r = route_of(s, c->path);
    if (!r) {
        net_reply_error(c, 404, "not_found_error", "no such path: %s", c->path);
        return;
    }
    if (!(c->method & r->methods)) {
        add_allow(c, r);
        net_reply_error(c, 405, "invalid_request_error", "method not allowed on %s", c->path);
        return;
    }
    if (r->query && refused_query(r, c))
        return;
    c->by_server = false;
    if (!s->gate || !s->gate(s->ctx, c, r->fn))
        r->fn(s->ctx, c);
}

/* Answers a request that cannot be read (malformed, over a limit) and closes after. */
static void refuse(struct net_conn *conn, int status, const char *msg)
{
    size_t body_len, head_len;
    conn->server->errors.refused++;
    char *body = error_body(status, "invalid_request_error", msg, &body_len);
    const struct net_call bare = {.close = true}; /* no call: the request was never read */
    char *head = head_of(&bare, status, "application/json", (long long)body_len, &head_len);
    send_owned(conn, head, head_len);
    send_owned(conn, body, body_len);
    conn->closing = true;
    conn->in_len = 0;
    /* A client sends its whole body before it reads: closing with its bytes unread would reset
     * the connection and lose the answer with it. So the rest is read and dropped, the answer
     * ends with a half-close (step), and the client's close, or the reading deadline from now
     * (sweep), ends the connection: a lingering close. */
    conn->discarding = true;
    conn->owing_since_s = mono_s();
}

static void conn_close(struct net_conn *conn);

/* Reads and drops what a refused connection's client still sends; closes it at its end. */
static void discard_input(struct net_conn *conn)
{
    char sink[READ_MIN];
    for (int i = 0; i < DISCARD_READS; i++) {
        ssize_t r = recv(conn->fd, sink, sizeof sink, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (r <= 0) {
            conn_close(conn);
            return;
        }
    }
}

/* Decodes what arrived of a chunked body, moving its data down over the framing; true once it
 * ended (the bytes after it are moved down too), false when more must come or it was refused. */
static bool chunks_ready(struct net_conn *conn)
{
    uint64_t max = (uint64_t)conn->server->limits.max_body_bytes;
    for (;;) {
        size_t used, n = 0;
        const char *piece = NULL;
        enum net_chunk_step st = net_chunked_next(&conn->chunks, conn->in + conn->chunk_in,
                                                  conn->in_len - conn->chunk_in, &used, &piece, &n);
        conn->chunk_in += used;
        if (st == NET_CHUNK_MORE)
            return false;
        if (st == NET_CHUNK_BAD) {
            refuse(conn, 400, "malformed chunked body");
            return false;
        }
        if (st == NET_CHUNK_END)
            break;
        if (conn->chunk_out - conn->head.length + n > max) {
            refuse(conn, 413, "request body over the limit");
            return false;
        }
        memmove(conn->in + conn->chunk_out, piece, n);
        conn->chunk_out += n;
    }
    memmove(conn->in + conn->chunk_out, conn->in + conn->chunk_in, conn->in_len - conn->chunk_in);
    conn->in_len -= conn->chunk_in - conn->chunk_out;
    conn->chunk_in = conn->chunk_out;
    return true;
}

/* Whether the body of the request whose head is read has arrived whole: its length and the
 * bytes it took; false when more must come (or the request was refused: conn->closing). */
static bool body_ready(struct net_conn *conn, size_t *body_len, size_t *consumed)
{
    const struct net_head *h = &conn->head;
    if (h->chunked) {
        if (conn->chunk_in == 0)
            conn->chunk_in = conn->chunk_out = h->length;
        bool ready = chunks_ready(conn);
        *body_len = conn->chunk_out - h->length;
        *consumed = conn->chunk_out;
        return ready;
    }
    size_t need = h->content_length > 0 ? (size_t)h->content_length : 0;
    *body_len = need;
    *consumed = h->length + need;
    return conn->in_len >= *consumed;
}

/* The fields a request may give once: one value each (RFC 9110 §5.3), besides those of
 * net_limits.single_fields. */
#define SINGLE_FIELDS "host,content-type,authorization"

/* The name of a single field (or one of names, may be NULL) that head h gives twice; its
 * length 0 when there is none. */
static struct net_span twice_field(const struct net_head *h, const char *names)
{
    for (size_t i = 0; i < h->n_fields; i++) {
        struct net_span f = h->field[i].name;
        if (!listed(SINGLE_FIELDS, f.p, f.n, true) && !(names && listed(names, f.p, f.n, true)))
            continue;
        for (size_t j = 0; j < i; j++)
            if (h->field[j].name.n == f.n && strncasecmp(h->field[j].name.p, f.p, f.n) == 0)
                return f;
    }
    return (struct net_span){0};
}

/* Refuses a request that gives the field named name twice. */
static void refuse_twice(struct net_conn *conn, struct net_span name)
{
    char why[96];
    snprintf(why, sizeof why, "header %.*s given twice", (int)(name.n < 64 ? name.n : 64), name.p);
    refuse(conn, 400, why);
}

/* A refused head's reason: head.why, naming the field whose value was refused (into buf). */
static const char *head_refusal(const struct net_head *h, char *buf, size_t size)
{
    if (!h->bad_value)
        return h->why;
    struct net_span name = h->field[h->n_fields - 1].name; /* token characters: safe to echo */
    snprintf(buf, size, "malformed header field: the value of %.*s%s holds a control byte",
             (int)(name.n < 64 ? name.n : 64), name.p, name.n > 64 ? "..." : "");
    return buf;
}

/* Reads the head of the next request; false when it has not come whole (or was refused). */
static bool head_ready(struct net_conn *conn)
{
    const struct net_limits *l = &conn->server->limits;
    enum net_head_status st = net_head_parse(conn->in, conn->in_len, false, &conn->head);
    size_t head_bytes = st == NET_HEAD_OK ? conn->head.length : conn->in_len;
    char why[160];
    struct net_span twice =
        st == NET_HEAD_OK ? twice_field(&conn->head, l->single_fields) : (struct net_span){0};
    if (st == NET_HEAD_MANY)
        refuse(conn, 400, NET_HEAD_MANY_TEXT);
    else if (st != NET_HEAD_BAD && head_bytes > (size_t)l->max_header_bytes)
        refuse(conn, 400, "request line and headers over the limit");
    else if (st == NET_HEAD_BAD)
        refuse(conn, 400, head_refusal(&conn->head, why, sizeof why));
    else if (twice.n)
        refuse_twice(conn, twice);
    else if (st == NET_HEAD_OK && conn->head.content_length > l->max_body_bytes)
        refuse(conn, 413, "request body over the limit");
    if (st != NET_HEAD_OK || conn->closing)
        return false;
    conn->have_head = true;
    conn->chunks = (struct net_chunked){0};
    conn->chunk_in = conn->chunk_out = 0;
    return true;
}

/* Serves the requests that have arrived whole, one at a time. */
static void serve_input(struct net_conn *conn)
{
    while (!conn->call && !conn->closing && !conn->broken && conn->in_len) {
        if (!conn->have_head && !head_ready(conn))
            return;
        size_t body_len, consumed;
        if (!body_ready(conn, &body_len, &consumed)) {
            if (conn->head.expect_continue && !conn->continued && !conn->closing) {
                send_copy(conn, "HTTP/1.1 100 Continue\r\n\r\n", 25);
                conn->continued = true;
            }
            return;
        }
        if (body_len >= BULK_BYTES && !conn->bulk_due) {
            event_active(conn->bulk, EV_TIMEOUT, 0);
            return;
        }
        conn->bulk_due = false;
        conn->owing_since_s = mono_s();
        struct net_call *c = call_new(conn, body_len, consumed);
        if (c)
            dispatch(conn->server, c);
    }
}

/* ---- connections ---------------------------------------------------------------------------- */

static void conn_close(struct net_conn *conn)
{
    struct net_server *s = conn->server;
    struct net_call *c = conn->call;
    if (c) {
        conn->call = NULL;
        c->conn = NULL;
        call_cancel(c, NET_CANCEL_CLIENT_GONE);
    }
    event_free(conn->rev);
    event_free(conn->wev);
    event_free(conn->later);
    event_free(conn->bulk);
    close(conn->fd);
    while (conn->out) {
        struct piece *p = conn->out;
        conn->out = p->next;
        free(p->data);
        free(p);
    }
    free(conn->in);
    list_unlink(&s->conns, &conn->link);
    s->n_conns--;
    free(conn);
}

/* Serves what arrived, then closes the connection if it is done. From the loop only. */
static void step(struct net_conn *conn)
{
    conn->stepping = true;
    serve_input(conn);
    conn->stepping = false;
    bool done = conn->closing && !conn->out && !conn->call;
    if (done && conn->discarding && !conn->broken)
        shutdown(conn->fd, SHUT_WR); /* the answer is whole; the input is still read */
    else if (done || conn->broken)
        conn_close(conn);
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    step(arg);
}

static void on_bulk(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct net_conn *conn = arg;
    conn->bulk_due = true;
    step(conn);
}

/* Makes room for the next read: the whole request when its size is known, else READ_MIN. */
static void reserve(struct net_conn *conn)
{
    size_t want = conn->in_len + READ_MIN;
    const struct net_head *h = &conn->head;
    if (conn->have_head && !h->chunked && h->content_length > 0 &&
        h->length + (size_t)h->content_length > conn->in_len)
        want = h->length + (size_t)h->content_length;
    want += 1; /* a NUL after the body */
    if (conn->in_cap >= want)
        return;
    conn->in_cap = want > 2 * conn->in_cap ? want : 2 * conn->in_cap;
    conn->in = xrealloc(conn->in, conn->in_cap);
    if (conn->have_head) /* its spans pointed into the old buffer */
        net_head_parse(conn->in, conn->in_len, false, &conn->head);
}

/* A kept call's socket turned readable: the client left (recv returns 0 or fails), or sent its
 * next request early (pipelining: read it after the answer). */
static void peek_client(struct net_conn *conn)
{
    char byte;
    ssize_t r = recv(conn->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    event_del(conn->rev);
    if (r == 0 || r < 0)
        conn_close(conn);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct net_conn *conn = arg;
    if (conn->call) {
        peek_client(conn);
        return;
    }
    if (conn->discarding) {
        discard_input(conn);
        return;
    }
    reserve(conn);
    ssize_t r = recv(fd, conn->in + conn->in_len, conn->in_cap - conn->in_len - 1, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (r <= 0) {
        conn_close(conn);
        return;
    }
    conn->in_len += (size_t)r;
    /* Before the head is read head_ready bounds the bytes (a head over its limit is a 400, not a
     * body's 413); after it, the body with its chunk framing may take twice its limit. */
    size_t raw_limit = (size_t)conn->server->limits.max_header_bytes +
                       2 * (size_t)conn->server->limits.max_body_bytes;
    if (conn->have_head && conn->in_len > raw_limit) {
        refuse(conn, 413, "request body over the limit");
        return;
    }
    step(conn);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct net_conn *conn = arg;
    flush(conn);
    if (conn->broken)
        conn_close(conn);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                      int socklen, void *arg)
{
    (void)l;
    (void)sa;
    (void)socklen;
    struct net_server *s = arg;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct net_conn *conn = xcalloc(1, sizeof *conn);
    *conn = (struct net_conn){.server = s,
                              .fd = fd,
                              .owing_since_s = mono_s(),
                              .over_limit = s->n_conns >= s->limits.max_connections};
    conn->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_read, conn);
    conn->wev = event_new(s->base, fd, EV_WRITE | EV_PERSIST, on_write, conn);
    conn->later = event_new(s->base, -1, 0, on_later, conn);
    conn->bulk = event_new(s->base, -1, 0, on_bulk, conn);
    if (event_base_get_npriorities(s->base) == NET_PRIOS) /* a base from net_base_new */
        event_priority_set(conn->bulk, NET_PRIO_BULK);
    event_add(conn->rev, NULL);
    list_push_front(&s->conns, &conn->link);
    s->n_conns++;
}

/* Closes the connections past the reading deadline: owing a request for longer than
 * request_read_s with no answer still being written (a slow reader is not cut). */
static void sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct net_server *s = arg;
    double now = mono_s();
    for (struct list_node *n = s->conns.front, *next; n; n = next) {
        next = n->next;
        struct net_conn *conn = list_entry(n, struct net_conn, link);
        if (conn->pending)
            conn->owing_since_s = now;
        else if (!conn->call && now - conn->owing_since_s > s->limits.request_read_s)
            conn_close(conn);
    }
}

/* The address to listen on at host:port; -1 with why in err. */
static int listen_on(const char *host, int port, struct sockaddr_storage *addr, socklen_t *len,
                     char *err, size_t err_size)
{
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(err, err_size, "cannot listen on %s:%d: no such address (%s)", host, port,
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int net_server_new(struct net_server **out, struct event_base *base, const char *host, int port,
                   const struct net_limits *limits, const struct net_route *routes,
                   net_gate_fn gate, void *ctx, char *err, size_t err_size)
{
    struct net_server *s = xcalloc(1, sizeof *s);
    *s = (struct net_server){
        .base = base, .limits = *limits, .routes = routes, .gate = gate, .ctx = ctx};
    struct sockaddr_storage addr;
    socklen_t len;
    bool known = listen_on(host, port, &addr, &len, err, err_size) == 0;
    if (known)
        s->listener = evconnlistener_new_bind(
            base, on_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
            SOMAXCONN, (struct sockaddr *)&addr, (int)len);
    if (!s->listener) {
        if (known)
            snprintf(err, err_size, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        net_server_free(s);
        *out = NULL;
        return -1;
    }
    len = sizeof addr;
    getsockname(evconnlistener_get_fd(s->listener), (struct sockaddr *)&addr, &len);
    s->port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                               : ((struct sockaddr_in *)&addr)->sin_port);
    double every_s = limits->request_read_s / 4 < 1 ? limits->request_read_s / 4 : 1;
    struct timeval tv = timeval_of(every_s);
    s->sweep = event_new(base, -1, EV_PERSIST, sweep, s);
    event_add(s->sweep, &tv);
    *out = s;
    return 0;
}

int net_server_port(const struct net_server *s)
{
    return s->port;
}

void net_server_drain(struct net_server *s)
{
    if (s->listener)
        evconnlistener_free(s->listener); /* closes the listening socket */
    s->listener = NULL;
    s->draining = true;
}

struct net_errors net_server_errors(const struct net_server *s)
{
    return s->errors;
}

size_t net_server_held(const struct net_server *s)
{
    size_t held = 0;
    for (const struct list_node *n = s->conns.front; n; n = n->next) {
        const struct net_conn *conn = list_entry(n, const struct net_conn, link);
        held += conn->call != NULL || conn->pending > 0;
    }
    return held;
}

void net_server_free(struct net_server *s)
{
    if (!s)
        return;
    for (struct list_node *n = s->conns.front; n; n = n->next) {
        struct net_conn *conn = list_entry(n, struct net_conn, link);
        if (conn->call) { /* cancelled as the server's end, not as a client leaving */
            struct net_call *c = conn->call;
            conn->call = NULL;
            c->conn = NULL;
            call_cancel(c, NET_CANCEL_SHUTDOWN);
        }
    }
    while (s->conns.front)
        conn_close(list_entry(s->conns.front, struct net_conn, link));
    if (s->listener)
        evconnlistener_free(s->listener);
    if (s->sweep)
        event_free(s->sweep);
    free(s);
}
