/*
 * Sweeps: a grid of settings times a list of seeds, each cell a whole experiment.
 *
 * One run answers for one batch size and one seed; a claim needs the spread across seeds and
 * its trend across a knob. The cells are independent pure runs, so they go on the worker pool
 * as one loop (each cell's modes and tuning candidates nest inside it), and a cell's result is
 * exactly the single run's with its config. Across the seeds of a grid point the report gives
 * the median and the interquartile range (R-7 quartiles): the middle of what a user should
 * expect, and how far one seed may land from it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "spec/config.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/stats.h"

size_t sim_sweep_points(const struct sim_sweep *sw)
{
    size_t n = 1;
    for (size_t k = 0; k < sw->n_keys; k++)
        n *= sw->keys[k].n;
    return n;
}

size_t sim_sweep_value_index(const struct sim_sweep *sw, size_t p, size_t k)
{
    size_t stride = 1;
    for (size_t j = k + 1; j < sw->n_keys; j++)
        stride *= sw->keys[j].n;
    return p / stride % sw->keys[k].n;
}

const char *sim_sweep_value(const struct sim_sweep *sw, size_t p, size_t k)
{
    return sw->keys[k].values[sim_sweep_value_index(sw, p, k)];
}

/* ---- running ------------------------------------------------------------------------------ */

struct sweep_run {
    struct sim_sweep *sw;
    struct sim_progress *progress;
};

static void run_cell(void *arg, size_t i)
{
    struct sweep_run *r = arg;
    struct sim_cell *c = &r->sw->cells[i];
    if (r->progress)
        atomic_fetch_add(&r->progress->cells_started, 1);
    c->rc = sim_experiment_run(&c->in, &c->exp, &c->err);
    if (c->rc)
        sim_experiment_free(&c->exp);
    if (r->progress)
        atomic_fetch_add(&r->progress->cells_done, 1);
}

size_t sim_sweep_run(struct sim_sweep *sw, struct workers *workers, struct sim_progress *progress)
{
    struct sweep_run r = {sw, progress};
    for (size_t i = 0; i < sw->n_cells; i++) {
        sw->cells[i].in.workers = workers;
        sw->cells[i].in.progress = progress;
    }
    workers_for(workers, sw->n_cells, run_cell, &r);
    size_t failed = 0;
    for (size_t i = 0; i < sw->n_cells; i++)
        failed += sw->cells[i].rc != 0;
    return failed;
}

void sim_sweep_free(struct sim_sweep *sw)
{
    for (size_t i = 0; i < sw->n_cells; i++)
        sim_experiment_free(&sw->cells[i].exp);
}

/* ---- summaries ---------------------------------------------------------------------------- */

/* What a grid point's seeds give for one figure. */
struct spread {
    size_t n; /* seeds with a value */
    double median, q1, q3;
};
#define NO_SPREAD ((struct spread){0, NAN, NAN, NAN})

/* The figures a summary reports: each mode's trained tokens/s, then libra's two ratios. */
enum { FIG_RATIO_COLOCATED = SIM_MODES, FIG_RATIO_ASYNC, FIGS };

static double figure(const struct sim_experiment *e, int fig)
{
    if (fig == FIG_RATIO_COLOCATED || fig == FIG_RATIO_ASYNC)
        return sim_libra_ratio(e, fig == FIG_RATIO_ASYNC ? SIM_ASYNC : SIM_COLOCATED, false);
    for (int i = 0; i < e->n; i++)
        if ((int)e->mode[i].mode == fig)
            return e->mode[i].run.tokens_per_s;
    return NAN;
}

/* Figure fig of the run of grid point p under seed s; NaN when it failed or lacks it. */
static double cell_figure(const struct sim_sweep *sw, size_t p, size_t s, int fig)
{
    const struct sim_cell *c = &sw->cells[p * sw->n_seeds + s];
    return c->rc ? NAN : figure(&c->exp, fig);
}

/* Median and quartiles of the n values of v (reordered). */
static struct spread spread_values(double *v, size_t n)
{
    struct spread out = {n, NAN, NAN, NAN};
    if (n) {
        out.median = stats_quantile(v, n, 0.5);
        out.q1 = stats_quantile(v, n, 0.25);
        out.q3 = stats_quantile(v, n, 0.75);
    }
    return out;
}

/* The spread across seeds of figure fig of grid point p, divided seed by seed by figure
 * fig_over of point p_over when p_over is not SIZE_MAX. */
static struct spread spread_over(const struct sim_sweep *sw, size_t p, int fig, size_t p_over,
                                 int fig_over)
{
    double *v = xcalloc(sw->n_seeds, sizeof *v);
    size_t n = 0;
    for (size_t s = 0; s < sw->n_seeds; s++) {
        double x = cell_figure(sw, p, s, fig);
        if (p_over != SIZE_MAX)
            x /= cell_figure(sw, p_over, s, fig_over);
        if (isfinite(x))
            v[n++] = x;
    }
    struct spread out = spread_values(v, n);
    free(v);
    return out;
}

/* The spread of figure fig across the successful seeds of grid point p. */
static struct spread spread_of(const struct sim_sweep *sw, size_t p, int fig)
{
    return spread_over(sw, p, fig, SIZE_MAX, 0);
}

static size_t failed_at(const struct sim_sweep *sw, size_t p)
{
    size_t n = 0;
    for (size_t s = 0; s < sw->n_seeds; s++)
        n += sw->cells[p * sw->n_seeds + s].rc != 0;
    return n;
}

/* ---- attribution -------------------------------------------------------------------------- */

/* Each run's settings: a mode, and for libra's one TP size or many, the pool on or off, and
 * replanning off or as configured. */
static const struct sim_setting colocated_sets[] = {{"sim.modes", "colocated"}};
static const struct sim_setting async_sets[] = {{"sim.modes", "async"}};
static const struct sim_setting planner_sets[] = {{"sim.modes", "libra"},
                                                  {"plan.homogeneous_rollout", "true"},
                                                  {"ehp.enabled", "false"},
                                                  {"plan.replan_interval_steps", "0"},
                                                  {"plan.replan_pressure", "false"}};
static const struct sim_setting hetero_sets[] = {{"sim.modes", "libra"},
                                                 {"plan.homogeneous_rollout", "false"},
                                                 {"ehp.enabled", "false"},
                                                 {"plan.replan_interval_steps", "0"},
                                                 {"plan.replan_pressure", "false"}};
static const struct sim_setting pool_sets[] = {{"sim.modes", "libra"},
                                               {"plan.homogeneous_rollout", "false"},
                                               {"ehp.enabled", "true"},
                                               {"plan.replan_interval_steps", "0"},
                                               {"plan.replan_pressure", "false"}};
static const struct sim_setting libra_sets[] = {
    {"sim.modes", "libra"}, {"plan.homogeneous_rollout", "false"}, {"ehp.enabled", "true"}};
static const struct sim_setting minus_hetero_sets[] = {
    {"sim.modes", "libra"}, {"plan.homogeneous_rollout", "true"}, {"ehp.enabled", "true"}};
static const struct sim_setting minus_pool_sets[] = {
    {"sim.modes", "libra"}, {"plan.homogeneous_rollout", "false"}, {"ehp.enabled", "false"}};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
/* bars[] by index: the ladder's six, then the leave-one-out runs it lacks */
enum { BAR_POOL = 4, BAR_LIBRA, BAR_MINUS_HETERO, BAR_MINUS_POOL, BARS, LADDER = BAR_LIBRA + 1 };
static const struct sim_bar bars[BARS] = {
    {"colocated", "colocated (tuned)", SIM_COLOCATED, colocated_sets, N_OF(colocated_sets)},
    {"async", "+ disaggregated async (tuned)", SIM_ASYNC, async_sets, N_OF(async_sets)},
    {"+planner", "+ planner (one TP size)", SIM_LIBRA, planner_sets, N_OF(planner_sets)},
    {"+hetero", "+ heterogeneous TP, C-MLFQ", SIM_LIBRA, hetero_sets, N_OF(hetero_sets)},
    {"+pool", "+ elastic pool", SIM_LIBRA, pool_sets, N_OF(pool_sets)},
    {"libra", "+ online replanning (libra)", SIM_LIBRA, libra_sets, N_OF(libra_sets)},
    {"-hetero", "libra - heterogeneous TP, C-MLFQ", SIM_LIBRA, minus_hetero_sets,
     N_OF(minus_hetero_sets)},
    {"-pool", "libra - elastic pool", SIM_LIBRA, minus_pool_sets, N_OF(minus_pool_sets)},
};

/* The leave-one-out view: libra whole, then without each mechanism, by the run that is it. */
static const struct {
    size_t bar;
    const char *label;
} left_out[] = {
    {BAR_LIBRA, "libra"},
    {BAR_MINUS_HETERO, "libra - heterogeneous TP, C-MLFQ"},
    {BAR_MINUS_POOL, "libra - elastic pool"},
    {BAR_POOL, "libra - online replanning"},
};
#define LEFT_OUT N_OF(left_out)

const struct sim_bar *sim_attribution_bars(size_t *n)
{
    *n = BARS;
    return bars;
}

const struct sim_bar *sim_attribution_bar(const char *name)
{
    for (size_t b = 0; b < BARS; b++)
        if (strcmp(bars[b].name, name) == 0)
            return &bars[b];
    return NULL;
}

/* Whether the sweep's last key is the attribution's: its grid points are then q * BARS + b. */
static bool has_attribution(const struct sim_sweep *sw)
{
    return sw->n_keys && strcmp(sw->keys[sw->n_keys - 1].key, SIM_ATTRIBUTION_KEY) == 0 &&
           sw->keys[sw->n_keys - 1].n == BARS;
}

/* The spread of bar b's trained tokens/s at point q of the other keys, over bar b_over's seed
 * by seed unless b_over is SIZE_MAX. */
static struct spread bar_spread(const struct sim_sweep *sw, size_t q, size_t b, size_t b_over)
{
    return spread_over(sw, q * BARS + b, (int)bars[b].mode,
                       b_over == SIZE_MAX ? SIZE_MAX : q * BARS + b_over,
                       b_over == SIZE_MAX ? 0 : (int)bars[b_over].mode);
}

/* ---- JSON --------------------------------------------------------------------------------- */

static const char *error_kind(int rc)
{
    return rc == LIBRA_EINFEAS ? "infeasible" : rc == LIBRA_EINTERNAL ? "internal" : "invalid";
}

/* The values of the first n_keys keys at grid point p. */
static json_t *settings_json(const struct sim_sweep *sw, size_t p, size_t n_keys)
{
    json_t *o = json_object();
    for (size_t k = 0; k < n_keys; k++)
        json_object_set_new(o, sw->keys[k].key, json_string(sim_sweep_value(sw, p, k)));
    return o;
}

static json_t *cell_json(const struct sim_sweep *sw, const struct sim_cell *c)
{
    char digest[17];
    spec_config_digest_hex(c->in.cfg, digest);
    json_t *o = json_pack("{s:I,s:o,s:I,s:s}", "point", (json_int_t)c->point, "set",
                          settings_json(sw, c->point, sw->n_keys), "seed", (json_int_t)c->seed,
                          "config_digest", digest);
    char buf[1024];
    if (c->rc)
        json_object_set_new(o, "error",
                            json_pack("{s:s,s:s}", "message",
                                      error_format(&c->err, buf, sizeof buf), "kind",
                                      error_kind(c->rc)));
    else
        json_object_set_new(o, "result", sim_experiment_to_json(&c->exp, c->in.cfg));
    return o;
}

static json_t *spread_json(struct spread s)
{
    return json_pack("{s:I,s:o,s:o,s:o}", "seeds", (json_int_t)s.n, "median", ujson_real(s.median),
                     "q1", ujson_real(s.q1), "q3", ujson_real(s.q3));
}

static json_t *summary_json(const struct sim_sweep *sw, size_t p)
{
    json_t *modes = json_object();
    for (int m = 0; m < SIM_MODES; m++) {
        struct spread s = spread_of(sw, p, m);
        if (s.n)
            json_object_set_new(modes, sim_mode_name((enum sim_mode)m),
                                json_pack("{s:o}", "trained_tokens_per_s", spread_json(s)));
    }
    return json_pack("{s:I,s:o,s:I,s:o,s:o,s:o}", "point", (json_int_t)p, "set",
                     settings_json(sw, p, sw->n_keys), "failed", (json_int_t)failed_at(sw, p),
                     "modes", modes, "libra_over_colocated_tokens",
                     spread_json(spread_of(sw, p, FIG_RATIO_COLOCATED)), "libra_over_async_tokens",
                     spread_json(spread_of(sw, p, FIG_RATIO_ASYNC)));
}

static json_t *bar_json(const char *name, const char *label, struct spread tokens, const char *over,
                        struct spread ratio)
{
    return json_pack("{s:s,s:s,s:o,s:o}", "bar", name, "label", label, "trained_tokens_per_s",
                     spread_json(tokens), over, spread_json(ratio));
}

/* The ladder and the leave-one-out view at each point of the keys before the attribution's. */
static json_t *attribution_json(const struct sim_sweep *sw)
{
    json_t *out = json_array();
    for (size_t q = 0; q < sim_sweep_points(sw) / BARS; q++) {
        json_t *ladder = json_array(), *loo = json_array();
        for (size_t b = 0; b < LADDER; b++)
            json_array_append_new(ladder, bar_json(bars[b].name, bars[b].label,
                                                   bar_spread(sw, q, b, SIZE_MAX), "over_previous",
                                                   b ? bar_spread(sw, q, b, b - 1) : NO_SPREAD));
        for (size_t i = 0; i < LEFT_OUT; i++)
            json_array_append_new(loo, bar_json(bars[left_out[i].bar].name, left_out[i].label,
                                                bar_spread(sw, q, left_out[i].bar, SIZE_MAX),
                                                "over_libra",
                                                bar_spread(sw, q, left_out[i].bar, BAR_LIBRA)));
        json_array_append_new(out, json_pack("{s:I,s:o,s:o,s:o}", "point", (json_int_t)q, "set",
                                             settings_json(sw, q * BARS, sw->n_keys - 1), "ladder",
                                             ladder, "leave_one_out", loo));
    }
    return out;
}

/* The envelope with the grid and the seeds. */
static json_t *header_json(const struct sim_sweep *sw, const struct libra_config *base)
{
    json_t *doc = spec_config_envelope(SIM_SWEEP_SCHEMA, base);
    json_t *grid = json_array(), *seeds = json_array();
    for (size_t k = 0; k < sw->n_keys; k++) {
        json_t *values = json_array();
        for (size_t i = 0; i < sw->keys[k].n; i++)
            json_array_append_new(values, json_string(sw->keys[k].values[i]));
        json_array_append_new(grid,
                              json_pack("{s:s,s:o}", "key", sw->keys[k].key, "values", values));
    }
    for (size_t s = 0; s < sw->n_seeds; s++)
        json_array_append_new(seeds, json_integer((json_int_t)sw->seeds[s]));
    json_object_set_new(doc, "grid", grid);
    json_object_set_new(doc, "seeds", seeds);
    return doc;
}

json_t *sim_sweep_to_json(const struct sim_sweep *sw, const struct libra_config *base)
{
    json_t *doc = header_json(sw, base);
    json_t *cells = json_array(), *summary = json_array();
    for (size_t i = 0; i < sw->n_cells; i++)
        json_array_append_new(cells, cell_json(sw, &sw->cells[i]));
    for (size_t p = 0; p < sim_sweep_points(sw); p++)
        json_array_append_new(summary, summary_json(sw, p));
    json_object_set_new(doc, "cells", cells);
    json_object_set_new(doc, "summary", summary);
    if (has_attribution(sw))
        json_object_set_new(doc, "attribution", attribution_json(sw));
    return doc;
}

char *sim_sweep_jsonl(const struct sim_sweep *sw, const struct libra_config *base)
{
    struct strbuf b = {0};
    json_t *head = header_json(sw, base);
    char *line = ujson_dump(head, false);
    strbuf_printf(&b, "%s\n", line);
    free(line);
    json_decref(head);
    for (size_t i = 0; i < sw->n_cells; i++) {
        json_t *c = cell_json(sw, &sw->cells[i]);
        line = ujson_dump(c, false);
        strbuf_printf(&b, "%s\n", line);
        free(line);
        json_decref(c);
    }
    return strbuf_detach(&b);
}

/* ---- text --------------------------------------------------------------------------------- */

/* Ends a table row: drops the padding after its last column. */
static void row_end(struct strbuf *b)
{
    while (b->len && b->data[b->len - 1] == ' ')
        b->data[--b->len] = '\0';
    strbuf_printf(b, "\n");
}

/* "median [q1, q3]" of a figure, or "-" without a value; digits after the point. */
static void spread_text(struct spread s, int digits, char *out, size_t size)
{
    if (!s.n)
        snprintf(out, size, "-");
    else
        snprintf(out, size, "%.*f [%.*f, %.*f]", digits, s.median, digits, s.q1, digits, s.q3);
}

/* Per grid point, each mode's trained tokens/s and libra's ratios. */
/* The width of key k's column: its name's and its longest value's, at least 22, so that a long
 * value (a trace's path) leaves the figures under their headers. */
static int key_width(const struct sim_sweep *sw, size_t k)
{
    size_t width = strlen(sw->keys[k].key) > 22 ? strlen(sw->keys[k].key) : 22;
    for (size_t i = 0; i < sw->keys[k].n; i++)
        if (strlen(sw->keys[k].values[i]) > width)
            width = strlen(sw->keys[k].values[i]);
    return (int)width;
}

static void modes_text(struct strbuf *b, const struct sim_sweep *sw)
{
    size_t points = sim_sweep_points(sw);
    bool shown[FIGS] = {false};
    for (int f = 0; f < FIGS; f++)
        for (size_t p = 0; p < points && !shown[f]; p++)
            shown[f] = spread_of(sw, p, f).n > 0;
    for (size_t k = 0; k < sw->n_keys; k++)
        strbuf_printf(b, "%-*s ", key_width(sw, k), sw->keys[k].key);
    for (int f = 0; f < SIM_MODES; f++)
        if (shown[f])
            strbuf_printf(b, "%-24s ", sim_mode_name((enum sim_mode)f));
    strbuf_printf(b, "%-20s %-20s", shown[FIG_RATIO_COLOCATED] ? "libra/colocated" : "",
                  shown[FIG_RATIO_ASYNC] ? "libra/async" : "");
    row_end(b);
    for (size_t p = 0; p < points; p++) {
        char cell[64];
        for (size_t k = 0; k < sw->n_keys; k++)
            strbuf_printf(b, "%-*s ", key_width(sw, k), sim_sweep_value(sw, p, k));
        for (int f = 0; f < SIM_MODES; f++) {
            if (!shown[f])
                continue;
            spread_text(spread_of(sw, p, f), 0, cell, sizeof cell);
            strbuf_printf(b, "%-24s ", cell);
        }
        for (int f = FIG_RATIO_COLOCATED; f < FIGS; f++) {
            spread_text(spread_of(sw, p, f), 2, cell, sizeof cell);
            strbuf_printf(b, "%-20s ", shown[f] ? cell : "");
        }
        row_end(b);
    }
    strbuf_printf(b,
                  "\ntrained tokens/s%s across seeds: median [first quartile, third quartile]; "
                  "--json has every run.\n",
                  shown[FIG_RATIO_COLOCATED] || shown[FIG_RATIO_ASYNC] ? " (and libra's ratios)"
                                                                       : "");
}

/* One row of an attribution table: bar b at point q of the other keys, with its trained
 * tokens/s, its ratio to bar b_over's and the layout of its first seed that ran. */
static void bar_row(struct strbuf *b, const struct sim_sweep *sw, size_t q, const char *label,
                    size_t bar, size_t b_over)
{
    char t[64], r[64], layout[160] = "-";
    spread_text(bar_spread(sw, q, bar, SIZE_MAX), 0, t, sizeof t);
    spread_text(b_over == SIZE_MAX ? NO_SPREAD : bar_spread(sw, q, bar, b_over), 2, r, sizeof r);
    for (size_t s = 0; s < sw->n_seeds; s++) {
        const struct sim_cell *c = &sw->cells[(q * BARS + bar) * sw->n_seeds + s];
        if (!c->rc && c->exp.n) {
            sim_layout_text(&c->exp.mode[0].layout, layout, sizeof layout);
            break;
        }
    }
    strbuf_printf(b, "%-34s %-24s %-20s %s", label, t, r, layout);
    row_end(b);
}

static void table_head(struct strbuf *b, const char *title, const char *ratio)
{
    strbuf_printf(b, "%-34s %-24s %-20s %s\n", title, "trained tokens/s", ratio,
                  "layout (first seed)");
}

/* Per point of the other keys, the ladder and the leave-one-out view. */
static void attribution_text(struct strbuf *b, const struct sim_sweep *sw)
{
    for (size_t q = 0; q < sim_sweep_points(sw) / BARS; q++) {
        if (sw->n_keys > 1) {
            for (size_t k = 0; k + 1 < sw->n_keys; k++)
                strbuf_printf(b, "%s%s=%s", k ? ", " : "", sw->keys[k].key,
                              sim_sweep_value(sw, q * BARS, k));
            strbuf_printf(b, "\n");
        }
        table_head(b, "the ladder", "over the bar before");
        for (size_t i = 0; i < LADDER; i++)
            bar_row(b, sw, q, bars[i].label, i, i ? i - 1 : SIZE_MAX);
        table_head(b, "leave one out", "over libra");
        for (size_t i = 0; i < LEFT_OUT; i++)
            bar_row(b, sw, q, left_out[i].label, left_out[i].bar, BAR_LIBRA);
        strbuf_printf(b, "\n");
    }
    strbuf_printf(b, "trained tokens/s across seeds: median [first quartile, third quartile]; "
                     "ratios taken seed by seed; --json has every run.\n");
}

/* The grid's key `key`, or NULL. */
static const struct sim_sweep_key *swept(const struct sim_sweep *sw, const char *key)
{
    for (size_t k = 0; k < sw->n_keys; k++)
        if (strcmp(sw->keys[k].key, key) == 0)
            return &sw->keys[k];
    return NULL;
}

/* Onto b: text, or where key is a key of the grid (the base config's value is none of its runs')
 * its values, "{8,16}"; more than HEADLINE_VALUES of them as the first HEADLINE_FIRST, "..." and
 * the last, "{48,56,64,...,600}" (the table lists every point). */
enum { HEADLINE_VALUES = 6, HEADLINE_FIRST = 3 };
static void unless_swept(struct strbuf *b, const struct sim_sweep *sw, const char *key,
                         const char *text)
{
    const struct sim_sweep_key *k = swept(sw, key);
    if (!k) {
        strbuf_puts(b, text);
        return;
    }
    for (size_t i = 0; i < k->n; i++) {
        bool cut = k->n > HEADLINE_VALUES && i >= HEADLINE_FIRST && i + 1 < k->n;
        if (!cut)
            strbuf_printf(b, "%s%s", i ? "," : "{", k->values[i]);
        else if (i == HEADLINE_FIRST)
            strbuf_puts(b, ",...");
    }
    strbuf_puts(b, "}");
}

char *sim_sweep_text(const struct sim_sweep *sw, const struct libra_config *base)
{
    struct strbuf b = {0};
    size_t points = sim_sweep_points(sw), failed = 0;
    for (size_t i = 0; i < sw->n_cells; i++)
        failed += sw->cells[i].rc != 0;
    char gpus[24];
    snprintf(gpus, sizeof gpus, "%d", base->cluster.gpus);
    strbuf_printf(&b,
                  "libra sim: sweep of %zu grid point%s x %zu seed%s = %zu run%s (%zu failed); ",
                  points, points == 1 ? "" : "s", sw->n_seeds, sw->n_seeds == 1 ? "" : "s",
                  sw->n_cells, sw->n_cells == 1 ? "" : "s", failed);
    /* a trace, the base's or swept, is what the runs replay, as the single run names it */
    if (base->workload.trace[0] || swept(sw, "workload.trace"))
        unless_swept(&b, sw, "workload.trace", base->workload.trace);
    else
        unless_swept(&b, sw, "workload.name", base->workload.name);
    strbuf_puts(&b, " on ");
    unless_swept(&b, sw, "model.name", base->model.name);
    strbuf_puts(&b, ", ");
    unless_swept(&b, sw, "cluster.gpus", gpus);
    strbuf_puts(&b, " x ");
    unless_swept(&b, sw, "cluster.hardware", base->cluster.hardware);
    strbuf_puts(&b, "\n\n");
    if (has_attribution(sw))
        attribution_text(&b, sw);
    else
        modes_text(&b, sw);
    for (size_t i = 0; i < sw->n_cells; i++) {
        const struct sim_cell *c = &sw->cells[i];
        if (!c->rc)
            continue;
        strbuf_printf(&b, "failed:");
        for (size_t k = 0; k < sw->n_keys; k++)
            strbuf_printf(&b, " %s=%s", sw->keys[k].key, sim_sweep_value(sw, c->point, k));
        char buf[1024];
        strbuf_printf(&b, " seed %lld: %s\n", (long long)c->seed,
                      error_format(&c->err, buf, sizeof buf));
    }
    return strbuf_detach(&b);
}
