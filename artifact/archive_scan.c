/*
 * archive_scan.c - an archive entry's data handed to the safety scan (scan.h) as the
 * inspection reads it (archive.c's read_data() when in->scan is set): the only place where
 * the libarchive pass and the scanner meet, so that archive.c never names the scanner.
 */
#include "archive_int.h"
#include "scan.h"

/*
 * An entry's data handed to the safety scan as it is read (art_read_data_scanned): the blocks
 * libarchive returns, holes as the zeros an extractor would write, each byte hashed and
 * counted when it is handed out (or drained), so the SHA-256 is archive.c's read_data()'s.
 */
struct tee {
    struct archive *a;
    struct archive_entry *e;
    struct inspect *in;
    const uint8_t *buf; /* the current block's bytes not yet handed out */
    size_t len;
    uint64_t off; /* where buf sits in the entry */
    uint64_t pos; /* bytes of the entry handed out so far */
    bool eof;
    enum mg_code rc; /* the inspection's verdict on the data (in->err), MG_OK so far */
};

/* Fetch the next block once the current one is handed out. */
static enum mg_code tee_fill(struct tee *t)
{
    const void *buf;
    size_t len;
    la_int64_t off;
    int r;

    while (t->rc == MG_OK && t->len == 0 && !t->eof) {
        r = archive_read_data_block(t->a, &buf, &len, &off);
        if (r == ARCHIVE_EOF) {
            t->eof = true;
            /* a trailing hole (archive.c's read_data()) */
            if (archive_entry_sparse_count(t->e) > 0 && archive_entry_size_is_set(t->e) &&
                archive_entry_size(t->e) > 0 && (uint64_t)archive_entry_size(t->e) > t->pos)
                t->off = (uint64_t)archive_entry_size(t->e);
            else
                t->off = t->pos;
            break;
        }
        if (r != ARCHIVE_OK)
            t->rc = art_archive_failure(t->a, t->in, "at");
        else if (off < 0 || (uint64_t)off < t->pos)
            t->rc = mg_fail(t->in->err, MG_EINVAL, NULL,
                            "archive is corrupt at entry '%s': its data blocks overlap; "
                            "re-create it",
                            t->in->show);
        else if ((t->rc = art_account(t->in, len)) == MG_OK) {
            t->buf = buf;
            t->len = len;
            t->off = (uint64_t)off;
        }
    }
    return t->rc;
}

/* Up to n bytes of the entry, copied into out or lent through *p (either may be NULL: then
 * dropped): the count, 0 at its end, -1 when the data is bad (t->rc and in->err say why;
 * err only tells the scanner the member failed). */
static ssize_t tee_next(struct tee *t, void *out, const void **p, size_t n, struct mg_error *err)
{
    static const uint8_t zeros[4096];
    size_t k;

    if (tee_fill(t) != MG_OK)
        goto fail;
    if (t->pos < t->off) { /* a hole before the block (or at the end) */
        k = t->off - t->pos < n ? (size_t)(t->off - t->pos) : n;
        if (k > sizeof(zeros))
            k = sizeof(zeros);
        if ((t->rc = art_hash_zeros(t->in, true, k)) != MG_OK)
            goto fail;
        if (out != NULL)
            memset(out, 0, k);
        if (p != NULL)
            *p = zeros;
        t->pos += k;
        return (ssize_t)k;
    }
    if (t->len == 0)
        return 0;
    k = t->len < n ? t->len : n;
    if (EVP_DigestUpdate(t->in->md, t->buf, k) != 1) {
        t->rc = mg_fail(t->in->err, MG_EIO, NULL, "SHA-256 failed");
        goto fail;
    }
    if (out != NULL)
        memcpy(out, t->buf, k);
    if (p != NULL)
        *p = t->buf;
    t->buf += k;
    t->len -= k;
    t->off += k;
    t->pos += k;
    return (ssize_t)k;
fail:
    mg_fail(err, MG_EINVAL, NULL, "%s", t->in->err->message);
    return -1;
}

static ssize_t tee_read(void *ctx, void *out, size_t n, struct mg_error *err)
{
    return tee_next(ctx, out, NULL, n, err);
}

static ssize_t tee_borrow(void *ctx, const void **p, size_t n, struct mg_error *err)
{
    return tee_next(ctx, NULL, p, n, err);
}

/* archive.c's read_data() for a regular file the safety scan reads too (in->scan): the scanner
 * takes what it needs, the rest is drained here. */
enum mg_code art_read_data_scanned(struct archive *a, struct archive_entry *e, struct inspect *in,
                                   struct store_archive_file *file)
{
    struct tee t = {a, e, in, NULL, 0, 0, 0, false, MG_OK};
    struct art_scan_member m;
    struct mg_error scratch;
    uint8_t md[EVP_MAX_MD_SIZE], head[512];
    unsigned int md_len = 0;
    enum mg_code rc;
    ssize_t r;
    int64_t at = archive_filter_bytes(a, 0);
    int region = -1;

    if (EVP_DigestInit_ex(in->md, EVP_sha256(), NULL) != 1)
        return mg_fail(in->err, MG_EIO, NULL, "cannot start SHA-256");
    /* An uncompressed tar's member lies in the file where the reader stands after its header
     * (checked against its first bytes): a zip in it is read there, not copied out. */
    if (in->region_fd >= 0 && archive_entry_sparse_count(e) == 0 && archive_entry_size_is_set(e) &&
        at >= 0 && tee_fill(&t) == MG_OK && t.len > 0 && t.off == 0) {
        r = pread(in->region_fd, head, t.len < sizeof(head) ? t.len : sizeof(head), (off_t)at);
        if (r > 0 && memcmp(head, t.buf, (size_t)r) == 0)
            region = in->region_fd;
    }
    m = (struct art_scan_member){archive_entry_pathname(e),
                                 archive_entry_size_is_set(e) && archive_entry_size(e) >= 0
                                     ? (uint64_t)archive_entry_size(e)
                                     : UINT64_MAX,
                                 tee_read,
                                 tee_borrow,
                                 &t,
                                 region,
                                 (uint64_t)at};
    rc = art_scan_walk_entry(in->scan, &m, in->err);
    if (rc != MG_OK) /* the scanner itself failed (MG_ENOMEM, MG_EIO) */
        return rc;
    while ((r = tee_next(&t, NULL, NULL, SIZE_MAX, &scratch)) > 0)
        ;
    if (r < 0)
        return t.rc;
    if (EVP_DigestFinal_ex(in->md, md, &md_len) != 1 || md_len != 32)
        return mg_fail(in->err, MG_EIO, NULL, "SHA-256 failed");
    mg_hex_encode(md, md_len, file->sha256);
    file->size = t.pos;
    return MG_OK;
}
