/*
 * Fuzz harness for the emulator's request parser (src/emu/request.c), run on every input as
 * each of the four APIs. Besides not crashing or leaking: an accepted request has a prompt of
 * at least one token id below the vocabulary, caps and scripts in range; a refusal says why.
 */
#include <stdint.h>
#include <stdlib.h>

#include "emu/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint32_t vocab = 1000;
    for (int api = EMU_SGLANG_GENERATE; api <= EMU_VLLM_GENERATE; api++) {
        struct emu_gen_request r;
        char err[256] = "";
        if (emu_request_parse((enum emu_api)api, (const char *)data, size, vocab, &r, err,
                              sizeof err) != 0) {
            if (!err[0] || r.ids || r.rid)
                abort();
            continue;
        }
        if (r.n_ids < 1 || r.max_new_tokens < -1 || r.gen_tokens == 0 || r.gen_tokens < -1)
            abort();
        for (size_t i = 0; i < r.n_ids; i++)
            if (r.ids[i] >= vocab)
                abort();
        emu_request_free(&r);
    }
    return 0;
}
