/* Growable text buffer; see strbuf.h for the contract. */
#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

/* Makes room for n more bytes and the NUL. */
static void reserve(struct strbuf *b, size_t n)
{
    if (b->len + n + 1 <= b->cap)
        return;
    size_t want = b->len + n + 1;
    b->cap = want > b->cap * 2 ? want : b->cap * 2;
    b->data = xrealloc(b->data, b->cap);
}

void strbuf_add(struct strbuf *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void strbuf_puts(struct strbuf *b, const char *s)
{
    strbuf_add(b, s, strlen(s));
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *strbuf_detach(struct strbuf *b)
{
    char *text = b->data ? b->data : xstrdup("");
    memset(b, 0, sizeof *b);
    return text;
}

void strbuf_free(struct strbuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}
