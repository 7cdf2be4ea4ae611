/*
 * A progress line on stderr for commands that can run longer than a couple of seconds.
 *
 * The work advances counters of its own (atomics, from any thread); a thread here reads them
 * through the command's callback twice a second and redraws one line: what is done of the
 * total, the elapsed time and an estimate of the time left. On a terminal the line is
 * rewritten in place and erased at the end; elsewhere nothing is printed unless the user asked
 * (--progress), and then one line every few seconds. Never on stdout, so output stays clean.
 */
#ifndef CLI_PROGRESS_H
#define CLI_PROGRESS_H

#include <stdbool.h>

/* What the line shows: done of total units ("steps"; just done while total is 0, with no
 * estimate), and, when cells_total > 0, a sweep's cells done of cells_total. A total may still
 * grow; the estimate follows it. */
struct cli_progress_state {
    const char *unit; /* static storage */
    long long done, total;
    long long cells_done, cells_total;
};

typedef void (*cli_progress_read_fn)(void *ctx, struct cli_progress_state *out);

struct cli_progress;

/*
 * Starts the display for command `what` (static storage) when stderr is a terminal or force
 * is set; returns NULL (and shows nothing) otherwise. read is called from the display's thread.
 */
struct cli_progress *cli_progress_start(const char *what, cli_progress_read_fn read, void *ctx,
                                        bool force);

/* Stops the display (erasing the line on a terminal); p may be NULL. */
void cli_progress_stop(struct cli_progress *p);

#endif
