/*
 * Fuzz harness for the readers of engine answers in `libra load` (src/load/style.c): a turn's
 * answer in every style, and /v1/loads. Besides not crashing or leaking: an accepted answer
 * has its ids, a refused one leaves nothing allocated.
 */
#include <stdint.h>
#include <stdlib.h>

#include "load/style.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int s = LOAD_PLAIN; s <= LOAD_SKYRL; s++) {
        struct load_answer a;
        if (load_turn_answer((enum load_style)s, (const char *)data, size, &a) == 0) {
            if (!a.ids)
                abort();
            free(a.ids);
        } else if (a.ids || a.n) {
            abort();
        }
    }
    (void)load_loads_idle((const char *)data, size);
    return 0;
}
