/*
 * HTTP/1.x framing, pure (bytes in, positions out): a message
 * head (request line or status line, then header fields, then a blank line) and the chunked
 * transfer coding of a body, for the server (net/http.h) and the client's response parser
 * (net/response.h). Nothing is copied: a parsed head points into the caller's buffer.
 * libFuzzer drives both parsers directly (tests/fuzz/fuzz_net_head.c).
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

#define NET_HEAD_FIELDS 100 /* header fields a head may have (more: NET_HEAD_MANY) */
#define NET_HEAD_STR_(x) #x
#define NET_HEAD_STR(x) NET_HEAD_STR_(x)
/* What a head of too many fields is refused with (NET_HEAD_MANY). */
#define NET_HEAD_MANY_TEXT "more than " NET_HEAD_STR(NET_HEAD_FIELDS) " header fields"

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
    const char *why;        /* NET_HEAD_BAD: what is wrong, a static text */
    bool bad_value;         /* NET_HEAD_BAD: field[n_fields - 1], its name whole, is refused
                             * for a control byte in its value */
};

enum net_head_status {
    NET_HEAD_MORE = 0,
    NET_HEAD_OK = 1,
    NET_HEAD_BAD = -1, /* not a head */
    NET_HEAD_MANY = -2 /* more than NET_HEAD_FIELDS fields: a limit, not a malformed head */
};

/*
 * Parses the head at the start of buf[0..len): NET_HEAD_OK with *h filled, NET_HEAD_MORE when
 * the blank line has not arrived yet, NET_HEAD_BAD when the bytes cannot be a head,
 * NET_HEAD_MANY once a field past NET_HEAD_FIELDS arrives (*h then holds nothing to use).
 * response selects a status line over a request line.
 */
enum net_head_status net_head_parse(const char *buf, size_t len, bool response, struct net_head *h);

/* The value of the first field named name (case-insensitive), or NULL; *n its length. */
const char *net_head_field(const struct net_head *h, const char *name, size_t *n);

/*
 * The chunked coding, a step at a time: framing is consumed and the chunks' data come out as
 * runs inside the caller's bytes, so a reader can move them where it wants (the server, down
 * over their framing into one contiguous body) or pass them on (the client). Zero-initialise,
 * then call net_chunked_next on the bytes not yet consumed.
 */
struct net_chunked {
    int state;          /* internal */
    uint64_t left;      /* bytes of the current chunk's data still to come */
    size_t size_digits; /* of the chunk-size being read */
};

enum net_chunk_step {
    NET_CHUNK_MORE, /* the bytes ran out: hand over the rest with more after it */
    NET_CHUNK_DATA, /* *piece, *n: a run of data (inside buf, consumed) */
    NET_CHUNK_END,  /* the last chunk and the trailer's blank line are consumed: bytes after
                     * them belong to the next message */
    NET_CHUNK_BAD,  /* malformed framing, or a chunk-size of more than 15 hex digits */
};

/* One step over the unconsumed bytes buf[0..len); *used is how many it consumed. */
enum net_chunk_step net_chunked_next(struct net_chunked *c, const char *buf, size_t len,
                                     size_t *used, const char **piece, size_t *n);

#endif
