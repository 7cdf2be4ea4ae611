/*
 * Workload presets: the parameters of a synthetic agent (docs/workloads.md).
 *
 * Every synthetic workload is one generative process (workload.h) with different numbers: a
 * prompt pool with a latent difficulty per prompt, turns whose generated tokens are
 * log-normal, a finish hazard, tools whose outcomes are good or bad, and one knob for how much
 * a tool's return says about the work still to come. A preset is the set of those numbers,
 * each calibrated on ../shared/reference/calibration.md §1 (the built-ins, from
 * data/presets/workloads.json) or chosen by the user (a preset file of the same schema, where
 * a preset may name a "base" and override only some fields).
 *
 * The JSON schema and the struct are described by one field table in preset.c, which drives
 * parsing, validation (unknown keys, types and ranges reported as file:line:col) and printing
 * back to JSON, so the three cannot drift apart.
 */
#ifndef WORKLOAD_PRESET_H
#define WORKLOAD_PRESET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "trace/trace.h"

#define WORKLOAD_NAME_MAX 48
#define WORKLOAD_TOOL_NAME_MAX 32
#define WORKLOAD_MAX_TOOLS 8

/* A log-normal distribution, rounded and clamped to [min, max]. */
struct workload_lognormal {
    double median; /* exp(mu) */
    double sigma;  /* standard deviation of the log */
    double min;
    double max;
};

/*
 * The CPU pool a tool runs on and its service time (tooltime.h). workers 0 means a worker
 * dedicated to each trajectory (a per-task sandbox): no queueing.
 */
struct workload_pool {
    int64_t workers;
    double utilisation;      /* busy fraction of the pool, in [0, 1); sets the queueing delay */
    double service_median_s; /* median execution time, seconds */
    double service_sigma;    /* log-normal sigma of the execution time */
    double timeout_s;        /* an execution that would run longer is cut here: status timeout */
};

/*
 * One tool. Each non-final turn picks a tool by weight; its outcome is bad with probability
 * sigmoid(bad_logit + k * (bad_difficulty * z + bad_verbosity * v)) (k the causal strength,
 * z the prompt's difficulty, v the trajectory's verbosity); the outcome sets the status and
 * shifts the payload size.
 */
struct workload_tool {
    char name[WORKLOAD_TOOL_NAME_MAX];
    double weight;         /* relative share of non-final turns that call this tool */
    double bad_logit;      /* logit of a bad outcome without the causal terms */
    double bad_difficulty; /* per unit of prompt difficulty, scaled by the causal strength */
    double bad_verbosity;  /* per unit of trajectory verbosity, scaled by the causal strength */
    enum trace_tool_status good_status;
    enum trace_tool_status bad_status;
    struct workload_lognormal payload_tokens; /* size of a good outcome's return, tokens */
    double bad_payload_log;                   /* added to the log payload of a bad outcome */
    int64_t timeout_payload_tokens;           /* size of a timed-out call's return, tokens */
    struct workload_pool pool;
};

/* What the finish event of a turn means for the reward (docs/workloads.md). */
enum workload_finish_means {
    WORKLOAD_FINISH_ANSWER,  /* the agent answered; the reward is drawn from the reward model */
    WORKLOAD_FINISH_CORRECT, /* the answer passed the validator: reward 1; never finishing, 0 */
};

/* How a trajectory that reaches max_turns without finishing ends. */
enum workload_turn_cap {
    WORKLOAD_CAP_COMPLETED, /* the last turn is a forced answer (Search-R1) or last attempt */
    WORKLOAD_CAP_TRUNCATED, /* the agent ran out of turns (an SWE agent that never submitted) */
};

struct workload_preset {
    char name[WORKLOAD_NAME_MAX];
    char origin[SPEC_ORIGIN_MAX]; /* "builtin" or the file that defined it */
    char source[512];             /* where the numbers come from */

    int64_t prompts;            /* size of the prompt pool */
    int64_t samples;            /* trajectories per prompt (GRPO group) by default */
    int64_t batch_trajectories; /* trajectories per training step by default */

    int64_t max_turns;
    int64_t max_generated_tokens;      /* per trajectory, all turns */
    int64_t max_turn_generated_tokens; /* per turn */
    int64_t context_tokens;            /* prompt + generated + tool tokens */
    struct workload_lognormal prompt_tokens;

    /* log(generated tokens of a turn) = log(median) + first_turn_log [turn 1] +
     * difficulty * z + verbosity * v + sigma * noise + causal terms + drift */
    struct {
        double median;
        double first_turn_log;
        double sigma;
        double difficulty;
        double verbosity;
    } turn_tokens;

    /* A trajectory is stuck (looping, repeating itself, failing to converge — the long tail
     * of RL rollouts) with probability sigmoid(logit + difficulty * z); a stuck one adds
     * tokens_log to the log tokens of every turn and subtracts finish_logit from the finish
     * logit. */
    struct {
        double logit;
        double difficulty;
        double tokens_log;
        double finish_logit;
    } stuck;

    /* After each turn the trajectory finishes with probability sigmoid(logit + per_turn *
     * (turn - 1) - difficulty * z - verbosity * v + causal terms + drift). */
    struct {
        double logit;
        double per_turn;
        double difficulty;
        double verbosity;
        enum workload_finish_means means;
        enum workload_turn_cap turn_cap; /* what reaching max_turns unfinished is */
    } finish;

    /* Reward of an answer when finish.means is ANSWER: P(1) = sigmoid(logit - difficulty*z). */
    struct {
        double logit;
        double difficulty;
    } reward;

    /* The causal link between tool returns and the remaining work (one knob: strength). Each
     * bad outcome adds (1 - p), each good one -p, to a running deficit D (p the tool's bad
     * probability at strength 0); the finish logit moves by -strength * finish_logit * D and
     * the log tokens of later turns by strength * tokens_log * D. */
    struct {
        double strength; /* in [0, 1]; 0: tool returns carry no information */
        double finish_logit;
        double tokens_log;
    } causal;

    /* The environment's setup before a trajectory's first turn (a sandbox container's start),
     * seconds: median_s * exp(sigma * z); median_s 0: none. Off the GPU, like a tool call. */
    struct {
        double median_s;
        double sigma;
    } setup;

    /* the recipe's dynamic sampling (rl.dynamic_sampling's default): when not off, groups whose
     * rewards are all equal are marked filtered */
    enum spec_dynamic_sampling dynamic_sampling;

    /* Drift over policy versions: ramps linearly from version 0 to `versions`, then holds. */
    struct {
        bool enabled;
        int64_t versions;
        double generated_scale; /* multiplier of per-turn generated tokens at the end */
        double finish_logit;    /* added to the finish logit at the end (< 0: more turns) */
    } drift;

    struct workload_tool tools[WORKLOAD_MAX_TOOLS];
    size_t n_tools;
};

/* The loaded preset registry. */
struct workload_presets {
    struct workload_preset *items;
    size_t n;
};

/* Loads the built-in presets (data/presets/workloads.json, embedded) into p, zeroed first.
 * Returns 0 or LIBRA_EINVAL (a bug in the embedded file, reported in err). */
int workload_presets_init(struct workload_presets *p, struct libra_error *err);

/*
 * Adds the "workloads" of a user preset file (text of len bytes; name labels messages and
 * becomes the origin). A preset whose name exists replaces it; "base": NAME starts from an
 * existing preset and overrides only the fields given ("tools", when given, replaces the
 * whole list). Names are as hardware and model names (spec/preset.h): lower-case letters,
 * digits, '.', '-', '_', starting with a letter or digit (another is an error), so no two
 * differ only in case; a name defined twice in one file is an error at the second that names
 * the first's line:col. Other top-level sections of a preset file ("hardware", "models",
 * "schema") are left to their own parsers. Unknown keys, wrong types, out-of-range (with the
 * range) or inconsistent values fail with err at file:line:col naming the field. On error p is
 * unchanged.
 */
int workload_presets_add_text(struct workload_presets *p, const char *name, const char *text,
                              size_t len, struct libra_error *err);

/* As workload_presets_add_text, from a file already parsed (its name as the origin). */
int workload_presets_add_doc(struct workload_presets *p, const struct ujson_doc *doc,
                             struct libra_error *err);

/* Releases p's array; a zeroed p is fine. */
void workload_presets_free(struct workload_presets *p);

/* Case-insensitive look-up (a config or flag may write a name in any case; the preset keeps
 * its own, lower-case one); NULL when absent. Valid until the next add or free. */
const struct workload_preset *workload_preset_find(const struct workload_presets *p,
                                                   const char *name);

/* Writes "a, b, c", the names of p's presets in order, into out of size bytes (cut to fit). */
void workload_preset_names(const struct workload_presets *p, char *out, size_t size);

/*
 * The preset as a JSON object in the file schema (every field, no "base"), e.g. for a trace
 * header's generator parameters. Reading it back gives the same preset. Caller owns the
 * reference.
 */
json_t *workload_preset_to_json(const struct workload_preset *w);

/*
 * One line per preset for listings: name, origin, pool size and the caps, as a JSON object
 * {"name", "origin", "prompts", "samples", "max_turns", "max_generated_tokens",
 * "context_tokens", "tools": [names]}. Caller owns the reference.
 */
json_t *workload_preset_summary(const struct workload_preset *w);

#endif
