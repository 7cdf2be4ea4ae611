/* api/libra.c and api/trace.c: the public entry points given bad arguments return the
 * documented code with a message and a place, leave their out-parameters NULL, and write
 * nothing where no file was named. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libra/libra.h"

static const char *HEADER = "{\"libra_trace\":1,\"workload\":\"r2e-gym\",\"model\":\"qwen3-14b\","
                            "\"group_size\":2,\"lossy\":false,\"generator\":{\"name\":\"r2e-gym\","
                            "\"seed\":1}}";

/* An empty name labels errors as NULL does ("config"), so that LINE:COL keep a file to
 * follow. */
static void test_empty_name_labels_errors_as_config(void **state)
{
    (void)state;
    const char *names[] = {NULL, ""};
    for (int i = 0; i < 2; i++) {
        struct libra_error err;
        char *out = (char *)&err;
        assert_int_equal(libra_plan("{\n  \"rl\": 5}", names[i], &out, &err), LIBRA_EINVAL);
        assert_null(out);
        assert_string_equal(err.file, "config");
        assert_int_equal(err.line, 2);
        assert_int_equal(err.col, 3);
        assert_int_equal(libra_sim("", names[i], &out, &err), LIBRA_EINVAL);
        assert_string_equal(err.file, "config");
        struct libra_router *r = (struct libra_router *)&err;
        assert_int_equal(libra_router_new("[]", names[i], &r, &err), LIBRA_EINVAL);
        assert_null(r);
        assert_string_equal(err.file, "config");
    }
}

/* Missing out-parameters are refused with a message, and a NULL err is fine. */
static void test_null_arguments(void **state)
{
    (void)state;
    struct libra_error err;
    assert_int_equal(libra_plan(NULL, NULL, NULL, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "out"));
    assert_int_equal(libra_sim("{", NULL, NULL, NULL), LIBRA_EINVAL);
    assert_int_equal(libra_router_new(NULL, NULL, NULL, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "out"));
    const char *h;
    struct libra_trace_reader *rd;
    assert_int_equal(libra_trace_reader_open(NULL, &rd, &h, &err), LIBRA_EINVAL);
    assert_int_equal(libra_trace_reader_next(NULL, &h, &err), LIBRA_EINVAL);
    struct libra_trace_writer *w;
    assert_int_equal(libra_trace_writer_open("x", NULL, &w, &err), LIBRA_EINVAL);
    assert_int_equal(libra_trace_writer_put(NULL, "{}", &err), LIBRA_EINVAL);
    assert_int_equal(libra_trace_writer_close(NULL, &err), 0);
    libra_trace_writer_abort(NULL);
    libra_trace_reader_close(NULL);
    libra_router_free(NULL);
    libra_free(NULL);
    assert_string_equal(libra_router_buckets(NULL), "");
}

/* An empty path is refused by the writer at open, as the reader refuses it, rather than at close
 * after the records went to a file named ".tmpPID" in the working directory. */
static void test_empty_trace_path_is_refused_at_open(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_api_libra_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    struct libra_error err;
    struct libra_trace_writer *w = (struct libra_trace_writer *)&err;
    int rc = libra_trace_writer_open("", HEADER, &w, &err);
    libra_trace_writer_abort(rc == 0 ? w : NULL);
    assert_int_equal(rc, LIBRA_EIO);
    assert_null(w);
    assert_string_equal(err.msg, "cannot write '': no such file or directory");
    const char *h;
    struct libra_trace_reader *rd;
    assert_int_equal(libra_trace_reader_open("", &rd, &h, &err), LIBRA_EIO);
    assert_string_equal(err.msg, "cannot read '': no such file or directory");
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(rmdir(dir), 0); /* nothing was left in it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_name_labels_errors_as_config),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_empty_trace_path_is_refused_at_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
