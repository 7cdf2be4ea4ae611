/*
 * A typed dynamic array in three macros (git's ALLOC_GROW, without the ceremony).
 *
 * Registries, event lists and decision records are arrays that grow by appending. Writing the
 * realloc-and-double dance at every site invites off-by-one and overflow bugs; one generic
 * version keeps them in one place while the element type stays visible to the compiler.
 *
 *     typedef VEC(double) double_vec;     (declare a named type: two VEC(T) are distinct types)
 *     double_vec v = {0};                 (a zeroed vector is empty and valid)
 *     vec_push(&v, 1.5);
 *     for (size_t i = 0; i < v.n; i++) use(v.v[i]);
 *     vec_free(&v);
 *
 * The vector argument is evaluated more than once: pass a plain pointer, not an expression with
 * side effects. Element pointers are invalidated by any push or reserve that grows the array.
 */
#ifndef UTIL_VEC_H
#define UTIL_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/alloc.h"

/* v: elements; n: elements in use; cap: elements allocated. */
#define VEC(T)                                                                                     \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }

/* Makes room for at least want elements (geometric growth; aborts on overflow or OOM). */
#define vec_reserve(vec, want)                                                                     \
    ((vec)->v = vec_grow_((vec)->v, &(vec)->cap, (want), sizeof *(vec)->v))

/* Appends x (evaluated once) to the end. */
#define vec_push(vec, x) (vec_reserve((vec), (vec)->n + 1), (vec)->v[(vec)->n++] = (x))

/* Releases the storage and leaves an empty vector. */
#define vec_free(vec) (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

/* Implementation of vec_reserve: returns v resized so that *cap >= want. */
static inline void *vec_grow_(void *v, size_t *cap, size_t want, size_t elem_bytes)
{
    if (want <= *cap)
        return v;
    size_t grown = *cap < SIZE_MAX / 2 ? *cap * 2 : SIZE_MAX;
    if (grown < 8)
        grown = 8;
    *cap = want > grown ? want : grown;
    return xreallocarray(v, *cap, elem_bytes);
}

#endif
