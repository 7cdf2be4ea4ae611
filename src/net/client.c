/*
 * libra's HTTP/1.1 client on libevent (net/client.h). A transfer parses its URL, takes an idle
 * connection to its host:port or opens one, and sends its head and body in one sendmsg at once
 * (the loop is asked to report the socket writable only when the kernel's buffer is full or a
 * connect is under way). Answers are read 64 KiB at a time into the connection's buffer and
 * parsed there (net/response.h); body bytes go to the owner straight from that buffer.
 *
 * Idle connections stay watched for reading: a peer that closes one is seen by the loop, and
 * the connection dropped, without a check per request. A reused connection can still die just
 * as a request leaves on it; a request that got no byte of answer on a reused connection is
 * sent once more on a fresh one, as browsers and curl do (the body is borrowed until done, so
 * it can be sent again).
 *
 * The owner's callbacks run only from the loop: failures found inside net_client_send (a bad
 * URL, a refused connect, a reset while sending) and resumed transfers are queued and handled
 * by one event (later_ev). A transfer whose own head or data cancels it is only marked
 * (in_call), and torn down once the callback has returned.
 */
#include "net/client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/response.h"
#include "util/alloc.h"
#include "util/list.h"

/* Bytes asked for by each read. A 1 MiB answer takes 16 reads; the buffer exists only while a
 * response is being read. */
#define NET_READ_BYTES (64u << 10)
/* Reads per readiness report while each one fills the room it was given: a short read means
 * the kernel's queue is empty, so the loop is not asked again just to learn that. */
#define NET_READS_PER_EVENT 8
/* Idle connections kept per host:port; one finishing beyond this is closed. */
#define NET_IDLE_PER_HOST 1024
/* Addresses kept per host name (IPv4 first: a name such as localhost often resolves to ::1
 * too, where the server may not listen). */
#define NET_ADDRS_MAX 4
/* Pieces per sendmsg (a request is its head and a few body pieces). */
#define NET_IOV_MAX 64
#define NET_ERROR_BYTES 256

/* A host:port, its addresses, and its idle connections. Kept for the client's life: names are
 * resolved once, by getaddrinfo, which blocks the loop for that one lookup (engines are
 * configured by address or by a name the local resolver answers at once). */
struct host {
    struct host *next;
    char *name; /* as in the URL, without an IPv6 address's brackets */
    size_t name_len;
    int port;
    char *label; /* "name:port", for messages and the Host header */
    struct sockaddr_storage addrs[NET_ADDRS_MAX];
    socklen_t addr_lens[NET_ADDRS_MAX];
    int n_addrs;
    struct list idle; /* of struct conn, most recently used at the front */
    int n_idle;
};

/* One TCP connection. */
struct conn {
    struct net_client *client;
    struct host *host;
    int fd;
    int addr; /* the index of the address connected to */
    struct event *rev, *wev;
    bool connecting;
    bool reading;               /* rev is added */
    bool reused;                /* it carried an earlier response */
    struct net_transfer *t;     /* NULL while idle */
    struct list_node idle_link; /* in the host's idle list, while idle */
    char *buf;                  /* received bytes: [pos, n) not parsed yet */
    size_t pos, n, cap;
};

struct net_client {
    struct event_base *base;
    struct event *later_ev;
    struct list all;   /* of struct net_transfer: every transfer not yet freed */
    struct list later; /* of struct net_transfer: waiting for later_ev, failed or resumed */
    struct host *hosts;
};

struct net_transfer {
    struct net_client *client;
    struct list_node all_link;   /* in the client's list of transfers */
    struct list_node later_link; /* in the client's later queue, while queued */
    struct host *host;
    struct conn *conn; /* NULL once failed */
    const struct net_stream_ops *ops;
    void *arg;
    char *head;        /* the request line and header lines */
    struct iovec *iov; /* head, then the borrowed body pieces */
    size_t n_iov;
    size_t wi, woff; /* write position: piece, offset in it */
    struct net_response resp;
    struct event *timer; /* the _within limit, or NULL */
    long limit_ms;
    bool written;   /* all of the request left */
    bool got_any;   /* a byte of answer came on this connection */
    bool retried;   /* sent again on a fresh connection once */
    bool paused;    /* the owner wants no data */
    bool in_call;   /* its head or data is running */
    bool cancelled; /* cancelled from inside its own callback */
    bool finishing; /* done is running: a cancel is too late */
    bool queued;    /* in the later queue */
    bool failed;    /* error holds why; done reports it from the loop */
    bool done_called;
    void (*release)(void *arg); /* frees arg when the transfer ends without done (internal) */
    char error[NET_ERROR_BYTES];
};

static void start(struct net_transfer *t, bool fresh);

/* ---- connections ---------------------------------------------------------------------------- */

static void on_readable(evutil_socket_t fd, short what, void *arg);
static void on_writable(evutil_socket_t fd, short what, void *arg);

/* Reads when something wants the bytes: a running transfer that is not paused, or nobody (an
 * idle connection, watched for its peer's close). */
static void conn_watch(struct conn *k)
{
    bool want = !k->connecting && !(k->t && k->t->paused);
    if (want == k->reading)
        return;
    k->reading = want;
    if (want)
        event_add(k->rev, NULL);
    else
        event_del(k->rev);
}

static void conn_unbind(struct conn *k)
{
    if (k->rev) {
        event_free(k->rev);
        event_free(k->wev);
        k->rev = k->wev = NULL;
    }
    if (k->fd >= 0)
        close(k->fd);
    k->fd = -1;
    k->reading = false;
}

static void conn_close(struct conn *k)
{
    if (!k->t) {
        list_unlink(&k->host->idle, &k->idle_link);
        k->host->n_idle--;
    }
    conn_unbind(k);
    free(k->buf);
    free(k);
}

/* Starts connecting k to its host's address k->addr; errno when it failed at once. */
static int conn_connect(struct conn *k)
{
    struct host *h = k->host;
    const struct sockaddr *sa = (const struct sockaddr *)&h->addrs[k->addr];
    k->fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (k->fd < 0)
        return errno;
    int one = 1; /* a request leaves whole in one write: nothing to wait for */
    setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    k->rev = event_new(k->client->base, k->fd, EV_READ | EV_PERSIST, on_readable, k);
    k->wev = event_new(k->client->base, k->fd, EV_WRITE, on_writable, k);
    k->connecting = false;
    if (connect(k->fd, sa, h->addr_lens[k->addr]) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return errno;
    k->connecting = true;
    event_add(k->wev, NULL);
    return 0;
}

/* Connects k to the first address of its host that does not refuse at once, else errno. */
static int conn_connect_from(struct conn *k, int addr)
{
    int err = 0;
    for (k->addr = addr; k->addr < k->host->n_addrs; k->addr++) {
        err = conn_connect(k);
        if (err == 0)
            return 0;
        conn_unbind(k);
    }
    return err;
}

static void conn_to_idle(struct conn *k)
{
    struct host *h = k->host;
    k->t = NULL;
    free(k->buf);
    k->buf = NULL;
    k->pos = k->n = k->cap = 0;
    if (h->n_idle >= NET_IDLE_PER_HOST) {
        conn_unbind(k);
        free(k);
        return;
    }
    k->reused = true;
    list_push_front(&h->idle, &k->idle_link);
    h->n_idle++;
    conn_watch(k);
}

/* An idle connection became readable: its peer closed it (or sent what nobody asked for). */
static void idle_readable(struct conn *k)
{
    char byte;
    ssize_t got = recv(k->fd, &byte, 1, MSG_PEEK);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    conn_close(k);
}

/* ---- transfers ------------------------------------------------------------------------------ */

static void later(struct net_transfer *t)
{
    struct net_client *c = t->client;
    if (t->queued)
        return;
    t->queued = true;
    list_push_front(&c->later, &t->later_link);
    event_active(c->later_ev, EV_TIMEOUT, 0);
}

static void transfer_free(struct net_transfer *t)
{
    struct net_client *c = t->client;
    list_unlink(&c->all, &t->all_link);
    if (t->queued)
        list_unlink(&c->later, &t->later_link);
    if (t->release && !t->done_called)
        t->release(t->arg);
    if (t->timer)
        event_free(t->timer);
    free(t->head);
    free(t->iov);
    free(t);
}

/* Ends t without callbacks, closing its connection (the server sees its client leave). */
static void transfer_drop(struct net_transfer *t)
{
    if (t->conn)
        conn_close(t->conn);
    transfer_free(t);
}

/* Fails t: its connection closes now, done reports why from the loop. */
static void fail(struct net_transfer *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(struct net_transfer *t, const char *fmt, ...)
{
    if (t->conn) {
        conn_close(t->conn);
        t->conn = NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->error, sizeof t->error, fmt, ap);
    va_end(ap);
    t->failed = true;
    later(t);
}

/* Calls done (error NULL: the whole response came) and frees t. */
static void finish(struct net_transfer *t, const char *error)
{
    t->finishing = true;
    t->done_called = true;
    if (t->ops->done)
        t->ops->done(t->arg, error);
    transfer_free(t);
}

/* The connection broke (err an errno, 0 for a close) before the response was complete. */
static void lost(struct net_transfer *t, const char *what, int err)
{
    struct conn *k = t->conn;
    if (k->reused && !t->got_any && !t->retried) { /* it died idle, unnoticed: again, fresh */
        t->retried = true;
        conn_close(k);
        t->conn = NULL;
        start(t, true);
        return;
    }
    if (err)
        fail(t, "%s %s: %s", what, t->host->label, strerror(err));
    else
        fail(t, "%s closed the connection before the response was complete", t->host->label);
}

/* Sends what is left of t's request; asks the loop to report the socket writable when the
 * kernel takes no more. */
static void transfer_write(struct net_transfer *t)
{
    struct conn *k = t->conn;
    while (t->wi < t->n_iov) {
        struct iovec v[NET_IOV_MAX];
        size_t n = 0;
        for (size_t i = t->wi; i < t->n_iov && n < NET_IOV_MAX; i++)
            v[n++] = t->iov[i];
        v[0].iov_base = (char *)v[0].iov_base + t->woff;
        v[0].iov_len -= t->woff;
        struct msghdr m = {.msg_iov = v, .msg_iovlen = n};
        ssize_t sent = sendmsg(k->fd, &m, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            event_add(k->wev, NULL);
            return;
        }
        if (sent < 0) {
            lost(t, "send to", errno);
            return;
        }
        for (size_t left = (size_t)sent; t->wi < t->n_iov;) {
            size_t piece = t->iov[t->wi].iov_len - t->woff;
            if (left < piece) {
                t->woff += left;
                break;
            }
            left -= piece;
            t->wi++;
            t->woff = 0;
        }
    }
    t->written = true;
}

/* Calls head or data; false when t ended there (cancelled by returning false or by the owner):
 * then it is freed. */
static bool call_head(struct net_transfer *t)
{
    t->in_call = true;
    bool go = !t->ops->head ||
              t->ops->head(t->arg, t->resp.status, t->resp.has_type ? t->resp.content_type : NULL);
    t->in_call = false;
    if (go && !t->cancelled)
        return true;
    transfer_drop(t);
    return false;
}

static bool call_data(struct net_transfer *t, const char *piece, size_t len)
{
    t->in_call = true;
    bool go = !t->ops->data || t->ops->data(t->arg, piece, len);
    t->in_call = false;
    if (go && !t->cancelled)
        return true;
    transfer_drop(t);
    return false;
}

/* The response is complete: the connection goes idle when it can carry another, then done. */
static void complete(struct net_transfer *t, bool eof)
{
    struct conn *k = t->conn;
    t->conn = NULL;
    if (t->resp.keep_alive && t->written && !eof && k->pos == k->n)
        conn_to_idle(k);
    else
        conn_close(k);
    finish(t, NULL);
}

/* Parses what t's connection holds and tells the owner, until more bytes are needed or the
 * owner paused. False when t ended (it is freed). */
static bool process(struct net_transfer *t)
{
    struct conn *k = t->conn;
    while (!t->paused || net_response_ending(&t->resp)) {
        size_t used, len = 0;
        const char *piece = NULL;
        enum net_response_step s =
            net_response_parse(&t->resp, k->buf + k->pos, k->n - k->pos, &used, &piece, &len);
        k->pos += used;
        switch (s) {
        case NET_RESPONSE_MORE:
            return true;
        case NET_RESPONSE_HEAD:
            if (!call_head(t))
                return false;
            break;
        case NET_RESPONSE_BODY:
            if (!call_data(t, piece, len))
                return false;
            break;
        case NET_RESPONSE_END:
            complete(t, false);
            return false;
        case NET_RESPONSE_ERROR:
            fail(t, "malformed response from %s: %s", t->host->label, t->resp.error);
            return false;
        }
    }
    return true;
}

/* Room for one more read at the end of k's buffer: at least half a read's worth, so that a
 * few bytes left over (a partial head or chunk-size line) do not cost a reallocation. */
static void make_room(struct conn *k)
{
    if (k->pos == k->n)
        k->pos = k->n = 0;
    if (k->cap - k->n >= NET_READ_BYTES / 2)
        return;
    if (k->pos > 0) {
        memmove(k->buf, k->buf + k->pos, k->n - k->pos);
        k->n -= k->pos;
        k->pos = 0;
    }
    if (k->cap - k->n < NET_READ_BYTES / 2) {
        k->cap = k->n + NET_READ_BYTES;
        k->buf = xrealloc(k->buf, k->cap);
    }
}

/* The peer closed k after the bytes parsed so far. */
static void on_eof(struct net_transfer *t)
{
    if (!t->got_any) {
        lost(t, NULL, 0);
        return;
    }
    if (net_response_eof(&t->resp) == NET_RESPONSE_END) {
        complete(t, true);
        return;
    }
    fail(t, "%s closed the connection before the response was complete", t->host->label);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *k = arg;
    struct net_transfer *t = k->t;
    if (!t) {
        idle_readable(k);
        return;
    }
    for (int i = 0; i < NET_READS_PER_EVENT && !t->paused; i++) {
        make_room(k);
        size_t room = k->cap - k->n;
        ssize_t got = recv(fd, k->buf + k->n, room, 0);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            break;
        if (got < 0) {
            lost(t, "recv from", errno);
            return;
        }
        if (got == 0) {
            on_eof(t);
            return;
        }
        k->n += (size_t)got;
        t->got_any = true;
        if (!process(t))
            return;
        if ((size_t)got < room)
            break;
    }
    conn_watch(k);
}

static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    struct conn *k = arg;
    struct net_transfer *t = k->t;
    if (k->connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            conn_unbind(k);
            if (k->addr + 1 < k->host->n_addrs && conn_connect_from(k, k->addr + 1) == 0) {
                if (!k->connecting) {
                    conn_watch(k);
                    transfer_write(t);
                }
                return;
            }
            fail(t, "connect to %s: %s", t->host->label, strerror(err));
            return;
        }
        k->connecting = false;
        conn_watch(k);
    }
    transfer_write(t);
}

/* later_ev: reports the failed transfers and goes on with the resumed ones. */
static void on_later(evutil_socket_t fd, short what, void *arg)
{
    struct net_client *c = arg;
    while (c->later.front) {
        struct net_transfer *t = list_entry(c->later.front, struct net_transfer, later_link);
        list_unlink(&c->later, &t->later_link);
        t->queued = false;
        if (t->failed) {
            finish(t, t->error);
            continue;
        }
        if (t->paused || !t->conn || t->conn->connecting)
            continue;
        if (process(t))
            conn_watch(t->conn);
    }
}

/* ---- starting ------------------------------------------------------------------------------- */

/* A new connection for t, or NULL when connecting failed (t failed). */
static struct conn *conn_open(struct net_transfer *t)
{
    struct conn *k = xcalloc(1, sizeof *k);
    k->client = t->client;
    k->host = t->host;
    k->fd = -1;
    int err = conn_connect_from(k, 0);
    if (err) {
        free(k);
        fail(t, "connect to %s: %s", t->host->label, strerror(err));
        return NULL;
    }
    return k;
}

/* Sends t on an idle connection to its host (unless fresh) or a new one. */
static void start(struct net_transfer *t, bool fresh)
{
    struct host *h = t->host;
    struct conn *k =
        fresh || !h->idle.front ? NULL : list_entry(h->idle.front, struct conn, idle_link);
    if (k) {
        list_unlink(&h->idle, &k->idle_link);
        h->n_idle--;
    } else if (!(k = conn_open(t))) {
        return;
    }
    k->t = t;
    t->conn = k;
    t->wi = t->woff = 0;
    t->written = t->got_any = false;
    net_response_init(&t->resp, strncmp(t->head, "HEAD ", 5) == 0);
    if (!k->connecting) {
        conn_watch(k);
        transfer_write(t);
    }
}

/* The host:port of name (len bytes), resolved the first time it is asked for; NULL with why
 * in t when it cannot be resolved. */
static struct host *host_get(struct net_transfer *t, const char *name, size_t len, int port)
{
    struct net_client *c = t->client;
    for (struct host *h = c->hosts; h; h = h->next)
        if (h->port == port && h->name_len == len && memcmp(h->name, name, len) == 0)
            return h;
    struct host *h = xcalloc(1, sizeof *h);
    h->name = xstrndup(name, len);
    h->name_len = len;
    h->port = port;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    hints.ai_flags = AI_NUMERICSERV;
    char service[8];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(h->name, service, &hints, &res);
    if (rc != 0) {
        fail(t, "cannot resolve '%s': %s", h->name, gai_strerror(rc));
        free(h->name);
        free(h);
        return NULL;
    }
    for (int family = 0; family < 2; family++) /* IPv4 first */
        for (struct addrinfo *a = res; a && h->n_addrs < NET_ADDRS_MAX; a = a->ai_next)
            if ((a->ai_family == AF_INET) == (family == 0) && a->ai_addrlen <= sizeof h->addrs[0]) {
                memcpy(&h->addrs[h->n_addrs], a->ai_addr, a->ai_addrlen);
                h->addr_lens[h->n_addrs++] = a->ai_addrlen;
            }
    freeaddrinfo(res);
    bool v6 = memchr(name, ':', len) != NULL;
    size_t label_len = len + 16;
    h->label = xmalloc(label_len);
    snprintf(h->label, label_len, v6 ? "[%s]:%d" : "%s:%d", h->name, port);
    h->next = c->hosts;
    c->hosts = h;
    return h;
}

/* "http://host[:port][/path][?query]": the host (without an IPv6 address's brackets), the port
 * (80 by default) and where the target starts (NULL: "/"); NULL when fine, else why not. */
static const char *parse_url(const char *url, const char **host, size_t *host_len, int *port,
                             const char **target)
{
    if (strncasecmp(url, "http://", 7) != 0)
        return strstr(url, "://") ? "only http:// URLs are supported" : "not an http:// URL";
    const char *p = url + 7, *end = p + strcspn(p, "/?#");
    *target = *end == '/' || *end == '?' ? end : NULL;
    if (memchr(p, '@', (size_t)(end - p)))
        return "credentials in a URL are not supported";
    const char *colon;
    if (*p == '[') { /* [IPv6]:port */
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (!close)
            return "an unclosed '[' in the host";
        *host = p + 1;
        *host_len = (size_t)(close - p - 1);
        colon = close + 1 < end && close[1] == ':' ? close + 1 : NULL;
        if (!colon && close + 1 != end)
            return "a bad host";
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        *host = p;
        *host_len = (size_t)((colon ? colon : end) - p);
    }
    if (*host_len == 0)
        return "no host";
    *port = 80;
    if (colon) {
        int n = 0;
        const char *d = colon + 1;
        for (; d < end && *d >= '0' && *d <= '9' && n <= 65535; d++)
            n = 10 * n + (*d - '0');
        if (d != end || d == colon + 1 || n == 0 || n > 65535)
            return "a bad port";
        *port = n;
    }
    return NULL;
}

const char *net_url_problem(const char *url)
{
    const char *host, *target;
    size_t host_len;
    int port;
    return parse_url(url, &host, &host_len, &port, &target);
}

/* a's address as numbers into out ("" when it has none); an IPv4-mapped IPv6 address
 * (::ffff:127.0.0.1) as the IPv4 one, which is the listener a connection to it reaches. */
static void numeric_address(const struct addrinfo *a, char *out, size_t size)
{
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)(const void *)a->ai_addr;
    if (a->ai_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
        if (!inet_ntop(AF_INET, v6->sin6_addr.s6_addr + 12, out, (socklen_t)size))
            out[0] = '\0';
    } else if (getnameinfo(a->ai_addr, a->ai_addrlen, out, (socklen_t)size, NULL, 0,
                           NI_NUMERICHOST) != 0) {
        out[0] = '\0';
    }
}

void net_url_endpoint(const char *url, char *out, size_t size)
{
    const char *host, *target;
    size_t host_len;
    int port;
    if (parse_url(url, &host, &host_len, &port, &target)) {
        snprintf(out, size, "%s", url);
        return;
    }
    char name[256], addr[INET6_ADDRSTRLEN] = "", service[8];
    snprintf(name, sizeof name, "%.*s", (int)host_len, host);
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    hints.ai_flags = AI_NUMERICSERV;
    if (host_len < sizeof name && getaddrinfo(name, service, &hints, &res) == 0) {
        const struct addrinfo *pick = res; /* IPv4 first, as connections are made */
        for (const struct addrinfo *a = res; a; a = a->ai_next)
            if (a->ai_family == AF_INET) {
                pick = a;
                break;
            }
        numeric_address(pick, addr, sizeof addr);
        freeaddrinfo(res);
    }
    size_t path_len = target ? strcspn(target, "?#") : 0;
    while (path_len > 0 && target[path_len - 1] == '/') /* "/v1/" and "/v1" are one path */
        path_len--;
    snprintf(out, size, strchr(addr, ':') ? "[%s]:%d%.*s" : "%s:%d%.*s", addr[0] ? addr : name,
             port, (int)path_len, target ? target : "");
}

bool net_urls_twins(const char *const *urls, size_t n, size_t *a, size_t *b)
{
    if (n < 2)
        return false; /* nothing to look up */
    char **key = xcalloc(n, sizeof *key);
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) {
        size_t size = strlen(urls[i]) + 64; /* an address, a port and the URL's path at most */
        key[i] = xmalloc(size);
        net_url_endpoint(urls[i], key[i], size);
        for (size_t k = 0; k < i && !found; k++)
            if (strcmp(key[i], key[k]) == 0) {
                *a = k;
                *b = i;
                found = true;
            }
    }
    for (size_t i = 0; i < n; i++)
        free(key[i]);
    free(key);
    return found;
}

/* Appends n bytes of s at *at. */
static void put(char **at, const char *s, size_t n)
{
    memcpy(*at, s, n);
    *at += n;
}

/* Whether a header line has nothing after its colon ("Content-Type:": send none). */
static bool empty_value(const char *line)
{
    const char *colon = strchr(line, ':');
    if (!colon)
        return false;
    for (const char *p = colon + 1; *p; p++)
        if (*p != ' ' && *p != '\t')
            return false;
    return true;
}

/* The request line and header lines, ending in the blank line. */
static char *build_head(const char *method, const char *target, const char *host_label,
                        const char *const *headers, size_t n_headers, bool has_body,
                        size_t body_len)
{
    bool typed = false, length = has_body || strcmp(method, "POST") == 0 ||
                                 strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    size_t target_len = target ? strcspn(target, "#") : 0;
    size_t size = strlen(method) + target_len + strlen(host_label) + 128;
    for (size_t i = 0; i < n_headers; i++) {
        size += strlen(headers[i]) + 2;
        typed |= strncasecmp(headers[i], "Content-Type:", 13) == 0;
    }
    char *head = xmalloc(size), *at = head;
    put(&at, method, strlen(method));
    put(&at, " ", 1);
    if (!target || *target == '?') /* "http://host?q" asks for "/?q" */
        put(&at, "/", 1);
    if (target)
        put(&at, target, target_len);
    put(&at, " HTTP/1.1\r\nHost: ", 17);
    put(&at, host_label, strlen(host_label));
    put(&at, "\r\n", 2);
    for (size_t i = 0; i < n_headers; i++) {
        if (empty_value(headers[i]))
            continue;
        put(&at, headers[i], strlen(headers[i]));
        put(&at, "\r\n", 2);
    }
    if (has_body && !typed)
        put(&at, "Content-Type: application/json\r\n", 32);
    if (length) {
        char digits[24];
        int n = 0;
        do
            digits[n++] = (char)('0' + body_len % 10);
        while ((body_len /= 10) > 0);
        put(&at, "Content-Length: ", 16);
        while (n > 0)
            *at++ = digits[--n];
        put(&at, "\r\n", 2);
    }
    put(&at, "\r\n", 3); /* the blank line, and a NUL */
    return head;
}

/* The _within limit passed before the response was complete. */
static void on_limit(evutil_socket_t fd, short what, void *arg)
{
    struct net_transfer *t = arg;
    if (!t->failed)
        fail(t, "timed out after %ld ms", t->limit_ms);
}

/* net_client_send with a limit on the whole transfer, milliseconds (0: none). */
static struct net_transfer *send_within(struct net_client *c, const char *method, const char *url,
                                        const char *const *headers, size_t n_headers,
                                        const struct net_iov *body, size_t n_body,
                                        const struct net_stream_ops *ops, void *arg, long limit_ms)
{
    struct net_transfer *t = xcalloc(1, sizeof *t);
    t->client = c;
    t->ops = ops;
    t->arg = arg;
    list_push_front(&c->all, &t->all_link);
    if (limit_ms > 0) {
        t->limit_ms = limit_ms;
        t->timer = evtimer_new(c->base, on_limit, t);
        struct timeval tv = {limit_ms / 1000, (limit_ms % 1000) * 1000};
        evtimer_add(t->timer, &tv);
    }
    const char *host, *target;
    size_t host_len;
    int port;
    const char *why = parse_url(url, &host, &host_len, &port, &target);
    if (why) {
        fail(t, "bad URL '%s': %s", url, why);
        return t;
    }
    if (!(t->host = host_get(t, host, host_len, port)))
        return t;
    size_t total = 0;
    for (size_t i = 0; i < n_body; i++)
        total += body[i].len;
    t->head = build_head(method, target, t->host->label, headers, n_headers, n_body > 0, total);
    t->iov = xmallocarray(1 + n_body, sizeof *t->iov);
    t->iov[0] = (struct iovec){t->head, strlen(t->head)};
    t->n_iov = 1;
    for (size_t i = 0; i < n_body; i++)
        if (body[i].len > 0)
            t->iov[t->n_iov++] = (struct iovec){(void *)body[i].p, body[i].len};
    start(t, false);
    return t;
}

/* ---- the API -------------------------------------------------------------------------------- */

struct net_client *net_client_new(struct event_base *base)
{
    struct net_client *c = xcalloc(1, sizeof *c);
    c->base = base;
    c->later_ev = event_new(base, -1, 0, on_later, c);
    if (!c->later_ev) {
        free(c);
        return NULL;
    }
    return c;
}

void net_client_free(struct net_client *c)
{
    if (!c)
        return;
    while (c->all.front)
        transfer_drop(list_entry(c->all.front, struct net_transfer, all_link));
    while (c->hosts) {
        struct host *h = c->hosts;
        c->hosts = h->next;
        while (h->idle.front)
            conn_close(list_entry(h->idle.front, struct conn, idle_link));
        free(h->name);
        free(h->label);
        free(h);
    }
    event_free(c->later_ev);
    free(c);
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
    if (t->in_call) { /* inside its own head or data: torn down when that returns */
        t->cancelled = true;
        return;
    }
    transfer_drop(t);
}

void net_transfer_pause(struct net_transfer *t, bool paused)
{
    if (t->cancelled || t->paused == paused)
        return;
    t->paused = paused;
    if (!t->conn || t->failed)
        return;
    if (paused)
        conn_watch(t->conn);
    else
        later(t); /* what the buffer holds is delivered from the loop */
}

long long net_transfer_length(const struct net_transfer *t)
{
    if (t->failed || !t->conn || t->resp.state == NET_RS_HEAD)
        return -1;
    return t->resp.length;
}

/* ---- buffered requests ---------------------------------------------------------------------- */

/* One net_client_request: the body it copied and the response as it arrives, held up to max
 * bytes. */
struct buffered {
    net_response_fn fn; /* NULL once called */
    void *arg;
    char *body;
    int status;
    char *out;
    size_t out_n, out_cap;
    size_t max;              /* of the answer's body */
    bool keep_status;        /* an answer past max reports its status (_capped), else 0 */
    struct net_transfer *xf; /* for its host's name */
};

/* The answer passed b->max: fn hears it now, and the transfer ends (its connection closed). */
static bool buffered_over(struct buffered *b)
{
    char why[NET_ERROR_BYTES];
    snprintf(why, sizeof why, "%s answered more than %zu bytes", b->xf->host->label, b->max);
    net_response_fn fn = b->fn;
    b->fn = NULL; /* the release that follows frees b, nothing more */
    fn(b->arg, b->keep_status ? b->status : 0, "", 0, why);
    return false;
}

static bool buffered_head(void *arg, int status, const char *content_type)
{
    struct buffered *b = arg;
    b->status = status;
    long long announced = net_transfer_length(b->xf); /* a HEAD's announces no body */
    bool head = strncmp(b->xf->head, "HEAD ", 5) == 0;
    return !head && announced >= 0 && (unsigned long long)announced > b->max ? buffered_over(b)
                                                                             : true;
}

static bool buffered_data(void *arg, const char *data, size_t len)
{
    struct buffered *b = arg;
    if (len > b->max - b->out_n)
        return buffered_over(b);
    if (b->out_n + len + 1 > b->out_cap) {
        b->out_cap = 2 * (b->out_n + len + 1);
        if (b->out_cap > b->max + 1)
            b->out_cap = b->max + 1;
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

/* A buffered request: the body copied, the answer held up to max bytes, a limit of limit_s. */
static struct net_transfer *buffered_send(struct net_client *c, const char *method, const char *url,
                                          const char *header, const char *body, size_t len,
                                          double limit_s, struct buffered *b)
{
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
    t->release = buffered_free; /* when it is cancelled, or net_client_free cancels it */
    b->xf = t;                  /* head and data come from the loop, after this */
    return t;
}

struct net_transfer *net_client_request(struct net_client *c, const char *method, const char *url,
                                        const char *header, const char *body, size_t len,
                                        net_response_fn fn, void *arg)
{
    return net_client_request_within(c, method, url, header, body, len, 0, fn, arg);
}

struct net_transfer *net_client_request_within(struct net_client *c, const char *method,
                                               const char *url, const char *header,
                                               const char *body, size_t len, double limit_s,
                                               net_response_fn fn, void *arg)
{
    struct buffered *b = xcalloc(1, sizeof *b);
    *b = (struct buffered){.fn = fn, .arg = arg, .max = NET_ANSWER_MAX_BYTES};
    return buffered_send(c, method, url, header, body, len, limit_s, b);
}

struct net_transfer *net_client_request_capped(struct net_client *c, const char *method,
                                               const char *url, const char *header,
                                               const char *body, size_t len, size_t max_bytes,
                                               net_response_fn fn, void *arg)
{
    struct buffered *b = xcalloc(1, sizeof *b);
    *b = (struct buffered){.fn = fn, .arg = arg, .keep_status = true};
    b->max = max_bytes > 0 && max_bytes < NET_ANSWER_MAX_BYTES ? max_bytes : NET_ANSWER_MAX_BYTES;
    return buffered_send(c, method, url, header, body, len, 0, b);
}
