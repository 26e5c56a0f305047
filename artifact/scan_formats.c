/*
 * scan_formats.c - the scanner's readers for formats that carry code somewhere inside
 * data: GGUF chat templates, NumPy object arrays, Keras v3 config.json, ONNX external data
 * paths. Each streams its file through an art_src and keeps only the part it checks.
 */
#include "scan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A source error of the data (truncated, malformed): not a scanner failure. */
static enum mg_code data_error(struct art_report *r, const char *format, const char *rule,
                               uint64_t off, enum mg_code rc, struct mg_error *err)
{
    if (rc != MG_EINVAL)
        return rc;
    art_report_add(r, format, rule, false, off, "%s", err->message);
    mg_error_clear(err);
    return MG_OK;
}

/* ---- GGUF ---------------------------------------------------------------------------- */

#define GGUF_KEY_MAX 65536
#define GGUF_NEST_MAX 8

enum { G_STRING = 8, G_ARRAY = 9, G_COUNT = 13 };
static const unsigned gsize[G_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static enum mg_code gguf_skip(struct art_src *s, uint32_t type, int depth, struct mg_error *err)
{
    uint64_t n, i, total;
    uint32_t et;
    enum mg_code rc;

    if (type >= G_COUNT || depth > GGUF_NEST_MAX)
        return art_src_fail(s, s->off, err, "unknown value type %u", type);
    if (type == G_STRING) {
        if ((rc = art_src_u64(s, &n, err)) != MG_OK)
            return rc;
        return art_src_skip(s, n, err);
    }
    if (type != G_ARRAY)
        return art_src_skip(s, gsize[type], err);
    if ((rc = art_src_u32(s, &et, err)) != MG_OK || (rc = art_src_u64(s, &n, err)) != MG_OK)
        return rc;
    if (et >= G_COUNT)
        return art_src_fail(s, s->off, err, "unknown array element type %u", et);
    if (et != G_STRING && et != G_ARRAY) {
        if (!art_mul(n, gsize[et], &total))
            return art_src_fail(s, s->off, err, "an array is larger than 2^64 bytes");
        return art_src_skip(s, total, err);
    }
    if (n > art_src_left(s))
        return art_src_fail(s, s->off, err, "an array claims more items than bytes are left");
    for (i = 0; i < n; i++) {
        if ((rc = gguf_skip(s, et, depth + 1, err)) != MG_OK)
            return rc;
    }
    return MG_OK;
}

static enum mg_code gguf_walk(struct art_src *s, struct art_report *r, struct mg_error *err)
{
    char *key = NULL, *tpl = NULL;
    uint8_t magic[4];
    uint32_t version, type;
    uint64_t nt, nkv, i, klen, vlen, at;
    enum mg_code rc;

    if ((rc = art_src_read(s, magic, 4, err)) != MG_OK ||
        (rc = art_src_u32(s, &version, err)) != MG_OK)
        return rc;
    if (version < 2 || version > 3) {
        art_report_add(r, "gguf", "gguf-version", false, 4,
                       "GGUF version %u: the scanner reads versions 2 and 3", version);
        return MG_OK;
    }
    if ((rc = art_src_u64(s, &nt, err)) != MG_OK || (rc = art_src_u64(s, &nkv, err)) != MG_OK)
        return rc;
    if ((key = malloc(GGUF_KEY_MAX + 1)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    for (i = 0; i < nkv; i++) {
        at = s->off;
        if ((rc = art_src_u64(s, &klen, err)) != MG_OK)
            break;
        if (klen > GGUF_KEY_MAX) {
            rc = art_src_fail(s, at, err, "a key of %llu bytes", (unsigned long long)klen);
            break;
        }
        if ((rc = art_src_read(s, key, (size_t)klen, err)) != MG_OK ||
            (rc = art_src_u32(s, &type, err)) != MG_OK)
            break;
        key[klen] = '\0';
        if (type != G_STRING || strncmp(key, "tokenizer.chat_template", 23) != 0 ||
            memchr(key, '\0', (size_t)klen) != NULL) {
            if ((rc = gguf_skip(s, type, 0, err)) != MG_OK)
                break;
            continue;
        }
        if ((rc = art_src_u64(s, &vlen, err)) != MG_OK)
            break;
        if (vlen > r->opts->max_template) {
            art_report_add(r, "jinja", "jinja-cap", false, at,
                           "%s is %llu bytes, over the scanner's cap of %llu", key,
                           (unsigned long long)vlen, (unsigned long long)r->opts->max_template);
            if ((rc = art_src_skip(s, vlen, err)) != MG_OK)
                break;
            continue;
        }
        if ((tpl = malloc((size_t)vlen + 1)) == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        if ((rc = art_src_read(s, tpl, (size_t)vlen, err)) != MG_OK)
            break;
        art_template_scan(tpl, (size_t)vlen, key, r);
        free(tpl);
        tpl = NULL;
    }
    free(tpl);
    free(key);
    (void)nt; /* tensor infos follow: nothing in them is code */
    return rc;
}

enum mg_code art_gguf_templates_scan(struct art_src *s, struct art_report *r, struct mg_error *err)
{
    s->format = "gguf";
    return data_error(r, "gguf", "gguf-malformed", s->off, gguf_walk(s, r, err), err);
}

/* ---- NumPy .npy ---------------------------------------------------------------------- */

#define NPY_HEADER_MAX (1u << 20)

/* Does the header's descr hold an object type code ('O', '|O', '<O', …)? */
static bool npy_object(const char *h, size_t n)
{
    size_t i;

    for (i = 0; i + 1 < n; i++) {
        if (h[i] != '\'' && h[i] != '"')
            continue;
        size_t j = i + 1;
        if (j < n && strchr("|<>=", h[j]) != NULL && h[j] != '\0')
            j++;
        if (j + 1 < n && h[j] == 'O' && (h[j + 1] == h[i] || (h[j + 1] >= '0' && h[j + 1] <= '9')))
            return true;
    }
    return false;
}

enum mg_code art_npy_scan(struct art_src *s, struct art_report *r, struct mg_error *err)
{
    uint8_t pre[10];
    uint32_t hlen;
    char *h;
    enum mg_code rc;
    bool obj;

    s->format = "npy";
    if ((rc = art_src_read(s, pre, 8, err)) != MG_OK)
        return data_error(r, "npy", "npy-malformed", 0, rc, err);
    if (pre[6] == 1) {
        if ((rc = art_src_read(s, pre + 8, 2, err)) != MG_OK)
            return data_error(r, "npy", "npy-malformed", 8, rc, err);
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        if ((rc = art_src_u32(s, &hlen, err)) != MG_OK)
            return data_error(r, "npy", "npy-malformed", 8, rc, err);
    } else {
        art_report_add(r, "npy", "npy-version", false, 6,
                       ".npy format version %u: the scanner reads versions 1 to 3", pre[6]);
        return MG_OK;
    }
    if (hlen > NPY_HEADER_MAX) {
        art_report_add(r, "npy", "npy-cap", false, 8, "a .npy header of %u bytes", hlen);
        return MG_OK;
    }
    if ((h = malloc(hlen + 1)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = art_src_read(s, h, hlen, err)) != MG_OK) {
        free(h);
        return data_error(r, "npy", "npy-malformed", 8, rc, err);
    }
    obj = npy_object(h, hlen);
    free(h);
    if (!obj)
        return MG_OK; /* plain numbers: data only */
    s->format = "pickle";
    return art_pickle_scan(s, r, false, err);
}

/* ---- Keras v3 config.json ------------------------------------------------------------ */

static void keras_walk(const json_t *v, struct art_report *r, int depth)
{
    const char *k, *mod, *cls;
    json_t *x;
    size_t i;

    if (depth > 64) {
        art_report_add(r, "keras", "keras-cap", false, 0, "config.json nests deeper than 64");
        return;
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, x) keras_walk(x, r, depth + 1);
        return;
    }
    if (!json_is_object(v))
        return;
    cls = json_string_value(json_object_get(v, "class_name"));
    mod = json_string_value(json_object_get(v, "module"));
    if (cls && (strcmp(cls, "Lambda") == 0 || strcmp(cls, "__lambda__") == 0))
        art_report_add(r, "keras", "keras-lambda", true, 0,
                       "config.json holds a %s layer: its Python bytecode runs when the model "
                       "loads",
                       cls);
    else if (mod && strcmp(mod, "keras") != 0 && strncmp(mod, "keras.", 6) != 0)
        art_report_add(r, "keras", "keras-module", true, 0,
                       "config.json loads %.200s from module '%.200s', outside keras.",
                       cls ? cls : "an object", mod);
    json_object_foreach((json_t *)v, k, x) keras_walk(x, r, depth + 1);
}

enum mg_code art_keras_config_scan(struct art_src *s, struct art_report *r, struct mg_error *err)
{
    uint64_t n = art_src_left(s);
    json_error_t je;
    json_t *j;
    char *buf;
    enum mg_code rc;

    s->format = "keras";
    if (n == UINT64_MAX || n > r->opts->max_json) {
        art_report_add(r, "keras", "keras-cap", false, 0,
                       "config.json is larger than the scanner's cap of %llu bytes",
                       (unsigned long long)r->opts->max_json);
        return MG_OK;
    }
    if ((buf = malloc((size_t)n + 1)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = art_src_read(s, buf, (size_t)n, err)) != MG_OK) {
        free(buf);
        return data_error(r, "keras", "keras-malformed", 0, rc, err);
    }
    j = json_loadb(buf, (size_t)n, 0, &je);
    free(buf);
    /* Only Keras' own layout ({"class_name", "config", …}) is a Keras model; any other
     * config.json (transformers', a project's own) is data. */
    if (json_is_object(j) && json_object_get(j, "class_name") && json_object_get(j, "config"))
        keras_walk(j, r, 0);
    json_decref(j);
    return MG_OK;
}

/* ---- ONNX external data ------------------------------------------------------------ */

enum pbm { M_MODEL, M_GRAPH, M_FUNCTION, M_NODE, M_ATTR, M_SPARSE, M_TENSOR, M_ENTRY };

#define PB_DEPTH 32
#define LOC_MAX 4096

struct pbw {
    struct art_src *s;
    struct art_report *r;
    struct mg_error *err;
    char key[LOC_MAX + 1], val[LOC_MAX + 1];
    size_t klen, vlen;
    bool kcut, vcut;
};

static enum mg_code varint(struct art_src *s, uint64_t *v, struct mg_error *err)
{
    uint8_t b;
    unsigned shift = 0;
    enum mg_code rc;

    *v = 0;
    do {
        if (shift > 63)
            return art_src_fail(s, s->off, err, "a varint longer than 10 bytes");
        if ((rc = art_src_read(s, &b, 1, err)) != MG_OK)
            return rc;
        *v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    return MG_OK;
}

/* The message-typed field `field` of a `m`, or -1 when it is not one the walk enters. */
static int child(enum pbm m, uint64_t field)
{
    switch (m) {
    case M_MODEL:
        return field == 7 ? M_GRAPH : field == 25 ? M_FUNCTION : -1;
    case M_GRAPH:
        return field == 1 ? M_NODE : field == 5 ? M_TENSOR : field == 15 ? M_SPARSE : -1;
    case M_FUNCTION:
        return field == 7 ? M_NODE : -1;
    case M_NODE:
        return field == 5 ? M_ATTR : -1;
    case M_ATTR:
        return field == 5 || field == 10    ? M_TENSOR
               : field == 6 || field == 11  ? M_GRAPH
               : field == 22 || field == 23 ? M_SPARSE
                                            : -1;
    case M_SPARSE:
        return field == 1 || field == 2 ? M_TENSOR : -1;
    case M_TENSOR:
        return field == 13 ? M_ENTRY : -1;
    default:
        return -1;
    }
}

static bool bad_location(const char *v, size_t n)
{
    size_t i = 0, start;

    if (n == 0)
        return false;
    if (v[0] == '/' || v[0] == '\\' || (n >= 2 && v[1] == ':'))
        return true;
    while (i <= n) {
        start = i;
        while (i < n && v[i] != '/' && v[i] != '\\')
            i++;
        if (i - start == 2 && v[start] == '.' && v[start + 1] == '.')
            return true;
        i++;
    }
    return memchr(v, '\0', n) != NULL;
}

static enum mg_code pb_msg(struct pbw *w, enum pbm m, uint64_t end, int depth)
{
    uint64_t tag, len, v, at;
    enum mg_code rc;
    int c;

    if (depth > PB_DEPTH)
        return art_src_fail(w->s, w->s->off, w->err, "messages nest deeper than %d", PB_DEPTH);
    while (w->s->off < end) {
        at = w->s->off;
        if ((rc = varint(w->s, &tag, w->err)) != MG_OK)
            return rc;
        switch (tag & 7) {
        case 0:
            if ((rc = varint(w->s, &v, w->err)) != MG_OK)
                return rc;
            break;
        case 1:
            if ((rc = art_src_skip(w->s, 8, w->err)) != MG_OK)
                return rc;
            break;
        case 5:
            if ((rc = art_src_skip(w->s, 4, w->err)) != MG_OK)
                return rc;
            break;
        case 2:
            if ((rc = varint(w->s, &len, w->err)) != MG_OK)
                return rc;
            if (len > end - w->s->off)
                return art_src_fail(w->s, at, w->err, "a field runs past its message");
            if (m == M_ENTRY && ((tag >> 3) == 1 || (tag >> 3) == 2)) {
                char *dst = (tag >> 3) == 1 ? w->key : w->val;
                size_t keep = len > LOC_MAX ? LOC_MAX : (size_t)len;
                if ((rc = art_src_read(w->s, dst, keep, w->err)) != MG_OK ||
                    (rc = art_src_skip(w->s, len - keep, w->err)) != MG_OK)
                    return rc;
                dst[keep] = '\0';
                if ((tag >> 3) == 1)
                    w->klen = keep, w->kcut = keep < len;
                else
                    w->vlen = keep, w->vcut = keep < len;
                break;
            }
            c = child(m, tag >> 3);
            if (c < 0) {
                if ((rc = art_src_skip(w->s, len, w->err)) != MG_OK)
                    return rc;
                break;
            }
            if (c == M_ENTRY)
                w->klen = w->vlen = 0, w->kcut = w->vcut = false;
            if ((rc = pb_msg(w, (enum pbm)c, w->s->off + len, depth + 1)) != MG_OK)
                return rc;
            if (c == M_ENTRY && !w->kcut && w->klen == 8 && memcmp(w->key, "location", 8) == 0 &&
                (w->vcut || bad_location(w->val, w->vlen)))
                art_report_add(w->r, "onnx", "onnx-external-path", true, at,
                               "an initializer's external_data location '%.200s' %s; ONNX "
                               "runtimes would read that file",
                               w->val,
                               w->vcut ? "is too long to check" : "leaves the model's directory");
            break;
        default:
            return art_src_fail(w->s, at, w->err, "wire type %u", (unsigned)(tag & 7));
        }
    }
    if (w->s->off != end)
        return art_src_fail(w->s, w->s->off, w->err, "a message overruns its length");
    return MG_OK;
}

enum mg_code art_onnx_external_scan(struct art_src *s, struct art_report *r, struct mg_error *err)
{
    struct pbw *w = calloc(1, sizeof(*w));
    enum mg_code rc;

    if (w == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s->format = "onnx";
    w->s = s;
    w->r = r;
    w->err = err;
    rc = s->size == UINT64_MAX ? art_src_fail(s, 0, err, "the model's size is not known")
                               : pb_msg(w, M_MODEL, s->size, 0);
    free(w);
    return data_error(r, "onnx", "onnx-malformed", s->off, rc, err);
}
