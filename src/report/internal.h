/*
 * Inside the report: the state one section is drawn with, the chart every plot goes through,
 * the frame of figures that are not plots, and lookups into results of unknown shape.
 *
 * Inputs come from files users hand over (or a fuzzer). report_add refuses a member the
 * figures read that has another type (report_check_shape), and every lookup still tolerates a
 * missing member: numbers read as NaN, objects and strings as NULL. A figure whose data is
 * missing is left out with a note, never drawn from garbage.
 */
#ifndef REPORT_INTERNAL_H
#define REPORT_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "report/report.h"
#include "util/arena.h"
#include "util/json.h"
#include "util/strbuf.h"

/* What the figures of one input are drawn with. */
struct report_ctx {
    const struct report_options *opt;
    struct arena *arena;       /* the section's scratch: strings and arrays of figure data */
    struct report_output *out; /* figures are appended to out->figures */
    struct strbuf *html;       /* the section's figures, inline */
    struct strbuf *notes;      /* "<li>...</li>" per figure left out, with why */
    const char *name;          /* the input's name (a file name), for messages */
    const char *prefix;        /* figure ids are PREFIX-NAME: "sim", "sim2", "plan" */
    const char *source;        /* the command that made the input, for captions */
};

/* ---- the shape of an input ----------------------------------------------------------------- */

/* Refuses (LIBRA_EINVAL, err at FILE:LINE:COL and the member) a member of doc that the figures
 * of its kind read and that has another type or range than libra writes (null counts as
 * absent), or a member its kind needs that is missing or null. */
int report_check_shape(const struct ujson_doc *doc, enum report_kind kind, struct libra_error *err);

/* ---- lookups ------------------------------------------------------------------------------- */

/* The value at path ("modes/libra/run", '/'-separated object members) below o; NULL when any
 * step is missing or not an object. */
const json_t *report_get(const json_t *o, const char *path);

/* The number at path, or NaN. */
double report_num(const json_t *o, const char *path);

/* The string at path, or NULL. */
const char *report_str(const json_t *o, const char *path);

/* n NaNs (nothing drawn) in the section's arena, for a figure to fill. */
double *report_nans(struct report_ctx *ctx, size_t n);

/* qsort's comparison of doubles, ascending (no NaN). */
int report_by_value(const void *a, const void *b);

/* printf into the section's arena. */
const char *report_fmt(struct report_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds a note that figure name is not drawn, and why (printf-formatted). */
void report_note(struct report_ctx *ctx, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The most keys report_keys returns: real results have a handful of modes and policies, and a
 * figure per mode must not grow without bound on a crafted input. */
#define REPORT_KEYS_MAX 32

/*
 * The keys of object o (NULL or not an object: none) in the order figures show them: those of
 * first (a NULL-terminated list; NULL: none) in its order, then the others in byte order; the
 * first REPORT_KEYS_MAX of them (a note says so when there are more). Returns their number;
 * *keys is in the arena.
 */
size_t report_keys(struct report_ctx *ctx, const json_t *o, const char *const *first,
                   const char ***keys);

/* The resource managers in the order figures show them (for report_keys). */
extern const char *const report_mode_order[];

/* The colour of a mode or policy: fixed for the known ones, else from a palette by index. */
const char *report_color(const char *name, size_t index);

/* ---- charts -------------------------------------------------------------------------------- */

enum chart_kind {
    CHART_LINES,   /* one polyline with points per series (whiskers from lo/hi) */
    CHART_BARS,    /* bars side by side per category */
    CHART_STACKED, /* the series' values stacked per category (negatives drawn as 0) */
};

struct chart_series {
    const char *name, *color;
    bool dashed;             /* lines: a dashed stroke */
    const double *y;         /* n_x values; NaN draws nothing */
    const double *lo, *hi;   /* NULL, or n_x whisker ends */
    const char *const *text; /* NULL, or n_x labels above the bars (NULL entries: none) */
};

/* How a numeric x axis is drawn: linear, linear with ticks at least 1 apart, or log10 (values
 * <= 0 are not drawn). */
enum chart_x { CHART_X_LINEAR, CHART_X_INTEGER, CHART_X_LOG };

struct chart {
    const char *name;              /* the id is PREFIX-NAME */
    const char *title;             /* one line */
    const char *caption;           /* what it shows and how to read it; the source is appended */
    const char *x_label, *y_label; /* with units */
    enum chart_kind kind;
    size_t n_x;
    const double *x;               /* lines: numeric x; NULL: categories */
    const char *const *categories; /* n_x labels when x is NULL */
    enum chart_x x_scale;          /* numeric x: its axis */
    const struct chart_series *series;
    size_t n_series;
    double y_min, y_max; /* NaN, or values the y axis must include (0 and 100 for %) */
};

/* Draws c as a figure: axes with ticks, the series, a legend and the caption; data-* attributes
 * on every tick, bar and point, and the data as JSON in <desc>. */
void report_chart(struct report_ctx *ctx, const struct chart *c);

/* A figure drawn by hand: frame_open writes the title, the caller draws the body between
 * y = frame.top and frame.top + body_h, frame_close writes the caption and adds the figure. */
struct frame {
    struct strbuf svg;
    const char *id, *caption;
    double width, top, body_h;
};

/* The width of every figure, px. */
#define FRAME_WIDTH 720.0

/*
 * Opens figure PREFIX-name with title, a body body_h px tall (below the title and legend
 * rows already reserved by legend_rows), the caption (the source is appended) and data, the
 * figure's data (borrowed; its JSON goes into <desc> with the figure's id, title and source).
 */
void frame_open(struct report_ctx *ctx, struct frame *f, const char *name, const char *title,
                int legend_rows, double body_h, const char *caption, json_t *data);

/* Draws the caption under the body, closes the document and adds the figure. */
void frame_close(struct report_ctx *ctx, struct frame *f);

struct legend_item {
    const char *name, *color;
    bool line, dashed; /* a line swatch (dashed or not), else a square */
};

/* The rows the legend takes at width FRAME_WIDTH. */
int legend_rows(const struct legend_item *items, size_t n);

/* Draws the legend in its rows under the title. */
void legend_draw(struct frame *f, const struct legend_item *items, size_t n);

/* ---- the figures of each kind of input ------------------------------------------------------ */

/* libra.sim/1 (fig_sim.c). Returns 0, or LIBRA_EINVAL with err when a step range is asked
 * for and holds no step of the result. */
int report_sim_figures(struct report_ctx *ctx, const json_t *doc, struct libra_error *err);

/* The GPU timeline of each mode of a libra.sim/1 result that has one (fig_timeline.c): modes
 * names[0..n) of modes. */
void report_timeline_figures(struct report_ctx *ctx, const json_t *modes, const char **names,
                             size_t n);

void report_sweep_figures(struct report_ctx *ctx, const json_t *doc); /* fig_sweep.c */
/* The trajectory length CDFs of one run's modes names[0..n) (fig_lengths.c). */
void report_length_figures(struct report_ctx *ctx, const json_t *modes, const char **names,
                           size_t n);
void report_plan_figures(struct report_ctx *ctx, const json_t *doc);  /* fig_plan.c */
void report_load_figures(struct report_ctx *ctx, const json_t *doc);  /* fig_load.c */
void report_route_figures(struct report_ctx *ctx, const json_t *doc); /* fig_route.c */

#endif
