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
#include "../common/file.h"

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
static bool torch_storage(const char *name)
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
    if (!torch_storage(child)) {
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

/* Copy the rest of s (a zip inside an archive) into a spill file: *fd, at offset 0.
 * MG_EINVAL when it could not be (reported as a finding: the zip stays unknown). */
static enum mg_code spill_zip(struct scan *c, struct art_src *s, int *fd)
{
    const struct art_scan_opts *o = c->r.opts;
    const uint8_t *p;
    size_t got;
    enum mg_code rc;

    *fd = o->spill ? o->spill(o->spill_ctx) : -1;
    if (*fd < 0) {
        art_report_add(&c->r, "archive", "archive-cap", false, 0,
                       "a zip inside an archive is read as loaders read it (its central "
                       "directory) only from a scratch file, and there is none%s%s",
                       o->spill ? ": " : "", o->spill ? strerror(errno) : "");
        return MG_EINVAL;
    }
    for (;;) {
        if (s->borrow != NULL && s->pos == s->len) { /* nothing buffered: no copy */
            const void *bp;
            ssize_t n = s->borrow(s->ctx, &bp, SIZE_MAX, c->err);
            if (n < 0) {
                rc = c->err->code != MG_OK ? c->err->code : MG_EIO;
                break;
            }
            if (n == 0)
                return lseek(*fd, 0, SEEK_SET) == 0 ? MG_OK : MG_EINVAL;
            if (mg_write_all(*fd, bp, (size_t)n, "the scanner's scratch file", c->err) != MG_OK) {
                art_report_add(&c->r, "archive", "archive-cap", false, 0, "%s", c->err->message);
                mg_error_clear(c->err);
                rc = MG_EINVAL;
                break;
            }
            s->off += (uint64_t)n;
            continue;
        }
        if ((rc = art_src_peek(s, ART_SRC_BUF, &p, &got, c->err)) != MG_OK)
            break;
        if (got == 0)
            return lseek(*fd, 0, SEEK_SET) == 0 ? MG_OK : MG_EINVAL;
        if (mg_write_all(*fd, p, got, "the scanner's scratch file", c->err) != MG_OK) {
            art_report_add(&c->r, "archive", "archive-cap", false, 0, "%s", c->err->message);
            mg_error_clear(c->err);
            rc = MG_EINVAL;
            break;
        }
        if ((rc = art_src_skip(s, got, c->err)) != MG_OK)
            break;
    }
    if (rc == MG_EINVAL && c->err->code == MG_EINVAL) { /* the member itself did not read */
        art_report_add(&c->r, "archive", "archive-malformed", false, s->off, "%s", c->err->message);
        mg_error_clear(c->err);
    }
    close(*fd);
    *fd = -1;
    return rc;
}

/*
 * A zip inside a compressed archive, read as it streams by: the bytes the zip reader may
 * need are kept in memory (every local header, the data of every entry but a torch tensor
 * storage's, and the last ZIP_TAIL bytes, where the end of central directory and usually
 * the central directory lie), a storage's data is skipped. libarchive then reads the zip
 * through its central directory over the kept bytes exactly as it would over a copy of the
 * whole zip: every byte it is handed is the zip's own, at its own offset. Should it ask for
 * one that was not kept (a central directory naming an entry where no local header was
 * seen, or pointing into a storage's data), the read fails and the zip is "unknown".
 * Where the skipped data ends is found by the next local or central header's signature (a
 * storage written with a data descriptor has no size before its data); a false match only
 * keeps more bytes, never fewer of what the reader reads, since those are checked.
 */
#define ZIP_KEEP_CAP ((uint64_t)16 << 20)
#define ZIP_TAIL ((uint64_t)64 << 10) /* libarchive looks for the EOCD in the last 16 KiB */
#define ZIP_LOOKBEHIND 24             /* a zip64 data descriptor before the next header */

struct kept {
    uint64_t off;
    size_t n, cap;
    uint8_t *p;
};

struct sparse {
    struct kept *v;
    size_t n, cap;
    uint64_t size; /* the zip's length (bytes streamed) */
    uint64_t pos;  /* libarchive's read position */
    uint64_t kept;
    bool hole;                     /* the reader asked for bytes that were not kept */
    bool capped;                   /* over the cap, and no scratch file to hold it */
    int fd;                        /* >= 0: over the cap, what is kept lies there */
    const struct art_scan_opts *o; /* its spill function */
    uint8_t *buf;                  /* what is read from fd */
    uint64_t hole_at;
};

static void sparse_free(struct sparse *sp)
{
    for (size_t i = 0; i < sp->n; i++)
        free(sp->v[i].p);
    free(sp->v);
    free(sp->buf);
    if (sp->fd >= 0)
        close(sp->fd);
    free(sp);
}

static bool pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return true;
}

/* Over the cap: what is kept, and what is kept from now on, goes to the scratch file, at
 * its own offset (where nothing was kept, the file has a hole the reader is never given). */
static enum mg_code sparse_to_file(struct sparse *sp, struct mg_error *err)
{
    int e;

    sp->fd = sp->o->spill ? sp->o->spill(sp->o->spill_ctx) : -1;
    e = errno;
    if (sp->fd < 0 || (sp->buf = malloc(ART_SRC_BUF)) == NULL) {
        sp->capped = true;
        return mg_fail(err, MG_EINVAL, NULL,
                       "a zip inside a compressed archive holds more than %llu MiB that the "
                       "scanner reads, and there is no scratch file to hold it%s%s",
                       (unsigned long long)(ZIP_KEEP_CAP >> 20), sp->fd < 0 ? ": " : "",
                       sp->fd < 0 ? strerror(e) : "");
    }
    for (size_t i = 0; i < sp->n; i++) {
        if (!pwrite_all(sp->fd, sp->v[i].p, sp->v[i].n, sp->v[i].off)) {
            sp->capped = true;
            return mg_fail(err, MG_EINVAL, NULL, "cannot write the scanner's scratch file: %s",
                           strerror(errno));
        }
        free(sp->v[i].p);
        sp->v[i].p = NULL;
        sp->v[i].cap = 0;
    }
    return MG_OK;
}

/* Keep [off, off + n) (off at or past the end of what is kept). MG_EINVAL: the cap. */
static enum mg_code sparse_keep(struct sparse *sp, uint64_t off, const uint8_t *p, size_t n,
                                struct mg_error *err)
{
    struct kept *k = sp->n ? &sp->v[sp->n - 1] : NULL;

    if (k && off < k->off + k->n) { /* overlaps what is kept: keep only the rest */
        uint64_t d = k->off + k->n - off;
        if (d >= n)
            return MG_OK;
        p += d;
        n -= (size_t)d;
        off += d;
    }
    if (n == 0)
        return MG_OK;
    if (sp->fd < 0 && sp->kept + n > ZIP_KEEP_CAP) {
        enum mg_code rc = sparse_to_file(sp, err);
        if (rc != MG_OK)
            return rc;
    }
    if (k == NULL || off != k->off + k->n) {
        if (sp->n == sp->cap) {
            size_t nc = sp->cap ? sp->cap * 2 : 16;
            struct kept *nv = realloc(sp->v, nc * sizeof(*nv));
            if (nv == NULL)
                return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            sp->v = nv;
            sp->cap = nc;
        }
        k = &sp->v[sp->n++];
        *k = (struct kept){off, 0, 0, NULL};
    }
    if (sp->fd >= 0) {
        if (!pwrite_all(sp->fd, p, n, off)) {
            sp->capped = true;
            return mg_fail(err, MG_EINVAL, NULL, "cannot write the scanner's scratch file: %s",
                           strerror(errno));
        }
        k->n += n;
        sp->kept += n;
        return MG_OK;
    }
    if (k->n + n > k->cap) {
        size_t nc = k->cap ? k->cap : 4096;
        uint8_t *np;
        while (nc < k->n + n)
            nc *= 2;
        if (nc > ZIP_KEEP_CAP) /* k->n + n is not: one run holds no more than the cap */
            nc = (size_t)ZIP_KEEP_CAP;
        if ((np = realloc(k->p, nc)) == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        k->p = np;
        k->cap = nc;
    }
    memcpy(k->p + k->n, p, n);
    k->n += n;
    sp->kept += n;
    return MG_OK;
}

/* The streaming parse: where the next local header starts, and what to do with data. */
enum zstate { Z_HDR, Z_KEEP_N, Z_SKIP_N, Z_KEEP_SIG, Z_SKIP_SIG, Z_REST };

struct zparse {
    enum zstate st;
    uint64_t hdr_off; /* Z_HDR: where the header being read starts */
    uint64_t left;    /* Z_KEEP_N, Z_SKIP_N */
    uint64_t data_off;
    uint8_t win[ZIP_LOOKBEHIND + 4]; /* the last bytes skipped (Z_SKIP_SIG) */
    size_t win_n;
    const char *prefix; /* the zip's own name (for torch_storage) */
};

static bool zip_sig(const uint8_t *p)
{
    return p[0] == 'P' && p[1] == 'K' &&
           ((p[2] == 3 && p[3] == 4) || (p[2] == 1 && p[3] == 2) || (p[2] == 5 && p[3] == 6) ||
            (p[2] == 6 && p[3] == 6));
}

/* The first header signature in p[0, n), or n. */
static size_t find_sig(const uint8_t *p, size_t n)
{
    size_t i = 0;
    const uint8_t *q;

    while (i + 4 <= n && (q = memchr(p + i, 'P', n - i - 3)) != NULL) {
        i = (size_t)(q - p);
        if (zip_sig(q))
            return i;
        i++;
    }
    return n;
}

/* A local header is complete in the last kept run from hdr_off on: decide on its data. */
static bool zip_header(struct sparse *sp, struct zparse *z, const char *prefix)
{
    struct kept *k = sp->n ? &sp->v[sp->n - 1] : NULL;
    const uint8_t *h;
    uint64_t at, need;
    uint16_t flags, nlen, xlen;
    uint32_t csize;
    char *name, *child;
    bool storage;
    size_t plen = prefix ? strlen(prefix) + 1 : 0;

    if (sp->fd >= 0) {
        z->st = Z_REST; /* past the cap: everything from here on */
        return true;
    }
    if (k == NULL || z->hdr_off < k->off || k->off + k->n < z->hdr_off + 30)
        return false; /* not yet */
    at = z->hdr_off - k->off;
    h = k->p + at;
    if (memcmp(h, "PK\003\004", 4) != 0) {
        z->st = Z_REST; /* not a local header (the central directory, or damage) */
        return true;
    }
    flags = (uint16_t)(h[6] | h[7] << 8);
    csize = (uint32_t)h[18] | (uint32_t)h[19] << 8 | (uint32_t)h[20] << 16 | (uint32_t)h[21] << 24;
    nlen = (uint16_t)(h[26] | h[27] << 8);
    xlen = (uint16_t)(h[28] | h[29] << 8);
    need = 30 + (uint64_t)nlen + xlen;
    if (k->n - at < need)
        return false; /* not yet */
    if ((name = malloc(plen + nlen + 1)) == NULL) {
        z->st = Z_REST; /* keep everything: only the cap can fail it */
        return true;
    }
    child = name;
    snprintf(name, plen + 1, "%s%s", prefix ? prefix : "", prefix ? "!" : "");
    memcpy(name + plen, h + 30, nlen);
    name[plen + nlen] = '\0';
    storage = torch_storage(child) && memchr(h + 30, 0, nlen) == NULL;
    free(name);
    z->data_off = z->hdr_off + need;
    if ((flags & 8) == 0 && csize != 0xffffffffu) {
        z->st = storage ? Z_SKIP_N : Z_KEEP_N;
        z->left = csize;
    } else {
        z->st = storage ? Z_SKIP_SIG : Z_KEEP_SIG;
        z->win_n = 0;
    }
    return true;
}

static void win_push(struct zparse *z, const uint8_t *p, size_t n)
{
    const size_t cap = sizeof(z->win);

    if (n >= cap) {
        memcpy(z->win, p + n - cap, cap);
        z->win_n = cap;
        return;
    }
    if (z->win_n + n > cap) {
        size_t drop = z->win_n + n - cap;
        memmove(z->win, z->win + drop, z->win_n - drop);
        z->win_n -= drop;
    }
    memcpy(z->win + z->win_n, p, n);
    z->win_n += n;
}

/* Keep [from, to) of what lies in the window (ending at off) and in p (starting at off). */
static enum mg_code keep_around(struct sparse *sp, const struct zparse *z, uint64_t off,
                                const uint8_t *p, uint64_t from, uint64_t to, struct mg_error *err)
{
    enum mg_code rc;

    if (from < off - z->win_n)
        from = off - z->win_n;
    if (from < off) {
        uint64_t e = to < off ? to : off;
        if ((rc = sparse_keep(sp, from, z->win + (z->win_n - (off - from)), (size_t)(e - from),
                              err)) != MG_OK)
            return rc;
        from = e;
    }
    return from < to ? sparse_keep(sp, from, p + (from - off), (size_t)(to - from), err) : MG_OK;
}

/* One streamed chunk [off, off + n) of the zip, whose length is size. */
static enum mg_code zip_feed(struct sparse *sp, struct zparse *z, uint64_t off, const uint8_t *p,
                             size_t n, uint64_t size, struct mg_error *err)
{
    uint64_t tail = size > ZIP_TAIL ? size - ZIP_TAIL : 0;
    enum mg_code rc = MG_OK;

    while (n > 0 && rc == MG_OK) {
        size_t take = n, i;
        uint64_t have, need;

        if (off >= tail || z->st == Z_REST || sp->fd >= 0) {
            if (z->st == Z_SKIP_SIG && z->win_n > 0 &&
                (rc = keep_around(sp, z, off, p, off - z->win_n, off, err)) != MG_OK)
                return rc;
            z->st = Z_REST;
            return sparse_keep(sp, off, p, n, err);
        }
        if (take > tail - off)
            take = (size_t)(tail - off);
        switch (z->st) {
        case Z_HDR:
            have = off - z->hdr_off;
            if (have < 30) {
                need = 30;
            } else {
                const struct kept *k = &sp->v[sp->n - 1];
                const uint8_t *h = k->p + (z->hdr_off - k->off);
                need = 30 + (uint64_t)(h[26] | h[27] << 8) + (uint64_t)(h[28] | h[29] << 8);
            }
            if (take > need - have)
                take = (size_t)(need - have);
            if ((rc = sparse_keep(sp, off, p, take, err)) != MG_OK)
                return rc;
            if (have + take >= 30)
                (void)zip_header(sp, z, z->prefix); /* past the header, or not yet */
            break;
        case Z_KEEP_N:
        case Z_SKIP_N:
            if (take > z->left)
                take = (size_t)z->left;
            if (z->st == Z_KEEP_N && (rc = sparse_keep(sp, off, p, take, err)) != MG_OK)
                return rc;
            z->left -= take;
            if (z->left == 0) {
                z->st = Z_HDR;
                z->hdr_off = off + take;
            }
            break;
        case Z_KEEP_SIG:
        case Z_SKIP_SIG: {
            uint64_t sig = UINT64_MAX;
            if (z->win_n > 0) { /* a signature across the chunks */
                uint8_t t[6];
                size_t w3 = z->win_n < 3 ? z->win_n : 3, c3 = take < 3 ? take : 3, j;
                memcpy(t, z->win + z->win_n - w3, w3);
                memcpy(t + w3, p, c3);
                if ((j = find_sig(t, w3 + c3)) < w3)
                    sig = off - w3 + j;
            }
            if (sig == UINT64_MAX && (i = find_sig(p, take)) < take)
                sig = off + i;
            if (sig == UINT64_MAX) {
                if (z->st == Z_KEEP_SIG && (rc = sparse_keep(sp, off, p, take, err)) != MG_OK)
                    return rc;
                win_push(z, p, take);
                break;
            }
            /* the next header; before it, a data descriptor */
            if (z->st == Z_SKIP_SIG)
                rc = keep_around(sp, z, off, p,
                                 sig - ZIP_LOOKBEHIND > z->data_off && sig >= ZIP_LOOKBEHIND
                                     ? sig - ZIP_LOOKBEHIND
                                     : z->data_off,
                                 sig > off ? sig : off, err);
            else if (sig > off)
                rc = sparse_keep(sp, off, p, (size_t)(sig - off), err);
            if (rc != MG_OK)
                return rc;
            take = sig > off ? (size_t)(sig - off) : 0;
            z->st = Z_HDR;
            z->hdr_off = sig;
            z->win_n = 0;
            break;
        }
        case Z_REST:
            break;
        }
        off += take;
        p += take;
        n -= take;
    }
    return rc;
}

/* Stream the rest of s (a zip inside a compressed archive) into *out. MG_EINVAL when it
 * could not be (reported as a finding: the zip stays unknown). */
static enum mg_code keep_zip(struct scan *c, struct art_src *s, const char *name,
                             struct sparse **out)
{
    struct sparse *sp = calloc(1, sizeof(*sp));
    struct zparse z = {.st = Z_HDR, .prefix = name};
    uint64_t size = s->size - s->off, at = 0;
    const uint8_t *p;
    size_t got;
    enum mg_code rc;

    *out = NULL;
    if (sp == NULL)
        return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
    sp->fd = -1;
    sp->o = c->r.opts;
    for (;;) {
        if (s->borrow != NULL && s->pos == s->len) { /* nothing buffered: no copy */
            const void *bp;
            ssize_t n = s->borrow(s->ctx, &bp, SIZE_MAX, c->err);
            if (n < 0) {
                rc = c->err->code != MG_OK ? c->err->code : MG_EIO;
                break;
            }
            if (n == 0)
                goto done;
            if ((rc = zip_feed(sp, &z, at, bp, (size_t)n, size, c->err)) != MG_OK)
                break;
            at += (uint64_t)n;
            s->off += (uint64_t)n;
            continue;
        }
        if ((rc = art_src_peek(s, ART_SRC_BUF, &p, &got, c->err)) != MG_OK)
            break;
        if (got == 0)
            goto done;
        if ((rc = zip_feed(sp, &z, at, p, got, size, c->err)) != MG_OK)
            break;
        at += got;
        if ((rc = art_src_skip(s, got, c->err)) != MG_OK)
            break;
    }
    if (rc == MG_EINVAL && c->err->code == MG_EINVAL) { /* the member, or the cap */
        art_report_add(&c->r, "archive", sp->capped ? "archive-cap" : "archive-malformed", false,
                       s->off, "%s", c->err->message);
        mg_error_clear(c->err);
    }
    sparse_free(sp);
    return rc;
done:
    sp->size = at;
    *out = sp;
    return MG_OK;
}

static la_ssize_t sparse_read(struct archive *a, void *ctx, const void **buf)
{
    struct sparse *sp = ctx;
    size_t lo = 0, hi = sp->n;

    if (sp->pos >= sp->size) {
        *buf = NULL;
        return 0;
    }
    while (lo < hi) { /* the last run starting at or before pos */
        size_t mid = lo + (hi - lo) / 2;
        if (sp->v[mid].off <= sp->pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || sp->pos >= sp->v[lo - 1].off + sp->v[lo - 1].n) {
        if (!sp->hole)
            sp->hole_at = sp->pos;
        sp->hole = true;
        archive_set_error(a, EINVAL,
                          "the zip's central directory names bytes at offset %llu that its "
                          "local headers, read in order, do not lead to",
                          (unsigned long long)sp->pos);
        return -1;
    }
    {
        const struct kept *k = &sp->v[lo - 1];
        size_t n = (size_t)(k->off + k->n - sp->pos);
        if (sp->fd >= 0) {
            ssize_t r;
            if (n > ART_SRC_BUF)
                n = ART_SRC_BUF;
            do
                r = pread(sp->fd, sp->buf, n, (off_t)sp->pos);
            while (r < 0 && errno == EINTR);
            if (r <= 0) {
                archive_set_error(a, r < 0 ? errno : EIO, "cannot read the scanner's scratch file");
                return -1;
            }
            *buf = sp->buf;
            sp->pos += (uint64_t)r;
            return (la_ssize_t)r;
        }
        *buf = k->p + (sp->pos - k->off);
        sp->pos += n;
        return (la_ssize_t)n;
    }
}

/* Seek and skip over [0, size) for libarchive's callbacks: a cursor at *pos. */
static la_int64_t cursor_seek(uint64_t *pos, uint64_t size, la_int64_t to, int whence)
{
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)*pos : (int64_t)size;

    if (to < -base || to > (int64_t)size - base)
        return ARCHIVE_FATAL;
    *pos = (uint64_t)(base + to);
    return (la_int64_t)*pos;
}

static la_int64_t cursor_skip(uint64_t *pos, uint64_t size, la_int64_t n)
{
    if (n < 0)
        return 0;
    if ((uint64_t)n > size - *pos)
        n = (la_int64_t)(size - *pos);
    *pos += (uint64_t)n;
    return n;
}

static la_int64_t sparse_seek(struct archive *a, void *ctx, la_int64_t to, int whence)
{
    struct sparse *sp = ctx;

    (void)a;
    return cursor_seek(&sp->pos, sp->size, to, whence);
}

static la_int64_t sparse_skip(struct archive *a, void *ctx, la_int64_t n)
{
    struct sparse *sp = ctx;

    (void)a;
    return cursor_skip(&sp->pos, sp->size, n);
}

/* A zip read where it lies in the outer file (art_src.region): [off, off + size). */
struct region {
    int fd;
    uint64_t off, size, pos;
    uint8_t buf[ART_SRC_BUF];
};

static la_ssize_t region_read(struct archive *a, void *ctx, const void **buf)
{
    struct region *g = ctx;
    size_t n = g->size - g->pos < sizeof(g->buf) ? (size_t)(g->size - g->pos) : sizeof(g->buf);
    ssize_t r;

    do
        r = n ? pread(g->fd, g->buf, n, (off_t)(g->off + g->pos)) : 0;
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        archive_set_error(a, errno, "cannot read the archive member");
        return -1;
    }
    g->pos += (uint64_t)r;
    *buf = g->buf;
    return (la_ssize_t)r;
}

static la_int64_t region_seek(struct archive *a, void *ctx, la_int64_t to, int whence)
{
    struct region *g = ctx;

    (void)a;
    return cursor_seek(&g->pos, g->size, to, whence);
}

static la_int64_t region_skip(struct archive *a, void *ctx, la_int64_t n)
{
    struct region *g = ctx;

    (void)a;
    return cursor_skip(&g->pos, g->size, n);
}

static enum mg_code scan_archive(struct scan *c, struct art_src *s, const char *path,
                                 const char *media, const char *name, int depth)
{
    struct la_ctx l = {s, c, false};
    struct archive *a = NULL;
    struct region *g = NULL;
    struct sparse *sp = NULL;
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
        if ((g = malloc(sizeof(*g))) == NULL)
            return mg_fail(c->err, MG_ENOMEM, NULL, "out of memory");
        *g = (struct region){.fd = s->region_fd, .off = s->region_off, .size = s->size};
    } else if (path == NULL && strcmp(media, MT_ZIP) == 0 && c->r.opts->spill != NULL &&
               !c->r.opts->spill_zips && s->size != UINT64_MAX && s->off <= s->size) {
        if ((rc = keep_zip(c, s, name, &sp)) != MG_OK)
            return rc == MG_EINVAL ? MG_OK : rc; /* MG_EINVAL: reported as a finding */
    } else if (path == NULL && strcmp(media, MT_ZIP) == 0 && (rc = spill_zip(c, s, &fd)) != MG_OK) {
        return rc == MG_EINVAL ? MG_OK : rc; /* MG_EINVAL: reported as a finding */
    }
    if ((rc = art_reader_new(media, &a, &compressed, c->err)) != MG_OK) {
        if (fd >= 0)
            close(fd);
        free(g);
        if (sp)
            sparse_free(sp);
        return rc;
    }
    if (sp != NULL) {
        archive_read_set_read_callback(a, sparse_read);
        archive_read_set_seek_callback(a, sparse_seek);
        archive_read_set_skip_callback(a, sparse_skip);
        archive_read_set_callback_data(a, sp);
        r = archive_read_open1(a);
    } else if (g != NULL) {
        archive_read_set_read_callback(a, region_read);
        archive_read_set_seek_callback(a, region_seek);
        archive_read_set_skip_callback(a, region_skip);
        archive_read_set_callback_data(a, g);
        r = archive_read_open1(a);
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
    if (sp != NULL && sp->hole)
        art_report_add(&c->r, "archive", "archive-malformed", false, sp->hole_at,
                       "the zip's central directory names bytes at offset %llu that its local "
                       "headers, read in order, do not lead to; such a zip is read whole only "
                       "outside a compressed archive",
                       (unsigned long long)sp->hole_at);
    if (fd >= 0)
        close(fd);
    free(g);
    if (sp)
        sparse_free(sp);
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
