/*
 * introspect.c - see introspect.h: which files of a blob to read, the sources that stream
 * them (a file, an archive member through libarchive, a buffer), and the one summary per
 * blob built from the readers' results.
 */
#include "introspect.h"
#include "weights_int.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_int.h"

void art_introspect_limits_default(struct art_introspect_limits *lim)
{
    lim->max_safetensors_header = (uint64_t)16 << 20;
    lim->max_json_values = 1000000;
    lim->max_gguf_header = (uint64_t)256 << 20;
    lim->max_gguf_tensors = 1000000;
    lim->max_onnx_structure = (uint64_t)16 << 20;
    lim->max_onnx_memory = (uint64_t)256 << 20;
    lim->max_members = 1024;
    lim->max_io = 4096;
}

/* ---- sources -------------------------------------------------------------------------- */

static ssize_t fd_read(void *ctx, void *buf, size_t n, struct mg_error *err)
{
    ssize_t r;

    do
        r = read(*(int *)ctx, buf, n);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        mg_fail(err, MG_EIO, NULL, "cannot read the blob: %s", strerror(errno));
    return r;
}

static enum mg_code fd_seek(void *ctx, uint64_t n, struct mg_error *err)
{
    if (n > INT64_MAX || lseek(*(int *)ctx, (off_t)n, SEEK_CUR) < 0)
        return mg_fail(err, MG_EIO, NULL, "cannot seek in the blob: %s", strerror(errno));
    return MG_OK;
}

struct mem {
    const uint8_t *p;
    size_t n, pos;
};

static ssize_t mem_read(void *ctx, void *buf, size_t n, struct mg_error *err)
{
    struct mem *m = ctx;

    (void)err;
    if (n > m->n - m->pos)
        n = m->n - m->pos;
    memcpy(buf, m->p + m->pos, n);
    m->pos += n;
    return (ssize_t)n;
}

static ssize_t member_read(void *ctx, void *buf, size_t n, struct mg_error *err)
{
    la_ssize_t r = archive_read_data(ctx, buf, n);

    if (r < 0)
        mg_fail(err, MG_EINVAL, NULL, "cannot read an archive member: %s",
                archive_error_string(ctx) ? archive_error_string(ctx) : "unknown error");
    return (ssize_t)r;
}

/* ---- one file ------------------------------------------------------------------------- */

static enum mg_code read_as(struct art_src *s, const char *format,
                            const struct art_introspect_limits *lim, struct art_weights *w,
                            struct mg_error *err)
{
    s->format = format;
    art_weights_init(w, format);
    if (w->dtypes == NULL || w->metadata == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (strcmp(format, "safetensors") == 0)
        return art_safetensors_read(s, lim, w, err);
    if (strcmp(format, "gguf") == 0)
        return art_gguf_read(s, lim, w, err);
    return art_onnx_read(s, lim, w, err);
}

static json_t *weights_json(const struct art_weights *w)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:O, s:I, s:O, s:b}", "format", w->format, "tensors",
                          (json_int_t)w->tensors, "parameters", (json_int_t)w->parameters, "dtypes",
                          w->dtypes, "weights_bytes", (json_int_t)w->weights_bytes, "metadata",
                          w->metadata, "data_complete", w->data_complete);

    if (o && w->inputs)
        json_object_set(o, "inputs", w->inputs);
    if (o && w->outputs)
        json_object_set(o, "outputs", w->outputs);
    return o;
}

/* Read a plain blob whose format is sniffed. *out NULL when nothing was recognised. A blob
 * that only looked like ONNX and does not read as one is not ONNX (unless a cap stopped
 * it: then it is refused, naming the cap). */
static enum mg_code read_plain(struct art_src *s, const struct art_introspect_limits *lim,
                               const char *forced, json_t **out, struct mg_error *err)
{
    struct art_weights w;
    const uint8_t *p;
    const char *format = forced;
    size_t got;
    enum mg_code rc;

    *out = NULL;
    if (format == NULL) {
        if ((rc = art_src_peek(s, 16, &p, &got, err)) != MG_OK)
            return rc;
        if ((format = art_sniff(p, got, s->size)) == NULL)
            return MG_OK;
    }
    rc = read_as(s, format, lim, &w, err);
    if (rc == MG_EINVAL && forced == NULL && strcmp(format, "onnx") == 0 && !s->cap_hit) {
        mg_error_clear(err);
        rc = MG_OK;
    } else if (rc == MG_OK && (*out = weights_json(&w)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    art_weights_release(&w);
    return rc;
}

/* ---- archives ------------------------------------------------------------------------- */

static const char *format_of_name(const char *path)
{
    static const struct {
        const char *ext, *format;
    } ext[] = {{".safetensors", "safetensors"}, {".gguf", "gguf"}, {".onnx", "onnx"}};
    size_t n = strlen(path), i, k;

    for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
        k = strlen(ext[i].ext);
        if (n > k && strcasecmp(path + n - k, ext[i].ext) == 0)
            return ext[i].format;
    }
    return NULL;
}

struct members {
    json_t *list; /* [{"path", …weights_json…}] in archive order */
    uint32_t wanted, read;
};

static enum mg_code read_member(struct archive *a, struct archive_entry *e, const char *path,
                                const struct art_introspect_limits *lim, struct members *m,
                                struct mg_error *err)
{
    struct art_src *s = calloc(1, sizeof(*s));
    struct art_weights w;
    json_t *j;
    enum mg_code rc;

    if (s == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s->read = member_read;
    s->ctx = a;
    s->name = path;
    s->size = archive_entry_size_is_set(e) && archive_entry_size(e) >= 0
                  ? (uint64_t)archive_entry_size(e)
                  : UINT64_MAX;
    rc = read_as(s, format_of_name(path), lim, &w, err);
    if (rc == MG_OK) {
        j = weights_json(&w);
        if (j == NULL || json_object_set_new(j, "path", json_string(path)) != 0 ||
            json_array_append_new(m->list, j) != 0)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    art_weights_release(&w);
    free(s);
    m->read++;
    return rc;
}

/* Stream the archive once, reading the wanted members' headers (nothing past them). */
static enum mg_code read_archive_members(const char *path, const char *media_type,
                                         const struct art_introspect_limits *lim, struct members *m,
                                         struct mg_error *err)
{
    struct store_archive_limits alim;
    struct archive *a = NULL;
    struct archive_entry *e;
    const char *raw;
    char *norm = NULL;
    bool compressed;
    enum mg_code rc;
    int r;

    store_archive_limits_default(&alim);
    if ((rc = art_reader_new(media_type, &a, &compressed, err)) != MG_OK)
        return rc;
    if (archive_read_open_filename(a, path, READ_BLOCK) != ARCHIVE_OK) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot reopen the archive: %s",
                     archive_error_string(a) ? archive_error_string(a) : "unknown error");
        goto out;
    }
    while (m->read < m->wanted && m->read < lim->max_members) {
        r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK) {
            rc = mg_fail(err, MG_EINVAL, NULL, "archive is corrupt: %s",
                         archive_error_string(a) ? archive_error_string(a) : "unknown error");
            break;
        }
        raw = archive_entry_pathname(e);
        if (raw == NULL || archive_entry_filetype(e) != AE_IFREG)
            continue;
        if ((rc = art_path_normalise(raw, strlen(raw), &alim, &norm, err)) != MG_OK)
            break;
        if (format_of_name(norm) != NULL)
            rc = read_member(a, e, norm, lim, m, err);
        free(norm);
        norm = NULL;
        if (rc != MG_OK)
            break;
    }
out:
    (void)archive_read_free(a);
    return rc;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                  json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

static void add_counts(json_t *to, const json_t *from)
{
    static const char *const keys[] = {"tensors", "parameters", "weights_bytes"};
    const char *k;
    json_t *v, *d = json_object_get(to, "dtypes");
    size_t i;

    for (i = 0; i < 3; i++)
        json_object_set_new(to, keys[i],
                            json_integer(json_integer_value(json_object_get(to, keys[i])) +
                                         json_integer_value(json_object_get(from, keys[i]))));
    json_object_foreach(json_object_get(from, "dtypes"), k, v) json_object_set_new(
        d, k, json_integer(json_integer_value(json_object_get(d, k)) + json_integer_value(v)));
    if (!json_is_true(json_object_get(from, "data_complete")))
        json_object_set(to, "data_complete", json_false());
}

/* One summary for the members: the format holding the most weight bytes, totalled. */
static json_t *summarise(json_t *list, bool truncated)
{
    const char *formats[] = {"gguf", "onnx", "safetensors"}, *best = NULL;
    json_t *out = NULL, *e, *members = json_array(), *onnx = NULL;
    json_int_t bytes[3] = {0, 0, 0};
    size_t i, f;

    if (members == NULL)
        return NULL;
    json_array_foreach(list, i, e)
    {
        for (f = 0; f < 3; f++) {
            if (strcmp(formats[f], json_string_value(json_object_get(e, "format"))) == 0)
                bytes[f] += json_integer_value(json_object_get(e, "weights_bytes"));
        }
        json_array_append_new(
            members,
            json_pack("{s:O, s:O, s:O, s:O, s:O, s:O}", "path", json_object_get(e, "path"),
                      "format", json_object_get(e, "format"), "tensors",
                      json_object_get(e, "tensors"), "parameters", json_object_get(e, "parameters"),
                      "weights_bytes", json_object_get(e, "weights_bytes"), "data_complete",
                      json_object_get(e, "data_complete")));
    }
    /* The format with the most bytes; ties go to the first member's. */
    json_array_foreach(list, i, e)
    {
        const char *fmt = json_string_value(json_object_get(e, "format"));
        size_t bf = 0;
        for (f = 0; f < 3 && strcmp(formats[f], fmt) != 0; f++)
            ;
        for (bf = 0; best && bf < 3 && strcmp(formats[bf], best) != 0; bf++)
            ;
        if (best == NULL || bytes[f] > bytes[bf])
            best = formats[f];
        if (onnx == NULL && strcmp(fmt, "onnx") == 0)
            onnx = e;
    }
    json_array_foreach(list, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "format")), best) != 0)
            continue;
        if (out == NULL) {
            out = json_deep_copy(e);
            json_object_del(out, "path");
            json_object_del(out, "inputs");
            json_object_del(out, "outputs");
        } else {
            add_counts(out, e);
        }
    }
    if (out == NULL) {
        json_decref(members);
        return NULL;
    }
    if (onnx != NULL) {
        json_object_set(out, "inputs", json_object_get(onnx, "inputs"));
        json_object_set(out, "outputs", json_object_get(onnx, "outputs"));
    }
    json_object_set_new(out, "members", members);
    if (truncated)
        json_object_set_new(out, "members_truncated", json_true());
    return out;
}

static json_t *formats_of(const json_t *list)
{
    static const char *const all[] = {"gguf", "onnx", "safetensors"};
    json_t *out = json_array(), *e;
    size_t i, f;

    for (f = 0; out && f < 3; f++) {
        json_array_foreach(list, i, e)
        {
            if (strcmp(json_string_value(json_object_get(e, "format")), all[f]) == 0) {
                json_array_append_new(out, json_string(all[f]));
                break;
            }
        }
    }
    return out;
}

static enum mg_code introspect_archive(const char *path, const char *media_type,
                                       const struct store_archive_manifest *manifest,
                                       const struct art_introspect_limits *lim, json_t **formats,
                                       json_t **intro, struct mg_error *err)
{
    struct members m = {json_array(), 0, 0};
    locale_t utf8, prev = (locale_t)0;
    enum mg_code rc = MG_OK;
    json_t **sorted;
    size_t i;

    for (i = 0; i < manifest->n; i++)
        m.wanted += format_of_name(manifest->files[i].path) != NULL;
    if (m.list == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (m.wanted > 0) {
        utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        if (utf8 != (locale_t)0)
            prev = uselocale(utf8);
        rc = read_archive_members(path, media_type, lim, &m, err);
        if (prev != (locale_t)0)
            uselocale(prev);
        if (utf8 != (locale_t)0)
            freelocale(utf8);
    }
    if (rc == MG_OK && json_array_size(m.list) > 1) {
        /* Path order, so "the first ONNX member" does not depend on the packing. */
        sorted = calloc(json_array_size(m.list), sizeof(*sorted));
        if (sorted == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        } else {
            size_t n = json_array_size(m.list);
            for (i = 0; i < n; i++)
                sorted[i] = json_incref(json_array_get(m.list, i));
            qsort(sorted, n, sizeof(*sorted), cmp_path);
            json_array_clear(m.list);
            for (i = 0; i < n; i++)
                json_array_append_new(m.list, sorted[i]);
            free(sorted);
        }
    }
    if (rc == MG_OK) {
        *formats = formats_of(m.list);
        *intro = json_array_size(m.list) ? summarise(m.list, m.read < m.wanted) : NULL;
        if (*formats == NULL || (json_array_size(m.list) && *intro == NULL)) {
            json_decref(*formats);
            json_decref(*intro);
            *formats = *intro = NULL;
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
    }
    json_decref(m.list);
    return rc;
}

enum mg_code art_introspect(const char *path, const char *media_type,
                            const struct store_archive_manifest *manifest,
                            const struct art_introspect_limits *lim, json_t **formats,
                            json_t **introspection, struct mg_error *err)
{
    struct art_introspect_limits def;
    struct art_src *s;
    struct stat sb;
    enum mg_code rc;
    int fd;

    *formats = *introspection = NULL;
    if (lim == NULL) {
        art_introspect_limits_default(&def);
        lim = &def;
    }
    if (manifest != NULL)
        return introspect_archive(path, media_type, manifest, lim, formats, introspection, err);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot read the blob: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return rc;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        close(fd);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    s->read = fd_read;
    s->seek_ahead = fd_seek;
    s->ctx = &fd;
    s->size = (uint64_t)sb.st_size;
    rc = read_plain(s, lim, NULL, introspection, err);
    free(s);
    close(fd);
    if (rc == MG_OK) {
        *formats = json_array();
        if (*formats && *introspection)
            json_array_append(*formats, json_object_get(*introspection, "format"));
        if (*formats == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (rc != MG_OK) {
        json_decref(*introspection);
        json_decref(*formats);
        *formats = *introspection = NULL;
    }
    return rc;
}

enum mg_code art_introspect_buffer(const void *data, size_t n, const char *format,
                                   const struct art_introspect_limits *lim, json_t **out,
                                   struct mg_error *err)
{
    struct art_introspect_limits def;
    struct mem m = {data, n, 0};
    struct art_src *s;
    enum mg_code rc;

    *out = NULL;
    if (format != NULL && strcmp(format, "safetensors") != 0 && strcmp(format, "gguf") != 0 &&
        strcmp(format, "onnx") != 0)
        return mg_fail(err, MG_EINVAL, NULL, "unknown format '%.32s'", format);
    if (lim == NULL) {
        art_introspect_limits_default(&def);
        lim = &def;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s->read = mem_read;
    s->ctx = &m;
    s->size = n;
    rc = read_plain(s, lim, format, out, err);
    free(s);
    return rc;
}

bool art_introspect_sniff(const void *head, size_t n)
{
    return art_sniff(head, n, UINT64_MAX) != NULL;
}
