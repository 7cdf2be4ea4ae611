/* Alloc-or-die wrappers; see alloc.h for why. */
#include "util/alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void xalloc_fail(size_t size)
{
    fprintf(stderr, "libra: out of memory allocating %zu bytes\n", size);
    abort();
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p)
        xalloc_fail(size);
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        xalloc_fail(count * size);
    return p;
}

void *xrealloc(void *ptr, size_t size)
{
    void *p = realloc(ptr, size ? size : 1);
    if (!p)
        xalloc_fail(size);
    return p;
}

void *xmallocarray(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        xalloc_fail(SIZE_MAX);
    return xmalloc(count * size);
}

void *xreallocarray(void *ptr, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        xalloc_fail(SIZE_MAX);
    return xrealloc(ptr, count * size);
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}
