/*
 * blobs.c - content-addressed blob files.
 *
 * An upload streams into <data>/blobs/tmp/upload-XXXXXX while SHA-256 is
 * computed. Past the first HASH_THREAD_AFTER bytes the hash runs on a thread
 * of the upload's own, fed through a small ring of copied chunks, so hashing
 * and the socket-to-disk copy overlap instead of adding up (each is about
 * half of an upload's CPU time); the ring is bounded, so a slow hasher holds
 * the writer back rather than buffering. Commit: fsync the file, check the
 * digest, inspect archives, rename to blobs/sha256/<2 hex>/<hex>, fsync both
 * directories, and only then insert the row. A crash at any point leaves
 * either no row, or a row whose file is complete; stray temp files are swept
 * by store_open().
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "../common/util.h"

#define HASH_CHUNK (256u << 10)
#define HASH_CHUNKS 4
#define HASH_THREAD_AFTER (1u << 20) /* small uploads hash inline */
#define HASH_THREADS_MAX 16          /* uploads hashed on a thread at once (memory bound) */

/* Chunks [tail, tail + count) of the ring are full and the hasher's (it
 * hashes the one at tail); the writer fills chunk (tail + count) % N. */
struct hasher {
    _Atomic int *nthreads; /* the store's count of running hashers */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* any change of count, done, stop */
    uint8_t *buf[HASH_CHUNKS];
    size_t len[HASH_CHUNKS];
    unsigned tail, count;
    bool done; /* the writer has handed over its last chunk */
    bool stop; /* abort: leave the rest unhashed */
    EVP_MD_CTX *md;
    bool failed;
};

struct store_blob_upload {
    struct store *st;
    int fd;
    char path[PATH_MAX];
    EVP_MD_CTX *md;
    struct hasher *h; /* NULL: hashing inline */
    bool inline_only; /* the hasher could not start: never try again */
    uint64_t size;
    uint64_t max;
    uint8_t head[512]; /* first bytes, for media type detection */
    size_t head_len;
};

static void *hasher_main(void *arg)
{
    struct hasher *h = arg;
    unsigned i;

    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->count == 0 && !h->done && !h->stop)
            pthread_cond_wait(&h->cond, &h->lock);
        if (h->stop || h->count == 0)
            break;
        i = h->tail;
        pthread_mutex_unlock(&h->lock);
        if (!h->failed && EVP_DigestUpdate(h->md, h->buf[i], h->len[i]) != 1)
            h->failed = true;
        pthread_mutex_lock(&h->lock);
        h->len[i] = 0;
        h->tail = (h->tail + 1) % HASH_CHUNKS;
        h->count--;
        pthread_cond_broadcast(&h->cond);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void hasher_free(struct hasher *h)
{
    unsigned i;

    for (i = 0; i < HASH_CHUNKS; i++)
        free(h->buf[i]);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
    atomic_fetch_sub(h->nthreads, 1);
    free(h);
}

/* Start the hasher on up->md; false (hash inline) when it cannot start. */
static bool hasher_start(struct store_blob_upload *up)
{
    struct hasher *h;
    unsigned i;

    if (atomic_fetch_add(&up->st->hash_threads, 1) >= HASH_THREADS_MAX) {
        atomic_fetch_sub(&up->st->hash_threads, 1);
        return false;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        atomic_fetch_sub(&up->st->hash_threads, 1);
        return false;
    }
    h->nthreads = &up->st->hash_threads;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    for (i = 0; i < HASH_CHUNKS; i++) {
        if ((h->buf[i] = malloc(HASH_CHUNK)) == NULL) {
            hasher_free(h);
            return false;
        }
    }
    h->md = up->md;
    if (pthread_create(&h->thread, NULL, hasher_main, h) != 0) {
        hasher_free(h);
        return false;
    }
    up->h = h;
    return true;
}

/* Copy p into the ring, waiting for a free chunk when all are full. */
static void hasher_feed(struct hasher *h, const uint8_t *p, size_t n)
{
    while (n > 0) {
        unsigned i;
        size_t k;

        pthread_mutex_lock(&h->lock);
        while (h->count == HASH_CHUNKS)
            pthread_cond_wait(&h->cond, &h->lock);
        i = (h->tail + h->count) % HASH_CHUNKS;
        pthread_mutex_unlock(&h->lock);
        /* Chunk i is the writer's alone until count covers it. */
        k = HASH_CHUNK - h->len[i];
        if (k > n)
            k = n;
        memcpy(h->buf[i] + h->len[i], p, k);
        h->len[i] += k;
        p += k;
        n -= k;
        if (h->len[i] == HASH_CHUNK) {
            pthread_mutex_lock(&h->lock);
            h->count++;
            pthread_cond_broadcast(&h->cond);
            pthread_mutex_unlock(&h->lock);
        }
    }
}

/* Hand over the last (partial) chunk, or give up (stop), and wait for the
 * hasher to end. True when everything fed was hashed. */
static bool hasher_finish(struct store_blob_upload *up, bool stop)
{
    struct hasher *h = up->h;
    bool ok;
    unsigned i;

    pthread_mutex_lock(&h->lock);
    if (!stop && h->count < HASH_CHUNKS) {
        i = (h->tail + h->count) % HASH_CHUNKS;
        if (h->len[i] > 0)
            h->count++;
    }
    h->done = true;
    h->stop = stop;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    ok = !stop && !h->failed && h->count == 0;
    hasher_free(h);
    up->h = NULL;
    return ok;
}

void store_blob_path(const struct store *st, const char *digest, char *out, size_t outsz)
{
    const char *hex = digest + 7; /* after "sha256:" */

    snprintf(out, outsz, "%s/%.2s/%s", st->blob_dir, hex, hex);
}

enum mg_code store_blob_upload_begin(struct store *st, uint64_t max_bytes,
                                     struct store_blob_upload **out, struct mg_error *err)
{
    struct store_blob_upload *up = calloc(1, sizeof(*up));

    if (up == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    up->st = st;
    up->max = max_bytes;
    snprintf(up->path, sizeof(up->path), "%s/upload-XXXXXX", st->tmp_dir);
    up->fd = mkostemp(up->path, O_CLOEXEC);
    if (up->fd < 0) {
        enum mg_code code = errno == ENOSPC ? MG_ENOSPC : MG_EIO;
        mg_fail(err, code, NULL, "cannot create an upload file: %s", strerror(errno));
        free(up);
        return code;
    }
    up->md = EVP_MD_CTX_new();
    if (up->md == NULL || EVP_DigestInit_ex(up->md, EVP_sha256(), NULL) != 1) {
        store_blob_upload_abort(&up);
        return mg_fail(err, MG_ENOMEM, NULL, "cannot start SHA-256");
    }
    *out = up;
    return MG_OK;
}

static enum mg_code write_all(int fd, const uint8_t *p, size_t n, struct mg_error *err)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
                return mg_fail(err, MG_ENOSPC, NULL,
                               "the server ran out of disk space while storing the upload");
            return mg_fail(err, MG_EIO, NULL, "cannot write the upload: %s", strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return MG_OK;
}

enum mg_code store_blob_upload_write(struct store_blob_upload *up, const void *p, size_t n,
                                     struct mg_error *err)
{
    if (n > up->max || up->size > up->max - n)
        return mg_fail(err, MG_ETOOBIG, NULL,
                       "the blob is larger than the server's limit of %llu bytes",
                       (unsigned long long)up->max);
    if (up->head_len < sizeof(up->head)) {
        size_t k = sizeof(up->head) - up->head_len;
        if (k > n)
            k = n;
        memcpy(up->head + up->head_len, p, k);
        up->head_len += k;
    }
    if (write_all(up->fd, p, n, err) != MG_OK)
        return err->code;
    if (up->h == NULL && !up->inline_only && up->size + n > HASH_THREAD_AFTER)
        up->inline_only = !hasher_start(up);
    if (up->h)
        hasher_feed(up->h, p, n);
    else if (EVP_DigestUpdate(up->md, p, n) != 1)
        return mg_fail(err, MG_EIO, NULL, "SHA-256 update failed");
    up->size += n;
    return MG_OK;
}

void store_blob_upload_abort(struct store_blob_upload **upp)
{
    struct store_blob_upload *up = *upp;

    if (up == NULL)
        return;
    if (up->h)
        hasher_finish(up, true);
    if (up->fd >= 0) {
        close(up->fd);
        unlink(up->path);
    }
    EVP_MD_CTX_free(up->md);
    free(up);
    *upp = NULL;
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

static json_t *blob_json(const char *digest, uint64_t size, const char *media, int64_t files,
                         json_t *formats)
{
    return json_pack("{s:s, s:I, s:s, s:o, s:o}", "digest", digest, "size", (json_int_t)size,
                     "media_type", media, "files", files >= 0 ? json_integer(files) : json_null(),
                     "formats", formats ? formats : json_array());
}

static enum mg_code blob_insert(struct store *st, const char *actor, const char *digest,
                                uint64_t size, const char *media,
                                const struct store_archive_manifest *m, bool is_archive,
                                const json_t *formats, const json_t *intro, bool *created,
                                struct mg_error *err)
{
    static const char sql_blob[] = "INSERT INTO blobs (digest, size, media_type, files, "
                                   "created_at, created_by, formats, introspection) "
                                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                                   "ON CONFLICT (digest) DO NOTHING";
    static const char sql_file[] =
        "INSERT INTO blob_files (digest, path, size, sha256) VALUES (?, ?, ?, ?)";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32];
    enum mg_code rc = MG_OK;
    size_t i;
    json_t *detail;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql_blob);
    store_now(at);
    db_bind_text(s, 1, digest);
    db_bind_i64(s, 2, (int64_t)size);
    db_bind_text(s, 3, media);
    if (is_archive)
        db_bind_i64(s, 4, (int64_t)m->n);
    db_bind_text(s, 5, at);
    db_bind_text(s, 6, actor);
    if ((rc = store_bind_introspection(s, 7, formats, intro, err)) != MG_OK ||
        (rc = db_exec(s, err)) != MG_OK)
        goto out;
    *created = db_changes(s) > 0;
    if (!*created)
        goto out; /* a concurrent upload of the same bytes won */
    for (i = 0; is_archive && i < m->n; i++) {
        s = db_prepare(c, sql_file);
        db_bind_text(s, 1, digest);
        db_bind_text(s, 2, m->files[i].path);
        db_bind_i64(s, 3, (int64_t)m->files[i].size);
        db_bind_text(s, 4, m->files[i].sha256);
        if ((rc = db_exec(s, err)) != MG_OK)
            goto out;
    }
    detail = json_pack("{s:I, s:s}", "size", (json_int_t)size, "media_type", media);
    rc = store_audit_append(c, actor, "blob.create", digest, detail, err);
    json_decref(detail);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_blob_upload_commit(struct store_blob_upload **upp, const char *actor,
                                      const char *expected, json_t **blob, bool *created,
                                      struct mg_error *err)
{
    struct store_blob_upload *up = *upp;
    struct store *st = up->st;
    struct store_archive_manifest m = {0};
    json_t *formats = NULL, *intro = NULL;
    unsigned char md[32];
    unsigned mdlen = 0;
    char digest[72], final[PATH_MAX], dir[PATH_MAX];
    const char *media;
    bool is_archive = false;
    enum mg_code rc;
    json_t *existing = NULL;

    memcpy(digest, "sha256:", 7);
    if ((up->h && !hasher_finish(up, false)) || EVP_DigestFinal_ex(up->md, md, &mdlen) != 1 ||
        mdlen != 32) {
        rc = mg_fail(err, MG_EIO, NULL, "SHA-256 failed");
        goto out;
    }
    mg_hex_encode(md, 32, digest + 7);
    if (expected && strcmp(expected, digest) != 0) {
        rc = mg_fail(err, MG_EDIGEST, NULL,
                     "the body hashes to %s but X-Content-Digest says %s; nothing was stored",
                     digest, expected);
        goto out;
    }
    /* Already stored: idempotent, the temp file goes. */
    if (store_blob_get(st, digest, &existing, NULL) == MG_OK) {
        *blob = existing;
        *created = false;
        rc = MG_OK;
        json_object_del(existing, "created_at");
        json_object_del(existing, "created_by");
        goto out;
    }
    if (fsync(up->fd) != 0) {
        rc = mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL, "cannot fsync the upload: %s",
                     strerror(errno));
        goto out;
    }
    media = store_media_type_detect(up->head, up->head_len);
    rc = store_archive_inspect(up->path, media, &st->archive, &m, &is_archive, err);
    if (rc != MG_OK)
        goto out;
    /* The weight headers (safetensors, GGUF, ONNX) of the blob or its archive members. */
    rc = art_introspect(up->path, media, is_archive ? &m : NULL, NULL, &formats, &intro, err);
    if (rc != MG_OK)
        goto out;

    snprintf(dir, sizeof(dir), "%s/%.2s", st->blob_dir, digest + 7);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", dir, strerror(errno));
        goto out;
    }
    store_blob_path(st, digest, final, sizeof(final));
    if (rename(up->path, final) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot move the upload into place: %s", strerror(errno));
        goto out;
    }
    close(up->fd);
    up->fd = -1;
    if ((rc = fsync_dir(dir, err)) != MG_OK || (rc = fsync_dir(st->tmp_dir, err)) != MG_OK ||
        (rc = fsync_dir(st->blob_dir, err)) != MG_OK)
        goto out;
    rc = blob_insert(st, actor, digest, up->size, media, &m, is_archive, formats, intro, created,
                     err);
    if (rc == MG_OK) {
        *blob = blob_json(digest, up->size, media, is_archive ? (int64_t)m.n : -1,
                          json_incref(formats));
        if (*blob == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    /* On failure the renamed file stays: same bytes under the same name, and a
     * retry of the upload simply commits the row. */
out:
    store_archive_manifest_release(&m);
    json_decref(formats);
    json_decref(intro);
    store_blob_upload_abort(upp);
    return rc;
}

enum mg_code store_blob_get(struct store *st, const char *digest, json_t **out,
                            struct mg_error *err)
{
    static const char sql[] = "SELECT size, media_type, files, created_at, created_by, formats "
                              "FROM blobs WHERE digest = ?";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    s = db_prepare(c, sql);
    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        int64_t files = db_col_null(s, 2) ? -1 : db_col_i64(s, 2);
        *out = blob_json(digest, (uint64_t)db_col_i64(s, 0), db_col_text(s, 1), files,
                         db_col_null(s, 5) ? NULL : store_col_json(s, 5));
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
    struct db_conn *c = store_read_begin(st);
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

enum mg_code store_blob_open(struct store *st, const char *digest, int *fd, uint64_t *size,
                             struct mg_error *err)
{
    json_t *b = NULL;
    char path[PATH_MAX];
    struct stat sb;
    int f;

    if (store_blob_get(st, digest, &b, err) != MG_OK)
        return err->code;
    json_decref(b);
    store_blob_path(st, digest, path, sizeof(path));
    f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0 || fstat(f, &sb) != 0) {
        if (f >= 0)
            close(f);
        return mg_fail(err, MG_EIO, NULL, "blob %s is recorded but its file is unreadable", digest);
    }
    *fd = f;
    *size = (uint64_t)sb.st_size;
    return MG_OK;
}

enum mg_code store_blob_materialize(struct store *st, const char *digest, const char *dest,
                                    const char *single_name, struct mg_error *err)
{
    json_t *meta = NULL;
    char path[PATH_MAX], out[PATH_MAX], hex[65];
    const char *media;
    unsigned char md[32], buf[65536];
    unsigned mdlen = 0;
    EVP_MD_CTX *ctx = NULL;
    int in = -1, fd = -1;
    ssize_t r;
    enum mg_code rc;

    if ((rc = store_blob_get(st, digest, &meta, err)) != MG_OK)
        return rc;
    media = json_string_value(json_object_get(meta, "media_type"));
    store_blob_path(st, digest, path, sizeof(path));
    if (!json_is_null(json_object_get(meta, "files"))) {
        rc = store_archive_extract(path, media, dest, &st->archive, NULL, err);
        goto out;
    }
    snprintf(out, sizeof(out), "%.3000s/%.200s", dest, single_name);
    in = open(path, O_RDONLY | O_CLOEXEC);
    fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    ctx = EVP_MD_CTX_new();
    if (in < 0 || fd < 0 || ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot copy blob %s: %s", digest, strerror(errno));
        goto out;
    }
    while ((r = read(in, buf, sizeof(buf))) > 0) {
        if (EVP_DigestUpdate(ctx, buf, (size_t)r) != 1 ||
            write_all(fd, buf, (size_t)r, err) != MG_OK) {
            rc = err->code != MG_OK ? err->code : MG_EIO;
            goto out;
        }
    }
    if (r < 0 || EVP_DigestFinal_ex(ctx, md, &mdlen) != 1) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot read blob %s", digest);
        goto out;
    }
    mg_hex_encode(md, 32, hex);
    if (strcmp(hex, digest + 7) != 0)
        rc = mg_fail(err, MG_EIO, NULL, "blob %s no longer matches its digest on disk", digest);
out:
    EVP_MD_CTX_free(ctx);
    if (in >= 0)
        close(in);
    if (fd >= 0)
        close(fd);
    json_decref(meta);
    return rc;
}
