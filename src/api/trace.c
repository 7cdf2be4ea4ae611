/*
 * Trace files through the public API (include/libra/libra.h, "traces"): the streaming reader
 * and the atomic writer of trace/file.h, with records as JSON text in the canonical form of
 * trace.h's formatter, so that a caller in another language reads and writes exactly what
 * `libra trace validate` accepts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/error.h"

struct libra_trace_reader {
    struct trace_reader *r;
    struct trace_text text; /* the last line handed out */
};

struct libra_trace_writer {
    struct trace_writer *w;
    struct trace_parser *p; /* reads the caller's records; knows the header's group_size */
    int64_t line;           /* of the last record put */
};

int libra_trace_reader_open(const char *path, struct libra_trace_reader **out,
                            const char **header_json, struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!path || !out || !header_json)
        return error_set(err, NULL, 0, 0, "path, out and header_json: expected non-NULL");
    *out = NULL;
    struct trace_reader *tr;
    const struct trace_header *h;
    int rc = trace_reader_open(&tr, path, err);
    if (rc)
        return rc;
    if ((rc = trace_reader_header(tr, &h, err)) != 0) {
        trace_reader_close(tr);
        return rc;
    }
    struct libra_trace_reader *r = xcalloc(1, sizeof *r);
    r->r = tr;
    trace_format_header(&r->text, h);
    *header_json = r->text.data;
    *out = r;
    return 0;
}

int libra_trace_reader_next(struct libra_trace_reader *r, const char **record_json,
                            struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!r || !record_json)
        return error_set(err, NULL, 0, 0, "reader and record_json: expected non-NULL");
    const struct trace_traj *t;
    int rc = trace_reader_next(r->r, &t, err);
    if (rc == 1) {
        r->text.len = 0;
        trace_format_traj(&r->text, t);
        *record_json = r->text.data;
    }
    return rc;
}

void libra_trace_reader_close(struct libra_trace_reader *r)
{
    if (!r)
        return;
    trace_reader_close(r->r);
    trace_text_free(&r->text);
    free(r);
}

int libra_trace_writer_open(const char *path, const char *header_json,
                            struct libra_trace_writer **out, struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!path || !header_json || !out)
        return error_set(err, NULL, 0, 0, "path, header_json and out: expected non-NULL");
    *out = NULL;
    if (!path[0]) { /* refused now, not at close: the records would go to "PATH.tmpPID" */
        error_set(err, NULL, 0, 0, "cannot write '': %s", error_strerror(ENOENT));
        return LIBRA_EIO;
    }
    struct trace_parser *p = trace_parser_new(path);
    const struct trace_header *h;
    struct trace_writer *tw;
    int rc = trace_parser_header(p, header_json, strlen(header_json), 1, &h, err);
    if (rc == 0)
        rc = trace_writer_open(&tw, path, h, err);
    if (rc) {
        trace_parser_free(p);
        return rc;
    }
    struct libra_trace_writer *w = xcalloc(1, sizeof *w);
    *w = (struct libra_trace_writer){.w = tw, .p = p, .line = 1};
    *out = w;
    return 0;
}

int libra_trace_writer_put(struct libra_trace_writer *w, const char *record_json,
                           struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!w || !record_json)
        return error_set(err, NULL, 0, 0, "writer and record_json: expected non-NULL");
    const struct trace_traj *t;
    int rc = trace_parser_traj(w->p, record_json, strlen(record_json), w->line + 1, &t, err);
    if (rc == 0)
        rc = trace_writer_put(w->w, t, err);
    if (rc == 0)
        w->line++;
    return rc;
}

static void writer_free(struct libra_trace_writer *w)
{
    trace_parser_free(w->p);
    free(w);
}

int libra_trace_writer_close(struct libra_trace_writer *w, struct libra_error *err)
{
    struct libra_error scratch;
    err = api_error_init(err, &scratch);
    if (!w)
        return 0;
    int rc = trace_writer_close(w->w, err);
    writer_free(w);
    return rc;
}

void libra_trace_writer_abort(struct libra_trace_writer *w)
{
    if (!w)
        return;
    trace_writer_abort(w->w);
    writer_free(w);
}
