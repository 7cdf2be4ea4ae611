/*
 * The progress line; see progress.h. One thread sleeps on a condition variable (monotonic
 * clock) between redraws, so stopping it is immediate.
 */
#include "cli/progress.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"

#define REDRAW_S 0.5    /* terminal */
#define LOG_EVERY_S 5.0 /* --progress into a file or pipe */

struct cli_progress {
    const char *what;
    cli_progress_read_fn read;
    void *ctx;
    bool tty;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stop;
    double start_s;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "12 s", "3 min 20 s", "1 h 05 min". */
static void duration_text(double s, char *out, size_t size)
{
    long t = (long)(s + 0.5);
    if (t < 60)
        snprintf(out, size, "%ld s", t);
    else if (t < 3600)
        snprintf(out, size, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf(out, size, "%ld h %02ld min", t / 3600, t / 60 % 60);
}

static void draw(const struct cli_progress *p)
{
    struct cli_progress_state st = {0};
    p->read(p->ctx, &st);
    double elapsed = now_s() - p->start_s;
    char line[256], took[32], left[32];
    int n = snprintf(line, sizeof line, "libra %s: ", p->what);
    if (st.cells_total > 0)
        n += snprintf(line + n, sizeof line - (size_t)n, "cells %lld/%lld, ", st.cells_done,
                      st.cells_total);
    duration_text(elapsed, took, sizeof took);
    if (st.total > 0)
        n += snprintf(line + n, sizeof line - (size_t)n, "%lld/%lld %s (%.0f%%)", st.done, st.total,
                      st.unit, 100.0 * (double)st.done / (double)st.total);
    else
        n += snprintf(line + n, sizeof line - (size_t)n, "%lld %s", st.done, st.unit);
    n += snprintf(line + n, sizeof line - (size_t)n, ", %s", took);
    if (st.done > 0 && st.total > st.done) {
        duration_text(elapsed * (double)(st.total - st.done) / (double)st.done, left, sizeof left);
        snprintf(line + n, sizeof line - (size_t)n, ", about %s left", left);
    }
    fprintf(stderr, p->tty ? "\r%s\033[K" : "%s\n", line);
    fflush(stderr);
}

static void *loop(void *arg)
{
    struct cli_progress *p = arg;
    double every = p->tty ? REDRAW_S : LOG_EVERY_S;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double t = (double)ts.tv_nsec * 1e-9 + every;
        ts.tv_sec += (time_t)t;
        ts.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        pthread_cond_timedwait(&p->wake, &p->mu, &ts);
        if (!p->stop)
            draw(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct cli_progress *cli_progress_start(const char *what, cli_progress_read_fn read, void *ctx,
                                        bool force)
{
    bool tty = isatty(STDERR_FILENO);
    if (!tty && !force)
        return NULL;
    struct cli_progress *p = xcalloc(1, sizeof *p);
    *p = (struct cli_progress){.what = what, .read = read, .ctx = ctx, .tty = tty};
    p->start_s = now_s();
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&p->thread, NULL, loop, p) != 0) { /* no display, the work goes on */
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

void cli_progress_stop(struct cli_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    if (p->tty)
        fputs("\r\033[K", stderr);
    else
        draw(p); /* the final count */
    fflush(stderr);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
