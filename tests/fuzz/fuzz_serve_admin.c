/*
 * Fuzz harness for the gateway's admin inputs (src/server/admin.c): POST /workers' body, the
 * /add_worker query, the engine a path names, /libra/v1/engines/{id}/{action} and the mode
 * body. Every parser sees every input. Besides not crashing: whatever is accepted is what the
 * gateway may act on — an engine URL that starts with http://, names a host, ends without '/' and
 * holds no byte the gateway would have to escape when it appends a path; a TP of 0, 1, 2, 4 or 8; a
 * non-negative id; an action of lower-case letters; a mode that is shadow or names the policy — and
 * whatever is refused says why.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/admin.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_url(const char *url)
{
    size_t n = strnlen(url, GW_URL_MAX);
    if (n >= GW_URL_MAX || n <= 7 || strncmp(url, "http://", 7) != 0 || url[7] == '/' ||
        url[n - 1] == '/')
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)url[i] <= ' ' || (unsigned char)url[i] >= 0x7f ||
            strchr("\"\\?#", url[i]))
            abort();
}

static void check_spec(int rc, const struct gw_worker_spec *s, const char *err)
{
    if (rc != 0) {
        if (!err[0] || !memchr(err, '\0', 256))
            abort();
        return;
    }
    check_url(s->url);
    if (s->tp != 0 && s->tp != 1 && s->tp != 2 && s->tp != 4 && s->tp != 8)
        abort();
}

/* Whether the n bytes at data hold the text s. */
static bool holds(const uint8_t *data, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(data + i, s, k) == 0)
            return true;
    return false;
}

/* The input as a C string: the bytes up to the first NUL. */
static char *text_of(const uint8_t *data, size_t size)
{
    char *t = xmalloc(size + 1);
    memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_worker_spec spec;
    char err[256] = "", *text = text_of(data, size);
    check_spec(gw_worker_body_parse((const char *)data, size, &spec, err, sizeof err), &spec, err);
    char *comma = strchr(text, ','); /* "URL,TP" for the query form */
    if (comma)
        *comma = '\0';
    err[0] = '\0';
    check_spec(gw_worker_query_parse(text, comma ? comma + 1 : NULL, NULL, &spec, err, sizeof err),
               &spec, err);
    if (comma)
        *comma = ',';
    int64_t id;
    char url[GW_URL_MAX], action[GW_ACTION_MAX];
    err[0] = '\0';
    if (gw_engine_ref_parse(text, &id, url, err, sizeof err) == 0) {
        if (url[0])
            check_url(url);
        else if (id < 0)
            abort();
    } else if (!err[0]) {
        abort();
    }
    err[0] = '\0';
    if (gw_engine_action_parse(text, &id, action, err, sizeof err) == 0) {
        size_t n = strnlen(action, GW_ACTION_MAX);
        if (id < 0 || n == 0 || n >= GW_ACTION_MAX ||
            strspn(action, "abcdefghijklmnopqrstuvwxyz") != n)
            abort();
    } else if (!err[0]) {
        abort();
    }
    bool shadow = false;
    err[0] = '\0';
    if (gw_mode_body_parse((const char *)data, size, "cmlfq", &shadow, err, sizeof err) == 0) {
        if (!shadow && !holds(data, size, "cmlfq"))
            abort(); /* routing by the policy needs it named */
    } else if (!err[0]) {
        abort();
    }
    free(text);
    return 0;
}
