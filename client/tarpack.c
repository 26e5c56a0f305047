/*
 * tarpack.c - directory trees for `push` and `verify`: scanning without
 * following links, and packing as a reproducible tar.
 *
 * Reproducible means the same tree gives the same bytes on any machine, at
 * any time, by any user: entries in strcmp order of their paths, pax format
 * (ustar headers, pax records only for long or non-ASCII names), mtime 0,
 * uid/gid 0 with no user or group names, modes 0755 (directories and
 * owner-executable files) or 0644, and no atime/ctime or extended attributes.
 */
#include "mgc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "../base/util.h"

#define IO_BLOCK ((size_t)1 << 20)
#define TREE_MAX_ENTRIES 1000000 /* the server's archive cap */
#define TREE_MAX_PATH 1024

/* ---- scanning ----------------------------------------------------------------------------- */

static int tree_push(struct mgc_tree *t, size_t *cap, const char *path, bool dir, bool exec,
                     uint64_t size)
{
    struct mgc_tree_entry *nv;

    if (t->n >= TREE_MAX_ENTRIES)
        return mgc_fail("the directory holds more than %d entries; pack fewer files",
                        TREE_MAX_ENTRIES);
    if (t->n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        if ((nv = realloc(t->v, *cap * sizeof(*nv))) == NULL)
            return mgc_fail("out of memory");
        t->v = nv;
    }
    t->v[t->n].path = strdup(path);
    if (t->v[t->n].path == NULL)
        return mgc_fail("out of memory");
    t->v[t->n].dir = dir;
    t->v[t->n].exec = exec;
    t->v[t->n].size = size;
    t->n++;
    return MGC_OK;
}

/* Walk directory fd (its path relative to the root is rel, "" for the root). Takes fd. */
static int scan_dir(const char *root, int fd, const char *rel, struct mgc_tree *t, size_t *cap)
{
    char path[TREE_MAX_PATH + 2];
    struct dirent *d;
    struct stat st;
    DIR *dir;
    int sub, rc = MGC_OK, n;

    dir = fdopendir(fd);
    if (dir == NULL) {
        close(fd);
        return mgc_fail("cannot read '%s/%s': %s", root, rel, strerror(errno));
    }
    while (rc == MGC_OK && (errno = 0, d = readdir(dir)) != NULL) {
        if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
            continue;
        n = snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "", d->d_name);
        if (n < 0 || (size_t)n > TREE_MAX_PATH) {
            rc = mgc_fail("'%s/%s%s%s' is longer than %d bytes; shorten it", root, rel,
                          rel[0] ? "/" : "", d->d_name, TREE_MAX_PATH);
            break;
        }
        if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = mgc_fail("cannot stat '%s/%s': %s", root, path, strerror(errno));
            break;
        }
        if (S_ISREG(st.st_mode)) {
            rc = tree_push(t, cap, path, false, (st.st_mode & S_IXUSR) != 0, (uint64_t)st.st_size);
        } else if (S_ISDIR(st.st_mode)) {
            rc = tree_push(t, cap, path, true, false, 0);
            if (rc != MGC_OK)
                break;
            sub = openat(dirfd(dir), d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                rc = mgc_fail("cannot open '%s/%s': %s", root, path, strerror(errno));
                break;
            }
            rc = scan_dir(root, sub, path, t, cap);
        } else {
            rc = mgc_fail("'%s/%s' is %s; only regular files and directories are allowed "
                          "(copy the file a link points to instead)",
                          root, path, S_ISLNK(st.st_mode) ? "a symbolic link" : "a special file");
        }
    }
    if (rc == MGC_OK && errno != 0)
        rc = mgc_fail("cannot read '%s/%s': %s", root, rel, strerror(errno));
    closedir(dir);
    return rc;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct mgc_tree_entry *)a)->path,
                  ((const struct mgc_tree_entry *)b)->path);
}

int mgc_tree_scan(const char *root, struct mgc_tree *out)
{
    size_t cap = 0;
    int fd, rc;

    memset(out, 0, sizeof(*out));
    fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return mgc_fail("cannot open the directory '%s': %s", root, strerror(errno));
    rc = scan_dir(root, fd, "", out, &cap);
    if (rc != MGC_OK) {
        mgc_tree_release(out);
        return rc;
    }
    if (out->n > 0)
        qsort(out->v, out->n, sizeof(*out->v), cmp_entry);
    return MGC_OK;
}

void mgc_tree_release(struct mgc_tree *t)
{
    size_t i;

    for (i = 0; i < t->n; i++)
        free(t->v[i].path);
    free(t->v);
    memset(t, 0, sizeof(*t));
}

/* ---- files -------------------------------------------------------------------------------- */

int mgc_temp_fd(void)
{
    const char *dir = getenv("TMPDIR");
    char path[PATH_MAX];
    int fd;

    if (dir == NULL || dir[0] == '\0')
        dir = "/tmp";
    if (snprintf(path, sizeof(path), "%s/modelgate.XXXXXX", dir) >= (int)sizeof(path)) {
        mgc_fail("TMPDIR is too long");
        return -1;
    }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        mgc_fail("cannot create a temporary file in '%s': %s", dir, strerror(errno));
        return -1;
    }
    (void)unlink(path); /* gone when closed, even if we crash */
    return fd;
}

/* ---- packing ------------------------------------------------------------------------------ */

struct pack_sink {
    int fd;
    EVP_MD_CTX *md;
    uint64_t size;
    int err;
};

static la_ssize_t pack_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    struct pack_sink *s = ud;
    const char *p = buf;
    size_t off = 0;
    ssize_t w;

    if (EVP_DigestUpdate(s->md, buf, n) != 1) {
        archive_set_error(a, EIO, "SHA-256 failed");
        return -1;
    }
    while (off < n) {
        w = write(s->fd, p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            s->err = w < 0 ? errno : EIO;
            archive_set_error(a, s->err, "cannot write the tar: %s", strerror(s->err));
            return -1;
        }
        off += (size_t)w;
    }
    s->size += n;
    return (la_ssize_t)n;
}

/* Copy one regular file's bytes into the archive; the size must not change meanwhile. */
static int pack_file(struct archive *a, const char *root, int root_fd,
                     const struct mgc_tree_entry *e, char *buf)
{
    uint64_t left = e->size;
    struct stat st;
    ssize_t r;
    int fd, rc = MGC_OK;

    fd = openat(root_fd, e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return mgc_fail("cannot open '%s/%s': %s", root, e->path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size) {
        close(fd);
        return mgc_fail("'%s/%s' changed while it was being packed; try again", root, e->path);
    }
    while (left > 0) {
        r = read(fd, buf, left < IO_BLOCK ? (size_t)left : IO_BLOCK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? mgc_fail("cannot read '%s/%s': %s", root, e->path, strerror(errno))
                       : mgc_fail("'%s/%s' shrank while it was being packed; try again", root,
                                  e->path);
            break;
        }
        if (archive_write_data(a, buf, (size_t)r) != r) {
            rc = mgc_fail("cannot write the tar: %s", archive_error_string(a));
            break;
        }
        left -= (uint64_t)r;
    }
    close(fd);
    return rc;
}

static int pack_entries(struct archive *a, const char *root, int root_fd, const struct mgc_tree *t)
{
    struct archive_entry *e = archive_entry_new();
    char *buf = malloc(IO_BLOCK);
    size_t i;
    int rc = MGC_OK;

    if (e == NULL || buf == NULL) {
        rc = mgc_fail("out of memory");
        goto out;
    }
    for (i = 0; i < t->n && rc == MGC_OK; i++) {
        const struct mgc_tree_entry *te = &t->v[i];
        archive_entry_clear(e);
        archive_entry_set_pathname(e, te->path);
        archive_entry_set_filetype(e, te->dir ? AE_IFDIR : AE_IFREG);
        archive_entry_set_perm(e, te->dir || te->exec ? 0755 : 0644);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        archive_entry_set_mtime(e, 0, 0);
        archive_entry_set_size(e, te->dir ? 0 : (la_int64_t)te->size);
        if (archive_write_header(a, e) != ARCHIVE_OK) {
            rc = mgc_fail("cannot pack '%s/%s': %s", root, te->path, archive_error_string(a));
            break;
        }
        if (!te->dir && te->size > 0)
            rc = pack_file(a, root, root_fd, te, buf);
    }
out:
    archive_entry_free(e);
    free(buf);
    return rc;
}

int mgc_tar_pack(const char *root, int fd, char sha256[65], uint64_t *size)
{
    struct pack_sink sink = {fd, NULL, 0, 0};
    struct mgc_tree t;
    struct archive *a = NULL;
    uint8_t dg[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    locale_t utf8, prev = (locale_t)0;
    int root_fd = -1, rc;

    if ((rc = mgc_tree_scan(root, &t)) != MGC_OK)
        return rc;
    rc = MGC_ERR;
    if (t.n == 0) {
        mgc_fail("'%s' is empty; nothing to push", root);
        goto out;
    }
    root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    sink.md = EVP_MD_CTX_new();
    a = archive_write_new();
    if (root_fd < 0 || sink.md == NULL || a == NULL ||
        EVP_DigestInit_ex(sink.md, EVP_sha256(), NULL) != 1) {
        mgc_fail("cannot start packing '%s': %s", root,
                 root_fd < 0 ? strerror(errno) : "no memory");
        goto out;
    }
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_add_filter_none(a) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(a, 10240) != ARCHIVE_OK ||
        archive_write_open2(a, &sink, NULL, pack_write, NULL, NULL) != ARCHIVE_OK) {
        mgc_fail("cannot start the tar: %s", archive_error_string(a));
        goto out;
    }
    /* Names are UTF-8 bytes whatever the process locale (thread-local switch). */
    utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    if (utf8 != (locale_t)0)
        prev = uselocale(utf8);
    rc = pack_entries(a, root, root_fd, &t);
    if (prev != (locale_t)0)
        uselocale(prev);
    if (utf8 != (locale_t)0)
        freelocale(utf8);
    if (rc != MGC_OK)
        goto out;
    rc = MGC_ERR;
    if (archive_write_close(a) != ARCHIVE_OK) {
        mgc_fail("cannot finish the tar: %s", archive_error_string(a));
        goto out;
    }
    if (EVP_DigestFinal_ex(sink.md, dg, &dlen) != 1 || dlen != 32) {
        mgc_fail("SHA-256 failed");
        goto out;
    }
    mg_hex_encode(dg, 32, sha256);
    *size = sink.size;
    rc = MGC_OK;
out:
    if (a != NULL)
        archive_write_free(a);
    if (root_fd >= 0)
        close(root_fd);
    EVP_MD_CTX_free(sink.md);
    mgc_tree_release(&t);
    return rc;
}
