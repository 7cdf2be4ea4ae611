/*
 * Fuzz harness for what the gateway reads of a request (src/server/request.c). Besides not
 * crashing: the first byte picks the API and the header a client sent; an accepted request's
 * libra cut leaves a body that still scans as one JSON object, its counts
 * are in range and its identity is a C string that names its source; the events parser agrees
 * with itself on the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *header(void *ctx, const char *name)
{
    return strcmp(name, "X-SMG-Routing-Key") == 0 ? ctx : NULL;
}

static void check_cut(const char *body, size_t len, const struct gw_request *r)
{
    char *out = xmalloc(len + 1);
    size_t n = r->cut.head_len;
    if (n > len || r->cut.tail_off > len || r->cut.tail_off < n)
        abort();
    memcpy(out, body, n);
    memcpy(out + n, body + r->cut.tail_off, len - r->cut.tail_off);
    n += len - r->cut.tail_off;
    size_t off;
    const char *msg;
    if (jscan_check(out, n, &off, &msg) != 0) /* a second libra member may stay: unknown */
        abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum gw_api api = (enum gw_api)(data[0] % 4);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    struct gw_parse_config c = {.rid_identity = data[0] & 4,
                                .prompt_tokens = 1 + data[0] % 7,
                                .prompt_sep = data[0] & 16 ? '-' : 0};
    struct gw_request *r = xmalloc(sizeof *r);
    char err[256];
    void *key = data[0] & 8 ? "key-from-header" : NULL;
    if (gw_request_parse(api, body, len, header, key, &c, r, err, sizeof err) == 0) {
        if (r->prompt_tokens < 0 || r->max_new_tokens < -1 || r->n_events > GW_EVENTS_MAX ||
            memchr(r->id, '\0', sizeof r->id) == NULL ||
            (r->id_source == GW_ID_NONE) != (r->id[0] == '\0'))
            abort();
        if (r->has_libra)
            check_cut(body, len, r);
    } else if (!memchr(err, '\0', sizeof err) || !err[0]) {
        abort();
    }
    struct gw_event ev[GW_EVENTS_MAX];
    size_t n1, n2;
    int a = gw_events_parse(body, len, ev, &n1, err, sizeof err);
    int b = gw_events_parse(body, len, ev, &n2, err, sizeof err);
    if (a != b || (a == 0 && (n1 != n2 || n1 > GW_EVENTS_MAX)))
        abort();
    free(r);
    return 0;
}
