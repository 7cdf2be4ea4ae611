/*
 * Planning an experiment as `libra plan` does and libra_plan() repeats: the planner on the
 * simulator's length sample, its best candidates verified by a short simulation, and under
 * plan.homogeneous_rollout what a free fleet would gain; then the plan's JSON document. The
 * command adds flags, text output and timings on stderr; the public API returns the document.
 *
 * The planner and the simulator are pure; plan.time_limit_s is enforced here with the
 * monotonic clock. Reentrant.
 */
#ifndef API_PLAN_H
#define API_PLAN_H

#include <jansson.h>

#include "libra/libra.h"
#include "plan/plan.h"
#include "sim/sim.h"
#include "spec/config.h"

/* What planning computed: the plan and how it was chosen. Zero it before api_plan_run. */
struct api_planned {
    struct plan_result plan;             /* the chosen plan (the verified one when verified) */
    struct plan_result analytic;         /* the analytic optimum, when verification chose another */
    struct plan_result het;              /* plan.homogeneous_rollout: the free fleet's optimum */
    struct sim_mode_result verification; /* n_verified 0: not verified */
    const char *unverified_why;          /* why not, when not; NULL when verified (static) */
    char source[SPEC_PATH_MAX + 64];     /* the length sample's origin */
    double search_ms;                    /* wall-clock time of the searches, milliseconds */
    double verify_ms;                    /* of the verification; 0 when not verified */
};

/*
 * Plans in->cfg on in's length sample into *pl, verifying async plans with jobs threads
 * (results do not depend on jobs). A plan that is not feasible is a result (pl->plan.feasible
 * false, why in pl->plan.why), not an error. Returns 0, or LIBRA_EINVAL / LIBRA_EINTERNAL
 * with err (a verification error prefixed "verification: ", among them every candidate failing
 * to simulate, some for a setting). Free *pl with api_planned_free in every case.
 */
int api_plan_run(const struct sim_input *in, int jobs, struct api_planned *pl,
                 struct libra_error *err);

/* The plan document of `libra plan --json` (schema libra.plan/1) for pl under cfg, each failed
 * verification candidate with its cause ("error"). Returns a new reference. */
json_t *api_plan_json(const struct libra_config *cfg, const struct api_planned *pl);

/* Releases what pl owns; a zeroed pl is fine. */
void api_planned_free(struct api_planned *pl);

#endif
