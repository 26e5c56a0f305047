/*
 * test_cache.c - the runner's artifact cache (server/runner/cache.c): the free-space rule
 * (runner_space_check) with injected free-space figures, so an extraction that would not
 * fit is refused before anything is written, with a message naming the sizes; the copy of
 * a cached tree into a test's directory (contents, modes, a copy and not a link, anything
 * but files and directories refused); and the least-recently-used eviction that never
 * touches an entry in use.
 */
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

#include "runner/runner_int.h"

#define MIB ((uint64_t)1 << 20)

static void test_fits_with_margin(void **state)
{
    struct mg_error err;

    (void)state;
    memset(&err, 0, sizeof(err));
    /* 100 MiB needs 100 + 1 + 4 MiB free. */
    assert_int_equal(runner_space_check("/w", 100 * MIB, 105 * MIB, &err), MG_OK);
    assert_int_equal(runner_space_check("/w", 0, 4 * MIB, &err), MG_OK);
}

static void test_refused_without_the_margin(void **state)
{
    struct mg_error err;

    (void)state;
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", 100 * MIB, 105 * MIB - 1, &err), MG_ENOSPC);
    assert_non_null(strstr(err.message, "not enough disk space"));
    assert_non_null(strstr(err.message, "104857600 bytes"));
    assert_non_null(strstr(err.message, "/w"));
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", (uint64_t)1 << 40, 500 * MIB, &err), MG_ENOSPC);
}

static void test_huge_need_does_not_overflow(void **state)
{
    struct mg_error err;

    (void)state;
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", UINT64_MAX, UINT64_MAX - 1, &err), MG_ENOSPC);
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", UINT64_MAX - 1, UINT64_MAX - 2, &err), MG_ENOSPC);
}

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mg-runner-cache-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[200];

    (void)state;
    snprintf(cmd, sizeof(cmd), "chmod -R u+w '%s'; rm -rf '%s'", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void put(const char *rel, const void *data, size_t n, mode_t mode)
{
    char path[256];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static void sub(const char *rel)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    assert_int_equal(mkdir(path, 0755), 0);
}

static int opendir_fd(const char *rel)
{
    char path[256];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fd = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    return fd;
}

/* The file's bytes (malloc'd) and mode. */
static char *slurp(const char *rel, size_t *n, mode_t *mode)
{
    char path[256], *data;
    struct stat st;
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    data = malloc((size_t)st.st_size + 1);
    assert_non_null(data);
    assert_int_equal(read(fd, data, (size_t)st.st_size), st.st_size);
    close(fd);
    *n = (size_t)st.st_size;
    *mode = st.st_mode & 07777;
    return data;
}

static void test_copy_tree(void **state)
{
    static const struct {
        const char *rel;
        mode_t src_mode, want_mode;
    } files[] = {
        {"model.onnx", 0444, 0644}, /* the cache's files are read-only; the test's copy is not */
        {"run.sh", 0555, 0755},     /* owner-executable stays executable */
        {"d/weights.bin", 0644, 0644},
        {"d/e/f/deep.txt", 0600, 0644},
    };
    struct mg_error err = {0};
    struct stat a, b;
    char *big, *got, path[256];
    size_t n;
    mode_t mode;

    (void)state;
    sub("src");
    sub("src/d");
    sub("src/d/e");
    sub("src/d/e/f");
    sub("src/empty");
    sub("dst");
    big = malloc(300000);
    assert_non_null(big);
    for (size_t i = 0; i < 300000; i++)
        big[i] = (char)(i * 7 + i / 4096);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "src/%s", files[i].rel);
        put(path, big, 1000 * (i + 1) + (i == 2 ? 290000 : 0), files[i].src_mode);
    }
    assert_int_equal(runner_copy_tree(opendir_fd("src"), opendir_fd("dst"), 0, &err), MG_OK);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        size_t want = 1000 * (i + 1) + (i == 2 ? 290000 : 0);

        snprintf(path, sizeof(path), "dst/%s", files[i].rel);
        got = slurp(path, &n, &mode);
        assert_int_equal(n, want);
        assert_memory_equal(got, big, want);
        assert_int_equal(mode, files[i].want_mode);
        free(got);
    }
    snprintf(path, sizeof(path), "%s/dst/empty", dir);
    assert_int_equal(stat(path, &a), 0);
    assert_true(S_ISDIR(a.st_mode));
    /* a copy, not a link: writing the test's file leaves the cache's alone */
    snprintf(path, sizeof(path), "%s/src/d/weights.bin", dir);
    assert_int_equal(stat(path, &a), 0);
    snprintf(path, sizeof(path), "%s/dst/d/weights.bin", dir);
    assert_int_equal(stat(path, &b), 0);
    assert_true(a.st_ino != b.st_ino);
    put("dst/d/weights.bin", "x", 1, 0644);
    got = slurp("src/d/weights.bin", &n, &mode);
    assert_int_equal(n, 293000);
    free(got);
    free(big);
}

static void test_copy_tree_refusals(void **state)
{
    struct mg_error err = {0};
    char path[256];

    (void)state;
    sub("src");
    sub("dst");
    put("src/a", "a", 1, 0644);
    snprintf(path, sizeof(path), "%s/src/link", dir);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    assert_int_equal(runner_copy_tree(opendir_fd("src"), opendir_fd("dst"), 0, &err), MG_EIO);
    assert_string_equal(err.message, "the artifact cache holds an unexpected entry 'link'");
    unlink(path);
    snprintf(path, sizeof(path), "%s/src/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    memset(&err, 0, sizeof(err));
    sub("dst2");
    assert_int_equal(runner_copy_tree(opendir_fd("src"), opendir_fd("dst2"), 0, &err), MG_EIO);
    assert_string_equal(err.message, "the artifact cache holds an unexpected entry 'fifo'");
    unlink(path);
    /* never over something already there */
    sub("dst3");
    put("dst3/a", "old", 3, 0644);
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_copy_tree(opendir_fd("src"), opendir_fd("dst3"), 0, &err), MG_EIO);
    assert_string_equal(err.message, "cannot copy 'a': File exists");
}

/* A slot for hex, with its directory (and a file in it) under the cache directory. */
static void slot(struct runner *rn, const char *hex, unsigned users, uint64_t used)
{
    char rel[128];
    struct cache_slot *sl = &rn->slots[rn->nslots++];

    memset(sl, 0, sizeof(*sl));
    snprintf(sl->hex, sizeof(sl->hex), "%s", hex);
    sl->users = users;
    sl->used = used;
    snprintf(rel, sizeof(rel), "cache/%s", hex);
    sub(rel);
    snprintf(rel, sizeof(rel), "cache/%s/tree", hex);
    sub(rel);
    snprintf(rel, sizeof(rel), "cache/%s/tree/f", hex);
    put(rel, "x", 1, 0444);
}

static bool has(const struct runner *rn, const char *hex)
{
    char path[256];
    bool in_slots = false;

    for (size_t i = 0; i < rn->nslots; i++)
        in_slots = in_slots || strcmp(rn->slots[i].hex, hex) == 0;
    snprintf(path, sizeof(path), "%s/cache/%s", dir, hex);
    assert_int_equal(in_slots, access(path, F_OK) == 0); /* slot and directory go together */
    return in_slots;
}

static void test_evict_least_recently_used_idle(void **state)
{
    struct runner *rn = calloc(1, sizeof(*rn));

    (void)state;
    assert_non_null(rn);
    sub("cache");
    snprintf(rn->cache_dir, sizeof(rn->cache_dir), "%s/cache", dir);
    slot(rn, "aa", 0, 5);
    slot(rn, "bb", 1, 1); /* the oldest, but a test is copying from it */
    slot(rn, "cc", 0, 3);
    slot(rn, "dd", 0, 2);
    runner_cache_evict(rn, 4); /* nothing to do */
    assert_int_equal(rn->nslots, 4);
    runner_cache_evict(rn, 2);
    assert_int_equal(rn->nslots, 2);
    assert_true(has(rn, "aa"));
    assert_true(has(rn, "bb"));
    assert_false(has(rn, "cc"));
    assert_false(has(rn, "dd"));
    /* evict all that can go: the entry in use stays */
    runner_cache_evict(rn, 0);
    assert_int_equal(rn->nslots, 1);
    assert_false(has(rn, "aa"));
    assert_true(has(rn, "bb"));
    rn->slots[0].users = 0;
    runner_cache_evict(rn, 0);
    assert_int_equal(rn->nslots, 0);
    assert_false(has(rn, "bb"));
    free(rn);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fits_with_margin),
        cmocka_unit_test(test_refused_without_the_margin),
        cmocka_unit_test(test_huge_need_does_not_overflow),
        cmocka_unit_test_setup_teardown(test_copy_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_tree_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evict_least_recently_used_idle, setup, teardown),
    };

    return cmocka_run_group_tests_name("unit_runner_cache", tests, NULL, NULL);
}
