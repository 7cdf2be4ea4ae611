/*
 * The learnt state of the router: trees, state interning, LRU caps, history and rebuilds;
 * see model.h (the estimator) and tree.h (the layout).
 *
 * A prompt tree's memory is charged to the model when it is created and as it grows, and
 * PROMPT_ENTRY_BYTES more for its index slots; the cap is enforced before anything
 * grows, never by failing an insert.
 */
#include "sched/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/obs.h"
#include "sched/tree.h"
#include "util/alloc.h"

#define PROMPT_ENTRY_BYTES 48 /* index slots of one prompt tree at load <= 1/2 */
#define SPREAD_NULL_SDS 2.0   /* empirical_k: how far beyond chance a spread must go to count */

void sched_model_config_default(struct sched_model_config *c)
{
    c->max_bytes = (size_t)256 << 20;
    c->history = 5000;
    c->max_states = 65536;
    c->learn_predictor = true;
    c->learn_service = true;
}

static int hist_cmp(const void *a, const void *b, void *ctx)
{
    const struct sched_hist *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

struct sched_model *sched_model_new(const struct sched_model_config *c)
{
    struct sched_model *m = xcalloc(1, sizeof *m);
    if (c)
        m->cfg = *c;
    else
        sched_model_config_default(&m->cfg);
    m->bytes = sched_tree_init(&m->global, 0);
    map_init(&m->state_ids);
    heap_init(&m->history, sizeof(struct sched_hist), hist_cmp, NULL);
    sched_pred_reset(&m->pred);
    sched_service_init(&m->service, SCHED_SERVICE_PROMPTS);
    m->depth_state = SCHED_STATE_NONE; /* interned when a depth path is first learnt */
    m->spread_known = true;
    m->version = 1; /* cached distributions start at 0: stale */
    return m;
}

void sched_hex_key(uint64_t v, char out[17])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 14; i >= 0; i -= 2, v >>= 8) { /* a byte at a time (exports only) */
        out[i] = hex[(v >> 4) & 15];
        out[i + 1] = hex[v & 15];
    }
    out[16] = '\0';
}

static void drop_prompt_tree(struct sched_model *m, struct sched_tree *t)
{
    intmap_del(&m->prompts, t->prompt);
    list_unlink(&m->lru, &t->lru);
    m->bytes -= t->bytes + PROMPT_ENTRY_BYTES;
    sched_tree_free(t);
    free(t);
}

static void clear_trees(struct sched_model *m)
{
    m->version++;
    m->spread.n = 0;
    m->spread_known = true;
    while (m->lru.front)
        drop_prompt_tree(m, sched_tree_of(m->lru.front));
    m->bytes -= m->global.bytes;
    sched_tree_free(&m->global);
    m->bytes += sched_tree_init(&m->global, 0);
}

static void free_history(struct sched_model *m)
{
    struct sched_hist h;
    while (heap_pop(&m->history, &h))
        free(h.s);
}

void sched_model_free(struct sched_model *m)
{
    if (!m)
        return;
    clear_trees(m);
    sched_tree_free(&m->global);
    intmap_free(&m->prompts);
    map_free(&m->state_ids);
    for (size_t i = 0; i < m->states.n; i++)
        free(m->states.v[i].key);
    vec_free(&m->states);
    vec_free(&m->depth_km);
    vec_free(&m->spread);
    free_history(m);
    heap_free(&m->history);
    sched_service_free(&m->service);
    free(m);
}

/* ---- states --------------------------------------------------------------------------------- */

/* Counts statuses and sizes in a key "tool:size:status|tool:size:status". */
static void parse_key_counts(const char *key, struct sched_state_info *info)
{
    for (const char *part = key; part && *part;) {
        const char *end = strchr(part, '|');
        size_t len = end ? (size_t)(end - part) : strlen(part);
        const char *status = NULL, *size = NULL;
        for (const char *p = part + len; p > part; p--)
            if (p[-1] == ':') {
                if (!status)
                    status = p;
                else if (!size) {
                    size = p;
                    break;
                }
            }
        for (int k = 0; status && k < SCHED_STATUS_COUNT; k++) {
            const char *name = sched_status_name((enum sched_status)k);
            if (strncmp(status, name, strlen(name)) == 0 && info->status_count[k] < UINT8_MAX)
                info->status_count[k]++;
        }
        for (int k = 0; size && k < SCHED_SIZE_COUNT; k++) {
            const char *name = sched_size_name((enum sched_size)k);
            if (strncmp(size, name, strlen(name)) == 0 && size[strlen(name)] == ':' &&
                info->size_count[k] < UINT8_MAX)
                info->size_count[k]++;
        }
        part = end ? end + 1 : NULL;
    }
}

/* Interns key; past max_states only when !capped (the depth key, which every tree needs). */
static uint32_t intern(struct sched_model *m, const char *key, bool capped)
{
    union map_value v;
    if (map_get(&m->state_ids, key, &v))
        return (uint32_t)v.i64;
    if (capped && m->states.n >= m->cfg.max_states)
        return SCHED_STATE_NONE;
    struct sched_state_info info = {.key = xstrdup(key)};
    parse_key_counts(key, &info);
    uint32_t id = (uint32_t)m->states.n;
    vec_push(&m->states, info);
    map_put(&m->state_ids, key, (union map_value){.i64 = id});
    if (strcmp(key, SCHED_DEPTH_KEY) == 0)
        m->depth_state = id;
    return id;
}

uint32_t sched_model_state(struct sched_model *m, const char *key)
{
    return intern(m, key, true);
}

const char *sched_model_state_key(const struct sched_model *m, uint32_t id)
{
    return id < m->states.n ? m->states.v[id].key : NULL;
}

/* ---- trees and caps ------------------------------------------------------------------------- */

bool sched_model_reserve(struct sched_model *m, size_t need, const struct sched_tree *keep)
{
    while (m->bytes + need > m->cfg.max_bytes) {
        struct sched_tree *victim = sched_tree_of(m->lru.back);
        if (victim && victim == keep)
            victim = sched_tree_of(victim->lru.prev);
        if (!victim)
            return false;
        drop_prompt_tree(m, victim);
        m->evictions++;
    }
    return true;
}

struct sched_tree *sched_model_prompt_tree(struct sched_model *m, uint64_t prompt, bool create)
{
    uint64_t v;
    if (intmap_get(&m->prompts, prompt, &v)) {
        struct sched_tree *t = (struct sched_tree *)(uintptr_t)v;
        list_move_front(&m->lru, &t->lru);
        return t;
    }
    if (!create)
        return NULL;
    struct sched_tree probe;
    size_t cost = sched_tree_init(&probe, prompt) + PROMPT_ENTRY_BYTES;
    if (!sched_model_reserve(m, cost, NULL)) {
        sched_tree_free(&probe);
        return NULL;
    }
    struct sched_tree *t = xmalloc(sizeof *t);
    *t = probe;
    intmap_put(&m->prompts, prompt, (uint64_t)(uintptr_t)t);
    list_push_front(&m->lru, &t->lru);
    m->bytes += cost;
    return t;
}

/* t's node at the end of the path (the depth path when depth): its index, or -1 when it does
 * not exist. */
static int64_t node_at(const struct sched_model *m, const struct sched_tree *t,
                       const uint32_t *states, size_t n, bool depth)
{
    uint32_t node = 0;
    for (size_t d = 0; d < n; d++) {
        uint32_t state = depth ? m->depth_state : states[d];
        if (state == SCHED_STATE_NONE || !(node = sched_tree_child(t, node, state)))
            return -1;
    }
    return node;
}

/* The node of t at the end of the depth path of length n, or NULL. */
static struct sched_node *depth_node(const struct sched_model *m, const struct sched_tree *t,
                                     size_t n)
{
    int64_t node = node_at(m, t, NULL, n, true);
    return node < 0 ? NULL : &t->nodes.v[node];
}

/* The remaining tokens of s after its d-th tool return (d = 0: the whole trajectory). */
static uint32_t remaining(const struct sched_traj_summary *s, size_t d)
{
    int64_t v = s->total_tokens - (d ? s->gen_before[d - 1] : 0);
    return (uint32_t)(v < SCHED_SAMPLE_MAX ? v : SCHED_SAMPLE_MAX);
}

/* Marks the cached distributions of depths 0..n stale: the global depth nodes a trajectory
 * with n tool returns is learnt into (it reaches no deeper one). */
static void depth_km_stale(struct sched_model *m, size_t n)
{
    for (size_t d = 0; d <= n && d < m->depth_km.n; d++)
        m->depth_km.v[d].version = 0;
}

/*
 * What a censored s enters the running means with after its d-th return, for d = 0..s->n:
 * E[X | X > c] under the global tree's depth node at depth d as it stands before s is learnt
 * (c when that node does not exist). Every node at a depth, in every tree and whatever its
 * size, imputes alike: a path node is then an unbiased subset of its depth node when the path
 * carries nothing, which the placebo check relies on (docs/routing.md).
 */
static void impute(const struct sched_model *m, const struct sched_traj_summary *s, double *out)
{
    for (size_t d = 0; d <= s->n; d++) {
        const struct sched_node *ref = depth_node(m, &m->global, d);
        out[d] = ref ? sched_node_mean_above(ref, remaining(s, d)) : (double)remaining(s, d);
    }
}

static void learn_node(struct sched_model *m, struct sched_tree *t, uint32_t node,
                       const struct sched_traj_summary *s, size_t d, const double *imputed)
{
    const struct sched_tree *keep = t == &m->global ? NULL : t;
    bool grow_ok = sched_model_reserve(m, sched_node_grow_cost(&t->nodes.v[node]), keep);
    size_t before = t->bytes;
    sched_node_add(t, node, remaining(s, d), s->censored, s->censored ? imputed[d] : 0, grow_ok);
    m->bytes += t->bytes - before;
}

/* Counts in depth d's spread the value x that took a global path node from (visits0, mean0) to
 * its present visits and mean. */
static void spread_add(struct sched_model *m, size_t d, const struct sched_node *n, double visits0,
                       double mean0, double x)
{
    while (m->spread.n <= d)
        vec_push(&m->spread, (struct sched_depth_spread){0});
    struct sched_depth_spread *sp = &m->spread.v[d];
    sp->samples++;
    sp->sum += x;
    sp->sum_sq += x * x;
    sp->node_sq += n->visits * n->mean_tokens * n->mean_tokens - visits0 * mean0 * mean0;
    sp->visits_sq += 2 * visits0 + 1;
    sp->nodes += visits0 == 0;
}

/* Learns the nodes below the root along s's path, or along the depth path when depth. */
static void path_learn(struct sched_model *m, struct sched_tree *t,
                       const struct sched_traj_summary *s, bool depth, const double *imputed)
{
    const struct sched_tree *keep = t == &m->global ? NULL : t;
    uint32_t node = 0;
    if (depth && m->depth_state == SCHED_STATE_NONE)
        intern(m, SCHED_DEPTH_KEY, false);
    for (size_t i = 0; i < s->n; i++) {
        uint32_t state = depth ? m->depth_state : s->states[i];
        uint32_t c = sched_tree_child(t, node, state);
        if (!c) {
            if (state == SCHED_STATE_NONE ||
                !sched_model_reserve(m, sched_tree_child_cost(t), keep))
                return;
            size_t before = t->bytes;
            c = sched_tree_add_child(t, node, state);
            m->bytes += t->bytes - before;
        }
        node = c;
        double visits0 = t->nodes.v[node].visits, mean0 = t->nodes.v[node].mean_tokens;
        learn_node(m, t, node, s, i + 1, imputed);
        if (t == &m->global && !depth)
            spread_add(m, i + 1, &t->nodes.v[node], visits0, mean0,
                       s->censored ? imputed[i + 1] : (double)remaining(s, i + 1));
    }
}

static bool is_depth_path(const struct sched_model *m, const struct sched_traj_summary *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->states[i] != m->depth_state)
            return false;
    return true;
}

static void tree_learn(struct sched_model *m, struct sched_tree *t,
                       const struct sched_traj_summary *s, const double *imputed)
{
    learn_node(m, t, 0, s, 0, imputed);
    path_learn(m, t, s, false, imputed);
    if (!is_depth_path(m, s))
        path_learn(m, t, s, true, imputed);
}

static void pred_learn(struct sched_model *m, const struct sched_traj_summary *s)
{
    double x[SCHED_PRED_DIM];
    /* Tool returns only: the start is always routed short, and its spread (it cannot tell
     * long trajectories from short ones) would swamp the residual the p90 comes from. */
    for (size_t i = 1; i <= s->n; i++) {
        int64_t gen = i ? s->gen_before[i - 1] : 0;
        double sib = s->sibling_mean_tokens ? s->sibling_mean_tokens[i] : NAN;
        sched_pred_features(m->states.v, s->states, i, gen, sib, x);
        sched_pred_add(&m->pred, x, (double)(s->total_tokens - gen));
    }
}

static void learn(struct sched_model *m, const struct sched_traj_summary *s)
{
    double *imputed = NULL;
    if (s->censored) {
        imputed = xmallocarray(s->n + 1, sizeof *imputed);
        impute(m, s, imputed);
    }
    depth_km_stale(m, s->n);
    struct sched_tree *pt = sched_model_prompt_tree(m, s->prompt, true);
    if (pt)
        tree_learn(m, pt, s, imputed);
    tree_learn(m, &m->global, s, imputed);
    if (m->cfg.learn_predictor)
        pred_learn(m, s);
    free(imputed);
}

/* ---- history -------------------------------------------------------------------------------- */

static struct sched_traj_summary *summary_copy(const struct sched_traj_summary *s)
{
    size_t n_sib = s->sibling_mean_tokens ? s->n + 1 : 0;
    size_t bytes = sizeof *s + s->n * (sizeof(int64_t) + sizeof(uint32_t)) + n_sib * sizeof(double);
    struct sched_traj_summary *c = xmalloc(bytes);
    *c = *s;
    char *p = (char *)(c + 1); /* 8-byte aligned: the 8-byte arrays first */
    int64_t *gen = (void *)p;
    double *sib = (void *)(p + s->n * sizeof *gen);
    uint32_t *states = (void *)(p + s->n * sizeof *gen + n_sib * sizeof *sib);
    if (s->n) {
        memcpy(gen, s->gen_before, s->n * sizeof *gen);
        memcpy(states, s->states, s->n * sizeof *states);
    }
    if (n_sib)
        memcpy(sib, s->sibling_mean_tokens, n_sib * sizeof *sib);
    c->gen_before = gen;
    c->sibling_mean_tokens = n_sib ? sib : NULL;
    c->states = states;
    return c;
}

static void remember(struct sched_model *m, const struct sched_traj_summary *s)
{
    if (m->cfg.history == 0)
        return;
    struct sched_hist h = {.start = s->start, .seq = m->history_seq++};
    if (heap_size(&m->history) >= m->cfg.history) {
        if (hist_cmp(heap_peek(&m->history), &h, NULL) > 0)
            return; /* older than everything kept */
        struct sched_hist old;
        heap_pop(&m->history, &old);
        free(old.s);
    }
    h.s = summary_copy(s);
    heap_push(&m->history, &h);
}

static int check_summary(const struct sched_model *m, const struct sched_traj_summary *s)
{
    if (s->total_tokens < 0 || (s->n && (!s->states || !s->gen_before)))
        return LIBRA_EINVAL;
    int64_t prev = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->gen_before[i] < prev || s->gen_before[i] > s->total_tokens)
            return LIBRA_EINVAL;
        if (s->states[i] != SCHED_STATE_NONE && s->states[i] >= m->states.n)
            return LIBRA_EINVAL;
        prev = s->gen_before[i];
    }
    return 0;
}

int sched_model_insert(struct sched_model *m, const struct sched_traj_summary *s)
{
    int rc = check_summary(m, s);
    if (rc)
        return rc;
    learn(m, s);
    remember(m, s);
    if (m->cfg.learn_service)
        sched_service_learn(&m->service, s->prompt, (double)s->total_tokens);
    return 0;
}

static int hist_qsort_cmp(const void *a, const void *b)
{
    return hist_cmp(a, b, NULL);
}

void sched_model_rebuild(struct sched_model *m)
{
    size_t n = heap_size(&m->history);
    struct sched_hist *order = xmallocarray(n ? n : 1, sizeof *order);
    if (n)
        memcpy(order, m->history.data, n * sizeof *order);
    qsort(order, n, sizeof *order, hist_qsort_cmp);
    clear_trees(m);
    sched_pred_reset(&m->pred);
    for (size_t i = 0; i < n; i++)
        learn(m, order[i].s);
    free(order);
}

/* ---- look-ups ------------------------------------------------------------------------------- */

/* Walks states from t's root; returns the depth matched and the node reached. */
static size_t walk(const struct sched_tree *t, const uint32_t *states, size_t n, uint32_t *node)
{
    uint32_t at = 0;
    size_t d = 0;
    for (; d < n; d++) {
        uint32_t c = sched_tree_child(t, at, states[d]);
        if (!c)
            break;
        at = c;
    }
    *node = at;
    return d;
}

/* Fills out from t's node, all but the p90 (the caller's: the node's own or its estimate's). */
static void fill(struct sched_estimate *out, const struct sched_tree *t, uint32_t node,
                 size_t depth, size_t n, bool from_prompt)
{
    const struct sched_node *nd = &t->nodes.v[node];
    out->found = nd->visits > 0;
    out->exact = out->found && depth == n;
    out->from_prompt = from_prompt;
    out->depth = (int)depth;
    out->visits = nd->visits;
    out->mean_tokens = nd->mean_tokens;
}

void sched_model_lookup(struct sched_model *m, uint64_t prompt, const uint32_t *states, size_t n,
                        struct sched_estimate *out)
{
    memset(out, 0, sizeof *out);
    out->mean_tokens = out->p90_tokens = NAN;
    struct sched_tree *pt = sched_model_prompt_tree(m, prompt, false);
    uint32_t pnode = 0, gnode = 0;
    size_t pd = pt ? walk(pt, states, n, &pnode) : 0;
    size_t gd = walk(&m->global, states, n, &gnode);
    /* The prompt tree's node when it matches the whole path; else the global tree's when it
     * does; else the deeper partial match, the prompt tree's on a tie. */
    bool use_prompt = pt && ((pd == n && pt->nodes.v[pnode].visits) || (gd < n && pd >= gd));
    struct sched_tree *t = use_prompt ? pt : &m->global;
    uint32_t node = use_prompt ? pnode : gnode;
    fill(out, t, node, use_prompt ? pd : gd, n, use_prompt);
    out->p90_tokens = sched_node_p90(&t->nodes.v[node]);
}

/* The Kaplan-Meier distribution of ref, the global tree's depth node at depth d, computed once
 * per change of that node. */
static const struct sched_km *depth_km(struct sched_model *m, size_t d,
                                       const struct sched_node *ref)
{
    while (m->depth_km.n <= d) {
        vec_reserve(&m->depth_km, m->depth_km.n + 1);
        m->depth_km.v[m->depth_km.n++].version = 0;
    }
    struct sched_depth_km *c = &m->depth_km.v[d];
    if (c->version != m->version) {
        sched_km_of(ref, &c->km);
        c->version = m->version;
    }
    return &c->km;
}

/*
 * The k of the global tree's path nodes at depth d under empirical shrinkage (docs/routing.md
 * "Empirical shrinkage"): the within-node variance over the between-node variance of their
 * means, by the method of moments (one-way random effects). The variance between counts only
 * beyond SPREAD_NULL_SDS standard deviations of what chance alone spreads the nodes' means
 * (Q's spread under no effect, sigma^2 sqrt(2 (J - 1))); with no more than that, or nothing to
 * compare, SCHED_SHRINK_ALL: the depth node answers. The within variance is never taken below
 * the depth's whole variance, which it equals when the paths say nothing and which stands in
 * where nearly every path is its own node. Rounded to whole visits (the node caches its
 * mixture by k). fixed when the sums do not describe the trees.
 */
static uint32_t empirical_k(const struct sched_model *m, size_t d, uint32_t fixed)
{
    if (!m->spread_known)
        return fixed;
    if (d >= m->spread.n || m->spread.v[d].nodes < 2)
        return SCHED_SHRINK_ALL;
    const struct sched_depth_spread *sp = &m->spread.v[d];
    double n = sp->samples, nodes = sp->nodes;
    double total = (sp->sum_sq - sp->sum * sp->sum / n) / (n - 1);
    double within = n > nodes ? (sp->sum_sq - sp->node_sq) / (n - nodes) : total;
    double var = within > total ? within : total;
    double q = sp->node_sq - sp->sum * sp->sum / n; /* visits x (mean - grand mean)^2, summed */
    double chance = var * ((nodes - 1) + SPREAD_NULL_SDS * sqrt(2 * (nodes - 1)));
    double between = (q - chance) / (n - sp->visits_sq / n);
    if (!(between > 0) || !(var / between < SCHED_SHRINK_ALL - 1.0))
        return SCHED_SHRINK_ALL;
    return (uint32_t)lround(var / between);
}

/* The global tree's nodes at the end of the estimate's path and of its depth path (-1: none):
 * every tree's answer refers to them, so each is walked once. */
struct global_at {
    int64_t path, depth;
};

/*
 * Fills out from t's node `at` at the end of the path (the depth path when depth) and returns
 * true when it exists with at least min_visits visits: sched_node_estimate with the global
 * tree's node on the same path as the parent of a prompt tree's node.
 */
static bool trusted(struct sched_model *m, struct sched_tree *t, int64_t at,
                    const struct global_at *g, size_t n, bool depth, const struct sched_lookup *opt,
                    struct sched_estimate *out)
{
    if (at < 0 || t->nodes.v[at].visits < (opt->min_visits ? opt->min_visits : 1))
        return false;
    int64_t same = depth ? g->depth : g->path;
    struct sched_node *parent = t == &m->global || same < 0 ? NULL : &m->global.nodes.v[same];
    struct sched_node *ref = g->depth < 0 ? NULL : &m->global.nodes.v[g->depth];
    fill(out, t, (uint32_t)at, n, n, t != &m->global);
    out->by_depth = depth;
    uint32_t p90;
    const struct sched_km *km = ref && ref != &t->nodes.v[at] ? depth_km(m, n, ref) : NULL;
    uint32_t k = opt->shrink_visits;
    if (opt->empirical_shrink && t == &m->global && !depth)
        k = empirical_k(m, n, k);
    sched_node_estimate(&t->nodes.v[at], parent, ref, km, k, &out->mean_tokens, &p90);
    out->p90_tokens = p90;
    return true;
}

void sched_model_estimate(struct sched_model *m, uint64_t prompt, const uint32_t *states, size_t n,
                          const struct sched_lookup *opt, struct sched_estimate *out)
{
    memset(out, 0, sizeof *out);
    out->mean_tokens = out->p90_tokens = NAN;
    struct sched_tree *pt = sched_model_prompt_tree(m, prompt, false);
    struct global_at g = {node_at(m, &m->global, states, n, false),
                          node_at(m, &m->global, states, n, true)};
    for (int depth = 0; depth < 2; depth++) { /* the path in either tree before any depth node */
        int64_t global = depth ? g.depth : g.path;
        if (pt && trusted(m, pt, node_at(m, pt, states, n, depth), &g, n, depth, opt, out))
            return;
        if (trusted(m, &m->global, global, &g, n, depth, opt, out))
            return;
    }
}

void sched_model_predict(struct sched_model *m, const struct sched_pred_features *f,
                         struct sched_estimate *out)
{
    memset(out, 0, sizeof *out);
    out->mean_tokens = out->p90_tokens = NAN;
    double x[SCHED_PRED_DIM];
    sched_pred_features(m->states.v, f->states, f->n, f->generated_tokens, f->sibling_mean_tokens,
                        x);
    if (!sched_pred_estimate(&m->pred, x, &out->mean_tokens, &out->p90_tokens))
        return;
    out->found = out->exact = true;
    out->depth = (int)f->n;
    out->visits = m->pred.n > UINT32_MAX ? UINT32_MAX : (uint32_t)m->pred.n;
}

const struct sched_service *sched_model_service(const struct sched_model *m)
{
    return &m->service;
}

void sched_model_stats(const struct sched_model *m, struct sched_model_stats *out)
{
    memset(out, 0, sizeof *out);
    out->trees = m->prompts.n;
    out->nodes = m->global.nodes.n;
    for (struct list_node *n = m->lru.front; n; n = n->next)
        out->nodes += sched_tree_of(n)->nodes.n;
    out->tree_bytes = m->bytes;
    out->history = heap_size(&m->history);
    out->states = m->states.n;
    out->evictions = m->evictions;
}
