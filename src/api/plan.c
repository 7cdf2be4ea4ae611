/*
 * Planning an experiment (api/plan.h): solve, verify by simulation, the free fleet's optimum
 * under plan.homogeneous_rollout, and the document.
 */
#include "api/plan.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include "util/error.h"
#include "util/workers.h"

void api_planned_free(struct api_planned *pl)
{
    plan_result_free(&pl->plan);
    plan_result_free(&pl->analytic);
    plan_result_free(&pl->het);
    sim_mode_result_free(&pl->verification);
}

/* ---- the time limit ------------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool past_deadline(void *arg)
{
    return now_s() >= *(const double *)arg;
}

/* ---- planning ------------------------------------------------------------------------------- */

/* Plans in's sample under plan_cfg into *r, adding the time it took to pl->search_ms. */
static int solve(const struct sim_input *in, const struct libra_config *plan_cfg,
                 struct api_planned *pl, struct plan_result *r, struct libra_error *err)
{
    double start = now_s(), deadline = start + plan_cfg->plan.time_limit_s;
    int rc = sim_plan(in, plan_cfg, past_deadline, &deadline, r, err);
    pl->search_ms += 1e3 * (now_s() - start);
    return rc;
}

/* A verification whose every candidate failed to simulate, some for a setting (not for want of
 * room: LIBRA_EINFEAS), is the input's fault, as libra sim judges its runs: LIBRA_EINVAL with
 * the best ranked such candidate's cause. Else 0: the analytic optimum stands. */
static int every_failed(const struct sim_mode_result *v, struct libra_error *err)
{
    const struct sim_verified *why = NULL;
    for (int i = 0; i < v->n_verified; i++) {
        const struct sim_verified *c = &v->verified[i];
        if (!isnan(c->tokens_per_s))
            return 0;
        if (!why && c->error_rc != LIBRA_EINFEAS)
            why = c;
    }
    if (!why)
        return 0;
    return error_set(err, NULL, 0, 0, "all %d candidates failed to simulate: %s", v->n_verified,
                     why->error);
}

/* Chooses among the planner's candidates by simulation (plan.verify_candidates > 0, async):
 * the chosen one's plan replaces pl->plan, which is kept as pl->analytic when they differ. */
static int verify(const struct sim_input *in, int jobs, struct api_planned *pl,
                  struct libra_error *err)
{
    const struct libra_config *cfg = in->cfg;
    if (cfg->plan.verify_candidates == 0) {
        pl->unverified_why = "plan.verify_candidates 0: the analytic optimum";
        return 0;
    }
    if (pl->plan.colocated) {
        pl->unverified_why = "plan.mode colocated is not verified: the verification of plan.mode "
                             "async simulates colocated candidates beside its async ones";
        return 0;
    }
    double start = now_s();
    struct sim_input vin = *in;
    vin.workers = workers_new(jobs);
    int rc = sim_verify(&vin, &pl->verification, err);
    workers_free(vin.workers);
    pl->verify_ms = 1e3 * (now_s() - start);
    if (rc == 0)
        rc = every_failed(&pl->verification, err);
    if (rc != 0) {
        error_prefix(err, "verification");
        return rc;
    }
    const struct sim_verified *chosen = NULL;
    for (int i = 0; i < pl->verification.n_verified; i++)
        if (pl->verification.verified[i].chosen)
            chosen = &pl->verification.verified[i];
    if (!chosen || (chosen->split == 0 && chosen->tp == 0))
        return 0; /* the analytic optimum */
    struct libra_config vc;
    sim_verified_config(cfg, chosen, &vc);
    pl->analytic = pl->plan;
    pl->plan = (struct plan_result){0};
    return solve(in, &vc, pl, &pl->plan, err);
}

int api_plan_run(const struct sim_input *in, int jobs, struct api_planned *pl,
                 struct libra_error *err)
{
    const struct libra_config *cfg = in->cfg;
    if (cfg->workload.trace[0])
        snprintf(pl->source, sizeof pl->source, "trace %s", cfg->workload.trace);
    else
        snprintf(pl->source, sizeof pl->source, "workload %s, seed %lld", cfg->workload.name,
                 (long long)sim_sample_seed(cfg));
    int rc = solve(in, cfg, pl, &pl->plan, err);
    if (rc == 0 && pl->plan.feasible)
        rc = verify(in, jobs, pl, err);
    if (rc == 0 && pl->plan.feasible && cfg->plan.homogeneous_rollout) {
        struct libra_config free_cfg = *cfg;
        free_cfg.plan.homogeneous_rollout = false;
        rc = solve(in, &free_cfg, pl, &pl->het, err);
    }
    return rc;
}

json_t *api_plan_json(const struct libra_config *cfg, const struct api_planned *pl)
{
    const struct plan_result *r = &pl->plan;
    const struct plan_result *searched = pl->analytic.gpus ? &pl->analytic : r;
    json_t *doc = plan_document(cfg, r, searched, &pl->het, pl->source);
    if (r->feasible) {
        json_t *v = pl->verification.n_verified ? sim_verification_to_json(&pl->verification)
                                                : json_pack("{s:s}", "none", pl->unverified_why);
        json_object_set_new(doc, "verification", v);
    }
    return doc;
}
