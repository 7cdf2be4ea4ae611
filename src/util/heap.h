/*
 * Binary min-heap of fixed-size elements ordered by a caller comparator.
 *
 * The discrete-event simulator pops millions of events ordered by (time, sequence number) and
 * the greedy schedulers repeatedly take the least-loaded instance. Both want the elements
 * stored by value (no per-event allocation, no pointer chasing) and a total order the caller
 * defines, including the tie-break that makes runs reproducible: with equal times, the event
 * pushed first pops first only if the comparator says so (compare a sequence number; see
 * tests/unit/test_util_heap.c). The heap itself is not stable.
 *
 * Not thread-safe.
 */
#ifndef UTIL_HEAP_H
#define UTIL_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returns <0, 0 or >0 as a orders before, with or after b; ctx is the heap's. */
typedef int (*heap_cmp_fn)(const void *a, const void *b, void *ctx);

struct heap {
    char *data;        /* n elements, then one scratch element */
    size_t n;          /* elements in the heap */
    size_t cap;        /* elements allocated, scratch excluded */
    size_t elem_bytes; /* size of one element */
    heap_cmp_fn cmp;
    void *ctx;
};

/* Initialises an empty heap of elem_bytes-byte elements (elem_bytes > 0). Allocates lazily. */
void heap_init(struct heap *h, size_t elem_bytes, heap_cmp_fn cmp, void *ctx);

/* Frees the storage. h may be NULL. */
void heap_free(struct heap *h);

/* Copies elem (which must not point into the heap) into the heap. O(log n); aborts on OOM. */
void heap_push(struct heap *h, const void *elem);

/* Removes the least element, copying it to out (may be NULL). Returns false when empty. */
bool heap_pop(struct heap *h, void *out);

/* The least element, or NULL when empty; valid until the next push, pop or clear. */
const void *heap_peek(const struct heap *h);

/* Number of elements. */
size_t heap_size(const struct heap *h);

/* Removes every element, keeping the storage. */
void heap_clear(struct heap *h);

/*
 * Indexed min-heap of small ids (0, 1, 2, ...), each in it at most once, ordered by (k1, k2)
 * ascending: where an element's key changes or it leaves before reaching the top (a request
 * the engine admits, an instance whose next event moves), instead of piling up stale copies.
 * O(log n) set and remove; an id's position is kept in an array indexed by id.
 */
struct heap_entry {
    double k1;
    int64_t k2;
    uint32_t id;
};

struct heap_indexed {
    struct heap_entry *v; /* n entries in heap order */
    size_t n, cap;
    size_t *pos; /* by id: index in v plus one; 0: not in the heap */
    size_t n_pos;
};

/* An empty heap (a zeroed struct is one too); allocates lazily. */
void heap_indexed_init(struct heap_indexed *h);

void heap_indexed_free(struct heap_indexed *h);

/* Puts id in with key (k1, k2), or moves it there if it is in already. Aborts on OOM. */
void heap_indexed_set(struct heap_indexed *h, uint32_t id, double k1, int64_t k2);

/* Takes id out; nothing when it is not in. */
void heap_indexed_remove(struct heap_indexed *h, uint32_t id);

/* The least entry, or NULL when empty; valid until the next set or remove. */
const struct heap_entry *heap_indexed_top(const struct heap_indexed *h);

#endif
