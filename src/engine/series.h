/*
 * Closed-form time of a run of identical engine iterations.
 *
 * While no sequence joins, finishes, completes its prefill or is preempted, each iteration
 * decodes the same n sequences and prefills the same chunk of m tokens; only the context grows,
 * by n + m tokens per iteration. In cost_iter_time that context enters one term, attention =
 * max(KV traffic, attention compute), and both are affine in it; every other term depends on
 * token and sequence counts only. So iteration j (from 0) takes
 *     t_j = a + max(kv0 + kv1·j, cp0 + cp1·j)
 * and the first j iterations take S(j) = j·a + Σ_{i<j} max(...): the two lines cross at most
 * once, so the sum is two arithmetic series split at the crossing. docs/engine.md has the
 * derivation; tests/unit/test_engine_diff.c compares it with per-iteration stepping.
 */
#ifndef ENGINE_SERIES_H
#define ENGINE_SERIES_H

#include <stdint.h>

#include "cost/rollout.h"

/* Seconds per iteration j: a + max(kv0 + kv1·j, cp0 + cp1·j). */
struct engine_series {
    double a;        /* the terms that do not depend on context */
    double kv0, kv1; /* KV-traffic bound of attention at j = 0, and its growth per iteration */
    double cp0, cp1; /* compute bound of attention at j = 0, and its growth per iteration */
};

/*
 * The series of a run whose first iteration decodes n sequences holding ctx_tokens of KV in
 * total and prefills a chunk of m new tokens (not completing its prompt) after cached_tokens,
 * each later iteration holding n + m more tokens of context. With n = m = 0 it is empty.
 */
void engine_series_init(struct engine_series *s, const struct cost_rollout_pre *pre, int64_t n,
                        int64_t ctx_tokens, int64_t m, int64_t cached_tokens);

/* A series of one iteration of known duration t_s (a batch of any other shape). */
void engine_series_single(struct engine_series *s, double t_s);

/* S(j): seconds taken by iterations 0 .. j-1 (j >= 0). */
double engine_series_sum(const struct engine_series *s, int64_t j);

/* The largest j in [lo, hi] with t0_s + S(j) <= until_s (the iterations of a run started at
 * t0_s that end by until_s), given that j = lo qualifies. O(log(hi - lo)). */
int64_t engine_series_count(const struct engine_series *s, int64_t lo, int64_t hi, double t0_s,
                            double until_s);

#endif
