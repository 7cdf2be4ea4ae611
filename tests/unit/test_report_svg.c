/* report/svg: escaping, the two number rules, nice ticks, wrapping and elements, each checked
 * against hand-worked text; ticks also as a property over random ranges (fixed seed). */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg.h"
#include "util/rng.h"

static void expect_escaped(const char *in, bool attr, const char *want)
{
    struct strbuf b = {0};
    if (attr)
        svg_attr(&b, "a", in);
    else
        svg_escape(&b, in);
    assert_string_equal(b.data ? b.data : "", want);
    strbuf_free(&b);
}

static void test_escape(void **state)
{
    expect_escaped("a<b & c>d", false, "a&lt;b &amp; c&gt;d");
    expect_escaped("say \"hi\" 'x'", false, "say \"hi\" 'x'"); /* text keeps quotes */
    expect_escaped("say \"hi\" 'x'", true, " a=\"say &quot;hi&quot; &#39;x&#39;\"");
    expect_escaped("tab\tnl\ncr\r", false, "tab\tnl\ncr\r");
    expect_escaped("bell\x07", false, "bell\xEF\xBF\xBD"); /* no XML 1.0 character */
    expect_escaped("caf\xC3\xA9 \xE2\x9C\x93", false, "caf\xC3\xA9 \xE2\x9C\x93"); /* kept */
    expect_escaped("\xFF", false, "\xEF\xBF\xBD");                                 /* not UTF-8 */
    expect_escaped("\xC0\xAF", false, "\xEF\xBF\xBD\xEF\xBF\xBD"); /* overlong '/' */
    expect_escaped("\xED\xA0\x80", false, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* surrogate */
    expect_escaped("\xEF\xBF\xBF", false, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"); /* U+FFFF */
    expect_escaped("\xE2\x9C", false, "\xEF\xBF\xBD\xEF\xBF\xBD");                 /* cut short */
    expect_escaped("\xF0\x9F\x98\x80", false, "\xF0\x9F\x98\x80"); /* outside the BMP */
    expect_escaped("", false, "");
}

static void test_number_rules(void **state)
{
    char buf[SVG_NUM_MAX];
    assert_string_equal(svg_format_fixed(buf, 1.5, 2), "1.5");
    assert_string_equal(svg_format_fixed(buf, 2.0, 2), "2");
    assert_string_equal(svg_format_fixed(buf, 1234.5678, 2), "1234.57");
    assert_string_equal(svg_format_fixed(buf, 0.125, 2), "0.12"); /* exact tie: to even */
    assert_string_equal(svg_format_fixed(buf, -0.0, 2), "0");
    assert_string_equal(svg_format_fixed(buf, -0.004, 2), "0"); /* never "-0" */
    assert_string_equal(svg_format_fixed(buf, -0.006, 2), "-0.01");
    assert_string_equal(svg_format_fixed(buf, 100, 0), "100"); /* no point: zeros kept */
    assert_string_equal(svg_format_fixed(buf, NAN, 2), "0");
    assert_string_equal(svg_format_fixed(buf, INFINITY, 2), "0");
    assert_string_equal(svg_format_fixed(buf, 1e300, 2), "1000000000000000"); /* clamped */
    assert_string_equal(svg_format_value(buf, 1.0 / 3), "0.3333333333");
    assert_string_equal(svg_format_value(buf, 276.4742125596299), "276.4742126");
    assert_string_equal(svg_format_value(buf, -0.0), "0");
    assert_string_equal(svg_format_value(buf, 1e300), "1e+300");
    assert_string_equal(svg_format_value(buf, 32768), "32768");
    assert_string_equal(svg_format_value(buf, NAN), "null");
}

static void expect_ticks(double lo, double hi, int target, bool integer, double step, int n,
                         double first, int decimals)
{
    struct svg_axis a;
    svg_axis_make(&a, lo, hi, target, integer);
    assert_close(a.step, step, 1e-12);
    assert_int_equal(a.n, n);
    assert_close(a.lo, first, 1e-12);
    assert_close(a.hi, first + (n - 1) * step, 1e-12);
    assert_int_equal(a.decimals, decimals);
}

static void test_ticks(void **state)
{
    expect_ticks(0, 276.47, 5, false, 100, 4, 0, 0); /* 55.3 a tick: 100 */
    expect_ticks(0, 1, 5, false, 0.2, 6, 0, 1);
    expect_ticks(0.1, 0.35, 5, false, 0.05, 6, 0.1, 2);
    expect_ticks(-37, 12, 5, false, 10, 7, -40, 0);
    expect_ticks(0, 5, 8, true, 1, 6, 0, 0); /* steps: never half a step */
    expect_ticks(0, 1, 8, true, 1, 2, 0, 0);
    expect_ticks(0, 0, 5, false, 0.2, 6, 0, 1);          /* nothing to show: [0, 1] */
    expect_ticks(5, 5, 5, false, 1, 7, 2, 0);            /* one point: widened around it */
    expect_ticks(NAN, INFINITY, 5, false, 0.2, 6, 0, 1); /* not finite: 0 and 1 */
    expect_ticks(9, 1, 4, false, 2, 6, 0, 0);            /* ends in either order */

    struct svg_axis a; /* a tick at 0 is exactly 0, not 5.55e-17 */
    svg_axis_make(&a, -0.3, 0.3, 6, false);
    assert_int_equal(a.n, 7);
    assert_true(a.tick[3] == 0 && !signbit(a.tick[3]));
    char buf[SVG_NUM_MAX];
    assert_string_equal(svg_axis_label(&a, a.tick[0], buf), "-0.3");
    assert_string_equal(svg_axis_label(&a, a.tick[3], buf), "0");
    assert_close(svg_axis_px(&a, 0.15, 100, 400), 325, 1e-12);
    svg_axis_make(&a, 0, 3e9, 5, false);
    assert_string_equal(svg_axis_label(&a, a.tick[1], buf), "1e+09");

    svg_axis_make(&a, -1e308, 1e308, 5, false); /* the span stays finite */
    for (int i = 0; i < a.n; i++)
        assert_true(isfinite(a.tick[i]));
}

/* Over random ranges: the ticks cover the data, rise by one nice step, and are few. */
static void test_ticks_property(void **state)
{
    for (uint64_t k = 0; k < 20000; k++) {
        struct rng r = rng_keyed(7, k, 0, 0);
        double u = rng_uniform(&r), v = rng_uniform(&r), w = rng_uniform(&r);
        double scale = pow(10, floor(w * 16) - 8);
        double lo = (u - 0.5) * scale, hi = lo + v * scale;
        int target = 2 + (int)(k % 11);
        struct svg_axis a;
        svg_axis_make(&a, lo, hi, target, k % 3 == 0);
        assert_true(a.n >= 2 && a.n <= SVG_TICKS_MAX);
        assert_true(a.lo <= lo && a.hi >= hi);
        double mag = pow(10, floor(log10(a.step) + 1e-9)), norm = a.step / mag;
        assert_true(fabs(norm - 1) < 1e-9 || fabs(norm - 2) < 1e-9 || fabs(norm - 5) < 1e-9);
        if (k % 3 == 0)
            assert_true(a.step >= 1);
        for (int i = 1; i < a.n; i++)
            assert_close(a.tick[i] - a.tick[i - 1], a.step, 1e-6);
    }
}

/* A log axis: powers of ten around the data, positions by log10, labels short. */
static void test_log_ticks(void **state)
{
    (void)state;
    struct svg_axis a;
    char buf[SVG_NUM_MAX];
    svg_axis_make_log(&a, 3.5, 31623);
    assert_int_equal(a.n, 6); /* 1 .. 1e5 */
    assert_close(a.tick[0], 1, 0);
    assert_close(a.tick[5], 1e5, 1e-9);
    assert_close(svg_axis_px(&a, 1000, 0, 500), 300, 1e-9);
    assert_close(svg_axis_px(&a, 0, 0, 500), 0, 0); /* nothing below 0 on a log axis */
    assert_string_equal(svg_axis_label(&a, a.tick[4], buf), "10000");
    assert_string_equal(svg_axis_label(&a, a.tick[5], buf), "1e5");
    svg_axis_make_log(&a, 0.01, 0.5);
    assert_int_equal(a.n, 3);
    assert_string_equal(svg_axis_label(&a, a.tick[0], buf), "0.01");
    assert_string_equal(svg_axis_label(&a, a.tick[2], buf), "1");
    svg_axis_make_log(&a, 1e-30, 1e30); /* too many decades: every other one, up to the cap */
    assert_true(a.n >= 2 && a.n <= SVG_TICKS_MAX && a.lo <= 1e-30 && a.hi >= 1e30);
    assert_string_equal(svg_axis_label(&a, a.tick[0], buf), "1e-30");
    svg_axis_make_log(&a, 0, -1); /* no positive end: 1 to 10 */
    assert_int_equal(a.n, 2);
    assert_close(a.tick[1], 10, 1e-12);
    svg_axis_make_log(&a, 7, 7); /* one point: the decade around it */
    assert_true(a.lo <= 7 && a.hi >= 7 && a.n == 2);
}

static void expect_wrap(const char *text, size_t cols, size_t n, const char *const *want)
{
    size_t start[8], len[8];
    assert_int_equal(svg_wrap(text, cols, start, len, 8), n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(len[i], strlen(want[i]));
        assert_memory_equal(text + start[i], want[i], len[i]);
    }
}

static void test_wrap(void **state)
{
    expect_wrap("aaa bbb ccc", 7, 2, (const char *const[]){"aaa bbb", "ccc"});
    expect_wrap("aaa bbb ccc", 11, 1, (const char *const[]){"aaa bbb ccc"});
    expect_wrap("  aaa   bbb  ", 5, 2, (const char *const[]){"aaa", "bbb"});
    expect_wrap("a verylongword b", 4, 3, (const char *const[]){"a", "verylongword", "b"});
    expect_wrap("", 10, 0, NULL);
    expect_wrap("   ", 10, 0, NULL);
    size_t start[1], len[1]; /* more lines than room: counted, only max written */
    assert_int_equal(svg_wrap("a b c", 1, start, len, 1), 3);
    assert_int_equal(len[0], 1);
}

static void test_elements(void **state)
{
    struct strbuf b = {0};
    svg_tag(&b, "rect");
    svg_attr_px(&b, "x", 10.504);
    svg_attr_value(&b, "data-value", 123.4);
    svg_attr_value(&b, "data-skipped", NAN);
    svg_attr(&b, "data-series", "a&b");
    svg_end_tag(&b);
    svg_text(&b, 5, 6.25, "end", 11, true, -90, "y-label", "time (s) <x>");
    assert_string_equal(b.data, "<rect x=\"10.5\" data-value=\"123.4\" data-series=\"a&amp;b\"/>\n"
                                "<text x=\"5\" y=\"6.25\" text-anchor=\"end\" font-size=\"11\" "
                                "font-weight=\"bold\" transform=\"rotate(-90 5 6.25)\" "
                                "class=\"y-label\">time (s) &lt;x&gt;</text>\n");
    strbuf_free(&b);
    svg_document_begin(&b, "f-1", 720, 100.5, "T & t", "{\"a\":\"<b>\"}");
    svg_document_end(&b);
    assert_string_equal(b.data,
                        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"f-1\" width=\"720\" "
                        "height=\"100.5\" viewBox=\"0 0 720 100.5\" font-family=\"sans-serif\" "
                        "font-size=\"11\">\n<title>T &amp; t</title>\n"
                        "<desc>{\"a\":\"&lt;b&gt;\"}</desc>\n"
                        "<rect width=\"720\" height=\"100.5\" fill=\"#ffffff\"/>\n</svg>\n");
    strbuf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),    cmocka_unit_test(test_number_rules),
        cmocka_unit_test(test_ticks),     cmocka_unit_test(test_ticks_property),
        cmocka_unit_test(test_wrap),      cmocka_unit_test(test_elements),
        cmocka_unit_test(test_log_ticks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
