/*
 * The planner's entry points (plan.h): input checks, the solve, the result's JSON form.
 */
#include "plan/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/search.h"
#include "util/alloc.h"
#include "util/error.h"

void plan_settings_default(struct plan_settings *s, const struct spec_hardware *hw)
{
    memset(s, 0, sizeof *s);
    cost_rollout_params_default(&s->rollout, hw);
    cost_train_params_for(&s->train, hw);
    cost_lifecycle_params_default(&s->lifecycle);
    s->max_seqs = 256;        /* vLLM's max_num_seqs default */
    s->chunk_tokens = 8192.0; /* vLLM's max_num_batched_tokens with chunked prefill */
    s->minibatches = 1;
    s->old_logprob = true; /* async GRPO recomputes the behaviour policy's log-probs */
    s->reference = false;
}

void plan_settings_from_config(struct plan_settings *s, const struct spec_hardware *hw,
                               const struct libra_config *cfg)
{
    plan_settings_default(s, hw);
    s->max_seqs = cfg->sim.max_seqs;
    s->chunk_tokens = cfg->sim.max_batched_tokens;
    s->minibatches = cfg->rl.minibatches;
    s->old_logprob = cfg->rl.old_logprob;
    s->reference = cfg->rl.reference;
}

const char *plan_why_text(enum plan_why why)
{
    switch (why) {
    case PLAN_WHY_NONE:
        return "no constraint";
    case PLAN_WHY_SPLIT:
        return "plan.min_train_gpus, plan.min_rollout_gpus and plan.granularity_gpus leave no "
               "split of cluster.gpus (a split needs the two minima side by side; colocated, "
               "where every GPU trains and rolls out, needs cluster.gpus to meet each)";
    case PLAN_WHY_TP:
        return "no training TP divides the model's heads and a node (or PP exceeds its layers)";
    case PLAN_WHY_DP:
        return "data parallelism exceeds the batch: every DP rank needs a trajectory of each "
               "of rl.minibatches mini-batches of rl.batch_trajectories (fewer mini-batches, a "
               "larger batch or fewer training GPUs)";
    case PLAN_WHY_GROUPS:
        return "plan.group_integrity: the batch does not split into whole GRPO groups per DP "
               "rank";
    case PLAN_WHY_EHP:
        return "ehp.enabled: a training replica (TP·PP·CP) must fit in one node and hold whole "
               "expert groups (EP dividing TP·CP)";
    case PLAN_WHY_BUDGET:
        return "the longest sequence exceeds every micro-batch token budget (8192..32768 per "
               "GPU, times CP)";
    case PLAN_WHY_MEMORY:
        return "training memory: no layout fits the GPUs";
    case PLAN_WHY_BUCKETS:
        return "sched.buckets: no fleet of the TP sizes its buckets serve meets the other "
               "constraints";
    case PLAN_WHY_KV:
        return "KV capacity: the longest request fits no rollout instance";
    case PLAN_WHY_PACKING:
        return "the rollout instances cannot be packed into the rollout nodes";
    case PLAN_WHY_TP_SIZES:
        return "plan.min_tp_sizes: not enough distinct usable rollout TP sizes";
    case PLAN_WHY_HOMOGENEOUS:
        return "plan.homogeneous_rollout: no single TP size serves every request";
    case PLAN_WHY_PATTERN:
        return "plan.tp_pattern: the rollout GPUs are not whole nodes of the pattern, or the "
               "pattern cannot serve every request";
    case PLAN_WHY_BUDGET_STOP:
        return "plan.time_limit_s ran out before any plan was found";
    }
    return "unknown constraint";
}

/* ---- input checks ---------------------------------------------------------------------------- */

static int check_sample(const struct plan_sample *s, const double *tool_s, const bool *filtered,
                        int batch, struct libra_error *err)
{
    if (s->n < (size_t)batch)
        return error_set(err, NULL, 0, 0,
                         "the length sample has %zu trajectories, fewer than one batch (%d)", s->n,
                         batch);
    if (plan_kept_share(s, filtered) == 0.0)
        return error_set(err, NULL, 0, 0,
                         "dynamic sampling drops every group of the length sample (%zu "
                         "trajectories): nothing would train",
                         s->n);
    for (size_t i = 0; i < s->n; i++) {
        int64_t p = s->prompt_tokens[i], g = s->generated_tokens[i];
        int64_t u = s->tool_tokens ? s->tool_tokens[i] : 0, turns = s->turns ? s->turns[i] : 1;
        if (p < 1 || g < 1 || u < 0 || turns < 1)
            return error_set(err, NULL, 0, 0,
                             "trajectory %zu of the length sample has impossible lengths (prompt "
                             "%lld, generated %lld, tool %lld, turns %lld)",
                             i, (long long)p, (long long)g, (long long)u, (long long)turns);
        if (tool_s && !(tool_s[i] >= 0.0 && tool_s[i] < INFINITY))
            return error_set(err, NULL, 0, 0,
                             "trajectory %zu of the length sample has an impossible tool time "
                             "(%g s)",
                             i, tool_s[i]);
    }
    return 0;
}

/* The TP classes (bit sets of sizes) a pinned sched.buckets allows: those of the sizes its
 * buckets serve; every class when it is not set. */
static int bucket_sizes(const struct libra_config *cfg, unsigned *mask, struct libra_error *err)
{
    *mask = ~0u;
    if (!cfg->sched.buckets[0])
        return 0;
    struct spec_bucket_layout l;
    if (spec_bucket_parse(&l, cfg->sched.buckets, "sched.buckets", err) != 0)
        return LIBRA_EINVAL;
    unsigned sizes = 0;
    for (int b = 0; b < l.n; b++)
        for (int i = 0; i < l.bucket[b].n_tp; i++)
            sizes |= 1u << __builtin_ctz((unsigned)l.bucket[b].tp[i]);
    *mask = 0;
    for (unsigned cls = 1; cls < 1u << PLAN_NTP; cls++)
        if ((cls & ~sizes) == 0)
            *mask |= 1u << cls;
    return 0;
}

static int solver_init(struct plan_solver *s, const struct plan_problem *p, struct libra_error *err)
{
    const struct libra_config *cfg = p->cfg;
    memset(s, 0, sizeof *s);
    s->p = p;
    s->cfg = cfg;
    s->N = cfg->cluster.gpus;
    s->G = cfg->cluster.gpus_per_node;
    s->B = cfg->rl.batch_trajectories;
    s->colocated = cfg->plan.mode == SPEC_PLAN_COLOCATED;
    if (s->G < 1)
        return error_set(err, NULL, 0, 0, "cluster.gpus_per_node must be at least 1");
    int rc = check_sample(&p->sample, p->tool_s, p->filtered, s->B, err);
    if (rc == 0 && !(p->pool_s >= 0.0 && p->pool_s < INFINITY))
        rc = error_set(err, NULL, 0, 0, "the length sample's tool pool load is impossible (%g s)",
                       p->pool_s);
    if (rc == 0 && !s->colocated)
        rc = spec_rl_async_check(&cfg->rl, "async", err);
    if (rc)
        return rc;
    if (cost_shape_init(&s->sh, p->model) != 0)
        return error_set(err, NULL, 0, 0, "model '%s': the cost model rejects its shape",
                         p->model->name);
    rc = bucket_sizes(cfg, &s->bucket_classes, err);
    if (rc)
        return rc;
    rc = spec_tp_pattern_parse(cfg->plan.tp_pattern, NULL, s->pattern, &s->pattern_gpus, err);
    if (rc) {
        error_prefix(err, "plan.tp_pattern");
        return rc;
    }
    if (s->pattern_gpus && s->pattern_gpus != s->G)
        return error_set(err, NULL, 0, 0,
                         "plan.tp_pattern: its instances take %d GPUs, a node has %d",
                         s->pattern_gpus, s->G);
    struct plan_roll_job job;
    plan_roll_job_init(&job, p, &s->sh);
    plan_roll_init(&s->roll, &p->sample, p->tool_s, p->filtered, &s->sh, p->hw, p->settings, &job);
    plan_train_init(&s->train, &p->sample, p->filtered, &s->sh, p->hw, p->settings, cfg);
    return 0;
}

static void splits_free(struct plan_solver *s)
{
    for (size_t i = 0; s->splits && i < s->n_splits; i++) {
        struct plan_split *sp = &s->splits[i];
        free(sp->train_order);
        free(sp->layouts);
        free(sp->lwhy);
        free(sp->lbound);
        free(sp->exact);
    }
    free(s->splits);
    s->splits = NULL;
}

static void solver_free(struct plan_solver *s)
{
    plan_roll_free(&s->roll);
    plan_train_free(&s->train);
    splits_free(s);
    free(s->memo);
}

/* The constraint to blame when nothing was found: the budget, the split rules, the training
 * side when no split has a feasible layout, else the rollout side. */
static enum plan_why blame(const struct plan_solver *s)
{
    if (s->stats.stopped)
        return PLAN_WHY_BUDGET_STOP;
    if (s->n_splits == 0)
        return PLAN_WHY_SPLIT;
    for (size_t i = 0; i < s->n_splits; i++)
        if (!isinf(s->splits[i].lb_train))
            return s->why_roll;
    return s->why_train;
}

/* out's fields that come from p rather than from the search. */
static void result_begin(const struct plan_problem *p, struct plan_result *out)
{
    memset(out, 0, sizeof *out);
    out->mode = p->cfg->plan.mode;
    out->colocated = out->mode == SPEC_PLAN_COLOCATED;
    out->gpus = p->cfg->cluster.gpus;
    out->gpus_per_node = p->cfg->cluster.gpus_per_node;
    out->sample_n = p->sample.n;
    out->rollout_mem_util = p->settings->rollout.mem_util;
    for (size_t i = 0; p->tool_s && i < p->sample.n; i++)
        out->tool_s_mean += (p->tool_s[i] - out->tool_s_mean) / (double)(i + 1);
}

/* Searches s's problem into out (result_begin'd). */
static void search_into(struct plan_solver *s, struct plan_result *out)
{
    out->batches = (int)s->roll.batches;
    out->kept_share = s->roll.job.kept_share;
    out->gen_rounds = s->roll.rounds;
    const struct plan_split *sp = NULL;
    size_t layout = 0;
    int counts[PLAN_NTP] = {0};
    if (plan_search(s, &sp, &layout, counts))
        plan_build_result(s, sp, layout, counts, out);
    else
        out->why = blame(s);
    out->stats = s->stats;
}

int plan_solve(const struct plan_problem *p, struct plan_result *out, struct libra_error *err)
{
    result_begin(p, out);
    struct plan_solver s;
    int rc = solver_init(&s, p, err);
    if (rc == 0)
        search_into(&s, out);
    solver_free(&s);
    return rc;
}

int plan_solve_against(const struct plan_problem *p, const int counts[PLAN_NTP],
                       struct plan_result *out, struct plan_result *given, struct libra_error *err)
{
    result_begin(p, out);
    result_begin(p, given);
    struct plan_solver s;
    int rc = solver_init(&s, p, err);
    if (rc == 0) {
        search_into(&s, out);
        /* the same length model and memo; the splits and statistics afresh */
        struct plan_pin pin = *p->pin;
        pin.counts = counts;
        struct plan_problem q = *p;
        q.pin = &pin;
        s.p = &q;
        splits_free(&s);
        s.stats = (struct plan_stats){0};
        s.why_train = s.why_roll = PLAN_WHY_NONE;
        search_into(&s, given);
    }
    solver_free(&s);
    return rc;
}

void plan_result_free(struct plan_result *r)
{
    free(r->gpu);
    r->gpu = NULL;
}

/* ---- JSON ----------------------------------------------------------------------------------- */

static json_t *stats_json(const struct plan_stats *st)
{
    const char *by = !st->stopped           ? NULL
                     : st->stopped_by_count ? "plan.max_scored"
                                            : "plan.time_limit_s";
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:s?}", "space", st->space,
                     "train_space", st->train_space, "rollout_space", st->rollout_space,
                     "train_scored", st->train_scored, "rollout_scored", st->rollout_scored,
                     "train_pruned", st->train_pruned, "rollout_pruned", st->rollout_pruned,
                     "splits", st->splits, "gap", st->gap, "stopped", st->stopped, "stopped_by",
                     by);
}

static json_t *train_json(const struct plan_result *r)
{
    const struct cost_train_step *s = &r->train_step;
    const struct cost_train_memory *m = &r->train_mem;
    json_t *step = json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "step_s", r->train_s,
        "compute_s", s->compute_s, "pp_bubble_s", s->pp_bubble_s, "pp_p2p_s", s->pp_p2p_s,
        "tp_comm_s", s->tp_comm_s, "cp_comm_s", s->cp_comm_s, "dp_comm_s", s->dp_comm_s,
        "zero3_gather_s", s->zero3_gather_s, "optimizer_s", s->optimizer_s, "microbatch_s",
        s->microbatch_s, "imbalance", s->imbalance, "mfu_effective", s->mfu_effective);
    json_t *mem = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights_bytes",
                            m->weights_bytes, "grads_bytes", m->grads_bytes, "optimizer_bytes",
                            m->optimizer_bytes, "activations_bytes", m->activations_bytes,
                            "logits_bytes", m->logits_bytes, "workspace_bytes", m->workspace_bytes,
                            "total_bytes", m->total_bytes, "capacity_bytes", m->capacity_bytes);
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:s, s:o, s:o}", "gpus", r->n_train,
                          "tp", r->train.tp, "pp", r->train.pp, "cp", r->train.cp, "dp",
                          r->train.dp, "micro_batch_tokens_per_gpu", r->train.budget_tokens,
                          "recompute", r->train.recompute, "sharding",
                          plan_train_sharding(&r->train), "step", step, "memory_per_gpu", mem);
    if (r->train.shard_dp) /* HSDP: the DP ranks of one copy of the state */
        json_object_set_new(o, "shard_dp", json_integer(r->train.shard_dp));
    if (r->train.ep > 1) { /* expert parallelism and its all-to-alls */
        json_object_set_new(o, "ep", json_integer(r->train.ep));
        json_object_set_new(step, "ep_comm_s", json_real(s->ep_comm_s));
    }
    return o;
}

static json_t *rollout_json(const struct plan_result *r)
{
    json_t *counts = json_object(), *bands = json_array();
    for (int t = 0; t < PLAN_NTP; t++) {
        char key[8];
        snprintf(key, sizeof key, "tp%d", 1 << t);
        json_object_set_new(counts, key, json_integer(r->counts[t]));
    }
    for (int i = 0; i < r->n_bands; i++) {
        const struct plan_band *b = &r->band[i];
        json_array_append_new(bands,
                              json_pack("{s:i, s:i, s:I, s:I, s:I, s:f, s:f}", "tp", b->tp,
                                        "instances", b->instances, "first_rank",
                                        (json_int_t)b->first, "last_rank", (json_int_t)b->last,
                                        "max_generated_tokens", (json_int_t)b->max_generated,
                                        "work_s", b->work_s, "load_s", b->load_s));
    }
    /* the layout with its fleet, and without it: what sched.buckets takes to route over the
     * fleet (a router, the gateway), where instance counts are refused */
    char text[SPEC_BUCKET_TEXT_MAX], routing[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&r->layout, text, sizeof text);
    struct spec_bucket_layout bounds = r->layout;
    for (int b = 0; b < bounds.n; b++)
        memset(bounds.bucket[b].instances, 0, sizeof bounds.bucket[b].instances);
    spec_bucket_format(&bounds, routing, sizeof routing);
    json_t *o = json_pack(
        "{s:i, s:o, s:i, s:f, s:f, s:f, s:o, s:o, s:s, s:s}", "gpus", r->n_rollout, "instances",
        counts, "instance_count", r->instances, "rollout_s", r->rollout_s, "banded_batch_s",
        r->banded_batch_s, "greedy_batch_s", r->greedy_batch_s, "bands", bands, "buckets",
        spec_bucket_to_json(&r->layout), "buckets_text", text, "routing_buckets", routing);
    if (!r->colocated) {
        json_object_set_new(o, "rate_traj_per_s", json_real(r->rate_traj_per_s));
        json_object_set_new(o, "f_stale", json_real(r->f_stale));
    }
    return o;
}

static const char *role_name(enum plan_role role)
{
    return role == PLAN_ROLE_TRAIN ? "train" : role == PLAN_ROLE_ROLLOUT ? "rollout" : "idle";
}

static json_t *placement_json(const struct plan_result *r)
{
    json_t *nodes = json_array(), *gpus = NULL;
    for (int g = 0; g < r->gpus; g++) {
        const struct plan_gpu *u = &r->gpu[g];
        if (u->local == 0) {
            gpus = json_array();
            json_array_append_new(nodes, json_pack("{s:i, s:o}", "node", u->node, "gpus", gpus));
        }
        json_t *o = json_pack("{s:i, s:s}", "gpu", u->local, "role", role_name(u->role));
        if (u->role == PLAN_ROLE_TRAIN)
            json_object_update_new(o, json_pack("{s:i, s:i, s:i, s:i}", "tp_rank", u->tp_rank,
                                                "cp_rank", u->cp_rank, "dp_rank", u->dp_rank,
                                                "pp_rank", u->pp_rank));
        if (u->instance >= 0)
            json_object_update_new(
                o, json_pack("{s:i, s:i}", "instance", u->instance, "instance_tp", u->instance_tp));
        json_array_append_new(gpus, o);
    }
    return nodes;
}

const char *plan_async_bound(const struct plan_result *r)
{
    const struct plan_async_parts *a = &r->async;
    if (r->train_bound)
        return "training";
    if (r->rollout_s == a->span_s)
        return "span";
    if (r->rollout_s == a->fleet_s)
        return "fleet";
    return r->rollout_s == a->pool_s ? "tool pool" : "fixed point";
}

json_t *plan_result_to_json(const struct plan_result *r)
{
    json_t *o =
        json_pack("{s:b, s:s, s:i, s:i, s:{s:I, s:i, s:f, s:f, s:f}, s:o}", "feasible", r->feasible,
                  "mode", r->colocated ? "colocated" : "async", "gpus", r->gpus, "gpus_per_node",
                  r->gpus_per_node, "sample", "trajectories", (json_int_t)r->sample_n, "batches",
                  r->batches, "tool_s_mean", r->tool_s_mean, "kept_share", r->kept_share,
                  "generation_rounds", r->gen_rounds, "search", stats_json(&r->stats));
    if (!r->feasible) {
        json_object_set_new(o, "why", json_string(plan_why_text(r->why)));
        return o;
    }
    json_t *objective = json_pack("{s:f, s:f, s:f}", "step_s", r->step_s, "train_s", r->train_s,
                                  "rollout_s", r->rollout_s);
    if (r->colocated) {
        json_object_set_new(objective, "switch_s", json_real(r->switch_s));
    } else {
        const struct plan_async_parts *a = &r->async;
        json_object_set_new(objective, "bound_by", json_string(plan_async_bound(r)));
        json_object_set_new(
            objective, "parts",
            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i}",
                      "update_train_s", a->update_train_s, "fixed_point_s", a->fixed_point_s,
                      "work_s", a->work_s, "little_s", a->little_s, "pool_s", a->pool_s, "fleet_s",
                      a->fleet_s, "tail_s", a->tail_s, "span_s", a->span_s, "update_s", a->update_s,
                      "drain_s", a->drain_s, "reprefill_s", a->reprefill_s, "interval", a->interval,
                      "window", a->window));
    }
    json_object_set_new(o, "objective", objective);
    json_object_set_new(o, "train", train_json(r));
    json_object_set_new(o, "rollout", rollout_json(r));
    json_object_set_new(o, "placement", placement_json(r));
    return o;
}

json_t *plan_document(const struct libra_config *cfg, const struct plan_result *r,
                      const struct plan_result *searched, const struct plan_result *het,
                      const char *source)
{
    json_t *doc = spec_config_envelope(PLAN_SCHEMA, cfg);
    json_object_update_new(doc, plan_result_to_json(r));
    json_object_set_new(json_object_get(doc, "sample"), "source", json_string(source));
    if (searched != r) { /* the search's own figures, not the chosen candidate's re-solve */
        json_t *a = plan_result_to_json(searched);
        json_object_set(doc, "search", json_object_get(a, "search"));
        json_decref(a);
    }
    if (het && het->feasible && r->feasible)
        json_object_set_new(doc, "heterogeneous",
                            json_pack("{s:f, s:f}", "step_s", het->step_s, "gain",
                                      (searched->step_s - het->step_s) / searched->step_s));
    return doc;
}
