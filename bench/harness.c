/*
 * Benchmark driver: timing, callgrind re-execution and the JSON line format; see harness.h for
 * why and bench/README.md for how to read the figures.
 */
#define _DEFAULT_SOURCE /* wait4: a child's own peak memory */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/json.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#endif
#endif
#ifndef HAVE_CALLGRIND
#define HAVE_CALLGRIND 0
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

#define CHILD_FLAG "--callgrind-child" /* hidden: run one figure under callgrind's eye */
#define RSS_FLAG "--rss-child"         /* hidden: run a command, print its peak memory */
#define MAX_REPS 101
#define USAGE "[--smoke] [--filter SUBSTR] [--reps N] [--no-instructions]"

extern char **environ;

struct options {
    bool smoke, instructions;
    const char *filter;
    const char *child; /* figure name after CHILD_FLAG, or NULL */
    int reps;
};

static const char *prog = "bench";

/* Values the harness folds the work's results into, so that run() cannot be optimised out. */
static volatile uint64_t sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One run of f with n operations; returns the nanoseconds spent in run(). */
static double run_once(const struct bench_figure *f, uint64_t n)
{
    void *state = f->setup ? f->setup(n) : NULL;
    double t0 = now_ns();
    sink += f->run(state, n);
    double t1 = now_ns();
    if (f->teardown)
        f->teardown(state);
    return t1 - t0;
}

/* The run the callgrind child measures: a warm-up, then run() with instrumentation on. */
static void run_instrumented(const struct bench_figure *f)
{
    run_once(f, f->n);
    void *state = f->setup ? f->setup(f->n) : NULL;
    CALLGRIND_START_INSTRUMENTATION;
    sink += f->run(state, f->n);
    CALLGRIND_STOP_INSTRUMENTATION;
    if (f->teardown)
        f->teardown(state);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median nanoseconds of reps timed runs after one warm-up (no warm-up in smoke mode). */
static double median_ns(const struct bench_figure *f, uint64_t n, int reps, bool warm_up)
{
    double t[MAX_REPS];
    if (warm_up)
        run_once(f, n);
    for (int i = 0; i < reps; i++)
        t[i] = run_once(f, n);
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2.0;
}

/* x rounded to digits significant digits: timings are not more precise than that. */
static double round_sig(double x, int digits)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.*g", digits, x);
    return strtod(buf, NULL);
}

/* Total instructions of the "totals:" (or "summary:") line of a callgrind output file, or -1. */
static double parse_callgrind_total(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1.0;
    char line[4096];
    double total = -1.0;
    while (fgets(line, sizeof line, f)) {
        const char *p = NULL;
        if (strncmp(line, "totals:", 7) == 0)
            p = line + 7;
        else if (strncmp(line, "summary:", 8) == 0)
            p = line + 8;
        if (p) {
            char *end;
            double v = strtod(p, &end);
            if (end != p)
                total = v;
        }
    }
    fclose(f);
    return total;
}

/* Runs argv with its output discarded; returns its wait status (-1 when it could not be
 * spawned: *spawn_err says why) and fills *ru with its resource use. */
static int spawn_wait(char *const argv[], struct rusage *ru, int *spawn_err)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    *spawn_err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int status = -1;
    memset(ru, 0, sizeof *ru);
    if (*spawn_err == 0 && wait4(pid, &status, 0, ru) != pid)
        status = -1;
    return status;
}

/*
 * Runs argv (whose first elements are filled in here: valgrind and its flags, up to
 * CALLGRIND_ARGS of them) under callgrind and returns the total instructions it counted, or
 * -1 (with a note on stderr). *no_valgrind is set when valgrind cannot be run, so later
 * figures do not try again.
 */
#define CALLGRIND_ARGS 4
static double callgrind_total(const char *name, char **argv, bool instr_at_start, bool *no_valgrind)
{
    const char *tmpdir = getenv("TMPDIR");
    char out[4200], out_flag[4300];
    snprintf(out, sizeof out, "%s/libra-bench-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(out);
    if (fd < 0) {
        fprintf(stderr, "%s: %s: cannot prepare the callgrind run: %s\n", prog, name,
                strerror(errno));
        return -1.0;
    }
    close(fd);
    snprintf(out_flag, sizeof out_flag, "--callgrind-out-file=%s", out);
    argv[0] = "valgrind";
    argv[1] = "--tool=callgrind";
    argv[2] = instr_at_start ? "--instr-atstart=yes" : "--instr-atstart=no";
    argv[3] = out_flag;
    struct rusage ru;
    int err, status = spawn_wait(argv, &ru, &err);
    double total = -1.0;
    if (err != 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
        fprintf(stderr, "%s: valgrind not runnable (%s); instructions are null\n", prog,
                err ? strerror(err) : "exit 127");
        *no_valgrind = true;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s: %s: callgrind run failed (status %d)\n", prog, name, status);
    } else if ((total = parse_callgrind_total(out)) < 0) {
        fprintf(stderr, "%s: %s: no totals in %s\n", prog, name, out);
    }
    unlink(out);
    return total;
}

/* Re-executes this program under callgrind for figure f; instructions per operation or -1. */
static double callgrind_per_op(const struct bench_figure *f, bool *no_valgrind)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        fprintf(stderr, "%s: %s: cannot find this program: %s\n", prog, f->name, strerror(errno));
        return -1.0;
    }
    exe[len] = '\0';
    char *argv[CALLGRIND_ARGS + 4] = {[CALLGRIND_ARGS] = exe, CHILD_FLAG, (char *)f->name, NULL};
    double total = callgrind_total(f->name, argv, false, no_valgrind);
    return total < 0 ? -1.0 : total / (double)f->n;
}

/*
 * The shim behind RSS_FLAG: runs argv and prints "MAXRSS_KB STATUS". A child's peak resident
 * set, as wait4 reports it, starts from that of the process it was spawned from (Linux keeps
 * the high-water mark across exec), so the harness, which may hold hundreds of megabytes by
 * then, spawns this fresh copy of itself, which spawns the command.
 */
static _Noreturn void rss_child(char *const argv[])
{
    struct rusage ru;
    int err, status = spawn_wait(argv, &ru, &err);
    printf("%ld %d\n", err ? -1L : ru.ru_maxrss, status);
    exit(0); /* not back to the program's main: it would go on to its own figures */
}

/* Runs argv through the shim: returns whether it exited 0; *max_rss_kb its peak memory. */
static bool run_for_rss(char *const argv[], long *max_rss_kb)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    int fds[2];
    if (len <= 0 || pipe(fds) != 0)
        return false;
    exe[len] = '\0';
    size_t n = 0;
    while (argv[n])
        n++;
    char **shim = calloc(n + 3, sizeof *shim);
    shim[0] = exe;
    shim[1] = RSS_FLAG;
    memcpy(shim + 2, argv, n * sizeof *shim);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    int err = posix_spawn(&pid, exe, &fa, NULL, shim, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(shim);
    close(fds[1]);
    char line[64] = {0};
    FILE *f = fdopen(fds[0], "r");
    bool got = f && fgets(line, sizeof line, f);
    if (f)
        fclose(f);
    else
        close(fds[0]);
    int status = -1, child = -1;
    if (err == 0)
        waitpid(pid, &status, 0);
    return err == 0 && got && sscanf(line, "%ld %d", max_rss_kb, &child) == 2 && *max_rss_kb >= 0 &&
           WIFEXITED(child) && WEXITSTATUS(child) == 0;
}

/* A command figure: wall seconds (median), peak resident megabytes (max) and instructions. */
static void measure_command(const struct bench_command *f, const struct options *o,
                            bool *no_valgrind, double *wall_s, double *peak_mb, double *instr)
{
    const char *const *cmd = o->smoke ? f->smoke_argv : f->argv;
    const char *const *prep = o->smoke ? f->smoke_prepare : f->prepare;
    struct rusage ru;
    int err;
    if (prep && spawn_wait((char *const *)prep, &ru, &err) != 0) {
        fprintf(stderr, "%s: %s: preparing with %s failed\n", prog, f->name, prep[0]);
        *wall_s = *peak_mb = *instr = -1.0;
        return;
    }
    size_t n = 0;
    while (cmd[n])
        n++;
    char **argv = calloc(n + CALLGRIND_ARGS + 1, sizeof *argv);
    memcpy(argv + CALLGRIND_ARGS, cmd, n * sizeof *argv);
    double t[MAX_REPS];
    int reps = o->smoke ? 1 : o->reps;
    *peak_mb = 0;
    for (int i = -(o->smoke ? 0 : 1); i < reps; i++) { /* i < 0: the warm-up */
        long rss_kb = 0;
        double t0 = now_ns();
        bool ok = run_for_rss(argv + CALLGRIND_ARGS, &rss_kb);
        double dt = (now_ns() - t0) * 1e-9;
        if (!ok) {
            fprintf(stderr, "%s: %s: %s failed\n", prog, f->name, cmd[0]);
            *wall_s = *peak_mb = *instr = -1.0;
            free(argv);
            return;
        }
        if (i >= 0) {
            t[i] = dt;
            if ((double)rss_kb / 1024.0 > *peak_mb)
                *peak_mb = (double)rss_kb / 1024.0;
        }
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    *wall_s = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2.0;
    *instr = *no_valgrind ? -1.0 : callgrind_total(f->name, argv, true, no_valgrind);
    free(argv);
}

static const char *unit_name(enum bench_unit unit)
{
    return unit == BENCH_OPS_PER_S ? "op/s" : "ns/op";
}

static void emit(json_t *line)
{
    char *text = ujson_dump(line, false);
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    json_decref(line);
}

static json_t *number_or_null(double x, int digits)
{
    return x < 0 ? json_null() : ujson_real(round_sig(x, digits));
}

static void print_line(const struct bench_figure *f, uint64_t n, double ns, double instr)
{
    double per_op = ns / (double)n;
    double value = f->unit == BENCH_OPS_PER_S ? 1e9 / per_op : per_op;
    emit(json_pack("{s:s, s:s, s:o, s:I, s:s, s:o}", "name", f->name, "unit", unit_name(f->unit),
                   "value", ujson_real(round_sig(value, 4)), "n", (json_int_t)n, "input", f->input,
                   "instructions", number_or_null(instr, 6)));
}

static void print_command_line(const struct bench_command *f, double wall_s, double peak_mb,
                               double instr)
{
    emit(json_pack("{s:s, s:s, s:o, s:I, s:s, s:o, s:o}", "name", f->name, "unit", "s", "value",
                   number_or_null(wall_s, 4), "n", (json_int_t)1, "input", f->input, "instructions",
                   number_or_null(instr, 6), "peak_rss_mb", number_or_null(peak_mb, 4)));
}

/* Reports "what 'arg'" and the usage line; returns the usage exit code. */
static int usage(const char *what, const char *arg)
{
    fprintf(stderr, "%s: %s '%s'\nusage: %s %s\n", prog, what, arg, prog, USAGE);
    return 2;
}

/* Fills o from argv. Returns 0 to go on, -1 when --help was answered, or a usage error's exit
 * code. */
static int parse_args(int argc, char **argv, struct options *o)
{
    *o = (struct options){.instructions = HAVE_CALLGRIND, .reps = 5};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--smoke") == 0) {
            o->smoke = true;
        } else if (strcmp(a, "--no-instructions") == 0) {
            o->instructions = false;
        } else if (strcmp(a, "--filter") == 0 && has_value) {
            o->filter = argv[++i];
        } else if (strcmp(a, CHILD_FLAG) == 0 && has_value) {
            o->child = argv[++i];
        } else if (strcmp(a, "--reps") == 0 && has_value) {
            char *end;
            long reps = strtol(argv[++i], &end, 10);
            if (*end || reps < 1 || reps > MAX_REPS)
                return usage("--reps must be 1 to 101, not", argv[i]);
            o->reps = (int)reps;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s %s\nprints one JSON line per figure; see bench/README.md\n", prog,
                   USAGE);
            return -1;
        } else {
            return usage("unknown or incomplete option", a);
        }
    }
    return 0;
}

int bench_main(int argc, char **argv, const struct bench_figure *figures, size_t count)
{
    return bench_main_commands(argc, argv, figures, count, NULL, 0);
}

int bench_main_commands(int argc, char **argv, const struct bench_figure *figures, size_t count,
                        const struct bench_command *commands, size_t n_commands)
{
    if (argc > 2 && strcmp(argv[1], RSS_FLAG) == 0)
        rss_child(argv + 2);
    if (argc > 0) {
        const char *slash = strrchr(argv[0], '/');
        prog = slash ? slash + 1 : argv[0];
    }
    struct options o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (o.child) {
        for (size_t i = 0; i < count; i++)
            if (strcmp(figures[i].name, o.child) == 0) {
                run_instrumented(&figures[i]);
                return 0;
            }
        return usage("no figure named", o.child);
    }
    bool matched = false, failed = false, no_valgrind = !o.instructions || o.smoke;
    for (size_t i = 0; i < count; i++) {
        const struct bench_figure *f = &figures[i];
        if (o.filter && !strstr(f->name, o.filter))
            continue;
        matched = true;
        uint64_t n = o.smoke ? f->smoke_n : f->n;
        double ns = median_ns(f, n, o.smoke ? 1 : o.reps, !o.smoke);
        double instr = no_valgrind ? -1.0 : callgrind_per_op(f, &no_valgrind);
        print_line(f, n, ns, instr);
    }
    for (size_t i = 0; i < n_commands; i++) {
        const struct bench_command *c = &commands[i];
        if (o.filter && !strstr(c->name, o.filter))
            continue;
        matched = true;
        double wall_s, peak_mb, instr;
        measure_command(c, &o, &no_valgrind, &wall_s, &peak_mb, &instr);
        print_command_line(c, wall_s, peak_mb, instr);
        failed |= wall_s < 0;
    }
    if (!matched)
        return usage("no figure matches", o.filter ? o.filter : "");
    return failed ? 4 : 0;
}
