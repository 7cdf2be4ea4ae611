/*
 * A growable NUL-terminated text buffer (git's strbuf, redis's sds): the one way text is built
 * in memory, so that reports, tables and JSON Lines do not each carry their own
 * realloc-and-double loop.
 *
 *     struct strbuf b = {0};              (a zeroed buffer is empty and valid)
 *     strbuf_printf(&b, "%d steps\n", n);
 *     char *text = strbuf_detach(&b);     (the caller frees text; b is empty again)
 *
 * Growth is geometric; allocation aborts on OOM (util/alloc.h). Not thread-safe: one buffer
 * belongs to one caller.
 */
#ifndef UTIL_STRBUF_H
#define UTIL_STRBUF_H

#include <stddef.h>

struct strbuf {
    char *data; /* NUL-terminated once anything was added; NULL while empty */
    size_t len; /* bytes of text, the NUL excluded */
    size_t cap; /* bytes allocated */
};

/* Appends n bytes of s (which may hold NULs; the buffer stays NUL-terminated after them). */
void strbuf_add(struct strbuf *b, const char *s, size_t n);

/* Appends the NUL-terminated string s. */
void strbuf_puts(struct strbuf *b, const char *s);

/* Appends the printf-formatted text. */
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Returns the text as a malloc'd string the caller frees ("" when empty) and empties b. */
char *strbuf_detach(struct strbuf *b);

/* Frees the text and empties b; a zeroed buffer is fine. */
void strbuf_free(struct strbuf *b);

#endif
