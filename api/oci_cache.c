/*
 * oci_cache.c - the files behind per-file OCI layers; see oci_cache.h.
 */
#include "oci_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "../base/util.h"
#include "../http/http.h"

struct srv_oci_cache {
    char dir[PATH_MAX];
    uint64_t cap;
    pthread_mutex_t lock; /* one fill at a time */
};

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)f;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* Remove a tree; never follows symbolic links. */
static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static bool is_hex64(const char *s)
{
    size_t i;

    for (i = 0; i < 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return s[64] == '\0';
}

enum mg_code srv_oci_cache_open(const char *data_dir, uint64_t cap_bytes,
                                struct srv_oci_cache **out, struct mg_error *err)
{
    struct srv_oci_cache *c = calloc(1, sizeof(*c));
    struct dirent *de;
    DIR *d;

    *out = NULL;
    if (c == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((size_t)snprintf(c->dir, sizeof(c->dir), "%s/oci-layers", data_dir) >= sizeof(c->dir)) {
        free(c);
        return mg_fail(err, MG_EINVAL, NULL, "the data directory's path is too long");
    }
    if ((mkdir(c->dir, 0700) != 0 && errno != EEXIST) || chmod(c->dir, 0700) != 0 ||
        (d = opendir(c->dir)) == NULL) {
        mg_fail(err, MG_EIO, NULL, "cannot create the OCI layer cache %s: %s", c->dir,
                strerror(errno));
        free(c);
        return err->code;
    }
    /* What an interrupted fill left: its unpacking directories. */
    while ((de = readdir(d)) != NULL) {
        char path[PATH_MAX + 300];

        if (strncmp(de->d_name, "tmp-", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", c->dir, de->d_name);
        rm_tree(path);
    }
    closedir(d);
    c->cap = cap_bytes;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return MG_OK;
}

void srv_oci_cache_close(struct srv_oci_cache **c)
{
    if (*c == NULL)
        return;
    pthread_mutex_destroy(&(*c)->lock);
    free(*c);
    *c = NULL;
}

bool srv_oci_cache_lookup(struct srv_oci_cache *c, const char *hex, uint64_t size, int *fd)
{
    char path[PATH_MAX + 80];
    struct stat sb;
    int f;

    if (c == NULL || !is_hex64(hex))
        return false;
    snprintf(path, sizeof(path), "%s/%s", c->dir, hex);
    if ((f = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return false;
    if (fstat(f, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != size) {
        close(f);
        return false;
    }
    futimens(f, NULL); /* recently served: evicted last */
    *fd = f;
    return true;
}

/* ---- filling ----------------------------------------------------------------------------- */

/* The sha256 of an open file, as 64 hex. */
static enum mg_code fd_sha256(int fd, const char *name, char hex[65], struct mg_error *err)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1u << 20), dg[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    enum mg_code rc = MG_OK;
    ssize_t n;

    if (md == NULL || buf == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    while ((n = read(fd, buf, 1u << 20)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || EVP_DigestUpdate(md, buf, (size_t)n) != 1) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot read '%.200s' of the unpacked artifact: %s",
                         name, strerror(errno));
            goto out;
        }
    }
    if (EVP_DigestFinal_ex(md, dg, &dlen) != 1 || dlen != 32) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot hash '%.200s'", name);
        goto out;
    }
    mg_hex_encode(dg, 32, hex);
out:
    EVP_MD_CTX_free(md);
    free(buf);
    return rc;
}

/*
 * Keep one unpacked file: it must be a regular file (not a link) of the recorded size whose
 * bytes hash to the recorded digest; then it moves to <dir>/<hex>, read-only. A digest
 * already cached (the same bytes under another path, or kept before) is left as it is.
 */
static enum mg_code keep_file(struct srv_oci_cache *c, const char *tmp, const json_t *file,
                              struct mg_error *err)
{
    const char *path = json_string_value(json_object_get(file, "path"));
    const char *digest = json_string_value(json_object_get(file, "digest"));
    json_int_t size = json_integer_value(json_object_get(file, "size"));
    char from[PATH_MAX * 2], to[PATH_MAX + 80], hex[65];
    struct stat sb;
    enum mg_code rc;
    int fd;

    if (path == NULL || digest == NULL || !mg_valid_digest(digest, strlen(digest)))
        return mg_fail(err, MG_EIO, NULL, "the artifact's file manifest is malformed");
    snprintf(to, sizeof(to), "%s/%s", c->dir, digest + 7);
    if (lstat(to, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == size)
        return MG_OK;
    if ((size_t)snprintf(from, sizeof(from), "%s/%s", tmp, path) >= sizeof(from))
        return mg_fail(err, MG_EIO, NULL, "the artifact's path '%.200s' is too long", path);
    if ((fd = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat(fd, &sb) != 0 ||
        !S_ISREG(sb.st_mode) || sb.st_size != size) {
        if (fd >= 0)
            close(fd);
        return mg_fail(err, MG_EIO, NULL,
                       "the unpacked artifact has no regular file '%.200s' of %lld bytes", path,
                       (long long)size);
    }
    rc = fd_sha256(fd, path, hex, err);
    close(fd);
    if (rc != MG_OK)
        return rc;
    if (strcmp(hex, digest + 7) != 0)
        return mg_fail(err, MG_EIO, NULL,
                       "the artifact's file '%.200s' no longer matches its recorded digest %s "
                       "(the blob was altered on disk)",
                       path, digest);
    if (chmod(from, 0400) != 0 || rename(from, to) != 0)
        return mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL,
                       "cannot keep '%.200s' in the OCI layer cache: %s", path, strerror(errno));
    return MG_OK;
}

struct entry {
    char hex[65];
    uint64_t size;
    struct timespec used;
};

static int older_first(const void *a, const void *b)
{
    const struct timespec *x = &((const struct entry *)a)->used,
                          *y = &((const struct entry *)b)->used;

    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? -1 : 1;
    if (x->tv_nsec != y->tv_nsec)
        return x->tv_nsec < y->tv_nsec ? -1 : 1;
    return 0;
}

/* Remove the least recently served files until the rest fit the cap; `keep` stays. */
static void evict(struct srv_oci_cache *c, const char *keep)
{
    struct entry *e = NULL, *ne;
    size_t n = 0, cap = 0, i;
    uint64_t total = 0;
    struct dirent *de;
    struct stat sb;
    DIR *d = opendir(c->dir);

    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL) {
        if (strlen(de->d_name) != 64 || !is_hex64(de->d_name) ||
            fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        total += (uint64_t)sb.st_size;
        if (strcmp(de->d_name, keep) == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            if ((ne = realloc(e, cap * sizeof(*e))) == NULL)
                break;
            e = ne;
        }
        memcpy(e[n].hex, de->d_name, 65);
        e[n].size = (uint64_t)sb.st_size;
        e[n].used = sb.st_mtim;
        n++;
    }
    if (total > c->cap && n > 0) {
        qsort(e, n, sizeof(*e), older_first);
        for (i = 0; i < n && total > c->cap; i++) {
            if (unlinkat(dirfd(d), e[i].hex, 0) == 0)
                total -= e[i].size;
        }
    }
    closedir(d);
    free(e);
}

/* Is there room to unpack `need` bytes (plus 1% and 4 MiB) below dir? */
static enum mg_code space_check(const char *dir, uint64_t need, struct mg_error *err)
{
    struct statvfs sv;
    uint64_t avail, margin = need / 100 + ((uint64_t)4 << 20);

    if (statvfs(dir, &sv) != 0)
        return mg_fail(err, MG_EIO, NULL, "cannot check the free space of %s: %s", dir,
                       strerror(errno));
    avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    if (need <= UINT64_MAX - margin && avail >= need + margin)
        return MG_OK;
    return mg_fail(err, MG_ENOSPC, NULL,
                   "not enough disk space to unpack the artifact for its layers: it expands to "
                   "%llu bytes and %s has %llu free",
                   (unsigned long long)need, dir, (unsigned long long)avail);
}

enum mg_code srv_oci_cache_fill(struct srv *srv, const char *hex, uint64_t size,
                                const char *artifact, const json_t *files, int *fd,
                                struct mg_error *err)
{
    struct srv_oci_cache *c = srv->oci_cache;
    char tmp[PATH_MAX + 80];
    const json_t *f;
    uint64_t need = 0;
    enum mg_code rc;
    size_t i;

    if (c == NULL)
        return mg_fail(err, MG_EIO, NULL, "the OCI layer cache is not open");
    pthread_mutex_lock(&c->lock);
    /* Another request may have filled it while this one waited. */
    if (srv_oci_cache_lookup(c, hex, size, fd)) {
        rc = MG_OK;
        goto unlock;
    }
    if ((rc = store_blob_expanded_size(srv->store, artifact, &need, err)) != MG_OK ||
        (rc = space_check(c->dir, need, err)) != MG_OK)
        goto unlock;
    snprintf(tmp, sizeof(tmp), "%s/tmp-XXXXXX", c->dir);
    if (mkdtemp(tmp) == NULL) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot unpack into the OCI layer cache: %s",
                     strerror(errno));
        goto unlock;
    }
    rc = store_blob_materialize(srv->store, artifact, tmp, "artifact", err);
    json_array_foreach(json_object_get(files, "items"), i, f)
    {
        if (rc == MG_OK)
            rc = keep_file(c, tmp, f, err);
    }
    rm_tree(tmp);
    if (rc == MG_OK) {
        fprintf(stderr, "modelgated: oci: unpacked %s into the layer cache (%llu bytes)\n",
                artifact, (unsigned long long)need);
        evict(c, hex);
        if (!srv_oci_cache_lookup(c, hex, size, fd))
            rc = mg_fail(err, MG_EIO, NULL, "the artifact %s has no file with digest sha256:%s",
                         artifact, hex);
    }
unlock:
    pthread_mutex_unlock(&c->lock);
    return rc;
}
