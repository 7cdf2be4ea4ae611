/*
 * Figures of one `libra sim --json` result (docs/report.md): per step, the step time,
 * utilisation, GPU time by use and the tail's share; per run, the trajectory length CDFs
 * (fig_lengths.c), the planner's prediction beside the simulation, the attribution bars across
 * resource managers and routing accuracy.
 *
 * The GPU time of a step is derived from members the result already has, so that it adds up:
 * a layout of T training and R rollout GPUs (the same GPUs when colocated) holds GPUs x
 * step_s GPU-seconds per step; training takes T x train_s, rollout the instances' busy share
 * (rollout_utilisation x R x step_s), the weight update the trainer's part of the update that
 * ended in the step (sync_s of the step before; colocated: both switches and the resharding,
 * on every GPU), and the rest is idle.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/internal.h"
#include "util/error.h"

/* The steps per-step figures draw: the `step` numbers of every mode in range, ascending. */
struct steps {
    size_t n;
    double *x;
    const char **label; /* "0", "1", ... for bar categories */
    double lo, hi;      /* every step the result holds, for messages */
};

static bool in_range(const struct report_ctx *ctx, double step)
{
    const struct report_options *o = ctx->opt;
    return !o->step_range || (step >= (double)o->step_first && step <= (double)o->step_last);
}

static void collect_steps(struct report_ctx *ctx, const json_t *modes, const char **names,
                          size_t n_modes, struct steps *st)
{
    size_t cap = 0;
    for (size_t m = 0; m < n_modes; m++)
        cap += json_array_size(report_get(json_object_get(modes, names[m]), "steps"));
    st->x = arena_calloc(ctx->arena, cap + 1, sizeof *st->x);
    st->n = 0;
    st->lo = INFINITY;
    st->hi = -INFINITY;
    for (size_t m = 0; m < n_modes; m++) {
        const json_t *steps = report_get(json_object_get(modes, names[m]), "steps");
        for (size_t i = 0; i < json_array_size(steps); i++) {
            double step = report_num(json_array_get(steps, i), "step");
            if (!isfinite(step) || fabs(step) > 1e15)
                continue;
            st->lo = fmin(st->lo, step);
            st->hi = fmax(st->hi, step);
            if (in_range(ctx, step))
                st->x[st->n++] = step;
        }
    }
    qsort(st->x, st->n, sizeof *st->x, report_by_value);
    size_t u = 0;
    for (size_t i = 0; i < st->n; i++)
        if (u == 0 || st->x[i] != st->x[u - 1])
            st->x[u++] = st->x[i];
    st->n = u;
    st->label = arena_calloc(ctx->arena, u + 1, sizeof *st->label);
    for (size_t i = 0; i < u; i++)
        st->label[i] = report_fmt(ctx, "%.10g", st->x[i]);
}

/* The slot of step in st, or -1 (out of range). */
static long slot(const struct steps *st, double step)
{
    if (!isfinite(step))
        return -1;
    const double *at = bsearch(&step, st->x, st->n, sizeof *st->x, report_by_value);
    return at ? (long)(at - st->x) : -1;
}

/* scale x steps[].key of one mode, aligned to st. */
static double *per_step(struct report_ctx *ctx, const struct steps *st, const json_t *mode,
                        const char *key, double scale)
{
    double *y = report_nans(ctx, st->n);
    const json_t *steps = report_get(mode, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const json_t *s = json_array_get(steps, i);
        long k = slot(st, report_num(s, "step"));
        if (k >= 0)
            y[k] = scale * report_num(s, key);
    }
    return y;
}

/* One line series per mode of steps[].key (times scale). */
static struct chart_series *mode_lines(struct report_ctx *ctx, const struct steps *st,
                                       const json_t *modes, const char **names, size_t n,
                                       const char *key, double scale)
{
    struct chart_series *s = arena_calloc(ctx->arena, n + 1, sizeof *s);
    for (size_t m = 0; m < n; m++)
        s[m] = (struct chart_series){
            names[m], report_color(names[m], m),
            false,    per_step(ctx, st, json_object_get(modes, names[m]), key, scale),
            NULL,     NULL,
            NULL};
    return s;
}

static const char *range_text(struct report_ctx *ctx, const struct steps *st)
{
    return report_fmt(ctx, "steps %.0f to %.0f", st->x[0], st->x[st->n - 1]);
}

static void step_time(struct report_ctx *ctx, const struct steps *st, const json_t *modes,
                      const char **names, size_t n)
{
    double warmup = report_num(json_object_get(modes, names[0]), "run/warmup_steps");
    report_chart(
        ctx, &(struct chart){
                 "step-time", "Step time per resource manager",
                 report_fmt(ctx,
                            "Simulated time of each training step (from the end of the step "
                            "before to the end of its own), %s, one line per resource manager; "
                            "lower is faster. %s",
                            range_text(ctx, st),
                            warmup > 0 ? report_fmt(ctx,
                                                    "Steps before step %.0f are warm-up: drawn, "
                                                    "but left out of the rates.",
                                                    warmup)
                                       : "No step is warm-up."),
                 "training step", "step time (s)", CHART_LINES, st->n, st->x, NULL, CHART_X_INTEGER,
                 mode_lines(ctx, st, modes, names, n, "step_s", 1), n, 0, NAN});
}

static void utilisation(struct report_ctx *ctx, const struct steps *st, const json_t *modes,
                        const char **names, size_t n)
{
    struct chart_series *s = arena_calloc(ctx->arena, 2 * n + 1, sizeof *s);
    for (size_t m = 0; m < n; m++) {
        const json_t *mode = json_object_get(modes, names[m]);
        const char *color = report_color(names[m], m);
        s[2 * m] = (struct chart_series){report_fmt(ctx, "%s rollout", names[m]),
                                         color,
                                         false,
                                         per_step(ctx, st, mode, "rollout_utilisation", 100),
                                         NULL,
                                         NULL,
                                         NULL};
        s[2 * m + 1] = (struct chart_series){report_fmt(ctx, "%s training", names[m]),
                                             color,
                                             true,
                                             per_step(ctx, st, mode, "train_utilisation", 100),
                                             NULL,
                                             NULL,
                                             NULL};
    }
    report_chart(ctx,
                 &(struct chart){"utilisation", "GPU utilisation per step",
                                 report_fmt(ctx,
                                            "Busy share of the rollout GPUs (solid: the instances' "
                                            "busy GPU-seconds over their GPU-seconds) and of the "
                                            "training GPUs (dashed: training compute over the step "
                                            "time) in each step, %s.",
                                            range_text(ctx, st)),
                                 "training step", "utilisation (%)", CHART_LINES, st->n, st->x,
                                 NULL, CHART_X_INTEGER, s, 2 * n, 0, 100});
}

static void tail_share(struct report_ctx *ctx, const struct steps *st, const json_t *modes,
                       const char **names, size_t n)
{
    report_chart(
        ctx, &(struct chart){"tail-share", "Tail share of rollout per step",
                             report_fmt(ctx,
                                        "Share of each step's rollout span (first start to last "
                                        "finish of its batch) taken after the trajectory before "
                                        "the last 10 %% finished, %s: how much of rollout waits "
                                        "on the long tail.",
                                        range_text(ctx, st)),
                             "training step", "tail share (%)", CHART_LINES, st->n, st->x, NULL,
                             CHART_X_INTEGER,
                             mode_lines(ctx, st, modes, names, n, "tail_share", 100), n, 0, 100});
}

enum { USE_TRAIN, USE_ROLLOUT, USE_UPDATE, USE_IDLE, USES };

/* One mode's GPU-seconds per step by use (see the top of the file). */
static void gpu_time(struct report_ctx *ctx, const struct steps *st, const char *name,
                     const json_t *mode)
{
    double train_gpus = report_num(mode, "layout/train_gpus");
    double roll_gpus = report_num(mode, "layout/rollout_gpus");
    const json_t *shared_member = report_get(mode, "layout/colocated");
    bool shared = json_is_boolean(shared_member) ? json_is_true(shared_member)
                                                 : strcmp(name, "colocated") == 0;
    const char *id = report_fmt(ctx, "gpu-time-%s", name);
    if (!(train_gpus >= 0 && roll_gpus >= 0 && train_gpus + roll_gpus > 0)) {
        report_note(ctx, id, "the result has no usable layout.train_gpus and layout.rollout_gpus");
        return;
    }
    double total = shared ? fmax(train_gpus, roll_gpus) : train_gpus + roll_gpus;
    double *use[USES];
    for (int u = 0; u < USES; u++)
        use[u] = report_nans(ctx, st->n);
    const json_t *steps = report_get(mode, "steps");
    double before_sync = 0; /* the update after the step before ends in this one */
    for (size_t i = 0; i < json_array_size(steps); i++) {
        const json_t *s = json_array_get(steps, i);
        double step_s = report_num(s, "step_s"), sync = report_num(s, "sync_s");
        long k = slot(st, report_num(s, "step"));
        if (k >= 0 && isfinite(step_s)) {
            use[USE_TRAIN][k] = train_gpus * report_num(s, "train_s");
            use[USE_ROLLOUT][k] = roll_gpus * step_s * report_num(s, "rollout_utilisation");
            use[USE_UPDATE][k] =
                shared ? total * report_num(s, "switch_s") : train_gpus * before_sync;
            double busy = 0;
            for (int u = 0; u < USE_IDLE; u++)
                busy += isfinite(use[u][k]) ? use[u][k] : 0;
            use[USE_IDLE][k] = fmax(0, total * step_s - busy);
        }
        before_sync = isfinite(sync) ? sync : 0;
    }
    static const char *const names[USES] = {"training", "rollout", "weight update / switch",
                                            "idle"};
    static const char *const colors[USES] = {"#4e79a7", "#59a14f", "#e15759", "#bab0ac"};
    struct chart_series *s = arena_calloc(ctx->arena, USES, sizeof *s);
    for (int u = 0; u < USES; u++)
        s[u] = (struct chart_series){names[u], colors[u], false, use[u], NULL, NULL, NULL};
    const char *layout =
        shared ? report_fmt(ctx, "%.0f GPUs, time-shared: each trains, then rolls out", total)
               : report_fmt(ctx, "%.0f GPUs: %.0f training, %.0f rollout", total, train_gpus,
                            roll_gpus);
    report_chart(
        ctx,
        &(struct chart){
            id, report_fmt(ctx, "GPU time by use per step: %s", name),
            report_fmt(ctx,
                       "GPU-seconds of each step of %s on its layout (%s), %s; a stack is GPUs "
                       "x step time. Training: training GPUs x training compute time. Rollout: "
                       "the instances' busy GPU-seconds. Weight update / switch: %s. Idle: the "
                       "rest.",
                       name, layout, range_text(ctx, st),
                       shared ? "both switches of the hybrid engine and the resharding, on "
                                "every GPU"
                              : "the trainer's share of the weight update that ended in the step"),
            "training step", "GPU time (GPU-s)", CHART_STACKED, st->n, NULL, st->label, false, s,
            USES, 0, NAN});
}

/* Predicted beside simulated step, training and rollout time of each planned mode. */
static void planner(struct report_ctx *ctx, const json_t *modes, const char **names, size_t n)
{
    static const char *const parts[] = {"step", "training", "rollout"};
    static const char *const keys[] = {"step_s", "train_s", "rollout_s"};
    size_t drawn = 0;
    for (size_t m = 0; m < n; m++) {
        const json_t *p = report_get(json_object_get(modes, names[m]), "planner");
        if (!json_is_object(p))
            continue;
        double *pred = report_nans(ctx, 3), *sim = report_nans(ctx, 3);
        for (int k = 0; k < 3; k++) {
            pred[k] = report_num(json_object_get(p, "predicted"), keys[k]);
            sim[k] = report_num(json_object_get(p, "simulated"), keys[k]);
        }
        struct chart_series *s = arena_calloc(ctx->arena, 2, sizeof *s);
        s[0] =
            (struct chart_series){"planner's prediction", "#bab0ac", false, pred, NULL, NULL, NULL};
        s[1] = (struct chart_series){
            "simulated mean", report_color(names[m], m), false, sim, NULL, NULL, NULL};
        report_chart(ctx,
                     &(struct chart){
                         report_fmt(ctx, "planner-%s", names[m]),
                         report_fmt(ctx, "Planner's prediction vs simulation: %s", names[m]),
                         report_fmt(ctx,
                                    "The planner's predicted step, training and rollout time for "
                                    "the layout %s ran on, beside the means the simulation "
                                    "measured after warm-up (for a pipelined layout, rollout is "
                                    "the interval between batches becoming complete).",
                                    names[m]),
                         "time", "time (s)", CHART_BARS, 3, NULL, parts, false, s, 2, 0, NAN});
        drawn++;
    }
    if (!drawn)
        report_note(ctx, "planner",
                    "no mode of this result ran a planned layout (modes.*.planner)");
}

/* Trained tokens/s of colocated, async and libra, each with its ratio to the bar before. */
static void attribution(struct report_ctx *ctx, const json_t *modes)
{
    static const char *const order[] = {"colocated", "async", "libra"};
    const char **cats = arena_calloc(ctx->arena, 3, sizeof *cats);
    const char **text = arena_calloc(ctx->arena, 3, sizeof *text);
    double *y = report_nans(ctx, 3);
    size_t n = 0;
    for (int k = 0; k < 3; k++) {
        double v = report_num(json_object_get(modes, order[k]), "run/trained_tokens_per_s");
        if (!isfinite(v))
            continue;
        cats[n] = order[k];
        y[n] = v;
        text[n] = n && y[n - 1] > 0
                      ? report_fmt(ctx, "%.0f (%.2fx %s)", v, v / y[n - 1], cats[n - 1])
                      : report_fmt(ctx, "%.0f", v);
        n++;
    }
    report_note(ctx, "attribution",
                "the bars of the planner alone, of the elastic hybrid pool and of online "
                "replanning: the libra bar is one run with each as its config set it "
                "(layout.pool, run.replan); `libra sim --attribution --json` runs each bar and "
                "the leave-one-out view, and this report draws them from its result");
    if (n == 0) {
        report_note(ctx, "attribution",
                    "none of colocated, async and libra has "
                    "run.trained_tokens_per_s");
        return;
    }
    struct chart_series *s = arena_calloc(ctx->arena, 1, sizeof *s);
    s[0] = (struct chart_series){"trained tokens/s", "#59a14f", false, y, NULL, NULL, text};
    report_chart(ctx,
                 &(struct chart){
                     "attribution", "Where the throughput comes from",
                     "Trained tokens per second measured after warm-up under each resource manager "
                     "present, in the order the mechanisms add up: colocated (verl's hybrid "
                     "engine), async (a static split with bounded staleness), libra (the planner's "
                     "heterogeneous layout, routed by C-MLFQ, with online replanning and the "
                     "elastic pool as the run's config set them); each label is the rate and its "
                     "ratio to the bar before. The pool and replanning have no bar of their own: "
                     "one result holds one libra run (libra sim --attribution runs them).",
                     "resource manager", "trained tokens/s", CHART_BARS, n, NULL, cats, false, s, 1,
                     0, NAN});
}

/* Bucket accuracy of the modes whose router places turns by bucket. */
static void routing(struct report_ctx *ctx, const json_t *modes, const char **names, size_t n)
{
    static const char *const keys[] = {"accuracy", "majority_class/accuracy",
                                       "token_weighted_accuracy", "first_placements/accuracy"};
    static const char *const labels[] = {"accuracy at tool returns", "majority class",
                                         "token-weighted accuracy", "first placements"};
    static const char *const colors[] = {"#59a14f", "#bab0ac", "#76b7b2", "#edc948"};
    const char **cats = arena_calloc(ctx->arena, n + 1, sizeof *cats);
    double *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = report_nans(ctx, n);
    size_t drawn = 0;
    for (size_t m = 0; m < n; m++) {
        const json_t *all = report_get(json_object_get(modes, names[m]), "routing/all");
        if (!isfinite(report_num(all, "accuracy")))
            continue;
        cats[drawn] = names[m];
        for (int k = 0; k < 4; k++)
            y[k][drawn] = 100 * report_num(all, keys[k]);
        drawn++;
    }
    if (!drawn) {
        report_note(ctx, "routing",
                    "no mode routes by bucket (routing.all.accuracy is null "
                    "for load_balance)");
        return;
    }
    struct chart_series *s = arena_calloc(ctx->arena, 4, sizeof *s);
    for (int k = 0; k < 4; k++)
        s[k] = (struct chart_series){labels[k], colors[k], false, y[k], NULL, NULL, NULL};
    report_chart(
        ctx, &(struct chart){"routing", "Routing accuracy",
                             "Share of routing decisions at tool returns whose bucket is the "
                             "bucket of the trajectory's true remaining tokens, beside always "
                             "answering the most frequent bucket (majority class), the accuracy "
                             "weighted by remaining tokens and that of first placements "
                             "(docs/routing.md, \"Metrics\"); modes whose router has no buckets "
                             "are left out.",
                             "resource manager", "decisions (%)", CHART_BARS, drawn, NULL, cats,
                             false, s, 4, 0, 100});
}

int report_sim_figures(struct report_ctx *ctx, const json_t *doc, struct libra_error *err)
{
    const json_t *modes = json_object_get(doc, "modes");
    const char **names;
    size_t n = report_keys(ctx, modes, report_mode_order, &names);
    if (n == 0) {
        report_note(ctx, "every figure", "the result has no modes");
        return 0;
    }
    struct steps st;
    collect_steps(ctx, modes, names, n, &st);
    if (st.n == 0 && ctx->opt->step_range && st.lo <= st.hi)
        return error_set(
            err, ctx->name, 0, 0, "no step in %lld:%lld (the result holds steps %.0f to %.0f)",
            (long long)ctx->opt->step_first, (long long)ctx->opt->step_last, st.lo, st.hi);
    if (st.n) {
        step_time(ctx, &st, modes, names, n);
        utilisation(ctx, &st, modes, names, n);
        for (size_t m = 0; m < n; m++)
            gpu_time(ctx, &st, names[m], json_object_get(modes, names[m]));
        tail_share(ctx, &st, modes, names, n);
    } else {
        report_note(ctx, "per-step figures", "the result has no step records (modes.*.steps)");
    }
    report_length_figures(ctx, modes, names, n);
    report_timeline_figures(ctx, modes, names, n);
    planner(ctx, modes, names, n);
    attribution(ctx, modes);
    routing(ctx, modes, names, n);
    return 0;
}
