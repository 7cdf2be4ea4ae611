/*
 * The experiment as every entry point resolves it: the presets, the effective config, the
 * traces it names read into memory, and the costs of its rollout engines for routers.
 *
 * Why a module of its own: the commands (cli/) and the public API (include/libra/libra.h) must
 * see the same experiment for the same config text — `libra plan cfg.json --json` and
 * libra_plan() of that text print the same document — so both start here. Nothing here
 * prints: failures come back as LIBRA_E* with a struct libra_error, which the commands print
 * and the public API hands to its caller. The environment (LIBRA_PRESETS) is read here and
 * nowhere below.
 *
 * Reentrant: nothing is shared between calls; each caller owns what it loads.
 */
#ifndef API_EXPERIMENT_H
#define API_EXPERIMENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cost/move.h"
#include "libra/libra.h"
#include "sched/router.h"
#include "sim/sim.h"
#include "spec/config.h"
#include "spec/preset.h"
#include "util/json.h"
#include "workload/preset.h"

/*
 * Every kind of preset. A preset file may hold several kinds; each registry reads its own
 * sections of it. A new kind is one more member here, loaded in api_presets_load.
 */
struct api_presets {
    struct spec_presets spec;          /* hardware and models */
    struct workload_presets workloads; /* workload/preset.h */
};

/*
 * Loads into p (zeroed) the built-in presets, then each file of LIBRA_PRESETS (colon-separated),
 * then files[0..n_files). Returns 0; LIBRA_EIO (a file cannot be read); LIBRA_EINVAL (a file is
 * not a valid preset file: err at FILE:LINE:COL); LIBRA_EINTERNAL (a built-in preset is
 * broken). The caller frees p (api_presets_free) in every case.
 */
int api_presets_load(struct api_presets *p, const char *const *files, size_t n_files,
                     struct libra_error *err);

/* Loads into p (zeroed) the built-in presets alone, for what reads no preset file (the default
 * config's digest of `libra trace stats`). Returns 0 or LIBRA_EINTERNAL (a built-in preset is
 * broken); the caller frees p in every case. */
int api_presets_builtin(struct api_presets *p, struct libra_error *err);

/* Calls visit(ctx, path) for each file of LIBRA_PRESETS (colon-separated; empty items skipped),
 * in order, until one returns non-zero; returns that, or 0. */
int api_env_preset_files(int (*visit)(void *ctx, const char *path), void *ctx);

/* Releases p; a zeroed p is fine. */
void api_presets_free(struct api_presets *p);

/*
 * The most bytes a file read whole (a config, a result, a benchmark result, a log) may hold:
 * far above any real one, it keeps an endless stream (/dev/zero, a pipe) from growing the
 * buffer until the allocator gives up. Traces are read a line at a time, not whole.
 */
#define API_MAX_FILE_BYTES ((size_t)1 << 30)

/*
 * Reads the file at path ("-": standard input) whole into a malloc'd NUL-terminated buffer.
 * Returns 0; LIBRA_EIO with err "cannot read 'PATH': REASON" (no position); or LIBRA_EINVAL
 * with err "PATH: larger than N bytes, ..." once it passes API_MAX_FILE_BYTES (reading stops
 * there).
 */
int api_read_file(const char *path, char **text, size_t *len, struct libra_error *err);

/* api_read_file with a limit of max_bytes instead (< SIZE_MAX - 1). */
int api_read_file_max(const char *path, size_t max_bytes, char **text, size_t *len,
                      struct libra_error *err);

/*
 * Resolves the effective config into cfg: defaults < hardware preset < the workload preset the
 * result names (its rl.samples and rl.batch_trajectories) < doc (NULL: none) < flags, in order
 * (labels name them in errors); reader is the SPEC_READ_* bit of the command resolving (a flag
 * setting a key it does not read to other than its default is refused; 0: any key); deferred
 * is NULL, or a grid point's list of the keys inert there (struct spec_deferred). Sets
 * cfg->presets_digest from the values of the presets cfg names, so that its digest covers
 * them wherever it is computed. Returns 0,
 * or LIBRA_EINVAL with err where the offending value came from (an unknown key at
 * FILE:LINE:COL, an unknown workload preset naming the known ones).
 */
int api_config_resolve(const struct api_presets *p, const struct ujson_doc *doc,
                       const struct spec_config_override *flags, size_t n_flags, unsigned reader,
                       struct spec_deferred *deferred, struct libra_config *cfg,
                       struct libra_error *err);

/* text past a UTF-8 byte order mark at its start, as the commands read a file (fileio_open):
 * LINE:COL count from past it. NULL stays NULL. */
const char *api_config_text(const char *text);

/*
 * The effective config of a config text (the JSON a config file holds, past a UTF-8 byte order
 * mark at its start as the commands read a file; NULL: none, the built-in default experiment)
 * named name in errors (NULL or "": "config"), with the presets
 * api_presets_load(p, NULL, 0) loads into p (zeroed; the caller frees it in every case). Returns as
 * the two.
 */
int api_config_from_text(const char *text, const char *name, struct api_presets *p,
                         struct libra_config *cfg, struct libra_error *err);

/* Pretty JSON of doc and a newline, malloc'd: what every --json output prints. */
char *api_json_text(const json_t *doc);

/* ---- traces in memory ----------------------------------------------------------------------- */

struct api_loaded_trace;

/* The traces read so far, each once; zero-initialise, free with api_traces_free. */
struct api_traces {
    struct api_loaded_trace **v; /* each read once, never moved */
    size_t n;
};

void api_traces_free(struct api_traces *ts);

/* The trace at path into *out, read into ts on first use (later calls, api_sim_input's too,
 * find it there). Returns 0, or the trace's error: LIBRA_EIO, or LIBRA_EINVAL at
 * FILE:LINE:COL. */
int api_traces_get(struct api_traces *ts, const char *path, const struct sim_trace **out,
                   struct libra_error *err);

/*
 * Fills *in for cfg (borrowed: it must outlive *in) with the presets of p and the trace cfg
 * names (workload.trace), reading it into ts on first use (api_traces_get); in->workers and
 * in->progress are NULL. Returns 0, or the trace's error: LIBRA_EIO, with the message naming
 * workload.trace where the file cannot be read, or LIBRA_EINVAL at FILE:LINE:COL.
 */
int api_sim_input(const struct api_presets *p, struct api_traces *ts,
                  const struct libra_config *cfg, bool perfetto, struct sim_input *in,
                  struct libra_error *err);

/* ---- routers -------------------------------------------------------------------------------- */

/*
 * The costs of the experiment's rollout engines (cost/move.h over its hardware, model, prefill
 * chunk and sim.max_seqs), for routers: *m holds the model, *out points its callbacks at it —
 * the moves', and the decisions' (sched/cost.h) with cluster.gpus waiting per second late and
 * no deadline (the caller sets out->decision.deadline_s when it knows the step). Returns 0,
 * LIBRA_EINVAL (a model no TP size can serve) or LIBRA_EINTERNAL (presets cfg names are
 * missing: cfg was not resolved with p), with err.
 */
int api_move_costs(const struct api_presets *p, const struct libra_config *cfg,
                   struct cost_move_model *m, struct sched_costs *out, struct libra_error *err);

#endif
