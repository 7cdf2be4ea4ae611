/*
 * Plan export for cluster managers that place processes themselves: `ray` (placement groups
 * as JSON) and `k8s` (YAML manifests written by hand: a Deployment and a Service per engine, a
 * Pod per training node).
 *
 * Neither lets a launcher name a node or a GPU index directly, so each keeps what it can of
 * the plan's placement: Ray gets one STRICT_PACK placement group per planned node, so that the
 * engines and training GPUs the plan put together land on one node; Kubernetes gets a
 * nodeSelector on a node label (libra-node=K) the user sets, and GPU counts, with the planned
 * GPU indices as an annotation (the device plugin chooses the GPUs).
 */
#include <stdio.h>
#include <stdlib.h>

#include "plan/export_internal.h"
#include "util/error.h"
#include "util/json.h"

#define RAY_SCHEMA "libra.export.ray/1"
#define RAY_CPUS_PER_GPU 1 /* a Ray actor's default num_cpus, one actor per GPU */
#define K8S_NODE_LABEL "libra-node"
#define K8S_SGLANG_IMAGE "lmsysorg/sglang:latest"
#define K8S_TRAINER_IMAGE "libra-trainer:latest"

/* ---- ray ------------------------------------------------------------------------------------ */

static json_t *gpu_array(const struct plan_export_group *g)
{
    json_t *a = json_array();
    for (int i = 0; i < g->n_gpus; i++)
        json_array_append_new(a, json_integer(g->gpu[i]));
    return a;
}

static json_t *argv_array(const struct export_argv *a)
{
    json_t *o = json_array();
    for (int i = 0; i < a->n; i++)
        json_array_append_new(o, json_string(a->word[i]));
    return o;
}

/* v, or NULL with *ok false: json_pack returns NULL for a string that is not UTF-8, which
 * json_array_append_new and json_object_update_new would then drop without a word. */
static json_t *packed(json_t *v, bool *ok)
{
    *ok = *ok && v != NULL;
    return v;
}

/* What runs in group g's bundle: an engine (its launch line) or a training node's share. */
static json_t *ray_role(const struct export_ctx *x, const struct plan_export_group *g, int rank,
                        bool *ok)
{
    if (g->instance < 0)
        return packed(json_pack("{s:s, s:i, s:i, s:o}", "role", "trainer", "node_rank", rank,
                                "nnodes", x->layout.n_train, "gpus", gpu_array(g)),
                      ok);
    struct export_argv a;
    export_engine_argv(x, EXPORT_ENGINE_SGLANG, g, &a);
    return packed(json_pack("{s:s, s:i, s:i, s:i, s:o, s:o}", "role", "engine", "instance",
                            g->instance, "tp", g->tp, "port", g->port, "gpus", gpu_array(g), "argv",
                            argv_array(&a)),
                  ok);
}

int export_ray(const struct export_ctx *x, struct strbuf *b, struct libra_error *err)
{
    const struct plan_export_layout *l = &x->layout;
    const struct plan_result *r = x->plan;
    int n = l->n_engines + l->n_train;
    bool ok = true;
    json_t *groups = json_array();
    for (int node = 0; node < l->nodes; node++) {
        json_t *bundles = json_array(), *roles = json_array();
        for (int i = 0; i < n; i++) {
            const struct plan_export_group *g = &l->group[i];
            if (g->node != node)
                continue;
            json_array_append_new(bundles, json_pack("{s:i, s:i}", "GPU", g->n_gpus, "CPU",
                                                     g->n_gpus * RAY_CPUS_PER_GPU));
            json_array_append_new(roles, ray_role(x, g, i - l->n_engines, &ok));
        }
        char name[32];
        snprintf(name, sizeof name, "libra-node-%d", node);
        json_t *group =
            packed(json_pack("{s:s, s:i, s:s, s:o, s:o}", "name", name, "node", node, "strategy",
                             "STRICT_PACK", "bundles", bundles, "roles", roles),
                   &ok);
        if (group && json_array_size(bundles)) /* a node the plan leaves idle gets no group */
            json_array_append(groups, group);
        json_decref(group);
    }
    json_t *doc = spec_config_envelope(RAY_SCHEMA, x->cfg);
    struct strbuf fleet = {0};
    export_fleet(&fleet, r);
    json_object_update_new(
        doc,
        packed(json_pack("{s:s, s:s, s:{s:s, s:i, s:i, s:s, s:s, s:s, s:f}, s:i, s:i, s:f, s:o}",
                         "format", "ray", "command", x->command, "plan", "mode",
                         r->colocated ? "colocated" : "async", "gpus", r->gpus, "gpus_per_node",
                         r->gpus_per_node, "hardware", x->cfg->cluster.hardware, "model",
                         x->cfg->model.name, "fleet", fleet.data ? fleet.data : "", "step_s",
                         r->step_s, "cpus_per_gpu", RAY_CPUS_PER_GPU, "gateway_port",
                         PLAN_EXPORT_GATEWAY_PORT, "mem_fraction", x->mem_fraction,
                         "placement_groups", groups),
               &ok));
    strbuf_free(&fleet);
    if (ok) {
        char *text = ujson_dump(doc, true);
        strbuf_puts(b, text);
        strbuf_puts(b, "\n");
        free(text);
    }
    json_decref(doc);
    if (ok)
        return 0;
    error_set(err, NULL, 0, 0, "internal: plan export: a ray member could not be packed");
    return LIBRA_EINTERNAL;
}

/* ---- k8s ------------------------------------------------------------------------------------ */

/* Appends s as a double-quoted YAML scalar. */
static void yaml_str(struct strbuf *b, const char *s)
{
    strbuf_puts(b, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            strbuf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            strbuf_printf(b, "\\x%02x", c);
        else
            strbuf_add(b, p, 1);
    }
    strbuf_puts(b, "\"");
}

static void k8s_engine_url(struct strbuf *b, const struct plan_export_group *g)
{
    strbuf_printf(b, "http://libra-engine-%d:%d", g->instance, g->port);
}

/* Appends the pod spec lines every pod shares: the node it is pinned to and its GPU count. */
static void k8s_pinned(struct strbuf *b, const struct plan_export_group *g, const char *indent)
{
    strbuf_printf(b, "%snodeSelector:\n%s  " K8S_NODE_LABEL ": \"%d\"\n", indent, indent, g->node);
}

static void k8s_resources(struct strbuf *b, const struct plan_export_group *g, const char *indent)
{
    strbuf_printf(b,
                  "%sresources:\n"
                  "%s  limits:\n"
                  "%s    nvidia.com/gpu: %d\n",
                  indent, indent, indent, g->n_gpus);
}

static void k8s_annotations(struct strbuf *b, const struct plan_export_group *g)
{
    strbuf_puts(b, "  annotations:\n    libra-gpus: \"");
    export_gpu_list(b, g);
    strbuf_puts(b, "\"\n");
}

static void k8s_engine(struct strbuf *b, const struct export_ctx *x,
                       const struct plan_export_group *g)
{
    struct export_argv a;
    export_engine_argv(x, EXPORT_ENGINE_SGLANG, g, &a);
    strbuf_printf(b,
                  "---\n"
                  "apiVersion: apps/v1\n"
                  "kind: Deployment\n"
                  "metadata:\n"
                  "  name: libra-engine-%d\n"
                  "  labels:\n"
                  "    libra-role: engine\n",
                  g->instance);
    k8s_annotations(b, g);
    strbuf_printf(b,
                  "spec:\n"
                  "  replicas: 1\n"
                  "  selector:\n"
                  "    matchLabels:\n"
                  "      libra-engine: \"%d\"\n"
                  "  template:\n"
                  "    metadata:\n"
                  "      labels:\n"
                  "        libra-role: engine\n"
                  "        libra-engine: \"%d\"\n"
                  "    spec:\n",
                  g->instance, g->instance);
    k8s_pinned(b, g, "      ");
    strbuf_puts(b, "      containers:\n"
                   "        - name: sglang\n"
                   "          image: \"" K8S_SGLANG_IMAGE "\"\n"
                   "          command: [");
    for (int i = 0; i < a.n; i++) {
        strbuf_puts(b, i == a.n_program ? "]\n          args: [" : i ? ", " : "");
        yaml_str(b, a.word[i]);
    }
    strbuf_printf(b,
                  "]\n"
                  "          ports:\n"
                  "            - containerPort: %d\n",
                  g->port);
    k8s_resources(b, g, "          ");
    strbuf_printf(b,
                  "          volumeMounts:\n"
                  "            - name: shm\n"
                  "              mountPath: /dev/shm\n"
                  "      volumes:\n"
                  "        - name: shm\n"
                  "          emptyDir:\n"
                  "            medium: Memory\n"
                  "---\n"
                  "apiVersion: v1\n"
                  "kind: Service\n"
                  "metadata:\n"
                  "  name: libra-engine-%d\n"
                  "spec:\n"
                  "  selector:\n"
                  "    libra-engine: \"%d\"\n"
                  "  ports:\n"
                  "    - port: %d\n"
                  "      targetPort: %d\n",
                  g->instance, g->instance, g->port, g->port);
}

static void k8s_trainer(struct strbuf *b, const struct export_ctx *x,
                        const struct plan_export_group *g, int rank)
{
    strbuf_printf(b,
                  "---\n"
                  "apiVersion: v1\n"
                  "kind: Pod\n"
                  "metadata:\n"
                  "  name: libra-trainer-%d\n"
                  "  labels:\n"
                  "    libra-role: trainer\n",
                  rank);
    k8s_annotations(b, g);
    strbuf_printf(b,
                  "spec:\n"
                  "  restartPolicy: Never\n"
                  "  hostname: libra-trainer-%d\n"
                  "  subdomain: libra-trainer\n",
                  rank);
    k8s_pinned(b, g, "  ");
    strbuf_printf(b,
                  "  containers:\n"
                  "    - name: trainer\n"
                  "      image: \"" K8S_TRAINER_IMAGE "\"\n"
                  "      command: [\"sh\", \"-c\", \"$(LIBRA_TRAIN_CMD)\"]\n"
                  "      env:\n"
                  "        - name: LIBRA_TRAIN_CMD\n"
                  "          valueFrom:\n"
                  "            configMapKeyRef:\n"
                  "              name: libra-train\n"
                  "              key: command\n"
                  "        - name: LIBRA_TRAIN_NNODES\n"
                  "          value: \"%d\"\n"
                  "        - name: LIBRA_TRAIN_NODE_RANK\n"
                  "          value: \"%d\"\n"
                  "        - name: LIBRA_TRAIN_GPUS\n"
                  "          value: \"%d\"\n"
                  "        - name: MASTER_ADDR\n"
                  "          value: \"libra-trainer-0.libra-trainer\"\n",
                  x->layout.n_train, rank, g->n_gpus);
    k8s_resources(b, g, "      ");
}

void export_k8s(const struct export_ctx *x, struct strbuf *b)
{
    const struct plan_export_layout *l = &x->layout;
    export_header(b, x);
    strbuf_printf(
        b,
        "#\n"
        "# Kubernetes manifests (docs/export.md): a Deployment and a Service per rollout\n"
        "# engine (SGLang, its TP size), a Pod per node's share of training. Label each\n"
        "# node with its index in the plan first:\n"
        "#   kubectl label node NAME " K8S_NODE_LABEL "=K   (K = 0..%d)\n"
        "# The device plugin picks the GPUs; annotation libra-gpus names the planned\n"
        "# ones. The trainer's command comes from ConfigMap libra-train (key command):\n"
        "#   kubectl create configmap libra-train --from-literal=command='...'\n"
        "# run by sh -c with LIBRA_TRAIN_NNODES, LIBRA_TRAIN_NODE_RANK, LIBRA_TRAIN_GPUS\n"
        "# and MASTER_ADDR (pod libra-trainer-0 by the headless Service libra-trainer)\n"
        "# set, in image " K8S_TRAINER_IMAGE " (tag yours so, or edit it).\n"
        "# Engines load model %s (edit --model-path for a checkpoint path); memory\n"
        "# fraction %.4g is the share of HBM the planner's KV model gives each engine.\n"
        "# The gateway, once every engine answers /health (LIBRA_ADMIN_TOKEN set):\n"
        "#   libra serve ",
        l->nodes - 1, x->cfg->model.name, x->mem_fraction);
    char listen[32];
    snprintf(listen, sizeof listen, "0.0.0.0:%d", PLAN_EXPORT_GATEWAY_PORT);
    export_serve_args(b, x, listen, " \\\n#       ", false, k8s_engine_url);
    strbuf_puts(b, "\n");
    for (int i = 0; i < l->n_engines; i++)
        k8s_engine(b, x, &l->group[i]);
    for (int k = 0; k < l->n_train; k++)
        k8s_trainer(b, x, &l->group[l->n_engines + k], k);
    if (l->n_train) /* the trainer pods' DNS names: libra-trainer-K.libra-trainer */
        strbuf_puts(b, "---\n"
                       "apiVersion: v1\n"
                       "kind: Service\n"
                       "metadata:\n"
                       "  name: libra-trainer\n"
                       "spec:\n"
                       "  clusterIP: None\n"
                       "  selector:\n"
                       "    libra-role: trainer\n");
}
