/*
 * The text of what the gateway persists (server/store.h): the journal's records — a trajectory
 * learnt at a step, a step — a live trajectory's row, an engine's and the weight update kept for
 * the pool's sleeping engines.
 *
 * Why a record of its own for a learnt trajectory: the trees after a restart must be exactly a
 * replay of the journal through the calls the live gateway made, so the journal holds the very
 * record a step's learning reads, and the live path and the replay both hand it to the learning
 * through one function (gw_learn_rec_add). The record also keeps what learning skips — the
 * identity, how the trajectory ended, the returns after its last turn — so that every event the
 * gateway acknowledged can be found in the journal.
 *
 * A live trajectory's row is its routing state as of its last completed turn: the turns it
 * completed, the returns between them, and the returns announced since (pending). A turn in
 * flight or failed is not in it: the client sends that turn again, and its returns come again
 * with it — but those the events call announced before it are kept as pending, since nothing
 * else would bring them back.
 *
 * Every row is one JSON object (docs/serve.md "Durable state" gives the fields); parsers check
 * every field and name the one that is wrong ("turns.3.2.0: expected a tool name").
 *
 * Pure: memory in, memory out (tests/fuzz/fuzz_serve_record.c). Not thread-safe per object.
 */
#ifndef SERVER_RECORD_H
#define SERVER_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sched/eval.h"
#include "sched/obs.h"
#include "server/request.h"
#include "trace/trace.h"

#define GW_RECORD_TURNS_MAX 100000    /* turns of one trajectory a row may hold */
#define GW_RECORD_RETURNS_MAX 1000000 /* tool returns of one trajectory a row may hold */

/* The largest step, engine id or update count a state dir may hold. The gateway counts each of
 * them on from the value it restores (a step per new weight version, an id per engine
 * registered), so a row must leave room to count: 2^62 more, which a counter ticking a million
 * times a second would take over 100,000 years to use. */
#define GW_COUNTER_MAX ((int64_t)1 << 62)

/* Token counts and tool microseconds a row may hold are those the gateway takes from engines
 * and clients (TRACE_MAX_TOKENS, TRACE_MAX_TOOL_US): a trace holds no more, and the sums a
 * trajectory's turns make stay exact in 64 bits. */

struct gw_traj; /* server/internal.h */

/* One turn of a learnt trajectory: its counts and the returns after it, obs[first, first + n). */
struct gw_rec_turn {
    int64_t generated_tokens;
    int64_t context_tokens;
    size_t first, n;
};

/* A finished trajectory as the journal holds it. A zeroed struct is empty; arrays are owned. */
struct gw_learn_rec {
    char id[GW_ID_MAX]; /* its identity; "" for a single-turn request */
    int64_t step;       /* the gateway step it ended in */
    uint64_t prompt;    /* prompt key (63-bit) */
    bool censored;      /* learnt as a lower bound */
    enum trace_finish finish;
    struct gw_rec_turn *turns;
    size_t n_turns;
    struct sched_obs *obs; /* every turn's returns in order; the last turn's are never learnt */
    int64_t *exec_us;      /* how long each ran, microseconds; -1 unknown */
    size_t n_ret;
};

/* A step as the journal holds it. */
struct gw_step_rec {
    int64_t step;      /* the gateway step that began */
    int64_t learnt;    /* trajectories learnt at it: every one journalled since the last step */
    double deadline_s; /* the decision costs' deadline it set; NAN: left as it was */
};

/* Fills *out from the finished trajectory t (ended at step, as finish says), as the step's
 * learning reads it: turn k's returns are obs[returns_at[k], + turns[k].n_calls); the last
 * turn's are the tail of t->obs. Frees nothing of t. */
void gw_learn_rec_from(struct gw_learn_rec *out, const struct gw_traj *t, int64_t step,
                       bool censored, enum trace_finish finish);

/* Adds r to ev as one trajectory (sched_eval_traj_add, then sched_eval_turn_add per turn, the
 * last without its returns): the live gateway's learning and the journal's replay both. */
void gw_learn_rec_add(struct sched_eval_trace *ev, const struct gw_learn_rec *r);

/* Frees what r holds and leaves it empty. */
void gw_learn_rec_free(struct gw_learn_rec *r);

/* The JSON text of r, or of s (malloc'd, NUL-terminated). */
char *gw_learn_rec_text(const struct gw_learn_rec *r);
char *gw_step_rec_text(const struct gw_step_rec *s);

/* Parses len bytes of text into *out (freed first; empty on error). Returns 0, or -1 with err
 * naming the field ("turns.2.1: expected a count"). */
int gw_learn_rec_parse(const char *text, size_t len, struct gw_learn_rec *out, char *err,
                       size_t err_size);
int gw_step_rec_parse(const char *text, size_t len, struct gw_step_rec *out, char *err,
                      size_t err_size);

/* The JSON text of live trajectory t's row (malloc'd): its state as of its last completed
 * turn, the header says which. */
char *gw_traj_rec_text(const struct gw_traj *t);

/*
 * Parses a live trajectory's row into *t, which must be zeroed: identity, prompt, turns with
 * their calls, observations, where each turn's returns start, pending returns, the step
 * fields and the engine of its last turn (-1, or an engine id the caller checks). rid, the
 * router's state and the clocks are the caller's. Returns 0, or -1 with err; what t holds is
 * then to be freed all the same (gw_traj_clear).
 */
int gw_traj_rec_parse(const char *text, size_t len, struct gw_traj *t, char *err, size_t err_size);

/* An engine's row (the registry's id and URL are its key): {"tp", "kind" ("sglang" or "vllm"),
 * "weight_version", "step", "lent", "draining"}. The parser fills those fields of *e (tp,
 * kind, version, generation, lent, draining), and only when the whole row is right. */
struct gw_engine; /* server/internal.h */
char *gw_engine_rec_text(const struct gw_engine *e);
int gw_engine_rec_parse(const char *text, size_t len, struct gw_engine *e, char *err,
                        size_t err_size);

/* The last weight update from disk an engine took, kept for the engines of pool replicas that
 * missed it while their GPUs were the trainer's (meta "update"): {"path", "version", "body",
 * "missed"}, the body as gw_bytes_json writes it and missed the engines' ids, ascending. */
#define GW_UPDATE_PATH_MAX 64
#define GW_UPDATE_VERSION_MAX 64 /* GW_VERSION_MAX */
struct gw_update_rec {
    char path[GW_UPDATE_PATH_MAX];       /* the control call's path */
    char version[GW_UPDATE_VERSION_MAX]; /* the weight version it names */
    char *body;                          /* its request body, malloc'd; NULL: none kept */
    size_t len;
    int64_t *missed; /* engine ids, malloc'd (the parser's; the live gateway flags engines) */
    size_t n_missed;
};
char *gw_update_rec_text(const struct gw_update_rec *u);
/* Fills *u (zeroed by the caller) only when the whole row is right; else -1 with err. */
int gw_update_rec_parse(const char *text, size_t len, struct gw_update_rec *u, char *err,
                        size_t err_size);
void gw_update_rec_free(struct gw_update_rec *u);

/* s as a JSON string, or, when s is not UTF-8 (a name cut inside a character, a client's raw
 * bytes), as the array of its byte values: names persist byte for byte. A new reference. */
json_t *gw_bytes_json(const char *s);

/* The call a trace records for return o that ran exec_us (-1 unknown); its tool is malloc'd. */
struct trace_tool_call gw_call_from(const struct sched_obs *o, int64_t exec_us);

#endif
