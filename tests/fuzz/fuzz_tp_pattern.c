/*
 * Fuzz harness for the plan.tp_pattern parser (src/spec/bucket.c). Besides not crashing: an
 * accepted pattern has at most SPEC_PATTERN_MAX instances whose sizes add up to the GPUs it
 * reports and holds no white space (one spelling, one digest), and a refusal points inside the
 * text (or just past its end).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/bucket.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = xstrndup((const char *)data, size);
    int counts[SPEC_TP_SIZES], gpus;
    struct libra_error err;
    if (spec_tp_pattern_parse(text, "fuzz", counts, &gpus, &err) == 0) {
        int n = 0, sum = 0;
        for (int t = 0; t < SPEC_TP_SIZES; t++) {
            n += counts[t];
            sum += counts[t] << t;
        }
        if (n > SPEC_PATTERN_MAX || sum != gpus || (n == 0) != (gpus == 0) ||
            strpbrk(text, " \t\n\v\f\r"))
            abort();
    } else if (err.col < 1 || (size_t)err.col > strlen(text) + 1) {
        abort();
    }
    free(text);
    return 0;
}
