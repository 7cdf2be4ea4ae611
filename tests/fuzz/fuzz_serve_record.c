/*
 * Fuzz harness for the parsers of the gateway's persisted rows (src/server/record.c): the first
 * byte picks the row ('0' a learnt trajectory, '1' a step, '2' a live trajectory, '3' an engine,
 * '4' the weight update kept), the rest is its text. Besides not crashing: a rejected row says why;
 * an accepted one writes a text that parses again and writes the same text; a learnt trajectory
 * goes into an evaluation trace as the replay puts it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(int rc, const char *err)
{
    if (rc != 0 && (!memchr(err, '\0', 256) || !err[0]))
        abort();
}

/* text1 parsed again must write text1 again. */
static void same(const char *a, const char *b)
{
    if (!a || !b || strcmp(a, b) != 0)
        abort();
}

static void learn(const char *text, size_t len)
{
    struct gw_learn_rec r = {0}, back = {0};
    char err[256] = "";
    int rc = gw_learn_rec_parse(text, len, &r, err, sizeof err);
    check_err(rc, err);
    if (rc != 0)
        return;
    struct sched_eval_trace ev = {0};
    gw_learn_rec_add(&ev, &r);
    if (ev.trajs.n != 1 || ev.turns.n != r.n_turns)
        abort();
    sched_eval_trace_free(&ev);
    char *a = gw_learn_rec_text(&r);
    if (gw_learn_rec_parse(a, strlen(a), &back, err, sizeof err) != 0)
        abort();
    char *b = gw_learn_rec_text(&back);
    same(a, b);
    free(a);
    free(b);
    gw_learn_rec_free(&r);
    gw_learn_rec_free(&back);
}

static void step(const char *text, size_t len)
{
    struct gw_step_rec s, back;
    char err[256] = "";
    int rc = gw_step_rec_parse(text, len, &s, err, sizeof err);
    check_err(rc, err);
    if (rc != 0)
        return;
    char *a = gw_step_rec_text(&s);
    if (gw_step_rec_parse(a, strlen(a), &back, err, sizeof err) != 0)
        abort();
    char *b = gw_step_rec_text(&back);
    same(a, b);
    free(a);
    free(b);
}

static void live(const char *text, size_t len)
{
    struct gw_traj t = {0}, back = {0};
    char err[256] = "";
    int rc = gw_traj_rec_parse(text, len, &t, err, sizeof err);
    check_err(rc, err);
    if (rc == 0) {
        if (t.returns_at.n + (t.turns.n > 0) != t.turns.n || t.pending.n > t.obs.n)
            abort();
        char *a = gw_traj_rec_text(&t);
        if (gw_traj_rec_parse(a, strlen(a), &back, err, sizeof err) != 0)
            abort();
        char *b = gw_traj_rec_text(&back);
        same(a, b);
        free(a);
        free(b);
    }
    gw_traj_clear(&t);
    gw_traj_clear(&back);
}

static void engine(const char *text, size_t len)
{
    struct gw_engine e = {0}, back = {0};
    char err[256] = "";
    int rc = gw_engine_rec_parse(text, len, &e, err, sizeof err);
    check_err(rc, err);
    if (rc != 0)
        return;
    char *a = gw_engine_rec_text(&e);
    if (gw_engine_rec_parse(a, strlen(a), &back, err, sizeof err) != 0)
        abort();
    char *b = gw_engine_rec_text(&back);
    same(a, b);
    free(a);
    free(b);
}

static void update(const char *text, size_t len)
{
    struct gw_update_rec u = {0}, back = {0};
    char err[256] = "";
    int rc = gw_update_rec_parse(text, len, &u, err, sizeof err);
    check_err(rc, err);
    if (rc != 0)
        return;
    if (!u.body || u.len != strlen(u.body) || u.path[0] != '/')
        abort();
    for (size_t i = 1; i < u.n_missed; i++)
        if (u.missed[i] <= u.missed[i - 1])
            abort();
    char *a = gw_update_rec_text(&u);
    if (gw_update_rec_parse(a, strlen(a), &back, err, sizeof err) != 0)
        abort();
    char *b = gw_update_rec_text(&back);
    same(a, b);
    free(a);
    free(b);
    gw_update_rec_free(&u);
    gw_update_rec_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static void (*const parsers[])(const char *, size_t) = {learn, step, live, engine, update};
    parsers[(uint8_t)(data[0] - '0') % 5]((const char *)data + 1, size - 1); /* '0'..'4' */
    return 0;
}
