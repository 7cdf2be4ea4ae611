/*
 * The discrete-event simulator of agentic RL jobs (`libra sim`).
 *
 * Libra's claim is about whole jobs, so the simulator runs whole jobs: trajectories (from a
 * workload generator or a trace) whose turns are served by inference instances (engine/),
 * routed turn by turn by the same router calls the gateway makes (sched/), waiting between
 * turns on tool CPU pools that queue, and a trainer that consumes whole GRPO groups, costs
 * each step on the actual sequence lengths (cost/train.h) and pushes weights back with an
 * explicit sync mode and transport. Four resource managers run over these shared parts:
 *
 *   colocated  verl's hybrid engine: every GPU rolls out one batch at one TP, waits for its
 *              last trajectory, reshards, trains, and switches back;
 *   async      a static split at one rollout TP with bounded staleness (AReaL / verl fully
 *              async); the split and TP are tuned by sweeping them in the simulator;
 *   libra      the planner's split and heterogeneous instances, routed by C-MLFQ;
 *   rollout    a fixed fleet and no trainer (one batch after another).
 *
 * Everything is a pure function of the inputs and the seed: time is simulated (seconds as
 * double, events ordered by (time, sequence number)), randomness comes from keyed streams (the
 * trajectory of (prompt, sample, policy version) is the same in every mode), and nothing here
 * reads a clock or a file. The CLI writes what the report functions format in memory.
 * docs/sim.md gives the model; docs/reproduction.md the paper setups.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "plan/plan.h"
#include "sched/router.h"
#include "spec/bucket.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "trace/trace.h"
#include "util/workers.h"
#include "workload/preset.h"

#define SIM_SCHEMA "libra.sim/1"

/* The modes, in sim.modes' bit order; what each is lives in one table (sim/mode.c). */
enum sim_mode { SIM_COLOCATED, SIM_ASYNC, SIM_LIBRA, SIM_ROLLOUT };
#define SIM_MODES 4

/* "colocated", "async", "libra", "rollout"; static storage. */
const char *sim_mode_name(enum sim_mode m);

/* The warm-up of a run of steps steps (>= 1) under cfg: sim.warmup_steps, but at most steps - 1,
 * so that one step is measured. */
int sim_warmup_steps(const struct libra_config *cfg, int steps);

/* Trajectories to replay instead of generating: consecutive runs of `samples` records form a
 * GRPO group, groups are launched in file order (wrapping around). Borrowed. */
struct sim_trace {
    const struct trace_traj *trajs;
    size_t n;
    const char *workload; /* the header's workload (observation rules) */
    const char *model;    /* the header's model, or NULL */
    int64_t group_size;   /* the header's samples per prompt; 0 when it gives none */
};

/* Steps simulated so far and planned in all, and a sweep's cells started and done, for a
 * progress display: runs add to them from any thread, anyone may read them. Planned steps
 * grow as experiments start and tuning searches plan another round. */
struct sim_progress {
    atomic_llong steps_done;
    atomic_llong steps_planned;
    atomic_llong cells_started;
    atomic_llong cells_done;
};

/* What every run of an experiment shares. Everything is borrowed. */
struct sim_input {
    const struct libra_config *cfg;
    const struct spec_hardware *hw;
    const struct spec_model *model;
    /* The workload preset named by cfg: the generator's parameters and the tool pools. With a
     * trace it supplies only the pools (tools it does not name never queue) and may be NULL. */
    const struct workload_preset *workload;
    const struct sim_trace *trace; /* NULL: generate from workload */
    bool perfetto;                 /* record one step of the last mode (sim_result.perfetto) */
    struct workers *workers;       /* threads for independent runs; NULL: the caller's only */
    struct sim_progress *progress; /* counted here when not NULL */
};

/* One rollout instance: TP GPUs starting at global GPU index gpu, inside one node. */
struct sim_instance_spec {
    int tp;
    int bucket; /* index into the layout's buckets */
    int gpu;
    int hybrid; /* 1 + the hybrid replica whose GPUs it serves on; 0: a core rollout instance */
};

/* A fleet libra's verification simulated, and its trained tokens/s there. */
struct sim_measured_fleet {
    int counts[PLAN_NTP]; /* rollout instances by log2(TP) */
    double tokens_per_s;  /* the short runs' (both seeds' mean when raced) */
};

#define SIM_MEASURED_MAX 16 /* measured fleets a layout keeps, by analytic rank */

/* What a mode runs on: the split, the training layout, the rollout fleet and its router. */
struct sim_layout {
    enum sim_mode mode;
    int n_train;                    /* GPUs training (colocated: every GPU; rollout: 0) */
    struct plan_train_layout train; /* zeroed when nothing trains */
    int n_inst;
    struct sim_instance_spec *inst; /* n_inst, owned (sim_layout_free) */
    struct spec_bucket_layout buckets;
    enum sched_policy policy;
    char origin[24]; /* how it was chosen: "planner", "tuned", "pinned", "fleet" */
    /* The planner's prediction for this layout (planned false: no plan was solved). */
    bool planned;
    double pred_step_s, pred_train_s, pred_rollout_s, pred_switch_s;
    /* The elastic hybrid pool (libra with ehp.enabled): n_train and train.dp are then the
     * core's, and hybrid replica h, a training replica of the same layout, sits on the GPUs
     * [n_train + h * replica_gpus, n_train + (h + 1) * replica_gpus), serving rollout through
     * the instances whose hybrid is h + 1 until the pool borrows it. */
    bool pool;
    int n_hybrid;
    int replica_gpus;    /* TP * PP * CP */
    char pool_note[160]; /* why the pool has no hybrid replica or another layout, or "" */
    /* libra, verified: the async fleets at its split that the verification simulated (a replan
     * weighs its candidate among them by what was measured, sim/replan.c) */
    int n_measured;
    struct sim_measured_fleet measured[SIM_MEASURED_MAX];
};

/* Releases what l owns; a zeroed l is fine. */
void sim_layout_free(struct sim_layout *l);

/*
 * Checks what every layout and run of in relies on: a workload preset to generate from, or a
 * trace holding at least one GRPO group of rl.samples trajectories, rl.samples being its
 * header's group_size where it gives one. Returns 0, or LIBRA_EINVAL
 * with err. sim_layout_make, sim_run and sim_experiment_run check it first.
 */
int sim_input_check(const struct sim_input *in, struct libra_error *err);

/* Wasted work by cause (tokens): never counted as throughput (spec §5). */
enum sim_waste {
    SIM_WASTE_PROMPT,    /* prompt and tool tokens prefilled the first time */
    SIM_WASTE_REPREFILL, /* context prefilled again: lost prefix cache, moves, resumes */
    SIM_WASTE_PREEMPT,   /* recomputed after KV preemption */
    SIM_WASTE_FILTERED,  /* generated tokens of groups dropped by dynamic sampling */
    SIM_WASTE_STALE,     /* generated tokens of groups rejected as too stale */
    SIM_WASTE_ABORTED,   /* generated tokens of trajectories aborted and never resumed */
    SIM_WASTE_FAILURE,   /* generated tokens lost with a failed instance */
    SIM_WASTE_SURPLUS,   /* generated tokens of accepted groups beyond a colocated batch */
};
#define SIM_WASTES 8

/* "prompt", "reprefill", ...; static storage. */
const char *sim_waste_name(enum sim_waste w);

/* Hybrid replicas by where their join is: serving rollout, then the join's phases. */
#define SIM_JOIN_STATES 6

/* "rollout", "requested", "fetching_state", "zero_sync", "activating", "active" (index i is
 * ehp/pool.h's enum ehp_join value i); static storage. */
const char *sim_join_state_name(int state);

/* The elastic pool in a step (layouts with one): the split of the GPUs and the joins. */
struct sim_pool_step {
    int train_gpus;   /* GPUs that trained the step: the core's and the active hybrids' */
    int hybrid_gpus;  /* of those, the hybrid replicas' */
    int rollout_gpus; /* GPUs in rollout at the step's end (serving or starting) */
    int replicas[SIM_JOIN_STATES]; /* hybrid replicas by join state at the step's end */
    /* the pool's decisions since the previous step ended: joins requested, made active,
     * cancelled, failed (rolled back) and returned to rollout after training */
    int joins, activated, cancelled, failed, returned;
};

/* One training step (rollout mode: one batch). Times in seconds of simulated time. */
struct sim_step {
    int64_t step;
    double end_s;              /* when the step's training finished (rollout mode: its batch) */
    double step_s;             /* since the previous step ended */
    double train_s;            /* training compute of the step */
    double rollout_s;          /* colocated/rollout: the rollout phase; async: since the previous
                                * batch was ready (the stream's interval) */
    double wait_s;             /* async: the trainer idle waiting for the batch */
    double switch_s;           /* colocated: both switches of the hybrid engine */
    double sync_s;             /* trainer time spent in the weight update that followed the step */
    int64_t trajectories;      /* trained */
    int64_t trained_tokens;    /* generated tokens of the trained trajectories */
    double tail_share;         /* share of the batch's rollout span taken by its last 10 % */
    double mean_staleness;     /* of the trained trajectories, versions */
    double train_util;         /* train_s / step_s */
    double rollout_util;       /* busy GPU-seconds of the rollout instances during the step /
                                * the GPU-seconds they were in rollout (Σ TP × time serving or
                                * starting; failed ones count idle, lent ones not at all) */
    double rollout_gpu_s;      /* those GPU-seconds in rollout (the utilisation's denominator) */
    int64_t waste[SIM_WASTES]; /* tokens wasted since the previous step ended, by cause */
    struct sim_pool_step pool; /* zeroed without a pool */
};

/* ---- the GPU timeline of a step range ------------------------------------------------- */

/* What a row's GPUs did during an interval; idle is the rest of the window. */
enum sim_use {
    SIM_USE_ROLLOUT, /* an instance's engine runs iterations */
    SIM_USE_TRAIN,   /* training compute (colocated: on every instance's GPUs too) */
    SIM_USE_SYNC,    /* held by a weight update (colocated: the hybrid engine's switches) */
};
#define SIM_USES 3

/* "rollout", "train", "sync"; static storage. */
const char *sim_use_name(enum sim_use u);

struct sim_interval {
    double from_s, to_s; /* simulated time, from_s < to_s */
    enum sim_use use;
};

/* One row of a timeline: the trainer, or one rollout instance. */
struct sim_timeline_row {
    struct sim_interval *iv; /* by start, disjoint, touching ones of one use merged; owned */
    size_t n;
    /* Seconds of each use in the window, exact whatever the cap cut. An instance's rollout
     * seconds are its engine's busy time (the simulator's own accounting, engine_busy_at). */
    double use_s[SIM_USES];
    int tp, bucket, gpu;      /* instance: its TP, bucket (the last) and first GPU */
    int hybrid;               /* instance: 1 + the hybrid replica it serves on, 0: a core one */
    int64_t requests;         /* instance: turns submitted to it in the window */
    int64_t generated_tokens; /* instance: tokens kept by its requests that ended in the window */
};

/* The busy intervals of steps first..last of one run: the window runs from the end of step
 * first - 1 (the start of the run for step 0) to the end of step last. */
struct sim_timeline {
    int64_t first_step, last_step;
    double from_s, to_s;
    size_t max_intervals; /* the cap on intervals recorded over all rows */
    bool truncated;       /* the cap was reached: rows hold no interval past complete_to_s */
    double complete_to_s; /* intervals are complete up to here (to_s unless truncated); the
                           * rows' totals are exact over the whole window regardless */
    bool has_trainer;
    struct sim_timeline_row trainer;
    int n_inst;
    struct sim_timeline_row *inst; /* n_inst, in the layout's order; owned */
};

/* The cap on a timeline's intervals unless a run asks for another. */
#define SIM_TIMELINE_MAX_INTERVALS 20000

/* Releases t and what it owns; NULL is fine. */
void sim_timeline_free(struct sim_timeline *t);

/* t as {steps: {first, last}, from_s, to_s, complete_to_s, truncated, max_intervals,
 * trainer: {gpus, train_s, sync_s, intervals} or null, instances: [{instance, tp, bucket, gpu,
 * rollout_s, train_s, sync_s, busy_share, requests, generated_tokens, intervals}]}, each
 * interval [from_s, to_s, use] and busy_share rollout_s over the window. l is the layout the
 * run ran. Returns a new reference. */
json_t *sim_timeline_to_json(const struct sim_timeline *t, const struct sim_layout *l);

/* One evaluation of online replanning (sim/replan.c): a trigger fired at the end of a step and
 * the planner planned the window of finished trajectories. Predictions are corrected as
 * sim/replan.c says; counts are rollout instances by log2(TP) of the core fleet. */
struct sim_replan_eval {
    int64_t step;        /* the step whose end triggered it */
    const char *trigger; /* "interval", "queue pressure", "active-rollout pressure",
                          * "stale rejections", "rollout/train ratio" (static) */
    const char *why;     /* plan_replan_decide's rule, or why the window could not be planned
                          * (static) */
    bool accepted;
    int cur[PLAN_NTP], cand[PLAN_NTP]; /* the running fleet and the candidate */
    int started, stopped;              /* instances, when accepted */
    double cur_step_s, cand_step_s;    /* predicted on the window, corrected */
    double correction;                 /* simulated over predicted step of the running fleet */
    double start_ratio;    /* the model's candidate over running fleet on the start's sample */
    double measured_ratio; /* the verification's, where it simulated both (their steps, from
                            * trained tokens/s); NAN otherwise */
    double gain_s, cost_s; /* per step, and the reconfiguration's (plan/replan.h) */
};

/*
 * A distribution on log-spaced bins: bin b holds values in [lo * 10^(b / SIM_HIST_PER_DECADE),
 * lo * 10^((b + 1) / SIM_HIST_PER_DECADE)), the first bin also those below lo and the last
 * those above. Streaming and fixed in size, so memory does not grow with the steps; a quantile
 * read from it is good to one bin (12 %).
 */
#define SIM_HIST_PER_DECADE 20
#define SIM_HIST_BINS (8 * SIM_HIST_PER_DECADE)
struct sim_hist {
    double lo;
    int64_t count[SIM_HIST_BINS];
};

/* The result of one run. */
/* A tool's CPU pool over the whole run (warm-up included). */
struct sim_tool_pool {
    char tool[WORKLOAD_TOOL_NAME_MAX];
    int64_t workers; /* 0: a worker per call, no queue */
    int64_t calls;   /* started */
    double wait_s;   /* queued for a worker, summed over the calls */
    double busy_s;   /* worker-seconds executing, up to the run's end */
};

struct sim_result {
    enum sim_mode mode;
    int steps_run;
    struct sim_step *steps;               /* steps_run, owned */
    double end_s;                         /* simulated time at the end */
    int warmup;                           /* steps excluded from the rates */
    double measured_s;                    /* simulated time the rates are over */
    int64_t trained_tokens, trajectories; /* over the measured steps */
    double tokens_per_s, trajectories_per_s;
    double half_tokens_per_s[2];   /* trained tokens/s over the first and the second half of the
                                    * measured steps (the first has the fewer when their count is
                                    * odd): how far the rate is from settled; 0 and 0 with fewer
                                    * than 2 measured steps */
    double generated_tokens_per_s; /* every generated token, wasted or not, over the run */
    int64_t generated_tokens;      /* kept by the engines over the run (every request's
                                    * output, whatever became of it) */
    int64_t trained_tokens_all;    /* trained over every step, warm-up included */
    int64_t unconsumed_tokens;     /* of trajectories neither trained nor wasted at the end
                                    * (in flight, or buffered) */
    int64_t waste[SIM_WASTES];
    double rollout_util;  /* busy GPU-seconds of rollout instances / their GPU-seconds in
                           * rollout (as sim_step's) */
    double rollout_gpu_s; /* those GPU-seconds in rollout over the measured window */
    double train_util;    /* training GPU-seconds / training GPUs' GPU-seconds */
    double tail_share;    /* mean over measured steps */
    double mean_step_s, mean_train_s, mean_rollout_s;
    int64_t *staleness; /* max_staleness + 2 counters: trained trajectories by staleness
                         * 0..k, then the rejected ones (> k); owned */
    /* trajectories trained in the measured steps, by generated tokens (lo 1) and by seconds
     * from their launch (the setup included) to their end (lo 0.01) */
    struct sim_hist tokens_hist, duration_hist;
    int staleness_n;
    int64_t started, finished, aborted, resumed, failed_turns;
    int64_t timed_out;          /* of the aborted: stopped by rl.trajectory_timeout_s */
    int64_t offpolicy_tokens;   /* generated under a version other than the trajectory's first */
    int64_t mixed_trajectories; /* trajectories with tokens of more than one version */
    int64_t requests, preemptions, cached_tokens, syncs, cache_flushes;
    int64_t moves;                 /* turns sent to another instance than the previous one */
    int64_t *requests_by_instance; /* n_instances counters, in the layout's order; owned */
    int n_instances;
    struct sim_pool_step pool;       /* the pool's decisions over the run (its split: the last
                                      * step's); zeroed without a pool */
    json_t *routing;                 /* sched_metrics_to_json of the run; owned */
    int64_t routing_since_step;      /* the routing figures cover the decisions from the end of
                                      * this step on (a replan changed the buckets); 0: the run */
    bool replanning;                 /* the run replans (sim/replan.c) */
    struct sim_replan_eval *replans; /* n_replans, in order; owned */
    size_t n_replans;
    char *perfetto;                /* Chrome trace-event JSON of one step, or NULL; owned */
    struct sim_timeline *timeline; /* the steps sim_run_opts.timeline asked for, or NULL; owned */
    struct sim_tool_pool *tool_pools; /* n_tool_pools, the workload's tools first; owned */
    size_t n_tool_pools;
};

/* Releases what r owns; a zeroed r is fine. */
void sim_result_free(struct sim_result *r);

/* A change of the rollout fleet at a given time, as the elastic pool makes them: a lend
 * takes an instance out of rollout (its live turns are aborted and resumed elsewhere with
 * their tokens kept, and its GPUs leave the rollout fleet); a return brings a lent instance
 * back through a cold start (cost_cold_start_s), during which turns sent to it wait. */
enum sim_fleet_op { SIM_FLEET_LEND, SIM_FLEET_RETURN };

struct sim_fleet_change {
    double at_s;  /* simulated time */
    int instance; /* index into the layout's instances */
    enum sim_fleet_op op;
};

/* Options of one run. */
struct sim_run_opts {
    int steps;                 /* training steps (batches in rollout mode) */
    int warmup;                /* steps excluded from the rates */
    int perfetto_step;         /* record this step as a trace-event document; -1 none */
    const char *perfetto_mode; /* the mode the document names: the experiment's (libra on a
                                * colocated plan is libra); NULL: the layout's */
    bool rates_only;           /* a tuning or verification candidate: no routing figures (routing
                                * NULL), the rest as ever */
    bool timeline;             /* record the GPU timeline of steps timeline_first..timeline_last */
    int64_t timeline_first, timeline_last; /* 0 <= first <= last < steps */
    size_t timeline_max_intervals;         /* 0: SIM_TIMELINE_MAX_INTERVALS */
    /* Fleet changes played at their times (borrowed; n_fleet 0: none): the fleet mechanics
     * the pool drives, given directly (tests, what-if runs). */
    const struct sim_fleet_change *fleet;
    size_t n_fleet;
};

/*
 * Simulates layout l on in for opts->steps steps into *out (zeroed first; free it with
 * sim_result_free in every case). Returns 0; LIBRA_EINVAL with err when the layout or the
 * workload cannot run (a turn longer than an instance's context, every instance failed or
 * lent, a sync mode the transport cannot do, a fleet change naming no instance) or opts'
 * timeline range is not 0 <= first <= last < steps; LIBRA_EINTERNAL when an invariant broke
 * (a bug).
 */
int sim_run(const struct sim_input *in, const struct sim_layout *l, const struct sim_run_opts *opts,
            struct sim_result *out, struct libra_error *err);

/* ---- layouts -------------------------------------------------------------------------- */

/*
 * The layout of mode m with pinned choices: colocated at rollout TP tp; async with n_train
 * training GPUs and rollout TP tp; libra from the planner (or, with sim.planner off, the fleet
 * of sched.buckets' instance counts and the rest training); rollout from sched.buckets'
 * instance counts. Training layouts come from the planner restricted to the split. Returns 0,
 * LIBRA_EINFEAS with err when the choice cannot run (the model does not fit, the planner
 * finds no layout), or LIBRA_EINVAL with err for a bad setting. *out is zeroed first and
 * owns memory in every case.
 */
int sim_layout_make(const struct sim_input *in, enum sim_mode m, int n_train, int tp,
                    struct sim_layout *out, struct libra_error *err);

/* The layout in one line, as the table prints it: "24 train + tp8x3 (verified)". */
void sim_layout_text(const struct sim_layout *l, char *out, size_t size);

/* The seed of the length sample: plan.sample_seed, or sim.seed when it is 0. */
int64_t sim_sample_seed(const struct libra_config *cfg);

/*
 * The planner on in's length sample — the one libra's mode plans on: plan_sample_size
 * trajectories in whole batches at evenly spaced steps of the run (workload_lengths, seed
 * sim_sample_seed), or a trace's whole batches spread over it (its first batch, cycled, when it
 * holds less than one), each group judged by dynamic sampling — under the plan section of
 * plan_cfg (in->cfg otherwise), in its plan.mode. should_stop and stop_arg as plan_problem's
 * (may be NULL). Returns 0 with *r as plan_solve gives it (free it with plan_result_free), or
 * LIBRA_EINVAL with err.
 */
int sim_plan(const struct sim_input *in, const struct libra_config *plan_cfg,
             bool (*should_stop)(void *), void *stop_arg, struct plan_result *r,
             struct libra_error *err);

/* ---- experiments ---------------------------------------------------------------------- */

/* One candidate of a tuning sweep. */
struct sim_candidate {
    int n_train, tp;
    double tokens_per_s; /* NAN when it could not run */
};

/* One of the planner's candidates that libra's verification simulated. */
struct sim_verified {
    char origin[32];     /* which search proposed it: "optimum", "best at 16", "all TP2 at 16" */
    int split;           /* the training GPUs it was pinned to; 0: the planner's choice */
    int tp;              /* the TP size of every instance it was pinned to; 0: free */
    bool colocated;      /* a colocated plan: every GPU trains, then rolls out */
    int n_train;         /* GPUs training */
    char instances[64];  /* the fleet, "tp1x4,tp8x2" */
    double pred_step_s;  /* the planner's analytic step */
    double tokens_per_s; /* the short simulation's trained tokens/s; NAN when it failed */
    int error_rc;        /* when it failed: sim_run's return, LIBRA_EINFEAS where nothing fits */
    char error[512];     /* and why ("" when it ran) */
    bool raced;          /* close to the fastest: run again on the second seed (sim_verify) */
    double second_tokens_per_s; /* raced: the second seed's figure; NAN when it failed */
    bool chosen;
};

/* One mode of an experiment: how its layout was chosen and what it did. */
struct sim_mode_result {
    enum sim_mode mode;
    struct sim_layout layout;
    struct sim_candidate *candidates; /* the sweep, owned; n_candidates 0 when pinned */
    int n_candidates;
    int tune_steps;
    struct sim_verified *verified; /* libra: the candidates simulated, by analytic rank; owned */
    int n_verified;
    int verify_steps;
    int64_t verify_seed;
    int64_t race_seed; /* the verification's second seed, for the close candidates */
    struct sim_result run;
};

struct sim_experiment {
    int n;
    struct sim_mode_result mode[SIM_MODES];
};

/*
 * The rules of cfg that every run of `libra sim` needs, whatever its input (and that
 * `libra config check` applies): each streaming mode of sim.modes under the async rules
 * (spec_rl_async_check); the rollout mode (and libra without sim.planner) with a fleet in
 * sched.buckets; where their mode runs, a pinned sim.colocated_tp or sim.async_tp of 1, 2, 4
 * or 8 that fits a node and sim.async_train_gpus below cluster.gpus; sim.timeline_steps and
 * sim.trace_step within rl.steps. Returns 0 or LIBRA_EINVAL with err.
 */
int sim_config_check(const struct libra_config *cfg, struct libra_error *err);

/*
 * Runs every mode of in->cfg->sim.modes: tunes colocated's rollout TP and async's split and TP
 * unless pinned (sim.colocated_tp, sim.async_train_gpus, sim.async_tp), plans libra, and
 * simulates each for rl.steps steps. The perfetto document of step sim.trace_step is recorded
 * for the last mode run; the GPU timeline of sim.timeline_steps (cut at the last step) for
 * every mode. Returns 0, LIBRA_EINVAL with err where sim_config_check refuses cfg, or an error
 * of sim_layout_make or sim_run with err. *out is zeroed
 * first; free it with sim_experiment_free in every case.
 */
int sim_experiment_run(const struct sim_input *in, struct sim_experiment *out,
                       struct libra_error *err);

void sim_experiment_free(struct sim_experiment *e);

/* Releases what mr owns; a zeroed mr is fine. */
void sim_mode_result_free(struct sim_mode_result *mr);

/*
 * libra's layout chosen by simulation (plan.verify_candidates > 0, async): the planner
 * proposes — its optimum, and at the optimum's split and the nearest splits its best
 * heterogeneous fleet and its best fleet of each single TP size — and the
 * plan.verify_candidates best by analytic step run plan.verify_steps steps on a seed derived
 * from sim.seed, then a search of splits walks from the fastest; those within 5 % of the
 * fastest (at most 4) run again on a second derived seed and the best mean of the two wins.
 * Fills mr->layout (origin "verified") and
 * mr->verified (every candidate, by analytic rank, a failed one with its cause). Returns as
 * sim_layout_make (the planner's error when it finds no plan).
 */
int sim_verify(const struct sim_input *in, struct sim_mode_result *mr, struct libra_error *err);

/* mr's verification: {steps, seed, candidates: [{origin, split, tp, train_gpus, instances,
 * predicted_step_s, trained_tokens_per_s, chosen}]} by analytic rank. */
json_t *sim_verification_to_json(const struct sim_mode_result *mr);

/* The config under which the planner proposed v: cfg with v's split and fleet pinned. */
void sim_verified_config(const struct libra_config *cfg, const struct sim_verified *v,
                         struct libra_config *out);

/* ---- sweeps ----------------------------------------------------------------------------- */

#define SIM_SWEEP_SCHEMA "libra.sim-sweep/1"

/* A key of a sweep's grid and the values it takes, as given (KEY=V1,V2). Borrowed. */
struct sim_sweep_key {
    const char *key;
    const char *const *values;
    size_t n;
};

/* One run of a sweep: a grid point under one seed. */
struct sim_cell {
    size_t point;              /* grid point (sim_sweep_value) */
    int64_t seed;              /* its sim.seed */
    bool reset;                /* a swept key inert here took its default (spec_deferred) */
    struct sim_input in;       /* its own config (in.cfg, the caller's) and the shared inputs */
    int rc;                    /* sim_experiment_run's */
    struct libra_error err;    /* its error when rc != 0 */
    struct sim_experiment exp; /* its result when rc == 0 */
};

/*
 * A grid of settings times a list of seeds. The first key varies slowest; cells are
 * point-major (point p, seed s at p * n_seeds + s). Every cell is a whole experiment, a pure
 * function of its config, so a cell's result is the single run's with that config and seed.
 */
struct sim_sweep {
    const struct sim_sweep_key *keys;
    size_t n_keys;
    const int64_t *seeds;
    size_t n_seeds;
    struct sim_cell *cells; /* owned by the caller; sim_sweep_free releases their results */
    size_t n_cells;
};

/* Grid points: the product of the keys' value counts (1 without keys). */
size_t sim_sweep_points(const struct sim_sweep *sw);

/* The index into key k's values of the one it takes at grid point p. */
size_t sim_sweep_value_index(const struct sim_sweep *sw, size_t p, size_t k);

/* The value key k takes at grid point p. */
const char *sim_sweep_value(const struct sim_sweep *sw, size_t p, size_t k);

/* Runs every cell on workers (cells and their modes nested), counting on progress (either may
 * be NULL). A cell that fails keeps its error; the others complete. Returns the cells failed. */
size_t sim_sweep_run(struct sim_sweep *sw, struct workers *workers, struct sim_progress *progress);

/* Frees the cells' results (not the cells, nor their configs). */
void sim_sweep_free(struct sim_sweep *sw);

/*
 * The sweep as one JSON document (schema SIM_SWEEP_SCHEMA, the envelope of base): the grid,
 * the seeds, every cell ({point, set, seed, config_digest, result} with the single run's
 * document, or error {message, kind} instead of result) and per grid point the median and
 * interquartile range across seeds of each mode's trained tokens/s and of libra's ratios.
 * With SIM_ATTRIBUTION_KEY last in the grid, "attribution" holds per point of the other keys
 * the ladder (each bar's trained tokens/s and its ratio to the bar before) and the
 * leave-one-out view (each run's and its ratio to libra whole), ratios taken per seed.
 */
json_t *sim_sweep_to_json(const struct sim_sweep *sw, const struct libra_config *base);

/* JSON Lines: a header (envelope, grid, seeds), then one line per cell as in the document. */
char *sim_sweep_jsonl(const struct sim_sweep *sw, const struct libra_config *base);

/* The table for people: per grid point, each mode's median trained tokens/s and its IQR across
 * seeds, libra's median ratios (with SIM_ATTRIBUTION_KEY: the ladder and the leave-one-out
 * view per point of the other keys), then the failed cells with their errors. */
char *sim_sweep_text(const struct sim_sweep *sw, const struct libra_config *base);

/* ---- attribution ------------------------------------------------------------------------- */

/*
 * The attribution (`libra sim --attribution`): what each of libra's mechanisms buys, each bar
 * a measured run. The ladder adds them in the paper's order: colocated, disaggregated async,
 * + the planner (one TP size, so nothing to route), + heterogeneous TP with C-MLFQ, + the
 * elastic pool, + online replanning (libra whole). A ladder's answer depends on its order, so
 * the leave-one-out view takes each mechanism but the planner out of the whole (without the
 * planner libra has no layout: the async bar, the best static split a sweep finds, stands for
 * that). The bars are the values of the sweep key SIM_ATTRIBUTION_KEY, last in the grid: value
 * i applies bar i's settings after every other setting.
 */
#define SIM_ATTRIBUTION_KEY "attribution"

struct sim_setting {
    const char *key, *value;
};

/* One run of the attribution. */
struct sim_bar {
    const char *name;  /* the grid value: "colocated", "async", "+planner", ..., "-pool" */
    const char *label; /* what the bar is, for people */
    enum sim_mode mode;
    const struct sim_setting *sets; /* n_sets settings of the run */
    size_t n_sets;
};

/* The attribution's runs in grid order (the ladder's six, then the leave-one-out runs the
 * ladder lacks); *n gets their count. Static storage. */
const struct sim_bar *sim_attribution_bars(size_t *n);

/* The bar named name, or NULL. */
const struct sim_bar *sim_attribution_bar(const char *name);

/* ---- observations ------------------------------------------------------------------- */

/*
 * What a gateway would observe of one tool call of a trajectory record: its tool name, payload
 * tokens and status, classified by sched's observation rules (DESIGN.md "Observation parity").
 * The simulator and `libra route eval` both observe trace records through this one function.
 */
void sim_observe_call(const struct sched_obs_config *oc, const char *tool, int64_t payload_tokens,
                      enum trace_tool_status status, struct sched_obs *out);

/* ---- reports -------------------------------------------------------------------------- */

/* The experiment as one JSON document: the envelope (schema SIM_SCHEMA, version, seed,
 * config digest) and per mode its layout, tuning, run summary, steps and routing metrics,
 * plus the libra/colocated and libra/async ratios. Returns a new reference. */
json_t *sim_experiment_to_json(const struct sim_experiment *e, const struct libra_config *cfg);

/* JSON Lines: a header line (envelope and modes), then one line per step of every mode.
 * Returns a malloc'd string. */
char *sim_experiment_jsonl(const struct sim_experiment *e, const struct libra_config *cfg);

/* The table for people. Returns a malloc'd string. */
char *sim_experiment_text(const struct sim_experiment *e, const struct libra_config *cfg);

#endif
