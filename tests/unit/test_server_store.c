/* Tests of the gateway's durable state (src/server/store.c, record.c, restore.c): rows
 * round-trip through the worker's commits and a reopening, a failed commit is told to its
 * waiters and retried ahead of what follows, a file that cannot be synced fails its commit, an
 * unknown schema version is refused with both versions named, a journal replayed twice (and the
 * live learning it records) gives equal trees, a step whose count disagrees with the journal is
 * refused, a live trajectory's row keeps what the events call announced but not a turn in
 * flight, and rows out of the range their use needs are refused. */
#include "testutil.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/internal.h"
#include "spec/config.h"
#include "util/rng.h"

#define LAYOUT "tp1:2000,tp2:6000,tp4:40960"

/* A fresh state directory under the build tree. */
static const char *fresh_dir(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/test_server_store_%ld_%s", LIBRA_BINARY_DIR, (long)getpid(),
             name);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", buf);
    assert_int_equal(system(cmd), 0);
    return buf;
}

static struct gw_store *open_ok(const char *dir)
{
    struct gw_store *st = NULL;
    char err[512] = "";
    int rc = gw_store_open(&st, dir, err, sizeof err);
    if (rc != 0)
        fail_msg("open %s: %s", dir, err);
    return st;
}

/* ---- the worker ----------------------------------------------------------------------------- */

struct loop {
    struct event_base *base;
    int done, ok;
};

static void on_done(void *arg, bool ok)
{
    struct loop *l = arg;
    l->done++;
    l->ok += ok;
    event_base_loopbreak(l->base);
}

/* Runs the loop until the open batch is committed. */
static void commit_now(struct gw_store *st, struct loop *l)
{
    int before = l->done;
    gw_store_wait(st, on_done, l);
    while (l->done == before)
        event_base_loop(l->base, EVLOOP_NO_EXIT_ON_EMPTY | EVLOOP_ONCE);
}

static int collected;

static void collect(void *ctx)
{
    collected++;
    gw_store_put(ctx, GW_STORE_META, "collected", 0, strdup("yes"));
}

/* The rows of a table as "key|num|body;" text. */
static int append_row(void *ctx, const struct gw_store_row *row)
{
    char *buf = ctx;
    size_t n = strlen(buf);
    snprintf(buf + n, 4096 - n, "%s|%lld|%s;", row->key ? row->key : "", (long long)row->num,
             row->body ? row->body : "");
    return 0;
}

static void table_text(struct gw_store *st, enum gw_store_table t, char buf[4096])
{
    char err[256];
    buf[0] = '\0';
    assert_int_equal(gw_store_read(st, t, append_row, buf, err, sizeof err), 0);
}

static void test_rows_round_trip_through_the_worker(void **state)
{
    const char *dir = fresh_dir("round");
    struct loop l = {event_base_new(), 0, 0};
    struct gw_store *st = open_ok(dir);
    char err[256];
    assert_int_equal(gw_store_start(st, l.base, collect, st, err, sizeof err), 0);
    gw_store_put(st, GW_STORE_TRAJS, "libra:1", 0, strdup("{\"a\": 1}"));
    gw_store_put(st, GW_STORE_TRAJS, "libra:2", 0, strdup("{\"b\": 2}"));
    gw_store_put(st, GW_STORE_ENGINES, "http://e0", 0, strdup("{}"));
    gw_store_put(st, GW_STORE_VERSIONS, "v1", 3, NULL);
    assert_int_equal(gw_store_journal(st, "learn", strdup("{}")), 1);
    assert_int_equal(gw_store_journal(st, "step", strdup("{\"s\": 1}")), 2);
    commit_now(st, &l);
    assert_int_equal(l.ok, 1);
    gw_store_del(st, GW_STORE_TRAJS, "libra:1", 0);
    gw_store_put(st, GW_STORE_TRAJS, "libra:2", 0, strdup("{\"b\": 3}")); /* replaced */
    gw_store_clear(st, GW_STORE_ENGINES);
    gw_store_put(st, GW_STORE_ENGINES, "http://e1", 0, strdup("{\"x\": 1}"));
    commit_now(st, &l);
    assert_int_equal(l.ok, 2);
    assert_true(collected >= 2); /* each commit collected first */
    struct gw_store_stats s;
    gw_store_stats(st, &s);
    assert_int_equal(s.journal_rows, 2);
    assert_int_equal(s.last_seq, 2);
    assert_null(gw_store_failing(st));
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);

    st = open_ok(dir);
    char buf[4096];
    table_text(st, GW_STORE_TRAJS, buf);
    assert_string_equal(buf, "libra:2|0|{\"b\": 3};");
    table_text(st, GW_STORE_ENGINES, buf);
    assert_string_equal(buf, "http://e1|0|{\"x\": 1};");
    table_text(st, GW_STORE_VERSIONS, buf);
    assert_string_equal(buf, "v1|3|;");
    table_text(st, GW_STORE_JOURNAL, buf);
    assert_string_equal(buf, "learn|1|{};step|2|{\"s\": 1};");
    table_text(st, GW_STORE_META, buf);
    assert_string_equal(buf, "collected|0|yes;schema_version|0|1;");
    gw_store_stats(st, &s);
    assert_int_equal(s.next_seq, 3); /* appends continue the sequence */
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    event_base_free(l.base);
}

static void test_a_store_never_started_writes_nothing(void **state)
{
    const char *dir = fresh_dir("unstarted");
    struct gw_store *st = open_ok(dir);
    char err[256], buf[4096];
    gw_store_put(st, GW_STORE_TRAJS, "libra:1", 0, strdup("{}"));
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    st = open_ok(dir);
    table_text(st, GW_STORE_TRAJS, buf);
    assert_string_equal(buf, "");
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
}

static void exec_sql(const char *dir, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, GW_STORE_FILE);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, text, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_a_failed_commit_is_told_and_retried_first(void **state)
{
    const char *dir = fresh_dir("retry");
    struct loop l = {event_base_new(), 0, 0};
    struct gw_store *st = open_ok(dir);
    char err[256], buf[4096];
    assert_int_equal(gw_store_start(st, l.base, NULL, NULL, err, sizeof err), 0);
    exec_sql(dir, "DROP TABLE trajectories"); /* every commit that writes one fails */
    gw_store_journal(st, "learn", strdup("{}"));
    gw_store_put(st, GW_STORE_TRAJS, "libra:1", 0, strdup("{}"));
    commit_now(st, &l);
    assert_int_equal(l.ok, 0); /* the waiter hears it failed */
    assert_non_null(strstr(gw_store_failing(st), "no such table"));
    exec_sql(dir, "CREATE TABLE trajectories(id TEXT PRIMARY KEY, body TEXT NOT NULL)");
    gw_store_journal(st, "step", strdup("{}"));
    commit_now(st, &l); /* the failed batch goes first, with this one */
    assert_int_equal(l.ok, 1);
    assert_null(gw_store_failing(st));
    struct gw_store_stats s;
    gw_store_stats(st, &s);
    assert_int_equal(s.failures, 1);
    assert_int_equal(s.last_seq, 2);
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    st = open_ok(dir);
    table_text(st, GW_STORE_JOURNAL, buf);
    assert_string_equal(buf, "learn|1|{};step|2|{};"); /* in order, no hole */
    table_text(st, GW_STORE_TRAJS, buf);
    assert_string_equal(buf, "libra:1|0|{};");
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    event_base_free(l.base);
}

/* The capture's file is synced before the commit that acknowledges its lines: a commit waits
 * for the sync, and fails (told, and kept to retry) when the file cannot be synced, here a pipe,
 * which fdatasync refuses. */
static void test_a_file_that_cannot_be_synced_fails_the_commit(void **state)
{
    const char *dir = fresh_dir("sync");
    struct loop l = {event_base_new(), 0, 0};
    struct gw_store *st = open_ok(dir);
    char err[256], path[4200];
    snprintf(path, sizeof path, "%s/capture.jsonl", dir);
    FILE *file = fopen(path, "w");
    int fds[2];
    assert_non_null(file);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(gw_store_start(st, l.base, NULL, NULL, err, sizeof err), 0);
    gw_store_sync(st, fileno(file), "--capture");
    gw_store_journal(st, "learn", strdup("{}"));
    commit_now(st, &l);
    assert_int_equal(l.ok, 1);
    gw_store_sync(st, fds[1], "--capture");
    gw_store_journal(st, "learn", strdup("{}"));
    commit_now(st, &l);
    assert_int_equal(l.ok, 1); /* the waiter hears it failed */
    assert_string_equal(gw_store_failing(st), "cannot sync --capture: invalid argument");
    assert_int_equal(gw_store_close(st, err, sizeof err), LIBRA_EIO); /* its retry too */
    st = open_ok(dir);
    char buf[4096];
    table_text(st, GW_STORE_JOURNAL, buf);
    assert_string_equal(buf, "learn|1|{};"); /* the second is not on disk */
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    fclose(file);
    close(fds[0]);
    close(fds[1]);
    event_base_free(l.base);
}

/* ---- opening -------------------------------------------------------------------------------- */

static void test_an_unknown_schema_version_is_refused_naming_both(void **state)
{
    const char *dir = fresh_dir("schema");
    char err[512];
    assert_int_equal(gw_store_close(open_ok(dir), err, sizeof err), 0);
    exec_sql(dir, "UPDATE meta SET value = '7' WHERE key = 'schema_version'");
    struct gw_store *st = (void *)1;
    assert_int_equal(gw_store_open(&st, dir, err, sizeof err), LIBRA_EINVAL);
    assert_null(st);
    assert_non_null(strstr(err, "schema version 7, this libra reads version 1"));

    dir = fresh_dir("foreign");
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    exec_sql(dir, "CREATE TABLE other(x)");
    assert_int_equal(gw_store_open(&st, dir, err, sizeof err), LIBRA_EINVAL);
    assert_non_null(strstr(err, "not a libra state database"));

    dir = fresh_dir("garbage");
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && echo not a database > '%s/%s'", dir, dir,
             GW_STORE_FILE);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(gw_store_open(&st, dir, err, sizeof err), LIBRA_EINVAL);
    assert_non_null(strstr(err, "not a database"));
}

static void test_a_state_dir_in_use_is_refused(void **state)
{
    const char *dir = fresh_dir("lock");
    struct gw_store *st = open_ok(dir);
    pid_t pid = fork();
    if (pid == 0) { /* another process: the lock is per process */
        struct gw_store *other;
        char err[512];
        int rc = gw_store_open(&other, dir, err, sizeof err);
        _exit(rc == LIBRA_EIO && strstr(err, "in use by another libra serve") ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char err[256];
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
}

/* ---- the journal ---------------------------------------------------------------------------- */

static struct sched_router *router(void)
{
    struct spec_bucket_layout l;
    assert_int_equal(spec_bucket_parse(&l, LAYOUT, "test", NULL), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    struct spec_sched_config sc = cfg.sched;
    sc.policy = SCHED_CMLFQ;
    sc.rebuild_interval = 2; /* a rebuild every other step: the ticks count */
    struct sched_router *r;
    assert_int_equal(sched_router_from_config(&r, &sc, &l, NULL, NULL), 0);
    return r;
}

/* Random trajectory i: a prompt of 5, one to six turns, one or two returns between turns. */
static void random_rec(struct gw_learn_rec *rec, uint64_t i)
{
    static const char *const tools[] = {"bash", "search", "python"};
    struct rng r = rng_keyed(7, i, 0, 0);
    size_t turns = 1 + rng_uniform_int(&r, 6);
    memset(rec, 0, sizeof *rec);
    snprintf(rec->id, sizeof rec->id, "libra:%llu", (unsigned long long)i);
    rec->prompt = rng_uniform_int(&r, 5);
    rec->finish = rng_uniform_int(&r, 4) == 0 ? TRACE_FINISH_TRUNCATED : TRACE_FINISH_COMPLETED;
    rec->censored = rec->finish == TRACE_FINISH_TRUNCATED;
    rec->turns = calloc(turns, sizeof *rec->turns);
    rec->obs = calloc(2 * turns, sizeof *rec->obs);
    rec->exec_us = calloc(2 * turns, sizeof *rec->exec_us);
    for (size_t k = 0; k < turns; k++, rec->n_turns++) {
        size_t n = k + 1 < turns ? 1 + rng_uniform_int(&r, 2) : 0;
        rec->turns[k] = (struct gw_rec_turn){(int64_t)(100 + rng_uniform_int(&r, 8000)),
                                             (int64_t)(500 * (k + 1)), rec->n_ret, n};
        for (size_t j = 0; j < n; j++, rec->n_ret++) {
            struct sched_obs *o = &rec->obs[rec->n_ret];
            snprintf(o->tool, sizeof o->tool, "%s", tools[rng_uniform_int(&r, 3)]);
            o->payload_tokens = (int64_t)rng_uniform_int(&r, 9000);
            o->size = o->payload_tokens > 5000 ? SCHED_LARGE : SCHED_SMALL;
            o->status = rng_uniform_int(&r, 3) ? SCHED_SUCCESS : SCHED_FAILURE;
            rec->exec_us[rec->n_ret] = -1;
        }
    }
}

/* What a faulty store would do wrong: learn one trajectory twice, or lose one. */
enum fault { TWICE, LOST };

/* The live calls on r for n trajectories, a step every 7, with fault at trajectory 100. */
static void learn_live(struct sched_router *r, size_t n, enum fault fault)
{
    struct sched_eval_trace finished = {0};
    double learnt = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gw_learn_rec rec;
        random_rec(&rec, i);
        if (fault != LOST || i != 100)
            gw_learn_rec_add(&finished, &rec);
        if (fault == TWICE && i == 100)
            gw_learn_rec_add(&finished, &rec);
        gw_learn_rec_free(&rec);
        if ((i + 1) % 7 == 0)
            gw_learn_finished(r, &finished, &learnt);
    }
    sched_eval_trace_free(&finished);
}

/* Journals n trajectories, a step every 7 (the live gateway's calls on live as it goes). */
static void write_journal(struct gw_store *st, struct sched_router *live, size_t n)
{
    struct sched_eval_trace finished = {0};
    double learnt = 0;
    int64_t since = 0, step = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct gw_learn_rec rec, back = {0};
        random_rec(&rec, i);
        char err[256], *text = gw_learn_rec_text(&rec);
        assert_int_equal(gw_learn_rec_parse(text, strlen(text), &back, err, sizeof err), 0);
        char *again = gw_learn_rec_text(&back);
        assert_string_equal(text, again); /* the text round-trips */
        free(again);
        gw_store_journal(st, "learn", text);
        gw_learn_rec_add(&finished, &rec);
        gw_learn_rec_free(&rec);
        gw_learn_rec_free(&back);
        if (++since == 7) {
            step++;
            struct gw_step_rec s = {step, since, step > 2 ? 100.0 * (double)step : NAN};
            gw_store_journal(st, "step", gw_step_rec_text(&s));
            gw_learn_finished(live, &finished, &learnt);
            if (isfinite(s.deadline_s))
                sched_router_set_deadline(live, s.deadline_s);
            since = 0;
        }
    }
    sched_eval_trace_free(&finished);
}

/* The trees of r as text (the export, which orders children and prompts). */
static char *trees(struct sched_router *r)
{
    json_t *doc = sched_model_to_json(sched_router_model(r));
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    return text;
}

static char *replayed(struct gw_store *st, int64_t *trajs, int64_t *steps, size_t *pending)
{
    struct sched_router *r = router();
    struct sched_eval_trace finished = {0};
    double learnt = 0;
    struct gw_replay rp = {NULL, r, &finished, &learnt, 0, 0};
    char err[512];
    if (gw_journal_replay(st, &rp, err, sizeof err) != 0)
        fail_msg("replay: %s", err);
    *trajs = rp.trajs;
    *steps = rp.steps;
    *pending = finished.trajs.n;
    char *text = trees(r);
    sched_eval_trace_free(&finished);
    sched_router_free(r);
    return text;
}

static void test_a_journal_replayed_twice_gives_equal_trees(void **state)
{
    const char *dir = fresh_dir("replay");
    struct loop l = {event_base_new(), 0, 0};
    struct gw_store *st = open_ok(dir);
    char err[256];
    assert_int_equal(gw_store_start(st, l.base, NULL, NULL, err, sizeof err), 0);
    struct sched_router *live = router();
    write_journal(st, live, 200);
    commit_now(st, &l);
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    char *want = trees(live);
    sched_router_free(live);

    st = open_ok(dir);
    int64_t n1, n2, steps1, steps2;
    size_t pending1, pending2;
    char *a = replayed(st, &n1, &steps1, &pending1), *b = replayed(st, &n2, &steps2, &pending2);
    assert_int_equal(n1, 200);
    assert_int_equal(steps1, 200 / 7);
    assert_int_equal(pending1, 200 % 7); /* journalled after the last step: learnt at the next */
    assert_string_equal(a, b);
    assert_string_equal(a, want);                /* the replay learns what the live calls learnt */
    for (enum fault f = TWICE; f <= LOST; f++) { /* and the comparison sees a fault */
        struct sched_router *faulty = router();
        learn_live(faulty, 200, f);
        char *other = trees(faulty);
        assert_string_not_equal(a, other);
        free(other);
        sched_router_free(faulty);
    }
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    free(a);
    free(b);
    free(want);
    event_base_free(l.base);
}

static void test_a_step_that_disagrees_with_the_journal_is_refused(void **state)
{
    const char *dir = fresh_dir("disagree");
    struct loop l = {event_base_new(), 0, 0};
    struct gw_store *st = open_ok(dir);
    char err[512];
    assert_int_equal(gw_store_start(st, l.base, NULL, NULL, err, sizeof err), 0);
    struct gw_learn_rec rec;
    random_rec(&rec, 1);
    gw_store_journal(st, "learn", gw_learn_rec_text(&rec));
    gw_learn_rec_free(&rec);
    struct gw_step_rec s = {1, 2, NAN}; /* two learnt, one journalled: one was lost */
    gw_store_journal(st, "step", gw_step_rec_text(&s));
    commit_now(st, &l);
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    st = open_ok(dir);
    struct sched_router *r = router();
    struct sched_eval_trace finished = {0};
    double learnt = 0;
    struct gw_replay rp = {NULL, r, &finished, &learnt, 0, 0};
    assert_int_equal(gw_journal_replay(st, &rp, err, sizeof err), LIBRA_EINVAL);
    assert_non_null(
        strstr(err, "journal seq 2: the step learnt 2 trajectories, the journal has 1"));
    sched_eval_trace_free(&finished);
    sched_router_free(r);
    assert_int_equal(gw_store_close(st, err, sizeof err), 0);
    event_base_free(l.base);
}

/* ---- a live trajectory's row ---------------------------------------------------------------- */

static struct sched_obs obs_of(const char *tool, int64_t payload)
{
    struct sched_obs o = {.payload_tokens = payload, .status_from = SCHED_FROM_EXPLICIT};
    snprintf(o.tool, sizeof o.tool, "%s", tool);
    return o;
}

/* Adds return o to t as the gateway does: an observation and a pending call. */
static void announce(struct gw_traj *t, struct sched_obs o)
{
    vec_push(&t->obs, o);
    vec_push(&t->pending, gw_call_from(&o, 5));
}

/* The gateway routing t's next turn: the pending returns, then inline ones, go to the last
 * completed turn's calls. */
static void route(struct gw_traj *t, struct sched_obs inline_ret)
{
    t->announced = t->pending.n;
    vec_push(&t->returns_at, t->obs.n - t->pending.n);
    announce(t, inline_ret);
    struct trace_turn *last = &t->turns.v[t->turns.n - 1];
    last->calls = t->pending.v;
    last->n_calls = t->pending.n;
    t->pending.v = NULL;
    t->pending.n = t->pending.cap = 0;
}

static void test_a_row_keeps_what_the_events_call_announced_not_a_turn_in_flight(void **state)
{
    struct gw_traj t = {.prompt = 3, .start_tokens = 100, .generation = 2, .instance = 1};
    snprintf(t.id, sizeof t.id, "libra:9");
    vec_push(&t.turns, ((struct trace_turn){.prompt_tokens = 100, .generated_tokens = 40}));
    announce(&t, obs_of("bash", 10)); /* the events call, after turn 0 */
    route(&t, obs_of("search", 20));  /* turn 1: one more return inline */
    vec_push(&t.turns, ((struct trace_turn){.prompt_tokens = 170,
                                            .cached_tokens = 96,
                                            .generated_tokens = 30,
                                            .timing = {1, 2, 500, -1, 900}})); /* turn 1 done */
    announce(&t, obs_of("python", 30)); /* the events call, after turn 1 */
    route(&t, obs_of("inline", 40));    /* turn 2 goes out, then ... */
    announce(&t, obs_of("late", 50));   /* ... returns announced meanwhile */
    char *text = gw_traj_rec_text(&t);
    assert_string_equal(
        text, "{\"id\":\"libra:9\",\"prompt\":3,\"start_tokens\":100,\"generation\":2,"
              "\"version_start\":0,\"instance\":1,\"turns\":[[100,0,40,[[\"bash\",10,\"small\","
              "\"success\",\"explicit\",5],[\"search\",20,\"small\",\"success\",\"explicit\",5]]],"
              "[170,96,30,[],[1,2,500,-1,900]]],\"pending\":[[\"python\",30,\"small\",\"success\","
              "\"explicit\",5],"
              "[\"late\",50,\"small\",\"success\",\"explicit\",5]]}");
    struct gw_traj back = {0};
    char err[256];
    assert_int_equal(gw_traj_rec_parse(text, strlen(text), &back, err, sizeof err), 0);
    assert_string_equal(back.id, "libra:9");
    assert_int_equal(back.turns.n, 2);
    assert_int_equal(back.turns.v[0].n_calls, 2);
    assert_int_equal(back.turns.v[1].n_calls, 0);
    assert_int_equal(back.turns.v[0].timing.tp, 0); /* not timed */
    assert_memory_equal(&back.turns.v[1].timing, &t.turns.v[1].timing, sizeof t.turns.v[1].timing);
    assert_int_equal(back.obs.n, 4);
    assert_int_equal(back.returns_at.n, 1);
    assert_int_equal(back.pending.n, 2);
    assert_string_equal(back.pending.v[1].tool, "late");
    assert_int_equal(back.last_prompt_tokens, 170);
    assert_int_equal(back.last_generated, 30);
    char *again = gw_traj_rec_text(&back);
    assert_string_equal(text, again);
    free(again);
    free(text);
    gw_traj_clear(&back);
    gw_traj_clear(&t);
}

static void test_rows_name_the_field_that_is_wrong(void **state)
{
    struct gw_traj t = {0};
    struct gw_learn_rec rec = {0};
    struct gw_step_rec s;
    char err[256];
    const char *row = "{\"id\":\"x\",\"prompt\":1,\"start_tokens\":1,\"generation\":0,"
                      "\"version_start\":0,\"instance\":0,\"turns\":[[1,0,1,[[\"a:b\",1,\"small\","
                      "\"success\",\"explicit\",-1]]],[2,0,1,[]]],\"pending\":[]}";
    assert_int_equal(gw_traj_rec_parse(row, strlen(row), &t, err, sizeof err), -1);
    assert_string_equal(err, "turns.0.3.0.0: expected a tool name (1 to 31 bytes, no ':', '|', "
                             "',' or control)");
    gw_traj_clear(&t);
    const char *timed = "{\"id\":\"x\",\"prompt\":1,\"start_tokens\":1,\"generation\":0,"
                        "\"version_start\":0,\"instance\":0,\"turns\":[[2,0,1,[],[0,1,9,-1,5]]],"
                        "\"pending\":[]}";
    assert_int_equal(gw_traj_rec_parse(timed, strlen(timed), &t, err, sizeof err), -1);
    assert_string_equal(err, "turns.0: expected its timing [instance, tp, sent_us, first_us, "
                             "done_us] in order");
    gw_traj_clear(&t);
    const char *learn = "{\"id\":\"\",\"step\":0,\"prompt\":1,\"censored\":false,"
                        "\"finish\":\"done\",\"turns\":[[1,1,[]]]}";
    assert_int_equal(gw_learn_rec_parse(learn, strlen(learn), &rec, err, sizeof err), -1);
    assert_string_equal(err, "finish: expected completed, truncated, aborted or filtered");
    const char *step = "{\"step\":1,\"learnt\":0,\"deadline_s\":null,\"more\":1}";
    assert_int_equal(gw_step_rec_parse(step, strlen(step), &s, err, sizeof err), -1);
    assert_string_equal(err, "more: unknown member");
    /* a name that is not UTF-8 persists byte for byte */
    struct gw_learn_rec bytes = {.n_turns = 1};
    struct gw_rec_turn turn = {1, 1, 0, 0};
    bytes.turns = &turn;
    snprintf(bytes.id, sizeof bytes.id, "libra:\xc3");
    char *text = gw_learn_rec_text(&bytes);
    assert_non_null(strstr(text, "\"id\":[108,105,98,114,97,58,195]"));
    assert_int_equal(gw_learn_rec_parse(text, strlen(text), &rec, err, sizeof err), 0);
    assert_string_equal(rec.id, "libra:\xc3");
    gw_learn_rec_free(&rec);
    free(text);
}

/* What a restart counts on from leaves room to count (GW_COUNTER_MAX), and token counts are
 * those a trace holds, so sums over a trajectory stay exact; an engine id may pass 255 (ids are
 * never given again). */
static void test_rows_out_of_the_range_their_use_needs_are_refused(void **state)
{
    static const char live[] = "{\"id\":\"x\",\"prompt\":1,\"start_tokens\":1,\"generation\":%s,"
                               "\"version_start\":0,\"instance\":%s,\"turns\":[[%s,0,1,[]]],"
                               "\"pending\":[]}";
    static const struct {
        const char *generation, *instance, *prompt_tokens, *says; /* says NULL: accepted */
    } cases[] = {
        {"4611686018427387904", "1000", "1099511627776", NULL},
        {"4611686018427387905", "0", "1", "generation: expected a step number up to 2^62"},
        {"0", "4611686018427387905", "1", "instance: expected an engine id or -1"},
        {"0", "0", "1099511627777",
         "turns.0: expected token counts up to 2^40 (cached at most the prompt, or -1)"},
    };
    char row[512], err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gw_traj t = {0};
        snprintf(row, sizeof row, live, cases[i].generation, cases[i].instance,
                 cases[i].prompt_tokens);
        int rc = gw_traj_rec_parse(row, strlen(row), &t, err, sizeof err);
        if (cases[i].says)
            assert_string_equal(err, cases[i].says);
        assert_int_equal(rc, cases[i].says ? -1 : 0);
        gw_traj_clear(&t);
    }
    struct gw_learn_rec rec = {0};
    const char *learn = "{\"id\":\"\",\"step\":0,\"prompt\":1,\"censored\":false,"
                        "\"finish\":\"completed\",\"turns\":[[1,1,[[\"bash\",1099511627777,"
                        "\"small\",\"success\",\"explicit\",-1]]]]}";
    assert_int_equal(gw_learn_rec_parse(learn, strlen(learn), &rec, err, sizeof err), -1);
    assert_string_equal(err, "turns.0.2.0.1: expected a token count up to 2^40, or -1");
    struct gw_step_rec s;
    const char *step = "{\"step\":9223372036854775807,\"learnt\":0,\"deadline_s\":null}";
    assert_int_equal(gw_step_rec_parse(step, strlen(step), &s, err, sizeof err), -1);
    assert_string_equal(err, "step: expected a step number up to 2^62");
}

int main(void)
{
    evthread_use_pthreads();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_round_trip_through_the_worker),
        cmocka_unit_test(test_a_store_never_started_writes_nothing),
        cmocka_unit_test(test_a_failed_commit_is_told_and_retried_first),
        cmocka_unit_test(test_an_unknown_schema_version_is_refused_naming_both),
        cmocka_unit_test(test_a_state_dir_in_use_is_refused),
        cmocka_unit_test(test_a_journal_replayed_twice_gives_equal_trees),
        cmocka_unit_test(test_a_step_that_disagrees_with_the_journal_is_refused),
        cmocka_unit_test(test_a_row_keeps_what_the_events_call_announced_not_a_turn_in_flight),
        cmocka_unit_test(test_rows_name_the_field_that_is_wrong),
        cmocka_unit_test(test_rows_out_of_the_range_their_use_needs_are_refused),
        cmocka_unit_test(test_a_file_that_cannot_be_synced_fails_the_commit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
