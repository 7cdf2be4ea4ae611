/*
 * Fuzz harness for the faults `libra emu --fail` and `--stall` inject (emu_fault_parse,
 * src/emu/fault.c). The first byte picks --stall (odd) or --fail, the rest is the flag's value.
 * Besides not crashing: a refusal leaves the fault as it was and says why, within a why of
 * strlen(text) + PARSE_WHY_EXTRA bytes; an accepted fault names an integer instance >= 0, an
 * after_s in [0, 1e9] and, for a stall alone, a for_s in (0, 1e9], and written back as its
 * items parses to the same fault.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "emu/emu.h"
#include "util/alloc.h"
#include "util/parse.h"

static bool same(const struct emu_fault_flag *a, const struct emu_fault_flag *b)
{
    return a->instance == b->instance && a->after_s == b->after_s && a->for_s == b->for_s &&
           a->stall == b->stall;
}

static void check_accepted(const struct emu_fault_flag *f, bool stall)
{
    fuzz_require(f->stall == stall, "the kind of fault changed");
    fuzz_require(f->instance >= 0 && f->instance <= 1000000000, "an instance out of range");
    fuzz_require(f->after_s >= 0 && f->after_s <= 1e9, "after_s out of range");
    if (stall)
        fuzz_require(f->for_s > 0 && f->for_s <= 1e9, "a stall's for_s out of range");
    else
        fuzz_require(f->for_s == -1, "a failure with a for_s");
    char text[128], why[128 + PARSE_WHY_EXTRA];
    if (stall)
        snprintf(text, sizeof text, "for_s=%.17g,instance=%d,after_s=%.17g", f->for_s, f->instance,
                 f->after_s);
    else
        snprintf(text, sizeof text, "after_s=%.17g,instance=%d", f->after_s, f->instance);
    struct emu_fault_flag again;
    fuzz_require(emu_fault_parse(text, stall, &again, why, sizeof why) == 0,
                 "written back, refused");
    fuzz_require(same(f, &again), "written back, a different fault");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool stall = data[0] & 1;
    char *text = xmalloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    size_t why_size = strlen(text) + PARSE_WHY_EXTRA;
    char *why = xmalloc(why_size);
    why[0] = '\0';
    struct emu_fault_flag sentinel = {.instance = 12345, .after_s = 6.5, .for_s = 7.5},
                          f = sentinel;
    if (emu_fault_parse(text, stall, &f, why, why_size) != 0) {
        fuzz_require(same(&f, &sentinel), "a refusal changed the fault");
        fuzz_require(why[0] != '\0', "a refusal without a reason");
        fuzz_require(strlen(why) + 1 < why_size, "a reason cut short");
    } else {
        check_accepted(&f, stall);
    }
    free(why);
    free(text);
    return 0;
}
