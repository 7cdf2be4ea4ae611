/*
 * Fuzz harness for the fleet text of `libra emu --instances` ("tp1x4,tp2x2,tp4"; spec_fleet_parse,
 * src/spec/bucket.c). The first byte picks the most instances allowed (1 to 256, as the command's
 * own cap), the rest is the text. Besides not crashing: an accepted fleet has 1 to max instances,
 * each of TP 1, 2, 4 or 8, at least one per comma-separated item, and its text written back in
 * runs ("tp2x3") parses to the same instances; a refusal is at name:1:COL with COL inside the text
 * (or just past its end) and a message, and writes no instance past max.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "spec/bucket.h"
#include "util/alloc.h"

#define FLEET_MAX 256 /* libra emu's cap on instances */
#define GUARD -7      /* a slot the parser must not write */

/* tp[0..n) written back as the parser's input, consecutive equal sizes as one "tpNxK" item. */
static char *fleet_text(const int *tp, int n)
{
    char *out = xmalloc((size_t)n * 16 + 1), *at = out;
    *at = '\0';
    for (int i = 0; i < n;) {
        int k = i;
        while (k < n && tp[k] == tp[i])
            k++;
        at += sprintf(at, "%stp%dx%d", i ? "," : "", tp[i], k - i);
        i = k;
    }
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int max = 1 + data[0] % FLEET_MAX;
    char *text = xstrndup((const char *)data + 1, size - 1);
    int tp[FLEET_MAX + 1], n = -1;
    for (int i = 0; i <= FLEET_MAX; i++)
        tp[i] = GUARD;
    struct libra_error err;
    memset(&err, 0, sizeof err);
    if (spec_fleet_parse(text, "--instances", tp, max, &n, &err) == 0) {
        int items = 1;
        for (const char *c = text; *c; c++)
            items += *c == ',';
        fuzz_require(n >= items && n <= max, "an accepted fleet's size is out of bounds");
        for (int i = 0; i < n; i++)
            fuzz_require(tp[i] == 1 || tp[i] == 2 || tp[i] == 4 || tp[i] == 8,
                         "a TP size not 1/2/4/8");
        char *again = fleet_text(tp, n);
        int tp2[FLEET_MAX + 1], n2 = -1;
        struct libra_error err2;
        fuzz_require(spec_fleet_parse(again, "again", tp2, max, &n2, &err2) == 0,
                     "the fleet written back is refused");
        fuzz_require(n2 == n && memcmp(tp, tp2, (size_t)n * sizeof *tp) == 0,
                     "the fleet written back reads as another");
        free(again);
    } else {
        fuzz_require(err.msg[0] != '\0', "a refusal without a message");
        fuzz_require(strcmp(err.file, "--instances") == 0, "a refusal not named after the flag");
        fuzz_require(err.line == 1 && err.col >= 1 && (size_t)err.col <= strlen(text) + 1,
                     "a refusal outside the text");
    }
    fuzz_require(tp[max] == GUARD, "an instance written past max");
    free(text);
    return 0;
}
