/*
 * The bounded JSON scanner; see jscan.h.
 *
 * Two halves. jscan_check is a validating state machine over byte offsets: no recursion, the
 * kinds of the open containers kept as bits of one uint64_t (hence JSCAN_MAX_DEPTH 64). The
 * readers after it trust the text and only skip: a string ends at the first '"' not preceded by
 * an odd run of backslashes (memchr finds the candidates), a container at the bracket that
 * balances its own, counting brackets outside strings.
 *
 * The body the gateway sees is mostly one long array of digits and commas, so the loops that
 * cross it look at eight bytes at a time (SWAR, on little-endian machines; a byte loop
 * elsewhere): skipping a container and counting elements test a word for quotes and brackets
 * (exactly, outside strings: the letters of literals raise no alarm, so log-prob arrays of
 * arrays are counted word by word too), counting adds the word's commas, and validation finds
 * the end of a run of digits or of plain string bytes per word. In an array, jscan_check takes
 * "1,22,333" and "1, 22, 333" (Python's separators) one number after another without going
 * round its state machine. bench/bench_jscan.c has the figures.
 */
#include "util/jscan.h"

#include <stdlib.h>
#include <string.h>

/* ---- byte classes --------------------------------------------------------------------------- */

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* A byte that can occur in a number's text. */
static bool is_number_byte(char c)
{
    return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* A byte that matters when skipping a container: a quote or a bracket. */
static bool is_structural(char c)
{
    return c == '"' || c == '[' || c == ']' || c == '{' || c == '}';
}

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && is_ws(*p))
        p++;
    return p;
}

/* The type letter of the value whose first byte is c (0 when none starts so). */
static char type_of(char c)
{
    switch (c) {
    case '{':
        return 'o';
    case '[':
        return 'a';
    case '"':
        return 's';
    case 't':
        return 't';
    case 'f':
        return 'f';
    case 'n':
        return 'z';
    default:
        return c == '-' || is_digit(c) ? 'n' : 0;
    }
}

/* ---- eight bytes at a time ------------------------------------------------------------------ */

#define ONES 0x0101010101010101u
#define LOW7 0x7f7f7f7f7f7f7f7fu

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define JSCAN_SWAR 1

static uint64_t load8(const char *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* 0x80 in exactly the bytes of x that are zero (no borrow crosses bytes, unlike x - ONES). */
static uint64_t zero_bytes(uint64_t x)
{
    return ~(((x & LOW7) + LOW7) | x | LOW7);
}

/* 0x80 in exactly the bytes of x equal to c. */
static uint64_t bytes_eq(uint64_t x, unsigned char c)
{
    return zero_bytes(x ^ (ONES * c));
}

/* 0x80 in exactly the bytes of x that are not zero. */
static uint64_t nonzero_bytes(uint64_t x)
{
    return (((x & LOW7) + LOW7) | x) & ~LOW7;
}

/*
 * 0x80 in the bytes of x that may be a bracket: exactly the bytes that OR 0x26 makes 0x7F —
 * '[' ']' '{' '}' and, besides them, only 'Y' '_' 'y' and DEL, which valid JSON holds inside
 * strings alone. So outside strings of valid text the test is exact: the letters of true,
 * false, null and exponents, the bulk of log-prob arrays, raise no false alarm.
 */
static uint64_t bracket_bytes(uint64_t x)
{
    return bytes_eq(x | (ONES * 0x26), 0x7F);
}

/* 0x80 in the bytes of x that may be a quote or a bracket (see bracket_bytes). */
static uint64_t structural_bytes(uint64_t x)
{
    return bracket_bytes(x) | bytes_eq(x, '"');
}

/* 0x80 in exactly the bytes of x that are not ASCII digits: a digit has high nibble 3 and low
 * nibble below 10 (low + 6 does not reach 0x10). */
static uint64_t nondigit_bytes(uint64_t x)
{
    uint64_t high = (x & (ONES * 0xF0)) ^ (ONES * 0x30);
    uint64_t low_over_9 = (((x & (ONES * 0x0F)) + ONES * 0x06) & (ONES * 0x10)) << 3;
    return nonzero_bytes(high) | low_over_9;
}

/* The number of flagged bytes of a mask (a multiply, not a popcount: without -mpopcnt,
 * __builtin_popcountll is a libgcc call). */
static unsigned flagged_bytes(uint64_t mask)
{
    return (unsigned)(((mask >> 7) * ONES) >> 56);
}

/* Index of the lowest flagged byte of a non-zero mask. */
static unsigned first_byte(uint64_t mask)
{
    return (unsigned)__builtin_ctzll(mask) / 8;
}
#endif

/* The first quote or bracket in [p, end), or end. */
static const char *next_structural(const char *p, const char *end)
{
    for (;;) {
#ifdef JSCAN_SWAR
        while (end - p >= 8 && !structural_bytes(load8(p)))
            p += 8;
#endif
        /* The flagged block byte by byte (a false alarm only on unchecked text), then blocks. */
        const char *stop = end - p > 8 ? p + 8 : end;
        for (; p < stop; p++)
            if (is_structural(*p))
                return p;
        if (p == end)
            return end;
    }
}

/* The first byte at or after i in s[0..len) that is not a digit, or len. */
static inline size_t digits_from(const char *s, size_t len, size_t i)
{
#ifdef JSCAN_SWAR
    while (len - i >= 8) {
        uint64_t m = nondigit_bytes(load8(s + i));
        if (m)
            return i + first_byte(m);
        i += 8;
    }
#endif
    while (i < len && is_digit(s[i]))
        i++;
    return i;
}

/* ---- skipping values of valid text ---------------------------------------------------------- */

/* Whether the quote at q is escaped: an odd run of backslashes precedes it (counted back no
 * further than from). */
static bool quote_escaped(const char *q, const char *from)
{
    const char *b = q;
    while (b > from && b[-1] == '\\')
        b--;
    return ((size_t)(q - b) & 1) != 0;
}

/* p at a string's opening quote: returns the byte after its closing quote (end if none). */
static const char *skip_string(const char *p, const char *end)
{
    const char *from = p + 1;
    for (;;) {
        const char *q = memchr(from, '"', (size_t)(end - from));
        if (!q)
            return end;
        if (!quote_escaped(q, from)) /* the run cannot reach back past from, after a quote */
            return q + 1;
        from = q + 1;
    }
}

/* p at '{' or '[': returns the byte after the bracket that closes it (end if none). */
static const char *skip_container(const char *p, const char *end)
{
    size_t depth = 0;
    for (p = next_structural(p, end); p < end; p = next_structural(p, end)) {
        char c = *p;
        if (c == '"') {
            p = skip_string(p, end);
            continue;
        }
        p++;
        if (c == '{' || c == '[')
            depth++;
        else if (--depth == 0)
            return p;
#ifdef JSCAN_SWAR
        /* Blocks without a quote whose closing brackets cannot end the value are counted, not
         * walked: an array of arrays ([[-0.5,1,null],...], log-probs) costs a few operations
         * per 8 bytes instead of a stop at every bracket, and a block of digits fewer still.
         * (Of the brackets, ']' and '}' are exactly those that OR 0x20 makes '}'.) */
        while (end - p >= 8) {
            uint64_t x = load8(p);
            if (bytes_eq(x, '"'))
                break;
            uint64_t brackets = bracket_bytes(x);
            if (brackets) {
                unsigned closes = flagged_bytes(bytes_eq(x | (ONES * 0x20), '}'));
                if (closes >= depth)
                    break;
                depth = depth + flagged_bytes(brackets) - 2 * closes;
            }
            p += 8;
        }
#endif
    }
    return end;
}

/* p at the first byte of a value: returns the byte after it. */
static const char *skip_value(const char *p, const char *end)
{
    if (p >= end)
        return end;
    switch (*p) {
    case '"':
        return skip_string(p, end);
    case '{':
    case '[':
        return skip_container(p, end);
    case 't':
    case 'n':
        return end - p >= 4 ? p + 4 : end;
    case 'f':
        return end - p >= 5 ? p + 5 : end;
    default:
        while (p < end && is_number_byte(*p))
            p++;
        return p;
    }
}

/* The value that starts at p (type 0 when p == end). */
static struct jscan_value value_at(const char *p, const char *end)
{
    if (p >= end)
        return (struct jscan_value){NULL, 0, 0};
    const char *q = skip_value(p, end);
    return (struct jscan_value){p, (size_t)(q - p), type_of(*p)};
}

/* ---- escapes -------------------------------------------------------------------------------- */

/* The 4 hex digits at p as a number, or -1. */
static long hex4(const char *p, const char *end)
{
    if (end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = is_digit(c)              ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static bool is_high_surrogate(long cp)
{
    return cp >= 0xD800 && cp <= 0xDBFF;
}

static bool is_low_surrogate(long cp)
{
    return cp >= 0xDC00 && cp <= 0xDFFF;
}

/* Writes code point cp (< 0x110000, not a surrogate) as UTF-8; returns the bytes written. */
static size_t utf8_put(long cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * Decodes the escape at p (a backslash) into out[0..*n): one byte, or the UTF-8 of a \uXXXX
 * escape or surrogate pair. Returns the byte after the escape, or NULL when it is malformed.
 */
static const char *unescape(const char *p, const char *end, char out[4], size_t *n)
{
    if (end - p < 2)
        return NULL;
    *n = 1;
    switch (p[1]) {
    case '"':
    case '\\':
    case '/':
        out[0] = p[1];
        return p + 2;
    case 'b':
        out[0] = '\b';
        return p + 2;
    case 'f':
        out[0] = '\f';
        return p + 2;
    case 'n':
        out[0] = '\n';
        return p + 2;
    case 'r':
        out[0] = '\r';
        return p + 2;
    case 't':
        out[0] = '\t';
        return p + 2;
    case 'u':
        break;
    default:
        return NULL;
    }
    long cp = hex4(p + 2, end);
    if (cp < 0 || is_low_surrogate(cp))
        return NULL;
    p += 6;
    if (is_high_surrogate(cp)) {
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
            return NULL;
        long low = hex4(p + 2, end);
        if (!is_low_surrogate(low))
            return NULL;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        p += 6;
    }
    *n = utf8_put(cp, out);
    return p;
}

/* Whether the raw string contents [raw, raw_end) unescape to exactly name[0..n). */
static bool name_equals(const char *raw, const char *raw_end, const char *name, size_t n)
{
    if (!memchr(raw, '\\', (size_t)(raw_end - raw)))
        return (size_t)(raw_end - raw) == n && memcmp(raw, name, n) == 0;
    size_t k = 0;
    while (raw < raw_end) {
        if (*raw != '\\') {
            if (k == n || name[k] != *raw)
                return false;
            k++;
            raw++;
            continue;
        }
        char u[4];
        size_t m;
        raw = unescape(raw, raw_end, u, &m);
        if (!raw || m > n - k || memcmp(name + k, u, m) != 0)
            return false;
        k += m;
    }
    return k == n;
}

/* ---- members -------------------------------------------------------------------------------- */

struct member {
    const char *name;     /* the name's opening quote */
    const char *name_end; /* byte after its closing quote */
    const char *val;      /* first byte of the value */
    const char *val_end;  /* byte after the value */
    const char *prev;     /* byte after the previous member's value; NULL for the first member */
};

/* A walk over an object's members, in order. */
struct members {
    const char *p;    /* the next member's opening quote, or where the walk stopped */
    const char *end;  /* the object's closing brace */
    const char *prev; /* byte after the last value skipped; NULL before the first */
};

/* Starts a walk over obj's members; false when obj is not an object. */
static bool members_start(struct jscan_value obj, struct members *w)
{
    if (obj.type != 'o' || obj.len < 2 || !obj.p)
        return false;
    w->end = obj.p + obj.len - 1;
    w->p = skip_ws(obj.p + 1, w->end);
    w->prev = NULL;
    return true;
}

/* Reads the next member's name and the start of its value into m (not its val_end); false
 * when there is none. */
static bool members_head(const struct members *w, struct member *m)
{
    if (w->p >= w->end || *w->p != '"')
        return false;
    const char *name_end = skip_string(w->p, w->end);
    const char *val = skip_ws(name_end, w->end);
    if (val < w->end && *val == ':')
        val = skip_ws(val + 1, w->end);
    *m = (struct member){w->p, name_end, val, NULL, w->prev};
    return true;
}

/* Skips the value of m (read by members_head), setting its val_end, and steps to the next
 * member (where the walk stops when no comma follows). */
static void members_skip(struct members *w, struct member *m)
{
    m->val_end = skip_value(m->val, w->end);
    w->prev = m->val_end;
    const char *p = skip_ws(m->val_end, w->end);
    w->p = p < w->end && *p == ',' ? skip_ws(p + 1, w->end) : w->end;
}

/* Whether m's name is name[0..n). */
static bool member_named(const struct member *m, const char *name, size_t n)
{
    return m->name_end - m->name >= 2 && name_equals(m->name + 1, m->name_end - 1, name, n);
}

/* Finds the first member of obj named name[0..n); lazy: the value found is not skipped (its
 * val_end is obj's end). */
static bool find_member(struct jscan_value obj, const char *name, size_t n, bool lazy,
                        struct member *m)
{
    struct members w;
    if (!members_start(obj, &w))
        return false;
    while (members_head(&w, m)) {
        bool match = member_named(m, name, n);
        if (match && lazy && m->val < w.end) {
            m->val_end = obj.p + obj.len;
            return true;
        }
        members_skip(&w, m);
        if (match)
            return true;
    }
    return false;
}

/* The member's value (already skipped: value_at would skip it again). */
static struct jscan_value member_value(const struct member *m)
{
    return (struct jscan_value){m->val, (size_t)(m->val_end - m->val), type_of(*m->val)};
}

static void set_absent(struct jscan_value *out)
{
    *out = (struct jscan_value){NULL, 0, 0};
}

bool jscan_get(struct jscan_value obj, const char *key, struct jscan_value *out)
{
    struct member m;
    if (!find_member(obj, key, strlen(key), false, &m)) {
        set_absent(out);
        return false;
    }
    *out = member_value(&m);
    return true;
}

bool jscan_get_lazy(struct jscan_value obj, const char *key, struct jscan_value *out)
{
    struct member m;
    if (!find_member(obj, key, strlen(key), true, &m)) {
        set_absent(out);
        return false;
    }
    *out = member_value(&m);
    return true;
}

size_t jscan_get_many(struct jscan_value obj, const char *const *keys, size_t n,
                      struct jscan_value *out)
{
    size_t found = 0;
    struct members w;
    struct member m;
    for (size_t i = 0; i < n; i++)
        set_absent(&out[i]);
    if (!members_start(obj, &w))
        return 0;
    while (found < n && members_head(&w, &m)) {
        members_skip(&w, &m);
        for (size_t i = 0; i < n && m.val < w.end; i++)
            if (!out[i].p && member_named(&m, keys[i], strlen(keys[i]))) {
                out[i] = member_value(&m);
                found++;
            }
    }
    return found;
}

bool jscan_other_member(struct jscan_value obj, const char *const *keys, struct jscan_value *name)
{
    struct members w;
    struct member m;
    if (!members_start(obj, &w))
        return false;
    while (members_head(&w, &m)) {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++)
            known = member_named(&m, *k, strlen(*k));
        if (!known) {
            *name = (struct jscan_value){m.name, (size_t)(m.name_end - m.name), 's'};
            return true;
        }
        members_skip(&w, &m);
    }
    return false;
}

size_t jscan_member_count(struct jscan_value obj, const char *key)
{
    size_t count = 0, n = strlen(key);
    struct members w;
    struct member m;
    if (!members_start(obj, &w))
        return 0;
    while (members_head(&w, &m)) {
        count += member_named(&m, key, n);
        members_skip(&w, &m);
    }
    return count;
}

bool jscan_path(struct jscan_value obj, const char *path, struct jscan_value *out)
{
    struct jscan_value cur = obj;
    for (const char *c = path;;) {
        const char *dot = strchr(c, '.');
        size_t n = dot ? (size_t)(dot - c) : strlen(c);
        struct member m;
        if (!find_member(cur, c, n, false, &m)) {
            set_absent(out);
            return false;
        }
        cur = member_value(&m);
        if (!dot)
            break;
        c = dot + 1;
    }
    *out = cur;
    return true;
}

struct jscan_value jscan_root(const char *buf, size_t len)
{
    const char *end = buf + len;
    const char *p = skip_ws(buf, end);
    while (end > p && is_ws(end[-1]))
        end--;
    if (p == end)
        return (struct jscan_value){NULL, 0, 0};
    return (struct jscan_value){p, (size_t)(end - p), type_of(*p)};
}

/* The cut of obj's member whose name's opening quote is at name and whose value ends before
 * val_end; prev is the byte after the previous member's value, NULL for the first member. */
static void cut_member(struct jscan_value obj, const char *name, const char *val_end,
                       const char *prev, struct jscan_cut *out)
{
    if (prev) {
        /* From the end of the previous value: drops ", name: value". */
        out->head_len = (size_t)(prev - obj.p);
        out->tail_off = (size_t)(val_end - obj.p);
        return;
    }
    /* The first member: drops "name: value," and the whitespace after the comma. */
    const char *end = obj.p + obj.len - 1;
    const char *q = skip_ws(val_end, end);
    out->head_len = (size_t)(name - obj.p);
    out->tail_off = (size_t)((q < end && *q == ',' ? skip_ws(q + 1, end) : val_end) - obj.p);
}

bool jscan_cut(struct jscan_value obj, const char *key, struct jscan_cut *out)
{
    struct member m;
    if (!find_member(obj, key, strlen(key), false, &m))
        return false;
    cut_member(obj, m.name, m.val_end, m.prev, out);
    return true;
}

/* The byte after the last non-whitespace byte before p, or begin. */
static const char *back_ws(const char *p, const char *begin)
{
    while (p > begin && is_ws(p[-1]))
        p--;
    return p;
}

/* The opening quote of the string whose closing quote is at close, or NULL: the first quote
 * before it that an even run of backslashes precedes (inside a string every quote is
 * escaped; before a name's opening quote there is no backslash). */
static const char *string_start(const char *close, const char *begin)
{
    for (const char *q = close; q-- > begin;)
        if (*q == '"' && !quote_escaped(q, begin))
            return q;
    return NULL;
}

bool jscan_cut_value(struct jscan_value obj, struct jscan_value val, struct jscan_cut *out)
{
    if (obj.type != 'o' || obj.len < 2 || !obj.p || !val.p || val.p <= obj.p ||
        val.len >= obj.len || (size_t)(val.p - obj.p) >= obj.len - val.len)
        return false;
    const char *begin = obj.p + 1; /* after the opening brace */
    const char *colon = back_ws(val.p, begin);
    if (colon == begin || colon[-1] != ':')
        return false;
    const char *close = back_ws(colon - 1, begin);
    const char *name = close > begin && close[-1] == '"' ? string_start(close - 1, begin) : NULL;
    if (!name)
        return false;
    const char *comma = back_ws(name, begin), *prev = NULL;
    if (comma > begin) { /* another member comes before it */
        if (comma[-1] != ',')
            return false;
        prev = back_ws(comma - 1, begin);
    }
    cut_member(obj, name, val.p + val.len, prev, out);
    return true;
}

/* ---- scalars -------------------------------------------------------------------------------- */

bool jscan_int(struct jscan_value v, int64_t *out)
{
    if (v.type != 'n' || v.len == 0)
        return false;
    const char *p = v.p, *end = v.p + v.len;
    bool negative = *p == '-';
    if (negative)
        p++;
    if (p == end)
        return false;
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t magnitude = 0;
    for (; p < end; p++) {
        if (!is_digit(*p))
            return false; /* a fraction or an exponent */
        unsigned d = (unsigned)(*p - '0');
        if (magnitude > (limit - d) / 10)
            return false;
        magnitude = magnitude * 10 + d;
    }
    if (negative)
        *out = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
    else
        *out = (int64_t)magnitude;
    return true;
}

bool jscan_number(struct jscan_value v, double *out)
{
    if (v.type != 'n' || v.len == 0)
        return false;
    char tmp[64];
    const char *text = v.p;
    if (v.len < sizeof tmp) {
        /* Only number bytes: strtod must not see "inf", "nan" or hex in unchecked text. */
        for (size_t i = 0; i < v.len; i++)
            if (!is_number_byte(v.p[i]))
                return false;
        memcpy(tmp, v.p, v.len);
        tmp[v.len] = '\0';
        text = tmp;
    }
    char *stop;
    double d = strtod(text, &stop);
    if (stop != text + v.len)
        return false;
    *out = d;
    return true;
}

bool jscan_bool(struct jscan_value v, bool *out)
{
    if (v.type != 't' && v.type != 'f')
        return false;
    *out = v.type == 't';
    return true;
}

bool jscan_string(struct jscan_value v, char *out, size_t size)
{
    if (size == 0)
        return false;
    out[0] = '\0';
    if (v.type != 's' || v.len < 2)
        return false;
    const char *p = v.p + 1, *end = v.p + v.len - 1;
    size_t k = 0; /* bytes written; k < size throughout */
    while (p < end) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t run = (size_t)((bs ? bs : end) - p);
        if (run >= size - k)
            goto fail;
        memcpy(out + k, p, run);
        k += run;
        p += run;
        if (!bs)
            break;
        char u[4];
        size_t m;
        p = unescape(p, end, u, &m);
        if (!p || (m == 1 && u[0] == '\0') || m >= size - k)
            goto fail;
        memcpy(out + k, u, m);
        k += m;
    }
    out[k] = '\0';
    return true;
fail:
    out[0] = '\0';
    return false;
}

/* ---- arrays --------------------------------------------------------------------------------- */

long jscan_count(struct jscan_value v)
{
    if (v.type != 'a' || v.len < 2)
        return -1;
    const char *end = v.p + v.len - 1; /* the closing bracket */
    const char *p = skip_ws(v.p + 1, end);
    if (p == end)
        return 0;
    long n = 1; /* one more element than top-level commas */
    while (p < end) {
#ifdef JSCAN_SWAR
        for (uint64_t x; end - p >= 8 && !structural_bytes(x = load8(p)); p += 8)
            n += flagged_bytes(bytes_eq(x, ','));
#endif
        /* The flagged block byte by byte, then blocks again. */
        const char *stop = end - p > 8 ? p + 8 : end;
        for (; p < stop && !is_structural(*p); p++)
            n += *p == ',';
        if (p == stop)
            continue;
        /* A string or a nested container; a stray closing bracket cannot occur in valid text. */
        p = *p == '"'                ? skip_string(p, end)
            : *p == '[' || *p == '{' ? skip_container(p, end)
                                     : p + 1;
    }
    return n;
}

bool jscan_next(struct jscan_value arr, struct jscan_iter *it, struct jscan_value *elem)
{
    if (arr.type != 'a' || arr.len < 2) {
        set_absent(elem);
        return false;
    }
    const char *end = arr.p + arr.len - 1; /* the closing bracket */
    const char *p = arr.p + (it->off == 0 ? 1 : it->off < arr.len ? it->off : arr.len - 1);
    p = skip_ws(p, end);
    if (it->off != 0 && p < end && *p == ',')
        p = skip_ws(p + 1, end);
    if (p >= end) {
        it->off = (size_t)(end - arr.p);
        set_absent(elem);
        return false;
    }
    *elem = value_at(p, end);
    if (elem->len == 0) { /* not a value: only in unchecked text; stop rather than spin */
        it->off = (size_t)(end - arr.p);
        set_absent(elem);
        return false;
    }
    it->off = (size_t)(elem->p + elem->len - arr.p);
    return true;
}

/* ---- validation ----------------------------------------------------------------------------- */

/* Offsets into the buffer being checked; an error sets at and msg and returns FAILED. */
#define FAILED SIZE_MAX

struct check {
    const char *s;
    size_t len;
    size_t at;
    const char *msg;
};

static size_t fail(struct check *c, size_t at, const char *msg)
{
    c->at = at;
    c->msg = msg;
    return FAILED;
}

static size_t ws_from(const struct check *c, size_t i)
{
    while (i < c->len && is_ws(c->s[i]))
        i++;
    return i;
}

static const char end_of_input[] = "unexpected end of input";

/* i at a backslash: 0 when "\\uXXXX" follows (X hex), else FAILED after recording why. */
static size_t check_hex4(struct check *c, size_t i)
{
    for (size_t k = 1; k < 6; k++) {
        if (i + k == c->len)
            return fail(c, c->len, end_of_input);
        char ch = c->s[i + k];
        bool ok = k == 1 ? ch == 'u'
                         : is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
        if (!ok)
            return fail(c, i, "\\u not followed by 4 hex digits");
    }
    return 0;
}

/* i at an opening quote: returns the offset after the closing one. */
static size_t check_string(struct check *c, size_t i)
{
    const char *s = c->s;
    for (i++;;) {
#ifdef JSCAN_SWAR
        while (c->len - i >= 8) {
            uint64_t x = load8(s + i);
            uint64_t m = bytes_eq(x, '"') | bytes_eq(x, '\\') | zero_bytes(x & (ONES * 0xE0));
            if (m) {
                i += first_byte(m);
                break;
            }
            i += 8;
        }
#endif
        while (i < c->len && s[i] != '"' && s[i] != '\\' && (unsigned char)s[i] >= 0x20)
            i++;
        if (i == c->len)
            return fail(c, i, end_of_input);
        if (s[i] == '"')
            return i + 1;
        if (s[i] != '\\')
            return fail(c, i, "control character in a string (escape it)");
        if (c->len - i < 2)
            return fail(c, c->len, end_of_input);
        if (s[i + 1] != '\0' && strchr("\"\\/bfnrt", s[i + 1])) {
            i += 2;
            continue;
        }
        if (s[i + 1] != 'u')
            return fail(c, i, "invalid escape in a string");
        size_t at = check_hex4(c, i);
        if (at != 0)
            return at;
        long cp = hex4(s + i + 2, s + c->len);
        if (is_low_surrogate(cp))
            return fail(c, i, "\\u escape of a low surrogate without a high one");
        if (is_high_surrogate(cp)) {
            size_t j = i + 6; /* where the low surrogate's escape must be */
            if (j == c->len)
                return fail(c, j, end_of_input);
            if (s[j] != '\\' || (j + 1 < c->len && s[j + 1] != 'u'))
                return fail(c, i, "\\u escape of a high surrogate without a low one");
            at = check_hex4(c, j);
            if (at != 0)
                return at;
            if (!is_low_surrogate(hex4(s + j + 2, s + c->len)))
                return fail(c, i, "\\u escape of a high surrogate without a low one");
            i = j;
        }
        i += 6;
    }
}

/* i at '-' or a digit: returns the offset after the number. */
static inline size_t check_number(struct check *c, size_t i)
{
    const char *s = c->s;
    size_t len = c->len;
    if (s[i] == '-')
        i++;
    if (i == len)
        return fail(c, i, end_of_input);
    if (s[i] == '0') {
        i++;
        if (i < len && is_digit(s[i]))
            return fail(c, i, "leading zero in a number");
    } else if (is_digit(s[i])) {
        i = digits_from(s, len, i);
    } else {
        return fail(c, i, "expected a digit in a number");
    }
    if (i < len && s[i] == '.') {
        i++;
        if (i == len)
            return fail(c, i, end_of_input);
        if (!is_digit(s[i]))
            return fail(c, i, "expected a digit after '.' in a number");
        i = digits_from(s, len, i);
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i == len)
            return fail(c, i, end_of_input);
        if (!is_digit(s[i]))
            return fail(c, i, "expected a digit in a number's exponent");
        i = digits_from(s, len, i);
    }
    return i;
}

/*
 * The bulk of a request body, an array of numbers — "1,22,333", or "1, 22, 333" as Python's
 * json.dumps writes it (what verl, slime, AReaL and SkyRL send) — one number after another
 * without a trip around the state machine. i just after a number in an array (or FAILED);
 * returns the offset after the last number taken, at anything else (other whitespace, a
 * closing bracket, another kind of value) for the state machine to read.
 */
static size_t check_numbers(struct check *c, size_t i)
{
    const char *s = c->s;
    size_t len = c->len;
    while (i != FAILED && i < len && s[i] == ',') {
        size_t j = i + 1 + (i + 1 < len && s[i + 1] == ' ');
        if (j >= len)
            return i;
        if (s[j] >= '1' && s[j] <= '9') { /* a token id: digits, then neither '.' nor 'e' */
            size_t k = digits_from(s, len, j + 1);
            if (k == len || (s[k] != '.' && (s[k] | 0x20) != 'e')) {
                i = k;
                continue;
            }
        } else if (s[j] != '-' && s[j] != '0') {
            return i;
        }
        i = check_number(c, j);
    }
    return i;
}

/* i at 't', 'f' or 'n': returns the offset after true, false or null. */
static size_t check_literal(struct check *c, size_t i)
{
    const char *word = c->s[i] == 't' ? "true" : c->s[i] == 'f' ? "false" : "null";
    size_t n = strlen(word);
    for (size_t k = 0; k < n; k++) {
        if (i + k == c->len)
            return fail(c, i + k, end_of_input);
        if (c->s[i + k] != word[k])
            return fail(c, i, "invalid literal (expected true, false or null)");
    }
    return i + n;
}

/* i anywhere before a member: skips whitespace, the name and ':'; returns the offset after ':'.
 */
static size_t check_name(struct check *c, size_t i)
{
    i = ws_from(c, i);
    if (i == c->len)
        return fail(c, i, end_of_input);
    if (c->s[i] != '"')
        return fail(c, i, "expected a string (a member name)");
    i = check_string(c, i);
    if (i == FAILED)
        return i;
    i = ws_from(c, i);
    if (i == c->len)
        return fail(c, i, end_of_input);
    if (c->s[i] != ':')
        return fail(c, i, "expected ':' after a member name");
    return i + 1;
}

/* Whether the innermost of the depth open containers is an object (bit d of objects: the
 * container at depth d + 1). */
static bool top_is_object(uint64_t objects, unsigned depth)
{
    return depth > 0 && ((objects >> (depth - 1)) & 1);
}

static int check_result(const struct check *c, size_t *err_off, const char **msg)
{
    if (err_off)
        *err_off = c->at;
    if (msg)
        *msg = c->msg;
    return -1;
}

int jscan_check(const char *buf, size_t len, size_t *err_off, const char **msg)
{
    struct check c = {buf, len, 0, NULL};
    uint64_t objects = 0; /* bit d set: the container at depth d + 1 is an object */
    unsigned depth = 0;   /* containers open */
    size_t i = ws_from(&c, 0);
    if (i == len) {
        fail(&c, i, len == 0 ? "empty input (expected an object)" : end_of_input);
        return check_result(&c, err_off, msg);
    }
    if (buf[i] != '{') {
        fail(&c, i, "expected '{' (the document must be an object)");
        return check_result(&c, err_off, msg);
    }
    bool want_value = true; /* at a value (after ws), else just after one */
    for (;;) {
        if (want_value) {
            i = ws_from(&c, i);
            if (i == len) {
                fail(&c, i, end_of_input);
                break;
            }
            char ch = buf[i];
            if (ch == '{' || ch == '[') {
                if (depth == JSCAN_MAX_DEPTH) {
                    fail(&c, i, "nested deeper than JSCAN_MAX_DEPTH (64)");
                    break;
                }
                uint64_t bit = (uint64_t)1 << depth;
                objects = ch == '{' ? objects | bit : objects & ~bit;
                depth++;
                i = ws_from(&c, i + 1);
                if (i < len && buf[i] == (ch == '{' ? '}' : ']')) {
                    i++;
                    depth--;
                    want_value = false;
                } else if (ch == '{') {
                    i = check_name(&c, i);
                }
            } else if (ch == '"') {
                i = check_string(&c, i);
                want_value = false;
            } else if (ch == '-' || is_digit(ch)) {
                i = check_number(&c, i);
                if (!top_is_object(objects, depth))
                    i = check_numbers(&c, i);
                want_value = false;
            } else if (ch == 't' || ch == 'f' || ch == 'n') {
                i = check_literal(&c, i);
                want_value = false;
            } else {
                fail(&c, i, "expected a value");
                break;
            }
        } else {
            i = ws_from(&c, i);
            if (depth == 0) {
                if (i == len)
                    return 0;
                fail(&c, i, "characters after the object");
                break;
            }
            if (i == len) {
                fail(&c, i, end_of_input);
                break;
            }
            bool in_object = top_is_object(objects, depth);
            if (buf[i] == ',') {
                i = in_object ? check_name(&c, i + 1) : i + 1;
                want_value = true;
            } else if (buf[i] == (in_object ? '}' : ']')) {
                i++;
                depth--;
            } else {
                fail(&c, i, in_object ? "expected ',' or '}'" : "expected ',' or ']'");
                break;
            }
        }
        if (i == FAILED)
            break;
    }
    return check_result(&c, err_off, msg);
}
