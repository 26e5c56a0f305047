/*
 * test_ops_tls.c - milestone M8, TLS: --tls-cert/--tls-key serve HTTPS with
 * libmicrohttpd's TLS. A self-signed P-256 certificate made here with the
 * openssl CLI: HTTPS works with libcurl trusting exactly that certificate
 * (public and authenticated calls, an upload and a 1 MiB download), every
 * answer (errors too) carries Strict-Transport-Security, an untrusted client
 * refuses the certificate, and plain HTTP to the TLS port gets no answer.
 * A plain-HTTP server sends no HSTS. A mismatched, missing or malformed key
 * or certificate makes modelgated refuse to start, saying why.
 */
#include "harness.h"
#include "sys.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <curl/curl.h>

static char dir[IT_PATH_MAX];
static char cert[IT_PATH_MAX], key[IT_PATH_MAX];
static char cert2[IT_PATH_MAX], key2[IT_PATH_MAX];
static struct mg_server *srv;

/* ---- an HTTPS client ------------------------------------------------------- */

struct tls_resp {
    CURLcode rc;
    long status;
    char error[CURL_ERROR_SIZE];
    char hsts[256];
    bool has_hsts;
    char *body;
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    struct tls_resp *r = ud;
    size_t k = size * n;
    char *nb = realloc(r->body, r->len + k + 1);

    if (nb == NULL)
        return 0;
    memcpy(nb + r->len, p, k);
    r->body = nb;
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    struct tls_resp *r = ud;
    size_t k = size * n;
    static const char name[] = "strict-transport-security:";

    if (k > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0) {
        size_t v = sizeof(name) - 1, e = k;

        while (v < k && p[v] == ' ')
            v++;
        while (e > v && (p[e - 1] == '\r' || p[e - 1] == '\n'))
            e--;
        snprintf(r->hsts, sizeof(r->hsts), "%.*s", (int)(e - v), p + v);
        r->has_hsts = true;
    }
    return k;
}

/*
 * One request to url. cainfo: the CA file to trust (NULL: the system's).
 * body != NULL makes it a POST of len bytes (application/octet-stream).
 */
static void request(const char *url, const char *token, const char *cainfo, const void *body,
                    size_t len, struct tls_resp *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char auth[256];

    memset(out, 0, sizeof(*out));
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, out->error);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
    if (cainfo != NULL)
        curl_easy_setopt(c, CURLOPT_CAINFO, cainfo);
    if (token != NULL) {
        it_fmt(auth, sizeof(auth), "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    if (body != NULL) {
        h = curl_slist_append(h, "Content-Type: application/octet-stream");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    out->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (out->body == NULL)
        out->body = calloc(1, 1);
}

static void resp_free(struct tls_resp *r)
{
    free(r->body);
    r->body = NULL;
}

static const char *https(char *buf, size_t n, int port, const char *path)
{
    return it_fmt(buf, n, "https://127.0.0.1:%d%s", port, path);
}

static void expect_ok(const struct tls_resp *r, long status, const char *what)
{
    if (r->rc != CURLE_OK)
        fail_msg("%s: the HTTPS transfer failed: %s (%s)", what, curl_easy_strerror(r->rc),
                 r->error);
    if (r->status != status)
        fail_msg("%s: status %ld, want %ld: %.300s", what, r->status, status, r->body);
}

static void expect_hsts(const struct tls_resp *r, const char *what)
{
    long age = -1;

    if (!r->has_hsts)
        fail_msg("%s: no Strict-Transport-Security header over HTTPS", what);
    if (strncasecmp(r->hsts, "max-age=", 8) != 0 || (age = strtol(r->hsts + 8, NULL, 10)) <= 0)
        fail_msg("%s: Strict-Transport-Security '%s' has no positive max-age", what, r->hsts);
}

/* ---- certificates ------------------------------------------------------------ */

static void sh(const char *cmd)
{
    int rc = system(cmd);

    if (rc != 0)
        fail_msg("'%s' failed (status %d)", cmd, rc);
}

static void make_cert(const char *c, const char *k, const char *cn)
{
    char cmd[4 * IT_PATH_MAX];

    it_fmt(cmd, sizeof(cmd),
           "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
           "-subj /CN=%s -addext subjectAltName=IP:127.0.0.1 -keyout '%s' -out '%s' "
           ">/dev/null 2>&1 && chmod 600 '%s'",
           cn, k, c, k);
    sh(cmd);
}

static int setup(void **state)
{
    char port_arg[2][IT_PATH_MAX];

    it_mkdtemp(dir, "ops-tls");
    it_fmt(cert, sizeof(cert), "%s/cert.pem", dir);
    it_fmt(key, sizeof(key), "%s/key.pem", dir);
    it_fmt(cert2, sizeof(cert2), "%s/other-cert.pem", dir);
    it_fmt(key2, sizeof(key2), "%s/other-key.pem", dir);
    make_cert(cert, key, "127.0.0.1");
    make_cert(cert2, key2, "other.example");
    snprintf(port_arg[0], sizeof(port_arg[0]), "%s", cert);
    snprintf(port_arg[1], sizeof(port_arg[1]), "%s", key);
    srv = it_server_start(
        (const char *const[]){"--tls-cert", port_arg[0], "--tls-key", port_arg[1], NULL});
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

/* ---- tests ------------------------------------------------------------------- */

static void test_https_serves_with_hsts(void **state)
{
    struct mg_server *s = *state;
    struct tls_resp r;
    char url[256], digest[IT_DIGEST_LEN + 1], path[128];
    json_t *j;

    request(https(url, sizeof(url), s->port, "/healthz"), NULL, cert, NULL, 0, &r);
    expect_ok(&r, 200, "GET /healthz over HTTPS");
    expect_hsts(&r, "GET /healthz");
    if (strstr(r.body, "\"ok\"") == NULL)
        fail_msg("GET /healthz over HTTPS: %s", r.body);
    resp_free(&r);

    request(https(url, sizeof(url), s->port, "/api/v1/whoami"), s->admin_token, cert, NULL, 0, &r);
    expect_ok(&r, 200, "GET /api/v1/whoami over HTTPS");
    expect_hsts(&r, "GET /api/v1/whoami");
    j = json_loads(r.body, 0, NULL);
    if (!json_is_object(j) || json_string_value(json_object_get(j, "name")) == NULL)
        fail_msg("GET /api/v1/whoami over HTTPS: %s", r.body);
    json_decref(j);
    resp_free(&r);

    /* Errors carry HSTS too. */
    request(https(url, sizeof(url), s->port, "/api/v1/whoami"), NULL, cert, NULL, 0, &r);
    expect_ok(&r, 401, "GET /api/v1/whoami without a token over HTTPS");
    expect_hsts(&r, "a 401 answer");
    resp_free(&r);
    request(https(url, sizeof(url), s->port, "/api/v1/models/no-such-model"), s->admin_token, cert,
            NULL, 0, &r);
    expect_ok(&r, 404, "GET of a missing model over HTTPS");
    expect_hsts(&r, "a 404 answer");
    resp_free(&r);

    /* An upload and a streamed 1 MiB download over TLS. */
    {
        const size_t n = 1u << 20;
        uint8_t *bytes = malloc(n);

        assert_non_null(bytes);
        it_pattern(4242, 0, bytes, n);
        it_digest(bytes, n, digest);
        request(https(url, sizeof(url), s->port, "/api/v1/blobs"), s->admin_token, cert, bytes, n,
                &r);
        expect_ok(&r, 201, "POST /api/v1/blobs (1 MiB) over HTTPS");
        expect_hsts(&r, "POST /api/v1/blobs");
        if (strstr(r.body, digest) == NULL)
            fail_msg("the upload over HTTPS answered %s, want digest %s", r.body, digest);
        resp_free(&r);
        request(https(url, sizeof(url), s->port,
                      it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest)),
                s->admin_token, cert, NULL, 0, &r);
        expect_ok(&r, 200, "GET of the blob over HTTPS");
        expect_hsts(&r, "GET of a blob (a file response)");
        if (r.len != n || memcmp(r.body, bytes, n) != 0)
            fail_msg("the blob read back over HTTPS differs (%zu bytes, want %zu)", r.len, n);
        resp_free(&r);
        free(bytes);
    }
}

static void test_untrusted_and_plain_clients_fail(void **state)
{
    struct mg_server *s = *state;
    struct tls_resp r;
    char url[256];

    /* Trusting only another certificate: the server's is refused. */
    request(https(url, sizeof(url), s->port, "/healthz"), NULL, cert2, NULL, 0, &r);
    if (r.rc == CURLE_OK)
        fail_msg("a client that trusts only another certificate accepted the server's");
    resp_free(&r);

    /* Plain HTTP to the TLS port: no HTTP answer at all, or an error one;
     * never the resource. */
    request(it_fmt(url, sizeof(url), "http://127.0.0.1:%d/healthz", s->port), NULL, NULL, NULL, 0,
            &r);
    if (r.rc == CURLE_OK && r.status >= 200 && r.status < 300)
        fail_msg("plain HTTP to the TLS port was answered %ld: %s", r.status, r.body);
    print_message("plain HTTP to the TLS port: %s, status %ld\n", curl_easy_strerror(r.rc),
                  r.status);
    resp_free(&r);

    /* The server is unharmed. */
    request(https(url, sizeof(url), s->port, "/healthz"), NULL, cert, NULL, 0, &r);
    expect_ok(&r, 200, "GET /healthz over HTTPS after the plain client");
    resp_free(&r);
}

static void test_plain_server_sends_no_hsts(void **state)
{
    struct mg_server *plain = it_server_start(NULL);
    struct it_resp *r;

    (void)state;
    r = it_get(plain, "/healthz", NULL);
    it_expect_status(plain, r, 200);
    if (it_header(r, "Strict-Transport-Security") != NULL)
        fail_msg("a plain-HTTP server sent Strict-Transport-Security: %s",
                 it_header(r, "Strict-Transport-Security"));
    it_server_stop(plain);
    it_server_free(&plain);
}

/*
 * Run modelgated with these TLS arguments on a fresh data directory; it
 * must exit non-zero within the deadline without writing its port file.
 * Returns its stderr (malloc'd).
 */
static char *refused_start(const char *tag, const char *const *tls_args)
{
    const char *bin = getenv("MODELGATED");
    char data[IT_PATH_MAX], port[IT_PATH_MAX], log[IT_PATH_MAX];
    const char *argv[16];
    size_t argc = 0;
    int64_t deadline = it_deadline(20000);
    int status = 0;
    pid_t pid;
    char *text;

    assert_non_null(bin);
    it_fmt(data, sizeof(data), "%s/data-%s", dir, tag);
    it_fmt(port, sizeof(port), "%s/port-%s", dir, tag);
    it_fmt(log, sizeof(log), "%s/log-%s", dir, tag);
    argv[argc++] = bin;
    argv[argc++] = "--data-dir";
    argv[argc++] = data;
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--port-file";
    argv[argc++] = port;
    for (size_t i = 0; tls_args[i] != NULL; i++)
        argv[argc++] = tls_args[i];
    argv[argc] = NULL;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_RDONLY);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (it_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("%s: modelgated kept running (it should refuse to start)", tag);
        }
        it_pause_ms(10);
    }
    text = it_read_file(log, NULL);
    if (text == NULL)
        text = strdup("");
    assert_non_null(text);
    {
        /* Failures below jump out: keep the output in a static buffer. */
        static char out[4096];

        snprintf(out, sizeof(out), "%s", text);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            free(text);
            fail_msg("%s: modelgated exited 0; want a refusal. Its output: %s", tag, out);
        }
        if (WIFSIGNALED(status)) {
            free(text);
            fail_msg("%s: modelgated died of signal %d instead of refusing cleanly. Its output: "
                     "%s",
                     tag, WTERMSIG(status), out);
        }
        if (access(port, F_OK) == 0) {
            free(text);
            fail_msg("%s: modelgated wrote its port file before refusing", tag);
        }
    }
    print_message("%s: exit %d: %s", tag, WEXITSTATUS(status), text);
    return text;
}

static bool has(const char *text, const char *word)
{
    return strcasestr(text, word) != NULL;
}

/* Frees text; fails with what when !ok. */
static void expect_message(char *text, bool ok, const char *what)
{
    static char copy[4096];

    snprintf(copy, sizeof(copy), "%s", text);
    free(text);
    if (!ok)
        fail_msg("%s, not: %s", what, copy);
}

static void test_mismatched_key_refuses_to_start(void **state)
{
    char *out;

    (void)state;
    /* A key that belongs to another certificate. */
    out = refused_start("mismatched",
                        (const char *const[]){"--tls-cert", cert, "--tls-key", key2, NULL});
    expect_message(out, has(out, "key") && !has(out, "in use"),
                   "a key that does not match the certificate must be refused with a message "
                   "about the key and the certificate");

    /* The certificate given as the key (no private key in it). */
    out = refused_start("cert-as-key",
                        (const char *const[]){"--tls-cert", cert, "--tls-key", cert, NULL});
    expect_message(out, has(out, "key") && !has(out, "in use"),
                   "a key file without a private key must be refused saying so");
}

static void test_missing_or_malformed_tls_files_refuse_to_start(void **state)
{
    char missing[IT_PATH_MAX], garbage[IT_PATH_MAX];
    char *out;

    (void)state;
    it_fmt(missing, sizeof(missing), "%s/no-such-key.pem", dir);
    it_fmt(garbage, sizeof(garbage), "%s/garbage.pem", dir);
    it_write_file(garbage, "this is not a certificate\n");

    /* A key file that does not exist. */
    out = refused_start("missing",
                        (const char *const[]){"--tls-cert", cert, "--tls-key", missing, NULL});
    expect_message(out, has(out, "no-such-key.pem"),
                   "a missing key file must be named in the message");

    /* A certificate without its key, and a key without a certificate. */
    out = refused_start("cert-only", (const char *const[]){"--tls-cert", cert, NULL});
    expect_message(out, has(out, "tls-key"), "--tls-cert alone must be refused naming --tls-key");
    out = refused_start("key-only", (const char *const[]){"--tls-key", key, NULL});
    expect_message(out, has(out, "tls-cert"), "--tls-key alone must be refused naming --tls-cert");

    /* A certificate file that is not PEM. */
    out = refused_start("garbage-cert",
                        (const char *const[]){"--tls-cert", garbage, "--tls-key", key, NULL});
    expect_message(out, has(out, "garbage.pem"),
                   "a malformed certificate file must be named in the message");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_https_serves_with_hsts, it_test_teardown),
        cmocka_unit_test_teardown(test_untrusted_and_plain_clients_fail, it_test_teardown),
        cmocka_unit_test_teardown(test_plain_server_sends_no_hsts, it_test_teardown),
        cmocka_unit_test_teardown(test_missing_or_malformed_tls_files_refuse_to_start,
                                  it_test_teardown),
        cmocka_unit_test_teardown(test_mismatched_key_refuses_to_start, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
