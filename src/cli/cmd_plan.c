/*
 * `libra plan`: the Global Resource Planner on the command line. Reads the experiment config
 * (defaults: 48 × A800, Qwen3-14B, R2E-Gym, batch 32 of 4 samples, async), draws the length
 * sample (the workload preset's generator, or a trace with --trace), plans, and prints the
 * training layout, the rollout instances and buckets, the predicted times, the node layout and
 * the search statistics — or one JSON document with --json. Exit 1 when no plan is feasible.
 *
 * The planner is pure; its time limit is a callback here that reads the monotonic clock.
 * Wall-clock figures go to stderr only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "plan/plan.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/error.h"
#include "workload/workload.h"

#define SCHEMA "libra.plan/1"

static const char help[] =
    "usage: libra plan [CONFIG] [--gpus N] [--hardware H] [--model M] [--batch B]\n"
    "                  [--samples n] [--mode colocated|async] [--time-limit-s T] [--seed S]\n"
    "                  [--trace FILE] [--homogeneous-rollout] [--json]\n"
    "\n"
    "Plans the cluster of the experiment config: how many GPUs train and with which layout\n"
    "(TP, PP, CP, DP, micro-batch budget), which rollout instances run (counts of TP 1, 2, 4,\n"
    "8, each inside one node) and the buckets C-MLFQ routes over, minimising the step time\n"
    "(docs/planner.md). The length sample is the fewest whole batches holding 256\n"
    "trajectories (at most 8) drawn from the workload preset (workload.name, seed sim.seed)\n"
    "as libra sim draws it, or every trajectory of --trace FILE (workload.trace).\n"
    "The search is exact; --time-limit-s (plan.time_limit_s) bounds it and the output then\n"
    "states the proven optimality gap. Exit 1 when no plan is feasible, naming the\n"
    "constraint; --json prints one document (schema libra.plan/1).\n"
    "\n"
    "flags:\n"
    "  --trace FILE           take the length sample from a trace (docs/trace-format.md)\n"
    "  --homogeneous-rollout  one TP size for every rollout instance\n"
    "                         (plan.homogeneous_rollout), and what a heterogeneous fleet\n"
    "                         would gain\n";

enum { OPT_TRACE = 0x100, OPT_HOMOGENEOUS };

static const struct option own_options[] = {
    {"trace", required_argument, NULL, OPT_TRACE},
    {"homogeneous-rollout", no_argument, NULL, OPT_HOMOGENEOUS},
    {0},
};

/* The command's own flags: they set config keys on top of every other layer. */
struct plan_flags {
    const char *trace;
    bool homogeneous;
};

/* The length sample and where it came from. */
struct lengths {
    size_t n, cap;
    int64_t *prompt, *gen, *tool, *turns;
    double *tool_s;     /* per trajectory: tool queue + execution, seconds */
    double tool_s_mean; /* over the sample, seconds */
    char source[SPEC_PATH_MAX + 64];
};

static void lengths_push(struct lengths *l, const struct workload_length *w)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->prompt = xreallocarray(l->prompt, l->cap, sizeof *l->prompt);
        l->gen = xreallocarray(l->gen, l->cap, sizeof *l->gen);
        l->tool = xreallocarray(l->tool, l->cap, sizeof *l->tool);
        l->turns = xreallocarray(l->turns, l->cap, sizeof *l->turns);
        l->tool_s = xreallocarray(l->tool_s, l->cap, sizeof *l->tool_s);
    }
    l->prompt[l->n] = w->prompt_tokens;
    l->gen[l->n] = w->generated_tokens;
    l->tool[l->n] = w->tool_tokens;
    l->turns[l->n] = w->turns;
    l->tool_s[l->n++] = w->tool_s;
    l->tool_s_mean += (w->tool_s - l->tool_s_mean) / (double)l->n;
}

static void lengths_free(struct lengths *l)
{
    free(l->prompt);
    free(l->gen);
    free(l->tool);
    free(l->turns);
    free(l->tool_s);
}

static int lengths_from_workload(const struct cli_presets *p, const struct libra_config *cfg,
                                 struct lengths *l)
{
    const struct workload_preset *w = workload_preset_find(&p->workloads, cfg->workload.name);
    if (!w) {
        cli_errorf("plan: unknown workload preset '%s'", cfg->workload.name);
        return LIBRA_EXIT_USAGE;
    }
    size_t n = workload_sample_size((size_t)cfg->rl.batch_trajectories);
    struct workload_length *wl = xmallocarray(n, sizeof *wl);
    workload_lengths(w, (uint64_t)cfg->sim.seed, (size_t)cfg->rl.batch_trajectories,
                     (size_t)cfg->rl.samples, n, wl);
    for (size_t i = 0; i < n; i++)
        lengths_push(l, &wl[i]);
    free(wl);
    snprintf(l->source, sizeof l->source, "workload %s, seed %lld", w->name,
             (long long)cfg->sim.seed);
    return 0;
}

static int lengths_from_trace(const char *path, struct lengths *l)
{
    struct trace_reader *r;
    struct libra_error err = {0};
    const struct trace_header *hdr;
    const struct trace_traj *t;
    int rc = trace_reader_open(&r, path, &err);
    if (rc == 0)
        rc = trace_reader_header(r, &hdr, &err);
    while (rc == 0 && (rc = trace_reader_next(r, &t, &err)) == 1) {
        struct workload_length w;
        workload_traj_length(t, &w);
        lengths_push(l, &w);
        rc = 0;
    }
    trace_reader_close(r);
    if (rc < 0) {
        char buf[1024];
        cli_errorf("plan: %s", error_format(&err, buf, sizeof buf));
        return rc == LIBRA_EIO ? LIBRA_EXIT_IO : LIBRA_EXIT_USAGE;
    }
    snprintf(l->source, sizeof l->source, "trace %s", path);
    return 0;
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

/* ---- human output --------------------------------------------------------------------------- */

static void print_counts(FILE *out, const int counts[PLAN_NTP])
{
    const char *sep = "";
    for (int t = 0; t < PLAN_NTP; t++)
        if (counts[t]) {
            fprintf(out, "%s%d×TP%d", sep, counts[t], 1 << t);
            sep = " + ";
        }
}

static void print_train(FILE *out, const struct plan_result *r)
{
    const struct cost_train_step *s = &r->train_step;
    fprintf(out,
            "  training  %4d GPUs  TP%d PP%d CP%d DP%d, micro-batch %d tokens per GPU%s\n"
            "            T_train %.2f s (compute %.2f, pipeline bubble %.2f, TP %.2f, CP %.2f, "
            "DP %.2f, optimizer %.2f, micro-batches %.2f; imbalance %.2f)\n"
            "            memory %.1f of %.1f GB per GPU\n",
            r->n_train, r->train.tp, r->train.pp, r->train.cp, r->train.dp, r->train.budget_tokens,
            r->train.recompute ? ", full activation recompute" : "", r->train_s, s->compute_s,
            s->pp_bubble_s, s->tp_comm_s, s->cp_comm_s, s->dp_comm_s, s->optimizer_s,
            s->microbatch_s, s->imbalance, r->train_mem.total_bytes / 1e9,
            r->train_mem.capacity_bytes / 1e9);
}

static void print_rollout(FILE *out, const struct plan_result *r)
{
    fprintf(out, "  rollout   %4d GPUs  ", r->n_rollout);
    print_counts(out, r->counts);
    fprintf(out, " (%d instances)\n", r->instances);
    if (r->colocated)
        fprintf(out, "            T_rollout %.2f s (one batch), switch %.2f s\n", r->rollout_s,
                r->switch_s);
    else
        fprintf(out,
                "            T_rollout %.2f s (B / R_eff), %.3f trajectories/s at the "
                "concurrency limit, %.1f %% predicted stale\n",
                r->rollout_s, r->rate_traj_per_s, 100.0 * r->f_stale);
    char text[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&r->layout, text, sizeof text);
    fprintf(out, "  buckets   %s\n", text);
    fprintf(out,
            "  one batch %.2f s banded (the router's assignment), %.2f s greedy longest-first "
            "(the reference's estimate)\n",
            r->banded_batch_s, r->greedy_batch_s);
    fprintf(out,
            "\nbands of the sample sorted by generated tokens\n"
            "  %4s %9s %15s %12s %12s\n",
            "TP", "instances", "ranks", "max tokens", "load s");
    for (int i = 0; i < r->n_bands; i++) {
        const struct plan_band *b = &r->band[i];
        char ranks[32];
        snprintf(ranks, sizeof ranks, "%zu..%zu", b->first, b->last);
        fprintf(out, "  %4d %9d %15s %12lld %12.2f\n", b->tp, b->instances, ranks,
                (long long)b->max_generated, b->load_s);
    }
}

/* One node per line: runs of GPUs with the same role, e.g. "0-3 train dp0, 4 TP1 #2". */
static void print_nodes(FILE *out, const struct plan_result *r)
{
    fprintf(out, "\nnodes (GPU: role)\n");
    for (int g = 0; g < r->gpus;) {
        const struct plan_gpu *u = &r->gpu[g];
        if (u->local == 0)
            fprintf(out, "  node %d:", u->node);
        int end = g + 1;
        if (u->instance >= 0)
            end = g + u->instance_tp;
        else
            while (end < r->gpus && r->gpu[end].node == u->node && r->gpu[end].instance < 0 &&
                   r->gpu[end].role == u->role && r->gpu[end].dp_rank == u->dp_rank &&
                   r->gpu[end].cp_rank == u->cp_rank && r->gpu[end].pp_rank == u->pp_rank)
                end++;
        fprintf(out, " %d", u->local);
        if (end - g > 1)
            fprintf(out, "-%d", r->gpu[end - 1].local);
        if (u->instance >= 0)
            fprintf(out, " TP%d#%d%s", u->instance_tp, u->instance, r->colocated ? "+train" : "");
        else
            fprintf(out, " train dp%d cp%d pp%d", u->dp_rank, u->cp_rank, u->pp_rank);
        g = end;
        fputs(g == r->gpus || r->gpu[g].local == 0 ? "\n" : ",", out);
    }
}

static void print_stats(FILE *out, const struct plan_result *r)
{
    const struct plan_stats *s = &r->stats;
    fprintf(out,
            "\nsearch space: %.6g (training layout, rollout multiset) pairs over %.0f splits "
            "(%.6g layouts, %.6g multisets)\n"
            "  scored %.0f layouts and %.0f multisets; pruned %.6g layouts and %.6g multisets "
            "by bounds and constraints\n",
            s->space, s->splits, s->train_space, s->rollout_space, s->train_scored,
            s->rollout_scored, s->train_pruned, s->rollout_pruned);
    if (r->feasible)
        fprintf(out, "  optimality gap %.4g %%%s\n", 100.0 * s->gap,
                s->stopped     ? " (stopped by plan.time_limit_s)"
                : s->gap > 0.0 ? " (at most; plan.gap_tolerance)"
                               : " (proven optimal)");
}

static char *text_output(const struct libra_config *cfg, const struct lengths *l,
                         const struct plan_result *r, const struct plan_result *het)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort();
    fprintf(out, "%d × %s (%d per node), %s, %s, batch %d (%d per prompt), staleness %d\n",
            cfg->cluster.gpus, cfg->cluster.hardware, cfg->cluster.gpus_per_node, cfg->model.name,
            r->colocated ? "colocated" : "async", cfg->rl.batch_trajectories, cfg->rl.samples,
            cfg->rl.max_staleness);
    fprintf(out,
            "length sample: %s, %zu trajectories (%d batches), %.1f s of tool time per "
            "trajectory on average\n\n",
            l->source, r->sample_n, r->batches, l->tool_s_mean);
    if (!r->feasible) {
        fprintf(out, "no feasible plan: %s\n", plan_why_text(r->why));
    } else {
        fprintf(out, "step time %.2f s (%s)\n", r->step_s,
                r->colocated     ? "rollout + training + switch"
                : r->train_bound ? "training-bound"
                                 : "rollout-bound");
        print_train(out, r);
        print_rollout(out, r);
        if (het && het->feasible)
            fprintf(out,
                    "\nplan.homogeneous_rollout: a heterogeneous fleet would take %.2f s per "
                    "step (%.1f %% less)\n",
                    het->step_s, 100.0 * (r->step_s - het->step_s) / r->step_s);
        print_nodes(out, r);
    }
    print_stats(out, r);
    fclose(out);
    return text;
}

static json_t *json_output(const struct libra_config *cfg, const struct lengths *l,
                           const struct plan_result *r, const struct plan_result *het)
{
    json_t *doc = spec_config_envelope(SCHEMA, cfg);
    json_object_update_new(doc, plan_result_to_json(r));
    json_t *sample = json_object_get(doc, "sample");
    json_object_set_new(sample, "source", json_string(l->source));
    json_object_set_new(sample, "tool_s_mean", json_real(l->tool_s_mean));
    if (het && het->feasible && r->feasible)
        json_object_set_new(doc, "heterogeneous",
                            json_pack("{s:f, s:f}", "step_s", het->step_s, "gain",
                                      (r->step_s - het->step_s) / r->step_s));
    return doc;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* Solves cfg; prints why and returns an exit code on bad input. */
static int solve(const struct libra_config *cfg, const struct cli_presets *p,
                 const struct plan_settings *st, const struct lengths *l, struct plan_result *r)
{
    double deadline = now_s() + cfg->plan.time_limit_s, start = now_s();
    struct plan_problem prob = {
        .cfg = cfg,
        .hw = spec_hardware_find(&p->spec, cfg->cluster.hardware),
        .model = spec_model_find(&p->spec, cfg->model.name),
        .settings = st,
        .sample = {l->n, l->prompt, l->gen, l->tool, l->turns},
        .tool_s = l->tool_s,
        .should_stop = past_deadline,
        .stop_arg = &deadline,
    };
    struct libra_error err = {0};
    if (plan_solve(&prob, r, &err) != 0) {
        char buf[1024];
        cli_errorf("plan: %s", error_format(&err, buf, sizeof buf));
        return LIBRA_EXIT_USAGE;
    }
    fprintf(stderr, "libra: plan: searched in %.1f ms\n", 1e3 * (now_s() - start));
    return 0;
}

static int run(const struct cli_common *cc, const struct plan_flags *f, const char *input)
{
    struct cli_presets p = {0};
    struct libra_config cfg;
    struct lengths l = {0};
    struct plan_result r = {0}, het = {0};
    int rc = cli_common_load(cc, input, &p, &cfg);
    if (rc == 0 && f->trace)
        snprintf(cfg.workload.trace, sizeof cfg.workload.trace, "%s", f->trace);
    if (rc == 0 && f->homogeneous)
        cfg.plan.homogeneous_rollout = true;
    if (rc == 0)
        rc = cfg.workload.trace[0] ? lengths_from_trace(cfg.workload.trace, &l)
                                   : lengths_from_workload(&p, &cfg, &l);
    struct plan_settings st;
    if (rc == 0) {
        plan_settings_from_config(&st, spec_hardware_find(&p.spec, cfg.cluster.hardware), &cfg);
        rc = solve(&cfg, &p, &st, &l, &r);
    }
    if (rc == 0 && r.feasible && cfg.plan.homogeneous_rollout) {
        struct libra_config free_cfg = cfg;
        free_cfg.plan.homogeneous_rollout = false;
        rc = solve(&free_cfg, &p, &st, &l, &het);
    }
    if (rc == 0) {
        if (cc->json) {
            json_t *doc = json_output(&cfg, &l, &r, &het);
            rc = cli_emit_json(cc, doc);
            json_decref(doc);
        } else {
            char *text = text_output(&cfg, &l, &r, &het);
            rc = cli_write_output(cc->output, text);
            free(text);
        }
    }
    if (rc == 0 && !r.feasible) {
        cli_errorf("plan: no feasible plan: %s", plan_why_text(r.why));
        rc = LIBRA_EXIT_NEGATIVE;
    }
    plan_result_free(&r);
    plan_result_free(&het);
    lengths_free(&l);
    cli_presets_free(&p);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("plan"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT, "",
                    own_options);
    struct plan_flags f = {0};
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            cli_common_free(&cc);
            return 0;
        }
        if (c == OPT_TRACE)
            f.trace = optarg;
        else if (c == OPT_HOMOGENEOUS)
            f.homogeneous = true;
        else
            rc = LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 1]);
    if (rc == 0)
        rc = run(&cc, &f, optind < argc ? argv[optind] : NULL);
    cli_common_free(&cc);
    return rc;
}
