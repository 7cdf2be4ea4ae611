/*
 * Fuzz harness for the bucket layout text parser (src/spec/bucket.c). Besides not crashing,
 * every accepted layout must validate and survive a format/parse round trip unchanged.
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
    struct spec_bucket_layout l, back;
    struct libra_error err;
    if (spec_bucket_parse(&l, text, "fuzz", &err) == 0) {
        char buf[SPEC_BUCKET_TEXT_MAX];
        if (spec_bucket_validate(&l, NULL) != 0 ||
            spec_bucket_format(&l, buf, sizeof buf) >= sizeof buf ||
            spec_bucket_parse(&back, buf, "fuzz", NULL) != 0 || memcmp(&l, &back, sizeof l) != 0)
            abort();
    } else if (err.col < 1 || (size_t)err.col > strlen(text) + 1) {
        abort();
    }
    free(text);
    return 0;
}
