/*
 * test_file.c - os/file.c: atomic replacement with the asked mode whatever the umask,
 * nothing left behind on failure, and the streaming SHA-256 of a file against a one-shot
 * digest.
 */
#include <dirent.h>
#include <errno.h>
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
#include <openssl/sha.h>

#include "os/file.h"
#include "base/util.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mg-file-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static size_t entries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void test_write_atomic(void **state)
{
    char path[128], buf[64];
    struct mg_error err = {0};
    struct stat st;
    mode_t old;
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/token", dir);
    old = umask(0);
    assert_int_equal(mg_file_write_atomic(path, "first", 5, 0600, &err), MG_OK);
    umask(old);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* not 0666 & ~umask */
    old = umask(077);
    assert_int_equal(mg_file_write_atomic(path, "second version", 14, 0644, &err), MG_OK);
    umask(old);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "second version");
    assert_int_equal(entries(), 1); /* no temp file left */

    /* a directory that does not exist: an error naming it, nothing written */
    snprintf(path, sizeof(path), "%s/missing/file", dir);
    assert_int_equal(mg_file_write_atomic(path, "x", 1, 0600, &err), MG_EIO);
    assert_non_null(strstr(err.message, "missing"));
    assert_int_equal(entries(), 1);
    /* a path that is a directory: the temp file is removed again */
    snprintf(path, sizeof(path), "%s/adir", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_not_equal(mg_file_write_atomic(path, "x", 1, 0600, &err), MG_OK);
    assert_int_equal(entries(), 2);
    rmdir(path);
}

static void test_file_sha256(void **state)
{
    char path[128], hex[65], want[65];
    unsigned char *data = malloc(3u << 20), md[32];
    struct mg_error err = {0};
    uint64_t size = 0;
    FILE *f;

    (void)state;
    assert_non_null(data);
    for (size_t i = 0; i < (3u << 20); i++)
        data[i] = (unsigned char)(i * 31 + (i >> 11));
    snprintf(path, sizeof(path), "%s/blob", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, (3u << 20) - 7, f), (3u << 20) - 7);
    fclose(f);
    SHA256(data, (3u << 20) - 7, md);
    mg_hex_encode(md, 32, want);
    assert_int_equal(mg_file_sha256(path, hex, &size, &err), MG_OK);
    assert_string_equal(hex, want);
    assert_int_equal(size, (3u << 20) - 7);
    snprintf(path, sizeof(path), "%s/none", dir);
    assert_int_equal(mg_file_sha256(path, hex, NULL, &err), MG_ENOTFOUND);
    free(data);
}

/* The edges the CLI relies on since it hashes files with mg_file_sha256 (M15): an empty
 * file, a directory, and a failure leaving no stale digest behind. */
static void test_file_sha256_edges(void **state)
{
    char path[128], hex[65];
    struct mg_error err = {0};
    uint64_t size = 42;
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/empty", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(mg_file_sha256(path, hex, &size, &err), MG_OK);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_int_equal(size, 0);
    /* a directory opens but cannot be read: MG_EIO naming it, no digest, size untouched */
    size = 42;
    memcpy(hex, "stale", 6);
    assert_int_equal(mg_file_sha256(dir, hex, &size, &err), MG_EIO);
    assert_string_equal(hex, "");
    assert_int_equal(size, 42);
    assert_non_null(strstr(err.message, "cannot read"));
    assert_non_null(strstr(err.message, dir));
    snprintf(path, sizeof(path), "%s/none", dir);
    assert_int_equal(mg_file_sha256(path, hex, &size, &err), MG_ENOTFOUND);
    assert_non_null(strstr(err.message, "cannot open"));
    assert_non_null(strstr(err.message, path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_atomic),
        cmocka_unit_test(test_file_sha256),
        cmocka_unit_test(test_file_sha256_edges),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
