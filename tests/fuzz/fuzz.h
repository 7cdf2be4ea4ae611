/*
 * What the fuzz targets share: libFuzzer's entry point, and the check of an invariant, which
 * aborts — libFuzzer's finding, the corpus replay's failure — naming the target's source file
 * and the invariant that broke.
 */
#ifndef FUZZ_FUZZ_H
#define FUZZ_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless ok, saying what broke and where (fuzz_require's file). */
#define fuzz_require(ok, what) fuzz_check((ok), __FILE__, (what))

static inline void fuzz_check(bool ok, const char *file, const char *what)
{
    if (ok)
        return;
    fprintf(stderr, "%s: %s\n", file, what);
    abort();
}

#endif
