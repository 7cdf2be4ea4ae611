/*
 * libra — entry point: dispatches `libra <command>` through the command table and handles the
 * tool-wide flags (--help, --version).
 */
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/experiment.h"
#include "cli/cli.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/parse.h"
#include "util/version.h"

/* Writes a diagnostic's text to stderr, a control byte other than a line break or tab as \xHH:
 * the text echoes what the user gave (a name, a flag's value), which must not drive the
 * terminal. */
__attribute__((format(printf, 1, 0))) static void put_diagnostic(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, again);
    va_end(again);
    char *text = xmalloc(n > 0 ? (size_t)n + 1 : 1);
    vsnprintf(text, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if ((*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f)
            fprintf(stderr, "\\x%02x", *c);
        else
            fputc(*c, stderr);
    }
    free(text);
}

void cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("libra: ", stderr);
    put_diagnostic(fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "libra: %s: ", cmd->name);
    put_diagnostic(fmt, ap);
    if (cmd->help)
        fprintf(stderr, "\nusage: %s (see %s --help)\n", cmd->usage, cmd->help);
    else
        fprintf(stderr, "\nusage: %s (see libra %s --help)\n", cmd->usage, cmd->name);
    va_end(ap);
    return LIBRA_EXIT_USAGE;
}

int cli_value_error(const struct cli_command *cmd, const char *flag, const char *why)
{
    return cli_value_errorf(cmd, "%s: %s", flag, why);
}

int cli_value_errorf(const struct cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "libra: %s: ", cmd->name);
    put_diagnostic(fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return LIBRA_EXIT_USAGE;
}

/* A why for the util/parse.h parsers that holds their reason about arg whole. */
static char *why_for(const char *arg, size_t *size)
{
    *size = strlen(arg) + PARSE_WHY_EXTRA;
    return xmalloc(*size);
}

int cli_parse_int(const struct cli_command *cmd, const char *flag, const char *arg, int64_t lo,
                  int64_t hi, int64_t *out)
{
    size_t size;
    char *why = why_for(arg, &size);
    int rc = parse_int(arg, lo, hi, out, why, size) ? cli_value_error(cmd, flag, why) : 0;
    free(why);
    return rc;
}

int cli_parse_double(const struct cli_command *cmd, const char *flag, const char *arg, double lo,
                     double hi, double *out)
{
    size_t size;
    char *why = why_for(arg, &size);
    int rc = parse_double(arg, lo, hi, out, why, size) ? cli_value_error(cmd, flag, why) : 0;
    free(why);
    return rc;
}

int cli_report_error(const struct libra_error *err)
{
    char buf[1024];
    cli_errorf("%s", error_format(err, buf, sizeof buf));
    return LIBRA_EXIT_USAGE;
}

int cli_report(int rc, const struct libra_error *err)
{
    cli_report_error(err);
    return rc == LIBRA_EIO         ? LIBRA_EXIT_IO
           : rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL
           : rc == LIBRA_EINFEAS   ? LIBRA_EXIT_NEGATIVE
                                   : LIBRA_EXIT_USAGE;
}

const struct cli_command *cli_find(const char *name)
{
    for (const struct cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

/* The element of argv that held the long option getopt_long just returned. */
static const char *long_option_text(char **argv)
{
    bool separate = optarg && optind >= 2 && argv[optind - 1] == optarg;
    return argv[optind - (separate ? 2 : 1)];
}

/* ---- an output that is an input ------------------------------------------------------- */

/* A file a flag names, with the flag ("-o", "--presets"). */
struct named_file {
    const char *path; /* an argv string */
    char label[32];
};

/*
 * What the flag loop now running (cli_getopt, from its first call with optind 0 to its -1) has
 * seen: the files its flags write and read. Once the flags end, its operands are known as well,
 * and an output naming one of those files, or another output's, is refused before anything
 * runs: the output would replace the command's own input, or the other output. The outputs stay
 * until the next loop begins, for cli_output_naming.
 */
static struct {
    struct named_file *outputs, *inputs;
    size_t n_outputs, n_inputs;
    bool checked; /* said once, should the loop be asked again */
} seen;

/* The flags whose value is a file the command reads, and those whose value it writes (-o too). */
static const char *const input_flags[] = {"presets", "config", "trace", "plan", NULL};
static const char *const output_flags[] = {"perfetto", "decisions", "capture", "ports-file", NULL};

/*
 * Operands that name no file, by command and the word its flag loop's argv starts with (the
 * subcommand's, where the command passes it so): a subcommand word, or `trace gen`'s preset
 * name. Every other operand is an input file; calibrate's INPUT is the part before ",OPTION=N".
 */
static const struct {
    const char *command, *loop;
    const char *word; /* NULL: no operand names a file */
} word_operands[] = {
    {"cost", "cost", "calibration"},
    {"route", "route", "eval"},
    {"trace", "gen", NULL},
};

/* The file operand arg of cmd's flag loop (whose argv[0] is loop) names, into buf; NULL when it
 * names none. */
static const char *operand_file(const struct cli_command *cmd, const char *loop, const char *arg,
                                char *buf, size_t size)
{
    for (size_t i = 0; i < sizeof word_operands / sizeof *word_operands; i++)
        if (strcmp(word_operands[i].command, cmd->name) == 0 &&
            strcmp(word_operands[i].loop, loop) == 0 &&
            (!word_operands[i].word || strcmp(word_operands[i].word, arg) == 0))
            return NULL;
    if (strcmp(cmd->name, "calibrate") == 0 && strchr(arg, ',')) {
        snprintf(buf, size, "%.*s", (int)strcspn(arg, ","), arg);
        return buf;
    }
    return arg;
}

/* Whether stat succeeds on both paths and finds one file. */
static bool same_inode(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The directory part of path into dir ("." when it has none); returns its last component. */
static const char *split_dir(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, size, ".");
        return path;
    }
    snprintf(dir, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return slash + 1;
}

/*
 * Into buf: where writing path lands when path is a symbolic link whose target does not exist
 * yet (followed, each relative target from its link's directory, up to 40 links as the kernel
 * does); path itself otherwise. A dangling link and the name it points to are one file to come.
 */
static const char *dangling_target(const char *path, char *buf, size_t size)
{
    char cur[4096], link[4096], dir[4096];
    struct stat st;
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0; hops < 40 && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
        if (stat(cur, &st) == 0) /* it resolves: compared by inode */
            break;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0)
            break;
        link[n] = '\0';
        split_dir(cur, dir, sizeof dir);
        if (link[0] == '/' || strcmp(dir, ".") == 0)
            snprintf(cur, sizeof cur, "%s", link);
        else
            snprintf(cur, sizeof cur, "%.2000s/%.2000s", dir, link);
    }
    snprintf(buf, size, "%s", cur);
    return buf;
}

bool cli_same_file(const char *path_a, const char *path_b)
{
    char ra[4096], rb[4096], da[4096], db[4096];
    const char *a = dangling_target(path_a, ra, sizeof ra);
    const char *b = dangling_target(path_b, rb, sizeof rb);
    const char *na = split_dir(a, da, sizeof da), *nb = split_dir(b, db, sizeof db);
    return strcmp(a, b) == 0 || same_inode(a, b) || (strcmp(na, nb) == 0 && same_inode(da, db));
}

bool cli_same_regular_file(const char *a, const char *b)
{
    struct stat sa;
    return stat(a, &sa) == 0 && S_ISREG(sa.st_mode) && cli_same_file(a, b);
}

bool cli_same_output(const char *a, const char *b)
{
    struct stat sa;
    return (stat(a, &sa) != 0 || S_ISREG(sa.st_mode)) && cli_same_file(a, b);
}

static bool listed(const char *const *names, const char *name)
{
    for (; *names; names++)
        if (strcmp(*names, name) == 0)
            return true;
    return false;
}

static void add_named(struct named_file **v, size_t *n, const char *path, const char *label)
{
    *v = xreallocarray(*v, *n + 1, sizeof **v);
    (*v)[*n].path = path;
    snprintf((*v)[(*n)++].label, sizeof(*v)->label, "%s", label);
}

/* Records what cli_getopt returned (c, with optarg and the long option longopts[index]). */
static void note_flag(int c, const struct option *longopts, int index)
{
    if (!optarg || (c != 'o' && index < 0))
        return;
    char label[32] = "-o";
    if (c != 'o')
        snprintf(label, sizeof label, "--%s", longopts[index].name);
    if (c == 'o' || listed(output_flags, longopts[index].name)) {
        if (strcmp(optarg, "-") != 0)
            add_named(&seen.outputs, &seen.n_outputs, optarg, label);
    } else if (listed(input_flags, longopts[index].name)) {
        add_named(&seen.inputs, &seen.n_inputs, optarg, label);
    }
}

/* Whether files a and b are one stream, which can be read once: standard input ('-') twice, or
 * one pipe, FIFO or socket (standard input's too, as '-' or /dev/stdin) by device and inode. */
static bool one_stream(const char *a, const char *b)
{
    bool in_a = strcmp(a, "-") == 0, in_b = strcmp(b, "-") == 0;
    struct stat x, y;
    if (in_a && in_b)
        return true;
    if ((in_a ? fstat(0, &x) : stat(a, &x)) != 0 || (in_b ? fstat(0, &y) : stat(b, &y)) != 0)
        return false;
    return (S_ISFIFO(x.st_mode) || S_ISSOCK(x.st_mode)) && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}

/* Refuses output out naming input in (written as shown, described as in_label: "the --presets
 * file"): one regular file, which writing would replace, or one pipe, FIFO or socket (standard
 * input's as '-'), which the command would wait on or read its own output from. Returns 0, or
 * '?' after the usage error. */
static int check_output_input(const struct cli_command *cmd, const struct named_file *out,
                              const char *in, const char *shown, const char *in_label)
{
    if (strcmp(in, "-") != 0 && cli_same_regular_file(out->path, in)) {
        cli_usage_error(cmd, "%s '%s' names %s '%s': writing it would replace the input",
                        out->label, out->path, in_label, shown);
        return '?';
    }
    if (one_stream(out->path, in)) {
        cli_usage_error(cmd,
                        "%s '%s' is the input '%s', a pipe or FIFO: the command would wait on "
                        "it or read what it writes",
                        out->label, out->path, shown);
        return '?';
    }
    return 0;
}

/* Refuses output o naming another output before it, an input flag's file or an operand file.
 * Returns 0, or '?' after the usage error. */
static int check_output(const struct cli_command *cmd, size_t o, int argc, char **argv)
{
    const struct named_file *out = &seen.outputs[o];
    for (size_t i = 0; i < o; i++)
        if (cli_same_output(out->path, seen.outputs[i].path)) {
            cli_usage_error(cmd, "%s and %s name one file, '%s': one would replace the other",
                            seen.outputs[i].label, out->label, out->path);
            return '?';
        }
    char buf[4096], label[48];
    for (size_t i = 0; i < seen.n_inputs; i++) {
        snprintf(label, sizeof label, "the %s file", seen.inputs[i].label);
        if (check_output_input(cmd, out, seen.inputs[i].path, seen.inputs[i].path, label))
            return '?';
    }
    for (int i = optind; i < argc; i++) {
        const char *in = operand_file(cmd, argv[0], argv[i], buf, sizeof buf);
        if (in && check_output_input(cmd, out, in, argv[i], "the input file"))
            return '?';
    }
    return 0;
}

/* Refuses a stream named by two input flags or operands (the second read would find it empty,
 * or wait for a writer that is gone). Returns 0, or '?' after the usage error. */
static int check_streams(const struct cli_command *cmd, int argc, char **argv)
{
    size_t n = 0;
    char **in = xcalloc(seen.n_inputs + (size_t)argc + 1, sizeof *in), buf[4096];
    for (size_t i = 0; i < seen.n_inputs; i++)
        in[n++] = xstrdup(seen.inputs[i].path);
    for (int i = optind; i < argc; i++) {
        const char *op = operand_file(cmd, argv[0], argv[i], buf, sizeof buf);
        if (op)
            in[n++] = xstrdup(op);
    }
    int rc = 0;
    for (size_t i = 1; i < n && !rc; i++)
        for (size_t j = 0; j < i && !rc; j++)
            if (one_stream(in[j], in[i])) {
                if (strcmp(in[i], "-") == 0 && strcmp(in[j], "-") == 0)
                    cli_usage_error(cmd, "'-' given twice: standard input can be read once");
                else
                    cli_usage_error(cmd,
                                    "'%s' and '%s' are one stream (a pipe or FIFO): it can "
                                    "be read once",
                                    in[j], in[i]);
                rc = '?';
            }
    for (size_t i = 0; i < n; i++)
        free(in[i]);
    free(in);
    return rc;
}

/* At the end of the flags: refuses a stream named twice (standard input, a pipe or FIFO: the
 * second read would find it empty), and an output naming an input file or another output. Returns
 * 0, or '?' after the usage error. */
static int check_files(const struct cli_command *cmd, int argc, char **argv)
{
    if (seen.checked)
        return 0;
    seen.checked = true;
    if (check_streams(cmd, argc, argv))
        return '?';
    for (size_t o = 0; o < seen.n_outputs; o++)
        if (check_output(cmd, o, argc, argv))
            return '?';
    return 0;
}

bool cli_output_naming(const char *path, const char **output, const char **label)
{
    for (size_t i = 0; i < seen.n_outputs; i++)
        if (cli_same_regular_file(seen.outputs[i].path, path)) {
            *output = seen.outputs[i].path;
            *label = seen.outputs[i].label;
            return true;
        }
    return false;
}

/* Whether arg, the last of the command line, is a flag that takes a value ("--gpus", "-o"). */
static bool needs_value(const char *arg, const char *shortopts, const struct option *longopts)
{
    if (strncmp(arg, "--", 2) == 0) {
        for (const struct option *o = longopts; o && o->name; o++)
            if (strcmp(o->name, arg + 2) == 0)
                return o->has_arg == required_argument;
        return false;
    }
    const char *at = arg[0] == '-' && arg[1] && !arg[2] ? strchr(shortopts, arg[1]) : NULL;
    return at && at[1] == ':';
}

int cli_getopt(const struct cli_command *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts)
{
    opterr = 0;
    if (optind == 0) { /* a new flag loop */
        free(seen.inputs);
        free(seen.outputs);
        memset(&seen, 0, sizeof seen);
    }
    int index = -1;
    int c = getopt_long(argc, argv, shortopts, longopts, &index);
    if (c == -1)
        return check_files(cmd, argc, argv) ? '?' : -1;
    if (index >= 0) {
        /* getopt_long takes any unambiguous prefix ("--gpu" for "--gpus"); a flag is spelled
         * whole, so that a typo or a future flag sharing the prefix cannot change a run */
        const char *typed = long_option_text(argv) + 2, *name = longopts[index].name;
        size_t len = strcspn(typed, "=");
        if (len != strlen(name) || strncmp(typed, name, len) != 0) {
            cli_usage_error(cmd, "unknown flag '--%.*s' (did you mean --%s?)", (int)len, typed,
                            name);
            return '?';
        }
    }
    if (c == '?' || c == ':') {
        const char *arg = argv[optind - 1];
        if (optopt && optopt != '?' && c == ':')
            cli_usage_error(cmd, "flag '-%c' needs a value", optopt);
        else if (!strchr(arg, '=') && needs_value(arg, shortopts, longopts))
            cli_usage_error(cmd, "flag '%s' needs a value", arg);
        else
            cli_usage_error(cmd, "unknown or malformed flag '%s'", arg);
        return '?';
    }
    note_flag(c, longopts, index);
    return c;
}

int cli_read_file(const char *path, char **text, size_t *len)
{
    struct libra_error err = {0};
    int rc = api_read_file(path, text, len, &err);
    return rc ? cli_report(rc, &err) : 0;
}

/* Writes text to f and closes it (stdout: flushes it); false with errno on failure. */
static bool put_text(FILE *f, const char *text)
{
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    int saved = errno;
    bool closed = (f == stdout ? fflush(f) : fclose(f)) == 0;
    if (ok && !closed)
        saved = errno;
    errno = saved;
    return ok && closed;
}

/* The temporary file written whole before it is renamed over target. */
static char *tmp_name(const char *target)
{
    size_t n = strlen(target) + sizeof ".tmp";
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.tmp", target);
    return tmp;
}

/* Reports that tmp, made beside path to replace it whole, cannot be created (errno's why),
 * naming tmp where path exists (it may be writable itself) or tmp is in the way. Returns
 * LIBRA_EXIT_IO. */
static int tmp_error(const char *path, const char *tmp)
{
    int why = errno;
    if (access(path, F_OK) == 0 || access(tmp, F_OK) == 0)
        cli_errorf("cannot write '%s': cannot create '%s' beside it to replace it whole: %s", path,
                   tmp, error_strerror(why));
    else
        cli_errorf("cannot write '%s': %s", path, error_strerror(why));
    return LIBRA_EXIT_IO;
}

int cli_write_output(const char *path, const char *text)
{
    if (!path || strcmp(path, "-") == 0) {
        if (put_text(stdout, text))
            return 0;
        cli_errorf("cannot write '<stdout>': %s", error_strerror(errno));
        return LIBRA_EXIT_IO;
    }
    char *target = fileio_replace_target(path);
    if (!target) { /* a device or a FIFO: written in place, a rename would replace it */
        FILE *f = fopen(path, "wb");
        if (f && put_text(f, text))
            return 0;
        cli_errorf("cannot write '%s': %s", path, error_strerror(errno));
        return LIBRA_EXIT_IO;
    }
    char *tmp = tmp_name(target);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && put_text(f, text) && rename(tmp, target) == 0;
    int rc = ok ? 0 : LIBRA_EXIT_IO;
    if (!f)
        rc = tmp_error(path, tmp);
    else if (!ok) {
        cli_errorf("cannot write '%s': %s", path, error_strerror(errno));
        remove(tmp);
    }
    free(tmp);
    free(target);
    return rc;
}

/* ---- traces streamed to a file --------------------------------------------------------- */

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_STOP_SIGNALS (sizeof stop_signals / sizeof stop_signals[0])
static char unfinished[4096]; /* the temporary file a stop signal removes; read by the handler */
static struct sigaction before[N_STOP_SIGNALS]; /* what the signals did before it was armed */
static bool armed;

static void remove_unfinished(int sig)
{
    unlink(unfinished); /* async-signal-safe, as signal and raise are */
    signal(sig, SIG_DFL);
    raise(sig); /* delivered once the handler returns: the process ends by it */
}

/* Arms the removal of path on a stop signal; one ignored (nohup's SIGHUP) stays ignored. */
static void arm(const char *path)
{
    if (!path || strlen(path) >= sizeof unfinished)
        return;
    snprintf(unfinished, sizeof unfinished, "%s", path);
    struct sigaction sa = {.sa_handler = remove_unfinished};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_STOP_SIGNALS; i++) {
        sigaction(stop_signals[i], NULL, &before[i]);
        if (before[i].sa_handler != SIG_IGN)
            sigaction(stop_signals[i], &sa, NULL);
    }
    armed = true;
}

int cli_trace_open(struct trace_writer **w, const char *path, const struct trace_header *h,
                   struct libra_error *err)
{
    char *target = strcmp(path, "-") != 0 ? fileio_replace_target(path) : NULL;
    bool in_place = !target; /* nothing to remove, and opening a FIFO waits for its reader */
    free(target);
    if (in_place)
        return trace_writer_open(w, path, h, err);
    sigset_t stop, old; /* held while the file is created and the removal armed: no window */
    sigemptyset(&stop);
    for (size_t i = 0; i < N_STOP_SIGNALS; i++)
        sigaddset(&stop, stop_signals[i]);
    sigprocmask(SIG_BLOCK, &stop, &old);
    int rc = trace_writer_open(w, path, h, err);
    if (rc == 0)
        arm(trace_writer_tmp(*w));
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int cli_trace_close(struct trace_writer *w, int rc, struct libra_error *err)
{
    if (rc == 0)
        rc = trace_writer_close(w, err);
    else
        trace_writer_abort(w);
    for (size_t i = 0; armed && i < N_STOP_SIGNALS; i++)
        sigaction(stop_signals[i], &before[i], NULL);
    armed = false;
    return rc;
}

static bool is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool cli_is_stdout(const char *path)
{
    struct stat a, b;
    return strcmp(path, "-") == 0 ||
           (stat(path, &a) == 0 && (S_ISREG(a.st_mode) || S_ISFIFO(a.st_mode)) &&
            fstat(STDOUT_FILENO, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino);
}

int cli_check_output(const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return 0;
    if (is_directory(path)) { /* written at the end, it would fail only then */
        cli_errorf("cannot write '%s': %s", path, error_strerror(EISDIR));
        return LIBRA_EXIT_IO;
    }
    char *target = fileio_replace_target(path);
    if (!target) { /* a device or FIFO: opening a FIFO would wait for, then end, its reader */
        if (access(path, W_OK) == 0)
            return 0;
        cli_errorf("cannot write '%s': %s", path, error_strerror(errno));
        return LIBRA_EXIT_IO;
    }
    char *tmp = tmp_name(target);
    FILE *f = fopen(tmp, "wb");
    int rc = f ? 0 : tmp_error(path, tmp);
    if (f) {
        fclose(f);
        remove(tmp);
    }
    free(tmp);
    free(target);
    return rc;
}

static void print_help(FILE *out)
{
    fprintf(out, "usage: libra <command> [input] [flags]\n"
                 "       libra --version | --help\n\n"
                 "libra plans, routes and simulates agentic RL post-training on GPU clusters.\n\n"
                 "commands:\n");
    for (const struct cli_command *c = cli_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\n'libra <command> --help' describes a command; docs/cli.md lists exit codes.\n");
}

static void print_version(void)
{
    printf("libra %s\n", libra_version_string);
    printf("git: %s\nbuild: %s\ncompiler: %s\n", libra_git_describe, libra_build_type,
           libra_compiler);
    printf("jansson: %s\nlibevent: %s\n", jansson_version_str(), event_get_version());
}

/* What is still buffered for standard output, written: a help text or version printed to a
 * full disk or a closed stream fails the run like any other output. Returns rc, or
 * LIBRA_EXIT_IO after printing why when rc was 0 and stdout cannot be written. */
static int close_stdout(int rc)
{
    bool failed = fflush(stdout) != 0 || ferror(stdout);
    if (failed && rc == 0) {
        cli_errorf("cannot write '<stdout>': %s", error_strerror(errno ? errno : EIO));
        return LIBRA_EXIT_IO;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return LIBRA_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_help(stdout);
        return close_stdout(LIBRA_EXIT_OK);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        print_version();
        return close_stdout(LIBRA_EXIT_OK);
    }
    const struct cli_command *cmd = cli_find(name);
    if (!cmd) {
        cli_errorf("unknown command '%s'", name);
        fprintf(stderr, "usage: libra <command> [input] [flags] (see libra --help)\n");
        return LIBRA_EXIT_USAGE;
    }
    return close_stdout(cmd->run(argc - 1, argv + 1));
}
