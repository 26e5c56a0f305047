/*
 * test_options.c - daemon/options.c (and model/config.c's defaults): flags
 * ("--k v" and "--k=v"), config files ("key = value", "key value", comments),
 * precedence between a file and the flags around --config, error reporting
 * (the exact messages), and the option table against the usage text and
 * dist/modelgated.conf.
 *
 * Config files are written into a fresh mkdtemp() directory per test.
 */
#include <setjmp.h>
#include <stdbool.h>
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

#include "artifact/archive.h"
#include "daemon/options.h"

#define TMP_TEMPLATE "/tmp/test_config.XXXXXX"

struct fx {
    char dir[sizeof(TMP_TEMPLATE)];
    char path[sizeof(TMP_TEMPLATE) + 64];
    struct srv_config cfg;
    struct mg_error err;
};

/* The usage text, as --help prints it (malloc'd). */
static char *usage_text(void)
{
    FILE *f = tmpfile();
    char *text;
    long n;

    assert_non_null(f);
    assert_int_equal(srv_options_usage(f), 0);
    n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    assert_int_equal(fclose(f), 0);
    return text;
}

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
    return srv_options_parse(&fx->cfg, argc, argv, &fx->err);
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
    /* model/ sits below artifact/, so its default spells the number: the two must agree. */
    assert_int_equal(c->max_archive_ratio, STORE_ARCHIVE_MAX_RATIO);
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
    assert_int_equal(srv_options_parse(c, 0, NULL, &fx->err), MG_OK);
    assert_string_equal(c->listen, "127.0.0.1:8470");
    assert_true(c->threads >= 1 && c->threads <= 32);
    {
        char *usage = usage_text();
        assert_non_null(strstr(usage, "--listen"));
        assert_non_null(strstr(usage, "--config"));
        free(usage);
    }
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
                rc = srv_options_parse(&cfg, 2, argv, &err);
            } else {
                snprintf(flag, sizeof(flag), "--%s=%s", cases[i].key, cases[i].value);
                argv[0] = flag;
                rc = srv_options_parse(&cfg, 1, argv, &err);
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
    {
        char want[sizeof(fx->path) + 64];
        snprintf(want, sizeof(want), "%s:2: unknown option 'bogus'; see modelgated --help",
                 fx->path);
        assert_string_equal(fx->err.message, want);
        assert_string_equal(fx->err.field, "config");
    }
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

/* ---- the option table, the usage text and the example config ---------------------------- */

/* A value each option takes. An option in the usage without a row here fails
 * test_usage_options_parse: a new option comes with a value that parses. */
static const struct {
    const char *name, *value;
} samples[] = {
    {"listen", "0.0.0.0:9000"},
    {"data-dir", "/srv/mg"},
    {"config", NULL}, /* the fixture's file */
    {"max-blob-bytes", "2G"},
    {"max-archive-ratio", "100"},
    {"commit-workers", "2"},
    {"max-json-bytes", "2M"},
    {"log-format", "json"},
    {"database", "postgresql://db.internal/mg"},
    {"blobs", "s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=r"},
    {"blobs-credentials", "/etc/mg/blobs.cred"},
    {"blob-downloads", "redirect"},
    {"prometheus-url", "http://127.0.0.1:9090"},
    {"prometheus-credentials", "/etc/mg/prom.cred"},
    {"host-name", "node-1.example"},
    {"sync", "normal"},
    {"response-cache", "off"},
    {"threads", "8"},
    {"max-connections", "10"},
    {"connection-memory", "32K"},
    {"max-connections-per-ip", "5"},
    {"timeout", "30"},
    {"min-body-rate", "2048"},
    {"read-connections", "2"},
    {"port-file", "/run/mg.port"},
    {"signing-key", "/etc/mg/key.pem"},
    {"tls-cert", "/etc/mg/tls.crt"},
    {"tls-key", "/etc/mg/tls.key"},
    {"push-workers", "3"},
    {"push-backoff-base-ms", "500"},
    {"push-backoff-max-ms", "60000"},
    {"reconcile-interval-ms", "0"},
    {"webhook-allow", "10.0.0.0/8"},
    {"smoke-profile", "onnx-cpu=/opt/smoke.sh {model_dir} {output}"},
    {"smoke-profile-cost", "onnx-cpu=0.5"},
    {"scan-allow", "mypkg.config.TrainConfig"},
    {"runner-workers", "2"},
    {"smoke-interval", "0"},
    {"smoke-timeout", "60"},
    {"smoke-memory-mib", "1024"},
    {"nvml-library", "/usr/lib/libnvidia-ml.so.1"},
    {"public-url", "https://mg.example"},
    {"read-scope", "team"},
    {"oci-layer-cache", "1G"},
    {"retention-interval", "15m"},
    {"gc-interval", "0s"},
    {"gc-grace", "7d"},
    {"oidc-issuer", "https://idp.example"},
    {"oidc-client-id", "modelgate"},
    {"oidc-client-secret-file", "/etc/mg/oidc.secret"},
    {"oidc-groups-claim", "groups"},
    {"oidc-audience", "modelgate-api"},
    {"allow-shared-dir", "yes"},
};

/* Whether the usage has a line "  --NAME ..." (or "  --NAME" alone: a switch). */
static bool usage_lists(const char *usage, const char *name)
{
    char pat[128];
    const char *at;
    size_t n = (size_t)snprintf(pat, sizeof(pat), "\n  --%s", name);

    for (at = strstr(usage, pat); at != NULL; at = strstr(at + 1, pat))
        if (at[n] == ' ' || at[n] == '\n')
            return true;
    return false;
}

/* Every row of the table appears in the usage, no line of it passes 80 columns, and
 * every option the usage shows is a row (it has a sample value that parses: below). */
static void test_usage_lists_every_option(void **state)
{
    char *usage = usage_text(), *line, *save = NULL;
    const char *name;
    size_t i, rows = 0, listed = 0;

    (void)state;
    for (i = 0; (name = srv_options_name(i)) != NULL; i++) {
        if (!usage_lists(usage, name))
            fail_msg("option --%s is missing from the usage text", name);
        rows++;
    }
    assert_true(rows >= 50);
    for (line = strtok_r(usage, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        if (strlen(line) > 80)
            fail_msg("usage line over 80 columns: \"%s\"", line);
        if (strncmp(line, "  --", 4) == 0) {
            size_t n = strcspn(line + 4, " ");
            bool found = false;
            for (i = 0; (name = srv_options_name(i)) != NULL; i++)
                found |= strlen(name) == n && strncmp(name, line + 4, n) == 0;
            if (!found)
                fail_msg("the usage shows an option the table lacks: \"%s\"", line);
            listed++;
        }
    }
    assert_int_equal(listed, rows);
    free(usage);
}

/* Every option in the usage parses, as a flag ("--k v", "--k=v") and as a config line. */
static void test_usage_options_parse(void **state)
{
    struct fx *fx = *state;
    char *usage = usage_text(), *line, *save = NULL;
    char inner[sizeof(fx->dir) + 32], text[512], key[64], eq[600];
    size_t i, checked = 0;

    snprintf(inner, sizeof(inner), "%s/inner.conf", fx->dir);
    write_file(inner, "threads = 2\n");
    for (line = strtok_r(usage, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const char *v = NULL;
        bool known = false;

        if (strncmp(line, "  --", 4) != 0)
            continue;
        snprintf(key, sizeof(key), "%.*s", (int)strcspn(line + 4, " "), line + 4);
        for (i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
            if (strcmp(samples[i].name, key) == 0) {
                known = true;
                v = samples[i].value != NULL ? samples[i].value : inner;
            }
        }
        if (!known)
            fail_msg("--%s is in the usage but has no sample value in this test", key);
        {
            char flag[80];
            char *argv[2];
            /* A switch ("  --allow-shared-dir      help") is given alone. */
            bool bare = strncmp(line + 4 + strlen(key), "  ", 2) == 0;

            snprintf(flag, sizeof(flag), "--%s", key);
            argv[0] = flag;
            argv[1] = (char *)v;
            srv_config_release(&fx->cfg);
            srv_config_init(&fx->cfg);
            if (srv_options_parse(&fx->cfg, bare ? 1 : 2, argv, &fx->err) != MG_OK)
                fail_msg("--%s %s: %s", key, bare ? "" : v, fx->err.message);
            snprintf(eq, sizeof(eq), "--%s=%s", key, v);
            argv[0] = eq;
            if (srv_options_parse(&fx->cfg, 1, argv, &fx->err) != MG_OK)
                fail_msg("%s: %s", eq, fx->err.message);
        }
        snprintf(text, sizeof(text), "%s = %s\n", key, v);
        write_file(fx->path, text);
        if (parse_args(fx, "--config", fx->path, NULL) != MG_OK)
            fail_msg("config line \"%s = %s\": %s", key, v, fx->err.message);
        checked++;
    }
    assert_int_equal(checked, sizeof(samples) / sizeof(samples[0]));
    free(usage);
}

/* Unknown options fail as they always have, word for word. */
static void test_unknown_option_messages(void **state)
{
    static const struct {
        const char *args[3];
        const char *field, *message;
    } cases[] = {
        {{"--bogus", "1"}, "bogus", "unknown option 'bogus'; see modelgated --help"},
        {{"--bogus=1"}, "bogus", "unknown option 'bogus'; see modelgated --help"},
        {{"--thread", "4"}, "thread", "unknown option 'thread'; see modelgated --help"},
        {{"--bogus"}, "bogus", "--bogus needs a value"},
        {{"serve"}, "", "unexpected argument 'serve'; see --help"},
        {{"-threads", "4"}, "", "unexpected argument '-threads'; see --help"},
        /* a bare switch takes no value: the next argument stands alone */
        {{"--allow-shared-dir", "no"}, "", "unexpected argument 'no'; see --help"},
        {{"--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1"},
         "",
         "unknown option '--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1'"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct srv_config cfg;
        struct mg_error err;
        int argc = 0;

        while (argc < 3 && cases[i].args[argc] != NULL)
            argc++;
        srv_config_init(&cfg);
        mg_error_clear(&err);
        assert_int_equal(srv_options_parse(&cfg, argc, (char **)cases[i].args, &err), MG_EINVAL);
        assert_string_equal(err.field, cases[i].field);
        assert_string_equal(err.message, cases[i].message);
        srv_config_release(&cfg);
    }
}

/* Each kind of check says what it always said, word for word (clients and scripts read
 * these): one case per message the table can produce. */
static void test_error_messages(void **state)
{
    static const struct {
        const char *key, *value;
        unsigned repeat; /* lists: how many times the flag is given */
        const char *message;
    } cases[] = {
        {"commit-workers", "65", 1, "--commit-workers needs a number between 1 and 64, not '65'"},
        {"threads", "08", 1, "--threads needs a number between 1 and 256, not '08'"},
        {"max-blob-bytes", "1.5G", 1,
         "--max-blob-bytes needs a positive size such as 1048576, 512K, 1M or 64G, not '1.5G'"},
        {"connection-memory", "15K", 1, "--connection-memory is between 16K and 16M, not '15K'"},
        {"connection-memory", "big", 1, "--connection-memory is between 16K and 16M, not 'big'"},
        {"gc-grace", "1w", 1,
         "--gc-grace is a duration such as 0s, 90s, 15m, 24h or 7d (at most 365d), not '1w'"},
        {"retention-interval", "366d", 1,
         "--retention-interval is a duration such as 0s, 90s, 15m, 24h or 7d (at most 365d), "
         "not '366d'"},
        {"log-format", "JSON", 1, "--log-format is text or json, not 'JSON'"},
        {"response-cache", "no", 1, "--response-cache is on or off, not 'no'"},
        {"sync", "fast", 1, "--sync is full or normal, not 'fast'"},
        {"blob-downloads", "both", 1, "--blob-downloads is proxy or redirect, not 'both'"},
        {"read-scope", "none", 1, "--read-scope is all or team, not 'none'"},
        {"allow-shared-dir", "maybe", 1, "--allow-shared-dir is yes or no, not 'maybe'"},
        {"push-backoff-base-ms", "0", 1,
         "--push-backoff-base-ms needs milliseconds from 1 to 86400000"},
        {"push-backoff-max-ms", "86400001", 1,
         "--push-backoff-max-ms needs milliseconds from 1 to 86400000"},
        {"reconcile-interval-ms", "-1", 1,
         "--reconcile-interval-ms needs milliseconds from 0 (off) to 86400000"},
        {"smoke-memory-mib", "63", 1, "--smoke-memory-mib is 64 to 16777216"},
        {"host-name", "bad host", 1, "--host-name is a host name: letters, digits, '-', '.', '_'"},
        {"prometheus-url", "http://x?q", 1,
         "--prometheus-url is the http:// or https:// URL of the Prometheus HTTP API, e.g. "
         "http://127.0.0.1:9090"},
        {"oidc-issuer", "http://idp.example", 1,
         "--oidc-issuer is an https:// URL (http:// only on loopback)"},
        {"scan-allow", "a.__b", 1,
         "--scan-allow takes a dotted Python name without dunders, such as "
         "mypkg.config.TrainConfig"},
        {"database", "mysql://x", 1, "--database is sqlite or a postgresql:// URL"},
        {"public-url", "https://mg.example/x", 1,
         "--public-url is an origin such as https://modelgate.example:8443, not "
         "'https://mg.example/x'"},
        {"blobs", "ftp://x", 1,
         "--blobs is file:/DIR, s3://BUCKET/PREFIX?endpoint=…&region=… or "
         "oci://HOST:PORT/REPOSITORY, not 'ftp://x'"},
        {"webhook-allow", "10.0.0.0/8", 33, "at most 32 --webhook-allow networks"},
        {"smoke-profile", "a=b", 33, "at most 32 --smoke-profile entries"},
        {"smoke-profile-cost", "a=1", 33, "at most 32 --smoke-profile-cost entries"},
        {"scan-allow", "a.b", 65, "at most 64 --scan-allow entries"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct srv_config cfg;
        struct mg_error err;
        char flag[128], *argv[65];
        unsigned k;

        snprintf(flag, sizeof(flag), "--%s=%s", cases[i].key, cases[i].value);
        for (k = 0; k < cases[i].repeat; k++)
            argv[k] = flag;
        srv_config_init(&cfg);
        mg_error_clear(&err);
        assert_int_equal(srv_options_parse(&cfg, (int)cases[i].repeat, argv, &err), MG_EINVAL);
        assert_string_equal(err.field, cases[i].key);
        assert_string_equal(err.message, cases[i].message);
        srv_config_release(&cfg);
    }
}

/* dist/modelgated.conf, the installed example, parses as shipped and with each of its
 * commented-out settings switched on. */
static void test_example_config(void **state)
{
    struct fx *fx = *state;
    const char *src = getenv("MG_SOURCE_DIR");
    char path[4096], line[1024];
    FILE *f;
    unsigned on = 0;

    if (src != NULL)
        snprintf(path, sizeof(path), "%s/dist/modelgated.conf", src);
    else /* __FILE__ is tests/unit/daemon/test_options.c under the source tree */
        snprintf(path, sizeof(path), "%.*s/dist/modelgated.conf",
                 (int)(strlen(__FILE__) - strlen("/tests/unit/daemon/test_options.c")), __FILE__);
    assert_int_equal(parse_args(fx, "--config", path, NULL), MG_OK);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        char key[64];
        size_t i;
        bool known = false;

        /* "# key = value", where key is an option: a setting to switch on. */
        if (strncmp(line, "# ", 2) != 0 || sscanf(line + 2, "%63[a-z-] =", key) != 1 ||
            strstr(line, " = ") == NULL)
            continue;
        for (i = 0; srv_options_name(i) != NULL; i++)
            known |= strcmp(srv_options_name(i), key) == 0;
        if (!known)
            continue;
        write_file(fx->path, line + 2);
        if (parse_args(fx, "--config", fx->path, NULL) != MG_OK)
            fail_msg("%s: \"%s\" does not parse: %s", path, line + 2, fx->err.message);
        on++;
    }
    fclose(f);
    assert_true(on >= 3);
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
        cmocka_unit_test(test_usage_lists_every_option),
        cmocka_unit_test_setup_teardown(test_usage_options_parse, fx_setup, fx_teardown),
        cmocka_unit_test(test_unknown_option_messages),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test_setup_teardown(test_example_config, fx_setup, fx_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
