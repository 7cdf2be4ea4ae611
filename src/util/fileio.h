/*
 * Opening files to read, and the one wording of what fails: "cannot read 'PATH': REASON",
 * REASON being strerror's ("no such file or directory", "is a directory").
 */
#ifndef UTIL_FILEIO_H
#define UTIL_FILEIO_H

#include <stdio.h>

#include "libra/libra.h"

/*
 * Opens path to read ("-": standard input), past a UTF-8 byte order mark at its start. Returns
 * the stream, or NULL with err set (when non-NULL) and errno kept. A directory is refused here
 * (EISDIR): fopen opens one, and only the first read would fail.
 */
FILE *fileio_open(const char *path, struct libra_error *err);

/* Sets err to "cannot read 'PATH': REASON" for errnum, the errno of the failed call. Returns
 * LIBRA_EIO. */
int fileio_error(struct libra_error *err, const char *path, int errnum);

/*
 * The file to replace when writing path whole (a temporary file beside it renamed over it): a
 * malloc'd copy of path when it does not exist, the regular file it names or would create (a
 * symbolic link's target, dangling or not, so that the link stays), or NULL when path is
 * something else a rename would destroy (a device such as /dev/null or /dev/stdout, a FIFO, a
 * socket) or cannot be looked at (a loop of links, a directory without search permission):
 * write it in place, where opening it fails with the reason.
 */
char *fileio_replace_target(const char *path);

#endif
