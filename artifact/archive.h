/*
 * archive.h - content sniffing and safe inspection of uploaded artifacts
 * (tar, tar.gz, tar.zst, tar.xz, zip) with libarchive.
 *
 * Inspection only reads: it never writes a file anywhere. It lists every
 * regular file with its size and SHA-256 and rejects archives that could not
 * be extracted safely (absolute paths, "..", links, devices, FIFOs, sockets,
 * duplicate paths) or that exceed the caps. Extraction applies the same rules
 * while it writes.
 *
 * Thread-safe: no shared state, no globals, no chdir(); every descriptor is
 * opened O_CLOEXEC, so a thread that forks (the smoke runner) leaks none.
 */
#ifndef STORE_ARCHIVE_H
#define STORE_ARCHIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/mg.h"

/*
 * Running totals over every inspection and extraction given the same
 * counters (atomic updates: share one between threads).
 */
struct store_archive_counters {
    uint64_t expanded_bytes; /* file bytes produced, sparse holes included */
    uint64_t ratio_refusals; /* archives refused by the expansion ratio cap */
};

struct store_archive_limits {
    uint64_t max_total_bytes; /* sum of regular file sizes */
    uint64_t max_entries;     /* entries of any type */
    size_t max_path_len;      /* bytes of one entry's path */
    /*
     * Expansion cap: the file bytes an archive holds (declared sparse sizes
     * included) may exceed neither max_ratio times its stored size nor
     * ratio_floor_bytes, whichever is larger; the floor keeps small, highly
     * compressible archives (configs, text) acceptable. max_ratio 0 = no cap.
     * Checked from each entry's declared size before its data is read, and
     * again while decompressing, which stops as soon as the cap is passed.
     */
    uint32_t max_ratio;
    uint64_t ratio_floor_bytes;
    struct store_archive_counters *counters; /* BORROWED, may be NULL */
};

#define STORE_ARCHIVE_MAX_RATIO 200
#define STORE_ARCHIVE_RATIO_FLOOR ((uint64_t)32 << 20)

/* Defaults: 256 GiB total, 1,000,000 entries, 1024-byte paths, 200:1 above
 * 32 MiB expanded, no counters. */
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
 *   A file that is also a directory of another entry ("a" and "a/b") is
 *   refused naming both. An archive over the expansion ratio is refused with
 *   "archive expands more than R:1 (expanded N bytes from S stored bytes
 *   when refused, at entry '...'); ...".
 * - An I/O failure: MG_EIO.
 *
 * On failure `out` is left empty. The caller owns `out` and releases it with
 * store_archive_manifest_release().
 */
enum mg_code store_archive_inspect(const char *path, const char *media_type,
                                   const struct store_archive_limits *lim,
                                   struct store_archive_manifest *out, bool *is_archive,
                                   struct mg_error *err);

/*
 * store_archive_inspect, and while it reads each regular file, the safety scan `scan`
 * reads it too (art_scan_walk_entry), so that a compressed archive is decompressed once.
 * Call it only for files art_scan_walks() accepts. With *is_archive false on return (a
 * compressed stream that is not a tar) the walk saw nothing: scan the file on its own.
 */
struct art_scan_walk;
enum mg_code store_archive_inspect_scan(const char *path, const char *media_type,
                                        const struct store_archive_limits *lim,
                                        struct art_scan_walk *scan,
                                        struct store_archive_manifest *out, bool *is_archive,
                                        struct mg_error *err);

/*
 * Extract the archive at `path` (media type as for store_archive_inspect)
 * into `dest`, an existing EMPTY directory made for this purpose (mkdtemp);
 * a symbolic link as `dest`, or a directory with anything in it, is refused.
 *
 * Safety (what libarchive's ARCHIVE_EXTRACT_SECURE_NODOTDOT,
 * _SECURE_SYMLINKS and _SECURE_NOABSOLUTEPATHS give, done here with openat()
 * relative to `dest` because archive_write_disk resolves paths against the
 * process's working directory, which a threaded caller cannot change):
 * - every entry passes the inspection rules first: absolute paths, "..",
 *   control characters, invalid UTF-8, hard and symbolic links, devices,
 *   FIFOs and sockets are refused, and so is a zip whose central directory
 *   and local headers disagree;
 * - only regular files and directories are created, component by component
 *   with O_NOFOLLOW / O_DIRECTORY, files with O_CREAT | O_EXCL, so nothing is
 *   followed or replaced and a repeated path fails;
 * - modes are 0755 for directories, and 0755 or 0644 for files (the owner's
 *   execute bit is all that is taken from the archive), less the umask;
 *   owners, times, ACLs, xattrs and setuid/setgid/sticky bits are ignored;
 * - `lim` caps the entries, the bytes written (sparse holes count) and each
 *   path's length (NULL = store_archive_limits_default).
 *
 * Returns MG_OK and, when out is not NULL, the manifest of the files as
 * written (sorted; the SHA-256 of the bytes that went to disk), which the
 * caller releases with store_archive_manifest_release(). Errors: MG_EINVAL
 * for an unsafe, over-cap, corrupt or non-archive input (message names the
 * entry), MG_ENOSPC when the disk is full, MG_EIO for other I/O failures,
 * MG_ENOMEM. On failure everything extraction created is removed again (dest
 * itself stays, empty) and `out` is empty.
 */
enum mg_code store_archive_extract(const char *path, const char *media_type, const char *dest,
                                   const struct store_archive_limits *lim,
                                   struct store_archive_manifest *out, struct mg_error *err);

/* Free the manifest's storage and empty it. Safe on an empty manifest. */
void store_archive_manifest_release(struct store_archive_manifest *m);

#endif
