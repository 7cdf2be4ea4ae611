/*
 * The recordings of a run, for a person to look at what the simulator did, and the hooks the
 * simulator calls at every change they show.
 *
 * Two recordings share the hooks. The trace-event document (--perfetto) holds one step as
 * Chrome trace events (the JSON that chrome://tracing and ui.perfetto.dev open), in three
 * processes: "rollout instances" (one counter track per instance: requests on it, lends,
 * starts and failures as instant events), "trajectories" (one track per trajectory: its turns
 * and its tool waits as slices, moves between instances as instant events) and "trainer"
 * (training steps, weight updates); a fourth with the elastic pool, a track per hybrid
 * replica (its join's phases and its training as slices, its returns and rollbacks as instant
 * events). The
 * step recorded runs from the end of the previous step to the end of its own, what is decided
 * at that end included; a slice is recorded when it ends, so work that began earlier shows
 * from its true start, and a pool phase still open at the end is recorded up to it (work on
 * the instances and trajectories still open is not). Times are
 * microseconds of simulated time. The GPU timeline (timeline.c, sim.timeline_steps) holds a
 * range of steps as busy intervals per row — the trainer, each instance — over the same kind
 * of window, fed by the same hooks: an instance's changes, a training step, and the phases the
 * trace-event document does not draw as slices of their own (the trainer held by a weight
 * update, the fleet held by one, a colocated switch).
 */
#include "sim/internal.h"
#include "util/json.h"

void sim_trace_init(struct sim *s)
{
    if (s->opts->perfetto_step >= 0) {
        s->trace.events = json_array();
        s->trace.step = s->opts->perfetto_step;
    }
    if (s->opts->timeline)
        sim_timeline_init(s);
}

void sim_trace_start(struct sim *s)
{
    if (s->trace.events && s->trace.step == 0)
        s->trace.on = true;
    if (s->opts->timeline && s->opts->timeline_first == 0)
        sim_timeline_begin(s);
}

void sim_trace_step_done(struct sim *s, int64_t step)
{
    if (s->trace.events && step == s->trace.step) {
        if (s->elastic)
            sim_elastic_trace_end(s);
        s->trace.on = false;
    } else if (s->trace.events && step + 1 == s->trace.step)
        s->trace.on = true;
    if (!s->opts->timeline)
        return;
    if (step == s->opts->timeline_last)
        sim_timeline_end(s);
    else if (step + 1 == s->opts->timeline_first)
        sim_timeline_begin(s);
}

static json_t *event(const char *name, const char *ph, int pid, uint64_t tid, double t_s)
{
    return json_pack("{s:s,s:s,s:i,s:I,s:o}", "name", name, "ph", ph, "pid", pid, "tid",
                     (json_int_t)tid, "ts", ujson_real(t_s * 1e6));
}

void sim_trace_slice(struct sim *s, int pid, uint64_t tid, const char *name, double from_s,
                     double to_s, json_t *args)
{
    if (!s->trace.on) {
        json_decref(args);
        return;
    }
    json_t *e = event(name, "X", pid, tid, from_s);
    json_object_set_new(e, "dur", ujson_real((to_s - from_s) * 1e6));
    if (args)
        json_object_set_new(e, "args", args);
    json_array_append_new(s->trace.events, e);
}

void sim_trace_instant(struct sim *s, int pid, uint64_t tid, const char *name, json_t *args)
{
    if (!s->trace.on) {
        json_decref(args);
        return;
    }
    json_t *e = event(name, "i", pid, tid, s->now);
    json_object_set_new(e, "s", json_string("t"));
    if (args)
        json_object_set_new(e, "args", args);
    json_array_append_new(s->trace.events, e);
}

void sim_trace_instance(struct sim *s, int i)
{
    sim_timeline_catch_up(s, i);
    struct sim_inst *in = &s->inst[i];
    if (!s->trace.on || in->last_count == in->live)
        return;
    in->last_count = in->live;
    char name[48];
    snprintf(name, sizeof name, "instance %d (TP%d)", i, in->tp);
    json_t *e = event(name, "C", SIM_PID_INSTANCES, 0, s->now);
    json_object_set_new(e, "args", json_pack("{s:i}", "requests", in->live));
    json_array_append_new(s->trace.events, e);
}

void sim_trace_train(struct sim *s, const struct sim_step *st)
{
    double to = s->train_start_s + st->train_s;
    sim_timeline_add(s, 0, SIM_USE_TRAIN, s->train_start_s, to);
    sim_trace_slice(s, SIM_PID_TRAINER, 0, "train", s->train_start_s, to,
                    json_pack("{s:I,s:I,s:I}", "step", (json_int_t)st->step, "trajectories",
                              (json_int_t)st->trajectories, "trained_tokens",
                              (json_int_t)st->trained_tokens));
}

void sim_trace_phase(struct sim *s, enum sim_use u, double from_s, unsigned rows)
{
    if (rows & SIM_ROW_TRAINER)
        sim_timeline_add(s, 0, u, from_s, s->now);
    if (rows & SIM_ROW_FLEET)
        sim_timeline_fleet(s, u, from_s);
}

static void name_process(json_t *events, int pid, const char *name)
{
    json_array_append_new(events, json_pack("{s:s,s:s,s:i,s:i,s:{s:s}}", "name", "process_name",
                                            "ph", "M", "pid", pid, "tid", 0, "args", "name", name));
}

static void name_thread(json_t *events, int pid, int tid, const char *name)
{
    json_array_append_new(events,
                          json_pack("{s:s,s:s,s:i,s:i,s:{s:s}}", "name", "thread_name", "ph", "M",
                                    "pid", pid, "tid", tid, "args", "name", name));
}

/* The trace-event document, or NULL when none was recorded. */
static char *perfetto_text(struct sim *s)
{
    json_t *events = s->trace.events;
    if (!events)
        return NULL;
    name_process(events, SIM_PID_INSTANCES, "rollout instances");
    name_process(events, SIM_PID_TRAJECTORIES, "trajectories");
    name_process(events, SIM_PID_TRAINER, "trainer");
    name_thread(events, SIM_PID_TRAINER, 0, "training");
    name_thread(events, SIM_PID_TRAINER, 1, "weight updates");
    if (s->lay->n_hybrid)
        name_process(events, SIM_PID_POOL, "elastic pool (hybrid replicas)");
    for (int h = 0; h < s->lay->n_hybrid; h++) {
        char name[32];
        snprintf(name, sizeof name, "hybrid replica %d", h);
        name_thread(events, SIM_PID_POOL, h, name);
    }
    const char *mode =
        s->opts->perfetto_mode ? s->opts->perfetto_mode : sim_mode_name(s->lay->mode);
    json_t *doc = json_pack("{s:O,s:s,s:{s:s,s:I,s:s}}", "traceEvents", events, "displayTimeUnit",
                            "ms", "otherData", "mode", mode, "step", (json_int_t)s->trace.step,
                            "source", "libra sim (simulated time)");
    char *text = ujson_dump(doc, false);
    json_decref(doc);
    return text;
}

void sim_trace_finish(struct sim *s)
{
    s->out->perfetto = perfetto_text(s);
    s->out->timeline = sim_timeline_take(s);
}

void sim_trace_release(struct sim *s)
{
    json_decref(s->trace.events);
    s->trace.events = NULL;
    sim_timeline_release(s);
}
