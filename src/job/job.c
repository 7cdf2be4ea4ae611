/* The rules of an RL job (job/job.h). */
#include "job/job.h"

#include <math.h>

void job_rules_from_config(struct job_rules *j, const struct libra_config *cfg)
{
    const struct spec_rl_config *rl = &cfg->rl;
    j->groups_per_batch = rl->batch_trajectories / rl->samples;
    j->max_staleness = rl->max_staleness;
    j->sync_interval = rl->sync_interval;
    j->extra_groups = (int64_t)ceil(rl->overprovision_frac * (double)j->groups_per_batch);
}

int64_t job_admit_limit(const struct job_rules *j, int64_t fleet_version, int64_t lost)
{
    return (fleet_version + j->max_staleness + 1) * j->groups_per_batch + lost + j->extra_groups;
}

int64_t job_admit_limit_run(const struct job_rules *j, int64_t fleet_version, int64_t lost,
                            int64_t batches)
{
    int64_t limit = job_admit_limit(j, fleet_version, lost),
            last = batches * j->groups_per_batch + lost;
    return limit < last ? limit : last;
}

bool job_fresh(const struct job_rules *j, int64_t trainer_version, int64_t group_version)
{
    return trainer_version - group_version <= j->max_staleness;
}

bool job_sync_due(const struct job_rules *j, int64_t version)
{
    return version % j->sync_interval == 0;
}
