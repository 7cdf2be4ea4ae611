/* struct libra_error helpers; see error.h. */
#include "util/error.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* file into out (size bytes): whole where it fits, else "..." and its end, the file's own name,
 * from a character's first byte on (its start would name a file that does not exist). */
static void set_path(char *out, size_t size, const char *file)
{
    size_t len = strlen(file);
    if (len < size) {
        memcpy(out, file, len + 1);
        return;
    }
    const char *tail = file + len - (size - 4);
    while (((unsigned char)*tail & 0xC0) == 0x80)
        tail++;
    snprintf(out, size, "...%s", tail);
}

int error_set(struct libra_error *err, const char *file, int line, int col, const char *fmt, ...)
{
    if (!err)
        return LIBRA_EINVAL;
    set_path(err->file, sizeof err->file, file ? file : "");
    err->line = line;
    err->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return LIBRA_EINVAL;
}

int error_text(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    return -1;
}

void error_prefix(struct libra_error *err, const char *prefix)
{
    if (!err || !prefix || !*prefix)
        return;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
}

const char *error_format(const struct libra_error *err, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    if (err->file[0] && err->line > 0)
        snprintf(buf, size, "%s:%d:%d: %s", err->file, err->line, err->col, err->msg);
    else if (err->file[0])
        snprintf(buf, size, "%s: %s", err->file, err->msg);
    else
        snprintf(buf, size, "%s", err->msg);
    return buf;
}

const char *error_strerror(int errnum)
{
    static _Thread_local char buf[128];           /* per thread: the shared library calls it too */
    if (strerror_r(errnum, buf, sizeof buf) != 0) /* POSIX's: strerror's buffer is shared */
        snprintf(buf, sizeof buf, "error %d", errnum);
    buf[0] = (char)tolower((unsigned char)buf[0]);
    return buf;
}
