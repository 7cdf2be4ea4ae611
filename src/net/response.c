/*
 * The response parser (net/response.h): one small function per state. A step that consumes
 * bytes without anything to report (a skipped 1xx head, a chunk-size line, a chunk's CRLF, a
 * trailer line) returns AGAIN and the loop in net_response_parse goes on with the rest.
 */
#include "net/response.h"

#include <string.h>
#include <strings.h>

#define AGAIN (-1)
/* A chunk-size line (hex digits and extensions) longer than this is an error. */
#define CHUNK_LINE_MAX 1024
/* Lengths at or above this are an error (no body is an exabyte long). */
#define LENGTH_LIMIT (1ull << 60)

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
    r->scanned = 0;
    r->connection_close = r->connection_keep = false;
}

void net_response_init(struct net_response *r, bool no_body)
{
    r->no_body = no_body;
    r->error = NULL;
    r->state = NET_RS_HEAD;
    r->remaining = 0;
    clear_head(r);
}

/* Where the head in buf[0, len) ends (just past its blank line), or 0 when it is not complete;
 * lines end in LF or CRLF. Resumes from r->scanned. */
static size_t head_end(struct net_response *r, const char *buf, size_t len)
{
    size_t i = r->scanned;
    const char *nl;
    while (i < len && (nl = memchr(buf + i, '\n', len - i))) {
        size_t at = (size_t)(nl - buf);
        if (at >= 1 && buf[at - 1] == '\n')
            return at + 1;
        if (at >= 2 && buf[at - 1] == '\r' && buf[at - 2] == '\n')
            return at + 1;
        i = at + 1;
    }
    r->scanned = len;
    return 0;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Trims spaces, tabs and a CR from both ends of [*p, *end). */
static void trim(const char **p, const char **end)
{
    while (*p < *end && is_space(**p))
        (*p)++;
    while (*end > *p && (is_space((*end)[-1]) || (*end)[-1] == '\r'))
        (*end)--;
}

/* "HTTP/1.1 200 OK": version and status. */
static bool parse_status_line(struct net_response *r, const char *p, const char *end)
{
    if (end - p < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' || p[7] > '9' || p[8] != ' ')
        return false;
    r->minor = p[7] - '0';
    int status = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        status = 10 * status + (p[i] - '0');
    }
    if (status < 100 || (end - p > 12 && p[12] != ' ' && p[12] != '\r'))
        return false;
    r->status = status;
    return true;
}

/* Whether the comma-separated list [p, end) holds token (any case). */
static bool has_token(const char *p, const char *end, const char *token)
{
    size_t n = strlen(token);
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end, *item = p;
        trim(&item, &item_end);
        if ((size_t)(item_end - item) == n && strncasecmp(item, token, n) == 0)
            return true;
        p = comma ? comma + 1 : end;
    }
    return false;
}

/* Whether the comma-separated list [p, end) ends in token (any case). */
static bool last_token_is(const char *p, const char *end, const char *token)
{
    const char *item = end;
    while (item > p && item[-1] != ',')
        item--;
    trim(&item, &end);
    size_t n = strlen(token);
    return (size_t)(end - item) == n && strncasecmp(item, token, n) == 0;
}

static bool parse_length(struct net_response *r, const char *p, const char *end)
{
    unsigned long long n = 0;
    if (p == end)
        return false;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9' || n >= LENGTH_LIMIT / 10)
            return false;
        n = 10 * n + (unsigned)(*p - '0');
    }
    if (r->length >= 0 && (unsigned long long)r->length != n) /* two that disagree */
        return false;
    r->length = (long long)n;
    return true;
}

/* Whether the header's name is name (any case). */
static bool named(const char *line, size_t name_len, const char *name)
{
    return strlen(name) == name_len && strncasecmp(line, name, name_len) == 0;
}

/* One header line [p, end) without its line end; NULL when fine, else why not. */
static const char *parse_header(struct net_response *r, const char *p, const char *end, bool *te)
{
    if (is_space(*p))
        return "a folded header line";
    const char *colon = memchr(p, ':', (size_t)(end - p));
    if (!colon || colon == p)
        return "a header line without a name and a colon";
    size_t name_len = (size_t)(colon - p);
    const char *v = colon + 1, *v_end = end;
    trim(&v, &v_end);
    if (named(p, name_len, "Content-Length")) {
        if (!parse_length(r, v, v_end))
            return "a bad Content-Length";
    } else if (named(p, name_len, "Transfer-Encoding")) {
        *te = true;
        r->chunked = last_token_is(v, v_end, "chunked");
    } else if (named(p, name_len, "Connection")) {
        r->connection_close |= has_token(v, v_end, "close");
        r->connection_keep |= has_token(v, v_end, "keep-alive");
    } else if (named(p, name_len, "Content-Type")) {
        size_t n = (size_t)(v_end - v);
        if (n > NET_RESPONSE_TYPE_MAX)
            return "a Content-Type too long";
        memcpy(r->content_type, v, n);
        r->content_type[n] = '\0';
        r->has_type = true;
    }
    return NULL;
}

/* The head [buf, buf + len): its lines, then how the body is framed. */
static const char *parse_head(struct net_response *r, const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len;
    const char *nl = memchr(p, '\n', len);
    if (!parse_status_line(r, p, nl))
        return "not an HTTP/1.x status line";
    bool te = false;
    for (p = nl + 1; p < end; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (line_end == p) /* the blank line */
            break;
        const char *why = parse_header(r, p, line_end, &te);
        if (why)
            return why;
    }
    if (te) /* it overrides Content-Length; a coding other than chunked runs to the close */
        r->length = -1;
    r->state = r->chunked ? NET_RS_CHUNK_SIZE : r->length >= 0 ? NET_RS_LENGTH : NET_RS_CLOSE;
    r->remaining = r->length >= 0 ? (unsigned long long)r->length : 0;
    if (r->no_body || r->status == 204 || r->status == 304)
        r->state = NET_RS_DONE;
    r->keep_alive =
        r->state != NET_RS_CLOSE && !r->connection_close && (r->minor >= 1 || r->connection_keep);
    return NULL;
}

static int step_head(struct net_response *r, const char *buf, size_t len, size_t *used)
{
    size_t end = head_end(r, buf, len);
    if (end == 0)
        return len > NET_RESPONSE_HEAD_MAX ? fail(r, "a head longer than 64 KiB")
                                           : NET_RESPONSE_MORE;
    if (end > NET_RESPONSE_HEAD_MAX)
        return fail(r, "a head longer than 64 KiB");
    clear_head(r);
    const char *why = parse_head(r, buf, end);
    if (why)
        return fail(r, why);
    *used = end;
    if (r->status == 101)
        return fail(r, "a protocol switch (101) that was not asked for");
    if (r->status < 200) { /* an interim answer: the final one follows */
        r->state = NET_RS_HEAD;
        clear_head(r);
        return AGAIN;
    }
    return NET_RESPONSE_HEAD;
}

/* "1a;ext=x\r\n": a chunk's size. */
static int step_chunk_size(struct net_response *r, const char *buf, size_t len, size_t *used)
{
    const char *nl = memchr(buf, '\n', len < CHUNK_LINE_MAX ? len : CHUNK_LINE_MAX);
    if (!nl)
        return len >= CHUNK_LINE_MAX ? fail(r, "a chunk-size line too long") : NET_RESPONSE_MORE;
    unsigned long long size = 0;
    const char *p = buf;
    for (; p < nl; p++) {
        int digit = *p >= '0' && *p <= '9'   ? *p - '0'
                    : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                    : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                             : -1;
        if (digit < 0)
            break;
        if (size >= LENGTH_LIMIT / 16)
            return fail(r, "a chunk size too large");
        size = 16 * size + (unsigned)digit;
    }
    if (p == buf)
        return fail(r, "a chunk-size line without a size");
    while (p < nl && is_space(*p))
        p++;
    if (p < nl && *p != ';' && !(*p == '\r' && p + 1 == nl))
        return fail(r, "a bad chunk-size line");
    *used = (size_t)(nl - buf) + 1;
    r->remaining = size;
    r->state = size > 0 ? NET_RS_CHUNK_DATA : NET_RS_TRAILER;
    return AGAIN;
}

/* The line end after a chunk's data. */
static int step_chunk_end(struct net_response *r, const char *buf, size_t len, size_t *used)
{
    if (len == 0 || (buf[0] == '\r' && len < 2))
        return NET_RESPONSE_MORE;
    if (buf[0] == '\n')
        *used = 1;
    else if (buf[0] == '\r' && buf[1] == '\n')
        *used = 2;
    else
        return fail(r, "chunk data longer than its size");
    r->state = NET_RS_CHUNK_SIZE;
    return AGAIN;
}

/* Trailer lines, dropped, up to the blank line. */
static int step_trailer(struct net_response *r, const char *buf, size_t len, size_t *used)
{
    const char *nl = memchr(buf, '\n', len);
    if (!nl)
        return len > NET_RESPONSE_HEAD_MAX ? fail(r, "a trailer line too long") : NET_RESPONSE_MORE;
    *used = (size_t)(nl - buf) + 1;
    if (nl == buf || (nl == buf + 1 && buf[0] == '\r'))
        r->state = NET_RS_DONE;
    return AGAIN;
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
    if (r->state != NET_RS_CLOSE) {
        if (n > r->remaining)
            n = (size_t)r->remaining;
        r->remaining -= n;
        if (r->state == NET_RS_CHUNK_DATA && r->remaining == 0)
            r->state = NET_RS_CHUNK_END;
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
    case NET_RS_CHUNK_DATA:
        return step_body(r, buf, len, used, piece, piece_len);
    case NET_RS_CHUNK_SIZE:
        return step_chunk_size(r, buf, len, used);
    case NET_RS_CHUNK_END:
        return step_chunk_end(r, buf, len, used);
    case NET_RS_TRAILER:
        return step_trailer(r, buf, len, used);
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
