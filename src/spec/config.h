/*
 * The experiment config: one file format read by every command (DESIGN.md "Config").
 *
 * A config file is a JSON object with sections cluster, model, workload, rl, plan, sched, sim
 * and ehp; every key is a row of one table in config.c (key, type, unit, default, range, doc),
 * which drives the parser, `libra config --help` and docs/config.md. Settings are layered:
 * schema defaults < the referenced presets (cluster.gpus_per_node from the hardware preset;
 * rl.samples and rl.batch_trajectories from the workload preset, supplied by cli/ because
 * spec/ may not include workload/) < the file < command-line flags.
 *
 * To add a setting: add a field to the section's struct below and one row to the table in
 * config.c (the row macro checks the field's type), then regenerate docs/config.md with
 * `libra config doc -o docs/config.md` (a test fails while it is stale), and give the key a
 * case in tests/e2e/test_config_keys.py that shows it changes a command's output; a key that
 * acts only while another setting is on (a mode of sim.modes, libra plan's verification, a
 * switch of its own) also gets a row in config.c's dependents table. A key kept
 * for a mechanism not built yet goes into config.c's `pending` table instead: its default,
 * what the code does today, is accepted and any other value refused.
 *
 * The top level may also carry the output envelope of `libra config show` ("schema",
 * "libra_version", "config_digest", "seed"), so that output is itself a valid config file:
 * "schema" must be "libra.config/1", "seed" must equal sim.seed, the rest is ignored. A
 * top-level "description" (a string for people: what the experiment is and where its values
 * come from) is ignored too.
 */
#ifndef SPEC_CONFIG_H
#define SPEC_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "spec/policy.h"
#include "spec/preset.h"
#include "spec/schema.h"
#include "util/json.h"

#define SPEC_CONFIG_SCHEMA "libra.config/1"
#define SPEC_PATH_MAX 512 /* bytes of a file path setting, NUL included */

/* What happens to in-flight rollouts at a weight update (libra-spec §5). */
enum spec_sync_mode { SPEC_SYNC_DRAIN, SPEC_SYNC_ABORT_RESUME, SPEC_SYNC_KEEP };

/* How new weights reach the rollout engines. */
enum spec_transport {
    SPEC_TRANSPORT_NCCL,
    SPEC_TRANSPORT_DISK_RELOAD,
    SPEC_TRANSPORT_DISK_RESTART,
    SPEC_TRANSPORT_RESHARD
};

/*
 * Dynamic sampling (DAPO): a group whose rewards are all equal teaches nothing and is dropped;
 * how the synchronous modes fill the batch instead (plan/sampling.h). The workload preset
 * gives the default (its recipe's); the experiment may choose another.
 */
enum spec_dynamic_sampling {
    SPEC_DS_OFF,        /* every group trains */
    SPEC_DS_REGENERATE, /* each round generates the groups still missing */
    SPEC_DS_GEN_BATCH,  /* verl's DAPO recipe: rounds of rl.gen_batch_factor batches */
};
extern const char *const spec_dynamic_sampling_names[]; /* by value, NULL-terminated */

/* Colocated (train and rollout take turns on every GPU) or disaggregated async. */
enum spec_plan_mode { SPEC_PLAN_COLOCATED, SPEC_PLAN_ASYNC };

/* Resource managers `libra sim` compares (bits of spec_sim_config.modes). */
enum {
    SPEC_SIM_COLOCATED = 1u << 0, /* verl-style: both stages on every GPU */
    SPEC_SIM_ASYNC = 1u << 1,     /* disaggregated async, fixed homogeneous split */
    SPEC_SIM_LIBRA = 1u << 2,     /* planner + C-MLFQ (+ the elastic pool with ehp.enabled) */
    SPEC_SIM_ROLLOUT = 1u << 3    /* a fixed rollout fleet, no trainer */
};

/* How a client sends a turn's context: token ids appended (verl, slime, AReaL), or chat
 * messages through a template that strips earlier reasoning (the prefix cache then reaches
 * only to the previous prompt). */
enum spec_context_mode { SPEC_CONTEXT_TOKEN, SPEC_CONTEXT_CHAT };

/* The elastic pool's signal rule (ehp.signal; ehp/pool.h enum ehp_rule). */
enum spec_ehp_signal { SPEC_EHP_BALANCE, SPEC_EHP_REFERENCE };

/* A memory-saving option of the training layouts searched (plan.recompute, plan.fsdp). */
enum spec_layout_option {
    SPEC_OPTION_OFF,      /* never */
    SPEC_OPTION_FALLBACK, /* only on a split where no layout fits the GPUs without the options */
    SPEC_OPTION_SEARCH,   /* always: a layout with it is one more candidate */
};

struct spec_cluster_config {
    char hardware[SPEC_NAME_MAX]; /* hardware preset name */
    int gpus;
    int gpus_per_node; /* 0 in the file: take the hardware preset's */
};

struct spec_model_config {
    char name[SPEC_NAME_MAX]; /* model preset name */
};

struct spec_workload_config {
    char name[SPEC_NAME_MAX];  /* workload preset name */
    char trace[SPEC_PATH_MAX]; /* trace file to replay instead of generating; "" = generate */
};

struct spec_rl_config {
    int batch_trajectories; /* trajectories per training step, a multiple of samples */
    int samples;            /* trajectories per prompt (GRPO group size) */
    int steps;              /* training steps */
    int max_staleness;      /* policy versions a trajectory may lag, steps */
    int sync_interval;      /* steps between weight pushes to rollout */
    enum spec_sync_mode sync_mode;
    enum spec_transport transport;
    double overprovision_frac;   /* extra share of a batch launched (APRIL-style) */
    double trajectory_timeout_s; /* a trajectory running this long after its launch is stopped
                                  * and left out of its group's training; 0: none */
    enum spec_dynamic_sampling dynamic_sampling;
    int gen_batch_factor; /* SPEC_DS_GEN_BATCH: groups of a round per group of the batch */
    int max_gen_batches;  /* generation rounds per step under dynamic sampling */
    int minibatches;      /* optimizer steps per training step */
    bool old_logprob;     /* the trainer recomputes old log-probs (+2N per token) */
    bool reference;       /* reference-model forward for a KL term (+2N per token) */
};

struct spec_plan_config {
    enum spec_plan_mode mode;
    double time_limit_s;      /* planner search budget, s */
    double gap_tolerance;     /* relative optimality gap the search may leave, 0 = exact */
    int max_scored;           /* rollout multisets the search scores at most (a budget that does
                               * not depend on the machine); 0: no limit */
    int min_train_gpus;       /* GPUs */
    int min_rollout_gpus;     /* GPUs */
    int granularity_gpus;     /* training GPUs are a multiple of this */
    int cp_min_seq_tokens;    /* search context parallelism from this sequence length, tokens */
    bool group_integrity;     /* keep GRPO groups whole per DP replica */
    bool homogeneous_rollout; /* one TP size for every rollout instance */
    enum spec_layout_option recompute; /* full activation recompute in the training layouts */
    enum spec_layout_option fsdp;      /* FSDP (ZeRO-3) sharding in the training layouts */
    int verify_candidates;             /* planner candidates simulated before choosing; 0: none */
    int verify_steps;                  /* steps each verified candidate is simulated for */
    int64_t sample_seed;               /* seed of the length sample; 0: sim.seed */
    int min_tp_sizes;                  /* at least this many distinct rollout TP sizes */
    char tp_pattern[64];               /* TP sizes of every rollout node, "1,1,2,4"; "" = free */
    /* Online replanning (libra sim's libra mode, sim/replan.c) and its rule (plan/replan.h). */
    int replan_interval_steps;   /* a replan is evaluated every this many steps; 0: never */
    bool replan_pressure;        /* ... and on the reference's pressure triggers */
    double replan_min_gain_frac; /* a replan must shorten the step by this share */
    int replan_horizon_steps;    /* steps a replan's gain is counted over against its cost */
};

struct spec_sched_config {
    enum sched_policy policy; /* spec/policy.h */
    char buckets[256];        /* text form of spec/bucket.h; "" = from the plan */
    int rebuild_interval;     /* steps between prefix-tree rebuilds */
    int shrink_visits;        /* C-MLFQ: pseudo-visits of a node's more general node, visits */
    bool empirical_shrink;    /* C-MLFQ: the global path nodes' k from the data (sched_lookup) */
    double attempt_shrink;    /* cmlfq_h: pseudo-attempts of the population beside a prompt's */
};

struct spec_sim_config {
    unsigned modes;       /* SPEC_SIM_* bits */
    int64_t seed;         /* keys every random draw */
    int warmup_steps;     /* steps excluded from the rates */
    int tune_steps;       /* steps each tuning candidate is simulated for */
    int tune_grid;        /* async splits per TP a tuning round tries (coarse to fine beyond) */
    int colocated_tp;     /* colocated rollout TP; 0: tuned */
    int async_train_gpus; /* async training GPUs; 0: tuned */
    int async_tp;         /* async rollout TP; 0: tuned */
    bool planner;         /* libra's layout from the planner (else sched.buckets' fleet) */
    enum spec_context_mode context_mode;
    bool prefix_cache;       /* engines keep freed KV for a trajectory's next turn */
    int max_seqs;            /* running sequences per engine */
    int max_batched_tokens;  /* tokens per engine iteration, tokens */
    int queue_cap;           /* turns queued on an instance before the router skips it */
    double fail_time_s;      /* failure injection: when an instance dies, s; < 0 off */
    int fail_instance;       /* which instance dies (index, modulo the fleet) */
    int trace_step;          /* step recorded by --perfetto; -1: the first after warm-up */
    char timeline_steps[32]; /* steps whose GPU timeline every mode records, "A:B"; "" none */
};

struct spec_ehp_config {
    /* lend training replicas to rollout (the elastic hybrid pool, sim/elastic.c); the
     * planner confines each training replica to one node */
    bool enabled;
    enum spec_ehp_signal signal; /* how many hybrids the signal has train */
};

struct libra_config {
    struct spec_cluster_config cluster;
    struct spec_model_config model;
    struct spec_workload_config workload;
    struct spec_rl_config rl;
    struct spec_plan_config plan;
    struct spec_sched_config sched;
    struct spec_sim_config sim;
    struct spec_ehp_config ehp;
    /* Not a key: spec_json_digest of the values of the hardware, model and workload presets the
     * config names, set by whoever resolves them (api/experiment.c: spec/ cannot see workload
     * presets), so that spec_config_digest covers every input; 0 until then. */
    uint64_t presets_digest;
};

/*
 * The commands that take an experiment config, as bits of a key's readers (its schema row)
 * and of spec_config_sources.reader. A command reads a key when the key's value can change
 * what it computes or serves, through any module it calls (plan's verification simulates, so
 * it reads the simulator's keys; route eval replays the trace it is given, so it does not read
 * workload.trace). Flags may set a key only for the commands that read it (spec_config_resolve).
 */
enum spec_reader {
    SPEC_READ_COST = 1u << 0,
    SPEC_READ_PLAN = 1u << 1,
    SPEC_READ_ROUTE = 1u << 2, /* libra route eval */
    SPEC_READ_SIM = 1u << 3,
    SPEC_READ_EMU = 1u << 4,
    SPEC_READ_LOAD = 1u << 5,
    SPEC_READ_SERVE = 1u << 6,
    SPEC_READ_CALIBRATE = 1u << 7,
};
#define SPEC_READERS 8 /* bits of enum spec_reader */

/* The command a reader bit stands for, as typed: "plan", "route eval". */
const char *spec_reader_command(unsigned reader);

/* One setting given as text: key "cluster.gpus", its value, and the label errors name
 * ("--gpus", "--set cluster.gpus", "workload preset 'r2e-gym'"). */
struct spec_config_override {
    const char *key;
    const char *value;
    const char *label;
};

/* Where the layers above the defaults come from. */
/*
 * The keys inert at a point of a grid (a sweep's point, an attribution's bar;
 * spec_config_sources.deferred), each with the refusal it would get alone: the point takes the
 * key's default, as its single run would run without it, and the grid refuses a key only where
 * it is inert at every point (`--sweep sim.modes=colocated,async --set sim.async_tp=2` pins the
 * async points' TP).
 */
#define SPEC_DEFERRED_MAX 32
struct spec_deferred {
    size_t n;
    struct {
        const char *key; /* the schema's */
        struct libra_error err;
        bool differs; /* the point's value is not the key's default: a flag giving it alone is
                       * refused (a grid's key is deferred at its default too) */
    } item[SPEC_DEFERRED_MAX];
    /* the keys the grid sets (its sweep's): one inert at a point is deferred even at its
     * default, so that a key inert at every point is refused whatever values it takes */
    const char *const *grid;
    size_t n_grid;
    /* the base config of a grid of keys, never run itself: rules across keys are left to its
     * points, each resolved and checked with its own values (a swept key may mend the base) */
    bool base;
};

struct spec_config_sources {
    /* Values of presets spec/ does not read (workload presets, turned into settings by cli/),
     * applied after the hardware preset's. */
    const struct spec_config_override *preset_values;
    size_t n_preset_values;
    const struct ujson_doc *doc;              /* the config file, or NULL */
    const struct spec_config_override *flags; /* command-line settings, in order */
    size_t n_flags;
    /* The SPEC_READ_* bit of the command resolving: a flag that sets a key it does not read to
     * other than its default is refused. 0: any key (libra config shows and checks them all),
     * and a key inert without another setting is refused only where every command that reads
     * it would refuse it (spec_config_resolve). */
    unsigned reader;
    /* NULL: a key inert without another setting is refused; else it takes its default and its
     * refusal is added here (a grid's point: struct spec_deferred) */
    struct spec_deferred *deferred;
};

/* The schema table (for help, docs, and the CLI's flag list). */
const struct spec_field *spec_config_fields(size_t *n);

/* The schema row of config key key, or NULL. */
const struct spec_field *spec_config_field(const char *key);

/* Fills cfg with the schema defaults (the built-in default experiment). */
void spec_config_defaults(struct libra_config *cfg);

/*
 * Applies the file and the flags of src to the defaults, without presets or cross-checks:
 * tells the caller which presets they name (cfg->workload.name for the workload presets).
 * Fails like spec_config_resolve on a bad section, key, type or range.
 */
int spec_config_peek(struct libra_config *cfg, const struct spec_config_sources *src,
                     struct libra_error *err);

/*
 * Computes the effective config into cfg: defaults < the hardware preset named by the result
 * (p) < src->preset_values < src->doc < src->flags, in order. Preset names are replaced by the
 * presets' canonical (lower-case) names. Fails with err on an unknown section or key, a wrong
 * type, a value out of range, an unknown hardware or model preset, an inconsistent
 * combination (rl.batch_trajectories not a multiple of rl.samples), an invalid
 * sched.buckets layout, a flag giving a key src->reader does not read a value other than its
 * default (the schema's, or its preset's), or a value other than its default for a key that
 * acts only while another setting is on, with that setting off: a mode of sim.modes that reads
 * it (sim.async_tp without async), libra plan's verification (sim.queue_cap with
 * plan.verify_candidates 0), or its own switch (rl.gen_batch_factor without gen_batch; the table
 * of docs/config.md "Keys that act only with another setting"), or a value breaking the rules of
 * weight updates (spec_rl_async_check) where the command runs them: libra sim's async and libra
 * modes, libra plan's async plans, and reader 0 wherever libra sim would (not at the point of a
 * grid of keys: src->deferred->n_grid; the grid checks its points). Each is reported where the
 * offending value came from (spec_config_key_error); a rule across two keys at the one the user
 * set, the later-applied where both were. The file's values of keys src->reader does not read are
 * taken, and so are those of keys inert for src->reader alone while another command that reads them
 * acts on them: one experiment file serves every command. Returns 0 or LIBRA_EINVAL.
 */
int spec_config_resolve(struct libra_config *cfg, const struct spec_presets *p,
                        const struct spec_config_sources *src, struct libra_error *err);

/*
 * Reports a problem with the effective value of key ("rl.steps") where that value came from:
 * the last flag that set it ("--steps: MSG"), else its position in the file
 * ("FILE:LINE:COL: rl.steps: MSG"), else the preset value that set it, else the key alone (a
 * default). For commands that check values against each other after resolving. Returns
 * LIBRA_EINVAL.
 */
int spec_config_key_error(struct libra_error *err, const struct spec_config_sources *src,
                          const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * The rules a disaggregated job's weight updates follow (the async and libra modes, the
 * planner's async mode; colocated jobs need not): a transport that moves weights to other GPUs,
 * a sync mode the transport can do, and rl.max_staleness >= rl.sync_interval - 1 (else the
 * batches between two updates wait for one that never comes). mode names the job in the
 * message. Returns 0, or LIBRA_EINVAL with err naming the key.
 */
int spec_rl_async_check(const struct spec_rl_config *rl, const char *mode, struct libra_error *err);

/*
 * sim.timeline_steps: "" (none), or "A:B", decimal steps with 0 <= A <= B <= 10000000 (the
 * most rl.steps allows). Sets *first and *last (0 and -1 for ""). Returns 0, or LIBRA_EINVAL
 * with err (no position: the caller names the key).
 */
int spec_timeline_steps_parse(const char *text, int64_t *first, int64_t *last,
                              struct libra_error *err);

/* The config as a new JSON object {"cluster": {...}, ...} with every key. */
json_t *spec_config_to_json(const struct libra_config *cfg);

/* FNV-1a 64 of the compact canonical JSON (ujson_dump) of o. */
uint64_t spec_json_digest(const json_t *o);

/* spec_json_digest of spec_config_to_json(cfg) with cfg->presets_digest as member "presets":
 * two configs of equal keys naming presets of other values differ. */
uint64_t spec_config_digest(const struct libra_config *cfg);

/* The digest as 16 lower-case hex digits into out. */
void spec_config_digest_hex(const struct libra_config *cfg, char out[17]);

/*
 * The envelope every JSON output starts from: a new object {"schema": schema,
 * "libra_version", "seed": sim.seed, "config_digest"}. The caller adds its payload.
 */
json_t *spec_config_envelope(const char *schema, const struct libra_config *cfg);

/* The reference of every key as text for `--help` (one line each). Caller frees. */
char *spec_config_keys_text(void);

/* docs/config.md: the config and preset-file reference generated from the tables. Caller
 * frees. */
char *spec_config_doc_markdown(void);

/* The markdown table of the keys each command reads, a row per section (part of
 * spec_config_doc_markdown's text, and of docs/cli.md). Caller frees. */
char *spec_config_readers_markdown(void);

#endif
