/*
 * A plan as a running fleet sees it: its rollout instances by TP size, its bucket layout and
 * its predicted step — and how a fleet of engines differs from it.
 *
 * `libra serve` starts from one (--plan FILE, a document of `libra plan --json`), keeps the
 * one it last computed (GET /libra/v1/plan) and re-buckets from it (POST /libra/v1/buckets);
 * the three read a plan only through this struct, so a plan written to a file and one computed
 * in the gateway are the same thing to it. Pure: documents are read from a ujson_doc the caller
 * parsed. Reentrant.
 */
#ifndef PLAN_FLEET_H
#define PLAN_FLEET_H

#include <jansson.h>
#include <stdbool.h>

#include "plan/plan.h"
#include "spec/bucket.h"
#include "util/json.h"

struct plan_fleet {
    int counts[PLAN_NTP];             /* rollout instances by log2(TP) */
    int rollout_gpus;                 /* GPUs they take */
    struct spec_bucket_layout layout; /* the buckets C-MLFQ routes over, instance counts in */
    double step_s;                    /* the predicted step time, seconds */
};

/* The fleet of a feasible plan r. */
void plan_fleet_of(const struct plan_result *r, struct plan_fleet *out);

/*
 * Reads the fleet of a plan document (PLAN_SCHEMA; `libra plan --json` writes one) from doc:
 * "schema", "feasible" (true), "objective.step_s" (> 0), "rollout.gpus",
 * "rollout.instances" ({"tp1": N, "tp2": N, "tp4": N, "tp8": N}, a missing size 0) and
 * "rollout.buckets" (spec_bucket_from_json), which must serve every TP size with instances;
 * other members are not read. Returns 0, or LIBRA_EINVAL with err at doc's file:line:col of the
 * member at fault (of its parent when it is missing) and its dotted name.
 */
int plan_fleet_from_json(struct plan_fleet *out, const struct ujson_doc *doc,
                         struct libra_error *err);

/* Whether two layouts have the same buckets: bounds and TP sizes (instance counts aside). */
bool plan_layout_same(const struct spec_bucket_layout *a, const struct spec_bucket_layout *b);

/* Whether engines (counts by log2(TP)) are f's instances, TP size by TP size. */
bool plan_fleet_matches(const struct plan_fleet *f, const int engines[PLAN_NTP]);

/*
 * How a running fleet differs from f: engines (rollout's engines by log2(TP)) routed over
 * layout. A new JSON object:
 *   {"matches": bool (same instances and same buckets),
 *    "instances": [{"tp", "plan", "engines", "change": plan - engines}, ...] (each TP size
 *                 either has), "rollout_gpus": {"plan", "engines"},
 *    "buckets": {"plan": TEXT, "gateway": TEXT, "same": bool}, "step_s": f's prediction,
 *    "differences": ["TP1: 4 in the plan, 2 registered (add 2)", "buckets: ...", ...]}
 */
json_t *plan_fleet_diff(const struct plan_fleet *f, const int engines[PLAN_NTP],
                        const struct spec_bucket_layout *layout);

#endif
