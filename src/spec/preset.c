/*
 * The preset registry; see preset.h.
 *
 * A preset file is read completely into a scratch registry and checked before anything is
 * merged, so a bad user file never leaves a half-applied set of presets behind. Field checks
 * come from the row tables below; what a single row cannot say (kv_heads divides heads; a
 * model sets the MLP fields of its kind and only those, as the cost model reads no others: ffn
 * for a dense model, experts, top_k and expert_ffn for an MoE one; "assumed" names real fields)
 * is checked after the row pass.
 */
#include "spec/preset.h"

#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/alloc.h"
#include "util/embed.h"
#include "util/error.h"
#include "util/map.h"

/* The top-level keys of a preset file; "workloads" is read by workload/preset.h. */
static const char *const sections[] = {"schema", "hardware", "models", "workloads", NULL};

static const char *const confidence_names[] = {
    [SPEC_CONF_HIGH] = "H",
    [SPEC_CONF_MEDIUM] = "M",
    [SPEC_CONF_LOW] = "L",
    NULL,
};

/* Rows every preset kind shares: its name and where its numbers come from. */
#define NAME_ROW(T)                                                                                \
    SPEC_STRING_ROW(T, name, SPEC_REQUIRED, "", NULL, 0,                                           \
                    "preset name: lower-case letters, digits, '.', '-', '_', starting with a "     \
                    "letter or digit; a config or flag may write it in any case (`A800-80G` "      \
                    "names `a800-80g`)")
#define PROVENANCE_ROWS(T)                                                                         \
    SPEC_ENUM_ROW(T, confidence, 0, confidence_names, SPEC_CONF_LOW, NULL, 0,                      \
                  "H, M or L as in calibration.md, for the values not listed in assumed"),         \
        SPEC_STRING_ROW(T, source, 0, "", NULL, 0, "where the values come from"),                  \
        SPEC_LIST_ROW(T, assumed, 0, "", NULL, 0, "fields whose values are assumptions"),          \
        SPEC_STRING_ROW(T, note, 0, "", NULL, 0, "derivations and caveats")

/* A device figure within what a GPU can have, so that every cost built on it stays finite. */
#define HW_FIGURE(m, unit, lo, hi, doc)                                                            \
    SPEC_DOUBLE_ROW(struct spec_hardware, m, SPEC_REQUIRED, unit, 0, lo, hi, NULL, 0, doc)

#define HW_CONSTANT(m, unit, hi, doc)                                                              \
    SPEC_DOUBLE_ROW(struct spec_hardware, m, 0, unit, 0, 0, hi, NULL, 0, doc)

static const struct spec_field hardware_fields[] = {
    NAME_ROW(struct spec_hardware),
    HW_FIGURE(bf16_flops_per_s, "FLOP/s", 1e9, 1e18,
              "dense bf16 tensor peak per GPU (not the sparse figure)"),
    HW_FIGURE(hbm_bytes, "bytes", 1e8, 1e13,
              "memory capacity per GPU as the device reports it: the CUDA runtime's total "
              "(torch.cuda.get_device_properties(0).total_memory), not the nameplate's decimal GB"),
    SPEC_STRING_ROW(struct spec_hardware, hbm_source, 0, "not given", NULL, 0,
                    "where hbm_bytes comes from: the printout (nvidia-smi, torch) and its URL"),
    HW_FIGURE(hbm_bw_bytes_per_s, "bytes/s", 1e9, 1e15, "memory bandwidth per GPU"),
    HW_FIGURE(nvlink_bw_bytes_per_s, "bytes/s", 1e6, 1e15,
              "NVLink bandwidth per GPU, bidirectional"),
    HW_FIGURE(allreduce_bus_bw_bytes_per_s, "bytes/s", 1e6, 1e15,
              "all-reduce bus bandwidth across the GPUs of one node, large messages"),
    HW_FIGURE(allreduce_latency_s, "s", 1e-9, 1, "small-message all-reduce latency inside a node"),
    HW_FIGURE(inter_node_bw_bytes_per_s, "bytes/s", 1e6, 1e15,
              "inter-node bandwidth per GPU (a node's NICs divided by its GPUs)"),
    SPEC_INT_ROW(struct spec_hardware, gpus_per_node, SPEC_REQUIRED, "GPUs", 0, 1, 64, NULL, 0,
                 "GPUs in one node (one NVLink domain)"),
    HW_CONSTANT(decode_t_fix_s, "s", 1,
                "fixed overhead of one engine iteration (scheduling, launches, sampling); 0 "
                "takes the built-in fit, `libra calibrate` fits it"),
    HW_CONSTANT(decode_t_seq_s, "s", 0.1,
                "engine overhead per running sequence per iteration; 0 takes the built-in "
                "assumption, `libra calibrate` fits it"),
    HW_CONSTANT(train_mfu, "", 1,
                "trainer FLOPs achieved over the bf16 peak; 0 takes the built-in assumption, "
                "`libra calibrate` fits it"),
    SPEC_STRING_ROW(struct spec_hardware, calibration, 0, "", NULL, 0,
                    "what `libra calibrate` fitted the constants above on; \"\" when built in"),
    PROVENANCE_ROWS(struct spec_hardware),
};

#define MODEL_INT(m, fl, lo, hi, doc)                                                              \
    SPEC_INT_ROW(struct spec_model, m, fl, "", 0, lo, hi, NULL, 0, doc)
#define MODEL_PARAMS(m, doc)                                                                       \
    SPEC_DOUBLE_ROW(struct spec_model, m, 0, "parameters", 0, 0, INFINITY, NULL, 0, doc)

static const struct spec_field model_fields[] = {
    NAME_ROW(struct spec_model),
    MODEL_INT(layers, SPEC_REQUIRED, 1, 1024, "transformer layers"),
    MODEL_INT(hidden, SPEC_REQUIRED, 1, 1 << 20, "hidden size"),
    MODEL_INT(heads, SPEC_REQUIRED, 1, 1024, "query heads"),
    MODEL_INT(kv_heads, SPEC_REQUIRED, 1, 1024, "key/value heads; must divide heads"),
    MODEL_INT(head_dim, SPEC_REQUIRED, 1, 4096, "dimension of one head"),
    MODEL_INT(ffn, 0, 0, 1 << 24,
              "dense MLP intermediate size; an MoE model leaves it 0 (its MLP is its experts)"),
    MODEL_INT(vocab, SPEC_REQUIRED, 1, 1 << 24, "vocabulary size"),
    SPEC_BOOL_ROW(struct spec_model, tied_embeddings, 0, 0, NULL, 0,
                  "input embedding and LM head share weights"),
    SPEC_BOOL_ROW(struct spec_model, qkv_bias, 0, 0, NULL, 0, "Q, K and V projections have biases"),
    MODEL_INT(experts, 0, 0, 4096, "routed experts; 0 for dense models"),
    MODEL_INT(top_k, 0, 0, 4096, "experts per token (MoE only: a dense model leaves it 0)"),
    MODEL_INT(expert_ffn, 0, 0, 1 << 24,
              "intermediate size of one expert (MoE only: a dense model leaves it 0)"),
    MODEL_PARAMS(params_total, "all parameters (memory), as the shape counts them: a count "
                               "given is checked against the shape's (within 2 %); 0: none"),
    MODEL_PARAMS(params_active, "parameters used per token (compute), as the shape counts them: "
                                "a count given is checked likewise; 0: none"),
    PROVENANCE_ROWS(struct spec_model),
};

#define N_HARDWARE_FIELDS (sizeof hardware_fields / sizeof *hardware_fields)
#define N_MODEL_FIELDS (sizeof model_fields / sizeof *model_fields)

const struct spec_field *spec_hardware_fields(size_t *n)
{
    *n = N_HARDWARE_FIELDS;
    return hardware_fields;
}

const struct spec_field *spec_model_fields(size_t *n)
{
    *n = N_MODEL_FIELDS;
    return model_fields;
}

const char *spec_confidence_name(enum spec_confidence c)
{
    return c >= SPEC_CONF_HIGH && c <= SPEC_CONF_LOW ? confidence_names[c] : "?";
}

void spec_model_params(const struct spec_model *m, double *total, double *active)
{
    double h = m->hidden, q = (double)m->heads * m->head_dim,
           kv = (double)m->kv_heads * m->head_dim;
    double attn = h * q + 2 * h * kv + q * h + (m->qkv_bias ? q + 2 * kv : 0);
    double norms = 2 * h;
    double mlp = 3 * h * m->ffn, mlp_active = mlp;
    if (m->experts > 0) {
        double expert = 3 * h * m->expert_ffn, router = h * m->experts;
        mlp = m->experts * expert + router;
        mlp_active = m->top_k * expert + router;
    }
    double embed = (double)m->vocab * h * (m->tied_embeddings ? 1 : 2) + h; /* + final norm */
    *total = m->layers * (attn + norms + mlp) + embed;
    *active = m->layers * (attn + norms + mlp_active) + embed;
}

/* ---- checks a row cannot express --------------------------------------------------------- */

/* Reports a problem with member key of the entry obj at path: at the member when present,
 * else at the entry. */
static int member_error(struct libra_error *err, const struct ujson_doc *doc, const char *path,
                        const json_t *obj, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int member_error(struct libra_error *err, const struct ujson_doc *doc, const char *path,
                        const json_t *obj, const char *key, const char *fmt, ...)
{
    char msg[256], member[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!json_object_get(obj, key))
        return ujson_errorf(err, doc, path, "%s: %s", key, msg);
    snprintf(member, sizeof member, "%s/%s", path, key);
    return ujson_errorf(err, doc, member, "%s", msg);
}

static bool valid_name(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr(".-_", *s)))
            return false;
    return true;
}

static int check_name(const char *name, const struct ujson_doc *doc, const char *path,
                      const json_t *obj, struct libra_error *err)
{
    if (valid_name(name))
        return 0;
    return member_error(err, doc, path, obj, "name",
                        "'%s' must be lower-case letters, digits, '.', '-', '_', starting with "
                        "a letter or digit",
                        name);
}

/* The most a parameter count given may differ from the shape's: a model card rounds. */
#define PARAMS_TOLERANCE 0.02

/* A parameter count the preset gives (0: none). The cost model counts parameters from the
 * shape (cost/shape.c), so a count is a check of the shape, not an input: one that disagrees
 * would be shown and ignored. */
static int check_count(const struct ujson_doc *doc, const char *path, const json_t *obj,
                       const char *key, double given, double shape, struct libra_error *err)
{
    if (given == 0 || fabs(given - shape) <= PARAMS_TOLERANCE * shape)
        return 0;
    return member_error(err, doc, path, obj, key,
                        "%.6g is not the shape's count, %.6g: the cost model counts parameters "
                        "from the shape (layers, hidden, heads, ffn or experts, vocab), so a "
                        "count given must agree within 2 %% (0: the shape's)",
                        given, shape);
}

/* Every member of "assumed" must name a value row of the kind (not name or provenance). */
static int check_assumed(const struct spec_field *fields, size_t n, const char *assumed,
                         const struct ujson_doc *doc, const char *path, const json_t *obj,
                         struct libra_error *err)
{
    char copy[256];
    const struct spec_field *seen[sizeof copy / 2]; /* each member and its comma */
    size_t n_seen = 0;
    snprintf(copy, sizeof copy, "%s", assumed);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        const struct spec_field *f = spec_field_find(fields, n, tok);
        if (!f || f == fields || f->type == SPEC_ENUM || f->type == SPEC_STRING ||
            f->type == SPEC_LIST)
            return member_error(err, doc, path, obj, "assumed", "'%s' is not a value field", tok);
        for (size_t i = 0; i < n_seen; i++) /* as a config list, a member given once */
            if (seen[i] == f)
                return member_error(err, doc, path, obj, "assumed", "'%s' is listed twice", tok);
        seen[n_seen++] = f;
    }
    return 0;
}

static int check_model(struct spec_model *m, const struct ujson_doc *doc, const char *path,
                       const json_t *obj, struct libra_error *err)
{
    if (m->heads % m->kv_heads != 0)
        return member_error(err, doc, path, obj, "kv_heads", "%d does not divide heads (%d)",
                            m->kv_heads, m->heads);
    if (m->experts == 0) {
        if (m->ffn < 1)
            return member_error(err, doc, path, obj, "ffn",
                                "must be >= 1 for a dense model (experts 0)");
        if (m->top_k || m->expert_ffn)
            return member_error(err, doc, path, obj, m->top_k ? "top_k" : "expert_ffn",
                                "only MoE models (experts > 0) set it");
    } else {
        if (m->top_k < 1 || m->top_k > m->experts)
            return member_error(err, doc, path, obj, "top_k", "must be in 1..experts (%d)",
                                m->experts);
        if (m->expert_ffn < 1)
            return member_error(err, doc, path, obj, "expert_ffn", "must be >= 1 for an MoE model");
        if (m->ffn)
            return member_error(err, doc, path, obj, "ffn",
                                "only dense models (experts 0) set it: an MoE model's MLP is its "
                                "experts (expert_ffn), and shared experts are not modelled");
    }
    double total, active;
    spec_model_params(m, &total, &active);
    int rc = check_count(doc, path, obj, "params_total", m->params_total, total, err);
    if (!rc)
        rc = check_count(doc, path, obj, "params_active", m->params_active, active, err);
    m->params_total = total; /* what the cost model uses, and `libra presets` shows */
    m->params_active = active;
    return rc;
}

/* ---- reading one file ---------------------------------------------------------------------- */

struct reading {
    const struct ujson_doc *doc;
    const char *origin;
    struct spec_presets *out; /* the scratch registry of this file */
    struct map hardware_at;   /* name -> index in out->hardware (names are lower case) */
    struct map model_at;      /* name -> index in out->models */
};

/* The index of the entry of map at that has name, or -1; else records name at index n. A file
 * of thousands of presets is checked in linear time. */
static int64_t seen_at(struct map *at, const char *name, size_t n)
{
    bool inserted;
    union map_value *v = map_slot(at, name, &inserted);
    if (!inserted)
        return v->i64;
    v->i64 = (int64_t)n;
    return -1;
}

/*
 * Refuses the entry obj at path, whose name an earlier entry of this file's section (index
 * first: entries are kept in file order) already has, at its name and naming the earlier one's
 * position. Names are lower case, and found ignoring case, so one equal ignoring case is this.
 */
static int twice_error(const struct reading *r, const char *section, size_t first, const char *path,
                       const json_t *obj, const char *name, struct libra_error *err)
{
    char at[64];
    int line = 0, col = 0;
    snprintf(at, sizeof at, "%s/%zu/name", section, first);
    ujson_locate(r->doc, at, &line, &col);
    return member_error(err, r->doc, path, obj, "name",
                        "'%s' is defined twice in this file, first at %d:%d (%s.%zu.name)", name,
                        line, col, section, first);
}

static int read_hardware(struct reading *r, const char *path, const json_t *obj,
                         struct libra_error *err)
{
    struct spec_hardware h;
    memset(&h, 0, sizeof h);
    spec_fields_defaults(hardware_fields, N_HARDWARE_FIELDS, &h);
    int rc = spec_fields_read(hardware_fields, N_HARDWARE_FIELDS, "", r->doc, path, obj, &h, err);
    if (!rc)
        rc = check_name(h.name, r->doc, path, obj, err);
    if (!rc)
        rc = check_assumed(hardware_fields, N_HARDWARE_FIELDS, h.assumed, r->doc, path, obj, err);
    int64_t first = rc ? -1 : seen_at(&r->hardware_at, h.name, r->out->n_hardware);
    if (first >= 0)
        rc = twice_error(r, "hardware", (size_t)first, path, obj, h.name, err);
    if (rc)
        return rc;
    snprintf(h.origin, sizeof h.origin, "%s", r->origin);
    r->out->hardware = xreallocarray(r->out->hardware, r->out->n_hardware + 1, sizeof h);
    r->out->hardware[r->out->n_hardware++] = h;
    return 0;
}

static int read_model(struct reading *r, const char *path, const json_t *obj,
                      struct libra_error *err)
{
    struct spec_model m;
    memset(&m, 0, sizeof m);
    spec_fields_defaults(model_fields, N_MODEL_FIELDS, &m);
    int rc = spec_fields_read(model_fields, N_MODEL_FIELDS, "", r->doc, path, obj, &m, err);
    if (!rc)
        rc = check_name(m.name, r->doc, path, obj, err);
    if (!rc)
        rc = check_assumed(model_fields, N_MODEL_FIELDS, m.assumed, r->doc, path, obj, err);
    if (!rc)
        rc = check_model(&m, r->doc, path, obj, err);
    int64_t first = rc ? -1 : seen_at(&r->model_at, m.name, r->out->n_models);
    if (first >= 0)
        rc = twice_error(r, "models", (size_t)first, path, obj, m.name, err);
    if (rc)
        return rc;
    snprintf(m.origin, sizeof m.origin, "%s", r->origin);
    r->out->models = xreallocarray(r->out->models, r->out->n_models + 1, sizeof m);
    r->out->models[r->out->n_models++] = m;
    return 0;
}

static int read_section(struct reading *r, const char *key, const json_t *list,
                        struct libra_error *err)
{
    if (!json_is_array(list))
        return ujson_errorf(err, r->doc, key, "must be an array of presets");
    size_t i;
    json_t *obj;
    json_array_foreach(list, i, obj)
    {
        char path[64];
        snprintf(path, sizeof path, "%s/%zu", key, i);
        int rc;
        if (strcmp(key, "hardware") == 0)
            rc = read_hardware(r, path, obj, err);
        else
            rc = read_model(r, path, obj, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Whether v is a preset file's schema: libra.presets/1 (a file of workloads alone, as the
 * built-in one, may say libra.workload-presets/1); another version or document is refused. */
static bool known_schema(const json_t *v)
{
    const char *s = json_string_value(v);
    return s && (strcmp(s, "libra.presets/1") == 0 || strcmp(s, "libra.workload-presets/1") == 0);
}

static int read_file(struct reading *r, struct libra_error *err)
{
    const json_t *root = r->doc->root;
    if (!json_is_object(root))
        return ujson_errorf(err, r->doc, "", "a preset file must be a JSON object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v)
    {
        int rc = 0;
        if (strcmp(key, "schema") == 0 && !known_schema(v)) {
            rc = ujson_errorf(err, r->doc, key, "must be \"libra.presets/1\"");
        } else if (strcmp(key, "hardware") == 0 || strcmp(key, "models") == 0) {
            rc = read_section(r, key, v, err);
        } else if (strcmp(key, "schema") != 0 && strcmp(key, "workloads") != 0) {
            char hint[96];
            spec_suggest(sections, key, hint, sizeof hint);
            rc = ujson_errorf(err, r->doc, key, "unknown preset section%s", hint);
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- merging a checked file into the registry ----------------------------------------- */

/* Adds the n entries of add (each size bytes, its name first) to the *n_p of *p, one of the same
 * name replaced, through a map of the names *p holds (lower case, as every entry's). */
_Static_assert(offsetof(struct spec_hardware, name) == 0 && offsetof(struct spec_model, name) == 0,
               "merge_entries reads an entry's name at its start");
static void merge_entries(void **p, size_t *n_p, const void *add, size_t n, size_t size)
{
    struct map at = {0};
    for (size_t i = 0; i < *n_p; i++)
        seen_at(&at, (const char *)*p + i * size, i);
    for (size_t i = 0; i < n; i++) {
        const char *entry = (const char *)add + i * size;
        int64_t old = seen_at(&at, entry, *n_p);
        if (old < 0) {
            *p = xreallocarray(*p, *n_p + 1, size);
            old = (int64_t)(*n_p)++;
        }
        memcpy((char *)*p + (size_t)old * size, entry, size);
    }
    map_free(&at);
}

static void merge(struct spec_presets *p, const struct spec_presets *add)
{
    merge_entries((void **)&p->hardware, &p->n_hardware, add->hardware, add->n_hardware,
                  sizeof *p->hardware);
    merge_entries((void **)&p->models, &p->n_models, add->models, add->n_models, sizeof *p->models);
}

static int add_doc(struct spec_presets *p, const struct ujson_doc *doc, const char *origin,
                   struct libra_error *err)
{
    struct spec_presets scratch;
    memset(&scratch, 0, sizeof scratch);
    struct reading r = {.doc = doc, .origin = origin, .out = &scratch};
    int rc = read_file(&r, err);
    map_free(&r.hardware_at);
    map_free(&r.model_at);
    if (rc == 0)
        merge(p, &scratch);
    spec_presets_free(&scratch);
    return rc;
}

static int add_text(struct spec_presets *p, const char *name, const char *origin, const char *text,
                    size_t len, struct libra_error *err)
{
    struct ujson_doc doc;
    int rc = ujson_doc_parse(&doc, name, text, len, err);
    if (rc)
        return rc;
    rc = add_doc(p, &doc, origin, err);
    ujson_doc_free(&doc);
    return rc;
}

int spec_presets_init(struct spec_presets *p, struct libra_error *err)
{
    memset(p, 0, sizeof *p);
    for (const struct embedded_file *f = embedded_files; f->name; f++) {
        char name[256];
        snprintf(name, sizeof name, "data/presets/%s", f->name);
        int rc = add_text(p, name, "builtin", f->data, f->len, err);
        if (rc) {
            spec_presets_free(p);
            return rc;
        }
    }
    return 0;
}

int spec_presets_add_text(struct spec_presets *p, const char *name, const char *text, size_t len,
                          struct libra_error *err)
{
    return add_text(p, name, name, text, len, err);
}

int spec_presets_add_doc(struct spec_presets *p, const struct ujson_doc *doc,
                         struct libra_error *err)
{
    return add_doc(p, doc, doc->name, err);
}

void spec_presets_free(struct spec_presets *p)
{
    if (!p)
        return;
    free(p->hardware);
    free(p->models);
    memset(p, 0, sizeof *p);
}

const struct spec_hardware *spec_hardware_find(const struct spec_presets *p, const char *name)
{
    for (size_t i = 0; i < p->n_hardware; i++)
        if (strcasecmp(p->hardware[i].name, name) == 0)
            return &p->hardware[i];
    return NULL;
}

const struct spec_model *spec_model_find(const struct spec_presets *p, const char *name)
{
    for (size_t i = 0; i < p->n_models; i++)
        if (strcasecmp(p->models[i].name, name) == 0)
            return &p->models[i];
    return NULL;
}

static json_t *with_origin(json_t *o, const char *origin)
{
    json_object_set_new(o, "origin", json_string(origin));
    return o;
}

json_t *spec_hardware_to_json(const struct spec_hardware *h)
{
    return with_origin(spec_fields_to_json(hardware_fields, N_HARDWARE_FIELDS, "", h), h->origin);
}

json_t *spec_model_to_json(const struct spec_model *m)
{
    return with_origin(spec_fields_to_json(model_fields, N_MODEL_FIELDS, "", m), m->origin);
}
