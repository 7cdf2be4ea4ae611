/*
 * Fuzz harness for the importers (src/trace/import.c, import_verl.c, import_agent.c,
 * import_status.c). The first byte picks the format (its low 6 bits modulo 6: jsonl, csv, verl,
 * tau-bench, swe-agent, openai-chat), with its high bit a group size of 4, and with bit 6 (text
 * formats only) status rules of the fuzzer's own (anchored texts, several exit-code patterns);
 * the rest are the lines of one input file. Besides not crashing, every trajectory an importer
 * returns must pass trace_check_traj, since the trace writer would otherwise refuse it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct trace_importer *im, const struct trace_traj *t)
{
    if (trace_check_traj(t, trace_importer_header(im)->group_size, NULL) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    struct trace_import_options o = {.format = (enum trace_import_format)((data[0] & 0x3f) % 6),
                                     .group_size = data[0] & 0x80 ? 4 : 0};
    if ((data[0] & 0x40) && o.format >= TRACE_IMPORT_TAU_BENCH) {
        o.timeout_text = "^T,slow";
        o.exit_code_pattern = "rc,^code:,exit code";
        o.failure_text = "^E,fail";
    }
    struct trace_importer *im;
    if (trace_importer_new(&im, &o, NULL) != 0)
        abort();
    trace_importer_begin(im, "fuzz");
    const char *s = (const char *)data + 1, *end = (const char *)data + size;
    const struct trace_traj *t;
    int rc = 0;
    while (s < end && rc >= 0) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if ((rc = trace_importer_line(im, s, len, &t, NULL)) == 1)
            check(im, t);
        s += len + 1;
    }
    while (rc >= 0 && (rc = trace_importer_end(im, &t, NULL)) == 1)
        check(im, t);
    trace_importer_free(im);
    return 0;
}
