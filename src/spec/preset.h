/*
 * Hardware and model presets: the physical facts every cost model starts from.
 *
 * Built-in presets come from data/presets/*.json (embedded at build time); values and their
 * confidence are taken from ../shared/reference/calibration.md and each preset names its
 * source. User preset files of the same schema add or override presets (`--presets FILE`,
 * LIBRA_PRESETS). Names are lower case ("a800-80g", "qwen3-14b") and looked up
 * case-insensitively.
 */
#ifndef SPEC_PRESET_H
#define SPEC_PRESET_H

#include <stdbool.h>
#include <stddef.h>

#include "libra/libra.h"

#define SPEC_NAME_MAX 48

/* One GPU type and the node it sits in. */
struct spec_hardware {
    char name[SPEC_NAME_MAX];
    double bf16_flops_per_s;             /* dense bf16 tensor peak, FLOP/s */
    double hbm_bytes;                    /* memory capacity per GPU, bytes */
    double hbm_bw_bytes_per_s;           /* memory bandwidth per GPU, bytes/s */
    double nvlink_bw_bytes_per_s;        /* NVLink per GPU, bidirectional, bytes/s */
    double allreduce_bus_bw_bytes_per_s; /* 8-GPU intra-node all-reduce bus bandwidth */
    double allreduce_latency_s;          /* small-message all-reduce latency, s */
    double inter_node_bw_bytes_per_s;    /* inter-node bandwidth per GPU, bytes/s */
    int gpus_per_node;
    char origin[128];  /* "builtin" or the user file that defined it */
    char source[256];  /* where the numbers come from (calibration.md section) */
    char assumed[256]; /* comma-separated fields whose values are assumptions, or "" */
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
    double params_total;  /* parameters, count (memory) */
    double params_active; /* parameters touched per token, count (compute) */
    char origin[128];
    char source[256];
    char assumed[256];
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
 * negative bandwidth) fail with err naming file:line:col and the field. On error p is
 * unchanged.
 */
int spec_presets_add_text(struct spec_presets *p, const char *name, const char *text, size_t len,
                          struct libra_error *err);

/* Releases p's arrays; a zeroed p is fine. */
void spec_presets_free(struct spec_presets *p);

/* Look-ups by case-insensitive name; NULL when absent. Pointers stay valid until the next
 * add or free. */
const struct spec_hardware *spec_hardware_find(const struct spec_presets *p, const char *name);
const struct spec_model *spec_model_find(const struct spec_presets *p, const char *name);

#endif
