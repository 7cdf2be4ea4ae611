/*
 * An experiment: every mode the config asks for, each on its best layout, for rl.steps steps.
 *
 * Baselines are tuned, not strawmen: unless the config pins them, colocated's rollout TP and
 * async's split and TP are chosen by simulating every candidate for sim.tune_steps steps and
 * keeping the one with the most trained tokens per second (ties: the first, i.e. the fewest
 * training GPUs and the smallest TP). The candidates and their rates are part of the result.
 * libra's layout is the planner's (it is not tuned in the simulator: the point is to judge
 * the planner).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"
#include "util/error.h"

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

/* Trained tokens per second of one candidate over a short run; NAN when it cannot run. */
static double try_candidate(const struct sim_input *in, enum sim_mode m, int n_train, int tp,
                            int steps)
{
    struct sim_layout l;
    struct sim_result r;
    struct libra_error err = {0};
    struct sim_run_opts o = run_opts(in->cfg, steps);
    double rate = NAN;
    if (sim_layout_make(in, m, n_train, tp, &l, &err) == 0 && sim_run(in, &l, &o, &r, &err) == 0)
        rate = r.tokens_per_s;
    else
        memset(&r, 0, sizeof r);
    sim_result_free(&r);
    sim_layout_free(&l);
    return rate;
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

/* Tunes mode m (colocated or async) into mr->layout. */
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
        for (int i = 0; i < mr->n_candidates; i++) {
            struct sim_candidate *c = &mr->candidates[i];
            c->n_train = splits[i / n_tp];
            c->tp = tps[i % n_tp];
            c->tokens_per_s = try_candidate(in, mr->mode, c->n_train, c->tp, steps);
            if (!isnan(c->tokens_per_s) &&
                (best < 0 || c->tokens_per_s > mr->candidates[best].tokens_per_s))
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

int sim_experiment_run(const struct sim_input *in, struct sim_experiment *out,
                       struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    const struct libra_config *cfg = in->cfg;
    static const unsigned bits[SIM_MODES] = {SPEC_SIM_COLOCATED, SPEC_SIM_ASYNC, SPEC_SIM_LIBRA,
                                             SPEC_SIM_ROLLOUT};
    int last = -1;
    for (int m = 0; m < SIM_MODES; m++)
        if (cfg->sim.modes & bits[m])
            last = m;
    for (int m = 0; m < SIM_MODES; m++) {
        if (!(cfg->sim.modes & bits[m]))
            continue;
        struct sim_mode_result *mr = &out->mode[out->n++];
        mr->mode = (enum sim_mode)m;
        int rc = m == SIM_COLOCATED || m == SIM_ASYNC
                     ? tune(in, mr, err)
                     : sim_layout_make(in, mr->mode, 0, 0, &mr->layout, err);
        struct sim_run_opts o = run_opts(cfg, cfg->rl.steps);
        if (in->perfetto && m == last)
            o.perfetto_step = cfg->sim.trace_step >= 0 && cfg->sim.trace_step < o.steps
                                  ? cfg->sim.trace_step
                                  : o.warmup;
        if (rc == 0)
            rc = sim_run(in, &mr->layout, &o, &mr->run, err);
        if (rc) {
            error_prefix(err, sim_mode_name(mr->mode));
            return rc;
        }
    }
    return 0;
}
