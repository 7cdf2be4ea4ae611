/*
 * Importing agent logs that are whole JSON documents: tau-bench's historical trajectories (one
 * array of runs per file, each run an OpenAI chat transcript with tool calls) and SWE-agent's
 * .traj files (one run per file: a list of action/observation steps and the run's info).
 *
 * Neither log counts tokens per LLM call, times its tool calls (tau-bench) or says which tool
 * call failed, so the mapping estimates (docs/trace-format.md, "tau-bench" and "SWE-agent"):
 * tokens are characters divided by a fixed ratio, rounded up; the context of a turn is what
 * came before it; a tool call failed when its output matches one of a list of texts (a
 * documented heuristic the user can replace). SWE-agent's info.model_stats gives the provider's
 * token totals, so there the per-turn estimates are scaled to sum to them.
 *
 * The importer keeps the file's lines until the file ends, parses the document once and then
 * converts one run per call, so memory is the document's tree plus one trajectory.
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

/* SWE-agent exit statuses that name a cap (cost, context, format retries, time): truncated. */
static const char *const swe_cap_statuses[] = {"exit_cost", "exit_context", "exit_format",
                                               "exit_total_execution_time"};

struct trace_agentlog {
    enum trace_import_format format;
    double chars_per_token;
    VEC(char *) marks; /* failure texts; a leading '^' anchors one at the start */
    /* the current file */
    char *name;
    VEC(char) text;
    struct ujson_doc doc;
    bool parsed;
    size_t next; /* index of the next run (tau-bench) */
    bool done;
    struct map instances;     /* SWE-agent: instance name -> prompt id */
    VEC(int64_t) next_sample; /* by prompt id */
    /* the last trajectory and what it points into */
    struct trace_traj traj;
    VEC(struct trace_turn) turns;
    VEC(struct trace_tool_call) calls;
    VEC(const char *) call_ids; /* tau-bench: the id of each call, for joining tool messages */
    VEC(int) call_turn;         /* the turn of each call */
    struct arena names;
};

int64_t trace_estimate_tokens(const char *s, size_t n, double chars_per_token)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    return (int64_t)ceil((double)chars / chars_per_token);
}

static const char *default_failure_text(enum trace_import_format f)
{
    return f == TRACE_IMPORT_TAU_BENCH ? TRACE_TAU_FAILURE_TEXT : TRACE_SWE_FAILURE_TEXT;
}

struct trace_agentlog *trace_agentlog_new(enum trace_import_format format, double chars_per_token,
                                          const char *failure_text)
{
    struct trace_agentlog *a = xcalloc(1, sizeof *a);
    a->format = format;
    a->chars_per_token = chars_per_token;
    const char *s = failure_text ? failure_text : default_failure_text(format);
    while (*s) {
        size_t n = strcspn(s, ",");
        if (n > 0) {
            char *mark = xmalloc(n + 1);
            memcpy(mark, s, n);
            mark[n] = '\0';
            vec_push(&a->marks, mark);
        }
        s += n + (s[n] == ',');
    }
    map_init(&a->instances);
    arena_init(&a->names, 0);
    return a;
}

json_t *trace_agentlog_marks_json(const struct trace_agentlog *a)
{
    json_t *list = json_array();
    for (size_t i = 0; i < a->marks.n; i++)
        json_array_append_new(list, json_string(a->marks.v[i]));
    return list;
}

void trace_agentlog_free(struct trace_agentlog *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->marks.n; i++)
        free(a->marks.v[i]);
    vec_free(&a->marks);
    free(a->name);
    vec_free(&a->text);
    ujson_doc_free(&a->doc);
    map_free(&a->instances);
    vec_free(&a->next_sample);
    json_decref(a->traj.extra);
    vec_free(&a->turns);
    vec_free(&a->calls);
    vec_free(&a->call_ids);
    vec_free(&a->call_turn);
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

/* The status of a tool output by the failure texts: failure when one matches, else success. */
static enum trace_tool_status status_of(const struct trace_agentlog *a, const char *out)
{
    for (size_t i = 0; out && i < a->marks.n; i++) {
        const char *m = a->marks.v[i];
        size_t n = strlen(m);
        if (m[0] == '^' ? strncmp(out, m + 1, n - 1) == 0 : strstr(out, m) != NULL)
            return TRACE_TOOL_FAILURE;
    }
    return TRACE_TOOL_SUCCESS;
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
    a->turns.n = a->calls.n = a->call_ids.n = a->call_turn.n = 0;
    arena_reset(&a->names);
}

static struct trace_turn *add_turn(struct trace_agentlog *a, int64_t prompt, int64_t generated)
{
    struct trace_turn u = {
        .prompt_tokens = prompt, .cached_tokens = -1, .generated_tokens = generated};
    vec_push(&a->turns, u);
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
    vec_push(&a->call_turn, (int)a->turns.n - 1);
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
    if (trace_check_traj(&a->traj, 0, &why))
        return ujson_errorf(err, &a->doc, path, "%s", why.msg);
    *out = &a->traj;
    return 1;
}

/* ---- tau-bench --------------------------------------------------------------------------- */

/* Generated text of an assistant message: its content and its tool calls' arguments. */
static int assistant_tokens(const struct trace_agentlog *a, const json_t *m, const char *path,
                            int64_t *out, struct libra_error *err)
{
    const char *content;
    int rc = get_text(a, m, path, "content", true, &content, err);
    if (rc)
        return rc;
    *out = tokens_of(a, content);
    const json_t *calls = json_object_get(m, "tool_calls");
    if (!calls || json_is_null(calls))
        return 0;
    char at[256];
    if (!json_is_array(calls)) {
        snprintf(at, sizeof at, "%s/tool_calls", path);
        return ujson_errorf(err, &a->doc, at, "expected an array");
    }
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c)
    {
        const json_t *fn = json_object_get(c, "function");
        snprintf(at, sizeof at, "%s/tool_calls/%zu", path, i);
        if (!json_is_object(fn))
            return ujson_errorf(err, &a->doc, at, "function: expected an object");
        const char *args, *name, *id;
        snprintf(at, sizeof at, "%s/tool_calls/%zu/function", path, i);
        if ((rc = get_text(a, fn, at, "arguments", true, &args, err)) ||
            (rc = get_text(a, fn, at, "name", false, &name, err)))
            return rc;
        snprintf(at, sizeof at, "%s/tool_calls/%zu", path, i);
        if ((rc = get_text(a, c, at, "id", false, &id, err)))
            return rc;
        *out += tokens_of(a, args);
    }
    return 0;
}

/* The index of the call that tool message m answers (by tool_call_id), or -1. */
static long answered_call(const struct trace_agentlog *a, const char *id)
{
    for (size_t i = a->call_ids.n; i-- > 0;)
        if (a->call_ids.v[i] && strcmp(a->call_ids.v[i], id) == 0)
            return (long)i;
    return -1;
}

/* One message of a run's transcript (path names it) into the trajectory being built. */
static int tau_message(struct trace_agentlog *a, const json_t *m, const char *path,
                       int64_t *context, struct libra_error *err)
{
    const char *role, *content;
    int rc;
    if (!json_is_object(m))
        return ujson_errorf(err, &a->doc, path, "expected a message object");
    if ((rc = get_text(a, m, path, "role", false, &role, err)))
        return rc;
    if (strcmp(role, "assistant") == 0) {
        int64_t gen;
        if ((rc = assistant_tokens(a, m, path, &gen, err)))
            return rc;
        add_turn(a, *context, gen);
        *context += gen;
        const json_t *calls = json_object_get(m, "tool_calls");
        size_t i;
        const json_t *c;
        json_array_foreach(calls, i, c)
        {
            const json_t *fn = json_object_get(c, "function");
            add_call(a, json_string_value(json_object_get(fn, "name")),
                     json_string_value(json_object_get(c, "id")));
        }
        return 0;
    }
    if ((rc = get_text(a, m, path, "content", true, &content, err)))
        return rc;
    int64_t size = tokens_of(a, content);
    *context += size;
    if (strcmp(role, "system") == 0 || (strcmp(role, "user") == 0 && a->turns.n == 0))
        return 0;
    if (strcmp(role, "user") == 0) {
        /* the simulated customer answers the agent: what the next turn waits on */
        struct trace_tool_call *c = add_call(a, "user", NULL);
        c->status = TRACE_TOOL_SUCCESS;
        c->payload_tokens = size;
        return 0;
    }
    if (strcmp(role, "tool") != 0) {
        char at[256];
        snprintf(at, sizeof at, "%s/role", path);
        return ujson_errorf(err, &a->doc, at,
                            "unknown role '%s' (expected system, user, assistant or tool)", role);
    }
    const char *id;
    if ((rc = get_text(a, m, path, "tool_call_id", false, &id, err)))
        return rc;
    long k = answered_call(a, id);
    if (k < 0 || a->call_turn.v[k] != (int)a->turns.n - 1) {
        char at[256];
        snprintf(at, sizeof at, "%s/tool_call_id", path);
        return ujson_errorf(err, &a->doc, at,
                            "'%s' answers no open tool call of the last assistant message", id);
    }
    a->calls.v[k].payload_tokens = size;
    a->calls.v[k].status = status_of(a, content);
    a->call_ids.v[k] = NULL; /* answered */
    return 0;
}

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
    if ((rc = run_int(a, run, path, "task_id", &task, err)) ||
        (rc = run_int(a, run, path, "trial", &trial, err)))
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
        if ((rc = tau_message(a, m, at, &context, err)))
            return rc;
    }
    if (a->turns.n == 0)
        return ujson_errorf(err, &a->doc, path, "traj: no assistant message (nothing to import)");
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

/* The text of a chat message's content: a string, or the "text" parts of a list. */
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

/* Rescales field values (one per turn, at stride) to sum to total, rounding cumulative sums so
 * that the rounded values sum exactly to it. Returns the factor, or 0 when there was nothing to
 * scale. */
static double scale_to(struct trace_agentlog *a, size_t field, int64_t total)
{
    int64_t sum = 0;
    for (size_t i = 0; i < a->turns.n; i++)
        sum += field ? a->turns.v[i].generated_tokens : a->turns.v[i].prompt_tokens;
    if (sum <= 0 || total <= 0)
        return 0;
    double f = (double)total / (double)sum, cum = 0;
    int64_t given = 0;
    for (size_t i = 0; i < a->turns.n; i++) {
        int64_t *v = field ? &a->turns.v[i].generated_tokens : &a->turns.v[i].prompt_tokens;
        cum += (double)*v;
        int64_t upto = i + 1 == a->turns.n ? total : (int64_t)llround(cum * f);
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
    const json_t *t = json_object_get(st, "execution_time");
    double secs;
    if (t && ujson_as_double(t, &secs) && secs >= 0 && secs < 1e12)
        c->exec_us = llround(secs * 1e6);
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
    bool inserted;
    union map_value *slot = map_slot(&a->instances, instance, &inserted);
    if (inserted) {
        slot->i64 = (int64_t)a->next_sample.n;
        vec_push(&a->next_sample, 0);
    }
    a->traj.prompt_id = slot->i64;
    a->traj.sample = a->next_sample.v[slot->i64]++;
    json_t *extra = json_pack("{s:s}", "instance", instance);
    if (status)
        json_object_set_new(extra, "exit_status", json_string(status));
    if (a->traj.finish == TRACE_FINISH_COMPLETED) {
        /* the final action (submit) ends the run: its output never reaches the model */
        json_object_set_new(extra, "final_action", json_string(a->calls.v[a->calls.n - 1].tool));
        drop_last_calls(a);
    }
    const json_t *stats = json_object_get(info, "model_stats");
    int64_t sent = 0, received = 0, api_calls;
    if (ujson_as_int64(json_object_get(stats, "api_calls"), &api_calls))
        json_object_set_new(extra, "api_calls", json_integer(api_calls));
    json_t *scale = json_object();
    if (ujson_as_int64(json_object_get(stats, "tokens_sent"), &sent) && sent > 0) {
        double f = scale_to(a, 0, sent);
        if (f > 0)
            json_object_set_new(scale, "prompt_tokens", ujson_real(f));
    }
    if (ujson_as_int64(json_object_get(stats, "tokens_received"), &received) && received > 0) {
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

/* ---- the next trajectory ----------------------------------------------------------------- */

int trace_agentlog_next(struct trace_agentlog *a, const struct trace_traj **out,
                        struct libra_error *err)
{
    if (a->done)
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
