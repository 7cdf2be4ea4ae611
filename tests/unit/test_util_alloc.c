/* util/alloc: the wrappers behave like the libc calls they wrap, and impossible sizes abort. */
#include "testutil.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static void test_wrappers(void **state)
{
    void *zero = xmalloc(0);
    assert_non_null(zero); /* size 0 still yields a pointer to free */
    free(zero);

    unsigned char *z = xcalloc(64, 4);
    for (size_t i = 0; i < 256; i++)
        assert_int_equal(z[i], 0);
    memset(z, 7, 256);
    z = xrealloc(z, 100000);
    assert_int_equal(z[255], 7); /* contents kept */
    free(z);

    int *a = xmallocarray(10, sizeof *a);
    for (int i = 0; i < 10; i++)
        a[i] = i;
    a = xreallocarray(a, 1000, sizeof *a);
    assert_int_equal(a[9], 9);
    free(a);

    char *s = xstrdup("bucket");
    assert_string_equal(s, "bucket");
    free(s);
    s = xstrndup("bucket", 3);
    assert_string_equal(s, "buc");
    free(s);
    s = xstrndup("tp", 10); /* n beyond the string */
    assert_string_equal(s, "tp");
    free(s);
}

static void mallocarray_overflow(void)
{
    xmallocarray(SIZE_MAX / 2, 3);
}

static void reallocarray_overflow(void)
{
    xreallocarray(NULL, 3, SIZE_MAX / 2);
}

static void test_overflow_aborts(void **state)
{
    test_assert_dies(mallocarray_overflow);
    test_assert_dies(reallocarray_overflow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrappers),
        cmocka_unit_test(test_overflow_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
