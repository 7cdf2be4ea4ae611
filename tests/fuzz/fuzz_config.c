/*
 * Fuzz harness for the config and preset loaders (src/spec/config.c, preset.c, schema.c). The
 * input is read as a user preset file, as a config file resolved against the presets, and —
 * after its first byte, which picks a key — as a command-line value. Besides not crashing or
 * leaking: an error's line lies within the input, an accepted preset file leaves presets that
 * print, and an accepted config printed as JSON reads back to the same config.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/config.h"
#include "util/alloc.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_position(const struct libra_error *err, const char *text, size_t size)
{
    int lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    if (err->line < 0 || err->line > lines || err->col < 0)
        abort();
}

static void as_presets(struct spec_presets *p, const char *text, size_t size)
{
    struct libra_error err;
    if (spec_presets_add_text(p, "fuzz.json", text, size, &err) != 0) {
        check_position(&err, text, size);
        return;
    }
    for (size_t i = 0; i < p->n_hardware; i++)
        json_decref(spec_hardware_to_json(&p->hardware[i]));
    for (size_t i = 0; i < p->n_models; i++)
        json_decref(spec_model_to_json(&p->models[i]));
}

/* An accepted config, printed and read back, is the same config. */
static void round_trip(const struct spec_presets *p, const struct libra_config *cfg)
{
    json_t *doc = spec_config_envelope(SPEC_CONFIG_SCHEMA, cfg),
           *sections = spec_config_to_json(cfg);
    json_object_update(doc, sections);
    char *text = ujson_dump(doc, false);
    struct ujson_doc back;
    struct libra_config again;
    struct libra_error err;
    if (ujson_doc_parse(&back, "back", text, strlen(text), &err) != 0)
        abort();
    struct spec_config_sources src = {.doc = &back};
    if (spec_config_resolve(&again, p, &src, &err) != 0 ||
        spec_config_digest(&again) != spec_config_digest(cfg))
        abort();
    ujson_doc_free(&back);
    free(text);
    json_decref(sections);
    json_decref(doc);
}

static void as_config(const struct spec_presets *p, const char *text, size_t size)
{
    struct ujson_doc doc;
    struct libra_error err;
    struct libra_config cfg;
    if (ujson_doc_parse(&doc, "fuzz.json", text, size, &err) != 0) {
        check_position(&err, text, size);
        return;
    }
    struct spec_config_sources src = {.doc = &doc};
    if (spec_config_resolve(&cfg, p, &src, &err) == 0)
        round_trip(p, &cfg);
    else
        check_position(&err, text, size);
    ujson_doc_free(&doc);
}

static void as_flag(const struct spec_presets *p, const uint8_t *data, size_t size)
{
    if (size == 0)
        return;
    size_t n;
    const struct spec_field *fields = spec_config_fields(&n);
    char *value = xstrndup((const char *)data + 1, size - 1);
    struct spec_config_override o = {fields[data[0] % n].key, value, "--fuzz"};
    struct spec_config_sources src = {.flags = &o, .n_flags = 1};
    struct libra_config cfg;
    struct libra_error err;
    if (spec_config_resolve(&cfg, p, &src, &err) == 0)
        round_trip(p, &cfg);
    else if (err.line != 0)
        abort(); /* a flag has no position */
    free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct spec_presets p;
    struct libra_error err;
    if (spec_presets_init(&p, &err) != 0)
        abort();
    as_presets(&p, text, size);
    as_config(&p, text, size);
    as_flag(&p, data, size);
    spec_presets_free(&p);
    return 0;
}
