/*
 * Tests of the table-driven settings (spec/schema.h) on a table of every type, independent of
 * the config and preset tables: storage by size, range edges, text conversion, lists, sets and
 * suggestions.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/schema.h"
#include "testutil.h"

struct sample {
    int small;
    int64_t big;
    double ratio;
    bool on;
    char name[8];
    int color;
    unsigned flags;
    char tags[12];
};

static const char *const colors[] = {"red", "green", NULL};
static const char *const flag_names[] = {"a", "b", "c", NULL};

#define S struct sample
static const struct spec_field fields[] = {
    SPEC_INT_ROW(S, small, 0, "", 3, 1, 10, NULL, 0, "an int"),
    SPEC_INT_ROW(S, big, 0, "tokens", 0, 0, 1e15, NULL, 0, "an int64"),
    SPEC_DOUBLE_ROW(S, ratio, SPEC_ABOVE_MIN, "", 0.5, 0, 1, NULL, 0, "in (0, 1]"),
    SPEC_BOOL_ROW(S, on, 0, 1, NULL, 0, "a bool"),
    SPEC_STRING_ROW(S, name, SPEC_REQUIRED, "x", NULL, 0, "a short string"),
    SPEC_ENUM_ROW(S, color, 0, colors, 1, NULL, 0, "an enum"),
    SPEC_SET_ROW(S, flags, 0, flag_names, 5, 0, NULL, 0, "a set"),
    SPEC_LIST_ROW(S, tags, 0, "p,q", NULL, 0, "a list"),
};
#define N (sizeof fields / sizeof *fields)

static const struct spec_field *row(const char *key)
{
    const struct spec_field *f = spec_field_find(fields, N, key);
    assert_non_null(f);
    return f;
}

/* Sets key from JSON text; returns the rc, why filled. */
static int set(struct sample *s, const char *key, const char *json, char *why)
{
    json_t *v = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    assert_non_null(v);
    int rc = spec_field_set(row(key), s, v, why, 128);
    json_decref(v);
    return rc;
}

static void test_defaults(void **state)
{
    struct sample s;
    memset(&s, 0xff, sizeof s);
    spec_fields_defaults(fields, N, &s);
    assert_int_equal(s.small, 3);
    assert_int_equal(s.big, 0);
    assert_true(s.ratio == 0.5);
    assert_true(s.on);
    assert_string_equal(s.name, "x");
    assert_int_equal(s.color, 1);
    assert_int_equal(s.flags, 5);
    assert_string_equal(s.tags, "p,q");
}

static void test_ranges_and_types(void **state)
{
    struct sample s = {0};
    char why[128];
    assert_int_equal(set(&s, "small", "10", why), 0);
    assert_int_equal(s.small, 10);
    assert_int_equal(set(&s, "small", "11", why), LIBRA_EINVAL);
    assert_string_equal(why, "must be in 1..10");
    assert_int_equal(s.small, 10); /* unchanged on error */
    assert_int_equal(set(&s, "big", "1000000000000", why), 0);
    assert_int_equal(s.big, 1000000000000LL); /* stored as int64, not truncated */
    assert_int_equal(set(&s, "ratio", "0", why), LIBRA_EINVAL);
    assert_string_equal(why, "must be > 0, <= 1");
    assert_int_equal(set(&s, "ratio", "1", why), 0);
    assert_int_equal(set(&s, "on", "0", why), LIBRA_EINVAL);
    assert_int_equal(set(&s, "name", "\"1234567\"", why), 0);
    assert_int_equal(set(&s, "name", "\"12345678\"", why), LIBRA_EINVAL);
    assert_string_equal(why, "must be shorter than 8 bytes");
    assert_int_equal(set(&s, "name", "\"a\\u0000b\"", why), LIBRA_EINVAL);
    assert_int_equal(set(&s, "color", "\"red\"", why), 0);
    assert_int_equal(s.color, 0);
    assert_int_equal(set(&s, "color", "\"blue\"", why), LIBRA_EINVAL);
    assert_string_equal(why, "must be one of red, green, not 'blue'");
}

static void test_sets_and_lists(void **state)
{
    struct sample s = {0};
    char why[128];
    assert_int_equal(set(&s, "flags", "[\"c\", \"a\"]", why), 0);
    assert_int_equal(s.flags, 5);
    assert_int_equal(set(&s, "flags", "[\"c\", \"a\", \"c\"]", why), LIBRA_EINVAL);
    assert_string_equal(why, "'c' is listed twice");
    assert_int_equal(set(&s, "flags", "[]", why), 0); /* min 0 members */
    assert_int_equal(s.flags, 0);
    assert_int_equal(set(&s, "flags", "[\"d\"]", why), LIBRA_EINVAL);
    assert_int_equal(set(&s, "tags", "[\"one\", \"two\"]", why), 0);
    assert_string_equal(s.tags, "one,two");
    assert_int_equal(set(&s, "tags", "[\"a,b\"]", why), LIBRA_EINVAL);
    assert_int_equal(set(&s, "tags", "[\"four\", \"five\", \"six\"]", why), LIBRA_EINVAL);
    assert_string_equal(why, "must be shorter than 12 bytes when joined");
    assert_string_equal(s.tags, "one,two");
    json_t *v = spec_field_get(row("tags"), &s);
    char *text = ujson_dump(v, false);
    assert_string_equal(text, "[\"one\",\"two\"]");
    free(text);
    json_decref(v);
}

#define JSON_INTEGER "must be an integer, written as JSON writes one"
#define JSON_NUMBER "must be a finite number, written as JSON writes one"

static void test_text_values(void **state)
{
    char why[128];
    static const struct {
        const char *key, *text, *json; /* json NULL: rejected */
    } cases[] = {
        {"small", "7", "7"},
        {"small", "7.0", "7"}, /* a whole number in a file's other notations, as a file's */
        {"small", "1e1", "10"},
        {"small", "", NULL},
        {"small", "07", NULL}, /* not JSON: a flag writes a number as a file does */
        {"small", "+7", NULL},
        {"ratio", ".5", NULL},
        {"ratio", "5.", NULL},
        {"ratio", "-0.5e-1", "-0.05"},
        {"small", "99999999999999999999", NULL},
        {"ratio", "0.25", "0.25"},
        {"ratio", "nan", NULL},
        {"ratio", "1e400", NULL},
        {"ratio", "1e-400", "0.0"}, /* below the smallest double: rounded, as in a file */
        {"ratio", "1e-320", "9.99988867182683e-321"},
        {"on", "true", "true"},
        {"on", "1", NULL},
        {"color", "red", "\"red\""},
        {"flags", "a,b", "[\"a\",\"b\"]"},
        {"flags", "", "[]"},
        {"tags", "x", "[\"x\"]"},
        {"name", "\xff", NULL},
        {"tags", "a,\xc3", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *v = spec_field_parse_text(row(cases[i].key), cases[i].text, why, sizeof why);
        if (!cases[i].json) {
            if (v)
                fail_msg("%s=%s accepted", cases[i].key, cases[i].text);
            continue;
        }
        assert_non_null(v);
        char *text = ujson_dump(v, false);
        assert_string_equal(text, cases[i].json);
        free(text);
        json_decref(v);
    }
    static const struct {
        const char *key, *text, *why;
    } refused[] = {
        {"small", "7.5", "must be an integer"},
        {"small", " 7", JSON_INTEGER}, /* white space either side, as in a file */
        {"small", "7 ", JSON_INTEGER},
        {"small", "\t7", JSON_INTEGER},
        {"small", "07", JSON_INTEGER},
        {"ratio", " 0.5", JSON_NUMBER},
        {"ratio", "0.5\n", JSON_NUMBER},
        {"ratio", ".5", JSON_NUMBER},
        {"small", "99999999999999999999", "must be in 1..10"}, /* the row's range, past int64 too */
        {"small", "-99999999999999999999", "must be in 1..10"},
        {"small", "1e30", "must be in 1..10"},
        {"big", "1e400", "must be in 0..1000000000000000"},
        {"small", "inf", JSON_INTEGER},
        {"ratio", "nan", JSON_NUMBER},
        {"ratio", "1e400", "must be at most about 1.8e308 in magnitude"},
        {"ratio", "-1e400", "must be at most about 1.8e308 in magnitude"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        assert_null(spec_field_parse_text(row(refused[i].key), refused[i].text, why, sizeof why));
        assert_string_equal(why, refused[i].why);
    }
}

static void test_read_object(void **state)
{
    static const char text[] = "{\"x\": {\n  \"small\": 2,\n  \"smal\": 3}}";
    struct ujson_doc doc;
    struct libra_error err = {0};
    assert_int_equal(ujson_doc_parse(&doc, "t.json", text, strlen(text), &err), 0);
    struct sample s;
    spec_fields_defaults(fields, N, &s);
    assert_int_equal(
        spec_fields_read(fields, N, "", &doc, "x", json_object_get(doc.root, "x"), &s, &err),
        LIBRA_EINVAL);
    assert_int_equal(err.line, 3);
    assert_int_equal(err.col, 3);
    assert_string_equal(err.msg, "x.smal: unknown key (did you mean 'small'?)");
    ujson_doc_free(&doc);

    static const char missing[] = "{\"small\": 2}";
    assert_int_equal(ujson_doc_parse(&doc, "t.json", missing, strlen(missing), &err), 0);
    assert_int_equal(spec_fields_read(fields, N, "", &doc, "", doc.root, &s, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "missing key 'name'");
    ujson_doc_free(&doc);
}

static void test_suggest(void **state)
{
    char hint[64];
    spec_fields_suggest(fields, N, "", "colour", hint, sizeof hint);
    assert_string_equal(hint, " (did you mean 'color'?)");
    spec_fields_suggest(fields, N, "", "zzzzzz", hint, sizeof hint);
    assert_string_equal(hint, "");
    static const char *const words[] = {"hardware", "models", NULL};
    spec_suggest(words, "model", hint, sizeof hint);
    assert_string_equal(hint, " (did you mean 'models'?)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),       cmocka_unit_test(test_ranges_and_types),
        cmocka_unit_test(test_sets_and_lists), cmocka_unit_test(test_text_values),
        cmocka_unit_test(test_read_object),    cmocka_unit_test(test_suggest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
