/*
 * An incremental HTTP/1.1 response parser (RFC 9112), the reading half of net/client.c, kept
 * apart so that it can be fuzzed without sockets. Pure: no allocation, no system calls.
 *
 * The caller owns the bytes. It hands the parser what it has received and not yet consumed;
 * each call makes one step and says how many bytes it consumed. The parser consumes only whole
 * units (a head, a chunk-size line, body bytes), so the bytes it leaves must be handed to it
 * again, with more after them, on the next call. It never looks back at consumed bytes.
 *
 * Interim 1xx answers (but 101) are skipped; the final head's status, version, Content-Type,
 * Content-Length, Transfer-Encoding and Connection are kept; the body comes out with chunked
 * framing removed (chunk extensions and trailers are dropped). A body without a length runs
 * to the connection's close (net_response_eof). Heads and chunks are read by net/head.h, as
 * strict as the server: a head with both framings, or another transfer coding, is an error.
 */
#ifndef NET_RESPONSE_H
#define NET_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>

#include "net/head.h"

/* A head (status line and header lines) longer than this is an error: the peer is not an
 * HTTP server, or a broken one. */
#define NET_RESPONSE_HEAD_MAX (64u << 10)
/* Content-Type values longer than this are an error (real ones are tens of bytes). */
#define NET_RESPONSE_TYPE_MAX 256

enum net_response_step {
    NET_RESPONSE_MORE,  /* nothing more can be parsed from these bytes: receive more */
    NET_RESPONSE_HEAD,  /* the final head is complete: status, length, content_type are set */
    NET_RESPONSE_BODY,  /* body bytes: *piece, *piece_len (inside the bytes handed over) */
    NET_RESPONSE_END,   /* the response is complete */
    NET_RESPONSE_ERROR, /* malformed: error says why; the parser stays in this state */
};

enum net_response_state {
    NET_RS_HEAD,    /* reading a head */
    NET_RS_LENGTH,  /* a body of known length, remaining bytes left */
    NET_RS_CLOSE,   /* a body that ends when the connection closes */
    NET_RS_CHUNKED, /* a chunked body */
    NET_RS_DONE,    /* complete */
    NET_RS_ERROR,
};

struct net_response {
    /* Set by net_response_init: the request was HEAD (its answer has no body). */
    bool no_body;
    /* The final head, valid from NET_RESPONSE_HEAD on. */
    int status;
    int minor;                                    /* HTTP/1.minor */
    long long length;                             /* Content-Length, -1 when none */
    bool chunked;                                 /* Transfer-Encoding: chunked */
    bool keep_alive;                              /* the connection may carry another request */
    bool has_type;                                /* a Content-Type line came */
    char content_type[NET_RESPONSE_TYPE_MAX + 1]; /* its value, trimmed */
    const char *error;                            /* why, once NET_RESPONSE_ERROR was returned */
    /* Internal. */
    enum net_response_state state;
    unsigned long long remaining; /* of the body (LENGTH) */
    struct net_chunked chunks;    /* CHUNKED */
};

/* Ready for a response to a request; no_body for an answer to HEAD. */
void net_response_init(struct net_response *r, bool no_body);

/* One step over the len unconsumed bytes at buf; *used is how many it consumed. */
enum net_response_step net_response_parse(struct net_response *r, const char *buf, size_t len,
                                          size_t *used, const char **piece, size_t *piece_len);

/* The connection closed after everything handed over was parsed to NET_RESPONSE_MORE:
 * NET_RESPONSE_END when that completes a body read to the close, else NET_RESPONSE_ERROR. */
enum net_response_step net_response_eof(struct net_response *r);

/* Whether the next step is NET_RESPONSE_END whatever bytes follow (all of the body was
 * delivered): an owner that paused delivery can still be told the response ended. */
bool net_response_ending(const struct net_response *r);

#endif
