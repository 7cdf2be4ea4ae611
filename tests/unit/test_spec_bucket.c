/* Tests of the bucket layout codec (src/spec/bucket.c): text and JSON forms, validation,
 * reference layouts and the bucket-of-tokens rule. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "spec/bucket.h"

static void parse_ok(const char *text, struct spec_bucket_layout *l)
{
    struct libra_error err = {0};
    int rc = spec_bucket_parse(l, text, "--buckets", &err);
    if (rc)
        print_error("'%s': %s (col %d)\n", text, err.msg, err.col);
    assert_int_equal(rc, 0);
    assert_int_equal(spec_bucket_validate(l, NULL), 0);
}

/* Asserts text fails at column col with a message containing needle. */
static void parse_fails(const char *text, int col, const char *needle)
{
    struct spec_bucket_layout l;
    struct libra_error err = {0};
    assert_int_equal(spec_bucket_parse(&l, text, "--buckets", &err), LIBRA_EINVAL);
    if (err.col != col || !strstr(err.msg, needle))
        print_error("'%s': col %d msg '%s', want col %d and '%s'\n", text, err.col, err.msg, col,
                    needle);
    assert_int_equal(err.col, col);
    assert_non_null(strstr(err.msg, needle));
    assert_string_equal(err.file, "--buckets");
}

static void test_parse_reference_form(void **state)
{
    struct spec_bucket_layout l;
    parse_ok("tp1:4000,tp2:12000,tp4:30000", &l);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.bucket[0].max_tokens, 4000);
    assert_int_equal(l.bucket[0].n_tp, 1);
    assert_int_equal(l.bucket[0].tp[0], 1);
    assert_int_equal(l.bucket[2].tp[0], 4);
    assert_int_equal(l.bucket[2].max_tokens, 30000);
    assert_int_equal(l.bucket[1].instances[0], 0);
}

static void test_parse_multi_tp_counts(void **state)
{
    struct spec_bucket_layout l;
    parse_ok("tp2x3+tp1x2:5000,tp8:40960", &l);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.bucket[0].n_tp, 2);
    assert_int_equal(l.bucket[0].tp[0], 1); /* sorted */
    assert_int_equal(l.bucket[0].instances[0], 2);
    assert_int_equal(l.bucket[0].tp[1], 2);
    assert_int_equal(l.bucket[0].instances[1], 3);
    char buf[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&l, buf, sizeof buf);
    assert_string_equal(buf, "tp1x2+tp2x3:5000,tp8:40960");
}

/* The text form has one spelling (docs/routing.md): lower case, no spaces, no leading zeros.
 * Anything else is refused at the offending byte, quoting it, rather than read as a layout. */
static void test_parse_refuses_other_spellings(void **state)
{
    parse_fails("tp01:100", 3, "'01' has a leading zero");
    parse_fails("tp1:0100", 5, "'0100' has a leading zero");
    parse_fails("tp2x03:100", 5, "'03' has a leading zero");
    parse_fails("TP1:100", 1, "'TP' must be lower case");
    parse_fails("tp1:100,Tp2:200", 9, "'Tp' must be lower case");
    parse_fails("tp2X3:100", 4, "'X' must be lower case");
    parse_fails("tp1:100 ", 8, "a space is not allowed");
    parse_fails(" tp1:100", 1, "a space is not allowed");
    parse_fails("tp1 :100", 4, "a space is not allowed");
    parse_fails("tp1: 100", 5, "a space is not allowed");
    parse_fails("tp1:100, tp2:200", 9, "a space is not allowed");
    parse_fails("tp1 + tp2:100", 4, "a space is not allowed");
    parse_fails("tp1:100,\ttp2:200", 9, "a tab is not allowed");
    parse_fails("tp 1:100", 3, "a space is not allowed");
}

static void test_parse_errors_name_the_column(void **state)
{
    parse_fails("", 1, "expected 'tp'");
    parse_fails("tp3:4000", 3, "tp size 3 is not one of");
    parse_fails("tp16:4000", 3, "tp size is larger than 8");
    parse_fails("tp1:4000,tp2:3000", 14, "above the previous bucket's 4000");
    parse_fails("tp1:0", 5, "must be positive");
    parse_fails("tp1:4000;tp2:5000", 9, "expected ',' or the end");
    parse_fails("tp1;4000", 4, "expected '+' or ':'");
    parse_fails("tp1+tp1:4000", 7, "tp1 appears twice");
    parse_fails("tp1:", 5, "expected max_tokens");
    parse_fails("tp1:4000,", 10, "expected 'tp'");
    parse_fails("tp1:999999999999999999999", 5, "max_tokens is larger than");
    parse_fails("tp1x99999:10", 5, "instance count is larger than");
    parse_fails("tp1x0:100", 5, "an instance count must be at least 1");
    parse_fails("tp1+tp2+tp4+tp8+tp1:10", 19, "at most 4 tp sizes");
    parse_fails("tp1:1,tp1:2,tp1:3,tp1:4,tp1:5,tp1:6,tp1:7,tp1:8,tp1:9", 49, "at most 8 buckets");
    /* the first bucket has no previous one to be above (it was said to, "above ... 0") */
    struct spec_bucket_layout l;
    struct libra_error err = {0};
    assert_int_equal(spec_bucket_parse(&l, "tp1:0", "--buckets", &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "max_tokens 0 must be positive");
}

static void test_format_round_trip_and_truncation(void **state)
{
    const char *forms[] = {"tp1:4000,tp2:12000,tp4:30000", "tp2:3000,tp2:6000,tp4:32768",
                           "tp1+tp2:5000", "tp1x4+tp2x2:4000,tp4x1:30000"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct spec_bucket_layout l, back;
        parse_ok(forms[i], &l);
        char buf[SPEC_BUCKET_TEXT_MAX];
        size_t n = spec_bucket_format(&l, buf, sizeof buf);
        assert_int_equal(n, strlen(forms[i]));
        assert_string_equal(buf, forms[i]);
        parse_ok(buf, &back);
        assert_memory_equal(&l, &back, sizeof l);
        char small[8];
        assert_int_equal(spec_bucket_format(&l, small, sizeof small), n);
        assert_int_equal(strlen(small), sizeof small - 1);
        assert_memory_equal(small, forms[i], sizeof small - 1);
    }
}

static void test_validate_rules(void **state)
{
    struct spec_bucket_layout l;
    parse_ok("tp1+tp2:4000,tp4:30000", &l);
    struct libra_error err = {0};
    struct spec_bucket_layout bad = l;
    bad.bucket[0].tp[1] = 1;
    assert_int_equal(spec_bucket_validate(&bad, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "distinct and ascending"));
    bad = l;
    bad.bucket[1].max_tokens = 4000;
    assert_int_equal(spec_bucket_validate(&bad, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "bucket 2"));
    bad = l;
    bad.bucket[1].tp[0] = 6;
    assert_int_equal(spec_bucket_validate(&bad, &err), LIBRA_EINVAL);
    bad = l;
    bad.n = 0;
    assert_int_equal(spec_bucket_validate(&bad, &err), LIBRA_EINVAL);
    bad = l;
    bad.bucket[0].instances[0] = -1;
    assert_int_equal(spec_bucket_validate(&bad, &err), LIBRA_EINVAL);
    bad = l;
    bad.bucket[1].n_tp = 0;
    assert_int_equal(spec_bucket_validate(&bad, &err), LIBRA_EINVAL);
}

static int from_json(const char *text, struct spec_bucket_layout *l, struct libra_error *err)
{
    struct ujson_doc doc;
    int rc = ujson_doc_parse(&doc, "plan.json", text, strlen(text), err);
    assert_int_equal(rc, 0);
    rc = spec_bucket_from_json(l, &doc, "rollout/layout", err);
    ujson_doc_free(&doc);
    return rc;
}

static void test_json_round_trip(void **state)
{
    struct spec_bucket_layout l, back;
    parse_ok("tp1x4+tp2x2:4000,tp4:30000", &l);
    json_t *j = spec_bucket_to_json(&l);
    json_t *wrap = json_pack("{s:{s:o}}", "rollout", "layout", j);
    char *text = ujson_dump(wrap, false);
    json_decref(wrap);
    struct libra_error err = {0};
    assert_int_equal(from_json(text, &back, &err), 0);
    free(text);
    assert_memory_equal(&l, &back, sizeof l);
    /* No instance counts: "instances" is left out. */
    parse_ok("tp2:5000", &l);
    j = spec_bucket_to_json(&l);
    text = ujson_dump(j, false);
    json_decref(j);
    assert_string_equal(text, "{\"buckets\":[{\"max_tokens\":5000,\"tp\":[2]}]}");
    free(text);
}

static void test_json_string_form_and_errors(void **state)
{
    struct spec_bucket_layout l;
    struct libra_error err = {0};
    assert_int_equal(from_json("{\"rollout\":{\"layout\":\"tp2:5000,tp4:15000\"}}", &l, &err), 0);
    assert_int_equal(l.n, 2);

    assert_int_equal(from_json("{\"rollout\":{\"layout\":\"tp3:5000\"}}", &l, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "tp size 3"));
    assert_int_equal(err.line, 1);

    const char *bad_key = "{\"rollout\":{\"layout\":{\"buckets\":[\n"
                          "  {\"max_tokens\":4000,\"tp\":[1],\"tps\":[2]}]}}}";
    assert_int_equal(from_json(bad_key, &l, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "unknown key"));
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 31);

    const char *mismatch = "{\"rollout\":{\"layout\":{\"buckets\":["
                           "{\"max_tokens\":4000,\"tp\":[1,2],\"instances\":[1]}]}}}";
    assert_int_equal(from_json(mismatch, &l, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "instances"));

    const char *descending = "{\"rollout\":{\"layout\":{\"buckets\":["
                             "{\"max_tokens\":4000,\"tp\":[1]},{\"max_tokens\":100,\"tp\":[2]}]}}}";
    assert_int_equal(from_json(descending, &l, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "bucket 2"));

    assert_int_equal(from_json("{\"rollout\":{}}", &l, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "expected a bucket layout"));
    assert_int_equal(from_json("{\"rollout\":{\"layout\":{\"buckets\":[]}}}", &l, &err),
                     LIBRA_EINVAL);
    assert_int_equal(from_json("{\"rollout\":{\"layout\":{\"buckets\":[{\"tp\":[1]}]}}}", &l, &err),
                     LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "max_tokens"));
}

static void test_reference_layouts(void **state)
{
    struct spec_bucket_layout l;
    char buf[SPEC_BUCKET_TEXT_MAX];
    assert_int_equal(spec_bucket_default(&l, "R2E-Gym", "qwen3-14b"), 0);
    spec_bucket_format(&l, buf, sizeof buf);
    assert_string_equal(buf, "tp1:4000,tp2:12000,tp4:30000");
    assert_int_equal(spec_bucket_default(&l, "search-r1", NULL), 0);
    spec_bucket_format(&l, buf, sizeof buf);
    assert_string_equal(buf, "tp2:5000,tp4:15000,tp8:40960");
    assert_int_equal(spec_bucket_default(&l, "r2e-gym", "qwen3-4b"), 0);
    spec_bucket_format(&l, buf, sizeof buf);
    assert_string_equal(buf, "tp2:3000,tp2:6000,tp4:32768");
    assert_int_equal(spec_bucket_default(&l, "dapo-math", NULL), 0);
    assert_int_equal(spec_bucket_default(&l, "search-r1", "qwen3-4b"), LIBRA_ENOENT);
    assert_int_equal(spec_bucket_default(&l, "chess", NULL), LIBRA_ENOENT);
}

static void test_bucket_index_and_tp(void **state)
{
    struct spec_bucket_layout l;
    parse_ok("tp1+tp2:4000,tp2:12000,tp4:30000", &l);
    assert_int_equal(spec_bucket_index(&l, 0), 0);
    assert_int_equal(spec_bucket_index(&l, 4000), 0);
    assert_int_equal(spec_bucket_index(&l, 4001), 1);
    assert_int_equal(spec_bucket_index(&l, 30000), 2);
    assert_int_equal(spec_bucket_index(&l, 99999), 2); /* beyond the last: the last */
    assert_true(spec_bucket_has_tp(&l.bucket[0], 2));
    assert_false(spec_bucket_has_tp(&l.bucket[0], 4));
}

/* A layout a cluster cannot hold an instance of is refused, naming the bucket and the bound. */
static void test_check_cluster(void **state)
{
    struct spec_bucket_layout l;
    parse_ok("tp2:5000,tp4:15000,tp8:40960", &l);
    struct libra_error err = {0};
    assert_int_equal(spec_bucket_check_cluster(&l, 48, 8, &err), 0);
    assert_int_equal(spec_bucket_check_cluster(&l, 8, 8, &err), 0);
    assert_int_equal(spec_bucket_check_cluster(&l, 4, 8, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "bucket 3 (tp8:40960) is served by TP8, but the cluster has "
                                    "4 GPUs (cluster.gpus)"));
    assert_int_equal(spec_bucket_check_cluster(&l, 48, 4, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "but a node has 4 GPUs (cluster.gpus_per_node)"));
    parse_ok("tp1x2+tp4:5000", &l);
    assert_int_equal(spec_bucket_check_cluster(&l, 2, 2, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "bucket 1 (tp1x2+tp4:5000) is served by TP4, but the cluster "
                                    "has 2 GPUs"));
    assert_int_equal(spec_bucket_check_cluster(&l, 4, 4, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_reference_form),
        cmocka_unit_test(test_parse_multi_tp_counts),
        cmocka_unit_test(test_parse_refuses_other_spellings),
        cmocka_unit_test(test_parse_errors_name_the_column),
        cmocka_unit_test(test_format_round_trip_and_truncation),
        cmocka_unit_test(test_validate_rules),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_string_form_and_errors),
        cmocka_unit_test(test_reference_layouts),
        cmocka_unit_test(test_bucket_index_and_tp),
        cmocka_unit_test(test_check_cluster),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
