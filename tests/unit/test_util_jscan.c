/*
 * util/jscan: what jscan_check accepts and rejects (with the offset and message of the first
 * error: every strict prefix of a document ends early at its own length), member lookup that
 * is not fooled by nested objects or strings holding the same names, escaped names, duplicate
 * names, the typed readers at their edges (-0, 1e5, INT64 bounds, surrogate pairs, exact fit),
 * array counting and iteration across 8-byte blocks, and jscan_cut of the first, a middle, the
 * last and the only member. Then a differential property test over random documents with fixed
 * seeds: jscan agrees with jansson on acceptance (byte mutations of valid documents included),
 * on every member's value, element and scalar, and a cut document parses to the original minus
 * the member.
 */
#include "testutil.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/jscan.h"
#include "util/rng.h"
#include "util/vec.h"

typedef VEC(char) text_buf;

static const char end_of_input[] = "unexpected end of input";

/* The root of a document that must pass jscan_check. */
static struct jscan_value doc(const char *text)
{
    size_t off = 0;
    const char *msg = NULL;
    int rc = jscan_check(text, strlen(text), &off, &msg);
    if (rc != 0)
        fail_msg("jscan_check rejected %s at %zu: %s", text, off, msg);
    return jscan_root(text, strlen(text));
}

/* The value's text as a NUL-terminated string (static buffer). */
static const char *text_of(struct jscan_value v)
{
    static char buf[512];
    assert_true(v.len < sizeof buf);
    memcpy(buf, v.p, v.len);
    buf[v.len] = '\0';
    return buf;
}

/* ---- jscan_check ---------------------------------------------------------------------------- */

static void expect_ok(const char *text, size_t len)
{
    size_t off = 12345;
    const char *msg = "untouched";
    if (jscan_check(text, len, &off, &msg) != 0)
        fail_msg("rejected %.*s at %zu: %s", (int)len, text, off, msg);
    assert_int_equal(off, 12345);
    assert_string_equal(msg, "untouched");
}

static void expect_error(const char *text, size_t len, size_t want_off, const char *want_msg)
{
    size_t off = 0;
    const char *msg = NULL;
    if (jscan_check(text, len, &off, &msg) != -1)
        fail_msg("accepted %.*s", (int)len, text);
    if (off != want_off || strstr(msg, want_msg) == NULL)
        fail_msg("%.*s: error at %zu (%s), expected at %zu (%s)", (int)len, text, off, msg,
                 want_off, want_msg);
    assert_int_equal(jscan_check(text, len, NULL, NULL), -1); /* NULL outputs are fine */
}

#define OK(lit) expect_ok(lit, sizeof(lit) - 1)
#define ERR(lit, off, msg) expect_error(lit, sizeof(lit) - 1, off, msg)

static void test_check_accepts(void **state)
{
    OK("{}");
    OK(" \t\r\n{ \t\r\n} \t\r\n");
    OK("{\"a\":1}");
    OK("{ \"a\" : [ 1 , 2 , { } , [ ] , \"x\" , true , false , null ] , \"b\" : { \"c\" : -0 } }");
    OK("{\"n\":[0,-0,1,-1,0.5,-0.0e0,1e5,1E+5,1e-5,12.34E-56,9223372036854775808,1e400,"
       "-1e-400,123456789012345678901234567890]}");
    OK("{\"s\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0041 \\u00e9 \\uFFFF \\u0000\"}");
    OK("{\"s\":\"\\ud83d\\ude00 \\uD83D\\uDE00\"}");        /* surrogate pairs, either case */
    OK("{\"\xc3\xa9\":\"\xe2\x82\xac \xf0\x9f\x98\x80\"}"); /* raw UTF-8 */
    OK("{\"bad utf-8\":\"\xff\xfe\xc3\"}");                 /* not re-validated */
    OK("{\"a\":1,\"a\":2}");                                /* duplicate names */
    OK("{\"\":\"\"}");
    OK("{\"long\":\"0123456789abcdef0123456789abcdef\\\"0123456789\\\\\"}");
    OK("{\"x\":\"\x7f\"}"); /* DEL is not a control character for JSON */
    /* Arrays of numbers as Python's json.dumps writes them, and other spacing around commas. */
    OK("{\"ids\": [1, 22, 333, -4, 0, 5.5, 6e7, 70, 0.25, -0, 9]}");
    OK("{\"ids\":[1,  2,\t3 ,4 , 5,\n6]}");
}

static void test_check_rejects(void **state)
{
    ERR("", 0, "empty input");
    ERR("  \n", 3, end_of_input);
    ERR("[]", 0, "must be an object");
    ERR("1", 0, "must be an object");
    ERR("\"s\"", 0, "must be an object");
    ERR("null", 0, "must be an object");
    ERR("{} x", 3, "characters after the object");
    ERR("{}{}", 2, "characters after the object");
    ERR("{}\0", 2, "characters after the object");
    ERR("{,}", 1, "expected a string");
    ERR("{a:1}", 1, "expected a string");
    ERR("{'a':1}", 1, "expected a string");
    ERR("{\"a\" 1}", 5, "expected ':'");
    ERR("{\"a\":1,}", 7, "expected a string");
    ERR("{\"a\":1 \"b\":2}", 7, "expected ',' or '}'");
    ERR("{\"a\":1]", 6, "expected ',' or '}'");
    ERR("{\"a\":[1}", 7, "expected ',' or ']'");
    ERR("{\"a\":[1,]}", 8, "expected a value");
    ERR("{\"a\":[,]}", 6, "expected a value");
    ERR("{\"a\":}", 5, "expected a value");
    ERR("{\"a\":01}", 6, "leading zero");
    ERR("{\"a\":-01}", 7, "leading zero");
    ERR("{\"a\":1.}", 7, "after '.'");
    ERR("{\"a\":.5}", 5, "expected a value");
    ERR("{\"a\":+1}", 5, "expected a value");
    ERR("{\"a\":-}", 6, "expected a digit");
    ERR("{\"a\":1e}", 7, "exponent");
    ERR("{\"a\":1e+}", 8, "exponent");
    ERR("{\"a\":NaN}", 5, "expected a value");
    ERR("{\"a\":Infinity}", 5, "expected a value");
    ERR("{\"a\":-Infinity}", 6, "expected a digit");
    ERR("{\"a\":tru}", 5, "invalid literal");
    ERR("{\"a\":True}", 5, "expected a value");
    ERR("{\"a\":truex}", 9, "expected ',' or '}'");
    ERR("{\"a\":nul }", 5, "invalid literal");
    ERR("{\"a\":\"\\x\"}", 6, "invalid escape");
    ERR("{\"a\":\"\\U0041\"}", 6, "invalid escape");
    ERR("{\"a\":\"\\u12G4\"}", 6, "4 hex digits");
    ERR("{\"a\":\"\\u12\"}", 6, "4 hex digits");
    ERR("{\"a\":\"\\uD800\"}", 6, "high surrogate");
    ERR("{\"a\":\"\\uD800\\n\"}", 6, "high surrogate");
    ERR("{\"a\":\"\\uD800\\u0041\"}", 6, "high surrogate");
    ERR("{\"a\":\"\\uD800\\uD800\"}", 6, "high surrogate");
    ERR("{\"a\":\"x\\uDC00\"}", 7, "low surrogate");
    ERR("{\"a\":\"\x01\"}", 6, "control character");
    ERR("{\"a\":\"tab\there\"}", 9, "control character");
    ERR("{\"a\":\"line\nbreak\"}", 10, "control character");
    ERR("{\"a\":\"nul\0\"}", 9, "control character");
    ERR("{\"a\":\0}", 5, "expected a value");
    ERR("{\"a\"\0:1}", 4, "expected ':'");
    ERR("\xef\xbb\xbf{}", 0, "must be an object");   /* a BOM is not whitespace */
    ERR("{\"a\":1}\xc2\xa0", 7, "characters after"); /* nor is U+00A0 */
    ERR("\v{}", 0, "must be an object");
    /* The same errors inside an array of numbers after ", " (the fast path's separator). */
    ERR("{\"a\":[1, 01]}", 10, "leading zero");
    ERR("{\"a\":[1, ]}", 9, "expected a value");
    ERR("{\"a\":[1, 2.]}", 11, "after '.'");
    ERR("{\"a\":[1, 2e]}", 11, "exponent");
    ERR("{\"a\":[1, -x]}", 10, "expected a digit");
    ERR("{\"a\":[1, x]}", 9, "expected a value");
    ERR("{\"a\":[1, 2 3]}", 11, "expected ',' or ']'");
}

/* Every strict prefix of a valid document ends early, at its own length. */
static void test_check_truncated(void **state)
{
    static const char *const docs[] = {
        "{\"a\":[1,-2.5e+3,true,false,null,{\"b\":\"x\\\"y\\u00e9\\ud83d\\ude00\"}],\"c\":{}}",
        "{ \"k\" : [ [ ] , { } ] , \"s\" : \"\\\\\" }",
        "{\"n\":-0.0E-0}",
        "{\"ids\": [12, 345, 6789, -1, 0, 2.5, 1e3, 7]}",
    };
    for (size_t d = 0; d < sizeof docs / sizeof docs[0]; d++) {
        size_t len = strlen(docs[d]);
        expect_ok(docs[d], len);
        for (size_t cut = 1; cut < len; cut++)
            expect_error(docs[d], cut, cut, end_of_input);
    }
}

/* Nesting exactly JSCAN_MAX_DEPTH deep is fine; one more is an error at that bracket. Objects
 * at odd depths ({"a":[{"a":[...), arrays at even ones. */
static void test_check_depth(void **state)
{
    char text[8 * JSCAN_MAX_DEPTH];
    size_t opener[JSCAN_MAX_DEPTH + 2];
    for (int depth = JSCAN_MAX_DEPTH; depth <= JSCAN_MAX_DEPTH + 1; depth++) {
        size_t n = 0;
        for (int d = 1; d <= depth; d++) {
            if (d > 1 && d % 2 == 0) { /* the parent is an object */
                memcpy(text + n, "\"a\":", 4);
                n += 4;
            }
            opener[d] = n;
            text[n++] = d % 2 ? '{' : '[';
        }
        for (int d = depth; d >= 1; d--)
            text[n++] = d % 2 ? '}' : ']';
        if (depth == JSCAN_MAX_DEPTH)
            expect_ok(text, n);
        else
            expect_error(text, n, opener[depth], "deeper than");
    }
}

/* ---- members -------------------------------------------------------------------------------- */

static void expect_member(const char *json, const char *key, const char *value_text, char type)
{
    struct jscan_value v;
    if (!jscan_get(doc(json), key, &v))
        fail_msg("%s: member '%s' not found", json, key);
    assert_string_equal(text_of(v), value_text);
    assert_int_equal(v.type, type);
}

static void expect_no_member(const char *json, const char *key)
{
    struct jscan_value v = {"junk", 4, 'x'};
    if (jscan_get(doc(json), key, &v))
        fail_msg("%s: member '%s' found: %s", json, key, text_of(v));
    assert_int_equal(v.type, 0);
    assert_null(v.p);
    assert_int_equal(v.len, 0);
}

static void test_get(void **state)
{
    expect_member("{\"a\":1}", "a", "1", 'n');
    expect_member(" { \"a\" : [ 1 , { \"b\" : \"]\" } ] , \"c\" : 2 } ", "a",
                  "[ 1 , { \"b\" : \"]\" } ]", 'a');
    expect_member(" { \"a\" : [ 1 , { \"b\" : \"]\" } ] , \"c\" : 2 } ", "c", "2", 'n');
    /* The same name inside a nested object or inside a string does not count. */
    expect_member("{\"a\":{\"b\":1,\"x\":{\"b\":0}},\"b\":3}", "b", "3", 'n');
    expect_member("{\"s\":\"\\\"b\\\":1,\",\"b\":2}", "b", "2", 'n');
    expect_member("{\"s\":[\"b\",{\"b\":9}],\"b\":true}", "b", "true", 't');
    /* Strings ending in escaped backslashes, then more members. */
    expect_member("{\"a\":\"x\\\\\",\"b\":1}", "b", "1", 'n');
    expect_member("{\"a\":\"\\\\\\\"\",\"b\":false}", "b", "false", 'f');
    expect_member("{\"a\":\"\\\\\\\\\",\"b\":null}", "b", "null", 'z');
    /* Names compared after unescaping. */
    expect_member("{\"\\u0062\":7}", "b", "7", 'n');
    expect_member("{\"a\\\"b\":1}", "a\"b", "1", 'n');
    expect_member("{\"a\\\\b\":1}", "a\\b", "1", 'n');
    expect_member("{\"\\u00e9t\\u00E9\":\"x\"}", "\xc3\xa9t\xc3\xa9", "\"x\"", 's');
    expect_member("{\"\xc3\xa9\":1}", "\xc3\xa9", "1", 'n');
    expect_member("{\"\\ud83d\\ude00\":{}}", "\xf0\x9f\x98\x80", "{}", 'o');
    expect_member("{\"\\/\\t\":1}", "/\t", "1", 'n');
    expect_no_member("{\"\\u00e9\":1}", "e");
    expect_no_member("{\"a\\u0000\":1}", "a"); /* a NUL in the name matches no key */
    expect_no_member("{\"\\u0061b\":1}", "a");
    expect_no_member("{\"\\u0061\":1}", "ab");
    /* Prefixes and extensions of a name. */
    expect_no_member("{\"ab\":1}", "a");
    expect_no_member("{\"a\":1}", "ab");
    expect_no_member("{\"a\":1}", "");
    expect_member("{\"a\":1,\"\":2}", "", "2", 'n');
    /* Duplicates: the first. */
    expect_member("{\"k\":1,\"k\":2}", "k", "1", 'n');
    expect_member("{\"\\u006b\":1,\"k\":2}", "k", "1", 'n');
    expect_no_member("{}", "a");
    expect_no_member(" { } ", "a");
    expect_member("{\"e\":{},\"f\":[]}", "f", "[]", 'a');
    expect_member("{\"s\":\"\"}", "s", "\"\"", 's');
    expect_member("{\"n\":-1.5e-3}", "n", "-1.5e-3", 'n');

    /* Only objects have members. */
    struct jscan_value obj = doc("{\"a\":[{\"b\":1}],\"n\":1}"), arr, v;
    assert_true(jscan_get(obj, "a", &arr));
    assert_false(jscan_get(arr, "b", &v));
    assert_int_equal(v.type, 0);
    assert_true(jscan_get(obj, "n", &v));
    assert_false(jscan_get(v, "b", &v));
    struct jscan_value absent = {NULL, 0, 0};
    assert_false(jscan_get(absent, "a", &v));

    /* Skipping counts brackets eight bytes at a time: the letters of literals and exponents
     * are not brackets, nor are the bytes that look like them to the block test (Y _ y DEL)
     * or brackets inside strings. */
    expect_member("{\"lp\":[[-0.5,1,null],[-1e-3,22,null],[true,false,null]],\"k\":7}", "k", "7",
                  'n');
    expect_member(
        "{\"s\":[\"Y_y\x7f\",[\"]]]]\",\"YYYYYYYY\"],[\"____\",{\"y\":\"}}}}\"}]],\"k\":8}", "k",
        "8", 'n');
    expect_member("{\"deep\":[[[[[[[[1]]]]]]],[[[[[[[[2]]]]]]]]],\"k\":9}", "k", "9", 'n');
}

/* jscan_get_lazy: the value's start, running to the object's end; members read from it. */
static void test_get_lazy(void **state)
{
    (void)state;
    struct jscan_value root = doc("{\"text\":\"a]}\",\"ids\":[1,2],\"meta_info\":{\"n\":3,"
                                  "\"lp\":[[-0.5,1,null]]},\"choices\":[{\"k\":1},{\"k\":2}]}");
    struct jscan_value meta, v, arr;
    struct jscan_iter it = {0};
    int64_t i = 0;
    assert_true(jscan_get_lazy(root, "meta_info", &meta));
    assert_int_equal(meta.type, 'o');
    assert_ptr_equal(meta.p + meta.len, root.p + root.len);
    assert_true(jscan_get(meta, "n", &v) && jscan_int(v, &i));
    assert_int_equal(i, 3);
    assert_true(jscan_get(meta, "lp", &v));
    assert_int_equal(v.len, strlen("[[-0.5,1,null]]"));
    assert_false(jscan_get(meta, "choices", &v)); /* stops at meta_info's closing brace */
    assert_true(jscan_get_lazy(root, "choices", &arr));
    assert_true(jscan_next(arr, &it, &v) && jscan_get(v, "k", &v) && jscan_int(v, &i));
    assert_int_equal(i, 1);
    assert_true(jscan_next(arr, &it, &v));
    assert_false(jscan_next(arr, &it, &v)); /* stops at its closing bracket */
    assert_false(jscan_get_lazy(root, "absent", &v));
    assert_int_equal(v.type, 0);
    assert_false(jscan_get_lazy(arr, "k", &v));
}

/* jscan_get_many: one pass, first occurrences, as jscan_get. */
static void test_get_many(void **state)
{
    (void)state;
    struct jscan_value root = doc("{\"a\":1,\"input_ids\":[1,2,3],\"b\":{\"c\":2},\"a\":9,"
                                  "\"\\u0064\":\"x\"}");
    const char *keys[] = {"b", "a", "d", "absent", "input_ids"};
    struct jscan_value got[5], one;
    assert_int_equal(jscan_get_many(root, keys, 5, got), 4);
    for (size_t k = 0; k < 5; k++) {
        assert_int_equal(jscan_get(root, keys[k], &one), got[k].type != 0);
        assert_ptr_equal(got[k].p, one.p);
        assert_int_equal(got[k].len, one.len);
        assert_int_equal(got[k].type, one.type);
    }
    assert_int_equal(jscan_get_many(got[0], keys, 2, got), 0); /* b has no a or b */
    assert_int_equal(got[1].type, 0);
    struct jscan_value absent = {NULL, 0, 0};
    assert_int_equal(jscan_get_many(absent, keys, 5, got), 0);
    assert_int_equal(jscan_get_many(root, keys, 0, got), 0);
}

static void test_path(void **state)
{
    struct jscan_value root = doc("{\"model\":\"m\",\"sampling_params\":{\"max_new_tokens\":512,"
                                  "\"stop\":[\"x\"],\"deep\":{\"er\":{\"est\":true}}},"
                                  "\"a.b\":1,\"\":{\"\":5},\"max_new_tokens\":1}");
    struct jscan_value v;
    int64_t i;
    assert_true(jscan_path(root, "sampling_params.max_new_tokens", &v));
    assert_true(jscan_int(v, &i));
    assert_int_equal(i, 512);
    assert_true(jscan_path(root, "sampling_params.deep.er.est", &v));
    assert_int_equal(v.type, 't');
    assert_true(jscan_path(root, "model", &v));
    assert_string_equal(text_of(v), "\"m\"");
    assert_true(jscan_path(root, "sampling_params", &v));
    assert_int_equal(v.type, 'o');
    assert_true(jscan_path(root, ".", &v)); /* "" then "" */
    assert_string_equal(text_of(v), "5");
    assert_true(jscan_path(root, "", &v));
    assert_string_equal(text_of(v), "{\"\":5}");

    v.type = 'x';
    assert_false(jscan_path(root, "sampling_params.missing", &v));
    assert_int_equal(v.type, 0);
    assert_false(jscan_path(root, "missing.max_new_tokens", &v));
    assert_false(jscan_path(root, "model.x", &v));                /* through a string */
    assert_false(jscan_path(root, "sampling_params.stop.0", &v)); /* no array indices */
    assert_false(jscan_path(root, "a.b", &v));                    /* '.' always splits */
    assert_false(jscan_path(root, "sampling_params.max_new_tokens.", &v));
    assert_false(jscan_path(root, "sampling_params..max_new_tokens", &v));
}

static void test_root(void **state)
{
    const char *text = " \n{\"a\":1}\t\r\n ";
    struct jscan_value r = jscan_root(text, strlen(text));
    assert_ptr_equal(r.p, text + 2);
    assert_int_equal(r.len, 7);
    assert_int_equal(r.type, 'o');
    r = jscan_root(text, 0);
    assert_int_equal(r.type, 0);
    assert_int_equal(r.len, 0);
    r = jscan_root("  \n", 3);
    assert_int_equal(r.type, 0);
    r = jscan_root("[1]", 3);
    assert_int_equal(r.type, 'a');
}

/* ---- scalars -------------------------------------------------------------------------------- */

/* The value of member "v" of json. */
static struct jscan_value member_v(const char *json)
{
    struct jscan_value v;
    assert_true(jscan_get(doc(json), "v", &v));
    return v;
}

static void expect_int(const char *json, bool ok, int64_t want)
{
    int64_t got = 42;
    if (jscan_int(member_v(json), &got) != ok)
        fail_msg("jscan_int(%s) should return %d", json, ok);
    if (ok && got != want)
        fail_msg("jscan_int(%s) = %" PRId64 ", want %" PRId64, json, got, want);
    if (!ok)
        assert_int_equal(got, 42);
}

static void test_int(void **state)
{
    expect_int("{\"v\":0}", true, 0);
    expect_int("{\"v\":-0}", true, 0);
    expect_int("{\"v\":7}", true, 7);
    expect_int("{\"v\":-123456}", true, -123456);
    expect_int("{\"v\":9223372036854775807}", true, INT64_MAX);
    expect_int("{\"v\":-9223372036854775808}", true, INT64_MIN);
    expect_int("{\"v\":9223372036854775808}", false, 0);
    expect_int("{\"v\":-9223372036854775809}", false, 0);
    expect_int("{\"v\":18446744073709551616}", false, 0);
    expect_int("{\"v\":99999999999999999999}", false, 0);
    expect_int("{\"v\":1e5}", false, 0);
    expect_int("{\"v\":1E0}", false, 0);
    expect_int("{\"v\":1.0}", false, 0);
    expect_int("{\"v\":-0.0}", false, 0);
    expect_int("{\"v\":\"5\"}", false, 0);
    expect_int("{\"v\":true}", false, 0);
    expect_int("{\"v\":[5]}", false, 0);
}

static void expect_double(const char *json, bool ok, double want)
{
    double got = 42.0;
    if (jscan_number(member_v(json), &got) != ok)
        fail_msg("jscan_number(%s) should return %d", json, ok);
    if (!ok)
        want = 42.0;
    if (memcmp(&got, &want, sizeof got) != 0) /* bit-exact: -0.0 is not 0.0 */
        fail_msg("jscan_number(%s) = %.17g, want %.17g", json, got, want);
}

static void test_number(void **state)
{
    expect_double("{\"v\":0}", true, 0.0);
    expect_double("{\"v\":-0}", true, -0.0);
    expect_double("{\"v\":1e5}", true, 1e5);
    expect_double("{\"v\":-1.5E-3}", true, -1.5e-3);
    expect_double("{\"v\":0.1}", true, 0.1);
    expect_double("{\"v\":9223372036854775808}", true, 9223372036854775808.0);
    expect_double("{\"v\":1e400}", true, HUGE_VAL);
    expect_double("{\"v\":-1e400}", true, -HUGE_VAL);
    expect_double("{\"v\":1e-400}", true, 0.0);
    expect_double("{\"v\":\"1\"}", false, 0);
    expect_double("{\"v\":null}", false, 0);
    /* 64 bytes and more are read in place. */
    expect_double(
        "{\"v\":0.10000000000000000000000000000000000000000000000000000000000000000000001}", true,
        0.1);
    expect_double("{\"v\":1234567890123456789012345678901234567890123456789012345678901234567890}",
                  true, 1234567890123456789012345678901234567890123456789012345678901234567890.0);
    /* Exactly 63 and 64 bytes. */
    expect_double("{\"v\":100000000000000000000000000000000000000000000000000000000000000}", true,
                  1e62);
    expect_double("{\"v\":1000000000000000000000000000000000000000000000000000000000000000}", true,
                  1e63);
}

static void test_bool(void **state)
{
    bool b = false;
    assert_true(jscan_bool(member_v("{\"v\":true}"), &b));
    assert_true(b);
    assert_true(jscan_bool(member_v("{\"v\":false}"), &b));
    assert_false(b);
    b = true;
    assert_false(jscan_bool(member_v("{\"v\":null}"), &b));
    assert_false(jscan_bool(member_v("{\"v\":\"true\"}"), &b));
    assert_false(jscan_bool(member_v("{\"v\":1}"), &b));
    assert_true(b);
}

/* jscan_string of member "v" into a buffer of size bytes equals want (NULL: fails). */
static void expect_unescaped(const char *json, size_t size, const char *want, size_t want_len)
{
    char out[256];
    memset(out, 'x', sizeof out);
    assert_true(size <= sizeof out);
    bool ok = jscan_string(member_v(json), out, size);
    if (ok != (want != NULL))
        fail_msg("jscan_string(%s, size %zu) returned %d", json, size, ok);
    if (want) {
        if (memcmp(out, want, want_len + 1) != 0)
            fail_msg("jscan_string(%s) = '%s', want '%s'", json, out, want);
    } else if (size > 0) {
        assert_int_equal(out[0], '\0');
    } else {
        assert_int_equal(out[0], 'x'); /* size 0: nothing written */
    }
    /* Never a byte past size. */
    for (size_t i = size; i < sizeof out; i++)
        assert_int_equal(out[i], 'x');
}

#define STR(json, size, lit) expect_unescaped(json, size, lit, sizeof(lit) - 1)
#define NOSTR(json, size) expect_unescaped(json, size, NULL, 0)

static void test_string(void **state)
{
    STR("{\"v\":\"\"}", 1, "");
    STR("{\"v\":\"abc\"}", 100, "abc");
    STR("{\"v\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"}", 100, "\" \\ / \b \f \n \r \t");
    STR("{\"v\":\"\\u0041\\u00e9\\u20AC\"}", 100, "A\xc3\xa9\xe2\x82\xac");
    STR("{\"v\":\"\\u07ff\\u0800\\uffff\"}", 100, "\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf");
    STR("{\"v\":\"\\ud83d\\ude00!\"}", 100, "\xf0\x9f\x98\x80!");
    STR("{\"v\":\"\\udbff\\udfff\"}", 100, "\xf4\x8f\xbf\xbf"); /* U+10FFFF */
    STR("{\"v\":\"\\ud800\\udc00\"}", 100, "\xf0\x90\x80\x80"); /* U+10000 */
    STR("{\"v\":\"\xc3\xa9 raw\"}", 100, "\xc3\xa9 raw");
    STR("{\"v\":\"a\\\\\"}", 100, "a\\");
    /* Exact fit, one short, nothing. */
    STR("{\"v\":\"abc\"}", 4, "abc");
    NOSTR("{\"v\":\"abc\"}", 3);
    NOSTR("{\"v\":\"abc\"}", 0);
    NOSTR("{\"v\":\"x\"}", 1);
    STR("{\"v\":\"\\u00e9\"}", 3, "\xc3\xa9");
    NOSTR("{\"v\":\"\\u00e9\"}", 2);
    STR("{\"v\":\"ab\\n\"}", 4, "ab\n");
    NOSTR("{\"v\":\"ab\\n\"}", 3);
    STR("{\"v\":\"\\ud83d\\ude00\"}", 5, "\xf0\x9f\x98\x80");
    NOSTR("{\"v\":\"\\ud83d\\ude00\"}", 4);
    /* \u0000 cannot be in a C string. */
    NOSTR("{\"v\":\"a\\u0000b\"}", 100);
    NOSTR("{\"v\":\"\\u0000\"}", 100);
    /* Not strings. */
    NOSTR("{\"v\":1}", 100);
    NOSTR("{\"v\":[\"a\"]}", 100);
    NOSTR("{\"v\":null}", 100);
    /* Values a caller built by hand: malformed escapes fail, do not overrun. */
    char out[16];
    assert_false(jscan_string((struct jscan_value){"\"\\ud800\"", 8, 's'}, out, sizeof out));
    assert_false(jscan_string((struct jscan_value){"\"\\udc00\"", 8, 's'}, out, sizeof out));
    assert_false(jscan_string((struct jscan_value){"\"\\u12\"", 6, 's'}, out, sizeof out));
    assert_false(jscan_string((struct jscan_value){"\"\\x\"", 4, 's'}, out, sizeof out));
    assert_false(jscan_string((struct jscan_value){"\"\\\"", 3, 's'}, out, sizeof out));
}

/* ---- arrays --------------------------------------------------------------------------------- */

/* Counts elements by iterating, checking each element's text against the wanted ones. */
static void expect_elements(const char *json, long n, const char *const *want)
{
    struct jscan_value arr = member_v(json), e;
    assert_int_equal(arr.type, 'a');
    if (jscan_count(arr) != n)
        fail_msg("jscan_count(%s) = %ld, want %ld", json, jscan_count(arr), n);
    struct jscan_iter it = {0};
    for (long i = 0; i < n; i++) {
        if (!jscan_next(arr, &it, &e))
            fail_msg("%s: iteration stopped after %ld elements", json, i);
        if (want)
            assert_string_equal(text_of(e), want[i]);
        assert_int_equal(e.type, e.p[0] == '{'   ? 'o'
                                 : e.p[0] == '[' ? 'a'
                                 : e.p[0] == '"' ? 's'
                                 : e.p[0] == 't' ? 't'
                                 : e.p[0] == 'f' ? 'f'
                                 : e.p[0] == 'n' ? 'z'
                                                 : 'n');
    }
    for (int again = 0; again < 3; again++) {
        e.type = 'x';
        assert_false(jscan_next(arr, &it, &e));
        assert_int_equal(e.type, 0);
    }
}

static void test_arrays(void **state)
{
    expect_elements("{\"v\":[]}", 0, NULL);
    expect_elements("{\"v\":[ \n\t ]}", 0, NULL);
    expect_elements("{\"v\":[1]}", 1, (const char *const[]){"1"});
    expect_elements("{\"v\":[ 1 , -2.5e3 ,3 ]}", 3, (const char *const[]){"1", "-2.5e3", "3"});
    expect_elements("{\"v\":[[1,2],[3,[4,5]],{\"a\":[1,2],\"b\":\",\"}]}", 3,
                    (const char *const[]){"[1,2]", "[3,[4,5]]", "{\"a\":[1,2],\"b\":\",\"}"});
    expect_elements("{\"v\":[\"a,b\",\"]\",\"\\\"],\",\"[{\",\"\\\\\"]}", 5,
                    (const char *const[]){"\"a,b\"", "\"]\"", "\"\\\"],\"", "\"[{\"", "\"\\\\\""});
    expect_elements("{\"v\":[true,false,null,{},[],\"\"]}", 6,
                    (const char *const[]){"true", "false", "null", "{}", "[]", "\"\""});
    /* Long enough to cross 8-byte blocks with specials at every position. */
    expect_elements("{\"v\":[1234567,\"x,y\",12345678,[1,2,3,4,5,6,7,8],123456789,"
                    "\"0123456789,,,,,,,,,,\",{\"k\":[\",\"]}]}",
                    7, NULL);

    /* Not arrays. */
    struct jscan_value root = doc("{\"v\":{\"a\":1},\"s\":\"[1,2]\"}"), v, e;
    struct jscan_iter it = {0};
    assert_int_equal(jscan_count(root), -1);
    assert_true(jscan_get(root, "s", &v));
    assert_int_equal(jscan_count(v), -1);
    assert_false(jscan_next(v, &it, &e));
    assert_int_equal(e.type, 0);
    assert_int_equal(jscan_count((struct jscan_value){NULL, 0, 0}), -1);
}

/* Token-id arrays of every length up to a few blocks, and one of 50,000 ids. */
static void test_token_arrays(void **state)
{
    text_buf t = {0};
    struct rng r = rng_keyed(3, 0, 0, 0);
    for (long n = 0; n <= 300; n++) {
        t.n = 0;
        for (const char *s = "{\"input_ids\":["; *s; s++)
            vec_push(&t, *s);
        for (long i = 0; i < n; i++) {
            char num[32];
            int k = snprintf(num, sizeof num, "%s%" PRIu64,
                             i ? (i % 7 ? (i % 2 ? "," : ", ") : " , ") : "",
                             rng_uniform_int(&r, i % 3 ? 32000 : 10));
            for (int j = 0; j < k; j++)
                vec_push(&t, num[j]);
        }
        for (const char *s = "]}"; *s; s++)
            vec_push(&t, *s);
        vec_push(&t, '\0');
        struct jscan_value arr, e;
        assert_true(jscan_get(doc(t.v), "input_ids", &arr));
        assert_int_equal(jscan_count(arr), n);
        struct jscan_iter it = {0};
        long seen = 0;
        while (jscan_next(arr, &it, &e)) {
            int64_t id;
            assert_true(jscan_int(e, &id));
            seen++;
        }
        assert_int_equal(seen, n);
    }
    vec_free(&t);

    enum { IDS = 50000 };
    char *body = malloc(IDS * 8 + 64);
    size_t len = (size_t)sprintf(body, "{\"model\":\"m\",\"input_ids\":[");
    for (int i = 0; i < IDS; i++)
        len += (size_t)sprintf(body + len, "%s%d", i ? "," : "", (i * 7919) % 151646);
    len += (size_t)sprintf(body + len, "],\"sampling_params\":{\"max_new_tokens\":512}}");
    expect_ok(body, len);
    struct jscan_value root = jscan_root(body, len), arr, v;
    assert_true(jscan_get(root, "input_ids", &arr));
    assert_int_equal(jscan_count(arr), IDS);
    int64_t max_new;
    assert_true(jscan_path(root, "sampling_params.max_new_tokens", &v));
    assert_true(jscan_int(v, &max_new));
    assert_int_equal(max_new, 512);
    struct jscan_cut cut;
    assert_true(jscan_cut(root, "input_ids", &cut));
    assert_int_equal(cut.head_len, strlen("{\"model\":\"m\""));
    assert_ptr_equal(root.p + cut.tail_off, arr.p + arr.len);
    free(body);
}

/* ---- jscan_member_count --------------------------------------------------------------------- */

/* Direct members only, names compared unescaped, a value holding the name not counted. */
static void test_member_count(void **state)
{
    (void)state;
    struct jscan_value root =
        doc("{\"a\": 1, \"b\": {\"a\": 2}, \"\\u0061\": [\"a\"], \"c\": \"a\"}");
    assert_int_equal(jscan_member_count(root, "a"), 2);
    assert_int_equal(jscan_member_count(root, "b"), 1);
    assert_int_equal(jscan_member_count(root, "d"), 0);
    struct jscan_value inner;
    assert_true(jscan_get(root, "b", &inner));
    assert_int_equal(jscan_member_count(inner, "a"), 1);
    assert_int_equal(jscan_member_count(doc("{}"), "a"), 0);
    struct jscan_value text;
    assert_true(jscan_get(root, "c", &text));
    assert_int_equal(jscan_member_count(text, "a"), 0); /* not an object */
}

/* The first member named none of the keys, names compared unescaped; none in an empty object
 * or a value that is not one. */
static void test_other_member(void **state)
{
    (void)state;
    static const char *const keys[] = {"a", "b", NULL};
    struct jscan_value root = doc("{\"a\": 1, \"\\u0062\": {\"x\": 2}, \"c\\n\": 3, \"d\": 4}");
    struct jscan_value name;
    char text[8];
    assert_true(jscan_other_member(root, keys, &name));
    assert_true(jscan_string(name, text, sizeof text));
    assert_string_equal(text, "c\n");
    assert_false(jscan_other_member(doc("{\"b\": 1, \"a\": [\"c\"]}"), keys, &name));
    assert_false(jscan_other_member(doc("{}"), keys, &name));
    struct jscan_value list;
    assert_true(jscan_get(doc("{\"l\": [\"c\"]}"), "l", &list));
    assert_false(jscan_other_member(list, keys, &name)); /* not an object */
}

/* ---- jscan_cut ------------------------------------------------------------------------------ */

static void expect_cut(const char *json, const char *key, const char *want)
{
    struct jscan_value root = doc(json);
    struct jscan_cut cut = {777, 777};
    if (!want) {
        assert_false(jscan_cut(root, key, &cut));
        assert_int_equal(cut.head_len, 777);
        return;
    }
    if (!jscan_cut(root, key, &cut))
        fail_msg("%s: cannot cut '%s'", json, key);
    /* The same cut from the member's value, found in one pass or alone. */
    struct jscan_value val, many;
    struct jscan_cut at = {777, 777};
    const char *keys[1] = {key};
    assert_true(jscan_get(root, key, &val));
    assert_int_equal(jscan_get_many(root, keys, 1, &many), 1);
    assert_true(jscan_cut_value(root, many, &at));
    assert_int_equal(at.head_len, cut.head_len);
    assert_int_equal(at.tail_off, cut.tail_off);
    assert_true(jscan_cut_value(root, val, &at));
    assert_int_equal(at.tail_off, cut.tail_off);
    assert_true(cut.head_len <= cut.tail_off && cut.tail_off <= root.len);
    char out[512];
    size_t n = cut.head_len + (root.len - cut.tail_off);
    assert_true(n < sizeof out);
    memcpy(out, root.p, cut.head_len);
    memcpy(out + cut.head_len, root.p + cut.tail_off, root.len - cut.tail_off);
    out[n] = '\0';
    if (strcmp(out, want) != 0)
        fail_msg("cut '%s' of %s gives %s, want %s", key, json, out, want);
    expect_ok(out, n);
}

static void test_cut(void **state)
{
    const char *abc = "{\"a\":1,\"b\":[2,{\"a\":0}],\"c\":\"3\"}";
    expect_cut(abc, "a", "{\"b\":[2,{\"a\":0}],\"c\":\"3\"}"); /* first */
    expect_cut(abc, "b", "{\"a\":1,\"c\":\"3\"}");             /* middle */
    expect_cut(abc, "c", "{\"a\":1,\"b\":[2,{\"a\":0}]}");     /* last */
    expect_cut(abc, "x", NULL);
    expect_cut("{\"only\":{\"x\":1}}", "only", "{}");
    expect_cut("{ \"only\" : 1 }", "only", "{  }");
    expect_cut("{}", "a", NULL);
    /* Whitespace around members. */
    const char *ws = "{ \"a\" : 1 ,\n  \"b\" : 2 ,\n  \"c\" : 3 }";
    expect_cut(ws, "a", "{ \"b\" : 2 ,\n  \"c\" : 3 }");
    expect_cut(ws, "b", "{ \"a\" : 1 ,\n  \"c\" : 3 }");
    expect_cut(ws, "c", "{ \"a\" : 1 ,\n  \"b\" : 2 }");
    /* Duplicates: the first goes, the second stays. */
    expect_cut("{\"k\":1,\"x\":0,\"k\":2}", "k", "{\"x\":0,\"k\":2}");
    expect_cut("{\"x\":0,\"k\":1,\"k\":2}", "k", "{\"x\":0,\"k\":2}");
    /* A nested member of the same name is not a top-level one. */
    expect_cut("{\"o\":{\"k\":1}}", "k", NULL);
    /* Escaped names. */
    expect_cut("{\"a\":1,\"\\u006b\":{\"z\":\"}\"}}", "k", "{\"a\":1}");
    /* A value with a string holding a comma and a brace. */
    expect_cut("{\"s\":\"a,}\",\"t\":1}", "s", "{\"t\":1}");

    struct jscan_value arr = {"[1]", 3, 'a'};
    struct jscan_cut cut;
    assert_false(jscan_cut(arr, "a", &cut));

    /* Values that cannot be a member's of the object: an element, a lazy value (its end is
     * the object's), the object itself. */
    struct jscan_value root = doc("{\"a\":[1,2],\"o\":{\"k\":3}}"), v;
    assert_true(jscan_get(root, "a", &v));
    struct jscan_iter it = {0};
    struct jscan_value one, lazy;
    assert_true(jscan_next(v, &it, &one));
    assert_true(jscan_get_lazy(root, "o", &lazy));
    assert_false(jscan_cut_value(root, one, &cut));
    assert_false(jscan_cut_value(root, lazy, &cut));
    assert_false(jscan_cut_value(root, root, &cut));
    assert_false(jscan_cut_value(arr, one, &cut));
}

/* ---- differential property test against jansson --------------------------------------------- */

static void put(text_buf *t, const char *s)
{
    for (; *s; s++)
        vec_push(t, *s);
}

static void put_ws(text_buf *t, struct rng *r)
{
    static const char *const ws[] = {"", "", "", " ", "\n", " \t\r\n "};
    put(t, ws[rng_uniform_int(r, 6)]);
}

static void gen_string(text_buf *t, struct rng *r, bool name)
{
    static const char *const names[] = {
        "a", "b", "k", "\\u0061", "", "a\\u0000", "\\ud83d\\ude00", "\\\"", "\xc3\xa9"};
    static const char *const pieces[] = {"x",
                                         ",",
                                         "]",
                                         "}",
                                         "[{",
                                         "\\\"",
                                         "\\\\",
                                         "\\/",
                                         "\\n",
                                         "\\u00e9",
                                         "\\u20ac",
                                         "\\u0000",
                                         "\\ud83d\\ude00",
                                         " ",
                                         "\xc3\xa9",
                                         "0123456789abcdef"};
    vec_push(t, '"');
    if (name) {
        put(t, names[rng_uniform_int(r, sizeof names / sizeof names[0])]);
    } else {
        for (uint64_t n = rng_uniform_int(r, 5); n > 0; n--)
            put(t, pieces[rng_uniform_int(r, sizeof pieces / sizeof pieces[0])]);
    }
    vec_push(t, '"');
}

static void gen_value(text_buf *t, struct rng *r, int depth)
{
    static const char *const numbers[] = {"0",
                                          "-0",
                                          "1",
                                          "-17",
                                          "1e5",
                                          "2.5",
                                          "-0.0e-0",
                                          "9223372036854775807",
                                          "-9223372036854775808",
                                          "9223372036854775808",
                                          "1E+300",
                                          "123456789012"};
    switch (rng_uniform_int(r, depth >= 6 ? 4 : 7)) {
    case 0:
        put(t, numbers[rng_uniform_int(r, sizeof numbers / sizeof numbers[0])]);
        break;
    case 1:
        gen_string(t, r, false);
        break;
    case 2: {
        static const char *const lits[] = {"true", "false", "null"};
        put(t, lits[rng_uniform_int(r, 3)]);
        break;
    }
    case 3: {
        char num[32];
        snprintf(num, sizeof num, "%" PRIu64, rng_uniform_int(r, 100000));
        put(t, num);
        break;
    }
    case 4:
    case 5: {
        vec_push(t, '[');
        for (uint64_t i = 0, n = rng_uniform_int(r, 6); i < n; i++) {
            put_ws(t, r);
            if (i)
                vec_push(t, ',');
            put_ws(t, r);
            gen_value(t, r, depth + 1);
        }
        put_ws(t, r);
        vec_push(t, ']');
        break;
    }
    default: {
        vec_push(t, '{');
        for (uint64_t i = 0, n = rng_uniform_int(r, 5); i < n; i++) {
            put_ws(t, r);
            if (i)
                vec_push(t, ',');
            put_ws(t, r);
            gen_string(t, r, true);
            put_ws(t, r);
            vec_push(t, ':');
            put_ws(t, r);
            gen_value(t, r, depth + 1);
        }
        put_ws(t, r);
        vec_push(t, '}');
        break;
    }
    }
}

/* A random document: an object at the top. */
static void gen_doc(text_buf *t, struct rng *r)
{
    t->n = 0;
    put_ws(t, r);
    vec_push(t, '{');
    for (uint64_t i = 0, n = rng_uniform_int(r, 6); i < n; i++) {
        put_ws(t, r);
        if (i)
            vec_push(t, ',');
        put_ws(t, r);
        gen_string(t, r, true);
        put_ws(t, r);
        vec_push(t, ':');
        put_ws(t, r);
        gen_value(t, r, 1);
    }
    put_ws(t, r);
    vec_push(t, '}');
    put_ws(t, r);
}

enum { LOOSE = JSON_DECODE_ANY | JSON_ALLOW_NUL };

/* Whether jansson's verdict on text may differ from jscan's: what jscan_check leaves alone
 * (UTF-8, number magnitude) or jansson refuses beyond RFC 8259 (NUL in a name). */
static bool jansson_excused(const json_error_t *e)
{
    enum json_error_code code = json_error_code(e);
    return code == json_error_invalid_utf8 || code == json_error_numeric_overflow ||
           code == json_error_null_byte_in_key;
}

/* jscan_check and jansson agree on text[0..len). */
static void expect_agreement(const char *text, size_t len)
{
    size_t off;
    const char *msg;
    int rc = jscan_check(text, len, &off, &msg);
    json_error_t e;
    json_t *j = json_loadb(text, len, LOOSE, &e);
    bool jansson_ok = j && json_is_object(j);
    if (rc == 0 && !jansson_ok && !(j == NULL && jansson_excused(&e)))
        fail_msg("jscan accepts, jansson rejects (%s): %.*s", j ? "not an object" : e.text,
                 (int)len, text);
    if (rc != 0 && jansson_ok)
        fail_msg("jscan rejects at %zu (%s), jansson accepts: %.*s", off, msg, (int)len, text);
    if (rc != 0)
        assert_true(off <= len && msg && msg[0]);
    json_decref(j);
}

/* The jansson value of the JSON text of v. */
static json_t *parse_value(struct jscan_value v)
{
    json_error_t e;
    json_t *j = json_loadb(v.p, v.len, LOOSE, &e);
    if (!j)
        fail_msg("value text does not parse (%s): %.*s", e.text, (int)v.len, v.p);
    return j;
}

/* Every member and element below v agrees with the jansson tree j (no duplicate names). */
static void expect_same(struct jscan_value v, const json_t *j)
{
    json_t *whole = parse_value(v);
    assert_true(json_equal(whole, j));
    json_decref(whole);
    int64_t i;
    double d;
    bool b;
    char s[256];
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        assert_int_equal(v.type, 'o');
        const char *key;
        json_t *member;
        json_object_foreach((json_t *)j, key, member)
        {
            struct jscan_value m;
            assert_true(jscan_get(v, key, &m));
            expect_same(m, member);
        }
        break;
    }
    case JSON_ARRAY: {
        assert_int_equal(jscan_count(v), (long)json_array_size(j));
        struct jscan_iter it = {0};
        struct jscan_value e;
        for (size_t k = 0; k < json_array_size(j); k++) {
            assert_true(jscan_next(v, &it, &e));
            expect_same(e, json_array_get(j, k));
        }
        assert_false(jscan_next(v, &it, &e));
        break;
    }
    case JSON_STRING: {
        bool has_nul = memchr(json_string_value(j), '\0', json_string_length(j)) != NULL;
        bool fits = json_string_length(j) < sizeof s;
        assert_int_equal(jscan_string(v, s, sizeof s), !has_nul && fits);
        if (!has_nul && fits)
            assert_string_equal(s, json_string_value(j));
        break;
    }
    case JSON_INTEGER:
        assert_true(jscan_int(v, &i));
        assert_true(i == json_integer_value(j));
        assert_true(jscan_number(v, &d));
        assert_true(d == (double)json_integer_value(j));
        break;
    case JSON_REAL:
        assert_false(jscan_int(v, &i));
        assert_true(jscan_number(v, &d));
        assert_true(d == json_real_value(j));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        assert_true(jscan_bool(v, &b));
        assert_int_equal(b, json_is_true(j));
        break;
    case JSON_NULL:
        assert_int_equal(v.type, 'z');
        break;
    }
}

/* Cutting each top-level member gives the document without it. */
static void expect_cuts(struct jscan_value root, const json_t *j)
{
    const char *key;
    json_t *member;
    json_object_foreach((json_t *)j, key, member)
    {
        struct jscan_cut cut;
        assert_true(jscan_cut(root, key, &cut));
        size_t n = cut.head_len + root.len - cut.tail_off;
        char *out = malloc(n + 1);
        memcpy(out, root.p, cut.head_len);
        memcpy(out + cut.head_len, root.p + cut.tail_off, root.len - cut.tail_off);
        expect_ok(out, n);
        json_t *back = json_loadb(out, n, LOOSE, NULL);
        json_t *want = json_deep_copy(j);
        json_object_del(want, key);
        if (!back || !json_equal(back, want))
            fail_msg("cut '%s' gives %.*s", key, (int)n, out);
        json_decref(back);
        json_decref(want);
        free(out);
    }
}

static void test_differential(void **state)
{
    static const char mutations[] = "{}[]\":,\\u0-1e.tfn x\x01\xff";
    text_buf t = {0};
    long strict = 0;
    for (uint64_t round = 0; round < 3000; round++) {
        struct rng r = rng_keyed(11, round, 0, 0);
        gen_doc(&t, &r);
        vec_push(&t, '\0');
        t.n--;
        expect_ok(t.v, t.n);
        expect_agreement(t.v, t.n);
        json_t *j = json_loadb(t.v, t.n, LOOSE | JSON_REJECT_DUPLICATES, NULL);
        if (j) { /* no duplicate names: every member is comparable */
            struct jscan_value root = jscan_root(t.v, t.n);
            expect_same(root, j);
            expect_cuts(root, j);
            json_decref(j);
            strict++;
        }
        /* Mutants: one byte replaced, deleted or inserted. */
        for (int m = 0; m < 8 && t.n > 0; m++) {
            text_buf u = {0};
            size_t at = rng_uniform_int(&r, t.n);
            char c = mutations[rng_uniform_int(&r, sizeof mutations - 1)];
            for (size_t k = 0; k < t.n; k++) {
                int op = m % 3;
                if (k == at && op == 0)
                    vec_push(&u, c);
                else if (k == at && op == 1)
                    continue;
                else if (k == at && op == 2) {
                    vec_push(&u, c);
                    vec_push(&u, t.v[k]);
                } else
                    vec_push(&u, t.v[k]);
            }
            expect_agreement(u.v ? u.v : "", u.n);
            vec_free(&u);
        }
    }
    assert_true(strict > 1000); /* the comparison above ran often enough to mean something */
    vec_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_accepts),
        cmocka_unit_test(test_check_rejects),
        cmocka_unit_test(test_check_truncated),
        cmocka_unit_test(test_check_depth),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_root),
        cmocka_unit_test(test_int),
        cmocka_unit_test(test_number),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_string),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_token_arrays),
        cmocka_unit_test(test_member_count),
        cmocka_unit_test(test_other_member),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_get_lazy),
        cmocka_unit_test(test_get_many),
        cmocka_unit_test(test_differential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
