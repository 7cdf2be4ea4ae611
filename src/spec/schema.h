/*
 * Table-driven settings: one row per key says its type, unit, default, range, documentation
 * and where the value lives in a C struct.
 *
 * The experiment config (spec/config.h) and the preset files (spec/preset.h) are both read
 * through these tables, so parsing, range checks, error messages, JSON output, `--help` and
 * docs/config.md come from one description and cannot disagree. Adding a setting is adding a
 * struct field and a row.
 */
#ifndef SPEC_SCHEMA_H
#define SPEC_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "libra/libra.h"
#include "util/json.h"

enum spec_type {
    SPEC_INT,    /* int or int64_t (by the row's size); JSON integer */
    SPEC_DOUBLE, /* double, finite; JSON number */
    SPEC_BOOL,   /* bool; JSON true/false */
    SPEC_STRING, /* char[size], NUL-terminated; JSON string */
    SPEC_ENUM,   /* an int-sized C enum holding the index into names; JSON string */
    SPEC_SET,    /* unsigned bitmask, bit i = names[i]; JSON array of names; min = fewest members */
    SPEC_LIST    /* char[size] holding "a,b,c"; JSON array of strings without commas */
};

/* Row flags. */
enum {
    SPEC_REQUIRED = 1u << 0, /* must be present in its JSON object (presets) */
    SPEC_ABOVE_MIN = 1u << 1 /* min is exclusive: "> 0" rather than ">= 0" */
};

struct spec_field {
    const char *key;          /* "cluster.gpus" (config) or "heads" (preset) */
    enum spec_type type;      /* how the value is read, stored and printed */
    unsigned flags;           /* SPEC_REQUIRED, SPEC_ABOVE_MIN */
    const char *unit;         /* "GPUs", "s", "bytes/s"; "" when unitless */
    double def;               /* default of INT, DOUBLE, BOOL (0/1), ENUM (index), SET (mask) */
    const char *def_str;      /* default of STRING and LIST; NULL means "" */
    double min, max;          /* inclusive range of INT and DOUBLE (see SPEC_ABOVE_MIN) */
    const char *const *names; /* ENUM and SET: allowed names, NULL-terminated */
    size_t offset;            /* offsetof the value in its struct */
    size_t size;              /* sizeof the value */
    const char *flag;         /* common command-line flag ("gpus" for --gpus), or NULL */
    unsigned readers;         /* config rows: the commands that read the key (spec/config.h
                               * enum spec_reader); 0 in other tables */
    const char *doc;          /* one sentence, lower case, no full stop */
};

/*
 * Row constructors: SPEC_INT_ROW(T, member, ...) describes T.member under the key "member"
 * (stringified, so "cluster.gpus" for member cluster.gpus: key and field cannot disagree).
 * Each checks the member's C type at compile time: a row of the wrong kind does not build.
 */
#define SPEC_MEMBER_(T, m) (((T *)0)->m)
#define SPEC_SIZE_(T, m, ok) (sizeof SPEC_MEMBER_(T, m) + 0 * sizeof(char[(ok) ? 1 : -1]))
#define SPEC_ROW_(T, m, type, fl, unit, def, dstr, lo, hi, names, ok, flag, readers, doc)          \
    {                                                                                              \
#m, type, fl, unit, def, dstr, lo, hi, names, offsetof(T, m), SPEC_SIZE_(T, m, ok), flag,  \
            readers, doc                                                                           \
    }
#define SPEC_INT_ROW(T, m, fl, unit, def, lo, hi, flag, readers, doc)                              \
    SPEC_ROW_(T, m, SPEC_INT, fl, unit, def, NULL, lo, hi, NULL,                                   \
              _Generic(SPEC_MEMBER_(T, m), int : 1, int64_t : 1, default : 0), flag, readers, doc)
#define SPEC_DOUBLE_ROW(T, m, fl, unit, def, lo, hi, flag, readers, doc)                           \
    SPEC_ROW_(T, m, SPEC_DOUBLE, fl, unit, def, NULL, lo, hi, NULL,                                \
              _Generic(SPEC_MEMBER_(T, m), double : 1, default : 0), flag, readers, doc)
#define SPEC_BOOL_ROW(T, m, fl, def, flag, readers, doc)                                           \
    SPEC_ROW_(T, m, SPEC_BOOL, fl, "", def, NULL, 0, 1, NULL,                                      \
              _Generic(SPEC_MEMBER_(T, m), bool : 1, default : 0), flag, readers, doc)
#define SPEC_STRING_ROW(T, m, fl, def, flag, readers, doc)                                         \
    SPEC_ROW_(T, m, SPEC_STRING, fl, "", 0, def, 0, 0, NULL,                                       \
              _Generic(SPEC_MEMBER_(T, m), char * : 1, default : 0), flag, readers, doc)
#define SPEC_LIST_ROW(T, m, fl, def, flag, readers, doc)                                           \
    SPEC_ROW_(T, m, SPEC_LIST, fl, "", 0, def, 0, 0, NULL,                                         \
              _Generic(SPEC_MEMBER_(T, m), char * : 1, default : 0), flag, readers, doc)
#define SPEC_ENUM_ROW(T, m, fl, names, def, flag, readers, doc)                                    \
    SPEC_ROW_(T, m, SPEC_ENUM, fl, "", def, NULL, 0, 0, names,                                     \
              sizeof SPEC_MEMBER_(T, m) == sizeof(int), flag, readers, doc)
#define SPEC_SET_ROW(T, m, fl, names, def, min_members, flag, readers, doc)                        \
    SPEC_ROW_(T, m, SPEC_SET, fl, "", def, NULL, min_members, 0, names,                            \
              _Generic(SPEC_MEMBER_(T, m), unsigned : 1, default : 0), flag, readers, doc)

/* Writes every field's default into base (the struct the rows describe). */
void spec_fields_defaults(const struct spec_field *fields, size_t n, void *base);

/* The row whose key is key (exact match), or NULL. */
const struct spec_field *spec_field_find(const struct spec_field *fields, size_t n,
                                         const char *key);

/*
 * Writes to hint (size bytes) " (did you mean 'KEY'?)" for the row key closest to word by edit
 * distance (at most 2 edits), considering only keys that start with prefix; "" when none is
 * close. The prefix itself is not part of word ("gpu" vs "cluster.gpus" with prefix
 * "cluster.").
 */
void spec_fields_suggest(const struct spec_field *fields, size_t n, const char *prefix,
                         const char *word, char *hint, size_t size);

/* Like spec_fields_suggest over a NULL-terminated list of words. */
void spec_suggest(const char *const *candidates, const char *word, char *hint, size_t size);

/*
 * Checks v against the row (type, range, allowed names, length) and stores it into base.
 * Returns 0, or LIBRA_EINVAL with why (size bytes) saying what is wrong, e.g. "must be in
 * 1..65536" (also for an INT row's whole number written as a real past int64, 1e30); base is
 * then unchanged.
 */
int spec_field_set(const struct spec_field *f, void *base, const json_t *v, char *why, size_t size);

/*
 * Converts a command-line value to the JSON value the row expects: "48" → 48, "true" → true,
 * "a,b" → ["a","b"] for SET and LIST; strings and enum names pass through. Returns a new
 * reference, or NULL with why set when text is not of the row's type; for an INT row, a whole
 * number it cannot take as written and outside the row's range (one past int64, 1e30) is
 * refused by the range ("must be in 1..65536"), as spec_field_set refuses a file's.
 */
json_t *spec_field_parse_text(const struct spec_field *f, const char *text, char *why, size_t size);

/* The value of the row in base as JSON (a new reference). */
json_t *spec_field_get(const struct spec_field *f, const void *base);

/* The value of the row in base as a command line gives it (what spec_field_parse_text reads
 * back to the same value): "48", "true", "cmlfq", "colocated,libra". Malloc'd. */
char *spec_field_text(const struct spec_field *f, const void *base);

/*
 * Reads the members of the JSON object obj, found at path in doc, into base: member KEY is the
 * row prefix + KEY. Unknown keys (with a suggestion), wrong types and bad values fail with err
 * at the member's file:line:col and its dotted path; an absent SPEC_REQUIRED row fails at the
 * object's position. Returns 0 or LIBRA_EINVAL; base may be partly written on error.
 */
int spec_fields_read(const struct spec_field *fields, size_t n, const char *prefix,
                     const struct ujson_doc *doc, const char *path, const json_t *obj, void *base,
                     struct libra_error *err);

/*
 * Returns a new JSON object holding every row that starts with prefix, keyed by the rest of
 * its key, with its value in base.
 */
json_t *spec_fields_to_json(const struct spec_field *fields, size_t n, const char *prefix,
                            const void *base);

/* Writes the row's type in words ("int", "one of drain, keep", "set of a, b") to out. */
void spec_field_type_text(const struct spec_field *f, char *out, size_t size);

/* Writes the row's range ("1..65536", "> 0", ">= 0"; "" when unbounded or not numeric). */
void spec_field_range_text(const struct spec_field *f, char *out, size_t size);

/*
 * Writes a markdown table of the rows starting with prefix (key, type, unit, default, range,
 * flag, description) to out. defaults points to a struct holding the defaults (rows flagged
 * SPEC_REQUIRED print "required").
 */
void spec_fields_doc(FILE *out, const struct spec_field *fields, size_t n, const char *prefix,
                     const void *defaults);

#endif
