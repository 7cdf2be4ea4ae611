/*
 * The text of a fault to inject (`libra emu --fail` and `--stall`): "instance=I,after_s=T" and,
 * for a stall, ",for_s=D". Pure: a string in, the fault and a reason out (emu/emu.h). Every
 * reason about one item starts with its key ("after_s: expected a number ..."), so that the
 * CLI's message names the flag and the key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/parse.h"

/* The value slot of key in f (for_s only for a stall), or NULL for a key f does not take. */
static double *slot(const char *key, struct emu_fault_flag *f)
{
    if (strcmp(key, "after_s") == 0)
        return &f->after_s;
    if (strcmp(key, "for_s") == 0 && f->stall)
        return &f->for_s;
    return NULL;
}

/* Parses value into *out, a reason prefixed with key; 0 or -1. */
static int read_value(const char *key, const char *value, bool integer, double *out, char *why,
                      size_t size)
{
    int n = snprintf(why, size, "%s: ", key);
    size_t at = n > 0 && (size_t)n < size ? (size_t)n : 0;
    int64_t i = 0;
    int rc = integer ? parse_int(value, 0, 1000000000, &i, why + at, size - at)
                     : parse_double(value, 0, 1e9, out, why + at, size - at);
    if (rc == 0 && integer)
        *out = (double)i;
    return rc;
}

/* One KEY=VALUE item into f; 0, or -1 with why. */
static int read_item(char *item, struct emu_fault_flag *f, char *why, size_t size)
{
    char *eq = strchr(item, '=');
    if (!eq)
        return error_text(why, size, "expected KEY=VALUE items, got '%s'", item);
    *eq++ = '\0';
    double instance = f->instance;
    double *v = strcmp(item, "instance") == 0 ? &instance : slot(item, f);
    if (!v)
        return error_text(why, size, "%s: not a key of this flag (it takes instance, after_s%s)",
                          item, f->stall ? ", for_s" : "");
    if (*v >= 0) /* which of two values was meant cannot be told */
        return error_text(why, size, "%s: given twice", item);
    if (read_value(item, eq, v == &instance, v, why, size) != 0)
        return -1;
    f->instance = (int)instance;
    return 0;
}

/* The first key f lacks, or NULL. */
static const char *missing(const struct emu_fault_flag *f)
{
    return f->instance < 0            ? "instance"
           : f->after_s < 0           ? "after_s"
           : f->stall && f->for_s < 0 ? "for_s"
                                      : NULL;
}

int emu_fault_parse(const char *text, bool stall, struct emu_fault_flag *out, char *why,
                    size_t size)
{
    struct emu_fault_flag f = {.instance = -1, .after_s = -1, .for_s = -1, .stall = stall};
    char *copy = xstrdup(text), *next = copy;
    int rc = 0;
    while (next && !rc) { /* an empty item (",,", a trailing ',') is refused, not skipped */
        char *item = next, *comma = strchr(item, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        rc = *item ? read_item(item, &f, why, size)
                   : error_text(why, size, "an empty item in '%s'", text);
    }
    free(copy);
    if (rc)
        return -1;
    const char *lack = missing(&f);
    if (lack)
        return error_text(why, size, "%s: missing (expected instance=I,after_s=T%s)", lack,
                          stall ? ",for_s=D" : "");
    if (stall && f.for_s == 0) /* a stall of no time would change nothing */
        return error_text(why, size, "for_s: must be above 0");
    *out = f;
    return 0;
}
