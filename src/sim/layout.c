/*
 * Layouts: which GPUs train, with which parallel layout, and which rollout instances serve.
 *
 * libra's comes from the planner (plan_solve in async mode on a length sample of the
 * workload: its split, training layout, heterogeneous instances, their placement and the
 * bucket layout C-MLFQ routes over). The baselines get the fastest training layout the
 * planner's training model finds for their GPUs (plan/train.h: every feasible (TP, PP, CP,
 * micro-batch budget), timed on the sample), so that a baseline is never slowed by a poor
 * training layout; their rollout side is the one TP the caller pins or the tuner sweeps.
 * Instances never span nodes: they are packed into the nodes after the training GPUs, larger
 * ones first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ehp/lend.h"
#include "plan/sample.h"
#include "plan/train.h"
#include "sim/internal.h"
#include "util/alloc.h"
#include "util/error.h"

void sim_layout_free(struct sim_layout *l)
{
    free(l->inst);
    l->inst = NULL;
}

/* ---- the length sample ---------------------------------------------------------------- */

/* One trajectory's lengths and tool time, as `libra plan` reads them (workload/workload.h). */
static void sample_add(struct plan_lengths *sm, const struct workload_length *w)
{
    plan_lengths_add(sm, w->len.prompt_tokens, w->len.generated_tokens, w->len.tool_tokens,
                     w->len.turns, w->len.tool_s, w->filtered);
}

/* A trace's batch b (of its whole batches, cycled when it holds less than one) into w, each
 * group judged by dynamic sampling as the simulator judges it. */
static void trace_batch(const struct sim_input *in, size_t b, struct workload_length *w)
{
    size_t batch = (size_t)in->cfg->rl.batch_trajectories, samples = (size_t)in->cfg->rl.samples;
    size_t usable = in->trace->n / samples * samples; /* > 0: sim_input_check */
    struct trace_traj *group = xmallocarray(samples, sizeof *group);
    for (size_t i = 0; i < batch; i += samples) {
        for (size_t k = 0; k < samples; k++) {
            const struct trace_traj *t = &in->trace->trajs[(b * batch + i + k) % usable];
            w[i + k] = (struct workload_length){0};
            trace_traj_lengths(t, &w[i + k].len);
            if (in->workload)
                workload_tool_exec(in->workload, t, w[i + k].tool_exec_s);
            group[k] = (struct trace_traj){.finish = t->finish, .reward = t->reward};
        }
        bool filtered = workload_group_filtered(in->cfg->rl.dynamic_sampling, group, samples);
        for (size_t k = 0; k < samples; k++)
            w[i + k].filtered = filtered;
    }
    free(group);
}

void sim_layout_sample(const struct sim_input *in, struct plan_lengths *sm)
{
    const struct libra_config *cfg = in->cfg;
    size_t batch = (size_t)cfg->rl.batch_trajectories, samples = (size_t)cfg->rl.samples;
    size_t n = plan_sample_size(batch), nb = n / batch;
    struct workload_length *w = xmallocarray(n, sizeof *w);
    if (in->trace) {
        size_t have = in->trace->n / batch; /* the trace's whole batches */
        if (have < nb)
            nb = have ? have : 1;
        n = nb * batch;
        for (size_t j = 0; j < nb; j++)
            trace_batch(in, have ? j * have / nb : 0, &w[j * batch]);
    } else {
        workload_lengths(in->workload, cfg->rl.dynamic_sampling, (uint64_t)sim_sample_seed(cfg),
                         batch, samples, (size_t)cfg->rl.steps, n, w);
    }
    double exec_s[WORKLOAD_MAX_TOOLS] = {0};
    for (size_t i = 0; i < n; i++) {
        sample_add(sm, &w[i]);
        for (size_t k = 0; k < WORKLOAD_MAX_TOOLS; k++)
            exec_s[k] += w[i].tool_exec_s[k];
    }
    sm->pool_s = in->workload ? workload_pool_load_s(in->workload, exec_s, n) : 0.0;
    free(w);
}

/* ---- training layouts ----------------------------------------------------------------- */

/* The fastest feasible training layout of n GPUs among t's; *why gets the furthest constraint
 * when none is feasible (then the result is INFINITY). */
static double fastest(struct plan_train *t, int n, struct plan_train_layout *out,
                      enum plan_why *why)
{
    struct plan_train_layout cand[PLAN_LAYOUTS_MAX];
    size_t k = plan_train_layouts(t, n, cand);
    double best = INFINITY;
    for (size_t i = 0; i < k; i++) {
        enum plan_why w = plan_train_check(t, &cand[i], NULL);
        if (w != PLAN_WHY_NONE) {
            *why = w > *why ? w : *why;
            continue;
        }
        double ts = plan_train_time(t, &cand[i], NULL);
        if (ts < best) {
            best = ts;
            *out = cand[i];
        }
    }
    return best;
}

/* The fastest feasible training layout of n GPUs on the sample (with plan.recompute or
 * plan.fsdp fallback, layouts with them when none fits without). */
static int best_train(const struct sim_input *in, const struct plan_lengths *sm, int n,
                      struct plan_train_layout *out, double *train_s, struct libra_error *err)
{
    struct cost_shape sh;
    struct plan_settings st;
    if (cost_shape_init(&sh, in->model) != 0)
        return error_set(err, NULL, 0, 0, "model %s: the cost model rejects its shape",
                         in->model->name);
    plan_settings_from_config(&st, in->hw, in->cfg);
    struct plan_sample view = plan_lengths_view(sm);
    struct plan_train t;
    plan_train_init(&t, &view, sm->filtered.v, &sh, in->hw, &st, in->cfg);
    enum plan_why why = PLAN_WHY_TP;
    double best = fastest(&t, n, out, &why);
    if (isinf(best) && plan_train_fallback(&t, true))
        best = fastest(&t, n, out, &why);
    plan_train_free(&t);
    if (isinf(best)) {
        error_set(err, NULL, 0, 0, "no training layout of %d GPUs: %s", n, plan_why_text(why));
        return LIBRA_EINFEAS;
    }
    *train_s = best;
    return 0;
}

/* ---- fleets --------------------------------------------------------------------------- */

static int cmp_tp_desc(const void *a, const void *b)
{
    const struct sim_instance_spec *x = a, *y = b;
    return y->tp - x->tp;
}

/* Places l->inst (TP sizes set) on GPUs [first_gpu, gpus), larger first, first fit per node. */
static int pack(const struct libra_config *cfg, struct sim_layout *l, int first_gpu,
                struct libra_error *err)
{
    int gpn = cfg->cluster.gpus_per_node, gpus = cfg->cluster.gpus;
    int nodes = (gpus + gpn - 1) / gpn;
    int *used = xcalloc((size_t)nodes, sizeof *used);
    for (int g = 0; g < first_gpu; g++)
        used[g / gpn]++;
    qsort(l->inst, (size_t)l->n_inst, sizeof *l->inst, cmp_tp_desc);
    int rc = 0;
    for (int i = 0; i < l->n_inst && !rc; i++) {
        int node = 0, tp = l->inst[i].tp;
        while (node < nodes && (node == nodes - 1 ? gpus - node * gpn : gpn) - used[node] < tp)
            node++;
        if (node == nodes || tp > gpn)
            rc = error_set(err, NULL, 0, 0,
                           "the rollout instances do not fit the %d GPUs left for rollout "
                           "(instances stay inside one node of %d GPUs)",
                           gpus - first_gpu, gpn);
        else
            l->inst[i].gpu = node * gpn + used[node];
        if (!rc)
            used[node] += tp;
    }
    free(used);
    return rc;
}

int sim_homogeneous(const struct libra_config *cfg, struct sim_layout *l, int first_gpu, int tp,
                    struct libra_error *err)
{
    int gpus = cfg->cluster.gpus;
    if (tp < 1 || tp > 8 || (tp & (tp - 1)) || tp > cfg->cluster.gpus_per_node)
        return error_set(err, NULL, 0, 0, "rollout TP %d: must be 1, 2, 4 or 8 and fit a node", tp);
    if (gpus - first_gpu < tp)
        return error_set(err, NULL, 0, 0, "no TP%d instance fits the %d GPU%s left for rollout", tp,
                         gpus - first_gpu, gpus - first_gpu == 1 ? "" : "s");
    l->n_inst = (gpus - first_gpu) / tp;
    l->inst = xcalloc((size_t)(l->n_inst ? l->n_inst : 1), sizeof *l->inst);
    for (int i = 0; i < l->n_inst; i++)
        l->inst[i].tp = tp;
    l->buckets.n = 1;
    l->buckets.bucket[0] = (struct spec_bucket){
        .max_tokens = SPEC_BUCKET_TOKENS_MAX, .n_tp = 1, .tp = {tp}, .instances = {l->n_inst}};
    l->policy = SCHED_LOAD_BALANCE;
    return pack(cfg, l, first_gpu, err);
}

int sim_layout_assign_buckets(struct sim_layout *l, struct libra_error *err)
{
    int left[SPEC_BUCKETS_MAX][SPEC_BUCKET_TPS_MAX], rr[PLAN_NTP] = {0};
    for (int b = 0; b < l->buckets.n; b++)
        for (int k = 0; k < l->buckets.bucket[b].n_tp; k++)
            left[b][k] = l->buckets.bucket[b].instances[k];
    for (int i = 0; i < l->n_inst; i++) {
        int tp = l->inst[i].tp, found = -1;
        for (int b = 0; b < l->buckets.n && found < 0; b++)
            for (int k = 0; k < l->buckets.bucket[b].n_tp; k++)
                if (l->buckets.bucket[b].tp[k] == tp && left[b][k] > 0) {
                    left[b][k]--;
                    found = b;
                    break;
                }
        int serving[SPEC_BUCKETS_MAX], ns = 0;
        for (int b = 0; b < l->buckets.n; b++)
            if (spec_bucket_has_tp(&l->buckets.bucket[b], tp))
                serving[ns++] = b;
        if (found < 0 && ns == 0)
            return error_set(err, NULL, 0, 0,
                             "sched.buckets: no bucket is served by TP%d, but the fleet has "
                             "TP%d instances",
                             tp, tp);
        l->inst[i].bucket = found >= 0 ? found : serving[rr[spec_tp_index(tp)]++ % ns];
    }
    return 0;
}

static int fleet_gpus(const struct sim_layout *l)
{
    int g = 0;
    for (int i = 0; i < l->n_inst; i++)
        g += l->inst[i].tp;
    return g;
}

int sim_fleet(const struct libra_config *cfg, enum sim_mode m, struct sim_layout *l,
              struct libra_error *err)
{
    const char *text = cfg->sched.buckets;
    if (!text[0])
        return error_set(err, NULL, 0, 0,
                         "sched.buckets: the %s layout needs a fleet: give instance counts, "
                         "e.g. \"tp1x4:4000,tp2x2:12000,tp4x1:30000\"",
                         sim_mode_name(m));
    if (spec_bucket_parse(&l->buckets, text, "sched.buckets", err) != 0)
        return LIBRA_EINVAL;
    int n = 0;
    for (int b = 0; b < l->buckets.n; b++)
        for (int k = 0; k < l->buckets.bucket[b].n_tp; k++)
            n += l->buckets.bucket[b].instances[k];
    if (n == 0)
        return error_set(err, NULL, 0, 0,
                         "sched.buckets: \"%s\" gives no instance counts (write tp2x3:12000 for "
                         "three TP2 instances)",
                         text);
    l->n_inst = n;
    l->inst = xcalloc((size_t)n, sizeof *l->inst);
    int i = 0;
    for (int b = 0; b < l->buckets.n; b++)
        for (int k = 0; k < l->buckets.bucket[b].n_tp; k++)
            for (int c = 0; c < l->buckets.bucket[b].instances[k]; c++)
                l->inst[i++] = (struct sim_instance_spec){l->buckets.bucket[b].tp[k], b, 0, 0};
    int gpus = cfg->cluster.gpus, roll = fleet_gpus(l);
    bool trains = sim_mode_desc(m)->trains;
    if (roll > gpus || (trains && roll == gpus))
        return error_set(err, NULL, 0, 0, "sched.buckets: the fleet takes %d of %d GPUs%s", roll,
                         gpus, trains ? " and leaves none to train" : "");
    l->n_train = trains ? gpus - roll : 0;
    return pack(cfg, l, l->n_train, err);
}

/* ---- the modes ------------------------------------------------------------------------ */

int sim_layout_colocated(const struct sim_input *in, const struct plan_lengths *sm, int n_train,
                         int tp, struct sim_layout *l, struct libra_error *err)
{
    (void)n_train; /* every GPU */
    double train_s;
    l->n_train = in->cfg->cluster.gpus;
    int rc = best_train(in, sm, l->n_train, &l->train, &train_s, err);
    return rc ? rc : sim_homogeneous(in->cfg, l, 0, tp, err);
}

int sim_layout_async(const struct sim_input *in, const struct plan_lengths *sm, int n_train, int tp,
                     struct sim_layout *l, struct libra_error *err)
{
    int gpus = in->cfg->cluster.gpus;
    if (n_train < 1 || n_train >= gpus)
        return error_set(err, NULL, 0, 0, "async: %d training GPUs leave no split of %d GPUs",
                         n_train, gpus);
    double train_s;
    l->n_train = n_train;
    int rc = best_train(in, sm, n_train, &l->train, &train_s, err);
    return rc ? rc : sim_homogeneous(in->cfg, l, n_train, tp, err);
}

void sim_layout_plan_instances(const struct plan_result *r, struct sim_layout *l)
{
    l->n_inst = r->instances;
    l->inst = xcalloc((size_t)(r->instances ? r->instances : 1), sizeof *l->inst);
    for (int g = 0; g < r->gpus; g++) {
        const struct plan_gpu *u = &r->gpu[g];
        if (u->instance < 0 || u->instance >= r->instances)
            continue;
        struct sim_instance_spec *sp = &l->inst[u->instance];
        if (sp->tp == 0)
            *sp = (struct sim_instance_spec){u->instance_tp, 0,
                                             u->node * r->gpus_per_node + u->local, 0};
    }
}

/* ---- the elastic hybrid pool ---------------------------------------------------------- */

/* The fewest DP replicas of l (at least one) that hold the model state and fit memory on the
 * sample with the batch dealt to them alone: the core, which trains every step. */
static int core_replicas(struct plan_train *t, const struct plan_train_layout *l)
{
    for (int d = 1; d < l->dp; d++) {
        struct plan_train_layout c = *l;
        c.dp = d;
        if (plan_train_check(t, &c, NULL) == PLAN_WHY_NONE)
            return d;
    }
    return l->dp;
}

/* Whether l can lend: a core smaller than l, and a replica that holds the whole state and
 * fits (ehp_lend_layout). Sets *core, and *why (a static text) when it cannot. */
static bool lendable(struct plan_train *t, const struct plan_settings *st,
                     const struct cost_shape *sh, const struct spec_hardware *hw,
                     const struct plan_train_layout *l, int *core, const char **why)
{
    static const char *const whys[] = {
        [EHP_LEND_FULL_SHARD] = "FSDP shards the whole state over every replica",
        [EHP_LEND_SHARD_GROUP] = "the HSDP shard group does not divide DP",
        [EHP_LEND_NODE] = "a training replica spans nodes",
        [EHP_LEND_EXPERTS] = "a training replica holds part of an expert group",
        [EHP_LEND_MEMORY] = "a replica's whole state does not fit its GPUs",
    };
    *core = core_replicas(t, l);
    struct plan_train_layout cl = *l;
    cl.dp = *core;
    struct ehp_lend lend;
    if (*core == l->dp) {
        *why = "the core needs every training replica to hold the model state";
        return false;
    }
    if (ehp_lend_layout(&cl, st, sh, hw, &lend) != 0 || !lend.can_lend) {
        *why = whys[lend.why == EHP_LEND_OK ? EHP_LEND_MEMORY : lend.why];
        return false;
    }
    return true;
}

/* The fastest feasible layout of n GPUs that can lend (its core in *core), or none
 * (INFINITY). */
static double fastest_lendable(struct plan_train *t, const struct plan_settings *st,
                               const struct cost_shape *sh, const struct spec_hardware *hw, int n,
                               struct plan_train_layout *out, int *core)
{
    struct plan_train_layout cand[PLAN_LAYOUTS_MAX];
    size_t k = plan_train_layouts(t, n, cand);
    double best = INFINITY;
    for (size_t i = 0; i < k; i++) {
        int c;
        const char *why;
        if (plan_train_check(t, &cand[i], NULL) != PLAN_WHY_NONE ||
            !lendable(t, st, sh, hw, &cand[i], &c, &why))
            continue;
        double ts = plan_train_time(t, &cand[i], NULL);
        if (ts < best) {
            best = ts;
            *out = cand[i];
            *core = c;
        }
    }
    return best;
}

/* The TP of a hybrid replica's rollout instances: of the TP sizes up to the replica's GPUs
 * that the buckets route to, the one serving the most GPUs of the fleet (the smaller on a
 * tie); with none, the replica's GPUs as one instance, which the last bucket then serves too
 * (the bucket of the longest work, where a large instance belongs). */
static int hybrid_tp(struct sim_layout *l)
{
    int gpus[PLAN_NTP] = {0}, best = -1;
    for (int i = 0; i < l->n_inst; i++)
        gpus[spec_tp_index(l->inst[i].tp)] += l->inst[i].tp;
    for (int k = 0; k < PLAN_NTP && 1 << k <= l->replica_gpus; k++) {
        bool routed = false;
        for (int b = 0; b < l->buckets.n; b++)
            routed = routed || spec_bucket_has_tp(&l->buckets.bucket[b], 1 << k);
        if (routed && (best < 0 || gpus[k] > gpus[best]))
            best = k;
    }
    if (best >= 0)
        return 1 << best;
    sim_buckets_serve(&l->buckets, l->replica_gpus);
    return l->replica_gpus;
}

void sim_buckets_serve(struct spec_bucket_layout *b, int tp)
{
    for (int k = 0; k < b->n; k++)
        if (spec_bucket_has_tp(&b->bucket[k], tp))
            return;
    struct spec_bucket *last = &b->bucket[b->n - 1];
    int at = 0;
    while (at < last->n_tp && last->tp[at] < tp)
        at++;
    size_t tail = (size_t)(last->n_tp - at);
    memmove(&last->tp[at + 1], &last->tp[at], tail * sizeof *last->tp);
    memmove(&last->instances[at + 1], &last->instances[at], tail * sizeof *last->instances);
    last->tp[at] = tp;
    last->instances[at] = 0;
    last->n_tp++;
}

/* Gives l hybrid replicas beyond its core of `core` DP ranks, each serving rollout as instances
 * of hybrid_tp on its GPUs. */
static void add_hybrids(struct sim_layout *l, int core)
{
    int ranks = ehp_replica_ranks(&l->train);
    int n_hybrid = (l->train.dp - core) / ranks, tp = hybrid_tp(l), per = l->replica_gpus / tp;
    int first = core / ranks * l->replica_gpus;
    l->inst =
        xreallocarray(l->inst, (size_t)l->n_inst + (size_t)n_hybrid * (size_t)per, sizeof *l->inst);
    for (int h = 0; h < n_hybrid; h++)
        for (int j = 0; j < per; j++)
            l->inst[l->n_inst++] =
                (struct sim_instance_spec){tp, 0, first + h * l->replica_gpus + j * tp, h + 1};
    l->n_hybrid = n_hybrid;
    l->n_train = first;
    l->train.dp = core;
}

/*
 * Splits l's training replicas into the core and hybrid replicas, which serve rollout until
 * the pool borrows them: every replica beyond what the core needs to hold the model state is
 * hybrid, so the pool can lend as much as the layout allows while the core's communicators
 * never change. A layout that cannot lend (its core needs every replica, or a replica's whole
 * state does not fit: a hybrid steps its own optimizer, so it holds what a core replica
 * shards over DP) is replaced by the fastest layout of its GPUs that can, and pool_note says
 * so; with none, l keeps its replicas and pool_note says why.
 */
static void pool_split(const struct sim_input *in, const struct plan_lengths *sm,
                       struct sim_layout *l)
{
    struct cost_shape sh;
    struct plan_settings st;
    l->pool = true;
    if (cost_shape_init(&sh, in->model) != 0)
        return; /* the planner has used it: not reached */
    plan_settings_from_config(&st, in->hw, in->cfg);
    struct plan_sample view = plan_lengths_view(sm);
    struct plan_train t;
    plan_train_init(&t, &view, sm->filtered.v, &sh, in->hw, &st, in->cfg);
    int core;
    const char *why;
    if (!lendable(&t, &st, &sh, in->hw, &l->train, &core, &why)) {
        struct plan_train_layout alt;
        if (!isinf(fastest_lendable(&t, &st, &sh, in->hw, l->n_train, &alt, &core)) ||
            (plan_train_fallback(&t, true) &&
             !isinf(fastest_lendable(&t, &st, &sh, in->hw, l->n_train, &alt, &core)))) {
            snprintf(l->pool_note, sizeof l->pool_note,
                     "the planner's training layout cannot lend (%s): the fastest that can", why);
            l->train = alt;
        } else {
            snprintf(l->pool_note, sizeof l->pool_note,
                     "%s, and no other layout of its %d GPUs "
                     "can lend",
                     why, l->n_train);
            core = l->train.dp;
        }
    }
    plan_train_free(&t);
    l->replica_gpus = ehp_replica_ranks(&l->train) * l->train.tp * l->train.pp * l->train.cp;
    if (core < l->train.dp)
        add_hybrids(l, core);
}

/* libra's layout as the planner plans it (async) under plan_cfg's plan section. */
static int make_libra_planned(const struct sim_input *in, const struct libra_config *plan_cfg,
                              const struct plan_lengths *sm, struct sim_layout *l,
                              struct libra_error *err)
{
    struct libra_config cfg = *plan_cfg;
    cfg.plan.mode = SPEC_PLAN_ASYNC;
    struct plan_result r;
    int rc = plan_solve_lengths(sm, &cfg, in->hw, in->model, NULL, NULL, &r, err);
    if (rc == 0 && !r.feasible) {
        error_set(err, NULL, 0, 0, "the planner finds no feasible plan: %s", plan_why_text(r.why));
        rc = LIBRA_EINFEAS;
    }
    if (rc == 0) {
        l->n_train = r.n_train;
        l->train = r.train;
        l->buckets = r.layout;
        sim_layout_plan_instances(&r, l);
        l->planned = true;
        l->pred_step_s = r.step_s;
        l->pred_train_s = r.train_s;
        l->pred_rollout_s = r.rollout_s;
        l->pred_switch_s = r.switch_s;
        snprintf(l->origin, sizeof l->origin, "planner");
    }
    plan_result_free(&r);
    if (rc == 0 && in->cfg->sched.buckets[0] &&
        spec_bucket_parse(&l->buckets, in->cfg->sched.buckets, "sched.buckets", err) != 0)
        rc = LIBRA_EINVAL;
    if (rc == 0 && in->cfg->ehp.enabled)
        pool_split(in, sm, l);
    return rc ? rc : sim_layout_assign_buckets(l, err);
}

static int make_libra_fleet(const struct sim_input *in, const struct plan_lengths *sm,
                            struct sim_layout *l, struct libra_error *err)
{
    int rc = sim_fleet(in->cfg, l->mode, l, err);
    if (rc)
        return rc;
    double train_s;
    rc = best_train(in, sm, l->n_train, &l->train, &train_s, err);
    snprintf(l->origin, sizeof l->origin, "fleet");
    if (rc || !in->cfg->ehp.enabled)
        return rc;
    pool_split(in, sm, l); /* the hybrids' instances go to buckets serving their TP */
    return sim_layout_assign_buckets(l, err);
}

/* libra: the planner's layout, or with sim.planner off the fleet of sched.buckets. */
int sim_layout_libra(const struct sim_input *in, const struct plan_lengths *sm, int n_train, int tp,
                     struct sim_layout *l, struct libra_error *err)
{
    (void)n_train, (void)tp; /* the planner's, or the fleet's */
    return in->cfg->sim.planner ? make_libra_planned(in, in->cfg, sm, l, err)
                                : make_libra_fleet(in, sm, l, err);
}

int sim_layout_rollout(const struct sim_input *in, const struct plan_lengths *sm, int n_train,
                       int tp, struct sim_layout *l, struct libra_error *err)
{
    (void)sm, (void)n_train, (void)tp; /* no trainer; the fleet of sched.buckets */
    snprintf(l->origin, sizeof l->origin, "fleet");
    return sim_fleet(in->cfg, l->mode, l, err);
}

int sim_layout_make(const struct sim_input *in, enum sim_mode m, int n_train, int tp,
                    struct sim_layout *out, struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    out->mode = m;
    snprintf(out->origin, sizeof out->origin, "pinned");
    if (sim_input_check(in, err) != 0)
        return LIBRA_EINVAL;
    const struct sim_mode_desc *d = sim_mode_desc(m);
    struct plan_lengths sm = {0};
    if (d->trains)
        sim_layout_sample(in, &sm);
    int rc = d->layout(in, d->trains ? &sm : NULL, n_train, tp, out, err);
    if (d->routed)
        out->policy = in->cfg->sched.policy;
    plan_lengths_free(&sm);
    return rc;
}

int sim_layout_plan(const struct sim_input *in, const struct libra_config *plan_cfg,
                    struct sim_layout *out, struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    out->mode = SIM_LIBRA;
    if (sim_input_check(in, err) != 0)
        return LIBRA_EINVAL;
    struct plan_lengths sm = {0};
    sim_layout_sample(in, &sm);
    int rc = make_libra_planned(in, plan_cfg, &sm, out, err);
    out->policy = in->cfg->sched.policy;
    plan_lengths_free(&sm);
    return rc;
}

int64_t sim_sample_seed(const struct libra_config *cfg)
{
    return cfg->plan.sample_seed ? cfg->plan.sample_seed : cfg->sim.seed;
}

int sim_plan(const struct sim_input *in, const struct libra_config *plan_cfg,
             bool (*should_stop)(void *), void *stop_arg, struct plan_result *r,
             struct libra_error *err)
{
    memset(r, 0, sizeof *r);
    if (sim_input_check(in, err) != 0)
        return LIBRA_EINVAL;
    struct plan_lengths sm = {0};
    sim_layout_sample(in, &sm);
    int rc = plan_solve_lengths(&sm, plan_cfg, in->hw, in->model, should_stop, stop_arg, r, err);
    plan_lengths_free(&sm);
    return rc;
}
