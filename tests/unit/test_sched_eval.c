/*
 * Tests of the prequential evaluator (src/sched/eval.c) on hand-built traces: the oracle
 * scores every decision right; C-MLFQ, empty on its first step, learns a deterministic pattern
 * from a training step; a step is never learnt before it is scored (a trace built so that any
 * leak, across or within the step, turns wrong answers right); indexing orders steps and marks
 * seen prompts; the placebo shuffle keeps the multiset of returns at each depth and moves them;
 * the router's clock runs on replayed time in training steps too.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/eval.h"
#include "spec/config.h"

#define LAYOUT "tp1:4000,tp2:12000,tp4:30000"

static struct sched_obs obs_of(const char *tool)
{
    struct sched_obs_config c;
    sched_obs_defaults(&c, NULL, NULL);
    struct sched_tool_return r = {.tool = tool,
                                  .payload_tokens = 50,
                                  .payload_chars = -1,
                                  .status = SCHED_SUCCESS,
                                  .reward = NAN,
                                  .correct = -1};
    struct sched_obs o;
    sched_obs_classify(&c, &r, &o);
    return o;
}

/* Adds a trajectory of n turns generating gen[k] each; after turn k < n - 1 the tool
 * tools[k] returns (one small successful return). */
static void add(struct sched_eval_trace *ev, int64_t step, uint64_t prompt, const int64_t *gen,
                const char *const *tools, size_t n)
{
    sched_eval_traj_add(ev, step, prompt, 0, 0, false);
    int64_t context = 500;
    for (size_t k = 0; k < n; k++) {
        struct sched_obs o = obs_of(k + 1 < n ? tools[k] : "none");
        sched_eval_turn_add(ev, gen[k], context, &o, k + 1 < n ? 1 : 0, 0.0);
        context += gen[k] + 50;
    }
}

/* Two turns: tool returns, then `after` tokens (the remaining tokens at the decision). */
static void add2(struct sched_eval_trace *ev, int64_t step, uint64_t prompt, const char *tool,
                 int64_t after)
{
    int64_t gen[] = {200, after};
    const char *tools[] = {tool};
    add(ev, step, prompt, gen, tools, 2);
}

/* One arm of policy p over the layout, shrinkage off (a node answers with its own data). */
static void arm(struct sched_eval_arm *a, enum sched_policy p,
                const struct sched_router_options *opt)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, LAYOUT, "test", NULL), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    struct spec_sched_config sc = cfg.sched;
    sc.policy = p;
    sc.shrink_visits = 0;
    assert_int_equal(sched_eval_arm_init(a, sched_policy_name(p), &sc, &l, opt, NULL, false, NULL),
                     0);
}

/* Accuracy of policy p over ev with train_steps, checking the number of tool-return
 * decisions. */
static double accuracy(const struct sched_eval_trace *ev, enum sched_policy p, int64_t train_steps,
                       uint64_t decisions)
{
    struct sched_eval_arm a;
    arm(&a, p, NULL);
    assert_int_equal(sched_eval_arm_run(&a, ev, train_steps, NULL, NULL), 0);
    assert_int_equal(sched_metrics_decisions(a.metrics), decisions);
    double acc = sched_metrics_accuracy(a.metrics);
    sched_eval_arm_free(&a);
    return acc;
}

/* "search" leads to 20000 more tokens (the last bucket), "answer" to 100 (the first). */
static void pattern(struct sched_eval_trace *ev, int64_t steps)
{
    for (int64_t s = 1; s <= steps; s++)
        for (uint64_t k = 0; k < 4; k++) {
            add2(ev, s, (uint64_t)(100 * s) + 2 * k, "search", 20000);
            add2(ev, s, (uint64_t)(100 * s) + 2 * k + 1, "answer", 100);
        }
    sched_eval_trace_index(ev);
}

static void test_oracle_scores_every_decision(void **state)
{
    struct sched_eval_trace ev = {0};
    pattern(&ev, 3);
    int64_t gen[] = {300, 5000, 2000, 9000};
    const char *tools[] = {"a", "b", "c"};
    add(&ev, 2, 7, gen, tools, 4); /* remaining 16000, 11000, 9000: buckets 2, 1, 1 */
    sched_eval_trace_index(&ev);
    assert_true(accuracy(&ev, SCHED_ORACLE, 1, 2 * 8 + 3) == 1.0);
    assert_true(accuracy(&ev, SCHED_ORACLE, 0, 3 * 8 + 3) == 1.0);
    struct sched_eval_arm a;
    arm(&a, SCHED_ORACLE, NULL);
    assert_int_equal(sched_eval_arm_run(&a, &ev, 1, NULL, NULL), 0);
    json_t *m = sched_metrics_to_json(a.metrics, false);
    json_t *first = json_object_get(json_object_get(m, "all"), "first_placements");
    assert_int_equal(json_integer_value(json_object_get(first, "n")), 17);
    assert_true(json_real_value(json_object_get(first, "accuracy")) == 1.0);
    json_decref(m);
    sched_eval_arm_free(&a);
    sched_eval_trace_free(&ev);
}

static void count_step(void *ctx)
{
    ++*(int *)ctx;
}

/* Empty on step 1, C-MLFQ stays short at every return: right for "answer", wrong for
 * "search". Trained on step 1, it is right on both in steps 2 and 3. */
static void test_cmlfq_learns_from_the_train_step(void **state)
{
    struct sched_eval_trace one = {0}, three = {0};
    pattern(&one, 1);
    pattern(&three, 3);
    double alone = accuracy(&one, SCHED_CMLFQ, 0, 8);
    double trained = accuracy(&three, SCHED_CMLFQ, 1, 16);
    assert_true(alone == 0.5);
    assert_true(trained == 1.0);
    assert_true(trained > alone);

    struct sched_eval_arm a;
    arm(&a, SCHED_CMLFQ, NULL);
    int steps = 0;
    assert_int_equal(sched_eval_arm_run(&a, &three, 1, count_step, &steps), 0);
    assert_int_equal(steps, 3);
    assert_int_equal(a.reasons[SCHED_REASON_PROMOTE], 8);
    assert_int_equal(a.reasons[SCHED_REASON_STAY], 8);
    sched_eval_arm_free(&a);

    /* a depth-only tree cannot tell the two apart: every return looks the same */
    struct sched_router_options depth = {.depth_only = true};
    arm(&a, SCHED_CMLFQ, &depth);
    assert_int_equal(sched_eval_arm_run(&a, &three, 1, NULL, NULL), 0);
    assert_true(sched_metrics_accuracy(a.metrics) < 1.0);
    sched_eval_arm_free(&a);
    sched_eval_trace_free(&one);
    sched_eval_trace_free(&three);
}

/*
 * Step 1 teaches "a return, then 100 tokens". Steps 2 and 3 are the same four trajectories
 * of a new tool, "grep", then 20000 tokens. Routed before step 2 is learnt, "grep" has no node
 * and the depth node says short: all four wrong. Any trajectory of step 2 learnt before it is
 * scored (all of the step up front, or each one as soon as it is replayed) would make the
 * "grep" node say long and turn those answers right. Step 3, routed after step 2 was learnt,
 * shows that the node is learnt, once the step is scored: all right.
 */
static void test_a_step_is_not_learnt_before_it_is_scored(void **state)
{
    struct sched_eval_trace two = {0}, three = {0};
    struct sched_eval_trace *evs[] = {&two, &three};
    for (int e = 0; e < 2; e++) {
        for (uint64_t k = 0; k < 4; k++)
            add2(evs[e], 1, 10 + k, "search", 100);
        for (int64_t s = 2; s <= 2 + e; s++)
            for (uint64_t k = 0; k < 4; k++)
                add2(evs[e], s, 100 * (uint64_t)s + k, "grep", 20000);
        sched_eval_trace_index(evs[e]);
    }
    assert_true(accuracy(&two, SCHED_CMLFQ, 1, 4) == 0.0);
    assert_true(accuracy(&three, SCHED_CMLFQ, 1, 8) == 0.5);
    assert_true(accuracy(&two, SCHED_PREDICTOR, 1, 4) == 0.0);
    sched_eval_trace_free(&two);
    sched_eval_trace_free(&three);
}

static void test_index_orders_steps_and_marks_seen_prompts(void **state)
{
    struct sched_eval_trace ev = {0};
    add2(&ev, 3, 1, "a", 10);
    add2(&ev, 1, 2, "b", 10);
    add2(&ev, 3, 2, "c", 10);
    add2(&ev, 1, 1, "d", 10);
    add2(&ev, 1, 2, "e", 10); /* a sibling in the same step: not seen before */
    sched_eval_traj_add(&ev, 2, 9, 0, 0, false);
    struct sched_obs o = obs_of("late");
    sched_eval_turn_add(&ev, 40, 500, &o, 1, 0.0); /* a return after the last turn */
    sched_eval_trace_index(&ev);
    assert_int_equal(sched_eval_steps(&ev), 3);
    size_t want_start[] = {0, 3, 4, 6};
    assert_int_equal(ev.step_start.n, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ev.step_start.v[i], want_start[i]);
    int64_t step[] = {1, 1, 1, 2, 3, 3};
    uint64_t prompt[] = {2, 1, 2, 9, 1, 2};
    bool seen[] = {false, false, false, false, true, true};
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(ev.trajs.v[i].step, step[i]);
        assert_int_equal(ev.trajs.v[i].prompt, prompt[i]);
        assert_int_equal(ev.trajs.v[i].seen, seen[i]);
    }
    assert_int_equal(ev.trajs.v[0].total_tokens, 210);
    const struct sched_eval_traj *late = &ev.trajs.v[3];
    assert_int_equal(late->n_turns, 1);
    assert_int_equal(ev.turns.v[late->turn].n_obs, 0);
    sched_eval_trace_free(&ev);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The state keys of the returns at depth d of every trajectory, of turns or shuffled, sorted;
 * returns their count. */
static size_t keys_at(const struct sched_eval_trace *ev, const struct sched_eval_turn *turns,
                      size_t d, char keys[][SCHED_STATE_KEY_MAX], char **sorted)
{
    struct sched_obs_config oc;
    sched_obs_defaults(&oc, NULL, NULL);
    size_t n = 0;
    for (size_t i = 0; i < ev->trajs.n; i++) {
        const struct sched_eval_traj *t = &ev->trajs.v[i];
        if (d >= t->n_turns || !turns[t->turn + d].n_obs)
            continue;
        const struct sched_eval_turn *u = &turns[t->turn + d];
        sched_state_key(&oc, ev->obs.v + u->obs, u->n_obs, keys[n], SCHED_STATE_KEY_MAX);
        sorted[n] = keys[n];
        n++;
    }
    qsort(sorted, n, sizeof *sorted, cmp_str);
    return n;
}

static void test_shuffle_keeps_the_returns_at_each_depth(void **state)
{
    struct sched_eval_trace ev = {0};
    const char *names[] = {"search", "read", "grep", "edit", "run"};
    for (uint64_t i = 0; i < 30; i++) {
        size_t n = 2 + i % 4;
        int64_t gen[5];
        const char *tools[5];
        for (size_t k = 0; k < n; k++) {
            gen[k] = 100 + (int64_t)(i * 37 + k * 11) % 900;
            tools[k] = names[(i + 3 * k) % 5];
        }
        add(&ev, 1 + (int64_t)(i % 3), i, gen, tools, n);
    }
    sched_eval_trace_index(&ev);
    sched_eval_shuffle(&ev, 42);
    assert_int_equal(ev.shuffled.n, ev.turns.n);
    size_t moved = 0;
    for (size_t i = 0; i < ev.turns.n; i++) { /* tokens stay, only returns move */
        assert_int_equal(ev.shuffled.v[i].generated_tokens, ev.turns.v[i].generated_tokens);
        assert_int_equal(ev.shuffled.v[i].context_tokens, ev.turns.v[i].context_tokens);
        assert_int_equal(ev.shuffled.v[i].n_obs != 0, ev.turns.v[i].n_obs != 0);
        moved += ev.shuffled.v[i].obs != ev.turns.v[i].obs;
    }
    assert_true(moved > ev.turns.n / 4);
    static char a[30][SCHED_STATE_KEY_MAX], b[30][SCHED_STATE_KEY_MAX];
    char *sa[30], *sb[30];
    for (size_t d = 0; d < 5; d++) {
        size_t na = keys_at(&ev, ev.turns.v, d, a, sa);
        size_t nb = keys_at(&ev, ev.shuffled.v, d, b, sb);
        assert_int_equal(na, nb);
        for (size_t k = 0; k < na; k++)
            assert_string_equal(sa[k], sb[k]);
    }
    /* the same seed gives the same permutation, another seed another */
    struct sched_eval_turn *first = malloc(ev.shuffled.n * sizeof *first);
    memcpy(first, ev.shuffled.v, ev.shuffled.n * sizeof *first);
    sched_eval_shuffle(&ev, 42);
    assert_memory_equal(first, ev.shuffled.v, ev.shuffled.n * sizeof *first);
    sched_eval_shuffle(&ev, 43);
    assert_memory_not_equal(first, ev.shuffled.v, ev.shuffled.n * sizeof *first);
    free(first);
    sched_eval_trace_free(&ev);
}

/* A toy fleet: TP1 spends the fewest GPU-seconds per token, TP2 is twice as fast; moves are
 * free. */
static void toy_rate(void *ctx, int tp, int64_t context_tokens, double batch, struct cost_rate *out)
{
    (void)ctx, (void)context_tokens, (void)batch;
    *out = (struct cost_rate){.token_s = 0.01 / tp, .gpu_token_s = tp > 1 ? 0.0012 : 0.001};
}

static double toy_decode_s(void *ctx, int tp, int64_t context_tokens, double tokens)
{
    (void)ctx, (void)context_tokens;
    return tokens * 0.01 / tp;
}

static double toy_move_s(void *ctx, int from_tp, int to_tp, int64_t context_tokens)
{
    (void)ctx, (void)from_tp, (void)to_tp, (void)context_tokens;
    return 0.0;
}

static void count_tp2(void *ctx, const struct sched_eval_arm *a, size_t order, size_t turn,
                      const struct sched_decision *d)
{
    (void)a, (void)order;
    if (turn == 1 && d->to_bucket == 1)
        ++*(int *)ctx;
}

/*
 * The router's clock runs on the replayed time in training steps as in scored ones. Each
 * trajectory's tool takes 100 s, past its batch's 50 s deadline, so after the return only
 * TP2's speed pays (lateness costs 10 GPUs per second); at the start, before the tool, TP1's
 * GPU-seconds are cheapest. cmlfq_h learns that from the training step's trajectories and
 * moves every scored one to TP2 at its return; a training replay whose clock stood still
 * taught it that TP1 is never late.
 */
static void test_training_replay_runs_the_clock(void **state)
{
    struct sched_eval_trace ev = {0};
    int64_t gen[] = {200, 1000};
    for (int64_t s = 1; s <= 2; s++)
        for (uint64_t k = 0; k < 8; k++) {
            sched_eval_traj_add(&ev, s, 100 * (uint64_t)s + k, 0, 0, false);
            struct sched_obs o = obs_of("search"), none = obs_of("none");
            sched_eval_turn_add(&ev, gen[0], 500, &o, 1, 100.0);
            sched_eval_turn_add(&ev, gen[1], 750, &none, 0, 0.0);
        }
    sched_eval_trace_index(&ev);
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, "tp1:4000,tp2:30000", "test", NULL), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    struct spec_sched_config sc = cfg.sched;
    sc.policy = SCHED_CMLFQ_H;
    struct sched_costs costs = {.decode_s = toy_decode_s,
                                .move_s = toy_move_s,
                                .decision = {.rate = toy_rate, .deadline_s = 50, .late_gpus = 10}};
    struct sched_eval_arm a;
    assert_int_equal(sched_eval_arm_init(&a, "cmlfq_h", &sc, &l, NULL, &costs, false, NULL), 0);
    int tp2 = 0;
    a.on_decision = count_tp2;
    a.decision_ctx = &tp2;
    assert_int_equal(sched_eval_arm_run(&a, &ev, 1, NULL, NULL), 0);
    assert_int_equal(tp2, 8);
    sched_eval_arm_free(&a);
    sched_eval_trace_free(&ev);
}

/* Runs policy p over ev, costed by the toy fleet, both ways (by steps and by folds), on its turns
 * and on their shuffle. */
static void run_every_way(struct sched_eval_trace *ev, enum sched_policy p)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, LAYOUT, "test", NULL), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    struct spec_sched_config sc = cfg.sched;
    sc.policy = p;
    struct sched_costs costs = {.decode_s = toy_decode_s,
                                .move_s = toy_move_s,
                                .decision = {.rate = toy_rate, .deadline_s = 50, .late_gpus = 10}};
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        struct sched_eval_arm a;
        assert_int_equal(sched_eval_arm_init(&a, "arm", &sc, &l, NULL, &costs, shuffled, NULL), 0);
        assert_int_equal(sched_eval_arm_run(&a, ev, 0, NULL, NULL), 0);
        assert_int_equal(sched_eval_arm_run_folds(&a, ev, 2, NULL, NULL), 0);
        sched_eval_arm_free(&a);
    }
}

/*
 * A trace of no trajectories (a trace file of only its header) and one whose trajectory
 * finished before its first turn (a gateway's capture can hold one): the evaluator has
 * nothing to sort or replay, and must not hand the arrays it never allocated to qsort or
 * offset into them (the sanitizer build fails on either).
 */
static void test_traces_without_trajectories_or_turns(void **state)
{
    struct sched_eval_trace none = {0};
    sched_eval_trace_index(&none);
    sched_eval_shuffle(&none, 1);
    assert_int_equal(sched_eval_steps(&none), 0);
    assert_int_equal(sched_eval_prompts(&none), 0);
    run_every_way(&none, SCHED_CMLFQ);
    sched_eval_trace_free(&none);

    struct sched_eval_trace bare = {0};
    sched_eval_traj_add(&bare, 1, 7, 0, 0, false);
    sched_eval_trace_index(&bare);
    sched_eval_shuffle(&bare, 1);
    assert_int_equal(sched_eval_steps(&bare), 1);
    assert_int_equal(bare.turns.n, 0);
    for (enum sched_policy p = 0; p < SCHED_POLICY_COUNT; p++)
        run_every_way(&bare, p);
    sched_eval_trace_free(&bare);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle_scores_every_decision),
        cmocka_unit_test(test_cmlfq_learns_from_the_train_step),
        cmocka_unit_test(test_a_step_is_not_learnt_before_it_is_scored),
        cmocka_unit_test(test_index_orders_steps_and_marks_seen_prompts),
        cmocka_unit_test(test_traces_without_trajectories_or_turns),
        cmocka_unit_test(test_shuffle_keeps_the_returns_at_each_depth),
        cmocka_unit_test(test_training_replay_runs_the_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
