/*
 * The exact search (docs/planner.md "Search"). Two levels:
 *
 *   splits — how many GPUs train (async) — are taken best-first by a lower bound, the larger
 *     of a training bound (the cheapest admissible layout bound) and a rollout bound (the
 *     GPU-seconds relaxation of the band loads through the staleness fixed point); a split is
 *     solved only while its bound can still beat the incumbent.
 *   rollout multisets of one split are searched by best-first branch and bound over boxes of
 *     instance counts, one root per set of TP sizes present (a "class"): the smallest size's
 *     count follows from the others. A box is judged by its super-multiset (every count at its
 *     upper end), whose band loads no member can undercut because loads only fall as instances
 *     are added; in async mode box_may_reach turns that into a proof that no member reaches
 *     the incumbent, and leaf_may_reach decides a leaf exactly before its O(K·M) scoring;
 *     the load cap and the span bound (plan_roll_span_lb) rule leaves out on the terms besides
 *     the fixed point. Before a split's layouts are timed, a probe of these rules
 *     (split_may_beat) leaves the splits they prove cannot beat the incumbent.
 *
 * In async mode T_step = max(T_train, T_r), and T_r of a multiset does not depend on the
 * training layout, so a split's objective is max(min T_train, min T_r) and the rollout search
 * may stop at the first multiset with T_r <= min T_train. The tie-break order is applied
 * afterwards on the winning split: the first layout in (TP, PP, CP, budget) order whose
 * T_train is at most the objective, then the fewest rollout instances whose T_r is. Colocated
 * mode has one split (every GPU does both) and an objective T_roll + (T_train + T_switch)
 * whose switch term depends on the TP sizes present, so each class is searched with its own
 * best training term.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/search.h"
#include "util/alloc.h"
#include "util/heap.h"

#define CLASSES (1u << PLAN_NTP)
#define POLL_EVERY 32 /* heap pops and splits between budget checks */

static int size_of(int t)
{
    return 1 << t;
}

static int lowest(unsigned cls)
{
    return __builtin_ctz(cls);
}

static int highest(unsigned cls)
{
    return 31 - __builtin_clz(cls);
}

static bool beats(double x, double cutoff, bool eq)
{
    return x < cutoff || (eq && x == cutoff);
}

/* What a candidate must beat to matter against an incumbent of value v: v itself when exact,
 * else v / (1 + plan.gap_tolerance) (docs/planner.md §3.6). */
static double target(const struct plan_solver *s, double v)
{
    return v / (1.0 + s->cfg->plan.gap_tolerance);
}

static bool budget_gone(struct plan_solver *s)
{
    if (s->stats.stopped)
        return true;
    int cap = s->cfg->plan.max_scored;
    if (cap > 0 && s->stats.rollout_scored >= cap) {
        s->stats.stopped = s->stats.stopped_by_count = true;
        return true;
    }
    if (!s->p->should_stop || ++s->polls % POLL_EVERY != 0)
        return false;
    s->stats.stopped = s->p->should_stop(s->p->stop_arg);
    return s->stats.stopped;
}

/* ---- scored multisets ----------------------------------------------------------------------- */

static size_t memo_slot(const struct plan_memo *m, size_t cap, int n, const int c[PLAN_NTP])
{
    uint64_t h = (uint64_t)n * 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < PLAN_NTP; t++)
        h = (h ^ (uint64_t)c[t]) * 0x100000001b3ull;
    size_t i = (size_t)(h >> 11) & (cap - 1);
    while (m[i].used && (m[i].n_roll != n || memcmp(m[i].c, c, sizeof m[i].c) != 0))
        i = (i + 1) & (cap - 1);
    return i;
}

static void memo_grow(struct plan_solver *s)
{
    size_t cap = s->memo_cap ? 2 * s->memo_cap : 256;
    struct plan_memo *m = xcalloc(cap, sizeof *m);
    for (size_t i = 0; i < s->memo_cap; i++)
        if (s->memo[i].used)
            m[memo_slot(m, cap, s->memo[i].n_roll, s->memo[i].c)] = s->memo[i];
    free(s->memo);
    s->memo = m;
    s->memo_cap = cap;
}

const struct plan_roll_score *plan_memo_score(struct plan_solver *s, const struct plan_split *sp,
                                              const int c[PLAN_NTP], double z)
{
    if (2 * (s->memo_n + 1) > s->memo_cap)
        memo_grow(s);
    struct plan_memo *e = &s->memo[memo_slot(s->memo, s->memo_cap, sp->n_roll, c)];
    if (!e->used) {
        e->used = true;
        e->n_roll = sp->n_roll;
        memcpy(e->c, c, sizeof e->c);
        plan_roll_score(&s->roll, c, s->colocated, z, sp->train_s, sp->train_order, &e->score);
        s->memo_n++;
        s->stats.rollout_scored++;
    }
    return &e->score;
}

/* ---- classes: the set of TP sizes a multiset uses -------------------------------------------- */

static enum plan_why class_why(const struct plan_solver *s, const struct plan_split *sp,
                               unsigned cls)
{
    int sizes = __builtin_popcount(cls);
    if (sizes < s->cfg->plan.min_tp_sizes)
        return PLAN_WHY_TP_SIZES;
    if (s->cfg->plan.homogeneous_rollout && sizes != 1)
        return PLAN_WHY_HOMOGENEOUS;
    if (!(s->bucket_classes >> cls & 1))
        return PLAN_WHY_BUCKETS;
    if (!s->roll.fits_all[highest(cls)])
        return PLAN_WHY_KV;
    if (s->pattern_gpus) {
        unsigned want = 0;
        for (int t = 0; t < PLAN_NTP; t++)
            want |= s->pattern[t] ? 1u << t : 0;
        if (cls != want || !sp->whole_nodes)
            return PLAN_WHY_PATTERN;
    }
    int d = lowest(cls);
    if (sp->n_roll % size_of(d) != 0 || sp->n_roll > sp->cap[d])
        return PLAN_WHY_PACKING;
    return PLAN_WHY_NONE;
}

/* ---- boxes of instance counts --------------------------------------------------------------- */

/* Counts of every size in cls but the smallest (dims) range over [lo, hi]; the smallest
 * size's count is what the remaining GPUs make. */
struct box {
    double lb; /* bound on the value of every member (NAN until bound() sets it) */
    int min_inst;
    unsigned cls;
    int lo[PLAN_NTP], hi[PLAN_NTP];
    double u_from;           /* async: every member reaching the query's value has z <= this */
    uint32_t from[PLAN_NTP]; /* async: the super-multiset's band starts at u_from (or lower) */
};

/* Shrinks b to the counts that can pack (docs/planner.md: instances of power-of-two sizes
 * pack into the rollout nodes iff, for every size s, the instances of size >= s take at most
 * cap[s] GPUs). Returns false when no member is left. */
static bool tighten(const struct plan_split *sp, struct box *b)
{
    int d = lowest(b->cls), n = sp->n_roll, lo_sum = 0;
    for (int t = d + 1; t < PLAN_NTP; t++)
        lo_sum += b->cls >> t & 1 ? size_of(t) * b->lo[t] : 0;
    int above = 0;
    for (int t = PLAN_NTP - 1; t > d; t--) {
        if (!(b->cls >> t & 1))
            continue;
        int by_cap = (sp->cap[t] - above) / size_of(t);
        int by_rest = (n - size_of(d) - (lo_sum - size_of(t) * b->lo[t])) / size_of(t);
        b->hi[t] = b->hi[t] < by_cap ? b->hi[t] : by_cap;
        b->hi[t] = b->hi[t] < by_rest ? b->hi[t] : by_rest;
        if (b->hi[t] < b->lo[t])
            return false;
        above += size_of(t) * b->lo[t];
    }
    return true;
}

static bool is_leaf(const struct box *b)
{
    for (int t = 0; t < PLAN_NTP; t++)
        if (b->lo[t] != b->hi[t])
            return false;
    return true;
}

/* Counts at b's top corner: dims at hi, the smallest size with the GPUs left (a leaf's
 * multiset, or the fewest instances of b). */
static void corner(const struct plan_split *sp, const struct box *b, double c[PLAN_NTP])
{
    int d = lowest(b->cls), used = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        c[t] = 0.0;
        if (t != d && b->cls >> t & 1) {
            c[t] = b->hi[t];
            used += size_of(t) * b->hi[t];
        }
    }
    int whole = (sp->n_roll - used) / size_of(d); /* instances of the smallest size */
    c[d] = whole;
}

/* The train side split sp's span charges its admission's last batch (finish order): the
 * heaviest, at least the mean train_s. */
static double last_train_side(const struct plan_solver *s, const struct plan_split *sp)
{
    const struct plan_roll_job *j = &s->roll.job;
    return plan_roll_batch_train_s(j, sp->train_s, sp->train_order, j->interval);
}

/* The async rollout side's bound for class cls at least band load z when the admission's last
 * batch's train side is at least train_s: the fixed point on the class's least latencies, the
 * fleet's work and the span of its tail bound, each with the least update (no drain, no
 * re-prefill). */
static double class_roll_lb(struct plan_solver *s, unsigned cls, double z, double train_s)
{
    const struct plan_roll_job *j = &s->roll.job;
    double fixed =
        plan_fixed_point(plan_roll_lam_min(&s->roll, cls), s->roll.m, s->roll.per_step * z);
    double update = j->save_s + j->transfer_s;
    double fleet = s->roll.per_step * z / (double)s->roll.m + update / j->interval;
    double span = (plan_roll_tail_lb(&s->roll, cls) + train_s + update) / j->k1;
    /* the sums bound the terms in real arithmetic, summed in another order: shave below the
     * rounding (§3.4) */
    return fmax(fixed, fmax(fleet, span) * (1.0 - 1e-12));
}

/* Fills b's super-multiset sup (dims at hi, the smallest size as if dims were at lo), its
 * fewest instances (dims at hi) and its bound: colocated, the batch makespans' bound at sup;
 * async, at the root class_roll_lb at sup's least band load and the split's train side,
 * inherited by the children (the heap's order; box_may_reach prunes). */
static void bound(struct plan_solver *s, const struct plan_split *sp, struct box *b,
                  double sup[PLAN_NTP])
{
    int d = lowest(b->cls), used_hi = 0, used_lo = 0, dims_hi = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        bool dim = t != d && b->cls >> t & 1;
        sup[t] = dim ? b->hi[t] : 0.0;
        used_hi += dim ? size_of(t) * b->hi[t] : 0;
        used_lo += dim ? size_of(t) * b->lo[t] : 0;
        dims_hi += dim ? b->hi[t] : 0;
    }
    int whole = (sp->n_roll - used_lo) / size_of(d); /* instances of the smallest size */
    sup[d] = whole;
    b->min_inst = dims_hi + (sp->n_roll - used_hi) / size_of(d); /* every dim at hi */
    if (!s->colocated) {
        /* a child keeps its parent's bound (a lower bound of a superset); admit's
         * box_may_reach does the pruning */
        if (isnan(b->lb))
            b->lb = class_roll_lb(s, b->cls, plan_band_z(&s->roll.all, sup, b->cls, INFINITY),
                                  last_train_side(s, sp));
        return;
    }
    double sum = 0.0;
    for (size_t k = 0; k < s->roll.batches; k++) {
        double lat = INFINITY;
        for (int t = 0; t < PLAN_NTP; t++)
            if (b->cls >> t & 1)
                lat = fmin(lat, s->roll.top_lat1[t][k]);
        sum += fmax(plan_band_z(&s->roll.bview[k], sup, b->cls, INFINITY), lat);
    }
    /* the per-batch terms bound the makespans in real arithmetic; shave below rounding */
    b->lb = sum / (double)s->roll.batches * (1.0 - 1e-12);
}

/* ---- one rollout search --------------------------------------------------------------------- */

/* Best found: ordered by (value, instances, counts) or, when fewest, (instances, value,
 * counts); counts prefer more large instances. */
struct cand {
    double v;
    int inst;
    int c[PLAN_NTP];
};

struct query {
    bool fewest;   /* fewest instances with v + offset <= limit; else least v */
    double cutoff; /* least v: only v + offset below cutoff (or equal when cutoff_eq) */
    bool cutoff_eq;
    double early;     /* least v: stop at the first v <= early */
    double limit;     /* fewest */
    unsigned classes; /* bit cls set: class cls is searched */
    bool probe;       /* async: score nothing, stop at the first leaf no rule excludes (found) */
    double offset[CLASSES];
    bool found, early_hit;
    struct cand best;
    double open_lb; /* when stopped: least bound + offset left in the heap */
};

static int lex_cmp(const int a[PLAN_NTP], const int b[PLAN_NTP])
{
    for (int t = PLAN_NTP - 1; t > 0; t--)
        if (a[t] != b[t])
            return a[t] > b[t] ? -1 : 1;
    return 0;
}

static bool cand_better(const struct query *q, const struct cand *a, const struct cand *b)
{
    if (q->fewest && a->inst != b->inst)
        return a->inst < b->inst;
    if (a->v != b->v)
        return a->v < b->v;
    if (a->inst != b->inst)
        return a->inst < b->inst;
    return lex_cmp(a->c, b->c) < 0;
}

static bool box_dead(const struct plan_solver *s, const struct query *q, const struct box *b)
{
    double x = b->lb + q->offset[b->cls];
    if (q->fewest) {
        if (x > q->limit)
            return true;
        return q->found &&
               (b->min_inst > q->best.inst || (b->min_inst == q->best.inst && b->lb > q->best.v));
    }
    if (!beats(x, q->cutoff, q->cutoff_eq))
        return true;
    double bar = target(s, q->best.v); /* the query's own best, less the tolerance */
    return q->found && (b->lb > bar || (b->lb == bar && b->min_inst > q->best.inst));
}

static int box_cmp_least(const void *a, const void *b, void *ctx)
{
    const struct box *x = a, *y = b;
    (void)ctx;
    if (x->lb != y->lb)
        return x->lb < y->lb ? -1 : 1;
    if (x->min_inst != y->min_inst)
        return x->min_inst < y->min_inst ? -1 : 1;
    for (int t = 0; t < PLAN_NTP; t++)
        if (x->lo[t] != y->lo[t])
            return x->lo[t] < y->lo[t] ? -1 : 1;
    return 0;
}

static int box_cmp_fewest(const void *a, const void *b, void *ctx)
{
    const struct box *x = a, *y = b;
    if (x->min_inst != y->min_inst)
        return x->min_inst < y->min_inst ? -1 : 1;
    return box_cmp_least(a, b, ctx);
}

/* Async: the value a member must reach to matter to q (+inf: any). */
static double relevance(const struct plan_solver *s, const struct query *q)
{
    if (q->fewest)
        return q->limit;
    return q->found ? fmin(q->cutoff, target(s, q->best.v)) : q->cutoff;
}

/* Async: the value above which a scored member cannot change q (+inf: any): its own best
 * without the tolerance, so that a member this rules out is one that consider_leaf would
 * score and then leave q as it was (relevance() <= this). */
static double no_change(const struct query *q)
{
    if (q->fewest)
        return q->limit;
    return q->found ? fmin(q->cutoff, q->best.v) : q->cutoff;
}

/*
 * Async: the largest load (the fleet's work basis: the least band load z, and every routed
 * load, plan_roll_routed) of a member of split sp whose rollout side can be <= theta, from the
 * terms that grow with it (docs/planner.md §2.4): the fleet's work_s + update_s / interval with
 * work_s = B'·load/M and update_s >= save + transfer, and the span's (chain + update_s) / k1
 * with the chain at least, for each batch i of the admission, i·work_s plus the train sides of
 * batches i.. (in finish order, the split's train_order; train_s, the split's least train
 * side, each when it has none).
 * A member with a load above the result has a rollout side above theta. The sums are taken in
 * another order than the terms, so the inversion is widened by 1e-9 relative on each side
 * (§3.4); a negative result: no member.
 */
static double z_cap(const struct plan_solver *s, const struct plan_split *sp, double theta)
{
    if (isinf(theta))
        return INFINITY;
    const struct plan_roll_job *j = &s->roll.job;
    const double up = 1.0 + 1e-9, down = 1.0 - 1e-9;
    double per_z = s->roll.per_step / (double)s->roll.m; /* work_s per unit of z */
    double update = j->save_s + j->transfer_s, iv = (double)j->interval;
    double fleet = (theta * up - update / iv * down) / per_z * up;
    if (isnan(sp->train_s))
        return fleet;
    double k1t = theta * (double)j->k1 * up, cap = fleet, rest = 0.0;
    for (int i = j->interval; i >= 1; i--) { /* batch i: i·work_s, then batches i.. train */
        rest += plan_roll_batch_train_s(j, sp->train_s, sp->train_order, i);
        cap = fmin(cap, (k1t - (rest + update) * down) / (i * per_z) * up);
    }
    return cap;
}

/* Async: whether counts c (at least those of every member, class cls) leave some routed load
 * above cap: then every member's load, the fleet's work basis, is (plan_roll_routed). */
static bool routed_over(struct plan_solver *s, unsigned cls, const double c[PLAN_NTP], double cap)
{
    if (isinf(cap))
        return false;
    const double *routed = plan_roll_routed(&s->roll, cls);
    for (int t = 0; t < PLAN_NTP; t++)
        if (cls >> t & 1 && c[t] > 0.0 && !(routed[t] / c[t] <= cap))
            return true;
    return false;
}

/*
 * Async: whether some member of box b (super-multiset sup) may have T_r <= theta. A member c
 * that does has z_c <= theta·A_c/B <= theta·m/B =: u; its banding then keeps sup's loads under
 * u too, so its boundaries are at or above the lowest such banding of sup, each rank runs on a
 * TP no larger than there, and A_c is at most the count of plan_roll_accepted_bound; u shrinks
 * to theta·that/B and the argument repeats. No member qualifies once no banding keeps sup's
 * loads under u, since every member's least load is at least sup's (docs/planner.md). The
 * first u is at most b->u_from, what the parent proved of its members (b's among them); each
 * pass's band searches start from the previous pass's starts, the first from b->from; the last
 * u that fitted and its starts are left in b for its children (docs/planner.md §3.3).
 */
static bool box_may_reach(struct plan_solver *s, struct box *b, const double sup[PLAN_NTP],
                          double theta, double cap)
{
    const double margin = 1.0 + 1e-9; /* the argument is in real arithmetic */
    double u = fmin(theta * (double)s->roll.m / s->roll.per_step * margin, b->u_from);
    u = fmin(u, cap);
    if (!(u >= 0.0))
        return false; /* every member's z is >= 0 > u */
    if (routed_over(s, b->cls, sup, cap))
        return false;
    uint32_t lo[PLAN_NTP], hi[PLAN_NTP];
    memcpy(lo, b->from, sizeof lo);
    for (int round = 0; round < 8; round++) {
        if (!plan_band_fit(&s->roll.all, sup, u, lo, hi))
            return false; /* u < Z(sup) <= every member's z */
        b->u_from = u;
        memcpy(b->from, lo, sizeof lo);
        if (isinf(theta))
            return true; /* no fixed-point argument: the cap alone */
        size_t a = plan_roll_accepted_bound(&s->roll, b->cls, lo, hi, theta, false);
        double next = theta * (double)a / s->roll.per_step * margin;
        if (next >= u)
            return true;
        u = next;
    }
    return true;
}

/* Whether box b (tightened and bounded here) may hold a member that matters to q. */
static bool admit(struct plan_solver *s, const struct plan_split *sp, const struct query *q,
                  struct box *b)
{
    double sup[PLAN_NTP];
    if (!tighten(sp, b))
        return false;
    bound(s, sp, b, sup);
    if (box_dead(s, q, b))
        return false;
    if (s->colocated)
        return true;
    double theta = relevance(s, q), cap = z_cap(s, sp, no_change(q));
    return (isinf(theta) && isinf(cap)) || box_may_reach(s, b, sup, theta, cap);
}

/* Async: whether leaf c (least band load z) may have T_r <= theta, decided exactly from its
 * banding's accepted count (plan_roll_accepted) without the O(K·M) fixed point. */
static bool leaf_may_reach(struct plan_solver *s, const int c[PLAN_NTP], double z, double theta)
{
    double cd[PLAN_NTP];
    uint32_t lo[PLAN_NTP], hi[PLAN_NTP];
    for (int t = 0; t < PLAN_NTP; t++)
        cd[t] = c[t];
    plan_band_right(&s->roll.all, cd, z, lo, hi);
    size_t a = plan_roll_accepted(&s->roll, lo, hi, theta, false);
    return a > 0 && s->roll.per_step * z / (double)a <= theta;
}

static void consider_leaf(struct plan_solver *s, const struct plan_split *sp, struct query *q,
                          const struct box *b)
{
    struct cand c = {0};
    double cd[PLAN_NTP];
    corner(sp, b, cd);
    for (int t = 0; t < PLAN_NTP; t++) {
        c.c[t] = (int)cd[t];
        c.inst += c.c[t];
    }
    double z = NAN, theta = relevance(s, q);
    if (!s->colocated) {
        z = plan_band_z(&s->roll.all, cd, b->cls, b->u_from);
        double cap = z_cap(s, sp, no_change(q));
        if (!(z <= cap) || routed_over(s, b->cls, cd, cap))
            return; /* its fleet or span is above what could change q */
        if (!isinf(theta) && !leaf_may_reach(s, c.c, z, theta))
            return;
        if (plan_roll_span_lb(&s->roll, c.c, z, last_train_side(s, sp)) > no_change(q))
            return; /* its span is above what could change q (rule 5) */
        if (q->probe) {
            q->found = q->early_hit = true;
            return;
        }
    }
    c.v = plan_memo_score(s, sp, c.c, z)->t_s;
    double x = c.v + q->offset[b->cls];
    bool ok = q->fewest ? x <= q->limit : beats(x, q->cutoff, q->cutoff_eq);
    if (ok && (!q->found || cand_better(q, &c, &q->best))) {
        q->best = c;
        q->found = true;
    }
    if (ok && !q->fewest && c.v <= q->early)
        q->early_hit = true;
}

/*
 * Splits b in two along its widest dimension and keeps the children q may need. The one the
 * heap would pop next replaces b (true) instead of being pushed: a dive skips a push
 * and a pop per level and visits the boxes in the heap's order all the same.
 */
static bool split_box(struct plan_solver *s, const struct plan_split *sp, const struct query *q,
                      struct heap *h, struct box *b)
{
    int dim = 0, widest = -1;
    for (int t = 0; t < PLAN_NTP; t++) {
        int w = size_of(t) * (b->hi[t] - b->lo[t]);
        if (w > widest) {
            widest = w;
            dim = t;
        }
    }
    int mid = b->lo[dim] + (b->hi[dim] - b->lo[dim]) / 2;
    struct box kid[2] = {*b, *b};
    kid[0].hi[dim] = mid;
    kid[1].lo[dim] = mid + 1;
    bool keep[2] = {admit(s, sp, q, &kid[0]), admit(s, sp, q, &kid[1])};
    if (!keep[0] && !keep[1])
        return false;
    int first = !keep[0] || (keep[1] && h->cmp(&kid[1], &kid[0], h->ctx) < 0);
    if (keep[0] && keep[1])
        heap_push(h, &kid[1 - first]);
    const struct box *top = heap_peek(h);
    if (top && h->cmp(top, &kid[first], h->ctx) < 0) {
        heap_push(h, &kid[first]);
        return false;
    }
    *b = kid[first];
    return true;
}

static void root_box(const struct plan_split *sp, unsigned cls, struct box *b)
{
    memset(b, 0, sizeof *b);
    b->cls = cls;
    b->lb = NAN;
    b->u_from = INFINITY;
    for (int t = lowest(cls) + 1; t < PLAN_NTP; t++)
        if (cls >> t & 1) {
            b->lo[t] = 1;
            b->hi[t] = sp->n_roll / size_of(t);
        }
}

/* Runs query q over split sp. Returns false when the budget stopped it (q->open_lb then holds
 * the least bound left). */
static bool roll_search(struct plan_solver *s, const struct plan_split *sp, struct query *q)
{
    struct heap h;
    heap_init(&h, sizeof(struct box), q->fewest ? box_cmp_fewest : box_cmp_least, NULL);
    for (unsigned cls = 1; cls < CLASSES; cls++) {
        if (!(q->classes >> cls & 1))
            continue;
        struct box b;
        root_box(sp, cls, &b);
        if (admit(s, sp, q, &b))
            heap_push(&h, &b);
    }
    struct box b;
    bool done = true, dive = false;
    q->open_lb = INFINITY;
    while (dive || heap_pop(&h, &b)) {
        dive = false;
        if (budget_gone(s)) {
            done = false;
            q->open_lb = fmin(b.lb + q->offset[b.cls], q->open_lb);
            while (heap_pop(&h, &b))
                q->open_lb = fmin(b.lb + q->offset[b.cls], q->open_lb);
            break;
        }
        if (box_dead(s, q, &b))
            continue;
        if (!is_leaf(&b)) {
            dive = split_box(s, sp, q, &h, &b);
            continue;
        }
        consider_leaf(s, sp, q, &b);
        if (q->early_hit)
            break;
    }
    heap_free(&h);
    return done;
}

/* The class (TP sizes used) of a pin's counts; 0 when none are pinned. A pinned multiset is
 * judged by its own class's constraints alone. */
static unsigned pinned_class(const struct plan_solver *s)
{
    unsigned cls = 0;
    for (int t = 0; s->p->pin && s->p->pin->counts && t < PLAN_NTP; t++)
        cls |= s->p->pin->counts[t] > 0 ? 1u << t : 0;
    return cls;
}

/* The classes of split sp that satisfy every constraint; records the furthest constraint the
 * others reached. A class with a TP size that cannot serve the model at all (heads, node size,
 * weights) is no choice the user constrained: it is blamed, as KV capacity, only when no other
 * class was rejected. */
static unsigned valid_classes(struct plan_solver *s, const struct plan_split *sp)
{
    unsigned set = 0, only = pinned_class(s);
    enum plan_why why = PLAN_WHY_NONE;
    bool unusable = false;
    for (unsigned cls = 1; cls < CLASSES; cls++) {
        if (only && cls != only)
            continue;
        bool usable = true;
        for (int t = 0; t < PLAN_NTP; t++)
            usable = usable && (!(cls >> t & 1) || s->roll.usable[t]);
        enum plan_why w = usable ? class_why(s, sp, cls) : PLAN_WHY_NONE;
        unusable = unusable || !usable;
        if (usable && w == PLAN_WHY_NONE)
            set |= 1u << cls;
        why = w > why ? w : why;
    }
    if (why == PLAN_WHY_NONE && unusable)
        why = PLAN_WHY_KV;
    s->why_roll = why > s->why_roll ? why : s->why_roll;
    return set;
}

/* Whether the multiset is given rather than searched: by plan.tp_pattern or by a pin. */
static bool counts_given(const struct plan_solver *s)
{
    return s->pattern_gpus || (s->p->pin && s->p->pin->counts);
}

/* The given multiset on sp: the pin's, or the one the pattern makes on sp's rollout nodes. */
static bool given_counts(const struct plan_solver *s, const struct plan_split *sp, int c[PLAN_NTP])
{
    if (s->p->pin && s->p->pin->counts) {
        memcpy(c, s->p->pin->counts, PLAN_NTP * sizeof *c);
        return true;
    }
    int nodes = sp->n_roll / s->pattern_gpus;
    for (int t = 0; t < PLAN_NTP; t++)
        c[t] = nodes * s->pattern[t];
    return sp->whole_nodes && nodes * s->pattern_gpus == sp->n_roll;
}

/* ---- splits --------------------------------------------------------------------------------- */

/* Rollout GPUs of each node when training takes the first n_train GPUs, folded into the nested
 * capacities. */
static void split_caps(const struct plan_solver *s, struct plan_split *sp)
{
    memset(sp->cap, 0, sizeof sp->cap);
    sp->whole_nodes = true;
    for (int node = 0; node * s->G < s->N; node++) {
        int first = node * s->G, size = s->N - first < s->G ? s->N - first : s->G;
        int taken = sp->n_train - first;
        taken = taken < 0 ? 0 : taken > size ? size : taken;
        int free_gpus = s->colocated ? size : size - taken;
        if (free_gpus > 0 && free_gpus != s->G)
            sp->whole_nodes = false;
        for (int t = 0; t < PLAN_NTP; t++)
            sp->cap[t] += size_of(t) * (free_gpus / size_of(t));
    }
}

/* Multisets over {1, 2, 4, 8} summing to n that pack (closed form over the count of 4s). */
static double count_multisets(const struct plan_split *sp)
{
    int n = sp->n_roll;
    double total = 0.0;
    for (int c8 = 0; 8 * c8 <= sp->cap[3]; c8++) {
        int x = (sp->cap[1] < n ? sp->cap[1] : n) - 8 * c8;
        int k = (sp->cap[2] - 8 * c8) / 4;
        if (x < 0 || k < 0)
            continue;
        k = k < x / 4 ? k : x / 4;
        /* Σ_{c4=0..k} (floor((x − 4·c4)/2) + 1), the number of c2 (c1 takes the rest) */
        int c2_max = x / 2; /* at c4 = 0 */
        total += (double)(k + 1) * (c2_max + 1) - (double)k * (k + 1);
    }
    return total;
}

/* What the train side adds to T_train: async, the trainer's share of the weight updates. */
static double train_add(const struct plan_solver *s)
{
    return s->colocated ? 0.0 : s->roll.job.train_add_s;
}

/* Split sp's training layouts under s->train's space: each checked, bounded when it fits. */
static void split_layouts(struct plan_solver *s, struct plan_split *sp)
{
    struct plan_train_layout all[PLAN_LAYOUTS_MAX];
    size_t n = 1;
    if (s->p->pin)
        all[0] = *s->p->pin->train;
    else
        n = plan_train_layouts(&s->train, sp->n_train, all);
    sp->n_layouts = n;
    sp->layouts = xreallocarray(sp->layouts, n ? n : 1, sizeof *sp->layouts);
    sp->lwhy = xreallocarray(sp->lwhy, n ? n : 1, sizeof *sp->lwhy);
    sp->lbound = xreallocarray(sp->lbound, n ? n : 1, sizeof *sp->lbound);
    sp->exact = xreallocarray(sp->exact, n ? n : 1, sizeof *sp->exact);
    memcpy(sp->layouts, all, n * sizeof *all);
    sp->lb_train = INFINITY;
    for (size_t i = 0; i < sp->n_layouts; i++) {
        sp->exact[i] = NAN;
        sp->lwhy[i] = plan_train_check(&s->train, &sp->layouts[i], NULL);
        if (sp->lwhy[i] != PLAN_WHY_NONE) {
            s->why_train = sp->lwhy[i] > s->why_train ? sp->lwhy[i] : s->why_train;
            continue;
        }
        sp->lbound[i] = plan_train_lb(&s->train, &sp->layouts[i]) + train_add(s);
        sp->lb_train = fmin(sp->lb_train, sp->lbound[i]);
    }
}

static void split_prepare(struct plan_solver *s, struct plan_split *sp)
{
    sp->train_s = NAN;
    split_caps(s, sp);
    sp->multisets = count_multisets(sp);
    split_layouts(s, sp);
    if (isinf(sp->lb_train) && plan_train_fallback(&s->train, true)) {
        /* plan.recompute / plan.fsdp fallback: this split's layouts with them too */
        split_layouts(s, sp);
        plan_train_fallback(&s->train, false);
    }
    s->stats.train_space += (double)sp->n_layouts;
    s->stats.rollout_space += sp->multisets;
    s->stats.space += (double)sp->n_layouts * sp->multisets;
}

static double layout_time(struct plan_solver *s, struct plan_split *sp, size_t i)
{
    if (isnan(sp->exact[i])) {
        sp->exact[i] = plan_train_time(&s->train, &sp->layouts[i], NULL) + train_add(s);
        s->stats.train_scored++;
    }
    return sp->exact[i];
}

/* Async rollout bound of a split: for every valid class, Z >= wmin / n_roll (docs/planner.md)
 * and the train side at least the split's bound. */
static double split_roll_lb(struct plan_solver *s, const struct plan_split *sp, unsigned classes)
{
    double lb = INFINITY;
    for (unsigned cls = 1; cls < CLASSES; cls++)
        if (classes >> cls & 1) {
            double z = s->roll.all.wmin[cls] / sp->n_roll * (1.0 - 1e-9);
            lb = fmin(lb, class_roll_lb(s, cls, z, sp->lb_train));
        }
    return lb;
}

static void build_splits(struct plan_solver *s)
{
    const struct spec_plan_config *pc = &s->cfg->plan;
    /* at most one split per granularity step (plus the colocated one) */
    s->n_splits = 0;
    s->splits = xcalloc((size_t)(s->N / pc->granularity_gpus) + 1, sizeof *s->splits);
    if (s->p->pin) {
        int n = s->colocated ? s->N : s->p->pin->n_train;
        s->splits[s->n_splits++] =
            (struct plan_split){.n_train = n, .n_roll = s->colocated ? s->N : s->N - n};
    } else if (s->colocated) {
        if (s->N % pc->granularity_gpus == 0 && s->N >= pc->min_train_gpus &&
            s->N >= pc->min_rollout_gpus)
            s->splits[s->n_splits++] = (struct plan_split){.n_train = s->N, .n_roll = s->N};
    } else {
        for (int n = pc->granularity_gpus; n < s->N; n += pc->granularity_gpus)
            if (n >= pc->min_train_gpus && s->N - n >= pc->min_rollout_gpus)
                s->splits[s->n_splits++] = (struct plan_split){.n_train = n, .n_roll = s->N - n};
    }
    for (size_t i = 0; i < s->n_splits; i++)
        split_prepare(s, &s->splits[i]);
    s->stats.splits = (double)s->n_splits;
}

/* ---- async ---------------------------------------------------------------------------------- */

/* The least T_train of split sp if it can beat (cutoff, eq), else +inf. */
static double train_min(struct plan_solver *s, struct plan_split *sp, double cutoff, bool eq)
{
    size_t order[PLAN_LAYOUTS_MAX], n = 0;
    for (size_t i = 0; i < sp->n_layouts; i++)
        if (sp->lwhy[i] == PLAN_WHY_NONE)
            order[n++] = i;
    for (size_t a = 1; a < n; a++) /* insertion sort by bound: n <= 144 */
        for (size_t b = a; b > 0 && sp->lbound[order[b]] < sp->lbound[order[b - 1]]; b--) {
            size_t tmp = order[b];
            order[b] = order[b - 1];
            order[b - 1] = tmp;
        }
    double best = INFINITY;
    for (size_t k = 0;
         k < n && sp->lbound[order[k]] < best && beats(sp->lbound[order[k]], cutoff, eq); k++)
        best = fmin(best, layout_time(s, sp, order[k]));
    return beats(best, cutoff, eq) ? best : INFINITY;
}

/* The proven relative gap of objective obj: what the budget left open, and at most
 * 1 − 1/(1 + plan.gap_tolerance) when a tolerance let the search discard candidates that were
 * not proven worse than obj, only than obj / (1 + tolerance). */
static double proven_gap(const struct plan_solver *s, double obj)
{
    double tol = s->cfg->plan.gap_tolerance;
    double gap = s->stats.stopped ? fmax(0.0, (obj - s->open_lb) / obj) : 0.0;
    return fmax(gap, tol / (1.0 + tol));
}

struct incumbent {
    double obj;
    struct plan_split *sp;
    int witness[PLAN_NTP]; /* a multiset attaining the objective */
};

static bool inc_beaten(const struct incumbent *inc, double obj, const struct plan_split *sp)
{
    return obj < inc->obj || (obj == inc->obj && (!inc->sp || sp->n_train < inc->sp->n_train));
}

/*
 * Async: whether some multiset of split sp may have a rollout side that beats (cutoff, eq),
 * decided by the rules of docs/planner.md §3.3 alone, with the train side at its bound
 * lb_train unless it is known (the seeded split's; every rule's bound only falls with the
 * train side): a split that cannot is left before its training layouts are timed, which costs
 * more than the probe. Sets *stopped when the budget stopped it.
 */
static bool split_may_beat(struct plan_solver *s, struct plan_split *sp, unsigned classes,
                           double cutoff, bool eq, bool *stopped)
{
    struct query q = {.cutoff = cutoff, .cutoff_eq = eq, .classes = classes, .probe = true};
    double known = sp->train_s;
    sp->train_s = isnan(known) ? sp->lb_train : known;
    *stopped = !roll_search(s, sp, &q);
    if (*stopped)
        s->open_lb = fmin(s->open_lb, fmax(sp->lb_train, q.open_lb));
    sp->train_s = known;
    return q.found;
}

/*
 * Sets split sp's train side to tt (finite: the least of its layouts' times) and, for the
 * first layout in tie-break order that takes it (the one async_tiebreak picks), its time on
 * each batch of an admission in finish order, which the span charges.
 */
static void set_train_side(struct plan_solver *s, struct plan_split *sp, double tt)
{
    sp->train_s = tt;
    if (sp->train_order || s->roll.job.interval < 2)
        return;
    for (size_t i = 0; i < sp->n_layouts; i++)
        if (sp->lwhy[i] == PLAN_WHY_NONE && sp->lbound[i] <= tt && layout_time(s, sp, i) == tt) {
            double *w = xmallocarray((size_t)s->roll.job.interval, sizeof *w);
            if (plan_train_order(&s->train, &sp->layouts[i], w))
                sp->train_order = w;
            else
                free(w);
            return;
        }
}

/* Solves split sp against the incumbent. Returns false when the budget stopped it. */
static bool solve_split(struct plan_solver *s, struct plan_split *sp, unsigned classes,
                        struct incumbent *inc)
{
    bool eq = !inc->sp || sp->n_train < inc->sp->n_train, stopped = false;
    if (!counts_given(s) && !split_may_beat(s, sp, classes, target(s, inc->obj), eq, &stopped))
        return !stopped;
    double tt = train_min(s, sp, target(s, inc->obj), eq);
    if (isinf(tt))
        return true;
    set_train_side(s, sp, tt); /* finite: the split's least (train_min) */
    struct query q = {.cutoff = target(s, inc->obj),
                      .cutoff_eq = eq,
                      .early = tt * (1.0 + s->cfg->plan.gap_tolerance),
                      .classes = classes};
    if (counts_given(s)) {
        int c[PLAN_NTP];
        if (!given_counts(s, sp, c))
            return true;
        q.best.v = plan_memo_score(s, sp, c, NAN)->t_s;
        memcpy(q.best.c, c, sizeof c);
        q.found = beats(fmax(tt, q.best.v), inc->obj, eq);
    } else if (!roll_search(s, sp, &q)) {
        s->open_lb = fmin(s->open_lb, fmax(tt, q.open_lb));
        return false;
    }
    if (q.found && inc_beaten(inc, fmax(tt, q.best.v), sp)) {
        inc->obj = fmax(tt, q.best.v);
        inc->sp = sp;
        memcpy(inc->witness, q.best.c, sizeof q.best.c);
    }
    return true;
}

/*
 * A first incumbent, so that a search the budget stops early still has a plan: on split sp
 * (the one with the least bound), every valid class's multiset with the most large instances
 * (each size from the largest down at the most that packs). They are scored whatever the
 * budget only until one gives a plan, so that plan.max_scored stops the search where it says.
 */
static void seed(struct plan_solver *s, struct plan_split *sp, unsigned classes,
                 struct incumbent *inc)
{
    double tt = train_min(s, sp, INFINITY, true);
    if (isinf(tt))
        sp->train_s = tt;
    else
        set_train_side(s, sp, tt);
    for (unsigned cls = 1; !isinf(tt) && !counts_given(s) && cls < CLASSES; cls++) {
        struct box b;
        root_box(sp, cls, &b);
        bool ok = classes >> cls & 1 && tighten(sp, &b);
        for (int t = PLAN_NTP - 1; ok && t > lowest(cls); t--) {
            b.lo[t] = b.hi[t];
            ok = tighten(sp, &b);
        }
        if (!ok)
            continue;
        if (inc->sp && budget_gone(s))
            break;
        double cd[PLAN_NTP];
        int c[PLAN_NTP];
        corner(sp, &b, cd);
        for (int t = 0; t < PLAN_NTP; t++)
            c[t] = (int)cd[t];
        double obj = fmax(tt, plan_memo_score(s, sp, c, NAN)->t_s);
        if (inc_beaten(inc, obj, sp)) {
            inc->obj = obj;
            inc->sp = sp;
            memcpy(inc->witness, c, sizeof c);
        }
    }
}

static int split_cmp(const void *a, const void *b)
{
    const struct plan_split *x = *(struct plan_split *const *)a,
                            *y = *(struct plan_split *const *)b;
    if (x->lb != y->lb)
        return x->lb < y->lb ? -1 : 1;
    return x->n_train - y->n_train;
}

/* The tie-break on the winning split: the fastest layout (the first in order among equals:
 * the rollout side's span charges the split's least train side), then the fewest instances
 * with a rollout side <= obj. */
static void async_tiebreak(struct plan_solver *s, const struct incumbent *inc, unsigned classes,
                           size_t *layout, int counts[PLAN_NTP])
{
    struct plan_split *sp = inc->sp;
    for (size_t i = 0; i < sp->n_layouts; i++)
        if (sp->lwhy[i] == PLAN_WHY_NONE && sp->lbound[i] <= sp->train_s &&
            layout_time(s, sp, i) == sp->train_s) {
            *layout = i;
            break;
        }
    memcpy(counts, inc->witness, sizeof inc->witness);
    if (counts_given(s))
        return;
    struct query q = {.fewest = true, .limit = inc->obj, .classes = classes};
    if (roll_search(s, sp, &q) && q.found)
        memcpy(counts, q.best.c, sizeof q.best.c);
}

static bool search_async(struct plan_solver *s, const struct plan_split **split, size_t *layout,
                         int counts[PLAN_NTP])
{
    struct plan_split **order = xmallocarray(s->n_splits, sizeof *order);
    unsigned *classes = xmallocarray(s->n_splits, sizeof *classes);
    for (size_t i = 0; i < s->n_splits; i++) {
        struct plan_split *sp = &s->splits[i];
        classes[i] = valid_classes(s, sp);
        sp->lb_roll = classes[i] ? split_roll_lb(s, sp, classes[i]) : INFINITY;
        sp->lb = fmax(sp->lb_train, sp->lb_roll);
        order[i] = sp;
    }
    qsort(order, s->n_splits, sizeof *order, split_cmp);
    struct incumbent inc = {.obj = INFINITY};
    s->open_lb = INFINITY;
    if (s->n_splits > 0 && !isinf(order[0]->lb))
        seed(s, order[0], classes[order[0] - s->splits], &inc);
    size_t k = 0;
    for (; k < s->n_splits && !isinf(order[k]->lb); k++) {
        struct plan_split *sp = order[k];
        if (sp->lb > target(s, inc.obj) || !inc_beaten(&inc, sp->lb, sp))
            break;
        if (budget_gone(s)) { /* between splits too: a split's search may pop little */
            s->open_lb = fmin(s->open_lb, sp->lb);
            break;
        }
        if (!solve_split(s, sp, classes[sp - s->splits], &inc))
            break;
    }
    for (size_t j = k + (s->stats.stopped ? 1 : 0); s->stats.stopped && j < s->n_splits; j++)
        s->open_lb = fmin(s->open_lb, order[j]->lb);
    bool found = inc.sp != NULL;
    if (found) {
        *split = inc.sp;
        async_tiebreak(s, &inc, classes[inc.sp - s->splits], layout, counts);
        s->stats.gap = proven_gap(s, inc.obj);
    }
    free(order);
    free(classes);
    return found;
}

/* ---- colocated ------------------------------------------------------------------------------ */

/* y(layout, class) = T_train + T_switch, the switch to the slowest-to-reach TP of the class. */
static double coloc_y(struct plan_solver *s, struct plan_split *sp, size_t i, unsigned cls)
{
    double sw = 0.0;
    for (int t = 0; t < PLAN_NTP; t++)
        if (cls >> t & 1)
            sw = fmax(sw, plan_train_switch_s(&s->train, &sp->layouts[i], size_of(t)));
    return layout_time(s, sp, i) + sw;
}

static bool search_colocated(struct plan_solver *s, const struct plan_split **split, size_t *layout,
                             int counts[PLAN_NTP])
{
    if (s->n_splits == 0)
        return false;
    struct plan_split *sp = &s->splits[0];
    unsigned classes = valid_classes(s, sp);
    double best_y[CLASSES], roll_min[CLASSES];
    bool any_layout = false;
    for (unsigned cls = 0; cls < CLASSES; cls++) {
        best_y[cls] = roll_min[cls] = INFINITY;
        for (size_t i = 0; cls && i < sp->n_layouts; i++)
            if (sp->lwhy[i] == PLAN_WHY_NONE) {
                best_y[cls] = fmin(best_y[cls], coloc_y(s, sp, i, cls));
                any_layout = true;
            }
    }
    if (!any_layout)
        return false;
    /* phase 1: the least rollout time of every class that can reach the optimum */
    int witness[CLASSES][PLAN_NTP];
    double obj = INFINITY;
    s->open_lb = INFINITY;
    for (unsigned cls = 1; cls < CLASSES; cls++) {
        if (!(classes >> cls & 1))
            continue;
        struct query q = {
            .cutoff = target(s, obj), .cutoff_eq = true, .early = -INFINITY, .classes = 1u << cls};
        q.offset[cls] = best_y[cls];
        if (counts_given(s)) {
            int c[PLAN_NTP];
            if (given_counts(s, sp, c)) {
                q.best.v = plan_memo_score(s, sp, c, NAN)->t_s;
                memcpy(q.best.c, c, sizeof c);
                q.found = true;
            }
        } else if (!roll_search(s, sp, &q)) {
            s->open_lb = fmin(s->open_lb, q.open_lb);
        }
        if (q.found) {
            roll_min[cls] = q.best.v;
            memcpy(witness[cls], q.best.c, sizeof q.best.c);
            obj = fmin(obj, q.best.v + best_y[cls]);
        }
    }
    if (isinf(obj))
        return false;
    s->stats.gap = proven_gap(s, obj);
    /* phase 2: the first layout that attains obj with some class */
    *split = sp;
    for (size_t i = 0; i < sp->n_layouts; i++) {
        if (sp->lwhy[i] != PLAN_WHY_NONE)
            continue;
        bool hit = false;
        for (unsigned cls = 1; cls < CLASSES && !hit; cls++)
            hit = !isinf(roll_min[cls]) && roll_min[cls] + coloc_y(s, sp, i, cls) == obj;
        if (hit) {
            *layout = i;
            break;
        }
    }
    /* phase 3: the fewest instances attaining obj with that layout (a witness of phase 1 when
     * the budget stops it) */
    struct query q = {.fewest = true, .limit = obj};
    for (unsigned cls = CLASSES; cls-- > 1;)
        if (!isinf(roll_min[cls]) && roll_min[cls] + coloc_y(s, sp, *layout, cls) == obj) {
            q.classes |= 1u << cls;
            q.offset[cls] = coloc_y(s, sp, *layout, cls);
            memcpy(counts, witness[cls], sizeof witness[cls]);
        }
    if (!counts_given(s) && roll_search(s, sp, &q) && q.found)
        memcpy(counts, q.best.c, sizeof q.best.c);
    return true;
}

bool plan_search(struct plan_solver *s, const struct plan_split **split, size_t *layout,
                 int counts[PLAN_NTP])
{
    build_splits(s);
    bool found = s->colocated ? search_colocated(s, split, layout, counts)
                              : search_async(s, split, layout, counts);
    s->stats.train_pruned = s->stats.train_space - s->stats.train_scored;
    s->stats.rollout_pruned = s->stats.rollout_space - s->stats.rollout_scored;
    return found;
}
