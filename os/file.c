/*
 * file.c - see file.h.
 */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "../base/util.h"

enum mg_code mg_write_all(int fd, const void *data, size_t n, const char *what,
                          struct mg_error *err)
{
    const char *p = data;

    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return mg_fail(err, errno == ENOSPC || errno == EDQUOT ? MG_ENOSPC : MG_EIO, NULL,
                           "cannot write %s: %s", what, w < 0 ? strerror(errno) : "no progress");
        p += w;
        n -= (size_t)w;
    }
    return MG_OK;
}

enum mg_code mg_file_write_atomic(const char *path, const void *data, size_t n, mode_t mode,
                                  struct mg_error *err)
{
    char tmp[PATH_MAX], dir[PATH_MAX], base[PATH_MAX], hex[17];
    uint8_t rnd[8];
    enum mg_code rc = MG_OK;
    int fd, dfd;

    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir) ||
        snprintf(base, sizeof(base), "%s", path) >= (int)sizeof(base))
        return mg_fail(err, MG_EINVAL, NULL, "the path %.200s is too long", path);
    if (!mg_random_bytes(rnd, sizeof(rnd)))
        return mg_fail(err, MG_EIO, NULL, "the random number generator failed");
    mg_hex_encode(rnd, sizeof(rnd), hex);
    if (snprintf(tmp, sizeof(tmp), "%s/.%s.tmp-%s", dirname(dir), basename(base), hex) >=
        (int)sizeof(tmp))
        return mg_fail(err, MG_EINVAL, NULL, "the path %.200s is too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL, "cannot create %s: %s", tmp,
                       strerror(errno));
    if (fchmod(fd, mode) != 0)
        rc = mg_fail(err, MG_EIO, NULL, "cannot chmod %s: %s", tmp, strerror(errno));
    if (rc == MG_OK)
        rc = mg_write_all(fd, data, n, tmp, err);
    if (rc == MG_OK && fsync(fd) != 0)
        rc = mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL, "cannot fsync %s: %s", tmp,
                     strerror(errno));
    if (close(fd) != 0 && rc == MG_OK)
        rc = mg_fail(err, MG_EIO, NULL, "cannot close %s: %s", tmp, strerror(errno));
    if (rc == MG_OK && rename(tmp, path) != 0)
        rc = mg_fail(err, MG_EIO, NULL, "cannot replace %s: %s", path, strerror(errno));
    if (rc != MG_OK) {
        unlink(tmp);
        return rc;
    }
    /* the rename itself survives a crash only once the directory is synced */
    if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return MG_OK;
}

enum mg_code mg_file_sha256(const char *path, char hex_out[65], uint64_t *size,
                            struct mg_error *err)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1u << 20), dg[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    uint64_t total = 0;
    enum mg_code rc = MG_OK;
    ssize_t r;
    int fd = -1;

    hex_out[0] = '\0';
    if (md == NULL || buf == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        rc = mg_fail(err, errno == ENOENT ? MG_ENOTFOUND : MG_EIO, NULL, "cannot open %s: %s", path,
                     strerror(errno));
        goto out;
    }
    for (;;) {
        r = read(fd, buf, 1u << 20);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot read %s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        if (EVP_DigestUpdate(md, buf, (size_t)r) != 1) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot hash %s", path);
            goto out;
        }
        total += (uint64_t)r;
    }
    if (EVP_DigestFinal_ex(md, dg, &dlen) != 1 || dlen != 32) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot hash %s", path);
        goto out;
    }
    mg_hex_encode(dg, 32, hex_out);
    if (size)
        *size = total;
out:
    if (fd >= 0)
        close(fd);
    EVP_MD_CTX_free(md);
    free(buf);
    return rc;
}

enum mg_code mg_secret_line_read(const char *path, const char *field, char *buf, size_t cap,
                                 struct mg_error *err)
{
    struct stat sb;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0)
        return mg_fail(err, MG_EINVAL, field, "cannot read %s: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mg_fail(err, MG_EINVAL, field, "%s is not a regular file", path);
    }
    if ((sb.st_mode & 077) != 0) {
        close(fd);
        return mg_fail(err, MG_EINVAL, field,
                       "%s holds secrets but other users may read it (mode %04o); run chmod 600 "
                       "on it",
                       path, (unsigned)(sb.st_mode & 07777));
    }
    n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0 || (size_t)n >= cap - 1) {
        OPENSSL_cleanse(buf, cap);
        return MG_ETOOBIG;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return MG_OK;
}
