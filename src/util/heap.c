/*
 * Array-backed binary heap; see heap.h for why. Sifting moves a hole rather than swapping,
 * so each level costs one element copy; the moving element waits in a scratch slot.
 */
#include "util/heap.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static char *at(const struct heap *h, size_t i)
{
    return h->data + i * h->elem_bytes;
}

static char *scratch(const struct heap *h)
{
    return at(h, h->cap);
}

void heap_init(struct heap *h, size_t elem_bytes, heap_cmp_fn cmp, void *ctx)
{
    *h = (struct heap){.elem_bytes = elem_bytes, .cmp = cmp, .ctx = ctx};
}

void heap_free(struct heap *h)
{
    if (!h)
        return;
    free(h->data);
    h->data = NULL;
    h->n = h->cap = 0;
}

/* Places the scratch element in the hole at i, moving larger ancestors down. */
static void sift_up(struct heap *h, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->cmp(at(h, parent), scratch(h), h->ctx) <= 0)
            break;
        memcpy(at(h, i), at(h, parent), h->elem_bytes);
        i = parent;
    }
    memcpy(at(h, i), scratch(h), h->elem_bytes);
}

/*
 * Fills the hole at the root after a pop: the hole sinks to a leaf along the smaller children
 * (one comparison per level), then the scratch element (the old last one) rises from there.
 * The old last element usually belongs near the bottom, so this needs about half the
 * comparisons of sifting it down from the root (Floyd; libstdc++'s __adjust_heap).
 */
static void refill_root(struct heap *h)
{
    size_t i = 0;
    for (size_t child = 1; child < h->n; child = 2 * i + 1) {
        if (child + 1 < h->n && h->cmp(at(h, child + 1), at(h, child), h->ctx) < 0)
            child++;
        memcpy(at(h, i), at(h, child), h->elem_bytes);
        i = child;
    }
    sift_up(h, i);
}

void heap_push(struct heap *h, const void *elem)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->data = xreallocarray(h->data, h->cap + 1, h->elem_bytes);
    }
    memcpy(scratch(h), elem, h->elem_bytes);
    sift_up(h, h->n++);
}

bool heap_pop(struct heap *h, void *out)
{
    if (h->n == 0)
        return false;
    if (out)
        memcpy(out, at(h, 0), h->elem_bytes);
    h->n--;
    if (h->n > 0) {
        memcpy(scratch(h), at(h, h->n), h->elem_bytes);
        refill_root(h);
    }
    return true;
}

const void *heap_peek(const struct heap *h)
{
    return h->n ? h->data : NULL;
}

size_t heap_size(const struct heap *h)
{
    return h->n;
}

void heap_clear(struct heap *h)
{
    h->n = 0;
}

/* ---- indexed ---------------------------------------------------------------------------- */

void heap_indexed_init(struct heap_indexed *h)
{
    *h = (struct heap_indexed){0};
}

void heap_indexed_free(struct heap_indexed *h)
{
    free(h->v);
    free(h->pos);
    heap_indexed_init(h);
}

static bool entry_before(const struct heap_entry *a, const struct heap_entry *b)
{
    return a->k1 != b->k1 ? a->k1 < b->k1 : a->k2 < b->k2;
}

static void place(struct heap_indexed *h, size_t i, struct heap_entry x)
{
    h->v[i] = x;
    h->pos[x.id] = i + 1;
}

/* Moves the entry at index i up or down to its place. */
static void fix(struct heap_indexed *h, size_t i)
{
    struct heap_entry *v = h->v, x = v[i];
    while (i > 0 && entry_before(&x, &v[(i - 1) / 2])) {
        place(h, i, v[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (size_t c; (c = 2 * i + 1) < h->n; i = c) {
        if (c + 1 < h->n && entry_before(&v[c + 1], &v[c]))
            c++;
        if (!entry_before(&v[c], &x))
            break;
        place(h, i, v[c]);
    }
    place(h, i, x);
}

void heap_indexed_set(struct heap_indexed *h, uint32_t id, double k1, int64_t k2)
{
    if (id >= h->n_pos) {
        size_t n = h->n_pos ? h->n_pos : 16;
        while (n <= id)
            n *= 2;
        h->pos = xreallocarray(h->pos, n, sizeof *h->pos);
        memset(h->pos + h->n_pos, 0, (n - h->n_pos) * sizeof *h->pos);
        h->n_pos = n;
    }
    size_t i = h->pos[id];
    if (i == 0) {
        if (h->n == h->cap) {
            h->cap = h->cap ? h->cap * 2 : 16;
            h->v = xreallocarray(h->v, h->cap, sizeof *h->v);
        }
        i = ++h->n;
    }
    h->v[i - 1] = (struct heap_entry){k1, k2, id};
    fix(h, i - 1);
}

void heap_indexed_remove(struct heap_indexed *h, uint32_t id)
{
    if (id >= h->n_pos || h->pos[id] == 0)
        return;
    size_t i = h->pos[id] - 1;
    h->pos[id] = 0;
    struct heap_entry last = h->v[--h->n];
    if (i < h->n) {
        h->v[i] = last;
        fix(h, i);
    }
}

const struct heap_entry *heap_indexed_top(const struct heap_indexed *h)
{
    return h->n ? h->v : NULL;
}
