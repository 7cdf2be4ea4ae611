/*
 * The admin calls' inputs (admin.h). Bodies are small and rare, so they are read into a jansson
 * tree (duplicate members refused); every value is checked before the caller acts on it.
 */
#include "server/admin.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/client.h"
#include "util/error.h"
#include "util/json.h"

int gw_engine_url(const char *in, size_t len, char *out, char *err, size_t err_size)
{
    static const char scheme[] = "http://";
    size_t pre = sizeof scheme - 1;
    while (len > pre && in[len - 1] == '/')
        len--;
    if (len <= pre || strncasecmp(in, scheme, pre) != 0 || in[pre] == '/')
        return error_text(err, err_size, "url: expected http://HOST:PORT");
    if (len >= GW_URL_MAX)
        return error_text(err, err_size, "url: longer than %d bytes", GW_URL_MAX - 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)in[i];
        if (ch <= ' ' || ch >= 0x7f || strchr("\"\\?#", ch))
            return error_text(err, err_size,
                              "url: a space, control character, quote, backslash, '?' "
                              "or '#' in it");
    }
    memcpy(out, in, len);
    memcpy(out, scheme, pre); /* a scheme is case-insensitive: one spelling compares equal */
    out[len] = '\0';
    const char *why = net_url_problem(out);
    return why ? error_text(err, err_size, "url: %s", why) : 0;
}

int gw_tp_parse(const char *text, int *tp, char *err, size_t err_size)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || (v != 1 && v != 2 && v != 4 && v != 8))
        return error_text(err, err_size, "tp: expected 1, 2, 4 or 8, not '%.32s'", text);
    *tp = (int)v;
    return 0;
}

/* Reads the members of a POST /workers object. */
/* worker_type's value: "regular", the only kind served. */
static int worker_type(const char *type, char *err, size_t err_size)
{
    if (strcmp(type, "regular") == 0)
        return 0;
    return error_text(err, err_size,
                      "worker_type: only \"regular\" workers are served (no prefill/decode split)");
}

static int worker_members(json_t *doc, struct gw_worker_spec *out, char *err, size_t err_size)
{
    const char *key;
    json_t *v;
    bool has_url = false;
    json_object_foreach(doc, key, v)
    {
        if (strcmp(key, "url") == 0) {
            if (!json_is_string(v))
                return error_text(err, err_size, "url: expected a string");
            if (gw_engine_url(json_string_value(v), json_string_length(v), out->url, err, err_size))
                return -1;
            has_url = true;
        } else if (strcmp(key, "tp") == 0) {
            json_int_t n = json_integer_value(v);
            if (!json_is_integer(v) || (n != 1 && n != 2 && n != 4 && n != 8))
                return error_text(err, err_size, "tp: expected 1, 2, 4 or 8");
            out->tp = (int)n;
        } else if (strcmp(key, "worker_type") == 0) {
            if (worker_type(json_is_string(v) ? json_string_value(v) : "", err, err_size))
                return -1;
        } else {
            return error_text(err, err_size,
                              "unknown member '%.64s' (expected url, tp, worker_type)", key);
        }
    }
    if (!has_url)
        return error_text(err, err_size, "url: missing");
    return 0;
}

int gw_worker_body_parse(const char *body, size_t len, struct gw_worker_spec *out, char *err,
                         size_t err_size)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    int rc;
    if (!doc) {
        snprintf(err, err_size, "body:%d: %s", je.position, ujson_error_text(&je));
        rc = -1;
    } else if (!json_is_object(doc)) {
        rc = error_text(err, err_size, "body: expected an object {\"url\": ..., \"tp\": N}");
    } else {
        rc = worker_members(doc, out, err, err_size);
    }
    json_decref(doc);
    return rc;
}

int gw_worker_query_parse(const char *url, const char *tp, const char *type,
                          struct gw_worker_spec *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof *out);
    if (!url)
        return error_text(err, err_size, "url: missing (?url=http://HOST:PORT)");
    if (gw_engine_url(url, strlen(url), out->url, err, err_size) ||
        (type && worker_type(type, err, err_size)))
        return -1;
    return tp ? gw_tp_parse(tp, &out->tp, err, err_size) : 0;
}

/* Reads a decimal id of n bytes at s (digits only, at most 18). */
static bool read_id(const char *s, size_t n, int64_t *id)
{
    if (n == 0 || n > 18)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *id = v;
    return true;
}

int gw_engine_ref_parse(const char *text, int64_t *id, char *url, char *err, size_t err_size)
{
    url[0] = '\0';
    *id = -1;
    if (read_id(text, strlen(text), id))
        return 0;
    if (strncasecmp(text, "http://", 7) == 0)
        return gw_engine_url(text, strlen(text), url, err, err_size);
    return error_text(err, err_size, "expected an engine id or its http:// URL, not '%.64s'", text);
}

int gw_engine_action_parse(const char *text, int64_t *id, char *action, char *err, size_t err_size)
{
    const char *slash = strchr(text, '/');
    if (!slash || !read_id(text, (size_t)(slash - text), id))
        return error_text(err, err_size,
                          "expected /libra/v1/engines/{id}/{action}, not '.../%.64s'", text);
    static const char *const actions[] = {"drain", "lend", "reclaim"};
    for (size_t i = 0; i < sizeof actions / sizeof *actions; i++)
        if (strcmp(slash + 1, actions[i]) == 0) {
            memcpy(action, actions[i], strlen(actions[i]) + 1);
            return 0;
        }
    return error_text(err, err_size, "unknown engine action '%.32s'", slash + 1);
}

int gw_mode_body_parse(const char *body, size_t len, const char *policy, bool *shadow, char *err,
                       size_t err_size)
{
    json_error_t je;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    const char *key, *mode = NULL;
    json_t *v;
    bool has_mode = false;
    int rc = 0;
    if (!doc) {
        snprintf(err, err_size, "body:%d: %s", je.position, ujson_error_text(&je));
        return -1;
    }
    if (!json_is_object(doc))
        rc = error_text(err, err_size, "body: expected an object {\"mode\": ...}");
    json_object_foreach(json_is_object(doc) ? doc : NULL, key, v)
    {
        if (strcmp(key, "mode") != 0) {
            rc = error_text(err, err_size, "body: unknown member '%.64s' (only \"mode\")", key);
            break;
        }
        mode = json_string_value(v);
        has_mode = true;
    }
    bool is_shadow = mode && strcmp(mode, "shadow") == 0;
    if (rc == 0 && !has_mode)
        rc = error_text(err, err_size, "mode: missing (expected \"shadow\" or \"%s\")", policy);
    else if (rc == 0 && !is_shadow && !(mode && strcmp(mode, policy) == 0))
        rc =
            error_text(err, err_size, "mode: expected \"shadow\" or \"%s\" (sched.policy)", policy);
    if (rc == 0)
        *shadow = is_shadow;
    json_decref(doc);
    return rc;
}
