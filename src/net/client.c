/*
 * libcurl multi on libevent (net/client.h): curl tells us which sockets to watch and when its
 * timer should fire; we tell it when a socket is ready or the timer fired, then collect the
 * finished transfers.
 */
#include "net/client.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

struct transfer;
struct watch;

struct net_client {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    struct transfer *transfers; /* in flight (curl 7.88 cannot list its handles) */
    struct watch *watches;      /* sockets watched */
};

/* One transfer. */
struct transfer {
    struct net_client *client;
    struct transfer *prev, *next;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char *out;
    size_t out_n, out_cap;
    net_response_fn fn;
    void *arg;
    char error[CURL_ERROR_SIZE];
};

/* A socket curl asked us to watch. */
struct watch {
    struct event *ev;
    curl_socket_t s;
    struct watch *prev, *next;
};

/* Intrusive list helpers for the two lists above. */
#define LIST_LINK(head, x)                                                                         \
    do {                                                                                           \
        (x)->prev = NULL;                                                                          \
        (x)->next = (head);                                                                        \
        if (head)                                                                                  \
            (head)->prev = (x);                                                                    \
        (head) = (x);                                                                              \
    } while (0)
#define LIST_UNLINK(head, x)                                                                       \
    do {                                                                                           \
        if ((x)->prev)                                                                             \
            (x)->prev->next = (x)->next;                                                           \
        else                                                                                       \
            (head) = (x)->next;                                                                    \
        if ((x)->next)                                                                             \
            (x)->next->prev = (x)->prev;                                                           \
    } while (0)

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    struct transfer *t = arg;
    size_t len = size * n;
    if (t->out_n + len + 1 > t->out_cap) {
        t->out_cap = 2 * (t->out_n + len + 1);
        t->out = xrealloc(t->out, t->out_cap);
    }
    memcpy(t->out + t->out_n, data, len);
    t->out_n += len;
    return len;
}

static void transfer_free(struct transfer *t)
{
    LIST_UNLINK(t->client->transfers, t);
    curl_slist_free_all(t->headers);
    curl_easy_cleanup(t->easy);
    free(t->body);
    free(t->out);
    free(t);
}

/* Reports every finished transfer. */
static void collect(struct net_client *c)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(c->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct transfer *t;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        long status = 0;
        CURLcode rc = msg->data.result;
        if (rc == CURLE_OK)
            curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
        curl_multi_remove_handle(c->multi, t->easy);
        if (!t->out)
            t->out = xstrdup("");
        t->out[t->out_n] = '\0';
        const char *why = rc == CURLE_OK ? NULL : (t->error[0] ? t->error : curl_easy_strerror(rc));
        t->fn(t->arg, rc == CURLE_OK ? (int)status : 0, t->out, t->out_n, why);
        transfer_free(t);
    }
}

static void on_socket_ready(evutil_socket_t fd, short what, void *arg)
{
    struct net_client *c = arg;
    int mask = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
    int running;
    curl_multi_socket_action(c->multi, fd, mask, &running);
    collect(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_client *c = arg;
    int running;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    collect(c);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what curl wants, or stop watching it. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *arg, void *socketp)
{
    struct net_client *c = arg;
    struct watch *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (w) {
            LIST_UNLINK(c->watches, w);
            event_free(w->ev);
            free(w);
        }
        curl_multi_assign(c->multi, s, NULL);
        return 0;
    }
    short events = (short)((what & CURL_POLL_IN ? EV_READ : 0) |
                           (what & CURL_POLL_OUT ? EV_WRITE : 0) | EV_PERSIST);
    if (!w) {
        w = xcalloc(1, sizeof *w);
        w->s = s;
        LIST_LINK(c->watches, w);
        curl_multi_assign(c->multi, s, w);
    } else {
        event_free(w->ev);
    }
    w->ev = event_new(c->base, s, events, on_socket_ready, c);
    event_add(w->ev, NULL);
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
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer_change);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, c);
    return c;
}

void net_client_request(struct net_client *c, const char *method, const char *url,
                        const char *header, const char *body, size_t len, net_response_fn fn,
                        void *arg)
{
    struct transfer *t = xcalloc(1, sizeof *t);
    t->client = c;
    t->fn = fn;
    t->arg = arg;
    t->easy = curl_easy_init();
    CURL *e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    t->headers = curl_slist_append(t->headers, "Expect:"); /* no 100-continue round trip */
    if (header && *header)
        t->headers = curl_slist_append(t->headers, header);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    if (body) {
        t->body = xmalloc(len + 1);
        memcpy(t->body, body, len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    LIST_LINK(c->transfers, t);
    curl_multi_add_handle(c->multi, e); /* arms the timer: curl starts it from the loop */
}

void net_client_free(struct net_client *c)
{
    if (!c)
        return;
    while (c->transfers) {
        struct transfer *t = c->transfers;
        curl_multi_remove_handle(c->multi, t->easy);
        transfer_free(t);
    }
    /* Unassigned before the cleanup, which may still report their sockets. */
    struct watch *next;
    for (struct watch *w = c->watches; w; w = next) {
        next = w->next;
        curl_multi_assign(c->multi, w->s, NULL);
        event_free(w->ev);
        free(w);
    }
    c->watches = NULL;
    curl_multi_cleanup(c->multi);
    event_free(c->timer);
    free(c);
}
