/* Radix sort of key-index pairs; see sort.h. */
#include "util/sort.h"

#include <string.h>

void sort_pairs(struct sort_pair *v, size_t n, struct sort_pair *tmp)
{
    size_t count[8][256] = {{0}};
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < 8; d++)
            count[d][v[i].key >> (8 * d) & 0xff]++;
    struct sort_pair *from = v, *to = tmp;
    for (int d = 0; d < 8; d++) {
        if (n == 0 || count[d][from[0].key >> (8 * d) & 0xff] == n)
            continue; /* every key has this byte */
        size_t at = 0;
        for (int b = 0; b < 256; b++) { /* counts to starting positions */
            size_t c = count[d][b];
            count[d][b] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++)
            to[count[d][from[i].key >> (8 * d) & 0xff]++] = from[i];
        struct sort_pair *t = from;
        from = to;
        to = t;
    }
    if (from != v)
        memcpy(v, from, n * sizeof *v);
}

uint64_t sort_key_double(double x)
{
    uint64_t k;
    x += 0.0; /* -0.0 becomes +0.0 */
    memcpy(&k, &x, sizeof k);
    return k >> 63 ? ~k : k | (uint64_t)1 << 63;
}
