/*
 * What the gateway reads of a generation request: the few fields routing needs, found by a
 * bounded scanner (util/jscan.h) in the body as it arrived, which is then forwarded as bytes —
 * only libra's request object is cut out, by its byte range, unless it carries an emulated
 * engine's script (libra.emu, docs/emu.md), which the engine reads: it then goes on whole.
 * A member read given twice is refused (a JSON library keeps the last, the scanner the first).
 *
 * Read: the trajectory identity (the first present of libra.trajectory, trajectory_id (SkyRL),
 * header X-SMG-Routing-Key (slime), program_id (ThunderAgent), header X-Session-ID, and, when
 * the gateway opts in, rid (AReaL); trajectory_id of another type than a string or an object,
 * program_id of another than a string, is refused, outranked or not); the prompt identity
 * (libra.prompt, else, by a rule the gateway is given, the trajectory id up to a separator,
 * else a hash of the first prompt tokens: GRPO siblings share their prompt); the prompt length
 * in tokens (token ids counted; chat messages at four bytes per token); the generation budget;
 * whether the answer streams; and libra's events (tool returns, the end of a trajectory), which
 * may also arrive alone at POST /libra/v1/trajectories/{id}/events (gw_events_parse); for chat
 * requests, the tool messages after the last assistant message, named through their
 * tool_call_id (the fallback for chat clients that send no events).
 *
 * Pure: memory in, memory out (tests/fuzz/fuzz_serve_request.c).
 */
#ifndef SERVER_REQUEST_H
#define SERVER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/obs.h"
#include "trace/trace.h"
#include "util/jscan.h"

#define GW_ID_MAX 256        /* bytes of an identity's key, NUL included (gw_id_key) */
#define GW_ID_VALUE_MAX 4096 /* bytes of an identity's value a request or the events call names */
#define GW_EVENTS_MAX 64     /* events in one request or one events call */
#define GW_PROMPT_TOKENS 64  /* default: first prompt tokens hashed into the prompt key */
#define GW_PROMPT_MASK INT64_MAX /* prompt keys are 63-bit: a trace's prompt_id is >= 0 */

/* The generation APIs the gateway proxies. */
enum gw_api {
    GW_SGLANG_GENERATE, /* POST /generate: input_ids, sampling_params.max_new_tokens */
    GW_VLLM_GENERATE,   /* POST /inference/v1/generate: token_ids, sampling_params.max_tokens */
    GW_COMPLETIONS,     /* POST /v1/completions: prompt (token ids or text), max_tokens */
    GW_CHAT,            /* POST /v1/chat/completions: messages, max_tokens */
};

/* Where the trajectory identity came from (the order of precedence). */
enum gw_id_source {
    GW_ID_NONE,        /* none: routed as a single-turn trajectory */
    GW_ID_LIBRA,       /* libra.trajectory */
    GW_ID_TRAJECTORY,  /* trajectory_id (SkyRL) */
    GW_ID_ROUTING_KEY, /* header X-SMG-Routing-Key (slime) */
    GW_ID_PROGRAM,     /* program_id (ThunderAgent) */
    GW_ID_SESSION,     /* header X-Session-ID */
    GW_ID_RID,         /* rid (AReaL), only with gw_parse_config.rid_identity */
};

enum gw_event_kind { GW_EVENT_TOOL_RETURN, GW_EVENT_FINISH };

/* One event of a trajectory, as the client sent it. */
struct gw_event {
    enum gw_event_kind kind;
    char tool[SCHED_TOOL_NAME_MAX]; /* tool_return: the tool; "" unknown */
    int status;                     /* tool_return: an enum sched_status, or SCHED_STATUS_UNSET */
    int64_t payload_tokens;         /* tool_return: tokens of the return, -1 unknown */
    double exec_s;                  /* tool_return: execution seconds, -1 unknown */
    enum trace_finish finish;       /* finish: completed, truncated, aborted or filtered */
    bool has_reward;
    double reward;
};

/* A tool return read from chat messages (the fallback for chat clients that send no events):
 * a "tool" message after the last assistant message, named through its tool_call_id. */
struct gw_chat_return {
    char tool[SCHED_TOOL_NAME_MAX]; /* "" when the call is not found */
    const char *text;               /* its content as written in the body (escapes and all) */
    size_t text_len;                /* bytes of it: the size the classifier counts */
};

struct gw_parse_config {
    bool rid_identity; /* rid names the trajectory (AReaL) */
    int prompt_tokens; /* first prompt tokens hashed into the prompt key (GW_PROMPT_TOKENS) */
    char prompt_sep;   /* when set, the prompt key is the trajectory id up to its last
                          prompt_sep ("17-3": prompt "17"), where it has one */
};

/* Header look-up the caller supplies: a request header's value, NULL when absent. */
typedef const char *(*gw_header_fn)(void *ctx, const char *name);

/* What the gateway read of one generation request. gw_request_parse sets every field but the
 * entries of events and chat past n_events and n_chat, which it leaves as they were (8 KB a
 * request need not be cleared to read none of it). */
struct gw_request {
    enum gw_api api;
    enum gw_id_source id_source;
    char id[GW_ID_MAX];     /* gw_id_key of the identity ("" with GW_ID_NONE) */
    bool has_prompt;        /* libra.prompt was given */
    uint64_t prompt;        /* libra.prompt, else the hash of the first prompt tokens */
    int64_t prompt_tokens;  /* the context sent, tokens (chat: bytes / 4) */
    int64_t max_new_tokens; /* the generation budget, -1 when absent */
    bool stream;
    bool resume;          /* libra.resume: abort-and-resume this turn on an abort */
    bool emu;             /* libra.emu is given: libra's member goes to the engine whole */
    bool has_libra;       /* a libra member is cut out (cut is valid); never with emu */
    struct jscan_cut cut; /* forward body[0, head_len) then body[tail_off, len) */
    size_t n_events;
    size_t n_chat; /* chat only: the returns its messages end with (at most GW_EVENTS_MAX) */
    /* the arrays last: gw_request_parse clears what comes before them */
    struct gw_event events[GW_EVENTS_MAX];
    struct gw_chat_return chat[GW_EVENTS_MAX];
};

/*
 * Reads len bytes of body (a request to api) into *out; header may be NULL. Returns 0, or -1
 * with err saying what and where ("body:123: ...", "libra.events.2.status: ...") — the caller
 * answers 400.
 */
int gw_request_parse(enum gw_api api, const char *body, size_t len, gw_header_fn header,
                     void *header_ctx, const struct gw_parse_config *c, struct gw_request *out,
                     char *err, size_t err_size);

/*
 * Reads the body of POST /libra/v1/trajectories/{id}/events: {"events": [EVENT, ...]} or one
 * EVENT. Fills out[0..*n) (at most GW_EVENTS_MAX). Returns 0, or -1 with err.
 */
int gw_events_parse(const char *body, size_t len, struct gw_event *out, size_t *n, char *err,
                    size_t err_size);

/*
 * The body that sends SGLang turn r (parsed from body) again after its engine returned
 * n_more tokens of it, whose ids are the text ids[0..ids_len) ("5, 6, 7", the inside of the
 * answer's output_ids): input_ids with them appended, sampling_params.max_new_tokens lowered by
 * n_more, libra's member cut (with libra.emu: kept, its gen_tokens lowered by n_more, to 1 at
 * least); every other byte as it was. Returns a malloc'd body (*out_len
 * bytes and a NUL), or NULL when r is not an SGLang /generate with token ids and a budget
 * (gw_resume_fits).
 */
bool gw_resume_fits(const char *body, size_t len, const struct gw_request *r);
char *gw_resume_body(const char *body, size_t len, const struct gw_request *r, const char *ids,
                     size_t ids_len, int64_t n_more, size_t *out_len);

/* The tag of an identity's source in its key ("libra", "trajectory_id", ...; "" for
 * GW_ID_NONE); static storage. */
const char *gw_id_tag(enum gw_id_source src);

/*
 * The key a trajectory is followed by, for value[0..len) from source src (a string's text
 * unescaped, any other value as written): "<tag>:<value>" when that fits GW_ID_MAX, else
 * "<tag>#<16 hex digits of the value's hash>". A request and the events call name one
 * trajectory through it, so any value of at most GW_ID_VALUE_MAX bytes works for both.
 */
void gw_id_key(char out[GW_ID_MAX], enum gw_id_source src, const char *value, size_t len);

/* "sglang", "vllm", ...: the API's path; static storage. */
const char *gw_api_path(enum gw_api api);

/* 64-bit FNV-1a of len bytes continued from h (start with GW_HASH_SEED). */
#define GW_HASH_SEED 0xcbf29ce484222325ULL
uint64_t gw_hash(uint64_t h, const void *p, size_t len);

#endif
