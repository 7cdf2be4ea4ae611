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
#include "util/intmap.h"
#include "util/list.h"

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
    struct list_node lru;     /* its place in sched_router.lru */
};

/* What an event tells a policy beyond the trajectory's state. */
struct sched_event {
    int64_t context_tokens;        /* of the next request */
    int64_t true_remaining_tokens; /* oracle; -1 unknown */
    double sibling_mean_tokens;    /* NAN unknown */
};

/* A policy's answer. */
struct sched_choice {
    int bucket; /* -1: any */
    enum sched_reason reason;
    struct sched_estimate est;
};

struct sched_router {
    struct sched_router_config cfg;
    struct sched_model *model; /* borrowed, or owned when owns_model */
    bool owns_model;           /* built by sched_router_from_config: freed with the router */
    int64_t ticks;             /* sched_router_tick calls so far */
    struct intmap live;        /* trajectory id -> struct sched_traj * */
    struct list lru;           /* live trajectories, the most recently active at the front */
    size_t path_bytes;         /* bytes of all trajectories' arrays */
    struct intmap last_bucket; /* la_mlfq: prompt -> epoch * 256 + final bucket */
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

/* The policy table, indexed by enum sched_policy. */
extern const struct sched_policy_ops sched_policies[SCHED_POLICY_COUNT];

#endif
