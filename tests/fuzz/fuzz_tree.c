/*
 * Fuzz harness for the prefix-tree loader (sched_model_merge_json, src/sched/tree_json.c).
 * Besides not crashing, an accepted document must export to a form that imports again and
 * exports to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/model.h"
#include "util/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *load_and_export(const char *text, size_t len)
{
    struct ujson_doc doc;
    struct libra_error err;
    char *out = NULL;
    if (ujson_doc_parse(&doc, "fuzz", text, len, &err) != 0)
        return NULL;
    struct sched_model *m = sched_model_new(NULL);
    if (sched_model_merge_json(m, &doc, "", &err) == 0) {
        json_t *j = sched_model_to_json(m);
        out = ujson_dump(j, false);
        json_decref(j);
    }
    sched_model_free(m);
    ujson_doc_free(&doc);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *first = load_and_export((const char *)data, size);
    if (!first)
        return 0;
    char *second = load_and_export(first, strlen(first));
    if (!second || strcmp(first, second) != 0)
        abort();
    free(first);
    free(second);
    return 0;
}
