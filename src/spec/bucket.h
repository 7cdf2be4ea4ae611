/*
 * Bucket layout: the ordered TP buckets that C-MLFQ routes over and the planner emits.
 *
 * A bucket is a queue level: trajectories whose expected remaining generation is at most
 * max_tokens belong to it, and it is served by instances of one or more TP sizes. The layout
 * lives in spec/ because plan/ produces it and sched/ consumes it, and neither may include the
 * other. Text form: "tp1:4000,tp2:12000,tp4:30000"; a bucket served by several TP sizes is
 * written "tp1+tp2:5000"; instance counts may follow as "tp2x3:12000" (3 TP2 instances).
 * JSON form: {"buckets":[{"max_tokens":4000,"tp":[1],"instances":[2]}, ...]} ("instances"
 * optional), or the text form as a JSON string.
 *
 * The same TP size may serve several buckets ("tp2:3000,tp2:6000,tp4:32768" for the 4B runs):
 * instances belong to a bucket, not to a TP size.
 */
#ifndef SPEC_BUCKET_H
#define SPEC_BUCKET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "util/json.h"

#define SPEC_BUCKETS_MAX 8
#define SPEC_BUCKET_TPS_MAX 4
#define SPEC_BUCKET_TOKENS_MAX 100000000 /* largest max_tokens accepted, tokens */
/* largest instance count of one TP size: as many as a cluster has GPUs (cluster.gpus) */
#define SPEC_BUCKET_INSTANCES_MAX 65536
#define SPEC_BUCKET_TEXT_MAX 512 /* enough for the text form of any valid layout */

struct spec_bucket {
    int64_t max_tokens;                 /* upper bound on remaining generated tokens */
    int n_tp;                           /* TP sizes serving this bucket, ascending */
    int tp[SPEC_BUCKET_TPS_MAX];        /* each in {1, 2, 4, 8} */
    int instances[SPEC_BUCKET_TPS_MAX]; /* instances of tp[i]; 0 when unspecified */
};

struct spec_bucket_layout {
    int n;                                       /* buckets, 1..SPEC_BUCKETS_MAX */
    struct spec_bucket bucket[SPEC_BUCKETS_MAX]; /* strictly ascending max_tokens */
};

/*
 * Checks every invariant of a layout: 1..SPEC_BUCKETS_MAX buckets, max_tokens in
 * 1..SPEC_BUCKET_TOKENS_MAX and strictly ascending, 1..SPEC_BUCKET_TPS_MAX TP sizes per bucket,
 * each in {1, 2, 4, 8}, strictly ascending within a bucket, instance counts in
 * 0..SPEC_BUCKET_INSTANCES_MAX. Returns 0, or LIBRA_EINVAL with err naming the bucket (1-based)
 * and the rule broken.
 */
int spec_bucket_validate(const struct spec_bucket_layout *l, struct libra_error *err);

/*
 * Parses the text form (NUL-terminated), in its one spelling:
 *
 *   layout := bucket ("," bucket)*      bucket := tp ("+" tp)* ":" number
 *   tp     := "tp" ("1"|"2"|"4"|"8") ("x" number)?     number := [1-9][0-9]*
 *
 * lower case, no spaces, no leading zeros; anything else is refused at its byte, quoted. TP
 * sizes listed out of order within a bucket are sorted. name labels messages (a file, or
 * "--buckets"); err gets name:1:COL with COL the 1-based byte column of the fault. Returns 0
 * with *out valid, or LIBRA_EINVAL (*out unspecified).
 */
int spec_bucket_parse(struct spec_bucket_layout *out, const char *text, const char *name,
                      struct libra_error *err);

/*
 * Writes the text form of l into buf (size bytes, NUL-terminated, truncated when short;
 * SPEC_BUCKET_TEXT_MAX always suffices). Instance counts appear only when non-zero, so
 * spec_bucket_parse(spec_bucket_format(l)) == l for a valid l. Returns the length the full text
 * needs, excluding the NUL (snprintf's contract).
 */
size_t spec_bucket_format(const struct spec_bucket_layout *l, char *buf, size_t size);

/*
 * Reads a layout from the JSON value at path in doc (either form in the header comment).
 * Unknown keys, wrong types and invalid layouts fail with err at doc's file:line:col of the
 * offending member. Returns 0 or LIBRA_EINVAL.
 */
int spec_bucket_from_json(struct spec_bucket_layout *out, const struct ujson_doc *doc,
                          const char *path, struct libra_error *err);

/* Returns a new reference to l's JSON object form ("instances" only when some are non-zero). */
json_t *spec_bucket_to_json(const struct spec_bucket_layout *l);

/* ---- per-node TP patterns ------------------------------------------------------------------- */

#define SPEC_TP_SIZES 4 /* TP sizes 1, 2, 4, 8: arrays indexed by log2(TP) */

/* Index of TP size tp (1, 2, 4, 8) in arrays by log2(TP); sizes above 8 take 8's. */
static inline int spec_tp_index(int tp)
{
    int k = 0;
    while ((1 << k) < tp && k < SPEC_TP_SIZES - 1)
        k++;
    return k;
}
#define SPEC_PATTERN_MAX 16 /* instances in one node's TP pattern */

/*
 * plan.tp_pattern: the TP sizes of the instances on every rollout node ("1,1,2,4" is the
 * reference's R2E-Gym layout: two TP1, one TP2 and one TP4 per 8-GPU node). Frameworks that
 * start engines from a fixed per-node recipe can only run such plans; the planner then only
 * chooses the split and the training layout.
 *
 * Parses text (NUL-terminated): TP sizes in {1, 2, 4, 8}, optionally written "tp4", separated
 * by commas, without spaces (as a bucket layout: a spaced pattern would be the same plan under
 * another config digest), at most SPEC_PATTERN_MAX. Fills counts (instances by log2(TP)) and
 * *gpus (their sum); "" is no pattern: zero counts and gpus.
 * Returns 0, or LIBRA_EINVAL with err at name:1:COL (COL the 1-based byte column of the fault).
 */
int spec_tp_pattern_parse(const char *text, const char *name, int counts[SPEC_TP_SIZES], int *gpus,
                          struct libra_error *err);

/*
 * A fleet of rollout instances in order ("tp1x4,tp2x2,tp4": four TP1, two TP2, one TP4), as
 * `libra emu --instances` takes it. Parses text (NUL-terminated) into tp[0..*n) (at most max
 * instances); a count of 0 ("tp2x0") is refused. Returns 0, or LIBRA_EINVAL with err at
 * name:1:COL.
 */
int spec_fleet_parse(const char *text, const char *name, int *tp, int max, int *n,
                     struct libra_error *err);

/*
 * Fills *out with the reference layout of a workload on a model (spec §4): "r2e-gym" and
 * "search-r1" on "qwen3-14b", "dapo-math" and "r2e-gym" on "qwen3-4b". Names are matched
 * case-insensitively; model may be NULL, meaning the workload's first listed model. Returns 0,
 * or LIBRA_ENOENT when there is no reference layout for the pair.
 */
int spec_bucket_default(struct spec_bucket_layout *out, const char *workload, const char *model);

/* Index of the first bucket whose max_tokens >= tokens, else of the last bucket (spec §4). */
int spec_bucket_index(const struct spec_bucket_layout *l, int64_t tokens);

/* Whether bucket b of l is served by TP size tp. */
bool spec_bucket_has_tp(const struct spec_bucket *b, int tp);

/*
 * Whether a cluster of gpus GPUs in nodes of gpus_per_node can run an instance of every TP size
 * l serves: an instance takes tp GPUs of one node (the planner's fleets, the simulator's
 * placement). A layout that fails is one no fleet of that cluster can serve, so scoring routes
 * over it would price buckets that cannot exist. Returns 0, or LIBRA_EINVAL with err naming the
 * first such bucket and the bound (cluster.gpus, else cluster.gpus_per_node).
 */
int spec_bucket_check_cluster(const struct spec_bucket_layout *l, int gpus, int gpus_per_node,
                              struct libra_error *err);

#endif
