/*
 * What travels on the wire besides JSON: URL query strings (parsed) and Server-Sent Events
 * (framed). Pure (memory in, memory out), so libFuzzer drives the parser directly
 * (tests/fuzz/fuzz_net_query.c).
 */
#ifndef NET_QUERY_H
#define NET_QUERY_H

#include <stddef.h>

/* One decoded key=value pair of a query string. */
struct net_kv {
    char *key;   /* owned, NUL-terminated */
    char *value; /* owned; "" for a key without '=' */
};

/*
 * Parses an application/x-www-form-urlencoded query of len bytes ("a=1&b=x%20y", '+' is a
 * space) into *out (n pairs, in order; free with net_kv_free). Empty pairs ("a=1&&b") are
 * skipped. Returns 0, or -1 for a '%' not followed by two hex digits or a decoded NUL byte
 * (*out is then NULL).
 */
int net_query_parse(const char *q, size_t len, struct net_kv **out, size_t *n);

/* Frees n pairs from net_query_parse; kv may be NULL. */
void net_kv_free(struct net_kv *kv, size_t n);

/* The value of a hexadecimal digit (either case), or -1 for any other byte. */
int net_hex_digit(char ch);

/*
 * Frames len bytes of data as one SSE event: each line prefixed "data: ", then a blank line.
 * A '\n' inside data starts a new data line (an SSE reader joins them again).
 * Returns a malloc'd string and sets *out_len.
 */
char *net_sse_frame(const char *data, size_t len, size_t *out_len);

#endif
