/*
 * Formatting trace records as JSON Lines (trace.h, docs/trace-format.md).
 *
 * Generators write hundreds of thousands of trajectories per run, so records are printed
 * directly in the format's fixed key order rather than built as a jansson tree and dumped:
 * integers by hand, strings copied unless they need escaping. Whatever is not a fixed field —
 * floats, escaped strings, the verbatim `extra` objects — goes through jansson and
 * ujson_dump, so the bytes follow the project's one JSON printing rule.
 */
#include "trace/trace.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/json.h"

void trace_text_free(struct trace_text *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static void put(struct trace_text *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t want = b->len + n + 1;
        b->cap = want > b->cap * 2 ? want : b->cap * 2;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void puts_(struct trace_text *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_int(struct trace_text *b, int64_t v)
{
    char tmp[24], *end = tmp + sizeof tmp, *s = end;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--s = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--s = '-';
    put(b, s, (size_t)(end - s));
}

/* Appends v as ujson_dump prints it (compact, sorted keys, the fixed float rule). */
static void put_json(struct trace_text *b, const json_t *v)
{
    char *s = ujson_dump(v, false);
    puts_(b, s);
    free(s);
}

static void put_real(struct trace_text *b, double d)
{
    json_t *r = json_real(d);
    put_json(b, r);
    json_decref(r);
}

/* A JSON string; bytes that need no escaping (the common case) are copied as they are. */
static void put_str(struct trace_text *b, const char *s)
{
    const unsigned char *c = (const unsigned char *)s;
    while (*c >= 0x20 && *c != '"' && *c != '\\')
        c++;
    if (*c) {
        json_t *js = json_string(s);
        put_json(b, js);
        json_decref(js);
        return;
    }
    put(b, "\"", 1);
    put(b, s, (size_t)(c - (const unsigned char *)s));
    put(b, "\"", 1);
}

/* ,"key": — keys are fixed identifiers that need no escaping. */
static void key(struct trace_text *b, const char *k, bool first)
{
    put(b, first ? "\"" : ",\"", first ? 1 : 2);
    puts_(b, k);
    put(b, "\":", 2);
}

static void field_int(struct trace_text *b, const char *k, int64_t v, bool first)
{
    key(b, k, first);
    put_int(b, v);
}

/* An optional count: omitted when unknown (-1). */
static void field_known(struct trace_text *b, const char *k, int64_t v)
{
    if (v >= 0)
        field_int(b, k, v, false);
}

static void format_call(struct trace_text *b, const struct trace_tool_call *c)
{
    key(b, "tool", true);
    put_str(b, c->tool);
    key(b, "status", false);
    put_str(b, trace_tool_status_name(c->status));
    field_int(b, "payload_tokens", c->payload_tokens, false);
    field_known(b, "queue_us", c->queue_us);
    field_known(b, "exec_us", c->exec_us);
}

static void format_turn(struct trace_text *b, const struct trace_turn *u)
{
    field_int(b, "prompt_tokens", u->prompt_tokens, true);
    field_known(b, "cached_tokens", u->cached_tokens);
    field_int(b, "generated_tokens", u->generated_tokens, false);
    if (!u->n_calls)
        return;
    key(b, "calls", false);
    for (size_t i = 0; i < u->n_calls; i++) {
        put(b, i ? ",{" : "[{", 2);
        format_call(b, &u->calls[i]);
        put(b, "}", 1);
    }
    put(b, "]", 1);
}

void trace_format_traj(struct trace_text *b, const struct trace_traj *t)
{
    put(b, "{", 1);
    field_int(b, "step", t->step, true);
    field_int(b, "prompt_id", t->prompt_id, false);
    field_int(b, "epoch", t->epoch, false);
    field_int(b, "sample", t->sample, false);
    field_int(b, "version_start", t->version_start, false);
    field_known(b, "version_end", t->version_end);
    key(b, "finish", false);
    put_str(b, trace_finish_name(t->finish));
    if (t->has_reward) {
        key(b, "reward", false);
        put_real(b, t->reward);
    }
    key(b, "turns", false);
    for (size_t i = 0; i < t->n_turns; i++) {
        put(b, i ? ",{" : "[{", 2);
        format_turn(b, &t->turns[i]);
        put(b, "}", 1);
    }
    put(b, t->n_turns ? "]" : "[]", t->n_turns ? 1 : 2);
    if (t->extra) {
        key(b, "extra", false);
        put_json(b, t->extra);
    }
    put(b, "}\n", 2);
}

void trace_format_header(struct trace_text *b, const struct trace_header *h)
{
    put(b, "{", 1);
    field_int(b, "libra_trace", h->version, true);
    key(b, "workload", false);
    put_str(b, h->workload ? h->workload : "");
    if (h->model) {
        key(b, "model", false);
        put_str(b, h->model);
    }
    if (h->group_size > 0)
        field_int(b, "group_size", h->group_size, false);
    key(b, "lossy", false);
    puts_(b, h->lossy ? "true" : "false");
    const json_t *objs[] = {h->generator, h->import, h->extra};
    const char *names[] = {"generator", "import", "extra"};
    for (int i = 0; i < 3; i++) {
        if (objs[i]) {
            key(b, names[i], false);
            put_json(b, objs[i]);
        }
    }
    put(b, "}\n", 2);
}
