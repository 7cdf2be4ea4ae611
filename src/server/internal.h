/*
 * Internals of the gateway shared by its files: gateway.c (set-up, versions, routes, tick),
 * engines.c (the registry of engines: registration, states, health, listing), workers.c (the
 * worker-management and engine routes), proxy.c (a generation request from arrival to answer,
 * held while the fleet is paused), traj.c (trajectories, their events, learning at the step,
 * the capture), control.c (fan-out of control calls, admin, metrics), planning.c (plans and
 * buckets), persist.c and restore.c (the durable state of --state-dir) and stop.c (the graceful
 * stop). Not an API: use server/gateway.h.
 */
#ifndef SERVER_INTERNAL_H
#define SERVER_INTERNAL_H

#include <jansson.h>
#include <stdio.h>

#include "net/client.h"
#include "sched/eval.h"
#include "sched/router.h"
#include "server/admin.h"
#include "server/gateway.h"
#include "server/outfile.h"
#include "server/pool_rec.h"
#include "server/record.h"
#include "server/request.h"
#include "server/store.h"
#include "util/list.h"
#include "util/map.h"
#include "util/vec.h"

#define GW_VERSION_MAX 64        /* bytes of a weight version's key (gw_version_key) */
#define GW_VERSION_TEXT_MAX 4096 /* bytes of a version an answer's scan reads */
#define GW_LATENCY_BUCKETS 12    /* upstream latency histogram buckets */

#define GW_CHECK_LIMIT_S 5    /* a health check or registration call unanswered this long fails */
#define GW_SUSPECT_CHECKS 2   /* consecutive failed health checks that make an engine suspect */
#define GW_DEAD_CHECKS 5      /* ... that make it dead */
#define GW_UPDATE_GRACE_S 180 /* a paused or loading engine is not dead for this long */

enum gw_engine_kind { GW_KIND_SGLANG, GW_KIND_VLLM };

/* An engine's state as listed: the first of these that holds (docs/serve.md "Engine states"). */
enum gw_engine_state {
    GW_ENGINE_DEAD,     /* failed GW_DEAD_CHECKS health checks in a row: gets nothing */
    GW_ENGINE_DRAINING, /* to be removed once idle: no new turn */
    GW_ENGINE_LENT,     /* lent to the elastic pool by the admin: no new turn */
    GW_ENGINE_SUSPECT,  /* failing health checks or a transfer: new turns only when no other
                           engine is ready */
    GW_ENGINE_LOADING,  /* a weight update is in flight to it (it holds turns meanwhile) */
    GW_ENGINE_PAUSED,   /* paused (a pause that passed, or its own /is_paused) */
    GW_ENGINE_ACTIVE,
};

/* One engine behind the gateway. Allocated on its own and counted: removing it from the
 * listing leaves it valid for the calls still pointing at it; the last of them frees it. */
struct gw_engine {
    struct gw *g;
    struct list_node link; /* in gw.all (every engine allocated) */
    int refs;              /* the listing, and every call in flight that points at it */
    bool listed;           /* in gw.engines; false once removed */
    int64_t id;            /* the router's instance id; never reused; -1 until listed */
    char url[GW_URL_MAX];
    char endpoint[GW_URL_MAX + 64]; /* the url's key, shared by its other spellings */
    enum gw_engine_kind kind;
    char software[64]; /* the engine's own version ("0.5.4", "libra-emu 0.9.0") */
    char model[128];   /* the model it serves, "" when it does not say */
    int tp;
    int bucket;                    /* in the router's layout */
    char version[GW_VERSION_MAX];  /* weight version as the engine names it */
    char reported[GW_VERSION_MAX]; /* under a version the gateway numbered, the one the engine
                                      reported before it, which does not undo it; else "" */
    int64_t generation;            /* the gateway step its weights belong to */
    bool dead, draining, lent, paused;
    int loading;        /* weight updates in flight to it */
    int fails;          /* consecutive failed health checks */
    bool cut;           /* a transfer to it failed (or, listed from the state dir, it did not
                           answer at start): suspect until a health check passes */
    double held_s;      /* gw_now() when it was paused or began loading (the grace's start) */
    bool polls_pause;   /* vLLM: it answered /is_paused at registration, so it is polled */
    bool missed_update; /* a pool replica's engine left out of a disk weight update while its
                           GPUs were the trainer's: it loads the last one when it wakes */
    bool checking;      /* its health check (and poll) is in flight */
    bool unverified;    /* listed from its state-dir row, not asked yet (gateway.c) */
    int in_flight;      /* turns being proxied to it */
    double busy_s;      /* seconds it had a turn in flight, up to busy_from_s while it has one */
    double busy_from_s; /* gw_now() when in_flight last rose from 0 */
    double busy_mark_s; /* gw_engine_busy_s at the pool's last step end (pool.c) */
    struct list turns;  /* their proxies, while a transfer to it runs (proxy.c) */
    uint64_t requests, errors;
    uint64_t latency[GW_LATENCY_BUCKETS + 1]; /* upstream seconds, cumulative buckets + count */
    double latency_sum_s;
};

/* A live trajectory. */
struct gw_traj {
    uint64_t rid;       /* the router's id: a sequence number */
    char id[GW_ID_MAX]; /* the identity it is known by */
    uint64_t prompt;
    int64_t generation;         /* its next turn goes to engines of this step or later */
    int64_t last_prompt_tokens; /* of its last turn */
    int64_t last_generated;     /* tokens its last turn generated */
    int64_t instance;           /* engine id of its last turn, -1 none */
    int64_t version_start;      /* the gateway step of its first turn */
    int64_t start_tokens;       /* the context of its first request */
    size_t announced; /* of the returns its last routed turn took (turns.v[n - 1].calls while that
                         turn is in flight or failed), how many the events call had announced */
    bool in_flight;
    bool failed; /* its last turn got no answer: the next request sends that turn again */
    struct sched_decision other; /* the other mode's decision on its last routed turn: logged
                                    again beside the turn's move (gw_turn_moved) */
    double last_active_s;
    VEC(struct trace_turn) turns;        /* what the capture records */
    VEC(struct sched_obs) obs;           /* every return, in order */
    VEC(size_t) returns_at;              /* obs index where each turn's returns start */
    VEC(struct trace_tool_call) pending; /* returns announced by the events call */
};

struct gw {
    struct event_base *base;
    const struct libra_config *cfg;
    struct gw_options opt;
    gw_ready_fn ready;
    void *ready_arg;
    struct net_server *server;
    struct net_client *client;
    struct event *tick;        /* polls engines, ends idle trajectories */
    int asking;                /* start-up registrations still in flight */
    struct gw_start *starting; /* the start-up registrations: the state dir's engines in id
                                  order, then the other --engine flags in flag order */
    size_t n_starting;
    char start_error[512]; /* why the start failed; "" while it has not */
    int start_rc;          /* ... LIBRA_EINVAL or LIBRA_EIO */

    VEC(struct gw_engine *) engines; /* listed, in the order added (ids ascending) */
    struct list all;                 /* every engine allocated, listed or not */
    struct list probes;              /* registrations in flight (engines.c) */
    int64_t next_engine_id;
    struct spec_bucket_layout layout;
    struct sched_obs_config obs_config;
    struct sched_router *router; /* sched.policy's */
    struct sched_router *sticky; /* load_balance: shadow mode's */
    bool shadow;

    struct map trajs; /* identity -> struct gw_traj * */
    struct list fans; /* control calls waiting for the engines' answers (control.c) */
    struct list held; /* generation requests held while the fleet is paused, newest first */
    size_t n_held;
    bool holding; /* a pause passed through: new turns wait for the continue */
    uint64_t next_rid;
    int64_t step;                     /* fleet weight-version changes seen */
    VEC(char *) versions;             /* every version string seen, in order */
    VEC(int64_t) version_steps;       /* the step each began */
    struct sched_eval_trace finished; /* ended this step: learnt at its end, in this order */
    double learnt;                    /* trajectories learnt at earlier steps */
    int64_t learn_steps;              /* steps learnt (the router's ticks), replayed ones too */
    double first_step_s;              /* gw_now() at the first step change seen; < 0 before */
    int64_t first_step;               /* the step then */

    struct gw_planning *planning; /* the window, the planner's job, the last plan (planning.c) */

    struct gw_outfile capture;      /* --capture (fd -1 without) */
    struct trace_text capture_line; /* the record being written, reused */
    struct gw_outfile decisions;    /* --decisions (fd -1 without) */

    /* counters for /metrics */
    uint64_t requests[4]; /* by enum gw_api */
    uint64_t single_turn; /* requests without an identity */
    uint64_t parallel;    /* turns sent while their trajectory had one in flight: not recorded */
    uint64_t decisions_by_bucket[SPEC_BUCKETS_MAX], moves_by_bucket[SPEC_BUCKETS_MAX];
    /* failed requests the gateway answers itself, by cause (docs/serve.md "Outputs"); each
     * counts one error answer but client_gone, which gets none: the HTTP layer's count of its
     * handlers' error answers less these is cause "other" (gw_metrics) */
    uint64_t errors_bad_request; /* a malformed generation, events or buckets body (400), or a
                                    finish while the trajectory's turn is in flight (409) */
    uint64_t errors_upstream;    /* a turn's engine gave no whole answer: 502, or a stream cut */
    uint64_t errors_no_engine;   /* no engine takes turns (or none new enough): 503 */
    uint64_t errors_no_route;    /* a path under /libra/v1/engines/ that is no route (404), or
                                    an action by another method than POST (405): refused, as
                                    the HTTP layer counts its own 404s and 405s */
    uint64_t errors_client_gone; /* the client left while its turn ran or was held */
    uint64_t trajectories_finished;
    uint64_t resumed;        /* turns sent again after an engine failed */
    uint64_t resumed_aborts; /* turns continued after an abort (abort-and-resume) */
    uint64_t updates;        /* weight updates passed through without a version of their own */

    /* the last weight update from disk that an engine took, replayed to a pool replica's engine
     * that missed it (pool.c; its missed list unused: the engines' missed_update say) */
    struct gw_update_rec update;

    struct gw_persist *persist; /* the durable state (--state-dir); NULL without */
    struct gw_pool *pool;       /* the elastic pool (--pool-replica, pool.c); NULL without */
    struct gw_stop *stop;       /* the graceful stop under way (stop.c, gw_stop); NULL before */
};

/* The durable state of a gateway with --state-dir (persist.c, restore.c). */
struct gw_persist {
    struct gw_store *st;
    struct map dirty;            /* ids of live trajectories changed since the last collect */
    bool engines_dirty;          /* the registry changed since the last collect */
    bool update_dirty;           /* the update kept, or who missed it, changed since then */
    struct gw_update_rec update; /* the state's, until its engines are restored */
    size_t versions_saved;       /* g->versions[0, versions_saved) are in the database */
    size_t versions_loaded;      /* ... of which were read at start-up */
    bool has_layout;             /* the state holds a bucket layout: it is the gateway's */
    VEC(struct gw_engine *)
    engines; /* the state's engines (gw_engine_stored), id order, until
                the start-up registrations take them */
    struct spec_bucket_layout layout;
    int64_t replayed_trajs; /* learnt trajectories replayed from the journal at start-up */
    int64_t replayed_steps; /* steps replayed */
    int64_t restored_live;  /* live trajectories restored */
    double replay_ms;       /* how long the restore took, milliseconds */
};

/* ---- gateway.c ---------------------------------------------------------------------------- */

/* Monotonic seconds. */
double gw_now(void);

/* Writes to out the key a weight version of len bytes is known by: the version itself when it
 * fits, else its first bytes and a hash of the whole (a version persists, and restarts read,
 * at most GW_VERSION_MAX - 1 bytes). */
void gw_version_key(char out[GW_VERSION_MAX], const char *v, size_t len);

/* An engine reported weight version text (from a response, a poll or an update that passed
 * through; any length: it is keyed by gw_version_key): a version new to the fleet is the next
 * step (learns, ticks). Text equal to e->reported is not a change: it is what the engine said
 * before the update the gateway numbered. */
void gw_engine_version(struct gw *g, struct gw_engine *e, const char *text);

/* Engine e took an update the gateway numbered (number). An update that names no version leaves
 * the engine's own as it was (SGLang keeps its weight_version; vLLM has none), so the polls and
 * answers that follow still name that one: the number stands until the engine reports another
 * (docs/serve.md "Steps and learning"). */
void gw_engine_numbered(struct gw *g, struct gw_engine *e, const char *number);

/* ---- engines.c ---------------------------------------------------------------------------- */

/* What the router sees for one decision: the engines it may place a turn on. */
struct gw_registry {
    struct sched_registry reg;
    struct sched_instance inst[GW_ENGINES_MAX];
    struct gw_engine *engine[GW_ENGINES_MAX]; /* reg.inst[i]'s engine */
};

/*
 * Fills r for traj t (NULL: a single turn): every listed engine that is not dead, draining or
 * lent and whose weights are not older than those t's last turn ran on (a trajectory's weights
 * never go back, so the router must not see older engines even as a last resort); ready are
 * those not suspect (the router places on the others only when no engine is ready). A paused
 * or loading engine is ready: it holds the turn until it carries on, as it would without the
 * gateway.
 */
void gw_registry(const struct gw *g, const struct gw_traj *t, struct gw_registry *r);

/* Takes a reference to e (a call that will point at it); returns e. */
struct gw_engine *gw_engine_ref(struct gw_engine *e);

/* Drops a reference; the last one (of a removed engine) frees it. e may be NULL. */
void gw_engine_unref(struct gw_engine *e);

/* The listed engine of id, or of url — the url as registered, else any spelling of it
 * (net_url_endpoint, which resolves the url's host then); NULL when none is. */
struct gw_engine *gw_engine_by_id(const struct gw *g, int64_t id);
struct gw_engine *gw_engine_by_url(const struct gw *g, const char *url);

/*
 * Whether url reaches a gateway that listens on host:port (port 0: not bound yet, so nothing
 * does): its endpoint (net_url_endpoint, the key that finds one engine under two spellings) is
 * host:port's, or, when host is a wildcard (0.0.0.0, ::), any address of this machine at port.
 * Such an engine would send every call back into the gateway. Blocks for the name lookups.
 */
bool gw_url_is_gateway(const char *url, const char *host, int port);

/* "HOST:PORT" into out (size bytes), an IPv6 address in brackets: where the gateway listens. */
void gw_listen_text(const char *host, int port, char *out, size_t size);

/* e's state as listed (the first of enum gw_engine_state that holds), and its name ("dead",
 * "draining", ...; static storage). */
enum gw_engine_state gw_engine_state(const struct gw_engine *e);
const char *gw_engine_state_name(enum gw_engine_state s);

/* Whether e takes new turns at all (listed and not dead, draining or lent). */
bool gw_engine_routable(const struct gw_engine *e);

/* Whether e is suspect: GW_SUSPECT_CHECKS failed health checks in a row, or e->cut. */
bool gw_engine_suspect(const struct gw_engine *e);

/* The least loaded routable engine other than except (NULL: any) whose weights are of step
 * `step` or later, those not suspect first; NULL when there is none. Where a turn goes when
 * its own engine failed it (step: its trajectory's, whose weights never go back). */
struct gw_engine *gw_engine_pick(const struct gw *g, int64_t step, const struct gw_engine *except);

/* A transfer to e failed (why: the transfer's error): it is suspect until a health check
 * passes, and standard error says so when it was not already. */
void gw_engine_failed(struct gw_engine *e, const char *why);

/* e is paused (true) or carries on (false): a pause or continue it accepted. */
void gw_engine_pause(struct gw_engine *e, bool paused);

/* A weight update to e starts (+1) or ends (-1). */
void gw_engine_loading(struct gw_engine *e, int delta);

/* Asks SGLang engine e its weight version now (after an update it took). */
void gw_engine_ask_version(struct gw_engine *e);

/* A turn on e ended: a draining engine left idle is removed. */
void gw_engine_turn_done(struct gw_engine *e);

/* A turn is being proxied to e (counted in in_flight and requests until gw_engine_turn_done). */
void gw_engine_turn_start(struct gw_engine *e);

/* Seconds e has had a turn in flight, up to now_s (gw_now()). */
double gw_engine_busy_s(const struct gw_engine *e, double now_s);

/*
 * Removes e from the listing: at once when it is idle (or dead), else once its turns in flight
 * end (it drains meanwhile). Returns true when it is gone now.
 */
bool gw_engine_remove(struct gw_engine *e);

/* Called once an engine registered (e, status 0) or failed to (e NULL, status the HTTP status
 * to answer, 400, 409 or 502, msg why), or when the gateway stops first (e NULL, status 0:
 * nothing to answer; the caller frees what arg holds). */
typedef void (*gw_registered_fn)(void *arg, struct gw_engine *e, int status, const char *msg);

/*
 * Registers the engine spec names: asks it what it is (SGLang /get_server_info, else vLLM
 * /version), that it answers the calls the gateway relies on (/health; SGLang
 * /get_weight_version), its TP and a bucket that serves it; then lists it (list true: at the
 * end, with the next id) or leaves it for the caller to gw_engine_list (start-up, in flag
 * order). done is called once, never from inside this call.
 */
void gw_engine_register(struct gw *g, const struct gw_worker_spec *spec, bool list,
                        gw_registered_fn done, void *arg);

/* Lists e, registered and not listed, at the end of the listing: under its id when it has
 * one (an engine of the state dir), else the next. */
void gw_engine_list(struct gw *g, struct gw_engine *e);

/* An engine as the state dir lists it, for when it does not answer at start: allocated under
 * id and url, not listed, its other fields the caller's (the stored row's). */
struct gw_engine *gw_engine_stored(struct gw *g, int64_t id, const char *url);

/* The bucket of layout l that serves TP size tp; -1 when none does. */
int gw_bucket_of(const struct spec_bucket_layout *l, int tp);

/* The bucket of layout l each listed engine serves, into bucket[0, engines.n) in listing
 * order: the first that lists its TP size. Returns 0, or -1 with err naming the first engine
 * whose TP size no bucket of l serves (and l). */
int gw_engine_buckets(const struct gw *g, const struct spec_bucket_layout *l, int *bucket,
                      char *err, size_t err_size);

/* Health checks and polls of every listed engine (the tick). */
void gw_engines_tick(struct gw *g);

/*
 * The ranks engine e takes in a trainer's weight-update group: its TP size (SGLang's model
 * runner joins at rank_offset + tp_rank), 0 once it is dead (no control call reaches it, so it
 * cannot join).
 */
int gw_engine_ranks(const struct gw_engine *e);

/* The rank offset of listed engine e: the ranks of the engines listed before it. */
int64_t gw_engine_rank_offset(const struct gw *g, const struct gw_engine *e);

/* An engine as /libra/v1/engines lists it, rank_offset given; and the whole listing, with the
 * group's world_size (1 + every engine's ranks: rank 0 is the trainer). */
json_t *gw_engine_json(const struct gw_engine *e, int64_t rank_offset);
json_t *gw_engines_json(const struct gw *g);
/* The listing's engines alone (its "engines" array): /libra/v1/status's and /state's. */
json_t *gw_engines_list(const struct gw *g);

/* Frees every engine, and every registration after telling its caller (at shutdown, once no
 * answer can come). */
void gw_engines_free_all(struct gw *g);

/* ---- workers.c ---------------------------------------------------------------------------- */

/* SGLang model gateway's worker routes, and libra's engine routes (docs/serve.md). */
void gw_add_worker(void *ctx, struct net_call *c);
void gw_remove_worker(void *ctx, struct net_call *c);
void gw_list_workers(void *ctx, struct net_call *c);
void gw_workers(void *ctx, struct net_call *c);
void gw_worker(void *ctx, struct net_call *c);
void gw_engines(void *ctx, struct net_call *c);
void gw_engine_action(void *ctx, struct net_call *c);

/* ---- proxy.c ------------------------------------------------------------------------------ */

/* Handlers of the generation routes (ctx is the gateway). */
void gw_generate_sglang(void *ctx, struct net_call *c);
void gw_generate_vllm(void *ctx, struct net_call *c);
void gw_completions(void *ctx, struct net_call *c);
void gw_chat(void *ctx, struct net_call *c);

/* e was declared dead: its turns in flight are cut and go to another engine as a turn whose
 * engine failed does (or are answered 502 when they cannot), instead of waiting for
 * --request-cap-s on an engine that no longer answers. */
void gw_engine_turns_fail(struct gw_engine *e);

/* A control call that changes e (a pause, a weight update, ...) goes to it: its turns in flight
 * are not timed, since their time is not the engine's generation alone. */
void gw_engine_turns_disturbed(struct gw_engine *e);

/* A pause is on its way to the engines: generation requests wait from now on. */
void gw_hold(struct gw *g);

/* The fleet carries on: the requests held go, in the order they arrived. */
void gw_release(struct gw *g);

/* ---- traj.c ------------------------------------------------------------------------------- */

/* The step of the engines r's turn may go to: that of the engine its trajectory's last turn
 * ran on (a trajectory's weights never go back), 0 for a new trajectory. */
int64_t gw_route_step(struct gw *g, const struct gw_request *r);

/*
 * Routes one turn of the request r: starts its trajectory or continues it after its returns.
 * The caller has checked that an engine of gw_route_step(r) or later takes turns (gw_engine_pick:
 * nothing of r is read otherwise). Returns the engine, or NULL when none takes turns. *traj is the
 * trajectory (for a request without identity, a single-turn one that gw_turn_end ends); *applied
 * the decision carried out.
 */
struct gw_engine *gw_route_turn(struct gw *g, const struct gw_request *r, struct gw_traj **traj,
                                struct sched_decision *applied);

/* The turn of t (NULL: a single turn) on engine e (NULL: none) ended: generated tokens (-1:
 * failed), and how it was served (timing->tp 0: not timed). */
void gw_turn_end(struct gw *g, struct gw_traj *t, const struct gw_request *r,
                 const struct gw_engine *e, int64_t generated, int64_t cached,
                 const struct trace_turn_timing *timing);

/* The turn of t (NULL: one beside its trajectory's running turn), decided d, moves to engine e
 * (its own failed it, or takes turns no more): d names e, and the move is logged ("again") and
 * counted as a decision, so that --decisions names the engine that served the turn. */
void gw_turn_moved(struct gw *g, struct gw_traj *t, struct sched_decision *d,
                   const struct gw_engine *e);

/* Whether events ev end with a finish (request.c refuses events after one). */
bool gw_events_finish(const struct gw_event *ev, size_t n);

/* Whether r finishes a trajectory whose turn is in flight: the proxy holds it until the turn
 * ends, so r is refused (409) rather than routed. */
bool gw_route_busy(struct gw *g, const struct gw_request *r);

/* Applies events from the events call to the trajectory named id. Returns 0, -1 when no live
 * trajectory has that name, or -2 (nothing applied) when they finish it while a turn of it is
 * in flight. */
int gw_traj_events(struct gw *g, const char *id, const struct gw_event *ev, size_t n);

/* Ends trajectories idle past idle_s (censored). */
void gw_traj_expire(struct gw *g, double now_s);

/* Learns the finished trajectories and ticks the router: the gateway's step ended. */
void gw_learn_step(struct gw *g);

/* Learns the trajectories of finished in order (the first as learnt after *learnt others),
 * empties it and ticks r: the end of a step, in the live gateway and in the journal's replay. */
void gw_learn_finished(struct sched_router *r, struct sched_eval_trace *finished, double *learnt);

/* Frees what t holds (not t). */
void gw_traj_clear(struct gw_traj *t);

/* Frees every trajectory at shutdown: each is captured as aborted, unless the state dir keeps
 * them live for the next start. */
void gw_traj_free_all(struct gw *g);

/* ---- planning.c --------------------------------------------------------------------------- */

struct gw_planning;

/* The window, the planner's job and the last plan of g (after g's options and base are set);
 * freed with gw_planning_free (NULL: a no-op), which stops and joins a solve still running. */
struct gw_planning *gw_planning_new(struct gw *g);
void gw_planning_free(struct gw_planning *p);

/* A trajectory ended with these turns (n_turns >= 1); filtered: its finish said dynamic
 * sampling dropped it. Kept in the window the planner reads. */
void gw_window_add(struct gw *g, const struct trace_turn *turns, size_t n_turns, bool filtered);

/* GET /libra/v1/plan and POST /libra/v1/buckets (ctx is the gateway). */
void gw_plan_call(void *ctx, struct net_call *c);
void gw_buckets_call(void *ctx, struct net_call *c);

/* The layout of --plan, without its instance counts, into *out; false without --plan. */
bool gw_plan_layout(const struct gw *g, struct spec_bucket_layout *out);

/* Warns on stderr when the engines are not --plan's instances (TP size by TP size). */
void gw_plan_check_fleet(struct gw *g);

/* ---- resume.c ----------------------------------------------------------------------------- */

/* A turn resumed after its engine aborted it: the segments so far. A zeroed one is empty. */
struct gw_resume {
    json_t *merged; /* the answer so far (the first segment's, grown) */
    VEC(char) ids;  /* the output ids so far, as text: "5,6,7" */
    int64_t tokens; /* generated so far */
    int segments;
};

/*
 * When answer (a 200 to SGLang turn r, sent as body) is an abort with budget left and r opted
 * in: folds it into s and returns the body that asks for the rest (malloc'd, *out_len bytes);
 * else NULL.
 */
char *gw_resume_next(struct gw_resume *s, const struct gw_request *r, const char *body, size_t len,
                     const char *answer, size_t answer_len, int64_t instance, size_t *out_len);

/* Folds the last segment's answer into s; returns the merged answer (malloc'd) and the turn's
 * generated tokens in *total, or NULL when the answer is not JSON. */
char *gw_resume_finish(struct gw_resume *s, const char *answer, size_t len, int64_t instance,
                       size_t *out_len, int64_t *total);

void gw_resume_free(struct gw_resume *s);

/* ---- control.c ---------------------------------------------------------------------------- */

/* The routes of control calls that go to every engine, admin, status and metrics. */
void gw_fan_out(void *ctx, struct net_call *c);
void gw_per_engine(void *ctx, struct net_call *c);
void gw_events_call(void *ctx, struct net_call *c);
void gw_admin_mode(void *ctx, struct net_call *c);
void gw_status(void *ctx, struct net_call *c);
void gw_metrics(void *ctx, struct net_call *c);
void gw_healthz(void *ctx, struct net_call *c);

/* Whether c carries the admin token (constant-time compare); when it does not, answers c 401
 * and returns false: the caller must then leave c alone and change nothing. */
bool gw_admin(struct gw *g, struct net_call *c);

/* Frees the control calls still waiting for engines (at shutdown, once the client cannot call
 * back: their answers never come). */
void gw_fan_free_all(struct gw *g);

/* Counts one upstream answer of seconds on e. */
void gw_observe_latency(struct gw_engine *e, double seconds);

/* Whether a weight update's body names its version ("weight_version"), keyed into version;
 * false: it names none, and the gateway numbers it. */
bool gw_update_named(const char *body, size_t len, char version[GW_VERSION_MAX]);

/* ---- restore.c: the state dir at start-up ------------------------------------------------ */

/* Opens --state-dir and reads the gateway's scalars, weight versions, layout and engines into
 * g (the engines before those of the command line: their ids stay). Returns 0, or LIBRA_EINVAL
 * (another schema version, a bad row) or LIBRA_EIO with err. */
int gw_persist_open(struct gw *g, char *err, size_t err_size);

/* What a replay of the journal works on: the router whose model learns, the trajectories
 * journalled since the last step (left there for the next one), the count learnt before. */
struct gw_replay {
    struct gw *g; /* whose pool takes the journal's pool records */
    struct sched_router *router;
    struct sched_eval_trace *finished;
    double *learnt;
    int64_t trajs, steps; /* records replayed */
};

/* Replays st's journal through rp's router as the live gateway learnt it: each trajectory
 * queued (gw_learn_rec_add), each step learnt and ticked (gw_learn_finished) and its deadline
 * set. Returns 0, or LIBRA_EINVAL (a bad record, a step whose count disagrees) / LIBRA_EIO
 * with err. */
int gw_journal_replay(struct gw_store *st, struct gw_replay *rp, char *err, size_t err_size);

/* Once the routers are made: replays the journal into the trees, restores the live
 * trajectories and makes each weight version new at this start a step. The store's worker is
 * the caller's to start (gw_store_start) once the start can no longer be refused: until then
 * nothing is committed. Returns 0, or LIBRA_EINVAL / LIBRA_EIO with err. */
int gw_persist_restore(struct gw *g, char *err, size_t err_size);

/* ---- persist.c: what changes, and calls answered once it is on disk ----------------------- */

/* Trajectory t's routing state changed (a turn routed or ended, returns announced). */
void gw_persist_traj(struct gw *g, const struct gw_traj *t);

/* Journals r, just queued for learning at the next step. */
void gw_persist_learnt(struct gw *g, const struct gw_learn_rec *r);

/* t ended: its row goes (in the commit that journals it). */
void gw_persist_ended(struct gw *g, const struct gw_traj *t);

/* Journals a step that learnt learnt trajectories and set deadline_s (NAN: none). */
void gw_persist_step(struct gw *g, int64_t learnt, double deadline_s);

/* Writes the whole engine registry (at set-up, and whenever an engine changes). */
void gw_persist_engines(struct gw *g);

/* The weight update kept for the pool's engines (g->update), or which engines missed it,
 * changed: it is written with the next commit. */
void gw_persist_update(struct gw *g);

/* The store's collect step (store.h): serialises what changed since the last one. */
void gw_persist_collect(void *g);

/* When commits are failing, answers c 503 and returns true: the caller changes nothing. */
bool gw_durable_refused(struct gw *g, struct net_call *c);

/* Answers c status with body once everything changed so far is committed (at once without a
 * state dir); 503 when the commit fails; nothing when the client went away. Takes body. */
void gw_reply_durable(struct gw *g, struct net_call *c, int status, json_t *body);

/* Commits what is left and closes the state (a no-op without one; what a start that failed
 * queued is dropped). Returns 0, or LIBRA_EIO with err. */
int gw_persist_close(struct gw *g, char *err, size_t err_size);

/* GET /libra/v1/state. */
void gw_state(void *ctx, struct net_call *c);

/* ---- pool.c: the elastic pool live ------------------------------------------------------- */

struct gw_pool;

/* Makes g's pool from --pool-replica (nothing without); before the state dir is replayed.
 * Returns 0, or -1 with err. Freed with gw_pool_free (a no-op without one). */
int gw_pool_new(struct gw *g, char *err, size_t err_size);
void gw_pool_free(struct gw *g);

/* Applies one journalled pool record (body, len) at start-up, through the function the live
 * calls use. Returns 0, or -1 with err when it cannot be read or does not fit the state
 * replayed so far (the start then fails: journal seq N: ...). */
int gw_pool_replay(struct gw *g, const char *body, size_t len, char *err, size_t err_size);

/* A start on a state dir resumes the pool's clock at the time its last graceful stop kept
 * (meta "pool_clock"), or at its last journal record when that is later (a crash since). */
void gw_pool_resume_clock(struct gw *g, double t_s);

/* A start on a state dir resumes the pool's count of changes (a long poll's cursor) from the
 * count its meta "pool_changes" kept, past every count shown before (a no-op without a pool). */
void gw_pool_resume_changes(struct gw *g, uint64_t kept);

/* Once the gateway listens: the pool's clock resumes, deadlines are watched, each replica's
 * engine is put to sleep or woken as its role says. */
void gw_pool_start(struct gw *g);

/* The gateway stops: long polls are answered at once (a no-op without a pool). */
void gw_pool_stop(struct gw *g);

/* GET /libra/v1/pool and POST /libra/v1/pool/{lend,reclaim,step,confirm}. */
void gw_pool_call(void *ctx, struct net_call *c);
void gw_pool_post(void *ctx, struct net_call *c);

/* The pool replicas' URLs in order, separated by spaces, into out ("" without a pool). */
void gw_pool_urls(const struct gw *g, char *out, size_t size);

/* How the pool is steered, as the state dir keeps it: "" without a pool, "off", or "core=N
 * tp=T" and " ehp.signal=reference" where that rule steers (--pool-steer, --pool-core-replicas,
 * the replicas' TP, ehp.signal): a replay's signals depend on it, so a restart must give the
 * same. */
void gw_pool_steering(const struct gw *g, char *out, size_t size);

/* The pool's families of GET /metrics (nothing without a pool). */
void gw_pool_metrics(const struct gw *g, FILE *out);

/* Whether e is a pool replica's engine whose GPUs are not rollout's now (asleep, going to
 * sleep, or not yet known awake): a weight update from disk leaves it out (it catches up when
 * it wakes). */
bool gw_pool_engine_off(const struct gw *g, const struct gw_engine *e);

/* Whether url is the engine of a pool replica. */
bool gw_pool_serves(const struct gw *g, const char *url);

/* ---- stop.c ------------------------------------------------------------------------------- */

/* Frees the graceful stop's state (gw_stop), if any. */
void gw_stop_free(struct gw *g);

#endif
