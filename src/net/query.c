/* Query strings and SSE framing (net/query.h). */
#include "net/query.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

int net_hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Decodes s[0..len) into a new string; NULL on a bad escape or a decoded NUL. */
static char *decode(const char *s, size_t len)
{
    char *out = xmalloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '+') {
            ch = ' ';
        } else if (ch == '%') {
            int hi = i + 2 < len ? net_hex_digit(s[i + 1]) : -1;
            int lo = hi >= 0 ? net_hex_digit(s[i + 2]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0)) {
                free(out);
                return NULL;
            }
            ch = (char)(hi * 16 + lo);
            i += 2;
        } else if (ch == '\0') {
            free(out);
            return NULL;
        }
        out[n++] = ch;
    }
    out[n] = '\0';
    return out;
}

int net_query_parse(const char *q, size_t len, struct net_kv **out, size_t *n)
{
    struct net_kv *kv = NULL;
    size_t count = 0, cap = 0;
    size_t i = 0;
    while (i < len) {
        const char *amp = memchr(q + i, '&', len - i);
        size_t end = amp ? (size_t)(amp - q) : len;
        if (end > i) {
            const char *eq = memchr(q + i, '=', end - i);
            size_t key_end = eq ? (size_t)(eq - q) : end;
            char *key = decode(q + i, key_end - i);
            char *value = eq ? decode(eq + 1, end - key_end - 1) : xstrdup("");
            if (!key || !value) {
                free(key);
                free(value);
                net_kv_free(kv, count);
                *out = NULL;
                *n = 0;
                return -1;
            }
            if (count == cap) {
                cap = cap ? 2 * cap : 4;
                kv = xreallocarray(kv, cap, sizeof *kv);
            }
            kv[count++] = (struct net_kv){key, value};
        }
        i = end + 1;
    }
    *out = kv;
    *n = count;
    return 0;
}

void net_kv_free(struct net_kv *kv, size_t n)
{
    for (size_t i = 0; kv && i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

char *net_sse_frame(const char *data, size_t len, size_t *out_len)
{
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += data[i] == '\n';
    char *out = xmalloc(len + lines * 7 + 2); /* "data: " and '\n' per line, "\n\0" */
    size_t n = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && data[i] != '\n')
            continue;
        memcpy(out + n, "data: ", 6);
        n += 6;
        memcpy(out + n, data + start, i - start);
        n += i - start;
        out[n++] = '\n';
        start = i + 1;
    }
    out[n++] = '\n';
    out[n] = '\0';
    *out_len = n;
    return out;
}
