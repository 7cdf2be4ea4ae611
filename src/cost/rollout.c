/*
 * Rollout iteration time and KV capacity (formulas in rollout.h). The per-(model, hardware, TP)
 * terms are folded into cost_rollout_pre so that cost_iter_time, which the engine model calls
 * at every batch change and the planner for every candidate, is a few multiply-adds.
 */
#include "cost/rollout.h"

#include <math.h>
#include <string.h>

#include "cost/calib.h"

void cost_rollout_params_default(struct cost_rollout_params *p, const struct spec_hardware *hw)
{
    memset(p, 0, sizeof *p);
    cost_vidur_curves(&p->eta, &p->mu);
    p->eta_kv = 0.8;
    p->mfu_attn = 0.5;
    p->t_seq_s = 30e-6;
    p->ar_latency_s = hw->allreduce_latency_s;
    p->ar_bus_bw_bytes_per_s = hw->allreduce_bus_bw_bytes_per_s;
    p->weight_dtype_bytes = 2.0;
    p->kv_dtype_bytes = 2.0;
    p->act_dtype_bytes = 2.0;
    p->mem_util = 0.9;
    p->workspace_bytes = 2.0 * 1024 * 1024 * 1024;
    p->t_fix_s = hw->decode_t_fix_s > 0.0 ? hw->decode_t_fix_s : cost_fit_t_fix(p);
    if (hw->decode_t_seq_s > 0.0)
        p->t_seq_s = hw->decode_t_seq_s;
}

const struct cost_decode_source *cost_decode_sources(size_t *n)
{
    static const struct cost_decode_source rows[] = {
        {"t_fix",
         "fitted: Qwen2.5-7B, batch 1, 2048 tokens at 11.9 ms/token on an A100 "
         "(calibration.md 3.3a)",
         "vLLM 0.6.3 (Qwen's speed benchmark)"},
        {"eta, mu",
         "measured: Llama-3-8B and CodeLlama-34B linear operators at 1 and 4096 tokens, "
         "TP 1-8, A100 (calibration.md 3.3b)",
         "none: kernels profiled by Vidur (microsoft/vidur 7d47513363)"},
        {"t_seq", "assumed: 30 us per running sequence (calibration.md 5.1: 20-40 us)", "none"},
        {"eta_kv", "assumed: 0.8 of HBM bandwidth for KV reads", "none"},
        {"mfu_attn", "assumed: 0.5 of bf16 peak for attention kernels", "none"},
    };
    *n = sizeof rows / sizeof rows[0];
    return rows;
}

double cost_curve_eval(const struct cost_curve *c, double bytes)
{
    if (bytes <= c->bytes[0])
        return c->eff[0];
    for (int i = 1; i < c->n; i++) {
        if (bytes <= c->bytes[i]) {
            double f = log(bytes / c->bytes[i - 1]) / log(c->bytes[i] / c->bytes[i - 1]);
            return c->eff[i - 1] + f * (c->eff[i] - c->eff[i - 1]);
        }
    }
    return c->eff[c->n - 1];
}

int cost_rollout_pre_init(struct cost_rollout_pre *pre, const struct cost_shape *s,
                          const struct spec_hardware *hw, const struct cost_rollout_params *p,
                          int tp)
{
    if (tp < 1 || fmod(s->heads, tp) != 0.0)
        return LIBRA_EINVAL;
    double bw = hw->hbm_bw_bytes_per_s, peak = hw->bf16_flops_per_s;
    double layer_bytes = s->layer_params * p->weight_dtype_bytes / tp;
    double head_bytes = s->head_params * p->weight_dtype_bytes / tp;

    memset(pre, 0, sizeof *pre);
    pre->tp = tp;
    pre->moe = s->moe;
    pre->layers = s->layers;
    pre->t_layer_weights_s = layer_bytes / (bw * cost_curve_eval(&p->eta, layer_bytes));
    if (s->moe) { /* the experts stream as the iteration's tokens touch them */
        pre->experts = s->experts;
        pre->top_k = s->top_k;
        pre->expert_bytes = s->expert_params * p->weight_dtype_bytes / tp;
        pre->dense_bytes = layer_bytes - s->top_k * pre->expert_bytes;
        pre->bw_bytes_per_s = bw;
        pre->eta = p->eta;
    }
    pre->s_per_layer_token =
        2.0 * s->layer_params / tp / (peak * cost_curve_eval(&p->mu, layer_bytes));
    pre->t_head_weights_s = head_bytes / (bw * cost_curve_eval(&p->eta, head_bytes));
    pre->s_per_head_token =
        2.0 * s->head_params / tp / (peak * cost_curve_eval(&p->mu, head_bytes));
    pre->kv_bytes_per_token = cost_kv_bytes_per_token(s, tp, p->kv_dtype_bytes);
    pre->s_per_kv_byte = 1.0 / (bw * p->eta_kv);
    pre->s_per_attn_pair = 4.0 * s->q_dim * s->layers / tp / (peak * p->mfu_attn);
    if (tp > 1) {
        pre->t_allreduce_fixed_s = 2.0 * s->layers * p->ar_latency_s;
        pre->s_allreduce_per_token = 2.0 * s->layers * 2.0 * (tp - 1) / tp * s->hidden *
                                     p->act_dtype_bytes / p->ar_bus_bw_bytes_per_s;
    }
    pre->t_fix_s = p->t_fix_s;
    pre->t_seq_s = p->t_seq_s;
    pre->weight_bytes_per_gpu = s->params_total * p->weight_dtype_bytes / tp;
    double free_bytes =
        hw->hbm_bytes * p->mem_util - pre->weight_bytes_per_gpu - p->workspace_bytes;
    pre->kv_capacity_tokens = free_bytes > 0.0 ? floor(free_bytes / pre->kv_bytes_per_token) : 0.0;
    return 0;
}

double cost_experts_touched(const struct cost_rollout_pre *pre, double tokens)
{
    if (!pre->moe || tokens <= 0.0)
        return 0.0;
    return pre->experts * -expm1(tokens * log1p(-pre->top_k / pre->experts));
}

double cost_layer_stream_time(const struct cost_rollout_pre *pre, double tokens)
{
    if (!pre->moe)
        return pre->t_layer_weights_s;
    double touched = tokens > 1.0 ? cost_experts_touched(pre, tokens) : pre->top_k;
    double bytes = pre->dense_bytes + touched * pre->expert_bytes;
    return bytes / (pre->bw_bytes_per_s * cost_curve_eval(&pre->eta, bytes));
}

double cost_linear_layer_time(const struct cost_rollout_pre *pre, double tokens)
{
    return hypot(cost_layer_stream_time(pre, tokens), tokens * pre->s_per_layer_token);
}

void cost_batch_add_decode(struct cost_batch *b, double ctx_tokens)
{
    b->decode_seqs += 1.0;
    b->decode_ctx_tokens += ctx_tokens;
}

void cost_batch_add_prefill(struct cost_batch *b, double cached_tokens, double new_tokens,
                            bool done)
{
    b->prefill_seqs += 1.0;
    b->prefill_tokens += new_tokens;
    b->prefill_ctx_tokens += cached_tokens;
    b->prefill_pairs += new_tokens * cached_tokens + new_tokens * (new_tokens + 1.0) / 2.0;
    b->prefill_done_seqs += done ? 1.0 : 0.0;
}

/* Attention's two bounds for batch b (seconds): reading and writing KV, and computing pairs. */
static void attn_times(const struct cost_rollout_pre *pre, const struct cost_batch *b, double *kv_s,
                       double *compute_s)
{
    /* KV read for every query (decode context, cached prefixes) and written for new tokens */
    double tokens = b->decode_seqs + b->prefill_tokens;
    *kv_s = (b->decode_ctx_tokens + b->prefill_ctx_tokens + tokens) * pre->kv_bytes_per_token *
            pre->s_per_kv_byte;
    double pairs = b->decode_ctx_tokens + b->decode_seqs + b->prefill_pairs;
    *compute_s = pairs * pre->s_per_attn_pair;
}

void cost_iter_parts(const struct cost_rollout_pre *pre, const struct cost_batch *b,
                     struct cost_iter_parts *out)
{
    memset(out, 0, sizeof *out);
    double tokens = b->decode_seqs + b->prefill_tokens;
    if (tokens <= 0.0)
        return;
    double lin_compute = tokens * pre->s_per_layer_token;
    out->linear_compute_bound = lin_compute > cost_layer_stream_time(pre, tokens);
    out->linear_s = pre->layers * cost_linear_layer_time(pre, tokens);

    double sampled = b->decode_seqs + b->prefill_done_seqs;
    if (sampled > 0.0)
        out->head_s = hypot(pre->t_head_weights_s, sampled * pre->s_per_head_token);

    double kv_s, attn_compute;
    attn_times(pre, b, &kv_s, &attn_compute);
    out->attn_compute_bound = attn_compute > kv_s;
    out->attn_s = fmax(kv_s, attn_compute);

    out->allreduce_s = pre->t_allreduce_fixed_s + tokens * pre->s_allreduce_per_token;
    out->fixed_s = pre->t_fix_s;
    out->seq_s = (b->decode_seqs + b->prefill_seqs) * pre->t_seq_s;
    out->total_s =
        out->linear_s + out->head_s + out->attn_s + out->allreduce_s + out->fixed_s + out->seq_s;
}

double cost_iter_time(const struct cost_rollout_pre *pre, const struct cost_batch *b)
{
    struct cost_iter_parts parts;
    cost_iter_parts(pre, b, &parts);
    return parts.total_s;
}

double cost_decode_time(const struct cost_rollout_pre *pre, double seqs, double ctx_tokens)
{
    struct cost_batch b = {.decode_seqs = seqs, .decode_ctx_tokens = ctx_tokens};
    return cost_iter_time(pre, &b);
}

void cost_decode_line(const struct cost_rollout_pre *pre, double seqs, double *base_s,
                      double *per_ctx_token_s)
{
    /* attention reads KV and computes pairs for (context + seqs) tokens: the larger rate */
    *per_ctx_token_s = fmax(pre->kv_bytes_per_token * pre->s_per_kv_byte, pre->s_per_attn_pair);
    *base_s = cost_decode_time(pre, seqs, 0.0);
}

/* Σ y0 + dy·k over the indices k in [lo, hi). */
static double line_sum(double y0, double dy, double lo, double hi)
{
    double n = hi - lo;
    return n > 0.0 ? n * y0 + dy * (lo + hi - 1.0) * n / 2.0 : 0.0;
}

/* Σ max(a0 + da·k, b0 + db·k) over k in [0, n): each line over the indices where it is the
 * larger, split where they cross. */
static double max_line_sum(double a0, double da, double b0, double db, double n)
{
    double dd = da - db;
    if (dd == 0.0)
        return a0 >= b0 ? line_sum(a0, da, 0.0, n) : line_sum(b0, db, 0.0, n);
    double cross = (b0 - a0) / dd; /* a ≥ b below it when dd < 0, above it when dd > 0 */
    if (dd < 0.0) {
        double split = fmin(fmax(floor(cross) + 1.0, 0.0), n);
        return line_sum(a0, da, 0.0, split) + line_sum(b0, db, split, n);
    }
    double split = fmin(fmax(ceil(cross), 0.0), n);
    return line_sum(b0, db, 0.0, split) + line_sum(a0, da, split, n);
}

double cost_prefill_time(const struct cost_rollout_pre *pre, double cached_tokens,
                         double new_tokens, double chunk_tokens)
{
    if (new_tokens <= 0.0)
        return 0.0;
    if (chunk_tokens <= 0.0 || chunk_tokens > new_tokens)
        chunk_tokens = new_tokens;
    double full = ceil(new_tokens / chunk_tokens) - 1.0; /* the chunks before the last */
    double done = full * chunk_tokens;
    struct cost_batch last = {0};
    cost_batch_add_prefill(&last, cached_tokens + done, new_tokens - done, true);
    double t = cost_iter_time(pre, &last);
    if (full <= 0.0)
        return t;
    /* Full chunks differ only in their cached prefix, which only attention reads: every other
     * term is the first chunk's, and attention's two bounds are lines in the chunk's index, so
     * the sum is closed-form — a prompt of 2^40 tokens costs what one of 2^13 does. */
    struct cost_batch first = {0}, second = {0};
    cost_batch_add_prefill(&first, cached_tokens, chunk_tokens, false);
    cost_batch_add_prefill(&second, cached_tokens + chunk_tokens, chunk_tokens, false);
    struct cost_iter_parts parts;
    cost_iter_parts(pre, &first, &parts);
    double kv0, compute0, kv1, compute1;
    attn_times(pre, &first, &kv0, &compute0);
    attn_times(pre, &second, &kv1, &compute1);
    return t + full * (parts.total_s - parts.attn_s) +
           max_line_sum(kv0, kv1 - kv0, compute0, compute1 - compute0, full);
}

double cost_single_request_s_per_token(const struct cost_rollout_pre *pre, double prompt_tokens,
                                       double gen_tokens)
{
    /* one decode iteration per further token, its context a line in the token's index */
    double base_s, per_ctx_token_s;
    cost_decode_line(pre, 1.0, &base_s, &per_ctx_token_s);
    double decodes = fmax(floor(gen_tokens) - 1.0, 0.0);
    double t = cost_prefill_time(pre, 0.0, prompt_tokens, prompt_tokens) +
               line_sum(base_s + per_ctx_token_s * prompt_tokens, per_ctx_token_s, 0.0, decodes);
    return t / gen_tokens;
}
