/*
 * Fuzz harness for the trace file reader (src/trace/file.c: trace_reader_from_text, its header
 * and records), differential against the line parser it feeds (fuzz_trace checks that one). The
 * input is the file. Besides not crashing or leaking: the reader splits the file into the lines
 * a plain split at '\n' gives, numbered from 1; each line reads as the parser alone reads it
 * (same outcome, same position), but for a record the parser takes that breaks rule 7 (with a
 * header's group_size N, each run of N records parsed is one step and prompt), which the reader
 * alone refuses; a last line without its newline is refused as truncated at its own number;
 * every refusal names the file; the end comes once and then stays.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "trace/file.h"

/* Rule 7 as the reader applies it: runs of group_size record lines, each run's group its first
 * good record's. */
struct runs {
    int64_t group_size, seen, step, prompt;
    bool known;
};

/* Whether record t (NULL: one the parser refused, which holds its place) keeps its run's step
 * and prompt. */
static bool in_its_run(struct runs *g, const struct trace_traj *t)
{
    if (g->group_size == 0)
        return true;
    if (g->seen++ % g->group_size == 0)
        g->known = false;
    if (!t)
        return true;
    if (!g->known) {
        g->known = true;
        g->step = t->step;
        g->prompt = t->prompt_id;
        return true;
    }
    return t->step == g->step && t->prompt_id == g->prompt;
}

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
    struct runs runs = {0};
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
            runs.group_size = want_rc == 0 ? h->group_size : 0;
        } else {
            const struct trace_traj *t;
            want_rc = trace_parser_traj(p, s, len, lineno, &t, &want);
            bool kept = in_its_run(&runs, want_rc == 0 ? t : NULL) && want_rc == 0;
            fuzz_require((rc == 1) == kept, "the reader and the parser disagree on a line");
            bool rule7 = err.line == lineno && strstr(err.msg, "not the group");
            fuzz_require(want_rc != 0 || kept || rule7,
                         "a record breaking rule 7 is refused otherwise");
        }
        if (want_rc != 0)
            same_error(&err, &want);
        s = nl + 1;
    }
    trace_parser_free(p);
    trace_reader_close(r);
    return 0;
}
