/*
 * Fuzz harness for the trace parser (src/trace/parse.c, format.c). The input is a trace: line 1
 * the header, then one trajectory per line. Besides not crashing, every accepted line must
 * format to bytes that parse back and format to the same bytes again, and every error must
 * name the line it was given and a column inside it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checks err points inside a line of len bytes numbered lineno. */
static void check_error(const struct libra_error *err, int64_t lineno, size_t len)
{
    if (err->line != lineno || err->col < 1 || (size_t)err->col > len + 1 || !err->msg[0])
        abort();
}

/* Parses what t formats to and checks it formats to the same bytes. */
static void round_trip(struct trace_parser *again, const struct trace_traj *t, struct trace_text *a,
                       struct trace_text *b)
{
    const struct trace_traj *back;
    a->len = b->len = 0;
    trace_format_traj(a, t);
    if (trace_parser_traj(again, a->data, a->len - 1, 1, &back, NULL) != 0)
        abort();
    trace_format_traj(b, back);
    if (a->len != b->len || memcmp(a->data, b->data, a->len) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size;
    struct trace_parser *p = trace_parser_new("fuzz"), *again = trace_parser_new("again");
    struct trace_text a = {0}, b = {0};
    struct libra_error err;
    for (int64_t lineno = 1; s < end; lineno++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        memset(&err, 0, sizeof err);
        if (lineno == 1) {
            const struct trace_header *h;
            if (trace_parser_header(p, s, len, lineno, &h, &err) == 0) {
                trace_format_header(&a, h);
                const struct trace_header *h2;
                if (trace_parser_header(again, a.data, a.len - 1, 1, &h2, NULL) != 0)
                    abort();
                trace_format_header(&b, h2);
                if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
                    abort();
            } else {
                check_error(&err, lineno, len);
            }
        } else {
            const struct trace_traj *t;
            if (trace_parser_traj(p, s, len, lineno, &t, &err) == 0)
                round_trip(again, t, &a, &b);
            else
                check_error(&err, lineno, len);
        }
        s += len + 1;
    }
    trace_text_free(&a);
    trace_text_free(&b);
    trace_parser_free(p);
    trace_parser_free(again);
    return 0;
}
