/*
 * blobs_read.c - what is stored (the upload side is blobs.c): a blob's row and expanded
 * size, its bytes (a reader, a file descriptor, a checked copy, materialized into a
 * directory), and the teams holding it (claiming it for more).
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../os/file.h"
#include "blob.h"
#include "blobs_int.h"

enum mg_code store_blob_get(struct store *st, const char *digest, json_t **out,
                            struct mg_error *err)
{
    static const char sql[] = "SELECT size, media_type, files, created_at, created_by, formats, "
                              "scan FROM blobs WHERE digest = ? AND state = 'live'";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    s = db_prepare(c, sql);
    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        int64_t files = db_col_null(s, 2) ? -1 : db_col_i64(s, 2);
        *out = store_blob_json(digest, (uint64_t)db_col_i64(s, 0), db_col_text(s, 1), files,
                               db_col_null(s, 5) ? NULL : store_col_json(s, 5),
                               db_col_null(s, 6) ? NULL : store_col_json(s, 6));
        json_object_set_new(*out, "created_at", store_col_json_string(s, 3));
        json_object_set_new(*out, "created_by", store_col_json_string(s, 4));
        rc = MG_OK;
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s does not exist", digest);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_blob_expanded_size(struct store *st, const char *digest, uint64_t *out,
                                      struct mg_error *err)
{
    static const char sql[] = "SELECT b.size, b.files, "
                              "(SELECT COALESCE(SUM(f.size), 0) FROM blob_files f "
                              "WHERE f.digest = b.digest) FROM blobs b WHERE b.digest = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    *out = 0;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *out = (uint64_t)db_col_i64(s, db_col_null(s, 1) ? 0 : 2);
        rc = MG_OK;
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s does not exist", digest);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_blob_read_open(struct store *st, const char *digest, uint64_t off, uint64_t len,
                                  struct blob_reader **out, struct mg_error *err)
{
    return blob_read_open(st->blobs, digest, off, len, out, err);
}

enum mg_code store_blob_open(struct store *st, const char *digest, int *fd, uint64_t *size,
                             struct mg_error *err)
{
    json_t *b = NULL;
    struct blob_reader *r = NULL;
    uint64_t n, off;
    int f;

    if (store_blob_get(st, digest, &b, err) != MG_OK)
        return err->code;
    n = (uint64_t)json_integer_value(json_object_get(b, "size"));
    json_decref(b);
    if (!blob_can(st->blobs, BLOB_CAN_SENDFILE)) /* no GET started only to be dropped */
        return mg_fail(err, MG_EINVAL, NULL, "the %s hands out no file descriptors",
                       blob_describe(st->blobs));
    if (blob_read_open(st->blobs, digest, 0, n, &r, err) != MG_OK)
        return err->code;
    f = blob_reader_take_fd(r, &off);
    blob_reader_close(&r);
    if (f < 0)
        return mg_fail(err, MG_EINVAL, NULL, "the %s hands out no file descriptors",
                       blob_describe(st->blobs));
    *fd = f;
    *size = n;
    return MG_OK;
}

static enum mg_code fd_sink(void *arg, const void *data, size_t n, struct mg_error *err)
{
    return mg_write_all(*(int *)arg, data, n, "the blob copy", err);
}

/*
 * Copy a blob into fd (a local file), checking it against its digest as it goes.
 * MG_EIO on a mismatch: the stored bytes were altered.
 */
enum mg_code store_blob_copy_to_fd(struct store *st, const char *digest, uint64_t size, int fd,
                                   struct mg_error *err)
{
    return blob_stream(st->blobs, digest, size, true, fd_sink, &fd, err);
}

enum mg_code store_blob_materialize(struct store *st, const char *digest, const char *dest,
                                    const char *single_name, struct mg_error *err)
{
    json_t *meta = NULL;
    char path[PATH_MAX], out[PATH_MAX];
    const char *media;
    uint64_t size;
    int fd = -1;
    enum mg_code rc;
    bool archive, local = false;

    if ((rc = store_blob_get(st, digest, &meta, err)) != MG_OK)
        return rc;
    media = json_string_value(json_object_get(meta, "media_type"));
    size = (uint64_t)json_integer_value(json_object_get(meta, "size"));
    archive = !json_is_null(json_object_get(meta, "files"));
    if (!archive) {
        /* A single file: copied (and checked) straight into dest. */
        snprintf(out, sizeof(out), "%.3000s/%.200s", dest, single_name);
        fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            rc = mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", out, strerror(errno));
        else
            rc = store_blob_copy_to_fd(st, digest, size, fd, err);
        goto out;
    }
    if (!blob_local_path(st->blobs, digest, path, sizeof(path))) {
        /* No local file (a remote backend): fetched (and checked) into one first. */
        snprintf(path, sizeof(path), "%s/materialize-XXXXXX", st->tmp_dir);
        if ((fd = mkostemp(path, O_CLOEXEC)) < 0) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", path, strerror(errno));
            goto out;
        }
        local = true;
        if ((rc = store_blob_copy_to_fd(st, digest, size, fd, err)) != MG_OK)
            goto out;
    }
    rc = store_archive_extract(path, media, dest, &st->archive, NULL, err);
out:
    if (fd >= 0)
        close(fd);
    if (local)
        unlink(path);
    json_decref(meta);
    return rc;
}

enum mg_code store_blob_claim(struct store *st, const char *digest, const char *const *teams,
                              size_t nteams, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO blob_teams (digest, team) VALUES (?, ?) ON CONFLICT DO NOTHING";
    struct db_conn *c;
    enum mg_code rc = MG_OK;
    size_t i;

    if (nteams == 0)
        return MG_OK;
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    for (i = 0; i < nteams && rc == MG_OK; i++) {
        struct db_stmt *s = db_prepare(c, sql);

        db_bind_text(s, 1, digest);
        db_bind_text(s, 2, teams[i]);
        rc = db_exec(s, err);
    }
    return store_write_end(st, c, rc, err);
}

enum mg_code store_blob_holders(struct store *st, const char *digest, json_t **out,
                                struct mg_error *err)
{
    static const char sql_blob[] = "SELECT released FROM blobs WHERE digest = ? AND state = 'live'";
    static const char sql_teams[] = "SELECT team FROM blob_teams WHERE digest = ? ORDER BY team";
    static const char sql_citers[] =
        "SELECT DISTINCT m.owners FROM versions v JOIN models m ON m.id = v.model_id "
        "WHERE v.artifact = ? AND v.status <> 'deleted'";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s = db_prepare(c, sql_blob);
    json_t *teams = json_array(), *citers = json_array();
    bool row, released = false;
    enum mg_code rc;

    *out = NULL;
    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s does not exist", digest);
        goto out;
    }
    released = db_col_i64(s, 0) != 0;
    db_reset(s);
    s = db_prepare(c, sql_teams);
    db_bind_text(s, 1, digest);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(teams, store_col_json_string(s, 0));
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_citers);
    db_bind_text(s, 1, digest);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(citers, store_col_json(s, 0));
    if (rc != MG_OK)
        goto out;
    *out = json_pack("{s:O, s:O, s:b}", "uploaders", teams, "citers", citers, "released", released);
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(teams);
    json_decref(citers);
    store_read_end(st, c);
    return rc;
}
