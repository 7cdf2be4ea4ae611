/*
 * Fuzz harness for the trace parser (src/trace/parse.c, format.c). The input is a trace: line 1
 * the header, then one trajectory per line. Besides not crashing, every accepted line must
 * format to bytes that parse back and format to the same bytes again, and every error must
 * name the line it was given and a column inside it. The turns an accepted line timed (libra
 * serve's capture) make decode points (cost/timed.c) whose every figure is finite and >= 0.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cost/import.h"
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

static void check_figure(double v)
{
    if (!isfinite(v) || v < 0.0)
        abort();
}

/* The decode points of t's timed turns, as `libra calibrate` makes them from a capture. */
static void timed_points(const struct trace_traj *t)
{
    struct cost_timed_turn *turns = malloc((t->n_turns + 1) * sizeof *turns);
    size_t n = 0, unused;
    for (size_t k = 0; k < t->n_turns; k++) {
        const struct trace_turn *u = &t->turns[k];
        const struct trace_turn_timing *m = &u->timing;
        if (m->tp == 0)
            continue;
        double cached = u->cached_tokens > 0 ? (double)u->cached_tokens : 0.0;
        turns[n++] = (struct cost_timed_turn){
            .instance = m->instance,
            .tp = (int)m->tp,
            .sent_s = (double)m->sent_us * 1e-6,
            .first_s = m->first_us >= 0 ? (double)m->first_us * 1e-6 : -1.0,
            .done_s = (double)m->done_us * 1e-6,
            .prompt_tokens = (double)u->prompt_tokens,
            .uncached_tokens = (double)u->prompt_tokens - cached,
            .generated_tokens = (double)u->generated_tokens,
            .prefill_s = ((double)u->prompt_tokens - cached) * 1e-4};
    }
    struct cost_timed_point *pts;
    size_t k = cost_timed_points(turns, n, 1, &pts, &unused), used = 0;
    for (size_t i = 0; i < k; i++) {
        const struct cost_decode_point *p = &pts[i].point;
        const double figures[] = {p->measured_s,   p->decode_seqs,    p->ctx_tokens,
                                  p->prefill_seqs, p->prefill_tokens, p->prefill_pairs};
        for (size_t j = 0; j < sizeof figures / sizeof figures[0]; j++)
            check_figure(figures[j]);
        if (!(p->measured_s > 0.0 && p->decode_seqs > 0.0))
            abort();
        used += pts[i].turns;
    }
    if (used + unused != n)
        abort();
    free(pts);
    free(turns);
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
            if (trace_parser_traj(p, s, len, lineno, &t, &err) == 0) {
                round_trip(again, t, &a, &b);
                timed_points(t);
            } else
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
