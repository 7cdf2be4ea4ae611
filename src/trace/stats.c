/*
 * Trace statistics (stats.h). Rows are collected as records stream past; the summary sorts
 * them by step once and computes every block from contiguous runs, so per-step and overall
 * figures come from the same code.
 *
 * Two figures decide whether routing turns by their tool returns can pay: how much a return
 * says about the work still to come once its depth is known (the within-depth rank
 * correlation), and how much of the length variance belongs to the task rather than to the
 * attempt (ICC(1) over prompts). A return row is 24 bytes, so even a trace of millions of
 * returns costs tens of MB; the ICC needs nothing beyond the trajectory rows.
 */
#include "trace/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/json.h"
#include "util/stats.h"
#include "util/vec.h"

/* One trajectory, reduced to what the statistics use. */
struct traj_row {
    int64_t step, prompt_id, epoch;
    int64_t turns, calls;
    int64_t generated_tokens, prompt_tokens, tool_tokens; /* summed over turns */
    int64_t setup_us;                                     /* 0: none recorded */
    enum trace_finish finish;
};

/* One tool call; latencies -1 when unknown. */
struct call_row {
    int64_t step;
    int64_t queue_us, exec_us;
    enum trace_tool_status status;
};

/* One tool return of an uncensored trajectory, for the routing-signal correlations. */
struct return_row {
    int64_t remaining; /* generated tokens of the turns after the return's turn */
    int64_t payload;   /* payload tokens */
    int32_t depth;     /* 1-based number of the turn that made the call */
    int32_t bad;       /* 1 when the status is failure or timeout, else 0 */
};

struct trace_stats {
    VEC(struct traj_row) trajs;
    VEC(struct call_row) calls;
    VEC(struct return_row) returns;
    int64_t censored_trajs, censored_returns; /* truncated or aborted: left out of returns */
};

struct trace_stats *trace_stats_new(void)
{
    return xcalloc(1, sizeof(struct trace_stats));
}

void trace_stats_free(struct trace_stats *s)
{
    if (!s)
        return;
    vec_free(&s->trajs);
    vec_free(&s->calls);
    vec_free(&s->returns);
    free(s);
}

void trace_stats_add(struct trace_stats *s, const struct trace_traj *t)
{
    struct traj_row r = {.step = t->step,
                         .prompt_id = t->prompt_id,
                         .epoch = t->epoch,
                         .turns = (int64_t)t->n_turns,
                         .setup_us = t->setup_us,
                         .finish = t->finish};
    for (size_t i = 0; i < t->n_turns; i++) {
        const struct trace_turn *u = &t->turns[i];
        r.generated_tokens += u->generated_tokens;
        r.prompt_tokens += u->prompt_tokens;
        r.calls += (int64_t)u->n_calls;
        for (size_t c = 0; c < u->n_calls; c++) {
            const struct trace_tool_call *call = &u->calls[c];
            r.tool_tokens += call->payload_tokens;
            struct call_row cr = {t->step, call->queue_us, call->exec_us, call->status};
            vec_push(&s->calls, cr);
        }
    }
    vec_push(&s->trajs, r);

    /* Remaining tokens of a truncated or aborted trajectory are lower bounds: count its
     * returns, keep none. */
    if (t->finish == TRACE_FINISH_TRUNCATED || t->finish == TRACE_FINISH_ABORTED) {
        s->censored_trajs++;
        s->censored_returns += r.calls;
        return;
    }
    int64_t remaining = r.generated_tokens;
    for (size_t i = 0; i < t->n_turns; i++) {
        const struct trace_turn *u = &t->turns[i];
        remaining -= u->generated_tokens;
        for (size_t c = 0; c < u->n_calls; c++) {
            bool bad = u->calls[c].status == TRACE_TOOL_FAILURE ||
                       u->calls[c].status == TRACE_TOOL_TIMEOUT;
            struct return_row rr = {.remaining = remaining,
                                    .payload = u->calls[c].payload_tokens,
                                    .depth = i + 1 < INT32_MAX ? (int32_t)(i + 1) : INT32_MAX,
                                    .bad = bad};
            vec_push(&s->returns, rr);
        }
    }
}

/* ---- summaries --------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and returns {"n", "mean", "p50", "p90", "p99", "max"}, or {"n": 0}. */
static json_t *distribution(double *v, size_t n)
{
    json_t *d = json_pack("{s:I}", "n", (json_int_t)n);
    if (n == 0)
        return d;
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    json_object_set_new(d, "mean", json_real(sum / (double)n));
    json_object_set_new(d, "p50", json_real(stats_quantile_sorted(v, n, 0.50)));
    json_object_set_new(d, "p90", json_real(stats_quantile_sorted(v, n, 0.90)));
    json_object_set_new(d, "p99", json_real(stats_quantile_sorted(v, n, 0.99)));
    json_object_set_new(d, "max", json_integer((json_int_t)v[n - 1])); /* from int64 */
    return d;
}

/* Share of the total held by the largest ceil(frac * n) of sorted[0..n); null if the total
 * is 0. */
static json_t *top_share(const double *sorted, size_t n, double frac)
{
    double total = 0, top = 0;
    size_t k = (size_t)ceil(frac * (double)n);
    for (size_t i = 0; i < n; i++) {
        total += sorted[i];
        if (i >= n - k)
            top += sorted[i];
    }
    return total > 0 ? json_real(top / total) : json_null();
}

/* The trajectory metrics a block summarises, by offset into struct traj_row. */
static const struct {
    const char *name;
    size_t offset;
} traj_metrics[] = {
    {"turns", offsetof(struct traj_row, turns)},
    {"tool_calls", offsetof(struct traj_row, calls)},
    {"prompt_tokens", offsetof(struct traj_row, prompt_tokens)},
    {"tool_tokens", offsetof(struct traj_row, tool_tokens)},
    {"generated_tokens", offsetof(struct traj_row, generated_tokens)}, /* last: see block */
};

/* The distribution of the int64 field at offset of n rows stride bytes apart, over the values
 * at least least (the others unknown or absent); scratch holds n doubles and ends with the
 * values taken, sorted. */
static json_t *field_distribution(const void *rows, size_t n, size_t stride, size_t offset,
                                  int64_t least, double *scratch)
{
    size_t known = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t v = *(const int64_t *)((const char *)rows + i * stride + offset);
        if (v >= least)
            scratch[known++] = (double)v;
    }
    return distribution(scratch, known);
}

/* scratch holds at least max(n, m) doubles. */
static json_t *block(const struct traj_row *t, size_t n, const struct call_row *c, size_t m,
                     double *scratch)
{
    json_t *b = json_pack("{s:I}", "trajectories", (json_int_t)n);
    size_t n_metrics = sizeof traj_metrics / sizeof traj_metrics[0];
    for (size_t k = 0; k < n_metrics; k++)
        json_object_set_new(
            b, traj_metrics[k].name,
            field_distribution(t, n, sizeof *t, traj_metrics[k].offset, INT64_MIN, scratch));
    /* scratch now holds generated tokens, sorted */
    json_object_set_new(b, "longest_5pct_token_share", top_share(scratch, n, 0.05));
    json_object_set_new(b, "longest_10pct_token_share", top_share(scratch, n, 0.10));

    json_object_set_new(
        b, "queue_us",
        field_distribution(c, m, sizeof *c, offsetof(struct call_row, queue_us), 0, scratch));
    json_object_set_new(
        b, "exec_us",
        field_distribution(c, m, sizeof *c, offsetof(struct call_row, exec_us), 0, scratch));
    json_object_set_new(
        b, "setup_us",
        field_distribution(t, n, sizeof *t, offsetof(struct traj_row, setup_us), 1, scratch));

    int64_t finish[TRACE_FINISH_COUNT] = {0}, status[TRACE_TOOL_STATUS_COUNT] = {0};
    for (size_t i = 0; i < n; i++)
        finish[t[i].finish]++;
    for (size_t i = 0; i < m; i++)
        status[c[i].status]++;
    json_t *fj = json_object(), *sj = json_object();
    for (int i = 0; i < TRACE_FINISH_COUNT; i++)
        json_object_set_new(fj, trace_finish_name((enum trace_finish)i), json_integer(finish[i]));
    for (int i = 0; i < TRACE_TOOL_STATUS_COUNT; i++)
        json_object_set_new(sj, trace_tool_status_name((enum trace_tool_status)i),
                            json_integer(status[i]));
    json_object_set_new(b, "finish", fj);
    json_object_set_new(b, "tool_status", sj);
    return b;
}

static int cmp_traj_step(const void *a, const void *b)
{
    int64_t x = ((const struct traj_row *)a)->step, y = ((const struct traj_row *)b)->step;
    return (x > y) - (x < y);
}

static int cmp_call_step(const void *a, const void *b)
{
    int64_t x = ((const struct call_row *)a)->step, y = ((const struct call_row *)b)->step;
    return (x > y) - (x < y);
}

/* Least-squares slope of ys on xs (n points); NaN with fewer than two distinct xs. */
static double ls_slope(const double *xs, const double *ys, size_t n)
{
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) {
        mx += xs[i];
        my += ys[i];
    }
    mx /= (double)n;
    my /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sxx += (xs[i] - mx) * (xs[i] - mx);
        sxy += (xs[i] - mx) * (ys[i] - my);
    }
    return sxx > 0 ? sxy / sxx : NAN;
}

/* Per-step blocks (rows sorted by step) and the drift of mean generated tokens over steps. */
static void steps(json_t *out, const struct traj_row *t, size_t n, const struct call_row *c,
                  size_t m, double *scratch)
{
    json_t *arr = json_array();
    double *xs = xmallocarray(n ? n : 1, sizeof *xs), *ys = xmallocarray(n ? n : 1, sizeof *ys);
    size_t n_steps = 0;
    for (size_t i = 0, j = 0; i < n;) {
        size_t i_end = i, j_end;
        while (i_end < n && t[i_end].step == t[i].step)
            i_end++;
        while (j < m && c[j].step < t[i].step)
            j++;
        for (j_end = j; j_end < m && c[j_end].step == t[i].step; j_end++)
            ;
        json_t *b = block(t + i, i_end - i, c + j, j_end - j, scratch);
        json_object_set_new(b, "step", json_integer(t[i].step));
        json_array_append_new(arr, b);
        double gen = 0;
        for (size_t k = i; k < i_end; k++)
            gen += (double)t[k].generated_tokens;
        xs[n_steps] = (double)t[i].step;
        ys[n_steps++] = gen / (double)(i_end - i);
        i = i_end;
        j = j_end;
    }
    double slope = n_steps ? ls_slope(xs, ys, n_steps) : NAN;
    json_object_set_new(out, "steps", arr);
    json_object_set_new(out, "drift",
                        json_pack("{s:o,s:I}", "generated_tokens_per_step", ujson_real(slope),
                                  "steps", (json_int_t)n_steps));
    free(xs);
    free(ys);
}

static int cmp_prompt(const void *a, const void *b)
{
    const struct traj_row *x = a, *y = b;
    if (x->prompt_id != y->prompt_id)
        return (x->prompt_id > y->prompt_id) - (x->prompt_id < y->prompt_id);
    if (x->step != y->step)
        return (x->step > y->step) - (x->step < y->step);
    return (x->epoch > y->epoch) - (x->epoch < y->epoch);
}

/* How often prompts recur: distinct prompts, and those seen in more than one step / epoch.
 * Sorts t by prompt. */
static json_t *prompts(struct traj_row *t, size_t n)
{
    qsort(t, n, sizeof *t, cmp_prompt);
    int64_t distinct = 0, multi_step = 0, multi_epoch = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        bool steps_differ = false, epochs_differ = false;
        for (; j < n && t[j].prompt_id == t[i].prompt_id; j++) {
            steps_differ |= t[j].step != t[i].step;
            epochs_differ |= t[j].epoch != t[i].epoch;
        }
        distinct++;
        multi_step += steps_differ;
        multi_epoch += epochs_differ;
        i = j;
    }
    return json_pack("{s:I,s:I,s:I}", "distinct", (json_int_t)distinct, "in_multiple_steps",
                     (json_int_t)multi_step, "in_multiple_epochs", (json_int_t)multi_epoch);
}

/* ---- what routing can learn: the return signal and the task effect --------------------- */

static int cmp_return(const void *a, const void *b)
{
    const struct return_row *x = a, *y = b;
    if (x->depth != y->depth)
        return (x->depth > y->depth) - (x->depth < y->depth);
    if (x->remaining != y->remaining)
        return (x->remaining > y->remaining) - (x->remaining < y->remaining);
    if (x->payload != y->payload)
        return (x->payload > y->payload) - (x->payload < y->payload);
    return (x->bad > y->bad) - (x->bad < y->bad);
}

/* A return-weighted mean of per-depth correlations, with the returns it covers. */
struct pooled {
    double sum;     /* sum of rho * returns over depths where rho is defined */
    int64_t n;      /* returns in those depths */
    int64_t depths; /* depths where rho is defined */
};

static void pool_add(struct pooled *p, double rho, size_t n)
{
    if (isnan(rho))
        return;
    p->sum += rho * (double)n;
    p->n += (int64_t)n;
    p->depths++;
}

static json_t *pooled_json(const struct pooled *p)
{
    return json_pack("{s:o,s:I,s:I}", "rho", p->n ? json_real(p->sum / (double)p->n) : json_null(),
                     "returns", (json_int_t)p->n, "depths", (json_int_t)p->depths);
}

/*
 * Spearman's rho of each return feature (bad status, payload tokens) against the remaining
 * generated tokens within each depth of at least TRACE_STATS_MIN_DEPTH_RETURNS returns, pooled
 * as a return-weighted mean; and, for contrast, of depth itself over every return. Sorts r.
 */
static json_t *return_signal(struct return_row *r, size_t n, int64_t censored_trajs,
                             int64_t censored_returns)
{
    qsort(r, n, sizeof *r, cmp_return);
    double *x = xmallocarray(n ? n : 1, sizeof *x), *y = xmallocarray(n ? n : 1, sizeof *y);
    struct pooled status = {0}, payload = {0};
    int64_t skipped_depths = 0, skipped_returns = 0;
    json_t *by_depth = json_array();
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && r[j].depth == r[i].depth)
            j++;
        size_t m = j - i;
        if (m < TRACE_STATS_MIN_DEPTH_RETURNS) {
            skipped_depths++;
            skipped_returns += (int64_t)m;
            i = j;
            continue;
        }
        for (size_t k = 0; k < m; k++) {
            x[k] = r[i + k].bad;
            y[k] = (double)r[i + k].remaining;
        }
        double rho_status = stats_spearman(x, y, m);
        for (size_t k = 0; k < m; k++)
            x[k] = (double)r[i + k].payload;
        double rho_payload = stats_spearman(x, y, m);
        pool_add(&status, rho_status, m);
        pool_add(&payload, rho_payload, m);
        json_array_append_new(by_depth,
                              json_pack("{s:i,s:I,s:o,s:o}", "depth", (int)r[i].depth, "returns",
                                        (json_int_t)m, "status_rho", ujson_real(rho_status),
                                        "payload_rho", ujson_real(rho_payload)));
        i = j;
    }
    for (size_t k = 0; k < n; k++) {
        x[k] = r[k].depth;
        y[k] = (double)r[k].remaining;
    }
    double rho_depth = stats_spearman(x, y, n);
    free(x);
    free(y);
    return json_pack("{s:I,s:I,s:I,s:i,s:I,s:I,s:o,s:o,s:o,s:o}", "returns", (json_int_t)n,
                     "censored_trajectories", (json_int_t)censored_trajs, "censored_returns",
                     (json_int_t)censored_returns, "min_returns_per_depth",
                     TRACE_STATS_MIN_DEPTH_RETURNS, "skipped_depths", (json_int_t)skipped_depths,
                     "skipped_returns", (json_int_t)skipped_returns, "status", pooled_json(&status),
                     "payload", pooled_json(&payload), "depth",
                     json_pack("{s:o,s:I}", "rho", ujson_real(rho_depth), "returns", (json_int_t)n),
                     "by_depth", by_depth);
}

/*
 * ICC(1) of log(1 + generated tokens) by prompt, over prompts with at least two trajectories
 * (t sorted by prompt): the one-way random-effects ANOVA estimate (MSB - MSW) / (MSB + (n0 -
 * 1) MSW), n0 = (N - sum n_i^2 / N) / (k - 1) the effective group size, clamped to [0, 1];
 * null with fewer than two such prompts, no within-prompt degrees of freedom, or no variance.
 */
static json_t *task_effect(const struct traj_row *t, size_t n)
{
    /* pass 1: the grand mean and the group sizes of the prompts kept */
    double total = 0, sum_n2 = 0;
    int64_t groups = 0, kept = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double sum = 0;
        for (; j < n && t[j].prompt_id == t[i].prompt_id; j++)
            sum += log1p((double)t[j].generated_tokens);
        if (j - i >= 2) {
            groups++;
            kept += (int64_t)(j - i);
            total += sum;
            sum_n2 += (double)(j - i) * (double)(j - i);
        }
        i = j;
    }
    double icc = NAN, msb = NAN, msw = NAN;
    if (groups >= 2 && kept > groups) {
        double grand = total / (double)kept, ssb = 0, ssw = 0;
        for (size_t i = 0; i < n;) {
            size_t j = i;
            double sum = 0;
            for (; j < n && t[j].prompt_id == t[i].prompt_id; j++)
                sum += log1p((double)t[j].generated_tokens);
            if (j - i >= 2) {
                double mean = sum / (double)(j - i);
                ssb += (double)(j - i) * (mean - grand) * (mean - grand);
                for (size_t k = i; k < j; k++) {
                    double d = log1p((double)t[k].generated_tokens) - mean;
                    ssw += d * d;
                }
            }
            i = j;
        }
        msb = ssb / (double)(groups - 1);
        msw = ssw / (double)(kept - groups);
        double n0 = ((double)kept - sum_n2 / (double)kept) / (double)(groups - 1);
        double denom = msb + (n0 - 1) * msw;
        if (denom > 0)
            icc = fmin(1.0, fmax(0.0, (msb - msw) / denom));
    }
    return json_pack("{s:s,s:o,s:I,s:I,s:o,s:o}", "metric", "log1p_generated_tokens", "icc1",
                     ujson_real(icc), "prompts", (json_int_t)groups, "trajectories",
                     (json_int_t)kept, "mean_square_between", ujson_real(msb), "mean_square_within",
                     ujson_real(msw));
}

json_t *trace_stats_json(const struct trace_stats *s)
{
    size_t n = s->trajs.n, m = s->calls.n;
    struct traj_row *t = xmallocarray(n ? n : 1, sizeof *t);
    struct call_row *c = xmallocarray(m ? m : 1, sizeof *c);
    double *scratch = xmallocarray(n > m ? n : (m ? m : 1), sizeof *scratch);
    if (n)
        memcpy(t, s->trajs.v, n * sizeof *t);
    if (m)
        memcpy(c, s->calls.v, m * sizeof *c);
    json_t *out = json_object();
    json_object_set_new(out, "overall", block(t, n, c, m, scratch));
    qsort(t, n, sizeof *t, cmp_traj_step);
    qsort(c, m, sizeof *c, cmp_call_step);
    steps(out, t, n, c, m, scratch);
    json_object_set_new(out, "prompts", prompts(t, n));
    json_object_set_new(out, "task_effect", task_effect(t, n)); /* t is sorted by prompt */
    size_t nr = s->returns.n;
    struct return_row *r = xmallocarray(nr ? nr : 1, sizeof *r);
    if (nr)
        memcpy(r, s->returns.v, nr * sizeof *r);
    json_object_set_new(out, "return_signal",
                        return_signal(r, nr, s->censored_trajs, s->censored_returns));
    free(r);
    free(t);
    free(c);
    free(scratch);
    return out;
}
