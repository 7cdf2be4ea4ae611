/*
 * The move costs of cost/move.h: the rollout model at batch 1 on an idle instance, the same
 * formulas the simulator's engines use, so the router's move rule and the simulated outcome of
 * a move agree.
 */
#include "cost/move.h"

#include <string.h>

#include "libra/libra.h"

/* Index of TP size tp (1, 2, 4, 8) in arrays by log2(TP); sizes above 8 take 8's. */
static int tp_index(int tp)
{
    int k = 0;
    while ((1 << k) < tp && k < SPEC_TP_SIZES - 1)
        k++;
    return k;
}

int cost_move_model_init(struct cost_move_model *m, const struct cost_shape *s,
                         const struct spec_hardware *hw, const struct cost_rollout_params *p,
                         double chunk_tokens)
{
    memset(m, 0, sizeof *m);
    int usable = 0;
    for (int k = 0; k < SPEC_TP_SIZES; k++)
        usable += cost_rollout_pre_init(&m->pre[k], s, hw, p, 1 << k) == 0;
    m->chunk_tokens = chunk_tokens;
    return usable ? 0 : LIBRA_EINVAL;
}

double cost_move_decode_s(void *ctx, int tp, int64_t context_tokens, double tokens)
{
    const struct cost_move_model *m = ctx;
    double mid = (double)context_tokens + tokens / 2;
    return tokens * cost_decode_time(&m->pre[tp_index(tp)], 1.0, mid);
}

double cost_move_s(void *ctx, int from_tp, int to_tp, int64_t context_tokens)
{
    const struct cost_move_model *m = ctx;
    (void)from_tp;
    return cost_prefill_time(&m->pre[tp_index(to_tp)], 0.0, (double)context_tokens,
                             m->chunk_tokens);
}
