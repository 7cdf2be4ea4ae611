/*
 * The planner's rollout model: what a multiset of instances does with the length sample.
 *
 * Everything that depends only on (trajectory, TP size) is computed once from cost/rollout.h:
 * each trajectory's instance-seconds at the instance's concurrency limit (its work) and its
 * latency there, tool time included (the trajectory holds its slot while it waits). The sample is
 * sorted by generated tokens (the router's key), and a multiset is scored by dealing contiguous
 * bands of that order to its TP sizes in ascending order. A band's load is its work over its
 * instances; the banding is the one with the least largest load Z (exact, over integer boundaries),
 * each boundary as low as Z allows so that every trajectory runs on the largest TP it can.
 * docs/planner.md derives the formulas.
 *
 * The search prunes with plan_band_fit, an O(K log M) test of whether some banding keeps
 * every band's load under a threshold; Z itself costs a few dozen such tests.
 */
#ifndef PLAN_ROLL_H
#define PLAN_ROLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cost/lifecycle.h"
#include "cost/rollout.h"
#include "cost/shape.h"
#include "plan/plan.h"
#include "plan/sampling.h"

/* A run of trajectories in rank order with per-TP prefix sums of work: the whole sample or
 * one batch of it. */
struct plan_view {
    size_t m;
    double *prefix[PLAN_NTP];     /* m + 1 prefix sums of work, instance-seconds */
    double *gen_prefix;           /* m + 1 prefix sums of generated tokens, rank by rank */
    uint32_t *next_bad[PLAN_NTP]; /* m + 1: first position >= i whose context does not fit
                                   * TP's KV (m when none) */
    double wmin[1 << PLAN_NTP];   /* by TP subset: Σ min over its TPs of TP·work (GPU-s) */
};

/* The job's side of the rollout model: batches, the staleness window, the node and, in async
 * mode, the weight updates as the simulator runs them (sim/sync.c, cost/lifecycle.h). */
struct plan_roll_job {
    int batch;         /* trajectories per step (B) */
    int k1;            /* staleness window in steps: rl.max_staleness + 1 */
    int gpn;           /* GPUs per node */
    int samples;       /* trajectories per group (rl.samples) */
    int interval;      /* rl.sync_interval: steps between weight updates (<= k1) */
    bool drain;        /* rl.sync_mode drain: live requests finish before the transfer */
    double save_s;     /* per update: the trainer's checkpoint write (disk transports) */
    double transfer_s; /* per update: the weights reach the fleet (the fleet is stopped) */
    double kept_share; /* the share of trajectories that train (dynamic sampling drops the
                        * rest, which the fleet generates all the same); 1 by default */
    struct plan_sampling sampling; /* how a synchronous step generates more (colocated) */
    double last_generations;       /* async: the expected generations until interval batches'
                                    * groups are kept, out of the window's k1 batches' groups in
                                    * flight (plan_regenerations); 1 without dynamic sampling */
    double train_add_s;            /* per step: the trainer's share of the updates, save (+ an NCCL
                                    * broadcast it takes part in) over the interval */
    double pool_s; /* per trajectory rolled out: the busiest bounded tool pool's execution
                    * seconds over its workers (plan_problem.pool_s) */
};

/* The share of sample s that trains: the trajectories not filtered (NULL: every one). */
double plan_kept_share(const struct plan_sample *s, const bool *filtered);

/* The job of problem p (its config, hardware, settings, sample and tool pools) for model
 * shape sh. */
void plan_roll_job_init(struct plan_roll_job *j, const struct plan_problem *p,
                        const struct cost_shape *sh);

/* The tables of one problem, built by plan_roll_init. Scoring writes only the scratch arrays
 * and the lazily built lam_min: one solve owns its tables. */
struct plan_roll {
    size_t m; /* trajectories in the sample */
    struct plan_roll_job job;
    int batch;               /* trajectories per step (B) */
    double per_step;         /* trajectories rolled out per step: B / job.kept_share */
    double rounds;           /* a synchronous step's expected generation rounds
                              * (plan_expected_rounds of job.sampling) */
    size_t batches;          /* whole batches in the sample */
    double k1;               /* staleness window in steps: rl.max_staleness + 1 */
    uint32_t *idx;           /* rank → sample index (sorted by generated tokens, ties by index) */
    double *gen;             /* generated tokens by rank */
    double *cbar;            /* mean resident context by rank, tokens */
    double *gc_prefix;       /* m + 1 prefix sums of generated tokens · cbar, rank by rank */
    double max_seqs;         /* running sequences per instance at most */
    double *tool_s;          /* tool time by rank, seconds */
    double ctx_max;          /* longest context of the sample, tokens */
    bool usable[PLAN_NTP];   /* TP divides the heads, weights fit, fits a node */
    bool fits_all[PLAN_NTP]; /* usable and the longest context fits its KV */
    struct cost_rollout_pre pre[PLAN_NTP];
    double *work[PLAN_NTP];           /* by rank: instance-seconds at the concurrency limit */
    double *lat[PLAN_NTP];            /* by rank: latency at the concurrency limit, s */
    double *prefill[PLAN_NTP];        /* by rank: prefill seconds */
    double *prefill_prefix[PLAN_NTP]; /* m + 1 prefix sums of prefill, summed rank by rank from 0 */
    double *bcap[PLAN_NTP];           /* by rank: concurrency limit, sequences */
    double *reprefill[PLAN_NTP];      /* by rank: its mean context prefilled afresh, s */
    double *lat1[PLAN_NTP];           /* by rank: latency alone on the instance, s */
    double tail_lb[1 << PLAN_NTP];    /* by TP class: plan_roll_tail_lb (NAN until built) */
    uint32_t *tail_ranks[1 << PLAN_NTP]; /* by TP class: the ranks whose tail latencies
                                          * plan_roll_span_lb computes (NULL until built) */
    size_t tail_n;                       /* their count */
    uint32_t *turn_ranks; /* the ranks whose turns it computes for the drain (NULL until built) */
    size_t turn_n;        /* their count */
    double routed[1 << PLAN_NTP][PLAN_NTP]; /* by TP class: plan_roll_routed (routed_ok) */
    bool routed_ok[1 << PLAN_NTP];
    double *turns; /* by rank: turns */
    bool *dropped; /* by rank: its group dropped by dynamic sampling (NULL: none is) */
    uint32_t *lat_order[PLAN_NTP];  /* ranks by ascending latency on each TP */
    double *lam_min[1 << PLAN_NTP]; /* by TP subset: ascending min latency / k1 (lazy: NULL
                                     * until plan_roll_lam_min) */
    struct plan_view all;
    struct plan_view *bview;    /* per batch */
    uint32_t *branks;           /* per batch: member ranks ascending, batches × batch */
    double *top_lat1[PLAN_NTP]; /* per batch: latency of its longest generation alone */
    double *scratch;            /* 3·m + 1 doubles for the async scores */
    struct plan_count *count;   /* threshold counts, see plan_roll_accepted */
};

/* Prefix counts over ranks of the ranks whose latency / k1 on a TP (exact) or its least over a
 * TP class up to that TP (bound) is <= theta (< when strict); rebuilt when theta changes. */
struct plan_count {
    bool valid, strict;
    double theta;
    double *lam; /* m: the latencies / k1 counted (built on first use) */
    uint32_t *c; /* m + 1 */
};

/*
 * Builds the tables for sample s with per-trajectory tool seconds tool_s (NULL: none;
 * validated by the caller: at least one batch, positive lengths, tool time finite and >= 0)
 * and the trajectories dynamic sampling filtered (NULL: none)
 * on model shape sh and hardware hw with settings st for job j. A TP size the shape or the
 * node cannot take is marked unusable. Free with plan_roll_free.
 */
void plan_roll_init(struct plan_roll *r, const struct plan_sample *s, const double *tool_s,
                    const bool *filtered, const struct cost_shape *sh,
                    const struct spec_hardware *hw, const struct plan_settings *st,
                    const struct plan_roll_job *j);

void plan_roll_free(struct plan_roll *r);

/* The ascending min-latency/k1 array for TP subset mask (built on first use). */
const double *plan_roll_lam_min(struct plan_roll *r, unsigned mask);

/* The least largest band load Z over every banding (exact; +inf when none is feasible).
 * covers: a load the caller knows some banding keeps under (a bracket to start from), or
 * INFINITY; a wrong hint costs time, not exactness. */
double plan_band_z(const struct plan_view *v, const double c[PLAN_NTP], unsigned mask,
                   double covers);

/* The banding at load z with every boundary as low as possible: band t is [lo[t], hi[t]);
 * absent TP sizes get empty bands. z must be >= plan_band_z. */
void plan_band_right(const struct plan_view *v, const double c[PLAN_NTP], double z,
                     uint32_t lo[PLAN_NTP], uint32_t hi[PLAN_NTP]);

/*
 * Whether some banding keeps every band's load (its work over c) <= z, each band's contexts
 * fitting its TP; when it does, lo and hi hold the banding of plan_band_right at z. On entry lo
 * holds lower bounds of the starts: zeros, or the lo of an earlier plan_band_fit of the same view
 * that fit at a z' >= z with counts c' >= c (componentwise, same sizes present). O(K log m).
 */
bool plan_band_fit(const struct plan_view *v, const double c[PLAN_NTP], double z,
                   uint32_t lo[PLAN_NTP], uint32_t hi[PLAN_NTP]);

/* Async lower bound: the least T with T·A(T) >= B·z, A(T) the count of lam (ascending, m
 * entries) at most T. */
double plan_fixed_point(const double *lam, size_t m, double bz);

/* Async: a lower bound of tail_s (below) for every multiset of TP class cls — each rank alone
 * on the class's smallest TP that holds it, no queue (built on first use). */
double plan_roll_tail_lb(struct plan_roll *r, unsigned cls);

/*
 * Async: a lower bound of the span_s that plan_roll_score gives counts c (a multiset of class
 * mask_of(c), least band load z, finite) whose admission's last batch has train side train_s
 * (the mean train side when the score is given no order), in floating point as computed: the
 * span with no queue and no re-prefill and the trainer's chain at least the admission's
 * slowest trajectory plus that batch's training, that slowest trajectory's expectation (and, when
 * updates drain carried trajectories, the drain's longest turn) taken with only the ranks that
 * can weigh in it at their exact values and the others at 0 (docs/planner.md §3.3, rule 5).
 * O(K log m) plus some tens of ranks (and the sums of the bands above the lowest, when updates
 * drain), where the score is O(m log m).
 */
double plan_roll_span_lb(struct plan_roll *r, const int c[PLAN_NTP], double z, double train_s);

/* Async: by TP size of class cls, the work (instance-seconds) of the ranks whose smallest TP of
 * the class that holds them is that size, summed as the score sums it, so that a multiset of
 * class cls with c[t] instances of TP t has a load of at least routed[t] / c[t] (its routed
 * load, the fleet's work basis besides Z); built on first use. */
const double *plan_roll_routed(struct plan_roll *r, unsigned cls);

/* A scored multiset. Async parts are per step unless named (docs/planner.md §2.4). */
struct plan_roll_score {
    double t_s;         /* async: the rollout side of the step; colocated: mean batch makespan */
    double z_s;         /* least largest band load over the whole sample */
    double f_stale;     /* async: share of the sample slower than k1 · the fixed point */
    double fixed_s;     /* async: the staleness fixed point T_r */
    double work_s;      /* async: B·Z/M, the fleet's work at the concurrency limit */
    double little_s;    /* async: mean latency in the window / k1 (Little's law) */
    double pool_s;      /* async: the busiest bounded tool pool's work, B'·job.pool_s (it goes
                         * on through the updates: a term of its own) */
    double queue_s;     /* async: how long an admission's last trajectory waits for a place */
    double tail_s;      /* async: queue_s + the expected slowest latency of one admission
                         * (interval·B trajectories) */
    double drain_s;     /* async, per update: the longest live turn, when updates drain */
    double reprefill_s; /* async, per update: carried-over contexts prefilled again */
    double update_s;    /* async, per update: the fleet stopped (save, transfer, drain,
                         * re-prefill) */
    double fleet_s;     /* async: max(work_s, little_s) + update_s / interval */
    double span_s;      /* async: (queue + the trainer's chain through one admission +
                         * update_s) / k1 */
    uint32_t lo[PLAN_NTP], hi[PLAN_NTP];
};

/* Async: the train side of batch i (1 .. job.interval, in finish order) of an admission whose
 * mean train side is train_s: its own time scaled by order[i - 1] (plan_train_order) plus the
 * trainer's share of the updates; train_s when order is NULL. */
double plan_roll_batch_train_s(const struct plan_roll_job *j, double train_s, const double *order,
                               int i);

/* Scores counts c (a packable multiset with every TP usable) in mode colocated or async;
 * z is plan_band_z of c over the whole sample when the caller has it, else NAN; train_s is
 * the training time of the step (its train side, which the async span charges once per
 * batch of an admission; unused when colocated), and order, when not NULL, the trainer's own
 * time of each of the admission's job.interval batches in finish order over its mean
 * (plan_train_order: ascending, mean 1; NULL: 1 each). t_s is +inf when no banding fits the
 * KV. */
void plan_roll_score(struct plan_roll *r, const int c[PLAN_NTP], bool colocated, double z,
                     double train_s, const double *order, struct plan_roll_score *out);

/*
 * Async: how many ranks of the bands [lo[t], hi[t]) have latency / k1 <= theta (< when strict)
 * on their band's TP. With the accepted count A at theta, a multiset of least band load z has
 * T_r <= theta iff A >= 1 and (B·z)/A <= theta (the fixed point's own expression).
 */
size_t plan_roll_accepted(struct plan_roll *r, const uint32_t lo[PLAN_NTP],
                          const uint32_t hi[PLAN_NTP], double theta, bool strict);

/* The same count with each rank's latency replaced by its least over the TP sizes of class cls
 * up to its band's: an upper bound of the accepted count of any banding whose boundaries are
 * at least lo (every rank then runs on a TP no larger than here). */
size_t plan_roll_accepted_bound(struct plan_roll *r, unsigned cls, const uint32_t lo[PLAN_NTP],
                                const uint32_t hi[PLAN_NTP], double theta, bool strict);

/* Async: the share of the sample whose latency on its band's TP exceeds k1·t_s. */
double plan_roll_stale(const struct plan_roll *r, const struct plan_roll_score *s, double t_s);

/* The reference's estimate for the same multiset: per batch, trajectories longest first to
 * the instance (of a TP whose KV fits them) that finishes earliest, by work; mean over batches
 * of the largest instance total. */
double plan_roll_greedy(const struct plan_roll *r, const int c[PLAN_NTP]);

/* The banded counterpart of plan_roll_greedy: mean over batches of the largest band load. */
double plan_roll_banded(const struct plan_roll *r, const int c[PLAN_NTP],
                        const struct plan_roll_score *s);

#endif
