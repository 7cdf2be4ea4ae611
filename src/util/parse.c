/*
 * Values as typed on a command line (util/parse.h).
 */
#include "util/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/vec.h"

static const char *digits(const char *p)
{
    while (isdigit((unsigned char)*p))
        p++;
    return p;
}

bool parse_number_text(const char *text)
{
    const char *p = text + (*text == '-');
    if (!isdigit((unsigned char)*p))
        return false;
    p = *p == '0' ? p + 1 : digits(p);
    if (*p == '.') {
        if (!isdigit((unsigned char)p[1]))
            return false;
        p = digits(p + 1);
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if (!isdigit((unsigned char)*p))
            return false;
        p = digits(p);
    }
    return *p == '\0';
}

int parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out, char *why, size_t size)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || !parse_number_text(text) || strpbrk(text, ".eE") || v < lo || v > hi)
        return error_text(why, size, "expected an integer in [%lld, %lld], not '%s'", (long long)lo,
                          (long long)hi, text);
    *out = v;
    return 0;
}

int parse_double(const char *text, double lo, double hi, double *out, char *why, size_t size)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    /* decimal only, as a config file's number: strtod also reads " 1", "0x10" and "inf" */
    if (errno || end == text || *end || !parse_number_text(text) || !(v >= lo && v <= hi))
        return error_text(why, size, "expected a number in [%g, %g], not '%s'", lo, hi, text);
    *out = v;
    return 0;
}

size_t parse_list(const char *text, char ***out)
{
    VEC(char *) v = {0};
    char *cur = xcalloc(strlen(text) + 1, 1);
    size_t n = 0;
    for (const char *c = text;; c++) {
        if (*c == '\\' && c[1] == ',') {
            cur[n++] = *++c;
        } else if (*c == ',' || *c == '\0') {
            cur[n] = '\0';
            vec_push(&v, xstrdup(cur));
            n = 0;
            if (*c == '\0')
                break;
        } else {
            cur[n++] = *c;
        }
    }
    free(cur);
    *out = v.v;
    return v.n;
}

int parse_int_list(const char *text, int64_t lo, int64_t hi, const char *what, int64_t **vals,
                   size_t *n, char *why, size_t size)
{
    char **items;
    size_t k = parse_list(text, &items);
    VEC(int64_t) all = {0};
    vec_reserve(&all, *n + k);
    if (*n)
        memcpy(all.v, *vals, *n * sizeof **vals);
    all.n = *n;
    int rc = 0;
    for (size_t i = 0; i < k; i++) {
        int64_t v = 0;
        if (rc == 0 && (rc = parse_int(items[i], lo, hi, &v, why, size)) == 0)
            for (size_t j = 0; j < all.n && rc == 0; j++)
                if (all.v[j] == v)
                    rc = error_text(why, size, "%s %lld is listed twice", what, (long long)v);
        if (rc == 0)
            all.v[all.n++] = v;
        free(items[i]);
    }
    free(items);
    if (rc != 0) {
        vec_free(&all);
        return rc;
    }
    free(*vals);
    *vals = all.v;
    *n = all.n;
    return 0;
}

int parse_int_range(const char *text, int64_t lo, int64_t hi, int64_t *first, int64_t *last,
                    char *why, size_t size)
{
    const char *colon = strchr(text, ':');
    char a_text[32];
    if (!colon || (size_t)(colon - text) >= sizeof a_text)
        return error_text(why, size, "expected A:B, not '%s'", text);
    memcpy(a_text, text, (size_t)(colon - text));
    a_text[colon - text] = '\0';
    int64_t a = 0, b = 0;
    if (parse_int(a_text, lo, hi, &a, why, size) != 0 ||
        parse_int(colon + 1, lo, hi, &b, why, size) != 0)
        return -1;
    if (b < a)
        return error_text(why, size, "expected A:B with B at least A, not '%s'", text);
    *first = a;
    *last = b;
    return 0;
}
