/*
 * file.h - files written whole or not at all, and their digests.
 *
 * Thread-safe; every function reports errors through struct mg_error.
 */
#ifndef MG_COMMON_FILE_H
#define MG_COMMON_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../base/mg.h"

/*
 * Replace path with data (n bytes) atomically: a new temp file beside it (O_EXCL, random
 * name starting with '.', never following links), mode set with fchmod whatever the umask,
 * every byte written (short writes and EINTR looped over), fsync, rename over path, fsync of
 * the directory. On failure the temp file is removed and path is as it was. MG_ENOSPC when
 * the disk is full, MG_EIO otherwise, with the file named in the message.
 */
enum mg_code mg_file_write_atomic(const char *path, const void *data, size_t n, mode_t mode,
                                  struct mg_error *err);

/* Write all n bytes to fd (looping over short writes and EINTR). what names the file in the
 * message. */
enum mg_code mg_write_all(int fd, const void *data, size_t n, const char *what,
                          struct mg_error *err);

/* The streaming SHA-256 of the file at path as 64 lowercase hex (hex_out[65]); *size (may
 * be NULL) receives its length. Reads in 1 MiB chunks: constant memory. */
enum mg_code mg_file_sha256(const char *path, char hex_out[65], uint64_t *size,
                            struct mg_error *err);

/*
 * The first line of a file of secrets into buf (cap bytes; the line ends at the first CR or
 * LF, which is dropped): the file must be a regular file, not a link, that no other user may
 * read. MG_EINVAL naming field when it cannot be opened, is not a regular file or others may
 * read it (the message says which, and how to fix the mode). MG_ETOOBIG, with err untouched,
 * when it is empty or holds cap - 1 bytes or more: the caller says what the file must hold.
 * buf is wiped on every failure; the caller wipes it (OPENSSL_cleanse) after use.
 */
enum mg_code mg_secret_line_read(const char *path, const char *field, char *buf, size_t cap,
                                 struct mg_error *err);

#endif
