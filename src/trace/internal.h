/*
 * Declarations shared by the files of trace/ and nobody else: the column finder the parser
 * and the importers report positions with, and the verl importer behind trace/import.h.
 */
#ifndef TRACE_INTERNAL_H
#define TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "trace/trace.h"

/*
 * The 1-based column (in characters) of the value or key that JSON Pointer ptr names in line
 * (one valid JSON value of len bytes), or of its nearest enclosing element when it is absent
 * (the line's first value when none is present). Scans the text; meant for error reports.
 */
int trace_line_col(const char *line, size_t len, const char *ptr);

/* The verl rollout-dump importer (import_verl.c); see trace_importer_* in import.h. */
struct trace_verl;

/* chars_per_token > 0. Never returns NULL. */
struct trace_verl *trace_verl_new(double chars_per_token);
void trace_verl_free(struct trace_verl *v);

/*
 * Converts one dump line (line lineno of file name) into a trajectory valid until the next
 * call. Returns 1 with *out set, or LIBRA_EINVAL with err at name:lineno:col.
 */
int trace_verl_line(struct trace_verl *v, const char *name, int64_t lineno, const char *line,
                    size_t len, const struct trace_traj **out, struct libra_error *err);

#endif
