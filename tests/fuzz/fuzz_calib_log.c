/*
 * Fuzz harness for the trainers' log readers of `libra calibrate` (src/cost/import.c: verl's
 * console log and Megatron-LM's) and the training points they make. Every input goes through
 * both readers. Besides not crashing or leaking, aborts when:
 *
 *   - a refusal has no message, or a position outside the text's lines and columns;
 *   - a step read has a time, token count or sequence length that is not finite and positive,
 *     or a line that does not exist;
 *   - a training point made of a step (with the defaults, the layout the log states, the
 *     step's GPUs or 8) has other than tokens / length sequences, a layout that does not add up
 *     to its GPUs, or a refusal without a reason.
 *
 * The corpus (tests/fuzz/corpus/calib_log/) holds console lines of verl's logger and
 * Megatron-LM logs (an arguments block and iteration lines).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "cost/calib.h"
#include "cost/import.h"

static int count_lines(const char *text, size_t size)
{
    int lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    return lines;
}

/* The step as a training point, when it is small enough to cost quickly. */
static void check_point(const struct cost_log_step *st)
{
    if (st->tokens / st->seq_tokens > 4096.0)
        return;
    struct cost_shape shape;
    struct cost_import_options o = {0};
    struct cost_train_seqs seqs;
    struct cost_train_point pt;
    char why[200] = "";
    cost_shape_init(&shape, cost_ref_model(COST_REF_QWEN25_7B));
    struct cost_log_step s = *st;
    if (!(s.gpus >= 0.5 && s.gpus < 1e6))
        s.gpus = 8.0;
    if (s.layout.given & (1u << COST_OPT_GPUS))
        s.gpus = (double)s.layout.value[COST_OPT_GPUS];
    if (cost_log_point(&s, &o, &shape, &seqs, &pt, why, sizeof why) != 0) {
        fuzz_require(why[0] != '\0', "point refused without a reason");
        return;
    }
    const struct cost_train_config *c = &pt.config;
    fuzz_require(seqs.n >= 1 && (double)seqs.n >= (double)c->dp * c->minibatches, "sequences");
    fuzz_require(lround(s.gpus) == (long)c->tp * c->pp * c->cp * c->dp, "layout and GPUs");
    cost_train_seqs_free(&seqs);
}

typedef int reader(const char *name, const char *text, size_t len, cost_log_steps *out,
                   size_t *skipped, struct libra_error *err);

static void read_with(reader *read, const char *text, size_t size)
{
    cost_log_steps steps = {0};
    struct libra_error err = {0};
    size_t skipped = 0;
    int lines = count_lines(text, size);
    if (read("fuzz", text, size, &steps, &skipped, &err) == 0) {
        for (size_t i = 0; i < steps.n; i++) {
            const struct cost_log_step *s = &steps.v[i];
            fuzz_require(s->line >= 1 && s->line <= lines, "step on no line");
            fuzz_require(isfinite(s->update_s) && s->update_s > 0.0 && isfinite(s->tokens) &&
                             s->tokens > 0.0 && isfinite(s->seq_tokens) && s->seq_tokens > 0.0,
                         "step values");
            check_point(s);
        }
    } else {
        fuzz_require(err.msg[0] && strcmp(err.file, "fuzz") == 0, "refused without a message");
        fuzz_require(err.line >= 1 && err.line <= lines && err.col >= 1,
                     "refused without a position");
    }
    vec_free(&steps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_with(cost_import_verl, (const char *)data, size);
    read_with(cost_import_megatron, (const char *)data, size);
    return 0;
}
