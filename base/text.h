/*
 * text.h - bytes from the network that end up in text: request paths, methods, log lines.
 *
 * Every function here is pure and thread-safe.
 */
#ifndef MG_COMMON_TEXT_H
#define MG_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* n bytes at s are well-formed UTF-8 (no overlong forms, no surrogates, ≤ U+10FFFF). */
bool mg_utf8_valid(const char *s, size_t n);

/*
 * Why a raw request target (as sent, before percent-decoding) is refused, or NULL when it
 * is acceptable. The path part (up to '?') must hold, raw or percent-encoded, no NUL, no
 * control character (< 0x20, 0x7f), no malformed '%' escape, and decode to valid UTF-8.
 * The reason is a fixed sentence that never echoes the bytes.
 */
const char *mg_request_target_problem(const char *target);

/* A method is a standard one (GET HEAD POST PUT PATCH DELETE OPTIONS), else "other": the
 * only values a metrics label or a log may take from the client's method. Returns a static
 * string. */
const char *mg_method_label(const char *method);

/* The method is an RFC 9110 token of 1..32 characters. */
bool mg_method_valid(const char *method);

/*
 * Copy s into out (cap bytes, always NUL-terminated, cut on a character boundary) so it
 * can stand in a log line: control characters, '\' and bytes that are not part of valid
 * UTF-8 become "\xNN" (text), so one request is always one line and nobody can forge
 * another. With for_json, control characters are kept for the JSON encoder to write as
 * \uXXXX and only invalid bytes and '\' are rewritten, so the result is valid UTF-8.
 * Returns out.
 */
char *mg_log_escape(const char *s, char *out, size_t cap, bool for_json);

/*
 * Write value into out (cap bytes, NUL-terminated) escaped as a Prometheus text-format
 * label value: '\' → "\\", '"' → "\"", newline → "\n"; bytes that are not valid UTF-8
 * become '?'. Cut (on a character boundary) to fit. Returns out.
 */
char *mg_prom_label(const char *value, char *out, size_t cap);

/* v in decimal, as %lld writes it, without snprintf (most of an integer's cost there): the
 * digits are written to end at out's last byte; returns where they start, *len their count
 * (no NUL). */
#define MG_FMT_INT_LEN 24
const char *mg_fmt_i64(int64_t v, char out[MG_FMT_INT_LEN], size_t *len);

/* The shortest decimal text (%.15g, %.16g or %.17g) that reads back as the same double,
 * into out (cap bytes, 32 is always enough). Returns out. */
char *mg_fmt_double(double v, char *out, size_t cap);

/*
 * json, as jansson writes it (JSON_REAL_PRECISION(17): every real reads back exactly),
 * with every real number rewritten as mg_fmt_double's text ("0.942", never
 * "0.94199999999999995"), ".0" added where that text would read as an integer. Integers,
 * strings and everything else are copied as they are. Returns a new string (free it), or
 * NULL when out of memory.
 */
char *mg_json_short_reals(const char *json);

#endif
