/*
 * scan_zip.c - a zip inside an archive, made readable through its central directory as
 * torch.load reads it: where it lies in an uncompressed outer file (a region, pread),
 * kept in memory as it streams out of a compressed one (only what a reader may need), or
 * copied whole to a scratch file. See scan_int.h.
 */
#include "scan_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>

#include "archive_int.h"
#include "../os/file.h"

/* Copy the rest of s (a zip inside an archive) into a spill file: *fd, at offset 0.
 * MG_EINVAL when it could not be (reported as a finding: the zip stays unknown). */
enum mg_code art_zip_spill(struct art_report *r, struct art_src *s, int *fd, struct mg_error *err)
{
    const struct art_scan_opts *o = r->opts;
    const uint8_t *p;
    size_t got;
    enum mg_code rc;

    *fd = o->spill ? o->spill(o->spill_ctx) : -1;
    if (*fd < 0) {
        art_report_add(r, "archive", "archive-cap", false, 0,
                       "a zip inside an archive is read as loaders read it (its central "
                       "directory) only from a scratch file, and there is none%s%s",
                       o->spill ? ": " : "", o->spill ? strerror(errno) : "");
        return MG_EINVAL;
    }
    for (;;) {
        if (s->borrow != NULL && s->pos == s->len) { /* nothing buffered: no copy */
            const void *bp;
            ssize_t n = s->borrow(s->ctx, &bp, SIZE_MAX, err);
            if (n < 0) {
                rc = err->code != MG_OK ? err->code : MG_EIO;
                break;
            }
            if (n == 0)
                return lseek(*fd, 0, SEEK_SET) == 0 ? MG_OK : MG_EINVAL;
            if (mg_write_all(*fd, bp, (size_t)n, "the scanner's scratch file", err) != MG_OK) {
                art_report_add(r, "archive", "archive-cap", false, 0, "%s", err->message);
                mg_error_clear(err);
                rc = MG_EINVAL;
                break;
            }
            s->off += (uint64_t)n;
            continue;
        }
        if ((rc = art_src_peek(s, ART_SRC_BUF, &p, &got, err)) != MG_OK)
            break;
        if (got == 0)
            return lseek(*fd, 0, SEEK_SET) == 0 ? MG_OK : MG_EINVAL;
        if (mg_write_all(*fd, p, got, "the scanner's scratch file", err) != MG_OK) {
            art_report_add(r, "archive", "archive-cap", false, 0, "%s", err->message);
            mg_error_clear(err);
            rc = MG_EINVAL;
            break;
        }
        if ((rc = art_src_skip(s, got, err)) != MG_OK)
            break;
    }
    if (rc == MG_EINVAL && err->code == MG_EINVAL) { /* the member itself did not read */
        art_report_add(r, "archive", "archive-malformed", false, s->off, "%s", err->message);
        mg_error_clear(err);
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

struct art_zip_kept {
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

void art_zip_kept_free(struct art_zip_kept *sp)
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
static enum mg_code sparse_to_file(struct art_zip_kept *sp, struct mg_error *err)
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
static enum mg_code sparse_keep(struct art_zip_kept *sp, uint64_t off, const uint8_t *p, size_t n,
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
static bool zip_header(struct art_zip_kept *sp, struct zparse *z, const char *prefix)
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
    storage = art_torch_storage(child) && memchr(h + 30, 0, nlen) == NULL;
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
static enum mg_code keep_around(struct art_zip_kept *sp, const struct zparse *z, uint64_t off,
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
static enum mg_code zip_feed(struct art_zip_kept *sp, struct zparse *z, uint64_t off,
                             const uint8_t *p, size_t n, uint64_t size, struct mg_error *err)
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
enum mg_code art_zip_keep(struct art_report *r, struct art_src *s, const char *name,
                          struct art_zip_kept **out, struct mg_error *err)
{
    struct art_zip_kept *sp = calloc(1, sizeof(*sp));
    struct zparse z = {.st = Z_HDR, .prefix = name};
    uint64_t size = s->size - s->off, at = 0;
    const uint8_t *p;
    size_t got;
    enum mg_code rc;

    *out = NULL;
    if (sp == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    sp->fd = -1;
    sp->o = r->opts;
    for (;;) {
        if (s->borrow != NULL && s->pos == s->len) { /* nothing buffered: no copy */
            const void *bp;
            ssize_t n = s->borrow(s->ctx, &bp, SIZE_MAX, err);
            if (n < 0) {
                rc = err->code != MG_OK ? err->code : MG_EIO;
                break;
            }
            if (n == 0)
                goto done;
            if ((rc = zip_feed(sp, &z, at, bp, (size_t)n, size, err)) != MG_OK)
                break;
            at += (uint64_t)n;
            s->off += (uint64_t)n;
            continue;
        }
        if ((rc = art_src_peek(s, ART_SRC_BUF, &p, &got, err)) != MG_OK)
            break;
        if (got == 0)
            goto done;
        if ((rc = zip_feed(sp, &z, at, p, got, size, err)) != MG_OK)
            break;
        at += got;
        if ((rc = art_src_skip(s, got, err)) != MG_OK)
            break;
    }
    if (rc == MG_EINVAL && err->code == MG_EINVAL) { /* the member, or the cap */
        art_report_add(r, "archive", sp->capped ? "archive-cap" : "archive-malformed", false,
                       s->off, "%s", err->message);
        mg_error_clear(err);
    }
    art_zip_kept_free(sp);
    return rc;
done:
    sp->size = at;
    *out = sp;
    return MG_OK;
}

static la_ssize_t sparse_read(struct archive *a, void *ctx, const void **buf)
{
    struct art_zip_kept *sp = ctx;
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
    struct art_zip_kept *sp = ctx;

    (void)a;
    return cursor_seek(&sp->pos, sp->size, to, whence);
}

static la_int64_t sparse_skip(struct archive *a, void *ctx, la_int64_t n)
{
    struct art_zip_kept *sp = ctx;

    (void)a;
    return cursor_skip(&sp->pos, sp->size, n);
}

/* A zip read where it lies in the outer file (art_src.region): [off, off + size). */
struct art_zip_region {
    int fd;
    uint64_t off, size, pos;
    uint8_t buf[ART_SRC_BUF];
};

static la_ssize_t region_read(struct archive *a, void *ctx, const void **buf)
{
    struct art_zip_region *g = ctx;
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
    struct art_zip_region *g = ctx;

    (void)a;
    return cursor_seek(&g->pos, g->size, to, whence);
}

static la_int64_t region_skip(struct archive *a, void *ctx, la_int64_t n)
{
    struct art_zip_region *g = ctx;

    (void)a;
    return cursor_skip(&g->pos, g->size, n);
}

bool art_zip_kept_hole(const struct art_zip_kept *k, uint64_t *at)
{
    *at = k->hole_at;
    return k->hole;
}

int art_zip_open_kept(struct archive *a, struct art_zip_kept *k)
{
    archive_read_set_read_callback(a, sparse_read);
    archive_read_set_seek_callback(a, sparse_seek);
    archive_read_set_skip_callback(a, sparse_skip);
    archive_read_set_callback_data(a, k);
    return archive_read_open1(a);
}

struct art_zip_region *art_zip_region_new(int fd, uint64_t off, uint64_t size)
{
    struct art_zip_region *g = malloc(sizeof(*g));

    if (g != NULL)
        *g = (struct art_zip_region){.fd = fd, .off = off, .size = size};
    return g;
}

int art_zip_open_region(struct archive *a, struct art_zip_region *g)
{
    archive_read_set_read_callback(a, region_read);
    archive_read_set_seek_callback(a, region_seek);
    archive_read_set_skip_callback(a, region_skip);
    archive_read_set_callback_data(a, g);
    return archive_read_open1(a);
}
