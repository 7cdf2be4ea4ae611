/*
 * Internals shared by the router (router.c: trajectory state, placement, events) and the
 * policies (policy.c: one small function per policy and event). A policy only chooses a
 * bucket and says why; it never looks at instances. Not an API: use sched/router.h.
 */
#ifndef SCHED_POLICY_H
#define SCHED_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "sched/router.h"
#include "sched/service.h"
#include "util/intmap.h"
#include "util/list.h"

/*
 * cmlfq_h's experts: each names a bucket at a decision, the one of least expected cost under its
 * distribution of the remaining tokens, or sleeps when it has no data (H_FIXED + b: always
 * bucket b, never asleep). The router follows the awake expert whose choices, where it was
 * awake, would have cost least against the router's own (docs/routing.md "cmlfq_h").
 */
enum sched_h_expert {
    H_MIX,     /* the attempts, the trees and the population together */
    H_PROMPT,  /* the prompt's earlier attempts, shrunk toward the population */
    H_TREE,    /* C-MLFQ's tree estimate */
    H_SERVICE, /* the population past the tokens attained */
    H_FIXED,   /* + b: always bucket b */
};
#define SCHED_H_EXPERTS (H_FIXED + SPEC_BUCKETS_MAX)
#define H_TREE_SAMPLE 8 /* the trees, when they would not lead: 1 decision in this */

/* One cmlfq_h decision, kept until the trajectory ends to score the experts. */
struct sched_h_record {
    int64_t context_tokens;              /* of the turn it routed */
    int64_t attained;                    /* tokens generated before it */
    float start_s[SPEC_BUCKETS_MAX];     /* seconds the trajectory would have run when each bucket
                                            started the turn (sched_router's bucket_start) */
    float token_s[SPEC_BUCKETS_MAX];     /* each bucket's latency per token then */
    float gpu_token_s[SPEC_BUCKETS_MAX]; /* and its GPU-seconds per token then */
    int8_t from;                         /* the bucket before it; -1 at the start */
    int8_t chosen;                       /* the router's choice */
    uint8_t tree_weight; /* how many decisions the trees' (and the mix's) answer stands for:
                            1, H_TREE_SAMPLE when sampled, 0 when not consulted */
    int8_t bucket[SCHED_H_EXPERTS]; /* each expert's; -1 asleep */
};

/* Routing state of one live trajectory. */
struct sched_traj {
    uint64_t id;
    uint64_t prompt;
    int64_t epoch;
    double start_s;
    int bucket;               /* the policy's current bucket; -1 before the first decision */
    int64_t instance_id;      /* instance of the last turn; -1 none */
    size_t instance;          /* its registry index when last seen (a hint) */
    int64_t generated_tokens; /* in finished turns */
    int64_t turn_tokens;      /* in the current turn, from progress reports */
    int64_t quantum_mark;     /* turn_tokens at the last quantum promotion */
    uint32_t n, cap;          /* tool returns seen; capacity of the arrays */
    uint32_t *states;         /* state id of each tool return */
    int64_t *gen_before;      /* generated_tokens at each tool return */
    uint32_t n_rec, cap_rec;  /* cmlfq_h: decisions recorded, capacity */
    struct sched_h_record *rec;
    struct list_node lru; /* its place in sched_router.lru */
};

/* What an event tells a policy beyond the trajectory's state. */
struct sched_event {
    int64_t context_tokens;           /* of the next request */
    int64_t true_remaining_tokens;    /* oracle; -1 unknown */
    double sibling_mean_tokens;       /* NAN unknown */
    double now_s;                     /* the caller's clock (sched_start.now_s's) */
    const struct sched_registry *reg; /* the instances as the caller sees them now */
};

/* A policy's answer. */
struct sched_choice {
    int bucket; /* -1: any */
    enum sched_reason reason;
    struct sched_estimate est;
    bool recorded; /* cmlfq_h: h is to be kept with the trajectory */
    struct sched_h_record h;
};

struct sched_router {
    struct sched_router_config cfg;
    struct sched_model *model;       /* borrowed, or owned when owns_model */
    bool owns_model;                 /* built by sched_router_from_config: freed with the router */
    int64_t ticks;                   /* sched_router_tick calls so far */
    struct intmap live;              /* trajectory id -> struct sched_traj * */
    struct list lru;                 /* live trajectories, the most recently active at the front */
    size_t path_bytes;               /* bytes of all trajectories' arrays */
    struct intmap last_bucket;       /* la_mlfq: prompt -> epoch * 256 + final bucket */
    double h_score[SCHED_H_EXPERTS]; /* cmlfq_h: each expert's discounted cost over the
                                        router's own where it was awake, GPU-s */
    double turn_tokens_avg;          /* tokens per finished turn, a moving average */
    uint64_t h_decisions;            /* cmlfq_h's decisions so far (the trees' sampling) */
    struct sched_rate_memo rates;    /* cmlfq_h: the decision costs' rates */
};

/* One policy: a choice at the start, after tool returns, and on progress within a turn. */
struct sched_policy_ops {
    bool learns; /* needs the model */
    void (*start)(struct sched_router *r, const struct sched_traj *t, const struct sched_event *ev,
                  struct sched_choice *c);
    void (*tool_return)(struct sched_router *r, const struct sched_traj *t,
                        const struct sched_event *ev, struct sched_choice *c);
    /* NULL: progress never moves. */
    void (*progress)(struct sched_router *r, const struct sched_traj *t, struct sched_choice *c);
};

/* cmlfq_h: scores the experts on a trajectory that ended with total tokens (policy.c). */
void sched_h_score(struct sched_router *r, const struct sched_traj *t, int64_t total);

/* The policy table, indexed by enum sched_policy. */
extern const struct sched_policy_ops sched_policies[SCHED_POLICY_COUNT];

#endif
