/*
 * weights_int.h - what the weight-header readers (safetensors.c, gguf.c, onnx.c) and
 * introspect.c share: a buffered, bounded byte source over a file, an archive member or a
 * buffer (the scanner reads through it too), and the per-file result they fill.
 *
 * A source counts the bytes it has handed out (off), so every reader can name the byte
 * offset of what it refuses. Reading past `size` (when known) or past the end of the data
 * is "truncated at byte offset N", never a short read taken for data.
 */
#ifndef ART_WEIGHTS_INT_H
#define ART_WEIGHTS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "../base/mg.h"

/* introspect.h: the readers' caps. Only a pointer here, so this header does not include
 * introspect.h (introspect.c includes this one); each reader includes it for the fields. */
struct art_introspect_limits;

#define ART_SRC_BUF 65536

struct art_src {
    /* Read up to n bytes into buf: the count, 0 at the end, -1 on an I/O error (err set). */
    ssize_t (*read)(void *ctx, void *buf, size_t n, struct mg_error *err);
    /* Skip n bytes without reading them, or NULL (then they are read and dropped). */
    enum mg_code (*seek_ahead)(void *ctx, uint64_t n, struct mg_error *err);
    void *ctx;
    uint64_t size;      /* bytes in the whole file or member; UINT64_MAX when unknown */
    const char *name;   /* the archive member's path, or NULL for the blob itself */
    const char *format; /* what is being read, for messages ("safetensors", …) */
    uint64_t off;       /* bytes consumed so far */
    bool cap_hit;       /* a reader stopped at one of the caps, not at a malformed byte */
    /* The same bytes lie in region_fd from region_off on (an uncompressed tar's member):
     * what needs to seek in them (a zip) preads them there instead of copying them out. */
    /* optional: up to n bytes without a copy (*p valid until the next call), as read */
    ssize_t (*borrow)(void *ctx, const void **p, size_t n, struct mg_error *err);
    bool region;
    int region_fd;
    uint64_t region_off;
    size_t pos, len; /* buf[pos, len) is read but not yet consumed */
    uint8_t buf[ART_SRC_BUF];
};

/* Record "malformed <format> header <where> at byte offset <off>: <why>" in err. */
enum mg_code art_src_fail(const struct art_src *s, uint64_t off, struct mg_error *err,
                          const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Copy exactly n bytes into out; at the end of the data: "truncated" with the offset. */
enum mg_code art_src_read(struct art_src *s, void *out, size_t n, struct mg_error *err);

/* Skip exactly n bytes (seeking when the source can). */
enum mg_code art_src_skip(struct art_src *s, uint64_t n, struct mg_error *err);

/* Bytes left before the end of the file or member (UINT64_MAX when unknown). */
uint64_t art_src_left(const struct art_src *s);

enum mg_code art_src_u32(struct art_src *s, uint32_t *v, struct mg_error *err);
enum mg_code art_src_u64(struct art_src *s, uint64_t *v, struct mg_error *err);

/* Peek at up to n bytes without consuming them: *got is how many are there. */
enum mg_code art_src_peek(struct art_src *s, size_t n, const uint8_t **p, size_t *got,
                          struct mg_error *err);

/* a * b and a + b, false on overflow. */
static inline bool art_mul(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool art_add(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/*
 * One file's summary, as the readers fill it: the JSON members of docs/contract.md's
 * "introspection" for this file. `dtypes` counts parameters (elements) per dtype name.
 */
struct art_weights {
    const char *format; /* "safetensors", "gguf", "onnx" (static) */
    uint64_t tensors;
    uint64_t parameters;
    uint64_t weights_bytes;
    json_t *dtypes;   /* {"F16": N, …} */
    json_t *metadata; /* {…} */
    json_t *inputs;   /* [{"name","dtype","shape"}] or NULL (ONNX only) */
    json_t *outputs;
    bool data_complete; /* the file holds every tensor's bytes */
};

void art_weights_init(struct art_weights *w, const char *format);
void art_weights_release(struct art_weights *w);

/* Count one tensor of n elements and b bytes under dtype. */
enum mg_code art_weights_add(struct art_weights *w, const struct art_src *s, uint64_t at,
                             const char *dtype, uint64_t n, uint64_t b, struct mg_error *err);

enum mg_code art_safetensors_read(struct art_src *s, const struct art_introspect_limits *lim,
                                  struct art_weights *w, struct mg_error *err);
enum mg_code art_gguf_read(struct art_src *s, const struct art_introspect_limits *lim,
                           struct art_weights *w, struct mg_error *err);
enum mg_code art_onnx_read(struct art_src *s, const struct art_introspect_limits *lim,
                           struct art_weights *w, struct mg_error *err);

/* How a plain blob's first bytes look: "gguf", "safetensors", "onnx" or NULL. */
const char *art_sniff(const uint8_t *p, size_t n, uint64_t size);

#endif
