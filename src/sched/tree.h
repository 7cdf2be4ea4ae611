/*
 * Internals of the prefix trees shared by model.c (learning, look-up, caps) and tree_json.c
 * (export, import, merge). Not an API: other modules use sched/model.h.
 *
 * Memory: a node is 56 bytes plus its window, 8 bytes per sample (the ring and its sorted
 * copy, grown geometrically to at most SCHED_TREE_WINDOW), plus 24 to 48 bytes of edge index,
 * so a full node stays under 1.7 KiB. Nodes of one tree live in one array and link by index
 * (first child, next sibling): no per-node allocation, and a tree is freed in a few calls.
 * Finding a child goes through a hashed edge index rather than the sibling list: the global
 * tree's nodes have dozens of children scattered over megabytes, and a look-up that misses
 * would otherwise touch them all.
 */
#ifndef SCHED_TREE_H
#define SCHED_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/model.h"
#include "sched/pred.h"
#include "sched/service.h"
#include "util/heap.h"
#include "util/intmap.h"
#include "util/list.h"
#include "util/map.h"
#include "util/vec.h"

#define SCHED_SAMPLE_CENSORED 0x80000000u /* window entry flag: a lower bound */
#define SCHED_SAMPLE_MAX 0x7fffffffu      /* largest sample, tokens */

struct sched_node {
    uint32_t state;        /* id of the state on the edge into this node; unused on roots */
    uint32_t first_child;  /* node index, 0 for none (the root is 0, never a child) */
    uint32_t next_sibling; /* node index, 0 for none */
    uint32_t visits;
    double mean_tokens;  /* running mean of remaining tokens (censored samples imputed) */
    uint32_t *window;    /* win_cap entries: ring of samples | SCHED_SAMPLE_CENSORED, oldest
                          * at head; then win_cap more: the same samples in ascending order */
    uint8_t win_n;       /* samples held */
    uint8_t win_head;    /* index of the oldest once full */
    uint8_t win_cap;     /* allocated entries */
    bool p90_stale : 1;  /* window changed since p90_tokens was computed */
    bool mix_stale : 1;  /* window changed since mix_p90_tokens was computed */
    uint32_t p90_tokens; /* cached Kaplan-Meier p90 */
    /* sched_node_estimate's p90, valid while !mix_stale and the parent and reference nodes
     * (by their visits) and shrink_visits are those it used */
    uint32_t mix_p90_tokens;
    uint32_t mix_ref_visits;
    uint32_t mix_parent_visits; /* 0 without a parent */
    uint32_t mix_shrink_visits;
};

/* One slot of a tree's edge index: (parent, state) -> child; child 0 marks an empty slot. */
struct sched_edge {
    uint32_t parent, state, child;
};

struct sched_tree {
    uint64_t prompt;              /* the prompt key; unused for the global tree */
    VEC(struct sched_node) nodes; /* nodes[0] is the root */
    struct sched_edge *edges;     /* open addressing, load <= 1/2; NULL before a child */
    size_t edge_slots;            /* a power of two, or 0 */
    size_t bytes;                 /* memory counted against the cap */
    struct list_node lru;         /* a prompt tree's place in sched_model.lru (not the global) */
};

/* The prompt tree whose LRU node n is; NULL when n is NULL (past either end). */
static inline struct sched_tree *sched_tree_of(struct list_node *n)
{
    return n ? list_entry(n, struct sched_tree, lru) : NULL;
}

/* Per interned state: its key and the counts the predictor uses. */
struct sched_state_info {
    char *key;
    uint8_t status_count[4]; /* returns by enum sched_status */
    uint8_t size_count[3];   /* returns by enum sched_size */
};

/* A node's Kaplan-Meier distribution: its window sorted, each sample's mass, the mass from
 * each sample on. The model keeps the global depth nodes' (sched_model_depth_km). */
struct sched_km {
    unsigned k, last_exact; /* samples; one past the largest exact one */
    uint32_t s[SCHED_TREE_WINDOW];
    double mass[SCHED_TREE_WINDOW];
    double above[SCHED_TREE_WINDOW + 1]; /* above[i]: mass of s[i..k) */
};

/*
 * How the global tree's path nodes at one depth spread about each other: the sums the
 * empirical k comes from (model.c empirical_k). Each learnt sample of a path node at the depth
 * counts once, with the value its node's running mean took (a censored one imputed).
 */
struct sched_depth_spread {
    double samples;   /* n */
    double sum;       /* of the values */
    double sum_sq;    /* of their squares */
    double node_sq;   /* over the path nodes: visits x mean^2 */
    double visits_sq; /* over the path nodes: visits^2 */
    double nodes;     /* path nodes with a visit */
};

/* A cached struct sched_km of the global tree's depth node at one depth. */
struct sched_depth_km {
    uint64_t version; /* the model's version it was computed at; 0: never, or stale since */
    struct sched_km km;
};

struct sched_model {
    struct sched_model_config cfg;
    struct sched_tree global;
    struct intmap prompts; /* prompt key -> struct sched_tree * */
    struct list lru;       /* prompt trees, the most recently used at the front */
    size_t bytes;          /* all trees' bytes */
    size_t evictions;
    struct map state_ids;                /* key -> id */
    VEC(struct sched_state_info) states; /* by id */
    struct heap history;                 /* struct sched_hist, earliest start on top */
    uint64_t history_seq;                /* ties of start broken by insertion order */
    struct sched_pred pred;
    struct sched_service service; /* attained service and attempts (cmlfq_h) */
    uint32_t depth_state;         /* id of SCHED_DEPTH_KEY: the depth path's edges */
    uint64_t version;             /* bumped whenever the whole global tree may change (a
                                     clear, a merge); learning a trajectory instead marks stale
                                     the depth_km of the depths it reaches */
    /* per depth: the global depth node's Kaplan-Meier distribution at version */
    VEC(struct sched_depth_km) depth_km;
    /* per depth: the spread of the global tree's path nodes, counted as they learn; since a
     * merge the sums no longer describe the trees (false), until the next clear */
    VEC(struct sched_depth_spread) spread;
    bool spread_known;
};

/* A trajectory kept for rebuilds: the summary with its arrays owned. */
struct sched_hist {
    double start;
    uint64_t seq;
    struct sched_traj_summary *s; /* owned; arrays in the same allocation */
};

/* Initialises an empty tree holding just a root; returns the bytes it uses. */
size_t sched_tree_init(struct sched_tree *t, uint64_t prompt);

/* Frees a tree's storage. */
void sched_tree_free(struct sched_tree *t);

/* The child of node along state, or 0. */
uint32_t sched_tree_child(const struct sched_tree *t, uint32_t node, uint32_t state);

/* Adds a child of node along state (not present yet); returns its index. Updates t->bytes. */
uint32_t sched_tree_add_child(struct sched_tree *t, uint32_t node, uint32_t state);

/* Bytes a new child would add to t (the node array may have to grow). */
size_t sched_tree_child_cost(const struct sched_tree *t);

/*
 * Adds one sample (tokens, censored) to node: visits, running mean (a censored sample enters
 * it as imputed, the caller's E[X | X > tokens]) and the window, which grows only when grow_ok
 * (the memory cap). Updates t->bytes.
 */
void sched_node_add(struct sched_tree *t, uint32_t node, uint32_t tokens, bool censored,
                    double imputed, bool grow_ok);

/* E[X | X > c] under the Kaplan-Meier distribution of n's window; c when no exact sample lies
 * above c (the data then say nothing beyond the bound). */
double sched_node_mean_above(const struct sched_node *n, uint32_t c);

/* Bytes node's window would add if it grew now (0 when it need not grow). */
size_t sched_node_grow_cost(const struct sched_node *n);

/* The node's Kaplan-Meier p90 (cached). */
uint32_t sched_node_p90(struct sched_node *n);

/* Fills km with n's Kaplan-Meier distribution. */
void sched_km_of(const struct sched_node *n, struct sched_km *km);

/*
 * C-MLFQ's estimate of node n at depth d (docs/routing.md "Censoring and the estimator"). ref
 * is the global tree's depth node at d and ref_km its distribution (sched_km_of); parent, for a
 * node of a prompt tree, the global tree's node on the same path (else NULL). n's
 * distribution: each exact sample of its window weighs 1 / win_n, each censored sample c
 * spreads its weight over ref's distribution above c (or keeps it at c when no exact sample of
 * ref lies above c). With shrink_visits k > 0 it is mixed with parent's (by the same rule) and
 * ref's: n weighs visits / (visits + k), parent that share of the rest, ref what is left (all
 * of it when k is SCHED_SHRINK_ALL); the mean is the same mix of running means. n == ref or ref
 * NULL: n's own running mean and Kaplan-Meier p90. The p90 is cached on n.
 */
void sched_node_estimate(struct sched_node *n, struct sched_node *parent,
                         const struct sched_node *ref, const struct sched_km *ref_km,
                         uint32_t shrink_visits, double *mean, uint32_t *p90);

/* Appends a sample to the window only (no visit, no mean), growing it when grow_ok. */
void sched_node_window_push(struct sched_tree *t, uint32_t node, uint32_t sample, bool grow_ok);

/* The i-th oldest window entry of n (i < win_n), flag included. */
uint32_t sched_node_window_at(const struct sched_node *n, unsigned i);

/* The prompt tree of key, created (and counted) when create and absent; NULL otherwise. */
struct sched_tree *sched_model_prompt_tree(struct sched_model *m, uint64_t prompt, bool create);

/* Makes room for need bytes by evicting prompt trees other than keep, LRU first. Returns
 * whether bytes + need fits the cap afterwards. */
bool sched_model_reserve(struct sched_model *m, size_t need, const struct sched_tree *keep);

#endif
