/*
 * HTTP requests from an event loop: libcurl's multi interface driven by the same libevent
 * event_base the process serves on (curl's "hiperfifo" pattern), so a client process or the
 * gateway issues thousands of concurrent requests from one thread.
 *
 * Requests have no timeout by default (an RL turn may take half an hour without a byte);
 * connections to the same host are kept alive and reused; signals are never used (NOSIGNAL).
 * The process must call curl_global_init once before the first net_client_new and ignore
 * SIGPIPE.
 *
 * Threading: one event loop; nothing here is thread-safe.
 */
#ifndef NET_CLIENT_H
#define NET_CLIENT_H

#include <event2/event.h>
#include <stddef.h>

struct net_client;

/*
 * The outcome of one request: status is the HTTP status (0 when the transfer failed: then
 * error says why, e.g. "Couldn't connect to server", and body is empty); body is the response
 * body, NUL-terminated, valid only during the call.
 */
typedef void (*net_response_fn)(void *arg, int status, const char *body, size_t len,
                                const char *error);

/* A client on base. Returns NULL when curl cannot make a multi handle. */
struct net_client *net_client_new(struct event_base *base);

/* Cancels every request in flight (their callbacks are not called) and frees c; c may be
 * NULL. */
void net_client_free(struct net_client *c);

/*
 * Sends method (GET, POST) to url with len bytes of body (copied; NULL for none) as
 * application/json, plus one header line ("Name: value"; NULL or "" for none), and calls
 * fn(arg, ...) exactly once when it completes or fails — never from inside this call.
 */
void net_client_request(struct net_client *c, const char *method, const char *url,
                        const char *header, const char *body, size_t len, net_response_fn fn,
                        void *arg);

#endif
