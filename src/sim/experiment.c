/*
 * An experiment: every mode the config asks for, each on its best layout, for rl.steps steps.
 *
 * Baselines are tuned, not strawmen: unless the config pins them, colocated's rollout TP and
 * async's split and TP are chosen by simulating every candidate for sim.tune_steps steps and
 * keeping the one with the most trained tokens per second (ties: the first, i.e. the fewest
 * training GPUs and the smallest TP). The candidates and their rates are part of the result.
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

const char *sim_mode_name(enum sim_mode m)
{
    static const char *const names[SIM_MODES] = {"colocated", "async", "libra", "rollout"};
    return (unsigned)m < SIM_MODES ? names[m] : "unknown";
}

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
    json_decref(r->routing);
    free(r->perfetto);
    memset(r, 0, sizeof *r);
}

void sim_experiment_free(struct sim_experiment *e)
{
    for (int i = 0; i < e->n; i++) {
        sim_layout_free(&e->mode[i].layout);
        free(e->mode[i].candidates);
        sim_result_free(&e->mode[i].run);
    }
    memset(e, 0, sizeof *e);
}

static struct sim_run_opts run_opts(const struct libra_config *cfg, int steps)
{
    int warmup = cfg->sim.warmup_steps < steps ? cfg->sim.warmup_steps : steps - 1;
    return (struct sim_run_opts){.steps = steps, .warmup = warmup, .perfetto_step = -1};
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

struct sweep {
    const struct sim_input *in;
    enum sim_mode mode;
    int steps;
    struct sim_candidate *c;
};

/* Trained tokens per second of candidate i over a short run; NAN when it cannot run. */
static void try_candidate(void *arg, size_t i)
{
    struct sweep *sw = arg;
    struct sim_candidate *c = &sw->c[i];
    struct sim_layout l;
    struct sim_result r;
    struct libra_error err = {0};
    struct sim_run_opts o = run_opts(sw->in->cfg, sw->steps);
    c->tokens_per_s = NAN;
    memset(&r, 0, sizeof r);
    if (sim_layout_make(sw->in, sw->mode, c->n_train, c->tp, &l, &err) != 0)
        skip_steps(sw->in, sw->steps);
    else if (sim_run(sw->in, &l, &o, &r, &err) == 0)
        c->tokens_per_s = r.tokens_per_s;
    sim_result_free(&r);
    sim_layout_free(&l);
}

/* Tunes mode mr->mode (colocated or async) into mr->layout. */
static int tune(const struct sim_input *in, struct sim_mode_result *mr, struct libra_error *err)
{
    const struct spec_sim_config *sc = &in->cfg->sim;
    bool async = mr->mode == SIM_ASYNC;
    int tps[4], *splits;
    int n_tp = tp_values(in, async ? sc->async_tp : sc->colocated_tp, tps);
    int n_split = async ? split_values(in, sc->async_train_gpus, &splits) : 1;
    if (!async) {
        splits = xcalloc(1, sizeof *splits);
        splits[0] = in->cfg->cluster.gpus;
    }
    bool pinned = n_tp == 1 && (!async || n_split == 1);
    int best = -1, steps = sc->tune_steps < in->cfg->rl.steps ? sc->tune_steps : in->cfg->rl.steps;
    if (!pinned) {
        mr->n_candidates = n_tp * n_split;
        mr->candidates =
            xcalloc((size_t)(mr->n_candidates ? mr->n_candidates : 1), sizeof *mr->candidates);
        mr->tune_steps = steps;
        for (int i = 0; i < mr->n_candidates; i++)
            mr->candidates[i] = (struct sim_candidate){splits[i / n_tp], tps[i % n_tp], NAN};
        plan_steps(in, (long long)mr->n_candidates * steps);
        struct sweep sw = {in, mr->mode, steps, mr->candidates};
        workers_for(in->workers, (size_t)mr->n_candidates, try_candidate, &sw);
        for (int i = 0; i < mr->n_candidates; i++) {
            double r = mr->candidates[i].tokens_per_s;
            if (!isnan(r) && (best < 0 || r > mr->candidates[best].tokens_per_s))
                best = i;
        }
    }
    int n_train = pinned ? splits[0] : best >= 0 ? mr->candidates[best].n_train : 0;
    int tp = pinned ? tps[0] : best >= 0 ? mr->candidates[best].tp : 0;
    free(splits);
    if (!pinned && best < 0) {
        error_set(err, NULL, 0, 0, "no %s layout can run: every candidate failed",
                  sim_mode_name(mr->mode));
        return LIBRA_EINFEAS;
    }
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
    int rc = mr->mode == SIM_COLOCATED || mr->mode == SIM_ASYNC
                 ? tune(ms->in, mr, err)
                 : sim_layout_make(ms->in, mr->mode, 0, 0, &mr->layout, err);
    struct sim_run_opts o = run_opts(cfg, cfg->rl.steps);
    if (ms->in->perfetto && k == ms->last)
        o.perfetto_step = cfg->sim.trace_step >= 0 && cfg->sim.trace_step < o.steps
                              ? cfg->sim.trace_step
                              : o.warmup;
    if (rc == 0)
        rc = sim_run(ms->in, &mr->layout, &o, &mr->run, err);
    else
        skip_steps(ms->in, o.steps);
    ms->rc[k] = rc;
}

/* Whether mode m runs once, without a tuning sweep before it. */
static bool runs_once(const struct spec_sim_config *sc, enum sim_mode m)
{
    return m == SIM_LIBRA || m == SIM_ROLLOUT || (m == SIM_COLOCATED && sc->colocated_tp) ||
           (m == SIM_ASYNC && sc->async_tp && sc->async_train_gpus);
}

int sim_experiment_run(const struct sim_input *in, struct sim_experiment *out,
                       struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    const struct libra_config *cfg = in->cfg;
    static const unsigned bits[SIM_MODES] = {SPEC_SIM_COLOCATED, SPEC_SIM_ASYNC, SPEC_SIM_LIBRA,
                                             SPEC_SIM_ROLLOUT};
    struct modes *ms = xcalloc(1, sizeof *ms);
    ms->in = in;
    ms->out = out;
    for (int m = 0; m < SIM_MODES; m++)
        if (cfg->sim.modes & bits[m])
            out->mode[out->n++].mode = (enum sim_mode)m;
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < out->n; k++)
            if (runs_once(&cfg->sim, out->mode[k].mode) == (pass == 0))
                ms->order[n++] = k;
    ms->last = out->n - 1;
    plan_steps(in, (long long)out->n * cfg->rl.steps);
    workers_for(in->workers, (size_t)out->n, run_mode, ms);
    int rc = 0;
    for (int k = 0; k < out->n && !rc; k++)
        if ((rc = ms->rc[k]) != 0 && err) {
            *err = ms->err[k];
            error_prefix(err, sim_mode_name(out->mode[k].mode));
        }
    free(ms);
    return rc;
}
