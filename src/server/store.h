/*
 * The gateway's durable state: one SQLite database in WAL mode in the state directory
 * (`libra serve --state-dir DIR`), written in group commits by one worker thread, so the event
 * loop never waits on the disk.
 *
 * The loop queues row operations (a put, a delete, a journal append) into the open batch and
 * kicks the worker. The worker commits at most once per GW_STORE_WINDOW_S (at once when it has
 * been idle that long): it asks the loop to collect (the loop then adds whatever it keeps
 * dirty, serialised on its own thread, and hands the batch over under a mutex), commits the
 * batch as one transaction, and posts the result back with event_active. A caller that must
 * not answer before its change is on disk waits for the batch it wrote into (gw_store_wait).
 * A failed commit (a full disk) is kept and retried first, every GW_STORE_RETRY_S, so the
 * journal never has a hole; waiters of the failed batch hear it failed, and gw_store_failing
 * says so until a commit succeeds.
 *
 * Tables (schema version GW_STORE_SCHEMA, docs/serve.md "Durable state"); every row is read and
 * written as the uniform struct gw_store_row:
 *   meta          key (TEXT), value (body): scalars of the gateway; 'schema_version'
 *   versions      version (key), step (num): every weight version the fleet had, and its step
 *   engines       id (num), url (key), body: the registry
 *   trajectories  id (key), body: live trajectories' routing state
 *   journal       seq (num), kind (key), body: append-only, what the gateway learnt from
 *
 * Threading: gw_store_open, gw_store_read and everything after gw_store_start are called on
 * the loop's thread (the base's, which must be made after evthread_use_pthreads()); the worker
 * touches only the connection and the batches handed to it.
 */
#ifndef SERVER_STORE_H
#define SERVER_STORE_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_STORE_SCHEMA 1                   /* the schema version this code reads and writes */
#define GW_STORE_FILE "libra-state.sqlite3" /* the database in the state directory */
#define GW_STORE_LOCK "libra-state.lock"    /* held (an fcntl lock) by the gateway using it */
#define GW_STORE_WINDOW_S 0.05              /* commits start at most this often */
#define GW_STORE_RETRY_S 1.0                /* ... and this often while they fail */

enum gw_store_table {
    GW_STORE_META,
    GW_STORE_VERSIONS,
    GW_STORE_ENGINES,
    GW_STORE_TRAJS,
    GW_STORE_JOURNAL,
};
#define GW_STORE_TABLES 5

/* One row: which columns a table uses is in the header comment; the rest are NULL / 0. */
struct gw_store_row {
    const char *key;
    int64_t num;
    const char *body;
    size_t len; /* bytes of body */
};

/* Counts for GET /libra/v1/state, as of the last result the loop has seen. */
struct gw_store_stats {
    int64_t journal_rows;  /* rows in the journal, committed */
    int64_t last_seq;      /* the last committed journal sequence; 0: none */
    int64_t next_seq;      /* the sequence the next journal append gets */
    uint64_t commits;      /* transactions committed since start */
    uint64_t failures;     /* commits failed since start */
    double last_commit_ms; /* how long the last commit took, milliseconds */
};

struct gw_store;

/*
 * Opens (creating when absent) the state directory dir and its database, takes its lock and
 * checks the schema. Returns 0; LIBRA_EINVAL when the database is not a libra state database or
 * has another schema version (err says the version found and the one expected); LIBRA_EIO when
 * the directory, the lock or the file cannot be used (err says why). *out is NULL on error.
 */
int gw_store_open(struct gw_store **out, const char *dir, char *err, size_t err_size);

/* Calls fn with every row of table t in order (meta by key, versions by step, engines by id,
 * trajectories in the order written, the journal by seq) until fn returns nonzero, which is
 * returned. Before gw_store_start only. Returns 0, fn's value, or LIBRA_EIO with err. */
typedef int (*gw_store_row_fn)(void *ctx, const struct gw_store_row *row);
int gw_store_read(struct gw_store *st, enum gw_store_table t, gw_store_row_fn fn, void *ctx,
                  char *err, size_t err_size);

/* The loop's collect step: adds what it keeps dirty with gw_store_put/del (never waits). */
typedef void (*gw_store_collect_fn)(void *ctx);

/* Starts the worker; collect(ctx) runs on base's loop before each commit. Returns 0, or
 * LIBRA_EIO with err when the thread or events cannot be made. */
int gw_store_start(struct gw_store *st, struct event_base *base, gw_store_collect_fn collect,
                   void *ctx, char *err, size_t err_size);

/* Queues a put of body (owned from now on; may be NULL for versions) as row key/num of t,
 * replacing the row of that key; a delete of the row of t named by key (meta, versions,
 * trajectories) or num (engines) — never of the journal; the deletion of every row of t.
 * Committed in the order queued. */
void gw_store_put(struct gw_store *st, enum gw_store_table t, const char *key, int64_t num,
                  char *body);
void gw_store_del(struct gw_store *st, enum gw_store_table t, const char *key, int64_t num);
void gw_store_clear(struct gw_store *st, enum gw_store_table t);

/* Appends a journal record of kind with body (owned); returns its sequence number. */
int64_t gw_store_journal(struct gw_store *st, const char *kind, char *body);

/* There is something to collect: the worker commits soon. */
void gw_store_kick(struct gw_store *st);

/*
 * The open batch's commit first syncs fd (fdatasync), so what was written to it before is on
 * disk once the batch is: the capture's lines, acknowledged by the commit that journals their
 * trajectories. A failed sync fails the commit (kept and retried, as any); name says which
 * file in the error ("--capture 'FILE'"). fd and name must stay valid until gw_store_close.
 */
void gw_store_sync(struct gw_store *st, int fd, const char *name);

/* Calls fn(arg, ok) on the loop once the open batch (and what the next collect adds) is
 * committed (ok) or its commit failed, or from gw_store_close. */
typedef void (*gw_store_done_fn)(void *arg, bool ok);
void gw_store_wait(struct gw_store *st, gw_store_done_fn fn, void *arg);

/* Why the last commit failed, or NULL while commits succeed. */
const char *gw_store_failing(const struct gw_store *st);

void gw_store_stats(const struct gw_store *st, struct gw_store_stats *out);

/* The state directory, as given. */
const char *gw_store_dir(const struct gw_store *st);

/*
 * Stops the worker, collects and commits what is left on the calling thread (the loop's, not
 * running any more), tells every waiter, closes the database and frees st (NULL: a no-op).
 * Before gw_store_start it only closes: what was queued is dropped. Returns 0, or LIBRA_EIO
 * with err when the last commit failed.
 */
int gw_store_close(struct gw_store *st, char *err, size_t err_size);

#endif
