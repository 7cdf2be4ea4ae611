/*
 * Bucket layout: the ordered TP buckets that C-MLFQ routes over and the planner emits.
 *
 * A bucket is a queue level: trajectories whose expected remaining generation is at most
 * max_tokens belong to it, and it is served by instances of one or more TP sizes. The layout
 * lives in spec/ because plan/ produces it and sched/ consumes it, and neither may include the
 * other. Text form: "tp1:4000,tp2:12000,tp4:30000"; a bucket served by several TP sizes is
 * written "tp1+tp2:5000"; instance counts may follow as "tp2x3:12000" (3 TP2 instances).
 * JSON form: {"buckets":[{"max_tokens":4000,"tp":[1],"instances":[2]}, ...]}.
 */
#ifndef SPEC_BUCKET_H
#define SPEC_BUCKET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"

#define SPEC_BUCKETS_MAX 8
#define SPEC_BUCKET_TPS_MAX 4

struct spec_bucket {
    int64_t max_tokens;                 /* upper bound on remaining generated tokens */
    int n_tp;                           /* TP sizes serving this bucket, ascending */
    int tp[SPEC_BUCKET_TPS_MAX];        /* each in {1, 2, 4, 8} */
    int instances[SPEC_BUCKET_TPS_MAX]; /* instances of tp[i]; 0 when unspecified */
};

struct spec_bucket_layout {
    int n;                                      /* buckets, 1..SPEC_BUCKETS_MAX */
    struct spec_bucket bucket[SPEC_BUCKETS_MAX]; /* strictly ascending max_tokens */
};

#endif
