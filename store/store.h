/*
 * store.h - the only door to persistent state: the database (SQLite today,
 * PostgreSQL later) and the content-addressed blob directory.
 *
 * The API is backend-neutral: no SQL, statements or connections cross it.
 * Records come back as jansson objects in the shapes of docs/contract.md; every json_t
 * returned through an out-parameter is a NEW reference owned by the caller.
 * json_t arguments are BORROWED.
 *
 * Every mutation runs in one write transaction that also appends its audit
 * entry, so a change and its audit record are committed together or not at
 * all. `actor` is the name of the token making the change.
 *
 * Thread safety: a struct store may be used from any number of threads at
 * once; reads use a small connection pool, writes are serialised.
 *
 * Return values: MG_OK, or an error code with `err` filled (message says
 * what was wrong and what to do). Out-parameters are untouched on failure.
 *
 * This header holds opening and closing the store, its figures, backup and restore, and
 * the audit log; it includes one header per subsystem (store_cluster.h, store_access.h,
 * store_blobs.h, store_models.h, store_lifecycle.h, store_release.h, store_gateways.h),
 * so callers include only store.h.
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "blob_can.h"
#include "../artifact/archive.h"
#include "../artifact/scan.h"
#include "../artifact/sign.h"

/* One header per subsystem; callers include only this one. */
#include "store_cluster.h"
#include "store_access.h"
#include "store_blobs.h"
#include "store_models.h"
#include "store_lifecycle.h"
#include "store_release.h"
#include "store_gateways.h"

struct store;

struct store_options {
    const char *data_dir; /* created (0700) if missing */
    const char *database; /* NULL: SQLite in data_dir; else a PostgreSQL URL, shared by replicas */
    /* Where blob bytes live (docs/contract.md "Running"): NULL for file:<data_dir>/blobs, else
     * file:/DIR, s3://bucket/prefix?endpoint=…&region=…&path_style=true or
     * oci://host:port/repository?insecure=true (store/blob.h). */
    const char *blobs;
    const char *blobs_credentials; /* s3 ACCESS:SECRET or oci USER:PASSWORD file, 0600 */
    const char *host_name;         /* this replica's host (gateways' "host"); NULL: gethostname() */
    bool sync_normal;              /* synchronous=NORMAL instead of FULL */
    unsigned read_conns;           /* read connection pool size (>= 1) */
    struct store_archive_limits archive;
    const struct sign_keyring *keys; /* signs new versions; BORROWED, outlives the store */
    /* The safety scan's caps and --scan-allow names (BORROWED, outlive the store); all
     * zero: the defaults. */
    struct art_scan_opts scan;
    /* MODELGATED_TEST_SCAN=skip, bench/scan.sh's reference only: uploads are not scanned,
     * and their report is "unknown" (never clean: the scan gate and pull refuse them). */
    bool scan_skip;
};

/* Open (creating and migrating if needed; processes opening one PostgreSQL
 * database at once migrate it once). A database written by a newer modelgate
 * is refused with MG_EINVAL; with SQLite, a data directory another process
 * has open, with MG_EUNAVAIL; an unreachable PostgreSQL, with MG_EUNAVAIL.
 * Temp files of interrupted uploads are removed. */
enum mg_code store_open(const struct store_options *opt, struct store **out, struct mg_error *err);

/* Close all connections and free; sets *st to NULL. No call may be in flight. */
void store_close(struct store **st);

/* True when the database accepts a write and the blob backend takes writes; else
 * false with err saying which of them failed (err may be NULL). */
bool store_ready(struct store *st, struct mg_error *err);

/* Check a --blobs URL's syntax without opening anything: "file", "s3" or "oci", or
 * NULL with err filled. */
const char *store_blobs_url_kind(const char *url, struct mg_error *err);

/* The blob backend in use: "file", "s3" or "oci" (a name to show; branch on
 * store_blobs_can). */
const char *store_blobs_kind(const struct store *st);

/* Whether the blob backend in use has an optional ability (blob_can.h: BLOB_CAN_PRESIGN
 * for --blob-downloads redirect, ...). */
bool store_blobs_can(const struct store *st, enum blob_can what);

/* Operational figures for /metrics: {"promotions":{state:n},"deliveries":[{"gateway",
 * "state","count"}],"delivery_lag_seconds":{gateway:s},"smoke_tests":{state:n},
 * "wal_bytes":n,"db_bytes":n}. */
enum mg_code store_stats(struct store *st, json_t **out, struct mg_error *err);

/* Archive expansion totals since the store was opened (uploads and
 * extractions through this store). Thread-safe. */
void store_archive_totals(struct store *st, struct store_archive_counters *out);

/* ---- backup and restore ------------------------------------------------ */

/* Where a backup reads blobs from, or a restore writes them to: the --blobs URL
 * (NULL: file:<data_dir>/blobs) and its credentials file (may be NULL). */
struct store_blobs_location {
    const char *url;
    const char *credentials;
};

/* Write a tar of data_dir to out_path: a consistent database snapshot
 * (SQLite online backup, safe while the server runs), every blob the snapshot
 * records (read through the blob backend, whichever it is), and the signing
 * keys. *summary = {"file","blobs","keys"}. blobs may be NULL (file: in data_dir). */
enum mg_code store_backup(const char *data_dir, const struct store_blobs_location *blobs,
                          const char *out_path, json_t **summary, struct mg_error *err);

/* Restore a backup into data_dir (new or empty), writing its blobs through the
 * given backend (NULL: file:<data_dir>/blobs), then check every blob against its
 * digest and the audit chain. *summary = {"data_dir","blobs","audit"}. */
enum mg_code store_restore(const char *archive_path, const char *data_dir,
                           const struct store_blobs_location *blobs,
                           const struct sign_keyring *keys, json_t **summary, struct mg_error *err);

/* ---- audit ------------------------------------------------------------ */

/* {"items":[{"seq","at","actor","action","target","detail","prev_hash","hash"}],
 *  "next_page_token"}; entries with seq > after, oldest first. */
enum mg_code store_audit_list(struct store *st, int64_t after, unsigned limit, json_t **out,
                              struct mg_error *err);

/* The same newest first: entries with after < seq < before (before 0: up to the newest);
 * next_page_token is the next page's before. */
enum mg_code store_audit_list_desc(struct store *st, int64_t after, int64_t before, unsigned limit,
                                   json_t **out, struct mg_error *err);

/* Recompute the chain: {"ok","entries","head","first_bad_seq"?}. */
enum mg_code store_audit_verify(struct store *st, json_t **out, struct mg_error *err);

#endif
