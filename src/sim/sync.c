/*
 * Weight updates of the disaggregated modes: rl.sync_mode × rl.transport (libra-spec §5).
 *
 * An update runs in phases. With a disk transport the trainer first writes a checkpoint
 * (busy for that long, then free to train on). Then the fleet is quiesced as the sync mode
 * says: drain holds every new turn and waits until no request is left on any engine (the
 * reference); abort_resume aborts every live request at once, keeping its partial output to
 * resubmit after the update (its tokens then come from two policy versions); keep pauses the
 * engines in place with their requests and KV (vLLM pause mode=keep). Then the weights move:
 * an NCCL broadcast from the trainer (which takes part, so it is busy from the start of the
 * update to its end), a reload from disk, or a restart of every engine from disk. Finally
 * every prefix cache is flushed (old KV no longer matches the weights), the fleet's version
 * advances and held turns are sent. An update asked for while one is running starts when it
 * ends, the trainer waiting.
 */
#include <math.h>
#include <stdlib.h>

#include "sim/internal.h"

/* Whether some rollout instance sits outside the node of the trainer's rank 0 (GPU 0); a lent
 * or retired one gets no weights. */
static bool fleet_cross_node(const struct sim *s)
{
    int gpn = s->cfg->cluster.gpus_per_node;
    for (int i = 0; i < s->n_inst; i++) {
        enum sim_inst_state st = s->inst[i].state;
        if (st != SIM_INST_LENT && st != SIM_INST_RETIRED && s->inst[i].gpu / gpn != 0)
            return true;
    }
    return false;
}

void sim_weight_update(const struct sim *s, struct cost_weight_update *out)
{
    cost_weight_update(&s->st.lifecycle, &s->shape, s->in->hw, s->cfg->rl.transport,
                       fleet_cross_node(s), out);
}

static void trainer_free(struct sim *s)
{
    s->train_busy = false;
    s->wait_since_s = s->now;
    struct sim_step *last = &s->steps.v[s->steps.n - 1];
    last->sync_s = s->now - last->end_s;
    sim_trace_phase(s, SIM_USE_SYNC, last->end_s, SIM_ROW_TRAINER);
    s->ops->resume(s);
}

static void transfer(struct sim *s)
{
    s->sync_phase = SIM_SYNC_TRANSFER;
    struct cost_weight_update u;
    sim_weight_update(s, &u);
    /* a broadcast over a fleet that changed first rebuilds its group; disk needs none */
    double rebuild = s->cfg->rl.transport == SPEC_TRANSPORT_NCCL ? s->rebuild_s : 0;
    s->rebuild_s = 0;
    sim_schedule(s, s->now + u.transfer_s + rebuild, SIM_EV_SYNC, 0, SIM_SYNC_TRANSFER);
}

/* Aborts every live request, keeping its output for the resubmission after the update. */
static void abort_live(struct sim *s)
{
    uint32_t *live;
    size_t n = sim_trajs_in(s, SIM_T_GEN, -1, &live);
    for (size_t k = 0; k < n; k++) {
        struct sim_traj *t = &s->traj.v[live[k]];
        sim_traj_suspend(s, t);
        vec_push(&s->held, sim_traj_ref(s, t));
    }
    free(live);
}

static void quiesce(struct sim *s)
{
    s->sync_phase = SIM_SYNC_QUIESCE;
    s->quiesce_s = s->now;
    switch (s->cfg->rl.sync_mode) {
    case SPEC_SYNC_DRAIN:
        s->hold = true;
        sim_sync_poll(s);
        return;
    case SPEC_SYNC_ABORT_RESUME:
        s->hold = true;
        abort_live(s);
        break;
    case SPEC_SYNC_KEEP:
        sim_fleet_ready(s, false);
        break;
    }
    transfer(s);
}

static void start(struct sim *s)
{
    s->sync_version = s->version;
    s->sync_start_s = s->now;
    struct cost_weight_update u;
    sim_weight_update(s, &u);
    double save = u.save_s;
    if (save > 0) {
        s->sync_phase = SIM_SYNC_SAVE;
        sim_schedule(s, s->now + save, SIM_EV_SYNC, 0, SIM_SYNC_SAVE);
    } else {
        quiesce(s);
    }
}

void sim_sync_begin(struct sim *s)
{
    s->train_busy = true;
    if (s->sync_phase != SIM_SYNC_NONE)
        s->sync_pending = true;
    else
        start(s);
}

void sim_sync_poll(struct sim *s)
{
    if (s->sync_phase == SIM_SYNC_QUIESCE && s->cfg->rl.sync_mode == SPEC_SYNC_DRAIN &&
        s->live_requests == 0)
        transfer(s);
}

/* keep: the tokens each live request generated under the old weights. */
static void mark_splits(struct sim *s)
{
    for (size_t k = 0; k < s->traj.n; k++) {
        struct sim_traj *t = &s->traj.v[k];
        if (t->use && t->state == SIM_T_GEN &&
            engine_generated_tokens(s->inst[t->inst].eng, t->req, &t->split_tokens) != 0)
            sim_fail(s, LIBRA_EINTERNAL, "internal: live request of trajectory %llu unknown",
                     (unsigned long long)t->uid);
    }
}

static void release_held(struct sim *s)
{
    s->hold = false;
    uint64_t *held = s->held.v;
    size_t n = s->held.n;
    s->held.v = NULL;
    s->held.n = s->held.cap = 0;
    for (size_t k = 0; k < n && !s->rc; k++) {
        struct sim_traj *t = sim_traj_deref(s, held[k]);
        if (!t || t->state != SIM_T_HELD)
            continue;
        if (s->inst[t->inst].eng)
            sim_submit(s, t);
        else
            sim_reroute(s, t);
    }
    free(held);
}

static void apply(struct sim *s)
{
    bool keep = s->cfg->rl.sync_mode == SPEC_SYNC_KEEP;
    if (keep)
        mark_splits(s);
    sim_fleet_update(s, s->sync_version);
    if (keep)
        sim_fleet_ready(s, true);
    s->sync_phase = SIM_SYNC_NONE;
    s->out->syncs++;
    sim_trace_slice(s, SIM_PID_TRAINER, 1, "weight update", s->sync_start_s, s->now,
                    json_pack("{s:I}", "version", (json_int_t)s->sync_version));
    sim_trace_phase(s, SIM_USE_SYNC, s->quiesce_s, SIM_ROW_FLEET);
    release_held(s);
    if (s->sync_pending) {
        s->sync_pending = false;
        start(s);
    } else if (s->train_busy && s->cfg->rl.transport == SPEC_TRANSPORT_NCCL) {
        trainer_free(s);
        return;
    }
    s->ops->resume(s);
}

void sim_sync_event(struct sim *s, uint64_t phase)
{
    if (phase == SIM_SYNC_SAVE) {
        trainer_free(s);
        quiesce(s);
    } else {
        apply(s);
    }
}
