/*
 * request.c - reading a request: the accessors handlers use, the checks made before routing
 * (the target as sent, the method, the framing, dot segments), routing, access, and the body
 * under its caps.
 */
#include "http.h"
#include "http_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "../base/text.h"
#include "../base/util.h"

/* ---- request accessors ------------------------------------------------ */

const char *srv_query(const struct srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

struct query_all {
    const char *key;
    const char **out;
    size_t max, n;
};

static enum MHD_Result query_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    struct query_all *q = cls;

    (void)kind;
    if (key != NULL && strcmp(key, q->key) == 0) {
        if (q->n < q->max)
            q->out[q->n] = value ? value : "";
        q->n++;
    }
    return MHD_YES;
}

size_t srv_query_all(const struct srv_req *r, const char *key, const char **out, size_t max)
{
    struct query_all q = {key, out, max, 0};

    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_one, &q);
    return q.n;
}

const char *srv_header(const struct srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

const char *srv_cookie(const struct srv_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, name);
}

bool srv_page(struct srv_req *r, struct store_page *page)
{
    const char *l = srv_query(r, "limit"), *t = srv_query(r, "page_token");
    int64_t n = 50;

    if (l && !mg_parse_i64(l, 1, 1000, &n)) {
        srv_fail(r, MG_EINVAL, "limit", "limit must be an integer from 1 to 1000");
        return false;
    }
    if (t && (strlen(t) == 0 || strlen(t) > 256)) {
        srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
        return false;
    }
    page->limit = (unsigned)n;
    page->page_token = t;
    return true;
}

void srv_req_free(struct srv_req *r)
{
    unsigned i;

    if (r->route && r->route->stream_cleanup)
        r->route->stream_cleanup(r);
    for (i = 0; i < r->nparams; i++)
        free(r->params[i].value);
    if (r->resp)
        MHD_destroy_response(r->resp);
    json_decref(r->body);
    json_decref(r->identity);
    free(r->defer_ctx);
    mg_buf_release(&r->raw);
    free(r->path);
    free(r->raw_path);
    free(r);
}

static bool is_json_type(const char *ct)
{
    size_t n = strlen("application/json");

    if (ct == NULL || strncasecmp(ct, "application/json", n) != 0)
        return false;
    return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static bool is_form_type(const char *ct)
{
    size_t n = strlen("application/x-www-form-urlencoded");

    if (ct == NULL || strncasecmp(ct, "application/x-www-form-urlencoded", n) != 0)
        return false;
    return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

/* Whether the route takes this body type. */
static bool body_type_ok(const struct srv_req *r)
{
    const char *ct = srv_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);

    return is_json_type(ct) || (r->route->body == SRV_BODY_FORM && is_form_type(ct));
}

/* application/x-www-form-urlencoded into a JSON object of strings (NEW), or NULL when
 * malformed (a name twice, bad percent-encoding, a NUL, not UTF-8). */
static json_t *form_to_json(const char *data, size_t len)
{
    json_t *obj = json_object();
    char *copy = strndup(data, len), *save = NULL, *pair;

    if (obj == NULL || copy == NULL || memchr(data, '\0', len) != NULL)
        goto fail;
    for (pair = strtok_r(copy, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(pair, '='), *k, *v;
        int kn = 0, vn = 0;
        if (eq == NULL)
            goto fail;
        *eq = '\0';
        for (char *c = pair; *c; c++)
            *c = *c == '+' ? ' ' : *c;
        for (char *c = eq + 1; *c; c++)
            *c = *c == '+' ? ' ' : *c;
        k = curl_easy_unescape(NULL, pair, 0, &kn);
        v = curl_easy_unescape(NULL, eq + 1, 0, &vn);
        if (k == NULL || v == NULL || memchr(k, '\0', (size_t)kn) || memchr(v, '\0', (size_t)vn) ||
            json_object_get(obj, k) != NULL || !mg_utf8_valid(k, (size_t)kn) ||
            !mg_utf8_valid(v, (size_t)vn) || json_object_set_new(obj, k, json_string(v)) != 0) {
            curl_free(k);
            curl_free(v);
            goto fail;
        }
        curl_free(k);
        curl_free(v);
    }
    free(copy);
    return obj;
fail:
    free(copy);
    json_decref(obj);
    return NULL;
}

static bool has_dot_segment(const char *p)
{
    while (*p == '/') {
        size_t n = strcspn(p + 1, "/");
        if ((n == 0 && p[1] == '/') || (n == 1 && p[1] == '.') ||
            (n == 2 && p[1] == '.' && p[2] == '.'))
            return true;
        p += 1 + n;
    }
    return false;
}

struct framing {
    unsigned content_lengths;
    bool lengths_differ;
    const char *first_length;
    bool transfer_encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    struct framing *f = cls;

    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->content_lengths++ == 0)
            f->first_length = value;
        else if (value == NULL || f->first_length == NULL || strcmp(value, f->first_length) != 0)
            f->lengths_differ = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->transfer_encoding = true;
    }
    return MHD_YES;
}

/*
 * RFC 9112 §6.3: a request with both Content-Length and Transfer-Encoding, or with
 * Content-Length values that differ, has no trustworthy end; a proxy in front may have
 * read it another way (request smuggling). Refuse it with 400 and close the connection
 * without reading on. On refusal the reply is set and false returned.
 */
static bool framing_ok(struct srv_req *r)
{
    struct framing f = {0};

    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_framing, &f);
    if (f.content_lengths > 0 && f.transfer_encoding) {
        srv_fail(r, MG_EINVAL, NULL,
                 "send either Content-Length or Transfer-Encoding, not both; the request's "
                 "length is ambiguous");
    } else if (f.lengths_differ) {
        srv_fail(r, MG_EINVAL, NULL,
                 "the request has Content-Length headers that disagree; send one");
    } else {
        return true;
    }
    MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONNECTION, "close");
    r->no_drain = true;
    return false;
}

/* First call for a request: route, auth, headers. Returns false when a reply
 * is already set and the body (if any) should not be read. */
bool srv_req_begin(struct srv_req *r, const char *method)
{
    const char *cl = srv_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t len = 0, cap;
    int64_t cl_n = 0;
    enum mg_code rc;

    /* The OCI distribution API answers in its own error shape, from the first refusal on. */
    r->oci = strcmp(r->path, "/v2") == 0 || strncmp(r->path, "/v2/", 4) == 0;
    /* Decoding tricks (%00, control characters, bytes that are not UTF-8) are refused
     * before routing, from the target as sent: libmicrohttpd's decoded copy would already
     * have been cut at a NUL. The message never echoes the bytes. */
    if (r->target_problem != NULL) {
        srv_fail(r, MG_EINVAL, NULL, "%s; send the path as percent-encoded UTF-8 text",
                 r->target_problem);
        return false;
    }
    if (!mg_method_valid(method)) {
        srv_fail(r, MG_EINVAL, NULL, "the request method is not a valid HTTP token");
        return false;
    }
    if (!framing_ok(r))
        return false;
    /* "." / ".." / empty segments never name anything: refuse them instead of
     * guessing what a normalising proxy would have meant. */
    if (has_dot_segment(r->path)) {
        srv_fail(r, MG_EINVAL, NULL,
                 "the path has an empty, '.' or '..' segment; name resources directly");
        return false;
    }
    rc = srv_route_match(r, r->srv->routes, method, r->path);
    if (rc == MG_ENOTFOUND) {
        srv_fail(r, MG_ENOTFOUND, NULL, "no such endpoint: %s %s", method, r->path);
        return false;
    }
    if (rc == MG_EMETHOD) {
        srv_fail(r, MG_EMETHOD, NULL, "%s is not allowed on %s", method, r->path);
        return false;
    }
    /* Authentication comes before parameter validation: no oracle for callers
     * without a token. */
    if (!srv_check_access(r))
        return false;
    /* A refusal (a write to the read-only registry) does not depend on the parameters. */
    if (r->route->body == SRV_BODY_REFUSED) {
        r->route->handle(r);
        if (r->resp == NULL)
            srv_fail(r, MG_EIO, NULL, "the handler produced no response");
        return false;
    }
    if (rc == MG_EINVAL) {
        srv_reply_error(r, &r->err);
        return false;
    }
    if (cl && !mg_parse_i64(cl, 0, INT64_MAX, &cl_n)) {
        srv_fail(r, MG_EINVAL, NULL, "malformed Content-Length");
        return false;
    }
    len = (uint64_t)cl_n;
    if (r->route->body == SRV_BODY_JSON || r->route->body == SRV_BODY_FORM) {
        cap = r->srv->cfg->max_json_bytes;
        if (len > 0 && !body_type_ok(r)) {
            srv_fail(r, MG_EMEDIA, NULL, "send the body as Content-Type: application/json");
            return false;
        }
        if (len > cap) {
            srv_fail(r, MG_ETOOBIG, NULL, "the JSON body is larger than the limit of %llu bytes",
                     (unsigned long long)cap);
            return false;
        }
        mg_buf_init(&r->raw, (size_t)cap);
    } else if (r->route->body == SRV_BODY_STREAM) {
        cap = r->srv->cfg->max_blob_bytes;
        if (len > cap) {
            srv_fail(r, MG_ETOOBIG, NULL, "the body is larger than the limit of %llu bytes",
                     (unsigned long long)cap);
            return false;
        }
        if (r->route->stream_begin(r) != MG_OK) {
            srv_reply_error(r, &r->err);
            return false;
        }
    }
    return true;
}

/* A body chunk. Errors are remembered and answered once the body ends. */
void srv_req_body(struct srv_req *r, const char *data, size_t n)
{
    __atomic_add_fetch(&r->body_bytes, n, __ATOMIC_RELAXED);
    if (r->failed)
        return;
    if (r->route->body == SRV_BODY_JSON || r->route->body == SRV_BODY_FORM) {
        if (r->raw.max > 0 && mg_buf_append(&r->raw, data, n) != MG_OK) {
            mg_fail(&r->err, MG_ETOOBIG, NULL,
                    "the JSON body is larger than the limit of %llu bytes",
                    (unsigned long long)r->raw.max);
            r->failed = true;
        }
    } else if (r->route->body == SRV_BODY_STREAM) {
        if (r->route->stream_data(r, data, n) != MG_OK)
            r->failed = true;
    }
}

/* The whole body is in: parse JSON if needed and call the handler. */
void srv_req_finish(struct srv_req *r)
{
    json_error_t jerr;

    if (r->failed) {
        srv_reply_error(r, &r->err);
        return;
    }
    if (r->route->body == SRV_BODY_FORM && r->raw.len > 0 &&
        is_form_type(srv_header(r, MHD_HTTP_HEADER_CONTENT_TYPE))) {
        if ((r->body = form_to_json(r->raw.data, r->raw.len)) == NULL) {
            srv_fail(r, MG_EINVAL, NULL,
                     "the form body is malformed (name=value pairs joined by '&', each name "
                     "once, percent-encoded UTF-8)");
            return;
        }
        mg_buf_release(&r->raw);
    } else if ((r->route->body == SRV_BODY_JSON || r->route->body == SRV_BODY_FORM) &&
               r->raw.len > 0) {
        if (!body_type_ok(r)) {
            srv_fail(r, MG_EMEDIA, NULL, "send the body as Content-Type: application/json");
            return;
        }
        r->body = json_loadb(r->raw.data, r->raw.len, JSON_REJECT_DUPLICATES, &jerr);
        if (r->body == NULL) {
            srv_fail(r, MG_EINVAL, NULL, "the body is not valid JSON (line %d, column %d: %s)",
                     jerr.line, jerr.column, jerr.text);
            return;
        }
        mg_buf_release(&r->raw);
    }
    r->route->handle(r);
    if (r->resp == NULL && !r->deferred)
        srv_fail(r, MG_EIO, NULL, "the handler produced no response");
}

/*
 * A request refused before its body was read: does the client still send the body? Then it
 * is drained (up to DRAIN_MAX) before the reply goes out, or the client, still writing,
 * meets a closed socket (EPIPE) and never reads the reply. With "Expect: 100-continue" the
 * client waits for our word, so the reply goes at once and no body comes.
 */
bool srv_req_body_on_its_way(struct srv_req *r)
{
    const char *cl = srv_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = srv_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *expect = srv_header(r, MHD_HTTP_HEADER_EXPECT);

    if (expect != NULL && strcasecmp(expect, "100-continue") == 0)
        return false;
    return te != NULL || (cl != NULL && strcmp(cl, "0") != 0);
}

/* A refused body's connection is not reused: what the client sent after the part we
 * drained, if anything, is never read as a request. */
void srv_req_close_after_reply(struct srv_req *r)
{
    if (r->resp != NULL)
        MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONNECTION, "close");
}
