/*
 * util.h - small helpers shared by server/, store/ and client/: a growable
 * buffer with a hard cap, hex/base64 encoding, SHA-256, RFC 3339 time and the
 * name/digest validators of docs/contract.md ("Conventions").
 *
 * All functions are thread-safe; none keeps global state.
 */
#ifndef MG_UTIL_H
#define MG_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mg.h"

/*
 * A byte buffer that refuses to grow past `max` (curl's dynbuf "toobig").
 * The data is always NUL-terminated so text can be used as a C string.
 */
struct mg_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
};

/* Initialise an empty buffer that may hold at most max bytes. */
void mg_buf_init(struct mg_buf *b, size_t max);

/* Append n bytes. MG_ETOOBIG if the cap would be exceeded (nothing appended),
 * MG_ENOMEM if allocation fails. */
enum mg_code mg_buf_append(struct mg_buf *b, const void *p, size_t n);

/* Append a NUL-terminated string. */
enum mg_code mg_buf_puts(struct mg_buf *b, const char *s);

/* Free the storage; the buffer is empty and reusable afterwards. */
void mg_buf_release(struct mg_buf *b);

/* Lowercase hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void mg_hex_encode(const uint8_t *in, size_t n, char *out);

/* Parse 2n lowercase/uppercase hex chars into n bytes. Returns false on bad input. */
bool mg_hex_decode(const char *hex, size_t n, uint8_t *out);

/* SHA-256 of a buffer, as 64 lowercase hex chars + NUL. */
/* SHA-256 of data (thread-safe; the algorithm is looked up once). */
void mg_sha256(const void *data, size_t n, uint8_t out[32]);
void mg_sha256_hex(const void *data, size_t n, char out[65]);

/* Standard base64 with padding, no newlines. Returns a malloc'd string or NULL. */
char *mg_base64_encode(const uint8_t *in, size_t n);

/* Decode standard base64 (padding required). Returns malloc'd bytes (*out_len set) or NULL. */
uint8_t *mg_base64_decode(const char *in, size_t in_len, size_t *out_len);

/* Cryptographically secure random bytes. Returns false if the RNG failed. */
bool mg_random_bytes(void *out, size_t n);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME; tests may set it off by
 * MODELGATED_TEST_CLOCK_SKEW_MS). Times other replicas compare (leases, deadlines,
 * sessions, queue order) use the database's clock instead: store_clock_ms. */
int64_t mg_now_ms(void);

/* Milliseconds from CLOCK_MONOTONIC, for durations. */
int64_t mg_mono_ms(void);

/* Format ms since epoch as "2026-11-21T10:00:00.123Z" into out (at least 32 bytes). */
void mg_time_format(int64_t ms, char out[32]);

/* Parse "2026-11-21T10:00:00.123Z" (what mg_time_format writes). */
bool mg_time_parse(const char *s, int64_t *ms);

/* Validators of docs/contract.md's names. They take length-delimited input. */
bool mg_valid_model_name(const char *s, size_t n);
bool mg_valid_alias_name(const char *s, size_t n);
bool mg_valid_gateway_name(const char *s, size_t n);

/* "sha256:" followed by exactly 64 lowercase hex chars. */
bool mg_valid_digest(const char *s, size_t n);

/* "<repository>[:tag]@sha256:<64 hex>" with a non-empty repository. */
bool mg_valid_image_ref(const char *s, size_t n);

/* Parse a decimal integer in [min, max] from a whole string. */
bool mg_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Parse a size with optional K/M/G/T suffix (powers of 1024). */
bool mg_parse_size(const char *s, uint64_t *out);

/* Constant-time comparison of two equal-length byte strings. */
bool mg_ct_equal(const void *a, const void *b, size_t n);

/* FNV-1a of a NUL-terminated string: a slot for a name in a fixed table (not for secrets). */
uint32_t mg_fnv1a(const char *s);

#endif
