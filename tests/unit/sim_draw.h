/*
 * A random small experiment for the simulator's property tests (test_sim_invariants.c,
 * test_sim_timeline.c): Qwen3-4B on 16 GPUs, any built-in workload, a batch of one to three
 * groups of four, three to six steps, every sync mode and transport the job can run, failure
 * injection a third of the time, a trajectory timeout a third of the time, and any mode — the
 * rollout mode, and half of the libra runs, on a fixed fleet of three buckets under any router.
 */
#ifndef TEST_SIM_DRAW_H
#define TEST_SIM_DRAW_H

#include <stdio.h>

#include "sim/sim.h"
#include "spec/config.h"
#include "util/rng.h"

static const char *const sim_draw_workloads[] = {"search-r1", "r2e-gym", "dapo-math",
                                                 "dapo-math-verl"};

static void sim_draw(struct rng *g, struct libra_config *c, enum sim_mode *mode)
{
    spec_config_defaults(c);
    snprintf(c->model.name, sizeof c->model.name, "qwen3-4b");
    snprintf(c->workload.name, sizeof c->workload.name, "%s",
             sim_draw_workloads[rng_uniform_int(g, 4)]);
    c->cluster.gpus = 16;
    c->cluster.gpus_per_node = 8;
    c->rl.samples = 4;
    c->rl.batch_trajectories = 4 * (int)(1 + rng_uniform_int(g, 3));
    c->rl.steps = 3 + (int)rng_uniform_int(g, 4);
    c->rl.sync_interval = 1 + (int)rng_uniform_int(g, 2);
    c->rl.max_staleness = c->rl.sync_interval - 1 + (int)rng_uniform_int(g, 2);
    c->rl.sync_mode = (enum spec_sync_mode)rng_uniform_int(g, 3);
    c->rl.transport = (enum spec_transport)rng_uniform_int(g, 3);
    if (c->rl.sync_mode == SPEC_SYNC_KEEP && c->rl.transport == SPEC_TRANSPORT_DISK_RESTART)
        c->rl.transport = SPEC_TRANSPORT_NCCL;
    c->rl.overprovision_frac = rng_bernoulli(g, 0.3) ? 0.5 : 0;
    c->sim.warmup_steps = 1;
    c->sim.seed = (int64_t)rng_uniform_int(g, 1000);
    c->sim.context_mode = (enum spec_context_mode)rng_uniform_int(g, 2);
    c->sim.fail_time_s = rng_bernoulli(g, 0.3) ? 20.0 + 100.0 * rng_uniform(g) : -1;
    c->sim.fail_instance = (int)rng_uniform_int(g, 8);
    c->sim.max_seqs = rng_bernoulli(g, 0.3) ? 8 : 256;
    /* a third of the runs stop trajectories after 30-300 s, drawn on a stream of their own so
     * that the other draws stay as they were */
    struct rng t = rng_keyed(20261205, 0x74696d656f7574ull, (uint64_t)c->sim.seed, 0);
    c->rl.trajectory_timeout_s = rng_bernoulli(&t, 0.33) ? 30.0 + 270.0 * rng_uniform(&t) : 0;
    *mode = (enum sim_mode)rng_uniform_int(g, SIM_MODES);
    if (*mode == SIM_ROLLOUT || (*mode == SIM_LIBRA && rng_bernoulli(g, 0.5))) {
        c->sim.planner = false;
        snprintf(c->sched.buckets, sizeof c->sched.buckets, "%s",
                 *mode == SIM_ROLLOUT ? "tp1x4:3000,tp2x2:8000,tp4x1:40000"
                                      : "tp1x2:3000,tp2x1:8000,tp4x1:40000");
        c->sched.policy = (enum sched_policy)rng_uniform_int(g, 4);
    }
}

#endif
