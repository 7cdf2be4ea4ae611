/*
 * The move costs of cost/move.h: the rollout model at batch 1 on an idle instance, the same
 * formulas the simulator's engines use, so the router's move rule and the simulated outcome of
 * a move agree.
 */
#include "cost/move.h"

#include <math.h>
#include <string.h>

#include "libra/libra.h"

int cost_move_model_init(struct cost_move_model *m, const struct cost_shape *s,
                         const struct spec_hardware *hw, const struct cost_rollout_params *p,
                         double chunk_tokens, int max_seqs)
{
    memset(m, 0, sizeof *m);
    int usable = 0;
    for (int k = 0; k < SPEC_TP_SIZES; k++)
        usable += cost_rollout_pre_init(&m->pre[k], s, hw, p, 1 << k) == 0;
    m->chunk_tokens = chunk_tokens;
    m->max_seqs = max_seqs > 0 ? max_seqs : 1;
    return usable ? 0 : LIBRA_EINVAL;
}

double cost_move_decode_s(void *ctx, int tp, int64_t context_tokens, double tokens)
{
    const struct cost_move_model *m = ctx;
    double mid = (double)context_tokens + tokens / 2;
    return tokens * cost_decode_time(&m->pre[spec_tp_index(tp)], 1.0, mid);
}

double cost_move_s(void *ctx, int from_tp, int to_tp, int64_t context_tokens)
{
    const struct cost_move_model *m = ctx;
    (void)from_tp;
    return cost_prefill_time(&m->pre[spec_tp_index(to_tp)], 0.0, (double)context_tokens,
                             m->chunk_tokens);
}

void cost_move_rate(void *ctx, int tp, int64_t context_tokens, double batch, struct cost_rate *out)
{
    const struct cost_move_model *m = ctx;
    const struct cost_rollout_pre *pre = &m->pre[spec_tp_index(tp)];
    double c = context_tokens > 0 ? (double)context_tokens : 1.0;
    double planned = fmax(1.0, fmin(m->max_seqs, floor(pre->kv_capacity_tokens / c)));
    double iter_s = cost_decode_time(pre, planned, planned * c);
    out->token_s = batch > 0 ? cost_decode_time(pre, batch, batch * c) : iter_s;
    out->gpu_token_s = tp * iter_s / planned;
    out->move_s = cost_move_s(ctx, tp, tp, context_tokens);
    out->move_gpu_s = tp * out->move_s;
}
