/*
 * json.h - JSON values as reply text, in one pass.
 *
 * Thread-safe; nothing here keeps state.
 */
#ifndef MG_COMMON_JSON_H
#define MG_COMMON_JSON_H

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

#endif
