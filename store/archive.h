/*
 * archive.h - content sniffing and safe inspection of uploaded artifacts
 * (tar, tar.gz, tar.zst, tar.xz, zip) with libarchive.
 *
 * Inspection only reads: it never writes a file anywhere. It lists every
 * regular file with its size and SHA-256 and rejects archives that could not
 * be extracted safely (absolute paths, "..", links, devices, FIFOs, sockets,
 * duplicate paths) or that exceed the caps.
 *
 * Thread-safe: no shared state.
 */
#ifndef STORE_ARCHIVE_H
#define STORE_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/mg.h"

struct store_archive_limits {
    uint64_t max_total_bytes; /* sum of regular file sizes */
    uint64_t max_entries;     /* entries of any type */
    size_t max_path_len;      /* bytes of one entry's path */
};

/* Defaults: 256 GiB total, 1,000,000 entries, 1024-byte paths. */
void store_archive_limits_default(struct store_archive_limits *lim);

struct store_archive_file {
    char *path;      /* relative POSIX path, normalised: no leading "./", no "//" */
    uint64_t size;   /* bytes */
    char sha256[65]; /* lowercase hex */
};

struct store_archive_manifest {
    struct store_archive_file *files; /* sorted by path (strcmp order) */
    size_t n;
};

/*
 * The media type of a blob from its first bytes (at least 512 should be
 * given when available): "application/x-tar", "application/gzip",
 * "application/zip", "application/zstd", "application/x-xz" or
 * "application/octet-stream". Returns a static string.
 */
const char *store_media_type_detect(const uint8_t *head, size_t n);

/*
 * Inspect the file at `path`, whose detected media type is `media_type`.
 *
 * - A tar/zip, or a gzip/zstd/xz stream holding a tar: *is_archive = true and
 *   `out` receives the manifest of regular files (directories are allowed but
 *   not listed).
 * - Anything else (including a compressed stream that is not a tar):
 *   *is_archive = false, `out` is empty, MG_OK.
 * - An unsafe or over-cap archive: MG_EINVAL (MG_ETOOBIG is not used; caps
 *   are reported as invalid_argument) with a message naming the entry, e.g.
 *   "archive entry '../etc/passwd' escapes the archive root; remove it".
 * - An I/O failure: MG_EIO.
 *
 * On failure `out` is left empty. The caller owns `out` and releases it with
 * store_archive_manifest_release().
 */
enum mg_code store_archive_inspect(const char *path, const char *media_type,
                                   const struct store_archive_limits *lim,
                                   struct store_archive_manifest *out, bool *is_archive,
                                   struct mg_error *err);

/* Free the manifest's storage and empty it. Safe on an empty manifest. */
void store_archive_manifest_release(struct store_archive_manifest *m);

#endif
