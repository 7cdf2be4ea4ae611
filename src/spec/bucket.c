/*
 * Bucket layout codec: text and JSON forms, validation, reference layouts; see bucket.h.
 *
 * The text form is typed on command lines ("--buckets tp1:4000,tp2:12000") and printed in
 * reports, so the parser reports the byte column of the first fault and says which rule it
 * broke. It has one spelling (lower case, no spaces, no leading zeros): a layout is a config
 * value that digests and sweeps compare, and a near miss ("TP1", "tp01", a stray space) is more
 * likely a typo than a layout. A layout is at most 8 buckets of 4 TP sizes; everything is
 * fixed-size and the parser is a single left-to-right pass with no allocation.
 */
#include "spec/bucket.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"

static bool tp_allowed(int64_t tp)
{
    return tp == 1 || tp == 2 || tp == 4 || tp == 8;
}

static int check_bucket(const struct spec_bucket *b, int i, int64_t prev_max,
                        struct libra_error *err)
{
    if (b->max_tokens < 1 || b->max_tokens > SPEC_BUCKET_TOKENS_MAX)
        return error_set(err, NULL, 0, 0, "bucket %d: max_tokens %lld is outside 1..%d", i + 1,
                         (long long)b->max_tokens, SPEC_BUCKET_TOKENS_MAX);
    if (b->max_tokens <= prev_max)
        return error_set(err, NULL, 0, 0,
                         "bucket %d: max_tokens %lld is not above the previous bucket's %lld",
                         i + 1, (long long)b->max_tokens, (long long)prev_max);
    if (b->n_tp < 1 || b->n_tp > SPEC_BUCKET_TPS_MAX)
        return error_set(err, NULL, 0, 0, "bucket %d: has %d tp sizes, expected 1..%d", i + 1,
                         b->n_tp, SPEC_BUCKET_TPS_MAX);
    for (int k = 0; k < b->n_tp; k++) {
        if (!tp_allowed(b->tp[k]))
            return error_set(err, NULL, 0, 0, "bucket %d: tp size %d is not one of 1, 2, 4, 8",
                             i + 1, b->tp[k]);
        if (k > 0 && b->tp[k] <= b->tp[k - 1])
            return error_set(err, NULL, 0, 0,
                             "bucket %d: tp sizes must be distinct and ascending (%d after %d)",
                             i + 1, b->tp[k], b->tp[k - 1]);
        if (b->instances[k] < 0 || b->instances[k] > SPEC_BUCKET_INSTANCES_MAX)
            return error_set(err, NULL, 0, 0, "bucket %d: %d instances of tp%d is outside 0..%d",
                             i + 1, b->instances[k], b->tp[k], SPEC_BUCKET_INSTANCES_MAX);
    }
    return 0;
}

int spec_bucket_validate(const struct spec_bucket_layout *l, struct libra_error *err)
{
    if (l->n < 1 || l->n > SPEC_BUCKETS_MAX)
        return error_set(err, NULL, 0, 0, "layout has %d buckets, expected 1..%d", l->n,
                         SPEC_BUCKETS_MAX);
    int64_t prev = 0;
    for (int i = 0; i < l->n; i++) {
        int rc = check_bucket(&l->bucket[i], i, prev, err);
        if (rc)
            return rc;
        prev = l->bucket[i].max_tokens;
    }
    return 0;
}

/* ---- text form ------------------------------------------------------------------------------ */

struct cursor {
    const char *start;
    const char *s;
    const char *name;
    struct libra_error *err;
    bool strict;       /* no spaces (a layout, a TP pattern); a layout: "tp", "x" lower case */
    const char *form;  /* what refused spaces are not allowed in, and how it is written */
    int64_t max_count; /* an instance count at most (a fleet's own cap); 0: a layout's */
};

static void skip_spaces(struct cursor *c)
{
    while (*c->s == ' ' || *c->s == '\t')
        c->s++;
}

__attribute__((format(printf, 2, 3))) static int fail_at(struct cursor *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(c->err, c->name, 1, (int)(c->s - c->start) + 1, "%s", msg);
}

/* Skips spaces where the grammar allows them (fleets); in a layout, refuses them. */
static int spaces(struct cursor *c)
{
    if (!c->strict) {
        skip_spaces(c);
        return 0;
    }
    if (!isspace((unsigned char)*c->s))
        return 0;
    return fail_at(c, "%s is not allowed in %s",
                   *c->s == ' '    ? "a space"
                   : *c->s == '\t' ? "a tab"
                                   : "whitespace",
                   c->form);
}

/* Refuses a number written with a leading zero ("tp01", ":04000"): it would read as another
 * spelling of the number (docs/cli.md), in a fleet as in a layout. */
static int no_leading_zero(struct cursor *c, const char *what)
{
    if (c->s[0] != '0' || !isdigit((unsigned char)c->s[1]))
        return 0;
    int n = 0;
    while (n < 24 && isdigit((unsigned char)c->s[n]))
        n++;
    return fail_at(c, "%s '%.*s%s' has a leading zero", what, n, c->s,
                   isdigit((unsigned char)c->s[n]) ? "..." : "");
}

/* Reads a decimal integer in 0..limit; what names it in the message. */
static int read_int(struct cursor *c, int64_t limit, const char *what, int64_t *out)
{
    int rc = spaces(c);
    if (rc)
        return rc;
    if (!isdigit((unsigned char)*c->s))
        return fail_at(c, "expected %s (a decimal number)", what);
    if ((rc = no_leading_zero(c, what)))
        return rc;
    int64_t v = 0;
    const char *at = c->s;
    while (isdigit((unsigned char)*c->s)) {
        v = v * 10 + (*c->s++ - '0');
        if (v > limit) {
            c->s = at;
            return fail_at(c, "%s is larger than %lld", what, (long long)limit);
        }
    }
    *out = v;
    return 0;
}

/* Reads "tp", refusing another case in a layout. */
static int read_tp_prefix(struct cursor *c)
{
    int rc = spaces(c);
    if (rc)
        return rc;
    if (strncasecmp(c->s, "tp", 2) != 0)
        return fail_at(c, "expected 'tp' followed by a tp size");
    if (c->strict && strncmp(c->s, "tp", 2) != 0)
        return fail_at(c, "'%.2s' must be lower case ('tp')", c->s);
    c->s += 2;
    return 0;
}

/* Reads "tpN" or "tpNxM" into slot k of b. */
static int read_tp(struct cursor *c, struct spec_bucket *b)
{
    int rc = read_tp_prefix(c);
    if (rc)
        return rc;
    if (b->n_tp == SPEC_BUCKET_TPS_MAX)
        return fail_at(c, "a bucket has at most %d tp sizes", SPEC_BUCKET_TPS_MAX);
    const char *at = c->s;
    int64_t tp, count = 0;
    if ((rc = read_int(c, 8, "tp size", &tp)))
        return rc;
    if (!tp_allowed(tp)) {
        c->s = at;
        return fail_at(c, "tp size %lld is not one of 1, 2, 4, 8", (long long)tp);
    }
    if (c->strict && *c->s == 'X')
        return fail_at(c, "'X' must be lower case ('x')");
    if (*c->s == 'x' || *c->s == 'X') {
        c->s++;
        const char *n = c->s;
        int64_t most = c->max_count ? c->max_count : SPEC_BUCKET_INSTANCES_MAX;
        if ((rc = read_int(c, most, "instance count", &count)))
            return rc;
        if (count == 0) { /* no count means none given; an explicit 0 would read as that */
            c->s = n;
            return fail_at(c, "an instance count must be at least 1 (leave out x0 to give none)");
        }
    }
    for (int k = 0; k < b->n_tp; k++)
        if (b->tp[k] == tp) {
            c->s = at;
            return fail_at(c, "tp%lld appears twice in one bucket", (long long)tp);
        }
    /* Insert keeping tp ascending. */
    int k = b->n_tp++;
    while (k > 0 && b->tp[k - 1] > tp) {
        b->tp[k] = b->tp[k - 1];
        b->instances[k] = b->instances[k - 1];
        k--;
    }
    b->tp[k] = (int)tp;
    b->instances[k] = (int)count;
    return 0;
}

static int read_bucket(struct cursor *c, struct spec_bucket *b, int64_t prev_max)
{
    memset(b, 0, sizeof *b);
    int rc;
    for (;;) {
        if ((rc = read_tp(c, b)) || (rc = spaces(c)))
            return rc;
        if (*c->s != '+')
            break;
        c->s++;
    }
    if (*c->s != ':')
        return fail_at(c, "expected '+' or ':' after a tp size");
    c->s++;
    if ((rc = spaces(c)))
        return rc;
    const char *at = c->s;
    if ((rc = read_int(c, SPEC_BUCKET_TOKENS_MAX, "max_tokens", &b->max_tokens)))
        return rc;
    c->s = b->max_tokens < 1 || b->max_tokens <= prev_max ? at : c->s;
    if (b->max_tokens < 1)
        return fail_at(c, "max_tokens %lld must be positive", (long long)b->max_tokens);
    if (b->max_tokens <= prev_max)
        return fail_at(c, "max_tokens %lld must be above the previous bucket's %lld",
                       (long long)b->max_tokens, (long long)prev_max);
    return 0;
}

int spec_bucket_parse(struct spec_bucket_layout *out, const char *text, const char *name,
                      struct libra_error *err)
{
    struct cursor c = {.start = text,
                       .s = text,
                       .name = name,
                       .err = err,
                       .strict = true,
                       .form =
                           "a bucket layout (it is written without spaces: tp1:4000,tp2:12000)"};
    memset(out, 0, sizeof *out);
    int64_t prev = 0;
    for (;;) {
        if (out->n == SPEC_BUCKETS_MAX)
            return fail_at(&c, "a layout has at most %d buckets", SPEC_BUCKETS_MAX);
        int rc = read_bucket(&c, &out->bucket[out->n], prev);
        if (rc)
            return rc;
        prev = out->bucket[out->n++].max_tokens;
        if ((rc = spaces(&c)))
            return rc;
        if (*c.s == '\0')
            return 0;
        if (*c.s != ',')
            return fail_at(&c, "expected ',' or the end of the layout");
        c.s++;
    }
}

/* Appends the first w bytes of item to buf at *n, as far as size allows. */
static void append(char *buf, size_t size, size_t *n, const char *item, int w)
{
    for (int i = 0; i < w; i++, (*n)++)
        if (*n + 1 < size)
            buf[*n] = item[i];
}

size_t spec_bucket_format(const struct spec_bucket_layout *l, char *buf, size_t size)
{
    size_t n = 0;
    char item[64];
    for (int i = 0; i < l->n; i++) {
        const struct spec_bucket *b = &l->bucket[i];
        for (int k = 0; k < b->n_tp; k++) {
            int w = snprintf(item, sizeof item, "%stp%d", k ? "+" : "", b->tp[k]);
            if (b->instances[k])
                w += snprintf(item + w, sizeof item - (size_t)w, "x%d", b->instances[k]);
            append(buf, size, &n, item, w);
        }
        int w = snprintf(item, sizeof item, ":%lld%s", (long long)b->max_tokens,
                         i + 1 < l->n ? "," : "");
        append(buf, size, &n, item, w);
    }
    if (size > 0)
        buf[n < size ? n : size - 1] = '\0';
    return n;
}

/* ---- JSON form ------------------------------------------------------------------------------ */

static int json_int_array(const struct ujson_doc *doc, const char *path, const json_t *arr,
                          int *out, int *n_out, struct libra_error *err)
{
    if (!json_is_array(arr))
        return ujson_errorf(err, doc, path, "expected an array of integers");
    if (json_array_size(arr) < 1 || json_array_size(arr) > SPEC_BUCKET_TPS_MAX)
        return ujson_errorf(err, doc, path, "expected 1..%d entries, got %zu", SPEC_BUCKET_TPS_MAX,
                            json_array_size(arr));
    for (size_t k = 0; k < json_array_size(arr); k++) {
        int64_t v;
        char elem[256];
        snprintf(elem, sizeof elem, "%s/%zu", path, k);
        if (!ujson_as_int64(json_array_get(arr, k), &v) || v < 0 || v > SPEC_BUCKET_INSTANCES_MAX)
            return ujson_errorf(err, doc, elem, "expected an integer in 0..%d",
                                SPEC_BUCKET_INSTANCES_MAX);
        out[k] = (int)v;
    }
    *n_out = (int)json_array_size(arr);
    return 0;
}

static int bucket_from_json(struct spec_bucket *b, const struct ujson_doc *doc, const char *path,
                            const json_t *v, struct libra_error *err)
{
    char sub[256];
    const char *key;
    const json_t *m;
    if (!json_is_object(v))
        return ujson_errorf(err, doc, path, "expected an object {max_tokens, tp, instances}");
    json_object_foreach((json_t *)v, key, m)
    {
        if (strcmp(key, "max_tokens") != 0 && strcmp(key, "tp") != 0 &&
            strcmp(key, "instances") != 0) {
            return ujson_errorf(err, doc, ujson_member_path(sub, sizeof sub, path, key),
                                "unknown key (expected max_tokens, tp, instances)");
        }
    }
    snprintf(sub, sizeof sub, "%s/max_tokens", path);
    if (!ujson_as_int64(json_object_get(v, "max_tokens"), &b->max_tokens))
        return ujson_errorf(err, doc, json_object_get(v, "max_tokens") ? sub : path,
                            "max_tokens: expected an integer");
    snprintf(sub, sizeof sub, "%s/tp", path);
    if (!json_object_get(v, "tp"))
        return ujson_errorf(err, doc, path, "missing tp (an array of tp sizes)");
    int rc = json_int_array(doc, sub, json_object_get(v, "tp"), b->tp, &b->n_tp, err);
    const json_t *inst = json_object_get(v, "instances");
    if (rc || !inst)
        return rc;
    int n_inst;
    snprintf(sub, sizeof sub, "%s/instances", path);
    if ((rc = json_int_array(doc, sub, inst, b->instances, &n_inst, err)))
        return rc;
    if (n_inst != b->n_tp)
        return ujson_errorf(err, doc, sub, "has %d entries but tp has %d", n_inst, b->n_tp);
    return 0;
}

static int layout_from_json_object(struct spec_bucket_layout *out, const struct ujson_doc *doc,
                                   const char *path, const json_t *v, struct libra_error *err)
{
    char sub[256];
    const char *key;
    const json_t *m;
    json_object_foreach((json_t *)v, key, m)
    {
        if (strcmp(key, "buckets") != 0) {
            return ujson_errorf(err, doc, ujson_member_path(sub, sizeof sub, path, key),
                                "unknown key (expected buckets)");
        }
    }
    const json_t *arr = json_object_get(v, "buckets");
    snprintf(sub, sizeof sub, "%s%sbuckets", path, *path ? "/" : "");
    if (!json_is_array(arr))
        return ujson_errorf(err, doc, arr ? sub : path, "buckets: expected an array");
    if (json_array_size(arr) < 1 || json_array_size(arr) > SPEC_BUCKETS_MAX)
        return ujson_errorf(err, doc, sub, "expected 1..%d buckets, got %zu", SPEC_BUCKETS_MAX,
                            json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char elem[256];
        snprintf(elem, sizeof elem, "%s/%zu", sub, i);
        int rc = bucket_from_json(&out->bucket[i], doc, elem, json_array_get(arr, i), err);
        if (rc)
            return rc;
        out->n = (int)i + 1;
    }
    struct libra_error verr = {0};
    if (spec_bucket_validate(out, &verr))
        return ujson_errorf(err, doc, sub, "%s", verr.msg);
    return 0;
}

/* The value at a JSON Pointer path without its leading '/' (util/json.h), or NULL. */
static const json_t *json_at(const json_t *v, const char *path)
{
    char comp[256];
    while (v && *path) {
        size_t n = 0;
        for (; *path && *path != '/' && n + 1 < sizeof comp; path++)
            comp[n++] = *path == '~' && (path[1] == '0' || path[1] == '1')
                            ? (*++path == '1' ? '/' : '~')
                            : *path;
        comp[n] = '\0';
        path += *path == '/';
        if (json_is_array(v)) {
            char *end;
            unsigned long idx = strtoul(comp, &end, 10);
            v = *end ? NULL : json_array_get(v, idx);
        } else {
            v = json_object_get(v, comp);
        }
    }
    return v;
}

int spec_bucket_from_json(struct spec_bucket_layout *out, const struct ujson_doc *doc,
                          const char *path, struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    const json_t *v = json_at(doc->root, path);
    if (json_is_string(v)) {
        struct libra_error perr = {0};
        if (spec_bucket_parse(out, json_string_value(v), doc->name, &perr) == 0)
            return 0;
        return ujson_errorf(err, doc, path, "column %d of the string: %s", perr.col, perr.msg);
    }
    if (!json_is_object(v))
        return ujson_errorf(err, doc, path,
                            "expected a bucket layout (\"tp1:4000,...\" or {\"buckets\": [...]})");
    return layout_from_json_object(out, doc, path, v, err);
}

json_t *spec_bucket_to_json(const struct spec_bucket_layout *l)
{
    json_t *arr = json_array();
    for (int i = 0; i < l->n; i++) {
        const struct spec_bucket *b = &l->bucket[i];
        json_t *tp = json_array(), *inst = json_array();
        bool any = false;
        for (int k = 0; k < b->n_tp; k++) {
            json_array_append_new(tp, json_integer(b->tp[k]));
            json_array_append_new(inst, json_integer(b->instances[k]));
            any = any || b->instances[k];
        }
        json_t *o = json_pack("{s:I,s:o}", "max_tokens", (json_int_t)b->max_tokens, "tp", tp);
        if (any)
            json_object_set_new(o, "instances", inst);
        else
            json_decref(inst);
        json_array_append_new(arr, o);
    }
    return json_pack("{s:o}", "buckets", arr);
}

/* ---- reference layouts and look-ups --------------------------------------------------------- */

static const struct {
    const char *workload;
    const char *model;
    const char *layout;
} reference_layouts[] = {
    {"r2e-gym", "qwen3-14b", "tp1:4000,tp2:12000,tp4:30000"},
    {"search-r1", "qwen3-14b", "tp2:5000,tp4:15000,tp8:40960"},
    {"dapo-math", "qwen3-4b", "tp2:3000,tp2:6000,tp4:32768"},
    {"r2e-gym", "qwen3-4b", "tp2:3000,tp2:6000,tp4:32768"},
};

int spec_bucket_default(struct spec_bucket_layout *out, const char *workload, const char *model)
{
    for (size_t i = 0; i < sizeof reference_layouts / sizeof reference_layouts[0]; i++) {
        if (strcasecmp(reference_layouts[i].workload, workload) != 0)
            continue;
        if (model && strcasecmp(reference_layouts[i].model, model) != 0)
            continue;
        return spec_bucket_parse(out, reference_layouts[i].layout, "<builtin>", NULL) == 0
                   ? 0
                   : LIBRA_EINTERNAL;
    }
    return LIBRA_ENOENT;
}

int spec_bucket_index(const struct spec_bucket_layout *l, int64_t tokens)
{
    for (int i = 0; i < l->n; i++)
        if (l->bucket[i].max_tokens >= tokens)
            return i;
    return l->n - 1;
}

bool spec_bucket_has_tp(const struct spec_bucket *b, int tp)
{
    for (int k = 0; k < b->n_tp; k++)
        if (b->tp[k] == tp)
            return true;
    return false;
}

/* The most GPUs one instance may take on the cluster, and the key that bounds it. */
static int instance_gpus_max(int gpus, int gpus_per_node, const char **key)
{
    *key = gpus <= gpus_per_node ? "cluster.gpus" : "cluster.gpus_per_node";
    return gpus <= gpus_per_node ? gpus : gpus_per_node;
}

int spec_bucket_check_cluster(const struct spec_bucket_layout *l, int gpus, int gpus_per_node,
                              struct libra_error *err)
{
    const char *key;
    int most = instance_gpus_max(gpus, gpus_per_node, &key);
    for (int i = 0; i < l->n; i++)
        for (int k = 0; k < l->bucket[i].n_tp; k++) {
            int tp = l->bucket[i].tp[k];
            if (tp <= most)
                continue;
            struct spec_bucket_layout one = {.n = 1, .bucket = {l->bucket[i]}};
            char text[SPEC_BUCKET_TEXT_MAX];
            spec_bucket_format(&one, text, sizeof text);
            return error_set(err, NULL, 0, 0,
                             "bucket %d (%s) is served by TP%d, but %s %d GPU%s (%s): a TP%d "
                             "instance takes %d GPUs of one node",
                             i + 1, text, tp,
                             strcmp(key, "cluster.gpus") == 0 ? "the cluster has" : "a node has",
                             most, most == 1 ? "" : "s", key, tp, tp);
        }
    return 0;
}

/* ---- per-node TP patterns ----------------------------------------------------------------- */

int spec_tp_pattern_parse(const char *text, const char *name, int counts[SPEC_TP_SIZES], int *gpus,
                          struct libra_error *err)
{
    /* no spaces, as in a layout: the same pattern spaced otherwise would digest otherwise */
    struct cursor c = {.start = text,
                       .s = text,
                       .name = name,
                       .err = err,
                       .strict = true,
                       .form = "a TP pattern (it is written without spaces: 1,1,2,4)"};
    memset(counts, 0, SPEC_TP_SIZES * sizeof *counts);
    *gpus = 0;
    int rc = spaces(&c);
    if (rc || !*c.s)
        return rc;
    for (int n = 0;; n++) {
        if (n == SPEC_PATTERN_MAX)
            return fail_at(&c, "more than %d instances on one node", SPEC_PATTERN_MAX);
        const char *tok = c.s;
        if (strncasecmp(c.s, "tp", 2) == 0)
            c.s += 2;
        int t = -1; /* one digit: c.s[1] is read only after a digit, so within the string */
        if (isdigit((unsigned char)c.s[0]) && !isdigit((unsigned char)c.s[1]))
            for (int k = 0; k < SPEC_TP_SIZES; k++)
                if (*c.s - '0' == 1 << k)
                    t = k;
        if (t < 0) {
            c.s = tok;
            return fail_at(&c, "expected a TP size: 1, 2, 4 or 8");
        }
        counts[t]++;
        *gpus += 1 << t;
        c.s++;
        if ((rc = spaces(&c)) || !*c.s)
            return rc;
        if (*c.s != ',')
            return fail_at(&c, "expected ',' between TP sizes");
        c.s++;
        if ((rc = spaces(&c)))
            return rc;
    }
}

/* ---- fleets --------------------------------------------------------------------------------- */

int spec_fleet_parse(const char *text, const char *name, int *tp, int max, int *n,
                     struct libra_error *err)
{
    struct cursor c = {.start = text, .s = text, .name = name, .err = err, .max_count = max};
    *n = 0;
    for (;;) {
        struct spec_bucket one = {0};
        const char *tok = c.s;
        int rc = read_tp(&c, &one);
        if (rc)
            return rc;
        bool counted =
            memchr(tok, 'x', (size_t)(c.s - tok)) || memchr(tok, 'X', (size_t)(c.s - tok));
        if (counted && one.instances[0] == 0) {
            c.s = tok;
            return fail_at(&c, "an instance count is at least 1");
        }
        int count = counted ? one.instances[0] : 1;
        if (*n + count > max)
            return fail_at(&c, "more than %d instances", max);
        for (int i = 0; i < count; i++)
            tp[(*n)++] = one.tp[0];
        skip_spaces(&c);
        if (!*c.s)
            return 0;
        if (*c.s != ',')
            return fail_at(&c, "expected ',' between instances");
        c.s++;
    }
}
