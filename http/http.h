/*
 * http.h - modelgated's HTTP plumbing on libmicrohttpd: the server context,
 * the per-request record, route tables, body handling and responses.
 *
 * A request goes: match a route → authenticate → check the role → validate
 * path parameters → read the body (JSON, capped and buffered; or streamed to
 * the route) → call the handler, which sets exactly one response with
 * srv_reply_*(). Errors become HTTP statuses only in srv_reply_error().
 *
 * Handlers run on libmicrohttpd's worker threads and must not block on slow
 * work. They may call any store function (thread-safe).
 */
#ifndef SRV_HTTP_H
#define SRV_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../base/util.h"
#include "../store/store.h"
#include "../model/config.h"
#include "../model/roles.h"

struct srv;
struct srv_req;
/* libmicrohttpd stays inside http/: the rest of the daemon sees these by name only. */
struct MHD_Connection;
struct MHD_Response;
struct MHD_Daemon;

enum srv_body {
    SRV_BODY_NONE,    /* a body, if any, is ignored */
    SRV_BODY_JSON,    /* buffered up to max_json_bytes, parsed; Content-Type checked */
    SRV_BODY_STREAM,  /* handed to stream_data() chunk by chunk */
    SRV_BODY_REFUSED, /* answered at once by the handler, before any body is read (a body
                       * sent anyway is drained, up to a bound, and the connection closed) */
    SRV_BODY_FORM,    /* as SRV_BODY_JSON, or application/x-www-form-urlencoded turned into
                       * a JSON object of strings (OAuth endpoints, RFC 6749/8693) */
};

/* A route's role requirement: a set of role bits (model/roles.h; any of them, admin
 * always passes), MG_NEED_PUBLIC or MG_NEED_ANY. */

struct srv_route {
    const char *method;
    /* "/api/v1/models/{model}/versions/{n}": placeholders are validated by
     * name: {model} model name, {alias} alias name, {name} gateway name, {n}
     * version number, {digest} sha256 digest, {id} identifier, {ref} an OCI
     * reference (a tag or a sha256 digest). */
    const char *pattern;
    unsigned roles;
    enum srv_body body;
    void (*handle)(struct srv_req *r);
    /* SRV_BODY_STREAM only: called before the first chunk and per chunk.
     * Returning an error stops the upload and answers with r's error. */
    enum mg_code (*stream_begin)(struct srv_req *r);
    enum mg_code (*stream_data)(struct srv_req *r, const char *p, size_t n);
    /* SRV_BODY_STREAM only: release per-request state (always called). */
    void (*stream_cleanup)(struct srv_req *r);
};

#define SRV_MAX_PARAMS 4

#define SRV_SESSION_COOKIE "mg_session"
#define SRV_SESSION_IDLE_MS (30 * 60 * 1000LL)     /* 30 minutes without a request */
#define SRV_SESSION_MAX_MS (12 * 60 * 60 * 1000LL) /* 12 hours after sign-in */

struct srv_req {
    struct srv *srv;
    struct MHD_Connection *conn;
    const struct srv_route *route;
    const char *method; /* NULL until the headers are in (only the target was seen) */
    char *path;
    char *raw_path; /* the target's path as sent, before decoding (for the log) */
    const char
        *target_problem; /* why the raw target is refused, or NULL (mg_request_target_problem) */
    struct {
        const char *name; /* placeholder name, e.g. "model" */
        char *value;
    } params[SRV_MAX_PARAMS];
    unsigned nparams;

    struct store_principal who; /* valid when authenticated */
    json_t *identity; /* an IdP caller's {"issuer","subject","email","groups"} (NEW), or NULL */
    bool authenticated;
    bool via_session; /* authenticated by the UI's session cookie */
    char csrf[48];    /* the session's CSRF token (via_session) */

    json_t *body;        /* parsed JSON body (SRV_BODY_JSON), NULL when empty */
    struct mg_buf raw;   /* JSON body bytes while reading */
    uint64_t body_bytes; /* bytes received (atomic: the reaper reads it) */
    bool body_done;      /* the whole body is in (atomic) */
    uint64_t calls;      /* entries into and exits from the handler: odd inside (atomic) */
    int64_t body_start_ms;
    uint64_t drained; /* bytes discarded after an error mid-body */
    void *stream;     /* route-private state (SRV_BODY_STREAM, deferred work) */

    /* A request under /v2/ (docs/contract.md "OCI distribution"): errors answer in the distribution
     * spec's shape, credentials may come as HTTP Basic, and a 401 carries the token
     * challenge. oci_code: the spec's error code for the next error reply (NULL: derived
     * from the error). */
    bool oci;
    const char *oci_code;

    struct mg_error err; /* error being answered, if any */
    bool failed;         /* an error was recorded while reading the body */
    bool no_drain;       /* refused for its framing: reply and close, read nothing more */

    struct MHD_Response *resp; /* set by srv_reply_*() */
    bool queued;               /* resp handed to libmicrohttpd */

    /* A deferred reply (srv_defer): once suspended, defer_start(r) hands r on, whoever
     * finishes calls srv_resume(r), and on_resume(r) makes the reply. defer_ctx is the
     * route's own state for it, free()d with the request. */
    bool deferred;
    void (*defer_start)(struct srv_req *r);
    void (*on_resume)(struct srv_req *r);
    void *defer_ctx;
    /* srv_defer_work: slow work done on a thread of its own while the
     * request is suspended, then on_resume replies. */
    void (*work)(struct srv_req *r);
    struct srv_req *work_next; /* the work queue's link (http.c) */
    unsigned status;
    uint64_t resp_bytes;
    int64_t start_ms;
};

struct srv_cache;
struct srv_oci_cache;
struct srv_workers;

struct ctl;

struct srv {
    struct srv_config *cfg;
    struct store *store;
    /* Release control and the workers registered with it (control/control.h): opaque here,
     * the HTTP layer never calls them; the resource files in api/ do. */
    struct ctl *ctl;
    /* What this server answers: a NULL-ended list of route tables (api/api.h api_routes,
     * handed over by daemon/main.c; the HTTP layer names no resource). */
    const struct srv_route *const *routes;
    bool tls; /* serving HTTPS: cookies get Secure, replies HSTS */
    char *tls_cert_pem, *tls_key_pem;
    struct srv_metrics *metrics;     /* request counters (os/metrics.c) */
    struct srv_cache *cache;         /* hot read bodies (cache.c); NULL caches nothing */
    struct srv_oci_cache *oci_cache; /* files of per-file OCI layers (api/oci_cache.c) */
    struct srv_reaper *reaper;       /* per-request deadlines (http.c) */
    struct srv_reqlog *reqlog;       /* the request log's batches (reqlog.c) */
    struct MHD_Daemon *daemon;
    uint16_t port;
    volatile int inflight;          /* requests not yet completed (atomic ops) */
    volatile int working;           /* srv_defer_work jobs queued or running (atomic ops) */
    struct srv_workers *workers;    /* cfg->commit_workers threads for srv_defer_work */
    struct id_oidc *oidc;           /* --oidc-issuer's provider (identity.c), or NULL */
    struct id_registry *ci_issuers; /* trusted publishers' issuers (identity.c) */
    char *oidc_client_secret;       /* --oidc-client-secret-file's secret, or NULL */
};

/* srv_defer_work's queue: jobs waiting for a worker now, and jobs that ever
 * had to wait because every worker was busy. Thread-safe. */
void srv_work_stats(struct srv *srv, uint64_t *waiting, uint64_t *waited_total);

/* Read and check --tls-cert/--tls-key (both PEM, the key matching the
 * certificate) before anything else starts; srv->tls set on success. */
enum mg_code srv_tls_load(struct srv *srv, struct mg_error *err);

/* Free what srv_tls_load() read. */
void srv_tls_release(struct srv *srv);

/* Start listening; srv->port receives the bound port. */
enum mg_code srv_start(struct srv *srv, struct mg_error *err);

/* Stop accepting, let in-flight requests finish for up to grace_ms, stop. */
void srv_stop(struct srv *srv, int grace_ms);

/* ---- inside handlers -------------------------------------------------- */

/* Path parameter value by placeholder name (validated), or NULL. */
const char *srv_param(const struct srv_req *r, const char *name);

/* Version number parameter {n}. */
int64_t srv_param_version(const struct srv_req *r);

/* Query argument, or NULL. */
const char *srv_query(const struct srv_req *r, const char *key);

/* Every value of a query argument that may repeat (?tag=a&tag=b), in order: the first
 * max into out (borrowed, valid during the request). Returns how many there are, which
 * may exceed max. */
size_t srv_query_all(const struct srv_req *r, const char *key, const char **out, size_t max);

/* Request header, or NULL. */
const char *srv_header(const struct srv_req *r, const char *key);

/* A cookie the request sent, or NULL. */
const char *srv_cookie(const struct srv_req *r, const char *name);

/* Parse ?limit= and ?page_token=. false → an error reply was set. */
bool srv_page(struct srv_req *r, struct store_page *page);

/* Reply with JSON (the value is STOLEN). */
void srv_reply_json(struct srv_req *r, unsigned status, json_t *v);

/* Reads worth caching (cache.h): when the body for key is cached at model's
 * current epoch (store_model_epoch: validated against the database, so a write
 * on any replica counts), reply 200 with it and return true; otherwise set
 * *epoch for srv_reply_json_keep() and return false. The body must depend on
 * model's data alone, and key everything it depends on (not the caller: a
 * cached body must be the same for every principal allowed to read it). */
bool srv_reply_cached(struct srv_req *r, const char *model, const char *key, uint64_t *epoch);

/* srv_reply_json(r, 200, v), keeping the body under key for epoch. */
void srv_reply_json_keep(struct srv_req *r, json_t *v, const char *key, uint64_t epoch);
/* srv_reply_json_keep for a body already written as JSON text (malloc'd; the reply takes
 * it over): text must be what mg_json_text gives for the reply's value. */
void srv_reply_text_keep(struct srv_req *r, char *text, size_t len, const char *key,
                         uint64_t epoch);

/* Reply with an empty body (204, or 200 for HEAD). */
void srv_reply_empty(struct srv_req *r, unsigned status);

/* Reply with pre-encoded bytes (copied). */
void srv_reply_bytes(struct srv_req *r, unsigned status, const char *content_type, const void *data,
                     size_t len);

/* A reply to HEAD: the headers of a len-byte body (Content-Length: len), which is never
 * produced (libmicrohttpd sends no body to HEAD). */
void srv_reply_head(struct srv_req *r, unsigned status, const char *content_type, uint64_t len);

/* Reply with len bytes of fd from offset (sendfile); fd is closed by MHD. */
void srv_reply_fd(struct srv_req *r, unsigned status, const char *content_type, int fd,
                  uint64_t offset, uint64_t len);

/*
 * Reply with len blob bytes from a reader (store_blob_read_open): a file's
 * descriptor is sent with sendfile, a remote backend's bytes are streamed without
 * ever holding an HTTP thread while the backend is slow. Takes rd; rd NULL sends
 * the headers of a HEAD (Content-Length len) without opening the blob.
 */
void srv_reply_blob(struct srv_req *r, unsigned status, const char *content_type,
                    struct blob_reader *rd, uint64_t len);

/*
 * Answer later, once something outside the HTTP layer is done (a ?wait for gateways):
 * the request is suspended (no libmicrohttpd thread is held); then start(r) is called,
 * which hands r to whoever finishes; that one calls srv_resume(r) exactly once, on any
 * thread; then on_resume(r) sets the reply. ctx (may be NULL) is the route's state for
 * it (r->defer_ctx), free()d with the request. A reply set before is dropped.
 */
void srv_defer(struct srv_req *r, void *ctx, void (*start)(struct srv_req *r),
               void (*on_resume)(struct srv_req *r));

/* Resume a request srv_defer suspended. Thread-safe; once per srv_defer. */
void srv_resume(struct srv_req *r);

/*
 * Answer after slow work (fsync, archive inspection): suspend the request,
 * run work(r) on a thread of its own — never on a libmicrohttpd thread —
 * then call on_resume(r), which sets the reply from what work left in r.
 */
/* (The work runs on one of a fixed pool of cfg->commit_workers threads;
 * beyond that, requests queue in arrival order.) */
void srv_defer_work(struct srv_req *r, void (*work)(struct srv_req *r),
                    void (*on_resume)(struct srv_req *r));

/* Does the Origin header name this server (scheme://Host)? */
bool srv_same_origin(const struct srv_req *r);

/*
 * Authorise the request's token for its route acting on `model` (NULL: none, or one that
 * does not exist yet) and `alias` (NULL: none): one decision for every route
 * (gates/authz.h gate_authorize), with the model's owners looked up here. Called for every
 * route from its path; handlers that learn the model or alias from the body or a stored
 * promotion call it again with them. On refusal the reply (403, or 404 for a model
 * --read-scope team hides) is set and false returned.
 */
bool srv_authorize(struct srv_req *r, const char *model, const char *alias);

struct gate_decision;
/* The same decision for another role mask (`need`), without replying: for telling a caller
 * what it may do (the UI's "you may decide"). MG_OK with *d filled, or a store error. */
enum mg_code srv_decide(const struct srv_req *r, unsigned need, const char *model,
                        const char *alias, struct gate_decision *d, struct mg_error *err);

/*
 * May this token read (or cite) the stored bytes digest (docs/contract.md "Tenancy"): the same one
 * decision, with who uploaded and who cites them. On refusal the reply (404 as if missing,
 * 410 once released; field names the member that cited it, or NULL) is set and false
 * returned. A digest with no live blob passes: the caller's own lookup answers for it.
 */
bool srv_authorize_bytes(struct srv_req *r, const char *digest, const char *field);

/* With --read-scope team, may this token see a model with these owners (a JSON array)?
 * Lists use it to leave out what the token may not see. */
bool srv_model_visible(const struct srv_req *r, const json_t *owners);

/*
 * The token an OCI request presented (docs/contract.md "OCI distribution"): "Authorization: Bearer
 * <token>", or "Basic" with any user name and the token as password. Copied into out (cap
 * bytes, NUL-terminated; the caller cleanses it); false when none is there or it does not
 * fit.
 */
bool srv_oci_credentials(const struct srv_req *r, char *out, size_t cap);

/* Add a header to the reply set last. */
void srv_reply_header(struct srv_req *r, const char *key, const char *value);

/* The one place errors become statuses: {"error":{"code","message","field"?}}. */
void srv_reply_error(struct srv_req *r, const struct mg_error *err);

/* Format and reply with an error. */
void srv_fail(struct srv_req *r, enum mg_code code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- identity (identity.c, docs/contract.md "Identity")
 * ------------------------------------------ */

/* Set up --oidc-issuer's provider (nothing is fetched yet); MG_OK when none is configured. */
enum mg_code srv_identity_setup(struct srv *srv, struct mg_error *err);

/* Free what srv_identity_setup() made. */
void srv_identity_release(struct srv *srv);

/* Whether a bearer credential is shaped like a JWT (three base64url parts): such a
 * credential is never looked up as a modelgate token. */
bool srv_looks_like_jwt(const char *cred);

/* Authenticate an IdP JWT: fills r->who and r->identity, or sets an error reply (401
 * naming the check that failed, 403 naming the groups seen when none maps to a role) and
 * returns false. */
bool srv_identity_authenticate(struct srv_req *r, const char *jwt);

/* The principal of verified IdP claims (group mappings, person, identity) into r->who and
 * r->identity; false with a 403 reply set when no group maps to a role. */
bool srv_identity_from_claims(struct srv_req *r, const json_t *claims);

/* The caller's "publisher" object for a new version (NEW). */
json_t *srv_identity_publisher(const struct srv_req *r);

/* Find the route for (method, path) among tables (a NULL-ended list of route tables, each
 * ended by an entry with method NULL) and capture its parameters into r. Returns
 * MG_ENOTFOUND (no such path), MG_EMETHOD (path exists, method does not), or MG_EINVAL (a
 * parameter is malformed; r->err says which). */
enum mg_code srv_route_match(struct srv_req *r, const struct srv_route *const *tables,
                             const char *method, const char *path);

/* Every route of tables, for the OpenAPI cross-check: calls fn per route. */
void srv_route_foreach(const struct srv_route *const *tables,
                       void (*fn)(const struct srv_route *route, void *arg), void *arg);

#endif
