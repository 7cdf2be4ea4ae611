/*
 * The report: inputs told apart by their schema, one HTML section per input with its
 * figures, and the lookups every figure uses. See report.h for the contract.
 */
#include "report/report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/internal.h"
#include "report/svg.h"
#include "sim/sim.h"
#include "util/alloc.h"
#include "util/error.h"

static const struct {
    const char *schema, *prefix;
    enum report_kind kind;
} kinds[] = {
    {"libra.sim/1", "sim", REPORT_SIM},
    {"libra.sim-sweep/1", "sweep", REPORT_SWEEP},
    {"libra.load/1", "load", REPORT_LOAD},
    {"libra.plan/1", "plan", REPORT_PLAN},
    {"libra.route-eval/1", "route", REPORT_ROUTE},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

const char *const report_mode_order[] = {"colocated", "async", "libra", "rollout", NULL};

/* ---- lookups ------------------------------------------------------------------------------- */

const json_t *report_get(const json_t *o, const char *path)
{
    char key[128];
    while (o && *path) {
        size_t n = strcspn(path, "/");
        if (!json_is_object(o) || n >= sizeof key)
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = json_object_get(o, key);
        path += n + (path[n] == '/');
    }
    return o;
}

double report_num(const json_t *o, const char *path)
{
    const json_t *v = report_get(o, path);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *report_str(const json_t *o, const char *path)
{
    return json_string_value(report_get(o, path));
}

double *report_nans(struct report_ctx *ctx, size_t n)
{
    double *v = arena_calloc(ctx->arena, n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = NAN;
    return v;
}

int report_by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *vfmt(struct arena *a, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static const char *vfmt(struct arena *a, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = arena_alloc(a, n > 0 ? (size_t)n + 1 : 1);
    s[0] = '\0';
    if (n > 0)
        vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

const char *report_fmt(struct report_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *s = vfmt(ctx->arena, fmt, ap);
    va_end(ap);
    return s;
}

void report_note(struct report_ctx *ctx, const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *why = vfmt(ctx->arena, fmt, ap);
    va_end(ap);
    strbuf_puts(ctx->notes, "<li><code>");
    svg_escape(ctx->notes, name);
    strbuf_puts(ctx->notes, "</code>: ");
    svg_escape(ctx->notes, why);
    strbuf_puts(ctx->notes, "</li>\n");
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

size_t report_keys(struct report_ctx *ctx, const json_t *o, const char *const *first,
                   const char ***keys)
{
    size_t n = json_is_object(o) ? json_object_size(o) : 0, k = 0;
    const char **out = arena_calloc(ctx->arena, n + 1, sizeof *out);
    for (size_t i = 0; first && first[i]; i++)
        if (n && json_object_get(o, first[i]))
            out[k++] = first[i];
    size_t known = k;
    const char *key;
    json_t *v;
    if (n)
        json_object_foreach((json_t *)o, key, v)
        {
            bool listed = false;
            for (size_t i = 0; first && first[i] && !listed; i++)
                listed = strcmp(first[i], key) == 0;
            if (!listed)
                out[k++] = key;
        }
    qsort(out + known, k - known, sizeof *out, by_bytes);
    if (k > REPORT_KEYS_MAX) {
        report_note(ctx, "series", "an object of %zu modes or policies: the first %d are drawn", k,
                    REPORT_KEYS_MAX);
        k = REPORT_KEYS_MAX;
    }
    *keys = out;
    return k;
}

const char *report_color(const char *name, size_t index)
{
    static const struct {
        const char *name, *color;
    } fixed[] = {{"colocated", "#4e79a7"},
                 {"async", "#f28e2b"},
                 {"libra", "#59a14f"},
                 {"rollout", "#b07aa1"}};
    static const char *const palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
    for (size_t i = 0; name && i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(fixed[i].name, name) == 0)
            return fixed[i].color;
    return palette[index % (sizeof palette / sizeof palette[0])];
}

/* ---- inputs -------------------------------------------------------------------------------- */

void report_init(struct report *r, const struct report_options *opt)
{
    memset(r, 0, sizeof *r);
    r->opt = *opt;
}

/* A JSON Lines file (--jsonl's output) fails to parse after its first line, which is a document:
 * says so, and what report reads instead. */
static void jsonl_hint(const char *text, size_t len, struct libra_error *err)
{
    const char *nl = memchr(text, '\n', len);
    json_t *first = nl && (size_t)(nl - text) + 1 < len
                        ? json_loadb(text, (size_t)(nl - text), JSON_REJECT_DUPLICATES, NULL)
                        : NULL;
    size_t used = strlen(err->msg);
    if (first && used < sizeof err->msg)
        snprintf(err->msg + used, sizeof err->msg - used,
                 " (JSON Lines, as --jsonl writes: libra report reads the one JSON document "
                 "--json writes)");
    json_decref(first);
}

int report_add(struct report *r, const char *name, const char *text, size_t len,
               struct libra_error *err)
{
    struct report_input in = {0};
    if (ujson_doc_parse(&in.doc, name, text, len, err) != 0) {
        jsonl_hint(text, len, err);
        return LIBRA_EINVAL;
    }
    const json_t *schema = json_object_get(in.doc.root, "schema");
    int rc = 0;
    if (!json_is_object(in.doc.root)) {
        rc = ujson_errorf(err, &in.doc, "", "a libra result is a JSON object");
    } else if (!json_is_string(schema)) {
        rc = ujson_errorf(err, &in.doc, schema ? "schema" : "",
                          "no schema string: not a result of libra sim (a run, a sweep or an "
                          "attribution), libra load, libra plan or libra route eval, those libra "
                          "report reads");
    } else {
        size_t k = 0;
        while (k < N_KINDS && strcmp(kinds[k].schema, json_string_value(schema)) != 0)
            k++;
        if (k < N_KINDS)
            in.kind = kinds[k].kind;
        else
            rc = ujson_errorf(err, &in.doc, "schema",
                              "'%s' is not one libra report reads (libra.sim/1, "
                              "libra.sim-sweep/1, libra.load/1, libra.plan/1, "
                              "libra.route-eval/1)",
                              json_string_value(schema));
    }
    if (rc == 0)
        rc = report_check_shape(&in.doc, in.kind, err);
    if (rc) {
        ujson_doc_free(&in.doc);
        return rc;
    }
    vec_push(&r->inputs, in);
    return 0;
}

void report_free(struct report *r)
{
    for (size_t i = 0; i < r->inputs.n; i++)
        ujson_doc_free(&r->inputs.v[i].doc);
    vec_free(&r->inputs);
}

void report_output_free(struct report_output *out)
{
    free(out->html);
    for (size_t i = 0; i < out->figures.n; i++) {
        free(out->figures.v[i].id);
        free(out->figures.v[i].svg);
    }
    vec_free(&out->figures);
    out->html = NULL;
}

/* ---- sources: the command that made an input ---------------------------------------------- */

/* s as one shell word: as it is when it holds only safe characters, else single-quoted. */
static const char *shell_word(struct report_ctx *ctx, const char *s)
{
    if (*s &&
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-@%") ==
            strlen(s))
        return s;
    struct strbuf b = {0};
    strbuf_puts(&b, "'");
    for (const char *c = s; *c; c++)
        if (*c == '\'')
            strbuf_puts(&b, "'\\''");
        else
            strbuf_add(&b, c, 1);
    strbuf_puts(&b, "'");
    const char *out = report_fmt(ctx, "%s", b.data);
    strbuf_free(&b);
    return out;
}

/* " (config digest D, seed S, libra V)", from the envelope every result carries; "unknown"
 * for what it lacks (a seed too: a made-up 0 would name another run). */
static const char *envelope(struct report_ctx *ctx, const json_t *doc)
{
    const char *digest = report_str(doc, "config_digest"),
               *version = report_str(doc, "libra_version");
    double seed = report_num(doc, "seed");
    return report_fmt(ctx, " (config digest %s, seed %s, libra %s)", digest ? digest : "unknown",
                      isfinite(seed) ? report_fmt(ctx, "%.0f", seed) : "unknown",
                      version ? version : "unknown");
}

/* --sweep KEY=V1,V2 per grid key (--attribution for its bars) and the seeds, as `libra sim`
 * takes them: none for the config's own seed alone, as a sweep without --seeds runs it (and a
 * sweep of a trace, which --seeds and --seed-list are refused with, can only run it). */
static const char *sweep_flags(struct report_ctx *ctx, const json_t *doc)
{
    struct strbuf b = {0};
    const json_t *grid = json_object_get(doc, "grid"), *seeds = json_object_get(doc, "seeds");
    for (size_t k = 0; k < json_array_size(grid); k++) {
        const json_t *g = json_array_get(grid, k), *values = report_get(g, "values");
        const char *key = report_str(g, "key");
        if (key && strcmp(key, SIM_ATTRIBUTION_KEY) == 0) {
            strbuf_puts(&b, " --attribution");
            continue;
        }
        struct strbuf arg = {0};
        strbuf_printf(&arg, "%s=", report_str(g, "key") ? report_str(g, "key") : "?");
        for (size_t i = 0; i < json_array_size(values); i++) {
            const char *v = json_string_value(json_array_get(values, i));
            strbuf_puts(&arg, i ? "," : "");
            for (const char *c = v ? v : ""; *c; c++) /* a comma in a value is written \, */
                strbuf_puts(&arg, *c == ',' ? "\\," : (char[2]){*c, 0});
        }
        strbuf_printf(&b, " --sweep %s", shell_word(ctx, arg.data));
        strbuf_free(&arg);
    }
    size_t n = json_array_size(seeds);
    bool consecutive = n > 0;
    double base = report_num(doc, "seed");
    for (size_t i = 0; i < n && consecutive; i++)
        consecutive = json_number_value(json_array_get(seeds, i)) == base + (double)i;
    if (consecutive && n > 1)
        strbuf_printf(&b, " --seeds %zu", n);
    for (size_t i = 0; i < n && !consecutive; i++)
        strbuf_printf(&b, "%s%.0f", i ? "," : " --seed-list ",
                      json_number_value(json_array_get(seeds, i)));
    const char *out = report_fmt(ctx, "%s", b.data ? b.data : "");
    strbuf_free(&b);
    return out;
}

/* " --buckets LAYOUT" when the layout route eval scored was given (sched.buckets, whose
 * instance counts route eval refuses or drops), "" when the planner chose it: its layout alone
 * holds counts, and the command without --buckets plans it again under the digest cited, which
 * a --buckets flag would change (the digest covers sched.buckets). */
static const char *buckets_flag(struct report_ctx *ctx, const json_t *doc)
{
    const char *buckets = report_str(doc, "buckets");
    if (!buckets || strchr(buckets, 'x'))
        return "";
    return report_fmt(ctx, " --buckets %s", shell_word(ctx, buckets));
}

/* " --policy NAME" when route eval scored one policy, "" for --policy all (the default).
 * --placebo adds cmlfq and its controls, cmlfq_shuffled and depth_only, to the policy asked
 * for: with them left out, none left is --policy cmlfq. */
static const char *policy_flag(struct report_ctx *ctx, const json_t *doc, bool placebo)
{
    const char *key, *one = NULL;
    json_t *v;
    size_t n = 0;
    json_object_foreach(json_object_get(doc, "policies"), key, v)
    {
        bool control = strcmp(key, "cmlfq") == 0 || strcmp(key, "cmlfq_shuffled") == 0 ||
                       strcmp(key, "depth_only") == 0;
        if (!placebo || !control) {
            one = key;
            n++;
        }
    }
    if (placebo && n == 0)
        return " --policy cmlfq";
    return n == 1 ? report_fmt(ctx, " --policy %s", shell_word(ctx, one)) : "";
}

/* route eval's flags that its JSON records when they differ from the defaults; --placebo with
 * the seed its shuffle takes. With --folds it records train_steps 0, but refuses --train-steps
 * beside --folds. */
static const char *route_flags(struct report_ctx *ctx, const json_t *doc)
{
    double train = report_num(doc, "train_steps"), folds = report_num(doc, "folds");
    double visits = report_num(doc, "min_visits"), seed = report_num(doc, "seed");
    const char *truncated = report_str(doc, "truncated");
    bool placebo = json_object_get(doc, "placebo") != NULL, by_folds = folds > 0;
    return report_fmt(
        ctx, "%s%s%s%s%s%s", policy_flag(ctx, doc, placebo),
        !by_folds && isfinite(train) && train != 1 ? report_fmt(ctx, " --train-steps %.0f", train)
                                                   : "",
        by_folds ? report_fmt(ctx, " --folds %.0f", folds) : "",
        isfinite(visits) && visits != 1 ? report_fmt(ctx, " --min-visits %.0f", visits) : "",
        truncated && strcmp(truncated, "exact") == 0 ? " --truncated exact" : "",
        placebo ? report_fmt(ctx, " --placebo%s",
                             isfinite(seed) ? report_fmt(ctx, " --seed %.0f", seed) : "")
                : "");
}

/* The command line that made doc, with what identifies its config. CONFIG is the config whose
 * digest the result cites, so it holds sim.timeline_steps (--timeline's key): no --timeline is
 * named, as the steps a timeline records are cut to those the run has, and a range asked past
 * them would name a config of another digest. */
static const char *source(struct report_ctx *ctx, const struct report_input *in)
{
    const json_t *doc = in->doc.root;
    switch (in->kind) {
    case REPORT_SIM: {
        const json_t *modes = json_object_get(doc, "modes");
        const char **names;
        double steps = NAN;
        size_t n = report_keys(ctx, modes, report_mode_order, &names);
        if (n)
            steps = report_num(json_object_get(modes, names[0]), "run/steps");
        return report_fmt(ctx, "libra sim CONFIG%s --json%s",
                          isfinite(steps) ? report_fmt(ctx, " --steps %.0f", steps) : "",
                          envelope(ctx, doc));
    }
    case REPORT_SWEEP:
        return report_fmt(ctx, "libra sim CONFIG%s --json%s", sweep_flags(ctx, doc),
                          envelope(ctx, doc));
    case REPORT_LOAD: {
        const char *style = report_str(doc, "style");
        return report_fmt(ctx, "libra load CONFIG --engines URLS%s --json%s",
                          style ? report_fmt(ctx, " --style %s", shell_word(ctx, style)) : "",
                          envelope(ctx, doc));
    }
    case REPORT_PLAN:
        return report_fmt(ctx, "libra plan CONFIG --json%s", envelope(ctx, doc));
    case REPORT_ROUTE: {
        const char *trace = report_str(doc, "trace/path");
        return report_fmt(ctx, "libra route eval %s%s%s --config CONFIG --json%s",
                          shell_word(ctx, trace ? trace : "TRACE"), buckets_flag(ctx, doc),
                          route_flags(ctx, doc), envelope(ctx, doc));
    }
    }
    return "";
}

/* ---- the page ------------------------------------------------------------------------------ */

static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>libra report</title>\n<style>\n"
    "body{font-family:sans-serif;max-width:760px;margin:24px auto;padding:0 12px;color:#222;"
    "line-height:1.4}\n"
    "h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ccc}\n"
    "h3{font-size:15px}figure{margin:16px 0}svg{max-width:100%;height:auto}\n"
    "code{font-family:monospace;background:#f4f4f4;padding:0 3px}\n"
    "</style>\n</head>\n<body>\n<h1>libra report</h1>\n"
    "<p>One section per result, in the order given. Each figure's caption says what it shows "
    "and the command that made its input; its elements carry the values they draw "
    "(docs/report.md in the libra sources).</p>\n";

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* One input's section: heading, source, figures, and what was left out. */
static int section(const struct report *r, const struct report_input *in, const char *prefix,
                   struct report_output *out, struct strbuf *html, struct libra_error *err)
{
    struct arena arena;
    arena_init(&arena, 0);
    struct strbuf figures = {0}, notes = {0};
    struct report_ctx ctx = {&r->opt, &arena, out, &figures, &notes, in->doc.name, prefix, NULL};
    ctx.source = source(&ctx, in);
    int rc = 0;
    switch (in->kind) {
    case REPORT_SIM:
        rc = report_sim_figures(&ctx, in->doc.root, err);
        break;
    case REPORT_SWEEP:
        report_sweep_figures(&ctx, in->doc.root);
        break;
    case REPORT_LOAD:
        report_load_figures(&ctx, in->doc.root);
        break;
    case REPORT_PLAN:
        report_plan_figures(&ctx, in->doc.root);
        break;
    case REPORT_ROUTE:
        report_route_figures(&ctx, in->doc.root);
        break;
    }
    strbuf_printf(html, "<section id=\"%s\">\n<h2>", prefix);
    svg_escape(html, report_str(in->doc.root, "schema"));
    strbuf_puts(html, ": ");
    svg_escape(html, base_name(in->doc.name));
    strbuf_puts(html, "</h2>\n<p>Made by <code>");
    svg_escape(html, ctx.source);
    strbuf_puts(html, "</code>.</p>\n");
    if (figures.data)
        strbuf_puts(html, figures.data);
    if (notes.data)
        strbuf_printf(html, "<h3>Not drawn</h3>\n<ul>\n%s</ul>\n", notes.data);
    strbuf_puts(html, "</section>\n");
    strbuf_free(&figures);
    strbuf_free(&notes);
    arena_free(&arena);
    return rc;
}

/* Whether an input is a libra sim result: only its figures take a step range. */
static bool has_sim(const struct report *r)
{
    for (size_t i = 0; i < r->inputs.n; i++)
        if (r->inputs.v[i].kind == REPORT_SIM)
            return true;
    return false;
}

int report_render(const struct report *r, struct report_output *out, struct libra_error *err)
{
    memset(out, 0, sizeof *out);
    if (r->inputs.n == 0)
        return error_set(err, NULL, 0, 0, "no input to draw");
    if (r->opt.step_range && !has_sim(r))
        return error_set(err, NULL, 0, 0,
                         "--steps: no libra sim result among the inputs (only its per-step "
                         "figures and Gantt charts take a step range)");
    struct strbuf html = {0};
    strbuf_puts(&html, page_head);
    int seen[N_KINDS] = {0}, rc = 0;
    for (size_t i = 0; i < r->inputs.n && rc == 0; i++) {
        const struct report_input *in = &r->inputs.v[i];
        size_t k = 0;
        while (kinds[k].kind != in->kind)
            k++;
        char prefix[32];
        if (seen[k]++)
            snprintf(prefix, sizeof prefix, "%s%d", kinds[k].prefix, seen[k]);
        else
            snprintf(prefix, sizeof prefix, "%s", kinds[k].prefix);
        rc = section(r, in, prefix, out, &html, err);
    }
    strbuf_puts(&html, "</body>\n</html>\n");
    out->html = strbuf_detach(&html);
    return rc;
}
