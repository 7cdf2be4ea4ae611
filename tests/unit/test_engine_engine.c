/*
 * Tests of the engine model (src/engine/engine.c) on scenarios small enough to compute by
 * hand: one or two requests on a toy instance whose iteration time is
 *     20 ms + 1 µs per KV token read or written + 5 ms + 1 ms per sequence,
 * then the cache, preemption, lifecycle and API contracts, and the invariants of random runs.
 * The equivalence of fast-forwarding with per-iteration stepping is test_engine_diff.c.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/rollout.h"
#include "cost/shape.h"
#include "engine/engine.h"
#include "libra/libra.h"
#include "spec/preset.h"
#include "util/rng.h"

/* linear 20 ms at any batch, attention = KV traffic at 1 µs/token, t_fix 5 ms, t_seq 1 ms */
static struct cost_rollout_pre toy_pre(void)
{
    return (struct cost_rollout_pre){.tp = 1,
                                     .layers = 1.0,
                                     .t_layer_weights_s = 0.02,
                                     .kv_bytes_per_token = 1.0,
                                     .s_per_kv_byte = 1e-6,
                                     .t_fix_s = 0.005,
                                     .t_seq_s = 0.001,
                                     .kv_capacity_tokens = 1000.0};
}

static struct engine *toy_engine(int64_t kv_tokens)
{
    struct cost_rollout_pre pre = toy_pre();
    struct engine_config c;
    engine_config_default(&c, &pre);
    c.kv_capacity_tokens = c.max_model_tokens = kv_tokens;
    struct engine *e;
    assert_int_equal(engine_new(&e, &c), 0);
    return e;
}

static struct engine_request req(uint64_t id, int64_t prompt, int64_t gen)
{
    return (struct engine_request){
        .id = id, .tag = id * 10, .prompt_tokens = prompt, .gen_tokens = gen};
}

/* Collects completion records. */
struct sink {
    struct engine_done d[64];
    int n;
};

static void collect(void *ctx, const struct engine_done *d)
{
    struct sink *s = ctx;
    assert_true(s->n < 64);
    s->d[s->n++] = *d;
}

/* Advances to until_s and returns the records reported. */
static struct sink run_to(struct engine *e, double until_s)
{
    struct sink s = {.n = 0};
    int n = engine_advance(e, until_s, collect, &s);
    assert_int_equal(n, s.n);
    return s;
}

static void test_single_request_is_prefill_then_decodes(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request r = req(1, 100, 10);
    assert_int_equal(engine_submit(e, 0.0, &r), 0);
    /* prefill 100 tokens: 20 ms + 100 µs + 5 ms + 1 ms; then decode j = 1..9 over context
     * 100 + j - 1: 26 ms + (100 + j) µs; Σ = 0.0261 + 0.234 + 0.000945 */
    assert_close(engine_next_event_s(e), 0.0261, 1e-12);
    struct sink s = run_to(e, 0.0261);
    assert_int_equal(s.n, 0);
    assert_close(engine_next_event_s(e), 0.261045, 1e-12); /* the nine decodes are one run */
    s = run_to(e, 10.0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.d[0].id, 1);
    assert_int_equal(s.d[0].tag, 10);
    assert_int_equal(s.d[0].end, ENGINE_FINISHED);
    assert_close(s.d[0].first_token_s, 0.0261, 1e-12);
    assert_close(s.d[0].end_s, 0.261045, 1e-12);
    assert_int_equal(s.d[0].gen_tokens, 10);
    assert_int_equal(s.d[0].prefill_tokens, 100);
    struct engine_stats st;
    engine_stats(e, &st);
    assert_int_equal(st.iterations, 10);
    assert_int_equal(st.runs, 2);
    assert_int_equal(st.sampled_tokens, 10);
    assert_int_equal(st.kv_used_tokens, 0);
    assert_int_equal(st.cache_tokens, 0); /* prefix_key 0: nothing kept */
    assert_close(st.busy_s, 0.261045, 1e-12);
    engine_free(e);
}

static void test_two_requests_share_iterations(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request a = req(1, 100, 10), b = req(2, 50, 5);
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    assert_int_equal(engine_submit(e, 0.0, &b), 0);
    /* one prefill of both (150 tokens, 2 sequences): 0.02715; decodes j = 1..4 of both over
     * 150 + 2(j-1) context: 27 ms + (150 + 2j) µs, B done at 0.13577; A alone j = 1..5 over
     * 104 + j - 1: 26 ms + (104 + j) µs, done at 0.266305 */
    struct sink s = run_to(e, 10.0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.d[0].id, 2);
    assert_close(s.d[0].first_token_s, 0.02715, 1e-12);
    assert_close(s.d[0].end_s, 0.13577, 1e-12);
    assert_int_equal(s.d[1].id, 1);
    assert_close(s.d[1].end_s, 0.266305, 1e-12);
    engine_free(e);
}

static void test_matches_the_cost_model_single_request_rate(void **state)
{
    struct spec_presets ps;
    struct libra_error err = {0};
    struct cost_shape shape;
    struct cost_rollout_params p;
    struct cost_rollout_pre pre;
    assert_int_equal(spec_presets_init(&ps, &err), 0);
    const struct spec_hardware *hw = spec_hardware_find(&ps, "a800-80g");
    assert_int_equal(cost_shape_init(&shape, spec_model_find(&ps, "qwen3-14b")), 0);
    cost_rollout_params_default(&p, hw);
    assert_int_equal(cost_rollout_pre_init(&pre, &shape, hw, &p, 2), 0);
    spec_presets_free(&ps);

    struct engine_config c;
    engine_config_default(&c, &pre);
    struct engine *e;
    assert_int_equal(engine_new(&e, &c), 0);
    struct engine_request r = req(7, 3000, 2000);
    assert_int_equal(engine_submit(e, 5.0, &r), 0);
    struct sink s = run_to(e, 1e4);
    assert_int_equal(s.n, 1);
    assert_close(s.d[0].end_s - 5.0, 2000.0 * cost_single_request_s_per_token(&pre, 3000, 2000),
                 1e-9);
    engine_free(e);
}

static void test_next_turn_reuses_the_cached_context(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request t1 = req(1, 100, 10);
    t1.prefix_key = 42;
    assert_int_equal(engine_submit(e, 0.0, &t1), 0);
    run_to(e, 1.0);
    struct engine_stats st;
    engine_stats(e, &st);
    assert_int_equal(st.cache_tokens, 109); /* prompt + output, the last token never in KV */

    /* token-in client: the whole previous context (110) plus a 20-token tool return */
    struct engine_request t2 = req(2, 130, 1);
    t2.prefix_key = 42;
    t2.reusable_prefix_tokens = 110;
    assert_int_equal(engine_submit(e, 1.0, &t2), 0);
    struct sink s = run_to(e, 2.0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.d[0].cached_tokens, 109);
    assert_int_equal(s.d[0].prefill_tokens, 21);
    /* 21 new tokens after 109 cached: 20 ms + 130 µs + 6 ms */
    assert_close(s.d[0].end_s, 1.02613, 1e-12);

    /* a chat template that rewrote turn 2's last message: 129 of the 130 cached tokens match */
    struct engine_request t3 = req(3, 160, 1);
    t3.prefix_key = 42;
    t3.reusable_prefix_tokens = 129;
    assert_int_equal(engine_submit(e, 3.0, &t3), 0);
    s = run_to(e, 4.0);
    assert_int_equal(s.d[0].cached_tokens, 129);
    assert_int_equal(s.d[0].prefill_tokens, 31);

    /* a weight update flushes the cache: the next turn prefills everything */
    assert_int_equal(engine_flush_cache(e, 5.0), 0);
    engine_stats(e, &st);
    assert_int_equal(st.cache_tokens, 0);
    assert_int_equal(st.cache_flushes, 1);
    struct engine_request t4 = req(4, 170, 1);
    t4.prefix_key = 42;
    t4.reusable_prefix_tokens = 160;
    assert_int_equal(engine_submit(e, 5.0, &t4), 0);
    s = run_to(e, 6.0);
    assert_int_equal(s.d[0].cached_tokens, 0);
    assert_int_equal(s.d[0].prefill_tokens, 170);
    engine_free(e);
}

static void test_cache_evicts_least_recent_tails_under_pressure(void **state)
{
    struct engine *e = toy_engine(300);
    for (uint64_t k = 1; k <= 2; k++) {
        struct engine_request r = req(k, 100, 1);
        r.prefix_key = k;
        assert_int_equal(engine_submit(e, (double)k, &r), 0);
        run_to(e, (double)k + 0.5);
    }
    /* 100 + 100 cached; a 150-token request without a key needs 150 of the 300 slots: the
     * older entry (key 1) loses its last 50 tokens */
    struct engine_request big = req(3, 150, 1);
    assert_int_equal(engine_submit(e, 3.0, &big), 0);
    run_to(e, 3.5);
    struct engine_request again = req(4, 120, 1);
    again.prefix_key = 1;
    again.reusable_prefix_tokens = 100;
    assert_int_equal(engine_submit(e, 4.0, &again), 0);
    struct sink s = run_to(e, 5.0);
    assert_int_equal(s.d[0].cached_tokens, 50);
    engine_free(e);
}

static void test_preemption_recomputes_the_latest_admitted(void **state)
{
    /* 120 KV slots; two 50-token prompts generating 40 each. After the joint prefill (100 slots)
     * ten decodes fill the KV; the eleventh preempts B (latest admitted), whose 60 tokens go to
     * the cache, where A's growth trims them; B waits for A to finish, then re-prefills the 61
     * tokens of its context, 31 of them from the cache: 29 recomputed, 1 new. */
    struct engine *e = toy_engine(120);
    struct engine_request a = req(1, 50, 40), b = req(2, 50, 40);
    a.prefix_key = 1;
    b.prefix_key = 2;
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    assert_int_equal(engine_submit(e, 0.0, &b), 0);
    struct sink s = run_to(e, 100.0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.d[0].id, 1);
    assert_int_equal(s.d[0].preemptions, 0);
    assert_int_equal(s.d[1].id, 2);
    assert_int_equal(s.d[1].preemptions, 1);
    assert_int_equal(s.d[1].gen_tokens, 40);
    assert_int_equal(s.d[1].recompute_tokens, 29);
    assert_int_equal(s.d[1].prefill_tokens, 50 + 30);
    assert_true(s.d[1].end_s > s.d[0].end_s);
    struct engine_stats st;
    engine_stats(e, &st);
    assert_int_equal(st.kv_peak_tokens, 120);
    assert_int_equal(st.preemptions, 1);
    assert_int_equal(st.sampled_tokens, 80);
    engine_free(e);
}

static void test_priority_admits_least_attained_service_first(void **state)
{
    struct cost_rollout_pre pre = toy_pre();
    struct engine_config c;
    engine_config_default(&c, &pre);
    c.max_seqs = 1;
    c.priority = true;
    struct engine *e;
    assert_int_equal(engine_new(&e, &c), 0);
    double service[3] = {5.0, 1.0, 3.0};
    for (uint64_t i = 0; i < 3; i++) {
        struct engine_request r = req(i + 1, 10, 2);
        r.attained_service = service[i];
        assert_int_equal(engine_submit(e, 0.0, &r), 0);
    }
    struct sink s = run_to(e, 10.0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.d[0].id, 2);
    assert_int_equal(s.d[1].id, 3);
    assert_int_equal(s.d[2].id, 1);
    engine_free(e);
}

static void test_chunked_prefill_respects_the_token_budget(void **state)
{
    struct cost_rollout_pre pre = toy_pre();
    struct engine_config c;
    engine_config_default(&c, &pre);
    c.max_batched_tokens = 256;
    struct engine *e;
    assert_int_equal(engine_new(&e, &c), 0);
    struct engine_request r = req(1, 600, 1);
    assert_int_equal(engine_submit(e, 0.0, &r), 0);
    /* chunks 256 (after 0), 256 (after 256), 88 (after 512): 26 ms + (c + n) µs each */
    struct sink s = run_to(e, 10.0);
    assert_close(s.d[0].end_s, 3 * 0.026 + (256 + 512 + 600) * 1e-6, 1e-12);
    engine_free(e);
}

static void test_changes_wait_for_the_running_iteration(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request a = req(1, 100, 10), b = req(2, 100, 1);
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    assert_int_equal(engine_submit(e, 0.01, &b), 0); /* mid-prefill of A: joins after it */
    struct sink s = run_to(e, 10.0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.d[0].id, 2);
    /* B's prefill runs with A's first decode: 2 sequences, 200 + 1 tokens of KV traffic */
    assert_close(s.d[0].end_s, 0.0261 + 0.02 + 201e-6 + 0.005 + 0.002, 1e-12);
    engine_free(e);
}

static void test_abort_reports_partial_output_and_frees_the_id(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request a = req(1, 100, 10);
    a.prefix_key = 9;
    a.reusable_prefix_tokens = 100;
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    /* iterations end at 0.0261 (token 1) and 0.0261 + 0.026101 (token 2) */
    assert_int_equal(engine_advance(e, 0.06, NULL, NULL), 0);
    struct engine_done d;
    assert_int_equal(engine_abort(e, 0.06, 1, &d), 0);
    assert_int_equal(d.end, ENGINE_ABORTED);
    assert_int_equal(d.gen_tokens, 2);
    assert_close(d.end_s, 0.06, 1e-15);
    assert_int_equal(engine_abort(e, 0.06, 1, NULL), LIBRA_ENOENT);
    int64_t gen;
    assert_int_equal(engine_generated_tokens(e, 1, &gen), LIBRA_ENOENT);
    /* the id is free at once; the aborted sequence leaves when its iteration ends */
    assert_int_equal(engine_submit(e, 0.06, &a), 0);
    struct engine_stats st;
    engine_stats(e, &st);
    assert_int_equal(st.running, 1);
    assert_int_equal(st.waiting, 1);
    struct sink s = run_to(e, 10.0);
    assert_int_equal(s.n, 1);                   /* only the resubmitted one */
    assert_int_equal(s.d[0].cached_tokens, 99); /* the aborted KV (102 tokens) was cached */
    engine_free(e);
}

static void test_paused_engine_keeps_its_requests(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request a = req(1, 100, 10);
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    assert_int_equal(engine_set_ready(e, 0.01, false), 0);
    /* the running prefill completes; nothing else starts */
    assert_close(engine_next_event_s(e), 0.0261, 1e-12);
    run_to(e, 0.0261);
    assert_true(isinf(engine_next_event_s(e)));
    int64_t gen;
    assert_int_equal(engine_generated_tokens(e, 1, &gen), 0);
    assert_int_equal(gen, 1);
    assert_int_equal(engine_set_ready(e, 1.0, true), 0);
    struct sink s = run_to(e, 10.0);
    /* the remaining nine decodes start at 1.0: Σ 26 ms + (100 + j) µs */
    assert_close(s.d[0].end_s, 1.0 + 0.234 + 945e-6, 1e-12);
    engine_free(e);
}

static void test_generated_tokens_follow_a_fast_forwarded_run(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request a = req(1, 100, 10);
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    /* after the prefill (0.0261) and three decodes of 26 ms + (101..103) µs */
    engine_advance(e, 0.0261 + 0.078 + 306e-6 + 1e-9, NULL, NULL);
    int64_t gen;
    assert_int_equal(engine_generated_tokens(e, 1, &gen), 0);
    assert_int_equal(gen, 4);
    engine_free(e);
}

/* Busy time at any instant of a composed run, without advancing (the scenario above). */
static void test_busy_time_inside_a_run_without_advancing(void **state)
{
    struct engine *e = toy_engine(1000);
    struct engine_request a = req(1, 100, 10);
    double b;
    assert_int_equal(engine_submit(e, 0.0, &a), 0);
    assert_int_equal(engine_busy_at(e, 0.0, &b), 0);
    assert_true(b == 0.0);
    assert_int_equal(engine_busy_at(e, 0.01, &b), LIBRA_EINVAL); /* prefill not composed */
    engine_next_event_s(e);
    assert_int_equal(engine_busy_at(e, 0.01, &b), 0);
    assert_close(b, 0.01, 1e-12);
    assert_int_equal(engine_busy_at(e, 0.03, &b), LIBRA_EINVAL); /* past the prefill */
    run_to(e, 0.0261);
    assert_close(engine_next_event_s(e), 0.261045, 1e-12);
    assert_int_equal(engine_busy_at(e, 0.2, &b), 0);
    assert_close(b, 0.2, 1e-12); /* inside the nine-decode run: busy throughout */
    assert_int_equal(engine_busy_at(e, 0.261045, &b), 0);
    assert_close(b, 0.261045, 1e-12);
    assert_int_equal(engine_busy_at(e, 0.3, &b), LIBRA_EINVAL); /* past the run */
    struct engine_stats st;
    engine_stats(e, &st);
    assert_close(st.busy_s, 0.0261, 1e-12); /* nothing was advanced */
    run_to(e, 1.0);
    assert_int_equal(engine_busy_at(e, 0.5, &b), LIBRA_EINVAL); /* before the clock */
    assert_int_equal(engine_busy_at(e, 50.0, &b), 0);           /* idle: flat */
    assert_close(b, 0.261045, 1e-12);
    engine_free(e);
}

static void test_bad_calls_are_rejected(void **state)
{
    struct cost_rollout_pre pre = toy_pre();
    struct engine_config c;
    engine_config_default(&c, &pre);
    struct engine *e = NULL;
    struct engine_config bad = c;
    bad.max_batched_tokens = c.max_seqs - 1;
    assert_int_equal(engine_new(&e, &bad), LIBRA_EINVAL);
    assert_null(e);
    bad = c;
    bad.max_model_tokens = c.kv_capacity_tokens + 1;
    assert_int_equal(engine_new(&e, &bad), LIBRA_EINVAL);

    assert_int_equal(engine_new(&e, &c), 0);
    struct engine_request r = req(1, 900, 101); /* 1001 > the 1000-token context */
    assert_int_equal(engine_submit(e, 0.0, &r), LIBRA_EINVAL);
    r = req(1, 10, 0);
    assert_int_equal(engine_submit(e, 0.0, &r), LIBRA_EINVAL);
    r = req(1, 10, 5);
    r.reusable_prefix_tokens = 11;
    assert_int_equal(engine_submit(e, 0.0, &r), LIBRA_EINVAL);
    r.reusable_prefix_tokens = 10;
    r.attained_service = NAN;
    assert_int_equal(engine_submit(e, 0.0, &r), LIBRA_EINVAL);
    r.attained_service = 0.0;
    assert_int_equal(engine_submit(e, 1.0, &r), 0);
    assert_int_equal(engine_submit(e, 1.0, &r), LIBRA_EINVAL); /* id live */
    assert_int_equal(engine_advance(e, 0.5, NULL, NULL), LIBRA_EINVAL);
    assert_int_equal(engine_flush_cache(e, 0.5), LIBRA_EINVAL);
    assert_int_equal(engine_set_ready(e, NAN, true), LIBRA_EINVAL);
    assert_int_equal(engine_abort(e, INFINITY, 1, NULL), LIBRA_EINVAL);
    engine_free(e);
    engine_free(NULL);
}

/* ---- invariants over random runs --------------------------------------------------------- */

struct tally {
    int64_t reported[256];
    int64_t gen[256];
    int64_t gen_want[256];
};

static void tally_done(void *ctx, const struct engine_done *d)
{
    struct tally *t = ctx;
    t->reported[d->id]++;
    t->gen[d->id] = d->gen_tokens;
    assert_true(d->end_s >= d->first_token_s && d->first_token_s >= d->submit_s);
}

static void test_random_runs_keep_the_invariants(void **state)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct rng g = rng_keyed(seed, 7, 0, 0);
        int64_t kv = 60 + (int64_t)rng_uniform_int(&g, 400);
        struct engine *e = toy_engine(kv);
        struct tally t;
        memset(&t, 0, sizeof t);
        double now = 0.0;
        int n = 0;
        for (int op = 0; op < 120 && n < 256; op++) {
            now += rng_exponential(&g, 20.0);
            struct engine_stats st;
            assert_true(engine_advance(e, now, tally_done, &t) >= 0);
            engine_stats(e, &st);
            assert_true(st.kv_used_tokens + st.cache_tokens <= kv);
            if (rng_bernoulli(&g, 0.1)) {
                assert_int_equal(engine_flush_cache(e, now), 0);
                engine_stats(e, &st);
                assert_int_equal(st.cache_tokens, 0);
            }
            if (rng_bernoulli(&g, 0.1) && n > 0) {
                uint64_t id = rng_uniform_int(&g, (uint64_t)n);
                struct engine_done d;
                if (engine_abort(e, now, id, &d) == 0) {
                    t.reported[id]++;
                    t.gen_want[id] = d.gen_tokens; /* what it had when aborted */
                    t.gen[id] = d.gen_tokens;
                }
                continue;
            }
            int64_t prompt = 1 + (int64_t)rng_uniform_int(&g, (uint64_t)kv / 2);
            struct engine_request r =
                req((uint64_t)n, prompt, 1 + (int64_t)rng_uniform_int(&g, (uint64_t)(kv - prompt)));
            r.prefix_key = rng_uniform_int(&g, 6);
            r.reusable_prefix_tokens = (int64_t)rng_uniform_int(&g, (uint64_t)prompt + 1);
            t.gen_want[n] = r.gen_tokens;
            assert_int_equal(engine_submit(e, now, &r), 0);
            n++;
        }
        assert_true(engine_advance(e, now + 1e6, tally_done, &t) >= 0);
        struct engine_stats st;
        engine_stats(e, &st);
        assert_int_equal(st.running + st.waiting, 0);
        assert_int_equal(st.kv_used_tokens, 0);
        assert_true(st.kv_peak_tokens <= kv);
        assert_int_equal(st.finished + st.aborted, n);
        for (int i = 0; i < n; i++) {
            assert_int_equal(t.reported[i], 1);        /* exactly once */
            assert_int_equal(t.gen[i], t.gen_want[i]); /* every token asked for, or aborted */
        }
        engine_free(e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_request_is_prefill_then_decodes),
        cmocka_unit_test(test_two_requests_share_iterations),
        cmocka_unit_test(test_matches_the_cost_model_single_request_rate),
        cmocka_unit_test(test_next_turn_reuses_the_cached_context),
        cmocka_unit_test(test_cache_evicts_least_recent_tails_under_pressure),
        cmocka_unit_test(test_preemption_recomputes_the_latest_admitted),
        cmocka_unit_test(test_priority_admits_least_attained_service_first),
        cmocka_unit_test(test_chunked_prefill_respects_the_token_budget),
        cmocka_unit_test(test_changes_wait_for_the_running_iteration),
        cmocka_unit_test(test_abort_reports_partial_output_and_frees_the_id),
        cmocka_unit_test(test_paused_engine_keeps_its_requests),
        cmocka_unit_test(test_generated_tokens_follow_a_fast_forwarded_run),
        cmocka_unit_test(test_busy_time_inside_a_run_without_advancing),
        cmocka_unit_test(test_bad_calls_are_rejected),
        cmocka_unit_test(test_random_runs_keep_the_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
