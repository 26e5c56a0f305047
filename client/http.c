/*
 * http.c - the CLI's libcurl calls: JSON requests with a capped body, a
 * streamed blob upload and a streamed, hashed download, each with a progress
 * bar when stderr is a terminal.
 *
 * Only http and https are spoken and redirects are never followed, so the
 * bearer token goes to the configured server and nowhere else.
 */
#include "mgc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "../base/util.h"

#define CONNECT_TIMEOUT_S 15L
#define STALL_SECONDS 300L /* abort a transfer that moved no byte for this long */

/* ---- progress ----------------------------------------------------------------------------- */

struct progress {
    const char *label;
    int64_t start_ms, last_ms;
    bool shown;
};

static void fmt_eta(double secs, char out[32])
{
    long s = secs > 359999 ? 359999 : (long)secs;

    if (s >= 3600)
        snprintf(out, 32, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(out, 32, "%ld:%02ld", s / 60, s % 60);
}

/* Draw "label  12.0 MiB / 40.0 MiB  30%  8.1 MiB/s  ETA 0:03" on stderr. */
static void progress_draw(struct progress *p, uint64_t done, uint64_t total, bool final)
{
    int64_t now = mg_mono_ms();
    double secs = (double)(now - p->start_ms) / 1000.0;
    double rate = secs > 0 ? (double)done / secs : 0;
    char d[32], t[32], r[32], eta[32];

    if (!final && now - p->last_ms < 200)
        return;
    p->last_ms = now;
    p->shown = true;
    mgc_human_bytes((double)done, d);
    mgc_human_bytes(rate, r);
    if (total > 0) {
        mgc_human_bytes((double)total, t);
        if (rate > 0 && total > done)
            fmt_eta((double)(total - done) / rate, eta);
        else
            snprintf(eta, sizeof(eta), "0:00");
        fprintf(stderr, "\r%s  %s / %s  %3d%%  %s/s  ETA %s\033[K", p->label, d, t,
                (int)(done * 100 / total), r, eta);
    } else {
        fprintf(stderr, "\r%s  %s  %s/s\033[K", p->label, d, r);
    }
    if (final)
        fputc('\n', stderr);
}

static int xferinfo(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                    curl_off_t ulnow)
{
    struct progress *p = clientp;

    if (ultotal > 0)
        progress_draw(p, (uint64_t)ulnow, (uint64_t)ultotal, false);
    else if (dlnow > 0)
        progress_draw(p, (uint64_t)dlnow, dltotal > 0 ? (uint64_t)dltotal : 0, false);
    return 0;
}

static void progress_setup(struct mgc *c, struct progress *p, const char *label)
{
    memset(p, 0, sizeof(*p));
    p->label = label;
    p->start_ms = mg_mono_ms();
    if (!c->tty || label == NULL) {
        curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 1L);
        return;
    }
    curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, xferinfo);
    curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, p);
    curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
}

/* ---- setup -------------------------------------------------------------------------------- */

int mgc_http_init(struct mgc *c)
{
    struct mg_buf h;
    struct curl_slist *l;

    if (c->curl != NULL)
        return MGC_OK;
    c->curl = curl_easy_init();
    if (c->curl == NULL)
        return mgc_fail("cannot initialise libcurl");
    mg_buf_init(&h, 8192);
    if (mg_buf_puts(&h, "Authorization: Bearer ") != MG_OK || mg_buf_puts(&h, c->token) != MG_OK) {
        mg_buf_release(&h);
        return mgc_fail("the token is too long");
    }
    l = curl_slist_append(NULL, h.data);
    memset(h.data, 0, h.len);
    mg_buf_release(&h);
    if (l == NULL)
        return mgc_fail("out of memory");
    c->auth = l;
    return MGC_OK;
}

void mgc_http_release(struct mgc *c)
{
    struct curl_slist *l;

    for (l = c->auth; l != NULL; l = l->next)
        memset(l->data, 0, strlen(l->data));
    curl_slist_free_all(c->auth);
    c->auth = NULL;
    if (c->curl != NULL)
        curl_easy_cleanup(c->curl);
    c->curl = NULL;
}

void mgc_reply_release(struct mgc_reply *r)
{
    json_decref(r->body);
    memset(r, 0, sizeof(*r));
}

char *mgc_escape(struct mgc *c, const char *s)
{
    char *e = curl_easy_escape(c->curl, s, 0), *out;

    if (e == NULL)
        return NULL;
    out = strdup(e);
    curl_free(e);
    return out;
}

/* Reset the handle and set what every request shares. extra: more headers (appended to a
 * copy of the auth list; the caller frees *hdrs). */
static int request_setup(struct mgc *c, const char *method, const char *path,
                         const char *const *extra, struct curl_slist **hdrs)
{
    struct mg_buf url;
    struct curl_slist *l = NULL, *n;
    const struct curl_slist *a;
    CURLcode cr = CURLE_OK;

    *hdrs = NULL;
    for (a = c->auth; a != NULL; a = a->next) {
        if ((n = curl_slist_append(l, a->data)) == NULL)
            goto nomem;
        l = n;
    }
    for (; extra != NULL && *extra != NULL; extra++) {
        if ((n = curl_slist_append(l, *extra)) == NULL)
            goto nomem;
        l = n;
    }
    *hdrs = l;
    mg_buf_init(&url, 16384);
    if (mg_buf_puts(&url, c->url) != MG_OK || mg_buf_puts(&url, path) != MG_OK) {
        mg_buf_release(&url);
        return mgc_fail("the request URL is too long");
    }
    curl_easy_reset(c->curl);
    cr |= curl_easy_setopt(c->curl, CURLOPT_URL, url.data);
    mg_buf_release(&url);
    cr |= curl_easy_setopt(c->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    cr |= curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 0L);
    cr |= curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    cr |= curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    cr |= curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, STALL_SECONDS);
    cr |= curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
    cr |= curl_easy_setopt(c->curl, CURLOPT_USERAGENT, "modelgate-cli/0.1");
    cr |= curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, l);
    cr |= curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "GET") == 0)
        cr |= curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    if (cr != CURLE_OK)
        return mgc_fail("cannot set up the request (libcurl)");
    return MGC_OK;
nomem:
    curl_slist_free_all(l);
    return mgc_fail("out of memory");
}

/* Body sink for JSON replies and error bodies: capped. */
static size_t sink_buf(char *p, size_t size, size_t n, void *ud)
{
    struct mg_buf *b = ud;

    if (mg_buf_append(b, p, size * n) != MG_OK)
        return 0; /* over the cap: libcurl aborts with CURLE_WRITE_ERROR */
    return size * n;
}

/* Fill rep from the HTTP status and the body text. */
static void reply_fill(struct mgc *c, struct mgc_reply *rep, const struct mg_buf *body)
{
    json_t *err; /* BORROWED */
    const char *s;

    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &rep->http);
    if (body->len > 0)
        rep->body = json_loadb(body->data, body->len, JSON_REJECT_DUPLICATES, NULL);
    if (rep->http >= 200 && rep->http < 300)
        return;
    err = json_object_get(rep->body, "error");
    if ((s = mgc_str(err, "code", NULL)) != NULL)
        snprintf(rep->code, sizeof(rep->code), "%s", s);
    if ((s = mgc_str(err, "message", NULL)) != NULL)
        snprintf(rep->message, sizeof(rep->message), "%s", s);
    else
        snprintf(rep->message, sizeof(rep->message), "the server answered HTTP %ld", rep->http);
}

static int transport_fail(struct mgc *c, struct mgc_reply *rep, CURLcode cr, const char *errbuf)
{
    snprintf(rep->message, sizeof(rep->message), "cannot reach %s: %s", c->url,
             errbuf[0] ? errbuf : curl_easy_strerror(cr));
    return MGC_ERR;
}

int mgc_http_json(struct mgc *c, const char *method, const char *path, const json_t *body,
                  struct mgc_reply *rep)
{
    static const char *const json_hdr[] = {"Content-Type: application/json", "Expect:", NULL};
    static const char *const accept_hdr[] = {"Accept: application/json", NULL};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    struct mg_buf resp;
    char *text = NULL;
    CURLcode cr;
    int rc;

    memset(rep, 0, sizeof(*rep));
    mg_buf_init(&resp, MGC_JSON_MAX);
    rc = request_setup(c, method, path, body ? json_hdr : accept_hdr, &hdrs);
    if (rc != MGC_OK) {
        snprintf(rep->message, sizeof(rep->message), "cannot set up the request");
        goto out;
    }
    if (body != NULL) {
        text = json_dumps(body, JSON_COMPACT);
        if (text == NULL) {
            rc = MGC_ERR;
            snprintf(rep->message, sizeof(rep->message), "cannot encode the request body");
            goto out;
        }
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, sink_buf);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 1L);
    cr = curl_easy_perform(c->curl);
    if (cr == CURLE_WRITE_ERROR) {
        rc = MGC_ERR;
        snprintf(rep->message, sizeof(rep->message),
                 "the server's reply is larger than %zu bytes; refusing it", MGC_JSON_MAX);
        goto out;
    }
    if (cr != CURLE_OK) {
        rc = transport_fail(c, rep, cr, errbuf);
        goto out;
    }
    reply_fill(c, rep, &resp);
    rc = MGC_OK;
    /* A release tool never fails open: a success without a JSON body we can read (cut, not
     * JSON, a number out of range) is an error, never an empty answer. */
    if (rep->http >= 200 && rep->http < 300 && rep->http != 204 && rep->body == NULL) {
        rc = MGC_ERR;
        snprintf(rep->message, sizeof(rep->message),
                 "the server's reply (HTTP %ld) is not JSON this client can read; refusing to "
                 "guess",
                 rep->http);
    }
out:
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hdrs);
    mg_buf_release(&resp);
    free(text);
    return rc;
}

int mgc_reply_fail(const struct mgc_reply *r, const char *what)
{
    if (r->http == 0)
        return mgc_fail("%s%s%s", what ? what : "", what ? ": " : "", r->message);
    return mgc_fail("%s%s%s (HTTP %ld%s%s)", what ? what : "", what ? ": " : "", r->message,
                    r->http, r->code[0] ? ", " : "", r->code);
}

int mgc_call(struct mgc *c, const char *method, const char *path, const json_t *body, json_t **out)
{
    struct mgc_reply rep;
    int rc;

    if (out != NULL)
        *out = NULL;
    rc = mgc_http_json(c, method, path, body, &rep);
    if (rc != MGC_OK || rep.http < 200 || rep.http >= 300) {
        rc = mgc_reply_fail(&rep, NULL);
        mgc_reply_release(&rep);
        return rc;
    }
    if (out != NULL) {
        *out = rep.body;
        rep.body = NULL;
    }
    mgc_reply_release(&rep);
    return MGC_OK;
}

/* ---- upload ------------------------------------------------------------------------------- */

struct upload {
    int fd;
    int err; /* errno of a failed read */
};

static size_t source_fd(char *p, size_t size, size_t n, void *ud)
{
    struct upload *u = ud;
    ssize_t r;

    do
        r = read(u->fd, p, size * n);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        u->err = errno;
        return CURL_READFUNC_ABORT;
    }
    return (size_t)r;
}

int mgc_http_upload(struct mgc *c, int fd, uint64_t size, const char *digest, const char *label,
                    json_t **out)
{
    char dh[96], errbuf[CURL_ERROR_SIZE] = "";
    const char *extra[] = {"Content-Type: application/octet-stream", dh, NULL};
    struct curl_slist *hdrs = NULL;
    struct mgc_reply rep;
    struct mg_buf resp;
    struct progress prog;
    struct upload u = {fd, 0};
    CURLcode cr;
    int rc;

    *out = NULL;
    memset(&rep, 0, sizeof(rep));
    mg_buf_init(&resp, MGC_JSON_MAX);
    snprintf(dh, sizeof(dh), "X-Content-Digest: %s", digest);
    if (lseek(fd, 0, SEEK_SET) != 0)
        return mgc_fail("cannot rewind the upload: %s", strerror(errno));
    if ((rc = request_setup(c, "POST", "/api/v1/blobs", extra, &hdrs)) != MGC_OK)
        goto out;
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, source_fd);
    curl_easy_setopt(c->curl, CURLOPT_READDATA, &u);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, sink_buf);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
    progress_setup(c, &prog, label);
    cr = curl_easy_perform(c->curl);
    if (prog.shown)
        progress_draw(&prog, size, size, true);
    if (u.err != 0) {
        rc = mgc_fail("cannot read the upload: %s", strerror(u.err));
        goto out;
    }
    if (cr != CURLE_OK) {
        transport_fail(c, &rep, cr, errbuf);
        rc = mgc_reply_fail(&rep, "upload failed");
        goto out;
    }
    reply_fill(c, &rep, &resp);
    if (rep.http != 200 && rep.http != 201) {
        rc = mgc_reply_fail(&rep, "upload failed");
        goto out;
    }
    *out = rep.body;
    rep.body = NULL;
    rc = MGC_OK;
out:
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 1L);
    curl_slist_free_all(hdrs);
    mg_buf_release(&resp);
    mgc_reply_release(&rep);
    return rc;
}

/* ---- download ----------------------------------------------------------------------------- */

struct download {
    struct mgc *c;
    int fd;
    uint64_t max, got;
    EVP_MD_CTX *md;
    struct mg_buf err_body; /* a non-2xx reply's body */
    bool too_big, io_failed;
    int err;
};

static size_t sink_download(char *p, size_t size, size_t n, void *ud)
{
    struct download *d = ud;
    size_t len = size * n, off = 0;
    long status = 0;
    ssize_t w;

    curl_easy_getinfo(d->c->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status >= 300)
        return mg_buf_append(&d->err_body, p, len) == MG_OK ? len : 0;
    if (len > d->max - d->got) {
        d->too_big = true;
        return 0;
    }
    if (EVP_DigestUpdate(d->md, p, len) != 1) {
        d->io_failed = true;
        return 0;
    }
    while (off < len) {
        w = write(d->fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            d->err = w < 0 ? errno : EIO;
            d->io_failed = true;
            return 0;
        }
        off += (size_t)w;
    }
    d->got += len;
    return len;
}

int mgc_http_download(struct mgc *c, const char *path, int fd, uint64_t max, const char *label,
                      char sha256[65], uint64_t *size)
{
    static const char *const extra[] = {NULL};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    struct download d;
    struct progress prog;
    struct mgc_reply rep;
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    CURLcode cr;
    int rc;

    memset(&d, 0, sizeof(d));
    memset(&rep, 0, sizeof(rep));
    d.c = c;
    d.fd = fd;
    d.max = max;
    mg_buf_init(&d.err_body, MGC_ERROR_MAX);
    d.md = EVP_MD_CTX_new();
    if (d.md == NULL || EVP_DigestInit_ex(d.md, EVP_sha256(), NULL) != 1) {
        rc = mgc_fail("cannot start SHA-256");
        goto out;
    }
    if ((rc = request_setup(c, "GET", path, extra, &hdrs)) != MGC_OK)
        goto out;
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, sink_download);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, errbuf);
    progress_setup(c, &prog, label);
    cr = curl_easy_perform(c->curl);
    if (cr == CURLE_OK) {
        /* --blob-downloads redirect: a 307 to a presigned URL on the object store, fetched
         * without our token (it is for modelgate alone; the URL carries its own grant). */
        long status = 0;
        char *loc = NULL;

        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &loc);
        if ((status == 307 || status == 302 || status == 303) && loc != NULL &&
            (strncmp(loc, "https://", 8) == 0 || strncmp(loc, "http://", 7) == 0)) {
            char *to = strdup(loc);

            if (to == NULL) {
                rc = mgc_fail("out of memory");
                goto out;
            }
            mg_buf_release(&d.err_body);
            mg_buf_init(&d.err_body, MGC_ERROR_MAX);
            curl_easy_setopt(c->curl, CURLOPT_URL, to);
            curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, NULL);
            curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, NULL);
            curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
            cr = curl_easy_perform(c->curl);
            free(to);
        }
    }
    if (prog.shown)
        progress_draw(&prog, d.got, d.got, true);
    if (d.too_big) {
        rc = mgc_fail("the server sent more than the %llu bytes expected; refusing it",
                      (unsigned long long)max);
        goto out;
    }
    if (d.io_failed) {
        rc = mgc_fail("cannot write the download: %s", strerror(d.err ? d.err : EIO));
        goto out;
    }
    if (cr != CURLE_OK && cr != CURLE_WRITE_ERROR) {
        transport_fail(c, &rep, cr, errbuf);
        rc = mgc_reply_fail(&rep, "download failed");
        goto out;
    }
    reply_fill(c, &rep, &d.err_body);
    if (rep.http < 200 || rep.http >= 300) {
        rc = mgc_reply_fail(&rep, "download failed");
        goto out;
    }
    if (EVP_DigestFinal_ex(d.md, md, &md_len) != 1 || md_len != 32) {
        rc = mgc_fail("SHA-256 failed");
        goto out;
    }
    mg_hex_encode(md, 32, sha256);
    *size = d.got;
    rc = MGC_OK;
out:
    if (c->curl != NULL) {
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, NULL);
        curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 1L);
    }
    curl_slist_free_all(hdrs);
    EVP_MD_CTX_free(d.md);
    mg_buf_release(&d.err_body);
    mgc_reply_release(&rep);
    return rc;
}
