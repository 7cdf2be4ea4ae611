/*
 * Fuzz harness for the serving benchmark reader of `libra calibrate` (src/cost/import.c: vLLM
 * result objects and SGLang JSON Lines). Besides not crashing or leaking, aborts when:
 *
 *   - a refusal has no message, no file, or a position before line 1 or column 1;
 *   - a run read has no decoded request, more decoded or failed requests than it holds, a
 *     share of prompts prefilled among decodes outside 0..1, or a decode point that is not
 *     finite and positive (time, batch, context), a batch above the requests that decoded, or
 *     prefill below zero;
 *   - detection calls a text a trace or a verl log and the reader still takes it as runs
 *     without it starting with '{'.
 *
 * The corpus (tests/fuzz/corpus/calib_serving/) holds small results of both shapes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "cost/import.h"

static bool positive(double v)
{
    return isfinite(v) && v > 0.0;
}

static void check_run(const struct cost_serving_run *r)
{
    fuzz_require(r->line >= 1, "run without a line");
    fuzz_require(r->decoded >= 1 && r->decoded + r->failed <= r->requests, "request counts");
    struct cost_decode_point p;
    cost_serving_point(r, 1, &p);
    fuzz_require(positive(p.measured_s) && positive(p.decode_seqs) && positive(p.ctx_tokens),
                 "decode point not positive");
    fuzz_require(p.decode_seqs <= (double)r->decoded * (1.0 + 1e-9), "batch above the requests");
    fuzz_require(r->prefill_share >= 0.0 && r->prefill_share <= 1.0, "prefill share outside 0..1");
    fuzz_require(p.prefill_tokens >= 0.0 && p.prefill_seqs >= 0.0 && p.prefill_pairs >= 0.0,
                 "prefill below zero");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    cost_serving_runs runs = {0};
    struct libra_error err = {0};
    enum cost_import_kind kind = cost_import_detect(text, size);
    if (cost_import_serving("fuzz", text, size, &runs, &err) == 0) {
        fuzz_require(runs.n >= 1, "no run and no error");
        fuzz_require(kind == COST_IMPORT_SERVING || kind == COST_IMPORT_TRACE,
                     "runs from a non-JSON text");
        for (size_t i = 0; i < runs.n; i++)
            check_run(&runs.v[i]);
    } else {
        fuzz_require(err.msg[0] && strcmp(err.file, "fuzz") == 0, "refused without a message");
        fuzz_require(err.line >= 1 && err.col >= 1, "refused without a position");
    }
    vec_free(&runs);
    return 0;
}
