/*
 * Training step time and memory (model in train.h). The dealing of sequences to DP ranks is the
 * only part that looks at individual sequences; it is what makes a long-tailed step slower than
 * its mean, and what the planner caches per DP size.
 */
#include "cost/train.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/sort.h"

void cost_train_params_default(struct cost_train_params *p)
{
    memset(p, 0, sizeof *p);
    p->dp_overlap = 0.5;
    p->t_microbatch_s = 0.05;
    p->weight_bytes = 2.0;
    p->grad_bytes = 4.0;
    p->optimizer_bytes = 12.0;
    p->act_bytes = 2.0;
    p->optimizer_bw_eff = 0.5;
    p->logits_factor = 1.5;
    p->workspace_bytes = 4e9;
    p->margin_frac = 0.05;
    p->mfu = 0.35;
}

void cost_train_params_for(struct cost_train_params *p, const struct spec_hardware *hw)
{
    cost_train_params_default(p);
    if (hw->train_mfu > 0.0)
        p->mfu = hw->train_mfu;
}

/* ---- sequences ------------------------------------------------------------------------------ */

int cost_train_seqs_init(struct cost_train_seqs *seqs, const struct cost_shape *s,
                         const uint32_t *tokens, size_t n)
{
    memset(seqs, 0, sizeof *seqs);
    if (n == 0 || n > UINT32_MAX)
        return LIBRA_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] == 0)
            return LIBRA_EINVAL;
    seqs->n = n;
    seqs->tokens = xmallocarray(n, sizeof *seqs->tokens);
    seqs->work = xmallocarray(n, sizeof *seqs->work);
    seqs->order = xmallocarray(n, sizeof *seqs->order);
    struct sort_pair *k = xmallocarray(2 * n, sizeof *k); /* n to sort, n of scratch */
    for (size_t i = 0; i < n; i++) {
        seqs->tokens[i] = tokens[i];
        seqs->work[i] = cost_seq_forward_flops(s, tokens[i]);
        seqs->total_tokens += tokens[i];
        seqs->total_work += seqs->work[i];
        seqs->longest_tokens = fmax(seqs->longest_tokens, tokens[i]);
        /* the most work first, ties in step order */
        k[i] = (struct sort_pair){~sort_key_double(seqs->work[i]), (uint32_t)i};
    }
    sort_pairs(k, n, k + n);
    for (size_t i = 0; i < n; i++)
        seqs->order[i] = k[i].index;
    free(k);
    return 0;
}

void cost_train_seqs_free(struct cost_train_seqs *seqs)
{
    free(seqs->tokens);
    free(seqs->work);
    free(seqs->order);
    memset(seqs, 0, sizeof *seqs);
}

void cost_train_scratch_free(struct cost_train_scratch *sc)
{
    free(sc->cell);
    free(sc->rank);
    free(sc->heap);
    free(sc->count);
    memset(sc, 0, sizeof *sc);
}

static void scratch_reserve(struct cost_train_scratch *sc, size_t cells, size_t seqs, size_t ranks)
{
    if (cells > sc->cap_cells) {
        sc->cell = xreallocarray(sc->cell, cells, sizeof *sc->cell);
        sc->cap_cells = cells;
    }
    if (seqs > sc->cap_seqs) {
        sc->rank = xreallocarray(sc->rank, seqs, sizeof *sc->rank);
        sc->cap_seqs = seqs;
    }
    if (ranks > sc->cap_ranks) {
        sc->heap = xreallocarray(sc->heap, ranks, sizeof *sc->heap);
        sc->count = xreallocarray(sc->count, ranks, sizeof *sc->count);
        sc->cap_ranks = ranks;
    }
}

/* ---- dealing: least-loaded rank first, each rank holding at most `cap` sequences ----------- */

/* A binary min-heap of rank indices keyed by (load, index) over one group's cells. */
struct rank_heap {
    uint32_t *h;
    size_t n;
    const struct cost_train_cell *cell; /* the group's per-rank cells */
};

static bool heap_less(const struct rank_heap *rh, uint32_t a, uint32_t b)
{
    double la = rh->cell[a].work, lb = rh->cell[b].work;
    return la < lb || (la == lb && a < b);
}

static void heap_sift_down(struct rank_heap *rh, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < rh->n && heap_less(rh, rh->h[l], rh->h[m]))
            m = l;
        if (l + 1 < rh->n && heap_less(rh, rh->h[l + 1], rh->h[m]))
            m = l + 1;
        if (m == i)
            return;
        uint32_t t = rh->h[i];
        rh->h[i] = rh->h[m];
        rh->h[m] = t;
        i = m;
    }
}

static void cell_add(struct cost_train_cell *c, double tokens, double work, double attn,
                     double half_budget)
{
    c->tokens += tokens;
    c->work += work;
    c->attn += attn;
    c->seqs += 1.0;
    c->big += tokens > half_budget ? 1.0 : 0.0;
}

/*
 * Assigns the sequences of [lo, hi) (indices in step order) to dp ranks, longest first to the
 * least loaded rank that still has room, and records each rank in rank[]. Uses the first dp
 * cells of `cells` for the loads (zeroed here) and heap's dp entries.
 */
static void deal_group(const struct cost_train_seqs *seqs, size_t lo, size_t hi, int dp,
                       struct cost_train_cell *cells, uint32_t *heap, uint32_t *rank)
{
    size_t cap = (hi - lo + (size_t)dp - 1) / (size_t)dp;
    memset(cells, 0, (size_t)dp * sizeof *cells);
    struct rank_heap rh = {heap, (size_t)dp, cells};
    for (int r = 0; r < dp; r++)
        rh.h[r] = (uint32_t)r;
    for (size_t k = 0; k < seqs->n; k++) {
        uint32_t i = seqs->order[k];
        if (i < lo || i >= hi)
            continue;
        uint32_t r = rh.h[0];
        rank[i] = r;
        cells[r].work += seqs->work[i];
        if (cells[r].seqs += 1.0, cells[r].seqs >= (double)cap)
            rh.h[0] = rh.h[--rh.n]; /* full: leaves the heap */
        if (rh.n > 0)
            heap_sift_down(&rh, 0);
    }
}

/*
 * The mini-batch of the k-th of n sequences (in order) split into mb: k·mb/n. The one definition
 * of a mini-batch, used for dealing and for counting alike, so that a sequence is counted in the
 * mini-batch it was dealt with.
 */
static size_t minibatch_of(size_t k, size_t n, size_t mb)
{
    return k * mb / n;
}

void cost_train_assign(const struct cost_train_seqs *seqs, int dp, int minibatches,
                       bool balance_each_minibatch, struct cost_train_scratch *sc, uint32_t *rank)
{
    size_t n = seqs->n, mb = (size_t)minibatches;
    scratch_reserve(sc, mb * (size_t)dp, n, (size_t)dp);
    /* per mini-batch (balanced) or once over the step (then split in order) */
    if (balance_each_minibatch) {
        for (size_t lo = 0, hi = 0; lo < n; lo = hi) {
            while (hi < n && minibatch_of(hi, n, mb) == minibatch_of(lo, n, mb))
                hi++;
            deal_group(seqs, lo, hi, dp, sc->cell, sc->heap, rank);
        }
    } else {
        deal_group(seqs, 0, n, dp, sc->cell, sc->heap, rank);
    }
}

/* Why seqs cannot be dealt to dp ranks in micro-batches of micro_batch_tokens, or 0. */
static int deal_check(const struct cost_train_seqs *seqs, int dp, int minibatches,
                      double micro_batch_tokens)
{
    if (dp < 1 || minibatches < 1 || micro_batch_tokens <= 0.0)
        return LIBRA_EINVAL;
    if (seqs->longest_tokens > micro_batch_tokens || seqs->n < (size_t)dp * (size_t)minibatches)
        return LIBRA_EINFEAS;
    return 0;
}

int cost_train_deal_ranks(const struct cost_train_seqs *seqs, const struct cost_shape *s, int dp,
                          int minibatches, double micro_batch_tokens, bool balance_each_minibatch,
                          const uint32_t *rank, struct cost_train_scratch *sc,
                          struct cost_train_load *out)
{
    int rc = deal_check(seqs, dp, minibatches, micro_batch_tokens);
    if (rc)
        return rc;
    size_t n = seqs->n, mb = (size_t)minibatches, ranks = (size_t)dp;
    scratch_reserve(sc, mb * ranks, n, ranks);
    if (!balance_each_minibatch) { /* a rank's share of the step, split in order below */
        memset(sc->count, 0, ranks * sizeof *sc->count);
        for (size_t i = 0; i < n; i++)
            sc->count[rank[i]]++;
    }

    /* accumulate each (mini-batch, rank) cell */
    memset(sc->cell, 0, mb * ranks * sizeof *sc->cell);
    uint32_t *seen = sc->heap; /* per rank: the dealing's heap space */
    memset(seen, 0, ranks * sizeof *seen);
    double half = micro_batch_tokens / 2.0, attn_total = 0.0;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rank[i];
        size_t m = balance_each_minibatch ? minibatch_of(i, n, mb)
                                          : minibatch_of(seen[r]++, sc->count[r], mb);
        double attn = seqs->work[i] - 2.0 * s->params_active * seqs->tokens[i];
        attn_total += attn;
        cell_add(&sc->cell[m * ranks + r], seqs->tokens[i], seqs->work[i], attn, half);
    }

    memset(out, 0, sizeof *out);
    out->dp = dp;
    out->minibatches = minibatches;
    out->micro_batch_tokens = micro_batch_tokens;
    out->tokens = seqs->total_tokens;
    out->work = seqs->total_work;
    out->attn_work = attn_total;
    out->longest_tokens = seqs->longest_tokens;
    for (size_t m = 0; m < mb; m++) {
        const struct cost_train_cell *row = &sc->cell[m * ranks], *worst = row;
        double micro = 0.0;
        for (size_t r = 0; r < ranks; r++) {
            if (row[r].work > worst->work)
                worst = &row[r];
            micro = fmax(micro, fmax(ceil(row[r].tokens / micro_batch_tokens), row[r].big));
        }
        out->work_max += worst->work;
        out->tokens_max += worst->tokens;
        out->attn_work_max += worst->attn;
        out->microbatches += micro;
    }
    return 0;
}

int cost_train_deal(const struct cost_train_seqs *seqs, const struct cost_shape *s, int dp,
                    int minibatches, double micro_batch_tokens, bool balance_each_minibatch,
                    struct cost_train_scratch *sc, struct cost_train_load *out)
{
    int rc = deal_check(seqs, dp, minibatches, micro_batch_tokens);
    if (rc)
        return rc;
    /* grown first, so that sc->rank stays where it is through both calls */
    scratch_reserve(sc, (size_t)minibatches * (size_t)dp, seqs->n, (size_t)dp);
    cost_train_assign(seqs, dp, minibatches, balance_each_minibatch, sc, sc->rank);
    return cost_train_deal_ranks(seqs, s, dp, minibatches, micro_batch_tokens,
                                 balance_each_minibatch, sc->rank, sc, out);
}

/* ---- step time ------------------------------------------------------------------------------ */

/* c's expert parallel size (0 means 1). */
static int ep_of(const struct cost_train_config *c)
{
    return c->ep > 1 ? c->ep : 1;
}

static int layout_fault(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int layout_fault(char *why, size_t size, const char *fmt, ...)
{
    if (why && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, size, fmt, ap);
        va_end(ap);
    }
    return LIBRA_EINVAL;
}

int cost_train_config_check(const struct cost_shape *s, const struct cost_train_config *c,
                            const char *model, char *why, size_t size)
{
    if (c->tp < 1 || c->pp < 1 || c->cp < 1 || c->dp < 1 || c->minibatches < 1 ||
        c->micro_batch_tokens <= 0.0 || c->zero_stage < 0 || c->zero_stage > 3 || c->shard_dp < 0 ||
        (c->shard_dp && c->dp % c->shard_dp != 0) || c->ep < 0)
        return layout_fault(why, size, "an invalid training layout");
    /* Megatron splits the KV heads (query groups) over TP as it splits the heads */
    if (fmod(s->heads, c->tp) != 0.0 || fmod(s->kv_heads, c->tp) != 0.0 || c->pp > s->layers)
        return layout_fault(why, size,
                            "training layout tp %d pp %d cp %d dp %d does not suit %s (tp must "
                            "divide its %.0f heads and its %.0f KV heads, pp at most its %.0f "
                            "layers)",
                            c->tp, c->pp, c->cp, c->dp, model, s->heads, s->kv_heads, s->layers);
    int ep = ep_of(c);
    if (ep > 1 && !s->moe)
        return layout_fault(why, size, "ep %d: %s is dense (expert parallelism needs an MoE model)",
                            ep, model);
    if (ep > 1 && (fmod(s->experts, ep) != 0.0 || (c->tp * c->cp * c->dp) % ep != 0))
        return layout_fault(why, size,
                            "ep %d must divide the %d GPUs of a pipeline stage (tp·cp·dp) and "
                            "the %.0f experts of %s",
                            ep, c->tp * c->cp * c->dp, s->experts, model);
    if (ep > 1 && c->shard_dp && c->shard_dp != c->dp)
        return layout_fault(why, size, "ep %d with hybrid sharding (HSDP) is not modelled", ep);
    return 0;
}

static int check_config(const struct cost_shape *s, const struct cost_train_config *c)
{
    return cost_train_config_check(s, c, "the model", NULL, 0);
}

/* Ring collective time: steps·(bytes/bw) + α, where a ring all-reduce moves 2(n−1)/n of the
 * bytes and a reduce-scatter or all-gather (n−1)/n. */
static double ring_s(double share, double bytes, double bw, double latency_s)
{
    return share * bytes / bw + latency_s;
}

/* Bandwidth of a group of `span` consecutive GPUs: NVLink bus inside a node, else the NICs. */
static double group_bw(const struct spec_hardware *hw, int span)
{
    return span <= hw->gpus_per_node ? hw->allreduce_bus_bw_bytes_per_s
                                     : hw->inter_node_bw_bytes_per_s;
}

/* GPUs c's sharded dense state is split over: the data-parallel group with its context-parallel
 * ranks, which hold the same weights and reduce their gradients together (Megatron's
 * distributed optimizer shards over its intra_dp_cp_group, megatron/core/optimizer/__init__.py;
 * verl's FSDP mesh spans its Ulysses ranks) — all DP ranks unless hybrid sharding. */
static int shard_ranks(const struct cost_train_config *c)
{
    return (c->shard_dp ? c->shard_dp : c->dp) * c->cp;
}

/* Parameters one GPU holds of c's model. Without EP all of them are `dense`, split by TP and PP.
 * Under EP (Megatron's MoE parallel folding with expert TP 1) the tp·cp·dp GPUs of a pipeline
 * stage hold each layer's routed experts in groups of ep consecutive GPUs, 1/ep of them each, so
 * the stage's GPUs ep apart hold the same experts and share their sharded state. */
struct gpu_params {
    double dense, expert;
    int shard;        /* DP ranks the dense state is sharded over */
    int expert_shard; /* GPUs that hold the same experts (ep apart) */
};

static struct gpu_params gpu_params(const struct cost_shape *s, const struct cost_train_config *c)
{
    int ep = ep_of(c), tp_pp = c->tp * c->pp, stage = c->tp * c->cp * c->dp;
    double experts = ep > 1 ? s->layers * s->experts * s->expert_params : 0.0;
    return (struct gpu_params){(s->params_total - experts) / tp_pp, experts / ((double)c->pp * ep),
                               shard_ranks(c), stage / ep};
}

/* The DP gradient synchronisation of one mini-batch over `ranks` GPUs `stride` apart whose
 * state is sharded over groups of `shard`: a ring all-reduce without sharding, else a
 * reduce-scatter inside each shard group (plus an all-gather of the updated weights unless
 * ZeRO-3 gathers them anyway) and, across groups, an all-reduce of each rank's shard. */
static double dp_sync_s(const struct spec_hardware *hw, const struct cost_train_config *c,
                        int ranks, int shard, double stride, double grads, double weights)
{
    double alpha = hw->allreduce_latency_s;
    double bw = group_bw(hw, (int)(stride * ranks)), shard_bw = group_bw(hw, (int)(stride * shard));
    if (!(c->zero_stage >= 1 || c->distributed_optimizer))
        return ring_s(2.0 * (ranks - 1.0) / ranks, grads, bw, alpha);
    double share = (shard - 1.0) / shard, groups = (double)ranks / shard;
    double t = shard > 1 ? ring_s(share, grads, shard_bw, alpha) : 0.0;
    if (c->zero_stage != 3 && shard > 1)
        t += ring_s(share, weights, shard_bw, alpha);
    if (groups > 1)
        t += ring_s(2.0 * (groups - 1.0) / groups, grads / shard, bw, alpha);
    return t;
}

/* One all-to-all of EP: each GPU sends the top-k copies of its share of a replica's `tokens`
 * (TP·CP split them) that go to the ep − 1 other GPUs of its group — ep consecutive GPUs, on its
 * node up to the node's size — over NVLink on the node and the NICs off it, both at once. */
static double a2a_s(const struct spec_hardware *hw, const struct cost_shape *s,
                    const struct cost_train_params *p, const struct cost_train_config *c,
                    double tokens)
{
    int ep = ep_of(c), local = ep < hw->gpus_per_node ? ep : hw->gpus_per_node;
    double bytes = tokens / (c->tp * c->cp) * s->top_k * s->hidden * p->act_bytes / ep; /* each */
    double on_node = (local - 1.0) * bytes / hw->allreduce_bus_bw_bytes_per_s;
    double off_node = (ep - local) * bytes / hw->inter_node_bw_bytes_per_s;
    return fmax(on_node, off_node);
}

int cost_train_step_time(const struct cost_shape *s, const struct spec_hardware *hw,
                         const struct cost_train_params *p, const struct cost_train_config *c,
                         const struct cost_train_load *load, struct cost_train_step *out)
{
    if (check_config(s, c) || load->dp != c->dp || load->minibatches != c->minibatches)
        return LIBRA_EINVAL;
    memset(out, 0, sizeof *out);
    int tp = c->tp, pp = c->pp, cp = c->cp, dp = c->dp;
    double replica = (double)tp * pp * cp, gpus = replica * dp;
    double flops_s = hw->bf16_flops_per_s * p->mfu, alpha = hw->allreduce_latency_s;
    double micro = load->microbatches, per_minibatch = micro / c->minibatches;

    out->k_update = 6.0;
    out->k_recompute = c->full_recompute ? 2.0 : 0.0;
    out->k_old_logprob = c->old_logprob ? 2.0 : 0.0;
    out->k_reference = c->reference ? 2.0 : 0.0;
    double fwd = (out->k_update + out->k_recompute + out->k_old_logprob + out->k_reference) / 2.0;
    double passes = 1.0 + c->old_logprob + c->reference; /* separate sweeps over the data */
    out->flops = fwd * load->work;
    out->flops_attn = fwd * load->attn_work;
    out->imbalance = load->work_max * dp / load->work;

    /* the most loaded rank of every mini-batch, its work split over TP·CP·PP GPUs */
    out->compute_s = fwd * load->work_max / (replica * flops_s);
    double attn_s = fwd * load->attn_work_max / (replica * flops_s);

    /* TP: 2 all-reduces per layer per forward sweep (incl. recompute), 2 in the backward */
    double layers_stage = s->layers / pp;
    double fwd_sweeps = 1.0 + c->full_recompute + c->old_logprob + c->reference;
    if (tp > 1) {
        double ars = 2.0 * fwd_sweeps + 2.0;
        double bytes = load->tokens_max / cp * s->hidden * p->act_bytes;
        out->tp_comm_s =
            ars * layers_stage * (micro * alpha + 2.0 * (tp - 1) / tp * bytes / group_bw(hw, tp));
    }
    /* CP: each rank passes its K,V shard around the ring, per layer and sweep (twice in
     * backward); hidden behind the attention it feeds where that is longer */
    if (cp > 1) {
        double kv_bytes = load->tokens_max / cp * 2.0 * s->kv_dim * p->act_bytes / tp;
        double ring = fwd * s->layers * (cp - 1) * kv_bytes / group_bw(hw, tp * cp);
        out->cp_comm_s = fmax(0.0, ring - attn_s);
    }
    /* EP: each GPU's tokens to their experts and back, per layer and forward sweep, twice in
     * the backward */
    if (ep_of(c) > 1) {
        double a2as = 2.0 * fwd_sweeps + 2.0;
        out->ep_comm_s =
            a2as * layers_stage * (micro * alpha + a2a_s(hw, s, p, c, load->tokens_max));
    }
    /* PP: 1F1B fill and drain of every mini-batch, and activation sends between stages */
    if (pp > 1) {
        double stage_work = out->compute_s + out->tp_comm_s + out->cp_comm_s + out->ep_comm_s;
        out->pp_bubble_s = (pp - 1) * stage_work / per_minibatch;
        double mb_bytes = load->tokens_max / micro / cp * s->hidden * p->act_bytes / tp;
        double sends = (2.0 + c->old_logprob + c->reference) * (micro + c->minibatches * (pp - 1));
        out->pp_p2p_s = sends * (alpha + mb_bytes / group_bw(hw, tp * cp * pp));
    }

    /* DP: gradients reduced once per mini-batch over the DP·CP ranks (every CP rank holds a
     * part of its sequences' gradients), tp·pp GPUs apart, part of it hidden behind backward;
     * under EP the experts' among the GPUs that hold the same ones (ep apart), and so gathered
     * under ZeRO-3 */
    struct gpu_params g = gpu_params(s, c);
    bool shard_opt = c->zero_stage >= 1 || c->distributed_optimizer;
    double sync = 0.0, gather = 0.0, apart = (double)tp * pp;
    if (dp * cp > 1) {
        sync = dp_sync_s(hw, c, dp * cp, g.shard, apart, g.dense * p->grad_bytes,
                         g.dense * p->weight_bytes);
        if (c->zero_stage == 3 && g.shard > 1)
            gather = ring_s((g.shard - 1.0) / g.shard, g.dense * p->weight_bytes,
                            group_bw(hw, (int)(apart * g.shard)), alpha);
    }
    if (g.expert > 0.0 && g.expert_shard > 1) {
        int es = g.expert_shard, ep = ep_of(c);
        sync += dp_sync_s(hw, c, es, es, ep, g.expert * p->grad_bytes, g.expert * p->weight_bytes);
        if (c->zero_stage == 3)
            gather +=
                ring_s((es - 1.0) / es, g.expert * p->weight_bytes, group_bw(hw, ep * es), alpha);
    }
    out->dp_comm_s = c->minibatches * (1.0 - p->dp_overlap) * sync;
    if (gather > 0.0)
        out->zero3_gather_s =
            micro * fmax(0.0, gather * (fwd_sweeps + 1.0) - out->compute_s / micro);
    double opt_params =
        shard_opt ? g.dense / g.shard + g.expert / g.expert_shard : g.dense + g.expert;
    double opt_bytes = opt_params * (2.0 * p->optimizer_bytes + p->grad_bytes + p->weight_bytes);
    out->optimizer_s = c->minibatches * opt_bytes / (hw->hbm_bw_bytes_per_s * p->optimizer_bw_eff);
    out->microbatch_s = passes * micro * p->t_microbatch_s;

    out->step_s = out->compute_s + out->pp_bubble_s + out->pp_p2p_s + out->tp_comm_s +
                  out->cp_comm_s + out->dp_comm_s + out->zero3_gather_s + out->optimizer_s +
                  out->microbatch_s + out->ep_comm_s;
    out->mfu_effective = out->flops / (gpus * hw->bf16_flops_per_s * out->step_s);
    return 0;
}

/* ---- memory --------------------------------------------------------------------------------- */

int cost_train_memory(const struct cost_shape *s, const struct spec_hardware *hw,
                      const struct cost_train_params *p, const struct cost_train_config *c,
                      struct cost_train_memory *out)
{
    if (check_config(s, c))
        return LIBRA_EINVAL;
    memset(out, 0, sizeof *out);
    int tp = c->tp;
    struct gpu_params g = gpu_params(s, c);
    bool z3 = c->zero_stage == 3, z2 = c->zero_stage >= 2;
    bool shard_opt = c->zero_stage >= 1 || c->distributed_optimizer;
    out->weights_bytes = g.dense * p->weight_bytes / (z3 ? g.shard : 1) +
                         g.expert * p->weight_bytes / (z3 ? g.expert_shard : 1);
    out->grads_bytes = g.dense * p->grad_bytes / (z2 ? g.shard : 1) +
                       g.expert * p->grad_bytes / (z2 ? g.expert_shard : 1);
    out->optimizer_bytes = g.dense * p->optimizer_bytes / (shard_opt ? g.shard : 1) +
                           g.expert * p->optimizer_bytes / (shard_opt ? g.expert_shard : 1);

    /* activations kept per token per layer (bf16): residual and norm outputs, Q, K, V, the
     * attention output, and the MLP's gate, up, activation and product; TP (with sequence
     * parallelism) splits all of them. The first stage holds pp micro-batches of L/pp layers. */
    double h = s->hidden, attn = 2.0 * h * s->q_dim + 2.0 * h * s->kv_dim;
    double ffn = (s->layer_params - attn) / (3.0 * h);
    double layer_elems = 4.0 * h + 2.0 * s->q_dim + 2.0 * s->kv_dim + 4.0 * ffn;
    double tokens = c->micro_batch_tokens / c->cp;
    double per_layer = tokens * layer_elems * p->act_bytes / tp;
    out->activations_bytes = c->full_recompute
                                 ? s->layers * tokens * h * p->act_bytes / tp + per_layer
                                 : s->layers * per_layer;
    out->logits_bytes = tokens * s->vocab / tp * 4.0 * p->logits_factor;
    out->workspace_bytes = p->workspace_bytes;
    out->total_bytes = out->weights_bytes + out->grads_bytes + out->optimizer_bytes +
                       out->activations_bytes + out->logits_bytes + out->workspace_bytes;
    out->capacity_bytes = hw->hbm_bytes * (1.0 - p->margin_frac);
    out->headroom_bytes = out->capacity_bytes - out->total_bytes;
    out->fits = out->headroom_bytes >= 0.0;
    return 0;
}
