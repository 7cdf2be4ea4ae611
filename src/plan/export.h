/*
 * Plan export: a feasible plan as what a user's launcher runs (`libra plan --export FORMAT`,
 * docs/export.md). The planner says where every GPU goes; a launcher needs it as commands:
 * one engine per rollout instance with its TP size, port and GPU ids, the trainer's share of
 * each node, the gateway registering every engine with its TP, or the trainer's own settings.
 *
 * Formats: sglang and vllm (POSIX sh: each node's engines, then libra serve in front of them),
 * slurm (an sbatch script running the whole plan as job steps), ray (placement groups as JSON),
 * k8s (YAML: a Deployment and Service per engine, a Pod per training node), verl (Hydra
 * overrides) and megatron (Megatron-LM arguments). Every output opens with the libra version,
 * the config digest and the command that made it, and is a pure function of the plan, the
 * config and that command (byte-identical on every run).
 *
 * Every format but verl and megatron starts engines on GPUs of their own: they refuse a
 * colocated plan, whose engines share every GPU with training in turn (only a framework that
 * colocates the two, verl's hybrid engine, runs it). slurm also refuses a cluster that is not
 * whole nodes (sbatch asks the same GPU count on every node).
 *
 * Pure: text in memory, no I/O. Reentrant.
 */
#ifndef PLAN_EXPORT_H
#define PLAN_EXPORT_H

#include "libra/libra.h"
#include "plan/plan.h"
#include "spec/config.h"

enum plan_export_format {
    PLAN_EXPORT_SGLANG,
    PLAN_EXPORT_VLLM,
    PLAN_EXPORT_SLURM,
    PLAN_EXPORT_RAY,
    PLAN_EXPORT_K8S,
    PLAN_EXPORT_VERL,
    PLAN_EXPORT_MEGATRON,
    PLAN_EXPORT_FORMATS
};

/* The format names, as an error message lists them. */
#define PLAN_EXPORT_FORMAT_LIST "sglang, vllm, slurm, ray, k8s, verl, megatron"

/* Finds a format by its exact name. Returns 0, or LIBRA_EINVAL when name is none of them. */
int plan_export_format_parse(const char *name, enum plan_export_format *out);

/* The format's name ("sglang"). */
const char *plan_export_format_name(enum plan_export_format f);

/* The engines' memory fraction when the plan carries none (plan_result.rollout_mem_util 0):
 * the KV model's default share of HBM (cost/rollout.h), vLLM's own default. */
#define PLAN_EXPORT_MEM_FRACTION 0.9
#define PLAN_EXPORT_GATEWAY_PORT 30000  /* libra serve's port */
#define PLAN_EXPORT_GATEWAY_ENGINES 256 /* the most engines one libra serve registers */
#define PLAN_EXPORT_ENGINE_PORT 30001   /* the engine of instance k listens on this + k */
#define PLAN_EXPORT_PORT_MAX 65535      /* the last TCP port */

/* GPUs of one node that one process uses: a rollout engine or the node's share of training. */
struct plan_export_group {
    int node;       /* node index */
    int instance;   /* rollout instance id; -1 for training */
    int tp;         /* the instance's TP size; 0 for training */
    int port;       /* the engine's port; 0 for training */
    int n_gpus;     /* GPUs in the group */
    const int *gpu; /* their indices inside the node, ascending (into the layout's storage) */
};

/* A plan's processes: its engines in instance order, then its training groups in node order.
 * A colocated plan's engines and training groups share GPUs. */
struct plan_export_layout {
    int nodes;                       /* nodes the cluster spans (the last may be partial) */
    int n_engines;                   /* groups [0, n_engines) are engines */
    int n_train;                     /* groups [n_engines, n_engines + n_train) train */
    struct plan_export_group *group; /* owned */
    int *gpu_ids;                    /* owned storage of every group's gpu */
};

/*
 * The layout of feasible plan r into *out (zeroed first): one group per rollout instance (its
 * GPUs, which the placement keeps inside one node, and port PLAN_EXPORT_ENGINE_PORT + id) and
 * one per node holding training GPUs. Returns 0, or LIBRA_EINTERNAL with err set when the
 * placement breaks its contract (an instance across nodes, or not of its TP size). Free *out
 * with plan_export_layout_free in every case.
 */
int plan_export_layout(const struct plan_result *r, struct plan_export_layout *out,
                       struct libra_error *err);

/* Releases what l owns; a zeroed l is fine. */
void plan_export_layout_free(struct plan_export_layout *l);

/* What an export reads. Everything is borrowed. */
struct plan_export_input {
    const struct plan_result *plan; /* feasible */
    const struct libra_config *cfg; /* the effective config that planned it */
    const struct spec_model *model; /* its model: the layers a pipeline splits into stages */
    int argc;                       /* the command that made it, for the header: its words */
    char *const *argv;              /* after "libra" ("plan", "--export", "sglang", ...) */
};

/*
 * Writes plan in->plan as format f into *out (a malloc'd NUL-terminated text the caller frees;
 * NULL on error). Returns 0; LIBRA_EINVAL with err saying why when the format cannot express
 * the plan (a colocated plan; slurm: a cluster that is not whole nodes); LIBRA_EINTERNAL as
 * plan_export_layout.
 */
int plan_export(enum plan_export_format f, const struct plan_export_input *in, char **out,
                struct libra_error *err);

#endif
