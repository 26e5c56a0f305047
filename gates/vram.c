/*
 * vram.c - see vram.h.
 */
#include "vram.h"

#include <stdio.h>
#include <string.h>

/* Activations, KV cache and runtime overhead on top of the weights. */
#define VRAM_OVERHEAD 1.3

bool gate_precision_bytes(const char *precision, double *bytes)
{
    static const struct {
        const char *name;
        double bytes;
    } table[] = {{"fp32", 4}, {"fp16", 2}, {"bf16", 2}, {"int8", 1}, {"int4", 0.5}};
    size_t i;

    if (precision == NULL)
        return false;
    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(precision, table[i].name) == 0) {
            *bytes = table[i].bytes;
            return true;
        }
    }
    return false;
}

bool gate_estimated_vram_gib(int64_t parameters, const char *precision, double *gib)
{
    double b;

    if (parameters < 0 || !gate_precision_bytes(precision, &b))
        return false;
    *gib = (double)parameters * b * VRAM_OVERHEAD / (1024.0 * 1024.0 * 1024.0);
    return true;
}

const char gate_vram_resources_formula[] = "parameters × bytes_per_parameter × 1.3";

bool gate_vram_from_resources(const json_t *res, struct gate_vram_resources *out)
{
    const json_t *p = json_object_get(res, "parameters");
    const char *prec = json_string_value(json_object_get(res, "precision"));

    if (!json_is_integer(p) || !gate_precision_bytes(prec, &out->bytes_per_parameter) ||
        !gate_estimated_vram_gib(json_integer_value(p), prec, &out->gib))
        return false;
    out->parameters = json_integer_value(p);
    out->precision = prec;
    out->overhead = VRAM_OVERHEAD;
    return true;
}

static json_t *from_resources(const json_t *res)
{
    struct gate_vram_resources r;

    if (!gate_vram_from_resources(res, &r))
        return NULL;
    return json_pack("{s:s, s:s, s:I, s:s, s:f, s:f, s:f}", "source", "resources", "formula",
                     gate_vram_resources_formula, "parameters", (json_int_t)r.parameters,
                     "precision", r.precision, "bytes_per_parameter", r.bytes_per_parameter,
                     "overhead", r.overhead, "gib", r.gib);
}

/* metadata["<arch>.<suffix>"] as a positive integer, or 0. */
static int64_t arch_int(const json_t *meta, const char *arch, const char *suffix)
{
    char key[160];
    const json_t *v;

    snprintf(key, sizeof(key), "%.100s.%s", arch, suffix);
    v = json_object_get(meta, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* The KV cache's inputs from GGUF metadata; false when any is missing. */
static bool kv_inputs(const json_t *meta, int64_t *layers, int64_t *kv_heads, int64_t *head_dim,
                      int64_t *ctx)
{
    const char *arch = json_string_value(json_object_get(meta, "general.architecture"));
    int64_t heads, embd;

    if (arch == NULL)
        return false;
    *layers = arch_int(meta, arch, "block_count");
    *ctx = arch_int(meta, arch, "context_length");
    heads = arch_int(meta, arch, "attention.head_count");
    *kv_heads = arch_int(meta, arch, "attention.head_count_kv");
    if (*kv_heads == 0)
        *kv_heads = heads;
    *head_dim = arch_int(meta, arch, "attention.key_length");
    embd = arch_int(meta, arch, "embedding_length");
    if (*head_dim == 0 && heads > 0 && embd % heads == 0)
        *head_dim = embd / heads;
    /* Each below 2^24, so the product stays exact in a double and an int64. */
    return *layers > 0 && *layers < (1 << 24) && *kv_heads > 0 && *kv_heads < (1 << 24) &&
           *head_dim > 0 && *head_dim < (1 << 24) && *ctx > 0 && *ctx < (1 << 24);
}

static json_t *from_introspection(const json_t *in)
{
    const json_t *wb = json_object_get(in, "weights_bytes");
    const json_t *meta = json_object_get(in, "metadata");
    int64_t layers, kvh, hd, ctx;
    double weights, kv = 0, total;
    json_t *o;

    if (!json_is_integer(wb) || json_integer_value(wb) < 0)
        return NULL;
    weights = (double)json_integer_value(wb);
    if (kv_inputs(meta, &layers, &kvh, &hd, &ctx))
        kv = 2.0 * (double)layers * (double)kvh * (double)hd * (double)ctx * GATE_VRAM_KV_BYTES;
    total = weights * GATE_VRAM_WEIGHTS_OVERHEAD + kv;
    o = json_pack("{s:s, s:s, s:I, s:f, s:f, s:f}", "source", "introspection", "formula",
                  kv > 0 ? "weights_bytes × 1.2 + 2 × layers × kv_heads × head_dim × context × "
                           "bytes_per_element"
                         : "weights_bytes × 1.2",
                  "weights_bytes", json_integer_value(wb), "overhead", GATE_VRAM_WEIGHTS_OVERHEAD,
                  "bytes", total, "gib", total / (1024.0 * 1024.0 * 1024.0));
    if (o != NULL && kv > 0) {
        json_object_set_new(o, "kv_cache_bytes", json_integer((json_int_t)kv));
        json_object_set_new(o, "layers", json_integer(layers));
        json_object_set_new(o, "kv_heads", json_integer(kvh));
        json_object_set_new(o, "head_dim", json_integer(hd));
        json_object_set_new(o, "context", json_integer(ctx));
        json_object_set_new(o, "bytes_per_element", json_integer(GATE_VRAM_KV_BYTES));
    }
    return o;
}

json_t *gate_vram_estimate(const json_t *resources, const json_t *introspection)
{
    json_t *e = resources ? from_resources(resources) : NULL;

    return e ? e : introspection ? from_introspection(introspection) : NULL;
}

bool gate_version_vram_gib(const json_t *version, double *gib)
{
    json_t *e = gate_vram_estimate(json_object_get(version, "resources"),
                                   json_object_get(version, "introspection"));
    bool ok = e != NULL && json_is_number(json_object_get(e, "gib"));

    if (ok)
        *gib = json_number_value(json_object_get(e, "gib"));
    json_decref(e);
    return ok;
}
