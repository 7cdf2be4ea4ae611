/*
 * Figures of a sweep (`libra sim --sweep ... --seeds N --json`, libra.sim-sweep/1): each
 * metric of every resource manager against the grid points, as the median across seeds with
 * the interquartile range, so that a difference smaller than the spread between seeds is
 * seen as such. Quartiles are R-7, as the sweep's own summary (util/stats.h); they are
 * computed here from the cells, so that every metric of a run can be drawn, not only those
 * the summary holds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/internal.h"
#include "util/stats.h"

/* A metric of one run: its path below a mode's result (below the cell's result for ratios). */
struct metric {
    const char *name, *title, *path, *y_label;
    double scale;
};

static const struct metric metrics[] = {
    {"trained-tokens-per-s", "Trained tokens/s", "run/trained_tokens_per_s", "trained tokens/s", 1},
    {"mean-step-s", "Mean step time", "run/mean_step_s", "mean step time (s)", 1},
    {"rollout-utilisation", "Rollout utilisation", "run/rollout_utilisation",
     "rollout utilisation (%)", 100},
    {"train-utilisation", "Training utilisation", "run/train_utilisation",
     "training utilisation (%)", 100},
    {"tail-share", "Tail share of rollout", "run/tail_share", "tail share (%)", 100},
};

static const struct metric ratios[] = {
    {"libra / colocated", NULL, "ratios/libra_over_colocated_tokens", NULL, 1},
    {"libra / async", NULL, "ratios/libra_over_async_tokens", NULL, 1},
};

/* What every figure of the sweep shares. */
struct sweep {
    const json_t **cell; /* the cells grouped by grid point: point p's are cell[first[p]..] */
    size_t *first;       /* points + 1 offsets */
    size_t points;
    const char **label; /* per grid point */
    const char *x_label;
    double seeds;
};

/* Groups the cells by their grid point (a counting sort, cells of no point left out). */
static void group_cells(struct report_ctx *ctx, const json_t *cells, struct sweep *sw)
{
    size_t n = json_array_size(cells);
    sw->first = arena_calloc(ctx->arena, sw->points + 2, sizeof *sw->first);
    sw->cell = arena_calloc(ctx->arena, n + 1, sizeof *sw->cell);
    size_t *point = arena_calloc(ctx->arena, n + 1, sizeof *point);
    for (size_t c = 0; c < n; c++) {
        double p = report_num(json_array_get(cells, c), "point");
        point[c] = p >= 0 && p < (double)sw->points && p == floor(p) ? (size_t)p : sw->points;
        sw->first[point[c] + 1]++;
    }
    for (size_t p = 0; p < sw->points; p++)
        sw->first[p + 1] += sw->first[p];
    size_t *next = arena_calloc(ctx->arena, sw->points + 1, sizeof *next);
    memcpy(next, sw->first, sw->points * sizeof *next);
    for (size_t c = 0; c < n; c++)
        if (point[c] < sw->points)
            sw->cell[next[point[c]]++] = json_array_get(cells, c);
}

/* Median and quartiles across the cells of each grid point of the value at path (scaled). */
static struct chart_series spread(struct report_ctx *ctx, const struct sweep *sw, const char *path,
                                  double scale)
{
    double *mid = arena_calloc(ctx->arena, sw->points + 1, sizeof *mid);
    double *lo = arena_calloc(ctx->arena, sw->points + 1, sizeof *lo);
    double *hi = arena_calloc(ctx->arena, sw->points + 1, sizeof *hi);
    double *v = arena_calloc(ctx->arena, sw->first[sw->points] + 1, sizeof *v);
    for (size_t p = 0; p < sw->points; p++) {
        size_t n = 0;
        for (size_t c = sw->first[p]; c < sw->first[p + 1]; c++) {
            double x = report_num(json_object_get(sw->cell[c], "result"), path);
            if (isfinite(x))
                v[n++] = scale * x;
        }
        qsort(v, n, sizeof *v, report_by_value);
        mid[p] = stats_quantile_sorted(v, n, 0.5);
        lo[p] = stats_quantile_sorted(v, n, 0.25);
        hi[p] = stats_quantile_sorted(v, n, 0.75);
    }
    return (struct chart_series){NULL, NULL, false, mid, lo, hi, NULL};
}

static const char *caption(struct report_ctx *ctx, const struct sweep *sw, const char *what)
{
    return report_fmt(ctx,
                      "%s at each grid point of the sweep: the median across its %.0f seeds, "
                      "the whisker from the first to the third quartile (R-7). A difference "
                      "within the whiskers is within the spread between seeds.",
                      what, sw->seeds);
}

/* Whether series s[0..n) draw a point; else notes figure name as not drawn, and why: a chart
 * of axes alone would read as a sweep that measured nothing. */
static bool drawn(struct report_ctx *ctx, const struct sweep *sw, const char *name,
                  const struct chart_series *s, size_t n, const char *why)
{
    for (size_t k = 0; k < n; k++)
        for (size_t p = 0; p < sw->points; p++)
            if (isfinite(s[k].y[p]))
                return true;
    report_note(ctx, name, "%s", why);
    return false;
}

static void metric_figure(struct report_ctx *ctx, const struct sweep *sw, const struct metric *m,
                          const char **modes, size_t n_modes)
{
    struct chart_series *s = arena_calloc(ctx->arena, n_modes + 1, sizeof *s);
    for (size_t k = 0; k < n_modes; k++) {
        s[k] = spread(ctx, sw, report_fmt(ctx, "modes/%s/%s", modes[k], m->path), m->scale);
        s[k].name = modes[k];
        s[k].color = report_color(modes[k], k);
    }
    if (!drawn(ctx, sw, m->name, s, n_modes,
               report_fmt(ctx, "no run of the sweep has a mode's %s: a failed run has none",
                          m->y_label)))
        return;
    report_chart(
        ctx,
        &(struct chart){m->name, report_fmt(ctx, "%s across the sweep", m->title),
                        caption(ctx, sw, report_fmt(ctx, "%s of each resource manager", m->title)),
                        sw->x_label, m->y_label, CHART_LINES, sw->points, NULL, sw->label, false, s,
                        n_modes, m->scale == 100 ? 0 : NAN, m->scale == 100 ? 100 : NAN});
}

static void ratio_figure(struct report_ctx *ctx, const struct sweep *sw)
{
    struct chart_series s[2];
    for (int k = 0; k < 2; k++) {
        s[k] = spread(ctx, sw, ratios[k].path, 1);
        s[k].name = ratios[k].name;
        s[k].color = report_color(NULL, k == 0 ? 0 : 1);
    }
    if (!drawn(ctx, sw, "ratios", s, 2,
               "no run of the sweep has libra beside colocated or async (ratios."
               "libra_over_colocated_tokens, ratios.libra_over_async_tokens)"))
        return;
    report_chart(ctx,
                 &(struct chart){"ratios", "libra's trained tokens/s over the baselines'",
                                 caption(ctx, sw,
                                         "libra's trained tokens/s divided by colocated's and by "
                                         "async's (1: the same rate)"),
                                 sw->x_label, "ratio", CHART_LINES, sw->points, NULL, sw->label,
                                 false, s, 2, 1, NAN});
}

/* The grid point's settings as a label: the value alone when one key is swept. With
 * with_keys, every key's (those set has) as KEY=VALUE. */
static const char *point_label(struct report_ctx *ctx, const json_t *grid, const json_t *set,
                               bool with_keys)
{
    size_t n = json_array_size(grid);
    const char *label = "";
    for (size_t k = 0; k < n; k++) {
        const char *key = report_str(json_array_get(grid, k), "key");
        const char *v = key ? json_string_value(json_object_get(set, key)) : NULL;
        if (with_keys && !v)
            continue;
        label = n == 1 && !with_keys ? (v ? v : "?")
                                     : report_fmt(ctx, "%s%s%s=%s", label, label[0] ? ", " : "",
                                                  key ? key : "?", v ? v : "?");
    }
    return label;
}

/* The median and quartiles that entries[0..n) hold at member path (NULL entries: NaN). */
static struct chart_series spread_member(struct report_ctx *ctx, const json_t *const *entries,
                                         size_t n, const char *path)
{
    double *mid = report_nans(ctx, n + 1), *lo = report_nans(ctx, n + 1);
    double *hi = report_nans(ctx, n + 1);
    for (size_t i = 0; i < n; i++) {
        mid[i] = report_num(entries[i], report_fmt(ctx, "%s/median", path));
        lo[i] = report_num(entries[i], report_fmt(ctx, "%s/q1", path));
        hi[i] = report_num(entries[i], report_fmt(ctx, "%s/q3", path));
    }
    return (struct chart_series){NULL, NULL, false, mid, lo, hi, NULL};
}

/* Entry i of the view of every point of the attribution (NULL where a point lacks it). */
static const json_t **across(struct report_ctx *ctx, const json_t *attribution, const char *view,
                             size_t i)
{
    size_t points = json_array_size(attribution);
    const json_t **out = arena_calloc(ctx->arena, points + 1, sizeof *out);
    for (size_t q = 0; q < points; q++)
        out[q] = json_array_get(json_object_get(json_array_get(attribution, q), view), i);
    return out;
}

/* Bars of one view of the attribution (the ladder or the leave-one-out), labelled with each
 * bar's median and its median ratio at member ratio. */
static void bar_figure(struct report_ctx *ctx, const json_t *bars, const char *ratio,
                       const char *ratio_name, const char *name, const char *title,
                       const char *what, double seeds)
{
    size_t n = json_array_size(bars);
    const char **cats = arena_calloc(ctx->arena, n + 1, sizeof *cats);
    const char **text = arena_calloc(ctx->arena, n + 1, sizeof *text);
    const json_t **entries = arena_calloc(ctx->arena, n + 1, sizeof *entries);
    for (size_t i = 0; i < n; i++)
        entries[i] = json_array_get(bars, i);
    struct chart_series *s = arena_calloc(ctx->arena, 1, sizeof *s);
    *s = spread_member(ctx, entries, n, "trained_tokens_per_s");
    for (size_t i = 0; i < n; i++) {
        const json_t *bar = json_array_get(bars, i);
        const char *label = report_str(bar, "label");
        double r = report_num(bar, report_fmt(ctx, "%s/median", ratio));
        cats[i] = label ? label : "?";
        text[i] = !isfinite(s->y[i]) ? NULL
                  : isfinite(r)      ? report_fmt(ctx, "%.0f (%.2fx)", s->y[i], r)
                                     : report_fmt(ctx, "%.0f", s->y[i]);
    }
    s->name = "trained tokens/s";
    s->color = "#59a14f";
    s->text = text;
    report_chart(
        ctx,
        &(struct chart){name, title,
                        report_fmt(ctx,
                                   "%s Each bar is the median across %.0f seeds of the trained "
                                   "tokens per second measured after warm-up, its whisker the "
                                   "first to third quartile (R-7); the label gives the median "
                                   "ratio, taken seed by seed, to %s. A missing bar is a run that "
                                   "failed (the sweep's cells say why).",
                                   what, seeds, ratio_name),
                        "run", "trained tokens/s", CHART_BARS, n, NULL, cats, false, s, 1, 0, NAN});
}

/* Each bar of the ladder against the points of the other swept keys. */
static void ladder_across(struct report_ctx *ctx, const json_t *attribution, const json_t *grid,
                          double seeds)
{
    size_t points = json_array_size(attribution);
    const json_t *first = json_object_get(json_array_get(attribution, 0), "ladder");
    size_t n = json_array_size(first);
    const char **labels = arena_calloc(ctx->arena, points, sizeof *labels);
    const char *key = report_str(json_array_get(grid, 0), "key"); /* the one other key's */
    bool one_key = json_array_size(grid) == 2 && key;
    for (size_t q = 0; q < points; q++) {
        const json_t *set = json_object_get(json_array_get(attribution, q), "set");
        labels[q] = one_key ? report_str(set, key) : point_label(ctx, grid, set, true);
        labels[q] = labels[q] ? labels[q] : "?";
    }
    struct chart_series *s = arena_calloc(ctx->arena, n + 1, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        s[i] = spread_member(ctx, across(ctx, attribution, "ladder", i), points,
                             "trained_tokens_per_s");
        const char *label = report_str(json_array_get(first, i), "label");
        s[i].name = label ? label : "?";
        s[i].color = report_color(NULL, i);
    }
    report_chart(ctx,
                 &(struct chart){"attribution-across", "Each bar of the ladder across the sweep",
                                 report_fmt(ctx,
                                            "The trained tokens per second of each bar of the "
                                            "ladder at each point of the other swept keys: the "
                                            "median across %.0f seeds, the whisker from the first "
                                            "to the third quartile (R-7).",
                                            seeds),
                                 one_key ? key : "grid point", "trained tokens/s", CHART_LINES,
                                 points, NULL, labels, false, s, n, 0, NAN});
}

/* The attribution of `libra sim --attribution`: per point of the other swept keys, the ladder
 * and the leave-one-out view (the sweep's "attribution" member). */
static void attribution_figures(struct report_ctx *ctx, const json_t *attribution,
                                const json_t *grid, double seeds)
{
    size_t points = json_array_size(attribution);
    for (size_t q = 0; q < points; q++) {
        const json_t *at = json_array_get(attribution, q);
        const char *where = "", *suffix = "";
        if (points > 1) {
            where =
                report_fmt(ctx, " (%s)", point_label(ctx, grid, json_object_get(at, "set"), true));
            suffix = report_fmt(ctx, "-%zu", q + 1);
        }
        bar_figure(ctx, json_object_get(at, "ladder"), "over_previous", "the bar before",
                   report_fmt(ctx, "attribution%s", suffix),
                   report_fmt(ctx, "What each mechanism adds%s", where),
                   "libra's mechanisms added one at a time, in the paper's order: colocated "
                   "(verl's hybrid engine, rollout TP tuned), a disaggregated async split (split "
                   "and TP tuned), the planner's layout with one TP size, heterogeneous TP routed "
                   "by C-MLFQ, the elastic hybrid pool, online replanning (libra whole).",
                   seeds);
        bar_figure(ctx, json_object_get(at, "leave_one_out"), "over_libra", "libra",
                   report_fmt(ctx, "leave-one-out%s", suffix),
                   report_fmt(ctx, "libra without each mechanism%s", where),
                   "libra whole, then without heterogeneous TP with C-MLFQ (one TP size), without "
                   "the elastic pool, without online replanning. A ladder's steps depend on its "
                   "order; what the whole loses without a mechanism does not.",
                   seeds);
    }
    if (points > 1)
        ladder_across(ctx, attribution, grid, seeds);
}

/* Counts the cells whose run failed: they are in no median and no bar, so the page says how
 * many there are (an attribution's as a plain sweep's). */
static void failed_cells(struct report_ctx *ctx, const json_t *cells)
{
    size_t failed = 0;
    for (size_t c = 0; c < json_array_size(cells); c++)
        failed += json_object_get(json_array_get(cells, c), "error") != NULL;
    if (failed)
        report_note(ctx, "failed cells",
                    "%zu of %zu runs failed and are in no median (cells[].error)", failed,
                    json_array_size(cells));
}

/* The per-mode figures of a plain sweep. */
static void mode_figures(struct report_ctx *ctx, const json_t *doc)
{
    const json_t *summary = json_object_get(doc, "summary"), *grid = json_object_get(doc, "grid");
    const json_t *cells = json_object_get(doc, "cells");
    struct sweep sw = {.points = json_array_size(summary),
                       .seeds = (double)json_array_size(json_object_get(doc, "seeds"))};
    if (sw.points == 0 || json_array_size(cells) == 0) {
        report_note(ctx, "every figure", "the sweep has no summary or no cells");
        return;
    }
    group_cells(ctx, cells, &sw);
    sw.label = arena_calloc(ctx->arena, sw.points, sizeof *sw.label);
    json_t *modes = json_object(); /* every mode of any grid point */
    for (size_t p = 0; p < sw.points; p++) {
        const json_t *point = json_array_get(summary, p);
        sw.label[p] = point_label(ctx, grid, json_object_get(point, "set"), false);
        const json_t *m = json_object_get(point, "modes");
        if (json_is_object(m))
            json_object_update(modes, (json_t *)m);
    }
    const char *key = report_str(json_array_get(grid, 0), "key");
    sw.x_label = json_array_size(grid) == 1 && key ? key : "grid point";
    const char **names;
    size_t n = report_keys(ctx, modes, report_mode_order, &names);
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        metric_figure(ctx, &sw, &metrics[i], names, n);
    ratio_figure(ctx, &sw);
    json_decref(modes); /* names point into it: nothing uses them past here */
}

void report_sweep_figures(struct report_ctx *ctx, const json_t *doc)
{
    const json_t *attribution = json_object_get(doc, "attribution");
    if (json_array_size(attribution))
        attribution_figures(ctx, attribution, json_object_get(doc, "grid"),
                            (double)json_array_size(json_object_get(doc, "seeds")));
    else
        mode_figures(ctx, doc);
    failed_cells(ctx, json_object_get(doc, "cells"));
}
