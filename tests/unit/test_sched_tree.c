/*
 * Tests of the prefix trees (src/sched/model.c, tree.c, tree_json.c): node statistics, the
 * censored estimator, look-up order, rebuilds, memory caps, persistence, and a differential
 * test against a naive list of every sample with a product-limit Kaplan-Meier.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/model.h"
#include "util/rng.h"

/* Inserts a trajectory: path of state keys, tokens generated before each, total. */
static void put(struct sched_model *m, uint64_t prompt, double start, const char *const *keys,
                const int64_t *gen, size_t n, int64_t total, bool censored)
{
    uint32_t ids[16];
    for (size_t i = 0; i < n; i++)
        ids[i] = sched_model_state(m, keys[i]);
    struct sched_traj_summary s = {.prompt = prompt,
                                   .start = start,
                                   .censored = censored,
                                   .total_tokens = total,
                                   .n = n,
                                   .states = ids,
                                   .gen_before = gen};
    assert_int_equal(sched_model_insert(m, &s), 0);
}

static void look(struct sched_model *m, uint64_t prompt, const char *const *keys, size_t n,
                 struct sched_estimate *e)
{
    uint32_t ids[16];
    for (size_t i = 0; i < n; i++)
        ids[i] = sched_model_state(m, keys[i]);
    sched_model_lookup(m, prompt, ids, n, e);
}

static void test_node_statistics_exact(void **state)
{
    struct sched_model *m = sched_model_new(NULL);
    const char *path[] = {"s:small:success"};
    for (int64_t v = 1; v <= 10; v++) {
        int64_t gen[] = {100};
        put(m, 7, (double)v, path, gen, 1, 100 + v * 100, false);
    }
    struct sched_estimate e;
    look(m, 7, NULL, 0, &e); /* the root holds the totals: 200..1100 */
    assert_true(e.found && e.exact && e.from_prompt);
    assert_int_equal(e.visits, 10);
    assert_close(e.mean_tokens, 650.0, 1e-12);
    assert_close(e.p90_tokens, 1000.0, 0); /* nearest rank: 9th of 10 */
    look(m, 7, path, 1, &e);               /* the node holds the remaining tokens: 100..1000 */
    assert_int_equal(e.depth, 1);
    assert_close(e.mean_tokens, 550.0, 1e-12);
    assert_close(e.p90_tokens, 900.0, 0);
    sched_model_free(m);
}

static void test_censored_samples_raise_mean_and_p90(void **state)
{
    struct sched_model *m = sched_model_new(NULL);
    for (int64_t v = 100; v <= 1000; v += 100)
        put(m, 1, 0, NULL, NULL, 0, v, false);
    struct sched_estimate e;
    look(m, 1, NULL, 0, &e);
    assert_close(e.p90_tokens, 900.0, 0);
    /* A trajectory cut at 950: at least 950. Kaplan-Meier moves its mass to 1000, so the p90
     * becomes 1000; the mean takes E[X | X > 950] = 1000 for it. */
    put(m, 1, 0, NULL, NULL, 0, 950, true);
    look(m, 1, NULL, 0, &e);
    assert_close(e.p90_tokens, 1000.0, 0);
    assert_close(e.mean_tokens, (5500.0 + 1000.0) / 11.0, 1e-12);
    /* Cut above everything seen: the lower bound itself, never less. */
    put(m, 1, 0, NULL, NULL, 0, 5000, true);
    look(m, 1, NULL, 0, &e);
    assert_close(e.mean_tokens, (6500.0 + 5000.0) / 12.0, 1e-12);
    assert_close(e.p90_tokens, 5000.0, 0);
    /* Cut below the mean: imputed above it, so the mean still rises. */
    double before = e.mean_tokens;
    put(m, 1, 0, NULL, NULL, 0, 150, true);
    look(m, 1, NULL, 0, &e);
    assert_true(e.mean_tokens > before);
    sched_model_free(m);

    /* Past the largest exact sample the data say only "more than c": a cut there raises
     * nothing beyond its own bound, and no mass is carried up to a larger bound (which would
     * let one outlier set the estimate). */
    m = sched_model_new(NULL);
    put(m, 2, 0, NULL, NULL, 0, 100, false);
    put(m, 2, 0, NULL, NULL, 0, 200, true);
    put(m, 2, 0, NULL, NULL, 0, 10000, true);
    put(m, 2, 0, NULL, NULL, 0, 150, true);
    look(m, 2, NULL, 0, &e);
    assert_close(e.mean_tokens, (100.0 + 200.0 + 10000.0 + 150.0) / 4.0, 1e-12);
    assert_close(e.p90_tokens, 10000.0, 0);
    sched_model_free(m);
}

static void test_lookup_order(void **state)
{
    struct sched_model *m = sched_model_new(NULL);
    const char *a[] = {"t:small:success", "t:large:failure"};
    const char *b[] = {"t:small:success", "t:small:success"};
    int64_t gen[] = {10, 20};
    put(m, 1, 0, a, gen, 2, 1000, false); /* prompt 1 knows path a */
    put(m, 2, 1, b, gen, 2, 5000, false); /* prompt 2 knows path b */
    struct sched_estimate e;
    look(m, 1, a, 2, &e);
    assert_true(e.exact && e.from_prompt);
    assert_close(e.mean_tokens, 980.0, 0);
    look(m, 1, b, 2, &e); /* not in prompt 1's tree: the global tree */
    assert_true(e.exact && !e.from_prompt);
    assert_close(e.mean_tokens, 4980.0, 0);
    look(m, 3, a, 2, &e); /* unseen prompt: global */
    assert_true(e.exact && !e.from_prompt);
    const char *c[] = {"t:small:success", "u:small:timeout"};
    look(m, 1, c, 2, &e); /* nowhere: the deepest partial match, flagged inexact */
    assert_true(e.found && !e.exact);
    assert_int_equal(e.depth, 1);
    sched_model_free(m);

    m = sched_model_new(NULL);
    look(m, 1, NULL, 0, &e); /* an empty model finds nothing */
    assert_false(e.found);
    sched_model_free(m);
}

/* sched_model_estimate without shrinkage (shrink_estimate: with it). */
static void shrink_estimate(struct sched_model *m, uint64_t prompt, const char *const *keys,
                            size_t n, uint32_t min_visits, uint32_t shrink_visits,
                            struct sched_estimate *e)
{
    uint32_t ids[16];
    for (size_t i = 0; i < n; i++)
        ids[i] = sched_model_state(m, keys[i]);
    struct sched_lookup opt = {.min_visits = min_visits, .shrink_visits = shrink_visits};
    sched_model_estimate(m, prompt, ids, n, &opt, e);
}

static void estimate(struct sched_model *m, uint64_t prompt, const char *const *keys, size_t n,
                     uint32_t min_visits, struct sched_estimate *e)
{
    shrink_estimate(m, prompt, keys, n, min_visits, 0, e);
}

static void test_estimate_backs_off_to_depth(void **state)
{
    struct sched_model *m = sched_model_new(NULL);
    const char *a[] = {"t:small:success"}, *b[] = {"t:large:failure"}, *c[] = {"u:small:timeout"};
    const char *star[] = {"*"};
    int64_t gen[] = {0};
    put(m, 1, 0, a, gen, 1, 1000, false);
    put(m, 1, 1, a, gen, 1, 3000, false);
    put(m, 1, 2, b, gen, 1, 8000, false);
    put(m, 2, 3, b, gen, 1, 20000, false);
    struct sched_estimate e;
    estimate(m, 1, a, 1, 2, &e); /* the prompt's path node, trusted */
    assert_true(e.found && e.exact && e.from_prompt && !e.by_depth);
    assert_close(e.mean_tokens, 2000.0, 0);
    estimate(m, 1, b, 1, 2, &e); /* one visit in the prompt's tree: the global path node */
    assert_true(e.found && !e.from_prompt && !e.by_depth);
    assert_int_equal(e.visits, 2);
    assert_close(e.mean_tokens, 14000.0, 0);
    estimate(m, 1, c, 1, 2, &e); /* a path nobody saw: the prompt's depth node */
    assert_true(e.found && e.exact && e.from_prompt && e.by_depth);
    assert_int_equal(e.visits, 3);
    assert_close(e.mean_tokens, 4000.0, 0);
    estimate(m, 1, c, 1, 4, &e); /* the prompt's depth node too small: the global tree's */
    assert_true(e.found && !e.from_prompt && e.by_depth);
    assert_close(e.mean_tokens, 8000.0, 0);
    estimate(m, 1, c, 1, 5, &e); /* nothing trusted anywhere */
    assert_false(e.found);
    /* A depth-only model (every key "*") answers as the model does on an unknown path. */
    struct sched_model *d = sched_model_new(NULL);
    put(d, 1, 0, star, gen, 1, 1000, false);
    put(d, 1, 1, star, gen, 1, 3000, false);
    put(d, 1, 2, star, gen, 1, 8000, false);
    put(d, 2, 3, star, gen, 1, 20000, false);
    struct sched_estimate f;
    estimate(m, 1, c, 1, 2, &e);
    estimate(d, 1, star, 1, 2, &f);
    assert_true(e.by_depth && f.found && f.from_prompt == e.from_prompt);
    assert_int_equal(e.visits, f.visits);
    assert_close(e.mean_tokens, f.mean_tokens, 0);
    assert_close(e.p90_tokens, f.p90_tokens, 0);
    struct sched_model_stats st;
    sched_model_stats(d, &st);
    assert_int_equal(st.nodes, 6); /* three roots, one child each: the depth path, learnt once */
    sched_model_free(d);
    sched_model_free(m);
}

/* Ten trajectories with 100..1000 remaining after return "a", two with 100 and 200 after "b"
 * (all exact), all of prompt 1. */
static struct sched_model *two_sizes(void)
{
    struct sched_model *m = sched_model_new(NULL);
    const char *a[] = {"a"}, *b[] = {"b"};
    int64_t gen[] = {0};
    for (int64_t v = 100; v <= 1000; v += 100)
        put(m, 1, 0, a, gen, 1, v, false);
    put(m, 1, 0, b, gen, 1, 100, false);
    put(m, 1, 0, b, gen, 1, 200, false);
    return m;
}

static void test_censored_sample_imputed_from_depth_node(void **state)
{
    /* A censored sample enters a node's mean as E[X | X > c] under the global tree's depth
     * node, whatever the node's size: a cut at 150 is imputed 560, the mean of the twelve
     * samples at depth 1 above 150 (200, 200, 300..1000), on the big path and the small one
     * alike. (From the small node's own window it would be 200.) */
    const char *a[] = {"a"}, *b[] = {"b"};
    int64_t gen[] = {0};
    struct sched_model *big = two_sizes(), *small = two_sizes();
    put(big, 1, 0, a, gen, 1, 150, true);
    put(small, 1, 0, b, gen, 1, 150, true);
    struct sched_estimate e;
    look(big, 1, a, 1, &e);
    assert_close(e.mean_tokens, (5500.0 + 560.0) / 11.0, 1e-9);
    look(small, 1, b, 1, &e);
    assert_close(e.mean_tokens, (300.0 + 560.0) / 3.0, 1e-9);
    /* The censored sample's tail in the p90 is the depth node's too: 100 and 200 weigh 1/3
     * each and the cut's 1/3 spreads evenly over the ten samples above 150 (the depth node's
     * own cut passed its mass up evenly), so 0.9 is reached at 700. The raw node (its own
     * window only) says 200. */
    estimate(small, 1, b, 1, 1, &e);
    assert_close(e.p90_tokens, 700.0, 0);
    look(small, 1, b, 1, &e);
    assert_close(e.p90_tokens, 200.0, 0);
    sched_model_free(big);
    sched_model_free(small);
}

static void test_shrinkage_toward_depth_node(void **state)
{
    /* Depth 1 holds 100..1000 (path a) and 5000 (path b, one visit): mean 10500 / 11, p90
     * 1000 (the 10th of 11). */
    struct sched_model *m = sched_model_new(NULL);
    const char *a[] = {"a"}, *b[] = {"b"};
    int64_t gen[] = {0};
    for (int64_t v = 100; v <= 1000; v += 100)
        put(m, 1, 0, a, gen, 1, v, false);
    put(m, 1, 0, b, gen, 1, 5000, false);
    struct sched_estimate e, raw;
    double depth_mean = 10500.0 / 11.0;
    /* k = 0: the node's own estimate, as the spec's deepest node gives it. */
    shrink_estimate(m, 2, b, 1, 1, 0, &e);
    look(m, 2, b, 1, &raw);
    assert_close(e.mean_tokens, raw.mean_tokens, 0);
    assert_close(e.p90_tokens, raw.p90_tokens, 0);
    assert_close(e.mean_tokens, 5000.0, 0);
    /* k = 10: mean (5000 + 10 depth_mean) / 11; p90 of 1/11 at 5000 and 10/11 of the depth
     * node's: 100/121 < 0.9 by 1000, so still 5000. */
    shrink_estimate(m, 2, b, 1, 1, 10, &e);
    assert_false(e.by_depth);
    assert_int_equal(e.visits, 1);
    assert_close(e.mean_tokens, (5000.0 + 10 * depth_mean) / 11.0, 1e-9);
    assert_close(e.p90_tokens, 5000.0, 0);
    /* k = 100: the depth node's 100/101 reaches 0.9 by 1000: the 1-visit node answers
     * nearly as its depth node. */
    shrink_estimate(m, 2, b, 1, 1, 100, &e);
    assert_close(e.mean_tokens, (5000.0 + 100 * depth_mean) / 101.0, 1e-9);
    assert_close(e.p90_tokens, 1000.0, 0);
    /* In prompt 1's tree the node leans on the global node on its path first (one visit,
     * 5000) and on the depth node with what is left, (100 / 101)^2: 0.89 by 1000, so 5000. */
    shrink_estimate(m, 1, b, 1, 1, 100, &e);
    assert_true(e.from_prompt);
    double w_depth = (100.0 / 101) * (100.0 / 101);
    assert_close(e.mean_tokens, (1 - w_depth) * 5000.0 + w_depth * depth_mean, 1e-9);
    assert_close(e.p90_tokens, 5000.0, 0);
    /* A depth node is never shrunk (toward itself): a depth-only tree is unaffected. */
    const char *star[] = {"*"};
    struct sched_estimate d0, d1;
    shrink_estimate(m, 2, star, 1, 1, 0, &d0);
    shrink_estimate(m, 2, star, 1, 1, 100, &d1);
    assert_close(d0.mean_tokens, depth_mean, 1e-9);
    assert_close(d1.mean_tokens, d0.mean_tokens, 0);
    assert_close(d1.p90_tokens, d0.p90_tokens, 0);
    assert_close(d1.p90_tokens, 1000.0, 0);
    sched_model_free(m);
}

/* sched_model_estimate with empirical shrinkage (fixed: the prompt trees' and fallback k). */
static void empirical_estimate(struct sched_model *m, uint64_t prompt, const char *key,
                               uint32_t fixed, struct sched_estimate *e)
{
    uint32_t id = sched_model_state(m, key);
    struct sched_lookup opt = {.min_visits = 1, .shrink_visits = fixed, .empirical_shrink = true};
    sched_model_estimate(m, prompt, &id, 1, &opt, e);
}

static void test_empirical_shrinkage(void **state)
{
    const char *keys[] = {"a", "b", "c", "d"}, *star[] = {"*"};
    int64_t gen[] = {0};
    struct sched_estimate e, depth;
    /* No spread beyond chance (every state holds the same 30 samples, and d one outlier more):
     * a path node answers with its depth node's estimate, exactly, whatever its visits. */
    struct sched_model *m = sched_model_new(NULL);
    for (int64_t v = 100; v <= 3000; v += 100)
        for (int k = 0; k < 4; k++)
            put(m, (uint64_t)(10 + k), 0, &keys[k], gen, 1, v, false);
    put(m, 99, 0, &keys[3], gen, 1, 50000, false); /* one outlier moves d's own mean */
    shrink_estimate(m, 1000, star, 1, 1, 0, &depth);
    empirical_estimate(m, 1000, "d", 50, &e);
    assert_false(e.by_depth);
    assert_close(e.mean_tokens, depth.mean_tokens, 0);
    assert_close(e.p90_tokens, depth.p90_tokens, 0);
    shrink_estimate(m, 1000, &keys[3], 1, 1, 50, &e); /* a fixed k lets the outlier through */
    assert_true(e.mean_tokens > depth.mean_tokens + 100);
    sched_model_free(m);

    /* States that say everything (a: about 200 tokens left, b: about 20 000): each node keeps
     * nearly its own estimate (k 0.55, rounded to 1: the within variance is taken as the
     * depth's whole one, 98e6, against a spread of 177e6), where a fixed k of 50 pulls 20
     * visits most of the way to the depth node. */
    m = sched_model_new(NULL);
    for (int i = 0; i < 20; i++) {
        put(m, 1, 0, &keys[0], gen, 1, 190 + i, false);
        put(m, 1, 0, &keys[1], gen, 1, 19900 + 10 * i, false);
    }
    struct sched_estimate fixed;
    empirical_estimate(m, 1000, "b", 50, &e);
    shrink_estimate(m, 1000, &keys[1], 1, 1, 50, &fixed);
    assert_true(fixed.mean_tokens < 14000);
    assert_true(e.mean_tokens > 19500 && e.mean_tokens < 20000);
    empirical_estimate(m, 1000, "a", 50, &e);
    assert_close(e.mean_tokens, (20 * 199.5 + 10097.25) / 21, 1e-9); /* depth mean 10097.25 */

    /* The spread's sums describe trees learnt here; after a merge the fixed k applies, until
     * a rebuild learns the trees again. */
    struct sched_model *part = sched_model_new(NULL);
    put(part, 2, 0, &keys[0], gen, 1, 200, false);
    sched_model_merge(m, part);
    empirical_estimate(m, 1000, "b", 50, &e);
    shrink_estimate(m, 1000, &keys[1], 1, 1, 50, &fixed);
    assert_close(e.mean_tokens, fixed.mean_tokens, 0);
    sched_model_rebuild(m);
    empirical_estimate(m, 1000, "b", 50, &e);
    assert_true(e.mean_tokens > 19500);
    sched_model_free(part);
    sched_model_free(m);
}

static void test_cached_estimate_follows_learning(void **state)
{
    /* Looked up (and cached) between inserts, or only at the end: the same estimate. */
    struct sched_model *x = two_sizes(), *y = two_sizes();
    const char *a[] = {"a"}, *b[] = {"b"};
    int64_t gen[] = {0};
    struct sched_estimate ex, ey;
    for (int64_t v = 150; v <= 3000; v += 950) {
        shrink_estimate(x, 1, b, 1, 1, 5, &ex);
        shrink_estimate(x, 2, b, 1, 1, 5, &ex);
        put(x, 1, 0, a, gen, 1, v, true);
        put(y, 1, 0, a, gen, 1, v, true);
    }
    for (uint64_t prompt = 1; prompt <= 2; prompt++) {
        shrink_estimate(x, prompt, b, 1, 1, 5, &ex);
        shrink_estimate(y, prompt, b, 1, 1, 5, &ey);
        assert_close(ex.mean_tokens, ey.mean_tokens, 0);
        assert_close(ex.p90_tokens, ey.p90_tokens, 0);
    }
    /* A merge changes the global tree too: looked up before it (x) or not (z), the same. */
    struct sched_model *more = sched_model_new(NULL), *z = two_sizes();
    for (int i = 0; i < 20; i++) /* moves the depth node's p90 from 1000 to 9000 */
        put(more, 3, 0, a, gen, 1, 9000, false);
    for (int64_t v = 150; v <= 3000; v += 950)
        put(z, 1, 0, a, gen, 1, v, true);
    sched_model_merge(x, more);
    sched_model_merge(z, more);
    shrink_estimate(x, 2, b, 1, 1, 5, &ex);
    shrink_estimate(z, 2, b, 1, 1, 5, &ey);
    assert_close(ex.p90_tokens, ey.p90_tokens, 0);
    assert_close(ey.p90_tokens, 9000.0, 0);
    sched_model_free(z);
    sched_model_merge(y, more);
    sched_model_rebuild(x);
    sched_model_rebuild(y);
    shrink_estimate(x, 1, b, 1, 1, 5, &ex);
    shrink_estimate(y, 1, b, 1, 1, 5, &ey);
    assert_close(ex.p90_tokens, ey.p90_tokens, 0);
    sched_model_free(more);
    sched_model_free(x);
    sched_model_free(y);
}

/* Asserts that x and y estimate the path alike, raw and shrunk, from its nodes and (min_visits
 * past any node) from depth nodes. */
static void assert_same_estimate(struct sched_model *x, struct sched_model *y, uint64_t prompt,
                                 const char *const *path, size_t depth)
{
    for (int opt = 0; opt < 4; opt++) {
        struct sched_estimate ex, ey;
        uint32_t min_visits = opt & 1 ? 1000 : 1, shrink = opt & 2 ? 5 : 0;
        shrink_estimate(x, prompt, path, depth, min_visits, shrink, &ex);
        shrink_estimate(y, prompt, path, depth, min_visits, shrink, &ey);
        assert_int_equal(ex.found, ey.found);
        assert_int_equal(ex.by_depth, ey.by_depth);
        if (!ex.found)
            continue;
        assert_close(ex.mean_tokens, ey.mean_tokens, 0);
        assert_close(ex.p90_tokens, ey.p90_tokens, 0);
    }
}

static void test_depth_cache_follows_learning_at_every_depth(void **state)
{
    /* x is looked up after every insert, and keeps the global depth nodes' distributions it
     * computed until a trajectory reaching their depth (or a rebuild) changes them; y, given
     * the same inserts, recomputes them all each time (merging an empty model marks them
     * stale). Trajectories of every length, some censored (imputed from the depth nodes). */
    struct rng r = rng_keyed(7, 1, 0, 0);
    struct sched_model *x = sched_model_new(NULL), *y = sched_model_new(NULL);
    struct sched_model *empty = sched_model_new(NULL);
    const char *keys[] = {"a:small:success", "b:large:failure"};
    for (int t = 0; t < 600; t++) {
        size_t n = (size_t)(rng_u64(&r) % 4);
        const char *path[3];
        int64_t gen[3], g = 0;
        for (size_t d = 0; d < n; d++) {
            path[d] = keys[rng_u64(&r) % 2];
            g += (int64_t)(rng_u64(&r) % 300);
            gen[d] = g;
        }
        int64_t total = g + 1 + (int64_t)(rng_u64(&r) % 3000);
        bool censored = rng_uniform(&r) < 0.3;
        put(x, (uint64_t)t % 4, t, path, gen, n, total, censored);
        put(y, (uint64_t)t % 4, t, path, gen, n, total, censored);
        if (t == 400) {
            sched_model_rebuild(x);
            sched_model_rebuild(y);
        }
        sched_model_merge(y, empty);
        const char *probe[] = {keys[t % 2], keys[(t / 2) % 2], keys[(t / 4) % 2]};
        for (size_t d = 0; d <= 3; d++)
            assert_same_estimate(x, y, (uint64_t)(t + 1) % 4, probe, d);
    }
    sched_model_free(empty);
    sched_model_free(x);
    sched_model_free(y);
}

static void test_rebuild_keeps_most_recent_by_start(void **state)
{
    struct sched_model_config cfg;
    sched_model_config_default(&cfg);
    cfg.history = 5;
    struct sched_model *m = sched_model_new(&cfg);
    /* Inserted out of start order: starts 9, 0, 8, 1, ... ; totals equal 100 * start. */
    double starts[] = {9, 0, 8, 1, 7, 2, 6, 3, 5, 4};
    for (int i = 0; i < 10; i++)
        put(m, (uint64_t)i, starts[i], NULL, NULL, 0, (int64_t)(100 * starts[i]), false);
    struct sched_estimate e;
    look(m, 99, NULL, 0, &e);
    assert_int_equal(e.visits, 10);
    struct sched_model_stats st;
    sched_model_stats(m, &st);
    assert_int_equal(st.history, 5);
    sched_model_rebuild(m);
    look(m, 99, NULL, 0, &e);
    assert_int_equal(e.visits, 5);
    assert_close(e.mean_tokens, 700.0, 1e-12); /* starts 5..9 */
    sched_model_stats(m, &st);
    assert_int_equal(st.trees, 5);
    sched_model_free(m);
}

static void test_memory_cap_evicts_lru(void **state)
{
    struct sched_model_config cfg;
    sched_model_config_default(&cfg);
    cfg.max_bytes = 16 << 10;
    struct sched_model *m = sched_model_new(&cfg);
    const char *p[] = {"x:small:success", "y:medium:failure", "z:large:timeout"};
    int64_t gen[] = {1, 2, 3};
    for (uint64_t prompt = 0; prompt < 200; prompt++) {
        put(m, prompt, (double)prompt, p, gen, 3, 100, false);
        struct sched_estimate e;
        look(m, 0, p, 3, &e); /* keeps prompt 0 recently used */
        struct sched_model_stats st;
        sched_model_stats(m, &st);
        assert_true(st.tree_bytes <= cfg.max_bytes);
    }
    struct sched_model_stats st;
    sched_model_stats(m, &st);
    assert_true(st.evictions > 0);
    assert_true(st.trees < 200);
    struct sched_estimate e;
    look(m, 0, p, 3, &e);
    assert_true(e.from_prompt); /* the recently used tree survived */
    look(m, 1, p, 3, &e);
    assert_false(e.from_prompt); /* an old one was evicted; global still answers */
    assert_true(e.exact);
    sched_model_free(m);
}

static void test_state_cap_and_bad_summaries(void **state)
{
    struct sched_model_config cfg;
    sched_model_config_default(&cfg);
    cfg.max_states = 2;
    struct sched_model *m = sched_model_new(&cfg);
    assert_int_equal(sched_model_state(m, "a"), 0);
    assert_int_equal(sched_model_state(m, "b"), 1);
    assert_int_equal(sched_model_state(m, "a"), 0);
    assert_int_equal(sched_model_state(m, "c"), SCHED_STATE_NONE);
    assert_string_equal(sched_model_state_key(m, 1), "b");
    assert_null(sched_model_state_key(m, 2));
    uint32_t ids[] = {0, 1};
    int64_t gen[] = {50, 40};
    struct sched_traj_summary s = {.total_tokens = 100, .n = 2, .states = ids, .gen_before = gen};
    assert_int_equal(sched_model_insert(m, &s), LIBRA_EINVAL); /* decreasing */
    gen[1] = 150;
    assert_int_equal(sched_model_insert(m, &s), LIBRA_EINVAL); /* above the total */
    gen[1] = 60;
    ids[1] = 7;
    assert_int_equal(sched_model_insert(m, &s), LIBRA_EINVAL); /* unknown id */
    ids[1] = SCHED_STATE_NONE; /* a state past the cap: learnt up to it */
    assert_int_equal(sched_model_insert(m, &s), 0);
    struct sched_model_stats st;
    sched_model_stats(m, &st);
    /* two roots, each with one node on the path (cut at the unknown state) and two on the
     * depth path */
    assert_int_equal(st.nodes, 8);
    sched_model_free(m);
}

/* ---- differential test against a naive list ------------------------------------------------- */

struct sample {
    uint64_t prompt;
    uint32_t path[4];
    size_t depth; /* the node the sample belongs to */
    int64_t value;
    bool censored;
};

/* A distribution: values ascending with their probability masses. */
struct dist {
    size_t n;
    int64_t v[1024];
    double mass[1024];
};

static void sort_values(int64_t *x, size_t n)
{
    for (size_t i = 1; i < n; i++) /* insertion sort */
        for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
            int64_t t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
}

/* Product-limit Kaplan-Meier over samples v (value, censored), as atoms. Mass left past the
 * last death is shared equally by the censored samples at or past it, each at its bound (the
 * data say only "more than v" there). */
static void naive_km(const int64_t *v, const bool *c, size_t n, struct dist *out)
{
    int64_t times[512], tail[512], last_death = INT64_MIN;
    size_t nt = 0, nt_tail = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < nt; j++)
            seen |= times[j] == v[i];
        if (!seen)
            times[nt++] = v[i];
        if (!c[i])
            last_death = v[i] > last_death ? v[i] : last_death;
    }
    sort_values(times, nt);
    double surv = 1.0;
    out->n = 0;
    for (size_t j = 0; j < nt; j++) {
        double at_risk = 0, deaths = 0;
        for (size_t i = 0; i < n; i++) {
            at_risk += v[i] >= times[j];
            deaths += v[i] == times[j] && !c[i];
        }
        if (deaths == 0)
            continue;
        double mass = surv * deaths / at_risk;
        surv -= mass;
        out->v[out->n] = times[j];
        out->mass[out->n++] = mass;
    }
    for (size_t i = 0; i < n; i++)
        if (c[i] && v[i] >= last_death)
            tail[nt_tail++] = v[i];
    sort_values(tail, nt_tail);
    for (size_t j = 0; surv > 1e-12 && j < nt_tail; j++) {
        out->v[out->n] = tail[j];
        out->mass[out->n++] = surv / (double)nt_tail;
    }
}

/* The smallest value whose cumulative mass reaches q of the total (atoms in any order). */
static double dist_quantile(const struct dist *d, double q)
{
    double total = 0, best = NAN;
    for (size_t i = 0; i < d->n; i++)
        total += d->mass[i];
    for (size_t i = 0; i < d->n; i++) {
        double cum = 0; /* mass at or below d->v[i] */
        for (size_t j = 0; j < d->n; j++)
            cum += d->v[j] <= d->v[i] ? d->mass[j] : 0;
        if (cum >= q * total - 1e-12 && (isnan(best) || (double)d->v[i] < best))
            best = (double)d->v[i];
    }
    return best;
}

/* E[X | X > above] under ref's Kaplan-Meier distribution, or above when no exact sample of
 * samples (v, c) lies above it. */
static double mean_above(const int64_t *v, const bool *c, size_t n, const struct dist *ref,
                         double above)
{
    bool death_above = false;
    for (size_t i = 0; i < n; i++)
        death_above |= !c[i] && (double)v[i] > above;
    double num = 0, den = 0;
    for (size_t i = 0; i < ref->n; i++)
        if ((double)ref->v[i] > above) {
            num += ref->mass[i] * (double)ref->v[i];
            den += ref->mass[i];
        }
    return death_above && den > 0 ? num / den : above;
}

/* The samples of a node as a window (the last SCHED_TREE_WINDOW of all[0..limit) that belong
 * to it): a path node of a tree (prompt, or every prompt if global), or its depth node when
 * path is NULL. Returns the count. */
static size_t naive_window(const struct sample *all, size_t limit, bool global, uint64_t prompt,
                           const uint32_t *path, size_t depth, int64_t *v, bool *c)
{
    size_t k = 0;
    for (size_t i = 0; i < limit; i++) {
        const struct sample *s = &all[i];
        if ((!global && s->prompt != prompt) || s->depth != depth ||
            (path && memcmp(s->path, path, depth * sizeof *path) != 0))
            continue;
        if (k == SCHED_TREE_WINDOW) {
            memmove(v, v + 1, (k - 1) * sizeof *v);
            memmove(c, c + 1, (k - 1) * sizeof *c);
            k--;
        }
        v[k] = s->value;
        c[k++] = s->censored;
    }
    return k;
}

/* Adds to out the distribution of window (v, c) at weight w: exact samples at w / n, and each
 * censored sample's share spread over ref's distribution above it (kept at its bound when no
 * exact sample of ref_v lies above). */
static void naive_add_window(const int64_t *v, const bool *c, size_t n, const int64_t *ref_v,
                             const bool *ref_c, size_t ref_n, const struct dist *ref, double w,
                             struct dist *out)
{
    double spread[1024] = {0}; /* mass each atom of ref receives */
    for (size_t i = 0; i < n; i++) {
        double share = w / (double)n, den = 0;
        bool death_above = false;
        for (size_t j = 0; c[i] && j < ref_n; j++)
            death_above |= !ref_c[j] && ref_v[j] > v[i];
        for (size_t j = 0; death_above && j < ref->n; j++)
            den += ref->v[j] > v[i] ? ref->mass[j] : 0;
        if (!c[i] || !death_above || den <= 0) {
            out->v[out->n] = v[i];
            out->mass[out->n++] = share;
            continue;
        }
        for (size_t j = 0; j < ref->n; j++)
            spread[j] += ref->v[j] > v[i] ? share * ref->mass[j] / den : 0;
    }
    for (size_t j = 0; j < ref->n; j++)
        if (spread[j] > 0) {
            out->v[out->n] = ref->v[j];
            out->mass[out->n++] = spread[j];
        }
}

/* The running mean of a node's samples, censored ones imputed from the global depth node
 * before them: a path node of a tree, or its depth node when path is NULL. */
static double naive_mean(const struct sample *all, size_t n, bool global, uint64_t prompt,
                         const uint32_t *path, size_t depth, uint32_t *visits)
{
    double mu = 0;
    *visits = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sample *s = &all[i];
        if ((!global && s->prompt != prompt) || s->depth != depth ||
            (path && memcmp(s->path, path, depth * sizeof *path) != 0))
            continue;
        double x = (double)s->value;
        if (s->censored) {
            int64_t v[SCHED_TREE_WINDOW];
            bool c[SCHED_TREE_WINDOW];
            struct dist before;
            size_t wn = naive_window(all, i, true, 0, NULL, depth, v, c);
            naive_km(v, c, wn, &before);
            x = mean_above(v, c, wn, &before, x);
        }
        ++*visits;
        mu += (x - mu) / *visits;
    }
    return mu;
}

/* Visits, mean (naive_mean) and Kaplan-Meier p90 of its own window, of the node at
 * path[0..depth) of a tree: what sched_model_lookup reports. */
static void naive_node(const struct sample *all, size_t n, bool global, uint64_t prompt,
                       const uint32_t *path, size_t depth, uint32_t *visits, double *mean,
                       double *p90)
{
    int64_t v[SCHED_TREE_WINDOW];
    bool c[SCHED_TREE_WINDOW];
    struct dist own;
    size_t wn = naive_window(all, n, global, prompt, path, depth, v, c);
    naive_km(v, c, wn, &own);
    *p90 = wn ? dist_quantile(&own, 0.9) : 0;
    *mean = naive_mean(all, n, global, prompt, path, depth, visits);
}

/* What sched_model_estimate gives for a path node (depth >= 1) shrunk with k pseudo-visits:
 * a prompt tree's node toward the global tree's node on its path, that toward the global
 * depth node; censored tails taken from the global depth node. */
static void naive_estimate(const struct sample *all, size_t n, bool global, uint64_t prompt,
                           const uint32_t *path, size_t depth, uint32_t k, double *mean,
                           double *p90)
{
    uint32_t visits, g_visits, d_visits;
    double node_mean = naive_mean(all, n, global, prompt, path, depth, &visits);
    double g_mean = naive_mean(all, n, true, 0, path, depth, &g_visits);
    double d_mean = naive_mean(all, n, true, 0, NULL, depth, &d_visits);
    int64_t rv[SCHED_TREE_WINDOW], v[SCHED_TREE_WINDOW];
    bool rc[SCHED_TREE_WINDOW], c[SCHED_TREE_WINDOW];
    struct dist ref;
    static struct dist mix;
    size_t rn = naive_window(all, n, true, 0, NULL, depth, rv, rc);
    naive_km(rv, rc, rn, &ref);
    double w = visits / (visits + (double)k);
    double wg = global ? 0 : (1 - w) * g_visits / (g_visits + (double)k);
    double wd = 1 - w - wg;
    *mean = w * node_mean + wg * g_mean + wd * d_mean;
    mix.n = 0;
    size_t wn = naive_window(all, n, global, prompt, path, depth, v, c);
    naive_add_window(v, c, wn, rv, rc, rn, &ref, w, &mix);
    if (!global) {
        wn = naive_window(all, n, true, 0, path, depth, v, c);
        naive_add_window(v, c, wn, rv, rc, rn, &ref, wg, &mix);
    }
    for (size_t j = 0; j < ref.n; j++) {
        mix.v[mix.n] = ref.v[j];
        mix.mass[mix.n++] = wd * ref.mass[j];
    }
    *p90 = dist_quantile(&mix, 0.9);
}

static void test_differential_against_naive_list(void **state)
{
    struct rng r = rng_keyed(42, 6, 0, 0);
    enum { TRAJ = 700, STATES = 3, PROMPTS = 4, SHRINK = 3 };
    struct sample *all = calloc(TRAJ * 5, sizeof *all);
    size_t n_all = 0;
    struct sched_model *m = sched_model_new(NULL);
    uint32_t ids[STATES];
    char key[16];
    for (int s = 0; s < STATES; s++) {
        snprintf(key, sizeof key, "k%d:small:success", s);
        ids[s] = sched_model_state(m, key);
    }
    for (int t = 0; t < TRAJ; t++) {
        uint64_t prompt = rng_u64(&r) % PROMPTS;
        size_t depth = (size_t)(rng_u64(&r) % 4);
        uint32_t path[4];
        int64_t gen[4], g = 0;
        for (size_t d = 0; d < depth; d++) {
            path[d] = ids[rng_u64(&r) % STATES];
            g += (int64_t)(rng_u64(&r) % 50);
            gen[d] = g;
        }
        int64_t total = g + (int64_t)(rng_u64(&r) % 40) * 10; /* ties on purpose */
        bool censored = rng_uniform(&r) < 0.3;
        struct sched_traj_summary s = {.prompt = prompt,
                                       .start = t,
                                       .censored = censored,
                                       .total_tokens = total,
                                       .n = depth,
                                       .states = path,
                                       .gen_before = gen};
        assert_int_equal(sched_model_insert(m, &s), 0);
        for (size_t d = 0; d <= depth; d++) {
            struct sample *x = &all[n_all++];
            x->prompt = prompt;
            memcpy(x->path, path, sizeof path);
            x->depth = d;
            x->value = total - (d ? gen[d - 1] : 0);
            x->censored = censored;
        }
    }
    /* Every node of every tree: all paths of length <= 3 over the states. */
    int checked = 0;
    for (uint64_t prompt = 0; prompt <= PROMPTS; prompt++) {
        bool global = prompt == PROMPTS;
        for (int code = 0; code < 1 + 3 + 9 + 27; code++) {
            uint32_t path[4];
            size_t depth = code == 0 ? 0 : code < 4 ? 1 : code < 13 ? 2 : 3;
            int rest = code - (depth == 0 ? 0 : depth == 1 ? 1 : depth == 2 ? 4 : 13);
            for (size_t d = 0; d < depth; d++, rest /= 3)
                path[d] = ids[rest % 3];
            uint32_t visits;
            double mean, p90;
            naive_node(all, n_all, global, prompt, path, depth, &visits, &mean, &p90);
            struct sched_estimate e;
            sched_model_lookup(m, global ? 1000 : prompt, path, depth, &e);
            if (visits == 0) {
                assert_false(e.exact && e.from_prompt == !global);
                continue;
            }
            assert_true(e.exact);
            assert_int_equal(e.from_prompt, !global);
            assert_int_equal(e.visits, visits);
            assert_close(e.mean_tokens, mean, 1e-9);
            assert_close(e.p90_tokens, p90, 0);
            if (depth > 0) { /* C-MLFQ's estimate: shrunk, censored tails from depth */
                struct sched_lookup opt = {.min_visits = 1, .shrink_visits = SHRINK};
                naive_estimate(all, n_all, global, prompt, path, depth, SHRINK, &mean, &p90);
                sched_model_estimate(m, global ? 1000 : prompt, path, depth, &opt, &e);
                assert_true(e.found && !e.by_depth);
                assert_close(e.mean_tokens, mean, 1e-9);
                assert_close(e.p90_tokens, p90, 0);
                /* empirical shrinkage leaves the prompt trees on the fixed k */
                opt.empirical_shrink = true;
                sched_model_estimate(m, global ? 1000 : prompt, path, depth, &opt, &e);
                if (!global) {
                    assert_close(e.mean_tokens, mean, 1e-9);
                    assert_close(e.p90_tokens, p90, 0);
                }
            }
            checked++;
        }
    }
    assert_true(checked > 100);
    sched_model_free(m);
    free(all);
}

/* ---- persistence ---------------------------------------------------------------------------- */

static struct sched_model *sample_model(int from, int to)
{
    struct sched_model *m = sched_model_new(NULL);
    const char *keys[] = {"search:small:success", "search:large:failure", "answer:small:other"};
    for (int t = from; t < to; t++) {
        const char *path[] = {keys[t % 3], keys[(t / 3) % 3]};
        int64_t gen[] = {t * 10, t * 10 + 5};
        put(m, (uint64_t)(t % 4) * 0x1000000001ull, t, path, gen, 2, t * 10 + 500 + t % 7,
            t % 5 == 0);
    }
    return m;
}

static char *export_text(const struct sched_model *m)
{
    json_t *j = sched_model_to_json(m);
    char *text = ujson_dump(j, false);
    json_decref(j);
    return text;
}

static int import_text(struct sched_model *m, const char *text, struct libra_error *err)
{
    struct ujson_doc doc;
    int rc = ujson_doc_parse(&doc, "trees.json", text, strlen(text), err);
    if (rc == 0)
        rc = sched_model_merge_json(m, &doc, "", err);
    ujson_doc_free(&doc);
    return rc;
}

static void test_persistence_round_trip(void **state)
{
    struct sched_model *m = sample_model(0, 60);
    char *text = export_text(m);
    struct sched_model *back = sched_model_new(NULL);
    struct libra_error err = {0};
    assert_int_equal(import_text(back, text, &err), 0);
    char *again = export_text(back);
    assert_string_equal(text, again);
    assert_non_null(strstr(text, "\"schema\":\"libra.tree/1\""));
    free(again);
    free(text);
    sched_model_free(back);
    sched_model_free(m);
}

static void test_merge_of_parts_matches_whole(void **state)
{
    struct sched_model *whole = sample_model(0, 40);
    struct sched_model *a = sample_model(0, 20), *b = sample_model(20, 40);
    struct sched_model *merged = sched_model_new(NULL);
    sched_model_merge(merged, a);
    sched_model_merge(merged, b);
    const char *path[] = {"search:small:success"};
    for (uint64_t prompt = 0; prompt < 5; prompt++) {
        struct sched_estimate x, y;
        look(whole, prompt * 0x1000000001ull, path, 1, &x);
        look(merged, prompt * 0x1000000001ull, path, 1, &y);
        assert_int_equal(x.visits, y.visits);
        assert_int_equal(x.from_prompt, y.from_prompt);
        /* Equal without censoring; censored samples are imputed from different windows. */
        assert_close(x.mean_tokens, y.mean_tokens, 0.05);
    }
    sched_model_free(whole);
    sched_model_free(a);
    sched_model_free(b);
    sched_model_free(merged);
}

static void import_fails(const char *text, const char *needle, int line, int col)
{
    struct sched_model *m = sample_model(0, 10);
    char *before = export_text(m);
    struct libra_error err = {0};
    assert_int_equal(import_text(m, text, &err), LIBRA_EINVAL);
    if (!strstr(err.msg, needle) || (line && (err.line != line || err.col != col)))
        print_error("got %d:%d '%s', want %d:%d '%s'\n", err.line, err.col, err.msg, line, col,
                    needle);
    assert_non_null(strstr(err.msg, needle));
    if (line) {
        assert_int_equal(err.line, line);
        assert_int_equal(err.col, col);
    }
    char *after = export_text(m);
    assert_string_equal(before, after); /* untouched on error */
    free(before);
    free(after);
    sched_model_free(m);
}

static void test_import_errors(void **state)
{
    const char *node = "{\"visits\":2,\"mean_tokens\":5,\"window\":[4,6],\"censored\":[1]}";
    char buf[512];
    import_fails("[]", "expected a tree export object", 0, 0);
    import_fails("{\"schema\":\"libra.tree/2\",\"global\":{}}", "schema", 0, 0);
    snprintf(buf, sizeof buf, "{\"schema\":\"libra.tree/1\",\"global\":%s,\"extra\":1}", node);
    import_fails(buf, "unknown key", 0, 0);
    import_fails("{\"schema\":\"libra.tree/1\",\n\"global\":{\"visits\":1,\"mean_tokens\":1,"
                 "\"window\":[1,2]}}",
                 "more samples than", 2, 38);
    import_fails("{\"schema\":\"libra.tree/1\",\"global\":{\"visits\":2,\"mean_tokens\":1,"
                 "\"window\":[1,2],\"censored\":[2]}}",
                 "ascending indices", 0, 0);
    import_fails("{\"schema\":\"libra.tree/1\",\"global\":{\"visits\":2,\"mean_tokens\":-1}}",
                 "mean_tokens", 0, 0);
    import_fails("{\"schema\":\"libra.tree/1\",\"global\":{\"visits\":1,\"mean_tokens\":1,"
                 "\"children\":[{\"state\":\"a\",\"visits\":1,\"mean_tokens\":1},"
                 "{\"state\":\"a\",\"visits\":1,\"mean_tokens\":1}]}}",
                 "same state", 0, 0);
    import_fails("{\"schema\":\"libra.tree/1\",\"global\":{\"visits\":1,\"mean_tokens\":1,"
                 "\"children\":[{\"visits\":0,\"mean_tokens\":1,\"state\":\"a\"}]}}",
                 "visits", 0, 0);
    import_fails("{\"schema\":\"libra.tree/1\",\"global\":{\"visits\":0,\"mean_tokens\":0},"
                 "\"prompts\":[{\"prompt\":\"xyz\",\"root\":{}}]}",
                 "hex digits", 0, 0);
    /* Too deep: 300 nested single children. */
    size_t cap = 300 * 80 + 200, len = 0;
    char *deep = malloc(cap);
    len += (size_t)snprintf(deep + len, cap - len,
                            "{\"schema\":\"libra.tree/1\",\"global\":{\"visits\":1,"
                            "\"mean_tokens\":1,\"children\":[");
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(deep + len, cap - len,
                                "{\"state\":\"s\",\"visits\":1,\"mean_tokens\":1,\"children\":[");
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(deep + len, cap - len, "]}");
    snprintf(deep + len, cap - len, "]}}");
    import_fails(deep, "deeper than 256", 0, 0);
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_statistics_exact),
        cmocka_unit_test(test_censored_samples_raise_mean_and_p90),
        cmocka_unit_test(test_lookup_order),
        cmocka_unit_test(test_estimate_backs_off_to_depth),
        cmocka_unit_test(test_censored_sample_imputed_from_depth_node),
        cmocka_unit_test(test_shrinkage_toward_depth_node),
        cmocka_unit_test(test_empirical_shrinkage),
        cmocka_unit_test(test_cached_estimate_follows_learning),
        cmocka_unit_test(test_depth_cache_follows_learning_at_every_depth),
        cmocka_unit_test(test_rebuild_keeps_most_recent_by_start),
        cmocka_unit_test(test_memory_cap_evicts_lru),
        cmocka_unit_test(test_state_cap_and_bad_summaries),
        cmocka_unit_test(test_differential_against_naive_list),
        cmocka_unit_test(test_persistence_round_trip),
        cmocka_unit_test(test_merge_of_parts_matches_whole),
        cmocka_unit_test(test_import_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
