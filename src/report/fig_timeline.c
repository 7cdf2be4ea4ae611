/*
 * Figures of the GPU timeline of a `libra sim --timeline A:B --json` result (each mode's
 * `timeline` member, docs/sim.md "GPU timeline"): a Gantt chart per mode, one row for the
 * trainer and one per rollout instance over simulated time, and each instance's load as bars.
 *
 * The Gantt chart is drawn from its own data: the rows and their intervals, clipped to what is
 * shown, are collected into the figure's <desc> JSON first and every rectangle is drawn from
 * that, so the data a reader gets back is exactly what is on the page. What is shown is the
 * recorded window, narrowed to `--steps A:B` when the report is asked for a range (through
 * the steps' end times), and cut where the recording's cap stopped it (complete_to_s). Inputs
 * come from files users hand over: report_check_shape has refused every member read here that
 * does not read as the simulator writes it (an interval is [from, to, use] with 0 <= from <= to
 * <= 2^53 and a use of uses[] but "lent"; counts are integers), so nothing is left out for its
 * value; only a figure too large to draw legibly is capped, with a note.
 */
#include <math.h>
#include <string.h>

#include "report/internal.h"
#include "report/svg.h"

#define ROWS_MAX 128        /* rows of a Gantt chart, and bars of a load chart */
#define INTERVALS_MAX 50000 /* rectangles of a Gantt chart */
#define LABEL_W 130.0       /* "instance 12 (TP4)" */
#define ROW_H 14.0
#define ROW_GAP 4.0
#define STEPS_H 16.0 /* the row of step labels above the rows */
#define AXIS_H 40.0  /* tick labels and the axis label below the rows */
#define IDLE_COLOR "#bab0ac"
#define UNRECORDED_COLOR "#f4f4f4"

/* The uses a timeline records, with their legend names and colours (those of gpu-time). */
static const struct {
    const char *use, *name, *color;
} uses[] = {
    {"train", "training", "#4e79a7"},
    {"rollout", "rollout (busy)", "#59a14f"},
    {"sync", "weight sync / switch", "#e15759"},
    {"lent", "rollout on a lent training replica", "#b07aa1"}, /* drawn for hybrid rows */
};
#define N_USES (sizeof uses / sizeof uses[0])
#define LENT (N_USES - 1)

static const char *use_color(const char *use)
{
    for (size_t k = 0; use && k < N_USES; k++)
        if (strcmp(uses[k].use, use) == 0)
            return uses[k].color;
    return NULL;
}

/* Whether v is there: report_check_shape bounds every number read here, missing is NaN. */
static bool usable(double v)
{
    return isfinite(v);
}

/* What a Gantt chart shows: simulated seconds from..to, the recording complete up to
 * complete (<= to). */
struct view {
    double from, to, complete;
};

/* The end of step k of mode, or NaN. */
static double step_end(const json_t *mode, double k)
{
    const json_t *steps = json_object_get(mode, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++)
        if (report_num(json_array_get(steps, i), "step") == k)
            return report_num(json_array_get(steps, i), "end_s");
    return NAN;
}

/* The window of tl, narrowed to the report's step range. Returns false, with a note, when
 * there is nothing to show. */
static bool view_make(struct report_ctx *ctx, const char *id, const json_t *mode, const json_t *tl,
                      struct view *v)
{
    double first = report_num(tl, "steps/first"), last = report_num(tl, "steps/last");
    v->from = report_num(tl, "from_s");
    v->to = report_num(tl, "to_s");
    v->complete = report_num(tl, "complete_to_s");
    if (!usable(v->from) || !usable(v->to) || !(v->from < v->to) || !usable(first) ||
        !usable(last)) {
        report_note(ctx, id, "the timeline has no usable steps, from_s and to_s");
        return false;
    }
    v->complete = usable(v->complete) ? fmin(v->to, v->complete) : v->to;
    const struct report_options *o = ctx->opt;
    if (!o->step_range)
        return true;
    if ((double)o->step_last < first || (double)o->step_first > last) {
        report_note(ctx, id, "the timeline holds steps %.0f to %.0f, none of --steps %lld:%lld",
                    first, last, (long long)o->step_first, (long long)o->step_last);
        return false;
    }
    double a = (double)o->step_first > first ? step_end(mode, (double)o->step_first - 1) : NAN;
    double b = (double)o->step_last < last ? step_end(mode, (double)o->step_last) : NAN;
    v->from = usable(a) && a > v->from ? a : v->from;
    v->to = usable(b) && b < v->to ? b : v->to;
    v->complete = fmin(v->complete, v->to);
    if (!(v->from < v->to)) {
        report_note(ctx, id, "--steps %lld:%lld covers no time of the timeline",
                    (long long)o->step_first, (long long)o->step_last);
        return false;
    }
    return true;
}

/* The integer at key of o as text, or "?". */
static const char *int_text(struct report_ctx *ctx, const json_t *o, const char *key)
{
    double v = report_num(o, key);
    return usable(v) ? report_fmt(ctx, "%.0f", v) : "?";
}

/* Whether row is an instance serving on a training replica's GPUs (the elastic pool's). */
static bool lent(const json_t *row)
{
    return json_is_number(json_object_get(row, "hybrid_replica"));
}

/* The label of a row: the trainer's, or an instance's. */
static const char *row_label(struct report_ctx *ctx, const json_t *row, bool trainer)
{
    if (trainer)
        return report_fmt(ctx, "trainer (%s GPUs)", int_text(ctx, row, "gpus"));
    if (lent(row))
        return report_fmt(ctx, "inst. %s (TP%s, lent %s)", int_text(ctx, row, "instance"),
                          int_text(ctx, row, "tp"), int_text(ctx, row, "hybrid_replica"));
    return report_fmt(ctx, "instance %s (TP%s)", int_text(ctx, row, "instance"),
                      int_text(ctx, row, "tp"));
}

/* Appends row's intervals within the view to out as [from, to, use], clipped (a lent row's
 * rollout as "lent"); *budget is what may still be drawn. Returns how many were left out by
 * the budget. report_check_shape made each interval [from, to, use], from <= to, and use one
 * the simulator writes. */
static size_t clip_intervals(const json_t *row, const struct view *v, json_t *out, size_t *budget)
{
    bool lent_row = lent(row);
    const json_t *iv = json_object_get(row, "intervals");
    size_t over = 0;
    for (size_t k = 0; k < json_array_size(iv); k++) {
        const json_t *x = json_array_get(iv, k);
        double a = json_number_value(json_array_get(x, 0));
        double b = json_number_value(json_array_get(x, 1));
        const char *use = json_string_value(json_array_get(x, 2));
        if (!use_color(use)) /* not reached: the shape check refused it */
            continue;
        if (lent_row && strcmp(use, "rollout") == 0)
            use = uses[LENT].use;
        a = fmax(a, v->from);
        b = fmin(b, v->complete);
        if (!(a < b))
            continue;
        if (*budget == 0) {
            over++;
            continue;
        }
        (*budget)--;
        json_array_append_new(out, json_pack("[o,o,s]", ujson_real(a), ujson_real(b), use));
    }
    return over;
}

/* The rows drawn: [{row, intervals}] for the trainer (when there is one) and the instances. */
static json_t *gantt_rows(struct report_ctx *ctx, const char *id, const json_t *tl,
                          const struct view *v)
{
    json_t *rows = json_array();
    const json_t *trainer = json_object_get(tl, "trainer"),
                 *inst = json_object_get(tl, "instances");
    size_t n = json_array_size(inst) + (json_is_object(trainer) ? 1 : 0);
    size_t budget = INTERVALS_MAX, over = 0;
    if (n > ROWS_MAX) {
        report_note(ctx, id, "%zu rows: the first %d are drawn", n, ROWS_MAX);
        n = ROWS_MAX;
    }
    size_t first_inst = json_is_object(trainer) ? 1 : 0;
    for (size_t r = 0; r < n; r++) {
        bool is_trainer = r < first_inst;
        const json_t *row = is_trainer ? trainer : json_array_get(inst, r - first_inst);
        json_t *drawn = json_array();
        over += clip_intervals(row, v, drawn, &budget);
        json_array_append_new(rows, json_pack("{s:s,s:o}", "row", row_label(ctx, row, is_trainer),
                                              "intervals", drawn));
    }
    if (over)
        report_note(ctx, id, "%zu intervals more than the %d drawn are left out", over,
                    INTERVALS_MAX);
    return rows;
}

/* Where the Gantt chart's rows and time axis lie. */
struct gantt {
    double x0, x1, top; /* the time axis runs from x0 to x1; rows start at top */
    struct svg_axis axis;
    size_t n_rows;
};

/* A time axis spanning exactly [from, to], with the nice ticks that fall inside it (the
 * nice axis around it when fewer than two do). */
static void time_axis(struct svg_axis *a, double from, double to)
{
    svg_axis_make(a, from, to, 8, false);
    struct svg_axis inside = *a;
    inside.n = 0;
    for (int i = 0; i < a->n; i++)
        if (a->tick[i] >= from && a->tick[i] <= to)
            inside.tick[inside.n++] = a->tick[i];
    inside.lo = from;
    inside.hi = to;
    if (inside.n >= 2)
        *a = inside;
}

static double gx(const struct gantt *g, double t)
{
    return svg_axis_px(&g->axis, t, g->x0, g->x1);
}

static double row_y(const struct gantt *g, size_t r)
{
    return g->top + (double)r * (ROW_H + ROW_GAP);
}

static double rows_bottom(const struct gantt *g)
{
    return row_y(g, g->n_rows) - ROW_GAP;
}

static void rect(struct strbuf *b, const char *cls, double x, double y, double w, const char *fill)
{
    svg_tag(b, "rect");
    svg_attr(b, "class", cls);
    svg_attr_px(b, "x", x);
    svg_attr_px(b, "y", y);
    svg_attr_px(b, "width", w);
    svg_attr_px(b, "height", ROW_H);
    svg_attr(b, "fill", fill);
}

/* One row: its label, the idle background over the view, the part left unrecorded, and its
 * intervals. */
static void draw_row(struct strbuf *b, const struct gantt *g, const struct view *v,
                     const json_t *row, size_t r)
{
    double y = row_y(g, r);
    const char *label = report_str(row, "row");
    svg_text(b, 12, y + ROW_H - 3, "start", 11, false, 0, "row-label", label);
    rect(b, "row", gx(g, v->from), y, gx(g, v->complete) - gx(g, v->from), IDLE_COLOR);
    svg_attr(b, "data-row", label);
    svg_end_tag(b);
    if (v->complete < v->to) {
        rect(b, "unrecorded", gx(g, v->complete), y, gx(g, v->to) - gx(g, v->complete),
             UNRECORDED_COLOR);
        svg_end_tag(b);
    }
    const json_t *iv = json_object_get(row, "intervals");
    for (size_t k = 0; k < json_array_size(iv); k++) {
        const json_t *x = json_array_get(iv, k);
        double a = json_number_value(json_array_get(x, 0));
        double e = json_number_value(json_array_get(x, 1));
        const char *use = json_string_value(json_array_get(x, 2));
        rect(b, "interval", gx(g, a), y, gx(g, e) - gx(g, a), use_color(use));
        svg_attr(b, "data-row", label);
        svg_attr(b, "data-use", use);
        svg_attr_value(b, "data-from", a);
        svg_attr_value(b, "data-to", e);
        svg_end_tag(b);
    }
}

/* The time axis under the rows: ticks with their values, and its label. */
static void draw_axis(struct strbuf *b, const struct gantt *g)
{
    char label[SVG_NUM_MAX];
    double bottom = rows_bottom(g);
    for (int i = 0; i < g->axis.n; i++) {
        double x = gx(g, g->axis.tick[i]);
        svg_tag(b, "line");
        svg_attr_px(b, "x1", x);
        svg_attr_px(b, "y1", g->top);
        svg_attr_px(b, "x2", x);
        svg_attr_px(b, "y2", bottom + 4);
        svg_attr(b, "stroke", "#e0e0e0");
        svg_attr(b, "class", "tick-x");
        svg_attr_value(b, "data-value", g->axis.tick[i]);
        svg_end_tag(b);
        svg_text(b, x, bottom + 16, "middle", 11, false, 0, NULL,
                 svg_axis_label(&g->axis, g->axis.tick[i], label));
    }
    svg_text(b, (g->x0 + g->x1) / 2, bottom + 34, "middle", 11, false, 0, "x-label",
             "simulated time (s)");
}

/* Dashed lines where steps end inside the view, each step's number above its span when it
 * is wide enough to carry it. */
static void draw_steps(struct report_ctx *ctx, struct strbuf *b, const struct gantt *g,
                       const struct view *v, const json_t *mode)
{
    const json_t *steps = json_object_get(mode, "steps");
    double prev = v->from;
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const json_t *s = json_array_get(steps, i);
        double end = report_num(s, "end_s"), k = report_num(s, "step");
        if (!usable(end) || !usable(k) || end <= v->from || end > v->to || end < prev)
            continue;
        svg_tag(b, "line");
        svg_attr_px(b, "x1", gx(g, end));
        svg_attr_px(b, "y1", g->top - STEPS_H + 4);
        svg_attr_px(b, "x2", gx(g, end));
        svg_attr_px(b, "y2", rows_bottom(g));
        svg_attr(b, "stroke", "#333333");
        svg_attr(b, "stroke-dasharray", "3 3");
        svg_attr(b, "class", "step-end");
        svg_attr_value(b, "data-step", k);
        svg_attr_value(b, "data-value", end);
        svg_end_tag(b);
        if (gx(g, end) - gx(g, prev) >= 40)
            svg_text(b, (gx(g, prev) + gx(g, end)) / 2, g->top - 5, "middle", 10, false, 0,
                     "step-label", report_fmt(ctx, "step %.0f", k));
        prev = end;
    }
}

static const char *gantt_caption(struct report_ctx *ctx, const char *name, const json_t *tl,
                                 const struct view *v, bool colocated, size_t lent_rows)
{
    const char *cut =
        v->complete < v->to
            ? report_fmt(ctx,
                         " The recording reached its cap of %.0f intervals at %.1f s: the pale "
                         "part after it was not recorded (the load bars still count it).",
                         report_num(tl, "max_intervals"), v->complete)
            : "";
    const struct report_options *o = ctx->opt;
    double first = report_num(tl, "steps/first"), last = report_num(tl, "steps/last");
    const char *narrowed =
        o->step_range
            ? report_fmt(ctx, "; --steps narrows the timeline's steps %.0f to %.0f", first, last)
            : "";
    if (o->step_range) {
        first = fmax(first, (double)o->step_first);
        last = fmin(last, (double)o->step_last);
    }
    return report_fmt(
        ctx,
        "What the GPUs of %s did in steps %.0f to %.0f (simulated time %.1f s to %.1f s%s): one "
        "row for the trainer%s and one per rollout instance. Green: the instance's engine runs "
        "iterations%s; blue: training; red: held by a weight update%s; grey: idle. Dashed lines "
        "end steps.%s",
        name, first, last, v->from, v->to, narrowed,
        colocated ? " (every GPU: they are time-shared)" : "",
        lent_rows ? " (purple on a row labelled 'lent R': the GPUs of training replica R, lent "
                    "to rollout by the elastic pool; blue there from the trainer's request to "
                    "have them back until they return: joining, then training)"
                  : "",
        colocated ? " or the hybrid engine's switches, on every row" : "", cut);
}

static void gantt(struct report_ctx *ctx, const char *name, const json_t *mode, const json_t *tl)
{
    const char *id = report_fmt(ctx, "gantt-%s", name);
    struct view v;
    if (!view_make(ctx, id, mode, tl, &v))
        return;
    json_t *rows = gantt_rows(ctx, id, tl, &v);
    if (json_array_size(rows) == 0) {
        report_note(ctx, id, "the timeline has no rows (timeline.trainer, timeline.instances)");
        json_decref(rows);
        return;
    }
    json_t *data =
        json_pack("{s:s,s:O,s:[o,o],s:o,s:o}", "mode", name, "steps", json_object_get(tl, "steps"),
                  "view_s", ujson_real(v.from), ujson_real(v.to), "complete_to_s",
                  ujson_real(v.complete), "rows", rows);
    struct legend_item items[N_USES + 2];
    size_t n_items = 0, lent_rows = 0;
    const json_t *inst = json_object_get(tl, "instances");
    for (size_t i = 0; i < json_array_size(inst); i++)
        lent_rows += lent(json_array_get(inst, i));
    for (size_t k = 0; k < N_USES; k++)
        if (k != LENT || lent_rows)
            items[n_items++] = (struct legend_item){uses[k].name, uses[k].color, false, false};
    items[n_items++] = (struct legend_item){"idle", IDLE_COLOR, false, false};
    if (v.complete < v.to)
        items[n_items++] = (struct legend_item){"not recorded", UNRECORDED_COLOR, false, false};
    struct gantt g = {.x0 = LABEL_W, .x1 = FRAME_WIDTH - 20, .n_rows = json_array_size(rows)};
    time_axis(&g.axis, v.from, v.to);
    const json_t *shared = report_get(mode, "layout/colocated");
    struct frame f;
    frame_open(ctx, &f, id, report_fmt(ctx, "GPU timeline: %s", name), legend_rows(items, n_items),
               STEPS_H + (double)g.n_rows * (ROW_H + ROW_GAP) + AXIS_H,
               gantt_caption(ctx, name, tl, &v, json_is_true(shared), lent_rows), data);
    legend_draw(&f, items, n_items);
    g.top = f.top + STEPS_H;
    draw_axis(&f.svg, &g);
    for (size_t r = 0; r < g.n_rows; r++)
        draw_row(&f.svg, &g, &v, json_array_get(rows, r), r);
    draw_steps(ctx, &f.svg, &g, &v, mode);
    frame_close(ctx, &f);
    json_decref(data);
}

/* ---- per-instance load ------------------------------------------------------------------ */

/* part / whole in percent, NaN unless both are usable and whole > 0. */
static double percent(double part, double whole)
{
    return usable(part) && usable(whole) && whole > 0 ? 100 * part / whole : NAN;
}

#define LOAD_SERIES 4

/* The load chart's categories and series of instances inst[0..n): busy share, then the shares
 * of the fleet's requests, tokens and GPUs, in percent; sum[0..2] the fleet's totals. */
static void load_series(struct report_ctx *ctx, const json_t *inst, size_t n, const char **cats,
                        double *y[LOAD_SERIES], double sum[3])
{
    static const char *const keys[] = {"requests", "generated_tokens", "tp"};
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            double x = report_num(json_array_get(inst, i), keys[k]);
            sum[k] += usable(x) && x > 0 ? x : 0;
        }
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(inst, i);
        cats[i] =
            report_fmt(ctx, "%s (TP%s)", int_text(ctx, x, "instance"), int_text(ctx, x, "tp"));
        y[0][i] = percent(report_num(x, "busy_share"), 1);
        for (int k = 0; k < 3; k++)
            y[k + 1][i] = percent(report_num(x, keys[k]), sum[k]);
    }
}

static void load(struct report_ctx *ctx, const char *name, const json_t *tl)
{
    const json_t *inst = json_object_get(tl, "instances");
    size_t n = json_array_size(inst);
    const char *id = report_fmt(ctx, "load-%s", name);
    if (n > ROWS_MAX) {
        report_note(ctx, id, "%zu instances: the first %d are drawn", n, ROWS_MAX);
        n = ROWS_MAX;
    }
    static const char *const names[LOAD_SERIES] = {
        "busy share of the window", "share of the fleet's requests",
        "share of the fleet's generated tokens", "share of the rollout GPUs"};
    static const char *const colors[LOAD_SERIES] = {"#59a14f", "#76b7b2", "#edc948", IDLE_COLOR};
    const char **cats = arena_calloc(ctx->arena, n + 1, sizeof *cats);
    double *y[LOAD_SERIES], sum[3] = {0};
    struct chart_series *s = arena_calloc(ctx->arena, LOAD_SERIES, sizeof *s);
    for (int k = 0; k < LOAD_SERIES; k++) {
        y[k] = report_nans(ctx, n);
        s[k] = (struct chart_series){names[k], colors[k], false, y[k], NULL, NULL, NULL};
    }
    load_series(ctx, inst, n, cats, y, sum);
    report_chart(
        ctx,
        &(struct chart){
            id, report_fmt(ctx, "Load per rollout instance: %s", name),
            report_fmt(ctx,
                       "Each rollout instance of %s over steps %.0f to %.0f: the share of the "
                       "window its engine was busy, and its shares of the fleet's requests "
                       "(%.0f turns submitted), of the tokens generated (%.0f) and of the rollout "
                       "GPUs. An instance whose request or token share exceeds its GPU share "
                       "carries more than its size; a busy share near 100 %% never idled.%s",
                       name, report_num(tl, "steps/first"), report_num(tl, "steps/last"), sum[0],
                       sum[1],
                       ctx->opt->step_range ? " The shares are over every step the timeline "
                                              "holds: --steps does not narrow them."
                                            : ""),
            "rollout instance (TP)", "share (%)", CHART_BARS, n, NULL, cats, false, s, LOAD_SERIES,
            0, 100});
}

void report_timeline_figures(struct report_ctx *ctx, const json_t *modes, const char **names,
                             size_t n)
{
    size_t drawn = 0;
    for (size_t m = 0; m < n; m++) {
        const json_t *mode = json_object_get(modes, names[m]);
        const json_t *tl = json_object_get(mode, "timeline");
        if (!json_is_object(tl))
            continue;
        gantt(ctx, names[m], mode, tl);
        if (json_array_size(json_object_get(tl, "instances")))
            load(ctx, names[m], tl);
        drawn++;
    }
    if (!drawn)
        report_note(ctx, "gantt",
                    "the result has no GPU timeline (modes.*.timeline): run libra sim with "
                    "--timeline A:B to record one");
}
