/*
 * The public entry points of planning and simulation (include/libra/libra.h): the experiment
 * resolved as the commands resolve it (api/experiment.h), the same functions run, and the
 * same document returned that `libra plan --json` / `libra sim --json` print.
 */
#include <stdlib.h>
#include <string.h>

#include "api/experiment.h"
#include "api/internal.h"
#include "api/plan.h"
#include "util/error.h"
#include "util/workers.h"

struct libra_error *api_error_init(struct libra_error *err, struct libra_error *scratch)
{
    if (!err)
        err = scratch;
    memset(err, 0, sizeof *err);
    return err;
}

void libra_free(void *p)
{
    free(p);
}

/* Plans in and sets *out to the document. */
static int plan(struct sim_input *in, char **out, struct libra_error *err)
{
    struct api_planned pl = {0};
    int rc = api_plan_run(in, workers_cpus(), &pl, err);
    if (rc == 0) {
        json_t *doc = api_plan_json(in->cfg, &pl);
        *out = api_json_text(doc);
        json_decref(doc);
        if (!pl.plan.feasible) {
            error_set(err, NULL, 0, 0, "no feasible plan: %s", plan_why_text(pl.plan.why));
            rc = LIBRA_EINFEAS;
        }
    }
    api_planned_free(&pl);
    return rc;
}

/* Simulates in and sets *out to the document. */
static int simulate(struct sim_input *in, char **out, struct libra_error *err)
{
    struct sim_experiment e = {0};
    in->workers = workers_new(workers_cpus());
    int rc = sim_experiment_run(in, &e, err);
    workers_free(in->workers);
    if (rc == 0) {
        json_t *doc = sim_experiment_to_json(&e, in->cfg);
        *out = api_json_text(doc);
        json_decref(doc);
    }
    sim_experiment_free(&e);
    return rc;
}

/* Resolves config_json and runs what on it, which sets *out to its document. */
static int run(const char *config_json, const char *name, char **out, struct libra_error *err,
               int (*what)(struct sim_input *in, char **out, struct libra_error *err))
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!out)
        return error_set(err, NULL, 0, 0, "out: expected a place for the result");
    *out = NULL;
    struct api_presets p = {0};
    struct api_traces ts = {0};
    struct libra_config cfg;
    struct sim_input in;
    int rc = api_config_from_text(config_json, name, &p, &cfg, err);
    if (rc == 0)
        rc = api_sim_input(&p, &ts, &cfg, false, &in, err);
    if (rc == 0)
        rc = what(&in, out, err);
    api_traces_free(&ts);
    api_presets_free(&p);
    return rc;
}

int libra_plan(const char *config_json, const char *name, char **out, struct libra_error *err)
{
    return run(config_json, name, out, err, plan);
}

int libra_sim(const char *config_json, const char *name, char **out, struct libra_error *err)
{
    return run(config_json, name, out, err, simulate);
}
