/*
 * The experiment's results as JSON (one document, or JSON Lines) and as a table for people.
 *
 * Everything here formats memory: the CLI writes it. The JSON carries every figure the table
 * shows and more (per-step records, tuning sweeps, routing metrics, waste by cause); the
 * table is the compact view the README shows for `libra sim`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ehp/lend.h"
#include "sim/internal.h"
#include "util/alloc.h"
#include "util/json.h"

/* ---- JSON ----------------------------------------------------------------------------- */

/* Instances by TP as "tp1x4,tp8x2". */
static void counts_text(const int c[PLAN_NTP], char *out, size_t size)
{
    size_t n = 0;
    out[0] = '\0';
    for (int t = 0; t < PLAN_NTP && n < size; t++)
        if (c[t])
            n += (size_t)snprintf(out + n, size - n, "%stp%dx%d", n ? "," : "", 1 << t, c[t]);
}

void sim_layout_counts(const struct sim_layout *l, bool core_only, int counts[PLAN_NTP])
{
    memset(counts, 0, PLAN_NTP * sizeof *counts);
    for (int i = 0; i < l->n_inst; i++)
        if (!core_only || !l->inst[i].hybrid)
            counts[spec_tp_index(l->inst[i].tp)]++;
}

/* "tp1x4,tp2x2,tp4x2": the fleet by TP size. */
void sim_fleet_text(const struct sim_layout *l, char *out, size_t size)
{
    int counts[PLAN_NTP];
    sim_layout_counts(l, false, counts);
    counts_text(counts, out, size);
}

static json_t *layout_json(const struct sim_layout *l, int gpus)
{
    char fleet[64], buckets[SPEC_BUCKET_TEXT_MAX];
    sim_fleet_text(l, fleet, sizeof fleet);
    spec_bucket_format(&l->buckets, buckets, sizeof buckets);
    int roll = 0;
    for (int i = 0; i < l->n_inst; i++)
        roll += l->inst[i].tp;
    bool colocated = sim_mode_desc(l->mode)->colocated;
    json_t *o =
        json_pack("{s:s,s:i,s:i,s:s,s:s,s:s,s:i}", "origin", l->origin, "train_gpus", l->n_train,
                  "rollout_gpus", colocated ? gpus : roll, "instances", fleet, "buckets", buckets,
                  "router", sched_policy_name(l->policy), "instance_count", l->n_inst);
    /* time-shared GPUs (every GPU trains, then rolls out), which train_gpus and rollout_gpus
     * alone cannot tell from a disaggregated split of equal halves */
    json_object_set_new(o, "colocated", json_boolean(colocated));
    if (l->pool)
        json_object_set_new(o, "pool",
                            json_pack("{s:i,s:i,s:i,s:s}", "core_replicas",
                                      l->train.dp / ehp_replica_ranks(&l->train), "hybrid_replicas",
                                      l->n_hybrid, "replica_gpus", l->replica_gpus, "note",
                                      l->pool_note));
    if (l->n_train > 0) {
        json_t *t = json_pack("{s:i,s:i,s:i,s:i,s:i,s:b,s:b}", "tp", l->train.tp, "pp", l->train.pp,
                              "cp", l->train.cp, "dp", l->train.dp, "micro_batch_tokens_per_gpu",
                              l->train.budget_tokens, "recompute", l->train.recompute, "fsdp",
                              l->train.fsdp);
        if (l->train.shard_dp) /* HSDP: the DP ranks of one copy of the state */
            json_object_set_new(t, "shard_dp", json_integer(l->train.shard_dp));
        if (l->train.ep > 1) /* experts split over EP ranks */
            json_object_set_new(t, "ep", json_integer(l->train.ep));
        json_object_set_new(o, "train", t);
    }
    return o;
}

static json_t *waste_object(const int64_t *waste)
{
    json_t *o = json_object();
    for (int w = 0; w < SIM_WASTES; w++)
        json_object_set_new(o, sim_waste_name((enum sim_waste)w),
                            json_integer((json_int_t)waste[w]));
    return o;
}

/* The pool's requests of hybrid replicas and what became of them, in a step or over a run. */
static json_t *decisions_json(const struct sim_pool_step *p)
{
    return json_pack("{s:i,s:i,s:i,s:i,s:i}", "joins", p->joins, "activated", p->activated,
                     "cancelled", p->cancelled, "failed", p->failed, "returned", p->returned);
}

/* The pool's split and decisions in a step. */
static json_t *pool_json(const struct sim_pool_step *p)
{
    json_t *states = json_object();
    for (int k = 0; k < SIM_JOIN_STATES; k++)
        json_object_set_new(states, sim_join_state_name(k), json_integer(p->replicas[k]));
    return json_pack("{s:i,s:i,s:i,s:o,s:o}", "train_gpus", p->train_gpus, "hybrid_gpus",
                     p->hybrid_gpus, "rollout_gpus", p->rollout_gpus, "hybrid_replicas", states,
                     "decisions", decisions_json(p));
}

static json_t *step_json(const struct sim_step *st, bool pool)
{
    json_t *o = json_pack(
        "{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:o,s:o}", "step", (json_int_t)st->step, "end_s",
        ujson_real(st->end_s), "step_s", ujson_real(st->step_s), "train_s", ujson_real(st->train_s),
        "rollout_s", ujson_real(st->rollout_s), "wait_s", ujson_real(st->wait_s), "switch_s",
        ujson_real(st->switch_s), "sync_s", ujson_real(st->sync_s), "trajectories",
        (json_int_t)st->trajectories, "trained_tokens", (json_int_t)st->trained_tokens,
        "tail_share", ujson_real(st->tail_share), "mean_staleness", ujson_real(st->mean_staleness));
    json_object_set_new(o, "train_utilisation", ujson_real(st->train_util));
    json_object_set_new(o, "rollout_utilisation", ujson_real(st->rollout_util));
    json_object_set_new(o, "trained_tokens_per_s",
                        ujson_real(st->step_s > 0 ? (double)st->trained_tokens / st->step_s : 0));
    json_object_set_new(o, "trajectories_per_s",
                        ujson_real(st->step_s > 0 ? (double)st->trajectories / st->step_s : 0));
    json_object_set_new(o, "wasted_tokens", waste_object(st->waste));
    if (pool)
        json_object_set_new(o, "pool", pool_json(&st->pool));
    return o;
}

static json_t *replan_eval_json(const struct sim_replan_eval *ev)
{
    char cur[64], cand[64];
    counts_text(ev->cur, cur, sizeof cur);
    counts_text(ev->cand, cand, sizeof cand);
    json_t *o =
        json_pack("{s:I,s:s,s:s,s:b,s:s,s:s}", "step", (json_int_t)ev->step, "trigger", ev->trigger,
                  "why", ev->why, "accepted", ev->accepted, "fleet", cur, "candidate", cand);
    json_object_set_new(o, "predicted_step_s", ujson_real(ev->cur_step_s));
    json_object_set_new(o, "candidate_step_s", ujson_real(ev->cand_step_s));
    json_object_set_new(o, "correction", ujson_real(ev->correction));
    json_object_set_new(o, "start_ratio", ujson_real(ev->start_ratio));
    json_object_set_new(o, "measured_ratio", ujson_real(ev->measured_ratio));
    json_object_set_new(o, "gain_s", ujson_real(ev->gain_s));
    json_object_set_new(o, "cost_s", ujson_real(ev->cost_s));
    json_object_set_new(o, "started", json_integer(ev->started));
    json_object_set_new(o, "stopped", json_integer(ev->stopped));
    return o;
}

/* Online replanning over the run: its evaluations, in order. */
static json_t *replan_json(const struct sim_result *r)
{
    json_t *evals = json_array();
    size_t accepted = 0;
    for (size_t k = 0; k < r->n_replans; k++) {
        json_array_append_new(evals, replan_eval_json(&r->replans[k]));
        accepted += r->replans[k].accepted;
    }
    return json_pack("{s:I,s:I,s:I,s:o}", "evaluations", (json_int_t)r->n_replans, "accepted",
                     (json_int_t)accepted, "routing_since_step", (json_int_t)r->routing_since_step,
                     "decisions", evals);
}

/* h as {bin_edges, counts}: the bins from the first to the last that holds a value, their
 * edges one more than their counts; empty arrays when h is empty. */
static json_t *hist_json(const struct sim_hist *h)
{
    int first = 0, last = SIM_HIST_BINS - 1;
    while (first < SIM_HIST_BINS && !h->count[first])
        first++;
    while (last >= first && !h->count[last])
        last--;
    json_t *edges = json_array(), *counts = json_array();
    for (int b = first; b <= last; b++) {
        json_array_append_new(edges, ujson_real(sim_hist_edge(h, b)));
        json_array_append_new(counts, json_integer((json_int_t)h->count[b]));
    }
    if (first <= last)
        json_array_append_new(edges, ujson_real(sim_hist_edge(h, last + 1)));
    return json_pack("{s:o,s:o}", "bin_edges", edges, "counts", counts);
}

/* Each tool's pool: its calls, their mean wait for a worker and the pool's busy share of the
 * run (null for a pool of a worker per call). */
static json_t *tool_pools_json(const struct sim_result *r)
{
    json_t *a = json_array();
    for (size_t i = 0; i < r->n_tool_pools; i++) {
        const struct sim_tool_pool *p = &r->tool_pools[i];
        double span = (double)p->workers * r->end_s;
        json_array_append_new(
            a, json_pack("{s:s,s:I,s:I,s:o,s:o}", "tool", p->tool, "workers",
                         (json_int_t)p->workers, "calls", (json_int_t)p->calls, "mean_wait_s",
                         ujson_real(p->calls ? p->wait_s / (double)p->calls : 0.0), "utilisation",
                         span > 0 ? ujson_real(p->busy_s / span) : json_null()));
    }
    return a;
}

static json_t *run_json(const struct sim_result *r, bool pool)
{
    json_t *stale = json_array();
    for (int k = 0; k < r->staleness_n; k++)
        json_array_append_new(stale, json_integer((json_int_t)r->staleness[k]));
    json_t *o = json_pack(
        "{s:i,s:i,s:o,s:o,s:I,s:I,s:o,s:o,s:o,s:I,s:I,s:I,s:o,s:o,s:o}", "steps", r->steps_run,
        "warmup_steps", r->warmup, "simulated_s", ujson_real(r->end_s), "measured_s",
        ujson_real(r->measured_s), "trained_tokens", (json_int_t)r->trained_tokens, "trajectories",
        (json_int_t)r->trajectories, "trained_tokens_per_s", ujson_real(r->tokens_per_s),
        "trajectories_per_s", ujson_real(r->trajectories_per_s), "generated_tokens_per_s",
        ujson_real(r->generated_tokens_per_s), "generated_tokens", (json_int_t)r->generated_tokens,
        "trained_tokens_all", (json_int_t)r->trained_tokens_all, "unconsumed_tokens",
        (json_int_t)r->unconsumed_tokens, "rollout_utilisation", ujson_real(r->rollout_util),
        "train_utilisation", ujson_real(r->train_util), "tail_share", ujson_real(r->tail_share));
    json_object_set_new(o, "trained_tokens_per_s_halves",
                        json_pack("[o,o]", ujson_real(r->half_tokens_per_s[0]),
                                  ujson_real(r->half_tokens_per_s[1])));
    json_object_set_new(o, "mean_step_s", ujson_real(r->mean_step_s));
    json_object_set_new(o, "mean_train_s", ujson_real(r->mean_train_s));
    json_object_set_new(o, "mean_rollout_s", ujson_real(r->mean_rollout_s));
    json_object_set_new(o, "wasted_tokens", waste_object(r->waste));
    json_object_set_new(o, "staleness_histogram", stale);
    json_object_set_new(o, "trajectory_lengths",
                        json_pack("{s:o,s:o}", "generated_tokens", hist_json(&r->tokens_hist),
                                  "duration_s", hist_json(&r->duration_hist)));
    json_t *by_inst = json_array();
    for (int i = 0; i < r->n_instances; i++)
        json_array_append_new(by_inst, json_integer((json_int_t)r->requests_by_instance[i]));
    json_object_set_new(o, "requests_by_instance", by_inst);
    json_object_set_new(o, "tool_pools", tool_pools_json(r));
    if (pool)
        json_object_set_new(o, "pool", json_pack("{s:o}", "decisions", decisions_json(&r->pool)));
    if (r->replanning)
        json_object_set_new(o, "replan", replan_json(r));
    json_object_set_new(
        o, "counts",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "started",
                  (json_int_t)r->started, "finished", (json_int_t)r->finished, "aborted",
                  (json_int_t)r->aborted, "timed_out", (json_int_t)r->timed_out, "resumed",
                  (json_int_t)r->resumed, "failed_turns", (json_int_t)r->failed_turns, "requests",
                  (json_int_t)r->requests, "preemptions", (json_int_t)r->preemptions,
                  "cached_tokens", (json_int_t)r->cached_tokens, "weight_updates",
                  (json_int_t)r->syncs, "cache_flushes", (json_int_t)r->cache_flushes, "moves",
                  (json_int_t)r->moves, "offpolicy_tokens", (json_int_t)r->offpolicy_tokens,
                  "mixed_trajectories", (json_int_t)r->mixed_trajectories));
    return o;
}

json_t *sim_verification_to_json(const struct sim_mode_result *mr)
{
    json_t *c = json_array();
    for (int i = 0; i < mr->n_verified; i++) {
        const struct sim_verified *v = &mr->verified[i];
        json_t *o =
            json_pack("{s:s,s:i,s:i,s:b,s:i,s:s,s:o,s:o,s:b}", "origin", v->origin, "split",
                      v->split, "tp", v->tp, "colocated", v->colocated, "train_gpus", v->n_train,
                      "instances", v->instances, "predicted_step_s", ujson_real(v->pred_step_s),
                      "trained_tokens_per_s", ujson_real(v->tokens_per_s), "chosen", v->chosen);
        if (v->raced)
            json_object_set_new(o, "second_seed_trained_tokens_per_s",
                                ujson_real(v->second_tokens_per_s));
        if (isnan(v->tokens_per_s)) /* why its run failed */
            json_object_set_new(o, "error", json_string(v->error));
        json_array_append_new(c, o);
    }
    return json_pack("{s:i,s:I,s:I,s:o}", "steps", mr->verify_steps, "seed",
                     (json_int_t)mr->verify_seed, "second_seed", (json_int_t)mr->race_seed,
                     "candidates", c);
}

static json_t *planner_json(const struct sim_mode_result *mr)
{
    const struct sim_layout *l = &mr->layout;
    if (!l->planned)
        return json_null();
    json_t *o = json_pack(
        "{s:{s:o,s:o,s:o},s:{s:o,s:o,s:o}}", "predicted", "step_s", ujson_real(l->pred_step_s),
        "train_s", ujson_real(l->pred_train_s), "rollout_s", ujson_real(l->pred_rollout_s),
        "simulated", "step_s", ujson_real(mr->run.mean_step_s), "train_s",
        ujson_real(mr->run.mean_train_s), "rollout_s", ujson_real(mr->run.mean_rollout_s));
    if (mr->n_verified)
        json_object_set_new(o, "verification", sim_verification_to_json(mr));
    return o;
}

static json_t *tuning_json(const struct sim_mode_result *mr)
{
    if (!mr->n_candidates)
        return json_null();
    json_t *c = json_array();
    for (int i = 0; i < mr->n_candidates; i++)
        json_array_append_new(c, json_pack("{s:i,s:i,s:o}", "train_gpus", mr->candidates[i].n_train,
                                           "tp", mr->candidates[i].tp, "trained_tokens_per_s",
                                           ujson_real(mr->candidates[i].tokens_per_s)));
    return json_pack("{s:i,s:o}", "steps", mr->tune_steps, "candidates", c);
}

static const struct sim_mode_result *find(const struct sim_experiment *e, enum sim_mode m)
{
    for (int i = 0; i < e->n; i++)
        if (e->mode[i].mode == m)
            return &e->mode[i];
    return NULL;
}

double sim_libra_ratio(const struct sim_experiment *e, enum sim_mode m, bool trajectories)
{
    const struct sim_mode_result *a = find(e, SIM_LIBRA), *b = find(e, m);
    if (!a || !b)
        return NAN;
    double x = trajectories ? a->run.trajectories_per_s : a->run.tokens_per_s;
    double y = trajectories ? b->run.trajectories_per_s : b->run.tokens_per_s;
    return y > 0 ? x / y : NAN;
}

/* A mode's layout, tuning, run summary, planner and (when recorded) timeline. */
static json_t *mode_json(const struct sim_mode_result *mr, const struct libra_config *cfg)
{
    json_t *m = json_pack("{s:o,s:o,s:o}", "layout", layout_json(&mr->layout, cfg->cluster.gpus),
                          "tuning", tuning_json(mr), "run", run_json(&mr->run, mr->layout.pool));
    json_object_set_new(m, "planner", planner_json(mr));
    json_object_set_new(m, "routing", mr->run.routing ? json_incref(mr->run.routing) : json_null());
    if (mr->run.timeline)
        json_object_set_new(m, "timeline", sim_timeline_to_json(mr->run.timeline, &mr->layout));
    return m;
}

/* The document's envelope and its modes without their steps (--jsonl's header), and the
 * ratios. */
static json_t *experiment_head(const struct sim_experiment *e, const struct libra_config *cfg)
{
    json_t *doc = spec_config_envelope(SIM_SCHEMA, cfg);
    json_t *modes = json_object();
    for (int i = 0; i < e->n; i++)
        json_object_set_new(modes, sim_mode_name(e->mode[i].mode), mode_json(&e->mode[i], cfg));
    json_object_set_new(doc, "modes", modes);
    json_object_set_new(
        doc, "ratios",
        json_pack(
            "{s:o,s:o,s:o,s:o}", "libra_over_colocated_tokens",
            ujson_real(sim_libra_ratio(e, SIM_COLOCATED, false)), "libra_over_async_tokens",
            ujson_real(sim_libra_ratio(e, SIM_ASYNC, false)), "libra_over_colocated_trajectories",
            ujson_real(sim_libra_ratio(e, SIM_COLOCATED, true)), "libra_over_async_trajectories",
            ujson_real(sim_libra_ratio(e, SIM_ASYNC, true))));
    return doc;
}

json_t *sim_experiment_to_json(const struct sim_experiment *e, const struct libra_config *cfg)
{
    json_t *doc = experiment_head(e, cfg), *modes = json_object_get(doc, "modes");
    for (int i = 0; i < e->n; i++) {
        const struct sim_mode_result *mr = &e->mode[i];
        json_t *steps = json_array();
        for (int k = 0; k < mr->run.steps_run; k++)
            json_array_append_new(steps, step_json(&mr->run.steps[k], mr->layout.pool));
        json_object_set_new(json_object_get(modes, sim_mode_name(mr->mode)), "steps", steps);
    }
    return doc;
}

static void append_line(struct strbuf *b, const json_t *v)
{
    char *line = ujson_dump(v, false);
    strbuf_printf(b, "%s\n", line);
    free(line);
}

char *sim_experiment_jsonl(const struct sim_experiment *e, const struct libra_config *cfg)
{
    struct strbuf b = {0};
    json_t *head = experiment_head(e, cfg);
    append_line(&b, head);
    json_decref(head);
    for (int i = 0; i < e->n; i++)
        for (int k = 0; k < e->mode[i].run.steps_run; k++) {
            json_t *st = step_json(&e->mode[i].run.steps[k], e->mode[i].layout.pool);
            json_object_set_new(st, "mode", json_string(sim_mode_name(e->mode[i].mode)));
            append_line(&b, st);
            json_decref(st);
        }
    return strbuf_detach(&b);
}

/* ---- the table ------------------------------------------------------------------------ */

void sim_layout_text(const struct sim_layout *l, char *out, size_t size)
{
    char fleet[64];
    sim_fleet_text(l, fleet, sizeof fleet);
    const struct sim_mode_desc *d = sim_mode_desc(l->mode);
    if (d->colocated)
        snprintf(out, size, "all GPUs, rollout TP%d (%s)", l->inst[0].tp, l->origin);
    else if (!d->trains)
        snprintf(out, size, "%s (%s)", fleet, l->origin);
    else if (l->n_hybrid)
        snprintf(out, size, "%d train + %dx%d hybrid + %s (%s)", l->n_train, l->n_hybrid,
                 l->replica_gpus, fleet, l->origin);
    else
        snprintf(out, size, "%d train + %s (%s)", l->n_train, fleet, l->origin);
}

/* The pool's line: its replicas, what it did, and the mean split over the measured steps. */
static void pool_text(struct strbuf *b, const struct sim_mode_result *mr)
{
    const struct sim_layout *l = &mr->layout;
    const struct sim_result *r = &mr->run;
    if (!l->n_hybrid) {
        strbuf_printf(b, "elastic pool (%s): no hybrid replica: %s\n", sim_mode_name(l->mode),
                      l->pool_note);
        return;
    }
    double n = 0, train = 0, roll = 0;
    for (int k = r->warmup; k < r->steps_run; k++) {
        train += r->steps[k].pool.train_gpus;
        roll += r->steps[k].rollout_gpu_s / r->steps[k].step_s;
        n++;
    }
    strbuf_printf(b,
                  "elastic pool (%s): %d hybrid replica%s of %d GPUs beside %d core; %d joins "
                  "(%d trained, %d cancelled, %d failed), %d returns; mean GPUs training %.1f, "
                  "in rollout %.1f%s%s\n",
                  sim_mode_name(l->mode), l->n_hybrid, l->n_hybrid == 1 ? "" : "s", l->replica_gpus,
                  l->train.dp / ehp_replica_ranks(&l->train), r->pool.joins, r->pool.activated,
                  r->pool.cancelled, r->pool.failed, r->pool.returned, n ? train / n : 0,
                  n ? roll / n : 0, *l->pool_note ? "; " : "", l->pool_note);
}

/* Online replanning's line: evaluations by trigger, and each accepted replan. */
static void replan_text(struct strbuf *b, const struct sim_mode_result *mr)
{
    static const char *const triggers[] = {"interval", "queue pressure", "active-rollout pressure",
                                           "stale rejections", "rollout/train ratio"};
    const struct sim_result *r = &mr->run;
    size_t accepted = 0;
    for (size_t k = 0; k < r->n_replans; k++)
        accepted += r->replans[k].accepted;
    strbuf_printf(b, "online replanning (%s): %zu evaluation%s", sim_mode_name(mr->mode),
                  r->n_replans, r->n_replans == 1 ? "" : "s");
    const char *sep = " (";
    for (size_t t = 0; t < sizeof triggers / sizeof *triggers; t++) {
        size_t n = 0;
        for (size_t k = 0; k < r->n_replans; k++)
            n += strcmp(r->replans[k].trigger, triggers[t]) == 0;
        if (n) {
            strbuf_printf(b, "%s%s %zu", sep, triggers[t], n);
            sep = ", ";
        }
    }
    strbuf_printf(b, "%s, %zu accepted\n", r->n_replans ? ")" : "", accepted);
    for (size_t k = 0; k < r->n_replans; k++) {
        const struct sim_replan_eval *ev = &r->replans[k];
        if (!ev->accepted)
            continue;
        char cur[64], cand[64];
        counts_text(ev->cur, cur, sizeof cur);
        counts_text(ev->cand, cand, sizeof cand);
        strbuf_printf(b,
                      "  after step %lld: %s -> %s (%d stopped, %d started): predicted %.1f -> "
                      "%.1f s per step, reconfiguration %.1f s\n",
                      (long long)ev->step, cur, cand, ev->stopped, ev->started, ev->cur_step_s,
                      ev->cand_step_s, ev->cost_s);
    }
}

static double discarded_share(const struct sim_result *r)
{
    int64_t d = r->waste[SIM_WASTE_FILTERED] + r->waste[SIM_WASTE_STALE] +
                r->waste[SIM_WASTE_ABORTED] + r->waste[SIM_WASTE_FAILURE] +
                r->waste[SIM_WASTE_SURPLUS];
    return r->generated_tokens ? (double)d / (double)r->generated_tokens : 0;
}

static const char *const sync_names[] = {"drain", "abort_resume", "keep"};
static const char *const transport_names[] = {"nccl", "disk_reload", "disk_restart", "reshard"};

char *sim_experiment_text(const struct sim_experiment *e, const struct libra_config *cfg)
{
    struct strbuf b = {0};
    const struct spec_rl_config *rl = &cfg->rl;
    strbuf_printf(&b,
                  "libra sim: %s on %s, %d x %s; batch %d (%d x %d), %d steps (%d warm-up), "
                  "staleness %d, weights every %d steps by %s + %s",
                  cfg->workload.trace[0] ? cfg->workload.trace : cfg->workload.name,
                  cfg->model.name, cfg->cluster.gpus, cfg->cluster.hardware, rl->batch_trajectories,
                  rl->batch_trajectories / rl->samples, rl->samples, rl->steps,
                  sim_warmup_steps(cfg, rl->steps), rl->max_staleness, rl->sync_interval,
                  sync_names[rl->sync_mode], transport_names[rl->transport]);
    if (rl->dynamic_sampling == SPEC_DS_GEN_BATCH)
        strbuf_printf(&b, "; dynamic sampling: rounds of %d batches", rl->gen_batch_factor);
    else if (rl->dynamic_sampling == SPEC_DS_REGENERATE)
        strbuf_printf(&b, "; dynamic sampling: the missing groups regenerated");
    if (rl->trajectory_timeout_s > 0)
        strbuf_printf(&b, "; trajectories stopped and masked after %g s", rl->trajectory_timeout_s);
    strbuf_printf(&b, "; seed %lld\n\n", (long long)cfg->sim.seed);
    /* the layout column is as wide as its longest layout (at least 36), so that a long one,
     * "32 train + tp1x4,tp2x2,tp4x2 (verified)", leaves the numbers under their headers */
    char lay[SIM_MODES][96];
    int width = 36;
    for (int i = 0; i < e->n; i++) {
        sim_layout_text(&e->mode[i].layout, lay[i], sizeof lay[i]);
        if ((int)strlen(lay[i]) > width)
            width = (int)strlen(lay[i]);
    }
    strbuf_printf(&b, "%-10s %-*s %10s %8s %8s %7s %7s %7s %7s\n", "mode", width, "layout",
                  "tokens/s", "traj/s", "step s", "roll %", "train %", "tail %", "disc %");
    for (int i = 0; i < e->n; i++) {
        const struct sim_mode_result *mr = &e->mode[i];
        const struct sim_result *r = &mr->run;
        strbuf_printf(&b, "%-10s %-*s %10.0f %8.3f %8.1f %7.1f %7.1f %7.1f %7.1f\n",
                      sim_mode_name(mr->mode), width, lay[i], r->tokens_per_s,
                      r->trajectories_per_s, r->mean_step_s, 100 * r->rollout_util,
                      100 * r->train_util, 100 * r->tail_share, 100 * discarded_share(r));
    }
    double rc = sim_libra_ratio(e, SIM_COLOCATED, false), ra = sim_libra_ratio(e, SIM_ASYNC, false);
    if (!isnan(rc) || !isnan(ra)) {
        strbuf_printf(&b, "\nlibra trained tokens/s:");
        if (!isnan(rc))
            strbuf_printf(&b, " %.2fx colocated", rc);
        if (!isnan(ra))
            strbuf_printf(&b, "%s %.2fx async", isnan(rc) ? "" : ",", ra);
        strbuf_printf(&b, "\n");
    }
    const struct sim_mode_result *lm = find(e, SIM_LIBRA);
    if (lm && lm->layout.planned)
        strbuf_printf(&b,
                      "planner fidelity (libra): predicted step %.1f s (train %.1f, rollout "
                      "%.1f), simulated %.1f s (train %.1f, rollout %.1f)\n",
                      lm->layout.pred_step_s, lm->layout.pred_train_s, lm->layout.pred_rollout_s,
                      lm->run.mean_step_s, lm->run.mean_train_s, lm->run.mean_rollout_s);
    for (int i = 0; i < e->n; i++)
        if (e->mode[i].layout.pool)
            pool_text(&b, &e->mode[i]);
    for (int i = 0; i < e->n; i++)
        if (e->mode[i].run.replanning)
            replan_text(&b, &e->mode[i]);
    int raced = 0;
    for (int i = 0; lm && i < lm->n_verified; i++)
        raced += lm->verified[i].raced;
    for (int i = 0; lm && i < lm->n_verified; i++)
        if (lm->verified[i].chosen)
            strbuf_printf(&b,
                          "planner verification (libra): %d of the planner's candidates "
                          "simulated for %d steps on another seed, %d close ones again on a "
                          "second; chose its %s plan (analytic rank %d)\n",
                          lm->n_verified, lm->verify_steps, raced, lm->verified[i].origin, i + 1);
    strbuf_printf(&b, "\ntokens/s: generated tokens of trained trajectories per simulated second "
                      "after the warm-up;\nroll %%, train %%: GPU utilisation; tail %%: share of a "
                      "batch's rollout span taken by its\nlast 10%% of trajectories; disc %%: "
                      "generated tokens discarded (filtered, stale, aborted,\nlost to failures, "
                      "surplus). --json has waste by cause, staleness, routing and every step.\n");
    return strbuf_detach(&b);
}
