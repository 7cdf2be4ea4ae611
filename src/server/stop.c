/*
 * The graceful stop (gateway.h gw_stop): on SIGTERM a gateway in front of a training job
 * should not cut turns that are about to finish, nor take new ones it will not answer. The
 * listener closes, requests on open connections are answered 503 (a client sends them again,
 * to the gateway that replaces this one), and the calls being served get up to --grace-s to
 * finish; the state is committed by gw_free once the loop has stopped.
 */
#include <stdio.h>
#include <stdlib.h>

#include "server/internal.h"
#include "util/alloc.h"

#define STOP_POLL_S 0.02 /* how often the calls still served (and answers unsent) are counted */

struct gw_stop {
    struct gw *g;
    struct event *poll;
    double deadline_s;
    void (*done)(void *arg);
    void *arg;
};

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    struct gw_stop *s = arg;
    (void)fd;
    (void)what;
    size_t held = net_server_held(s->g->server);
    if (held && gw_now() < s->deadline_s)
        return;
    if (held)
        fprintf(stderr, "libra: serve: stopping: %zu calls still served after %g s are cut\n", held,
                s->g->opt.grace_s);
    event_del(s->poll);
    s->done(s->arg);
}

void gw_stop(struct gw *g, void (*done)(void *arg), void *arg)
{
    if (g->stop)
        return;
    if (!g->server) { /* not listening yet: nothing is served */
        done(arg);
        return;
    }
    struct gw_stop *s = xcalloc(1, sizeof *s);
    *s =
        (struct gw_stop){.g = g, .deadline_s = gw_now() + g->opt.grace_s, .done = done, .arg = arg};
    g->stop = s;
    net_server_drain(g->server);
    gw_pool_stop(g); /* long polls are answered now, not held for the grace */
    size_t held = net_server_held(g->server);
    if (held)
        fprintf(stderr, "libra: serve: stopping: waiting up to %g s for %zu calls\n",
                g->opt.grace_s, held);
    s->poll = event_new(g->base, -1, EV_PERSIST, on_poll, s);
    struct timeval tv = {0, (suseconds_t)(STOP_POLL_S * 1e6)};
    event_add(s->poll, &tv);
    event_active(s->poll, EV_TIMEOUT, 0);
}

void gw_stop_free(struct gw *g)
{
    if (!g->stop)
        return;
    event_free(g->stop->poll);
    free(g->stop);
    g->stop = NULL;
}
