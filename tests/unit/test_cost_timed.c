/* Tests of the decode points of timed turns (src/cost/timed.c): windows, batches, prefills
 * first come first served, the iterations a turn waited out, bands, engines kept apart, and the
 * turns that make no point. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "cost/import.h"

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

/* A streamed turn on engine 0, TP 1: its first chunk at first_s, its end at done_s. */
static struct cost_timed_turn streamed(double sent_s, double first_s, double done_s, double gen)
{
    return (struct cost_timed_turn){.tp = 1,
                                    .sent_s = sent_s,
                                    .first_s = first_s,
                                    .done_s = done_s,
                                    .prompt_tokens = 100.0,
                                    .uncached_tokens = 100.0,
                                    .generated_tokens = gen,
                                    .prefill_s = 0.5};
}

/* Ten streamed turns decoding side by side from 1 s to 11 s, 100 tokens after their first:
 * 10 s over 100 iterations at a batch of 10, no prompt prefilled meanwhile (theirs ended at
 * the windows' start). */
static void test_streamed_turns_side_by_side(void **state)
{
    struct cost_timed_turn t[10];
    for (int i = 0; i < 10; i++)
        t[i] = streamed(0.0, 1.0, 11.0, 101.0);
    struct cost_timed_point *pts;
    size_t unused;
    assert_int_equal(cost_timed_points(t, 10, 10, &pts, &unused), 1);
    assert_int_equal(unused, 0);
    const struct cost_decode_point *p = &pts[0].point;
    assert_int_equal(pts[0].turns, 10);
    assert_true(pts[0].batch_lo == 8.0 && pts[0].batch_hi == 16.0);
    assert_int_equal(p->kind, COST_DECODE_SERVING);
    assert_int_equal(p->tp, 1);
    assert_true(near(p->measured_s, 0.1));
    assert_true(near(p->decode_seqs, 10.0));
    assert_true(near(p->ctx_tokens, 100.0 + 101.0 / 2.0));
    assert_true(p->prefill_seqs == 0.0 && p->prefill_tokens == 0.0);
    free(pts);
}

/*
 * Two turns sent at once, not streamed, each prefilling 100 tokens in 1 s: the first prefills
 * by 1 s, the second waits and prefills by 2 s; both decode until 10 s. Each window [0, 10]
 * holds both prefills; the first turn's iterations are its 10 decoding ones and its prefill,
 * the second's also the prefill it waited out: 11 + 12 over 20 s, at a decode batch of
 * (9 + 8) / 10.
 */
static void test_prefills_first_come_first_served(void **state)
{
    struct cost_timed_turn t[2] = {streamed(0.0, -1.0, 10.0, 11.0),
                                   streamed(0.0, -1.0, 10.0, 11.0)};
    t[0].prefill_s = t[1].prefill_s = 1.0;
    struct cost_timed_point *pts;
    size_t unused;
    assert_int_equal(cost_timed_points(t, 2, 1, &pts, &unused), 1);
    const struct cost_decode_point *p = &pts[0].point;
    assert_true(near(p->measured_s, 20.0 / 23.0));
    assert_true(near(p->decode_seqs, 1.7));
    assert_true(near(p->prefill_seqs, 4.0 / 23.0));
    assert_true(near(p->prefill_tokens, 400.0 / 23.0));
    assert_true(near(p->prefill_pairs, 4.0 * 100.0 * 101.0 / 2.0 / 23.0));
    free(pts);
}

/* Another engine's turns and another TP size are not in a turn's batch; bands part turns. */
static void test_engines_tp_and_bands(void **state)
{
    struct cost_timed_turn t[4] = {streamed(0.0, 1.0, 11.0, 101.0), streamed(0.0, 1.0, 11.0, 101.0),
                                   streamed(0.0, 1.0, 11.0, 101.0),
                                   streamed(0.0, 1.0, 11.0, 101.0)};
    t[1].instance = 1; /* alone on engine 1 */
    t[2].instance = t[3].instance = 2;
    t[2].tp = t[3].tp = 2; /* a pair on engine 2, TP 2 */
    struct cost_timed_point *pts;
    size_t unused;
    assert_int_equal(cost_timed_points(t, 4, 1, &pts, &unused), 2);
    assert_int_equal(unused, 0);
    assert_int_equal(pts[0].point.tp, 1);
    assert_int_equal(pts[0].turns, 2);
    assert_true(near(pts[0].point.decode_seqs, 1.0));
    assert_int_equal(pts[1].point.tp, 2);
    assert_int_equal(pts[1].turns, 2);
    assert_true(near(pts[1].point.decode_seqs, 2.0) && pts[1].batch_lo == 2.0);
    free(pts);
}

/* A turn that times no iteration, and a band of fewer than min_turns, make no point. */
static void test_unused_turns(void **state)
{
    struct cost_timed_turn t[3] = {streamed(0.0, 1.0, 11.0, 101.0), streamed(0.0, 1.0, 2.0, 1.0),
                                   streamed(0.0, 1.0, 1.0, 10.0)};
    struct cost_timed_point *pts;
    size_t unused;
    assert_int_equal(cost_timed_points(t, 3, 1, &pts, &unused), 1);
    assert_int_equal(unused, 2); /* one token only; no time after the first chunk */
    free(pts);
    assert_int_equal(cost_timed_points(t, 3, 2, &pts, &unused), 0);
    assert_int_equal(unused, 3);
    free(pts);
    assert_int_equal(cost_timed_points(NULL, 0, 1, &pts, &unused), 0);
    assert_int_equal(unused, 0);
    free(pts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streamed_turns_side_by_side),
        cmocka_unit_test(test_prefills_first_come_first_served),
        cmocka_unit_test(test_engines_tp_and_bands),
        cmocka_unit_test(test_unused_turns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
