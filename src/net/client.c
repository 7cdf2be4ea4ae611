/*
 * libcurl multi on libevent (net/client.h): curl tells us which sockets to watch and when its
 * timer should fire; we tell it when a socket is ready or the timer fired, then collect the
 * finished transfers.
 *
 * curl refuses multi calls made from inside its own callbacks, and the owner's head and data
 * run inside them. So the client counts how deep it is inside curl (depth): a transfer
 * cancelled there is only marked, answers curl's next callback with an abort, and is removed
 * once curl has returned (reap). Resuming a paused transfer makes curl deliver what it held
 * back from inside curl_easy_pause; that call is made from the loop (resume_ev), never inside
 * net_transfer_pause, so the owner's data never runs inside its own call.
 */
#include "net/client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"

struct watch;

/* A body in pieces up to this size is copied into one: curl then sends it in the same write
 * as the request's headers (it does so for whole bodies under 64 KiB), one loopback round of
 * the kernel's TCP path instead of two, which costs more than the copy. */
#define NET_JOIN_BYTES (60u << 10)

/* curl's receive buffer per transfer (its default is 16 KiB). curl follows every read with a
 * poll to see whether more is waiting, so a 1 MiB answer cost 64 reads and 66 polls; at 64 KiB
 * it costs 16 and 18, for 48 KiB more per live transfer. */
#define NET_RECV_BYTES 65536L

/* Easy handles kept for reuse: a new handle costs about as much as parsing a small request
 * (allocation and defaults, ~12 k instructions), and a gateway makes one per turn. */
#define NET_IDLE_HANDLES 64

struct net_client {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    struct event *resume_ev;        /* runs the queued resumes from the loop */
    struct net_transfer *transfers; /* in flight (curl 7.88 cannot list its handles) */
    struct net_transfer *resumes;   /* waiting for resume_ev */
    struct watch *watches;          /* sockets watched */
    int depth;                      /* > 0 while inside curl: its callbacks may be running */
    bool reap;                      /* a transfer was cancelled inside curl */
    CURL *idle[NET_IDLE_HANDLES];   /* finished handles, reset, for the next transfers */
    int n_idle;
};

/* One transfer. */
struct net_transfer {
    struct net_client *client;
    struct net_transfer *prev, *next;   /* the client's transfers */
    struct net_transfer *rprev, *rnext; /* the client's resumes, while queued */
    CURL *easy;
    struct curl_slist *headers;
    struct net_iov *body; /* the pieces (the array is ours, the bytes are borrowed) */
    char *joined;         /* a small body's pieces copied back to back, or NULL */
    size_t n_body;
    size_t piece, off; /* read position: piece index, offset in it */
    const struct net_stream_ops *ops;
    void *arg;
    int status;                 /* of the last status line */
    char *content_type;         /* of the last header block, NULL when it had none */
    bool head_done;             /* head was called */
    bool cancelled;             /* no more callbacks; removed by reap */
    bool finishing;             /* done is running: the owner's cancel is too late */
    bool paused;                /* the owner wants no data */
    bool curl_paused;           /* curl holds the receive side paused */
    bool queued;                /* in the client's resumes */
    bool done_called;           /* ops->done ran */
    void (*release)(void *arg); /* frees arg when the transfer ends without done (internal) */
    char error[CURL_ERROR_SIZE];
};

/* A socket curl asked us to watch. */
struct watch {
    struct event *ev; /* NULL while curl waits for nothing on s */
    curl_socket_t s;
    struct watch *prev, *next;
};

/* Intrusive list helpers for the lists above, through the given link fields. */
#define LIST_LINK(head, x, prev, next)                                                             \
    do {                                                                                           \
        (x)->prev = NULL;                                                                          \
        (x)->next = (head);                                                                        \
        if (head)                                                                                  \
            (head)->prev = (x);                                                                    \
        (head) = (x);                                                                              \
    } while (0)
#define LIST_UNLINK(head, x, prev, next)                                                           \
    do {                                                                                           \
        if ((x)->prev)                                                                             \
            (x)->prev->next = (x)->next;                                                           \
        else                                                                                       \
            (head) = (x)->next;                                                                    \
        if ((x)->next)                                                                             \
            (x)->next->prev = (x)->prev;                                                           \
    } while (0)

/* ---- transfers ------------------------------------------------------------------------------ */

/* curl could not allocate: as util/alloc.h does, running out of memory is fatal. */
static void curl_oom(void)
{
    fputs("libra: out of memory (curl)\n", stderr);
    abort();
}

static void transfer_free(struct net_transfer *t)
{
    struct net_client *c = t->client;
    LIST_UNLINK(c->transfers, t, prev, next);
    if (t->queued)
        LIST_UNLINK(c->resumes, t, rprev, rnext);
    if (t->release && !t->done_called)
        t->release(t->arg);
    curl_slist_free_all(t->headers);
    if (c->n_idle < NET_IDLE_HANDLES) {
        curl_easy_reset(t->easy); /* options back to defaults; the multi keeps the connections */
        c->idle[c->n_idle++] = t->easy;
    } else {
        curl_easy_cleanup(t->easy);
    }
    free(t->body);
    free(t->joined);
    free(t->content_type);
    free(t);
}

/* Takes t out of curl (closing its connection if the response is unfinished) and frees it.
 * Not from inside curl. */
static void transfer_remove(struct net_transfer *t)
{
    curl_multi_remove_handle(t->client->multi, t->easy);
    transfer_free(t);
}

/* Stops t's callbacks; reap removes it once curl returns. */
static void mark_cancelled(struct net_transfer *t)
{
    t->cancelled = true;
    t->client->reap = true;
}

/* Removes the transfers cancelled inside curl. */
static void reap(struct net_client *c)
{
    if (!c->reap || c->depth > 0)
        return;
    c->reap = false;
    struct net_transfer *next;
    for (struct net_transfer *t = c->transfers; t; t = next) {
        next = t->next;
        if (t->cancelled)
            transfer_remove(t);
    }
}

/* Tells the owner the headers are complete; false when it cancelled. */
static bool call_head(struct net_transfer *t)
{
    t->head_done = true;
    if (t->ops->head && !t->ops->head(t->arg, t->status, t->content_type)) {
        mark_cancelled(t);
        return false;
    }
    return true;
}

/* CURLOPT_HEADERFUNCTION: one header line at a time, status lines and blank lines included
 * (each interim 1xx answer has its own block; chunked trailers come after the body). */
static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    struct net_transfer *t = arg;
    size_t len = size * n;
    if (t->cancelled)
        return 0;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) { /* a new block: "HTTP/1.1 200 OK" */
        const char *p = memchr(line, ' ', len), *end = line + len;
        t->status = 0;
        for (p = p ? p + 1 : end; p < end && *p >= '0' && *p <= '9' && t->status < 1000; p++)
            t->status = 10 * t->status + (*p - '0'); /* the line is not NUL-terminated */
        free(t->content_type);
        t->content_type = NULL;
    } else if (len <= 2 && (line[0] == '\r' || line[0] == '\n')) { /* the end of a block */
        if (t->status >= 200 && !t->head_done && !call_head(t))
            return 0;
    } else if (!t->head_done && len > 13 && strncasecmp(line, "Content-Type:", 13) == 0) {
        const char *p = line + 13, *end = line + len;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        while (end > p && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
            end--;
        free(t->content_type);
        t->content_type = xstrndup(p, (size_t)(end - p));
    }
    return len;
}

/* CURLOPT_WRITEFUNCTION: response body bytes. */
static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    struct net_transfer *t = arg;
    size_t len = size * n;
    if (t->cancelled)
        return 0;
    if (t->paused) { /* curl keeps these bytes and hands them over again on resume */
        t->curl_paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (!t->head_done) {
        long status = 0;
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
        t->status = (int)status;
        if (!call_head(t))
            return 0;
    }
    if (len > 0 && t->ops->data && !t->ops->data(t->arg, data, len)) {
        mark_cancelled(t);
        return 0;
    }
    return len;
}

/* CURLOPT_READFUNCTION: the body's pieces, back to back. */
static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    struct net_transfer *t = arg;
    if (t->cancelled)
        return CURL_READFUNC_ABORT;
    size_t room = size * n, got = 0;
    while (got < room && t->piece < t->n_body) {
        const struct net_iov *v = &t->body[t->piece];
        size_t k = v->len - t->off;
        if (k > room - got)
            k = room - got;
        if (k > 0)
            memcpy(buf + got, v->p + t->off, k);
        got += k;
        t->off += k;
        if (t->off == v->len) {
            t->piece++;
            t->off = 0;
        }
    }
    return got;
}

/* CURLOPT_SEEKFUNCTION: curl rewinds the body to send it again, e.g. on a fresh connection
 * after the kept-alive one it first tried turned out closed. */
static int on_seek(void *arg, curl_off_t offset, int origin)
{
    struct net_transfer *t = arg;
    if (origin != SEEK_SET || offset < 0)
        return CURL_SEEKFUNC_CANTSEEK;
    size_t left = (size_t)offset;
    t->piece = 0;
    t->off = 0;
    while (t->piece < t->n_body && left >= t->body[t->piece].len) {
        left -= t->body[t->piece].len;
        t->piece++;
    }
    if (left > 0 && t->piece == t->n_body)
        return CURL_SEEKFUNC_FAIL;
    t->off = left;
    return CURL_SEEKFUNC_OK;
}

/* Reports every finished transfer. Outside curl (depth 0): done may start, cancel or pause
 * other transfers. */
static void collect(struct net_client *c)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(c->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct net_transfer *t;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        CURLcode rc = msg->data.result;
        if (t->cancelled) /* reap removes it */
            continue;
        curl_multi_remove_handle(c->multi, t->easy);
        t->finishing = true;
        if (rc == CURLE_OK && !t->head_done) { /* a response without a body or a blank line */
            long status = 0;
            curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
            t->status = (int)status;
            if (!call_head(t)) {
                transfer_free(t);
                continue;
            }
        }
        const char *why = rc == CURLE_OK ? NULL : (t->error[0] ? t->error : curl_easy_strerror(rc));
        t->done_called = true;
        if (t->ops->done)
            t->ops->done(t->arg, why);
        transfer_free(t);
    }
}

/* After each entry into curl: report what finished, remove what was cancelled. */
static void after_curl(struct net_client *c)
{
    collect(c);
    reap(c);
}

static void on_socket_ready(evutil_socket_t fd, short what, void *arg)
{
    struct net_client *c = arg;
    int mask = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
    int running;
    c->depth++;
    curl_multi_socket_action(c->multi, fd, mask, &running);
    c->depth--;
    after_curl(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_client *c = arg;
    int running;
    c->depth++;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    c->depth--;
    after_curl(c);
}

/* resume_ev: lets curl go on with the transfers resumed since the last turn of the loop. */
static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct net_client *c = arg;
    c->depth++;
    while (c->resumes) {
        struct net_transfer *t = c->resumes;
        LIST_UNLINK(c->resumes, t, rprev, rnext);
        t->queued = false;
        if (t->cancelled || t->paused || !t->curl_paused)
            continue;
        t->curl_paused = false;
        curl_easy_pause(t->easy, CURLPAUSE_CONT); /* may deliver held data: on_data */
    }
    c->depth--;
    after_curl(c);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what curl wants, or stop watching it. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *socketp)
{
    struct net_client *c = arg;
    struct watch *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (w) {
            LIST_UNLINK(c->watches, w, prev, next);
            if (w->ev)
                event_free(w->ev);
            free(w);
        }
        curl_multi_assign(c->multi, s, NULL);
        return 0;
    }
    short events =
        (short)((what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0));
    if (!w) {
        w = xcalloc(1, sizeof *w);
        w->s = s;
        LIST_LINK(c->watches, w, prev, next);
        curl_multi_assign(c->multi, s, w);
    } else if (w->ev) {
        event_free(w->ev);
        w->ev = NULL;
    }
    if (events) { /* else CURL_POLL_NONE: known, but nothing to wait for (a paused transfer) */
        w->ev = event_new(c->base, s, (short)(events | EV_PERSIST), on_socket_ready, c);
        event_add(w->ev, NULL);
    }
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: fire after timeout_ms (-1: none). */
static int on_timer_change(CURLM *multi, long timeout_ms, void *arg)
{
    struct net_client *c = arg;
    if (timeout_ms < 0) {
        evtimer_del(c->timer);
        return 0;
    }
    if (timeout_ms == 0 && c->depth == 0) {
        /* "Now", asked outside curl (a transfer was added): run it in this turn of the loop
         * rather than after another wait for events. Inside curl it keeps the timer, so that
         * curl asking again from on_timer waits for the loop and cannot starve the sockets. */
        event_active(c->timer, EV_TIMEOUT, 1);
        return 0;
    }
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
    return 0;
}

struct net_client *net_client_new(struct event_base *base)
{
    CURLM *multi = curl_multi_init();
    if (!multi)
        return NULL;
    struct net_client *c = xcalloc(1, sizeof *c);
    c->base = base;
    c->multi = multi;
    c->timer = evtimer_new(base, on_timer, c);
    c->resume_ev = event_new(base, -1, 0, on_resume, c);
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer_change);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, c);
    return c;
}

/* Whether one of the header lines names Content-Type. */
static bool names_content_type(const char *const *headers, size_t n_headers)
{
    for (size_t i = 0; i < n_headers; i++)
        if (strncasecmp(headers[i], "Content-Type:", 13) == 0)
            return true;
    return false;
}

/* net_client_send with a limit on the whole transfer, milliseconds (0: none). */
static struct net_transfer *send_within(struct net_client *c, const char *method, const char *url,
                                        const char *const *headers, size_t n_headers,
                                        const struct net_iov *body, size_t n_body,
                                        const struct net_stream_ops *ops, void *arg,
                                        long timeout_ms)
{
    struct net_transfer *t = xcalloc(1, sizeof *t);
    t->client = c;
    t->ops = ops;
    t->arg = arg;
    t->easy = c->n_idle ? c->idle[--c->n_idle] : curl_easy_init();
    if (!t->easy)
        curl_oom();
    CURL *e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, NET_RECV_BYTES);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (n_body > 0 && !names_content_type(headers, n_headers))
        t->headers = curl_slist_append(t->headers, "Content-Type: application/json");
    for (size_t i = 0; i < n_headers; i++)
        t->headers = curl_slist_append(t->headers, headers[i]);
    t->headers = curl_slist_append(t->headers, "Expect:"); /* no 100-continue round trip */
    if (!t->headers)
        curl_oom();
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    if (n_body > 0) {
        size_t total = 0;
        for (size_t i = 0; i < n_body; i++)
            total += body[i].len;
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)total);
        if (n_body > 1 && total <= NET_JOIN_BYTES) {
            t->joined = xmalloc(total + 1);
            size_t at = 0;
            for (size_t i = 0; i < n_body; i++) {
                if (body[i].len > 0)
                    memcpy(t->joined + at, body[i].p, body[i].len);
                at += body[i].len;
            }
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->joined);
        } else if (n_body == 1) { /* sent as it is, without copying (not COPYPOSTFIELDS) */
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body[0].p ? body[0].p : "");
        } else {
            t->body = xmalloc(n_body * sizeof *t->body);
            memcpy(t->body, body, n_body * sizeof *t->body);
            t->n_body = n_body;
            curl_easy_setopt(e, CURLOPT_POST, 1L);
            curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(e, CURLOPT_READDATA, t);
            curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
            curl_easy_setopt(e, CURLOPT_SEEKDATA, t);
        }
    }
    LIST_LINK(c->transfers, t, prev, next);
    curl_multi_add_handle(c->multi, e); /* arms the timer: curl starts it from the loop */
    return t;
}

struct net_transfer *net_client_send(struct net_client *c, const char *method, const char *url,
                                     const char *const *headers, size_t n_headers,
                                     const struct net_iov *body, size_t n_body,
                                     const struct net_stream_ops *ops, void *arg)
{
    return send_within(c, method, url, headers, n_headers, body, n_body, ops, arg, 0);
}

void net_transfer_cancel(struct net_transfer *t)
{
    if (t->finishing || t->cancelled)
        return;
    if (t->client->depth > 0) { /* inside curl: it cannot remove a handle now */
        mark_cancelled(t);
        return;
    }
    transfer_remove(t);
}

void net_transfer_pause(struct net_transfer *t, bool paused)
{
    struct net_client *c = t->client;
    if (t->cancelled || t->paused == paused)
        return;
    t->paused = paused;
    if (paused) {
        /* Inside curl, on_data answers the next bytes with a pause instead. */
        if (c->depth == 0 && !t->curl_paused) {
            curl_easy_pause(t->easy, CURLPAUSE_RECV);
            t->curl_paused = true;
        }
        return;
    }
    if (t->curl_paused && !t->queued) {
        t->queued = true;
        LIST_LINK(c->resumes, t, rprev, rnext);
        event_active(c->resume_ev, EV_TIMEOUT, 0);
    }
}

long long net_transfer_length(const struct net_transfer *t)
{
    curl_off_t n = -1;
    if (!t->head_done || curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &n))
        return -1;
    return n >= 0 ? (long long)n : -1;
}

void net_client_free(struct net_client *c)
{
    if (!c)
        return;
    while (c->transfers)
        transfer_remove(c->transfers);
    /* Unassigned before the cleanup, which may still report their sockets. */
    struct watch *next;
    for (struct watch *w = c->watches; w; w = next) {
        next = w->next;
        curl_multi_assign(c->multi, w->s, NULL);
        if (w->ev)
            event_free(w->ev);
        free(w);
    }
    c->watches = NULL;
    while (c->n_idle)
        curl_easy_cleanup(c->idle[--c->n_idle]);
    curl_multi_cleanup(c->multi);
    event_free(c->timer);
    event_free(c->resume_ev);
    free(c);
}

/* ---- buffered requests ---------------------------------------------------------------------- */

/* One net_client_request: the body it copied and the response as it arrives. */
struct buffered {
    net_response_fn fn;
    void *arg;
    char *body;
    int status;
    char *out;
    size_t out_n, out_cap;
};

static bool buffered_head(void *arg, int status, const char *content_type)
{
    struct buffered *b = arg;
    b->status = status;
    return true;
}

static bool buffered_data(void *arg, const char *data, size_t len)
{
    struct buffered *b = arg;
    if (b->out_n + len + 1 > b->out_cap) {
        b->out_cap = 2 * (b->out_n + len + 1);
        b->out = xrealloc(b->out, b->out_cap);
    }
    memcpy(b->out + b->out_n, data, len);
    b->out_n += len;
    return true;
}

static void buffered_free(void *arg)
{
    struct buffered *b = arg;
    free(b->out);
    free(b->body);
    free(b);
}

static void buffered_done(void *arg, const char *error)
{
    struct buffered *b = arg;
    if (error) {
        b->fn(b->arg, 0, "", 0, error);
    } else {
        if (!b->out)
            b->out = xmalloc(1);
        b->out[b->out_n] = '\0';
        b->fn(b->arg, b->status, b->out, b->out_n, NULL);
    }
    buffered_free(b);
}

static const struct net_stream_ops buffered_ops = {buffered_head, buffered_data, buffered_done};

void net_client_request(struct net_client *c, const char *method, const char *url,
                        const char *header, const char *body, size_t len, net_response_fn fn,
                        void *arg)
{
    net_client_request_within(c, method, url, header, body, len, 0, fn, arg);
}

void net_client_request_within(struct net_client *c, const char *method, const char *url,
                               const char *header, const char *body, size_t len, double limit_s,
                               net_response_fn fn, void *arg)
{
    struct buffered *b = xcalloc(1, sizeof *b);
    b->fn = fn;
    b->arg = arg;
    struct net_iov piece = {0};
    if (body) {
        b->body = xmalloc(len + 1);
        memcpy(b->body, body, len);
        b->body[len] = '\0';
        piece = (struct net_iov){b->body, len};
    }
    bool has_header = header && *header;
    long limit_ms = limit_s > 0 ? (long)(limit_s * 1000 + 0.999) : 0; /* rounded up */
    struct net_transfer *t =
        send_within(c, method, url, has_header ? &header : NULL, has_header ? 1 : 0, &piece,
                    body ? 1 : 0, &buffered_ops, b, limit_ms);
    t->release = buffered_free; /* when net_client_free cancels it */
}
