/*
 * blob.h - the blob layer inside store/: where artifact bytes live, behind one
 * interface with three backends (like db.h is the database layer).
 *
 *   file:<dir>                      blob_file.c  <dir>/sha256/<2 hex>/<hex>, sendfile
 *   s3://bucket/prefix?endpoint=…   blob_s3.c    <prefix>sha256/<hex>, SigV4 by libcurl
 *   oci://host:port/repo?insecure=… blob_oci.c   registry blobs, each kept alive by a
 *                                                tiny manifest tagged sha256-<hex>
 *
 * Each backend file exports one vtable (blob_int.h's struct blob_ops: its scheme, its
 * URL check, open, every operation, and a `supports` bitfield of blob_can.h's optional
 * abilities); blob.c picks the one whose scheme starts the URL from its table and
 * otherwise only dispatches. Nothing here parses a backend's URL or names a backend;
 * an ability only some backends have is a capability bit (blob_can) with one generic
 * call, which answers as documented below on a backend without it.
 *
 * Only store/ includes this. Nothing here touches the database: the store keeps
 * blob rows (blobs.c) and the record of uploads in flight (table blob_uploads),
 * this layer keeps bytes.
 *
 * Lifecycle of one upload (blobs.c drives it; hashing happens above, in blobs.c):
 *   blob_put_begin → blob_put_write … → blob_put_commit(digest)  (bytes complete and
 *   durable under the digest: only then does blobs.c insert the row), or
 *   blob_put_abort at any point (best effort: what it could not remove stays
 *   findable through blob_orphans / blob_reclaim).
 *
 * Garbage collection (M12) needs, per backend:
 *   blob_delete(digest)           remove a committed blob (idempotent: absent is MG_OK)
 *   blob_list(cb)                 every committed digest the backend holds
 *   blob_orphans(cb)              leftovers of uploads that never committed (temp files,
 *                                 multipart uploads, temp objects) with their age
 *   blob_reclaim(handle)          remove one leftover, by the handle blob_orphans or
 *                                 blob_put_handle gave
 * An upload in flight is listed by blob_orphans too: compare its handle with the
 * store's blob_uploads rows (live replicas' uploads) and its age with the grace period
 * before reclaiming it.
 *
 * Thread safety: one backend is shared by every thread; a put or a reader is used
 * by one thread at a time (a reader's wake callback runs on the backend's thread).
 * Errors: MG_EUNAVAIL when the backend cannot be reached or refuses our credentials
 * (message names the backend), MG_ENOTFOUND for an absent blob, MG_ENOSPC for a full
 * disk (file:), MG_EIO otherwise.
 */
#ifndef STORE_BLOB_H
#define STORE_BLOB_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "../base/mg.h"
#include "blob_can.h"

struct blob_backend;
struct blob_put;
struct blob_reader;

struct blob_options {
    const char *url;         /* file:/dir, s3://…, oci://… (docs/contract.md "Running") */
    const char *credentials; /* --blobs-credentials FILE (mode 0600) or NULL */
    const char *tmp_dir;     /* local scratch (spools, downloads), created if missing, for a
                              * backend that keeps none of its own (file: uses <dir>/tmp,
                              * beside its blobs); blob_tmp_dir says which is in use */
    uint64_t part_bytes;     /* s3/oci part size; 0 = 8 MiB */
};

/* Which backend a URL names ("file", "s3", "oci"): the one whose scheme starts it, which
 * checks the rest of its syntax; NULL with err filled when it is none of them. A NULL URL
 * names the first backend of the table (file:, in the data directory). */
const char *blob_url_kind(const char *url, struct mg_error *err);

/* Open a backend (no network call yet). MG_EINVAL for a bad URL or credentials file. */
enum mg_code blob_open(const struct blob_options *o, struct blob_backend **out,
                       struct mg_error *err);
void blob_close(struct blob_backend **b);

/* "file", "s3" or "oci" (for messages, metrics and blob_uploads.backend; never to
 * branch on: ask blob_can). */
const char *blob_kind(const struct blob_backend *b);

/* Whether the backend has an optional ability (blob_can.h). */
bool blob_can(const struct blob_backend *b, enum blob_can what);

/* A short description for messages: "s3 bucket 'b' at http://127.0.0.1:9000". */
const char *blob_describe(const struct blob_backend *b);

/* The local scratch directory in use (blob_options.tmp_dir, or the backend's own). */
const char *blob_tmp_dir(const struct blob_backend *b);

/* With BLOB_CAN_LOCAL_FILES: the path of a committed blob's file (which may be absent)
 * into out, true. Without: false, out untouched. */
bool blob_local_path(struct blob_backend *b, const char *digest, char *out, size_t outsz);

/* Can we write now? (file: a temp file; s3: the bucket answers to our credentials;
 * oci: /v2/ answers with our credentials). For /readyz. */
enum mg_code blob_check(struct blob_backend *b, struct mg_error *err);

/* ---- upload ------------------------------------------------------------ */

/*
 * Start an upload. expected ("sha256:<hex>" or NULL) lets a backend write straight
 * under the final name (s3: a multipart upload to the digest key, completed only
 * after the digest is verified). max_bytes sizes s3 parts (at most 10,000 parts).
 */
enum mg_code blob_put_begin(struct blob_backend *b, const char *expected, uint64_t max_bytes,
                            struct blob_put **out, struct mg_error *err);

/* Append bytes. Remote backends buffer one part and send the previous one meanwhile. */
enum mg_code blob_put_write(struct blob_put *p, const void *data, size_t n, struct mg_error *err);

/* The handle blob_reclaim takes for this upload's leftovers (a temp path, an S3 key,
 * an OCI session URL): record it before the first write. Valid until commit/abort. */
const char *blob_put_handle(const struct blob_put *p);

/* With BLOB_CAN_LOCAL_FILES: the temp file holding the bytes written so far (for
 * inspection). Without: NULL (blobs.c spools what it must inspect, and records the
 * upload in blob_uploads). */
const char *blob_put_local_path(const struct blob_put *p);

/*
 * Make the bytes durable under digest (already verified by the caller). file: fsync,
 * rename, fsync the directories; s3: complete the multipart upload (or PUT), then
 * copy a temp key to the digest key; oci: PUT ?digest= and tag a manifest that
 * references the blob. Always consumes *p. On failure nothing is visible under the
 * digest that was not there before (a half-made copy is removed or left to
 * blob_orphans).
 */
enum mg_code blob_put_commit(struct blob_put **p, const char *digest, struct mg_error *err);

/* Drop an upload: temp file, multipart upload or session removed as far as the
 * backend answers. Sets *p to NULL. Safe on NULL. Returns whether everything was
 * removed (false: the leftovers stay for blob_orphans/blob_reclaim). */
bool blob_put_abort(struct blob_put **p);

/* ---- reading ----------------------------------------------------------- */

/* Size of a stored blob; MG_ENOTFOUND when absent. */
enum mg_code blob_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                       struct mg_error *err);

/* Open bytes [off, off+len) of a blob. file: an fd (sendfile); remote: a GET with
 * Range streamed by a thread of the reader's own into a bounded buffer. Every reader
 * answers the three calls below through its own vtable (blob_int.h). */
enum mg_code blob_read_open(struct blob_backend *b, const char *digest, uint64_t off, uint64_t len,
                            struct blob_reader **out, struct mg_error *err);

/* With BLOB_CAN_SENDFILE: the descriptor and offset to sendfile from, handed over (the
 * reader then holds none). -1 for a reader without one (a streamed or empty reader). */
int blob_reader_take_fd(struct blob_reader *r, uint64_t *offset);

/*
 * Read up to n bytes. *got = 0 and MG_OK at the end. When no byte is ready yet:
 * with wake NULL it waits; with wake given it returns at once with *would_block
 * and calls wake(arg) once (from another thread) when bytes, the end or an error
 * arrive.
 */
enum mg_code blob_reader_read(struct blob_reader *r, void *buf, size_t n, size_t *got,
                              bool *would_block, void (*wake)(void *arg), void *arg,
                              struct mg_error *err);

/* Stop and free (a streaming GET is cancelled). Sets *r to NULL; safe on NULL. */
void blob_reader_close(struct blob_reader **r);

/* With BLOB_CAN_PRESIGN: a URL anyone may GET the blob from for ttl_s seconds (s3: SigV4
 * query presigning). Without: MG_EINVAL, field "blob-downloads". *url malloc'd. */
enum mg_code blob_presign(struct blob_backend *b, const char *digest, unsigned ttl_s, char **url,
                          struct mg_error *err);

/* Read a whole blob of `size` bytes, handing each chunk to `sink` in order: MG_EIO when
 * the bytes stop short or run over, or (with `check`) differ from the digest; the sink
 * has then seen bytes that must not be trusted. A sink's failure stops it. Backups pass
 * check=false: they carry what is stored, and restore tells a damaged blob. */
enum mg_code blob_stream(struct blob_backend *b, const char *digest, uint64_t size, bool check,
                         enum mg_code (*sink)(void *arg, const void *data, size_t n,
                                              struct mg_error *err),
                         void *arg, struct mg_error *err);

/* Copy a blob of `size` bytes from one backend to another (backup, restore, migrate),
 * checking its digest on the way; committed in `to` only when it matched. */
enum mg_code blob_copy(struct blob_backend *from, struct blob_backend *to, const char *digest,
                       uint64_t size, struct mg_error *err);

/* ---- housekeeping (GC) ------------------------------------------------- */

/* Remove a committed blob (oci: its tag manifest and the blob, through the
 * registry's delete API). Absent: MG_OK. */
enum mg_code blob_delete(struct blob_backend *b, const char *digest, struct mg_error *err);

/* Every committed digest ("sha256:<hex>") and its size; cb returns false to stop. */
enum mg_code blob_list(struct blob_backend *b,
                       bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                       struct mg_error *err);

struct blob_orphan {
    const char *handle; /* for blob_reclaim */
    const char *owner;  /* the blob_put_handle of the upload it belongs to: compare with the
                         * store's blob_uploads rows (uploads of live replicas) */
    const char *what;   /* "temp file", "multipart upload", "temp object", "upload session" */
    int64_t age_ms;     /* since it was started (-1: unknown) */
};

/* Leftovers of uncommitted uploads (including those in flight right now). oci:
 * registries do not list upload sessions (they purge them themselves), so only
 * handles recorded in blob_uploads find them. */
enum mg_code blob_orphans(struct blob_backend *b,
                          bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                          struct mg_error *err);

/* Remove one leftover by its handle (absent: MG_OK). */
enum mg_code blob_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err);

/* ---- S3 request presigning (blob_presign.c; pure, unit-tested) ---------- */

struct blob_sigv4 {
    const char *access_key, *secret_key, *session_token; /* token may be NULL */
    const char *region;
    const char *host;     /* as sent in the Host header: "bucket.s3.amazonaws.com", "h:9000" */
    const char *path;     /* URI path, already percent-encoded per S3 rules ("/bucket/key") */
    const char *amz_date; /* "20130524T000000Z" */
    unsigned expires_s;   /* X-Amz-Expires */
};

/* The query string (without '?') that makes GET host+path valid for expires_s:
 * X-Amz-Algorithm…X-Amz-Signature. malloc'd, NULL on failure. */
char *blob_sigv4_presign_query(const struct blob_sigv4 *s);

/* Percent-encode per SigV4 (unreserved kept; '/' kept when keep_slash). malloc'd. */
char *blob_sigv4_encode(const char *s, bool keep_slash);

#endif
