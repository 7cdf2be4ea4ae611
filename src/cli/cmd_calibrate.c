/*
 * `libra calibrate`: fits the cost model's engine and trainer constants to a user's own
 * measurements — serving benchmark results of vLLM or SGLang, the turns a `libra serve`
 * capture timed, a verl or Megatron-LM training log — and writes
 * them as a hardware preset every command takes (--presets, LIBRA_PRESETS), so that plans and
 * simulations run on the user's machine rather than the published one. It prints each constant
 * with its standard error, the fit error and every point, and refuses where the points cannot
 * determine a constant. The readers are cost/import.h, the fit cost/points.h (the same solver
 * as the project's own calibration); docs/calibrate.md is the user's page.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cost/import.h"
#include "cost/points.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/parse.h"
#include "util/strbuf.h"
#include "util/vec.h"

#define SCHEMA "libra.calibrate/1"

static const char help[] =
    "usage: libra calibrate INPUT[,OPTION=N...]... [-o PRESETS] [--hardware H] [--model M]\n"
    "                       [--hold CONSTANT[,...]] [--name NAME] [--config FILE] [--presets "
    "FILE]\n"
    "                       [--json]\n"
    "\n"
    "Fits the cost model's constants to measurements of your engines and trainer, and writes\n"
    "them as a hardware preset (-o PRESETS) that every command takes with --presets PRESETS or\n"
    "LIBRA_PRESETS. Each INPUT is read by its content (docs/calibrate.md):\n"
    "  - a vLLM serving benchmark result (benchmark_serving.py / vllm bench serve\n"
    "    --save-result --save-detailed) or SGLang's bench_serving --output-file JSON Lines\n"
    "    written with --output-details: each run is a decode point that fits decode_t_fix_s\n"
    "    (per engine iteration) and decode_t_seq_s (per running sequence); option tp=N gives\n"
    "    the engine's TP size (1);\n"
    "  - a verl console log: each `step:N - ...` line with timing_s/update_actor is a training\n"
    "    point that fits train_mfu; options gpus, tp, pp, cp, ep, minibatches,\n"
    "    micro_batch_tokens, zero, recompute give the trainer's layout (defaults: the log's\n"
    "    GPU count, FSDP: tp, pp, cp, ep 1, ZeRO 3, full recompute, 1 mini-batch);\n"
    "  - a Megatron-LM log: each `iteration N/M | ...` line after the first is a training\n"
    "    point of its global batch of seq_length sequences, on the layout its arguments\n"
    "    block states (the options above override it);\n"
    "  - a `libra serve --capture` trace: the turns the gateway timed, grouped by TP size and\n"
    "    by band of decode batch (the engine's turns in flight), each group of 10 or more a\n"
    "    decode point as above; a trace without timings is refused.\n"
    "The measurements must be of --model on --hardware. Prints every constant with its standard\n"
    "error, the fit error and every point; exits 1 when the points cannot determine a constant\n"
    "(say which to --hold at its current value). --json prints one document (schema\n"
    "libra.calibrate/1).\n"
    "\n"
    "  -o, --output PRESETS   write the preset file (written whole, or not at all)\n"
    "  --hold LIST            constants to keep at their current value: decode_t_fix_s,\n"
    "                         decode_t_seq_s, train_mfu\n"
    "  --name NAME            name of the hardware preset written (default: --hardware's, which\n"
    "                         it then replaces; not another hardware preset's)\n"
    "  --config FILE          the experiment whose hardware and model to use\n";

enum { OPT_HOLD = 0x100, OPT_NAME, OPT_CONFIG };

static const struct option own_options[] = {
    {"output", required_argument, NULL, 'o'},
    {"hold", required_argument, NULL, OPT_HOLD},
    {"name", required_argument, NULL, OPT_NAME},
    {"config", required_argument, NULL, OPT_CONFIG},
    {0},
};

/* Bytes of a point's model name, its NUL included. */
#define ORIGIN_MODEL_MAX 128

/* Where a point comes from. */
struct origin {
    size_t input; /* index into the inputs */
    int line;
    int64_t step;                 /* a trainer's log: its step or iteration */
    char backend[32];             /* serving */
    char model[ORIGIN_MODEL_MAX]; /* model_id, or a capture header's model; "": none */
    size_t turns;                 /* a capture: the timed turns of the point; 0 otherwise */
};

typedef VEC(struct cost_decode_point) decode_vec;
typedef VEC(struct cost_train_point) train_vec;
typedef VEC(struct origin) origin_vec;
typedef VEC(struct cost_train_seqs *) seqs_vec;

struct input {
    const char *arg; /* as typed */
    char *path;      /* its file part; owned */
    struct cost_import_options opt;
    enum cost_import_kind kind;
    size_t points;
    size_t unused; /* a capture: timed turns in no point */
};

struct calibration {
    const struct cli_common *cc;
    const struct spec_hardware *hw;
    const struct spec_model *model;
    struct cost_shape shape;
    struct input *inputs;
    size_t n_inputs;
    decode_vec decode;
    origin_vec decode_from;
    train_vec train;
    origin_vec train_from;
    seqs_vec seqs;      /* one per training point; owned */
    size_t skipped[2];  /* step lines of verl logs without an update, and Megatron-LM
                         * iteration lines that hold a start-up (the first after arguments) */
    unsigned hold;      /* 1u << cost_constant */
    const char *output; /* -o: the preset file */
    const char *name;   /* of the preset written */
    const char *config;
    struct cost_fit_input fit;
    struct cost_fit_outcome out;
};

/* ---- flags and inputs --------------------------------------------------------------------- */

/* Holds the constant an item of --hold's list names; an empty item ("a,", "a,,b") is refused,
 * as every list flag refuses one, rather than passed over. */
static int hold_one(struct calibration *c, const char *list, const char *name)
{
    int k = cost_constant_find(name);
    if (!*name)
        return cli_value_errorf(c->cc->cmd, "--hold: an empty value in '%s'", list);
    if (k < 0)
        return cli_value_errorf(c->cc->cmd,
                                "--hold: unknown constant '%s' (decode_t_fix_s, decode_t_seq_s, "
                                "train_mfu)",
                                name);
    if (c->hold & (1u << k))
        return cli_value_errorf(c->cc->cmd, "--hold: '%s' is named twice", name);
    c->hold |= 1u << k;
    return 0;
}

/* --hold's list, split as every list flag's (util/parse.h). */
static int parse_hold(struct calibration *c, const char *list)
{
    char **items;
    size_t n = parse_list(list, &items);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = hold_one(c, list, items[i]);
        free(items[i]);
    }
    free(items);
    return rc;
}

/* Splits "FILE,OPTION=N,..." into the input's path and options. */
static int split_input(struct calibration *c, struct input *in)
{
    const char *comma = strchr(in->arg, ',');
    char why[160];
    in->path = comma ? xstrndup(in->arg, (size_t)(comma - in->arg)) : xstrdup(in->arg);
    if (comma && !comma[1]) /* "FILE,": the parser takes "" as no option */
        return cli_value_errorf(c->cc->cmd, "input '%s': an option is empty (a trailing comma)",
                                in->arg);
    if (cost_import_options_parse(comma ? comma + 1 : "", &in->opt, why, sizeof why))
        return cli_value_errorf(c->cc->cmd, "input '%s': %s", in->arg, why);
    return 0;
}

/* Refuses the options that do not apply to the input's kind. */
static int check_options(struct calibration *c, const struct input *in)
{
    bool trace = in->kind == COST_IMPORT_TRACE;
    unsigned allowed = trace ? 0u : in->kind == COST_IMPORT_SERVING ? 1u << COST_OPT_TP : ~0u;
    for (int k = 0; k < COST_N_OPTIONS; k++)
        if ((in->opt.given & (1u << k)) && !(allowed & (1u << k)))
            return cli_value_errorf(c->cc->cmd, "input '%s': option %s %s", in->arg,
                                    cost_import_option_name((enum cost_import_option)k),
                                    trace ? "does not apply to a libra serve capture (each turn "
                                            "records its engine's TP size)"
                                          : "applies to trainers' logs, not serving results");
    return 0;
}

static int add_serving(struct calibration *c, size_t idx, const char *text, size_t len)
{
    struct input *in = &c->inputs[idx];
    int tp = in->opt.given & (1u << COST_OPT_TP) ? (int)in->opt.value[COST_OPT_TP] : 1;
    /* the rollout model's rule (cost_rollout_pre_init): an engine splits the attention heads
     * evenly and replicates KV heads where it has more GPUs than them, as vLLM does */
    if (c->model->heads % tp != 0)
        return cli_value_errorf(c->cc->cmd, "input '%s': tp %d does not divide %s's %d heads",
                                in->arg, tp, c->model->name, c->model->heads);
    cost_serving_runs runs = {0};
    struct libra_error err = {0};
    int rc = cost_import_serving(in->path, text, len, &runs, &err);
    for (size_t i = 0; rc == 0 && i < runs.n; i++) {
        struct cost_decode_point pt;
        struct origin o = {.input = idx, .line = runs.v[i].line};
        snprintf(o.backend, sizeof o.backend, "%s", runs.v[i].backend[0] ? runs.v[i].backend : "-");
        snprintf(o.model, sizeof o.model, "%s", runs.v[i].model);
        /* the reader cut them to their buffers, maybe inside a character */
        ujson_utf8_repair(o.backend);
        ujson_utf8_repair(o.model);
        cost_serving_point(&runs.v[i], tp, &pt);
        vec_push(&c->decode, pt);
        vec_push(&c->decode_from, o);
    }
    in->points = runs.n;
    vec_free(&runs);
    return rc ? cli_report(rc, &err) : 0;
}

/* ---- a libra serve capture ------------------------------------------------------------------ */

/* Fewest timed turns that make a decode point: fewer leave a band's mean to a few turns. */
#define CAPTURE_MIN_TURNS 10

/* The tokens turn k of t prefilled: the prompt less its cached part, or, when the engine did
 * not say, less the context of the turn before (which an engine's prefix cache holds). */
static double uncached(const struct trace_traj *t, size_t k)
{
    const struct trace_turn *u = &t->turns[k];
    if (u->cached_tokens >= 0)
        return (double)(u->prompt_tokens - u->cached_tokens);
    if (k == 0)
        return (double)u->prompt_tokens;
    const struct trace_turn *b = &t->turns[k - 1];
    double fresh = (double)u->prompt_tokens - (double)(b->prompt_tokens + b->generated_tokens);
    return fmin(fmax(fresh, 0.0), (double)u->prompt_tokens);
}

typedef VEC(struct cost_timed_turn) timed_vec;

/* Appends the timed turns of the trace read from path (its len bytes at text: standard input
 * cannot be read twice) to *out, and its header's model (or "") to model. */
static int read_timed(const char *path, const char *text, size_t len, timed_vec *out, char *model,
                      size_t size)
{
    struct trace_reader *r = trace_reader_from_text(path, text, len);
    struct libra_error err = {0};
    const struct trace_header *h;
    const struct trace_traj *t;
    int rc = trace_reader_header(r, &h, &err);
    if (rc == 0) {
        snprintf(model, size, "%s", h->model ? h->model : "");
        ujson_utf8_repair(model); /* cut to size, maybe inside a character */
    }
    while (rc == 0 && (rc = trace_reader_next(r, &t, &err)) == 1) {
        rc = 0;
        for (size_t k = 0; k < t->n_turns; k++) {
            const struct trace_turn *u = &t->turns[k];
            const struct trace_turn_timing *m = &u->timing;
            if (m->tp == 0)
                continue;
            struct cost_timed_turn x = {.instance = m->instance,
                                        .tp = (int)m->tp,
                                        .sent_s = (double)m->sent_us * 1e-6,
                                        .first_s =
                                            m->first_us >= 0 ? (double)m->first_us * 1e-6 : -1.0,
                                        .done_s = (double)m->done_us * 1e-6,
                                        .prompt_tokens = (double)u->prompt_tokens,
                                        .uncached_tokens = uncached(t, k),
                                        .generated_tokens = (double)u->generated_tokens};
            vec_push(out, x);
        }
    }
    trace_reader_close(r);
    return rc ? cli_report(rc, &err) : 0;
}

/* Sets each turn's prefill_s: its uncached tokens after its cached ones, in one iteration, on
 * an engine of its TP under the preset's constants. */
static int prefill_times(struct calibration *c, const struct input *in, timed_vec *turns)
{
    struct cost_rollout_params q;
    struct cost_rollout_pre pre;
    int pre_tp = 0;
    cost_rollout_params_default(&q, c->hw);
    for (size_t i = 0; i < turns->n; i++) {
        struct cost_timed_turn *t = &turns->v[i];
        if (t->tp != pre_tp && cost_rollout_pre_init(&pre, &c->shape, c->hw, &q, t->tp))
            return cli_value_errorf(c->cc->cmd,
                                    "input '%s': an engine of tp %d, which does not divide %s's "
                                    "%d heads",
                                    in->arg, t->tp, c->model->name, c->model->heads);
        pre_tp = t->tp;
        t->prefill_s =
            cost_prefill_time(&pre, t->prompt_tokens - t->uncached_tokens, t->uncached_tokens, 0.0);
    }
    return 0;
}

/* The turns a `libra serve --capture` trace timed, as decode points by TP and band of batch. */
static int add_capture(struct calibration *c, size_t idx, const char *text, size_t len)
{
    struct input *in = &c->inputs[idx];
    timed_vec turns = {0};
    struct cost_timed_point *pts = NULL;
    size_t n = 0;
    char model[ORIGIN_MODEL_MAX];
    int rc = read_timed(in->path, text, len, &turns, model, sizeof model);
    if (rc == 0 && model[0] && strcmp(model, c->model->name) != 0) {
        cli_errorf("calibrate: %s: the capture's header names model '%s', not --model %s: the "
                   "measurements must be of --model (give --model %s for this capture)",
                   in->path, model, c->model->name, model);
        rc = LIBRA_EXIT_USAGE;
    }
    if (rc == 0)
        rc = prefill_times(c, in, &turns);
    if (rc == 0 && turns.n == 0) {
        cli_errorf("calibrate: %s: no turn carries a timing: only `libra serve --capture` records "
                   "them, and only for a turn one engine answered at once (docs/calibrate.md)",
                   in->path);
        rc = LIBRA_EXIT_USAGE;
    }
    if (rc == 0)
        n = cost_timed_points(turns.v, turns.n, CAPTURE_MIN_TURNS, &pts, &in->unused);
    if (rc == 0 && n == 0) {
        cli_errorf("calibrate: %s: no band of decode batch holds %d timed turns (%zu timed, none "
                   "usable or too few per band)",
                   in->path, CAPTURE_MIN_TURNS, turns.n);
        rc = LIBRA_EXIT_USAGE;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct origin o = {.input = idx, .turns = pts[i].turns};
        snprintf(o.backend, sizeof o.backend, "capture");
        snprintf(o.model, sizeof o.model, "%s", model);
        vec_push(&c->decode, pts[i].point);
        vec_push(&c->decode_from, o);
    }
    in->points = n;
    free(pts);
    vec_free(&turns);
    return rc;
}

/* ---- trainers' logs ------------------------------------------------------------------------- */

/* Refuses a point whose layout or log does not suit the model; 0 or an exit code. */
static int check_point(struct calibration *c, const struct input *in,
                       const struct cost_log_step *st, const struct cost_train_config *l)
{
    const struct spec_model *m = c->model;
    if ((st->layers && st->layers != m->layers) || (st->hidden && st->hidden != m->hidden)) {
        cli_errorf("calibrate: %s:%d: the log's model has %d layers of hidden size %d, --model "
                   "%s %d of %d: the measurements must be of --model",
                   in->path, st->line, st->layers, st->hidden, m->name, m->layers, m->hidden);
        return LIBRA_EXIT_USAGE;
    }
    char why[240];
    if (cost_train_config_check(&c->shape, l, m->name, why, sizeof why))
        return cli_value_errorf(c->cc->cmd, "input '%s': %s", in->arg, why);
    return 0;
}

/* The steps of a trainer's log, each a training point. */
static int add_log(struct calibration *c, size_t idx, const char *text, size_t len)
{
    struct input *in = &c->inputs[idx];
    bool verl = in->kind == COST_IMPORT_VERL_LOG;
    cost_log_steps steps = {0};
    struct libra_error err = {0};
    int rc = 0;
    if ((verl ? cost_import_verl : cost_import_megatron)(in->path, text, len, &steps,
                                                         &c->skipped[!verl], &err) != 0)
        rc = cli_report(LIBRA_EINVAL, &err);
    if (rc == 0 && steps.n == 0) {
        cli_errorf("calibrate: %s: no training step: %s", in->path,
                   verl ? "no `step:N - ...` line with timing_s/update_actor"
                        : "no `iteration N/M | ...` line after the first that follows the "
                          "arguments block (the first holds the start-up)");
        rc = LIBRA_EXIT_USAGE;
    }
    for (size_t i = 0; rc == 0 && i < steps.n; i++) {
        struct cost_train_point pt;
        char why[200];
        struct origin o = {.input = idx, .line = steps.v[i].line, .step = steps.v[i].step};
        struct cost_train_seqs *seqs = xcalloc(1, sizeof *seqs);
        vec_push(&c->seqs, seqs);
        if (cost_log_point(&steps.v[i], &in->opt, &c->shape, seqs, &pt, why, sizeof why)) {
            cli_errorf("%s:%d: %s", in->path, steps.v[i].line, why);
            rc = LIBRA_EXIT_USAGE;
            break;
        }
        if ((rc = check_point(c, in, &steps.v[i], &pt.config)) != 0)
            break;
        vec_push(&c->train, pt);
        vec_push(&c->train_from, o);
    }
    in->points = steps.n;
    vec_free(&steps);
    return rc;
}

/* Refuses input idx where it is the file of an earlier one (by device and inode, or by name):
 * its points would count twice, and the fit's standard errors shrink on no new measurement. */
static int check_not_again(struct calibration *c, size_t idx)
{
    const struct input *in = &c->inputs[idx];
    for (size_t j = 0; j < idx; j++)
        if (cli_same_file(c->inputs[j].path, in->path))
            return cli_usage_error(c->cc->cmd,
                                   "input '%s' is the file of input '%s' again: its points would "
                                   "count twice",
                                   in->arg, c->inputs[j].arg);
    return 0;
}

static int read_input(struct calibration *c, size_t idx)
{
    struct input *in = &c->inputs[idx];
    char *text = NULL;
    size_t len = 0;
    int rc = split_input(c, in);
    if (rc == 0)
        rc = check_not_again(c, idx);
    if (rc == 0)
        rc = cli_read_file(in->path, &text, &len);
    if (rc == 0) {
        in->kind = cost_import_detect(text, len);
        rc = check_options(c, in);
    }
    if (rc == 0 && in->kind == COST_IMPORT_TRACE) {
        rc = add_capture(c, idx, text, len);
    } else if (rc == 0 && in->kind == COST_IMPORT_UNKNOWN) {
        cli_errorf("calibrate: %s: not a vLLM or SGLang serving benchmark result, a verl or "
                   "Megatron-LM log or a libra trace (docs/calibrate.md)",
                   in->path);
        rc = LIBRA_EXIT_USAGE;
    } else if (rc == 0) {
        rc = in->kind == COST_IMPORT_SERVING ? add_serving(c, idx, text, len)
                                             : add_log(c, idx, text, len);
    }
    free(text);
    return rc;
}

/* ---- the fit ------------------------------------------------------------------------------ */

static const char *constant_unit(enum cost_constant k)
{
    return k == COST_CONST_TRAIN_MFU ? "of bf16 peak" : "s";
}

/* The value of constant k in its display unit ("2.080 ms"). */
static void show(char *out, size_t size, enum cost_constant k, double v)
{
    if (!isfinite(v))
        snprintf(out, size, "-");
    else if (k == COST_CONST_T_FIX)
        snprintf(out, size, "%.4f ms", v * 1e3);
    else if (k == COST_CONST_T_SEQ)
        snprintf(out, size, "%.2f us", v * 1e6);
    else
        snprintf(out, size, "%.4f", v);
}

static bool has_points(const struct calibration *c, enum cost_constant k)
{
    return k == COST_CONST_TRAIN_MFU ? c->train.n > 0 : c->decode.n > 0;
}

static size_t points_of(const struct calibration *c, enum cost_constant k)
{
    return k == COST_CONST_TRAIN_MFU ? c->train.n : c->decode.n;
}

static void fit_input(struct calibration *c)
{
    struct cost_fit_input *f = &c->fit;
    memset(f, 0, sizeof *f);
    f->shape = &c->shape;
    f->hw = c->hw;
    cost_rollout_params_default(&f->rollout, c->hw);
    cost_train_params_for(&f->train, c->hw);
    f->decode = c->decode.v;
    f->n_decode = c->decode.n;
    f->train_points = c->train.v;
    f->n_train = c->train.n;
    for (int k = 0; k < COST_N_CONSTANTS; k++)
        if (has_points(c, (enum cost_constant)k) && !(c->hold & (1u << k)))
            f->fit |= 1u << k;
}

/* Says which constant the points do not determine, and what would determine it. */
static int undetermined(const struct calibration *c)
{
    const struct cost_fit_outcome *o = &c->out;
    const char *name = cost_constant_name((enum cost_constant)o->undetermined);
    if (o->undetermined != COST_CONST_T_SEQ) {
        cli_errorf("calibrate: %s is not determined by the points (independence %.3g of the %g "
                   "needed)",
                   name, o->independence, COST_FIT_MIN_INDEPENDENCE);
        return LIBRA_EXIT_NEGATIVE;
    }
    double lo = INFINITY, hi = 0.0;
    for (size_t i = 0; i < c->decode.n; i++) {
        double terms[2];
        cost_decode_point_terms(&c->decode.v[i], terms);
        lo = fmin(lo, terms[1]);
        hi = fmax(hi, terms[1]);
    }
    char held[32], range[64];
    show(held, sizeof held, COST_CONST_T_SEQ, c->fit.rollout.t_seq_s);
    if (hi - lo < 0.005)
        snprintf(range, sizeof range, "%.2f", lo);
    else
        snprintf(range, sizeof range, "%.2f to %.2f", lo, hi);
    cli_errorf("calibrate: decode_t_seq_s is not determined by the points: %s %s sequences per "
               "iteration (independence %.3g of the %g needed), so the cost per sequence cannot "
               "be told from decode_t_fix_s; add runs at other concurrencies (a capture: "
               "traffic at other decode batches), or --hold decode_t_seq_s to keep %s",
               c->decode.n == 1 ? "the one decode point runs" : "the decode points run", range,
               o->independence, COST_FIT_MIN_INDEPENDENCE, held);
    return LIBRA_EXIT_NEGATIVE;
}

/* A fitted value the model cannot take. */
static int implausible(const struct calibration *c)
{
    static const double hi[COST_N_CONSTANTS] = {1.0, 0.1, 1.0};
    for (int k = 0; k < COST_N_CONSTANTS; k++) {
        double v = c->out.value[k];
        if (!c->out.fitted[k] || (v > 0.0 && v <= hi[k]))
            continue;
        char text[96];
        show(text, sizeof text, (enum cost_constant)k, v);
        if (isinf(v)) /* fit_mfu: 1/MFU <= 0 */
            snprintf(text, sizeof text,
                     "past 1 (the steps are shorter than the model gives at "
                     "any MFU, bf16 peak included)");
        bool bound = k == COST_CONST_TRAIN_MFU && isfinite(v) && v > 1.0; /* stops past 1 */
        cli_errorf("calibrate: the fit gives %s %s%s%s, outside (0, %g] %s: the points "
                   "contradict the cost model (docs/calibrate.md, \"When it refuses\"); check the "
                   "inputs' --model, --hardware and options, or --hold it",
                   cost_constant_name((enum cost_constant)k), isinf(v) ? "" : "= ", text,
                   bound ? " or more" : "", hi[k], constant_unit((enum cost_constant)k));
        return LIBRA_EXIT_NEGATIVE;
    }
    return 0;
}

static int run_fit(struct calibration *c)
{
    for (int k = 0; k < COST_N_CONSTANTS; k++)
        if ((c->hold & (1u << k)) && !has_points(c, (enum cost_constant)k)) {
            cli_errorf("calibrate: --hold %s: no input has points that fit it, so it keeps its "
                       "value unheld",
                       cost_constant_name((enum cost_constant)k));
            return LIBRA_EXIT_USAGE;
        }
    fit_input(c);
    if (c->fit.fit == 0) {
        cli_errorf("calibrate: nothing to fit: every constant the inputs' points determine is "
                   "held");
        return LIBRA_EXIT_USAGE;
    }
    int rc = cost_fit_constants(&c->fit, &c->out);
    if (rc == LIBRA_EINFEAS)
        return undetermined(c);
    if (rc) {
        cli_errorf("calibrate: internal: a point could not be costed");
        return LIBRA_EXIT_INTERNAL;
    }
    return implausible(c);
}

/* ---- the preset --------------------------------------------------------------------------- */

static const char *input_name(const struct calibration *c, size_t idx)
{
    return c->inputs[idx].path;
}

/* The width of the tables' input column: 24, or the longest input's name, so that a long path
 * does not push its row's columns out from under the header. */
static int input_width(const struct calibration *c)
{
    size_t w = 24;
    for (size_t i = 0; i < c->n_inputs; i++)
        w = strlen(input_name(c, i)) > w ? strlen(input_name(c, i)) : w;
    return w > 4096 ? 4096 : (int)w;
}

/* Appends the files of the decode points (serving results, captures), or of the trainers'
 * logs, "a.json, b.jsonl", to b. */
static void files_of(const struct calibration *c, bool logs, struct strbuf *b)
{
    const char *sep = "";
    for (size_t i = 0; i < c->n_inputs; i++) {
        enum cost_import_kind k = c->inputs[i].kind;
        if ((k == COST_IMPORT_SERVING || k == COST_IMPORT_TRACE) == logs)
            continue;
        strbuf_printf(b, "%s%s", sep, input_name(c, i));
        sep = ", ";
    }
}

/* The value constant k had before the fit: the preset's, or the built-in one where it has 0. */
static double before(const struct calibration *c, enum cost_constant k)
{
    return k == COST_CONST_TRAIN_MFU ? c->fit.train.mfu
           : k == COST_CONST_T_FIX   ? c->fit.rollout.t_fix_s
                                     : c->fit.rollout.t_seq_s;
}

/* The preset's own value of constant k: 0 where it takes the built-in one. */
static double preset_value(const struct spec_hardware *h, enum cost_constant k)
{
    return k == COST_CONST_TRAIN_MFU ? h->train_mfu
           : k == COST_CONST_T_FIX   ? h->decode_t_fix_s
                                     : h->decode_t_seq_s;
}

/* Appends to b the source [from, stop) of a calibration row of the model named by the len bytes
 * at row_model; a fit's (" from ...") marked " on model NAME" where that is not model and it has
 * no mark yet: the row names its model once, so the part would be credited to the new one. */
static void carried_part(const char *from, const char *stop, const char *row_model, size_t len,
                         const char *model, struct strbuf *b)
{
    static const char mark[] = " on model ", fit[] = " from ";
    const char *marked = strstr(from, mark);
    strbuf_add(b, from, (size_t)(stop - from));
    if (strncmp(from, fit, strlen(fit)) == 0 && !(marked && marked < stop) &&
        (strlen(model) != len || strncmp(model, row_model, len) != 0)) {
        strbuf_puts(b, mark);
        strbuf_add(b, row_model, len);
    }
}

/* The source of constant k an earlier calibration row (as calibration_text writes it) gives,
 * less the constant's name and any "held at VALUE, " ("from 5 training steps of verl.log (rms
 * error 0.30 %)", and " on model NAME" where it was fitted on a model other than model),
 * appended to b; false where the row names none. Its parts are split at "; "; a part "decode
 * constants ..." is the source of both decode constants. */
static bool earlier_source(const char *row, enum cost_constant k, const char *model,
                           struct strbuf *b)
{
    static const char lead[] = "libra calibrate, ", held[] = "held at ";
    const char *p = strstr(row, ": "), *row_model = row + strlen(lead);
    if (strncmp(row, lead, strlen(lead)) != 0 || !p)
        return false;
    size_t model_len = (size_t)(p - row_model);
    for (p += 2; *p;) {
        const char *end = strstr(p, "; "), *stop = end ? end : p + strlen(p);
        const char *name = cost_constant_name(k), *group = "decode constants";
        const char *rest = strncmp(p, name, strlen(name)) == 0 ? p + strlen(name)
                           : k != COST_CONST_TRAIN_MFU && strncmp(p, group, strlen(group)) == 0
                               ? p + strlen(group)
                               : NULL;
        if (rest && *rest == ' ') {
            const char *comma = strstr(rest, ", ");
            if (strncmp(rest + 1, held, strlen(held)) == 0 && comma && comma < stop)
                rest = comma + 1; /* held then too: the source is what follows */
            carried_part(rest, stop, row_model, model_len, model, b);
            return true;
        }
        p = end ? end + 2 : stop;
    }
    return false;
}

/* Appends the part of the calibration row for a fitted constant k ("train_mfu from 9 training
 * steps of verl.log (rms error 0.30 %)"; "decode constants" where both decode ones were). */
static void fitted_part(const struct calibration *c, enum cost_constant k, struct strbuf *b)
{
    bool decode = k != COST_CONST_TRAIN_MFU;
    bool both = c->out.fitted[COST_CONST_T_FIX] && c->out.fitted[COST_CONST_T_SEQ];
    strbuf_printf(b, "%s from %zu %s of ",
                  decode && both ? "decode constants" : cost_constant_name(k), points_of(c, k),
                  decode ? "decode points" : "training steps");
    files_of(c, !decode, b);
    strbuf_printf(b, " (rms error %.2f %%)",
                  (decode ? c->out.decode.rms_error : c->out.train.rms_error) * 100.0);
}

/* Whether constant k, not fitted, has a part in the row: held, or kept at a value the preset
 * sets. A built-in value not held has none: the readers call it built in already. */
static bool has_kept_part(const struct calibration *c, enum cost_constant k)
{
    return (c->hold & (1u << k)) || preset_value(c->hw, k) > 0.0;
}

/* Appends the part for constant k, not fitted, that keeps a value of the preset: held or not,
 * where the value came from (built in, set in a preset file, or the part of the preset's
 * calibration row naming it, carried over so that the row names the source of every value it
 * keeps). */
static void kept_part(const struct calibration *c, enum cost_constant k, struct strbuf *b)
{
    double v = preset_value(c->hw, k);
    bool held = c->hold & (1u << k);
    strbuf_puts(b, cost_constant_name(k));
    if (held) {
        char text[32];
        show(text, sizeof text, k, before(c, k));
        strbuf_printf(b, " held at %s,", text);
    }
    if (v <= 0.0)
        strbuf_puts(b, " built in");
    else if (!c->hw->calibration[0])
        strbuf_printf(b, " set in preset file %s", c->hw->origin);
    else if (!earlier_source(c->hw->calibration, k, c->model->name, b))
        strbuf_printf(b, " as the calibration row of preset file %s gives it", c->hw->origin);
}

/* What the constants were fitted on, and where the values kept come from, into out (size
 * bytes): "libra calibrate, MODEL: PART; PART ...". A row that does not fit is refused, not cut:
 * a cut could drop a constant's source, or split a character and leave the row invalid UTF-8.
 * Returns 0 or an exit code. */
static int calibration_text(const struct calibration *c, char *out, size_t size)
{
    struct strbuf b = {0};
    const char *sep = " ";
    strbuf_printf(&b, "libra calibrate, %s:", c->model->name);
    for (int k = 0; k < COST_N_CONSTANTS; k++) {
        enum cost_constant kk = (enum cost_constant)k;
        if (kk == COST_CONST_T_SEQ && c->out.fitted[COST_CONST_T_FIX] && c->out.fitted[kk])
            continue; /* one part with decode_t_fix_s */
        if (!c->out.fitted[k] && !has_kept_part(c, kk))
            continue;
        strbuf_puts(&b, sep);
        sep = "; ";
        if (c->out.fitted[k])
            fitted_part(c, kk, &b);
        else
            kept_part(c, kk, &b);
    }
    int rc = 0;
    if (b.len >= size) {
        cli_errorf("calibrate: the preset's calibration row, which names every input file, would "
                   "be %zu bytes, past the %zu bytes it holds: give the inputs shorter names (run "
                   "from their directory, or link them under short names)",
                   b.len, size - 1);
        rc = LIBRA_EXIT_USAGE;
    } else {
        memcpy(out, b.data, b.len + 1);
    }
    strbuf_free(&b);
    return rc;
}

/* Removes name from the comma-separated list of assumed fields: a fitted value is measured. */
static void drop_assumed(char *assumed, const char *name)
{
    size_t n = strlen(name);
    for (char *p = assumed; *p;) {
        char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) {
            char *rest = end ? end + 1 : p + len;
            if (!end && p > assumed)
                p--; /* the last member: its leading comma goes with it */
            memmove(p, rest, strlen(rest) + 1);
            return;
        }
        p += len + (end != NULL);
    }
}

/* The hardware preset with the fitted constants, none of them listed as assumed; the others
 * keep the preset's values (0, the built-in one, where it had none) and their place in
 * `assumed`, so that a held constant is not written as calibrated. Returns 0 or an exit code. */
static int calibrated_hardware(const struct calibration *c, struct spec_hardware *h)
{
    const struct cost_fit_outcome *o = &c->out;
    *h = *c->hw;
    snprintf(h->name, sizeof h->name, "%s", c->name ? c->name : c->hw->name);
    if (o->fitted[COST_CONST_T_FIX])
        h->decode_t_fix_s = o->value[COST_CONST_T_FIX];
    if (o->fitted[COST_CONST_T_SEQ])
        h->decode_t_seq_s = o->value[COST_CONST_T_SEQ];
    if (o->fitted[COST_CONST_TRAIN_MFU])
        h->train_mfu = o->value[COST_CONST_TRAIN_MFU];
    for (int k = 0; k < COST_N_CONSTANTS; k++)
        if (o->fitted[k])
            drop_assumed(h->assumed, cost_constant_name((enum cost_constant)k));
    return calibration_text(c, h->calibration, sizeof h->calibration);
}

/* The preset file that holds h alone. */
static char *preset_text(const struct spec_hardware *h)
{
    size_t n;
    const struct spec_field *fields = spec_hardware_fields(&n);
    json_t *doc = json_pack("{s:s, s:[o]}", "schema", "libra.presets/1", "hardware",
                            spec_fields_to_json(fields, n, "", h));
    char *text = ujson_dump(doc, true);
    json_decref(doc);
    size_t len = strlen(text);
    text = xrealloc(text, len + 2);
    memcpy(text + len, "\n", 2);
    return text;
}

/* Whether h reads back as a preset file (err says why not). */
static int reads_back(const struct spec_hardware *h, const char *file, char **text,
                      struct libra_error *err)
{
    *text = preset_text(h);
    struct spec_presets check = {0};
    int rc = spec_presets_add_text(&check, file, *text, strlen(*text), err);
    spec_presets_free(&check);
    return rc;
}

/*
 * Refuses a --name no preset can have, before the inputs are read: one that does not fit a
 * preset name's bytes (it would be cut, and the name printed for --hardware would not be the
 * preset's), one the preset file's rules refuse, found by reading back the resolved hardware
 * under that name, or the name of another hardware preset, built in or loaded (loading the file
 * would replace that preset with the calibrated one's specs). The form comes first: presets are
 * found whatever the case, so "A800-80G" would otherwise be called another preset's name.
 */
static int check_name(const struct calibration *c, const struct spec_presets *presets)
{
    struct spec_hardware h = *c->hw;
    if (strlen(c->name) >= sizeof h.name)
        return cli_value_errorf(c->cc->cmd, "--name: must be shorter than %zu bytes",
                                sizeof h.name);
    snprintf(h.name, sizeof h.name, "%s", c->name);
    char *text;
    struct libra_error err = {0};
    int rc = reads_back(&h, "--name", &text, &err);
    free(text);
    if (rc) { /* the rule the name breaks, without the path of a file the user never saw */
        const char *why = err.msg, *at = "hardware.0.name: ";
        if (strncmp(why, at, strlen(at)) == 0)
            why += strlen(at);
        return cli_value_errorf(c->cc->cmd, "--name: %s", why);
    }
    if (strcmp(c->name, c->hw->name) != 0 && spec_hardware_find(presets, c->name))
        return cli_value_errorf(c->cc->cmd,
                                "--name: '%s' is another hardware preset (the file would replace "
                                "it with %s's specs); name a new one, or %s itself",
                                c->name, c->hw->name, c->hw->name);
    return 0;
}

/* Checks the preset reads back as a preset file, then writes it whole. */
static int write_preset(const struct calibration *c)
{
    struct spec_hardware h;
    char *text = NULL;
    struct libra_error err = {0};
    int rc = calibrated_hardware(c, &h);
    if (rc)
        return rc;
    rc = reads_back(&h, c->output, &text, &err);
    if (rc) {
        cli_errorf("calibrate: internal: the preset does not read back: %s", err.msg);
        rc = LIBRA_EXIT_INTERNAL;
    } else {
        rc = cli_write_output(c->output, text);
    }
    free(text);
    return rc;
}

/* ---- the report --------------------------------------------------------------------------- */

static double point_error(double modelled, double measured)
{
    return (modelled - measured) / measured;
}

static void print_constants(FILE *out, const struct calibration *c)
{
    fprintf(out, "%-16s %14s %14s %14s  %s\n", "constant", "value", "sd", "before", "from");
    for (int k = 0; k < COST_N_CONSTANTS; k++) {
        enum cost_constant kk = (enum cost_constant)k;
        const struct cost_fit_outcome *o = &c->out;
        char value[32], sd[32], was[32], from[64];
        show(value, sizeof value, kk, o->value[k]);
        show(sd, sizeof sd, kk, o->sd[k]);
        show(was, sizeof was, kk, before(c, kk));
        if (o->fitted[k] && !isfinite(o->sd[k]))
            snprintf(sd, sizeof sd, "exact");
        if (o->fitted[k])
            snprintf(from, sizeof from, "fitted on %zu %s points", points_of(c, kk),
                     k == COST_CONST_TRAIN_MFU ? "training" : "decode");
        else
            snprintf(from, sizeof from, "%s",
                     (c->hold & (1u << k)) && has_points(c, kk) ? "held (--hold)"
                                                                : "kept: no point of its kind");
        fprintf(out, "%-16s %14s %14s %14s  %s\n", cost_constant_name(kk), value, sd, was, from);
    }
    if (c->fit.fit & 3u)
        fprintf(out, "fit error over the decode points: rms %.2f %%, max %.2f %%\n",
                c->out.decode.rms_error * 100.0, c->out.decode.max_error * 100.0);
    if (c->fit.fit & (1u << COST_CONST_TRAIN_MFU))
        fprintf(out, "fit error over the training points: rms %.2f %%, max %.2f %%\n",
                c->out.train.rms_error * 100.0, c->out.train.max_error * 100.0);
}

static void print_decode(FILE *out, const struct calibration *c)
{
    if (!c->decode.n)
        return;
    bool capture = false;
    int model_width = 5; /* the model column: as wide as its longest, as the input column */
    for (size_t i = 0; i < c->decode.n; i++) {
        capture |= c->decode_from.v[i].turns > 0;
        int n = (int)strlen(c->decode_from.v[i].model);
        model_width = n > model_width ? n : model_width;
    }
    fprintf(out,
            "\ndecode points: the mean iteration a decoding request saw (ms); batch and prefill "
            "per iteration%s\n%-*s %5s %-8s %-*s %3s %8s %8s %9s %9s %9s %8s\n",
            capture ? " (a capture's: a band of batch, its timed turns in place of a line)" : "",
            input_width(c), "input", "line", "backend", model_width, "model", "TP", "batch",
            "context", "prefill", "measured", "modelled", "error");
    for (size_t i = 0; i < c->decode.n; i++) {
        const struct cost_decode_point *p = &c->decode.v[i];
        const struct origin *o = &c->decode_from.v[i];
        double m = c->out.decode_modelled[i];
        fprintf(out, "%-*s %5zu %-8s %-*s %3d %8.2f %8.0f %9.1f %9.3f %9.3f %+7.2f%%\n",
                input_width(c), input_name(c, o->input), o->turns ? o->turns : (size_t)o->line,
                o->backend, model_width, o->model[0] ? o->model : "-", p->tp, p->decode_seqs,
                p->ctx_tokens, p->prefill_tokens, p->measured_s * 1e3, m * 1e3,
                point_error(m, p->measured_s) * 100.0);
    }
    for (size_t i = 0; i < c->n_inputs; i++)
        if (c->inputs[i].unused)
            fprintf(out,
                    "%s: %zu timed turns in no point (no iteration timed, or in a band of fewer "
                    "than %d)\n",
                    input_name(c, i), c->inputs[i].unused, CAPTURE_MIN_TURNS);
}

/* Into buf: a training point's layout, "tp1 pp1 cp1 dp32 z3" (and " ep8" with EP). Returns its
 * length. */
static int layout_text(const struct cost_train_config *l, char *buf, size_t size)
{
    int n =
        snprintf(buf, size, "tp%d pp%d cp%d dp%d z%d", l->tp, l->pp, l->cp, l->dp, l->zero_stage);
    if (l->ep > 1 && n > 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " ep%d", l->ep);
    return n;
}

static void print_train(FILE *out, const struct calibration *c)
{
    if (!c->train.n)
        return;
    char layout[64], seqs[40];
    int width = 19; /* the layout column: its longest */
    for (size_t i = 0; i < c->train.n; i++) {
        int n = layout_text(&c->train.v[i].config, layout, sizeof layout);
        width = n > width ? n : width;
    }
    fprintf(out,
            "\ntraining points: seconds per step (verl: timing_s/update_actor; Megatron-LM: the "
            "elapsed time per iteration)\n%-*s %6s %6s %5s %-*s %14s %9s %9s %8s\n",
            input_width(c), "input", "line", "step", "GPUs", width, "layout", "seqs x tokens",
            "measured", "modelled", "error");
    for (size_t i = 0; i < c->train.n; i++) {
        const struct cost_train_point *p = &c->train.v[i];
        const struct cost_train_config *l = &p->config;
        const struct origin *o = &c->train_from.v[i];
        layout_text(l, layout, sizeof layout);
        snprintf(seqs, sizeof seqs, "%zu x %.0f", p->seqs->n, p->seqs->tokens[0]);
        double m = c->out.train_modelled[i];
        fprintf(out, "%-*s %6d %6lld %5d %-*s %14s %9.2f %9.2f %+7.2f%%\n", input_width(c),
                input_name(c, o->input), o->line, (long long)o->step, l->tp * l->pp * l->cp * l->dp,
                width, layout, seqs, p->measured_s, m, point_error(m, p->measured_s) * 100.0);
    }
}

static char *text_report(const struct calibration *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort(); /* only when memory ran out, fatal as in util/alloc.h */
    fprintf(out, "libra calibrate: %s on %s; %zu decode points, %zu training points",
            c->model->name, c->hw->name, c->decode.n, c->train.n);
    if (c->skipped[0])
        fprintf(out, " (%zu verl step line%s without timing_s/update_actor", c->skipped[0],
                c->skipped[0] == 1 ? "" : "s");
    if (c->skipped[1])
        fprintf(out, "%s%zu Megatron-LM iteration line%s holding the start-up",
                c->skipped[0] ? "; " : " (", c->skipped[1], c->skipped[1] == 1 ? "" : "s");
    if (c->skipped[0] || c->skipped[1])
        fprintf(out, " skipped)");
    fprintf(out, "\n\n");
    print_constants(out, c);
    print_decode(out, c);
    print_train(out, c);
    if (c->output)
        fprintf(out,
                "\nwrote %s: hardware preset %s with these constants; use it with --presets %s "
                "--hardware %s, or LIBRA_PRESETS\n",
                c->output, c->name ? c->name : c->hw->name, c->output,
                c->name ? c->name : c->hw->name);
    fclose(out);
    return text;
}

static json_t *constants_json(const struct calibration *c)
{
    json_t *a = json_array();
    for (int k = 0; k < COST_N_CONSTANTS; k++)
        json_array_append_new(
            a, json_pack("{s:s, s:s, s:o, s:o, s:f, s:b, s:b, s:I}", "name",
                         cost_constant_name((enum cost_constant)k), "unit",
                         k == COST_CONST_TRAIN_MFU ? "" : "s", "value", ujson_real(c->out.value[k]),
                         "sd", ujson_real(c->out.sd[k]), "before", before(c, (enum cost_constant)k),
                         "fitted", c->out.fitted[k], "held", (c->hold & (1u << k)) != 0, "points",
                         (json_int_t)points_of(c, (enum cost_constant)k)));
    return a;
}

static json_t *decode_json(const struct calibration *c)
{
    json_t *a = json_array();
    for (size_t i = 0; i < c->decode.n; i++) {
        const struct cost_decode_point *p = &c->decode.v[i];
        const struct origin *o = &c->decode_from.v[i];
        double m = c->out.decode_modelled[i];
        /* a capture's band: its turns in place of a line */
        json_array_append_new(
            a,
            json_pack("{s:s, s:I, s:s, s:o, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:o, s:o}", "input",
                      input_name(c, o->input), o->turns ? "turns" : "line",
                      o->turns ? (json_int_t)o->turns : (json_int_t)o->line, "backend", o->backend,
                      "model_id", o->model[0] ? json_string(o->model) : json_null(), "tp", p->tp,
                      "decode_seqs", p->decode_seqs, "ctx_tokens", p->ctx_tokens, "prefill_tokens",
                      p->prefill_tokens, "prefill_seqs", p->prefill_seqs, "prefill_pairs",
                      p->prefill_pairs, "measured_s", p->measured_s, "modelled_s", ujson_real(m),
                      "error", ujson_real(point_error(m, p->measured_s))));
    }
    return a;
}

static json_t *train_json(const struct calibration *c)
{
    json_t *a = json_array();
    for (size_t i = 0; i < c->train.n; i++) {
        const struct cost_train_point *p = &c->train.v[i];
        const struct cost_train_config *l = &p->config;
        const struct origin *o = &c->train_from.v[i];
        double m = c->out.train_modelled[i];
        json_array_append_new(
            a,
            json_pack("{s:s, s:i, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:b, s:I, s:f, "
                      "s:f, "
                      "s:o, s:o}",
                      "input", input_name(c, o->input), "line", o->line, "step",
                      (json_int_t)o->step, "tp", l->tp, "pp", l->pp, "cp", l->cp, "dp", l->dp, "ep",
                      l->ep > 1 ? l->ep : 1, "minibatches", l->minibatches, "micro_batch_tokens",
                      l->micro_batch_tokens, "zero_stage", l->zero_stage, "full_recompute",
                      l->full_recompute, "sequences", (json_int_t)p->seqs->n, "sequence_tokens",
                      p->seqs->tokens[0], "measured_s", p->measured_s, "modelled_s", ujson_real(m),
                      "error", ujson_real(point_error(m, p->measured_s))));
    }
    return a;
}

static json_t *fit_json(const struct cost_fit_result *r, size_t points, bool ran)
{
    if (!ran)
        return json_null();
    return json_pack("{s:I, s:f, s:f}", "points", (json_int_t)points, "rms_error", r->rms_error,
                     "max_error", r->max_error);
}

static json_t *json_report(const struct calibration *c, const struct libra_config *cfg)
{
    json_t *doc = spec_config_envelope(SCHEMA, cfg);
    const char *name = c->name ? c->name : c->hw->name;
    json_object_set_new(doc, "hardware", json_string(c->hw->name));
    json_object_set_new(doc, "model", json_string(c->model->name));
    json_object_set_new(doc, "preset",
                        json_pack("{s:s, s:o}", "name", name, "file",
                                  c->output ? json_string(c->output) : json_null()));
    json_object_set_new(doc, "constants", constants_json(c));
    json_object_set_new(
        doc, "fits",
        json_pack("{s:o, s:o}", "decode", fit_json(&c->out.decode, c->decode.n, c->fit.fit & 3u),
                  "train",
                  fit_json(&c->out.train, c->train.n, c->fit.fit & (1u << COST_CONST_TRAIN_MFU))));
    json_object_set_new(doc, "decode_points", decode_json(c));
    json_object_set_new(doc, "train_points", train_json(c));
    json_object_set_new(doc, "skipped_lines",
                        json_integer((json_int_t)c->skipped[0] + (json_int_t)c->skipped[1]));
    size_t unused = 0;
    for (size_t i = 0; i < c->n_inputs; i++)
        unused += c->inputs[i].unused;
    json_object_set_new(doc, "unused_turns", json_integer((json_int_t)unused));
    return doc;
}

/* ---- the command -------------------------------------------------------------------------- */

static int report(struct calibration *c, const struct libra_config *cfg)
{
    int rc = c->output ? write_preset(c) : 0;
    if (rc == 0 && c->cc->json) {
        json_t *doc = json_report(c, cfg);
        char *text = ujson_dump(doc, true);
        json_decref(doc);
        printf("%s\n", text);
        free(text);
    } else if (rc == 0) {
        char *text = text_report(c);
        fputs(text, stdout);
        free(text);
    }
    if (rc == 0 && fflush(stdout) != 0) {
        cli_errorf("cannot write '<stdout>': %s", error_strerror(errno ? errno : EIO));
        rc = LIBRA_EXIT_IO;
    }
    return rc;
}

static int resolve(struct calibration *c, struct api_presets *p, struct libra_config *cfg)
{
    int rc = cli_common_load(c->cc, c->config, p, cfg);
    if (rc)
        return rc;
    c->hw = spec_hardware_find(&p->spec, cfg->cluster.hardware);
    c->model = spec_model_find(&p->spec, cfg->model.name);
    if (!c->hw || !c->model || cost_shape_init(&c->shape, c->model)) {
        cli_errorf("calibrate: internal: resolved presets '%s', '%s' are unusable",
                   cfg->cluster.hardware, cfg->model.name);
        return LIBRA_EXIT_INTERNAL;
    }
    return 0;
}

static void calibration_free(struct calibration *c)
{
    for (size_t i = 0; i < c->n_inputs; i++)
        free(c->inputs[i].path);
    free(c->inputs);
    for (size_t i = 0; i < c->seqs.n; i++) {
        cost_train_seqs_free(c->seqs.v[i]);
        free(c->seqs.v[i]);
    }
    vec_free(&c->seqs);
    vec_free(&c->decode);
    vec_free(&c->decode_from);
    vec_free(&c->train);
    vec_free(&c->train_from);
    cost_fit_outcome_free(&c->out);
}

static int own_flag(struct calibration *c, int opt)
{
    switch (opt) {
    case OPT_HOLD:
        return parse_hold(c, optarg);
    case 'o':
        c->output = optarg;
        return 0;
    case OPT_NAME:
        c->name = optarg;
        return 0;
    case OPT_CONFIG:
        c->config = optarg;
        return 0;
    default:
        return LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
}

int cmd_calibrate(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("calibrate"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON, "o:", own_options);
    struct calibration c = {.cc = &cc};
    struct api_presets p = {0};
    struct libra_config cfg;
    int opt, rc = 0;
    while (rc == 0 && (opt = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (opt == 'h') {
            cli_common_help(&cc, help, stdout);
            goto out;
        }
        rc = own_flag(&c, opt);
    }
    if (rc == 0 && optind >= argc)
        rc = cli_usage_error(cc.cmd, "no INPUT: give serving benchmark results, a libra serve "
                                     "capture or a verl or Megatron-LM log");
    if (rc == 0 && c.output && strcmp(c.output, "-") == 0)
        rc = cli_usage_error(cc.cmd, "-o: the preset needs a file (the report is on standard "
                                     "output)");
    if (rc == 0 && c.name && !c.output)
        rc = cli_value_errorf(cc.cmd, "--name names the preset that -o writes: give -o PRESETS");
    if (rc == 0)
        rc = resolve(&c, &p, &cfg);
    if (rc == 0 && c.name)
        rc = check_name(&c, &p.spec);
    c.n_inputs = rc == 0 ? (size_t)(argc - optind) : 0;
    c.inputs = xcalloc(c.n_inputs + 1, sizeof *c.inputs);
    for (size_t i = 0; i < c.n_inputs; i++)
        c.inputs[i].arg = argv[optind + (int)i];
    for (size_t i = 0; rc == 0 && i < c.n_inputs; i++)
        rc = read_input(&c, i);
    if (rc == 0)
        rc = run_fit(&c);
    if (rc == 0)
        rc = report(&c, &cfg);
out:
    calibration_free(&c);
    api_presets_free(&p);
    cli_common_free(&cc);
    return rc;
}
