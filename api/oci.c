/*
 * oci.c - /v2/: every version pulled with standard OCI clients (docs/contract.md "OCI distribution
 * (read-only)"): the base and token endpoints, manifests by tag (v{n}, or an alias: its
 * last-known-good) or digest, tags, referrers (the signature bundle), and writes refused.
 * Blobs are oci_blobs.c.
 *
 * A version's manifest, config and referrer are computed once from the version's
 * immutable record (artifact/modelpack.h) and kept (store_oci_put): a version has one
 * manifest digest for ever, whichever replica answers.
 */
#include "oci_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "../artifact/modelpack.h"
#include "../base/util.h"
#include "../control/release.h"

/* ---- shared with oci_blobs.c ------------------------------------------------------------- */

bool oci_model_exists(struct srv_req *r, const char *model)
{
    json_t *owners = NULL;
    struct mg_error err;
    enum mg_code rc = store_model_owners(r->srv->store, model, &owners, &err);

    json_decref(owners);
    if (rc == MG_OK)
        return true;
    if (rc == MG_ENOTFOUND) /* the very words a model the token may not see gets */
        srv_fail(r, MG_ENOTFOUND, "model", "model '%s' does not exist", model);
    else
        srv_reply_error(r, &err);
    return false;
}

void oci_reply_error(struct srv_req *r, const char *unknown, const struct mg_error *err)
{
    if (err->code == MG_ENOTFOUND && strcmp(err->field, "model") != 0)
        r->oci_code = unknown;
    srv_reply_error(r, err);
}

void oci_content_headers(struct srv_req *r, const char *digest, bool immutable)
{
    char etag[80];

    snprintf(etag, sizeof(etag), "\"%s\"", digest);
    srv_reply_header(r, "ETag", etag);
    srv_reply_header(r, "Docker-Content-Digest", digest);
    srv_reply_header(r, "Accept-Ranges", "bytes");
    /* private: reading needs a token, so no shared cache may keep it (as for REST blobs). */
    if (immutable)
        srv_reply_header(r, "Cache-Control", "private, max-age=31536000, immutable");
}

void oci_reply_doc(struct srv_req *r, const char *content_type, const char *digest,
                   const char *data, size_t len, bool immutable)
{
    const char *range = srv_header(r, "Range");
    uint64_t off = 0, n = len;
    char cr[96];

    if (range != NULL && strcmp(r->method, "GET") == 0) {
        if (!api_range_parse(range, len, &off, &n)) {
            srv_fail(r, MG_ERANGE, "Range",
                     "the Range header asks for bytes outside the %zu bytes of %s, or for "
                     "several ranges",
                     len, digest);
            snprintf(cr, sizeof(cr), "bytes */%zu", len);
            srv_reply_header(r, "Content-Range", cr);
            return;
        }
        srv_reply_bytes(r, 206, content_type, data + off, (size_t)n);
        snprintf(cr, sizeof(cr), "bytes %llu-%llu/%zu", (unsigned long long)off,
                 (unsigned long long)(off + n - 1), len);
        srv_reply_header(r, "Content-Range", cr);
    } else {
        srv_reply_bytes(r, 200, content_type, data, len);
    }
    oci_content_headers(r, digest, immutable);
}

enum mg_code oci_docs(struct srv *srv, const char *model, int64_t n, json_t **out,
                      struct mg_error *err)
{
    json_t *docs = NULL, *ver = NULL, *files = NULL;
    struct art_modelpack mp;
    char *bundle = NULL;
    size_t blen = 0;
    enum mg_code rc;

    memset(&mp, 0, sizeof(mp));
    if ((rc = store_oci_get(srv->store, model, n, &docs, err)) != MG_OK || docs != NULL)
        goto out;
    /* The first pull of this version anywhere: compute and keep. */
    if ((rc = store_version_get(srv->store, model, n, &ver, err)) != MG_OK)
        goto out;
    if (json_is_integer(json_object_get(json_object_get(ver, "artifact"), "files")) &&
        (rc = store_version_files(srv->store, model, n, &files, err)) != MG_OK)
        goto out;
    rc = store_version_signature(srv->store, model, n, &bundle, &blen, err);
    if (rc == MG_ENOTFOUND) { /* a version signed by no key (a store opened without one) */
        mg_error_clear(err);
        rc = MG_OK;
    }
    if (rc != MG_OK || (rc = art_modelpack_build(ver, files, bundle, blen, &mp, err)) != MG_OK)
        goto out;
    docs = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:s?, s:s?}", "digest", mp.manifest.digest,
                     "manifest", mp.manifest.text, "config_digest", mp.config.digest, "config",
                     mp.config.text, "referrer_digest",
                     mp.referrer.text ? mp.referrer.digest : NULL, "referrer", mp.referrer.text,
                     "bundle_digest", mp.bundle_digest[0] ? mp.bundle_digest : NULL);
    if (docs == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = store_oci_put(srv->store, model, n, docs, out, err);
    json_decref(docs);
    docs = NULL;
out:
    if (rc == MG_OK && docs != NULL)
        *out = docs;
    else
        json_decref(docs);
    art_modelpack_release(&mp);
    json_decref(ver);
    json_decref(files);
    free(bundle);
    return rc;
}

/* ---- GET /v2/ and the token endpoint ----------------------------------------------------- */

static void base(struct srv_req *r)
{
    srv_reply_json(r, 200, json_object());
    srv_reply_header(r, "Docker-Distribution-API-Version", "registry/2.0");
}

/*
 * GET /v2/token (the distribution token flow): a client that was given Basic credentials
 * (any user name, a modelgate token as password) trades them here for a bearer token. The
 * answer is the very token it presented, nothing new: no secret is minted, so nothing
 * outlives a revocation (every request checks the token against the store) and nothing is
 * granted that the token had not (its roles and teams still decide each request; the
 * requested scope is not a grant). Only the holder of the token ever receives it, never
 * cached (no-store).
 */
static void token(struct srv_req *r)
{
    char secret[256], at[32];
    json_t *out;

    if (!srv_oci_credentials(r, secret, sizeof(secret))) {
        srv_fail(r, MG_EUNAUTH, NULL,
                 "send a modelgate token as the password of Basic credentials");
        return;
    }
    mg_time_format(mg_now_ms(), at);
    out = json_pack("{s:s, s:s, s:i, s:s}", "token", secret, "access_token", secret, "expires_in",
                    300, "issued_at", at);
    OPENSSL_cleanse(secret, sizeof(secret));
    srv_reply_json(r, 200, out);
    srv_reply_header(r, "Pragma", "no-cache");
}

/* ---- manifests --------------------------------------------------------------------------- */

/* Does the Accept header admit type? No header, or a media range that covers it (q > 0). */
static bool accepts(const char *accept, const char *type)
{
    const char *p = accept;

    if (accept == NULL || *accept == '\0')
        return true;
    while (*p) {
        size_t n = strcspn(p, ","), t;
        const char *q;
        char range[160];
        bool refused;

        while (n > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        t = strcspn(p, ";,");
        while (t > 0 && (p[t - 1] == ' ' || p[t - 1] == '\t'))
            t--;
        if (t < sizeof(range)) {
            memcpy(range, p, t);
            range[t] = '\0';
            q = memmem(p, n, "q=0", 3);
            /* q=0 (or 0.0, 0.00, 0.000) refuses the range */
            refused = q != NULL && strspn(q + 3, ".0") == strcspn(q + 3, ",; \t");
            if (!refused && (strcasecmp(range, type) == 0 || strcmp(range, "*/*") == 0 ||
                             strcasecmp(range, "application/*") == 0))
                return true;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return false;
}

/* The version a tag names: v{n}, or an alias (its last-known-good, so a rollback shows at
 * the next pull). 0 with err filled when none. */
static int64_t tag_version(struct srv *srv, const char *model, const char *tag,
                           struct mg_error *err)
{
    json_t *lkg = NULL;
    int64_t n = 0;
    enum mg_code rc;

    if (tag[0] == 'v' && tag[1] >= '1' && tag[1] <= '9' && mg_parse_i64(tag + 1, 1, INT64_MAX, &n))
        return n;
    if (!mg_valid_alias_name(tag, strlen(tag))) {
        mg_fail(err, MG_ENOTFOUND, NULL,
                "model '%s' has no tag '%.128s': tags are v1, v2, ... and alias names", model, tag);
        return 0;
    }
    rc = rel_lkg(srv->ctl, model, tag, &lkg, err);
    if (rc == MG_OK)
        n = json_integer_value(json_object_get(lkg, "version"));
    else if (rc == MG_ENOLKG)
        mg_fail(err, MG_ENOTFOUND, NULL,
                "model '%s' has no alias '%s' with a last-known-good version to pull", model, tag);
    json_decref(lkg);
    return n;
}

static void manifest(struct srv_req *r)
{
    const char *model = srv_param(r, "model"), *ref = srv_param(r, "ref"), *text, *digest;
    json_t *docs = NULL;
    struct mg_error err;
    bool by_digest = mg_valid_digest(ref, strlen(ref));
    int64_t n;
    enum mg_code rc;

    if (!oci_model_exists(r, model))
        return;
    if (!accepts(srv_header(r, "Accept"), ART_OCI_MANIFEST)) {
        r->oci_code = "MANIFEST_UNKNOWN";
        srv_fail(r, MG_ENOTFOUND, "Accept",
                 "the manifest is an OCI image manifest (%s), which the Accept header does not "
                 "admit",
                 ART_OCI_MANIFEST);
        return;
    }
    if (by_digest) {
        rc = store_oci_find(r->srv->store, model, ref, &docs, &err);
        if (rc == MG_ENOTFOUND) { /* a scan report's referrer (referrers lists it) */
            char *body = NULL;
            struct mg_error err2;
            if (store_oci_scan_find(r->srv->store, model, ref, "manifest", &body, &err2) == MG_OK) {
                oci_reply_doc(r, ART_OCI_MANIFEST, ref, body, strlen(body), true);
                free(body);
                return;
            }
        }
        if (rc == MG_OK && strcmp(json_string_value(json_object_get(docs, "kind")), "manifest") &&
            strcmp(json_string_value(json_object_get(docs, "kind")), "referrer") &&
            strcmp(json_string_value(json_object_get(docs, "kind")), "attestation"))
            rc =
                mg_fail(&err, MG_ENOTFOUND, NULL, "%s is not a manifest of model '%s'", ref, model);
    } else if ((n = tag_version(r->srv, model, ref, &err)) == 0) {
        rc = err.code;
    } else {
        rc = oci_docs(r->srv, model, n, &docs, &err);
    }
    if (rc != MG_OK) {
        json_decref(docs);
        oci_reply_error(r, "MANIFEST_UNKNOWN", &err);
        return;
    }
    if (by_digest && strcmp(json_string_value(json_object_get(docs, "kind")), "referrer") == 0) {
        text = json_string_value(json_object_get(docs, "referrer"));
        digest = json_string_value(json_object_get(docs, "referrer_digest"));
    } else {
        text = json_string_value(json_object_get(docs, "manifest"));
        digest = json_string_value(json_object_get(docs, "digest"));
    }
    /* By digest the bytes never change; by tag the next pull may get another version. */
    oci_reply_doc(r, ART_OCI_MANIFEST, digest, text, strlen(text), by_digest);
    json_decref(docs);
}

/* ---- tags -------------------------------------------------------------------------------- */

static int tag_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every tag of the model, sorted ("ASCIIbetical", as the spec allows): v1..vN and the
 * aliases that have a last-known-good version (an alias spelled like v{n} is that
 * version's tag). *out malloc'd, each tag too. */
static enum mg_code all_tags(struct srv *srv, const char *model, char ***out, size_t *count,
                             struct mg_error *err)
{
    json_t *m = NULL, *aliases = NULL, *a, *hidden = NULL;
    char **tags = NULL;
    int64_t latest, v;
    size_t n = 0, cap, i;
    enum mg_code rc;

    *out = NULL;
    *count = 0;
    if ((rc = store_model_get(srv->store, model, &m, err)) != MG_OK ||
        (rc = rel_alias_list(srv->ctl, model, &aliases, err)) != MG_OK ||
        (rc = store_versions_unavailable(srv->store, model, &hidden, err)) != MG_OK)
        goto out;
    latest = json_integer_value(json_object_get(m, "latest_version"));
    cap = (size_t)latest + json_array_size(json_object_get(aliases, "items")) + 1;
    if ((tags = calloc(cap, sizeof(*tags))) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (v = 1; v <= latest; v++) {
        char key[24];

        /* Archived versions are listed only when asked for, deleted ones have no bytes:
         * neither is a tag (docs/contract.md "Lifecycle"); an archived one still pulls by v{n}. */
        snprintf(key, sizeof(key), "%lld", (long long)v);
        if (json_object_get(hidden, key) != NULL)
            continue;
        if (asprintf(&tags[n], "v%lld", (long long)v) < 0) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        n++;
    }
    json_array_foreach(json_object_get(aliases, "items"), i, a)
    {
        const char *name = json_string_value(json_object_get(a, "alias"));
        int64_t shadow = 0;

        if (name == NULL || !json_is_object(json_object_get(a, "last_known_good")))
            continue;
        if (name[0] == 'v' && name[1] >= '1' && name[1] <= '9' &&
            mg_parse_i64(name + 1, 1, INT64_MAX, &shadow) && shadow <= latest)
            continue; /* v{n} names version n */
        if ((tags[n] = strdup(name)) == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        n++;
    }
    qsort(tags, n, sizeof(*tags), tag_order);
    *out = tags;
    *count = n;
    tags = NULL;
out:
    for (i = 0; tags && i < n; i++)
        free(tags[i]);
    free(tags);
    json_decref(m);
    json_decref(aliases);
    json_decref(hidden);
    return rc;
}

/* GET /v2/{model}/tags/list[?n=N][&last=TAG]: sorted, paginated by `last` with a Link to
 * the next page when n cut the list. */
static void tags(struct srv_req *r)
{
    const char *model = srv_param(r, "model"), *nq = srv_query(r, "n"),
               *last = srv_query(r, "last");
    char **all = NULL, link[400];
    size_t count = 0, i, start = 0, shown = 0;
    int64_t limit = -1;
    json_t *list = NULL;
    struct mg_error err;

    if (nq != NULL && !mg_parse_i64(nq, 0, 100000, &limit)) {
        srv_fail(r, MG_EINVAL, "n", "n is a number of tags from 0 to 100000");
        return;
    }
    if (last != NULL && (strlen(last) == 0 || strlen(last) > 128)) {
        srv_fail(r, MG_EINVAL, "last", "last is a tag: 1 to 128 characters");
        return;
    }
    if (!oci_model_exists(r, model))
        return;
    if (all_tags(r->srv, model, &all, &count, &err) != MG_OK) {
        oci_reply_error(r, "NAME_UNKNOWN", &err);
        return;
    }
    while (last != NULL && start < count && strcmp(all[start], last) <= 0)
        start++;
    if ((list = json_array()) == NULL)
        goto out;
    for (i = start; i < count && (limit < 0 || (int64_t)shown < limit); i++, shown++)
        json_array_append_new(list, json_string(all[i]));
    srv_reply_json(r, 200, json_pack("{s:s, s:O}", "name", model, "tags", list));
    if (limit > 0 && i < count) {
        /* Tags are v{n} and alias names: nothing in them needs escaping in a URL. */
        snprintf(link, sizeof(link), "</v2/%s/tags/list?n=%lld&last=%s>; rel=\"next\"", model,
                 (long long)limit, all[i - 1]);
        srv_reply_header(r, "Link", link);
    }
out:
    if (list == NULL)
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
    json_decref(list);
    for (i = 0; i < count; i++)
        free(all[i]);
    free(all);
}

/* ---- referrers --------------------------------------------------------------------------- */

#define SCAN_TYPE "application/vnd.modelgate.scan.v1+json"

/* "sha256:<hex>" of text. */
static void text_digest(const char *text, char out[72])
{
    memcpy(out, "sha256:", 7);
    mg_sha256_hex(text, strlen(text), out + 7);
}

/*
 * The scan report of the version whose documents are `docs`, as a referrer of its manifest:
 * the report blob (the version's "scan", compact with sorted keys) and a manifest whose
 * subject is the version's manifest, both remembered under their digests so that they can
 * be fetched. *desc: NEW descriptor for the referrers index, or NULL when the version has
 * no report.
 */
static enum mg_code scan_referrer(struct srv *srv, const char *model, const json_t *docs,
                                  json_t **desc, struct mg_error *err)
{
    int64_t n = json_integer_value(json_object_get(docs, "version"));
    const char *mtext = json_string_value(json_object_get(docs, "manifest"));
    json_t *ver = NULL, *scan, *m = NULL;
    char *report = NULL, *mbody = NULL, rdig[72], mdig[72];
    enum mg_code rc;

    *desc = NULL;
    if ((rc = store_version_get(srv->store, model, n, &ver, err)) != MG_OK)
        return rc;
    scan = json_object_get(ver, "scan");
    if (!json_is_object(scan) || mtext == NULL)
        goto out;
    if ((report = json_dumps(scan, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
        goto nomem;
    text_digest(report, rdig);
    m = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:i}, s:[{s:s, s:s, s:I}], s:{s:s, s:O, s:I}, "
                  "s:{s:O}}",
                  "schemaVersion", 2, "mediaType", ART_OCI_MANIFEST, "artifactType", SCAN_TYPE,
                  "config", "mediaType", ART_OCI_EMPTY, "digest", ART_OCI_EMPTY_DIGEST, "size", 2,
                  "layers", "mediaType", SCAN_TYPE, "digest", rdig, "size",
                  (json_int_t)strlen(report), "subject", "mediaType", ART_OCI_MANIFEST, "digest",
                  json_object_get(docs, "digest"), "size", (json_int_t)strlen(mtext), "annotations",
                  "dev.modelgate.scan.verdict", json_object_get(scan, "verdict"));
    if (m == NULL || (mbody = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
        goto nomem;
    text_digest(mbody, mdig);
    {
        /* written once: later listings only read */
        struct mg_error e2;
        char *have = NULL;
        bool known = store_oci_scan_find(srv->store, model, mdig, "manifest", &have, &e2) == MG_OK;
        free(have);
        if (!known &&
            ((rc = store_oci_scan_put(srv->store, model, n, rdig, "report", report, err)) !=
                 MG_OK ||
             (rc = store_oci_scan_put(srv->store, model, n, mdig, "manifest", mbody, err)) !=
                 MG_OK))
            goto out;
    }
    *desc = json_pack("{s:s, s:s, s:I, s:s, s:O}", "mediaType", ART_OCI_MANIFEST, "digest", mdig,
                      "size", (json_int_t)strlen(mbody), "artifactType", SCAN_TYPE, "annotations",
                      json_object_get(m, "annotations"));
    if (*desc == NULL)
        goto nomem;
    goto out;
nomem:
    rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(ver);
    json_decref(m);
    free(report);
    free(mbody);
    return rc;
}

/*
 * The signed release attestations of the generations routing the version whose manifest
 * docs is (docs/contract.md "Signed releases"), as referrer descriptors appended to list. Each
 * referrer manifest is made here (its subject, the version's manifest, exists once the
 * version was first pulled) and kept under its digest so a pull by digest finds the same
 * bytes. false: an error reply is set.
 */
static bool attestation_referrers(struct srv_req *r, const char *model, const json_t *docs,
                                  json_t *list)
{
    const char *mdigest = json_string_value(json_object_get(docs, "digest"));
    const char *mtext = json_string_value(json_object_get(docs, "manifest"));
    json_t *atts = NULL, *a, *m;
    struct mg_error err;
    char hex[65], digest[72], gen[24], *text;
    size_t i;
    bool ok = false;

    if (store_version_attestations(r->srv->store, model,
                                   json_integer_value(json_object_get(docs, "version")), &atts,
                                   &err) != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    json_array_foreach(atts, i, a)
    {
        snprintf(gen, sizeof(gen), "%lld",
                 (long long)json_integer_value(json_object_get(a, "generation")));
        m = json_pack(
            "{s:i, s:s, s:s, s:{s:s, s:s, s:i, s:s}, s:[{s:s, s:O, s:O}], s:{s:s, s:s, s:I}, "
            "s:{s:s, s:s, s:O, s:s}}",
            "schemaVersion", 2, "mediaType", ART_OCI_MANIFEST, "artifactType", ART_SIGSTORE_BUNDLE,
            "config", "mediaType", ART_OCI_EMPTY, "digest", ART_OCI_EMPTY_DIGEST, "size", 2, "data",
            "e30=", "layers", "mediaType", ART_SIGSTORE_BUNDLE, "digest",
            json_object_get(a, "bundle_digest"), "size", json_object_get(a, "bundle_size"),
            "subject", "mediaType", ART_OCI_MANIFEST, "digest", mdigest, "size",
            (json_int_t)strlen(mtext), "annotations", "dev.sigstore.bundle.content",
            "dsse-envelope", "dev.sigstore.bundle.predicateType",
            "https://modelgate.dev/release/v1", "dev.modelgate.alias", json_object_get(a, "alias"),
            "dev.modelgate.generation", gen);
        text = m ? json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (text == NULL) {
            json_decref(m);
            srv_fail(r, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        mg_sha256_hex(text, strlen(text), hex);
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        if (store_oci_attestation_put(r->srv->store, model, digest, text, &err) != MG_OK) {
            free(text);
            json_decref(m);
            srv_reply_error(r, &err);
            goto out;
        }
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:I, s:s, s:O}", "mediaType", ART_OCI_MANIFEST, "digest",
                            digest, "size", (json_int_t)strlen(text), "artifactType",
                            ART_SIGSTORE_BUNDLE, "annotations", json_object_get(m, "annotations")));
        free(text);
        json_decref(m);
    }
    ok = true;
out:
    json_decref(atts);
    return ok;
}

/*
 * GET /v2/{model}/referrers/{digest}: an image index of the manifests whose subject is
 * digest. A version's manifest has one, when the version is signed: the referrer that
 * carries its Sigstore bundle. Anything else (or a manifest not known) has none: an empty
 * index, never 404 (the spec). ?artifactType= filters.
 */
static void referrers(struct srv_req *r)
{
    const char *model = srv_param(r, "model"), *digest = srv_param(r, "digest");
    const char *want = srv_query(r, "artifactType"), *text;
    json_t *docs = NULL, *index = NULL, *ref = NULL, *list;
    struct mg_error err;
    enum mg_code rc;
    char *body = NULL; /* freed at out: also on the early exits */

    if (!oci_model_exists(r, model))
        return;
    rc = store_oci_find(r->srv->store, model, digest, &docs, &err);
    if (rc != MG_OK && rc != MG_ENOTFOUND) {
        srv_reply_error(r, &err);
        return;
    }
    index =
        json_pack("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType", ART_OCI_INDEX, "manifests");
    list = json_object_get(index, "manifests");
    text = json_string_value(json_object_get(docs, "referrer"));
    if (rc == MG_OK && strcmp(json_string_value(json_object_get(docs, "kind")), "manifest") == 0 &&
        text != NULL && (want == NULL || strcmp(want, ART_SIGSTORE_BUNDLE) == 0) &&
        (ref = json_loads(text, 0, NULL)) != NULL)
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:I, s:s, s:O}", "mediaType", ART_OCI_MANIFEST, "digest",
                            json_string_value(json_object_get(docs, "referrer_digest")), "size",
                            (json_int_t)strlen(text), "artifactType", ART_SIGSTORE_BUNDLE,
                            "annotations", json_object_get(ref, "annotations")));
    if (rc == MG_OK && strcmp(json_string_value(json_object_get(docs, "kind")), "manifest") == 0 &&
        (want == NULL || strcmp(want, ART_SIGSTORE_BUNDLE) == 0) &&
        !attestation_referrers(r, model, docs, list))
        goto out;
    if (rc == MG_OK && strcmp(json_string_value(json_object_get(docs, "kind")), "manifest") == 0 &&
        (want == NULL || strcmp(want, SCAN_TYPE) == 0)) {
        json_t *desc = NULL;
        if (scan_referrer(r->srv, model, docs, &desc, &err) != MG_OK) {
            srv_reply_error(r, &err);
            goto out;
        }
        if (desc != NULL)
            json_array_append_new(list, desc);
    }
    body = index ? json_dumps(index, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (body == NULL)
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
    else
        srv_reply_bytes(r, 200, ART_OCI_INDEX, body, strlen(body));
    if (body != NULL && want != NULL)
        srv_reply_header(r, "OCI-Filters-Applied", "artifactType");
out:
    free(body);
    json_decref(ref);
    json_decref(index);
    json_decref(docs);
}

/* ---- writes ------------------------------------------------------------------------------ */

/* Pushes, uploads and deletes: answered before any body is read (SRV_BODY_REFUSED). */
static void unsupported(struct srv_req *r)
{
    srv_fail(r, MG_EMETHOD, NULL,
             "this registry is read-only: publish versions through the REST API (POST "
             "/api/v1/blobs, then POST /api/v1/models/{model}/versions)");
}

#define M "/v2/{model}"
const struct srv_route api_routes_oci[] = {
    {"GET", "/v2/", MG_NEED_ANY, SRV_BODY_NONE, base, NULL, NULL, NULL},
    {"GET", "/v2/token", MG_NEED_ANY, SRV_BODY_NONE, token, NULL, NULL, NULL},
    {"GET", M "/manifests/{ref}", MG_ROLE_READER, SRV_BODY_NONE, manifest, NULL, NULL, NULL},
    {"PUT", M "/manifests/{ref}", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL, NULL},
    {"DELETE", M "/manifests/{ref}", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL,
     NULL},
    {"GET", M "/blobs/{digest}", MG_ROLE_READER, SRV_BODY_NONE, oci_blob_get, NULL, NULL,
     oci_blob_cleanup},
    {"DELETE", M "/blobs/{digest}", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL,
     NULL},
    {"POST", M "/blobs/uploads/", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL, NULL},
    {"PATCH", M "/blobs/uploads/{id}", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL,
     NULL},
    {"PUT", M "/blobs/uploads/{id}", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL,
     NULL},
    {"DELETE", M "/blobs/uploads/{id}", MG_NEED_PUBLIC, SRV_BODY_REFUSED, unsupported, NULL, NULL,
     NULL},
    {"GET", M "/tags/list", MG_ROLE_READER, SRV_BODY_NONE, tags, NULL, NULL, NULL},
    {"GET", M "/referrers/{digest}", MG_ROLE_READER, SRV_BODY_NONE, referrers, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
