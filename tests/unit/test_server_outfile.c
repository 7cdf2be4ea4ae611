/* Tests of the gateway's appending output files (src/server/outfile.c): a new file is created
 * and a kept one appended to with its first line read; a last line cut short is cut off and
 * nothing else; a file of no line is refused untouched; a write that fails stops the file with
 * the reason; a device is written in place. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libra/libra.h"
#include "server/outfile.h"

/* A path under the build tree, removed first. */
static const char *fresh(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/test_server_outfile_%ld_%s", LIBRA_BINARY_DIR, (long)getpid(),
             name);
    remove(buf);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* The file's content (static buffer). */
static const char *content(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void append(struct gw_outfile *f, const char *line)
{
    assert_int_equal(gw_outfile_write(f, line, strlen(line)), 0);
}

static void test_a_new_file_is_made_and_a_kept_one_appended_to(void **state)
{
    const char *path = fresh("kept");
    struct gw_outfile f;
    char err[512];
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), 0);
    assert_null(f.head); /* nothing kept */
    assert_true(f.regular);
    append(&f, "{\"a\": 1}\n");
    assert_int_equal(gw_outfile_close(&f), 0);
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), 0);
    assert_string_equal(f.head, "{\"a\": 1}");
    assert_int_equal(gw_outfile_mend(&f, "--test", err, sizeof err), 0);
    append(&f, "{\"b\": 2}\n");
    assert_int_equal(gw_outfile_close(&f), 0);
    assert_string_equal(content(path), "{\"a\": 1}\n{\"b\": 2}\n");
    remove(path);
}

static void test_only_a_last_line_cut_short_is_cut_off(void **state)
{
    const char *path = fresh("cut");
    struct gw_outfile f;
    char err[512];
    put(path, "head\nwhole\ncut sho");
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), 0);
    assert_string_equal(f.head, "head");
    assert_int_equal(gw_outfile_mend(&f, "--test", err, sizeof err), 0);
    append(&f, "next\n");
    assert_int_equal(gw_outfile_close(&f), 0);
    assert_string_equal(content(path), "head\nwhole\nnext\n");
    /* a line longer than the block read backwards at a time */
    char *long_line = malloc(10000);
    memset(long_line, 'x', 9999);
    long_line[9999] = '\0';
    put(path, "head\n");
    FILE *out = fopen(path, "a");
    fputs(long_line, out);
    fclose(out);
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), 0);
    assert_int_equal(gw_outfile_mend(&f, "--test", err, sizeof err), 0);
    assert_int_equal(gw_outfile_close(&f), 0);
    assert_string_equal(content(path), "head\n");
    free(long_line);
    remove(path);
}

static void test_a_file_without_a_line_is_refused_untouched(void **state)
{
    const char *path = fresh("noline");
    struct gw_outfile f;
    char err[512];
    put(path, "no newline at all");
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), LIBRA_EINVAL);
    assert_non_null(strstr(err, "no whole line in its first 64 KiB"));
    assert_int_equal(f.fd, -1);
    assert_string_equal(content(path), "no newline at all");
    remove(path);
    assert_int_equal(gw_outfile_open(&f, "/nonexistent-dir/x", "{\"x\":", "--x", err, sizeof err),
                     LIBRA_EIO);
    assert_string_equal(err, "cannot open '/nonexistent-dir/x': no such file or directory");
}

static void test_a_failed_write_stops_the_file_with_why(void **state)
{
    struct gw_outfile f;
    char err[512];
    assert_int_equal(gw_outfile_open(&f, "/dev/full", "{\"x\":", "--x", err, sizeof err), 0);
    assert_false(f.regular); /* a device: written in place, never read */
    assert_null(f.head);
    assert_int_equal(gw_outfile_write(&f, "x\n", 2), -1);
    assert_string_equal(f.error, "cannot write '/dev/full': no space left on device");
    assert_int_equal(gw_outfile_write(&f, "y\n", 2), -1); /* nothing more */
    assert_int_equal(gw_outfile_close(&f), -1);
    assert_int_equal(gw_outfile_open(&f, "/dev/null", "{\"x\":", "--x", err, sizeof err), 0);
    append(&f, "x\n");
    assert_int_equal(gw_outfile_close(&f), 0);
}

/* A file that is only the start of a first line of the gateway's own (a stop while it wrote
 * it) is emptied and taken as new; any other file without a line stays refused. */
static void test_a_first_line_cut_short_is_removed(void **state)
{
    (void)state;
    const char *path = fresh("cuthead");
    struct gw_outfile f;
    char err[512];
    for (size_t i = 0; i < 2; i++) {
        put(path, i ? "{\"x\"" : "{\"x\":1,\"y\":");
        assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), 0);
        assert_null(f.head);
        append(&f, "{\"x\":2}\n");
        assert_int_equal(gw_outfile_close(&f), 0);
        assert_string_equal(content(path), "{\"x\":2}\n");
    }
    put(path, "{\"z\":1");
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), LIBRA_EINVAL);
    assert_string_equal(content(path), "{\"z\":1");
    remove(path);
}

/* Collects the lines it is called with, "|"-joined, up to the line numbered stop_at. */
struct seen {
    char text[256];
    int64_t stop_at;
};

static int see(void *arg, const char *line, size_t len, int64_t lineno)
{
    struct seen *s = arg;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%lld:%.*s|", (long long)lineno, (int)len, line);
    return lineno == s->stop_at ? 7 : 0;
}

static void test_every_whole_line_is_read_until_one_is_refused(void **state)
{
    const char *path = fresh("lines");
    struct gw_outfile f;
    char err[512];
    put(path, "head\n\nsecond\ncut sho");
    assert_int_equal(gw_outfile_open(&f, path, "{\"x\":", "--x", err, sizeof err), 0);
    struct seen all = {"", 0}, two = {"", 2};
    assert_int_equal(gw_outfile_lines(&f, see, &all, err, sizeof err), 0);
    assert_string_equal(all.text, "1:head|2:|3:second|"); /* the line cut short is not one */
    assert_int_equal(gw_outfile_lines(&f, see, &two, err, sizeof err), 7);
    assert_string_equal(two.text, "1:head|2:|");
    assert_int_equal(gw_outfile_close(&f), 0);
    assert_string_equal(content(path), "head\n\nsecond\ncut sho"); /* only read */
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_new_file_is_made_and_a_kept_one_appended_to),
        cmocka_unit_test(test_only_a_last_line_cut_short_is_cut_off),
        cmocka_unit_test(test_a_file_without_a_line_is_refused_untouched),
        cmocka_unit_test(test_a_first_line_cut_short_is_removed),
        cmocka_unit_test(test_a_failed_write_stops_the_file_with_why),
        cmocka_unit_test(test_every_whole_line_is_read_until_one_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
