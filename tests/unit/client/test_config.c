/*
 * test_config.c - where the CLI finds its server and token (client/config.c): the config
 * file under $XDG_CONFIG_HOME or ~/.config, MODELGATE_URL / MODELGATE_TOKEN over it, the
 * warning for a file others can read, each refusal's message; server URL normalisation; and
 * whole-file reads with their size cap (a file, or stdin for "-").
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "capture.h"
#include "client/mgc.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mg-client-config-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    unsetenv("MODELGATE_URL");
    unsetenv("MODELGATE_TOKEN");
    setenv("XDG_CONFIG_HOME", dir, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Write text to dir/<sub>/modelgate/config.json ("" sub: dir itself) with mode. */
static void write_config_in(const char *sub, const char *text, mode_t mode, char *path, size_t n)
{
    char d[256];
    FILE *f;

    snprintf(d, sizeof(d), "%s%s%s", dir, sub[0] ? "/" : "", sub);
    mkdir(d, 0700);
    snprintf(d + strlen(d), sizeof(d) - strlen(d), "/modelgate");
    assert_true(mkdir(d, 0700) == 0 || errno == EEXIST);
    snprintf(path, n, "%s/config.json", d);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static void write_config(const char *text, mode_t mode, char *path, size_t n)
{
    write_config_in("", text, mode, path, n);
}

/* mgc_config_load on a fresh context; *err gets stderr. The caller frees c->url, c->token. */
static int load(struct mgc *c, char **err)
{
    struct capture cap;
    int rc;

    memset(c, 0, sizeof(*c));
    capture_begin(&cap, stderr);
    rc = mgc_config_load(c);
    *err = capture_end(&cap);
    return rc;
}

static void release(struct mgc *c, char *err)
{
    free(c->url);
    free(c->token);
    free(err);
}

static void test_url_clean(void **state)
{
    static const struct {
        const char *in, *out, *message;
    } cases[] = {
        {"http://h:1", "http://h:1", NULL},
        {"http://h:1/", "http://h:1", NULL},
        {"https://reg.example/base///", "https://reg.example/base", NULL},
        {"http://[::1]:8080/", "http://[::1]:8080", NULL},
        {"ftp://x", NULL, "must start with http:// or https://, not 'ftp://x'"},
        {"h:1", NULL, "must start with http:// or https://"},
        {"", NULL, "must start with http:// or https://"},
        {"http://a b", NULL, "must not hold spaces, control characters, '?' or '#'"},
        {"http://x/?y=1", NULL, "must not hold spaces"},
        {"http://x#top", NULL, "must not hold spaces"},
        {"http://x\t", NULL, "must not hold spaces"},
        {"http://x\x7f", NULL, "must not hold spaces"},
        /* a scheme alone names no server (was cut to "http:") */
        {"http://", NULL, "names no host"},
        {"https:///", NULL, "names no host"},
        {"http:///x", NULL, "names no host"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct capture cap;
        char *out, *err;

        capture_begin(&cap, stderr);
        out = mgc_url_clean(cases[i].in);
        err = capture_end(&cap);
        if (cases[i].out) {
            assert_non_null(out);
            assert_string_equal(out, cases[i].out);
            assert_string_equal(err, "");
        } else {
            assert_null(out);
            assert_true(strncmp(err, "modelgate: the server URL ", 26) == 0);
            assert_non_null(strstr(err, cases[i].message));
        }
        free(out);
        free(err);
    }
}

static void test_file_with_url_and_token(void **state)
{
    char path[256], *err;
    struct mgc c;

    (void)state;
    /* surrounding whitespace of the token goes, as a hand-edited file has it */
    write_config("{\"url\": \"http://reg.example:8080/\", \"token\": \" mg_secret\\n\"}", 0600,
                 path, sizeof(path));
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://reg.example:8080");
    assert_string_equal(c.token, "mg_secret");
    assert_string_equal(err, "");
    release(&c, err);

    /* the same file readable by others still works, with a warning naming it */
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.token, "mg_secret");
    assert_non_null(strstr(err, "modelgate: warning: '"));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "is readable by others; chmod 600 it"));
    release(&c, err);
}

static void test_environment_wins(void **state)
{
    char path[256], *err;
    struct mgc c;

    (void)state;
    write_config("{\"url\": \"http://file:1\", \"token\": \"filetok\"}", 0600, path, sizeof(path));
    setenv("MODELGATE_URL", "https://env:2/", 1);
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "https://env:2");
    assert_string_equal(c.token, "filetok");
    release(&c, err);

    setenv("MODELGATE_TOKEN", "envtok", 1);
    unsetenv("MODELGATE_URL");
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://file:1");
    assert_string_equal(c.token, "envtok");
    release(&c, err);

    /* both set: the file is not even read (here it is broken) */
    write_config("not json", 0644, path, sizeof(path));
    setenv("MODELGATE_URL", "http://env:3", 1);
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://env:3");
    assert_string_equal(c.token, "envtok");
    assert_string_equal(err, "");
    release(&c, err);

    /* empty variables count as unset */
    setenv("MODELGATE_URL", "", 1);
    setenv("MODELGATE_TOKEN", "", 1);
    write_config("{\"url\": \"http://file:1\", \"token\": \"filetok\"}", 0600, path, sizeof(path));
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://file:1");
    assert_string_equal(c.token, "filetok");
    release(&c, err);
    unsetenv("MODELGATE_URL");
    unsetenv("MODELGATE_TOKEN");
}

static void test_refusals(void **state)
{
    static const struct {
        const char *file; /* NULL: no config file */
        const char *env_url;
        const char *message;
    } cases[] = {
        {NULL, NULL,
         "modelgate: no server configured: run `modelgate login --url URL --token-file FILE`, "
         "or set MODELGATE_URL and MODELGATE_TOKEN\n"},
        {NULL, "http://env:1",
         "modelgate: no token: set MODELGATE_TOKEN, or run `modelgate login`\n"},
        {"not json", NULL, "is not a JSON object; run `modelgate login` again\n"},
        {"[\"http://x\", \"t\"]", NULL, "is not a JSON object"},
        {"{\"url\": \"http://a\", \"url\": \"http://b\", \"token\": \"t\"}", NULL,
         "is not a JSON object"},
        {"{\"url\": \"http://a\"}", NULL,
         "modelgate: no token configured: run `modelgate login`, or set MODELGATE_TOKEN\n"},
        {"{\"token\": \"t\"}", NULL,
         "modelgate: no server configured: run `modelgate login`, or set MODELGATE_URL\n"},
        {"{\"url\": \"http://a\", \"token\": \"two words\"}", NULL,
         "modelgate: the token is empty or holds spaces or control characters\n"},
        {"{\"url\": \"http://a\", \"token\": \" \\n\"}", NULL, "the token is empty"},
        {"{\"url\": \"http://a\", \"token\": \"t\\u0001\"}", NULL, "the token is empty"},
        {"{\"url\": \"gopher://a\", \"token\": \"t\"}", NULL,
         "the server URL must start with http:// or https://"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[256], *err;
        struct mgc c;

        snprintf(path, sizeof(path), "%s/modelgate/config.json", dir);
        unlink(path);
        if (cases[i].file)
            write_config(cases[i].file, 0600, path, sizeof(path));
        if (cases[i].env_url)
            setenv("MODELGATE_URL", cases[i].env_url, 1);
        assert_int_equal(load(&c, &err), MGC_ERR);
        unsetenv("MODELGATE_URL");
        if (strncmp(cases[i].message, "modelgate: ", 11) == 0)
            assert_string_equal(err, cases[i].message);
        else
            assert_non_null(strstr(err, cases[i].message));
        release(&c, err);
    }
}

static void test_oversized_file(void **state)
{
    char path[256], *big, *err;
    struct mgc c;

    (void)state;
    big = malloc(70000);
    assert_non_null(big);
    memset(big, ' ', 69999);
    memcpy(big, "{\"url\": \"http://a\", \"token\": \"t\"}", 33);
    big[69999] = '\0';
    write_config(big, 0600, path, sizeof(path));
    assert_int_equal(load(&c, &err), MGC_ERR);
    assert_non_null(strstr(err, "is larger than 65536 bytes"));
    release(&c, err);
    free(big);
}

static void test_home_fallback(void **state)
{
    char path[256], *err, *xdg_file;
    struct mgc c;

    (void)state;
    /* ~/.config/modelgate/config.json when XDG_CONFIG_HOME is unset or not absolute */
    write_config_in(".config", "{\"url\": \"http://home:1\", \"token\": \"t\"}", 0600, path,
                    sizeof(path));
    write_config("{\"url\": \"http://xdg:1\", \"token\": \"t\"}", 0600, path, sizeof(path));
    xdg_file = strdup(path);
    setenv("HOME", dir, 1);
    unsetenv("XDG_CONFIG_HOME");
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://home:1");
    release(&c, err);
    setenv("XDG_CONFIG_HOME", "relative/dir", 1);
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://home:1");
    release(&c, err);
    setenv("XDG_CONFIG_HOME", dir, 1);
    assert_int_equal(load(&c, &err), MGC_OK);
    assert_string_equal(c.url, "http://xdg:1");
    release(&c, err);
    /* neither: say what to set */
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("HOME");
    assert_int_equal(load(&c, &err), MGC_ERR);
    assert_string_equal(err, "modelgate: neither XDG_CONFIG_HOME nor HOME is set; set one, or "
                             "use MODELGATE_URL and MODELGATE_TOKEN\n");
    release(&c, err);
    setenv("XDG_CONFIG_HOME", dir, 1);
    free(xdg_file);
}

/* mgc_read_file with stderr captured. */
static char *read_file(const char *path, size_t max, size_t *len, char **err)
{
    struct capture cap;
    char *text;

    capture_begin(&cap, stderr);
    text = mgc_read_file(path, max, len);
    *err = capture_end(&cap);
    return text;
}

static void test_read_file(void **state)
{
    static const size_t sizes[] = {0, 1, 4095, 4096, 4097, 10000};
    char path[128], *data, *text, *err;
    size_t len;
    FILE *f;

    (void)state;
    data = malloc(10001);
    assert_non_null(data);
    for (size_t i = 0; i < 10001; i++)
        data[i] = (char)('a' + i % 26);
    snprintf(path, sizeof(path), "%s/data", dir);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        size_t n = sizes[k];

        f = fopen(path, "w");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, n, f), n);
        fclose(f);
        /* exactly the cap fits; one byte more does not */
        len = 12345;
        text = read_file(path, n, &len, &err);
        assert_non_null(text);
        assert_int_equal(len, n);
        assert_memory_equal(text, data, n);
        assert_int_equal(text[n], '\0');
        assert_string_equal(err, "");
        free(text);
        free(err);
        if (n > 0) {
            char want[400];

            text = read_file(path, n - 1, &len, &err);
            assert_null(text);
            snprintf(want, sizeof(want), "modelgate: '%s' is larger than %zu bytes\n", path, n - 1);
            assert_string_equal(err, want);
            free(err);
        }
    }
    /* len may be NULL */
    text = read_file(path, 1 << 20, NULL, &err);
    assert_non_null(text);
    assert_int_equal(strlen(text), 10000);
    free(text);
    free(err);
    /* a missing file */
    snprintf(path, sizeof(path), "%s/none", dir);
    text = read_file(path, 100, &len, &err);
    assert_null(text);
    assert_non_null(strstr(err, "modelgate: cannot open '"));
    assert_non_null(strstr(err, "No such file or directory"));
    free(err);
    free(data);
}

static void test_read_stdin(void **state)
{
    char path[256], *text, *err;
    int fd, saved;
    size_t len;
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/stdin", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("mg_token_from_stdin\n", f);
    fclose(f);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    saved = dup(STDIN_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDIN_FILENO) >= 0);
    close(fd);
    text = read_file("-", 100, &len, &err);
    assert_true(dup2(saved, STDIN_FILENO) >= 0);
    close(saved);
    assert_non_null(text);
    assert_string_equal(text, "mg_token_from_stdin\n");
    assert_int_equal(len, 20);
    free(text);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_clean),
        cmocka_unit_test_setup_teardown(test_file_with_url_and_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_environment_wins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_home_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_stdin, setup, teardown),
    };

    return cmocka_run_group_tests_name("unit_client_config", tests, NULL, NULL);
}
