/*
 * oci_cache.h - the files behind per-file OCI layers (docs/contract.md "OCI distribution"): a layer
 * that is one file of an archive is served from <data-dir>/oci-layers/<sha256 hex>, a copy
 * of that file taken out of the archive with the store's safe extraction
 * (store_blob_materialize) and checked against the sha256 the file manifest recorded
 * before it is kept. A fill unpacks the whole archive once and keeps all of its files (a
 * client pulling one layer of a version pulls the others next), then evicts the least
 * recently served files until the cache is back under its byte cap (never the file just
 * asked for; a file being served stays readable through its open descriptor).
 *
 * Why a cache rather than streaming out of the archive: ranges (resumed pulls) and
 * sendfile need a file, a compressed archive can only be read from its start, and a
 * streamed file could be checked against its digest only after its bytes were sent.
 *
 * Thread-safe: fills are serialised by one lock; hits take none. Fills are slow (they
 * unpack an archive): call srv_oci_cache_fill from srv_defer_work, never on an HTTP thread.
 */
#ifndef SRV_OCI_CACHE_H
#define SRV_OCI_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

struct srv;
struct srv_oci_cache;

/* Open (creating it 0700) <data_dir>/oci-layers, removing what an interrupted fill left;
 * cap_bytes bounds what stays cached between fills. */
enum mg_code srv_oci_cache_open(const char *data_dir, uint64_t cap_bytes,
                                struct srv_oci_cache **out, struct mg_error *err);

void srv_oci_cache_close(struct srv_oci_cache **c);

/* The cached file of sha256 hex (64 lowercase hex) when it is there with `size` bytes:
 * *fd (the caller closes it) and true; false otherwise. Marks it recently served. */
bool srv_oci_cache_lookup(struct srv_oci_cache *c, const char *hex, uint64_t size, int *fd);

/*
 * Make the file of sha256 hex available and open it: unpack `artifact` (a blob digest)
 * whose regular files are `files` ({"items":[{"path","size","digest"}]}, BORROWED), check
 * every file against its digest, keep them, evict down to the cap. MG_ENOSPC when the disk
 * has no room for the unpacked archive, MG_EIO when a file does not match its digest (the
 * blob was altered) or the cache cannot be written. *fd is the caller's to close.
 */
enum mg_code srv_oci_cache_fill(struct srv *srv, const char *hex, uint64_t size,
                                const char *artifact, const json_t *files, int *fd,
                                struct mg_error *err);

#endif
