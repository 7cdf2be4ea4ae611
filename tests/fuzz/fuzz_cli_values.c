/*
 * Fuzz harness for the command line's values (src/util/parse.c): integers, numbers, lists with
 * "\," escapes, integer lists and A:B ranges. The first byte picks the range of the integer
 * parsers, the second that of the number parser (ranges the commands use, and the widest), the
 * rest is the text that every parser sees. Besides not crashing: an accepted value lies in its
 * range and, written back, parses to the same value; a split list joined again with its commas
 * escaped splits the same; a range has lo <= A <= B <= hi; a refusal leaves every output as it
 * was and says why, quoting the text whole in a why of strlen(text) + PARSE_WHY_EXTRA bytes.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "util/alloc.h"
#include "util/parse.h"
#include "util/strbuf.h"

static const int64_t int_ranges[][2] = {
    {INT64_MIN, INT64_MAX}, {0, INT64_MAX}, {1, 65535}, {0, 65535}, {0, 9007199254740991},
    {1, INT32_MAX},         {1, 100000},    {-5, 5},    {7, 7},     {0, 0},
    {INT64_MAX, INT64_MAX},
};
static const double double_ranges[][2] = {
    {-DBL_MAX, DBL_MAX}, {1e-6, 1e6}, {0.001, 1e9}, {0, 1e6}, {0, 1e9}, {0.01, 1000}, {-1, 1},
};
#define N_INT (sizeof int_ranges / sizeof int_ranges[0])
#define N_DOUBLE (sizeof double_ranges / sizeof double_ranges[0])
#define GUARD INT64_C(-4242424242)

/* A refusal's why: non-empty, whole (not cut), and, when quote, ending in 'TEXT'. */
static void check_why(const char *why, size_t size, const char *text, bool quote)
{
    size_t n = strnlen(why, size);
    fuzz_require(n > 0 && n < size - 1, "a refusal's reason is empty or cut");
    if (quote) {
        size_t t = strlen(text);
        fuzz_require(n >= t + 2 && why[n - 1] == '\'' && why[n - t - 2] == '\'' &&
                         memcmp(why + n - t - 1, text, t) == 0,
                     "a refusal's reason does not quote the text");
    }
}

/* Whether text is an optional sign and decimal digits. */
static bool integer_text(const char *text)
{
    const char *d = text + (*text == '+' || *text == '-');
    return *d && strspn(d, "0123456789") == strlen(d);
}

static void check_int(const char *text, int64_t lo, int64_t hi, char *why, size_t size)
{
    int64_t v = GUARD;
    why[0] = '\0';
    if (parse_int(text, lo, hi, &v, why, size) != 0) {
        fuzz_require(v == GUARD, "a refused integer was written");
        check_why(why, size, text, true);
        return;
    }
    fuzz_require(v >= lo && v <= hi, "an accepted integer is out of its range");
    fuzz_require(integer_text(text), "an accepted integer is not sign and digits");
    char back[32];
    int64_t again = GUARD;
    snprintf(back, sizeof back, "%lld", (long long)v);
    fuzz_require(parse_int(back, lo, hi, &again, why, size) == 0 && again == v,
                 "an integer written back does not parse to itself");
}

static void check_double(const char *text, double lo, double hi, char *why, size_t size)
{
    double v = -12345.5;
    why[0] = '\0';
    if (parse_double(text, lo, hi, &v, why, size) != 0) {
        fuzz_require(v == -12345.5, "a refused number was written");
        check_why(why, size, text, true);
        return;
    }
    fuzz_require(isfinite(v) && v >= lo && v <= hi, "an accepted number is out of its range");
    fuzz_require(strspn(text, "+-0123456789.eE") == strlen(text),
                 "an accepted number has other bytes");
    char back[64];
    double again = -12345.5;
    snprintf(back, sizeof back, "%.17g", v);
    fuzz_require(parse_double(back, lo, hi, &again, why, size) == 0 && again == v,
                 "a number written back does not parse to itself");
}

/* items[0..n) joined with commas, each comma inside an item escaped as "\,". */
static char *join_escaped(char **items, size_t n)
{
    struct strbuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (i)
            strbuf_puts(&b, ",");
        for (const char *c = items[i]; *c; c++)
            strbuf_puts(&b, *c == ',' ? "\\," : (char[]){*c, '\0'});
    }
    return strbuf_detach(&b);
}

static void free_items(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

static void check_list(const char *text)
{
    char **items;
    size_t n = parse_list(text, &items);
    fuzz_require(n >= 1, "a list has no item");
    size_t bytes = n - 1; /* the separating commas */
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(items[i]);
        bytes += len;
        for (size_t k = 0; k < len; k++)
            bytes += items[i][k] == ','; /* its backslash */
    }
    fuzz_require(bytes == strlen(text), "a list's items do not account for its text");
    char *joined = join_escaped(items, n);
    char **again;
    size_t m = parse_list(joined, &again);
    fuzz_require(m == n, "a list joined again splits into another count");
    for (size_t i = 0; i < n; i++)
        fuzz_require(strcmp(items[i], again[i]) == 0, "a list joined again splits differently");
    free_items(again, m);
    free(joined);
    free_items(items, n);
}

static void check_int_list(const char *text, int64_t lo, int64_t hi, bool prior, char *why,
                           size_t size)
{
    size_t n = 0;
    int64_t *vals = NULL;
    if (prior) { /* values an earlier flag gave */
        vals = xmalloc(2 * sizeof *vals);
        vals[0] = lo;
        vals[1] = hi;
        n = lo == hi ? 1 : 2;
    }
    int64_t *before = vals;
    size_t n_before = n;
    char **items;
    size_t k = parse_list(text, &items);
    why[0] = '\0';
    if (parse_int_list(text, lo, hi, "seed", &vals, &n, why, size) != 0) {
        fuzz_require(vals == before && n == n_before, "a refused list changed the values");
        check_why(why, size, text, false);
    } else {
        fuzz_require(n == n_before + k, "an accepted list added another count of values");
        fuzz_require(!prior || (vals[0] == lo && (n_before == 1 || vals[1] == hi)),
                     "an accepted list changed the earlier values");
        for (size_t i = 0; i < n; i++) {
            fuzz_require(vals[i] >= lo && vals[i] <= hi, "a listed integer is out of its range");
            for (size_t j = 0; j < i; j++)
                fuzz_require(vals[i] != vals[j], "a listed integer is there twice");
        }
        for (size_t i = 0; i < k; i++) {
            int64_t v = GUARD;
            fuzz_require(parse_int(items[i], lo, hi, &v, why, size) == 0 && v == vals[n_before + i],
                         "a listed integer is not its item's");
        }
    }
    free_items(items, k);
    free(vals);
}

static void check_range(const char *text, int64_t lo, int64_t hi, char *why, size_t size)
{
    int64_t a = GUARD, b = GUARD;
    why[0] = '\0';
    if (parse_int_range(text, lo, hi, &a, &b, why, size) != 0) {
        fuzz_require(a == GUARD && b == GUARD, "a refused range was written");
        check_why(why, size, NULL, false);
        return;
    }
    fuzz_require(lo <= a && a <= b && b <= hi, "an accepted range is not lo <= A <= B <= hi");
    char back[64];
    int64_t a2 = GUARD, b2 = GUARD;
    snprintf(back, sizeof back, "%lld:%lld", (long long)a, (long long)b);
    fuzz_require(parse_int_range(back, lo, hi, &a2, &b2, why, size) == 0 && a2 == a && b2 == b,
                 "a range written back does not parse to itself");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const int64_t *ir = int_ranges[data[0] % N_INT];
    const double *dr = double_ranges[data[1] % N_DOUBLE];
    char *text = xstrndup((const char *)data + 2, size - 2);
    size_t why_size = strlen(text) + PARSE_WHY_EXTRA;
    char *why = xmalloc(why_size);

    check_int(text, ir[0], ir[1], why, why_size);
    check_double(text, dr[0], dr[1], why, why_size);
    check_list(text);
    check_int_list(text, ir[0], ir[1], (data[0] / N_INT) & 1, why, why_size);
    check_range(text, ir[0], ir[1], why, why_size);

    /* a why too small is cut, never overrun */
    char small[8];
    int64_t v;
    parse_int(text, ir[0], ir[1], &v, small, sizeof small);
    parse_int_range(text, ir[0], ir[1], &v, &v, small, sizeof small);

    free(why);
    free(text);
    return 0;
}
