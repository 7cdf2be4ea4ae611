/* util/fileio: opening files to read, and the wording of what fails. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/fileio.h"

/* A directory is refused when opened: fopen takes one, and only its first read fails. */
static void test_directory(void **state)
{
    (void)state;
    struct libra_error err = {0};
    errno = 0;
    assert_null(fileio_open(test_source_path("tests"), &err));
    assert_int_equal(errno, EISDIR);
    assert_non_null(strstr(err.msg, "/tests': is a directory"));
    assert_ptr_equal(strstr(err.msg, "cannot read '"), err.msg);
    assert_string_equal(err.file, "");
}

static void test_missing_and_present(void **state)
{
    (void)state;
    struct libra_error err = {0};
    assert_null(fileio_open("no/such/file.json", &err));
    assert_string_equal(err.msg, "cannot read 'no/such/file.json': no such file or directory");
    FILE *f = fileio_open(test_source_path("tests/unit/test_util_fileio.c"), &err);
    assert_non_null(f);
    fclose(f);
    assert_ptr_equal(fileio_open("-", &err), stdin);
    assert_null(fileio_open("no/such/file.json", NULL)); /* err optional */
}

static void test_error(void **state)
{
    (void)state;
    struct libra_error err = {0};
    assert_int_equal(fileio_error(&err, "x.jsonl", EIO), LIBRA_EIO);
    assert_string_equal(err.msg, "cannot read 'x.jsonl': input/output error");
    fileio_error(&err, "x.jsonl", 0); /* a failed read that left errno 0 */
    assert_string_equal(err.msg, "cannot read 'x.jsonl': input/output error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_missing_and_present),
        cmocka_unit_test(test_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
