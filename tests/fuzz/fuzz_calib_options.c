/*
 * Fuzz harness for the options after an input of `libra calibrate` ("FILE,tp=2,gpus=64";
 * src/cost/import.c). Besides not crashing: an accepted text sets each option at most once, in
 * its range, and has as many options as comma-separated items; a refusal says why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/import.h"
#include "util/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = xstrndup((const char *)data, size), why[160] = "";
    struct cost_import_options o;
    if (cost_import_options_parse(text, &o, why, sizeof why) == 0) {
        int items = text[0] ? 1 : 0, given = 0;
        for (const char *c = text; *c; c++)
            items += *c == ',';
        for (int k = 0; k < COST_N_OPTIONS; k++)
            given += (o.given >> k) & 1;
        if (given != items || o.value[COST_OPT_TP] < 0 || o.value[COST_OPT_ZERO] > 3)
            abort();
    } else if (why[0] == '\0') {
        abort();
    }
    free(text);
    return 0;
}
