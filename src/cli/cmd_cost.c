/*
 * `libra cost`: what the cost model answers for a hardware and model preset — decode iteration
 * times by TP and batch, KV capacity, and the time and memory of one training step for a
 * layout — so a user can sanity-check the numbers the planner and simulator will use.
 * `libra cost calibration` prints the evidence table that docs/calibration.md embeds.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cost/calib.h"
#include "cost/rollout.h"
#include "cost/shape.h"
#include "cost/train.h"
#include "util/alloc.h"

#define SCHEMA "libra.cost/2"

static const char help[] =
    "usage: libra cost [CONFIG] [flags]\n"
    "       libra cost calibration [-o FILE]\n"
    "\n"
    "Prints the cost model's answers for the config's hardware and model: the memory per GPU\n"
    "it takes (as the device reports it) and that figure's source, the decode iteration time\n"
    "by tensor-parallel size and batch at --context-tokens of context per sequence (and the\n"
    "generated tokens per second per GPU), the KV capacity of an instance, and the time and\n"
    "per-GPU memory of one training step of rl.batch_trajectories sequences of --seq-tokens\n"
    "tokens on the layout given by the training flags. The step deals single sequences, not\n"
    "GRPO groups: --batch takes any number, and rl.samples is not read (--samples other than\n"
    "its default is refused). --json prints one document (schema libra.cost/2), which also\n"
    "splits each decode time by kernel class and gives one layer's linear operators at 1 to\n"
    "8192 tokens. `calibration` prints the calibration table (docs/calibration.md).\n"
    "MoE models compute with their active parameters and hold their total parameters; an\n"
    "inference iteration streams every expert its tokens select (uniform routing); in\n"
    "training, --ep splits each layer's experts over that many GPUs, which exchange their\n"
    "tokens' top-k copies (all-to-all).\n"
    "\n"
    "training layout:\n"
    "  --tp N                        tensor parallel size (default: the largest of 4, 2, 1\n"
    "                                that fits a node and the cluster and divides the\n"
    "                                model's heads)\n"
    "  --pp N, --cp N                pipeline and context parallel sizes (1, 1)\n"
    "  --dp N                        data-parallel replicas (default: the most that the GPUs\n"
    "                                left and the sequences of a mini-batch allow, with --ep\n"
    "                                dividing TP·CP·DP; a default below TP 4 or the GPUs\n"
    "                                left is noted under the step)\n"
    "  --ep N                        expert parallel size (MoE: divides TP·CP·DP and the\n"
    "                                experts; the experts are then not split by TP) (1)\n"
    "  --micro-batch-tokens N        token budget of a micro-batch per replica (32768)\n"
    "  --minibatches N               optimizer steps per training step (1)\n"
    "  --zero N                      ZeRO stage 0-3, sharding over the DP·CP ranks (1)\n"
    "  --no-recompute                keep activations (default: full recompute)\n"
    "  --no-old-logprob              the trainer does not recompute old log-probs\n"
    "  --reference                   add a reference-model forward (KL)\n"
    "  --balance-minibatch           balance every mini-batch across DP ranks\n"
    "  --seq-tokens N                tokens of every training sequence (8192)\n"
    "rollout:\n"
    "  --context-tokens N            context per decoding sequence (4096)\n";

enum {
    OPT_TP = 0x100,
    OPT_PP,
    OPT_CP,
    OPT_DP,
    OPT_EP,
    OPT_MICRO,
    OPT_MINIBATCHES,
    OPT_ZERO,
    OPT_NO_RECOMPUTE,
    OPT_NO_OLD_LOGPROB,
    OPT_REFERENCE,
    OPT_BALANCE,
    OPT_SEQ_TOKENS,
    OPT_CONTEXT,
};

static const struct option own_options[] = {
    {"tp", required_argument, NULL, OPT_TP},
    {"pp", required_argument, NULL, OPT_PP},
    {"cp", required_argument, NULL, OPT_CP},
    {"dp", required_argument, NULL, OPT_DP},
    {"ep", required_argument, NULL, OPT_EP},
    {"micro-batch-tokens", required_argument, NULL, OPT_MICRO},
    {"minibatches", required_argument, NULL, OPT_MINIBATCHES},
    {"zero", required_argument, NULL, OPT_ZERO},
    {"no-recompute", no_argument, NULL, OPT_NO_RECOMPUTE},
    {"no-old-logprob", no_argument, NULL, OPT_NO_OLD_LOGPROB},
    {"reference", no_argument, NULL, OPT_REFERENCE},
    {"balance-minibatch", no_argument, NULL, OPT_BALANCE},
    {"seq-tokens", required_argument, NULL, OPT_SEQ_TOKENS},
    {"context-tokens", required_argument, NULL, OPT_CONTEXT},
    {0},
};

static const int batches[] = {1, 8, 32, 64, 128, 256};
#define N_BATCHES (sizeof batches / sizeof batches[0])
/* tokens of the per-layer linear times in --json: decode batches, then prefill chunks */
static const int linear_tokens[] = {1, 8, 32, 64, 128, 256, 512, 2048, 8192};
#define N_LINEAR (sizeof linear_tokens / sizeof linear_tokens[0])
#define MAX_TP 8
#define DEFAULT_TP 4 /* the training TP when --tp is not given and it fits */
#define GIB 1073741824.0

struct opts {
    struct cost_train_config train; /* tp, dp 0 until given or defaulted */
    long seq_tokens;
    long context_tokens;
    bool tp_given, dp_given;
    bool narrowed; /* a defaulted TP or DP is below its nominal value (TP 4, all GPUs left) */
};

/* Parses --flag's value as an integer in [lo, hi]; prints the usage error otherwise. */
static int int_flag(const struct cli_common *cc, const char *flag, const char *arg, long lo,
                    long hi, long *out)
{
    char name[64];
    int64_t v = 0;
    snprintf(name, sizeof name, "--%s", flag);
    int rc = cli_parse_int(cc->cmd, name, arg, lo, hi, &v);
    *out = (long)v;
    return rc;
}

static int own_flag(const struct cli_common *cc, int c, struct opts *o)
{
    struct cost_train_config *t = &o->train;
    long v = 0;
    int rc = 0;
    switch (c) {
    case OPT_TP:
    case OPT_PP:
    case OPT_CP:
    case OPT_DP:
    case OPT_EP:
    case OPT_MINIBATCHES: {
        int *field[] = {&t->tp, &t->pp, &t->cp, &t->dp, &t->ep, NULL, &t->minibatches};
        rc = int_flag(cc, own_options[c - OPT_TP].name, optarg, 1, 65536, &v);
        *field[c - OPT_TP] = (int)v;
        return rc;
    }
    case OPT_MICRO:
        rc = int_flag(cc, "micro-batch-tokens", optarg, 1, INT64_C(1) << 31, &v); /* as logs */
        t->micro_batch_tokens = (double)v;
        return rc;
    case OPT_ZERO:
        rc = int_flag(cc, "zero", optarg, 0, 3, &v);
        t->zero_stage = (int)v;
        return rc;
    case OPT_SEQ_TOKENS:
        return int_flag(cc, "seq-tokens", optarg, 1, UINT32_MAX, &o->seq_tokens);
    case OPT_CONTEXT:
        return int_flag(cc, "context-tokens", optarg, 0, UINT32_MAX, &o->context_tokens);
    case OPT_NO_RECOMPUTE:
        t->full_recompute = false;
        return 0;
    case OPT_NO_OLD_LOGPROB:
        t->old_logprob = false;
        return 0;
    case OPT_REFERENCE:
        t->reference = true;
        return 0;
    case OPT_BALANCE:
        t->balance_each_minibatch = true;
        return 0;
    default:
        return LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
}

/* ---- the model's answers ------------------------------------------------------------------- */

struct tp_row {
    int tp;
    struct cost_rollout_pre pre;
    struct cost_iter_parts decode[N_BATCHES]; /* by kernel class; total_s the iteration */
};

struct answers {
    const struct spec_hardware *hw;
    const struct spec_model *model;
    struct cost_shape shape;
    struct cost_rollout_params rp;
    struct tp_row rows[4];
    int n_rows;
    struct cost_train_params tp;
    struct cost_train_load load;
    struct cost_train_step step;
    struct cost_train_memory mem;
    size_t n_seqs;
    int gpus; /* the cluster's */
};

/* Joins the names that are not NULL as "a, b or c" into buf: the flags a refusal asks to
 * change. */
static const char *flag_list(char *buf, size_t size, const char *const names[], size_t n)
{
    size_t left = 0, len = 0;
    for (size_t i = 0; i < n; i++)
        left += names[i] != NULL;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++) {
        if (!names[i])
            continue;
        left--;
        len += (size_t)snprintf(buf + len, size - len, "%s%s",
                                len == 0    ? ""
                                : left == 0 ? " or "
                                            : ", ",
                                names[i]);
    }
    return buf;
}

static void rollout_answers(struct answers *a, double context)
{
    cost_rollout_params_default(&a->rp, a->hw);
    for (int tp = 1; tp <= MAX_TP && tp <= a->hw->gpus_per_node; tp *= 2) {
        struct tp_row *r = &a->rows[a->n_rows];
        if (cost_rollout_pre_init(&r->pre, &a->shape, a->hw, &a->rp, tp))
            continue; /* TP does not divide the heads */
        r->tp = tp;
        for (size_t b = 0; b < N_BATCHES; b++) {
            struct cost_batch batch = {.decode_seqs = batches[b],
                                       .decode_ctx_tokens = batches[b] * context};
            cost_iter_parts(&r->pre, &batch, &r->decode[b]);
        }
        a->n_rows++;
    }
}

/* Says why the sequences could not be dealt, naming the flags that would change it. */
static void deal_refusal(const struct answers *a, const struct opts *o)
{
    const struct cost_train_config *c = &o->train;
    if (o->seq_tokens > c->micro_batch_tokens) {
        cli_errorf("cost: sequences of %ld tokens do not fit a micro-batch of %.0f tokens; "
                   "change --seq-tokens or --micro-batch-tokens",
                   o->seq_tokens, c->micro_batch_tokens);
        return;
    }
    char flags[64];
    const char *names[] = {o->dp_given ? "--dp" : NULL, c->minibatches > 1 ? "--minibatches" : NULL,
                           "--batch"};
    cli_errorf("cost: %zu sequences do not fit: each of %d DP ranks needs a sequence in each of "
               "%d mini-batches; change %s",
               a->n_seqs, c->dp, c->minibatches, flag_list(flags, sizeof flags, names, 3));
}

/* Deals the training sequences; returns 0 or an exit code after printing why. */
static int train_answers(struct answers *a, const struct opts *o)
{
    const struct cost_train_config *c = &o->train;
    char why[240];
    cost_train_params_for(&a->tp, a->hw);
    if (cost_train_config_check(&a->shape, c, a->model->name, why, sizeof why)) {
        char flags[64];
        const char *names[] = {o->tp_given ? "--tp" : NULL, c->pp > 1 ? "--pp" : NULL,
                               c->cp > 1 ? "--cp" : NULL,   o->dp_given ? "--dp" : NULL,
                               c->ep > 1 ? "--ep" : NULL,   "--model"};
        cli_errorf("cost: %s; change %s", why, flag_list(flags, sizeof flags, names, 6));
        return LIBRA_EXIT_USAGE;
    }
    if (cost_train_memory(&a->shape, a->hw, &a->tp, c, &a->mem))
        return LIBRA_EXIT_INTERNAL; /* the layout was checked */
    uint32_t *len = xmallocarray(a->n_seqs, sizeof *len);
    for (size_t i = 0; i < a->n_seqs; i++)
        len[i] = (uint32_t)o->seq_tokens;
    struct cost_train_seqs seqs;
    struct cost_train_scratch sc = {0};
    cost_train_seqs_init(&seqs, &a->shape, len, a->n_seqs);
    free(len);
    int rc = cost_train_deal(&seqs, &a->shape, c->dp, c->minibatches, c->micro_batch_tokens,
                             c->balance_each_minibatch, &sc, &a->load);
    cost_train_seqs_free(&seqs);
    cost_train_scratch_free(&sc);
    if (rc == LIBRA_EINFEAS) {
        deal_refusal(a, o);
        return LIBRA_EXIT_USAGE;
    }
    cost_train_step_time(&a->shape, a->hw, &a->tp, c, &a->load, &a->step);
    return 0;
}

/* ---- output -------------------------------------------------------------------------------- */

static bool fits_kv(const struct tp_row *r, int b, double context)
{
    return batches[b] * (context + 1.0) <= r->pre.kv_capacity_tokens;
}

static void print_rollout(FILE *out, const struct answers *a, double context)
{
    fprintf(out, "%s on %s%s\n", a->model->name, a->hw->name,
            a->shape.moe ? " (MoE: decode streams the experts its batch selects, training "
                           "computes with the active parameters)"
                         : "");
    fprintf(out, "memory per GPU: %.0f bytes (%.2f GiB), source: %s\n\n", a->hw->hbm_bytes,
            a->hw->hbm_bytes / GIB, a->hw->hbm_source);
    fprintf(out,
            "decode iteration, ms (generated tokens/s per GPU), %.0f tokens of context per "
            "sequence\n",
            context);
    fprintf(out, "%3s %12s %9s", "TP", "KV tokens", "GB/GPU");
    for (size_t b = 0; b < N_BATCHES; b++)
        fprintf(out, " %15s%-3d", "B=", batches[b]);
    fputc('\n', out);
    for (int i = 0; i < a->n_rows; i++) {
        const struct tp_row *r = &a->rows[i];
        fprintf(out, "%3d %12.0f %9.1f", r->tp, r->pre.kv_capacity_tokens,
                r->pre.weight_bytes_per_gpu / 1e9);
        for (size_t b = 0; b < N_BATCHES; b++) {
            char cell[40];
            snprintf(cell, sizeof cell, "%.2f (%.0f)%s", r->decode[b].total_s * 1e3,
                     batches[b] / r->decode[b].total_s / r->tp,
                     fits_kv(r, (int)b, context) ? "" : "*");
            fprintf(out, " %18s", cell);
        }
        fputc('\n', out);
    }
    char fix[CLI_CONSTANT_SOURCE_MAX], seq[CLI_CONSTANT_SOURCE_MAX];
    fprintf(out,
            "* batch × context exceeds the instance's KV capacity\n"
            "constants: t_fix %.2f ms (%s), t_seq %.0f us (%s), eta_kv %.2f (assumed), "
            "all-reduce %.0f us + %.0f GB/s; docs/calibration.md\n",
            a->rp.t_fix_s * 1e3,
            cli_constant_source(a->hw, a->hw->decode_t_fix_s, "fitted", "calibrated", fix),
            a->rp.t_seq_s * 1e6,
            cli_constant_source(a->hw, a->hw->decode_t_seq_s, "assumed", "calibrated", seq),
            a->rp.eta_kv, a->rp.ar_latency_s * 1e6, a->rp.ar_bus_bw_bytes_per_s / 1e9);
    if (a->hw->calibration[0])
        fprintf(out, "calibrated: %s\n", a->hw->calibration);
    fputc('\n', out);
}

/* Says which parts of the layout were defaulted when they are below their nominal values, so that
 * a TP or DP the user did not choose is not mistaken for the documented default. */
static void print_defaulted(FILE *out, const struct answers *a, const struct opts *o)
{
    const struct cost_train_config *c = &o->train;
    char parts[32];
    int len = o->tp_given ? 0 : snprintf(parts, sizeof parts, "TP %d", c->tp);
    if (!o->dp_given)
        snprintf(parts + len, sizeof parts - (size_t)len, "%sDP %d", len ? ", " : "", c->dp);
    fprintf(out,
            "  layout defaulted (no %s given): %s, the largest that fit the cluster (%d GPUs, "
            "%d per node), the model and the batch (%zu sequences per mini-batch)\n",
            o->tp_given   ? "--dp"
            : o->dp_given ? "--tp"
                          : "--tp, --dp",
            parts, a->gpus, a->hw->gpus_per_node, a->n_seqs / (size_t)c->minibatches);
}

static void print_train(FILE *out, const struct answers *a, const struct opts *o)
{
    const struct cost_train_config *c = &o->train;
    const struct cost_train_step *s = &a->step;
    const struct cost_train_memory *m = &a->mem;
    fprintf(out,
            "training step: TP %d PP %d CP %d DP %d EP %d (%d GPUs), %zu sequences of %ld tokens, "
            "micro-batch %.0f tokens, %d mini-batch(es), ZeRO %d\n",
            c->tp, c->pp, c->cp, c->dp, c->ep, c->tp * c->pp * c->cp * c->dp, a->n_seqs,
            o->seq_tokens, c->micro_batch_tokens, c->minibatches, c->zero_stage);
    if (o->narrowed)
        print_defaulted(out, a, o);
    fprintf(out,
            "  FLOPs per token: k = %g (update) + %g (recompute) + %g (old log-prob) + %g "
            "(reference) times N = %.3g, plus attention (%.0f %% of %.3g FLOPs)\n",
            s->k_update, s->k_recompute, s->k_old_logprob, s->k_reference, a->shape.params_active,
            100.0 * s->flops_attn / s->flops, s->flops);
    fprintf(out,
            "  step %.2f s = compute %.2f + PP bubble %.2f + PP p2p %.2f + TP %.2f + CP %.2f "
            "+ EP %.2f + DP %.2f + ZeRO-3 %.2f + optimizer %.2f + micro-batches %.2f\n",
            s->step_s, s->compute_s, s->pp_bubble_s, s->pp_p2p_s, s->tp_comm_s, s->cp_comm_s,
            s->ep_comm_s, s->dp_comm_s, s->zero3_gather_s, s->optimizer_s, s->microbatch_s);
    char mfu[CLI_CONSTANT_SOURCE_MAX];
    fprintf(out, "  rank imbalance %.3f, effective MFU %.3f (model MFU %.2f, %s)\n", s->imbalance,
            s->mfu_effective, a->tp.mfu,
            cli_constant_source(a->hw, a->hw->train_mfu, "assumed", "calibrated", mfu));
    fprintf(out,
            "memory per GPU, GB: weights %.1f + grads %.1f + optimizer %.1f + activations "
            "%.1f + logits %.1f + workspace %.1f = %.1f of %.1f: %s by %.1f GB\n",
            m->weights_bytes / 1e9, m->grads_bytes / 1e9, m->optimizer_bytes / 1e9,
            m->activations_bytes / 1e9, m->logits_bytes / 1e9, m->workspace_bytes / 1e9,
            m->total_bytes / 1e9, m->capacity_bytes / 1e9, m->fits ? "fits" : "does NOT fit",
            fabs(m->headroom_bytes) / 1e9);
}

static char *text_output(const struct answers *a, const struct opts *o)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort(); /* only when memory ran out, fatal as in util/alloc.h */
    print_rollout(out, a, (double)o->context_tokens);
    print_train(out, a, o);
    fclose(out);
    return text;
}

static json_t *parts_json(const struct cost_iter_parts *p)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "linear_s", p->linear_s, "head_s", p->head_s,
                     "attn_s", p->attn_s, "allreduce_s", p->allreduce_s, "fixed_s", p->fixed_s,
                     "seq_s", p->seq_s);
}

/* One layer's linear operators on one GPU by token count: what a GPU measurement can check. */
static json_t *linear_json(const struct tp_row *r)
{
    json_t *rows = json_array();
    for (size_t t = 0; t < N_LINEAR; t++)
        json_array_append_new(rows, json_pack("{s:i, s:f}", "tokens", linear_tokens[t], "seconds",
                                              cost_linear_layer_time(&r->pre, linear_tokens[t])));
    return rows;
}

static json_t *rollout_json(const struct answers *a, double context)
{
    json_t *tps = json_array();
    for (int i = 0; i < a->n_rows; i++) {
        const struct tp_row *r = &a->rows[i];
        json_t *decode = json_array();
        for (size_t b = 0; b < N_BATCHES; b++)
            json_array_append_new(
                decode, json_pack("{s:i, s:f, s:f, s:b, s:o}", "batch", batches[b], "iteration_s",
                                  r->decode[b].total_s, "tokens_per_s_per_gpu",
                                  batches[b] / r->decode[b].total_s / r->tp, "fits_kv",
                                  fits_kv(r, (int)b, context), "parts", parts_json(&r->decode[b])));
        json_array_append_new(tps, json_pack("{s:i, s:f, s:f, s:f, s:o, s:o}", "tp", r->tp,
                                             "kv_capacity_tokens", r->pre.kv_capacity_tokens,
                                             "kv_bytes_per_token", r->pre.kv_bytes_per_token,
                                             "weight_bytes_per_gpu", r->pre.weight_bytes_per_gpu,
                                             "decode", decode, "linear_layer", linear_json(r)));
    }
    json_t *constants = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "t_fix_s", a->rp.t_fix_s,
                                  "t_seq_s", a->rp.t_seq_s, "eta_kv", a->rp.eta_kv, "mfu_attn",
                                  a->rp.mfu_attn, "allreduce_latency_s", a->rp.ar_latency_s,
                                  "allreduce_bus_bw_bytes_per_s", a->rp.ar_bus_bw_bytes_per_s);
    return json_pack("{s:f, s:o, s:o}", "context_tokens", context, "constants", constants, "tp",
                     tps);
}

static json_t *train_json(const struct answers *a, const struct opts *o)
{
    const struct cost_train_config *c = &o->train;
    const struct cost_train_step *s = &a->step;
    const struct cost_train_memory *m = &a->mem;
    json_t *config =
        json_pack("{s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:i, s:b, s:b, s:b, s:b}", "tp", c->tp, "pp",
                  c->pp, "cp", c->cp, "dp", c->dp, "ep", c->ep, "micro_batch_tokens",
                  c->micro_batch_tokens, "minibatches", c->minibatches, "zero_stage", c->zero_stage,
                  "full_recompute", c->full_recompute, "old_logprob", c->old_logprob, "reference",
                  c->reference, "balance_each_minibatch", c->balance_each_minibatch);
    json_t *step = json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, "
        "s:f, s:f}",
        "step_s", s->step_s, "compute_s", s->compute_s, "pp_bubble_s", s->pp_bubble_s, "pp_p2p_s",
        s->pp_p2p_s, "tp_comm_s", s->tp_comm_s, "cp_comm_s", s->cp_comm_s, "ep_comm_s",
        s->ep_comm_s, "dp_comm_s", s->dp_comm_s, "zero3_gather_s", s->zero3_gather_s, "optimizer_s",
        s->optimizer_s, "microbatch_s", s->microbatch_s, "k_update", s->k_update, "k_recompute",
        s->k_recompute, "k_old_logprob", s->k_old_logprob, "k_reference", s->k_reference, "flops",
        s->flops, "flops_attn", s->flops_attn, "imbalance", s->imbalance, "mfu_effective",
        s->mfu_effective);
    json_t *mem = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b}", "weights_bytes",
                            m->weights_bytes, "grads_bytes", m->grads_bytes, "optimizer_bytes",
                            m->optimizer_bytes, "activations_bytes", m->activations_bytes,
                            "logits_bytes", m->logits_bytes, "workspace_bytes", m->workspace_bytes,
                            "total_bytes", m->total_bytes, "capacity_bytes", m->capacity_bytes,
                            "headroom_bytes", m->headroom_bytes, "fits", m->fits);
    return json_pack("{s:o, s:I, s:I, s:f, s:o, s:o}", "config", config, "sequences",
                     (json_int_t)a->n_seqs, "sequence_tokens", (json_int_t)o->seq_tokens, "mfu",
                     a->tp.mfu, "step", step, "memory", mem);
}

static json_t *json_output(const struct answers *a, const struct opts *o,
                           const struct libra_config *cfg)
{
    json_t *doc = spec_config_envelope(SCHEMA, cfg);
    json_object_set_new(doc, "hardware", json_string(a->hw->name));
    json_object_set_new(doc, "model", json_string(a->model->name));
    json_object_set_new(doc, "hbm",
                        json_pack("{s:f, s:f, s:s}", "bytes", a->hw->hbm_bytes, "gib",
                                  a->hw->hbm_bytes / GIB, "source", a->hw->hbm_source));
    json_object_set_new(doc, "moe", json_boolean(a->shape.moe));
    json_object_set_new(doc, "calibration",
                        a->hw->calibration[0] ? json_string(a->hw->calibration) : json_null());
    json_object_set_new(doc, "rollout", rollout_json(a, (double)o->context_tokens));
    json_object_set_new(doc, "training", train_json(a, o));
    return doc;
}

/* `cost calibration`: the tables depend on no config, preset or layout, so its flags are read
 * again with -o alone accepted, and any other is refused rather than ignored. */
static int calibration(struct cli_common *cc, int argc, char **argv)
{
    cli_common_free(cc);
    cli_common_init(cc, cli_find("cost"), CLI_FLAGS_OUTPUT, "", NULL);
    if (cli_common_getopt(cc, argc, argv) != -1)
        return LIBRA_EXIT_USAGE;
    char *md = cost_calibration_markdown();
    int rc = cli_write_output(cc->output, md);
    free(md);
    return rc;
}

/* TP when --tp is not given: the largest of 4, 2, 1 that a node holds, that divides the model's
 * heads and KV heads, and whose replicas (with --pp, --cp and any --dp) the cluster holds; 1
 * when none does, which resolve_layout then refuses naming the flags given. */
static int default_tp(const struct answers *a, const struct cost_train_config *t)
{
    long others = (long)t->pp * t->cp * (t->dp ? t->dp : 1); /* at most 2^48 */
    for (int tp = DEFAULT_TP; tp > 1; tp /= 2)
        if (tp <= a->hw->gpus_per_node && fmod(a->shape.heads, tp) == 0.0 &&
            fmod(a->shape.kv_heads, tp) == 0.0 && others <= a->gpus / tp)
            return tp;
    return 1;
}

/* DP when --dp is not given: the GPUs the replicas leave, at most the sequences of a mini-batch
 * (each rank needs one in each), the largest such that --ep divides a stage's TP·CP·DP GPUs.
 * When none does, the cap, which the checks refuse naming the flags. */
static int default_dp(const struct cost_train_config *t, long left, long per_minibatch)
{
    long cap = left < per_minibatch ? left : per_minibatch;
    long ep = t->ep > 1 ? t->ep : 1, stage = (long)t->tp * t->cp % ep; /* mod ep: no overflow */
    for (long dp = cap; dp >= 1; dp--) /* at most ep steps: a multiple of ep suits */
        if (stage * dp % ep == 0)
            return (int)dp;
    return cap < 1 ? 1 : (int)cap;
}

/* Completes the layout: TP and DP where not given, to fit the cluster, the model and the batch. */
static int resolve_layout(const struct cli_common *cc, struct opts *o, const struct answers *a)
{
    struct cost_train_config *t = &o->train;
    if (t->balance_each_minibatch && t->minibatches == 1)
        return cli_value_errorf(cc->cmd, "--balance-minibatch balances each of --minibatches N "
                                         "(> 1) mini-batches; one is the batch, balanced already");
    o->tp_given = t->tp != 0;
    o->dp_given = t->dp != 0;
    if (!o->tp_given)
        t->tp = default_tp(a, t);
    long replica = (long)t->tp * t->pp * t->cp; /* at most 2^48: each flag is at most 2^16 */
    long left = a->gpus / replica;
    if (!o->dp_given)
        t->dp = default_dp(t, left, (long)(a->n_seqs / (size_t)t->minibatches));
    o->narrowed = (!o->tp_given && t->tp < DEFAULT_TP) || (!o->dp_given && t->dp < left);
    /* compared by division: replica * DP may pass even 64 bits (2^16 each) */
    if (t->dp <= left)
        return 0;
    char flags[64];
    const char *names[] = {o->tp_given ? "--tp" : NULL, t->pp > 1 ? "--pp" : NULL,
                           t->cp > 1 ? "--cp" : NULL, o->dp_given ? "--dp" : NULL, "--gpus"};
    return cli_value_errorf(cc->cmd, "the layout needs %.0f GPUs, the cluster has %d; change %s",
                            (double)replica * t->dp, a->gpus,
                            flag_list(flags, sizeof flags, names, 5));
}

int cmd_cost(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("cost"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT, "",
                    own_options);
    struct opts o = {.train = {.pp = 1,
                               .cp = 1,
                               .ep = 1,
                               .micro_batch_tokens = 32768,
                               .minibatches = 1,
                               .zero_stage = 1,
                               .full_recompute = true,
                               .old_logprob = true},
                     .seq_tokens = 8192,
                     .context_tokens = 4096};
    struct api_presets p = {0};
    struct libra_config cfg;
    struct answers a = {0};
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            goto out;
        }
        rc = own_flag(&cc, c, &o);
    }
    const char *input = optind < argc ? argv[optind] : NULL;
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 1]);
    if (rc == 0 && input && strcmp(input, "calibration") == 0) {
        rc = calibration(&cc, argc, argv);
        goto out;
    }
    if (rc == 0)
        rc = cli_common_load(&cc, input, &p, &cfg);
    if (rc == 0) {
        a.hw = spec_hardware_find(&p.spec, cfg.cluster.hardware);
        a.model = spec_model_find(&p.spec, cfg.model.name);
        if (!a.hw || !a.model || cost_shape_init(&a.shape, a.model)) {
            cli_errorf("cost: internal: resolved presets '%s', '%s' are unusable",
                       cfg.cluster.hardware, cfg.model.name);
            rc = LIBRA_EXIT_INTERNAL;
        }
    }
    if (rc == 0) {
        a.n_seqs = (size_t)cfg.rl.batch_trajectories;
        a.gpus = cfg.cluster.gpus;
        rc = resolve_layout(&cc, &o, &a);
    }
    if (rc == 0) {
        rollout_answers(&a, (double)o.context_tokens);
        rc = train_answers(&a, &o);
    }
    if (rc == 0 && cc.json) {
        json_t *doc = json_output(&a, &o, &cfg);
        rc = cli_emit_json(&cc, doc);
        json_decref(doc);
    } else if (rc == 0) {
        char *text = text_output(&a, &o);
        rc = cli_write_output(cc.output, text);
        free(text);
    }
out:
    api_presets_free(&p);
    cli_common_free(&cc);
    return rc;
}
