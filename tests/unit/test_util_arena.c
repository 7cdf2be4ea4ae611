/*
 * util/arena: alignment, contents surviving chunk growth, big allocations in their own chunk,
 * reset reusing the first chunk, and abort on overflowing requests.
 */
#include "testutil.h"

#include <stdint.h>
#include <string.h>

#include "util/arena.h"

#define ALIGN_BYTES _Alignof(max_align_t)

static void test_alignment_and_distinct(void **state)
{
    struct arena a;
    arena_init(&a, 64);
    void *prev = NULL;
    for (size_t size = 0; size < 200; size++) {
        void *p = arena_alloc(&a, size);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % ALIGN_BYTES, 0);
        assert_ptr_not_equal(p, prev);
        prev = p;
    }
    arena_free(&a);
}

/* Every block keeps its own bytes while the arena grows through many chunks. */
static void test_contents_survive_growth(void **state)
{
    enum { BLOCKS = 5000 };
    static unsigned char *blocks[BLOCKS];
    struct arena a;
    arena_init(&a, 0);
    for (size_t i = 0; i < BLOCKS; i++) {
        size_t size = 1 + (i * 37) % 700;
        blocks[i] = arena_alloc(&a, size);
        memset(blocks[i], (int)(i & 0xff), size);
    }
    for (size_t i = 0; i < BLOCKS; i++) {
        size_t size = 1 + (i * 37) % 700;
        for (size_t j = 0; j < size; j++)
            assert_int_equal(blocks[i][j], i & 0xff);
    }
    arena_free(&a);
}

/* A big allocation does not retire the current chunk: the next small one follows on. */
static void test_big_allocation_own_chunk(void **state)
{
    struct arena a;
    arena_init(&a, 1024);
    char *p1 = arena_alloc(&a, 16);
    char *big = arena_alloc(&a, 100000);
    memset(big, 0xab, 100000);
    char *p2 = arena_alloc(&a, 16);
    assert_ptr_equal(p2, p1 + 16);
    arena_free(&a);
}

static void test_reset_reuses_first_chunk(void **state)
{
    struct arena a;
    arena_init(&a, 256);
    char *first = arena_alloc(&a, 8);
    for (int i = 0; i < 1000; i++)
        arena_alloc(&a, 100);
    arena_alloc(&a, 1 << 20);
    arena_reset(&a);
    assert_ptr_equal(arena_alloc(&a, 8), first);
    for (int i = 0; i < 1000; i++)
        arena_alloc(&a, 100); /* grows again after the reset */
    arena_reset(&a);
    assert_ptr_equal(arena_alloc(&a, 8), first);
    arena_free(&a);
    arena_free(NULL);
}

static void test_calloc_and_strdup(void **state)
{
    struct arena a;
    arena_init(&a, 32);
    arena_alloc(&a, 24);
    memset(arena_alloc(&a, 32), 0xff, 32); /* dirty bytes an allocator could hand back */
    arena_reset(&a);
    arena_alloc(&a, 24);
    unsigned char *z = arena_calloc(&a, 8, 4);
    for (int i = 0; i < 32; i++)
        assert_int_equal(z[i], 0);
    char *s = arena_strdup(&a, "tool_call");
    assert_string_equal(s, "tool_call");
    assert_string_equal(arena_strdup(&a, ""), "");
    arena_free(&a);
}

static void calloc_overflow(void)
{
    struct arena a;
    arena_init(&a, 0);
    arena_calloc(&a, SIZE_MAX / 2, 4);
}

static void alloc_overflow(void)
{
    struct arena a;
    arena_init(&a, 0);
    arena_alloc(&a, SIZE_MAX - 3);
}

static void test_overflow_aborts(void **state)
{
    test_assert_dies(calloc_overflow);
    test_assert_dies(alloc_overflow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alignment_and_distinct),
        cmocka_unit_test(test_contents_survive_growth),
        cmocka_unit_test(test_big_allocation_own_chunk),
        cmocka_unit_test(test_reset_reuses_first_chunk),
        cmocka_unit_test(test_calloc_and_strdup),
        cmocka_unit_test(test_overflow_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
