/*
 * Opening files to read; see fileio.h.
 */
#include "util/fileio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/error.h"

/* Skips a UTF-8 byte order mark at the start of f: Windows editors and spreadsheets' "CSV
 * UTF-8" write one, and it is no part of the text. A stream that starts otherwise is left as
 * it was. */
static void skip_bom(FILE *f)
{
    int c = getc(f);
    if (c != 0xEF) {
        if (c != EOF)
            ungetc(c, f);
        return;
    }
    int c2 = getc(f), c3 = c2 == 0xBB ? getc(f) : EOF;
    if (c3 == 0xBF || fseek(f, 0, SEEK_SET) == 0)
        return;
    /* not seekable (a pipe): put back what was read; glibc takes more than one byte */
    if (c3 != EOF)
        ungetc(c3, f);
    if (c2 != EOF)
        ungetc(c2, f);
    ungetc(c, f);
}

FILE *fileio_open(const char *path, struct libra_error *err)
{
    if (strcmp(path, "-") == 0) {
        skip_bom(stdin);
        return stdin;
    }
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
    } else {
        skip_bom(f);
    }
    return f;
}

int fileio_error(struct libra_error *err, const char *path, int errnum)
{
    /* errno 0 after a failed read would print "success" */
    error_set(err, NULL, 0, 0, "cannot read '%s': %s", path, error_strerror(errnum ? errnum : EIO));
    return LIBRA_EIO;
}

char *fileio_replace_target(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 ? !S_ISREG(st.st_mode) : errno != ENOENT)
        return NULL;
    /* follow the links, a dangling one too: the file it names is the one to create */
    char *at = xstrdup(path);
    for (int hops = 0; hops < 40 && lstat(at, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
        size_t cap = (size_t)st.st_size + 1;
        char *link = xmalloc(cap);
        ssize_t n = readlink(at, link, cap);
        if (n < 0 || (size_t)n >= cap) {
            free(link);
            break;
        }
        link[n] = '\0';
        const char *slash = strrchr(at, '/');
        if (link[0] != '/' && slash) { /* relative to the link's directory */
            size_t dir = (size_t)(slash - at) + 1, size = dir + (size_t)n + 1;
            char *joined = xmalloc(size);
            snprintf(joined, size, "%.*s%s", (int)dir, at, link);
            free(link);
            link = joined;
        }
        free(at);
        at = link;
    }
    return at;
}
