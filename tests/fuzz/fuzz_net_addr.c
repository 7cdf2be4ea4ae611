/*
 * Fuzz harness for the addresses typed on a command line (src/net/addr.c): libra serve's
 * --listen HOST:PORT and libra load's --engines list of base URLs. The first byte picks the most
 * URLs allowed (1 to 64), the rest is the text that both parsers see. Besides not crashing: an
 * accepted address has a host of 1 to NET_HOST_MAX - 1 bytes and a port in 0..65535, and written
 * back (bracketed where it must be) parses to the same; accepted URLs are 1 to max http:// URLs
 * that net_url_problem takes, without a comma, query, fragment or trailing '/', and joined again
 * parse to the same; a refusal leaves the outputs as they were and says why, whole.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "net/addr.h"
#include "net/client.h"
#include "util/alloc.h"
#include "util/strbuf.h"

#define URLS_MAX 64
#define GUARD_PORT -77

static void check_why(const char *why, size_t size)
{
    size_t n = strnlen(why, size);
    fuzz_require(n > 0 && n < size - 1, "a refusal's reason is empty or cut");
}

static void check_listen(const char *text, char *why, size_t size)
{
    char host[NET_HOST_MAX];
    memset(host, 'G', sizeof host);
    host[sizeof host - 1] = '\0';
    int port = GUARD_PORT;
    why[0] = '\0';
    int rc = net_listen_parse(text, host, &port, why, size);
    if (rc != 0) {
        fuzz_require(rc == NET_LISTEN_BAD || rc == NET_LISTEN_BAD_PORT, "an unknown refusal");
        fuzz_require(port == GUARD_PORT && strspn(host, "G") == sizeof host - 1,
                     "a refused address was written");
        check_why(why, size);
        fuzz_require(rc != NET_LISTEN_BAD_PORT ||
                         strncmp(why, "expected an integer in [0, 65535]", 33) == 0,
                     "a refused port says something else");
        return;
    }
    size_t n = strlen(host);
    fuzz_require(n > 0 && n < NET_HOST_MAX, "an accepted host is empty or too long");
    fuzz_require(port >= 0 && port <= 65535, "an accepted port is out of range");
    bool bracket = host[0] == '[' || host[n - 1] == ']' || host[n - 1] == ':';
    char *back = xmalloc(n + 16);
    snprintf(back, n + 16, bracket ? "[%s]:%d" : "%s:%d", host, port);
    char host2[NET_HOST_MAX];
    int port2 = GUARD_PORT;
    fuzz_require(net_listen_parse(back, host2, &port2, why, size) == 0 &&
                     strcmp(host, host2) == 0 && port == port2,
                 "an address written back does not parse to itself");
    free(back);
}

static void check_urls(const char *text, int max, char *why, size_t size)
{
    char *copy = xstrdup(text);
    const char *urls[URLS_MAX];
    int n = -1;
    why[0] = '\0';
    if (net_base_urls_parse(copy, urls, max, &n, why, size) != 0) {
        fuzz_require(n == -1, "a refused list was counted");
        check_why(why, size);
        free(copy);
        return;
    }
    fuzz_require(n >= 1 && n <= max, "an accepted list has too few or too many URLs");
    struct strbuf b = {0};
    for (int i = 0; i < n; i++) {
        size_t len = strlen(urls[i]);
        fuzz_require(urls[i] >= copy && urls[i] + len <= copy + strlen(text),
                     "a URL lies outside the text");
        fuzz_require(len > 7 && strncmp(urls[i], "http://", 7) == 0 && urls[i][len - 1] != '/',
                     "an accepted URL is not http:// or ends in '/'");
        fuzz_require(
            !strpbrk(urls[i], ",?#") && !net_url_problem(urls[i]),
            "an accepted URL has a comma, query or fragment, or is one the client refuses");
        fuzz_require(i == 0 || urls[i] > urls[i - 1], "the URLs are out of order");
        strbuf_printf(&b, "%s%s", i ? "," : "", urls[i]);
    }
    char *joined = strbuf_detach(&b);
    const char *again[URLS_MAX];
    int m = -1;
    fuzz_require(net_base_urls_parse(joined, again, max, &m, why, size) == 0 && m == n,
                 "URLs joined again do not parse");
    for (int i = 0; i < n; i++)
        fuzz_require(strcmp(urls[i], again[i]) == 0, "URLs joined again parse differently");
    free(joined);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int max = 1 + data[0] % URLS_MAX;
    char *text = xstrndup((const char *)data + 1, size - 1);
    size_t why_size = strlen(text) + NET_ADDR_WHY_EXTRA;
    char *why = xmalloc(why_size);
    check_listen(text, why, why_size);
    check_urls(text, max, why, why_size);
    char small[8]; /* a why too small is cut, never overrun */
    char host[NET_HOST_MAX];
    int port;
    net_listen_parse(text, host, &port, small, sizeof small);
    free(why);
    free(text);
    return 0;
}
