/*
 * The durable state's database and its commit worker (store.h).
 *
 * Why one worker and group commits: an fsync takes milliseconds, and the loop proxies
 * thousands of turns a second; committing on the loop would stall every client for each
 * write. With synchronous=FULL in WAL mode a commit is one fsync of the log, so pacing commits
 * at GW_STORE_WINDOW_S bounds the disk to 20 fsyncs a second whatever the traffic, and bounds
 * how long a durable call waits to one window plus a commit.
 *
 * The hand-over: the worker sets collect_asked and activates collect_ev; the loop runs the
 * collect function (which serialises its dirty state into the open batch) and moves the open
 * batch to `handoff`; the worker takes it, commits it, and queues a result that done_ev makes
 * the loop read. A failed batch stays with the worker (`retry`) and is committed ahead of the
 * next one, so batches reach the disk in the order they were made.
 */
#include "server/store.h"

#include <errno.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "libra/libra.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/vec.h"

enum op_kind { OP_PUT, OP_DEL, OP_CLEAR };

struct op {
    enum gw_store_table table;
    enum op_kind kind;
    char *key;
    int64_t num;
    char *body;
};

struct batch {
    VEC(struct op) ops;
    uint64_t number;       /* batches are numbered in the order they are made, from 1 */
    int sync_fd;           /* a file synced before the commit (gw_store_sync); -1: none */
    const char *sync_name; /* what it is, for the error */
};

struct result {
    uint64_t number; /* the last batch it covers */
    bool ok;
    char err[256];
    int64_t journal_rows, last_seq; /* journal appends it committed, the largest seq */
    double ms;
};

struct waiter {
    gw_store_done_fn fn;
    void *arg;
    uint64_t number; /* the batch it waits for */
};

struct gw_store {
    char *dir;
    sqlite3 *db;
    int lock_fd;
    sqlite3_stmt *put[GW_STORE_TABLES], *del[GW_STORE_TABLES], *clear[GW_STORE_TABLES];

    /* the loop's */
    struct event *collect_ev, *done_ev;
    gw_store_collect_fn collect;
    void *ctx;
    struct batch *open;
    bool kicked;
    VEC(struct waiter) waiters;
    char failing[256]; /* "" while commits succeed */
    struct gw_store_stats stats;

    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, wanted, collect_asked, stopping;
    struct batch *handoff;
    struct batch *retry; /* a failed batch the worker left at its end */
    VEC(struct result) results;
};

/* The SQL of each table: put (?1 key, ?2 num, ?3 body), delete, read. A put replaces the row
 * of its key, so a batch committed again after a commit whose outcome was unknown is harmless. */
static const struct {
    const char *name, *put, *del, *read;
} sql[GW_STORE_TABLES] = {
    [GW_STORE_META] = {"meta", "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?3)",
                       "DELETE FROM meta WHERE key = ?1",
                       "SELECT key, 0, value FROM meta ORDER BY key"},
    [GW_STORE_VERSIONS] = {"versions",
                           "INSERT OR REPLACE INTO versions(version, step) VALUES(?1, ?2)",
                           "DELETE FROM versions WHERE version = ?1",
                           "SELECT version, step, NULL FROM versions ORDER BY step, rowid"},
    [GW_STORE_ENGINES] = {"engines",
                          "INSERT OR REPLACE INTO engines(id, url, body) VALUES(?2, ?1, ?3)",
                          "DELETE FROM engines WHERE id = ?2",
                          "SELECT url, id, body FROM engines ORDER BY id"},
    [GW_STORE_TRAJS] = {"trajectories",
                        "INSERT OR REPLACE INTO trajectories(id, body) VALUES(?1, ?3)",
                        "DELETE FROM trajectories WHERE id = ?1",
                        "SELECT id, 0, body FROM trajectories ORDER BY rowid"},
    [GW_STORE_JOURNAL] = {"journal",
                          "INSERT OR REPLACE INTO journal(seq, kind, body) VALUES(?2, ?1, ?3)",
                          NULL, /* append-only */
                          "SELECT kind, seq, body FROM journal ORDER BY seq"},
};

static const char schema_sql[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE versions(version TEXT PRIMARY KEY, step INTEGER NOT NULL);"
    "CREATE TABLE engines(id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, body TEXT NOT NULL);"
    "CREATE TABLE trajectories(id TEXT PRIMARY KEY, body TEXT NOT NULL);"
    "CREATE TABLE journal(seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, body TEXT NOT NULL);";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- batches -------------------------------------------------------------------------------- */

static struct batch *batch_new(uint64_t number)
{
    struct batch *b = xcalloc(1, sizeof *b);
    b->number = number;
    b->sync_fd = -1;
    return b;
}

static void batch_free(struct batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->ops.n; i++) {
        free(b->ops.v[i].key);
        free(b->ops.v[i].body);
    }
    vec_free(&b->ops);
    free(b);
}

/* Puts the ops of first before those of then, which takes them; frees first. */
static void batch_prepend(struct batch *then, struct batch *first)
{
    if (then->sync_fd < 0) { /* first's file has not been synced either */
        then->sync_fd = first->sync_fd;
        then->sync_name = first->sync_name;
    }
    if (first->ops.n == 0) {
        batch_free(first);
        return;
    }
    vec_reserve(&then->ops, then->ops.n + first->ops.n);
    memmove(then->ops.v + first->ops.n, then->ops.v, then->ops.n * sizeof *then->ops.v);
    memcpy(then->ops.v, first->ops.v, first->ops.n * sizeof *first->ops.v);
    then->ops.n += first->ops.n;
    first->ops.n = 0;
    batch_free(first);
}

static void add_op(struct gw_store *st, struct op op)
{
    vec_push(&st->open->ops, op);
    gw_store_kick(st);
}

void gw_store_put(struct gw_store *st, enum gw_store_table t, const char *key, int64_t num,
                  char *body)
{
    add_op(st, (struct op){t, OP_PUT, key ? xstrdup(key) : NULL, num, body});
}

void gw_store_del(struct gw_store *st, enum gw_store_table t, const char *key, int64_t num)
{
    add_op(st, (struct op){t, OP_DEL, key ? xstrdup(key) : NULL, num, NULL});
}

void gw_store_clear(struct gw_store *st, enum gw_store_table t)
{
    add_op(st, (struct op){t, OP_CLEAR, NULL, 0, NULL});
}

int64_t gw_store_journal(struct gw_store *st, const char *kind, char *body)
{
    int64_t seq = st->stats.next_seq++;
    add_op(st, (struct op){GW_STORE_JOURNAL, OP_PUT, xstrdup(kind), seq, body});
    return seq;
}

void gw_store_sync(struct gw_store *st, int fd, const char *name)
{
    st->open->sync_fd = fd;
    st->open->sync_name = name;
    gw_store_kick(st);
}

void gw_store_kick(struct gw_store *st)
{
    if (st->kicked)
        return;
    st->kicked = true;
    pthread_mutex_lock(&st->mu);
    st->wanted = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

void gw_store_wait(struct gw_store *st, gw_store_done_fn fn, void *arg)
{
    vec_push(&st->waiters, ((struct waiter){fn, arg, st->open->number}));
    gw_store_kick(st);
}

const char *gw_store_failing(const struct gw_store *st)
{
    return st->failing[0] ? st->failing : NULL;
}

void gw_store_stats(const struct gw_store *st, struct gw_store_stats *out)
{
    *out = st->stats;
}

const char *gw_store_dir(const struct gw_store *st)
{
    return st->dir;
}

/* ---- committing ----------------------------------------------------------------------------- */

static int exec_op(struct gw_store *st, const struct op *op)
{
    sqlite3_stmt *s = op->kind == OP_PUT   ? st->put[op->table]
                      : op->kind == OP_DEL ? st->del[op->table]
                                           : st->clear[op->table];
    int n = sqlite3_bind_parameter_count(s), rc = SQLITE_OK;
    if (n >= 1)
        rc =
            op->key ? sqlite3_bind_text(s, 1, op->key, -1, SQLITE_STATIC) : sqlite3_bind_null(s, 1);
    if (rc == SQLITE_OK && n >= 2)
        rc = sqlite3_bind_int64(s, 2, op->num);
    if (rc == SQLITE_OK && n >= 3)
        rc = op->body ? sqlite3_bind_text(s, 3, op->body, -1, SQLITE_STATIC)
                      : sqlite3_bind_null(s, 3);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Commits b as one transaction into *r, its file synced first. */
static void commit(struct gw_store *st, const struct batch *b, struct result *r)
{
    double t0 = now_s();
    *r = (struct result){.number = b->number, .ok = true};
    if (b->sync_fd >= 0 && fdatasync(b->sync_fd) != 0) {
        r->ok = false;
        snprintf(r->err, sizeof r->err, "cannot sync %s: %s", b->sync_name, error_strerror(errno));
        r->ms = (now_s() - t0) * 1e3;
        return;
    }
    int rc = b->ops.n ? sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) : SQLITE_OK;
    for (size_t i = 0; rc == SQLITE_OK && i < b->ops.n; i++) {
        const struct op *op = &b->ops.v[i];
        rc = exec_op(st, op);
        if (op->table == GW_STORE_JOURNAL && op->kind == OP_PUT) {
            r->journal_rows++;
            r->last_seq = op->num > r->last_seq ? op->num : r->last_seq;
        }
    }
    if (rc == SQLITE_OK && b->ops.n)
        rc = sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        r->ok = false;
        snprintf(r->err, sizeof r->err, "%s", sqlite3_errmsg(st->db));
        if (!sqlite3_get_autocommit(st->db))
            sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    }
    r->ms = (now_s() - t0) * 1e3;
}

/* Waits on the condition until deadline_s or a stop; returns whether it was stopped. */
static bool pace(struct gw_store *st, double deadline_s)
{
    while (!st->stopping) {
        double left = deadline_s - now_s();
        if (left <= 0)
            return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double at = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + left;
        ts.tv_sec = (time_t)at;
        ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&st->cv, &st->mu, &ts);
    }
    return true;
}

/* Takes the batch the loop hands over (NULL when stopped first). Called and returns locked. */
static struct batch *take_batch(struct gw_store *st)
{
    st->wanted = false;
    st->collect_asked = true;
    pthread_mutex_unlock(&st->mu);
    event_active(st->collect_ev, EV_READ, 0);
    pthread_mutex_lock(&st->mu);
    while (!st->handoff && !st->stopping)
        pthread_cond_wait(&st->cv, &st->mu);
    struct batch *b = st->handoff;
    st->handoff = NULL;
    st->collect_asked = false;
    return b;
}

static void *worker(void *arg)
{
    struct gw_store *st = arg;
    struct batch *retry = NULL;
    double last_s = -INFINITY;
    pthread_mutex_lock(&st->mu);
    for (;;) {
        while (!st->wanted && !retry && !st->stopping)
            pthread_cond_wait(&st->cv, &st->mu);
        if (st->stopping || pace(st, last_s + (retry ? GW_STORE_RETRY_S : GW_STORE_WINDOW_S)))
            break;
        struct batch *b = take_batch(st);
        if (!b)
            break;
        pthread_mutex_unlock(&st->mu);
        if (retry)
            batch_prepend(b, retry);
        retry = NULL;
        last_s = now_s();
        struct result r;
        commit(st, b, &r);
        if (r.ok)
            batch_free(b);
        else
            retry = b;
        pthread_mutex_lock(&st->mu);
        vec_push(&st->results, r);
        pthread_mutex_unlock(&st->mu);
        event_active(st->done_ev, EV_READ, 0);
        pthread_mutex_lock(&st->mu);
    }
    st->retry = retry;
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* ---- the loop's side ------------------------------------------------------------------------ */

/* Collects, and returns the open batch; a new one opens. */
static struct batch *close_batch(struct gw_store *st)
{
    st->kicked = true; /* what the collect adds goes with this batch: no new round for it */
    if (st->collect)
        st->collect(st->ctx);
    struct batch *b = st->open;
    st->open = batch_new(b->number + 1);
    st->kicked = false;
    return b;
}

static void on_collect(evutil_socket_t fd, short what, void *arg)
{
    struct gw_store *st = arg;
    pthread_mutex_lock(&st->mu);
    bool asked = st->collect_asked && !st->handoff;
    pthread_mutex_unlock(&st->mu);
    if (!asked)
        return;
    struct batch *b = close_batch(st);
    pthread_mutex_lock(&st->mu);
    st->handoff = b;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* Tells the waiters of batches up to r's how it went, and keeps the counts; notes a change
 * between failing and succeeding on stderr when note. */
static void take_result(struct gw_store *st, const struct result *r, bool note)
{
    if (r->ok) {
        st->stats.commits++;
        st->stats.journal_rows += r->journal_rows;
        if (r->last_seq > st->stats.last_seq)
            st->stats.last_seq = r->last_seq;
        if (st->failing[0] && note)
            fprintf(stderr, "libra: serve: state: commits succeed again\n");
        st->failing[0] = '\0';
    } else {
        st->stats.failures++;
        if (!st->failing[0] && note)
            fprintf(stderr,
                    "libra: serve: state: commit failed: %s; calls that need it answer 503 and "
                    "the commit is retried every %g s\n",
                    r->err, GW_STORE_RETRY_S);
        snprintf(st->failing, sizeof st->failing, "%s", r->err);
    }
    st->stats.last_commit_ms = r->ms;
    size_t k = 0;
    while (k < st->waiters.n && st->waiters.v[k].number <= r->number)
        k++;
    if (k == 0)
        return;
    struct waiter *done = xmallocarray(k, sizeof *done);
    memcpy(done, st->waiters.v, k * sizeof *done);
    memmove(st->waiters.v, st->waiters.v + k, (st->waiters.n - k) * sizeof *done);
    st->waiters.n -= k;
    for (size_t i = 0; i < k; i++) /* a waiter may queue more: they wait for a later batch */
        done[i].fn(done[i].arg, r->ok);
    free(done);
}

static void take_results(struct gw_store *st)
{
    pthread_mutex_lock(&st->mu);
    struct result *v = st->results.v;
    size_t n = st->results.n;
    st->results.v = NULL;
    st->results.n = st->results.cap = 0;
    pthread_mutex_unlock(&st->mu);
    for (size_t i = 0; i < n; i++)
        take_result(st, &v[i], true);
    free(v);
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    take_results(arg);
}

int gw_store_start(struct gw_store *st, struct event_base *base, gw_store_collect_fn collect,
                   void *ctx, char *err, size_t err_size)
{
    st->collect = collect;
    st->ctx = ctx;
    st->collect_ev = event_new(base, -1, 0, on_collect, st);
    st->done_ev = event_new(base, -1, 0, on_done, st);
    int rc = st->collect_ev && st->done_ev ? pthread_create(&st->thread, NULL, worker, st) : ENOMEM;
    if (rc != 0) {
        snprintf(err, err_size, "state: cannot start its worker: %s", error_strerror(rc));
        return LIBRA_EIO;
    }
    st->started = true;
    return 0;
}

/* ---- opening and reading -------------------------------------------------------------------- */

static int fail_db(struct gw_store *st, int rc, char *err, size_t size, const char *what)
{
    snprintf(err, size, "state dir '%s': %s: %s", st->dir, what,
             st->db ? sqlite3_errmsg(st->db) : "out of memory");
    return rc;
}

/* The schema version in the database into *version; 0 when it has no table at all. */
static int schema_of(struct gw_store *st, int64_t *version, char *err, size_t size)
{
    sqlite3_stmt *s = NULL;
    *version = 0;
    int rc = sqlite3_prepare_v2(st->db, "SELECT count(*) FROM sqlite_master", -1, &s, NULL);
    if (rc != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_finalize(s);
        return fail_db(st, LIBRA_EINVAL, err, size, GW_STORE_FILE);
    }
    int64_t tables = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (tables == 0)
        return 0;
    rc = sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &s,
                            NULL);
    const char *v = rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW
                        ? (const char *)sqlite3_column_text(s, 0)
                        : NULL;
    char *end = NULL;
    long long n = v ? strtoll(v, &end, 10) : 0;
    bool ok = v && end != v && !*end && n > 0;
    if (!v)
        snprintf(err, size, "state dir '%s': %s is not a libra state database (no schema_version)",
                 st->dir, GW_STORE_FILE);
    else if (!ok)
        snprintf(err, size,
                 "state dir '%s': meta.schema_version: '%.40s' is not a schema version (a whole "
                 "number from 1)",
                 st->dir, v);
    sqlite3_finalize(s);
    if (!ok)
        return LIBRA_EINVAL;
    *version = n;
    return 0;
}

static int create_schema(struct gw_store *st, char *err, size_t size)
{
    char text[64];
    snprintf(text, sizeof text, "%d", GW_STORE_SCHEMA);
    char *sql_text = sqlite3_mprintf(
        "BEGIN; %s INSERT INTO meta VALUES('schema_version', %Q); COMMIT;", schema_sql, text);
    int rc = sqlite3_exec(st->db, sql_text, NULL, NULL, NULL);
    sqlite3_free(sql_text);
    return rc == SQLITE_OK ? 0 : fail_db(st, LIBRA_EIO, err, size, "cannot create the tables");
}

static int prepare_all(struct gw_store *st, char *err, size_t size)
{
    for (int t = 0; t < GW_STORE_TABLES; t++) {
        char clear[64];
        snprintf(clear, sizeof clear, "DELETE FROM %s", sql[t].name);
        if (sqlite3_prepare_v2(st->db, sql[t].put, -1, &st->put[t], NULL) != SQLITE_OK ||
            (sql[t].del &&
             sqlite3_prepare_v2(st->db, sql[t].del, -1, &st->del[t], NULL) != SQLITE_OK) ||
            sqlite3_prepare_v2(st->db, clear, -1, &st->clear[t], NULL) != SQLITE_OK)
            return fail_db(st, LIBRA_EINVAL, err, size, "unexpected tables");
    }
    return 0;
}

/* The journal's row count and the sequence after its last row. Its sequences must run from 1
 * without a hole: a row lost would go unnoticed by the replay, and a last sequence near
 * INT64_MAX could not be counted on. */
static int journal_counts(struct gw_store *st, char *err, size_t size)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(
        st->db, "SELECT count(*), coalesce(min(seq), 1), coalesce(max(seq), 0) FROM journal", -1,
        &s, NULL);
    if (rc != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_finalize(s);
        return fail_db(st, LIBRA_EIO, err, size, "cannot read the journal");
    }
    int64_t rows = sqlite3_column_int64(s, 0), first = sqlite3_column_int64(s, 1),
            last = sqlite3_column_int64(s, 2);
    sqlite3_finalize(s);
    if (first != 1 || last != rows) {
        snprintf(err, size,
                 "state dir '%s': journal: %lld rows with seq from %lld to %lld: seq counts from "
                 "1 without holes",
                 st->dir, (long long)rows, (long long)first, (long long)last);
        return LIBRA_EINVAL;
    }
    st->stats.journal_rows = rows;
    st->stats.last_seq = last;
    st->stats.next_seq = last + 1;
    return 0;
}

/* The directory (made when absent) and its lock. */
static int lock_dir(struct gw_store *st, char *err, size_t size)
{
    if (mkdir(st->dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, size, "state dir '%s': cannot create it: %s", st->dir, error_strerror(errno));
        return LIBRA_EIO;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", st->dir, GW_STORE_LOCK);
    st->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (st->lock_fd < 0) {
        snprintf(err, size, "state dir '%s': cannot open %s: %s", st->dir, GW_STORE_LOCK,
                 error_strerror(errno));
        return LIBRA_EIO;
    }
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(st->lock_fd, F_SETLK, &lk) != 0) {
        bool held = errno == EACCES || errno == EAGAIN;
        snprintf(err, size, "state dir '%s': %s", st->dir,
                 held ? "in use by another libra serve" : error_strerror(errno));
        return LIBRA_EIO;
    }
    return 0;
}

static int open_db(struct gw_store *st, char *err, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", st->dir, GW_STORE_FILE);
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK)
        return fail_db(st, LIBRA_EIO, err, size, "cannot open " GW_STORE_FILE);
    if (sqlite3_db_readonly(st->db, "main") == 1) { /* SQLite opens such a file read-only */
        snprintf(err, size, "state dir '%s': %s is read-only (this user cannot write it)", st->dir,
                 GW_STORE_FILE);
        return LIBRA_EIO;
    }
    sqlite3_busy_timeout(st->db, 5000);
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode=WAL", -1, &s, NULL);
    const char *mode = rc == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW
                           ? (const char *)sqlite3_column_text(s, 0)
                           : NULL;
    bool wal = mode && strcmp(mode, "wal") == 0;
    sqlite3_finalize(s);
    if (!wal)
        return fail_db(st, LIBRA_EINVAL, err, size, GW_STORE_FILE);
    if (sqlite3_exec(st->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK)
        return fail_db(st, LIBRA_EIO, err, size, GW_STORE_FILE);
    return 0;
}

static void store_free(struct gw_store *st)
{
    for (int t = 0; t < GW_STORE_TABLES; t++) {
        sqlite3_finalize(st->put[t]);
        sqlite3_finalize(st->del[t]);
        sqlite3_finalize(st->clear[t]);
    }
    sqlite3_close(st->db);
    if (st->lock_fd >= 0)
        close(st->lock_fd); /* and with it the lock */
    if (st->collect_ev)
        event_free(st->collect_ev);
    if (st->done_ev)
        event_free(st->done_ev);
    batch_free(st->open);
    batch_free(st->retry);
    vec_free(&st->waiters);
    vec_free(&st->results);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st->dir);
    free(st);
}

int gw_store_open(struct gw_store **out, const char *dir, char *err, size_t err_size)
{
    struct gw_store *st = xcalloc(1, sizeof *st);
    st->dir = xstrdup(dir);
    st->lock_fd = -1;
    st->open = batch_new(1);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    int64_t version = 0;
    int rc = lock_dir(st, err, err_size);
    if (rc == 0)
        rc = open_db(st, err, err_size);
    if (rc == 0)
        rc = schema_of(st, &version, err, err_size);
    if (rc == 0 && version == 0)
        rc = create_schema(st, err, err_size);
    else if (rc == 0 && version != GW_STORE_SCHEMA) {
        snprintf(err, err_size,
                 "state dir '%s': schema version %lld, this libra reads version %d (start on an "
                 "empty --state-dir, or run the libra that wrote it)",
                 dir, (long long)version, GW_STORE_SCHEMA);
        rc = LIBRA_EINVAL;
    }
    if (rc == 0)
        rc = prepare_all(st, err, err_size);
    if (rc == 0)
        rc = journal_counts(st, err, err_size);
    if (rc != 0) {
        store_free(st);
        st = NULL;
    }
    *out = st;
    return rc;
}

int gw_store_read(struct gw_store *st, enum gw_store_table t, gw_store_row_fn fn, void *ctx,
                  char *err, size_t err_size)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql[t].read, -1, &s, NULL) != SQLITE_OK)
        return fail_db(st, LIBRA_EIO, err, err_size, sql[t].name);
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(s)) == SQLITE_ROW) {
        struct gw_store_row row = {
            .key = (const char *)sqlite3_column_text(s, 0),
            .num = sqlite3_column_int64(s, 1),
            .body = (const char *)sqlite3_column_text(s, 2),
            .len = (size_t)sqlite3_column_bytes(s, 2),
        };
        rc = fn(ctx, &row);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = fail_db(st, LIBRA_EIO, err, err_size, sql[t].name);
    sqlite3_finalize(s);
    return rc;
}

/* ---- closing -------------------------------------------------------------------------------- */

int gw_store_close(struct gw_store *st, char *err, size_t err_size)
{
    if (!st)
        return 0;
    if (!st->started) { /* a start that failed: nothing of it is written */
        store_free(st);
        return 0;
    }
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->thread, NULL);
    take_results(st);
    struct batch *b = close_batch(st);
    if (st->retry)
        batch_prepend(b, st->retry);
    st->retry = NULL;
    struct result r;
    commit(st, b, &r);
    batch_free(b);
    take_result(st, &r, false);
    int rc = 0;
    if (!r.ok) {
        snprintf(err, err_size, "state dir '%s': the last commit failed: %s", st->dir, r.err);
        rc = LIBRA_EIO;
    }
    store_free(st);
    return rc;
}
