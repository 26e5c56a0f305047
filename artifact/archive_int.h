/*
 * archive_int.h - what archive.c (inspection, extraction, the libarchive pass),
 * archive_zip.c (the zip central directory, read on its own to catch what libarchive's
 * streaming reader would hide), archive_names.c (entry names) and archive_scan.c (entry
 * data handed to the safety scan) share. The weight readers and the scanner use its
 * reader, media types and name quoting too; it names neither of them.
 */
#ifndef ART_ARCHIVE_INT_H
#define ART_ARCHIVE_INT_H

#include "archive.h"
#include "sign.h"
#include "../base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#define MT_TAR "application/x-tar"
#define MT_GZIP "application/gzip"
#define MT_ZIP "application/zip"
#define MT_ZSTD "application/zstd"
#define MT_XZ "application/x-xz"
#define MT_OCTET "application/octet-stream"

#define READ_BLOCK 65536 /* libarchive's read size */
/* libarchive's ARCHIVE_ERRNO_FILE_FORMAT (private): EFTYPE where it exists, else EILSEQ. */
#ifdef EFTYPE
#define LA_ERRNO_FILE_FORMAT EFTYPE
#else
#define LA_ERRNO_FILE_FORMAT EILSEQ
#endif
#define SHOW_MAX 160 /* bytes of a name quoted in an error message */
#define SHOW_BUF (SHOW_MAX + 8)

/* Zip record layouts (APPNOTE.TXT 4.3). */
#define ZIP_EOCD_LEN 22
#define ZIP_EOCD_SEARCH 16384 /* libarchive's seekable reader looks no further back */
#define ZIP_CDH_LEN 46
#define ZIP64_LOCATOR_LEN 20
#define ZIP64_EOCD_MIN 56
#define ZIP64_EOCD_MAX 16384
#define ZIP_SYSTEM_UNIX 3

struct name_list {
    char **v;
    size_t n, cap;
};

/*
 * Extraction state: everything is created relative to dest_fd with openat()
 * and friends, so no path is resolved against the process's working
 * directory and no symbolic link is ever followed.
 */
struct extract {
    int dest_fd;           /* the destination directory */
    int dir_fd;            /* the parent directory of the last file, or -1 */
    char *dir_path;        /* dir_fd's path relative to dest ("" for dest itself) */
    struct name_list made; /* what was created, in order: "d<path>" or "f<path>" */
};

struct art_scan_walk; /* scan.h: archive_scan.c feeds it, archive.c only carries it */

struct inspect {
    const struct store_archive_limits *lim;
    struct mg_error *err;
    EVP_MD_CTX *md;
    struct store_archive_file *files;
    size_t nfiles, files_cap;
    bool is_zip;
    struct name_list cd;   /* zip: names from the central directory */
    struct name_list seen; /* zip: names libarchive reported */
    struct name_list dirs; /* directories named by entries (normalised) */
    uint64_t entries;
    uint64_t total;             /* regular-file bytes read so far, <= lim->max_total_bytes */
    uint64_t stored;            /* the archive's size on disk */
    uint64_t budget;            /* the expansion ratio cap in bytes (UINT64_MAX: none) */
    char show[SHOW_BUF];        /* the current entry's name, printable */
    struct extract *x;          /* extracting: where to write; NULL when only inspecting */
    struct art_scan_walk *scan; /* inspecting: the safety scan fed each regular file */
    int region_fd;              /* with scan, an uncompressed tar: the file, else -1 */
};

/*
 * A libarchive reader for the media type (built-in decoders only). A compressed stream
 * also gets the raw format, which wins when the data is not a tar. *out: NEW reader.
 */
enum mg_code art_reader_new(const char *media_type, struct archive **out, bool *compressed,
                            struct mg_error *err);

/* Turn a libarchive failure into an error; `where` is "at" or "after" the current entry
 * (NULL: none). */
enum mg_code art_archive_failure(struct archive *a, struct inspect *in, const char *where);

/* Count n more bytes of file data against the caps. */
enum mg_code art_account(struct inspect *in, uint64_t n);

/* Count, and hash when `hash`, n bytes of a sparse hole. */
enum mg_code art_hash_zeros(struct inspect *in, bool hash, uint64_t n);

/* archive_scan.c: read_data() for a regular file the safety scan reads too (in->scan): the
 * scanner takes what it needs, the rest is drained; file->size and file->sha256 are set. */
enum mg_code art_read_data_scanned(struct archive *a, struct archive_entry *e, struct inspect *in,
                                   struct store_archive_file *file);

enum mg_code art_zip_scan_cd(const char *path, struct inspect *in);

enum mg_code art_zip_cross_check(struct inspect *in);

void art_name_show(const char *s, size_t n, char out[SHOW_BUF]);

enum mg_code art_path_normalise(const char *raw, size_t n, const struct store_archive_limits *lim,
                                char **norm, struct mg_error *err);

const char *art_special_type_name(unsigned type);

enum mg_code art_reject_type(const char *show, unsigned type, struct mg_error *err);

enum mg_code art_name_list_push(struct name_list *l, char *s, struct mg_error *err);

int art_cmp_str(const void *a, const void *b);

size_t art_utf8_len(const unsigned char *p, size_t n);

const char *art_path_problem(const char *raw, size_t n);

void art_name_list_release(struct name_list *l);

int art_cmp_file(const void *a, const void *b);

#endif
