/* Test helpers; see testutil.h. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
