/*
 * Plan export: the layout every format reads (which GPUs each engine and each node's share of
 * training take), the pieces several formats write (the header, an engine's command line, the
 * gateway's), and the choice of format. The formats themselves are in export_shell.c (sglang,
 * vllm, slurm), export_cluster.c (ray, k8s) and export_trainer.c (verl, megatron).
 *
 * Engines are listed in instance order everywhere, ports included: the gateway's listing, and
 * so its rank offsets (GET /libra/v1/engines), follow the order of its --engine flags.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/export_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/version.h"

static const char *const format_names[PLAN_EXPORT_FORMATS] = {
    [PLAN_EXPORT_SGLANG] = "sglang",     [PLAN_EXPORT_VLLM] = "vllm", [PLAN_EXPORT_SLURM] = "slurm",
    [PLAN_EXPORT_RAY] = "ray",           [PLAN_EXPORT_K8S] = "k8s",   [PLAN_EXPORT_VERL] = "verl",
    [PLAN_EXPORT_MEGATRON] = "megatron",
};

int plan_export_format_parse(const char *name, enum plan_export_format *out)
{
    for (int f = 0; f < PLAN_EXPORT_FORMATS; f++)
        if (strcmp(name, format_names[f]) == 0) {
            *out = (enum plan_export_format)f;
            return 0;
        }
    return LIBRA_EINVAL;
}

const char *plan_export_format_name(enum plan_export_format f)
{
    return format_names[f];
}

/* ---- the layout ----------------------------------------------------------------------------- */

void plan_export_layout_free(struct plan_export_layout *l)
{
    free(l->group);
    free(l->gpu_ids);
    memset(l, 0, sizeof *l);
}

/* Checks what the placement promises an engine: all its GPUs on one node, as many as its TP. */
static int check_engines(const struct plan_export_layout *l, const struct plan_result *r,
                         struct libra_error *err)
{
    for (int i = 0; i < l->n_engines; i++) {
        const struct plan_export_group *e = &l->group[i];
        if (e->n_gpus != e->tp || e->tp < 1) {
            error_set(err, NULL, 0, 0, "plan export: instance %d has %d GPUs for TP %d", i,
                      e->n_gpus, e->tp);
            return LIBRA_EINTERNAL;
        }
    }
    for (int g = 0; g < r->gpus; g++) {
        const struct plan_gpu *u = &r->gpu[g];
        if (u->instance >= 0 && u->node != l->group[u->instance].node) {
            error_set(err, NULL, 0, 0, "plan export: instance %d spans nodes %d and %d",
                      u->instance, l->group[u->instance].node, u->node);
            return LIBRA_EINTERNAL;
        }
    }
    return 0;
}

/* Sizes the groups: counts of GPUs per engine and per node's training share, the training
 * groups numbered in node order after the engines. */
static void count_groups(const struct plan_result *r, struct plan_export_layout *l,
                         int *train_group, int *count)
{
    int *per_node = xcalloc((size_t)l->nodes, sizeof *per_node);
    for (int g = 0; g < r->gpus; g++)
        if (r->gpu[g].role == PLAN_ROLE_TRAIN)
            per_node[r->gpu[g].node]++;
    for (int node = 0; node < l->nodes; node++) {
        train_group[node] = per_node[node] ? l->n_engines + l->n_train++ : -1;
        if (per_node[node])
            count[train_group[node]] = per_node[node];
    }
    for (int g = 0; g < r->gpus; g++)
        if (r->gpu[g].instance >= 0)
            count[r->gpu[g].instance]++;
    free(per_node);
}

/* Allocates the groups and their GPU storage by count, each group's gpu pointing at its
 * share, empty. */
static void alloc_groups(struct plan_export_layout *l, const int *count)
{
    int n = l->n_engines + l->n_train, total = 0;
    for (int i = 0; i < n; i++)
        total += count[i];
    l->group = xcalloc((size_t)n, sizeof *l->group);
    l->gpu_ids = xmallocarray((size_t)(total ? total : 1), sizeof *l->gpu_ids);
    for (int i = 0, at = 0; i < n; at += count[i++]) {
        l->group[i].instance = i < l->n_engines ? i : -1;
        l->group[i].gpu = l->gpu_ids + at;
    }
}

/* Adds r's GPUs, in order, to their engine's group and their node's training group (both for
 * a colocated plan's GPUs). */
static void fill_groups(const struct plan_result *r, struct plan_export_layout *l,
                        const int *train_group)
{
    for (int g = 0; g < r->gpus; g++) {
        const struct plan_gpu *u = &r->gpu[g];
        int member[2] = {u->instance, u->role == PLAN_ROLE_TRAIN ? train_group[u->node] : -1};
        for (int k = 0; k < 2; k++) {
            if (member[k] < 0)
                continue;
            struct plan_export_group *grp = &l->group[member[k]];
            if (grp->n_gpus == 0)
                grp->node = u->node;
            l->gpu_ids[(grp->gpu - l->gpu_ids) + grp->n_gpus++] = u->local;
            if (k == 0) {
                grp->tp = u->instance_tp;
                grp->port = PLAN_EXPORT_ENGINE_PORT + member[k];
            }
        }
    }
}

int plan_export_layout(const struct plan_result *r, struct plan_export_layout *out,
                       struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    out->nodes = (r->gpus + r->gpus_per_node - 1) / r->gpus_per_node;
    out->n_engines = r->instances;
    for (int g = 0; g < r->gpus; g++)
        if (r->gpu[g].instance >= r->instances) {
            error_set(err, NULL, 0, 0, "plan export: GPU %d names instance %d of %d", g,
                      r->gpu[g].instance, r->instances);
            return LIBRA_EINTERNAL;
        }
    int *train_group = xmallocarray((size_t)out->nodes, sizeof *train_group);
    int *count = xcalloc((size_t)out->n_engines + (size_t)out->nodes, sizeof *count);
    count_groups(r, out, train_group, count);
    alloc_groups(out, count);
    fill_groups(r, out, train_group);
    free(count);
    free(train_group);
    return check_engines(out, r, err);
}

/* ---- shared pieces -------------------------------------------------------------------------- */

void export_gpu_list(struct strbuf *b, const struct plan_export_group *g)
{
    for (int i = 0; i < g->n_gpus; i++)
        strbuf_printf(b, "%s%d", i ? "," : "", g->gpu[i]);
}

void export_fleet(struct strbuf *b, const struct plan_result *r)
{
    const char *sep = "";
    for (int t = 0; t < PLAN_NTP; t++)
        if (r->counts[t]) {
            strbuf_printf(b, "%s%dxTP%d", sep, r->counts[t], 1 << t);
            sep = " + ";
        }
}

void export_sh_word(struct strbuf *b, const char *s)
{
    bool plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
                       *p) != NULL;
    if (plain) {
        strbuf_puts(b, s);
        return;
    }
    strbuf_puts(b, "'");
    for (const char *p = s; *p; p++)
        if (*p == '\'')
            strbuf_puts(b, "'\\''");
        else
            strbuf_add(b, p, 1);
    strbuf_puts(b, "'");
}

/* Appends s with every control character (a newline would end the comment) as a space. */
static void put_comment_text(struct strbuf *b, const char *s)
{
    for (const char *p = s; *p; p++)
        strbuf_add(b, (unsigned char)*p < 0x20 || *p == 0x7f ? " " : p, 1);
}

void export_header(struct strbuf *b, const struct export_ctx *x)
{
    const struct plan_result *r = x->plan;
    const struct libra_config *cfg = x->cfg;
    const struct plan_train_layout *t = &r->train;
    char ep[24] = "";
    if (t->ep > 1)
        snprintf(ep, sizeof ep, ", EP %d", t->ep);
    strbuf_printf(b, "# libra %s plan export (%s), config digest %s\n# made by: ",
                  libra_version_string, format_names[x->format], x->digest);
    put_comment_text(b, x->command);
    strbuf_printf(b,
                  "\n# plan: %s on %d x %s (%d per node), %s, step %.2f s predicted\n"
                  "# training %d GPUs: TP%d PP%d CP%d DP%d, micro-batch %d tokens per GPU, %s%s%s\n"
                  "# rollout %d GPUs: ",
                  r->colocated ? "colocated" : "async", r->gpus, cfg->cluster.hardware,
                  r->gpus_per_node, cfg->model.name, r->step_s, r->n_train, t->tp, t->pp, t->cp,
                  t->dp, t->budget_tokens,
                  t->shard_dp ? "HSDP"
                  : t->fsdp   ? "FSDP"
                              : "distributed optimizer",
                  t->recompute ? ", full recompute" : "", ep, r->n_rollout);
    export_fleet(b, r);
    char buckets[SPEC_BUCKET_TEXT_MAX];
    spec_bucket_format(&r->layout, buckets, sizeof buckets);
    strbuf_printf(b, ", buckets %s\n", buckets);
}

/* Adds a word to a. */
static void argv_add(struct export_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void argv_add(struct export_argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->word[a->n++], sizeof a->word[0], fmt, ap);
    va_end(ap);
}

void export_engine_argv(const struct export_ctx *x, enum export_engine e,
                        const struct plan_export_group *g, struct export_argv *a)
{
    const char *model = x->cfg->model.name;
    a->n = 0;
    if (e == EXPORT_ENGINE_SGLANG) {
        argv_add(a, "python3");
        argv_add(a, "-m");
        argv_add(a, "sglang.launch_server");
        a->n_program = a->n;
        argv_add(a, "--model-path");
        a->model_word = a->n;
        argv_add(a, "%s", model);
        argv_add(a, "--tp-size");
    } else {
        argv_add(a, "vllm");
        argv_add(a, "serve");
        a->n_program = a->n;
        a->model_word = a->n;
        argv_add(a, "%s", model);
        argv_add(a, "--tensor-parallel-size");
    }
    argv_add(a, "%d", g->tp);
    argv_add(a, "--port");
    argv_add(a, "%d", g->port);
    argv_add(a, "--host");
    argv_add(a, "0.0.0.0");
    argv_add(a, e == EXPORT_ENGINE_SGLANG ? "--mem-fraction-static" : "--gpu-memory-utilization");
    argv_add(a, "%.4g", x->mem_fraction);
}

/* The settings the gateway reads beyond those its line names: the plan command's preset files
 * (--presets FILE, in order) and every key libra serve reads whose value is not the default, so
 * that the gateway decides on the experiment that was planned. */
static void serve_settings(struct strbuf *b, const struct export_ctx *x, const char *sep,
                           void (*word)(struct strbuf *, const char *))
{
    /* given otherwise, or (ehp.signal) acting with --pool-steer alone, which the line lacks */
    static const char *const named[] = {"cluster.hardware", "model.name", "cluster.gpus",
                                        "sched.buckets", "ehp.signal"};
    for (int i = 0; i < x->argc; i++) {
        const char *file = NULL;
        if (strcmp(x->argv[i], "--presets") == 0 && i + 1 < x->argc)
            file = x->argv[++i];
        else if (strncmp(x->argv[i], "--presets=", 10) == 0)
            file = x->argv[i] + 10;
        if (file) {
            strbuf_printf(b, "%s--presets ", sep);
            word(b, file);
        }
    }
    struct libra_config defaults;
    spec_config_defaults(&defaults);
    size_t n;
    const struct spec_field *f = spec_config_fields(&n);
    for (size_t i = 0; i < n; i++) {
        bool skip = !(f[i].readers & SPEC_READ_SERVE);
        for (size_t k = 0; k < sizeof named / sizeof *named && !skip; k++)
            skip = strcmp(f[i].key, named[k]) == 0;
        char *value = skip ? NULL : spec_field_text(&f[i], x->cfg);
        char *def = skip ? NULL : spec_field_text(&f[i], &defaults);
        if (value && strcmp(value, def) != 0) {
            struct strbuf set = {0};
            strbuf_printf(&set, "%s=%s", f[i].key, value);
            strbuf_printf(b, "%s--set ", sep);
            word(b, set.data ? set.data : "");
            strbuf_free(&set);
        }
        free(value);
        free(def);
    }
}

/* w as a sh word inside a comment (the k8s YAML's copyable gateway line): quoted as the scripts
 * quote it, its control bytes as spaces and bytes that are not UTF-8 as '?', as the command
 * line of the header is written. */
static void comment_word(struct strbuf *b, const char *w)
{
    struct strbuf q = {0};
    export_sh_word(&q, w);
    char *text = ujson_utf8_repair(strbuf_detach(&q));
    put_comment_text(b, text);
    free(text);
}

void export_serve_args(struct strbuf *b, const struct export_ctx *x, const char *listen,
                       const char *sep, bool shell,
                       void (*url)(struct strbuf *b, const struct plan_export_group *g))
{
    void (*word)(struct strbuf *, const char *) = shell ? export_sh_word : comment_word;
    char buckets[SPEC_BUCKET_TEXT_MAX + 32];
    strbuf_printf(b, "--listen %s%s--hardware ", listen, sep);
    word(b, x->cfg->cluster.hardware);
    strbuf_puts(b, " --model ");
    word(b, x->cfg->model.name);
    strbuf_printf(b, " --gpus %d%s--set ", x->plan->gpus, sep);
    struct spec_bucket_layout layout = x->plan->layout; /* the gateway's: engines, not counts */
    for (int k = 0; k < layout.n; k++)
        memset(layout.bucket[k].instances, 0, sizeof layout.bucket[k].instances);
    size_t n = (size_t)snprintf(buckets, sizeof buckets, "sched.buckets=");
    spec_bucket_format(&layout, buckets + n, sizeof buckets - n);
    word(b, buckets);
    serve_settings(b, x, sep, word);
    for (int i = 0; i < x->layout.n_engines; i++) {
        const struct plan_export_group *g = &x->layout.group[i];
        strbuf_printf(b, "%s--engine ", sep);
        if (shell)
            strbuf_puts(b, "\"");
        url(b, g);
        strbuf_printf(b, ",tp=%d%s", g->tp, shell ? "\"" : "");
    }
}

/* ---- the formats ---------------------------------------------------------------------------- */

/* Formats that start engines on GPUs of their own. */
static bool needs_own_gpus(enum plan_export_format f)
{
    return f != PLAN_EXPORT_VERL && f != PLAN_EXPORT_MEGATRON;
}

/* Formats that register the engines with a libra serve gateway. */
static bool has_gateway(enum plan_export_format f)
{
    return needs_own_gpus(f) && f != PLAN_EXPORT_RAY;
}

static int write_format(const struct export_ctx *x, struct strbuf *b, struct libra_error *err)
{
    switch (x->format) {
    case PLAN_EXPORT_SGLANG:
        export_engines_sh(x, EXPORT_ENGINE_SGLANG, b);
        return 0;
    case PLAN_EXPORT_VLLM:
        export_engines_sh(x, EXPORT_ENGINE_VLLM, b);
        return 0;
    case PLAN_EXPORT_SLURM:
        return export_slurm(x, b, err);
    case PLAN_EXPORT_RAY:
        return export_ray(x, b, err);
    case PLAN_EXPORT_K8S:
        export_k8s(x, b);
        return 0;
    case PLAN_EXPORT_VERL:
        return export_verl(x, b, err);
    case PLAN_EXPORT_MEGATRON:
        return export_megatron(x, b, err);
    case PLAN_EXPORT_FORMATS:
        break;
    }
    error_set(err, NULL, 0, 0, "plan export: format %d", (int)x->format);
    return LIBRA_EINTERNAL;
}

int plan_export(enum plan_export_format f, const struct plan_export_input *in, char **out,
                struct libra_error *err)
{
    *out = NULL;
    const struct plan_result *r = in->plan;
    if (r->colocated && needs_own_gpus(f))
        return error_set(err, NULL, 0, 0,
                         "a colocated plan runs its engines and training on the same %d GPUs in "
                         "turn, which %s cannot express: export it as verl (its hybrid engine "
                         "colocates them) or megatron, or plan with --mode async",
                         r->gpus, format_names[f]);
    struct export_ctx x = {
        .format = f,
        .plan = r,
        .cfg = in->cfg,
        .model = in->model,
        .argc = in->argc,
        .argv = in->argv,
        .mem_fraction = r->rollout_mem_util > 0.0 ? r->rollout_mem_util : PLAN_EXPORT_MEM_FRACTION,
    };
    spec_config_digest_hex(in->cfg, x.digest);
    struct strbuf command = {0};
    strbuf_puts(&command, "libra");
    for (int i = 0; i < in->argc; i++) {
        strbuf_puts(&command, " ");
        export_sh_word(&command, in->argv[i]);
    }
    /* every format carries the command: JSON and YAML take only UTF-8, and a comment of other
     * bytes makes the whole file unreadable to their parsers */
    x.command = ujson_utf8_repair(strbuf_detach(&command));
    int rc = plan_export_layout(r, &x.layout, err);
    if (rc == 0 && has_gateway(f) && x.layout.n_engines > PLAN_EXPORT_GATEWAY_ENGINES)
        rc = error_set(err, NULL, 0, 0,
                       "the plan's %d rollout engines are more than one libra serve gateway "
                       "registers (%d), and the %s export puts them all behind one: export ray "
                       "(placement groups alone), or plan fewer GPUs",
                       x.layout.n_engines, PLAN_EXPORT_GATEWAY_ENGINES, format_names[f]);
    if (rc == 0 && needs_own_gpus(f) &&
        x.layout.n_engines > PLAN_EXPORT_PORT_MAX - PLAN_EXPORT_ENGINE_PORT + 1)
        rc = error_set(err, NULL, 0, 0,
                       "the plan's %d rollout engines would listen on ports %d to %d (instance k "
                       "on %d + k), past %d: plan fewer GPUs or larger TP sizes",
                       x.layout.n_engines, PLAN_EXPORT_ENGINE_PORT,
                       PLAN_EXPORT_ENGINE_PORT + x.layout.n_engines - 1, PLAN_EXPORT_ENGINE_PORT,
                       PLAN_EXPORT_PORT_MAX);
    struct strbuf b = {0};
    if (rc == 0)
        rc = write_format(&x, &b, err);
    if (rc == 0)
        *out = strbuf_detach(&b);
    strbuf_free(&b);
    plan_export_layout_free(&x.layout);
    free(x.command);
    return rc;
}
