/*
 * `libra load`: the rollout side of an RL job, played as a client against engines (or a
 * gateway) over HTTP.
 *
 * Trajectories come as trace records (a trace file, or the workload generator's records):
 * each turn sends the whole context as token ids to SGLang's /generate — the previous context,
 * the tokens the engine generated, the tool's payload — with libra's request object carrying
 * the trajectory's identity, the tool returns since the previous turn and the turn's script
 * (docs/emu.md "libra's request object"); between turns it waits the record's tool time,
 * scaled like the emulator's clock. Batches of GRPO groups run one after another; the trainer
 * takes each finished batch for train_s of emulated time, and when the job's schedule says so
 * the engines' weights are then updated through their own calls, in the job's sync mode and
 * transport (through a gateway, the update group's set-up goes to each engine it lists, with
 * that engine's rank offset, as a trainer sets it up). With overlap (one step of staleness) the
 * next batch rolls out while the trainer works and meets the update in flight; without, it waits
 * for both.
 *
 * A trajectory stays on the engine of its first turn (sticky, for the prefix cache), which is
 * the one with the fewest requests in flight. A turn whose engine cannot be reached (connection
 * refused or cut) marks the engine dead and is sent again, whole, to another one; a turn that
 * comes back aborted (an engine paused with abort) is resubmitted with its partial output
 * appended and the rest of its script (AReaL's interruptible generation), so no trajectory is
 * lost.
 *
 * Threading: runs on the caller's event loop; not thread-safe.
 */
#ifndef LOAD_LOAD_H
#define LOAD_LOAD_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

#include "job/job.h"
#include "load/style.h"
#include "net/client.h"
#include "spec/config.h"
#include "trace/trace.h"

struct load_config {
    const char *const *urls; /* engine (or gateway) base URLs, e.g. http://127.0.0.1:30000 */
    int n_urls;
    enum load_style style;          /* the RL framework's client (load/style.h) */
    const char *model;              /* served model name (vLLM requests name it) */
    const struct trace_traj *trajs; /* whole groups in launch order; borrowed */
    size_t n_trajs;
    int group_size;                /* trajectories per group (GRPO n) */
    int steps;                     /* batches; n_trajs must hold them */
    struct job_rules job;          /* groups per step, the sync schedule (job/job.h) */
    enum spec_sync_mode sync_mode; /* drain: the update waits for the turns in flight;
                                    * abort_resume: pause with abort (turns come back partial
                                    * and are resubmitted), update, continue; keep: pause in
                                    * place, update, continue */
    bool nccl;         /* the transport: a weight-update group and broadcasts, else disk */
    bool overlap;      /* the next step's trajectories start without waiting for the update
                        * (rl.max_staleness >= 1): the update meets turns in flight */
    double time_scale; /* wall seconds per emulated second (tool and training time) */
    double train_s;    /* the trainer's step on a batch, emulated seconds (0: none); the
                        * weight update follows it */
    uint32_t vocab;    /* token ids are drawn below it */
    uint64_t seed;     /* of the prompt and tool-payload token ids */
    bool record;       /* keep the finished trajectories as trace lines (result.trace) */
    /* sent as a bearer token with the weight-update calls, which a gateway takes only from its
     * admin; NULL: none */
    const char *admin_token;
};

/* One batch, as the client saw it. */
struct load_step {
    int64_t step;
    double wall_s;            /* from its first request to its last answer */
    int64_t trajectories;     /* finished */
    int64_t turns;            /* answered turns (resubmissions included) */
    int64_t prompt_tokens;    /* sent */
    int64_t cached_tokens;    /* the engines' reported prefix-cache hits */
    int64_t generated_tokens; /* received */
    int64_t resubmitted;      /* turns sent again: aborted, or their engine died */
};

struct load_result {
    struct load_step *steps; /* n_steps, owned */
    int n_steps;
    int64_t *served; /* per URL: turns answered there (owned) */
    int *dead;       /* per URL: 1 when it stopped answering (owned) */
    int weight_updates;
    struct trace_text trace; /* with config.record: one line per trajectory of the finished
                              * steps, the turns as the client saw them (no header) */
    char error[256];         /* why the run stopped early ("" when it did not) */
};

/*
 * Runs the job on base (dispatching it until done) with client for the requests. Returns 0,
 * or -1 with result->error set (every engine dead, an engine refused a request with a 4xx, a
 * weight update failed); the steps finished are in *result either way. Free with
 * load_result_free.
 */
int load_run(const struct load_config *c, struct event_base *base, struct net_client *client,
             struct load_result *result);

void load_result_free(struct load_result *r);

#endif
