/*
 * Files embedded in the binary at build time (cmake/embed.cmake turns the files in data/presets/
 * into gen/embedded.c), so `libra` runs from any directory without a data path.
 */
#ifndef UTIL_EMBED_H
#define UTIL_EMBED_H

#include <stddef.h>

struct embedded_file {
    const char *name; /* file name without directory, e.g. "hardware.json" */
    const char *data; /* contents, NUL-terminated (the NUL is not counted in len) */
    size_t len;       /* bytes */
};

/* Terminated by an entry whose name is NULL. */
extern const struct embedded_file embedded_files[];

#endif
