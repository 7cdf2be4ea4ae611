/*
 * Fuzz harness for HTTP/1.x framing (src/net/head.c). Besides not crashing: a parsed head lies
 * within the input and its fields within the head; and the chunked decoder gives the same
 * outcome and the same data whether the input arrives at once or in two pieces, each data run
 * lying inside the bytes it consumed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/head.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool within(struct net_span s, const char *buf, size_t len)
{
    return s.p >= buf && s.p + s.n <= buf + len;
}

static void check_head(const char *buf, size_t size, bool response)
{
    struct net_head h;
    enum net_head_status st = net_head_parse(buf, size, response, &h);
    if (st == NET_HEAD_BAD && (!h.why || !*h.why)) /* every refusal says why */
        abort();
    if (st != NET_HEAD_OK)
        return;
    if (h.length > size || h.n_fields > NET_HEAD_FIELDS || h.content_length < -1 ||
        (h.chunked && h.content_length >= 0) || (response && (h.status < 100 || h.status > 999)))
        abort();
    for (int i = 0; i < 3; i++)
        if (!within(h.start[i], buf, h.length))
            abort();
    for (size_t i = 0; i < h.n_fields; i++)
        if (!within(h.field[i].name, buf, h.length) || !within(h.field[i].value, buf, h.length))
            abort();
}

/* Decodes data[0, size) handed over as [0, split) then the rest (what a step leaves is
 * handed over again); the outcome, and the data in out[0, *n). */
static enum net_chunk_step decode(const char *data, size_t size, size_t split, char *out, size_t *n)
{
    struct net_chunked c = {0};
    size_t pos = 0, have = split;
    *n = 0;
    for (;;) {
        size_t used, len = 0;
        const char *piece = NULL;
        enum net_chunk_step st = net_chunked_next(&c, data + pos, have - pos, &used, &piece, &len);
        if (used > have - pos)
            abort();
        if (st == NET_CHUNK_DATA) {
            if (len == 0 || piece < data + pos || piece + len != data + pos + used)
                abort();
            memcpy(out + *n, piece, len);
            *n += len;
        }
        pos += used;
        if (st == NET_CHUNK_MORE && have < size)
            have = size;
        else if (st != NET_CHUNK_DATA)
            return st;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    check_head(text, size, false);
    check_head(text, size, true);
    char *whole = xmalloc(size + 1), *pieces = xmalloc(size + 1);
    size_t n_whole, n_pieces;
    enum net_chunk_step a = decode(text, size, size, whole, &n_whole);
    enum net_chunk_step b = decode(text, size, size ? data[0] % (size + 1) : 0, pieces, &n_pieces);
    if (a != b || n_whole != n_pieces || memcmp(whole, pieces, n_whole) != 0)
        abort();
    free(whole);
    free(pieces);
    return 0;
}
