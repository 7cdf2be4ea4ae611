/*
 * Plans and buckets in the gateway (docs/serve.md "Plans and buckets").
 *
 * The planner is only as good as the lengths it is given, and the gateway sees the real ones:
 * every trajectory that ends is kept as its lengths and tool time (trace_traj_lengths, what
 * `libra plan --trace` reads of the same record in a capture) in a window of the last
 * plan_sample_size(rl.batch_trajectories) — the size of `libra plan`'s own sample. GET
 * /libra/v1/plan plans the experiment's cluster on the window's whole batches, oldest first, on
 * a worker thread (a solve takes milliseconds to plan.time_limit_s; the loop must not wait on
 * it), one solve at a time: a call that comes while one runs waits for it and gets its answer.
 * The answer is `libra plan --json`'s document plus a "fleet" object saying how the engines
 * differ from the plan. POST /libra/v1/buckets re-buckets the engines over a layout given, or
 * the last plan's, and moves the routers onto it (sched_router_set_layout: what they learnt is
 * in tokens and stays). `libra serve --plan FILE` starts from a plan written by `libra plan
 * --json`: its layout is the gateway's, and engines that differ from its instances are named
 * on stderr.
 *
 * Threading: everything here runs on the loop but the solve, which touches only its job (its
 * own lengths and results, and the experiment and presets, read-only) and posts the job back
 * with event_active (the caller of gw_new made libevent thread-aware).
 */
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "plan/fleet.h"
#include "plan/sample.h"
#include "server/internal.h"
#include "server/planning.h"
#include "util/alloc.h"
#include "util/error.h"

/* ---- the body of POST /libra/v1/buckets --------------------------------------------------- */

static int parse_layout(const json_t *v, struct spec_bucket_layout *out, char *err, size_t size)
{
    struct libra_error e = {0};
    if (!json_is_string(v))
        return error_text(err, size,
                          "buckets: expected the text form, e.g. \"tp1:4000,tp2:12000\"");
    if (spec_bucket_parse(out, json_string_value(v), "buckets", &e) != 0)
        return error_text(err, size, "buckets: column %d: %s", e.col, e.msg);
    for (int b = 0; b < out->n; b++)
        for (int k = 0; k < out->bucket[b].n_tp; k++)
            if (out->bucket[b].instances[k])
                return error_text(
                    err, size,
                    "buckets: instance counts (tp%dx%d) are not taken: the registered "
                    "engines are the instances",
                    out->bucket[b].tp[k], out->bucket[b].instances[k]);
    return 0;
}

static int parse_members(const json_t *root, struct gw_buckets_body *out, char *err, size_t size)
{
    const char *key;
    const json_t *v;
    json_object_foreach(
        (json_t *)root, key,
        v) if (strcmp(key, "buckets") != 0 &&
               strcmp(key, "from_plan") !=
                   0) return error_text(err, size,
                                        "%s: unknown member (expected buckets or from_plan)", key);
    const json_t *buckets = json_object_get(root, "buckets");
    const json_t *from_plan = json_object_get(root, "from_plan");
    if (!buckets == !from_plan)
        return error_text(err, size,
                          "body: give one of buckets (\"tp1:4000,tp2:12000,tp4:30000\") and "
                          "from_plan (true)%s",
                          buckets ? ", not both" : "");
    if (from_plan && !json_is_true(from_plan))
        return error_text(err, size, "from_plan: expected true");
    out->from_plan = from_plan != NULL;
    return buckets ? parse_layout(buckets, &out->layout, err, size) : 0;
}

int gw_buckets_parse(const char *body, size_t len, struct gw_buckets_body *out, char *err,
                     size_t err_size)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return error_text(err, err_size, "body:%d: %s", je.position, je.text);
    int rc = json_is_object(root) ? parse_members(root, out, err, err_size)
                                  : error_text(err, err_size, "body: expected a JSON object");
    json_decref(root);
    return rc;
}

/* ---- the window of finished trajectories ------------------------------------------------- */

/* One finished trajectory as the planner reads it. */
struct seen {
    struct trace_lengths len;
    bool filtered; /* its finish said dynamic sampling dropped it */
};

/* One solve, handed to the worker and back: all the worker touches but p->stop and p->done. */
struct job {
    struct gw_planning *p;
    const struct libra_config *cfg; /* the experiment's, and its presets; read-only */
    const struct spec_hardware *hw;
    const struct spec_model *model;
    struct plan_lengths lengths;
    char source[256];
    double deadline_s;
    int rc; /* plan_solve's */
    struct libra_error err;
    struct plan_result plan, het; /* het: plan.homogeneous_rollout's free-fleet optimum */
    json_t *doc;
};

struct gw_planning {
    struct gw *g;
    struct seen *seen; /* a ring of cap, the oldest at (next + cap - n) % cap */
    size_t cap, n, next;
    uint64_t finished; /* trajectories added, in all */

    struct job *job; /* the solve running; NULL when none */
    thrd_t thread;
    atomic_bool stop;               /* asks a running solve to stop (at shutdown) */
    struct event *done;             /* activated by the worker when the job is done */
    VEC(struct net_call *) waiting; /* GET calls answered when the job is done */

    bool have_plan; /* a plan to re-bucket from: the last computed, else --plan's */
    struct plan_fleet plan;
    const char *plan_origin; /* "GET /libra/v1/plan" or "--plan" */
};

void gw_window_add(struct gw *g, const struct trace_turn *turns, size_t n_turns, bool filtered)
{
    struct gw_planning *p = g->planning;
    struct trace_traj t = {.turns = (struct trace_turn *)turns, .n_turns = n_turns};
    struct seen *s = &p->seen[p->next];
    trace_traj_lengths(&t, &s->len);
    s->filtered = filtered;
    p->next = (p->next + 1) % p->cap;
    p->n += p->n < p->cap;
    p->finished++;
}

/* The window's whole batches, oldest first: the trace sample `libra plan --trace` draws from a
 * capture of at most a window. */
static void window_lengths(const struct gw_planning *p, size_t batch, struct plan_lengths *out)
{
    size_t use = p->n / batch * batch, oldest = (p->next + p->cap - p->n) % p->cap;
    for (size_t i = 0; i < use; i++) {
        const struct seen *s = &p->seen[(oldest + i) % p->cap];
        plan_lengths_add(out, s->len.prompt_tokens, s->len.generated_tokens, s->len.tool_tokens,
                         s->len.turns, s->len.tool_s, s->filtered);
    }
}

/* ---- the solve (worker thread) ------------------------------------------------------------ */

static bool should_stop(void *arg)
{
    const struct job *j = arg;
    return atomic_load(&j->p->stop) || gw_now() >= j->deadline_s;
}

static int solve(void *arg)
{
    struct job *j = arg;
    const struct libra_config *cfg = j->cfg;
    j->rc =
        plan_solve_lengths(&j->lengths, cfg, j->hw, j->model, should_stop, j, &j->plan, &j->err);
    if (j->rc == 0 && j->plan.feasible && cfg->plan.homogeneous_rollout) {
        struct libra_config free_cfg = *cfg;
        free_cfg.plan.homogeneous_rollout = false;
        j->rc = plan_solve_lengths(&j->lengths, &free_cfg, j->hw, j->model, should_stop, j, &j->het,
                                   &j->err);
    }
    if (j->rc == 0) {
        j->doc = plan_document(cfg, &j->plan, &j->plan, &j->het, j->source);
        if (j->plan.feasible)
            json_object_set_new(j->doc, "verification",
                                json_pack("{s:s}", "none",
                                          "libra serve plans analytically; libra plan --verify "
                                          "simulates the candidates"));
    }
    event_active(j->p->done, EV_READ, 0);
    return 0;
}

static void job_free(struct job *j)
{
    plan_lengths_free(&j->lengths);
    plan_result_free(&j->plan);
    plan_result_free(&j->het);
    json_decref(j->doc);
    free(j);
}

/* ---- GET /libra/v1/plan --------------------------------------------------------------------- */

/* Rollout's own engines by log2(TP), what a plan's instances are: registered, neither dead nor
 * draining, and not a pool replica's (training's GPUs, lent). */
static void engine_counts(const struct gw *g, int counts[PLAN_NTP])
{
    memset(counts, 0, PLAN_NTP * sizeof *counts);
    for (size_t i = 0; i < g->engines.n; i++) {
        const struct gw_engine *e = g->engines.v[i];
        if (!e->dead && !e->draining && !gw_pool_serves(g, e->url))
            counts[spec_tp_index(e->tp)]++;
    }
}

static json_t *fleet_diff(const struct gw *g, const struct plan_fleet *f)
{
    int counts[PLAN_NTP];
    engine_counts(g, counts);
    return plan_fleet_diff(f, counts, &g->layout);
}

/* The answer to every waiting call: the document with its fleet diff, or why there is none. */
static void answer_waiting(struct gw_planning *p, struct job *j)
{
    json_t *doc = NULL;
    if (j->rc == 0 && j->plan.feasible) {
        plan_fleet_of(&j->plan, &p->plan);
        p->have_plan = true;
        p->plan_origin = "GET /libra/v1/plan";
        json_object_set_new(j->doc, "fleet", fleet_diff(p->g, &p->plan));
    } else if (j->rc == 0) {
        json_object_set_new(j->doc, "fleet", json_null());
    }
    if (j->rc == 0)
        doc = j->doc;
    for (size_t i = 0; i < p->waiting.n; i++) {
        if (doc)
            net_reply_json(p->waiting.v[i], 200, json_incref(doc));
        else
            net_reply_error(p->waiting.v[i], 409, "plan_error",
                            "the planner refused the window: %s", j->err.msg);
    }
    p->waiting.n = 0;
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    struct gw_planning *p = arg;
    (void)fd;
    (void)what;
    thrd_join(p->thread, NULL);
    struct job *j = p->job;
    p->job = NULL;
    answer_waiting(p, j);
    job_free(j);
}

static void on_cancel(void *arg, struct net_call *c, enum net_cancel why)
{
    struct gw_planning *p = arg;
    (void)why;
    for (size_t i = 0; i < p->waiting.n; i++)
        if (p->waiting.v[i] == c) {
            p->waiting.v[i] = p->waiting.v[--p->waiting.n];
            return;
        }
}

/* Starts a solve of the window; false (c answered) when it cannot start. */
static bool start_job(struct gw_planning *p, struct net_call *c)
{
    const struct gw *g = p->g;
    size_t batch = (size_t)g->cfg->rl.batch_trajectories;
    struct job *j = xcalloc(1, sizeof *j);
    *j = (struct job){.p = p, .cfg = g->cfg, .hw = g->opt.hw, .model = g->opt.model};
    j->deadline_s = gw_now() + g->cfg->plan.time_limit_s;
    window_lengths(p, batch, &j->lengths);
    snprintf(j->source, sizeof j->source,
             "libra serve: %zu finished trajectories (whole batches of the last %zu, of %llu "
             "finished)",
             j->lengths.prompt.n, p->n, (unsigned long long)p->finished);
    p->job = j;
    if (thrd_create(&p->thread, solve, j) != thrd_success) {
        p->job = NULL;
        job_free(j);
        net_reply_error(c, 503, "server_error", "cannot start the planner's thread");
        return false;
    }
    return true;
}

void gw_plan_call(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    struct gw_planning *p = g->planning;
    size_t batch = (size_t)g->cfg->rl.batch_trajectories;
    if (!p->job && p->n < batch) {
        net_reply_error(c, 409, "insufficient_traffic",
                        "%zu trajectories have finished; a plan needs one batch "
                        "(rl.batch_trajectories = %zu): ask again after more finish",
                        p->n, batch);
        return;
    }
    if (!p->job && !start_job(p, c))
        return;
    vec_push(&p->waiting, c);
    net_call_defer(c, on_cancel, p);
}

/* ---- POST /libra/v1/buckets ----------------------------------------------------------------- */

static void without_counts(struct spec_bucket_layout *l)
{
    for (int b = 0; b < l->n; b++)
        memset(l->bucket[b].instances, 0, sizeof l->bucket[b].instances);
}

bool gw_plan_layout(const struct gw *g, struct spec_bucket_layout *out)
{
    if (!g->opt.plan)
        return false;
    *out = g->opt.plan->layout;
    without_counts(out);
    return true;
}

static json_t *engines_json(const struct gw *g)
{
    json_t *a = json_array();
    for (size_t i = 0; i < g->engines.n; i++) {
        const struct gw_engine *e = g->engines.v[i];
        json_array_append_new(a, json_pack("{s:I, s:s, s:i, s:i}", "id", (json_int_t)e->id, "url",
                                           e->url, "tp", e->tp, "bucket", e->bucket));
    }
    return a;
}

/* Moves the gateway onto layout l, whose buckets for the engines are bucket[]. */
static void rebucket(struct gw *g, const struct spec_bucket_layout *l, const int *bucket)
{
    struct libra_error err = {0};
    if (sched_router_set_layout(g->router, l, &err) != 0 ||
        sched_router_set_layout(g->sticky, l, &err) != 0) {
        fprintf(stderr, "libra: serve: internal: a valid layout was refused: %s\n", err.msg);
        abort();
    }
    g->layout = *l;
    for (size_t i = 0; i < g->engines.n; i++)
        g->engines.v[i]->bucket = bucket[i];
}

/* The layout a parsed body asks for; false (c answered) when there is none. */
static bool wanted_layout(struct gw *g, struct net_call *c, const struct gw_buckets_body *b,
                          struct spec_bucket_layout *out, const char **from)
{
    const struct gw_planning *p = g->planning;
    *out = b->layout;
    *from = "request";
    if (!b->from_plan)
        return true;
    if (!p->have_plan) {
        net_reply_error(c, 409, "no_plan",
                        "from_plan: no plan yet: GET /libra/v1/plan once enough trajectories "
                        "have finished, or start with --plan FILE");
        return false;
    }
    *out = p->plan.layout;
    without_counts(out);
    *from = p->plan_origin;
    return true;
}

void gw_buckets_call(void *ctx, struct net_call *c)
{
    struct gw *g = ctx;
    if (!gw_admin(g, c))
        return;
    size_t len;
    const char *body = net_call_body(c, &len);
    struct gw_buckets_body b;
    char err[512];
    struct spec_bucket_layout l;
    const char *from;
    if (gw_buckets_parse(body, len, &b, err, sizeof err) != 0) {
        g->errors_bad_request++;
        net_reply_error(c, 400, "invalid_request_error", "%s", err);
        return;
    }
    if (!wanted_layout(g, c, &b, &l, &from))
        return;
    int bucket[GW_ENGINES_MAX];
    if (gw_engine_buckets(g, &l, bucket, err, sizeof err) != 0) {
        net_reply_error(c, 400, "invalid_request_error", "%s: %s; nothing changed",
                        b.from_plan ? "from_plan" : "buckets", err);
        return;
    }
    if (gw_durable_refused(g, c))
        return;
    char was[SPEC_BUCKET_TEXT_MAX], now[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&g->layout, was, sizeof was);
    spec_bucket_format(&l, now, sizeof now);
    rebucket(g, &l, bucket);
    gw_persist_engines(g); /* their buckets, and the layout with the next commit's meta */
    fprintf(stderr, "libra: serve: buckets %s (were %s; layout from %s)\n", now, was, from);
    gw_reply_durable(g, c, 200,
                     json_pack("{s:s, s:s, s:s, s:o}", "buckets", now, "previous", was, "from",
                               from, "engines", engines_json(g)));
}

/* ---- --plan at start-up --------------------------------------------------------------------- */

void gw_plan_check_fleet(struct gw *g)
{
    if (!g->opt.plan)
        return;
    int counts[PLAN_NTP];
    engine_counts(g, counts);
    if (plan_fleet_matches(g->opt.plan, counts))
        return;
    json_t *diff = plan_fleet_diff(g->opt.plan, counts, &g->layout);
    const json_t *d;
    size_t i;
    fprintf(stderr, "libra: serve: warning: the engines are not --plan's instances:");
    json_array_foreach(json_object_get(diff, "differences"), i,
                       d) if (strncmp(json_string_value(d), "TP", 2) == 0)
        fprintf(stderr, " %s;", json_string_value(d));
    fprintf(stderr, " routing over its buckets all the same\n");
    json_decref(diff);
}

/* ---- life ----------------------------------------------------------------------------------- */

struct gw_planning *gw_planning_new(struct gw *g)
{
    struct gw_planning *p = xcalloc(1, sizeof *p);
    p->g = g;
    p->cap = plan_sample_size((size_t)g->cfg->rl.batch_trajectories);
    p->seen = xcalloc(p->cap, sizeof *p->seen);
    p->done = event_new(g->base, -1, 0, on_done, p);
    atomic_init(&p->stop, false);
    if (g->opt.plan) {
        p->plan = *g->opt.plan;
        p->have_plan = true;
        p->plan_origin = "--plan";
    }
    return p;
}

void gw_planning_free(struct gw_planning *p)
{
    if (!p)
        return;
    if (p->job) { /* its calls were cancelled with the server: stop it and drop its answer */
        atomic_store(&p->stop, true);
        thrd_join(p->thread, NULL);
        job_free(p->job);
    }
    event_free(p->done);
    vec_free(&p->waiting);
    free(p->seen);
    free(p);
}
