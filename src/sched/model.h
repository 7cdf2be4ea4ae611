/*
 * What the router has learnt: the causal prefix trees, the baseline predictor, and the history
 * both are rebuilt from.
 *
 * A causal prefix tree (spec §4) maps the sequence of tool-return states a trajectory has seen
 * to statistics of the generated tokens still to come: one tree per prompt plus one global
 * tree. A node keeps its visit count, a running mean of the remaining tokens and the last
 * SCHED_TREE_WINDOW samples, from which its p90 is read. Trajectories enter as summaries (the
 * state ids of their tool returns and the tokens generated before each); the caller decides
 * when (the simulator at once, `route eval` after a step).
 *
 * Censoring. Trees fed only by finished trajectories are biased short: the long ones are the
 * ones cut by caps, aborts and staleness. A truncated or aborted trajectory therefore enters
 * as a censored sample at each node: its remaining tokens are a lower bound. The estimator is
 * Kaplan-Meier, computed by Efron's redistribute-to-the-right (equivalent to the product-limit
 * estimator): samples sorted ascending, each censored sample's mass passed to the samples
 * above it; past the largest exact sample the data say only "more than c", so censored
 * samples there keep their mass at their own bound. A node's running mean covers every visit,
 * so a censored sample c enters it as E[X | X > c] — under the global tree's depth node at
 * that depth (every trajectory that saw as many returns), as it stands before the trajectory
 * is learnt, and c itself when no exact sample there exceeds c. The tail a censored sample is
 * given is thus the same in every node at a depth, whatever the node's size (a node's own
 * window would give a small node a thinner tail than a large one). The raw node p90
 * (sched_model_lookup) is the Kaplan-Meier p90 of its window; C-MLFQ's estimate
 * (sched_model_estimate) gives censored samples the depth node's tail in the p90 too, and
 * shrinks thin nodes toward the more general ones (docs/routing.md "The estimator").
 * Why this estimator: it is unbiased under independent censoring, needs nothing beyond the
 * window the spec already keeps, and degrades to the plain mean and nearest-rank p90 when
 * nothing is censored.
 *
 * Look-up walks the path in the prompt's tree and in the global tree: the prompt tree's node
 * if it matches the whole path, else the global tree's, else the deeper partial match
 * (flagged inexact). The router uses sched_model_estimate, which backs off to depth nodes.
 *
 * Rebuild (every sched.rebuild_interval steps: sched_router_tick of the router that owns the
 * model) clears the trees and re-inserts the most recent <= history trajectories ordered by
 * their start. Memory is capped: prompt trees
 * are evicted least recently used first; when only the global tree is left, new nodes are not
 * created (existing ones still learn). State keys are interned to 32-bit ids (capped too; a
 * key past the cap gets SCHED_STATE_NONE, which matches no node).
 *
 * Not thread-safe; pure (no I/O, no clocks).
 */
#ifndef SCHED_MODEL_H
#define SCHED_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "util/json.h"

#define SCHED_TREE_WINDOW 200       /* samples per node kept for its p90 */
#define SCHED_STATE_NONE UINT32_MAX /* the id of a state that could not be interned */
#define SCHED_TREE_SCHEMA "libra.tree/1"
#define SCHED_SHRINK_VISITS 50 /* default shrink_visits; sched.shrink_visits in spec/config.c */

struct sched_model_config {
    size_t max_bytes;     /* cap on the memory of all trees, bytes (default 256 MiB) */
    size_t history;       /* trajectories kept for rebuilds (spec: 5000) */
    uint32_t max_states;  /* distinct state keys interned (default 65536) */
    bool learn_predictor; /* fit the baseline regression too (default true); only the
                             predictor policy reads it, and it costs a 44 x 44 update per
                             tool return learnt */
    bool learn_service;   /* keep the attained-service history too (default true); only
                             cmlfq_h reads it */
};

/* Fills c with the defaults above. */
void sched_model_config_default(struct sched_model_config *c);

/* A finished (or cut) trajectory as the trees learn it. Arrays are borrowed. */
struct sched_traj_summary {
    uint64_t prompt;           /* prompt key (a trace's prompt id, or a hash of the prompt) */
    double start;              /* orders rebuilds: start time in s, or any monotone sequence */
    bool censored;             /* truncated or aborted: remaining tokens are lower bounds */
    int64_t total_tokens;      /* generated tokens of all turns */
    size_t n;                  /* tool returns (turns with returns) */
    const uint32_t *states;    /* state id of each tool return (sched_model_state) */
    const int64_t *gen_before; /* tokens generated before each tool return, cumulative */
    const double *sibling_mean_tokens; /* per decision point (n + 1, the start first): mean
                                          total of siblings finished by then, NAN if none;
                                          NULL when the caller cannot know (predictor only) */
};

/* What a look-up found. */
struct sched_estimate {
    bool found;       /* a node with at least one visit matched (maybe partially) */
    bool exact;       /* it matched the whole path */
    bool from_prompt; /* it is in the prompt's tree (else the global tree) */
    int depth;        /* path length it matched */
    uint32_t visits;
    double mean_tokens; /* running mean of remaining generated tokens */
    double p90_tokens;  /* Kaplan-Meier p90 of the window */
    bool by_depth;      /* sched_model_estimate: the tree's depth node answered */
};

/* Prediction of the baseline regression (the `predictor` policy). */
struct sched_pred_features {
    const uint32_t *states;     /* path of state ids so far */
    size_t n;                   /* its length (the turn index) */
    int64_t generated_tokens;   /* generated so far */
    double sibling_mean_tokens; /* mean total of finished siblings, or NAN */
};

struct sched_model;

/* Creates an empty model; c NULL means the defaults. Never returns NULL. */
struct sched_model *sched_model_new(const struct sched_model_config *c);

/* Frees m and everything it owns; NULL is a no-op. */
void sched_model_free(struct sched_model *m);

/* Interns a state key, returning its id, or SCHED_STATE_NONE past max_states. */
uint32_t sched_model_state(struct sched_model *m, const char *key);

/* The key of an interned id; NULL when unknown. Valid while m lives. */
const char *sched_model_state_key(const struct sched_model *m, uint32_t id);

/*
 * Learns one trajectory: inserts it into its prompt tree and the global tree, adds it to the
 * predictor's data and to the rebuild history (which keeps the most recent `history` by start).
 * Returns 0, or LIBRA_EINVAL when s is inconsistent (gen_before decreasing or above total,
 * negative counts, an unknown state id).
 */
int sched_model_insert(struct sched_model *m, const struct sched_traj_summary *s);

/* Clears the trees and the predictor and re-learns the history in start order. */
void sched_model_rebuild(struct sched_model *m);

/* Looks the path up (see the header comment). Touches the prompt tree for LRU. */
void sched_model_lookup(struct sched_model *m, uint64_t prompt, const uint32_t *states, size_t n,
                        struct sched_estimate *out);

/*
 * C-MLFQ's look-up (docs/routing.md "Look-up"): the node on the whole path in the prompt's
 * tree, else in the global tree, counting only nodes with at least min_visits visits (0
 * counts as 1); where neither has one, the prompt's tree's depth node — every trajectory of
 * that tree that saw n returns, whatever they were —, else the global tree's. out->exact is
 * then true and out->by_depth says a depth node answered; out->found false: nothing trusted.
 * A depth-only model (every state SCHED_DEPTH_KEY) therefore answers, always, as any model
 * answers on a path it does not know: the placebo check compares like with like. The mean and
 * p90 are the node's shrunk estimate (struct sched_lookup; tree.h sched_node_estimate); a
 * global depth node is never shrunk. Touches the prompt tree for LRU.
 */
struct sched_lookup {
    uint32_t min_visits;    /* visits a node needs to answer (0 counts as 1) */
    uint32_t shrink_visits; /* k: a node's estimate weighs its own data visits / (visits + k),
                               the rest the more general node's (the global tree's on the same
                               path for a prompt tree's node, then the global depth node); 0:
                               the node's own (default SCHED_SHRINK_VISITS) */
    bool empirical_shrink;  /* a global tree's path node at depth d takes k_d, estimated from
                               how its depth's path nodes spread (docs/routing.md "Empirical
                               shrinkage"; SCHED_SHRINK_ALL where they spread no more than
                               chance), instead of shrink_visits; prompt trees keep it */
};

/* k of a node whose estimate is its global depth node's alone. */
#define SCHED_SHRINK_ALL UINT32_MAX
void sched_model_estimate(struct sched_model *m, uint64_t prompt, const uint32_t *states, size_t n,
                          const struct sched_lookup *opt, struct sched_estimate *out);

/*
 * The predictor's estimate for the features: a ridge regression of log(1 + remaining tokens)
 * on the path's status and size counts, its last state (hashed), the turn index, log tokens so
 * far and sibling progress, fitted on the tool returns of the same trajectories as the trees
 * (one homoscedastic log-normal residual). out->found is false
 * until it has seen data; mean and p90 come from the log-normal residual.
 */
void sched_model_predict(struct sched_model *m, const struct sched_pred_features *f,
                         struct sched_estimate *out);

/* What attained service and earlier attempts say (sched/service.h), learnt with every insert
 * when cfg.learn_service and left alone by rebuilds. Valid while m lives. */
struct sched_service;
const struct sched_service *sched_model_service(const struct sched_model *m);

/* Memory statistics. */
struct sched_model_stats {
    size_t trees;      /* prompt trees, the global one excluded */
    size_t nodes;      /* nodes in all trees */
    size_t tree_bytes; /* memory counted against max_bytes */
    size_t history;    /* trajectories held for rebuilds */
    size_t states;     /* interned state keys */
    size_t evictions;  /* prompt trees evicted so far */
};
void sched_model_stats(const struct sched_model *m, struct sched_model_stats *out);

/*
 * Exports the trees (not the history or the predictor) as {"schema": SCHED_TREE_SCHEMA,
 * "libra_version", "global": NODE, "prompts": [{"prompt": "HEX", "root": NODE}]} with NODE =
 * {"state": KEY (not on roots), "visits", "mean_tokens", "window": [tokens, oldest first],
 * "censored": [indices into window], "children": [NODE...]}. Returns a new reference.
 */
json_t *sched_model_to_json(const struct sched_model *m);

/*
 * Merges the trees in the JSON document at path (the export format) into m: visits add, means
 * combine weighted by visits, windows append the imported samples as the newest. Merging
 * several ranks' exports is calling this once per file. Every field is checked (types, ranges,
 * window length <= visits, depth <= 256); errors name file:line:col. Returns 0, or LIBRA_EINVAL
 * with m unchanged.
 */
int sched_model_merge_json(struct sched_model *m, const struct ujson_doc *doc, const char *path,
                           struct libra_error *err);

/* Writes v as 16 lower-case hex digits and a NUL (the prompt keys of exports). */
void sched_hex_key(uint64_t v, char out[17]);

/* Merges every tree of src into dst (as sched_model_merge_json). */
void sched_model_merge(struct sched_model *dst, const struct sched_model *src);

#endif
