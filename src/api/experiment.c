/*
 * The experiment as the commands and the public API resolve it (api/experiment.h): presets,
 * config, traces in memory (each trajectory copied into an arena, since the reader's buffers
 * live only until its next record), and the routers' costs.
 */
#include "api/experiment.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/arena.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/vec.h"

/* ---- presets -------------------------------------------------------------------------------- */

void api_presets_free(struct api_presets *p)
{
    spec_presets_free(&p->spec);
    workload_presets_free(&p->workloads);
}

/* The next size of a read buffer of cap bytes that holds at most most bytes. */
static size_t grown(size_t cap, size_t most)
{
    return cap < most / 2 ? cap * 2 : most;
}

int api_read_file_max(const char *path, size_t max_bytes, char **text, size_t *len,
                      struct libra_error *err)
{
    FILE *f = fileio_open(path, err);
    if (!f)
        return LIBRA_EIO;
    /* room for one byte past the limit, which tells a file of max_bytes from a longer one
     * without reading a longer one (or an endless stream) to its end, and for the NUL */
    size_t most = max_bytes + 2, cap = grown(1 << 15, most), n = 0, got;
    char *buf = xmalloc(cap);
    while (n <= max_bytes && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n == cap - 1 && n <= max_bytes)
            buf = xrealloc(buf, cap = grown(cap, most));
    }
    int failed = ferror(f) ? errno : 0;
    if (f != stdin)
        fclose(f);
    int rc = failed ? fileio_error(err, path, failed) : 0;
    if (!rc && n > max_bytes)
        rc = error_set(err, strcmp(path, "-") == 0 ? "<stdin>" : path, 0, 0,
                       "larger than %zu bytes, the most a file read whole may hold", max_bytes);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

int api_read_file(const char *path, char **text, size_t *len, struct libra_error *err)
{
    return api_read_file_max(path, API_MAX_FILE_BYTES, text, len, err);
}

/* Adds one user preset file to every registry. */
static int add_preset_file(struct api_presets *p, const char *path, struct libra_error *err)
{
    char *text;
    size_t len;
    int rc = api_read_file(path, &text, &len, err);
    if (rc)
        return rc;
    struct ujson_doc doc;
    rc = ujson_doc_parse(&doc, path, text, len, err);
    free(text);
    if (rc == 0)
        rc = spec_presets_add_doc(&p->spec, &doc, err);
    if (rc == 0)
        rc = workload_presets_add_doc(&p->workloads, &doc, err);
    ujson_doc_free(&doc);
    return rc ? LIBRA_EINVAL : 0;
}

int api_env_preset_files(int (*visit)(void *ctx, const char *path), void *ctx)
{
    const char *env = getenv("LIBRA_PRESETS");
    char *list = xstrdup(env ? env : "");
    int rc = 0;
    for (char *save = NULL, *path = strtok_r(list, ":", &save); path && !rc;
         path = strtok_r(NULL, ":", &save))
        rc = visit(ctx, path);
    free(list);
    return rc;
}

struct preset_load {
    struct api_presets *p;
    struct libra_error *err;
};

static int load_env_file(void *ctx, const char *path)
{
    struct preset_load *l = ctx;
    return add_preset_file(l->p, path, l->err);
}

int api_presets_builtin(struct api_presets *p, struct libra_error *err)
{
    if (spec_presets_init(&p->spec, err) != 0 || workload_presets_init(&p->workloads, err) != 0)
        return LIBRA_EINTERNAL;
    return 0;
}

int api_presets_load(struct api_presets *p, const char *const *files, size_t n_files,
                     struct libra_error *err)
{
    if (api_presets_builtin(p, err) != 0)
        return LIBRA_EINTERNAL;
    int rc = api_env_preset_files(load_env_file, &(struct preset_load){p, err});
    for (size_t i = 0; i < n_files && !rc; i++)
        rc = add_preset_file(p, files[i], err);
    return rc;
}

/* ---- the config ----------------------------------------------------------------------------- */

/* The digest of the presets a resolved cfg names (w: its workload preset): their values, not
 * their origin, since one preset read from two files is one input. */
static uint64_t presets_digest(const struct api_presets *p, const struct libra_config *cfg,
                               const struct workload_preset *w)
{
    json_t *hw = spec_hardware_to_json(spec_hardware_find(&p->spec, cfg->cluster.hardware));
    json_t *model = spec_model_to_json(spec_model_find(&p->spec, cfg->model.name));
    json_object_del(hw, "origin");
    json_object_del(model, "origin");
    json_t *all = json_pack("{s:o,s:o,s:o}", "hardware", hw, "model", model, "workload",
                            workload_preset_to_json(w));
    uint64_t h = spec_json_digest(all);
    json_decref(all);
    return h;
}

int api_config_resolve(const struct api_presets *p, const struct ujson_doc *doc,
                       const struct spec_config_override *flags, size_t n_flags, unsigned reader,
                       struct spec_deferred *deferred, struct libra_config *cfg,
                       struct libra_error *err)
{
    struct spec_config_sources src = {
        .doc = doc, .flags = flags, .n_flags = n_flags, .reader = reader, .deferred = deferred};
    int rc = spec_config_peek(cfg, &src, err);
    if (rc)
        return rc;
    const struct workload_preset *w = workload_preset_find(&p->workloads, cfg->workload.name);
    if (!w) {
        char known[512];
        workload_preset_names(&p->workloads, known, sizeof known);
        return spec_config_key_error(err, &src, "workload.name",
                                     "unknown workload preset '%s' (known: %s)", cfg->workload.name,
                                     known);
    }
    /* the workload preset is a preset layer: its default group size, batch and dynamic sampling */
    char label[96], samples[32], batch[32];
    snprintf(label, sizeof label, "workload preset '%s'", w->name);
    snprintf(samples, sizeof samples, "%lld", (long long)w->samples);
    snprintf(batch, sizeof batch, "%lld", (long long)w->batch_trajectories);
    const struct spec_config_override values[] = {
        {"rl.samples", samples, label},
        {"rl.batch_trajectories", batch, label},
        {"rl.dynamic_sampling", spec_dynamic_sampling_names[w->dynamic_sampling], label},
    };
    src.preset_values = values;
    src.n_preset_values = sizeof values / sizeof *values;
    rc = spec_config_resolve(cfg, &p->spec, &src, err);
    if (rc)
        return rc;
    snprintf(cfg->workload.name, sizeof cfg->workload.name, "%s", w->name);
    cfg->presets_digest = presets_digest(p, cfg, w);
    return 0;
}

const char *api_config_text(const char *text)
{
    return text && strncmp(text, "\xEF\xBB\xBF", 3) == 0 ? text + 3 : text;
}

int api_config_from_text(const char *text, const char *name, struct api_presets *p,
                         struct libra_config *cfg, struct libra_error *err)
{
    int rc = api_presets_load(p, NULL, 0, err);
    if (rc)
        return rc;
    struct ujson_doc doc = {0};
    text = api_config_text(text);
    /* "" labels as NULL does: an error's LINE:COL needs a file name to be followed */
    if (text &&
        (rc = ujson_doc_parse(&doc, name && name[0] ? name : "config", text, strlen(text), err)))
        return rc;
    rc = api_config_resolve(p, text ? &doc : NULL, NULL, 0, 0, NULL, cfg, err);
    ujson_doc_free(&doc);
    return rc;
}

char *api_json_text(const json_t *doc)
{
    char *text = ujson_dump(doc, true);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    memcpy(text + n, "\n", 2);
    return text;
}

/* ---- traces in memory ----------------------------------------------------------------------- */

struct api_loaded_trace {
    char *path;
    struct arena arena;
    VEC(struct trace_traj) trajs;
    char *workload, *model;
    int64_t samples; /* the header's group_size; 0: none */
    struct sim_trace view;
};

static void copy_traj(struct api_loaded_trace *lt, const struct trace_traj *t)
{
    struct trace_traj c = *t;
    c.extra = NULL;
    c.turns = arena_calloc(&lt->arena, t->n_turns, sizeof *c.turns);
    for (size_t i = 0; i < t->n_turns; i++) {
        c.turns[i] = t->turns[i];
        c.turns[i].calls = arena_calloc(&lt->arena, t->turns[i].n_calls, sizeof(*c.turns[i].calls));
        for (size_t k = 0; k < t->turns[i].n_calls; k++) {
            c.turns[i].calls[k] = t->turns[i].calls[k];
            c.turns[i].calls[k].tool = arena_strdup(&lt->arena, t->turns[i].calls[k].tool);
        }
    }
    vec_push(&lt->trajs, c);
}

static int load_trace(const char *path, struct api_loaded_trace *lt, struct libra_error *err)
{
    struct trace_reader *r;
    const struct trace_header *h;
    const struct trace_traj *t;
    lt->path = xstrdup(path);
    arena_init(&lt->arena, 0);
    int rc = trace_reader_open(&r, path, err);
    if (rc == 0)
        rc = trace_reader_header(r, &h, err);
    if (rc == 0) {
        lt->workload = xstrdup(h->workload);
        lt->samples = h->group_size;
        lt->model = h->model ? xstrdup(h->model) : NULL;
        while ((rc = trace_reader_next(r, &t, err)) == 1)
            copy_traj(lt, t);
    }
    trace_reader_close(r);
    if (rc < 0)
        return rc;
    lt->view = (struct sim_trace){lt->trajs.v, lt->trajs.n, lt->workload, lt->model, lt->samples};
    return 0;
}

static void loaded_trace_free(struct api_loaded_trace *lt)
{
    free(lt->path);
    arena_free(&lt->arena);
    vec_free(&lt->trajs);
    free(lt->workload);
    free(lt->model);
}

/* Each trace stays where it was read, as inputs made before hold it. */
int api_traces_get(struct api_traces *ts, const char *path, const struct sim_trace **out,
                   struct libra_error *err)
{
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->v[i]->path, path) == 0) {
            *out = &ts->v[i]->view;
            return 0;
        }
    ts->v = xreallocarray(ts->v, ts->n + 1, sizeof *ts->v);
    struct api_loaded_trace *lt = ts->v[ts->n++] = xcalloc(1, sizeof *lt);
    int rc = load_trace(path, lt, err);
    *out = &lt->view;
    return rc;
}

void api_traces_free(struct api_traces *ts)
{
    for (size_t i = 0; i < ts->n; i++) {
        loaded_trace_free(ts->v[i]);
        free(ts->v[i]);
    }
    free(ts->v);
}

int api_sim_input(const struct api_presets *p, struct api_traces *ts,
                  const struct libra_config *cfg, bool perfetto, struct sim_input *in,
                  struct libra_error *err)
{
    *in = (struct sim_input){.cfg = cfg,
                             .hw = spec_hardware_find(&p->spec, cfg->cluster.hardware),
                             .model = spec_model_find(&p->spec, cfg->model.name),
                             .workload = workload_preset_find(&p->workloads, cfg->workload.name),
                             .perfetto = perfetto};
    int rc = cfg->workload.trace[0] ? api_traces_get(ts, cfg->workload.trace, &in->trace, err) : 0;
    if (rc && !err->file[0]) /* not a line of the trace: its file, which the key names */
        error_prefix(err, "workload.trace");
    return rc;
}

/* ---- routers -------------------------------------------------------------------------------- */

int api_move_costs(const struct api_presets *p, const struct libra_config *cfg,
                   struct cost_move_model *m, struct sched_costs *out, struct libra_error *err)
{
    const struct spec_hardware *hw = spec_hardware_find(&p->spec, cfg->cluster.hardware);
    const struct spec_model *model = spec_model_find(&p->spec, cfg->model.name);
    struct cost_shape shape;
    struct plan_settings st;
    if (!hw || !model || cost_shape_init(&shape, model)) {
        error_set(err, NULL, 0, 0, "internal: resolved presets '%s', '%s' are unusable",
                  cfg->cluster.hardware, cfg->model.name);
        return LIBRA_EINTERNAL;
    }
    plan_settings_from_config(&st, hw, cfg);
    if (cost_move_model_init(m, &shape, hw, &st.rollout, st.chunk_tokens, st.max_seqs) != 0)
        return error_set(err, NULL, 0, 0, "model %s fits no rollout instance on %s", model->name,
                         hw->name);
    *out = (struct sched_costs){
        .decode_s = cost_move_decode_s,
        .move_s = cost_move_s,
        .ctx = m,
        .decision = {.rate = cost_move_rate, .ctx = m, .late_gpus = cfg->cluster.gpus}};
    return 0;
}
