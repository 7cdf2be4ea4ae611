/* The cost of a routing decision (cost.h). */
#include "sched/cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

void sched_cost_rates(const struct sched_cost_model *m, const struct spec_bucket_layout *l,
                      int64_t context_tokens, struct cost_rate *out)
{
    for (int b = 0; b < l->n; b++)
        m->rate(m->ctx, l->bucket[b].tp[0], context_tokens, 0.0, &out[b]);
}

uint32_t sched_rate_context_key(int64_t context_tokens)
{
    return (uint32_t)(32 * log2(context_tokens > 1 ? (double)context_tokens : 1.0) + 0.5);
}

/* The context a key stands for. */
static int64_t key_context(uint32_t ctx_key)
{
    return (int64_t)(exp2((double)ctx_key / 32) + 0.5);
}

void sched_rate_memo_get(struct sched_rate_memo *memo, const struct sched_cost_model *m, int tp,
                         uint32_t ctx_key, double batch, struct cost_rate *out)
{
    if (!(batch > 0)) {
        if (!memo->planned)
            memo->planned = xcalloc(SPEC_TP_SIZES * SCHED_RATE_CONTEXT_KEYS, sizeof *memo->planned);
        struct cost_rate *slot =
            &memo->planned[spec_tp_index(tp) * SCHED_RATE_CONTEXT_KEYS + ctx_key];
        if (!(slot->token_s > 0))
            m->rate(m->ctx, tp, key_context(ctx_key), 0.0, slot);
        *out = *slot;
        return;
    }
    uint64_t b = (uint64_t)(batch < 65535 ? batch : 65535);
    uint64_t key = (uint64_t)tp << 32 | (uint64_t)ctx_key << 16 | b;
    uint64_t i;
    if (intmap_get(&memo->index, key, &i)) {
        *out = memo->rates.v[i];
        return;
    }
    if (memo->rates.n >= SCHED_RATE_MEMO) {
        intmap_free(&memo->index);
        memo->rates.n = 0;
    }
    m->rate(m->ctx, tp, key_context(ctx_key), (double)b, out);
    intmap_put(&memo->index, key, memo->rates.n);
    vec_push(&memo->rates, *out);
}

void sched_rate_memo_free(struct sched_rate_memo *memo)
{
    free(memo->planned);
    intmap_free(&memo->index);
    vec_free(&memo->rates);
}
