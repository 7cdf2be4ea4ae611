/* util/error: filling, prefixing and formatting struct libra_error, truncation included. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

static void test_set_and_format(void **state)
{
    struct libra_error err;
    char buf[700];
    assert_int_equal(error_set(&err, "x.json", 3, 14, "unknown key '%s'", "gpu"), LIBRA_EINVAL);
    assert_string_equal(err.file, "x.json");
    assert_int_equal(err.line, 3);
    assert_int_equal(err.col, 14);
    assert_string_equal(error_format(&err, buf, sizeof buf), "x.json:3:14: unknown key 'gpu'");

    error_set(&err, "x.json", 0, 0, "missing section");
    assert_string_equal(error_format(&err, buf, sizeof buf), "x.json: missing section");
    error_set(&err, NULL, 5, 1, "bad flag");
    assert_string_equal(err.file, "");
    assert_string_equal(error_format(&err, buf, sizeof buf), "bad flag");
    assert_int_equal(error_set(NULL, "x", 1, 1, "ignored"), LIBRA_EINVAL);
}

static void test_prefix(void **state)
{
    struct libra_error err;
    char buf[700];
    error_set(&err, "c.json", 2, 5, "must be positive");
    error_prefix(&err, "cluster.gpus");
    assert_string_equal(error_format(&err, buf, sizeof buf),
                        "c.json:2:5: cluster.gpus: must be positive");
    error_prefix(&err, "");
    error_prefix(&err, NULL);
    error_prefix(NULL, "ignored");
    assert_string_equal(err.msg, "cluster.gpus: must be positive");
}

/* Over-long parts are cut to their buffers, always NUL-terminated. */
static void test_truncation(void **state)
{
    struct libra_error err;
    char long_text[2000];
    memset(long_text, 'm', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    error_set(&err, long_text, 1, 1, "%s", long_text);
    assert_int_equal(strlen(err.file), sizeof err.file - 1);
    assert_memory_equal(err.file, "...mmm", 6);
    assert_int_equal(strlen(err.msg), sizeof err.msg - 1);
    error_prefix(&err, "prefix");
    assert_int_equal(strlen(err.msg), sizeof err.msg - 1);
    assert_memory_equal(err.msg, "prefix: mmm", 11);

    char small[8];
    assert_string_equal(error_format(&err, small, sizeof small), "...mmmm");
    small[0] = 'x';
    assert_ptr_equal(error_format(&err, small, 0), small);
    assert_int_equal(small[0], 'x'); /* size 0: nothing written */
}

/* A path past file's bytes keeps its end, the file's own name, after "...": its start would
 * name a file that does not exist. The cut never splits a UTF-8 character. */
static void test_long_path_keeps_its_end(void **state)
{
    struct libra_error err;
    char path[600] = "/tmp/";
    size_t n = strlen(path);
    while (n < 400) /* two-byte characters, then the name */
        n += (size_t)snprintf(path + n, sizeof path - n, "\xc3\xa9");
    snprintf(path + n, sizeof path - n, "/config.json");
    error_set(&err, path, 2, 3, "bad");
    size_t len = strlen(err.file);
    assert_true(len < sizeof err.file);
    assert_memory_equal(err.file, "...", 3);
    assert_string_equal(err.file + len - strlen("/config.json"), "/config.json");
    assert_int_equal((unsigned char)err.file[3] & 0xC0, 0xC0); /* a character's first byte */
    char exact[sizeof err.file];
    memset(exact, 'a', sizeof exact - 1);
    exact[sizeof exact - 1] = '\0';
    error_set(&err, exact, 1, 1, "fits");
    assert_string_equal(err.file, exact);
}

static void test_text(void **state)
{
    (void)state;
    char buf[8];
    assert_int_equal(error_text(buf, sizeof buf, "tp: %d", 3), -1);
    assert_string_equal(buf, "tp: 3");
    assert_int_equal(error_text(buf, sizeof buf, "%s", "a long reason"), -1);
    assert_string_equal(buf, "a long "); /* cut, terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_and_format), cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_truncation),     cmocka_unit_test(test_long_path_keeps_its_end),
        cmocka_unit_test(test_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
