/*
 * fuzz_archive.c - archive inspection of uploaded blobs (artifact/archive.h):
 * store_media_type_detect(), store_archive_inspect() and, on the same bytes,
 * store_archive_extract(), with libarchive underneath (tar, gzip, zstd, xz,
 * zip and the zip central-directory walk in archive.c).
 *
 * Input: the blob's bytes. They are written to one fixed file per fuzzing
 * process (rewritten for every input) because the store inspects files, not
 * buffers, as an upload does after it is fsynced. Extraction goes to a fresh
 * directory next to it, removed after every input. Caps are small (8 MiB,
 * 4096 entries) so a decompression bomb costs milliseconds, not the run.
 *
 * Checked besides memory safety:
 * - inspect's manifest is sorted, without duplicates, and every path is
 *   relative and normalised (no leading '/', no "." or ".." component, no
 *   "//", no trailing '/');
 * - not an archive: an empty manifest;
 * - inspect accepted an archive: extraction succeeds and writes exactly the
 *   files of the manifest, with the same sizes and SHA-256 (the signed
 *   manifest is what the smoke runner gets), and nothing that is not a
 *   regular file or a directory;
 * - inspect refused it: extraction refuses it too, and leaves the
 *   destination empty, as archive.h promises.
 */
#include "fuzz.h"

#include <fcntl.h>

#include "base/util.h"
#include "artifact/archive.h"

static char blob_path[PATH_MAX], dest_path[PATH_MAX]; /* harness context */
static struct store_archive_limits limits;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = fuzz_scratch("archive");

    (void)argc;
    (void)argv;
    if (snprintf(blob_path, sizeof(blob_path), "%s/blob", dir) >= (int)sizeof(blob_path) ||
        snprintf(dest_path, sizeof(dest_path), "%s/x", dir) >= (int)sizeof(dest_path))
        abort(); /* TMPDIR too long */
    limits.max_total_bytes = 8u << 20;
    limits.max_entries = 4096;
    limits.max_path_len = 1024;
    return 0;
}

static void write_blob(const uint8_t *data, size_t size)
{
    int fd = open(blob_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t off = 0;

    FUZZ_CHECK(fd >= 0, "cannot open %s: %s", blob_path, strerror(errno));
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        FUZZ_CHECK(n > 0, "cannot write %s: %s", blob_path, strerror(errno));
        off += (size_t)n;
    }
    close(fd);
}

static void check_manifest_shape(const struct store_archive_manifest *m)
{
    size_t i;

    for (i = 0; i < m->n; i++) {
        const char *p = m->files[i].path;
        size_t n = strlen(p);
        FUZZ_CHECK(n > 0 && p[0] != '/' && p[n - 1] != '/', "path '%s'", p);
        FUZZ_CHECK(strstr(p, "//") == NULL, "path '%s' has //", p);
        FUZZ_CHECK(strcmp(p, ".") != 0 && strcmp(p, "..") != 0 && strncmp(p, "./", 2) != 0 &&
                       strncmp(p, "../", 3) != 0 && strstr(p, "/./") == NULL &&
                       strstr(p, "/../") == NULL && !(n >= 2 && strcmp(p + n - 2, "/.") == 0) &&
                       !(n >= 3 && strcmp(p + n - 3, "/..") == 0),
                   "path '%s' has a . or .. component", p);
        FUZZ_CHECK(strlen(m->files[i].sha256) == 64, "path '%s' digest '%s'", p,
                   m->files[i].sha256);
        if (i > 0)
            FUZZ_CHECK(strcmp(m->files[i - 1].path, p) < 0, "'%s' then '%s': unsorted or twice",
                       m->files[i - 1].path, p);
    }
}

static size_t tree_files, tree_dirs, tree_other; /* nftw has no user argument */

static int count_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    if (ftw->level == 0)
        return 0; /* dest itself */
    if (flag == FTW_F && S_ISREG(st->st_mode))
        tree_files++;
    else if (flag == FTW_D)
        tree_dirs++;
    else
        tree_other++;
    return 0;
}

/* What is inside dest: regular files, directories, anything else. */
static void count_tree(size_t *files, size_t *dirs, size_t *other)
{
    tree_files = tree_dirs = tree_other = 0;
    nftw(dest_path, count_one, 16, FTW_PHYS);
    *files = tree_files;
    *dirs = tree_dirs;
    *other = tree_other;
}

static void check_extracted(const struct store_archive_manifest *seen,
                            const struct store_archive_manifest *got)
{
    char path[PATH_MAX * 2];
    struct stat st;
    size_t i, files, dirs, other;

    FUZZ_CHECK(seen->n == got->n, "inspect listed %zu files, extract wrote %zu", seen->n, got->n);
    for (i = 0; i < seen->n; i++) {
        FUZZ_CHECK(strcmp(seen->files[i].path, got->files[i].path) == 0 &&
                       seen->files[i].size == got->files[i].size &&
                       strcmp(seen->files[i].sha256, got->files[i].sha256) == 0,
                   "inspect '%s' (%llu bytes) vs extract '%s' (%llu bytes)", seen->files[i].path,
                   (unsigned long long)seen->files[i].size, got->files[i].path,
                   (unsigned long long)got->files[i].size);
        snprintf(path, sizeof(path), "%s/%s", dest_path, got->files[i].path);
        FUZZ_CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                       (uint64_t)st.st_size == got->files[i].size,
                   "'%s' is not on disk as a %llu-byte regular file", got->files[i].path,
                   (unsigned long long)got->files[i].size);
    }
    count_tree(&files, &dirs, &other);
    FUZZ_CHECK(files == got->n && other == 0, "%zu files and %zu others on disk, manifest has %zu",
               files, other, got->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct store_archive_manifest seen = {NULL, 0}, got = {NULL, 0};
    struct mg_error err, xerr;
    const char *media;
    bool is_archive = false, archive_type;
    enum mg_code rc, xrc;
    size_t files, dirs, other;

    media = store_media_type_detect(data, size);
    FUZZ_CHECK(media != NULL, "no media type");
    archive_type = strcmp(media, "application/octet-stream") != 0;
    write_blob(data, size);

    memset(&err, 0, sizeof(err));
    rc = store_archive_inspect(blob_path, media, &limits, &seen, &is_archive, &err);
    FUZZ_CHECK(rc == MG_OK || rc == MG_EINVAL, "inspect returned %d: %s", (int)rc, err.message);
    if (rc != MG_OK)
        FUZZ_CHECK(seen.n == 0 && seen.files == NULL && err.message[0] != '\0',
                   "refused (%s) but the manifest was filled or no message", err.message);
    else if (!is_archive)
        FUZZ_CHECK(seen.n == 0, "not an archive but %zu files", seen.n);
    else
        check_manifest_shape(&seen);

    if (archive_type) {
        FUZZ_CHECK(mkdir(dest_path, 0700) == 0, "mkdir %s: %s", dest_path, strerror(errno));
        memset(&xerr, 0, sizeof(xerr));
        xrc = store_archive_extract(blob_path, media, dest_path, &limits, &got, &xerr);
        if (rc == MG_OK && is_archive) {
            FUZZ_CHECK(xrc == MG_OK, "inspect accepted %zu files; extract refused: %s", seen.n,
                       xerr.message);
            check_extracted(&seen, &got);
        } else {
            FUZZ_CHECK(xrc != MG_OK, "inspect %s (%s); extract accepted %zu files",
                       rc == MG_OK ? "saw no archive" : "refused", err.message, got.n);
            FUZZ_CHECK(got.n == 0 && got.files == NULL, "refused but the manifest was filled");
            count_tree(&files, &dirs, &other);
            FUZZ_CHECK(files == 0 && dirs == 0 && other == 0,
                       "a refused extraction left %zu files, %zu directories, %zu others", files,
                       dirs, other);
        }
        store_archive_manifest_release(&got);
        fuzz_rmtree(dest_path);
    }
    store_archive_manifest_release(&seen);
    return 0;
}
