/*
 * `libra plan`: the Global Resource Planner on the command line. Reads the experiment config
 * (defaults: 48 × A800, Qwen3-14B, R2E-Gym, batch 32 of 4 samples, async), draws the length
 * sample libra sim's libra mode plans on (the workload preset's generator, or a trace with
 * --trace), plans, verifies the planner's best candidates by a short simulation
 * (plan.verify_candidates, async), and prints the chosen plan's training layout, rollout
 * instances and buckets, predicted times, node layout, the verification's candidates and the
 * search statistics — or one JSON document with --json. Exit 1 when no plan is feasible; 2 when
 * every candidate failed to simulate, some for a setting (api_plan_run's error).
 *
 * Planning itself is api/plan.h's, which libra_plan() shares; this file adds the flags, the
 * text output and the wall-clock figures, which go to stderr only.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/plan.h"
#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "plan/export.h"
#include "util/alloc.h"
#include "util/error.h"

static const char help[] =
    "usage: libra plan [CONFIG] [--gpus N] [--hardware H] [--model M] [--batch B]\n"
    "                  [--samples n] [--mode colocated|async] [--time-limit-s T] [--seed S]\n"
    "                  [--trace FILE] [--homogeneous-rollout] [--verify K] [--verify-steps N]\n"
    "                  [--jobs J] [--progress] [--json | --export FORMAT] [-o FILE]\n"
    "\n"
    "Plans the cluster of the experiment config: how many GPUs train and with which layout\n"
    "(TP, PP, CP, DP, micro-batch budget, activation recompute, FSDP or Megatron's\n"
    "distributed optimizer, an MoE model's expert parallelism), which rollout instances\n"
    "run (counts of TP 1, 2, 4, 8, each inside one node) and the buckets C-MLFQ routes\n"
    "over, minimising the step time\n"
    "(docs/planner.md). The length sample is the one libra sim's libra mode plans on: the\n"
    "fewest whole batches holding 256 trajectories (at most 8) at evenly spaced steps of the\n"
    "run, from the workload preset (workload.name, seed plan.sample_seed or sim.seed) or\n"
    "spread over --trace FILE (workload.trace). The search is exact for its analytic step\n"
    "unless --time-limit-s (plan.time_limit_s) or plan.max_scored (20000 scored rollout\n"
    "multisets; 0: no limit) stops it (the search alone); the output then states the proven\n"
    "optimality gap.\n"
    "An async plan is then verified: the K best of the planner's candidates by analytic step\n"
    "(its optimum, its best heterogeneous and single-TP fleets at and near the optimum's split)\n"
    "run N steps of libra sim on another seed; the fastest is the plan, unless others come\n"
    "within 5 % of it: those run again on a second seed, and the best mean of the two is the\n"
    "plan; a failed candidate's cause is printed under the table. Exit 1 when no plan is\n"
    "feasible, naming the constraint; 2 when every candidate failed to simulate, some for a\n"
    "setting, naming it; --json prints one document (schema libra.plan/1).\n"
    "\n"
    "flags:\n"
    "  --trace FILE           take the length sample from a trace (docs/trace-format.md)\n"
    "  --homogeneous-rollout  one TP size for every rollout instance\n"
    "                         (plan.homogeneous_rollout), and what a heterogeneous fleet\n"
    "                         would gain\n"
    "  --verify K             simulate the K best candidates (plan.verify_candidates;\n"
    "                         0: the analytic optimum, unverified)\n"
    "  --verify-steps N       steps each candidate runs (plan.verify_steps)\n"
    "  --export FORMAT        write the plan as a launcher runs it (docs/export.md): sglang or\n"
    "                         vllm (a sh script: each node's engines, then libra serve), slurm\n"
    "                         (an sbatch script), ray (placement groups, JSON), k8s (YAML),\n"
    "                         verl (Hydra overrides) or megatron (Megatron-LM arguments)\n";

enum { OPT_TRACE = 0x100, OPT_HOMOGENEOUS, OPT_VERIFY, OPT_VERIFY_STEPS, OPT_EXPORT };

static const struct option own_options[] = {
    {"trace", required_argument, NULL, OPT_TRACE},
    {"homogeneous-rollout", no_argument, NULL, OPT_HOMOGENEOUS},
    {"verify", required_argument, NULL, OPT_VERIFY},
    {"verify-steps", required_argument, NULL, OPT_VERIFY_STEPS},
    {"export", required_argument, NULL, OPT_EXPORT},
    {0},
};

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
    char sharding[48] = "distributed optimizer";
    if (r->train.shard_dp)
        snprintf(sharding, sizeof sharding, "HSDP (ZeRO-3 within %d ranks)", r->train.shard_dp);
    else if (r->train.fsdp)
        snprintf(sharding, sizeof sharding, "FSDP (ZeRO-3)");
    /* The terms of layouts that have them (the rest are 0), so that the parts add up to
     * T_train: pipeline sends, the experts' all-to-all, the sharded weights' gathers. */
    char ep[48] = "", pp_s[32] = "", ep_s[32] = "", zero3_s[32] = "";
    if (r->train.pp > 1)
        snprintf(pp_s, sizeof pp_s, ", pipeline sends %.2f", s->pp_p2p_s);
    if (r->train.ep > 1) {
        snprintf(ep, sizeof ep, ", experts over EP %d", r->train.ep);
        snprintf(ep_s, sizeof ep_s, ", EP all-to-all %.2f", s->ep_comm_s);
    }
    if (r->train.fsdp || r->train.shard_dp)
        snprintf(zero3_s, sizeof zero3_s, ", ZeRO-3 gathers %.2f", s->zero3_gather_s);
    fprintf(out,
            "  training  %4d GPUs  TP%d PP%d CP%d DP%d, micro-batch %d tokens per GPU, %s%s, %s\n"
            "            T_train %.2f s (compute %.2f, pipeline bubble %.2f%s, TP %.2f, CP %.2f%s, "
            "DP %.2f%s, optimizer %.2f, micro-batches %.2f; imbalance %.2f)\n"
            "            memory %.1f of %.1f GB per GPU\n",
            r->n_train, r->train.tp, r->train.pp, r->train.cp, r->train.dp, r->train.budget_tokens,
            sharding, ep,
            r->train.recompute ? "full activation recompute" : "no activation recompute",
            r->train_s, s->compute_s, s->pp_bubble_s, pp_s, s->tp_comm_s, s->cp_comm_s, ep_s,
            s->dp_comm_s, zero3_s, s->optimizer_s, s->microbatch_s, s->imbalance,
            r->train_mem.total_bytes / 1e9, r->train_mem.capacity_bytes / 1e9);
}

/* The async step's terms (docs/planner.md §2.4). */
static void print_async(FILE *out, const struct plan_result *r)
{
    const struct plan_async_parts *a = &r->async;
    fprintf(out,
            "  terms     train side %.2f s (T_train + %.2f s of weight updates); fixed point "
            "%.2f s\n"
            "            fleet %.2f s (work %.2f s at the concurrency limit, Little %.2f s, and "
            "the update every %d steps); tool pool %.2f s\n"
            "            span %.2f s (an admission of %d batches through the trainer, and the "
            "update, over a window of %d steps; its slowest trajectory %.2f s)\n"
            "            update %.2f s (save and transfer %.2f, drain %.2f, re-prefill %.2f)\n",
            r->train_s + a->update_train_s, a->update_train_s, a->fixed_point_s, a->fleet_s,
            a->work_s, a->little_s, a->interval, a->pool_s, a->span_s, a->interval, a->window,
            a->tail_s, a->update_s, a->update_s - a->drain_s - a->reprefill_s, a->drain_s,
            a->reprefill_s);
}

static void print_rollout(FILE *out, const struct plan_result *r)
{
    fprintf(out, "  rollout   %4d GPUs  ", r->n_rollout);
    print_counts(out, r->counts);
    fprintf(out, " (%d instances)\n", r->instances);
    if (r->colocated)
        fprintf(out, "            T_rollout %.2f s per step, switch %.2f s\n", r->rollout_s,
                r->switch_s);
    else
        fprintf(out,
                "            rollout side %.2f s per step, %.3f trajectories/s at the "
                "concurrency limit, %.1f %% of the sample predicted stale at the step time\n",
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

/* A count into buf: every digit while a double holds it exactly (below 2^53), else 6 of them. */
static const char *count_text(double n, char buf[32])
{
    snprintf(buf, 32, n < 9007199254740992.0 ? "%.0f" : "%.6g", n);
    return buf;
}

static void print_stats(FILE *out, const struct plan_result *r)
{
    const struct plan_stats *s = &r->stats;
    char c[8][32];
    fprintf(out,
            "\nanalytic search: %s (training layout, rollout multiset) pairs over %s splits "
            "(%s layouts, %s multisets)\n"
            "  scored %s layouts and %s multisets; %s %s layouts and %s multisets %s\n",
            count_text(s->space, c[0]), count_text(s->splits, c[1]),
            count_text(s->train_space, c[2]), count_text(s->rollout_space, c[3]),
            count_text(s->train_scored, c[4]), count_text(s->rollout_scored, c[5]),
            s->stopped ? "left" : "pruned", count_text(s->train_pruned, c[6]),
            count_text(s->rollout_pruned, c[7]),
            s->stopped ? "unscored (pruned by bounds and constraints, or not reached before the "
                         "search stopped)"
                       : "by bounds and constraints");
    if (r->feasible)
        fprintf(out, "  optimality gap %.4g %% of the analytic step%s\n", 100.0 * s->gap,
                s->stopped_by_count ? " (stopped by plan.max_scored)"
                : s->stopped        ? " (stopped by plan.time_limit_s)"
                : s->gap > 0.0      ? " (at most; plan.gap_tolerance)"
                                    : " (proven optimal)");
}

/* A figure, or "failed [k]" for a run that failed of the k-th cause (cause 0: none kept, as on
 * the second seed). */
static void figure_text(double tokens_per_s, int cause, char *out, size_t size)
{
    if (!isnan(tokens_per_s))
        snprintf(out, size, "%.1f", tokens_per_s);
    else if (cause)
        snprintf(out, size, "failed [%d]", cause);
    else
        snprintf(out, size, "failed");
}

/* The distinct causes of the failed candidates, in rank order, into cause[]; the 1-based number
 * of each candidate's into number[] (0: it ran). Returns how many. */
static int failure_causes(const struct sim_mode_result *v, const char **cause, int *number)
{
    int n = 0;
    for (int i = 0; i < v->n_verified; i++) {
        const struct sim_verified *c = &v->verified[i];
        number[i] = 0;
        if (!isnan(c->tokens_per_s))
            continue;
        int k = 0;
        while (k < n && strcmp(cause[k], c->error) != 0)
            k++;
        if (k == n)
            cause[n++] = c->error;
        number[i] = k + 1;
    }
    return n;
}

/* The width of the candidate column: the longest origin's (the pool's ", no pool" lengthens
 * them). */
static int origin_width(const struct sim_mode_result *v)
{
    int width = (int)strlen("candidate");
    for (int i = 0; i < v->n_verified; i++) {
        int len = (int)strlen(v->verified[i].origin);
        width = len > width ? len : width;
    }
    return width;
}

/* A fleet's kind from its text ("tp8x3", "tp4x4,tp8x1"): its one TP size, or 0 when mixed. */
static int fleet_kind(const char *instances)
{
    return strchr(instances, ',') ? 0 : (int)strtol(instances + 2, NULL, 10);
}

/* The header names what was simulated: the kinds of fleet and the colocated plans the
 * candidates hold, not every kind the verification proposes (plan.min_tp_sizes, for one,
 * leaves single TP sizes and colocated plans out). */
static void print_verify_header(FILE *out, const struct sim_mode_result *v, int width)
{
    int colocated = 0;
    bool kind[PLAN_NTP + 1] = {false}; /* [t]: every instance TP 2^t; [PLAN_NTP]: mixed */
    for (int i = 0; i < v->n_verified; i++) {
        int tp = fleet_kind(v->verified[i].instances);
        if (v->verified[i].colocated)
            colocated++;
        else
            kind[tp ? __builtin_ctz((unsigned)tp) : PLAN_NTP] = true;
    }
    fprintf(out,
            "\nverification: %d candidates (the best by analytic step; the best fleet of each "
            "kind simulated:",
            v->n_verified);
    const char *sep = " ";
    for (int t = 0; t <= PLAN_NTP; t++)
        if (kind[t]) {
            if (t < PLAN_NTP)
                fprintf(out, "%sall TP%d", sep, 1 << t);
            else
                fprintf(out, "%smixed TP", sep);
            sep = ", ";
        }
    if (colocated)
        fprintf(out, "; %d colocated plan%s", colocated, colocated == 1 ? "" : "s");
    else
        fprintf(out, "; no colocated plan");
    fprintf(out,
            "; and the splits a search around the fastest added), each simulated for %d steps on "
            "seed %lld; those within 5 %% of the fastest again on seed %lld, and the best mean "
            "wins\n  %-*s %6s %-28s %12s %14s %14s\n",
            v->verify_steps, (long long)v->verify_seed, (long long)v->race_seed, width, "candidate",
            "train", "instances", "predicted s", "sim tokens/s", "2nd seed");
}

/* The fastest candidate on the first seed (ties: the better analytic rank, as sim_verify's). */
static const struct sim_verified *first_seed_fastest(const struct sim_mode_result *v)
{
    const struct sim_verified *best = NULL;
    for (int i = 0; i < v->n_verified; i++) {
        const struct sim_verified *c = &v->verified[i];
        if (!isnan(c->tokens_per_s) && (!best || c->tokens_per_s > best->tokens_per_s))
            best = c;
    }
    return best;
}

/* On what the chosen candidate won: the first seed alone when no other came within 5 % of it,
 * else the mean of both seeds among those that did (which the first seed's fastest may lose). */
static void print_won_on(FILE *out, const struct sim_mode_result *v,
                         const struct sim_verified *chosen)
{
    const struct sim_verified *first = first_seed_fastest(v);
    int raced = 0;
    for (int i = 0; i < v->n_verified; i++)
        raced += v->verified[i].raced;
    if (!chosen->raced)
        fprintf(out, "the fastest in simulation, with no other candidate within 5 %% of it");
    else if (isnan(chosen->second_tokens_per_s)) /* it wins so only when every such run failed */
        fprintf(out, "the fastest on the first seed (every run on the second failed)");
    else {
        fprintf(out,
                "the best mean of the two seeds among the %d candidates within 5 %% of the "
                "fastest on the first seed",
                raced);
        if (first == chosen)
            fprintf(out, ", and the fastest on the first seed too");
        else
            fprintf(out, "; %s was fastest on the first seed alone", first->origin);
    }
}

/* What the chosen candidate gained over the analytic optimum, on the figures both have. */
static void print_gain(FILE *out, const struct sim_verified *chosen, const struct sim_verified *opt)
{
    if (isnan(opt->tokens_per_s)) {
        fprintf(out, "; the analytic optimum failed to simulate");
        return;
    }
    bool both = chosen->raced && opt->raced && !isnan(chosen->second_tokens_per_s) &&
                !isnan(opt->second_tokens_per_s);
    double a = chosen->tokens_per_s + (both ? chosen->second_tokens_per_s : 0),
           b = opt->tokens_per_s + (both ? opt->second_tokens_per_s : 0);
    fprintf(out, "; %.1f %% more trained tokens/s than the analytic optimum %s",
            100.0 * (a / b - 1.0), both ? "on the mean of both seeds" : "on the first seed");
}

static void print_verification(FILE *out, const struct api_planned *pl)
{
    const struct sim_mode_result *v = &pl->verification;
    if (!v->n_verified) {
        fprintf(out, "\nverification: none (%s)\n", pl->unverified_why);
        return;
    }
    int width = origin_width(v);
    print_verify_header(out, v, width);
    const char **cause = xcalloc((size_t)v->n_verified, sizeof *cause);
    int *number = xcalloc((size_t)v->n_verified, sizeof *number);
    int n_causes = failure_causes(v, cause, number);
    const struct sim_verified *chosen = NULL, *opt = NULL;
    for (int i = 0; i < v->n_verified; i++) {
        const struct sim_verified *c = &v->verified[i];
        if (!opt && c->split == 0 && c->tp == 0) /* the first: its twin without the pool follows */
            opt = c;
        char sim[32], second[32];
        figure_text(c->tokens_per_s, number[i], sim, sizeof sim);
        if (c->raced)
            figure_text(c->second_tokens_per_s, 0, second, sizeof second);
        else
            snprintf(second, sizeof second, "-");
        fprintf(out, "%s %-*s %6d %-28s %12.2f %14s %14s\n", c->chosen ? "*" : " ", width,
                c->origin, c->n_train, c->instances, c->pred_step_s, sim, second);
        if (c->chosen)
            chosen = c;
    }
    for (int k = 0; k < n_causes; k++)
        fprintf(out, "  [%d] %s\n", k + 1, cause[k]);
    free(number);
    free(cause);
    if (chosen && isnan(chosen->tokens_per_s)) {
        fprintf(out, "every candidate failed to simulate (the causes above); the plan is "
                     "the analytic optimum\n");
    } else if (chosen) {
        fprintf(out, "the plan: %s, ", chosen == opt ? "the analytic optimum" : chosen->origin);
        print_won_on(out, v, chosen);
        if (opt && chosen != opt)
            print_gain(out, chosen, opt);
        fputc('\n', out);
    }
}

static char *text_output(const struct libra_config *cfg, const struct api_planned *pl)
{
    const struct plan_result *r = &pl->plan, *het = &pl->het;
    const struct plan_result *searched = pl->analytic.gpus ? &pl->analytic : r;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort();
    fprintf(out, "%d × %s (%d per node), %s, %s, batch %d (%d per prompt)", cfg->cluster.gpus,
            cfg->cluster.hardware, cfg->cluster.gpus_per_node, cfg->model.name,
            r->colocated ? "colocated" : "async", cfg->rl.batch_trajectories, cfg->rl.samples);
    if (!r->colocated) /* a colocated step trains on the rollouts it made */
        fprintf(out, ", staleness %d", cfg->rl.max_staleness);
    fputc('\n', out);
    fprintf(out,
            "length sample: %s, %zu trajectories (%d batches), %.1f s of tool time per "
            "trajectory on average\n",
            pl->source, r->sample_n, r->batches, r->tool_s_mean);
    if (cfg->rl.dynamic_sampling != SPEC_DS_OFF)
        fprintf(out,
                "dynamic sampling %s: %.1f %% of the sample's groups kept; %.2f generation "
                "rounds per step expected when colocated\n",
                spec_dynamic_sampling_names[cfg->rl.dynamic_sampling], 100.0 * r->kept_share,
                r->gen_rounds);
    if (cfg->rl.trajectory_timeout_s > 0)
        fprintf(out,
                "trajectory timeout %.0f s: the verification's simulations stop trajectories at "
                "it, the predicted steps do not (docs/planner.md §6)\n",
                cfg->rl.trajectory_timeout_s);
    fputc('\n', out);
    if (!r->feasible) {
        fprintf(out, "no feasible plan: %s\n", plan_why_text(r->why));
    } else {
        if (r->colocated) {
            fprintf(out, "step time %.2f s predicted (rollout + training + switch)\n", r->step_s);
        } else {
            fprintf(out, "step time %.2f s predicted, bound by the %s\n", r->step_s,
                    plan_async_bound(r));
            print_async(out, r);
        }
        print_train(out, r);
        print_rollout(out, r);
        if (het->feasible)
            fprintf(out,
                    "\nplan.homogeneous_rollout: a heterogeneous fleet would take %.2f s per "
                    "step analytically, %.1f %% less than the homogeneous optimum's %.2f s\n",
                    het->step_s, 100.0 * (searched->step_s - het->step_s) / searched->step_s,
                    searched->step_s);
        print_verification(out, pl);
        print_nodes(out, r);
    }
    print_stats(out, searched);
    fclose(out);
    return text;
}

/* --export: the format and the command line its header names. */
struct export_opt {
    bool on;
    enum plan_export_format format;
    int argc;
    char **argv;
};

/* The command line less --jobs and --progress into words (argc of them at most): they change
 * nothing written, and the same plan exports the same bytes. Returns how many are kept. */
static int written_words(const struct export_opt *ex, char **words)
{
    int n = 0;
    for (int i = 0; i < ex->argc; i++) {
        const char *w = ex->argv[i];
        if (strcmp(w, "--jobs") == 0 && i + 1 < ex->argc)
            i++; /* and its value */
        else if (strcmp(w, "--progress") != 0 && strncmp(w, "--jobs=", 7) != 0)
            words[n++] = ex->argv[i];
    }
    return n;
}

static int export_output(const struct cli_common *cc, const struct sim_input *si,
                         const struct plan_result *r, const struct export_opt *ex)
{
    char **words = xcalloc((size_t)ex->argc + 1, sizeof *words);
    struct plan_export_input in = {.plan = r,
                                   .cfg = si->cfg,
                                   .model = si->model,
                                   .argc = written_words(ex, words),
                                   .argv = words};
    struct libra_error err = {0};
    char *text = NULL;
    int rc = plan_export(ex->format, &in, &text, &err);
    free(words);
    if (rc != 0) {
        cli_errorf("plan: --export %s: %s", plan_export_format_name(ex->format), err.msg);
        return rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL : LIBRA_EXIT_USAGE;
    }
    rc = cli_write_output(cc->output, text);
    free(text);
    return rc;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* The verification's steps simulated of those planned so far (none while the search runs: the
 * line then says how long it has been searching). */
static void read_progress(void *ctx, struct cli_progress_state *out)
{
    const struct sim_progress *counts = ctx;
    out->unit = "steps simulated";
    out->done = atomic_load(&counts->steps_done);
    out->total = atomic_load(&counts->steps_planned);
}

/* Plans in, with the wall-clock figures (and the progress line) on stderr. Returns 0 or an exit
 * code after saying why. */
static int plan(const struct cli_common *cc, const struct sim_input *in, struct api_planned *pl)
{
    struct libra_error err = {0};
    struct sim_progress counts = {0};
    struct sim_input counted = *in;
    counted.progress = &counts;
    struct cli_progress *line = cli_progress_start("plan", read_progress, &counts, cc->progress);
    int rc = api_plan_run(&counted, cc->jobs, pl, &err);
    cli_progress_stop(line);
    if (rc) {
        char buf[1024];
        cli_errorf("plan: %s", error_format(&err, buf, sizeof buf));
        return rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL : LIBRA_EXIT_USAGE;
    }
    fprintf(stderr, "libra: plan: searched in %.1f ms\n", pl->search_ms);
    if (pl->verification.n_verified)
        fprintf(stderr, "libra: plan: verified in %.1f ms\n", pl->verify_ms);
    return 0;
}

static int run(const struct cli_common *cc, const char *input, const struct export_opt *ex)
{
    struct api_presets p = {0};
    struct libra_config cfg;
    struct api_traces ts = {0};
    struct sim_input in;
    struct api_planned pl = {0};
    int rc = cli_common_load(cc, input, &p, &cfg);
    if (rc == 0) /* -o (an export's script, most often) is refused before the search, not after */
        rc = cli_check_output(cc->output);
    if (rc == 0)
        rc = cli_sim_input(&p, &ts, &cfg, false, &in);
    if (rc == 0)
        rc = plan(cc, &in, &pl);
    if (rc == 0) {
        if (ex->on) {
            if (pl.plan.feasible) /* else nothing to export: the error below says why */
                rc = export_output(cc, &in, &pl.plan, ex);
        } else if (cc->json) {
            json_t *doc = api_plan_json(&cfg, &pl);
            rc = cli_emit_json(cc, doc);
            json_decref(doc);
        } else {
            char *text = text_output(&cfg, &pl);
            rc = cli_write_output(cc->output, text);
            free(text);
        }
    }
    if (rc == 0 && !pl.plan.feasible) {
        cli_errorf("plan: no feasible plan: %s", plan_why_text(pl.plan.why));
        rc = LIBRA_EXIT_NEGATIVE;
    }
    api_planned_free(&pl);
    api_traces_free(&ts);
    api_presets_free(&p);
    return rc;
}

int cmd_plan(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("plan"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT |
                        CLI_FLAGS_JOBS | CLI_FLAGS_PROGRESS,
                    "", own_options);
    int c, rc = 0;
    bool homogeneous = false;
    struct export_opt ex = {.argc = argc, .argv = argv};
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            cli_common_free(&cc);
            return 0;
        }
        if (c == OPT_TRACE)
            cli_common_set(&cc, "workload.trace", optarg, "--trace");
        else if (c == OPT_HOMOGENEOUS) {
            if (!homogeneous) /* a flag without a value may be repeated */
                cli_common_set(&cc, "plan.homogeneous_rollout", "true", "--homogeneous-rollout");
            homogeneous = true;
        } else if (c == OPT_VERIFY)
            cli_common_set(&cc, "plan.verify_candidates", optarg, "--verify");
        else if (c == OPT_VERIFY_STEPS)
            cli_common_set(&cc, "plan.verify_steps", optarg, "--verify-steps");
        else if (c == OPT_EXPORT && plan_export_format_parse(optarg, &ex.format) != 0)
            rc = cli_value_errorf(cc.cmd, "--export: unknown format '%s' (one of %s)", optarg,
                                  PLAN_EXPORT_FORMAT_LIST);
        else if (c == OPT_EXPORT)
            ex.on = true;
        else
            rc = LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 1]);
    if (rc == 0 && ex.on && cc.json)
        rc = cli_usage_error(cc.cmd, "--export and --json exclude each other");
    if (rc == 0)
        rc = run(&cc, optind < argc ? argv[optind] : NULL, &ex);
    cli_common_free(&cc);
    return rc;
}
