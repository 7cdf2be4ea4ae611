/*
 * The trajectory length CDFs of a `libra sim --json` result (docs/report.md): per resource
 * manager, the share of trajectories trained after warm-up whose generated tokens, or whose
 * time from first turn to end, is at most x. They come from the run's log-binned histograms
 * (run.trajectory_lengths, docs/sim.md "Metrics"): a point is drawn at each bin's upper edge,
 * the histograms of every mode sharing one grid of edges, so the CDF is exact at the points
 * and says nothing between them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/internal.h"
#include "sim/sim.h"

/* The histogram at member of mode's run.trajectory_lengths, false when it holds nothing. The
 * shape check (report_check_shape) made it as libra writes it: edges one more than counts,
 * above 0 and increasing, every count an integer from 0. */
static bool histogram(const json_t *mode, const char *member, const json_t **edges,
                      const json_t **counts)
{
    const json_t *h = report_get(report_get(mode, "run/trajectory_lengths"), member);
    *edges = json_object_get(h, "bin_edges");
    *counts = json_object_get(h, "counts");
    return json_array_size(*counts) > 0;
}

/* Whether a and b are one edge of the shared grid (they come from the same formula). */
static bool same_edge(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

/* The upper edges of every mode's bins, sorted, each once; returns their count. */
static size_t union_edges(struct report_ctx *ctx, const json_t *modes, const char **names,
                          size_t n_modes, const char *member, double **out)
{
    size_t cap = 0;
    for (size_t m = 0; m < n_modes; m++)
        cap += json_array_size(
            report_get(report_get(json_object_get(modes, names[m]), "run/trajectory_lengths"),
                       report_fmt(ctx, "%s/counts", member)));
    double *x = arena_calloc(ctx->arena, cap + 1, sizeof *x);
    size_t n = 0;
    for (size_t m = 0; m < n_modes; m++) {
        const json_t *edges, *counts;
        if (!histogram(json_object_get(modes, names[m]), member, &edges, &counts))
            continue;
        for (size_t i = 1; i < json_array_size(edges) && n < cap; i++)
            x[n++] = json_number_value(json_array_get(edges, i));
    }
    qsort(x, n, sizeof *x, report_by_value);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || !same_edge(x[i], x[u - 1]))
            x[u++] = x[i];
    *out = x;
    return u;
}

/* Percent of mode's trajectories at most each of the n edges x (NaN where it has none). */
static double *cdf(struct report_ctx *ctx, const json_t *mode, const char *member, const double *x,
                   size_t n)
{
    double *y = report_nans(ctx, n + 1);
    const json_t *edges, *counts;
    if (!histogram(mode, member, &edges, &counts))
        return y;
    size_t bins = json_array_size(counts);
    double total = 0;
    for (size_t b = 0; b < bins; b++)
        total += json_number_value(json_array_get(counts, b));
    if (!(total > 0))
        return y;
    double below = 0;
    size_t b = 0;
    for (size_t i = 0; i < n; i++) {
        while (b < bins && json_number_value(json_array_get(edges, b + 1)) <= x[i] * (1 + 1e-9))
            below += json_number_value(json_array_get(counts, b++));
        y[i] = 100 * below / total;
    }
    return y;
}

static void cdf_figure(struct report_ctx *ctx, const json_t *modes, const char **names,
                       size_t n_modes, const char *member, const char *name, const char *title,
                       const char *what, const char *x_label)
{
    double *x;
    size_t n = union_edges(ctx, modes, names, n_modes, member, &x);
    if (n == 0) {
        report_note(ctx, name, "no mode's result has run.trajectory_lengths.%s", member);
        return;
    }
    struct chart_series *s = arena_calloc(ctx->arena, n_modes + 1, sizeof *s);
    for (size_t m = 0; m < n_modes; m++)
        s[m] = (struct chart_series){
            names[m], report_color(names[m], m),
            false,    cdf(ctx, json_object_get(modes, names[m]), member, x, n),
            NULL,     NULL,
            NULL};
    report_chart(ctx,
                 &(struct chart){name, title,
                                 report_fmt(ctx,
                                            "The share of the trajectories trained after warm-up "
                                            "whose %s is at most x, per resource manager. Points "
                                            "are the upper edges of %d log-spaced bins per "
                                            "decade (run.trajectory_lengths): exact there, a "
                                            "step of about 12 %% in x between them; x is on a "
                                            "log scale. Where a line flattens below 100 %% is "
                                            "the long tail.",
                                            what, SIM_HIST_PER_DECADE),
                                 x_label, "trajectories at most x (%)", CHART_LINES, n, x, NULL,
                                 CHART_X_LOG, s, n_modes, 0, 100});
}

void report_length_figures(struct report_ctx *ctx, const json_t *modes, const char **names,
                           size_t n)
{
    cdf_figure(ctx, modes, names, n, "generated_tokens", "length-cdf",
               "Generated tokens per trajectory (CDF)", "generated tokens (every turn)",
               "generated tokens per trajectory");
    cdf_figure(ctx, modes, names, n, "duration_s", "duration-cdf",
               "Rollout time per trajectory (CDF)",
               "time from its first turn's start to its end (generation, queues and tool calls)",
               "seconds from first turn to end");
}
