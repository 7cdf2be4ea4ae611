/*
 * `libra route eval TRACE`: how well each router would have placed the turns of a trace.
 *
 * The evaluation itself is sched/eval.h's (prequential: steps 1..K only train, step s > K is
 * routed by models that hold every earlier step and none of step s, then learnt; the placebo
 * shuffle); this file reads the trace into it, turning each tool call into the observation a
 * gateway would make (sim_observe_call), sets up one arm per policy asked for, runs the arms
 * on the worker threads and prints the report. Load- and time-dependent behaviour
 * (load_balance's choices, la_mlfq's 30 s scout wait, makespan) is the simulator's to measure
 * and is marked N/A here. --placebo checks that C-MLFQ on returns shuffled among trajectories
 * at the same turn depth does no better than a tree of turn counts.
 */
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "plan/plan.h"
#include "sched/eval.h"
#include "sched/metrics.h"
#include "sched/router.h"
#include "sim/sim.h"
#include "spec/bucket.h"
#include "spec/schema.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/vec.h"
#include "util/workers.h"

#define ROUTE_EVAL_SCHEMA "libra.route-eval/1"
#define PLACEBO_TOLERANCE 0.01 /* accuracy, as a fraction: one point */

static const char help[] =
    "usage: libra route eval TRACE [--policy NAME|all] [--buckets SPEC] [--train-steps K]\n"
    "                              [--min-visits N] [--truncated censored|exact] [--placebo]\n"
    "                              [--decisions FILE] [--folds K] [--config FILE] [--json]\n"
    "                              [-o FILE] [--jobs J] [--progress] [flags]\n"
    "\n"
    "Replays every turn of TRACE (docs/trace-format.md) through the routers and scores their\n"
    "bucket choices (docs/routing.md). Steps 1..K only train the prefix trees and the\n"
    "predictor; from step K+1 on, evaluation is prequential: step s is routed with models\n"
    "that hold every earlier step (rebuilt every sched.rebuild_interval steps) and none of\n"
    "step s. Each decision is charged its regret in GPU-seconds: what the remaining work\n"
    "costs in the chosen bucket (its GPUs' share at the planned batch, a move's re-prefill,\n"
    "and the GPUs that wait when it ends after (k + 1) planned steps) over the best bucket in\n"
    "hindsight, on the plan the planner makes of TRACE on the experiment's cluster. A decision\n"
    "is correct when its bucket (before any capacity fallback) is the bucket of the\n"
    "trajectory's true remaining generated tokens. Reported per policy: regret per decision,\n"
    "per trajectory and of its path, beside the majority class's and the best constant\n"
    "bucket's; accuracy of the decisions at tool returns, the majority-class baseline, recall\n"
    "per bucket, token-weighted accuracy, Spearman of predicted vs true remaining tokens,\n"
    "moves per trajectory and first placements apart, all split by whether the prompt was seen\n"
    "in an earlier step. Load-dependent behaviour is N/A here (libra sim measures it).\n"
    "\n"
    "flags:\n"
    "  --policy NAME      cmlfq, load_balance, length_aware, la_mlfq, oracle, plas,\n"
    "                     predictor, cmlfq_h, or all (default all)\n"
    "  --buckets SPEC     sched.buckets, the bucket layout, e.g. tp1:4000,tp2:12000,tp4:30000\n"
    "                     (no instance counts; default: the planner's banding of TRACE)\n"
    "  --train-steps K    steps that only train (default 1)\n"
    "  --min-visits N     visits a tree node needs before C-MLFQ acts on it (default 1);\n"
    "                     thin nodes are also shrunk toward the general ones by\n"
    "                     sched.shrink_visits (default 50; --set sched.shrink_visits=0: off),\n"
    "                     the global tree's by their depth's spread (--set\n"
    "                     sched.empirical_shrink=false: by sched.shrink_visits too)\n"
    "  --truncated HOW    censored (default: truncated trajectories are lower bounds, spec\n"
    "                     §5) or exact (their remaining tokens taken as they are)\n"
    "  --placebo          also run C-MLFQ on the trace with tool returns shuffled among\n"
    "                     trajectories of the same turn depth, and a tree that sees only the\n"
    "                     turn count; exit 1 unless the two are within 1 point of accuracy\n"
    "  --decisions FILE   one JSON line per decision scored (one --policy only, and not\n"
    "                     with --placebo): the trajectory's line in TRACE (0: the first after\n"
    "                     the header), the turn routed, the policy's bucket and reason (`libra\n"
    "                     serve --decisions` logs the live ones alike)\n"
    "  --config FILE      the experiment (as `libra sim FILE`): its cluster, model, rl, plan\n"
    "                     and sched settings, flags on top\n"
    "  --folds K          leave-tasks-out cross-validation instead of steps: prompts split\n"
    "                     into K folds; each fold is routed by models that learnt every other\n"
    "                     fold, its own attempts in order (step, then sample), each learnt once\n"
    "                     scored; at most the trace's prompts; not with --train-steps\n";

struct route_flags {
    const char *policy; /* --policy as given */
    unsigned policies;  /* 1 << each enum sched_policy it asks for (all: every one) */
    int64_t train_steps;
    bool train_steps_given; /* --train-steps on the command line: refused with --folds */
    int64_t min_visits;
    bool truncated_exact; /* learn truncated trajectories as exact, not censored */
    bool placebo;
    const char *decisions; /* --decisions FILE, written whole once the run has succeeded */
    int64_t folds;         /* --folds K: leave-tasks-out cross-validation; 0: prequential */
    const char *config;    /* --config FILE: the experiment */
};

/* ---- the trace in memory -------------------------------------------------------------------- */

/* The trace as the evaluator takes it, and what the report says of it. */
struct ev_trace {
    char *workload, *model;
    int64_t group_size;  /* the header's GRPO group size; 0: none given */
    size_t trajectories; /* the trace's records */
    struct sched_eval_trace ev;
};

static void ev_trace_free(struct ev_trace *t)
{
    free(t->workload);
    free(t->model);
    sched_eval_trace_free(&t->ev);
}

/* Converts one record: a gateway sees the tool name, the payload size and the status. */
static void add_traj(struct sched_eval_trace *ev, const struct sched_obs_config *oc,
                     const struct trace_traj *t, bool truncated_exact)
{
    bool censored = (t->finish == TRACE_FINISH_TRUNCATED && !truncated_exact) ||
                    t->finish == TRACE_FINISH_ABORTED;
    sched_eval_traj_add(ev, t->step, (uint64_t)t->prompt_id, t->epoch, t->sample, censored);
    VEC(struct sched_obs) obs = {0};
    for (size_t i = 0; i < t->n_turns; i++) {
        const struct trace_turn *tu = &t->turns[i];
        obs.n = 0;
        for (size_t k = 0; i + 1 < t->n_turns && k < tu->n_calls; k++) {
            const struct trace_tool_call *call = &tu->calls[k];
            struct sched_obs o;
            sim_observe_call(oc, call->tool, call->payload_tokens, call->status, &o);
            vec_push(&obs, o);
        }
        sched_eval_turn_add(ev, tu->generated_tokens, tu->prompt_tokens, obs.v, obs.n,
                            (double)trace_turn_tool_us(tu) * 1e-6);
    }
    vec_free(&obs);
}

/* ---- arms: one router (and model) per policy evaluated ------------------------------------ */

/* What the arms need besides the flags: the config and its fleet's move costs. */
struct arm_setup {
    const struct libra_config *cfg;
    const struct spec_bucket_layout *layout;
    const struct sched_costs *costs;
};

static int arm_init(struct sched_eval_arm *a, const char *name, enum sched_policy p,
                    const struct arm_setup *setup, const struct sched_router_options *opt,
                    bool shuffled)
{
    struct spec_sched_config sc = setup->cfg->sched;
    sc.policy = p;
    struct libra_error err = {0};
    if (sched_eval_arm_init(a, name, &sc, setup->layout, opt, setup->costs, shuffled, &err) == 0)
        return 0;
    cli_errorf("route eval: %s", err.msg);
    return LIBRA_EXIT_INTERNAL;
}

/* What evaluation has done and has to do, for the progress line. */
struct route_progress {
    atomic_llong trajs_read;        /* while the trace is read */
    atomic_llong steps_done, steps; /* arm-steps of evaluation; steps is 0 while reading */
};

static void read_progress(void *ctx, struct cli_progress_state *out)
{
    struct route_progress *p = ctx;
    long long steps = atomic_load(&p->steps);
    out->unit = steps ? "policy-steps" : "trajectories read";
    out->done = steps ? atomic_load(&p->steps_done) : atomic_load(&p->trajs_read);
    out->total = steps;
}

/* One arm's prequential pass over the trace: a task of the worker pool. */
struct eval_task {
    struct sched_eval_arm *arms;
    int *rc;
    const struct sched_eval_trace *ev;
    const struct route_flags *f;
    struct route_progress *progress;
};

static void step_done(void *ctx)
{
    struct route_progress *p = ctx;
    atomic_fetch_add(&p->steps_done, 1);
}

static void evaluate_arm(void *arg, size_t a)
{
    struct eval_task *e = arg;
    e->rc[a] =
        e->f->folds
            ? sched_eval_arm_run_folds(&e->arms[a], e->ev, (int)e->f->folds, step_done, e->progress)
            : sched_eval_arm_run(&e->arms[a], e->ev, e->f->train_steps, step_done, e->progress);
}

/* Runs every arm over the trace, prequentially; arms are independent, so on every thread. */
static int evaluate(struct sched_eval_arm *arms, size_t n_arms, const struct sched_eval_trace *ev,
                    const struct route_flags *f, int jobs, struct route_progress *progress)
{
    int rc[SCHED_POLICY_COUNT + 2] = {0};
    struct eval_task task = {arms, rc, ev, f, progress};
    size_t per_arm = f->folds ? (size_t)f->folds : sched_eval_steps(ev);
    atomic_store(&progress->steps, (long long)(per_arm * n_arms));
    struct workers *w = workers_new(jobs);
    workers_for(w, n_arms, evaluate_arm, &task);
    workers_free(w);
    for (size_t a = 0; a < n_arms; a++)
        if (rc[a])
            return LIBRA_EXIT_INTERNAL;
    return 0;
}

/* ---- output --------------------------------------------------------------------------------- */

static json_t *arm_json(const struct sched_eval_arm *a)
{
    json_t *o = sched_metrics_to_json(a->metrics, sched_policy_bucketless(a->policy));
    json_t *reasons = json_object();
    for (int r = 0; r <= SCHED_REASON_ANY; r++)
        if (a->reasons[r])
            json_object_set_new(reasons, sched_reason_name((enum sched_reason)r),
                                json_integer((json_int_t)a->reasons[r]));
    json_object_set_new(o, "reasons", reasons);
    json_object_set_new(
        o, "confusion",
        sched_metrics_confusion_json(a->metrics, sched_policy_bucketless(a->policy)));
    return o;
}

static json_t *accuracy_json(double x)
{
    return isnan(x) ? json_null() : json_real(x);
}

/* The placebo verdict from the last three arms: cmlfq, cmlfq_shuffled, depth_only. */
static json_t *placebo_json(const struct sched_eval_arm *three, bool *within)
{
    double real = sched_metrics_accuracy(three[0].metrics);
    double x = sched_metrics_accuracy(three[1].metrics);
    double y = sched_metrics_accuracy(three[2].metrics);
    double n = (double)sched_metrics_decisions(three[1].metrics);
    double diff = fabs(x - y);
    /* binomial standard error of the difference of two accuracies over n decisions each */
    double se = sqrt((x * (1 - x) + y * (1 - y)) / n);
    *within = !(diff > PLACEBO_TOLERANCE); /* no decisions at all: nothing to refute */
    json_t *o = json_object();
    json_object_set_new(o, "cmlfq_accuracy", accuracy_json(real));
    json_object_set_new(o, "cmlfq_shuffled_accuracy", accuracy_json(x));
    json_object_set_new(o, "depth_only_accuracy", accuracy_json(y));
    json_object_set_new(o, "difference_points", accuracy_json(100.0 * diff));
    /* what the returns themselves are worth: real minus shuffled */
    json_object_set_new(o, "signal_points", accuracy_json(100.0 * (real - x)));
    json_object_set_new(o, "standard_error_points", accuracy_json(100.0 * se));
    json_object_set_new(o, "tolerance_points", json_real(100.0 * PLACEBO_TOLERANCE));
    json_object_set_new(o, "within_tolerance", json_boolean(*within));
    return o;
}

/* A metric as text: "  -  " when null. */
static void cell(FILE *out, const json_t *v, double scale)
{
    if (json_is_number(v))
        fprintf(out, " %9.1f", json_number_value(v) * scale);
    else
        fprintf(out, " %9s", "N/A");
}

static char *text_report(const json_t *doc)
{
    char *text;
    size_t len;
    FILE *out = open_memstream(&text, &len);
    const json_t *tr = json_object_get(doc, "trace");
    fprintf(out, "trace: %s (workload %s)\nbuckets: %s\n",
            json_string_value(json_object_get(tr, "path")),
            json_string_value(json_object_get(tr, "workload")),
            json_string_value(json_object_get(doc, "buckets")));
    long long folds = (long long)json_integer_value(json_object_get(doc, "folds"));
    if (folds)
        fprintf(out, "%lld-fold leave-tasks-out cross-validation; attempts in order\n", folds);
    else
        fprintf(out, "steps: %lld train, %lld evaluated; rebuild every %lld\n",
                (long long)json_integer_value(json_object_get(doc, "train_steps")),
                (long long)json_integer_value(json_object_get(doc, "eval_steps")),
                (long long)json_integer_value(json_object_get(doc, "rebuild_interval")));
    if (json_is_false(json_object_get(doc, "empirical_shrink")))
        fputs("estimator: C-MLFQ's global path nodes shrunk by the fixed sched.shrink_visits "
              "(sched.empirical_shrink=false)\n",
              out);
    const json_t *rg = json_object_get(doc, "regret");
    if (json_object_get(rg, "deadline_s"))
        fprintf(out,
                "regret in GPU-s: deadline %.0f s (planned step %.1f s x %lld), %lld GPUs wait "
                "per second late\n\n",
                json_number_value(json_object_get(rg, "deadline_s")),
                json_number_value(json_object_get(rg, "planned_step_s")),
                (long long)json_integer_value(json_object_get(rg, "max_staleness")) + 1,
                (long long)json_integer_value(json_object_get(rg, "late_gpus")));
    else
        fprintf(out, "regret in GPU-s, no deadline: %s\n\n",
                json_string_value(json_object_get(rg, "no_deadline")));
    fprintf(out, "%-15s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "policy",
            "decisions", "regret/d", "regret/tr", "path/tr", "accuracy", "majority", "long rec",
            "tok-wtd", "spearman", "moves/tr", "first", "seen", "never");
    const json_t *fixed = NULL; /* the constant baselines' regrets (every policy has them) */
    const char *name;
    const json_t *m;
    json_object_foreach((json_t *)json_object_get(doc, "policies"), name, m)
    {
        const json_t *all = json_object_get(m, "all");
        const json_t *recall = json_object_get(all, "per_bucket_recall");
        const json_t *regret = json_object_get(all, "regret");
        fprintf(out, "%-15s %9lld", name,
                (long long)json_integer_value(json_object_get(all, "decisions")));
        cell(out, json_object_get(regret, "per_decision_gpu_s"), 1);
        cell(out, json_object_get(regret, "per_trajectory_gpu_s"), 1);
        cell(out, json_object_get(regret, "path_per_trajectory_gpu_s"), 1);
        fixed = regret ? regret : fixed;
        cell(out, json_object_get(all, "accuracy"), 100);
        cell(out, json_object_get(json_object_get(all, "majority_class"), "accuracy"), 100);
        cell(out, json_array_get(recall, json_array_size(recall) - 1), 100);
        cell(out, json_object_get(all, "token_weighted_accuracy"), 100);
        cell(out, json_object_get(all, "spearman"), 1);
        cell(out, json_object_get(all, "moves_per_trajectory"), 1);
        cell(out, json_object_get(json_object_get(all, "first_placements"), "accuracy"), 100);
        cell(out, json_object_get(json_object_get(m, "seen"), "accuracy"), 100);
        cell(out, json_object_get(json_object_get(m, "never"), "accuracy"), 100);
        fputc('\n', out);
    }
    for (int k = 0; fixed && k < 2; k++) {
        const json_t *c = json_object_get(fixed, k ? "best_constant" : "majority_class");
        fprintf(out, "%-15s %9s", k ? "best constant" : "majority class", "");
        cell(out, json_object_get(c, "per_decision_gpu_s"), 1);
        cell(out, json_object_get(c, "per_trajectory_gpu_s"), 1);
        cell(out, json_object_get(c, "path_per_trajectory_gpu_s"), 1);
        fprintf(out, "  (always bucket %lld)\n",
                (long long)json_integer_value(json_object_get(c, "bucket")));
    }
    fprintf(out, "\nregret in GPU-s: regret/d per decision (first placements included), regret/tr "
                 "its sum per\ntrajectory, path/tr a trajectory's path of buckets over the best "
                 "single bucket in hindsight.\naccuracy, majority, long-bucket recall, "
                 "token-weighted and first-placement accuracy in %%;\nN/A: undefined here "
                 "(load-dependent policy or no data).\n");
    const json_t *pl = json_object_get(doc, "placebo");
    if (pl && !json_is_number(json_object_get(pl, "cmlfq_accuracy")))
        fprintf(out, "placebo: N/A: no decisions scored, nothing to compare\n");
    else if (pl)
        fprintf(out,
                "placebo: C-MLFQ %.1f%% on the real returns, %.1f%% on shuffled ones (signal "
                "%+.1f points), depth-only tree %.1f%%;\nshuffled vs depth-only: %.1f points "
                "apart (standard error %.1f): %s\n",
                100 * json_number_value(json_object_get(pl, "cmlfq_accuracy")),
                100 * json_number_value(json_object_get(pl, "cmlfq_shuffled_accuracy")),
                json_number_value(json_object_get(pl, "signal_points")),
                100 * json_number_value(json_object_get(pl, "depth_only_accuracy")),
                json_number_value(json_object_get(pl, "difference_points")),
                json_number_value(json_object_get(pl, "standard_error_points")),
                json_is_true(json_object_get(pl, "within_tolerance"))
                    ? "within 1 point"
                    : "more than 1 point (FAILED)");
    fclose(out);
    return text;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* What the planner makes of the trace on the experiment's cluster: the fleet's buckets and
 * step, which fix the default layout and the regret's deadline. */
struct route_plan {
    bool planned;
    struct spec_bucket_layout layout;
    double step_s;
    char why[sizeof((struct libra_error *)0)->msg + 32]; /* when not planned: the whole reason */
};

/* Plans the trace in `in` under cfg into out (out->planned false: why says why not). */
static void plan_trace(const struct sim_input *in, const struct libra_config *cfg,
                       struct route_plan *out)
{
    struct plan_result r = {0};
    struct libra_error err = {0};
    memset(out, 0, sizeof *out);
    if (sim_plan(in, cfg, NULL, NULL, &r, &err) != 0)
        snprintf(out->why, sizeof out->why, "%s", err.msg);
    else if (!r.feasible)
        snprintf(out->why, sizeof out->why, "no feasible plan: %s", plan_why_text(r.why));
    else {
        out->planned = true;
        out->layout = r.layout;
        out->step_s = r.step_s;
    }
    plan_result_free(&r);
}

/*
 * Reads the trace at path once, as the simulator would replay it under cfg, plans it, and
 * converts it into the evaluator's form; the records are freed before evaluation. Returns 0 or
 * an exit code after the trace's error (file:line:col).
 */
static int load_trace(const struct api_presets *p, const struct libra_config *cfg, const char *path,
                      bool truncated_exact, struct ev_trace *ev, struct route_plan *plan,
                      atomic_llong *read)
{
    struct libra_config pc = *cfg;
    snprintf(pc.workload.trace, sizeof pc.workload.trace, "%s", path);
    struct api_traces ts = {0};
    struct sim_input in = {0};
    struct libra_error err = {0};
    const struct sim_trace *t; /* the input finds it in ts */
    /* read first: an error names TRACE, not the key the input then finds it under */
    int rc = api_traces_get(&ts, path, &t, &err);
    rc = rc ? cli_report(rc, &err) : cli_sim_input(p, &ts, &pc, false, &in);
    if (rc == 0 && t->n == 0) {
        cli_errorf("route eval: %s holds no trajectories: nothing to evaluate", path);
        rc = LIBRA_EXIT_USAGE;
    }
    if (rc == 0) {
        ev->workload = xstrdup(t->workload);
        ev->model = t->model ? xstrdup(t->model) : NULL;
        ev->group_size = t->group_size;
        ev->trajectories = t->n;
        struct sched_obs_config oc;
        sched_obs_defaults(&oc, t->workload, t->model);
        for (size_t i = 0; i < t->n; i++) {
            add_traj(&ev->ev, &oc, &t->trajs[i], truncated_exact);
            atomic_fetch_add(read, 1);
        }
        sched_eval_trace_index(&ev->ev);
        if (t->group_size > 0) { /* route eval replays the trace's groups as they are */
            int g = (int)t->group_size, whole = pc.rl.batch_trajectories / g * g;
            pc.rl.samples = g; /* and plans batches of whole groups, at least one */
            pc.rl.batch_trajectories = whole > 0 ? whole : g;
        }
        plan_trace(&in, &pc, plan);
    }
    api_traces_free(&ts);
    return rc;
}

/* The layout scored: sched.buckets as given (the config refused one the cluster cannot
 * serve), else the planner's. */
static int resolve_layout(const struct libra_config *cfg, const struct route_plan *plan,
                          struct spec_bucket_layout *l)
{
    struct libra_error err = {0};
    if (cfg->sched.buckets[0])
        return spec_bucket_parse(l, cfg->sched.buckets, "sched.buckets", &err)
                   ? cli_report_error(&err)
                   : 0;
    if (!plan->planned) {
        cli_errorf("route eval: the planner gives no bucket layout for this trace (%s): give "
                   "--buckets",
                   plan->why);
        return LIBRA_EXIT_USAGE;
    }
    *l = plan->layout;
    return 0;
}

/* Sets up the arms the flags ask for (--placebo: cmlfq, cmlfq_shuffled and depth_only last).
 * Returns the count, or -1 after an error. */
static int make_arms(const struct route_flags *f, const struct arm_setup *setup,
                     struct sched_eval_arm *arms)
{
    int n = 0;
    struct sched_router_options opt = {.min_visits = (uint32_t)f->min_visits};
    for (int p = 0; p < SCHED_POLICY_COUNT; p++) {
        bool placebo_cmlfq = f->placebo && p == SCHED_CMLFQ; /* placed with its controls */
        if ((f->policies & 1u << p) && !placebo_cmlfq &&
            arm_init(&arms[n++], sched_policy_name(p), p, setup, &opt, false))
            return -1;
    }
    if (f->placebo) {
        struct sched_router_options depth = {.min_visits = opt.min_visits, .depth_only = true};
        if (arm_init(&arms[n++], "cmlfq", SCHED_CMLFQ, setup, &opt, false) ||
            arm_init(&arms[n++], "cmlfq_shuffled", SCHED_CMLFQ, setup, &opt, true) ||
            arm_init(&arms[n++], "depth_only", SCHED_CMLFQ, setup, &depth, false))
            return -1;
    }
    return n;
}

/* The policies that look states up in the prefix trees (sched_model_estimate), which
 * --min-visits, sched.shrink_visits and sched.empirical_shrink tune. */
#define TREE_POLICIES (1u << SCHED_CMLFQ | 1u << SCHED_CMLFQ_H)
/* The policies with a model (sched_policy_learns): the trees, and predictor's regression, which
 * every sched.rebuild_interval steps are rebuilt from the history. */
#define MODEL_POLICIES (TREE_POLICIES | 1u << SCHED_PREDICTOR)

/* Config keys that act on some policies only: set by a flag, they are refused where route eval
 * runs none of them (a file's value is taken: libra sim and libra serve act on it). */
static const struct {
    const char *key;
    unsigned policies;
    const char *names;
} policy_keys[] = {
    {"sched.rebuild_interval", MODEL_POLICIES, "cmlfq, predictor and cmlfq_h"},
    {"sched.shrink_visits", TREE_POLICIES, "cmlfq and cmlfq_h"},
    {"sched.empirical_shrink", TREE_POLICIES, "cmlfq and cmlfq_h"},
    {"sched.attempt_shrink", 1u << SCHED_CMLFQ_H, "cmlfq_h"},
};

/* The label of the flag that sets key to other than its default, else NULL: a flag giving the
 * default asks nothing and is taken. */
static const char *flag_changing(const struct cli_common *cc, const struct libra_config *cfg,
                                 const char *key)
{
    const char *label = cli_common_flag(cc, key);
    if (!label)
        return NULL;
    struct libra_config def;
    spec_config_defaults(&def);
    const struct spec_field *field = spec_config_field(key);
    json_t *set = spec_field_get(field, cfg), *unset = spec_field_get(field, &def);
    bool differs = !json_equal(set, unset);
    json_decref(set);
    json_decref(unset);
    return differs ? label : NULL;
}

/* Whether rl.samples can change the report on a trace without group_size. The routers score
 * each trajectory as recorded, whatever its group; only the planner (the default layout, the
 * regret's deadline) cuts the trace into groups of rl.samples: to judge dynamic sampling, to
 * keep groups whole per DP rank, and to cycle a trace shorter than one batch, whose last
 * partial group it leaves out (sim_layout_sample, plan/train.c). */
static bool samples_act(const struct libra_config *cfg, const struct ev_trace *ev)
{
    return cfg->rl.dynamic_sampling != SPEC_DS_OFF || cfg->plan.group_integrity ||
           ev->trajectories < (size_t)cfg->rl.batch_trajectories;
}

/* Refuses a flag's rl.samples that the trace's groups contradict, or that would change nothing
 * (a file's value is taken, as for policy_keys). */
static int check_samples(const struct cli_common *cc, const struct libra_config *cfg,
                         const struct ev_trace *ev)
{
    const char *label = cli_common_flag(cc, "rl.samples");
    if (!label)
        return 0;
    if (ev->group_size > 0 && cfg->rl.samples != ev->group_size) { /* replayed as recorded */
        cli_errorf("%s: the trace's GRPO groups are %lld trajectories (its header's group_size), "
                   "not rl.samples = %d: route eval replays them as they are; leave rl.samples "
                   "out or give %lld",
                   label, (long long)ev->group_size, cfg->rl.samples, (long long)ev->group_size);
        return LIBRA_EXIT_USAGE;
    }
    if (ev->group_size == 0 && !samples_act(cfg, ev))
        return cli_value_errorf(cc->cmd,
                                "%s: rl.samples has no effect here: the trace's header gives no "
                                "group_size, the routers score its trajectories as recorded, and "
                                "the planner groups them only under rl.dynamic_sampling, "
                                "plan.group_integrity or a trace shorter than one batch",
                                label);
    return 0;
}

/* Refuses a flag that tunes only what the run leaves out (policies, the placebo's shuffle, the
 * steps' rebuilds, a group size the trace gives or the planner does not use): it would change
 * nothing. */
static int check_inert_flags(const struct cli_common *cc, const struct route_flags *f,
                             const struct libra_config *cfg, const struct ev_trace *ev)
{
    unsigned run = f->policies | (f->placebo ? 1u << SCHED_CMLFQ : 0);
    if (f->min_visits != 1 && !(run & TREE_POLICIES))
        return cli_value_errorf(cc->cmd,
                                "--min-visits %lld has no effect with --policy %s: only cmlfq and "
                                "cmlfq_h look nodes up in the prefix trees",
                                (long long)f->min_visits, f->policy);
    if (f->truncated_exact && !(run & TREE_POLICIES)) /* censoring acts on the trees alone */
        return cli_value_errorf(cc->cmd,
                                "--truncated exact has no effect with --policy %s: only cmlfq and "
                                "cmlfq_h learn from the prefix trees, where a truncated trajectory "
                                "is censored",
                                f->policy);
    for (size_t k = 0; k < sizeof policy_keys / sizeof *policy_keys; k++) {
        const char *label = flag_changing(cc, cfg, policy_keys[k].key);
        if (label && !(run & policy_keys[k].policies))
            return cli_value_errorf(cc->cmd,
                                    "%s: %s has no effect with --policy %s: it acts on %s only",
                                    label, policy_keys[k].key, f->policy, policy_keys[k].names);
    }
    const char *label = flag_changing(cc, cfg, "sched.rebuild_interval");
    if (label && f->folds) /* sched_router_tick is the steps' alone */
        return cli_value_errorf(cc->cmd,
                                "%s: sched.rebuild_interval has no effect with --folds: a fold's "
                                "models learn each trajectory once and are never rebuilt",
                                label);
    int rc = check_samples(cc, cfg, ev);
    if (rc)
        return rc;
    /* the trace's trajectories are replayed as recorded: the seed draws nothing else */
    if ((label = flag_changing(cc, cfg, "sim.seed")) && !f->placebo)
        return cli_value_errorf(cc->cmd,
                                "%s: sim.seed has no effect without --placebo: only --placebo's "
                                "shuffle takes a seed",
                                label);
    return 0;
}

static void write_decision(void *ctx, const struct sched_eval_arm *a, size_t order, size_t turn,
                           const struct sched_decision *d)
{
    fprintf(ctx,
            "{\"trajectory\": %zu, \"turn\": %zu, \"policy\": \"%s\", \"bucket\": %d, "
            "\"reason\": \"%s\"}\n",
            order, turn, a->name, d->to_bucket, sched_reason_name(d->reason));
}

/* --decisions: the one arm's decisions, gathered in memory and written whole (cli_write_output)
 * once the evaluation has succeeded, so that a run that fails or is interrupted leaves FILE as
 * it was. */
struct decisions {
    FILE *out; /* NULL without --decisions */
    char *text;
    size_t len;
};

static int open_decisions(const struct cli_common *cc, const struct route_flags *f,
                          struct sched_eval_arm *arms, int n_arms, struct decisions *d)
{
    if (!f->decisions)
        return 0;
    if (n_arms != 1)
        return cli_value_errorf(cc->cmd, "--decisions needs one --policy (and no --placebo)");
    if (!(d->out = open_memstream(&d->text, &d->len)))
        abort();
    arms[0].on_decision = write_decision;
    arms[0].decision_ctx = d->out;
    return 0;
}

/* Writes the decisions gathered when rc is 0, and frees them. Returns rc or the write's exit
 * code. */
static int close_decisions(const struct route_flags *f, struct decisions *d, int rc)
{
    if (!d->out)
        return rc;
    fclose(d->out);
    if (rc == 0)
        rc = cli_write_output(f->decisions, d->text);
    free(d->text);
    return rc;
}

/* --decisions on standard output while the report goes there too: two outputs in one stream,
 * or a file renamed over the one holding the report (cli_is_stdout). */
static int check_decisions_not_stdout(const struct cli_common *cc, const struct route_flags *f)
{
    if (!f->decisions || (cc->output && strcmp(cc->output, "-") != 0) ||
        !cli_is_stdout(f->decisions))
        return 0;
    return cli_value_errorf(cc->cmd,
                            "--decisions '%s' is standard output, which the report is written to "
                            "(give it -o FILE)",
                            f->decisions);
}

static int run(const struct cli_common *cc, const struct route_flags *f, const char *path)
{
    struct decisions decisions = {0};
    struct api_presets p = {0};
    struct libra_config cfg;
    struct ev_trace ev = {0};
    struct sched_eval_arm arms[SCHED_POLICY_COUNT + 2] = {0};
    struct spec_bucket_layout l;
    struct route_progress progress = {0};
    int n_arms = 0, rc = cli_common_load(cc, f->config, &p, &cfg);
    struct cli_progress *line =
        rc ? NULL : cli_progress_start("route eval", read_progress, &progress, cc->progress);
    struct route_plan plan = {0};
    if (rc == 0)
        rc = check_decisions_not_stdout(cc, f);
    if (rc == 0) /* the outputs are refused before the run, not after it */
        rc = cli_check_output(cc->output);
    if (rc == 0 && f->decisions)
        rc = cli_check_output(f->decisions);
    if (rc == 0)
        rc = load_trace(&p, &cfg, path, f->truncated_exact, &ev, &plan, &progress.trajs_read);
    if (rc == 0) /* after the trace: an unreadable one is the first error, whatever the flags */
        rc = check_inert_flags(cc, f, &cfg, &ev);
    if (rc == 0)
        rc = resolve_layout(&cfg, &plan, &l);
    int64_t steps = (int64_t)sched_eval_steps(&ev.ev);
    if (rc == 0 && !f->folds && f->train_steps >= steps)
        rc = cli_value_errorf(cc->cmd,
                              "--train-steps %lld leaves nothing to evaluate (the trace "
                              "has %lld step%s)",
                              (long long)f->train_steps, (long long)(steps > 0 ? steps : 0),
                              steps == 1 ? "" : "s");
    size_t prompts = sched_eval_prompts(&ev.ev);
    if (rc == 0 && f->folds && (size_t)f->folds > prompts) /* a fold would hold no prompt */
        rc = cli_value_errorf(cc->cmd,
                              "--folds %lld: the trace has %zu prompt%s, so at most %zu fold%s "
                              "(each fold holds whole prompts)",
                              (long long)f->folds, prompts, prompts == 1 ? "" : "s", prompts,
                              prompts == 1 ? "" : "s");
    struct cost_move_model move;
    struct sched_costs costs;
    if (rc == 0)
        rc = cli_move_costs(&p, &cfg, &move, &costs);
    if (plan.planned) /* a batch admitted at version v trains by v + k + 1 */
        costs.decision.deadline_s = (double)(cfg.rl.max_staleness + 1) * plan.step_s;
    struct arm_setup setup = {&cfg, &l, &costs};
    if (rc == 0 && (n_arms = make_arms(f, &setup, arms)) < 0)
        rc = LIBRA_EXIT_USAGE;
    if (rc == 0 && f->placebo)
        sched_eval_shuffle(&ev.ev, (uint64_t)cfg.sim.seed);
    if (rc == 0)
        rc = open_decisions(cc, f, arms, n_arms, &decisions);
    if (rc == 0)
        rc = evaluate(arms, (size_t)n_arms, &ev.ev, f, cc->jobs, &progress);
    cli_progress_stop(line);
    rc = close_decisions(f, &decisions, rc); /* written only when the run succeeded */
    if (rc == 0) {
        char layout[SPEC_BUCKET_TEXT_MAX];
        spec_bucket_format(&l, layout, sizeof layout);
        json_t *doc = spec_config_envelope(ROUTE_EVAL_SCHEMA, &cfg);
        json_t *pol = json_object();
        for (int a = 0; a < n_arms; a++)
            json_object_set_new(pol, arms[a].name, arm_json(&arms[a]));
        json_object_set_new(doc, "trace",
                            json_pack("{s:s,s:s,s:o,s:I}", "path", path, "workload", ev.workload,
                                      "model", ev.model ? json_string(ev.model) : json_null(),
                                      "trajectories", (json_int_t)ev.ev.trajs.n));
        json_object_set_new(doc, "buckets", json_string(layout));
        json_object_set_new(doc, "train_steps", json_integer(f->folds ? 0 : f->train_steps));
        json_object_set_new(doc, "eval_steps",
                            json_integer(f->folds ? steps : steps - f->train_steps));
        json_object_set_new(doc, "folds", json_integer(f->folds));
        json_object_set_new(doc, "regret",
                            plan.planned
                                ? json_pack("{s:f,s:f,s:I,s:I}", "planned_step_s", plan.step_s,
                                            "deadline_s", costs.decision.deadline_s, "late_gpus",
                                            (json_int_t)cfg.cluster.gpus, "max_staleness",
                                            (json_int_t)cfg.rl.max_staleness)
                                : json_pack("{s:s}", "no_deadline", plan.why));
        json_object_set_new(doc, "rebuild_interval", json_integer(cfg.sched.rebuild_interval));
        json_object_set_new(doc, "min_visits", json_integer(f->min_visits));
        json_object_set_new(doc, "shrink_visits", json_integer(cfg.sched.shrink_visits));
        json_object_set_new(doc, "empirical_shrink", json_boolean(cfg.sched.empirical_shrink));
        json_object_set_new(doc, "truncated",
                            json_string(f->truncated_exact ? "exact" : "censored"));
        json_object_set_new(doc, "policies", pol);
        json_object_set_new(doc, "not_measured",
                            json_string("load- and time-dependent behaviour (load_balance's "
                                        "choices, la_mlfq's scout wait, makespan): libra sim"));
        bool within = true;
        if (f->placebo)
            json_object_set_new(doc, "placebo", placebo_json(&arms[n_arms - 3], &within));
        if (cc->json) {
            rc = cli_emit_json(cc, doc);
        } else {
            char *text = text_report(doc);
            rc = cli_write_output(cc->output, text);
            free(text);
        }
        json_decref(doc);
        if (rc == 0 && !within)
            rc = LIBRA_EXIT_NEGATIVE;
    }
    for (size_t a = 0; a < sizeof arms / sizeof arms[0]; a++) /* zeroed ones too */
        sched_eval_arm_free(&arms[a]);
    ev_trace_free(&ev);
    api_presets_free(&p);
    return rc;
}

static int parse_policy(const struct cli_command *cmd, const char *arg, struct route_flags *f)
{
    enum sched_policy one;
    f->policy = arg;
    if (strcmp(arg, "all") == 0)
        return 0;
    if (sched_policy_parse(arg, &one))
        return cli_value_errorf(cmd,
                                "--policy: unknown policy '%s' (cmlfq, load_balance, "
                                "length_aware, la_mlfq, oracle, plas, predictor, cmlfq_h, all)",
                                arg);
    f->policies = 1u << one;
    return 0;
}

static int parse_truncated(const struct cli_command *cmd, const char *arg, bool *exact)
{
    if (strcmp(arg, "censored") != 0 && strcmp(arg, "exact") != 0)
        return cli_value_errorf(cmd, "--truncated: expected censored or exact, not '%s'", arg);
    *exact = strcmp(arg, "exact") == 0;
    return 0;
}

int cmd_route(int argc, char **argv)
{
    enum {
        OPT_POLICY = 0x100,
        OPT_BUCKETS,
        OPT_TRAIN,
        OPT_VISITS,
        OPT_TRUNCATED,
        OPT_PLACEBO,
        OPT_DECISIONS,
        OPT_FOLDS,
        OPT_CONFIG
    };
    static const struct option own[] = {
        {"policy", required_argument, NULL, OPT_POLICY},
        {"buckets", required_argument, NULL, OPT_BUCKETS},
        {"train-steps", required_argument, NULL, OPT_TRAIN},
        {"min-visits", required_argument, NULL, OPT_VISITS},
        {"truncated", required_argument, NULL, OPT_TRUNCATED},
        {"placebo", no_argument, NULL, OPT_PLACEBO},
        {"decisions", required_argument, NULL, OPT_DECISIONS},
        {"folds", required_argument, NULL, OPT_FOLDS},
        {"config", required_argument, NULL, OPT_CONFIG},
        {0},
    };
    struct route_flags f = {.policy = "all",
                            .policies = (1u << SCHED_POLICY_COUNT) - 1,
                            .train_steps = 1,
                            .min_visits = 1};
    struct cli_common cc;
    cli_common_init(&cc, cli_find("route"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT |
                        CLI_FLAGS_JOBS | CLI_FLAGS_PROGRESS,
                    "", own);
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        switch (c) {
        case 'h':
            cli_common_help(&cc, help, stdout);
            cli_common_free(&cc);
            return LIBRA_EXIT_OK;
        case OPT_POLICY:
            rc = parse_policy(cc.cmd, optarg, &f);
            break;
        case OPT_BUCKETS: /* the config key, so that the digest and the key's rules cover it */
            cli_common_set(&cc, "sched.buckets", optarg, "--buckets");
            break;
        case OPT_TRAIN:
            rc = cli_parse_int(cc.cmd, "--train-steps", optarg, 0, INT32_MAX, &f.train_steps);
            f.train_steps_given = true;
            break;
        case OPT_VISITS:
            rc = cli_parse_int(cc.cmd, "--min-visits", optarg, 1, INT32_MAX, &f.min_visits);
            break;
        case OPT_TRUNCATED:
            rc = parse_truncated(cc.cmd, optarg, &f.truncated_exact);
            break;
        case OPT_PLACEBO:
            f.placebo = true;
            break;
        case OPT_DECISIONS:
            f.decisions = optarg;
            break;
        case OPT_CONFIG:
            f.config = optarg;
            break;
        case OPT_FOLDS:
            rc = cli_parse_int(cc.cmd, "--folds", optarg, 2, 1000, &f.folds);
            break;
        default:
            rc = LIBRA_EXIT_USAGE;
        }
    }
    if (rc == 0 && f.folds && f.train_steps_given)
        rc = cli_usage_error(cc.cmd, "--train-steps and --folds exclude each other (--folds "
                                     "evaluates every step, each fold trained on the others)");
    if (rc == 0 && argc - optind > 2 && strcmp(argv[optind], "eval") == 0)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 2]);
    if (rc == 0 && (argc - optind != 2 || strcmp(argv[optind], "eval") != 0))
        rc = cli_usage_error(cc.cmd, "expected 'eval TRACE'");
    if (rc == 0)
        rc = run(&cc, &f, argv[optind + 1]);
    cli_common_free(&cc);
    return rc;
}
