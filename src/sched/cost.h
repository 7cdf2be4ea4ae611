/*
 * What a routing decision costs, in GPU-seconds (docs/routing.md "Cost and regret").
 *
 * Accuracy calls a decision right when its bucket is the bucket of the true remaining tokens,
 * but a user pays in time, and without load the largest TP is always fastest for one
 * trajectory. So a decision is charged what its bucket's GPUs spend on the trajectory's
 * remaining work, and what finishing late costs everyone else:
 *
 *   cost_b(R) = R·g_b + [move]·mg_b + λ·max(0, e + R·l_b + [move]·ml_b − D)
 *
 * for R remaining generated tokens kept in bucket b from the decision on: g_b the GPU-seconds
 * per token there (TP × iteration time at the instance's planned batch / that batch: the
 * trajectory's share of the instance), l_b the seconds per token (one iteration), mg_b and ml_b
 * the GPU-seconds and seconds of re-prefilling the context after a move into b, e the seconds
 * the trajectory has run so far, D its batch's deadline ((k + 1) × the planned step: later, it
 * holds up a training step) and λ the GPUs that wait per second it is late. The caller supplies
 * the rates through a callback (sched/ takes costs only so, DESIGN.md; cost_move_rate is the
 * one the commands give), so the evaluator's regret and cmlfq_h's choice are the same sum.
 */
#ifndef SCHED_COST_H
#define SCHED_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/move.h"
#include "spec/bucket.h"
#include "util/intmap.h"
#include "util/vec.h"

struct sched_cost_model {
    /* Fills out (l_b, g_b, ml_b, mg_b) for an instance of TP tp at context_tokens; l_b with
     * batch sequences running (<= 0: the planned batch). */
    void (*rate)(void *ctx, int tp, int64_t context_tokens, double batch, struct cost_rate *out);
    void *ctx;         /* borrowed: it must outlive every user */
    bool live;         /* the caller's registry tells real load: cmlfq_h takes l_b at the batch
                          of the instance it would be placed on (the simulator, the gateway) */
    double deadline_s; /* D; <= 0: no deadline */
    double late_gpus;  /* λ, GPU-seconds per second late */
};

/* The rates of every bucket of l (at its first TP size) at context_tokens and the planned
 * batch, into out[0, l->n). */
void sched_cost_rates(const struct sched_cost_model *m, const struct spec_bucket_layout *l,
                      int64_t context_tokens, struct cost_rate *out);

/* cost_b(R) above for rates r, R = remaining_tokens, e = elapsed_s; move: the trajectory comes
 * from another bucket (the first placement is not a move: every bucket prefills it). */
static inline double sched_cost(const struct sched_cost_model *m, const struct cost_rate *r,
                                double remaining_tokens, double elapsed_s, bool move)
{
    double gpu_s = remaining_tokens * r->gpu_token_s + (move ? r->move_gpu_s : 0.0);
    if (m->deadline_s <= 0)
        return gpu_s;
    double end_s = elapsed_s + remaining_tokens * r->token_s + (move ? r->move_s : 0.0);
    return end_s > m->deadline_s ? gpu_s + m->late_gpus * (end_s - m->deadline_s) : gpu_s;
}

/* The mean of sched_cost over remaining tokens tokens[0, n) (ascending) of weights weight[k]
 * (summing to 1), whose mean is mean_tokens: the GPU term by linearity, the lateness term over
 * the points that end late. */
static inline double sched_expected_cost(const struct sched_cost_model *m,
                                         const struct cost_rate *r, const double *tokens,
                                         const double *weight, int n, double mean_tokens,
                                         double elapsed_s, bool move)
{
    double gpu_s = mean_tokens * r->gpu_token_s + (move ? r->move_gpu_s : 0.0);
    if (m->deadline_s <= 0)
        return gpu_s;
    double slack_s = m->deadline_s - elapsed_s - (move ? r->move_s : 0.0);
    double late_s = 0;
    for (int k = n - 1; k >= 0; k--) { /* the longest first: the late ones are at the top */
        double x = tokens[k] * r->token_s - slack_s;
        if (!(x > 0))
            break;
        late_s += weight[k] * x;
    }
    return gpu_s + m->late_gpus * late_s;
}

/*
 * Rates remembered by the router that asks for them many times a second (cmlfq_h): the rate of
 * (TP, context, batch) with the context rounded to 1/32 of an octave (2.2 %), so that a rate is
 * a pure function of its key and a router's decisions do not depend on what it asked before.
 * Planned-batch rates sit in a table by TP and context key (128 KiB once used); others in a
 * map of at most SCHED_RATE_MEMO keys, which then starts afresh. A zeroed memo is empty.
 */
#define SCHED_RATE_MEMO 65536
#define SCHED_RATE_CONTEXT_KEYS (32 * 64) /* contexts up to 2^64 tokens */
struct sched_rate_memo {
    struct cost_rate *planned; /* [log2(TP)][context key]; token_s 0: not yet computed */
    struct intmap index;       /* (TP, context key, batch) -> index into rates */
    VEC(struct cost_rate) rates;
};

/* The context key of context_tokens: round(32 log2(context)). */
uint32_t sched_rate_context_key(int64_t context_tokens);

/* m's rate for TP tp (1, 2, 4 or 8) at the context of key ctx_key and batch (<= 0: planned),
 * through memo. */
void sched_rate_memo_get(struct sched_rate_memo *memo, const struct sched_cost_model *m, int tp,
                         uint32_t ctx_key, double batch, struct cost_rate *out);

void sched_rate_memo_free(struct sched_rate_memo *memo);

#endif
