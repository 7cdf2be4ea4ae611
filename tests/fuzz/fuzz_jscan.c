/*
 * Fuzz harness for util/jscan, differential against jansson. Arbitrary bytes go through
 * jscan_check, and these properties are checked, aborting on a violation (so libFuzzer and the
 * replay driver both report it):
 *
 *   - jscan_check accepts exactly what jansson (json_loadb, any value, \u0000 allowed) parses
 *     to an object, except where the two differ by design: jansson also rejects invalid UTF-8
 *     (only when the input is not valid UTF-8), numbers beyond int64 or double, and \u0000 in a
 *     member name; jscan also rejects nesting deeper than JSCAN_MAX_DEPTH, and raw NUL bytes,
 *     which jansson's reader drops in some places ({"n":[0<NUL>,1]} parses);
 *   - a rejection names an offset within the input, at its end for "unexpected end of input";
 *   - on a document without duplicate names: every member (jscan_get, and jscan_path for
 *     two-step paths) and every element (jscan_count, jscan_next) is a range inside the input
 *     whose text jansson parses to the value jansson found there, and the typed readers agree
 *     with jansson's scalars;
 *   - jscan_get_lazy finds each member where jscan_get does, and the members of an object
 *     found lazily are those of the exact object; jscan_get_many agrees with jscan_get;
 *   - on any input, accepted or not, the lookups the gateway makes on answers it does not
 *     validate (lazy members, their members, the first element, the typed readers, the cut
 *     of a member found) stay inside the input;
 *   - jscan_member_count finds each top-level name, once on a document without duplicates;
 *   - cutting any top-level member yields a document jscan_check accepts and jansson parses to
 *     the original minus that member (with duplicates: one member fewer, still valid), and
 *     jscan_cut_value of the member's value cuts the same bytes.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "util/jscan.h"

enum { LOOSE = JSON_DECODE_ANY | JSON_ALLOW_NUL };

struct input {
    const char *p;
    size_t len;
};

/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), as jansson wants. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80                 ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (k == 0 || n - i < k)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
        unsigned c1 = k > 1 ? s[i + 1] : 0;
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
            (c == 0xF4 && c1 > 0x8F))
            return false;
        i += k;
    }
    return true;
}

static void require_inside(const struct input *in, struct jscan_value v)
{
    fuzz_require(v.type != 0 && v.p >= in->p && v.len > 0 && v.len <= in->len &&
                     (size_t)(v.p - in->p) <= in->len - v.len,
                 "a value outside the input");
}

/* The jansson value of v's text. */
static json_t *parse_value(struct jscan_value v)
{
    json_t *j = json_loadb(v.p, v.len, LOOSE, NULL);
    fuzz_require(j != NULL, "a value's text does not parse");
    return j;
}

/* Everything below v agrees with jansson's j; v's document has no duplicate names. */
static void walk(const struct input *in, struct jscan_value v, const json_t *j)
{
    require_inside(in, v);
    json_t *whole = parse_value(v);
    fuzz_require(json_equal(whole, j), "a value's text parses to another value");
    json_decref(whole);
    int64_t i;
    double d;
    bool b;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        fuzz_require(v.type == 'o', "an object typed otherwise");
        fuzz_require(jscan_count(v) == -1, "jscan_count of an object");
        const char *key;
        json_t *member;
        const char *many[8];
        struct jscan_value got[8];
        size_t n_many = 0;
        json_object_foreach((json_t *)j, key, member)
        {
            struct jscan_value m, lazy;
            fuzz_require(jscan_get(v, key, &m), "a member not found");
            fuzz_require(jscan_get_lazy(v, key, &lazy) && lazy.p == m.p && lazy.type == m.type &&
                             lazy.p + lazy.len == v.p + v.len,
                         "jscan_get_lazy differs from jscan_get");
            if (n_many < 8)
                many[n_many++] = key;
            if (json_is_object(member)) {
                const char *key2;
                json_t *member2;
                json_object_foreach(member, key2, member2)
                {
                    struct jscan_value x, y;
                    fuzz_require(jscan_get(m, key2, &x) && jscan_get(lazy, key2, &y) &&
                                     x.p == y.p && x.len == y.len,
                                 "a member of a lazy object differs");
                }
                struct jscan_value x;
                fuzz_require(!jscan_get(lazy, "\x01 absent", &x), "an absent member found lazily");
            }
            walk(in, m, member);
            if (!json_is_object(member) || strchr(key, '.'))
                continue;
            const char *key2;
            json_t *member2;
            json_object_foreach(member, key2, member2)
            {
                if (strchr(key2, '.'))
                    continue;
                size_t n = strlen(key) + strlen(key2) + 2;
                char *path = malloc(n);
                snprintf(path, n, "%s.%s", key, key2);
                struct jscan_value p, q;
                fuzz_require(jscan_path(v, path, &p), "a two-step path not found");
                fuzz_require(jscan_get(m, key2, &q) && p.p == q.p && p.len == q.len,
                             "jscan_path differs from two jscan_get");
                free(path);
            }
        }
        struct jscan_value none;
        fuzz_require(!jscan_get(v, "\x01 absent", &none) && none.type == 0,
                     "an absent member found");
        many[n_many < 8 ? n_many++ : 7] = "\x01 absent";
        fuzz_require(jscan_get_many(v, many, n_many, got) == n_many - 1,
                     "jscan_get_many miscounts");
        for (size_t k = 0; k < n_many; k++) {
            struct jscan_value one;
            jscan_get(v, many[k], &one);
            fuzz_require(got[k].p == one.p && got[k].len == one.len && got[k].type == one.type,
                         "jscan_get_many differs from jscan_get");
        }
        break;
    }
    case JSON_ARRAY: {
        fuzz_require(jscan_count(v) == (long)json_array_size(j), "jscan_count differs");
        struct jscan_iter it = {0};
        struct jscan_value e;
        for (size_t k = 0; k < json_array_size(j); k++) {
            fuzz_require(jscan_next(v, &it, &e), "jscan_next stopped early");
            walk(in, e, json_array_get(j, k));
        }
        fuzz_require(!jscan_next(v, &it, &e) && e.type == 0, "jscan_next went on");
        fuzz_require(!jscan_next(v, &it, &e), "jscan_next went on after the end");
        break;
    }
    case JSON_STRING: {
        size_t n = json_string_length(j);
        char *s = malloc(in->len + 1);
        bool has_nul = memchr(json_string_value(j), '\0', n) != NULL;
        fuzz_require(jscan_string(v, s, in->len + 1) == !has_nul, "jscan_string's verdict differs");
        if (!has_nul) {
            fuzz_require(memcmp(s, json_string_value(j), n + 1) == 0, "jscan_string differs");
            fuzz_require(n == 0 || !jscan_string(v, s, n), "jscan_string fit in too few bytes");
        }
        free(s);
        break;
    }
    case JSON_INTEGER:
        fuzz_require(jscan_int(v, &i) && i == json_integer_value(j), "jscan_int differs");
        fuzz_require(jscan_number(v, &d) && d == (double)json_integer_value(j),
                     "jscan_number differs");
        break;
    case JSON_REAL:
        fuzz_require(!jscan_int(v, &i), "jscan_int of a real");
        fuzz_require(jscan_number(v, &d) && d == json_real_value(j), "jscan_number differs");
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        fuzz_require(jscan_bool(v, &b) && b == json_is_true(j), "jscan_bool differs");
        break;
    case JSON_NULL:
        fuzz_require(v.type == 'z' && !jscan_bool(v, &b), "null typed otherwise");
        break;
    }
}

/* Cuts key out of root; the result must be valid, and (strict: without duplicates) equal to
 * the document without key. */
static void check_cut(struct jscan_value root, const json_t *doc, const char *key, bool strict)
{
    struct jscan_cut cut, at;
    struct jscan_value val;
    fuzz_require(jscan_cut(root, key, &cut), "a member cannot be cut");
    fuzz_require(jscan_get(root, key, &val) && jscan_cut_value(root, val, &at) &&
                     at.head_len == cut.head_len && at.tail_off == cut.tail_off,
                 "jscan_cut_value differs from jscan_cut");
    fuzz_require(cut.head_len >= 1 && cut.head_len <= cut.tail_off && cut.tail_off < root.len,
                 "a cut outside the object");
    size_t n = cut.head_len + root.len - cut.tail_off;
    char *out = malloc(n);
    memcpy(out, root.p, cut.head_len);
    memcpy(out + cut.head_len, root.p + cut.tail_off, root.len - cut.tail_off);
    fuzz_require(jscan_check(out, n, NULL, NULL) == 0, "a cut document is not valid");
    json_t *back = json_loadb(out, n, LOOSE, NULL);
    fuzz_require(back != NULL, "jansson rejects a cut document");
    if (strict) {
        json_t *want = json_deep_copy(doc);
        json_object_del(want, key);
        fuzz_require(json_equal(back, want), "a cut document is not the original minus the member");
        json_decref(want);
    }
    free(out);
    json_decref(back);
}

/* A range inside the input, perhaps empty (unchecked text can give a value of no bytes). */
static void require_within(const struct input *in, struct jscan_value v)
{
    fuzz_require(v.p >= in->p && v.len <= in->len && (size_t)(v.p - in->p) <= in->len - v.len,
                 "a value outside the input");
}

/* What the gateway reads from an answer it does not validate (server/proxy.c), on any text. */
static void read_unchecked(const struct input *in)
{
    static const char *const keys[] = {"meta_info", "usage", "choices", "a", ""};
    struct jscan_value root = jscan_root(in->p, in->len), v, w, got[5];
    struct jscan_iter it = {0};
    int64_t i;
    char s[32];
    jscan_get_many(root, keys, 5, got);
    for (size_t k = 0; k < 5; k++) {
        struct jscan_cut cut;
        if (got[k].p)
            require_within(in, got[k]);
        if (got[k].p && jscan_cut_value(root, got[k], &cut))
            fuzz_require(cut.head_len <= cut.tail_off && cut.tail_off <= root.len,
                         "jscan_cut_value outside the object");
        if (!jscan_get_lazy(root, keys[k], &v))
            continue;
        require_within(in, v);
        if (jscan_next(v, &it, &w))
            require_within(in, w);
        for (size_t k2 = 0; k2 < 5; k2++)
            if (jscan_get(v, keys[k2], &w)) {
                require_within(in, w);
                jscan_int(w, &i);
                jscan_string(w, s, sizeof s);
                jscan_count(w);
            }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {(const char *)data, size};
    size_t off = SIZE_MAX;
    const char *msg = NULL;
    int rc = jscan_check(in.p, size, &off, &msg);
    read_unchecked(&in);
    json_error_t err;
    json_t *loose = json_loadb(in.p, size, LOOSE, &err);
    if (rc != 0) {
        fuzz_require(rc == -1 && off <= size && msg && msg[0],
                     "an error without offset or message");
        fuzz_require(strcmp(msg, "unexpected end of input") != 0 || off == size,
                     "an early end reported before the end");
        fuzz_require(!json_is_object(loose) || strstr(msg, "deeper than") || memchr(data, 0, size),
                     "jscan rejects an object jansson accepts");
        json_decref(loose);
        return 0;
    }
    fuzz_require(off == SIZE_MAX && msg == NULL, "outputs written on success");
    fuzz_require(!memchr(data, 0, size), "a NUL byte accepted");
    struct jscan_value root = jscan_root(in.p, size);
    fuzz_require(root.type == 'o', "an accepted document's root is not an object");
    if (!loose) {
        enum json_error_code code = json_error_code(&err);
        fuzz_require((code == json_error_invalid_utf8 && !valid_utf8(data, size)) ||
                         code == json_error_numeric_overflow || code == json_error_null_byte_in_key,
                     "jscan accepts what jansson rejects");
        return 0;
    }
    fuzz_require(json_is_object(loose), "jscan accepts a non-object");
    json_t *strict = json_loadb(in.p, size, LOOSE | JSON_REJECT_DUPLICATES, NULL);
    if (strict)
        walk(&in, root, strict);
    const char *key;
    json_t *member;
    json_object_foreach(loose, key, member)
    {
        check_cut(root, strict, key, strict != NULL);
        size_t count = jscan_member_count(root, key);
        fuzz_require(count >= 1 && (count == 1 || !strict),
                     "a member counted otherwise than given");
    }
    json_decref(strict);
    json_decref(loose);
    return 0;
}
