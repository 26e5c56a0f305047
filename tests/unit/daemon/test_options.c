/*
 * test_config.c - server/config.c: defaults, flags ("--k v" and "--k=v"),
 * config files ("key = value", "key value", comments), precedence between a
 * file and the flags around --config, and error reporting.
 *
 * Config files are written into a fresh mkdtemp() directory per test.
 */
#include <setjmp.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/config.h"

#define TMP_TEMPLATE "/tmp/test_config.XXXXXX"

struct fx {
    char dir[sizeof(TMP_TEMPLATE)];
    char path[sizeof(TMP_TEMPLATE) + 64];
    struct srv_config cfg;
    struct mg_error err;
};

/* The default thread count, whatever this machine's CPUs. */
static unsigned default_threads(void)
{
    struct srv_config d;
    unsigned n;

    srv_config_init(&d);
    n = d.threads;
    srv_config_release(&d);
    return n;
}

static int fx_setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));

    if (fx == NULL)
        return -1;
    memcpy(fx->dir, TMP_TEMPLATE, sizeof(TMP_TEMPLATE));
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof(fx->path), "%s/modelgated.conf", fx->dir);
    srv_config_init(&fx->cfg);
    mg_error_clear(&fx->err);
    *state = fx;
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int fx_teardown(void **state)
{
    struct fx *fx = *state;
    int r = nftw(fx->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);

    srv_config_release(&fx->cfg);
    free(fx);
    return r;
}

/* Parse a NULL-terminated list of arguments. */
static enum mg_code parse_args(struct fx *fx, const char *first, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    const char *a;

    va_start(ap, first);
    for (a = first; a != NULL; a = va_arg(ap, const char *)) {
        assert_true(argc < 32);
        argv[argc++] = (char *)a;
    }
    va_end(ap);
    return srv_config_parse(&fx->cfg, argc, argv, &fx->err);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* ---- defaults ---------------------------------------------------------------------------- */

static void test_defaults(void **state)
{
    struct fx *fx = *state;
    struct srv_config *c = &fx->cfg;

    assert_string_equal(c->listen, "127.0.0.1:8470");
    assert_string_equal(c->data_dir, "./var");
    assert_null(c->port_file);
    assert_null(c->signing_key);
    assert_int_equal(c->max_blob_bytes, 64ull << 30);
    assert_int_equal(c->max_json_bytes, 1u << 20);
    assert_int_equal(c->max_archive_ratio, 200);
    assert_int_equal(c->commit_workers, 4);
    assert_false(c->log_json);
    assert_false(c->sync_normal);
    /* One thread per CPU this process may use (1 to 32). */
    {
        cpu_set_t set;
        int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 4;
        unsigned want = (unsigned)(n > 32 ? 32 : n);
        assert_int_equal(c->threads, want);
    }
    assert_int_equal(c->conn_limit, 1024);
    assert_int_equal(c->per_ip_limit, 256);
    assert_int_equal(c->timeout_s, 60);
    assert_int_equal(c->conn_memory, 64u << 10);
    assert_int_equal(c->read_conns, 4);
    /* No arguments leave the defaults alone. */
    assert_int_equal(srv_config_parse(c, 0, NULL, &fx->err), MG_OK);
    assert_string_equal(c->listen, "127.0.0.1:8470");
    assert_true(c->threads >= 1 && c->threads <= 32);
    assert_non_null(strstr(srv_config_usage(), "--listen"));
    assert_non_null(strstr(srv_config_usage(), "--config"));
}

/* ---- flags ------------------------------------------------------------------------------- */

static void check_all_set(const struct srv_config *c)
{
    assert_string_equal(c->listen, "0.0.0.0:9000");
    assert_string_equal(c->data_dir, "/srv/mg data");
    assert_string_equal(c->port_file, "/run/mg.port");
    assert_string_equal(c->signing_key, "/etc/mg/key.pem");
    assert_int_equal(c->max_blob_bytes, 2ull << 30);
    assert_int_equal(c->max_json_bytes, 512ull << 10);
    assert_true(c->log_json);
    assert_true(c->sync_normal);
    assert_int_equal(c->threads, 16);
    assert_int_equal(c->conn_limit, 100);
    assert_int_equal(c->per_ip_limit, 10);
    assert_int_equal(c->timeout_s, 5);
    assert_int_equal(c->read_conns, 2);
}

static void test_flags_separate_values(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--listen", "0.0.0.0:9000", "--data-dir", "/srv/mg data",
                                "--port-file", "/run/mg.port", "--signing-key", "/etc/mg/key.pem",
                                "--max-blob-bytes", "2G", "--max-json-bytes", "512K",
                                "--log-format", "json", "--sync", "normal", "--threads", "16",
                                "--max-connections", "100", "--max-connections-per-ip", "10",
                                "--timeout", "5", "--read-connections", "2", NULL),
                     MG_OK);
    check_all_set(&fx->cfg);
}

static void test_flags_equals_values(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--listen=0.0.0.0:9000", "--data-dir=/srv/mg data",
                                "--port-file=/run/mg.port", "--signing-key=/etc/mg/key.pem",
                                "--max-blob-bytes=2G", "--max-json-bytes=524288",
                                "--log-format=json", "--sync=normal", "--threads=16",
                                "--max-connections=100", "--max-connections-per-ip=10",
                                "--timeout=5", "--read-connections=2", NULL),
                     MG_OK);
    check_all_set(&fx->cfg);
}

static void test_flags_mixed_and_last_wins(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--threads", "2", "--threads=3", "--log-format", "json",
                                "--log-format=text", "--sync=normal", "--sync", "full",
                                "--listen=[::1]:0", NULL),
                     MG_OK);
    assert_int_equal(fx->cfg.threads, 3);
    assert_false(fx->cfg.log_json);
    assert_false(fx->cfg.sync_normal);
    assert_string_equal(fx->cfg.listen, "[::1]:0");
}

/* On PostgreSQL every statement is a round trip: four threads per CPU unless --threads
 * says otherwise (a config file's database counts too; SQLite keeps one per CPU). */
static void test_threads_on_postgresql(void **state)
{
    struct fx *fx = *state;
    unsigned want = default_threads() * 4 > 32 ? 32 : default_threads() * 4;

    assert_int_equal(parse_args(fx, "--database", "postgresql://db.internal/mg", NULL), MG_OK);
    assert_int_equal(fx->cfg.threads, want);
    srv_config_release(&fx->cfg);
    srv_config_init(&fx->cfg);
    assert_int_equal(parse_args(fx, "--threads", "2", "--database=postgres://db/mg", NULL), MG_OK);
    assert_int_equal(fx->cfg.threads, 2);
    srv_config_release(&fx->cfg);
    srv_config_init(&fx->cfg);
    assert_int_equal(parse_args(fx, "--database", "sqlite", NULL), MG_OK);
    assert_int_equal(fx->cfg.threads, default_threads());
}

static void test_flag_value_with_equals(void **state)
{
    struct fx *fx = *state;

    /* Only the first '=' separates: the value keeps the rest. */
    assert_int_equal(parse_args(fx, "--data-dir=/a=b", NULL), MG_OK);
    assert_string_equal(fx->cfg.data_dir, "/a=b");
    /* In the two-argument form the value may start with "--". */
    assert_int_equal(parse_args(fx, "--port-file", "--odd", NULL), MG_OK);
    assert_string_equal(fx->cfg.port_file, "--odd");
}

static void test_size_suffixes(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--max-blob-bytes", "1048576", NULL), MG_OK);
    assert_int_equal(fx->cfg.max_blob_bytes, 1048576);
    assert_int_equal(parse_args(fx, "--max-blob-bytes", "3T", NULL), MG_OK);
    assert_int_equal(fx->cfg.max_blob_bytes, 3ull << 40);
    assert_int_equal(parse_args(fx, "--max-json-bytes", "1M", NULL), MG_OK);
    assert_int_equal(fx->cfg.max_json_bytes, 1ull << 20);
    assert_int_equal(parse_args(fx, "--max-json-bytes", "64KiB", NULL), MG_OK);
    assert_int_equal(fx->cfg.max_json_bytes, 64ull << 10);
    assert_int_equal(parse_args(fx, "--connection-memory", "64K", NULL), MG_OK);
    assert_int_equal(fx->cfg.conn_memory, 64ull << 10);
    assert_int_equal(parse_args(fx, "--connection-memory", "16K", NULL), MG_OK);
    assert_int_equal(fx->cfg.conn_memory, 16ull << 10);
    assert_false(fx->cfg.no_response_cache);
    assert_int_equal(parse_args(fx, "--response-cache", "off", NULL), MG_OK);
    assert_true(fx->cfg.no_response_cache);
    assert_int_equal(parse_args(fx, "--response-cache", "on", NULL), MG_OK);
    assert_false(fx->cfg.no_response_cache);
}

/* The archive expansion cap and the commit pool, as flags and config keys. */
static void test_archive_ratio_and_commit_workers(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--max-archive-ratio", "0", "--commit-workers", "1", NULL),
                     MG_OK);
    assert_int_equal(fx->cfg.max_archive_ratio, 0);
    assert_int_equal(fx->cfg.commit_workers, 1);
    write_file(fx->path, "max-archive-ratio = 1000\ncommit-workers 8\n");
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_OK);
    assert_int_equal(fx->cfg.max_archive_ratio, 1000);
    assert_int_equal(fx->cfg.commit_workers, 8);
}

/* ---- bad flags --------------------------------------------------------------------------- */

static void test_bad_values(void **state)
{
    static const struct {
        const char *key, *value, *field, *mention;
    } cases[] = {
        {"threads", "0", "threads", "--threads"},
        {"threads", "257", "threads", "--threads"},
        {"threads", "abc", "threads", "--threads"},
        {"threads", "-1", "threads", "--threads"},
        {"threads", "08", "threads", "--threads"},
        {"threads", "", "threads", "--threads"},
        {"max-connections", "0", "max-connections", "--max-connections"},
        {"max-connections", "65537", "max-connections", "--max-connections"},
        {"max-connections-per-ip", "x", "max-connections-per-ip", "--max-connections-per-ip"},
        {"timeout", "0", "timeout", "--timeout"},
        {"timeout", "3601", "timeout", "--timeout"},
        {"read-connections", "65", "read-connections", "--read-connections"},
        {"max-blob-bytes", "0", "max-blob-bytes", "--max-blob-bytes"},
        {"max-blob-bytes", "1.5G", "max-blob-bytes", "--max-blob-bytes"},
        {"max-blob-bytes", "lots", "max-blob-bytes", "--max-blob-bytes"},
        {"max-blob-bytes", "-1", "max-blob-bytes", "--max-blob-bytes"},
        {"max-json-bytes", "1P", "max-json-bytes", "--max-json-bytes"},
        {"connection-memory", "8K", "connection-memory", "--connection-memory"},
        {"connection-memory", "32M", "connection-memory", "--connection-memory"},
        {"connection-memory", "big", "connection-memory", "--connection-memory"},
        {"log-format", "xml", "log-format", "--log-format"},
        {"log-format", "JSON", "log-format", "--log-format"},
        {"sync", "fast", "sync", "--sync"},
        {"response-cache", "no", "response-cache", "--response-cache"},
        {"sync", "", "sync", "--sync"},
        {"max-archive-ratio", "-1", "max-archive-ratio", "--max-archive-ratio"},
        {"max-archive-ratio", "1000001", "max-archive-ratio", "--max-archive-ratio"},
        {"max-archive-ratio", "lots", "max-archive-ratio", "--max-archive-ratio"},
        {"commit-workers", "0", "commit-workers", "--commit-workers"},
        {"commit-workers", "65", "commit-workers", "--commit-workers"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct srv_config cfg;
        struct mg_error err;
        char flag[64], *argv[2];
        int form;

        /* Both the "--k v" and the "--k=v" forms. */
        for (form = 0; form < 2; form++) {
            enum mg_code rc;

            srv_config_init(&cfg);
            mg_error_clear(&err);
            if (form == 0) {
                snprintf(flag, sizeof(flag), "--%s", cases[i].key);
                argv[0] = flag;
                argv[1] = (char *)cases[i].value;
                rc = srv_config_parse(&cfg, 2, argv, &err);
            } else {
                snprintf(flag, sizeof(flag), "--%s=%s", cases[i].key, cases[i].value);
                argv[0] = flag;
                rc = srv_config_parse(&cfg, 1, argv, &err);
            }
            if (rc != MG_EINVAL)
                fail_msg("--%s '%s' (form %d): code %d, want MG_EINVAL", cases[i].key,
                         cases[i].value, form, rc);
            assert_int_equal(err.code, MG_EINVAL);
            assert_string_equal(err.field, cases[i].field);
            if (strstr(err.message, cases[i].mention) == NULL)
                fail_msg("--%s '%s': message \"%s\" does not name the option", cases[i].key,
                         cases[i].value, err.message);
            if (cases[i].value[0] != '\0' && strstr(err.message, cases[i].value) == NULL)
                fail_msg("--%s '%s': message \"%s\" does not quote the value", cases[i].key,
                         cases[i].value, err.message);
            srv_config_release(&cfg);
        }
    }
}

static void test_missing_value(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--threads", NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "--threads"));
    assert_non_null(strstr(fx->err.message, "needs a value"));
    assert_string_equal(fx->err.field, "threads");

    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--listen", "127.0.0.1:1", "--data-dir", NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "--data-dir"));
}

static void test_unknown_option(void **state)
{
    struct fx *fx = *state;

    assert_int_equal(parse_args(fx, "--bogus", "1", NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "bogus"));
    assert_non_null(strstr(fx->err.message, "unknown option"));

    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--bogus=1", NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "bogus"));

    /* Option names are exact: no prefixes, no case folding, no single dash. */
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--thread", "4", NULL), MG_EINVAL);
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--THREADS", "4", NULL), MG_EINVAL);
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "-threads", "4", NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "-threads"));
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "serve", NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "serve"));
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--", "x", NULL), MG_EINVAL);

    /* A very long option name is refused, not truncated into a known one. */
    mg_error_clear(&fx->err);
    assert_int_equal(
        parse_args(fx,
                   "--threadsxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                   "xxxxxxxxxxxxxxxxxxxxxxx=4",
                   NULL),
        MG_EINVAL);
    assert_int_equal(fx->cfg.threads, default_threads());
}

/* ---- config files ------------------------------------------------------------------------ */

static void test_config_file(void **state)
{
    struct fx *fx = *state;
    char arg[256];

    write_file(fx->path, "# modelgated settings\n"
                         "\n"
                         "listen = 0.0.0.0:9000\n"
                         "   data-dir    /srv/mg data   \n"
                         "port-file=/run/mg.port\n"
                         "signing-key\t/etc/mg/key.pem # the active key\n"
                         "max-blob-bytes = 2G\n"
                         "max-json-bytes 512K\n"
                         "log-format = json\n"
                         "sync normal\n"
                         "\t# indented comment\n"
                         "threads = 16\n"
                         "max-connections = 100\n"
                         "max-connections-per-ip = 10\n"
                         "timeout = 5   # seconds\n"
                         "read-connections = 2"); /* no final newline */
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_OK);
    check_all_set(&fx->cfg);

    /* --config=FILE works too. */
    srv_config_release(&fx->cfg);
    srv_config_init(&fx->cfg);
    snprintf(arg, sizeof(arg), "--config=%s", fx->path);
    assert_int_equal(parse_args(fx, arg, NULL), MG_OK);
    check_all_set(&fx->cfg);
}

static void test_flags_after_config_override_file(void **state)
{
    struct fx *fx = *state;

    write_file(fx->path, "threads = 16\nlisten = 0.0.0.0:9000\nlog-format = json\n");
    /* Later flags win over the file ... */
    assert_int_equal(
        parse_args(fx, "--config", fx->path, "--threads", "3", "--listen=[::1]:1", NULL), MG_OK);
    assert_int_equal(fx->cfg.threads, 3);
    assert_string_equal(fx->cfg.listen, "[::1]:1");
    assert_true(fx->cfg.log_json); /* untouched by the flags */

    /* ... and the file wins over earlier flags: it is read where it appears. */
    srv_config_release(&fx->cfg);
    srv_config_init(&fx->cfg);
    assert_int_equal(
        parse_args(fx, "--threads", "3", "--log-format", "text", "--config", fx->path, NULL),
        MG_OK);
    assert_int_equal(fx->cfg.threads, 16);
    assert_true(fx->cfg.log_json);
}

static void test_config_file_bad_value(void **state)
{
    struct fx *fx = *state;

    write_file(fx->path, "# ok so far\nlisten = 127.0.0.1:0\nthreads = 0\n");
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_int_equal(fx->err.code, MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "--threads"));
    assert_non_null(strstr(fx->err.message, fx->path));
    assert_non_null(strstr(fx->err.message, ":3:")); /* the line number */

    write_file(fx->path, "sync = sometimes\n");
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "--sync"));
    assert_non_null(strstr(fx->err.message, "sometimes"));

    write_file(fx->path, "max-blob-bytes = 1.5G\n");
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "--max-blob-bytes"));
}

static void test_config_file_unknown_key(void **state)
{
    struct fx *fx = *state;

    write_file(fx->path, "threads = 4\nbogus = 1\n");
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "unknown option"));
    assert_non_null(strstr(fx->err.message, "bogus"));
    assert_non_null(strstr(fx->err.message, ":2:"));
}

static void test_config_file_malformed_lines(void **state)
{
    struct fx *fx = *state;

    /* A key without a value. */
    write_file(fx->path, "threads\n");
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "key = value"));
    assert_non_null(strstr(fx->err.message, ":1:"));

    /* A line longer than the reader's buffer. */
    {
        size_t n = 10000;
        char *big = malloc(n + 32);
        assert_non_null(big);
        memcpy(big, "data-dir = /", 12);
        memset(big + 12, 'a', n);
        memcpy(big + 12 + n, "\n", 2);
        write_file(fx->path, big);
        free(big);
    }
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "too long"));
}

static void test_config_file_missing(void **state)
{
    struct fx *fx = *state;
    char missing[sizeof(fx->dir) + 32];

    snprintf(missing, sizeof(missing), "%s/nope.conf", fx->dir);
    assert_int_equal(parse_args(fx, "--config", missing, NULL), MG_EINVAL);
    assert_string_equal(fx->err.field, "config");
    assert_non_null(strstr(fx->err.message, missing));
}

static void test_config_file_includes(void **state)
{
    struct fx *fx = *state;
    char inner[sizeof(fx->dir) + 32], text[256];

    /* One file may name another with "config = FILE"; later lines override it. */
    snprintf(inner, sizeof(inner), "%s/inner.conf", fx->dir);
    write_file(inner, "threads = 12\ntimeout = 30\n");
    snprintf(text, sizeof(text), "timeout = 10\nconfig = %s\nthreads = 7\n", inner);
    write_file(fx->path, text);
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_OK);
    assert_int_equal(fx->cfg.threads, 7);
    assert_int_equal(fx->cfg.timeout_s, 30);

    /* A file that includes itself stops with an error instead of recursing. */
    snprintf(text, sizeof(text), "config = %s\n", fx->path);
    write_file(fx->path, text);
    mg_error_clear(&fx->err);
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "too deeply"));
}

static void test_empty_config_file(void **state)
{
    struct fx *fx = *state;

    write_file(fx->path, "# nothing here\n\n   \n");
    assert_int_equal(parse_args(fx, "--config", fx->path, NULL), MG_OK);
    assert_string_equal(fx->cfg.listen, "127.0.0.1:8470");
    assert_int_equal(fx->cfg.threads, default_threads());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_flags_separate_values, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_flags_equals_values, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_flags_mixed_and_last_wins, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_threads_on_postgresql, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_flag_value_with_equals, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_size_suffixes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_archive_ratio_and_commit_workers, fx_setup,
                                        fx_teardown),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test_setup_teardown(test_missing_value, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unknown_option, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_config_file, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_flags_after_config_override_file, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_config_file_bad_value, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_config_file_unknown_key, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_config_file_malformed_lines, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_config_file_missing, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_config_file_includes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_empty_config_file, fx_setup, fx_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
