/*
 * The async and libra modes: rollout is a stream, training consumes it with bounded staleness
 * (AReaL, verl fully async; libra-spec §1).
 *
 * Admission (job/job.h, the rules load/ follows too): groups are launched in order, and the
 * group that will complete batch b may start only while b <= R + k (R the fleet's policy
 * version, k = rl.max_staleness), so a batch trained in order is never too stale; groups
 * dropped by dynamic sampling or staleness are replaced, and rl.overprovision_frac keeps that
 * share of a batch more in flight. Training:
 * whenever the trainer is free and the buffer of completed groups holds a batch, it takes the
 * oldest groups, after dropping those that are now too stale (counted at each trajectory's
 * start). Every rl.sync_interval steps the weights go to the fleet (sync.c). The two modes
 * differ only in their layout: async is a static split at one TP with least-connections
 * routing; libra is the planner's split with heterogeneous instances and C-MLFQ.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"

enum { TIMER_TRAINED = 1 };

/* Groups filtered in a row, in batches, after which dynamic sampling is taken to drop every
 * group: a kept share of 1 % leaves such a run once in 10^35 tries at 8 groups per batch. */
enum { FILTERED_RUN_BATCHES = 1000 };

struct async_mode {
    int64_t launched;      /* groups */
    int64_t lost;          /* groups filtered or rejected as stale (replaced) */
    int64_t filtered_run;  /* groups filtered since the last one kept */
    VEC(uint32_t) buffer;  /* completed groups, oldest first */
    size_t fresh;          /* buffer[0..fresh) were fresh at the trainer's fresh_version */
    int64_t fresh_version; /* the trainer's version when drop_stale last ran */
    double prev_ready_s;   /* when the previous batch was complete */
    double ready_s;        /* when the batch being trained was complete */
    double wait_s;         /* the trainer's idle time before it */
};

static struct async_mode *state(struct sim *s)
{
    return s->mode;
}

static void admit(struct sim *s)
{
    struct async_mode *m = state(s);
    if (s->sync_phase != SIM_SYNC_NONE || s->finished)
        return;
    int64_t limit = job_admit_limit(&s->job, s->rollout_version, m->lost);
    while (m->launched < limit && !s->rc) {
        sim_launch_group(s, 0);
        m->launched++;
    }
}

/* Drops buffered groups that are too stale for the trainer's version. A group's staleness
 * changes only with that version, so while it stays the groups checked before are skipped. */
static void drop_stale(struct sim *s)
{
    struct async_mode *m = state(s);
    size_t w = m->fresh_version == s->version ? m->fresh : 0;
    for (size_t r = w; r < m->buffer.n; r++) {
        struct sim_group *g = &s->groups.v[m->buffer.v[r]];
        if (sim_group_stale(s, g))
            m->lost++;
        else
            m->buffer.v[w++] = m->buffer.v[r];
    }
    m->buffer.n = w;
    m->fresh = w;
    m->fresh_version = s->version;
}

static void try_train(struct sim *s)
{
    struct async_mode *m = state(s);
    if (s->train_busy || s->finished)
        return;
    drop_stale(s);
    size_t need = (size_t)s->groups_per_batch;
    if (m->buffer.n >= need) {
        m->ready_s = 0;
        for (size_t i = 0; i < need; i++)
            m->ready_s = fmax(m->ready_s, s->groups.v[m->buffer.v[i]].done_s);
        m->wait_s = s->now - s->wait_since_s;
        double d = sim_train_begin(s, m->buffer.v, need);
        m->buffer.n -= need;
        m->fresh -= need; /* drop_stale just checked them all */
        memmove(m->buffer.v, m->buffer.v + need, m->buffer.n * sizeof *m->buffer.v);
        s->train_busy = true;
        sim_schedule(s, s->now + d, SIM_EV_MODE, 0, TIMER_TRAINED);
    }
    admit(s); /* stale groups were replaced */
}

static void begin(struct sim *s)
{
    struct async_mode *m = xcalloc(1, sizeof *m);
    s->mode = m;
    admit(s);
}

/* Stops a run whose dynamic sampling has dropped every group for FILTERED_RUN_BATCHES batches:
 * each dropped group is replaced, so rewards that are always equal would launch groups forever
 * and never train (the colocated mode's rounds are bounded by rl.max_gen_batches). */
static bool filtered_forever(struct sim *s, struct async_mode *m)
{
    int64_t limit = (int64_t)FILTERED_RUN_BATCHES * s->groups_per_batch;
    if (++m->filtered_run < limit)
        return false;
    sim_fail(s, LIBRA_EINVAL,
             "rl.dynamic_sampling %s dropped %lld groups in a row and kept none: their rewards "
             "are all equal (a workload whose reward never varies), so "
             "nothing would train",
             spec_dynamic_sampling_names[s->cfg->rl.dynamic_sampling], (long long)limit);
    return true;
}

static void group_done(struct sim *s, struct sim_group *g)
{
    struct async_mode *m = state(s);
    if (g->filtered) {
        m->lost++;
        sim_group_waste(s, g, SIM_WASTE_FILTERED);
        if (!filtered_forever(s, m))
            admit(s);
        return;
    }
    m->filtered_run = 0;
    vec_push(&m->buffer, (uint32_t)(g - s->groups.v));
    try_train(s);
}

static void trained(struct sim *s)
{
    struct async_mode *m = state(s);
    struct sim_step st = s->cur;
    st.end_s = s->now;
    st.step_s = s->now - s->last_step_end_s;
    st.wait_s = m->wait_s;
    st.rollout_s = m->ready_s - m->prev_ready_s;
    m->prev_ready_s = m->ready_s;
    s->last_step_end_s = s->now;
    s->version++;
    if (s->elastic)
        sim_elastic_step_end(s, &st);
    sim_step_record(s, &st);
    if (!s->finished && s->elastic)
        sim_elastic_steer(s, &st);
    if (!s->finished && s->replan)
        sim_replan_steer(s, &st);
    sim_trace_step_done(s, st.step); /* what was decided at the step's end is of the step */
    if (s->finished)
        return;
    if (job_sync_due(&s->job, s->version)) {
        sim_sync_begin(s);
        return;
    }
    s->train_busy = false;
    s->wait_since_s = s->now;
    try_train(s);
}

static void timer(struct sim *s, uint64_t what)
{
    if (what == TIMER_TRAINED)
        trained(s);
}

static void resume(struct sim *s)
{
    admit(s);
    try_train(s);
}

static void release(struct sim *s)
{
    struct async_mode *m = state(s);
    if (m)
        vec_free(&m->buffer);
}

const struct sim_mode_ops sim_mode_async_ops = {begin, group_done, timer, resume, release};
