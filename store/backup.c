/*
 * backup.c - consistent backups of a data directory while the server runs,
 * and restores into a new one.
 *
 * The database is copied first (db_snapshot, consistent while writers go on); blobs are
 * immutable and written before their rows commit, so every blob the
 * snapshot references is already complete in the blob backend when it is
 * copied after. Blobs are read through the blob layer (blob.h), so a backup
 * of an installation on s3:// or oci:// holds its blobs too, and a restore
 * writes them back through it.
 */
#include "store_int.h"

#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "../os/file.h"
#include "../base/util.h"

/* Add one file to the tar under name, streaming it. */
static enum mg_code add_file(struct archive *a, const char *path, const char *name, mode_t mode,
                             struct mg_error *err)
{
    struct archive_entry *e = archive_entry_new();
    struct stat sb;
    char buf[65536];
    ssize_t r;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    enum mg_code rc = MG_OK;

    if (fd < 0 || fstat(fd, &sb) != 0 || e == NULL) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, sb.st_size);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, mode);
    archive_entry_set_mtime(e, sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec); /* pax keeps the ns */
    if (archive_write_header(a, e) != ARCHIVE_OK) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot write the backup: %s", archive_error_string(a));
        goto out;
    }
    while ((r = read(fd, buf, sizeof(buf))) > 0) {
        if (archive_write_data(a, buf, (size_t)r) != r) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot write the backup: %s", archive_error_string(a));
            goto out;
        }
    }
    if (r < 0)
        rc = mg_fail(err, MG_EIO, NULL, "cannot read %s: %s", path, strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    archive_entry_free(e);
    return rc;
}

static enum mg_code add_dir(struct archive *a, const char *dir, const char *prefix, mode_t mode,
                            int depth, size_t *count, struct mg_error *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    enum mg_code rc = MG_OK;

    if (d == NULL)
        return errno == ENOENT
                   ? MG_OK
                   : mg_fail(err, MG_EIO, NULL, "cannot list %s: %s", dir, strerror(errno));
    while (rc == MG_OK && (e = readdir(d)) != NULL) {
        char path[PATH_MAX], name[PATH_MAX];
        struct stat sb;

        if (e->d_name[0] == '.' || strncmp(e->d_name, "upload-", 7) == 0 ||
            strstr(e->d_name, ".tmp"))
            continue;
        snprintf(path, sizeof(path), "%.2000s/%.255s", dir, e->d_name);
        snprintf(name, sizeof(name), "%.2000s/%.255s", prefix, e->d_name);
        if (lstat(path, &sb) != 0)
            continue;
        if (S_ISDIR(sb.st_mode) && depth > 0)
            rc = add_dir(a, path, name, mode, depth - 1, count, err);
        else if (S_ISREG(sb.st_mode) && (rc = add_file(a, path, name, mode, err)) == MG_OK)
            (*count)++;
    }
    closedir(d);
    return rc;
}

/* Open the blob backend a backup reads or a restore writes. */
static enum mg_code open_blobs(const char *data_dir, const struct store_blobs_location *loc,
                               struct blob_backend **out, struct mg_error *err)
{
    struct blob_options bo = {0};
    char url[PATH_MAX + 8], tmp[PATH_MAX];

    snprintf(url, sizeof(url), "file:%s/blobs", data_dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp", data_dir);
    bo.url = loc && loc->url ? loc->url : url;
    bo.credentials = loc ? loc->credentials : NULL;
    bo.tmp_dir = tmp;
    return blob_open(&bo, out, err);
}

static enum mg_code tar_sink(void *arg, const void *data, size_t n, struct mg_error *err)
{
    if (archive_write_data(arg, data, n) != (la_ssize_t)n)
        return mg_fail(err, MG_EIO, NULL, "cannot write the backup: %s", archive_error_string(arg));
    return MG_OK;
}

/* Add one blob to the tar, streamed from the backend as stored (restore checks it). */
static enum mg_code add_blob(struct archive *a, struct blob_backend *b, const char *digest,
                             uint64_t size, struct mg_error *err)
{
    struct archive_entry *e = archive_entry_new();
    char name[128];
    enum mg_code rc;

    if (e == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    snprintf(name, sizeof(name), "blobs/sha256/%.2s/%s", digest + 7, digest + 7);
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0600);
    if (archive_write_header(a, e) != ARCHIVE_OK)
        rc = mg_fail(err, MG_EIO, NULL, "cannot write the backup: %s", archive_error_string(a));
    else
        rc = blob_stream(b, digest, size, false, tar_sink, a, err);
    archive_entry_free(e);
    return rc;
}

/* Every blob the snapshot records, from the backend. */
static enum mg_code add_blobs(struct archive *a, const char *snapshot, struct blob_backend *b,
                              size_t *count, struct mg_error *err)
{
    struct db_open_options o = {.path = snapshot};
    struct db_conn *c = NULL;
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    if ((rc = db_open(&o, &c, err)) != MG_OK)
        return rc;
    s = db_prepare(c, "SELECT digest, size FROM blobs WHERE state = 'live' ORDER BY digest");
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if ((rc = add_blob(a, b, db_col_text(s, 0), (uint64_t)db_col_i64(s, 1), err)) != MG_OK) {
            db_reset(s);
            break;
        }
        (*count)++;
    }
    db_close(&c);
    return rc;
}

/* Create path anew, mode 0600, refusing a link or anything already there (O_EXCL with
 * O_NOFOLLOW: nobody's planted link is followed). fd: the open file, or NULL to close it. */
static enum mg_code create_private(const char *path, int *fd, struct mg_error *err)
{
    int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

    if (f < 0)
        return mg_fail(err, MG_EIO, "out", "cannot create %s: %s (remove it if it is a leftover)",
                       path, strerror(errno));
    if (fchmod(f, 0600) != 0) { /* whatever the umask did */
        close(f);
        unlink(path);
        return mg_fail(err, MG_EIO, "out", "cannot make %s private: %s", path, strerror(errno));
    }
    if (fd != NULL)
        *fd = f;
    else
        close(f);
    return MG_OK;
}

enum mg_code store_backup(const char *data_dir, const struct store_blobs_location *loc,
                          const char *out_path, json_t **summary, struct mg_error *err)
{
    char db[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX], part[PATH_MAX];
    struct db_open_options src = {.path = db};
    struct archive *a = archive_write_new();
    struct blob_backend *blobs = NULL;
    size_t nblobs = 0, keys = 0;
    int part_fd = -1;
    enum mg_code rc;

    snprintf(db, sizeof(db), "%s/modelgate.db", data_dir);
    snprintf(tmp, sizeof(tmp), "%s.snapshot-db", out_path);
    snprintf(part, sizeof(part), "%s.part", out_path);
    unlink(tmp);
    if (access(db, R_OK) != 0) {
        archive_write_free(a);
        return mg_fail(err, MG_EINVAL, "data-dir", "%s has no modelgate.db", data_dir);
    }
    if ((rc = open_blobs(data_dir, loc, &blobs, err)) != MG_OK)
        goto out;
    /* The snapshot and the archive hold the database and the private keys: both are made
     * here, owner-only, and never through a link someone planted at their names. */
    if ((rc = create_private(tmp, NULL, err)) != MG_OK)
        goto out;
    if ((rc = db_snapshot(&src, tmp, err)) != MG_OK)
        goto out;
    unlink(part); /* a leftover of an interrupted backup (a link is removed, not followed) */
    if ((rc = create_private(part, &part_fd, err)) != MG_OK)
        goto out;
    if (a == NULL || archive_write_set_format_pax(a) != ARCHIVE_OK ||
        archive_write_open_fd(a, part_fd) != ARCHIVE_OK) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", part,
                     a ? archive_error_string(a) : "out of memory");
        goto out;
    }
    if ((rc = add_file(a, tmp, "modelgate.db", 0600, err)) != MG_OK)
        goto out;
    if ((rc = add_blobs(a, tmp, blobs, &nblobs, err)) != MG_OK)
        goto out;
    snprintf(dir, sizeof(dir), "%s/keys", data_dir);
    if ((rc = add_dir(a, dir, "keys", 0600, 0, &keys, err)) != MG_OK)
        goto out;
    if (archive_write_close(a) != ARCHIVE_OK) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot finish the backup: %s", archive_error_string(a));
        goto out;
    }
    if (fsync(part_fd) != 0 || close(part_fd) != 0) {
        part_fd = -1;
        rc = mg_fail(err, MG_EIO, NULL, "cannot write %s: %s", part, strerror(errno));
        goto out;
    }
    part_fd = -1;
    if (rename(part, out_path) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot move the backup into place: %s", strerror(errno));
        goto out;
    }
    *summary = json_pack("{s:s, s:I, s:I, s:s}", "file", out_path, "blobs", (json_int_t)nblobs,
                         "keys", (json_int_t)keys, "blobs_from", blob_kind(blobs));
out:
    blob_close(&blobs);
    archive_write_free(a);
    if (part_fd >= 0)
        close(part_fd);
    db_file_remove(tmp); /* and the side files reading its blob rows made */
    if (rc != MG_OK)
        unlink(part);
    return rc;
}

/* Keys' creation times are their files' mtimes: take them from the tar. */
static void restore_key_times(const char *archive_path, const char *data_dir)
{
    struct archive *a = archive_read_new();
    struct archive_entry *e;

    if (a == NULL || archive_read_support_format_tar(a) != ARCHIVE_OK ||
        archive_read_open_filename(a, archive_path, 65536) != ARCHIVE_OK) {
        archive_read_free(a);
        return;
    }
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
        const char *name = archive_entry_pathname(e);
        if (name && strncmp(name, "keys/", 5) == 0 && strchr(name + 5, '/') == NULL &&
            strstr(name, "..") == NULL) {
            char path[PATH_MAX];
            struct timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)},
                                     {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
            snprintf(path, sizeof(path), "%.3000s/%.255s", data_dir, name);
            utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
        }
        archive_read_data_skip(a);
    }
    archive_read_free(a);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    return f->level > 0 ? remove(path) : 0; /* keep the directory itself */
}

/* Every recorded blob must be in the backend and hash to its name. */
static enum mg_code verify_blobs(struct store *st, size_t *n, struct mg_error *err)
{
    static const char sql[] = "SELECT digest, size FROM blobs WHERE state = 'live'";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    struct mg_error why;
    enum mg_code rc;
    bool row;
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

    *n = 0;
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        const char *digest = db_col_text(s, 0);

        if (store_blob_copy_to_fd(st, digest, (uint64_t)db_col_i64(s, 1), null, &why) != MG_OK) {
            rc = mg_fail(err, MG_EINVAL, NULL, "blob %s is missing or damaged (%s)", digest,
                         why.message);
            db_reset(s);
            break;
        }
        (*n)++;
    }
    if (null >= 0)
        close(null);
    store_read_end(st, c);
    return rc;
}

/* A restore to a remote backend: the blobs the tar laid out under data_dir/blobs go
 * up through the blob layer (each checked against its digest), then the local copies
 * go. Blobs the backend holds already are kept. */
static enum mg_code push_blobs(const char *data_dir, const struct store_blobs_location *loc,
                               struct mg_error *err)
{
    struct blob_backend *local = NULL, *remote = NULL;
    struct db_open_options o = {0};
    struct db_conn *c = NULL;
    struct db_stmt *s;
    char db[PATH_MAX], dir[PATH_MAX];
    enum mg_code rc;
    bool row;

    snprintf(db, sizeof(db), "%s/modelgate.db", data_dir);
    o.path = db;
    if ((rc = open_blobs(data_dir, NULL, &local, err)) != MG_OK ||
        (rc = open_blobs(data_dir, loc, &remote, err)) != MG_OK ||
        (rc = db_open(&o, &c, err)) != MG_OK)
        goto out;
    s = db_prepare(c, "SELECT digest, size FROM blobs WHERE state = 'live' ORDER BY digest");
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        const char *digest = db_col_text(s, 0);
        uint64_t size = (uint64_t)db_col_i64(s, 1), have = 0;
        struct mg_error e;

        if (blob_stat(remote, digest, &have, &e) == MG_OK && have == size)
            continue;
        if ((rc = blob_copy(local, remote, digest, size, err)) != MG_OK) {
            db_reset(s);
            break;
        }
    }
out:
    db_close(&c);
    blob_close(&local);
    blob_close(&remote);
    if (rc == MG_OK) {
        snprintf(dir, sizeof(dir), "%s/blobs", data_dir);
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        rmdir(dir);
    }
    return rc;
}

enum mg_code store_restore(const char *archive_path, const char *data_dir,
                           const struct store_blobs_location *loc, const struct sign_keyring *keys,
                           json_t **summary, struct mg_error *err)
{
    struct store_options opt = {0};
    struct store *st = NULL;
    struct store_archive_limits lim;
    json_t *audit = NULL;
    char keys_dir[PATH_MAX], here[PATH_MAX + 16];
    DIR *d;
    struct dirent *e;
    size_t blobs = 0;
    enum mg_code rc;

    if (mkdir(data_dir, 0700) != 0 && errno != EEXIST)
        return mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", data_dir, strerror(errno));
    store_archive_limits_default(&lim);
    lim.max_total_bytes = UINT64_MAX / 2;
    /* Refuses a non-empty directory, links, "..", anything but files and dirs. */
    if ((rc = store_archive_extract(archive_path, "application/x-tar", data_dir, &lim, NULL,
                                    err)) != MG_OK)
        return rc;
    restore_key_times(archive_path, data_dir);
    snprintf(keys_dir, sizeof(keys_dir), "%s/modelgate.db", data_dir);
    chmod(keys_dir, 0600);
    snprintf(keys_dir, sizeof(keys_dir), "%s/keys", data_dir);
    chmod(keys_dir, 0700);
    if ((d = opendir(keys_dir)) != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] != '.')
                fchmodat(dirfd(d), e->d_name, 0600, 0);
        }
        closedir(d);
    }
    snprintf(here, sizeof(here), "file:%s/blobs", data_dir);
    if (loc && loc->url && strcmp(loc->url, here) != 0 &&
        (rc = push_blobs(data_dir, loc, err)) != MG_OK)
        goto out;
    opt.data_dir = data_dir;
    opt.blobs = loc ? loc->url : NULL;
    opt.blobs_credentials = loc ? loc->credentials : NULL;
    opt.read_conns = 2;
    opt.keys = keys;
    store_archive_limits_default(&opt.archive);
    if ((rc = store_open(&opt, &st, err)) != MG_OK)
        goto out;
    if ((rc = verify_blobs(st, &blobs, err)) != MG_OK)
        goto out;
    if ((rc = store_audit_verify(st, &audit, err)) != MG_OK)
        goto out;
    if (!json_is_true(json_object_get(audit, "ok"))) {
        rc = mg_fail(err, MG_EINVAL, NULL, "the restored audit log does not verify (entry %lld)",
                     (long long)json_integer_value(json_object_get(audit, "first_bad_seq")));
        goto out;
    }
    *summary = json_pack("{s:s, s:I, s:O}", "data_dir", data_dir, "blobs", (json_int_t)blobs,
                         "audit", audit);
out:
    json_decref(audit);
    store_close(&st);
    /* A restore that did not verify must not leave a usable data directory. */
    if (rc != MG_OK)
        nftw(data_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
