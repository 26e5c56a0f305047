/*
 * archive_zip.c - the zip central directory, read on its own: libarchive's streaming reader
 * trusts local headers, so the central directory is checked against what it saw (a name
 * hidden from one of them is refused). See archive.h.
 */
#include "archive_int.h"

/* ---- zip central directory ------------------------------------------------------------ */

static uint16_t le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static bool read_at(FILE *f, uint64_t off, void *buf, size_t n)
{
    if (off > INT64_MAX || fseeko(f, (off_t)off, SEEK_SET) != 0)
        return false;
    return fread(buf, 1, n, f) == n;
}

static enum mg_code zip_corrupt(struct mg_error *err, const char *why)
{
    return mg_fail(err, MG_EINVAL, NULL, "zip archive is corrupt: %s; re-create it", why);
}

/*
 * Where the central directory starts, found the way libarchive's seekable
 * reader finds it (last end record in the final 16 KiB, Zip64 locator just
 * before it), but refusing what it would quietly work around.
 */
static enum mg_code zip_find_cd(FILE *f, uint64_t size, uint64_t *cd_start, struct mg_error *err)
{
    unsigned char *buf = NULL, e64[ZIP64_EOCD_MIN];
    const unsigned char *eocd = NULL, *loc;
    size_t tail, i;
    uint64_t eocd_pos, cd_size, cd_off, e64_off, e64_size;
    bool sane, have64 = false;
    enum mg_code rc = MG_OK;

    if (size < ZIP_EOCD_LEN)
        return zip_corrupt(err, "it is too short to hold an end-of-central-directory record");
    tail = size < ZIP_EOCD_SEARCH ? (size_t)size : ZIP_EOCD_SEARCH;
    buf = malloc(tail);
    if (buf == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (!read_at(f, size - tail, buf, tail)) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot read the zip end record: %s", strerror(errno));
        goto out;
    }
    for (i = tail - ZIP_EOCD_LEN + 1; i-- > 0;) {
        if (memcmp(buf + i, "PK\005\006", 4) == 0) {
            eocd = buf + i;
            break;
        }
    }
    if (eocd == NULL) {
        rc = zip_corrupt(err, "no end-of-central-directory record in its last 16 KiB");
        goto out;
    }
    eocd_pos = size - tail + i;
    cd_size = le32(eocd + 12);
    cd_off = le32(eocd + 16);
    sane = le16(eocd + 4) == 0 && le16(eocd + 6) == 0 && le16(eocd + 8) == le16(eocd + 10) &&
           cd_off + cd_size <= eocd_pos;
    if (i >= ZIP64_LOCATOR_LEN && memcmp(eocd - ZIP64_LOCATOR_LEN, "PK\006\007", 4) == 0) {
        loc = eocd - ZIP64_LOCATOR_LEN;
        e64_off = le64(loc + 8);
        if (le32(loc + 4) == 0 && le32(loc + 16) == 1 && e64_off < size &&
            size - e64_off >= sizeof(e64) && read_at(f, e64_off, e64, sizeof(e64))) {
            e64_size = le64(e64 + 4);
            have64 = e64_size >= ZIP64_EOCD_MIN - 12 && e64_size <= ZIP64_EOCD_MAX - 12 &&
                     le32(e64 + 16) == 0 && le32(e64 + 20) == 0 && le64(e64 + 24) == le64(e64 + 32);
        }
        if (have64 && memcmp(e64, "PK\006\006", 4) != 0) {
            rc = zip_corrupt(err, "its Zip64 end record is damaged");
            goto out;
        }
    }
    if (have64)
        *cd_start = le64(e64 + 48);
    else if (sane)
        *cd_start = eocd_pos - cd_size;
    else
        rc = zip_corrupt(err, "its end record is damaged or names several volumes");
out:
    free(buf);
    return rc;
}

/* Check one central directory record (header h, name read into `name`). */
static enum mg_code zip_cd_entry(struct inspect *in, const unsigned char *h, const char *name,
                                 size_t name_len)
{
    char *norm = NULL;
    unsigned type;
    enum mg_code rc;

    art_name_show(name, name_len, in->show);
    in->entries++;
    if (in->entries > in->lim->max_entries)
        return mg_fail(in->err, MG_EINVAL, NULL,
                       "archive has more than %llu entries (at entry '%s'); pack fewer files",
                       (unsigned long long)in->lim->max_entries, in->show);
    if (memchr(name, '\0', name_len) != NULL)
        return mg_fail(in->err, MG_EINVAL, NULL,
                       "archive entry '%s' has a NUL byte in its path; rename it", in->show);
    rc = art_path_normalise(name, name_len, in->lim, &norm, in->err);
    if (rc != MG_OK)
        return rc;
    /* Unix external attributes carry st_mode: links and devices show here. */
    type = (le32(h + 38) >> 16) & AE_IFMT;
    if (h[5] == ZIP_SYSTEM_UNIX && type != 0 && art_special_type_name(type) != NULL) {
        free(norm);
        return art_reject_type(in->show, type, in->err);
    }
    if (norm[0] == '\0') {
        free(norm);
        return MG_OK;
    }
    return art_name_list_push(&in->cd, norm, in->err);
}

/*
 * Walk the zip central directory of `path` into in->cd (sorted), applying
 * the entry cap and the path and type rules to every record.
 */
enum mg_code art_zip_scan_cd(const char *path, struct inspect *in)
{
    FILE *f;
    unsigned char h[ZIP_CDH_LEN];
    char *name = NULL;
    off_t end;
    uint64_t cd_start = 0;
    size_t name_len, skip;
    enum mg_code rc;

    f = fopen(path, "rbe");
    if (f == NULL)
        return mg_fail(in->err, MG_EIO, NULL, "cannot open '%s': %s", path, strerror(errno));
    name = malloc(UINT16_MAX + 1);
    if (name == NULL) {
        rc = mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (setvbuf(f, NULL, _IOFBF, READ_BLOCK) != 0 || fseeko(f, 0, SEEK_END) != 0 ||
        (end = ftello(f)) < 0) {
        rc = mg_fail(in->err, MG_EIO, NULL, "cannot read '%s': %s", path, strerror(errno));
        goto out;
    }
    rc = zip_find_cd(f, (uint64_t)end, &cd_start, in->err);
    if (rc != MG_OK)
        goto out;
    if (cd_start > INT64_MAX || fseeko(f, (off_t)cd_start, SEEK_SET) != 0) {
        rc = zip_corrupt(in->err, "its central directory lies outside the file");
        goto out;
    }
    for (;;) {
        if (fread(h, 1, 4, f) != 4) {
            rc = zip_corrupt(in->err, "its central directory is truncated");
            goto out;
        }
        if (memcmp(h, "PK\005\006", 4) == 0 || memcmp(h, "PK\006\006", 4) == 0)
            break;
        if (memcmp(h, "PK\001\002", 4) != 0 ||
            fread(h + 4, 1, ZIP_CDH_LEN - 4, f) != ZIP_CDH_LEN - 4) {
            rc = zip_corrupt(in->err, "its central directory holds a damaged record");
            goto out;
        }
        name_len = le16(h + 28);
        skip = (size_t)le16(h + 30) + le16(h + 32); /* extra field and comment */
        if (fread(name, 1, name_len, f) != name_len || fseeko(f, (off_t)skip, SEEK_CUR) != 0) {
            rc = zip_corrupt(in->err, "its central directory is truncated");
            goto out;
        }
        rc = zip_cd_entry(in, h, name, name_len);
        if (rc != MG_OK)
            goto out;
    }
    if (in->cd.n > 0)
        qsort(in->cd.v, in->cd.n, sizeof(*in->cd.v), art_cmp_str);
out:
    free(name);
    if (fclose(f) != 0 && rc == MG_OK)
        rc = mg_fail(in->err, MG_EIO, NULL, "cannot read '%s': %s", path, strerror(errno));
    return rc;
}

/* After libarchive's pass: the local headers must name what the central directory names. */
enum mg_code art_zip_cross_check(struct inspect *in)
{
    size_t i;
    const char *name;

    if (in->seen.n > 0)
        qsort(in->seen.v, in->seen.n, sizeof(*in->seen.v), art_cmp_str);
    for (i = 0; i < in->cd.n && i < in->seen.n; i++) {
        if (strcmp(in->cd.v[i], in->seen.v[i]) != 0)
            break;
    }
    if (i == in->cd.n && i == in->seen.n)
        return MG_OK;
    name = i < in->cd.n ? in->cd.v[i] : in->seen.v[i];
    art_name_show(name, strlen(name), in->show);
    return mg_fail(in->err, MG_EINVAL, NULL,
                   "zip archive is inconsistent at entry '%s': its central directory and local "
                   "file headers disagree; re-create it",
                   in->show);
}
