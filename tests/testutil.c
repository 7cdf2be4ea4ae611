/* Test helpers; see testutil.h. */
#include "testutil.h"

#include <event2/event.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

const char *test_source_path(const char *relative)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", LIBRA_SOURCE_DIR, relative);
    return buf;
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_error("cannot open %s\n", path);
        fail();
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

void test_assert_close(double a, double b, double rel, const char *ea, const char *eb,
                       const char *file, int line)
{
    double scale = fmax(fabs(a), fabs(b));
    if (fabs(a - b) <= rel * scale || (a == b))
        return;
    print_error("%s:%d: %s = %.17g vs %s = %.17g (relative difference %.3g > %.3g)\n", file, line,
                ea, a, eb, b, fabs(a - b) / scale, rel);
    fail();
}

void test_assert_dies(void (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, STDERR_FILENO);
        fn();
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        print_error("expected the child to die, but it returned normally\n");
        fail();
    }
}

static void expired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(bool *)arg = true;
}

void test_loop_until(struct event_base *base, const bool *flag, int limit_s)
{
    bool late = false;
    struct event *t = evtimer_new(base, expired, &late);
    struct timeval tv = {limit_s, 0};
    evtimer_add(t, &tv);
    while (!*flag && !late)
        event_base_loop(base, EVLOOP_ONCE);
    event_free(t);
    if (late)
        fail_msg("the loop ran %d s without getting there", limit_s);
}

void test_loop_for(struct event_base *base, int ms, int limit_s)
{
    bool done = false;
    struct event *t = evtimer_new(base, expired, &done);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(t, &tv);
    test_loop_until(base, &done, limit_s);
    event_free(t);
}
