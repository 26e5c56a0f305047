/*
 * test_archive_extract.c - store_archive_extract(): safe extraction into a
 * fresh directory.
 *
 * Archives are written here with libarchive's write API. Each test works in a
 * private mkdtemp() directory holding the archive and "out/" (the extraction
 * directory); path-escape attempts are checked both for the error and for
 * the absence of anything written outside "out/" (and of anything left in it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/sha.h>

#include "artifact/archive.h"

#define TMP_TEMPLATE "/tmp/test_archive_extract.XXXXXX"
#define PATH_BUF 4096

enum wfmt { W_PAX, W_GNU, W_ZIP };
enum wfilt { F_NONE, F_GZIP, F_ZSTD, F_XZ };

/* One entry to write. type 0 = regular file; perm 0 = 0644 (files) / 0755 (dirs). */
struct ent {
    const char *path;
    unsigned type;
    const char *data;
    const char *link; /* symlink target, or hard link target when `hard` */
    bool hard;
    unsigned perm;
    size_t size; /* 0 = strlen(data) */
};

struct fx {
    char dir[sizeof(TMP_TEMPLATE)];
    char arc[PATH_BUF]; /* <dir>/a.tar */
    char out[PATH_BUF]; /* <dir>/out, made empty */
};

/* ---- fixture ---------------------------------------------------------------------------- */

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
    snprintf(fx->arc, sizeof(fx->arc), "%s/a.archive", fx->dir);
    snprintf(fx->out, sizeof(fx->out), "%s/out", fx->dir);
    if (mkdir(fx->out, 0700) != 0) {
        free(fx);
        return -1;
    }
    umask(022);
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

    free(fx);
    return r;
}

/* ---- helpers ---------------------------------------------------------------------------- */

static size_t ent_size(const struct ent *e)
{
    if (e->size)
        return e->size;
    return e->data ? strlen(e->data) : 0;
}

static void write_entry(struct archive *a, const struct ent *ent)
{
    struct archive_entry *e = archive_entry_new();
    unsigned type = ent->type ? ent->type : AE_IFREG;
    size_t size = type == AE_IFREG && !ent->hard ? ent_size(ent) : 0;
    size_t done = 0, chunk;

    assert_non_null(e);
    archive_entry_set_pathname(e, ent->path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, ent->perm ? ent->perm : (type == AE_IFDIR ? 0755 : 0644));
    archive_entry_set_uid(e, 4242);
    archive_entry_set_gid(e, 4242);
    archive_entry_set_mtime(e, 1700000000, 0);
    if (ent->hard)
        archive_entry_set_hardlink(e, ent->link);
    if (type == AE_IFLNK)
        archive_entry_set_symlink(e, ent->link);
    if (type == AE_IFCHR || type == AE_IFBLK) {
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
    }
    archive_entry_set_size(e, (la_int64_t)size);
    if (archive_write_header(a, e) != ARCHIVE_OK)
        fail_msg("write_header '%s': %s", ent->path, archive_error_string(a));
    /* data may be shorter than size: repeat it (for the big-file cases) */
    while (done < size) {
        chunk = strlen(ent->data);
        if (chunk > size - done)
            chunk = size - done;
        assert_int_equal(archive_write_data(a, ent->data, chunk), (la_ssize_t)chunk);
        done += chunk;
    }
    archive_entry_free(e);
}

static void write_archive(const char *path, enum wfmt fmt, enum wfilt filt, const struct ent *ents,
                          size_t n)
{
    struct archive *a = archive_write_new();
    size_t i;

    assert_non_null(a);
    if (fmt == W_PAX)
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    else if (fmt == W_GNU)
        assert_int_equal(archive_write_set_format_gnutar(a), ARCHIVE_OK);
    else
        assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
    if (filt == F_GZIP)
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    else if (filt == F_ZSTD)
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
    else if (filt == F_XZ)
        assert_int_equal(archive_write_add_filter_xz(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (i = 0; i < n; i++)
        write_entry(a, &ents[i]);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    assert_int_equal(archive_write_free(a), ARCHIVE_OK);
}

static const char *media(enum wfmt fmt, enum wfilt filt)
{
    if (fmt == W_ZIP)
        return "application/zip";
    switch (filt) {
    case F_GZIP:
        return "application/gzip";
    case F_ZSTD:
        return "application/zstd";
    case F_XZ:
        return "application/x-xz";
    default:
        return "application/x-tar";
    }
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    size_t i;

    SHA256(p, n, md);
    for (i = 0; i < sizeof(md); i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *p;
    long len;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    p[len] = '\0';
    assert_int_equal(fclose(f), 0);
    *n = (size_t)len;
    return p;
}

static const char *join(char *buf, const char *a, const char *b)
{
    int r = snprintf(buf, PATH_BUF, "%s/%s", a, b);

    assert_true(r > 0 && r < PATH_BUF);
    return buf;
}

/* Number of names in dir other than "." and "..". */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    }
    closedir(d);
    return n;
}

/* The fixture directory holds only the archive and out/ (nothing escaped). */
static void assert_nothing_escaped(const struct fx *fx)
{
    assert_int_equal(count_entries(fx->dir), 2);
}

/* Extraction must fail with MG_EINVAL, say `needle`, and leave out/ empty. */
static void expect_refused(struct fx *fx, const char *media_type, const char *needle)
{
    struct store_archive_manifest m = {(void *)1, 7};
    struct mg_error err;
    enum mg_code rc;

    memset(&err, 0, sizeof(err));
    rc = store_archive_extract(fx->arc, media_type, fx->out, NULL, &m, &err);
    if (rc != MG_EINVAL || strstr(err.message, needle) == NULL)
        fail_msg("want MG_EINVAL mentioning '%s', got %d: %s", needle, rc, err.message);
    assert_null(m.files);
    assert_int_equal(m.n, 0);
    assert_int_equal(count_entries(fx->out), 0);
    assert_nothing_escaped(fx);
}

static void refuse_entries(struct fx *fx, const struct ent *ents, size_t n, const char *needle)
{
    write_archive(fx->arc, W_PAX, F_NONE, ents, n);
    expect_refused(fx, "application/x-tar", needle);
}

/* ---- what is extracted ------------------------------------------------------------------ */

static const struct ent model_ents[] = {
    {.path = "./config.json", .data = "{\"layers\": 3}\n"},
    {.path = "sub/", .type = AE_IFDIR},
    {.path = "sub/deeper/tok.txt", .data = "tokenizer"},
    {.path = "run.sh", .data = "#!/bin/sh\necho hi\n", .perm = 04755},
    {.path = "weights.bin", .data = "0123456789abcdef", .size = 100000},
    {.path = "empty/", .type = AE_IFDIR, .perm = 01777},
    {.path = "zero.bin", .data = ""},
};

static void check_model(struct fx *fx, const struct store_archive_manifest *m)
{
    static const char *const want[] = {"config.json", "run.sh", "sub/deeper/tok.txt", "weights.bin",
                                       "zero.bin"};
    char path[PATH_BUF], hex[65];
    struct stat st;
    size_t i, n;
    char *data;

    assert_int_equal(m->n, 5);
    for (i = 0; i < m->n; i++) {
        assert_string_equal(m->files[i].path, want[i]);
        data = read_file(join(path, fx->out, want[i]), &n);
        sha256_hex(data, n, hex);
        assert_string_equal(m->files[i].sha256, hex);
        assert_int_equal(m->files[i].size, n);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_uid, getuid()); /* never the archive's 4242 */
        assert_int_equal(st.st_mode & 07777, strcmp(want[i], "run.sh") == 0 ? 0755 : 0644);
        free(data);
    }
    data = read_file(join(path, fx->out, "config.json"), &n);
    assert_string_equal(data, "{\"layers\": 3}\n");
    free(data);
    data = read_file(join(path, fx->out, "weights.bin"), &n);
    assert_int_equal(n, 100000);
    assert_memory_equal(data + 99984, "0123456789abcdef", 16);
    free(data);
    assert_int_equal(lstat(join(path, fx->out, "empty"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0755); /* not the archive's sticky 1777 */
    assert_int_equal(lstat(join(path, fx->out, "sub/deeper"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_nothing_escaped(fx);
}

static void extract_ok(struct fx *fx, enum wfmt fmt, enum wfilt filt)
{
    struct store_archive_manifest m, im;
    struct mg_error err;
    bool is_archive = false;
    size_t i;

    write_archive(fx->arc, fmt, filt, model_ents, sizeof(model_ents) / sizeof(model_ents[0]));
    if (store_archive_extract(fx->arc, media(fmt, filt), fx->out, NULL, &m, &err) != MG_OK)
        fail_msg("extract: %s", err.message);
    check_model(fx, &m);
    /* the manifest of what was written equals what inspection reports */
    assert_int_equal(store_archive_inspect(fx->arc, media(fmt, filt), NULL, &im, &is_archive, &err),
                     MG_OK);
    assert_true(is_archive);
    assert_int_equal(im.n, m.n);
    for (i = 0; i < m.n; i++) {
        assert_string_equal(im.files[i].path, m.files[i].path);
        assert_string_equal(im.files[i].sha256, m.files[i].sha256);
    }
    store_archive_manifest_release(&im);
    store_archive_manifest_release(&m);
}

static void test_extract_tar(void **state)
{
    extract_ok(*state, W_PAX, F_NONE);
}

static void test_extract_gnutar_gzip(void **state)
{
    extract_ok(*state, W_GNU, F_GZIP);
}

static void test_extract_tar_zstd(void **state)
{
    extract_ok(*state, W_PAX, F_ZSTD);
}

static void test_extract_tar_xz(void **state)
{
    extract_ok(*state, W_PAX, F_XZ);
}

static void test_extract_zip(void **state)
{
    struct fx *fx = *state;
    static const struct ent ents[] = {
        {.path = "a.txt", .data = "alpha"},
        {.path = "d/b.txt", .data = "beta"},
    };
    struct store_archive_manifest m;
    struct mg_error err;
    char path[PATH_BUF];
    size_t n;
    char *data;

    write_archive(fx->arc, W_ZIP, F_NONE, ents, 2);
    if (store_archive_extract(fx->arc, "application/zip", fx->out, NULL, &m, &err) != MG_OK)
        fail_msg("extract: %s", err.message);
    assert_int_equal(m.n, 2);
    assert_string_equal(m.files[1].path, "d/b.txt");
    data = read_file(join(path, fx->out, "d/b.txt"), &n);
    assert_string_equal(data, "beta");
    free(data);
    store_archive_manifest_release(&m);
}

static void test_manifest_optional(void **state)
{
    struct fx *fx = *state;
    struct mg_error err;

    write_archive(fx->arc, W_PAX, F_NONE, model_ents, 2);
    assert_int_equal(store_archive_extract(fx->arc, "application/x-tar", fx->out, NULL, NULL, &err),
                     MG_OK);
    assert_int_equal(count_entries(fx->out), 2);
}

/* ---- path escapes and unsafe entries ---------------------------------------------------- */

static void test_dotdot(void **state)
{
    static const struct ent ents[] = {{.path = "../evil", .data = "x"}};

    refuse_entries(*state, ents, 1, "escapes the archive root");
}

static void test_dotdot_inside(void **state)
{
    static const struct ent ents[] = {
        {.path = "a/", .type = AE_IFDIR},
        {.path = "a/../../evil", .data = "x"},
    };

    refuse_entries(*state, ents, 2, "escapes the archive root");
}

static void test_dot_then_dotdot(void **state)
{
    static const struct ent ents[] = {{.path = "./../evil", .data = "x"}};

    refuse_entries(*state, ents, 1, "escapes the archive root");
}

static void test_absolute(void **state)
{
    struct fx *fx = *state;
    char abs[PATH_BUF];
    struct ent ents[] = {{.path = abs, .data = "x"}};

    /* an absolute path naming a real place beside out/ */
    join(abs, fx->dir, "evil");
    refuse_entries(fx, ents, 1, "absolute path");
}

static void test_backslash(void **state)
{
    static const struct ent ents[] = {{.path = "..\\evil", .data = "x"}};

    refuse_entries(*state, ents, 1, "backslash");
}

static void test_symlink_out(void **state)
{
    static const struct ent ents[] = {
        {.path = "link", .type = AE_IFLNK, .link = ".."},
        {.path = "link/evil", .data = "x"},
    };

    refuse_entries(*state, ents, 2, "symbolic link");
}

static void test_symlink_absolute(void **state)
{
    static const struct ent ents[] = {{.path = "passwd", .type = AE_IFLNK, .link = "/etc/passwd"}};

    refuse_entries(*state, ents, 1, "symbolic link");
}

static void test_hardlink(void **state)
{
    static const struct ent ents[] = {
        {.path = "a.txt", .data = "alpha"},
        {.path = "passwd", .hard = true, .link = "/etc/passwd"},
    };

    refuse_entries(*state, ents, 2, "hard link");
}

static void test_device(void **state)
{
    static const struct ent ents[] = {{.path = "null", .type = AE_IFCHR}};

    refuse_entries(*state, ents, 1, "character device");
}

static void test_fifo(void **state)
{
    static const struct ent ents[] = {{.path = "pipe", .type = AE_IFIFO}};

    refuse_entries(*state, ents, 1, "FIFO");
}

static void test_duplicate(void **state)
{
    static const struct ent ents[] = {
        {.path = "a.txt", .data = "first"},
        {.path = "./a.txt", .data = "second"},
    };

    refuse_entries(*state, ents, 2, "more than once");
}

static void test_file_then_dir(void **state)
{
    static const struct ent ents[] = {
        {.path = "a", .data = "a file"},
        {.path = "a/b.txt", .data = "below a file"},
    };

    refuse_entries(*state, ents, 2, "also holds it as a file");
}

static void test_dir_then_file(void **state)
{
    static const struct ent ents[] = {
        {.path = "a/", .type = AE_IFDIR},
        {.path = "a", .data = "a file over a directory"},
    };

    refuse_entries(*state, ents, 2, "more than once");
}

/* A bad entry after good ones: what was written is removed again. */
static void test_late_failure_cleans_up(void **state)
{
    static const struct ent ents[] = {
        {.path = "d/one.txt", .data = "1"},
        {.path = "d/e/two.txt", .data = "2"},
        {.path = "three.txt", .data = "3"},
        {.path = "d/e/../../../evil", .data = "x"},
    };

    refuse_entries(*state, ents, 4, "escapes");
}

/* ---- caps ------------------------------------------------------------------------------- */

static void test_cap_bytes(void **state)
{
    struct fx *fx = *state;
    static const struct ent ents[] = {
        {.path = "a.bin", .data = "0123456789", .size = 600},
        {.path = "b.bin", .data = "0123456789", .size = 600},
    };
    struct store_archive_limits lim;
    struct mg_error err;

    store_archive_limits_default(&lim);
    lim.max_total_bytes = 1000;
    write_archive(fx->arc, W_PAX, F_NONE, ents, 2);
    assert_int_equal(store_archive_extract(fx->arc, "application/x-tar", fx->out, &lim, NULL, &err),
                     MG_EINVAL);
    assert_non_null(strstr(err.message, "more than 1000 bytes"));
    assert_int_equal(count_entries(fx->out), 0);
}

static void test_cap_entries(void **state)
{
    struct fx *fx = *state;
    static const struct ent ents[] = {
        {.path = "a", .data = "1"}, {.path = "b", .data = "2"}, {.path = "c", .data = "3"}};
    struct store_archive_limits lim;
    struct mg_error err;

    store_archive_limits_default(&lim);
    lim.max_entries = 2;
    write_archive(fx->arc, W_PAX, F_NONE, ents, 3);
    assert_int_equal(store_archive_extract(fx->arc, "application/x-tar", fx->out, &lim, NULL, &err),
                     MG_EINVAL);
    assert_non_null(strstr(err.message, "more than 2 entries"));
    assert_int_equal(count_entries(fx->out), 0);
}

static void test_cap_path(void **state)
{
    struct fx *fx = *state;
    static const struct ent ents[] = {{.path = "dir/0123456789/name.txt", .data = "1"}};
    struct store_archive_limits lim;
    struct mg_error err;

    store_archive_limits_default(&lim);
    lim.max_path_len = 16;
    write_archive(fx->arc, W_PAX, F_NONE, ents, 1);
    assert_int_equal(store_archive_extract(fx->arc, "application/x-tar", fx->out, &lim, NULL, &err),
                     MG_EINVAL);
    assert_non_null(strstr(err.message, "longer than 16 bytes"));
    assert_int_equal(count_entries(fx->out), 0);
}

/* ---- the destination and the input ------------------------------------------------------ */

static void test_dest_not_empty(void **state)
{
    struct fx *fx = *state;
    char path[PATH_BUF];
    struct mg_error err;
    FILE *f;

    write_archive(fx->arc, W_PAX, F_NONE, model_ents, 1);
    f = fopen(join(path, fx->out, "config.json"), "w");
    assert_non_null(f);
    fputs("mine", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(store_archive_extract(fx->arc, "application/x-tar", fx->out, NULL, NULL, &err),
                     MG_EINVAL);
    assert_non_null(strstr(err.message, "not empty"));
    /* the caller's file is untouched */
    assert_int_equal(count_entries(fx->out), 1);
}

static void test_dest_symlink(void **state)
{
    struct fx *fx = *state;
    char link[PATH_BUF];
    struct mg_error err;

    write_archive(fx->arc, W_PAX, F_NONE, model_ents, 1);
    assert_int_equal(symlink(fx->out, join(link, fx->dir, "link")), 0);
    assert_int_not_equal(
        store_archive_extract(fx->arc, "application/x-tar", link, NULL, NULL, &err), MG_OK);
    assert_int_equal(count_entries(fx->out), 0);
}

static void test_dest_missing(void **state)
{
    struct fx *fx = *state;
    char path[PATH_BUF];
    struct mg_error err;

    write_archive(fx->arc, W_PAX, F_NONE, model_ents, 1);
    assert_int_equal(store_archive_extract(fx->arc, "application/x-tar",
                                           join(path, fx->dir, "nope"), NULL, NULL, &err),
                     MG_EIO);
}

static void test_not_an_archive(void **state)
{
    struct fx *fx = *state;
    struct archive *a = archive_write_new();
    struct archive_entry *e = archive_entry_new();

    /* a gzip stream of plain bytes: a single-file artifact, not an archive */
    assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
    assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, fx->arc), ARCHIVE_OK);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_pathname(e, "x");
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, "plain bytes", 11), 11);
    archive_entry_free(e);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    assert_int_equal(archive_write_free(a), ARCHIVE_OK);
    expect_refused(fx, "application/gzip", "does not hold a tar archive");
    expect_refused(fx, "application/octet-stream", "not an archive");
    expect_refused(fx, NULL, "not an archive");
}

static void test_corrupt(void **state)
{
    struct fx *fx = *state;
    struct mg_error err;
    FILE *f;
    size_t n;
    char *data;

    write_archive(fx->arc, W_PAX, F_GZIP, model_ents, sizeof(model_ents) / sizeof(model_ents[0]));
    data = read_file(fx->arc, &n);
    f = fopen(fx->arc, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n / 2, f), n / 2); /* truncated */
    assert_int_equal(fclose(f), 0);
    free(data);
    assert_int_not_equal(
        store_archive_extract(fx->arc, "application/gzip", fx->out, NULL, NULL, &err), MG_OK);
    assert_int_equal(count_entries(fx->out), 0);
}

/* ---- threads ---------------------------------------------------------------------------- */

struct job {
    const char *arc;
    char out[PATH_BUF];
    enum mg_code rc;
    size_t nfiles;
};

static void *extract_job(void *p)
{
    struct job *j = p;
    struct store_archive_manifest m;
    struct mg_error err;

    j->rc = store_archive_extract(j->arc, "application/gzip", j->out, NULL, &m, &err);
    if (j->rc == MG_OK) {
        j->nfiles = m.n;
        store_archive_manifest_release(&m);
    }
    return NULL;
}

static void test_threads(void **state)
{
    struct fx *fx = *state;
    struct job jobs[4];
    pthread_t t[4];
    char name[32];
    int i;

    write_archive(fx->arc, W_PAX, F_GZIP, model_ents, sizeof(model_ents) / sizeof(model_ents[0]));
    for (i = 0; i < 4; i++) {
        jobs[i].arc = fx->arc;
        snprintf(name, sizeof(name), "out%d", i);
        join(jobs[i].out, fx->dir, name);
        assert_int_equal(mkdir(jobs[i].out, 0700), 0);
    }
    for (i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, extract_job, &jobs[i]), 0);
    for (i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(jobs[i].rc, MG_OK);
        assert_int_equal(jobs[i].nfiles, 5);
    }
}

/* ---- main ------------------------------------------------------------------------------- */

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FX_TEST(test_extract_tar),      FX_TEST(test_extract_gnutar_gzip),
        FX_TEST(test_extract_tar_zstd), FX_TEST(test_extract_tar_xz),
        FX_TEST(test_extract_zip),      FX_TEST(test_manifest_optional),
        FX_TEST(test_dotdot),           FX_TEST(test_dotdot_inside),
        FX_TEST(test_dot_then_dotdot),  FX_TEST(test_absolute),
        FX_TEST(test_backslash),        FX_TEST(test_symlink_out),
        FX_TEST(test_symlink_absolute), FX_TEST(test_hardlink),
        FX_TEST(test_device),           FX_TEST(test_fifo),
        FX_TEST(test_duplicate),        FX_TEST(test_file_then_dir),
        FX_TEST(test_dir_then_file),    FX_TEST(test_late_failure_cleans_up),
        FX_TEST(test_cap_bytes),        FX_TEST(test_cap_entries),
        FX_TEST(test_cap_path),         FX_TEST(test_dest_not_empty),
        FX_TEST(test_dest_symlink),     FX_TEST(test_dest_missing),
        FX_TEST(test_not_an_archive),   FX_TEST(test_corrupt),
        FX_TEST(test_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
