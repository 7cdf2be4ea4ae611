/*
 * Trace statistics (stats.h). Rows are collected as records stream past; the summary sorts
 * them by step once and computes every block from contiguous runs, so per-step and overall
 * figures come from the same code.
 */
#include "trace/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/stats.h"
#include "util/vec.h"

/* One trajectory, reduced to what the statistics use. */
struct traj_row {
    int64_t step, prompt_id, epoch;
    int64_t turns, calls;
    int64_t generated_tokens, prompt_tokens, tool_tokens; /* summed over turns */
    enum trace_finish finish;
};

/* One tool call; latencies -1 when unknown. */
struct call_row {
    int64_t step;
    int64_t queue_us, exec_us;
    enum trace_tool_status status;
};

struct trace_stats {
    VEC(struct traj_row) trajs;
    VEC(struct call_row) calls;
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
    free(s);
}

void trace_stats_add(struct trace_stats *s, const struct trace_traj *t)
{
    struct traj_row r = {.step = t->step,
                         .prompt_id = t->prompt_id,
                         .epoch = t->epoch,
                         .turns = (int64_t)t->n_turns,
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

/* scratch holds at least max(n, m) doubles. */
static json_t *block(const struct traj_row *t, size_t n, const struct call_row *c, size_t m,
                     double *scratch)
{
    json_t *b = json_pack("{s:I}", "trajectories", (json_int_t)n);
    size_t n_metrics = sizeof traj_metrics / sizeof traj_metrics[0];
    for (size_t k = 0; k < n_metrics; k++) {
        for (size_t i = 0; i < n; i++)
            scratch[i] = (double)*(const int64_t *)((const char *)&t[i] + traj_metrics[k].offset);
        json_object_set_new(b, traj_metrics[k].name, distribution(scratch, n));
    }
    /* scratch now holds generated tokens, sorted */
    json_object_set_new(b, "longest_5pct_token_share", top_share(scratch, n, 0.05));
    json_object_set_new(b, "longest_10pct_token_share", top_share(scratch, n, 0.10));

    size_t known = 0;
    for (size_t i = 0; i < m; i++)
        if (c[i].queue_us >= 0)
            scratch[known++] = (double)c[i].queue_us;
    json_object_set_new(b, "queue_us", distribution(scratch, known));
    known = 0;
    for (size_t i = 0; i < m; i++)
        if (c[i].exec_us >= 0)
            scratch[known++] = (double)c[i].exec_us;
    json_object_set_new(b, "exec_us", distribution(scratch, known));

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
                        json_pack("{s:o,s:I}", "generated_tokens_per_step",
                                  isnan(slope) ? json_null() : json_real(slope), "steps",
                                  (json_int_t)n_steps));
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
    free(t);
    free(c);
    free(scratch);
    return out;
}
