/*
 * Workload preset files: parsing, validation and printing, all driven by one field table.
 *
 * A field is a JSON path inside a preset (or inside one of its tools), a type, a range and the
 * offset of the struct member it fills. Unknown keys are found by checking every key of the
 * document against the table's paths; values are read and range-checked through the table;
 * workload_preset_to_json walks the same table. Relations between fields (median inside
 * [min, max], the prompt inside the context, a tool whenever there is a second turn) are
 * checked afterwards by check_preset.
 */
#include "workload/preset.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/embed.h"
#include "util/error.h"
#include "util/json.h"
#include "util/map.h"

_Static_assert(sizeof(enum trace_tool_status) == sizeof(int), "choice fields are stored as int");
_Static_assert(sizeof(enum workload_finish_means) == sizeof(int), "choice fields are int");
_Static_assert(sizeof(enum workload_turn_cap) == sizeof(int), "choice fields are int");
_Static_assert(sizeof(enum spec_dynamic_sampling) == sizeof(int), "choice fields are int");

enum ftype { F_INT, F_REAL, F_BOOL, F_TEXT, F_CHOICE };

struct field {
    const char *path; /* JSON path relative to the preset or the tool */
    enum ftype type;
    size_t offset;              /* of the member in struct workload_preset / workload_tool */
    double lo, hi;              /* inclusive range of numbers; bytes of F_TEXT in hi */
    const char *const *choices; /* F_CHOICE: names, index = stored int; NULL-terminated */
    bool optional;              /* may be omitted by a preset without a base */
};

static const char *const status_names[] = {"success", "failure", "timeout", "other", NULL};
static const char *const means_names[] = {"answer", "correct", NULL};
static const char *const cap_names[] = {"completed", "truncated", NULL};

#define BIG 1e12
#define PF(member) offsetof(struct workload_preset, member)
#define TF(member) offsetof(struct workload_tool, member)
#define NUM(path, type, off, lo, hi)                                                               \
    {                                                                                              \
        path, type, off, lo, hi, NULL, false                                                       \
    }
#define LOGNORMAL(path, off, lo, hi)                                                               \
    NUM(path "/median", F_REAL, (off) + offsetof(struct workload_lognormal, median), lo, hi),      \
        NUM(path "/sigma", F_REAL, (off) + offsetof(struct workload_lognormal, sigma), 0, 5),      \
        NUM(path "/min", F_REAL, (off) + offsetof(struct workload_lognormal, min), lo, hi),        \
        NUM(path "/max", F_REAL, (off) + offsetof(struct workload_lognormal, max), lo, hi)

static const struct field preset_fields[] = {
    {"source", F_TEXT, PF(source), 0, sizeof((struct workload_preset *)0)->source, NULL, true},
    NUM("prompts", F_INT, PF(prompts), 1, BIG),
    NUM("samples", F_INT, PF(samples), 0, 0),                       /* see config_ranges */
    NUM("batch_trajectories", F_INT, PF(batch_trajectories), 0, 0), /* see config_ranges */
    NUM("max_turns", F_INT, PF(max_turns), 1, 1000),
    NUM("max_generated_tokens", F_INT, PF(max_generated_tokens), 1, 1e8),
    NUM("max_turn_generated_tokens", F_INT, PF(max_turn_generated_tokens), 1, 1e8),
    NUM("context_tokens", F_INT, PF(context_tokens), 2, 1e9),
    LOGNORMAL("prompt_tokens", PF(prompt_tokens), 1, 1e8),
    NUM("turn_tokens/median", F_REAL, PF(turn_tokens.median), 1, 1e8),
    NUM("turn_tokens/first_turn_log", F_REAL, PF(turn_tokens.first_turn_log), -10, 10),
    NUM("turn_tokens/sigma", F_REAL, PF(turn_tokens.sigma), 0, 5),
    NUM("turn_tokens/difficulty", F_REAL, PF(turn_tokens.difficulty), -5, 5),
    NUM("turn_tokens/verbosity", F_REAL, PF(turn_tokens.verbosity), -5, 5),
    NUM("stuck/logit", F_REAL, PF(stuck.logit), -20, 20),
    NUM("stuck/difficulty", F_REAL, PF(stuck.difficulty), -10, 10),
    NUM("stuck/tokens_log", F_REAL, PF(stuck.tokens_log), -10, 10),
    NUM("stuck/finish_logit", F_REAL, PF(stuck.finish_logit), -20, 20),
    NUM("finish/logit", F_REAL, PF(finish.logit), -20, 20),
    NUM("finish/per_turn", F_REAL, PF(finish.per_turn), -5, 5),
    NUM("finish/difficulty", F_REAL, PF(finish.difficulty), -10, 10),
    NUM("finish/verbosity", F_REAL, PF(finish.verbosity), -10, 10),
    {"finish/means", F_CHOICE, PF(finish.means), 0, 0, means_names, false},
    {"finish/turn_cap", F_CHOICE, PF(finish.turn_cap), 0, 0, cap_names, false},
    {"reward/logit", F_REAL, PF(reward.logit), -20, 20, NULL, true},
    {"reward/difficulty", F_REAL, PF(reward.difficulty), -10, 10, NULL, true},
    NUM("causal/strength", F_REAL, PF(causal.strength), 0, 1),
    NUM("causal/finish_logit", F_REAL, PF(causal.finish_logit), -10, 10),
    NUM("causal/tokens_log", F_REAL, PF(causal.tokens_log), -5, 5),
    {"setup/median_s", F_REAL, PF(setup.median_s), 0, 86400, NULL, true},
    {"setup/sigma", F_REAL, PF(setup.sigma), 0, 3, NULL, true},
    {"dynamic_sampling", F_CHOICE, PF(dynamic_sampling), 0, 0, spec_dynamic_sampling_names, true},
    {"drift/enabled", F_BOOL, PF(drift.enabled), 0, 0, NULL, true},
    {"drift/versions", F_INT, PF(drift.versions), 1, 1e9, NULL, true},
    {"drift/generated_scale", F_REAL, PF(drift.generated_scale), 0.01, 100, NULL, true},
    {"drift/finish_logit", F_REAL, PF(drift.finish_logit), -20, 20, NULL, true},
};

static const struct field tool_fields[] = {
    {"name", F_TEXT, TF(name), 0, WORKLOAD_TOOL_NAME_MAX, NULL, false},
    NUM("weight", F_REAL, TF(weight), 0, BIG),
    NUM("bad/logit", F_REAL, TF(bad_logit), -20, 20),
    NUM("bad/difficulty", F_REAL, TF(bad_difficulty), -10, 10),
    NUM("bad/verbosity", F_REAL, TF(bad_verbosity), -10, 10),
    {"status/good", F_CHOICE, TF(good_status), 0, 0, status_names, false},
    {"status/bad", F_CHOICE, TF(bad_status), 0, 0, status_names, false},
    LOGNORMAL("payload_tokens", TF(payload_tokens), 0, 1e8),
    NUM("bad_payload_log", F_REAL, TF(bad_payload_log), -10, 10),
    NUM("timeout_payload_tokens", F_INT, TF(timeout_payload_tokens), 0, 1e8),
    NUM("pool/workers", F_INT, TF(pool.workers), 0, 1e5),
    NUM("pool/utilisation", F_REAL, TF(pool.utilisation), 0, 0.99),
    NUM("pool/service_median_s", F_REAL, TF(pool.service_median_s), 1e-6, 86400),
    NUM("pool/service_sigma", F_REAL, TF(pool.service_sigma), 0, 3),
    NUM("pool/timeout_s", F_REAL, TF(pool.timeout_s), 1e-6, 604800),
};

/* The preset fields that are config keys' defaults (api/experiment.c layers the preset under
 * the config): they take the key's range, from its row in spec/config.c, as a value beyond it
 * would be refused by every command that runs the preset. */
static const struct {
    const char *path, *key;
} config_ranges[] = {
    {"samples", "rl.samples"},
    {"batch_trajectories", "rl.batch_trajectories"},
};

#define N_PRESET_FIELDS (sizeof preset_fields / sizeof preset_fields[0])
#define N_TOOL_FIELDS (sizeof tool_fields / sizeof tool_fields[0])

/* Where the parser is: the document and the path of the object being read. */
struct ctx {
    const struct ujson_doc *doc;
    struct libra_error *err;
    const char *base; /* document path of the preset or tool object, e.g. "workloads/2" */
};

static int fail(const struct ctx *c, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reports MSG at the document path c->base/rel (where rel is absent, a missing field, at the
 * nearest object present: ujson_errorf). Returns LIBRA_EINVAL. */
static int fail(const struct ctx *c, const char *rel, const char *fmt, ...)
{
    char path[512], msg[400];
    snprintf(path, sizeof path, "%s%s%s", c->base, *c->base && *rel ? "/" : "", rel);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ujson_errorf(c->err, c->doc, path, "%s", msg);
}

/* ---- unknown keys ---------------------------------------------------------------------- */

/* True when rel names a field ("a/b") or an object above one ("a"). */
static bool known_path(const struct field *t, size_t n, const char *rel, bool *is_section)
{
    size_t len = strlen(rel);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(t[i].path, rel) == 0) {
            *is_section = false;
            return true;
        }
        if (strncmp(t[i].path, rel, len) == 0 && t[i].path[len] == '/') {
            *is_section = true;
            return true;
        }
    }
    return false;
}

/* Rejects keys of obj (at prefix, relative to c->base) that the table does not know; extra
 * names a NULL-terminated list of keys handled outside the table. */
static int check_keys(const struct ctx *c, const json_t *obj, const char *prefix,
                      const struct field *t, size_t n, const char *const *extra)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)obj, key, val)
    {
        char rel[256];
        snprintf(rel, sizeof rel, "%s%s%s", prefix, *prefix ? "/" : "", key);
        bool section = false, handled = false;
        for (const char *const *e = extra; !*prefix && e && *e; e++)
            handled |= strcmp(*e, key) == 0;
        if (handled)
            continue;
        if (strchr(key, '/') || !known_path(t, n, rel, &section))
            return fail(c, rel, "unknown key");
        if (!section)
            continue;
        if (!json_is_object(val))
            return fail(c, rel, "expected an object");
        int rc = check_keys(c, val, rel, t, n, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- reading fields -------------------------------------------------------------------- */

static const json_t *get_path(const json_t *obj, const char *path)
{
    char comp[64];
    while (obj && *path) {
        size_t n = strcspn(path, "/");
        snprintf(comp, sizeof comp, "%.*s", (int)n, path);
        obj = json_is_object(obj) ? json_object_get(obj, comp) : NULL;
        path += n + (path[n] == '/');
    }
    return obj;
}

/* The inclusive range of f's numbers: its own, or its config key's (config_ranges). */
static void field_range(const struct field *f, double *lo, double *hi)
{
    *lo = f->lo;
    *hi = f->hi;
    for (size_t k = 0; k < sizeof config_ranges / sizeof *config_ranges; k++) {
        if (strcmp(f->path, config_ranges[k].path) == 0) {
            const struct spec_field *key = spec_config_field(config_ranges[k].key);
            *lo = key->min;
            *hi = key->max;
        }
    }
}

/* "out of range: must be in LO..HI" for the field f. */
static int range_error(const struct ctx *c, const struct field *f, double lo, double hi)
{
    int digits = f->type == F_INT ? 17 : 6;
    return fail(c, f->path, "out of range: must be in %.*g..%.*g", digits, lo, digits, hi);
}

static int read_field(const struct ctx *c, const struct field *f, const json_t *v, char *dst)
{
    int64_t i;
    double d, lo, hi;
    field_range(f, &lo, &hi);
    switch (f->type) {
    case F_INT:
        if (!ujson_as_int64(v, &i)) {
            /* a whole number written as a real (1e30) is out of range, not a fraction */
            d = json_is_real(v) ? json_real_value(v) : NAN; /* NAN: not a whole number */
            if (d == floor(d) && !(d >= lo && d <= hi))
                return range_error(c, f, lo, hi);
            return fail(c, f->path, "expected an integer");
        }
        if ((double)i < lo || (double)i > hi)
            return range_error(c, f, lo, hi);
        memcpy(dst, &i, sizeof i);
        return 0;
    case F_REAL:
        if (!ujson_as_double(v, &d))
            return fail(c, f->path, "expected a number");
        if (!(d >= lo && d <= hi))
            return range_error(c, f, lo, hi);
        memcpy(dst, &d, sizeof d);
        return 0;
    case F_BOOL:
        if (!json_is_boolean(v))
            return fail(c, f->path, "expected true or false");
        *(bool *)dst = json_is_true(v);
        return 0;
    case F_TEXT:
        if (!json_is_string(v))
            return fail(c, f->path, "expected a string");
        if (json_string_length(v) >= (size_t)f->hi ||
            strlen(json_string_value(v)) != json_string_length(v))
            return fail(c, f->path, "string too long or contains NUL");
        strcpy(dst, json_string_value(v));
        return 0;
    case F_CHOICE:
        for (int k = 0; json_is_string(v) && f->choices[k]; k++)
            if (strcmp(json_string_value(v), f->choices[k]) == 0) {
                memcpy(dst, &k, sizeof k);
                return 0;
            }
        {
            char names[128] = "";
            for (int k = 0; f->choices[k]; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                         f->choices[k]);
            return fail(c, f->path, "expected one of %s", names);
        }
    }
    return LIBRA_EINTERNAL;
}

/* Reads every field of table t present in obj into dst; an absent field is an error unless
 * partial (a preset with a base) or the field is optional. */
static int read_fields(const struct ctx *c, const json_t *obj, const struct field *t, size_t n,
                       void *dst, bool partial)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *v = get_path(obj, t[i].path);
        if (!v) {
            if (partial || t[i].optional)
                continue;
            return fail(c, t[i].path, "missing");
        }
        int rc = read_field(c, &t[i], v, (char *)dst + t[i].offset);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- relations between fields ---------------------------------------------------------- */

static int check_lognormal(const struct ctx *c, const char *rel, const struct workload_lognormal *l)
{
    if (l->min > l->median || l->median > l->max)
        return fail(c, rel, "needs min <= median <= max");
    return 0;
}

static int check_tool(const struct ctx *c, const struct workload_tool *t)
{
    if (!t->name[0])
        return fail(c, "name", "must not be empty");
    if (t->pool.workers > 0 && t->pool.utilisation >= 1)
        return fail(c, "pool/utilisation", "must be below 1");
    return check_lognormal(c, "payload_tokens", &t->payload_tokens);
}

static int check_preset(const struct ctx *c, const struct workload_preset *w)
{
    int rc = check_lognormal(c, "prompt_tokens", &w->prompt_tokens);
    if (rc)
        return rc;
    if (w->prompt_tokens.max >= (double)w->context_tokens)
        return fail(c, "prompt_tokens/max", "must be below context_tokens");
    if (w->max_turn_generated_tokens > w->max_generated_tokens)
        return fail(c, "max_turn_generated_tokens", "exceeds max_generated_tokens");
    if (w->batch_trajectories % w->samples != 0)
        return fail(c, "batch_trajectories", "must be a multiple of samples");
    if (w->dynamic_sampling != SPEC_DS_OFF && w->samples < 2) /* as the config refuses it */
        return fail(c, "samples",
                    "%lld with dynamic_sampling %s: a group of one sample always has equal "
                    "rewards, so every group would be dropped and nothing would train",
                    (long long)w->samples, spec_dynamic_sampling_names[w->dynamic_sampling]);
    if (w->max_turns > 1 && w->n_tools == 0)
        return fail(c, "tools", "needs at least one tool when max_turns > 1");
    double weight = 0;
    for (size_t i = 0; i < w->n_tools; i++)
        weight += w->tools[i].weight;
    if (w->n_tools && !(weight > 0))
        return fail(c, "tools", "needs a tool with a positive weight");
    return 0;
}

/* ---- presets and files ----------------------------------------------------------------- */

static int read_tools(const struct ctx *c, const json_t *arr, struct workload_preset *w)
{
    if (!json_is_array(arr))
        return fail(c, "tools", "expected an array");
    if (json_array_size(arr) > WORKLOAD_MAX_TOOLS)
        return fail(c, "tools", "more than %d tools", WORKLOAD_MAX_TOOLS);
    w->n_tools = json_array_size(arr);
    for (size_t i = 0; i < w->n_tools; i++) {
        char base[300];
        snprintf(base, sizeof base, "%s/tools/%zu", c->base, i);
        struct ctx tc = {c->doc, c->err, base};
        const json_t *obj = json_array_get(arr, i);
        if (!json_is_object(obj))
            return fail(&tc, "", "expected an object");
        struct workload_tool *t = &w->tools[i];
        memset(t, 0, sizeof *t);
        int rc = check_keys(&tc, obj, "", tool_fields, N_TOOL_FIELDS, NULL);
        if (!rc)
            rc = read_fields(&tc, obj, tool_fields, N_TOOL_FIELDS, t, false);
        if (!rc)
            rc = check_tool(&tc, t);
        for (size_t j = 0; !rc && j < i; j++)
            if (strcmp(w->tools[j].name, t->name) == 0)
                rc = fail(&tc, "name", "duplicate tool '%s'", t->name);
        if (rc)
            return rc;
    }
    return 0;
}

/* A preset name, as hardware and model ones (spec/preset.c): lower-case letters, digits, '.',
 * '-', '_', starting with a letter or digit. Flags and configs may write it in any case, and it
 * goes into exported shell scripts and file names as it is. */
static bool valid_name(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr(".-_", *s)))
            return false;
    return true;
}

/* The defaults of the optional fields of a preset without a base. */
static void preset_defaults(struct workload_preset *w)
{
    memset(w, 0, sizeof *w);
    w->drift.versions = 1;
    w->drift.generated_scale = 1.0;
}

static const char *const preset_extra_keys[] = {"name", "base", "tools", NULL};

/* The preset of p that at (lower-case name -> index in p) names name in any case, or NULL. */
static const struct workload_preset *indexed(const struct workload_presets *p, const struct map *at,
                                             const char *name)
{
    char lower[WORKLOAD_NAME_MAX];
    size_t n = strlen(name);
    if (n >= sizeof lower)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    union map_value v;
    return map_get(at, lower, &v) ? &p->items[v.i64] : NULL;
}

/* Reads the preset object at c->base into *w, resolving "base" against p (indexed by at). */
static int read_preset(const struct ctx *c, const json_t *obj, const struct workload_presets *p,
                       const struct map *at, struct workload_preset *w)
{
    if (!json_is_object(obj))
        return fail(c, "", "expected an object");
    int rc = check_keys(c, obj, "", preset_fields, N_PRESET_FIELDS, preset_extra_keys);
    if (rc)
        return rc;
    const json_t *name = json_object_get(obj, "name"), *base = json_object_get(obj, "base");
    if (!name)
        return fail(c, "name", "missing");
    if (!json_is_string(name) || strlen(json_string_value(name)) != json_string_length(name))
        return fail(c, "name", "expected a string");
    if (json_string_length(name) >= WORKLOAD_NAME_MAX)
        return fail(c, "name", "'%s' is too long: a name is under %d bytes",
                    json_string_value(name), WORKLOAD_NAME_MAX);
    if (!valid_name(json_string_value(name)))
        return fail(c, "name",
                    "'%s' must be lower-case letters, digits, '.', '-', '_', starting with a "
                    "letter or digit",
                    json_string_value(name));
    preset_defaults(w);
    if (base) {
        const struct workload_preset *b =
            json_is_string(base) ? indexed(p, at, json_string_value(base)) : NULL;
        if (!b && !json_is_string(base))
            return fail(c, "base", "expected a preset's name (a string)");
        if (!b)
            return fail(c, "base",
                        "no workload preset '%s' before this one (a base is built in, or "
                        "defined earlier in this file or in an earlier --presets file)",
                        json_string_value(base));
        *w = *b;
    }
    strcpy(w->name, json_string_value(name));
    rc = read_fields(c, obj, preset_fields, N_PRESET_FIELDS, w, base != NULL);
    if (rc)
        return rc;
    const json_t *tools = json_object_get(obj, "tools");
    if (tools)
        rc = read_tools(c, tools, w);
    else if (!base)
        w->n_tools = 0;
    return rc ? rc : check_preset(c, w);
}

static const char *const file_keys[] = {"schema", "hardware", "models", "workloads", NULL};

/*
 * Refuses preset i of the file, named name, when an earlier one of the file has the name (seen:
 * name -> index of this file's presets): at its name, naming the first one's position, as
 * spec/preset.c does for hardware and models. (Names are lower case and found ignoring case,
 * so the second would replace the first without a word.)
 */
static int check_once(const struct ctx *c, struct map *seen, size_t i, const char *name)
{
    bool inserted;
    union map_value *v = map_slot(seen, name, &inserted);
    if (inserted) {
        v->i64 = (int64_t)i;
        return 0;
    }
    size_t j = (size_t)v->i64;
    char at[48];
    int line = 0, col = 0;
    snprintf(at, sizeof at, "workloads/%zu/name", j);
    ujson_locate(c->doc, at, &line, &col);
    return fail(c, "name",
                "'%s' is defined twice in this file, first at %d:%d (workloads.%zu.name)", name,
                line, col, j);
}

/* Reads the file's presets in arr into p, one of a name p has replacing it: through maps of the
 * names, so that a file of thousands of presets reads in linear time. */
static int add_presets(struct workload_presets *p, const struct ujson_doc *doc, const json_t *arr,
                       const char *origin, struct libra_error *err)
{
    struct map at = {0}, seen = {0}; /* p's names -> index; this file's -> its index */
    for (size_t i = 0; i < p->n; i++)
        map_put(&at, p->items[i].name, (union map_value){.i64 = (int64_t)i});
    int rc = 0;
    for (size_t i = 0; i < json_array_size(arr) && rc == 0; i++) {
        char base[32];
        snprintf(base, sizeof base, "workloads/%zu", i);
        struct ctx c = {doc, err, base};
        struct workload_preset w;
        rc = read_preset(&c, json_array_get(arr, i), p, &at, &w);
        if (!rc)
            rc = check_once(&c, &seen, i, w.name);
        if (rc)
            break;
        snprintf(w.origin, sizeof w.origin, "%s", origin);
        bool inserted;
        union map_value *v = map_slot(&at, w.name, &inserted);
        if (inserted) {
            p->items = xreallocarray(p->items, p->n + 1, sizeof *p->items);
            v->i64 = (int64_t)p->n++;
        }
        p->items[v->i64] = w;
    }
    map_free(&at);
    map_free(&seen);
    return rc;
}

static int add_doc(struct workload_presets *p, const struct ujson_doc *doc, struct libra_error *err)
{
    struct ctx top = {doc, err, ""};
    if (!json_is_object(doc->root))
        return fail(&top, "", "expected an object with a \"workloads\" array");
    const char *key;
    json_t *val;
    json_object_foreach(doc->root, key, val)
    {
        bool known = false;
        for (const char *const *k = file_keys; *k; k++)
            known |= strcmp(*k, key) == 0;
        if (!known)
            return fail(&top, key, "unknown key");
    }
    const json_t *arr = json_object_get(doc->root, "workloads");
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return fail(&top, "workloads", "expected an array");
    return add_presets(p, doc, arr, doc->name, err);
}

int workload_presets_add_doc(struct workload_presets *p, const struct ujson_doc *doc,
                             struct libra_error *err)
{
    struct workload_presets tmp = {xmallocarray(p->n + 1, sizeof *p->items), p->n};
    if (p->n)
        memcpy(tmp.items, p->items, p->n * sizeof *p->items);
    int rc = add_doc(&tmp, doc, err);
    if (rc) {
        free(tmp.items);
        return rc;
    }
    free(p->items);
    *p = tmp;
    return 0;
}

int workload_presets_add_text(struct workload_presets *p, const char *name, const char *text,
                              size_t len, struct libra_error *err)
{
    struct ujson_doc doc;
    int rc = ujson_doc_parse(&doc, name, text, len, err);
    if (rc)
        return rc;
    rc = workload_presets_add_doc(p, &doc, err);
    ujson_doc_free(&doc);
    return rc;
}

int workload_presets_init(struct workload_presets *p, struct libra_error *err)
{
    memset(p, 0, sizeof *p);
    for (const struct embedded_file *f = embedded_files; f->name; f++) {
        if (strcmp(f->name, "workloads.json") != 0)
            continue;
        int rc = workload_presets_add_text(p, "<embedded:workloads.json>", f->data, f->len, err);
        for (size_t i = 0; i < p->n; i++)
            strcpy(p->items[i].origin, "builtin");
        return rc;
    }
    return error_set(err, NULL, 0, 0, "workloads.json is not embedded");
}

void workload_presets_free(struct workload_presets *p)
{
    if (!p)
        return;
    free(p->items);
    memset(p, 0, sizeof *p);
}

const struct workload_preset *workload_preset_find(const struct workload_presets *p,
                                                   const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcasecmp(p->items[i].name, name) == 0)
            return &p->items[i];
    return NULL;
}

/* ---- printing -------------------------------------------------------------------------- */

void workload_preset_names(const struct workload_presets *p, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < p->n && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", p->items[i].name);
}

static void set_path(json_t *obj, const char *path, json_t *v)
{
    char comp[64];
    for (;;) {
        size_t n = strcspn(path, "/");
        snprintf(comp, sizeof comp, "%.*s", (int)n, path);
        if (!path[n]) {
            json_object_set_new(obj, comp, v);
            return;
        }
        json_t *sub = json_object_get(obj, comp);
        if (!sub) {
            sub = json_object();
            json_object_set_new(obj, comp, sub);
        }
        obj = sub;
        path += n + 1;
    }
}

static json_t *fields_to_json(const struct field *t, size_t n, const void *src)
{
    json_t *obj = json_object();
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)src + t[i].offset;
        int64_t iv;
        double dv;
        int cv;
        json_t *v = NULL;
        switch (t[i].type) {
        case F_INT:
            memcpy(&iv, p, sizeof iv);
            v = json_integer(iv);
            break;
        case F_REAL:
            memcpy(&dv, p, sizeof dv);
            v = json_real(dv);
            break;
        case F_BOOL:
            v = json_boolean(*(const bool *)p);
            break;
        case F_TEXT:
            v = json_string(p);
            break;
        case F_CHOICE:
            memcpy(&cv, p, sizeof cv);
            v = json_string(t[i].choices[cv]);
            break;
        }
        set_path(obj, t[i].path, v);
    }
    return obj;
}

json_t *workload_preset_to_json(const struct workload_preset *w)
{
    json_t *obj = fields_to_json(preset_fields, N_PRESET_FIELDS, w);
    json_object_set_new(obj, "name", json_string(w->name));
    json_t *tools = json_array();
    for (size_t i = 0; i < w->n_tools; i++)
        json_array_append_new(tools, fields_to_json(tool_fields, N_TOOL_FIELDS, &w->tools[i]));
    json_object_set_new(obj, "tools", tools);
    return obj;
}

json_t *workload_preset_summary(const struct workload_preset *w)
{
    json_t *tools = json_array();
    for (size_t i = 0; i < w->n_tools; i++)
        json_array_append_new(tools, json_string(w->tools[i].name));
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "name", w->name, "origin",
                     w->origin, "prompts", (json_int_t)w->prompts, "samples",
                     (json_int_t)w->samples, "batch_trajectories",
                     (json_int_t)w->batch_trajectories, "max_turns", (json_int_t)w->max_turns,
                     "max_generated_tokens", (json_int_t)w->max_generated_tokens, "context_tokens",
                     (json_int_t)w->context_tokens, "tools", tools);
}
