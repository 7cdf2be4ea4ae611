/*
 * The planner's rollout tables and the scoring of one multiset (model in roll.h and
 * docs/planner.md). Building the tables costs a few cost-model calls per (trajectory, TP);
 * scoring a multiset costs one exact Z, a banding, and an O(K·M) pass for the staleness fixed
 * point (async) or O(batches·K·log B) for the batch makespans (colocated).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/roll.h"
#include "util/alloc.h"
#include "util/heap.h"

/* ---- building ------------------------------------------------------------------------------ */

struct rank_key {
    int64_t gen;
    uint32_t idx;
};

static int by_gen(const void *a, const void *b)
{
    const struct rank_key *x = a, *y = b;
    if (x->gen != y->gen)
        return x->gen < y->gen ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sorting ranks by a per-rank key (qsort has no context argument). */
struct keyed_rank {
    double key;
    uint32_t rank;
};

static int by_key(const void *a, const void *b)
{
    const struct keyed_rank *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int64_t at_or(const int64_t *a, size_t i, int64_t dflt)
{
    return a ? a[i] : dflt;
}

/* Seconds to prefill trajectory i's prompt, then its tool returns after a cached context of
 * cbar (one chunk series per return). */
static double prefill_s(const struct cost_rollout_pre *pre, double prompt, double tool,
                        double turns, double cbar, double chunk)
{
    double t = cost_prefill_time(pre, 0.0, prompt, chunk);
    double returns = fmax(turns - 1.0, tool > 0.0 ? 1.0 : 0.0);
    if (returns > 0.0 && tool > 0.0)
        t += returns * cost_prefill_time(pre, cbar, tool / returns, chunk);
    return t;
}

/* The latency of a trajectory that generates gen tokens at iteration time tau, prefills for
 * prefill seconds and waits tool seconds on tools: the one formula of every latency here. */
static double latency_s(double gen, double tau, double prefill, double tool)
{
    return gen * tau + prefill + tool;
}

/* Fills work, latency, prefill and the concurrency limit of every rank on TP slot t. A
 * trajectory holds one of the instance's b slots for its whole latency, tool waits included:
 * 1/b of each decode iteration and of each second it waits, and the whole engine while it
 * prefills. */
static void fill_tp(struct plan_roll *r, int t, const struct plan_sample *s,
                    const struct plan_settings *st)
{
    const struct cost_rollout_pre *pre = &r->pre[t];
    for (size_t k = 0; k < r->m; k++) {
        size_t i = r->idx[k];
        double p = (double)s->prompt_tokens[i], g = r->gen[k];
        double u = (double)at_or(s->tool_tokens, i, 0), ctx = p + g + u;
        if (!r->usable[t] || ctx > pre->kv_capacity_tokens) {
            r->work[t][k] = 0.0;
            r->lat[t][k] = r->prefill[t][k] = INFINITY;
            r->bcap[t][k] = 0.0;
            continue;
        }
        double b =
            fmax(1.0, fmin((double)st->max_seqs, floor(pre->kv_capacity_tokens / r->cbar[k])));
        double tau = cost_decode_time(pre, b, b * r->cbar[k]);
        double pf =
            prefill_s(pre, p, u, (double)at_or(s->turns, i, 1), r->cbar[k], st->chunk_tokens);
        r->bcap[t][k] = b;
        r->prefill[t][k] = pf;
        r->work[t][k] = (g * tau + r->tool_s[k]) / b + pf;
        r->lat[t][k] = latency_s(g, tau, pf, r->tool_s[k]);
    }
}

/* Prefix sums, next-bad positions and relaxation sums of view v over ranks[0..m). */
static void view_build(struct plan_view *v, const struct plan_roll *r, const uint32_t *ranks,
                       size_t m)
{
    v->m = m;
    for (int t = 0; t < PLAN_NTP; t++) {
        v->prefix[t] = xmallocarray(m + 1, sizeof **v->prefix);
        v->next_bad[t] = xmallocarray(m + 1, sizeof **v->next_bad);
        v->prefix[t][0] = 0.0;
        for (size_t k = 0; k < m; k++)
            v->prefix[t][k + 1] = v->prefix[t][k] + r->work[t][ranks[k]];
        v->next_bad[t][m] = (uint32_t)m;
        for (size_t k = m; k-- > 0;)
            v->next_bad[t][k] = isinf(r->lat[t][ranks[k]]) ? (uint32_t)k : v->next_bad[t][k + 1];
    }
    for (unsigned mask = 1; mask < 1u << PLAN_NTP; mask++) {
        double sum = 0.0;
        for (size_t k = 0; k < m; k++) {
            double best = INFINITY;
            for (int t = 0; t < PLAN_NTP; t++)
                if (mask >> t & 1 && !isinf(r->lat[t][ranks[k]]))
                    best = fmin(best, (double)(1 << t) * r->work[t][ranks[k]]);
            sum += best;
        }
        v->wmin[mask] = sum;
    }
}

static void view_free(struct plan_view *v)
{
    for (int t = 0; t < PLAN_NTP; t++) {
        free(v->prefix[t]);
        free(v->next_bad[t]);
    }
}

static void build_batches(struct plan_roll *r)
{
    size_t B = (size_t)r->batch;
    r->branks = xmallocarray(r->batches * B, sizeof *r->branks);
    r->bview = xcalloc(r->batches, sizeof *r->bview);
    uint32_t *rank_of = xmallocarray(r->m, sizeof *rank_of);
    for (size_t k = 0; k < r->m; k++)
        rank_of[r->idx[k]] = (uint32_t)k;
    for (int t = 0; t < PLAN_NTP; t++)
        r->top_lat1[t] = xmallocarray(r->batches, sizeof **r->top_lat1);
    for (size_t b = 0; b < r->batches; b++) {
        uint32_t *ranks = &r->branks[b * B];
        for (size_t k = 0; k < B; k++)
            ranks[k] = rank_of[b * B + k];
        struct keyed_rank *kr = xmallocarray(B, sizeof *kr);
        for (size_t k = 0; k < B; k++)
            kr[k] = (struct keyed_rank){(double)ranks[k], ranks[k]};
        qsort(kr, B, sizeof *kr, by_key);
        for (size_t k = 0; k < B; k++)
            ranks[k] = kr[k].rank;
        free(kr);
        view_build(&r->bview[b], r, ranks, B);
        uint32_t top = ranks[B - 1];
        for (int t = 0; t < PLAN_NTP; t++)
            r->top_lat1[t][b] =
                isinf(r->lat[t][top])
                    ? INFINITY
                    : latency_s(r->gen[top], cost_decode_time(&r->pre[t], 1.0, r->cbar[top]),
                                r->prefill[t][top], r->tool_s[top]);
    }
    free(rank_of);
}

void plan_roll_init(struct plan_roll *r, const struct plan_sample *s, const double *tool_s,
                    const struct cost_shape *sh, const struct spec_hardware *hw,
                    const struct plan_settings *st, int batch, int k1, int gpn)
{
    memset(r, 0, sizeof *r);
    r->m = s->n;
    r->batch = batch;
    r->batches = s->n / (size_t)batch;
    r->k1 = k1;
    struct rank_key *keys = xmallocarray(r->m, sizeof *keys);
    for (size_t i = 0; i < r->m; i++)
        keys[i] = (struct rank_key){s->generated_tokens[i], (uint32_t)i};
    qsort(keys, r->m, sizeof *keys, by_gen);
    r->idx = xmallocarray(r->m, sizeof *r->idx);
    r->gen = xmallocarray(r->m, sizeof *r->gen);
    r->cbar = xmallocarray(r->m, sizeof *r->cbar);
    r->tool_s = xmallocarray(r->m, sizeof *r->tool_s);
    for (size_t k = 0; k < r->m; k++) {
        size_t i = keys[k].idx;
        double p = (double)s->prompt_tokens[i], g = (double)s->generated_tokens[i];
        double u = (double)at_or(s->tool_tokens, i, 0);
        r->idx[k] = (uint32_t)i;
        r->gen[k] = g;
        r->cbar[k] = p + (g + u) / 2.0;
        r->tool_s[k] = tool_s ? tool_s[i] : 0.0;
        r->ctx_max = fmax(r->ctx_max, p + g + u);
    }
    free(keys);

    for (int t = 0; t < PLAN_NTP; t++) {
        int tp = 1 << t;
        bool ok = tp <= gpn && cost_rollout_pre_init(&r->pre[t], sh, hw, &st->rollout, tp) == 0;
        r->usable[t] = ok && r->pre[t].kv_capacity_tokens > 0.0;
        r->fits_all[t] = r->usable[t] && r->ctx_max <= r->pre[t].kv_capacity_tokens;
        r->work[t] = xmallocarray(r->m, sizeof **r->work);
        r->lat[t] = xmallocarray(r->m, sizeof **r->lat);
        r->prefill[t] = xmallocarray(r->m, sizeof **r->prefill);
        r->bcap[t] = xmallocarray(r->m, sizeof **r->bcap);
        fill_tp(r, t, s, st);
        struct keyed_rank *kr = xmallocarray(r->m, sizeof *kr);
        for (size_t k = 0; k < r->m; k++)
            kr[k] = (struct keyed_rank){r->lat[t][k], (uint32_t)k};
        qsort(kr, r->m, sizeof *kr, by_key);
        r->lat_order[t] = xmallocarray(r->m, sizeof **r->lat_order);
        for (size_t k = 0; k < r->m; k++)
            r->lat_order[t][k] = kr[k].rank;
        free(kr);
    }
    uint32_t *all = xmallocarray(r->m, sizeof *all);
    for (size_t k = 0; k < r->m; k++)
        all[k] = (uint32_t)k;
    view_build(&r->all, r, all, r->m);
    free(all);
    build_batches(r);
    r->scratch = xmallocarray(2 * r->m + 1, sizeof *r->scratch);
    r->count = xcalloc(PLAN_NTP * (1 + (1u << PLAN_NTP)), sizeof *r->count);
}

void plan_roll_free(struct plan_roll *r)
{
    for (int t = 0; t < PLAN_NTP; t++) {
        free(r->work[t]);
        free(r->lat[t]);
        free(r->prefill[t]);
        free(r->bcap[t]);
        free(r->lat_order[t]);
        free(r->top_lat1[t]);
    }
    for (unsigned mask = 0; mask < 1u << PLAN_NTP; mask++)
        free(r->lam_min[mask]);
    view_free(&r->all);
    for (size_t b = 0; b < r->batches && r->bview; b++)
        view_free(&r->bview[b]);
    free(r->bview);
    free(r->branks);
    free(r->idx);
    free(r->gen);
    free(r->cbar);
    free(r->tool_s);
    free(r->scratch);
    for (size_t i = 0; r->count && i < PLAN_NTP * (1 + (1u << PLAN_NTP)); i++) {
        free(r->count[i].c);
        free(r->count[i].lam);
    }
    free(r->count);
    memset(r, 0, sizeof *r);
}

/* Each rank's least latency / k1 over the sizes in mask, ascending: the sizes' latency orders
 * merged, every rank taken at its first appearance, which is its least (O(m·|mask|), where
 * sorting the least values took a sort per mask). */
const double *plan_roll_lam_min(struct plan_roll *r, unsigned mask)
{
    if (r->lam_min[mask])
        return r->lam_min[mask];
    double *lam = xmallocarray(r->m + 1, sizeof *lam);
    bool *taken = xcalloc(r->m, sizeof *taken);
    size_t pos[PLAN_NTP] = {0};
    for (size_t n = 0; n < r->m; n++) {
        int pick = __builtin_ctz(mask); /* mask is not empty */
        double least = INFINITY;
        for (int t = pick; t < PLAN_NTP; t++) {
            if (!(mask >> t & 1))
                continue;
            while (taken[r->lat_order[t][pos[t]]]) /* stops below m: a rank is left */
                pos[t]++;
            double v = r->lat[t][r->lat_order[t][pos[t]]] / r->k1;
            if (v < least) {
                pick = t;
                least = v;
            }
        }
        taken[r->lat_order[pick][pos[pick]++]] = true;
        lam[n] = least;
    }
    free(taken);
    r->lam_min[mask] = lam;
    return lam;
}

/* ---- scoring ------------------------------------------------------------------------------- */

static unsigned mask_of(const int c[PLAN_NTP], double cd[PLAN_NTP])
{
    unsigned mask = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        cd[t] = c[t];
        if (c[t] > 0)
            mask |= 1u << t;
    }
    return mask;
}

/* The latencies / k1 of every rank on its band's TP, ascending, into out (m entries): each
 * band's ranks in latency order are a filtered pass over its TP's order, then a K-way merge. */
static void band_latencies(const struct plan_roll *r, const uint32_t lo[PLAN_NTP],
                           const uint32_t hi[PLAN_NTP], double *seg, double *out)
{
    size_t start[PLAN_NTP + 1], pos[PLAN_NTP], n = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        start[t] = n;
        if (lo[t] < hi[t])
            for (size_t k = 0; k < r->m; k++) {
                uint32_t rank = r->lat_order[t][k];
                if (rank >= lo[t] && rank < hi[t])
                    seg[n++] = r->lat[t][rank] / r->k1;
            }
        pos[t] = start[t];
    }
    start[PLAN_NTP] = n;
    for (size_t k = 0; k < n; k++) {
        int best = 0;
        while (pos[best] == start[best + 1]) /* some list has entries left: k < n */
            best++;
        for (int t = best + 1; t < PLAN_NTP; t++)
            if (pos[t] < start[t + 1] && seg[pos[t]] < seg[pos[best]])
                best = t;
        out[k] = seg[pos[best]++];
    }
}

static void score_async(struct plan_roll *r, struct plan_roll_score *out)
{
    double *merged = r->scratch + r->m;
    band_latencies(r, out->lo, out->hi, r->scratch, merged);
    double bz = (double)r->batch * out->z_s;
    out->t_s = plan_fixed_point(merged, r->m, bz);
    size_t accepted = 0;
    while (accepted < r->m && merged[accepted] <= out->t_s)
        accepted++;
    out->f_stale = 1.0 - (double)accepted / (double)r->m;
}

/* First position in ranks[0..n) whose rank is >= key. */
static size_t lower_rank(const uint32_t *ranks, size_t n, uint32_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranks[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Batch b's makespan: per band, the larger of its load and the latency of its longest
 * generation at the concurrency its instances run. */
static double batch_makespan(const struct plan_roll *r, size_t b, const int c[PLAN_NTP],
                             const uint32_t lo[PLAN_NTP], const uint32_t hi[PLAN_NTP],
                             bool with_latency)
{
    const uint32_t *ranks = &r->branks[b * (size_t)r->batch];
    const struct plan_view *v = &r->bview[b];
    double span = 0.0;
    for (int t = 0; t < PLAN_NTP; t++) {
        if (c[t] == 0 || lo[t] == hi[t])
            continue;
        size_t pa = lower_rank(ranks, v->m, lo[t]), pb = lower_rank(ranks, v->m, hi[t]);
        if (pa == pb)
            continue;
        span = fmax(span, (v->prefix[t][pb] - v->prefix[t][pa]) / c[t]);
        if (!with_latency)
            continue;
        uint32_t last = ranks[pb - 1];
        double conc = fmin(ceil((double)(pb - pa) / c[t]), r->bcap[t][last]);
        double tau = cost_decode_time(&r->pre[t], conc, conc * r->cbar[last]);
        span = fmax(span, latency_s(r->gen[last], tau, r->prefill[t][last], r->tool_s[last]));
    }
    return span;
}

void plan_roll_score(struct plan_roll *r, const int c[PLAN_NTP], bool colocated, double z,
                     struct plan_roll_score *out)
{
    double cd[PLAN_NTP];
    unsigned mask = mask_of(c, cd);
    memset(out, 0, sizeof *out);
    out->z_s = isnan(z) ? plan_band_z(&r->all, cd, mask, INFINITY) : z;
    if (isinf(out->z_s)) {
        out->t_s = INFINITY;
        return;
    }
    plan_band_right(&r->all, cd, out->z_s, out->lo, out->hi);
    if (!colocated) {
        score_async(r, out);
        return;
    }
    double sum = 0.0;
    for (size_t b = 0; b < r->batches; b++)
        sum += batch_makespan(r, b, c, out->lo, out->hi, true);
    out->t_s = sum / (double)r->batches;
}

/* Latency / k1 of rank k on TP t, or its least over the sizes of cls up to t (cls 0: exact). */
static double lam_of(const struct plan_roll *r, unsigned cls, int t, size_t k)
{
    if (cls == 0)
        return r->lat[t][k] / r->k1;
    double best = INFINITY;
    for (int u = 0; u <= t; u++)
        if (cls >> u & 1)
            best = fmin(best, r->lat[u][k] / r->k1);
    return best;
}

/* The prefix counts of (cls, t) at theta, rebuilt when needed. */
static const uint32_t *counts_at(struct plan_roll *r, unsigned cls, int t, double theta,
                                 bool strict)
{
    struct plan_count *pc = &r->count[cls * PLAN_NTP + (unsigned)t];
    if (pc->valid && pc->theta == theta && pc->strict == strict)
        return pc->c;
    if (!pc->c) {
        pc->c = xmallocarray(r->m + 1, sizeof *pc->c);
        pc->lam = xmallocarray(r->m, sizeof *pc->lam);
        for (size_t k = 0; k < r->m; k++)
            pc->lam[k] = lam_of(r, cls, t, k);
    }
    pc->c[0] = 0;
    for (size_t k = 0; k < r->m; k++)
        pc->c[k + 1] = pc->c[k] + (strict ? pc->lam[k] < theta : pc->lam[k] <= theta);
    pc->valid = true;
    pc->theta = theta;
    pc->strict = strict;
    return pc->c;
}

static size_t accepted(struct plan_roll *r, unsigned cls, const uint32_t lo[PLAN_NTP],
                       const uint32_t hi[PLAN_NTP], double theta, bool strict)
{
    size_t n = 0;
    for (int t = 0; t < PLAN_NTP; t++)
        if (lo[t] < hi[t]) {
            const uint32_t *c = counts_at(r, cls, t, theta, strict);
            n += c[hi[t]] - c[lo[t]];
        }
    return n;
}

size_t plan_roll_accepted(struct plan_roll *r, const uint32_t lo[PLAN_NTP],
                          const uint32_t hi[PLAN_NTP], double theta, bool strict)
{
    return accepted(r, 0, lo, hi, theta, strict);
}

size_t plan_roll_accepted_bound(struct plan_roll *r, unsigned cls, const uint32_t lo[PLAN_NTP],
                                const uint32_t hi[PLAN_NTP], double theta, bool strict)
{
    return accepted(r, cls, lo, hi, theta, strict);
}

double plan_roll_stale(const struct plan_roll *r, const struct plan_roll_score *s, double t_s)
{
    size_t stale = 0;
    for (int t = 0; t < PLAN_NTP; t++)
        for (uint32_t k = s->lo[t]; k < s->hi[t]; k++)
            stale += r->lat[t][k] / r->k1 > t_s;
    return (double)stale / (double)r->m;
}

double plan_roll_banded(const struct plan_roll *r, const int c[PLAN_NTP],
                        const struct plan_roll_score *s)
{
    double sum = 0.0;
    for (size_t b = 0; b < r->batches; b++)
        sum += batch_makespan(r, b, c, s->lo, s->hi, false);
    return sum / (double)r->batches;
}

/* ---- the reference's greedy longest-first estimate ------------------------------------------ */

struct inst {
    double busy_s;
    uint32_t id;
};

static int inst_cmp(const void *a, const void *b, void *ctx)
{
    const struct inst *x = a, *y = b;
    (void)ctx;
    if (x->busy_s != y->busy_s)
        return x->busy_s < y->busy_s ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* One batch: each trajectory, longest generation first, to the instance that would finish it
 * earliest among the TP sizes whose KV holds it (the least busy of each size is the candidate
 * of that size). Returns the largest instance total. */
static double greedy_batch(const struct plan_roll *r, size_t b, const int c[PLAN_NTP],
                           struct heap h[PLAN_NTP])
{
    uint32_t id = 0;
    double most = 0.0;
    for (int t = 0; t < PLAN_NTP; t++) {
        heap_clear(&h[t]);
        for (int k = 0; k < c[t]; k++)
            heap_push(&h[t], &(struct inst){0.0, id++});
    }
    const uint32_t *ranks = &r->branks[b * (size_t)r->batch];
    for (size_t k = (size_t)r->batch; k-- > 0;) {
        uint32_t rank = ranks[k];
        int best = -1;
        double best_end = INFINITY;
        for (int t = 0; t < PLAN_NTP; t++) {
            const struct inst *top = heap_peek(&h[t]);
            if (top && !isinf(r->lat[t][rank]) && top->busy_s + r->work[t][rank] < best_end) {
                best_end = top->busy_s + r->work[t][rank];
                best = t;
            }
        }
        if (best < 0)
            return INFINITY;
        struct inst it;
        heap_pop(&h[best], &it);
        it.busy_s += r->work[best][rank];
        most = fmax(most, it.busy_s);
        heap_push(&h[best], &it);
    }
    return most;
}

double plan_roll_greedy(const struct plan_roll *r, const int c[PLAN_NTP])
{
    struct heap h[PLAN_NTP];
    for (int t = 0; t < PLAN_NTP; t++)
        heap_init(&h[t], sizeof(struct inst), inst_cmp, NULL);
    double sum = 0.0;
    for (size_t b = 0; b < r->batches; b++)
        sum += greedy_batch(r, b, c, h);
    for (int t = 0; t < PLAN_NTP; t++)
        heap_free(&h[t]);
    return sum / (double)r->batches;
}
