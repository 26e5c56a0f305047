/*
 * safetensors.c - the safetensors header: an 8-byte little-endian length N, then N bytes
 * of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, …, "__metadata__":
 * {string: string}}, then the tensor data, which the offsets must tile exactly (no gap, no
 * overlap, nothing after). The JSON is parsed by jansson once its size and its count of
 * values have been checked against the caps; the data is never read.
 */
#include "weights_int.h"

#include <stdlib.h>
#include <string.h>

#include "archive_int.h"
#include "introspect.h"

#define META_MAX_KEYS 64
#define META_MAX_VALUE 1024

/* Bits per element of each safetensors dtype. */
static const struct {
    const char *name;
    unsigned bits;
} st_dtypes[] = {
    {"BOOL", 8},    {"U8", 8},   {"I8", 8},      {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8}, {"I16", 16}, {"U16", 16},    {"F16", 16},    {"BF16", 16},
    {"I32", 32},    {"U32", 32}, {"F32", 32},    {"F64", 64},    {"I64", 64},
    {"U64", 64},    {"C64", 64}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F4", 4},
};

static unsigned dtype_bits(const char *s)
{
    size_t i;

    for (i = 0; s && i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++) {
        if (strcmp(s, st_dtypes[i].name) == 0)
            return st_dtypes[i].bits;
    }
    return 0;
}

struct span {
    uint64_t begin, end;
    const char *name;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Count the JSON values (commas and openings outside strings) before jansson sees it. */
static uint64_t json_values(const char *p, size_t n)
{
    uint64_t v = 1;
    bool in = false;
    size_t i;

    for (i = 0; i < n; i++) {
        if (in) {
            if (p[i] == '\\')
                i++;
            else if (p[i] == '"')
                in = false;
        } else if (p[i] == '"') {
            in = true;
        } else if (p[i] == ',' || p[i] == '[' || p[i] == '{') {
            v++;
        }
    }
    return v;
}

static enum mg_code keep_metadata(struct art_src *s, const json_t *meta, struct art_weights *w,
                                  struct mg_error *err)
{
    const char *k;
    json_t *v;

    if (!json_is_object(meta))
        return art_src_fail(s, 8, err, "__metadata__ must be an object of strings");
    json_object_foreach((json_t *)meta, k, v)
    {
        if (!json_is_string(v))
            return art_src_fail(s, 8, err, "__metadata__ values must be strings");
        if (json_object_size(w->metadata) < META_MAX_KEYS && strlen(k) <= 128 &&
            json_string_length(v) <= META_MAX_VALUE)
            json_object_set(w->metadata, k, v);
    }
    return MG_OK;
}

/* One tensor entry: its element count and byte span. */
static enum mg_code tensor_entry(struct art_src *s, const char *name, const json_t *t,
                                 struct span *sp, struct art_weights *w, struct mg_error *err)
{
    char show[SHOW_BUF];
    const char *dtype;
    json_t *shape, *offs, *d;
    uint64_t n = 1, bits, bytes;
    unsigned b;
    size_t i;

    art_name_show(name, strlen(name), show);
    dtype = json_string_value(json_object_get(t, "dtype"));
    shape = json_object_get(t, "shape");
    offs = json_object_get(t, "data_offsets");
    if (!json_is_object(t) || dtype == NULL || !json_is_array(shape) || !json_is_array(offs) ||
        json_array_size(offs) != 2)
        return art_src_fail(s, 8, err,
                            "tensor '%s' needs \"dtype\", \"shape\" and \"data_offsets\": "
                            "[begin, end]",
                            show);
    if ((b = dtype_bits(dtype)) == 0)
        return art_src_fail(s, 8, err, "tensor '%s' has the unknown dtype '%.32s'", show, dtype);
    json_array_foreach(shape, i, d)
    {
        if (!json_is_integer(d) || json_integer_value(d) < 0 ||
            !art_mul(n, (uint64_t)json_integer_value(d), &n))
            return art_src_fail(s, 8, err,
                                "tensor '%s' has a shape that is not a list of sizes >= 0 (or "
                                "overflows)",
                                show);
    }
    if (!json_is_integer(json_array_get(offs, 0)) || !json_is_integer(json_array_get(offs, 1)) ||
        json_integer_value(json_array_get(offs, 0)) < 0 ||
        json_integer_value(json_array_get(offs, 1)) < json_integer_value(json_array_get(offs, 0)))
        return art_src_fail(s, 8, err,
                            "tensor '%s' has data_offsets that are not 0 <= begin <= end", show);
    sp->begin = (uint64_t)json_integer_value(json_array_get(offs, 0));
    sp->end = (uint64_t)json_integer_value(json_array_get(offs, 1));
    sp->name = name;
    if (!art_mul(n, b, &bits) || bits % 8 != 0)
        return art_src_fail(s, 8, err, "tensor '%s' does not fill whole bytes", show);
    bytes = bits / 8;
    if (sp->end - sp->begin != bytes)
        return art_src_fail(s, 8, err,
                            "tensor '%s' is %s with %llu elements (%llu bytes) but its "
                            "data_offsets span %llu bytes",
                            show, dtype, (unsigned long long)n, (unsigned long long)bytes,
                            (unsigned long long)(sp->end - sp->begin));
    return art_weights_add(w, s, 8, dtype, n, bytes, err);
}

/* The offsets must tile [0, total) exactly, and the file must end there. */
static enum mg_code check_tiling(struct art_src *s, struct span *sp, size_t n, uint64_t hlen,
                                 struct mg_error *err)
{
    char show[SHOW_BUF];
    uint64_t at = 0, end;
    size_t i;

    if (n > 1)
        qsort(sp, n, sizeof(*sp), span_cmp);
    for (i = 0; i < n; i++) {
        if (sp[i].begin != at) {
            art_name_show(sp[i].name, strlen(sp[i].name), show);
            return art_src_fail(s, 8, err,
                                "tensor '%s' begins at data offset %llu where %llu was expected "
                                "(the tensors must cover the data without gaps or overlaps)",
                                show, (unsigned long long)sp[i].begin, (unsigned long long)at);
        }
        at = sp[i].end;
    }
    if (s->size != UINT64_MAX && (!art_add(8 + hlen, at, &end) || end != s->size))
        return art_src_fail(s, 8 + hlen, err,
                            "the tensors end at byte %llu of the data but the file holds %llu "
                            "bytes after the header",
                            (unsigned long long)at, (unsigned long long)(s->size - 8 - hlen));
    return MG_OK;
}

enum mg_code art_safetensors_read(struct art_src *s, const struct art_introspect_limits *lim,
                                  struct art_weights *w, struct mg_error *err)
{
    uint64_t hlen;
    char *buf = NULL;
    json_t *root = NULL, *v;
    json_error_t jerr;
    struct span *sp = NULL;
    size_t n = 0;
    const char *k;
    enum mg_code rc;

    if ((rc = art_src_u64(s, &hlen, err)) != MG_OK)
        return rc;
    if (hlen > lim->max_safetensors_header)
        return art_src_fail(s, 0, err,
                            "the JSON header is %llu bytes, over the cap of %llu bytes; the "
                            "server reads headers up to that size",
                            (unsigned long long)hlen,
                            (unsigned long long)lim->max_safetensors_header);
    if (hlen < 2 || hlen > art_src_left(s))
        return art_src_fail(s, 0, err, "the header length %llu does not fit in the file",
                            (unsigned long long)hlen);
    if ((buf = malloc(hlen)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = art_src_read(s, buf, hlen, err)) != MG_OK)
        goto out;
    if (buf[0] != '{') {
        rc = art_src_fail(s, 8, err, "the header does not start with '{'");
        goto out;
    }
    if (json_values(buf, hlen) > lim->max_json_values) {
        rc = art_src_fail(s, 8, err, "the header holds more than %llu JSON values",
                          (unsigned long long)lim->max_json_values);
        goto out;
    }
    root = json_loadb(buf, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL || !json_is_object(root)) {
        char why[SHOW_BUF];
        art_name_show(root ? "not an object" : jerr.text,
                      strlen(root ? "not an object" : jerr.text), why);
        rc = art_src_fail(s, 8 + (root ? 0 : (uint64_t)jerr.position), err,
                          "the JSON header does not parse: %s", why);
        goto out;
    }
    if ((sp = calloc(json_object_size(root) + 1, sizeof(*sp))) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    json_object_foreach(root, k, v)
    {
        if (strcmp(k, "__metadata__") == 0)
            rc = keep_metadata(s, v, w, err);
        else
            rc = tensor_entry(s, k, v, &sp[n++], w, err);
        if (rc != MG_OK)
            goto out;
    }
    rc = check_tiling(s, sp, n, hlen, err);
out:
    free(sp);
    json_decref(root);
    free(buf);
    return rc;
}
