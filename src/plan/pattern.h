/*
 * plan.tp_pattern: the TP sizes of the instances on every rollout node ("1,1,2,4" is the
 * reference's R2E-Gym layout: two TP1, one TP2 and one TP4 per 8-GPU node). Frameworks that
 * start engines from a fixed per-node recipe can only run such plans; the planner then only
 * chooses the split and the training layout.
 */
#ifndef PLAN_PATTERN_H
#define PLAN_PATTERN_H

#include "libra/libra.h"
#include "plan/plan.h"

/*
 * Parses text (NUL-terminated): TP sizes in {1, 2, 4, 8}, optionally written "tp4", separated
 * by commas, spaces allowed around them, at most PLAN_PATTERN_MAX. Fills counts (instances by
 * log2(TP)) and *gpus (their sum); "" (or only spaces) is no pattern: zero counts and gpus.
 * Returns 0, or LIBRA_EINVAL with err at name:1:COL (COL the 1-based byte column of the fault).
 */
int plan_pattern_parse(const char *text, const char *name, int counts[PLAN_NTP], int *gpus,
                       struct libra_error *err);

#endif
