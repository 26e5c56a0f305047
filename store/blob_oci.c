/*
 * blob_oci.c - blobs in an OCI distribution registry (distribution-spec v1.0).
 *
 * An upload is a registry upload session: POST /v2/<repo>/blobs/uploads/, the
 * bytes in one streamed PATCH (chunked transfer encoding, fed through a bounded
 * buffer by a thread of its own: constant memory, and no per-chunk restart cost
 * in the registry, which re-reads what it has on every chunked PATCH), and PUT
 * …?digest=, which the registry checks against the bytes. Registries collect blobs that no manifest
 * references, so every stored blob gets a small image manifest tagged sha256-<hex> whose one layer
 * is the blob (its config is the empty JSON object). Deleting removes that manifest and the blob
 * through the registry's delete API.
 *
 * Auth: anonymous, HTTP Basic, or the bearer-token flow (401 with
 * WWW-Authenticate: Bearer realm=…,service=…,scope=… → GET realm → token), with the
 * user:password of --blobs-credentials. The header that worked is reused until a
 * 401 asks for another. insecure=true means plain http; TLS is never unverified.
 */
#include "blob_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#define EMPTY_CONFIG "{}"
#define EMPTY_CONFIG_DIGEST                                                                        \
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
#define MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"
#define LAYER_TYPE "application/vnd.oci.image.layer.v1.tar"
#define TOKEN_MAX (16u << 10)

struct oci_backend {
    char base[300]; /* http(s)://host:port */
    char repo[256]; /* name/space */
    char *user, *pass;
    pthread_mutex_t lock;
    char *auth;     /* "Authorization: …" that worked last, or NULL (under lock) */
    bool config_ok; /* the empty config blob is there (under lock) */
};

struct oci_put {
    struct blob_put base;
    struct oci_backend *o;
    char session[2048];     /* the upload's current URL (Location of the last reply) */
    struct blob_pipe *pipe; /* the streamed PATCH, from the first byte on */
    bool pipe_done;         /* blob_pipe_finish ran (the PATCH was answered or failed) */
    uint64_t sent;          /* bytes handed to it */
};

static struct oci_backend *ob(struct blob_backend *b)
{
    return b->impl;
}

#define SCHEME "oci://"

static enum mg_code oci_check_url(const char *url, struct mg_error *err)
{
    const char *h = url + strlen(SCHEME), *slash = strchr(h, '/');

    if (slash == NULL || slash == h || slash[1] == '\0' || slash[1] == '?')
        return mg_fail(err, MG_EINVAL, "blobs",
                       "--blobs oci://HOST:PORT/REPOSITORY: name the registry and a repository");
    return MG_OK;
}

/* oci://HOST:PORT/REPOSITORY[?insecure=true]; credentials (USER:PASSWORD) optional. */
static enum mg_code oci_open(struct blob_backend *b, const char *url, const char *creds,
                             struct mg_error *err)
{
    struct oci_backend *o = calloc(1, sizeof(*o));
    const char *h = url + strlen(SCHEME), *slash = strchr(h, '/'), *q;
    char v[16] = "";
    bool insecure = false;
    size_t rl;

    if (o == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    b->impl = o;
    pthread_mutex_init(&o->lock, NULL);
    q = strchr(slash, '?');
    if (q && blob_query_param(q + 1, "insecure", v, sizeof(v)))
        insecure = strcmp(v, "true") == 0;
    rl = q ? (size_t)(q - slash - 1) : strlen(slash + 1);
    if ((size_t)(slash - h) >= 250 || rl == 0 || rl >= sizeof(o->repo))
        return mg_fail(err, MG_EINVAL, "blobs", "--blobs oci://HOST:PORT/REPOSITORY is too long");
    snprintf(o->base, sizeof(o->base), "%s://%.*s", insecure ? "http" : "https", (int)(slash - h),
             h);
    memcpy(o->repo, slash + 1, rl);
    if (strspn(o->repo, "abcdefghijklmnopqrstuvwxyz0123456789._-/") != rl ||
        strstr(o->repo, "..") || strstr(o->repo, "//") || o->repo[rl - 1] == '/')
        return mg_fail(err, MG_EINVAL, "blobs",
                       "the OCI repository name is lowercase letters, digits and . _ - / "
                       "(e.g. oci://registry:5000/modelgate/blobs)");
    snprintf(b->desc, sizeof(b->desc), "OCI registry %.150s (repository %.120s)", o->base, o->repo);
    if (creds != NULL)
        return blob_read_credentials(creds, "USER:PASSWORD", &o->user, &o->pass, err);
    return MG_OK;
}

static void oci_close(struct blob_backend *b)
{
    struct oci_backend *o = ob(b);

    if (o->pass)
        OPENSSL_cleanse(o->pass, strlen(o->pass));
    if (o->auth)
        OPENSSL_cleanse(o->auth, strlen(o->auth));
    free(o->user);
    free(o->pass);
    free(o->auth);
    pthread_mutex_destroy(&o->lock);
    free(o);
    b->impl = NULL;
}

/* A parameter of a WWW-Authenticate challenge: key="value". */
static bool challenge_param(const char *ch, const char *key, char *out, size_t outsz)
{
    size_t kl = strlen(key);
    const char *p = ch;

    while ((p = strcasestr(p, key)) != NULL) {
        if ((p == ch || p[-1] == ' ' || p[-1] == ',') && p[kl] == '=' && p[kl + 1] == '"') {
            const char *a = p + kl + 2, *z = strchr(a, '"');
            size_t n;
            if (z == NULL)
                return false;
            n = (size_t)(z - a);
            if (n >= outsz)
                return false;
            memcpy(out, a, n);
            out[n] = '\0';
            return true;
        }
        p += kl;
    }
    return false;
}

static char *basic_header(struct oci_backend *o)
{
    char *up = NULL, *b64, *h = NULL;

    if (o->user == NULL || asprintf(&up, "%s:%s", o->user, o->pass) < 0)
        return NULL;
    b64 = mg_base64_encode((const uint8_t *)up, strlen(up));
    OPENSSL_cleanse(up, strlen(up));
    free(up);
    if (b64 == NULL || asprintf(&h, "Authorization: Basic %s", b64) < 0)
        h = NULL;
    if (b64) {
        OPENSSL_cleanse(b64, strlen(b64));
        free(b64);
    }
    return h;
}

/* The bearer flow: ask the challenge's realm for a token (with Basic credentials when
 * we have them and the realm is https, or the registry itself is plain http). */
static enum mg_code fetch_token(struct blob_backend *b, const char *challenge, char **header,
                                struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    char realm[512], service[256] = "", scope[512] = "", *url = NULL, *es, *esc;
    struct blob_http_resp r;
    struct curl_slist *h = NULL;
    json_t *j = NULL;
    const char *tok;
    CURL *c = NULL;
    enum mg_code rc;

    *header = NULL;
    if (!challenge_param(challenge, "realm", realm, sizeof(realm)) ||
        (strncmp(realm, "https://", 8) != 0 && strncmp(realm, "http://", 7) != 0))
        return mg_fail(err, MG_EUNAVAIL, NULL, "the %s asks for a token from no usable realm",
                       b->desc);
    challenge_param(challenge, "service", service, sizeof(service));
    if (!challenge_param(challenge, "scope", scope, sizeof(scope)))
        snprintf(scope, sizeof(scope), "repository:%s:pull,push,delete", o->repo);
    es = blob_sigv4_encode(service, false);
    esc = blob_sigv4_encode(scope, false);
    if (es == NULL || esc == NULL ||
        asprintf(&url, "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?", es, esc) <
            0) {
        free(es);
        free(esc);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(es);
    free(esc);
    blob_http_resp_init(&r);
    mg_buf_release(&r.body);
    mg_buf_init(&r.body, TOKEN_MAX);
    if ((c = blob_http_easy(&r)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (o->user && (strncmp(realm, "https://", 8) == 0 || strncmp(o->base, "http://", 7) == 0)) {
        char *bh = basic_header(o);
        h = bh ? curl_slist_append(NULL, bh) : NULL;
        if (bh) {
            OPENSSL_cleanse(bh, strlen(bh));
            free(bh);
        }
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if ((rc = blob_http_perform(c, &r, realm, err)) != MG_OK)
        goto out;
    if (r.status != 200) {
        rc = mg_fail(err, MG_EUNAVAIL, NULL,
                     "the token service of the %s refused modelgated (%ld); check "
                     "--blobs-credentials",
                     b->desc, r.status);
        goto out;
    }
    j = r.body.data ? json_loadb(r.body.data, r.body.len, 0, NULL) : NULL;
    tok = json_string_value(json_object_get(j, "token"));
    if (tok == NULL)
        tok = json_string_value(json_object_get(j, "access_token"));
    if (tok == NULL || tok[0] == '\0' || strpbrk(tok, "\r\n") != NULL) {
        rc = mg_fail(err, MG_EUNAVAIL, NULL, "the token service of the %s gave no token", b->desc);
        goto out;
    }
    if (asprintf(header, "Authorization: Bearer %s", tok) < 0) {
        *header = NULL;
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
out:
    json_decref(j);
    if (r.body.data)
        OPENSSL_cleanse(r.body.data, r.body.len);
    blob_http_resp_release(&r);
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    free(url);
    return rc;
}

/* Answer a 401: a new Authorization header in o->auth. */
static enum mg_code reauth(struct blob_backend *b, const char *challenge, struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    char *h = NULL;
    enum mg_code rc = MG_OK;

    if (strncasecmp(challenge, "Bearer", 6) == 0) {
        rc = fetch_token(b, challenge, &h, err);
    } else if (strncasecmp(challenge, "Basic", 5) == 0 && o->user != NULL) {
        if ((h = basic_header(o)) == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    } else {
        rc = mg_fail(err, MG_EUNAVAIL, NULL,
                     "the %s asks for credentials (%.60s); give them with --blobs-credentials",
                     b->desc, challenge[0] ? challenge : "401 without a challenge");
    }
    if (rc != MG_OK)
        return rc;
    pthread_mutex_lock(&o->lock);
    if (o->auth) {
        OPENSSL_cleanse(o->auth, strlen(o->auth));
        free(o->auth);
    }
    o->auth = h;
    pthread_mutex_unlock(&o->lock);
    return MG_OK;
}

/* The current Authorization header appended to a copy of l (malloc'd list). */
static struct curl_slist *with_auth(struct oci_backend *o, const char *const *extra)
{
    struct curl_slist *h = NULL, *n;

    for (; extra && *extra; extra++) {
        if ((n = curl_slist_append(h, *extra)) == NULL)
            goto fail;
        h = n;
    }
    if ((n = curl_slist_append(h, "Expect:")) == NULL)
        goto fail;
    h = n;
    pthread_mutex_lock(&o->lock);
    n = o->auth ? curl_slist_append(h, o->auth) : h;
    pthread_mutex_unlock(&o->lock);
    if (n == NULL)
        goto fail;
    return n;
fail:
    curl_slist_free_all(h);
    return NULL;
}

/* A URL from a Location header: absolute, or a path on the registry. */
static enum mg_code resolve(struct oci_backend *o, const char *loc, char *out, size_t outsz,
                            struct mg_error *err)
{
    int n;

    if (strncmp(loc, "http://", 7) == 0 || strncmp(loc, "https://", 8) == 0)
        n = snprintf(out, outsz, "%s", loc);
    else if (loc[0] == '/')
        n = snprintf(out, outsz, "%s%s", o->base, loc);
    else
        return mg_fail(err, MG_EIO, NULL, "the registry gave an unusable Location '%.100s'", loc);
    if (n < 0 || (size_t)n >= outsz)
        return mg_fail(err, MG_EIO, NULL, "the registry's Location is too long");
    return MG_OK;
}

/* One request, answering a 401 once with the flow the challenge names. */
static enum mg_code oci_req(struct blob_backend *b, const char *method, const char *url,
                            const char *const *extra, const void *body, size_t len,
                            struct blob_http_resp *r, struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    enum mg_code rc = MG_OK;
    int attempt;

    for (attempt = 0; attempt < 2; attempt++) {
        struct curl_slist *h = with_auth(o, extra);
        CURL *c;

        mg_buf_release(&r->body);
        blob_http_resp_init(r);
        if (h == NULL || (c = blob_http_easy(r)) == NULL) {
            curl_slist_free_all(h);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        if (strcmp(method, "HEAD") == 0)
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else if (strcmp(method, "GET") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        if (body != NULL || strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0 ||
            strcmp(method, "POST") == 0) {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        }
        rc = blob_http_perform(c, r, b->desc, err);
        curl_easy_cleanup(c);
        curl_slist_free_all(h);
        if (rc != MG_OK || r->status != 401 || attempt > 0)
            break;
        if ((rc = reauth(b, r->www_auth, err)) != MG_OK)
            return rc;
    }
    if (rc == MG_OK && (r->status == 401 || r->status == 403))
        rc = mg_fail(err, MG_EUNAVAIL, NULL,
                     "the %s refused modelgated's credentials (%ld); check --blobs-credentials",
                     b->desc, r->status);
    return rc;
}

static enum mg_code oci_status(struct blob_backend *b, const char *what,
                               const struct blob_http_resp *r, struct mg_error *err)
{
    return mg_fail(err, r->status >= 500 ? MG_EUNAVAIL : MG_EIO, NULL,
                   "the %s answered %ld to %s: %.200s", b->desc, r->status, what,
                   r->body.data ? r->body.data : "");
}

static enum mg_code oci_check(struct blob_backend *b, struct mg_error *err)
{
    struct blob_http_resp r;
    char url[400];
    enum mg_code rc;

    snprintf(url, sizeof(url), "%s/v2/", ob(b)->base);
    blob_http_resp_init(&r);
    rc = oci_req(b, "GET", url, NULL, NULL, 0, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = oci_status(b, "GET /v2/", &r, err);
    blob_http_resp_release(&r);
    return rc;
}

/* ---- upload --------------------------------------------------------------- */

static enum mg_code session_start(struct blob_backend *b, char *out, size_t outsz,
                                  struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    struct blob_http_resp r;
    char url[600];
    enum mg_code rc;

    snprintf(url, sizeof(url), "%s/v2/%s/blobs/uploads/", o->base, o->repo);
    blob_http_resp_init(&r);
    rc = oci_req(b, "POST", url, NULL, NULL, 0, &r, err);
    if (rc == MG_OK && r.status != 202)
        rc = oci_status(b, "POST blobs/uploads/", &r, err);
    if (rc == MG_OK)
        rc = resolve(o, r.location, out, outsz, err);
    blob_http_resp_release(&r);
    return rc;
}

/* The streamed PATCH of the session, started with the first byte. */
static enum mg_code pipe_open(struct oci_put *p, struct mg_error *err)
{
    struct blob_http_resp dummy;
    const char *extra[] = {"Content-Type: application/octet-stream", NULL};
    struct curl_slist *h = with_auth(p->o, extra);
    CURL *c;

    blob_http_resp_init(&dummy);
    c = blob_http_easy(&dummy);
    blob_http_resp_release(&dummy);
    if (c == NULL || h == NULL) {
        if (c)
            curl_easy_cleanup(c);
        curl_slist_free_all(h);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    curl_easy_setopt(c, CURLOPT_URL, p->session);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PATCH");
    return blob_pipe_start(c, h, p->base.b->desc, &p->pipe, err);
}

static enum mg_code oci_put_begin(struct blob_backend *b, const char *expected, uint64_t max,
                                  struct blob_put **out, struct mg_error *err)
{
    struct oci_put *p = calloc(1, sizeof(*p));
    enum mg_code rc;

    (void)expected;
    (void)max;
    if (p == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    p->base.b = b;
    p->o = ob(b);
    if ((rc = session_start(b, p->session, sizeof(p->session), err)) != MG_OK) {
        if (p->session[0]) {
            struct blob_http_resp r;
            struct mg_error e;
            blob_http_resp_init(&r);
            oci_req(b, "DELETE", p->session, NULL, NULL, 0, &r, &e);
            blob_http_resp_release(&r);
        }
        free(p);
        return rc;
    }
    snprintf(p->base.handle, sizeof(p->base.handle), "%s", p->session);
    *out = &p->base;
    return MG_OK;
}

static enum mg_code oci_put_write(struct blob_put *bp, const void *data, size_t n,
                                  struct mg_error *err)
{
    struct oci_put *p = (struct oci_put *)bp;
    enum mg_code rc;

    if (p->pipe == NULL && (rc = pipe_open(p, err)) != MG_OK)
        return rc;
    p->sent += n;
    return blob_pipe_write(p->pipe, data, n, err);
}

/* PUT <session>&digest=… with the last bytes. */
static enum mg_code session_finish(struct blob_backend *b, const char *session, const char *digest,
                                   const void *data, size_t len, struct mg_error *err)
{
    struct blob_http_resp r;
    char *url = NULL;
    const char *extra[] = {"Content-Type: application/octet-stream", NULL};
    enum mg_code rc;

    if (asprintf(&url, "%s%sdigest=%s", session, strchr(session, '?') ? "&" : "?", digest) < 0)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    blob_http_resp_init(&r);
    rc = oci_req(b, "PUT", url, extra, data, len, &r, err);
    if (rc == MG_OK && r.status != 201)
        rc = oci_status(b, "the upload's closing PUT", &r, err);
    blob_http_resp_release(&r);
    free(url);
    return rc;
}

static enum mg_code blob_head(struct blob_backend *b, const char *digest, uint64_t *size,
                              struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    struct blob_http_resp r;
    char url[700];
    enum mg_code rc;

    snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", o->base, o->repo, digest);
    blob_http_resp_init(&r);
    rc = oci_req(b, "HEAD", url, NULL, NULL, 0, &r, err);
    if (rc == MG_OK && r.status == 404)
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s is not in the %s", digest, b->desc);
    else if (rc == MG_OK && r.status != 200)
        rc = oci_status(b, "a blob HEAD", &r, err);
    if (rc == MG_OK)
        *size = r.length;
    blob_http_resp_release(&r);
    return rc;
}

static enum mg_code ensure_config(struct blob_backend *b, struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    char session[2048];
    uint64_t size;
    bool ok;
    enum mg_code rc;

    pthread_mutex_lock(&o->lock);
    ok = o->config_ok;
    pthread_mutex_unlock(&o->lock);
    if (ok)
        return MG_OK;
    rc = blob_head(b, EMPTY_CONFIG_DIGEST, &size, err);
    if (rc == MG_ENOTFOUND) {
        if ((rc = session_start(b, session, sizeof(session), err)) == MG_OK)
            rc = session_finish(b, session, EMPTY_CONFIG_DIGEST, EMPTY_CONFIG, 2, err);
    }
    if (rc == MG_OK) {
        pthread_mutex_lock(&o->lock);
        o->config_ok = true;
        pthread_mutex_unlock(&o->lock);
    }
    return rc;
}

/* The manifest that keeps a blob alive (deterministic: its digest is known later). */
static char *keep_manifest(const char *digest, uint64_t size)
{
    char *m = NULL;

    if (asprintf(&m,
                 "{\"schemaVersion\":2,\"mediaType\":\"" MANIFEST_TYPE "\","
                 "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
                 "\"digest\":\"" EMPTY_CONFIG_DIGEST "\",\"size\":2},"
                 "\"layers\":[{\"mediaType\":\"" LAYER_TYPE "\",\"digest\":\"%s\",\"size\":%llu}],"
                 "\"annotations\":{\"org.opencontainers.image.title\":\"modelgate blob %s\"}}",
                 digest, (unsigned long long)size, digest) < 0)
        return NULL;
    return m;
}

static enum mg_code tag_blob(struct blob_backend *b, const char *digest, uint64_t size,
                             struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    struct blob_http_resp r;
    char url[700], *m;
    const char *extra[] = {"Content-Type: " MANIFEST_TYPE, NULL};
    enum mg_code rc;

    if ((rc = ensure_config(b, err)) != MG_OK)
        return rc;
    if ((m = keep_manifest(digest, size)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    snprintf(url, sizeof(url), "%s/v2/%s/manifests/sha256-%s", o->base, o->repo, digest + 7);
    /* The blob was just stored (its PUT answered 201), yet a registry committing the same
     * bytes for a concurrent upload rewrites the blob's link in the repository, and a
     * manifest PUT in between is refused with MANIFEST_BLOB_UNKNOWN (distribution 2.8):
     * that answer is tried again, a few times, after a short pause. */
    for (int attempt = 0;; attempt++) {
        bool unknown;

        blob_http_resp_init(&r);
        rc = oci_req(b, "PUT", url, extra, m, strlen(m), &r, err);
        unknown = rc == MG_OK && r.status == 400 && r.body.data != NULL &&
                  strstr(r.body.data, "MANIFEST_BLOB_UNKNOWN") != NULL;
        if (rc == MG_OK && r.status != 201 && (!unknown || attempt == 4))
            rc = oci_status(b, "the blob's manifest PUT", &r, err);
        blob_http_resp_release(&r);
        if (!unknown || attempt == 4)
            break;
        usleep(20000u << attempt);
    }
    free(m);
    return rc;
}

static enum mg_code oci_put_commit(struct blob_put *bp, const char *digest, struct mg_error *err)
{
    struct oci_put *p = (struct oci_put *)bp;
    struct blob_http_resp *r;
    enum mg_code rc;

    if (p->pipe != NULL) {
        p->pipe_done = true;
        if ((rc = blob_pipe_finish(p->pipe, &r, err)) != MG_OK)
            return rc;
        if (r->status != 202)
            return oci_status(bp->b, "the streamed PATCH", r, err);
        if (r->location[0] &&
            (rc = resolve(p->o, r->location, p->session, sizeof(p->session), err)) != MG_OK)
            return rc;
    }
    if ((rc = session_finish(bp->b, p->session, digest, NULL, 0, err)) != MG_OK)
        return rc;
    bp->handle[0] = '\0'; /* the session is closed */
    /* Tagged before the row commits: a blob without its manifest would be collected. */
    return tag_blob(bp->b, digest, p->sent, err);
}

static bool oci_put_abort(struct blob_put *bp)
{
    struct oci_put *p = (struct oci_put *)bp;
    struct blob_http_resp r;
    struct mg_error e;
    bool ok;

    if (p->pipe != NULL && !p->pipe_done && bp->handle[0] != '\0') {
        /* End the PATCH instead of cutting it: its 202 names the session's state with the
         * bytes the registry holds, which the DELETE must carry. A DELETE with the state of
         * the POST ("upload resumed at wrong offset"), or one that raced a cut PATCH still
         * being written, left the session and its bytes in the registry. */
        struct blob_http_resp *pr;
        char next[sizeof(p->session)];

        p->pipe_done = true;
        if (blob_pipe_finish(p->pipe, &pr, &e) == MG_OK && pr->status == 202 && pr->location[0] &&
            resolve(p->o, pr->location, next, sizeof(next), &e) == MG_OK)
            memcpy(p->session, next, sizeof(next));
    }
    blob_pipe_free(&p->pipe);
    if (bp->handle[0] == '\0')
        return true;
    blob_http_resp_init(&r);
    ok = oci_req(bp->b, "DELETE", p->session, NULL, NULL, 0, &r, &e) == MG_OK &&
         (r.status == 204 || r.status == 404 || r.status == 400);
    blob_http_resp_release(&r);
    return ok;
}

static void oci_put_free(struct blob_put *bp)
{
    struct oci_put *p = (struct oci_put *)bp;

    blob_pipe_free(&p->pipe);
    free(p);
}

/* ---- reading -------------------------------------------------------------- */

static enum mg_code oci_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                             struct mg_error *err)
{
    return blob_head(b, digest, size, err);
}

static enum mg_code oci_read_open(struct blob_backend *b, const char *digest, uint64_t off,
                                  uint64_t len, struct blob_reader **out, struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    struct blob_http_resp dummy;
    struct curl_slist *h;
    char url[700], range[96];
    const char *extra[] = {range, NULL};
    uint64_t size;
    enum mg_code rc;
    CURL *c;

    if (len == 0)
        return blob_empty_reader(out, err);
    /* The HEAD settles auth (and existence) before the stream starts. */
    if ((rc = blob_head(b, digest, &size, err)) != MG_OK)
        return rc;
    snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", o->base, o->repo, digest);
    snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
    blob_http_resp_init(&dummy);
    c = blob_http_easy(&dummy);
    blob_http_resp_release(&dummy);
    if (c == NULL || (h = with_auth(o, extra)) == NULL) {
        if (c)
            curl_easy_cleanup(c);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    /* A registry on object storage redirects to it; curl sends no Authorization to
     * another host. */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
    return blob_stream_start(c, h, b->desc, NULL, NULL, out, err);
}

/* ---- housekeeping --------------------------------------------------------- */

static enum mg_code oci_del(struct blob_backend *b, const char *digest, struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    struct blob_http_resp r;
    char url[700], md[72];
    uint64_t size;
    enum mg_code rc;
    char *m;

    rc = blob_head(b, digest, &size, err);
    if (rc == MG_ENOTFOUND)
        return MG_OK;
    if (rc != MG_OK)
        return rc;
    if ((m = keep_manifest(digest, size)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    memcpy(md, "sha256:", 7);
    mg_sha256_hex(m, strlen(m), md + 7);
    free(m);
    snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", o->base, o->repo, md);
    blob_http_resp_init(&r);
    rc = oci_req(b, "DELETE", url, NULL, NULL, 0, &r, err);
    if (rc == MG_OK && r.status != 202 && r.status != 404)
        rc = oci_status(b, "a manifest DELETE (is storage.delete enabled?)", &r, err);
    if (rc == MG_OK) {
        snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", o->base, o->repo, digest);
        rc = oci_req(b, "DELETE", url, NULL, NULL, 0, &r, err);
        if (rc == MG_OK && r.status != 202 && r.status != 404)
            rc = oci_status(b, "a blob DELETE", &r, err);
    }
    blob_http_resp_release(&r);
    return rc;
}

static enum mg_code oci_list(struct blob_backend *b,
                             bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                             struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    char url[2048], last[80] = "";
    enum mg_code rc = MG_OK;
    bool go = true;

    for (;;) {
        struct blob_http_resp r;
        json_t *j, *tags;
        size_t i, n = 0;
        char *el = blob_sigv4_encode(last, false);

        if (el == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        snprintf(url, sizeof(url), "%s/v2/%s/tags/list?n=1000%s%s", o->base, o->repo,
                 last[0] ? "&last=" : "", el);
        free(el);
        blob_http_resp_init(&r);
        mg_buf_release(&r.body);
        mg_buf_init(&r.body, 8u << 20);
        rc = oci_req(b, "GET", url, NULL, NULL, 0, &r, err);
        if (rc == MG_OK && r.status == 404) { /* no repository yet: no blob */
            blob_http_resp_release(&r);
            return MG_OK;
        }
        if (rc == MG_OK && r.status != 200)
            rc = oci_status(b, "tags/list", &r, err);
        j = rc == MG_OK && r.body.data ? json_loadb(r.body.data, r.body.len, 0, NULL) : NULL;
        blob_http_resp_release(&r);
        if (rc != MG_OK)
            return rc;
        tags = json_object_get(j, "tags");
        for (i = 0; go && i < json_array_size(tags); i++) {
            const char *t = json_string_value(json_array_get(tags, i));
            char digest[80];
            uint64_t size = 0;
            struct mg_error e;

            if (t == NULL)
                continue;
            snprintf(last, sizeof(last), "%s", t);
            n++;
            if (strncmp(t, "sha256-", 7) != 0 || strlen(t) != 71 ||
                strspn(t + 7, "0123456789abcdef") != 64)
                continue;
            snprintf(digest, sizeof(digest), "sha256:%s", t + 7);
            if (blob_head(b, digest, &size, &e) != MG_OK)
                continue;
            go = cb(digest, size, arg);
        }
        json_decref(j);
        if (!go || n < 1000)
            break;
    }
    return MG_OK;
}

static enum mg_code oci_orphans(struct blob_backend *b,
                                bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                                struct mg_error *err)
{
    /* The distribution API lists no upload sessions; the registry purges stale ones
     * itself, and blob_uploads rows name the rest (blob_reclaim). */
    (void)b;
    (void)cb;
    (void)arg;
    (void)err;
    return MG_OK;
}

static enum mg_code oci_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err)
{
    struct oci_backend *o = ob(b);
    struct blob_http_resp r;
    char prefix[600];
    enum mg_code rc;

    snprintf(prefix, sizeof(prefix), "/v2/%s/blobs/uploads/", o->repo);
    if (strstr(handle, prefix) == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "'%.200s' is not an upload session of the %s", handle,
                       b->desc);
    blob_http_resp_init(&r);
    rc = oci_req(b, "DELETE", handle, NULL, NULL, 0, &r, err);
    /* 404: gone already; 400 BLOB_UPLOAD_INVALID: the registry cancelled it anyway */
    if (rc == MG_OK && r.status != 204 && r.status != 404 && r.status != 400)
        rc = oci_status(b, "an upload session DELETE", &r, err);
    blob_http_resp_release(&r);
    return rc;
}

/* No optional ability: registries hand out no presigned URLs, and nothing is local. */
const struct blob_ops blob_oci_ops = {
    .kind = "oci",
    .scheme = SCHEME,
    .usage = "oci://HOST:PORT/REPOSITORY",
    .supports = 0,
    .check_url = oci_check_url,
    .open = oci_open,
    .check = oci_check,
    .put_begin = oci_put_begin,
    .put_write = oci_put_write,
    .put_local_path = blob_no_put_local_path,
    .put_commit = oci_put_commit,
    .put_abort = oci_put_abort,
    .put_free = oci_put_free,
    .stat = oci_stat,
    .local_path = blob_no_local_path,
    .read_open = oci_read_open,
    .presign = blob_no_presign,
    .del = oci_del,
    .list = oci_list,
    .orphans = oci_orphans,
    .reclaim = oci_reclaim,
    .close = oci_close,
};
