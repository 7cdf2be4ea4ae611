/*
 * The shape of a result: the type and range each member the figures read must have where it
 * is present, and the few members without which a document is no result of its kind.
 *
 * A figure leaves out what is missing, with a note. A member of another type — a hand-edited
 * file, another program's JSON under libra's schema — would read the same way as a missing one
 * and leave figures undrawn for a wrong reason, or drop points of a line silently; a value
 * libra never writes (a negative time, a share of 50, a step of 1e308 seconds) would be drawn
 * as if it were data, off the axes. So report_add refuses both, naming FILE:LINE:COL and the
 * member. null counts as absent (results write null for a number they could not compute),
 * except for a required member. Members no figure reads are not checked, so results of later
 * libra versions with more members still draw.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/internal.h"
#include "util/json.h"

/* A rule: "PATH:T", "PATH:T!" or either followed by "=V1|V2|...", PATH '/'-separated members
 * ('*': every member of an object or element of an array; digits: that element of an array),
 * T the type (o object, a array, s string, b true or false; i a count: an integer from 0 to
 * 2^53 - 1; q a quantity, seconds, a rate or a per-decision regret: a number from 0 to 2^53; f
 * a share: a number from 0 to 1), '!' a member that must be there and not null, and
 * V1|V2|... the strings libra writes there, when it writes no other. Every member a figure or
 * a caption reads is listed (tests/e2e/test_report_shape.py spoils each member of real
 * results and asks for a refusal or the very same page). */
typedef const char *const rules[];

/* The largest count or quantity a result holds: 2^53 - 1, the largest integer a double holds
 * exactly (sim.seed's bound). A step of 1e308 seconds is no simulated time. */
#define MOST 9007199254740991.0

/* A share computed from sums of doubles (a busy share) may pass 1 by a rounding. */
#define SHARE_MOST (1 + 1e-9)

/* The members of a libra.sim/1 result the figures read (also every cell's result in a sweep). */
static rules sim = {
    "modes:o!",
    "modes/*:o!",
    "modes/*/steps:a",
    "modes/*/steps/*:o",
    "modes/*/steps/*/step:i",
    "modes/*/steps/*/step_s:q",
    "modes/*/steps/*/train_s:q",
    "modes/*/steps/*/sync_s:q",
    "modes/*/steps/*/switch_s:q",
    "modes/*/steps/*/end_s:q",
    "modes/*/steps/*/rollout_utilisation:f",
    "modes/*/steps/*/train_utilisation:f",
    "modes/*/steps/*/tail_share:f",
    "modes/*/run:o",
    "modes/*/run/steps:i",
    "modes/*/run/warmup_steps:i",
    "modes/*/run/trained_tokens_per_s:q",
    "modes/*/run/mean_step_s:q",
    "modes/*/run/rollout_utilisation:f",
    "modes/*/run/train_utilisation:f",
    "modes/*/run/tail_share:f",
    "modes/*/run/trajectory_lengths:o",
    "modes/*/run/trajectory_lengths/*:o",
    "modes/*/run/trajectory_lengths/*/bin_edges:a!",
    "modes/*/run/trajectory_lengths/*/bin_edges/*:q",
    "modes/*/run/trajectory_lengths/*/counts:a!",
    "modes/*/run/trajectory_lengths/*/counts/*:i",
    "modes/*/layout:o",
    "modes/*/layout/train_gpus:i",
    "modes/*/layout/rollout_gpus:i",
    "modes/*/layout/colocated:b",
    "modes/*/planner:o",
    "modes/*/planner/predicted:o",
    "modes/*/planner/predicted/step_s:q",
    "modes/*/planner/predicted/train_s:q",
    "modes/*/planner/predicted/rollout_s:q",
    "modes/*/planner/simulated:o",
    "modes/*/planner/simulated/step_s:q",
    "modes/*/planner/simulated/train_s:q",
    "modes/*/planner/simulated/rollout_s:q",
    "modes/*/routing:o",
    "modes/*/routing/all:o",
    "modes/*/routing/all/accuracy:f",
    "modes/*/routing/all/token_weighted_accuracy:f",
    "modes/*/routing/all/majority_class:o",
    "modes/*/routing/all/majority_class/accuracy:f",
    "modes/*/routing/all/first_placements:o",
    "modes/*/routing/all/first_placements/accuracy:f",
    "modes/*/timeline:o",
    "modes/*/timeline/steps:o",
    "modes/*/timeline/steps/first:i",
    "modes/*/timeline/steps/last:i",
    "modes/*/timeline/from_s:q",
    "modes/*/timeline/to_s:q",
    "modes/*/timeline/complete_to_s:q",
    "modes/*/timeline/max_intervals:i",
    "modes/*/timeline/trainer:o",
    "modes/*/timeline/trainer/gpus:i",
    "modes/*/timeline/trainer/intervals:a",
    "modes/*/timeline/trainer/intervals/*:a",
    "modes/*/timeline/trainer/intervals/*/0:q!", /* [from_s, to_s, sim_use_name's use] */
    "modes/*/timeline/trainer/intervals/*/1:q!",
    "modes/*/timeline/trainer/intervals/*/2:s!=rollout|train|sync",
    "modes/*/timeline/instances:a",
    "modes/*/timeline/instances/*:o",
    "modes/*/timeline/instances/*/instance:i",
    "modes/*/timeline/instances/*/hybrid_replica:i",
    "modes/*/timeline/instances/*/intervals:a",
    "modes/*/timeline/instances/*/intervals/*:a",
    "modes/*/timeline/instances/*/intervals/*/0:q!",
    "modes/*/timeline/instances/*/intervals/*/1:q!",
    "modes/*/timeline/instances/*/intervals/*/2:s!=rollout|train|sync",
    "modes/*/timeline/instances/*/busy_share:f",
    "modes/*/timeline/instances/*/requests:i",
    "modes/*/timeline/instances/*/generated_tokens:i",
    "modes/*/timeline/instances/*/tp:i",
    "ratios:o",
    "ratios/*:q",
    NULL,
};

static rules sweep = {
    "grid:a",
    "grid/*:o",
    "grid/*/key:s",
    "grid/*/values:a",
    "grid/*/values/*:s",
    "seeds:a",
    "seeds/*:i",
    "summary:a",
    "summary/*:o",
    "summary/*/set:o",
    "summary/*/set/*:s",
    "summary/*/modes:o",
    "summary/*/modes/*:o",
    "cells:a!",
    "cells/*:o",
    "cells/*/point:i",
    "cells/*/seed:i",
    "cells/*/result:o",
    "cells/*/error:o",
    "attribution:a",
    "attribution/*:o",
    "attribution/*/set:o",
    "attribution/*/set/*:s",
    "attribution/*/ladder:a",
    "attribution/*/ladder/*:o",
    "attribution/*/ladder/*/label:s",
    "attribution/*/ladder/*/trained_tokens_per_s:o",
    "attribution/*/ladder/*/trained_tokens_per_s/median:q",
    "attribution/*/ladder/*/trained_tokens_per_s/q1:q",
    "attribution/*/ladder/*/trained_tokens_per_s/q3:q",
    "attribution/*/ladder/*/over_previous:o",
    "attribution/*/ladder/*/over_previous/median:q",
    "attribution/*/leave_one_out:a",
    "attribution/*/leave_one_out/*:o",
    "attribution/*/leave_one_out/*/label:s",
    "attribution/*/leave_one_out/*/trained_tokens_per_s:o",
    "attribution/*/leave_one_out/*/trained_tokens_per_s/median:q",
    "attribution/*/leave_one_out/*/trained_tokens_per_s/q1:q",
    "attribution/*/leave_one_out/*/trained_tokens_per_s/q3:q",
    "attribution/*/leave_one_out/*/over_libra:o",
    "attribution/*/leave_one_out/*/over_libra/median:q",
    NULL,
};

static rules load = {
    "steps:a!",
    "steps/*:o",
    "steps/*/step:i!",
    "steps/*/wall_s:q!",
    "steps/*/prompt_tokens:i",
    "steps/*/cached_tokens:i",
    "steps/*/generated_tokens:i",
    "engines:a",
    "engines/*:o",
    "engines/*/turns:i",
    "engines/*/dead:b",
    "error:s",
    "style:s",
    NULL,
};

static rules plan = {
    "feasible:b!",
    "why:s",
    "mode:s",
    "gpus:i",
    "gpus_per_node:i",
    "train:o",
    "train/tp:i",
    "train/pp:i",
    "train/cp:i",
    "train/dp:i",
    "objective:o",
    "objective/step_s:q",
    "objective/train_s:q",
    "objective/rollout_s:q",
    "rollout:o",
    "rollout/instances:o",
    "rollout/instances/*:i",
    "placement:a",
    "placement/*:o",
    "placement/*/node:i",
    "placement/*/gpus:a",
    "placement/*/gpus/*:o",
    "placement/*/gpus/*/gpu:i",
    "placement/*/gpus/*/role:s=train|rollout|idle",
    "placement/*/gpus/*/instance:i",
    "placement/*/gpus/*/instance_tp:i",
    NULL,
};

static rules route = {
    "buckets:s",
    "trace:o",
    "trace/path:s",
    "train_steps:i",
    "folds:i",
    "min_visits:i",
    "truncated:s=exact|censored",
    "placebo:o",
    "policies:o!",
    "policies/*:o",
    "policies/*/all:o",
    "policies/*/all/accuracy:f",
    "policies/*/all/token_weighted_accuracy:f",
    "policies/*/all/moves_per_trajectory:q",
    "policies/*/all/majority_class:o",
    "policies/*/all/majority_class/accuracy:f",
    "policies/*/all/regret:o",
    "policies/*/all/regret/per_decision_gpu_s:q",
    "policies/*/all/regret/majority_class:o",
    "policies/*/all/regret/majority_class/per_decision_gpu_s:q",
    "policies/*/all/regret/best_constant:o",
    "policies/*/all/regret/best_constant/per_decision_gpu_s:q",
    "policies/*/all/regret/decisions:i",
    "policies/*/confusion:a",
    "policies/*/confusion/*:a",
    "policies/*/confusion/*/*:i",
    NULL,
};

/* The members route eval always writes, of a type the rules above checked: checked last, so a
 * member of another type is named before one missing beside it. A policy without its totals
 * would lose its bars. */
static rules route_written = {"policies/*/all:o!", NULL};

/* Every result's envelope. */
static rules envelope = {"config_digest:s", "libra_version:s", "seed:i", NULL};

static const char *type_name(char t)
{
    switch (t) {
    case 'o':
        return "an object";
    case 'a':
        return "an array";
    case 'i':
        return "an integer from 0 to 2^53 - 1";
    case 'q':
        return "a number from 0 to 2^53";
    case 'f':
        return "a share from 0 to 1";
    case 's':
        return "a string";
    default:
        return "true or false";
    }
}

static const char *json_type_name(const json_t *v)
{
    return json_is_object(v)    ? "an object"
           : json_is_array(v)   ? "an array"
           : json_is_number(v)  ? "a number"
           : json_is_string(v)  ? "a string"
           : json_is_boolean(v) ? "true or false"
                                : "null";
}

static bool has_type(const json_t *v, char t)
{
    double d = json_number_value(v);
    switch (t) {
    case 'o':
        return json_is_object(v);
    case 'a':
        return json_is_array(v);
    case 'i':
        return json_is_number(v) && d >= 0 && d <= MOST && d == floor(d);
    case 'q':
        return json_is_number(v) && d >= 0 && d <= MOST + 1;
    case 'f':
        return json_is_number(v) && d >= 0 && d <= SHARE_MOST;
    case 's':
        return json_is_string(v);
    default:
        return json_is_boolean(v);
    }
}

/* One check under way: the document, where the error goes, the path to the value at hand
 * (escaped as a JSON pointer without its leading '/'), the rule's type, whether the rule
 * requires the member and the strings it allows ("V1|V2|...", or NULL: any). */
struct walk {
    const struct ujson_doc *doc;
    struct libra_error *err;
    char path[512];
    char type;
    bool required;
    const char *values;
};

/* Whether string v is one of values ("V1|V2|..."). */
static bool one_of(const char *v, const char *values)
{
    size_t n = strlen(v);
    for (const char *c = values; c;) {
        if (strncmp(c, v, n) == 0 && (c[n] == '|' || c[n] == '\0'))
            return true;
        c = strchr(c, '|');
        c = c ? c + 1 : NULL;
    }
    return false;
}

/* Refuses the string v at w's path (len characters), not one of the rule's values. */
static int refuse_value(struct walk *w, const json_t *v, size_t len)
{
    char list[160];
    size_t n = 0;
    for (const char *c = w->values; *c && n + 3 < sizeof list; c++) {
        if (*c == '|')
            list[n++] = ',';
        list[n++] = *c == '|' ? ' ' : *c;
    }
    list[n] = '\0';
    w->path[len] = '\0';
    return ujson_errorf(w->err, w->doc, w->path, "must be one of %s, not '%.60s'", list,
                        json_string_value(v));
}

/* Refuses the value v at w's path (len characters): of another type or range, or null or
 * missing where required (a missing member named at the object that lacks it). */
static int refuse(struct walk *w, const json_t *v, size_t len)
{
    w->path[len] = '\0';
    if (json_is_number(v) && strchr("iqfn", w->type)) /* a number out of range */
        return ujson_errorf(w->err, w->doc, w->path, "must be %s, not %.10g", type_name(w->type),
                            json_number_value(v));
    if (v)
        return ujson_errorf(w->err, w->doc, w->path, "must be %s, not %s", type_name(w->type),
                            json_type_name(v));
    char key[128], *slash = strrchr(w->path, '/');
    snprintf(key, sizeof key, "%s", slash ? slash + 1 : w->path);
    *(slash ? slash : w->path) = '\0';
    return ujson_errorf(w->err, w->doc, w->path, "%s: missing", key);
}

/* Appends member key (escaped) to w's path at len; returns the new length, or 0 when it does
 * not fit (the rule is then not followed deeper: paths that long are not libra's). */
static size_t push(struct walk *w, size_t len, const char *key)
{
    size_t n = len;
    if (n && n + 1 < sizeof w->path)
        w->path[n++] = '/';
    for (const char *c = key; *c; c++) {
        const char *put = *c == '~' ? "~0" : *c == '/' ? "~1" : (char[2]){*c, '\0'};
        size_t k = strlen(put);
        if (n + k >= sizeof w->path)
            return 0;
        memcpy(w->path + n, put, k);
        n += k;
    }
    w->path[n] = '\0';
    return n;
}

static int check_at(struct walk *w, const json_t *v, const char *pattern, size_t len);

/* Follows the rest of the pattern into child key of the value at w's path. */
static int child(struct walk *w, const json_t *c, const char *key, const char *rest, size_t len)
{
    size_t n = push(w, len, key);
    return n ? check_at(w, c, rest, n) : 0;
}

/* Checks the value v at w's path (len characters) against pattern, the rule's rest. */
static int check_at(struct walk *w, const json_t *v, const char *pattern, size_t len)
{
    if (!*pattern && w->required && (!v || json_is_null(v)))
        return refuse(w, v, len);
    if (!v || json_is_null(v))
        return 0;
    if (!*pattern && !has_type(v, w->type))
        return refuse(w, v, len);
    if (!*pattern)
        return w->values && !one_of(json_string_value(v), w->values) ? refuse_value(w, v, len) : 0;
    const char *slash = strchr(pattern, '/');
    size_t head = slash ? (size_t)(slash - pattern) : strlen(pattern);
    const char *rest = slash ? slash + 1 : pattern + head;
    char key[64];
    if (head >= sizeof key)
        return 0;
    memcpy(key, pattern, head);
    key[head] = '\0';
    bool all = strcmp(key, "*") == 0;
    int rc = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        if (!all)
            return child(w, json_object_get(v, key), key, rest, len);
        json_object_foreach((json_t *)v, k, c)
        {
            if ((rc = child(w, c, k, rest, len)) != 0)
                return rc;
        }
    } else if (json_is_array(v) && !all) {
        char *end;
        size_t i = (size_t)strtoull(key, &end, 10);
        return *key && !*end ? child(w, json_array_get(v, i), key, rest, len) : 0;
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && rc == 0; i++) {
            char index[24];
            snprintf(index, sizeof index, "%zu", i);
            rc = child(w, json_array_get(v, i), index, rest, len);
        }
    }
    return rc; /* a value of another type is its own rule's to name */
}

static int check_rules(struct walk *w, const json_t *root, const char *base, rules r)
{
    for (size_t i = 0; r[i]; i++) {
        const char *colon = strrchr(r[i], ':'), *values = strchr(colon, '=');
        char pattern[160];
        snprintf(pattern, sizeof pattern, "%.*s", (int)(colon - r[i]), r[i]);
        w->type = colon[1];
        w->required = colon[2] == '!';
        w->values = values ? values + 1 : NULL;
        size_t len = strlen(base);
        memcpy(w->path, base, len + 1);
        int rc = check_at(w, root, pattern, len);
        if (rc)
            return rc;
    }
    return 0;
}

/* Each interval of the timeline row at w's path (len characters) ends no earlier than it
 * starts (the rules made it [from, to, use]): a reversed one would be no time on the chart. */
static int check_row(struct walk *w, const json_t *row, size_t len)
{
    const json_t *iv = json_object_get(row, "intervals");
    for (size_t k = 0; len && k < json_array_size(iv); k++) {
        const json_t *x = json_array_get(iv, k);
        double from = json_number_value(json_array_get(x, 0));
        double to = json_number_value(json_array_get(x, 1));
        if (to >= from)
            continue;
        snprintf(w->path + len, sizeof w->path - len, "/intervals/%zu/1", k);
        return ujson_errorf(w->err, w->doc, w->path,
                            "must be at least the interval's start, %.10g, not %.10g", from, to);
    }
    return 0;
}

/* Each value of the array a at w's path (len characters), an element or the element's member
 * key, is more than the one before it, the first more than least: bin edges and step numbers
 * increase as libra writes them (counts between reversed edges fit no bin, two steps of one
 * number would draw on top of each other). noun names the value in the error. */
static int check_increasing(struct walk *w, const json_t *a, size_t len, const char *key,
                            double least, const char *noun)
{
    double before = least;
    for (size_t i = 0; len && i < json_array_size(a); i++) {
        const json_t *e = json_array_get(a, i), *v = key ? json_object_get(e, key) : e;
        double x = json_number_value(v);
        if (!json_is_number(v) || x > before) { /* the rules named any other type */
            before = json_is_number(v) ? x : before;
            continue;
        }
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        size_t at = push(w, len, index);
        if (at && key)
            at = push(w, at, key);
        if (!at)
            return 0; /* a path too long to name is not libra's */
        return i ? ujson_errorf(w->err, w->doc, w->path,
                                "must be more than the %s before it, %.10g, not %.10g", noun,
                                before, x)
                 : ujson_errorf(w->err, w->doc, w->path, "must be more than %.10g, not %.10g",
                                least, x);
    }
    return 0;
}

/* The histogram at w's path (len characters) as libra sim writes it: a count per bin, so one
 * fewer than bin_edges (both empty when it holds nothing), the edges above 0 and increasing.
 * Counts that fit no bin would leave the mode's line out of its length CDF. */
static int check_histogram(struct walk *w, const json_t *h, size_t len)
{
    const json_t *edges = json_object_get(h, "bin_edges");
    size_t n_edges = json_array_size(edges);
    size_t n_counts = json_array_size(json_object_get(h, "counts"));
    size_t at = len ? push(w, len, "counts") : 0;
    if (at && n_counts + (n_edges || n_counts) != n_edges)
        return ujson_errorf(w->err, w->doc, w->path,
                            "must hold one count fewer than bin_edges (%zu), not %zu", n_edges,
                            n_counts);
    at = len ? push(w, len, "bin_edges") : 0;
    return check_increasing(w, edges, at, NULL, 0, "edge");
}

/* The histograms of the mode at w's path (len characters): run.trajectory_lengths. */
static int check_lengths(struct walk *w, const json_t *mode, size_t len)
{
    const char *name;
    const json_t *h;
    size_t at = len ? push(w, len, "run") : 0;
    at = at ? push(w, at, "trajectory_lengths") : 0;
    int rc = 0;
    json_object_foreach((json_t *)report_get(mode, "run/trajectory_lengths"), name, h)
    {
        if (at && (rc = check_histogram(w, h, push(w, at, name))) != 0)
            return rc;
    }
    return 0;
}

/* The GPU timeline of the mode at w's path (len characters): its steps a range, first to
 * last (a caption of "steps 2 to 1" is none), and each row's intervals (check_row). */
static int check_timeline(struct walk *w, const json_t *mode, size_t len)
{
    const json_t *tl = json_object_get(mode, "timeline"), *inst;
    const json_t *steps = json_object_get(tl, "steps");
    const json_t *first_v = json_object_get(steps, "first"),
                 *last_v = json_object_get(steps, "last");
    double first = json_number_value(first_v), last = json_number_value(last_v);
    size_t at = len ? push(w, len, "timeline") : 0, rows;
    if (!at) /* a name too long to name (not libra's) */
        return 0;
    /* without both ends there is no range: the figure says it has no usable steps */
    size_t end = first_v && last_v && last < first ? push(w, at, "steps") : 0;
    if (end && push(w, end, "last"))
        return ujson_errorf(w->err, w->doc, w->path,
                            "must be at least steps.first, %.10g, not %.10g", first, last);
    int rc = check_row(w, json_object_get(tl, "trainer"), push(w, at, "trainer"));
    inst = json_object_get(tl, "instances");
    for (size_t i = 0; rc == 0 && i < json_array_size(inst); i++) {
        char index[24];
        snprintf(index, sizeof index, "%zu", i);
        rows = push(w, at, "instances");
        rc = check_row(w, json_array_get(inst, i), rows ? push(w, rows, index) : 0);
    }
    return rc;
}

/* Every mode of the sim result at base: its timeline and its histograms. */
static int check_modes(struct walk *w, const json_t *result, const char *base)
{
    const char *name;
    const json_t *mode;
    int rc = 0;
    json_object_foreach((json_t *)json_object_get(result, "modes"), name, mode)
    {
        snprintf(w->path, sizeof w->path, "%s", base);
        size_t at = push(w, strlen(base), "modes");
        at = at ? push(w, at, name) : 0;
        if ((rc = check_timeline(w, mode, at)) != 0 || (rc = check_lengths(w, mode, at)) != 0)
            return rc;
    }
    return 0;
}

/* A libra.sim/1 result at base: the rules, then each mode's timeline and histograms. */
static int check_sim(struct walk *w, const json_t *result, const char *base)
{
    int rc = check_rules(w, result, base, sim);
    return rc ? rc : check_modes(w, result, base);
}

/* Each grid point's cells run the sweep's seeds, each once: one cell a seed repeats (or that
 * runs no seed of the sweep) stands for another that is not there. check_cells counted the
 * cells of each point, points * seeds in all. */
static int check_seeds(const struct ujson_doc *doc, struct libra_error *err, size_t points)
{
    const json_t *cells = json_object_get(doc->root, "cells");
    const json_t *seeds = json_object_get(doc->root, "seeds");
    size_t n = json_array_size(seeds), *ran = xcalloc(points * n, sizeof *ran);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(cells); i++) {
        const json_t *c = json_array_get(cells, i), *seed = json_object_get(c, "seed");
        size_t p = (size_t)json_number_value(json_object_get(c, "point")), j = 0;
        double v = json_number_value(seed);
        while (j < n && json_number_value(json_array_get(seeds, j)) != v)
            j++;
        char path[40];
        snprintf(path, sizeof path, "cells/%zu/seed", i);
        if (!json_is_number(seed))
            rc = ujson_errorf(err, doc, path, "missing: a cell is the run of a seed");
        else if (j == n)
            rc = ujson_errorf(err, doc, path, "%.0f is no seed of the sweep (seeds)", v);
        else if (ran[p * n + j])
            rc = ujson_errorf(err, doc, path,
                              "grid point %zu runs seed %.0f twice (cells %zu and %zu): the sweep "
                              "is edited",
                              p, v, ran[p * n + j] - 1, i);
        else
            ran[p * n + j] = i + 1;
    }
    free(ran);
    return rc;
}

/* A sweep libra writes runs one seed or more (--seeds N, N >= 1) at one grid point or more:
 * without them its cells would be drawn as medians over seeds and points the captions do not
 * name, so an empty or missing seeds or summary is an edited sweep, never an empty one. */
static int grid_error(const struct ujson_doc *doc, struct libra_error *err, const char *key,
                      const char *what)
{
    size_t cells = json_array_size(json_object_get(doc->root, "cells"));
    bool here = json_object_get(doc->root, key) != NULL; /* else missing, placed at the document */
    return ujson_errorf(err, doc, key,
                        "%s%s, where a sweep has one or more (its cells hold %zu run%s): the "
                        "sweep is edited",
                        here ? "" : "missing: ", what, cells, cells == 1 ? "" : "s");
}

/* The grid's values make the product of their counts of points (the first key varies slowest),
 * each run once per seed: a grid that makes other points than the summary holds names, in the
 * captions' --sweep flags, points that are not drawn (or leaves drawn ones out). A key without
 * its values counts nothing: its flag is left unnamed, as a missing member is. */
static int check_grid_values(const struct ujson_doc *doc, struct libra_error *err, size_t points,
                             size_t seeds)
{
    const json_t *grid = json_object_get(doc->root, "grid");
    double made = 1; /* a double: a crafted grid's product may pass SIZE_MAX */
    for (size_t k = 0; k < json_array_size(grid); k++) {
        const json_t *values = json_object_get(json_array_get(grid, k), "values");
        if (!json_is_array(values))
            return 0;
        made *= (double)json_array_size(values);
    }
    if (json_array_size(grid) == 0 || made == (double)points)
        return 0;
    size_t cells = json_array_size(json_object_get(doc->root, "cells"));
    return ujson_errorf(err, doc, "grid",
                        "its values make %.0f grid point%s, %.0f cells with the %zu seed%s, "
                        "where the sweep holds %zu cell%s at %zu grid point%s (summary): the "
                        "sweep is edited",
                        made, made == 1 ? "" : "s", made * (double)seeds, seeds,
                        seeds == 1 ? "" : "s", cells, cells == 1 ? "" : "s", points,
                        points == 1 ? "" : "s");
}

static int check_grid(const struct ujson_doc *doc, struct libra_error *err, size_t points,
                      size_t seeds)
{
    if (seeds == 0)
        return grid_error(doc, err, "seeds", "no seed");
    if (points == 0)
        return grid_error(doc, err, "summary", "no grid point");
    return check_grid_values(doc, err, points, seeds);
}

/* A cell is a run: its result, or its error when the run failed (sim/sweep.c writes one of
 * them). A cell with neither would count as a run of its seed while its figures draw the
 * other seeds' medians alone. */
static int check_run(const struct ujson_doc *doc, struct libra_error *err, size_t i)
{
    const json_t *cell = json_array_get(json_object_get(doc->root, "cells"), i);
    bool result = json_is_object(json_object_get(cell, "result"));
    if (result != json_is_object(json_object_get(cell, "error")))
        return 0;
    char path[40]; /* a missing result is placed at its cell, as the rules place one */
    snprintf(path, sizeof path, result ? "cells/%zu/error" : "cells/%zu", i);
    return ujson_errorf(err, doc, path,
                        result ? "a cell holds its run's result or its error, not both"
                               : "result: missing: a cell holds its run's result, or its error "
                                 "where the run failed");
}

/* A sweep's cells against its grid: each cell a run (check_run) at a point of the summary, and
 * each point with a run per seed (check_seeds). A sweep libra writes has them all (a failed
 * run is a cell with its error); one cut short would draw medians of fewer seeds than its
 * captions say, or leave points out. */
static int check_cells(const struct ujson_doc *doc, struct libra_error *err)
{
    const json_t *cells = json_object_get(doc->root, "cells");
    size_t points = json_array_size(json_object_get(doc->root, "summary"));
    size_t seeds = json_array_size(json_object_get(doc->root, "seeds"));
    int rc = check_grid(doc, err, points, seeds);
    if (rc)
        return rc;
    size_t *runs = xcalloc(points, sizeof *runs);
    for (size_t i = 0; rc == 0 && i < json_array_size(cells); i++) {
        const json_t *p = json_object_get(json_array_get(cells, i), "point");
        char path[40];
        snprintf(path, sizeof path, "cells/%zu/point", i);
        if ((rc = check_run(doc, err, i)) != 0)
            break;
        if (!json_is_number(p)) /* 'i' where present: a cell without a point is no run of it */
            rc = ujson_errorf(err, doc, path, "missing: a cell is the run of a grid point");
        else if (json_number_value(p) >= (double)points)
            rc = ujson_errorf(err, doc, path, "%.0f is no grid point (the summary has %zu)",
                              json_number_value(p), points);
        else
            runs[(size_t)json_number_value(p)]++;
    }
    for (size_t p = 0; rc == 0 && p < points; p++)
        if (runs[p] != seeds)
            rc = ujson_errorf(err, doc, "cells",
                              "grid point %zu holds %zu run%s, not one per seed (%zu): the sweep "
                              "is cut short or edited",
                              p, runs[p], runs[p] == 1 ? "" : "s", seeds);
    free(runs);
    return rc ? rc : check_seeds(doc, err, points);
}

/* A plan's rollout engine as its placement's GPUs give it. */
struct engine_seen {
    double tp, node;
    size_t gpus, at_node, at_gpu; /* the first GPU's placement/AT_NODE/gpus/AT_GPU */
};

/* What the placement must agree with: the plan's GPUs per node and its engines. */
struct placement_walk {
    const struct ujson_doc *doc;
    struct libra_error *err;
    const json_t *tps;           /* rollout.instances: {"tpN": count}, or NULL */
    size_t n_engines;            /* the sum of tps' counts */
    struct engine_seen *engines; /* by instance id */
    char path[80];
};

/* Refuses the member of placement/I (or of its GPU G, G >= 0). */
__attribute__((format(printf, 5, 6))) static int placement_errorf(struct placement_walk *p,
                                                                  size_t i, long g,
                                                                  const char *member,
                                                                  const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g < 0)
        snprintf(p->path, sizeof p->path, "placement/%zu/%s", i, member);
    else
        snprintf(p->path, sizeof p->path, "placement/%zu/gpus/%ld/%s", i, g, member);
    return ujson_errorf(p->err, p->doc, p->path, "%s", msg);
}

/* Refuses the GPU G of placement/I for lacking member, placed at the GPU as the rules place a
 * missing member. */
static int placement_missing(struct placement_walk *p, size_t i, size_t g, const char *member,
                             const char *why)
{
    snprintf(p->path, sizeof p->path, "placement/%zu/gpus/%zu", i, g);
    return ujson_errorf(p->err, p->doc, p->path, "%s: missing: %s", member, why);
}

/* Whether every node and GPU of the placement has its number: where one has not, the layout's
 * figure is left out with a note saying which (fig_plan.c), and nothing here can be judged. */
static bool placement_numbered(const json_t *nodes)
{
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        const json_t *node = json_array_get(nodes, i), *gpus = json_object_get(node, "gpus");
        if (!json_is_number(json_object_get(node, "node")))
            return false;
        for (size_t g = 0; g < json_array_size(gpus); g++)
            if (!json_is_number(json_object_get(json_array_get(gpus, g), "gpu")))
                return false;
    }
    return true;
}

/* The engine a GPU of node i serves, if any: an instance id of the plan, of a TP it plans, on
 * one node with the engine's other GPUs (an engine's TP group never straddles nodes). */
static int check_engine_gpu(struct placement_walk *p, const json_t *x, size_t i, size_t g,
                            double node)
{
    const json_t *inst = json_object_get(x, "instance"), *tp = json_object_get(x, "instance_tp");
    if (!inst && !tp)
        return 0;
    if (!inst || !tp)
        return placement_missing(p, i, g, inst ? "instance_tp" : "instance",
                                 "a GPU of an engine carries its instance and its TP");
    double id = json_number_value(inst), t = json_number_value(tp);
    char key[32];
    snprintf(key, sizeof key, "tp%.0f", t);
    if (!(id < (double)p->n_engines))
        return placement_errorf(p, i, (long)g, "instance",
                                "%.0f is no instance of the plan's %zu (rollout.instances)", id,
                                p->n_engines);
    if (!(json_number_value(json_object_get(p->tps, key)) > 0))
        return placement_errorf(p, i, (long)g, "instance_tp",
                                "%.0f is no TP of the plan's instances (rollout.instances)", t);
    struct engine_seen *e = &p->engines[(size_t)id];
    if (e->gpus == 0)
        *e = (struct engine_seen){t, node, 0, i, g};
    if (e->tp != t)
        return placement_errorf(p, i, (long)g, "instance_tp",
                                "%.0f where the other GPUs of instance %.0f say %.0f", t, id,
                                e->tp);
    if (e->node != node)
        return placement_errorf(p, i, (long)g, "instance",
                                "instance %.0f on node %.0f, its other GPUs on node %.0f: an "
                                "engine's TP group is on one node",
                                id, node, e->node);
    e->gpus++;
    return 0;
}

/* Node i: a number below the placement's node count, once; its GPUs each below gpus_per_node
 * (gpn, NAN when absent), once, with their engines. */
static int check_node(struct placement_walk *p, const json_t *nodes, size_t i, double gpn,
                      size_t *node_at, size_t *placed)
{
    const json_t *node = json_array_get(nodes, i), *gpus = json_object_get(node, "gpus");
    double n = json_number_value(json_object_get(node, "node"));
    size_t count = json_array_size(nodes);
    if (!(n < (double)count))
        return placement_errorf(p, i, -1, "node", "%.0f is no node of the placement's %zu", n,
                                count);
    if (node_at[(size_t)n])
        return placement_errorf(p, i, -1, "node",
                                "node %.0f is placed twice (placement %zu and %zu)", n,
                                node_at[(size_t)n] - 1, i);
    node_at[(size_t)n] = i + 1;
    size_t slots = json_array_size(gpus);
    size_t *gpu_at = xcalloc(slots + 1, sizeof *gpu_at);
    int rc = 0;
    for (size_t g = 0; rc == 0 && g < slots; g++) {
        const json_t *x = json_array_get(gpus, g);
        double k = json_number_value(json_object_get(x, "gpu"));
        if (!(k < gpn) && !isnan(gpn))
            rc = placement_errorf(p, i, (long)g, "gpu",
                                  "%.0f is no GPU of a node of %.0f (gpus_per_node)", k, gpn);
        else if (!(k < (double)slots))
            rc = placement_errorf(p, i, (long)g, "gpu",
                                  "%.0f is no GPU of node %.0f, which places %zu numbered from 0",
                                  k, n, slots);
        else if (gpu_at[(size_t)k])
            rc = placement_errorf(p, i, (long)g, "gpu",
                                  "GPU %.0f of node %.0f is placed twice (gpus %zu and %zu)", k, n,
                                  gpu_at[(size_t)k] - 1, g);
        else if (!p->tps || (rc = check_engine_gpu(p, x, i, g, n)) == 0)
            gpu_at[(size_t)k] = g + 1;
    }
    free(gpu_at);
    *placed += slots;
    return rc;
}

/* Every engine of rollout.instances is placed whole: as many GPUs as its TP, and as many
 * engines of each TP as the plan has. */
static int check_engines_placed(struct placement_walk *p)
{
    for (size_t k = 0; k < p->n_engines; k++) {
        const struct engine_seen *e = &p->engines[k];
        if (e->gpus != 0 && (double)e->gpus == e->tp)
            continue;
        if (e->gpus == 0)
            return ujson_errorf(p->err, p->doc, "placement",
                                "instance %zu of the plan's %zu (rollout.instances) has no GPU", k,
                                p->n_engines);
        return placement_errorf(p, e->at_node, (long)e->at_gpu, "instance",
                                "instance %zu holds %zu GPUs where its TP is %.0f", k, e->gpus,
                                e->tp);
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)p->tps, key, v)
    {
        size_t n = 0;
        char tp[32];
        for (size_t k = 0; k < p->n_engines; k++) {
            snprintf(tp, sizeof tp, "tp%.0f", p->engines[k].tp);
            n += strcmp(tp, key) == 0;
        }
        if ((double)n != json_number_value(v))
            return ujson_errorf(p->err, p->doc, "placement",
                                "%zu instances of TP %s placed where rollout.instances has %.0f", n,
                                key + 2, json_number_value(v));
    }
    return 0;
}

/* The plan's engines (the sum of rollout.instances), at most one per GPU placed: a count
 * libra never writes is refused before anything the size of it is made. */
static int count_engines(struct placement_walk *p, const json_t *nodes)
{
    double engines = 0, slots = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)p->tps, key, v)
    {
        engines += json_number_value(v);
    }
    for (size_t i = 0; i < json_array_size(nodes); i++)
        slots += (double)json_array_size(json_object_get(json_array_get(nodes, i), "gpus"));
    if (engines > slots)
        return ujson_errorf(p->err, p->doc, "rollout/instances",
                            "%.0f instances where the placement has %.0f GPUs", engines, slots);
    p->n_engines = (size_t)engines;
    return 0;
}

/* A feasible plan's placement against the plan: each node and GPU once and in range, every
 * GPU of the plan placed, every engine whole on one node. A value libra never writes would
 * draw a GPU off its node's row, two cells in one, or an engine of a TP the plan has not. */
static int check_placement(const struct ujson_doc *doc, struct libra_error *err)
{
    const json_t *root = doc->root, *nodes = json_object_get(root, "placement");
    if (!json_is_true(json_object_get(root, "feasible")) || !json_is_array(nodes) ||
        !placement_numbered(nodes))
        return 0;
    struct placement_walk p = {.doc = doc, .err = err};
    p.tps = json_object_get(json_object_get(root, "rollout"), "instances");
    p.tps = json_is_object(p.tps) ? p.tps : NULL;
    const json_t *gpn = json_object_get(root, "gpus_per_node"),
                 *gpus = json_object_get(root, "gpus");
    size_t n = json_array_size(nodes), placed = 0;
    int rc = count_engines(&p, nodes);
    if (rc)
        return rc;
    size_t *node_at = xcalloc(n + 1, sizeof *node_at);
    p.engines = xcalloc(p.n_engines + 1, sizeof *p.engines);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = check_node(&p, nodes, i, json_is_number(gpn) ? json_number_value(gpn) : NAN, node_at,
                        &placed);
    if (rc == 0 && json_is_number(gpus) && (double)placed != json_number_value(gpus))
        rc = ujson_errorf(err, doc, "placement", "%zu GPUs placed where the plan has %.0f (gpus)",
                          placed, json_number_value(gpus));
    if (rc == 0 && p.tps)
        rc = check_engines_placed(&p);
    free(node_at);
    free(p.engines);
    return rc;
}

/* Each policy's confusion matrix is square: a row per true bucket, a count per chosen one. */
static int check_confusion(const struct ujson_doc *doc, struct libra_error *err)
{
    const char *name;
    const json_t *policy;
    json_object_foreach((json_t *)json_object_get(doc->root, "policies"), name, policy)
    {
        const json_t *m = json_object_get(policy, "confusion");
        size_t n = json_array_size(m);
        for (size_t i = 0; i < n; i++)
            if (json_array_size(json_array_get(m, i)) != n) {
                char path[96];
                snprintf(path, sizeof path, "policies/%.40s/confusion/%zu", name, i);
                return ujson_errorf(err, doc, path,
                                    "%zu counts where the matrix has %zu rows: a confusion "
                                    "matrix is square (a row and a column per bucket)",
                                    json_array_size(json_array_get(m, i)), n);
            }
    }
    return 0;
}

int report_check_shape(const struct ujson_doc *doc, enum report_kind kind, struct libra_error *err)
{
    struct walk w = {.doc = doc, .err = err};
    static const char *const *const by_kind[] = {[REPORT_SIM] = sim,
                                                 [REPORT_SWEEP] = sweep,
                                                 [REPORT_LOAD] = load,
                                                 [REPORT_PLAN] = plan,
                                                 [REPORT_ROUTE] = route};
    int rc = check_rules(&w, doc->root, "", envelope);
    if (rc == 0 && kind == REPORT_SIM)
        rc = check_sim(&w, doc->root, "");
    else if (rc == 0)
        rc = check_rules(&w, doc->root, "", by_kind[kind]);
    if (rc == 0 && kind == REPORT_LOAD)
        rc = check_increasing(&w, json_object_get(doc->root, "steps"), push(&w, 0, "steps"), "step",
                              -1, "step");
    const json_t *cells = json_object_get(doc->root, "cells");
    for (size_t i = 0; rc == 0 && kind == REPORT_SWEEP && i < json_array_size(cells); i++) {
        char base[40];
        snprintf(base, sizeof base, "cells/%zu/result", i);
        const json_t *result = json_object_get(json_array_get(cells, i), "result");
        if (json_is_object(result))
            rc = check_sim(&w, result, base);
    }
    if (rc == 0 && kind == REPORT_SWEEP)
        rc = check_cells(doc, err);
    if (rc == 0 && kind == REPORT_PLAN)
        rc = check_placement(doc, err);
    if (rc == 0 && kind == REPORT_ROUTE)
        rc = check_confusion(doc, err);
    if (rc == 0 && kind == REPORT_ROUTE)
        rc = check_rules(&w, doc->root, "", route_written);
    return rc;
}
