/*
 * An HTTP/1.1 server on libevent's evhttp with the limits RL traffic needs, for the processes
 * that serve (`libra emu`, later `libra serve`).
 *
 * What evhttp does not give by itself, and every server here needs:
 *  - no idle cut while a handler holds a request: a turn of a long agentic trajectory may take
 *    10–30 minutes without a byte; instead a per-request cap (struct net_limits) answers 504;
 *  - a client that goes away while its request is held is noticed (evhttp 2.1 only notices
 *    when it writes the reply), so the handler can abort the work it started;
 *  - a JSON error body in OpenAI's shape ({"error": {"message", "type", "param", "code"}}) for
 *    every error the server answers itself: unknown path (404), wrong method (405), malformed
 *    query (400), too many connections (503), the cap (504). Framing errors evhttp finds before
 *    a handler runs (a bad request line, headers or body over the limits: 400, 413) keep
 *    evhttp's own short HTML body.
 *
 * A handler receives a struct net_call and must, before it returns, either answer it
 * (net_reply_*, or net_stream_start ... net_stream_end) or keep it with net_call_defer and
 * answer it later. After the answer is complete the call is freed. A kept call's cancel
 * function runs when the client went away, the cap passed or the server is freed; the call is
 * freed right after it returns and must not be answered.
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
};

/* 64 MiB bodies, 64 KiB headers, 4096 connections, a 3600 s cap. */
void net_limits_default(struct net_limits *l);

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
    const char *path;  /* exact, without the query */
    unsigned methods;  /* NET_GET | NET_POST ... */
    net_handler_fn fn; /* called with the server's ctx */
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

/* Closes the listener and every connection; kept calls are cancelled (NET_CANCEL_SHUTDOWN)
 * first. s may be NULL. */
void net_server_free(struct net_server *s);

/* ---- a request ------------------------------------------------------------------------------ */

const char *net_call_path(const struct net_call *c);
enum net_method net_call_method(const struct net_call *c);

/* The body, NUL-terminated (the terminator is not counted in *len). */
const char *net_call_body(struct net_call *c, size_t *len);

/* Frees the body of a call kept long after it was read (net_call_body then gives ""). */
void net_call_drop_body(struct net_call *c);

/* A query parameter's decoded value, NULL when absent. */
const char *net_call_query(const struct net_call *c, const char *key);

/* Keeps c past the handler's return; cancel (may be NULL) runs if it ends unanswered. On a
 * kept call it only changes the owner (cancel and arg); the cap still counts from the first. */
void net_call_defer(struct net_call *c, net_cancel_fn cancel, void *arg);

/* ---- answers (each frees c once complete) ---------------------------------------------------- */

/* Answers status with body as JSON (application/json); takes ownership of body. */
void net_reply_json(struct net_call *c, int status, json_t *body);

/* Answers status with OpenAI's error object; type e.g. "invalid_request_error". */
void net_reply_error(struct net_call *c, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Answers status with len bytes of data of the given content type. */
void net_reply_raw(struct net_call *c, int status, const char *content_type, const char *data,
                   size_t len);

/* Starts a chunked 200 answer (the status cannot change afterwards). */
void net_stream_start(struct net_call *c, const char *content_type);

/* Sends len bytes of a started stream. */
void net_stream_write(struct net_call *c, const char *data, size_t len);

/* Ends a started stream and frees c. */
void net_stream_end(struct net_call *c);

#endif
