/*
 * A fixed set of threads that run parallel-for loops: the simulator's independent runs (the
 * modes of an experiment, their tuning candidates, the cells of a sweep) on every core.
 *
 * Work is a loop body fn(arg, i) over i in [0, n): each call must touch only what index i owns
 * (its own result slot), so the outcome does not depend on how many threads ran it or in what
 * order. Loops nest: a call may start a loop of its own (a sweep cell tunes its modes, a mode
 * sweeps its candidates), whose indices any idle thread takes, the newest loop's first; a
 * thread waiting for its loop to finish runs indices of newer loops meanwhile, so nesting
 * cannot deadlock and a waiting thread does not idle while nested work is left. Within a loop
 * indices are handed out in increasing order, so a caller that puts its longest calls first
 * finishes soonest.
 *
 * The runs are coarse (a simulation, milliseconds to minutes), so indices are handed out under
 * one mutex. Thread-safe: any thread may start a loop.
 */
#ifndef UTIL_WORKERS_H
#define UTIL_WORKERS_H

#include <stddef.h>

struct workers;

/* A pool of threads in all (threads >= 1): threads - 1 helpers plus whichever thread starts a
 * loop. Aborts when a thread cannot be started. */
struct workers *workers_new(int threads);

/* Stops and joins the helpers (no loop may be running); w may be NULL. */
void workers_free(struct workers *w);

/* Threads of the pool; 1 for NULL. */
int workers_threads(const struct workers *w);

/* Calls fn(arg, i) for every i in [0, n) and returns when all have returned; serially on the
 * calling thread when w is NULL. */
void workers_for(struct workers *w, size_t n, void (*fn)(void *arg, size_t i), void *arg);

/* The machine's online processors (at least 1). */
int workers_cpus(void);

#endif
