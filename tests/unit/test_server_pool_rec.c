/* Tests of the elastic pool's records: the bodies of the pool's calls and the journal's pool
 * records (src/server/pool_rec.c). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/pool_rec.h"

static int parse(const char *text, struct gw_pool_rec *r, char *err)
{
    return gw_pool_rec_parse(text, strlen(text), r, err, 256);
}

static void test_every_member_is_read_and_absent_ones_say_so(void **state)
{
    struct gw_pool_rec r;
    char err[256];
    assert_int_equal(parse("{\"event\": \"retaken\", \"request\": 4, \"replica\": 1, "
                           "\"generation\": 2, \"version\": 7}",
                           &r, err),
                     0);
    assert_int_equal(r.event, GW_POOL_OP_RETAKEN);
    assert_int_equal(r.request, 4);
    assert_int_equal(r.replica, 1);
    assert_int_equal(r.generation, 2);
    assert_int_equal(r.version, 7);
    assert_int_equal(r.op, GW_POOL_OP_NONE);
    assert_true(r.t_s < 0 && r.step == -1 && r.phase == 0 && r.reason[0] == '\0');
    assert_int_equal(parse("{\"step\": 3, \"version\": 3, \"phase\": \"end\"}", &r, err), 0);
    assert_int_equal(r.phase, 2);
    assert_int_equal(parse("{}", &r, err), 0);
    assert_int_equal(r.replica, -1);
}

static void test_a_record_reads_back_from_its_journal_text(void **state)
{
    struct gw_pool_rec r = gw_pool_rec_absent(GW_POOL_OP_LEND, 0.1 + 0.2), back;
    r.replica = 3;
    r.request = 9;
    snprintf(r.reason, sizeof r.reason, "rollout \"behind\"");
    char err[256], *text = gw_pool_rec_text(&r);
    assert_int_equal(parse(text, &back, err), 0);
    assert_int_equal(back.op, GW_POOL_OP_LEND);
    assert_true(back.t_s == r.t_s); /* bit for bit: the replay's clock */
    assert_int_equal(back.replica, 3);
    assert_int_equal(back.request, 9);
    assert_int_equal(back.generation, -1);
    assert_string_equal(back.reason, r.reason);
    assert_null(strstr(text, "generation"));
    assert_null(strstr(text, "train_s"));
    free(text);
    /* a step's end as the steering gateway journals it: what it measured, bit for bit */
    r = gw_pool_rec_absent(GW_POOL_OP_STEP, 2.5);
    r.step = r.version = 4;
    r.phase = 2;
    r.train_s = 1.0 / 3;
    r.rollout_s = 0.0;
    r.pressure = 0.1 + 0.7;
    r.rollout_gpus = 12;
    text = gw_pool_rec_text(&r);
    assert_int_equal(parse(text, &back, err), 0);
    assert_true(back.train_s == r.train_s && back.rollout_s == 0.0 && back.pressure == r.pressure);
    assert_int_equal(back.rollout_gpus, 12);
    free(text);
    assert_string_equal(gw_pool_op_name(GW_POOL_OP_TICK), "tick");
    assert_string_equal(gw_pool_op_name(GW_POOL_OP_NONE), "");
}

static void test_a_bad_record_says_what_is_wrong(void **state)
{
    struct gw_pool_rec r;
    char err[256];
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"{\"replica\": 64}", "replica: expected an integer from 0 to 63"},
        {"{\"replica\": 1.5}", "replica: expected an integer"},
        {"{\"request\": 0}", "request: expected an id >= 1"},
        {"{\"generation\": -2}", "generation: expected an integer"},
        {"{\"t\": -1}", "t: expected a finite number"},
        {"{\"op\": \"borrow\"}", "op: expected reclaim, lend"},
        {"{\"phase\": \"middle\"}", "phase: expected begin or end"},
        {"{\"event\": \"lent\"}", "event: expected released or retaken"},
        {"{\"reason\": 5}", "reason: expected a string"},
        {"{\"reason\": \"a\\tb\"}", "reason: a control character"},
        {"{\"train_s\": 0}", "train_s: expected a finite number > 0"},
        {"{\"rollout_s\": -1}", "rollout_s: expected a finite number >= 0"},
        {"{\"pressure\": \"high\"}", "pressure: expected a finite number"},
        {"{\"rollout_gpus\": 0.5}", "rollout_gpus: expected an integer"},
        {"{\"priority\": 1}", "unknown member 'priority'"},
        {"{\"replica\": 0, \"replica\": 1}", "body:"},
        {"[0]", "body: expected a JSON object"},
        {"{\"replica\": ", "body:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(parse(cases[i].text, &r, err), -1);
        if (!strstr(err, cases[i].says))
            fail_msg("%s: '%s' does not say '%s'", cases[i].text, err, cases[i].says);
    }
    char long_reason[GW_POOL_REASON_MAX + 32];
    snprintf(long_reason, sizeof long_reason, "{\"reason\": \"%0*d\"}", GW_POOL_REASON_MAX, 0);
    assert_int_equal(parse(long_reason, &r, err), -1);
    assert_non_null(strstr(err, "at most 127 bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_member_is_read_and_absent_ones_say_so),
        cmocka_unit_test(test_a_record_reads_back_from_its_journal_text),
        cmocka_unit_test(test_a_bad_record_says_what_is_wrong),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
