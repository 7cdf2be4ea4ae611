/*
 * Hardware and model presets: the physical facts every cost model starts from.
 *
 * Built-in presets come from the JSON files in data/presets/ (embedded at build time); values and
 * their confidence are taken from ../shared/reference/calibration.md and each preset names its
 * source. User preset files of the same schema add or override presets (`--presets FILE`,
 * LIBRA_PRESETS). Names are lower case ("a800-80g", "qwen3-14b") and looked up
 * case-insensitively.
 *
 * A preset file is one JSON object: {"schema": "libra.presets/1", "hardware": [...],
 * "models": [...], "workloads": [...]}. Each hardware or model entry is an object whose keys
 * are the rows of spec_hardware_fields() / spec_model_fields() (docs/config.md lists them).
 * A GPU's memory capacity is what the device reports as its total (the CUDA runtime's
 * cudaMemGetInfo total, which an engine's memory fraction multiplies), in bytes, with the
 * printout it was taken from in hbm_source; bandwidths and FLOP rates stay in the vendor
 * sheets' decimal units. The "workloads" section belongs to workload/preset.h, which reads the same
 * files; spec/ only skips it. "schema" is any string (documentation).
 */
#ifndef SPEC_PRESET_H
#define SPEC_PRESET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "libra/libra.h"
#include "util/json.h"
#include "spec/schema.h"

#define SPEC_NAME_MAX 48

/* Bytes of a preset's origin, NUL included: Linux's PATH_MAX, the longest path a preset file
 * can be opened by, so that the origin `libra presets` shows names the file whole. */
#define SPEC_ORIGIN_MAX 4096

/* calibration.md's confidence scale: H primary and unambiguous, M indirect, L weak. */
enum spec_confidence { SPEC_CONF_HIGH, SPEC_CONF_MEDIUM, SPEC_CONF_LOW };

/* One GPU type and the node it sits in. */
struct spec_hardware {
    char name[SPEC_NAME_MAX];
    double bf16_flops_per_s;             /* dense bf16 tensor peak, FLOP/s */
    double hbm_bytes;                    /* memory capacity per GPU as the device reports it */
    char hbm_source[256];                /* where hbm_bytes was read, or "not given" */
    double hbm_bw_bytes_per_s;           /* memory bandwidth per GPU, bytes/s */
    double nvlink_bw_bytes_per_s;        /* NVLink per GPU, bidirectional, bytes/s */
    double allreduce_bus_bw_bytes_per_s; /* 8-GPU intra-node all-reduce bus bandwidth */
    double allreduce_latency_s;          /* small-message all-reduce latency, s */
    double inter_node_bw_bytes_per_s;    /* inter-node bandwidth per GPU, bytes/s */
    int gpus_per_node;
    /* Cost-model constants fitted to this machine by `libra calibrate` (docs/calibrate.md);
     * 0 takes the built-in value (docs/calibration.md). */
    double decode_t_fix_s;           /* fixed overhead of one engine iteration, s */
    double decode_t_seq_s;           /* per running sequence per iteration, s */
    double train_mfu;                /* trainer FLOPs achieved / bf16 peak */
    char calibration[512];           /* what they were fitted on, or "" */
    enum spec_confidence confidence; /* of the values not listed in assumed */
    char origin[SPEC_ORIGIN_MAX];    /* "builtin" or the user file that defined it */
    char source[256];                /* where the numbers come from (calibration.md section) */
    char assumed[256];               /* comma-separated fields whose values are assumptions */
    char note[512];                  /* derivations and caveats, or "" */
};

/* One transformer model shape. MoE models set experts > 0. */
struct spec_model {
    char name[SPEC_NAME_MAX];
    int layers;
    int hidden;
    int heads;    /* query heads */
    int kv_heads; /* divides heads (GQA) */
    int head_dim;
    int ffn; /* dense FFN intermediate size (0 for pure MoE) */
    int vocab;
    bool tied_embeddings;
    bool qkv_bias;
    int experts;          /* routed experts, 0 for dense */
    int top_k;            /* experts per token */
    int expert_ffn;       /* intermediate size of one expert */
    double params_total;  /* parameters, count (memory); derived from the shape unless given */
    double params_active; /* parameters touched per token, count (compute); ditto */
    enum spec_confidence confidence;
    char origin[SPEC_ORIGIN_MAX];
    char source[256];
    char assumed[256];
    char note[512]; /* for MoE: compute uses params_active, memory params_total */
};

/* The loaded preset registry. */
struct spec_presets {
    struct spec_hardware *hardware;
    size_t n_hardware;
    struct spec_model *models;
    size_t n_models;
};

/* Loads the built-in presets into p (zeroed first). Returns 0 or LIBRA_EINVAL (a bug in an
 * embedded file, reported in err). */
int spec_presets_init(struct spec_presets *p, struct libra_error *err);

/*
 * Adds the presets in a user preset file (text of len bytes, name used in messages); a preset
 * with an existing name replaces it and records name as its origin. Validates every field:
 * unknown keys, wrong types and impossible values (zero heads, kv_heads not dividing heads,
 * negative bandwidth) fail with err naming file:line:col and the field. A name defined twice
 * in one file is an error at the second that names the first's line:col. Names are lower case
 * (another is an error), so no two differ only in case. On error p is unchanged.
 */
int spec_presets_add_text(struct spec_presets *p, const char *name, const char *text, size_t len,
                          struct libra_error *err);

/* As spec_presets_add_text, from a file already parsed (its name as the origin): a preset file
 * read once for every section's reader. */
int spec_presets_add_doc(struct spec_presets *p, const struct ujson_doc *doc,
                         struct libra_error *err);

/* Releases p's arrays; a zeroed p is fine. */
void spec_presets_free(struct spec_presets *p);

/* Look-ups by case-insensitive name; NULL when absent. Pointers stay valid until the next
 * add or free. */
const struct spec_hardware *spec_hardware_find(const struct spec_presets *p, const char *name);
const struct spec_model *spec_model_find(const struct spec_presets *p, const char *name);

/*
 * Parameter counts derived from a model's shape (SwiGLU MLP, RMSNorm, QK-norm ignored — it is
 * 2·head_dim per layer): attention (+ QKV bias when set), MLP or routed experts plus router,
 * norms, embeddings (once when tied). total counts every expert, active only top_k of them.
 */
void spec_model_params(const struct spec_model *m, double *total, double *active);

/* New JSON objects describing one preset: every row plus "origin" ("assumed" as an array). */
json_t *spec_hardware_to_json(const struct spec_hardware *h);
json_t *spec_model_to_json(const struct spec_model *m);

/* The field tables of the two kinds (for docs and help). */
const struct spec_field *spec_hardware_fields(size_t *n);
const struct spec_field *spec_model_fields(size_t *n);

/* Names of the confidence levels: "H", "M", "L". */
const char *spec_confidence_name(enum spec_confidence c);

#endif
