/*
 * Readers of serving benchmarks and trainer logs (import.h). Both formats are other projects'
 * and change with their versions, so only the fields a point needs are read and checked;
 * anything else in a file is left alone. docs/calibrate.md lists the fields.
 */
#include "cost/import.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/strbuf.h"

/* ---- detection ---------------------------------------------------------------------------- */

/* Length of the line at text (without its newline). */
static size_t line_len(const char *text, size_t len)
{
    const char *nl = memchr(text, '\n', len);
    return nl ? (size_t)(nl - text) : len;
}

static size_t skip_blank(const char *text, size_t len, size_t at)
{
    while (at < len &&
           (text[at] == ' ' || text[at] == '\t' || text[at] == '\r' || text[at] == '\n'))
        at++;
    return at;
}

/* Whether "step:" starts at offset p of line (p + 5 <= its length), not inside a longer word
 * ("global_step:"). */
static bool step_word_at(const char *line, size_t p)
{
    return memcmp(line + p, "step:", 5) == 0 &&
           !(p > 0 && (isalnum((unsigned char)line[p - 1]) || strchr("_/-.", line[p - 1])));
}

/* Offset of "step:N" starting a verl step line's metrics in line, or -1: "step:" not inside a
 * longer word, digits, then " - " or the end. */
static long verl_step_at(const char *line, size_t len)
{
    for (size_t p = 0; p + 5 < len; p++) {
        if (!step_word_at(line, p))
            continue;
        size_t q = p + 5;
        while (q < len && isdigit((unsigned char)line[q]))
            q++;
        if (q > p + 5 && (q == len || (q + 3 <= len && memcmp(line + q, " - ", 3) == 0)))
            return (long)p;
    }
    return -1;
}

/* Offset of needle in line, or -1. */
static long find(const char *line, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t p = 0; p + n <= len; p++)
        if (memcmp(line + p, needle, n) == 0)
            return (long)p;
    return -1;
}

/* Offset of the "step:" of a line with an actor update (verl prints one a training step) whose
 * step is not a number ("step:-1 - "), or -1: a verl line all the same, to refuse at its step. */
static long verl_bad_step_at(const char *line, size_t len)
{
    if (verl_step_at(line, len) >= 0 || find(line, len, "timing_s/update_actor:") < 0)
        return -1;
    for (size_t p = 0; p + 5 <= len; p++)
        if (step_word_at(line, p))
            return (long)p;
    return -1;
}

#define MEGATRON_ARGS_BEGIN "------------------------ arguments ------------------------"
#define MEGATRON_ARGS_END "-------------------- end of arguments ---------------------"

/* Offset just past "iteration N/M |" in a Megatron-LM iteration line (spaces may pad N and
 * M), or -1. */
static long megatron_iteration_at(const char *line, size_t len)
{
    for (long from = 0, p; (p = find(line + from, len - (size_t)from, "iteration ")) >= 0;
         from += p + 1) {
        size_t q = (size_t)(from + p) + 10;
        for (int part = 0; part < 2; part++) {
            while (q < len && line[q] == ' ')
                q++;
            size_t digits = q;
            while (q < len && isdigit((unsigned char)line[q]))
                q++;
            if (q == digits || q >= len || line[q] != (part ? ' ' : '/'))
                break;
            q++;
            if (part == 1 && q < len && line[q] == '|')
                return (long)q + 1;
        }
    }
    return -1;
}

static char *python_floats(const char *text, size_t len, const char *nan, size_t *n);

/* Members every serving result has (read_run, run_arrays): an object with none is not one. */
static const char *const serving_members[] = {"duration", "input_lens", "output_lens", "ttfts",
                                              "itls"};

/* len bytes of text parsed as a JSON object (Python's floats read as read_run reads them), or
 * NULL. */
static json_t *json_object_of(const char *text, size_t len)
{
    size_t n;
    char *fixed = python_floats(text, len, "null", &n);
    json_t *doc = json_loadb(fixed ? fixed : text, fixed ? n : len, 0, NULL);
    free(fixed);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* The kind of an input that opens as a JSON object: of its first line (a trace's header; JSON
 * Lines) or else of the whole text (a result written with indentation), an object; one that does
 * not parse is taken as a serving result, whose reader names the syntax error. */
static enum cost_import_kind json_kind(const char *text, size_t len)
{
    json_t *doc = json_object_of(text, line_len(text, len));
    if (!doc && line_len(text, len) < len)
        doc = json_object_of(text, len);
    enum cost_import_kind kind = doc ? COST_IMPORT_UNKNOWN : COST_IMPORT_SERVING;
    if (json_object_get(doc, "libra_trace"))
        kind = COST_IMPORT_TRACE;
    for (size_t i = 0;
         kind == COST_IMPORT_UNKNOWN && i < sizeof serving_members / sizeof serving_members[0]; i++)
        if (json_object_get(doc, serving_members[i]))
            kind = COST_IMPORT_SERVING;
    json_decref(doc);
    return kind;
}

/* Whether text at `at` opens a JSON object: '{', then, after blanks, a key's '"' or the '}' of
 * an empty one. A JSON document cut short still does; a Python dict a trainer prints ("{'actor':
 * ...") does not, so its log is read by its lines. */
static bool json_object_start(const char *text, size_t len, size_t at)
{
    if (at >= len || text[at] != '{')
        return false;
    at = skip_blank(text, len, at + 1);
    return at < len && (text[at] == '"' || text[at] == '}');
}

enum cost_import_kind cost_import_detect(const char *text, size_t len)
{
    size_t at = skip_blank(text, len, 0);
    if (json_object_start(text, len, at))
        return json_kind(text + at, len - at);
    bool megatron = false;
    for (size_t p = 0; p < len;) {
        size_t n = line_len(text + p, len - p);
        if (verl_step_at(text + p, n) >= 0 || verl_bad_step_at(text + p, n) >= 0)
            return COST_IMPORT_VERL_LOG;
        megatron = megatron || megatron_iteration_at(text + p, n) >= 0 ||
                   find(text + p, n, MEGATRON_ARGS_BEGIN) >= 0;
        p += n + 1;
    }
    return megatron ? COST_IMPORT_MEGATRON : COST_IMPORT_UNKNOWN;
}

/* ---- serving runs ------------------------------------------------------------------------- */

/* One run's document and where errors point. */
struct run_reader {
    const struct ujson_doc *doc;
    const json_t *obj;
    struct cost_serving_run *run;
    const json_t *in, *out, *ttft, *itl, *latency, *errors; /* per-request arrays */
    size_t n;
    struct libra_error *err;
};

static int run_error(struct run_reader *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int run_error(struct run_reader *r, const char *path, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ujson_errorf(r->err, r->doc, path, "%s", msg);
}

/* The per-request array key: required ones must be present, and every one holds n entries. */
static int request_array(struct run_reader *r, const char *key, bool required, const json_t **out)
{
    *out = json_object_get(r->obj, key);
    if (!*out && required)
        return run_error(r, "",
                         "%s: missing: the run has no per-request records (vLLM: "
                         "--save-result --save-detailed; SGLang: --output-details)",
                         key);
    if (*out && !json_is_array(*out))
        return run_error(r, key, "expected an array");
    if (*out && json_array_size(*out) != r->n)
        return run_error(r, key, "%zu entries, but input_lens has %zu", json_array_size(*out),
                         r->n);
    return 0;
}

/* A label member key (null or absent: none) into out. */
static int read_label(struct run_reader *r, const char *key, char *out, size_t size)
{
    const json_t *v = json_object_get(r->obj, key);
    if (v && !json_is_null(v) && !json_is_string(v))
        return run_error(r, key, "expected a string");
    if (json_is_string(v))
        snprintf(out, size, "%s", json_string_value(v));
    return 0;
}

static int run_arrays(struct run_reader *r)
{
    const json_t *in = json_object_get(r->obj, "input_lens");
    r->n = json_is_array(in) ? json_array_size(in) : 0;
    int rc = request_array(r, "input_lens", true, &r->in);
    if (!rc && r->n == 0)
        rc = run_error(r, "input_lens", "no requests");
    if (!rc)
        rc = request_array(r, "output_lens", true, &r->out);
    if (!rc)
        rc = request_array(r, "ttfts", true, &r->ttft);
    if (!rc)
        rc = request_array(r, "itls", true, &r->itl);
    if (!rc)
        rc = request_array(r, "latencies", false, &r->latency);
    if (!rc)
        rc = request_array(r, "errors", false, &r->errors);
    return rc;
}

/* A count of request i in array a (key), an integer >= 0. */
static int request_count(struct run_reader *r, const json_t *a, const char *key, size_t i,
                         int64_t *out)
{
    char path[64];
    snprintf(path, sizeof path, "%s/%zu", key, i);
    if (!ujson_as_int64(json_array_get(a, i), out) || *out < 0 || *out > INT32_MAX)
        return run_error(r, path, "expected a token count (an integer >= 0)");
    return 0;
}

/* A time v at path, seconds >= 0. */
static int request_time(struct run_reader *r, const json_t *v, const char *path, double *out)
{
    if (!ujson_as_double(v, out) || !isfinite(*out) || *out < 0.0)
        return run_error(r, path, "expected a time in seconds (a number >= 0)");
    return 0;
}

/* Whether request i failed: no output, or a non-empty message in its errors entry (a string;
 * "" or null for none). */
static int request_failed(struct run_reader *r, size_t i, int64_t out_tokens, bool *failed)
{
    const json_t *e = r->errors ? json_array_get(r->errors, i) : NULL;
    if (e && !json_is_null(e) && !json_is_string(e)) {
        char path[64];
        snprintf(path, sizeof path, "errors/%zu", i);
        return run_error(r, path, "expected an error message (a string; \"\" for none)");
    }
    *failed = out_tokens == 0 || json_string_length(e) > 0;
    return 0;
}

/* The sum of request i's inter-token latencies, checked whether or not latencies are given. */
static int itl_sum(struct run_reader *r, size_t i, double *out)
{
    char path[64];
    const json_t *itl = json_array_get(r->itl, i);
    snprintf(path, sizeof path, "itls/%zu", i);
    if (!json_is_array(itl))
        return run_error(r, path, "expected an array of inter-token latencies");
    *out = 0.0;
    for (size_t k = 0; k < json_array_size(itl); k++) {
        double t;
        snprintf(path, sizeof path, "itls/%zu/%zu", i, k);
        int rc = request_time(r, json_array_get(itl, k), path, &t);
        if (rc)
            return rc;
        *out += t;
    }
    snprintf(path, sizeof path, "itls/%zu", i);
    if (!isfinite(*out)) /* each finite, their sum not: no time the run could have taken */
        return run_error(r, path,
                         "the inter-token latencies sum past the largest number (a time in "
                         "seconds is far less)");
    return 0;
}

/* One request's fields, each checked whatever the run makes of it (a failed request's, the
 * ITLs beside latencies): a malformed value is refused, never passed over. */
struct request {
    int64_t in, out;
    bool failed;
    double ttft, itls, latency; /* itls: their sum; latency: NAN when the run has none */
};

static int read_request(struct run_reader *r, size_t i, struct request *q)
{
    char path[64];
    q->latency = NAN;
    int rc = request_count(r, r->in, "input_lens", i, &q->in);
    if (!rc)
        rc = request_count(r, r->out, "output_lens", i, &q->out);
    if (!rc)
        rc = request_failed(r, i, q->out, &q->failed);
    snprintf(path, sizeof path, "ttfts/%zu", i);
    if (!rc)
        rc = request_time(r, json_array_get(r->ttft, i), path, &q->ttft);
    if (!rc)
        rc = itl_sum(r, i, &q->itls);
    snprintf(path, sizeof path, "latencies/%zu", i);
    if (!rc && r->latency)
        rc = request_time(r, json_array_get(r->latency, i), path, &q->latency);
    return rc;
}

/* Seconds request i (q) spent decoding after its first token: latency − TTFT when latencies
 * are given, else the sum of its inter-token latencies. */
static int decode_time(struct run_reader *r, size_t i, const struct request *q, double *out)
{
    char path[64];
    *out = r->latency ? q->latency - q->ttft : q->itls;
    snprintf(path, sizeof path, "latencies/%zu", i);
    if (r->latency && q->latency < q->ttft)
        return run_error(r, path, "%.9g s is below its TTFT (%.9g s)", q->latency, q->ttft);
    return 0;
}

static int add_request(struct run_reader *r, size_t i)
{
    struct cost_serving_run *run = r->run;
    struct request q;
    double decode = 0.0;
    int rc = read_request(r, i, &q);
    if (rc || q.failed) {
        run->failed += rc ? 0 : 1;
        return rc;
    }
    if (q.out >= 2)
        rc = decode_time(r, i, &q, &decode);
    if (!rc && q.out >= 2 && !(decode > 0.0)) {
        char path[64];
        snprintf(path, sizeof path, "%s/%zu", r->latency ? "latencies" : "itls", i);
        rc = run_error(r, path,
                       "the request generated %lld tokens in no time after its first: the "
                       "benchmark did not stream tokens",
                       (long long)q.out);
    }
    if (rc)
        return rc;
    run->prompts += 1.0;
    run->prompt_tokens += (double)q.in;
    run->prompt_pairs += (double)q.in * ((double)q.in + 1.0) / 2.0;
    if (q.out >= 2) {
        double steps = (double)q.out - 1.0;
        run->decoded++;
        run->decode_s += decode;
        run->decode_tokens += steps;
        run->ctx_sum += steps * ((double)q.in + (double)q.out / 2.0);
    }
    return 0;
}

/* The run's request rate (requests/s; INFINITY: all sent at once) and concurrency limit (0:
 * none), as vLLM and SGLang record them. */
static int traffic(struct run_reader *r, double *rate, int64_t *limit)
{
    const json_t *v = json_object_get(r->obj, "request_rate");
    *rate = INFINITY;
    *limit = 0;
    /* absent: "inf", as vLLM's default; any other type is no rate, not "inf" */
    bool inf = !v || (json_is_string(v) && strcmp(json_string_value(v), "inf") == 0);
    if (!inf && !(json_is_number(v) && ujson_as_double(v, rate) && *rate > 0.0))
        return run_error(r, "request_rate", "expected requests per second (> 0) or \"inf\"");
    v = json_object_get(r->obj, "max_concurrency");
    if (v && !json_is_null(v) && !(ujson_as_int64(v, limit) && *limit >= 1))
        return run_error(r, "max_concurrency", "expected an integer >= 1 or null");
    return 0;
}

/*
 * The share of prompts prefilled while other requests decode, so in the iterations the decode
 * points time. Sent at once (rate "inf"), the first max_concurrency requests (all of them
 * without a limit) are prefilled before any decodes and each later one while the others
 * decode. At a finite rate, arrivals are Poisson and see the engine decoding as often as it is
 * over time: with probability 1 − exp(−mean decode batch) (M/G/∞ occupancy).
 */
static double interleaved_share(const struct cost_serving_run *run, double rate, int64_t limit)
{
    if (isfinite(rate))
        return 1.0 - exp(-run->decode_s / run->duration_s);
    double first = limit > 0 ? fmin((double)limit, run->prompts) : run->prompts;
    return (run->prompts - first) / run->prompts;
}

/* The shortest mean iteration a run may time (s): an engine iteration runs every layer's kernels
 * on a GPU, which takes far longer; a shorter one is a unit slip (milliseconds as seconds) or
 * counts that are not the run's, and one such point would outweigh every other in the fit. */
#define MIN_ITERATION_S 1e-5

/* The checks across a run: something decoded, within what the duration allows, in iterations
 * an engine can run. */
static int run_totals(struct run_reader *r)
{
    struct cost_serving_run *run = r->run;
    if (run->decoded == 0)
        return run_error(r, "output_lens",
                         "no successful request generated more than one token (%zu of %zu "
                         "failed)",
                         run->failed, run->requests);
    if (!isfinite(run->decode_s))
        return run_error(r, r->latency ? "latencies" : "itls",
                         "the requests' decode times sum past the largest number (a time in "
                         "seconds is far less)");
    double iteration = run->decode_s / run->decode_tokens;
    if (iteration < MIN_ITERATION_S)
        return run_error(r, "output_lens",
                         "%.6g s per iteration (%.6g s of decoding over %.6g tokens after the "
                         "first) is shorter than any engine's (%g s): check output_lens and the "
                         "times' unit (seconds)",
                         iteration, run->decode_s, run->decode_tokens, MIN_ITERATION_S);
    double batch = run->decode_s / run->duration_s;
    if (batch > (double)run->decoded * (1.0 + 1e-9))
        return run_error(r, "duration",
                         "%.6g s is too short: the requests decode for %.6g s in all, so more "
                         "than the %zu that decoded would run at once (duration is in seconds)",
                         run->duration_s, run->decode_s, run->decoded);
    double rate;
    int64_t limit;
    int rc = traffic(r, &rate, &limit);
    run->prefill_share = rc ? 0.0 : interleaved_share(run, rate, limit);
    return rc;
}

static int read_run(const struct ujson_doc *doc, int line, struct cost_serving_run *run,
                    struct libra_error *err)
{
    struct run_reader r = {.doc = doc, .obj = doc->root, .run = run, .err = err};
    memset(run, 0, sizeof *run);
    run->line = line;
    if (!json_is_object(doc->root))
        return run_error(&r, "", "expected a benchmark result (a JSON object)");
    int rc = read_label(&r, "backend", run->backend, sizeof run->backend);
    if (!rc)
        rc = read_label(&r, "model_id", run->model, sizeof run->model);
    if (rc)
        return rc;
    const json_t *d = json_object_get(doc->root, "duration");
    if (!d)
        return run_error(&r, "", "duration: missing");
    if (!ujson_as_double(d, &run->duration_s) || !(run->duration_s > 0.0) ||
        !isfinite(run->duration_s))
        return run_error(&r, "duration", "expected seconds (a number > 0)");
    rc = run_arrays(&r);
    run->requests = r.n;
    for (size_t i = 0; rc == 0 && i < r.n; i++)
        rc = add_request(&r, i);
    return rc ? rc : run_totals(&r);
}

/*
 * Python's json module writes the floats JSON lacks as Infinity, -Infinity and NaN (SGLang's
 * "request_rate" when unlimited). A copy of text with each such word outside strings replaced:
 * the infinities by the strings "inf" and "-inf" (as vLLM writes them), padded to the word's
 * length, and NaN by nan: "null" (no value: a field that needs a number is refused), or "[] "
 * where positions must stay true. NULL when text has none; *n the copy's length.
 */
static char *python_floats(const char *text, size_t len, const char *nan, size_t *n)
{
    const struct {
        const char *word, *as;
    } words[] = {{"-Infinity", "\"-inf\"   "}, {"Infinity", "\"inf\"   "}, {"NaN", nan}};
    struct strbuf copy = {0};
    size_t from = 0; /* text before it is in copy */
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        if (in_string) {
            if (text[i] == '\\')
                i++; /* the escaped character, '"' included */
            else
                in_string = text[i] != '"';
            continue;
        }
        in_string = text[i] == '"';
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
            size_t k = strlen(words[w].word);
            if (k > len - i || memcmp(text + i, words[w].word, k) != 0)
                continue;
            strbuf_add(&copy, text + from, i - from); /* NUL bytes too: refused later */
            strbuf_puts(&copy, words[w].as);
            from = i + k;
            i += k - 1;
            break;
        }
    }
    if (from == 0)
        return NULL;
    strbuf_add(&copy, text + from, len - from);
    *n = copy.len;
    return strbuf_detach(&copy);
}

/*
 * Parses len bytes of text into doc: with NaN as "[] ", so that the positions of doc's text,
 * which the messages give, are the file's; then, where a NaN was, its root again with NaN as
 * null, the value docs/calibrate.md reads it as.
 */
static int parse_python(struct ujson_doc *doc, const char *name, const char *text, size_t len,
                        struct libra_error *err)
{
    size_t n = len;
    char *fixed = python_floats(text, len, "[] ", &n);
    int rc = ujson_doc_parse(doc, name, fixed ? fixed : text, len, err);
    free(fixed);
    fixed = rc == 0 ? python_floats(text, len, "null", &n) : NULL;
    if (fixed && n != len) { /* a NaN: only it changes the length */
        json_decref(doc->root);
        doc->root = json_loadb(fixed, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    }
    free(fixed);
    return rc;
}

/* Parses one JSON document, a whole file (line 0) or its line `line`, and appends its run. */
static int parse_run(const char *name, const char *text, size_t len, int line,
                     cost_serving_runs *out, struct libra_error *err)
{
    struct ujson_doc doc;
    struct cost_serving_run run;
    int rc = parse_python(&doc, name, text, len, err);
    if (rc)
        error_prefix(err, "invalid JSON");
    else
        rc = read_run(&doc, line > 0 ? line : 1, &run, err);
    if (rc == 0)
        vec_push(out, run);
    if (rc && err && line > 0) { /* the document is this one line */
        err->line = line;
        err->col = err->col > 0 ? err->col : 1;
    }
    ujson_doc_free(&doc);
    return rc;
}

/* JSON Lines: more than one non-blank line, the first a whole JSON object by itself. */
static bool json_lines(const char *text, size_t len)
{
    size_t at = skip_blank(text, len, 0), n = line_len(text + at, len - at);
    if (skip_blank(text, len, at + n) >= len)
        return false;
    json_t *first = json_object_of(text + at, n);
    bool object = first != NULL;
    json_decref(first);
    return object;
}

int cost_import_serving(const char *name, const char *text, size_t len, cost_serving_runs *out,
                        struct libra_error *err)
{
    if (!json_lines(text, len))
        return parse_run(name, text, len, 0, out, err);
    int line = 1;
    for (size_t p = 0; p < len; line++) {
        size_t n = line_len(text + p, len - p);
        if (skip_blank(text + p, n, 0) < n) {
            int rc = parse_run(name, text + p, n, line, out, err);
            if (rc)
                return rc;
        }
        p += n + 1;
    }
    return 0;
}

void cost_serving_point(const struct cost_serving_run *r, int tp, struct cost_decode_point *out)
{
    /* iterations the decoding requests saw, each emitting one token per decoding request */
    double batch = r->decode_s / r->duration_s, iterations = r->decode_tokens / batch;
    memset(out, 0, sizeof *out);
    out->kind = COST_DECODE_SERVING;
    out->tp = tp;
    out->measured_s = r->decode_s / r->decode_tokens;
    out->decode_seqs = batch;
    out->ctx_tokens = r->ctx_sum / r->decode_tokens;
    out->prefill_tokens = r->prefill_share * r->prompt_tokens / iterations;
    out->prefill_seqs = r->prefill_share * r->prompts / iterations;
    out->prefill_pairs = r->prefill_share * r->prompt_pairs / iterations;
}

/* ---- trainers' logs: their lines and errors ---------------------------------------------- */

/* Column (1-based, in characters) of byte offset at. */
static int col_of(const char *text, size_t at)
{
    int col = 1;
    for (size_t i = 0; i < at; i++)
        col += ((unsigned char)text[i] & 0xc0) != 0x80;
    return col;
}

/* A log line being read. */
struct log_line {
    const char *name, *text;
    size_t len;
    int line;
    struct libra_error *err;
};

static int line_error(const struct log_line *v, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int line_error(const struct log_line *v, size_t at, const char *fmt, ...)
{
    char msg[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set(v->err, v->name, v->line, col_of(v->text, at), "%s", msg);
}

/* ---- verl logs ---------------------------------------------------------------------------- */

enum verl_metric {
    VERL_UPDATE,     /* timing_s/update_actor */
    VERL_TOKENS,     /* perf/total_num_tokens */
    VERL_PROMPT,     /* prompt_length/mean */
    VERL_RESPONSE,   /* response_length/mean */
    VERL_THROUGHPUT, /* perf/throughput */
    VERL_STEP_TIME,  /* perf/time_per_step */
    VERL_METRICS,
};

static const char *const verl_keys[VERL_METRICS] = {
    "timing_s/update_actor", "perf/total_num_tokens", "prompt_length/mean",
    "response_length/mean",  "perf/throughput",       "perf/time_per_step",
};

/* One step line being read. */
struct verl_line {
    struct log_line l;
    double value[VERL_METRICS];
    size_t at[VERL_METRICS]; /* offset of each metric's value; 0: absent */
};

/* A metric value as pprint prints it: a number, or a numpy scalar "np.float64(1.5)". Returns
 * false when it is neither. */
static bool verl_number(const char *s, size_t n, double *out)
{
    char buf[64];
    const char *open = memchr(s, '(', n);
    if (open && n > 0 && s[n - 1] == ')' && strncmp(s, "np.", 3) == 0) {
        n = n - 1 - (size_t)(open + 1 - s);
        s = open + 1;
    }
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    *out = strtod(buf, &end);
    return *end == '\0' && !isspace((unsigned char)buf[0]) && errno != ERANGE;
}

/* Reads the segment [at, end) "KEY:VALUE"; keeps the metrics verl_keys names. */
static int verl_segment(struct verl_line *v, size_t at, size_t end)
{
    const char *seg = v->l.text + at, *colon = NULL;
    for (const char *c = seg; c < v->l.text + end; c++)
        if (*c == ':')
            colon = c;
    if (!colon || colon == seg)
        return line_error(&v->l, at, "expected KEY:VALUE");
    size_t key_len = (size_t)(colon - seg), val_at = at + key_len + 1;
    for (int m = 0; m < VERL_METRICS; m++) {
        if (strlen(verl_keys[m]) != key_len || memcmp(seg, verl_keys[m], key_len) != 0)
            continue;
        if (v->at[m])
            return line_error(&v->l, at, "%s: given twice", verl_keys[m]);
        v->at[m] = val_at;
        if (!verl_number(v->l.text + val_at, end - val_at, &v->value[m]))
            return line_error(&v->l, val_at, "%s: expected a number, got '%.*s'", verl_keys[m],
                              (int)(end - val_at < 40 ? end - val_at : 40), v->l.text + val_at);
    }
    return 0;
}

/* Splits the metrics after "step:N" at " - " into segments. */
static int verl_segments(struct verl_line *v, size_t at)
{
    while (at < v->l.len) {
        at += 3; /* " - " */
        const char *next = NULL;
        for (size_t p = at; p + 3 <= v->l.len && !next; p++)
            if (memcmp(v->l.text + p, " - ", 3) == 0)
                next = v->l.text + p;
        size_t end = next ? (size_t)(next - v->l.text) : v->l.len;
        int rc = verl_segment(v, at, end);
        if (rc)
            return rc;
        at = end;
    }
    return 0;
}

/* The step's point, or an error naming the metric that is missing or not > 0. */
static int verl_step(struct verl_line *v, int64_t step, struct cost_log_step *out)
{
    for (int m = VERL_UPDATE; m <= VERL_RESPONSE; m++) {
        if (!v->at[m])
            return line_error(&v->l, 0, "%s: missing (verl prints it with every training step)",
                              verl_keys[m]);
        bool positive = m == VERL_PROMPT ? v->value[m] >= 0.0 : v->value[m] > 0.0;
        if (!positive || !isfinite(v->value[m]))
            return line_error(&v->l, v->at[m], "%s: expected a number > 0, got %g", verl_keys[m],
                              v->value[m]);
    }
    *out = (struct cost_log_step){.line = v->l.line,
                                  .step = step,
                                  .update_s = v->value[VERL_UPDATE],
                                  .tokens = v->value[VERL_TOKENS],
                                  .seq_tokens = v->value[VERL_PROMPT] + v->value[VERL_RESPONSE]};
    for (int m = VERL_THROUGHPUT; m <= VERL_STEP_TIME; m++) /* optional: the GPU count */
        if (v->at[m] && !(v->value[m] > 0.0 && isfinite(v->value[m])))
            return line_error(&v->l, v->at[m], "%s: expected a number > 0, got %g", verl_keys[m],
                              v->value[m]);
    if (v->at[VERL_THROUGHPUT] && v->at[VERL_STEP_TIME]) /* > 0 even where it underflows */
        out->gpus =
            fmax(v->value[VERL_TOKENS] / v->value[VERL_THROUGHPUT] / v->value[VERL_STEP_TIME],
                 DBL_TRUE_MIN);
    return 0;
}

/* Reads one line; *found says whether it was a training step. */
static int verl_line(struct verl_line *v, cost_log_steps *out, bool *found)
{
    *found = false;
    long p = verl_step_at(v->l.text, v->l.len);
    if (p < 0)
        return 0;
    size_t at = (size_t)p + 5;
    char digits[24] = {0};
    size_t nd = 0;
    while (at < v->l.len && isdigit((unsigned char)v->l.text[at]) && nd < sizeof digits - 1)
        digits[nd++] = v->l.text[at++];
    errno = 0;
    long long step = strtoll(digits, NULL, 10); /* past int64: ERANGE, not a saturated step */
    if (errno == ERANGE || (at < v->l.len && isdigit((unsigned char)v->l.text[at])))
        return line_error(&v->l, (size_t)p, "step: number too long");
    int rc = verl_segments(v, at);
    if (rc || !v->at[VERL_UPDATE])
        return rc; /* no update: validation or another phase's line */
    struct cost_log_step st;
    rc = verl_step(v, step, &st);
    if (rc == 0) {
        vec_push(out, st);
        *found = true;
    }
    return rc;
}

/* A line with an actor update whose "step:" (as verl_step_at finds it, at a word's start) is
 * not followed by a step number: refused rather than passed over with its update. */
static int verl_bad_step(const struct verl_line *v)
{
    const char *t = v->l.text;
    long p = verl_bad_step_at(t, v->l.len);
    if (p < 0)
        return 0;
    size_t len = v->l.len - (size_t)p - 5;
    long dash = find(t + p + 5, len, " - ");
    size_t n = dash >= 0 ? (size_t)dash : len;
    return line_error(&v->l, (size_t)p,
                      "step: expected a step number (digits) before ' - ', got '%.*s'",
                      (int)(n < 40 ? n : 40), t + p + 5);
}

int cost_import_verl(const char *name, const char *text, size_t len, cost_log_steps *out,
                     size_t *skipped, struct libra_error *err)
{
    int line = 1;
    for (size_t p = 0; p < len; line++) {
        size_t n = line_len(text + p, len - p);
        struct verl_line v = {.l = {.name = name, .text = text + p, .line = line, .err = err}};
        v.l.len = n > 0 && text[p + n - 1] == '\r' ? n - 1 : n;
        bool found;
        int rc = verl_line(&v, out, &found);
        if (rc == 0)
            rc = verl_bad_step(&v);
        if (rc)
            return rc;
        if (!found && verl_step_at(v.l.text, v.l.len) >= 0 && skipped)
            (*skipped)++;
        p += n + 1;
    }
    return 0;
}

/* ---- Megatron-LM logs --------------------------------------------------------------------- */

enum megatron_arg {
    MA_SEQ,       /* seq_length */
    MA_WORLD,     /* world_size */
    MA_TP,        /* tensor_model_parallel_size */
    MA_PP,        /* pipeline_model_parallel_size */
    MA_MICRO,     /* micro_batch_size: sequences */
    MA_CP,        /* context_parallel_size (absent before Megatron-Core had CP: 1) */
    MA_EP,        /* expert_model_parallel_size */
    MA_DIST_OPT,  /* use_distributed_optimizer */
    MA_RECOMPUTE, /* recompute_granularity: None, full or selective */
    MA_LAYERS,    /* num_layers */
    MA_HIDDEN,    /* hidden_size */
    MA_N,
};

#define MA_REQUIRED 5 /* the first five */

static const char *const megatron_args[MA_N] = {
    "seq_length",
    "world_size",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "micro_batch_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "use_distributed_optimizer",
    "recompute_granularity",
    "num_layers",
    "hidden_size",
};

/* The arguments block being read, or the latest one. */
struct megatron_block {
    bool open;     /* inside a block */
    bool complete; /* a block has ended and was checked */
    bool fresh;    /* no iteration line read since it ended */
    char value[MA_N][32];
    int line[MA_N], col[MA_N]; /* 0: absent */
    struct cost_import_options layout;
    int layers, hidden;
    double seq, gpus;
};

/* Keeps an argument line "  NAME .... VALUE" of the block when NAME is one the reader needs. */
static void megatron_arg(struct megatron_block *b, const struct log_line *v)
{
    size_t p = 0, len = v->len;
    while (p < len && v->text[p] == ' ')
        p++;
    size_t name = p;
    while (p < len && (isalnum((unsigned char)v->text[p]) || v->text[p] == '_'))
        p++;
    size_t name_len = p - name;
    if (p + 2 >= len || v->text[p] != ' ' || v->text[p + 1] != '.')
        return;
    while (p < len && (v->text[p] == ' ' || v->text[p] == '.'))
        p++;
    size_t end = len;
    while (end > p && v->text[end - 1] == ' ')
        end--;
    for (int a = 0; a < MA_N; a++)
        if (strlen(megatron_args[a]) == name_len &&
            memcmp(v->text + name, megatron_args[a], name_len) == 0) {
            size_t n = end - p < sizeof b->value[a] - 1 ? end - p : sizeof b->value[a] - 1;
            memcpy(b->value[a], v->text + p, n);
            b->value[a][n] = '\0';
            b->line[a] = v->line;
            b->col[a] = col_of(v->text, p);
        }
}

static int arg_error(const struct megatron_block *b, const struct log_line *v, enum megatron_arg a,
                     const char *why)
{
    return error_set(v->err, v->name, b->line[a], b->col[a], "%s: %s, got '%s'", megatron_args[a],
                     why, b->value[a]);
}

/* Argument a as an integer >= 1 (def when absent, or "None" and none_ok); -1 after an error. */
static long arg_int(const struct megatron_block *b, const struct log_line *v, enum megatron_arg a,
                    long def, bool none_ok)
{
    if (!b->line[a] || (none_ok && strcmp(b->value[a], "None") == 0))
        return def;
    char *end;
    errno = 0;
    long x = strtol(b->value[a], &end, 10);
    if (!isdigit((unsigned char)b->value[a][0]) || *end || errno || x < 1 || x > (1L << 30)) {
        arg_error(b, v, a, "expected an integer >= 1");
        return -1;
    }
    return x;
}

static void set_option(struct cost_import_options *o, enum cost_import_option k, long v)
{
    o->given |= 1u << k;
    o->value[k] = v;
}

/* Checks the block that ends at v and turns it into the layout of the steps after it. */
static int megatron_close(struct megatron_block *b, const struct log_line *v)
{
    for (int a = 0; a < MA_REQUIRED; a++)
        if (!b->line[a])
            return line_error(v, 0,
                              "the arguments block ending here has no %s (libra calibrate needs "
                              "seq_length, world_size, tensor_model_parallel_size, "
                              "pipeline_model_parallel_size and micro_batch_size)",
                              megatron_args[a]);
    long x[MA_N];
    for (int a = 0; a < MA_N; a++) {
        bool number = a != MA_DIST_OPT && a != MA_RECOMPUTE;
        if (number &&
            (x[a] = arg_int(b, v, (enum megatron_arg)a, a >= MA_LAYERS ? 0 : 1, a >= MA_CP)) < 0)
            return LIBRA_EINVAL;
    }
    const char *dist = b->value[MA_DIST_OPT];
    if (b->line[MA_DIST_OPT] && strcmp(dist, "True") != 0 && strcmp(dist, "False") != 0)
        return arg_error(b, v, MA_DIST_OPT, "expected True or False");
    const char *recompute = b->value[MA_RECOMPUTE]; /* Megatron-LM's choices, or None */
    if (b->line[MA_RECOMPUTE] && strcmp(recompute, "full") != 0 &&
        strcmp(recompute, "selective") != 0 && strcmp(recompute, "None") != 0)
        return arg_error(b, v, MA_RECOMPUTE, "expected full, selective or None");
    struct cost_import_options *o = &b->layout;
    memset(o, 0, sizeof *o);
    set_option(o, COST_OPT_TP, x[MA_TP]);
    set_option(o, COST_OPT_PP, x[MA_PP]);
    set_option(o, COST_OPT_CP, x[MA_CP]);
    set_option(o, COST_OPT_EP, x[MA_EP]);
    set_option(o, COST_OPT_GPUS, x[MA_WORLD]);
    set_option(o, COST_OPT_MINIBATCHES, 1);
    set_option(o, COST_OPT_MICRO, x[MA_MICRO] * x[MA_SEQ]);
    set_option(o, COST_OPT_ZERO, strcmp(dist, "True") == 0);
    set_option(o, COST_OPT_RECOMPUTE, strcmp(b->value[MA_RECOMPUTE], "full") == 0);
    b->seq = (double)x[MA_SEQ];
    b->gpus = (double)x[MA_WORLD];
    b->layers = (int)x[MA_LAYERS];
    b->hidden = (int)x[MA_HIDDEN];
    b->open = false;
    b->complete = b->fresh = true;
    return 0;
}

/* The value of segment "KEY: VALUE" of an iteration line's [at, len) named key, as a number
 * > 0 (*out; its offset in the line to *value_at unless NULL), or an error when it is missing or
 * not such a number. */
static int iteration_value(const struct log_line *v, size_t at, const char *key, double *out,
                           size_t *value_at)
{
    long k = find(v->text + at, v->len - at, key);
    if (k < 0)
        return line_error(v, at, "%s: missing (Megatron-LM prints it with every iteration)", key);
    size_t p = at + (size_t)k + strlen(key);
    if (p + 1 >= v->len || v->text[p] != ':' || v->text[p + 1] != ' ')
        return line_error(v, p, "%s: expected ': VALUE'", key);
    p += 2;
    while (p < v->len && v->text[p] == ' ')
        p++;
    char buf[32] = {0}, *end;
    size_t n = 0;
    while (p + n < v->len && v->text[p + n] != ' ' && v->text[p + n] != '|' && n < sizeof buf - 1)
        n++;
    memcpy(buf, v->text + p, n);
    errno = 0;
    *out = strtod(buf, &end);
    if (n == 0 || *end || errno || !isfinite(*out) || !(*out > 0.0))
        return line_error(v, p, "%s: expected a number > 0, got '%s'", key, buf);
    if (value_at)
        *value_at = p;
    return 0;
}

/* Reads an iteration line (its "N/M |" ends at at) into a step of the block's layout. */
static int megatron_iteration(struct megatron_block *b, const struct log_line *v, size_t at,
                              cost_log_steps *out, size_t *skipped)
{
    if (!b->complete)
        return line_error(v, 0,
                          "an iteration line before a whole arguments block: libra calibrate "
                          "reads the layout and seq_length from the block Megatron-LM prints at "
                          "start-up");
    double ms, batch;
    size_t batch_at = 0;
    int rc = iteration_value(v, at, "elapsed time per iteration (ms)", &ms, NULL);
    if (rc == 0)
        rc = iteration_value(v, at, "global batch size", &batch, &batch_at);
    if (rc == 0 && batch != floor(batch)) { /* a count of sequences, never rounded */
        size_t n = 0;
        while (batch_at + n < v->len && v->text[batch_at + n] != ' ' &&
               v->text[batch_at + n] != '|')
            n++;
        rc = line_error(v, batch_at,
                        "global batch size: expected a whole number of sequences, got '%.*s'",
                        (int)n, v->text + batch_at);
    }
    if (rc)
        return rc;
    if (b->fresh) { /* the start-up's interval */
        b->fresh = false;
        if (skipped)
            (*skipped)++;
        return 0;
    }
    size_t it = (size_t)find(v->text, v->len, "iteration ") + 10;
    errno = 0;
    long long step = strtoll(v->text + it, NULL, 10);
    if (errno == ERANGE) /* not a saturated step number */
        return line_error(v, it, "iteration: number too long");
    vec_push(out, ((struct cost_log_step){.line = v->line,
                                          .step = step,
                                          .update_s = ms / 1000.0,
                                          .tokens = batch * b->seq,
                                          .seq_tokens = b->seq,
                                          .gpus = b->gpus,
                                          .layout = b->layout,
                                          .layers = b->layers,
                                          .hidden = b->hidden}));
    return 0;
}

int cost_import_megatron(const char *name, const char *text, size_t len, cost_log_steps *out,
                         size_t *skipped, struct libra_error *err)
{
    struct megatron_block b = {0};
    int line = 1, rc = 0;
    for (size_t p = 0; p < len && rc == 0; line++) {
        size_t n = line_len(text + p, len - p);
        struct log_line v = {.name = name, .text = text + p, .line = line, .err = err};
        v.len = n > 0 && text[p + n - 1] == '\r' ? n - 1 : n;
        long at;
        if (find(v.text, v.len, MEGATRON_ARGS_BEGIN) >= 0)
            b = (struct megatron_block){.open = true};
        else if (b.open && find(v.text, v.len, MEGATRON_ARGS_END) >= 0)
            rc = megatron_close(&b, &v);
        else if (b.open)
            megatron_arg(&b, &v);
        else if ((at = megatron_iteration_at(v.text, v.len)) >= 0)
            rc = megatron_iteration(&b, &v, (size_t)at, out, skipped);
        p += n + 1;
    }
    if (rc == 0 && b.open) {
        struct log_line v = {.name = name, .text = "", .line = line - 1, .err = err};
        rc =
            line_error(&v, 0, "the arguments block does not end (no '%s' line)", MEGATRON_ARGS_END);
    }
    return rc;
}

/* ---- options ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    long lo, hi;
} options[COST_N_OPTIONS] = {
    [COST_OPT_TP] = {"tp", 1, 1024},
    [COST_OPT_PP] = {"pp", 1, 1024},
    [COST_OPT_CP] = {"cp", 1, 1024},
    [COST_OPT_GPUS] = {"gpus", 1, 1L << 20},
    [COST_OPT_MINIBATCHES] = {"minibatches", 1, 1L << 20},
    [COST_OPT_MICRO] = {"micro_batch_tokens", 1, 1L << 31},
    [COST_OPT_ZERO] = {"zero", 0, 3},
    [COST_OPT_RECOMPUTE] = {"recompute", 0, 1},
    [COST_OPT_EP] = {"ep", 1, 1024},
};

const char *cost_import_option_name(enum cost_import_option o)
{
    return options[o].name;
}

static int parse_option(const char *item, size_t n, struct cost_import_options *o, char *why,
                        size_t size)
{
    const char *eq = memchr(item, '=', n);
    size_t key_len = eq ? (size_t)(eq - item) : n;
    for (int k = 0; k < COST_N_OPTIONS; k++) {
        if (strlen(options[k].name) != key_len || memcmp(item, options[k].name, key_len) != 0)
            continue;
        if (o->given & (1u << k))
            return error_text(why, size, "%s: given twice", options[k].name);
        char buf[24] = {0}, *end;
        size_t vn = eq ? n - key_len - 1 : 0;
        if (vn > 0 && vn < sizeof buf)
            memcpy(buf, eq + 1, vn);
        errno = 0;
        long v = strtol(buf, &end, 10);
        if (vn == 0 || vn >= sizeof buf || *end || errno || !isdigit((unsigned char)buf[0]) ||
            v < options[k].lo || v > options[k].hi)
            return error_text(why, size, "%s: expected an integer in %ld..%ld", options[k].name,
                              options[k].lo, options[k].hi);
        o->given |= 1u << k;
        o->value[k] = v;
        return 0;
    }
    return error_text(why, size,
                      "unknown option '%.*s' (tp, pp, cp, ep, gpus, minibatches, "
                      "micro_batch_tokens, zero, recompute)",
                      (int)(key_len < 40 ? key_len : 40), item);
}

int cost_import_options_parse(const char *text, struct cost_import_options *o, char *why,
                              size_t size)
{
    memset(o, 0, sizeof *o);
    for (const char *p = text; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (parse_option(p, n, o, why, size))
            return -1;
        p += n + (comma ? 1 : 0);
        if (comma && !*p)
            return error_text(why, size, "an option is empty (a trailing comma)");
    }
    return 0;
}

/* ---- a log's steps as training points -------------------------------------------------------- */

/* Option k: the input's, else what the log states, else def. */
static long option_or(const struct cost_import_options *o, const struct cost_log_step *st,
                      enum cost_import_option k, long def)
{
    return o->given & (1u << k)           ? o->value[k]
           : st->layout.given & (1u << k) ? st->layout.value[k]
                                          : def;
}

static bool option_given(const struct cost_import_options *o, const struct cost_log_step *st,
                         enum cost_import_option k)
{
    return ((o->given | st->layout.given) & (1u << k)) != 0;
}

/* The layout of st under o into c; returns 0 or -1 with why. */
static int log_layout(const struct cost_log_step *st, const struct cost_import_options *o,
                      double seq, struct cost_train_config *c, char *why, size_t size)
{
    long most = options[COST_OPT_GPUS].hi;
    if (!option_given(o, st, COST_OPT_GPUS) && st->gpus > 0.0 &&
        !(st->gpus >= 0.5 && st->gpus < (double)most + 0.5)) /* as the gpus option's range */
        return error_text(why, size,
                          "step %lld: perf/total_num_tokens / (perf/throughput × "
                          "perf/time_per_step) gives %.3g GPUs, not 1 to %ld; give the count as "
                          "FILE,gpus=N",
                          (long long)st->step, st->gpus, most);
    long gpus = option_or(o, st, COST_OPT_GPUS, lround(st->gpus));
    if (gpus < 1)
        return error_text(why, size,
                          "step %lld: the log gives no GPU count (perf/throughput and "
                          "perf/time_per_step); give it as FILE,gpus=N",
                          (long long)st->step);
    *c = (struct cost_train_config){
        .tp = (int)option_or(o, st, COST_OPT_TP, 1),
        .pp = (int)option_or(o, st, COST_OPT_PP, 1),
        .cp = (int)option_or(o, st, COST_OPT_CP, 1),
        .ep = (int)option_or(o, st, COST_OPT_EP, 1),
        .minibatches = (int)option_or(o, st, COST_OPT_MINIBATCHES, 1),
        .zero_stage = (int)option_or(o, st, COST_OPT_ZERO, 3),
        .full_recompute = option_or(o, st, COST_OPT_RECOMPUTE, 1) != 0,
    };
    long replica = (long)c->tp * c->pp * c->cp;
    if (gpus % replica != 0)
        return error_text(why, size, "step %lld: %ld GPUs are not a multiple of tp·pp·cp = %ld",
                          (long long)st->step, gpus, replica);
    c->dp = (int)(gpus / replica);
    c->micro_batch_tokens = (double)option_or(o, st, COST_OPT_MICRO, 16384L * c->cp);
    if (!option_given(o, st, COST_OPT_MICRO))
        c->micro_batch_tokens = fmax(c->micro_batch_tokens, seq);
    if (seq > c->micro_batch_tokens)
        return error_text(why, size,
                          "step %lld: sequences of %.0f tokens exceed micro_batch_tokens %.0f",
                          (long long)st->step, seq, c->micro_batch_tokens);
    return 0;
}

int cost_log_point(const struct cost_log_step *st, const struct cost_import_options *o,
                   const struct cost_shape *shape, struct cost_train_seqs *seqs,
                   struct cost_train_point *out, char *why, size_t size)
{
    memset(seqs, 0, sizeof *seqs);
    memset(out, 0, sizeof *out);
    double seq = fmin(fmax(1.0, round(st->seq_tokens)), (double)UINT32_MAX);
    double n = fmax(1.0, round(st->tokens / seq));
    if (log_layout(st, o, seq, &out->config, why, size))
        return -1;
    const struct cost_train_config *c = &out->config;
    if (n > COST_LOG_MAX_SEQS)
        return error_text(why, size,
                          "step %lld: %.0f tokens in sequences of %.0f make %.3g sequences, more "
                          "than the %d a step is costed with",
                          (long long)st->step, st->tokens, seq, n, COST_LOG_MAX_SEQS);
    if (n < (double)c->dp * c->minibatches)
        return error_text(why, size,
                          "step %lld: %.0f sequences of %.0f tokens cannot fill %d DP ranks × %d "
                          "mini-batches",
                          (long long)st->step, n, seq, c->dp, c->minibatches);
    uint32_t *len = xmallocarray((size_t)n, sizeof *len);
    for (size_t i = 0; i < (size_t)n; i++)
        len[i] = (uint32_t)seq;
    cost_train_seqs_init(seqs, shape, len, (size_t)n);
    free(len);
    out->measured_s = st->update_s;
    out->seqs = seqs;
    return 0;
}
