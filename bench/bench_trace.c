/*
 * Figures for trace/: how fast a trace is read and written. Users run libra on traces of
 * millions of trajectories, and the simulator replays them, so the reader should cost little
 * more than JSON parsing itself: the target is at least 0.7x the trajectories per
 * second of a bare json_loadb loop over the same lines (same flags: JSON_REJECT_DUPLICATES,
 * and json_decref of every tree). Three figures read the same input: the streaming reader
 * over a file (page-cached after the warm-up), the parser over lines in memory, and the bare
 * loop. The fourth formats the records (the writer's cost per trajectory, without I/O).
 *
 * Input: N synthetic R2E-like trajectories drawn with util/rng (seed 1, keyed by trajectory
 * index): 1-12 turns (uniform), generated tokens per turn lognormal(median 400, sigma 1),
 * context growing by what was generated and returned, cached tokens the previous context,
 * one tool call per turn but the last (two with probability 0.1) from {bash, editor, pytest}
 * with status success 0.7 / failure 0.2 / timeout 0.05 / other 0.05, payload lognormal
 * (median 300, sigma 1.2), queue U[0, 50 ms), execution lognormal(median 0.5 s, sigma 1.5),
 * reward 0 or 1. Setup prints the input's size on stderr, so MB/s = op/s x bytes/op.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "trace/file.h"
#include "util/alloc.h"
#include "util/rng.h"

#define INPUT                                                                                      \
    "N synthetic R2E-like trajectories (bench_trace.c; util/rng seed 1; 1-12 turns, "              \
    "lognormal tokens and tool times)"

static const char *const tools[] = {"bash", "editor", "pytest"};

/* Draws trajectory i into t (turns/calls: caller storage of 12 and 24). */
static void synth(uint64_t i, struct trace_traj *t, struct trace_turn *turns,
                  struct trace_tool_call *calls)
{
    static const double status_w[] = {0.7, 0.2, 0.05, 0.05};
    /* a group's 4 samples share its first's prompt (rule 7 of the header's group_size) */
    struct rng r = rng_keyed(1, i, 0, 0), first = rng_keyed(1, i - i % 4, 0, 0);
    (void)rng_uniform_int(&r, 4578); /* the prompt's draw: the rest is drawn as for the first */
    *t = (struct trace_traj){.step = (int64_t)(i / 32),
                             .prompt_id = (int64_t)rng_uniform_int(&first, 4578),
                             .sample = (int64_t)(i % 4),
                             .version_start = (int64_t)(i / 32),
                             .version_end = (int64_t)(i / 32),
                             .has_reward = true,
                             .reward = (double)rng_uniform_int(&r, 2),
                             .turns = turns,
                             .n_turns = 1 + rng_uniform_int(&r, 12)};
    int64_t context = 600 + (int64_t)rng_uniform_int(&r, 1500), cached = 0;
    size_t used = 0;
    for (size_t k = 0; k < t->n_turns; k++) {
        struct trace_turn *u = &turns[k];
        *u = (struct trace_turn){.prompt_tokens = context,
                                 .cached_tokens = cached,
                                 .generated_tokens = (int64_t)rng_lognormal(&r, log(400), 1.0)};
        cached = context;
        context += u->generated_tokens;
        if (k + 1 == t->n_turns)
            break;
        u->calls = &calls[used];
        u->n_calls = rng_bernoulli(&r, 0.1) ? 2 : 1;
        for (size_t c = 0; c < u->n_calls; c++, used++) {
            calls[used] = (struct trace_tool_call){
                .tool = (char *)tools[rng_uniform_int(&r, 3)],
                .status = (enum trace_tool_status)rng_categorical(&r, status_w, 4),
                .payload_tokens = (int64_t)rng_lognormal(&r, log(300), 1.2),
                .queue_us = (int64_t)rng_uniform_int(&r, 50000),
                .exec_us = (int64_t)rng_lognormal(&r, log(500000), 1.5),
            };
            context += calls[used].payload_tokens;
        }
    }
}

/* The input: n drawn records, their lines after a header in memory, and the same in a file. */
struct input {
    struct trace_traj *trajs;      /* n, pointing into turns and calls */
    struct trace_turn *turns;      /* 12 per trajectory */
    struct trace_tool_call *calls; /* 24 per trajectory */
    uint64_t n;
    struct trace_text text;
    size_t *line_start, *line_len; /* of each trajectory line in text */
    char path[64];
};

static void *setup(uint64_t n)
{
    struct input *in = xcalloc(1, sizeof *in);
    in->n = n;
    in->trajs = xmallocarray(n, sizeof *in->trajs);
    in->turns = xmallocarray(n * 12, sizeof *in->turns);
    in->calls = xmallocarray(n * 24, sizeof *in->calls);
    in->line_start = xmallocarray(n, sizeof *in->line_start);
    in->line_len = xmallocarray(n, sizeof *in->line_len);
    struct trace_header h = {.version = TRACE_SCHEMA_VERSION, .workload = "bench", .group_size = 4};
    trace_format_header(&in->text, &h);
    size_t header_bytes = in->text.len;
    for (uint64_t i = 0; i < n; i++) {
        synth(i, &in->trajs[i], in->turns + 12 * i, in->calls + 24 * i);
        in->line_start[i] = in->text.len;
        trace_format_traj(&in->text, &in->trajs[i]);
        in->line_len[i] = in->text.len - in->line_start[i] - 1;
    }
    snprintf(in->path, sizeof in->path, "/tmp/bench_trace_%ld.jsonl", (long)getpid());
    FILE *f = fopen(in->path, "wb");
    if (!f || fwrite(in->text.data, 1, in->text.len, f) != in->text.len || fclose(f) != 0) {
        fprintf(stderr, "bench_trace: cannot write %s\n", in->path);
        exit(1);
    }
    static uint64_t reported_n; /* say each input size once, not once per run */
    if (n != reported_n) {
        size_t bytes = in->text.len - header_bytes;
        fprintf(stderr, "bench_trace: input %llu trajectories, %zu bytes (%.1f bytes each)\n",
                (unsigned long long)n, bytes, (double)bytes / (double)(n ? n : 1));
        reported_n = n;
    }
    return in;
}

static void teardown(void *state)
{
    struct input *in = state;
    remove(in->path);
    trace_text_free(&in->text);
    free(in->trajs);
    free(in->turns);
    free(in->calls);
    free(in->line_start);
    free(in->line_len);
    free(in);
}

static uint64_t read_file_run(void *state, uint64_t n)
{
    struct input *in = state;
    struct trace_reader *r;
    const struct trace_header *h;
    const struct trace_traj *t;
    uint64_t turns = 0;
    if (trace_reader_open(&r, in->path, NULL) || trace_reader_header(r, &h, NULL))
        abort();
    int rc;
    while ((rc = trace_reader_next(r, &t, NULL)) == 1)
        turns += t->n_turns;
    if (rc != 0)
        abort();
    trace_reader_close(r);
    return turns;
}

static uint64_t parse_memory_run(void *state, uint64_t n)
{
    struct input *in = state;
    struct trace_parser *p = trace_parser_new("bench");
    const struct trace_traj *t;
    uint64_t turns = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (trace_parser_traj(p, in->text.data + in->line_start[i], in->line_len[i], 2, &t, NULL))
            abort();
        turns += t->n_turns;
    }
    trace_parser_free(p);
    return turns;
}

static uint64_t json_loadb_run(void *state, uint64_t n)
{
    struct input *in = state;
    uint64_t members = 0;
    for (uint64_t i = 0; i < n; i++) {
        json_t *v = json_loadb(in->text.data + in->line_start[i], in->line_len[i],
                               JSON_REJECT_DUPLICATES, NULL);
        members += json_object_size(v);
        json_decref(v);
    }
    return members;
}

static uint64_t format_run(void *state, uint64_t n)
{
    struct input *in = state;
    struct trace_text out = {0};
    for (uint64_t i = 0; i < n; i++)
        trace_format_traj(&out, &in->trajs[i]);
    uint64_t bytes = out.len;
    trace_text_free(&out);
    return bytes;
}

int main(int argc, char **argv)
{
    static const struct bench_figure figures[] = {
        {"trace_read_file", INPUT ", streaming reader over a page-cached file", BENCH_OPS_PER_S,
         20000, 50, setup, read_file_run, teardown},
        {"trace_parse_memory", INPUT ", parser over the lines in memory", BENCH_OPS_PER_S, 20000,
         50, setup, parse_memory_run, teardown},
        {"trace_json_loadb_bare", INPUT ", bare json_loadb + json_decref per line", BENCH_OPS_PER_S,
         20000, 50, setup, json_loadb_run, teardown},
        {"trace_format", INPUT ", formatting each record into one buffer", BENCH_OPS_PER_S, 20000,
         50, setup, format_run, teardown},
    };
    return bench_main(argc, argv, figures, sizeof figures / sizeof figures[0]);
}
