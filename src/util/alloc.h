/*
 * Allocation that never returns NULL. libra treats running out of memory as fatal (h2o,
 * git): a planner or simulator that cannot allocate cannot do anything useful, and checking
 * every allocation would bury the logic. Caps on live state (trees, registries) are enforced
 * by the modules that own them, not here.
 */
#ifndef UTIL_ALLOC_H
#define UTIL_ALLOC_H

#include <stddef.h>

/* malloc/calloc/realloc/strdup that print "libra: out of memory" and abort on failure. */
void *xmalloc(size_t size);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *ptr, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Prints "libra: out of memory allocating SIZE bytes" and aborts: what every function here does
 * on failure, for a caller whose size cannot be represented (an overflowed count). */
_Noreturn void xalloc_fail(size_t size);

/* Allocates count elements of size bytes, aborting on overflow of count * size. */
void *xmallocarray(size_t count, size_t size);
void *xreallocarray(void *ptr, size_t count, size_t size);

#endif
