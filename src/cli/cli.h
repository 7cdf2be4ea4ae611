/*
 * The `libra` command-line tool: shared plumbing for the subcommands.
 *
 * Each subcommand lives in cmd_<name>.c and exposes one entry point listed in commands.c
 * (git's builtin/ layout). Subcommands parse their own flags with getopt_long, print
 * human output to stdout (or one JSON document with --json), diagnostics to stderr, and
 * return an exit code from the table in include/libra/libra.h (docs/cli.md).
 */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "libra/libra.h"

struct trace_header;
struct trace_writer;

struct cli_command {
    const char *name;                  /* as typed: "plan", "presets" */
    const char *summary;               /* one line for `libra --help` */
    const char *usage;                 /* one line, e.g. "libra plan [CONFIG] [flags]" */
    int (*run)(int argc, char **argv); /* argv[0] is the command name; returns an exit code */
    unsigned reads;   /* its SPEC_READ_* bit (spec/config.h): flags may set only keys it reads;
                       * 0: any key (config), or it takes no experiment flags */
    const char *help; /* the command line whose --help lists its flags, where that is not
                       * "libra NAME" (a subcommand's own: "libra trace gen") */
};

/* The command table, terminated by an entry whose name is NULL (commands.c). */
extern const struct cli_command cli_commands[];

/* Prints "libra: MSG" to stderr (lower case, no full stop). */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Reports a usage error for cmd: "libra: CMD: MSG" and the command's one-line usage on
 * stderr. Returns LIBRA_EXIT_USAGE.
 */
int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reports a bad value of a flag cmd takes: "libra: CMD: FLAG: WHY", without the usage line
 * (docs/cli.md). Returns LIBRA_EXIT_USAGE. */
int cli_value_error(const struct cli_command *cmd, const char *flag, const char *why);

/* cli_value_error with the message after "libra: CMD: " formatted whole by the caller (a value
 * that is not one flag's: an input's options, a swept key's list). Returns LIBRA_EXIT_USAGE. */
int cli_value_errorf(const struct cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parses a flag's value (flag as typed, "--steps") as an integer in [lo, hi] into *out. Returns
 * 0, or LIBRA_EXIT_USAGE after printing "libra: CMD: FLAG: expected an integer in [LO, HI], not
 * 'ARG'" (a bad value: no usage line). */
int cli_parse_int(const struct cli_command *cmd, const char *flag, const char *arg, int64_t lo,
                  int64_t hi, int64_t *out);

/* Parses a flag's value as a number in [lo, hi] into *out. Returns 0, or LIBRA_EXIT_USAGE after
 * printing "libra: CMD: FLAG: expected a number in [LO, HI], not 'ARG'" (no usage line). */
int cli_parse_double(const struct cli_command *cmd, const char *flag, const char *arg, double lo,
                     double hi, double *out);

/* Prints a parser error as "libra: FILE:LINE:COL: MSG". Returns LIBRA_EXIT_USAGE. */
int cli_report_error(const struct libra_error *err);

/* Prints err as cli_report_error does and returns the exit code of rc (a LIBRA_E*): 3 for
 * LIBRA_EIO, 4 for LIBRA_EINTERNAL, 1 for LIBRA_EINFEAS, else 2. */
int cli_report(int rc, const struct libra_error *err);

/* Finds a command by name; NULL when unknown. */
const struct cli_command *cli_find(const char *name);

/*
 * Runs getopt_long over argv with opterr off, translating an unknown flag or a missing
 * argument into a usage error. Returns the option character, -1 at the end of the flags, or
 * '?' after it has printed the usage error (the caller returns LIBRA_EXIT_USAGE).
 */
int cli_getopt(const struct cli_command *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts);

/* Reads a whole file into a malloc'd NUL-terminated buffer. Returns 0, or LIBRA_EXIT_IO after
 * printing "libra: cannot read 'PATH': REASON". */
int cli_read_file(const char *path, char **text, size_t *len);

/* Whether a file the last flag loop's flags write (-o, --perfetto, ...) is path, a regular file:
 * then *output is its path and *label its flag ("-o"). A file a config names (workload.trace)
 * is known only once the config is read, after the loop's own check of its inputs. */
bool cli_output_naming(const char *path, const char **output, const char **label);

/* Whether paths path_a and path_b name one file: the same file (device and inode), or, where
 * none is there yet, the same name in the same directory (/tmp/x and /tmp/./x), a dangling
 * symbolic link standing for the name it points to. */
bool cli_same_file(const char *path_a, const char *path_b);

/* Whether a is a regular file and b names it too (device and inode: "./x", "x" and a link to x
 * are): an output b that would replace the input a. */
bool cli_same_regular_file(const char *a, const char *b);

/* Whether outputs a and b would write one file: a regular file or one not there yet, named by
 * both; a device such as /dev/null takes both. */
bool cli_same_output(const char *a, const char *b);

/* Whether path is standard output: "-", or the regular file standard output is redirected to
 * (which a second output renamed over it would replace), or the pipe it writes to (/dev/stdout:
 * two outputs would interleave there). A device (a terminal, /dev/null) is not: it takes two
 * outputs as it takes any. */
bool cli_is_stdout(const char *path);

/* Writes text to path ("-" or NULL: stdout) whole: into "PATH.tmp", renamed over path (a
 * symbolic link's target) once complete, so that path holds either what it held before or all
 * of text (the temporary file is removed on failure); a device or FIFO (/dev/null, /dev/stdout)
 * is written in place. Returns 0 or LIBRA_EXIT_IO after printing why. */
int cli_write_output(const char *path, const char *text);

/* Opens a trace writer at path (trace_writer_open) whose temporary file, FILE.tmpPID.N, is
 * removed if SIGINT, SIGTERM or SIGHUP stops the process before cli_trace_close, from the
 * moment it exists; the signal then ends the process as it would have. A signal ignored
 * (nohup's SIGHUP) stays ignored. One writer at a time. */
int cli_trace_open(struct trace_writer **w, const char *path, const struct trace_header *h,
                   struct libra_error *err);

/* Ends w (NULL: none was opened): closes it into place when rc is 0 and returns
 * trace_writer_close's result, else abandons it and returns rc; the signals do as before. */
int cli_trace_close(struct trace_writer *w, int rc, struct libra_error *err);

/* Whether cli_write_output could write path, checked before a long run rather than after it:
 * its temporary file is created and removed (a device or FIFO is checked for write permission,
 * not opened: opening a FIFO waits for its reader, and closing it ends the reader's input).
 * Returns 0 or LIBRA_EXIT_IO after printing why. */
int cli_check_output(const char *path);

#endif
