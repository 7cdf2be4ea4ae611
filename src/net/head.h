/*
 * HTTP/1.x framing, pure (bytes in, positions out), for the server of net/http.h: a message
 * head (request line or status line, then header fields, then a blank line) and the chunked
 * transfer coding of a body. Nothing is copied: a parsed head points into the caller's
 * buffer. libFuzzer drives both parsers directly (tests/fuzz/fuzz_net_head.c).
 *
 * Strict where leniency would let two readers disagree on where a message ends (RFC 9112 §6.3,
 * request smuggling): a Content-Length that is not all digits, two that differ, one beside a
 * Transfer-Encoding, a transfer coding other than chunked, whitespace before a field's colon
 * or a field folded over lines are malformed. Lines may end in LF alone (§2.2).
 */
#ifndef NET_HEAD_H
#define NET_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_HEAD_FIELDS 100 /* header fields a head may have (more: malformed) */

/* A piece of the caller's buffer. */
struct net_span {
    const char *p;
    size_t n;
};

struct net_field {
    struct net_span name, value; /* value without the whitespace around it */
};

/* A parsed head. For a request: start[0] the method, start[1] the target, start[2] the
 * version; for a response: the version, the status digits, the reason phrase. */
struct net_head {
    struct net_span start[3];
    int minor;  /* HTTP/1.minor: 0 or 1 */
    int status; /* a response's status, 100..999; 0 for a request */
    struct net_field field[NET_HEAD_FIELDS];
    size_t n_fields;
    size_t length; /* bytes of the head, its blank line included */
    /* the body's framing, from the fields */
    bool chunked;           /* Transfer-Encoding: chunked */
    int64_t content_length; /* -1: none given */
    bool close;             /* the connection ends after this message (Connection: close,
                             * or HTTP/1.0 without keep-alive) */
    bool expect_continue;   /* Expect: 100-continue */
};

enum net_head_status { NET_HEAD_MORE = 0, NET_HEAD_OK = 1, NET_HEAD_BAD = -1 };

/*
 * Parses the head at the start of buf[0..len): NET_HEAD_OK with *h filled, NET_HEAD_MORE when
 * the blank line has not arrived yet, NET_HEAD_BAD when the bytes cannot be a head (*h then
 * holds nothing to use). response selects a status line over a request line.
 */
enum net_head_status net_head_parse(const char *buf, size_t len, bool response, struct net_head *h);

/* The value of the first field named name (case-insensitive), or NULL; *n its length. */
const char *net_head_field(const struct net_head *h, const char *name, size_t *n);

/*
 * The chunked coding, decoded in place: the chunks' data are moved down over their framing,
 * so a body that arrives in pieces ends up contiguous at the start of its buffer region.
 * Zero-initialise, then call net_chunked_run on each arrival.
 */
struct net_chunked {
    int state;     /* internal */
    uint64_t left; /* bytes of the current chunk's data still to come */
    size_t size_digits;
};

/*
 * Decodes buf[*in..len): data bytes are written at buf[*out...] (*out <= *in always, so this
 * is a move within buf), framing is consumed. Returns NET_HEAD_OK once the last chunk and the
 * trailer's blank line are consumed (*in is then just past them: bytes after belong to the
 * next message), NET_HEAD_MORE when buf ran out first, NET_HEAD_BAD for malformed framing or
 * a size over max_bytes in all (*out counts every data byte decoded so far).
 */
enum net_head_status net_chunked_run(struct net_chunked *c, char *buf, size_t len, size_t *in,
                                     size_t *out, uint64_t max_bytes);

#endif
