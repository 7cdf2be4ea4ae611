/*
 * Fuzz harness for the query-string parser and the SSE framer (src/net/query.c). Besides not
 * crashing: a parsed query has no NUL inside its keys and values (they are C strings), and a
 * framed event ends with a blank line and gives the data back when its "data: " prefixes are
 * removed and its lines joined.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/query.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_frame(const char *data, size_t size)
{
    size_t len;
    char *framed = net_sse_frame(data, size, &len);
    if (len < 8 || strncmp(framed, "data: ", 6) != 0 || framed[len - 1] != '\n' ||
        framed[len - 2] != '\n')
        abort();
    char *back = xmalloc(len + 1);
    size_t n = 0, lines = 0;
    for (size_t i = 0; i + 1 < len; lines++) { /* each line: "data: " payload '\n' */
        if (strncmp(framed + i, "data: ", 6) != 0)
            abort();
        i += 6;
        const char *nl = memchr(framed + i, '\n', len - i);
        size_t line = (size_t)(nl - (framed + i));
        if (lines > 0) /* the newline the framer split at */
            back[n++] = '\n';
        memcpy(back + n, framed + i, line);
        n += line;
        i += line + 1;
        if (i + 1 == len)
            break;
    }
    if (n != size || memcmp(back, data, size) != 0)
        abort();
    free(back);
    free(framed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct net_kv *kv;
    size_t n;
    if (net_query_parse((const char *)data, size, &kv, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            if (strlen(kv[i].key) > size || strlen(kv[i].value) > size)
                abort();
        net_kv_free(kv, n);
    } else if (kv != NULL || n != 0) {
        abort();
    }
    check_frame((const char *)data, size);
    return 0;
}
