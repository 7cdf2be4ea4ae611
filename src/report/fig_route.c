/*
 * Figures of a routing evaluation (`libra route eval --json`, libra.route-eval/1): accuracy
 * and regret per policy beside their baselines, moves per trajectory, and each bucketed
 * policy's confusion matrix (true bucket by chosen bucket), the view that shows which way a
 * router errs.
 */
#include <math.h>
#include <string.h>

#include "report/internal.h"
#include "report/svg.h"

#define MATRIX_MAX 16 /* buckets; a layout has at most 8 */
#define MATRIX_LEFT 110.0
#define MATRIX_TOP 38.0

/* One bar chart of per-policy values at the paths below policies.P.all (times scale). */
static void policy_bars(struct report_ctx *ctx, const json_t *policies, const char **names,
                        size_t n, const struct chart *spec, const char *const *paths,
                        const char *const *labels, size_t n_series, double scale)
{
    static const char *const colors[] = {"#59a14f", "#76b7b2", "#bab0ac", "#edc948"};
    struct chart_series *s = arena_calloc(ctx->arena, n_series, sizeof *s);
    for (size_t k = 0; k < n_series; k++) {
        double *y = report_nans(ctx, n);
        for (size_t p = 0; p < n; p++)
            y[p] = scale *
                   report_num(report_get(json_object_get(policies, names[p]), "all"), paths[k]);
        s[k] = (struct chart_series){labels[k], colors[k % 4], false, y, NULL, NULL, NULL};
    }
    struct chart c = *spec;
    c.n_x = n;
    c.categories = names;
    c.series = s;
    c.n_series = n_series;
    report_chart(ctx, &c);
}

static void accuracy(struct report_ctx *ctx, const json_t *policies, const char **names, size_t n)
{
    static const char *const paths[] = {"accuracy", "token_weighted_accuracy",
                                        "majority_class/accuracy"};
    static const char *const labels[] = {"accuracy at tool returns", "token-weighted accuracy",
                                         "majority class"};
    policy_bars(ctx, policies, names, n,
                &(struct chart){"accuracy", "Routing accuracy per policy",
                                "Share of each policy's decisions at tool returns whose bucket "
                                "is the bucket of the trajectory's true remaining tokens, the "
                                "same weighted by those tokens, and always answering the most "
                                "frequent true bucket (majority class). A policy without "
                                "buckets of its own (load_balance) has no accuracy bars.",
                                "policy", "decisions (%)", CHART_BARS, 0, NULL, NULL, false, NULL,
                                0, 0, 100},
                paths, labels, 3, 100);
}

static void regret(struct report_ctx *ctx, const json_t *policies, const char **names, size_t n)
{
    static const char *const paths[] = {"regret/per_decision_gpu_s",
                                        "regret/majority_class/per_decision_gpu_s",
                                        "regret/best_constant/per_decision_gpu_s"};
    static const char *const labels[] = {"policy", "majority class", "best constant bucket"};
    size_t scored = 0;
    for (size_t p = 0; p < n; p++)
        scored += isfinite(report_num(json_object_get(policies, names[p]), "all/regret/decisions"));
    if (!scored) {
        report_note(ctx, "regret", "no policy's decisions were scored (policies.*.all.regret)");
        return;
    }
    policy_bars(ctx, policies, names, n,
                &(struct chart){"regret", "Regret per decision",
                                "GPU-seconds each decision costs over the best bucket in "
                                "hindsight (docs/routing.md, \"Cost and regret\"), per policy, "
                                "beside always choosing the majority class's bucket and the "
                                "best constant bucket; lower is better.",
                                "policy", "regret per decision (GPU-s)", CHART_BARS, 0, NULL, NULL,
                                false, NULL, 0, 0, NAN},
                paths, labels, 3, 1);
}

static void moves(struct report_ctx *ctx, const json_t *policies, const char **names, size_t n)
{
    static const char *const paths[] = {"moves_per_trajectory"};
    static const char *const labels[] = {"moves per trajectory"};
    policy_bars(ctx, policies, names, n,
                &(struct chart){"moves", "Moves per trajectory",
                                "How often each policy sent a trajectory's next turn to another "
                                "bucket than its last one, per trajectory: each move pays a "
                                "re-prefill of the context on the new instance (docs/routing.md). "
                                "A policy that never moves (load_balance, a single bucket) has "
                                "no bar or a bar at 0.",
                                "policy", "moves per trajectory", CHART_BARS, 0, NULL, NULL, false,
                                NULL, 0, 0, NAN},
                paths, labels, 1, 1);
}

/* The confusion matrix's buckets, or 0 when there are none or more than MATRIX_MAX (the shape
 * check made it a square matrix of counts). */
static size_t matrix_size(const json_t *m)
{
    size_t n = json_array_size(m);
    return n <= MATRIX_MAX ? n : 0;
}

/* White to blue by share of the row. */
static const char *shade(struct report_ctx *ctx, double share)
{
    static const int to[3] = {0x4e, 0x79, 0xa7};
    int rgb[3];
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lround(255 - share * (255 - to[k]));
    return report_fmt(ctx, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

static void matrix_cell(struct report_ctx *ctx, struct frame *f, size_t t, size_t c, double count,
                        double row_total, double cell)
{
    double share = row_total > 0 ? fmax(0, fmin(1, count / row_total)) : 0;
    double x = MATRIX_LEFT + (double)c * cell, y = f->top + MATRIX_TOP + (double)t * cell;
    svg_tag(&f->svg, "rect");
    svg_attr(&f->svg, "class", "cell");
    svg_attr_value(&f->svg, "data-row", (double)t);
    svg_attr_value(&f->svg, "data-col", (double)c);
    svg_attr_value(&f->svg, "data-value", count);
    svg_attr_px(&f->svg, "x", x);
    svg_attr_px(&f->svg, "y", y);
    svg_attr_px(&f->svg, "width", cell);
    svg_attr_px(&f->svg, "height", cell);
    svg_attr(&f->svg, "fill", shade(ctx, share));
    svg_attr(&f->svg, "stroke", "#ffffff");
    svg_end_tag(&f->svg);
    strbuf_printf(&f->svg, "<g fill=\"%s\">\n", share > 0.5 ? "#ffffff" : "#111111");
    char num[SVG_NUM_MAX];
    svg_text(&f->svg, x + cell / 2, y + cell / 2 + 4, "middle", 11, false, 0, "count",
             svg_format_value(num, count));
    strbuf_puts(&f->svg, "</g>\n");
}

static void confusion(struct report_ctx *ctx, const char *policy, const json_t *m,
                      const char *buckets)
{
    size_t n = matrix_size(m);
    if (!n) {
        report_note(ctx, report_fmt(ctx, "confusion-%s", policy),
                    "confusion has no bucket or more than %d", MATRIX_MAX);
        return;
    }
    double cell = fmin(64, (FRAME_WIDTH - MATRIX_LEFT - 24) / (double)n);
    struct frame f;
    json_t *data = json_pack("{s:s,s:O}", "rows", "true bucket", "counts", m);
    frame_open(ctx, &f, report_fmt(ctx, "confusion-%s", policy),
               report_fmt(ctx, "Confusion matrix: %s", policy), 0,
               MATRIX_TOP + (double)n * cell + 8,
               report_fmt(ctx,
                          "Decisions of %s at tool returns by the bucket of the trajectory's "
                          "true remaining tokens (rows) and the bucket it chose (columns), "
                          "buckets numbered from the shortest (layout %s). The diagonal is "
                          "right; above it a trajectory was sent to a larger bucket than it "
                          "needed, below it to a smaller one. Shading: share of the row.",
                          policy, buckets ? buckets : "unknown"),
               data);
    json_decref(data);
    svg_text(&f.svg, MATRIX_LEFT + (double)n * cell / 2, f.top + 14, "middle", 11, false, 0,
             "x-label", "chosen bucket");
    for (size_t t = 0; t < n; t++) {
        const json_t *row = json_array_get(m, t);
        double total = 0;
        for (size_t c = 0; c < n; c++)
            total += json_number_value(json_array_get(row, c));
        svg_text(&f.svg, MATRIX_LEFT - 8, f.top + MATRIX_TOP + ((double)t + 0.5) * cell + 4, "end",
                 11, false, 0, "y-label", report_fmt(ctx, "true bucket %zu", t));
        for (size_t c = 0; c < n; c++) {
            if (t == 0)
                svg_text(&f.svg, MATRIX_LEFT + ((double)c + 0.5) * cell, f.top + MATRIX_TOP - 4,
                         "middle", 11, false, 0, "category", report_fmt(ctx, "%zu", c));
            matrix_cell(ctx, &f, t, c, json_number_value(json_array_get(row, c)), total, cell);
        }
    }
    frame_close(ctx, &f);
}

void report_route_figures(struct report_ctx *ctx, const json_t *doc)
{
    const json_t *policies = json_object_get(doc, "policies");
    const char **names;
    size_t n = report_keys(ctx, policies, NULL, &names);
    if (n == 0) {
        report_note(ctx, "every figure", "the result has no policies");
        return;
    }
    accuracy(ctx, policies, names, n);
    regret(ctx, policies, names, n);
    moves(ctx, policies, names, n);
    for (size_t p = 0; p < n; p++) {
        const json_t *m = report_get(json_object_get(policies, names[p]), "confusion");
        if (m && !json_is_null(m))
            confusion(ctx, names[p], m, report_str(doc, "buckets"));
        else if (!m)
            report_note(ctx, report_fmt(ctx, "confusion-%s", names[p]),
                        "the result has no confusion matrix (libra route eval before it "
                        "reported one)");
    }
}
