/*
 * Recording one step as a Chrome trace-event document (the JSON that chrome://tracing and
 * ui.perfetto.dev open), so that a person can look at what the simulator did.
 *
 * Three processes: "rollout instances" (one counter track per instance: requests on it,
 * lends, starts and failures as instant events), "trajectories" (one track per trajectory: its
 * turns and its tool waits as slices, moves between instances as instant events) and
 * "trainer" (training steps, weight updates); a fourth with the elastic pool, a track per
 * hybrid replica (its join's phases and its training as slices, its returns and rollbacks as
 * instant events). The
 * step recorded runs from the end of the previous step to the end of its own; a slice is
 * recorded when it ends, so work that began earlier shows from its true start. Times are
 * microseconds of simulated time.
 */
#include "sim/internal.h"
#include "util/json.h"

void sim_trace_begin_step(struct sim *s, int64_t step)
{
    (void)step;
    if (s->trace.events)
        s->trace.on = true;
}

void sim_trace_end_step(struct sim *s)
{
    s->trace.on = false;
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

void sim_trace_counter(struct sim *s, int i)
{
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

char *sim_trace_finish(struct sim *s)
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
    json_t *doc = json_pack("{s:O,s:s,s:{s:s,s:I,s:s}}", "traceEvents", events, "displayTimeUnit",
                            "ms", "otherData", "mode", sim_mode_name(s->lay->mode), "step",
                            (json_int_t)s->trace.step, "source", "libra sim (simulated time)");
    char *text = ujson_dump(doc, false);
    json_decref(doc);
    return text;
}
