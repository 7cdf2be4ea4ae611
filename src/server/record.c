/*
 * The persisted rows' text (record.h): JSON through jansson both ways. A tool return is an
 * array [tool, payload_tokens, size, status, status_from, exec_us] and a turn an array too,
 * so a trajectory of fifty turns stays a few kilobytes and a replay of ten thousand of them
 * parses in well under a second (docs/serve.md "Durable state").
 */
#include "server/record.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"
#include "util/alloc.h"
#include "util/json.h"

struct trace_tool_call gw_call_from(const struct sched_obs *o, int64_t exec_us)
{
    static const enum trace_tool_status status[] = {TRACE_TOOL_SUCCESS, TRACE_TOOL_FAILURE,
                                                    TRACE_TOOL_TIMEOUT, TRACE_TOOL_OTHER};
    return (struct trace_tool_call){
        .tool = xstrdup(o->tool),
        .status = status[o->status],
        .payload_tokens = o->payload_tokens > 0 ? o->payload_tokens : 0,
        .queue_us = -1,
        .exec_us = exec_us,
    };
}

json_t *gw_bytes_json(const char *s)
{
    json_t *v = json_string(s);
    if (v)
        return v;
    v = json_array();
    for (; *s; s++)
        json_array_append_new(v, json_integer((unsigned char)*s));
    return v;
}

/* ---- writing -------------------------------------------------------------------------------- */

static json_t *return_json(const struct sched_obs *o, int64_t exec_us)
{
    return json_pack("[o, I, s, s, s, I]", gw_bytes_json(o->tool), (json_int_t)o->payload_tokens,
                     sched_size_name(o->size), sched_status_name(o->status),
                     sched_status_from_name(o->status_from), (json_int_t)exec_us);
}

static char *dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *gw_learn_rec_text(const struct gw_learn_rec *r)
{
    json_t *turns = json_array();
    for (size_t k = 0; k < r->n_turns; k++) {
        const struct gw_rec_turn *tu = &r->turns[k];
        json_t *ret = json_array();
        for (size_t i = tu->first; i < tu->first + tu->n; i++)
            json_array_append_new(ret, return_json(&r->obs[i], r->exec_us[i]));
        json_array_append_new(turns, json_pack("[I, I, o]", (json_int_t)tu->generated_tokens,
                                               (json_int_t)tu->context_tokens, ret));
    }
    return dump(json_pack("{s:o, s:I, s:I, s:b, s:s, s:o}", "id", gw_bytes_json(r->id), "step",
                          (json_int_t)r->step, "prompt", (json_int_t)r->prompt, "censored",
                          r->censored, "finish", trace_finish_name(r->finish), "turns", turns));
}

char *gw_step_rec_text(const struct gw_step_rec *s)
{
    return dump(json_pack("{s:I, s:I, s:o}", "step", (json_int_t)s->step, "learnt",
                          (json_int_t)s->learnt, "deadline_s", ujson_real(s->deadline_s)));
}

/* Appends the returns obs[from, from + n) with their calls' execution times to a. */
static void returns_json(json_t *a, const struct sched_obs *obs, size_t from,
                         const struct trace_tool_call *calls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, return_json(&obs[from + i], calls[i].exec_us));
}

char *gw_traj_rec_text(const struct gw_traj *t)
{
    /* Observations are the turns' calls in order, then the pending ones. The last completed
     * turn's calls, when it has any, were taken by a turn in flight or failed: the first
     * `announced` came from the events call and stay pending; the rest come again with the
     * turn. */
    size_t n = t->turns.n, pos = 0, tail = t->obs.n - t->pending.n;
    json_t *turns = json_array(), *pending = json_array();
    for (size_t k = 0; k < n; k++) {
        const struct trace_turn *tu = &t->turns.v[k];
        size_t calls = pos + tu->n_calls <= tail ? tu->n_calls : 0;
        json_t *ret = json_array();
        if (k + 1 < n)
            returns_json(ret, t->obs.v, pos, tu->calls, calls);
        else
            returns_json(pending, t->obs.v, pos, tu->calls,
                         t->announced < calls ? t->announced : calls);
        pos += calls;
        json_t *row =
            json_pack("[I, I, I, o]", (json_int_t)tu->prompt_tokens, (json_int_t)tu->cached_tokens,
                      (json_int_t)tu->generated_tokens, ret);
        const struct trace_turn_timing *m = &tu->timing;
        if (m->tp > 0)
            json_array_append_new(row, json_pack("[I, I, I, I, I]", (json_int_t)m->instance,
                                                 (json_int_t)m->tp, (json_int_t)m->sent_us,
                                                 (json_int_t)m->first_us, (json_int_t)m->done_us));
        json_array_append_new(turns, row);
    }
    returns_json(pending, t->obs.v, tail, t->pending.v, t->pending.n);
    return dump(json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:o}", "id", gw_bytes_json(t->id),
                          "prompt", (json_int_t)t->prompt, "start_tokens",
                          (json_int_t)t->start_tokens, "generation", (json_int_t)t->generation,
                          "version_start", (json_int_t)t->version_start, "instance",
                          (json_int_t)t->instance, "turns", turns, "pending", pending));
}

/* ---- the learnt trajectory as learning reads it --------------------------------------------- */

static void push_return(struct gw_learn_rec *r, size_t *cap, const struct sched_obs *o,
                        int64_t exec_us)
{
    if (r->n_ret == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        r->obs = xreallocarray(r->obs, *cap, sizeof *r->obs);
        r->exec_us = xreallocarray(r->exec_us, *cap, sizeof *r->exec_us);
    }
    r->obs[r->n_ret] = *o;
    r->exec_us[r->n_ret++] = exec_us;
}

void gw_learn_rec_from(struct gw_learn_rec *out, const struct gw_traj *t, int64_t step,
                       bool censored, enum trace_finish finish)
{
    *out = (struct gw_learn_rec){.step = step,
                                 .prompt = t->prompt,
                                 .censored = censored,
                                 .finish = finish,
                                 .n_turns = t->turns.n};
    snprintf(out->id, sizeof out->id, "%s", t->id);
    out->turns = xcalloc(t->turns.n ? t->turns.n : 1, sizeof *out->turns);
    size_t cap = 0;
    for (size_t k = 0; k < t->turns.n; k++) {
        const struct trace_turn *tu = &t->turns.v[k];
        const struct sched_obs *obs = NULL;
        bool cut = k + 1 == t->turns.n; /* returns after the last turn: the tail of t->obs */
        if (tu->n_calls && !cut && k < t->returns_at.n)
            obs = t->obs.v + t->returns_at.v[k];
        else if (tu->n_calls && cut && tu->n_calls <= t->obs.n)
            obs = t->obs.v + t->obs.n - tu->n_calls;
        out->turns[k] = (struct gw_rec_turn){tu->generated_tokens, tu->prompt_tokens, out->n_ret,
                                             obs ? tu->n_calls : 0};
        for (size_t i = 0; obs && i < tu->n_calls; i++)
            push_return(out, &cap, &obs[i], tu->calls[i].exec_us);
    }
}

void gw_learn_rec_add(struct sched_eval_trace *ev, const struct gw_learn_rec *r)
{
    sched_eval_traj_add(ev, r->step, r->prompt, 0, 0, r->censored);
    for (size_t k = 0; k < r->n_turns; k++) {
        const struct gw_rec_turn *tu = &r->turns[k];
        bool returns = k + 1 < r->n_turns && tu->n; /* after the last turn they lead nowhere */
        sched_eval_turn_add(ev, tu->generated_tokens, tu->context_tokens,
                            returns ? r->obs + tu->first : NULL, returns ? tu->n : 0, 0.0);
    }
}

void gw_learn_rec_free(struct gw_learn_rec *r)
{
    free(r->turns);
    free(r->obs);
    free(r->exec_us);
    memset(r, 0, sizeof *r);
}

/* ---- reading -------------------------------------------------------------------------------- */

/* Says what is wrong where; returns -1. */
static int bad(char *err, size_t size, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int bad(char *err, size_t size, const char *path, const char *fmt, ...)
{
    int n = snprintf(err, size, "%s: ", path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < size)
        vsnprintf(err + n, size - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* An integer in [lo, hi]. */
static bool int_in(const json_t *v, int64_t lo, int64_t hi, int64_t *out)
{
    return json_is_integer(v) && (*out = json_integer_value(v)) >= lo && *out <= hi;
}

/* The index of name among n names, or -1. */
static int name_of(const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, name(i)) == 0)
            return i;
    return -1;
}

static const char *size_name(int i)
{
    return sched_size_name((enum sched_size)i);
}

static const char *status_name(int i)
{
    return sched_status_name((enum sched_status)i);
}

static const char *from_name(int i)
{
    return sched_status_from_name((enum sched_status_from)i);
}

static const char *finish_name(int i)
{
    return trace_finish_name((enum trace_finish)i);
}

/* A string written by gw_bytes_json into out (size bytes): at most size - 1 bytes, no NUL. */
static bool bytes_read(const json_t *v, char *out, size_t size)
{
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : json_array_size(v);
    if ((!s && !json_is_array(v)) || n >= size)
        return false;
    for (size_t i = 0; i < n; i++) {
        int64_t b = 1;
        if (!s && !int_in(json_array_get(v, i), 1, 255, &b))
            return false;
        out[i] = s ? s[i] : (char)b;
        if (!out[i])
            return false;
    }
    out[n] = '\0';
    return true;
}

/* A tool name as the classifier leaves it: 1 to 31 bytes, no ':' '|' ',' or control. */
static bool tool_read(const json_t *v, char out[SCHED_TOOL_NAME_MAX])
{
    if (!bytes_read(v, out, SCHED_TOOL_NAME_MAX) || !out[0])
        return false;
    for (const char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || strchr(":|,", *p))
            return false;
    return true;
}

/* One tool return as persisted: what the router observed and how long it ran. */
struct ret {
    struct sched_obs obs;
    int64_t exec_us;
};

/* [tool, payload_tokens, size, status, status_from, exec_us] at path into *out. */
static int read_return(const json_t *v, const char *path, struct ret *out, char *err, size_t size)
{
    char at[96];
    if (!json_is_array(v) || json_array_size(v) != 6)
        return bad(err, size, path,
                   "expected [tool, payload_tokens, size, status, status_from, exec_us]");
    int64_t payload, exec;
    int sz = name_of(json_string_value(json_array_get(v, 2)), size_name, SCHED_SIZE_COUNT);
    int st = name_of(json_string_value(json_array_get(v, 3)), status_name, SCHED_STATUS_COUNT);
    int from = name_of(json_string_value(json_array_get(v, 4)), from_name, SCHED_FROM_NONE + 1);
    const char *what = NULL;
    int field = 0;
    memset(&out->obs, 0, sizeof out->obs);
    if (!tool_read(json_array_get(v, 0), out->obs.tool))
        what = "expected a tool name (1 to 31 bytes, no ':', '|', ',' or control)", field = 0;
    else if (!int_in(json_array_get(v, 1), -1, TRACE_MAX_TOKENS, &payload))
        what = "expected a token count up to 2^40, or -1", field = 1;
    else if (sz < 0)
        what = "expected small, medium or large", field = 2;
    else if (st < 0)
        what = "expected success, failure, timeout or other", field = 3;
    else if (from < 0)
        what = "expected explicit, rule, text or none", field = 4;
    else if (!int_in(json_array_get(v, 5), -1, TRACE_MAX_TOOL_US, &exec))
        what = "expected microseconds up to 2^50, or -1", field = 5;
    if (what) {
        snprintf(at, sizeof at, "%s.%d", path, field);
        return bad(err, size, at, "%s", what);
    }
    out->obs.payload_tokens = payload;
    out->obs.size = (enum sched_size)sz;
    out->obs.status = (enum sched_status)st;
    out->obs.status_from = (enum sched_status_from)from;
    out->exec_us = exec;
    return 0;
}

/* Parses text as one JSON object with exactly the members keys (NULL-terminated); a key written
 * "?name" is optional (a member added since the format began: older rows lack it). */
static json_t *load_object(const char *text, size_t len, const char *const *keys, char *err,
                           size_t size)
{
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        bad(err, size, "row", "byte %d: %s", je.position, je.text);
        return NULL;
    }
    size_t n = 0;
    for (const char *const *k = keys; *k; k++, n++)
        if (**k != '?' && !json_object_get(o, *k)) {
            bad(err, size, *k, "missing");
            json_decref(o);
            return NULL;
        }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v)
    {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++)
            known = strcmp(*k + (**k == '?'), key) == 0;
        if (!known) {
            bad(err, size, key, "unknown member");
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* An identity into out: at most GW_ID_MAX - 1 bytes; empty only when may_be_empty. */
static bool id_read(const json_t *v, char out[GW_ID_MAX], bool may_be_empty)
{
    return bytes_read(v, out, GW_ID_MAX) && (out[0] || may_be_empty);
}

int gw_step_rec_parse(const char *text, size_t len, struct gw_step_rec *out, char *err,
                      size_t err_size)
{
    static const char *const keys[] = {"step", "learnt", "deadline_s", NULL};
    json_t *o = load_object(text, len, keys, err, err_size);
    if (!o)
        return -1;
    const json_t *d = json_object_get(o, "deadline_s");
    int rc = 0;
    if (!int_in(json_object_get(o, "step"), 0, GW_COUNTER_MAX, &out->step))
        rc = bad(err, err_size, "step", "expected a step number up to 2^62");
    else if (!int_in(json_object_get(o, "learnt"), 0, INT64_MAX, &out->learnt))
        rc = bad(err, err_size, "learnt", "expected a count");
    else if (!json_is_null(d) && !(json_is_number(d) && json_number_value(d) > 0))
        rc = bad(err, err_size, "deadline_s", "expected positive seconds or null");
    out->deadline_s = json_is_null(d) ? NAN : json_number_value(d);
    json_decref(o);
    return rc;
}

/* The returns of a (at path) appended to r. */
static int read_returns(const json_t *a, const char *path, struct gw_learn_rec *r, size_t *cap,
                        char *err, size_t size)
{
    if (!json_is_array(a))
        return bad(err, size, path, "expected an array of returns");
    if (r->n_ret + json_array_size(a) > GW_RECORD_RETURNS_MAX)
        return bad(err, size, path, "more than %d returns", GW_RECORD_RETURNS_MAX);
    for (size_t i = 0; i < json_array_size(a); i++) {
        char at[96];
        snprintf(at, sizeof at, "%s.%zu", path, i);
        struct ret x;
        if (read_return(json_array_get(a, i), at, &x, err, size))
            return -1;
        push_return(r, cap, &x.obs, x.exec_us);
    }
    return 0;
}

static int learn_turns(const json_t *a, struct gw_learn_rec *r, char *err, size_t size)
{
    size_t n = json_array_size(a), cap = 0;
    if (!json_is_array(a) || n == 0 || n > GW_RECORD_TURNS_MAX)
        return bad(err, size, "turns", "expected 1 to %d turns", GW_RECORD_TURNS_MAX);
    r->turns = xcalloc(n, sizeof *r->turns);
    for (size_t k = 0; k < n; k++, r->n_turns++) {
        const json_t *tu = json_array_get(a, k);
        char at[64];
        snprintf(at, sizeof at, "turns.%zu", k);
        struct gw_rec_turn *t = &r->turns[k];
        if (!json_is_array(tu) || json_array_size(tu) != 3)
            return bad(err, size, at, "expected [generated_tokens, context_tokens, returns]");
        if (!int_in(json_array_get(tu, 0), 0, TRACE_MAX_TOKENS, &t->generated_tokens) ||
            !int_in(json_array_get(tu, 1), 0, TRACE_MAX_TOKENS, &t->context_tokens))
            return bad(err, size, at, "expected token counts up to 2^40");
        snprintf(at, sizeof at, "turns.%zu.2", k);
        t->first = r->n_ret;
        if (read_returns(json_array_get(tu, 2), at, r, &cap, err, size))
            return -1;
        t->n = r->n_ret - t->first;
    }
    return 0;
}

int gw_learn_rec_parse(const char *text, size_t len, struct gw_learn_rec *out, char *err,
                       size_t err_size)
{
    static const char *const keys[] = {"id", "step", "prompt", "censored", "finish", "turns", NULL};
    gw_learn_rec_free(out);
    json_t *o = load_object(text, len, keys, err, err_size);
    if (!o)
        return -1;
    int64_t prompt = 0;
    int finish =
        name_of(json_string_value(json_object_get(o, "finish")), finish_name, TRACE_FINISH_COUNT);
    int rc = 0;
    if (!id_read(json_object_get(o, "id"), out->id, true))
        rc = bad(err, err_size, "id", "expected an identity of at most %d bytes", GW_ID_MAX - 1);
    else if (!int_in(json_object_get(o, "step"), 0, GW_COUNTER_MAX, &out->step))
        rc = bad(err, err_size, "step", "expected a step number up to 2^62");
    else if (!int_in(json_object_get(o, "prompt"), 0, INT64_MAX, &prompt))
        rc = bad(err, err_size, "prompt", "expected a prompt key");
    else if (!json_is_boolean(json_object_get(o, "censored")))
        rc = bad(err, err_size, "censored", "expected true or false");
    else if (finish < 0)
        rc = bad(err, err_size, "finish", "expected completed, truncated, aborted or filtered");
    else
        rc = learn_turns(json_object_get(o, "turns"), out, err, err_size);
    if (rc == 0) {
        out->prompt = (uint64_t)prompt;
        out->censored = json_is_true(json_object_get(o, "censored"));
        out->finish = (enum trace_finish)finish;
    } else {
        gw_learn_rec_free(out);
    }
    json_decref(o);
    return rc;
}

/* ---- a live trajectory's row ---------------------------------------------------------------- */

/* Appends the returns of a (at path) to t's observations, and their calls to *calls. */
static int live_returns(const json_t *a, const char *path, struct gw_traj *t,
                        struct trace_tool_call **calls, size_t *n_calls, char *err, size_t size)
{
    if (!json_is_array(a))
        return bad(err, size, path, "expected an array of returns");
    size_t n = json_array_size(a);
    if (t->obs.n + n > GW_RECORD_RETURNS_MAX)
        return bad(err, size, path, "more than %d returns", GW_RECORD_RETURNS_MAX);
    *calls = n ? xcalloc(n, sizeof **calls) : NULL;
    for (size_t i = 0; i < n; i++) {
        char at[96];
        snprintf(at, sizeof at, "%s.%zu", path, i);
        struct ret x;
        if (read_return(json_array_get(a, i), at, &x, err, size))
            return -1;
        vec_push(&t->obs, x.obs);
        (*calls)[(*n_calls)++] = gw_call_from(&x.obs, x.exec_us);
    }
    return 0;
}

/* A timed turn's [instance, tp, sent_us, first_us (-1: not streamed), done_us]. */
static bool timing_read(const json_t *a, struct trace_turn_timing *m)
{
    int64_t v[5];
    if (json_array_size(a) != 5)
        return false;
    for (size_t i = 0; i < 5; i++)
        if (!int_in(json_array_get(a, i), INT64_MIN, INT64_MAX, &v[i]))
            return false;
    *m = (struct trace_turn_timing){v[0], v[1], v[2], v[3], v[4]};
    return trace_timing_ok(m);
}

/* One completed turn [prompt_tokens, cached_tokens, generated_tokens, returns after it], and
 * its timing when it was timed. */
static int live_turn(const json_t *tu, size_t k, bool last, struct gw_traj *t, char *err,
                     size_t size)
{
    char at[64];
    snprintf(at, sizeof at, "turns.%zu", k);
    struct trace_turn turn = {0};
    size_t n = json_array_size(tu);
    if (!json_is_array(tu) || (n != 4 && n != 5))
        return bad(err, size, at,
                   "expected [prompt_tokens, cached_tokens, generated_tokens, returns] and the "
                   "turn's timing when it was timed");
    if (n == 5 && !timing_read(json_array_get(tu, 4), &turn.timing))
        return bad(err, size, at,
                   "expected its timing [instance, tp, sent_us, first_us, done_us] in order");
    if (!int_in(json_array_get(tu, 0), 0, TRACE_MAX_TOKENS, &turn.prompt_tokens) ||
        !int_in(json_array_get(tu, 1), -1, turn.prompt_tokens, &turn.cached_tokens) ||
        !int_in(json_array_get(tu, 2), 0, TRACE_MAX_TOKENS, &turn.generated_tokens))
        return bad(err, size, at,
                   "expected token counts up to 2^40 (cached at most the prompt, or -1)");
    snprintf(at, sizeof at, "turns.%zu.3", k);
    if (last && json_array_size(json_array_get(tu, 3)) != 0)
        return bad(err, size, at, "the last turn's returns are pending, not the turn's");
    vec_push(&t->turns, turn);
    if (!last)
        vec_push(&t->returns_at, t->obs.n);
    struct trace_turn *in = &t->turns.v[t->turns.n - 1];
    return live_returns(json_array_get(tu, 3), at, t, &in->calls, &in->n_calls, err, size);
}

static int live_fields(const json_t *o, struct gw_traj *t, char *err, size_t size)
{
    int64_t prompt;
    if (!id_read(json_object_get(o, "id"), t->id, false))
        return bad(err, size, "id", "expected an identity of 1 to %d bytes", GW_ID_MAX - 1);
    if (!int_in(json_object_get(o, "prompt"), 0, INT64_MAX, &prompt))
        return bad(err, size, "prompt", "expected a prompt key");
    if (!int_in(json_object_get(o, "start_tokens"), 0, TRACE_MAX_TOKENS, &t->start_tokens))
        return bad(err, size, "start_tokens", "expected a token count up to 2^40");
    if (!int_in(json_object_get(o, "generation"), 0, GW_COUNTER_MAX, &t->generation))
        return bad(err, size, "generation", "expected a step number up to 2^62");
    if (!int_in(json_object_get(o, "version_start"), 0, GW_COUNTER_MAX, &t->version_start))
        return bad(err, size, "version_start", "expected a step number up to 2^62");
    /* an engine id: ids are never given again, so they pass GW_ENGINES_MAX over time */
    if (!int_in(json_object_get(o, "instance"), -1, GW_COUNTER_MAX, &t->instance))
        return bad(err, size, "instance", "expected an engine id or -1");
    t->prompt = (uint64_t)prompt;
    return 0;
}

int gw_traj_rec_parse(const char *text, size_t len, struct gw_traj *t, char *err, size_t err_size)
{
    static const char *const keys[] = {"id",         "prompt",        "start_tokens",
                                       "generation", "version_start", "instance",
                                       "turns",      "pending",       NULL};
    json_t *o = load_object(text, len, keys, err, err_size);
    if (!o)
        return -1;
    const json_t *turns = json_object_get(o, "turns");
    size_t n = json_array_size(turns);
    int rc = live_fields(o, t, err, err_size);
    if (rc == 0 && (!json_is_array(turns) || n > GW_RECORD_TURNS_MAX))
        rc = bad(err, err_size, "turns", "expected at most %d turns", GW_RECORD_TURNS_MAX);
    for (size_t k = 0; rc == 0 && k < n; k++)
        rc = live_turn(json_array_get(turns, k), k, k + 1 == n, t, err, err_size);
    struct trace_tool_call *calls = NULL;
    size_t n_calls = 0;
    if (rc == 0)
        rc = live_returns(json_object_get(o, "pending"), "pending", t, &calls, &n_calls, err,
                          err_size);
    t->pending.v = calls;
    t->pending.n = t->pending.cap = n_calls;
    if (rc == 0 && n) {
        t->last_prompt_tokens = t->turns.v[n - 1].prompt_tokens;
        t->last_generated = t->turns.v[n - 1].generated_tokens;
    }
    json_decref(o);
    return rc;
}

/* ---- an engine's row ------------------------------------------------------------------------ */

char *gw_engine_rec_text(const struct gw_engine *e)
{
    return dump(json_pack("{s:i, s:s, s:o, s:o, s:I, s:b, s:b}", "tp", e->tp, "kind",
                          e->kind == GW_KIND_SGLANG ? "sglang" : "vllm", "weight_version",
                          gw_bytes_json(e->version), "reported", gw_bytes_json(e->reported), "step",
                          (json_int_t)e->generation, "lent", e->lent, "draining", e->draining));
}

int gw_engine_rec_parse(const char *text, size_t len, struct gw_engine *e, char *err,
                        size_t err_size)
{
    static const char *const keys[] = {"tp",   "kind", "weight_version", "?reported",
                                       "step", "lent", "draining",       NULL};
    const json_t *reported;
    json_t *o = load_object(text, len, keys, err, err_size);
    if (!o)
        return -1;
    int64_t tp = 0;
    int rc = 0;
    const char *kind = json_string_value(json_object_get(o, "kind"));
    bool sglang = kind && strcmp(kind, "sglang") == 0, vllm = kind && strcmp(kind, "vllm") == 0;
    if (!int_in(json_object_get(o, "tp"), 1, 8, &tp) || (tp & (tp - 1)))
        rc = bad(err, err_size, "tp", "expected 1, 2, 4 or 8");
    else if (!sglang && !vllm)
        rc = bad(err, err_size, "kind", "expected \"sglang\" or \"vllm\"");
    else if (!bytes_read(json_object_get(o, "weight_version"), e->version, sizeof e->version))
        rc = bad(err, err_size, "weight_version", "expected a version of at most %d bytes",
                 GW_VERSION_MAX - 1);
    else if ((reported = json_object_get(o, "reported")) &&
             !bytes_read(reported, e->reported, sizeof e->reported))
        rc = bad(err, err_size, "reported", "expected a version of at most %d bytes",
                 GW_VERSION_MAX - 1);
    else if (!int_in(json_object_get(o, "step"), 0, GW_COUNTER_MAX, &e->generation))
        rc = bad(err, err_size, "step", "expected a step number up to 2^62");
    else if (!json_is_boolean(json_object_get(o, "lent")))
        rc = bad(err, err_size, "lent", "expected true or false");
    else if (!json_is_boolean(json_object_get(o, "draining")))
        rc = bad(err, err_size, "draining", "expected true or false");
    if (rc == 0) {
        e->tp = (int)tp;
        e->kind = sglang ? GW_KIND_SGLANG : GW_KIND_VLLM;
        e->lent = json_is_true(json_object_get(o, "lent"));
        e->draining = json_is_true(json_object_get(o, "draining"));
    }
    json_decref(o);
    return rc;
}

/* ---- the weight update kept --------------------------------------------------------------- */

char *gw_update_rec_text(const struct gw_update_rec *u)
{
    json_t *missed = json_array();
    for (size_t i = 0; i < u->n_missed; i++)
        json_array_append_new(missed, json_integer(u->missed[i]));
    return dump(json_pack("{s:o, s:o, s:o, s:o}", "path", gw_bytes_json(u->path), "version",
                          gw_bytes_json(u->version), "body", gw_bytes_json(u->body ? u->body : ""),
                          "missed", missed));
}

/* A string written by gw_bytes_json, of any length, malloc'd into *out. */
static bool bytes_dup(const json_t *v, char **out, size_t *len)
{
    size_t n = json_is_string(v) ? json_string_length(v) : json_array_size(v);
    if (!json_is_string(v) && !json_is_array(v))
        return false;
    char *s = xmalloc(n + 1);
    bool ok = bytes_read(v, s, n + 1);
    if (!ok) {
        free(s);
        return false;
    }
    *out = s;
    *len = n;
    return true;
}

int gw_update_rec_parse(const char *text, size_t len, struct gw_update_rec *u, char *err,
                        size_t err_size)
{
    static const char *const keys[] = {"path", "version", "body", "missed", NULL};
    json_t *o = load_object(text, len, keys, err, err_size);
    if (!o)
        return -1;
    json_t *missed = json_object_get(o, "missed");
    int rc = 0;
    if (!bytes_read(json_object_get(o, "path"), u->path, sizeof u->path) || u->path[0] != '/')
        rc = bad(err, err_size, "path", "expected a path of at most %d bytes",
                 GW_UPDATE_PATH_MAX - 1);
    else if (!bytes_read(json_object_get(o, "version"), u->version, sizeof u->version))
        rc = bad(err, err_size, "version", "expected a version of at most %d bytes",
                 GW_UPDATE_VERSION_MAX - 1);
    else if (!json_is_array(missed) || json_array_size(missed) > GW_ENGINES_MAX)
        rc = bad(err, err_size, "missed", "expected at most %d engine ids", GW_ENGINES_MAX);
    else if (!bytes_dup(json_object_get(o, "body"), &u->body, &u->len))
        rc = bad(err, err_size, "body", "expected a request body");
    size_t n = json_array_size(missed);
    u->missed = rc == 0 ? xcalloc(n + 1, sizeof *u->missed) : NULL;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int64_t id;
        if (!int_in(json_array_get(missed, i), 0, INT64_MAX, &id) ||
            (i > 0 && id <= u->missed[i - 1]))
            rc = bad(err, err_size, "missed", "expected engine ids, ascending");
        else
            u->missed[u->n_missed++] = id;
    }
    if (rc != 0)
        gw_update_rec_free(u);
    json_decref(o);
    return rc;
}

void gw_update_rec_free(struct gw_update_rec *u)
{
    free(u->body);
    free(u->missed);
    *u = (struct gw_update_rec){0};
}
