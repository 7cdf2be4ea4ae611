/*
 * Parsing and checking trace records (trace.h, docs/trace-format.md).
 *
 * A line is parsed by jansson (strict: duplicate keys and bad UTF-8 rejected) and walked once
 * into a record whose arrays live in buffers the parser reuses, and whose strings point into
 * the jansson tree kept until the next line; so a file of any size is read in memory bounded
 * by its longest line. Known keys are fetched by hash lookup and counted; only when an object
 * holds more keys than were recognised is it scanned for the unknown one. Positions are
 * recovered from the line text (ujson_locate) only when an error is reported.
 */
#include "trace/trace.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/vec.h"

/* Why a turn before the last needs a call, whether its calls are missing or given empty. */
#define CALLS_NEEDED "every turn but the last ends in a tool call"

static const char *const status_names[TRACE_TOOL_STATUS_COUNT] = {"success", "failure", "timeout",
                                                                  "other"};
static const char *const finish_names[TRACE_FINISH_COUNT] = {"completed", "truncated", "aborted",
                                                             "filtered"};

const char *trace_tool_status_name(enum trace_tool_status s)
{
    return (unsigned)s < TRACE_TOOL_STATUS_COUNT ? status_names[s] : "invalid";
}

const char *trace_finish_name(enum trace_finish f)
{
    return (unsigned)f < TRACE_FINISH_COUNT ? finish_names[f] : "invalid";
}

/*
 * Where a fault is: a key of the record (turn < 0), of turn `turn` (call < 0) or of one of its
 * calls. key may be NULL for the object itself.
 */
struct where {
    long turn, call;
    const char *key;
};

/* Writes the JSON Pointer of w into buf (keys escaped: '~' as ~0, '/' as ~1). */
static void where_pointer(const struct where *w, char *buf, size_t size)
{
    size_t n = 0;
    if (w->turn >= 0)
        n += (size_t)snprintf(buf, size, "turns/%ld/", w->turn);
    if (w->call >= 0 && n < size)
        n += (size_t)snprintf(buf + n, size - n, "calls/%ld/", w->call);
    for (const char *k = w->key ? w->key : ""; *k && n + 3 < size; k++) {
        if (*k == '~' || *k == '/') {
            buf[n++] = '~';
            buf[n++] = *k == '~' ? '0' : '1';
        } else {
            buf[n++] = *k;
        }
    }
    if (n && buf[n - 1] == '/')
        n--;
    buf[n < size ? n : size - 1] = '\0';
}

/* Writes the dotted field name of w ("turns.2.calls.0.status") into buf. */
static void where_dotted(const struct where *w, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    if (w->turn >= 0)
        n += (size_t)snprintf(buf, size, "turns.%ld", w->turn);
    if (w->call >= 0 && n < size)
        n += (size_t)snprintf(buf + n, size - n, ".calls.%ld", w->call);
    if (w->key && n < size)
        snprintf(buf + n, size - n, "%s%s", n ? "." : "", w->key);
}

/* ---- semantic rules ---------------------------------------------------------------------- */

struct fault {
    struct where at;
    char msg[256];
};

static int fault(struct fault *f, long turn, long call, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int fault(struct fault *f, long turn, long call, const char *key, const char *fmt, ...)
{
    f->at = (struct where){turn, call, key};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    return LIBRA_EINVAL;
}

/* A count that must be >= 0, or >= -1 when -1 means unknown. */
static int check_count(struct fault *f, long turn, long call, const char *key, int64_t v,
                       bool unknown_ok)
{
    if (v >= 0 || (unknown_ok && v == -1))
        return 0;
    return fault(f, turn, call, key, "must be >= 0, got %lld", (long long)v);
}

/* A trajectory's running totals, each kept within its bound (trace.h). */
struct totals {
    int64_t prompt, generated, payload, tool_us;
};

/* Adds v (a count checked by check_count; -1, unknown, adds nothing) to *sum, the trajectory's
 * total of `what`, unless the sum would pass max. */
static int check_sum(struct fault *f, long turn, long call, const char *key, int64_t v,
                     int64_t *sum, int64_t max, const char *what)
{
    if (v > 0 && v > max - *sum)
        return fault(f, turn, call, key, "%lld brings the trajectory's %s past %lld", (long long)v,
                     what, (long long)max);
    *sum += v > 0 ? v : 0;
    return 0;
}

static int check_call(struct fault *f, long ti, long ci, const struct trace_tool_call *c,
                      struct totals *sum)
{
    if (!c->tool || !*c->tool)
        return fault(f, ti, ci, "tool", "must be a non-empty string");
    if ((unsigned)c->status >= TRACE_TOOL_STATUS_COUNT)
        return fault(f, ti, ci, "status", "invalid status %d", (int)c->status);
    int rc = check_count(f, ti, ci, "payload_tokens", c->payload_tokens, false);
    if (!rc)
        rc = check_count(f, ti, ci, "queue_us", c->queue_us, true);
    if (!rc)
        rc = check_count(f, ti, ci, "exec_us", c->exec_us, true);
    if (!rc)
        rc = check_sum(f, ti, ci, "payload_tokens", c->payload_tokens, &sum->payload,
                       TRACE_MAX_TOKENS, "tool tokens");
    if (!rc)
        rc = check_sum(f, ti, ci, "queue_us", c->queue_us, &sum->tool_us, TRACE_MAX_TOOL_US,
                       "off-GPU microseconds");
    if (!rc)
        rc = check_sum(f, ti, ci, "exec_us", c->exec_us, &sum->tool_us, TRACE_MAX_TOOL_US,
                       "off-GPU microseconds");
    return rc;
}

/* A recorded timing: an engine, a TP size, and sent <= first (when streamed) <= done. */
static int check_timing(struct fault *f, long ti, const struct trace_turn_timing *m)
{
    if (m->tp == 0)
        return 0;
    if (m->tp < 1 || m->tp > TRACE_MAX_TP)
        return fault(f, ti, -1, "tp", "must be 1 to %d, got %lld", TRACE_MAX_TP, (long long)m->tp);
    int rc = check_count(f, ti, -1, "instance", m->instance, false);
    if (!rc)
        rc = check_count(f, ti, -1, "sent_us", m->sent_us, false);
    if (!rc)
        rc = check_count(f, ti, -1, "first_us", m->first_us, true);
    if (rc)
        return rc;
    if (m->first_us >= 0 && m->first_us < m->sent_us)
        return fault(f, ti, -1, "first_us", "%lld is before sent_us %lld", (long long)m->first_us,
                     (long long)m->sent_us);
    int64_t after = m->first_us >= 0 ? m->first_us : m->sent_us;
    if (m->done_us < after)
        return fault(f, ti, -1, "done_us", "%lld is before %s %lld", (long long)m->done_us,
                     m->first_us >= 0 ? "first_us" : "sent_us", (long long)after);
    return 0;
}

bool trace_timing_ok(const struct trace_turn_timing *m)
{
    struct fault f;
    return m->tp > 0 && check_timing(&f, 0, m) == 0;
}

static int check_turn(struct fault *f, const struct trace_traj *t, long ti, struct totals *sum)
{
    const struct trace_turn *u = &t->turns[ti];
    int rc = check_count(f, ti, -1, "prompt_tokens", u->prompt_tokens, false);
    if (!rc)
        rc = check_count(f, ti, -1, "cached_tokens", u->cached_tokens, true);
    if (!rc)
        rc = check_count(f, ti, -1, "generated_tokens", u->generated_tokens, false);
    if (!rc)
        rc = check_sum(f, ti, -1, "prompt_tokens", u->prompt_tokens, &sum->prompt, TRACE_MAX_TOKENS,
                       "prompt tokens");
    if (!rc)
        rc = check_sum(f, ti, -1, "generated_tokens", u->generated_tokens, &sum->generated,
                       TRACE_MAX_TOKENS, "generated tokens");
    if (!rc)
        rc = check_timing(f, ti, &u->timing);
    if (rc)
        return rc;
    if (u->cached_tokens > u->prompt_tokens)
        return fault(f, ti, -1, "cached_tokens", "%lld exceeds prompt_tokens %lld",
                     (long long)u->cached_tokens, (long long)u->prompt_tokens);
    bool last = (size_t)ti + 1 == t->n_turns;
    if (!last && u->n_calls == 0)
        return fault(f, ti, -1, "calls", "missing: " CALLS_NEEDED);
    if (last && u->n_calls > 0 && t->finish != TRACE_FINISH_TRUNCATED &&
        t->finish != TRACE_FINISH_ABORTED)
        return fault(f, ti, -1, "calls",
                     "the last turn of a %s trajectory makes no tool call (only a truncated or "
                     "aborted one may end after a call)",
                     trace_finish_name(t->finish));
    for (size_t ci = 0; ci < u->n_calls; ci++)
        if ((rc = check_call(f, ti, (long)ci, &u->calls[ci], sum)))
            return rc;
    return 0;
}

static int check_traj(const struct trace_traj *t, int64_t group_size, struct fault *f)
{
    const struct {
        const char *key;
        int64_t v;
        bool unknown_ok;
    } counts[] = {{"step", t->step, false},
                  {"prompt_id", t->prompt_id, false},
                  {"epoch", t->epoch, false},
                  {"sample", t->sample, false},
                  {"version_start", t->version_start, false},
                  {"version_end", t->version_end, true}};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        if (check_count(f, -1, -1, counts[i].key, counts[i].v, counts[i].unknown_ok))
            return LIBRA_EINVAL;
    if (group_size > 0 && t->sample >= group_size)
        return fault(f, -1, -1, "sample", "%lld is not below the header's group_size %lld",
                     (long long)t->sample, (long long)group_size);
    if (t->version_end >= 0 && t->version_end < t->version_start)
        return fault(f, -1, -1, "version_end", "%lld is before version_start %lld",
                     (long long)t->version_end, (long long)t->version_start);
    if (t->has_start && t->start_us < 0)
        return fault(f, -1, -1, "start_us", "must be >= 0, got %lld", (long long)t->start_us);
    if ((unsigned)t->finish >= TRACE_FINISH_COUNT)
        return fault(f, -1, -1, "finish", "invalid finish %d", (int)t->finish);
    if (t->has_reward && !isfinite(t->reward))
        return fault(f, -1, -1, "reward", "must be finite");
    if (t->n_turns == 0)
        return fault(f, -1, -1, "turns", "must hold at least one turn");
    struct totals sum = {0};
    if (check_count(f, -1, -1, "setup_us", t->setup_us, false) ||
        check_sum(f, -1, -1, "setup_us", t->setup_us, &sum.tool_us, TRACE_MAX_TOOL_US,
                  "off-GPU microseconds"))
        return LIBRA_EINVAL;
    for (size_t ti = 0; ti < t->n_turns; ti++)
        if (check_turn(f, t, (long)ti, &sum))
            return LIBRA_EINVAL;
    return 0;
}

int trace_check_traj(const struct trace_traj *t, int64_t group_size, struct libra_error *err)
{
    struct fault f;
    if (!check_traj(t, group_size, &f))
        return 0;
    char field[128];
    where_dotted(&f.at, field, sizeof field);
    return error_set(err, NULL, 0, 0, "%s: %s", field, f.msg);
}

/* ---- the parser -------------------------------------------------------------------------- */

struct trace_parser {
    char *name;
    /* the line being parsed, for error positions */
    const char *line;
    size_t len;
    int64_t lineno;
    /* the last record and the storage it points into */
    json_t *root;
    struct trace_traj traj;
    VEC(struct trace_turn) turns;
    VEC(struct trace_tool_call) calls;
    /* the header, its strings pointing into header_root */
    json_t *header_root;
    struct trace_header header;
    int64_t group_size; /* from the header; 0 until one was parsed */
};

struct trace_parser *trace_parser_new(const char *name)
{
    struct trace_parser *p = xcalloc(1, sizeof *p);
    p->name = xstrdup(name ? name : "");
    return p;
}

void trace_parser_free(struct trace_parser *p)
{
    if (!p)
        return;
    json_decref(p->root);
    json_decref(p->header_root);
    vec_free(&p->turns);
    vec_free(&p->calls);
    free(p->name);
    free(p);
}

/* Reports a fault at w in the current line: name:line:col (col of w, else of its nearest
 * enclosing object) and "FIELD: MSG". */
int trace_line_col(const char *line, size_t len, const char *ptr)
{
    struct ujson_doc doc = {.text = (char *)line, .len = len};
    char path[256];
    int l = 0, col = 1;
    snprintf(path, sizeof path, "%s", ptr);
    while (ujson_locate(&doc, path, &l, &col) != 0 && *path) {
        char *slash = strrchr(path, '/');
        *(slash ? slash : path) = '\0';
    }
    return col;
}

int trace_char_col(const char *line, size_t off)
{
    int col = 1;
    for (size_t i = 0; i < off; i++)
        col += ((unsigned char)line[i] & 0xC0) != 0x80;
    return col;
}

int trace_line_nul(const char *name, int64_t lineno, const char *line, size_t len,
                   struct libra_error *err)
{
    const char *nul = memchr(line, '\0', len);
    if (!nul)
        return 0;
    return error_set(err, name, (int)lineno, trace_char_col(line, (size_t)(nul - line)),
                     "a NUL byte: a line of text holds none (a binary or zero-filled line)");
}

static int report(const struct trace_parser *p, const struct where *w, const char *msg,
                  struct libra_error *err)
{
    char ptr[256], field[256];
    where_pointer(w, ptr, sizeof ptr);
    int col = trace_line_col(p->line, p->len, ptr);
    where_dotted(w, field, sizeof field);
    if (*field)
        return error_set(err, p->name, (int)p->lineno, col, "%s: %s", field, msg);
    return error_set(err, p->name, (int)p->lineno, col, "%s", msg);
}

static int failf(const struct trace_parser *p, struct libra_error *err, long turn, long call,
                 const char *key, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int failf(const struct trace_parser *p, struct libra_error *err, long turn, long call,
                 const char *key, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct where w = {turn, call, key};
    return report(p, &w, msg, err);
}

/* One object being read: which keys were recognised, to find an unknown one afterwards. */
struct obj {
    const json_t *o;
    long turn, call;
    size_t known; /* keys of o that were looked up and present */
};

static json_t *member(struct obj *ob, const char *key)
{
    json_t *v = json_object_get(ob->o, key);
    ob->known += v != NULL;
    return v;
}

static int missing(const struct trace_parser *p, const struct obj *ob, const char *key,
                   struct libra_error *err)
{
    return failf(p, err, ob->turn, ob->call, key, "missing");
}

static int wrong_type(const struct trace_parser *p, const struct obj *ob, const char *key,
                      const char *want, const json_t *v, struct libra_error *err)
{
    return failf(p, err, ob->turn, ob->call, key, "expected %s, got %s", want, ujson_type_name(v));
}

/*
 * Reads an integer member into *out. An absent optional member yields -1 (unknown); a present
 * optional one must be >= 0, so that -1 never appears in a file and writing back is exact.
 */
static int get_int(const struct trace_parser *p, struct obj *ob, const char *key, bool required,
                   int64_t *out, struct libra_error *err)
{
    const json_t *v = member(ob, key);
    if (!v) {
        *out = -1;
        return required ? missing(p, ob, key, err) : 0;
    }
    if (!ujson_as_int64(v, out) && json_is_real(v) && fabs(json_real_value(v)) >= 9.0e15)
        return failf(p, err, ob->turn, ob->call, key,
                     "expected an integer, got %g: a number with a decimal point or an "
                     "exponent is read as one only below 9e15",
                     json_real_value(v));
    if (!ujson_as_int64(v, out))
        return wrong_type(p, ob, key, "an integer", v, err);
    if (!required && *out < 0)
        return failf(p, err, ob->turn, ob->call, key, "must be >= 0, got %lld", (long long)*out);
    return 0;
}

/* Refuses an optional integer member given below 1 (tp, group_size), which get_int would call
 * "must be >= 0" when negative. */
static int check_positive(const struct trace_parser *p, const struct obj *ob, const char *key,
                          struct libra_error *err)
{
    int64_t v;
    const json_t *m = json_object_get(ob->o, key);
    if (m && ujson_as_int64(m, &v) && v < 1)
        return failf(p, err, ob->turn, ob->call, key, "must be >= 1, got %lld", (long long)v);
    return 0;
}

/* Reads a required string member. */
static int get_str(const struct trace_parser *p, struct obj *ob, const char *key, const char **out,
                   struct libra_error *err)
{
    const json_t *v = member(ob, key);
    if (json_is_string(v)) {
        *out = json_string_value(v);
        return 0;
    }
    if (!v)
        missing(p, ob, key, err);
    else
        wrong_type(p, ob, key, "a string", v, err);
    return LIBRA_EINVAL;
}

/* Reads an optional member that must be an object (kept by reference) into *out. */
static int get_obj(const struct trace_parser *p, struct obj *ob, const char *key, json_t **out,
                   struct libra_error *err)
{
    json_t *v = member(ob, key);
    *out = v;
    if (v && !json_is_object(v))
        return wrong_type(p, ob, key, "an object", v, err);
    return 0;
}

/* Maps a required string member onto one of n names. */
static int get_enum(const struct trace_parser *p, struct obj *ob, const char *key,
                    const char *const *names, int n, int *out, struct libra_error *err)
{
    const char *s;
    int rc = get_str(p, ob, key, &s, err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char list[128];
    size_t used = 0;
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    return failf(p, err, ob->turn, ob->call, key, "unknown value '%s' (expected %s)", s, list);
}

static bool is_known(const char *key, const char *const *known)
{
    for (; *known; known++)
        if (strcmp(key, *known) == 0)
            return true;
    return false;
}

/*
 * Fails when ob holds a key outside known (NULL-terminated). Of several unknown keys the
 * smallest in byte order is named, so the message does not depend on jansson's iteration.
 */
static int check_unknown(const struct trace_parser *p, const struct obj *ob,
                         const char *const *known, struct libra_error *err)
{
    if (json_object_size(ob->o) == ob->known)
        return 0;
    const char *key, *worst = NULL;
    json_t *v;
    json_object_foreach((json_t *)ob->o, key, v)
    {
        if (!is_known(key, known) && (!worst || strcmp(key, worst) < 0))
            worst = key;
    }
    return failf(p, err, ob->turn, ob->call, worst, "unknown key");
}

static const char *const call_keys[] = {"tool",     "status",  "payload_tokens",
                                        "queue_us", "exec_us", NULL};
static const char *const turn_keys[] = {
    "prompt_tokens", "cached_tokens", "generated_tokens", "calls", "instance", "tp",
    "sent_us",       "first_us",      "done_us",          NULL};
static const char *const traj_keys[] = {
    "step",     "prompt_id", "epoch",  "sample", "version_start", "version_end", "start_us",
    "setup_us", "finish",    "reward", "turns",  "extra",         NULL};
static const char *const header_keys[] = {"libra_trace", "workload", "model", "group_size", "lossy",
                                          "generator",   "import",   "extra", NULL};

static int parse_call(struct trace_parser *p, const json_t *v, long ti, long ci,
                      struct trace_tool_call *c, struct libra_error *err)
{
    if (!json_is_object(v))
        return failf(p, err, ti, ci, NULL, "expected an object, got %s", ujson_type_name(v));
    struct obj ob = {v, ti, ci, 0};
    const char *tool = NULL;
    int status = 0;
    int rc = get_str(p, &ob, "tool", &tool, err);
    if (!rc)
        rc = get_enum(p, &ob, "status", status_names, TRACE_TOOL_STATUS_COUNT, &status, err);
    if (!rc)
        rc = get_int(p, &ob, "payload_tokens", true, &c->payload_tokens, err);
    if (!rc)
        rc = get_int(p, &ob, "queue_us", false, &c->queue_us, err);
    if (!rc)
        rc = get_int(p, &ob, "exec_us", false, &c->exec_us, err);
    if (!rc)
        rc = check_unknown(p, &ob, call_keys, err);
    c->tool = (char *)tool;
    c->status = (enum trace_tool_status)status;
    return rc;
}

/* Reads a turn's timing: instance, tp, sent_us and done_us all given, and first_us when the
 * answer streamed; or none of them. */
static int parse_timing(struct trace_parser *p, struct obj *ob, struct trace_turn_timing *m,
                        struct libra_error *err)
{
    static const char *const needed[] = {"instance", "tp", "sent_us", "done_us"};
    int64_t v[4];
    const char *absent = NULL;
    bool given = false;
    for (int i = 0; i < 4; i++) {
        int rc = i == 1 ? check_positive(p, ob, "tp", err) : 0;
        if (rc || (rc = get_int(p, ob, needed[i], false, &v[i], err)))
            return rc;
        given |= v[i] >= 0;
        if (v[i] < 0 && !absent)
            absent = needed[i];
    }
    int rc = get_int(p, ob, "first_us", false, &m->first_us, err);
    if (rc || (!given && m->first_us < 0)) {
        *m = (struct trace_turn_timing){0};
        return rc;
    }
    if (absent)
        return failf(p, err, ob->turn, -1, absent,
                     "missing: a turn's timing is instance, tp, sent_us and done_us together");
    *m = (struct trace_turn_timing){
        .instance = v[0], .tp = v[1], .sent_us = v[2], .first_us = m->first_us, .done_us = v[3]};
    return 0;
}

/* Parses turn ti (last: the trajectory's last); its calls are appended to p->calls and linked
 * by trace_parser_traj. */
static int parse_turn(struct trace_parser *p, const json_t *v, long ti, bool last,
                      struct trace_turn *u, struct libra_error *err)
{
    if (!json_is_object(v))
        return failf(p, err, ti, -1, NULL, "expected an object, got %s", ujson_type_name(v));
    struct obj ob = {v, ti, -1, 0};
    int rc = get_int(p, &ob, "prompt_tokens", true, &u->prompt_tokens, err);
    if (!rc)
        rc = get_int(p, &ob, "cached_tokens", false, &u->cached_tokens, err);
    if (!rc)
        rc = get_int(p, &ob, "generated_tokens", true, &u->generated_tokens, err);
    if (!rc)
        rc = parse_timing(p, &ob, &u->timing, err);
    if (rc)
        return rc;
    const json_t *calls = member(&ob, "calls");
    u->calls = NULL;
    u->n_calls = 0;
    if (calls && !json_is_array(calls))
        return wrong_type(p, &ob, "calls", "an array", calls, err);
    if (calls && json_array_size(calls) == 0 && !last) /* given, unlike the checker's "missing" */
        return failf(p, err, ti, -1, "calls", "empty: " CALLS_NEEDED);
    for (size_t ci = 0; ci < json_array_size(calls); ci++) {
        vec_reserve(&p->calls, p->calls.n + 1);
        struct trace_tool_call *c = &p->calls.v[p->calls.n];
        if ((rc = parse_call(p, json_array_get(calls, ci), ti, (long)ci, c, err)))
            return rc;
        p->calls.n++;
        u->n_calls++;
    }
    return check_unknown(p, &ob, turn_keys, err);
}

static int parse_turns(struct trace_parser *p, struct obj *ob, struct libra_error *err)
{
    const json_t *turns = member(ob, "turns");
    if (!turns)
        return missing(p, ob, "turns", err);
    if (!json_is_array(turns))
        return wrong_type(p, ob, "turns", "an array", turns, err);
    size_t n = json_array_size(turns);
    p->turns.n = p->calls.n = 0;
    vec_reserve(&p->turns, n);
    for (size_t ti = 0; ti < n; ti++) {
        int rc =
            parse_turn(p, json_array_get(turns, ti), (long)ti, ti + 1 == n, &p->turns.v[ti], err);
        if (rc)
            return rc;
    }
    /* calls were appended turn by turn; link each turn to its run now that they stay put */
    size_t next = 0;
    for (size_t ti = 0; ti < n; ti++) {
        p->turns.v[ti].calls = p->turns.v[ti].n_calls ? p->calls.v + next : NULL;
        next += p->turns.v[ti].n_calls;
    }
    p->turns.n = n;
    p->traj.turns = n ? p->turns.v : NULL;
    p->traj.n_turns = n;
    return 0;
}

/* Parses the line as one JSON object into *root (replacing the previous tree). */
static int load_line(struct trace_parser *p, json_t **root, const char *line, size_t len,
                     int64_t lineno, struct libra_error *err)
{
    p->line = line;
    p->len = len;
    p->lineno = lineno;
    json_decref(*root);
    *root = NULL;
    int rc = trace_line_nul(p->name, lineno, line, len, err);
    if (rc)
        return rc;
    size_t blank = 0;
    while (blank < len && strchr(" \t\r", line[blank])) /* no NUL here: strchr would match it */
        blank++;
    if (blank == len)
        return error_set(err, p->name, (int)lineno, 1, "empty line");
    json_error_t jerr;
    json_t *v = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v) {
        int at_line, col; /* a record is one line */
        ujson_error_at(line, len, &jerr, &at_line, &col);
        return error_set(err, p->name, (int)lineno, col, "invalid JSON: %s",
                         ujson_error_text(&jerr));
    }
    *root = v;
    return 0;
}

static int parse_traj_fields(struct trace_parser *p, struct obj *ob, struct libra_error *err)
{
    struct trace_traj *t = &p->traj;
    int finish = 0;
    const json_t *reward;
    int rc = get_int(p, ob, "step", true, &t->step, err);
    if (!rc)
        rc = get_int(p, ob, "prompt_id", true, &t->prompt_id, err);
    if (!rc)
        rc = get_int(p, ob, "epoch", true, &t->epoch, err);
    if (!rc)
        rc = get_int(p, ob, "sample", true, &t->sample, err);
    if (!rc)
        rc = get_int(p, ob, "version_start", true, &t->version_start, err);
    if (!rc)
        rc = get_int(p, ob, "version_end", false, &t->version_end, err);
    if (!rc)
        rc = get_int(p, ob, "start_us", false, &t->start_us, err);
    t->has_start = t->start_us >= 0;
    if (!rc)
        rc = get_int(p, ob, "setup_us", false, &t->setup_us, err);
    if (t->setup_us < 0) /* absent: none */
        t->setup_us = 0;
    if (!rc)
        rc = get_enum(p, ob, "finish", finish_names, TRACE_FINISH_COUNT, &finish, err);
    if (rc)
        return rc;
    t->finish = (enum trace_finish)finish;
    reward = member(ob, "reward");
    t->has_reward = reward != NULL;
    if (reward && !ujson_as_double(reward, &t->reward))
        return wrong_type(p, ob, "reward", "a number", reward, err);
    if ((rc = get_obj(p, ob, "extra", &t->extra, err)))
        return rc;
    return parse_turns(p, ob, err);
}

int trace_parser_traj(struct trace_parser *p, const char *line, size_t len, int64_t lineno,
                      const struct trace_traj **out, struct libra_error *err)
{
    int rc = load_line(p, &p->root, line, len, lineno, err);
    if (rc)
        return rc;
    if (!json_is_object(p->root))
        return failf(p, err, -1, -1, NULL, "expected a trajectory object, got %s",
                     ujson_type_name(p->root));
    memset(&p->traj, 0, sizeof p->traj);
    struct obj ob = {p->root, -1, -1, 0};
    if (json_object_get(p->root, "libra_trace"))
        return failf(p, err, -1, -1, "libra_trace",
                     "a header is allowed only on line 1 (concatenated traces?)");
    if ((rc = parse_traj_fields(p, &ob, err)) || (rc = check_unknown(p, &ob, traj_keys, err)))
        return rc;
    struct fault f;
    if (check_traj(&p->traj, p->group_size, &f))
        return report(p, &f.at, f.msg, err);
    *out = &p->traj;
    return 0;
}

/* ---- the header -------------------------------------------------------------------------- */

/* The header's names are printed as they stand (`libra trace stats`), where a control byte
 * would drive the terminal; a tool name is the model's own output and may hold anything
 * (written escaped). */
bool trace_name_has_control(const char *name)
{
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return true;
    return false;
}

static int parse_header_fields(struct trace_parser *p, struct obj *ob, struct trace_header *h,
                               struct libra_error *err)
{
    const json_t *model, *lossy;
    const char *workload;
    if (!json_object_get(ob->o, "libra_trace"))
        return failf(p, err, -1, -1, "libra_trace",
                     "missing: line 1 must be the trace header {\"libra_trace\": %d, ...}",
                     TRACE_SCHEMA_VERSION);
    int rc = get_int(p, ob, "libra_trace", true, &h->version, err);
    if (rc)
        return rc;
    if (h->version != TRACE_SCHEMA_VERSION)
        return failf(p, err, -1, -1, "libra_trace",
                     "unsupported schema version %lld (this libra reads %d)", (long long)h->version,
                     TRACE_SCHEMA_VERSION);
    if ((rc = get_str(p, ob, "workload", &workload, err)))
        return rc;
    if (!*workload)
        return failf(p, err, -1, -1, "workload", "must be a non-empty string");
    if (trace_name_has_control(workload))
        return failf(p, err, -1, -1, "workload", TRACE_NO_CONTROL);
    h->workload = (char *)workload;
    if ((model = member(ob, "model")) && !json_is_string(model))
        return wrong_type(p, ob, "model", "a string", model, err);
    h->model = model ? (char *)json_string_value(model) : NULL;
    if (h->model && trace_name_has_control(h->model))
        return failf(p, err, -1, -1, "model", TRACE_NO_CONTROL);
    if ((rc = check_positive(p, ob, "group_size", err)) ||
        (rc = get_int(p, ob, "group_size", false, &h->group_size, err)))
        return rc;
    h->group_size = h->group_size < 0 ? 0 : h->group_size;
    if ((lossy = member(ob, "lossy")) && !json_is_boolean(lossy))
        return wrong_type(p, ob, "lossy", "a boolean", lossy, err);
    h->lossy = json_is_true(lossy);
    if ((rc = get_obj(p, ob, "generator", &h->generator, err)) ||
        (rc = get_obj(p, ob, "import", &h->import, err)) ||
        (rc = get_obj(p, ob, "extra", &h->extra, err)))
        return rc;
    return check_unknown(p, ob, header_keys, err);
}

int trace_parser_header(struct trace_parser *p, const char *line, size_t len, int64_t lineno,
                        const struct trace_header **out, struct libra_error *err)
{
    p->group_size = 0;
    memset(&p->header, 0, sizeof p->header);
    int rc = load_line(p, &p->header_root, line, len, lineno, err);
    if (rc)
        return rc;
    if (!json_is_object(p->header_root))
        return failf(p, err, -1, -1, NULL, "expected the trace header object, got %s",
                     ujson_type_name(p->header_root));
    struct obj ob = {p->header_root, -1, -1, 0};
    if ((rc = parse_header_fields(p, &ob, &p->header, err)))
        return rc;
    p->group_size = p->header.group_size;
    *out = &p->header;
    return 0;
}

int trace_check_header(const struct trace_header *h, struct libra_error *err)
{
    if (h->version != TRACE_SCHEMA_VERSION)
        return error_set(err, NULL, 0, 0, "libra_trace: unsupported schema version %lld",
                         (long long)h->version);
    if (!h->workload || !*h->workload)
        return error_set(err, NULL, 0, 0, "workload: must be a non-empty string");
    if (trace_name_has_control(h->workload) || (h->model && trace_name_has_control(h->model)))
        return error_set(err, NULL, 0, 0, "%s: " TRACE_NO_CONTROL,
                         trace_name_has_control(h->workload) ? "workload" : "model");
    if (h->group_size < 0)
        return error_set(err, NULL, 0, 0, "group_size: must be >= 0, got %lld",
                         (long long)h->group_size);
    const json_t *objs[] = {h->generator, h->import, h->extra};
    const char *names[] = {"generator", "import", "extra"};
    for (int i = 0; i < 3; i++)
        if (objs[i] && !json_is_object(objs[i]))
            return error_set(err, NULL, 0, 0, "%s: expected an object", names[i]);
    return 0;
}
