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
#include "util/map.h"
#include "util/vec.h"

struct held {
    size_t group; /* rank of its (step, prompt_id) by first appearance */
    size_t seq;   /* rank of the record by arrival: keeps equal samples as they came */
    struct trace_traj traj;
};

struct trace_groups {
    struct map groups; /* "step:prompt_id" -> rank by first appearance */
    VEC(struct held) held;
    struct arena mem; /* turns, calls and tool names of the copies */
    bool sorted;
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

void trace_groups_add(struct trace_groups *g, const struct trace_traj *t)
{
    char key[48];
    snprintf(key, sizeof key, "%" PRId64 ":%" PRId64, t->step, t->prompt_id);
    bool inserted;
    union map_value *rank = map_slot(&g->groups, key, &inserted);
    if (inserted)
        rank->i64 = (int64_t)map_size(&g->groups) - 1;
    struct held h = {(size_t)rank->i64, g->held.n, copy_traj(&g->mem, t)};
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

const struct trace_traj *trace_groups_get(struct trace_groups *g, size_t i)
{
    if (!g->sorted) {
        if (g->held.n)
            qsort(g->held.v, g->held.n, sizeof *g->held.v, by_group);
        g->sorted = true;
    }
    return i < g->held.n ? &g->held.v[i].traj : NULL;
}
