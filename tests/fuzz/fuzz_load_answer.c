/*
 * Fuzz harness for the readers of engine answers in `libra load` (src/load/style.c): a turn's
 * answer in every style, and /v1/loads. The first three bytes size the turn (its budget, its
 * context and the vocabulary, small, so that answers can pass and fail each check); the rest is
 * the answer. Besides not crashing or leaking: an accepted answer has its ids, no more than the
 * turn asked for, each below the vocabulary, and a cached-token count within the context; a
 * refused one leaves nothing allocated and says why.
 */
#include <stdint.h>
#include <stdlib.h>

#include "load/style.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(enum load_style s, const struct load_turn *t, const char *body, size_t len)
{
    struct load_answer a;
    char why[256] = "";
    if (load_turn_read(s, t, body, len, &a, why, sizeof why) == 0) {
        if (!a.ids || (int64_t)a.n > t->gen_tokens || a.cached_tokens < 0 ||
            (size_t)a.cached_tokens > t->n_ctx)
            abort();
        for (size_t i = 0; i < a.n; i++)
            if (a.ids[i] >= t->vocab)
                abort();
        free(a.ids);
    } else if (a.ids || a.n || !why[0]) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    const struct load_turn t = {.n_ctx = data[1], .gen_tokens = data[0], .vocab = 1u + data[2]};
    for (int s = LOAD_PLAIN; s <= LOAD_SKYRL; s++)
        check((enum load_style)s, &t, (const char *)data + 3, size - 3);
    (void)load_loads_idle((const char *)data + 3, size - 3);
    return 0;
}
