/*
 * oci_blobs.c - GET|HEAD /v2/{model}/blobs/{digest}: what a model's manifests reference.
 *   - a version's config, manifest, referrer: the kept documents;
 *   - its signature bundle: the bundle stored at creation;
 *   - the empty config ({}) of the referrer;
 *   - a whole artifact: the stored blob, through api_serve_blob (every blob backend);
 *   - one file of an archive: from the layer cache (api/oci_cache.h), unpacked and
 *     checked on first use, on a worker thread.
 * A digest that no version of the model references is BLOB_UNKNOWN, whatever else the
 * store holds: a model's path never reaches another model's bytes.
 */
#include "oci_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../artifact/modelpack.h"
#include "../base/util.h"
#include "oci_cache.h"

/* A file layer's bytes, being made available off the HTTP threads (srv_defer_work). */
struct layer_job {
    char model[64];
    int64_t version;
    char artifact[72];
    char digest[72];
    uint64_t size;
    int fd;
    enum mg_code rc;
    struct mg_error err;
};

void oci_blob_cleanup(struct srv_req *r)
{
    struct layer_job *j = r->stream;

    if (j == NULL)
        return;
    if (j->fd >= 0)
        close(j->fd);
    free(j);
    r->stream = NULL;
}

/* Serve size bytes of a cached file (fd is handed to the reply), with Range. */
static void serve_fd(struct srv_req *r, int fd, uint64_t size, const char *digest)
{
    const char *range = srv_header(r, "Range");
    static const char type[] = "application/octet-stream";
    uint64_t off = 0, len = size;
    char cr[96];

    if (range != NULL && strcmp(r->method, "GET") == 0) {
        if (!api_range_parse(range, size, &off, &len)) {
            close(fd);
            srv_fail(r, MG_ERANGE, "Range",
                     "the Range header asks for bytes outside the %llu bytes of %s, or for "
                     "several ranges",
                     (unsigned long long)size, digest);
            snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
            srv_reply_header(r, "Content-Range", cr);
            return;
        }
        srv_reply_fd(r, 206, type, fd, off, len);
        snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)off,
                 (unsigned long long)(off + len - 1), (unsigned long long)size);
        srv_reply_header(r, "Content-Range", cr);
    } else {
        srv_reply_fd(r, 200, type, fd, 0, len);
    }
    if (r->status == 200 || r->status == 206)
        oci_content_headers(r, digest, true);
}

/* On a worker: the archive's file list, then the cache (unpacking when needed). */
static void layer_work(struct srv_req *r)
{
    struct layer_job *j = r->stream;
    json_t *files = NULL;

    j->rc = store_version_files(r->srv->store, j->model, j->version, &files, &j->err);
    if (j->rc == MG_OK)
        j->rc =
            srv_oci_cache_fill(r->srv, j->digest + 7, j->size, j->artifact, files, &j->fd, &j->err);
    json_decref(files);
}

static void layer_reply(struct srv_req *r)
{
    struct layer_job *j = r->stream;
    int fd = j->fd;

    if (j->rc != MG_OK) {
        oci_reply_error(r, "BLOB_UNKNOWN", &j->err);
        return;
    }
    j->fd = -1; /* the reply owns it now */
    serve_fd(r, fd, j->size, j->digest);
}

/* A file of an archive: HEAD from the file manifest alone; GET from the cache. */
static void file_layer(struct srv_req *r, const json_t *found, const char *digest)
{
    struct layer_job *j;
    uint64_t size = (uint64_t)json_integer_value(json_object_get(found, "size"));
    int fd;

    if (strcmp(r->method, "HEAD") == 0) {
        srv_reply_head(r, 200, "application/octet-stream", size);
        oci_content_headers(r, digest, true);
        return;
    }
    if (srv_oci_cache_lookup(r->srv->oci_cache, digest + 7, size, &fd)) {
        serve_fd(r, fd, size, digest);
        return;
    }
    if ((j = calloc(1, sizeof(*j))) == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    snprintf(j->model, sizeof(j->model), "%s", srv_param(r, "model"));
    j->version = json_integer_value(json_object_get(found, "version"));
    snprintf(j->artifact, sizeof(j->artifact), "%s",
             json_string_value(json_object_get(found, "artifact")));
    snprintf(j->digest, sizeof(j->digest), "%s", digest);
    j->size = size;
    j->fd = -1;
    r->stream = j;
    srv_defer_work(r, layer_work, layer_reply);
}

/* The version's signature bundle, as stored at creation. */
static void bundle_blob(struct srv_req *r, const json_t *found, const char *digest)
{
    const char *model = srv_param(r, "model");
    int64_t n = json_integer_value(json_object_get(found, "version"));
    char *bundle = NULL, hex[65];
    size_t len = 0;
    struct mg_error err;

    if (store_version_signature(r->srv->store, model, n, &bundle, &len, &err) != MG_OK) {
        oci_reply_error(r, "BLOB_UNKNOWN", &err);
        return;
    }
    mg_sha256_hex(bundle, len, hex);
    if (strcmp(hex, digest + 7) != 0) /* stored bundles never change; say so if one did */
        srv_fail(r, MG_EIO, NULL, "the signature bundle of %s v%lld no longer hashes to %s", model,
                 (long long)n, digest);
    else
        oci_reply_doc(r, ART_SIGSTORE_BUNDLE, digest, bundle, len, true);
    free(bundle);
}

void oci_blob_get(struct srv_req *r)
{
    const char *model = srv_param(r, "model"), *digest = srv_param(r, "digest"), *kind;
    json_t *found = NULL;
    struct mg_error err;
    const char *text = NULL, *type = NULL;

    if (strcmp(digest, ART_OCI_EMPTY_DIGEST) == 0) { /* the referrer's empty config */
        if (oci_model_exists(r, model))
            oci_reply_doc(r, ART_OCI_EMPTY, digest, "{}", 2, true);
        return;
    }
    if (store_oci_find(r->srv->store, model, digest, &found, &err) != MG_OK) {
        char *body = NULL;
        struct mg_error err2;
        /* a scan report that a referrer carries */
        if (err.code == MG_ENOTFOUND &&
            store_oci_scan_find(r->srv->store, model, digest, "report", &body, &err2) == MG_OK) {
            if (oci_model_exists(r, model))
                oci_reply_doc(r, "application/vnd.modelgate.scan.v1+json", digest, body,
                              strlen(body), true);
            free(body);
            return;
        }
        oci_reply_error(r, "BLOB_UNKNOWN", &err);
        return;
    }
    kind = json_string_value(json_object_get(found, "kind"));
    if (strcmp(kind, "manifest") == 0) {
        text = json_string_value(json_object_get(found, "manifest"));
        type = ART_OCI_MANIFEST;
    } else if (strcmp(kind, "referrer") == 0) {
        text = json_string_value(json_object_get(found, "referrer"));
        type = ART_OCI_MANIFEST;
    } else if (strcmp(kind, "config") == 0) {
        text = json_string_value(json_object_get(found, "config"));
        type = ART_MODELPACK_CONFIG;
    } else if (strcmp(kind, "attestation") == 0) { /* a release attestation's referrer */
        text = json_string_value(json_object_get(found, "manifest"));
        type = ART_OCI_MANIFEST;
    } else if (strcmp(kind, "attestation_bundle") == 0) {
        text = json_string_value(json_object_get(found, "bundle"));
        type = ART_SIGSTORE_BUNDLE;
    }
    if (text != NULL) {
        oci_reply_doc(r, type, digest, text, strlen(text), true);
    } else if (strcmp(kind, "bundle") == 0) {
        bundle_blob(r, found, digest);
    } else if (strcmp(kind, "artifact") == 0) {
        /* The stored blob itself, whichever backend holds it. */
        r->oci_code = "BLOB_UNKNOWN";
        api_serve_blob(r, digest);
        if (r->status == 200 || r->status == 206)
            srv_reply_header(r, "Docker-Content-Digest", digest);
    } else {
        file_layer(r, found, digest);
    }
    json_decref(found);
}
