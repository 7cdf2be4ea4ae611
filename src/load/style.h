/*
 * Client styles of `libra load`: how each RL framework's rollout client talks to engines —
 * the request of a turn, how its answer reads, and the calls of a weight update — so that a
 * gateway or an engine can be tested against the traffic each framework really sends
 * (docs/load.md "Client styles" names the versions read).
 *
 *   plain   SGLang /generate with libra's request object (the tool returns, the script);
 *           updates in the job's rl.sync_mode
 *   areal   AReaL's remote SGLang engine: /generate with a rid per trajectory, log-probs, no
 *           libra object; updates pause every engine, load with abort_all_requests, continue
 *   slime   slime's SGLang rollout: /generate with X-SMG-Routing-Key per sample, log-probs;
 *           updates abort everything (abort_request abort_all), poll /v1/loads until idle,
 *           then load
 *   skyrl   SkyRL's vLLM client: /v1/completions with token-id prompts, return_token_ids and
 *           trajectory_id; updates use vLLM's /pause (mode from rl.sync_mode), the weight
 *           transfer endpoints and /resume (development mode)
 *
 * Pure: builds and reads memory buffers.
 */
#ifndef LOAD_STYLE_H
#define LOAD_STYLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec/config.h"
#include "trace/trace.h"

enum load_style { LOAD_PLAIN, LOAD_AREAL, LOAD_SLIME, LOAD_SKYRL };

/* "plain", "areal", "slime", "skyrl"; static storage. */
const char *load_style_name(enum load_style s);

/* Parses a style name; returns 0, or -1 when unknown. */
int load_style_parse(const char *name, enum load_style *out);

/* One turn as every style needs it. */
struct load_turn {
    const uint32_t *ctx; /* the whole context */
    size_t n_ctx;
    int64_t gen_tokens;           /* what the turn still generates */
    size_t trajectory, turn;      /* indices */
    const struct trace_traj *rec; /* identity (prompt, sample) and the previous turn's calls */
    const char *model;            /* served model name (vLLM checks it) */
    uint32_t vocab;               /* token ids are below it: the answer's are checked */
};

/* A request to send: path, body (malloc'd) and one optional header line ("Name: value"). */
struct load_request {
    char path[64];
    char *body;
    size_t len;
    char header[128]; /* "" for none */
};

/* The request of a turn in style s. */
void load_turn_request(enum load_style s, const struct load_turn *t, struct load_request *out);

/*
 * The call that tells a gateway trajectory index has ended as rec says (libra's events call,
 * docs/serve.md): only the plain style makes one; the others return false (their frameworks
 * send no such event; a gateway learns them when they go idle).
 */
bool load_finish_request(enum load_style s, size_t trajectory, const struct trace_traj *rec,
                         struct load_request *out);

/* What a turn's answer says. */
struct load_answer {
    uint32_t *ids; /* generated token ids (malloc'd) */
    size_t n;
    int64_t cached_tokens;
    bool aborted; /* finish reason abort: resubmit the rest */
};

/*
 * Reads a 200 answer of style s to turn t; returns 0, or -1 when it is not one, with why (size
 * bytes at most) naming what is wrong and where — "not JSON (...)", "no meta_info",
 * "output_ids[3]: 200000 is not a token id (...)" — and out empty. Refused too: more tokens
 * than the turn asked for (t->gen_tokens), ids outside the model's vocabulary (t->vocab), a
 * cached-token count that is not one or exceeds the prompt (t->n_ctx; absent or null is 0, as
 * engines that do not report it send), a finish reason of the wrong type.
 */
int load_turn_read(enum load_style s, const struct load_turn *t, const char *body, size_t len,
                   struct load_answer *out, char *why, size_t size);

/* One call of a weight update. */
struct load_call {
    const char *method; /* "POST" or "GET" */
    char path[96];
    char body[224];
    bool until_idle; /* GET /v1/loads, repeated until the engine runs and queues nothing */
    bool group_init; /* the update group's set-up, which takes each engine's rank offset: through
                        a gateway it goes to every engine the gateway lists, each with its own
                        rank offset and the group's world size (load_group_init_body) */
    bool resumes;    /* ends the pause an earlier call of the update began: a run stopped
                        between the two sends it on its way out */
};

#define LOAD_UPDATE_CALLS 5

/*
 * The calls of weight update number version (1, 2, ...) in style s for the job's sync mode and
 * transport (nccl: a group set up the first time, then broadcasts; else disk). Returns how
 * many (at most LOAD_UPDATE_CALLS).
 */
int load_update_calls(enum load_style s, enum spec_sync_mode mode, bool nccl, int version,
                      struct load_call *out);

/*
 * The body of style s's update-group set-up for an engine of the group at rank_offset (its
 * first rank; the trainer is rank 0) in a group of world_size ranks: SGLang's
 * /init_weights_update_group, or vLLM's /init_weight_transfer_engine with NCCL init_info.
 * Writes at most size bytes to out.
 */
void load_group_init_body(enum load_style s, int64_t rank_offset, int64_t world_size, char *out,
                          size_t size);

/* Whether an answer of /v1/loads shows an idle engine (nothing running or waiting). */
bool load_loads_idle(const char *body, size_t len);

/* Whether a weight update waits until no group is in flight, none starting meanwhile: slime
 * finishes the rollout it runs before it updates; the others update with turns in flight. */
bool load_style_update_waits(enum load_style s);

#endif
