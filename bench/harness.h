/*
 * Benchmark harness: each benchmark program (bench/bench_<name>.c) lists its figures and hands
 * them to bench_main, which prints one JSON line per figure (DESIGN.md "Benchmarks"):
 *
 *   {"input":..., "instructions":..., "n":..., "name":..., "unit":..., "value":...}
 *
 * value is wall-clock time on this machine (noisy on shared hosts); instructions is the
 * callgrind count of the measured region per operation (of the whole process for a command
 * figure, which also reports its peak resident memory), repeatable across runs and machines of
 * one architecture, so it is what a change is judged by. Nothing is asserted; ctest only
 * smoke-runs each program (--smoke) so that benchmarks keep building and running.
 *
 * Protocol per figure: setup (not measured), one warm-up run, then --reps timed runs
 * (CLOCK_MONOTONIC around run() only); value is the median. Instructions come from one more
 * run of the program under `valgrind --tool=callgrind --instr-atstart=no`, selecting the figure
 * with a hidden flag; that child brackets the same run() with CALLGRIND_START_INSTRUMENTATION
 * and CALLGRIND_STOP_INSTRUMENTATION, and the parent reads the "totals:" line of its output.
 * See bench/README.md.
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

enum bench_unit {
    BENCH_NS_PER_OP, /* "ns/op": median nanoseconds per operation */
    BENCH_OPS_PER_S  /* "op/s": operations per second at the median */
};

struct bench_figure {
    const char *name;  /* unique, e.g. "heap_push_pop" */
    const char *input; /* the named input, e.g. "1M events, times U[0, 1000) s, seed 1" */
    enum bench_unit unit;
    uint64_t n;       /* operations per run */
    uint64_t smoke_n; /* operations per run under --smoke */
    /* Builds the input for n operations, outside the measured region. May be NULL. */
    void *(*setup)(uint64_t n);
    /* The measured region: n operations on state. Returns a value computed from the work,
     * which the harness consumes so that the compiler cannot drop the work. */
    uint64_t (*run)(void *state, uint64_t n);
    /* Releases what setup built. May be NULL. */
    void (*teardown)(void *state);
};

/*
 * A whole program as a figure: its value is the median wall-clock seconds from spawn to exit
 * (unit "s", n 1), its line adds peak_rss_mb (the largest resident set of the timed runs, from
 * wait4), and its instructions are the whole process's under callgrind. The command must exit
 * 0; its output is discarded. A prepare command (building an input file, say) runs once before,
 * unmeasured.
 */
struct bench_command {
    const char *name;
    const char *input;
    const char *const *argv;       /* NULL-terminated */
    const char *const *smoke_argv; /* what --smoke runs instead */
    const char *const *prepare;    /* NULL: none */
    const char *const *smoke_prepare;
};

/*
 * Runs the figures selected by argv and prints their lines on stdout (diagnostics on stderr):
 *   --smoke             every figure once with smoke_n, no callgrind
 *   --filter SUBSTR     only figures whose name contains SUBSTR
 *   --reps N            timed runs per figure (default 5)
 *   --no-instructions   skip callgrind (instructions: null)
 * Returns the process exit code: 0, 2 on a usage error, or 4 when a command figure's command
 * failed.
 */
int bench_main(int argc, char **argv, const struct bench_figure *figures, size_t count);

/* bench_main with command figures after the others (the same flags select and size them). */
int bench_main_commands(int argc, char **argv, const struct bench_figure *figures, size_t count,
                        const struct bench_command *commands, size_t n_commands);

#endif
