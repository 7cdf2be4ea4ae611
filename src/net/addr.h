/*
 * Addresses as typed on a command line: a HOST:PORT to listen on (libra serve --listen) and a
 * list of engines' base URLs (libra load --engines). Pure (text in, values and a reason out; no
 * name lookup), so libFuzzer drives them directly (tests/fuzz/fuzz_net_addr.c).
 *
 * A refusal writes the reason, lower case and without a full stop, into why (size bytes, cut
 * there): it quotes the text, so a why of strlen(text) + NET_ADDR_WHY_EXTRA bytes always holds
 * it whole. The CLI puts its flag before it.
 */
#ifndef NET_ADDR_H
#define NET_ADDR_H

#include <stddef.h>

/* Bytes beyond the text's own that a why needs to hold any reason whole. */
#define NET_ADDR_WHY_EXTRA 160

/* Bytes of a host buffer net_listen_parse fills, the NUL included. */
#define NET_HOST_MAX 256

/* What net_listen_parse refuses: the text's shape, or its port. */
enum { NET_LISTEN_BAD = -1, NET_LISTEN_BAD_PORT = -2 };

/*
 * Parses "HOST:PORT" at its last ':', an IPv6 HOST bracketed as in a URL ("[::1]:8000") or not
 * ("::1:8000"), into host (NET_HOST_MAX bytes: without the brackets, NUL-terminated) and *port
 * (0..65535; 0: the OS chooses). HOST is not empty, and as typed (brackets included) shorter
 * than NET_HOST_MAX bytes; one that starts with '[' or ends with ']' is bracketed whole, with
 * something inside; an unbracketed HOST may not end in ':' ("::1" would be host "::", every
 * interface, and port 1). Returns 0; NET_LISTEN_BAD with why "expected HOST:PORT, got 'TEXT'",
 * "expected HOST:PORT or [IPV6]:PORT, got 'TEXT'" or "'TEXT': a host may not end in ':' ...";
 * or NET_LISTEN_BAD_PORT with why
 * "expected an integer in [0, 65535], not 'PORT'" (the CLI says "--listen port: " before it).
 * host and *port are written only on success.
 */
int net_listen_parse(const char *text, char *host, int *port, char *why, size_t size);

/*
 * Splits text, a comma-separated list of base URLs ("http://host[:port][/path]"), in place: each
 * comma becomes a NUL, each URL loses its trailing slashes (all but the "http://"), and urls[]
 * gets a pointer into text for each, in order. Refused: an empty item (a leading, trailing or
 * doubled comma), an item that is not "http://" and more, more than max items, a URL
 * net_url_problem (net/client.h) refuses or one with a query or fragment ('?', '#'; a path is
 * appended to a base URL), or no URL at all (text ""). Does not look names up: whether two URLs
 * reach one server is the caller's check (net_urls_twins).
 *
 * Returns 0 with *n set (1..max), or -1 with why, one of: "an empty item in 'TEXT' (URLs are
 * comma-separated)", "'ITEM' is not an http:// URL", "more than MAX engines", "'URL': REASON",
 * "expected at least one URL". On a refusal text may be partly split, urls[0..max) partly
 * written, and *n is untouched.
 */
int net_base_urls_parse(char *text, const char **urls, int max, int *n, char *why, size_t size);

#endif
