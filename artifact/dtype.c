/*
 * dtype.c - the dtype names (dtype.h): safetensors' canonical spelling, ONNX's data type
 * numbers and the other spellings a user may write.
 */
#include "dtype.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Canonical names (safetensors' spelling), with ONNX's data type number and the other
 * spellings a user may write. */
static const struct dtype_name {
    const char *name;
    int onnx;
    unsigned bits; /* per element; 0: variable (strings) */
    const char *alias[4];
} dtypes[] = {
    {"F32", 1, 32, {"FLOAT", "float32", "fp32", NULL}},
    {"U8", 2, 8, {"UINT8", NULL, NULL, NULL}},
    {"I8", 3, 8, {"INT8", NULL, NULL, NULL}},
    {"U16", 4, 16, {"UINT16", NULL, NULL, NULL}},
    {"I16", 5, 16, {"INT16", NULL, NULL, NULL}},
    {"I32", 6, 32, {"INT32", NULL, NULL, NULL}},
    {"I64", 7, 64, {"INT64", NULL, NULL, NULL}},
    {"STRING", 8, 0, {"str", NULL, NULL, NULL}},
    {"BOOL", 9, 8, {NULL, NULL, NULL, NULL}},
    {"F16", 10, 16, {"FLOAT16", "half", "fp16", NULL}},
    {"F64", 11, 64, {"DOUBLE", "float64", "fp64", NULL}},
    {"U32", 12, 32, {"UINT32", NULL, NULL, NULL}},
    {"U64", 13, 64, {"UINT64", NULL, NULL, NULL}},
    {"C64", 14, 64, {"COMPLEX64", NULL, NULL, NULL}},
    {"C128", 15, 128, {"COMPLEX128", NULL, NULL, NULL}},
    {"BF16", 16, 16, {"BFLOAT16", NULL, NULL, NULL}},
    {"F8_E4M3", 17, 8, {"FLOAT8E4M3FN", "float8_e4m3fn", NULL, NULL}},
    {"F8_E4M3FNUZ", 18, 8, {"FLOAT8E4M3FNUZ", "float8_e4m3fnuz", NULL, NULL}},
    {"F8_E5M2", 19, 8, {"FLOAT8E5M2", "float8_e5m2", NULL, NULL}},
    {"F8_E5M2FNUZ", 20, 8, {"FLOAT8E5M2FNUZ", "float8_e5m2fnuz", NULL, NULL}},
    {"U4", 21, 4, {"UINT4", NULL, NULL, NULL}},
    {"I4", 22, 4, {"INT4", NULL, NULL, NULL}},
    {"F4", 23, 4, {"FLOAT4E2M1", NULL, NULL, NULL}},
};

const char *art_onnx_dtype_name(int32_t t)
{
    size_t i;

    for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (dtypes[i].onnx == t)
            return dtypes[i].name;
    }
    return NULL;
}

unsigned art_dtype_bits(const char *name)
{
    size_t i;

    for (i = 0; name && i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (strcmp(dtypes[i].name, name) == 0)
            return dtypes[i].bits;
    }
    return 0;
}

static const char *scalar_canonical(const char *s, size_t n)
{
    size_t i, j;

    for (i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
        if (strlen(dtypes[i].name) == n && strncasecmp(dtypes[i].name, s, n) == 0)
            return dtypes[i].name;
        for (j = 0; j < 4 && dtypes[i].alias[j]; j++) {
            if (strlen(dtypes[i].alias[j]) == n && strncasecmp(dtypes[i].alias[j], s, n) == 0)
                return dtypes[i].name;
        }
    }
    /* numpy's names for the rest: int8 … uint64, bool, complex64, complex128 */
    static const struct {
        const char *np, *name;
    } np[] = {{"int8", "I8"},   {"int16", "I16"},     {"int32", "I32"},       {"int64", "I64"},
              {"uint8", "U8"},  {"uint16", "U16"},    {"uint32", "U32"},      {"uint64", "U64"},
              {"bool", "BOOL"}, {"complex64", "C64"}, {"complex128", "C128"}, {"string", "STRING"}};
    for (i = 0; i < sizeof(np) / sizeof(np[0]); i++) {
        if (strlen(np[i].np) == n && strncasecmp(np[i].np, s, n) == 0)
            return np[i].name;
    }
    return NULL;
}

/* Canonicalise s[0..n) into out at *o; false when unknown or too deep/long. */
static bool canon(const char *s, size_t n, char *out, size_t cap, size_t *o, int depth)
{
    static const char *const wrap[] = {"seq", "optional", "sparse", "map"};
    const char *name;
    size_t i, k, lvl, comma;

    while (n > 0 && isspace((unsigned char)s[0]))
        s++, n--;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (depth > 8 || n == 0)
        return false;
    for (i = 0; i < 4; i++) {
        k = strlen(wrap[i]);
        if (n > k + 1 && strncasecmp(s, wrap[i], k) == 0 && s[k] == '(' && s[n - 1] == ')')
            break;
    }
    if (i == 4) {
        if ((name = scalar_canonical(s, n)) == NULL || *o + strlen(name) >= cap)
            return false;
        memcpy(out + *o, name, strlen(name));
        *o += strlen(name);
        out[*o] = '\0';
        return true;
    }
    if (*o + k + 1 >= cap)
        return false;
    memcpy(out + *o, wrap[i], k);
    out[*o + k] = '(';
    *o += k + 1;
    s += k + 1;
    n -= k + 2;
    if (i == 3) { /* map(K,V): split at the top-level comma */
        for (comma = 0, lvl = 0; comma < n; comma++) {
            if (s[comma] == '(')
                lvl++;
            else if (s[comma] == ')' && lvl > 0)
                lvl--;
            else if (s[comma] == ',' && lvl == 0)
                break;
        }
        if (comma == n || !canon(s, comma, out, cap, o, depth + 1) || *o + 1 >= cap)
            return false;
        out[(*o)++] = ',';
        s += comma + 1;
        n -= comma + 1;
    }
    if (!canon(s, n, out, cap, o, depth + 1) || *o + 1 >= cap)
        return false;
    out[(*o)++] = ')';
    out[*o] = '\0';
    return true;
}

bool art_dtype_canonical(const char *name, char *out, size_t cap)
{
    size_t o = 0;

    if (name == NULL || cap == 0)
        return false;
    out[0] = '\0';
    if (!canon(name, strlen(name), out, cap, &o, 0)) {
        out[0] = '\0';
        return false;
    }
    return true;
}
