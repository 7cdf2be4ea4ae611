/*
 * A layout's lendable replica (see lend.h). The memory of a hybrid is the cost model's memory
 * of the same layout with DP reduced to the replica's own ranks: with nothing to shard the
 * optimizer over, the distributed optimizer holds the whole state, which is what a replica
 * that steps its own optimizer in lockstep with the core holds.
 */
#include "ehp/lend.h"

#include <math.h>
#include <string.h>

#include "cost/lifecycle.h"
#include "plan/train.h"

int ehp_replica_ranks(const struct plan_train_layout *l)
{
    return l->fsdp && l->shard_dp > 0 ? l->shard_dp : 1;
}

int ehp_lend_layout(const struct plan_train_layout *l, const struct plan_settings *st,
                    const struct cost_shape *s, const struct spec_hardware *hw,
                    struct ehp_lend *out)
{
    memset(out, 0, sizeof *out);
    int shard_group = l->shard_dp;
    if (l->tp < 1 || l->pp < 1 || l->cp < 1 || l->dp < 1 || l->budget_tokens < 1 ||
        shard_group < 0 || (shard_group > 0 && !l->fsdp))
        return LIBRA_EINVAL;
    bool hsdp = shard_group > 0;
    struct cost_train_config core, hybrid;
    plan_train_config(l, st, &core);
    core.shard_dp = 0; /* memory: a group's ranks as the whole of DP, as a hybrid's */
    if (hsdp && l->dp % shard_group == 0)
        core.dp = shard_group; /* the core shards inside its groups too */
    if (cost_train_memory(s, hw, &st->train, &core, &out->core_memory) != 0)
        return LIBRA_EINVAL;
    if (l->fsdp && !hsdp) {
        out->why = EHP_LEND_FULL_SHARD;
        return 0;
    }
    if (hsdp && l->dp % shard_group != 0) {
        out->why = EHP_LEND_SHARD_GROUP;
        return 0;
    }

    out->dp_ranks = hsdp ? shard_group : 1;
    out->shards = (hsdp ? shard_group : l->tp * l->pp) * l->cp;
    out->replica_gpus = out->dp_ranks * l->tp * l->pp * l->cp;
    out->core_replicas = l->dp / out->dp_ranks;
    hybrid = core;
    hybrid.dp = out->dp_ranks;
    cost_train_memory(s, hw, &st->train, &hybrid, &out->memory);

    const struct cost_lifecycle_params *lp = &st->lifecycle;
    out->state_bytes = cost_state_bytes(&st->train, s);
    out->grad_bytes = cost_grad_bytes(&st->train, s);
    out->exchange_s = cost_grad_exchange_s(hw, out->grad_bytes, out->shards);
    out->times = (struct ehp_times){
        .start_s = lp->trainer_init_s,
        .fetch_s = cost_state_fetch_s(lp, hw, out->state_bytes, out->shards),
        /* the link between the replica's ranks and its core lane's, then one exchange */
        .zero_sync_s = cost_group_rebuild_s(lp, 2 * out->replica_gpus) + out->exchange_s,
        .return_s = cost_cold_start_s(lp, s),
    };
    out->join_s = out->times.start_s + out->times.fetch_s + out->times.zero_sync_s;

    if (out->replica_gpus > hw->gpus_per_node)
        out->why = EHP_LEND_NODE;
    else if (l->ep > 1 && (out->dp_ranks * l->tp * l->cp) % l->ep != 0)
        out->why = EHP_LEND_EXPERTS;
    else if (!out->memory.fits)
        out->why = EHP_LEND_MEMORY;
    out->can_lend = out->why == EHP_LEND_OK;
    return 0;
}

int ehp_train_step(const struct plan_train_layout *l, const struct ehp_lend *lend,
                   const struct plan_settings *st, const struct cost_shape *s,
                   const struct spec_hardware *hw, const struct cost_train_seqs *seqs, int active,
                   struct cost_train_scratch *sc, struct ehp_step_cost *out)
{
    memset(out, 0, sizeof *out);
    if (active < 0 || !lend->can_lend)
        return LIBRA_EINVAL;
    struct cost_train_config c;
    plan_train_config(l, st, &c);
    c.dp = l->dp + active * lend->dp_ranks;
    struct cost_train_load load;
    int rc = cost_train_deal(seqs, s, c.dp, c.minibatches, c.micro_batch_tokens,
                             c.balance_each_minibatch, sc, &load);
    if (rc == 0)
        rc = cost_train_step_time(s, hw, &st->train, &c, &load, &out->train);
    if (rc != 0)
        return rc;
    int per_lane = (active + lend->core_replicas - 1) / lend->core_replicas;
    out->dp_ranks = c.dp;
    out->exchange_s = per_lane * lend->exchange_s;
    out->step_s = out->train.step_s + out->exchange_s;
    return 0;
}

/* The core's step alone on config c. */
static int core_step_s(const struct cost_train_config *c, const struct plan_settings *st,
                       const struct cost_shape *s, const struct spec_hardware *hw,
                       const struct cost_train_seqs *seqs, struct cost_train_scratch *sc,
                       double *step_s)
{
    struct cost_train_load load;
    struct cost_train_step out;
    int rc =
        cost_train_deal(seqs, s, c->dp, c->minibatches, c->micro_batch_tokens, true, sc, &load);
    if (rc == 0)
        rc = cost_train_step_time(s, hw, &st->train, c, &load, &out);
    *step_s = rc == 0 ? out.step_s : 0.0;
    return rc;
}

/* The core's and the active hybrids' step, the batch dealt to all their ranks. */
static int pool_step_s(const struct plan_train_layout *l, const struct plan_settings *st,
                       const struct ehp_lend *lend, int active, const struct cost_train_config *c,
                       const struct cost_shape *s, const struct spec_hardware *hw,
                       const struct cost_train_seqs *seqs, struct cost_train_scratch *sc,
                       double *step_s)
{
    /* as the core's ranks, hybrids beyond one sequence per rank have nothing to train */
    int n = (int)seqs->n, room = (n - c->dp) / lend->dp_ranks;
    active = active < room ? active : room;
    int dp = c->dp + active * lend->dp_ranks, mb = c->minibatches;
    if (dp * mb > n)
        mb = n / dp;
    struct plan_train_layout core = *l;
    core.dp = c->dp;
    core.budget_tokens = (int)ceil(c->micro_batch_tokens / core.cp);
    struct plan_settings batch = *st;
    batch.minibatches = mb;
    struct ehp_step_cost out;
    int rc = ehp_train_step(&core, lend, &batch, s, hw, seqs, active, sc, &out);
    *step_s = rc == 0 ? out.step_s : 0.0;
    return rc;
}

int ehp_batch_step_s(const struct plan_train_layout *l, const struct plan_settings *st,
                     const struct ehp_lend *lend, int active, const struct cost_shape *s,
                     const struct spec_hardware *hw, const struct cost_train_seqs *seqs,
                     struct cost_train_scratch *sc, double *step_s)
{
    size_t n = seqs->n;
    int dp = (size_t)l->dp < n ? l->dp : (int)n;
    int mb = st->minibatches;
    if ((size_t)dp * (size_t)mb > n)
        mb = (int)(n / (size_t)dp);
    struct cost_train_config c;
    plan_train_config(l, st, &c); /* as the planner costs it, on the batch at hand: */
    c.dp = dp;
    while (c.ep > 1 && (c.tp * c.cp * dp) % c.ep != 0) /* fewer ranks: whole expert groups */
        c.ep /= 2;
    c.minibatches = mb;
    c.micro_batch_tokens = fmax(c.micro_batch_tokens, seqs->longest_tokens);
    if (lend)
        return pool_step_s(l, st, lend, active, &c, s, hw, seqs, sc, step_s);
    return core_step_s(&c, st, s, hw, seqs, sc, step_s);
}
