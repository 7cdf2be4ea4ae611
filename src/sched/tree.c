/*
 * Prefix tree nodes and the Kaplan-Meier estimator over their windows; see tree.h and the
 * estimator's rationale in model.h.
 *
 * A window is kept twice in one allocation: as a ring in arrival order (which sample to drop,
 * and the export's order) and sorted in the estimator's order, updated by one binary search and
 * one memmove per sample. The estimator therefore never sorts: the global depth nodes change
 * with every trajectory learnt and are read at every routing decision, and sorting their 200
 * samples there was most of a C-MLFQ run's time. The p90 is cached per node and recomputed
 * only after the window changes, so look-ups (the routing hot path) read a field.
 *
 * Every sum of the estimator is taken in one documented order (ascending samples, a node's
 * terms before its parent's), whatever shortcut computes it: results are bit-for-bit those of
 * the plain definitions. A shortcut may skip a term only when the term is +0, which changes no
 * sum of non-negative masses.
 */
#include "sched/tree.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

size_t sched_tree_init(struct sched_tree *t, uint64_t prompt)
{
    memset(t, 0, sizeof *t);
    t->prompt = prompt;
    vec_reserve(&t->nodes, 1);
    memset(&t->nodes.v[0], 0, sizeof t->nodes.v[0]);
    t->nodes.n = 1;
    t->bytes = sizeof *t + t->nodes.cap * sizeof(struct sched_node);
    return t->bytes;
}

void sched_tree_free(struct sched_tree *t)
{
    for (size_t i = 0; i < t->nodes.n; i++)
        free(t->nodes.v[i].window);
    vec_free(&t->nodes);
    free(t->edges);
    t->edges = NULL;
    t->edge_slots = 0;
    t->bytes = 0;
}

/* Fibonacci hashing: the top bits of the key times 2^64 / golden ratio (slots a power of two,
 * at least 2). */
static size_t edge_home(uint32_t parent, uint32_t state, size_t slots)
{
    uint64_t key = ((uint64_t)parent << 32) | state;
    return (size_t)((key * 0x9e3779b97f4a7c15u) >> (64 - __builtin_ctzll(slots)));
}

uint32_t sched_tree_child(const struct sched_tree *t, uint32_t node, uint32_t state)
{
    if (!t->edges)
        return 0;
    for (size_t i = edge_home(node, state, t->edge_slots);; i = (i + 1) & (t->edge_slots - 1)) {
        const struct sched_edge *e = &t->edges[i];
        if (e->child == 0 || (e->parent == node && e->state == state))
            return e->child;
    }
}

static void edge_put(struct sched_edge *edges, size_t slots, struct sched_edge e)
{
    size_t i = edge_home(e.parent, e.state, slots);
    while (edges[i].child)
        i = (i + 1) & (slots - 1);
    edges[i] = e;
}

/* Slots the edge index needs to hold one more edge at load <= 1/2. */
static size_t edge_slots_for_next(const struct sched_tree *t)
{
    size_t slots = t->edge_slots ? t->edge_slots : 8;
    while (2 * t->nodes.n > slots) /* edges after the addition: nodes.n (the root has none) */
        slots *= 2;
    return slots;
}

size_t sched_tree_child_cost(const struct sched_tree *t)
{
    size_t cost = (edge_slots_for_next(t) - t->edge_slots) * sizeof(struct sched_edge);
    if (t->nodes.n < t->nodes.cap)
        return cost;
    size_t grown = t->nodes.cap * 2 > 8 ? t->nodes.cap * 2 : 8;
    return cost + (grown - t->nodes.cap) * sizeof(struct sched_node);
}

static void edges_grow(struct sched_tree *t)
{
    size_t slots = edge_slots_for_next(t);
    if (slots == t->edge_slots)
        return;
    struct sched_edge *edges = xcalloc(slots, sizeof *edges);
    for (size_t i = 0; i < t->edge_slots; i++)
        if (t->edges[i].child)
            edge_put(edges, slots, t->edges[i]);
    free(t->edges);
    t->bytes += (slots - t->edge_slots) * sizeof *edges;
    t->edges = edges;
    t->edge_slots = slots;
}

uint32_t sched_tree_add_child(struct sched_tree *t, uint32_t node, uint32_t state)
{
    edges_grow(t);
    size_t old_cap = t->nodes.cap;
    vec_reserve(&t->nodes, t->nodes.n + 1);
    t->bytes += (t->nodes.cap - old_cap) * sizeof(struct sched_node);
    uint32_t c = (uint32_t)t->nodes.n++;
    struct sched_node *n = &t->nodes.v[c];
    memset(n, 0, sizeof *n);
    n->state = state;
    n->next_sibling = t->nodes.v[node].first_child;
    t->nodes.v[node].first_child = c;
    edge_put(t->edges, t->edge_slots, (struct sched_edge){node, state, c});
    return c;
}

uint32_t sched_node_window_at(const struct sched_node *n, unsigned i)
{
    return n->window[(n->win_head + i) % n->win_cap];
}

/* The window sorted: ascending value, and at a tie exact before censored (a censored x means
 * "> x"), which is the order of the sample rotated left by one bit. */
static const uint32_t *sorted_of(const struct sched_node *n)
{
    return n->window + n->win_cap;
}

static uint32_t order_key(uint32_t x)
{
    return x << 1 | x >> 31;
}

/* Index of the first sorted entry whose key is not below x's (below: strictly). */
static unsigned sorted_bound(const uint32_t *v, unsigned n, uint32_t x, bool after_equal)
{
    uint32_t key = order_key(x);
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        uint32_t k = order_key(v[mid]);
        if (k < key || (after_equal && k == key))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Replaces old (present; ignored when drop is false) by x in the sorted copy of n samples,
 * moving only the entries between their places. */
static void sorted_replace(uint32_t *v, unsigned n, bool drop, uint32_t old, uint32_t x)
{
    unsigned j = sorted_bound(v, n, x, true); /* x's place with old still there */
    unsigned i = drop ? sorted_bound(v, n, old, false) : n;
    if (i < j) { /* old lies below: the entries between move down over it */
        j--;
        memmove(v + i, v + i + 1, (j - i) * sizeof *v);
    } else { /* old lies at or above x's place (or is none): they move up over it */
        memmove(v + j + 1, v + j, (i - j) * sizeof *v);
    }
    v[j] = x;
}

size_t sched_node_grow_cost(const struct sched_node *n)
{
    if (n->win_n < n->win_cap || n->win_cap >= SCHED_TREE_WINDOW)
        return 0;
    unsigned grown = n->win_cap ? n->win_cap * 2u : 4u;
    if (grown > SCHED_TREE_WINDOW)
        grown = SCHED_TREE_WINDOW;
    return (grown - n->win_cap) * 2 * sizeof(uint32_t); /* ring and sorted copy */
}

/* Grows n's storage to cap entries per copy, keeping the ring's order from index 0. */
static void window_grow(struct sched_node *n, unsigned cap)
{
    uint32_t *w = xmallocarray(2 * (size_t)cap, sizeof *w);
    for (unsigned i = 0; i < n->win_n; i++)
        w[i] = sched_node_window_at(n, i);
    if (n->win_n)
        memcpy(w + cap, sorted_of(n), n->win_n * sizeof *w);
    free(n->window);
    n->window = w;
    n->win_cap = (uint8_t)cap;
    n->win_head = 0;
}

void sched_node_window_push(struct sched_tree *t, uint32_t node, uint32_t sample, bool grow_ok)
{
    struct sched_node *n = &t->nodes.v[node];
    size_t grow = sched_node_grow_cost(n);
    if (grow && grow_ok) {
        window_grow(n, n->win_cap + (unsigned)(grow / (2 * sizeof(uint32_t))));
        t->bytes += grow;
    }
    uint32_t *sorted = n->window + n->win_cap;
    if (n->win_n < n->win_cap) {
        /* Not full yet: the ring is contiguous from index 0 (head stays 0). */
        sorted_replace(sorted, n->win_n, false, 0, sample);
        n->window[n->win_n++] = sample;
    } else if (n->win_cap > 0) {
        /* Full (at SCHED_TREE_WINDOW, or capped by memory): overwrite the oldest. */
        sorted_replace(sorted, n->win_n, true, n->window[n->win_head], sample);
        n->window[n->win_head] = sample;
        n->win_head = (uint8_t)((n->win_head + 1) % n->win_cap);
    }
    n->p90_stale = true;
    n->mix_stale = true;
}

/*
 * Fills mass[] with the Kaplan-Meier probability mass of each of the k sorted samples s
 * (Efron's redistribute-to-the-right). Returns one past the largest exact sample.
 */
static unsigned km_masses(const uint32_t *s, unsigned k, double *mass)
{
    unsigned last_exact = k;
    while (last_exact > 0 && (s[last_exact - 1] & SCHED_SAMPLE_CENSORED))
        last_exact--;
    double cur = 1.0 / k; /* mass each not-yet-visited sample holds */
    unsigned i = 0;
    for (; i + 1 < last_exact; i++) {
        if (s[i] & SCHED_SAMPLE_CENSORED) {
            cur += cur / (double)(k - 1 - i);
            mass[i] = 0.0;
        } else {
            mass[i] = cur;
        }
    }
    for (; i < k; i++) /* past the largest exact sample every sample keeps its mass */
        mass[i] = cur;
    return last_exact;
}

/* The Kaplan-Meier p90 of the k > 0 sorted samples s. */
static uint32_t km_p90(const uint32_t *s, unsigned k)
{
    double mass[SCHED_TREE_WINDOW], cum = 0;
    km_masses(s, k, mass);
    for (unsigned i = 0; i < k; i++) {
        cum += mass[i];
        if (cum >= 0.9 - 1e-12)
            return s[i] & SCHED_SAMPLE_MAX;
    }
    return s[k - 1] & SCHED_SAMPLE_MAX;
}

uint32_t sched_node_p90(struct sched_node *n)
{
    if (n->p90_stale) {
        n->p90_tokens = n->win_n ? km_p90(sorted_of(n), n->win_n) : 0;
        n->p90_stale = false;
    }
    return n->p90_tokens;
}

void sched_km_of(const struct sched_node *n, struct sched_km *km)
{
    km->k = n->win_n;
    if (km->k)
        memcpy(km->s, sorted_of(n), km->k * sizeof *km->s);
    km->last_exact = km_masses(km->s, km->k, km->mass);
    km->above[km->k] = 0;
    for (unsigned i = km->k; i-- > 0;)
        km->above[i] = km->above[i + 1] + km->mass[i];
}

/* Index of the first of the k sorted samples s at or after from above c (value strictly
 * greater); every sample before from is at most c. */
static unsigned first_above(const uint32_t *s, unsigned k, unsigned from, uint32_t c)
{
    unsigned lo = from, hi = k;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if ((s[mid] & SCHED_SAMPLE_MAX) > c)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

double sched_node_mean_above(const struct sched_node *n, uint32_t c)
{
    if (!n->win_n)
        return (double)c;
    const uint32_t *s = sorted_of(n);
    double mass[SCHED_TREE_WINDOW];
    unsigned k = n->win_n, last_exact = km_masses(s, k, mass), first = first_above(s, k, 0, c);
    if (first >= last_exact)
        return (double)c; /* no exact sample above c */
    double num = 0, den = 0;
    for (unsigned i = first; i < k; i++) {
        num += mass[i] * (s[i] & SCHED_SAMPLE_MAX);
        den += mass[i];
    }
    return num / den;
}

/*
 * Point masses of a mixture, ascending by tokens, and their total summed in that order. A
 * sentinel above every sample follows the last, so a walk can stop on tokens alone.
 */
struct atoms {
    unsigned n;
    double total;
    uint32_t tokens[2 * SCHED_TREE_WINDOW + 1];
    double mass[2 * SCHED_TREE_WINDOW + 1];
};

/* Ends a at n atoms summing to total, and places the sentinel. */
static void atoms_seal(struct atoms *a, unsigned n, double total)
{
    a->n = n;
    a->total = total;
    a->tokens[n] = UINT32_MAX; /* above SCHED_SAMPLE_MAX */
    a->mass[n] = 0;
}

/*
 * The censored samples of a window whose weight spreads over ref's distribution, as the
 * coefficients of that spread: ref's sample j and every one above it receive coef per unit of
 * their mass (entries by ascending j, one per j).
 */
struct spread {
    unsigned n;
    unsigned j[SCHED_TREE_WINDOW];
    double coef[SCHED_TREE_WINDOW];
};

/* Adds to sp the spread of share over ref's samples from j on. */
static void spread_add(struct spread *sp, const struct sched_km *ref, unsigned j, double share)
{
    if (sp->n && sp->j[sp->n - 1] == j) {
        sp->coef[sp->n - 1] += share / ref->above[j];
        return;
    }
    sp->j[sp->n] = j;
    sp->coef[sp->n++] = share / ref->above[j];
}

/*
 * Splits n's distribution at weight w: each exact sample of its window at w / win_n becomes an
 * atom of a (as does a censored sample c when no exact sample of ref lies above c), and each
 * other censored sample's share goes to sp, to be spread over ref's samples above c. The
 * window is sorted, so censored samples come in ascending order and their first sample of ref
 * above never moves down.
 */
static void window_atoms(const struct sched_node *n, const struct sched_km *ref, double w,
                         struct atoms *a, struct spread *sp)
{
    double share = w / n->win_n, total = 0;
    unsigned k = 0, from = 0;
    const uint32_t *sorted = sorted_of(n);
    sp->n = 0;
    for (unsigned i = 0; i < n->win_n; i++) {
        uint32_t x = sorted[i], c = x & SCHED_SAMPLE_MAX;
        if (x & SCHED_SAMPLE_CENSORED) {
            from = first_above(ref->s, ref->k, from, c);
            if (from < ref->last_exact && ref->above[from] > 0) {
                spread_add(sp, ref, from, share);
                continue;
            }
        }
        a->tokens[k] = c;
        a->mass[k++] = share;
        total += share;
    }
    atoms_seal(a, k, total);
}

/* Merges the atoms of a and b into out, a's first at a tie. */
static void merge_atoms(const struct atoms *a, const struct atoms *b, struct atoms *out)
{
    unsigned i = 0, j = 0, o = 0;
    double total = 0;
    for (; i < a->n || j < b->n; o++) {
        bool from_a = a->tokens[i] <= b->tokens[j]; /* a sentinel is above every atom */
        out->tokens[o] = from_a ? a->tokens[i] : b->tokens[j];
        total += out->mass[o] = from_a ? a->mass[i++] : b->mass[j++];
    }
    atoms_seal(out, o, total);
}

/*
 * The smallest value at which the cumulative mass of the atoms a and on_ref (the masses of ref's
 * sorted samples), taken in ascending order with atoms first at a tie, reaches 0.9 of total (a's
 * total, then on_ref's added in order).
 */
static uint32_t mixture_p90(const struct atoms *a, const struct sched_km *ref, const double *on_ref,
                            double total)
{
    double cum = 0, goal = 0.9 * total - 1e-12;
    unsigned i = 0;
    for (unsigned j = 0; j < ref->k; j++) {
        uint32_t tokens = ref->s[j] & SCHED_SAMPLE_MAX;
        for (; a->tokens[i] <= tokens; i++) /* stops at the sentinel */
            if ((cum += a->mass[i]) >= goal)
                return a->tokens[i];
        if ((cum += on_ref[j]) >= goal)
            return tokens;
    }
    for (; i < a->n; i++)
        if ((cum += a->mass[i]) >= goal)
            return a->tokens[i];
    /* Not reached unless a mass is NaN: the last value of the run, as the goal's search ends. */
    uint32_t ref_last = ref->k ? ref->s[ref->k - 1] & SCHED_SAMPLE_MAX : 0;
    return a->n && (!ref->k || a->tokens[a->n - 1] > ref_last) ? a->tokens[a->n - 1] : ref_last;
}

/* The weights of n, parent and ref in n's shrunk estimate (see sched_node_estimate). */
static void shrink_weights(const struct sched_node *n, const struct sched_node *parent,
                           uint32_t shrink_visits, double w[3])
{
    double k = shrink_visits;
    bool all = shrink_visits == SCHED_SHRINK_ALL;
    w[0] = all ? 0 : n->visits / (n->visits + k);
    w[1] = parent && !all ? (1 - w[0]) * parent->visits / (parent->visits + k) : 0;
    w[2] = 1 - w[0] - w[1];
}

/* The first sample of ref from which sp's coefficient next grows (from entry e on), or ref->k. */
static unsigned spread_next(const struct spread *sp, unsigned e, const struct sched_km *ref)
{
    return e < sp->n ? sp->j[e] : ref->k;
}

/*
 * Fills on_ref[j] with the mass the mixture puts on ref's sample j: own's spread, then up's,
 * then ref's own share w_ref, added in that order (a spread without entries, or w_ref 0, adds
 * +0, which changes no sum). Returns total plus each on_ref[j] in ascending j.
 */
static double ref_masses(const struct sched_km *ref, const struct spread *own,
                         const struct spread *up, double w_ref, double total, double *on_ref)
{
    double own_run = 0, up_run = 0; /* the coefficients reached, summed in ascending j */
    unsigned eo = 0, eu = 0;
    for (unsigned j = 0; j < ref->k;) {
        if (spread_next(own, eo, ref) == j)
            own_run += own->coef[eo++];
        if (spread_next(up, eu, ref) == j)
            up_run += up->coef[eu++];
        unsigned next_o = spread_next(own, eo, ref), next_u = spread_next(up, eu, ref);
        for (unsigned end = next_o < next_u ? next_o : next_u; j < end; j++) {
            double mass = ref->mass[j];
            total += on_ref[j] = own_run * mass + up_run * mass + w_ref * mass;
        }
    }
    return total;
}

/* The p90 of n's shrunk distribution; ref is not n and shrink_visits is 0 unless ref. */
static uint32_t shrunk_p90(struct sched_node *n, const struct sched_node *parent,
                           const struct sched_node *ref, const struct sched_km *ref_km,
                           uint32_t shrink_visits, const double w[3])
{
    uint32_t parent_visits = parent ? parent->visits : 0;
    if (!n->mix_stale && n->mix_ref_visits == ref->visits &&
        n->mix_parent_visits == parent_visits && n->mix_shrink_visits == shrink_visits)
        return n->mix_p90_tokens;
    static_assert(SCHED_TREE_WINDOW <= 255, "window counts are bytes");
    struct atoms own, up, all;
    struct spread own_spread, up_spread;
    double on_ref[SCHED_TREE_WINDOW];
    const struct atoms *atoms = &own;
    window_atoms(n, ref_km, w[0], &own, &own_spread);
    up_spread.n = 0; /* without a parent, nothing to spread */
    if (parent) {
        window_atoms(parent, ref_km, w[1], &up, &up_spread);
        merge_atoms(&own, &up, &all);
        atoms = &all;
    }
    double total = ref_masses(ref_km, &own_spread, &up_spread, w[2], atoms->total, on_ref);
    n->mix_p90_tokens = mixture_p90(atoms, ref_km, on_ref, total);
    n->mix_stale = false;
    n->mix_ref_visits = ref->visits;
    n->mix_parent_visits = parent_visits;
    n->mix_shrink_visits = shrink_visits;
    return n->mix_p90_tokens;
}

void sched_node_estimate(struct sched_node *n, struct sched_node *parent,
                         const struct sched_node *ref, const struct sched_km *ref_km,
                         uint32_t shrink_visits, double *mean, uint32_t *p90)
{
    if (n == ref || !ref) {
        *mean = n->mean_tokens;
        *p90 = sched_node_p90(n);
        return;
    }
    if (parent == ref || !shrink_visits)
        parent = NULL;
    if (!ref->visits)
        shrink_visits = 0;
    double w[3] = {1, 0, 0};
    if (shrink_visits)
        shrink_weights(n, parent, shrink_visits, w);
    *mean =
        w[0] * n->mean_tokens + (parent ? w[1] * parent->mean_tokens : 0) + w[2] * ref->mean_tokens;
    *p90 = shrunk_p90(n, parent, ref, ref_km, shrink_visits, w);
}

void sched_node_add(struct sched_tree *t, uint32_t node, uint32_t tokens, bool censored,
                    double imputed, bool grow_ok)
{
    struct sched_node *n = &t->nodes.v[node];
    if (tokens > SCHED_SAMPLE_MAX)
        tokens = SCHED_SAMPLE_MAX;
    double value = censored ? imputed : (double)tokens;
    n->visits++;
    n->mean_tokens += (value - n->mean_tokens) / n->visits;
    sched_node_window_push(t, node, tokens | (censored ? SCHED_SAMPLE_CENSORED : 0), grow_ok);
}
