/*
 * The text of a fault to inject (`libra emu --fail` and `--stall`): "instance=I,after_s=T" and,
 * for a stall, ",for_s=D". Pure: a string in, the fault and a reason out (emu/emu.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/emu.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/parse.h"

static bool repeated(const char *item, const struct emu_fault_flag *f)
{
    return (strcmp(item, "instance") == 0 && f->instance >= 0) ||
           (strcmp(item, "after_s") == 0 && f->after_s >= 0) ||
           (strcmp(item, "for_s") == 0 && f->for_s >= 0);
}

/* One KEY=VALUE item into f; 0, or -1 with why. */
static int read_item(char *item, bool stall, struct emu_fault_flag *f, char *why, size_t size)
{
    char *eq = strchr(item, '=');
    if (!eq)
        return error_text(why, size, "expected KEY=VALUE items, got '%s'", item);
    *eq++ = '\0';
    double v = 0;
    if (parse_double(eq, 0, 1e9, &v, why, size) != 0)
        return -1;
    if (repeated(item, f)) /* which of two values was meant cannot be told */
        return error_text(why, size, "'%s' given twice", item);
    if (strcmp(item, "instance") == 0 && v == (int)v)
        f->instance = (int)v;
    else if (strcmp(item, "after_s") == 0)
        f->after_s = v;
    else if (strcmp(item, "for_s") == 0 && stall)
        f->for_s = v;
    else
        return error_text(why, size, "unknown or malformed item '%s'", item);
    return 0;
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
        rc = *item ? read_item(item, stall, &f, why, size)
                   : error_text(why, size, "an empty item in '%s'", text);
    }
    free(copy);
    if (rc)
        return -1;
    if (f.instance < 0 || f.after_s < 0 || (stall && f.for_s < 0))
        return error_text(why, size, "expected instance=I,after_s=T%s", stall ? ",for_s=D" : "");
    if (stall && f.for_s == 0) /* a stall of no time would change nothing */
        return error_text(why, size, "for_s must be above 0");
    *out = f;
    return 0;
}
