/*
 * Plan export as shell scripts: `sglang` and `vllm` (one POSIX sh script run once per node,
 * which starts that node's engines, and once more to start the gateway in front of them) and
 * `slurm` (one sbatch script running the whole plan as job steps on its planned nodes).
 *
 * Each engine gets the GPUs the plan placed it on through CUDA_VISIBLE_DEVICES, set on its own
 * command (inside the job step under Slurm, which sets the variable itself when a step starts).
 * The gateway waits for every engine's /health before it starts, because libra serve asks each
 * --engine for its kind and TP at start-up and exits when one does not answer.
 */
#include <stdio.h>
#include <stdlib.h>

#include "plan/export_internal.h"
#include "util/alloc.h"
#include "util/error.h"

/* Appends engine g's command line as shell words, the model as "$MODEL". */
static void sh_engine_command(struct strbuf *b, const struct export_ctx *x, enum export_engine e,
                              const struct plan_export_group *g)
{
    struct export_argv a;
    export_engine_argv(x, e, g, &a);
    for (int i = 0; i < a.n; i++) {
        strbuf_puts(b, i ? " " : "");
        if (i == a.model_word)
            strbuf_puts(b, "\"$MODEL\"");
        else
            export_sh_word(b, a.word[i]);
    }
}

static void sh_url_variable(struct strbuf *b, const struct plan_export_group *g)
{
    strbuf_printf(b, "$e%d", g->instance);
}

/* Appends "eK=URL" for every engine (its node's host from the script's host function), then
 * a loop waiting until each answers /health; every line indented by indent. */
static void sh_wait_for_engines(struct strbuf *b, const struct export_ctx *x, const char *indent)
{
    for (int i = 0; i < x->layout.n_engines; i++) {
        const struct plan_export_group *g = &x->layout.group[i];
        strbuf_printf(b, "%se%d=\"http://$(host %d):%d\"\n", indent, i, g->node, g->port);
    }
    if (x->layout.n_engines == 1) { /* a loop over one quoted word is shellcheck's SC2066 */
        strbuf_printf(b, "%suntil curl -sf -o /dev/null \"$e0/health\"; do sleep 5; done\n",
                      indent);
        return;
    }
    strbuf_printf(b, "%sfor url in", indent);
    for (int i = 0; i < x->layout.n_engines; i++)
        strbuf_printf(b, " \"$e%d\"", i);
    strbuf_printf(b,
                  "; do\n"
                  "%s    until curl -sf -o /dev/null \"$url/health\"; do sleep 5; done\n"
                  "%sdone\n",
                  indent, indent);
}

/* Appends the gateway's command: libra serve in front of every engine (URLs in $eK), its
 * continuation lines indented by indent. */
static void sh_serve_command(struct strbuf *b, const struct export_ctx *x, const char *listen,
                             const char *indent)
{
    char sep[32];
    snprintf(sep, sizeof sep, " \\\n%s", indent);
    strbuf_puts(b, "\"${LIBRA:-libra}\" serve ");
    export_serve_args(b, x, listen, sep, true, sh_url_variable);
    strbuf_puts(b, "\n");
}

/* Appends the nodes without an engine in "0|1|2" form. */
static void sh_idle_nodes(struct strbuf *b, const struct export_ctx *x, const bool *has_engine)
{
    const char *sep = "";
    for (int node = 0; node < x->layout.nodes; node++)
        if (!has_engine[node]) {
            strbuf_printf(b, "%s%d", sep, node);
            sep = "|";
        }
}

static void sh_node_function(struct strbuf *b, const struct export_ctx *x, enum export_engine e)
{
    const struct plan_export_layout *l = &x->layout;
    bool *has_engine = xcalloc((size_t)l->nodes, sizeof *has_engine), idle = false;
    for (int i = 0; i < l->n_engines; i++)
        has_engine[l->group[i].node] = true;
    for (int node = 0; node < l->nodes; node++)
        idle |= !has_engine[node];
    strbuf_puts(b, "engines_on() {\n    case \"$1\" in\n");
    for (int node = 0; node < l->nodes; node++) {
        if (!has_engine[node])
            continue;
        strbuf_printf(b, "    %d)\n", node);
        for (int i = 0; i < l->n_engines; i++) {
            const struct plan_export_group *g = &l->group[i];
            if (g->node != node)
                continue;
            strbuf_puts(b, "        CUDA_VISIBLE_DEVICES=");
            export_gpu_list(b, g);
            strbuf_puts(b, " ");
            sh_engine_command(b, x, e, g);
            strbuf_puts(b, " &\n");
        }
        strbuf_puts(b, "        ;;\n");
    }
    if (idle) {
        strbuf_puts(b, "    ");
        sh_idle_nodes(b, x, has_engine);
        strbuf_puts(b, ")\n        echo \"$0: node $1 runs no engine of the plan\" >&2\n"
                       "        ;;\n");
    }
    free(has_engine);
    strbuf_printf(b,
                  "    *)\n"
                  "        echo \"$0: the plan has no node $1 (0-%d)\" >&2\n"
                  "        exit 2\n"
                  "        ;;\n"
                  "    esac\n"
                  "    wait\n"
                  "}\n\n",
                  l->nodes - 1);
}

void export_engines_sh(const struct export_ctx *x, enum export_engine e, struct strbuf *b)
{
    const char *engine = e == EXPORT_ENGINE_SGLANG ? "SGLang" : "vLLM";
    int nodes = x->layout.nodes;
    strbuf_puts(b, "#!/bin/sh\n");
    export_header(b, x);
    strbuf_printf(
        b,
        "#\n"
        "# The plan's rollout engines, one %s server per instance with its TP size on the GPUs\n"
        "# the plan gives it, and the libra serve gateway registering each with its TP\n"
        "# (docs/export.md):\n"
        "#   sh THIS NODE    on node NODE (0-%d): start its engines in the background, wait\n"
        "#   sh THIS serve   on the gateway's host: once every engine answers /health, run\n"
        "#                   libra serve in front of them\n"
        "# Environment: LIBRA_MODEL_PATH the checkpoint (default %s, the plan's model preset);\n"
        "# LIBRA_HOSTS the nodes' host names, node 0 first (default 127.0.0.1: one node);\n"
        "# LIBRA_LISTEN the gateway's HOST:PORT (default 127.0.0.1:%d; another address needs\n"
        "# LIBRA_ADMIN_TOKEN); LIBRA the libra binary (default libra).\n"
        "# Memory fraction %.4g: the share of HBM the planner's KV model gives each engine.\n"
        "# Engines of different TP sizes: a trainer that sets up one NCCL weight-update group\n"
        "# over them takes each engine's first rank from the gateway's GET /libra/v1/engines\n"
        "# (1 + rank_offset), not from one TP size.\n"
        "set -eu\n"
        "MODEL=${LIBRA_MODEL_PATH:-%s}\n"
        "HOSTS=${LIBRA_HOSTS:-127.0.0.1}\n\n"
        "# host K: node K's host name, the (K+1)-th word of LIBRA_HOSTS\n"
        "host() {\n"
        "    echo \"$HOSTS\" | awk -v k=\"$1\" '{ print $(k + 1) }'\n"
        "}\n\n",
        engine, nodes - 1, x->cfg->model.name, PLAN_EXPORT_GATEWAY_PORT, x->mem_fraction,
        x->cfg->model.name);
    sh_node_function(b, x, e);
    strbuf_printf(b,
                  "gateway() {\n"
                  "    n=$(echo \"$HOSTS\" | wc -w)\n"
                  "    if [ $((n)) -lt %d ]; then\n"
                  "        echo \"$0: LIBRA_HOSTS names $((n)) hosts; the plan has %d nodes\" >&2\n"
                  "        exit 2\n"
                  "    fi\n",
                  nodes, nodes);
    sh_wait_for_engines(b, x, "    ");
    strbuf_puts(b, "    exec ");
    char listen[64];
    snprintf(listen, sizeof listen, "\"${LIBRA_LISTEN:-127.0.0.1:%d}\"", PLAN_EXPORT_GATEWAY_PORT);
    sh_serve_command(b, x, listen, "        ");
    strbuf_puts(b, "}\n\n"
                   "case \"${1:-}\" in\n"
                   "serve) gateway ;;\n"
                   "[0-9]*) engines_on \"$1\" ;;\n"
                   "*)\n"
                   "    echo \"usage: $0 NODE | serve\" >&2\n"
                   "    exit 2\n"
                   "    ;;\n"
                   "esac\n");
}

/* ---- slurm ---------------------------------------------------------------------------------- */

/* Appends the training steps: one task per node holding training GPUs, on them. */
static void slurm_training(struct strbuf *b, const struct export_ctx *x)
{
    const struct plan_export_layout *l = &x->layout;
    const struct plan_export_group *first = &l->group[l->n_engines];
    strbuf_printf(b,
                  "\n# training: one task per node on its planned GPUs\n"
                  "GATEWAY=\"http://$(host 0):%d\"\n"
                  "MASTER=$(host %d)\n",
                  PLAN_EXPORT_GATEWAY_PORT, first->node);
    for (int k = 0; k < l->n_train; k++) {
        const struct plan_export_group *g = &l->group[l->n_engines + k];
        strbuf_printf(b, "step %d env CUDA_VISIBLE_DEVICES=", g->node);
        export_gpu_list(b, g);
        strbuf_printf(b,
                      " LIBRA_TRAIN_NNODES=%d LIBRA_TRAIN_NODE_RANK=%d LIBRA_TRAIN_GPUS=%d \\\n"
                      "    MASTER_ADDR=\"$MASTER\" LIBRA_GATEWAY=\"$GATEWAY\" sh -c "
                      "\"$LIBRA_TRAIN_CMD\"\n",
                      l->n_train, k, g->n_gpus);
    }
}

int export_slurm(const struct export_ctx *x, struct strbuf *b, struct libra_error *err)
{
    const struct plan_result *r = x->plan;
    const struct plan_export_layout *l = &x->layout;
    if (r->gpus % r->gpus_per_node)
        return error_set(err, NULL, 0, 0,
                         "the cluster's %d GPUs are not whole nodes of %d, and sbatch asks the "
                         "same GPU count of every node: slurm cannot express the plan",
                         r->gpus, r->gpus_per_node);
    strbuf_printf(b,
                  "#!/bin/sh\n"
                  "#SBATCH --job-name=libra\n"
                  "#SBATCH --nodes=%d\n"
                  "#SBATCH --ntasks-per-node=1\n"
                  "#SBATCH --gres=gpu:%d\n"
                  "#SBATCH --exclusive\n",
                  l->nodes, r->gpus_per_node);
    export_header(b, x);
    strbuf_printf(
        b,
        "#\n"
        "# The whole plan as one Slurm job (docs/export.md): each rollout engine (SGLang, its TP\n"
        "# size) and each node's share of training is a job step on its planned node (srun\n"
        "# --relative=K: the job's K-th node) that shares the node's GPUs with the other steps\n"
        "# (--overlap, Slurm 22.05 or later) and sets CUDA_VISIBLE_DEVICES to its planned GPUs;\n"
        "# the gateway runs on node 0 once every engine answers /health.\n"
        "# Environment (sbatch passes it on):\n"
        "#   LIBRA_TRAIN_CMD    the trainer's launch command (required), run by sh -c once per\n"
        "#                      training node with LIBRA_TRAIN_NNODES, LIBRA_TRAIN_NODE_RANK,\n"
        "#                      LIBRA_TRAIN_GPUS (its GPUs on the node), MASTER_ADDR (the first\n"
        "#                      training node) and LIBRA_GATEWAY (the gateway's URL) set\n"
        "#   LIBRA_ADMIN_TOKEN  the gateway's admin token (required: it listens on 0.0.0.0)\n"
        "#   LIBRA_MODEL_PATH   the checkpoint (default %s, the plan's model preset)\n"
        "#   LIBRA              the libra binary (default libra)\n"
        "set -eu\n"
        ": \"${LIBRA_TRAIN_CMD:?set LIBRA_TRAIN_CMD to the trainer launch command}\"\n"
        ": \"${LIBRA_ADMIN_TOKEN:?set LIBRA_ADMIN_TOKEN: the gateway listens on 0.0.0.0}\"\n"
        "MODEL=${LIBRA_MODEL_PATH:-%s}\n"
        "HOSTS=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n"
        "n=$(echo \"$HOSTS\" | wc -l)\n"
        "if [ $((n)) -lt %d ]; then\n"
        "    echo \"$0: the job has $((n)) nodes; the plan has %d\" >&2\n"
        "    exit 2\n"
        "fi\n\n"
        "# host K: the job's K-th node's host name\n"
        "host() {\n"
        "    echo \"$HOSTS\" | sed -n \"$(($1 + 1))p\"\n"
        "}\n\n"
        "# step K COMMAND...: COMMAND as one task on the job's K-th node, in the background\n"
        "step() {\n"
        "    k=$1\n"
        "    shift\n"
        "    srun --nodes=1 --ntasks=1 --relative=\"$k\" --overlap \"$@\" &\n"
        "}\n\n"
        "# rollout engines\n",
        x->cfg->model.name, x->cfg->model.name, l->nodes, l->nodes);
    for (int i = 0; i < l->n_engines; i++) {
        const struct plan_export_group *g = &l->group[i];
        strbuf_printf(b, "step %d env CUDA_VISIBLE_DEVICES=", g->node);
        export_gpu_list(b, g);
        strbuf_puts(b, " ");
        sh_engine_command(b, x, EXPORT_ENGINE_SGLANG, g);
        strbuf_puts(b, "\n");
    }
    if (l->n_train)
        slurm_training(b, x);
    strbuf_puts(b, "\n# the gateway on node 0, once every engine answers\n");
    sh_wait_for_engines(b, x, "");
    char listen[32];
    snprintf(listen, sizeof listen, "0.0.0.0:%d", PLAN_EXPORT_GATEWAY_PORT);
    strbuf_puts(b, "step 0 ");
    sh_serve_command(b, x, listen, "    ");
    strbuf_puts(b, "wait\n");
    return 0;
}
