/*
 * weights_writer.h - the tests' own writers of weight files, to the published layouts:
 * safetensors (8-byte little-endian header length, JSON header, tensor data) and GGUF v2/v3
 * (magic, version, counts, typed key/value pairs, tensor infos, aligned data). Independent of
 * artifact/: they share no code with the readers under test.
 *
 * A struct wbuf grows on the heap; every helper aborts on out-of-memory (test code).
 */
#ifndef TEST_WEIGHTS_WRITER_H
#define TEST_WEIGHTS_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wbuf {
    uint8_t *p;
    size_t n, cap;
};

static inline void wb_put(struct wbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            abort();
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

static inline void wb_le(struct wbuf *b, uint64_t v, int bytes)
{
    uint8_t x[8];
    int i;

    for (i = 0; i < bytes; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    wb_put(b, x, (size_t)bytes);
}

static inline void wb_zeros(struct wbuf *b, size_t n)
{
    static const uint8_t z[4096];

    while (n > 0) {
        size_t k = n < sizeof(z) ? n : sizeof(z);
        wb_put(b, z, k);
        n -= k;
    }
}

static inline void wb_free(struct wbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* ---- safetensors ------------------------------------------------------------------------ */

struct st_tensor {
    const char *name;
    const char *dtype;
    unsigned elem_bytes;
    int ndims;
    uint64_t dims[4];
};

/* A safetensors file: header (tensors laid out in order, no gaps), optional __metadata__
 * JSON object text, data filled with a byte pattern. */
static inline void st_write(struct wbuf *b, const struct st_tensor *t, size_t n,
                            const char *metadata)
{
    struct wbuf h = {0};
    char tmp[512];
    uint64_t off = 0, bytes;
    size_t i;
    int d;

    wb_put(&h, "{", 1);
    if (metadata) {
        snprintf(tmp, sizeof(tmp), "\"__metadata__\":%s%s", metadata, n ? "," : "");
        wb_put(&h, tmp, strlen(tmp));
    }
    for (i = 0; i < n; i++) {
        bytes = t[i].elem_bytes;
        snprintf(tmp, sizeof(tmp), "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "",
                 t[i].name, t[i].dtype);
        wb_put(&h, tmp, strlen(tmp));
        for (d = 0; d < t[i].ndims; d++) {
            snprintf(tmp, sizeof(tmp), "%s%llu", d ? "," : "", (unsigned long long)t[i].dims[d]);
            wb_put(&h, tmp, strlen(tmp));
            bytes *= t[i].dims[d];
        }
        snprintf(tmp, sizeof(tmp), "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + bytes));
        wb_put(&h, tmp, strlen(tmp));
        off += bytes;
    }
    wb_put(&h, "}", 1);
    while (h.n % 8 != 0) /* the format allows padding the header with spaces */
        wb_put(&h, " ", 1);
    wb_le(b, h.n, 8);
    wb_put(b, h.p, h.n);
    for (; off > 0; off--)
        wb_put(b, &(uint8_t){(uint8_t)off}, 1);
    wb_free(&h);
}

/* ---- GGUF ----------------------------------------------------------------------------------- */

enum {
    G_U8,
    G_I8,
    G_U16,
    G_I16,
    G_U32,
    G_I32,
    G_F32,
    G_BOOL,
    G_STRING,
    G_ARRAY,
    G_U64,
    G_I64,
    G_F64
};

static inline void gg_str(struct wbuf *b, const char *s)
{
    wb_le(b, strlen(s), 8);
    wb_put(b, s, strlen(s));
}

static inline void gg_header(struct wbuf *b, uint32_t version, uint64_t ntensors, uint64_t nkv)
{
    wb_put(b, "GGUF", 4);
    wb_le(b, version, 4);
    wb_le(b, ntensors, 8);
    wb_le(b, nkv, 8);
}

static inline void gg_kv_u32(struct wbuf *b, const char *k, uint32_t v)
{
    gg_str(b, k);
    wb_le(b, G_U32, 4);
    wb_le(b, v, 4);
}

static inline void gg_kv_u64(struct wbuf *b, const char *k, uint64_t v)
{
    gg_str(b, k);
    wb_le(b, G_U64, 4);
    wb_le(b, v, 8);
}

static inline void gg_kv_str(struct wbuf *b, const char *k, const char *v)
{
    gg_str(b, k);
    wb_le(b, G_STRING, 4);
    gg_str(b, v);
}

static inline void gg_kv_f32(struct wbuf *b, const char *k, float v)
{
    uint32_t u;

    memcpy(&u, &v, 4);
    gg_str(b, k);
    wb_le(b, G_F32, 4);
    wb_le(b, u, 4);
}

/* An array of n strings "tok0", "tok1", … (a tokenizer vocabulary). */
static inline void gg_kv_str_array(struct wbuf *b, const char *k, size_t n)
{
    char tok[32];
    size_t i;

    gg_str(b, k);
    wb_le(b, G_ARRAY, 4);
    wb_le(b, G_STRING, 4);
    wb_le(b, n, 8);
    for (i = 0; i < n; i++) {
        snprintf(tok, sizeof(tok), "tok%zu", i);
        gg_str(b, tok);
    }
}

/* One tensor info: ne[0] is the fastest dimension, as ggml writes it. */
static inline void gg_tensor(struct wbuf *b, const char *name, int nd, const uint64_t *ne,
                             uint32_t type, uint64_t offset)
{
    int i;

    gg_str(b, name);
    wb_le(b, (uint64_t)nd, 4);
    for (i = 0; i < nd; i++)
        wb_le(b, ne[i], 8);
    wb_le(b, type, 4);
    wb_le(b, offset, 8);
}

static inline void gg_align(struct wbuf *b, size_t a)
{
    while (b->n % a != 0)
        wb_put(b, "", 1);
}

/* A llama-shaped decoder: the hyperparameters a GGUF's metadata carries. */
struct gg_llama {
    uint64_t vocab, embd, ffn, layers, heads, kv_heads, ctx;
};

/* Its parameter count, from the architecture alone (embeddings, output, and per block the
 * two norms, q/k/v/o projections and the three feed-forward matrices). */
static inline uint64_t gg_llama_params(const struct gg_llama *m)
{
    uint64_t head_dim = m->embd / m->heads, kv = m->kv_heads * head_dim;
    uint64_t block = 2 * m->embd + 2 * m->embd * m->embd + 2 * m->embd * kv + 3 * m->embd * m->ffn;

    return 2 * m->vocab * m->embd + m->embd + m->layers * block;
}

/*
 * A GGUF header of that model (general.architecture "llama", its context length, block
 * count, embedding length, head counts, a tokenizer vocabulary array), F16 matrices and F32
 * norms, offsets aligned to 32. Only the header is written: the data section is left out
 * (with_data false) or zero-filled (with_data true, for small models). *data_bytes receives
 * the size the data section would have.
 */
static inline void gg_llama_write(struct wbuf *b, uint32_t version, const struct gg_llama *m,
                                  int with_data, uint64_t *data_bytes)
{
    static const char *const mats[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                       "ffn_gate", "ffn_up", "ffn_down"};
    uint64_t kv = m->kv_heads * (m->embd / m->heads), off = 0, ne[2], bytes;
    char name[64];
    uint64_t l;
    int i;

#define GG_T(nm, nd, a, c, type, esz)                                                              \
    do {                                                                                           \
        ne[0] = (a);                                                                               \
        ne[1] = (c);                                                                               \
        gg_tensor(b, nm, nd, ne, type, off);                                                       \
        bytes = (a) * ((nd) == 2 ? (c) : 1) * (esz);                                               \
        off += (bytes + 31) / 32 * 32;                                                             \
    } while (0)

    gg_header(b, version, 3 + m->layers * 9, 10);
    gg_kv_str(b, "general.architecture", "llama");
    gg_kv_str(b, "general.name", "test-7b");
    gg_kv_u32(b, "llama.context_length", (uint32_t)m->ctx);
    gg_kv_u32(b, "llama.embedding_length", (uint32_t)m->embd);
    gg_kv_u32(b, "llama.block_count", (uint32_t)m->layers);
    gg_kv_u32(b, "llama.feed_forward_length", (uint32_t)m->ffn);
    gg_kv_u32(b, "llama.attention.head_count", (uint32_t)m->heads);
    gg_kv_u32(b, "llama.attention.head_count_kv", (uint32_t)m->kv_heads);
    gg_kv_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gg_kv_str_array(b, "tokenizer.ggml.tokens", 64);
    GG_T("token_embd.weight", 2, m->embd, m->vocab, 1, 2);
    GG_T("output_norm.weight", 1, m->embd, 1, 0, 4);
    GG_T("output.weight", 2, m->embd, m->vocab, 1, 2);
    for (l = 0; l < m->layers; l++) {
        for (i = 0; i < 7; i++) {
            uint64_t rows = i == 1 || i == 2 ? kv : i >= 4 && i < 6 ? m->ffn : m->embd;
            uint64_t cols = i == 6 ? m->ffn : m->embd;
            snprintf(name, sizeof(name), "blk.%llu.%s.weight", (unsigned long long)l, mats[i]);
            GG_T(name, 2, cols, rows, 1, 2);
        }
        snprintf(name, sizeof(name), "blk.%llu.attn_norm.weight", (unsigned long long)l);
        GG_T(name, 1, m->embd, 1, 0, 4);
        snprintf(name, sizeof(name), "blk.%llu.ffn_norm.weight", (unsigned long long)l);
        GG_T(name, 1, m->embd, 1, 0, 4);
    }
#undef GG_T
    gg_align(b, 32);
    *data_bytes = off;
    if (with_data)
        wb_zeros(b, off);
}

#endif
