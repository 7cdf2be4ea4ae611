/*
 * Trace files: a streaming reader and an atomic writer over the pure codec of trace.h.
 *
 * Traces of real runs reach millions of trajectories, so the reader holds one line at a time
 * (memory bounded by the longest line, never by the file) and the writer formats into a
 * reused buffer. These and the report writer are the only code outside the process layer
 * that opens files (DESIGN.md); commands use them and turn LIBRA_EINVAL into exit 2 (1 for
 * `libra trace validate`).
 */
#ifndef TRACE_FILE_H
#define TRACE_FILE_H

#include <stdint.h>

#include "trace/trace.h"

/* ---- reading ----------------------------------------------------------------------------- */

struct trace_reader;

/*
 * Opens path for reading ("-" is standard input). Returns 0 with *out set, or LIBRA_EIO with
 * err ("PATH: cannot open: REASON") and *out NULL. Close with trace_reader_close.
 */
int trace_reader_open(struct trace_reader **out, const char *path, struct libra_error *err);

/*
 * A reader of the len bytes at text, borrowed (they must outlive the reader), named name in
 * errors ("-": "<stdin>"): for a trace already read whole, as standard input is, once.
 */
struct trace_reader *trace_reader_from_text(const char *name, const char *text, size_t len);

/*
 * Reads and checks line 1, the header. Must be called first, once. Returns 0 with *hdr set
 * (owned by the reader, valid until close); LIBRA_EINVAL with err at FILE:1 (the reader can
 * still be used to check the records, without group_size); or LIBRA_EIO.
 */
int trace_reader_header(struct trace_reader *r, const struct trace_header **hdr,
                        struct libra_error *err);

/*
 * Reads the next trajectory. Returns 1 with *traj set (owned by the reader, valid until the
 * next call), 0 at the end of the file, LIBRA_EINVAL with err at FILE:LINE:COL and "FIELD:
 * REASON" for a bad line (calling again continues with the next line), or LIBRA_EIO.
 * When the header gives group_size N, a record naming another (step, prompt_id) than the first
 * good one of its run of N consecutive record lines (a bad line holds its place) is a bad line
 * too (docs/trace-format.md, rule 7).
 * A last line without its newline is reported as truncated; a line longer than
 * TRACE_MAX_LINE_BYTES as too long, and then the reader stops (the line may never end, as on a
 * stream of zeros): later calls return 0.
 */
int trace_reader_next(struct trace_reader *r, const struct trace_traj **traj,
                      struct libra_error *err);

/*
 * Reads the next line of a text file that is not a trace (an importer's input), unparsed:
 * returns 1 with [*line, *line + *len), without its newline (a last line without one is
 * returned as it is), valid until the next call; 0 at the end of the file; LIBRA_EINVAL for a
 * line longer than max bytes, after which the reader stops as for a trace's; or LIBRA_EIO.
 */
int trace_reader_text_line(struct trace_reader *r, size_t max, const char **line, size_t *len,
                           struct libra_error *err);

/* The number of the line read last (1 is the header); 0 before any. */
int64_t trace_reader_line(const struct trace_reader *r);

/* Closes the file and frees everything the reader returned. NULL is a no-op. */
void trace_reader_close(struct trace_reader *r);

/* ---- writing ----------------------------------------------------------------------------- */

struct trace_writer;

/*
 * Starts a trace at path with header h (checked by trace_check_header). A file is written
 * under a temporary name of this writer's own (PATH.tmpPID.N) and renamed into place by
 * trace_writer_close, so a failed run never leaves a partial trace and two writers of one path
 * (threads) each publish a whole file, the last to close staying; "-" collects the output in memory
 * and writes it to standard output at close. Returns 0 with *out set, LIBRA_EINVAL (bad header) or
 * LIBRA_EIO, with err.
 */
int trace_writer_open(struct trace_writer **out, const char *path, const struct trace_header *h,
                      struct libra_error *err);

/*
 * Appends one trajectory after trace_check_traj against the header's group_size. Returns 0,
 * LIBRA_EINVAL (record invalid; nothing written, err "FIELD: REASON") or LIBRA_EIO.
 */
int trace_writer_put(struct trace_writer *w, const struct trace_traj *t, struct libra_error *err);

/*
 * Finishes the trace: flushes, closes and renames it into place. Returns 0 or LIBRA_EIO (the
 * temporary file is then removed). Frees w either way; NULL is a no-op returning 0.
 */
int trace_writer_close(struct trace_writer *w, struct libra_error *err);

/* Abandons the trace: removes the temporary file, writes nothing, frees w. NULL is a no-op. */
void trace_writer_abort(struct trace_writer *w);

/* The temporary file w writes, renamed into place at close; NULL when w writes in place
 * (standard output, a device, a FIFO). Valid while w is open. */
const char *trace_writer_tmp(const struct trace_writer *w);

#endif
