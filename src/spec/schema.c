/*
 * Table-driven settings; see schema.h. Values move between three forms only here: JSON (files,
 * output), text (command-line flags, converted to JSON first so both share one checker) and
 * the C struct the rows point into.
 */
#include "spec/schema.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/parse.h"
#include "util/strbuf.h"

static void *at(void *base, const struct spec_field *f)
{
    return (char *)base + f->offset;
}

static const void *at_const(const void *base, const struct spec_field *f)
{
    return (const char *)base + f->offset;
}

static void store_int(void *p, size_t size, int64_t v)
{
    if (size == sizeof(int64_t)) {
        memcpy(p, &v, sizeof v);
    } else {
        int i = (int)v;
        memcpy(p, &i, sizeof i);
    }
}

static int64_t load_int(const void *p, size_t size)
{
    if (size == sizeof(int64_t)) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int i;
    memcpy(&i, p, sizeof i);
    return i;
}

static int name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

/* Joins names with ", " into out. */
static void names_text(const char *const *names, char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; names[i] && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%s", i ? ", " : "", names[i]);
}

void spec_fields_defaults(const struct spec_field *fields, size_t n, void *base)
{
    for (size_t i = 0; i < n; i++) {
        const struct spec_field *f = &fields[i];
        void *p = at(base, f);
        switch (f->type) {
        case SPEC_INT:
        case SPEC_ENUM:
            store_int(p, f->size, (int64_t)f->def);
            break;
        case SPEC_DOUBLE:
            *(double *)p = f->def;
            break;
        case SPEC_BOOL:
            *(bool *)p = f->def != 0;
            break;
        case SPEC_SET:
            *(unsigned *)p = (unsigned)f->def;
            break;
        case SPEC_STRING:
        case SPEC_LIST:
            snprintf(p, f->size, "%s", f->def_str ? f->def_str : "");
            break;
        }
    }
}

const struct spec_field *spec_field_find(const struct spec_field *fields, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(fields[i].key, key) == 0)
            return &fields[i];
    return NULL;
}

/* Levenshtein distance of two short strings; words longer than 63 bytes count as far. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return INT_MAX;
    int prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof prev);
    }
    return prev[lb];
}

/* Keeps the closest candidate within 2 edits of word. */
struct suggestion {
    const char *word;
    const char *best;
    int best_d;
};

static void consider(struct suggestion *s, const char *candidate)
{
    int d = edit_distance(candidate, s->word);
    if (d < s->best_d) {
        s->best_d = d;
        s->best = candidate;
    }
}

static void suggestion_text(const struct suggestion *s, char *hint, size_t size)
{
    if (s->best)
        snprintf(hint, size, " (did you mean '%s'?)", s->best);
    else if (size)
        hint[0] = '\0';
}

void spec_fields_suggest(const struct spec_field *fields, size_t n, const char *prefix,
                         const char *word, char *hint, size_t size)
{
    size_t plen = strlen(prefix);
    struct suggestion s = {word, NULL, 3};
    for (size_t i = 0; i < n; i++)
        if (strncmp(fields[i].key, prefix, plen) == 0)
            consider(&s, fields[i].key + plen);
    suggestion_text(&s, hint, size);
}

void spec_suggest(const char *const *candidates, const char *word, char *hint, size_t size)
{
    struct suggestion s = {word, NULL, 3};
    for (; *candidates; candidates++)
        consider(&s, *candidates);
    suggestion_text(&s, hint, size);
}

void spec_field_range_text(const struct spec_field *f, char *out, size_t size)
{
    bool lo = isfinite(f->min), hi = isfinite(f->max);
    if (f->type != SPEC_INT && f->type != SPEC_DOUBLE)
        lo = hi = false;
    char a[40], b[40];
    snprintf(a, sizeof a, "%.*g", f->type == SPEC_INT ? 17 : 15, f->min);
    snprintf(b, sizeof b, "%.*g", f->type == SPEC_INT ? 17 : 15, f->max);
    if (lo && hi && !(f->flags & SPEC_ABOVE_MIN))
        snprintf(out, size, "%s..%s", a, b);
    else if (lo && hi)
        snprintf(out, size, "> %s, <= %s", a, b);
    else if (lo)
        snprintf(out, size, "%s %s", f->flags & SPEC_ABOVE_MIN ? ">" : ">=", a);
    else if (hi)
        snprintf(out, size, "<= %s", b);
    else if (size)
        out[0] = '\0';
}

void spec_field_type_text(const struct spec_field *f, char *out, size_t size)
{
    static const char *const words[] = {
        [SPEC_INT] = "int",
        [SPEC_DOUBLE] = "number",
        [SPEC_BOOL] = "bool",
        [SPEC_STRING] = "string",
        [SPEC_ENUM] = "one of",
        [SPEC_SET] = "set of",
        [SPEC_LIST] = "list of strings",
    };
    if (f->type != SPEC_ENUM && f->type != SPEC_SET) {
        snprintf(out, size, "%s", words[f->type]);
        return;
    }
    char names[256];
    names_text(f->names, names, sizeof names);
    snprintf(out, size, "%s %s", words[f->type], names);
}

static bool in_range(const struct spec_field *f, double v)
{
    bool above = f->flags & SPEC_ABOVE_MIN ? v > f->min : v >= f->min;
    return above && v <= f->max;
}

static int range_error(const struct spec_field *f, char *why, size_t size)
{
    char range[96];
    spec_field_range_text(f, range, sizeof range);
    snprintf(why, size, "must be %s%s", strstr(range, "..") ? "in " : "", range);
    return LIBRA_EINVAL;
}

static int fail(char *why, size_t size, const char *msg)
{
    snprintf(why, size, "%s", msg);
    return LIBRA_EINVAL;
}

/*
 * Refuses d, a number an integer row cannot take as written (1e30, 2.5, one past int64): when
 * it is a whole number outside the row's range, by the range (a row without one: int64's), so
 * that `--gpus 99999999999999999999` says what --gpus takes; otherwise as not an integer.
 */
static int whole_number_error(const struct spec_field *f, double d, char *why, size_t size)
{
    if (isnan(d) || d != floor(d))
        return fail(why, size, "must be an integer");
    if (!in_range(f, d))
        return range_error(f, why, size);
    if (fabs(d) >= 0x1p63)
        return fail(why, size, "must be in -9223372036854775808..9223372036854775807");
    return fail(why, size, "must be an integer");
}

static int set_number(const struct spec_field *f, void *p, const json_t *v, char *why, size_t size)
{
    if (f->type == SPEC_DOUBLE) {
        double d;
        if (!ujson_as_double(v, &d))
            return fail(why, size, "must be a number");
        if (!in_range(f, d))
            return range_error(f, why, size);
        *(double *)p = d == 0 ? 0.0 : d; /* -0 is 0: one value, one config digest */
        return 0;
    }
    int64_t i;
    if (!ujson_as_int64(v, &i))
        return json_is_real(v) ? whole_number_error(f, json_real_value(v), why, size)
                               : fail(why, size, "must be an integer");
    bool fits = f->size == sizeof(int64_t) || (i >= INT_MIN && i <= INT_MAX);
    if (!fits || !in_range(f, (double)i))
        return range_error(f, why, size);
    store_int(p, f->size, i);
    return 0;
}

static int set_string(const struct spec_field *f, void *p, const json_t *v, char *why, size_t size)
{
    if (!json_is_string(v))
        return fail(why, size, "must be a string");
    size_t len = json_string_length(v);
    const char *s = json_string_value(v);
    if (strlen(s) != len)
        return fail(why, size, "must not contain NUL characters");
    if (f->type == SPEC_STRING && len >= f->size) {
        snprintf(why, size, "must be shorter than %zu bytes", f->size);
        return LIBRA_EINVAL;
    }
    if (f->type == SPEC_STRING) {
        memcpy(p, s, len + 1);
        return 0;
    }
    int i = name_index(f->names, s);
    if (i < 0) {
        char names[256];
        names_text(f->names, names, sizeof names);
        snprintf(why, size, "must be one of %s, not '%s'", names, s);
        return LIBRA_EINVAL;
    }
    store_int(p, f->size, i);
    return 0;
}

/* SET and LIST: a JSON array of strings. */
static int set_array(const struct spec_field *f, void *p, const json_t *v, char *why, size_t size)
{
    if (!json_is_array(v))
        return fail(why, size, "must be an array of strings");
    unsigned mask = 0;
    char *list = xcalloc(1, f->size);
    size_t used = 0, i;
    json_t *e;
    int rc = 0;
    json_array_foreach(v, i, e)
    {
        const char *s = json_string_value(e);
        if (!s || strlen(s) != json_string_length(e)) {
            rc = fail(why, size, "must be an array of strings");
            break;
        }
        if (f->type == SPEC_SET) {
            int k = name_index(f->names, s);
            if (k < 0) {
                char names[256];
                names_text(f->names, names, sizeof names);
                snprintf(why, size, "members must be among %s, not '%s'", names, s);
                rc = LIBRA_EINVAL;
                break;
            }
            if (mask & 1u << k) {
                snprintf(why, size, "'%s' is listed twice", s);
                rc = LIBRA_EINVAL;
                break;
            }
            mask |= 1u << k;
            continue;
        }
        if (strchr(s, ',') || !*s) {
            rc = fail(why, size, "members must be non-empty and contain no commas");
            break;
        }
        size_t need = used + (used ? 1 : 0) + strlen(s);
        if (need >= f->size) {
            snprintf(why, size, "must be shorter than %zu bytes when joined", f->size);
            rc = LIBRA_EINVAL;
            break;
        }
        used += (size_t)snprintf(list + used, f->size - used, "%s%s", used ? "," : "", s);
    }
    if (rc == 0 && f->type == SPEC_SET && (double)__builtin_popcount(mask) < f->min) {
        snprintf(why, size, "must have at least %.0f member%s", f->min, f->min == 1 ? "" : "s");
        rc = LIBRA_EINVAL;
    }
    if (rc == 0 && f->type == SPEC_SET)
        *(unsigned *)p = mask;
    else if (rc == 0)
        memcpy(p, list, f->size);
    free(list);
    return rc;
}

int spec_field_set(const struct spec_field *f, void *base, const json_t *v, char *why, size_t size)
{
    void *p = at(base, f);
    switch (f->type) {
    case SPEC_INT:
    case SPEC_DOUBLE:
        return set_number(f, p, v, why, size);
    case SPEC_BOOL:
        if (!json_is_boolean(v))
            return fail(why, size, "must be true or false");
        *(bool *)p = json_is_true(v);
        return 0;
    case SPEC_STRING:
    case SPEC_ENUM:
        return set_string(f, p, v, why, size);
    case SPEC_SET:
    case SPEC_LIST:
        return set_array(f, p, v, why, size);
    }
    return fail(why, size, "unknown field type");
}

/* "a,b" as ["a","b"], "" as [] and "a," as ["a",""] (an empty member, which the checker
 * refuses, not one left out); NULL when a member is not valid UTF-8. */
static json_t *split_commas(const char *text)
{
    json_t *a = json_array();
    for (const char *s = text; *text;) {
        size_t n = strcspn(s, ",");
        if (json_array_append_new(a, json_stringn(s, n)) != 0) {
            json_decref(a);
            return NULL;
        }
        if (!s[n])
            break;
        s += n + 1;
    }
    return a;
}

/* Whether text holds only the characters of a decimal number, as a file's JSON number does:
 * strtod also reads hexadecimal ("0x10"), "inf" and "nan", which no file can give. */
json_t *spec_field_parse_text(const struct spec_field *f, const char *text, char *why, size_t size)
{
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case SPEC_INT: {
        if (!parse_number_text(text)) {
            fail(why, size, "must be an integer, written as JSON writes one");
            return NULL;
        }
        long long v = strtoll(text, &end, 10);
        if (!*end && !errno)
            return json_integer(v);
        /* past int64, or a file's other notation (16.0, 1e1): a whole number in int64 is taken,
         * as a file's is; the others are out of the row's range, or not integers */
        double d = strtod(text, &end);
        if (d == floor(d) && fabs(d) < 0x1p63)
            return json_integer((json_int_t)d);
        whole_number_error(f, d, why, size);
        return NULL;
    }
    case SPEC_DOUBLE: {
        double v = strtod(text, &end);
        if (errno == ERANGE && fabs(v) < 1)
            errno = 0; /* below the smallest double: rounded, as a file's JSON number is */
        if (parse_number_text(text) && errno == ERANGE) {
            fail(why, size, "must be at most about 1.8e308 in magnitude");
            return NULL;
        }
        if (!parse_number_text(text) || errno || !isfinite(v)) {
            fail(why, size, "must be a finite number, written as JSON writes one");
            return NULL;
        }
        return json_real(v);
    }
    case SPEC_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0)
            return json_boolean(text[0] == 't');
        fail(why, size, "must be true or false");
        return NULL;
    case SPEC_STRING:
    case SPEC_ENUM:
    case SPEC_SET:
    case SPEC_LIST: {
        bool single = f->type == SPEC_STRING || f->type == SPEC_ENUM;
        json_t *v = single ? json_string(text) : split_commas(text);
        if (!v)
            fail(why, size, "must be valid UTF-8");
        return v;
    }
    }
    fail(why, size, "unknown field type");
    return NULL;
}

json_t *spec_field_get(const struct spec_field *f, const void *base)
{
    const void *p = at_const(base, f);
    switch (f->type) {
    case SPEC_INT:
        return json_integer(load_int(p, f->size));
    case SPEC_DOUBLE:
        return json_real(*(const double *)p);
    case SPEC_BOOL:
        return json_boolean(*(const bool *)p);
    case SPEC_STRING:
        return json_string(p);
    case SPEC_ENUM:
        return json_string(f->names[load_int(p, f->size)]);
    case SPEC_SET: {
        json_t *a = json_array();
        unsigned mask = *(const unsigned *)p;
        for (int i = 0; f->names[i]; i++)
            if (mask & (1u << i))
                json_array_append_new(a, json_string(f->names[i]));
        return a;
    }
    case SPEC_LIST:
        return split_commas(p);
    }
    return json_null();
}

char *spec_field_text(const struct spec_field *f, const void *base)
{
    json_t *v = spec_field_get(f, base);
    struct strbuf b = {0};
    if (json_is_string(v)) {
        strbuf_puts(&b, json_string_value(v));
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            strbuf_printf(&b, "%s%s", i ? "," : "", json_string_value(json_array_get(v, i)));
    } else {
        char *num = ujson_dump(v, false);
        strbuf_puts(&b, num);
        free(num);
    }
    json_decref(v);
    return strbuf_detach(&b);
}

/* Appends "/key" to path as a JSON Pointer component ('~' → "~0", '/' → "~1"). */
static void path_join(char *out, size_t size, const char *path, const char *key)
{
    size_t n = (size_t)snprintf(out, size, "%s%s", path, *path ? "/" : "");
    for (; *key && n + 3 < size; key++) {
        if (*key == '~' || *key == '/') {
            out[n++] = '~';
            out[n++] = *key == '~' ? '0' : '1';
        } else {
            out[n++] = *key;
        }
    }
    out[n < size ? n : size - 1] = '\0';
}

int spec_fields_read(const struct spec_field *fields, size_t n, const char *prefix,
                     const struct ujson_doc *doc, const char *path, const json_t *obj, void *base,
                     struct libra_error *err)
{
    if (!json_is_object(obj))
        return ujson_errorf(err, doc, path, "must be an object");
    const char *key;
    json_t *v;
    char full[256], member[512], why[256];
    json_object_foreach((json_t *)obj, key, v)
    {
        snprintf(full, sizeof full, "%s%s", prefix, key);
        path_join(member, sizeof member, path, key);
        const struct spec_field *f = spec_field_find(fields, n, full);
        if (!f) {
            char hint[96];
            spec_fields_suggest(fields, n, prefix, key, hint, sizeof hint);
            return ujson_errorf(err, doc, member, "unknown key%s", hint);
        }
        if (spec_field_set(f, base, v, why, sizeof why) != 0)
            return ujson_errorf(err, doc, member, "%s", why);
    }
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        const struct spec_field *f = &fields[i];
        if ((f->flags & SPEC_REQUIRED) && strncmp(f->key, prefix, plen) == 0 &&
            !json_object_get(obj, f->key + plen))
            return ujson_errorf(err, doc, path, "missing key '%s'", f->key + plen);
    }
    return 0;
}

json_t *spec_fields_to_json(const struct spec_field *fields, size_t n, const char *prefix,
                            const void *base)
{
    json_t *o = json_object();
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < n; i++)
        if (strncmp(fields[i].key, prefix, plen) == 0)
            json_object_set_new(o, fields[i].key + plen, spec_field_get(&fields[i], base));
    return o;
}

void spec_fields_doc(FILE *out, const struct spec_field *fields, size_t n, const char *prefix,
                     const void *defaults)
{
    size_t plen = strlen(prefix);
    fprintf(out, "| key | type | unit | default | range | flag | description |\n"
                 "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const struct spec_field *f = &fields[i];
        if (strncmp(f->key, prefix, plen) != 0)
            continue;
        char type[300], range[96], *def = NULL;
        spec_field_type_text(f, type, sizeof type);
        spec_field_range_text(f, range, sizeof range);
        if (!(f->flags & SPEC_REQUIRED)) {
            json_t *v = spec_field_get(f, defaults);
            def = ujson_dump(v, false);
            json_decref(v);
        }
        fprintf(out, "| `%s` | %s | %s | %s%s%s | %s | %s%s%s | %s |\n", f->key, type, f->unit,
                def ? "`" : "", def ? def : "required", def ? "`" : "", range, f->flag ? "`--" : "",
                f->flag ? f->flag : "", f->flag ? "`" : "", f->doc);
        free(def);
    }
}
