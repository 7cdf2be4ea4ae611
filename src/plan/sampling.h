/*
 * Dynamic sampling (DAPO, rl.dynamic_sampling): a GRPO group whose rewards are all equal has no
 * advantage to learn from, so it is dropped and the step generates more until its batch of G
 * groups is full. One rule, which the simulator's synchronous modes follow round by round
 * (plan_round_groups) and the planner charges in expectation (plan_expected_rounds):
 *
 *   - off: one round of G groups (and rl.overprovision_frac more, whose slowest are aborted
 *     once the batch is full);
 *   - regenerate: the same, then, while the batch is short, a round of the groups still
 *     missing (and that share more), each round waiting for its own tail;
 *   - gen_batch: verl's DAPO recipe (recipe/dapo: data.gen_batch_size, a multiple of
 *     data.train_batch_size): every round generates rl.gen_batch_factor · G groups and waits for
 *     all of them; the kept ones fill the batch in launch order (verl truncates its generation
 *     batch in the dataloader's order), the rest are surplus, and another round follows while
 *     the batch is short.
 *
 * Both rules stop after rl.max_gen_batches rounds and train what they have. The asynchronous modes
 * have no rounds: a dropped group is replaced when it is dropped (job/job.h), and
 * plan_regenerations gives, in expectation, the generations until enough of the groups in
 * flight have kept one.
 *
 * Pure.
 */
#ifndef PLAN_SAMPLING_H
#define PLAN_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "spec/config.h"

struct plan_sampling {
    enum spec_dynamic_sampling mode;
    int64_t groups;            /* G: groups of one batch, >= 1 */
    int factor;                /* gen_batch: groups of a round per group of the batch, >= 1 */
    int max_rounds;            /* rl.max_gen_batches, >= 1 */
    double overprovision_frac; /* off and regenerate: the extra share of each round */
};

/* The rule of cfg's rl section. */
void plan_sampling_from_config(struct plan_sampling *p, const struct libra_config *cfg);

/* Groups round `round` (1 for the first) launches when `kept` of the batch's groups are kept so
 * far; 0 when the step generates no more. */
int64_t plan_round_groups(const struct plan_sampling *p, int round, int64_t kept);

/* Whether a round's groups still running when the batch fills run to their end (gen_batch:
 * verl waits for its whole generation batch) rather than being aborted. */
bool plan_round_runs_out(const struct plan_sampling *p);

/* The expected rounds of one step when each group is kept with probability keep, in [0, 1]
 * (over-provisioned groups are not counted as help). */
double plan_expected_rounds(const struct plan_sampling *p, double keep);

/* The expected generations until n of `slots` groups running side by side (slots >= n) have
 * each kept one, when each generation is kept with probability keep, in [0, 1], and a dropped
 * one is generated again at once: E[min(n-th smallest of `slots` geometric counts, cap)] (cap 0:
 * no cap). slots = n: the most generations one of n groups needs. */
double plan_regenerations(double n, double slots, double keep, int cap);

#endif
