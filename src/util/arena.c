/* Bump arena over a list of malloc'd chunks; see arena.h for why. */
#include "util/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

#define ALIGN_BYTES _Alignof(max_align_t)

struct arena_chunk {
    struct arena_chunk *next;
    max_align_t data[]; /* aligned for any object */
};

/* Rounds size up to the alignment; a size that cannot be represented aborts like OOM. */
static size_t round_up(size_t size)
{
    if (size > SIZE_MAX - sizeof(struct arena_chunk) - ALIGN_BYTES)
        xalloc_fail(SIZE_MAX);
    return (size + ALIGN_BYTES - 1) & ~(ALIGN_BYTES - 1);
}

/* Regular chunks double from the first chunk's size up to ARENA_MAX_CHUNK_BYTES. */
static void restart_growth(struct arena *a)
{
    a->next_bytes =
        a->first_bytes < ARENA_MAX_CHUNK_BYTES / 2 ? a->first_bytes * 2 : ARENA_MAX_CHUNK_BYTES;
}

/* Allocates a chunk of data_bytes and links it at the head of the list. */
static char *new_chunk(struct arena *a, size_t data_bytes)
{
    struct arena_chunk *c = xmalloc(sizeof *c + data_bytes);
    c->next = a->chunks;
    a->chunks = c;
    return (char *)c->data;
}

void arena_init(struct arena *a, size_t first_bytes)
{
    memset(a, 0, sizeof *a);
    a->first_bytes = round_up(first_bytes ? first_bytes : 4096);
    a->ptr = new_chunk(a, a->first_bytes);
    a->end = a->ptr + a->first_bytes;
    restart_growth(a);
}

void *arena_alloc(struct arena *a, size_t size)
{
    size = round_up(size ? size : 1);
    if (size <= (size_t)(a->end - a->ptr)) {
        void *p = a->ptr;
        a->ptr += size;
        return p;
    }
    if (size > a->next_bytes / 4)
        return new_chunk(a, size); /* own chunk; the current one stays current */
    a->ptr = new_chunk(a, a->next_bytes);
    a->end = a->ptr + a->next_bytes;
    if (a->next_bytes < ARENA_MAX_CHUNK_BYTES)
        a->next_bytes *= 2;
    void *p = a->ptr;
    a->ptr += size;
    return p;
}

void *arena_calloc(struct arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        xalloc_fail(SIZE_MAX);
    void *p = arena_alloc(a, count * size);
    memset(p, 0, count * size);
    return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(arena_alloc(a, n), s, n);
}

void arena_reset(struct arena *a)
{
    while (a->chunks->next) {
        struct arena_chunk *c = a->chunks;
        a->chunks = c->next;
        free(c);
    }
    a->ptr = (char *)a->chunks->data;
    a->end = a->ptr + a->first_bytes;
    restart_growth(a);
}

void arena_free(struct arena *a)
{
    if (!a)
        return;
    while (a->chunks) {
        struct arena_chunk *c = a->chunks;
        a->chunks = c->next;
        free(c);
    }
    memset(a, 0, sizeof *a);
}
