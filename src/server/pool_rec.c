/*
 * The live elastic pool's records (pool_rec.h). Bodies are small and rare, so they are read
 * into a jansson tree (duplicate members refused) and every value is checked before the caller
 * acts on it.
 */
#include "server/pool_rec.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/json.h"

static const char *const op_names[] = {
    [GW_POOL_OP_NONE] = "",           [GW_POOL_OP_RECLAIM] = "reclaim",
    [GW_POOL_OP_LEND] = "lend",       [GW_POOL_OP_RELEASED] = "released",
    [GW_POOL_OP_RETAKEN] = "retaken", [GW_POOL_OP_STEP] = "step",
    [GW_POOL_OP_EXPIRE] = "expire",   [GW_POOL_OP_TICK] = "tick",
};

const char *gw_pool_op_name(enum gw_pool_op op)
{
    return op >= GW_POOL_OP_NONE && op <= GW_POOL_OP_TICK ? op_names[op] : "";
}

static int op_of(const char *s)
{
    for (int i = GW_POOL_OP_RECLAIM; i <= GW_POOL_OP_TICK; i++)
        if (strcmp(s, op_names[i]) == 0)
            return i;
    return -1;
}

/* A non-negative integer member, at most max. */
static int int_member(json_t *v, const char *key, int64_t max, int64_t *out, char *err,
                      size_t err_size)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return error_text(err, err_size, "%s: expected an integer from 0 to %lld", key,
                          (long long)max);
    *out = json_integer_value(v);
    return 0;
}

/* A finite number of at least min (above it when open). */
static int number_member(json_t *v, const char *key, double min, bool open, double *out, char *err,
                         size_t err_size)
{
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || x < min || (open && x == min) || x > 1e12)
        return error_text(err, err_size, "%s: expected a finite number %s %g", key,
                          open ? ">" : ">=", min);
    *out = x;
    return 0;
}

static int reason_member(json_t *v, struct gw_pool_rec *out, char *err, size_t err_size)
{
    if (!json_is_string(v) || json_string_length(v) >= GW_POOL_REASON_MAX)
        return error_text(err, err_size, "reason: expected a string of at most %d bytes",
                          GW_POOL_REASON_MAX - 1);
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < ' ' || s[i] == 0x7f)
            return error_text(err, err_size, "reason: a control character in it");
    memcpy(out->reason, s, n + 1);
    return 0;
}

/* One member of a record. */
static int member(const char *key, json_t *v, struct gw_pool_rec *out, char *err, size_t err_size)
{
    int64_t n = 0;
    if (strcmp(key, "op") == 0) {
        int op = json_is_string(v) ? op_of(json_string_value(v)) : -1;
        if (op < 0)
            return error_text(err, err_size,
                              "op: expected reclaim, lend, released, retaken, step, expire or "
                              "tick");
        out->op = (enum gw_pool_op)op;
    } else if (strcmp(key, "t") == 0) {
        return number_member(v, key, 0.0, false, &out->t_s, err, err_size);
    } else if (strcmp(key, "train_s") == 0) {
        return number_member(v, key, 0.0, true, &out->train_s, err, err_size);
    } else if (strcmp(key, "rollout_s") == 0) {
        return number_member(v, key, 0.0, false, &out->rollout_s, err, err_size);
    } else if (strcmp(key, "pressure") == 0) {
        return number_member(v, key, 0.0, false, &out->pressure, err, err_size);
    } else if (strcmp(key, "rollout_gpus") == 0) {
        return int_member(v, key, 1 << 24, &out->rollout_gpus, err, err_size);
    } else if (strcmp(key, "replica") == 0) {
        if (int_member(v, key, GW_POOL_REPLICAS_MAX - 1, &n, err, err_size))
            return -1;
        out->replica = (int)n;
    } else if (strcmp(key, "request") == 0) {
        if (int_member(v, key, INT64_MAX, &out->request, err, err_size))
            return -1;
        if (out->request < 1)
            return error_text(err, err_size, "request: expected an id >= 1");
    } else if (strcmp(key, "generation") == 0) {
        return int_member(v, key, INT64_MAX, &out->generation, err, err_size);
    } else if (strcmp(key, "step") == 0) {
        return int_member(v, key, INT64_MAX / 2, &out->step, err, err_size);
    } else if (strcmp(key, "version") == 0) {
        return int_member(v, key, GW_POOL_VERSION_MAX, &out->version, err, err_size);
    } else if (strcmp(key, "phase") == 0) {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        out->phase = strcmp(s, "begin") == 0 ? 1 : strcmp(s, "end") == 0 ? 2 : 0;
        if (!out->phase)
            return error_text(err, err_size, "phase: expected begin or end");
    } else if (strcmp(key, "event") == 0) {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        out->event = strcmp(s, "released") == 0  ? GW_POOL_OP_RELEASED
                     : strcmp(s, "retaken") == 0 ? GW_POOL_OP_RETAKEN
                                                 : 0;
        if (!out->event)
            return error_text(err, err_size, "event: expected released or retaken");
    } else if (strcmp(key, "reason") == 0) {
        return reason_member(v, out, err, err_size);
    } else {
        return error_text(err, err_size,
                          "unknown member '%.64s' (expected op, t, replica, request, generation, "
                          "step, version, phase, event, reason, train_s, rollout_s, pressure, "
                          "rollout_gpus)",
                          key);
    }
    return 0;
}

struct gw_pool_rec gw_pool_rec_absent(enum gw_pool_op op, double t_s)
{
    return (struct gw_pool_rec){.op = op,
                                .t_s = t_s,
                                .replica = -1,
                                .request = -1,
                                .generation = -1,
                                .step = -1,
                                .version = -1,
                                .train_s = -1,
                                .rollout_s = -1,
                                .pressure = -1,
                                .rollout_gpus = -1};
}

int gw_pool_rec_parse(const char *text, size_t len, struct gw_pool_rec *out, char *err,
                      size_t err_size)
{
    *out = gw_pool_rec_absent(GW_POOL_OP_NONE, -1);
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        return error_text(err, err_size, "body:%d: %s", je.position, ujson_error_text(&je));
    int rc = 0;
    if (!json_is_object(doc)) {
        rc = error_text(err, err_size, "body: expected a JSON object");
    } else {
        const char *key;
        json_t *v;
        json_object_foreach(doc, key, v)
        {
            if ((rc = member(key, v, out, err, err_size)) != 0)
                break;
        }
    }
    json_decref(doc);
    return rc;
}

char *gw_pool_rec_text(const struct gw_pool_rec *r)
{
    static const char *const phases[] = {"", "begin", "end"};
    json_t *o = json_object();
    if (r->op != GW_POOL_OP_NONE)
        json_object_set_new(o, "op", json_string(gw_pool_op_name(r->op)));
    if (r->t_s >= 0)
        json_object_set_new(o, "t", json_real(r->t_s));
    if (r->replica >= 0)
        json_object_set_new(o, "replica", json_integer(r->replica));
    if (r->request >= 0)
        json_object_set_new(o, "request", json_integer(r->request));
    if (r->generation >= 0)
        json_object_set_new(o, "generation", json_integer(r->generation));
    if (r->step >= 0)
        json_object_set_new(o, "step", json_integer(r->step));
    if (r->version >= 0)
        json_object_set_new(o, "version", json_integer(r->version));
    if (r->phase == 1 || r->phase == 2)
        json_object_set_new(o, "phase", json_string(phases[r->phase]));
    if (r->event)
        json_object_set_new(o, "event", json_string(gw_pool_op_name(r->event)));
    if (r->reason[0])
        json_object_set_new(o, "reason", json_string(r->reason));
    if (r->train_s > 0)
        json_object_set_new(o, "train_s", json_real(r->train_s));
    if (r->rollout_s >= 0)
        json_object_set_new(o, "rollout_s", json_real(r->rollout_s));
    if (r->pressure >= 0)
        json_object_set_new(o, "pressure", json_real(r->pressure));
    if (r->rollout_gpus >= 0)
        json_object_set_new(o, "rollout_gpus", json_integer(r->rollout_gpus));
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}
