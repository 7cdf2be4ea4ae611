/*
 * Routing metrics accumulator; see metrics.h for the definitions. Counts are kept per split
 * and summed for "all" at output, so a decision is added once.
 */
#include "sched/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/stats.h"
#include "util/vec.h"

typedef VEC(double) double_vec;

struct split_acc {
    uint64_t trajectories;
    uint64_t decisions, correct, moves;
    double tokens, tokens_correct;
    uint64_t true_count[SPEC_BUCKETS_MAX];    /* decisions by true bucket */
    uint64_t correct_count[SPEC_BUCKETS_MAX]; /* of which chosen right */
    uint64_t first, first_correct;
    double_vec predicted, truth; /* decisions with an estimate */
};

struct sched_metrics {
    struct spec_bucket_layout layout;
    struct split_acc split[SCHED_SPLIT_COUNT];
};

struct sched_metrics *sched_metrics_new(const struct spec_bucket_layout *layout)
{
    struct sched_metrics *m = xcalloc(1, sizeof *m);
    m->layout = *layout;
    return m;
}

void sched_metrics_free(struct sched_metrics *m)
{
    if (!m)
        return;
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++) {
        vec_free(&m->split[s].predicted);
        vec_free(&m->split[s].truth);
    }
    free(m);
}

void sched_metrics_add_traj(struct sched_metrics *m, enum sched_split split)
{
    m->split[split].trajectories++;
}

void sched_metrics_add(struct sched_metrics *m, const struct sched_metric_point *p)
{
    struct split_acc *a = &m->split[p->split];
    int truth = spec_bucket_index(&m->layout, p->true_remaining_tokens);
    bool right = p->chosen_bucket == truth;
    if (p->first) {
        a->first++;
        a->first_correct += right;
        return;
    }
    a->decisions++;
    a->correct += right;
    a->moves += p->chosen_bucket != p->from_bucket;
    a->tokens += (double)p->true_remaining_tokens;
    a->tokens_correct += right ? (double)p->true_remaining_tokens : 0.0;
    a->true_count[truth]++;
    a->correct_count[truth] += right;
    if (!isnan(p->predicted_tokens)) {
        vec_push(&a->predicted, p->predicted_tokens);
        vec_push(&a->truth, (double)p->true_remaining_tokens);
    }
}

/* Sums the splits whose bit is set in mask into out (vectors concatenated; free them). */
static void sum_splits(const struct sched_metrics *m, unsigned mask, struct split_acc *out)
{
    memset(out, 0, sizeof *out);
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++) {
        if (!(mask & (1u << s)))
            continue;
        const struct split_acc *a = &m->split[s];
        out->trajectories += a->trajectories;
        out->decisions += a->decisions;
        out->correct += a->correct;
        out->moves += a->moves;
        out->tokens += a->tokens;
        out->tokens_correct += a->tokens_correct;
        out->first += a->first;
        out->first_correct += a->first_correct;
        for (int b = 0; b < SPEC_BUCKETS_MAX; b++) {
            out->true_count[b] += a->true_count[b];
            out->correct_count[b] += a->correct_count[b];
        }
        for (size_t i = 0; i < a->predicted.n; i++) {
            vec_push(&out->predicted, a->predicted.v[i]);
            vec_push(&out->truth, a->truth.v[i]);
        }
    }
}

uint64_t sched_metrics_decisions(const struct sched_metrics *m)
{
    uint64_t n = 0;
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++)
        n += m->split[s].decisions;
    return n;
}

double sched_metrics_accuracy(const struct sched_metrics *m)
{
    uint64_t n = sched_metrics_decisions(m), right = 0;
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++)
        right += m->split[s].correct;
    return n ? (double)right / (double)n : NAN;
}

/* A ratio as JSON: null when undefined. */
static json_t *ratio(double num, double den, bool defined)
{
    return defined && den > 0 ? json_real(num / den) : json_null();
}

static json_t *split_json(const struct sched_metrics *m, const struct split_acc *a, bool bucketless)
{
    bool acc = !bucketless;
    int major = 0;
    json_t *recall = json_array();
    for (int b = 0; b < m->layout.n; b++) {
        if (a->true_count[b] > a->true_count[major])
            major = b;
        json_array_append_new(recall,
                              ratio((double)a->correct_count[b], (double)a->true_count[b], acc));
    }
    double rho =
        a->predicted.n >= 2 ? stats_spearman(a->predicted.v, a->truth.v, a->predicted.n) : NAN;
    json_t *o = json_object();
    json_object_set_new(o, "trajectories", json_integer((json_int_t)a->trajectories));
    json_object_set_new(o, "decisions", json_integer((json_int_t)a->decisions));
    json_object_set_new(o, "accuracy", ratio((double)a->correct, (double)a->decisions, acc));
    json_object_set_new(o, "majority_class",
                        json_pack("{s:i,s:o}", "bucket", major, "accuracy",
                                  ratio((double)a->true_count[major], (double)a->decisions, true)));
    json_object_set_new(o, "per_bucket_recall", recall);
    json_object_set_new(o, "token_weighted_accuracy", ratio(a->tokens_correct, a->tokens, acc));
    json_object_set_new(o, "spearman", isnan(rho) ? json_null() : json_real(rho));
    json_object_set_new(o, "spearman_points", json_integer((json_int_t)a->predicted.n));
    json_object_set_new(o, "moves_per_trajectory",
                        ratio((double)a->moves, (double)a->trajectories, acc));
    json_object_set_new(o, "first_placements",
                        json_pack("{s:I,s:o}", "n", (json_int_t)a->first, "accuracy",
                                  ratio((double)a->first_correct, (double)a->first, acc)));
    return o;
}

json_t *sched_metrics_to_json(const struct sched_metrics *m, bool bucketless)
{
    static const char *const names[SCHED_SPLIT_COUNT] = {"seen", "never", "siblings"};
    json_t *o = json_object();
    struct split_acc sum;
    sum_splits(m, (1u << SCHED_SPLIT_COUNT) - 1, &sum);
    json_object_set_new(o, "all", split_json(m, &sum, bucketless));
    vec_free(&sum.predicted);
    vec_free(&sum.truth);
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++) {
        if (s == SCHED_SPLIT_SIBLINGS && m->split[s].trajectories == 0)
            continue;
        json_object_set_new(o, names[s], split_json(m, &m->split[s], bucketless));
    }
    return o;
}
