/*
 * archive.c - see archive.h.
 *
 * libarchive runs under a thread-local C.UTF-8 locale (uselocale), so UTF-8
 * entry names decode the same way whatever the process locale is, without
 * touching process-wide state.
 *
 * Zip archives are read through their central directory, which is what
 * unzip and most extractors obey, while libarchive takes each entry's name
 * from its local header. So before libarchive runs, the central directory is
 * walked here: that caps how many records libarchive would load into memory,
 * applies the path and type rules to the names extractors will use, and lets
 * the names libarchive reports be compared with them afterwards, so that an
 * archive cannot show one name to this check and another to an extractor.
 */
#include "archive_int.h"

void store_archive_limits_default(struct store_archive_limits *lim)
{
    lim->max_total_bytes = (uint64_t)256 << 30;
    lim->max_entries = 1000000;
    lim->max_path_len = 1024;
    lim->max_ratio = STORE_ARCHIVE_MAX_RATIO;
    lim->ratio_floor_bytes = STORE_ARCHIVE_RATIO_FLOOR;
    lim->counters = NULL;
}

const char *store_media_type_detect(const uint8_t *head, size_t n)
{
    static const uint8_t xz[] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
    static const uint8_t zstd[] = {0x28, 0xb5, 0x2f, 0xfd};

    if (head == NULL)
        return MT_OCTET;
    /* "ustar\0" (POSIX) or "ustar  " (GNU) at offset 257 */
    if (n >= 263 && memcmp(head + 257, "ustar", 5) == 0 && (head[262] == '\0' || head[262] == ' '))
        return MT_TAR;
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return MT_GZIP;
    if (n >= 4 && (memcmp(head, "PK\003\004", 4) == 0 || memcmp(head, "PK\005\006", 4) == 0))
        return MT_ZIP;
    if (n >= sizeof(zstd) && memcmp(head, zstd, sizeof(zstd)) == 0)
        return MT_ZSTD;
    if (n >= sizeof(xz) && memcmp(head, xz, sizeof(xz)) == 0)
        return MT_XZ;
    return MT_OCTET;
}

void store_archive_manifest_release(struct store_archive_manifest *m)
{
    size_t i;

    if (m == NULL)
        return;
    for (i = 0; i < m->n; i++)
        free(m->files[i].path);
    free(m->files);
    m->files = NULL;
    m->n = 0;
}

/* ---- libarchive pass ------------------------------------------------------------------ */

static bool is_io_errno(int e)
{
    return e == EIO || e == ENOENT || e == EACCES || e == EPERM || e == EISDIR || e == ENOTDIR ||
           e == ELOOP || e == ENAMETOOLONG || e == EMFILE || e == ENFILE || e == ENXIO ||
           e == ESTALE;
}

/* Turn a libarchive failure into an error; `where` is "at" or "after" the current entry. */
enum mg_code art_archive_failure(struct archive *a, struct inspect *in, const char *where)
{
    const char *msg = archive_error_string(a);
    char why[SHOW_BUF];
    int e = archive_errno(a);

    art_name_show(msg ? msg : "unknown error", strlen(msg ? msg : "unknown error"), why);
    if (e == ENOMEM)
        return mg_fail(in->err, MG_ENOMEM, NULL, "out of memory reading the archive");
    if (is_io_errno(e))
        return mg_fail(in->err, MG_EIO, NULL, "cannot read the archive: %s", why);
    if (where == NULL)
        return mg_fail(in->err, MG_EINVAL, NULL, "archive is corrupt: %s; re-create it", why);
    return mg_fail(in->err, MG_EINVAL, NULL, "archive is corrupt %s entry '%s': %s; re-create it",
                   where, in->show, why);
}

static enum mg_code ratio_refuse(struct inspect *in, uint64_t expanded)
{
    if (in->lim->counters != NULL)
        __atomic_add_fetch(&in->lim->counters->ratio_refusals, 1, __ATOMIC_RELAXED);
    return mg_fail(in->err, MG_EINVAL, NULL,
                   "archive expands more than %u:1 (expanded %llu bytes (%.1f MiB) from %llu "
                   "stored bytes when refused, at entry '%s'); raise the cap "
                   "(modelgated --max-archive-ratio, modelgate pull --max-archive-ratio) or "
                   "store it uncompressed",
                   (unsigned)in->lim->max_ratio, (unsigned long long)expanded,
                   (double)expanded / (1024.0 * 1024.0), (unsigned long long)in->stored, in->show);
}

/* Count n more bytes of file data against the caps. */
enum mg_code art_account(struct inspect *in, uint64_t n)
{
    if (n > in->budget - in->total) {
        /* These bytes were decompressed: they count, then nothing more is. */
        in->total = n < UINT64_MAX - in->total ? in->total + n : UINT64_MAX;
        return ratio_refuse(in, in->total);
    }
    if (n > in->lim->max_total_bytes - in->total)
        return mg_fail(in->err, MG_EINVAL, NULL,
                       "archive files hold more than %llu bytes in all (limit reached at entry "
                       "'%s'); upload a smaller archive",
                       (unsigned long long)in->lim->max_total_bytes, in->show);
    in->total += n;
    return MG_OK;
}

/* Count, and hash when `hash`, n bytes of a sparse hole. */
enum mg_code art_hash_zeros(struct inspect *in, bool hash, uint64_t n)
{
    static const unsigned char zeros[4096];
    size_t chunk;
    enum mg_code rc = art_account(in, n);

    for (; rc == MG_OK && hash && n > 0; n -= chunk) {
        chunk = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
        if (EVP_DigestUpdate(in->md, zeros, chunk) != 1)
            rc = mg_fail(in->err, MG_EIO, NULL, "SHA-256 failed");
    }
    return rc;
}

/* Write all n bytes of buf at offset off of the file being extracted. */
static enum mg_code write_at(struct inspect *in, int fd, const void *buf, size_t n, uint64_t off)
{
    const char *p = buf;
    ssize_t w;

    while (n > 0) {
        if (off > INT64_MAX)
            return mg_fail(in->err, MG_EINVAL, NULL, "archive entry '%s' is too large", in->show);
        w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return mg_fail(in->err, errno == ENOSPC || errno == EDQUOT ? MG_ENOSPC : MG_EIO, NULL,
                           "cannot write '%s' while extracting: %s", in->show,
                           w < 0 ? strerror(errno) : "short write");
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return MG_OK;
}

/*
 * Stream the data of entry e: count it, and when `file` is given hash it into
 * file->size and file->sha256. Sparse holes, including a trailing one, are
 * hashed as the zeros an extractor would write. With fd >= 0 (extracting) the
 * data is written there at its offsets, so holes stay holes.
 */
static enum mg_code read_data(struct archive *a, struct archive_entry *e, struct inspect *in,
                              struct store_archive_file *file, int fd)
{
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    const void *buf;
    size_t len;
    la_int64_t off;
    uint64_t pos = 0;
    enum mg_code rc;
    int r;

    if (file != NULL && EVP_DigestInit_ex(in->md, EVP_sha256(), NULL) != 1)
        return mg_fail(in->err, MG_EIO, NULL, "cannot start SHA-256");
    for (;;) {
        r = archive_read_data_block(a, &buf, &len, &off);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK)
            return art_archive_failure(a, in, "at");
        if (off < 0 || (uint64_t)off < pos)
            return mg_fail(in->err, MG_EINVAL, NULL,
                           "archive is corrupt at entry '%s': its data blocks overlap; re-create "
                           "it",
                           in->show);
        if ((rc = art_hash_zeros(in, file != NULL, (uint64_t)off - pos)) != MG_OK ||
            (rc = art_account(in, len)) != MG_OK)
            return rc;
        if (file != NULL && len > 0 && EVP_DigestUpdate(in->md, buf, len) != 1)
            return mg_fail(in->err, MG_EIO, NULL, "SHA-256 failed");
        if (fd >= 0 && len > 0 && (rc = write_at(in, fd, buf, len, (uint64_t)off)) != MG_OK)
            return rc;
        pos = (uint64_t)off + len;
    }
    if (archive_entry_sparse_count(e) > 0 && archive_entry_size_is_set(e) &&
        archive_entry_size(e) > 0 && (uint64_t)archive_entry_size(e) > pos) {
        rc = art_hash_zeros(in, file != NULL, (uint64_t)archive_entry_size(e) - pos);
        if (rc != MG_OK)
            return rc;
        pos = (uint64_t)archive_entry_size(e);
    }
    /* A hole at the end: set the length (pos <= max_total_bytes, checked above). */
    if (fd >= 0 && ftruncate(fd, (off_t)pos) != 0)
        return mg_fail(in->err, MG_EIO, NULL, "cannot write '%s' while extracting: %s", in->show,
                       strerror(errno));
    if (file == NULL)
        return MG_OK;
    if (EVP_DigestFinal_ex(in->md, md, &md_len) != 1 || md_len != 32)
        return mg_fail(in->err, MG_EIO, NULL, "SHA-256 failed");
    mg_hex_encode(md, md_len, file->sha256);
    file->size = pos;
    return MG_OK;
}

static enum mg_code files_push(struct inspect *in, char *path, struct store_archive_file **f)
{
    struct store_archive_file *nf;
    size_t ncap;

    if (in->nfiles == in->files_cap) {
        ncap = in->files_cap ? in->files_cap * 2 : 64;
        if (ncap > SIZE_MAX / sizeof(*nf) ||
            (nf = realloc(in->files, ncap * sizeof(*nf))) == NULL) {
            free(path);
            return mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
        }
        in->files = nf;
        in->files_cap = ncap;
    }
    *f = &in->files[in->nfiles++];
    memset(*f, 0, sizeof(**f));
    (*f)->path = path;
    return MG_OK;
}

/* ---- extraction ------------------------------------------------------------------------ */

/* Remember that `path` (n bytes) was created, as a directory (kind 'd') or a file ('f'). */
static enum mg_code x_record(struct inspect *in, char kind, const char *path, size_t n)
{
    char *s = malloc(n + 2);

    if (s == NULL)
        return mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
    s[0] = kind;
    memcpy(s + 1, path, n);
    s[n + 1] = '\0';
    return art_name_list_push(&in->x->made, s, in->err);
}

static enum mg_code x_fail(struct inspect *in, const char *what, int e)
{
    return mg_fail(in->err, e == ENOSPC || e == EDQUOT ? MG_ENOSPC : MG_EIO, NULL,
                   "cannot %s '%s' while extracting: %s", what, in->show, strerror(e));
}

/*
 * Open (making what is missing) the directory path[0..n) below dest, one
 * component at a time: mkdirat() 0755, then openat() with O_DIRECTORY |
 * O_NOFOLLOW, so an existing component must be a real directory. *out gets a
 * new O_CLOEXEC descriptor.
 */
static enum mg_code x_mkdirs(struct inspect *in, const char *path, size_t n, int *out)
{
    char *copy = NULL, *comp;
    size_t i;
    int fd, next;
    enum mg_code rc = MG_OK;

    *out = -1;
    fd = fcntl(in->x->dest_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return x_fail(in, "open the directory of", errno);
    if (n == 0)
        goto done;
    if ((copy = malloc(n + 1)) == NULL) {
        rc = mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
        goto done;
    }
    memcpy(copy, path, n);
    copy[n] = '\0';
    for (i = 0, comp = copy; i <= n; i++) {
        if (i < n && copy[i] != '/')
            continue;
        copy[i] = '\0';
        if (mkdirat(fd, comp, 0755) == 0) {
            if ((rc = x_record(in, 'd', path, i)) != MG_OK)
                goto done;
        } else if (errno != EEXIST) {
            rc = x_fail(in, "make a directory for", errno);
            goto done;
        }
        next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            if (errno == ENOTDIR || errno == ELOOP)
                rc = mg_fail(in->err, MG_EINVAL, NULL,
                             "archive entry '%s' needs '%.*s' to be a directory, but the archive "
                             "also holds it as a file; remove one of them",
                             in->show, (int)i, path);
            else
                rc = x_fail(in, "open a directory for", errno);
            goto done;
        }
        close(fd);
        fd = next;
        comp = copy + i + 1;
    }
done:
    free(copy);
    if (rc != MG_OK) {
        close(fd);
        return rc;
    }
    *out = fd;
    return MG_OK;
}

/* Make the parent of `path` the cached directory (files of one directory usually come
 * together, so this saves walking the path again for each). */
static enum mg_code x_parent(struct inspect *in, const char *path, const char **base)
{
    struct extract *x = in->x;
    const char *slash = strrchr(path, '/');
    size_t plen = slash ? (size_t)(slash - path) : 0;
    enum mg_code rc;
    int fd;

    *base = slash ? slash + 1 : path;
    if (x->dir_fd >= 0 && strlen(x->dir_path) == plen && memcmp(x->dir_path, path, plen) == 0)
        return MG_OK;
    if ((rc = x_mkdirs(in, path, plen, &fd)) != MG_OK)
        return rc;
    if (x->dir_fd >= 0)
        close(x->dir_fd);
    free(x->dir_path);
    x->dir_fd = fd;
    x->dir_path = strndup(path, plen);
    if (x->dir_path == NULL) {
        close(x->dir_fd);
        x->dir_fd = -1;
        return mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
    }
    return MG_OK;
}

/*
 * Create the regular file `path` for writing: O_CREAT | O_EXCL | O_NOFOLLOW, so
 * a second entry of the same name fails instead of replacing the first. Only
 * the owner's execute bit of the archive's mode is kept (0755, else 0644);
 * owners and every other bit are ignored.
 */
static enum mg_code x_create(struct inspect *in, const char *path, struct archive_entry *e,
                             int *out)
{
    mode_t mode = (archive_entry_perm(e) & 0100) ? 0755 : 0644;
    const char *base;
    enum mg_code rc;
    int fd;

    *out = -1;
    if ((rc = x_parent(in, path, &base)) != MG_OK)
        return rc;
    fd = openat(in->x->dir_fd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return mg_fail(in->err, MG_EINVAL, NULL,
                           "archive entry '%s' appears more than once; keep one copy", in->show);
        return x_fail(in, "create", errno);
    }
    if ((rc = x_record(in, 'f', path, strlen(path))) != MG_OK) {
        close(fd);
        (void)unlinkat(in->x->dir_fd, base, 0);
        return rc;
    }
    *out = fd;
    return MG_OK;
}

/* Remove what extraction created, newest first (children before parents). */
static void x_undo(struct extract *x)
{
    size_t i;

    for (i = x->made.n; i-- > 0;) {
        const char *s = x->made.v[i];
        (void)unlinkat(x->dest_fd, s + 1, s[0] == 'd' ? AT_REMOVEDIR : 0);
    }
}

/* The destination must be an existing, empty directory (not a link to one). */
static enum mg_code x_open_dest(const char *dest, int *out, struct mg_error *err)
{
    struct dirent *d;
    DIR *dir;
    int fd, dup_fd;
    bool empty = true;

    *out = -1;
    fd = open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return mg_fail(err, MG_EIO, NULL, "cannot open the extraction directory '%s': %s", dest,
                       strerror(errno));
    dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    dir = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (dir == NULL) {
        if (dup_fd >= 0)
            close(dup_fd);
        close(fd);
        return mg_fail(err, MG_EIO, NULL, "cannot read the extraction directory '%s': %s", dest,
                       strerror(errno));
    }
    while (empty && (d = readdir(dir)) != NULL)
        empty = strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0;
    closedir(dir);
    if (!empty) {
        close(fd);
        return mg_fail(err, MG_EINVAL, NULL,
                       "the extraction directory '%s' is not empty; extract into a fresh one",
                       dest);
    }
    *out = fd;
    return MG_OK;
}

/* Check one entry libarchive returned and read its data. */
static enum mg_code inspect_entry(struct archive *a, struct archive_entry *e, struct inspect *in)
{
    const char *raw;
    char *norm = NULL, *copy;
    struct store_archive_file *file = NULL;
    unsigned type = archive_entry_filetype(e);
    enum mg_code rc;
    int fd = -1;

    in->entries++;
    raw = archive_entry_pathname(e);
    if (raw == NULL)
        raw = archive_entry_pathname_utf8(e);
    if (raw == NULL)
        return mg_fail(in->err, MG_EINVAL, NULL,
                       "archive entry #%llu has a path that cannot be decoded; rename it",
                       (unsigned long long)in->entries);
    art_name_show(raw, strlen(raw), in->show);
    if (in->entries > in->lim->max_entries)
        return mg_fail(in->err, MG_EINVAL, NULL,
                       "archive has more than %llu entries (at entry '%s'); pack fewer files",
                       (unsigned long long)in->lim->max_entries, in->show);
    rc = art_path_normalise(raw, strlen(raw), in->lim, &norm, in->err);
    if (rc != MG_OK)
        return rc;
    if (archive_entry_hardlink(e) != NULL || archive_entry_hardlink_w(e) != NULL) {
        rc = mg_fail(in->err, MG_EINVAL, NULL,
                     "archive entry '%s' is a hard link; links are not allowed, store a copy of "
                     "the file instead",
                     in->show);
        goto out;
    }
    if (archive_entry_symlink(e) != NULL || archive_entry_symlink_w(e) != NULL)
        type = AE_IFLNK;
    if (art_special_type_name(type) != NULL) {
        rc = art_reject_type(in->show, type, in->err);
        goto out;
    }
    if (type == AE_IFREG && norm[0] == '\0') {
        rc = mg_fail(in->err, MG_EINVAL, NULL,
                     "archive entry '%s' is a file without a name; remove it from the archive",
                     in->show);
        goto out;
    }
    if (in->is_zip && norm[0] != '\0') {
        copy = strdup(norm);
        if (copy == NULL) {
            rc = mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        if ((rc = art_name_list_push(&in->seen, copy, in->err)) != MG_OK)
            goto out;
    }
    /* Decided from the header, before any byte is decompressed or hashed. */
    if (type == AE_IFREG && archive_entry_size_is_set(e) && archive_entry_size(e) > 0 &&
        (uint64_t)archive_entry_size(e) > in->budget - in->total) {
        rc = ratio_refuse(in, in->total);
        goto out;
    }
    if (type == AE_IFDIR && norm[0] != '\0') {
        if ((copy = strdup(norm)) == NULL) {
            rc = mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        if ((rc = art_name_list_push(&in->dirs, copy, in->err)) != MG_OK)
            goto out;
    }
    if (type == AE_IFREG) {
        rc = files_push(in, norm, &file);
        norm = NULL; /* owned by the manifest now */
        if (rc != MG_OK)
            goto out;
        if (in->x != NULL && (rc = x_create(in, file->path, e, &fd)) != MG_OK)
            goto out;
    } else if (in->x != NULL && norm[0] != '\0') {
        if ((rc = x_mkdirs(in, norm, strlen(norm), &fd)) != MG_OK)
            goto out;
        close(fd);
        fd = -1;
    }
    if (file != NULL && in->scan != NULL && in->x == NULL)
        rc = art_read_data_scanned(a, e, in, file);
    else
        rc = read_data(a, e, in, file, fd);
    if (fd >= 0 && close(fd) != 0 && rc == MG_OK)
        rc = x_fail(in, "write", errno);
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    free(norm);
    return rc;
}

/*
 * Set up a reader for the media type. A compressed stream gets the raw format
 * besides tar: it wins whenever the data does not start with a tar header.
 */
enum mg_code art_reader_new(const char *media_type, struct archive **out, bool *compressed,
                            struct mg_error *err)
{
    struct archive *a;
    int r = ARCHIVE_OK;

    *out = NULL;
    *compressed = false;
    a = archive_read_new();
    if (a == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (strcmp(media_type, MT_ZIP) == 0) {
        r = archive_read_support_format_zip_seekable(a);
    } else {
        /* Built-in decoders only: ARCHIVE_WARN would mean an external program. */
        if (strcmp(media_type, MT_GZIP) == 0)
            r = archive_read_support_filter_gzip(a);
        else if (strcmp(media_type, MT_ZSTD) == 0)
            r = archive_read_support_filter_zstd(a);
        else if (strcmp(media_type, MT_XZ) == 0)
            r = archive_read_support_filter_xz(a);
        *compressed = strcmp(media_type, MT_TAR) != 0;
        if (r == ARCHIVE_OK)
            r = archive_read_support_format_tar(a);
        if (r == ARCHIVE_OK && *compressed)
            r = archive_read_support_format_raw(a);
    }
    if (r != ARCHIVE_OK) {
        mg_fail(err, MG_EIO, NULL, "libarchive cannot read %s: %s", media_type,
                archive_error_string(a) ? archive_error_string(a) : "no built-in support");
        (void)archive_read_free(a); /* already failing; nothing more to report */
        return MG_EIO;
    }
    *out = a;
    return MG_OK;
}

/*
 * The libarchive pass over `path`. A compressed stream is "not an archive"
 * (*is_archive cleared) when it decompresses to nothing, to data that is not
 * tar, or to a tar with no entries. A stream that fails to decompress is
 * corrupt, not "not an archive": the tar it may hold could not be checked.
 */
static enum mg_code read_archive(const char *path, const char *media_type, struct inspect *in,
                                 bool *is_archive)
{
    struct archive *a = NULL;
    struct archive_entry *e;
    bool compressed;
    enum mg_code rc;
    int r;

    rc = art_reader_new(media_type, &a, &compressed, in->err);
    if (rc != MG_OK)
        return rc;
    if (archive_read_open_filename(a, path, READ_BLOCK) != ARCHIVE_OK) {
        /* With the raw format present only an empty stream leaves no format to choose. */
        if (compressed && archive_errno(a) == LA_ERRNO_FILE_FORMAT)
            *is_archive = false;
        else
            rc = art_archive_failure(a, in, NULL);
        goto out;
    }
    for (;;) {
        r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_OK && archive_format(a) == ARCHIVE_FORMAT_RAW) {
            *is_archive = false;
            goto out;
        }
        if (r == ARCHIVE_OK) {
            rc = inspect_entry(a, e, in);
            if (rc != MG_OK)
                goto out;
            continue;
        }
        if (r == ARCHIVE_EOF && compressed && in->entries == 0) {
            *is_archive = false;
            goto out;
        }
        if (r != ARCHIVE_EOF)
            rc = art_archive_failure(a, in, in->entries > 0 ? "after" : NULL);
        goto out;
    }
out:
    if (archive_read_free(a) != ARCHIVE_OK && rc == MG_OK)
        rc = mg_fail(in->err, MG_EIO, NULL, "cannot close the archive reader");
    return rc;
}

struct tree_name {
    const char *path;
    bool dir;
};

/* strcmp, but with '/' below every other byte, so that "a" is directly
 * followed by everything below "a/" (and "a/b" sorts before "a-b"). */
static int cmp_tree(const void *a, const void *b)
{
    const unsigned char *p = (const unsigned char *)((const struct tree_name *)a)->path;
    const unsigned char *q = (const unsigned char *)((const struct tree_name *)b)->path;
    int x, y;

    for (;; p++, q++) {
        x = *p == '/' ? 1 : *p == '\0' ? 0 : *p + 1;
        y = *q == '/' ? 1 : *q == '\0' ? 0 : *q + 1;
        if (x != y || x == 0)
            return x - y;
    }
}

/*
 * A file that is also a directory ("a" as a file and "a/" as a directory,
 * or "a" and "a/b") could never be extracted: refuse it, naming both.
 */
static enum mg_code check_tree(struct inspect *in)
{
    struct tree_name *t;
    size_t n, i, len;
    char other[SHOW_BUF];
    enum mg_code rc = MG_OK;

    if (in->nfiles > SIZE_MAX / sizeof(*t) - in->dirs.n)
        return mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
    n = in->nfiles + in->dirs.n;
    if (n < 2)
        return MG_OK;
    if ((t = malloc(n * sizeof(*t))) == NULL)
        return mg_fail(in->err, MG_ENOMEM, NULL, "out of memory");
    for (i = 0; i < in->nfiles; i++)
        t[i] = (struct tree_name){in->files[i].path, false};
    for (i = 0; i < in->dirs.n; i++)
        t[in->nfiles + i] = (struct tree_name){in->dirs.v[i], true};
    qsort(t, n, sizeof(*t), cmp_tree);
    for (i = 0; i + 1 < n; i++) {
        const struct tree_name *a = &t[i], *b = &t[i + 1];
        len = strlen(a->path);
        if (strcmp(a->path, b->path) == 0 && a->dir && b->dir)
            continue;
        if (strcmp(a->path, b->path) == 0 ||
            (!a->dir && strncmp(a->path, b->path, len) == 0 && b->path[len] == '/')) {
            art_name_show(a->path, len, in->show);
            art_name_show(b->path, strlen(b->path), other);
            rc = mg_fail(in->err, MG_EINVAL, NULL,
                         "archive entries '%s' and '%s%s' conflict: '%s' is a file but the other "
                         "entry needs it to be a directory; rename one of them",
                         in->show, other, b->dir ? "/" : "", in->show);
            break;
        }
    }
    free(t);
    return rc;
}

static enum mg_code inspect_run(const char *path, const char *media_type, struct inspect *in,
                                bool *is_archive)
{
    struct stat sb;
    enum mg_code rc;

    *is_archive = true;
    if (stat(path, &sb) != 0)
        return mg_fail(in->err, MG_EIO, NULL, "cannot read '%s': %s", path, strerror(errno));
    in->stored = (uint64_t)sb.st_size;
    in->budget = UINT64_MAX;
    if (in->lim->max_ratio > 0) {
        in->budget = in->stored > UINT64_MAX / in->lim->max_ratio ? UINT64_MAX
                                                                  : in->stored * in->lim->max_ratio;
        if (in->budget < in->lim->ratio_floor_bytes)
            in->budget = in->lim->ratio_floor_bytes;
    }
    if (in->is_zip) {
        rc = art_zip_scan_cd(path, in);
        if (rc != MG_OK || in->entries == 0)
            return rc;
        in->entries = 0; /* libarchive's pass counts them again */
    }
    rc = read_archive(path, media_type, in, is_archive);
    if (rc != MG_OK || !*is_archive)
        return rc;
    if (in->is_zip && (rc = art_zip_cross_check(in)) != MG_OK)
        return rc;
    if (in->nfiles > 0)
        qsort(in->files, in->nfiles, sizeof(*in->files), art_cmp_file);
    for (size_t i = 1; i < in->nfiles; i++) {
        if (strcmp(in->files[i - 1].path, in->files[i].path) == 0) {
            art_name_show(in->files[i].path, strlen(in->files[i].path), in->show);
            return mg_fail(in->err, MG_EINVAL, NULL,
                           "archive entry '%s' appears more than once; keep one copy", in->show);
        }
    }
    return check_tree(in);
}

static bool is_archive_type(const char *media_type)
{
    return media_type != NULL &&
           (strcmp(media_type, MT_TAR) == 0 || strcmp(media_type, MT_GZIP) == 0 ||
            strcmp(media_type, MT_ZIP) == 0 || strcmp(media_type, MT_ZSTD) == 0 ||
            strcmp(media_type, MT_XZ) == 0);
}

/*
 * The pass both public functions share: inspect `path`, and when x is given
 * also write what it holds below x->dest_fd. On success *out receives the
 * manifest (empty unless *is_archive).
 */
static enum mg_code archive_run(const char *path, const char *media_type,
                                const struct store_archive_limits *lim, struct extract *x,
                                struct art_scan_walk *scan, struct store_archive_manifest *out,
                                bool *is_archive, struct mg_error *err)
{
    struct inspect in;
    struct store_archive_manifest tmp;
    struct store_archive_limits def;
    locale_t utf8, prev = (locale_t)0;
    bool archive = false;
    enum mg_code rc;

    if (lim == NULL) {
        store_archive_limits_default(&def);
        lim = &def;
    }
    memset(&in, 0, sizeof(in));
    in.lim = lim;
    in.err = err;
    in.x = x;
    in.scan = scan;
    in.region_fd = -1;
    in.is_zip = strcmp(media_type, MT_ZIP) == 0;
    in.md = EVP_MD_CTX_new();
    if (in.md == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* an uncompressed tar: the scan reads zips in it where they lie */
    if (scan != NULL && strcmp(media_type, MT_TAR) == 0)
        in.region_fd = open(path, O_RDONLY | O_CLOEXEC);
    /* Thread-local, so other threads keep their locale. */
    utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (utf8 != (locale_t)0)
        prev = uselocale(utf8);

    rc = inspect_run(path, media_type, &in, &archive);
    if (lim->counters != NULL)
        __atomic_add_fetch(&lim->counters->expanded_bytes, in.total, __ATOMIC_RELAXED);

    if (prev != (locale_t)0)
        uselocale(prev);
    if (utf8 != (locale_t)0)
        freelocale(utf8);
    EVP_MD_CTX_free(in.md);
    if (in.region_fd >= 0)
        close(in.region_fd);
    art_name_list_release(&in.cd);
    art_name_list_release(&in.seen);
    art_name_list_release(&in.dirs);
    tmp.files = in.files;
    tmp.n = in.nfiles;
    if (rc != MG_OK || !archive) {
        store_archive_manifest_release(&tmp);
        return rc;
    }
    *out = tmp;
    *is_archive = true;
    return MG_OK;
}

enum mg_code store_archive_inspect(const char *path, const char *media_type,
                                   const struct store_archive_limits *lim,
                                   struct store_archive_manifest *out, bool *is_archive,
                                   struct mg_error *err)
{
    return store_archive_inspect_scan(path, media_type, lim, NULL, out, is_archive, err);
}

enum mg_code store_archive_inspect_scan(const char *path, const char *media_type,
                                        const struct store_archive_limits *lim,
                                        struct art_scan_walk *scan,
                                        struct store_archive_manifest *out, bool *is_archive,
                                        struct mg_error *err)
{
    out->files = NULL;
    out->n = 0;
    *is_archive = false;
    if (!is_archive_type(media_type))
        return MG_OK;
    return archive_run(path, media_type, lim, NULL, scan, out, is_archive, err);
}

enum mg_code store_archive_extract(const char *path, const char *media_type, const char *dest,
                                   const struct store_archive_limits *lim,
                                   struct store_archive_manifest *out, struct mg_error *err)
{
    struct store_archive_manifest m = {NULL, 0};
    struct extract x;
    bool archive = false;
    enum mg_code rc;

    if (out != NULL) {
        out->files = NULL;
        out->n = 0;
    }
    if (!is_archive_type(media_type))
        return mg_fail(err, MG_EINVAL, NULL,
                       "a %s blob is not an archive; only tar (optionally gzip, zstd or xz "
                       "compressed) and zip can be extracted",
                       media_type ? media_type : "untyped");
    memset(&x, 0, sizeof(x));
    x.dir_fd = -1;
    if ((rc = x_open_dest(dest, &x.dest_fd, err)) != MG_OK)
        return rc;
    rc = archive_run(path, media_type, lim, &x, NULL, &m, &archive, err);
    if (rc == MG_OK && !archive)
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "the %s stream does not hold a tar archive; nothing to extract", media_type);
    if (x.dir_fd >= 0)
        close(x.dir_fd);
    if (rc != MG_OK)
        x_undo(&x);
    close(x.dest_fd);
    free(x.dir_path);
    art_name_list_release(&x.made);
    if (rc != MG_OK || out == NULL) {
        store_archive_manifest_release(&m);
        return rc;
    }
    *out = m;
    return MG_OK;
}
