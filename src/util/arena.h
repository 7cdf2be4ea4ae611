/*
 * Bump arenas for per-solve and per-request memory (h2o h2o_mem_pool_t style).
 *
 * A planner solve or a gateway request builds many small objects that all die together.
 * Allocating them from an arena makes each allocation a pointer bump, frees them all at once
 * (no per-object free paths to get wrong) and lets a long-lived arena be reset and reused
 * without returning its first chunk to malloc. Chunks grow geometrically so a large solve needs
 * O(log size) chunks; an allocation bigger than a quarter of the regular chunk size gets a
 * chunk of its own, so a regular chunk never wastes more than a quarter of itself.
 *
 * Not thread-safe: one arena belongs to one solve or one request.
 */
#ifndef UTIL_ARENA_H
#define UTIL_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
    struct arena_chunk *chunks; /* newest first; the last one is the first chunk */
    char *ptr;                  /* next free byte of the current chunk */
    char *end;                  /* one past the current chunk's data */
    size_t first_bytes;         /* data bytes of the first chunk */
    size_t next_bytes;          /* data bytes of the next regular chunk */
};

/* Largest regular chunk (bytes); growth doubles up to this size. */
#define ARENA_MAX_CHUNK_BYTES ((size_t)1 << 20)

/*
 * Initialises a with a first chunk of first_bytes bytes of data (0 chooses 4096; values are
 * rounded up to the alignment). Aborts on out of memory.
 */
void arena_init(struct arena *a, size_t first_bytes);

/*
 * Returns size bytes aligned to max_align_t, valid until arena_reset or arena_free. size 0
 * returns a distinct valid pointer. Never returns NULL (aborts on out of memory).
 */
void *arena_alloc(struct arena *a, size_t size);

/* arena_alloc of count * size zeroed bytes; aborts when count * size overflows. */
void *arena_calloc(struct arena *a, size_t count, size_t size);

/* Copies the NUL-terminated string s into the arena. */
char *arena_strdup(struct arena *a, const char *s);

/*
 * Invalidates every allocation and frees every chunk but the first, which is reused; the
 * growth sequence starts again.
 */
void arena_reset(struct arena *a);

/* Frees every chunk. a may be NULL; a freed arena must be re-initialised before reuse. */
void arena_free(struct arena *a);

#endif
