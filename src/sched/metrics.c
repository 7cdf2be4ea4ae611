/*
 * Routing metrics accumulator; see metrics.h for the definitions. Counts are kept per split
 * and summed for "all" at output, so a decision is added once. The (estimate, truth) pairs
 * the Spearman correlation needs are the one thing that would grow with the run: each split,
 * and "all", keeps at most SAMPLE_MAX of them, a uniform sample (reservoir sampling, keyed by
 * the pair's index) once there are more. "all" is the splits' pairs put together while they
 * fit, so short runs are exact.
 */
#include "sched/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/rng.h"
#include "util/stats.h"
#include "util/vec.h"

#define SAMPLE_MAX 65536           /* (estimate, truth) pairs kept per split */
#define SAMPLE_KEY 0x5350454152ull /* keys the reservoir's draws */

typedef VEC(double) double_vec;

/* Decisions with an estimate: how many there were, and a sample of them. */
struct pairs {
    uint64_t seen;
    double_vec predicted, truth;
};

struct split_acc {
    uint64_t trajectories;
    uint64_t decisions, correct, moves;
    double tokens, tokens_correct;
    uint64_t true_count[SPEC_BUCKETS_MAX]; /* decisions by true bucket */
    /* decisions by true bucket (row) and chosen bucket (column); the diagonal is correct */
    uint64_t confusion[SPEC_BUCKETS_MAX][SPEC_BUCKETS_MAX];
    uint64_t first, first_correct;
    struct pairs pairs; /* decisions with an estimate */
    struct regret_acc {
        uint64_t n;
        double sum, const_sum[SPEC_BUCKETS_MAX];
    } regret, traj_regret, path_regret; /* per scored decision, trajectory (sum), path */
};

struct sched_metrics {
    struct spec_bucket_layout layout;
    uint64_t trajectories; /* counted once each, whatever splits their decisions fall in */
    struct split_acc split[SCHED_SPLIT_COUNT];
    struct pairs all; /* every split's, for when they do not fit together */
    bool siblings;    /* the JSON has the siblings split */
};

static void pairs_free(struct pairs *p)
{
    vec_free(&p->predicted);
    vec_free(&p->truth);
}

/* Adds a pair to p's sample (algorithm R; stream tells p's draws from other samples'). */
static void pairs_add(struct pairs *p, uint64_t stream, double predicted, double truth)
{
    uint64_t i = p->seen++;
    if (i < SAMPLE_MAX) {
        vec_push(&p->predicted, predicted);
        vec_push(&p->truth, truth);
        return;
    }
    uint64_t j = rng_hash(SAMPLE_KEY, (const uint64_t[]){stream, i}, 2) % (i + 1);
    if (j < SAMPLE_MAX) {
        p->predicted.v[j] = predicted;
        p->truth.v[j] = truth;
    }
}

struct sched_metrics *sched_metrics_new(const struct spec_bucket_layout *layout)
{
    struct sched_metrics *m = xcalloc(1, sizeof *m);
    m->layout = *layout;
    m->siblings = true;
    return m;
}

void sched_metrics_without_siblings(struct sched_metrics *m)
{
    m->siblings = false;
}

void sched_metrics_free(struct sched_metrics *m)
{
    if (!m)
        return;
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++)
        pairs_free(&m->split[s].pairs);
    pairs_free(&m->all);
    free(m);
}

void sched_metrics_add_traj(struct sched_metrics *m, enum sched_split split)
{
    m->trajectories++;
    m->split[split].trajectories++;
}

void sched_metrics_add_traj_split(struct sched_metrics *m, enum sched_split split)
{
    m->split[split].trajectories++;
}

static void regret_add(struct regret_acc *r, double regret, const double *const_regret, int n)
{
    r->n++;
    r->sum += regret;
    for (int b = 0; b < n; b++)
        r->const_sum[b] += const_regret[b];
}

void sched_metrics_add_traj_regret(struct sched_metrics *m, enum sched_split split,
                                   const struct sched_traj_regret *r)
{
    struct split_acc *a = &m->split[split];
    regret_add(&a->traj_regret, r->decisions_gpu_s, r->const_decisions_gpu_s, m->layout.n);
    regret_add(&a->path_regret, r->path_gpu_s, r->const_path_gpu_s, m->layout.n);
}

void sched_metrics_add(struct sched_metrics *m, const struct sched_metric_point *p)
{
    struct split_acc *a = &m->split[p->split];
    if (p->scored)
        regret_add(&a->regret, p->regret_gpu_s, p->const_regret_gpu_s, m->layout.n);
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
    if (p->chosen_bucket >= 0 && p->chosen_bucket < m->layout.n)
        a->confusion[truth][p->chosen_bucket]++;
    if (!isnan(p->predicted_tokens)) {
        double truth_tokens = (double)p->true_remaining_tokens;
        pairs_add(&a->pairs, (uint64_t)p->split, p->predicted_tokens, truth_tokens);
        pairs_add(&m->all, SCHED_SPLIT_COUNT, p->predicted_tokens, truth_tokens);
    }
}

static void pairs_append(struct pairs *to, const struct pairs *from)
{
    for (size_t i = 0; i < from->predicted.n; i++) {
        vec_push(&to->predicted, from->predicted.v[i]);
        vec_push(&to->truth, from->truth.v[i]);
    }
}

/* Sums every split into out, the pairs concatenated while they fit (free them). */
static void sum_splits(const struct sched_metrics *m, struct split_acc *out)
{
    memset(out, 0, sizeof *out);
    out->trajectories = m->trajectories;
    bool fit = m->all.seen <= SAMPLE_MAX;
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++) {
        const struct split_acc *a = &m->split[s];
        out->decisions += a->decisions;
        out->correct += a->correct;
        out->moves += a->moves;
        out->tokens += a->tokens;
        out->tokens_correct += a->tokens_correct;
        out->first += a->first;
        out->first_correct += a->first_correct;
        for (int b = 0; b < SPEC_BUCKETS_MAX; b++) {
            out->true_count[b] += a->true_count[b];
            for (int c = 0; c < SPEC_BUCKETS_MAX; c++)
                out->confusion[b][c] += a->confusion[b][c];
        }
        for (int k = 0; k < 3; k++) {
            const struct regret_acc *from = k == 2 ? &a->path_regret
                                            : k    ? &a->traj_regret
                                                   : &a->regret;
            struct regret_acc *to = k == 2 ? &out->path_regret
                                    : k    ? &out->traj_regret
                                           : &out->regret;
            to->n += from->n;
            to->sum += from->sum;
            for (int b = 0; b < SPEC_BUCKETS_MAX; b++)
                to->const_sum[b] += from->const_sum[b];
        }
        if (fit)
            pairs_append(&out->pairs, &a->pairs);
    }
    if (!fit)
        pairs_append(&out->pairs, &m->all);
    out->pairs.seen = m->all.seen;
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

/* The means of one row's regrets (b < 0: the policy's, else always bucket b's) into o; null
 * when undefined (the policy's own, when it chooses no bucket). */
static void regret_means(json_t *o, const struct split_acc *a, int b, bool defined)
{
    const struct regret_acc *acc[3] = {&a->regret, &a->traj_regret, &a->path_regret};
    static const char *const names[3] = {"per_decision_gpu_s", "per_trajectory_gpu_s",
                                         "path_per_trajectory_gpu_s"};
    for (int k = 0; k < 3; k++)
        json_object_set_new(
            o, names[k],
            ratio(b < 0 ? acc[k]->sum : acc[k]->const_sum[b], (double)acc[k]->n, defined));
}

static json_t *constant_json(const struct split_acc *a, int b)
{
    json_t *o = json_pack("{s:i}", "bucket", b);
    regret_means(o, a, b, true);
    return o;
}

/* A bucketless policy's own regrets would charge the bucket its caller placed it in: null. */
static json_t *regret_json(const struct sched_metrics *m, const struct split_acc *a, int major,
                           bool bucketless)
{
    int best = 0;
    for (int b = 1; b < m->layout.n; b++)
        if (a->regret.const_sum[b] < a->regret.const_sum[best])
            best = b;
    json_t *o = json_object();
    json_object_set_new(o, "decisions", json_integer((json_int_t)a->regret.n));
    json_object_set_new(o, "trajectories", json_integer((json_int_t)a->traj_regret.n));
    regret_means(o, a, -1, !bucketless);
    json_object_set_new(o, "majority_class", constant_json(a, major));
    json_object_set_new(o, "best_constant", constant_json(a, best));
    return o;
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
                              ratio((double)a->confusion[b][b], (double)a->true_count[b], acc));
    }
    const struct pairs *p = &a->pairs;
    double rho =
        p->predicted.n >= 2 ? stats_spearman(p->predicted.v, p->truth.v, p->predicted.n) : NAN;
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
    json_object_set_new(o, "spearman_points", json_integer((json_int_t)p->seen));
    json_object_set_new(o, "moves_per_trajectory",
                        ratio((double)a->moves, (double)a->trajectories, acc));
    json_object_set_new(o, "first_placements",
                        json_pack("{s:I,s:o}", "n", (json_int_t)a->first, "accuracy",
                                  ratio((double)a->first_correct, (double)a->first, acc)));
    if (a->regret.n)
        json_object_set_new(o, "regret", regret_json(m, a, major, bucketless));
    return o;
}

json_t *sched_metrics_to_json(const struct sched_metrics *m, bool bucketless)
{
    static const char *const names[SCHED_SPLIT_COUNT] = {"seen", "never", "siblings"};
    json_t *o = json_object();
    struct split_acc sum;
    sum_splits(m, &sum);
    json_object_set_new(o, "all", split_json(m, &sum, bucketless));
    pairs_free(&sum.pairs);
    for (int s = 0; s < SCHED_SPLIT_COUNT; s++) {
        if (s != SCHED_SPLIT_SIBLINGS || m->siblings)
            json_object_set_new(o, names[s], split_json(m, &m->split[s], bucketless));
    }
    return o;
}

json_t *sched_metrics_confusion_json(const struct sched_metrics *m, bool bucketless)
{
    if (bucketless)
        return json_null();
    struct split_acc sum;
    sum_splits(m, &sum);
    pairs_free(&sum.pairs);
    json_t *rows = json_array();
    for (int t = 0; t < m->layout.n; t++) {
        json_t *row = json_array();
        for (int c = 0; c < m->layout.n; c++)
            json_array_append_new(row, json_integer((json_int_t)sum.confusion[t][c]));
        json_array_append_new(rows, row);
    }
    return rows;
}
