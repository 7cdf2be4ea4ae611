/* HTTP/1.x heads and the chunked coding (net/head.h). */
#include "net/head.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "net/query.h"

/* A token character of RFC 9110 §5.6.2. */
static bool tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* A byte a field value or reason phrase may hold: visible, space, tab or obs-text. */
static bool vchar(unsigned char ch)
{
    return ch == '\t' || (ch >= 0x20 && ch != 0x7f);
}

/* The line at buf[*at..len) without its end (LF or CRLF); false when no LF has come yet.
 * *at moves past the LF. */
static bool next_line(const char *buf, size_t len, size_t *at, struct net_span *line)
{
    const char *nl = memchr(buf + *at, '\n', len - *at);
    if (!nl)
        return false;
    size_t end = (size_t)(nl - buf);
    line->p = buf + *at;
    line->n = end - *at - (end > *at && buf[end - 1] == '\r');
    *at = end + 1;
    return true;
}

/* Splits s at its first space: *a before, *b after (b may hold more spaces). */
static bool split_space(struct net_span s, struct net_span *a, struct net_span *b)
{
    const char *sp = memchr(s.p, ' ', s.n);
    if (!sp)
        return false;
    *a = (struct net_span){s.p, (size_t)(sp - s.p)};
    *b = (struct net_span){sp + 1, s.n - a->n - 1};
    return true;
}

static bool span_is(struct net_span s, const char *lit)
{
    return s.n == strlen(lit) && strncasecmp(s.p, lit, s.n) == 0;
}

/* "HTTP/1.x" into *minor. */
static bool version(struct net_span s, int *minor)
{
    if (s.n != 8 || memcmp(s.p, "HTTP/1.", 7) != 0 || (s.p[7] != '0' && s.p[7] != '1'))
        return false;
    *minor = s.p[7] - '0';
    return true;
}

/* Fails the head with why (a static text). */
static bool bad(struct net_head *h, const char *why)
{
    h->why = why;
    return false;
}

static bool request_line(struct net_span line, struct net_head *h)
{
    struct net_span rest;
    if (!split_space(line, &h->start[0], &rest) || !split_space(rest, &h->start[1], &h->start[2]))
        return bad(h, "malformed request line: expected METHOD TARGET VERSION");
    if (h->start[0].n == 0 || h->start[1].n == 0)
        return bad(h, "malformed request line: an empty method or target");
    for (size_t i = 0; i < h->start[0].n; i++)
        if (!tchar((unsigned char)h->start[0].p[i]))
            return bad(h, "malformed request line: the method is not a token");
    for (size_t i = 0; i < h->start[1].n; i++)
        if ((unsigned char)h->start[1].p[i] <= 0x20 || h->start[1].p[i] == 0x7f)
            return bad(h, "malformed request line: a control character in the target");
    return version(h->start[2], &h->minor) ||
           bad(h, "request line: HTTP version not supported (HTTP/1.0 and HTTP/1.1 are)");
}

static bool status_line(struct net_span line, struct net_head *h)
{
    struct net_span rest;
    if (!split_space(line, &h->start[0], &rest) || !version(h->start[0], &h->minor))
        return false;
    if (!split_space(rest, &h->start[1], &h->start[2])) { /* no reason phrase */
        h->start[1] = rest;
        h->start[2] = (struct net_span){rest.p + rest.n, 0};
    }
    if (h->start[1].n != 3)
        return false;
    for (size_t i = 0; i < 3; i++) {
        if (h->start[1].p[i] < '0' || h->start[1].p[i] > '9')
            return false;
        h->status = h->status * 10 + (h->start[1].p[i] - '0');
    }
    for (size_t i = 0; i < h->start[2].n; i++)
        if (!vchar((unsigned char)h->start[2].p[i]))
            return false;
    return h->status >= 100;
}

/* Reads a field line into f; NULL, or why it is not one (h->why's text). *bad_value: its name
 * is whole and its value holds a control byte. */
static const char *field_line(struct net_span line, struct net_field *f, bool *bad_value)
{
    static const char no_name[] = "malformed header field: expected Name: value";
    const char *colon = memchr(line.p, ':', line.n);
    if (!colon || colon == line.p)
        return no_name;
    f->name = (struct net_span){line.p, (size_t)(colon - line.p)};
    for (size_t i = 0; i < f->name.n; i++)
        if (!tchar((unsigned char)f->name.p[i]))
            return no_name; /* whitespace before the colon, or a folded line */
    const char *v = colon + 1, *end = line.p + line.n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    f->value = (struct net_span){v, (size_t)(end - v)};
    for (size_t i = 0; i < f->value.n; i++)
        if (!vchar((unsigned char)v[i])) {
            *bad_value = true;
            return "malformed header field: its value holds a control byte";
        }
    return NULL;
}

/* A Content-Length value: digits only, at most 2^62. */
static bool content_length(struct net_span v, int64_t *out)
{
    if (v.n == 0 || v.n > 18)
        return false;
    int64_t n = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (v.p[i] < '0' || v.p[i] > '9')
            return false;
        n = n * 10 + (v.p[i] - '0');
    }
    *out = n;
    return true;
}

/* Whether the comma-separated list v holds token (case-insensitive). */
static bool list_has(struct net_span v, const char *token)
{
    size_t i = 0;
    while (i < v.n) {
        size_t j = i;
        while (j < v.n && v.p[j] != ',')
            j++;
        struct net_span item = {v.p + i, j - i};
        while (item.n && (*item.p == ' ' || *item.p == '\t'))
            item.p++, item.n--;
        while (item.n && (item.p[item.n - 1] == ' ' || item.p[item.n - 1] == '\t'))
            item.n--;
        if (span_is(item, token))
            return true;
        i = j + 1;
    }
    return false;
}

/* The body's framing and the connection's fate from the fields. */
static bool framing(struct net_head *h)
{
    bool keep_alive = false, close = false, te = false;
    h->content_length = -1;
    h->expect_continue = false;
    for (size_t i = 0; i < h->n_fields; i++) {
        struct net_field *f = &h->field[i];
        if (span_is(f->name, "content-length")) {
            int64_t n;
            if (!content_length(f->value, &n))
                return bad(h, "Content-Length: expected a decimal number of at most 18 digits");
            if (h->content_length >= 0 && h->content_length != n)
                return bad(h, "Content-Length given twice with different values");
            h->content_length = n;
        } else if (span_is(f->name, "transfer-encoding")) {
            if (te)
                return bad(h, "Transfer-Encoding given twice");
            if (!span_is(f->value, "chunked"))
                return bad(h, "Transfer-Encoding: only chunked is supported");
            te = true;
        } else if (span_is(f->name, "connection")) {
            close |= list_has(f->value, "close");
            keep_alive |= list_has(f->value, "keep-alive");
        } else if (span_is(f->name, "expect")) {
            h->expect_continue = span_is(f->value, "100-continue");
        }
    }
    if (te && h->content_length >= 0)
        return bad(h,
                   "Transfer-Encoding and Content-Length together: the body's length is unclear");
    if (te && h->minor == 0)
        return bad(h, "Transfer-Encoding in an HTTP/1.0 message");
    h->chunked = te;
    h->close = close || (h->minor == 0 && !keep_alive);
    return true;
}

enum net_head_status net_head_parse(const char *buf, size_t len, bool response, struct net_head *h)
{
    memset(h, 0, offsetof(struct net_head, field));
    h->n_fields = 0;
    h->why = NULL;
    h->bad_value = false;
    size_t at = 0;
    struct net_span line;
    do { /* a request may follow the empty line some clients send after a body */
        if (!next_line(buf, len, &at, &line))
            return NET_HEAD_MORE;
    } while (!response && line.n == 0 && at <= 4);
    if (response && !status_line(line, h)) {
        h->why = "malformed status line";
        return NET_HEAD_BAD;
    }
    if (!response && !request_line(line, h))
        return NET_HEAD_BAD;
    for (;;) {
        if (!next_line(buf, len, &at, &line))
            return NET_HEAD_MORE;
        if (line.n == 0)
            break;
        if (h->n_fields == NET_HEAD_FIELDS)
            return NET_HEAD_MANY;
        if ((h->why = field_line(line, &h->field[h->n_fields++], &h->bad_value)) != NULL)
            return NET_HEAD_BAD;
    }
    h->length = at;
    return framing(h) ? NET_HEAD_OK : NET_HEAD_BAD;
}

const char *net_head_field(const struct net_head *h, const char *name, size_t *n)
{
    for (size_t i = 0; i < h->n_fields; i++)
        if (span_is(h->field[i].name, name)) {
            *n = h->field[i].value.n;
            return h->field[i].value.p;
        }
    return NULL;
}

/* ---- chunked ---------------------------------------------------------------------------- */

enum {
    CH_SIZE,         /* hex digits of a chunk's size */
    CH_EXT,          /* a chunk extension, up to the line's end */
    CH_SIZE_LF,      /* the LF of the size line's CRLF */
    CH_DATA,         /* the chunk's data */
    CH_DATA_END,     /* the CRLF (or LF) after the data */
    CH_DATA_LF,      /* its LF */
    CH_TRAILER,      /* the start of a trailer line, or the final blank line */
    CH_TRAILER_LINE, /* a trailer field, skipped */
    CH_END_LF,       /* the LF of the final CRLF */
};

/* The size line ended: data next, or the trailer after the last chunk. */
static int size_done(struct net_chunked *c)
{
    c->state = c->left ? CH_DATA : CH_TRAILER;
    return 0;
}

/* One framing byte ch; returns -1 when malformed, 1 when the body ended. */
static int framing_byte(struct net_chunked *c, char ch)
{
    switch (c->state) {
    case CH_SIZE:
        if (net_hex_digit(ch) >= 0) {
            if (++c->size_digits > 15)
                return -1;
            c->left = c->left << 4 | (uint64_t)net_hex_digit(ch);
            return 0;
        }
        if (c->size_digits == 0)
            return -1;
        if (ch == ';' || ch == ' ' || ch == '\t')
            c->state = CH_EXT;
        else if (ch == '\r')
            c->state = CH_SIZE_LF;
        else if (ch == '\n')
            return size_done(c);
        else
            return -1;
        return 0;
    case CH_EXT:
        return ch == '\n' ? size_done(c) : ch == '\0' ? -1 : 0;
    case CH_SIZE_LF:
        return ch == '\n' ? size_done(c) : -1;
    case CH_DATA_END:
        if (ch != '\r' && ch != '\n')
            return -1;
        c->state = ch == '\r' ? CH_DATA_LF : CH_SIZE;
        c->size_digits = 0;
        return 0;
    case CH_DATA_LF:
        c->state = CH_SIZE;
        return ch == '\n' ? 0 : -1;
    case CH_TRAILER:
        if (ch == '\n')
            return 1;
        c->state = ch == '\r' ? CH_END_LF : CH_TRAILER_LINE;
        return 0;
    case CH_TRAILER_LINE:
        if (ch == '\n')
            c->state = CH_TRAILER;
        return 0;
    default: /* CH_END_LF */
        return ch == '\n' ? 1 : -1;
    }
}

enum net_chunk_step net_chunked_next(struct net_chunked *c, const char *buf, size_t len,
                                     size_t *used, const char **piece, size_t *n)
{
    size_t at = 0;
    while (at < len) {
        if (c->state == CH_DATA) {
            *piece = buf + at;
            *n = len - at < c->left ? len - at : (size_t)c->left;
            c->left -= *n;
            if (c->left == 0)
                c->state = CH_DATA_END;
            *used = at + *n;
            return NET_CHUNK_DATA;
        }
        int r = framing_byte(c, buf[at++]);
        if (r) {
            *used = at;
            return r < 0 ? NET_CHUNK_BAD : NET_CHUNK_END;
        }
    }
    *used = at;
    return NET_CHUNK_MORE;
}
