/*
 * The worker pool; see workers.h. Open loops form a stack (the newest on top) under one mutex;
 * a free helper takes the next index of the topmost loop that has one; a thread waiting for its
 * own loop takes only from it and from loops above it. A loop lives on the
 * stack frame of workers_for, which returns only once every index has finished, so nothing is
 * allocated per loop.
 */
#include "util/workers.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/alloc.h"

struct loop {
    void (*fn)(void *arg, size_t i);
    void *arg;
    size_t n;
    size_t next;       /* next index to hand out */
    size_t finished;   /* calls returned */
    struct loop *down; /* the loop opened before this one */
};

struct workers {
    pthread_mutex_t mu;
    pthread_cond_t changed; /* an index was published or a call finished, or stop */
    struct loop *top;       /* open loops, newest first */
    pthread_t *helpers;
    int n_helpers;
    bool stop;
};

/* The topmost loop above floor (NULL: any) with an index left, or NULL. With the mutex. */
static struct loop *open_loop(const struct workers *w, const struct loop *floor)
{
    struct loop *l = w->top;
    while (l != floor && l->next == l->n)
        l = l->down;
    return l != floor ? l : NULL;
}

/* Runs the next index of l (the mutex held on entry and on return). */
static void run_one(struct workers *w, struct loop *l)
{
    size_t i = l->next++;
    pthread_mutex_unlock(&w->mu);
    l->fn(l->arg, i);
    pthread_mutex_lock(&w->mu);
    l->finished++;
    pthread_cond_broadcast(&w->changed);
}

static void *helper(void *p)
{
    struct workers *w = p;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct loop *l = open_loop(w, NULL);
        if (l)
            run_one(w, l);
        else
            pthread_cond_wait(&w->changed, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

struct workers *workers_new(int threads)
{
    struct workers *w = xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->changed, NULL);
    int n = threads > 1 ? threads - 1 : 0;
    w->helpers = xcalloc((size_t)(n ? n : 1), sizeof *w->helpers);
    for (; w->n_helpers < n; w->n_helpers++)
        if (pthread_create(&w->helpers[w->n_helpers], NULL, helper, w) != 0) {
            fprintf(stderr, "libra: cannot start a worker thread\n");
            abort();
        }
    return w;
}

void workers_free(struct workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n_helpers; i++)
        pthread_join(w->helpers[i], NULL);
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->mu);
    free(w->helpers);
    free(w);
}

int workers_threads(const struct workers *w)
{
    return w ? w->n_helpers + 1 : 1;
}

/* Unlinks l, which every index has finished, from the stack. */
static void close_loop(struct workers *w, struct loop *l)
{
    struct loop **at = &w->top;
    while (*at != l)
        at = &(*at)->down;
    *at = l->down;
}

void workers_for(struct workers *w, size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
    if (!w || w->n_helpers == 0 || n <= 1) {
        for (size_t i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    struct loop l = {.fn = fn, .arg = arg, .n = n};
    pthread_mutex_lock(&w->mu);
    l.down = w->top;
    /* cppcheck-suppress autoVariables ; l leaves the stack (close_loop) before it returns */
    w->top = &l;
    pthread_cond_broadcast(&w->changed);
    while (l.finished < l.n) {
        /* its own indices, else a newer loop's (never an older one's: that could be a long
         * run of the loop this one was started from) */
        struct loop *o = l.next < l.n ? &l : open_loop(w, &l);
        if (o)
            run_one(w, o);
        else
            pthread_cond_wait(&w->changed, &w->mu);
    }
    close_loop(w, &l);
    pthread_mutex_unlock(&w->mu);
}

int workers_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
