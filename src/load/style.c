/* Client styles (load/style.h). */
#include "load/style.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/json.h"

static const char *const names[] = {"plain", "areal", "slime", "skyrl"};

const char *load_style_name(enum load_style s)
{
    return names[s];
}

int load_style_parse(const char *name, enum load_style *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = (enum load_style)i;
            return 0;
        }
    return -1;
}

bool load_style_update_waits(enum load_style s)
{
    return s == LOAD_SLIME;
}

/*
 * {"KEY": [ids...], REST...}: the id array is written by hand (a 30 K-token context is a 200 KB
 * array), the other members by jansson. Takes rest.
 */
static char *with_ids(const char *key, const uint32_t *ids, size_t n_ids, json_t *rest, size_t *len)
{
    char *tail = json_dumps(rest, JSON_COMPACT);
    json_decref(rest);
    size_t tail_n = strlen(tail), cap = 32 + strlen(key) + 11 * n_ids + tail_n, n = 0;
    char *s = xmalloc(cap);
    n += (size_t)snprintf(s, cap, "{\"%s\": [", key);
    for (size_t i = 0; i < n_ids; i++)
        n += (size_t)snprintf(s + n, cap - n, i ? ",%u" : "%u", ids[i]);
    if (tail_n > 2) /* tail is {...}: its members follow the array */
        n += (size_t)snprintf(s + n, cap - n, "], %s", tail + 1);
    else
        n += (size_t)snprintf(s + n, cap - n, "]}");
    free(tail);
    *len = n;
    return s;
}

/* libra's request object: identity, the tool returns since the previous turn, the script. */
static json_t *libra_object(const struct load_turn *t)
{
    json_t *events = json_array();
    if (t->turn > 0) {
        const struct trace_turn *prev = &t->rec->turns[t->turn - 1];
        for (size_t k = 0; k < prev->n_calls; k++) {
            const struct trace_tool_call *c = &prev->calls[k];
            json_array_append_new(
                events, json_pack("{s:s, s:s, s:s, s:I, s:f}", "kind", "tool_return", "tool",
                                  c->tool, "status", trace_tool_status_name(c->status),
                                  "payload_tokens", (json_int_t)c->payload_tokens, "exec_s",
                                  c->exec_us > 0 ? (double)c->exec_us * 1e-6 : 0.0));
        }
    }
    return json_pack("{s:I, s:I, s:I, s:o, s:b, s:{s:I}}", "trajectory", (json_int_t)t->trajectory,
                     "prompt", (json_int_t)t->rec->prompt_id, "sample", (json_int_t)t->rec->sample,
                     "events", events, "resume", 1, "emu", "gen_tokens", (json_int_t)t->gen_tokens);
}

void load_turn_request(enum load_style s, const struct load_turn *t, struct load_request *out)
{
    memset(out, 0, sizeof *out);
    char rid[64];
    json_t *rest;
    switch (s) {
    case LOAD_PLAIN:
        snprintf(rid, sizeof rid, "t%zu-%zu", t->trajectory, t->turn);
        rest = json_pack("{s:{s:I}, s:s, s:o}", "sampling_params", "max_new_tokens",
                         (json_int_t)t->gen_tokens, "rid", rid, "libra", libra_object(t));
        break;
    case LOAD_AREAL: /* one rid per trajectory, pinned to its server */
        snprintf(rid, sizeof rid, "t%zu", t->trajectory);
        rest = json_pack("{s:{s:I, s:f, s:f, s:i}, s:s, s:b, s:b}", "sampling_params",
                         "max_new_tokens", (json_int_t)t->gen_tokens, "temperature", 1.0, "top_p",
                         1.0, "top_k", -1, "rid", rid, "return_logprob", 1, "stream", 0);
        break;
    case LOAD_SLIME:
        snprintf(out->header, sizeof out->header, "X-SMG-Routing-Key: s%lld-%lld",
                 (long long)t->rec->prompt_id, (long long)t->rec->sample);
        rest = json_pack("{s:{s:I, s:f, s:f, s:i, s:b}, s:b}", "sampling_params", "max_new_tokens",
                         (json_int_t)t->gen_tokens, "temperature", 1.0, "top_p", 1.0, "top_k", -1,
                         "no_stop_trim", 1, "return_logprob", 1);
        break;
    default: /* LOAD_SKYRL */
        snprintf(rid, sizeof rid, "%lld-%lld", (long long)t->rec->prompt_id,
                 (long long)t->rec->sample);
        rest = json_pack("{s:s, s:I, s:b, s:s, s:f}", "model", t->model, "max_tokens",
                         (json_int_t)t->gen_tokens, "return_token_ids", 1, "trajectory_id", rid,
                         "temperature", 1.0);
        snprintf(out->path, sizeof out->path, "/v1/completions");
        out->body = with_ids("prompt", t->ctx, t->n_ctx, rest, &out->len);
        return;
    }
    snprintf(out->path, sizeof out->path, "/generate");
    out->body = with_ids("input_ids", t->ctx, t->n_ctx, rest, &out->len);
}

bool load_finish_request(enum load_style s, size_t trajectory, const struct trace_traj *rec,
                         struct load_request *out)
{
    memset(out, 0, sizeof *out);
    if (s != LOAD_PLAIN)
        return false;
    snprintf(out->path, sizeof out->path, "/libra/v1/trajectories/%zu/events", trajectory);
    json_t *ev =
        json_pack("{s:s, s:s}", "kind", "finish", "status", trace_finish_name(rec->finish));
    if (rec->has_reward)
        json_object_set_new(ev, "reward", json_real(rec->reward));
    out->body = json_dumps(ev, JSON_COMPACT);
    out->len = strlen(out->body);
    json_decref(ev);
    return true;
}

/* Writes why an answer is not one; returns false. */
__attribute__((format(printf, 3, 4))) static bool refuse(char *why, size_t size, const char *fmt,
                                                         ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return false;
}

/* The member name of doc, which must be an object (absent or null: *out NULL, when optional). */
static bool get_object(const json_t *doc, const char *key, const char *member, bool optional,
                       const json_t **out, char *why, size_t size)
{
    *out = json_object_get(doc, key);
    if (json_is_object(*out))
        return true;
    if (!*out || json_is_null(*out)) {
        *out = NULL;
        return optional || refuse(why, size, "no %s", member);
    }
    return refuse(why, size, "%s: expected an object, not %s", member, ujson_type_name(*out));
}

/* Copies the turn's generated token ids from a (member, capped by the turn's cap_name): at most
 * what the turn asked for, each below the model's vocabulary. */
static bool read_ids(const json_t *a, const char *member, const char *cap_name,
                     const struct load_turn *t, struct load_answer *out, char *why, size_t size)
{
    if (!a)
        return refuse(why, size, "no %s", member);
    if (!json_is_array(a))
        return refuse(why, size, "%s: expected an array of token ids, not %s", member,
                      ujson_type_name(a));
    size_t n = json_array_size(a);
    if ((int64_t)n > t->gen_tokens)
        return refuse(why, size, "%s: %zu tokens, more than the turn's %s (%lld)", member, n,
                      cap_name, (long long)t->gen_tokens);
    out->ids = xmallocarray(n ? n : 1, sizeof *out->ids);
    for (; out->n < n; out->n++) {
        const json_t *v = json_array_get(a, out->n);
        if (!json_is_integer(v))
            return refuse(why, size, "%s[%zu]: expected a token id, not %s", member, out->n,
                          ujson_type_name(v));
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= (json_int_t)t->vocab)
            return refuse(why, size,
                          "%s[%zu]: %lld is not a token id (the model's vocabulary holds %u)",
                          member, out->n, (long long)id, t->vocab);
        out->ids[out->n] = (uint32_t)id;
    }
    return true;
}

/* The prompt tokens the engine's prefix cache served: absent or null is 0 (an engine that does
 * not report them, vLLM without --enable-prompt-tokens-details), else a count within the
 * prompt. */
static bool read_cached(const json_t *v, const char *member, const struct load_turn *t,
                        int64_t *out, char *why, size_t size)
{
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v))
        return refuse(why, size, "%s: expected a count of tokens, not %s", member,
                      ujson_type_name(v));
    json_int_t n = json_integer_value(v);
    if (n < 0)
        return refuse(why, size, "%s: expected a count of tokens, not %lld", member, (long long)n);
    if ((uint64_t)n > t->n_ctx)
        return refuse(why, size, "%s: %lld is more than the %zu tokens of the prompt", member,
                      (long long)n, t->n_ctx);
    *out = n;
    return true;
}

/* A finish reason (absent or null: none, else a string): whether it says abort. */
static bool read_reason(const json_t *v, const char *member, bool *aborted, char *why, size_t size)
{
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v))
        return refuse(why, size, "%s: expected a string, not %s", member, ujson_type_name(v));
    *aborted = strcmp(json_string_value(v), "abort") == 0;
    return true;
}

/* SGLang's /generate answer: output_ids, meta_info {finish_reason {type}, cached_tokens}. */
static bool read_sglang(const json_t *doc, const struct load_turn *t, struct load_answer *out,
                        char *why, size_t size)
{
    const json_t *meta, *reason;
    return read_ids(json_object_get(doc, "output_ids"), "output_ids", "max_new_tokens", t, out, why,
                    size) &&
           get_object(doc, "meta_info", "meta_info", false, &meta, why, size) &&
           get_object(meta, "finish_reason", "meta_info.finish_reason", true, &reason, why, size) &&
           read_reason(json_object_get(reason, "type"), "meta_info.finish_reason.type",
                       &out->aborted, why, size) &&
           read_cached(json_object_get(meta, "cached_tokens"), "meta_info.cached_tokens", t,
                       &out->cached_tokens, why, size);
}

/* vLLM's /v1/completions answer: choices[0] {token_ids, finish_reason},
 * usage.prompt_tokens_details.cached_tokens. */
static bool read_vllm(const json_t *doc, const struct load_turn *t, struct load_answer *out,
                      char *why, size_t size)
{
    const json_t *choices = json_object_get(doc, "choices"), *choice = json_array_get(choices, 0);
    const json_t *usage, *details = NULL;
    if (choices && !json_is_array(choices))
        return refuse(why, size, "choices: expected an array, not %s", ujson_type_name(choices));
    if (!choice)
        return refuse(why, size, "no choices[0]");
    if (!json_is_object(choice))
        return refuse(why, size, "choices[0]: expected an object, not %s", ujson_type_name(choice));
    return read_ids(json_object_get(choice, "token_ids"), "choices[0].token_ids", "max_tokens", t,
                    out, why, size) &&
           read_reason(json_object_get(choice, "finish_reason"), "choices[0].finish_reason",
                       &out->aborted, why, size) &&
           get_object(doc, "usage", "usage", true, &usage, why, size) &&
           get_object(usage, "prompt_tokens_details", "usage.prompt_tokens_details", true, &details,
                      why, size) &&
           read_cached(json_object_get(details, "cached_tokens"),
                       "usage.prompt_tokens_details.cached_tokens", t, &out->cached_tokens, why,
                       size);
}

/* The byte of body where the token jansson failed at starts: its position is past the token,
 * which its text quotes ("... near 'hello'"), cut when long (the text holds 160 bytes), so the
 * quoted part is then looked for before. Its position when it quotes no token ("near end of
 * file"). */
static long bad_token_at(const char *body, const json_error_t *je)
{
    static const char near_quote[] = " near '";
    long end = je->position;
    const char *near = strstr(je->text, near_quote);
    if (!near)
        return end;
    near += sizeof near_quote - 1;
    long n = (long)strlen(near);
    if (n > 0 && near[n - 1] == '\'' && n - 1 <= end &&
        memcmp(body + end - (n - 1), near, (size_t)(n - 1)) == 0)
        return end - (n - 1); /* quoted whole */
    for (long at = end - n; at >= 0; at--)
        if (memcmp(body + at, near, (size_t)n) == 0)
            return at;
    return end;
}

int load_turn_read(enum load_style s, const struct load_turn *t, const char *body, size_t len,
                   struct load_answer *out, char *why, size_t size)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    bool ok;
    if (!doc)
        ok = refuse(why, size, "not JSON (at byte %ld: %s)", bad_token_at(body, &je), je.text);
    else if (!json_is_object(doc))
        ok = refuse(why, size, "expected a JSON object, not %s", ujson_type_name(doc));
    else
        ok = s == LOAD_SKYRL ? read_vllm(doc, t, out, why, size)
                             : read_sglang(doc, t, out, why, size);
    json_decref(doc);
    if (!ok) {
        free(out->ids);
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

static void call(struct load_call *c, const char *method, const char *path, const char *body)
{
    *c = (struct load_call){.method = method};
    snprintf(c->path, sizeof c->path, "%s", path);
    snprintf(c->body, sizeof c->body, "%s", body);
}

/* The call that ends an update's pause. */
static void resume(struct load_call *c, const char *path, const char *body)
{
    call(c, "POST", path, body);
    c->resumes = true;
}

void load_group_init_body(enum load_style s, int64_t rank_offset, int64_t world_size, char *out,
                          size_t size)
{
    snprintf(out, size,
             "%s\"master_address\": \"127.0.0.1\", \"master_port\": 29500, \"rank_offset\": %lld, "
             "\"world_size\": %lld}%s",
             s == LOAD_SKYRL ? "{\"init_info\": {" : "{", (long long)rank_offset,
             (long long)world_size, s == LOAD_SKYRL ? "}" : "");
}

/* The update group's set-up: one engine's group (rank 1 of 2) when sent to an engine itself. */
static void group_init(struct load_call *c, enum load_style s, const char *path)
{
    call(c, "POST", path, "");
    load_group_init_body(s, 1, 2, c->body, sizeof c->body);
    c->group_init = true;
}

/* The load itself on SGLang's endpoints; with abort_all, the update aborts what runs (AReaL
 * sends the member misspelt on the disk path, so both spellings go). */
static int sglang_load(enum load_style s, bool nccl, int version, bool abort_all,
                       struct load_call *out)
{
    char body[224];
    int n = 0;
    if (nccl && version == 1)
        group_init(&out[n++], s, "/init_weights_update_group");
    if (nccl)
        snprintf(body, sizeof body,
                 "{\"names\": [\"all\"], \"dtypes\": [\"bfloat16\"], \"shapes\": [[1]], "
                 "\"weight_version\": \"%d\", \"abort_all_requests\": %s}",
                 version, abort_all ? "true" : "false");
    else
        snprintf(body, sizeof body,
                 "{\"model_path\": \"libra-load\", \"weight_version\": \"%d\"%s}", version,
                 abort_all ? ", \"abort_all_request\": true, \"abort_all_requests\": true" : "");
    call(&out[n++], "POST", nccl ? "/update_weights_from_distributed" : "/update_weights_from_disk",
         body);
    return n;
}

int load_update_calls(enum load_style s, enum spec_sync_mode mode, bool nccl, int version,
                      struct load_call *out)
{
    int n = 0;
    char body[224];
    switch (s) {
    case LOAD_PLAIN:
        if (mode != SPEC_SYNC_DRAIN) /* drain: the update itself waits for the turns */
            call(&out[n++], "POST", "/pause_generation",
                 mode == SPEC_SYNC_KEEP ? "{\"mode\": \"in_place\"}" : "{\"mode\": \"abort\"}");
        n += sglang_load(s, nccl, version, false, out + n);
        if (mode != SPEC_SYNC_DRAIN)
            resume(&out[n++], "/continue_generation", "{}");
        return n;
    case LOAD_AREAL:
        call(&out[n++], "POST", "/pause_generation", "{}");
        n += sglang_load(s, nccl, version, true, out + n);
        resume(&out[n++], "/continue_generation", "{}");
        return n;
    case LOAD_SLIME:
        call(&out[n++], "POST", "/abort_request", "{\"abort_all\": true}");
        call(&out[n], "GET", "/v1/loads?include=core,queues", "");
        out[n++].until_idle = true;
        return n + sglang_load(s, nccl, version, false, out + n);
    default: { /* LOAD_SKYRL: vLLM */
        static const char *const modes[] = {[SPEC_SYNC_DRAIN] = "wait",
                                            [SPEC_SYNC_ABORT_RESUME] = "abort",
                                            [SPEC_SYNC_KEEP] = "keep"};
        char path[96];
        snprintf(path, sizeof path, "/pause?mode=%s", modes[mode]);
        call(&out[n++], "POST", path, "");
        if (nccl && version == 1)
            group_init(&out[n++], s, "/init_weight_transfer_engine");
        snprintf(body, sizeof body, "{\"update_info\": {\"version\": %d}}", version);
        call(&out[n++], "POST", "/update_weights", body);
        resume(&out[n++], "/resume", "");
        return n;
    }
    }
}

bool load_loads_idle(const char *body, size_t len)
{
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    json_t *loads = json_object_get(doc, "loads");
    bool idle = json_is_array(loads);
    for (size_t i = 0; idle && i < json_array_size(loads); i++) {
        json_t *l = json_array_get(loads, i);
        idle = json_integer_value(json_object_get(l, "num_running_reqs")) == 0 &&
               json_integer_value(json_object_get(l, "num_waiting_reqs")) == 0;
    }
    json_decref(doc);
    return idle;
}
