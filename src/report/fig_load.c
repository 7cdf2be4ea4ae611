/*
 * Figures of a `libra load --json` result (libra.load/1, docs/load.md): the rollout side of an
 * RL job played against real or emulated engines. Per step, the wall time of the batch and the
 * tokens that crossed the wire (prompt sent, of it served from the engines' prefix caches, and
 * generated); per engine, the turns it served. Wall times are as measured: a run against
 * `libra emu` at --time-scale F shows F times the job's time.
 */
#include <math.h>

#include "report/internal.h"

/* Member path of every step (NaN where one has none). */
static double *per_step(struct report_ctx *ctx, const json_t *steps, size_t n, const char *path)
{
    double *y = report_nans(ctx, n + 1);
    for (size_t i = 0; i < n; i++)
        y[i] = report_num(json_array_get(steps, i), path);
    return y;
}

/* One line per member of the steps, in lines[0..n_lines). */
struct step_line {
    const char *path, *name, *color;
    bool dashed;
};

static void step_lines(struct report_ctx *ctx, const json_t *steps, size_t n, double *x,
                       const struct step_line *lines, size_t n_lines, const struct chart *spec)
{
    struct chart_series *s = arena_calloc(ctx->arena, n_lines, sizeof *s);
    for (size_t k = 0; k < n_lines; k++)
        s[k] = (struct chart_series){.name = lines[k].name,
                                     .color = lines[k].color,
                                     .dashed = lines[k].dashed,
                                     .y = per_step(ctx, steps, n, lines[k].path)};
    struct chart c = *spec;
    c.n_x = n;
    c.x = x;
    c.series = s;
    c.n_series = n_lines;
    report_chart(ctx, &c);
}

static void step_figures(struct report_ctx *ctx, const json_t *steps, size_t n, double *x)
{
    static const struct step_line wall[] = {{"wall_s", "wall time", "#4e79a7", false}};
    step_lines(ctx, steps, n, x, wall, 1,
               &(struct chart){.name = "step-time",
                               .title = "Wall time per step",
                               .caption = "Per step (the batch the trainer took for that "
                                          "version), the wall-clock seconds from the batch's "
                                          "first request to its last answer, as measured: "
                                          "against emulated engines at --time-scale F, F times "
                                          "the job's time.",
                               .x_label = "training step",
                               .y_label = "wall time (s)",
                               .kind = CHART_LINES,
                               .x_scale = CHART_X_INTEGER,
                               .y_min = 0,
                               .y_max = NAN});
    static const struct step_line tokens[] = {
        {"prompt_tokens", "prompt tokens sent", "#4e79a7", false},
        {"cached_tokens", "of them cached by the engines", "#76b7b2", true},
        {"generated_tokens", "generated tokens", "#59a14f", false}};
    step_lines(ctx, steps, n, x, tokens, 3,
               &(struct chart){.name = "tokens",
                               .title = "Tokens per step",
                               .caption = "Per step, the prompt tokens the client sent (whole "
                                          "contexts, every turn), the part of them the engines "
                                          "reported as prefix-cache hits (dashed), and the "
                                          "tokens generated. A cached line close to the prompt "
                                          "line means each turn's context was mostly served "
                                          "from the cache.",
                               .x_label = "training step",
                               .y_label = "tokens",
                               .kind = CHART_LINES,
                               .x_scale = CHART_X_INTEGER,
                               .y_min = 0,
                               .y_max = NAN});
}

static void engine_turns(struct report_ctx *ctx, const json_t *engines)
{
    size_t n = json_array_size(engines);
    const char **cats = arena_calloc(ctx->arena, n + 1, sizeof *cats);
    double *y = report_nans(ctx, n + 1);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(engines, i);
        cats[i] =
            report_fmt(ctx, "%zu%s", i, json_is_true(json_object_get(e, "dead")) ? " (dead)" : "");
        y[i] = report_num(e, "turns");
    }
    struct chart_series *s = arena_calloc(ctx->arena, 1, sizeof *s);
    *s = (struct chart_series){"turns served", "#59a14f", false, y, NULL, NULL, NULL};
    report_chart(ctx, &(struct chart){"engines", "Turns per engine",
                                      "The turns each engine answered over the run (those of "
                                      "dropped groups included), engines in the order of "
                                      "--engines; an engine that died is marked.",
                                      "engine", "turns", CHART_BARS, n, NULL, cats, CHART_X_LINEAR,
                                      s, 1, 0, NAN});
}

void report_load_figures(struct report_ctx *ctx, const json_t *doc)
{
    const json_t *steps = json_object_get(doc, "steps");
    size_t n = json_array_size(steps);
    if (n) {
        step_figures(ctx, steps, n, per_step(ctx, steps, n, "step"));
    } else {
        report_note(ctx, "per-step figures", "the result has no steps (the run stopped first)");
    }
    if (json_array_size(json_object_get(doc, "engines")))
        engine_turns(ctx, json_object_get(doc, "engines"));
    else
        report_note(ctx, "engines", "the result has no engines");
    if (json_object_get(doc, "error"))
        report_note(ctx, "the run", "it stopped early: %s",
                    report_str(doc, "error") ? report_str(doc, "error") : "(no reason given)");
}
