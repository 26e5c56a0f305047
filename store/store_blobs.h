/*
 * store_blobs.h - content-addressed blobs: streamed uploads and their commit, lookups, the
 * introspection and safety scan of what was uploaded, reading and materialising the bytes.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_BLOBS_H
#define STORE_BLOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../artifact/scan.h"

struct store;

/* ---- blobs ------------------------------------------------------------ */

struct store_blob_upload;

/* Start a streamed upload into the blob backend (a temp file, a multipart upload, an
 * upload session); a remote upload is recorded in flight (blob_uploads) first.
 * MG_EUNAVAIL when the backend cannot be reached. */
enum mg_code store_blob_upload_begin(struct store *st, uint64_t max_bytes,
                                     struct store_blob_upload **out, struct mg_error *err);

/* The same, for bytes declared to hash to expected ("sha256:<hex>"): a backend may
 * write them straight under that name (still only visible after commit checked
 * them), and a blob stored already is only hashed, not stored again. */
enum mg_code store_blob_upload_begin_digest(struct store *st, uint64_t max_bytes,
                                            const char *expected, struct store_blob_upload **out,
                                            struct mg_error *err);

/* Append bytes (hashed as they are written). MG_ETOOBIG past max_bytes,
 * MG_ENOSPC when the disk is full. */
enum mg_code store_blob_upload_write(struct store_blob_upload *up, const void *p, size_t n,
                                     struct mg_error *err);

/*
 * Finish: fsync, check `expected` ("sha256:<hex>" or NULL; mismatch →
 * MG_EDIGEST and nothing kept), inspect archives, rename into place, fsync
 * the directory, then commit the row. *created is false when the blob was
 * already stored. *blob = {"digest","size","media_type","files","formats"}. A malformed
 * weight header (artifact/introspect.h) is MG_EINVAL naming the member and the offset.
 * Always consumes *up (sets it to NULL).
 */
enum mg_code store_blob_upload_commit(struct store_blob_upload **up, const char *actor,
                                      const char *expected, json_t **blob, bool *created,
                                      struct mg_error *err);

/* Drop an unfinished upload and what the backend holds of it (a remote leftover the
 * backend would not remove stays named by its blob_uploads row). Sets *up to NULL. */
void store_blob_upload_abort(struct store_blob_upload **up);

/* {"digest","size","media_type","files","created_at","created_by"}; MG_ENOTFOUND. */
enum mg_code store_blob_get(struct store *st, const char *digest, json_t **out,
                            struct mg_error *err);

/*
 * What the upload read from the blob's weight headers (artifact/introspect.h): *out NEW
 * introspection object, or NULL when it held no known format (or was uploaded before
 * introspection existed). MG_EINVAL (field "artifact") when the blob does not exist.
 */
enum mg_code store_blob_introspection(struct store *st, const char *digest, json_t **out,
                                      struct mg_error *err);

/*
 * The safety scan of a blob (artifact/scan.h), taken at upload: *out NEW report object, or
 * NULL when the blob was stored before the scanner existed. MG_EINVAL (field "artifact")
 * when the blob does not exist.
 */
enum mg_code store_blob_scan(struct store *st, const char *digest, json_t **out,
                             struct mg_error *err);

/*
 * Scan a stored blob again (after an allowlist change): its bytes are copied to a local
 * file (checked against the digest) and scanned; the blob's report and the copies of every
 * version citing it are replaced, and the rescan is audited ("blob.rescan"). *out NEW
 * report. MG_ENOTFOUND when the blob does not exist.
 */
enum mg_code store_blob_rescan(struct store *st, const char *actor, const char *digest,
                               json_t **out, struct mg_error *err);

/*
 * The background rescan after an upgrade (control/lifecycle.c): live blobs stored before the
 * scanner existed have no report, which no policy takes for clean.
 * store_scan_unscanned_count: how many there are (/metrics). store_scan_unscanned: up to
 * `limit` of their digests greater than `after` ("" from the start), in digest order (*out
 * NEW array of strings). store_blob_scan_backfill: what store_blob_rescan does for one of
 * them, as leader-only work: the report is recorded (audited "blob.rescan" by `actor`, and
 * copied into the versions citing it) only while this replica still leads at leader_epoch
 * (> 0; else MG_EUNAVAIL and nothing changes, as for store_job_claim) and only if the blob
 * still has none; *out NEW report when recorded, NULL when not (a rescan by hand was first,
 * or the blob went). Errors: as store_blob_rescan.
 */
enum mg_code store_scan_unscanned_count(struct store *st, int64_t *n, struct mg_error *err);
enum mg_code store_scan_unscanned(struct store *st, const char *after, int64_t limit, json_t **out,
                                  struct mg_error *err);
enum mg_code store_blob_scan_backfill(struct store *st, int64_t leader_epoch, const char *actor,
                                      const char *digest, json_t **out, struct mg_error *err);

/*
 * The scan report as an OCI referrer (docs/contract.md "Artifact safety scan"): remember a document
 * (kind "manifest": the referrer manifest; "report": the report blob) of version `version`
 * under its digest (idempotent); find one by digest among the model's live versions
 * (*body malloc'd; MG_ENOTFOUND when none).
 */
enum mg_code store_oci_scan_put(struct store *st, const char *model, int64_t version,
                                const char *digest, const char *kind, const char *body,
                                struct mg_error *err);
enum mg_code store_oci_scan_find(struct store *st, const char *model, const char *digest,
                                 const char *kind, char **body, struct mg_error *err);

/* Findings the scans of this process produced, per rule (art_scan_rules' order). */
void store_scan_totals(struct store *st, uint64_t out[ART_SCAN_NRULES]);

/* A backend with BLOB_CAN_SENDFILE (file:) only: open a stored blob's file; the caller
 * closes *fd. MG_EINVAL for a backend without it (use store_blob_read_open). */
enum mg_code store_blob_open(struct store *st, const char *digest, int *fd, uint64_t *size,
                             struct mg_error *err);

/*
 * Reading blobs whatever the backend: bytes [off, off+len) of a stored blob (the
 * caller knows its size from store_blob_get). The reader is store/blob.h's:
 *   blob_reader_take_fd(r, &offset)  a descriptor to sendfile from (BLOB_CAN_SENDFILE:
 *     file:), else -1;
 *   blob_reader_read(r, buf, n, &got, &would_block, wake, arg, err)  streamed bytes
 *     (got 0 at the end); with wake given it never waits: would_block says no byte
 *     is ready and wake(arg) is called once, from another thread, when one is;
 *   blob_reader_close(&r).
 */
struct blob_reader;
enum mg_code store_blob_read_open(struct store *st, const char *digest, uint64_t off, uint64_t len,
                                  struct blob_reader **out, struct mg_error *err);
int blob_reader_take_fd(struct blob_reader *r, uint64_t *offset);
enum mg_code blob_reader_read(struct blob_reader *r, void *buf, size_t n, size_t *got,
                              bool *would_block, void (*wake)(void *arg), void *arg,
                              struct mg_error *err);
void blob_reader_close(struct blob_reader **r);

/* A URL that serves the blob to anyone for ttl_s seconds (BLOB_CAN_PRESIGN: s3
 * presigned GET); MG_EINVAL for backends without one. *url malloc'd. */
enum mg_code store_blob_presign(struct store *st, const char *digest, unsigned ttl_s, char **url,
                                struct mg_error *err);

/* Copy a stored blob of `size` bytes into fd, checking its digest (MG_EIO when the
 * backend's bytes no longer match). */
enum mg_code store_blob_copy_to_fd(struct store *st, const char *digest, uint64_t size, int fd,
                                   struct mg_error *err);

/*
 * Lay a blob out in dest (an existing empty directory): an archive is
 * extracted safely (store_archive_extract), any other blob is copied to
 * dest/<single_name>. Checks the file's bytes against the digest as it goes
 * (MG_EIO on a mismatch: the blob file was altered on disk).
 */
enum mg_code store_blob_materialize(struct store *st, const char *digest, const char *dest,
                                    const char *single_name, struct mg_error *err);

/* Tokens of these teams uploaded digest (docs/contract.md "Tenancy"): possession, recorded once per
 * team. No teams (a global token): nothing to record. */
enum mg_code store_blob_claim(struct store *st, const char *digest, const char *const *teams,
                              size_t nteams, struct mg_error *err);

/*
 * Storage quotas per team (docs/contract.md "Quotas and cost"). store_quota_set: bytes (NULL:
 * remove the quota) for an existing team (MG_ENOTFOUND otherwise), audited as team.quota;
 * store_quota_get: *out NEW {"team","storage_bytes"|null,"used_bytes"}. Use counts the
 * unique bytes the team keeps: uploaded by its tokens or cited by its models' live
 * versions, until garbage collection reclaims them, plus uploads in flight.
 */
enum mg_code store_quota_set(struct store *st, const char *actor, const char *team,
                             const int64_t *bytes, json_t **out, struct mg_error *err);
enum mg_code store_quota_get(struct store *st, const char *team, json_t **out,
                             struct mg_error *err);

/*
 * What each team (by_model false) or model keeps and spends (docs/contract.md "Quotas and cost"):
 * *out NEW {"by","items":[…]}; a team item {"team","storage_bytes" (its use, as above),
 * "quota_bytes"|null,"versions" (not deleted, of the models it owns),"smoke_seconds",
 * "smoke_gpu_seconds"}; a model item {"model","owners","storage_bytes" (unique bytes its
 * live versions cite),"versions","smoke_seconds","smoke_gpu_seconds"}. Every team or model.
 */
enum mg_code store_usage(struct store *st, bool by_model, json_t **out, struct mg_error *err);

/* Teams an upload counts for (the uploading token's; none: a global token), copied; call
 * before store_blob_upload_commit, which then refuses bytes that would take one of them past
 * its quota (MG_EQUOTA) before putting them under their digest, and records the teams as
 * the bytes' holders (store_blob_claim) in the transaction that commits the row. */
void store_blob_upload_teams(struct store_blob_upload *up, const char *const *teams, size_t nteams);

/* Who holds the live blob digest: *out NEW {"uploaders":[team],"citers":[[owner]] (the
 * owners of each model with a version, not deleted, citing it), "released":bool (no live
 * version cites it any more since one was deleted, and it was not uploaded again)}.
 * MG_ENOTFOUND when no live blob has that digest. */
enum mg_code store_blob_holders(struct store *st, const char *digest, json_t **out,
                                struct mg_error *err);

/* Bytes a blob takes once materialised: the sum of its archive's file sizes
 * (sparse holes included), or its own size for a single file. MG_ENOTFOUND
 * for an unknown digest. */
enum mg_code store_blob_expanded_size(struct store *st, const char *digest, uint64_t *out,
                                      struct mg_error *err);

#endif
