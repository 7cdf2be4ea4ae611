/*
 * The trajectories of an import, held until its input ends so that each GRPO group's are
 * written together (trace/import.h, trace_groups_*).
 *
 * Logs list runs in their own order: tau-bench's results give every task's first trial, then
 * every task's second; a per-turn table interleaves prompts as its agent loop finished them.
 * Readers that take consecutive runs of group_size records as one group (`libra sim --trace`)
 * would mix prompts, silently. Records are copied into an arena (an import is read whole
 * anyway for the document formats) and ordered once, stably, when the first is asked for.
 */
#include "trace/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/alloc.h"
#include "util/arena.h"
#include "util/error.h"
#include "util/map.h"
#include "util/vec.h"

struct held {
    size_t group;     /* rank of its (step, prompt_id) by first appearance */
    size_t seq;       /* rank of the record by arrival: keeps equal samples as they came */
    const char *file; /* where it came from (the caller's string) */
    int64_t line;     /* 0: unknown */
    struct trace_traj traj;
};

struct trace_groups {
    struct map groups; /* "step:prompt_id" -> rank by first appearance */
    VEC(struct held) held;
    struct arena mem; /* turns, calls and tool names of the copies */
    bool sorted;
    const char *file; /* trace_groups_source's */
    int64_t line;
};

struct trace_groups *trace_groups_new(void)
{
    struct trace_groups *g = xcalloc(1, sizeof *g);
    map_init(&g->groups);
    arena_init(&g->mem, 0);
    return g;
}

void trace_groups_free(struct trace_groups *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->held.n; i++)
        json_decref(g->held.v[i].traj.extra);
    vec_free(&g->held);
    map_free(&g->groups);
    arena_free(&g->mem);
    free(g);
}

/* A copy of t whose turns, calls and names live in mem and whose extra is its own. */
static struct trace_traj copy_traj(struct arena *mem, const struct trace_traj *t)
{
    struct trace_traj c = *t;
    c.extra = t->extra ? json_deep_copy(t->extra) : NULL;
    c.turns = arena_calloc(mem, t->n_turns, sizeof *c.turns);
    for (size_t i = 0; i < t->n_turns; i++) {
        const struct trace_turn *u = &t->turns[i];
        c.turns[i] = *u;
        c.turns[i].calls = u->n_calls ? arena_calloc(mem, u->n_calls, sizeof *u->calls) : NULL;
        for (size_t k = 0; k < u->n_calls; k++) {
            c.turns[i].calls[k] = u->calls[k];
            c.turns[i].calls[k].tool = arena_strdup(mem, u->calls[k].tool);
        }
    }
    return c;
}

void trace_groups_source(struct trace_groups *g, const char *file, int64_t line)
{
    g->file = file;
    g->line = line;
}

void trace_groups_add(struct trace_groups *g, const struct trace_traj *t)
{
    char key[48];
    snprintf(key, sizeof key, "%" PRId64 ":%" PRId64, t->step, t->prompt_id);
    bool inserted;
    union map_value *rank = map_slot(&g->groups, key, &inserted);
    if (inserted)
        rank->i64 = (int64_t)map_size(&g->groups) - 1;
    struct held h = {(size_t)rank->i64, g->held.n, g->file, g->line, copy_traj(&g->mem, t)};
    vec_push(&g->held, h);
    g->sorted = false;
}

/* Group order: the group's first appearance, then sample, then arrival. */
static int by_group(const void *pa, const void *pb)
{
    const struct held *a = pa, *b = pb;
    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    if (a->traj.sample != b->traj.sample)
        return a->traj.sample < b->traj.sample ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static void sort_groups(struct trace_groups *g)
{
    if (!g->sorted && g->held.n)
        qsort(g->held.v, g->held.n, sizeof *g->held.v, by_group);
    g->sorted = true;
}

const struct trace_traj *trace_groups_get(struct trace_groups *g, size_t i)
{
    sort_groups(g);
    return i < g->held.n ? &g->held.v[i].traj : NULL;
}

/* The keys under which importers keep a prompt's own name in extra (tau-bench's task_id,
 * SWE-agent's instance, an OpenAI chat line's identity field): what the user knows it by. */
static const char *const identity_keys[] = {"task_id", "instance", "instance_id", "id", NULL};

/* "task_id 0 (prompt_id 0)" where extra names the prompt, else "prompt_id 0", into buf. */
static void describe_prompt(const struct trace_traj *t, char *buf, size_t size)
{
    for (size_t i = 0; identity_keys[i]; i++) {
        const json_t *v = t->extra ? json_object_get(t->extra, identity_keys[i]) : NULL;
        if (!v)
            continue;
        char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY);
        snprintf(buf, size, "%s %s (prompt_id %" PRId64 ")", identity_keys[i],
                 text ? text : json_string_value(v), t->prompt_id);
        free(text);
        return;
    }
    snprintf(buf, size, "prompt_id %" PRId64, t->prompt_id);
}

int trace_groups_check(struct trace_groups *g, int64_t group_size, struct libra_error *err)
{
    sort_groups(g);
    for (size_t i = 0, n; i < g->held.n; i += n) {
        const struct held *first = &g->held.v[i]; /* by arrival, where the group starts */
        for (n = 1; i + n < g->held.n && g->held.v[i + n].group == g->held.v[i].group; n++)
            if (g->held.v[i + n].seq < first->seq)
                first = &g->held.v[i + n];
        if ((int64_t)n == group_size)
            continue;
        char prompt[256];
        describe_prompt(&first->traj, prompt, sizeof prompt);
        return error_set(err, first->file, (int)first->line, first->line ? 1 : 0,
                         "step %" PRId64 ", %s: %zu trajectories, not --samples %" PRId64
                         ": a trace with group_size N is read as runs of N records, one "
                         "prompt's group each; give --samples N that every prompt has, or "
                         "complete the log",
                         first->traj.step, prompt, n, group_size);
    }
    return 0;
}
