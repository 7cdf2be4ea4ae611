/*
 * The experiment config; see config.h. The table below is the only description of the keys:
 * the reader, the JSON writer, `--help` and docs/config.md all walk it.
 *
 * Precedence is implemented literally: the file and the flags are applied once to learn which
 * presets they name (spec_config_peek), then the effective config is built as defaults, then
 * the presets' values, then the file, then the flags. Both passes run the same code on the same
 * input, so an error is found by the first.
 */
#include "spec/config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec/bucket.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/version.h"

static const char *const sync_mode_names[] = {
    [SPEC_SYNC_DRAIN] = "drain",
    [SPEC_SYNC_ABORT_RESUME] = "abort_resume",
    [SPEC_SYNC_KEEP] = "keep",
    NULL,
};
static const char *const transport_names[] = {
    [SPEC_TRANSPORT_NCCL] = "nccl",
    [SPEC_TRANSPORT_DISK_RELOAD] = "disk_reload",
    [SPEC_TRANSPORT_DISK_RESTART] = "disk_restart",
    [SPEC_TRANSPORT_RESHARD] = "reshard",
    NULL,
};
const char *const spec_dynamic_sampling_names[] = {
    [SPEC_DS_OFF] = "off",
    [SPEC_DS_REGENERATE] = "regenerate",
    [SPEC_DS_GEN_BATCH] = "gen_batch",
    NULL,
};
static const char *const plan_mode_names[] = {
    [SPEC_PLAN_COLOCATED] = "colocated",
    [SPEC_PLAN_ASYNC] = "async",
    NULL,
};
/* Bit i of sim.modes is sim_mode_names[i] (the SPEC_SIM_* values). */
static const char *const sim_mode_names[] = {"colocated", "async", "libra", "rollout", NULL};
static const char *const option_names[] = {
    [SPEC_OPTION_OFF] = "off",
    [SPEC_OPTION_FALLBACK] = "fallback",
    [SPEC_OPTION_SEARCH] = "search",
    NULL,
};
static const char *const ehp_signal_names[] = {
    [SPEC_EHP_BALANCE] = "balance",
    [SPEC_EHP_REFERENCE] = "reference",
    NULL,
};
static const char *const context_mode_names[] = {
    [SPEC_CONTEXT_TOKEN] = "token",
    [SPEC_CONTEXT_CHAT] = "chat",
    NULL,
};

/* Rows: the commands that read the key (by, a mask of enum spec_reader) come first. */
#define CFG struct libra_config
#define INT(by, m, unit, def, lo, hi, flag, doc)                                                   \
    SPEC_INT_ROW(CFG, m, 0, unit, def, lo, hi, flag, by, doc)
#define DOUBLE(by, m, fl, unit, def, lo, hi, flag, doc)                                            \
    SPEC_DOUBLE_ROW(CFG, m, fl, unit, def, lo, hi, flag, by, doc)
#define STR(by, m, def, flag, doc) SPEC_STRING_ROW(CFG, m, 0, def, flag, by, doc)
#define BOOL(by, m, def, doc) SPEC_BOOL_ROW(CFG, m, 0, def, NULL, by, doc)
#define ENUM(by, m, names, def, flag, doc) SPEC_ENUM_ROW(CFG, m, 0, names, def, flag, by, doc)
#define GPUS 65536 /* the largest cluster a config may describe */

/*
 * Who reads a key, named by the code that reads it (the commands' call graphs). The planner's
 * search runs in plan, in sim (libra's layout, which it always plans async and without a clock),
 * in route eval (the buckets and the step that set the deadline), in load (the trainer's step)
 * and in serve (GET /libra/v1/plan, against the clock). Its length sample is drawn from the
 * workload preset in plan, sim and load; route eval's is its trace (whose groups the workload
 * preset's dynamic sampling judges), serve's what it saw finish. The simulator runs in sim and
 * in plan's verification. The engine model times the simulated and emulated engines, the
 * planner's rollout and the routers' move costs. Beyond those, cost reads the batch (and the
 * workload whose preset gives it; not the group size: its step deals single sequences, and
 * check() asks a batch of whole groups only of the commands that read rl.samples), emu sim.seed
 * (its token ids), and route eval's --policy replaces sched.policy. calibrate reads only the
 * hardware it fits and the model its measurements ran.
 */
#define PLANNER                                                                                    \
    (SPEC_READ_PLAN | SPEC_READ_ROUTE | SPEC_READ_SIM | SPEC_READ_LOAD | SPEC_READ_SERVE)
#define SAMPLED (SPEC_READ_PLAN | SPEC_READ_SIM | SPEC_READ_LOAD)
#define SIMULATED (SPEC_READ_PLAN | SPEC_READ_SIM)
#define ROUTED (SIMULATED | SPEC_READ_ROUTE | SPEC_READ_SERVE)
#define ENGINE (PLANNER | SPEC_READ_EMU)
#define EVERY (SPEC_READ_COST | SPEC_READ_CALIBRATE | ENGINE)

/* The sections in file order, each with the sentence docs/config.md gives it. */
static const struct {
    const char *name, *doc;
} sections[] = {
    {"cluster", "The GPUs: their type (a hardware preset), how many, and how they form nodes."},
    {"model", "The policy model being trained (a model preset)."},
    {"workload", "The agentic workload: a workload preset, or a trace to replay."},
    {"rl", "The RL job: batch, group size, steps, staleness and weight synchronisation."},
    {"plan", "The Global Resource Planner: mode, search budget and constraints."},
    {"sched", "Turn routing (C-MLFQ and the baselines)."},
    {"sim", "The discrete-event simulator."},
    {"ehp", "The Elastic Hybrid Pool: whole training replicas lent to rollout and taken back."},
};
#define N_SECTIONS (sizeof sections / sizeof *sections)

static const struct spec_field fields[] = {
    STR(EVERY, cluster.hardware, "a800-80g", "hardware", "hardware preset name (`libra presets`)"),
    INT(SPEC_READ_COST | PLANNER, cluster.gpus, "GPUs", 48, 1, GPUS, "gpus", "GPUs in the cluster"),
    INT(PLANNER, cluster.gpus_per_node, "GPUs", 0, 0, 64, NULL,
        "GPUs per node; 0 takes the hardware preset's value"),
    STR(EVERY, model.name, "qwen3-14b", "model", "model preset name (`libra presets`)"),
    STR(SPEC_READ_COST | PLANNER, workload.name, "r2e-gym", "workload", "workload preset name"),
    STR(SAMPLED, workload.trace, "", NULL,
        "trace file to replay instead of generating the workload, a path from the working "
        "directory (not the config file's); \"\" generates"),
    INT(SPEC_READ_COST | PLANNER, rl.batch_trajectories, "trajectories", 32, 1, 1 << 20, "batch",
        "trajectories per training step; a multiple of rl.samples"),
    INT(PLANNER, rl.samples, "trajectories", 4, 1, 1024, "samples",
        "trajectories per prompt (GRPO group size)"),
    INT(SAMPLED, rl.steps, "steps", 100, 1, 10000000, "steps", "training steps"),
    INT(PLANNER, rl.max_staleness, "steps", 4, 0, 1000, NULL,
        "policy versions a trajectory may lag behind training and still be accepted"),
    INT(PLANNER, rl.sync_interval, "steps", 5, 1, 100000, NULL,
        "training steps between weight updates"),
    ENUM(PLANNER, rl.sync_mode, sync_mode_names, SPEC_SYNC_DRAIN, NULL,
         "in-flight rollouts at a weight update: wait for them, abort and resume, or keep "
         "generating"),
    ENUM(PLANNER, rl.transport, transport_names, SPEC_TRANSPORT_DISK_RESTART, NULL,
         "how weights reach rollout: NCCL broadcast, disk reload, disk and engine restart, or "
         "resharding"),
    DOUBLE(SIMULATED | SPEC_READ_LOAD, rl.overprovision_frac, 0, "", 0, 0, 4, NULL,
           "extra share of each batch launched; the slowest are aborted once the batch "
           "is full (colocated) or kept in flight (async)"),
    DOUBLE(SIMULATED | SPEC_READ_LOAD, rl.trajectory_timeout_s, 0, "s", 0, 0, 1e7, NULL,
           "a trajectory still running this long after its launch (its environment's setup "
           "included) is stopped: what it generated is discarded and its group trains without "
           "it (a masked trajectory, as rLLM's DeepSWE run does after 5400 s); libra load cancels "
           "its turn in flight; 0: no timeout"),
    ENUM(SAMPLED | SPEC_READ_ROUTE, rl.dynamic_sampling, spec_dynamic_sampling_names, SPEC_DS_OFF,
         NULL,
         "groups whose rewards are all equal are dropped and, in the synchronous modes, "
         "replaced by further rounds of the missing groups (regenerate) or by rounds of "
         "rl.gen_batch_factor batches (gen_batch, verl's DAPO recipe); the asynchronous modes "
         "replace each dropped group; the workload preset gives the default"),
    INT(SIMULATED, rl.gen_batch_factor, "", 3, 1, 100, NULL,
        "gen_batch: groups each generation round launches per group of the batch (verl's "
        "data.gen_batch_size / data.train_batch_size: 1536 / 512 in its DAPO recipe)"),
    INT(SIMULATED, rl.max_gen_batches, "", 10, 1, 1000, NULL,
        "generation rounds per step while dynamic sampling leaves the batch short (colocated, "
        "rollout; libra's planner costs them)"),
    INT(PLANNER, rl.minibatches, "", 1, 1, 4096, NULL, "optimizer steps per training step"),
    BOOL(PLANNER, rl.old_logprob, 1,
         "the trainer recomputes old log-probs (a forward pass per step)"),
    BOOL(PLANNER, rl.reference, 0, "a reference-model forward per step (KL term)"),
    ENUM(PLANNER & ~(SPEC_READ_SIM | SPEC_READ_LOAD), plan.mode, plan_mode_names, SPEC_PLAN_ASYNC,
         "mode", "colocated (stages take turns on all GPUs) or disaggregated async"),
    DOUBLE(SPEC_READ_PLAN | SPEC_READ_SERVE, plan.time_limit_s, SPEC_ABOVE_MIN, "s", 10, 0, 86400,
           "time-limit-s",
           "planner search budget: the exact search's, not the length sample's or the "
           "verification's (docs/planner.md §3.6)"),
    DOUBLE(PLANNER, plan.gap_tolerance, 0, "", 0, 0, 0.1, "gap-tolerance",
           "relative optimality gap the planner may leave to finish sooner (0: exact)"),
    INT(PLANNER, plan.max_scored, "multisets", 20000, 0, 1000000000, NULL,
        "rollout multisets the planner scores at most before it stops with its proven gap: a "
        "budget the same on every machine, unlike plan.time_limit_s (0: no limit)"),
    INT(PLANNER, plan.min_train_gpus, "GPUs", 8, 1, GPUS, NULL, "fewest GPUs training may get"),
    INT(PLANNER, plan.min_rollout_gpus, "GPUs", 8, 1, GPUS, NULL, "fewest GPUs rollout may get"),
    INT(PLANNER, plan.granularity_gpus, "GPUs", 8, 1, GPUS, NULL,
        "training GPUs are a multiple of this (a node in production)"),
    INT(PLANNER, plan.cp_min_seq_tokens, "tokens", 16384, 1, 100000000, NULL,
        "search context parallelism once the longest sequence exceeds this length"),
    BOOL(PLANNER, plan.group_integrity, 0,
         "keep GRPO groups whole per DP replica (needed only for rank-local advantages)"),
    BOOL(PLANNER, plan.homogeneous_rollout, 0,
         "use one TP size for every rollout instance (not with a plan.tp_pattern of several or "
         "plan.min_tp_sizes above 1)"),
    INT(SIMULATED, plan.verify_candidates, "", 16, 0, 64, NULL,
        "async plans (libra plan, libra sim's libra mode): the planner's candidates (its best "
        "plans at and near its optimum's split, heterogeneous and of each single TP size) "
        "simulated to choose the plan, the best analytic ones (libra plan --verify), beside "
        "every colocated plan, the best of each kind of fleet and a search of splits around "
        "the fastest; 0: the analytic optimum alone"),
    INT(SIMULATED, plan.verify_steps, "steps", 15, 1, 1000, NULL,
        "steps each verified candidate is simulated for, on a seed other than the length "
        "sample's, the measured ones after sim.warmup_steps rounded up to whole "
        "rl.sync_interval, at most rl.steps (libra plan --verify-steps)"),
    INT(SAMPLED, plan.sample_seed, "", 0, 0, 9007199254740991.0, NULL,
        "seed of the planner's length sample drawn from a workload preset (libra plan; libra "
        "sim, whose libra mode plans on it and whose baselines take their training layouts "
        "from it; a trace's sample is its own batches); 0: sim.seed, the run's own "
        "trajectories"),
    ENUM(PLANNER, plan.recompute, option_names, SPEC_OPTION_FALLBACK, NULL,
         "full activation recompute in training layouts: off, fallback (for each split, only "
         "when no layout of its GPUs fits without the fallback options) or search (always a "
         "candidate)"),
    ENUM(PLANNER, plan.fsdp, option_names, SPEC_OPTION_FALLBACK, NULL,
         "FSDP (ZeRO-3: weights, gradients and optimizer state sharded over data parallel, TP "
         "and PP 1) and HSDP (the same sharded within a node, copied across nodes) in training "
         "layouts, instead of Megatron's distributed optimizer: off, "
         "fallback (for each split, only when no layout of its GPUs fits without the fallback "
         "options) or search (always a candidate)"),
    INT(PLANNER, plan.min_tp_sizes, "", 1, 1, 4, NULL,
        "fewest distinct rollout TP sizes in a plan (at most the sizes of a plan.tp_pattern, "
        "and the sizes up to cluster.gpus_per_node that divide the model's attention heads)"),
    STR(PLANNER, plan.tp_pattern, "", NULL,
        "TP sizes of the instances on every rollout node, e.g. \"1,1,2,4\", summing to "
        "cluster.gpus_per_node, each dividing the model's attention heads; \"\" leaves them "
        "free"),
    INT(SPEC_READ_SIM, plan.replan_interval_steps, "steps", 10, 0, 1000000, NULL,
        "libra sim's libra mode (the planner's layout): plan the rollout fleet again on the "
        "trajectories that finished last every this many steps, the split and training layout "
        "kept (docs/sim.md \"Online replanning\"); 0: not on a schedule"),
    BOOL(SPEC_READ_SIM, plan.replan_pressure, 1,
         "libra sim's libra mode: plan again also when rollout is under pressure (queue 0.75, "
         "active rollouts 0.85, 8 stale rejections, rollout/train 1.25), more than "
         "max(1, plan.replan_interval_steps / 2) steps after the last time; with "
         "plan.replan_interval_steps 0 and this off, no replanning"),
    DOUBLE(SPEC_READ_SIM, plan.replan_min_gain_frac, 0, "", 0.05, 0, 1, NULL,
           "a replan is applied only if it shortens the predicted step by at least this share"),
    INT(SPEC_READ_SIM, plan.replan_horizon_steps, "steps", 10, 1, 1000000, NULL,
        "steps over which a replan's gain must repay its reconfiguration cost (libra sim: at "
        "most the steps the run has left)"),
    ENUM(SIMULATED | SPEC_READ_SERVE, sched.policy, spec_policy_names, SCHED_CMLFQ, NULL,
         "turn router: C-MLFQ or a baseline of the reference (oracle, plas and predictor are "
         "libra's own comparisons; oracle needs each trajectory's true length, so libra serve "
         "and the Python router refuse it)"),
    STR(PLANNER, sched.buckets, "", NULL,
        "bucket layout in text form (\"tp1:4000,tp2:12000,tp4:30000\"; each TP size dividing "
        "the model's attention heads); \"\" takes "
        "the plan's; instance counts (\"tp1x4:4000\") where a fleet is built of them (see "
        "below)"),
    INT(ROUTED, sched.rebuild_interval, "steps", 50, 1, 1000000, NULL,
        "training steps between prefix-tree rebuilds"),
    INT(ROUTED, sched.shrink_visits, "visits", 50, 0, 1000000, NULL,
        "C-MLFQ weighs a tree node's own mean and p90 by visits / (visits + this) and the more "
        "general node's by the rest (a prompt tree's: the global tree's on the same path; the "
        "global tree's: its depth node; docs/routing.md); 0: the node's own"),
    BOOL(ROUTED, sched.empirical_shrink, 1,
         "C-MLFQ: the global tree's path nodes at a depth take their k from how far their means "
         "spread beyond chance (docs/routing.md \"Empirical shrinkage\"), not sched.shrink_visits; "
         "false: the fixed k for them too"),
    DOUBLE(ROUTED, sched.attempt_shrink, 0, "attempts", 2, 0, 1000000, NULL,
           "cmlfq_h weighs a prompt's earlier attempts by n / (n + this) and the "
           "population's by the rest (docs/routing.md \"cmlfq_h\"); 0: the attempts "
           "alone"),
    SPEC_SET_ROW(CFG, sim.modes, 0, sim_mode_names,
                 SPEC_SIM_COLOCATED | SPEC_SIM_ASYNC | SPEC_SIM_LIBRA, 1, NULL, SPEC_READ_SIM,
                 "resource managers to simulate"),
    INT(SAMPLED | SIMULATED | SPEC_READ_ROUTE | SPEC_READ_EMU, sim.seed, "", 1, 0,
        9007199254740991.0, "seed", "seed of every random draw (0..2^53-1)"),
    INT(SIMULATED, sim.warmup_steps, "steps", 2, 0, 1000000, NULL,
        "steps excluded from the rates, at most rl.steps - 1: a run keeps one measured step, so "
        "a larger value warms up rl.steps - 1 (a sweep's points that differ only there are one "
        "experiment)"),
    INT(SPEC_READ_SIM, sim.tune_steps, "steps", 10, 1, 1000000, NULL,
        "steps each candidate of a tuning sweep is simulated for, at most rl.steps: a larger "
        "value tunes over rl.steps (a sweep's points that differ only there are one "
        "experiment)"),
    INT(SPEC_READ_SIM, sim.tune_grid, "", 16, 3, 1000000, NULL,
        "async splits a tuning round tries per rollout TP: with more, evenly spaced ones first, "
        "then every split between the best one's neighbours (coarse to fine)"),
    INT(SPEC_READ_SIM, sim.colocated_tp, "", 0, 0, 8, NULL,
        "colocated rollout TP, dividing the model's attention heads; 0 tunes it"),
    INT(SPEC_READ_SIM, sim.async_train_gpus, "GPUs", 0, 0, GPUS, NULL,
        "async training GPUs; 0 tunes them"),
    INT(SPEC_READ_SIM, sim.async_tp, "", 0, 0, 8, NULL,
        "async rollout TP, dividing the model's attention heads; 0 tunes it"),
    BOOL(SPEC_READ_SIM | SPEC_READ_LOAD, sim.planner, 1,
         "libra's split and instances come from the planner (else the fleet of sched.buckets' "
         "instance counts, the rest training); libra load's trainer trains on libra's split"),
    ENUM(SIMULATED, sim.context_mode, context_mode_names, SPEC_CONTEXT_TOKEN, NULL,
         "how clients send a turn's context: token ids appended, or chat messages whose "
         "template strips earlier reasoning"),
    BOOL(SIMULATED | SPEC_READ_EMU, sim.prefix_cache, 1,
         "engines keep freed KV to serve a trajectory's next turn"),
    INT(ENGINE, sim.max_seqs, "sequences", 256, 1, 65536, NULL, "running sequences per engine"),
    INT(ENGINE, sim.max_batched_tokens, "tokens", 8192, 1, 1 << 24, NULL,
        "tokens computed per engine iteration (chunked prefill budget); at least sim.max_seqs"),
    INT(SIMULATED, sim.queue_cap, "turns", 100, 1, 1 << 20, NULL,
        "queued turns at which the router skips an instance (max_queue_length)"),
    DOUBLE(
        SIMULATED, sim.fail_time_s, 0, "s", -1, -1, 1e12, NULL,
        "failure injection: when a rollout instance dies (0 or later); -1 never, nothing between"),
    INT(SIMULATED, sim.fail_instance, "", 0, 0, 1 << 20, NULL,
        "failure injection: the instance that dies (index, modulo the fleet)"),
    INT(SPEC_READ_SIM, sim.trace_step, "", -1, -1, 10000000, NULL,
        "step that --perfetto records; -1 the first after the warm-up"),
    STR(SPEC_READ_SIM, sim.timeline_steps, "", NULL,
        "steps A:B (numbered from 0) whose GPU timeline every mode records in its JSON: the "
        "trainer's and each rollout instance's busy intervals and each instance's load "
        "(docs/sim.md \"GPU timeline\"); \"\" records none"),
    BOOL(PLANNER, ehp.enabled, 0,
         "the elastic hybrid pool: training replicas beyond what the core needs to hold the "
         "model state serve rollout until borrowed, and train beside the core while borrowed "
         "(libra sim's libra mode, docs/sim.md); every planner confines each training replica "
         "to one node, the rule for lending (docs/planner.md). The gateway's live pool is "
         "made by libra serve --pool-replica (docs/serve.md), not by this key"),
    ENUM(SPEC_READ_SIM | SPEC_READ_SERVE, ehp.signal, ehp_signal_names, SPEC_EHP_BALANCE, NULL,
         "how many hybrid replicas the pool's signal has train (libra sim with ehp.enabled, "
         "libra serve with --pool-steer): balance, the count whose predicted step (T_train and "
         "T_rollout scaled from the step observed) is least when it beats holding by 5 %; "
         "reference, the reference's borrow all at T_train / T_rollout >= 1.15, release all at "
         "<= 0.90 (docs/ehp.md)"),
};
#define N_FIELDS (sizeof fields / sizeof *fields)

const struct spec_field *spec_config_fields(size_t *n)
{
    *n = N_FIELDS;
    return fields;
}

const struct spec_field *spec_config_field(const char *key)
{
    return spec_field_find(fields, N_FIELDS, key);
}

void spec_config_defaults(struct libra_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    spec_fields_defaults(fields, N_FIELDS, cfg);
}

/* ---- applying layers ------------------------------------------------------------------- */

static bool is_section(const char *name)
{
    for (size_t i = 0; i < N_SECTIONS; i++)
        if (strcmp(sections[i].name, name) == 0)
            return true;
    return false;
}

static void unknown_key_hint(const char *key, char *hint, size_t size)
{
    const char *names[N_SECTIONS + 5];
    size_t n = 0;
    for (size_t i = 0; i < N_SECTIONS; i++)
        names[n++] = sections[i].name;
    names[n++] = "schema";
    names[n++] = "seed";
    names[n++] = "description";
    names[n] = NULL;
    spec_suggest(names, key, hint, size);
}

/* The envelope keys of `config show` output (see config.h). */
static int read_envelope(const struct ujson_doc *doc, const char *key, const json_t *v,
                         struct libra_error *err)
{
    if (strcmp(key, "seed") == 0)
        return json_is_integer(v) ? 0 : ujson_errorf(err, doc, key, "must be an integer");
    if (!json_is_string(v))
        return ujson_errorf(err, doc, key, "must be a string");
    if (strcmp(key, "schema") == 0 && strcmp(json_string_value(v), SPEC_CONFIG_SCHEMA) != 0)
        return ujson_errorf(err, doc, key, "must be \"%s\"", SPEC_CONFIG_SCHEMA);
    return 0;
}

static int apply_doc(struct libra_config *cfg, const struct ujson_doc *doc, struct libra_error *err)
{
    const json_t *root = doc->root;
    if (!json_is_object(root))
        return ujson_errorf(err, doc, "", "a config file must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v)
    {
        int rc;
        if (is_section(key)) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%s.", key);
            rc = spec_fields_read(fields, N_FIELDS, prefix, doc, key, v, cfg, err);
        } else if (strcmp(key, "schema") == 0 || strcmp(key, "libra_version") == 0 ||
                   strcmp(key, "config_digest") == 0 || strcmp(key, "seed") == 0 ||
                   strcmp(key, "description") == 0) {
            rc = read_envelope(doc, key, v, err);
        } else {
            char hint[96] = " (an empty name)"; /* which no key is near */
            if (*key)
                unknown_key_hint(key, hint, sizeof hint);
            rc = ujson_errorf(err, doc, key, "%sunknown section%s", *key ? "" : "\"\": ", hint);
        }
        if (rc)
            return rc;
    }
    const json_t *seed = json_object_get(root, "seed");
    if (seed && json_integer_value(seed) != cfg->sim.seed)
        return ujson_errorf(err, doc, "seed",
                            "differs from sim.seed (%lld); the top-level seed is the output "
                            "envelope's copy, set sim.seed",
                            (long long)cfg->sim.seed);
    return 0;
}

static int apply_override(struct libra_config *cfg, const struct spec_config_override *o,
                          struct libra_error *err)
{
    char why[256];
    const struct spec_field *f = spec_field_find(fields, N_FIELDS, o->key);
    if (!f) {
        spec_fields_suggest(fields, N_FIELDS, "", o->key, why, sizeof why);
        return error_set(err, NULL, 0, 0, "%s: unknown key '%s'%s", o->label, o->key, why);
    }
    json_t *v = spec_field_parse_text(f, o->value, why, sizeof why);
    int rc = v ? spec_field_set(f, cfg, v, why, sizeof why) : LIBRA_EINVAL;
    json_decref(v);
    if (rc)
        return error_set(err, NULL, 0, 0, "%s: %s", o->label, why);
    return 0;
}

static int apply_overrides(struct libra_config *cfg, const struct spec_config_override *o, size_t n,
                           struct libra_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = apply_override(cfg, &o[i], err);
    return rc;
}

/* The file, then the flags in order. */
static int apply_layers(struct libra_config *cfg, const struct spec_config_sources *src,
                        struct libra_error *err)
{
    int rc = src->doc ? apply_doc(cfg, src->doc, err) : 0;
    return rc ? rc : apply_overrides(cfg, src->flags, src->n_flags, err);
}

/* The label of the last override in o[0..n) that sets key, or NULL. */
static const char *set_by(const struct spec_config_override *o, size_t n, const char *key)
{
    for (size_t i = n; i-- > 0;)
        if (strcmp(o[i].key, key) == 0)
            return o[i].label;
    return NULL;
}

/* key ("rl.samples") as a JSON pointer into a config file ("rl/samples"). */
static void key_path(const char *key, char *path, size_t size)
{
    snprintf(path, size, "%s", key);
    for (char *s = path; *s; s++)
        if (*s == '.')
            *s = '/';
}

/* Which layer gave key its value: 0 none (a default or a preset), 1 the file, 2 + i flag i. */
static size_t applied_at(const struct spec_config_sources *src, const char *key)
{
    for (size_t i = src->n_flags; i-- > 0;)
        if (strcmp(src->flags[i].key, key) == 0)
            return 2 + i;
    char path[128];
    int line, col;
    key_path(key, path, sizeof path);
    return src->doc && ujson_locate(src->doc, path, &line, &col) == 0;
}

/* Whether a flag or the config file gives key (not a default or a preset). */
static bool given(const struct spec_config_sources *src, const char *key)
{
    return applied_at(src, key) > 0;
}

int spec_config_key_error(struct libra_error *err, const struct spec_config_sources *src,
                          const char *key, const char *fmt, ...)
{
    char msg[400], path[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *label = set_by(src->flags, src->n_flags, key);
    if (label)
        return error_set(err, NULL, 0, 0, "%s: %s", label, msg);
    key_path(key, path, sizeof path);
    int line, col;
    if (src->doc && ujson_locate(src->doc, path, &line, &col) == 0)
        return ujson_errorf(err, src->doc, path, "%s", msg);
    label = set_by(src->preset_values, src->n_preset_values, key);
    return error_set(err, NULL, 0, 0, "%s: %s%s%s", key, msg, label ? ", from " : "",
                     label ? label : "");
}

/*
 * Reports a rule between key and other (NULL: none) that the config breaks, msg (fmt) saying
 * why key's value is wrong: where the user put the value that broke it, the later-applied of
 * the two they gave (key where both come from the file), so that the error points at a value
 * they set rather than at a default; key where they gave neither.
 */
static int rule_error(struct libra_error *err, const struct spec_config_sources *src,
                      const char *key, const char *other, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int rule_error(struct libra_error *err, const struct spec_config_sources *src,
                      const char *key, const char *other, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!other || applied_at(src, other) <= applied_at(src, key))
        return spec_config_key_error(err, src, key, "%s", msg);
    return spec_config_key_error(err, src, other, "%s: %s", key, msg); /* the rule's own key */
}

/* "a, b, c": the names of n presets of stride bytes, the first at first (names lead each
 * preset struct). */
static void preset_names(const char *first, size_t n, size_t stride, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used +=
            (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", first + i * stride);
}

/* The value of row f in cfg as compact JSON; caller frees. */
static char *value_text(const struct spec_field *f, const struct libra_config *cfg)
{
    json_t *v = spec_field_get(f, cfg);
    char *s = ujson_dump(v, false);
    json_decref(v);
    return s;
}

/* ---- readers ----------------------------------------------------------------------------- */

/* The command of each bit of enum spec_reader, in bit order. */
static const char *const reader_commands[SPEC_READERS] = {
    "cost", "plan", "route eval", "sim", "emu", "load", "serve", "calibrate",
};

const char *spec_reader_command(unsigned reader)
{
    for (int i = 0; i < SPEC_READERS; i++)
        if (reader == 1u << i)
            return reader_commands[i];
    return NULL;
}

/* "libra plan, libra load and libra serve": the commands of the mask readers ("" for none). */
static void readers_text(unsigned readers, char *out, size_t size)
{
    int total = 0, n = 0;
    for (int i = 0; i < SPEC_READERS; i++)
        total += (readers >> i) & 1;
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < SPEC_READERS && used < size; i++) {
        if (!(readers & 1u << i))
            continue;
        n++;
        used += (size_t)snprintf(out + used, size - used, "%slibra %s",
                                 n == 1       ? ""
                                 : n == total ? " and "
                                              : ", ",
                                 reader_commands[i]);
    }
}

/*
 * Refuses a flag that gives a key the command does not read a value other than its default
 * (defaults: the schema's, with the presets'): the command would ignore it.
 */
static int check_unread(const struct libra_config *cfg, const struct libra_config *defaults,
                        const struct spec_config_sources *src, struct libra_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && src->reader && i < src->n_flags; i++) {
        const struct spec_field *f = spec_field_find(fields, N_FIELDS, src->flags[i].key);
        if (f->readers & src->reader)
            continue;
        char *set = value_text(f, cfg), *def = value_text(f, defaults);
        if (strcmp(set, def) != 0) {
            char who[160];
            readers_text(f->readers, who, sizeof who);
            rc = spec_config_key_error(err, src, f->key, "%s is not used by libra %s (%s%s)",
                                       f->key, spec_reader_command(src->reader),
                                       *who ? "it is read by " : "no command reads it", who);
        }
        free(set);
        free(def);
    }
    return rc;
}

/*
 * A key that only acts while another setting switches its mechanism on: a mode of libra sim
 * (the modes' table, sim/mode.c, and the code of each mode: tuning reads sim.tune_* and the
 * pinned baselines, the planned libra mode replans), libra plan's verification (its simulation
 * reads the simulator's and the routers' keys), or a mechanism of its own (dynamic sampling,
 * failure injection, the pool).
 *
 * readers 0: every command that reads the key needs the switch, so each of them refuses a value,
 * and so does `libra config check` (from a flag, or from the file where the file's own
 * experiment has the switch off: check_inert). Otherwise only the commands of readers
 * need it (libra plan simulates only to verify; libra serve's pool signal is switched by its
 * own --pool-steer) while another command that reads the key acts on it whatever the switch:
 * one experiment file serves every command, so, as a key a command does not read, the file's
 * value is taken and only a flag is refused, by those commands alone.
 */
struct spec_dependent {
    const char *key;
    bool (*on)(const struct libra_config *cfg);
    const char *needs; /* what switches it on, for the docs and the error ("without NEEDS") */
    unsigned readers;  /* the commands that need the switch (0: every command that reads key) */
    const char *shown; /* a switch whose value (and the flag that set it) the error shows, so
                        * that a sweep's point is named; or NULL */
    /* the error's reason in place of "without NEEDS" (NULL: that) */
    const char *(*off)(const struct libra_config *cfg);
};

static bool gen_batch_on(const struct libra_config *c)
{
    return c->rl.dynamic_sampling == SPEC_DS_GEN_BATCH;
}

static bool dynamic_sampling_on(const struct libra_config *c)
{
    return c->rl.dynamic_sampling != SPEC_DS_OFF;
}

/* The libra mode on the planner's layout, the one that replans (sim_replans). */
static bool libra_planned(const struct libra_config *c)
{
    return (c->sim.modes & SPEC_SIM_LIBRA) && c->sim.planner;
}

#define ROUNDS_READ "colocated or rollout in sim.modes, or libra with sim.planner"
/* libra sim's modes that bound dynamic sampling's rounds: colocated's and rollout's steps run
 * them, and libra's planner costs them in its rollout model (the async modes replace each
 * dropped group). */
static bool rounds_read(const struct libra_config *c)
{
    return (c->sim.modes & (SPEC_SIM_COLOCATED | SPEC_SIM_ROLLOUT)) || libra_planned(c);
}

/* gen_batch differs from regenerate only in the rounds (rounds_read). */
static bool gen_batch_read(const struct libra_config *c)
{
    return !gen_batch_on(c) || rounds_read(c);
}

static const char *gen_batch_unread(const struct libra_config *c)
{
    (void)c;
    return "beyond regenerate's without " ROUNDS_READ;
}

/* Why libra's planner does not run: no libra mode, or libra on sched.buckets' own fleet. */
static const char *libra_unplanned(const struct libra_config *c)
{
    return c->sim.modes & SPEC_SIM_LIBRA
               ? "with sim.planner false: libra runs the fleet of sched.buckets, unplanned"
               : "without libra in sim.modes";
}

static bool replanning_on(const struct libra_config *c)
{
    return libra_planned(c) && (c->plan.replan_interval_steps > 0 || c->plan.replan_pressure);
}

static bool colocated_on(const struct libra_config *c)
{
    return (c->sim.modes & SPEC_SIM_COLOCATED) != 0;
}

static bool async_on(const struct libra_config *c)
{
    return (c->sim.modes & SPEC_SIM_ASYNC) != 0;
}

/* A mode whose rollout streams to a trainer through weight updates: colocated reshards after
 * every step, so staleness, the update interval, mode and transport do not apply there, and the
 * rollout mode has no trainer. */
static bool updates_on(const struct libra_config *c)
{
    return (c->sim.modes & (SPEC_SIM_ASYNC | SPEC_SIM_LIBRA)) != 0;
}

/* A mode that trains (all but rollout): the trainer's keys act only there. */
static bool training_on(const struct libra_config *c)
{
    return (c->sim.modes & (SPEC_SIM_COLOCATED | SPEC_SIM_ASYNC | SPEC_SIM_LIBRA)) != 0;
}

/* A mode that routes turns over buckets by sched.policy: libra's, and the rollout mode's fleet
 * of sched.buckets (colocated and async run one TP size with least-connections routing). */
static bool routed_on(const struct libra_config *c)
{
    return (c->sim.modes & (SPEC_SIM_LIBRA | SPEC_SIM_ROLLOUT)) != 0;
}

static bool libra_on(const struct libra_config *c)
{
    return (c->sim.modes & SPEC_SIM_LIBRA) != 0;
}

/* libra sim verifies the planner's candidates in its libra mode; 0 is verification off,
 * whatever the modes. */
static bool sim_verify_count_acts(const struct libra_config *c)
{
    return c->plan.verify_candidates == 0 || libra_planned(c);
}

/* cmlfq_h's prior over a prompt's attempts, where a routed mode runs it. */
static bool attempts_weighed(const struct libra_config *c)
{
    return routed_on(c) && c->sched.policy == SCHED_CMLFQ_H;
}

/* cmlfq_h's prior over a prompt's attempts, wherever the policy routes (plan's verification,
 * the gateway). */
static bool cmlfq_h_on(const struct libra_config *c)
{
    return c->sched.policy == SCHED_CMLFQ_H;
}

/* async's splits are searched (sim/experiment.c's tune): sim.tune_grid bounds the search. */
static bool async_splits_tuned(const struct libra_config *c)
{
    return async_on(c) && c->sim.async_train_gpus == 0;
}

/* A baseline whose layout is tuned by simulation (sim/experiment.c's tune) rather than pinned:
 * colocated's TP, async's split and TP. */
static bool tuning_on(const struct libra_config *c)
{
    return (colocated_on(c) && c->sim.colocated_tp == 0) ||
           (async_on(c) && (c->sim.async_tp == 0 || c->sim.async_train_gpus == 0));
}

static const char *tuning_off(const struct libra_config *c)
{
    return colocated_on(c) || async_on(c)
               ? "with every baseline's layout pinned (sim.colocated_tp, sim.async_tp, "
                 "sim.async_train_gpus): nothing is tuned"
               : "without colocated or async in sim.modes";
}

static const char *async_splits_off(const struct libra_config *c)
{
    return async_on(c) ? "with sim.async_train_gpus pinning async's split: no splits are searched"
                       : "without async in sim.modes";
}

/* The planner's length sample is drawn from the workload preset, not read from a trace (whose
 * own batches are its sample). */
static bool sample_drawn(const struct libra_config *c)
{
    return c->workload.trace[0] == '\0';
}

static bool failure_on(const struct libra_config *c)
{
    return c->sim.fail_time_s >= 0;
}

static bool pool_on(const struct libra_config *c)
{
    return c->ehp.enabled;
}

static bool verification_on(const struct libra_config *c)
{
    return c->plan.verify_candidates > 0;
}

/* libra plan simulates its candidates (api/plan.c verify): async plans, verification on. */
static bool plan_simulates(const struct libra_config *c)
{
    return c->plan.verify_candidates > 0 && c->plan.mode == SPEC_PLAN_ASYNC;
}

static const char *plan_simulates_nothing(const struct libra_config *c)
{
    return c->plan.verify_candidates == 0
               ? "with plan.verify_candidates 0: libra plan simulates nothing"
               : "with plan.mode colocated: libra plan verifies nothing (it simulates candidates "
                 "for plan.mode async)";
}

#define SEED_DRAWS                                                                                 \
    "generated trajectories (workload.trace unset: a trace's runs replay its recorded "            \
    "trajectories whatever the seed)"

/* sim.seed in libra plan: it keys the verification's runs, and the length sample where
 * plan.sample_seed leaves it to the seed; a trace is its own sample and replays alike. */
static bool plan_seeded(const struct libra_config *c)
{
    return sample_drawn(c) && (plan_simulates(c) || c->plan.sample_seed == 0);
}

static const char *plan_unseeded(const struct libra_config *c)
{
    return sample_drawn(c) ? "with plan.sample_seed set and nothing simulated "
                             "(plan.verify_candidates 0 or plan.mode colocated): libra plan draws "
                             "only its length sample, from plan.sample_seed"
                           : "without " SEED_DRAWS; /* as libra sim says it */
}

/* libra plan plans an async job: a colocated plan reshards the weights into rollout after every
 * step, so staleness, the update interval, mode and transport do not apply there. */
static bool plan_async(const struct libra_config *c)
{
    return c->plan.mode == SPEC_PLAN_ASYNC;
}

/* libra sim searches splits of training and rollout GPUs: libra's planner, and async's tuning
 * where sim.async_train_gpus leaves its split free (colocated trains on every GPU). */
static bool splits_searched(const struct libra_config *c)
{
    return libra_planned(c) || async_splits_tuned(c);
}

/* The rollout GPUs kept bind where splits are searched, and where libra's elastic pool lends
 * hybrids (it keeps that many rolling out when it reclaims). */
static bool rollout_floor_on(const struct libra_config *c)
{
    return splits_searched(c) || (libra_on(c) && c->ehp.enabled);
}

/* A count of candidates to simulate acts in libra plan on async plans only (0 is verification
 * off, whatever the mode). */
static bool plan_verify_count_acts(const struct libra_config *c)
{
    return c->plan.verify_candidates == 0 || c->plan.mode == SPEC_PLAN_ASYNC;
}

#define LIBRA_PLANNED "libra in sim.modes and sim.planner"
#define REPLANNING LIBRA_PLANNED ", and plan.replan_interval_steps above 0 or plan.replan_pressure"
#define PLAN_SIMULATES "plan.verify_candidates above 0 and plan.mode async"
#define UPDATES "async or libra in sim.modes"
#define ROUTING_MODES "libra or rollout in sim.modes"
#define TRAINING "colocated, async or libra in sim.modes"
#define SPLITS_SEARCHED LIBRA_PLANNED ", or async in sim.modes with sim.async_train_gpus 0"
/* A key of libra sim's weight updates or trainer; the other commands that read it act on it
 * whatever sim.modes (libra plan plans its async job). */
#define SIM_MODE_KEY(key, on, needs)                                                               \
    {                                                                                              \
        key, on, needs, SPEC_READ_SIM, "sim.modes", NULL                                           \
    }
/* A key of libra sim's planner in its libra mode: the error names the switch that is off. */
#define LIBRA_PLANNED_KEY(key, on)                                                                 \
    {                                                                                              \
        key, on, LIBRA_PLANNED, SPEC_READ_SIM, "sim.modes", libra_unplanned                        \
    }
/* A key of the weight updates that libra plan reads for an async plan alone. */
#define PLAN_ASYNC_KEY(key)                                                                        \
    {                                                                                              \
        key, plan_async, "plan.mode async", SPEC_READ_PLAN, "plan.mode", NULL                      \
    }
/* A key of the async splits libra sim searches (libra's planner, async's tuning). */
#define SPLITS_KEY(key)                                                                            \
    {                                                                                              \
        key, splits_searched, SPLITS_SEARCHED, SPEC_READ_SIM, "sim.modes", NULL                    \
    }
/* A key libra plan reads only to simulate (the readers table: plan's simulated keys). */
#define PLAN_SIMULATED(key)                                                                        \
    {                                                                                              \
        key, plan_simulates, PLAN_SIMULATES, SPEC_READ_PLAN, NULL, plan_simulates_nothing          \
    }

static const struct spec_dependent dependents[] = {
    {"rl.gen_batch_factor", gen_batch_on, "rl.dynamic_sampling gen_batch", 0, NULL, NULL},
    {"rl.max_gen_batches", dynamic_sampling_on, "rl.dynamic_sampling regenerate or gen_batch", 0,
     NULL, NULL},
    {"plan.replan_interval_steps", libra_planned, LIBRA_PLANNED, 0, "sim.modes", libra_unplanned},
    {"plan.replan_pressure", libra_planned, LIBRA_PLANNED, 0, "sim.modes", libra_unplanned},
    {"plan.replan_min_gain_frac", replanning_on, REPLANNING, 0, "sim.modes", NULL},
    {"plan.replan_horizon_steps", replanning_on, REPLANNING, 0, "sim.modes", NULL},
    {"plan.verify_steps", verification_on, "plan.verify_candidates above 0", 0, NULL, NULL},
    {"plan.sample_seed", sample_drawn,
     "generated trajectories (workload.trace unset: a trace's own batches are its sample)", 0, NULL,
     NULL},
    /* libra load's token ids and route eval's placebo order take the seed with a trace too */
    {"sim.seed", sample_drawn, SEED_DRAWS, SPEC_READ_SIM, NULL, NULL},
    {"sim.seed", plan_seeded,
     "generated trajectories, and plan.sample_seed 0 or " PLAN_SIMULATES " (the seed keys "
     "the verification's runs and the length sample plan.sample_seed leaves to it)",
     SPEC_READ_PLAN, NULL, plan_unseeded},
    {"sim.tune_steps", tuning_on,
     "colocated in sim.modes with sim.colocated_tp 0, or async with sim.async_tp or "
     "sim.async_train_gpus 0",
     0, "sim.modes", tuning_off},
    {"sim.tune_grid", async_splits_tuned, "async in sim.modes with sim.async_train_gpus 0", 0,
     "sim.modes", async_splits_off},
    {"sim.colocated_tp", colocated_on, "colocated in sim.modes", 0, "sim.modes", NULL},
    {"sim.async_train_gpus", async_on, "async in sim.modes", 0, "sim.modes", NULL},
    {"sim.async_tp", async_on, "async in sim.modes", 0, "sim.modes", NULL},
    {"sim.fail_instance", failure_on, "sim.fail_time_s 0 or more", 0, NULL, NULL},
    SIM_MODE_KEY("rl.max_staleness", updates_on, UPDATES),
    SIM_MODE_KEY("rl.sync_interval", updates_on, UPDATES),
    SIM_MODE_KEY("rl.sync_mode", updates_on, UPDATES),
    SIM_MODE_KEY("rl.transport", updates_on, UPDATES),
    {"rl.dynamic_sampling", gen_batch_read, "(gen_batch) " ROUNDS_READ, SPEC_READ_SIM, "sim.modes",
     gen_batch_unread},
    SIM_MODE_KEY("rl.max_gen_batches", rounds_read, ROUNDS_READ),
    SIM_MODE_KEY("rl.gen_batch_factor", rounds_read, ROUNDS_READ),
    SIM_MODE_KEY("rl.minibatches", training_on, TRAINING),
    SIM_MODE_KEY("rl.old_logprob", training_on, TRAINING),
    SIM_MODE_KEY("rl.reference", training_on, TRAINING),
    SIM_MODE_KEY("sched.policy", routed_on, ROUTING_MODES),
    SIM_MODE_KEY("sched.buckets", routed_on, ROUTING_MODES),
    SIM_MODE_KEY("sched.rebuild_interval", routed_on, ROUTING_MODES),
    SIM_MODE_KEY("sched.shrink_visits", routed_on, ROUTING_MODES),
    SIM_MODE_KEY("sched.empirical_shrink", routed_on, ROUTING_MODES),
    SIM_MODE_KEY("sched.attempt_shrink", attempts_weighed,
                 ROUTING_MODES " and sched.policy cmlfq_h"),
    SIM_MODE_KEY("sim.planner", libra_on, "libra in sim.modes"),
    SIM_MODE_KEY("ehp.enabled", libra_on, "libra in sim.modes"),
    /* the training space of the layouts the training modes take from the planner */
    SIM_MODE_KEY("plan.sample_seed", training_on, TRAINING),
    SIM_MODE_KEY("plan.recompute", training_on, TRAINING),
    SIM_MODE_KEY("plan.fsdp", training_on, TRAINING),
    SIM_MODE_KEY("plan.cp_min_seq_tokens", training_on, TRAINING),
    SIM_MODE_KEY("plan.group_integrity", training_on, TRAINING),
    LIBRA_PLANNED_KEY("plan.homogeneous_rollout", libra_planned),
    LIBRA_PLANNED_KEY("plan.verify_candidates", sim_verify_count_acts),
    LIBRA_PLANNED_KEY("plan.verify_steps", libra_planned),
    LIBRA_PLANNED_KEY("plan.max_scored", libra_planned),
    LIBRA_PLANNED_KEY("plan.gap_tolerance", libra_planned),
    LIBRA_PLANNED_KEY("plan.min_tp_sizes", libra_planned),
    LIBRA_PLANNED_KEY("plan.tp_pattern", libra_planned),
    SPLITS_KEY("plan.min_train_gpus"),
    {"plan.min_rollout_gpus", rollout_floor_on, SPLITS_SEARCHED ", or libra with ehp.enabled",
     SPEC_READ_SIM, "sim.modes", NULL},
    SPLITS_KEY("plan.granularity_gpus"),
    {"ehp.signal", pool_on, "ehp.enabled", ~(unsigned)SPEC_READ_SERVE, NULL, NULL},
    {"plan.verify_candidates", plan_verify_count_acts, "plan.mode async", SPEC_READ_PLAN, NULL,
     plan_simulates_nothing},
    PLAN_SIMULATED("plan.verify_steps"),
    PLAN_SIMULATED("sched.policy"),
    PLAN_SIMULATED("sched.rebuild_interval"),
    PLAN_SIMULATED("sched.shrink_visits"),
    PLAN_SIMULATED("sched.empirical_shrink"),
    PLAN_SIMULATED("sched.attempt_shrink"),
    {"sched.attempt_shrink", cmlfq_h_on, "sched.policy cmlfq_h", SPEC_READ_PLAN | SPEC_READ_SERVE,
     NULL, NULL},
    PLAN_SIMULATED("sim.warmup_steps"),
    PLAN_SIMULATED("sim.context_mode"),
    PLAN_SIMULATED("sim.prefix_cache"),
    PLAN_SIMULATED("sim.queue_cap"),
    PLAN_SIMULATED("sim.fail_time_s"),
    PLAN_SIMULATED("sim.fail_instance"),
    PLAN_SIMULATED("rl.overprovision_frac"),
    PLAN_SIMULATED("rl.trajectory_timeout_s"),
    PLAN_ASYNC_KEY("rl.max_staleness"),
    PLAN_ASYNC_KEY("rl.sync_interval"),
    PLAN_ASYNC_KEY("rl.sync_mode"),
    PLAN_ASYNC_KEY("rl.transport"),
};
#define N_DEPENDENTS (sizeof dependents / sizeof *dependents)

/* Whether a command that reads d's key acts on it without d's switch (see spec_dependent). */
static bool partly_dependent(const struct spec_dependent *d, const struct spec_field *f)
{
    return d->readers && (f->readers & ~d->readers);
}

/* Whether d is checked for src: by the commands that need its switch, from any source or, where
 * another command acts on the key regardless, from a flag only; by `libra config check` only
 * where every command that reads the key needs the switch. */
static bool checks(const struct spec_dependent *d, const struct spec_field *f,
                   const struct spec_config_sources *src)
{
    bool partly = partly_dependent(d, f);
    if (!src->reader)
        return !partly;
    if (d->readers && !(d->readers & src->reader))
        return false;
    return !partly || set_by(src->flags, src->n_flags, d->key);
}

/* Whether the instance counts of sched.buckets build a fleet in the command reader (0: any):
 * libra sim's rollout mode and libra's without the planner, libra load without the planner. The
 * planner chooses libra's fleet; plan, route eval and serve take the buckets' bounds and TP sizes
 * (serve's instances are its registered engines). */
static bool fleet_counted(const struct libra_config *c, unsigned reader)
{
    bool sim = (c->sim.modes & SPEC_SIM_ROLLOUT) || (libra_on(c) && !c->sim.planner);
    switch (reader) {
    case 0:
        return sim || !c->sim.planner;
    case SPEC_READ_SIM:
        return sim;
    case SPEC_READ_LOAD:
        return !c->sim.planner;
    default:
        return false;
    }
}

/* Refuses instance counts in sched.buckets that no command builds a fleet from, and those a flag
 * gives a command that does not (a file's counts may be another command's fleet, as with
 * check_inert's keys; a flag that turns that fleet off for one run leaves them aside, the run
 * taking the buckets alone). At a grid's point the buckets run without their counts and the
 * refusal goes to the grid, as check_inert's does. */
static int check_fleet_counts(struct libra_config *cfg, const struct libra_config *experiment,
                              const struct spec_config_sources *src, struct libra_error *err)
{
    const struct spec_field *f = spec_field_find(fields, N_FIELDS, "sched.buckets");
    bool flagged = set_by(src->flags, src->n_flags, f->key) != NULL;
    unsigned reader = flagged ? src->reader : 0;
    struct spec_bucket_layout l;
    if (!cfg->sched.buckets[0] || fleet_counted(cfg, reader) ||
        spec_bucket_parse(&l, cfg->sched.buckets, NULL, NULL) != 0)
        return 0;
    bool counted = false;
    for (int b = 0; b < l.n; b++)
        for (int k = 0; k < l.bucket[b].n_tp; k++) {
            counted |= l.bucket[b].instances[k] != 0;
            l.bucket[b].instances[k] = 0;
        }
    if (!counted)
        return 0;
    char bare[SPEC_BUCKET_TEXT_MAX], where[64];
    spec_bucket_format(&l, bare, sizeof bare);
    if (!flagged && fleet_counted(experiment, 0)) {
        snprintf(cfg->sched.buckets, sizeof cfg->sched.buckets, "%s", bare);
        return 0;
    }
    if (reader)
        snprintf(where, sizeof where, "in libra %s", spec_reader_command(reader));
    else
        snprintf(where, sizeof where, "with sim.planner true and no rollout mode");
    struct spec_deferred *later = src->deferred;
    bool defer = later && later->n < SPEC_DEFERRED_MAX;
    if (defer) {
        later->item[later->n].key = f->key;
        later->item[later->n].differs = true;
    }
    int rc = spec_config_key_error(defer ? &later->item[later->n++].err : err, src, f->key,
                                   "instance counts have no effect %s: only libra sim's rollout "
                                   "mode and libra with sim.planner false run a fleet of them; "
                                   "give the buckets alone (\"%s\")",
                                   where, bare);
    if (!defer)
        return rc;
    snprintf(cfg->sched.buckets, sizeof cfg->sched.buckets, "%s", bare);
    return 0;
}

/*
 * Refuses a key given a value other than its default while the setting its mechanism needs is
 * off (the sources checked: struct spec_dependent): the value would change nothing. A flag's
 * value is refused where the effective config (cfg) has the setting off; the file's where its
 * own experiment (experiment: the defaults, the presets and the file, without the flags) has
 * it off too. A flag that turns the setting off for one run (--set sim.modes=libra on a file
 * that pins async's split; a sweep's point) leaves the file's value aside: the file describes
 * the experiment's other runs as well. At a grid's point (src->deferred) such a key takes its
 * default and its refusal goes to the grid, which refuses a key inert at every point.
 */
static int check_inert(struct libra_config *cfg, const struct libra_config *defaults,
                       const struct libra_config *experiment, const struct spec_config_sources *src,
                       struct libra_error *err)
{
    for (size_t i = 0; i < N_DEPENDENTS; i++) {
        const struct spec_dependent *d = &dependents[i];
        const struct spec_field *f = spec_field_find(fields, N_FIELDS, d->key);
        bool flagged = set_by(src->flags, src->n_flags, d->key) != NULL;
        if (d->on(cfg) || (!flagged && d->on(experiment)) || !checks(d, f, src))
            continue;
        char *set = value_text(f, cfg), *def = value_text(f, defaults);
        bool differs = strcmp(set, def) != 0, gridded = false;
        for (size_t g = 0; src->deferred && g < src->deferred->n_grid && !gridded; g++)
            gridded = strcmp(src->deferred->grid[g], d->key) == 0;
        free(def);
        if (!differs && !gridded) {
            free(set);
            continue;
        }
        char why[200], shown[200] = "";
        if (d->off)
            snprintf(why, sizeof why, "%s", d->off(cfg));
        else
            snprintf(why, sizeof why, "without %s", d->needs);
        if (d->shown) {
            char *v = value_text(spec_field_find(fields, N_FIELDS, d->shown), cfg);
            const char *label = set_by(src->flags, src->n_flags, d->shown);
            snprintf(shown, sizeof shown, " (%s is %s%s%s)", d->shown, v, label ? ", from " : "",
                     label ? label : "");
            free(v);
        }
        struct spec_deferred *later = src->deferred;
        bool defer = later && later->n < SPEC_DEFERRED_MAX;
        if (defer) {
            later->item[later->n].key = d->key;
            later->item[later->n].differs = differs;
        }
        int rc = spec_config_key_error(defer ? &later->item[later->n++].err : err, src, d->key,
                                       "%s%s%s has no effect %s%s", d->key, gridded ? "" : "=",
                                       gridded ? "" : set, why, shown); /* a grid's: each */
        free(set);
        if (!defer)
            return rc;
        /* the point runs as its single run would without the value (and says so: its digest) */
        memcpy((char *)cfg + f->offset, (const char *)defaults + f->offset, f->size);
    }
    return 0;
}

/* The first rule of weight updates rl breaks, for a job in mode: its key (NULL: none), the other
 * key it involves in *other (NULL: none), and why key's value is wrong into msg. */
static const char *update_rule_broken(const struct spec_rl_config *rl, const char *mode,
                                      const char **other, char *msg, size_t size)
{
    *other = "rl.transport";
    if (rl->transport == SPEC_TRANSPORT_RESHARD) {
        snprintf(msg, size,
                 "reshard moves weights in place on the same GPUs, which only the colocated "
                 "mode does; the %s mode needs nccl, disk_reload or disk_restart",
                 mode);
        *other = NULL;
        return "rl.transport";
    }
    if (rl->sync_mode == SPEC_SYNC_KEEP && rl->transport == SPEC_TRANSPORT_DISK_RESTART) {
        snprintf(msg, size,
                 "keep generates through the update, but disk_restart restarts the engines; use "
                 "nccl or disk_reload, or sync_mode drain or abort_resume");
        return "rl.sync_mode";
    }
    *other = "rl.sync_interval";
    if (rl->max_staleness < rl->sync_interval - 1) {
        snprintf(msg, size,
                 "%d is below rl.sync_interval - 1 = %d: the batches trained between two weight "
                 "updates start on the weights of the first, so the %s mode would wait forever",
                 rl->max_staleness, rl->sync_interval - 1, mode);
        return "rl.max_staleness";
    }
    return NULL;
}

/*
 * The rules of weight updates (spec_rl_async_check) where the command resolving runs them:
 * libra sim's async and libra modes, libra plan's and route eval's async plans, libra load's job
 * (async whatever sim.modes), and `libra config` wherever libra sim would (what only libra load
 * would refuse it checks after, as load does).
 * Checked here, where the sources are known, so that the error names the value the user set. A
 * grid's points are left to the grid, which checks every point before its deferred refusals (a key
 * inert at every point) and names the point; seeds alone are checked as their single run is.
 */
static int check_updates(const struct libra_config *cfg, const struct spec_config_sources *src,
                         struct libra_error *err)
{
    bool plan = src->reader == SPEC_READ_PLAN || src->reader == SPEC_READ_ROUTE,
         load = src->reader == SPEC_READ_LOAD, sim = !src->reader || src->reader == SPEC_READ_SIM;
    if ((src->deferred && (src->deferred->n_grid || src->deferred->base)) ||
        !(plan ? plan_async(cfg) : load || (sim && updates_on(cfg))))
        return 0;
    char msg[400];
    const char *other,
        *key = update_rule_broken(&cfg->rl, plan || load || async_on(cfg) ? "async" : "libra",
                                  &other, msg, sizeof msg);
    return key ? rule_error(err, src, key, other, "%s", msg) : 0;
}

/* A batch of part of a group, blamed on the key the user gave: rl.samples where only it is
 * given (the batch then comes from a preset or the default, and is named with its source). */
static int groups_error(const struct libra_config *cfg, const struct spec_config_sources *src,
                        struct libra_error *err)
{
    const struct spec_rl_config *rl = &cfg->rl;
    if (given(src, "rl.batch_trajectories") || !given(src, "rl.samples"))
        return spec_config_key_error(
            err, src, "rl.batch_trajectories",
            "%d is not a multiple of rl.samples (%d): training takes whole groups",
            rl->batch_trajectories, rl->samples);
    const char *from = set_by(src->preset_values, src->n_preset_values, "rl.batch_trajectories");
    return spec_config_key_error(
        err, src, "rl.samples",
        "%d does not divide rl.batch_trajectories (%d%s%s): training takes whole groups",
        rl->samples, rl->batch_trajectories, from ? ", from " : ", its default", from ? from : "");
}

static int check(const struct libra_config *cfg, const struct spec_config_sources *src,
                 struct libra_error *err)
{
    const struct spec_rl_config *rl = &cfg->rl;
    /* Training takes whole groups in the commands that form them; one that does not read
     * rl.samples (libra cost deals single sequences) takes any batch, whatever the group size
     * it leaves unread. */
    const struct spec_field *samples = spec_field_find(fields, N_FIELDS, "rl.samples");
    bool groups = !src->reader || (samples->readers & src->reader) != 0;
    if (groups && rl->batch_trajectories % rl->samples != 0)
        return groups_error(cfg, src, err);
    if (cfg->sim.fail_time_s < 0 && cfg->sim.fail_time_s != -1) /* the range holds -1 for never */
        return spec_config_key_error(err, src, "sim.fail_time_s",
                                     "%g is neither -1 (never) nor a time >= 0",
                                     cfg->sim.fail_time_s);
    if (rl->dynamic_sampling != SPEC_DS_OFF && rl->samples < 2)
        return spec_config_key_error(
            err, src, "rl.samples",
            "%d with rl.dynamic_sampling %s: a group of one sample always has equal rewards, so "
            "every group would be dropped and nothing would train",
            rl->samples, spec_dynamic_sampling_names[rl->dynamic_sampling]);
    if (rl->dynamic_sampling == SPEC_DS_GEN_BATCH && rl->overprovision_frac > 0)
        return spec_config_key_error(
            err, src, "rl.overprovision_frac",
            "%g with rl.dynamic_sampling gen_batch: its generation batch is already the "
            "over-provisioning (rl.gen_batch_factor)",
            rl->overprovision_frac);
    struct spec_bucket_layout layout;
    struct libra_error why = {0};
    if (cfg->sched.buckets[0] && spec_bucket_parse(&layout, cfg->sched.buckets, NULL, &why) != 0)
        return spec_config_key_error(err, src, "sched.buckets", "column %d: %s", why.col, why.msg);
    /* route eval scores the layout as given: a bucket no instance could serve is refused there
     * (the planner and the simulator build only the fleets that fit) */
    if (cfg->sched.buckets[0] && (!src->reader || src->reader == SPEC_READ_ROUTE) &&
        spec_bucket_check_cluster(&layout, cfg->cluster.gpus, cfg->cluster.gpus_per_node, &why) !=
            0)
        return spec_config_key_error(err, src, "sched.buckets", "%s%s", why.msg,
                                     src->reader ? "" : " (libra route eval refuses it)");
    int counts[SPEC_TP_SIZES], pattern_gpus;
    if (spec_tp_pattern_parse(cfg->plan.tp_pattern, NULL, counts, &pattern_gpus, &why) != 0)
        return spec_config_key_error(err, src, "plan.tp_pattern", "column %d: %s", why.col,
                                     why.msg);
    if (pattern_gpus && pattern_gpus != cfg->cluster.gpus_per_node)
        return spec_config_key_error(err, src, "plan.tp_pattern",
                                     "its instances take %d GPUs, a node has %d "
                                     "(cluster.gpus_per_node)",
                                     pattern_gpus, cfg->cluster.gpus_per_node);
    int sizes = 0;
    for (int t = 0; t < SPEC_TP_SIZES; t++)
        sizes += counts[t] > 0;
    if (cfg->plan.homogeneous_rollout && sizes > 1) /* no fleet is both: never a feasible plan */
        return spec_config_key_error(err, src, "plan.homogeneous_rollout",
                                     "one TP size for every rollout instance contradicts "
                                     "plan.tp_pattern '%s', which puts %d TP sizes on every "
                                     "rollout node",
                                     cfg->plan.tp_pattern, sizes);
    int least = (int)cfg->plan.min_tp_sizes; /* two rules of the fleet's sizes, never both */
    if (cfg->plan.homogeneous_rollout && least > 1)
        return spec_config_key_error(err, src, "plan.homogeneous_rollout",
                                     "one TP size for every rollout instance contradicts "
                                     "plan.min_tp_sizes %d",
                                     least);
    if (sizes && least > sizes)
        return spec_config_key_error(err, src, "plan.min_tp_sizes",
                                     "%d TP sizes contradicts plan.tp_pattern '%s', which puts %d "
                                     "on every rollout node",
                                     least, cfg->plan.tp_pattern, sizes);
    int64_t first, last;
    if (spec_timeline_steps_parse(cfg->sim.timeline_steps, &first, &last, &why) != 0)
        return spec_config_key_error(err, src, "sim.timeline_steps", "%s", why.msg);
    if (cfg->sim.max_batched_tokens < cfg->sim.max_seqs && !(src->deferred && src->deferred->base))
        return rule_error(
            err, src, "sim.max_batched_tokens", "sim.max_seqs",
            "%d is below sim.max_seqs (%d): an iteration computes at least one token for every "
            "running sequence",
            cfg->sim.max_batched_tokens, cfg->sim.max_seqs);
    return 0;
}

/* The rollout TP sizes model m takes on a node of gpn GPUs, written "1, 2, 4" into text: those
 * that split its query heads evenly (the cost model's rule, cost_rollout_pre_init: each GPU
 * computes whole heads; KV heads may be replicated). Returns how many. */
static int model_tps(const struct spec_model *m, int gpn, char *text, size_t size)
{
    int n = 0;
    text[0] = '\0';
    for (int tp = 1; tp <= gpn && tp <= 1 << (SPEC_TP_SIZES - 1); tp *= 2)
        if (m->heads % tp == 0)
            snprintf(text + strlen(text), size - strlen(text), "%s%d", n++ ? ", " : "", tp);
    return n;
}

/* Refuses TP size tp (0: none) that key gives when model m cannot run it. A value that is no
 * TP size at all (sim.colocated_tp 3) is left to the rule that names the sizes
 * (sim_config_check). */
static int check_tp_heads(int tp, const char *key, const struct libra_config *cfg,
                          const struct spec_model *m, const struct spec_config_sources *src,
                          struct libra_error *err)
{
    if (tp == 0 || (tp & (tp - 1)) != 0 || m->heads % tp == 0)
        return 0;
    char takes[32];
    model_tps(m, cfg->cluster.gpus_per_node, takes, sizeof takes);
    return spec_config_key_error(err, src, key,
                                 "TP %d does not divide the %d attention heads of %s, which takes "
                                 "TP %s",
                                 tp, m->heads, m->name, takes);
}

/* Whether the command resolving (src->reader; 0: every one) reads key. */
static bool read_here(const struct spec_config_sources *src, const char *key)
{
    return !src->reader || (spec_field_find(fields, N_FIELDS, key)->readers & src->reader);
}

/*
 * The rollout TP sizes the config gives, against model m: the pinned ones of the modes that run
 * (sim_config_check's, read by libra sim), every instance of sched.buckets and plan.tp_pattern,
 * and plan.min_tp_sizes against the sizes m takes on a node. Checked here, where the model is
 * known, so that libra config check and every command refuse them with one message; a run
 * would otherwise fail on them, or the planner find no plan, without naming the heads.
 */
static int check_model_tps(const struct libra_config *cfg, const struct spec_model *m,
                           const struct spec_config_sources *src, struct libra_error *err)
{
    const struct spec_sim_config *sc = &cfg->sim;
    if ((colocated_on(cfg) && read_here(src, "sim.colocated_tp") &&
         check_tp_heads(sc->colocated_tp, "sim.colocated_tp", cfg, m, src, err)) ||
        (async_on(cfg) && read_here(src, "sim.async_tp") &&
         check_tp_heads(sc->async_tp, "sim.async_tp", cfg, m, src, err)))
        return LIBRA_EINVAL;
    struct spec_bucket_layout l; /* both parse: check */
    if (cfg->sched.buckets[0] && spec_bucket_parse(&l, cfg->sched.buckets, NULL, NULL) == 0)
        for (int b = 0; b < l.n; b++)
            for (int k = 0; k < l.bucket[b].n_tp; k++)
                if (check_tp_heads(l.bucket[b].tp[k], "sched.buckets", cfg, m, src, err))
                    return LIBRA_EINVAL;
    int counts[SPEC_TP_SIZES], gpus;
    if (spec_tp_pattern_parse(cfg->plan.tp_pattern, NULL, counts, &gpus, NULL) == 0)
        for (int t = 0; t < SPEC_TP_SIZES; t++)
            if (counts[t] && check_tp_heads(1 << t, "plan.tp_pattern", cfg, m, src, err))
                return LIBRA_EINVAL;
    char takes[32];
    int gpn = cfg->cluster.gpus_per_node, n = model_tps(m, gpn, takes, sizeof takes);
    if (cfg->plan.min_tp_sizes > n)
        return spec_config_key_error(err, src, "plan.min_tp_sizes",
                                     "%d TP sizes, but %s takes %d on a node of %d GPUs: TP %s "
                                     "(a TP size divides its %d attention heads)",
                                     cfg->plan.min_tp_sizes, m->name, n, gpn, takes, m->heads);
    return 0;
}

int spec_config_peek(struct libra_config *cfg, const struct spec_config_sources *src,
                     struct libra_error *err)
{
    spec_config_defaults(cfg);
    return apply_layers(cfg, src, err);
}

/* sched.buckets in its one spelling (spec_bucket_format), as the preset names are: two
 * spellings of one layout ("tp2+tp1:5000", "tp1+tp2:5000") are one config, digest and sweep
 * point. */
static void canonical_buckets(struct libra_config *cfg)
{
    struct spec_bucket_layout l;
    char text[SPEC_BUCKET_TEXT_MAX];
    if (cfg->sched.buckets[0] && spec_bucket_parse(&l, cfg->sched.buckets, NULL, NULL) == 0 &&
        spec_bucket_format(&l, text, sizeof text) < sizeof cfg->sched.buckets)
        snprintf(cfg->sched.buckets, sizeof cfg->sched.buckets, "%s", text);
}

int spec_config_resolve(struct libra_config *cfg, const struct spec_presets *p,
                        const struct spec_config_sources *src, struct libra_error *err)
{
    struct libra_config named;
    int rc = spec_config_peek(&named, src, err);
    if (rc)
        return rc;
    char known[512];
    const struct spec_hardware *hw = spec_hardware_find(p, named.cluster.hardware);
    if (!hw) {
        preset_names(p->n_hardware ? p->hardware[0].name : "", p->n_hardware, sizeof *p->hardware,
                     known, sizeof known);
        return spec_config_key_error(err, src, "cluster.hardware",
                                     "unknown hardware preset '%s' (known: %s)",
                                     named.cluster.hardware, known);
    }
    const struct spec_model *model = spec_model_find(p, named.model.name);
    if (!model) {
        preset_names(p->n_models ? p->models[0].name : "", p->n_models, sizeof *p->models, known,
                     sizeof known);
        return spec_config_key_error(err, src, "model.name",
                                     "unknown model preset '%s' (known: %s)", named.model.name,
                                     known);
    }

    spec_config_defaults(cfg);
    cfg->cluster.gpus_per_node = hw->gpus_per_node; /* the hardware preset's layer */
    rc = apply_overrides(cfg, src->preset_values, src->n_preset_values, err);
    struct libra_config defaults = *cfg; /* a flag may give these to keys the command ignores */
    struct libra_config experiment = defaults; /* ... and the file's, without the flags */
    if (rc == 0 && src->doc)
        rc = apply_doc(&experiment, src->doc, err);
    if (rc == 0)
        rc = apply_layers(cfg, src, err);
    if (rc)
        return rc;
    snprintf(cfg->cluster.hardware, sizeof cfg->cluster.hardware, "%s", hw->name);
    snprintf(cfg->model.name, sizeof cfg->model.name, "%s", model->name);
    if (cfg->cluster.gpus_per_node == 0)
        cfg->cluster.gpus_per_node = hw->gpus_per_node;
    rc = check(cfg, src, err);
    if (rc == 0)
        rc = check_unread(cfg, &defaults, src, err);
    if (rc == 0)
        rc = check_inert(cfg, &defaults, &experiment, src, err);
    if (rc == 0)
        rc = check_fleet_counts(cfg, &experiment, src, err);
    if (rc == 0)
        rc = check_updates(cfg, src, err);
    if (rc == 0)
        rc = check_model_tps(cfg, model, src, err);
    if (rc == 0)
        canonical_buckets(cfg);
    return rc;
}

/* ---- output ------------------------------------------------------------------------------ */

json_t *spec_config_to_json(const struct libra_config *cfg)
{
    json_t *o = json_object();
    for (size_t i = 0; i < N_SECTIONS; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.", sections[i].name);
        json_object_set_new(o, sections[i].name,
                            spec_fields_to_json(fields, N_FIELDS, prefix, cfg));
    }
    return o;
}

uint64_t spec_json_digest(const json_t *o)
{
    char *text = ujson_dump(o, false);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
    for (const unsigned char *s = (const unsigned char *)text; *s; s++) {
        h ^= *s;
        h *= 0x100000001b3ull; /* FNV-1a 64 prime */
    }
    free(text);
    return h;
}

uint64_t spec_config_digest(const struct libra_config *cfg)
{
    json_t *o = spec_config_to_json(cfg);
    char presets[17];
    snprintf(presets, sizeof presets, "%016llx", (unsigned long long)cfg->presets_digest);
    json_object_set_new(o, "presets", json_string(presets));
    uint64_t h = spec_json_digest(o);
    json_decref(o);
    return h;
}

void spec_config_digest_hex(const struct libra_config *cfg, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)spec_config_digest(cfg));
}

json_t *spec_config_envelope(const char *schema, const struct libra_config *cfg)
{
    char digest[17];
    spec_config_digest_hex(cfg, digest);
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string(schema));
    json_object_set_new(o, "libra_version", json_string(libra_version_string));
    json_object_set_new(o, "seed", json_integer(cfg->sim.seed));
    json_object_set_new(o, "config_digest", json_string(digest));
    return o;
}

/* A memory stream for building text; failing to create one means memory ran out, which is
 * fatal as in util/alloc.h. */
static FILE *text_stream(char **text, size_t *len)
{
    FILE *out = open_memstream(text, len);
    if (!out)
        abort();
    return out;
}

char *spec_config_keys_text(void)
{
    struct libra_config defaults;
    spec_config_defaults(&defaults);
    char *text = NULL;
    size_t len = 0;
    FILE *out = text_stream(&text, &len);
    for (size_t i = 0; i < N_FIELDS; i++) {
        const struct spec_field *f = &fields[i];
        char type[300], range[96], *def = value_text(f, &defaults);
        spec_field_type_text(f, type, sizeof type);
        spec_field_range_text(f, range, sizeof range);
        fprintf(out, "  %-26s %s%s%s%s%s, default %s%s%s\n      %s\n", f->key, type,
                *f->unit ? ", " : "", f->unit, *range ? ", " : "", range, def,
                f->flag ? ", --" : "", f->flag ? f->flag : "", f->doc);
        free(def);
    }
    fclose(out);
    return text;
}

static void doc_intro(FILE *out)
{
    fprintf(out,
            "# Configuration reference\n\n"
            "<!-- Generated by `libra config doc` from the tables in src/spec/config.c and "
            "src/spec/preset.c; do not edit by hand. -->\n\n"
            "Every command reads one experiment file: a JSON object with the sections below "
            "(all optional; unknown sections and keys are errors that name file:line:col). "
            "`libra config show [FILE]` prints the effective config, `libra config check FILE` "
            "validates a file, and `examples/default.json` spells out the built-in default.\n\n"
            "Settings are layered, each layer overriding the ones before:\n\n"
            "1. the defaults below (the built-in experiment: 48 A800 GPUs, Qwen3-14B, "
            "R2E-Gym);\n"
            "2. the presets the config names: `cluster.gpus_per_node` from the hardware "
            "preset, `rl.samples` and `rl.batch_trajectories` from the workload preset;\n"
            "3. the config file;\n"
            "4. command-line flags: the common flags listed in the *flag* column and "
            "`--set KEY=VALUE` for any key (lists as `a,b`; a set names each member once), each "
            "only where the command "
            "reads the key (below).\n\n"
            "The output of `libra config show` is itself a valid config: its envelope keys "
            "(`schema` = `\"%s\"`, `libra_version`, `config_digest`, and `seed`, which must "
            "equal `sim.seed`) are accepted at the top level.\n\n",
            SPEC_CONFIG_SCHEMA);
}

static void doc_presets(FILE *out)
{
    struct spec_hardware hw;
    struct spec_model model;
    size_t n;
    const struct spec_field *f;
    fprintf(out, "## Preset files\n\n"
                 "`--presets FILE` (repeatable) and the `LIBRA_PRESETS` environment variable (a "
                 "colon-separated list of files) add presets to the built-in ones "
                 "(`libra presets` lists them); a preset with an existing name replaces it. A "
                 "preset file is a JSON object `{\"schema\": \"libra.presets/1\", "
                 "\"hardware\": [...], \"models\": [...], \"workloads\": [...]}`, every "
                 "section optional (`schema` too; another schema is refused); the workloads "
                 "section is described in docs/workloads.md. "
                 "Values are checked: unknown keys, wrong types and impossible values (zero "
                 "heads, `kv_heads` not dividing `heads`, a bandwidth <= 0) are errors naming "
                 "file:line:col.\n\n"
                 "`hbm_bytes` is the memory capacity as the device reports it, not the "
                 "nameplate: an \"80 GB\" part has 80 GiB of HBM, of which the CUDA runtime "
                 "shows about 79.2 GiB as its total (`torch.cuda.get_device_properties(0)."
                 "total_memory`, the figure an engine's memory fraction multiplies); "
                 "`hbm_source` says which printout it was read from (`libra cost` and "
                 "`libra presets` show both). Bandwidths and FLOP rates are decimal, as in the "
                 "vendor sheets. `confidence` rates the values not listed in `assumed`, on "
                 "calibration.md's scale: H primary and unambiguous, M indirect, L weak.\n\n"
                 "### hardware\n\n");
    memset(&hw, 0, sizeof hw);
    f = spec_hardware_fields(&n);
    spec_fields_defaults(f, n, &hw);
    spec_fields_doc(out, f, n, "", &hw);
    fprintf(out, "\n### models\n\n"
                 "Parameter counts are derived from the shape unless given. MoE presets "
                 "(`experts` > 0) compute with their active parameters and hold their total "
                 "parameters; inference streams every expert its batch selects; training "
                 "computes with the active parameters, and the planner may split each layer's "
                 "experts over DP ranks (expert parallelism, docs/planner.md).\n\n");
    memset(&model, 0, sizeof model);
    f = spec_model_fields(&n);
    spec_fields_defaults(f, n, &model);
    spec_fields_doc(out, f, n, "", &model);
}

/* Whether row i is one of the section's (prefix "rl."). */
static bool in_section(size_t i, const char *prefix, size_t plen)
{
    return strncmp(fields[i].key, prefix, plen) == 0;
}

/*
 * One cell of the readers table: the keys of the section (prefix "rl.") the command of bit
 * reader reads: all, none, those it reads, or all but those it does not, whichever list is
 * shorter.
 */
static void readers_cell(FILE *out, const char *prefix, unsigned reader)
{
    size_t plen = strlen(prefix), keys = 0, read = 0;
    for (size_t i = 0; i < N_FIELDS; i++)
        if (in_section(i, prefix, plen)) {
            keys++;
            read += (fields[i].readers & reader) != 0;
        }
    if (read == keys || read == 0) {
        fputs(read ? " all |" : " none |", out);
        return;
    }
    bool list_read = 2 * read <= keys;
    fputs(list_read ? "" : " all but", out);
    const char *sep = " ";
    for (size_t i = 0; i < N_FIELDS; i++)
        if (in_section(i, prefix, plen) && ((fields[i].readers & reader) != 0) == list_read) {
            fprintf(out, "%s`%s`", sep, fields[i].key + plen);
            sep = ", ";
        }
    fputs(" |", out);
}

/* A row per command, a column per section. */
static void readers_table(FILE *out)
{
    fputs("| command |", out);
    for (size_t i = 0; i < N_SECTIONS; i++)
        fprintf(out, " `%s` |", sections[i].name);
    fputs("\n|---|", out);
    for (size_t i = 0; i < N_SECTIONS; i++)
        fputs("---|", out);
    fputs("\n", out);
    for (int r = 0; r < SPEC_READERS; r++) {
        fprintf(out, "| `libra %s` |", reader_commands[r]);
        for (size_t i = 0; i < N_SECTIONS; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%s.", sections[i].name);
            readers_cell(out, prefix, 1u << r);
        }
        fputs("\n", out);
    }
}

char *spec_config_readers_markdown(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = text_stream(&text, &len);
    readers_table(out);
    fclose(out);
    return text;
}

char *spec_config_doc_markdown(void)
{
    struct libra_config defaults;
    spec_config_defaults(&defaults);
    char *text = NULL;
    size_t len = 0;
    FILE *out = text_stream(&text, &len);
    doc_intro(out);
    for (size_t i = 0; i < N_SECTIONS; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.", sections[i].name);
        fprintf(out, "## %s\n\n%s\n\n", sections[i].name, sections[i].doc);
        spec_fields_doc(out, fields, N_FIELDS, prefix, &defaults);
        fprintf(out, "\n");
    }
    fprintf(out, "## Which keys each command reads\n\n"
                 "A command reads a key when its value can change what the command computes or "
                 "serves. A flag or `--set` that gives a key the command does not read a value "
                 "other than its default is refused (exit 2, naming the key and the commands "
                 "that read it); a config file's values are taken whichever commands read them, "
                 "since one experiment file serves every command (docs/cli.md). `libra config` "
                 "takes every key.\n\n");
    readers_table(out);
    fprintf(out, "\n## Keys that act only with another setting\n\n"
                 "A value other than its default is refused (exit 2) while the setting its "
                 "mechanism needs is off: it would change nothing. Where every command that "
                 "reads the key needs that setting, each of them refuses it, and so does "
                 "`libra config check` (exit 1): from a flag (`--set`, a `--sweep` point) "
                 "whenever the setting is off, and from the config file where the file's own "
                 "experiment has it off; a flag that turns the setting off for one run "
                 "(`--set sim.modes=libra` on a file that pins async's split, a sweep's point) "
                 "leaves aside the file's value, which serves the file's other runs. Where "
                 "only some commands need the setting (the last column names them), another "
                 "command acts on the key whatever the setting, so those commands refuse it "
                 "from a flag only and take the file's value, as they take the keys they do "
                 "not read, and `libra config check` takes it too.\n\n"
                 "| key | acts only with | refused by |\n|---|---|---|\n");
    for (size_t i = 0; i < N_DEPENDENTS; i++) {
        const struct spec_dependent *d = &dependents[i];
        const struct spec_field *f = spec_field_find(fields, N_FIELDS, d->key);
        char who[160];
        readers_text(d->readers & f->readers, who, sizeof who);
        fprintf(out, "| `%s` | %s | %s%s |\n", d->key, d->needs,
                partly_dependent(d, f) ? who : "every command that reads it",
                partly_dependent(d, f) ? ", from a flag" : "");
    }
    fprintf(out, "\nThe instance counts of `sched.buckets` (`tp1x4:4000`) follow the same rule: "
                 "only `libra sim`'s rollout mode and libra's mode with `sim.planner` false "
                 "(`libra sim`, `libra load`) run a fleet of them; the planner chooses libra's "
                 "fleet, and `libra plan`, `libra route eval` and `libra serve` take the "
                 "buckets' bounds and TP sizes alone. Counts that no command would run are "
                 "refused, naming the buckets without them, and so are counts a flag gives a "
                 "command that runs none.\n\n");
    doc_presets(out);
    fclose(out);
    return text;
}

/* A step of sim.timeline_steps: digits only, no leading zero (01:2 would be another config
 * of 1:2's run), at most the largest rl.steps. */
static bool step_number(const char *s, size_t len, int64_t *out)
{
    int64_t v = 0;
    if (len == 0 || len > 8 || (len > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return v <= 10000000;
}

int spec_timeline_steps_parse(const char *text, int64_t *first, int64_t *last,
                              struct libra_error *err)
{
    *first = 0;
    *last = -1;
    if (!text[0])
        return 0;
    const char *colon = strchr(text, ':');
    if (!colon || !step_number(text, (size_t)(colon - text), first) ||
        !step_number(colon + 1, strlen(colon + 1), last))
        return error_set(err, NULL, 0, 0,
                         "expected A:B, the first and last step (numbered from 0, at most "
                         "10000000, without leading zeros), not '%s'",
                         text);
    if (*first > *last)
        return error_set(err, NULL, 0, 0, "'%s' ends before it starts", text);
    return 0;
}

int spec_rl_async_check(const struct spec_rl_config *rl, const char *mode, struct libra_error *err)
{
    char msg[400];
    const char *other, *key = update_rule_broken(rl, mode, &other, msg, sizeof msg);
    return key ? error_set(err, NULL, 0, 0, "%s: %s", key, msg) : 0;
}
