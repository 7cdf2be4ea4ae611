/*
 * Decode points from turns a gateway timed (import.h, docs/calibrate.md "libra serve
 * captures").
 *
 * An engine's turns are replayed in order of sending: each is prefilled first come first
 * served (at its streamed first chunk when it streamed; else when the prompts before it and
 * its own, at the model's prefill time, are done), then decodes until its answer ends. A
 * turn's window — from its first chunk when it streamed, else from its sending, to its end —
 * saw the turns decoding then and the prefills done then. The count of turns decoding and the
 * sum of their contexts are step functions of time; their integrals at every event, and the
 * prefills' running sums in order of time, give each window's means by binary searches, so n
 * turns cost O(n log n).
 */
#include "cost/import.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/sort.h"

/* A turn's context while it decodes: its prompt and half of what it generates. */
static double turn_ctx(const struct cost_timed_turn *t)
{
    return t->prompt_tokens + 0.5 * t->generated_tokens;
}

struct event {
    double t, a, b; /* time; what changes then */
};

static int by_time(const void *x, const void *y)
{
    double p = ((const struct event *)x)->t, q = ((const struct event *)y)->t;
    return (p > q) - (p < q);
}

/* ---- one engine --------------------------------------------------------------------------- */

/* One engine's replay. */
struct engine {
    /* turns decoding: at each event time, the integrals since the first event of their count
     * and of their contexts' sum, and the two values just after it */
    double *t, *count_int, *ctx_int, *count, *ctx;
    size_t n;
    /* prefills in order of their end: the times, and running sums (over the first k) of the
     * prompts, their tokens and their attention pairs */
    double *pt, *prompts, *tokens, *pairs;
    size_t np;
};

/* When turn t's prefill ends, first come first served after the previous one ended at
 * *queue_s (advanced): its first chunk when it streamed. */
static double prefill_end(const struct cost_timed_turn *t, double *queue_s)
{
    double end = t->first_s >= 0.0 ? t->first_s : fmax(t->sent_s, *queue_s) + t->prefill_s;
    end = fmin(end, t->done_s);
    *queue_s = fmax(*queue_s, end);
    return end;
}

static void decoding_build(struct engine *e, const struct event *ev, size_t n)
{
    e->n = n;
    e->t = xmallocarray(n, sizeof *e->t);
    e->count_int = xmallocarray(n, sizeof *e->count_int);
    e->ctx_int = xmallocarray(n, sizeof *e->ctx_int);
    e->count = xmallocarray(n, sizeof *e->count);
    e->ctx = xmallocarray(n, sizeof *e->ctx);
    double count = 0.0, ctx = 0.0, ci = 0.0, xi = 0.0;
    for (size_t k = 0; k < n; k++) {
        if (k > 0) {
            ci += count * (ev[k].t - ev[k - 1].t);
            xi += ctx * (ev[k].t - ev[k - 1].t);
        }
        count += ev[k].a;
        ctx += ev[k].b;
        e->t[k] = ev[k].t;
        e->count_int[k] = ci;
        e->ctx_int[k] = xi;
        e->count[k] = count;
        e->ctx[k] = ctx;
    }
}

static void prefills_build(struct engine *e, const struct event *ev, size_t n)
{
    e->np = n;
    e->pt = xmallocarray(n ? n : 1, sizeof *e->pt);
    e->prompts = xmallocarray(n + 1, sizeof *e->prompts);
    e->tokens = xmallocarray(n + 1, sizeof *e->tokens);
    e->pairs = xmallocarray(n + 1, sizeof *e->pairs);
    e->prompts[0] = e->tokens[0] = e->pairs[0] = 0.0;
    for (size_t k = 0; k < n; k++) {
        e->pt[k] = ev[k].t;
        e->prompts[k + 1] = e->prompts[k] + 1.0;
        e->tokens[k + 1] = e->tokens[k] + ev[k].a;
        e->pairs[k + 1] = e->pairs[k] + ev[k].b;
    }
}

/* Replays the engine's turns (idx, in order of sending); pend[k] gets turn idx[k]'s prefill
 * end. */
static void engine_build(struct engine *e, const struct cost_timed_turn *turns, const size_t *idx,
                         size_t n, double *pend)
{
    struct event *dec = xmallocarray(2 * n, sizeof *dec), *pre = xmallocarray(n, sizeof *pre);
    double queue_s = -INFINITY;
    for (size_t k = 0; k < n; k++) {
        const struct cost_timed_turn *t = &turns[idx[k]];
        double u = t->uncached_tokens, cached = t->prompt_tokens - u;
        pend[k] = prefill_end(t, &queue_s);
        dec[2 * k] = (struct event){pend[k], 1.0, turn_ctx(t)};
        dec[2 * k + 1] = (struct event){t->done_s, -1.0, -turn_ctx(t)};
        pre[k] = (struct event){pend[k], u, u * (cached + (u + 1.0) / 2.0)};
    }
    qsort(dec, 2 * n, sizeof *dec, by_time);
    qsort(pre, n, sizeof *pre, by_time);
    decoding_build(e, dec, 2 * n);
    prefills_build(e, pre, n);
    free(dec);
    free(pre);
}

static void engine_free(struct engine *e)
{
    double *arrays[] = {e->t,  e->count_int, e->ctx_int, e->count, e->ctx,
                        e->pt, e->prompts,   e->tokens,  e->pairs};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
}

/* The integrals of the decoding count and context sum from the first event to x. */
static void decoding_at(const struct engine *e, double x, double *count_int, double *ctx_int)
{
    size_t k = sort_upper_bound(e->t, e->n, x); /* events at or before x: [0, k) */
    if (k == 0) {
        *count_int = *ctx_int = 0.0;
        return;
    }
    k--;
    *count_int = e->count_int[k] + e->count[k] * (x - e->t[k]);
    *ctx_int = e->ctx_int[k] + e->ctx[k] * (x - e->t[k]);
}

/* The prefills ending in [a, b] (in (a, b] when after): prompts, tokens, pairs. */
static void prefills_in(const struct engine *e, double a, double b, bool after, double out[3])
{
    size_t lo = sort_bound(e->pt, e->np, a, after), hi = sort_upper_bound(e->pt, e->np, b);
    if (hi < lo)
        hi = lo;
    out[0] = e->prompts[hi] - e->prompts[lo];
    out[1] = e->tokens[hi] - e->tokens[lo];
    out[2] = e->pairs[hi] - e->pairs[lo];
}

/* ---- turns into bands --------------------------------------------------------------------- */

/* One turn's window as the decode point reads it. */
struct window {
    int tp, band; /* band: the mean decode batch in [2^band, 2^(band + 1)) */
    double iterations, span_s, batch, ctx_sum, prefill[3];
};

/*
 * The window of turn t (its prefill ending at pend) on engine e, or false when it times no
 * iteration. Streamed: from the first chunk, one iteration per further token, the prefills
 * after it. Not streamed: from the sending, one iteration per token and one per prompt
 * prefilled ahead of it (it waits those out), every prefill in it, its own included.
 */
static bool window_of(const struct cost_timed_turn *t, double pend, const struct engine *e,
                      struct window *w)
{
    bool streamed = t->first_s >= 0.0;
    double a = streamed ? t->first_s : t->sent_s, b = t->done_s;
    prefills_in(e, a, b, streamed, w->prefill);
    w->iterations = t->generated_tokens - 1.0;
    if (!streamed) {
        double ahead[3];
        prefills_in(e, a, pend, false, ahead);
        w->iterations += ahead[0]; /* its own among them: the iteration of its first token */
    }
    w->span_s = b - a;
    if (w->iterations < 1.0 || !(w->span_s > 0.0))
        return false;
    double ca, xa, cb, xb;
    decoding_at(e, a, &ca, &xa);
    decoding_at(e, b, &cb, &xb);
    w->tp = t->tp;
    w->batch = (cb - ca) / w->span_s;
    w->ctx_sum = fmax(0.0, (xb - xa) / w->span_s); /* rounding may leave it just below 0 */
    w->band = w->batch < 1.0 ? 0 : (int)floor(log2(w->batch));
    return w->batch > 0.0;
}

/* A turn's place in the order engine by engine, each engine's in order of sending. */
struct keyed {
    int64_t instance;
    double sent_s;
    size_t i;
};

static int by_engine_then_sent(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->instance != y->instance)
        return (x->instance > y->instance) - (x->instance < y->instance);
    if (x->sent_s != y->sent_s)
        return (x->sent_s > y->sent_s) - (x->sent_s < y->sent_s);
    return (x->i > y->i) - (x->i < y->i);
}

/* The windows of every turn that times an iteration, engine by engine; *n_out of them. */
static struct window *windows_of(const struct cost_timed_turn *turns, size_t n, size_t *n_out)
{
    struct keyed *key = xmallocarray(n ? n : 1, sizeof *key);
    for (size_t i = 0; i < n; i++)
        key[i] = (struct keyed){turns[i].instance, turns[i].sent_s, i};
    qsort(key, n, sizeof *key, by_engine_then_sent);
    size_t *idx = xmallocarray(n ? n : 1, sizeof *idx);
    double *pend = xmallocarray(n ? n : 1, sizeof *pend);
    for (size_t i = 0; i < n; i++)
        idx[i] = key[i].i;
    struct window *w = xmallocarray(n ? n : 1, sizeof *w);
    size_t m = 0;
    for (size_t from = 0, to; from < n; from = to) {
        for (to = from + 1; to < n && key[to].instance == key[from].instance; to++)
            ;
        struct engine e;
        engine_build(&e, turns, idx + from, to - from, pend + from);
        for (size_t k = from; k < to; k++)
            m += window_of(&turns[idx[k]], pend[k], &e, &w[m]);
        engine_free(&e);
    }
    free(pend);
    free(idx);
    free(key);
    *n_out = m;
    return w;
}

static int by_band(const void *a, const void *b)
{
    const struct window *x = a, *y = b;
    if (x->tp != y->tp)
        return (x->tp > y->tp) - (x->tp < y->tp);
    return (x->band > y->band) - (x->band < y->band);
}

/* The decode point of windows w[0..n) (one TP, one band): iteration-weighted means. */
static void band_point(const struct window *w, size_t n, struct cost_timed_point *out)
{
    double it = 0.0, span = 0.0, batch = 0.0, ctx = 0.0, pre[3] = {0.0, 0.0, 0.0};
    for (size_t k = 0; k < n; k++) {
        it += w[k].iterations;
        span += w[k].span_s;
        batch += w[k].batch * w[k].iterations;
        ctx += w[k].ctx_sum * w[k].iterations;
        for (int j = 0; j < 3; j++)
            pre[j] += w[k].prefill[j];
    }
    memset(out, 0, sizeof *out);
    out->turns = n;
    out->batch_lo = ldexp(1.0, w[0].band);
    out->batch_hi = ldexp(1.0, w[0].band + 1);
    out->point.kind = COST_DECODE_SERVING;
    out->point.tp = w[0].tp;
    out->point.measured_s = span / it;
    out->point.decode_seqs = batch / it;
    out->point.ctx_tokens = ctx / batch;
    out->point.prefill_seqs = pre[0] / it;
    out->point.prefill_tokens = pre[1] / it;
    out->point.prefill_pairs = pre[2] / it;
}

size_t cost_timed_points(const struct cost_timed_turn *turns, size_t n, size_t min_turns,
                         struct cost_timed_point **out, size_t *unused)
{
    size_t m;
    struct window *w = windows_of(turns, n, &m);
    qsort(w, m, sizeof *w, by_band);
    struct cost_timed_point *pts = xmallocarray(m ? m : 1, sizeof *pts);
    size_t k = 0;
    *unused = n - m;
    for (size_t from = 0, to; from < m; from = to) {
        for (to = from + 1; to < m && by_band(&w[to], &w[from]) == 0; to++)
            ;
        if (to - from < min_turns)
            *unused += to - from;
        else
            band_point(w + from, to - from, &pts[k++]);
    }
    free(w);
    *out = pts;
    return k;
}
