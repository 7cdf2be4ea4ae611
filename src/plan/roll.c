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
#include "plan/sampling.h"
#include "util/alloc.h"
#include "util/stats.h"
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
            r->lat[t][k] = r->prefill[t][k] = r->reprefill[t][k] = r->lat1[t][k] = INFINITY;
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
        r->reprefill[t][k] = cost_prefill_time(pre, 0.0, r->cbar[k], st->chunk_tokens);
        r->lat1[t][k] = latency_s(g, cost_decode_time(pre, 1.0, r->cbar[k]), pf, r->tool_s[k]);
        r->work[t][k] = (g * tau + r->tool_s[k]) / b + pf;
        r->lat[t][k] = latency_s(g, tau, pf, r->tool_s[k]);
    }
}

/* Prefix sums, next-bad positions and relaxation sums of view v over ranks[0..m). */
static void view_build(struct plan_view *v, const struct plan_roll *r, const uint32_t *ranks,
                       size_t m)
{
    v->m = m;
    v->gen_prefix = xmallocarray(m + 1, sizeof *v->gen_prefix);
    v->gen_prefix[0] = 0.0;
    for (size_t k = 0; k < m; k++)
        v->gen_prefix[k + 1] = v->gen_prefix[k] + r->gen[ranks[k]];
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
    free(v->gen_prefix);
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

double plan_kept_share(const struct plan_sample *s, const bool *filtered)
{
    size_t kept = 0;
    for (size_t i = 0; i < s->n; i++)
        kept += !filtered || !filtered[i];
    return (double)kept / (double)s->n;
}

void plan_roll_job_init(struct plan_roll_job *j, const struct plan_problem *p,
                        const struct cost_shape *sh)
{
    const struct libra_config *cfg = p->cfg;
    const struct spec_rl_config *rl = &cfg->rl;
    const struct plan_settings *st = p->settings;
    struct cost_weight_update u;
    /* the fleet sits off the node of the trainer's rank 0 unless the cluster is one node */
    cost_weight_update(&st->lifecycle, sh, p->hw, rl->transport,
                       cfg->cluster.gpus > cfg->cluster.gpus_per_node, &u);
    *j = (struct plan_roll_job){
        .batch = rl->batch_trajectories,
        .k1 = rl->max_staleness + 1,
        .gpn = cfg->cluster.gpus_per_node,
        .samples = rl->samples,
        .interval = rl->sync_interval,
        .drain = rl->sync_mode == SPEC_SYNC_DRAIN,
        .kept_share = plan_kept_share(&p->sample, p->filtered),
        .save_s = u.save_s,
        .transfer_s = u.transfer_s,
        .train_add_s = (u.save_s + (u.trainer_transfers ? u.transfer_s : 0.0)) / rl->sync_interval,
        .pool_s = p->pool_s,
    };
    plan_sampling_from_config(&j->sampling, cfg);
    double groups = (double)j->batch / j->samples;
    j->last_generations =
        plan_regenerations(j->interval * groups, j->k1 * groups, j->kept_share, 0);
}

void plan_roll_init(struct plan_roll *r, const struct plan_sample *s, const double *tool_s,
                    const bool *filtered, const struct cost_shape *sh,
                    const struct spec_hardware *hw, const struct plan_settings *st,
                    const struct plan_roll_job *j)
{
    memset(r, 0, sizeof *r);
    r->m = s->n;
    r->job = *j;
    r->batch = j->batch;
    r->per_step = (double)j->batch / j->kept_share;
    r->rounds = plan_expected_rounds(&j->sampling, j->kept_share);
    r->batches = s->n / (size_t)j->batch;
    r->k1 = j->k1;
    int gpn = j->gpn;
    struct rank_key *keys = xmallocarray(r->m, sizeof *keys);
    for (size_t i = 0; i < r->m; i++)
        keys[i] = (struct rank_key){s->generated_tokens[i], (uint32_t)i};
    qsort(keys, r->m, sizeof *keys, by_gen);
    r->idx = xmallocarray(r->m, sizeof *r->idx);
    r->gen = xmallocarray(r->m, sizeof *r->gen);
    r->cbar = xmallocarray(r->m, sizeof *r->cbar);
    r->tool_s = xmallocarray(r->m, sizeof *r->tool_s);
    r->turns = xmallocarray(r->m, sizeof *r->turns);
    for (size_t k = 0; k < r->m; k++) {
        size_t i = keys[k].idx;
        double p = (double)s->prompt_tokens[i], g = (double)s->generated_tokens[i];
        double u = (double)at_or(s->tool_tokens, i, 0);
        r->idx[k] = (uint32_t)i;
        r->gen[k] = g;
        r->cbar[k] = p + (g + u) / 2.0;
        r->tool_s[k] = tool_s ? tool_s[i] : 0.0;
        r->turns[k] = (double)at_or(s->turns, i, 1);
        if (filtered && j->kept_share < 1.0) {
            if (!r->dropped)
                r->dropped = xcalloc(r->m, sizeof *r->dropped);
            r->dropped[k] = filtered[i];
        }
        r->ctx_max = fmax(r->ctx_max, p + g + u);
    }
    free(keys);
    r->max_seqs = st->max_seqs;
    r->gc_prefix = xmallocarray(r->m + 1, sizeof *r->gc_prefix);
    r->gc_prefix[0] = 0.0;
    for (size_t k = 0; k < r->m; k++)
        r->gc_prefix[k + 1] = r->gc_prefix[k] + r->gen[k] * r->cbar[k];

    for (int t = 0; t < PLAN_NTP; t++) {
        int tp = 1 << t;
        bool ok = tp <= gpn && cost_rollout_pre_init(&r->pre[t], sh, hw, &st->rollout, tp) == 0;
        r->usable[t] = ok && r->pre[t].kv_capacity_tokens > 0.0;
        r->fits_all[t] = r->usable[t] && r->ctx_max <= r->pre[t].kv_capacity_tokens;
        r->work[t] = xmallocarray(r->m, sizeof **r->work);
        r->lat[t] = xmallocarray(r->m, sizeof **r->lat);
        r->prefill[t] = xmallocarray(r->m, sizeof **r->prefill);
        r->bcap[t] = xmallocarray(r->m, sizeof **r->bcap);
        r->reprefill[t] = xmallocarray(r->m, sizeof **r->reprefill);
        r->lat1[t] = xmallocarray(r->m, sizeof **r->lat1);
        fill_tp(r, t, s, st);
        r->prefill_prefix[t] = xmallocarray(r->m + 1, sizeof **r->prefill_prefix);
        r->prefill_prefix[t][0] = 0.0;
        for (size_t k = 0; k < r->m; k++)
            r->prefill_prefix[t][k + 1] = r->prefill_prefix[t][k] + r->prefill[t][k];
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
    r->scratch = xmallocarray(3 * r->m + 1, sizeof *r->scratch);
    for (unsigned cls = 0; cls < 1u << PLAN_NTP; cls++)
        r->tail_lb[cls] = NAN;
    r->count = xcalloc(PLAN_NTP * (1 + (1u << PLAN_NTP)), sizeof *r->count);
}

void plan_roll_free(struct plan_roll *r)
{
    for (int t = 0; t < PLAN_NTP; t++) {
        free(r->work[t]);
        free(r->lat[t]);
        free(r->prefill[t]);
        free(r->bcap[t]);
        free(r->reprefill[t]);
        free(r->lat1[t]);
        free(r->lat_order[t]);
        free(r->top_lat1[t]);
        free(r->prefill_prefix[t]);
    }
    for (unsigned mask = 0; mask < 1u << PLAN_NTP; mask++) {
        free(r->lam_min[mask]);
        free(r->tail_ranks[mask]);
    }
    free(r->turn_ranks);
    free(r->dropped);
    view_free(&r->all);
    for (size_t b = 0; b < r->batches && r->bview; b++)
        view_free(&r->bview[b]);
    free(r->bview);
    free(r->branks);
    free(r->idx);
    free(r->gen);
    free(r->cbar);
    free(r->gc_prefix);
    free(r->tool_s);
    free(r->turns);
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rearranges x[a..m) so that x[k] holds the value of rank k and none before it is larger nor
 * after it smaller (util/stats.h's quickselect on the range). */
static void select_rank(double *x, size_t a, size_t m, size_t k)
{
    stats_select(x + a, m - a, k - a);
}

/*
 * What earlier selections left known of an array x[0..m) that several order statistics are read
 * from: a split (every value before a at most every value from a on) and a sorted top (x[b..m)
 * ascending, every value before b at most x[b]). Each read selects only within what is not yet
 * known; the values read are the order statistics themselves, whatever the arrangement.
 */
struct ordered {
    double *x;
    size_t m, a, b;
};

static void ord_init(struct ordered *o, double *x, size_t m)
{
    *o = (struct ordered){.x = x, .m = m, .a = 0, .b = m};
}

/* Makes x[lo..m) ascending (it then holds ranks lo..m − 1). */
static void ord_sort_from(struct ordered *o, size_t lo)
{
    if (lo >= o->b)
        return;
    if (lo >= o->a) {
        select_rank(o->x, o->a, o->b, lo);
        qsort(o->x + lo, o->b - lo, sizeof *o->x, cmp_double);
    } else {
        select_rank(o->x, 0, o->a, lo);
        qsort(o->x + lo, o->a - lo, sizeof *o->x, cmp_double);
        qsort(o->x + o->a, o->b - o->a, sizeof *o->x, cmp_double);
    }
    o->a = o->b = lo;
}

/* The value of rank k (0-based). */
static double ord_value(struct ordered *o, size_t k)
{
    if (k >= o->b)
        return o->x[k];
    if (k >= o->a) {
        select_rank(o->x, o->a, o->b, k);
        o->a = k;
    } else {
        select_rank(o->x, 0, o->a, k);
    }
    return o->x[k];
}

/* The first rank of m values that weighs in the expected largest of n draws (with
 * replacement): the values below rank m·e^(−40/n) together weigh less than e^−40. */
static size_t weighed_from(size_t m, double n)
{
    size_t lo = (size_t)floor((double)m * exp(-40.0 / n));
    return lo < m ? lo : m - 1;
}

/* The expected largest of n draws from m values whose ranks lo.. m − 1 (lo = weighed_from) are
 * top[0.. m − lo), ascending. */
static double max_of_top(const double *top, size_t lo, size_t m, double n)
{
    double e = 0.0, below = pow((double)lo / (double)m, n);
    for (size_t i = lo; i < m; i++) {
        double cdf = pow((double)(i + 1) / (double)m, n);
        e += top[i - lo] * (cdf - below);
        below = cdf;
    }
    return e;
}

/* The expected largest of n draws (with replacement) from the m values of o: only the values
 * that weigh are sorted. */
static double ord_expected_max(struct ordered *o, double n)
{
    size_t lo = weighed_from(o->m, n);
    ord_sort_from(o, lo);
    return max_of_top(o->x + lo, lo, o->m, n);
}

/* The expected largest of n draws from the m values x (rearranged). */
static double expected_max(double *x, size_t m, double n)
{
    struct ordered o;
    ord_init(&o, x, m);
    return ord_expected_max(&o, n);
}

/* Trajectories per admission: interval·B'. */
static double admission(const struct plan_roll *r)
{
    return (double)r->job.interval * r->per_step;
}

/* How band t's instances run in the window: each starts an admission with b0 sequences (the
 * admission's trajectories in the band's share) that finish over the life of the band's longest
 * generation, so the decode batch it sees averages b0 · decay — or the instance's limit, which
 * its queue keeps full while b0 · decay exceeds it: every rank sees that batch of the band's
 * sequences, its own context among them. */
struct band_run {
    double b0, decay;
    double prefill_s;   /* the band's mean prefill per trajectory on its TP */
    double cbar;        /* the band's resident context per sequence, weighted by generated
                         * tokens (a sequence's share of the iterations), tokens */
    double batch;       /* max(1, b0 · decay), at most the band's KV and scheduler limits */
    double tau0, tau_c; /* the decode iteration there: tau0 + tau_c · context tokens */
};

/* Band [lo, hi) of TP slot t with c[t] instances. Its sums of generated tokens and prefill
 * seconds are taken rank by rank from lo, the prefix sums' own order, so a band from rank 0
 * reads them off the prefix sums bit for bit; its longest generation is its last (ranks are
 * sorted by generated tokens). */
static struct band_run band_run(const struct plan_roll *r, const double c[PLAN_NTP], uint32_t lo,
                                uint32_t hi, int t)
{
    struct band_run run = {.decay = 1.0}; /* an empty band's instances run alone */
    if (c[t] == 0)
        return run;
    double limit = INFINITY;
    if (lo < hi) {
        double gsum = r->all.gen_prefix[hi], pf = r->prefill_prefix[t][hi], n = hi - lo;
        double gc = r->gc_prefix[hi];
        if (lo > 0) {
            gsum = pf = gc = 0.0;
            for (uint32_t k = lo; k < hi; k++) {
                gsum += r->gen[k];
                pf += r->prefill[t][k];
                gc += r->gen[k] * r->cbar[k];
            }
        }
        run = (struct band_run){.b0 = admission(r) * n / (double)r->m / c[t],
                                .decay = gsum / (n * r->gen[hi - 1]),
                                .prefill_s = pf / n,
                                .cbar = gc / gsum};
        limit = fmin(r->max_seqs, floor(r->pre[t].kv_capacity_tokens / run.cbar));
    }
    run.batch = fmax(1.0, fmin(run.b0 * run.decay, limit));
    cost_decode_line(&r->pre[t], run.batch, &run.tau0, &run.tau_c);
    return run;
}

static void band_runs(const struct plan_roll *r, const double c[PLAN_NTP],
                      const uint32_t lo[PLAN_NTP], const uint32_t hi[PLAN_NTP],
                      struct band_run run[PLAN_NTP])
{
    for (int t = 0; t < PLAN_NTP; t++)
        run[t] = band_run(r, c, lo[t], hi[t], t);
}

/* Rank k's decode iteration in band run u: the band's batch, its own context and the others'
 * at the band's. */
static double run_tau(const struct plan_roll *r, const struct band_run *u, size_t k)
{
    return u->tau0 + u->tau_c * ((u->batch - 1.0) * u->cbar + r->cbar[k]);
}

/* The smallest TP of the fleet (counts c, lowest its smallest size) that holds rank k's
 * context: where C-MLFQ starts it (docs/routing.md), and, measured, keeps most long ones. */
static int routed_tp(const struct plan_roll *r, const double c[PLAN_NTP], int lowest, size_t k)
{
    int u = lowest;
    while (isinf(r->lat[u][k]) || c[u] == 0) /* stops at rank k's band's TP at the latest */
        u++;
    return u;
}

/* Rank k's tail latency on its routed TP u, whose band runs as run at decode iteration tau
 * (run_tau): it waits too while the trajectories beside it prefill. */
static double tail_latency(const struct plan_roll *r, const struct band_run *run, int u, size_t k,
                           double tau)
{
    double beside = fmax(0.0, fmin(run->b0, r->bcap[u][k]) - 1.0) * run->prefill_s;
    return latency_s(r->gen[k], tau, r->prefill[u][k] + beside, r->tool_s[k]);
}

/* What one pass over a multiset's ranks gives the async terms. */
struct window_pass {
    double lat_sum;   /* running latencies on their own band's TP, s */
    double cap;       /* sequences the fleet holds at its KV and scheduler limits */
    double load;      /* the larger of the banded load Z and the routed one, s */
    double reprefill; /* per update: the band slowest to prefill its carried-over
                       * contexts again, s */
    double *tail;     /* by rank: latency where C-MLFQ starts it, s (scratch) */
    double *turn;     /* by rank: one turn's decode, s (scratch) */
};

/*
 * Runs each rank at its band's running batch: its latency there (Little's law), one turn's
 * decode (the drain) and its re-prefill (carried trajectories after an update); and, on its
 * routed TP (routed_tp), its tail latency and its work.
 */
static void pass_ranks(const struct plan_roll *r, const double c[PLAN_NTP],
                       const struct plan_roll_score *out, double carried, struct window_pass *w)
{
    struct band_run run[PLAN_NTP];
    band_runs(r, c, out->lo, out->hi, run);
    double routed[PLAN_NTP] = {0}; /* instance-seconds */
    int lowest = 0;
    while (c[lowest] == 0) /* c has an instance */
        lowest++;
    for (int t = lowest; t < PLAN_NTP; t++) {
        double rp = 0.0, n = out->hi[t] - out->lo[t];
        for (uint32_t k = out->lo[t]; k < out->hi[t]; k++) {
            w->cap += r->bcap[t][k] * c[t] / n;
            double tau = run_tau(r, &run[t], k);
            w->lat_sum += latency_s(r->gen[k], tau, r->prefill[t][k], r->tool_s[k]);
            w->turn[k] = r->gen[k] / r->turns[k] * tau;
            rp += r->reprefill[t][k];
            int u = routed_tp(r, c, lowest, k);
            w->tail[k] = tail_latency(r, &run[u], u, k, u == t ? tau : run_tau(r, &run[u], k));
            routed[u] += r->work[u][k];
        }
        if (n > 0)
            w->reprefill = fmax(w->reprefill, carried * rp / (double)r->m / c[t]);
    }
    w->load = out->z_s;
    for (int t = lowest; t < PLAN_NTP; t++)
        w->load = c[t] > 0 ? fmax(w->load, routed[t] / c[t]) : w->load;
}

double plan_roll_batch_train_s(const struct plan_roll_job *j, double train_s, const double *order,
                               int i)
{
    return order ? (train_s - j->train_add_s) * order[i - 1] + j->train_add_s : train_s;
}

/* Under dynamic sampling, a group's slowest trajectory: the expected largest of rl.samples
 * tail latencies (by rank) of the sample's dropped trajectories, and of its kept ones. The
 * groups it drops (all rewards equal) are mostly all wrong, the long ones, so a place waits
 * longer for a group it then drops than for one it keeps. Uses the scratch past tail and turn. */
struct group_slowest {
    double dropped_s, kept_s;
};

static struct group_slowest group_slowest(const struct plan_roll *r, const double *tail)
{
    double *x = r->scratch + 2 * r->m;
    size_t nd = 0, nk = 0;
    for (size_t k = 0; k < r->m; k++)
        if (r->dropped[k])
            x[nd++] = tail[k];
        else
            x[r->m - ++nk] = tail[k];
    double n = r->job.samples;
    return (struct group_slowest){nd ? expected_max(x, nd, n) : 0.0,
                                  nk ? expected_max(x + nd, nk, n) : 0.0};
}

/*
 * The trainer's chain through one admission of interval batches: batch i trains once i/interval
 * of the admission is done (that quantile of the tail latencies, and no sooner than the
 * fleet's work or the busiest tool pool's for i batches; the last batch after its slowest
 * trajectory and the queue) and
 * the batch before has trained. The batches fill in finish order, so batch i holds that
 * quantile's trajectories and trains for train_s · order[i] of the trainer's own time
 * (plan_train_order; NULL: train_s each) plus its share of the updates. Dynamic sampling
 * launches a dropped group's replacement only once the group is done, its slowest trajectory:
 * a typical place takes 1 / kept_share generations, the last kept; the last batch waits until
 * the admission's groups are kept from among the window's in flight (job.last_generations: the
 * most of the admission's when the window is the interval, fewer when it holds more), each
 * generation but the last a dropped group's (group_slowest): the later of that and the
 * admission's slowest.
 */
static double trainer_chain(const struct plan_roll *r, struct ordered *tail,
                            const struct plan_roll_score *out, double slowest,
                            const struct group_slowest *g, double train_s, const double *order)
{
    const struct plan_roll_job *j = &r->job;
    double extra = 0.0, regen_s = 0.0;
    if (r->dropped) {
        extra = (1.0 / j->kept_share - 1.0) * g->dropped_s;
        regen_s = (j->last_generations - 1.0) * g->dropped_s + g->kept_s;
    }
    double chain = 0.0, rest = 0.0;
    for (int i = j->interval; i >= 1; i--) { /* rest: batches i.. train after done_i */
        rest = order ? rest + plan_roll_batch_train_s(j, train_s, order, i)
                     : (double)(j->interval - i + 1) * train_s;
        size_t q = (size_t)ceil((double)i / j->interval * (double)r->m) - 1;
        double done = i == j->interval ? fmax(out->tail_s, fmax(slowest, regen_s))
                                       : ord_value(tail, q) + extra;
        done = fmax(done, i * fmax(out->work_s, out->pool_s));
        chain = fmax(chain, done + rest);
    }
    return chain;
}

/*
 * The async step's terms besides the fixed point (docs/planner.md §2.4). Admissions come with
 * the weight updates: every interval steps interval·B trajectories (more under dynamic
 * sampling) start at once, queueing beyond the fleet's places, each to be trained within the
 * window of k1 steps; an update stops the fleet for its save and transfer, and, when
 * trajectories carry over it, for the drain and their re-prefill.
 */
static void score_updates(struct plan_roll *r, const double c[PLAN_NTP], double train_s,
                          const double *order, struct plan_roll_score *out)
{
    const struct plan_roll_job *j = &r->job;
    double carried = (double)(j->k1 - j->interval) * r->per_step;
    double admitted = admission(r);
    struct window_pass w = {.tail = r->scratch, .turn = r->scratch + r->m};
    pass_ranks(r, c, out, carried, &w);
    out->work_s = r->per_step * w.load / (double)r->m;
    out->little_s = w.lat_sum / (double)r->m / j->k1;
    out->pool_s = r->per_step * j->pool_s;
    out->queue_s = fmax(0.0, admitted - w.cap) * w.load / (double)r->m; /* at M / load */
    struct group_slowest g = r->dropped ? group_slowest(r, w.tail) : (struct group_slowest){0};
    struct ordered tail; /* w.tail, read for several order statistics */
    ord_init(&tail, w.tail, r->m);
    double slowest = ord_expected_max(&tail, admitted);
    out->tail_s = out->queue_s + slowest;
    out->drain_s = j->drain && carried > 0 ? expected_max(w.turn, r->m, carried) : 0.0;
    out->reprefill_s = carried > 0 ? w.reprefill : 0.0;
    out->update_s = j->save_s + j->transfer_s + out->drain_s + out->reprefill_s;
    out->fleet_s = fmax(out->work_s, out->little_s) + out->update_s / j->interval;
    out->span_s =
        (trainer_chain(r, &tail, out, slowest, &g, train_s, order) + out->update_s) / j->k1;
    out->t_s = fmax(fmax(out->fixed_s, out->pool_s), fmax(out->fleet_s, out->span_s));
}

/* By rank, its latency alone on the smallest TP of class cls that holds it, into x. */
static void class_lat1(const struct plan_roll *r, unsigned cls, double *x)
{
    for (size_t k = 0; k < r->m; k++) {
        x[k] = INFINITY;
        for (int t = 0; t < PLAN_NTP && isinf(x[k]); t++)
            if (cls >> t & 1)
                x[k] = r->lat1[t][k];
    }
}

double plan_roll_tail_lb(struct plan_roll *r, unsigned cls)
{
    if (!isnan(r->tail_lb[cls]))
        return r->tail_lb[cls];
    double *x = xmallocarray(r->m, sizeof *x);
    class_lat1(r, cls, x);
    r->tail_lb[cls] = expected_max(x, r->m, admission(r));
    free(x);
    return r->tail_lb[cls];
}

/* How many of m values a bound on the expected largest of n draws computes: as many as weigh
 * (weighed_from) and a few more. */
static size_t bound_ranks(size_t m, double n)
{
    size_t keep = m - weighed_from(m, n) + 16;
    return keep < m ? keep : m;
}

/* The keep ranks with the largest x, in rank order (ties by rank). */
static uint32_t *largest_ranks(const double *x, size_t m, size_t keep)
{
    double *sel = xmallocarray(m, sizeof *sel);
    memcpy(sel, x, m * sizeof *x);
    double least = stats_select(sel, m, m - keep); /* the keep-th largest */
    free(sel);
    size_t above = 0, n = 0;
    for (size_t k = 0; k < m; k++)
        above += x[k] > least;
    uint32_t *top = xmallocarray(keep, sizeof *top);
    size_t ties = keep - above; /* ranks at the threshold that are taken */
    for (size_t k = 0; k < m; k++)
        if (x[k] > least) {
            top[n++] = (uint32_t)k;
        } else if (x[k] == least && ties > 0) {
            top[n++] = (uint32_t)k;
            ties--;
        }
    return top;
}

/* Class cls's ranks whose tail latencies are likely the admission's slowest: those with the
 * largest latency alone on their routed TP (built on first use). */
static const uint32_t *tail_top(struct plan_roll *r, unsigned cls)
{
    if (!r->tail_ranks[cls]) {
        double *x = xmallocarray(r->m, sizeof *x);
        class_lat1(r, cls, x);
        r->tail_n = bound_ranks(r->m, admission(r));
        r->tail_ranks[cls] = largest_ranks(x, r->m, r->tail_n);
        free(x);
    }
    return r->tail_ranks[cls];
}

/* The ranks whose turns are likely the drain's longest: those with the most generated tokens
 * per turn (built on first use). */
static const uint32_t *turn_top(struct plan_roll *r, double carried)
{
    if (!r->turn_ranks) {
        double *x = xmallocarray(r->m, sizeof *x);
        for (size_t k = 0; k < r->m; k++)
            x[k] = r->gen[k] / r->turns[k];
        r->turn_n = bound_ranks(r->m, carried);
        r->turn_ranks = largest_ranks(x, r->m, r->turn_n);
        free(x);
    }
    return r->turn_ranks;
}

/* The runs of a multiset's bands, each computed when first asked for. */
struct lazy_runs {
    const double *c;
    const uint32_t *lo, *hi;
    unsigned have; /* TP slots whose run is known */
    struct band_run run[PLAN_NTP];
};

static const struct band_run *run_of(const struct plan_roll *r, struct lazy_runs *l, int t)
{
    if (!(l->have >> t & 1))
        l->run[t] = band_run(r, l->c, l->lo[t], l->hi[t], t);
    l->have |= 1u << t;
    return &l->run[t];
}

/* A lower bound of the expected largest of n draws from m values of which x[0..k) are some
 * (rearranged; k >= the values that weigh) and the others are >= 0: the others counted as 0,
 * the largest values that weigh are the largest of x, summed as ord_expected_max sums. */
static double expected_max_lb(double *x, size_t k, size_t m, double n)
{
    size_t from = weighed_from(m, n), weigh = m - from;
    select_rank(x, 0, k, k - weigh);
    qsort(x + k - weigh, weigh, sizeof *x, cmp_double);
    return max_of_top(x + k - weigh, from, m, n);
}

double plan_roll_span_lb(struct plan_roll *r, const int c[PLAN_NTP], double z, double train_s)
{
    const struct plan_roll_job *j = &r->job;
    double cd[PLAN_NTP];
    unsigned mask = mask_of(c, cd);
    uint32_t lo[PLAN_NTP], hi[PLAN_NTP];
    plan_band_right(&r->all, cd, z, lo, hi);
    struct lazy_runs runs = {.c = cd, .lo = lo, .hi = hi};
    const uint32_t *top = tail_top(r, mask);
    int lowest = __builtin_ctz(mask);
    double *x = r->scratch;
    for (size_t i = 0; i < r->tail_n; i++) {
        size_t k = top[i];
        int u = routed_tp(r, cd, lowest, k);
        const struct band_run *run = run_of(r, &runs, u);
        x[i] = tail_latency(r, run, u, k, run_tau(r, run, k));
    }
    double slowest = expected_max_lb(x, r->tail_n, r->m, admission(r));
    double carried = (double)(j->k1 - j->interval) * r->per_step, drain = 0.0;
    if (j->drain && carried > 0) { /* pass_ranks's turns on each rank's own band */
        const uint32_t *turn = turn_top(r, carried);
        for (size_t i = 0; i < r->turn_n; i++) {
            size_t k = turn[i];
            int t = 0;
            while (!(lo[t] <= k && k < hi[t])) /* the bands cover every rank */
                t++;
            x[i] = r->gen[k] / r->turns[k] * run_tau(r, run_of(r, &runs, t), k);
        }
        drain = expected_max_lb(x, r->turn_n, r->m, carried);
    }
    return (slowest + train_s + (j->save_s + j->transfer_s + drain)) / j->k1;
}

const double *plan_roll_routed(struct plan_roll *r, unsigned cls)
{
    double *routed = r->routed[cls];
    if (r->routed_ok[cls])
        return routed;
    for (int t = 0; t < PLAN_NTP; t++)
        routed[t] = 0.0;
    int lowest = __builtin_ctz(cls); /* cls is not empty */
    /* pass_ranks's sum: every rank in ascending order (the bands are contiguous from 0) */
    for (size_t k = 0; k < r->m; k++) {
        int u = lowest;
        while (u < PLAN_NTP && (isinf(r->lat[u][k]) || !(cls >> u & 1)))
            u++;
        if (u < PLAN_NTP)
            routed[u] += r->work[u][k];
    }
    r->routed_ok[cls] = true;
    return routed;
}

static void score_async(struct plan_roll *r, const double c[PLAN_NTP], double train_s,
                        const double *order, struct plan_roll_score *out)
{
    double *merged = r->scratch + r->m;
    band_latencies(r, out->lo, out->hi, r->scratch, merged);
    double bz = r->per_step * out->z_s;
    out->fixed_s = plan_fixed_point(merged, r->m, bz);
    size_t accepted = 0;
    while (accepted < r->m && merged[accepted] <= out->fixed_s)
        accepted++;
    out->f_stale = 1.0 - (double)accepted / (double)r->m;
    score_updates(r, c, train_s, order, out);
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

/* Batch b's makespan in a round of scale times its trajectories (as many of each): per band, the
 * larger of its load and the latency of its longest generation at the concurrency its
 * instances run. */
static double batch_makespan(const struct plan_roll *r, size_t b, const int c[PLAN_NTP],
                             const uint32_t lo[PLAN_NTP], const uint32_t hi[PLAN_NTP],
                             bool with_latency, double scale)
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
        span = fmax(span, scale * (v->prefix[t][pb] - v->prefix[t][pa]) / c[t]);
        if (!with_latency)
            continue;
        /* the longest generation runs on while the band's shorter ones finish: over its life
         * the decode batch averages its start times the band's mean over its longest
         * generated tokens (the async model's decay, §2.4) */
        uint32_t last = ranks[pb - 1];
        double n = (double)(pb - pa),
               decay = (v->gen_prefix[pb] - v->gen_prefix[pa]) / (n * r->gen[last]);
        double conc = fmax(1.0, fmin(ceil(scale * n / c[t]), r->bcap[t][last]) * decay);
        double tau = cost_decode_time(&r->pre[t], conc, conc * r->cbar[last]);
        span = fmax(span, latency_s(r->gen[last], tau, r->prefill[t][last], r->tool_s[last]));
    }
    return span;
}

/* A synchronous round of scale times batch b's trajectories: its makespan on the fleet, and
 * no shorter than the busiest bounded tool pool takes over the round's calls. */
static double sync_round(const struct plan_roll *r, size_t b, const int c[PLAN_NTP],
                         const uint32_t lo[PLAN_NTP], const uint32_t hi[PLAN_NTP], double scale)
{
    return fmax(batch_makespan(r, b, c, lo, hi, true, scale), scale * r->batch * r->job.pool_s);
}

/* A synchronous step's rollout of batch b: its rounds as dynamic sampling expects them
 * (plan/sampling.h) — gen_batch's each of factor batches; regenerate's first of the batch and
 * the rest each of the share still missing, waiting for its own longest generation. */
static double sync_rollout(const struct plan_roll *r, size_t b, const int c[PLAN_NTP],
                           const uint32_t lo[PLAN_NTP], const uint32_t hi[PLAN_NTP])
{
    const struct plan_roll_job *j = &r->job;
    if (j->sampling.mode == SPEC_DS_GEN_BATCH)
        return r->rounds * sync_round(r, b, c, lo, hi, j->sampling.factor);
    double first = sync_round(r, b, c, lo, hi, 1.0);
    if (r->rounds <= 1.0)
        return first;
    return first + (r->rounds - 1.0) * sync_round(r, b, c, lo, hi, 1.0 - j->kept_share);
}

void plan_roll_score(struct plan_roll *r, const int c[PLAN_NTP], bool colocated, double z,
                     double train_s, const double *order, struct plan_roll_score *out)
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
        score_async(r, cd, train_s, order, out);
        return;
    }
    double sum = 0.0;
    for (size_t b = 0; b < r->batches; b++)
        sum += sync_rollout(r, b, c, out->lo, out->hi);
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
        sum += batch_makespan(r, b, c, s->lo, s->hi, false, 1.0);
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
