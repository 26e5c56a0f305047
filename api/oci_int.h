/*
 * oci_int.h - what the files of the OCI distribution API (oci.c: routes, manifests, tags,
 * referrers, the token endpoint; oci_blobs.c: blobs) share with each other and nobody else.
 */
#ifndef SRV_API_OCI_INT_H
#define SRV_API_OCI_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"

/* The documents of version n of model (store_oci_get's shape, NEW): the kept ones, or,
 * the first time, computed from the version (artifact/modelpack.h) and kept. MG_ENOTFOUND
 * when the version does not exist. */
enum mg_code oci_docs(struct srv *srv, const char *model, int64_t n, json_t **out,
                      struct mg_error *err);

/* Does the model exist (for this token: a model it may not see was refused before the
 * handler ran)? When not, the reply is 404 NAME_UNKNOWN and false returned. */
bool oci_model_exists(struct srv_req *r, const char *model);

/* Reply with err; a not-found answers with the OCI code `unknown` (MANIFEST_UNKNOWN,
 * BLOB_UNKNOWN) unless it is the model that does not exist (NAME_UNKNOWN). */
void oci_reply_error(struct srv_req *r, const char *unknown, const struct mg_error *err);

/* Reply with a document of len bytes (copied) as a registry serves content: the type,
 * Docker-Content-Digest and ETag (its digest), Range (206/416) on GET. `immutable`: named
 * by digest, so a client may keep it; otherwise (named by a tag) it is not cached. */
void oci_reply_doc(struct srv_req *r, const char *content_type, const char *digest,
                   const char *data, size_t len, bool immutable);

/* The headers every served blob carries (ETag, Docker-Content-Digest, Accept-Ranges,
 * Cache-Control), on the reply set last. */
void oci_content_headers(struct srv_req *r, const char *digest, bool immutable);

/* GET|HEAD /v2/{model}/blobs/{digest}, and the cleanup of its deferred work (oci_blobs.c). */
void oci_blob_get(struct srv_req *r);
void oci_blob_cleanup(struct srv_req *r);

#endif
