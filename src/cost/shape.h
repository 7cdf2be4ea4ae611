/*
 * Derived quantities of a transformer shape that every cost formula needs: linear parameters
 * per layer (what a decode step streams and what a token multiplies), head and embedding
 * parameters, attention widths, KV bytes per token.
 *
 * Computed once per model from its spec_model and passed by pointer to the hot functions, so
 * no formula re-derives them. Counts are plain doubles (parameters, not bytes) because every
 * consumer multiplies them by bytes or FLOPs.
 *
 * MoE: a mixture-of-experts model computes with its active parameters (router and top-k
 * experts per token) and holds its total parameters in memory; what an inference iteration
 * streams from HBM is every expert that any of its tokens selects (cost/rollout.h); training
 * splits the experts over expert-parallel ranks where its layout says (cost/train.h). `moe` is
 * set so that every printer can label such figures.
 */
#ifndef COST_SHAPE_H
#define COST_SHAPE_H

#include <stdbool.h>

#include "spec/preset.h"

struct cost_shape {
    double layers;
    double hidden;
    double q_dim;              /* query heads · head_dim */
    double kv_dim;             /* KV heads · head_dim (one of K or V) */
    double heads;              /* query heads */
    double kv_heads;           /* KV heads */
    double vocab;              /* vocabulary size */
    double layer_params;       /* linear parameters of one layer touched per token (attention
                                * projections incl. biases, dense FFN or router + top-k experts) */
    double layer_params_total; /* same with every expert (memory); = layer_params when dense */
    double head_params;        /* output projection (vocab · hidden) */
    double embed_params;       /* input embedding; 0 when tied to the head */
    double params_active;      /* layers · layer_params + head: multiplies each token (k·N) */
    double params_total;       /* every parameter held in memory (norms excluded) */
    bool moe;                  /* a mixture of experts; label its figures */
    double experts;            /* routed experts per layer; 0 when dense */
    double top_k;              /* experts each token selects; 0 when dense */
    double expert_params;      /* parameters of one expert of one layer; 0 when dense */
};

/*
 * Fills s from m. Returns 0, or LIBRA_EINVAL when the shape is impossible (non-positive
 * layers, hidden, heads, head_dim or vocab; kv_heads not dividing heads; a dense model without
 * an FFN; an MoE model without top_k or expert_ffn). s is untouched on error.
 */
int cost_shape_init(struct cost_shape *s, const struct spec_model *m);

/* Bytes of KV cache per token held by one GPU of a TP group, over all layers: KV heads are
 * split across the group, and replicated when TP exceeds their number (one head per GPU). */
double cost_kv_bytes_per_token(const struct cost_shape *s, int tp, double dtype_bytes);

/* Forward FLOPs of one sequence of len tokens processed causally from scratch: 2·N_active per
 * token plus attention 2·L·q_dim·len² (QKᵀ and PV over the causal triangle). */
double cost_seq_forward_flops(const struct cost_shape *s, double len);

#endif
