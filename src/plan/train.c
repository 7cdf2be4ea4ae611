/*
 * Training layouts for the planner (see train.h): enumeration in tie-break order,
 * feasibility, the admissible lower bound and the exact step time with a dealing cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/train.h"
#include "util/alloc.h"

const int plan_budgets[PLAN_BUDGETS] = {8192, 16384, 32768};

static int64_t at_or(const int64_t *a, size_t i, int64_t dflt)
{
    return a ? a[i] : dflt;
}

/* The tokens of sequence i, held at UINT32_MAX: a trace may hold a longer one (2^40 tokens of
 * each kind), which fits no micro-batch either, where a cut would make it short or empty. */
static uint32_t seq_tokens(const struct plan_sample *s, size_t i)
{
    int64_t n = s->prompt_tokens[i] + s->generated_tokens[i] + at_or(s->tool_tokens, i, 0);
    return n < (int64_t)UINT32_MAX ? (uint32_t)n : UINT32_MAX;
}

static int by_tokens(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The FLOPs of the batches of an admission of `orders` batches in finish order
 * (plan_train_order): the kept sequences by tokens, cut into that many groups, batch i's B
 * sequences picked evenly from group i (repeated when the group is smaller). */
static void order_batches(struct plan_train *t, const struct plan_sample *s, const size_t *kept,
                          size_t n, int orders)
{
    if (orders < 2 || n < (size_t)orders)
        return;
    uint32_t *sorted = xmallocarray(n, sizeof *sorted);
    for (size_t k = 0; k < n; k++)
        sorted[k] = seq_tokens(s, kept[k]);
    qsort(sorted, n, sizeof *sorted, by_tokens);
    size_t B = (size_t)t->batch;
    uint32_t *tokens = xmallocarray(B, sizeof *tokens);
    t->orders = (size_t)orders;
    t->order_work = xmallocarray(t->orders, sizeof *t->order_work);
    for (size_t i = 0; i < t->orders; i++) {
        size_t lo = i * n / t->orders, len = (i + 1) * n / t->orders - lo;
        for (size_t k = 0; k < B; k++)
            tokens[k] = sorted[lo + k * len / B];
        struct cost_train_seqs q;
        cost_train_seqs_init(&q, t->sh, tokens, B);
        t->order_work[i] = q.total_work;
        cost_train_seqs_free(&q);
    }
    free(tokens);
    free(sorted);
}

void plan_train_init(struct plan_train *t, const struct plan_sample *s, const bool *filtered,
                     const struct cost_shape *sh, const struct spec_hardware *hw,
                     const struct plan_settings *st, const struct libra_config *cfg)
{
    memset(t, 0, sizeof *t);
    t->sh = sh;
    t->hw = hw;
    t->st = st;
    t->gpn = cfg->cluster.gpus_per_node;
    t->batch = cfg->rl.batch_trajectories;
    t->samples = cfg->rl.samples;
    t->cp_min_seq_tokens = cfg->plan.cp_min_seq_tokens;
    t->group_integrity = cfg->plan.group_integrity;
    t->ehp = cfg->ehp.enabled;
    t->recompute = cfg->plan.recompute == SPEC_OPTION_SEARCH;
    t->fsdp = cfg->plan.fsdp == SPEC_OPTION_SEARCH;
    t->fallback_recompute = cfg->plan.recompute == SPEC_OPTION_FALLBACK;
    t->fallback_fsdp = cfg->plan.fsdp == SPEC_OPTION_FALLBACK;
    size_t *kept = xmallocarray(s->n, sizeof *kept), n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!filtered || !filtered[i])
            kept[n++] = i;
    if (n == 0) /* none kept (callers refuse such a sample): every one */
        for (; n < s->n; n++)
            kept[n] = n;
    if (n == 0) { /* an empty sample (callers refuse it too): nothing to cost */
        free(kept);
        return;
    }
    t->batches = n >= (size_t)t->batch ? n / (size_t)t->batch : 1;
    t->seqs = xcalloc(t->batches, sizeof *t->seqs);
    t->bwork_max = xmallocarray(t->batches, sizeof *t->bwork_max);
    t->battn = xmallocarray(t->batches, sizeof *t->battn);
    uint32_t *tokens = xmallocarray((size_t)t->batch, sizeof *tokens);
    for (size_t b = 0; b < t->batches; b++) {
        for (size_t k = 0; k < (size_t)t->batch; k++) {
            tokens[k] = seq_tokens(s, kept[(b * (size_t)t->batch + k) % n]);
        }
        struct cost_train_seqs *q = &t->seqs[b];
        cost_train_seqs_init(q, sh, tokens, (size_t)t->batch);
        t->longest = fmax(t->longest, q->longest_tokens);
        t->bwork_max[b] = q->work[q->order[0]];
        t->battn[b] = q->total_work - 2.0 * sh->params_active * q->total_tokens;
    }
    free(tokens);
    order_batches(t, s, kept, n, cfg->rl.sync_interval);
    free(kept);
}

void plan_train_free(struct plan_train *t)
{
    for (size_t b = 0; b < t->batches && t->seqs; b++)
        cost_train_seqs_free(&t->seqs[b]);
    free(t->order_work);
    for (size_t i = 0; i < t->deals.n; i++)
        free(t->deals.v[i].load);
    vec_free(&t->deals);
    intmap_free(&t->deal_index);
    for (unsigned i = 0; i < PLAN_RANKS_KEPT; i++)
        free(t->ranks[i].rank);
    free(t->seqs);
    free(t->bwork_max);
    free(t->battn);
    cost_train_scratch_free(&t->sc);
    memset(t, 0, sizeof *t);
}

/* Whether the experts of t's model split over groups of ep of a stage's GPUs (ep 1: always). */
static bool ep_fits(const struct plan_train *t, int stage_gpus, int ep)
{
    return ep == 1 || (t->sh->moe && stage_gpus % ep == 0 && fmod(t->sh->experts, ep) == 0.0);
}

size_t plan_train_layouts(const struct plan_train *t, int n, struct plan_train_layout *out)
{
    int cps = t->longest > t->cp_min_seq_tokens ? 3 : 1;
    size_t k = 0;
    for (int tp = 1; tp <= 8; tp *= 2)
        for (int pp = 1; pp <= 8; pp *= 2)
            for (int ci = 0, cp = 1; ci < cps; ci++, cp *= 2)
                for (int bi = 0; bi < PLAN_BUDGETS && n % (tp * pp * cp) == 0; bi++)
                    for (int rc = 0; rc < (t->recompute ? 2 : 1); rc++)
                        for (int fs = 0; fs < (t->fsdp && tp == 1 && pp == 1 ? 3 : 1); fs++) {
                            int dp = n / (tp * pp * cp), shard = fs == 2 ? t->gpn / cp : 0;
                            if (fs == 2 && (shard < 2 || shard >= dp || dp % shard != 0))
                                continue; /* HSDP only where a node's shard leaves replicas */
                            for (int e = 0, ep = 1; e < (fs ? 1 : PLAN_EPS); e++, ep *= 2)
                                if (ep_fits(t, tp * cp * dp, ep))
                                    out[k++] = (struct plan_train_layout){
                                        tp,      pp,      cp,    dp, plan_budgets[bi],
                                        rc == 1, fs >= 1, shard, ep};
                        }
    return k;
}

const char *plan_train_sharding(const struct plan_train_layout *l)
{
    return !l->fsdp ? "distributed_optimizer" : l->shard_dp ? "hsdp" : "fsdp";
}

bool plan_train_fallback(struct plan_train *t, bool on)
{
    if (t->fallback_recompute)
        t->recompute = on;
    if (t->fallback_fsdp)
        t->fsdp = on;
    return t->fallback_recompute || t->fallback_fsdp;
}

void plan_train_config(const struct plan_train_layout *l, const struct plan_settings *st,
                       struct cost_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->tp = l->tp;
    c->pp = l->pp;
    c->cp = l->cp;
    c->dp = l->dp;
    c->micro_batch_tokens = (double)l->budget_tokens * l->cp;
    c->minibatches = st->minibatches;
    c->zero_stage = l->fsdp ? 3 : 0;
    c->shard_dp = l->shard_dp;
    c->ep = l->ep;
    c->distributed_optimizer = !l->fsdp;
    c->full_recompute = l->recompute;
    c->old_logprob = st->old_logprob;
    c->reference = st->reference;
    c->balance_each_minibatch = true;
}

enum plan_why plan_train_check(const struct plan_train *t, const struct plan_train_layout *l,
                               struct cost_train_memory *mem)
{
    int replica = l->tp * l->pp * l->cp;
    if (fmod(t->sh->heads, l->tp) != 0.0 || l->tp > t->gpn || t->gpn % l->tp != 0 ||
        l->pp > t->sh->layers)
        return PLAN_WHY_TP;
    /* the pool lends whole replicas: one must hold a node and, under EP, whole expert groups */
    if (t->ehp && (replica > t->gpn || (l->ep > 1 && (l->tp * l->cp) % l->ep != 0)))
        return PLAN_WHY_EHP;
    if ((int64_t)l->dp * t->st->minibatches > t->batch)
        return PLAN_WHY_DP;
    if (t->group_integrity && t->batch % (l->dp * t->samples) != 0)
        return PLAN_WHY_GROUPS;
    if ((double)l->budget_tokens * l->cp < t->longest)
        return PLAN_WHY_BUDGET;
    struct cost_train_config c;
    struct cost_train_memory m;
    plan_train_config(l, t->st, &c);
    if (cost_train_memory(t->sh, t->hw, &t->st->train, &c, &m) != 0 || !m.fits)
        return PLAN_WHY_MEMORY;
    if (mem)
        *mem = m;
    return PLAN_WHY_NONE;
}

/*
 * Batch b's bound (docs/planner.md): a load whose every field is on the safe side of the one
 * cost_train_deal would produce — the most loaded rank's work at least the mean and the
 * largest sequence, its tokens at least the longest sequence, attention at most the batch's,
 * micro-batches at least what the tokens need — gives, term by term, compute, TP, CP, DP,
 * optimizer and micro-batch costs no larger than the exact ones; the pipeline bubble is
 * bounded on the same load with the most micro-batches a rank can have.
 */
static double batch_lb(const struct plan_train *t, size_t b, const struct cost_train_config *c)
{
    const struct cost_train_seqs *q = &t->seqs[b];
    int mb = c->minibatches;
    struct cost_train_load ld = {
        .dp = c->dp,
        .minibatches = mb,
        .micro_batch_tokens = c->micro_batch_tokens,
        .tokens = q->total_tokens,
        .work = q->total_work,
        .work_max = fmax(q->total_work / c->dp, t->bwork_max[b]),
        .tokens_max = q->longest_tokens,
        .attn_work_max = t->battn[b],
        .microbatches = fmax(mb, ceil(q->total_tokens / (c->dp * c->micro_batch_tokens))),
        .longest_tokens = q->longest_tokens,
    };
    struct cost_train_step lo, hi;
    if (cost_train_step_time(t->sh, t->hw, &t->st->train, c, &ld, &lo) != 0)
        return INFINITY;
    double per_mb = ceil(ceil((double)q->n / mb) / c->dp);
    ld.microbatches = fmax(ld.microbatches, mb * per_mb);
    cost_train_step_time(t->sh, t->hw, &t->st->train, c, &ld, &hi);
    return lo.compute_s + lo.tp_comm_s + lo.cp_comm_s + lo.ep_comm_s + lo.dp_comm_s +
           lo.optimizer_s + lo.microbatch_s + hi.pp_bubble_s;
}

double plan_train_lb(const struct plan_train *t, const struct plan_train_layout *l)
{
    struct cost_train_config c;
    plan_train_config(l, t->st, &c);
    double sum = 0.0;
    for (size_t b = 0; b < t->batches; b++)
        sum += batch_lb(t, b, &c);
    /* the bound holds in real arithmetic; shave it below the rounding of the exact sum */
    return sum / (double)t->batches * (1.0 - 1e-12);
}

/* ---- dealing cache -------------------------------------------------------------------------- */

/* Each batch's DP ranks under c (dp and minibatches >= 1; the mini-batches and their balancing
 * are the same for every layout of t, so DP is the key). */
static const uint32_t *ranks_of(struct plan_train *t, const struct cost_train_config *c)
{
    for (unsigned i = 0; i < PLAN_RANKS_KEPT; i++)
        if (t->ranks[i].rank && t->ranks[i].dp == c->dp)
            return t->ranks[i].rank;
    struct plan_ranks *e = &t->ranks[t->ranks_next++ % PLAN_RANKS_KEPT];
    if (!e->rank)
        e->rank = xmallocarray(t->batches * (size_t)t->batch, sizeof *e->rank);
    e->dp = c->dp;
    for (size_t b = 0; b < t->batches; b++)
        cost_train_assign(&t->seqs[b], c->dp, c->minibatches, c->balance_each_minibatch, &t->sc,
                          e->rank + b * (size_t)t->batch);
    return e->rank;
}

static const struct plan_deal *dealt(struct plan_train *t, const struct cost_train_config *c)
{
    uint64_t key = (uint64_t)c->dp << 32 | (uint64_t)c->micro_batch_tokens, at;
    if (intmap_get(&t->deal_index, key, &at))
        return &t->deals.v[at];
    struct plan_deal e = {0, xmallocarray(t->batches, sizeof *e.load)};
    const uint32_t *rank = c->dp >= 1 && c->minibatches >= 1 ? ranks_of(t, c) : NULL;
    for (size_t b = 0; b < t->batches && e.status == 0; b++)
        e.status = rank ? cost_train_deal_ranks(&t->seqs[b], t->sh, c->dp, c->minibatches,
                                                c->micro_batch_tokens, c->balance_each_minibatch,
                                                rank + b * (size_t)t->batch, &t->sc, &e.load[b])
                        : LIBRA_EINVAL;
    intmap_put(&t->deal_index, key, t->deals.n);
    vec_push(&t->deals, e);
    return &t->deals.v[t->deals.n - 1];
}

static void add_step(struct cost_train_step *sum, const struct cost_train_step *s, double w)
{
    sum->step_s += w * s->step_s;
    sum->compute_s += w * s->compute_s;
    sum->pp_bubble_s += w * s->pp_bubble_s;
    sum->pp_p2p_s += w * s->pp_p2p_s;
    sum->tp_comm_s += w * s->tp_comm_s;
    sum->cp_comm_s += w * s->cp_comm_s;
    sum->dp_comm_s += w * s->dp_comm_s;
    sum->ep_comm_s += w * s->ep_comm_s;
    sum->zero3_gather_s += w * s->zero3_gather_s;
    sum->optimizer_s += w * s->optimizer_s;
    sum->microbatch_s += w * s->microbatch_s;
    sum->flops += w * s->flops;
    sum->flops_attn += w * s->flops_attn;
    sum->imbalance += w * s->imbalance;
    sum->mfu_effective += w * s->mfu_effective;
    sum->k_update = s->k_update;
    sum->k_recompute = s->k_recompute;
    sum->k_old_logprob = s->k_old_logprob;
    sum->k_reference = s->k_reference;
}

double plan_train_time(struct plan_train *t, const struct plan_train_layout *l,
                       struct cost_train_step *mean)
{
    struct cost_train_config c;
    plan_train_config(l, t->st, &c);
    const struct plan_deal *d = dealt(t, &c);
    if (d->status != 0)
        return INFINITY;
    struct cost_train_step sum = {0}, s;
    double w = 1.0 / (double)t->batches, total = 0.0;
    for (size_t b = 0; b < t->batches; b++) {
        if (cost_train_step_time(t->sh, t->hw, &t->st->train, &c, &d->load[b], &s) != 0)
            return INFINITY;
        total += s.step_s;
        add_step(&sum, &s, w);
    }
    if (mean)
        *mean = sum;
    return total / (double)t->batches;
}

bool plan_train_order(struct plan_train *t, const struct plan_train_layout *l, double *w)
{
    struct cost_train_step mean;
    if (t->orders == 0 || !isfinite(plan_train_time(t, l, &mean)) || !(mean.step_s > 0.0))
        return false;
    double work = 0.0, share = mean.compute_s / mean.step_s;
    for (size_t i = 0; i < t->orders; i++)
        work += t->order_work[i];
    for (size_t i = 0; i < t->orders; i++)
        w[i] = 1.0 + share * (t->order_work[i] * (double)t->orders / work - 1.0);
    return true;
}

double plan_train_reshard_s(const struct plan_train_layout *l, const struct plan_settings *st,
                            const struct cost_shape *sh, const struct spec_hardware *hw, int gpn,
                            int tp)
{
    double shards = (double)l->tp * l->pp;
    int span = l->tp * l->pp; /* consecutive GPUs that share one copy of the weights */
    if (l->ep > 1) {
        double experts = sh->layers * sh->experts * sh->expert_params;
        shards = sh->params_total /
                 ((sh->params_total - experts) / shards + experts / ((double)l->ep * l->pp));
        span = (l->ep > l->tp ? l->ep : l->tp) * l->pp;
    }
    return cost_reshard_s(&st->lifecycle, sh, hw, shards, tp, span > gpn);
}

double plan_train_switch_s(const struct plan_train *t, const struct plan_train_layout *l, int tp)
{
    return plan_train_reshard_s(l, t->st, t->sh, t->hw, t->gpn, tp) +
           t->st->lifecycle.switch_fixed_s;
}
