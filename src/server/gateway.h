/*
 * `libra serve`: the C-MLFQ gateway in front of vLLM/SGLang engines (docs/serve.md).
 *
 * An RL framework points its rollout client at the gateway instead of an engine. Every turn of
 * every trajectory is routed with the same sched/ calls the simulator makes (one router built
 * from the experiment's sched section), then proxied byte for byte: the body as it arrived,
 * minus libra's request object, and the answer as it comes, SSE included. Control calls a
 * trainer makes on "the engine" (pause, weight updates, loads) go to every engine.
 *
 * The gateway's step is a change of the fleet's weight version: finished trajectories are learnt
 * then, in the order they finished, and the router's rebuild tick runs — the order a replay of
 * the capture (`libra route eval`) learns in.
 *
 * With --state-dir the gateway's state survives a restart: what it learnt from (a journal
 * replayed at start), the live trajectories, the engines and the mode (server/store.h).
 *
 * Threading: one event loop owns everything; nothing here is thread-safe. The state dir's one
 * worker thread commits what the loop hands it and posts back (server/store.h).
 */
#ifndef SERVER_GATEWAY_H
#define SERVER_GATEWAY_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

#include "net/http.h"
#include "sched/router.h"
#include "server/request.h"
#include "spec/config.h"

#define GW_ENGINES_MAX 256

/* An engine as the command line names it. */
struct gw_engine_spec {
    const char *url; /* http://host:port, no trailing slash */
    int tp;          /* tensor-parallel size; 0: ask the engine (SGLang /get_server_info) */
};

struct gw_options {
    const char *host; /* listen address (default 127.0.0.1) */
    int port;         /* 0: chosen by the OS */
    const struct gw_engine_spec *engines;
    size_t n_engines;
    const char *admin_token;      /* bearer token of the admin calls; NULL: they answer 401 */
    const char *capture_path;     /* finished trajectories appended here as a trace; NULL: none */
    const char *decisions_path;   /* one JSON line per decision; NULL: none */
    bool shadow;                  /* start in shadow mode (else route by sched.policy) */
    struct gw_parse_config parse; /* what names trajectories and prompts (request.h) */
    double idle_s;                /* a trajectory idle this long is learnt as censored */
    double poll_s;                /* engines' weight version and health polled this often */
    struct net_limits limits;
    struct sched_costs costs; /* what moving a trajectory costs (cost/move.h), as the
                                      simulator and route eval weigh it; zeroed: free */
    const char *state_dir;    /* durable state here (docs/serve.md "Durable state"); NULL: none */
    double grace_s;           /* gw_stop waits this long for the calls being served */
};

/* The defaults above: 127.0.0.1:0, C-MLFQ mode, 64 prompt tokens, 7200 s idle, 2 s polls, no
 * state dir, a 20 s grace. */
void gw_options_default(struct gw_options *o);

struct gw;

/* Called once when the gateway listens (rc 0) or failed to start: rc LIBRA_EINVAL (an engine
 * without a known TP, a TP no bucket serves, a bad layout) or LIBRA_EIO (an engine that cannot
 * be reached, the port, the output files), msg says why. */
typedef void (*gw_ready_fn)(void *arg, int rc, const char *msg);

/*
 * Starts a gateway on base for the experiment cfg (borrowed; must outlive it): opens the state
 * dir when one is given (its engines join the options' ones), asks every engine what it is
 * (TP, kind, weight version), restores the state, then listens and calls ready. base must be
 * made after evthread_use_pthreads() when there is a state dir (its worker posts to the loop).
 * Returns 0; LIBRA_EINVAL when the options are wrong or the state dir has another schema
 * version, LIBRA_EIO when the state dir cannot be used — with err, before anything is asked
 * (ready is then not called).
 */
int gw_new(struct gw **out, struct event_base *base, const struct libra_config *cfg,
           const struct gw_options *o, gw_ready_fn ready, void *arg, char *err, size_t err_size);

/* A JSON line describing the gateway (url, port, engines), malloc'd (after ready). */
char *gw_ready_line(const struct gw *g);

/*
 * The graceful stop: stops taking connections (requests on open ones answer 503), lets the
 * calls being served finish for up to grace_s, then calls done(arg) on the loop; gw_free then
 * cancels what is still held (their turns end as a failed turn does: the client sends them
 * again) and commits the state. A second call does nothing.
 */
void gw_stop(struct gw *g, void (*done)(void *arg), void *arg);

/* Cancels the calls still held, commits the state and closes it, writes the capture out and
 * frees everything; g may be NULL. Returns 0, or -1 when the capture could not be written or
 * the last commit failed (err says why). */
int gw_free(struct gw *g, char *err, size_t err_size);

#endif
