/* util/strbuf: appends keep the text NUL-terminated, grow geometrically; detach hands it over. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "util/strbuf.h"

static void test_appends_concatenate(void **state)
{
    struct strbuf b = {0};
    strbuf_puts(&b, "step ");
    strbuf_printf(&b, "%d of %s", 3, "6");
    strbuf_add(&b, "!xyz", 1);
    assert_string_equal(b.data, "step 3 of 6!");
    assert_int_equal(b.len, strlen("step 3 of 6!"));
    strbuf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

/* Appending n bytes one at a time reallocates O(log n) times. */
static void test_growth_is_geometric(void **state)
{
    struct strbuf b = {0};
    size_t grows = 0, cap = 0;
    for (int i = 0; i < 100000; i++) {
        strbuf_add(&b, "x", 1);
        if (b.cap != cap) {
            grows++;
            cap = b.cap;
        }
    }
    assert_int_equal(b.len, 100000);
    assert_int_equal(b.data[b.len], '\0');
    assert_true(grows <= 20);
    strbuf_free(&b);
}

static void test_detach(void **state)
{
    struct strbuf b = {0};
    char *empty = strbuf_detach(&b); /* never NULL */
    assert_string_equal(empty, "");
    free(empty);
    strbuf_printf(&b, "%0*d", 300, 7); /* longer than any first allocation */
    char *text = strbuf_detach(&b);
    assert_int_equal(strlen(text), 300);
    assert_int_equal(text[299], '7');
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    free(text);
    strbuf_free(&b); /* an empty buffer frees cleanly */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends_concatenate),
        cmocka_unit_test(test_growth_is_geometric),
        cmocka_unit_test(test_detach),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
