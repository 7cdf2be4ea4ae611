/* Tests of content-addressed prefix matching (src/emu/prefix.c). */
#include "testutil.h"

#include <string.h>

#include "emu/prefix.h"

static void fill(uint32_t *ids, size_t n, uint32_t start)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = start + (uint32_t)i;
}

static void test_whole_blocks_of_the_recorded_context_match(void **state)
{
    struct emu_prefix p;
    emu_prefix_init(&p, 1000);
    uint32_t ctx[70], probe[90];
    fill(ctx, 70, 1);
    int64_t m;
    assert_int_equal(emu_prefix_match(&p, ctx, 70, &m), 0);
    assert_int_equal(m, 0);
    emu_prefix_record(&p, 7, ctx, 70);
    /* The next turn: the context and more. 70 tokens are 4 whole blocks. */
    memcpy(probe, ctx, sizeof ctx);
    fill(probe + 70, 20, 500);
    assert_int_equal(emu_prefix_match(&p, probe, 90, &m), 7);
    assert_int_equal(m, 64);
    /* A prompt that differs in its second block matches only the first. */
    probe[20] = 9999;
    assert_int_equal(emu_prefix_match(&p, probe, 90, &m), 7);
    assert_int_equal(m, 16);
    /* Shorter than a block: nothing. */
    assert_int_equal(emu_prefix_match(&p, ctx, 15, &m), 0);
    emu_prefix_free(&p);
}

static void test_a_newer_context_under_the_key_makes_old_blocks_stale(void **state)
{
    struct emu_prefix p;
    emu_prefix_init(&p, 1000);
    uint32_t a[64], b[64];
    fill(a, 64, 1);
    memcpy(b, a, 32 * sizeof *a); /* siblings: the same 32-token prompt, different outputs */
    fill(b + 32, 32, 800);
    emu_prefix_record(&p, 3, a, 64);
    emu_prefix_record(&p, 3, b, 64); /* b's KV replaced a's in key 3's cache entry */
    int64_t m;
    assert_int_equal(emu_prefix_match(&p, a, 64, &m), 3);
    assert_int_equal(m, 32); /* a's own output is gone */
    assert_int_equal(emu_prefix_match(&p, b, 64, &m), 3);
    assert_int_equal(m, 64);
    emu_prefix_clear(&p);
    assert_int_equal(emu_prefix_match(&p, b, 64, &m), 0);
    emu_prefix_free(&p);
}

static void test_the_table_is_bounded(void **state)
{
    struct emu_prefix p;
    emu_prefix_init(&p, 10);
    uint32_t ids[16 * 8];
    for (uint64_t key = 1; key <= 5; key++) {
        fill(ids, 16 * 8, (uint32_t)(1000 * key));
        emu_prefix_record(&p, key, ids, 16 * 8);
        assert_true(p.blocks.n <= 10);
    }
    int64_t m;
    assert_int_equal(emu_prefix_match(&p, ids, 16 * 8, &m), 5);
    emu_prefix_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_blocks_of_the_recorded_context_match),
        cmocka_unit_test(test_a_newer_context_under_the_key_makes_old_blocks_stale),
        cmocka_unit_test(test_the_table_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
