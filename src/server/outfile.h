/*
 * The gateway's output files (--capture, --decisions): lines appended as they are made.
 *
 * Why append, and why one write(2) per line as it is made: a gateway runs for days and is
 * restarted (after a crash, for a new version, on a state dir that resumes it), and each run
 * adds to what the earlier ones wrote instead of replacing it. A line reaches the kernel before
 * the call it records is answered, so a crash of the gateway (kill -9 included) loses no line
 * of a call it acknowledged; a stdio buffer, or a file renamed into place at exit, lost them
 * all. A line a crash or a full disk cut short is cut off at the next start, so the file stays
 * whole lines. With --state-dir the capture is also synced before each commit
 * (gw_store_sync), so what a commit acknowledged survives a power loss as the journal does.
 *
 * Not thread-safe: the event loop's.
 */
#ifndef SERVER_OUTFILE_H
#define SERVER_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_OUTFILE_HEAD_MAX (64 << 10) /* bytes of a kept file read for its first line */

struct gw_outfile {
    int fd;           /* -1: not open */
    bool regular;     /* a regular file; else a device or FIFO, written in place and never read */
    char *head;       /* its first line (malloc'd, no newline) when it held lines; else NULL */
    const char *path; /* as given; borrowed */
    char error[320];  /* why writing stopped ("cannot write 'PATH': why"); "" while it has not */
};

/*
 * Opens path for appending, created when absent. When it is a regular file that is not empty,
 * f->head is its first line, for the caller to judge before anything is written or cut. A file
 * that is only a first line cut short (no newline, and its bytes the start of one that begins
 * with opening: the gateway's own, stopped while it wrote it) is emptied, saying so on standard
 * error for `what` ("--capture"), and f->head is NULL. Returns 0; LIBRA_EIO with err when it
 * cannot be opened, read or emptied; LIBRA_EINVAL when it is not empty but its first
 * GW_OUTFILE_HEAD_MAX bytes hold no whole line (not a file of lines). *f is closed (fd -1) on
 * error.
 */
int gw_outfile_open(struct gw_outfile *f, const char *path, const char *opening, const char *what,
                    char *err, size_t err_size);

/*
 * Cuts off the last line of a kept file when it is cut short (no newline at its end: the
 * gateway was stopped in the middle of writing it), saying so on standard error for `what`
 * ("--capture"). Returns 0, or LIBRA_EIO with err.
 */
int gw_outfile_mend(struct gw_outfile *f, const char *what, char *err, size_t err_size);

/*
 * Calls fn(arg, line, len, lineno) on every whole line of the kept file, from its first (line
 * 1; without its newline, NUL-terminated), until fn returns nonzero, which is returned: a
 * file appended to must hold nothing else than its lines, and the caller judges each. A last
 * line cut short is not passed (gw_outfile_mend cuts it off). Returns 0, fn's value, or
 * LIBRA_EIO with err when the file cannot be read.
 */
typedef int (*gw_outfile_line_fn)(void *arg, const char *line, size_t len, int64_t lineno);
int gw_outfile_lines(const struct gw_outfile *f, gw_outfile_line_fn fn, void *arg, char *err,
                     size_t err_size);

/*
 * Appends len bytes (whole lines) in one write(2) where the kernel takes them so, else in as
 * many as it needs. Returns 0, or -1 once writing failed: f->error says why, and nothing more
 * is written.
 */
int gw_outfile_write(struct gw_outfile *f, const char *data, size_t len);

/* Closes f (a closed one: a no-op). Returns 0, or -1 when a write or the close failed
 * (f->error says why). */
int gw_outfile_close(struct gw_outfile *f);

#endif
