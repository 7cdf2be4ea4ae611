/*
 * Tool CPU pools: calls queue for workers in arrival order.
 *
 * Tools run on CPU pools that saturate (libra-spec §5): Search-R1 sends a whole batch of
 * searches at each turn boundary, and an R2E validator runs a container of tests per
 * trajectory on a bounded set of workers. A pool of `workers` runs that many calls at once
 * and queues the rest FIFO; a pool of 0 workers is a sandbox per trajectory and never
 * queues. A call's execution time is its record's (cut at the tool's timeout by the
 * generator); the queueing delay is the simulator's. A trajectory aborted while its calls run
 * still holds their workers until they finish, as a killed client's sandbox does.
 */
#include "sim/internal.h"

double sim_pool_busy_s(const struct sim *s, const struct sim_pool *p)
{
    return p->busy_s + (double)p->busy * (s->now - p->changed_s);
}

/* Moves pool p's count of busy workers by delta, its busy time accounted up to now. */
static void set_busy(struct sim *s, struct sim_pool *p, int64_t delta)
{
    p->busy_s = sim_pool_busy_s(s, p);
    p->changed_s = s->now;
    p->busy += delta;
}

/* Runs a call of the trajectory ref names on a worker of pool. */
static void run_call(struct sim *s, uint32_t pool, uint64_t ref, double exec_s)
{
    set_busy(s, &s->pools[pool], 1);
    sim_schedule(s, s->now + exec_s, SIM_EV_TOOL, pool, ref);
}

void sim_tools_start(struct sim *s, struct sim_traj *t)
{
    const struct sim_turn *u = &t->turns[t->turn - 1];
    uint64_t id = sim_traj_ref(s, t);
    t->state = SIM_T_TOOL;
    t->pending = u->n_calls;
    t->tool_start_s = s->now;
    if (u->n_calls == 0) {
        sim_tools_returned(s, t);
        return;
    }
    for (uint32_t k = 0; k < u->n_calls; k++) {
        const struct sim_call *c = &t->calls[u->call + k];
        struct sim_pool *p = &s->pools[c->pool];
        p->calls++;
        if (p->workers == 0 || p->busy < p->workers) {
            run_call(s, c->pool, id, c->exec_s);
        } else {
            struct sim_waiting w = {id, c->exec_s, s->now};
            vec_push(&p->queue, w);
        }
    }
}

/* Starts the next waiting call of pool, skipping those of aborted trajectories. */
static void next_call(struct sim *s, uint32_t pool)
{
    struct sim_pool *p = &s->pools[pool];
    while (p->head < p->queue.n) {
        struct sim_waiting w = p->queue.v[p->head++];
        if (p->head == p->queue.n)
            p->head = p->queue.n = 0;
        const struct sim_traj *t = sim_traj_deref(s, w.traj);
        if (!t || t->state != SIM_T_TOOL)
            continue;
        p->wait_s += s->now - w.queued_s;
        run_call(s, pool, w.traj, w.exec_s);
        return;
    }
}

void sim_tool_done(struct sim *s, uint64_t ref, uint32_t pool)
{
    set_busy(s, &s->pools[pool], -1);
    next_call(s, pool);
    struct sim_traj *t = sim_traj_deref(s, ref);
    if (!t || t->state != SIM_T_TOOL)
        return;
    if (--t->pending == 0)
        sim_tools_returned(s, t);
}
