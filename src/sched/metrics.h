/*
 * Routing accuracy, defined (spec §4; docs/routing.md "Metrics").
 *
 * The paper reports one number (91.1 % on Search-R1) without defining it, and "always stay
 * short" can score 85 % on a long-tailed workload. So libra counts one decision per tool
 * return, takes the bucket the policy chose before any capacity fallback, and calls it correct
 * when it equals the bucket of the trajectory's true remaining generated tokens at that moment
 * (the first bucket whose max_tokens covers them, else the last). Beside it, always: first
 * placements apart, the majority-class baseline, per-bucket recall (the long bucket above
 * all), token-weighted accuracy (each decision weighted by its true remaining tokens), the
 * Spearman correlation of predicted vs true remaining tokens (over decisions with an
 * estimate; over a uniform sample of 65,536 of them when there are more, so that memory does
 * not grow with the run), moves per trajectory, and all of it split by whether the
 * trajectory's prompt was seen in an earlier step, never, or only through siblings running at
 * the same time.
 *
 * Regret (sched/cost.h, docs/routing.md "Cost and regret"), when the caller scores it: per
 * decision, first placements included, what the chosen bucket costs over the best bucket in
 * hindsight, averaged over decisions and summed per trajectory; the path regret of a trajectory,
 * what its path of buckets cost over the best single bucket in hindsight; and the same for every
 * constant policy (always bucket b), from which the majority class's and the best constant
 * bucket's regrets are reported beside the policy's.
 */
#ifndef SCHED_METRICS_H
#define SCHED_METRICS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec/bucket.h"

enum sched_split {
    SCHED_SPLIT_SEEN,     /* the prompt appeared in an earlier step */
    SCHED_SPLIT_NEVER,    /* never before */
    SCHED_SPLIT_SIBLINGS, /* only through siblings of the same group (the simulator) */
};
#define SCHED_SPLIT_COUNT 3

/* One evaluated decision. */
struct sched_metric_point {
    enum sched_split split;
    bool first;                    /* the first placement of a trajectory (reported apart) */
    int from_bucket;               /* the policy's bucket before it; -1 at the first */
    int chosen_bucket;             /* the policy's choice before any fallback */
    int64_t true_remaining_tokens; /* generated tokens still to come */
    double predicted_tokens;       /* the policy's estimate of them, or NAN */
    bool scored;                   /* the regrets below are set */
    double regret_gpu_s;           /* this decision's */
    double const_regret_gpu_s[SPEC_BUCKETS_MAX]; /* always bucket b's at this decision */
};

struct sched_metrics;

/* Creates an empty accumulator for decisions over layout, its JSON with every split (the
 * simulator's). Never returns NULL. */
struct sched_metrics *sched_metrics_new(const struct spec_bucket_layout *layout);

/* Leaves the siblings split out of m's JSON, for a caller none of whose decisions can fall in
 * it (route eval splits by step alone), so that its documents show no split it never has. */
void sched_metrics_without_siblings(struct sched_metrics *m);

/* Frees m; NULL is a no-op. */
void sched_metrics_free(struct sched_metrics *m);

/* Counts one trajectory, in the split of its first decision (the denominators of moves per
 * trajectory: the split's and the whole's). */
void sched_metrics_add_traj(struct sched_metrics *m, enum sched_split split);

/* Counts a trajectory counted already in a further split its later decisions fall in (the
 * simulator splits by decision: a turn after a sibling finished is "siblings"); the whole's
 * count stays one per trajectory. */
void sched_metrics_add_traj_split(struct sched_metrics *m, enum sched_split split);

/* One scored trajectory's regrets, GPU-s: the sum of its decisions' and its path's; const_*[b]:
 * always bucket b's (one per bucket of the layout). */
struct sched_traj_regret {
    double decisions_gpu_s, path_gpu_s;
    double const_decisions_gpu_s[SPEC_BUCKETS_MAX], const_path_gpu_s[SPEC_BUCKETS_MAX];
};

/* Adds the regrets of one trajectory of a split. */
void sched_metrics_add_traj_regret(struct sched_metrics *m, enum sched_split split,
                                   const struct sched_traj_regret *r);

/* Adds one decision. */
void sched_metrics_add(struct sched_metrics *m, const struct sched_metric_point *p);

/* The accuracy of tool-return decisions over every split; NAN when there are none. */
double sched_metrics_accuracy(const struct sched_metrics *m);

/* The number of tool-return decisions over every split. */
uint64_t sched_metrics_decisions(const struct sched_metrics *m);

/*
 * The metrics as JSON: {"all": S, "seen": S, "never": S[, "siblings": S]} (siblings unless
 * sched_metrics_without_siblings, whatever its count), each S = {trajectories, decisions,
 * accuracy, majority_class {bucket, accuracy}, per_bucket_recall [..], token_weighted_accuracy,
 * spearman, spearman_points, moves_per_trajectory, first_placements {n, accuracy}, regret},
 * regret only when decisions were scored: {decisions, trajectories, per_decision_gpu_s,
 * per_trajectory_gpu_s (its decisions' sum), path_per_trajectory_gpu_s, majority_class {bucket,
 * the same three}, best_constant {bucket, the same three}} (best_constant: the least
 * per-decision regret). Undefined values are null: those of no data, and when bucketless (a
 * policy with no bucket of its own) whatever is computed from the policy's bucket: its
 * accuracies, recall, moves and its own three regrets (the baselines' rows stay). Returns a new
 * reference.
 */
json_t *sched_metrics_to_json(const struct sched_metrics *m, bool bucketless);

/*
 * The confusion matrix of the tool-return decisions over every split: an array with one row
 * per true bucket, each the count of decisions by chosen bucket (the diagonal is the correct
 * ones; first placements are not in it). JSON null when bucketless. Returns a new reference.
 */
json_t *sched_metrics_confusion_json(const struct sched_metrics *m, bool bucketless);

#endif
