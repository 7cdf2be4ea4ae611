/*
 * libra — public API.
 *
 * libra is a resource manager for agentic RL post-training of LLMs: a planner that shapes the
 * cluster, a scheduler that routes every turn of a trajectory, and an elastic pool between
 * training and rollout. This header is the only installed interface, and the only one
 * liblibra.so exports; it stays small and JSON-in/JSON-out so that it is easy to call from
 * ctypes (python/libra, docs/python.md). Module headers under src/ are internal and may
 * change between versions.
 *
 * Conventions of every function below:
 *   - Errors: functions return LIBRA_OK (0) or a negative LIBRA_E* code and fill the caller's
 *     struct libra_error (when err is not NULL; it is cleared first) with the message and,
 *     where there is one, the place: a config or trace file's line and column, or a field
 *     named at the start of the message.
 *   - Strings are NUL-terminated UTF-8. Config texts are the JSON a config file holds — the
 *     same document `libra plan CONFIG` or `libra sim CONFIG` reads (docs/config.md); NULL is
 *     no file, the built-in default experiment. Presets come from the built-in set and the
 *     files of LIBRA_PRESETS, as for the commands. Results are the JSON documents the
 *     commands print with --json, byte for byte.
 *   - Ownership: a char * the library returns through an out-parameter is the caller's, freed
 *     with libra_free. A const char * it returns is the library's, valid as each function says.
 *     Handles are created by *_new or *_open and released by the matching *_free or *_close.
 *   - Allocation failure aborts the process (as everywhere in libra).
 *   - Threads: functions without a handle may run concurrently on any threads. A handle may
 *     be used by one thread at a time; different handles are independent.
 */
#ifndef LIBRA_LIBRA_H
#define LIBRA_LIBRA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIBRA_API __attribute__((visibility("default")))

/* Error codes: functions return 0 or one of these (negative). */
enum {
    LIBRA_OK = 0,
    LIBRA_EINVAL = -1,   /* bad input: malformed, out of range, unknown key */
    LIBRA_ENOENT = -2,   /* a named thing (preset, file, key) does not exist */
    LIBRA_EIO = -3,      /* reading or writing failed */
    LIBRA_ENOMEM = -4,   /* a configured cap was reached (allocation itself aborts) */
    LIBRA_EINFEAS = -5,  /* a well-formed problem has no feasible answer */
    LIBRA_EINTERNAL = -6 /* a bug: an invariant did not hold */
};

/* Process exit codes of the `libra` tool (docs/cli.md). */
enum {
    LIBRA_EXIT_OK = 0,
    LIBRA_EXIT_NEGATIVE = 1, /* no feasible plan; validate/check found the input invalid */
    LIBRA_EXIT_USAGE = 2,    /* usage error or bad input */
    LIBRA_EXIT_IO = 3,
    LIBRA_EXIT_INTERNAL = 4,
    LIBRA_EXIT_INTERRUPTED = 130, /* SIGINT */
    LIBRA_EXIT_TERMINATED = 143   /* SIGTERM (libra load, which stops its run cleanly) */
};

/*
 * Where and why something failed. file is the config's name or a file's path ("" when none;
 * a path of 256 bytes or more as "..." and its last bytes, from a character's start);
 * line and col are 1-based, 0 when unknown (for instance a semantic error reported by field
 * name only, "rl.steps: must be >= 1"). msg is lower case, without a full stop.
 */
struct libra_error {
    char file[256];
    int line;
    int col;
    char msg[512];
};

/* The library version, e.g. "0.1.0". Static storage. */
LIBRA_API const char *libra_version(void);

/* Frees a string the library returned; NULL is a no-op. */
LIBRA_API void libra_free(void *p);

/* ---- planning and simulation ---------------------------------------------------------------- */

/*
 * Plans the experiment of config_json (name labels it in errors, e.g. its file's path; NULL or
 * "": "config"; it may start with a UTF-8 byte order mark, which LINE:COL count from past, as
 * the commands read a file) as `libra plan CONFIG --json` does: the planner on the simulator's
 * length sample, its best candidates verified by short simulations on the machine's cores (the
 * result does not depend on their number), and *out gets the document (schema libra.plan/1) the
 * command prints. Returns 0; LIBRA_EINFEAS when no plan is feasible, with *out set all the same
 * (its "feasible" is false, "why" says which constraint) and err saying why; LIBRA_EINVAL (bad
 * JSON, an unknown key, a wrong type or range: err at name:LINE:COL), LIBRA_EIO (a trace or
 * preset file it names cannot be read) or LIBRA_EINTERNAL, with *out NULL. Free *out with
 * libra_free.
 */
LIBRA_API int libra_plan(const char *config_json, const char *name, char **out,
                         struct libra_error *err);

/*
 * Simulates the RL job of config_json under each resource manager of sim.modes, as
 * `libra sim CONFIG --json` does, on the machine's cores; *out gets the document (schema
 * libra.sim/1). Returns 0, or with *out NULL: LIBRA_EINVAL and LIBRA_EIO as libra_plan,
 * LIBRA_EINFEAS (a mode found no layout: libra's planner no plan) or LIBRA_EINTERNAL. Free
 * *out with libra_free.
 */
LIBRA_API int libra_sim(const char *config_json, const char *name, char **out,
                        struct libra_error *err);

/* ---- routing in process --------------------------------------------------------------------- */

/*
 * A router: C-MLFQ (or the config's sched.policy) over the config's buckets, for frameworks
 * that pick an engine per turn in their own process (verl's agent-loop server manager) rather
 * than through `libra serve`. It makes the calls the gateway makes on each event
 * (docs/serve.md "Steps and learning"): a trajectory starts, each turn is routed, the turn's
 * answer arrives, tool returns arrive, the trajectory finishes; at the end of a training step
 * the trajectories finished in it are learnt. The caller registers its engines as instances
 * and sends each turn where the decision says; the router counts the turns in flight on each
 * instance as its load.
 */
struct libra_router;

/* Where a turn goes and why. The strings are static. */
struct libra_decision {
    int64_t instance;      /* id of the instance to send the turn to (libra_router_add_instance) */
    int bucket;            /* the bucket of that instance (0 the shortest) */
    int policy_bucket;     /* the policy's bucket before any capacity fallback; -1: bucket-agnostic
                              policies (load_balance) */
    int from_bucket;       /* the policy's bucket before this decision; -1 on the first turn */
    int64_t prev_instance; /* the instance of the trajectory's previous turn; -1 on the first */
    const char *reason;    /* why the policy chose its bucket: "first", "stay", "no_node",
                              "disagree", "promote", "demote", "cost_veto", "quantum", "any" */
    const char *place;     /* how the instance was found: "sticky", "bucket", "fallback",
                              "overflow" (docs/routing.md) */
};

/*
 * Creates a router for the experiment of config_json (name as libra_plan's): the policy and
 * settings of its sched section, the bucket layout sched.buckets (bounds and TP sizes alone,
 * "tp8:30000", as a plan document's rollout.routing_buckets; instance counts, "tp8x2:30000",
 * are refused where no command runs a fleet of them), else the reference
 * layout of its workload on its model, the costs of its hardware and model for cache-aware
 * moves, and the tool-return classification of its workload. Returns 0 with *out set, or
 * LIBRA_EINVAL / LIBRA_EIO / LIBRA_EINTERNAL with err (an invalid config, or a workload without a
 * reference layout and no sched.buckets) and *out NULL. Free with libra_router_free.
 */
LIBRA_API int libra_router_new(const char *config_json, const char *name, struct libra_router **out,
                               struct libra_error *err);

/* Frees r and everything it holds; NULL is a no-op. */
LIBRA_API void libra_router_free(struct libra_router *r);

/* The bucket layout r routes over, in text form ("tp1:4000,tp2:12000,tp4:30000"). Valid
 * while r lives. */
LIBRA_API const char *libra_router_buckets(const struct libra_router *r);

/*
 * Registers an engine: instance id (the caller's, unique, 0 to INT64_MAX: a decision's -1
 * means "none") of tensor-parallel size tp, which serves the first bucket of the layout that
 * lists tp; *bucket (may be NULL) gets its index. Returns 0, LIBRA_EINVAL (id negative or
 * taken, or no bucket is served by tp) or LIBRA_ENOMEM (more than 4096 instances), with err.
 */
LIBRA_API int libra_router_add_instance(struct libra_router *r, int64_t id, int tp, int *bucket,
                                        struct libra_error *err);

/*
 * A trajectory starts. trajectory is the caller's id (any string, unique among live
 * trajectories), prompt the key of its prompt: an integer the caller chooses (0 to
 * INT64_MAX; siblings of a GRPO group share it), or libra_prompt_key of a string. Its first
 * turn is routed by libra_router_route. Returns 0, LIBRA_EINVAL (the id is live already, or
 * prompt > INT64_MAX) or LIBRA_ENOMEM (2^20 live trajectories), with err.
 */
LIBRA_API int libra_router_start(struct libra_router *r, const char *trajectory, uint64_t prompt,
                                 struct libra_error *err);

/*
 * A tool return of the trajectory's last turn arrived: the tool's name (NULL: unknown), its
 * status ("success", "failure", "timeout", "other"; NULL when the caller does not know, so
 * that the workload's rule or "success" applies) and its size in tokens (-1: unknown; else 0 to
 * 2^40, the most a trace holds). It is observed when the next turn is routed. Returns 0,
 * LIBRA_ENOENT (not a live trajectory) or LIBRA_EINVAL (an unknown status, a size below -1 or
 * past 2^40, or no turn routed yet), with err.
 */
LIBRA_API int libra_router_tool_return(struct libra_router *r, const char *trajectory,
                                       const char *tool, const char *status, int64_t payload_tokens,
                                       struct libra_error *err);

/*
 * Routes the trajectory's next turn, whose request holds context_tokens tokens (the whole
 * context; -1 when unknown, routed as 0; else 0 to 2^40), at now_s seconds on a monotonic clock
 * (finite; NAN: the library reads CLOCK_MONOTONIC; only the cmlfq_h policy weighs time). The first
 * turn is placed by the policy's start rule; a later one on the returns since the previous turn
 * (none announced: one return of an unknown tool, sized by the context's growth, as the gateway
 * derives it); a failed turn (libra_router_turn_done with -1) is placed again. The turn counts as
 * load on its instance until libra_router_turn_done. Returns 0 with *out set; LIBRA_ENOENT (not a
 * live trajectory, or no instance registered); LIBRA_EINVAL (a turn of it is in flight, tokens
 * below -1 or past 2^40, or an infinite now_s), with err; a refused call changes nothing.
 */
LIBRA_API int libra_router_route(struct libra_router *r, const char *trajectory,
                                 int64_t context_tokens, double now_s, struct libra_decision *out,
                                 struct libra_error *err);

/*
 * The trajectory's turn in flight ended having generated generated_tokens tokens (0 or more);
 * -1 says it failed (no answer), so that the next libra_router_route places it again. The
 * tokens of a trajectory's turns add up to at most 2^40, the most a trace holds. Returns 0,
 * LIBRA_ENOENT (not a live trajectory) or LIBRA_EINVAL (no turn in flight, a count below -1,
 * or the sum would pass 2^40: the turn stays in flight), with err.
 */
LIBRA_API int libra_router_turn_done(struct libra_router *r, const char *trajectory,
                                     int64_t generated_tokens, struct libra_error *err);

/*
 * The trajectory ended: status "completed" (the agent answered; NULL says the same),
 * "truncated" (a turn, token or context cap), "aborted" (stopped by the system) or
 * "filtered" (completed, dropped by dynamic sampling). Returns announced after its last turn
 * mean it was cut: completed then counts as truncated. Its state is freed; a turn still in
 * flight stops counting as load. Policies that learn keep it for libra_router_step; la_mlfq
 * remembers its bucket for its prompt at once. Returns 0, LIBRA_ENOENT or LIBRA_EINVAL (an
 * unknown status), with err.
 */
LIBRA_API int libra_router_finish(struct libra_router *r, const char *trajectory,
                                  const char *status, struct libra_error *err);

/*
 * A training step ended (new weights) at now_s (NAN: CLOCK_MONOTONIC): the trajectories
 * finished since the last step are learnt in the order they finished, the model is rebuilt
 * every sched.rebuild_interval steps, and cmlfq_h's deadline becomes rl.max_staleness + 1
 * times the mean step measured from the first step. Returns 0; LIBRA_EINVAL (now_s infinite,
 * or before the previous step's: nothing changes); or LIBRA_EINTERNAL, with err.
 */
LIBRA_API int libra_router_step(struct libra_router *r, double now_s, struct libra_error *err);

/* The prompt key of len bytes of text, as `libra serve` derives it from a string
 * "libra.prompt" (FNV-1a 64, in 0..INT64_MAX). */
LIBRA_API uint64_t libra_prompt_key(const void *text, size_t len);

/* ---- traces --------------------------------------------------------------------------------- */

/*
 * Trace files (docs/trace-format.md) as JSON text, one record at a time: a reader checks
 * every line as `libra trace validate` does and hands back its canonical form; a writer
 * checks each record and writes the file atomically (under a temporary name, renamed at
 * close).
 */
struct libra_trace_reader;
struct libra_trace_writer;

/*
 * Opens the trace at path ("-": standard input) and reads its header into *header_json (one
 * JSON object, canonical key order, with a newline; valid until the reader's next call).
 * Returns 0 with *out set; LIBRA_EIO or LIBRA_EINVAL (err at PATH:1:COL) with *out NULL.
 * Close with libra_trace_reader_close.
 */
LIBRA_API int libra_trace_reader_open(const char *path, struct libra_trace_reader **out,
                                      const char **header_json, struct libra_error *err);

/*
 * Reads the next trajectory into *record_json (as the header's, valid until the next call).
 * Returns 1 with a record, 0 at the end, LIBRA_EINVAL for a bad line (err at PATH:LINE:COL
 * "FIELD: REASON"; the next call reads the line after it, except after a line longer than
 * 64 MiB: the reader then stops and the next call returns 0) or LIBRA_EIO.
 */
LIBRA_API int libra_trace_reader_next(struct libra_trace_reader *r, const char **record_json,
                                      struct libra_error *err);

/* Closes the file; NULL is a no-op. */
LIBRA_API void libra_trace_reader_close(struct libra_trace_reader *r);

/*
 * Starts a trace at path ("-": standard output at close) with the header header_json (one
 * JSON object as a trace's line 1). Returns 0 with *out set, or LIBRA_EINVAL (a bad header:
 * err at PATH:1:COL) / LIBRA_EIO (path cannot be written, "" included) with *out NULL. End with
 * libra_trace_writer_close or libra_trace_writer_abort.
 */
LIBRA_API int libra_trace_writer_open(const char *path, const char *header_json,
                                      struct libra_trace_writer **out, struct libra_error *err);

/*
 * Appends one trajectory (one JSON object as a trace's line). Returns 0, LIBRA_EINVAL (the
 * record is invalid and not written: err at PATH:LINE:COL with LINE the line it would have
 * taken, "FIELD: REASON") or LIBRA_EIO.
 */
LIBRA_API int libra_trace_writer_put(struct libra_trace_writer *w, const char *record_json,
                                     struct libra_error *err);

/* Finishes the trace and renames it into place. Returns 0 or LIBRA_EIO with err (nothing is
 * left at path then). Frees w either way; NULL is a no-op returning 0. */
LIBRA_API int libra_trace_writer_close(struct libra_trace_writer *w, struct libra_error *err);

/* Abandons the trace: nothing is written; frees w. NULL is a no-op. */
LIBRA_API void libra_trace_writer_abort(struct libra_trace_writer *w);

#ifdef __cplusplus
}
#endif
#endif
