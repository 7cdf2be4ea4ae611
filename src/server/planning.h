/*
 * The body of the gateway's re-bucketing call, POST /libra/v1/buckets (docs/serve.md "Plans
 * and buckets"): {"buckets": "tp1:4000,tp2:12000,tp4:30000"} (spec/bucket.h's text form) or
 * {"from_plan": true} (the layout of the last plan). The routes themselves are
 * server/planning.c's, behind server/gateway.h.
 *
 * Pure: memory in, memory out (tests/fuzz/fuzz_serve_buckets.c).
 */
#ifndef SERVER_PLANNING_H
#define SERVER_PLANNING_H

#include <stdbool.h>
#include <stddef.h>

#include "spec/bucket.h"

struct gw_buckets_body {
    bool from_plan;                   /* {"from_plan": true} */
    struct spec_bucket_layout layout; /* {"buckets": TEXT}: valid, no instance counts */
};

/*
 * Parses len bytes of body. Returns 0 with *out filled, or -1 with err (err_size bytes) naming
 * the member at fault: "body:POS: ..." for text that is not one JSON object, "NAME: unknown
 * member" for a member other than the two, "buckets: column C: ..." for a layout that does
 * not parse, "buckets: instance counts ..." for one that gives counts (the registered engines
 * are the instances), "from_plan: expected true", and a message naming both members when
 * both or neither are given.
 */
int gw_buckets_parse(const char *body, size_t len, struct gw_buckets_body *out, char *err,
                     size_t err_size);

#endif
