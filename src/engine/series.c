/* Closed-form sums of iteration times over a run of identical iterations; see series.h. */
#include "engine/series.h"

#include <math.h>
#include <stdbool.h>

void engine_series_init(struct engine_series *s, const struct cost_rollout_pre *pre, int64_t n,
                        int64_t ctx_tokens, int64_t m, int64_t cached_tokens)
{
    struct cost_batch b = {0};
    b.decode_seqs = (double)n;
    b.decode_ctx_tokens = (double)ctx_tokens;
    if (m > 0)
        cost_batch_add_prefill(&b, (double)cached_tokens, (double)m, false);
    /* the attention term of cost_iter_parts, split into its two affine bounds */
    double s_kv = pre->kv_bytes_per_token * pre->s_per_kv_byte;
    double tokens = b.decode_seqs + b.prefill_tokens;
    s->kv0 = (b.decode_ctx_tokens + b.prefill_ctx_tokens + tokens) * s_kv;
    s->kv1 = (double)(n + m) * s_kv;
    s->cp0 = (b.decode_ctx_tokens + b.decode_seqs + b.prefill_pairs) * pre->s_per_attn_pair;
    s->cp1 = (double)(n + m * m) * pre->s_per_attn_pair;
    s->a = tokens > 0.0 ? cost_iter_time(pre, &b) - fmax(s->kv0, s->cp0) : 0.0;
}

void engine_series_single(struct engine_series *s, double t_s)
{
    *s = (struct engine_series){.a = t_s};
}

/* Σ_{i=lo}^{hi-1} (x0 + x1·i) */
static double affine_sum(double x0, double x1, double lo, double hi)
{
    if (hi <= lo)
        return 0.0;
    return (hi - lo) * x0 + x1 * ((lo + hi - 1.0) * (hi - lo) / 2.0);
}

double engine_series_sum(const struct engine_series *s, int64_t j)
{
    double n = (double)j;
    double g0 = s->kv0 - s->cp0, g1 = s->kv1 - s->cp1; /* KV bound minus compute bound */
    bool kv_first;                                     /* which bound binds first */
    double split;                                      /* iterations before the lines cross */
    if (g1 == 0.0) {
        kv_first = g0 >= 0.0;
        split = n;
    } else if (g1 > 0.0) { /* compute bound until ceil(-g0/g1), KV bound from there */
        kv_first = false;
        split = fmin(fmax(ceil(-g0 / g1), 0.0), n);
    } else { /* KV bound up to floor(-g0/g1), compute bound after */
        kv_first = true;
        split = fmin(fmax(floor(-g0 / g1) + 1.0, 0.0), n);
    }
    double attn =
        kv_first ? affine_sum(s->kv0, s->kv1, 0.0, split) + affine_sum(s->cp0, s->cp1, split, n)
                 : affine_sum(s->cp0, s->cp1, 0.0, split) + affine_sum(s->kv0, s->kv1, split, n);
    return n * s->a + attn;
}

int64_t engine_series_count(const struct engine_series *s, int64_t lo, int64_t hi, double t0_s,
                            double until_s)
{
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (t0_s + engine_series_sum(s, mid) <= until_s)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}
