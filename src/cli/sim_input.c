/*
 * Traces in memory for the simulator's input (cli/sim_input.h): each trajectory copied into an
 * arena, since the reader's buffers live only until its next record.
 */
#include <stdlib.h>
#include <string.h>

#include "cli/sim_input.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/arena.h"
#include "util/vec.h"

struct cli_loaded_trace {
    char *path;
    struct arena arena;
    VEC(struct trace_traj) trajs;
    char *workload, *model;
    struct sim_trace view;
};

static void copy_traj(struct cli_loaded_trace *lt, const struct trace_traj *t)
{
    struct trace_traj c = *t;
    c.extra = NULL;
    c.turns = arena_calloc(&lt->arena, t->n_turns, sizeof *c.turns);
    for (size_t i = 0; i < t->n_turns; i++) {
        c.turns[i] = t->turns[i];
        c.turns[i].calls = arena_calloc(&lt->arena, t->turns[i].n_calls, sizeof(*c.turns[i].calls));
        for (size_t k = 0; k < t->turns[i].n_calls; k++) {
            c.turns[i].calls[k] = t->turns[i].calls[k];
            c.turns[i].calls[k].tool = arena_strdup(&lt->arena, t->turns[i].calls[k].tool);
        }
    }
    vec_push(&lt->trajs, c);
}

static int load_trace(const char *path, struct cli_loaded_trace *lt)
{
    struct trace_reader *r;
    struct libra_error err = {0};
    const struct trace_header *h;
    const struct trace_traj *t;
    lt->path = xstrdup(path);
    arena_init(&lt->arena, 0);
    int rc = trace_reader_open(&r, path, &err);
    if (rc == 0)
        rc = trace_reader_header(r, &h, &err);
    if (rc == 0) {
        lt->workload = xstrdup(h->workload);
        lt->model = h->model ? xstrdup(h->model) : NULL;
        while ((rc = trace_reader_next(r, &t, &err)) == 1)
            copy_traj(lt, t);
    }
    trace_reader_close(r);
    if (rc < 0) {
        cli_report_error(&err);
        return rc == LIBRA_EIO ? LIBRA_EXIT_IO : LIBRA_EXIT_USAGE;
    }
    lt->view = (struct sim_trace){lt->trajs.v, lt->trajs.n, lt->workload, lt->model};
    return 0;
}

static void loaded_trace_free(struct cli_loaded_trace *lt)
{
    free(lt->path);
    arena_free(&lt->arena);
    vec_free(&lt->trajs);
    free(lt->workload);
    free(lt->model);
}

/* The trace at path, read on first use. */
static int trace_for(struct cli_traces *ts, const char *path, const struct sim_trace **out)
{
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->v[i].path, path) == 0) {
            *out = &ts->v[i].view;
            return 0;
        }
    ts->v = xreallocarray(ts->v, ts->n + 1, sizeof *ts->v);
    struct cli_loaded_trace *lt = &ts->v[ts->n++];
    memset(lt, 0, sizeof *lt);
    int rc = load_trace(path, lt);
    *out = &lt->view;
    return rc;
}

void cli_traces_free(struct cli_traces *ts)
{
    for (size_t i = 0; i < ts->n; i++)
        loaded_trace_free(&ts->v[i]);
    free(ts->v);
}

int cli_sim_input(const struct cli_presets *p, struct cli_traces *ts,
                  const struct libra_config *cfg, bool perfetto, struct sim_input *in)
{
    *in = (struct sim_input){.cfg = cfg,
                             .hw = spec_hardware_find(&p->spec, cfg->cluster.hardware),
                             .model = spec_model_find(&p->spec, cfg->model.name),
                             .workload = workload_preset_find(&p->workloads, cfg->workload.name),
                             .perfetto = perfetto};
    return cfg->workload.trace[0] ? trace_for(ts, cfg->workload.trace, &in->trace) : 0;
}
