/* util/fileio: opening files to read, the file a whole write replaces, and the wording of what
 * fails. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* A link is replaced through: its target is written, existing or not, and the link stays. A
 * path that cannot be looked at is written in place, where opening it says why. */
static void test_replace_target(void **state)
{
    (void)state;
    char dir[] = "/tmp/libra-fileio-XXXXXX", link[64], loop[64], want[64];
    assert_non_null(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/link.jsonl", dir);
    snprintf(loop, sizeof loop, "%s/loop", dir);
    snprintf(want, sizeof want, "%s/target.jsonl", dir);
    assert_int_equal(symlink("target.jsonl", link), 0);
    assert_int_equal(symlink("loop", loop), 0);
    char *target = fileio_replace_target(link); /* dangling */
    assert_string_equal(target, want);
    free(target);
    FILE *f = fopen(want, "w");
    assert_non_null(f);
    fclose(f);
    target = fileio_replace_target(link);
    assert_string_equal(target, want);
    free(target);
    target = fileio_replace_target(want);
    assert_string_equal(target, want);
    free(target);
    assert_null(fileio_replace_target(loop));
    assert_null(fileio_replace_target("/dev/null"));
    target = fileio_replace_target("no/such/dir/x");
    assert_string_equal(target, "no/such/dir/x");
    free(target);
    assert_int_equal(unlink(want) | unlink(link) | unlink(loop) | rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_missing_and_present),
        cmocka_unit_test(test_error),
        cmocka_unit_test(test_replace_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
