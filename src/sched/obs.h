/*
 * Observations: what a gateway can see of a tool return, reduced to a routing state.
 *
 * C-MLFQ routes on tool-return states "tool:size:status" (spec §4). Observation parity
 * (DESIGN.md) demands that the simulator build them from the same inputs and through the same
 * functions as the live gateway: the tool name, the payload size (tokens, else characters at
 * chars_per_token, else the text's length), and the status — given explicitly by the client,
 * else from a workload rule on structured fields (a validator's reward or verdict), else from
 * the text by the spec's heuristics. Text classification is a labelled fallback (the
 * observation records where its status came from) because the heuristics are known to be wrong
 * on real data: a Python traceback in an SWE observation is often a success, and search
 * results contain the word "error". Several returns in one turn form one state, keyed by the
 * sorted multiset of their keys.
 */
#ifndef SCHED_OBS_H
#define SCHED_OBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_TOOL_NAME_MAX 32  /* bytes of a tool name kept in a state, NUL included */
#define SCHED_STATE_KEY_MAX 256 /* bytes of a state key, NUL included (longer: truncated) */
#define SCHED_TOOL_RULES_MAX 8  /* per-tool status rules in one config */
#define SCHED_STATUS_UNSET (-1) /* sched_tool_return.status when the client sent none */
#define SCHED_DEPTH_KEY "*"     /* the one state of every return under depth_only */

enum sched_status {
    SCHED_SUCCESS,
    SCHED_FAILURE,
    SCHED_TIMEOUT,
    SCHED_OTHER, /* explicit, neither of the above (a trace's "other") */
};
#define SCHED_STATUS_COUNT 4

enum sched_size { SCHED_SMALL, SCHED_MEDIUM, SCHED_LARGE };
#define SCHED_SIZE_COUNT 3

/* Where a status came from, most trustworthy first. */
enum sched_status_from {
    SCHED_FROM_EXPLICIT, /* the client said so */
    SCHED_FROM_RULE,     /* a workload rule on a structured field (reward, verdict) */
    SCHED_FROM_TEXT,     /* text heuristics: the labelled fallback */
    SCHED_FROM_NONE,     /* nothing to go on: success assumed */
};

/* How the status of one tool is derived when the client does not send it (spec §4). */
enum sched_tool_rule {
    SCHED_RULE_TEXT,    /* failure on error/exception/traceback, timeout on timeout/timed out */
    SCHED_RULE_RAISED,  /* search: success unless it raised (exception/traceback; not "error") */
    SCHED_RULE_REWARD,  /* R2E validator: success iff reward >= 0.5 */
    SCHED_RULE_CORRECT, /* math validator: success iff the answer is correct */
};

struct sched_obs_config {
    int64_t small_max_tokens;   /* payload <= this is small, tokens (spec: 500) */
    int64_t large_above_tokens; /* payload > this is large, tokens (spec: 5000) */
    double chars_per_token;     /* converts a size in characters to tokens (4) */
    bool depth_only;            /* every return maps to one state: a tree of turn counts only */
    int n_rules;
    struct {
        char tool[SCHED_TOOL_NAME_MAX];
        enum sched_tool_rule rule;
    } rules[SCHED_TOOL_RULES_MAX]; /* tools not listed use SCHED_RULE_TEXT */
};

/* What the gateway sees of one tool return. Unknown fields are -1 (NAN for reward). */
struct sched_tool_return {
    const char *tool;       /* tool name; NULL or "" reads "unknown" */
    int64_t payload_tokens; /* size of the return in tokens, or -1 */
    int64_t payload_chars;  /* size in characters, or -1 (used when tokens are unknown) */
    const char *text;       /* the return's text, or NULL */
    size_t text_len;        /* bytes of text */
    int status;             /* an enum sched_status sent by the client, or SCHED_STATUS_UNSET */
    double reward;          /* a validator's reward, or NAN */
    int correct;            /* a validator's verdict, 1 or 0, or -1 */
};

/* One classified tool return. */
struct sched_obs {
    char tool[SCHED_TOOL_NAME_MAX]; /* truncated; ':' '|' ',' and controls replaced by '_' */
    int64_t payload_tokens;         /* measured or converted; -1 when unknown (counts small) */
    enum sched_size size;
    enum sched_status status;
    enum sched_status_from status_from;
};

/*
 * Fills c with the spec's observation settings for a workload on a model (NULL: generic):
 * thresholds 500/5000 tokens (R2E-Gym on qwen3-14b 1000/12000; qwen3-4b runs 400/1600), 4
 * characters per token, and the workload's status rules (search-r1: "search" RAISED; r2e-gym:
 * "validator" REWARD; dapo-math*: "validator" CORRECT). model NULL means the workload's
 * reference run (dapo-math on qwen3-4b, r2e-gym on qwen3-14b). Never fails.
 */
void sched_obs_defaults(struct sched_obs_config *c, const char *workload, const char *model);

/* Classifies one tool return under c into *out. Pure; never fails. */
void sched_obs_classify(const struct sched_obs_config *c, const struct sched_tool_return *r,
                        struct sched_obs *out);

/*
 * The generic text rule over len bytes: SCHED_TIMEOUT when the text says "timeout" or
 * "timed out", else SCHED_FAILURE when it says "error", "exception" or "traceback" (any case),
 * else SCHED_SUCCESS. With raised_only, "error" alone does not count (the search rule).
 */
enum sched_status sched_status_from_text(const char *text, size_t len, bool raised_only);

/* The size class of a payload of tokens under c (-1: small). */
enum sched_size sched_size_class(const struct sched_obs_config *c, int64_t tokens);

/*
 * Writes the state key of the n (>= 1) returns of one turn into buf (size bytes, at least
 * SCHED_STATE_KEY_MAX suffices; truncated otherwise): "tool:size:status" for one return, the
 * sorted keys joined by '|' for several, "*" under depth_only. Returns the length written
 * (excluding the NUL).
 */
size_t sched_state_key(const struct sched_obs_config *c, const struct sched_obs *obs, size_t n,
                       char *buf, size_t size);

/* Lower-case names used in keys and JSON ("success", "large", "text"); static storage. */
const char *sched_status_name(enum sched_status s);
const char *sched_size_name(enum sched_size s);
const char *sched_status_from_name(enum sched_status_from f);

#endif
