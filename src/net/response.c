/*
 * The response parser (net/response.h) over net/head.h: a head at a time, then the body by its
 * framing. A step that consumes bytes without anything to report (a skipped 1xx head, chunk
 * framing) returns AGAIN and the loop in net_response_parse goes on with the rest.
 */
#include "net/response.h"

#include <string.h>

#define AGAIN (-1)

static int fail(struct net_response *r, const char *why)
{
    r->state = NET_RS_ERROR;
    r->error = why;
    return NET_RESPONSE_ERROR;
}

static void clear_head(struct net_response *r)
{
    r->status = 0;
    r->minor = 0;
    r->length = -1;
    r->chunked = false;
    r->keep_alive = false;
    r->has_type = false;
    r->content_type[0] = '\0';
}

void net_response_init(struct net_response *r, bool no_body)
{
    r->no_body = no_body;
    r->error = NULL;
    r->state = NET_RS_HEAD;
    r->remaining = 0;
    clear_head(r);
}

/* Takes the parsed head h: status, framing, Content-Type; NULL when fine, else why not. */
static const char *take_head(struct net_response *r, const struct net_head *h)
{
    r->status = h->status;
    r->minor = h->minor;
    r->chunked = h->chunked;
    r->length = h->content_length;
    size_t n;
    const char *type = net_head_field(h, "Content-Type", &n);
    if (type) {
        if (n > NET_RESPONSE_TYPE_MAX)
            return "a Content-Type too long";
        memcpy(r->content_type, type, n);
        r->content_type[n] = '\0';
        r->has_type = true;
    }
    r->state = r->chunked ? NET_RS_CHUNKED : r->length >= 0 ? NET_RS_LENGTH : NET_RS_CLOSE;
    r->remaining = r->length >= 0 ? (unsigned long long)r->length : 0;
    r->chunks = (struct net_chunked){0};
    if (r->no_body || r->status == 204 || r->status == 304)
        r->state = NET_RS_DONE;
    r->keep_alive = r->state != NET_RS_CLOSE && !h->close;
    return NULL;
}

static int step_head(struct net_response *r, const char *buf, size_t len, size_t *used)
{
    struct net_head h;
    enum net_head_status st = net_head_parse(buf, len, true, &h);
    if (st == NET_HEAD_MORE)
        return len > NET_RESPONSE_HEAD_MAX ? fail(r, "a head longer than 64 KiB")
                                           : NET_RESPONSE_MORE;
    if (st == NET_HEAD_MANY)
        return fail(r, "a head of " NET_HEAD_MANY_TEXT);
    if (st == NET_HEAD_BAD)
        return fail(r, h.why);
    if (h.length > NET_RESPONSE_HEAD_MAX)
        return fail(r, "a head longer than 64 KiB");
    clear_head(r);
    const char *why = take_head(r, &h);
    if (why)
        return fail(r, why);
    *used = h.length;
    if (r->status == 101)
        return fail(r, "a protocol switch (101) that was not asked for");
    if (r->status < 200) { /* an interim answer: the final one follows */
        r->state = NET_RS_HEAD;
        clear_head(r);
        return AGAIN;
    }
    return NET_RESPONSE_HEAD;
}

static int step_chunks(struct net_response *r, const char *buf, size_t len, size_t *used,
                       const char **piece, size_t *piece_len)
{
    switch (net_chunked_next(&r->chunks, buf, len, used, piece, piece_len)) {
    case NET_CHUNK_DATA:
        return NET_RESPONSE_BODY;
    case NET_CHUNK_END:
        r->state = NET_RS_DONE;
        return AGAIN;
    case NET_CHUNK_BAD:
        return fail(r, "malformed chunked framing");
    default:
        return NET_RESPONSE_MORE;
    }
}

/* Body bytes: up to the remaining count, or all of them when the body runs to the close. */
static int step_body(struct net_response *r, const char *buf, size_t len, size_t *used,
                     const char **piece, size_t *piece_len)
{
    if (r->state == NET_RS_LENGTH && r->remaining == 0) {
        r->state = NET_RS_DONE;
        return NET_RESPONSE_END;
    }
    if (len == 0)
        return NET_RESPONSE_MORE;
    size_t n = len;
    if (r->state == NET_RS_LENGTH) {
        if (n > r->remaining)
            n = (size_t)r->remaining;
        r->remaining -= n;
    }
    *piece = buf;
    *piece_len = n;
    *used = n;
    return NET_RESPONSE_BODY;
}

static int step(struct net_response *r, const char *buf, size_t len, size_t *used,
                const char **piece, size_t *piece_len)
{
    switch (r->state) {
    case NET_RS_HEAD:
        return step_head(r, buf, len, used);
    case NET_RS_LENGTH:
    case NET_RS_CLOSE:
        return step_body(r, buf, len, used, piece, piece_len);
    case NET_RS_CHUNKED:
        return step_chunks(r, buf, len, used, piece, piece_len);
    case NET_RS_DONE:
        return NET_RESPONSE_END;
    case NET_RS_ERROR:
        break;
    }
    return NET_RESPONSE_ERROR;
}

enum net_response_step net_response_parse(struct net_response *r, const char *buf, size_t len,
                                          size_t *used, const char **piece, size_t *piece_len)
{
    size_t at = 0;
    for (;;) {
        size_t u = 0;
        int s = step(r, buf + at, len - at, &u, piece, piece_len);
        at += u;
        if (s != AGAIN) {
            *used = at;
            return (enum net_response_step)s;
        }
    }
}

enum net_response_step net_response_eof(struct net_response *r)
{
    if (r->state == NET_RS_CLOSE || r->state == NET_RS_DONE) {
        r->state = NET_RS_DONE;
        return NET_RESPONSE_END;
    }
    if (r->state != NET_RS_ERROR)
        fail(r, "the connection closed before the response was complete");
    return NET_RESPONSE_ERROR;
}

bool net_response_ending(const struct net_response *r)
{
    return r->state == NET_RS_DONE || (r->state == NET_RS_LENGTH && r->remaining == 0);
}
