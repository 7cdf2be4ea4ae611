/*
 * The drawing every figure shares: the frame (title, legend, caption, the data in <desc>) and
 * the chart (axes, ticks, lines, bars, stacks), so that a figure function only says what to
 * draw. Geometry is a fixed function of the data: a test reads a bar's height back through
 * the ticks' data-value and position.
 */
#include <math.h>
#include <string.h>

#include "report/internal.h"
#include "report/svg.h"
#include "util/alloc.h"

#define TITLE_Y 20.0
#define LEGEND_Y 30.0 /* the top of the first legend row */
#define ROW_H 16.0
#define LINE_H 14.0 /* a caption line */
#define SIDE 12.0   /* left and right padding of title, legend and caption */
#define PLOT_LEFT 70.0
#define PLOT_RIGHT 20.0
#define PLOT_H 220.0
#define BAR_MAX 72.0 /* the widest bar, px: a lone category does not fill the plot */
#define GRID "#e0e0e0"
#define INK "#333333"

/* ---- frame --------------------------------------------------------------------------------- */

static size_t caption_cols(void)
{
    return (size_t)((FRAME_WIDTH - 2 * SIDE) / SVG_CHAR_PX);
}

/* PREFIX-name made a file name (letters, digits, '_' and '-'; anything else, such as a '/' in
 * a mode's name, becomes '-') that no figure of the report has yet (else "-2", "-3", ...). */
static const char *figure_id(struct report_ctx *ctx, const char *name)
{
    char *id = (char *)report_fmt(ctx, "%s-%s", ctx->prefix, name);
    for (char *c = id; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-", *c))
            *c = '-';
    const char *unique = id;
    for (int k = 2;; k++) {
        size_t i = 0;
        while (i < ctx->out->figures.n && strcmp(ctx->out->figures.v[i].id, unique) != 0)
            i++;
        if (i == ctx->out->figures.n)
            return unique;
        unique = report_fmt(ctx, "%s-%d", id, k);
    }
}

void frame_open(struct report_ctx *ctx, struct frame *f, const char *name, const char *title,
                int legend_rows, double body_h, const char *caption, json_t *data)
{
    memset(f, 0, sizeof *f);
    f->id = figure_id(ctx, name);
    f->caption = report_fmt(ctx, "%s Input: %s.", caption, ctx->source);
    f->width = FRAME_WIDTH;
    f->top = legend_rows ? LEGEND_Y + legend_rows * ROW_H + 6 : LEGEND_Y + 2;
    f->body_h = body_h;
    size_t lines = svg_wrap(f->caption, caption_cols(), NULL, NULL, 0);
    double height = f->top + body_h + 8 + (double)lines * LINE_H + 8;
    json_t *desc = json_pack("{s:s,s:s,s:s,s:O}", "figure", f->id, "title", title, "source",
                             ctx->source, "data", data);
    char *text = ujson_dump(desc, false);
    svg_document_begin(&f->svg, f->id, f->width, height, title, text);
    free(text);
    json_decref(desc);
    svg_text(&f->svg, SIDE, TITLE_Y, "start", 13, true, 0, "title", title);
}

void frame_close(struct report_ctx *ctx, struct frame *f)
{
    size_t n = svg_wrap(f->caption, caption_cols(), NULL, NULL, 0);
    size_t *start = arena_calloc(ctx->arena, n + 1, sizeof *start);
    size_t *len = arena_calloc(ctx->arena, n + 1, sizeof *len);
    svg_wrap(f->caption, caption_cols(), start, len, n);
    char *line = arena_alloc(ctx->arena, strlen(f->caption) + 1);
    for (size_t i = 0; i < n; i++) {
        memcpy(line, f->caption + start[i], len[i]);
        line[len[i]] = '\0';
        double y = f->top + f->body_h + 8 + (double)(i + 1) * LINE_H - 3;
        svg_text(&f->svg, SIDE, y, "start", 11, false, 0, "caption", line);
    }
    svg_document_end(&f->svg);
    struct report_figure fig = {xstrdup(f->id), strbuf_detach(&f->svg)};
    strbuf_printf(ctx->html, "<figure id=\"fig-%s\">\n%s</figure>\n", fig.id, fig.svg);
    vec_push(&ctx->out->figures, fig);
}

/* ---- legend -------------------------------------------------------------------------------- */

static double item_width(const struct legend_item *it)
{
    return 24 + (double)strlen(it->name) * SVG_CHAR_PX + 16;
}

/* Lays the items out in rows; writes each item's row and x when asked. Returns the rows. */
static int legend_layout(const struct legend_item *items, size_t n, int *row, double *x)
{
    int rows = n ? 1 : 0;
    double at = SIDE;
    for (size_t i = 0; i < n; i++) {
        double w = item_width(&items[i]);
        if (at > SIDE && at + w > FRAME_WIDTH - SIDE) {
            rows++;
            at = SIDE;
        }
        if (row) {
            row[i] = rows - 1;
            x[i] = at;
        }
        at += w;
    }
    return rows;
}

int legend_rows(const struct legend_item *items, size_t n)
{
    return legend_layout(items, n, NULL, NULL);
}

void legend_draw(struct frame *f, const struct legend_item *items, size_t n)
{
    int *row = xcalloc(n + 1, sizeof *row);
    double *x = xcalloc(n + 1, sizeof *x);
    legend_layout(items, n, row, x);
    for (size_t i = 0; i < n; i++) {
        double mid = LEGEND_Y + row[i] * ROW_H + ROW_H / 2;
        const struct legend_item *it = &items[i];
        if (it->line) {
            svg_tag(&f->svg, "line");
            svg_attr_px(&f->svg, "x1", x[i]);
            svg_attr_px(&f->svg, "y1", mid);
            svg_attr_px(&f->svg, "x2", x[i] + 20);
            svg_attr_px(&f->svg, "y2", mid);
            svg_attr(&f->svg, "stroke", it->color);
            svg_attr(&f->svg, "stroke-width", "2");
            if (it->dashed)
                svg_attr(&f->svg, "stroke-dasharray", "5 3");
        } else {
            svg_tag(&f->svg, "rect");
            svg_attr_px(&f->svg, "x", x[i] + 4);
            svg_attr_px(&f->svg, "y", mid - 6);
            svg_attr_px(&f->svg, "width", 12);
            svg_attr_px(&f->svg, "height", 12);
            svg_attr(&f->svg, "fill", it->color);
        }
        svg_attr(&f->svg, "class", "legend");
        svg_end_tag(&f->svg);
        svg_text(&f->svg, x[i] + 24, mid + 4, "start", 11, false, 0, "legend", it->name);
    }
    free(row);
    free(x);
}

/* ---- charts -------------------------------------------------------------------------------- */

/* Where a chart's plot lies and how values map onto it. */
struct plot {
    double x0, x1, y0, y1; /* left, right, top, bottom, px */
    struct svg_axis y, x;  /* x only for numeric x */
    bool numeric_x;
    size_t n_x;
    const char *const *categories;
    double label_rotate; /* category labels: 0, or turned by this many degrees */
};

static double py(const struct plot *p, double v)
{
    return svg_axis_px(&p->y, v, p->y1, p->y0);
}

/* The centre of x slot i: its numeric x, or its category's band. */
static double px(const struct plot *p, const struct chart *c, size_t i)
{
    if (p->numeric_x)
        return svg_axis_px(&p->x, c->x[i], p->x0, p->x1);
    return p->x0 + ((double)i + 0.5) * (p->x1 - p->x0) / (double)p->n_x;
}

static void widen_by(double v, double *lo, double *hi)
{
    if (isfinite(v)) {
        *lo = fmin(*lo, v);
        *hi = fmax(*hi, v);
    }
}

/* The range the y axis must cover. */
static void y_range(const struct chart *c, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    widen_by(c->y_min, lo, hi);
    widen_by(c->y_max, lo, hi);
    if (c->kind != CHART_LINES)
        widen_by(0, lo, hi);
    for (size_t i = 0; i < c->n_x; i++) {
        double stack = 0;
        for (size_t s = 0; s < c->n_series; s++) {
            const struct chart_series *se = &c->series[s];
            if (c->kind == CHART_STACKED) {
                stack += isfinite(se->y[i]) && se->y[i] > 0 ? se->y[i] : 0;
                widen_by(stack, lo, hi);
                continue;
            }
            widen_by(se->y[i], lo, hi);
            if (se->lo)
                widen_by(se->lo[i], lo, hi);
            if (se->hi)
                widen_by(se->hi[i], lo, hi);
        }
    }
}

/* The longest category label, bytes. */
static size_t longest_category(const struct chart *c)
{
    size_t most = 0;
    for (size_t i = 0; c->categories && i < c->n_x; i++)
        most =
            c->categories[i] && strlen(c->categories[i]) > most ? strlen(c->categories[i]) : most;
    return most;
}

static void plot_make(const struct chart *c, double top, struct plot *p)
{
    memset(p, 0, sizeof *p);
    p->x0 = PLOT_LEFT;
    p->x1 = FRAME_WIDTH - PLOT_RIGHT;
    p->y0 = top + 8;
    p->y1 = p->y0 + PLOT_H;
    p->n_x = c->n_x;
    p->numeric_x = c->x != NULL;
    p->categories = c->categories;
    double lo, hi;
    y_range(c, &lo, &hi);
    svg_axis_make(&p->y, lo, hi, 5, false);
    if (c->x) {
        double xlo = INFINITY, xhi = -INFINITY;
        for (size_t i = 0; i < c->n_x; i++)
            if (c->x_scale != CHART_X_LOG || c->x[i] > 0)
                widen_by(c->x[i], &xlo, &xhi);
        if (c->x_scale == CHART_X_LOG)
            svg_axis_make_log(&p->x, xlo, xhi);
        else
            svg_axis_make(&p->x, xlo, xhi, 8, c->x_scale == CHART_X_INTEGER);
    } else if (c->n_x) {
        double band = (p->x1 - p->x0) / (double)c->n_x;
        if ((double)longest_category(c) * SVG_CHAR_PX > band - 4)
            p->label_rotate = -35;
    }
}

/* The extra height turned category labels take, px. */
static double rotated_extra(const struct chart *c, const struct plot *p)
{
    if (p->label_rotate == 0)
        return 0;
    double chars = fmin(40, (double)longest_category(c));
    return chars * SVG_CHAR_PX * 0.5736; /* sin 35 degrees */
}

static void line_el(struct strbuf *b, double x1, double y1, double x2, double y2, const char *color,
                    const char *cls)
{
    svg_tag(b, "line");
    svg_attr_px(b, "x1", x1);
    svg_attr_px(b, "y1", y1);
    svg_attr_px(b, "x2", x2);
    svg_attr_px(b, "y2", y2);
    svg_attr(b, "stroke", color);
    if (cls)
        svg_attr(b, "class", cls);
}

static void draw_axes(struct strbuf *b, const struct chart *c, const struct plot *p)
{
    char label[SVG_NUM_MAX];
    svg_tag(b, "rect");
    svg_attr(b, "class", "plot");
    svg_attr_px(b, "x", p->x0);
    svg_attr_px(b, "y", p->y0);
    svg_attr_px(b, "width", p->x1 - p->x0);
    svg_attr_px(b, "height", p->y1 - p->y0);
    svg_attr_value(b, "data-y-min", p->y.lo);
    svg_attr_value(b, "data-y-max", p->y.hi);
    svg_attr(b, "fill", "none");
    svg_end_tag(b);
    for (int i = 0; i < p->y.n; i++) {
        double y = py(p, p->y.tick[i]);
        line_el(b, p->x0, y, p->x1, y, GRID, "tick-y");
        svg_attr_value(b, "data-value", p->y.tick[i]);
        svg_end_tag(b);
        svg_text(b, p->x0 - 6, y + 4, "end", 11, false, 0, NULL,
                 svg_axis_label(&p->y, p->y.tick[i], label));
    }
    double below = p->y1 + 16;
    if (p->numeric_x) {
        for (int i = 0; i < p->x.n; i++) {
            double x = svg_axis_px(&p->x, p->x.tick[i], p->x0, p->x1);
            line_el(b, x, p->y1, x, p->y1 + 4, INK, "tick-x");
            svg_attr_value(b, "data-value", p->x.tick[i]);
            svg_end_tag(b);
            svg_text(b, x, below, "middle", 11, false, 0, NULL,
                     svg_axis_label(&p->x, p->x.tick[i], label));
        }
    } else {
        size_t every = p->n_x > 40 ? (p->n_x + 19) / 20 : 1; /* at most about 20 labels */
        for (size_t i = 0; i < p->n_x; i += every)
            svg_text(b, px(p, c, i), below, p->label_rotate != 0 ? "end" : "middle", 11, false,
                     p->label_rotate, "category", p->categories[i] ? p->categories[i] : "");
    }
    line_el(b, p->x0, p->y1, p->x1, p->y1, INK, "axis");
    svg_end_tag(b);
    line_el(b, p->x0, p->y0, p->x0, p->y1, INK, "axis");
    svg_end_tag(b);
    svg_text(b, (p->x0 + p->x1) / 2, below + 18 + rotated_extra(c, p), "middle", 11, false, 0,
             "x-label", c->x_label);
    svg_text(b, 16, (p->y0 + p->y1) / 2, "middle", 11, false, -90, "y-label", c->y_label);
}

/* The attributes every drawn datum carries: its series, its x and its value. */
static void datum_attrs(struct strbuf *b, const struct chart *c, const struct chart_series *se,
                        size_t i, double value)
{
    svg_attr(b, "data-series", se->name);
    if (c->x)
        svg_attr_value(b, "data-x", c->x[i]);
    else
        svg_attr(b, "data-x", c->categories[i] ? c->categories[i] : "");
    svg_attr_value(b, "data-value", value);
}

/* The whisker of datum i at x, from se->lo[i] to se->hi[i], where the series has them. */
static void whisker(struct strbuf *b, const struct plot *p, const struct chart_series *se, size_t i,
                    double x, const char *color)
{
    if (!se->lo || !se->hi || !isfinite(se->lo[i]) || !isfinite(se->hi[i]))
        return;
    line_el(b, x, py(p, se->lo[i]), x, py(p, se->hi[i]), color, "whisker");
    svg_attr(b, "data-series", se->name);
    svg_attr_value(b, "data-lo", se->lo[i]);
    svg_attr_value(b, "data-hi", se->hi[i]);
    svg_end_tag(b);
}

/* Whether datum i of a line series has a place on the chart. */
static bool drawn(const struct chart *c, const struct chart_series *se, size_t i)
{
    return isfinite(se->y[i]) &&
           (!c->x || (isfinite(c->x[i]) && (c->x_scale != CHART_X_LOG || c->x[i] > 0)));
}

/* dodge: px to shift the series sideways, so that whiskers at one category stay apart */
static void draw_line_series(struct strbuf *b, const struct chart *c, const struct plot *p,
                             const struct chart_series *se, double dodge)
{
    bool open = false; /* a polyline is being written: NaN values break it */
    for (size_t i = 0; i <= c->n_x; i++) {
        bool ok = i < c->n_x && drawn(c, se, i);
        if (ok && !open) {
            strbuf_puts(b, "<polyline points=\"");
            open = true;
        } else if (!ok && open) {
            strbuf_printf(b, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s/>\n", se->color,
                          se->dashed ? " stroke-dasharray=\"5 3\"" : "");
            open = false;
        }
        if (ok) {
            char xs[SVG_NUM_MAX], ys[SVG_NUM_MAX];
            strbuf_printf(b, "%s,%s ", svg_format_fixed(xs, px(p, c, i) + dodge, 2),
                          svg_format_fixed(ys, py(p, se->y[i]), 2));
        }
    }
    for (size_t i = 0; i < c->n_x; i++) {
        if (!drawn(c, se, i))
            continue;
        double x = px(p, c, i) + dodge;
        whisker(b, p, se, i, x, se->color);
        svg_tag(b, "circle");
        svg_attr(b, "class", "point");
        datum_attrs(b, c, se, i, se->y[i]);
        svg_attr_px(b, "cx", x);
        svg_attr_px(b, "cy", py(p, se->y[i]));
        svg_attr(b, "r", "2.5");
        svg_attr(b, "fill", se->color);
        svg_end_tag(b);
    }
}

/* One bar from value base to base + v (v may be negative for side-by-side bars). */
static void bar(struct strbuf *b, const struct chart *c, const struct plot *p,
                const struct chart_series *se, size_t i, double x, double w, double base)
{
    double v = se->y[i], top = py(p, fmax(base, base + v)), bottom = py(p, fmin(base, base + v));
    svg_tag(b, "rect");
    svg_attr(b, "class", "bar");
    datum_attrs(b, c, se, i, v);
    if (c->kind == CHART_STACKED)
        svg_attr_value(b, "data-base", base);
    svg_attr_px(b, "x", x);
    svg_attr_px(b, "y", top);
    svg_attr_px(b, "width", w);
    svg_attr_px(b, "height", bottom - top);
    svg_attr(b, "fill", se->color);
    svg_end_tag(b);
    if (se->text && se->text[i]) /* above the bar and its whisker */
        svg_text(b, x + w / 2,
                 fmin(top, se->hi && isfinite(se->hi[i]) ? py(p, se->hi[i]) : top) - 4, "middle",
                 10, false, 0, "bar-label", se->text[i]);
}

static void draw_bars(struct strbuf *b, const struct chart *c, const struct plot *p)
{
    double band = (p->x1 - p->x0) / (double)(p->n_x ? p->n_x : 1);
    for (size_t i = 0; i < c->n_x; i++) {
        double centre = px(p, c, i), base = 0;
        if (c->kind == CHART_STACKED) {
            for (size_t s = 0; s < c->n_series; s++) {
                const struct chart_series *se = &c->series[s];
                if (isfinite(se->y[i]) && se->y[i] > 0) {
                    double w = fmin(band * 0.6, BAR_MAX);
                    bar(b, c, p, se, i, centre - w / 2, w, base);
                    base += se->y[i];
                }
            }
            continue;
        }
        double w = fmin(band * 0.8 / (double)c->n_series, BAR_MAX);
        double left = centre - w * (double)c->n_series / 2;
        for (size_t s = 0; s < c->n_series; s++)
            if (isfinite(c->series[s].y[i])) {
                bar(b, c, p, &c->series[s], i, left + (double)s * w, w, 0);
                whisker(b, p, &c->series[s], i, left + ((double)s + 0.5) * w, INK);
            }
    }
}

/* The chart's data for <desc>: axes labels, x or categories, and each series. */
static json_t *chart_data(const struct chart *c)
{
    json_t *xs = json_array(), *series = json_array();
    for (size_t i = 0; i < c->n_x; i++)
        json_array_append_new(xs, c->x ? ujson_real(c->x[i])
                                       : json_string(c->categories[i] ? c->categories[i] : ""));
    for (size_t s = 0; s < c->n_series; s++) {
        const struct chart_series *se = &c->series[s];
        const double *cols[3] = {se->y, se->lo, se->hi};
        static const char *const keys[3] = {"y", "lo", "hi"};
        json_t *o = json_pack("{s:s}", "name", se->name);
        for (int k = 0; k < 3; k++) {
            if (!cols[k])
                continue;
            json_t *a = json_array();
            for (size_t i = 0; i < c->n_x; i++)
                json_array_append_new(a, ujson_real(cols[k][i]));
            json_object_set_new(o, keys[k], a);
        }
        json_array_append_new(series, o);
    }
    return json_pack("{s:s,s:s,s:s,s:o,s:o}", "kind",
                     c->kind == CHART_LINES  ? "lines"
                     : c->kind == CHART_BARS ? "bars"
                                             : "stacked",
                     "x_label", c->x_label, "y_label", c->y_label, c->x ? "x" : "categories", xs,
                     "series", series);
}

void report_chart(struct report_ctx *ctx, const struct chart *c)
{
    struct legend_item *items = arena_calloc(ctx->arena, c->n_series + 1, sizeof *items);
    for (size_t s = 0; s < c->n_series; s++)
        items[s] = (struct legend_item){c->series[s].name, c->series[s].color,
                                        c->kind == CHART_LINES, c->series[s].dashed};
    int rows = legend_rows(items, c->n_series);
    struct frame f;
    struct plot p;
    plot_make(c, 0, &p);
    double body = 8 + PLOT_H + 16 + 22 + rotated_extra(c, &p);
    json_t *data = chart_data(c);
    frame_open(ctx, &f, c->name, c->title, rows, body, c->caption, data);
    json_decref(data);
    plot_make(c, f.top, &p);
    legend_draw(&f, items, c->n_series);
    draw_axes(&f.svg, c, &p);
    if (c->kind == CHART_LINES)
        for (size_t s = 0; s < c->n_series; s++) {
            bool whiskers = !c->x && c->series[s].lo && c->series[s].hi;
            double dodge = whiskers ? ((double)s - (double)(c->n_series - 1) / 2) * 5 : 0;
            draw_line_series(&f.svg, c, &p, &c->series[s], dodge);
        }
    else
        draw_bars(&f.svg, c, &p);
    frame_close(ctx, &f);
}
