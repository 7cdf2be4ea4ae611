/*
 * Plan export as a trainer's own settings: `verl` (Hydra overrides, key=value a line) and
 * `megatron` (Megatron-LM arguments, one a line). Lines starting with '#' are comments, so
 * $(grep -v '^#' FILE) puts the settings on a command line.
 *
 * The plan's micro-batch is a token budget per GPU (sequences packed up to it, times CP per
 * replica): verl's dynamic batch size (use_dynamic_bsz, ppo_max_token_len_per_gpu) is exactly
 * that; Megatron-LM counts micro-batches in sequences, so one packed sequence per micro-batch,
 * and the comment names the token flags of Megatron-based RL trainers (slime).
 *
 * verl starts every rollout engine with one TP size and places the same GPU count on every
 * node of a pool; where the plan differs (a heterogeneous fleet, a pool that is not whole
 * nodes) the output says what is lost and how to get the plan anyway.
 */
#include "plan/export_internal.h"
#include "util/error.h"

/* How a launcher that takes the same GPU count on every node (verl's pools, torchrun's
 * --nproc-per-node) lays out a pool of n GPUs on nodes of node_gpus: the largest count per
 * node that divides n and is a multiple of tp, so that no TP group straddles two nodes, as none
 * does in the plan (docs/planner.md). Whole nodes or one partial node are the plan's own
 * placement; a smaller count spreads the pool over more nodes. Returns LIBRA_EINVAL with err
 * set, naming the pool by what, when no count fits. */
static int pool_shape(int n, int node_gpus, int tp, const char *what, int *nodes, int *per_node,
                      struct libra_error *err)
{
    int d = n < node_gpus ? n : node_gpus;
    while (d > 0 && (n % d || (tp > 1 && d % tp))) /* any count holds TP 1 */
        d--;
    if (d <= 0) {
        error_set(err, NULL, 0, 0,
                  "the plan's %d %sGPUs have no count per node that divides them and is a "
                  "multiple of TP %d on nodes of %d, and every node of a pool takes the same count",
                  n, what, tp, node_gpus);
        return LIBRA_EINVAL;
    }
    *per_node = d;
    *nodes = n / d;
    return 0;
}

static int verl_pool(struct strbuf *b, const char *prefix, const char *what, int n, int node_gpus,
                     int tp, struct libra_error *err)
{
    int nodes, per_node;
    if (pool_shape(n, node_gpus, tp, what, &nodes, &per_node, err))
        return LIBRA_EINVAL;
    if (nodes != (n + node_gpus - 1) / node_gpus) /* more nodes than the plan's */
        strbuf_printf(b,
                      "# the plan's %d %sGPUs are not whole nodes of %d, and verl takes the same\n"
                      "# count on every node, a multiple of TP %d: %d nodes of %d\n",
                      n, what, node_gpus, tp, nodes, per_node);
    strbuf_printf(b, "%s.nnodes=%d\n%s.n_gpus_per_node=%d\n", prefix, nodes, prefix, per_node);
    return 0;
}

/*
 * The layers of the first and last of pp stages where pp does not divide layers (false where
 * it does: every stage takes layers / pp). Megatron builds layers / pp on each stage unless told
 * how to split them unevenly (Megatron-LM's --decoder-first/last-pipeline-num-layers, its
 * TransformerConfig's num_layers_in_first/last_pipeline_stage); the middle stages take
 * ceil(layers / pp), or its floor where that leaves the ends fewer than one each, and the ends
 * share the rest. The cost model charges every stage layers / pp, fractions kept: the stage
 * time it plans with is the mean of these.
 */
static bool uneven_stages(int layers, int pp, int *first, int *last)
{
    if (pp < 2 || layers % pp == 0)
        return false;
    int middle = (layers + pp - 1) / pp, rest = layers - middle * (pp - 2);
    if (rest < 2) {
        middle = layers / pp;
        rest = layers - middle * (pp - 2);
    }
    *first = rest / 2;
    *last = rest - *first;
    return true;
}

static void verl_training(struct strbuf *b, const struct export_ctx *x)
{
    const struct plan_train_layout *t = &x->plan->train;
    const char *actor = "actor_rollout_ref.actor";
    if (t->fsdp) {
        strbuf_printf(b,
                      "# training: FSDP, Ulysses sequence parallel %d (the plan's CP), DP %d\n"
                      "%s.strategy=fsdp\n"
                      "%s.ulysses_sequence_parallel_size=%d\n"
                      "actor_rollout_ref.model.enable_gradient_checkpointing=%s\n"
                      "# sharding: %s\n"
                      "%s.fsdp_config.fsdp_size=%d\n",
                      t->cp, t->dp, actor, actor, t->cp, t->recompute ? "True" : "False",
                      t->shard_dp ? "HSDP, one copy of the state per node" : "over every rank",
                      actor, t->shard_dp ? t->shard_dp * t->cp : -1);
    } else {
        const char *mc = "actor_rollout_ref.actor.megatron";
        strbuf_printf(b,
                      "# training: Megatron TP%d PP%d CP%d, DP %d (from the world size), "
                      "distributed optimizer\n"
                      "%s.strategy=megatron\n"
                      "%s.tensor_model_parallel_size=%d\n"
                      "%s.pipeline_model_parallel_size=%d\n"
                      "%s.context_parallel_size=%d\n"
                      "%s.use_distributed_optimizer=True\n",
                      t->tp, t->pp, t->cp, t->dp, actor, mc, t->tp, mc, t->pp, mc, t->cp, mc);
        if (t->recompute)
            strbuf_printf(b,
                          "%s.override_transformer_config.recompute_granularity=full\n"
                          "%s.override_transformer_config.recompute_method=uniform\n"
                          "%s.override_transformer_config.recompute_num_layers=1\n",
                          mc, mc, mc);
        else
            strbuf_printf(b, "%s.override_transformer_config.recompute_granularity=null\n", mc);
        int first, last;
        if (uneven_stages(x->model->layers, t->pp, &first, &last))
            strbuf_printf(b,
                          "# %d layers over PP %d: the first stage %d, the last %d\n"
                          "+%s.override_transformer_config.num_layers_in_first_pipeline_stage=%d\n"
                          "+%s.override_transformer_config.num_layers_in_last_pipeline_stage=%d\n",
                          x->model->layers, t->pp, first, last, mc, first, mc, last);
        if (t->ep > 1)
            strbuf_printf(b,
                          "# experts: each layer's split over %d GPUs, not tensor-split\n"
                          "%s.expert_model_parallel_size=%d\n"
                          "%s.expert_tensor_parallel_size=1\n",
                          t->ep, mc, t->ep, mc);
    }
    strbuf_printf(b,
                  "# micro-batches: sequences packed up to the plan's budget per GPU (times CP)\n"
                  "%s.use_dynamic_bsz=True\n"
                  "%s.ppo_max_token_len_per_gpu=%d\n",
                  actor, actor, t->budget_tokens);
}

/* The largest TP size of the fleet: the one verl gets, since it holds the longest requests. */
static int largest_tp(const struct plan_result *r)
{
    int tp = 1;
    for (int t = 0; t < PLAN_NTP; t++)
        if (r->counts[t])
            tp = 1 << t;
    return tp;
}

static void verl_rollout(struct strbuf *b, const struct export_ctx *x)
{
    const struct plan_result *r = x->plan;
    int tp = largest_tp(r), sizes = 0;
    for (int t = 0; t < PLAN_NTP; t++)
        sizes += r->counts[t] > 0;
    strbuf_puts(b, "# rollout: ");
    export_fleet(b, r);
    strbuf_puts(b, "\n");
    if (sizes > 1) {
        strbuf_printf(b,
                      "# verl starts every rollout engine with one TP size: below, %d engines "
                      "of TP%d,\n",
                      r->n_rollout / tp, tp);
        strbuf_puts(b,
                    "# the fleet's largest (it holds the longest requests), so the small-TP\n"
                    "# engines' throughput on short turns and the buckets C-MLFQ routes over are\n"
                    "# lost; verl updates the weights only of engines it started, so engines\n"
                    "# started apart do not help. Plan a fleet verl can start with\n"
                    "# libra plan --homogeneous-rollout (which says what this fleet would gain),\n"
                    "# or run this one with a trainer that starts several TP sizes\n"
                    "# (docs/export.md).\n");
    }
    strbuf_printf(b,
                  "actor_rollout_ref.rollout.tensor_model_parallel_size=%d\n"
                  "actor_rollout_ref.rollout.gpu_memory_utilization=%.4g\n",
                  tp, x->mem_fraction);
}

/* The TP a pool's groups keep on one node: the trainer's, and in a colocated plan also the
 * engines' that run on the same GPUs in turn (sizes are powers of two: the larger). */
static int trainer_tp(const struct plan_result *r)
{
    int tp = r->train.tp;
    return r->colocated && largest_tp(r) > tp ? largest_tp(r) : tp;
}

/* The verl entry point and config an export's overrides are for. verl's standard trainer
 * (verl.trainer.main_ppo) colocates training and rollout, and its configs
 * (verl/trainer/config/ppo_megatron_trainer.yaml, ppo_trainer.yaml) have no top-level rollout
 * group, so Hydra refuses rollout.* keys there; an async plan's separate pools are those of the
 * fully async trainer, whose configs (verl/experimental/fully_async_policy/config/
 * fully_async_ppo_megatron_trainer.yaml, fully_async_ppo_trainer.yaml) add rollout.nnodes and
 * rollout.n_gpus_per_node and whose main copies them into the rollout workers' config. */
static void verl_command(struct strbuf *b, const struct plan_result *r)
{
    const char *strategy = r->train.fsdp ? "ppo_trainer" : "ppo_megatron_trainer";
    strbuf_printf(b,
                  "#\n"
                  "# Hydra overrides for verl's %s trainer (docs/export.md), one key=value a "
                  "line:\n"
                  "#   python3 -m %s \\\n"
                  "#       --config-name=%s%s $(grep -v '^#' THIS) ...\n",
                  r->colocated ? "standard" : "fully async",
                  r->colocated ? "verl.trainer.main_ppo"
                               : "verl.experimental.fully_async_policy.fully_async_main",
                  r->colocated ? "" : "fully_async_", strategy);
    if (r->colocated)
        strbuf_puts(b, "# colocated: verl's hybrid engine, every GPU trains and rolls out in "
                       "turn; the memory\n# fraction is the planner's share of HBM for the "
                       "engines, so lower it if the\n# training state stays on the GPUs during "
                       "rollout\n");
    else
        strbuf_puts(b, "# async: training and rollout on GPUs of their own (the trainer.* and "
                       "rollout.*\n# pools below), which verl's fully async trainer runs; its "
                       "standard trainer\n# (verl.trainer.main_ppo) colocates them and has no "
                       "rollout.* keys\n");
}

int export_verl(const struct export_ctx *x, struct strbuf *b, struct libra_error *err)
{
    const struct plan_result *r = x->plan;
    export_header(b, x);
    verl_command(b, r);
    verl_training(b, x);
    if (verl_pool(b, "trainer", r->colocated ? "" : "training ",
                  r->colocated ? r->gpus : r->n_train, r->gpus_per_node, trainer_tp(r), err))
        return LIBRA_EINVAL;
    verl_rollout(b, x);
    if (!r->colocated)
        return verl_pool(b, "rollout", "rollout ", r->n_rollout, r->gpus_per_node, largest_tp(r),
                         err);
    return 0;
}

int export_megatron(const struct export_ctx *x, struct strbuf *b, struct libra_error *err)
{
    const struct plan_result *r = x->plan;
    const struct plan_train_layout *t = &r->train;
    int nodes, per_node, gpus = r->colocated ? r->gpus : r->n_train;
    if (pool_shape(gpus, r->gpus_per_node, trainer_tp(r), r->colocated ? "" : "training ", &nodes,
                   &per_node, err))
        return LIBRA_EINVAL;
    export_header(b, x);
    strbuf_printf(b,
                  "#\n"
                  "# Megatron-LM arguments for the plan's training layout (docs/export.md), one "
                  "a line:\n"
                  "#   torchrun --nnodes %d --nproc-per-node %d ... pretrain_gpt.py \\\n"
                  "#       $(grep -v '^#' THIS) ...\n"
                  "# %d GPUs%s: TP%d x PP%d x CP%d x DP%d (Megatron derives DP from the world "
                  "size)\n"
                  "--tensor-model-parallel-size %d\n"
                  "--pipeline-model-parallel-size %d\n"
                  "--context-parallel-size %d\n"
                  "%s\n"
                  "# a micro-batch packs up to %d tokens per GPU (times CP per replica): one "
                  "packed\n"
                  "# sequence; Megatron-based trainers that pack by tokens (slime) take\n"
                  "# --use-dynamic-batch-size --max-tokens-per-gpu %d instead\n"
                  "--micro-batch-size 1\n",
                  nodes, per_node, gpus,
                  r->colocated ? " (colocated: shared with the engines in turn)" : "", t->tp, t->pp,
                  t->cp, t->dp, t->tp, t->pp, t->cp,
                  t->fsdp ? "--use-torch-fsdp2" : "--use-distributed-optimizer", t->budget_tokens,
                  t->budget_tokens);
    if (t->fsdp && t->shard_dp)
        strbuf_printf(b,
                      "# sharding: the plan's HSDP keeps one copy of the state per %d GPUs;\n"
                      "# --use-torch-fsdp2 shards it over every DP rank instead: less memory\n"
                      "# and more gradient traffic than planned\n",
                      t->shard_dp * t->cp);
    int first, last;
    if (uneven_stages(x->model->layers, t->pp, &first, &last))
        strbuf_printf(b,
                      "# %d layers over PP %d: the first stage %d, the last %d\n"
                      "--decoder-first-pipeline-num-layers %d\n"
                      "--decoder-last-pipeline-num-layers %d\n",
                      x->model->layers, t->pp, first, last, first, last);
    if (t->recompute)
        strbuf_puts(b, "--recompute-granularity full\n"
                       "--recompute-method uniform\n"
                       "--recompute-num-layers 1\n");
    if (t->ep > 1)
        strbuf_printf(b, "--expert-model-parallel-size %d\n--expert-tensor-parallel-size 1\n",
                      t->ep);
    return 0;
}
