/*
 * Fuzz harness for util/json. Arbitrary bytes go through ujson_doc_parse; a rejected input must
 * carry a position, and for every document that parses three properties are checked, aborting
 * on a violation (so libFuzzer and the replay driver both report it):
 *
 *   - every path of the jansson tree (object members, with '~' and '/' escaped, and array
 *     elements) is found by ujson_locate, and the text at the reported line:col is that
 *     member's key, or parses to that element's value;
 *   - ujson_errorf reports the same position;
 *   - ujson_dump, compact and pretty, parses back to an equal tree (the float rule
 *     round-trips, strings are escaped).
 *
 * Whatever the bytes, ujson_utf8_repair makes them a string jansson takes, keeps their length
 * and changes nothing in one already valid (a second repair).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/vec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef VEC(char) path_buf;

static void require(bool ok, const char *what, const char *path)
{
    if (ok)
        return;
    fprintf(stderr, "fuzz_json: %s (path '%s')\n", what, path);
    abort();
}

/* The byte at 1-based line:col, col counting characters as ujson_locate does. */
static const char *text_at(const char *text, int line, int col, const char *path)
{
    const char *p = text;
    for (int l = 1; l < line; l++) {
        p = strchr(p, '\n');
        require(p != NULL, "line past the end of the text", path);
        p++;
    }
    for (int c = 1; c < col; c++) {
        require(*p && *p != '\n', "column past the end of the line", path);
        for (p++; ((unsigned char)*p & 0xC0) == 0x80; p++)
            ;
    }
    return p;
}

/* Locates path, checks that ujson_errorf reports the same position, returns the text there. */
static const char *locate(const struct ujson_doc *doc, const char *path)
{
    int line, col;
    require(ujson_locate(doc, path, &line, &col) == 0, "path not found", path);
    struct libra_error err;
    ujson_errorf(&err, doc, path, "probe");
    require(err.line == line && err.col == col, "ujson_errorf position differs", path);
    return text_at(doc->text, line, col, path);
}

/* Parses the JSON value that starts at *at, advancing *at past it; NULL when there is none. */
static json_t *read_value(const struct ujson_doc *doc, const char **at)
{
    json_error_t jerr;
    json_t *v = json_loadb(*at, doc->len - (size_t)(*at - doc->text),
                           JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &jerr);
    if (v)
        *at += jerr.position;
    return v;
}

/* The text at path's position parses to the element v. */
static void check_element(const struct ujson_doc *doc, const char *path, const json_t *v)
{
    const char *at = locate(doc, path);
    json_t *found = read_value(doc, &at);
    require(found && json_equal(found, v), "text at the position is not the element", path);
    json_decref(found);
}

/* The text at path's position is the member: key, ':', a value equal to v. */
static void check_member(const struct ujson_doc *doc, const char *path, const char *key,
                         const json_t *v)
{
    const char *at = locate(doc, path);
    json_t *found = read_value(doc, &at);
    require(json_is_string(found) && strcmp(json_string_value(found), key) == 0,
            "text at the position is not the key", path);
    json_decref(found);
    at += strspn(at, " \t\r\n");
    require(*at == ':', "no ':' after the key", path);
    at++;
    found = read_value(doc, &at);
    require(found && json_equal(found, v), "the value after the key differs", path);
    json_decref(found);
}

/* Appends '/' (unless at the root) and the escaped component to path. */
static void push_component(path_buf *path, size_t depth, const char *comp)
{
    if (depth > 0)
        vec_push(path, '/');
    for (const char *c = comp; *c; c++) {
        if (*c == '~' || *c == '/') {
            vec_push(path, '~');
            vec_push(path, *c == '~' ? '0' : '1');
        } else {
            vec_push(path, *c);
        }
    }
    vec_push(path, '\0');
    path->n--; /* keep it NUL-terminated without counting the NUL */
}

/* Checks every path below v, whose own path is path->v (depth components long). */
static void walk(const struct ujson_doc *doc, const json_t *v, path_buf *path, size_t depth)
{
    size_t mark = path->n;
    if (json_is_object(v)) {
        const char *key;
        json_t *member;
        json_object_foreach((json_t *)v, key, member)
        {
            push_component(path, depth, key);
            /* The top-level member "" has the root's path ""; only its children are reachable. */
            if (path->n > 0)
                check_member(doc, path->v, key, member);
            walk(doc, member, path, depth + 1);
            path->n = mark;
            path->v[mark] = '\0';
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            char index[24];
            snprintf(index, sizeof index, "%zu", i);
            push_component(path, depth, index);
            check_element(doc, path->v, json_array_get(v, i));
            walk(doc, json_array_get(v, i), path, depth + 1);
            path->n = mark;
            path->v[mark] = '\0';
        }
    }
}

static void check_dump_round_trips(const json_t *root, bool pretty)
{
    char *text = ujson_dump(root, pretty);
    json_t *back = json_loads(text, JSON_DECODE_ANY, NULL);
    require(back && json_equal(back, root), pretty ? "pretty dump differs" : "dump differs", "");
    json_decref(back);
    free(text);
}

/* The bytes up to the first NUL, repaired: a string json_string takes, as long as before, and
 * a fixed point of the repair. */
static void check_utf8_repair(const uint8_t *data, size_t size)
{
    char *s = xstrndup((const char *)data, size), *again;
    size_t n = strlen(s);
    ujson_utf8_repair(s);
    json_t *v = json_string(s);
    require(v != NULL && strlen(s) == n, "a repaired string jansson refuses", "");
    json_decref(v);
    again = xstrdup(s);
    require(strcmp(ujson_utf8_repair(again), s) == 0, "a second repair changed it", "");
    free(again);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_utf8_repair(data, size);
    struct ujson_doc doc;
    struct libra_error err;
    if (ujson_doc_parse(&doc, "fuzz", (const char *)data, size, &err) != 0) {
        require(err.line >= 1 && err.col >= 1 && err.msg[0], "error without a position", "");
        return 0;
    }
    check_element(&doc, "", doc.root);
    path_buf path = {0};
    vec_push(&path, '\0');
    path.n = 0;
    walk(&doc, doc.root, &path, 0);
    vec_free(&path);
    check_dump_round_trips(doc.root, false);
    check_dump_round_trips(doc.root, true);
    ujson_doc_free(&doc);
    return 0;
}
