/*
 * Helpers shared by the cmocka tests: fixture paths and assertions that print operands
 * (libuv test/task.h style). Include after <cmocka.h>'s prerequisites.
 */
#ifndef TESTS_TESTUTIL_H
#define TESTS_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Absolute path of a file under the source tree; static buffer, valid until the next call. */
const char *test_source_path(const char *relative);

/* Reads a whole file (fails the test if it cannot); caller frees. */
char *test_read_file(const char *path, size_t *len);

/* Asserts |a - b| <= rel * max(|a|, |b|), printing both values on failure. */
#define assert_close(a, b, rel) test_assert_close((a), (b), (rel), #a, #b, __FILE__, __LINE__)
void test_assert_close(double a, double b, double rel, const char *ea, const char *eb,
                       const char *file, int line);

/*
 * Runs fn in a child process (stderr silenced) and fails the test unless the child dies
 * instead of returning: for alloc-or-die paths that must abort.
 */
void test_assert_dies(void (*fn)(void));

struct event_base;

/* Runs base's loop until *flag is true; fails the test after limit_s seconds. */
void test_loop_until(struct event_base *base, const bool *flag, int limit_s);

/* Runs base's loop for ms milliseconds (failing the test after limit_s, as above). */
void test_loop_for(struct event_base *base, int ms, int limit_s);

#endif
