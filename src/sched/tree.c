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
 */
#include "sched/tree.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/rng.h"

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

static size_t edge_home(uint32_t parent, uint32_t state, size_t slots)
{
    return (size_t)rng_mix64(((uint64_t)parent << 32) | state) & (slots - 1);
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

/* Replaces old (present; ignored when drop is false) by x in the sorted copy of n samples. */
static void sorted_replace(uint32_t *v, unsigned n, bool drop, uint32_t old, uint32_t x)
{
    if (drop) {
        unsigned i = sorted_bound(v, n, old, false);
        memmove(v + i, v + i + 1, (n - i - 1) * sizeof *v);
        n--;
    }
    unsigned j = sorted_bound(v, n, x, true);
    memmove(v + j + 1, v + j, (n - j) * sizeof *v);
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
 * Copies n's sorted window into s[] and fills mass[] with the Kaplan-Meier probability mass of
 * each sample (Efron's redistribute-to-the-right). Returns the number of samples.
 */
static unsigned km_masses(const struct sched_node *n, uint32_t *s, double *mass)
{
    unsigned k = n->win_n;
    if (k == 0)
        return 0;
    memcpy(s, sorted_of(n), k * sizeof *s);
    unsigned last_exact = 0; /* one past the largest exact sample */
    for (unsigned i = 0; i < k; i++)
        if (!(s[i] & SCHED_SAMPLE_CENSORED))
            last_exact = i + 1;
    double cur = 1.0 / k; /* mass each not-yet-visited sample holds */
    for (unsigned i = 0; i < k; i++) {
        bool censored = s[i] & SCHED_SAMPLE_CENSORED;
        if (censored && i + 1 < last_exact) {
            cur += cur / (double)(k - 1 - i);
            mass[i] = 0.0;
        } else {
            mass[i] = cur;
        }
    }
    return k;
}

double sched_node_mean_above(const struct sched_node *n, uint32_t c)
{
    uint32_t s[SCHED_TREE_WINDOW];
    double mass[SCHED_TREE_WINDOW];
    unsigned k = km_masses(n, s, mass);
    double num = 0, den = 0;
    bool exact_above = false;
    for (unsigned i = 0; i < k; i++) {
        uint32_t v = s[i] & SCHED_SAMPLE_MAX;
        if (v > c) {
            num += mass[i] * v;
            den += mass[i];
            exact_above |= !(s[i] & SCHED_SAMPLE_CENSORED);
        }
    }
    return exact_above ? num / den : (double)c;
}

uint32_t sched_node_p90(struct sched_node *n)
{
    if (!n->p90_stale)
        return n->p90_tokens;
    uint32_t s[SCHED_TREE_WINDOW];
    double mass[SCHED_TREE_WINDOW];
    unsigned k = km_masses(n, s, mass);
    double cum = 0;
    uint32_t p90 = k ? s[k - 1] & SCHED_SAMPLE_MAX : 0;
    for (unsigned i = 0; i < k; i++) {
        cum += mass[i];
        if (cum >= 0.9 - 1e-12) {
            p90 = s[i] & SCHED_SAMPLE_MAX;
            break;
        }
    }
    n->p90_tokens = p90;
    n->p90_stale = false;
    return p90;
}

void sched_km_of(const struct sched_node *n, struct sched_km *km)
{
    km->k = km_masses(n, km->s, km->mass);
    km->last_exact = 0;
    km->above[km->k] = 0;
    for (unsigned i = km->k; i-- > 0;) {
        km->above[i] = km->above[i + 1] + km->mass[i];
        if (!km->last_exact && !(km->s[i] & SCHED_SAMPLE_CENSORED))
            km->last_exact = i + 1;
    }
}

struct atom {
    uint32_t tokens;
    double mass;
};

/* Index of the first sample of km above c (value strictly greater). */
static unsigned km_first_above(const struct sched_km *km, uint32_t c)
{
    unsigned lo = 0, hi = km->k;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if ((km->s[mid] & SCHED_SAMPLE_MAX) > c)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/*
 * Adds n's distribution at weight w: each exact sample of its window at w / win_n to a (as
 * is a censored sample c when no exact sample of ref lies above c), and each other censored
 * sample's share to on_ref, spread over ref's samples above c. Returns the atoms appended,
 * in ascending order of tokens.
 */
static unsigned window_atoms(const struct sched_node *n, const struct sched_km *ref, double w,
                             struct atom *a, double *on_ref)
{
    double coef[SCHED_TREE_WINDOW + 1] = {0}; /* share per unit of ref mass, from index i on */
    double share = w / n->win_n;
    unsigned k = 0;
    const uint32_t *sorted = sorted_of(n);
    for (unsigned i = 0; i < n->win_n; i++) {
        uint32_t x = sorted[i], c = x & SCHED_SAMPLE_MAX;
        unsigned j = x & SCHED_SAMPLE_CENSORED ? km_first_above(ref, c) : ref->k;
        if (j < ref->last_exact && ref->above[j] > 0)
            coef[j] += share / ref->above[j];
        else
            a[k++] = (struct atom){c, share};
    }
    double run = 0;
    for (unsigned j = 0; j < ref->k; j++)
        on_ref[j] += (run += coef[j]) * ref->mass[j];
    return k;
}

/* Merges the ascending runs a[0..k) and b[0..l) into out, a's atoms first at a tie. */
static unsigned merge_atoms(const struct atom *a, unsigned k, const struct atom *b, unsigned l,
                            struct atom *out)
{
    unsigned i = 0, j = 0, o = 0;
    while (i < k || j < l)
        out[o++] = j == l || (i < k && a[i].tokens <= b[j].tokens) ? a[i++] : b[j++];
    return o;
}

/* The smallest value at which the cumulative mass of atoms a[0..k) (ascending) and on_ref
 * (the masses of ref's sorted samples) reaches 0.9 of their total. */
static uint32_t mixture_p90(const struct atom *a, unsigned k, const struct sched_km *ref,
                            const double *on_ref)
{
    double total = 0, cum = 0;
    for (unsigned i = 0; i < k; i++)
        total += a[i].mass;
    for (unsigned j = 0; j < ref->k; j++)
        total += on_ref[j];
    uint32_t last = 0;
    for (unsigned i = 0, j = 0; i < k || j < ref->k;) { /* merge the two ascending runs */
        bool from_a = j == ref->k || (i < k && a[i].tokens <= (ref->s[j] & SCHED_SAMPLE_MAX));
        last = from_a ? a[i].tokens : ref->s[j] & SCHED_SAMPLE_MAX;
        cum += from_a ? a[i++].mass : on_ref[j++];
        if (cum >= 0.9 * total - 1e-12)
            return last;
    }
    return last;
}

/* The weights of n, parent and ref in n's shrunk estimate (see sched_node_estimate). */
static void shrink_weights(const struct sched_node *n, const struct sched_node *parent,
                           uint32_t shrink_visits, double w[3])
{
    double k = shrink_visits;
    w[0] = n->visits / (n->visits + k);
    w[1] = parent ? (1 - w[0]) * parent->visits / (parent->visits + k) : 0;
    w[2] = 1 - w[0] - w[1];
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
    struct atom own[SCHED_TREE_WINDOW], up[SCHED_TREE_WINDOW], all[2 * SCHED_TREE_WINDOW];
    double on_ref[SCHED_TREE_WINDOW] = {0};
    unsigned k = window_atoms(n, ref_km, w[0], own, on_ref);
    unsigned l = parent ? window_atoms(parent, ref_km, w[1], up, on_ref) : 0;
    for (unsigned j = 0; shrink_visits && j < ref_km->k; j++)
        on_ref[j] += w[2] * ref_km->mass[j];
    n->mix_p90_tokens = mixture_p90(all, merge_atoms(own, k, up, l, all), ref_km, on_ref);
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
