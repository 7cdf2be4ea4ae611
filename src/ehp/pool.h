/*
 * The Elastic Hybrid Pool as a pure state machine (libra-spec.md §3): which GPUs train and
 * which serve rollout, how a hybrid training replica lent to rollout joins training and goes
 * back, and the signal that says how many should train.
 *
 * Agentic rollouts drift (trajectories grow as the policy learns), so any static split of a
 * cluster decays. The pool keeps three kinds of GPUs: the core training replicas (their
 * membership never changes, so the core's TP/PP/DP communicators are never rebuilt), the core
 * rollout instances, and hybrid replicas — whole training DP replicas of the core's layout,
 * each on one host — that serve rollout until borrowed and train beside the core while
 * borrowed, in a communication domain of their own. The simulator and the gateway drive the
 * same pool: a decision in `libra sim` and one in `libra serve` on the same events are the
 * same function call.
 *
 * A join (ehp_pool_join) returns a handle at once and runs in phases, each ended by an event
 * the caller reports (the simulator schedules it after the phase's expected time, which the
 * decision record carries; the gateway gets it from the trainers):
 *
 *   HYBRID_ROLLOUT --join--> REQUESTED --STARTED--> FETCHING_STATE --FETCHED (every member,
 *   one version)--> ZERO_SYNC --SYNCED (at the core's version)--> ACTIVATING --STEP_BEGIN-->
 *   ACTIVE (HYBRID_TRAINING) --release: at the end of the open step--> HYBRID_ROLLOUT
 *
 * Before ACTIVATING the join has a deadline (params.join_timeout_s after the request); any
 * member's failure, the deadline, or members that disagree on the state version fail it
 * (FAILED), and a release before ACTIVE cancels it (CANCELLED): either way every member goes
 * back to HYBRID_ROLLOUT at once (all or nothing) and the join leaves no trace in the training
 * state. Every reversal (cancel, failure, return) and every request bumps the replica's
 * generation; an event of an older generation is dropped (EHP_DEC_DROPPED), so a stale join
 * cannot advance a newer one, and a handle older than the last join to end reads FAILED.
 * A member's failure also loses the replica for good (EHP_DEC_LOST), whatever its phase, serving
 * rollout included: a replica trains only whole, so it is never joined again; its GPUs stay
 * HYBRID_ROLLOUT, where the caller serves rollout on the members still alive.
 *
 * Per step, membership is frozen at EHP_EV_STEP_BEGIN (struct ehp_step): the core, the active
 * hybrids, each with its share of the batch, and the joining replicas whose trainers are up as
 * zero-gradient placeholders, so training never waits for a join. Nothing changes it until
 * EHP_EV_STEP_END: an ACTIVATING replica becomes ACTIVE only at a step start, a released one
 * leaves at the step end, and an active replica that fails mid-step is recorded as lost (its
 * payload never arrives; the core averages what did).
 *
 * The signal (ehp_pool_signal, once per plan) says how many hybrid replicas should train, by
 * the reference's rule with its pressure guard, thresholds and hysteresis (ehp_signal_decide),
 * and expires params.signal_ttl_steps steps after it was issued; ehp_pool_steer moves the pool
 * toward it (with no live signal, toward none training: hybrids serve rollout until borrowed).
 *
 * Time: seconds as double, monotonic, passed in (now_s). A call refused as malformed (a now_s
 * before the pool's clock or not finite, a replica or member out of range, a step protocol
 * error, a signal input out of range) changes nothing. Any other call first fails the joins
 * whose deadline is at or before now_s, even a join or release then refused for the state it
 * finds. An event that is well formed but does not fit the state (stale generation, wrong
 * phase) is dropped with a record. Decisions are appended to the caller's vector, in order.
 *
 * Pure: no I/O, clocks or globals; all durations come from cost/ through ehp/lend.h. A pool is
 * not thread-safe; distinct pools are independent. docs/ehp.md has the diagram and defaults.
 */
#ifndef EHP_POOL_H
#define EHP_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/lifecycle.h"
#include "ehp/lend.h"
#include "libra/libra.h"
#include "util/vec.h"

/* A GPU's role. */
enum ehp_role {
    EHP_ROLE_CORE_TRAINING,   /* a core replica's: trains every step, never lent */
    EHP_ROLE_CORE_ROLLOUT,    /* a core rollout instance's: never trains */
    EHP_ROLE_HYBRID_ROLLOUT,  /* a hybrid replica's, lent to rollout (its default) */
    EHP_ROLE_HYBRID_JOINING,  /* a hybrid replica's on its way into training */
    EHP_ROLE_HYBRID_TRAINING, /* a hybrid replica's, back in training */
};
#define EHP_ROLES 5

/* Where a hybrid replica's join is. */
enum ehp_join {
    EHP_JOIN_NONE,           /* no join: the replica serves rollout */
    EHP_JOIN_REQUESTED,      /* its engine stops (turns in flight are aborted), trainers start */
    EHP_JOIN_FETCHING_STATE, /* members fetch their shards of weights, master weights and
                              * optimizer state at one version */
    EHP_JOIN_ZERO_SYNC,      /* in the elastic domain, sending zero gradients and stepping on
                              * the reduced ones until in lockstep with the core */
    EHP_JOIN_ACTIVATING,     /* in lockstep: trains from the next step start */
    EHP_JOIN_ACTIVE,         /* trains its share of every step */
    EHP_JOIN_CANCELLED,      /* ended: a release came before ACTIVE (handles only) */
    EHP_JOIN_FAILED,         /* ended: a member failed, the deadline passed, the versions
                              * disagreed, or the handle is stale (handles only) */
};

/* How the batch is shared with active hybrids. */
enum ehp_batch {
    EHP_BATCH_FIXED, /* the global batch stays B and is shared (libra's default, spec §5) */
    EHP_BATCH_GROW,  /* each active hybrid adds one core replica's share (the reference's
                      * local_batch·(1 + n_active); it changes the optimisation: label it) */
};

/* How the signal sets its target past the guard and the plan's want. */
enum ehp_rule {
    EHP_RULE_BALANCE,   /* libra's: the count of training hybrids whose predicted step (the
                         * larger of T_train and T_rollout, each scaled from the step observed
                         * by the replicas training and the GPUs in rollout) is least, if it
                         * beats holding by min_gain_frac; the reference's rule without the
                         * observation's sizes */
    EHP_RULE_REFERENCE, /* the reference's: borrow all past borrow_ratio, release all below
                         * release_ratio, hold between */
};

/* The signal's and the joins' parameters. Defaults (ehp_params_default) are the reference's
 * (libra-spec.md §3) except `batch` (spec §5) and `rule`: the reference's all-or-nothing rule
 * swings T_train between the core's and the whole pool's and flips every few steps. */
struct ehp_params {
    enum ehp_rule rule;    /* EHP_RULE_BALANCE */
    double min_gain_frac;  /* balance: the predicted step must shrink by this share for the
                            * target to move off what is held (0.05, assumed) */
    double pressure_guard; /* pressure at or above which no hybrid trains (0.80) */
    double borrow_ratio;   /* T_train / T_rollout at or above which every hybrid that rollout
                            * can spare trains (1.15) */
    double release_ratio;  /* T_train / T_rollout at or below which none does (0.90); in
                            * between the signal holds (hysteresis) */
    int signal_ttl_steps;  /* steps a signal lives (20) */
    double join_timeout_s; /* a join not ACTIVATING this long after its request fails (180) */
    enum ehp_batch batch;  /* EHP_BATCH_FIXED */
};

void ehp_params_default(struct ehp_params *p);

/* What the pool is made of. Borrowed for the duration of ehp_pool_new. */
struct ehp_pool_config {
    int gpus;               /* GPU ids are 0 .. gpus − 1 */
    int gpus_per_node;      /* GPU g sits in node g / gpus_per_node */
    int replica_gpus;       /* GPUs of one training replica (ehp_lend.replica_gpus), >= 1 */
    int core_replicas;      /* the core's DP replicas, >= 1 */
    const int *core_gpu;    /* their core_replicas · replica_gpus GPU ids */
    int hybrid_replicas;    /* >= 0 */
    const int *hybrid_gpu;  /* hybrid_replicas · replica_gpus GPU ids, replica h at
                             * [h · replica_gpus, (h + 1) · replica_gpus), each in one node;
                             * every GPU not listed here or in core_gpu is core rollout */
    int batch_trajectories; /* B, trajectories per step, >= core_replicas */
    int min_rollout_gpus;   /* rollout GPUs never lent (plan.min_rollout_gpus), >= 0 */
    struct ehp_params params;
    struct ehp_times times;                 /* from ehp_lend_layout */
    struct cost_lifecycle_params lifecycle; /* the weight-update group rebuild */
};

/* A join's handle: the replica and the generation the join was requested at. */
struct ehp_handle {
    int replica;
    uint64_t generation;
};

/* A hybrid replica's state (read-only for callers). */
struct ehp_hybrid {
    enum ehp_join join;         /* EHP_JOIN_NONE .. EHP_JOIN_ACTIVE */
    uint64_t generation;        /* bumped at every request and every reversal */
    bool leaving;               /* ACTIVE and released: goes back at the end of the open step */
    double requested_s;         /* when the current join was requested */
    double deadline_s;          /* fails unless ACTIVATING by then; INFINITY when not joining */
    int fetched;                /* members that hold their shard */
    int64_t fetch_version;      /* the version they hold, -1 before the first */
    double rollout_ready_s;     /* its engine serves rollout again from then on */
    uint64_t ended_generation;  /* the last join that ended, and how (CANCELLED, FAILED, or */
    enum ehp_join ended;        /* ACTIVE for one that trained and was released) */
    bool lost;                  /* a member failed: out of the pool for good (never joined) */
    const int *gpu;             /* its replica_gpus GPU ids */
    const bool *member_fetched; /* per member: holds its shard */
};

/* Per hybrid replica in a step. */
enum ehp_member {
    EHP_MEMBER_OUT,         /* not in the elastic domain */
    EHP_MEMBER_PLACEHOLDER, /* joining: sends zero gradients, trains nothing, waited for by
                             * no one */
    EHP_MEMBER_ACTIVE,      /* trains its share */
};

/* A step's frozen membership (set at EHP_EV_STEP_BEGIN) and its outcome. */
struct ehp_step {
    bool open;
    int64_t step;
    int64_t version; /* the core's state version the step starts from */
    double begin_s;
    uint64_t epoch; /* membership epoch: bumped when the members differ from the
                     * previous step's; payloads match on (step, version, epoch) */
    int active;     /* hybrid replicas that train in it */
    int placeholders;
    int batch_trajectories; /* B, or B + active · B / core_replicas (EHP_BATCH_GROW) */
    const uint8_t *member;  /* per hybrid replica: enum ehp_member */
    const int *share;       /* per replica, the core's then the hybrids': trajectories it
                             * trains; 0 for hybrids not active */
    /* outcome, filled while the step runs */
    const bool *lost; /* per hybrid replica: active, rolled back mid-step */
    int lost_count;
};

/* What the signal sees, per plan. */
struct ehp_signal_input {
    double train_s;         /* T_train of the plan, > 0 */
    double rollout_s;       /* T_rollout, > 0 (ehp_pool_signal also takes 0: none seen) */
    double queue_pressure;  /* waiting turns ÷ Σ per-instance queue caps, >= 0 */
    double active_pressure; /* running trajectories ÷ the concurrency limit, >= 0 */
    int want_train_gpus;    /* training GPUs the plan wants beyond the core, >= 0 */
    int train_replicas;     /* replicas that trained the step observed (core and active
                             * hybrids); 0: not known (the balance rule falls back) */
    int rollout_gpus;       /* GPUs in rollout now (the hybrids joining or training out of
                             * it), >= 0; 0: not known */
};

/* Which rule of the signal decided. */
enum ehp_signal_why {
    EHP_SIGNAL_GUARD,   /* pressure >= pressure_guard: protect rollout, none trains */
    EHP_SIGNAL_PLAN,    /* the plan wants that many training GPUs */
    EHP_SIGNAL_BORROW,  /* ratio >= borrow_ratio: every replica rollout can spare */
    EHP_SIGNAL_RELEASE, /* ratio <= release_ratio: none */
    EHP_SIGNAL_HOLD,    /* in between: as many as are training or joining now */
    EHP_SIGNAL_BALANCE, /* the balance rule moved the target off what is held */
};

/* The rule's name: "guard", "plan", "borrow", "release", "hold", "balance". */
const char *ehp_signal_why_name(enum ehp_signal_why why);

struct ehp_signal {
    bool live;
    int target; /* hybrid replicas that should train, 0 .. capacity */
    enum ehp_signal_why why;
    int capacity;         /* replicas rollout can spare: (core rollout + hybrid GPUs − min rollout
                           * GPUs) / replica GPUs, at most the hybrid replicas not lost */
    double ratio;         /* T_train / T_rollout */
    double pressure;      /* max(queue, active-rollout pressure) */
    int64_t issued_step;  /* the last step begun when issued (-1 before the first) */
    int64_t expires_step; /* live while the last step begun is below it */
};

/*
 * The signal rule alone: the pressure guard, the plan's want (ceil(want_train_gpus /
 * replica_gpus), at most capacity), then p->rule — balance (EHP_SIGNAL_BALANCE when it moves,
 * else HOLD) given the core's core_replicas, or the reference's borrow all, release all, else
 * hold — where `holding` is the replicas training or joining now (at most capacity). Fills out
 * as live, issued at `step`. Returns 0, or LIBRA_EINVAL when an input is out of range (out
 * untouched).
 */
int ehp_signal_decide(const struct ehp_params *p, const struct ehp_signal_input *in, int capacity,
                      int replica_gpus, int core_replicas, int holding, int64_t step,
                      struct ehp_signal *out);

/* What a decision record says. */
enum ehp_decision_kind {
    EHP_DEC_JOIN,       /* a join was requested: stop the replica's engine (abort its turns),
                         * start trainers; expect_s, deadline_s */
    EHP_DEC_FETCH,      /* trainers up: fetch the state at `version`; expect_s */
    EHP_DEC_ZERO_SYNC,  /* every member holds `version`: enter the elastic domain; expect_s */
    EHP_DEC_ACTIVATING, /* in lockstep: trains from the next step start */
    EHP_DEC_ACTIVE,     /* at a step start: trains from this step */
    EHP_DEC_CANCELLED,  /* a release reversed a join before ACTIVE: back to rollout */
    EHP_DEC_FAILED,     /* rolled back (why): back to rollout */
    EHP_DEC_RELEASE,    /* an active replica was released: leaves at the end of the open step */
    EHP_DEC_RETURNED,   /* a released replica left training: back to rollout */
    EHP_DEC_DROPPED,    /* an event that does not fit the state was ignored (why) */
    EHP_DEC_STEP,       /* a step began: membership frozen (step, version, active) */
    EHP_DEC_STEP_END,   /* a step ended (active, lost, trajectories) */
    EHP_DEC_SIGNAL,     /* a signal was issued (target) */
    EHP_DEC_SIGNAL_EXPIRED,
    EHP_DEC_LOST, /* a member failed (member): the replica leaves the pool for good, after the
                   * FAILED of its join if it had one */
};

enum ehp_why {
    EHP_WHY_NONE,
    EHP_WHY_MEMBER_FAILED, /* a member failed (member) */
    EHP_WHY_TIMEOUT,       /* not ACTIVATING by the deadline */
    EHP_WHY_VERSION,       /* members fetched different versions */
    EHP_WHY_OUT_OF_STEP,   /* synced to a version other than the core's */
    EHP_WHY_STALE,         /* the event's generation is not the replica's */
    EHP_WHY_PHASE,         /* the event does not belong to the join's phase */
};

struct ehp_decision {
    enum ehp_decision_kind kind;
    enum ehp_why why;
    double at_s;
    int replica;            /* -1 for step and signal records */
    int member;             /* the member concerned, -1 when none */
    uint64_t generation;    /* of the join concerned */
    int64_t step;           /* the last step begun */
    int64_t version;        /* FETCH, ZERO_SYNC: the state's; STEP: the step's; STEP_END: after */
    double expect_s;        /* how long the action it starts takes (cost model); 0 when none */
    double deadline_s;      /* JOIN: the join's deadline */
    double group_rebuild_s; /* the rollout fleet changed: its weight-update group (trainer rank
                             * 0 + rollout GPUs) is rebuilt in this long; 0 otherwise */
    int rollout_gpus;       /* rollout GPUs after the decision (core rollout + lent hybrids) */
    int active;             /* STEP, STEP_END: active hybrids; SIGNAL: the target */
    int lost;               /* STEP_END: active hybrids whose payload never arrived */
    int trajectories;       /* STEP: the step's batch; STEP_END: trained (lost shares out) */
};

typedef VEC(struct ehp_decision) ehp_decision_vec;

/* What the caller reports. */
enum ehp_event_kind {
    EHP_EV_TICK,          /* time passes (deadlines) */
    EHP_EV_STEP_BEGIN,    /* the core starts step `step` (> every earlier) from `version` */
    EHP_EV_STEP_END,      /* the core stepped its optimizer: the version is now one more */
    EHP_EV_STARTED,       /* replica, generation: engine stopped, trainers up on every member */
    EHP_EV_FETCHED,       /* replica, member, generation, version: the member holds its shard */
    EHP_EV_SYNCED,        /* replica, generation, version: in lockstep at that version */
    EHP_EV_MEMBER_FAILED, /* replica, member, generation: a member failed (of a join, an
                           * active replica or one serving rollout): the replica is lost */
};

struct ehp_event {
    enum ehp_event_kind kind;
    double now_s;
    int replica; /* 0 .. hybrid_replicas − 1 */
    int member;  /* 0 .. replica_gpus − 1 */
    uint64_t generation;
    int64_t step;
    int64_t version;
};

struct ehp_pool;

/*
 * Creates a pool from c at time 0: every hybrid replica serving rollout, no step open, no
 * signal, the state version 0. Returns 0 and sets *out, or LIBRA_EINVAL (err says why, *out
 * NULL) when c is inconsistent: a size out of range, a GPU id out of range or listed twice, a
 * hybrid replica spanning nodes, a parameter out of range. Free with ehp_pool_free.
 */
int ehp_pool_new(const struct ehp_pool_config *c, struct ehp_pool **out, struct libra_error *err);

/* Frees p; NULL is fine. */
void ehp_pool_free(struct ehp_pool *p);

/*
 * Applies event ev and appends its decisions to out. Returns 0, or LIBRA_EINVAL when ev is
 * malformed (see the top of this file): a kind, replica or member out of range, STEP_BEGIN
 * while a step is open or not after the last one, STEP_END with none open.
 */
int ehp_pool_event(struct ehp_pool *p, const struct ehp_event *ev, ehp_decision_vec *out);

/*
 * Requests that hybrid replica `replica` join training at now_s: REQUESTED, deadline now_s +
 * join_timeout_s, its engine to stop (EHP_DEC_JOIN). Sets *h. Returns 0, or LIBRA_EINVAL when
 * the replica is out of range, not serving rollout, or lost.
 */
int ehp_pool_join(struct ehp_pool *p, double now_s, int replica, struct ehp_handle *h,
                  ehp_decision_vec *out);

/*
 * Releases hybrid replica `replica` at now_s: a join before ACTIVE is cancelled and rolled
 * back at once; an ACTIVE replica leaves at the end of the open step, or at once between
 * steps. Returns 0, or LIBRA_EINVAL when it is out of range, serving rollout, or already
 * leaving.
 */
int ehp_pool_release(struct ehp_pool *p, double now_s, int replica, ehp_decision_vec *out);

/* Where the join of handle h is: its phase while it is the replica's current join, how it
 * ended when it was the last to end, else EHP_JOIN_FAILED (stale). */
enum ehp_join ehp_pool_join_state(const struct ehp_pool *p, struct ehp_handle h);

/*
 * Issues the signal for in at now_s (ehp_signal_decide over the pool's capacity), replacing
 * any earlier one. in->rollout_s 0 — no rollout work was seen (the end of a run) — issues
 * nothing and leaves the earlier signal as it is: there is nothing to weigh T_train against.
 * Returns 0, or LIBRA_EINVAL as ehp_signal_decide (a T_rollout below 0 included).
 */
int ehp_pool_signal(struct ehp_pool *p, double now_s, const struct ehp_signal_input *in,
                    ehp_decision_vec *out);

/*
 * Moves the pool toward the live signal's target (none training when no signal is live): joins
 * the lowest-numbered replicas serving rollout and not lost, or cancels the highest-numbered joins
 * and then releases the highest-numbered active replicas not yet leaving. Call it between steps so
 * that releases take effect at once. Returns 0, or LIBRA_EINVAL on a time before the clock.
 */
int ehp_pool_steer(struct ehp_pool *p, double now_s, ehp_decision_vec *out);

/* One move toward the signal: the replica, and whether it joins (else it is released). */
struct ehp_move {
    int replica;
    bool join;
};

/*
 * The moves ehp_pool_steer makes now, in its order, without making them: for a caller that
 * carries them out through a handshake (the gateway: a join is a reclaim, a release a lend the
 * trainer confirms). leaving (NULL: none) marks replicas the caller has already asked to leave:
 * they count as not held and are never picked. Writes at most hybrid_replicas moves to out;
 * returns their count.
 */
int ehp_pool_moves(const struct ehp_pool *p, const bool *leaving, struct ehp_move *out);

/* Read access; gpu and replica must be in range. Pointers stay valid until the pool is
 * freed, and what they point to changes with it. */
enum ehp_role ehp_pool_role(const struct ehp_pool *p, int gpu);
int ehp_pool_role_gpus(const struct ehp_pool *p, enum ehp_role r); /* GPUs in role r now */
const struct ehp_hybrid *ehp_pool_hybrid(const struct ehp_pool *p, int replica);
const struct ehp_step *ehp_pool_step(const struct ehp_pool *p); /* the open or last step */
const struct ehp_signal *ehp_pool_signal_now(const struct ehp_pool *p);
int64_t ehp_pool_version(const struct ehp_pool *p); /* the core's state version */

#endif
