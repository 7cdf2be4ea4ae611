/*
 * Fuzz harness for `libra report`'s entry points (report/report.h) on arbitrary bytes as one
 * result. The first byte, when the input has one, also picks a step range, so that the
 * per-step figures see ranges that hold some, all or none of the steps. Aborts when:
 *
 *   - a rejected input, or a failed render, has no message (or, rejected, no position);
 *   - a rendered page is not one whole document, or holds a byte XML 1.0 cannot carry;
 *   - a figure is not one whole SVG document with an id;
 *   - rendering the same input twice gives different bytes.
 *
 * Results of every shape reach the figures only through the schema check, so the corpus
 * (tests/fuzz/corpus/report/) holds real results of each kind to mutate from.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "report/report.h"

static bool ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && memcmp(s + n - m, end, m) == 0;
}

static void check_output(const struct report_output *out)
{
    fuzz_require(strncmp(out->html, "<!DOCTYPE html>\n", 16) == 0, "page does not start as HTML");
    fuzz_require(ends_with(out->html, "</body>\n</html>\n"), "page is not whole");
    for (const unsigned char *c = (const unsigned char *)out->html; *c; c++)
        fuzz_require(*c >= 0x20 || *c == '\t' || *c == '\n' || *c == '\r',
                     "page holds a control character");
    for (size_t i = 0; i < out->figures.n; i++) {
        const struct report_figure *f = &out->figures.v[i];
        fuzz_require(f->id[0] != '\0', "figure without an id");
        fuzz_require(strncmp(f->svg, "<svg xmlns=", 11) == 0 && ends_with(f->svg, "</svg>\n"),
                     "figure is not one SVG document");
        fuzz_require(strstr(out->html, f->svg) != NULL, "figure missing from the page");
    }
}

/* Adds and renders the input; returns the page (caller frees), or NULL when refused. */
static char *render(const uint8_t *data, size_t size, const struct report_options *opt)
{
    struct report r;
    report_init(&r, opt);
    struct libra_error err = {0};
    char *html = NULL;
    if (report_add(&r, "fuzz", (const char *)data, size, &err) != 0) {
        fuzz_require(err.msg[0] && err.line >= 1 && err.col >= 1, "refused without a position");
    } else {
        struct report_output out = {0};
        if (report_render(&r, &out, &err) == 0) {
            check_output(&out);
            html = out.html;
            out.html = NULL;
        } else {
            fuzz_require(err.msg[0] != '\0', "render failed without a message");
        }
        report_output_free(&out);
    }
    report_free(&r);
    return html;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct report_options opt = {0};
    if (size > 0 && data[0] % 4 != 0) /* '{' is 123: 3 in 4, a real result keeps a range */
        opt = (struct report_options){true, data[0] % 4 - 1, data[0] % 4 + 1};
    char *one = render(data, size, &opt);
    char *two = render(data, size, &opt);
    fuzz_require((one == NULL) == (two == NULL), "accepted once, refused once");
    fuzz_require(one == NULL || strcmp(one, two) == 0, "same input, different pages");
    free(one);
    free(two);
    return 0;
}
