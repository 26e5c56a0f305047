/*
 * blob.c - the blob layer's front: the table of backends (each file's vtable), the
 * pick by scheme, and dispatch through the vtables of backends and readers; plus what
 * the backends share (credentials files, URL query parameters, the fillers of slots
 * for abilities a backend lacks). It names no backend and parses no backend's URL.
 */
#include "blob_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

const struct blob_ops *const blob_backends[] = {&blob_file_ops, &blob_s3_ops, &blob_oci_ops};
const size_t blob_nbackends = sizeof(blob_backends) / sizeof(blob_backends[0]);

/* The backend whose scheme starts url, its syntax checked; NULL with err filled. */
static const struct blob_ops *backend_for(const char *url, struct mg_error *err)
{
    char forms[600] = "";
    size_t i, n = 0;

    if (url == NULL)
        return blob_backends[0];
    for (i = 0; i < blob_nbackends; i++) {
        const struct blob_ops *ops = blob_backends[i];
        if (strncmp(url, ops->scheme, strlen(ops->scheme)) == 0)
            return ops->check_url(url, err) == MG_OK ? ops : NULL;
    }
    /* "A, B or C": every backend's form */
    for (i = 0; i < blob_nbackends && n < sizeof(forms); i++)
        n += (size_t)snprintf(forms + n, sizeof(forms) - n, "%s%s",
                              i == 0                   ? ""
                              : i + 1 < blob_nbackends ? ", "
                                                       : " or ",
                              blob_backends[i]->usage);
    mg_fail(err, MG_EINVAL, "blobs", "--blobs is %s, not '%.100s'", forms, url);
    return NULL;
}

const char *blob_url_kind(const char *url, struct mg_error *err)
{
    const struct blob_ops *ops = backend_for(url, err);

    return ops ? ops->kind : NULL;
}

bool blob_query_param(const char *query, const char *key, char *out, size_t outsz)
{
    size_t kl = strlen(key);
    const char *p = query;

    while (p != NULL && *p != '\0') {
        size_t n = strcspn(p, "&");
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = n - kl - 1;
            if (vl >= outsz)
                vl = outsz - 1;
            memcpy(out, p + kl + 1, vl);
            out[vl] = '\0';
            return true;
        }
        p = p[n] == '&' ? p + n + 1 : NULL;
    }
    return false;
}

enum mg_code blob_read_credentials(const char *path, const char *what, char **first, char **second,
                                   struct mg_error *err)
{
    char buf[4096], *colon, *end;
    struct stat sb;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    *first = *second = NULL;
    if (fd < 0)
        return mg_fail(err, MG_EINVAL, "blobs-credentials", "cannot read %s: %s", path,
                       strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mg_fail(err, MG_EINVAL, "blobs-credentials", "%s is not a regular file", path);
    }
    if ((sb.st_mode & 077) != 0) {
        close(fd);
        return mg_fail(err, MG_EINVAL, "blobs-credentials",
                       "%s holds secrets but other users may read it (mode %04o); run chmod 600 "
                       "on it",
                       path, (unsigned)(sb.st_mode & 07777));
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0 || (size_t)n >= sizeof(buf) - 1) {
        OPENSSL_cleanse(buf, sizeof(buf));
        return mg_fail(err, MG_EINVAL, "blobs-credentials",
                       "%s must hold one line %s (at most 4 KiB)", path, what);
    }
    buf[n] = '\0';
    end = buf + strcspn(buf, "\r\n");
    *end = '\0';
    colon = strchr(buf, ':');
    if (colon == NULL || colon == buf || colon[1] == '\0') {
        OPENSSL_cleanse(buf, sizeof(buf));
        return mg_fail(err, MG_EINVAL, "blobs-credentials", "%s must hold one line %s", path, what);
    }
    *colon = '\0';
    *first = strdup(buf);
    *second = strdup(colon + 1);
    OPENSSL_cleanse(buf, sizeof(buf));
    if (*first == NULL || *second == NULL) {
        free(*first);
        free(*second);
        *first = *second = NULL;
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    return MG_OK;
}

enum mg_code blob_open(const struct blob_options *o, struct blob_backend **out,
                       struct mg_error *err)
{
    struct blob_backend *b;
    const struct blob_ops *ops = backend_for(o->url, err);
    enum mg_code rc;

    *out = NULL;
    if (ops == NULL)
        return err->code;
    if ((b = calloc(1, sizeof(*b))) == NULL || (b->tmp_dir = strdup(o->tmp_dir)) == NULL) {
        free(b);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    b->part_bytes = o->part_bytes ? o->part_bytes : BLOB_PART_DEFAULT;
    if (b->part_bytes < BLOB_PART_MIN)
        b->part_bytes = BLOB_PART_MIN;
    b->ops = ops;
    if ((rc = ops->open(b, o->url, o->credentials, err)) != MG_OK)
        goto fail;
    if (mkdir(b->tmp_dir, 0700) != 0 && errno != EEXIST) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot create %s: %s", b->tmp_dir, strerror(errno));
        goto fail;
    }
    *out = b;
    return MG_OK;
fail:
    blob_close(&b); /* each backend's close takes a half-made state */
    return rc;
}

void blob_close(struct blob_backend **bp)
{
    struct blob_backend *b = *bp;

    if (b == NULL)
        return;
    if (b->ops && b->impl)
        b->ops->close(b);
    free(b->tmp_dir);
    free(b);
    *bp = NULL;
}

const char *blob_kind(const struct blob_backend *b)
{
    return b->ops->kind;
}

bool blob_can(const struct blob_backend *b, enum blob_can what)
{
    return (b->ops->supports & (unsigned)what) == (unsigned)what;
}

const char *blob_describe(const struct blob_backend *b)
{
    return b->desc;
}

const char *blob_tmp_dir(const struct blob_backend *b)
{
    return b->tmp_dir;
}

bool blob_local_path(struct blob_backend *b, const char *digest, char *out, size_t outsz)
{
    return b->ops->local_path(b, digest, out, outsz);
}

bool blob_no_local_path(struct blob_backend *b, const char *digest, char *out, size_t outsz)
{
    (void)b;
    (void)digest;
    (void)out;
    (void)outsz;
    return false;
}

enum mg_code blob_check(struct blob_backend *b, struct mg_error *err)
{
    return b->ops->check(b, err);
}

enum mg_code blob_put_begin(struct blob_backend *b, const char *expected, uint64_t max_bytes,
                            struct blob_put **out, struct mg_error *err)
{
    *out = NULL;
    return b->ops->put_begin(b, expected, max_bytes, out, err);
}

enum mg_code blob_put_write(struct blob_put *p, const void *data, size_t n, struct mg_error *err)
{
    return p->b->ops->put_write(p, data, n, err);
}

const char *blob_put_handle(const struct blob_put *p)
{
    return p->handle;
}

const char *blob_put_local_path(const struct blob_put *p)
{
    return p->b->ops->put_local_path(p);
}

const char *blob_no_put_local_path(const struct blob_put *p)
{
    (void)p;
    return NULL;
}

enum mg_code blob_put_commit(struct blob_put **pp, const char *digest, struct mg_error *err)
{
    struct blob_put *p = *pp;
    enum mg_code rc = p->b->ops->put_commit(p, digest, err);

    if (rc != MG_OK)
        p->b->ops->put_abort(p);
    p->b->ops->put_free(p);
    *pp = NULL;
    return rc;
}

bool blob_put_abort(struct blob_put **pp)
{
    struct blob_put *p = *pp;
    bool ok;

    if (p == NULL)
        return true;
    ok = p->b->ops->put_abort(p);
    p->b->ops->put_free(p);
    *pp = NULL;
    return ok;
}

enum mg_code blob_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                       struct mg_error *err)
{
    return b->ops->stat(b, digest, size, err);
}

enum mg_code blob_read_open(struct blob_backend *b, const char *digest, uint64_t off, uint64_t len,
                            struct blob_reader **out, struct mg_error *err)
{
    *out = NULL;
    return b->ops->read_open(b, digest, off, len, out, err);
}

int blob_reader_take_fd(struct blob_reader *r, uint64_t *offset)
{
    return r->ops->take_fd(r, offset);
}

enum mg_code blob_reader_read(struct blob_reader *r, void *buf, size_t n, size_t *got,
                              bool *would_block, void (*wake)(void *arg), void *arg,
                              struct mg_error *err)
{
    *got = 0;
    *would_block = false;
    return r->ops->read(r, buf, n, got, would_block, wake, arg, err);
}

void blob_reader_close(struct blob_reader **rp)
{
    struct blob_reader *r = *rp;

    if (r == NULL)
        return;
    r->ops->close(r);
    *rp = NULL;
}

enum mg_code blob_presign(struct blob_backend *b, const char *digest, unsigned ttl_s, char **url,
                          struct mg_error *err)
{
    *url = NULL;
    return b->ops->presign(b, digest, ttl_s, url, err);
}

enum mg_code blob_no_presign(struct blob_backend *b, const char *digest, unsigned ttl_s, char **url,
                             struct mg_error *err)
{
    (void)digest;
    (void)ttl_s;
    *url = NULL;
    return mg_fail(err, MG_EINVAL, "blob-downloads",
                   "--blob-downloads redirect needs an s3:// blob backend, not %s", b->ops->kind);
}

enum mg_code blob_delete(struct blob_backend *b, const char *digest, struct mg_error *err)
{
    return b->ops->del(b, digest, err);
}

enum mg_code blob_list(struct blob_backend *b,
                       bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                       struct mg_error *err)
{
    return b->ops->list(b, cb, arg, err);
}

enum mg_code blob_orphans(struct blob_backend *b,
                          bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                          struct mg_error *err)
{
    return b->ops->orphans(b, cb, arg, err);
}

enum mg_code blob_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err)
{
    return b->ops->reclaim(b, handle, err);
}

enum mg_code blob_stream(struct blob_backend *b, const char *digest, uint64_t size, bool check,
                         enum mg_code (*sink)(void *arg, const void *data, size_t n,
                                              struct mg_error *err),
                         void *arg, struct mg_error *err)
{
    struct blob_reader *r = NULL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    uint8_t *buf = malloc(1u << 20), md[32];
    unsigned mdlen = 0;
    uint64_t total = 0;
    char hex[65];
    enum mg_code rc;

    if (ctx == NULL || buf == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = blob_read_open(b, digest, 0, size, &r, err)) != MG_OK)
        goto out;
    for (;;) {
        size_t got = 0;
        bool wb;

        if ((rc = blob_reader_read(r, buf, 1u << 20, &got, &wb, NULL, NULL, err)) != MG_OK)
            goto out;
        if (got == 0)
            break;
        total += got;
        if (total > size || EVP_DigestUpdate(ctx, buf, got) != 1)
            break;
        if ((rc = sink(arg, buf, got, err)) != MG_OK)
            goto out;
    }
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32) {
        rc = mg_fail(err, MG_EIO, NULL, "SHA-256 failed");
        goto out;
    }
    mg_hex_encode(md, 32, hex);
    if (total != size || (check && strcmp(hex, digest + 7) != 0))
        rc = mg_fail(err, MG_EIO, NULL, "blob %s in the %s does not match its digest", digest,
                     b->desc);
out:
    blob_reader_close(&r);
    EVP_MD_CTX_free(ctx);
    free(buf);
    return rc;
}

static enum mg_code put_sink(void *arg, const void *data, size_t n, struct mg_error *err)
{
    return blob_put_write(arg, data, n, err);
}

enum mg_code blob_copy(struct blob_backend *from, struct blob_backend *to, const char *digest,
                       uint64_t size, struct mg_error *err)
{
    struct blob_put *p = NULL;
    enum mg_code rc;

    if ((rc = blob_put_begin(to, digest, size, &p, err)) == MG_OK &&
        (rc = blob_stream(from, digest, size, true, put_sink, p, err)) == MG_OK)
        rc = blob_put_commit(&p, digest, err);
    blob_put_abort(&p);
    return rc;
}
