/*
 * json.h - JSON values as reply text, in one pass.
 *
 * Thread-safe; nothing here keeps state.
 */
#ifndef MG_COMMON_JSON_H
#define MG_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * v as compact JSON text (new; free() it), or NULL when out of memory, when a string is not
 * valid UTF-8, or past 1 GiB. Byte for byte what
 * mg_json_short_reals(json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)))
 * gives: object members in insertion order, every real as the shortest text that reads back as
 * the same double ("0.942", never "0.94199999999999995"), with ".0" when it would otherwise
 * read as an integer. It walks v once into one buffer instead of printing every real twice and
 * scanning the text again. *len (when not NULL) is the text's length.
 */
char *mg_json_text(const json_t *v, size_t *len);

/*
 * A JSON document written member by member into one buffer, with mg_json_text's text rules
 * (escapes, shortest reals): for replies built straight from rows, without a json_t per
 * member. Commas are the writer's; after mg_jw_key exactly one value (or obj/arr) follows.
 * Start with struct mg_jw w = {0}; end with mg_jw_done (the text, or NULL on out of memory,
 * invalid UTF-8 or nesting past 63) or mg_jw_free.
 */
struct mg_jw {
    char *p;
    size_t n, cap;
    bool failed;
    bool after_key;
    unsigned depth;
    uint64_t more; /* bit d: depth d already holds a value */
};

void mg_jw_obj(struct mg_jw *w);
void mg_jw_obj_end(struct mg_jw *w);
void mg_jw_arr(struct mg_jw *w);
void mg_jw_arr_end(struct mg_jw *w);
void mg_jw_key(struct mg_jw *w, const char *key);
void mg_jw_str(struct mg_jw *w, const char *s, size_t n); /* s NULL: null */
void mg_jw_int(struct mg_jw *w, int64_t v);
void mg_jw_real(struct mg_jw *w, double v);
void mg_jw_null(struct mg_jw *w);
void mg_jw_value(struct mg_jw *w, const json_t *v); /* NULL: null */
/* JSON text as json_dumps(JSON_COMPACT | JSON_REAL_PRECISION(17)) wrote it (a stored
 * document), its reals shortened as mg_json_text writes them; copied otherwise. */
void mg_jw_raw(struct mg_jw *w, const char *json, size_t n);
/* Continue the object whose whole text is text (as mg_json_text wrote it) on an empty w:
 * the members written next come before its closing brace (end with mg_jw_obj_end). */
void mg_jw_reopen(struct mg_jw *w, const char *text, size_t n);
/* bytes as they are: text another mg_jw wrote, commas and all (the caller's part). */
void mg_jw_bytes(struct mg_jw *w, const char *bytes, size_t n);
char *mg_jw_done(struct mg_jw *w, size_t *len);
void mg_jw_free(struct mg_jw *w);

#endif
