/*
 * Fuzz harness for HTTP/1.x framing (src/net/head.c). Besides not crashing: a parsed head lies
 * within the input and its fields within the head; and the chunked decoder gives the same
 * outcome and the same data whether the input arrives at once or in two pieces, never writing
 * ahead of what it read.
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
    if (net_head_parse(buf, size, response, &h) != NET_HEAD_OK)
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

/* Decodes size bytes of data, fed as [0, split) then the rest; the outcome and *out. */
static enum net_head_status decode(const uint8_t *data, size_t size, size_t split, char *buf,
                                   size_t *out)
{
    memcpy(buf, data, size);
    struct net_chunked c = {0};
    size_t in = 0;
    *out = 0;
    enum net_head_status st = net_chunked_run(&c, buf, split, &in, out, 1 << 16);
    if (*out > in)
        abort();
    if (st == NET_HEAD_MORE) {
        st = net_chunked_run(&c, buf, size, &in, out, 1 << 16);
        if (*out > in || in > size)
            abort();
    }
    return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_head((const char *)data, size, false);
    check_head((const char *)data, size, true);
    char *whole = xmalloc(size + 1), *pieces = xmalloc(size + 1);
    size_t out_whole, out_pieces;
    enum net_head_status a = decode(data, size, size, whole, &out_whole);
    enum net_head_status b =
        decode(data, size, size ? data[0] % (size + 1) : 0, pieces, &out_pieces);
    if (a != b ||
        (a != NET_HEAD_BAD && (out_whole != out_pieces || memcmp(whole, pieces, out_whole) != 0)))
        abort();
    free(whole);
    free(pieces);
    return 0;
}
