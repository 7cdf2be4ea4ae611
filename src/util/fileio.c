/*
 * Opening files to read; see fileio.h.
 */
#include "util/fileio.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "util/error.h"

FILE *fileio_open(const char *path, struct libra_error *err)
{
    if (strcmp(path, "-") == 0)
        return stdin;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        f = NULL;
        errno = EISDIR;
    }
    if (!f) {
        int errnum = errno;
        fileio_error(err, path, errnum);
        errno = errnum;
    }
    return f;
}

int fileio_error(struct libra_error *err, const char *path, int errnum)
{
    /* errno 0 after a failed read would print "success" */
    error_set(err, NULL, 0, 0, "cannot read '%s': %s", path, error_strerror(errnum ? errnum : EIO));
    return LIBRA_EIO;
}
