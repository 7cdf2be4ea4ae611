/*
 * `libra load`: the rollout side of an RL job, played as a client against engines (or a
 * gateway) over HTTP.
 *
 * Trajectories come as trace records (a trace's, or the workload generator's, drawn group by
 * group as they are launched): each turn sends the whole context as token ids — the previous
 * context, the tokens the engine generated, the tool's payload, to the record's size (a smaller
 * one cuts the context to its first tokens; counts of 0 are played as 1, as the simulator
 * plays them) — with libra's request object
 * carrying the trajectory's identity, the tool returns since the previous turn and the turn's
 * script (docs/emu.md "libra's request object"); between turns it waits the record's tool
 * time, scaled like the emulator's clock.
 *
 * The job follows the rules of job/job.h, as the simulator's async modes do: GRPO groups start
 * while their batch is within rl.max_staleness versions of the fleet's weights (none while a
 * weight update runs), and no more than the run's last batch needs; a complete group is judged
 * by dynamic sampling (workload_group_filtered) and, when filtered, dropped and replaced; the
 * trainer, when free, drops the complete groups too stale for its version (replaced too), takes
 * the oldest complete groups as its next batch and trains on it for train_s of emulated time;
 * when the schedule says so the engines' weights are then updated through their own calls, in
 * the job's sync mode and transport (through a gateway, the update group's set-up goes to each
 * engine it lists, with that engine's rank offset, as a trainer sets it up), and the fleet's
 * version becomes the trainer's. The run ends when its last batch is complete (that batch is
 * not trained: nothing the client plays follows it).
 *
 * A trajectory stays on the engine of its first turn (sticky, for the prefix cache), which is
 * the one with the fewest requests in flight. A turn whose engine cannot be reached (connection
 * refused or cut) marks the engine dead and is sent again, whole, to another one; a turn that
 * comes back aborted (an engine paused with abort) is resubmitted with its partial output
 * appended and the rest of its script (AReaL's interruptible generation), so no trajectory is
 * lost — unless config.trajectory_timeout_s stops it, as the simulator does: its turn in
 * flight cancelled, it is masked (its group trains without it). An abort without a token,
 * outside the run's own weight update, counts as a 502 does: sent again after a wait, a bounded
 * number of times in a row. An answer no engine could give (not the style's shape, more tokens
 * than asked, ids outside config.vocab, more cached tokens than the prompt, past 64 MiB) stops
 * the run with the engine named.
 *
 * With pool_trainer the trainer also plays the elastic pool's handshake (load/trainer.h): it
 * reports each step to the gateway and, at each step boundary, confirms the lends and reclaims
 * that are ready; a lend's release holds the next step for release_s.
 *
 * Threading: runs on the caller's event loop; not thread-safe.
 */
#ifndef LOAD_LOAD_H
#define LOAD_LOAD_H

#include <event2/event.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "load/style.h"
#include "load/trainer.h"
#include "net/client.h"
#include "spec/config.h"
#include "trace/trace.h"
#include "workload/preset.h"

struct load_config {
    const char *const *urls; /* engine (or gateway) base URLs, e.g. http://127.0.0.1:30000 */
    int n_urls;
    enum load_style style; /* the RL framework's client (load/style.h) */
    const char *model;     /* served model name (vLLM requests name it) */
    /* The groups, drawn as they are launched (the n-th one, sample k): with trace, the trace's
     * group n modulo its whole groups (records of whole groups in order, at least one; borrowed),
     * else workload_group_traj(workload, n, k, the fleet's version at launch) with seed. */
    const struct trace_traj *trace;
    size_t n_trace;
    /* generates the groups without a trace; NULL only with a trace; borrowed */
    const struct workload_preset *workload;
    /* rl.dynamic_sampling: when not off, a complete group whose rewards are all equal is dropped
     * and replaced (an asynchronous trainer's way, whatever the synchronous recipe) */
    enum spec_dynamic_sampling dynamic_sampling;
    int group_size;                /* trajectories per group (GRPO n) */
    int steps;                     /* batches */
    struct job_rules job;          /* admission, staleness, the sync schedule (job/job.h) */
    enum spec_sync_mode sync_mode; /* drain: the update waits for the turns in flight;
                                    * abort_resume: pause with abort (turns come back partial
                                    * and are resubmitted), update, continue; keep: pause in
                                    * place, update, continue */
    bool nccl;         /* the transport: a weight-update group and broadcasts, else disk */
    double time_scale; /* wall seconds per emulated second (tool and training time) */
    /* rl.trajectory_timeout_s (emulated seconds, scaled like tool time): a trajectory still
     * running this long after its launch is stopped — its turn in flight cancelled, its tool
     * wait dropped — and masked: its group completes without it and trains without it; 0: none */
    double trajectory_timeout_s;
    /* The trainer's step on the batch it took, in emulated seconds (the weight update follows
     * it): step_cost(step_cost_arg, ctx_tokens, n, active, &step_s) with each trajectory's whole
     * context (prompt, generated and tool tokens, as the client sent and received them) and the
     * hybrid replicas the gateway's pool has training beside the core (0 without pool_trainer).
     * It returns 0, or non-zero when the batch cannot be costed: the run stops. Required. */
    int (*step_cost)(void *arg, const uint32_t *ctx_tokens, size_t n, int active, double *step_s);
    void *step_cost_arg;
    /* the trainer writes a checkpoint for save_s emulated seconds before the engines reload
     * (it starts no step meanwhile; rollout goes on): a disk transport's; 0 for nccl */
    double save_s;
    uint32_t vocab; /* token ids are drawn below it */
    uint64_t seed;  /* of the generator, the prompt and tool-payload token ids */
    bool record;    /* keep the finished trajectories as trace lines (result.trace) */
    /* sent as a bearer token with the weight-update calls, which a gateway takes only from its
     * admin; NULL: none */
    const char *admin_token;
    /* --trainer: the trainer also speaks the elastic pool's handshake with the gateway at
     * urls[0] (load/trainer.h), releasing a lent replica in release_s and taking a reclaimed
     * one back in retake_s (emulated seconds, the cost model's) */
    bool pool_trainer;
    double release_s, retake_s;
    /* when not NULL, the steps whose batch is complete (the run ends at steps), for a progress
     * display that reads it from another thread */
    atomic_llong *steps_done;
};

/* One batch the trainer took, as the client saw it; step is the trainer's version then. */
struct load_step {
    int64_t step;
    double wall_s;            /* from its trajectories' first request to their last answer */
    int64_t trajectories;     /* trained */
    int64_t turns;            /* answered turns (resubmissions included) */
    int64_t prompt_tokens;    /* sent */
    int64_t cached_tokens;    /* the engines' reported prefix-cache hits */
    int64_t generated_tokens; /* received */
    int64_t resubmitted;      /* turns sent again: aborted, or their engine died */
    int64_t timed_out;        /* trajectories stopped by config.trajectory_timeout_s: masked,
                               * not in trajectories, their generated tokens in timed_out_tokens
                               * (waste) and in generated_tokens */
    int64_t timed_out_tokens;
    double mean_staleness; /* versions: step - the fleet's version at each one's start */
    double train_s;        /* the trainer's step on it (config.step_cost), emulated seconds;
                            * 0 for the last batch, which is not trained */
    int active_hybrids;    /* the pool's replicas training beside the core in that step */
    /* groups dropped (and replaced) while the batch filled: by dynamic sampling, and as too
     * stale for the step; their generated tokens are waste */
    int64_t filtered_groups, stale_groups;
    int64_t filtered_tokens, stale_tokens;
};

struct load_result {
    struct load_step *steps; /* n_steps, owned */
    int n_steps;
    int64_t groups_launched;
    int64_t *served; /* per URL: turns answered there (owned) */
    int *dead;       /* per URL: 1 when it stopped answering (owned) */
    int weight_updates;
    /* with config.record: one line per trajectory of the groups trained or dropped, the turns
     * as the client saw them (a resubmitted turn: its first prompt and cache hits, every token
     * generated; one stopped by its timeout: the turns it played), the step that took them or was
     * filling when they were dropped (dynamic sampling: the completed ones filtered; too stale:
     * every one aborted), no header */
    struct trace_text trace;
    char error[512];                 /* why the run stopped early ("" when it did not) */
    struct load_trainer_counts pool; /* with config.pool_trainer */
};

/*
 * Checks that c has groups to draw, any of which dynamic sampling may keep: a trace holding a
 * group whose rewards are not all equal (when dynamic sampling is on), or a workload preset to
 * generate from. Returns 0, or -1 with why (size bytes at most) set. load_run checks it first.
 */
int load_check_source(const struct load_config *c, char *why, size_t size);

/*
 * Runs the job on base (dispatching it until done) with client for the requests. Returns 0,
 * or -1 with result->error set (every engine dead, an engine refused a request with a 4xx or
 * answered a turn with garbage, a turn got nothing 50 times in a row, a weight update failed, every
 * trajectory reached config.trajectory_timeout_s so nothing trained, load_check_source refused c,
 * or the caller broke base's loop, from a signal's event say: "interrupted after N of M steps");
 * the steps finished are in *result either way. Free with load_result_free.
 */
int load_run(const struct load_config *c, struct event_base *base, struct net_client *client,
             struct load_result *result);

void load_result_free(struct load_result *r);

#endif
