/*
 * modelpack.c - see modelpack.h.
 */
#include "modelpack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../base/text.h"
#include "../base/util.h"
#include "sign.h"

/* JSON text as every document is written: compact, keys sorted (so the bytes depend on the
 * content alone, not on the order members were added). */
#define DOC_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17))

/* ---- layer media types ---------------------------------------------------------------- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static bool any_suffix(const char *name, const char *const *list)
{
    size_t i;

    for (i = 0; list[i]; i++) {
        if (ends_with(name, list[i]))
            return true;
    }
    return false;
}

static bool any_prefix(const char *name, const char *const *list)
{
    size_t i;

    for (i = 0; list[i]; i++) {
        if (strncasecmp(name, list[i], strlen(list[i])) == 0)
            return true;
    }
    return false;
}

const char *art_modelpack_layer_type(const char *path)
{
    static const char *const weights[] = {
        ".safetensors", ".gguf",  ".ggml", ".onnx",   ".pt",      ".pth", ".bin",     ".ckpt",
        ".h5",          ".keras", ".pb",   ".tflite", ".mlmodel", ".npz", ".msgpack", NULL};
    static const char *const config_names[] = {"tokenizer.model", "vocab.txt", "merges.txt", NULL};
    static const char *const configs[] = {".json", ".yaml", ".yml",   ".toml",
                                          ".cfg",  ".ini",  ".jinja", NULL};
    static const char *const doc_names[] = {"readme",    "license", "licence", "notice",
                                            "changelog", "copying", "authors", NULL};
    static const char *const docs[] = {".md", ".txt", ".rst", ".pdf", ".html", NULL};
    static const char *const code[] = {".py",   ".ipynb", ".sh", ".js",  ".ts", ".c",
                                       ".cc",   ".cpp",   ".h",  ".hpp", ".go", ".rs",
                                       ".java", ".jl",    ".r",  ".lua", NULL};
    static const char *const data[] = {".csv", ".tsv", ".parquet", ".jsonl", ".arrow", NULL};
    const char *name = base_name(path);

    if (any_suffix(name, weights))
        return "application/vnd.cncf.model.weight.v1.raw";
    if (any_prefix(name, config_names) || any_suffix(name, configs))
        return "application/vnd.cncf.model.weight.config.v1.raw";
    if (any_prefix(name, doc_names) || any_suffix(name, docs))
        return "application/vnd.cncf.model.doc.v1.raw";
    if (any_suffix(name, code))
        return "application/vnd.cncf.model.code.v1.raw";
    if (any_suffix(name, data))
        return "application/vnd.cncf.model.dataset.v1.raw";
    /* Whatever else a model archive holds is most likely weights in a format of its own. */
    return "application/vnd.cncf.model.weight.v1.raw";
}

/* ModelPack's "format" for a weight file's name, or NULL. */
static const char *weight_format(const char *path)
{
    static const struct {
        const char *suffix, *format;
    } formats[] = {{".safetensors", "safetensors"},
                   {".gguf", "gguf"},
                   {".onnx", "onnx"},
                   {".pt", "pt"},
                   {".pth", "pt"},
                   {".tflite", "tflite"},
                   {".h5", "keras"},
                   {".keras", "keras"}};
    const char *name = base_name(path);
    size_t i;

    for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        if (ends_with(name, formats[i].suffix))
            return formats[i].format;
    }
    return NULL;
}

bool art_modelpack_param_size(int64_t parameters, char out[32])
{
    static const struct {
        int64_t scale;
        char prefix;
    } scales[] = {{1000000000000000LL, 'Q'},
                  {1000000000000LL, 'T'},
                  {1000000000LL, 'B'},
                  {1000000LL, 'M'},
                  {1000LL, 'K'}};
    size_t i;
    int64_t tenths;

    if (parameters < 100)
        return false;
    for (i = 0; i < sizeof(scales) / sizeof(scales[0]) - 1; i++) {
        if (parameters >= scales[i].scale)
            break;
    }
    /* Rounded to a tenth of the scale, in integers (no float formatting in the bytes); a
     * count that rounds up to 1000 says the next scale instead (999999 is "1M"). */
    for (;;) {
        tenths = parameters / (scales[i].scale / 10) +
                 (parameters % (scales[i].scale / 10) >= scales[i].scale / 20 ? 1 : 0);
        if (tenths < 10000 || i == 0)
            break;
        i--;
    }
    if (tenths % 10 == 0)
        snprintf(out, 32, "%lld%c", (long long)(tenths / 10), scales[i].prefix);
    else
        snprintf(out, 32, "%lld.%lld%c", (long long)(tenths / 10), (long long)(tenths % 10),
                 scales[i].prefix);
    return true;
}

/* ModelPack's precision names for VersionCreate's. */
static const char *precision_name(const char *p)
{
    static const char *const map[][2] = {{"fp32", "float32"},
                                         {"fp16", "float16"},
                                         {"bf16", "bfloat16"},
                                         {"int8", "int8"},
                                         {"int4", "int4"}};
    size_t i;

    for (i = 0; p && i < sizeof(map) / sizeof(map[0]); i++) {
        if (strcmp(p, map[i][0]) == 0)
            return map[i][1];
    }
    return NULL;
}

/* ---- the signed metadata -------------------------------------------------------------- */

json_t *art_bundle_metadata(const char *bundle, size_t len)
{
    json_t *b = bundle ? json_loadb(bundle, len, 0, NULL) : NULL, *st = NULL, *meta = NULL;
    const char *payload =
        json_string_value(json_object_get(json_object_get(b, "dsseEnvelope"), "payload"));
    uint8_t *body = NULL;
    size_t n = 0;

    if (payload != NULL && (body = mg_base64_decode(payload, strlen(payload), &n)) != NULL)
        st = json_loadb((const char *)body, n, 0, NULL);
    meta = json_object_get(json_object_get(st, "predicate"), "modelgate");
    if (json_is_object(meta))
        json_incref(meta);
    else
        meta = NULL;
    json_decref(st);
    json_decref(b);
    free(body);
    return meta;
}

/* ---- documents ------------------------------------------------------------------------ */

/* v as a document's text (new), every real in its shortest exact text; NULL: no memory. */
static char *doc_text(const json_t *v)
{
    char *exact = v ? json_dumps(v, DOC_FLAGS) : NULL;
    char *text = exact ? mg_json_short_reals(exact) : NULL;

    free(exact);
    return text;
}

static enum mg_code doc_set(struct art_oci_doc *d, const json_t *v, struct mg_error *err)
{
    char hex[65];

    d->text = doc_text(v);
    if (d->text == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    d->len = strlen(d->text);
    mg_sha256_hex(d->text, d->len, hex);
    snprintf(d->digest, sizeof(d->digest), "sha256:%s", hex);
    return MG_OK;
}

/* A string member of obj, or NULL. */
static const char *str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static void set_str(json_t *obj, const char *key, const char *v)
{
    if (v != NULL && v[0] != '\0')
        json_object_set_new(obj, key, json_string(v));
}

/* One file of an archive, for sorting into model_signing's path order. */
struct file_ref {
    const char *path;
    const char *digest;
    json_int_t size;
};

static int file_order(const void *a, const void *b)
{
    return sign_path_cmp(((const struct file_ref *)a)->path, ((const struct file_ref *)b)->path);
}

/* The archive's files, checked and sorted; *n 0 when the artifact is one layer. */
static enum mg_code file_refs(const json_t *files, struct file_ref **out, size_t *n,
                              struct mg_error *err)
{
    const json_t *items = json_object_get(files, "items"), *f;
    struct file_ref *refs;
    size_t i, count = json_array_size(items);

    *out = NULL;
    *n = 0;
    if (count == 0 || count > ART_MODELPACK_MAX_FILE_LAYERS)
        return MG_OK;
    if ((refs = calloc(count, sizeof(*refs))) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_array_foreach(items, i, f)
    {
        refs[i].path = str(f, "path");
        refs[i].digest = str(f, "digest");
        refs[i].size = json_integer_value(json_object_get(f, "size"));
        if (refs[i].path == NULL || refs[i].digest == NULL ||
            !mg_valid_digest(refs[i].digest, strlen(refs[i].digest)) || refs[i].size < 0) {
            free(refs);
            return mg_fail(err, MG_EINVAL, NULL, "the file manifest's entry %zu is malformed", i);
        }
    }
    qsort(refs, count, sizeof(*refs), file_order);
    *out = refs;
    *n = count;
    return MG_OK;
}

/* The one layer of a whole artifact: its type and the file name it unpacks to. */
static void whole_layer_kind(const char *media, const char **type, const char **name)
{
    static const char *const map[][3] = {
        {"application/x-tar", "application/vnd.cncf.model.weight.v1.tar", "model.tar"},
        {"application/gzip", "application/vnd.cncf.model.weight.v1.tar+gzip", "model.tar.gz"},
        {"application/zstd", "application/vnd.cncf.model.weight.v1.tar+zstd", "model.tar.zst"},
        {"application/x-xz", "application/vnd.cncf.model.weight.v1.raw", "model.tar.xz"},
        {"application/zip", "application/vnd.cncf.model.weight.v1.raw", "model.zip"}};
    size_t i;

    *type = "application/vnd.cncf.model.weight.v1.raw";
    *name = "model";
    for (i = 0; media && i < sizeof(map) / sizeof(map[0]); i++) {
        if (strcmp(media, map[i][0]) == 0) {
            *type = map[i][1];
            *name = map[i][2];
        }
    }
}

static json_t *layer(const char *type, const char *digest, json_int_t size, const char *path)
{
    return json_pack("{s:s, s:s, s:I, s:{s:s, s:s, s:s}}", "mediaType", type, "digest", digest,
                     "size", size, "annotations", "org.cncf.model.filepath", path,
                     "org.cncf.model.file.mediatype.untested", "true",
                     "org.opencontainers.image.title", path);
}

/* The layers array (NEW) and ModelPack's format, when the weights say. */
static json_t *layers_of(const json_t *version, const struct file_ref *refs, size_t n,
                         const char **format)
{
    const json_t *art = json_object_get(version, "artifact");
    json_t *layers = json_array(), *l;
    const char *type, *name;
    size_t i;

    *format = NULL;
    if (layers == NULL)
        return NULL;
    if (n == 0) {
        whole_layer_kind(str(art, "media_type"), &type, &name);
        l = layer(type, str(art, "digest"), json_integer_value(json_object_get(art, "size")), name);
        if (l == NULL || json_array_append_new(layers, l) != 0) {
            json_decref(layers);
            return NULL;
        }
        return layers;
    }
    for (i = 0; i < n; i++) {
        type = art_modelpack_layer_type(refs[i].path);
        if (*format == NULL && strstr(type, ".weight.v1.") != NULL)
            *format = weight_format(refs[i].path);
        l = layer(type, refs[i].digest, refs[i].size, refs[i].path);
        if (l == NULL || json_array_append_new(layers, l) != 0) {
            json_decref(layers);
            return NULL;
        }
    }
    return layers;
}

/* ModelPack's config: descriptor, config, modelfs. NEW. */
static json_t *config_of(const json_t *version, const json_t *layers, const char *format)
{
    const json_t *src = json_object_get(version, "source"), *d;
    const json_t *res = json_object_get(version, "resources");
    json_t *cfg = json_object(), *desc = json_object(), *mc = json_object(), *ids = json_array();
    json_t *urls = json_array(), *l;
    char num[32], psize[32];
    size_t i;

    if (cfg == NULL || desc == NULL || mc == NULL || ids == NULL || urls == NULL)
        goto fail;
    snprintf(num, sizeof(num), "%lld",
             (long long)json_integer_value(json_object_get(version, "version")));
    set_str(desc, "name", str(version, "model"));
    set_str(desc, "version", num);
    set_str(desc, "createdAt", str(version, "created_at"));
    if (str(version, "created_by") != NULL)
        json_object_set_new(desc, "authors", json_pack("[s]", str(version, "created_by")));
    set_str(desc, "sourceURL", str(src, "repo"));
    set_str(desc, "revision", str(src, "commit"));
    json_array_foreach(json_object_get(version, "datasets"), i, d)
    {
        if (str(d, "uri") != NULL)
            json_array_append_new(urls, json_string(str(d, "uri")));
    }
    if (json_array_size(urls) > 0)
        json_object_set(desc, "datasetsURL", urls);
    set_str(mc, "format", format);
    if (json_is_integer(json_object_get(res, "parameters")) &&
        art_modelpack_param_size(json_integer_value(json_object_get(res, "parameters")), psize))
        set_str(mc, "paramSize", psize);
    set_str(mc, "precision", precision_name(str(res, "precision")));
    json_array_foreach(layers, i, l) json_array_append(ids, json_object_get(l, "digest"));
    json_object_set(cfg, "descriptor", desc);
    json_object_set(cfg, "config", mc);
    json_object_set_new(cfg, "modelfs", json_pack("{s:s, s:O}", "type", "layers", "diffIds", ids));
    json_decref(desc);
    json_decref(mc);
    json_decref(ids);
    json_decref(urls);
    return cfg;
fail:
    json_decref(cfg);
    json_decref(desc);
    json_decref(mc);
    json_decref(ids);
    json_decref(urls);
    return NULL;
}

/* The version's metadata beyond ModelPack's vocabulary: the signed metadata (or, unsigned,
 * the same members from the record without metrics), with params and resources. NEW. */
static json_t *metadata_of(const json_t *version, const char *bundle, size_t bundle_len)
{
    static const char *const copy[] = {"model",  "version", "image",      "datasets",
                                       "run_id", "source",  "created_at", "created_by"};
    json_t *meta = art_bundle_metadata(bundle, bundle_len);
    size_t i;

    if (meta == NULL) {
        if ((meta = json_object()) == NULL)
            return NULL;
        for (i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
            json_t *v = json_object_get(version, copy[i]);
            json_object_set(meta, copy[i], v ? v : json_null());
        }
        json_object_set(meta, "artifact",
                        json_object_get(json_object_get(version, "artifact"), "digest"));
    }
    if (json_object_get(version, "params") != NULL)
        json_object_set(meta, "params", json_object_get(version, "params"));
    if (json_object_get(version, "resources") != NULL)
        json_object_set(meta, "resources", json_object_get(version, "resources"));
    return meta;
}

static json_t *annotations_of(const json_t *version, const char *bundle, size_t bundle_len)
{
    const json_t *src = json_object_get(version, "source");
    json_t *a = json_object(), *meta = metadata_of(version, bundle, bundle_len);
    char num[32], *text = doc_text(meta);

    json_decref(meta);
    if (a == NULL || text == NULL) {
        json_decref(a);
        free(text);
        return NULL;
    }
    snprintf(num, sizeof(num), "%lld",
             (long long)json_integer_value(json_object_get(version, "version")));
    set_str(a, "org.opencontainers.image.created", str(version, "created_at"));
    set_str(a, "org.opencontainers.image.version", num);
    set_str(a, "org.opencontainers.image.source", str(src, "repo"));
    set_str(a, "org.opencontainers.image.revision", str(src, "commit"));
    set_str(a, "dev.modelgate.model", str(version, "model"));
    set_str(a, "dev.modelgate.version", num);
    set_str(a, "dev.modelgate.artifact", str(json_object_get(version, "artifact"), "digest"));
    set_str(a, "dev.modelgate.image", str(version, "image"));
    set_str(a, "dev.modelgate.run-id", str(version, "run_id"));
    set_str(a, "dev.modelgate.created-by", str(version, "created_by"));
    set_str(a, "dev.modelgate.metadata+json", text);
    free(text);
    return a;
}

/* The referrer that attaches the bundle to the manifest (cosign's bundle layout). */
static json_t *referrer_of(const struct art_modelpack *m, const json_t *version, size_t bundle_len)
{
    json_t *r = json_pack(
        "{s:i, s:s, s:s, s:{s:s, s:s, s:i, s:s}, s:[{s:s, s:s, s:I}], s:{s:s, s:s, s:I}, "
        "s:{s:s, s:s}}",
        "schemaVersion", 2, "mediaType", ART_OCI_MANIFEST, "artifactType", ART_SIGSTORE_BUNDLE,
        "config", "mediaType", ART_OCI_EMPTY, "digest", ART_OCI_EMPTY_DIGEST, "size", 2, "data",
        "e30=", "layers", "mediaType", ART_SIGSTORE_BUNDLE, "digest", m->bundle_digest, "size",
        (json_int_t)bundle_len, "subject", "mediaType", ART_OCI_MANIFEST, "digest",
        m->manifest.digest, "size", (json_int_t)m->manifest.len, "annotations",
        "dev.sigstore.bundle.content", "dsse-envelope", "dev.sigstore.bundle.predicateType",
        "https://model_signing/signature/v1.0");

    if (r != NULL && str(version, "created_at") != NULL)
        json_object_set_new(json_object_get(r, "annotations"), "org.opencontainers.image.created",
                            json_string(str(version, "created_at")));
    return r;
}

void art_modelpack_release(struct art_modelpack *m)
{
    free(m->manifest.text);
    free(m->config.text);
    free(m->referrer.text);
    memset(m, 0, sizeof(*m));
}

enum mg_code art_modelpack_build(const json_t *version, const json_t *files, const char *bundle,
                                 size_t bundle_len, struct art_modelpack *out, struct mg_error *err)
{
    const json_t *art = json_object_get(version, "artifact");
    const char *digest = str(art, "digest"), *format;
    struct art_modelpack m;
    struct file_ref *refs = NULL;
    json_t *layers = NULL, *cfg = NULL, *man = NULL, *ann = NULL, *ref = NULL;
    size_t n = 0;
    char hex[65];
    enum mg_code rc;

    memset(&m, 0, sizeof(m));
    memset(out, 0, sizeof(*out));
    if (str(version, "model") == NULL || !json_is_integer(json_object_get(version, "version")) ||
        digest == NULL || !mg_valid_digest(digest, strlen(digest)) ||
        !json_is_integer(json_object_get(art, "size")))
        return mg_fail(err, MG_EINVAL, NULL,
                       "the version record lacks its model, number or artifact");
    if ((rc = file_refs(files, &refs, &n, err)) != MG_OK)
        return rc;
    rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((layers = layers_of(version, refs, n, &format)) == NULL ||
        (cfg = config_of(version, layers, format)) == NULL ||
        (ann = annotations_of(version, bundle, bundle_len)) == NULL ||
        doc_set(&m.config, cfg, err) != MG_OK)
        goto out;
    man = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:I}, s:O, s:O}", "schemaVersion", 2, "mediaType",
                    ART_OCI_MANIFEST, "artifactType", ART_MODELPACK_ARTIFACT, "config", "mediaType",
                    ART_MODELPACK_CONFIG, "digest", m.config.digest, "size",
                    (json_int_t)m.config.len, "layers", layers, "annotations", ann);
    if (man == NULL || doc_set(&m.manifest, man, err) != MG_OK)
        goto out;
    if (bundle != NULL) {
        mg_sha256_hex(bundle, bundle_len, hex);
        snprintf(m.bundle_digest, sizeof(m.bundle_digest), "sha256:%s", hex);
        if ((ref = referrer_of(&m, version, bundle_len)) == NULL ||
            doc_set(&m.referrer, ref, err) != MG_OK)
            goto out;
    }
    mg_error_clear(err);
    rc = MG_OK;
    *out = m;
    memset(&m, 0, sizeof(m));
out:
    art_modelpack_release(&m);
    free(refs);
    json_decref(layers);
    json_decref(cfg);
    json_decref(man);
    json_decref(ann);
    json_decref(ref);
    return rc;
}
