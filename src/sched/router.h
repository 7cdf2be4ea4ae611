/*
 * The router: which instance serves the next turn of a trajectory (C-MLFQ and its baselines).
 *
 * The simulator and the gateway call the same functions with the same observations (DESIGN.md
 * "observation parity"). The caller owns the instance registry (ids, TP sizes, buckets, load,
 * readiness) and reports four events: a trajectory starts, a turn is done, its tool returns
 * arrive, the trajectory finishes; the router answers the first and third (and, for token-quantum
 * policies, progress within a turn) with a decision record: the policy's bucket before any
 * capacity fallback, the instance chosen, and why.
 *
 * A policy picks a bucket; placement within buckets is shared (spec §4): a trajectory stays on
 * its instance while its bucket is unchanged and the instance is ready and under its cap (its
 * prefix cache is reused); otherwise the least-loaded (running + queued) ready instance of the
 * bucket that is under its cap; then the next larger bucket, the next smaller, alternating
 * outward; then the least-loaded instance overall, even above its cap — a turn is never refused.
 * An instance is at its cap when queued >= cap.
 *
 * Policies (docs/routing.md):
 *   cmlfq        start in the shortest bucket; at each tool return look the path up in the
 *                prefix trees (sched_model_estimate: the path's node, else the depth node);
 *                none: stay; move only when the node's mean and p90 map
 *                to the same bucket and it differs (promotion or demotion)
 *   load_balance least connections + sticky over all instances, bucket-agnostic
 *   length_aware bucket by the context length of the next request (5000/10000/15000 tokens)
 *   la_mlfq      start short (or where the prompt's last trajectory ended, within 5 epochs);
 *                one bucket longer per 3000 generated tokens
 *   oracle       the bucket of the true remaining tokens (the caller supplies them)
 *   plas         program-level least attained service: the bucket whose max_tokens first
 *                covers the tokens the trajectory has generated so far
 *   predictor    cmlfq's rule with the regression of sched/model.h in place of the trees
 *   cmlfq_h      C-MLFQ's successor: the bucket of least expected cost (sched/cost.h) under
 *                the leading expert's distribution of the remaining tokens — the population
 *                past the tokens attained, the prompt's earlier attempts, the trees, their mix,
 *                or a constant bucket — the leader being the expert whose choices have cost
 *                least against the router's own (policy.h); needs sched_costs.decision
 *
 * Per live trajectory the router keeps about 150 bytes plus 12 per tool return; at most
 * max_live trajectories, the least recently active evicted beyond (its events then answer
 * LIBRA_ENOENT). Not thread-safe; pure.
 */
#ifndef SCHED_ROUTER_H
#define SCHED_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "sched/cost.h"
#include "sched/model.h"
#include "sched/obs.h"
#include "spec/bucket.h"
#include "spec/policy.h"

struct spec_sched_config; /* spec/config.h */

/* One serving instance, as the caller's registry holds it. */
struct sched_instance {
    int64_t id;  /* the caller's id */
    int tp;      /* tensor-parallel size */
    int bucket;  /* index of the bucket it serves in the router's layout */
    int running; /* turns being generated on it */
    int queued;  /* turns waiting on it */
    int cap;     /* max_queue_length: at cap when queued >= cap */
    bool ready;  /* accepting work (not starting, draining or lent away) */
};

struct sched_registry {
    const struct sched_instance *inst;
    size_t n;
};

/*
 * Costs supplied by the caller (sched takes costs only through callbacks, DESIGN.md).
 *
 * Cache-aware moves: a move loses the prefix cache; it is taken only when its gain exceeds its
 * cost. Promotion (to a larger TP) is judged by latency: gain = decode_s(from) - decode_s(to)
 * of the expected remaining tokens, cost = move_s. Demotion by GPU time: gain = from_tp *
 * decode_s(from) - to_tp * decode_s(to), cost = to_tp * move_s.
 *
 * decision: what cmlfq_h minimises and `route eval` scores (sched/cost.h); cmlfq_h needs it.
 */
struct sched_costs {
    /* Seconds to generate tokens more at TP tp with context_tokens of context. */
    double (*decode_s)(void *ctx, int tp, int64_t context_tokens, double tokens);
    /* Seconds to re-prefill (or migrate) context_tokens from an instance of TP from_tp to one of
     * TP to_tp. */
    double (*move_s)(void *ctx, int from_tp, int to_tp, int64_t context_tokens);
    void *ctx;                        /* passed to both; borrowed, it must outlive the router */
    struct sched_cost_model decision; /* rate NULL: none */
};

struct sched_router_config {
    enum sched_policy policy;
    struct spec_bucket_layout layout;    /* valid (spec_bucket_validate) */
    size_t max_live;                     /* live trajectory states kept (default 1 << 20) */
    struct sched_lookup lookup;          /* cmlfq's look-up: min_visits (default 1) and
                                            shrink_visits (default SCHED_SHRINK_VISITS) */
    int64_t quantum_tokens;              /* cmlfq/predictor: promote after this many tokens of
                                            one turn without a tool return; 0 off (default) */
    int64_t la_quantum_tokens;           /* la_mlfq: tokens per level (3000) */
    int64_t la_ttl_epochs;               /* la_mlfq: a prompt's last bucket is kept this long (5) */
    int64_t length_thresholds_tokens[3]; /* length_aware: 5000, 10000, 15000 */
    struct sched_costs costs;            /* cache-aware moves when both functions are set */
    bool depth_only;       /* state keys ignore the returns: a tree of turn counts (the placebo's
                              control); the caller's sched_obs_config.depth_only, for the same */
    int rebuild_interval;  /* sched_router_tick rebuilds the model every this many ticks; 0:
                              never (default) */
    double attempt_shrink; /* cmlfq_h: pseudo-attempts of the population (sched.attempt_shrink) */
};

/* Fills c with the defaults for policy over layout. */
void sched_router_config_default(struct sched_router_config *c, enum sched_policy policy,
                                 const struct spec_bucket_layout *layout);

/* Why the policy chose its bucket. */
enum sched_reason {
    SCHED_REASON_FIRST,     /* the first turn: the policy's start bucket */
    SCHED_REASON_STAY,      /* the estimate maps to the current bucket */
    SCHED_REASON_NO_NODE,   /* no exact node with enough visits (or no estimate): stay */
    SCHED_REASON_DISAGREE,  /* mean and p90 map to different buckets: stay */
    SCHED_REASON_PROMOTE,   /* to a larger bucket */
    SCHED_REASON_DEMOTE,    /* to a smaller bucket */
    SCHED_REASON_COST_VETO, /* a move whose gain did not cover losing the cache: stay */
    SCHED_REASON_QUANTUM,   /* a turn ran past the generated-token quantum: promote */
    SCHED_REASON_ANY,       /* a bucket-agnostic policy */
};

/* How the instance was found. */
enum sched_place {
    SCHED_PLACE_STICKY,   /* the trajectory's instance, kept */
    SCHED_PLACE_BUCKET,   /* least loaded of the chosen bucket */
    SCHED_PLACE_FALLBACK, /* least loaded of another bucket, outward from the chosen one */
    SCHED_PLACE_OVERFLOW, /* every bucket full: least loaded overall, even above its cap */
};

struct sched_decision {
    uint64_t traj;
    int from_bucket;          /* the policy's bucket before this decision; -1 at the start */
    int to_bucket;            /* the policy's choice, before fallback; -1: any (load_balance) */
    int placed_bucket;        /* the bucket of the instance chosen */
    size_t instance;          /* index into the registry */
    int64_t instance_id;      /* its id */
    int64_t prev_instance_id; /* the instance of the previous turn; -1 at the start */
    enum sched_reason reason;
    enum sched_place place;
    struct sched_estimate est; /* what the policy estimated (est.found false: nothing) */
    bool status_classified;    /* a status came from text heuristics or was assumed */
};

/* A trajectory starts (its first turn is about to be sent). */
struct sched_start {
    uint64_t traj;                 /* the caller's trajectory id, unique among live ones */
    uint64_t prompt;               /* prompt key */
    int64_t epoch;                 /* pass over the prompt pool (la_mlfq's TTL) */
    int64_t prompt_tokens;         /* the first request's context */
    int64_t true_remaining_tokens; /* oracle only: the whole trajectory's tokens; else -1 */
    double now_s;                  /* orders rebuilds (sched_traj_summary.start) */
};

/* The tool returns of a turn arrived; the next turn is about to be sent. */
struct sched_return {
    uint64_t traj;
    const struct sched_obs *obs;   /* the returns, classified by sched_obs_classify */
    size_t n_obs;                  /* >= 1 */
    int64_t context_tokens;        /* the next request's context */
    int64_t true_remaining_tokens; /* oracle only; else -1 */
    double sibling_mean_tokens;    /* predictor: mean total of finished siblings, or NAN */
    double now_s; /* the caller's clock, as sched_start.now_s: cmlfq_h's elapsed time is
                     now_s - the start's (clamped at 0) */
};

enum sched_finish {
    SCHED_FINISH_COMPLETED, /* the agent answered: remaining tokens are exact */
    SCHED_FINISH_TRUNCATED, /* a turn, token or context cap: censored */
    SCHED_FINISH_ABORTED,   /* stopped by the system, or idle too long: censored */
};

struct sched_router;

/*
 * Creates a router from a config assembled by the caller (tests, benchmarks; the commands use
 * sched_router_from_config). model is borrowed (it must outlive the router; it may be shared by
 * several routers) and may be NULL only for policies that learn nothing (load_balance,
 * length_aware, la_mlfq, oracle, plas). Returns 0, or LIBRA_EINVAL with err saying which
 * setting is wrong.
 */
int sched_router_new(struct sched_router **out, const struct sched_router_config *c,
                     struct sched_model *model, struct libra_error *err);

/*
 * What a router built from the config may be told beyond it; a zeroed struct (or NULL) adds
 * nothing. For `libra route eval`'s arms (--min-visits, the placebo's depth-only control);
 * the simulator and the gateway route by the config alone.
 */
struct sched_router_options {
    uint32_t min_visits; /* cmlfq: visits a tree node needs to answer; 0: the default (1) */
    bool depth_only;     /* state keys ignore the returns (sched_router_config.depth_only) */
};

/*
 * Builds a router (and, for policies that learn, the model it owns) from the sched section of a
 * config over layout; costs may be NULL (no cache-aware moves). Returns 0 or LIBRA_EINVAL with err.
 *
 * The one way the simulator, `libra route eval` and the gateway make a router: sc->policy,
 * sc->shrink_visits and sc->rebuild_interval (for sched_router_tick) are taken from sc, every
 * other setting is sched_router_config_default's; sc->buckets is not read (the caller resolves
 * the layout: from the plan, a flag or sc->buckets). A caller routing another policy than the
 * config's (a homogeneous fleet's load_balance, route eval's arms) passes a copy of sc with
 * policy set. costs->ctx, when given, must outlive the router. Free with sched_router_free.
 */
int sched_router_from_config(struct sched_router **out, const struct spec_sched_config *sc,
                             const struct spec_bucket_layout *layout,
                             const struct sched_costs *costs, struct libra_error *err);

/* sched_router_from_config with opt (NULL: none) applied on top of the config. */
int sched_router_from_config_opts(struct sched_router **out, const struct spec_sched_config *sc,
                                  const struct spec_bucket_layout *layout,
                                  const struct sched_costs *costs,
                                  const struct sched_router_options *opt, struct libra_error *err);

/*
 * One training step (weight version) ended: rebuilds the model every sched.rebuild_interval ticks
 * (sched_router_config.rebuild_interval; the n-th tick rebuilds when n is a multiple of it), so
 * that the trees follow the policy's drift and prompt trees of old prompts go
 * (sched_model_rebuild). A no-op for a policy that learns nothing. A model shared by several
 * routers is rebuilt by each one that ticks.
 */
void sched_router_tick(struct sched_router *r);

/*
 * Sets the deadline of the decision costs (sched_costs.decision.deadline_s), which cmlfq_h
 * weighs: a caller that measures the training step as it goes (the simulator, the gateway)
 * keeps it at (rl.max_staleness + 1) steps.
 */
void sched_router_set_deadline(struct sched_router *r, double deadline_s);

/*
 * Routes over layout l from now on (spec_bucket_validate; the caller re-buckets its registry to
 * match). What the router learnt is kept where it means the same under l: the model (the trees,
 * the regression and the population answer in tokens, which l's bounds map to buckets), the
 * live trajectories (their paths, tokens and instances: stickiness holds; each one's current
 * bucket becomes l's bucket of its old bucket's max_tokens), cmlfq_h's scores of the experts
 * that estimate, and the rates. What names buckets of the old layout is dropped: cmlfq_h's
 * scores of the constant-bucket experts (they start afresh at 0) and the decisions live
 * trajectories recorded for scoring (those trajectories score nothing), and la_mlfq's memory of
 * each prompt's last bucket. Returns 0, or LIBRA_EINVAL with err, leaving r as it was.
 */
int sched_router_set_layout(struct sched_router *r, const struct spec_bucket_layout *l,
                            struct libra_error *err);

/* The model the router learns in (owned by it when built by sched_router_from_config); NULL when
 * its policy learns nothing. Valid while r lives. */
struct sched_model *sched_router_model(struct sched_router *r);

/* Whether policy p learns (needs a model). */
bool sched_policy_learns(enum sched_policy p);

/* A new model for policy p to learn in (the trees for cmlfq, the regression for predictor),
 * or NULL when p learns nothing. Free it with sched_model_free after its routers. */
struct sched_model *sched_policy_model_new(enum sched_policy p);

/* Frees r, its trajectory states and the model when it owns it (not a borrowed one); NULL is a
 * no-op. */
void sched_router_free(struct sched_router *r);

/*
 * Routes the first turn of a new trajectory. Returns 0 with *out filled; LIBRA_EINVAL when the
 * id is live already; LIBRA_ENOENT when the registry is empty.
 */
int sched_router_start(struct sched_router *r, const struct sched_registry *reg,
                       const struct sched_start *ev, struct sched_decision *out);

/* Records that the current turn generated generated_tokens. LIBRA_ENOENT: unknown trajectory. */
int sched_router_turn_done(struct sched_router *r, uint64_t traj, int64_t generated_tokens);

/* Routes the next turn after tool returns. Errors as sched_router_start (ENOENT: unknown). */
int sched_router_tool_return(struct sched_router *r, const struct sched_registry *reg,
                             const struct sched_return *ev, struct sched_decision *out);

/*
 * Reports that the current turn has generated turn_tokens so far (mid-turn). For policies
 * with a token quantum (cmlfq/predictor with quantum_tokens, la_mlfq, plas) the decision may
 * move the trajectory, which the caller carries out by aborting and resubmitting the turn
 * (token-in clients only); other policies answer a stay. Errors as sched_router_tool_return.
 */
int sched_router_progress(struct sched_router *r, const struct sched_registry *reg, uint64_t traj,
                          int64_t turn_tokens, struct sched_decision *out);

/*
 * Ends a trajectory and frees its state. With learn, it is inserted into the model (censored
 * unless completed) and la_mlfq remembers its final bucket. Returns 0 or LIBRA_ENOENT.
 */
int sched_router_finish(struct sched_router *r, uint64_t traj, enum sched_finish finish,
                        bool learn);

/* Live trajectory states. */
size_t sched_router_live(const struct sched_router *r);

/* Bytes held for live trajectories (states, paths, the index), excluding the model. */
size_t sched_router_bytes(const struct sched_router *r);

/* Names: "cmlfq", "promote", "sticky"; static storage. */
const char *sched_policy_name(enum sched_policy p);
const char *sched_reason_name(enum sched_reason r);
const char *sched_place_name(enum sched_place p);

/* Parses a policy name. Returns 0 or LIBRA_ENOENT. */
int sched_policy_parse(const char *name, enum sched_policy *out);

/* Whether the policy's choices depend only on load (no bucket: accuracy is N/A). */
bool sched_policy_bucketless(enum sched_policy p);

#endif
