/*
 * Trace files (file.h): a line reader with a bounded, reused buffer feeding the parser, and a
 * writer that formats into a reused buffer and publishes the file by rename.
 *
 * The reader reads fixed chunks and splits them at newlines itself rather than calling
 * getline, so that the longest line it will hold is a limit it enforces (TRACE_MAX_LINE_BYTES):
 * a longer line ends the reading as soon as it passes the limit.
 */
#include "trace/file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"

#define CHUNK_BYTES ((size_t)1 << 20) /* read size and initial buffer, bytes */

struct trace_reader {
    FILE *f;
    char *name;
    struct trace_parser *parser;
    char *buf;
    size_t cap;   /* bytes allocated */
    size_t start; /* first unconsumed byte */
    size_t end;   /* one past the last byte read */
    int64_t lineno;
    bool eof;
    bool borrowed; /* buf is the caller's text (trace_reader_from_text) */
    int io_errno;  /* errno of a failed read; 0: none */
    /* The run of group_size records being read (group_size 0: not checked): records in it,
     * its first's line and (step, prompt_id). */
    int64_t group_size, in_run, run_line, run_step, run_prompt;
};

int trace_reader_open(struct trace_reader **out, const char *path, struct libra_error *err)
{
    *out = NULL;
    bool std = strcmp(path, "-") == 0;
    FILE *f = fileio_open(path, err);
    if (!f)
        return LIBRA_EIO;
    struct trace_reader *r = xcalloc(1, sizeof *r);
    r->f = f;
    r->name = xstrdup(std ? "<stdin>" : path);
    r->parser = trace_parser_new(r->name);
    r->cap = CHUNK_BYTES;
    r->buf = xmalloc(r->cap);
    *out = r;
    return 0;
}

struct trace_reader *trace_reader_from_text(const char *name, const char *text, size_t len)
{
    struct trace_reader *r = xcalloc(1, sizeof *r);
    r->name = xstrdup(strcmp(name, "-") == 0 ? "<stdin>" : name);
    r->parser = trace_parser_new(r->name);
    r->buf = (char *)text; /* read only: fill is never called past eof */
    r->cap = r->end = len;
    r->eof = r->borrowed = true;
    return r;
}

void trace_reader_close(struct trace_reader *r)
{
    if (!r)
        return;
    if (r->f && r->f != stdin)
        fclose(r->f);
    trace_parser_free(r->parser);
    if (!r->borrowed)
        free(r->buf);
    free(r->name);
    free(r);
}

int64_t trace_reader_line(const struct trace_reader *r)
{
    return r->lineno;
}

/* Reads more bytes after the unconsumed ones, moving them to the front or growing the buffer
 * first. Returns false at end of file or on error (r->io_errno). */
static bool fill(struct trace_reader *r)
{
    if (r->eof)
        return false;
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->end == r->cap) {
        r->cap *= 2;
        r->buf = xrealloc(r->buf, r->cap);
    }
    size_t got = fread(r->buf + r->end, 1, r->cap - r->end, r->f);
    r->end += got;
    if (got == 0) {
        r->eof = true;
        r->io_errno = ferror(r->f) ? errno : 0;
        return false;
    }
    return true;
}

enum line_result { LINE_OK, LINE_EOF, LINE_TRUNCATED, LINE_TOO_LONG, LINE_IO };

/* Finds the next line of at most max bytes: [*line, *line + *len), its newline consumed (a
 * truncated last line is found too, as it is). */
static enum line_result next_line(struct trace_reader *r, size_t max, const char **line,
                                  size_t *len)
{
    size_t scanned = 0; /* bytes after start known to hold no newline */
    for (;;) {
        char *nl = memchr(r->buf + r->start + scanned, '\n', r->end - r->start - scanned);
        if (nl) {
            *line = r->buf + r->start;
            *len = (size_t)(nl - *line);
            r->start += *len + 1;
            return *len > max ? LINE_TOO_LONG : LINE_OK;
        }
        scanned = r->end - r->start;
        if (scanned > max)
            return LINE_TOO_LONG; /* without looking for its end, which may never come */
        if (!fill(r)) {
            if (r->io_errno)
                return LINE_IO;
            if (r->end == r->start)
                return LINE_EOF;
            *line = r->buf + r->start;
            *len = r->end - r->start;
            r->start = r->end; /* the truncated line is consumed */
            return LINE_TRUNCATED;
        }
        /* fill moved the unconsumed bytes to the front: scanned still counts from start */
    }
}

/* Ends the reading: what is left of the file is never read, and the next line is its end. */
static void stop(struct trace_reader *r)
{
    r->eof = true;
    r->start = r->end;
}

/* Reads one line of at most max bytes; returns 1 with it, 0 at EOF, or a negative code with
 * err set. A truncated last line is an error unless last_ok. */
static int read_line_max(struct trace_reader *r, size_t max, bool last_ok, const char **line,
                         size_t *len, struct libra_error *err)
{
    enum line_result lr = next_line(r, max, line, len);
    if (lr == LINE_EOF)
        return 0;
    r->lineno++;
    switch (lr) {
    case LINE_OK:
        return 1;
    case LINE_TRUNCATED:
        if (last_ok)
            return 1;
        return error_set(err, r->name, (int)r->lineno, 1,
                         "truncated line: no newline at end of file");
    case LINE_TOO_LONG:
        /* a stream that never sends a newline (/dev/zero, a pipe from a runaway writer) has
         * no end to skip to: stop here, whether or not the line's end was read */
        stop(r);
        return error_set(err, r->name, (int)r->lineno, 1,
                         "line longer than %zu bytes; the file is not read past it", max);
    default:
        return fileio_error(err, r->name, r->io_errno);
    }
}

static int read_line(struct trace_reader *r, const char **line, size_t *len,
                     struct libra_error *err)
{
    return read_line_max(r, TRACE_MAX_LINE_BYTES, false, line, len, err);
}

int trace_reader_text_line(struct trace_reader *r, size_t max, const char **line, size_t *len,
                           struct libra_error *err)
{
    return read_line_max(r, max, true, line, len, err);
}

int trace_reader_header(struct trace_reader *r, const struct trace_header **hdr,
                        struct libra_error *err)
{
    const char *line = NULL;
    size_t len = 0;
    int rc = read_line(r, &line, &len, err);
    if (rc == 0)
        return error_set(err, r->name, 1, 1,
                         "empty file: line 1 must be the trace header {\"libra_trace\": %d, ...}",
                         TRACE_SCHEMA_VERSION);
    if (rc < 0)
        return rc;
    if ((rc = trace_parser_header(r->parser, line, len, r->lineno, hdr, err)) == 0)
        r->group_size = (*hdr)->group_size;
    return rc;
}

/* Whether t, the record of line r->lineno (NULL: a bad one, which still holds its place), belongs
 * to the group of the run it is in: readers take each run of group_size consecutive records as
 * one GRPO group (`libra sim --trace`), which would silently mix prompts. A run's group is its
 * first good record's. */
static int check_group(struct trace_reader *r, const struct trace_traj *t, struct libra_error *err)
{
    if (r->group_size == 0)
        return 0;
    if (r->in_run++ % r->group_size == 0)
        r->run_line = 0;
    if (!t)
        return 0;
    if (r->run_line == 0) {
        r->run_line = r->lineno;
        r->run_step = t->step;
        r->run_prompt = t->prompt_id;
        return 0;
    }
    if (t->step == r->run_step && t->prompt_id == r->run_prompt)
        return 0;
    return error_set(err, r->name, (int)r->lineno, 1,
                     "step %" PRId64 ", prompt_id %" PRId64 ": not the group (step %" PRId64
                     ", prompt_id %" PRId64 ") of line %" PRId64 ": with group_size %" PRId64
                     " each run of %" PRId64 " consecutive records is one group, so a group's "
                     "records must be whole and together",
                     t->step, t->prompt_id, r->run_step, r->run_prompt, r->run_line, r->group_size,
                     r->group_size);
}

int trace_reader_next(struct trace_reader *r, const struct trace_traj **traj,
                      struct libra_error *err)
{
    const char *line = NULL;
    size_t len = 0;
    int rc = read_line(r, &line, &len, err);
    if (rc <= 0)
        return rc;
    rc = trace_parser_traj(r->parser, line, len, r->lineno, traj, err);
    int in_group = check_group(r, rc == 0 ? *traj : NULL, err);
    return rc ? rc : in_group ? in_group : 1;
}

/* ---- writing ----------------------------------------------------------------------------- */

struct trace_writer {
    FILE *f;      /* NULL when writing to standard output */
    char *path;   /* final name, as given */
    char *target; /* the file renamed over (path, or a link's target); NULL: written in place */
    char *tmp;    /* temporary name; NULL for standard output or in place */
    int64_t group_size;
    struct trace_text text; /* pending output */
};

static int flush(struct trace_writer *w, struct libra_error *err)
{
    if (!w->f || w->text.len == 0)
        return 0;
    if (fwrite(w->text.data, 1, w->text.len, w->f) != w->text.len) {
        error_set(err, NULL, 0, 0, "cannot write '%s': %s", w->path, error_strerror(errno));
        return LIBRA_EIO;
    }
    w->text.len = 0;
    return 0;
}

int trace_writer_open(struct trace_writer **out, const char *path, const struct trace_header *h,
                      struct libra_error *err)
{
    *out = NULL;
    int rc = trace_check_header(h, err);
    if (rc)
        return rc;
    struct trace_writer *w = xcalloc(1, sizeof *w);
    w->path = xstrdup(path);
    w->group_size = h->group_size;
    if (strcmp(path, "-") != 0) {
        w->target = fileio_replace_target(path);
        if (w->target) { /* a name of this writer's own: threads may write one path at once */
            static atomic_uint writers;
            size_t n = strlen(w->target) + 48;
            w->tmp = xmalloc(n);
            snprintf(w->tmp, n, "%s.tmp%ld.%u", w->target, (long)getpid(),
                     atomic_fetch_add(&writers, 1));
        }
        /* a device or FIFO is written in place: a rename would replace it */
        if (!(w->f = w->tmp ? fopen(w->tmp, "wbx") : fopen(path, "wb"))) {
            int why = errno;
            if (w->tmp && access(path, F_OK) == 0) /* path itself may be writable */
                error_set(err, NULL, 0, 0,
                          "cannot write '%s': cannot create '%s' beside it to replace it whole: %s",
                          path, w->tmp, error_strerror(why));
            else
                error_set(err, NULL, 0, 0, "cannot write '%s': %s", path, error_strerror(why));
            free(w->tmp);
            free(w->target);
            free(w->path);
            free(w);
            return LIBRA_EIO;
        }
    }
    trace_format_header(&w->text, h);
    *out = w;
    return 0;
}

int trace_writer_put(struct trace_writer *w, const struct trace_traj *t, struct libra_error *err)
{
    int rc = trace_check_traj(t, w->group_size, err);
    if (rc)
        return rc;
    trace_format_traj(&w->text, t);
    return w->text.len >= CHUNK_BYTES ? flush(w, err) : 0;
}

static void writer_free(struct trace_writer *w)
{
    trace_text_free(&w->text);
    free(w->tmp);
    free(w->target);
    free(w->path);
    free(w);
}

const char *trace_writer_tmp(const struct trace_writer *w)
{
    return w->tmp;
}

void trace_writer_abort(struct trace_writer *w)
{
    if (!w)
        return;
    if (w->f) {
        fclose(w->f);
        if (w->tmp)
            remove(w->tmp);
    }
    writer_free(w);
}

int trace_writer_close(struct trace_writer *w, struct libra_error *err)
{
    if (!w)
        return 0;
    if (!w->f) {
        bool ok = fwrite(w->text.data, 1, w->text.len, stdout) == w->text.len;
        ok = fflush(stdout) == 0 && ok;
        if (!ok)
            error_set(err, NULL, 0, 0, "cannot write '<stdout>': %s", error_strerror(errno));
        writer_free(w);
        return ok ? 0 : LIBRA_EIO;
    }
    int rc = flush(w, err);
    FILE *f = w->f;
    w->f = NULL;
    if (fclose(f) != 0 && !rc) {
        error_set(err, NULL, 0, 0, "cannot write '%s': %s", w->path, error_strerror(errno));
        rc = LIBRA_EIO;
    }
    if (!rc && w->tmp && rename(w->tmp, w->target) != 0) {
        error_set(err, NULL, 0, 0, "cannot rename '%s' into place: %s", w->tmp,
                  error_strerror(errno));
        rc = LIBRA_EIO;
    }
    if (rc && w->tmp)
        remove(w->tmp);
    writer_free(w);
    return rc;
}
