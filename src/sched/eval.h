/*
 * The prequential evaluator: how well a router would have placed the turns of recorded
 * trajectories (`libra route eval`, docs/routing.md "Evaluation").
 *
 * Why a module of its own: a routing policy is judged by replaying what happened through the
 * same router calls the simulator and the gateway make, and a gateway that records its
 * trajectories should be able to score its router the same way, so the evaluation cannot live
 * in a command. It is pure: the caller reads a trace (sched/ may not include trace/), converts
 * each record into the plain structs below (observations through the functions the gateway
 * classifies with, sched/obs.h), and gets metrics back.
 *
 * Evaluation is prequential, so no policy is scored on what it has already learnt from: steps
 * 1..K only train; while step s > K is evaluated the model holds every trajectory of earlier
 * steps (rebuilt every sched.rebuild_interval steps by sched_router_tick) and none of step s,
 * and step s is learnt once all of it is scored. Every turn is routed against a registry of
 * idle instances (one per bucket and TP size), so the numbers are the policies' bucket choices
 * before any capacity fallback; what depends on load or time is the simulator's to measure.
 * The placebo check (sched_eval_shuffle) exchanges tool returns among trajectories at the same
 * turn depth: what C-MLFQ then learns is what turn counts alone carry.
 *
 * Leave-tasks-out cross-validation (sched_eval_arm_run_folds) splits the prompts, not the
 * trajectories, into K folds: for each fold a fresh router learns every trajectory of the other
 * folds, then routes the fold's own in attempt order (step, then sample), learning each as soon
 * as it is scored, so an attempt sees the earlier attempts at its task and nothing later.
 *
 * With a decision cost model (sched/cost.h) every decision is also charged its regret: the
 * trajectory's elapsed time is its own path's (each turn's tokens at its bucket's rate, moves,
 * and the turn's recorded tool time), and always-bucket-b paths are followed beside it.
 *
 * Not thread-safe per arm; arms share a trace read-only, so several run on several threads.
 */
#ifndef SCHED_EVAL_H
#define SCHED_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "sched/metrics.h"
#include "sched/obs.h"
#include "sched/router.h"
#include "spec/bucket.h"
#include "spec/config.h"
#include "util/vec.h"

/* One turn: a request and what it generated, then the tool returns that lead to the next. */
struct sched_eval_turn {
    int64_t generated_tokens; /* generated in the turn */
    int64_t context_tokens;   /* prompt tokens of its request */
    uint32_t obs;             /* index in sched_eval_trace.obs of the first return after it */
    uint32_t n_obs;           /* returns after it; 0: none (the last turn never has any) */
    double tool_s;            /* seconds its tools took (calls' queue + execution, summed) */
};

/* One trajectory. */
struct sched_eval_traj {
    int64_t step;         /* training step it was generated for */
    uint64_t prompt;      /* prompt key */
    int64_t epoch;        /* pass over the prompt pool (la_mlfq) */
    int64_t sample;       /* attempt at the prompt within its step (orders folds' replay) */
    bool censored;        /* truncated or aborted: learnt as a lower bound */
    bool seen;            /* its prompt appeared in an earlier step (sched_eval_trace_index) */
    int64_t total_tokens; /* generated tokens of all its turns */
    size_t order;         /* position in which it was added (breaks ties of step) */
    size_t turn, n_turns; /* its turns: sched_eval_trace.turns[turn, turn + n_turns) */
};

/* Trajectories in memory. A zeroed struct is an empty trace. */
struct sched_eval_trace {
    VEC(struct sched_eval_traj) trajs;
    VEC(struct sched_eval_turn) turns;
    VEC(struct sched_eval_turn)
    shuffled;                  /* turns with the returns exchanged; empty until
                                  sched_eval_shuffle */
    VEC(struct sched_obs) obs; /* every turn's returns, classified */
    VEC(size_t)
    step_start;       /* first trajectory of each distinct step in order, then trajs.n;
                         filled by sched_eval_trace_index */
    size_t n_prompts; /* distinct prompts; filled by sched_eval_trace_index */
};

/* Starts attempt sample of step at prompt; its turns follow with sched_eval_turn_add. */
void sched_eval_traj_add(struct sched_eval_trace *ev, int64_t step, uint64_t prompt, int64_t epoch,
                         int64_t sample, bool censored);

/* Appends a turn to the last trajectory added: it generated generated_tokens after a request of
 * context_tokens, then its n_obs tool returns obs (copied) arrived after tool_s seconds (0: not
 * recorded). */
void sched_eval_turn_add(struct sched_eval_trace *ev, int64_t generated_tokens,
                         int64_t context_tokens, const struct sched_obs *obs, size_t n_obs,
                         double tool_s);

/*
 * Readies ev for evaluation once every trajectory is added: orders the trajectories by step
 * (ties in the order they were added), fills step_start, marks those whose prompt appeared in
 * an earlier step as seen, and drops returns after a trajectory's last turn (no turn follows
 * them to route).
 */
void sched_eval_trace_index(struct sched_eval_trace *ev);

/* Distinct steps of an indexed trace. */
size_t sched_eval_steps(const struct sched_eval_trace *ev);

/* Distinct prompts of an indexed trace: the most folds sched_eval_arm_run_folds can fill. */
size_t sched_eval_prompts(const struct sched_eval_trace *ev);

/*
 * The placebo: fills ev->shuffled with ev->turns whose returns are exchanged among the
 * trajectories that have a return at the same turn depth (a Fisher-Yates permutation per
 * depth, keyed by seed and the depth). Token counts stay with their turns: only what a router
 * observes moves, and the multiset of returns at each depth is kept. ev must be indexed.
 */
void sched_eval_shuffle(struct sched_eval_trace *ev, uint64_t seed);

/* Frees what ev holds and leaves it empty. */
void sched_eval_trace_free(struct sched_eval_trace *ev);

/*
 * Teaches m trajectories [from, to) of ev in order, as the evaluator does once their step is
 * scored: each with the states of its returns (from turns: ev->turns, or ev->shuffled; NULL
 * reads ev->turns; depth_only: states ignore the returns), the tokens generated before each,
 * censored or not; trajectory i as learnt at base + i, the order rebuilds keep. A gateway that
 * learns what it routed at the end of each step calls this too, so that a replay of its
 * capture learns the same. Returns 0, or the first error of sched_model_insert.
 */
int sched_eval_learn(struct sched_model *m, const struct sched_eval_trace *ev,
                     const struct sched_eval_turn *turns, size_t from, size_t to, double base,
                     bool depth_only);

/* One router evaluated over a trace (an "arm"), with the metrics it earned. */
struct sched_eval_arm {
    char name[32];                    /* the name reports give it */
    enum sched_policy policy;         /* its router's policy */
    bool shuffled;                    /* routes and learns on ev->shuffled */
    bool depth_only;                  /* its states ignore the returns (turn counts) */
    struct spec_bucket_layout layout; /* the buckets it routes over */
    struct sched_router *router;      /* owns its model */
    struct spec_sched_config sc;      /* what it was built from (folds rebuild it) */
    struct sched_router_options opt;
    struct sched_costs costs;               /* decode_s NULL: none */
    struct sched_metrics *metrics;          /* its decisions, scored */
    uint64_t reasons[SCHED_REASON_ANY + 1]; /* tool-return decisions by reason */
    /* Called with every decision scored, when set: the trajectory's position in the order it
     * was added (its line in a trace), the turn the decision routes (0: the first). */
    void (*on_decision)(void *ctx, const struct sched_eval_arm *a, size_t order, size_t turn,
                        const struct sched_decision *d);
    void *decision_ctx;
};

/*
 * Sets up arm a named name: a router from sc (sched_router_from_config_opts: sc->policy with
 * sc's shrink_visits and rebuild_interval, opt on top) over layout, with the costs of the
 * experiment's fleet (costs; NULL: moves are free, no regret is scored, cmlfq_h is refused),
 * and empty metrics. shuffled: it routes and learns on the shuffled returns. Returns 0, or
 * LIBRA_EINVAL with err (a is then safe to free).
 */
int sched_eval_arm_init(struct sched_eval_arm *a, const char *name,
                        const struct spec_sched_config *sc, const struct spec_bucket_layout *layout,
                        const struct sched_router_options *opt, const struct sched_costs *costs,
                        bool shuffled, struct libra_error *err);

/* Frees what a holds; a zeroed arm is fine. */
void sched_eval_arm_free(struct sched_eval_arm *a);

/*
 * Runs arm a's prequential pass over the indexed trace ev: for each step in order, unless it is
 * one of the first train_steps, replays each trajectory's turns through the router (start,
 * turn done, tool return, finish) and scores every decision into a->metrics (the true bucket:
 * the trajectory's remaining generated tokens); then teaches the model every trajectory of the
 * step; then ticks the router (a rebuild every sched.rebuild_interval steps). on_step (may be
 * NULL) is called with ctx after each step. la_mlfq's finished trajectories pass their bucket
 * on to their prompt's next ones at once (as if every scout finished within la_mlfq's wait).
 * Returns 0, or the first negative LIBRA_E* a router or model call returned.
 */
int sched_eval_arm_run(struct sched_eval_arm *a, const struct sched_eval_trace *ev,
                       int64_t train_steps, void (*on_step)(void *ctx), void *ctx);

/*
 * Runs arm a's leave-tasks-out cross-validation over the indexed trace ev in folds folds (>= 2;
 * prompt p's fold is the rank of its first appearance modulo folds), as the header describes;
 * the metrics sum over the folds. on_step is called after each fold. Returns as
 * sched_eval_arm_run.
 */
int sched_eval_arm_run_folds(struct sched_eval_arm *a, const struct sched_eval_trace *ev, int folds,
                             void (*on_step)(void *ctx), void *ctx);

#endif
