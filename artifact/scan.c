/*
 * scan.c - see scan.h: the allowlist, the report, and which reader each file or archive
 * member goes to (by content first, then by name), archives inside archives included.
 */
#include "scan_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_int.h"
#include "../os/file.h"

void art_scan_opts_default(struct art_scan_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->max_pickle_stack = 1000000;
    o->max_pickle_memo = 1000000;
    o->max_pickle_strings = (uint64_t)16 << 20;
    o->max_template = (uint64_t)4 << 20;
    o->max_json = (uint64_t)16 << 20;
}

const char *art_verdict_name(enum art_verdict v)
{
    return v == ART_CLEAN ? "clean" : v == ART_UNSAFE ? "unsafe" : "unknown";
}

enum art_verdict art_scan_verdict(const json_t *scan)
{
    const char *v = json_string_value(json_object_get(scan, "verdict"));

    if (v && strcmp(v, "clean") == 0)
        return ART_CLEAN;
    if (v && strcmp(v, "unsafe") == 0)
        return ART_UNSAFE;
    return ART_UNKNOWN;
}

/* ---- the allowlist: what torch.load(weights_only=True) accepts ------------------------ */

/* torch/_weights_only_unpickler.py _get_allowed_globals(): collections, torch.Size,
 * torch.Tensor, torch.device, Parameter, _get_layout, _codecs.encode (bytes at protocol 2),
 * bytearray, set, complex; every dtype, tensor class and storage class; the _rebuild_*
 * functions; the qschemes; and the NumPy array reconstruction it admits. */
static const char *const allowed[] = {
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout", "torch.Size", "torch.Tensor", "torch.device",
    "_codecs.encode", "builtins.bytearray", "builtins.set", "builtins.complex",
    /* dtypes */
    "torch.float32", "torch.float64", "torch.float16", "torch.bfloat16", "torch.complex32",
    "torch.complex64", "torch.complex128", "torch.uint8", "torch.int8", "torch.int16",
    "torch.int32", "torch.int64", "torch.uint16", "torch.uint32", "torch.uint64", "torch.bool",
    "torch.qint8", "torch.quint8", "torch.qint32", "torch.quint4x2", "torch.quint2x4",
    "torch.float8_e4m3fn", "torch.float8_e5m2", "torch.float8_e4m3fnuz", "torch.float8_e5m2fnuz",
    "torch.float8_e8m0fnu", "torch.float4_e2m1fn_x2", "torch.bits8", "torch.bits16",
    "torch.bits1x8", "torch.bits2x4", "torch.bits4x2",
    /* tensor classes */
    "torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor", "torch.BFloat16Tensor",
    "torch.ByteTensor", "torch.CharTensor", "torch.ShortTensor", "torch.IntTensor",
    "torch.LongTensor", "torch.BoolTensor", "torch.cuda.FloatTensor", "torch.cuda.DoubleTensor",
    "torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor", "torch.cuda.ByteTensor",
    "torch.cuda.CharTensor", "torch.cuda.ShortTensor", "torch.cuda.IntTensor",
    "torch.cuda.LongTensor", "torch.cuda.BoolTensor",
    /* storage classes */
    "torch.FloatStorage", "torch.DoubleStorage", "torch.HalfStorage", "torch.BFloat16Storage",
    "torch.ByteStorage", "torch.CharStorage", "torch.ShortStorage", "torch.IntStorage",
    "torch.LongStorage", "torch.BoolStorage", "torch.ComplexFloatStorage",
    "torch.ComplexDoubleStorage", "torch.QInt8Storage", "torch.QUInt8Storage",
    "torch.QInt32Storage", "torch.QUInt4x2Storage", "torch.QUInt2x4Storage", "torch.UntypedStorage",
    "torch.storage.UntypedStorage", "torch.storage.TypedStorage", "torch.cuda.FloatStorage",
    "torch.cuda.DoubleStorage", "torch.cuda.HalfStorage", "torch.cuda.BFloat16Storage",
    "torch.cuda.ByteStorage", "torch.cuda.CharStorage", "torch.cuda.ShortStorage",
    "torch.cuda.IntStorage", "torch.cuda.LongStorage", "torch.cuda.BoolStorage",
    /* rebuild functions */
    "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
    "torch._utils._rebuild_qtensor", "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_tensor_v3",
    "torch._utils._rebuild_sparse_tensor", "torch._utils._rebuild_meta_tensor_no_storage",
    "torch._utils._rebuild_nested_tensor", "torch._utils._rebuild_wrapper_subclass",
    "torch._utils._rebuild_device_tensor_from_cpu_tensor",
    "torch._utils._rebuild_device_tensor_from_numpy", "torch._tensor._rebuild_from_type_v2",
    /* layouts and qschemes */
    "torch.strided", "torch.sparse_coo", "torch.sparse_csr", "torch.sparse_csc", "torch.sparse_bsr",
    "torch.sparse_bsc", "torch._mkldnn", "torch.jagged", "torch.per_tensor_affine",
    "torch.per_channel_affine", "torch.per_tensor_symmetric", "torch.per_channel_symmetric",
    "torch.per_channel_affine_float_qparams",
    /* NumPy array reconstruction */
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct", "numpy.ndarray",
    "numpy.dtype", "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.dtypes.Float64DType", "numpy.dtypes.Float32DType", "numpy.dtypes.Float16DType",
    "numpy.dtypes.Int64DType", "numpy.dtypes.Int32DType", "numpy.dtypes.Int16DType",
    "numpy.dtypes.Int8DType", "numpy.dtypes.UInt64DType", "numpy.dtypes.UInt32DType",
    "numpy.dtypes.UInt16DType", "numpy.dtypes.UInt8DType", "numpy.dtypes.BoolDType",
    "numpy.dtypes.ObjectDType"};

bool art_scan_allowed(const char *global, const struct art_scan_opts *opts)
{
    size_t i;

    for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        if (strcmp(allowed[i], global) == 0)
            return true;
    }
    for (i = 0; opts && i < opts->n_allow; i++) {
        if (opts->allow[i] && strcmp(opts->allow[i], global) == 0)
            return true;
    }
    return false;
}

const char *const art_scan_rules[ART_SCAN_NRULES] = {"pickle-import",
                                                     "pickle-computed-import",
                                                     "pickle-call",
                                                     "pickle-extension",
                                                     "pickle-malformed",
                                                     "pickle-opcode",
                                                     "pickle-cap",
                                                     "jinja-dunder",
                                                     "jinja-attr-filter",
                                                     "jinja-attribute",
                                                     "jinja-filter",
                                                     "jinja-test",
                                                     "jinja-statement",
                                                     "jinja-global",
                                                     "jinja-syntax",
                                                     "jinja-cap",
                                                     "keras-lambda",
                                                     "keras-module",
                                                     "keras-cap",
                                                     "keras-malformed",
                                                     "onnx-external-path",
                                                     "onnx-malformed",
                                                     "gguf-malformed",
                                                     "gguf-version",
                                                     "npy-malformed",
                                                     "npy-version",
                                                     "npy-cap",
                                                     "archive-malformed",
                                                     "archive-cap",
                                                     "archive-depth",
                                                     "truncated"};

int art_scan_rule_index(const char *rule)
{
    int i;

    for (i = 0; rule && i < ART_SCAN_NRULES; i++) {
        if (strcmp(art_scan_rules[i], rule) == 0)
            return i;
    }
    return -1;
}

/* ---- the report ---------------------------------------------------------------------- */

void art_report_add(struct art_report *r, const char *format, const char *rule, bool high,
                    uint64_t offset, const char *fmt, ...)
{
    char detail[768], member[1024];
    va_list ap;
    json_t *f;

    if ((high ? ART_UNSAFE : ART_UNKNOWN) > r->verdict)
        r->verdict = high ? ART_UNSAFE : ART_UNKNOWN;
    if (r->findings == NULL)
        return;
    if (json_array_size(r->findings) >= ART_SCAN_MAX_FINDINGS) {
        r->dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    /* Names come from the file: whatever bytes they hold, the report is printable text. */
    for (char *d = detail; *d; d++) {
        if ((unsigned char)*d < 0x20 || (unsigned char)*d > 0x7e)
            *d = '?';
    }
    if (r->member != NULL) {
        snprintf(member, sizeof(member), "%s", r->member);
        for (char *d = member; *d; d++) {
            if ((unsigned char)*d < 0x20 || (unsigned char)*d > 0x7e)
                *d = '?';
        }
    }
    f = json_pack("{s:s?, s:s, s:s, s:s, s:s, s:I}", "member", r->member ? member : NULL, "format",
                  format, "rule", rule, "severity", high ? "high" : "medium", "detail", detail,
                  "offset", (json_int_t)(offset > INT64_MAX ? INT64_MAX : offset));
    if (f == NULL || json_array_append_new(r->findings, f) != 0) {
        r->dropped++; /* the verdict is already counted */
        return;
    }
}

/* ---- sources ------------------------------------------------------------------------- */

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

static enum mg_code mem_seek(void *ctx, uint64_t n, struct mg_error *err)
{
    struct mem *m = ctx;

    (void)err;
    m->pos = n > m->n - m->pos ? m->n : m->pos + (size_t)n;
    return MG_OK;
}

/* ---- dispatch ------------------------------------------------------------------------ */

struct scan {
    struct art_report r;
    struct mg_error *err;
    uint64_t entries;  /* archive entries seen, all levels */
    uint64_t budget;   /* bytes nested archives may expand to, all together */
    uint64_t expanded; /* what they did */
};

/* A member of an archive. One inside a nested archive counts its bytes against the
 * budget: the upload's ratio cap bounded only the outer archive. */
struct member {
    struct archive *a;
    struct scan *c;
    bool nested;
};

static ssize_t member_read(void *ctx, void *buf, size_t n, struct mg_error *err)
{
    struct member *m = ctx;
    la_ssize_t r = archive_read_data(m->a, buf, n);

    if (r < 0)
        mg_fail(err, MG_EINVAL, NULL, "cannot read an archive member: %s",
                archive_error_string(m->a) ? archive_error_string(m->a) : "unknown error");
    if (r > 0 && m->nested) {
        m->c->expanded += (uint64_t)r;
        if (m->c->expanded > m->c->budget) {
            mg_fail(err, MG_EINVAL, NULL,
                    "nested archives expand past the scanner's budget of %llu bytes",
                    (unsigned long long)m->c->budget);
            return -1;
        }
    }
    return (ssize_t)r;
}

static bool has_ext(const char *name, const char *const *exts)
{
    size_t n = name ? strlen(name) : 0, k;

    for (; name && *exts; exts++) {
        k = strlen(*exts);
        if (n >= k && strcasecmp(name + n - k, *exts) == 0)
            return true;
    }
    return false;
}

static const char *base_name(const char *name)
{
    const char *b = name ? strrchr(name, '/') : NULL;
    const char *bang = name ? strrchr(name, '!') : NULL;

    if (bang && (!b || bang > b))
        b = bang;
    return b ? b + 1 : name;
}

/* A PyTorch zip checkpoint's tensor storage: "<dir>/data/<digits>". Never a pickle to
 * torch.load (it reads the bytes as numbers), so never read. */
bool art_torch_storage(const char *name)
{
    const char *b = base_name(name);
    size_t n = name ? strlen(name) : 0, i;

    if (b == NULL || b == name || *b == '\0' || (size_t)(b - name) < 6 ||
        strncmp(b - 6, "/data/", 6) != 0)
        return false;
    for (i = 0; b[i]; i++) {
        if (b[i] < '0' || b[i] > '9')
            return false;
    }
    return n > 0;
}

static enum mg_code scan_src(struct scan *c, struct art_src *s, const char *name, int depth);

struct la_ctx {
    struct art_src *s;
    struct scan *c;
    bool failed;
};

/* libarchive pulls a nested archive's bytes straight out of the parent source's buffer. */
static la_ssize_t la_read(struct archive *a, void *ctx, const void **buf)
{
    struct la_ctx *l = ctx;
    const uint8_t *p;
    size_t got;

    (void)a;
    if (art_src_peek(l->s, ART_SRC_BUF, &p, &got, l->c->err) != MG_OK ||
        art_src_skip(l->s, got, l->c->err) != MG_OK) {
        l->failed = true;
        return -1;
    }
    *buf = p;
    return (la_ssize_t)got;
}

/* One regular file `raw` of the archive `name` (NULL: the blob) at depth, read through
 * read(ctx) into s (scratch). */
static enum mg_code scan_entry(struct scan *c, struct art_src *s, const char *name,
                               const struct art_scan_member *m, int depth)
{
    size_t len = (name ? strlen(name) + 1 : 0) + strlen(m->raw) + 1;
    char *child = malloc(len);
    enum mg_code rc = MG_OK;

    if (child == NULL)
        return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
    snprintf(child, len, "%s%s%s", name ? name : "", name ? "!" : "", m->raw);
    if (!art_torch_storage(child)) {
        memset(s, 0, sizeof(*s));
        s->read = m->read;
        s->borrow = m->borrow;
        s->ctx = m->ctx;
        s->name = child;
        s->size = m->size;
        s->region = m->region_fd >= 0 && m->size != UINT64_MAX;
        s->region_fd = m->region_fd;
        s->region_off = m->region_off;
        rc = scan_src(c, s, child, depth + 1);
        if (rc == MG_EINVAL) { /* the member did not read: the archive is damaged */
            art_report_add(&c->r, "archive", "archive-malformed", false, s->off, "%s",
                           c->err->message);
            mg_error_clear(c->err);
            rc = MG_OK;
        }
    }
    free(child);
    return rc;
}

static enum mg_code scan_entries(struct scan *c, struct archive *a, const char *name, int depth)
{
    struct archive_entry *e;
    struct member mctx = {a, c, depth > 0};
    struct art_scan_member m;
    struct art_src *s = NULL;
    const char *raw;
    enum mg_code rc = MG_OK;
    int r;

    if ((s = calloc(1, sizeof(*s))) == NULL)
        return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
    for (;;) {
        r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            art_report_add(&c->r, "archive", "archive-malformed", false, 0,
                           "cannot read the archive: %.200s",
                           archive_error_string(a) ? archive_error_string(a) : "unknown error");
            break;
        }
        if (++c->entries > 1000000) {
            art_report_add(&c->r, "archive", "archive-cap", false, 0,
                           "more than 1,000,000 archive entries");
            break;
        }
        if (depth > 0) {
            int64_t out = archive_filter_bytes(a, 0);
            if (out > 0 && (uint64_t)out > c->budget - c->expanded) {
                art_report_add(&c->r, "archive", "archive-cap", false, 0,
                               "nested archives expand past the scanner's budget of %llu bytes",
                               (unsigned long long)c->budget);
                break;
            }
        }
        raw = archive_entry_pathname(e);
        if (raw == NULL || archive_entry_filetype(e) != AE_IFREG)
            continue;
        m = (struct art_scan_member){raw,
                                     archive_entry_size_is_set(e) && archive_entry_size(e) >= 0
                                         ? (uint64_t)archive_entry_size(e)
                                         : UINT64_MAX,
                                     member_read,
                                     NULL,
                                     &mctx,
                                     -1,
                                     0};
        rc = scan_entry(c, s, name, &m, depth);
        if (rc != MG_OK)
            break;
    }
    if (depth > 0 && archive_filter_bytes(a, 0) > 0) {
        c->expanded += (uint64_t)archive_filter_bytes(a, 0);
        if (rc == MG_OK && c->expanded > c->budget)
            art_report_add(&c->r, "archive", "archive-cap", false, 0,
                           "nested archives expand past the scanner's budget of %llu bytes",
                           (unsigned long long)c->budget);
    }
    free(s);
    return rc;
}

/* An archive (or compressed stream) read from s; path: read the file instead (seekable). */
int art_scan_spill_tmp(void *ctx)
{
    const char *dir = ctx ? (const char *)ctx : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char tmpl[4096];
    int fd;

#ifdef O_TMPFILE
    if ((fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) >= 0)
        return fd;
#endif
    if (snprintf(tmpl, sizeof(tmpl), "%s/mg-scan-XXXXXX", dir) >= (int)sizeof(tmpl))
        return -1;
    if ((fd = mkostemp(tmpl, O_CLOEXEC)) >= 0)
        unlink(tmpl);
    return fd;
}

static enum mg_code scan_archive(struct scan *c, struct art_src *s, const char *path,
                                 const char *media, const char *name, int depth)
{
    struct la_ctx l = {s, c, false};
    struct archive *a = NULL;
    struct art_zip_region *g = NULL;
    struct art_zip_kept *sp = NULL;
    uint64_t hole_at;
    bool compressed;
    enum mg_code rc;
    int r, fd = -1;

    if (depth >= ART_SCAN_MAX_DEPTH) {
        art_report_add(&c->r, "archive", "archive-depth", false, 0,
                       "archives nest deeper than %d; unpack them before uploading",
                       ART_SCAN_MAX_DEPTH);
        return MG_OK;
    }
    if (path == NULL && strcmp(media, MT_ZIP) == 0 && s->region) {
        if ((g = art_zip_region_new(s->region_fd, s->region_off, s->size)) == NULL)
            return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
    } else if (path == NULL && strcmp(media, MT_ZIP) == 0 && c->r.opts->spill != NULL &&
               !c->r.opts->spill_zips && s->size != UINT64_MAX && s->off <= s->size) {
        if ((rc = art_zip_keep(&c->r, s, name, &sp, c->err)) != MG_OK)
            return rc == MG_EINVAL ? MG_OK : rc; /* MG_EINVAL: reported as a finding */
    } else if (path == NULL && strcmp(media, MT_ZIP) == 0 &&
               (rc = art_zip_spill(&c->r, s, &fd, c->err)) != MG_OK) {
        return rc == MG_EINVAL ? MG_OK : rc; /* MG_EINVAL: reported as a finding */
    }
    if ((rc = art_reader_new(media, &a, &compressed, c->err)) != MG_OK) {
        if (fd >= 0)
            close(fd);
        free(g);
        if (sp)
            art_zip_kept_free(sp);
        return rc;
    }
    if (sp != NULL) {
        r = art_zip_open_kept(a, sp);
    } else if (g != NULL) {
        r = art_zip_open_region(a, g);
    } else {
        r = path      ? archive_read_open_filename(a, path, READ_BLOCK)
            : fd >= 0 ? archive_read_open_fd(a, fd, READ_BLOCK)
                      : archive_read_open(a, &l, NULL, la_read, NULL);
    }
    if (r != ARCHIVE_OK) {
        if (l.failed)
            rc = c->err->code;
        else
            art_report_add(&c->r, "archive", "archive-malformed", false, 0,
                           "cannot open the archive: %.200s",
                           archive_error_string(a) ? archive_error_string(a) : "unknown error");
        goto out;
    }
    rc = scan_entries(c, a, name, depth);
    if (l.failed && rc == MG_OK && c->err->code != MG_OK && c->err->code != MG_EINVAL)
        rc = c->err->code;
out:
    (void)archive_read_free(a);
    if (sp != NULL && art_zip_kept_hole(sp, &hole_at))
        art_report_add(&c->r, "archive", "archive-malformed", false, hole_at,
                       "the zip's central directory names bytes at offset %llu that its local "
                       "headers, read in order, do not lead to; such a zip is read whole only "
                       "outside a compressed archive",
                       (unsigned long long)hole_at);
    if (fd >= 0)
        close(fd);
    free(g);
    if (sp)
        art_zip_kept_free(sp);
    return rc;
}

/* Names that are nothing but pickles. .pt .pth .bin .ckpt are pickles when they start with
 * PROTO (or zips, or raw tensor bytes: ONNX external data is often "weights.bin"), so the
 * rest of them is only probed, as any other file is. */
static const char *const pickle_only_ext[] = {".pkl", ".pickle", ".joblib", NULL};

/* First bytes a protocol 0 or 1 pickle starts with: MARK, GLOBAL, INST, the empty
 * containers, NONE and the text scalars. */
static bool maybe_old_pickle(uint8_t b)
{
    return b != 0 && strchr("(ci]})NISVLFJKMXUTG", b) != NULL;
}

bool art_scan_sniff(const void *head, size_t n)
{
    const uint8_t *h = head;

    return n > 0 && ((n >= 2 && h[0] == 0x80 && h[1] <= 5) ||
                     (n >= 6 && memcmp(h, "\x93NUMPY", 6) == 0) || maybe_old_pickle(h[0]));
}

/* What scan_src_at() does first: the formats read as they are, then any archive. */
static bool reads_as_archive(const uint8_t *h, size_t got, uint64_t size)
{
    const char *sniff = art_sniff(h, got, size);

    return !(got >= 4 && memcmp(h, "GGUF", 4) == 0) &&
           !(sniff && strcmp(sniff, "safetensors") == 0) &&
           strcmp(store_media_type_detect(h, got), MT_OCTET) != 0;
}

bool art_scan_walks(const void *head, size_t n, uint64_t size)
{
    return n > 0 && reads_as_archive(head, n, size);
}

static enum mg_code scan_src_at(struct scan *c, struct art_src *s, const char *path,
                                const char *name, int depth)
{
    const char *prev = c->r.member, *media, *sniff;
    const uint8_t *h;
    size_t got;
    enum mg_code rc;

    if ((rc = art_src_peek(s, 512, &h, &got, c->err)) != MG_OK)
        return rc;
    if (got == 0)
        return MG_OK;
    c->r.member = name;
    media = store_media_type_detect(h, got);
    sniff = art_sniff(h, got, s->size);
    if (got >= 4 && memcmp(h, "GGUF", 4) == 0)
        rc = art_gguf_templates_scan(s, &c->r, c->err);
    else if (sniff && strcmp(sniff, "safetensors") == 0)
        rc = MG_OK; /* a JSON header and numbers: data only */
    else if (strcmp(media, MT_OCTET) != 0)
        rc = scan_archive(c, s, path, media, name, depth);
    else if (got >= 6 && memcmp(h, "\x93NUMPY", 6) == 0)
        rc = art_npy_scan(s, &c->r, c->err);
    else if ((got >= 2 && h[0] == 0x80 && h[1] <= 5) || has_ext(name, pickle_only_ext))
        rc = art_pickle_scan(s, &c->r, false, c->err);
    else if (has_ext(name, (const char *const[]){".onnx", NULL}))
        rc = art_onnx_external_scan(s, &c->r, c->err);
    else if (name && strcmp(base_name(name), "config.json") == 0)
        rc = art_keras_config_scan(s, &c->r, c->err);
    else if (maybe_old_pickle(h[0]))
        rc = art_pickle_scan(s, &c->r, true, c->err);
    else if (sniff && strcmp(sniff, "onnx") == 0) {
        /* a plain blob that looks like ONNX: its external data, if it reads as ONNX */
        struct art_report probe = c->r;
        probe.findings = json_array();
        probe.verdict = ART_CLEAN;
        if (probe.findings == NULL)
            return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
        rc = art_onnx_external_scan(s, &probe, c->err);
        if (rc == MG_OK && probe.verdict == ART_UNSAFE) {
            size_t i;
            json_t *f;
            c->r.verdict = ART_UNSAFE;
            json_array_foreach(probe.findings, i, f)
            {
                if (c->r.findings && json_array_size(c->r.findings) < ART_SCAN_MAX_FINDINGS)
                    json_array_append(c->r.findings, f);
                else
                    c->r.dropped++;
            }
        }
        json_decref(probe.findings);
    }
    c->r.member = prev;
    return rc;
}

static enum mg_code scan_src(struct scan *c, struct art_src *s, const char *name, int depth)
{
    return scan_src_at(c, s, NULL, name, depth);
}

/* ---- the entry points ------------------------------------------------------------------ */

static enum mg_code finish(struct scan *c, json_t *findings, json_t **scan)
{
    *scan = json_pack("{s:s, s:s, s:o}", "verdict", art_verdict_name(c->r.verdict), "scanner",
                      ART_SCANNER, "findings", findings);
    if (*scan == NULL)
        return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
    if (c->r.dropped > 0)
        json_object_set_new(*scan, "findings_dropped", json_integer((json_int_t)c->r.dropped));
    return MG_OK;
}

static enum mg_code scan_run(struct art_src *s, const char *path, const char *name,
                             const struct art_scan_opts *opts, json_t **scan, struct mg_error *err)
{
    struct art_scan_opts def;
    struct scan c;
    json_t *findings = json_array();
    enum mg_code rc;
    uint64_t budget;

    *scan = NULL;
    if (findings == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (opts == NULL) {
        art_scan_opts_default(&def);
        opts = &def;
    }
    memset(&c, 0, sizeof(c));
    c.r.opts = opts;
    c.r.findings = findings;
    c.err = err;
    if (s->size == UINT64_MAX || !art_mul(s->size, STORE_ARCHIVE_MAX_RATIO, &budget))
        budget = UINT64_MAX;
    c.budget = budget > STORE_ARCHIVE_RATIO_FLOOR ? budget : STORE_ARCHIVE_RATIO_FLOOR;
    rc = scan_src_at(&c, s, path, name, 0);
    if (rc == MG_EINVAL) { /* the source itself ended early */
        art_report_add(&c.r, s->format ? s->format : "blob", "truncated", false, s->off, "%s",
                       err->message);
        mg_error_clear(err);
        rc = MG_OK;
    }
    if (rc != MG_OK) {
        json_decref(findings);
        return rc;
    }
    return finish(&c, findings, scan);
}

enum mg_code art_scan_file(const char *path, const struct art_scan_opts *opts, json_t **scan,
                           struct mg_error *err)
{
    struct art_src *s;
    struct stat sb;
    enum mg_code rc;
    int fd;

    *scan = NULL;
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
    rc = scan_run(s, path, NULL, opts, scan, err);
    free(s);
    close(fd);
    return rc;
}

/* ---- a walk fed by someone else's pass over the archive ------------------------------ */

struct art_scan_walk {
    struct art_scan_opts def;
    struct scan c;
    struct mg_error err; /* c.err: the scanner's own */
    struct art_src s;    /* scratch for each entry */
};

enum mg_code art_scan_walk_new(const struct art_scan_opts *opts, uint64_t size,
                               struct art_scan_walk **out, struct mg_error *err)
{
    struct art_scan_walk *w = calloc(1, sizeof(*w));
    uint64_t budget;

    *out = NULL;
    if (w == NULL || (w->c.r.findings = json_array()) == NULL) {
        free(w);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (opts == NULL) {
        art_scan_opts_default(&w->def);
        opts = &w->def;
    }
    w->c.r.opts = opts;
    w->c.err = &w->err;
    /* as scan_run(): the budget nested archives share */
    if (size == UINT64_MAX || !art_mul(size, STORE_ARCHIVE_MAX_RATIO, &budget))
        budget = UINT64_MAX;
    w->c.budget = budget > STORE_ARCHIVE_RATIO_FLOOR ? budget : STORE_ARCHIVE_RATIO_FLOOR;
    *out = w;
    return MG_OK;
}

enum mg_code art_scan_walk_entry(struct art_scan_walk *w, const struct art_scan_member *m,
                                 struct mg_error *err)
{
    enum mg_code rc;

    /* as scan_entries() at depth 0 */
    if (m->raw == NULL || w->c.entries > 1000000)
        return MG_OK;
    if (++w->c.entries > 1000000) {
        art_report_add(&w->c.r, "archive", "archive-cap", false, 0,
                       "more than 1,000,000 archive entries");
        return MG_OK;
    }
    if ((rc = scan_entry(&w->c, &w->s, NULL, m, 0)) != MG_OK) {
        *err = w->err;
        mg_error_clear(&w->err);
    }
    return rc;
}

void art_scan_walk_free(struct art_scan_walk **w)
{
    if (*w == NULL)
        return;
    json_decref((*w)->c.r.findings);
    free(*w);
    *w = NULL;
}

enum mg_code art_scan_walk_finish(struct art_scan_walk **w, json_t **scan, struct mg_error *err)
{
    enum mg_code rc;

    (*w)->c.err = err;
    rc = finish(&(*w)->c, (*w)->c.r.findings, scan); /* steals the findings */
    (*w)->c.r.findings = NULL;
    art_scan_walk_free(w);
    return rc;
}

enum mg_code art_scan_buffer(const void *data, size_t n, const char *name,
                             const struct art_scan_opts *opts, json_t **scan, struct mg_error *err)
{
    struct mem m = {data, n, 0};
    struct art_src *s;
    enum mg_code rc;

    *scan = NULL;
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s->read = mem_read;
    s->seek_ahead = mem_seek;
    s->ctx = &m;
    s->size = n;
    rc = scan_run(s, NULL, name, opts, scan, err);
    free(s);
    return rc;
}

enum art_verdict art_scan_pickle(const void *data, size_t n, const struct art_scan_opts *opts,
                                 json_t *findings)
{
    struct art_scan_opts def;
    struct art_report r = {opts, findings, ART_CLEAN, 0, NULL};
    struct mem m = {data, n, 0};
    struct mg_error err = {0};
    struct art_src *s;

    if (opts == NULL) {
        art_scan_opts_default(&def);
        r.opts = &def;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return ART_UNKNOWN;
    s->read = mem_read;
    s->ctx = &m;
    s->size = n;
    s->format = "pickle";
    if (art_pickle_scan(s, &r, false, &err) != MG_OK && r.verdict < ART_UNKNOWN)
        r.verdict = ART_UNKNOWN;
    free(s);
    return r.verdict;
}

enum art_verdict art_scan_template(const char *tpl, size_t n, const struct art_scan_opts *opts,
                                   json_t *findings)
{
    struct art_scan_opts def;
    struct art_report r = {opts, findings, ART_CLEAN, 0, NULL};

    if (opts == NULL) {
        art_scan_opts_default(&def);
        r.opts = &def;
    }
    art_template_scan(tpl, n, "chat_template", &r);
    return r.verdict;
}
