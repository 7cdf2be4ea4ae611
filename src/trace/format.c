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

#include <math.h>
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

/* Appends a string literal (its length known at compile time). */
#define LIT(b, lit) put((b), (lit), sizeof(lit) - 1)

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
    put(b, s, strlen(s));
    free(s);
}

/* A real by the project's rule. Integral values (rewards are mostly 0 or 1) take a short cut
 * that gives the rule's bytes: %.15g prints an integer below 1e15 exactly, and ".0" follows. */
static void put_real(struct trace_text *b, double d)
{
    if (d == floor(d) && fabs(d) < 1e15 && !(d == 0 && signbit(d))) {
        put_int(b, (int64_t)d);
        LIT(b, ".0");
        return;
    }
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
    LIT(b, "\"");
    put(b, s, (size_t)(c - (const unsigned char *)s));
    LIT(b, "\"");
}

/* An integer member (key is the literal `,"name":`). */
#define FIELD(b, key, v) (LIT((b), key), put_int((b), (v)))

/* An optional count: omitted when unknown (-1). */
#define KNOWN(b, key, v)                                                                           \
    do {                                                                                           \
        if ((v) >= 0)                                                                              \
            FIELD((b), key, (v));                                                                  \
    } while (0)

static void format_call(struct trace_text *b, const struct trace_tool_call *c)
{
    LIT(b, "{\"tool\":");
    put_str(b, c->tool);
    LIT(b, ",\"status\":");
    put_str(b, trace_tool_status_name(c->status));
    FIELD(b, ",\"payload_tokens\":", c->payload_tokens);
    KNOWN(b, ",\"queue_us\":", c->queue_us);
    KNOWN(b, ",\"exec_us\":", c->exec_us);
    LIT(b, "}");
}

static void format_turn(struct trace_text *b, const struct trace_turn *u)
{
    FIELD(b, "{\"prompt_tokens\":", u->prompt_tokens);
    KNOWN(b, ",\"cached_tokens\":", u->cached_tokens);
    FIELD(b, ",\"generated_tokens\":", u->generated_tokens);
    if (u->timing.tp > 0) {
        FIELD(b, ",\"instance\":", u->timing.instance);
        FIELD(b, ",\"tp\":", u->timing.tp);
        FIELD(b, ",\"sent_us\":", u->timing.sent_us);
        KNOWN(b, ",\"first_us\":", u->timing.first_us);
        FIELD(b, ",\"done_us\":", u->timing.done_us);
    }
    if (u->n_calls) {
        LIT(b, ",\"calls\":[");
        for (size_t i = 0; i < u->n_calls; i++) {
            if (i)
                LIT(b, ",");
            format_call(b, &u->calls[i]);
        }
        LIT(b, "]");
    }
    LIT(b, "}");
}

void trace_format_traj(struct trace_text *b, const struct trace_traj *t)
{
    FIELD(b, "{\"step\":", t->step);
    FIELD(b, ",\"prompt_id\":", t->prompt_id);
    FIELD(b, ",\"epoch\":", t->epoch);
    FIELD(b, ",\"sample\":", t->sample);
    FIELD(b, ",\"version_start\":", t->version_start);
    KNOWN(b, ",\"version_end\":", t->version_end);
    if (t->has_start)
        FIELD(b, ",\"start_us\":", t->start_us);
    if (t->setup_us > 0)
        FIELD(b, ",\"setup_us\":", t->setup_us);
    LIT(b, ",\"finish\":");
    put_str(b, trace_finish_name(t->finish));
    if (t->has_reward) {
        LIT(b, ",\"reward\":");
        put_real(b, t->reward);
    }
    LIT(b, ",\"turns\":[");
    for (size_t i = 0; i < t->n_turns; i++) {
        if (i)
            LIT(b, ",");
        format_turn(b, &t->turns[i]);
    }
    LIT(b, "]");
    if (t->extra) {
        LIT(b, ",\"extra\":");
        put_json(b, t->extra);
    }
    LIT(b, "}\n");
}

void trace_format_header(struct trace_text *b, const struct trace_header *h)
{
    FIELD(b, "{\"libra_trace\":", h->version);
    LIT(b, ",\"workload\":");
    put_str(b, h->workload ? h->workload : "");
    if (h->model) {
        LIT(b, ",\"model\":");
        put_str(b, h->model);
    }
    if (h->group_size > 0)
        FIELD(b, ",\"group_size\":", h->group_size);
    if (h->lossy)
        LIT(b, ",\"lossy\":true");
    else
        LIT(b, ",\"lossy\":false");
    const json_t *objs[] = {h->generator, h->import, h->extra};
    const char *keys[] = {",\"generator\":", ",\"import\":", ",\"extra\":"};
    for (int i = 0; i < 3; i++) {
        if (objs[i]) {
            put(b, keys[i], strlen(keys[i]));
            put_json(b, objs[i]);
        }
    }
    LIT(b, "}\n");
}
