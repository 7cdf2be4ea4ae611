/*
 * Addresses as typed on a command line (net/addr.h).
 */
#include "net/addr.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/client.h"
#include "util/error.h"
#include "util/parse.h"

int net_listen_parse(const char *text, char *host, int *port, char *why, size_t size)
{
    const char *colon = strrchr(text, ':');
    if (!colon || colon == text || (size_t)(colon - text) >= NET_HOST_MAX) {
        error_text(why, size, "expected HOST:PORT, got '%s'", text);
        return NET_LISTEN_BAD;
    }
    bool bracketed = text[0] == '[' && colon[-1] == ']';
    if ((text[0] == '[' || colon[-1] == ']') && (!bracketed || colon - text < 3)) {
        error_text(why, size, "expected HOST:PORT or [IPV6]:PORT, got '%s'", text);
        return NET_LISTEN_BAD;
    }
    if (!bracketed && colon[-1] == ':') { /* "::1": host "::" (every interface), port 1 */
        error_text(why, size,
                   "'%s': a host may not end in ':' (::1 is host ::, every interface, and port "
                   "1): bracket an IPv6 address with a port, as [::1]:PORT",
                   text);
        return NET_LISTEN_BAD;
    }
    int64_t p;
    if (parse_int(colon + 1, 0, 65535, &p, why, size) != 0)
        return NET_LISTEN_BAD_PORT;
    snprintf(host, NET_HOST_MAX, "%.*s", (int)(colon - text) - (bracketed ? 2 : 0),
             text + bracketed);
    *port = (int)p;
    return 0;
}

int net_base_urls_parse(char *text, const char **urls, int max, int *n, char *why, size_t size)
{
    size_t len = strlen(text);
    if (len && (text[0] == ',' || text[len - 1] == ',' || strstr(text, ",,")))
        return error_text(why, size, "an empty item in '%s' (URLs are comma-separated)", text);
    int got = 0;
    char *save = NULL;
    for (char *u = strtok_r(text, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
        if (strncasecmp(u, "http://", 7) != 0 || !u[7])
            return error_text(why, size, "'%s' is not an http:// URL", u);
        memcpy(u, "http://", 7); /* a scheme is case-insensitive: one spelling compares equal */
        if (got == max)
            return error_text(why, size, "more than %d engines", max);
        size_t k = strlen(u);
        while (k > 7 && u[k - 1] == '/')
            u[--k] = '\0';
        const char *problem = net_url_problem(u);
        if (!problem && strpbrk(u, "?#")) /* "/generate" after it would land in the query */
            problem = "a query or fragment in a base URL (the API's paths are appended to it)";
        if (problem)
            return error_text(why, size, "'%s': %s", u, problem);
        urls[got++] = u;
    }
    if (!got)
        return error_text(why, size, "expected at least one URL");
    *n = got;
    return 0;
}
