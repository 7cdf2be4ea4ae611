/*
 * The planner's search state, shared by the search (search.c) and the result builder
 * (place.c). Not for use outside plan/.
 */
#ifndef PLAN_SEARCH_H
#define PLAN_SEARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "cost/shape.h"
#include "plan/plan.h"
#include "plan/roll.h"
#include "plan/train.h"

/* One training/rollout split of the cluster. */
struct plan_split {
    int n_train, n_roll;
    int cap[PLAN_NTP]; /* rollout GPUs usable by instances of size >= 2^t (nested packing) */
    bool whole_nodes;  /* every node with rollout GPUs gives all of its GPUs to rollout */
    size_t n_layouts;  /* each array below has n_layouts entries */
    struct plan_train_layout *layouts; /* tie-break order */
    enum plan_why *lwhy;               /* PLAN_WHY_NONE: feasible */
    double *lbound;                    /* plan_train_lb of feasible ones */
    double *exact;                     /* plan_train_time, NAN until known */
    double lb_train, lb_roll, lb;
    double train_s;      /* async: its least train side, T_train plus the trainer's share of the
                          * weight updates (NAN until computed), which the rollout span charges */
    double *train_order; /* async: that layout's time on each batch of an admission in finish
                          * order over its mean (plan_train_order); NULL: uniform */
    double multisets;    /* rollout multisets of this split (space) */
};

/* A scored multiset. */
struct plan_memo {
    bool used;
    int n_roll;
    int c[PLAN_NTP];
    struct plan_roll_score score;
};

struct plan_solver {
    const struct plan_problem *p;
    const struct libra_config *cfg;
    struct cost_shape sh;
    struct plan_roll roll;
    struct plan_train train;
    int N, G, B;
    bool colocated;
    int pattern[PLAN_NTP]; /* plan.tp_pattern counts; pattern_gpus 0 when free */
    int pattern_gpus;
    unsigned bucket_classes; /* bit cls: class cls uses only sizes a pinned sched.buckets serves */
    struct plan_split *splits;
    size_t n_splits;
    struct plan_memo *memo; /* open addressing by (n_roll, counts) */
    size_t memo_cap, memo_n;
    struct plan_stats stats;
    enum plan_why why_train, why_roll; /* furthest constraint a rejected candidate reached */
    unsigned long polls;
    double open_lb; /* when stopped: the least bound left unexplored */
};

/* Runs the search; fills the chosen split, layout index and counts. Returns true when a plan
 * was found (then *split, *layout and counts are set). */
bool plan_search(struct plan_solver *s, const struct plan_split **split, size_t *layout,
                 int counts[PLAN_NTP]);

/* The score of counts on split sp, computed once per (rollout GPUs, counts). */
const struct plan_roll_score *plan_memo_score(struct plan_solver *s, const struct plan_split *sp,
                                              const int c[PLAN_NTP], double z);

/* Fills the result of a found plan: times, training detail, bands, bucket layout, placement. */
void plan_build_result(struct plan_solver *s, const struct plan_split *sp, size_t layout,
                       const int counts[PLAN_NTP], struct plan_result *out);

#endif
