/* Tests of the plan.tp_pattern and fleet parsers (src/spec/bucket.c). */
#include "testutil.h"

#include <string.h>

#include "spec/bucket.h"

static void parses(const char *text, int c1, int c2, int c4, int c8, int gpus)
{
    int c[SPEC_TP_SIZES], g;
    struct libra_error err = {0};
    int rc = spec_tp_pattern_parse(text, "plan.tp_pattern", c, &g, &err);
    if (rc)
        print_error("'%s': %s\n", text, err.msg);
    assert_int_equal(rc, 0);
    assert_int_equal(c[0], c1);
    assert_int_equal(c[1], c2);
    assert_int_equal(c[2], c4);
    assert_int_equal(c[3], c8);
    assert_int_equal(g, gpus);
}

static void fails(const char *text, int col, const char *needle)
{
    int c[SPEC_TP_SIZES], g;
    struct libra_error err = {0};
    assert_int_equal(spec_tp_pattern_parse(text, "plan.tp_pattern", c, &g, &err), LIBRA_EINVAL);
    if (err.col != col || !strstr(err.msg, needle))
        print_error("'%s': col %d '%s', want col %d '%s'\n", text, err.col, err.msg, col, needle);
    assert_int_equal(err.col, col);
    assert_non_null(strstr(err.msg, needle));
    assert_string_equal(err.file, "plan.tp_pattern");
}

static void test_valid(void **state)
{
    parses("", 0, 0, 0, 0, 0);
    parses("1,1,2,4", 2, 1, 1, 0, 8);
    parses("tp8", 0, 0, 0, 1, 8);
    parses("TP2,tp2,2,2", 0, 4, 0, 0, 8);
    parses("1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1", 16, 0, 0, 0, 16);
}

static void test_invalid(void **state)
{
    fails("3", 1, "expected a TP size");
    fails("1,16", 3, "expected a TP size");
    fails("1,,2", 3, "expected a TP size");
    fails("1,2,", 5, "expected a TP size");
    /* one spelling, as a bucket layout's: a space would give the same plan another digest */
    fails(" 4,4", 1, "a space is not allowed");
    fails("4, 4", 3, "a space is not allowed");
    fails("4 ,4", 2, "a space is not allowed");
    fails("4,4\t", 4, "a tab is not allowed");
    fails("   ", 1, "a space is not allowed");
    fails("1 2", 2, "a space is not allowed");
    fails("tp", 1, "expected a TP size");
    fails("-1", 1, "expected a TP size");
    fails("1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1", 33, "more than 16");
}

static void test_fleet(void **state)
{
    int tp[8], n = 0;
    struct libra_error err = {0};
    assert_int_equal(spec_fleet_parse("tp1x2, TP4,tp2x1", "--instances", tp, 8, &n, &err), 0);
    assert_int_equal(n, 4);
    int want[] = {1, 1, 4, 2};
    assert_memory_equal(tp, want, sizeof want);
    const char *bad[][2] = {{"tp3", "not one of"},
                            {"tp2x0", "at least 1"},
                            {"tp1x4,tp2x5", "more than 8"},
                            {"tp1,", "expected 'tp'"},
                            {"tp1 tp2", "expected ','"},
                            {"", "expected 'tp'"},
                            {"tp01", "leading zero"},
                            {"tp1x04", "leading zero"},
                            {"tp1x9", "instance count is larger than 8"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(spec_fleet_parse(bad[i][0], "--instances", tp, 8, &n, &err), LIBRA_EINVAL);
        if (!strstr(err.msg, bad[i][1]))
            print_error("'%s': '%s', want '%s'\n", bad[i][0], err.msg, bad[i][1]);
        assert_non_null(strstr(err.msg, bad[i][1]));
        assert_string_equal(err.file, "--instances");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_fleet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
