/*
 * Importing agent logs: tau-bench's historical trajectories (one array of runs per file, each
 * run an OpenAI chat transcript with tool calls), SWE-agent's .traj files (one run per file: a
 * list of action/observation steps and the run's info), and OpenAI chat transcripts one per
 * JSON line (`messages` with system/user/assistant/tool roles, the shape of most agent SFT and
 * RL datasets). tau-bench and openai-chat share the chat-message mapping.
 *
 * These logs rarely count tokens per LLM call, time tool calls or say which call failed, so the
 * mapping estimates (docs/trace-format.md, "Importing"): tokens are characters divided by a
 * fixed ratio, rounded up; the context of a turn is what came before it; a call's status comes
 * from its output by the tool-status rules (import_status.c, replaceable by the user). Where a
 * log gives the provider's counts they win: SWE-agent's info.model_stats and a chat line's
 * `usage` give totals the per-turn estimates are scaled to; an assistant message's own `usage`
 * gives that turn's counts as they are.
 *
 * Whole documents are kept until the file ends, parsed once and converted one run per call, so
 * memory is the document's tree plus one trajectory; a chat line is parsed and converted alone.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/internal.h"
#include "util/alloc.h"
#include "util/arena.h"
#include "util/error.h"
#include "util/json.h"
#include "util/map.h"
#include "util/vec.h"

/* tau-bench ends a run when the agent calls this tool: the transfer is the agent's answer. */
#define TAU_TERMINAL_TOOL "transfer_to_human_agents"

/* OpenAI-chat tools whose call is the agent's answer (OpenHands' finish, SWE-agent's submit). */
static const char *const chat_terminal_tools[] = {"finish", "submit"};

/* The fields that identify a chat line's prompt and its attempt, first present wins. */
static const char *const chat_prompt_keys[] = {"task_id", "instance_id", "prompt_id", "id", NULL};
static const char *const chat_sample_keys[] = {"trial", "sample", "attempt", NULL};

/* The reward of a chat line: the first present of these (a number, or true/false). */
static const char *const chat_reward_keys[] = {"reward", "score", "resolved", NULL};

/* Turn token counts that came from the provider (usage), not from an estimate. */
enum { KNOWN_PROMPT = 1, KNOWN_GENERATED = 2 };

/* What awaits an answer: nothing, a tool call (tool_calls) or a legacy function_call. */
enum { CALL_CLOSED, CALL_OPEN_TOOL, CALL_OPEN_FUNCTION };

/* SWE-agent exit statuses that name a cap (cost, context, format retries, time): truncated. */
static const char *const swe_cap_statuses[] = {"exit_cost", "exit_context", "exit_format",
                                               "exit_total_execution_time"};

struct trace_agentlog {
    enum trace_import_format format;
    double chars_per_token;
    int64_t group_size;              /* the header's; 0: unknown */
    struct trace_status_rules rules; /* the caller's lists */
    /* the current file */
    char *name;
    VEC(char) text;
    struct ujson_doc doc;
    bool parsed;
    size_t next; /* index of the next run (tau-bench) */
    bool done;
    struct map instances;     /* SWE-agent instance, chat prompt identity -> prompt id */
    VEC(int64_t) next_sample; /* by prompt id */
    VEC(char) scratch;        /* a chat message's text parts joined */
    VEC(char) key;            /* a chat line's prompt identity */
    /* the last trajectory and what it points into */
    struct trace_traj traj;
    VEC(struct trace_turn) turns;
    VEC(unsigned char) known; /* per turn: KNOWN_* bits */
    VEC(struct trace_tool_call) calls;
    VEC(const char *) call_ids;   /* chat: the id of each call, for joining tool messages */
    VEC(unsigned char) call_open; /* chat: CALL_* of each call */
    struct arena names;
};

int64_t trace_estimate_tokens(const char *s, size_t n, double chars_per_token)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    return (int64_t)ceil((double)chars / chars_per_token);
}

struct trace_agentlog *trace_agentlog_new(enum trace_import_format format, double chars_per_token,
                                          int64_t group_size,
                                          const struct trace_status_rules *rules)
{
    struct trace_agentlog *a = xcalloc(1, sizeof *a);
    a->format = format;
    a->chars_per_token = chars_per_token;
    a->group_size = group_size;
    a->rules = *rules;
    map_init(&a->instances);
    arena_init(&a->names, 0);
    return a;
}

void trace_agentlog_free(struct trace_agentlog *a)
{
    if (!a)
        return;
    free(a->name);
    vec_free(&a->text);
    ujson_doc_free(&a->doc);
    map_free(&a->instances);
    vec_free(&a->next_sample);
    vec_free(&a->scratch);
    vec_free(&a->key);
    json_decref(a->traj.extra);
    vec_free(&a->turns);
    vec_free(&a->known);
    vec_free(&a->calls);
    vec_free(&a->call_ids);
    vec_free(&a->call_open);
    arena_free(&a->names);
    free(a);
}

void trace_agentlog_begin(struct trace_agentlog *a, const char *name)
{
    free(a->name);
    a->name = xstrdup(name);
    a->text.n = 0;
    ujson_doc_free(&a->doc);
    memset(&a->doc, 0, sizeof a->doc);
    a->parsed = a->done = false;
    a->next = 0;
}

void trace_agentlog_add(struct trace_agentlog *a, const char *line, size_t len)
{
    vec_reserve(&a->text, a->text.n + len + 1);
    memcpy(a->text.v + a->text.n, line, len);
    a->text.n += len;
    a->text.v[a->text.n++] = '\n';
}

/* ---- shared pieces ----------------------------------------------------------------------- */

static int64_t tokens_of(const struct trace_agentlog *a, const char *s)
{
    return s ? trace_estimate_tokens(s, strlen(s), a->chars_per_token) : 0;
}

/* The status of a tool output by the rules (import_status.c). */
static enum trace_tool_status status_of(const struct trace_agentlog *a, const char *out)
{
    return trace_status_of(&a->rules, out);
}

/* Reads member key of obj at path as a string; null or absent give NULL (allowed when
 * optional), anything else is an error. */
static int get_text(const struct trace_agentlog *a, const json_t *obj, const char *path,
                    const char *key, bool optional, const char **out, struct libra_error *err)
{
    const json_t *v = json_object_get(obj, key);
    char at[256];
    snprintf(at, sizeof at, "%s%s%s", path, *path ? "/" : "", key);
    *out = json_string_value(v);
    if (json_is_string(v) || ((!v || json_is_null(v)) && optional))
        return 0;
    return ujson_errorf(err, &a->doc, at, "%s", v ? "expected a string" : "missing");
}

static void reset_traj(struct trace_agentlog *a)
{
    json_decref(a->traj.extra);
    memset(&a->traj, 0, sizeof a->traj);
    a->traj.version_end = -1;
    a->turns.n = a->known.n = a->calls.n = a->call_ids.n = a->call_open.n = 0;
    arena_reset(&a->names);
}

static struct trace_turn *add_turn(struct trace_agentlog *a, int64_t prompt, int64_t generated)
{
    struct trace_turn u = {
        .prompt_tokens = prompt, .cached_tokens = -1, .generated_tokens = generated};
    vec_push(&a->turns, u);
    vec_push(&a->known, 0);
    return &a->turns.v[a->turns.n - 1];
}

/* Appends a call to the last turn. Calls are only ever added to the last turn, so each turn's
 * calls stay contiguous. */
static struct trace_tool_call *add_call(struct trace_agentlog *a, const char *tool, const char *id)
{
    struct trace_tool_call c = {.tool = arena_strdup(&a->names, tool && *tool ? tool : "tool"),
                                .status = TRACE_TOOL_OTHER,
                                .queue_us = -1,
                                .exec_us = -1};
    vec_push(&a->calls, c);
    vec_push(&a->call_ids, id);
    vec_push(&a->call_open, CALL_CLOSED);
    a->turns.v[a->turns.n - 1].n_calls++;
    return &a->calls.v[a->calls.n - 1];
}

/* Drops the calls of the last turn (they must be the last calls). */
static void drop_last_calls(struct trace_agentlog *a)
{
    struct trace_turn *u = &a->turns.v[a->turns.n - 1];
    a->calls.n -= u->n_calls;
    u->n_calls = 0;
}

/* Points every turn at its calls and checks the record. path names the run in errors. */
static int finish_traj(struct trace_agentlog *a, const char *path, const struct trace_traj **out,
                       struct libra_error *err)
{
    size_t next = 0;
    for (size_t i = 0; i < a->turns.n; i++) {
        a->turns.v[i].calls = a->turns.v[i].n_calls ? a->calls.v + next : NULL;
        next += a->turns.v[i].n_calls;
    }
    a->traj.turns = a->turns.v;
    a->traj.n_turns = a->turns.n;
    struct libra_error why = {0};
    if (trace_check_traj(&a->traj, a->group_size, &why))
        return ujson_errorf(err, &a->doc, path, "%s", why.msg);
    *out = &a->traj;
    return 1;
}

/* Refuses a sample that the member at path gave (a run's "trial") when it is not below the
 * header's group size, naming that member rather than the record's "sample" that
 * trace_check_traj would. Returns 0 or LIBRA_EINVAL. */
static int check_sample(const struct trace_agentlog *a, const char *path, int64_t sample,
                        struct libra_error *err)
{
    if (a->group_size > 0 && sample >= a->group_size)
        return ujson_errorf(err, &a->doc, path, "%lld is not below the header's group_size %lld",
                            (long long)sample, (long long)a->group_size);
    return 0;
}

/* The prompt id of identity key (numbered by first appearance) and the number of trajectories
 * of that prompt seen before this one. */
static int64_t prompt_of(struct trace_agentlog *a, const char *key, int64_t *seen)
{
    bool inserted;
    union map_value *slot = map_slot(&a->instances, key, &inserted);
    if (inserted) {
        slot->i64 = (int64_t)a->next_sample.n;
        vec_push(&a->next_sample, 0);
    }
    *seen = a->next_sample.v[slot->i64]++;
    return slot->i64;
}

/* ---- chat messages (tau-bench, openai-chat) ---------------------------------------------- */

/* The tokens of a chat message's content: a string, or the "text" parts of a list. */
static int64_t content_tokens(const struct trace_agentlog *a, const json_t *content)
{
    if (json_is_string(content))
        return tokens_of(a, json_string_value(content));
    int64_t n = 0;
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part) n +=
        tokens_of(a, json_string_value(json_object_get(part, "text")));
    return n;
}

/* The text of a chat message's content (its "text" parts joined by newlines); NULL for none.
 * Valid until the next call. */
static const char *content_text(struct trace_agentlog *a, const json_t *content)
{
    if (!json_is_array(content))
        return json_string_value(content);
    a->scratch.n = 0;
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        size_t n = t ? strlen(t) : 0;
        vec_reserve(&a->scratch, a->scratch.n + n + 2);
        if (a->scratch.n)
            a->scratch.v[a->scratch.n++] = '\n';
        memcpy(a->scratch.v + a->scratch.n, t ? t : "", n);
        a->scratch.n += n;
    }
    vec_push(&a->scratch, '\0');
    return a->scratch.v;
}

/* Checks the parts of a content array at path: objects ({"type": "text", "text": ...}; other
 * types, such as images, hold no text), whose "text" is a string when present. */
static int check_parts(const struct trace_agentlog *a, const json_t *parts, const char *path,
                       struct libra_error *err)
{
    size_t i;
    const json_t *part;
    json_array_foreach(parts, i, part)
    {
        char at[300];
        snprintf(at, sizeof at, "%s/%zu", path, i);
        const char *text;
        int rc = json_is_object(part)
                     ? get_text(a, part, at, "text", true, &text, err)
                     : ujson_errorf(err, &a->doc, at, "expected a content part object");
        if (rc)
            return rc;
    }
    return 0;
}

/* Checks member "content" of message m: a string, an array of parts, null or absent. */
static int check_content(const struct trace_agentlog *a, const json_t *m, const char *path,
                         const json_t **out, struct libra_error *err)
{
    *out = json_object_get(m, "content");
    char at[256];
    snprintf(at, sizeof at, "%s/content", path);
    if (json_is_array(*out))
        return check_parts(a, *out, at, err);
    if (!*out || json_is_null(*out) || json_is_string(*out))
        return 0;
    return ujson_errorf(err, &a->doc, at, "expected a string, an array of content parts or null");
}

/* Tokens of a JSON value: a string's text (function arguments as OpenAI sends them), else the
 * value's compact JSON text (arguments given as an object, tool definitions). */
static int64_t value_tokens(const struct trace_agentlog *a, const json_t *v)
{
    if (!v || json_is_string(v) || json_is_null(v))
        return tokens_of(a, json_string_value(v));
    char *text = ujson_dump(v, false);
    int64_t n = tokens_of(a, text);
    free(text);
    return n;
}

/* Checks a function object {name, arguments} at path; adds its arguments' tokens to *gen. */
static int check_function(const struct trace_agentlog *a, const json_t *fn, const char *path,
                          int64_t *gen, struct libra_error *err)
{
    if (!json_is_object(fn))
        return ujson_errorf(err, &a->doc, path, "expected an object");
    const char *name;
    int rc = get_text(a, fn, path, "name", false, &name, err);
    if (rc)
        return rc;
    const json_t *args = json_object_get(fn, "arguments");
    if (args && !json_is_string(args) && !json_is_object(args) && !json_is_null(args)) {
        char at[256];
        snprintf(at, sizeof at, "%s/arguments", path);
        return ujson_errorf(err, &a->doc, at, "expected a string, an object or null");
    }
    *gen += value_tokens(a, args);
    return 0;
}

/* Reads an integer >= 0 member key of obj at path into *out; absent or null leave it alone. */
static int opt_count(const struct trace_agentlog *a, const json_t *obj, const char *path,
                     const char *key, int64_t *out, struct libra_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    char at[256];
    snprintf(at, sizeof at, "%s/%s", path, key);
    if (!ujson_as_int64(v, out) || *out < 0)
        return ujson_errorf(err, &a->doc, at, "expected an integer >= 0");
    return 0;
}

/* The provider's counts of one LLM call (an assistant message's usage); -1 where not given. */
struct usage {
    int64_t prompt, completion, cached;
};

static int read_usage(const struct trace_agentlog *a, const json_t *obj, const char *path,
                      struct usage *u, struct libra_error *err)
{
    *u = (struct usage){-1, -1, -1};
    const json_t *usage = json_object_get(obj, "usage");
    if (!usage || json_is_null(usage))
        return 0;
    char at[256];
    snprintf(at, sizeof at, "%s%susage", path, *path ? "/" : "");
    if (!json_is_object(usage))
        return ujson_errorf(err, &a->doc, at, "expected an object");
    int rc;
    if ((rc = opt_count(a, usage, at, "prompt_tokens", &u->prompt, err)) ||
        (rc = opt_count(a, usage, at, "completion_tokens", &u->completion, err)))
        return rc;
    const json_t *details = json_object_get(usage, "prompt_tokens_details");
    if (!json_is_object(details))
        return 0;
    char dat[300];
    snprintf(dat, sizeof dat, "%s/prompt_tokens_details", at);
    if ((rc = opt_count(a, details, dat, "cached_tokens", &u->cached, err)))
        return rc;
    if (u->prompt < 0)
        u->cached = -1; /* a share of an unknown count */
    if (u->cached > u->prompt) {
        snprintf(dat, sizeof dat, "%s/prompt_tokens_details/cached_tokens", at);
        return ujson_errorf(err, &a->doc, dat, "%lld exceeds prompt_tokens %lld",
                            (long long)u->cached, (long long)u->prompt);
    }
    return 0;
}

/* An assistant message: checks it, then adds its turn (prompt: *context, or its usage) and one
 * open call per tool call (or function_call). */
static int chat_assistant(struct trace_agentlog *a, const json_t *m, const char *path,
                          int64_t *context, struct libra_error *err)
{
    const json_t *content, *calls = json_object_get(m, "tool_calls");
    const json_t *legacy = json_object_get(m, "function_call");
    const char *reasoning;
    char at[256];
    int rc;
    if ((rc = check_content(a, m, path, &content, err)) ||
        (rc = get_text(a, m, path, "reasoning_content", true, &reasoning, err)))
        return rc;
    int64_t gen = content_tokens(a, content) + tokens_of(a, reasoning);
    if (json_is_null(calls))
        calls = NULL;
    if (calls && !json_is_array(calls)) {
        snprintf(at, sizeof at, "%s/tool_calls", path);
        return ujson_errorf(err, &a->doc, at, "expected an array");
    }
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        const char *id;
        snprintf(at, sizeof at, "%s/tool_calls/%zu", path, i);
        if (!json_is_object(c))
            return ujson_errorf(err, &a->doc, at, "expected a tool call object");
        if ((rc = get_text(a, c, at, "id", true, &id, err)))
            return rc;
        snprintf(at, sizeof at, "%s/tool_calls/%zu/function", path, i);
        if ((rc = check_function(a, json_object_get(c, "function"), at, &gen, err)))
            return rc;
    }
    if (json_is_null(legacy))
        legacy = NULL;
    snprintf(at, sizeof at, "%s/function_call", path);
    if (legacy && (rc = check_function(a, legacy, at, &gen, err)))
        return rc;
    struct usage use = {-1, -1, -1};
    if (a->format == TRACE_IMPORT_OPENAI_CHAT && (rc = read_usage(a, m, path, &use, err)))
        return rc;
    struct trace_turn *u = add_turn(a, use.prompt >= 0 ? use.prompt : *context,
                                    use.completion >= 0 ? use.completion : gen);
    u->cached_tokens = use.cached;
    a->known.v[a->known.n - 1] = (unsigned char)((use.prompt >= 0 ? KNOWN_PROMPT : 0) |
                                                 (use.completion >= 0 ? KNOWN_GENERATED : 0));
    *context += gen;
    json_array_foreach(calls, i, c)
    {
        const json_t *fn = json_object_get(c, "function");
        add_call(a, json_string_value(json_object_get(fn, "name")),
                 json_string_value(json_object_get(c, "id")));
        a->call_open.v[a->call_open.n - 1] = CALL_OPEN_TOOL;
    }
    if (legacy) {
        add_call(a, json_string_value(json_object_get(legacy, "name")), NULL);
        a->call_open.v[a->call_open.n - 1] = CALL_OPEN_FUNCTION;
    }
    return 0;
}

/*
 * The open call of the last turn that a tool or function message answers: by id when given,
 * else (tool) the first open one, or (function, name when given) the first open function_call
 * of that name. -1 when none.
 */
static long answered_call(const struct trace_agentlog *a, bool function, const char *id,
                          const char *name)
{
    size_t first = a->turns.n ? a->calls.n - a->turns.v[a->turns.n - 1].n_calls : a->calls.n;
    for (size_t i = first; i < a->calls.n; i++) {
        bool match = a->call_open.v[i] == (function ? CALL_OPEN_FUNCTION : CALL_OPEN_TOOL);
        if (function && name)
            match = match && strcmp(a->calls.v[i].tool, name) == 0;
        else if (!function && id)
            match = match && a->call_ids.v[i] && strcmp(a->call_ids.v[i], id) == 0;
        if (match)
            return (long)i;
    }
    return -1;
}

/* One message of a transcript (path names it) into the trajectory being built; *context is
 * the estimated tokens of everything before it. */
static int chat_message(struct trace_agentlog *a, const json_t *m, const char *path,
                        int64_t *context, struct libra_error *err)
{
    const char *role;
    const json_t *content;
    int rc;
    if (!json_is_object(m))
        return ujson_errorf(err, &a->doc, path, "expected a message object");
    if ((rc = get_text(a, m, path, "role", false, &role, err)))
        return rc;
    if (strcmp(role, "assistant") == 0)
        return chat_assistant(a, m, path, context, err);
    if ((rc = check_content(a, m, path, &content, err)))
        return rc;
    int64_t size = content_tokens(a, content);
    *context += size;
    bool user = strcmp(role, "user") == 0;
    if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0 || (user && a->turns.n == 0))
        return 0;
    if (user) {
        /* the customer (tau-bench) or the environment answers the agent in a user message:
         * what the next turn waits on */
        struct trace_tool_call *c = add_call(a, "user", NULL);
        c->status = a->format == TRACE_IMPORT_TAU_BENCH ? TRACE_TOOL_SUCCESS
                                                        : status_of(a, content_text(a, content));
        c->payload_tokens = size;
        return 0;
    }
    bool function = strcmp(role, "function") == 0;
    char at[256];
    if (!function && strcmp(role, "tool") != 0) {
        snprintf(at, sizeof at, "%s/role", path);
        return ujson_errorf(err, &a->doc, at,
                            "unknown role '%s' (expected system, developer, user, assistant, "
                            "tool or function)",
                            role);
    }
    const char *id = NULL, *name = NULL;
    if ((rc = get_text(a, m, path, function ? "name" : "tool_call_id", true, function ? &name : &id,
                       err)))
        return rc;
    long k = answered_call(a, function, id, name);
    if (k < 0) {
        const char *key = function ? "name" : "tool_call_id", *val = function ? name : id;
        snprintf(at, sizeof at, "%s%s%s", path, val ? "/" : "", val ? key : "");
        if (val)
            return ujson_errorf(err, &a->doc, at,
                                "'%s' answers no open %s of the last assistant "
                                "message",
                                val, function ? "function_call" : "tool call");
        return ujson_errorf(err, &a->doc, at,
                            "%s message answers no open %s of the last "
                            "assistant message",
                            role, function ? "function_call" : "tool call");
    }
    a->calls.v[k].payload_tokens = size;
    a->calls.v[k].status = status_of(a, content_text(a, content));
    a->call_open.v[k] = CALL_CLOSED;
    return 0;
}

/* ---- tau-bench --------------------------------------------------------------------------- */

/* Reads an integer >= 0 member of run (path names the run). */
static int run_int(const struct trace_agentlog *a, const json_t *run, const char *path,
                   const char *key, int64_t *out, struct libra_error *err)
{
    const json_t *v = json_object_get(run, key);
    char at[256];
    snprintf(at, sizeof at, "%s/%s", path, key);
    if (!v)
        return ujson_errorf(err, &a->doc, path, "%s: missing", key);
    if (!ujson_as_int64(v, out) || *out < 0)
        return ujson_errorf(err, &a->doc, at, "expected an integer >= 0");
    return 0;
}

static int tau_run(struct trace_agentlog *a, const json_t *run, size_t index,
                   const struct trace_traj **out, struct libra_error *err)
{
    char path[64], at[96];
    snprintf(path, sizeof path, "%zu", index);
    reset_traj(a);
    if (!json_is_object(run))
        return ujson_errorf(err, &a->doc, path, "expected a run object");
    int64_t task, trial;
    int rc;
    snprintf(at, sizeof at, "%s/trial", path);
    if ((rc = run_int(a, run, path, "task_id", &task, err)) ||
        (rc = run_int(a, run, path, "trial", &trial, err)) ||
        (rc = check_sample(a, at, trial, err)))
        return rc;
    const json_t *reward = json_object_get(run, "reward");
    snprintf(at, sizeof at, "%s/reward", path);
    if (reward && !json_is_null(reward) && !ujson_as_double(reward, &a->traj.reward))
        return ujson_errorf(err, &a->doc, at, "expected a number");
    a->traj.has_reward = reward && !json_is_null(reward);
    const json_t *msgs = json_object_get(run, "traj");
    snprintf(at, sizeof at, "%s/traj", path);
    if (!json_is_array(msgs))
        return msgs ? ujson_errorf(err, &a->doc, at, "expected an array of messages")
                    : ujson_errorf(err, &a->doc, path, "traj: missing");
    int64_t context = 0;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        snprintf(at, sizeof at, "%s/traj/%zu", path, i);
        if ((rc = chat_message(a, m, at, &context, err)))
            return rc;
    }
    snprintf(at, sizeof at, "%s/traj", path);
    if (a->turns.n == 0)
        return ujson_errorf(err, &a->doc, at, "no assistant message (nothing to import)");
    a->traj.prompt_id = task;
    a->traj.sample = trial;
    a->traj.extra = json_pack("{s:I,s:I}", "task_id", (json_int_t)task, "trial", (json_int_t)trial);
    const struct trace_turn *last = &a->turns.v[a->turns.n - 1];
    const struct trace_tool_call *end = last->n_calls ? &a->calls.v[a->calls.n - 1] : NULL;
    if (!end) {
        a->traj.finish = TRACE_FINISH_COMPLETED;
    } else if (strcmp(end->tool, TAU_TERMINAL_TOOL) == 0 || strcmp(end->tool, "user") == 0) {
        /* the customer's last message (###STOP###) or the transfer ends the run: what came
         * back never reaches the model */
        json_object_set_new(a->traj.extra, "ended_by", json_string(end->tool));
        drop_last_calls(a);
        a->traj.finish = TRACE_FINISH_COMPLETED;
    } else {
        a->traj.finish = TRACE_FINISH_TRUNCATED; /* cut after a call: the step cap */
    }
    return finish_traj(a, path, out, err);
}

/* ---- SWE-agent --------------------------------------------------------------------------- */

/* Tokens of a list of chat messages (a step's query, or the history before the first turn). */
static int64_t messages_tokens(const struct trace_agentlog *a, const json_t *msgs, bool until_llm)
{
    int64_t n = 0;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (until_llm && role && strcmp(role, "assistant") == 0)
            break;
        n += content_tokens(a, json_object_get(m, "content"));
    }
    return n;
}

/* The tool of an action: its first word ("edit", "python", "submit"); "none" when empty. */
static char *action_tool(struct trace_agentlog *a, const char *action)
{
    const char *s = action ? action : "";
    s += strspn(s, " \t\r\n");
    size_t n = strcspn(s, " \t\r\n");
    if (n == 0)
        return "none";
    char *name = arena_alloc(&a->names, n + 1);
    memcpy(name, s, n);
    name[n] = '\0';
    return name;
}

/* The turns' prompt_tokens (field 0) or generated_tokens (field 1): those that came from
 * usage (KNOWN_*) summed, and the estimated ones summed and counted, with the last's index. */
struct field_sums {
    int64_t known, estimated;
    size_t n_estimated, last;
};

static struct field_sums field_sums(const struct trace_agentlog *a, int field)
{
    unsigned char bit = field ? KNOWN_GENERATED : KNOWN_PROMPT;
    struct field_sums s = {0};
    for (size_t i = 0; i < a->turns.n; i++) {
        int64_t v = field ? a->turns.v[i].generated_tokens : a->turns.v[i].prompt_tokens;
        if (a->known.v[i] & bit) {
            s.known += v;
        } else {
            s.estimated += v;
            s.last = i;
            s.n_estimated++;
        }
    }
    return s;
}

/*
 * Rescales the estimated prompt_tokens (field 0) or generated_tokens (field 1) of the turns so
 * that all turns sum to total: turns whose count came from usage (KNOWN_*) keep it and the
 * others share what remains, rounding cumulative sums so that the rounded values add up to it
 * exactly. Returns the factor, or 0 when there was nothing to scale (no estimated turn, or
 * nothing left for them).
 */
static double scale_to(struct trace_agentlog *a, int field, int64_t total)
{
    unsigned char bit = field ? KNOWN_GENERATED : KNOWN_PROMPT;
    struct field_sums s = field_sums(a, field);
    total -= s.known;
    if (s.n_estimated == 0 || s.estimated <= 0 || total <= 0)
        return 0;
    double f = (double)total / (double)s.estimated, cum = 0;
    int64_t given = 0;
    for (size_t i = 0; i < a->turns.n; i++) {
        if (a->known.v[i] & bit)
            continue;
        int64_t *v = field ? &a->turns.v[i].generated_tokens : &a->turns.v[i].prompt_tokens;
        cum += (double)*v;
        int64_t upto = i == s.last ? total : (int64_t)llround(cum * f);
        *v = upto - given;
        given = upto;
    }
    return f;
}

static enum trace_finish swe_finish(const char *status)
{
    if (!status)
        return TRACE_FINISH_ABORTED;
    if (strcmp(status, "submitted") == 0)
        return TRACE_FINISH_COMPLETED;
    for (size_t i = 0; i < sizeof swe_cap_statuses / sizeof *swe_cap_statuses; i++)
        if (strstr(status, swe_cap_statuses[i]))
            return TRACE_FINISH_TRUNCATED;
    return TRACE_FINISH_ABORTED;
}

/* The instance a file holds: its name without directories and without ".traj". */
static void instance_of(const char *file, char *out, size_t size)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".traj") == 0)
        n -= 5;
    snprintf(out, size, "%.*s", (int)n, base);
}

/* A step's execution_time (seconds; null or absent: unknown) into *exec_us, at most what a
 * trace holds (TRACE_MAX_TOOL_US). */
static int swe_exec_time(const struct trace_agentlog *a, const json_t *st, const char *path,
                         int64_t *exec_us, struct libra_error *err)
{
    const json_t *t = json_object_get(st, "execution_time");
    double secs, most = floor((double)TRACE_MAX_TOOL_US / 1e6);
    if (!t || json_is_null(t))
        return 0;
    if (!ujson_as_double(t, &secs) || !(secs >= 0 && secs <= most)) {
        char at[96];
        snprintf(at, sizeof at, "%s/execution_time", path);
        return ujson_errorf(err, &a->doc, at, "expected seconds from 0 to %.0f", most);
    }
    *exec_us = llround(secs * 1e6);
    return 0;
}

static int swe_step(struct trace_agentlog *a, const json_t *st, size_t i, int64_t *context,
                    struct libra_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "trajectory/%zu", i);
    if (!json_is_object(st))
        return ujson_errorf(err, &a->doc, path, "expected a step object");
    const char *action, *obs, *response, *thought;
    int rc;
    if ((rc = get_text(a, st, path, "action", false, &action, err)) ||
        (rc = get_text(a, st, path, "observation", true, &obs, err)) ||
        (rc = get_text(a, st, path, "response", true, &response, err)) ||
        (rc = get_text(a, st, path, "thought", true, &thought, err)))
        return rc;
    int64_t gen = response && *response ? tokens_of(a, response)
                                        : tokens_of(a, thought) + tokens_of(a, action);
    const json_t *query = json_object_get(st, "query");
    if (!json_is_array(query))
        query = json_object_get(st, "messages");
    int64_t prompt = json_is_array(query) ? messages_tokens(a, query, false) : *context;
    add_turn(a, prompt, gen);
    struct trace_tool_call *c = add_call(a, action_tool(a, action), NULL);
    c->payload_tokens = tokens_of(a, obs);
    c->status = status_of(a, obs);
    if ((rc = swe_exec_time(a, st, path, &c->exec_us, err)))
        return rc;
    *context = prompt + gen + c->payload_tokens;
    return 0;
}

static int swe_run(struct trace_agentlog *a, const struct trace_traj **out, struct libra_error *err)
{
    const json_t *root = a->doc.root;
    reset_traj(a);
    if (!json_is_object(root))
        return ujson_errorf(err, &a->doc, "", "expected a .traj object");
    const json_t *steps = json_object_get(root, "trajectory");
    if (!json_is_array(steps))
        return steps ? ujson_errorf(err, &a->doc, "trajectory", "expected an array of steps")
                     : ujson_errorf(err, &a->doc, "", "trajectory: missing");
    if (json_array_size(steps) == 0)
        return ujson_errorf(err, &a->doc, "trajectory", "no steps (nothing to import)");
    const json_t *history = json_object_get(root, "history");
    int64_t context = json_is_array(history) ? messages_tokens(a, history, true) : 0;
    size_t i;
    const json_t *st;
    int rc;
    json_array_foreach(steps, i, st) if ((rc = swe_step(a, st, i, &context, err))) return rc;
    const json_t *info = json_object_get(root, "info");
    if (info && !json_is_object(info))
        return ujson_errorf(err, &a->doc, "info", "expected an object");
    const char *status;
    if ((rc = get_text(a, info, "info", "exit_status", true, &status, err)))
        return rc;
    a->traj.finish = swe_finish(status);
    char instance[256];
    instance_of(a->name, instance, sizeof instance);
    a->traj.prompt_id = prompt_of(a, instance, &a->traj.sample);
    json_t *extra = json_pack("{s:s}", "instance", instance);
    if (status)
        json_object_set_new(extra, "exit_status", json_string(status));
    if (a->traj.finish == TRACE_FINISH_COMPLETED) {
        /* the final action (submit) ends the run: its output never reaches the model */
        json_object_set_new(extra, "final_action", json_string(a->calls.v[a->calls.n - 1].tool));
        drop_last_calls(a);
    }
    const json_t *stats = json_object_get(info, "model_stats");
    int64_t sent = 0, received = 0, api_calls = -1;
    if (stats && !json_is_object(stats) && !json_is_null(stats))
        rc = ujson_errorf(err, &a->doc, "info/model_stats", "expected an object");
    if (!rc)
        rc = opt_count(a, stats, "info/model_stats", "api_calls", &api_calls, err);
    if (!rc)
        rc = opt_count(a, stats, "info/model_stats", "tokens_sent", &sent, err);
    if (!rc)
        rc = opt_count(a, stats, "info/model_stats", "tokens_received", &received, err);
    if (rc) {
        json_decref(extra);
        return rc;
    }
    if (api_calls >= 0)
        json_object_set_new(extra, "api_calls", json_integer(api_calls));
    json_t *scale = json_object();
    if (sent > 0) {
        double f = scale_to(a, 0, sent);
        if (f > 0)
            json_object_set_new(scale, "prompt_tokens", ujson_real(f));
    }
    if (received > 0) {
        double f = scale_to(a, 1, received);
        if (f > 0)
            json_object_set_new(scale, "generated_tokens", ujson_real(f));
    }
    if (json_object_size(scale))
        json_object_set_new(extra, "scale", scale);
    else
        json_decref(scale);
    a->traj.extra = extra;
    return finish_traj(a, "", out, err);
}

/* ---- OpenAI chat lines ------------------------------------------------------------------- */

/* The first present (non-null) member of obj among keys (NULL-terminated); NULL when none.
 * *key gets its name. */
static const json_t *first_of(const json_t *obj, const char *const *keys, const char **key)
{
    for (size_t i = 0; keys[i]; i++) {
        const json_t *v = json_object_get(obj, keys[i]);
        if (v && !json_is_null(v)) {
            *key = keys[i];
            return v;
        }
    }
    return NULL;
}

/* Appends n bytes to the identity key being built. */
static void key_add(struct trace_agentlog *a, const char *s, size_t n)
{
    vec_reserve(&a->key, a->key.n + n + 1);
    memcpy(a->key.v + a->key.n, s, n);
    a->key.n += n;
    a->key.v[a->key.n] = '\0';
}

/*
 * The prompt of a line: the value of its first identity field ("task_id" ...), else the text of
 * the messages before the first assistant message (prompts told apart by their exact text, as
 * verl's are). Numbered by first appearance; the sample is the attempt field when given, else
 * the line's index among the prompt's lines. Fills prompt_id, sample and extra.
 */
static int chat_identity(struct trace_agentlog *a, const json_t *root, const json_t *msgs,
                         struct libra_error *err)
{
    const char *id_key = NULL, *sample_key = NULL;
    const json_t *id = first_of(root, chat_prompt_keys, &id_key);
    const json_t *sample = first_of(root, chat_sample_keys, &sample_key);
    int64_t n;
    a->key.n = 0;
    key_add(a, "", 0);
    if (id) {
        char text[32];
        if (!json_is_string(id) && !ujson_as_int64(id, &n))
            return ujson_errorf(err, &a->doc, id_key, "expected a string or an integer");
        if (!json_is_string(id))
            snprintf(text, sizeof text, "%lld", (long long)n);
        key_add(a, "#", 1); /* never the first byte of the text form below */
        const char *v = json_is_string(id) ? json_string_value(id) : text;
        key_add(a, v, strlen(v));
    } else {
        size_t i;
        const json_t *m;
        json_array_foreach(msgs, i, m)
        {
            const char *role = json_string_value(json_object_get(m, "role"));
            if (role && strcmp(role, "assistant") == 0)
                break;
            const char *t = content_text(a, json_object_get(m, "content"));
            key_add(a, "\x1e", 1);
            key_add(a, t ? t : "", t ? strlen(t) : 0);
        }
    }
    int64_t s = 0;
    if (sample && (!ujson_as_int64(sample, &s) || s < 0))
        return ujson_errorf(err, &a->doc, sample_key, "expected an integer >= 0");
    int rc = sample ? check_sample(a, sample_key, s, err) : 0;
    if (rc)
        return rc;
    int64_t index;
    a->traj.prompt_id = prompt_of(a, a->key.v, &index);
    a->traj.sample = sample ? s : index;
    a->traj.extra = json_object();
    if (id)
        json_object_set(a->traj.extra, id_key, (json_t *)id);
    if (sample)
        json_object_set(a->traj.extra, sample_key, (json_t *)sample);
    return 0;
}

/* The reward: the first of chat_reward_keys, a number or a boolean (1 / 0). */
static int chat_reward(struct trace_agentlog *a, const json_t *root, struct libra_error *err)
{
    const char *key;
    const json_t *v = first_of(root, chat_reward_keys, &key);
    if (!v)
        return 0;
    a->traj.has_reward = true;
    if (json_is_boolean(v))
        a->traj.reward = json_is_true(v);
    else if (!ujson_as_double(v, &a->traj.reward))
        return ujson_errorf(err, &a->doc, key, "expected a number or a boolean");
    return 0;
}

/* completed when the last turn made no call or called a terminal tool (those calls dropped),
 * else truncated. */
static void chat_finish(struct trace_agentlog *a)
{
    const struct trace_turn *last = &a->turns.v[a->turns.n - 1];
    a->traj.finish = last->n_calls ? TRACE_FINISH_TRUNCATED : TRACE_FINISH_COMPLETED;
    if (last->n_calls == 0)
        return;
    const struct trace_tool_call *calls = a->calls.v + a->calls.n - last->n_calls;
    for (size_t i = 0; i < last->n_calls; i++) {
        for (size_t t = 0; t < sizeof chat_terminal_tools / sizeof *chat_terminal_tools; t++) {
            if (strcmp(calls[i].tool, chat_terminal_tools[t]) == 0) {
                json_object_set_new(a->traj.extra, "ended_by", json_string(calls[i].tool));
                drop_last_calls(a);
                a->traj.finish = TRACE_FINISH_COMPLETED;
                return;
            }
        }
    }
}

/*
 * Refuses a line's usage count want of field that the turns cannot be scaled to sum to: with
 * every turn counted by its own usage, any other sum; else one that leaves nothing for the
 * estimated turns (0, or no more than the others count: each LLM call has a prompt and an
 * answer), or estimates that hold no token to scale.
 */
static int check_total(const struct trace_agentlog *a, int field, int64_t want,
                       struct libra_error *err)
{
    struct field_sums s = field_sums(a, field);
    const char *at = field ? "usage/completion_tokens" : "usage/prompt_tokens";
    if (s.n_estimated == 0 && want != s.known)
        return ujson_errorf(err, &a->doc, at,
                            "%lld differs from the %lld that the assistant messages' own usage "
                            "sums to",
                            (long long)want, (long long)s.known);
    if (s.n_estimated > 0 && want <= s.known)
        return ujson_errorf(err, &a->doc, at,
                            "%lld leaves no tokens for the %zu turns without a usage of their own "
                            "(those with one count %lld)",
                            (long long)want, s.n_estimated, (long long)s.known);
    if (s.n_estimated > 0 && s.estimated == 0)
        return ujson_errorf(err, &a->doc, at,
                            "%lld cannot be shared: the turns without a usage of their own are "
                            "estimated at 0 tokens",
                            (long long)want);
    return 0;
}

/* Scales the estimates to the line's usage totals; the factors go to extra.scale. */
static int chat_scale(struct trace_agentlog *a, const json_t *root, struct libra_error *err)
{
    struct usage total;
    int rc = read_usage(a, root, "", &total, err);
    json_t *scale = json_object();
    for (int field = 0; rc == 0 && field < 2; field++) {
        int64_t want = field ? total.completion : total.prompt;
        if (want < 0 || (rc = check_total(a, field, want, err)))
            continue;
        double f = scale_to(a, field, want);
        if (f > 0)
            json_object_set_new(scale, field ? "generated_tokens" : "prompt_tokens", ujson_real(f));
    }
    if (rc == 0 && json_object_size(scale))
        json_object_set_new(a->traj.extra, "scale", scale);
    else
        json_decref(scale);
    return rc;
}

static int chat_run(struct trace_agentlog *a, const struct trace_traj **out,
                    struct libra_error *err)
{
    const json_t *root = a->doc.root;
    reset_traj(a);
    if (!json_is_object(root))
        return ujson_errorf(err, &a->doc, "", "expected a JSON object (one trajectory per line)");
    const char *key = "messages";
    const json_t *msgs = json_object_get(root, key);
    if (!msgs || json_is_null(msgs)) {
        key = "trajectory";
        msgs = json_object_get(root, key);
    }
    if (!json_is_array(msgs))
        return msgs && !json_is_null(msgs)
                   ? ujson_errorf(err, &a->doc, key, "expected an array of messages")
                   : ujson_errorf(err, &a->doc, "", "messages: missing");
    int rc;
    if ((rc = chat_identity(a, root, msgs, err)) || (rc = chat_reward(a, root, err)))
        return rc;
    const json_t *status = json_object_get(root, "exit_status");
    if (json_is_string(status))
        json_object_set(a->traj.extra, "exit_status", (json_t *)status);
    /* tool definitions are sent with every request */
    const json_t *tools = json_object_get(root, "tools");
    int64_t context = json_is_array(tools) ? value_tokens(a, tools) : 0;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
    {
        char at[64];
        snprintf(at, sizeof at, "%s/%zu", key, i);
        if ((rc = chat_message(a, m, at, &context, err)))
            return rc;
    }
    if (a->turns.n == 0)
        return ujson_errorf(err, &a->doc, key, "no assistant message (nothing to import)");
    chat_finish(a);
    if ((rc = chat_scale(a, root, err)))
        return rc;
    if (json_object_size(a->traj.extra) == 0) {
        json_decref(a->traj.extra);
        a->traj.extra = NULL;
    }
    return finish_traj(a, "", out, err);
}

int trace_agentlog_line(struct trace_agentlog *a, int64_t lineno, const char *line, size_t len,
                        const struct trace_traj **out, struct libra_error *err)
{
    ujson_doc_free(&a->doc);
    memset(&a->doc, 0, sizeof a->doc);
    int rc = ujson_doc_parse(&a->doc, a->name, line, len, err);
    if (rc)
        error_prefix(err, "invalid JSON");
    else
        rc = chat_run(a, out, err);
    if (rc < 0 && err) {
        /* the document is this one line */
        err->line = (int)lineno;
        err->col = err->col > 0 ? err->col : 1;
    }
    return rc;
}

/* ---- the next trajectory ----------------------------------------------------------------- */

int trace_agentlog_next(struct trace_agentlog *a, const struct trace_traj **out,
                        struct libra_error *err)
{
    if (a->done || a->format == TRACE_IMPORT_OPENAI_CHAT)
        return 0;
    if (!a->parsed) {
        int rc = ujson_doc_parse(&a->doc, a->name, a->text.v ? a->text.v : "", a->text.n, err);
        if (rc) {
            error_prefix(err, "invalid JSON");
            a->done = true;
            return rc;
        }
        a->parsed = true;
        vec_free(&a->text);
    }
    if (a->format == TRACE_IMPORT_SWE_AGENT) {
        a->done = true;
        return swe_run(a, out, err);
    }
    if (!json_is_array(a->doc.root)) {
        a->done = true;
        return ujson_errorf(err, &a->doc, "", "expected an array of runs (tau-bench results)");
    }
    if (a->next >= json_array_size(a->doc.root)) {
        a->done = true;
        return 0;
    }
    size_t k = a->next++;
    int rc = tau_run(a, json_array_get(a->doc.root, k), k, out, err);
    if (rc < 0)
        a->done = true;
    return rc;
}
