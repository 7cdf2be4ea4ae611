/*
 * Internals shared by the simulator's files: the state of one run and the calls between its
 * parts. Not an API: use sim/sim.h.
 *
 *   core.c      event queue, instances (one engine each), requests, failure injection
 *   traj.c      trajectory source, lifecycle (start, turns, tools, routing, finish), groups
 *   pool.c      tool CPU pools (FIFO queues of calls)
 *   trainer.c   step cost on the actual sequences, staleness, step records
 *   sync.c      weight updates: sync mode × transport
 *   mode_sync.c colocated and rollout modes (one batch at a time)
 *   mode_async.c async and libra modes (a stream with bounded staleness)
 *   mode.c      the modes' table: what each mode is (struct sim_mode_desc)
 *   elastic.c   the elastic hybrid pool of the libra mode (ehp/pool.h driven by the run)
 *   replan.c    online replanning of the libra mode's rollout fleet
 *   metrics.c   the run's summary
 *   perfetto.c  the recording hooks and the trace-event document of one step
 *   timeline.c  the GPU timeline of a step range (busy intervals, per-instance load)
 *
 * A mode is a row of the modes' table (struct sim_mode_desc): a small set of callbacks over
 * the shared parts (struct sim_mode_ops), its layout function and what it is.
 */
#ifndef SIM_INTERNAL_H
#define SIM_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cost/lifecycle.h"
#include "cost/move.h"
#include "cost/rollout.h"
#include "cost/shape.h"
#include "cost/train.h"
#include "engine/engine.h"
#include "job/job.h"
#include "plan/plan.h"
#include "sched/metrics.h"
#include "sched/router.h"
#include "sim/sim.h"
#include "util/arena.h"
#include "util/heap.h"
#include "util/intmap.h"
#include "util/strbuf.h"
#include "util/vec.h"
#include "workload/workload.h"

/* ---- events --------------------------------------------------------------------------- */

/* Events run in (time, sequence) order. An instance's next engine event is not one of these: it
 * moves each time the instance's engine takes work, so it is kept in sim.engine_events. */
enum sim_ev_kind {
    SIM_EV_TOOL,    /* a tool call finished (arg: sim_traj_ref, gen: its pool) */
    SIM_EV_MODE,    /* a mode's timer (arg: what, defined by the mode) */
    SIM_EV_SYNC,    /* a weight-update phase ended (arg: phase) */
    SIM_EV_FAIL,    /* failure injection (arg: instance) */
    SIM_EV_READY,   /* a starting instance is ready (arg: instance, gen: its epoch) */
    SIM_EV_FLEET,   /* a scripted fleet change (arg: index into sim_run_opts.fleet) */
    SIM_EV_POOL,    /* a hybrid replica's join phase ended (elastic.c; gen: its generation) */
    SIM_EV_SETUP,   /* a trajectory's environment is up (arg: sim_traj_ref) */
    SIM_EV_TIMEOUT, /* a trajectory's rl.trajectory_timeout_s since its launch (arg: its ref) */
};

struct sim_event {
    double t_s;
    uint64_t seq;
    uint32_t kind;
    uint32_t gen;
    uint64_t arg;
};

/* ---- instances ------------------------------------------------------------------------ */

/* Where an instance is. Its GPUs count as rollout GPUs while it serves or starts (and, as
 * before the fleet could change, after it failed: they stay in the fleet, idle). */
enum sim_inst_state {
    SIM_INST_SERVING,  /* its engine takes turns */
    SIM_INST_STARTING, /* an engine is starting: turns sent to it wait until it is ready */
    SIM_INST_LENT,     /* its GPUs left rollout (they train); no engine */
    SIM_INST_FAILED,   /* died (failure injection); no engine, never back */
    SIM_INST_RETIRED,  /* stopped by an accepted replan; its GPUs serve the replan's new
                        * instances; no engine, never back */
};

struct sim_inst {
    struct engine *eng; /* NULL while lent or once failed */
    enum sim_inst_state state;
    int tp, bucket, gpu;
    int hybrid;         /* 1 + the hybrid replica it serves for; 0: a core rollout instance */
    int live;           /* requests on it */
    int64_t version;    /* policy version of its weights */
    uint32_t epoch;     /* bumped at every start: a ready event of an older start is stale */
    bool dirty;         /* changed since its next event was computed */
    double busy_prev_s; /* busy seconds of its earlier engines (lent or failed ones) */
    int64_t last_count; /* running + queued last reported to the perfetto recording */
    int64_t gen_tokens; /* kept by its requests that ended (finished or aborted) */
};

/* Rollout GPU-seconds available over a window that the fleet may change during: the
 * GPU-seconds of the fleet's earlier sizes since the window began, plus the current size
 * times the time since the last change (or the window's start). */
struct sim_gpu_window {
    double acc_gpu_s; /* GPU-seconds before mark_s */
    double mark_s;    /* the window's start or the last fleet change since */
};

/* ---- trajectories --------------------------------------------------------------------- */

struct sim_call {
    uint32_t pool;
    enum trace_tool_status status;
    int64_t payload_tokens;
    double exec_s;
};

struct sim_turn {
    int64_t prompt_tokens;  /* the whole context sent */
    int64_t gen_tokens;     /* >= 1 */
    uint32_t call, n_calls; /* tool calls after it, into the trajectory's calls */
};

enum sim_traj_state {
    SIM_T_GEN,     /* a turn is on an engine */
    SIM_T_HELD,    /* a turn waits for the fleet to come back (weight update) */
    SIM_T_TOOL,    /* waiting on tool calls */
    SIM_T_DONE,    /* finished (completed or truncated) */
    SIM_T_ABORTED, /* aborted and never resumed */
    SIM_T_SETUP,   /* its environment starts (a sandbox container) before the first turn */
};

/*
 * A trajectory lives in a slot of s->traj from its launch until its group is released (its
 * tokens trained or counted as waste): memory follows the trajectories in flight, not the
 * run's length. Group slot g owns trajectory slots [g * samples, (g + 1) * samples).
 * Everything seen outside the simulator (the router, the engines' prefix caches, the perfetto
 * trace, every order of iteration that can change a result) uses uid, the launch order, so a
 * run does not depend on which slots were free. Whatever may outlive the trajectory (a tool
 * call's event, a queued call, a held turn) holds a reference (sim_traj_ref): the slot and its
 * use count, which tells a stale reference from a live one.
 */
struct sim_traj {
    uint64_t uid;   /* launch order over the run */
    uint32_t use;   /* times the slot has been taken */
    uint32_t group; /* slot of its group */
    uint32_t sample;
    int64_t prompt, epoch;
    int64_t version_start;  /* policy version when its first turn started */
    int64_t version_end;    /* version of its last token */
    struct sim_turn *turns; /* one block with calls; freed when the trajectory ends */
    struct sim_call *calls;
    uint32_t n_turns, turn; /* turns, and the current one */
    uint8_t splits;         /* bit per sched_split its scored decisions fell in */
    enum sim_traj_state state;
    int inst;               /* instance of the current or last turn; -1 before the first */
    uint64_t req;           /* live request id */
    int64_t submit_version; /* version of the instance when the live request was sent */
    int64_t split_tokens;   /* tokens of the live request generated before an in-place update
                             * (keep mode); -1 none */
    int64_t turn_base;      /* tokens of the current turn kept from an abort (resumed) */
    int64_t reusable;       /* prefix the live request claimed reusable */
    int64_t generated;      /* tokens generated so far (all turns) */
    int64_t total_tokens;   /* generated tokens of the whole record */
    int64_t final_context;  /* training sequence: last prompt + last generation */
    int64_t first_prompt;   /* the first turn's prompt, tokens */
    int64_t tool_tokens;    /* every tool return's payload, tokens */
    double setup_s;         /* its environment's setup before the first turn, seconds */
    double tool_s;          /* seconds off the GPU so far: the setup, the tools' queue and
                             * execution */
    uint32_t pending;       /* tool calls outstanding */
    double start_s, end_s, turn_start_s, tool_start_s; /* start_s: its launch */
    enum trace_finish finish;
    double reward;
    bool has_reward;
    bool mixed;     /* tokens of more than one version */
    bool accounted; /* its tokens were trained or counted as waste */
};

struct sim_group {
    int64_t index;  /* in launch order: the source's group number */
    uint32_t first; /* slot of its first trajectory; members are consecutive */
    uint32_t n, done;
    int64_t version; /* at launch */
    int round;       /* mode-defined (the colocated round) */
    bool filtered;
    bool aborted;
    double done_s;
};

/* ---- tool pools ----------------------------------------------------------------------- */

/* A call waiting for a worker. */
struct sim_waiting {
    uint64_t traj; /* sim_traj_ref */
    double exec_s;
    double queued_s;
};

struct sim_pool {
    char name[WORKLOAD_TOOL_NAME_MAX];
    int64_t workers; /* 0: a worker per call (no queueing) */
    int64_t busy;
    VEC(struct sim_waiting) queue; /* FIFO from head */
    size_t head;
    int64_t calls;
    double wait_s;    /* total queueing delay */
    double busy_s;    /* worker-seconds executing, up to changed_s */
    double changed_s; /* when busy last changed */
};

/* ---- modes ---------------------------------------------------------------------------- */

struct sim;

struct sim_mode_ops {
    void (*begin)(struct sim *s);
    void (*group_done)(struct sim *s, struct sim_group *g);
    void (*timer)(struct sim *s, uint64_t arg);
    /* Something the mode may wait for changed: the trainer was freed or the fleet updated. */
    void (*resume)(struct sim *s);
    void (*release)(struct sim *s); /* frees what begin allocated */
};

extern const struct sim_mode_ops sim_mode_sync_ops;  /* colocated and rollout */
extern const struct sim_mode_ops sim_mode_async_ops; /* async and libra */

/* How a mode's layout is chosen when the config does not pin it. */
enum sim_tune {
    SIM_TUNE_NONE,     /* made once (the planner's, or the fleet sched.buckets gives) */
    SIM_TUNE_TP,       /* every rollout TP simulated (sim.colocated_tp pins it) */
    SIM_TUNE_SPLIT_TP, /* every split and TP (sim.async_train_gpus and sim.async_tp pin them) */
};

struct plan_lengths;

/* A mode's identity (mode.c holds the table, by enum sim_mode). */
struct sim_mode_desc {
    const char *name; /* as sim.modes spells it */
    unsigned bit;     /* its SPEC_SIM_* bit in sim.modes */
    const struct sim_mode_ops *ops;
    bool streams;   /* rollout is a stream with bounded staleness (the async pipeline) */
    bool trains;    /* it has a trainer (the rollout mode has none) */
    bool colocated; /* every GPU trains, then rolls out (time-shared) */
    bool routed;    /* its fleet is routed by sched.policy (else least-connections) */
    enum sim_tune tune;
    /* Its layout with the pinned choices of sim_layout_make (n_train, tp) on the planner's
     * length sample sm (NULL when the mode does not train); as sim_layout_make. */
    int (*layout)(const struct sim_input *in, const struct plan_lengths *sm, int n_train, int tp,
                  struct sim_layout *l, struct libra_error *err);
};

const struct sim_mode_desc *sim_mode_desc(enum sim_mode m);

/* ---- recordings (perfetto.c, timeline.c) ---------------------------------------------- */

/* Where an instance's busy time stands on its timeline row (timeline.c). */
struct sim_timeline_inst {
    double seen_s;          /* its busy time is placed on the row up to here */
    double seen_busy_s;     /* its busy seconds at seen_s (sim_inst_busy_s) */
    double start_busy_s;    /* ... when the window opened */
    double busy_end_s;      /* the end of its last rollout interval */
    int64_t start_requests; /* its counters when the window opened */
    int64_t start_tokens;
};

/* The GPU timeline being recorded (sim_run_opts.timeline). */
struct sim_timeline_rec {
    struct sim_timeline *tl;        /* the result being filled; NULL when not recording */
    VEC(struct sim_interval) * row; /* 1 + n_inst rows: the trainer, then the instances */
    struct sim_timeline_inst *inst; /* n_inst */
    bool on;                        /* inside the window */
    size_t n, cap;                  /* intervals recorded, and the most allowed */
    double cut_s;                   /* the earliest start of an interval left out (cap) */
};

struct sim_trace_rec {
    json_t *events; /* the traceEvents array, or NULL when not recording */
    bool on;        /* inside the recorded step */
    int64_t step;   /* the step to record */
    struct sim_timeline_rec timeline;
};

/* ---- the run -------------------------------------------------------------------------- */

struct sim {
    const struct sim_input *in;
    const struct libra_config *cfg;
    const struct sim_layout *lay;
    const struct sim_run_opts *opts;
    struct sim_result *out;
    struct libra_error *err;
    int rc;        /* first error; the loop stops */
    bool finished; /* the mode has run every step */

    /* settings resolved from the config */
    int batch, samples, groups_per_batch, staleness;
    struct job_rules job; /* admission, staleness, sync schedule (job/job.h) */
    bool chat;

    /* the models */
    struct cost_shape shape;
    struct plan_settings st;
    struct cost_rollout_pre pre[PLAN_NTP]; /* by log2(TP) */
    struct cost_move_model move;           /* the router's move costs: pre and the chunk */

    /* clock and events */
    double now;
    uint64_t seq;
    struct heap events;
    struct heap_indexed engine_events; /* instances by the (time, sequence) their engine next
                                        * has something to do */

    /* instances and the router's view of them */
    struct sim_inst *inst;
    struct sched_instance *reg;
    int n_inst;
    int rollout_gpus;                    /* Σ TP of the instances serving, starting or failed */
    int failed_gpus;                     /* ... of the failed ones: idle for good */
    struct sim_gpu_window step_avail;    /* rollout GPU-seconds since the last step ended */
    struct sim_gpu_window measure_avail; /* ... since the measured window began */
    bool fleet_paused;                   /* keep mode: serving engines paused for an update */
    double step_busy_gpu_s;              /* the fleet's busy GPU-seconds when the last step ended */
    double measure_busy_gpu_s;           /* ... when the measured window began */
    VEC(int) dirty;
    VEC(struct engine_done) done; /* completions collected by the engine callback */
    uint64_t next_req;
    int64_t live_requests;

    /* trajectories and groups */
    struct workload_gen gen;
    struct arena arena;           /* generator scratch, reset per group */
    VEC(struct sim_traj) traj;    /* slots */
    VEC(struct sim_group) groups; /* slots */
    VEC(uint32_t) free_groups;    /* released group slots, reused last in first out */
    int64_t launched;             /* groups launched: the next group's index */
    struct sim_pool *pools;
    size_t n_pools;
    struct intmap prompt_seen; /* prompt -> group index << 1 of its first finished trajectory,
                                * | 1 once one of another group finished */
    int64_t rollout_version;   /* the fleet's weights */
    bool hold;                 /* a weight update holds new turns */
    VEC(uint64_t) held;        /* sim_traj_refs of turns waiting for the update */

    /* routing */
    struct sched_obs_config oc;
    struct sched_router *router; /* owns its model (sched_router_model) */
    struct sched_metrics *rmetrics;

    /* training */
    int64_t version; /* trainer's policy version: steps completed */
    bool train_busy; /* a step (or the trainer's share of a sync) is running */
    double train_start_s;
    double last_step_end_s;
    double last_batch_ready_s;
    double wait_since_s; /* async: trainer idle since */
    struct cost_train_seqs seqs;
    struct cost_train_scratch scratch;
    VEC(uint32_t) lens;
    VEC(double) ends;    /* finish times of the step's trajectories (tail share) */
    double train_busy_s; /* training compute in the measured window */
    struct sim_step cur; /* the step being trained */
    struct sim_hist batch_tokens, batch_duration; /* the batch of the step to be recorded */
    int64_t step_waste[SIM_WASTES];               /* waste counters at the last step's end */
    VEC(struct sim_step) steps;
    double measure_from_s;

    /* weight updates */
    int sync_phase;       /* SIM_SYNC_* */
    bool sync_pending;    /* another update waits for the current one */
    int64_t sync_version; /* version being pushed */
    double sync_start_s;
    double quiesce_s;      /* when the fleet was quiesced for it */
    double trainer_sync_s; /* trainer time in the current update */

    /* mode */
    const struct sim_mode_ops *ops;
    void *mode;

    /* online replanning (replan.c); NULL when off */
    struct sim_replan *replan;
    VEC(struct sim_replan_eval) replans;

    /* the elastic hybrid pool (elastic.c); NULL without hybrid replicas */
    struct sim_elastic *elastic;
    double rebuild_s; /* the NCCL weight-update group's rebuild that a fleet change owes the
                       * next update, s */

    struct sim_trace_rec trace;
};

/* A utilisation: busy over available (GPU-)seconds, 0 when nothing was available. Busy time
 * never exceeds the time available, so an excess within rounding (1e-9) is cut to 1. */
static inline double sim_util(double busy, double avail)
{
    double u = avail > 0 ? busy / avail : 0;
    return u > 1 && u <= 1 + 1e-9 ? 1 : u;
}

/* Whether trajectory t is in flight: a turn generating, held or waiting on tools. */
static inline bool sim_traj_in_flight(const struct sim_traj *t)
{
    return t->use && (t->state == SIM_T_GEN || t->state == SIM_T_HELD || t->state == SIM_T_TOOL);
}

/* A reference to t that stays safe after t's slot is reused (see struct sim_traj). */
static inline uint64_t sim_traj_ref(const struct sim *s, const struct sim_traj *t)
{
    return (uint64_t)t->use << 32 | (uint64_t)(t - s->traj.v);
}

/* The trajectory ref names, or NULL when its slot has been taken again since. */
static inline struct sim_traj *sim_traj_deref(struct sim *s, uint64_t ref)
{
    struct sim_traj *t = &s->traj.v[(uint32_t)ref];
    return t->use == (uint32_t)(ref >> 32) ? t : NULL;
}

/* The router's view of the fleet. */
static inline struct sched_registry sim_registry(const struct sim *s)
{
    return (struct sched_registry){s->reg, (size_t)s->n_inst};
}

/* ---- core.c --------------------------------------------------------------------------- */

/* Schedules an event at t_s (>= now). */
void sim_schedule(struct sim *s, double t_s, enum sim_ev_kind kind, uint32_t gen, uint64_t arg);

/* Records the first error (the run stops at the next event). Returns LIBRA_EINVAL. */
int sim_fail(struct sim *s, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Sends trajectory t's current turn to instance t->inst (held while s->hold). */
void sim_submit(struct sim *s, struct sim_traj *t);

/* Aborts t's live request; returns the tokens it had generated (0 when none live). */
int64_t sim_abort_request(struct sim *s, struct sim_traj *t);

/* Flushes every live instance's prefix cache and sets its version (a weight update). */
void sim_fleet_update(struct sim *s, int64_t version);

/* Pauses (false) or resumes every serving instance's engine (keep mode); an instance that
 * becomes ready while the fleet is paused stays paused until it resumes. */
void sim_fleet_ready(struct sim *s, bool ready);

/*
 * Takes serving or starting instance i out of rollout (its GPUs go to training): its live
 * turns are aborted with their output kept and resumed elsewhere (the context prefilled
 * again there is re-prefill waste), its engine and KV are gone and its GPUs leave the
 * rollout GPU-seconds. Does nothing to an instance lent or failed already.
 */
void sim_inst_lend(struct sim *s, int i);

/*
 * Brings lent instance i back to rollout: a new engine, STARTING (turns sent to it wait)
 * until ready_in_s from now, with the fleet's weights; its GPUs count as rollout GPUs at
 * once. Does nothing to an instance that is not lent.
 */
void sim_inst_return(struct sim *s, int i, double ready_in_s);

/* Takes serving or starting instance i out of rollout for good (a replan stops it): as
 * sim_inst_lend, but it never comes back. */
void sim_inst_retire(struct sim *s, int i);

/*
 * Adds an instance of TP tp on GPUs [gpu, gpu + tp) serving bucket `bucket`: a new engine,
 * STARTING until ready_in_s from now, with the fleet's weights; its GPUs count as rollout GPUs
 * at once. Returns its index (the last), or -1 with the error recorded (sim_fail).
 */
int sim_inst_add(struct sim *s, int tp, int gpu, int bucket, double ready_in_s);

/* Waiting turns over the serving instances' queue caps. */
double sim_queue_pressure(const struct sim *s);

/* Trajectories in flight over the (rl.max_staleness + 1) batches admission lets in. */
double sim_active_pressure(const struct sim *s);

/* Rollout GPU-seconds available in window w up to now; sim_avail_restart starts w now. */
double sim_avail_gpu_s(const struct sim *s, const struct sim_gpu_window *w);
void sim_avail_restart(const struct sim *s, struct sim_gpu_window *w);

/* Ends the measured window's start: snapshots engine counters. */
void sim_measure_begin(struct sim *s);

/* Seconds instance i has been busy from the start to now, over all its engines, the elapsed
 * part of a running iteration included (frozen while lent and once failed). */
double sim_inst_busy_s(struct sim *s, int i);

/* Busy GPU-seconds of the rollout fleet from the start to now: Σ TP × sim_inst_busy_s. */
double sim_fleet_busy_gpu_s(struct sim *s);

/* ---- traj.c --------------------------------------------------------------------------- */

/* Launches the next group of the source (its trajectories start now at the fleet's version).
 * Returns its slot in s->groups. */
uint32_t sim_launch_group(struct sim *s, int round);

/* Gives group g's slot, and its trajectories', back for reuse: every member has ended and its
 * tokens are accounted. g must not be used afterwards. */
void sim_group_release(struct sim *s, struct sim_group *g);

/* The slots of the trajectories in state (on instance inst, or any when inst < 0) in launch
 * order, as a malloc'd array in *slots. Returns their count. */
size_t sim_trajs_in(struct sim *s, enum sim_traj_state state, int inst, uint32_t **slots);

/* A turn of t ended on its engine (d its record): accounts it and moves t on. */
void sim_turn_done(struct sim *s, struct sim_traj *t, const struct engine_done *d);

/* A trajectory's timeout came (a SIM_EV_TIMEOUT event): stopped if it still runs. */
void sim_traj_timeout(struct sim *s, uint64_t ref);

/* t's environment is up (a SIM_EV_SETUP event): its first turn starts. */
void sim_setup_done(struct sim *s, uint64_t ref);

/* All tool calls of t's last turn returned: routes and sends its next turn. */
void sim_tools_returned(struct sim *s, struct sim_traj *t);

/* Aborts t for good (never resumed): its generated tokens are wasted as `why`. */
void sim_traj_abort(struct sim *s, struct sim_traj *t, enum sim_waste why);

/* Aborts group g for good: its finished members' tokens and its live members' are waste, and
 * it is released. */
void sim_group_abort(struct sim *s, struct sim_group *g, enum sim_waste why);

/* Counts the tokens of a live request that ended (kept_tokens of them) by policy version. */
void sim_account_versions(struct sim *s, struct sim_traj *t, int64_t kept_tokens);

/* Aborts t's live request keeping its output: the turn resumes from there when resent. */
void sim_traj_suspend(struct sim *s, struct sim_traj *t);

/* Re-routes and resends t's current turn after its instance failed or it was aborted. */
void sim_reroute(struct sim *s, struct sim_traj *t);

/* Sets up the trajectory source, pools and observation rules; frees them. */
void sim_source_init(struct sim *s);
void sim_source_free(struct sim *s);

/* ---- pool.c --------------------------------------------------------------------------- */

/* Queues or starts every tool call after t's finished turn. */
void sim_tools_start(struct sim *s, struct sim_traj *t);

/* A call of the trajectory ref names (sim_traj_ref) finished on a worker of pool. */
void sim_tool_done(struct sim *s, uint64_t ref, uint32_t pool);
/* Pool p's worker-seconds executing, up to now. */
double sim_pool_busy_s(const struct sim *s, const struct sim_pool *p);

/* ---- trainer.c ------------------------------------------------------------------------ */

/* Starts a training step on the trajectories of groups g[0..n) at the trainer's version and
 * releases the groups; returns its duration (the caller schedules the end). */
double sim_train_begin(struct sim *s, const uint32_t *g, size_t n);

/* Fills st's trajectories, trained tokens, mean staleness and tail share from groups g[0..n)
 * (marking their trajectories trained, then releasing the groups) and leaves their sequence
 * lengths in s->lens. The rollout span starts at first_start_s, or at the earliest start when
 * it is NAN. */
void sim_batch_stats(struct sim *s, const uint32_t *g, size_t n, double first_start_s,
                     struct sim_step *st);

/* Appends the record of the step that just ended (the trainer's version is its index). The
 * mode then plays what the step's end decides and calls sim_trace_step_done. */
void sim_step_record(struct sim *s, struct sim_step *st);

/* Whether group g is too stale for the trainer's version (then rejected, counted and
 * released). */
bool sim_group_stale(struct sim *s, struct sim_group *g);

/* Members of group g not timed out (rl.trajectory_timeout_s): what training takes of it. */
uint32_t sim_group_kept(const struct sim *s, const struct sim_group *g);

/* Counts a group's generated tokens as waste of cause why and releases it. */
void sim_group_waste(struct sim *s, struct sim_group *g, enum sim_waste why);

/* ---- sync.c --------------------------------------------------------------------------- */

enum { SIM_SYNC_NONE, SIM_SYNC_SAVE, SIM_SYNC_QUIESCE, SIM_SYNC_TRANSFER };

/* Starts pushing the trainer's version to the fleet (async and libra). The trainer is busy
 * for its share; ops->resume runs when it is free and when the fleet has the new weights. */
void sim_sync_begin(struct sim *s);

/* An update phase event. */
void sim_sync_event(struct sim *s, uint64_t phase);

/* A request ended or was aborted: a drain may be complete. */
void sim_sync_poll(struct sim *s);

/* One weight update of s's layout (cost_weight_update with where its fleet sits). */
void sim_weight_update(const struct sim *s, struct cost_weight_update *out);

/* ---- elastic.c ------------------------------------------------------------------------ */

/* Creates the pool of s's layout (its hybrid replicas serving rollout). Returns 0, or the
 * error recorded with sim_fail. */
int sim_elastic_init(struct sim *s);
void sim_elastic_free(struct sim *s);

struct ehp_lend;

/* A training step begins: membership is frozen. Returns the hybrid replicas that train beside
 * the core, and in *lend what they are (for ehp_batch_step_s). */
int sim_elastic_step_begin(struct sim *s, const struct ehp_lend **lend);

/* The step that st records ended: returns the replicas leaving training and fills st->pool. */
void sim_elastic_step_end(struct sim *s, struct sim_step *st);

/* After the record of step st: the signal, from st's training and rollout times and the
 * router's pressure, and the pool steered toward it. */
void sim_elastic_steer(struct sim *s, const struct sim_step *st);

/* A SIM_EV_POOL event: a join's phase ended, or its deadline came. */
void sim_elastic_event(struct sim *s, uint32_t gen, uint64_t arg);

/* Failure injection on instance i: where it belongs to a hybrid replica, lent to training or
 * serving rollout, the replica's member fails (a join rolls back) and the replica is lost. */
void sim_elastic_member_failed(struct sim *s, int i);

/* The recorded step ends now: each replica's phase still open goes into the trace up to now. */
void sim_elastic_trace_end(struct sim *s);

/* The GPU timeline's window closes now: each replica borrowed back by training adds its time
 * so far to its instances' rows. */
void sim_elastic_timeline_end(struct sim *s);

/* ---- replan.c ------------------------------------------------------------------------- */

/* Whether s's run replans: the libra mode on the planner's layout with a trigger on. */
bool sim_replans(const struct sim *s);

/* Starts replanning for s's layout (s->replan). */
void sim_replan_init(struct sim *s);
void sim_replan_free(struct sim *s);

/* Group g completed (not aborted): its trajectories join the window. */
void sim_replan_group(struct sim *s, const struct sim_group *g);

/* After the record of step st: a trigger may fire, and a replan be decided and played. */
void sim_replan_steer(struct sim *s, const struct sim_step *st);

/* ---- perfetto.c: the recording hooks ---------------------------------------------------- */

/* Sets up what opts asks to record (the trace-event document, the timeline). */
void sim_trace_init(struct sim *s);

/* The run starts; step `step` has just ended (its record is in s->steps) and what its end
 * decides was played. Open and close the recorded step and the timeline's window. */
void sim_trace_start(struct sim *s);
void sim_trace_step_done(struct sim *s, int64_t step);

/* Trace-event slices and instant events (only inside the recorded step; args is consumed). */
void sim_trace_slice(struct sim *s, int pid, uint64_t tid, const char *name, double from_s,
                     double to_s, json_t *args);
void sim_trace_instant(struct sim *s, int pid, uint64_t tid, const char *name, json_t *args);

/* Instance i changed at now (its engine has composed what it runs next). */
void sim_trace_instance(struct sim *s, int i);

/* The training of step st ended now: from s->train_start_s for st->train_s. */
void sim_trace_train(struct sim *s, const struct sim_step *st);

/* Rows of sim_trace_phase. */
enum { SIM_ROW_TRAINER = 1, SIM_ROW_FLEET = 2 };

/* The trainer and/or every instance in the fleet (rows, SIM_ROW_*; sim_timeline_fleet) spent
 * [from_s, now] on use u. */
void sim_trace_phase(struct sim *s, enum sim_use u, double from_s, unsigned rows);

/* The run ended: moves what was recorded into s->out (perfetto, timeline). */
void sim_trace_finish(struct sim *s);

/* Frees what is being recorded (every run, finished or not). */
void sim_trace_release(struct sim *s);

#define SIM_PID_INSTANCES 1
#define SIM_PID_TRAJECTORIES 2
#define SIM_PID_TRAINER 3
#define SIM_PID_POOL 4 /* one track per hybrid replica */

/* ---- timeline.c (through the hooks above) ---------------------------------------------- */

void sim_timeline_init(struct sim *s);
/* The fleet gained an instance (the last): its row. */
void sim_timeline_grow(struct sim *s);
void sim_timeline_begin(struct sim *s);
void sim_timeline_end(struct sim *s);

/* Places instance i's busy time up to now on its row. */
void sim_timeline_catch_up(struct sim *s, int i);

/* Adds [from_s, to_s] of use u to row (0 the trainer, 1 + i instance i), clipped to the
 * window; row 0 does nothing without a trainer. */
void sim_timeline_add(struct sim *s, int row, enum sim_use u, double from_s, double to_s);

/* Adds [from_s, now] of use u to the row of every instance in the fleet (a live engine, or a
 * failed instance in colocated mode, whose GPUs still train), after its last iteration. */
void sim_timeline_fleet(struct sim *s, enum sim_use u, double from_s);

/* Adds [from_s, now] of training to instance i's row after its last iteration: the GPUs of a
 * lent training replica, borrowed back by the trainer. */
void sim_timeline_borrowed(struct sim *s, int i, double from_s);

/* The finished timeline (rows sorted, touching intervals merged, the cap's cut applied), or
 * NULL when none was asked for; the caller owns it. */
struct sim_timeline *sim_timeline_take(struct sim *s);

void sim_timeline_release(struct sim *s);

/* ---- metrics.c ------------------------------------------------------------------------ */

/* Counts v in its bin of h (NaN and values below h->lo in the first). */
void sim_hist_add(struct sim_hist *h, double v);
void sim_hist_merge(struct sim_hist *into, const struct sim_hist *h);
/* The lower edge of bin b of h (b = SIM_HIST_BINS: the upper edge of the last). */
double sim_hist_edge(const struct sim_hist *h, int b);

void sim_metrics_finish(struct sim *s);

/* ---- layout.c ------------------------------------------------------------------------- */

/* The modes' layout functions (struct sim_mode_desc.layout). */
int sim_layout_colocated(const struct sim_input *in, const struct plan_lengths *sm, int n_train,
                         int tp, struct sim_layout *l, struct libra_error *err);
int sim_layout_async(const struct sim_input *in, const struct plan_lengths *sm, int n_train, int tp,
                     struct sim_layout *l, struct libra_error *err);
int sim_layout_libra(const struct sim_input *in, const struct plan_lengths *sm, int n_train, int tp,
                     struct sim_layout *l, struct libra_error *err);
int sim_layout_rollout(const struct sim_input *in, const struct plan_lengths *sm, int n_train,
                       int tp, struct sim_layout *l, struct libra_error *err);
/* A fleet of instances of one TP over GPUs [first_gpu, gpus) of cfg's cluster into l, one bucket
 * of them, placed: refused when tp is not a size a node takes or no instance fits. */
int sim_homogeneous(const struct libra_config *cfg, struct sim_layout *l, int first_gpu, int tp,
                    struct libra_error *err);
/* The fleet sched.buckets gives mode m (the rollout mode; libra's without the planner) into l:
 * its buckets, instances and training GPUs (those the fleet leaves; none without training), the
 * instances placed on the GPUs after them. Refused when the buckets give no instance counts, or
 * the fleet leaves no GPU to train or does not fit the nodes; l owns what it holds either way. */
int sim_fleet(const struct libra_config *cfg, enum sim_mode m, struct sim_layout *l,
              struct libra_error *err);

/* Makes the last bucket of b serve TP tp too (listing no instance of it) unless a bucket
 * does: the bucket of the longest work, where a large instance belongs. */
void sim_buckets_serve(struct spec_bucket_layout *b, int tp);

/* The planner's length sample of in (appended to sm): plan_sample_size trajectories in whole
 * batches spread evenly over the run (workload_lengths; a trace's whole batches spread over the
 * trace, or its first batch cycled when it holds less than one). */
void sim_layout_sample(const struct sim_input *in, struct plan_lengths *sm);

/* l's instances (l->inst, l->n_inst; owned by l) as plan r places them. */
void sim_layout_plan_instances(const struct plan_result *r, struct sim_layout *l);

/* Assigns each instance of l (TP set) a bucket of l->buckets serving its TP: a bucket's listed
 * instance counts first, the rest round-robin over the buckets that list the TP. Returns 0, or
 * LIBRA_EINVAL with err when no bucket serves a TP of the fleet. */
int sim_layout_assign_buckets(struct sim_layout *l, struct libra_error *err);

/* libra's layout as the planner plans it on in's length sample under the plan section of
 * plan_cfg (in->cfg but for that section). Returns as sim_layout_make. */
int sim_layout_plan(const struct sim_input *in, const struct libra_config *plan_cfg,
                    struct sim_layout *out, struct libra_error *err);

/* ---- report.c ------------------------------------------------------------------------- */

/* The fleet of l as "tp1x4,tp8x2" (truncated to size). */
void sim_fleet_text(const struct sim_layout *l, char *out, size_t size);

/* l's rollout instances by log2(TP) into counts; core_only leaves out the hybrid replicas'. */
void sim_layout_counts(const struct sim_layout *l, bool core_only, int counts[PLAN_NTP]);

/* libra's trained tokens/s (trajectories/s) over mode m's; NAN when either is missing or m's
 * is 0. */
double sim_libra_ratio(const struct sim_experiment *e, enum sim_mode m, bool trajectories);

#endif
