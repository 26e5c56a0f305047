/*
 * gguf.c - the GGUF header, versions 2 and 3 (little-endian): "GGUF", u32 version, u64
 * tensor count, u64 key/value count; the key/value pairs (u64-length strings, u32 value
 * types, arrays of a u32 element type and a u64 count); then per tensor its name, u32
 * dimension count, u64 dimensions, u32 ggml type and u64 offset into the data, which
 * starts at the next multiple of general.alignment (default 32).
 *
 * Everything is streamed: values are kept only for the metadata keys docs/contract.md names, every
 * array and string length is checked against the bytes left before it is skipped, and
 * tensors are summed as they pass, so nothing is allocated per key or per tensor.
 */
#include "weights_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_int.h"
#include "introspect.h"
#include "../base/text.h"

#define KEY_MAX 65536     /* bytes of one key */
#define KEEP_STRING 1024  /* bytes of a string value kept in metadata */
#define META_MAX_KEYS 128 /* metadata keys kept */
#define MAX_DIMS 4        /* GGML_MAX_DIMS */
#define NEST_MAX 8        /* arrays of arrays */
#define ALIGN_DEFAULT 32

enum gguf_type {
    T_U8,
    T_I8,
    T_U16,
    T_I16,
    T_U32,
    T_I32,
    T_F32,
    T_BOOL,
    T_STRING,
    T_ARRAY,
    T_U64,
    T_I64,
    T_F64,
    T_COUNT
};

static const unsigned scalar_size[T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* ggml tensor types: name, elements per block, bytes per block (0: no longer defined). */
static const struct {
    const char *name;
    unsigned block, bytes;
} ggml_types[] = {
    {"F32", 1, 4},        {"F16", 1, 2},       {"Q4_0", 32, 18},     {"Q4_1", 32, 20},
    {NULL, 0, 0},         {NULL, 0, 0},        {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 36},    {"Q2_K", 256, 84},    {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},  {"Q6_K", 256, 210},   {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},       {"I32", 1, 4},        {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},  {"BF16", 1, 2},       {NULL, 0, 0},
    {NULL, 0, 0},         {NULL, 0, 0},        {"TQ1_0", 256, 54},   {"TQ2_0", 256, 66},
    {NULL, 0, 0},         {NULL, 0, 0},        {NULL, 0, 0},         {"MXFP4", 32, 17},
};

struct gguf {
    struct art_src *s;
    const struct art_introspect_limits *lim;
    struct art_weights *w;
    struct mg_error *err;
    uint64_t alignment;
    char key[KEY_MAX + 1];
};

/* The metadata keys kept: general.*, and these suffixes of the architecture's keys. */
static bool wanted(const char *k)
{
    static const char *const suffix[] = {
        ".context_length",
        ".block_count",
        ".attention.head_count",
        ".attention.head_count_kv",
        ".embedding_length",
        ".attention.key_length",
        ".attention.value_length",
        ".feed_forward_length",
        ".vocab_size",
        ".expert_count",
    };
    size_t i, n = strlen(k), m;

    if (strncmp(k, "general.", 8) == 0)
        return true;
    for (i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        m = strlen(suffix[i]);
        if (n > m && strcmp(k + n - m, suffix[i]) == 0 && memchr(k, '.', n - m) == NULL)
            return true;
    }
    return false;
}

/* A u64-length string: into buf (cap bytes + NUL) when keep, else skipped. *len its length. */
static enum mg_code read_string(struct gguf *g, char *buf, size_t cap, bool keep, uint64_t *len,
                                const char *what)
{
    uint64_t at = g->s->off, n;
    enum mg_code rc;

    if ((rc = art_src_u64(g->s, &n, g->err)) != MG_OK)
        return rc;
    if (n > art_src_left(g->s))
        return art_src_fail(g->s, at, g->err, "a %s claims %llu bytes but the file ends first",
                            what, (unsigned long long)n);
    *len = n;
    if (!keep || n > cap)
        return art_src_skip(g->s, n, g->err);
    if ((rc = art_src_read(g->s, buf, (size_t)n, g->err)) != MG_OK)
        return rc;
    buf[n] = '\0';
    if (!mg_utf8_valid(buf, (size_t)n) || memchr(buf, '\0', (size_t)n) != NULL)
        return art_src_fail(g->s, at + 8, g->err, "a %s is not valid UTF-8 text", what);
    return MG_OK;
}

/* Skip n values of type t (arrays nest up to NEST_MAX). */
static enum mg_code skip_values(struct gguf *g, uint32_t t, uint64_t n, int depth)
{
    uint64_t at = g->s->off, bytes, len, m, i;
    uint32_t et;
    enum mg_code rc;

    if (t >= T_COUNT)
        return art_src_fail(g->s, at, g->err, "unknown value type %u", t);
    if (t != T_STRING && t != T_ARRAY) {
        if (!art_mul(n, scalar_size[t], &bytes))
            return art_src_fail(g->s, at, g->err, "an array of %llu values overflows",
                                (unsigned long long)n);
        return art_src_skip(g->s, bytes, g->err);
    }
    /* Each string or array takes at least 8 bytes: refuse a count the file cannot hold. */
    if (n > art_src_left(g->s) / 8)
        return art_src_fail(g->s, at, g->err,
                            "an array claims %llu elements but only %llu bytes are left",
                            (unsigned long long)n, (unsigned long long)art_src_left(g->s));
    for (i = 0; i < n; i++) {
        if (t == T_STRING) {
            if ((rc = read_string(g, NULL, 0, false, &len, "string")) != MG_OK)
                return rc;
            continue;
        }
        if (depth >= NEST_MAX)
            return art_src_fail(g->s, g->s->off, g->err, "arrays nest deeper than %d", NEST_MAX);
        if ((rc = art_src_u32(g->s, &et, g->err)) != MG_OK ||
            (rc = art_src_u64(g->s, &m, g->err)) != MG_OK ||
            (rc = skip_values(g, et, m, depth + 1)) != MG_OK)
            return rc;
    }
    return MG_OK;
}

/* One scalar of type t as JSON (NEW), or NULL for a value JSON cannot hold (NaN). */
static enum mg_code scalar_value(struct gguf *g, uint32_t t, json_t **out)
{
    uint8_t b[8];
    uint64_t u = 0;
    int64_t i;
    float f;
    double d;
    enum mg_code rc;
    unsigned k;

    *out = NULL;
    if ((rc = art_src_read(g->s, b, scalar_size[t], g->err)) != MG_OK)
        return rc;
    for (k = scalar_size[t]; k-- > 0;)
        u = u << 8 | b[k];
    switch (t) {
    case T_I8:
        i = (int8_t)u;
        break;
    case T_I16:
        i = (int16_t)u;
        break;
    case T_I32:
        i = (int32_t)u;
        break;
    case T_I64:
        i = (int64_t)u;
        break;
    case T_BOOL:
        if (u > 1)
            return art_src_fail(g->s, g->s->off - 1, g->err, "a bool value is %u", (unsigned)u);
        *out = json_boolean(u);
        return MG_OK;
    case T_F32:
        memcpy(&f, &(uint32_t){(uint32_t)u}, 4);
        *out = isfinite(f) ? json_real(f) : NULL;
        return MG_OK;
    case T_F64:
        memcpy(&d, &u, 8);
        *out = isfinite(d) ? json_real(d) : NULL;
        return MG_OK;
    default: /* unsigned */
        if (u > INT64_MAX)
            return MG_OK;
        i = (int64_t)u;
        break;
    }
    *out = json_integer(i);
    return MG_OK;
}

/* One key/value pair: kept in metadata when wanted, else skipped. */
static enum mg_code read_kv(struct gguf *g)
{
    char sval[KEEP_STRING + 1];
    uint64_t klen, slen, at, n;
    uint32_t t, et;
    json_t *v = NULL;
    enum mg_code rc;
    bool keep;

    at = g->s->off;
    if ((rc = read_string(g, g->key, KEY_MAX, true, &klen, "key")) != MG_OK)
        return rc;
    if (klen > KEY_MAX || klen == 0)
        return art_src_fail(g->s, at, g->err, "a key is %llu bytes long (1 to %d allowed)",
                            (unsigned long long)klen, KEY_MAX);
    at = g->s->off;
    if ((rc = art_src_u32(g->s, &t, g->err)) != MG_OK)
        return rc;
    if (t >= T_COUNT)
        return art_src_fail(g->s, at, g->err, "key '%.64s' has the unknown value type %u", g->key,
                            t);
    keep = wanted(g->key) && json_object_size(g->w->metadata) < META_MAX_KEYS;
    if (t == T_ARRAY) {
        if ((rc = art_src_u32(g->s, &et, g->err)) != MG_OK ||
            (rc = art_src_u64(g->s, &n, g->err)) != MG_OK)
            return rc;
        return skip_values(g, et, n, 1);
    }
    if (t == T_STRING) {
        if ((rc = read_string(g, sval, KEEP_STRING, keep, &slen, "string value")) != MG_OK)
            return rc;
        if (keep && slen <= KEEP_STRING)
            v = json_string(sval);
    } else if ((rc = scalar_value(g, t, &v)) != MG_OK) {
        return rc;
    }
    if (keep && v != NULL && strcmp(g->key, "general.alignment") != 0)
        json_object_set(g->w->metadata, g->key, v);
    if (strcmp(g->key, "general.alignment") == 0) {
        json_int_t a = json_integer_value(v);
        if (t != T_U32 || a == 0 || (a & (a - 1)) != 0) {
            json_decref(v);
            return art_src_fail(g->s, at, g->err, "general.alignment must be a u32 power of two");
        }
        g->alignment = (uint64_t)a;
        json_object_set(g->w->metadata, g->key, v);
    }
    json_decref(v);
    return MG_OK;
}

/* One tensor info: counted into the result; *end is where its data ends. */
static enum mg_code read_tensor(struct gguf *g, uint64_t *end)
{
    uint64_t at = g->s->off, len, ne = 1, d, off, blocks, bytes;
    uint32_t nd, t, i;
    enum mg_code rc;

    if ((rc = read_string(g, g->key, KEY_MAX, true, &len, "tensor name")) != MG_OK)
        return rc;
    if (len > KEY_MAX)
        return art_src_fail(g->s, at, g->err, "a tensor name is %llu bytes long",
                            (unsigned long long)len);
    at = g->s->off;
    if ((rc = art_src_u32(g->s, &nd, g->err)) != MG_OK)
        return rc;
    if (nd > MAX_DIMS)
        return art_src_fail(g->s, at, g->err, "tensor '%.64s' has %u dimensions (at most %d)",
                            g->key, nd, MAX_DIMS);
    for (i = 0; i < nd; i++) {
        at = g->s->off;
        if ((rc = art_src_u64(g->s, &d, g->err)) != MG_OK)
            return rc;
        if (d > INT64_MAX || !art_mul(ne, d, &ne))
            return art_src_fail(g->s, at, g->err, "tensor '%.64s' has a dimension that overflows",
                                g->key);
    }
    at = g->s->off;
    if ((rc = art_src_u32(g->s, &t, g->err)) != MG_OK ||
        (rc = art_src_u64(g->s, &off, g->err)) != MG_OK)
        return rc;
    if (t >= sizeof(ggml_types) / sizeof(ggml_types[0]) || ggml_types[t].name == NULL)
        return art_src_fail(g->s, at, g->err, "tensor '%.64s' has the unknown ggml type %u", g->key,
                            t);
    if (ne % ggml_types[t].block != 0)
        return art_src_fail(g->s, at, g->err,
                            "tensor '%.64s' has %llu elements, not a multiple of its %s block "
                            "of %u",
                            g->key, (unsigned long long)ne, ggml_types[t].name,
                            ggml_types[t].block);
    blocks = ne / ggml_types[t].block;
    if (!art_mul(blocks, ggml_types[t].bytes, &bytes) || !art_add(off, bytes, end))
        return art_src_fail(g->s, at, g->err, "tensor '%.64s' overflows", g->key);
    if (off % g->alignment != 0)
        return art_src_fail(g->s, at + 4, g->err,
                            "tensor '%.64s' has offset %llu, not a multiple of the alignment %llu",
                            g->key, (unsigned long long)off, (unsigned long long)g->alignment);
    return art_weights_add(g->w, g->s, at, ggml_types[t].name, ne, bytes, g->err);
}

enum mg_code art_gguf_read(struct art_src *s, const struct art_introspect_limits *lim,
                           struct art_weights *w, struct mg_error *err)
{
    struct gguf *g = calloc(1, sizeof(*g));
    uint8_t magic[4];
    uint32_t version;
    uint64_t ntensors, nkv, i, end = 0, data_end = 0, data_start;
    enum mg_code rc;

    if (g == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    g->s = s;
    g->lim = lim;
    g->w = w;
    g->err = err;
    g->alignment = ALIGN_DEFAULT;
    if ((rc = art_src_read(s, magic, 4, err)) != MG_OK ||
        (rc = art_src_u32(s, &version, err)) != MG_OK)
        goto out;
    if (memcmp(magic, "GGUF", 4) != 0) {
        rc = art_src_fail(s, 0, err, "the file does not start with \"GGUF\"");
        goto out;
    }
    if (version != 2 && version != 3) {
        rc = art_src_fail(s, 4, err, "version %u%s; only little-endian GGUF v2 and v3 are read",
                          version, version >= 0x01000000 ? " (a big-endian file)" : "");
        goto out;
    }
    if ((rc = art_src_u64(s, &ntensors, err)) != MG_OK || (rc = art_src_u64(s, &nkv, err)) != MG_OK)
        goto out;
    /* A key/value pair takes at least 13 bytes, a tensor info at least 24. */
    if (ntensors > lim->max_gguf_tensors || ntensors > art_src_left(s) / 24 ||
        nkv > art_src_left(s) / 13) {
        rc = art_src_fail(s, 8, err,
                          "the header claims %llu tensors and %llu keys, more than the file "
                          "holds or the cap of %llu tensors",
                          (unsigned long long)ntensors, (unsigned long long)nkv,
                          (unsigned long long)lim->max_gguf_tensors);
        goto out;
    }
    for (i = 0; i < nkv && rc == MG_OK; i++) {
        rc = read_kv(g);
        if (rc == MG_OK && s->off > lim->max_gguf_header)
            rc = art_src_fail(s, s->off, err, "the metadata is larger than the cap of %llu bytes",
                              (unsigned long long)lim->max_gguf_header);
    }
    for (i = 0; i < ntensors && rc == MG_OK; i++) {
        rc = read_tensor(g, &end);
        if (rc == MG_OK && end > data_end)
            data_end = end;
        if (rc == MG_OK && s->off > lim->max_gguf_header)
            rc = art_src_fail(s, s->off, err,
                              "the tensor infos end past the cap of %llu header bytes",
                              (unsigned long long)lim->max_gguf_header);
    }
    if (rc != MG_OK)
        goto out;
    data_start = (s->off + g->alignment - 1) / g->alignment * g->alignment;
    w->data_complete =
        s->size != UINT64_MAX && data_start <= s->size && data_end <= s->size - data_start;
    json_object_set_new(w->metadata, "gguf.version", json_integer(version));
out:
    free(g);
    return rc;
}
