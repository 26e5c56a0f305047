/*
 * test_tarpack.c - directory trees for push and verify (client/tarpack.c): scanning sorts
 * by full path and refuses links and special files; packing is reproducible (times, group
 * and other permission bits do not change the bytes, contents do), its digest and size are
 * those of the bytes written, and every entry reads back as 0:0, mtime 0, 0755 or 0644; the
 * temporary file is unlinked at once.
 */
#include <dirent.h>
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

#include <archive.h>
#include <archive_entry.h>
#include <cmocka.h>

#include "capture.h"
#include "client/mgc.h"
#include "base/util.h"

static char dir[64], root[128];

static void put(const char *rel, const char *text, mode_t mode)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static void sub(const char *rel)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_int_equal(mkdir(path, 0755), 0);
}

/* root/: a/ a/y/ a/z.txt a-1 b.bin (owner-executable) */
static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mg-client-tar-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(root, sizeof(root), "%s/model", dir);
    if (mkdir(root, 0755) != 0)
        return -1;
    sub("a");
    sub("a/y");
    put("a/z.txt", "hello", 0644);
    put("a-1", "", 0600);
    put("b.bin",
        "\x7f"
        "EL",
        0700);
    return 0;
}

static int teardown(void **state)
{
    char cmd[160];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_scan_sorts_by_path(void **state)
{
    static const struct {
        const char *path;
        bool dir, exec;
        uint64_t size;
    } want[] = {
        {"a", true, false, 0},   {"a-1", false, false, 0}, /* '-' sorts before '/' */
        {"a/y", true, false, 0}, {"a/z.txt", false, false, 5}, {"b.bin", false, true, 3},
    };
    struct mgc_tree t;

    (void)state;
    assert_int_equal(mgc_tree_scan(root, &t), MGC_OK);
    assert_int_equal(t.n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < t.n; i++) {
        assert_string_equal(t.v[i].path, want[i].path);
        assert_int_equal(t.v[i].dir, want[i].dir);
        assert_int_equal(t.v[i].exec, want[i].exec);
        assert_int_equal(t.v[i].size, want[i].size);
    }
    mgc_tree_release(&t);
    assert_null(t.v);
    assert_int_equal(t.n, 0);
}

/* mgc_tree_scan expected to fail with a message holding `what`. */
static void scan_refused(const char *what)
{
    struct capture cap;
    struct mgc_tree t;
    char *err;
    int rc;

    capture_begin(&cap, stderr);
    rc = mgc_tree_scan(root, &t);
    err = capture_end(&cap);
    assert_int_equal(rc, MGC_ERR);
    assert_null(t.v); /* released */
    assert_int_equal(t.n, 0);
    assert_non_null(strstr(err, what));
    free(err);
}

static void test_scan_refuses_links_and_special_files(void **state)
{
    char path[200], want[400];

    (void)state;
    snprintf(path, sizeof(path), "%s/a/y/link", root);
    assert_int_equal(symlink("../z.txt", path), 0);
    snprintf(want, sizeof(want),
             "modelgate: '%s' is a symbolic link; only regular files and directories are "
             "allowed",
             path);
    scan_refused(want);
    unlink(path);
    snprintf(path, sizeof(path), "%s/pipe", root);
    assert_int_equal(mkfifo(path, 0600), 0);
    snprintf(want, sizeof(want), "'%s' is a special file", path);
    scan_refused(want);
    unlink(path);
    snprintf(root + strlen(root), sizeof(root) - strlen(root), "-none");
    scan_refused("cannot open the directory '");
}

struct packed {
    char hex[65];
    uint64_t size;
    int fd;
};

static void pack(struct packed *p)
{
    struct capture cap;
    char *err;
    int rc;

    p->fd = mgc_temp_fd();
    assert_true(p->fd >= 0);
    capture_begin(&cap, stderr);
    rc = mgc_tar_pack(root, p->fd, p->hex, &p->size);
    err = capture_end(&cap);
    assert_string_equal(err, "");
    assert_int_equal(rc, MGC_OK);
    free(err);
}

/* The bytes in fd, hashed here: what the pack's digest must be. */
static void digest_of_fd(int fd, char hex[65], uint64_t *size)
{
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf;

    assert_true(n > 0);
    buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)n, 0), n);
    mg_sha256_hex(buf, (size_t)n, hex);
    *size = (uint64_t)n;
    free(buf);
}

static void test_pack_is_reproducible(void **state)
{
    struct packed a, b, c;
    char path[256], hex[65];
    uint64_t size;

    (void)state;
    pack(&a);
    digest_of_fd(a.fd, hex, &size);
    assert_string_equal(a.hex, hex);
    assert_int_equal(a.size, size);
    assert_int_equal(a.size % 10240, 0); /* whole tar blocks */
    /* other times, group/other bits, a different umask's modes: the same bytes */
    snprintf(path, sizeof(path), "%s/a/z.txt", root);
    assert_int_equal(chmod(path, 0600), 0);
    snprintf(path, sizeof(path), "%s/b.bin", root);
    assert_int_equal(chmod(path, 0744), 0);
    snprintf(path, sizeof(path), "%s/a", root);
    assert_int_equal(chmod(path, 0700), 0);
    {
        struct timespec ts[2] = {{1000000, 0}, {1000000, 0}};
        assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
    }
    pack(&b);
    assert_string_equal(a.hex, b.hex);
    assert_int_equal(a.size, b.size);
    /* one byte of content: another digest */
    put("a/z.txt", "hellO", 0644);
    pack(&c);
    assert_string_not_equal(a.hex, c.hex);
    close(a.fd);
    close(b.fd);
    close(c.fd);
}

static void test_pack_entries_read_back(void **state)
{
    static const struct {
        const char *path;
        mode_t type, perm;
        const char *data;
    } want[] = {
        {"a/", AE_IFDIR, 0755, NULL},
        {"a-1", AE_IFREG, 0644, ""},
        {"a/y/", AE_IFDIR, 0755, NULL},
        {"a/z.txt", AE_IFREG, 0644, "hello"},
        {"b.bin", AE_IFREG, 0755,
         "\x7f"
         "EL"},
    };
    struct archive_entry *e;
    struct archive *ar;
    struct packed p;
    char buf[64];
    size_t i = 0;

    (void)state;
    pack(&p);
    assert_int_equal(lseek(p.fd, 0, SEEK_SET), 0);
    ar = archive_read_new();
    assert_non_null(ar);
    assert_int_equal(archive_read_support_format_tar(ar), ARCHIVE_OK);
    assert_int_equal(archive_read_open_fd(ar, p.fd, 10240), ARCHIVE_OK);
    while (archive_read_next_header(ar, &e) == ARCHIVE_OK) {
        la_ssize_t n;

        assert_true(i < sizeof(want) / sizeof(want[0]));
        assert_string_equal(archive_entry_pathname(e), want[i].path);
        assert_int_equal(archive_entry_filetype(e), want[i].type);
        assert_int_equal(archive_entry_perm(e), want[i].perm);
        assert_int_equal(archive_entry_uid(e), 0);
        assert_int_equal(archive_entry_gid(e), 0);
        /* no user or group names: they would differ between machines */
        assert_true(archive_entry_uname(e) == NULL || archive_entry_uname(e)[0] == '\0');
        assert_true(archive_entry_gname(e) == NULL || archive_entry_gname(e)[0] == '\0');
        assert_int_equal(archive_entry_mtime(e), 0);
        if (want[i].data) {
            assert_int_equal(archive_entry_size(e), strlen(want[i].data));
            n = archive_read_data(ar, buf, sizeof(buf));
            assert_int_equal(n, strlen(want[i].data));
            assert_memory_equal(buf, want[i].data, (size_t)n);
        }
        i++;
    }
    assert_int_equal(i, sizeof(want) / sizeof(want[0]));
    archive_read_free(ar);
    close(p.fd);
}

static void test_pack_refuses_an_empty_directory(void **state)
{
    struct capture cap;
    char hex[65], *err, want[200];
    uint64_t size;
    int fd, rc;

    (void)state;
    snprintf(root, sizeof(root), "%s/empty", dir);
    assert_int_equal(mkdir(root, 0755), 0);
    fd = mgc_temp_fd();
    assert_true(fd >= 0);
    capture_begin(&cap, stderr);
    rc = mgc_tar_pack(root, fd, hex, &size);
    err = capture_end(&cap);
    assert_int_equal(rc, MGC_ERR);
    snprintf(want, sizeof(want), "modelgate: '%s' is empty; nothing to push\n", root);
    assert_string_equal(err, want);
    free(err);
    close(fd);
}

static void test_temp_fd_is_unlinked(void **state)
{
    struct capture cap;
    char tmp[128], *err;
    struct dirent *de;
    DIR *d;
    int fd;

    (void)state;
    snprintf(tmp, sizeof(tmp), "%s/tmp", dir);
    assert_int_equal(mkdir(tmp, 0700), 0);
    setenv("TMPDIR", tmp, 1);
    fd = mgc_temp_fd();
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    d = opendir(tmp);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        assert_true(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0);
    closedir(d);
    close(fd);
    /* a TMPDIR that does not exist */
    setenv("TMPDIR", "/nonexistent/mg", 1);
    capture_begin(&cap, stderr);
    fd = mgc_temp_fd();
    err = capture_end(&cap);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err, "cannot create a temporary file in '/nonexistent/mg'"));
    free(err);
    unsetenv("TMPDIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scan_sorts_by_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_refuses_links_and_special_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_is_reproducible, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_entries_read_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_refuses_an_empty_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_temp_fd_is_unlinked, setup, teardown),
    };

    return cmocka_run_group_tests_name("unit_client_tarpack", tests, NULL, NULL);
}
