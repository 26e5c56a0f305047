/*
 * prom.c - see prom.h.
 *
 * The answer of an instant query (Prometheus HTTP API, /api/v1/query):
 *   {"status":"success","data":{"resultType":"vector",
 *     "result":[{"metric":{…},"value":[<unix seconds>,"<number as text>"]}]}}
 *   {"status":"success","data":{"resultType":"scalar","result":[<unix seconds>,"<text>"]}}
 *   {"status":"error","errorType":"bad_data","error":"<message>"}   (4xx/5xx)
 * Values are text so that NaN and ±Inf survive JSON ("NaN", "+Inf", "-Inf").
 */
#include "prom.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "../os/file.h"

static void set(struct prom_sample *out, enum gate_sample_state st, double v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set(struct prom_sample *out, enum gate_sample_state st, double v, const char *fmt, ...)
{
    va_list ap;

    out->state = st;
    out->value = v;
    out->detail[0] = '\0';
    if (fmt) {
        va_start(ap, fmt);
        vsnprintf(out->detail, sizeof(out->detail), fmt, ap);
        va_end(ap);
    }
}

/* A value pair [time, "text"] → a finite number, or an error saying what it was. */
static void value_of(const json_t *pair, struct prom_sample *out)
{
    const char *text;
    char *end;
    double v;

    if (!json_is_array(pair) || json_array_size(pair) != 2 ||
        !json_is_number(json_array_get(pair, 0)) || !json_is_string(json_array_get(pair, 1))) {
        set(out, GATE_SAMPLE_ERROR, 0,
            "Prometheus answered a sample that is not [time, \"value\"]");
        return;
    }
    text = json_string_value(json_array_get(pair, 1));
    if (json_string_length(json_array_get(pair, 1)) > 64) {
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus answered a value of %zu characters",
            json_string_length(json_array_get(pair, 1)));
        return;
    }
    errno = 0;
    v = strtod(text, &end);
    if (end == text || *end != '\0' ||
        strlen(text) != json_string_length(json_array_get(pair, 1))) {
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus answered '%.40s', which is not a number", text);
        return;
    }
    if (isnan(v)) {
        set(out, GATE_SAMPLE_ERROR, 0,
            "the query gave NaN (no requests in the window, or a division by zero)");
        return;
    }
    if (!isfinite(v)) {
        set(out, GATE_SAMPLE_ERROR, 0, "the query gave %s, not a finite number", text);
        return;
    }
    set(out, GATE_SAMPLE_OK, v, NULL);
}

void prom_parse_answer(const char *body, size_t len, long status, struct prom_sample *out)
{
    json_error_t jerr;
    json_t *j = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
    json_t *data, *result;
    const char *st, *type;

    if (j == NULL || !json_is_object(j)) {
        if (status < 200 || status > 299)
            set(out, GATE_SAMPLE_ERROR, 0, "Prometheus answered HTTP %ld without a JSON body",
                status);
        else
            set(out, GATE_SAMPLE_ERROR, 0,
                "Prometheus's answer is not JSON (is the provider URL the Prometheus HTTP "
                "API?)");
        goto out;
    }
    st = json_string_value(json_object_get(j, "status"));
    if (st && strcmp(st, "error") == 0) {
        const char *e = json_string_value(json_object_get(j, "error"));
        const char *et = json_string_value(json_object_get(j, "errorType"));
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus refused the query (%.32s): %.160s",
            et ? et : "error", e ? e : "no message");
        goto out;
    }
    if (st == NULL || strcmp(st, "success") != 0 || status < 200 || status > 299) {
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus answered HTTP %ld with status '%.32s'", status,
            st ? st : "(none)");
        goto out;
    }
    data = json_object_get(j, "data");
    type = json_string_value(json_object_get(data, "resultType"));
    result = json_object_get(data, "result");
    if (type == NULL || result == NULL) {
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus's answer has no data.resultType or data.result");
        goto out;
    }
    if (strcmp(type, "scalar") == 0) {
        value_of(result, out);
        goto out;
    }
    if (strcmp(type, "vector") != 0) {
        set(out, GATE_SAMPLE_ERROR, 0,
            "the query gave a %.16s; it must give a scalar or a one-sample vector (an instant "
            "query without a range selector at the top)",
            type);
        goto out;
    }
    if (!json_is_array(result)) {
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus's data.result is not an array");
        goto out;
    }
    if (json_array_size(result) == 0) {
        set(out, GATE_SAMPLE_NODATA, 0, "no data");
        goto out;
    }
    if (json_array_size(result) > 1) {
        set(out, GATE_SAMPLE_ERROR, 0,
            "the query gave %zu series; it must give one (aggregate it, e.g. with sum())",
            json_array_size(result));
        goto out;
    }
    value_of(json_object_get(json_array_get(result, 0), "value"), out);
out:
    json_decref(j);
}

/* ---- the request ------------------------------------------------------- */

struct sink {
    char *buf;
    size_t len, cap, max;
    int too_big;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t len = size * n;

    if (len > s->max - s->len) {
        s->too_big = 1;
        return 0; /* abort the transfer */
    }
    if (s->len + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        char *nb;

        while (cap < s->len + len + 1)
            cap *= 2;
        if (cap > s->max + 1)
            cap = s->max + 1;
        if ((nb = realloc(s->buf, cap)) == NULL)
            return 0;
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, len);
    s->len += len;
    return len;
}

void prom_query(const struct prom_client *c, const char *query, int64_t at_ms,
                struct prom_sample *out)
{
    struct sink s = {.max = c->max_bytes ? c->max_bytes : PROM_ANSWER_MAX};
    struct curl_slist *hdrs = NULL;
    char *url = NULL, *q = NULL, *auth = NULL, errbuf[CURL_ERROR_SIZE] = "";
    long status = 0;
    CURL *h = curl_easy_init();
    CURLcode cr;

    if (h == NULL || (q = curl_easy_escape(h, query, 0)) == NULL ||
        asprintf(&url, "%s/api/v1/query?query=%s&time=%lld.%03lld", c->url, q,
                 (long long)(at_ms / 1000), (long long)(at_ms % 1000)) < 0) {
        url = NULL;
        set(out, GATE_SAMPLE_ERROR, 0, "out of memory");
        goto out;
    }
    cr = curl_easy_setopt(h, CURLOPT_URL, url);
    cr |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    cr |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    cr |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms > 0 ? c->timeout_ms : 5000L);
    cr |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                           c->timeout_ms > 0 && c->timeout_ms < 3000 ? c->timeout_ms : 3000L);
    cr |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    cr |= curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    cr |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    cr |= curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    cr |= curl_easy_setopt(h, CURLOPT_USERAGENT, "modelgated");
    hdrs = curl_slist_append(NULL, "Accept: application/json");
    if (c->bearer && asprintf(&auth, "Authorization: Bearer %s", c->bearer) >= 0) {
        struct curl_slist *n = curl_slist_append(hdrs, auth);
        hdrs = n ? n : hdrs;
    }
    cr |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (c->userpwd) {
        cr |= curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        cr |= curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
    }
    if (cr != CURLE_OK || hdrs == NULL) {
        set(out, GATE_SAMPLE_ERROR, 0, "cannot set up the request to Prometheus");
        goto out;
    }
    cr = curl_easy_perform(h);
    if (s.too_big) {
        set(out, GATE_SAMPLE_ERROR, 0,
            "Prometheus's answer is over %zu bytes; the query must "
            "give one sample",
            s.max);
        goto out;
    }
    if (cr == CURLE_OPERATION_TIMEDOUT) {
        set(out, GATE_SAMPLE_ERROR, 0, "Prometheus at %.200s did not answer within %ld ms", c->url,
            c->timeout_ms > 0 ? c->timeout_ms : 5000L);
        goto out;
    }
    if (cr != CURLE_OK) {
        set(out, GATE_SAMPLE_ERROR, 0, "cannot reach Prometheus at %.120s: %.100s", c->url,
            errbuf[0] ? errbuf : curl_easy_strerror(cr));
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    prom_parse_answer(s.buf, s.len, status, out);
out:
    if (auth) {
        OPENSSL_cleanse(auth, strlen(auth));
        free(auth);
    }
    curl_slist_free_all(hdrs);
    curl_free(q);
    free(url);
    free(s.buf);
    if (h)
        curl_easy_cleanup(h);
}

enum mg_code prom_read_credentials(const char *path, char **bearer, char **userpwd,
                                   struct mg_error *err)
{
    char buf[4096];
    enum mg_code rc;

    *bearer = *userpwd = NULL;
    rc = mg_secret_line_read(path, "prometheus-credentials", buf, sizeof(buf), err);
    if (rc == MG_ETOOBIG)
        return mg_fail(err, MG_EINVAL, "prometheus-credentials",
                       "%s must hold one line: 'Bearer TOKEN' or 'USER:PASSWORD' (at most 4 KiB)",
                       path);
    if (rc != MG_OK)
        return rc;
    if (strncmp(buf, "Bearer ", 7) == 0 && buf[7] != '\0' && strpbrk(buf + 7, " \t") == NULL)
        *bearer = strdup(buf + 7);
    else if (strchr(buf, ':') != NULL && buf[0] != ':')
        *userpwd = strdup(buf);
    else {
        rc = mg_fail(err, MG_EINVAL, "prometheus-credentials",
                     "%s must hold one line: 'Bearer TOKEN' or 'USER:PASSWORD'", path);
        goto out;
    }
    if (*bearer == NULL && *userpwd == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}
