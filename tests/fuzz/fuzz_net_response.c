/*
 * Fuzz harness for the HTTP/1.1 response parser (src/net/response.c). The first input byte says
 * whether the request was HEAD (bit 0), the second how the rest arrives; the rest is what the
 * server sent. It is parsed twice, as net/client.c does: once with every byte at hand, once
 * with the bytes arriving in pieces of 1 to 64 bytes while unconsumed ones are handed over
 * again. Besides not crashing: each step consumes no more than it was given, body pieces lie
 * inside it and are not empty, and both ways end alike (status, length, body, outcome).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/response.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
    enum net_response_step last; /* END, ERROR, or MORE when the input ran out */
    int status;
    long long length;
    char *body;
    size_t body_len;
};

/* Parses data[0, size) arriving in pieces (split 0: all at once). */
static void parse(const char *data, size_t size, bool no_body, unsigned split, struct outcome *o)
{
    struct net_response r;
    net_response_init(&r, no_body);
    memset(o, 0, sizeof *o);
    o->body = xmalloc(size + 1);
    size_t pos = 0, have = split ? 0 : size;
    uint32_t x = split;
    for (;;) {
        size_t used;
        const char *piece = NULL;
        size_t len = 0;
        enum net_response_step s =
            net_response_parse(&r, data + pos, have - pos, &used, &piece, &len);
        if (used > have - pos)
            abort();
        pos += used;
        if (s == NET_RESPONSE_MORE && have < size) {
            x = x * 1103515245u + 12345u;
            size_t more = 1 + (x >> 16) % 64;
            have = more < size - have ? have + more : size;
            continue;
        }
        if (s == NET_RESPONSE_MORE)
            s = net_response_eof(&r);
        if (s == NET_RESPONSE_HEAD) {
            if (r.status < 200 || r.status > 999)
                abort();
            o->status = r.status;
            o->length = r.length;
        } else if (s == NET_RESPONSE_BODY) {
            if (len == 0 || piece < data || piece + len > data + have)
                abort();
            memcpy(o->body + o->body_len, piece, len);
            o->body_len += len;
        } else {
            if (s == NET_RESPONSE_ERROR && !r.error)
                abort();
            o->last = s;
            return;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool no_body = data[0] & 1;
    unsigned split = data[1] | 0x100u; /* never 0: that is all at once */
    const char *text = (const char *)data + 2;
    struct outcome whole, pieces;
    parse(text, size - 2, no_body, 0, &whole);
    parse(text, size - 2, no_body, split, &pieces);
    if (whole.last != pieces.last || whole.status != pieces.status ||
        whole.length != pieces.length || whole.body_len != pieces.body_len ||
        memcmp(whole.body, pieces.body, whole.body_len) != 0)
        abort();
    free(whole.body);
    free(pieces.body);
    return 0;
}
