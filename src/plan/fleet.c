/*
 * A plan's fleet: from a plan, from a plan document, and against running engines (fleet.h).
 */
#include "plan/fleet.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

void plan_fleet_of(const struct plan_result *r, struct plan_fleet *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->counts, r->counts, sizeof out->counts);
    out->rollout_gpus = r->n_rollout;
    out->layout = r->layout;
    out->step_s = r->step_s;
}

/* ---- reading a plan document ---------------------------------------------------------------- */

/* Member key of the object at path (its value v): the value, or NULL with err naming it at
 * path when it is missing. */
static const json_t *member(const struct ujson_doc *doc, const json_t *v, const char *path,
                            const char *key, struct libra_error *err)
{
    const json_t *m = json_object_get(v, key);
    if (!m)
        ujson_errorf(err, doc, path, "missing member \"%s\"", key);
    return m;
}

/* The object at path, a member of the root ("rollout") or of a member ("rollout/instances"). */
static const json_t *object_at(const struct ujson_doc *doc, const json_t *parent,
                               const char *parent_path, const char *key, const char *path,
                               struct libra_error *err)
{
    const json_t *v = member(doc, parent, parent_path, key, err);
    if (v && !json_is_object(v)) {
        ujson_errorf(err, doc, path, "expected an object");
        return NULL;
    }
    return v;
}

static int read_header(const struct ujson_doc *doc, struct libra_error *err)
{
    const json_t *root = doc->root;
    if (!json_is_object(root))
        return ujson_errorf(err, doc, "", "expected a plan document (libra plan --json)");
    const json_t *schema = member(doc, root, "", "schema", err);
    if (!schema)
        return LIBRA_EINVAL;
    if (!json_is_string(schema) || strcmp(json_string_value(schema), PLAN_SCHEMA) != 0)
        return ujson_errorf(err, doc, "schema", "expected \"%s\" (libra plan --json)", PLAN_SCHEMA);
    const json_t *feasible = member(doc, root, "", "feasible", err);
    if (!feasible)
        return LIBRA_EINVAL;
    if (!json_is_boolean(feasible))
        return ujson_errorf(err, doc, "feasible", "expected true or false");
    if (!json_is_true(feasible)) {
        const char *why = json_string_value(json_object_get(root, "why"));
        return ujson_errorf(err, doc, "feasible", "the plan is infeasible (%s): it has no fleet",
                            why ? why : "no reason given");
    }
    return 0;
}

static int read_step(struct plan_fleet *out, const struct ujson_doc *doc, struct libra_error *err)
{
    const json_t *o = object_at(doc, doc->root, "", "objective", "objective", err);
    const json_t *v = o ? member(doc, o, "objective", "step_s", err) : NULL;
    if (!v)
        return LIBRA_EINVAL;
    if (!ujson_as_double(v, &out->step_s) || !(out->step_s > 0))
        return ujson_errorf(err, doc, "objective/step_s", "expected a number of seconds > 0");
    return 0;
}

static const char *const tp_names[PLAN_NTP] = {"tp1", "tp2", "tp4", "tp8"};

static int read_instances(struct plan_fleet *out, const struct ujson_doc *doc,
                          const json_t *rollout, struct libra_error *err)
{
    const json_t *v = member(doc, rollout, "rollout", "gpus", err);
    int64_t n;
    if (!v)
        return LIBRA_EINVAL;
    if (!ujson_as_int64(v, &n) || n < 0 || n > 1 << 20)
        return ujson_errorf(err, doc, "rollout/gpus", "expected a count of GPUs >= 0");
    out->rollout_gpus = (int)n;
    const json_t *inst = object_at(doc, rollout, "rollout", "instances", "rollout/instances", err);
    if (!inst)
        return LIBRA_EINVAL;
    const char *key;
    const json_t *c;
    json_object_foreach((json_t *)inst, key, c)
    {
        char buf[256];
        const char *path = ujson_member_path(buf, sizeof buf, "rollout/instances", key);
        int t = 0;
        while (t < PLAN_NTP && strcmp(key, tp_names[t]) != 0)
            t++;
        if (t == PLAN_NTP)
            return ujson_errorf(err, doc, path, "expected a TP size: tp1, tp2, tp4 or tp8");
        if (!ujson_as_int64(c, &n) || n < 0 || n > SPEC_BUCKET_INSTANCES_MAX)
            return ujson_errorf(err, doc, path, "expected a count of instances in 0..%d",
                                SPEC_BUCKET_INSTANCES_MAX);
        out->counts[t] = (int)n;
    }
    int gpus = 0;
    for (int t = 0; t < PLAN_NTP; t++)
        gpus += out->counts[t] << t;
    if (gpus != out->rollout_gpus) /* the planner's instances fill its rollout GPUs */
        return ujson_errorf(err, doc, "rollout/gpus", "%d, but rollout.instances hold %d GPUs",
                            out->rollout_gpus, gpus);
    return 0;
}

/* The layout, which must serve every TP size the instances have, with the instances' counts
 * where it gives counts (the planner's layout does). */
static int read_layout(struct plan_fleet *out, const struct ujson_doc *doc, struct libra_error *err)
{
    int rc = spec_bucket_from_json(&out->layout, doc, "rollout/buckets", err);
    if (rc)
        return rc;
    int counted[PLAN_NTP] = {0}, any = 0;
    for (int b = 0; b < out->layout.n; b++)
        for (int k = 0; k < out->layout.bucket[b].n_tp; k++) {
            int t = 0, tp = out->layout.bucket[b].tp[k];
            while (t < PLAN_NTP && 1 << t != tp)
                t++;
            counted[t < PLAN_NTP ? t : 0] += out->layout.bucket[b].instances[k];
            any += out->layout.bucket[b].instances[k];
        }
    for (int t = 0; t < PLAN_NTP; t++) {
        bool served = false;
        for (int b = 0; b < out->layout.n; b++)
            served |= spec_bucket_has_tp(&out->layout.bucket[b], 1 << t);
        if (out->counts[t] && !served)
            return ujson_errorf(err, doc, "rollout/buckets",
                                "no bucket is served by TP%d, but rollout.instances has %d", 1 << t,
                                out->counts[t]);
        if (any && counted[t] != out->counts[t])
            return ujson_errorf(err, doc, "rollout/buckets",
                                "TP%d has %d instances, but rollout.instances has %d", 1 << t,
                                counted[t], out->counts[t]);
    }
    return 0;
}

int plan_fleet_from_json(struct plan_fleet *out, const struct ujson_doc *doc,
                         struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = read_header(doc, err);
    if (rc == 0)
        rc = read_step(out, doc, err);
    const json_t *rollout = NULL;
    if (rc == 0 && !(rollout = object_at(doc, doc->root, "", "rollout", "rollout", err)))
        rc = LIBRA_EINVAL;
    if (rc == 0)
        rc = read_instances(out, doc, rollout, err);
    if (rc == 0 && !member(doc, rollout, "rollout", "buckets", err))
        rc = LIBRA_EINVAL;
    return rc ? rc : read_layout(out, doc, err);
}

/* ---- against a running fleet ---------------------------------------------------------------- */

bool plan_layout_same(const struct spec_bucket_layout *a, const struct spec_bucket_layout *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        const struct spec_bucket *x = &a->bucket[i], *y = &b->bucket[i];
        if (x->max_tokens != y->max_tokens || x->n_tp != y->n_tp ||
            memcmp(x->tp, y->tp, (size_t)x->n_tp * sizeof *x->tp) != 0)
            return false;
    }
    return true;
}

bool plan_fleet_matches(const struct plan_fleet *f, const int engines[PLAN_NTP])
{
    return memcmp(f->counts, engines, sizeof f->counts) == 0;
}

/* "TP1: 4 in the plan, 2 registered (add 2)" */
static json_t *instance_difference(int tp, int plan, int engines)
{
    char text[128];
    int change = plan - engines;
    snprintf(text, sizeof text, "TP%d: %d in the plan, %d registered (%s %d)", tp, plan, engines,
             change > 0 ? "add" : "remove", change > 0 ? change : -change);
    return json_string(text);
}

json_t *plan_fleet_diff(const struct plan_fleet *f, const int engines[PLAN_NTP],
                        const struct spec_bucket_layout *layout)
{
    json_t *instances = json_array(), *differences = json_array();
    int engine_gpus = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        engine_gpus += engines[t] << t;
        if (!f->counts[t] && !engines[t])
            continue;
        json_array_append_new(instances, json_pack("{s:i, s:i, s:i, s:i}", "tp", 1 << t, "plan",
                                                   f->counts[t], "engines", engines[t], "change",
                                                   f->counts[t] - engines[t]));
        if (f->counts[t] != engines[t])
            json_array_append_new(differences,
                                  instance_difference(1 << t, f->counts[t], engines[t]));
    }
    char plan_text[SPEC_BUCKET_TEXT_MAX], gw_text[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&f->layout, plan_text, sizeof plan_text);
    spec_bucket_format(layout, gw_text, sizeof gw_text);
    bool same = plan_layout_same(&f->layout, layout);
    if (!same) {
        char text[2 * SPEC_BUCKET_TEXT_MAX + 64];
        snprintf(text, sizeof text, "buckets: %s in the plan, %s in the gateway", plan_text,
                 gw_text);
        json_array_append_new(differences, json_string(text));
    }
    return json_pack("{s:b, s:o, s:{s:i, s:i}, s:{s:s, s:s, s:b}, s:f, s:o}", "matches",
                     same && plan_fleet_matches(f, engines), "instances", instances, "rollout_gpus",
                     "plan", f->rollout_gpus, "engines", engine_gpus, "buckets", "plan", plan_text,
                     "gateway", gw_text, "same", same, "step_s", f->step_s, "differences",
                     differences);
}
