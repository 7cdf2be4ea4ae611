/*
 * Pure model of one inference instance (a vLLM/SGLang engine with continuous batching), driven
 * by a caller-supplied clock.
 *
 * The simulator runs hundreds of instances over hours of simulated time, and the engine
 * emulator (`libra emu`) runs one in wall-clock time behind a fake OpenAI server; both need the
 * same answer to "when does this request finish, given everything else on the instance". The
 * engine models what changes that answer: iterations that decode one token for every running
 * sequence and prefill a chunk of waiting prompts (time from cost_iter_time for that mix), caps
 * on running sequences and batched tokens, a KV capacity with preemption by recompute, an LRU
 * prefix cache in free KV that serves a trajectory's next turn, and an optional
 * least-attained-service order (a PLAS-style baseline).
 *
 * It never steps token by token when nothing changes: while the batch composition is constant
 * the iteration times form a closed-form series, so the cost of a run is proportional to the
 * number of changes (arrivals, prefill completions, finishes, preemptions), not to the tokens
 * generated. docs/engine.md gives the model, the scheduling order and the fast-forward proof;
 * tests/unit/test_engine_diff.c holds it to a naive per-iteration reference.
 *
 * Time: seconds as double, monotonic, supplied by the caller (simulated or wall clock). The
 * engine's clock is the latest time passed to any function below; passing an earlier one is an
 * error. Iterations are atomic: a change made at now_s while an iteration is running takes
 * effect when that iteration ends. The iteration that starts at time t is composed by the first
 * call that needs it — engine_advance past t, or engine_next_event_s — so a caller that submits
 * several requests at one instant submits them all before asking for the next event.
 *
 * Pure: no I/O, no clocks, no globals. An engine is not thread-safe; distinct engines are
 * independent.
 */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/rollout.h"

/* The instance: its cost model and scheduler limits (vLLM names in brackets). */
struct engine_config {
    struct cost_rollout_pre pre; /* iteration cost and KV size of this (model, GPU, TP) */
    int max_seqs;                /* running sequences at most [max_num_seqs] */
    int64_t max_batched_tokens;  /* tokens computed per iteration at most, decode tokens
                                  * included [max_num_batched_tokens]; >= max_seqs */
    int64_t kv_capacity_tokens;  /* KV slots of the instance; >= 1 */
    int64_t max_model_tokens;    /* prompt + generated tokens of one request at most
                                  * [max_model_len]; <= kv_capacity_tokens */
    bool prefix_cache;           /* keep freed KV as an LRU prefix cache [enable_prefix_caching] */
    bool priority;               /* order admission and preemption by least attained service
                                  * instead of arrival [scheduling_policy=priority] */
};

/*
 * Fills c for an instance with cost model pre: vLLM's defaults for an OpenAI server (256
 * sequences, 8192 batched tokens, prefix caching on, FIFO), the KV capacity of pre (floored to
 * whole tokens) and max_model_tokens equal to it.
 */
void engine_config_default(struct engine_config *c, const struct cost_rollout_pre *pre);

/* One completion request (one turn of a trajectory). Copied by engine_submit. */
struct engine_request {
    uint64_t id;           /* the caller's; unique among the requests live on this engine */
    uint64_t tag;          /* opaque, echoed in the completion record */
    uint64_t prefix_key;   /* requests that continue one context share a key (a trajectory id);
                            * 0: nothing is cached for or looked up by this request */
    int64_t prompt_tokens; /* tokens of the prompt, >= 1 */
    int64_t reusable_prefix_tokens; /* leading prompt tokens identical to the context last
                                     * cached under prefix_key: the previous prompt plus its
                                     * output for append-only token clients, less for chat
                                     * templates that rewrite earlier turns; 0..prompt_tokens.
                                     * The cache decides how much of it is still there. */
    int64_t gen_tokens;             /* tokens the request generates before it finishes, >= 1 */
    double attained_service;        /* priority mode: lower is admitted first and preempted
                                     * last (any unit, e.g. tokens the trajectory has had) */
};

enum engine_end {
    ENGINE_FINISHED, /* generated all gen_tokens */
    ENGINE_ABORTED   /* removed by engine_abort */
};

/* What happened to a request, reported once when it leaves the engine. */
struct engine_done {
    uint64_t id;
    uint64_t tag;
    enum engine_end end;
    double submit_s;          /* when it was submitted */
    double first_token_s;     /* end of the iteration that sampled its first token; -1 if none */
    double end_s;             /* end of the iteration that sampled its last token (finished), or
                               * the time of engine_abort (aborted) */
    int64_t prompt_tokens;    /* as submitted */
    int64_t gen_tokens;       /* tokens generated and kept (an aborted request's partial output) */
    int64_t cached_tokens;    /* prompt tokens served by the prefix cache at first admission */
    int64_t prefill_tokens;   /* tokens computed by prefill chunks, recomputation included */
    int64_t recompute_tokens; /* tokens computed again after preemptions (wasted work) */
    int64_t preemptions;      /* times the request was preempted */
};

/* Counters since engine_new, and the state now. Token counts are tokens, times seconds. */
struct engine_stats {
    double busy_s;            /* time spent in iterations */
    int64_t iterations;       /* iterations run */
    int64_t runs;             /* runs of identical iterations composed: the events it cost */
    int64_t sampled_tokens;   /* tokens sampled, including those of aborted requests */
    int64_t prefill_tokens;   /* tokens computed by prefill chunks, recomputation included */
    int64_t cached_tokens;    /* prompt tokens served by the prefix cache (all admissions) */
    int64_t recompute_tokens; /* tokens computed again after preemptions */
    int64_t preemptions;
    int64_t submitted, finished, aborted;
    int64_t cache_flushes;
    int64_t running;            /* sequences admitted now */
    int64_t waiting;            /* requests queued now (new and preempted) */
    int64_t kv_used_tokens;     /* KV held by running sequences now */
    int64_t kv_peak_tokens;     /* most KV ever held by running sequences */
    int64_t cache_tokens;       /* freed KV kept for prefix reuse now */
    int64_t kv_capacity_tokens; /* as configured */
};

struct engine;

/*
 * Creates an idle, ready engine at time 0 with an empty cache. Returns 0 and sets *out, or
 * LIBRA_EINVAL (and *out = NULL) when c is inconsistent (a limit below 1, max_batched_tokens <
 * max_seqs, max_model_tokens > kv_capacity_tokens). Free with engine_free.
 */
int engine_new(struct engine **out, const struct engine_config *c);

/* Frees e and every request it holds. e may be NULL. */
void engine_free(struct engine *e);

/* Receives each request that leaves the engine; must not call back into the engine. */
typedef void (*engine_done_fn)(void *ctx, const struct engine_done *d);

/*
 * Runs every iteration that ends at or before until_s and reports each request that finished
 * in them through fn (in order of end time; ties in admission order), plus any completions an
 * earlier mutating call ran into. Returns the number of reports, or LIBRA_EINVAL when until_s
 * is before the engine's clock. fn may be NULL (reports are dropped).
 */
int engine_advance(struct engine *e, double until_s, engine_done_fn fn, void *ctx);

/*
 * When engine_advance next has something to do: the end of the current run of identical
 * iterations (a finish, a prefill completing, a preemption, or an iteration whose batch
 * differs), the engine's clock if completions are waiting to be reported, or INFINITY when it
 * is idle, paused or blocked until the caller changes something. Composes the iteration that
 * starts now (see the top of this file). Any mutating call may change the answer.
 */
double engine_next_event_s(struct engine *e);

/*
 * Queues request r at now_s (FIFO, or by attained service in priority mode). Returns 0, or
 * LIBRA_EINVAL when now_s is before the clock, a field is out of range, prompt + gen exceeds
 * max_model_tokens, or r->id is already live. Completions that the engine runs into while
 * catching up to now_s are kept for the next engine_advance (as for every call taking now_s).
 */
int engine_submit(struct engine *e, double now_s, const struct engine_request *r);

/*
 * Removes request id at now_s and fills *out (may be NULL) with its record: the tokens it had
 * generated by the end of the last iteration before now_s (an iteration still running at now_s
 * finishes, but its token for this request is dropped). Its KV is freed into the prefix cache
 * when that iteration ends. Not reported through engine_advance. Returns 0, LIBRA_ENOENT when
 * id is not live, or LIBRA_EINVAL when now_s is before the clock. The id may be reused at once.
 */
int engine_abort(struct engine *e, double now_s, uint64_t id, struct engine_done *out);

/* Drops every prefix-cache entry at now_s (a weight update: old KV no longer matches). KV of
 * running sequences is untouched. Returns 0, or LIBRA_EINVAL when now_s is before the clock. */
int engine_flush_cache(struct engine *e, double now_s);

/*
 * Pauses (ready = false) or resumes the engine at now_s. A paused engine starts no iteration
 * (a running one completes) but keeps its requests, their KV and its cache: vLLM
 * /pause?mode=keep, SGLang pause_generation. A stopped or sleeping engine is a paused one whose
 * requests were aborted and whose cache was flushed. Returns 0, or LIBRA_EINVAL when now_s is
 * before the clock.
 */
int engine_set_ready(struct engine *e, double now_s, bool ready);

/*
 * Tokens request id has generated by the end of the last completed iteration (what a streaming
 * server has sent). Returns 0 and sets *gen_tokens, or LIBRA_ENOENT when id is not live.
 */
int engine_generated_tokens(const struct engine *e, uint64_t id, int64_t *gen_tokens);

/*
 * Busy seconds as of now_s without advancing: the time of the iterations completed by then
 * plus the elapsed part of the one running at now_s (iterations of a run follow each other
 * without gaps, so this is exact inside a fast-forwarded run too). engine_stats' busy_s counts
 * only iterations the engine has been advanced past; this is what a caller measuring
 * utilisation over windows that cut runs needs. O(1).
 *
 * Valid from the engine's clock up to the end of the iterations it has composed: after
 * engine_next_event_s, any now_s up to its answer (without limit when it is INFINITY). Returns
 * 0 and sets *busy_s, or LIBRA_EINVAL when now_s is before the clock, not finite, or past
 * what is composed (the engine is ready with work but has not composed the iteration that
 * starts at its clock, or now_s is past the end of the composed run of a ready engine).
 */
int engine_busy_at(const struct engine *e, double now_s, double *busy_s);

/* Fills *out with the counters and the state at the engine's clock. */
void engine_stats(const struct engine *e, struct engine_stats *out);

#endif
