/*
 * Reading a generation request without a DOM of it (request.h). Only libra's own object,
 * small by construction, is parsed field by field; the body itself is scanned.
 */
#include "server/request.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"

#define BYTES_PER_TOKEN 4 /* text without a tokenizer: the emulator's and the docs' rule */

uint64_t gw_hash(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

const char *gw_api_path(enum gw_api api)
{
    static const char *const paths[] = {"/generate", "/inference/v1/generate", "/v1/completions",
                                        "/v1/chat/completions"};
    return (unsigned)api < sizeof paths / sizeof paths[0] ? paths[api] : "?";
}

/* ---- text as a client means it ------------------------------------------------------------- */

/* Where the text read goes: the first max bytes of it, copied to out or, with out NULL, hashed
 * into h; n counts what went. */
struct text_sink {
    char *out;
    uint64_t h;
    size_t n, max;
};

static void sink_put(struct text_sink *s, const char *b, size_t m)
{
    if (m > s->max - s->n)
        m = s->max - s->n;
    if (s->out)
        memcpy(s->out + s->n, b, m);
    else
        s->h = gw_hash(s->h, b, m);
    s->n += m;
}

static bool high_surrogate(const char *p)
{
    return (p[2] == 'd' || p[2] == 'D') && strchr("89abAB", p[3]) && p[3];
}

/* The text of the JSON string v (its escapes undone: "\u0065" and "e" are one text; \u0000 a
 * zero byte) into s, as far as s->max. Only as much of v is read as that takes. False when v is
 * not a string or an escape on the way is malformed (a lone surrogate). */
static bool string_text(struct jscan_value v, struct text_sink *s)
{
    if (v.type != 's' || v.len < 2)
        return false;
    const char *p = v.p + 1, *end = v.p + v.len - 1;
    while (p < end && s->n < s->max) {
        const char *bs = memchr(p, '\\', (size_t)(end - p));
        size_t run = (size_t)((bs ? bs : end) - p);
        sink_put(s, p, run);
        p += run;
        if (!bs || s->n == s->max)
            break;
        size_t k = end - p >= 6 && p[1] == 'u' ? 6 : 2;
        if (k == 6 && end - p >= 12 && high_surrogate(p) && p[6] == '\\' && p[7] == 'u')
            k = 12; /* a pair is one character */
        if ((size_t)(end - p) < k)
            return false;
        char esc[14], u[8];
        if (k == 6 && memcmp(p, "\\u0000", 6) == 0) { /* jscan_string refuses it */
            u[0] = '\0';
            sink_put(s, u, 1);
        } else {
            esc[0] = '"';
            memcpy(esc + 1, p, k);
            esc[k + 1] = '"';
            if (!jscan_string((struct jscan_value){esc, k + 2, 's'}, u, sizeof u))
                return false;
            sink_put(s, u, strlen(u));
        }
        p += k;
    }
    return true;
}

/* Hashes into s a canonical spelling of the JSON value v, as far as s->max: whitespace between
 * tokens dropped, strings as their text between quotes (string_text; as written when
 * malformed), integers in decimal ("-0", "1" and "1 " alike), other numbers and literals as
 * written. Two spellings of one value have one key. */
static void canonical(struct jscan_value v, struct text_sink *s)
{
    const char *p = v.p, *end = v.p + v.len;
    while (p < end && s->n < s->max) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            p++;
        } else if (*p == '"') {
            const char *q = p + 1;
            while (q < end && *q != '"')
                q += *q == '\\' ? 2 : 1;
            q = q < end ? q + 1 : end;
            struct jscan_value str = {p, (size_t)(q - p), 's'};
            sink_put(s, "\"", 1);
            struct text_sink t = *s;
            if (string_text(str, &t))
                *s = t;
            else
                sink_put(s, p + 1, q - p >= 2 ? (size_t)(q - p) - 2 : 0);
            sink_put(s, "\"", 1);
            p = q;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            const char *q = p;
            while (q < end && strchr("+-.eE0123456789", *q) && *q)
                q++;
            struct jscan_value num = {p, (size_t)(q - p), 'n'};
            int64_t i;
            char text[24];
            if (jscan_int(num, &i)) {
                snprintf(text, sizeof text, "%lld", (long long)i);
                sink_put(s, text, strlen(text));
            } else {
                sink_put(s, p, (size_t)(q - p));
            }
            p = q;
        } else {
            sink_put(s, p++, 1);
        }
    }
}

/* A tool name as an observation keeps it (docs/routing.md): the first SCHED_TOOL_NAME_MAX - 1
 * bytes of the string v's text, cut as sched_obs_classify cuts, which cleans it (':', '|', ','
 * and control bytes become '_'); a \u0000 is kept as another control byte (0x01) so that the
 * C string holds what follows it and the classifier cleans it alike. False when v is not a
 * string or an escape in the part read is malformed; out is then "". */
static bool read_tool(struct jscan_value v, char out[SCHED_TOOL_NAME_MAX])
{
    struct text_sink s = {.out = out, .max = SCHED_TOOL_NAME_MAX - 1};
    bool ok = string_text(v, &s);
    for (size_t i = 0; i < s.n; i++)
        if (out[i] == '\0')
            out[i] = '\x01';
    out[ok ? s.n : 0] = '\0';
    return ok;
}

/* ---- events ----------------------------------------------------------------------------- */

/* Refuses a member of the object o (named where) that is not one of keys (NULL-terminated):
 * a misspelt name would be lost without a word; and one of keys given twice: the scanner would
 * read the first, where a client's JSON library sends the last it was given. */
static int check_members(struct jscan_value o, const char *const *keys, const char *where,
                         char *err, size_t size)
{
    struct jscan_value other;
    if (jscan_other_member(o, keys, &other)) {
        char name[48], expected[128] = "";
        if (!jscan_string(other, name, sizeof name))
            snprintf(name, sizeof name, "(a name of over %zu bytes)", sizeof name - 1);
        for (const char *const *k = keys; *k; k++)
            snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
                     k == keys ? "" : ", ", *k);
        return error_text(err, size, "%s: unknown member '%s' (expected %s)",
                          *where ? where : "body", name, expected);
    }
    for (; *keys; keys++)
        if (jscan_member_count(o, *keys) > 1)
            return error_text(err, size, "%s%s%s: given twice", where, *where ? "." : "", *keys);
    return 0;
}

static int parse_status(struct jscan_value v, const char *where, int *out, char *err, size_t size)
{
    static const char *const names[] = {"success", "failure", "timeout", "other"};
    char s[16];
    if (!jscan_string(v, s, sizeof s))
        return error_text(err, size, "%s.status: expected success, failure, timeout or other",
                          where);
    for (int i = 0; i < SCHED_STATUS_COUNT; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return error_text(err, size, "%s.status: expected success, failure, timeout or other, not '%s'",
                      where, s);
}

static int parse_finish(struct jscan_value v, const char *where, enum trace_finish *out, char *err,
                        size_t size)
{
    char s[16];
    if (jscan_string(v, s, sizeof s))
        for (int i = 0; i < TRACE_FINISH_COUNT; i++)
            if (strcmp(s, trace_finish_name((enum trace_finish)i)) == 0) {
                *out = (enum trace_finish)i;
                return 0;
            }
    return error_text(err, size, "%s.status: expected completed, truncated, aborted or filtered",
                      where);
}

static int parse_tool_return(struct jscan_value o, const char *where, struct gw_event *e, char *err,
                             size_t size)
{
    struct jscan_value v;
    /* a longer name is cut (docs/routing.md): the name is the client's, not a mistake */
    if (jscan_get(o, "tool", &v) && v.type != 'z' && !read_tool(v, e->tool))
        return error_text(err, size, "%s.tool: expected a string", where);
    if (jscan_get(o, "status", &v) && v.type != 'z' &&
        parse_status(v, where, &e->status, err, size))
        return -1;
    /* at most what a trace holds (TRACE_MAX_TOKENS, TRACE_MAX_TOOL_US): the capture, the state
     * and the sums over a trajectory take them */
    if (jscan_get(o, "payload_tokens", &v) && v.type != 'z' &&
        (!jscan_int(v, &e->payload_tokens) || e->payload_tokens < 0 ||
         e->payload_tokens > TRACE_MAX_TOKENS))
        return error_text(err, size, "%s.payload_tokens: expected an integer from 0 to 2^40",
                          where);
    if (jscan_get(o, "exec_s", &v) && v.type != 'z' &&
        (!jscan_number(v, &e->exec_s) || !(e->exec_s >= 0) ||
         !(e->exec_s <= (double)TRACE_MAX_TOOL_US / 1e6)))
        return error_text(err, size, "%s.exec_s: expected seconds from 0 to %.0f", where,
                          floor((double)TRACE_MAX_TOOL_US / 1e6));
    return 0;
}

static int parse_event(struct jscan_value o, const char *where, struct gw_event *e, char *err,
                       size_t size)
{
    *e = (struct gw_event){.status = SCHED_STATUS_UNSET, .payload_tokens = -1, .exec_s = -1};
    struct jscan_value v;
    char kind[16];
    static const char *const tool_keys[] = {"kind",           "tool",   "status",
                                            "payload_tokens", "exec_s", NULL};
    static const char *const finish_keys[] = {"kind", "status", "reward", NULL};
    if (o.type != 'o')
        return error_text(err, size, "%s: expected an object", where);
    if (!jscan_get(o, "kind", &v) || !jscan_string(v, kind, sizeof kind))
        return error_text(err, size, "%s.kind: expected tool_return or finish", where);
    if (strcmp(kind, "tool_return") == 0) {
        if (check_members(o, tool_keys, where, err, size))
            return -1;
        return parse_tool_return(o, where, e, err, size);
    }
    if (strcmp(kind, "finish") != 0)
        return error_text(err, size, "%s.kind: expected tool_return or finish, not '%s'", where,
                          kind);
    if (check_members(o, finish_keys, where, err, size))
        return -1;
    e->kind = GW_EVENT_FINISH;
    e->finish = TRACE_FINISH_COMPLETED;
    /* left out (or null): completed, the end a client that ends a trajectory usually means */
    if (jscan_get(o, "status", &v) && v.type != 'z' &&
        parse_finish(v, where, &e->finish, err, size))
        return -1;
    if (jscan_get(o, "reward", &v) && v.type != 'z') {
        if (!jscan_number(v, &e->reward) || !isfinite(e->reward))
            return error_text(err, size, "%s.reward: expected a number", where);
        e->has_reward = true;
    }
    return 0;
}

static int parse_event_array(struct jscan_value a, const char *where, struct gw_event *out,
                             size_t *n, char *err, size_t size)
{
    if (a.type != 'a')
        return error_text(err, size, "%s: expected an array", where);
    struct jscan_iter it = {0};
    struct jscan_value e;
    for (*n = 0; jscan_next(a, &it, &e); (*n)++) {
        char at[64];
        snprintf(at, sizeof at, "%s.%zu", where, *n);
        if (*n == GW_EVENTS_MAX)
            return error_text(err, size, "%s: more than %d events", where, GW_EVENTS_MAX);
        /* a finish ends the trajectory: an event after it would have none to apply to */
        if (*n > 0 && out[*n - 1].kind == GW_EVENT_FINISH)
            return error_text(err, size, "%s: an event after the finish %s.%zu (a finish is last)",
                              at, where, *n - 1);
        if (parse_event(e, at, &out[*n], err, size))
            return -1;
    }
    return 0;
}

static int check_body(const char *body, size_t len, char *err, size_t size)
{
    size_t off = 0;
    const char *msg = NULL;
    if (jscan_check(body, len, &off, &msg) == 0)
        return 0;
    return error_text(err, size, "body:%zu: %s", off, msg ? msg : "invalid JSON");
}

int gw_events_parse(const char *body, size_t len, struct gw_event *out, size_t *n, char *err,
                    size_t err_size)
{
    static const char *const keys[] = {"events", NULL};
    /* a body of neither shape: its member that neither takes is the one misspelt */
    static const char *const any_keys[] = {"events",         "kind",   "tool",   "status",
                                           "payload_tokens", "exec_s", "reward", NULL};
    *n = 0;
    struct jscan_value root = jscan_root(body, len), a;
    if (check_body(body, len, err, err_size))
        return -1;
    if (jscan_get(root, "events", &a)) {
        if (check_members(root, keys, "", err, err_size))
            return -1;
        return parse_event_array(a, "events", out, n, err, err_size);
    }
    if (root.type == 'o' && !jscan_get(root, "kind", &a) &&
        check_members(root, any_keys, "", err, err_size))
        return -1;
    *n = 1;
    return parse_event(root, "event", out, err, err_size);
}

/* ---- identity ----------------------------------------------------------------------------- */

const char *gw_id_tag(enum gw_id_source src)
{
    static const char *const tags[] = {
        "", "libra", "trajectory_id", "routing_key", "program_id", "session", "rid"};
    return (unsigned)src < sizeof tags / sizeof tags[0] ? tags[src] : "";
}

void gw_id_key(char out[GW_ID_MAX], enum gw_id_source src, const char *value, size_t len)
{
    const char *tag = gw_id_tag(src);
    if (strlen(tag) + 1 + len < GW_ID_MAX) {
        snprintf(out, GW_ID_MAX, "%s:%.*s", tag, (int)len, value);
        return;
    }
    /* a value too long to keep whole: its hash names it, never a prefix two ids may share */
    snprintf(out, GW_ID_MAX, "%s#%016llx", tag,
             (unsigned long long)gw_hash(GW_HASH_SEED, value, len));
}

/* The prompt key by the id rule: the identity's value up to its last separator. */
static void prompt_from_id(const struct gw_parse_config *c, struct gw_request *r, const char *value,
                           size_t len)
{
    if (r->has_prompt || !c->prompt_sep)
        return;
    const char *sep = NULL;
    for (const char *at = value; (at = memchr(at, c->prompt_sep, len - (size_t)(at - value)));)
        sep = at++;
    if (!sep)
        return;
    r->prompt = gw_hash(GW_HASH_SEED, value, (size_t)(sep - value)) & GW_PROMPT_MASK;
    r->has_prompt = true;
}

/* One place an identity may come from, in the order of precedence (request.h). */
struct id_source {
    enum gw_id_source src;
    const char *field; /* named in errors */
    struct jscan_value v;
    const char *types;    /* the jscan types docs/serve.md "Identity" allows; NULL: checked
                             elsewhere (libra.trajectory) or a header's text */
    const char *expected; /* those types, in words */
};

/* Sets the identity from s's value: a string's text unescaped, any other value as written.
 * Refused when longer than GW_ID_VALUE_MAX bytes: the events call names it in its path. */
static int set_id(struct gw_request *r, const struct gw_parse_config *c, const struct id_source *s,
                  char *err, size_t size)
{
    char text[GW_ID_VALUE_MAX + 1];
    const char *value = s->v.p;
    size_t len = s->v.len;
    if (s->v.type == 's' && jscan_string(s->v, text, sizeof text)) {
        value = text;
        len = strlen(text);
    } else if (s->v.type == 's' || len > GW_ID_VALUE_MAX) {
        return error_text(err, size, "%s: expected an identity of at most %d bytes (without NUL)",
                          s->field, GW_ID_VALUE_MAX);
    }
    if (len == 0) /* its events call would have no path to name it by */
        return error_text(err, size, "%s: expected a non-empty identity", s->field);
    r->id_source = s->src;
    gw_id_key(r->id, s->src, value, len);
    prompt_from_id(c, r, value, len);
    return 0;
}

static struct jscan_value header_value(gw_header_fn header, void *ctx, const char *name)
{
    const char *h = header ? header(ctx, name) : NULL;
    return h && *h ? (struct jscan_value){h, strlen(h), 'h'} : (struct jscan_value){0};
}

/* The root members the parse reads, found in one pass (the bulk of a body is one of them,
 * input_ids: each lookup on its own would skip it again). */
enum root_key {
    KEY_LIBRA,
    KEY_TRAJECTORY_ID,
    KEY_PROGRAM_ID,
    KEY_RID,
    KEY_PROMPT, /* input_ids, token_ids, prompt or messages by API */
    KEY_TEXT,
    KEY_SAMPLING_PARAMS,
    KEY_MAX_TOKENS,
    KEY_MAX_COMPLETION_TOKENS,
    KEY_STREAM,
    KEY_COUNT
};

/* The first present source, in the order of precedence (request.h); null counts as absent.
 * Every present source is of a type its client sends, the ones outranked too: a value of
 * another type is a client's mistake, not an identity ("trajectory_id:5"). */
static int find_identity(const struct jscan_value *m, gw_header_fn header, void *hctx,
                         const struct gw_parse_config *c, struct gw_request *r, char *err,
                         size_t size)
{
    struct jscan_value in_libra = {0};
    if (m[KEY_LIBRA].type == 'o')
        jscan_get(m[KEY_LIBRA], "trajectory", &in_libra);
    const struct id_source sources[] = {
        {GW_ID_LIBRA, "libra.trajectory", in_libra, NULL, NULL},
        {GW_ID_TRAJECTORY, "trajectory_id", m[KEY_TRAJECTORY_ID], "so", "a string or an object"},
        {GW_ID_ROUTING_KEY, "header X-SMG-Routing-Key",
         header_value(header, hctx, "X-SMG-Routing-Key"), NULL, NULL},
        {GW_ID_PROGRAM, "program_id", m[KEY_PROGRAM_ID], "s", "a string"},
        {GW_ID_SESSION, "header X-Session-ID", header_value(header, hctx, "X-Session-ID"), NULL,
         NULL},
        {GW_ID_RID, "rid", c->rid_identity ? m[KEY_RID] : (struct jscan_value){0}, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++) {
        const struct id_source *s = &sources[i];
        if (!s->v.type || s->v.type == 'z')
            continue;
        if (s->types && !strchr(s->types, s->v.type))
            return error_text(err, size, "%s: expected %s", s->field, s->expected);
        if (r->id_source == GW_ID_NONE && set_id(r, c, s, err, size))
            return -1;
    }
    return 0;
}

/* ---- the prompt ----------------------------------------------------------------------------- */

/* The prompt's value and whether it is token ids. */
static bool prompt_value(enum gw_api api, const struct jscan_value *m, struct jscan_value *out,
                         bool *ids)
{
    *ids = api != GW_CHAT;
    *out = m[KEY_PROMPT];
    if (out->type && out->type != 'z') {
        *ids = *ids && out->type == 'a';
        return true;
    }
    *ids = false;
    *out = m[KEY_TEXT];
    return api == GW_SGLANG_GENERATE && out->type && out->type != 'z';
}

static int read_prompt(enum gw_api api, const struct jscan_value *m,
                       const struct gw_parse_config *c, struct gw_request *r, char *err,
                       size_t size)
{
    struct jscan_value p;
    bool ids;
    if (!prompt_value(api, m, &p, &ids))
        return error_text(err, size, "%s: missing",
                          api == GW_CHAT              ? "messages"
                          : api == GW_SGLANG_GENERATE ? "input_ids"
                                                      : "prompt");
    /* The key is libra_prompt_key of what the client means, however its JSON library spelt
     * it: of the first ids in decimal joined by ',' ("1,2,3"), of a text's first bytes, of the
     * chat messages' first bytes written without whitespace, their strings unescaped. */
    struct text_sink s = {.h = GW_HASH_SEED, .max = SIZE_MAX};
    if (ids) {
        r->prompt_tokens = jscan_count(p);
        struct jscan_iter it = {0};
        struct jscan_value e;
        for (int i = 0; i < c->prompt_tokens && jscan_next(p, &it, &e); i++) {
            if (i > 0) /* between them: "1,2" is not "12" */
                sink_put(&s, ",", 1);
            canonical(e, &s);
        }
    } else {
        size_t n = p.len / BYTES_PER_TOKEN;
        r->prompt_tokens = (int64_t)(n ? n : 1);
        s.max = (size_t)c->prompt_tokens * BYTES_PER_TOKEN;
        struct text_sink t = s;
        if (p.type == 's' && string_text(p, &t))
            s = t;
        else if (p.type == 's') /* a malformed escape: its bytes as written */
            sink_put(&s, p.p + 1, p.len - 2);
        else
            canonical(p, &s);
    }
    if (!r->has_prompt)
        r->prompt = s.h & GW_PROMPT_MASK;
    return 0;
}

/* Refuses keys[i] of obj (named where) given twice where found[i] is present: a JSON library
 * keeps the last of the two, the scanner read the first, so the gateway would route and count
 * another request than the engine runs. One pass over obj per key present. */
static int check_once(struct jscan_value obj, const char *const *keys, size_t n,
                      const struct jscan_value *found, const char *where, char *err, size_t size)
{
    for (size_t i = 0; i < n; i++)
        if (found[i].type && jscan_member_count(obj, keys[i]) > 1)
            return error_text(err, size, "%s%s%s: given twice", where, *where ? "." : "", keys[i]);
    return 0;
}

static int read_budget(enum gw_api api, const struct jscan_value *m, struct gw_request *r,
                       char *err, size_t size)
{
    /* sampling_params.max_new_tokens, sampling_params.max_tokens, max_tokens, max_tokens */
    struct jscan_value v = m[KEY_MAX_TOKENS];
    const char *key = api == GW_SGLANG_GENERATE ? "max_new_tokens" : "max_tokens";
    int64_t n;
    r->max_new_tokens = -1;
    if (api == GW_SGLANG_GENERATE || api == GW_VLLM_GENERATE) {
        jscan_get(m[KEY_SAMPLING_PARAMS], key, &v);
        if (check_once(m[KEY_SAMPLING_PARAMS], &key, 1, &v, "sampling_params", err, size))
            return -1;
    }
    if ((v.type && jscan_int(v, &n)) ||
        (api == GW_CHAT && (v = m[KEY_MAX_COMPLETION_TOKENS]).type && jscan_int(v, &n)))
        r->max_new_tokens = n >= 0 ? n : -1;
    return 0;
}

/* ---- chat messages ------------------------------------------------------------------------ */

/* Whether member key of o is the string want. */
static bool member_is(struct jscan_value o, const char *key, const char *want)
{
    struct jscan_value v;
    char s[32];
    return jscan_get(o, key, &v) && jscan_string(v, s, sizeof s) && strcmp(s, want) == 0;
}

/* The function name of the call with id in an assistant message's tool_calls. */
static void call_name(struct jscan_value calls, struct jscan_value id,
                      char out[SCHED_TOOL_NAME_MAX])
{
    struct jscan_iter it = {0};
    struct jscan_value call, v;
    while (jscan_next(calls, &it, &call)) {
        if (call.type == 'o' && jscan_get(call, "id", &v) && v.len == id.len &&
            memcmp(v.p, id.p, id.len) == 0 && jscan_path(call, "function.name", &v) &&
            read_tool(v, out))
            return;
    }
    out[0] = '\0';
}

/* The tool messages after the last assistant message, named through that message's calls. */
static void read_chat_returns(struct jscan_value messages, struct gw_request *r)
{
    struct jscan_iter it = {0};
    struct jscan_value m, calls = {0}, v;
    struct jscan_value ids[GW_EVENTS_MAX];
    r->n_chat = 0;
    while (jscan_next(messages, &it, &m)) {
        if (m.type != 'o')
            continue;
        if (member_is(m, "role", "assistant")) {
            r->n_chat = 0;
            calls = (struct jscan_value){0};
            jscan_get(m, "tool_calls", &calls);
        } else if (member_is(m, "role", "tool") && r->n_chat < GW_EVENTS_MAX) {
            struct gw_chat_return *ret = &r->chat[r->n_chat];
            ids[r->n_chat] = jscan_get(m, "tool_call_id", &v) ? v : (struct jscan_value){0};
            *ret = (struct gw_chat_return){0};
            if (jscan_get(m, "content", &v))
                *ret = (struct gw_chat_return){.text = v.p, .text_len = v.len};
            r->n_chat++;
        }
    }
    for (size_t i = 0; i < r->n_chat; i++)
        if (calls.type == 'a' && ids[i].type)
            call_name(calls, ids[i], r->chat[i].tool);
}

/* ---- libra's object ------------------------------------------------------------------------- */

/* Whether v is a number written without fraction or exponent, of any size (an identity is
 * taken as written, not as its value). */
static bool integer_text(struct jscan_value v)
{
    for (size_t i = 0; v.type == 'n' && i < v.len; i++)
        if (v.p[i] == '.' || v.p[i] == 'e' || v.p[i] == 'E')
            return false;
    return v.type == 'n';
}

/* Refuses member key of libra's object lo unless it is a string, an integer or null. */
static int check_name(struct jscan_value lo, const char *key, char *err, size_t size)
{
    struct jscan_value v;
    if (jscan_get(lo, key, &v) && v.type != 'z' && v.type != 's' && !integer_text(v))
        return error_text(err, size, "libra.%s: expected a string or an integer", key);
    return 0;
}

static int read_libra(struct jscan_value lo, struct gw_request *r, char *err, size_t size)
{
    struct jscan_value v;
    if (lo.type != 'o')
        return error_text(err, size, "libra: expected an object");
    /* emu: an emulated engine's script, for the engine to read: libra's member goes on whole */
    if (jscan_get(lo, "emu", &v) && v.type != 'z') {
        if (v.type != 'o')
            return error_text(err, size, "libra.emu: expected an object");
        r->emu = true;
    }
    if (jscan_get(lo, "prompt", &v) && v.type != 'z') {
        int64_t id;
        struct text_sink key = {.h = GW_HASH_SEED, .max = SIZE_MAX};
        if (jscan_int(v, &id) && id >= 0)
            r->prompt = (uint64_t)id;
        else if (v.type == 's') /* libra_prompt_key of its text; a malformed one as written */
            r->prompt = (string_text(v, &key) ? key.h : gw_hash(GW_HASH_SEED, v.p + 1, v.len - 2)) &
                        GW_PROMPT_MASK;
        else
            return error_text(err, size, "libra.prompt: expected an integer >= 0 or a string");
        r->has_prompt = true;
    }
    if (check_name(lo, "trajectory", err, size) || check_name(lo, "sample", err, size))
        return -1;
    if (jscan_get(lo, "resume", &v) && v.type != 'z' && !jscan_bool(v, &r->resume))
        return error_text(err, size, "libra.resume: expected true or false");
    if (jscan_get(lo, "events", &v) && v.type != 'z')
        return parse_event_array(v, "libra.events", r->events, &r->n_events, err, size);
    return 0;
}

int gw_request_parse(enum gw_api api, const char *body, size_t len, gw_header_fn header,
                     void *header_ctx, const struct gw_parse_config *c, struct gw_request *out,
                     char *err, size_t err_size)
{
    memset(out, 0, offsetof(struct gw_request, events));
    out->api = api;
    if (check_body(body, len, err, err_size))
        return -1;
    static const char *const prompt_keys[] = {"input_ids", "token_ids", "prompt", "messages"};
    const char *keys[KEY_COUNT] = {
        [KEY_LIBRA] = "libra",
        [KEY_TRAJECTORY_ID] = "trajectory_id",
        [KEY_PROGRAM_ID] = "program_id",
        [KEY_RID] = "rid",
        [KEY_PROMPT] = prompt_keys[api],
        [KEY_TEXT] = "text",
        [KEY_SAMPLING_PARAMS] = "sampling_params",
        [KEY_MAX_TOKENS] = "max_tokens",
        [KEY_MAX_COMPLETION_TOKENS] = "max_completion_tokens",
        [KEY_STREAM] = "stream",
    };
    struct jscan_value root = jscan_root(body, len), m[KEY_COUNT], v;
    jscan_get_many(root, keys, KEY_COUNT, m);
    if (check_once(root, keys, KEY_COUNT, m, "", err, err_size))
        return -1;
    static const char *const libra_keys[] = {"trajectory", "prompt", "sample", "resume",
                                             "events",     "emu",    NULL};
    struct jscan_value lo = m[KEY_LIBRA];
    if (lo.type == 'o' && check_members(lo, libra_keys, "libra", err, err_size))
        return -1;
    if (lo.type && lo.type != 'z' && read_libra(lo, out, err, err_size))
        return -1;
    if (lo.type && !out->emu && (out->has_libra = jscan_cut_value(root, lo, &out->cut))) {
        size_t lead = (size_t)(root.p - body); /* whitespace before the object */
        out->cut.head_len += lead;
        out->cut.tail_off += lead;
    }
    if (find_identity(m, header, header_ctx, c, out, err, err_size) ||
        read_prompt(api, m, c, out, err, err_size) || read_budget(api, m, out, err, err_size))
        return -1;
    if (api == GW_CHAT && m[KEY_PROMPT].type == 'a')
        read_chat_returns(m[KEY_PROMPT], out);
    if ((v = m[KEY_STREAM]).type && v.type != 'z' && !jscan_bool(v, &out->stream))
        return error_text(err, err_size, "stream: expected true or false");
    return 0;
}

/* ---- resubmission ------------------------------------------------------------------------- */

/* One change to a body: bytes [off, off + len) become text. */
struct edit {
    size_t off, len;
    const char *text;
    size_t text_len;
};

static int cmp_edit(const void *a, const void *b)
{
    const struct edit *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* The edit *e of body (root its object) that lowers libra.emu.gen_tokens by n_more, to 1 at
 * least (the emulator's least); text holds the number. Returns 0 edits when it is not an
 * integer >= 1 (the engine judges it), else 1. */
static size_t emu_edit(const char *body, struct jscan_value root, int64_t n_more, char text[24],
                       struct edit *e)
{
    struct jscan_value v;
    int64_t n;
    if (!jscan_path(root, "libra.emu.gen_tokens", &v) || !jscan_int(v, &n) || n < 1)
        return 0;
    snprintf(text, 24, "%lld", (long long)(n - n_more > 1 ? n - n_more : 1));
    *e = (struct edit){(size_t)(v.p - body), v.len, text, strlen(text)};
    return 1;
}

bool gw_resume_fits(const char *body, size_t len, const struct gw_request *r)
{
    struct jscan_value root = jscan_root(body, len), in, budget;
    return r->api == GW_SGLANG_GENERATE && r->max_new_tokens >= 0 &&
           jscan_get(root, "input_ids", &in) && in.type == 'a' &&
           jscan_path(root, "sampling_params.max_new_tokens", &budget);
}

char *gw_resume_body(const char *body, size_t len, const struct gw_request *r, const char *ids,
                     size_t ids_len, int64_t n_more, size_t *out_len)
{
    if (!gw_resume_fits(body, len, r))
        return NULL;
    struct jscan_value root = jscan_root(body, len), in, budget;
    jscan_get(root, "input_ids", &in);
    jscan_path(root, "sampling_params.max_new_tokens", &budget);
    char number[24];
    int64_t left = r->max_new_tokens - n_more;
    snprintf(number, sizeof number, "%lld", (long long)(left > 0 ? left : 0));
    char *more = xmalloc(ids_len + 2); /* ",5, 6, 7": the ids after those sent */
    size_t more_len = 0;
    if (ids_len && jscan_count(in) > 0)
        more[more_len++] = ',';
    if (ids_len) /* a turn aborted before its first token has none (ids may be NULL) */
        memcpy(more + more_len, ids, ids_len);
    more_len += ids_len;
    size_t close = (size_t)(in.p - body) + in.len - 1; /* the array's ']' */
    struct edit e[3] = {
        {close, 0, more, more_len},
        {(size_t)(budget.p - body), budget.len, number, strlen(number)},
    };
    size_t n = 2;
    char script[24];
    if (r->has_libra)
        e[n++] = (struct edit){r->cut.head_len, r->cut.tail_off - r->cut.head_len, "", 0};
    else if (r->emu)
        n += emu_edit(body, root, n_more, script, &e[n]);
    qsort(e, n, sizeof *e, cmp_edit); /* the edits never overlap */
    char *out = xmalloc(len + more_len + 2 * sizeof number + 1);
    size_t at = 0, o = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + o, body + at, e[i].off - at);
        o += e[i].off - at;
        memcpy(out + o, e[i].text, e[i].text_len);
        o += e[i].text_len;
        at = e[i].off + e[i].len;
    }
    memcpy(out + o, body + at, len - at);
    *out_len = o + len - at;
    out[*out_len] = '\0';
    free(more);
    return out;
}
