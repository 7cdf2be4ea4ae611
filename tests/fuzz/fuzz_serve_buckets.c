/*
 * Fuzz harness for the body of the gateway's re-bucketing call (src/server/planning.c,
 * gw_buckets_parse). Besides not crashing: an accepted body asks for exactly one thing, a
 * layout given is valid and carries no instance counts; a refused one says why in a C string;
 * the parser agrees with itself on the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/planning.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const struct gw_buckets_body *b)
{
    if (b->from_plan) {
        if (b->layout.n != 0)
            abort();
        return;
    }
    if (spec_bucket_validate(&b->layout, NULL) != 0)
        abort();
    for (int i = 0; i < b->layout.n; i++)
        for (int k = 0; k < SPEC_BUCKET_TPS_MAX; k++)
            if (b->layout.bucket[i].instances[k])
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_buckets_body a, b;
    char err_a[256], err_b[256];
    int ra = gw_buckets_parse((const char *)data, size, &a, err_a, sizeof err_a);
    int rb = gw_buckets_parse((const char *)data, size, &b, err_b, sizeof err_b);
    if (ra != rb)
        abort();
    if (ra == 0) {
        check_accepted(&a);
        char ta[SPEC_BUCKET_TEXT_MAX], tb[SPEC_BUCKET_TEXT_MAX];
        spec_bucket_format(&a.layout, ta, sizeof ta);
        spec_bucket_format(&b.layout, tb, sizeof tb);
        if (a.from_plan != b.from_plan || strcmp(ta, tb) != 0)
            abort();
    } else if (!memchr(err_a, '\0', sizeof err_a) || !err_a[0] || strcmp(err_a, err_b) != 0) {
        abort();
    }
    return 0;
}
