/*
 * HTTP/1.1 requests from an event loop: libra's own client on the same libevent event_base the
 * process serves on, so a client process or the gateway issues thousands of concurrent
 * requests from one thread. It speaks plain http:// only (engines sit on the cluster's own
 * network); an https:// URL fails through done.
 *
 * One transfer engine, two ways to use it: net_client_send streams a response to callbacks as
 * it arrives and returns a handle to pause or abort it (a proxy forwards an engine's answer to
 * its client byte for byte, stops reading while that client is slow, and aborts the upstream
 * transfer when the client goes away); net_client_request buffers the whole answer, up to
 * NET_ANSWER_MAX_BYTES (the emulator's and the load generator's control calls and turns).
 *
 * Requests have no timeout by default (an RL turn may take half an hour without a byte).
 * Connections to the same host:port are kept alive and reused (up to 1024 idle ones per
 * host:port); an idle one the peer closes is noticed by the loop and dropped, and a request
 * that gets no byte of answer on a reused connection is sent once more on a fresh one. Names
 * are resolved once per host:port with getaddrinfo, which blocks the loop during that first
 * lookup (numeric addresses do not wait); a failed lookup is tried again by the next request.
 * The request leaves in one write with its body, never with `Expect: 100-continue`; the answer
 * is read 64 KiB at a time. Writes never raise SIGPIPE.
 *
 * Threading: one event loop; nothing here is thread-safe.
 */
#ifndef NET_CLIENT_H
#define NET_CLIENT_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

#include "net/iov.h"

struct net_client;
struct net_transfer;

/* A client on base. Returns NULL when libevent cannot make its event. */
struct net_client *net_client_new(struct event_base *base);

/* Cancels every transfer in flight (their callbacks are not called) and frees c; c may be
 * NULL. Not from inside one of c's callbacks. */
void net_client_free(struct net_client *c);

/* ---- streaming transfers -------------------------------------------------------------------- */

/*
 * What a transfer tells its owner, in this order: head once, data zero or more times, done
 * once. None of them is ever called from inside net_client_send, net_transfer_cancel or
 * net_transfer_pause. From inside head or data, the owner may pause or resume any transfer,
 * cancel any other transfer and start new ones; to stop the transfer being reported, return
 * false (net_transfer_cancel on it works too, but false says it where it happens). Any of the
 * three may be NULL (head and data then count as returning true).
 */
struct net_stream_ops {
    /* Once, when the final response's headers are complete (1xx interim answers are skipped):
     * its status and Content-Type (NULL when it has none; valid during the call). Return false
     * to cancel the transfer (done is then not called). */
    bool (*head)(void *arg, int status, const char *content_type);
    /* Zero or more times, with the response body's bytes in order as they arrive (chunked
     * framing removed, content encodings left as sent). buf is valid during the call. Return
     * false to cancel (done is then not called). */
    bool (*data)(void *arg, const char *buf, size_t len);
    /* Exactly once unless cancelled, after the last data: error NULL when the whole response
     * arrived (whatever its status), else why not, e.g. "connect to 127.0.0.1:9: Connection
     * refused", "127.0.0.1:8000 closed the connection before the response was complete",
     * "malformed response from 127.0.0.1:8000: a bad Content-Length" (head may or may not have
     * come before). The transfer is freed when done returns. */
    void (*done)(void *arg, const char *error);
};

/*
 * Sends method (GET, POST, ...) to url with n_headers header lines ("Name: value") and a body
 * made of n_body pieces sent back to back (n_body 0: no body; else a Content-Length of their
 * total length, 0 allowed). The body is borrowed, not copied: the pieces' bytes (not the
 * array, which is copied) must stay valid and unchanged until done runs or the transfer is
 * cancelled — a proxy sends an incoming 200 KB request body with one JSON member cut out as
 * the bytes before it and the bytes after it (they leave with the head in one sendmsg). Header
 * lines are copied; one with an empty value ("Name:") is not sent. A request with a body is
 * sent as `Content-Type: application/json` unless a header line names Content-Type (an empty
 * value, "Content-Type:", sends none); a POST, PUT or PATCH without one says Content-Length 0.
 * ops must outlive the transfer; arg is passed to each of them.
 *
 * Returns the transfer's handle, valid until its done returns or it is cancelled. Failures
 * (bad URL, refused connection, ...) are reported through done from the loop, never here.
 */
struct net_transfer *net_client_send(struct net_client *c, const char *method, const char *url,
                                     const char *const *headers, size_t n_headers,
                                     const struct net_iov *body, size_t n_body,
                                     const struct net_stream_ops *ops, void *arg);

/*
 * Aborts t: none of its callbacks runs afterwards, and its connection is closed (the server
 * sees its client leave). t is invalid after this call. Inside t's own head or data, prefer
 * returning false; calling this there works too and has the same effect.
 */
void net_transfer_cancel(struct net_transfer *t);

/*
 * Pauses (true) or resumes (false) the delivery of t's response body, for backpressure: while
 * paused no data callback runs and t's socket is not read, so the sender's TCP window
 * fills and it slows down. Pausing takes effect at once, also from inside t's data (nothing
 * after that call is delivered until resumed). Resuming takes effect from the loop: data
 * buffered meanwhile arrives in later callbacks, never inside this call. Pausing a paused
 * transfer or resuming a running one does nothing. done may still run while paused: when the
 * response ended with the bytes already delivered, or the transfer failed.
 */
void net_transfer_pause(struct net_transfer *t, bool paused);

/*
 * The body length the response's headers announced (Content-Length), or -1 when they announced
 * none (chunked, or read to the close) or they are not complete yet. Meant for head: an owner
 * that holds the body can size its buffer once. The length is the engine's word, not a limit:
 * the body may end early (done then reports the error) and is not cut at it.
 */
long long net_transfer_length(const struct net_transfer *t);

/* ---- buffered requests ---------------------------------------------------------------------- */

/*
 * The largest answer body a buffered request holds (256 MiB): an answer that announces more
 * (Content-Length) or sends more is abandoned as it does, its connection closed, and its
 * net_response_fn gets status 0 and an error such as "127.0.0.1:8000 answered more than
 * 268435456 bytes" — a peer that sends without end does not grow the process until it is
 * killed. (A proxied answer, net_client_send, is the owner's to bound.)
 */
#define NET_ANSWER_MAX_BYTES ((size_t)256 << 20)

/*
 * The outcome of one buffered request: status is the HTTP status (0 when the transfer failed:
 * then error says why, e.g. "connect to 127.0.0.1:9: Connection refused", and body is empty); body
 * is the response body, NUL-terminated, valid only during the call.
 */
typedef void (*net_response_fn)(void *arg, int status, const char *body, size_t len,
                                const char *error);

/*
 * Whether url is one this client can call: "http://host[:port][/path]" with a port in 1..65535
 * and no credentials. Returns NULL when it is, else why not ("a bad port"): for checking a URL
 * when it is given, rather than on its first call.
 */
const char *net_url_problem(const char *url);

/*
 * Writes to out (size bytes) a key that every spelling of one server's URL shares: the first
 * address its host resolves to (IPv4 first, as connections are made), the port (80 when none
 * is given) and the path without trailing slashes, query or fragment — "127.0.0.1:8000" for
 * http://localhost:8000/ and http://127.0.0.1:8000. A host that does not resolve keeps its name;
 * a URL net_url_problem refuses is its own key. Blocks for the lookup (getaddrinfo): meant for
 * URLs given to a server or registered with it, not for every call.
 */
void net_url_endpoint(const char *url, char *out, size_t size);

/*
 * Whether two of urls[0..n) name one server (their net_url_endpoint keys are equal, the same
 * text included): then *a < *b is the first such pair. Looks each URL up once, and none when
 * there is only one.
 */
bool net_urls_twins(const char *const *urls, size_t n, size_t *a, size_t *b);

/*
 * Sends method (GET, POST) to url with len bytes of body (copied; NULL for none) as
 * application/json, plus one header line ("Name: value"; NULL or "" for none), buffers the
 * whole response and calls fn(arg, ...) exactly once when it completes or fails — never from
 * inside this call. A net_client_send underneath: returns its handle, valid until fn returns;
 * net_transfer_cancel on it before then frees everything, closes the connection and fn is not
 * called.
 */
struct net_transfer *net_client_request(struct net_client *c, const char *method, const char *url,
                                        const char *header, const char *body, size_t len,
                                        net_response_fn fn, void *arg);

/*
 * net_client_request with a limit: when the whole answer has not come limit_s seconds after
 * the call (0: no limit), the transfer is abandoned (its connection closed) and fn gets status 0
 * with "timed out after 5000 ms". For calls that must not wait forever on
 * a peer that accepted the connection and went silent: health checks, engine discovery.
 */
struct net_transfer *net_client_request_within(struct net_client *c, const char *method,
                                               const char *url, const char *header,
                                               const char *body, size_t len, double limit_s,
                                               net_response_fn fn, void *arg);

/*
 * net_client_request for an answer the caller reads whole (an engine's generation), held up to
 * max_bytes (0, or more than NET_ANSWER_MAX_BYTES: that). An answer that passes it is abandoned
 * as it does, its connection closed, and fn gets the answer's HTTP status, an empty body and an
 * error ("127.0.0.1:8000 answered more than 67108864 bytes"): error not NULL with a status
 * that is not 0 says the peer answered, with more than the caller takes — a broken server, not
 * a lost one. Otherwise as net_client_request.
 */
struct net_transfer *net_client_request_capped(struct net_client *c, const char *method,
                                               const char *url, const char *header,
                                               const char *body, size_t len, size_t max_bytes,
                                               net_response_fn fn, void *arg);

#endif
