/*
 * An experiment: every mode the config asks for, each on its best layout, for rl.steps steps.
 *
 * Baselines are tuned, not strawmen: unless the config pins them, colocated's rollout TP and
 * async's split and TP are chosen by simulating candidates for sim.tune_steps steps and
 * keeping the one with the most trained tokens per second (ties: the first, i.e. the fewest
 * training GPUs and the smallest TP). Every candidate is tried while there are at most
 * sim.tune_grid splits; a larger cluster's splits are searched coarse to fine per TP (what a
 * person sweeping 127 splits of 1024 GPUs by hand would do). The candidates tried and their
 * rates are part of the result.
 * libra's layout is the planner's (it is not tuned in the simulator: the point is to judge
 * the planner).
 *
 * Every run is a pure function of its layout and the config, so the modes, and the candidates
 * of each sweep, run as nested loops on in->workers (util/workers.h): the result is the same
 * whatever the thread count. Modes that run once (libra, rollout, pinned baselines) go first,
 * as the longest single runs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/workers.h"

const char *sim_waste_name(enum sim_waste w)
{
    static const char *const names[SIM_WASTES] = {"prompt", "reprefill", "preempt", "filtered",
                                                  "stale",  "aborted",   "failure", "surplus"};
    return (unsigned)w < SIM_WASTES ? names[w] : "unknown";
}

void sim_result_free(struct sim_result *r)
{
    free(r->steps);
    free(r->staleness);
    free(r->requests_by_instance);
    free(r->tool_pools);
    free(r->replans);
    json_decref(r->routing);
    free(r->perfetto);
    sim_timeline_free(r->timeline);
    memset(r, 0, sizeof *r);
}

void sim_mode_result_free(struct sim_mode_result *mr)
{
    sim_layout_free(&mr->layout);
    free(mr->candidates);
    free(mr->verified);
    sim_result_free(&mr->run);
    memset(mr, 0, sizeof *mr);
}

void sim_experiment_free(struct sim_experiment *e)
{
    for (int i = 0; i < e->n; i++)
        sim_mode_result_free(&e->mode[i]);
    memset(e, 0, sizeof *e);
}

int sim_warmup_steps(const struct libra_config *cfg, int steps)
{
    return cfg->sim.warmup_steps < steps ? (int)cfg->sim.warmup_steps : steps - 1;
}

static struct sim_run_opts run_opts(const struct libra_config *cfg, int steps)
{
    return (struct sim_run_opts){
        .steps = steps, .warmup = sim_warmup_steps(cfg, steps), .perfetto_step = -1};
}

static void plan_steps(const struct sim_input *in, long long steps)
{
    if (in->progress)
        atomic_fetch_add(&in->progress->steps_planned, steps);
}

/* Steps planned for a run that never started (its layout failed): done all the same. */
static void skip_steps(const struct sim_input *in, long long steps)
{
    if (in->progress)
        atomic_fetch_add(&in->progress->steps_done, steps);
}

/* Candidate values of one choice: the pinned one, or the sweep. */
static int tp_values(const struct sim_input *in, int pinned, int *out)
{
    if (pinned > 0) {
        out[0] = pinned;
        return 1;
    }
    int n = 0;
    for (int tp = 1; tp <= 8; tp *= 2)
        if (tp <= in->cfg->cluster.gpus_per_node && in->model->heads % tp == 0)
            out[n++] = tp;
    return n;
}

static int split_values(const struct sim_input *in, int pinned, int **out)
{
    const struct spec_plan_config *p = &in->cfg->plan;
    int gpus = in->cfg->cluster.gpus, g = p->granularity_gpus, n = 0;
    *out = xcalloc((size_t)gpus / (size_t)g + 1, sizeof **out);
    if (pinned > 0) {
        (*out)[n++] = pinned;
        return n;
    }
    for (int t = g; t < gpus; t += g)
        if (t >= p->min_train_gpus && gpus - t >= p->min_rollout_gpus)
            (*out)[n++] = t;
    return n;
}

/* ---- tuning ------------------------------------------------------------------------------- */

/* Why a candidate could not run. */
struct failure {
    int rc; /* 0: it ran */
    char msg[sizeof((struct libra_error *)0)->msg];
};

struct candidates {
    const struct sim_input *in;
    enum sim_mode mode;
    int steps;
    struct sim_candidate *c;
    struct failure *why; /* per candidate */
};

/* Trained tokens per second of candidate i over a short run; NAN (and why) when it cannot run. */
static void try_candidate(void *arg, size_t i)
{
    struct candidates *sw = arg;
    struct sim_candidate *c = &sw->c[i];
    struct sim_layout l;
    struct sim_result r;
    struct libra_error err = {0};
    struct sim_run_opts o = run_opts(sw->in->cfg, sw->steps);
    o.rates_only = true;
    c->tokens_per_s = NAN;
    memset(&r, 0, sizeof r);
    int rc = sim_layout_make(sw->in, sw->mode, c->n_train, c->tp, &l, &err);
    if (rc)
        skip_steps(sw->in, sw->steps);
    else if ((rc = sim_run(sw->in, &l, &o, &r, &err)) == 0)
        c->tokens_per_s = r.tokens_per_s;
    sw->why[i].rc = rc;
    snprintf(sw->why[i].msg, sizeof sw->why[i].msg, "%s", rc ? err.msg : "");
    sim_result_free(&r);
    sim_layout_free(&l);
}

/*
 * The search over a grid of n_split splits (ascending) times n_tp TP sizes: which (split, TP)
 * pairs have been tried (rate[], NAN for untried or failed), in rounds run on the workers.
 */
struct grid {
    const struct sim_input *in;
    enum sim_mode mode;
    int steps;
    const int *splits, *tps;
    int n_split, n_tp;
    bool *tried;         /* [split * n_tp + tp] */
    double *rate;        /* trained tokens/s of each tried pair; NAN when it could not run */
    struct failure *why; /* of each tried pair */
    VEC(int) next;       /* pairs of the coming round */
};

static void mark(struct grid *g, int split, int tp)
{
    int k = split * g->n_tp + tp;
    if (!g->tried[k]) {
        g->tried[k] = true;
        vec_push(&g->next, k);
    }
}

/* Marks for trying, for TP tp, up to g splits evenly spaced over indices lo..hi. */
static void mark_spaced(struct grid *g, int tp, int lo, int hi, int count)
{
    int span = hi - lo;
    if (span + 1 <= count) {
        for (int i = lo; i <= hi; i++)
            mark(g, i, tp);
        return;
    }
    for (int j = 0; j < count; j++)
        mark(g, lo + (int)lround((double)j * span / (count - 1)), tp);
}

/* Tries the pairs of the coming round. */
static void run_round(struct grid *g)
{
    struct sim_candidate *c = xcalloc(g->next.n ? g->next.n : 1, sizeof *c);
    struct failure *why = xcalloc(g->next.n ? g->next.n : 1, sizeof *why);
    for (size_t i = 0; i < g->next.n; i++)
        c[i] = (struct sim_candidate){g->splits[g->next.v[i] / g->n_tp],
                                      g->tps[g->next.v[i] % g->n_tp], NAN};
    plan_steps(g->in, (long long)g->next.n * g->steps);
    struct candidates sw = {g->in, g->mode, g->steps, c, why};
    workers_for(g->in->workers, g->next.n, try_candidate, &sw);
    for (size_t i = 0; i < g->next.n; i++) {
        g->rate[g->next.v[i]] = c[i].tokens_per_s;
        g->why[g->next.v[i]] = why[i];
    }
    g->next.n = 0;
    free(why);
    free(c);
}

/* For TP tp, marks the untried splits between the best tried one's tried neighbours (spaced
 * when there are more than count); while none has run, those of every untried gap. */
static void refine(struct grid *g, int tp, int count)
{
    int best = -1;
    for (int i = 0; i < g->n_split; i++) {
        double r = g->rate[i * g->n_tp + tp];
        if (!isnan(r) && (best < 0 || r > g->rate[best * g->n_tp + tp]))
            best = i;
    }
    if (best < 0) {
        for (int a = 0, b; a < g->n_split; a = b + 1) {
            for (b = a; b < g->n_split && !g->tried[b * g->n_tp + tp]; b++)
                ;
            if (b > a)
                mark_spaced(g, tp, a, b - 1, count);
        }
        return;
    }
    int lo = best, hi = best;
    while (lo > 0 && !g->tried[(lo - 1) * g->n_tp + tp])
        lo--;
    while (hi + 1 < g->n_split && !g->tried[(hi + 1) * g->n_tp + tp])
        hi++;
    if (lo < best)
        mark_spaced(g, tp, lo, best - 1, count);
    if (hi > best)
        mark_spaced(g, tp, best + 1, hi, count);
}

/*
 * Fills mr's candidates with the pairs tried, ascending by split then TP: every pair when
 * there are at most count splits, else coarse to fine per TP (count evenly spaced splits,
 * then the untried ones around the best so far, until none is left beside it). Leaves g's
 * arrays for the caller (grid_free).
 */
static void search(struct grid *g, struct sim_mode_result *mr, int count)
{
    size_t pairs = (size_t)g->n_split * (size_t)g->n_tp;
    g->tried = xcalloc(pairs, sizeof *g->tried);
    g->rate = xcalloc(pairs, sizeof *g->rate);
    g->why = xcalloc(pairs, sizeof *g->why);
    for (size_t k = 0; k < pairs; k++)
        g->rate[k] = NAN;
    for (int tp = 0; tp < g->n_tp; tp++)
        mark_spaced(g, tp, 0, g->n_split - 1, count);
    while (g->next.n) {
        run_round(g);
        for (int tp = 0; tp < g->n_tp; tp++)
            refine(g, tp, count);
    }
    mr->candidates = xcalloc(pairs, sizeof *mr->candidates);
    for (size_t k = 0; k < pairs; k++)
        if (g->tried[k])
            mr->candidates[mr->n_candidates++] = (struct sim_candidate){
                g->splits[k / (size_t)g->n_tp], g->tps[k % (size_t)g->n_tp], g->rate[k]};
}

static void grid_free(struct grid *g)
{
    free(g->tried);
    free(g->rate);
    free(g->why);
    vec_free(&g->next);
}

/*
 * When every tried pair failed: err names the causes, most frequent first, with their counts
 * (at most three, then how many others), and the return is LIBRA_EINVAL when some pair failed
 * on a setting the mode cannot simulate (the input's fault), else LIBRA_EINFEAS (nothing fits).
 */
static int all_failed(const struct grid *g, enum sim_mode mode, unsigned modes,
                      struct libra_error *err)
{
    size_t pairs = (size_t)g->n_split * (size_t)g->n_tp, n = 0, distinct = 0;
    size_t *first = xcalloc(pairs, sizeof *first), *count = xcalloc(pairs, sizeof *count);
    int rc = LIBRA_EINFEAS;
    for (size_t k = 0; k < pairs; k++) {
        if (!g->tried[k])
            continue;
        n++;
        if (g->why[k].rc != LIBRA_EINFEAS)
            rc = LIBRA_EINVAL;
        size_t d = 0;
        while (d < distinct && strcmp(g->why[first[d]].msg, g->why[k].msg) != 0)
            d++;
        if (d == distinct)
            first[distinct++] = k;
        count[d]++;
    }
    struct strbuf b = {0};
    strbuf_printf(&b, "no %s layout can run: all %zu candidates tried failed", sim_mode_name(mode),
                  n);
    for (size_t shown = 0; shown < 3 && shown < distinct; shown++) {
        size_t best = shown; /* selection: the most frequent cause left */
        for (size_t d = shown + 1; d < distinct; d++)
            if (count[d] > count[best])
                best = d;
        size_t f = first[shown], c = count[shown];
        first[shown] = first[best];
        count[shown] = count[best];
        first[best] = f;
        count[best] = c;
        strbuf_printf(&b, "%s %zu x %s", shown ? ";" : ":", count[shown], g->why[first[shown]].msg);
    }
    if (distinct > 3)
        strbuf_printf(&b, "; and %zu other causes", distinct - 3);
    if (modes & ~sim_mode_desc(mode)->bit) /* it stops the others: how to run them without it */
        strbuf_printf(&b, " (sim.modes without %s runs the others)", sim_mode_name(mode));
    error_set(err, NULL, 0, 0, "%s", b.data);
    strbuf_free(&b);
    free(first);
    free(count);
    return rc;
}

/* Tunes mode mr->mode (its TP, and its split when it tunes one) into mr->layout. */
static int tune(const struct sim_input *in, struct sim_mode_result *mr, struct libra_error *err)
{
    const struct spec_sim_config *sc = &in->cfg->sim;
    bool split = sim_mode_desc(mr->mode)->tune == SIM_TUNE_SPLIT_TP;
    int tps[4], *splits;
    int n_tp = tp_values(in, split ? sc->async_tp : sc->colocated_tp, tps);
    int n_split = split ? split_values(in, sc->async_train_gpus, &splits) : 1;
    if (n_split == 0) {
        const struct spec_plan_config *p = &in->cfg->plan;
        free(splits);
        error_set(err, NULL, 0, 0,
                  "no split of %d GPUs trains on plan.min_train_gpus = %d or more and rolls "
                  "out on plan.min_rollout_gpus = %d or more, in steps of "
                  "plan.granularity_gpus = %d",
                  in->cfg->cluster.gpus, p->min_train_gpus, p->min_rollout_gpus,
                  p->granularity_gpus);
        return LIBRA_EINFEAS; /* nothing fits: a negative result, as every split failing is */
    }
    if (!split) {
        splits = xcalloc(1, sizeof *splits);
        splits[0] = in->cfg->cluster.gpus;
    }
    bool pinned = n_tp == 1 && (!split || n_split == 1);
    int best = -1, steps = sc->tune_steps < in->cfg->rl.steps ? sc->tune_steps : in->cfg->rl.steps;
    if (!pinned) {
        mr->tune_steps = steps;
        struct grid g = {.in = in,
                         .mode = mr->mode,
                         .steps = steps,
                         .splits = splits,
                         .tps = tps,
                         .n_split = n_split,
                         .n_tp = n_tp};
        search(&g, mr, sc->tune_grid);
        for (int i = 0; i < mr->n_candidates; i++) {
            double r = mr->candidates[i].tokens_per_s;
            if (!isnan(r) && (best < 0 || r > mr->candidates[best].tokens_per_s))
                best = i;
        }
        int rc = best < 0 ? all_failed(&g, mr->mode, (unsigned)sc->modes, err) : 0;
        grid_free(&g);
        if (rc) {
            free(splits);
            return rc;
        }
    }
    int n_train = pinned ? splits[0] : mr->candidates[best].n_train;
    int tp = pinned ? tps[0] : mr->candidates[best].tp;
    free(splits);
    int rc = sim_layout_make(in, mr->mode, n_train, tp, &mr->layout, err);
    if (rc == 0)
        snprintf(mr->layout.origin, sizeof mr->layout.origin, "%s", pinned ? "pinned" : "tuned");
    return rc;
}

/* ---- the experiment ----------------------------------------------------------------------- */

struct modes {
    const struct sim_input *in;
    struct sim_experiment *out;
    int order[SIM_MODES]; /* out->mode indices in the order they are started */
    int last;             /* out->mode index of the last mode (perfetto) */
    int rc[SIM_MODES];
    struct libra_error err[SIM_MODES];
};

/* Chooses the layout of mode k of out (tuning it when it is a baseline) and runs it. */
static void run_mode(void *arg, size_t i)
{
    struct modes *ms = arg;
    int k = ms->order[i];
    const struct libra_config *cfg = ms->in->cfg;
    struct sim_mode_result *mr = &ms->out->mode[k];
    struct libra_error *err = &ms->err[k];
    bool verify = mr->mode == SIM_LIBRA && cfg->sim.planner && cfg->plan.verify_candidates > 0;
    int rc = sim_mode_desc(mr->mode)->tune != SIM_TUNE_NONE ? tune(ms->in, mr, err)
             : verify                                       ? sim_verify(ms->in, mr, err)
                      : sim_layout_make(ms->in, mr->mode, 0, 0, &mr->layout, err);
    struct sim_run_opts o = run_opts(cfg, cfg->rl.steps);
    if (ms->in->perfetto && k == ms->last)
        o.perfetto_step = cfg->sim.trace_step >= 0 && cfg->sim.trace_step < o.steps
                              ? cfg->sim.trace_step
                              : o.warmup;
    o.perfetto_mode = sim_mode_name(mr->mode);
    int64_t first, last; /* checked by sim_experiment_run */
    spec_timeline_steps_parse(cfg->sim.timeline_steps, &first, &last, NULL);
    if (last >= 0)
        o = (struct sim_run_opts){.steps = o.steps,
                                  .warmup = o.warmup,
                                  .perfetto_step = o.perfetto_step,
                                  .perfetto_mode = o.perfetto_mode,
                                  .timeline = true,
                                  .timeline_first = first,
                                  .timeline_last = last < o.steps ? last : o.steps - 1};
    if (rc == 0)
        rc = sim_run(ms->in, &mr->layout, &o, &mr->run, err);
    else
        skip_steps(ms->in, o.steps);
    ms->rc[k] = rc;
}

/* Whether mode m runs once, without a tuning sweep before it. */
static bool runs_once(const struct spec_sim_config *sc, enum sim_mode m)
{
    switch (sim_mode_desc(m)->tune) {
    case SIM_TUNE_TP:
        return sc->colocated_tp;
    case SIM_TUNE_SPLIT_TP:
        return sc->async_tp && sc->async_train_gpus;
    default:
        return true;
    }
}

/* A TP pinned by key (0: tuned) is one an instance can have on a node of gpn GPUs. */
static int check_pinned_tp(const char *key, int tp, int gpn, struct libra_error *err)
{
    if (tp == 0 || ((tp & (tp - 1)) == 0 && tp <= gpn))
        return 0;
    return error_set(err, NULL, 0, 0, "%s: %d: must be 1, 2, 4 or 8 and fit a node of %d GPUs", key,
                     tp, gpn);
}

/* A layout pinned by keys: its fleet of one TP on the GPUs after the first_gpu training ones
 * holds an instance. */
static int check_pinned_fleet(const struct libra_config *cfg, const char *keys, int first_gpu,
                              struct libra_error *err)
{
    const struct spec_sim_config *sc = &cfg->sim;
    struct sim_layout l = {0};
    int rc = sim_homogeneous(cfg, &l, first_gpu, first_gpu ? sc->async_tp : sc->colocated_tp, err);
    sim_layout_free(&l);
    if (rc)
        error_prefix(err, keys);
    return rc;
}

/* A step that key names (-1: none) is one of the run's. */
static int check_step(const char *key, int64_t step, int steps, struct libra_error *err)
{
    if (step < steps)
        return 0;
    return error_set(err, NULL, 0, 0,
                     "%s: step %lld is past the last step, %d (steps are numbered from 0)", key,
                     (long long)step, steps - 1);
}

int sim_config_check(const struct libra_config *cfg, struct libra_error *err)
{
    const struct spec_sim_config *sc = &cfg->sim;
    for (int m = 0; m < SIM_MODES; m++) {
        const struct sim_mode_desc *d = sim_mode_desc(m);
        if (!(sc->modes & d->bit))
            continue;
        if (d->streams && spec_rl_async_check(&cfg->rl, d->name, err) != 0)
            return LIBRA_EINVAL;
        if (m == SIM_ROLLOUT || (m == SIM_LIBRA && !sc->planner)) {
            struct sim_layout fleet = {0};
            int rc = sim_fleet(cfg, (enum sim_mode)m, &fleet, err);
            sim_layout_free(&fleet);
            if (rc)
                return LIBRA_EINVAL;
        }
    }
    /* a pinned layout only where its mode runs: a flag leaving the mode out leaves a config
     * file's pins aside (spec/config.c check_inert), so they are not checked either */
    int gpn = cfg->cluster.gpus_per_node;
    bool colocated = sc->modes & SPEC_SIM_COLOCATED, async = sc->modes & SPEC_SIM_ASYNC;
    if ((colocated && check_pinned_tp("sim.colocated_tp", sc->colocated_tp, gpn, err)) ||
        (async && check_pinned_tp("sim.async_tp", sc->async_tp, gpn, err)))
        return LIBRA_EINVAL;
    if (async && sc->async_train_gpus >= cfg->cluster.gpus)
        return error_set(err, NULL, 0, 0,
                         "sim.async_train_gpus: %d of %d GPUs leaves none to roll out",
                         sc->async_train_gpus, cfg->cluster.gpus);
    if ((colocated && sc->colocated_tp && check_pinned_fleet(cfg, "sim.colocated_tp", 0, err)) ||
        (async && sc->async_tp && sc->async_train_gpus &&
         check_pinned_fleet(cfg, "sim.async_tp with sim.async_train_gpus", sc->async_train_gpus,
                            err)))
        return LIBRA_EINVAL;
    int64_t first, last;
    if (spec_timeline_steps_parse(sc->timeline_steps, &first, &last, err) != 0) {
        error_prefix(err, "sim.timeline_steps");
        return LIBRA_EINVAL;
    }
    if ((last >= 0 && check_step("sim.timeline_steps", first, cfg->rl.steps, err)) ||
        check_step("sim.trace_step", sc->trace_step, cfg->rl.steps, err))
        return LIBRA_EINVAL;
    return 0;
}

int sim_experiment_run(const struct sim_input *in, struct sim_experiment *out,
                       struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    const struct libra_config *cfg = in->cfg;
    int rc = sim_input_check(in, err);
    if (rc)
        return rc;
    rc = sim_config_check(cfg, err);
    if (rc)
        return rc;
    struct modes *ms = xcalloc(1, sizeof *ms);
    ms->in = in;
    ms->out = out;
    for (int m = 0; m < SIM_MODES; m++)
        if (cfg->sim.modes & sim_mode_desc((enum sim_mode)m)->bit)
            out->mode[out->n++].mode = (enum sim_mode)m;
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < out->n; k++)
            if (runs_once(&cfg->sim, out->mode[k].mode) == (pass == 0))
                ms->order[n++] = k;
    ms->last = out->n - 1;
    plan_steps(in, (long long)out->n * cfg->rl.steps);
    workers_for(in->workers, (size_t)out->n, run_mode, ms);
    for (int k = 0; k < out->n && !rc; k++)
        if ((rc = ms->rc[k]) != 0 && err) {
            *err = ms->err[k];
            error_prefix(err, sim_mode_name(out->mode[k].mode));
        }
    free(ms);
    return rc;
}
