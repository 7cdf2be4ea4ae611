/*
 * Measurements users already have, read into calibration points (cost/points.h) for `libra
 * calibrate`. docs/calibrate.md lists every field read and the versions it was checked
 * against.
 *
 * - Serving benchmarks: vLLM's `benchmarks/benchmark_serving.py --save-result` (and `vllm bench
 *   serve --save-result --save-detailed`), one JSON object per file, and SGLang's
 *   `python -m sglang.bench_serving --output-file F --output-details`, one JSON object per run
 *   and line. Both hold per-request arrays (input_lens, output_lens, ttfts, itls, errors;
 *   vLLM's newer ones also latencies), the run's duration and its traffic (request_rate,
 *   max_concurrency). A run becomes one decode point: the mean iteration a decoding request
 *   saw, at the mean decode batch the run held (Σ decode time / duration, Little's law), with
 *   the prompts prefilled meanwhile (chunked prefill) spread over its iterations. Python's
 *   Infinity and NaN, which SGLang's files hold, are read as "inf" and no value.
 * - verl console logs: the `step:N - key:value - ...` lines verl's console logger prints once
 *   per training step. A step becomes one training point: timing_s/update_actor over
 *   perf/total_num_tokens tokens, in sequences of the mean prompt + response length, on the
 *   GPUs perf/throughput implies or the input's options give.
 * - Megatron-LM logs: the arguments block it prints at start-up (sequence length, GPUs,
 *   parallel sizes, micro-batch, optimizer, recompute) and its `iteration N/M | ... |` lines.
 *   An iteration line becomes one training point: the elapsed time per iteration over its
 *   global batch of sequences of seq_length tokens, on the layout the arguments give.
 * - libra serve captures: traces whose turns carry the gateway's timing (trace_turn_timing).
 *   cli/ reads the trace and hands the timed turns over (cost_timed_turn); each band of decode
 *   batch on each TP size becomes one decode point (cost_timed_points, timed.c).
 *
 * An input may carry options after its name, "FILE,tp=2" (cost_import_options_parse). Parsers
 * are pure and read memory (cli/ reads the files); errors name FILE:LINE:COL and the field.
 */
#ifndef COST_IMPORT_H
#define COST_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "cost/points.h"
#include "libra/libra.h"
#include "util/vec.h"

enum cost_import_kind {
    COST_IMPORT_SERVING,  /* vLLM or SGLang serving benchmark result(s) */
    COST_IMPORT_VERL_LOG, /* a verl console log */
    COST_IMPORT_MEGATRON, /* a Megatron-LM log */
    COST_IMPORT_TRACE,    /* a libra trace */
    COST_IMPORT_UNKNOWN,
};

/* What text holds: where it opens as a JSON object does ('{', then a key's '"' or '}'), that
 * object, its first line's or the whole text's (a trace when it has "libra_trace", a serving
 * result when it has a member every one has, "duration", "input_lens", "output_lens", "ttfts"
 * or "itls", or when it does not parse, so that the reader names the error; else unknown);
 * otherwise (a log may open with a Python dict, "{'key': ...") lines of which one is a verl
 * step line, else one is a Megatron-LM iteration line or its arguments block's first. */
enum cost_import_kind cost_import_detect(const char *text, size_t len);

/* One serving benchmark run, summed over its requests. */
struct cost_serving_run {
    int line;             /* of the run in its file: 1 for a whole-file result */
    char backend[32];     /* "backend", when the result names it */
    char model[128];      /* "model_id", when the result names it */
    size_t requests;      /* in the run */
    size_t failed;        /* with an error or no output */
    size_t decoded;       /* successful with at least 2 output tokens */
    double duration_s;    /* "duration" */
    double decode_s;      /* Σ over decoded requests of latency − TTFT (or Σ ITL) */
    double decode_tokens; /* Σ (output − 1) */
    double ctx_sum;       /* Σ (output − 1)·(input + output/2): context of every decode step */
    double prompts;       /* successful requests: each prefilled once */
    double prompt_tokens; /* Σ input over them */
    double prompt_pairs;  /* Σ input·(input + 1)/2 over them: prefill attention */
    double prefill_share; /* of the prompts, prefilled while others decode (import.c) */
};
typedef VEC(struct cost_serving_run) cost_serving_runs;

/*
 * Appends the runs of one serving result file (name labels errors) to out: one for a JSON
 * object (vLLM), one per non-blank line for JSON Lines (SGLang). Returns 0 or LIBRA_EINVAL
 * with err at FILE:LINE:COL and the field (a missing or malformed array, a negative time, a
 * request that decoded without a time, a run in which none decoded, a decode time that
 * exceeds what its duration allows); out keeps the runs read before the error.
 */
int cost_import_serving(const char *name, const char *text, size_t len, cost_serving_runs *out,
                        struct libra_error *err);

/* The decode point of run r on an engine of TP size tp (see cost/points.h). */
void cost_serving_point(const struct cost_serving_run *r, int tp, struct cost_decode_point *out);

/* Options after an input's name, and the layout a trainer's log states. */
enum cost_import_option {
    COST_OPT_TP,          /* serving: the engine's TP size; a log: the trainer's */
    COST_OPT_PP,          /* a log: pipeline stages */
    COST_OPT_CP,          /* a log: context (Ulysses) parallel size */
    COST_OPT_GPUS,        /* a log: GPUs of the trainer */
    COST_OPT_MINIBATCHES, /* a log: optimizer steps per training step */
    COST_OPT_MICRO,       /* a log: micro_batch_tokens, per DP replica */
    COST_OPT_ZERO,        /* a log: ZeRO stage */
    COST_OPT_RECOMPUTE,   /* a log: 1 full activation recompute, 0 none */
    COST_OPT_EP,          /* a log: expert parallel size (MoE; cost/train.h) */
    COST_N_OPTIONS,
};

struct cost_import_options {
    unsigned given; /* 1u << cost_import_option for each option given */
    long value[COST_N_OPTIONS];
};

/* One training step of a trainer's log (verl or Megatron-LM). */
struct cost_log_step {
    int line;
    int64_t step;
    double update_s;   /* verl: timing_s/update_actor; Megatron: the elapsed time per iteration */
    double tokens;     /* tokens trained in the step, prompt and response (verl:
                        * perf/total_num_tokens; Megatron: global batch size × seq_length) */
    double seq_tokens; /* verl: prompt_length/mean + response_length/mean; Megatron: seq_length */
    double gpus;       /* verl: perf/total_num_tokens / (perf/throughput · perf/time_per_step);
                        * Megatron: world_size; 0 when the log does not say */
    struct cost_import_options layout; /* what the log states of the layout (Megatron's
                                        * arguments; nothing for verl): an input's options
                                        * override it */
    int layers, hidden;                /* the model's shape the log states; 0: not stated */
};
typedef VEC(struct cost_log_step) cost_log_steps;

/*
 * Appends the training steps of a verl log to out: every step line with
 * timing_s/update_actor (lines without it, such as validation, are counted in *skipped).
 * Returns 0 or LIBRA_EINVAL with err at FILE:LINE:COL (a segment that is not KEY:VALUE, a key
 * given twice, a needed metric missing, not a number, or not > 0).
 */
int cost_import_verl(const char *name, const char *text, size_t len, cost_log_steps *out,
                     size_t *skipped, struct libra_error *err);

/*
 * Appends the training steps of a Megatron-LM log to out: every iteration line ("iteration
 * N/M | ... | elapsed time per iteration (ms): X | ... | global batch size: G |") after an
 * arguments block, on the layout the latest block states (world_size, seq_length,
 * tensor_model_parallel_size, pipeline_model_parallel_size and micro_batch_size, which it must
 * hold; context_parallel_size, expert_model_parallel_size, use_distributed_optimizer as ZeRO 1,
 * recompute_granularity full as full recompute and anything else as none; num_layers and
 * hidden_size as the step's shape).
 * The first iteration line after each block is counted in *skipped, not read: its interval
 * holds the start-up. Returns 0 or LIBRA_EINVAL with err at FILE:LINE:COL (an iteration line
 * before any arguments block, a needed argument missing or not a positive integer, a time or
 * batch that is not a number > 0).
 */
int cost_import_megatron(const char *name, const char *text, size_t len, cost_log_steps *out,
                         size_t *skipped, struct libra_error *err);

/* The option's name as typed ("micro_batch_tokens"). */
const char *cost_import_option_name(enum cost_import_option o);

/*
 * Parses "KEY=VALUE[,KEY=VALUE...]" ("" gives none) into o. Returns 0, or -1 with why (size
 * bytes) naming the key and what is wrong (unknown, given twice, not an integer in range).
 */
int cost_import_options_parse(const char *text, struct cost_import_options *o, char *why,
                              size_t size);

/* Sequences a log's step may make (prompt + response tokens ÷ their mean length): a large RL
 * step holds tens of thousands; the model deals each one. */
#define COST_LOG_MAX_SEQS (1 << 20)

/*
 * The training point of log step st under options o, then the layout the log states, then the
 * defaults (verl's: TP, PP, CP, EP 1; ZeRO 3; full recompute; 1 mini-batch; 16384·CP tokens
 * per micro-batch, at least one sequence; the GPUs of the log): st->tokens / st->seq_tokens
 * sequences of st->seq_tokens tokens each, prepared into
 * seqs (freed by the caller with cost_train_seqs_free). Returns 0, or -1 with why (no GPU
 * count, GPUs the layout does not divide, sequences longer than a micro-batch, fewer sequences
 * than DP ranks × mini-batches or more than COST_LOG_MAX_SEQS).
 */
int cost_log_point(const struct cost_log_step *st, const struct cost_import_options *o,
                   const struct cost_shape *shape, struct cost_train_seqs *seqs,
                   struct cost_train_point *out, char *why, size_t size);

/* A turn a gateway timed (`libra serve --capture`), in seconds on the gateway's clock. */
struct cost_timed_turn {
    int64_t instance;        /* the engine that served it */
    int tp;                  /* its TP size */
    double sent_s;           /* the request sent */
    double first_s;          /* the first streamed chunk; < 0: the answer was not streamed */
    double done_s;           /* the answer complete, >= sent_s and first_s */
    double prompt_tokens;    /* the context sent */
    double uncached_tokens;  /* of it, prefilled (not served from the prefix cache) */
    double generated_tokens; /* in the answer */
    double prefill_s;        /* the model's time to prefill its uncached tokens alone
                              * (cost_prefill_time): orders the engine's prefills in time */
};

/* The decode point of one band of decode batch on one TP size. */
struct cost_timed_point {
    double batch_lo, batch_hi; /* the band: mean turns in flight in [lo, hi) */
    size_t turns;              /* timed turns in it */
    struct cost_decode_point point;
};

/*
 * The decode points of timed turns (any order, of any engines). Each engine's turns are
 * replayed in order of sending: a turn's prefill ends at its first streamed chunk, or, not
 * streamed, prefill_s after the later of its sending and the end of the prefill before it
 * (first come first served); it then decodes until its end. A turn times its window — from
 * its first chunk to its end, generated − 1 iterations, when it streamed; else from its
 * sending to its end, generated − 1 iterations and one per prefill that ended in the window up
 * to its own (it waited those out) — at the mean count of its engine's turns decoding over the
 * window, their mean context (prompt + generated/2 each), and the prefills ending in the
 * window (their uncached tokens), each in an iteration of its own. Turns are grouped by TP
 * size and by band of that mean, [2^k, 2^(k+1)); a group becomes one serving point
 * (cost/points.h) of iteration-weighted means: the mean iteration a decoding turn saw. Turns
 * that time no iteration (no interval, no token after the first streamed one) and groups of
 * fewer than min_turns are counted in *unused. *out (owned, free it) holds the points, by TP
 * then band; returns their number. Pure and thread-safe.
 */
size_t cost_timed_points(const struct cost_timed_turn *turns, size_t n, size_t min_turns,
                         struct cost_timed_point **out, size_t *unused);

#endif
