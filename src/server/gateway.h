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
 * replayed at start), the live trajectories, the engines, the layout and the mode
 * (server/store.h).
 *
 * Threading: one event loop owns everything; nothing here is thread-safe. The state dir's one
 * worker thread commits what the loop hands it, and the planner's solves run on a thread of
 * their own; both post back to the loop.
 */
#ifndef SERVER_GATEWAY_H
#define SERVER_GATEWAY_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>

#include "net/http.h"
#include "plan/export.h"
#include "plan/fleet.h"
#include "sched/router.h"
#include "server/admin.h"
#include "server/request.h"
#include "spec/config.h"
#include "spec/preset.h"

#define GW_ENGINES_MAX PLAN_EXPORT_GATEWAY_ENGINES /* an exported plan's gateway takes them all */

struct gw_options {
    const char *host; /* listen address (default 127.0.0.1); another than a loopback address
                         needs admin_token */
    int port;         /* 0: chosen by the OS */
    const struct gw_worker_spec *engines; /* registered at start, listed in this order */
    size_t n_engines;
    const char *admin_token;      /* bearer token of the admin calls; NULL: they answer 401 */
    const char *capture_path;     /* finished trajectories appended here as a trace; NULL: none */
    const char *decisions_path;   /* one JSON line per decision; NULL: none */
    bool shadow;                  /* start in shadow mode (else route by sched.policy) */
    struct gw_parse_config parse; /* what names trajectories and prompts (request.h) */
    double idle_s;                /* a trajectory idle this long is learnt as censored */
    double poll_s;                /* engines' health checked, versions polled this often */
    struct net_limits limits;
    int64_t max_answer_bytes;       /* an engine's answer held whole (not streamed) at most:
                                       502 above (1 GiB) */
    struct sched_costs costs;       /* what moving a trajectory costs (cost/move.h), as the
                                            simulator and route eval weigh it; zeroed: free */
    const struct spec_hardware *hw; /* the experiment's hardware and model presets, which
                                       GET /libra/v1/plan plans for; borrowed, required */
    const struct spec_model *model;
    const struct plan_fleet *plan; /* --plan: its bucket layout is the gateway's (over
                                      sched.buckets) and re-bucketing may start from it;
                                      borrowed; NULL: none */
    const char *state_dir; /* durable state here (docs/serve.md "Durable state"); NULL: none */
    double grace_s;        /* gw_stop waits this long for the calls being served */
    /* the elastic pool's hybrid replicas (--pool-replica), replica h's engine at pool[h].url
     * (also one of engines); n_pool 0: no pool (docs/serve.md "The elastic pool") */
    const struct gw_worker_spec *pool;
    size_t n_pool;
    double pool_timeout_s;  /* a lend or reclaim not confirmed this long is cancelled (180) */
    bool pool_steer;        /* the gateway lends and reclaims by the pool's signal itself */
    int pool_core_replicas; /* the trainer's DP replicas that are never lent (1) */
};

/* The defaults above: 127.0.0.1:0, C-MLFQ mode, 64 prompt tokens, 7200 s idle, 2 s polls, no
 * state dir, a 20 s grace, no pool (a 180 s timeout, not steered, one core replica). */
void gw_options_default(struct gw_options *o);

struct gw;

/* Called once when the gateway listens (rc 0) or failed to start: rc LIBRA_EINVAL (an engine
 * without a known TP, a TP no bucket serves — of --plan's layout, else sched.buckets, else the
 * reference layout) or LIBRA_EIO (an engine that cannot be reached or lacks a call the gateway
 * relies on, the port, the output files), msg says why. */
typedef void (*gw_ready_fn)(void *arg, int rc, const char *msg);

/*
 * Starts a gateway on base for the experiment cfg (borrowed; must outlive it): opens the state
 * dir when one is given (its engines, with their ids, join the options' ones), registers every
 * engine (asks it its kind, TP and weight version), restores the state, then listens and calls
 * ready. Returns 0, or a LIBRA_E* code with err when it cannot start (ready is then not
 * called): LIBRA_EINVAL for options that are wrong before anything is asked (no engine in the
 * options or the state dir, an engine given twice, a bad bucket layout, no hardware or model
 * preset, an address other than loopback without an admin token) and a state dir of another
 * schema version or with a bad row; LIBRA_EIO for a state dir that cannot be used (in use by
 * another gateway, not a directory, not writable). The planner and
 * the state dir's worker post back to base: the caller calls evthread_use_pthreads() before it
 * makes base.
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
