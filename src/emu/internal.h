/*
 * Shared by the emulator's files: instance.c drives an engine model in scaled wall-clock time
 * and owns the requests' lifecycle; sglang.c and vllm.c translate each engine's HTTP API into
 * those calls and the answers back; emu.c starts the instances and answers what both APIs
 * share (health, metrics, models).
 */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "emu/emu.h"
#include "emu/prefix.h"
#include "emu/request.h"
#include "net/http.h"
#include "util/intmap.h"

struct emu_instance;

/* One generation request, from arrival to answer. */
struct emu_req {
    struct emu_instance *inst;
    struct net_call *call;    /* NULL once it has no client (cut, or the server went away) */
    struct emu_gen_request g; /* as parsed */
    uint64_t id;              /* the engine's id while submitted */
    uint64_t key;             /* the context key its KV is cached under */
    uint64_t content;         /* hash of the prompt and request id: seeds the generated ids */
    int64_t serial;           /* the instance's count of requests at its arrival: names it */
    int64_t target;           /* tokens it generates in all */
    int64_t done;             /* tokens generated before its current submission (retracted) */
    int64_t cached;           /* prompt tokens the prefix cache served at first admission */
    int64_t streamed;         /* tokens sent to a streaming client */
    double arrival_s;         /* emulated */
    bool submitted;           /* in the engine (else held at the gate) */
    bool admitted_once;       /* cached is known */
    struct emu_req *prev, *next;
};

/* A control call that waits: for the engine to drain, or for an emulated duration. */
enum emu_op_kind {
    EMU_OP_UPDATE_DISK,
    EMU_OP_UPDATE_BROADCAST,
    EMU_OP_GROUP_INIT,
    EMU_OP_WAKE,
    EMU_OP_PAUSE_WAIT /* vLLM /pause?mode=wait */
};

struct emu_op {
    enum emu_op_kind kind;
    struct net_call *call;
    bool sglang;    /* answer in SGLang's shape */
    bool flush;     /* flush the prefix cache when done */
    char *version;  /* weight version to set when done, owned (NULL or "" keeps it) */
    double until_s; /* emulated end of its work; < 0 while it waits for the drain */
    struct event *timer;
    struct emu_op *next;
};

struct emu_held_call {
    net_handler_fn fn;
    struct net_call *call;
};

struct emu_instance {
    struct emu *emu;
    int index;
    struct emu_instance_config cfg;
    struct engine *eng;
    struct net_server *server;
    struct event *tick;   /* the engine's next event */
    struct event *stream; /* periodic while streaming clients wait */
    struct event *fault;  /* the next injected fault */
    struct intmap by_id;  /* engine id -> struct emu_req * */
    struct emu_req *first;
    int n_streaming;
    struct emu_prefix prefix;
    uint64_t next_key;
    bool paused;   /* new requests wait at the gate (pause, an update in progress) */
    bool frozen;   /* the engine runs no iteration (in-place pause, loading, stall) */
    bool released; /* memory released / asleep: no KV until resumed */
    bool dead;
    double stall_until_s; /* < 0: not stalled */
    struct emu_held_call *held;
    size_t n_held, cap_held;
    struct emu_op *ops;
    char **groups; /* SGLang's weight-update groups set up, by group_name */
    size_t n_groups;
    char *weight_version; /* owned, whole: a checkpoint path is a usual version */
    int64_t prompt_tokens_total, generated_tokens_total, requests_total;
};

struct emu {
    struct event_base *base;
    struct emu_config cfg;
    struct emu_instance_config *inst_cfg; /* owned copy */
    struct emu_instance *inst;
    int n_inst;
    double t0_wall_s;
    uint64_t next_id;
};

/* ---- instance.c ------------------------------------------------------------------------------ */

/* Emulated seconds since the start. */
double emu_now(const struct emu *e);

/* Makes the instance's engine and state; 0, or -1 with err. */
int emu_instance_init(struct emu_instance *in, struct emu *e, int index, char *err, size_t n);
void emu_instance_fini(struct emu_instance *in);

/*
 * Takes a parsed generation request (its fields move into the instance) for call: checks the
 * lengths (answering 400 itself), then submits it or holds it at the gate.
 */
void emu_generate(struct emu_instance *in, struct net_call *call, struct emu_gen_request *g);

/* Aborts every live request whose rid starts with prefix (NULL: all): each answers with its
 * partial tokens and finish reason abort. Returns how many. */
int emu_abort(struct emu_instance *in, const char *rid_prefix);

/* Retracts running requests back to the gate: they recompute their context on release. */
void emu_retract(struct emu_instance *in);

/* Pauses (new requests wait; in_place also freezes running ones) or resumes. */
void emu_pause(struct emu_instance *in, bool in_place);
void emu_resume(struct emu_instance *in);

/* Brings the engine model up to now: call before reading its state (engine_stats). */
void emu_sync(struct emu_instance *in);

/* Requests in the engine or at the gate. */
int emu_live(const struct emu_instance *in);

/* Starts a waiting control call: it completes when its work is done (answering call). */
void emu_op_start(struct emu_instance *in, struct emu_op *op);

/* Whether the weight-update group name was set up (struct emu_instance's groups). */
bool emu_group_known(const struct emu_instance *in, const char *name);

/* Records the weight-update group name as set up (a group set up again stays one). */
void emu_group_add(struct emu_instance *in, const char *name);

/* Memory release (SGLang) / sleep (vLLM): KV and cache dropped, the gate closed. */
void emu_release(struct emu_instance *in);

/* Drops every prefix-cache entry (engine and content table). */
void emu_flush(struct emu_instance *in);

/* The servers' gate (net_gate_fn; ctx the instance): holds every call while the instance is
 * stalled, to run fn when the stall ends; returns true when held. */
bool emu_hold_if_stalled(void *ctx, struct net_call *call, net_handler_fn fn);

/* The id of generated token i of a request whose prompt hashed to content. */
uint32_t emu_token(const struct emu_instance *in, uint64_t content, int64_t i);

/* A plausible log-probability of generated token i. */
double emu_logprob(const struct emu_instance *in, uint64_t content, int64_t i);

/* ---- sglang.c / vllm.c --------------------------------------------------------------------- */

extern const struct net_route emu_routes[]; /* emu.c: every path of both APIs */

void emu_sglang_generate(void *ctx, struct net_call *c);
void emu_sglang_abort(void *ctx, struct net_call *c);
void emu_sglang_pause(void *ctx, struct net_call *c);
void emu_sglang_continue(void *ctx, struct net_call *c);
void emu_sglang_flush(void *ctx, struct net_call *c);
void emu_sglang_update_disk(void *ctx, struct net_call *c);
void emu_sglang_init_group(void *ctx, struct net_call *c);
void emu_sglang_update_distributed(void *ctx, struct net_call *c);
void emu_sglang_release(void *ctx, struct net_call *c);
void emu_sglang_resume(void *ctx, struct net_call *c);
void emu_sglang_server_info(void *ctx, struct net_call *c);
void emu_sglang_model_info(void *ctx, struct net_call *c);
void emu_sglang_weight_version(void *ctx, struct net_call *c);
void emu_sglang_loads(void *ctx, struct net_call *c);

/* The answer to a finished or aborted request; d->gen_tokens counts all its tokens. */
json_t *emu_sglang_answer(const struct emu_req *r, const struct engine_done *d);

void emu_vllm_completions(void *ctx, struct net_call *c);
void emu_vllm_chat(void *ctx, struct net_call *c);
void emu_vllm_generate(void *ctx, struct net_call *c);
void emu_vllm_pause(void *ctx, struct net_call *c);
void emu_vllm_resume(void *ctx, struct net_call *c);
void emu_vllm_is_paused(void *ctx, struct net_call *c);
void emu_vllm_sleep(void *ctx, struct net_call *c);
void emu_vllm_wake_up(void *ctx, struct net_call *c);
void emu_vllm_is_sleeping(void *ctx, struct net_call *c);
void emu_vllm_reset_prefix_cache(void *ctx, struct net_call *c);
void emu_vllm_init_transfer(void *ctx, struct net_call *c);
void emu_vllm_update_weights(void *ctx, struct net_call *c);

json_t *emu_vllm_answer(const struct emu_req *r, const struct engine_done *d);

/* Streamed chunks: SGLang's carry every token up to to, vLLM's those in [from, to). */
json_t *emu_sglang_stream_chunk(const struct emu_req *r, int64_t to, const struct engine_done *d);
json_t *emu_vllm_stream_chunk(const struct emu_req *r, int64_t from, int64_t to,
                              const struct engine_done *d);
/* vLLM's chunk after the last one when stream_options.include_usage asks for it: no choices,
 * the usage; NULL when not asked. */
json_t *emu_vllm_usage_chunk(const struct emu_req *r, const struct engine_done *d);

/* A streamed chunk of r with the tokens generated up to to, those since from being new, in
 * r's API; d is the final record, NULL before the end (emu.c). */
json_t *emu_stream_chunk(const struct emu_req *r, int64_t from, int64_t to,
                         const struct engine_done *d);

/* ---- emu.c --------------------------------------------------------------------------------- */

/* The request body as a JSON object ({} when empty); NULL after answering 400 when it is not
 * one. */
json_t *emu_body(struct net_call *c);

/* The text of generated tokens [from, to) of r: four letters per token (the fake tokenizer
 * reads it back as the same number of tokens). Malloc'd. */
char *emu_text(const struct emu_req *r, int64_t from, int64_t to);

/* The request id r answers with: the client's (SGLang's rid, vLLM's request_id), else the one
 * the emulator gives it, emu<instance>-<serial in hex>, written into buf. Output ids are keyed
 * by it, so equal prompts without a client id are different samples. */
#define EMU_ID_SIZE 48
const char *emu_req_id(const struct emu_req *r, char buf[EMU_ID_SIZE]);

/* Generated ids [from, to) of r as a JSON array. */
json_t *emu_ids(const struct emu_req *r, int64_t from, int64_t to);

/* Answers status (400 or 404) with OpenAI's error object, its type the one src/net/ gives that
 * status for the errors it answers itself ("invalid_request_error", 404 "not_found_error"), so
 * that every error of the emulator's own spells one type per status (docs/emu.md "Errors"). */
void emu_reply_error(struct net_call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answers 404 as the engine does for an endpoint it does not expose (vLLM's development-mode
 * endpoints without the switch): as for a path that does not exist. */
void emu_not_found(struct net_call *c);

#endif
