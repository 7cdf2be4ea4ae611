/*
 * Filling struct libra_error (include/libra/libra.h). Parsers report where (file, line,
 * column, or a field path) and why; the CLI prints "libra: FILE:LINE:COL: MSG" and exits 2.
 */
#ifndef UTIL_ERROR_H
#define UTIL_ERROR_H

#include <stddef.h>

#include "libra/libra.h"

/*
 * Sets err (when non-NULL) to file/line/col and the printf-formatted message, truncating
 * silently. file may be NULL (no file). Returns LIBRA_EINVAL so callers can
 * `return error_set(...)`.
 */
int error_set(struct libra_error *err, const char *file, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Writes the printf-formatted reason into buf of size bytes (a plain-text error, for callers
 * that report no position). Returns -1 so callers can `return error_text(...)`. */
int error_text(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes err->msg with "prefix: " (e.g. a field path), keeping the position. */
void error_prefix(struct libra_error *err, const char *prefix);

/* strerror(errnum) with its first letter in lower case, as messages are (DESIGN.md "Errors").
 * Returns a buffer of the calling thread's, valid until its next call there. */
const char *error_strerror(int errnum);

/*
 * Writes "file:line:col: msg" (or "file: msg", or "msg") into buf of size bytes and returns
 * buf. Always NUL-terminates when size > 0.
 */
const char *error_format(const struct libra_error *err, char *buf, size_t size);

#endif
