/*
 * The rules of an RL job that every party running one must agree on — the simulator (sim/)
 * and the client that plays a job against engines (load/) call these, so that the two decide
 * admission, staleness and the weight-update schedule alike:
 *
 *   - a batch is rl.batch_trajectories / rl.samples GRPO groups;
 *   - admission (bounded staleness, AReaL / verl fully async): the group that completes batch
 *     b may start only while b <= R + k (R the fleet's policy version, k = rl.max_staleness),
 *     plus one group for each group lost (filtered or too stale: it is replaced) and the
 *     over-provisioned share (rl.overprovision_frac of a batch, APRIL / slime);
 *   - a group generated at version v is trained by the trainer at version V only while
 *     V - v <= k;
 *   - the weights go to the fleet after every rl.sync_interval trained versions.
 *
 * Pure: integers in, integers out.
 */
#ifndef JOB_JOB_H
#define JOB_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "spec/config.h"

struct job_rules {
    int64_t groups_per_batch; /* >= 1 */
    int64_t max_staleness;    /* k, versions, >= 0 */
    int64_t sync_interval;    /* versions between weight updates, >= 1 */
    int64_t extra_groups;     /* over-provisioned groups kept in flight */
};

/* The rules of cfg's rl section (validated by the config schema). */
void job_rules_from_config(struct job_rules *j, const struct libra_config *cfg);

/* How many groups may have been launched in all while the fleet is at version fleet_version
 * and lost groups were lost so far. */
int64_t job_admit_limit(const struct job_rules *j, int64_t fleet_version, int64_t lost);

/*
 * job_admit_limit for a run that ends after batches batches: never more groups than its last
 * batch needs (the batches' groups and one replacement per lost group; the over-provisioned
 * share stops there), so that nothing is left running when the last batch is complete.
 */
int64_t job_admit_limit_run(const struct job_rules *j, int64_t fleet_version, int64_t lost,
                            int64_t batches);

/* Whether a group generated at version group_version may be trained at trainer_version. */
bool job_fresh(const struct job_rules *j, int64_t trainer_version, int64_t group_version);

/* Whether the weights go to the fleet once the trainer has reached version (>= 1). */
bool job_sync_due(const struct job_rules *j, int64_t version);

#endif
