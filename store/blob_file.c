/*
 * blob_file.c - blobs in a local (or shared) directory: <dir>/sha256/<2 hex>/<hex>.
 *
 * An upload streams into <dir>/tmp/upload-XXXXXX, its write-back started as it grows
 * (WRITEBACK_STEP); commit fsyncs it, renames it into place and fsyncs both directories,
 * so a blob file is whole before its row can exist. Reads hand out the file descriptor
 * (sendfile). No presigned URLs (blob_no_presign).
 */
#include "blob_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_backend {
    char dir[2048];  /* the --blobs directory */
    char blob[2100]; /* dir/sha256 */
    char tmp[2100];  /* dir/tmp */
};

struct file_put {
    struct blob_put base;
    int fd;
    uint64_t written, started; /* bytes written; bytes whose write-back was started */
};

/* Write-back is started every WRITEBACK_STEP bytes of an upload (file_put_write), so the
 * disk writes while the rest arrives and commit's fsync waits for the last step only. */
#define WRITEBACK_STEP (8u << 20)

/* Bytes [off, off+len) of a blob's file, read with pread or handed over for sendfile. */
struct file_reader {
    struct blob_reader base;
    int fd; /* >= 0 until taken */
    uint64_t off, len;
};

static struct file_backend *fb(struct blob_backend *b)
{
    return b->impl;
}

static void blob_path(struct file_backend *f, const char *digest, char *out, size_t outsz)
{
    snprintf(out, outsz, "%.2100s/%.2s/%.64s", f->blob, digest + 7, digest + 7);
}

static enum mg_code make_dir(const char *path, struct mg_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", path, strerror(errno));
    return MG_OK;
}

#define SCHEME "file:"

static enum mg_code file_check_url(const char *url, struct mg_error *err)
{
    if (url[strlen(SCHEME)] != '/')
        return mg_fail(err, MG_EINVAL, "blobs",
                       "--blobs file: takes an absolute directory (file:/srv/blobs)");
    return MG_OK;
}

/* file:<dir>; no credentials. Scratch is <dir>/tmp, beside the blobs (same disk: a
 * commit is a rename). */
static enum mg_code file_open(struct blob_backend *b, const char *url, const char *creds,
                              struct mg_error *err)
{
    struct file_backend *f = calloc(1, sizeof(*f));
    const char *dir = url + strlen(SCHEME);
    enum mg_code rc;

    (void)creds;
    if (f == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    b->impl = f;
    if (strlen(dir) >= 2000)
        return mg_fail(err, MG_EINVAL, "blobs", "the blob directory's path is too long");
    snprintf(f->dir, sizeof(f->dir), "%.2000s", dir);
    snprintf(f->blob, sizeof(f->blob), "%.2000s/sha256", dir);
    snprintf(f->tmp, sizeof(f->tmp), "%.2000s/tmp", dir);
    snprintf(b->desc, sizeof(b->desc), "file directory %s", dir);
    if ((rc = make_dir(f->dir, err)) != MG_OK || (rc = make_dir(f->blob, err)) != MG_OK ||
        (rc = make_dir(f->tmp, err)) != MG_OK)
        return rc;
    free(b->tmp_dir);
    if ((b->tmp_dir = strdup(f->tmp)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    return MG_OK;
}

static void file_close(struct blob_backend *b)
{
    free(b->impl);
    b->impl = NULL;
}

static enum mg_code file_check(struct blob_backend *b, struct mg_error *err)
{
    char path[PATH_MAX];
    int fd;

    snprintf(path, sizeof(path), "%.2100s/readyz-XXXXXX", fb(b)->tmp);
    fd = mkstemp(path);
    if (fd < 0)
        return mg_fail(err, MG_EUNAVAIL, NULL, "the blob directory %s is not writable: %s",
                       fb(b)->dir, strerror(errno));
    close(fd);
    unlink(path);
    return MG_OK;
}

static enum mg_code file_put_begin(struct blob_backend *b, const char *expected, uint64_t max,
                                   struct blob_put **out, struct mg_error *err)
{
    struct file_put *p = calloc(1, sizeof(*p));

    (void)expected;
    (void)max;
    if (p == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    p->base.b = b;
    snprintf(p->base.handle, sizeof(p->base.handle), "%.2100s/upload-XXXXXX", fb(b)->tmp);
    p->fd = mkostemp(p->base.handle, O_CLOEXEC);
    if (p->fd < 0) {
        enum mg_code code = errno == ENOSPC ? MG_ENOSPC : MG_EIO;
        mg_fail(err, code, NULL, "cannot create an upload file: %s", strerror(errno));
        free(p);
        return code;
    }
    *out = &p->base;
    return MG_OK;
}

static enum mg_code file_put_write(struct blob_put *bp, const void *data, size_t n,
                                   struct mg_error *err)
{
    struct file_put *p = (struct file_put *)bp;
    const uint8_t *q = data;

    while (n > 0) {
        ssize_t w = write(p->fd, q, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
                return mg_fail(err, MG_ENOSPC, NULL,
                               "the server ran out of disk space while storing the upload");
            return mg_fail(err, MG_EIO, NULL, "cannot write the upload: %s", strerror(errno));
        }
        q += w;
        n -= (size_t)w;
        p->written += (uint64_t)w;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    /* A hint: its failure is commit's fsync's to report. */
    if (p->written - p->started >= WRITEBACK_STEP) {
        (void)sync_file_range(p->fd, (off_t)p->started, (off_t)(p->written - p->started),
                              SYNC_FILE_RANGE_WRITE);
        p->started = p->written;
    }
#endif
    return MG_OK;
}

static const char *file_put_local_path(const struct blob_put *p)
{
    return p->handle;
}

static enum mg_code fsync_dir(const char *dir, struct mg_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return mg_fail(err, MG_EIO, NULL, "cannot fsync %s: %s", dir, strerror(e));
    }
    close(fd);
    return MG_OK;
}

static enum mg_code file_put_commit(struct blob_put *bp, const char *digest, struct mg_error *err)
{
    struct file_put *p = (struct file_put *)bp;
    struct file_backend *f = fb(bp->b);
    char dir[PATH_MAX], final[PATH_MAX];
    enum mg_code rc;

    if (fsync(p->fd) != 0)
        return mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL,
                       "cannot fsync the upload: %s", strerror(errno));
    snprintf(dir, sizeof(dir), "%.2100s/%.2s", f->blob, digest + 7);
    if ((rc = make_dir(dir, err)) != MG_OK)
        return rc;
    blob_path(f, digest, final, sizeof(final));
    if (rename(bp->handle, final) != 0)
        return mg_fail(err, MG_EIO, NULL, "cannot move the upload into place: %s", strerror(errno));
    bp->handle[0] = '\0'; /* nothing left to remove */
    /* On a failure below the renamed file stays: same bytes under the same name, and
     * a retry of the upload simply commits the row. */
    if ((rc = fsync_dir(dir, err)) != MG_OK || (rc = fsync_dir(f->tmp, err)) != MG_OK ||
        (rc = fsync_dir(f->blob, err)) != MG_OK)
        return rc;
    return MG_OK;
}

static bool file_put_abort(struct blob_put *bp)
{
    return bp->handle[0] == '\0' || unlink(bp->handle) == 0 || errno == ENOENT;
}

static void file_put_free(struct blob_put *bp)
{
    struct file_put *p = (struct file_put *)bp;

    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

static enum mg_code file_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                              struct mg_error *err)
{
    char path[PATH_MAX];
    struct stat sb;

    blob_path(fb(b), digest, path, sizeof(path));
    if (stat(path, &sb) != 0)
        return errno == ENOENT
                   ? mg_fail(err, MG_ENOTFOUND, NULL, "blob %s is not stored", digest)
                   : mg_fail(err, MG_EIO, NULL, "cannot stat blob %s: %s", digest, strerror(errno));
    *size = (uint64_t)sb.st_size;
    return MG_OK;
}

static bool file_local_path(struct blob_backend *b, const char *digest, char *out, size_t outsz)
{
    blob_path(fb(b), digest, out, outsz);
    return true;
}

/* ---- reading ---------------------------------------------------------------- */

static enum mg_code file_reader_read(struct blob_reader *br, void *buf, size_t n, size_t *got,
                                     bool *would_block, void (*wake)(void *arg), void *arg,
                                     struct mg_error *err)
{
    struct file_reader *r = (struct file_reader *)br;

    (void)would_block; /* a file never makes us wait */
    (void)wake;
    (void)arg;
    if (r->len == 0)
        return MG_OK;
    if (r->fd < 0)
        return mg_fail(err, MG_EIO, NULL, "the blob reader's file was handed over");
    if (n > r->len)
        n = (size_t)r->len;
    while (n > 0) {
        ssize_t k = pread(r->fd, buf, n, (off_t)r->off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return mg_fail(err, MG_EIO, NULL, "cannot read the blob: %s",
                           k < 0 ? strerror(errno) : "it is shorter than recorded");
        r->off += (uint64_t)k;
        r->len -= (uint64_t)k;
        *got = (size_t)k;
        break;
    }
    return MG_OK;
}

static int file_reader_take_fd(struct blob_reader *br, uint64_t *offset)
{
    struct file_reader *r = (struct file_reader *)br;
    int fd = r->fd;

    if (fd < 0)
        return -1;
    *offset = r->off;
    r->fd = -1;
    return fd;
}

static void file_reader_close(struct blob_reader *br)
{
    struct file_reader *r = (struct file_reader *)br;

    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

static const struct blob_reader_ops file_reader_ops = {
    .read = file_reader_read,
    .take_fd = file_reader_take_fd,
    .close = file_reader_close,
};

static enum mg_code file_read_open(struct blob_backend *b, const char *digest, uint64_t off,
                                   uint64_t len, struct blob_reader **out, struct mg_error *err)
{
    struct file_reader *r;
    char path[PATH_MAX];
    struct stat sb;
    int fd;

    blob_path(fb(b), digest, path, sizeof(path));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0 || off > (uint64_t)sb.st_size ||
        len > (uint64_t)sb.st_size - off) {
        if (fd >= 0)
            close(fd);
        return mg_fail(err, MG_EIO, NULL, "blob %s is recorded but its file is unreadable", digest);
    }
    if ((r = calloc(1, sizeof(*r))) == NULL) {
        close(fd);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    r->base.ops = &file_reader_ops;
    r->fd = fd;
    r->off = off;
    r->len = len;
    *out = &r->base;
    return MG_OK;
}

static enum mg_code file_del(struct blob_backend *b, const char *digest, struct mg_error *err)
{
    char path[PATH_MAX];

    blob_path(fb(b), digest, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT)
        return mg_fail(err, MG_EIO, NULL, "cannot delete blob %s: %s", digest, strerror(errno));
    return MG_OK;
}

static bool is_hex(const char *s, size_t n)
{
    return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

static enum mg_code file_list(struct blob_backend *b,
                              bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                              struct mg_error *err)
{
    struct file_backend *f = fb(b);
    DIR *top = opendir(f->blob), *sub;
    struct dirent *e, *g;
    bool go = true;

    if (top == NULL)
        return mg_fail(err, MG_EIO, NULL, "cannot list %s: %s", f->blob, strerror(errno));
    while (go && (e = readdir(top)) != NULL) {
        char dir[PATH_MAX];

        if (!is_hex(e->d_name, 2))
            continue;
        snprintf(dir, sizeof(dir), "%.2100s/%.2s", f->blob, e->d_name);
        if ((sub = opendir(dir)) == NULL)
            continue;
        while (go && (g = readdir(sub)) != NULL) {
            char digest[72];
            struct stat sb;

            if (!is_hex(g->d_name, 64) || strncmp(g->d_name, e->d_name, 2) != 0 ||
                fstatat(dirfd(sub), g->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISREG(sb.st_mode))
                continue;
            snprintf(digest, sizeof(digest), "sha256:%.64s", g->d_name);
            go = cb(digest, (uint64_t)sb.st_size, arg);
        }
        closedir(sub);
    }
    closedir(top);
    return MG_OK;
}

static enum mg_code file_orphans(struct blob_backend *b,
                                 bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                                 struct mg_error *err)
{
    struct file_backend *f = fb(b);
    DIR *d = opendir(f->tmp);
    struct dirent *e;
    int64_t now = mg_now_ms();
    bool go = true;

    if (d == NULL)
        return mg_fail(err, MG_EIO, NULL, "cannot list %s: %s", f->tmp, strerror(errno));
    while (go && (e = readdir(d)) != NULL) {
        char path[PATH_MAX];
        struct stat sb;
        struct blob_orphan o;

        if (strncmp(e->d_name, "upload-", 7) != 0 ||
            fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        snprintf(path, sizeof(path), "%.2100s/%.255s", f->tmp, e->d_name);
        o.handle = path;
        o.owner = path;
        o.what = "temp file";
        o.age_ms = now - ((int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000);
        go = cb(&o, arg);
    }
    closedir(d);
    return MG_OK;
}

static enum mg_code file_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err)
{
    struct file_backend *f = fb(b);
    size_t n = strlen(f->tmp);

    /* Only our own temp files, never a path elsewhere. */
    if (strncmp(handle, f->tmp, n) != 0 || strncmp(handle + n, "/upload-", 8) != 0 ||
        strchr(handle + n + 1, '/') != NULL)
        return mg_fail(err, MG_EINVAL, NULL, "'%.200s' is not an upload of %s", handle, b->desc);
    if (unlink(handle) != 0 && errno != ENOENT)
        return mg_fail(err, MG_EIO, NULL, "cannot remove %s: %s", handle, strerror(errno));
    return MG_OK;
}

const struct blob_ops blob_file_ops = {
    .kind = "file",
    .scheme = SCHEME,
    .usage = "file:/DIR",
    .supports = BLOB_CAN_SENDFILE | BLOB_CAN_LOCAL_FILES,
    .check_url = file_check_url,
    .open = file_open,
    .check = file_check,
    .put_begin = file_put_begin,
    .put_write = file_put_write,
    .put_local_path = file_put_local_path,
    .put_commit = file_put_commit,
    .put_abort = file_put_abort,
    .put_free = file_put_free,
    .stat = file_stat,
    .local_path = file_local_path,
    .read_open = file_read_open,
    .presign = blob_no_presign,
    .del = file_del,
    .list = file_list,
    .orphans = file_orphans,
    .reclaim = file_reclaim,
    .close = file_close,
};
