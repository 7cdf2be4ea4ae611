/*
 * Appending output files (outfile.h): open for appending, read a kept file's first line for the
 * caller to judge, cut a last line left short, write lines as they come.
 */
#include "server/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libra/libra.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

/* Reads up to size bytes at offset into buf; returns how many (fewer at the end of the file),
 * or -1 with errno. */
static ssize_t read_at(int fd, char *buf, size_t size, off_t offset)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, size - got, offset + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Whether the n bytes of buf, a whole file without a newline, are the start of a first line
 * the gateway writes (one that begins with opening). */
static bool cut_first_line(const char *buf, ssize_t n, const char *opening)
{
    size_t len = strlen(opening), k = (size_t)n < len ? (size_t)n : len;
    return n < GW_OUTFILE_HEAD_MAX && memcmp(buf, opening, k) == 0;
}

/* Empties f, a first line cut short, saying so for what. */
static int empty_cut(struct gw_outfile *f, ssize_t n, const char *what, char *err, size_t err_size)
{
    if (ftruncate(f->fd, 0) != 0) {
        error_text(err, err_size, "cannot mend '%s': %s", f->path, error_strerror(errno));
        return LIBRA_EIO;
    }
    fprintf(stderr,
            "libra: serve: %s '%s': its first line was cut short (a stop while it was written): "
            "its %lld bytes are removed\n",
            what, f->path, (long long)n);
    return 0;
}

/* The kept file's first line into f->head. */
static int read_head(struct gw_outfile *f, const char *opening, const char *what, char *err,
                     size_t err_size)
{
    char *buf = xmalloc(GW_OUTFILE_HEAD_MAX);
    ssize_t n = read_at(f->fd, buf, GW_OUTFILE_HEAD_MAX, 0);
    const char *nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
    int rc = 0;
    if (n < 0) {
        error_text(err, err_size, "cannot read '%s': %s", f->path, error_strerror(errno));
        rc = LIBRA_EIO;
    } else if (!nl && cut_first_line(buf, n, opening)) {
        rc = empty_cut(f, n, what, err, err_size);
    } else if (!nl) {
        error_text(err, err_size,
                   "'%s': no whole line in its first %d KiB: not a file of lines to append to",
                   f->path, GW_OUTFILE_HEAD_MAX >> 10);
        rc = LIBRA_EINVAL;
    } else {
        f->head = xstrndup(buf, (size_t)(nl - buf));
    }
    free(buf);
    return rc;
}

int gw_outfile_open(struct gw_outfile *f, const char *path, const char *opening, const char *what,
                    char *err, size_t err_size)
{
    *f = (struct gw_outfile){.fd = -1, .path = path};
    struct stat st;
    /* a regular file is read as well (its first line, a last line left short); a device or a
     * FIFO only written */
    int mode = stat(path, &st) != 0 || S_ISREG(st.st_mode) ? O_RDWR : O_WRONLY;
    int fd = open(path, mode | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0 || fstat(fd, &st) != 0) {
        error_text(err, err_size, "cannot open '%s': %s", path, error_strerror(errno));
        if (fd >= 0)
            close(fd);
        return LIBRA_EIO;
    }
    f->fd = fd;
    f->regular = S_ISREG(st.st_mode);
    int rc = f->regular && st.st_size > 0 ? read_head(f, opening, what, err, err_size) : 0;
    if (rc != 0)
        gw_outfile_close(f);
    return rc;
}

/* Where the kept file's last whole line ends: the offset after its last newline, into *end. */
static int last_newline(const struct gw_outfile *f, off_t size, off_t *end)
{
    char buf[4096];
    for (off_t pos = size; pos > 0;) {
        size_t n = pos < (off_t)sizeof buf ? (size_t)pos : sizeof buf;
        pos -= (off_t)n;
        if (read_at(f->fd, buf, n, pos) != (ssize_t)n)
            return -1;
        for (size_t i = n; i-- > 0;)
            if (buf[i] == '\n') {
                *end = pos + (off_t)i + 1;
                return 0;
            }
    }
    *end = 0;
    return 0;
}

int gw_outfile_mend(struct gw_outfile *f, const char *what, char *err, size_t err_size)
{
    struct stat st;
    off_t end;
    if (!f->head) /* nothing kept */
        return 0;
    if (fstat(f->fd, &st) != 0 || last_newline(f, st.st_size, &end) != 0 ||
        (end < st.st_size && ftruncate(f->fd, end) != 0)) {
        error_text(err, err_size, "cannot mend '%s': %s", f->path, error_strerror(errno));
        return LIBRA_EIO;
    }
    if (end < st.st_size)
        fprintf(stderr,
                "libra: serve: %s '%s': its last line was cut short (a stop while it was "
                "written): its %lld bytes are removed\n",
                what, f->path, (long long)(st.st_size - end));
    return 0;
}

int gw_outfile_lines(const struct gw_outfile *f, gw_outfile_line_fn fn, void *arg, char *err,
                     size_t err_size)
{
    char *buf = xmalloc(GW_OUTFILE_HEAD_MAX);
    struct strbuf line = {0}; /* the line being read, across reads */
    int64_t lineno = 0;
    off_t pos = 0;
    ssize_t n = 0;
    int rc = 0;
    while (rc == 0 && (n = read_at(f->fd, buf, GW_OUTFILE_HEAD_MAX, pos)) > 0) {
        pos += n;
        const char *p = buf, *end = buf + n, *nl;
        for (; rc == 0 && (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
            strbuf_add(&line, p, (size_t)(nl - p));
            rc = fn(arg, line.data ? line.data : "", line.len, ++lineno);
            line.len = 0;
        }
        strbuf_add(&line, p, (size_t)(end - p)); /* a last line cut short is not one */
    }
    if (rc == 0 && n < 0) {
        error_text(err, err_size, "cannot read '%s': %s", f->path, error_strerror(errno));
        rc = LIBRA_EIO;
    }
    strbuf_free(&line);
    free(buf);
    return rc;
}

int gw_outfile_write(struct gw_outfile *f, const char *data, size_t len)
{
    while (!f->error[0] && len > 0) {
        ssize_t n = write(f->fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(f->error, sizeof f->error, "cannot write '%s': %s", f->path,
                     error_strerror(n < 0 ? errno : EIO));
        } else {
            data += n;
            len -= (size_t)n;
        }
    }
    return f->error[0] ? -1 : 0;
}

int gw_outfile_close(struct gw_outfile *f)
{
    free(f->head);
    f->head = NULL;
    if (f->fd >= 0 && close(f->fd) != 0 && !f->error[0])
        snprintf(f->error, sizeof f->error, "cannot write '%s': %s", f->path,
                 error_strerror(errno));
    f->fd = -1;
    return f->error[0] ? -1 : 0;
}
