/*
 * `libra presets`: lists the hardware, model and workload presets a config can name, with their key
 * numbers, where each came from (built in, or which --presets file) and how sure the values are,
 * so a user can see what the cost model will assume before running anything.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cost/rollout.h"
#include "util/alloc.h"

#define SCHEMA "libra.presets/1"

static const char help[] =
    "usage: libra presets [--json] [--presets FILE] [-o FILE]\n"
    "\n"
    "Lists the hardware, model and workload presets a config can name: the built-in ones\n"
    "(data/presets/, values from calibration.md) and those added or replaced by preset files\n"
    "(--presets, LIBRA_PRESETS). Each row shows the key numbers, the confidence of the values\n"
    "(H, M, L) and its origin. A '*' marks every value shown whose field the preset lists in\n"
    "`assumed` (built in: what the calibration sheet says to assume). MoE models compute with\n"
    "their active parameters and hold their total parameters; inference streams every expert\n"
    "its batch selects; training computes with the active parameters, its experts split over\n"
    "expert-parallel ranks where the plan says. --json prints one document (schema\n"
    "libra.presets/1).\n";

/* "*" when field is listed in assumed (comma-separated), else "": every value the tables show
 * is printed with it, so that each assumed field is marked wherever it appears. */
static const char *mark(const char *assumed, const char *field)
{
    size_t n = strlen(field);
    for (const char *s = assumed; (s = strstr(s, field)); s += n)
        if ((s == assumed || s[-1] == ',') && (s[n] == ',' || s[n] == '\0'))
            return "*";
    return "";
}

/* A table cell: printf's fmt of the value, then field's mark. */
static __attribute__((format(printf, 5, 6))) void cell(char *out, size_t size, const char *assumed,
                                                       const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, size, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, "%s", mark(assumed, field));
}

/* The constants of the hardware presets that set them ("-": built in): with calibrated, those
 * `libra calibrate` fitted (the preset's `calibration` names what on); else those a preset file
 * sets by hand, without a calibration record, which were fitted on nothing. */
static void constants_table(FILE *out, const struct spec_presets *p, bool calibrated)
{
    bool header = false;
    for (size_t i = 0; i < p->n_hardware; i++) {
        const struct spec_hardware *h = &p->hardware[i];
        bool set = h->decode_t_fix_s || h->decode_t_seq_s || h->train_mfu;
        if (calibrated ? !h->calibration[0] : (h->calibration[0] || !set))
            continue;
        if (!header)
            fprintf(out, "\n%s; -: built in):\n%-14s %9s %9s %9s  %s\n%-14s %9s %9s %9s\n",
                    calibrated ? "calibrated constants (libra calibrate"
                               : "constants set by hand (in a preset file, without calibration",
                    "hardware", "t_fix", "t_seq", "train", calibrated ? "fitted on" : "preset file",
                    "", "ms", "us", "MFU");
        header = true;
        char c[3][24];
        cell(c[0], 24, h->assumed, "decode_t_fix_s", h->decode_t_fix_s ? "%.4g" : "-",
             h->decode_t_fix_s * 1e3);
        cell(c[1], 24, h->assumed, "decode_t_seq_s", h->decode_t_seq_s ? "%.4g" : "-",
             h->decode_t_seq_s * 1e6);
        cell(c[2], 24, h->assumed, "train_mfu", h->train_mfu ? "%.4g" : "-", h->train_mfu);
        fprintf(out, "%-14s %9s %9s %9s  %s\n", h->name, c[0], c[1], c[2],
                calibrated ? h->calibration : h->origin);
    }
}

/* The "from" column: one source for both constants, else each constant's; built-in ones point
 * to the table below of what they rest on. */
static void decode_from(FILE *out, const struct spec_hardware *h)
{
    char fix_buf[CLI_CONSTANT_SOURCE_MAX], seq_buf[CLI_CONSTANT_SOURCE_MAX];
    const char *fix =
        cli_constant_source(h, h->decode_t_fix_s, "built in", "libra calibrate (below)", fix_buf);
    const char *seq =
        cli_constant_source(h, h->decode_t_seq_s, "built in", "libra calibrate (below)", seq_buf);
    if (strcmp(fix, seq) != 0)
        fprintf(out, "t_fix: %s; t_seq: %s\n", fix, seq);
    else if (h->decode_t_fix_s > 0)
        fprintf(out, "%s\n", fix);
    else
        fprintf(out, "built in: t_fix, t_seq as below\n");
}

/* The engine model's decode constants: t_fix and t_seq per hardware as the cost model uses
 * them (a preset's values, else the built-in ones) and where each came from, then what each
 * built-in constant rests on and the serving engine behind it. */
static void decode_table(FILE *out, const struct spec_presets *p)
{
    fprintf(out, "\ndecode constants per hardware (docs/calibration.md):\n%-14s %9s %9s  %s\n",
            "hardware", "t_fix ms", "t_seq us", "from");
    for (size_t i = 0; i < p->n_hardware; i++) {
        const struct spec_hardware *h = &p->hardware[i];
        struct cost_rollout_params rp;
        cost_rollout_params_default(&rp, h);
        char fix[24], seq[24];
        cell(fix, sizeof fix, h->assumed, "decode_t_fix_s", "%.3g", rp.t_fix_s * 1e3);
        cell(seq, sizeof seq, h->assumed, "decode_t_seq_s", "%.3g", rp.t_seq_s * 1e6);
        fprintf(out, "%-14s %9s %9s  ", h->name, fix, seq);
        decode_from(out, h);
    }
    size_t n;
    const struct cost_decode_source *src = cost_decode_sources(&n);
    int width = 0;
    for (size_t i = 0; i < n; i++)
        width = (int)strlen(src[i].basis) > width ? (int)strlen(src[i].basis) : width;
    fprintf(out, "\n%-9s %-*s  %s\n", "constant", width, "rests on", "engine");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%-9s %-*s  %s\n", src[i].constant, width, src[i].basis, src[i].engine);
}

static void hardware_table(FILE *out, const struct spec_presets *p)
{
    fprintf(out, "%-14s %8s %6s %7s %7s %9s %8s %9s %5s %4s  %s\n", "hardware", "bf16", "HBM",
            "HBM BW", "NVLink", "allreduce", "AR lat", "internode", "GPUs", "conf", "origin");
    fprintf(out, "%-14s %8s %6s %7s %7s %9s %8s %9s %5s %4s\n", "", "TFLOP/s", "GiB", "TB/s",
            "GB/s", "GB/s", "us", "GB/s/GPU", "/node", "");
    for (size_t i = 0; i < p->n_hardware; i++) {
        const struct spec_hardware *h = &p->hardware[i];
        const struct {
            const char *field;
            double v, unit;
        } col[7] = {
            {"bf16_flops_per_s", h->bf16_flops_per_s, 1e12},
            {"hbm_bytes", h->hbm_bytes, 1073741824.0},
            {"hbm_bw_bytes_per_s", h->hbm_bw_bytes_per_s, 1e12},
            {"nvlink_bw_bytes_per_s", h->nvlink_bw_bytes_per_s, 1e9},
            {"allreduce_bus_bw_bytes_per_s", h->allreduce_bus_bw_bytes_per_s, 1e9},
            {"allreduce_latency_s", h->allreduce_latency_s, 1e-6},
            {"inter_node_bw_bytes_per_s", h->inter_node_bw_bytes_per_s, 1e9},
        };
        char c[8][24];
        for (size_t k = 0; k < 7; k++)
            cell(c[k], 24, h->assumed, col[k].field, "%.4g", col[k].v / col[k].unit);
        cell(c[7], 24, h->assumed, "gpus_per_node", "%d", h->gpus_per_node);
        fprintf(out, "%-14s %8s %6s %7s %7s %9s %8s %9s %5s %4s  %s\n", h->name, c[0], c[1], c[2],
                c[3], c[4], c[5], c[6], c[7], spec_confidence_name(h->confidence), h->origin);
    }
    fprintf(out, "\nmemory per GPU as the device reports it, bytes, and where it comes from:\n");
    for (size_t i = 0; i < p->n_hardware; i++) {
        const struct spec_hardware *h = &p->hardware[i];
        char bytes[32];
        cell(bytes, sizeof bytes, h->assumed, "hbm_bytes", "%.0f", h->hbm_bytes);
        fprintf(out, "%-14s %13s  %s\n", h->name, bytes, h->hbm_source);
    }
    decode_table(out, p);
    constants_table(out, p, true);
    constants_table(out, p, false);
}

static void model_table(FILE *out, const struct spec_presets *p)
{
    fprintf(out, "%-14s %6s %6s %5s %3s %4s %6s %6s %4s %4s %9s %8s %8s %4s  %s\n", "model",
            "layers", "hidden", "heads", "kv", "hdim", "ffn", "vocab", "tied", "bias", "experts",
            "params", "active", "conf", "origin");
    fprintf(out, "%-14s %6s %6s %5s %3s %4s %6s %6s %4s %4s %9s %8s %8s\n", "", "", "", "", "", "",
            "", "", "", "qkv", "top-k", "B", "B");
    for (size_t i = 0; i < p->n_models; i++) {
        const struct spec_model *m = &p->models[i];
        const char *a = m->assumed;
        const struct {
            const char *field;
            int v;
        } col[7] = {
            {"layers", m->layers},     {"hidden", m->hidden},     {"heads", m->heads},
            {"kv_heads", m->kv_heads}, {"head_dim", m->head_dim}, {"ffn", m->ffn},
            {"vocab", m->vocab},
        };
        char c[7][24], tied[8], bias[8], experts[32], total[24], active[24];
        for (size_t k = 0; k < 7; k++)
            cell(c[k], 24, a, col[k].field, "%d", col[k].v);
        cell(tied, sizeof tied, a, "tied_embeddings", "%s", m->tied_embeddings ? "yes" : "no");
        cell(bias, sizeof bias, a, "qkv_bias", "%s", m->qkv_bias ? "yes" : "no");
        if (m->experts)
            snprintf(experts, sizeof experts, "%d%s/%d%s", m->experts, mark(a, "experts"), m->top_k,
                     mark(a, "top_k"));
        else
            cell(experts, sizeof experts, a, "experts", "-");
        cell(total, sizeof total, a, "params_total", "%.4g", m->params_total / 1e9);
        cell(active, sizeof active, a, "params_active", "%.4g", m->params_active / 1e9);
        fprintf(out, "%-14s %6s %6s %5s %3s %4s %6s %6s %4s %4s %9s %8s %8s %4s  %s\n", m->name,
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], tied, bias, experts, total, active,
                spec_confidence_name(m->confidence), m->origin);
    }
}

static void workload_table(FILE *out, const struct workload_presets *w)
{
    fprintf(out, "%-16s %7s %7s %6s %5s %9s %8s  %-8s %s\n", "workload", "prompts", "samples",
            "batch", "turns", "max gen", "context", "origin", "tools");
    for (size_t i = 0; i < w->n; i++) {
        const struct workload_preset *x = &w->items[i];
        fprintf(out, "%-16s %7lld %7lld %6lld %5lld %9lld %8lld  %-8s ", x->name,
                (long long)x->prompts, (long long)x->samples, (long long)x->batch_trajectories,
                (long long)x->max_turns, (long long)x->max_generated_tokens,
                (long long)x->context_tokens, x->origin);
        for (size_t t = 0; t < x->n_tools; t++) /* every name whole, however long the list */
            fprintf(out, "%s%s", t ? "," : "", x->tools[t].name);
        fputs(x->n_tools ? "\n" : "-\n", out);
    }
}

static char *table_text(const struct api_presets *p)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        abort(); /* only when memory ran out, fatal as in util/alloc.h */
    hardware_table(out, &p->spec);
    fprintf(out, "\n");
    model_table(out, &p->spec);
    fprintf(out, "\n");
    workload_table(out, &p->workloads);
    fprintf(out, "\n* assumed (listed in the preset's `assumed`; built in: calibration.md says to "
                 "assume it); conf rates the other values.\n"
                 "MoE: compute uses active parameters, memory the total; decode streams every "
                 "expert its batch selects; training may split the experts over expert-parallel "
                 "ranks (their all-to-alls costed).\n");
    fclose(out);
    return text;
}

static json_t *presets_json(const struct api_presets *p, const struct libra_config *cfg)
{
    json_t *doc = spec_config_envelope(SCHEMA, cfg);
    json_t *hw = json_array(), *models = json_array(), *workloads = json_array();
    for (size_t i = 0; i < p->spec.n_hardware; i++)
        json_array_append_new(hw, spec_hardware_to_json(&p->spec.hardware[i]));
    for (size_t i = 0; i < p->spec.n_models; i++)
        json_array_append_new(models, spec_model_to_json(&p->spec.models[i]));
    for (size_t i = 0; i < p->workloads.n; i++)
        json_array_append_new(workloads, workload_preset_summary(&p->workloads.items[i]));
    json_object_set_new(doc, "hardware", hw);
    json_object_set_new(doc, "models", models);
    json_object_set_new(doc, "workloads", workloads);
    json_t *decode = json_array();
    size_t n;
    const struct cost_decode_source *src = cost_decode_sources(&n);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(decode, json_pack("{s:s, s:s, s:s}", "constant", src[i].constant,
                                                "basis", src[i].basis, "engine", src[i].engine));
    json_object_set_new(doc, "decode_constants", decode);
    return doc;
}

int cmd_presets(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("presets"), CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT,
                    "", NULL);
    struct api_presets p = {0};
    struct libra_config cfg;
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            goto out;
        }
        rc = LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
    if (rc == 0 && optind < argc)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind]);
    if (rc == 0)
        rc = cli_common_load(&cc, NULL, &p, &cfg);
    if (rc == 0 && cc.json) {
        json_t *doc = presets_json(&p, &cfg);
        rc = cli_emit_json(&cc, doc);
        json_decref(doc);
    } else if (rc == 0) {
        char *text = table_text(&p);
        rc = cli_write_output(cc.output, text);
        free(text);
    }
out:
    api_presets_free(&p);
    cli_common_free(&cc);
    return rc;
}
