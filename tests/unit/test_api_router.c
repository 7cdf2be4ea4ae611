/* api/router: the public router's calls refuse what they cannot take — token counts a trace
 * could not hold, clocks that are not finite or run backwards — with LIBRA_EINVAL naming the
 * argument, before anything changes, so that a later step does not fail as an internal error. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "libra/libra.h"
#include "trace/trace.h"

static struct libra_router *new_router(const char *policy)
{
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"sched\": {\"policy\": \"%s\", \"buckets\": \"tp1:1000,tp2:3000\"}}", policy);
    struct libra_router *r = NULL;
    struct libra_error err;
    assert_int_equal(libra_router_new(cfg, NULL, &r, &err), 0);
    assert_int_equal(libra_router_add_instance(r, 1, 1, NULL, &err), 0);
    assert_int_equal(libra_router_add_instance(r, 2, 2, NULL, &err), 0);
    return r;
}

static void assert_refused(int rc, const struct libra_error *err, const char *what)
{
    assert_int_equal(rc, LIBRA_EINVAL);
    if (!strstr(err->msg, what))
        fail_msg("'%s' does not name '%s'", err->msg, what);
}

/* Each token argument past TRACE_MAX_TOKENS is refused naming it; the call changes nothing. */
static void test_token_counts_past_a_traces_are_refused(void **state)
{
    (void)state;
    struct libra_router *r = new_router("cmlfq");
    struct libra_error err;
    struct libra_decision d;
    assert_int_equal(libra_router_start(r, "a", 1, &err), 0);
    assert_refused(libra_router_route(r, "a", TRACE_MAX_TOKENS + 1, 0.0, &d, &err), &err,
                   "context_tokens");
    assert_refused(libra_router_route(r, "a", INT64_MAX, 0.0, &d, &err), &err, "context_tokens");
    /* refused, the turn was not routed: the next route is its first */
    assert_int_equal(libra_router_route(r, "a", 100, 0.0, &d, &err), 0);
    assert_string_equal(d.reason, "first");
    assert_refused(libra_router_turn_done(r, "a", INT64_MAX, &err), &err, "generated_tokens");
    /* still in flight */
    assert_int_equal(libra_router_turn_done(r, "a", TRACE_MAX_TOKENS, &err), 0);
    assert_refused(libra_router_tool_return(r, "a", "bash", "success", TRACE_MAX_TOKENS + 1, &err),
                   &err, "payload_tokens");
    /* -1 is unknown; below it no count */
    assert_refused(libra_router_tool_return(r, "a", "bash", "success", -5, &err), &err,
                   "payload_tokens");
    assert_int_equal(libra_router_tool_return(r, "a", "bash", "success", -1, &err), 0);
    assert_int_equal(libra_router_route(r, "a", TRACE_MAX_TOKENS, 1.0, &d, &err), 0);
    /* the trajectory's generated tokens, summed over its turns, stay within a trace's */
    assert_refused(libra_router_turn_done(r, "a", 1, &err), &err, "generated_tokens");
    assert_int_equal(libra_router_turn_done(r, "a", 0, &err), 0);
    assert_int_equal(libra_router_finish(r, "a", NULL, &err), 0);
    assert_int_equal(libra_router_step(r, 2.0, &err), 0);
    libra_router_free(r);
}

/* Huge but accepted counts on every learning policy: the step learns them (no internal error,
 * no overflow under UBSan). */
static void test_largest_counts_are_learnt(void **state)
{
    (void)state;
    const char *policies[] = {"cmlfq", "la_mlfq", "predictor", "cmlfq_h", "plas"};
    for (size_t p = 0; p < sizeof policies / sizeof *policies; p++) {
        struct libra_router *r = new_router(policies[p]);
        struct libra_error err;
        struct libra_decision d;
        for (int s = 0; s < 3; s++) {
            assert_int_equal(libra_router_start(r, "a", 1, &err), 0);
            assert_int_equal(libra_router_route(r, "a", TRACE_MAX_TOKENS / 2, s, &d, &err), 0);
            assert_int_equal(libra_router_turn_done(r, "a", TRACE_MAX_TOKENS / 2, &err), 0);
            assert_int_equal(
                libra_router_tool_return(r, "a", "bash", "success", TRACE_MAX_TOKENS, &err), 0);
            assert_int_equal(libra_router_route(r, "a", TRACE_MAX_TOKENS, s, &d, &err), 0);
            assert_int_equal(libra_router_turn_done(r, "a", TRACE_MAX_TOKENS / 2, &err), 0);
            assert_int_equal(libra_router_finish(r, "a", "completed", &err), 0);
            if (libra_router_step(r, s, &err) != 0)
                fail_msg("%s: step %d: %s", policies[p], s, err.msg);
        }
        libra_router_free(r);
    }
}

/* now_s is NAN (the library's clock) or a finite time; a step's is not before the last step's. */
static void test_clocks_must_be_finite_and_steps_ordered(void **state)
{
    (void)state;
    struct libra_router *r = new_router("cmlfq_h");
    struct libra_error err;
    struct libra_decision d;
    assert_int_equal(libra_router_start(r, "a", 1, &err), 0);
    assert_refused(libra_router_route(r, "a", 10, INFINITY, &d, &err), &err, "now_s");
    assert_refused(libra_router_route(r, "a", 10, -INFINITY, &d, &err), &err, "now_s");
    assert_int_equal(libra_router_route(r, "a", 10, NAN, &d, &err), 0);
    assert_int_equal(libra_router_turn_done(r, "a", 10, &err), 0);
    assert_refused(libra_router_step(r, INFINITY, &err), &err, "now_s");
    assert_refused(libra_router_step(r, -INFINITY, &err), &err, "now_s");
    assert_int_equal(libra_router_step(r, 100.0, &err), 0);
    assert_refused(libra_router_step(r, 99.0, &err), &err, "now_s");
    assert_int_equal(libra_router_step(r, 100.0, &err), 0);
    assert_int_equal(libra_router_step(r, 110.0, &err), 0);
    libra_router_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_counts_past_a_traces_are_refused),
        cmocka_unit_test(test_largest_counts_are_learnt),
        cmocka_unit_test(test_clocks_must_be_finite_and_steps_ordered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
