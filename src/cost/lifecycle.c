/*
 * Engine lifecycle costs (see lifecycle.h): each is bytes over the link that carries them plus
 * the fixed part the engines add, so that a bigger model or a slower link changes the answer in
 * the right direction even where the constants are only assumed.
 */
#include "cost/lifecycle.h"

#include <math.h>

void cost_lifecycle_params_default(struct cost_lifecycle_params *lp)
{
    *lp = (struct cost_lifecycle_params){
        .engine_init_s = 30.0,
        .disk_bw_bytes_per_s = 2e9,
        .h2d_bw_bytes_per_s = 20e9,
        .wake_fixed_s = 0.3,
        .bucket_bytes = 512e6,
        .bucket_overhead_s = 5e-3,
        .switch_fixed_s = 2.0,
        .weight_dtype_bytes = 2.0,
        .group_fixed_s = 1.0,
        .group_per_rank_s = 0.01,
        .trainer_init_s = 15.0,
        .fetch_fixed_s = 1.0,
    };
}

static double weight_bytes(const struct cost_lifecycle_params *lp, const struct cost_shape *s)
{
    return s->params_total * lp->weight_dtype_bytes;
}

double cost_cold_start_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s)
{
    return lp->engine_init_s + weight_bytes(lp, s) / lp->disk_bw_bytes_per_s;
}

double cost_wake_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s, int tp)
{
    return lp->wake_fixed_s + weight_bytes(lp, s) / tp / lp->h2d_bw_bytes_per_s;
}

double cost_disk_reload_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s)
{
    return lp->wake_fixed_s + weight_bytes(lp, s) / lp->disk_bw_bytes_per_s;
}

double cost_group_rebuild_s(const struct cost_lifecycle_params *lp, int world_size)
{
    return lp->group_fixed_s + lp->group_per_rank_s * world_size;
}

double cost_broadcast_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s,
                        const struct spec_hardware *hw, bool cross_node)
{
    double bytes = weight_bytes(lp, s);
    double bw = cross_node ? hw->inter_node_bw_bytes_per_s : hw->allreduce_bus_bw_bytes_per_s;
    return ceil(bytes / lp->bucket_bytes) * lp->bucket_overhead_s + bytes / bw;
}

void cost_weight_update(const struct cost_lifecycle_params *lp, const struct cost_shape *s,
                        const struct spec_hardware *hw, enum spec_transport tr, bool cross_node,
                        struct cost_weight_update *out)
{
    *out = (struct cost_weight_update){0};
    switch (tr) {
    case SPEC_TRANSPORT_NCCL:
        out->transfer_s = cost_broadcast_s(lp, s, hw, cross_node);
        out->trainer_transfers = true;
        break;
    case SPEC_TRANSPORT_DISK_RELOAD:
        out->save_s = weight_bytes(lp, s) / lp->disk_bw_bytes_per_s;
        out->transfer_s = cost_disk_reload_s(lp, s);
        break;
    case SPEC_TRANSPORT_DISK_RESTART:
        out->save_s = weight_bytes(lp, s) / lp->disk_bw_bytes_per_s;
        out->transfer_s = cost_cold_start_s(lp, s);
        break;
    case SPEC_TRANSPORT_RESHARD:
        break;
    }
}

double cost_state_bytes(const struct cost_train_params *tp, const struct cost_shape *s)
{
    return s->params_total * (tp->weight_bytes + tp->optimizer_bytes);
}

double cost_grad_bytes(const struct cost_train_params *tp, const struct cost_shape *s)
{
    return s->params_total * tp->grad_bytes;
}

double cost_state_fetch_s(const struct cost_lifecycle_params *lp, const struct spec_hardware *hw,
                          double state_bytes, int shards)
{
    return lp->fetch_fixed_s + state_bytes / shards / hw->inter_node_bw_bytes_per_s;
}

double cost_grad_exchange_s(const struct spec_hardware *hw, double grad_bytes, int shards)
{
    return 2.0 * (hw->allreduce_latency_s + grad_bytes / shards / hw->inter_node_bw_bytes_per_s);
}

double cost_reshard_s(const struct cost_lifecycle_params *lp, const struct cost_shape *s,
                      const struct spec_hardware *hw, double train_shard_gpus, int rollout_tp,
                      bool cross_node)
{
    double bytes = weight_bytes(lp, s);
    double missing = fmax(0.0, bytes / rollout_tp - bytes / train_shard_gpus);
    double bw = cross_node ? hw->inter_node_bw_bytes_per_s : hw->allreduce_bus_bw_bytes_per_s;
    return lp->switch_fixed_s + missing / bw;
}

void cost_kv_move(const struct cost_rollout_pre *src, const struct cost_rollout_pre *dst,
                  const struct spec_hardware *hw, double ctx_tokens, double chunk_tokens,
                  bool cross_node, struct cost_kv_move *out)
{
    /* every source GPU sends its KV shard in parallel; a TP mismatch changes who receives,
     * not how much each source link carries */
    double bw = cross_node ? hw->inter_node_bw_bytes_per_s : hw->allreduce_bus_bw_bytes_per_s;
    out->migrate_s = hw->allreduce_latency_s + ctx_tokens * src->kv_bytes_per_token / bw;
    out->recompute_s = cost_prefill_time(dst, 0.0, ctx_tokens, chunk_tokens);
    out->migrate = out->migrate_s < out->recompute_s;
}
