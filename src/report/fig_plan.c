/*
 * The figure of a plan (`libra plan --json`, libra.plan/1): its layout, node by node, GPU by
 * GPU, as the placement member gives it: training GPUs, and rollout instances outlined and
 * labelled with their TP. A plan too large to draw legibly (more nodes or GPUs per node than
 * the caps below) is left out with a note rather than drawn as a smear.
 */
#include <math.h>
#include <string.h>

#include "report/internal.h"
#include "report/svg.h"

#define NODES_MAX 256
#define GPUS_PER_NODE_MAX 64
#define LABEL_W 80.0 /* "node 12" */
#define CELL_H 26.0
#define ROW_GAP 10.0

/* The colour of a rollout GPU of an instance of TP tp: darker for larger TP. */
static const char *tp_color(double tp)
{
    return tp == 1   ? "#b5e0a8"
           : tp == 2 ? "#8cd17d"
           : tp == 4 ? "#59a14f"
           : tp == 8 ? "#2f6b2a"
                     : "#76b7b2";
}

#define TRAIN_COLOR "#4e79a7"

/* The plan's GPUs as [{node, gpus: [{gpu, role, instance, tp}]}]: the members drawn; NULL
 * with a note when a node has no number or a GPU no number below gpn or no role. */
static json_t *layout_data(struct report_ctx *ctx, const json_t *placement, double gpn)
{
    json_t *nodes = json_array();
    for (size_t i = 0; i < json_array_size(placement); i++) {
        const json_t *node = json_array_get(placement, i), *gpus = json_object_get(node, "gpus");
        if (!isfinite(report_num(node, "node"))) {
            report_note(ctx, "layout", "placement[%zu].node: missing or not a number", i);
            json_decref(nodes);
            return NULL;
        }
        json_t *out = json_array();
        json_array_append_new(nodes, json_pack("{s:o,s:o}", "node",
                                               ujson_real(report_num(node, "node")), "gpus", out));
        for (size_t g = 0; g < json_array_size(gpus); g++) {
            const json_t *x = json_array_get(gpus, g);
            double gpu = report_num(x, "gpu");
            const char *role = report_str(x, "role");
            if (!(gpu >= 0 && gpu < gpn) || !role) {
                report_note(ctx, "layout",
                            "placement[%zu].gpus[%zu]: no gpu number below %.0f, or no role", i, g,
                            gpn);
                json_decref(nodes);
                return NULL;
            }
            json_array_append_new(out,
                                  json_pack("{s:o,s:s,s:o,s:o}", "gpu", ujson_real(gpu), "role",
                                            role, "instance", ujson_real(report_num(x, "instance")),
                                            "tp", ujson_real(report_num(x, "instance_tp"))));
        }
    }
    return json_pack("{s:o,s:o}", "gpus_per_node", ujson_real(gpn), "nodes", nodes);
}

static void gpu_cell(struct frame *f, const json_t *node, const json_t *g, double x, double y,
                     double w)
{
    double tp = report_num(g, "tp");
    bool train = strcmp(report_str(g, "role"), "train") == 0;
    svg_tag(&f->svg, "rect");
    svg_attr(&f->svg, "class", "gpu");
    svg_attr_value(&f->svg, "data-node", report_num(node, "node"));
    svg_attr_value(&f->svg, "data-gpu", report_num(g, "gpu"));
    svg_attr(&f->svg, "data-role", report_str(g, "role"));
    svg_attr_value(&f->svg, "data-instance", report_num(g, "instance"));
    svg_attr_value(&f->svg, "data-tp", tp);
    svg_attr_px(&f->svg, "x", x + 1);
    svg_attr_px(&f->svg, "y", y);
    svg_attr_px(&f->svg, "width", w - 2);
    svg_attr_px(&f->svg, "height", CELL_H);
    svg_attr(&f->svg, "fill", train ? TRAIN_COLOR : tp_color(tp));
    svg_end_tag(&f->svg);
}

/* Outlines the run of GPUs [first, last] of one instance on a node, with its TP. */
static void instance_box(struct report_ctx *ctx, struct frame *f, const json_t *g, double x0,
                         double x1, double y)
{
    double tp = report_num(g, "tp");
    svg_tag(&f->svg, "rect");
    svg_attr(&f->svg, "class", "instance");
    svg_attr_value(&f->svg, "data-instance", report_num(g, "instance"));
    svg_attr_value(&f->svg, "data-tp", tp);
    svg_attr_px(&f->svg, "x", x0);
    svg_attr_px(&f->svg, "y", y - 1);
    svg_attr_px(&f->svg, "width", x1 - x0);
    svg_attr_px(&f->svg, "height", CELL_H + 2);
    svg_attr(&f->svg, "fill", "none");
    svg_attr(&f->svg, "stroke", "#222222");
    svg_end_tag(&f->svg);
    bool dark = strcmp(report_str(g, "role"), "train") == 0 || tp >= 4;
    strbuf_printf(&f->svg, "<g fill=\"%s\">\n", dark ? "#ffffff" : "#111111");
    svg_text(&f->svg, (x0 + x1) / 2, y + CELL_H / 2 + 4, "middle", 10, true, 0, "instance-label",
             isfinite(tp) ? report_fmt(ctx, "TP%.0f", tp) : "TP?");
    strbuf_puts(&f->svg, "</g>\n");
}

static void draw_node(struct report_ctx *ctx, struct frame *f, const json_t *node, double y,
                      double cell_w)
{
    svg_text(&f->svg, 12, y + CELL_H / 2 + 4, "start", 11, false, 0, "node",
             report_fmt(ctx, "node %.0f", report_num(node, "node")));
    const json_t *gpus = json_object_get(node, "gpus");
    size_t n = json_array_size(gpus);
    for (size_t i = 0; i < n; i++) {
        const json_t *g = json_array_get(gpus, i);
        gpu_cell(f, node, g, LABEL_W + report_num(g, "gpu") * cell_w, y, cell_w);
    }
    for (size_t i = 0; i < n;) { /* runs of one instance, in placement order */
        const json_t *g = json_array_get(gpus, i);
        double inst = report_num(g, "instance"), last = report_num(g, "gpu");
        size_t j = i + 1;
        for (; j < n && report_num(json_array_get(gpus, j), "instance") == inst; j++)
            last = report_num(json_array_get(gpus, j), "gpu");
        if (isfinite(inst))
            instance_box(ctx, f, g, LABEL_W + report_num(g, "gpu") * cell_w,
                         LABEL_W + (last + 1) * cell_w, y);
        i = j;
    }
}

/* "TP4 PP1 CP1 DP3" of the training layout. */
static const char *train_text(struct report_ctx *ctx, const json_t *doc)
{
    return report_fmt(ctx, "TP%.0f PP%.0f CP%.0f DP%.0f", report_num(doc, "train/tp"),
                      report_num(doc, "train/pp"), report_num(doc, "train/cp"),
                      report_num(doc, "train/dp"));
}

static const char *instances_text(struct report_ctx *ctx, const json_t *doc)
{
    const json_t *inst = report_get(doc, "rollout/instances");
    const char **keys;
    size_t n = report_keys(ctx, inst, NULL, &keys);
    const char *text = "";
    for (size_t k = 0; k < n; k++) {
        double count = report_num(inst, keys[k]);
        if (count > 0)
            text = report_fmt(ctx, "%s%s%.0f x %s", text, *text ? ", " : "", count, keys[k]);
    }
    return *text ? text : "none";
}

/* The first member the caption needs that is not a number; NULL when all are. */
static const char *missing_number(const json_t *doc)
{
    static const char *const paths[] = {
        "train/tp",         "train/pp",          "train/cp",           "train/dp",
        "objective/step_s", "objective/train_s", "objective/rollout_s"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (!isfinite(report_num(doc, paths[i])))
            return paths[i];
    return NULL;
}

void report_plan_figures(struct report_ctx *ctx, const json_t *doc)
{
    const json_t *placement = json_object_get(doc, "placement");
    double gpn = report_num(doc, "gpus_per_node");
    size_t nodes = json_array_size(placement);
    if (json_is_false(json_object_get(doc, "feasible"))) {
        const char *why = report_str(doc, "why");
        report_note(ctx, "layout", "the plan is infeasible: %s", why ? why : "no reason given");
        return;
    }
    if (nodes == 0 || !(gpn >= 1 && gpn <= GPUS_PER_NODE_MAX) || nodes > NODES_MAX) {
        report_note(ctx, "layout",
                    "no placement to draw, or more than %d nodes or %d GPUs per node", NODES_MAX,
                    GPUS_PER_NODE_MAX);
        return;
    }
    const char *missing = missing_number(doc);
    if (missing) {
        report_note(ctx, "layout", "%s: missing or not a number", missing);
        return;
    }
    gpn = floor(gpn);
    json_t *data = layout_data(ctx, placement, gpn);
    if (!data)
        return;
    bool colocated =
        strcmp(report_str(doc, "mode") ? report_str(doc, "mode") : "", "colocated") == 0;
    struct legend_item items[] = {
        {colocated ? "training, then rollout (time-shared)" : "training", TRAIN_COLOR, false,
         false},
        {"rollout TP1", tp_color(1), false, false},
        {"rollout TP2", tp_color(2), false, false},
        {"rollout TP4", tp_color(4), false, false},
        {"rollout TP8", tp_color(8), false, false},
    };
    size_t n_items = colocated ? 1 : sizeof items / sizeof items[0];
    double cell_w = fmin(56, (FRAME_WIDTH - LABEL_W - 12) / gpn);
    const char *caption = report_fmt(
        ctx,
        "The plan's layout on %zu nodes of %.0f GPUs, one row per node: %s GPUs train (%s), "
        "rollout instances are outlined and labelled with their TP (instances: %s). Predicted "
        "step %.1f s (training %.1f s, rollout %.1f s).",
        nodes, gpn, colocated ? "all" : "blue", train_text(ctx, doc), instances_text(ctx, doc),
        report_num(doc, "objective/step_s"), report_num(doc, "objective/train_s"),
        report_num(doc, "objective/rollout_s"));
    int rows = legend_rows(items, n_items);
    struct frame f;
    frame_open(ctx, &f, "layout", "The plan's layout", rows, (double)nodes * (CELL_H + ROW_GAP),
               caption, data);
    legend_draw(&f, items, n_items);
    const json_t *drawn = json_object_get(data, "nodes");
    for (size_t i = 0; i < nodes; i++)
        draw_node(ctx, &f, json_array_get(drawn, i), f.top + 4 + (double)i * (CELL_H + ROW_GAP),
                  cell_w);
    frame_close(ctx, &f);
    json_decref(data);
}
