/*
 * Positional JSON documents and a deterministic printer; see json.h.
 *
 * ujson_locate re-scans the source text rather than recording positions during parsing:
 * errors are rare, documents small (configs, presets), and the common path stays jansson's.
 */
#include "util/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

/* 1-based line and column (in characters: UTF-8 continuation bytes do not count) of at. */
static void position(const char *text, const char *at, int *line, int *col)
{
    int l = 1, c = 1;
    for (const char *p = text; p < at; p++) {
        if (*p == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)*p & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* Whether the text ends inside a value: jansson wanted more (premature end), or stopped at its
 * end, past the white space that ends it (a file's last newline among it), within a token that
 * had not ended (a string, a literal, an escape) rather than at a bracket or separator it
 * rejected. end is the text less that white space. */
static bool cut_short(const char *text, const char *end, const json_error_t *e)
{
    enum json_error_code code = json_error_code(e);
    if (code == json_error_premature_end_of_input)
        return true;
    return (code == json_error_invalid_syntax || code == json_error_invalid_utf8) && end > text &&
           e->position >= end - text && !strchr("[]{}:,", end[-1]);
}

void ujson_error_at(const char *text, size_t len, const json_error_t *e, int *line, int *col)
{
    const char *at = NULL;
    if (json_error_code(e) == json_error_numeric_overflow && e->position > 0 &&
        (size_t)e->position <= len) { /* jansson is past the number: point at its start */
        at = text + e->position;
        while (at > text && strchr("0123456789+-.eE", at[-1]))
            at--;
    } else {
        const char *end = text + len;
        while (end > text && strchr(" \t\r\n", end[-1]))
            end--;
        if (cut_short(text, end, e)) /* the value missing is after its last character */
            at = end;
    }
    if (at) {
        position(text, at, line, col);
        return;
    }
    /* jansson reports line/column 1-based; column -1 when it has none. */
    *line = e->line > 0 ? e->line : 1;
    *col = e->column > 0 ? e->column : 1;
}

int ujson_doc_parse(struct ujson_doc *doc, const char *name, const char *text, size_t len,
                    struct libra_error *err)
{
    memset(doc, 0, sizeof *doc);
    /* jansson stops at a NUL byte as if the text ended there; the rest would go unread. */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line, col;
        position(text, nul, &line, &col);
        return error_set(err, name, line, col, "NUL byte in the text");
    }
    size_t lead = 0; /* the text need not end in a NUL: count within len */
    while (lead < len &&
           (text[lead] == ' ' || text[lead] == '\t' || text[lead] == '\r' || text[lead] == '\n'))
        lead++;
    if (lead == len) /* JSON's white space only: say so, not where it ends */
        return error_set(err, name, 1, 1, "empty: no JSON value");
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) {
        int line, col;
        ujson_error_at(text, len, &jerr, &line, &col);
        return error_set(err, name, line, col, "%s", ujson_error_text(&jerr));
    }
    doc->root = root;
    doc->name = xstrdup(name ? name : "");
    doc->text = xstrndup(text, len);
    doc->len = strlen(doc->text);
    return 0;
}

const char *ujson_error_text(const json_error_t *e)
{
    switch (json_error_code(e)) {
    case json_error_null_character:
        return "a string may not contain \\u0000";
    case json_error_null_byte_in_key:
        return "a key may not contain \\u0000";
    default:
        return e->text;
    }
}

void ujson_doc_free(struct ujson_doc *doc)
{
    if (!doc)
        return;
    json_decref(doc->root);
    free(doc->name);
    free(doc->text);
    memset(doc, 0, sizeof *doc);
}

/* ---- locating a path in valid JSON text ----------------------------------------------------- */

struct scan {
    const char *s;
    const char *end;
};

static void skip_ws(struct scan *sc)
{
    while (sc->s < sc->end && strchr(" \t\r\n", *sc->s))
        sc->s++;
}

/* Skips a string starting at its opening quote. */
static void skip_string(struct scan *sc)
{
    for (sc->s++; sc->s < sc->end && *sc->s != '"'; sc->s++)
        if (*sc->s == '\\')
            sc->s++;
    sc->s++;
}

static void skip_value(struct scan *sc)
{
    skip_ws(sc);
    if (sc->s >= sc->end)
        return;
    if (*sc->s == '"') {
        skip_string(sc);
        return;
    }
    if (*sc->s != '{' && *sc->s != '[') {
        while (sc->s < sc->end && !strchr(",}] \t\r\n", *sc->s))
            sc->s++;
        return;
    }
    int depth = 0;
    do {
        if (*sc->s == '"') {
            skip_string(sc);
            continue;
        }
        if (*sc->s == '{' || *sc->s == '[')
            depth++;
        else if (*sc->s == '}' || *sc->s == ']')
            depth--;
        sc->s++;
    } while (depth > 0 && sc->s < sc->end);
}

/* Decodes the key at sc->s (its opening quote) with jansson, so escapes compare exactly. */
static char *read_key(struct scan *sc)
{
    const char *start = sc->s;
    skip_string(sc);
    json_t *k = json_loadb(start, (size_t)(sc->s - start), JSON_DECODE_ANY, NULL);
    char *out = xstrdup(json_is_string(k) ? json_string_value(k) : "");
    json_decref(k);
    return out;
}

/* One path component: the bytes up to the next '/', still ~-escaped. */
struct component {
    const char *s;
    size_t len;
};

/* Splits off path's first component; returns the rest, or NULL when there is no '/'. */
static const char *split_path(const char *path, struct component *head)
{
    const char *slash = strchr(path, '/');
    head->s = path;
    head->len = slash ? (size_t)(slash - path) : strlen(path);
    return slash ? slash + 1 : NULL;
}

/* The unescaped character at c.s[*i], advancing *i past it ('~1' is '/', '~0' is '~'). */
static char next_char(struct component c, size_t *i)
{
    char ch = c.s[(*i)++];
    if (ch == '~' && *i < c.len && (c.s[*i] == '0' || c.s[*i] == '1'))
        ch = c.s[(*i)++] == '1' ? '/' : '~';
    return ch;
}

/* Whether the unescaped component equals key. */
static bool component_is(struct component c, const char *key)
{
    for (size_t i = 0; i < c.len;)
        if (*key++ != next_char(c, &i))
            return false;
    return *key == '\0';
}

/* The array index c names (decimal digits, no leading zero), or -1. */
static long component_index(struct component c)
{
    if (c.len == 0 || c.len > 15 || (c.s[0] == '0' && c.len > 1))
        return -1;
    long index = 0;
    for (size_t i = 0; i < c.len; i++) {
        if (c.s[i] < '0' || c.s[i] > '9')
            return -1;
        index = index * 10 + (c.s[i] - '0');
    }
    return index;
}

/* Finds path (NULL: the value at sc->s itself) in the value at sc->s. */
static const char *locate_in(struct scan *sc, const char *path)
{
    skip_ws(sc);
    if (!path)
        return sc->s;
    struct component head;
    const char *rest = split_path(path, &head);
    if (sc->s >= sc->end || (*sc->s != '{' && *sc->s != '['))
        return NULL;
    bool object = *sc->s == '{';
    long want = object ? -1 : component_index(head);
    if (!object && want < 0)
        return NULL;
    sc->s++;
    for (long index = 0;; index++) {
        skip_ws(sc);
        if (sc->s >= sc->end || *sc->s == '}' || *sc->s == ']')
            return NULL;
        if (object) {
            const char *key_pos = sc->s;
            char *key = read_key(sc);
            bool match = component_is(head, key);
            free(key);
            skip_ws(sc);
            sc->s++; /* ':' */
            if (match)
                return rest ? locate_in(sc, rest) : key_pos;
        } else if (index == want) {
            return locate_in(sc, rest);
        }
        skip_value(sc);
        skip_ws(sc);
        if (sc->s < sc->end && *sc->s == ',')
            sc->s++;
    }
}

int ujson_locate(const struct ujson_doc *doc, const char *path, int *line, int *col)
{
    if (!doc || !doc->text)
        return -1;
    struct scan sc = {doc->text, doc->text + doc->len};
    const char *at = locate_in(&sc, path && *path ? path : NULL);
    if (!at || at >= sc.end)
        return -1;
    position(doc->text, at, line, col);
    return 0;
}

/* Writes path with '.' between its unescaped components into out (truncating). */
static void dotted_path(const char *path, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = path && *path ? path : NULL; p;) {
        struct component c;
        p = split_path(p, &c);
        for (size_t i = 0; i < c.len;) {
            char ch = next_char(c, &i);
            if (n + 1 < size)
                out[n++] = ch;
        }
        if (p && n + 1 < size)
            out[n++] = '.';
    }
    out[n] = '\0';
}

const char *ujson_member_path(char *out, size_t size, const char *path, const char *key)
{
    size_t n = strlen(path);
    if (n + 2 > size)
        return path;
    memcpy(out, path, n);
    if (n)
        out[n++] = '/';
    for (const char *c = key; *c; c++) {
        const char *put = *c == '~' ? "~0" : *c == '/' ? "~1" : NULL;
        size_t k = put ? 2 : 1;
        if (n + k + 1 > size)
            return path;
        memcpy(out + n, put ? put : c, k);
        n += k;
    }
    out[n] = '\0';
    return out;
}

/* Locates path, or where it is absent (a missing member) its nearest ancestor present: the
 * object that lacks it. Returns -1 only without a document. */
static int locate_nearest(const struct ujson_doc *doc, const char *path, int *line, int *col)
{
    char *at = xstrdup(path ? path : "");
    int rc;
    while ((rc = ujson_locate(doc, at, line, col)) != 0 && *at) {
        char *slash = strrchr(at, '/');
        *(slash ? slash : at) = '\0';
    }
    free(at);
    return rc;
}

int ujson_errorf(struct libra_error *err, const struct ujson_doc *doc, const char *path,
                 const char *fmt, ...)
{
    if (!err)
        return LIBRA_EINVAL;
    int line = 0, col = 0;
    if (locate_nearest(doc, path, &line, &col) != 0)
        line = col = 0;
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char dotted[256];
    dotted_path(path, dotted, sizeof dotted);
    if (dotted[0])
        return error_set(err, doc ? doc->name : NULL, line, col, "%s: %s", dotted, msg);
    return error_set(err, doc ? doc->name : NULL, line, col, "%s", msg);
}

bool ujson_as_int64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9.0e15) {
            *out = (int64_t)d;
            return true;
        }
    }
    return false;
}

bool ujson_as_double(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

/* ---- deterministic printing -------------------------------------------------------------- */

/*
 * The project's float rule: the shortest of %.15g, %.16g, %.17g that reads back exactly, so
 * 0.1 prints as 0.1 and every double round-trips. Integral values keep a ".0" so they stay
 * reals on reading. jansson holds no NaN or infinity (ujson_real turns them into null).
 */
static void put_real(struct strbuf *b, double d)
{
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    if (!strpbrk(tmp, ".e"))
        strcat(tmp, ".0");
    strbuf_puts(b, tmp);
}

static void indent(struct strbuf *b, bool pretty, int depth)
{
    if (!pretty)
        return;
    strbuf_puts(b, "\n");
    for (int i = 0; i < depth; i++)
        strbuf_puts(b, "  ");
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void dump(struct strbuf *b, const json_t *v, bool pretty, int depth)
{
    char tmp[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(v), i = 0;
        if (!n) {
            strbuf_puts(b, "{}");
            return;
        }
        const char **keys = xmallocarray(n, sizeof *keys);
        const char *k;
        json_t *val;
        json_object_foreach((json_t *)v, k, val) keys[i++] = k;
        qsort(keys, n, sizeof *keys, cmp_keys);
        strbuf_puts(b, "{");
        for (i = 0; i < n; i++) {
            if (i)
                strbuf_puts(b, ",");
            indent(b, pretty, depth + 1);
            json_t *s = json_string(keys[i]);
            char *ks = json_dumps(s, JSON_ENCODE_ANY);
            strbuf_puts(b, ks);
            free(ks);
            json_decref(s);
            strbuf_puts(b, pretty ? ": " : ":");
            dump(b, json_object_get(v, keys[i]), pretty, depth + 1);
        }
        free(keys);
        indent(b, pretty, depth);
        strbuf_puts(b, "}");
        return;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (!n) {
            strbuf_puts(b, "[]");
            return;
        }
        strbuf_puts(b, "[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                strbuf_puts(b, ",");
            indent(b, pretty, depth + 1);
            dump(b, json_array_get(v, i), pretty, depth + 1);
        }
        indent(b, pretty, depth);
        strbuf_puts(b, "]");
        return;
    }
    case JSON_STRING: {
        char *s = json_dumps(v, JSON_ENCODE_ANY);
        strbuf_puts(b, s);
        free(s);
        return;
    }
    case JSON_INTEGER:
        snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        strbuf_puts(b, tmp);
        return;
    case JSON_REAL:
        put_real(b, json_real_value(v));
        return;
    case JSON_TRUE:
        strbuf_puts(b, "true");
        return;
    case JSON_FALSE:
        strbuf_puts(b, "false");
        return;
    case JSON_NULL:
        strbuf_puts(b, "null");
        return;
    }
}

char *ujson_dump(const json_t *v, bool pretty)
{
    struct strbuf b = {0};
    dump(&b, v, pretty, 0);
    return strbuf_detach(&b);
}

json_t *ujson_real(double d)
{
    return isfinite(d) ? json_real(d) : json_null();
}

/* The length of the valid UTF-8 sequence at s, or 0 (RFC 3629: the lead byte fixes the
 * length and the range of the second byte; the rest are continuation bytes). */
static size_t utf8_sequence(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) /* the NUL ends the string here too */
            return 0;
    return n;
}

bool ujson_utf8_valid(const char *s)
{
    json_t *v = json_string(s);
    json_decref(v);
    return v != NULL;
}

char *ujson_utf8_repair(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t n = utf8_sequence(p);
        if (n == 0) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
    return s;
}

const char *ujson_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}
