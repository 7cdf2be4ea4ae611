/* Client styles (load/style.h). */
#include "load/style.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

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

/* Copies a JSON array of token ids; false when it is not one. */
static bool read_ids(const json_t *a, struct load_answer *out)
{
    if (!json_is_array(a))
        return false;
    out->n = json_array_size(a);
    out->ids = xmallocarray(out->n ? out->n : 1, sizeof *out->ids);
    for (size_t i = 0; i < out->n; i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return false;
        out->ids[i] = (uint32_t)json_integer_value(v);
    }
    return true;
}

int load_turn_answer(enum load_style s, const char *body, size_t len, struct load_answer *out)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *doc = json_loadb(body, len, 0, &je);
    bool ok;
    if (s == LOAD_SKYRL) {
        json_t *choice = json_array_get(json_object_get(doc, "choices"), 0);
        ok = read_ids(json_object_get(choice, "token_ids"), out);
        const char *reason = json_string_value(json_object_get(choice, "finish_reason"));
        out->aborted = reason && strcmp(reason, "abort") == 0;
        json_t *details = json_object_get(json_object_get(doc, "usage"), "prompt_tokens_details");
        out->cached_tokens = json_integer_value(json_object_get(details, "cached_tokens"));
    } else {
        json_t *meta = json_object_get(doc, "meta_info");
        ok = json_is_object(meta) && read_ids(json_object_get(doc, "output_ids"), out);
        const char *reason =
            json_string_value(json_object_get(json_object_get(meta, "finish_reason"), "type"));
        out->aborted = reason && strcmp(reason, "abort") == 0;
        out->cached_tokens = json_integer_value(json_object_get(meta, "cached_tokens"));
    }
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
