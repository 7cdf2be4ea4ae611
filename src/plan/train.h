/*
 * The planner's training side: which layouts of n GPUs exist, which are feasible, a cheap
 * admissible lower bound on their step time, and the exact step time (cost/train.h averaged
 * over the whole batches of the length sample).
 *
 * The exact time needs cost_train_deal, O(B log DP) per batch; its result depends only on
 * (DP, micro-batch tokens), so it is cached and shared by every (TP, PP, CP) with the same DP.
 * The lower bound costs two cost_train_step_time calls per batch on a load built from the
 * batch's totals (docs/planner.md proves it never exceeds the exact time).
 */
#ifndef PLAN_TRAIN_H
#define PLAN_TRAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "cost/shape.h"
#include "cost/train.h"
#include "plan/plan.h"
#include "util/intmap.h"
#include "util/vec.h"

/* Expert parallel sizes searched for MoE models: 1, 2, 4, ..., 64 */
#define PLAN_EPS 7

/* TP × PP × CP × EP, and CP alone for FSDP and for HSDP (TP = PP = 1), × budget × recompute */
#define PLAN_LAYOUTS_MAX ((4 * 4 * 3 * PLAN_EPS + 3 + 3) * PLAN_BUDGETS * 2)

/* The micro-batch token budgets searched, per GPU, ascending. */
extern const int plan_budgets[PLAN_BUDGETS];

/* Dealings kept by DP (plan_train.ranks): the search asks for one DP's few micro-batch budgets
 * close together, and the dealing does not depend on the budget. */
#define PLAN_RANKS_KEPT 8

/* Each batch's DP ranks for one DP (cost_train_assign), batches × batch entries. */
struct plan_ranks {
    int dp;
    uint32_t *rank; /* NULL: an unused slot */
};

/* Loads of every batch for one (DP, micro-batch tokens). */
struct plan_deal {
    int status; /* 0, or the cost_train_deal error */
    struct cost_train_load *load;
};

struct plan_train {
    const struct cost_shape *sh;
    const struct spec_hardware *hw;
    const struct plan_settings *st;
    int gpn, batch, samples, cp_min_seq_tokens;
    bool group_integrity, ehp;
    bool recompute; /* layouts with full activation recompute are in the space */
    bool fsdp;      /* FSDP layouts (TP and PP 1) are in the space */
    bool fallback_recompute, fallback_fsdp; /* plan.recompute, plan.fsdp: fallback */
    size_t batches;
    struct cost_train_seqs *seqs; /* per batch */
    double longest;               /* longest training sequence, tokens */
    double *bwork_max;            /* per batch: forward FLOPs of its largest sequence */
    double *battn;                /* per batch: attention FLOPs of all its sequences */
    size_t orders;                /* batches in an admission's finish order (rl.sync_interval) */
    double *order_work;           /* per order, the shortest first: FLOPs (plan_train_order) */
    VEC(struct plan_deal) deals;  /* the dealing cache, in order of first use */
    struct intmap deal_index;     /* (DP << 32 | micro-batch tokens) -> index into deals */
    struct plan_ranks ranks[PLAN_RANKS_KEPT]; /* the latest dealings, replaced in turn */
    unsigned ranks_next;                      /* the slot to replace next */
    struct cost_train_scratch sc;
};

/*
 * Prepares t for sample s (validated: at least one batch, positive lengths below 2^32 when
 * summed) with the cluster, rl, plan and ehp settings of cfg. The training sequence of a
 * trajectory is its whole context: prompt, generated and tool tokens. Only the trajectories
 * that train do: those filtered (NULL: none; at least one is not) are left out, and the rest
 * form whole batches in order, cycled to one when fewer.
 */
void plan_train_init(struct plan_train *t, const struct plan_sample *s, const bool *filtered,
                     const struct cost_shape *sh, const struct spec_hardware *hw,
                     const struct plan_settings *st, const struct libra_config *cfg);

void plan_train_free(struct plan_train *t);

/* The layouts of n GPUs (TP, PP in {1, 2, 4, 8}, CP in {1, 2, 4} when the longest sequence
 * exceeds plan.cp_min_seq_tokens else {1}, every budget, without and (when t->recompute) with
 * full activation recompute, with Megatron's distributed optimizer — for an MoE model at every
 * expert parallel size of PLAN_EPS that divides TP·CP·DP and the experts — and (when t->fsdp and TP
 * = PP = 1) with FSDP, and with HSDP sharding within a node where that leaves at least two replicas
 * of the state, TP·PP·CP dividing n) in tie-break order: TP, PP, CP, budget ascending, then without
 * recompute first, then distributed optimizer by EP ascending, FSDP, HSDP. Returns the count (<=
 * PLAN_LAYOUTS_MAX). */
size_t plan_train_layouts(const struct plan_train *t, int n, struct plan_train_layout *out);

/* Widens t's space with the options plan.recompute and plan.fsdp leave to fallback (on: for a
 * split where no layout fits without them), or restores it (off). Returns whether any option
 * is on fallback. */
bool plan_train_fallback(struct plan_train *t, bool on);

/* The cost model's config of layout l with settings st (the trainer's passes, mini-batches):
 * what the planner costs and the simulator's trainer runs. */
void plan_train_config(const struct plan_train_layout *l, const struct plan_settings *st,
                       struct cost_train_config *c);

/* PLAN_WHY_NONE when layout l is feasible (filling *mem when mem is not NULL), else the
 * constraint that rejects it. */
enum plan_why plan_train_check(const struct plan_train *t, const struct plan_train_layout *l,
                               struct cost_train_memory *mem);

/* A lower bound of plan_train_time for a feasible l, without dealing. */
double plan_train_lb(const struct plan_train *t, const struct plan_train_layout *l);

/* The step time of a feasible l: the mean over the sample's batches; *mean (may be NULL)
 * gets the mean of every component. */
double plan_train_time(struct plan_train *t, const struct plan_train_layout *l,
                       struct cost_train_step *mean);

/*
 * An asynchronous admission of rl.sync_interval batches trains them in the order their
 * trajectories finish, the longest last. Fills w[0 .. t->orders) with the step time of layout
 * l (feasible) on each of those batches over the mean step, ascending (mean 1): the sample's
 * training sequences sorted by tokens and cut into t->orders groups, each batch picked evenly
 * from one; the step's compute (its share of l's mean step, plan_train_time) scales with the
 * batch's FLOPs, the rest (communication, optimizer, pipeline) stays the mean's. Returns false
 * (w untouched) when there are no such batches or l's step cannot be costed.
 */
bool plan_train_order(struct plan_train *t, const struct plan_train_layout *l, double *w);

/* Colocated mode: seconds to switch l's GPUs to rollout instances of TP tp and back. */
double plan_train_switch_s(const struct plan_train *t, const struct plan_train_layout *l, int tp);

/* Colocated mode: seconds to reshard l's new weights into rollout instances of TP tp on the same
 * GPUs (cost_reshard_s), on nodes of gpn GPUs: the weights split over TP·PP, or under EP the
 * experts over EP·PP and the rest over TP·PP. */
double plan_train_reshard_s(const struct plan_train_layout *l, const struct plan_settings *st,
                            const struct cost_shape *sh, const struct spec_hardware *hw, int gpn,
                            int tp);

#endif
