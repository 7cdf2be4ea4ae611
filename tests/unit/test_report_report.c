/* report/report and the figures: inputs told apart by schema, errors with positions, the GPU
 * time derivation, the GPU timeline's clipping, determinism, and results of the wrong shape
 * drawn around, not crashed on. */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

/* A libra sim result cut down to what the figures read: a colocated layout of 8 GPUs, a
 * disaggregated one of 4 + 4 with a weight update after step 1. */
static const char sim_doc[] =
    "{\"schema\": \"libra.sim/1\", \"config_digest\": \"0123456789abcdef\", \"seed\": 3,\n"
    " \"libra_version\": \"0.1.0\",\n"
    " \"modes\": {\n"
    "  \"libra\": {\"layout\": {\"train_gpus\": 4, \"rollout_gpus\": 4, \"colocated\": false},\n"
    "   \"planner\": {\"predicted\": {\"step_s\": 10, \"train_s\": 4, \"rollout_s\": 9},\n"
    "                 \"simulated\": {\"step_s\": 11, \"train_s\": 5, \"rollout_s\": 10}},\n"
    "   \"routing\": {\"all\": {\"accuracy\": 0.5, \"majority_class\": {\"accuracy\": 0.75},\n"
    "               \"token_weighted_accuracy\": 0.6, \"first_placements\": {\"accuracy\": 1}}},\n"
    "   \"run\": {\"steps\": 3, \"warmup_steps\": 1, \"trained_tokens_per_s\": 300},\n"
    "   \"steps\": [\n"
    "    {\"step\": 0, \"step_s\": 10, \"train_s\": 4, \"wait_s\": 6, \"switch_s\": 0, \"sync_s\": "
    "0,\n"
    "     \"rollout_utilisation\": 0.5, \"train_utilisation\": 0.4, \"tail_share\": 0.2},\n"
    "    {\"step\": 1, \"step_s\": 8, \"train_s\": 4, \"wait_s\": 4, \"switch_s\": 0, \"sync_s\": "
    "2,\n"
    "     \"rollout_utilisation\": 0.75, \"train_utilisation\": 0.5, \"tail_share\": 0.1},\n"
    "    {\"step\": 2, \"step_s\": 12, \"train_s\": 4, \"wait_s\": 6, \"switch_s\": 0, \"sync_s\": "
    "0,\n"
    "     \"rollout_utilisation\": 1, \"train_utilisation\": 0.33, \"tail_share\": 0.3}]},\n"
    "  \"colocated\": {\"layout\": {\"train_gpus\": 8, \"rollout_gpus\": 8, \"colocated\": true},\n"
    "   \"planner\": null, \"routing\": {\"all\": {\"accuracy\": null}},\n"
    "   \"run\": {\"steps\": 3, \"warmup_steps\": 1, \"trained_tokens_per_s\": 100},\n"
    "   \"steps\": [\n"
    "    {\"step\": 0, \"step_s\": 20, \"train_s\": 5, \"switch_s\": 2, \"sync_s\": 0,\n"
    "     \"rollout_utilisation\": 0.5, \"train_utilisation\": 0.25, \"tail_share\": 0.6},\n"
    "    {\"step\": 1, \"step_s\": 20, \"train_s\": 5, \"switch_s\": 2, \"sync_s\": 0,\n"
    "     \"rollout_utilisation\": 0.5, \"train_utilisation\": 0.25, \"tail_share\": 0.6},\n"
    "    {\"step\": 2, \"step_s\": 20, \"train_s\": 5, \"switch_s\": 2, \"sync_s\": 0,\n"
    "     \"rollout_utilisation\": 0.5, \"train_utilisation\": 0.25, \"tail_share\": 0.6}]}}}\n";

static int render(const char *text, const struct report_options *opt, struct report_output *out,
                  struct libra_error *err)
{
    struct report r;
    report_init(&r, opt);
    int rc = report_add(&r, "run.json", text, strlen(text), err);
    if (rc == 0)
        rc = report_render(&r, out, err);
    report_free(&r);
    return rc;
}

static const struct report_figure *figure(const struct report_output *out, const char *id)
{
    for (size_t i = 0; i < out->figures.n; i++)
        if (strcmp(out->figures.v[i].id, id) == 0)
            return &out->figures.v[i];
    return NULL;
}

/* The figure's <desc> parsed back (the text escapes only &, < and >). */
static json_t *figure_data(const struct report_figure *f)
{
    const char *from = strstr(f->svg, "<desc>") + 6, *to = strstr(f->svg, "</desc>");
    char *text = calloc((size_t)(to - from) + 1, 1);
    size_t n = 0;
    for (const char *c = from; c < to; c++) {
        static const char *const esc[] = {"&amp;", "&lt;", "&gt;"};
        static const char plain[] = "&<>";
        int k = 0;
        while (k < 3 && strncmp(c, esc[k], strlen(esc[k])) != 0)
            k++;
        text[n++] = k < 3 ? plain[k] : *c;
        c += k < 3 ? strlen(esc[k]) - 1 : 0;
    }
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(doc);
    return doc;
}

static double series_y(const json_t *data, size_t s, size_t i)
{
    return json_number_value(json_array_get(
        json_object_get(json_array_get(json_object_get(data, "series"), s), "y"), i));
}

static void test_figures_and_order(void **state)
{
    struct report_output out = {0};
    struct libra_error err = {0};
    assert_int_equal(render(sim_doc, &(struct report_options){0}, &out, &err), 0);
    static const char *const want[] = {
        "sim-step-time",  "sim-utilisation",   "sim-gpu-time-colocated", "sim-gpu-time-libra",
        "sim-tail-share", "sim-planner-libra", "sim-attribution",        "sim-routing"};
    assert_int_equal(out.figures.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < out.figures.n; i++)
        assert_string_equal(out.figures.v[i].id, want[i]);
    /* every figure is in the page, and the page names what it could not draw */
    for (size_t i = 0; i < out.figures.n; i++)
        assert_non_null(strstr(out.html, out.figures.v[i].svg));
    assert_non_null(strstr(out.html, "elastic hybrid pool"));
    assert_non_null(strstr(out.html, "libra sim CONFIG --steps 3 --json (config digest "
                                     "0123456789abcdef, seed 3, libra 0.1.0)"));
    assert_null(strstr(out.html, "<script"));
    struct report_output again = {0};
    assert_int_equal(render(sim_doc, &(struct report_options){0}, &again, &err), 0);
    assert_string_equal(out.html, again.html); /* same input, same bytes */
    report_output_free(&again);
    report_output_free(&out);
}

/* A stack is GPUs x step time: training, rollout, the update that ended in the step, idle. */
static void test_gpu_time_adds_up(void **state)
{
    struct report_output out = {0};
    struct libra_error err = {0};
    assert_int_equal(render(sim_doc, &(struct report_options){0}, &out, &err), 0);
    json_t *doc = figure_data(figure(&out, "sim-gpu-time-libra"));
    const json_t *d = json_object_get(doc, "data");
    /* step 2 of libra: 4 x 4 training, 4 x 12 x 1 rollout, 4 x 2 update, the rest idle */
    assert_close(series_y(d, 0, 2), 16, 1e-12);
    assert_close(series_y(d, 1, 2), 48, 1e-12);
    assert_close(series_y(d, 2, 2), 8, 1e-12);
    assert_close(series_y(d, 3, 2), 8 * 12 - 16 - 48 - 8, 1e-12);
    assert_close(series_y(d, 2, 1), 0, 1e-12); /* step 1's update ends in step 2 */
    json_decref(doc);
    doc = figure_data(figure(&out, "sim-gpu-time-colocated"));
    d = json_object_get(doc, "data");
    /* colocated, every GPU: 8 x 5 training, 8 x 20 x 0.5 rollout, 8 x 2 switching */
    assert_close(series_y(d, 0, 0), 40, 1e-12);
    assert_close(series_y(d, 1, 0), 80, 1e-12);
    assert_close(series_y(d, 2, 0), 16, 1e-12);
    assert_close(series_y(d, 3, 0), 160 - 40 - 80 - 16, 1e-12);
    json_decref(doc);
    report_output_free(&out);
}

static void test_step_range(void **state)
{
    struct report_output out = {0};
    struct libra_error err = {0};
    struct report_options opt = {true, 1, 2};
    assert_int_equal(render(sim_doc, &opt, &out, &err), 0);
    json_t *d = figure_data(figure(&out, "sim-step-time"));
    json_t *x = json_object_get(json_object_get(d, "data"), "x");
    assert_int_equal(json_array_size(x), 2);
    assert_close(json_number_value(json_array_get(x, 0)), 1, 0);
    json_decref(d);
    report_output_free(&out);
    opt = (struct report_options){true, 5, 9};
    assert_int_equal(render(sim_doc, &opt, &out, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "no step in 5:9 (the result holds steps 0 to 2)"));
    assert_string_equal(err.file, "run.json");
    report_output_free(&out);
    /* without a sim result, a step range would change nothing: refused */
    const char plan[] = "{\"schema\": \"libra.plan/1\", \"feasible\": false, \"why\": \"no\"}";
    opt = (struct report_options){true, 1, 2};
    assert_int_equal(render(plan, &opt, &out, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "--steps: no libra sim result among the inputs"));
    report_output_free(&out);
}

/* A result without a seed names none: a made-up seed 0 would name another run. */
static void test_source_without_a_seed(void **state)
{
    struct report_output out = {0};
    struct libra_error err = {0};
    assert_int_equal(render("{\"schema\": \"libra.sim/1\", \"modes\": {}}",
                            &(struct report_options){0}, &out, &err),
                     0);
    assert_non_null(strstr(out.html, "(config digest unknown, seed unknown, libra unknown)"));
    report_output_free(&out);
}

/* A timeline of steps 1 and 2 (10 s to 30 s) with intervals the Gantt chart must clip to the
 * window (intervals that do not read as the simulator writes them are refused: see
 * test_wrong_types). */
static const char timeline_doc[] =
    "{\"schema\": \"libra.sim/1\", \"modes\": {\"libra\": {\"layout\": {\"colocated\": false},\n"
    " \"steps\": [{\"step\": 0, \"end_s\": 10}, {\"step\": 1, \"end_s\": 20},\n"
    "            {\"step\": 2, \"end_s\": 30}],\n"
    " \"timeline\": {\"steps\": {\"first\": 1, \"last\": 2}, \"from_s\": 10, \"to_s\": 30,\n"
    "  \"complete_to_s\": 30, \"truncated\": false, \"max_intervals\": 20000,\n"
    "  \"trainer\": {\"gpus\": 4, \"intervals\": [[12, 15, \"train\"], [15, 17, \"sync\"]]},\n"
    "  \"instances\": [\n"
    "   {\"instance\": 0, \"tp\": 2, \"busy_share\": 0.5, \"requests\": 3,\n"
    "    \"generated_tokens\": 30, \"intervals\": [[10, 14, \"rollout\"],\n"
    "    [26, 40, \"rollout\"]]},\n"
    "   {\"instance\": 1, \"tp\": 2, \"busy_share\": 0.1, \"requests\": 1,\n"
    "    \"generated_tokens\": 10, \"intervals\": [[5, 12, \"rollout\"]]}]}}}}\n";

/* The intervals the Gantt chart of libra drew on row r, as "from-to use" joined by ", ". */
static char *gantt_row(const struct report_output *out, size_t r)
{
    json_t *doc = figure_data(figure(out, "sim-gantt-libra"));
    const json_t *iv = json_object_get(
        json_array_get(json_object_get(json_object_get(doc, "data"), "rows"), r), "intervals");
    char *text = calloc(1, 256);
    for (size_t k = 0; k < json_array_size(iv); k++) {
        const json_t *x = json_array_get(iv, k);
        snprintf(text + strlen(text), 256 - strlen(text), "%s%g-%g %s", k ? ", " : "",
                 json_number_value(json_array_get(x, 0)), json_number_value(json_array_get(x, 1)),
                 json_string_value(json_array_get(x, 2)));
    }
    json_decref(doc);
    return text;
}

static void expect_row(const struct report_output *out, size_t r, const char *want)
{
    char *got = gantt_row(out, r);
    if (strcmp(got, want) != 0)
        fail_msg("row %zu: got '%s', want '%s'", r, got, want);
    free(got);
}

static void test_gantt_clips(void **state)
{
    struct report_output out = {0};
    struct libra_error err = {0};
    assert_int_equal(render(timeline_doc, &(struct report_options){0}, &out, &err), 0);
    expect_row(&out, 0, "12-15 train, 15-17 sync");
    expect_row(&out, 1, "10-14 rollout, 26-30 rollout");
    expect_row(&out, 2, "10-12 rollout");
    assert_null(strstr(out.html, "--timeline")); /* the config cited holds its range */
    json_t *doc = figure_data(figure(&out, "sim-load-libra"));
    const json_t *d = json_object_get(doc, "data");
    assert_close(series_y(d, 0, 0), 50, 1e-12); /* busy share */
    assert_close(series_y(d, 1, 0), 75, 1e-12); /* 3 of 4 requests */
    assert_close(series_y(d, 2, 1), 25, 1e-12); /* 10 of 40 tokens */
    assert_close(series_y(d, 3, 1), 50, 1e-12); /* TP2 of 4 GPUs */
    json_decref(doc);
    report_output_free(&out);

    /* --steps 2:2 shows 20 s to 30 s: the end of step 1 to the end of step 2 */
    assert_int_equal(render(timeline_doc, &(struct report_options){true, 2, 2}, &out, &err), 0);
    expect_row(&out, 0, "");
    expect_row(&out, 1, "26-30 rollout");
    expect_row(&out, 2, "");
    report_output_free(&out);

    /* a range outside the timeline's steps draws no Gantt chart, and says why */
    assert_int_equal(render(timeline_doc, &(struct report_options){true, 0, 0}, &out, &err), 0);
    assert_null(figure(&out, "sim-gantt-libra"));
    assert_non_null(strstr(out.html, "the timeline holds steps 1 to 2, none of --steps 0:0"));
    report_output_free(&out);
}

static void expect_add_error(const char *text, int line, int col, const char *msg)
{
    struct report r;
    report_init(&r, &(struct report_options){0});
    struct libra_error err = {0};
    assert_int_equal(report_add(&r, "x.json", text, strlen(text), &err), LIBRA_EINVAL);
    assert_string_equal(err.file, "x.json");
    assert_int_equal(err.line, line);
    assert_int_equal(err.col, col);
    if (!strstr(err.msg, msg))
        fail_msg("'%s' does not say '%s'", err.msg, msg);
    assert_int_equal(r.inputs.n, 0);
    report_free(&r);
}

static void test_input_errors(void **state)
{
    expect_add_error("{\"schema\": \"libra.sim/1\",\n  \"modes\": {,}}", 2, 13, "");
    expect_add_error("{\"a\": 1,\n \"schema\": \"libra.nope/2\"}", 2, 2,
                     "'libra.nope/2' is not one libra report reads");
    expect_add_error("{\"schema\": 7}", 1, 2, "no schema string");
    expect_add_error("{\"modes\": {}}", 1, 1, "no schema string");
    expect_add_error("[1, 2]", 1, 1, "a JSON object");

    struct report r; /* nothing to draw is an error; a plan alone is a page */
    report_init(&r, &(struct report_options){0});
    struct libra_error err = {0};
    struct report_output out = {0};
    assert_int_equal(report_render(&r, &out, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "no input to draw"));
    report_output_free(&out);
    const char plan[] = "{\"schema\": \"libra.plan/1\", \"feasible\": false, \"why\": \"no\"}";
    assert_int_equal(report_add(&r, "p.json", plan, strlen(plan), &err), 0);
    assert_int_equal(report_render(&r, &out, &err), 0);
    assert_non_null(strstr(out.html, "the plan is infeasible: no"));
    report_output_free(&out);
    report_free(&r);
}

/* A member the figures read that has another type is refused where it stands. */
static void test_wrong_types(void **state)
{
    static const struct {
        const char *doc;
        int col;
        const char *msg;
    } bad[] = {
        {"{\"schema\": \"libra.sim/1\", \"modes\": []}", 27,
         "modes: must be an object, not an array"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"libra\": 1}}", 37,
         "modes.libra: must be an object, not a number"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"steps\": [1, {\"step\": 2}]}}}", 53,
         "modes.x.steps.0: must be an object, not a number"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"async\": {\"layout\": {\"train_gpus\": "
         "\"8\"}}}}",
         58, "modes.async.layout.train_gpus: must be an integer from 0 to 2^53 - 1, not a string"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"timeline\": {\"complete_to_s\": "
         "\"x\"}}}}",
         56, "modes.x.timeline.complete_to_s: must be a number from 0 to 2^53, not a string"},
        {"{\"schema\": \"libra.sim-sweep/1\", \"summary\": [{\"set\": 3}], \"cells\": [{}]}", 46,
         "summary.0.set: must be an object, not a number"},
        {"{\"schema\": \"libra.sim-sweep/1\", \"cells\": [{\"point\": 0, \"result\": {\"modes\": "
         "{\"a/b~\": {\"steps\": {}}}}}]}",
         86, "cells.0.result.modes.a/b~.steps: must be an array, not an object"},
        {"{\"schema\": \"libra.plan/1\", \"feasible\": true, \"placement\": [{\"node\": 0, "
         "\"gpus\": [{\"gpu\": \"0\"}]}]}",
         82, "placement.0.gpus.0.gpu: must be an integer from 0 to 2^53 - 1, not a string"},
        {"{\"schema\": \"libra.route-eval/1\", \"policies\": {\"cmlfq\": {\"confusion\": [[1, "
         "\"2\"]]}}}",
         75, "policies.cmlfq.confusion.0.1: must be an integer from 0 to 2^53 - 1, not a string"},
        {"{\"schema\": \"libra.route-eval/1\", \"policies\": {\"cmlfq\": {\"confusion\": [[9, "
         "1]]}}}",
         71,
         "policies.cmlfq.confusion.0: 2 counts where the matrix has 1 rows: a confusion matrix "
         "is square (a row and a column per bucket)"},
        {"{\"schema\": \"libra.load/1\", \"steps\": [], \"engines\": [{\"dead\": 1}]}", 54,
         "engines.0.dead: must be true or false, not a number"},
        {"{\"schema\": \"libra.sim/1\", \"seed\": \"1\"}", 27,
         "seed: must be an integer from 0 to 2^53 - 1, not a string"},
        /* values libra never writes, drawn as if they were data */
        {"{\"schema\": \"libra.sim/1\", \"modes\": {}, \"seed\": 2.5}", 40,
         "seed: must be an integer from 0 to 2^53 - 1, not 2.5"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"steps\": [{\"step\": 0, \"step_s\": "
         "-50}]}}}",
         65, "modes.x.steps.0.step_s: must be a number from 0 to 2^53, not -50"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"steps\": [{\"step\": 0, \"step_s\": "
         "1e308}]}}}",
         65, "modes.x.steps.0.step_s: must be a number from 0 to 2^53, not 1e+308"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"steps\": [{\"step\": -5}]}}}", 54,
         "modes.x.steps.0.step: must be an integer from 0 to 2^53 - 1, not -5"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"steps\": [{\"step\": 0, "
         "\"rollout_utilisation\": 50}]}}}",
         65, "modes.x.steps.0.rollout_utilisation: must be a share from 0 to 1, not 50"},
        /* intervals the Gantt chart would leave out or misdraw */
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"timeline\": {\"instances\": "
         "[{\"intervals\": [[14, 13, \"rollout\"]]}]}}}}",
         90,
         "modes.x.timeline.instances.0.intervals.0.1: must be at least the interval's start, 14, "
         "not 13"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"timeline\": {\"instances\": "
         "[{\"intervals\": [[16, \"x\", \"rollout\"]]}]}}}}",
         90,
         "modes.x.timeline.instances.0.intervals.0.1: must be a number from 0 to 2^53, not a "
         "string"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"timeline\": {\"instances\": "
         "[{\"intervals\": [[18, 25, \"lent\"]]}]}}}}",
         94,
         "modes.x.timeline.instances.0.intervals.0.2: must be one of rollout, train, sync, not "
         "'lent'"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"timeline\": {\"instances\": "
         "[{\"intervals\": [[0, 1]]}]}}}}",
         85, "modes.x.timeline.instances.0.intervals.0: 2: missing"},
        /* no result of its kind: nothing to draw, and no run to name */
        {"{\"schema\": \"libra.sim/1\"}", 1, "modes: missing"},
        {"{\"schema\": \"libra.sim/1\", \"modes\": {\"async\": null}}", 37,
         "modes.async: must be an object, not null"},
        {"{\"schema\": \"libra.sim-sweep/1\"}", 1, "cells: missing"},
        {"{\"schema\": \"libra.load/1\", \"steps\": null}", 28,
         "steps: must be an array, not null"},
        {"{\"schema\": \"libra.plan/1\"}", 1, "feasible: missing"},
        {"{\"schema\": \"libra.route-eval/1\"}", 1, "policies: missing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_add_error(bad[i].doc, 1, bad[i].col, bad[i].msg);
}

/* Missing members and odd values in range leave figures out instead of crashing them; null
 * is a missing member. */
static void test_odd_values(void **state)
{
    static const char *const docs[] = {
        "{\"schema\": \"libra.sim/1\", \"modes\": {}}",
        "{\"schema\": \"libra.sim/1\", \"modes\": {\"x\": {\"steps\": [{\"step\": "
        "9007199254740991, \"step_s\": 0}, {\"step\": 2, \"step_s\": 9007199254740992}, "
        "{\"step\": null}]}}}",
        "{\"schema\": \"libra.sim/1\", \"modes\": {\"async\": {\"layout\": null, \"steps\": "
        "[{\"step\": 0}], \"run\": {\"trained_tokens_per_s\": 0}}}}",
        "{\"schema\": \"libra.sim/1\", \"modes\": {\"async\": {\"timeline\": {\"steps\": "
        "{\"first\": 0, \"last\": 9007199254740991}, \"from_s\": 0, \"to_s\": "
        "9007199254740992}}, \"x\": {\"timeline\": {\"steps\": {\"first\": 3, \"last\": 3}, "
        "\"from_s\": 5, \"to_s\": 1, \"instances\": [{\"busy_share\": 1}, {\"tp\": 0, "
        "\"requests\": 0, \"intervals\": [[0, 1, \"sync\"], [2, 2, \"sync\"]]}]}}}}",
        "{\"schema\": \"libra.sim-sweep/1\", \"seeds\": [1], \"summary\": [{}], \"cells\": "
        "[{\"point\": 0, \"seed\": 1, \"result\": {\"modes\": {}}}]}",
        "{\"schema\": \"libra.sim-sweep/1\", \"grid\": [{\"key\": \"k\"}], \"seeds\": [1], "
        "\"summary\": [{}, {}], \"cells\": [{\"point\": 0, \"seed\": 1, \"error\": {}}, "
        "{\"point\": 1, \"seed\": 1, \"result\": {\"modes\": {\"libra\": {\"run\": "
        "{\"mean_step_s\": 3}}}}}]}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        struct report_output out = {0};
        struct libra_error err = {0};
        assert_int_equal(render(docs[i], &(struct report_options){0}, &out, &err), 0);
        assert_non_null(strstr(out.html, "</html>"));
        report_output_free(&out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_and_order), cmocka_unit_test(test_gpu_time_adds_up),
        cmocka_unit_test(test_step_range),        cmocka_unit_test(test_input_errors),
        cmocka_unit_test(test_wrong_types),       cmocka_unit_test(test_odd_values),
        cmocka_unit_test(test_gantt_clips),       cmocka_unit_test(test_source_without_a_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
