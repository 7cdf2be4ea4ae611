/*
 * util/json: syntax errors carry line:col, ujson_locate finds members and elements of a
 * multi-line document (escaped keys, '~1', unicode, empty keys), ujson_errorf formats
 * "file:line:col: dotted.path: msg", the number readers, and ujson_dump's sorted keys and float
 * rule.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/json.h"

static int parse(struct ujson_doc *doc, const char *text, struct libra_error *err)
{
    return ujson_doc_parse(doc, "f.json", text, strlen(text), err);
}

/* Parses text, expecting a syntax error at line:col. */
static void expect_syntax_error(const char *text, size_t len, int line, int col)
{
    struct ujson_doc doc;
    struct libra_error err;
    assert_int_equal(ujson_doc_parse(&doc, "f.json", text, len, &err), LIBRA_EINVAL);
    assert_string_equal(err.file, "f.json");
    assert_int_equal(err.line, line);
    assert_int_equal(err.col, col);
    assert_true(err.msg[0] != '\0');
    assert_null(doc.root);
    ujson_doc_free(&doc);
}

/* A string literal, embedded NUL bytes included. */
#define EXPECT_SYNTAX_ERROR(lit, line, col) expect_syntax_error(lit, sizeof(lit) - 1, line, col)

static void test_parse_errors(void **state)
{
    EXPECT_SYNTAX_ERROR("{\n  \"a\": 1,\n  \"b\": }\n", 3, 8);
    EXPECT_SYNTAX_ERROR("{\"\xc3\xa9\": x}", 1, 7); /* columns count characters */
    /* a text cut short: after its last character (jansson names that character itself),
     * past the white space that ends it */
    EXPECT_SYNTAX_ERROR("[1,\n2,", 2, 3);
    EXPECT_SYNTAX_ERROR("{\"cluster\":", 1, 12);
    EXPECT_SYNTAX_ERROR("{\"cluster\":\n \r\n", 1, 12);
    EXPECT_SYNTAX_ERROR("[", 1, 2);
    /* ... within a token that had not ended: a literal, an escape, a string whose line ends */
    EXPECT_SYNTAX_ERROR("{\"a\": tr", 1, 9);
    EXPECT_SYNTAX_ERROR("{\"a\": \"x\\", 1, 10);
    EXPECT_SYNTAX_ERROR("{\"model\": {\"name\": \"Qwen\n", 1, 25);
    EXPECT_SYNTAX_ERROR("{\n  \"note\": \"abc\r\n", 2, 15);
    /* a bracket or separator rejected at the end is where it stands */
    EXPECT_SYNTAX_ERROR("{\"a\": 1,}", 1, 9);
    EXPECT_SYNTAX_ERROR("{\"a\": 1}}\n", 1, 9);
    EXPECT_SYNTAX_ERROR("", 1, 1);
    EXPECT_SYNTAX_ERROR("{\"a\": 1, \"a\": 2}", 1, 12); /* duplicate keys rejected */
    /* A NUL byte is an error at its position, not an early end of the document. */
    EXPECT_SYNTAX_ERROR("{\"a\":\n 1}\0{", 2, 4);
    EXPECT_SYNTAX_ERROR("1\0", 1, 2);
    /* a number out of range: at its start (jansson is past it) */
    EXPECT_SYNTAX_ERROR("{\"gpus\":\n  99999999999999999999999}", 2, 3);
    EXPECT_SYNTAX_ERROR("{\"\xc3\xa9\": -1e999}", 1, 7);

    struct ujson_doc doc;
    struct libra_error err;
    assert_int_equal(parse(&doc, " [1, 2] ", &err), 0);
    assert_true(json_is_array(doc.root));
    assert_string_equal(doc.name, "f.json");
    assert_int_equal(doc.len, 8);
    ujson_doc_free(&doc);
    ujson_doc_free(&doc); /* a freed doc is zeroed */
    ujson_doc_free(NULL);
}

/* A \u0000 escape is refused in our words, not jansson's (which name its JSON_ALLOW_NUL). */
static void test_parse_error_wording(void **state)
{
    (void)state;
    struct ujson_doc doc;
    struct libra_error err;
    assert_int_equal(parse(&doc, "{\"model\": {\"name\": \"a\\u0000b\"}}", &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "a string may not contain \\u0000");
    assert_string_equal(err.file, "f.json");
    assert_int_equal(err.line, 1);
    assert_int_equal(parse(&doc, "{\"a\\u0000\": 1}", &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "a key may not contain \\u0000");
    assert_int_equal(parse(&doc, "{\"a\": 1, \"a\": 2}", &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "duplicate object key")); /* the rest read as jansson's */
    /* an empty text, or one of white space only, says so rather than where it ends */
    assert_int_equal(parse(&doc, "", &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "empty: no JSON value");
    assert_int_equal(parse(&doc, " \n\t\r\n", &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "empty: no JSON value");
    assert_int_equal(err.line, 1);
    assert_int_equal(err.col, 1);
    /* the text is len bytes with no NUL after them: nothing past len is read (ASan sees to it) */
    char *spaces = malloc(3);
    assert_non_null(spaces);
    memcpy(spaces, "  \n", 3);
    assert_int_equal(ujson_doc_parse(&doc, "f.json", spaces, 3, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "empty: no JSON value");
    free(spaces);
}

/* ---- ujson_locate ---------------------------------------------------------------------------- */

static const char doc_text[] = "{\n"
                               "  \"cluster\": {\n"
                               "    \"gpus\": 64,\n"
                               "    \"a/b\": [10, {\"x~y\": true}],\n"
                               "    \"esc\\\"aped\": \"v\",\n"
                               "    \"\\u00e9t\\u00e9\": 1,\n"
                               "    \"\xc3\xa9t\xc3\xa9"
                               "2\": [[], {}, [1, [2, 3]]]\n"
                               "  },\n"
                               "  \"list\": [ \"s\", 2.5 , null ],\n"
                               "  \"\": {\"\": 0, \"b\": 1}\n"
                               "}\n";

static void expect_at(const struct ujson_doc *doc, const char *path, int line, int col)
{
    int l = -1, c = -1;
    if (ujson_locate(doc, path, &l, &c) != 0) {
        print_error("path '%s' not found\n", path ? path : "(root)");
        fail();
    }
    if (l != line || c != col) {
        print_error("path '%s' at %d:%d, want %d:%d\n", path ? path : "(root)", l, c, line, col);
        fail();
    }
}

static void expect_absent(const struct ujson_doc *doc, const char *path)
{
    int l, c;
    if (ujson_locate(doc, path, &l, &c) == 0) {
        print_error("path '%s' unexpectedly found at %d:%d\n", path, l, c);
        fail();
    }
}

static void test_locate(void **state)
{
    struct ujson_doc doc;
    struct libra_error err;
    assert_int_equal(parse(&doc, doc_text, &err), 0);
    expect_at(&doc, "", 1, 1);
    expect_at(&doc, NULL, 1, 1);
    expect_at(&doc, "cluster", 2, 3);
    expect_at(&doc, "cluster/gpus", 3, 5);
    expect_at(&doc, "cluster/a~1b", 4, 5);
    expect_at(&doc, "cluster/a~1b/0", 4, 13);
    expect_at(&doc, "cluster/a~1b/1", 4, 17);
    expect_at(&doc, "cluster/a~1b/1/x~0y", 4, 18);
    expect_at(&doc, "cluster/esc\"aped", 5, 5);
    expect_at(&doc, "cluster/\xc3\xa9t\xc3\xa9", 6, 5);
    expect_at(&doc,
              "cluster/\xc3\xa9t\xc3\xa9"
              "2/0",
              7, 14);
    expect_at(&doc,
              "cluster/\xc3\xa9t\xc3\xa9"
              "2/1",
              7, 18);
    expect_at(&doc,
              "cluster/\xc3\xa9t\xc3\xa9"
              "2/2/1/1",
              7, 30);
    expect_at(&doc, "list/0", 9, 13);
    expect_at(&doc, "list/1", 9, 18);
    expect_at(&doc, "list/2", 9, 24);
    /* The top-level member "" shares the path "" with the root; its children are "/...". */
    expect_at(&doc, "/", 10, 8);
    expect_at(&doc, "/b", 10, 15);

    const char *absent[] = {"cluster/nope", "list/3",         "list/x",
                            "list/1x",      "list/01",        "list/-1",
                            "list/",        "cluster/gpus/0", "cluster/a~1b/1/x~0y/z",
                            "cluster/a/b",  "cluster/a~2b",   "cluster/"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++)
        expect_absent(&doc, absent[i]);
    ujson_doc_free(&doc);
}

/* Keys longer than any fixed buffer, and a scalar root. */
static void test_locate_long_key_and_scalar_root(void **state)
{
    char key[600], text[1300], path[700];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    snprintf(text, sizeof text, "{\"%.300s\": 1, \"%s\": {\"z\": 2}}", key, key);
    snprintf(path, sizeof path, "%s/z", key);
    struct ujson_doc doc;
    struct libra_error err;
    assert_int_equal(parse(&doc, text, &err), 0);
    expect_at(&doc, key, 1, 309);
    expect_at(&doc, path, 1, 913);
    ujson_doc_free(&doc);

    assert_int_equal(parse(&doc, "\n  \"just a string\"", &err), 0);
    expect_at(&doc, "", 2, 3);
    expect_absent(&doc, "0");
    ujson_doc_free(&doc);
    expect_absent(NULL, "");
}

/* ---- ujson_errorf ---------------------------------------------------------------------------- */

static void test_errorf(void **state)
{
    struct ujson_doc doc;
    struct libra_error err;
    char buf[1024];
    assert_int_equal(parse(&doc, doc_text, &err), 0);

    assert_int_equal(ujson_errorf(&err, &doc, "cluster/gpus", "must be at most %d", 8),
                     LIBRA_EINVAL);
    assert_string_equal(error_format(&err, buf, sizeof buf),
                        "f.json:3:5: cluster.gpus: must be at most 8");
    ujson_errorf(&err, &doc, "cluster/a~1b/1/x~0y", "unknown key");
    assert_string_equal(error_format(&err, buf, sizeof buf),
                        "f.json:4:18: cluster.a/b.1.x~y: unknown key");
    /* an absent member is placed at the nearest value present: the object that lacks it */
    ujson_errorf(&err, &doc, "cluster/nope", "missing");
    assert_string_equal(error_format(&err, buf, sizeof buf), "f.json:2:3: cluster.nope: missing");
    ujson_errorf(&err, &doc, "cluster/a~1b/1/x~0y/z/4", "missing");
    assert_string_equal(error_format(&err, buf, sizeof buf),
                        "f.json:4:18: cluster.a/b.1.x~y.z.4: missing");
    ujson_errorf(&err, &doc, "list/7", "missing");
    assert_string_equal(error_format(&err, buf, sizeof buf), "f.json:9:3: list.7: missing");
    ujson_errorf(&err, &doc, "nope/x", "missing");
    assert_string_equal(error_format(&err, buf, sizeof buf), "f.json:1:1: nope.x: missing");
    ujson_errorf(&err, &doc, "", "expected an object");
    assert_string_equal(error_format(&err, buf, sizeof buf), "f.json:1:1: expected an object");
    ujson_errorf(&err, NULL, "a/b", "no document");
    assert_string_equal(error_format(&err, buf, sizeof buf), "a.b: no document");
    assert_int_equal(ujson_errorf(NULL, &doc, "a", "ignored"), LIBRA_EINVAL);
    ujson_doc_free(&doc);
}

/* ---- number readers -------------------------------------------------------------------------- */

static void test_numbers(void **state)
{
    json_t *v[] = {json_integer(3),  json_real(3.0), json_real(3.5),  json_string("3"),
                   json_real(1e300), json_null(),    json_integer(-7)};
    int64_t i = 0;
    double d = 0.0;
    assert_true(ujson_as_int64(v[0], &i) && i == 3);
    assert_true(ujson_as_int64(v[1], &i) && i == 3);
    assert_false(ujson_as_int64(v[2], &i));
    assert_false(ujson_as_int64(v[3], &i));
    assert_false(ujson_as_int64(v[4], &i));
    assert_false(ujson_as_int64(v[5], &i));
    assert_true(ujson_as_int64(v[6], &i) && i == -7);
    assert_true(ujson_as_double(v[0], &d) && d == 3.0);
    assert_true(ujson_as_double(v[2], &d) && d == 3.5);
    assert_false(ujson_as_double(v[3], &d));
    assert_false(ujson_as_double(v[5], &d));
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
        json_decref(v[k]);
}

/* ---- ujson_dump ------------------------------------------------------------------------------ */

static void expect_dump(json_t *v, bool pretty, const char *want)
{
    char *got = ujson_dump(v, pretty);
    assert_string_equal(got, want);
    free(got);
    json_decref(v);
}

static void test_dump_sorted_and_pretty(void **state)
{
    /* The same object built in two insertion orders prints identically. */
    json_t *a = json_pack("{s:i, s:{s:[i,f], s:n}}", "b", 1, "a", "d", 1, 2.0, "c");
    json_t *b = json_pack("{s:{s:n, s:[i,f]}, s:i}", "a", "c", "d", 1, 2.0, "b", 1);
    char *da = ujson_dump(a, false), *db = ujson_dump(b, false);
    assert_string_equal(da, "{\"a\":{\"c\":null,\"d\":[1,2.0]},\"b\":1}");
    assert_string_equal(da, db);
    free(da);
    free(db);
    json_decref(b);
    expect_dump(a, true,
                "{\n  \"a\": {\n    \"c\": null,\n    \"d\": [\n      1,\n      2.0\n    ]\n"
                "  },\n  \"b\": 1\n}");
    expect_dump(json_pack("{s:{}, s:[], s:b, s:s}", "o", "l", "t", 1, "s", "\xc3\xa9\"\n"), false,
                "{\"l\":[],\"o\":{},\"s\":\"\xc3\xa9\\\"\\n\",\"t\":true}");
}

static void test_dump_float_rule(void **state)
{
    expect_dump(json_real(0.1), false, "0.1");
    expect_dump(json_real(2.0), false, "2.0");
    expect_dump(json_real(-0.0), false, "-0.0");
    expect_dump(json_real(1.0 / 3.0), false, "0.3333333333333333");
    expect_dump(json_real(1e300), false, "1e+300");
    expect_dump(json_real(1e-7), false, "1e-07");
    const double hard[] = {1e300, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, 123456789.123};
    for (size_t i = 0; i < sizeof hard / sizeof hard[0]; i++) {
        json_t *v = json_real(hard[i]);
        char *s = ujson_dump(v, false);
        json_t *back = json_loads(s, JSON_DECODE_ANY, NULL);
        assert_non_null(back);
        assert_true(json_number_value(back) == hard[i]); /* round-trips exactly */
        json_decref(back);
        json_decref(v);
        free(s);
    }
    /* jansson holds no NaN or infinity; ujson_real maps them to null. */
    assert_null(json_real(NAN));
    expect_dump(ujson_real(NAN), false, "null");
    expect_dump(ujson_real(-INFINITY), false, "null");
    expect_dump(ujson_real(0.25), false, "0.25");
    expect_dump(json_integer(-5), false, "-5");
}

/* ujson_utf8_repair keeps valid UTF-8 as it is and makes the rest something jansson packs. */
static void test_utf8_repair(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain /path", "plain /path"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"/\xff", "/?"},              /* never a lead byte */
        {"a\xc3", "a?"},              /* cut at the end */
        {"\xc3(", "?("},              /* a lead byte without its continuation */
        {"\x80\xbf", "??"},           /* stray continuation bytes */
        {"\xc0\xaf", "??"},           /* an overlong '/' */
        {"\xe0\x80\xaf", "???"},      /* an overlong 3-byte form */
        {"\xed\xa0\x80", "???"},      /* a surrogate */
        {"\xf4\x90\x80\x80", "????"}, /* past U+10FFFF */
        {"\xf0\x9f\x98", "???"},      /* a 4-byte sequence cut short */
        {"\xe2\x82\xac\xe2\x82", "\xe2\x82\xac??"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        assert_string_equal(ujson_utf8_repair(buf), cases[i].out);
        json_t *s = json_string(buf); /* what json_pack needs */
        assert_non_null(s);
        json_decref(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_error_wording),
        cmocka_unit_test(test_locate),
        cmocka_unit_test(test_locate_long_key_and_scalar_root),
        cmocka_unit_test(test_errorf),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_dump_sorted_and_pretty),
        cmocka_unit_test(test_dump_float_rule),
        cmocka_unit_test(test_utf8_repair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
