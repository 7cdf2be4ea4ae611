/*
 * Prefix trees to and from JSON, and merging trees from several sources; see model.h.
 *
 * Trees are persisted so that a gateway restart, or a simulation that continues a real run,
 * does not start cold, and so that ranks that each saw part of the traffic can pool what they
 * learnt. An import is parsed and checked completely into a scratch model first and only then
 * merged, so a bad file leaves the live model untouched. Children are written sorted by state
 * key and prompt trees by prompt, so equal trees give equal bytes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/model.h"
#include "sched/tree.h"
#include "util/alloc.h"
#include "util/json.h"

#define IMPORT_MAX_DEPTH 256
#define IMPORT_MAX_NODES ((size_t)1 << 24)

/* ---- export --------------------------------------------------------------------------------- */

struct child_ref {
    const char *key;
    uint32_t node;
};

static int cmp_child(const void *a, const void *b)
{
    return strcmp(((const struct child_ref *)a)->key, ((const struct child_ref *)b)->key);
}

static json_t *node_to_json(const struct sched_model *m, const struct sched_tree *t, uint32_t id)
{
    const struct sched_node *n = &t->nodes.v[id];
    json_t *o = json_object(), *win = json_array(), *cens = json_array(), *kids = json_array();
    if (id != 0)
        json_object_set_new(o, "state", json_string(sched_model_state_key(m, n->state)));
    json_object_set_new(o, "visits", json_integer(n->visits));
    json_object_set_new(o, "mean_tokens", json_real(n->mean_tokens));
    for (unsigned i = 0; i < n->win_n; i++) {
        uint32_t s = sched_node_window_at(n, i);
        json_array_append_new(win, json_integer(s & SCHED_SAMPLE_MAX));
        if (s & SCHED_SAMPLE_CENSORED)
            json_array_append_new(cens, json_integer(i));
    }
    size_t k = 0;
    for (uint32_t c = n->first_child; c; c = t->nodes.v[c].next_sibling)
        k++;
    struct child_ref *refs = xmallocarray(k ? k : 1, sizeof *refs);
    k = 0;
    for (uint32_t c = n->first_child; c; c = t->nodes.v[c].next_sibling)
        refs[k++] = (struct child_ref){sched_model_state_key(m, t->nodes.v[c].state), c};
    qsort(refs, k, sizeof *refs, cmp_child);
    for (size_t i = 0; i < k; i++)
        json_array_append_new(kids, node_to_json(m, t, refs[i].node));
    free(refs);
    json_object_set_new(o, "window", win);
    json_object_set_new(o, "censored", cens);
    json_object_set_new(o, "children", kids);
    return o;
}

static int cmp_tree(const void *a, const void *b)
{
    uint64_t x = (*(const struct sched_tree *const *)a)->prompt;
    uint64_t y = (*(const struct sched_tree *const *)b)->prompt;
    return (x > y) - (x < y);
}

json_t *sched_model_to_json(const struct sched_model *m)
{
    size_t n = m->prompts.n, k = 0;
    const struct sched_tree **trees = xmallocarray(n ? n : 1, sizeof *trees);
    for (struct list_node *t = m->lru.front; t; t = t->next)
        trees[k++] = sched_tree_of(t);
    qsort(trees, k, sizeof *trees, cmp_tree);
    json_t *prompts = json_array();
    for (size_t i = 0; i < k; i++) {
        char hex[17];
        sched_hex_key(trees[i]->prompt, hex);
        json_array_append_new(
            prompts, json_pack("{s:s,s:o}", "prompt", hex, "root", node_to_json(m, trees[i], 0)));
    }
    free(trees);
    return json_pack("{s:s,s:s,s:o,s:o}", "schema", SCHED_TREE_SCHEMA, "libra_version",
                     libra_version(), "global", node_to_json(m, &m->global, 0), "prompts", prompts);
}

/* ---- merge ---------------------------------------------------------------------------------- */

static void merge_node(struct sched_model *dm, struct sched_tree *dt, uint32_t dn,
                       const struct sched_model *sm, const struct sched_tree *st, uint32_t sn)
{
    const struct sched_tree *keep = dt == &dm->global ? NULL : dt;
    const struct sched_node *s = &st->nodes.v[sn];
    struct sched_node *d = &dt->nodes.v[dn];
    uint64_t visits = (uint64_t)d->visits + s->visits;
    if (d->visits == 0)
        d->mean_tokens = s->mean_tokens; /* exact: a round trip gives back the same bytes */
    else if (s->visits)
        d->mean_tokens = (d->visits * d->mean_tokens + s->visits * s->mean_tokens) / visits;
    d->visits = visits > UINT32_MAX ? UINT32_MAX : (uint32_t)visits;
    for (unsigned i = 0; i < s->win_n; i++) {
        bool grow_ok = sched_model_reserve(dm, sched_node_grow_cost(&dt->nodes.v[dn]), keep);
        size_t before = dt->bytes;
        sched_node_window_push(dt, dn, sched_node_window_at(s, i), grow_ok);
        dm->bytes += dt->bytes - before;
    }
    for (uint32_t c = s->first_child; c; c = st->nodes.v[c].next_sibling) {
        uint32_t state = sched_model_state(dm, sched_model_state_key(sm, st->nodes.v[c].state));
        if (state == SCHED_STATE_NONE)
            continue;
        uint32_t dc = sched_tree_child(dt, dn, state);
        if (!dc) {
            if (!sched_model_reserve(dm, sched_tree_child_cost(dt), keep))
                continue;
            size_t before = dt->bytes;
            dc = sched_tree_add_child(dt, dn, state);
            dm->bytes += dt->bytes - before;
        }
        merge_node(dm, dt, dc, sm, st, c);
    }
}

void sched_model_merge(struct sched_model *dst, const struct sched_model *src)
{
    dst->version++;            /* the global tree changes: cached depth distributions are stale */
    dst->spread_known = false; /* and the learnt spread no longer describes it */
    merge_node(dst, &dst->global, 0, src, &src->global, 0);
    for (const struct sched_tree *t = sched_tree_of(src->lru.back); t;
         t = sched_tree_of(t->lru.prev)) {
        struct sched_tree *dt = sched_model_prompt_tree(dst, t->prompt, true);
        if (dt)
            merge_node(dst, dt, 0, src, t, 0);
    }
}

/* ---- import --------------------------------------------------------------------------------- */

struct loader {
    const struct ujson_doc *doc;
    struct libra_error *err;
    struct sched_model *m; /* scratch model, uncapped */
    size_t nodes;
    char path[4096];
};

static bool check_keys(struct loader *ld, const json_t *o, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, key) == 0;
        if (!ok) {
            size_t len = strlen(ld->path);
            snprintf(ld->path + len, sizeof ld->path - len, "%s%s", len ? "/" : "", key);
            ujson_errorf(ld->err, ld->doc, ld->path, "unknown key");
            return false;
        }
    }
    return true;
}

/* Appends "/part" (s, or the index i when s is NULL) to the path; returns the length to
 * restore it to. */
static size_t push(struct loader *ld, const char *s, size_t i)
{
    size_t len = strlen(ld->path);
    const char *sep = len ? "/" : "";
    if (s)
        snprintf(ld->path + len, sizeof ld->path - len, "%s%s", sep, s);
    else
        snprintf(ld->path + len, sizeof ld->path - len, "%s%zu", sep, i);
    return len;
}

static int fail(struct loader *ld, const char *member, const char *msg)
{
    size_t len = member ? push(ld, member, 0) : strlen(ld->path);
    int rc = ujson_errorf(ld->err, ld->doc, ld->path, "%s", msg);
    ld->path[len] = '\0';
    return rc;
}

/* Fails at member/index (an array element). */
static int fail_elem(struct loader *ld, const char *member, size_t index, const char *msg)
{
    size_t len = push(ld, member, 0);
    push(ld, NULL, index);
    int rc = ujson_errorf(ld->err, ld->doc, ld->path, "%s", msg);
    ld->path[len] = '\0';
    return rc;
}

static int load_window(struct loader *ld, const json_t *o, struct sched_tree *t, uint32_t id)
{
    const json_t *win = json_object_get(o, "window"), *cens = json_object_get(o, "censored");
    if (win && !json_is_array(win))
        return fail(ld, "window", "expected an array of token counts");
    if (cens && !json_is_array(cens))
        return fail(ld, "censored", "expected an array of window indices");
    size_t n = json_array_size(win), ci = 0;
    if (n > SCHED_TREE_WINDOW || n > t->nodes.v[id].visits)
        return fail(ld, "window", "holds more samples than the node's visits (or over 200)");
    for (size_t i = 0; i < n; i++) {
        int64_t v, idx;
        if (!ujson_as_int64(json_array_get(win, i), &v) || v < 0 || v > SCHED_SAMPLE_MAX)
            return fail_elem(ld, "window", i, "expected a token count in 0..2147483647");
        bool censored = ci < json_array_size(cens) &&
                        ujson_as_int64(json_array_get(cens, ci), &idx) && idx == (int64_t)i;
        ci += censored;
        sched_node_window_push(t, id, (uint32_t)v | (censored ? SCHED_SAMPLE_CENSORED : 0), true);
    }
    if (ci != json_array_size(cens))
        return fail_elem(ld, "censored", ci, "expected distinct ascending indices into window");
    return 0;
}

static int load_node(struct loader *ld, const json_t *o, struct sched_tree *t, uint32_t id,
                     int depth);

static int load_children(struct loader *ld, const json_t *kids, struct sched_tree *t, uint32_t id,
                         int depth)
{
    if (!kids)
        return 0;
    if (!json_is_array(kids))
        return fail(ld, "children", "expected an array of nodes");
    for (size_t i = 0; i < json_array_size(kids); i++) {
        const json_t *k = json_array_get(kids, i);
        size_t len = push(ld, "children", 0);
        push(ld, NULL, i);
        const json_t *st = json_is_object(k) ? json_object_get(k, "state") : NULL;
        int rc = 0;
        uint32_t state = SCHED_STATE_NONE;
        if (!json_is_string(st))
            rc = json_is_object(k) ? fail(ld, st ? "state" : NULL, "expected a state key string")
                                   : fail(ld, NULL, "expected a node object");
        else if ((state = sched_model_state(ld->m, json_string_value(st))) == SCHED_STATE_NONE)
            rc = fail(ld, "state", "too many distinct state keys");
        else if (sched_tree_child(t, id, state))
            rc = fail(ld, "state", "two children with the same state");
        else if (++ld->nodes > IMPORT_MAX_NODES)
            rc = fail(ld, NULL, "too many nodes");
        if (!rc) {
            uint32_t c = sched_tree_add_child(t, id, state);
            rc = load_node(ld, k, t, c, depth + 1);
        }
        ld->path[len] = '\0';
        if (rc)
            return rc;
    }
    return 0;
}

static int load_node(struct loader *ld, const json_t *o, struct sched_tree *t, uint32_t id,
                     int depth)
{
    static const char *const keys[] = {"state",    "visits",   "mean_tokens", "window",
                                       "censored", "children", NULL};
    if (!json_is_object(o))
        return fail(ld, NULL, "expected a node object");
    if (depth > IMPORT_MAX_DEPTH)
        return fail(ld, NULL, "tree deeper than 256");
    if (!check_keys(ld, o, keys))
        return LIBRA_EINVAL;
    int64_t visits;
    double mean;
    if (!ujson_as_int64(json_object_get(o, "visits"), &visits) || visits < (depth ? 1 : 0) ||
        visits > UINT32_MAX)
        return fail(ld, json_object_get(o, "visits") ? "visits" : NULL,
                    "visits: expected an integer in 1..4294967295 (0 allowed on a root)");
    if (!ujson_as_double(json_object_get(o, "mean_tokens"), &mean) || !(mean >= 0) ||
        mean > SCHED_SAMPLE_MAX)
        return fail(ld, json_object_get(o, "mean_tokens") ? "mean_tokens" : NULL,
                    "mean_tokens: expected a number in 0..2147483647");
    t->nodes.v[id].visits = (uint32_t)visits;
    t->nodes.v[id].mean_tokens = mean;
    int rc = load_window(ld, o, t, id);
    return rc ? rc : load_children(ld, json_object_get(o, "children"), t, id, depth);
}

static int parse_prompt(const char *hex, uint64_t *out)
{
    size_t n = strlen(hex);
    if (n < 1 || n > 16 || strspn(hex, "0123456789abcdefABCDEF") != n)
        return -1;
    *out = strtoull(hex, NULL, 16);
    return 0;
}

static int load_prompts(struct loader *ld, const json_t *arr)
{
    static const char *const keys[] = {"prompt", "root", NULL};
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return fail(ld, "prompts", "expected an array of {prompt, root}");
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *p = json_array_get(arr, i);
        size_t len = push(ld, "prompts", 0);
        push(ld, NULL, i);
        uint64_t key = 0;
        int rc = 0;
        const json_t *hex = json_is_object(p) ? json_object_get(p, "prompt") : NULL;
        if (!json_is_object(p))
            rc = fail(ld, NULL, "expected an object {prompt, root}");
        else if (!check_keys(ld, p, keys))
            rc = LIBRA_EINVAL;
        else if (!json_is_string(hex) || parse_prompt(json_string_value(hex), &key))
            rc = fail(ld, hex ? "prompt" : NULL, "prompt: expected 1 to 16 hex digits");
        else if (sched_model_prompt_tree(ld->m, key, false))
            rc = fail(ld, "prompt", "prompt listed twice");
        if (!rc) {
            struct sched_tree *t = sched_model_prompt_tree(ld->m, key, true);
            push(ld, "root", 0);
            rc = load_node(ld, json_object_get(p, "root"), t, 0, 0);
        }
        ld->path[len] = '\0';
        if (rc)
            return rc;
    }
    return 0;
}

int sched_model_merge_json(struct sched_model *m, const struct ujson_doc *doc, const char *path,
                           struct libra_error *err)
{
    static const char *const keys[] = {"schema", "libra_version", "global", "prompts", NULL};
    struct sched_model_config cfg = m->cfg;
    cfg.max_bytes = SIZE_MAX;
    cfg.history = 0;
    struct loader ld = {.doc = doc, .err = err, .m = sched_model_new(&cfg)};
    snprintf(ld.path, sizeof ld.path, "%s", path);
    const json_t *o = doc->root;
    for (const char *p = path; o && *p;) {
        size_t n = strcspn(p, "/");
        char comp[256];
        snprintf(comp, sizeof comp, "%.*s", (int)n, p);
        o = json_is_array(o) ? json_array_get(o, strtoul(comp, NULL, 10))
                             : json_object_get(o, comp);
        p += n + (p[n] == '/');
    }
    const json_t *schema = json_is_object(o) ? json_object_get(o, "schema") : NULL;
    int rc = 0;
    if (!json_is_object(o))
        rc = fail(&ld, NULL, "expected a tree export object");
    else if (!check_keys(&ld, o, keys))
        rc = LIBRA_EINVAL;
    else if (!json_is_string(schema) || strcmp(json_string_value(schema), SCHED_TREE_SCHEMA) != 0)
        rc = fail(&ld, schema ? "schema" : NULL, "schema: expected \"" SCHED_TREE_SCHEMA "\"");
    else if (!json_object_get(o, "global"))
        rc = fail(&ld, NULL, "missing global (the global tree)");
    if (!rc) {
        size_t len = push(&ld, "global", 0);
        rc = load_node(&ld, json_object_get(o, "global"), &ld.m->global, 0, 0);
        ld.path[len] = '\0';
    }
    if (!rc)
        rc = load_prompts(&ld, json_object_get(o, "prompts"));
    if (!rc)
        sched_model_merge(m, ld.m);
    sched_model_free(ld.m);
    return rc;
}
