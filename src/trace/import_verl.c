/*
 * Importing verl rollout dumps (trainer.rollout_data_dir): one JSON object per sample with the
 * decoded prompt ("input"), the decoded response ("output"), "score" and "step", plus whatever
 * reward_extra_info the reward function returned. verl's RayPPOTrainer._dump_generations
 * writes them, one file per step ({step}.jsonl).
 *
 * The text is all there is, so everything a trace measures is estimated (docs/trace-format.md,
 * "verl rollout dumps"): tokens from characters at a fixed ratio; turns by splitting the
 * response at tool observations — <tool_response>...</tool_response> blocks (verl's multi-turn
 * chat template) or <information>...</information> blocks (Search-R1); consecutive blocks are
 * the calls of one turn; the context of each turn as the prompt plus everything before it.
 * Prompt ids, epochs and sample indices follow from identical input texts in step order.
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

/* A prompt seen before: where it was last and what comes next. */
struct prompt {
    int64_t id, last_step, epoch, next_sample;
};

struct trace_verl {
    double chars_per_token;
    int64_t group_size; /* the header's; 0: unknown */
    struct map prompts; /* input text -> struct prompt * */
    int64_t last_step;  /* -1 before the first line */
    /* the last trajectory and what it points into */
    json_t *root;
    struct trace_traj traj;
    VEC(struct trace_turn) turns;
    VEC(struct trace_tool_call) calls;
    struct arena names; /* tool names taken from <tool_call> blocks */
};

/* Observation blocks that end a turn; a NULL tool takes the name from the turn's
 * <tool_call> blocks. */
static const struct {
    const char *open, *close, *tool;
} obs_tags[] = {
    {"<tool_response>", "</tool_response>", NULL},
    {"<information>", "</information>", "search"},
};
#define N_OBS_TAGS (sizeof obs_tags / sizeof obs_tags[0])

struct trace_verl *trace_verl_new(double chars_per_token, int64_t group_size)
{
    struct trace_verl *v = xcalloc(1, sizeof *v);
    v->chars_per_token = chars_per_token;
    v->group_size = group_size;
    v->last_step = -1;
    map_init(&v->prompts);
    arena_init(&v->names, 0);
    return v;
}

const char *trace_verl_file_step(const char *name, size_t *n)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    size_t digits = strspn(base, "0123456789"), zeros = strspn(base, "0");
    if (digits == 0 || strcmp(base + digits, ".jsonl") != 0)
        return NULL;
    zeros = zeros < digits ? zeros : digits - 1; /* "0.jsonl" is step 0 */
    *n = digits - zeros;
    return base + zeros;
}

void trace_verl_free(struct trace_verl *v)
{
    if (!v)
        return;
    size_t pos = 0;
    union map_value val;
    while (map_next(&v->prompts, &pos, NULL, &val))
        free(val.ptr);
    map_free(&v->prompts);
    json_decref(v->root);
    json_decref(v->traj.extra);
    vec_free(&v->turns);
    vec_free(&v->calls);
    arena_free(&v->names);
    free(v);
}

/* Estimated tokens of n bytes of UTF-8 text: characters / ratio, rounded up. */
static int64_t tokens(const struct trace_verl *v, const char *s, size_t n)
{
    return trace_estimate_tokens(s, n, v->chars_per_token);
}

/*
 * A needle searched for in a text read left to right: its first occurrence at or after the
 * last place asked about. Asked from a place it has not passed, it answers without searching,
 * so each byte of the text is searched once per needle however many turns ask (a search over
 * the rest of the text at every turn made a line of many turns take quadratic time).
 */
struct finder {
    const char *needle;
    const char *at; /* the answer to the last question; NULL: the needle occurs no more */
    bool asked;
};

/* The first occurrence of f's needle at or after from, which never goes back. */
static const char *finder_next(struct finder *f, const char *from)
{
    if (!f->asked || (f->at && f->at < from)) {
        f->at = strstr(from, f->needle);
        f->asked = true;
    }
    return f->at;
}

/* One output text being split into turns: the needles it is searched for, and where. */
struct scan {
    struct finder obs[N_OBS_TAGS]; /* the observation tags' openings */
    struct finder call, call_end, name_key;
    /* where the turn's next <tool_call> is looked for; NULL: none is left */
    const char *calls_from;
    /* the "name" key read last, and the name it gave */
    const char *named_key;
    char *named;
};

static void scan_init(struct scan *sc)
{
    memset(sc, 0, sizeof *sc);
    for (size_t i = 0; i < N_OBS_TAGS; i++)
        sc->obs[i].needle = obs_tags[i].open;
    sc->call.needle = "<tool_call>";
    sc->call_end.needle = "</tool_call>";
    sc->name_key.needle = "\"name\"";
}

/* The earliest observation opening tag at or after s; NULL when none. *tag gets its index. */
static const char *find_obs(struct scan *sc, const char *s, size_t *tag)
{
    const char *best = NULL;
    for (size_t i = 0; i < N_OBS_TAGS; i++) {
        const char *at = finder_next(&sc->obs[i], s);
        if (at && (!best || at < best)) {
            best = at;
            *tag = i;
        }
    }
    return best;
}

/* Whether an observation opening tag starts at s; *tag gets its index. */
static bool obs_at(const char *s, size_t *tag)
{
    for (size_t i = 0; i < N_OBS_TAGS; i++)
        if (strncmp(s, obs_tags[i].open, strlen(obs_tags[i].open)) == 0) {
            *tag = i;
            return true;
        }
    return false;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
        s++;
    return s;
}

/* The turn's next <tool_call> before gen_end, after the one the last call took (the k-th
 * call of a turn answers its k-th <tool_call>); NULL when none is left. */
static const char *next_call(struct scan *sc, const char *gen_end)
{
    const char *at = sc->calls_from ? finder_next(&sc->call, sc->calls_from) : NULL;
    if (at && at >= gen_end)
        at = NULL;
    sc->calls_from = at ? at + 1 : NULL;
    return at;
}

/* The JSON string after the "name" key at key, if it ends before end, copied into the arena;
 * else "tool". Kept for the next call: unclosed <tool_call>s can share one key. */
static char *key_name(struct trace_verl *v, struct scan *sc, const char *key, const char *end)
{
    if (key == sc->named_key)
        return sc->named;
    sc->named_key = key;
    sc->named = "tool";
    const char *q = skip_space(key + 6);
    if (*q != ':')
        return sc->named;
    q = skip_space(q + 1);
    const char *close = *q == '"' ? strchr(q + 1, '"') : NULL;
    if (!close || close == q + 1 || close >= end)
        return sc->named;
    size_t n = (size_t)(close - q - 1);
    sc->named = arena_alloc(&v->names, n + 1);
    memcpy(sc->named, q + 1, n);
    sc->named[n] = '\0';
    return sc->named;
}

/*
 * The name in the <tool_call> at call (NULL: none) of a turn that generated text up to
 * gen_end: the JSON string after its "name" key, or "tool" when there is none. The key is
 * looked for up to the call's </tool_call>, or to gen_end when the call is not closed. A key
 * read lies before its turn's gen_end, where no later turn looks, so the name key_name keeps
 * is only ever reused within the turn that read it.
 */
static char *call_name(struct trace_verl *v, struct scan *sc, const char *call, const char *gen_end)
{
    if (!call)
        return "tool";
    const char *stop = finder_next(&sc->call_end, call);
    const char *key = finder_next(&sc->name_key, call);
    if (!key || (stop && key > stop) || key >= gen_end)
        return "tool";
    return key_name(v, sc, key, gen_end);
}

/* Appends a turn that generated [gen, gen_end) with no calls yet. */
static struct trace_turn *add_turn(struct trace_verl *v, const char *gen, const char *gen_end)
{
    struct trace_turn u = {.cached_tokens = -1,
                           .generated_tokens = tokens(v, gen, (size_t)(gen_end - gen))};
    vec_push(&v->turns, u);
    return &v->turns.v[v->turns.n - 1];
}

/*
 * Consumes the observation blocks starting at s (an opening tag of obs_tags[tag]) as calls of
 * the turn whose generated text ends at gen_end. Returns the text after the last block.
 */
static const char *add_calls(struct trace_verl *v, struct scan *sc, struct trace_turn *u,
                             const char *gen_end, const char *s, size_t tag)
{
    do {
        const char *body = s + strlen(obs_tags[tag].open);
        const char *close = strstr(body, obs_tags[tag].close);
        const char *after = close ? close + strlen(obs_tags[tag].close) : body + strlen(body);
        const char *call = next_call(sc, gen_end);
        const char *tool = obs_tags[tag].tool;
        struct trace_tool_call c = {
            .tool = tool ? (char *)tool : call_name(v, sc, call, gen_end),
            .status = TRACE_TOOL_OTHER,
            .payload_tokens = tokens(v, s, (size_t)(after - s)),
            .queue_us = -1,
            .exec_us = -1,
        };
        vec_push(&v->calls, c);
        u->n_calls++;
        s = skip_space(after);
    } while (obs_at(s, &tag));
    return s;
}

/* True when [s, ...) holds nothing the model generated: blanks and the role label the chat
 * template leaves once its special tokens are stripped. */
static bool nothing_generated(const char *s)
{
    s = skip_space(s);
    if (strncmp(s, "assistant", 9) == 0)
        s = skip_space(s + 9);
    return *s == '\0';
}

/* Splits output into turns and calls; returns whether it ended on an observation. */
static bool split_turns(struct trace_verl *v, const char *out)
{
    const char *s = out, *end = out + strlen(out);
    size_t tag = 0;
    const char *obs;
    struct scan sc;
    scan_init(&sc);
    v->turns.n = v->calls.n = 0;
    arena_reset(&v->names);
    while ((obs = find_obs(&sc, s, &tag))) {
        struct trace_turn *u = add_turn(v, s, obs);
        sc.calls_from = s;
        s = add_calls(v, &sc, u, obs, obs, tag);
    }
    if (v->turns.n > 0 && nothing_generated(s))
        return true;
    add_turn(v, s, end);
    return false;
}

/* Fills prompt tokens (the input, then everything before each turn) and links the calls. */
static void fill_context(struct trace_verl *v, int64_t input_tokens)
{
    int64_t context = input_tokens;
    size_t next = 0;
    for (size_t i = 0; i < v->turns.n; i++) {
        struct trace_turn *u = &v->turns.v[i];
        u->prompt_tokens = context;
        u->calls = u->n_calls ? v->calls.v + next : NULL;
        context += u->generated_tokens;
        for (size_t c = 0; c < u->n_calls; c++)
            context += u->calls[c].payload_tokens;
        next += u->n_calls;
    }
}

static int fail(const char *name, int64_t lineno, const char *line, size_t len, const char *key,
                const char *msg, struct libra_error *err)
{
    int col = trace_line_col(line, len, key ? key : "");
    if (key)
        return error_set(err, name, (int)lineno, col, "%s: %s", key, msg);
    return error_set(err, name, (int)lineno, col, "%s", msg);
}

/* Refuses a row whose step is not the one its file is named for: verl names each dump by
 * its step, so a mismatch is a renamed or merged file, whose order would be a guess. */
static int check_name_step(const struct trace_verl *v, const char *name, int64_t lineno,
                           const char *line, size_t len, struct libra_error *err)
{
    size_t n;
    const char *want = trace_verl_file_step(name, &n);
    char have[24], msg[384];
    int k = snprintf(have, sizeof have, "%lld", (long long)v->traj.step);
    if (!want || ((size_t)k == n && memcmp(have, want, n) == 0))
        return 0;
    snprintf(msg, sizeof msg, "%s in a file named for step %.*s (verl names a dump by its step)",
             have, n > 255 ? 255 : (int)n, want);
    return fail(name, lineno, line, len, "step", msg, err);
}

/* Assigns prompt id, epoch and sample from the input text's history. */
static void identify(struct trace_verl *v, const char *input, int64_t step)
{
    bool inserted;
    union map_value *slot = map_slot(&v->prompts, input, &inserted);
    struct prompt *p = slot->ptr;
    if (inserted) {
        p = slot->ptr = xcalloc(1, sizeof *p);
        p->id = (int64_t)map_size(&v->prompts) - 1;
        p->last_step = step;
    } else if (p->last_step != step) {
        p->epoch++;
        p->last_step = step;
        p->next_sample = 0;
    }
    v->traj.prompt_id = p->id;
    v->traj.epoch = p->epoch;
    v->traj.sample = p->next_sample++;
}

/* Everything but the fields the importer reads, kept verbatim. */
static json_t *extra_of(const json_t *root, const char *reward_key)
{
    json_t *extra = json_object();
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)root, k, val)
    {
        if (strcmp(k, "input") != 0 && strcmp(k, "output") != 0 && strcmp(k, "step") != 0 &&
            !(reward_key && strcmp(k, reward_key) == 0))
            json_object_set(extra, k, val);
    }
    if (json_object_size(extra) == 0) {
        json_decref(extra);
        return NULL;
    }
    return extra;
}

/* Reads input, output, step and the reward (score, else reward) from the parsed line. */
static int read_fields(struct trace_verl *v, const char *name, int64_t lineno, const char *line,
                       size_t len, const char **input, const char **output, const char **reward_key,
                       struct libra_error *err)
{
    const json_t *in = json_object_get(v->root, "input");
    const json_t *out = json_object_get(v->root, "output");
    const json_t *step = json_object_get(v->root, "step");
    if (!json_is_string(in))
        return fail(name, lineno, line, len, "input", in ? "expected a string" : "missing", err);
    if (!json_is_string(out))
        return fail(name, lineno, line, len, "output", out ? "expected a string" : "missing", err);
    if (!step)
        return fail(name, lineno, line, len, "step", "missing", err);
    /* verl's global_steps counts from 1 in the training loop that dumps rollouts; a step 0 is
     * what the validation before training dumps (to validation_data_dir) */
    bool integer = ujson_as_int64(step, &v->traj.step);
    if (!integer || v->traj.step < 1)
        return fail(name, lineno, line, len, "step",
                    integer && v->traj.step == 0
                        ? "expected an integer >= 1 (verl numbers training steps from 1; a step "
                          "0 dump is validation's, before training)"
                        : "expected an integer >= 1",
                    err);
    *input = json_string_value(in);
    *output = json_string_value(out);
    *reward_key = json_object_get(v->root, "score")    ? "score"
                  : json_object_get(v->root, "reward") ? "reward"
                                                       : NULL;
    const json_t *reward = *reward_key ? json_object_get(v->root, *reward_key) : NULL;
    v->traj.has_reward = reward != NULL;
    if (reward && !ujson_as_double(reward, &v->traj.reward))
        return fail(name, lineno, line, len, *reward_key, "expected a number", err);
    return 0;
}

int trace_verl_line(struct trace_verl *v, const char *name, int64_t lineno, const char *line,
                    size_t len, const struct trace_traj **out, struct libra_error *err)
{
    json_decref(v->root);
    json_decref(v->traj.extra);
    memset(&v->traj, 0, sizeof v->traj);
    json_error_t jerr;
    v->root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!v->root) {
        int at_line, col; /* a record is one line */
        ujson_error_at(line, len, &jerr, &at_line, &col);
        return error_set(err, name, (int)lineno, col, "invalid JSON: %s", ujson_error_text(&jerr));
    }
    if (!json_is_object(v->root))
        return fail(name, lineno, line, len, NULL, "expected a JSON object", err);
    const char *input = NULL, *output = NULL, *reward_key = NULL;
    int rc = read_fields(v, name, lineno, line, len, &input, &output, &reward_key, err);
    if (rc || (rc = check_name_step(v, name, lineno, line, len, err)))
        return rc;
    if (v->traj.step < v->last_step) {
        char msg[160];
        snprintf(msg, sizeof msg, "%lld after step %lld (give dump files in step order)",
                 (long long)v->traj.step, (long long)v->last_step);
        return fail(name, lineno, line, len, "step", msg, err);
    }
    v->last_step = v->traj.step;
    identify(v, input, v->traj.step);
    /* step s is generated by the weights after s - 1 updates, synchronously */
    v->traj.version_start = v->traj.version_end = v->traj.step - 1;
    bool ended_on_call = split_turns(v, output);
    fill_context(v, tokens(v, input, strlen(input)));
    v->traj.turns = v->turns.v;
    v->traj.n_turns = v->turns.n;
    v->traj.finish = ended_on_call ? TRACE_FINISH_TRUNCATED : TRACE_FINISH_COMPLETED;
    v->traj.extra = extra_of(v->root, reward_key);
    struct libra_error why = {0};
    if (trace_check_traj(&v->traj, v->group_size, &why)) /* the row is the whole trajectory */
        return fail(name, lineno, line, len, NULL, why.msg, err);
    *out = &v->traj;
    return 1;
}
