/* api/experiment: reading an input whole, up to the size limit and not a byte past it. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/experiment.h"

static const char *tmp_path(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/test_api_experiment_%ld_%s", LIBRA_BINARY_DIR, (long)getpid(),
             name);
    return buf;
}

/* Writes n bytes of a repeating pattern to path. */
static void write_bytes(const char *path, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(fputc('a' + (int)(i % 26), f), EOF);
    assert_int_equal(fclose(f), 0);
}

/* A file of exactly max_bytes is read whole; one byte more is refused, naming the file. */
static void check_limit(size_t max_bytes)
{
    const char *path = tmp_path("input");
    char *text = NULL;
    size_t len = 0;
    struct libra_error err = {0};
    write_bytes(path, max_bytes);
    assert_int_equal(api_read_file_max(path, max_bytes, &text, &len, &err), 0);
    assert_int_equal(len, max_bytes);
    assert_int_equal(strlen(text), max_bytes);
    assert_int_equal(text[max_bytes - 1], 'a' + (int)((max_bytes - 1) % 26));
    free(text);

    write_bytes(path, max_bytes + 1);
    text = NULL;
    assert_int_equal(api_read_file_max(path, max_bytes, &text, &len, &err), LIBRA_EINVAL);
    assert_null(text);
    assert_string_equal(err.file, path);
    char want[128];
    snprintf(want, sizeof want, "larger than %zu bytes, the most a file read whole may hold",
             max_bytes);
    assert_string_equal(err.msg, want);
    remove(path);
}

/* Below the first buffer's size, and past it (the buffer grows up to the limit). */
static void test_limit_is_exact(void **state)
{
    (void)state;
    check_limit(10);
    check_limit(200000);
}

/* A stream that never ends is refused at the limit, not read until memory runs out. */
static void test_endless_stream(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    struct libra_error err = {0};
    assert_int_equal(api_read_file_max("/dev/zero", 100000, &text, &len, &err), LIBRA_EINVAL);
    assert_null(text);
    assert_string_equal(err.file, "/dev/zero");
    assert_non_null(strstr(err.msg, "larger than 100000 bytes"));
}

/* The default limit: a file under it reads as it is; a missing one is still an I/O error. */
static void test_default_limit(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    struct libra_error err = {0};
    const char *path = test_source_path("tests/unit/test_api_experiment.c");
    assert_int_equal(api_read_file(path, &text, &len, &err), 0);
    assert_ptr_equal(strstr(text, "/* api/experiment: "), text);
    free(text);
    assert_int_equal(api_read_file("no/such/file.json", &text, &len, &err), LIBRA_EIO);
    assert_string_equal(err.msg, "cannot read 'no/such/file.json': no such file or directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_is_exact),
        cmocka_unit_test(test_endless_stream),
        cmocka_unit_test(test_default_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
