/*
 * An HTTP/1.1 server on libevent's event loop with the limits RL traffic needs, for the
 * processes that serve (`libra emu`, `libra serve`). It reads and writes its sockets itself
 * (framing: net/head.h) rather than through evhttp, whose 4 KiB reads cost fifty system calls
 * for a 200 KB request and whose answers wait a turn of the loop to be written:
 *  - a request with a Content-Length is read into one buffer sized for it, a few reads;
 *  - an answer is written at once, in the call that makes it (the socket is watched for
 *    writing only while the kernel's buffer is full);
 *  - no idle cut while a handler holds a request: a turn of a long agentic trajectory may take
 *    10–30 minutes without a byte; instead a per-request cap (struct net_limits) answers 504;
 *  - a client that goes away while its request is held is noticed, so the handler can abort
 *    the work it started;
 *  - a JSON error body in OpenAI's shape ({"error": {"message", "type", "param", "code"}}) for
 *    every error the server answers itself: a malformed request line, headers or chunked body
 *    (400, its message naming what is wrong), a field that names one thing given twice (400:
 *    Host, Content-Type, Authorization and net_limits.single_fields), headers over the limit or
 *    of more than 100 fields (400, each with its own message), a body over the limit (413), an
 *    unknown path (404), a method other than GET, HEAD, POST, PUT and DELETE or one the path
 *    does not take (405, with Allow), a malformed query or, on a route that names its query
 *    parameters, an unread or repeated one (400), too many connections (503), the cap (504; a
 *    stream already started is cut instead: net_stream_fail). HEAD is answered as GET without
 *    the body. A request the server cannot frame is answered and its connection
 *    closed.
 * Requests may be pipelined (they are served one after another), carry `Expect: 100-continue`
 * (answered once the head is read), use HTTP/1.0 (kept alive on `Connection: keep-alive`; a
 * stream then ends with the connection) or a chunked body.
 *
 * What a proxy (`libra serve`) needs besides: the request's headers and body as they arrived
 * (the body is read where it was received, not copied again), headers of its own on the answer,
 * a streamed answer with any status, and backpressure — how many bytes of the answer the
 * client has not taken yet, and a call back once it has taken enough (net_stream_on_drain), so
 * an upstream transfer can be paused meanwhile instead of buffering an engine's whole answer.
 *
 * A handler receives a struct net_call and must, before it returns, either answer it
 * (net_reply_*, or net_stream_start ... net_stream_end) or keep it with net_call_defer and
 * answer it later. After the answer is complete the call is freed. A kept call's cancel
 * function runs when the client went away, the cap passed or the server is freed; the call is
 * freed right after it returns and must not be answered. A stream that outlives its handler
 * must be kept the same way.
 *
 * Threading: one event loop; nothing here is thread-safe.
 */
#ifndef NET_HTTP_H
#define NET_HTTP_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits of one server (docs/emu.md "Limits"). */
struct net_limits {
    int64_t max_body_bytes;   /* request body at most (413 above) */
    int64_t max_header_bytes; /* request line and headers at most (400 above) */
    int max_connections;      /* open client connections at most (503 above) */
    double request_cap_s;     /* a held request is answered 504 after this many seconds */
    double request_read_s;    /* a connection that owes a request (since it was accepted or
                                 got its last answer) and has not sent it whole after this many
                                 seconds is closed: a client trickling bytes (slow loris) does
                                 not hold a connection, and the others are not affected */
    /* header fields a request may give once, comma-separated (NULL: none), besides Host,
     * Content-Type and Authorization: a request giving one twice is answered 400 */
    const char *single_fields;
};

/* 64 MiB bodies, 64 KiB headers, 4096 connections, a 3600 s cap, 60 s to send a request. */
void net_limits_default(struct net_limits *l);

/*
 * The event loop a process serves and sends on. On epoll it batches interest changes until the
 * loop next waits (libevent's changelist): a socket's interest in reading and writing may
 * change more than once in a turn, and batched the changes cost one epoll_ctl per socket per
 * turn of the loop instead of a delete and an add each. (The changelist is unsafe
 * only for descriptors shared through dup(), which no libra process makes.) NULL when libevent
 * cannot make a base.
 */
struct event_base *net_base_new(void);

enum net_method { NET_GET = 1u << 0, NET_POST = 1u << 1, NET_PUT = 1u << 2, NET_DELETE = 1u << 3 };

/* Why a kept call ends without its handler's answer. */
enum net_cancel {
    NET_CANCEL_CLIENT_GONE, /* the client closed its connection */
    NET_CANCEL_CAP,         /* request_cap_s passed: the server answered 504 */
    NET_CANCEL_SHUTDOWN     /* net_server_free */
};

struct net_server;
struct net_call;

typedef void (*net_handler_fn)(void *ctx, struct net_call *c);
typedef void (*net_cancel_fn)(void *arg, struct net_call *c, enum net_cancel why);

/* One path the server answers; the table ends with a NULL path. */
struct net_route {
    const char *path;  /* exact, without the query; ending in '*': every path it begins */
    unsigned methods;  /* NET_GET | NET_POST ... */
    net_handler_fn fn; /* called with the server's ctx */
    /* the query parameters the route reads, comma-separated ("after,wait_s"; "" for none): a
     * call with another is answered 400 and not routed. NULL takes any (a call passed on, or an
     * engine's own route, whose parameters are the engine's to judge). */
    const char *query;
};

/* Called before a route's handler fn with the call: returns true when it took the call itself
 * (kept it to run fn later, say), false to let fn run now. */
typedef bool (*net_gate_fn)(void *ctx, struct net_call *c, net_handler_fn fn);

/*
 * Listens on host:port (port 0: the OS chooses; net_server_port tells) and answers the routes
 * with ctx, each through gate first when gate is not NULL. routes must outlive the server.
 * Returns 0, or -1 with the reason in err.
 */
int net_server_new(struct net_server **out, struct event_base *base, const char *host, int port,
                   const struct net_limits *limits, const struct net_route *routes,
                   net_gate_fn gate, void *ctx, char *err, size_t err_size);

/* The port the server listens on. */
int net_server_port(const struct net_server *s);

/* Stops taking connections (the listening socket is closed) and answers every request that
 * arrives on an open connection from now on with 503 and `Connection: close`; the calls being
 * served go on. For a graceful stop. */
void net_server_drain(struct net_server *s);

/* Connections busy: serving a call received and not yet answered (a kept call, a stream), or
 * writing an answer the client has not taken yet. A graceful stop waits for none. */
size_t net_server_held(const struct net_server *s);

/* The error answers a server gave (a status of 400 or more, or a stream cut), each request
 * counted once, by who answered: what a gateway's error counts are made of. */
struct net_errors {
    uint64_t refused; /* the server itself, no handler run: a request it could not frame or
                         that passed a limit, an unknown path or method, a refused query, too
                         many connections, a draining server */
    uint64_t capped;  /* the cap: answered 504, or the stream cut */
    uint64_t handled; /* a handler's answer (net_reply_*, net_stream_start, net_stream_fail) */
};

/* The error answers s gave so far. */
struct net_errors net_server_errors(const struct net_server *s);

/* Closes the listener and every connection; kept calls are cancelled (NET_CANCEL_SHUTDOWN)
 * first. s may be NULL. */
void net_server_free(struct net_server *s);

/* ---- a request ------------------------------------------------------------------------------ */

const char *net_call_path(const struct net_call *c);

/* The request's URI as it arrived: path and query, not decoded ("/pause?mode=keep"). */
const char *net_call_uri(const struct net_call *c);
enum net_method net_call_method(const struct net_call *c);

/* The body as it arrived, NUL-terminated (the terminator is not counted in *len); a chunked
 * body without its framing. It lives in the connection's input buffer, not in a copy; valid
 * until the call is answered, cancelled or its body dropped. */
const char *net_call_body(struct net_call *c, size_t *len);

/* Frees the body of a call kept long after it was read (net_call_body then gives ""). */
void net_call_drop_body(struct net_call *c);

/* A query parameter's decoded value, NULL when absent. */
const char *net_call_query(const struct net_call *c, const char *key);

/* A request header's value (the first of that name), NULL when absent; name is matched
 * case-insensitively. Valid as long as the call. */
const char *net_call_header(const struct net_call *c, const char *name);

/* Adds a response header (copied) to the answer, before it is sent: before net_reply_* or
 * net_stream_start (later ones are not sent). A Content-Type added here is replaced by the
 * content type the answer is given. A name or value with a CR or LF in it (or a name with
 * a colon) is not added. `Connection: close` closes the connection after the answer. */
void net_call_add_header(struct net_call *c, const char *name, const char *value);

/* Keeps c past the handler's return; cancel (may be NULL) runs if it ends unanswered. On a
 * kept call it only changes the owner (cancel and arg); the cap still counts from the first. */
void net_call_defer(struct net_call *c, net_cancel_fn cancel, void *arg);

/* ---- answers (each frees c once complete) ---------------------------------------------------- */

/* Answers status with body as JSON (application/json); takes ownership of body. A NULL body
 * (a json_pack that refused a value) is answered 500 with an error object instead. */
void net_reply_json(struct net_call *c, int status, json_t *body);

/* Answers status with OpenAI's error object; type e.g. "invalid_request_error". */
void net_reply_error(struct net_call *c, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Answers status with len bytes of data of the given content type (NULL: the one added with
 * net_call_add_header, if any). */
void net_reply_raw(struct net_call *c, int status, const char *content_type, const char *data,
                   size_t len);

/* net_reply_raw with len bytes of malloc'd data, which the answer takes without copying them
 * and frees once they are sent (or the connection is gone). */
void net_reply_owned(struct net_call *c, int status, const char *content_type, char *data,
                     size_t len);

/* Starts a chunked answer with status and content type (NULL: the one added with
 * net_call_add_header, if any) and `Cache-Control: no-cache` unless a Cache-Control was added.
 * The status line and headers are sent now: the status cannot change afterwards. */
void net_stream_start(struct net_call *c, int status, const char *content_type);

/* Sends len bytes (copied) of a started stream; len 0 sends nothing. The bytes are queued on
 * the connection at once and written as the client takes them: see net_stream_pending. */
void net_stream_write(struct net_call *c, const char *data, size_t len);

/* Ends a started stream and frees c (a drain registration goes with it). */
void net_stream_end(struct net_call *c);

/*
 * Ends a started stream as cut (its engine died, the cap passed) and frees c: an SSE stream
 * (text/event-stream) first gets an event `data: {"error": {...}}` in OpenAI's shape, after
 * whatever ends the line or event it stopped in; then the connection closes without the
 * chunked body's last chunk. A client that reads the events sees the error (openai-python
 * raises APIError on it), one that reads the framing sees an incomplete body (httpx, aiohttp
 * and http.client raise), so neither takes the cut answer for a whole one.
 */
void net_stream_fail(struct net_call *c, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Bytes of c's answer queued on the client's connection and not yet sent (framing included):
 * what the client has not taken yet, for backpressure. 0 once c no longer holds a connection. */
size_t net_stream_pending(const struct net_call *c);

/*
 * Calls fn(arg, c) once, from the loop, when c's pending output (net_stream_pending) has
 * drained to at most low_water bytes — on the loop's next turn when it already has; never
 * from inside this call or net_stream_write. One registration at a time: a new one replaces
 * the last, fn NULL just clears it. It is cleared when fn runs and when the call ends or is
 * cancelled (fn then never runs). fn may write, end the stream or register again.
 */
void net_stream_on_drain(struct net_call *c, size_t low_water,
                         void (*fn)(void *arg, struct net_call *c), void *arg);

#endif
