/* Tests of trace files (src/trace/file.c): write -> read -> write is byte-identical, the
 * reader's line handling (chunk boundaries, long lines, endless ones, truncation), continuing
 * after a bad line, and the writer's all-or-nothing publication. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/file.h"
#include "util/error.h"

static const char *tmp_path(const char *name)
{
    static char buf[4][4096];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/test_trace_file_%ld_%s", LIBRA_BINARY_DIR, (long)getpid(),
             name);
    return buf[i];
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static const struct trace_header header = {.version = 1, .workload = "test", .group_size = 2};

/* The index-th trajectory, of n turns, of a trace of groups of 2 (the header's); turns/calls
 * are caller storage of n elements. */
static void make_traj(struct trace_traj *t, struct trace_turn *turns, struct trace_tool_call *calls,
                      size_t n, int64_t index)
{
    memset(t, 0, sizeof *t);
    t->step = index / 2;
    t->prompt_id = index / 2 * 7;
    t->sample = index % 2;
    t->version_start = t->step;
    t->version_end = -1;
    t->turns = turns;
    t->n_turns = n;
    for (size_t i = 0; i < n; i++) {
        turns[i] = (struct trace_turn){.prompt_tokens = 100 * (int64_t)(i + 1),
                                       .cached_tokens = -1,
                                       .generated_tokens = 10 + (int64_t)i};
        calls[i] = (struct trace_tool_call){
            .tool = "bash", .payload_tokens = 5, .exec_us = 7, .queue_us = -1};
        if (i + 1 < n) {
            turns[i].calls = &calls[i];
            turns[i].n_calls = 1;
        }
    }
}

/* Copies a trace file record by record through the reader and writer. */
static void copy_trace(const char *from, const char *to)
{
    struct trace_reader *r;
    struct trace_writer *w;
    const struct trace_header *h;
    const struct trace_traj *t;
    assert_int_equal(trace_reader_open(&r, from, NULL), 0);
    assert_int_equal(trace_reader_header(r, &h, NULL), 0);
    assert_int_equal(trace_writer_open(&w, to, h, NULL), 0);
    int rc;
    while ((rc = trace_reader_next(r, &t, NULL)) == 1)
        assert_int_equal(trace_writer_put(w, t, NULL), 0);
    assert_int_equal(rc, 0);
    assert_int_equal(trace_writer_close(w, NULL), 0);
    trace_reader_close(r);
}

static void test_write_read_write_identical(void **state)
{
    const char *a = tmp_path("a.jsonl"), *b = tmp_path("b.jsonl");
    struct trace_writer *w;
    assert_int_equal(trace_writer_open(&w, a, &header, NULL), 0);
    for (int64_t s = 0; s < 50; s++) {
        struct trace_traj t;
        struct trace_turn turns[6];
        struct trace_tool_call calls[6];
        make_traj(&t, turns, calls, 1 + (size_t)(s % 6), s);
        assert_int_equal(trace_writer_put(w, &t, NULL), 0);
    }
    assert_int_equal(trace_writer_close(w, NULL), 0);
    copy_trace(a, b);
    size_t na, nb;
    char *ta = test_read_file(a, &na), *tb = test_read_file(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ta, tb, na);
    assert_int_equal(strncmp(ta, "{\"libra_trace\":1,\"workload\":\"test\",\"group_size\":2,", 50),
                     0);
    free(ta);
    free(tb);
    remove(a);
    remove(b);
}

/* A line longer than the reader's chunk (1 MiB), split across reads, still round-trips. */
static void test_lines_longer_than_a_chunk(void **state)
{
    const char *a = tmp_path("long.jsonl"), *b = tmp_path("long2.jsonl");
    size_t big = 3 << 20;
    char *s = malloc(big + 1);
    memset(s, 'x', big);
    s[big] = '\0';
    json_t *extra = json_pack("{s:s}", "blob", s);
    struct trace_writer *w;
    assert_int_equal(trace_writer_open(&w, a, &header, NULL), 0);
    for (int64_t i = 0; i < 3; i++) {
        struct trace_traj t;
        struct trace_turn turns[2];
        struct trace_tool_call calls[2];
        make_traj(&t, turns, calls, 2, i);
        t.extra = i == 1 ? extra : NULL;
        assert_int_equal(trace_writer_put(w, &t, NULL), 0);
    }
    assert_int_equal(trace_writer_close(w, NULL), 0);
    copy_trace(a, b);
    size_t na, nb;
    char *ta = test_read_file(a, &na), *tb = test_read_file(b, &nb);
    assert_true(na > big);
    assert_int_equal(na, nb);
    assert_memory_equal(ta, tb, na);
    free(ta);
    free(tb);
    free(s);
    json_decref(extra);
    remove(a);
    remove(b);
}

/* Reads path to the end, recording each error as "LINE:COL: MSG"; returns the records read. */
static int read_all(const char *path, char errors[][256], int *n_errors)
{
    struct trace_reader *r;
    const struct trace_header *h;
    const struct trace_traj *t;
    struct libra_error err = {0};
    int records = 0, rc;
    *n_errors = 0;
    assert_int_equal(trace_reader_open(&r, path, NULL), 0);
    if (trace_reader_header(r, &h, &err))
        snprintf(errors[(*n_errors)++], 256, "%d:%d: %s", err.line, err.col, err.msg);
    while ((rc = trace_reader_next(r, &t, &err)) != 0) {
        if (rc == 1)
            records++;
        else
            snprintf(errors[(*n_errors)++], 256, "%d:%d: %s", err.line, err.col, err.msg);
        assert_int_not_equal(rc, LIBRA_EIO);
    }
    trace_reader_close(r);
    return records;
}

#define TRAJ(step)                                                                                 \
    "{\"step\":" #step ",\"prompt_id\":1,\"epoch\":0,\"sample\":1,\"version_start\":0,"            \
    "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,\"generated_tokens\":5}]}"

static void test_reader_continues_after_bad_lines(void **state)
{
    const char *text = "{\"libra_trace\":1,\"workload\":\"w\",\"group_size\":2}\n" TRAJ(
        0) "\n"
           "{\"step\":\n"
           "\n" TRAJ(0) "\n" TRAJ(1) "\n"
                                     "{\"step\":3,\"prompt_id\":1,\"epoch\":0,\"sample\":2";
    const char *path = tmp_path("bad.jsonl");
    write_text(path, text, strlen(text));
    char errors[8][256];
    int n;
    assert_int_equal(read_all(path, errors, &n), 3);
    assert_int_equal(n, 3);
    /* the column is jansson's, which differs between its versions */
    assert_true(strncmp(errors[0], "3:", 2) == 0);
    assert_non_null(strstr(errors[0], ": invalid JSON: "));
    assert_string_equal(errors[1], "4:1: empty line");
    assert_string_equal(errors[2], "7:1: truncated line: no newline at end of file");
    remove(path);
}

/* With group_size 2, each run of 2 consecutive records is one (step, prompt_id): a record of
 * another is an error at its line, and the runs go on from it. */
static void test_reader_refuses_a_split_group(void **state)
{
    const char *text = "{\"libra_trace\":1,\"workload\":\"w\",\"group_size\":2}\n" TRAJ(
        0) "\n" TRAJ(1) "\n" TRAJ(1) "\n" TRAJ(1) "\n" TRAJ(2) "\n";
    const char *path = tmp_path("split.jsonl");
    write_text(path, text, strlen(text));
    char errors[8][256];
    int n;
    assert_int_equal(read_all(path, errors, &n), 4);
    assert_int_equal(n, 1);
    assert_string_equal(errors[0], "3:1: step 1, prompt_id 1: not the group (step 0, prompt_id "
                                   "1) of line 2: with group_size 2 each run of 2 consecutive "
                                   "records is one group, so a group's records must be whole "
                                   "and together");
    remove(path);
}

static void test_header_errors(void **state)
{
    const char *path = tmp_path("hdr.jsonl");
    char errors[8][256];
    int n;
    write_text(path, "", 0);
    assert_int_equal(read_all(path, errors, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(errors[0], "1:1: empty file: line 1 must be the trace header "
                                   "{\"libra_trace\": 1, ...}");

    /* a trace without its header: line 1 is reported, the other records are still checked */
    const char *headless = TRAJ(0) "\n" TRAJ(1) "\n";
    write_text(path, headless, strlen(headless));
    assert_int_equal(read_all(path, errors, &n), 1);
    assert_int_equal(n, 1);
    assert_string_equal(errors[0], "1:1: libra_trace: missing: line 1 must be the trace header "
                                   "{\"libra_trace\": 1, ...}");
    remove(path);
}

static void test_line_too_long(void **state)
{
    const char *path = tmp_path("huge.jsonl");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\"libra_trace\":1,\"workload\":\"w\"}\n", f);
    char *chunk = malloc(1 << 20);
    memset(chunk, ' ', 1 << 20);
    for (size_t i = 0; i <= TRACE_MAX_LINE_BYTES >> 20; i++)
        assert_int_equal(fwrite(chunk, 1, 1 << 20, f), 1 << 20);
    fputs("\n" TRAJ(5) "\n", f);
    assert_int_equal(fclose(f), 0);
    free(chunk);
    char errors[8][256];
    int n;
    /* the reading stops at the long line: the record after it is not read */
    assert_int_equal(read_all(path, errors, &n), 0);
    assert_int_equal(n, 1);
    char want[256];
    snprintf(want, sizeof want, "2:1: line longer than %zu bytes; the file is not read past it",
             TRACE_MAX_LINE_BYTES);
    assert_string_equal(errors[0], want);
    remove(path);
}

/* A stream that never sends a newline is refused once its first line passes the limit, rather
 * than read on for the line's end. */
static void test_endless_line(void **state)
{
    char errors[8][256];
    int n;
    assert_int_equal(read_all("/dev/zero", errors, &n), 0);
    assert_int_equal(n, 1);
    char want[256];
    snprintf(want, sizeof want, "1:1: line longer than %zu bytes; the file is not read past it",
             TRACE_MAX_LINE_BYTES);
    assert_string_equal(errors[0], want);
}

static void test_reader_open_missing_file(void **state)
{
    struct trace_reader *r = (struct trace_reader *)1;
    struct libra_error err = {0};
    assert_int_equal(trace_reader_open(&r, tmp_path("nonexistent"), &err), LIBRA_EIO);
    assert_null(r);
    assert_non_null(strstr(err.msg, "cannot read '"));
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void test_writer_all_or_nothing(void **state)
{
    const char *path = tmp_path("w.jsonl");
    struct trace_writer *w;
    struct libra_error err = {0};
    struct trace_traj t;
    struct trace_turn turns[2];
    struct trace_tool_call calls[2];
    make_traj(&t, turns, calls, 2, 0);

    /* nothing is visible under the final name until close */
    assert_int_equal(trace_writer_open(&w, path, &header, NULL), 0);
    assert_int_equal(trace_writer_put(w, &t, NULL), 0);
    assert_false(file_exists(path));

    /* an invalid record is refused and not written */
    turns[1].cached_tokens = 5000;
    assert_int_equal(trace_writer_put(w, &t, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "turns.1.cached_tokens: 5000 exceeds prompt_tokens 200");
    trace_writer_abort(w);
    assert_false(file_exists(path));

    assert_int_equal(trace_writer_open(&w, path, &header, NULL), 0);
    turns[1].cached_tokens = -1;
    assert_int_equal(trace_writer_put(w, &t, NULL), 0);
    assert_int_equal(trace_writer_close(w, NULL), 0);
    assert_true(file_exists(path));
    remove(path);

    /* a bad header or an unwritable place is refused at open */
    struct trace_header bad = header;
    bad.workload = "";
    assert_int_equal(trace_writer_open(&w, path, &bad, &err), LIBRA_EINVAL);
    assert_int_equal(trace_writer_open(&w, tmp_path("no/such/dir.jsonl"), &header, &err),
                     LIBRA_EIO);
    assert_null(w);
}

/* Two writers of one path at once (two threads of a library caller) each write a whole file
 * under a temporary name of their own; the last to close is the file. The name was the
 * process's alone, so the second open failed with "file exists". */
static void test_two_writers_of_one_path(void **state)
{
    const char *path = tmp_path("both.jsonl");
    struct trace_writer *a, *b;
    struct trace_traj t;
    struct trace_turn turns[2];
    struct trace_tool_call calls[2];
    make_traj(&t, turns, calls, 2, 0);
    assert_int_equal(trace_writer_open(&a, path, &header, NULL), 0);
    assert_int_equal(trace_writer_open(&b, path, &header, NULL), 0);
    assert_string_not_equal(trace_writer_tmp(a), trace_writer_tmp(b));
    assert_int_equal(trace_writer_put(a, &t, NULL), 0);
    assert_int_equal(trace_writer_close(a, NULL), 0);
    assert_int_equal(trace_writer_close(b, NULL), 0); /* b holds the header alone */
    size_t n;
    char *text = test_read_file(path, &n);
    assert_non_null(memchr(text, '\n', n));
    assert_null(memchr(text, '\n', n - 1)); /* one line: b's */
    free(text);
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_read_write_identical),
        cmocka_unit_test(test_lines_longer_than_a_chunk),
        cmocka_unit_test(test_reader_continues_after_bad_lines),
        cmocka_unit_test(test_reader_refuses_a_split_group),
        cmocka_unit_test(test_header_errors),
        cmocka_unit_test(test_line_too_long),
        cmocka_unit_test(test_endless_line),
        cmocka_unit_test(test_reader_open_missing_file),
        cmocka_unit_test(test_writer_all_or_nothing),
        cmocka_unit_test(test_two_writers_of_one_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
