/*
 * Fuzz harness for the trace file reader (src/trace/file.c: trace_reader_from_text, its header
 * and records), differential against the line parser it feeds (fuzz_trace checks that one). The
 * input is the file. Besides not crashing or leaking: the reader splits the file into the lines
 * a plain split at '\n' gives, numbered from 1; each line reads as the parser alone reads it
 * (same outcome, same position); a last line without its newline is refused as truncated at its
 * own number; every refusal names the file; the end comes once and then stays.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "trace/file.h"

static void same_error(const struct libra_error *a, const struct libra_error *b)
{
    fuzz_require(a->line == b->line && a->col == b->col && strcmp(a->msg, b->msg) == 0,
                 "the reader and the parser refuse a line differently");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data, *end = text + size;
    struct trace_reader *r = trace_reader_from_text("fuzz.trace", text, size);
    struct trace_parser *p = trace_parser_new("fuzz.trace");
    struct libra_error err, want;
    const char *s = text;
    for (int64_t lineno = 1;; lineno++) {
        memset(&err, 0, sizeof err);
        memset(&want, 0, sizeof want);
        int rc;
        if (lineno == 1) {
            const struct trace_header *h;
            rc = trace_reader_header(r, &h, &err);
            if (s == end) {
                fuzz_require(rc != 0 && err.line == 1, "an empty file has a header");
                break;
            }
        } else {
            const struct trace_traj *t;
            rc = trace_reader_next(r, &t, &err);
            if (s == end) {
                fuzz_require(rc == 0, "a record past the end of the file");
                fuzz_require(trace_reader_next(r, &t, &err) == 0, "a record after the end");
                break;
            }
        }
        fuzz_require(trace_reader_line(r) == lineno, "the reader lost count of the lines");
        fuzz_require(rc >= 0 || strcmp(err.file, "fuzz.trace") == 0,
                     "a refusal not naming the file");
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) {
            fuzz_require(rc < 0 && err.line == lineno && err.col == 1 &&
                             strstr(err.msg, "truncated"),
                         "a last line without its newline is not refused as truncated");
            s = end;
            continue;
        }
        size_t len = (size_t)(nl - s);
        int want_rc;
        if (lineno == 1) {
            const struct trace_header *h;
            want_rc = trace_parser_header(p, s, len, lineno, &h, &want);
            fuzz_require(rc == want_rc, "the reader and the parser disagree on the header");
        } else {
            const struct trace_traj *t;
            want_rc = trace_parser_traj(p, s, len, lineno, &t, &want);
            fuzz_require((rc == 1) == (want_rc == 0),
                         "the reader and the parser disagree on a line");
        }
        if (want_rc != 0)
            same_error(&err, &want);
        s = nl + 1;
    }
    trace_parser_free(p);
    trace_reader_close(r);
    return 0;
}
