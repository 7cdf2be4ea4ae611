/* Tests of the routing metrics (src/sched/metrics.c) on hand-counted decisions. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "sched/metrics.h"

static double num(const json_t *o, const char *path)
{
    json_t *v = json_object_get(o, path);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static void add(struct sched_metrics *m, enum sched_split split, bool first, int from, int chosen,
                int64_t truth, double predicted)
{
    struct sched_metric_point p = {.split = split,
                                   .first = first,
                                   .from_bucket = from,
                                   .chosen_bucket = chosen,
                                   .true_remaining_tokens = truth,
                                   .predicted_tokens = predicted};
    sched_metrics_add(m, &p);
}

static void test_hand_counted(void **state)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, "tp1:1000,tp4:10000", "t", NULL), 0);
    struct sched_metrics *m = sched_metrics_new(&l);
    assert_true(isnan(sched_metrics_accuracy(m)));
    sched_metrics_add_traj(m, SCHED_SPLIT_SEEN);
    sched_metrics_add_traj(m, SCHED_SPLIT_NEVER);
    add(m, SCHED_SPLIT_SEEN, true, -1, 0, 5000, NAN);  /* first placement: wrong */
    add(m, SCHED_SPLIT_SEEN, false, 0, 1, 5000, 4000); /* move, right, 5000 tokens */
    add(m, SCHED_SPLIT_SEEN, false, 1, 1, 100, 3000);  /* stay, wrong (truth 0), 100 tokens */
    add(m, SCHED_SPLIT_NEVER, true, -1, 0, 50, NAN);   /* first placement: right */
    add(m, SCHED_SPLIT_NEVER, false, 0, 0, 40, 5000);  /* right */
    add(m, SCHED_SPLIT_NEVER, false, 0, 0, 30, NAN);   /* right, no estimate */
    assert_close(sched_metrics_accuracy(m), 0.75, 1e-12);
    assert_int_equal(sched_metrics_decisions(m), 4);
    json_t *j = sched_metrics_to_json(m, false);
    json_t *all = json_object_get(j, "all");
    assert_int_equal(num(all, "decisions"), 4);
    assert_close(num(all, "accuracy"), 0.75, 1e-12);
    json_t *maj = json_object_get(all, "majority_class");
    assert_int_equal(num(maj, "bucket"), 0); /* true buckets 1, 0, 0, 0 */
    assert_close(num(maj, "accuracy"), 0.75, 1e-12);
    json_t *recall = json_object_get(all, "per_bucket_recall");
    assert_close(json_number_value(json_array_get(recall, 0)), 2.0 / 3.0, 1e-12);
    assert_close(json_number_value(json_array_get(recall, 1)), 1.0, 1e-12);
    assert_close(num(all, "token_weighted_accuracy"), 5070.0 / 5170.0, 1e-12);
    assert_int_equal(num(all, "spearman_points"), 3);
    /* predicted ranks (2, 1, 3) against true ranks (3, 2, 1): 1 - 6 * 6 / (3 * 8) */
    assert_close(num(all, "spearman"), -0.5, 1e-12);
    assert_close(num(all, "moves_per_trajectory"), 0.5, 1e-12);
    json_t *first = json_object_get(all, "first_placements");
    assert_int_equal(num(first, "n"), 2);
    assert_close(num(first, "accuracy"), 0.5, 1e-12);
    json_t *seen = json_object_get(j, "seen");
    assert_close(num(seen, "accuracy"), 0.5, 1e-12);
    /* the siblings split is there with no decisions (the document's shape is not a count's),
     * unless left out (route eval) */
    assert_int_equal(num(json_object_get(j, "siblings"), "decisions"), 0);
    json_decref(j);
    sched_metrics_without_siblings(m);
    j = sched_metrics_to_json(m, false);
    assert_null(json_object_get(j, "siblings"));
    assert_non_null(json_object_get(j, "never"));
    json_decref(j);

    /* true bucket by row, chosen by column, first placements left out: the seen split's wrong
     * stay (truth 0, chosen 1), its right move (1, 1) and the never split's two (0, 0) */
    j = sched_metrics_confusion_json(m, false);
    assert_int_equal(json_array_size(j), 2);
    static const int want[2][2] = {{2, 1}, {0, 1}};
    for (size_t t = 0; t < 2; t++)
        for (size_t c = 0; c < 2; c++)
            assert_int_equal(json_integer_value(json_array_get(json_array_get(j, t), c)),
                             want[t][c]);
    json_decref(j);
    j = sched_metrics_confusion_json(m, true);
    assert_true(json_is_null(j));
    json_decref(j);

    j = sched_metrics_to_json(m, true); /* bucketless: accuracies undefined */
    all = json_object_get(j, "all");
    assert_true(json_is_null(json_object_get(all, "accuracy")));
    assert_true(json_is_null(json_object_get(all, "token_weighted_accuracy")));
    assert_true(
        json_is_number(json_object_get(json_object_get(all, "majority_class"), "accuracy")));
    json_decref(j);
    sched_metrics_free(m);
}

/* Regret sums per split and per row: the policy's, the majority class's (the bucket of most
 * true labels) and the best constant's (the least per-decision regret), each a mean over
 * scored decisions and over scored trajectories. Without scored decisions there is no key. */
static void test_regret_rows(void **state)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, "tp1:1000,tp4:10000", "t", NULL), 0);
    struct sched_metrics *m = sched_metrics_new(&l);
    json_t *j = sched_metrics_to_json(m, false);
    assert_null(json_object_get(json_object_get(j, "all"), "regret"));
    json_decref(j);
    struct sched_metric_point p = {.split = SCHED_SPLIT_NEVER,
                                   .chosen_bucket = 0,
                                   .true_remaining_tokens = 50,
                                   .predicted_tokens = NAN,
                                   .scored = true,
                                   .regret_gpu_s = 2,
                                   .const_regret_gpu_s = {0, 6}};
    sched_metrics_add(m, &p); /* truth bucket 0 */
    p.true_remaining_tokens = 60;
    p.regret_gpu_s = 4;
    p.const_regret_gpu_s[0] = 10;
    p.const_regret_gpu_s[1] = 0;
    sched_metrics_add(m, &p); /* truth bucket 0 again: the majority is bucket 0 */
    struct sched_traj_regret tr = {.decisions_gpu_s = 6,
                                   .path_gpu_s = -1,
                                   .const_decisions_gpu_s = {10, 6},
                                   .const_path_gpu_s = {3, 0}};
    sched_metrics_add_traj_regret(m, SCHED_SPLIT_NEVER, &tr);
    j = sched_metrics_to_json(m, false);
    json_t *r = json_object_get(json_object_get(j, "all"), "regret");
    assert_int_equal(num(r, "decisions"), 2);
    assert_int_equal(num(r, "trajectories"), 1);
    assert_close(num(r, "per_decision_gpu_s"), 3, 1e-12);
    assert_close(num(r, "per_trajectory_gpu_s"), 6, 1e-12);
    assert_close(num(r, "path_per_trajectory_gpu_s"), -1, 1e-12);
    json_t *maj = json_object_get(r, "majority_class");
    assert_int_equal(num(maj, "bucket"), 0);
    assert_close(num(maj, "per_decision_gpu_s"), 5, 1e-12);
    assert_close(num(maj, "path_per_trajectory_gpu_s"), 3, 1e-12);
    json_t *best = json_object_get(r, "best_constant");
    assert_int_equal(num(best, "bucket"), 1); /* 3 per decision against bucket 0's 5 */
    assert_close(num(best, "per_decision_gpu_s"), 3, 1e-12);
    assert_close(num(best, "per_trajectory_gpu_s"), 6, 1e-12);
    assert_true(json_object_get(json_object_get(j, "never"), "regret") != NULL);
    assert_null(json_object_get(json_object_get(j, "seen"), "regret"));
    json_decref(j);

    /* bucketless: the policy's own regrets charged a bucket it did not choose: null; the counts
     * and the constant rows stay */
    j = sched_metrics_to_json(m, true);
    r = json_object_get(json_object_get(j, "all"), "regret");
    assert_true(json_is_null(json_object_get(r, "per_decision_gpu_s")));
    assert_true(json_is_null(json_object_get(r, "per_trajectory_gpu_s")));
    assert_true(json_is_null(json_object_get(r, "path_per_trajectory_gpu_s")));
    assert_int_equal(num(r, "decisions"), 2);
    assert_close(num(json_object_get(r, "majority_class"), "per_decision_gpu_s"), 5, 1e-12);
    assert_close(num(json_object_get(r, "best_constant"), "per_decision_gpu_s"), 3, 1e-12);
    json_decref(j);
    sched_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_hand_counted),
                                       cmocka_unit_test(test_regret_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
