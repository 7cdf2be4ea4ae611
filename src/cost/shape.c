/*
 * Shape-derived quantities (see shape.h): parameter counts split the way the cost formulas use
 * them, so that a decode step, a training token and a memory budget all count the same
 * parameters.
 */
#include "cost/shape.h"

#include <math.h>

int cost_shape_init(struct cost_shape *s, const struct spec_model *m)
{
    if (m->layers <= 0 || m->hidden <= 0 || m->heads <= 0 || m->head_dim <= 0 || m->vocab <= 0 ||
        m->kv_heads <= 0 || m->heads % m->kv_heads != 0)
        return LIBRA_EINVAL;
    bool moe = m->experts > 0;
    if (moe ? (m->top_k <= 0 || m->top_k > m->experts || m->expert_ffn <= 0) : m->ffn <= 0)
        return LIBRA_EINVAL;

    double h = m->hidden, q = (double)m->heads * m->head_dim,
           kv = (double)m->kv_heads * m->head_dim;
    double attn = h * q + 2.0 * h * kv + q * h + (m->qkv_bias ? q + 2.0 * kv : 0.0);
    double expert = 3.0 * h * m->expert_ffn; /* SwiGLU: gate, up, down */
    double ffn_active = moe ? h * m->experts + m->top_k * expert : 3.0 * h * m->ffn;
    double ffn_total = moe ? h * m->experts + m->experts * expert : ffn_active;

    s->layers = m->layers;
    s->hidden = h;
    s->q_dim = q;
    s->kv_dim = kv;
    s->heads = m->heads;
    s->kv_heads = m->kv_heads;
    s->vocab = m->vocab;
    s->layer_params = attn + ffn_active;
    s->layer_params_total = attn + ffn_total;
    s->head_params = (double)m->vocab * h;
    s->embed_params = m->tied_embeddings ? 0.0 : s->head_params;
    s->params_active = s->layers * s->layer_params + s->head_params;
    s->params_total = s->layers * s->layer_params_total + s->head_params + s->embed_params;
    s->moe = moe;
    s->experts = moe ? m->experts : 0.0;
    s->top_k = moe ? m->top_k : 0.0;
    s->expert_params = moe ? expert : 0.0;
    return 0;
}

double cost_kv_bytes_per_token(const struct cost_shape *s, int tp, double dtype_bytes)
{
    /* each GPU holds its share of KV heads, at least one (replicated when TP exceeds them) */
    double heads_per_gpu = ceil(s->kv_heads / tp);
    double head_dim = s->kv_dim / s->kv_heads;
    return 2.0 * s->layers * heads_per_gpu * head_dim * dtype_bytes;
}

double cost_seq_forward_flops(const struct cost_shape *s, double len)
{
    return 2.0 * s->params_active * len + 2.0 * s->layers * s->q_dim * len * (len + 1.0);
}
