/*
 * test_prom.c - server/prom.c: the parser of Prometheus's /api/v1/query answers as a table
 * (data, no data, and every kind of nonsense → an error with a readable detail, never a
 * pass), and the client against a small fake Prometheus on loopback that answers what each
 * case asks: a good answer (the query and time arrive as sent, with the credentials), an
 * error status, a body over the cap, an answer slower than the timeout, a closed port; and
 * the credentials file's checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control/prom.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static void test_parse_table(void **state)
{
    static const struct {
        const char *body;
        long status;
        enum gate_sample_state want;
        double value;
        const char *says;
    } cases[] = {
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":"
         "{\"version\":\"2\"},\"value\":[1700000000.5,\"0.0125\"]}]}}",
         200, GATE_SAMPLE_OK, 0.0125, ""},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"42\"]}}", 200,
         GATE_SAMPLE_OK, 42, ""},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}", 200,
         GATE_SAMPLE_NODATA, 0, "no data"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
         "\"value\":[1,\"NaN\"]}]}}",
         200, GATE_SAMPLE_ERROR, 0, "NaN"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"+Inf\"]}}",
         200, GATE_SAMPLE_ERROR, 0, "+Inf, not a finite number"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"-Inf\"]}}",
         200, GATE_SAMPLE_ERROR, 0, "-Inf"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"12abc\"]}}",
         200, GATE_SAMPLE_ERROR, 0, "not a number"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,0.5]}}", 200,
         GATE_SAMPLE_ERROR, 0, "[time, \"value\"]"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"string\",\"result\":[1,\"x\"]}}", 200,
         GATE_SAMPLE_ERROR, 0, "gave a string"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}", 200,
         GATE_SAMPLE_ERROR, 0, "gave a matrix"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{},"
         "\"value\":[1,\"1\"]},{\"metric\":{\"a\":\"b\"},\"value\":[1,\"2\"]}]}}",
         200, GATE_SAMPLE_ERROR, 0, "gave 2 series"},
        {"{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error at char 3\"}",
         400, GATE_SAMPLE_ERROR, 0, "refused the query (bad_data): parse error at char 3"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"1\"]}}", 503,
         GATE_SAMPLE_ERROR, 0, "HTTP 503"},
        {"<html>oops</html>", 502, GATE_SAMPLE_ERROR, 0, "HTTP 502 without a JSON body"},
        {"hello", 200, GATE_SAMPLE_ERROR, 0, "not JSON"},
        {"", 200, GATE_SAMPLE_ERROR, 0, "not JSON"},
        {"[1,2]", 200, GATE_SAMPLE_ERROR, 0, "not JSON"},
        {"{\"status\":\"success\"}", 200, GATE_SAMPLE_ERROR, 0, "no data.resultType"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":{}}}", 200,
         GATE_SAMPLE_ERROR, 0, "not an array"},
        {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{}}]"
         "}}",
         200, GATE_SAMPLE_ERROR, 0, "[time, \"value\"]"},
        {"{\"status\":\"success\",\"status\":\"error\"}", 200, GATE_SAMPLE_ERROR, 0, "not JSON"},
    };
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct prom_sample s;

        prom_parse_answer(cases[i].body, strlen(cases[i].body), cases[i].status, &s);
        if (s.state != cases[i].want || (s.state == GATE_SAMPLE_OK && s.value != cases[i].value) ||
            strstr(s.detail, cases[i].says) == NULL) {
            print_error("case %zu: state %d value %g detail '%s'; want %d %g '%s'\n", i,
                        (int)s.state, s.value, s.detail, (int)cases[i].want, cases[i].value,
                        cases[i].says);
            bad++;
        }
    }
    if (bad)
        fail_msg("%zu of %zu cases wrong", bad, N_ELEMS(cases));
}

/* ---- a fake Prometheus ------------------------------------------------- */

enum mode { GOOD, ERROR_400, HUGE, SLOW };

static struct fake {
    int fd;
    uint16_t port;
    pthread_t thread;
    enum mode mode;
    char request[8192]; /* the last request's head */
    bool stop;
} fake;

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(fake.fd, NULL, NULL);
        char head[8192];
        size_t n = 0;
        ssize_t k;

        if (c < 0 || fake.stop) {
            if (c >= 0)
                close(c);
            return NULL;
        }
        while (n < sizeof(head) - 1 && (k = read(c, head + n, sizeof(head) - 1 - n)) > 0) {
            n += (size_t)k;
            head[n] = '\0';
            if (strstr(head, "\r\n\r\n"))
                break;
        }
        head[n] = '\0';
        memcpy(fake.request, head, n + 1);
        if (fake.mode == GOOD) {
            static const char b[] = "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\","
                                    "\"result\":[{\"metric\":{},\"value\":[1,\"7.5\"]}]}}";
            dprintf(c,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                    strlen(b), b);
        } else if (fake.mode == ERROR_400) {
            static const char b[] =
                "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"unknown function\"}";
            dprintf(c,
                    "HTTP/1.1 400 Bad Request\r\nContent-Length: %zu\r\n"
                    "Connection: close\r\n\r\n%s",
                    strlen(b), b);
        } else if (fake.mode == HUGE) {
            static char chunk[65536];
            memset(chunk, ' ', sizeof(chunk));
            dprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
                    64 << 20);
            for (int i = 0; i < 1024; i++)
                if (write(c, chunk, sizeof(chunk)) < 0)
                    break;
        } else {
            /* SLOW: say nothing until the client gives up (it closes, read returns 0) */
            char x;
            while (read(c, &x, 1) > 0)
                ;
        }
        close(c);
    }
}

static int fake_start(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);

    (void)state;
    fake.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fake.fd < 0 || bind(fake.fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fake.fd, 8) != 0 || getsockname(fake.fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    fake.port = ntohs(a.sin_port);
    return pthread_create(&fake.thread, NULL, serve, NULL) == 0 ? 0 : -1;
}

static int fake_stop(void **state)
{
    int c;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                            .sin_port = htons(fake.port)};

    (void)state;
    fake.stop = true;
    c = socket(AF_INET, SOCK_STREAM, 0); /* wake accept() */
    if (c >= 0) {
        if (connect(c, (struct sockaddr *)&a, sizeof(a)) != 0)
            fprintf(stderr, "cannot wake the fake\n");
        close(c);
    }
    pthread_join(fake.thread, NULL);
    close(fake.fd);
    return 0;
}

static void test_client(void **state)
{
    char url[64];
    struct prom_client c = {.url = url, .bearer = "s3cr3t", .timeout_ms = 500};
    struct prom_sample s;

    (void)state;
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", fake.port);

    fake.mode = GOOD;
    prom_query(&c, "sum(rate(x{v=\"2\"}[10s]))", 1700000000123, &s);
    assert_int_equal(s.state, GATE_SAMPLE_OK);
    assert_true(s.value == 7.5);
    /* the query is URL-encoded, the time is the instant asked for, the token goes along */
    assert_non_null(strstr(fake.request, "GET /api/v1/query?query=sum%28rate%28x%7Bv%3D%222%22%7D"
                                         "%5B10s%5D%29%29&time=1700000000.123 HTTP/1.1"));
    assert_non_null(strstr(fake.request, "Authorization: Bearer s3cr3t\r\n"));

    c.bearer = NULL;
    c.userpwd = "mg:pw";
    prom_query(&c, "up", 1000, &s);
    assert_int_equal(s.state, GATE_SAMPLE_OK);
    assert_non_null(strstr(fake.request, "Authorization: Basic bWc6cHc=\r\n"));

    fake.mode = ERROR_400;
    prom_query(&c, "nope(", 1000, &s);
    assert_int_equal(s.state, GATE_SAMPLE_ERROR);
    assert_non_null(strstr(s.detail, "unknown function"));

    fake.mode = HUGE;
    prom_query(&c, "up", 1000, &s);
    assert_int_equal(s.state, GATE_SAMPLE_ERROR);
    assert_non_null(strstr(s.detail, "over 1048576 bytes"));

    fake.mode = SLOW;
    prom_query(&c, "up", 1000, &s);
    assert_int_equal(s.state, GATE_SAMPLE_ERROR);
    assert_non_null(strstr(s.detail, "did not answer within 500 ms"));

    /* nothing listening */
    {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);

        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(a.sin_port));
        prom_query(&c, "up", 1000, &s); /* bound but not listening: refused */
        close(fd);
        assert_int_equal(s.state, GATE_SAMPLE_ERROR);
        assert_non_null(strstr(s.detail, "cannot reach Prometheus"));
    }
}

static void test_credentials(void **state)
{
    char dir[] = "/tmp/mg-prom-XXXXXX", path[64];
    char *bearer, *userpwd;
    struct mg_error err = {0};
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/creds", dir);

    f = fopen(path, "w");
    fputs("Bearer tok123\n", f);
    fclose(f);
    chmod(path, 0644);
    assert_int_equal(prom_read_credentials(path, &bearer, &userpwd, &err), MG_EINVAL);
    assert_non_null(strstr(err.message, "chmod 600"));
    chmod(path, 0600);
    assert_int_equal(prom_read_credentials(path, &bearer, &userpwd, &err), MG_OK);
    assert_string_equal(bearer, "tok123");
    assert_null(userpwd);
    free(bearer);

    f = fopen(path, "w");
    fputs("user:pass\n", f);
    fclose(f);
    assert_int_equal(prom_read_credentials(path, &bearer, &userpwd, &err), MG_OK);
    assert_null(bearer);
    assert_string_equal(userpwd, "user:pass");
    free(userpwd);

    f = fopen(path, "w");
    fputs("justatoken\n", f);
    fclose(f);
    assert_int_equal(prom_read_credentials(path, &bearer, &userpwd, &err), MG_EINVAL);
    assert_non_null(strstr(err.message, "Bearer TOKEN"));
    unlink(path);
    assert_int_equal(prom_read_credentials(path, &bearer, &userpwd, &err), MG_EINVAL);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_table),
        cmocka_unit_test_setup_teardown(test_client, fake_start, fake_stop),
        cmocka_unit_test(test_credentials),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
