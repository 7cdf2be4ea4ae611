/*
 * `libra sim [EXPERIMENT]`: simulate an RL job under several resource managers, once or over a
 * sweep of settings and seeds.
 *
 * The simulator itself (src/sim/) is pure; this file resolves the experiment (built-in
 * defaults < presets < the file < flags; a sweep cell's settings last), reads traces into
 * memory, starts the worker threads and the progress line, and writes what the simulator
 * formats: the table, one JSON document, JSON Lines, and with --perfetto a Chrome trace-event
 * file of one step. --timeline is sim.timeline_steps, so that sweep cells record it too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "sim/sim.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/strbuf.h"
#include "util/vec.h"
#include "util/workers.h"

static const char help[] =
    "usage: libra sim [EXPERIMENT] [--json|--jsonl] [--steps N] [--seed S] [--perfetto FILE]\n"
    "                 [--timeline A:B] [--trace FILE] [--sweep KEY=V1,V2,...]...\n"
    "                 [--seeds N|--seed-list S,...] [--attribution] [--jobs J] [--progress]\n"
    "                 [flags]\n"
    "\n"
    "Simulates the RL job of EXPERIMENT (a config file, docs/config.md; without one the\n"
    "built-in default: 48 x A800, Qwen3-14B, r2e-gym, batch 32 = 8 x 4, 100 steps) under each\n"
    "resource manager of sim.modes: colocated (verl's hybrid engine), async (a static split,\n"
    "one rollout TP, bounded staleness), libra (the planner's split and heterogeneous\n"
    "instances, routed by C-MLFQ) and rollout (a fixed fleet, no trainer). Baselines are\n"
    "tuned in the simulator unless pinned (sim.colocated_tp, sim.async_train_gpus,\n"
    "sim.async_tp). Reports trained tokens/s and trajectories/s, waste by cause, utilisation,\n"
    "the tail's share of rollout time, staleness, routing metrics and the planner's predicted\n"
    "times beside the simulated ones (docs/sim.md).\n"
    "\n"
    "With --sweep or --seeds it runs every cell of a grid (each --sweep key times the others)\n"
    "under each seed and reports, per grid point, the median and interquartile range across\n"
    "seeds; --json holds every cell's full result, equal to the single run's.\n"
    "\n"
    "flags:\n"
    "  --perfetto FILE    write one step of the last mode as a Chrome trace-event file\n"
    "                     (open it in ui.perfetto.dev); the step is sim.trace_step (a flag\n"
    "                     setting it is refused without --perfetto)\n"
    "  --timeline A:B     record every mode's GPU timeline of steps A to B in its JSON\n"
    "                     (sim.timeline_steps; libra report draws it); with --json or\n"
    "                     --jsonl only\n"
    "  --trace FILE       replay the trajectories of a trace (workload.trace)\n"
    "  --sweep KEY=V1,V2  run the experiment with KEY set to each value (any config key;\n"
    "                     repeatable: the grid of every combination, the first key slowest;\n"
    "                     write a comma inside a value as \\,)\n"
    "  --seeds N          run every cell under N seeds: sim.seed, sim.seed + 1, ...\n"
    "  --seed-list S,...  run every cell under these seeds\n"
    "  --attribution      run what each of libra's mechanisms buys, each bar a run:\n"
    "                     colocated, async, + planner, + heterogeneous TP with C-MLFQ,\n"
    "                     + elastic pool, + online replanning, and libra without each\n"
    "                     (the last key of the sweep's grid; docs/sim.md)\n";

/* ---- flags ------------------------------------------------------------------------------ */

struct sim_flags {
    const char *perfetto;
    bool attribution;
    VEC(struct sim_sweep_key) keys; /* key and values owned */
    int64_t n_seeds;                /* --seeds; 0 none */
    VEC(int64_t) seed_list;         /* --seed-list */
};

static void flags_free(struct sim_flags *f)
{
    for (size_t k = 0; k < f->keys.n; k++) {
        for (size_t i = 0; i < f->keys.v[k].n; i++)
            free((char *)f->keys.v[k].values[i]);
        free((char **)f->keys.v[k].values);
        free((char *)f->keys.v[k].key);
    }
    vec_free(&f->keys);
    vec_free(&f->seed_list);
}

static int add_sweep(const struct cli_command *cmd, struct sim_flags *f, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return cli_usage_error(cmd, "--sweep needs KEY=V1,V2,..., not '%s'", arg);
    char *key = xstrndup(arg, (size_t)(eq - arg));
    if (strcmp(key, SIM_ATTRIBUTION_KEY) == 0) { /* the grid's key of --attribution's bars */
        free(key);
        return cli_usage_error(cmd, "--sweep: unknown key '%s' (--attribution runs its bars)",
                               SIM_ATTRIBUTION_KEY);
    }
    for (size_t k = 0; k < f->keys.n; k++)
        if (strcmp(f->keys.v[k].key, key) == 0) {
            free(key);
            return cli_usage_error(cmd, "--sweep: %.*s is swept twice", (int)(eq - arg), arg);
        }
    char **values;
    size_t n = parse_list(eq + 1, &values);
    vec_push(&f->keys, ((struct sim_sweep_key){key, (const char *const *)values, n}));
    for (size_t i = 0; i < n; i++) {
        if (!values[i][0])
            return cli_value_errorf(cmd, "--sweep %s: an empty value in '%s'", key, eq + 1);
        for (size_t j = 0; j < i; j++)
            if (strcmp(values[i], values[j]) == 0) /* two cells of one config */
                return cli_value_errorf(cmd, "--sweep %s: '%s' is listed twice", key, values[i]);
    }
    return 0;
}

static int add_seed_list(const struct cli_command *cmd, struct sim_flags *f, const char *arg)
{
    size_t size = strlen(arg) + PARSE_WHY_EXTRA;
    char *why = xmalloc(size);
    /* a seed listed twice would count one run twice in the quartiles */
    int rc = parse_int_list(arg, 0, 9007199254740991LL, "seed", &f->seed_list.v, &f->seed_list.n,
                            why, size);
    if (rc == 0)
        f->seed_list.cap = f->seed_list.n;
    else
        rc = cli_value_error(cmd, "--seed-list", why);
    free(why);
    return rc;
}

/* ---- output ----------------------------------------------------------------------------- */

static int exit_code(int rc)
{
    return rc == LIBRA_EINFEAS     ? LIBRA_EXIT_NEGATIVE
           : rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL
                                   : LIBRA_EXIT_USAGE;
}

static int emit(const struct cli_common *cc, json_t *doc, char *text)
{
    int rc;
    if (doc) {
        rc = cli_emit_json(cc, doc);
        json_decref(doc);
    } else {
        rc = cli_write_output(cc->output, text);
        free(text);
    }
    return rc;
}

static int write_perfetto(const struct sim_experiment *e, const char *path)
{
    for (int i = 0; i < e->n; i++)
        if (e->mode[i].run.perfetto)
            return cli_write_output(path, e->mode[i].run.perfetto);
    cli_errorf("sim: --perfetto: no step was recorded (sim.trace_step beyond rl.steps?)");
    return LIBRA_EXIT_USAGE;
}

/* ---- progress --------------------------------------------------------------------------- */

struct watched {
    struct sim_progress counts;
    long long cells; /* a sweep's; 0 for one run */
};

/* Steps done of those planned; in a sweep, planned steps scaled from the cells started to all
 * of them (cells plan their runs when they start). */
static void read_progress(void *ctx, struct cli_progress_state *out)
{
    struct watched *w = ctx;
    out->unit = "steps";
    long long started = atomic_load(&w->counts.cells_started);
    out->done = atomic_load(&w->counts.steps_done);
    out->total = atomic_load(&w->counts.steps_planned);
    if (w->cells && started > 0)
        out->total = out->total * w->cells / started;
    out->cells_done = atomic_load(&w->counts.cells_done);
    out->cells_total = w->cells;
}

/* Fewer measured steps than this and the rates mostly say how the pipeline starts. */
#define MEASURED_STEPS_MIN 10

static int measured_steps(const struct libra_config *cfg)
{
    return cfg->rl.steps - sim_warmup_steps(cfg, cfg->rl.steps);
}

/* Says on stderr when cfg's rates rest on too few steps after the warm-up (once per command). */
static void warn_if_short(const struct libra_config *cfg)
{
    int steps = cfg->rl.steps, warmup = steps - measured_steps(cfg);
    if (steps - warmup < MEASURED_STEPS_MIN)
        cli_errorf("sim: note: the rates cover %d step%s after %d of warm-up, so they mostly "
                   "show how the pipeline starts; run %d steps or more for steady-state rates",
                   steps - warmup, steps - warmup == 1 ? "" : "s", warmup,
                   warmup + MEASURED_STEPS_MIN);
}

/* A mode whose trained tokens/s moved more than this share between the halves of its measured
 * steps has not settled (the planner-fidelity band's width). */
#define UNSETTLED_FRAC 0.25

static bool unsettled(const struct sim_result *r)
{
    double a = r->half_tokens_per_s[0], b = r->half_tokens_per_s[1];
    return a > 0 && b > 0 && fabs(b / a - 1) > UNSETTLED_FRAC;
}

/* Says on stderr which modes of e have rates that are not a steady state. */
static void warn_if_unsettled(const struct sim_experiment *e)
{
    struct strbuf b = {0};
    for (int i = 0; i < e->n; i++) {
        const struct sim_result *r = &e->mode[i].run;
        if (unsettled(r))
            strbuf_printf(&b, "%s%s %.0f -> %.0f", b.len ? ", " : "",
                          sim_mode_name(e->mode[i].mode), r->half_tokens_per_s[0],
                          r->half_tokens_per_s[1]);
    }
    if (b.len)
        cli_errorf("sim: note: trained tokens/s moved by more than %.0f %% between the halves of "
                   "the measured steps (%s): not a steady-state figure (the workload drifts, "
                   "the pipeline is still settling, or the run is too short to average its "
                   "long tail)",
                   100 * UNSETTLED_FRAC, b.data);
    strbuf_free(&b);
}

/* Says on stderr which modes of e ended before cfg's failure injection: nothing failed there. */
static void warn_if_no_failure(const struct libra_config *cfg, const struct sim_experiment *e)
{
    if (cfg->sim.fail_time_s < 0)
        return;
    struct strbuf b = {0};
    for (int i = 0; i < e->n; i++)
        if (e->mode[i].run.end_s <= cfg->sim.fail_time_s)
            strbuf_printf(&b, "%s%s at %.1f s", b.len ? ", " : "", sim_mode_name(e->mode[i].mode),
                          e->mode[i].run.end_s);
    if (b.len)
        cli_errorf("sim: note: sim.fail_time_s is %.9g s, after these runs ended (%s): no "
                   "instance failed in them",
                   cfg->sim.fail_time_s, b.data);
    strbuf_free(&b);
}

/* The same for a sweep: how many of its runs have a mode that has not settled. */
static void warn_if_unsettled_cells(const struct sim_sweep *sw)
{
    size_t n = 0, ran = 0;
    for (size_t i = 0; i < sw->n_cells; i++) {
        if (sw->cells[i].rc)
            continue;
        ran++;
        for (int m = 0; m < sw->cells[i].exp.n; m++)
            if (unsettled(&sw->cells[i].exp.mode[m].run)) {
                n++;
                break;
            }
    }
    if (n)
        cli_errorf("sim: note: in %zu of %zu runs a mode's trained tokens/s moved by more than "
                   "%.0f %% between the halves of the measured steps: not steady-state "
                   "figures (run.trained_tokens_per_s_halves in --json)",
                   n, ran, 100 * UNSETTLED_FRAC);
}

/* The trace's records a sweep's runs never drew: noted once per rl.samples its runs had (the
 * cells share the trace, not always its grouping); a run that failed gets its error alone. */
static void note_leftover_cells(const struct sim_sweep *sw, const struct libra_config *cfgs)
{
    int *noted = xcalloc(sw->n_cells, sizeof *noted);
    size_t n = 0;
    for (size_t i = 0; i < sw->n_cells; i++) {
        int samples = cfgs[i].rl.samples;
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = noted[k] == samples;
        if (sw->cells[i].rc || seen)
            continue;
        noted[n++] = samples;
        cli_note_leftover_records("sim", &sw->cells[i].in, samples);
    }
    free(noted);
}

/* ---- one run ------------------------------------------------------------------------------ */

static int run_one(const struct cli_common *cc, const struct sim_flags *f,
                   const struct api_presets *p, const struct libra_config *cfg)
{
    struct api_traces ts = {0};
    struct sim_input in;
    struct sim_experiment e = {0};
    int rc = cli_sim_input(p, &ts, cfg, f->perfetto != NULL, &in);
    if (rc == 0) {
        struct watched w = {0};
        in.workers = workers_new(cc->jobs);
        in.progress = &w.counts;
        struct cli_progress *line = cli_progress_start("sim", read_progress, &w, cc->progress);
        struct libra_error err = {0};
        int src = sim_experiment_run(&in, &e, &err);
        cli_progress_stop(line);
        workers_free(in.workers);
        if (src) {
            char buf[1024];
            cli_errorf("sim: %s", error_format(&err, buf, sizeof buf));
            rc = exit_code(src);
        }
    }
    if (rc == 0) { /* after the run: a trace it refused gets its error alone */
        cli_note_leftover_records("sim", &in, cfg->rl.samples);
        warn_if_short(cfg);
        warn_if_unsettled(&e);
        warn_if_no_failure(cfg, &e);
    }
    if (rc == 0 && f->perfetto) /* first: one that fails leaves no result on stdout */
        rc = write_perfetto(&e, f->perfetto);
    if (rc == 0)
        rc = emit(cc, cc->json ? sim_experiment_to_json(&e, cfg) : NULL,
                  cc->json    ? NULL
                  : cc->jsonl ? sim_experiment_jsonl(&e, cfg)
                              : sim_experiment_text(&e, cfg));
    sim_experiment_free(&e);
    api_traces_free(&ts);
    return rc;
}

/* ---- sweeps ------------------------------------------------------------------------------- */

/* Keeps in common the keys that next defers too (the keys inert at every point so far). */
static void keep_common(struct spec_deferred *common, const struct spec_deferred *next)
{
    size_t kept = 0;
    for (size_t i = 0; i < common->n; i++)
        for (size_t j = 0; j < next->n; j++)
            if (next->item[j].key == common->item[i].key) { /* the schema's strings */
                common->item[kept++] = common->item[i];
                break;
            }
    common->n = kept;
}

/* Refuses a key inert at every point of the grid, as a single run would (a key that acts at
 * some point acts on the sweep); 0 when none is. */
static int refuse_inert(const struct sim_sweep *sw, const struct spec_deferred *common)
{
    if (!common->n)
        return 0;
    struct libra_error err = common->item[0].err;
    size_t points = sw->n_cells / sw->n_seeds, len = strlen(err.msg);
    bool gridded = false; /* a swept key: its message names no value, none acting */
    for (size_t g = 0; g < common->n_grid && !gridded; g++)
        gridded = strcmp(common->grid[g], common->item[0].key) == 0;
    if (points > 1)
        snprintf(err.msg + len, sizeof err.msg - len, "%s",
                 gridded ? ", at any point of the grid" : ", nor at any other point of the grid");
    return cli_report_error(&err);
}

/* Into buf: point's swept values, "KEY=VALUE, ...". */
static void point_text(const struct sim_sweep *sw, size_t point, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sw->n_keys && len < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s=%s", k ? ", " : "", sw->keys[k].key,
                                sim_sweep_value(sw, point, k));
}

/* Into buf: what names point's errors, "--sweep: 'KEY=VALUE, ...'" (as check_points names
 * them). */
static void point_where(const struct sim_sweep *sw, size_t point, char *buf, size_t size)
{
    char x[256];
    point_text(sw, point, x, sizeof x);
    snprintf(buf, size, "--sweep: '%s'", x);
}

/* Reports msg, an error of grid point p's settings, named by its swept values (seeds alone: as
 * the single run says it). Returns the exit code. */
static int refuse_point(const struct sim_sweep *sw, size_t p, const char *msg)
{
    char x[256];
    point_text(sw, p, x, sizeof x);
    if (sw->n_keys)
        cli_errorf("sim: --sweep: '%s': %s", x, msg);
    else
        cli_errorf("sim: %s", msg);
    return LIBRA_EXIT_USAGE;
}

/* cfg's digest but for its trace, which same_trace compares: a file spelled two ways (a.jsonl
 * and ./a.jsonl) is one; with the warm-up and tuning steps a short run takes (sim.warmup_steps
 * and sim.tune_steps: their defaults are capped at rl.steps, so a point giving the capped value
 * runs the default's experiment). */
static uint64_t digest_but_trace(const struct libra_config *cfg)
{
    struct libra_config c = *cfg;
    c.workload.trace[0] = '\0';
    c.sim.warmup_steps = sim_warmup_steps(cfg, cfg->rl.steps);
    if (c.sim.tune_steps > c.rl.steps)
        c.sim.tune_steps = c.rl.steps;
    return spec_config_digest(&c);
}

static bool same_trace(const struct libra_config *a, const struct libra_config *b)
{
    const char *x = a->workload.trace, *y = b->workload.trace;
    return strcmp(x, y) == 0 || (x[0] && y[0] && cli_same_regular_file(x, y));
}

/* Every point of the grid before any runs: one the simulator would refuse (sim_config_check;
 * named by its swept values, or, seeds alone, as the single run says it), or two that resolve
 * to one config (a value spelled twice: 1 and 01, a trace's path and another to its file), which
 * would count one run twice in the quartiles as a value listed twice would. Points where a swept
 * key was inert and took its default (an attribution's colocated bar under a swept
 * rl.sync_interval) are one experiment by design: each is its own point's bar. cfgs: every cell's,
 * the first seed's cell of point p at p · n_seeds. */
static int check_points(const struct sim_sweep *sw, const struct libra_config *cfgs)
{
    size_t points = sw->n_cells / sw->n_seeds;
    uint64_t *digest = xcalloc(points, sizeof *digest);
    int rc = 0;
    for (size_t a = 0; a < points && rc == 0; a++) {
        struct libra_error err = {0};
        if (sim_config_check(&cfgs[a * sw->n_seeds], &err) != 0) {
            rc = refuse_point(sw, a, err.msg);
            break;
        }
        digest[a] = digest_but_trace(&cfgs[a * sw->n_seeds]);
        bool reset = sw->cells[a * sw->n_seeds].reset;
        for (size_t b = 0; b < a && rc == 0; b++)
            if (digest[b] == digest[a] && !reset && !sw->cells[b * sw->n_seeds].reset &&
                same_trace(&cfgs[a * sw->n_seeds], &cfgs[b * sw->n_seeds])) {
                char x[256], y[256];
                point_text(sw, b, x, sizeof x);
                point_text(sw, a, y, sizeof y);
                cli_errorf("sim: --sweep: '%s' and '%s' are one experiment", x, y); /* no usage */
                rc = LIBRA_EXIT_USAGE;
            }
    }
    free(digest);
    return rc;
}

/* What resolving a sweep's cells shares: the flags each cell adds (its point's values, its
 * seed where seed_flag gave the seeds) and the keys deferred as inert (common: at every point
 * so far; cell: the cell's). */
struct cell_build {
    const struct cli_common *cc;
    const char *seed_flag; /* --seeds or --seed-list; NULL: the config's sim.seed, untouched */
    const struct ujson_doc *config;
    const struct api_presets *p;
    struct sim_sweep *sw;
    struct libra_config *cfgs;
    struct spec_config_override *extra;
    char (*labels)[160];
    struct spec_deferred *common, *cell;
};

/* Resolves cell i's config: the flags, its point's values and its seed. */
static int resolve_cell(struct cell_build *b, size_t i, struct spec_deferred *deferred)
{
    struct sim_sweep *sw = b->sw;
    struct sim_cell *c = &sw->cells[i];
    c->point = i / sw->n_seeds;
    c->seed = sw->seeds[i % sw->n_seeds];
    size_t n = 0;
    for (size_t k = 0; k < sw->n_keys; k++) {
        const char *value = sim_sweep_value(sw, c->point, k);
        if (strcmp(sw->keys[k].key, SIM_ATTRIBUTION_KEY) == 0) {
            const struct sim_bar *bar = sim_attribution_bar(value);
            snprintf(b->labels[k], sizeof b->labels[k], "--attribution (%s)", value);
            for (size_t j = 0; j < bar->n_sets; j++)
                b->extra[n++] = (struct spec_config_override){bar->sets[j].key, bar->sets[j].value,
                                                              b->labels[k]};
            continue;
        }
        snprintf(b->labels[k], sizeof b->labels[k], "--sweep %s", sw->keys[k].key);
        b->extra[n++] = (struct spec_config_override){sw->keys[k].key, value, b->labels[k]};
    }
    /* only a flag's seed is judged as a flag: a config file's, inert beside a trace, is taken */
    char seed[32], where[256] = "";
    snprintf(seed, sizeof seed, "%lld", (long long)c->seed);
    if (b->seed_flag)
        b->extra[n++] = (struct spec_config_override){"sim.seed", seed, b->seed_flag};
    if (sw->n_keys)
        point_where(sw, c->point, where, sizeof where);
    deferred->n = 0;
    int rc = cli_common_resolve(b->cc, b->config, b->p, b->extra, n, where, deferred, &b->cfgs[i]);
    c->reset = deferred->n > 0;
    return rc;
}

/* A swept value across the grid's points: whether it acts at one (or takes its default
 * there), else at how many it is inert and the first. */
struct value_seen {
    bool acts;
    size_t inert, first;
};

/* The item of deferred that holds key, or NULL. */
static const struct libra_error *deferred_error(const struct spec_deferred *deferred,
                                                const char *key, bool *differs)
{
    for (size_t i = 0; i < deferred->n; i++)
        if (strcmp(deferred->item[i].key, key) == 0) {
            *differs = deferred->item[i].differs;
            return &deferred->item[i].err;
        }
    return NULL;
}

/* Notes, for each swept value of grid point p, whether it acts there (deferred: p's inert
 * keys). seen: by key, then value (slots from first[k]). */
static void note_values(const struct sim_sweep *sw, size_t p, const struct spec_deferred *deferred,
                        const size_t *first, struct value_seen *seen)
{
    for (size_t k = 0; k < sw->n_keys; k++) {
        if (strcmp(sw->keys[k].key, SIM_ATTRIBUTION_KEY) == 0)
            continue;
        struct value_seen *v = &seen[first[k] + sim_sweep_value_index(sw, p, k)];
        bool differs = false;
        if (!deferred_error(deferred, sw->keys[k].key, &differs) || !differs)
            v->acts = true;
        else if (!v->inert++)
            v->first = p;
    }
}

/* Refuses a swept value inert at every point that sets it, as a single run refuses its flag
 * (another value of the key acting elsewhere does not make it act: verification's 0 acts
 * whatever the modes, its 4 not without libra), naming the value: the deferred message of a
 * swept key names none, each of its points taking its own. */
static int refuse_inert_values(struct cell_build *b, const size_t *first,
                               const struct value_seen *seen)
{
    const struct sim_sweep *sw = b->sw;
    for (size_t k = 0; k < sw->n_keys; k++)
        for (size_t i = 0; i < sw->keys[k].n; i++) {
            const struct value_seen *v = &seen[first[k] + i];
            if (v->acts || !v->inert || strcmp(sw->keys[k].key, SIM_ATTRIBUTION_KEY) == 0)
                continue;
            bool differs;
            /* resolved before, deferring the key: the same again */
            resolve_cell(b, v->first * sw->n_seeds, b->cell);
            struct libra_error err = *deferred_error(b->cell, sw->keys[k].key, &differs);
            char named[sizeof err.msg + 64];
            size_t len = (size_t)snprintf(named, sizeof named, "--sweep %s: %s", sw->keys[k].key,
                                          sw->keys[k].key);
            if (strncmp(err.msg, named, len) == 0)
                snprintf(named + len, sizeof named - len, "=%s%s", sw->keys[k].values[i],
                         err.msg + len);
            else
                snprintf(named, sizeof named, "%s", err.msg);
            snprintf(err.msg, sizeof err.msg, "%s%s", named,
                     v->inert > 1 ? ", nor at any other point of the grid that sets it" : "");
            return cli_report_error(&err);
        }
    return 0;
}

/* Grid point p's input (its first seed's: the seeds share its trace) as the single run checks
 * it, so that a trace the point's settings cannot replay stops the sweep before any runs. */
static int check_input(const struct sim_sweep *sw, size_t p, const struct sim_input *in)
{
    struct libra_error err = {0};
    char buf[1024];
    return sim_input_check(in, &err) ? refuse_point(sw, p, error_format(&err, buf, sizeof buf)) : 0;
}

/* Resolves every cell's config and input, all before any runs: each grid point's first seed's
 * cell, checked (refuse_inert, check_points) before the other seeds' are made, so that a bad
 * setting stops even a sweep of many seeds at once; then the rest. */
static int build_cells(const struct cli_common *cc, const char *seed_flag,
                       const struct ujson_doc *config, const struct api_presets *p,
                       struct api_traces *ts, struct sim_sweep *sw, struct libra_config *cfgs)
{
    size_t n_bars, most = 1; /* settings a key sets at most */
    const struct sim_bar *bars = sim_attribution_bars(&n_bars);
    for (size_t b = 0; b < n_bars; b++)
        most = bars[b].n_sets > most ? bars[b].n_sets : most;
    struct spec_deferred *common = xcalloc(2, sizeof *common);
    struct cell_build b = {cc,
                           seed_flag,
                           config,
                           p,
                           sw,
                           cfgs,
                           xcalloc(sw->n_keys * most + 1, sizeof *b.extra),
                           xcalloc(sw->n_keys + 1, sizeof *b.labels),
                           common,
                           common + 1};
    const char **grid = xcalloc(sw->n_keys + 1, sizeof *grid);
    for (size_t k = 0; k < sw->n_keys; k++)
        if (strcmp(sw->keys[k].key, SIM_ATTRIBUTION_KEY) != 0) /* its bars set what they need */
            grid[common->n_grid++] = sw->keys[k].key;
    b.cell->grid = common->grid = grid;
    b.cell->n_grid = common->n_grid;
    size_t *first = xcalloc(sw->n_keys + 1, sizeof *first); /* each key's values' slots */
    for (size_t k = 0; k < sw->n_keys; k++)
        first[k + 1] = first[k] + sw->keys[k].n;
    struct value_seen *seen = xcalloc(first[sw->n_keys] + 1, sizeof *seen);
    int rc = 0;
    for (size_t i = 0; i < sw->n_cells && rc == 0; i += sw->n_seeds) {
        rc = resolve_cell(&b, i, i ? b.cell : common);
        if (rc == 0)
            note_values(sw, i / sw->n_seeds, i ? b.cell : common, first, seen);
        if (rc == 0 && i)
            keep_common(common, b.cell);
    }
    if (rc == 0)
        rc = refuse_inert(sw, common);
    if (rc == 0)
        rc = refuse_inert_values(&b, first, seen);
    if (rc == 0)
        rc = check_points(sw, cfgs);
    for (size_t i = 0; i < sw->n_cells && rc == 0; i++)
        if (i % sw->n_seeds)
            rc = resolve_cell(&b, i, b.cell);
    for (size_t i = 0; i < sw->n_cells && rc == 0; i++) {
        rc = cli_sim_input(p, ts, &cfgs[i], false, &sw->cells[i].in);
        if (rc == 0 && i % sw->n_seeds == 0) /* its trace against its settings, as a run checks */
            rc = check_input(sw, i / sw->n_seeds, &sw->cells[i].in);
    }
    free(seen);
    free(first);
    free(grid);
    free(common);
    free(b.labels);
    free(b.extra);
    return rc;
}

/* Whether every bar of libra's mode sets key (sim.modes, plan.homogeneous_rollout,
 * ehp.enabled): a flag giving it would be replaced in every run that reads it. The bars of
 * the other modes set sim.modes too and read none of the others; the replanning keys are not
 * among them, the libra bars running replanning as configured. */
static bool set_by_every_libra_bar(const struct sim_bar *bars, size_t n, const char *key)
{
    for (size_t b = 0; b < n; b++) {
        bool sets = false;
        for (size_t i = 0; i < bars[b].n_sets && !sets; i++)
            sets = strcmp(bars[b].sets[i].key, key) == 0;
        if (bars[b].mode == SIM_LIBRA && !sets)
            return false;
    }
    return true;
}

/* The attribution's bars as the last key of the grid: refused where a bar would not be the
 * mechanism it names, or where a swept key is one the bars set. */
static int add_attribution(const struct cli_common *cc, struct sim_flags *f,
                           const struct libra_config *base)
{
    if (!base->sim.planner)
        return cli_usage_error(cc->cmd, "--attribution measures the planner's mechanisms; "
                                        "sim.planner is false");
    if (!base->plan.replan_interval_steps && !base->plan.replan_pressure)
        return cli_usage_error(cc->cmd, "--attribution: its last bar is online replanning, "
                                        "which plan.replan_interval_steps 0 and "
                                        "plan.replan_pressure false turn off");
    size_t n;
    const struct sim_bar *bars = sim_attribution_bars(&n);
    for (size_t i = 0; i < cc->n_overrides; i++)
        if (set_by_every_libra_bar(bars, n, cc->overrides[i].key))
            return cli_usage_error(cc->cmd, "%s: --attribution sets %s in its bars",
                                   cc->overrides[i].label, cc->overrides[i].key);
    for (size_t k = 0; k < f->keys.n; k++)
        for (size_t b = 0; b < n; b++)
            for (size_t i = 0; i < bars[b].n_sets; i++)
                if (strcmp(f->keys.v[k].key, bars[b].sets[i].key) == 0)
                    return cli_usage_error(cc->cmd, "--sweep %s: --attribution sets it in its bars",
                                           f->keys.v[k].key);
    char **names = xcalloc(n, sizeof *names);
    for (size_t b = 0; b < n; b++)
        names[b] = xstrdup(bars[b].name);
    vec_push(&f->keys,
             ((struct sim_sweep_key){xstrdup(SIM_ATTRIBUTION_KEY), (const char *const *)names, n}));
    return 0;
}

/* The most cells a sweep runs (--seeds' most, on one grid point). */
#define SWEEP_RUNS_MAX 100000

/* Refuses the seed flags beside base's trace: its runs replay the trace's trajectories, which no
 * seed draws. Several seeds would be one run; one is refused as an inert flag is, by the reason
 * that holds here (the trace is set). */
static int refuse_trace_seeds(const struct cli_common *cc, const struct sim_flags *f,
                              const struct libra_config *base, size_t n_seeds)
{
    const char *flag = f->seed_list.n ? "--seed-list" : "--seeds";
    if (n_seeds > 1)
        return cli_usage_error(cc->cmd,
                               "%s: a trace's runs replay its recorded trajectories whatever the "
                               "seed, so its seeds would be one run",
                               flag);
    cli_errorf("%s: sim.seed=%lld has no effect without generated trajectories: the trajectories "
               "are the trace's (workload.trace %s), replayed whatever the seed",
               flag, (long long)(f->seed_list.n ? f->seed_list.v[0] : base->sim.seed),
               base->workload.trace);
    return LIBRA_EXIT_USAGE;
}

static int run_sweep(const struct cli_common *cc, const struct sim_flags *f,
                     const struct ujson_doc *config, const struct api_presets *p,
                     const struct libra_config *base)
{
    if (f->perfetto)
        return cli_usage_error(cc->cmd, "--perfetto records one run, not a sweep");
    for (size_t k = 0; k < f->keys.n; k++) /* each cell's seed is the seed axis' */
        if (strcmp(f->keys.v[k].key, "sim.seed") == 0)
            return cli_usage_error(cc->cmd, "--sweep sim.seed: seeds are the grid's other axis; "
                                            "use --seed-list S1,S2,... or --seeds N");
    const char *seed_flag = cli_common_flag(cc, "sim.seed");
    if (seed_flag && f->seed_list.n)
        return cli_usage_error(cc->cmd, "%s and --seed-list both set the seeds", seed_flag);
    size_t n_seeds = f->seed_list.n ? f->seed_list.n : f->n_seeds ? (size_t)f->n_seeds : 1;
    bool traces_swept = false;
    for (size_t k = 0; k < f->keys.n; k++)
        traces_swept |= strcmp(f->keys.v[k].key, "workload.trace") == 0;
    if ((f->seed_list.n || f->n_seeds) && base->workload.trace[0] && !traces_swept)
        return refuse_trace_seeds(cc, f, base, n_seeds);
    size_t runs = n_seeds; /* counted without overflow: every cell's config is made at once */
    for (size_t k = 0; k < f->keys.n; k++) {
        if (f->keys.v[k].n > SWEEP_RUNS_MAX / runs)
            return cli_usage_error(cc->cmd,
                                   "the grid (--sweep, --attribution) times the seeds is "
                                   "more than %d runs",
                                   SWEEP_RUNS_MAX);
        runs *= f->keys.v[k].n;
    }
    const int64_t seed_max = ((int64_t)1 << 53) - 1; /* sim.seed's bound */
    if (!f->seed_list.n && base->sim.seed > seed_max - (int64_t)(n_seeds - 1))
        return cli_usage_error(cc->cmd,
                               "--seeds %zu from sim.seed %lld passes the seeds' bound, 2^53 - 1",
                               n_seeds, (long long)base->sim.seed);
    int64_t *seeds = xcalloc(n_seeds, sizeof *seeds);
    for (size_t s = 0; s < n_seeds; s++)
        seeds[s] = f->seed_list.n ? f->seed_list.v[s] : base->sim.seed + (int64_t)s;
    struct sim_sweep sw = {
        .keys = f->keys.v, .n_keys = f->keys.n, .seeds = seeds, .n_seeds = n_seeds};
    sw.n_cells = sim_sweep_points(&sw) * n_seeds;
    sw.cells = xcalloc(sw.n_cells, sizeof *sw.cells);
    struct libra_config *cfgs = xcalloc(sw.n_cells, sizeof *cfgs);
    struct api_traces ts = {0};
    const char *seeds_by = f->seed_list.n ? "--seed-list" : f->n_seeds ? "--seeds" : NULL;
    int rc = build_cells(cc, seeds_by, config, p, &ts, &sw, cfgs);
    if (rc == 0) {
        struct watched w = {.cells = (long long)sw.n_cells};
        struct workers *workers = workers_new(cc->jobs);
        struct cli_progress *line = cli_progress_start("sim", read_progress, &w, cc->progress);
        size_t failed = sim_sweep_run(&sw, workers, &w.counts);
        cli_progress_stop(line);
        workers_free(workers);
        size_t shortest = SIZE_MAX; /* of the runs that have rates, speaks for all */
        for (size_t i = 0; i < sw.n_cells; i++)
            if (!sw.cells[i].rc && (shortest == SIZE_MAX ||
                                    measured_steps(&cfgs[i]) < measured_steps(&cfgs[shortest])))
                shortest = i;
        if (shortest != SIZE_MAX)
            warn_if_short(&cfgs[shortest]);
        warn_if_unsettled_cells(&sw);
        note_leftover_cells(&sw, cfgs);
        rc = emit(cc, cc->json ? sim_sweep_to_json(&sw, base) : NULL,
                  cc->json    ? NULL
                  : cc->jsonl ? sim_sweep_jsonl(&sw, base)
                              : sim_sweep_text(&sw, base));
        for (size_t i = 0; i < sw.n_cells && failed && rc == 0; i++)
            if (sw.cells[i].rc) {
                char buf[1024], point[512];
                point_text(&sw, sw.cells[i].point, point, sizeof point);
                cli_errorf("sim: %zu of %zu runs failed, the first: %s%sseed %lld: %s", failed,
                           sw.n_cells, point, point[0] ? ", " : "", (long long)sw.cells[i].seed,
                           error_format(&sw.cells[i].err, buf, sizeof buf));
                rc = exit_code(sw.cells[i].rc);
            }
        sim_sweep_free(&sw); /* only where the cells ran: a stopped sweep leaves them unmapped */
    }
    api_traces_free(&ts);
    free(cfgs);
    free(sw.cells);
    free(seeds);
    return rc;
}

/* ---- the command ------------------------------------------------------------------------ */

/* Into by: the last flag that sets config key `key` to something other than its "none" value
 * ("" or -1; values are checked by the load), a --set or a shortcut by its label, or a sweep.
 * Returns whether one does. */
static bool set_by_flag(const struct cli_common *cc, const struct sim_flags *f, const char *key,
                        char *by, size_t size)
{
    *by = '\0';
    for (size_t i = 0; i < cc->n_overrides; i++) {
        const char *v = cc->overrides[i].value;
        if (strcmp(cc->overrides[i].key, key) == 0 && *v && strtoll(v, NULL, 10) != -1)
            snprintf(by, size, "%s", cc->overrides[i].label);
    }
    for (size_t k = 0; k < f->keys.n; k++)
        if (strcmp(f->keys.v[k].key, key) == 0)
            snprintf(by, size, "--sweep %s", key);
    return *by != '\0';
}

/* The GPU timeline is a member of the JSON: asked for by a flag with the table as the output,
 * it would be recorded and never shown. */
static int check_timeline_shown(const struct cli_common *cc, const struct sim_flags *f)
{
    char by[96];
    if (cc->json || cc->jsonl || !set_by_flag(cc, f, "sim.timeline_steps", by, sizeof by))
        return 0;
    return cli_usage_error(cc->cmd,
                           "%s: the GPU timeline is recorded in the JSON, which the table does "
                           "not show (add --json or --jsonl)",
                           by);
}

/* sim.trace_step names the step --perfetto records: set by a flag without it, it does nothing. */
static int check_trace_step_used(const struct cli_common *cc, const struct sim_flags *f)
{
    char by[96];
    if (f->perfetto || !set_by_flag(cc, f, "sim.trace_step", by, sizeof by))
        return 0;
    return cli_usage_error(cc->cmd,
                           "%s: sim.trace_step is the step --perfetto records, and there is no "
                           "--perfetto FILE",
                           by);
}

/* A swept key that a flag sets too: the sweep would override it in every cell, unseen. */
static int check_swept_keys_unset(const struct cli_common *cc, const struct sim_flags *f)
{
    for (size_t k = 0; k < f->keys.n; k++)
        for (size_t i = 0; i < cc->n_overrides; i++)
            if (strcmp(f->keys.v[k].key, cc->overrides[i].key) == 0)
                return cli_usage_error(cc->cmd, "--sweep %s: %s sets it too", f->keys.v[k].key,
                                       cc->overrides[i].label);
    return 0;
}

/* --perfetto on standard output while the result goes there too: two documents in one stream,
 * or a file renamed over the one holding the result (cli_is_stdout). */
static int check_perfetto_not_stdout(const struct cli_common *cc, const struct sim_flags *f)
{
    if (!f->perfetto || (cc->output && strcmp(cc->output, "-") != 0) || !cli_is_stdout(f->perfetto))
        return 0;
    return cli_usage_error(cc->cmd,
                           "--perfetto '%s' is standard output, which the result is written to "
                           "(give it -o FILE)",
                           f->perfetto);
}

static int run(const struct cli_common *cc, const char *file, struct sim_flags *f)
{
    struct api_presets p = {0};
    struct ujson_doc config;
    struct libra_config cfg;
    bool sweep = f->keys.n || f->n_seeds || f->seed_list.n || f->attribution;
    struct spec_deferred *inert = sweep ? xcalloc(1, sizeof *inert) : NULL; /* cells judge */
    if (inert)
        inert->base = f->keys.n > 0;
    int rc = cli_common_load_doc(cc, file, &p, &config, inert, &cfg);
    free(inert);
    if (rc == 0)
        rc = check_timeline_shown(cc, f);
    if (rc == 0)
        rc = cli_check_output(cc->output);
    if (rc == 0)
        rc = check_perfetto_not_stdout(cc, f);
    if (rc == 0)
        rc = cli_check_output(f->perfetto);
    if (rc == 0)
        rc = check_trace_step_used(cc, f);
    if (rc == 0)
        rc = check_swept_keys_unset(cc, f);
    if (rc == 0 && f->attribution)
        rc = add_attribution(cc, f, &cfg);
    if (rc == 0)
        rc = sweep ? run_sweep(cc, f, &config, &p, &cfg) : run_one(cc, f, &p, &cfg);
    ujson_doc_free(&config);
    api_presets_free(&p);
    return rc;
}

enum {
    OPT_PERFETTO = 0x100,
    OPT_TRACE,
    OPT_TIMELINE,
    OPT_JOBS,
    OPT_SWEEP,
    OPT_SEEDS,
    OPT_SEED_LIST,
    OPT_ATTRIBUTION
};

static int own_flag(struct cli_common *cc, struct sim_flags *f, int c, const char *arg)
{
    const struct cli_command *cmd = cc->cmd;
    switch (c) {
    case OPT_PERFETTO:
        f->perfetto = arg;
        return 0;
    case OPT_TRACE: /* the same as --set workload.trace=FILE, so that sweep cells have it */
        cli_common_set(cc, "workload.trace", arg, "--trace");
        return 0;
    case OPT_TIMELINE:
        cli_common_set(cc, "sim.timeline_steps", arg, "--timeline");
        return 0;
    case OPT_SWEEP:
        return add_sweep(cmd, f, arg);
    case OPT_SEEDS:
        if (f->seed_list.n)
            return cli_usage_error(cmd, "--seeds and --seed-list exclude each other");
        return cli_parse_int(cmd, "--seeds", arg, 1, 100000, &f->n_seeds);
    case OPT_SEED_LIST:
        if (f->n_seeds)
            return cli_usage_error(cmd, "--seeds and --seed-list exclude each other");
        return add_seed_list(cmd, f, arg);
    case OPT_ATTRIBUTION:
        f->attribution = true;
        return 0;
    default:
        return LIBRA_EXIT_USAGE;
    }
}

int cmd_sim(int argc, char **argv)
{
    static const struct option own[] = {
        {"perfetto", required_argument, NULL, OPT_PERFETTO},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"timeline", required_argument, NULL, OPT_TIMELINE},
        {"sweep", required_argument, NULL, OPT_SWEEP},
        {"seeds", required_argument, NULL, OPT_SEEDS},
        {"seed-list", required_argument, NULL, OPT_SEED_LIST},
        {"attribution", no_argument, NULL, OPT_ATTRIBUTION},
        {0},
    };
    struct sim_flags f = {0};
    struct cli_common cc;
    cli_common_init(&cc, cli_find("sim"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_JSONL |
                        CLI_FLAGS_OUTPUT | CLI_FLAGS_JOBS | CLI_FLAGS_PROGRESS,
                    "", own);
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            flags_free(&f);
            cli_common_free(&cc);
            return LIBRA_EXIT_OK;
        }
        rc = c == '?' ? LIBRA_EXIT_USAGE : own_flag(&cc, &f, c, optarg);
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "expected at most one experiment file");
    if (rc == 0)
        rc = run(&cc, optind < argc ? argv[optind] : NULL, &f);
    flags_free(&f);
    cli_common_free(&cc);
    return rc;
}
