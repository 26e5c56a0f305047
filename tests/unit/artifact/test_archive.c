/*
 * test_archive.c - artifact/archive.c: media-type sniffing and safe inspection.
 *
 * Every archive is written here with libarchive's write API into a fresh
 * mkdtemp() directory (removed after each test); expected sizes and SHA-256
 * digests are computed independently from the bytes written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <openssl/sha.h>

#include "artifact/archive.h"

#define TMP_TEMPLATE "/tmp/test_archive.XXXXXX"
#define MAX_ENTS 10

enum wfmt { W_PAX, W_GNU, W_USTAR, W_ZIP, W_ZIP64, W_ZIP_STORE, W_RAW };
enum wfilt { F_NONE, F_GZIP, F_ZSTD, F_XZ };

/* One entry to write. type 0 means a regular file; size 0 means strlen(data). */
struct ent {
    const char *path;
    unsigned type;
    const char *data;
    size_t size;
    const char *link; /* symlink target, or hard link target when `hard` */
    bool hard;
    const char *want; /* expected manifest path (regular files in valid cases) */
};

struct fx {
    char dir[sizeof(TMP_TEMPLATE)];
    const void *param; /* the table case, for table-driven tests */
};

/* ---- fixture ---------------------------------------------------------------------------- */

static int fx_setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));

    if (fx == NULL)
        return -1;
    fx->param = *state;
    memcpy(fx->dir, TMP_TEMPLATE, sizeof(TMP_TEMPLATE));
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
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

static void fx_path(const struct fx *fx, const char *name, char *out, size_t n)
{
    int r = snprintf(out, n, "%s/%s", fx->dir, name);

    assert_true(r > 0 && (size_t)r < n);
}

/* ---- helpers ---------------------------------------------------------------------------- */

/* Deterministic incompressible bytes. */
static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t x = seed | 1;
    size_t i;

    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)(x >> 24);
    }
}

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
    int r;

    assert_non_null(e);
    archive_entry_set_pathname(e, ent->path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
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
    r = archive_write_header(a, e);
    if (r != ARCHIVE_OK)
        fail_msg("write_header '%s': %s", ent->path, archive_error_string(a));
    if (size > 0)
        assert_int_equal(archive_write_data(a, ent->data, size), (la_ssize_t)size);
    archive_entry_free(e);
}

/* Write ents to path; under a UTF-8 thread locale so non-ASCII names pass through. */
static void write_archive(const char *path, enum wfmt fmt, enum wfilt filt, const struct ent *ents,
                          size_t n)
{
    locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    locale_t prev;
    struct archive *a;
    size_t i;

    assert_true(loc != (locale_t)0);
    prev = uselocale(loc);
    a = archive_write_new();
    assert_non_null(a);
    switch (fmt) {
    case W_PAX:
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        break;
    case W_GNU:
        assert_int_equal(archive_write_set_format_gnutar(a), ARCHIVE_OK);
        break;
    case W_USTAR:
        assert_int_equal(archive_write_set_format_ustar(a), ARCHIVE_OK);
        break;
    case W_ZIP:
    case W_ZIP64:
    case W_ZIP_STORE:
        assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
        if (fmt == W_ZIP64)
            assert_int_equal(archive_write_set_format_option(a, "zip", "zip64", "1"), ARCHIVE_OK);
        if (fmt == W_ZIP_STORE)
            assert_int_equal(archive_write_set_format_option(a, "zip", "compression", "store"),
                             ARCHIVE_OK);
        break;
    case W_RAW:
        assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
        break;
    }
    switch (filt) {
    case F_NONE:
        break;
    case F_GZIP:
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        break;
    case F_ZSTD:
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        break;
    case F_XZ:
        assert_int_equal(archive_write_add_filter_xz(a), ARCHIVE_OK);
        break;
    }
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (i = 0; i < n; i++)
        write_entry(a, &ents[i]);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    assert_int_equal(archive_write_free(a), ARCHIVE_OK);
    uselocale(prev);
    freelocale(loc);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p;
    long len;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    p = malloc((size_t)len + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    assert_int_equal(fclose(f), 0);
    *n = (size_t)len;
    return p;
}

/* Overwrite the `nth` (0-based) occurrence of `from` in the file with `to` (same length). */
static void patch_bytes(const char *path, const char *from, const char *to, size_t len, int nth)
{
    size_t n, i;
    unsigned char *p = read_bytes(path, &n);
    int seen = 0;

    for (i = 0; i + len <= n; i++) {
        if (memcmp(p + i, from, len) == 0 && seen++ == nth) {
            memcpy(p + i, to, len);
            break;
        }
    }
    assert_true(i + len <= n);
    write_bytes(path, p, n);
    free(p);
}

static const char *detect_file(const char *path)
{
    uint8_t head[512];
    FILE *f = fopen(path, "rb");
    size_t n;

    assert_non_null(f);
    n = fread(head, 1, sizeof(head), f);
    assert_int_equal(fclose(f), 0);
    return store_media_type_detect(head, n);
}

struct result {
    enum mg_code rc;
    struct store_archive_manifest m;
    bool is_archive;
    struct mg_error err;
    const char *mt;
};

static void inspect_path(const char *path, const struct store_archive_limits *lim,
                         struct result *res)
{
    struct store_archive_limits def;

    if (lim == NULL) {
        store_archive_limits_default(&def);
        lim = &def;
    }
    memset(res, 0, sizeof(*res));
    mg_error_clear(&res->err);
    res->mt = detect_file(path);
    res->is_archive = true; /* must be cleared on failure / non-archives */
    res->rc = store_archive_inspect(path, res->mt, lim, &res->m, &res->is_archive, &res->err);
}

static void assert_rejected(struct result *res, const char *const *want)
{
    size_t i;

    if (res->rc != MG_EINVAL)
        fail_msg("expected MG_EINVAL, got %d (%s)", res->rc, res->err.message);
    assert_int_equal(res->err.code, MG_EINVAL);
    assert_false(res->is_archive);
    assert_null(res->m.files);
    assert_int_equal(res->m.n, 0);
    for (i = 0; want[i] != NULL; i++) {
        if (strstr(res->err.message, want[i]) == NULL)
            fail_msg("message \"%s\" lacks \"%s\"", res->err.message, want[i]);
    }
}

struct expect {
    const char *path;
    const unsigned char *data;
    size_t size;
};

static int cmp_expect(const void *a, const void *b)
{
    return strcmp(((const struct expect *)a)->path, ((const struct expect *)b)->path);
}

static void sha256_hex(const void *p, size_t n, char out[65])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    size_t i;

    assert_non_null(SHA256(p, n, md));
    for (i = 0; i < sizeof(md); i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The manifest must list exactly the entries with a `want` path, sorted, with their digests. */
static void assert_manifest(const struct store_archive_manifest *m, const struct ent *ents,
                            size_t n)
{
    struct expect exp[MAX_ENTS] = {{0}};
    char hex[65];
    size_t i, k = 0;

    for (i = 0; i < n; i++) {
        if (ents[i].want == NULL)
            continue;
        exp[k].path = ents[i].want;
        exp[k].data = (const unsigned char *)ents[i].data;
        exp[k].size = ent_size(&ents[i]);
        k++;
    }
    qsort(exp, k, sizeof(exp[0]), cmp_expect);
    assert_int_equal(m->n, k);
    for (i = 0; i < k; i++) {
        assert_string_equal(m->files[i].path, exp[i].path);
        assert_int_equal(m->files[i].size, exp[i].size);
        sha256_hex(exp[i].data, exp[i].size, hex);
        assert_string_equal(m->files[i].sha256, hex);
    }
}

/* ---- media type ------------------------------------------------------------------------- */

struct mt_case {
    const char *name;
    const char *bytes;
    size_t n;
    const char *want;
};

static const struct mt_case mt_cases[] = {
    {"gzip", "\x1f\x8b\x08\x00", 4, "application/gzip"},
    {"zip local header", "PK\x03\x04\x14\x00", 6, "application/zip"},
    {"empty zip", "PK\x05\x06\0\0\0\0", 8, "application/zip"},
    {"zstd", "\x28\xb5\x2f\xfd\x04\x00", 6, "application/zstd"},
    {"xz",
     "\xfd"
     "7zXZ\0\0\x04",
     8, "application/x-xz"},
    {"text", "hello world", 11, "application/octet-stream"},
    {"empty", "", 0, "application/octet-stream"},
    {"gzip cut short", "\x1f", 1, "application/octet-stream"},
    {"zip cut short", "PK\x03", 3, "application/octet-stream"},
    {"zip spanning marker", "PK\x07\x08", 4, "application/octet-stream"},
    {"xz without its NUL",
     "\xfd"
     "7zXZ",
     5, "application/octet-stream"},
    {"zstd skippable-ish", "\x28\xb5\x2f\xfe", 4, "application/octet-stream"},
};

static void test_media_type_table(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(mt_cases) / sizeof(mt_cases[0]); i++) {
        const char *got =
            store_media_type_detect((const uint8_t *)mt_cases[i].bytes, mt_cases[i].n);
        if (strcmp(got, mt_cases[i].want) != 0)
            fail_msg("%s: got %s, want %s", mt_cases[i].name, got, mt_cases[i].want);
    }
    assert_string_equal(store_media_type_detect(NULL, 0), "application/octet-stream");
}

static void test_media_type_ustar_magic(void **state)
{
    uint8_t head[512];

    (void)state;
    memset(head, 0, sizeof(head));
    memcpy(head + 257,
           "ustar\0"
           "00",
           8);
    assert_string_equal(store_media_type_detect(head, sizeof(head)), "application/x-tar");
    memcpy(head + 257, "ustar  \0", 8);
    assert_string_equal(store_media_type_detect(head, sizeof(head)), "application/x-tar");
    /* The magic must be whole in the bytes given. */
    assert_string_equal(store_media_type_detect(head, 262), "application/octet-stream");
    memcpy(head + 257, "ustarX", 6);
    assert_string_equal(store_media_type_detect(head, sizeof(head)), "application/octet-stream");
    memcpy(head + 257, "ustax\0", 6);
    assert_string_equal(store_media_type_detect(head, sizeof(head)), "application/octet-stream");
}

static void test_limits_default(void **state)
{
    struct store_archive_limits lim;
    struct store_archive_manifest m = {NULL, 0};

    (void)state;
    store_archive_limits_default(&lim);
    assert_int_equal(lim.max_total_bytes, (uint64_t)256 << 30);
    assert_int_equal(lim.max_entries, 1000000);
    assert_int_equal(lim.max_path_len, 1024);
    assert_int_equal(lim.max_ratio, 200);
    assert_int_equal(lim.ratio_floor_bytes, (uint64_t)32 << 20);
    assert_null(lim.counters);
    store_archive_manifest_release(&m); /* safe on an empty manifest */
    store_archive_manifest_release(&m);
    assert_null(m.files);
    assert_int_equal(m.n, 0);
}

/* ---- valid archives --------------------------------------------------------------------- */

struct valid_case {
    const char *name;
    enum wfmt fmt;
    enum wfilt filt;
    const char *mt;
};

static const struct valid_case valid_cases[] = {
    {"pax tar", W_PAX, F_NONE, "application/x-tar"},
    {"gnu tar", W_GNU, F_NONE, "application/x-tar"},
    {"ustar", W_USTAR, F_NONE, "application/x-tar"},
    {"tar.gz", W_PAX, F_GZIP, "application/gzip"},
    {"tar.zst", W_PAX, F_ZSTD, "application/zstd"},
    {"tar.xz", W_PAX, F_XZ, "application/x-xz"},
    {"gnu tar.gz", W_GNU, F_GZIP, "application/gzip"},
    {"zip", W_ZIP, F_NONE, "application/zip"},
    {"zip stored", W_ZIP_STORE, F_NONE, "application/zip"},
    {"zip64", W_ZIP64, F_NONE, "application/zip"},
};

static void test_valid(void **state)
{
    struct fx *fx = *state;
    const struct valid_case *c = fx->param;
    const size_t big_len = 300000; /* spans several 64 KiB read blocks */
    unsigned char *big = malloc(big_len);
    char path[256];
    struct result res;
    bool is_zip = c->fmt == W_ZIP || c->fmt == W_ZIP64 || c->fmt == W_ZIP_STORE;
    struct ent ents[MAX_ENTS];
    size_t n = 0;

    assert_non_null(big);
    fill_random(big, big_len, 42);
    if (!is_zip) /* tar's "./" root entry; zip writers do not make one */
        ents[n++] = (struct ent){.path = "./", .type = AE_IFDIR};
    ents[n++] = (struct ent){.path = "model/", .type = AE_IFDIR};
    ents[n++] = (struct ent){.path = "model/layers/", .type = AE_IFDIR};
    ents[n++] = (struct ent){.path = "model/layers/0.bin",
                             .data = (const char *)big,
                             .size = big_len,
                             .want = "model/layers/0.bin"};
    ents[n++] = (struct ent){
        .path = "model/layers/1.bin", .data = "layer one", .want = "model/layers/1.bin"};
    ents[n++] = (struct ent){
        .path = "model/config.json", .data = "{\"dim\": 4}", .want = "model/config.json"};
    ents[n++] = (struct ent){.path = "README", .data = "hello\n", .want = "README"};
    ents[n++] = (struct ent){.path = "./model/empty", .data = "", .want = "model/empty"};
    ents[n++] = (struct ent){.path = "model/tokenizer/vocab.txt",
                             .data = "a\nb\nc\n",
                             .want = "model/tokenizer/vocab.txt"};

    fx_path(fx, "artifact", path, sizeof(path));
    write_archive(path, c->fmt, c->filt, ents, n);
    inspect_path(path, NULL, &res);
    assert_string_equal(res.mt, c->mt);
    if (res.rc != MG_OK)
        fail_msg("%s: %s", c->name, res.err.message);
    assert_true(res.is_archive);
    assert_manifest(&res.m, ents, n);
    /* strcmp order, spelled out */
    assert_string_equal(res.m.files[0].path, "README");
    assert_string_equal(res.m.files[1].path, "model/config.json");
    assert_string_equal(res.m.files[5].path, "model/tokenizer/vocab.txt");
    assert_int_equal(res.m.files[3].size, big_len);
    store_archive_manifest_release(&res.m);
    assert_null(res.m.files);
    assert_int_equal(res.m.n, 0);
    free(big);
}

static void test_dot_slash_normalised(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {
        {.path = "./a", .data = "A", .want = "a"},
        {.path = "./dir/./b//c", .data = "C", .want = "dir/b/c"},
        {.path = "././d/", .type = AE_IFDIR},
        {.path = "d//e", .data = "E", .want = "d/e"},
    };
    char path[256];
    struct result res;

    fx_path(fx, "dots.tar", path, sizeof(path));
    write_archive(path, W_PAX, F_NONE, ents, 4);
    inspect_path(path, NULL, &res);
    assert_int_equal(res.rc, MG_OK);
    assert_true(res.is_archive);
    assert_manifest(&res.m, ents, 4);
    assert_string_equal(res.m.files[0].path, "a");
    store_archive_manifest_release(&res.m);
}

static void test_utf8_names(void **state)
{
    struct fx *fx = *state;
    /* "modèle/权重.bin": pax stores it in a UTF-8 header, zip with the UTF-8 flag */
    const struct ent ents[] = {
        {.path = "mod\xc3\xa8le/\xe6\x9d\x83\xe9\x87\x8d.bin",
         .data = "w",
         .want = "mod\xc3\xa8le/\xe6\x9d\x83\xe9\x87\x8d.bin"},
    };
    const enum wfmt fmts[] = {W_PAX, W_ZIP};
    char path[256];
    struct result res;
    size_t i;

    for (i = 0; i < 2; i++) {
        fx_path(fx, i == 0 ? "utf8.tar" : "utf8.zip", path, sizeof(path));
        write_archive(path, fmts[i], F_NONE, ents, 1);
        inspect_path(path, NULL, &res);
        if (res.rc != MG_OK)
            fail_msg("%s", res.err.message);
        assert_manifest(&res.m, ents, 1);
        store_archive_manifest_release(&res.m);
    }
}

static void test_sparse_file(void **state)
{
    struct fx *fx = *state;
    char path[256];
    unsigned char logical[20000];
    struct result res;
    char hex[65];
    struct archive *a;
    struct archive_entry *e;

    memset(logical, 0, sizeof(logical));
    fill_random(logical + 8192, 1000, 7);
    fx_path(fx, "sparse.tar", path, sizeof(path));
    a = archive_write_new();
    assert_int_equal(archive_write_set_format_pax(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    e = archive_entry_new();
    archive_entry_set_pathname(e, "holes.bin");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, sizeof(logical));
    archive_entry_sparse_add_entry(e, 8192, 1000);
    assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, logical, sizeof(logical)), sizeof(logical));
    archive_entry_free(e);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    assert_int_equal(archive_write_free(a), ARCHIVE_OK);

    inspect_path(path, NULL, &res);
    if (res.rc != MG_OK)
        fail_msg("%s", res.err.message);
    assert_int_equal(res.m.n, 1);
    assert_string_equal(res.m.files[0].path, "holes.bin");
    assert_int_equal(res.m.files[0].size, sizeof(logical));
    sha256_hex(logical, sizeof(logical), hex);
    assert_string_equal(res.m.files[0].sha256, hex);
    store_archive_manifest_release(&res.m);
}

static void test_empty_zip(void **state)
{
    struct fx *fx = *state;
    char path[256];
    struct result res;

    fx_path(fx, "empty.zip", path, sizeof(path));
    write_archive(path, W_ZIP, F_NONE, NULL, 0);
    inspect_path(path, NULL, &res);
    assert_string_equal(res.mt, "application/zip");
    assert_int_equal(res.rc, MG_OK);
    assert_true(res.is_archive);
    assert_int_equal(res.m.n, 0);
}

/* ---- not archives ----------------------------------------------------------------------- */

enum plain_kind { P_TEXT, P_ZEROS, P_RANDOM, P_EMPTY };

struct plain_case {
    const char *name;
    enum wfilt filt; /* F_NONE: bytes written as they are */
    enum plain_kind kind;
    const char *mt;
};

static const struct plain_case plain_cases[] = {
    {"gzip of text", F_GZIP, P_TEXT, "application/gzip"},
    {"zstd of text", F_ZSTD, P_TEXT, "application/zstd"},
    {"xz of text", F_XZ, P_TEXT, "application/x-xz"},
    {"gzip of random bytes", F_GZIP, P_RANDOM, "application/gzip"},
    {"gzip of zeros", F_GZIP, P_ZEROS, "application/gzip"},
    {"gzip of nothing", F_GZIP, P_EMPTY, "application/gzip"},
    {"xz of nothing", F_XZ, P_EMPTY, "application/x-xz"},
    {"random bytes", F_NONE, P_RANDOM, "application/octet-stream"},
    {"empty file", F_NONE, P_EMPTY, "application/octet-stream"},
};

static void test_not_archive(void **state)
{
    struct fx *fx = *state;
    const struct plain_case *c = fx->param;
    unsigned char buf[8192];
    struct ent ent = {.path = "data", .data = (const char *)buf, .size = sizeof(buf)};
    char path[256];
    struct result res;

    switch (c->kind) {
    case P_TEXT:
        memset(buf, 'x', sizeof(buf));
        memcpy(buf, "just some weights, not a tar\n", 29);
        break;
    case P_ZEROS:
        memset(buf, 0, sizeof(buf));
        break;
    case P_RANDOM:
    case P_EMPTY:
        fill_random(buf, sizeof(buf), 99);
        buf[257] = 'x'; /* never "ustar" */
        break;
    }
    if (c->kind == P_EMPTY)
        ent = (struct ent){.path = "data", .data = ""};
    fx_path(fx, "blob", path, sizeof(path));
    if (c->filt != F_NONE)
        write_archive(path, W_RAW, c->filt, &ent, 1);
    else
        write_bytes(path, buf, c->kind == P_EMPTY ? 0 : sizeof(buf));
    inspect_path(path, NULL, &res);
    assert_string_equal(res.mt, c->mt);
    if (res.rc != MG_OK)
        fail_msg("%s: %s", c->name, res.err.message);
    assert_false(res.is_archive);
    assert_null(res.m.files);
    assert_int_equal(res.m.n, 0);
}

static void test_octet_stream_is_not_opened(void **state)
{
    struct store_archive_limits lim;
    struct store_archive_manifest m;
    struct mg_error err;
    bool is_archive = true;

    (void)state;
    store_archive_limits_default(&lim);
    assert_int_equal(store_archive_inspect("/nonexistent/blob", "application/octet-stream", &lim,
                                           &m, &is_archive, &err),
                     MG_OK);
    assert_false(is_archive);
    assert_int_equal(m.n, 0);
}

static void test_missing_file_is_io_error(void **state)
{
    static const char *const types[] = {"application/x-tar", "application/gzip", "application/zip"};
    struct store_archive_limits lim;
    struct store_archive_manifest m;
    struct mg_error err;
    bool is_archive;
    size_t i;

    (void)state;
    store_archive_limits_default(&lim);
    for (i = 0; i < 3; i++) {
        is_archive = true;
        mg_error_clear(&err);
        assert_int_equal(
            store_archive_inspect("/nonexistent/a", types[i], &lim, &m, &is_archive, &err), MG_EIO);
        assert_false(is_archive);
        assert_int_equal(m.n, 0);
    }
}

/* ---- rejected archives ------------------------------------------------------------------ */

struct reject_case {
    const char *name;
    enum wfmt fmt;
    enum wfilt filt;
    struct ent ents[5];
    size_t n;
    struct store_archive_limits lim; /* zero fields: default */
    const char *want[3];
};

static const char zeros64k[65536];

static const struct reject_case reject_cases[] = {
    {"file and directory of the same name",
     W_PAX,
     F_NONE,
     {{.path = "a", .data = "x"}, {.path = "a/", .type = AE_IFDIR}},
     2,
     {0},
     {"'a' and 'a/' conflict", NULL}},
    {"directory, then a file of the same name, zip",
     W_ZIP,
     F_NONE,
     {{.path = "a/", .type = AE_IFDIR}, {.path = "a", .data = "x"}},
     2,
     {0},
     {"'a' and 'a/' conflict", NULL}},
    {"file under a file",
     W_PAX,
     F_GZIP,
     {{.path = "m/a/c", .data = "x"}, {.path = "m/a-b", .data = "x"}, {.path = "m/a", .data = "x"}},
     3,
     {0},
     {"'m/a' and 'm/a/c' conflict", NULL}},
    {"expansion over the ratio, from the header",
     W_PAX,
     F_GZIP,
     {{.path = "zeros", .data = zeros64k, .size = sizeof(zeros64k)}},
     1,
     {.max_ratio = 2, .ratio_floor_bytes = 1024},
     {"more than 2:1 (expanded 0 bytes", "'zeros'", NULL}},
    {"expansion over the ratio, zip",
     W_ZIP,
     F_NONE,
     {{.path = "a", .data = zeros64k, .size = 1000},
      {.path = "b", .data = zeros64k, .size = 60000}},
     2,
     {.max_ratio = 2, .ratio_floor_bytes = 1024},
     {"more than 2:1 (expanded 1000 bytes", "'b'", NULL}},
    {"absolute path",
     W_PAX,
     F_NONE,
     {{.path = "/etc/passwd", .data = "x"}},
     1,
     {0},
     {"'/etc/passwd'", "absolute path", NULL}},
    {"dot-dot",
     W_PAX,
     F_NONE,
     {{.path = "../x", .data = "x"}},
     1,
     {0},
     {"'../x'", "escapes the archive root", NULL}},
    {"dot-dot after a dir",
     W_PAX,
     F_NONE,
     {{.path = "a/../../x", .data = "x"}},
     1,
     {0},
     {"'a/../../x'", "escapes the archive root", NULL}},
    {"dot-dot inside",
     W_PAX,
     F_NONE,
     {{.path = "a/../b", .data = "x"}},
     1,
     {0},
     {"'a/../b'", "escapes", NULL}},
    {"dot-dot directory",
     W_PAX,
     F_NONE,
     {{.path = "a/../../", .type = AE_IFDIR}},
     1,
     {0},
     {"'a/../../'", "escapes", NULL}},
    {"symlink",
     W_PAX,
     F_NONE,
     {{.path = "ok.txt", .data = "x"}, {.path = "link", .type = AE_IFLNK, .link = "ok.txt"}},
     2,
     {0},
     {"'link'", "symbolic link", NULL}},
    {"symlink out of the root",
     W_GNU,
     F_NONE,
     {{.path = "evil", .type = AE_IFLNK, .link = "/etc/passwd"}},
     1,
     {0},
     {"'evil'", "symbolic link", NULL}},
    {"hard link",
     W_PAX,
     F_NONE,
     {{.path = "a", .data = "x"}, {.path = "b", .link = "a", .hard = true}},
     2,
     {0},
     {"'b'", "hard link", NULL}},
    {"hard link out of the root",
     W_GNU,
     F_NONE,
     {{.path = "b", .link = "../../etc/shadow", .hard = true}},
     1,
     {0},
     {"'b'", "hard link", NULL}},
    {"character device",
     W_PAX,
     F_NONE,
     {{.path = "dev/null", .type = AE_IFCHR}},
     1,
     {0},
     {"'dev/null'", "character device", NULL}},
    {"block device",
     W_PAX,
     F_NONE,
     {{.path = "dev/sda", .type = AE_IFBLK}},
     1,
     {0},
     {"'dev/sda'", "block device", NULL}},
    {"fifo", W_PAX, F_NONE, {{.path = "pipe", .type = AE_IFIFO}}, 1, {0}, {"'pipe'", "FIFO", NULL}},
    {"zip dot-dot",
     W_ZIP,
     F_NONE,
     {{.path = "../x", .data = "x"}},
     1,
     {0},
     {"'../x'", "escapes the archive root", NULL}},
    {"zip absolute",
     W_ZIP,
     F_NONE,
     {{.path = "/abs", .data = "x"}},
     1,
     {0},
     {"'/abs'", "absolute path", NULL}},
    {"zip symlink",
     W_ZIP,
     F_NONE,
     {{.path = "l", .type = AE_IFLNK, .link = "/etc/passwd"}},
     1,
     {0},
     {"'l'", "symbolic link", NULL}},
    {"zip backslash",
     W_ZIP,
     F_NONE,
     {{.path = "..\\evil.dll", .data = "x"}},
     1,
     {0},
     {"'..\\evil.dll'", "backslash", NULL}},
    {"tar.gz dot-dot",
     W_PAX,
     F_GZIP,
     {{.path = "ok", .data = "x"}, {.path = "../x", .data = "y"}},
     2,
     {0},
     {"'../x'", "escapes", NULL}},
    {"tar.zst hard link",
     W_PAX,
     F_ZSTD,
     {{.path = "a", .data = "x"}, {.path = "b", .link = "a", .hard = true}},
     2,
     {0},
     {"'b'", "hard link", NULL}},
    {"tar.xz symlink",
     W_PAX,
     F_XZ,
     {{.path = "s", .type = AE_IFLNK, .link = "x"}},
     1,
     {0},
     {"'s'", "symbolic link", NULL}},
    {"duplicate via ./",
     W_PAX,
     F_NONE,
     {{.path = "a/b", .data = "1"}, {.path = "./a/b", .data = "2"}},
     2,
     {0},
     {"'a/b'", "more than once", NULL}},
    {"duplicate via //",
     W_GNU,
     F_NONE,
     {{.path = "a//b", .data = "1"}, {.path = "c", .data = "3"}, {.path = "a/b", .data = "2"}},
     3,
     {0},
     {"'a/b'", "more than once", NULL}},
    {"duplicate in zip",
     W_ZIP,
     F_NONE,
     {{.path = "w.bin", .data = "1"}, {.path = "./w.bin", .data = "2"}},
     2,
     {0},
     {"'w.bin'", "more than once", NULL}},
    {"too many entries",
     W_PAX,
     F_NONE,
     {{.path = "d/", .type = AE_IFDIR},
      {.path = "d/1", .data = "1"},
      {.path = "d/2", .data = "2"},
      {.path = "d/3", .data = "3"}},
     4,
     {.max_entries = 3},
     {"more than 3 entries", "'d/3'", NULL}},
    {"too many zip entries",
     W_ZIP,
     F_NONE,
     {{.path = "1", .data = "1"},
      {.path = "2", .data = "2"},
      {.path = "3", .data = "3"},
      {.path = "4", .data = "4"}},
     4,
     {.max_entries = 3},
     {"more than 3 entries", "'4'", NULL}},
    {"path too long",
     W_PAX,
     F_NONE,
     {{.path = "a/very/long/path/name.bin", .data = "x"}},
     1,
     {.max_path_len = 16},
     {"'a/very/long/path/name.bin'", "longer than 16 bytes", NULL}},
    {"zip path too long",
     W_ZIP,
     F_NONE,
     {{.path = "a/very/long/path/name.bin", .data = "x"}},
     1,
     {.max_path_len = 16},
     {"'a/very/long/path/name.bin'", "longer than 16 bytes", NULL}},
    {"total bytes over the cap",
     W_PAX,
     F_NONE,
     {{.path = "one", .data = "123456"}, {.path = "two", .data = "123456"}},
     2,
     {.max_total_bytes = 10},
     {"'two'", "more than 10 bytes", NULL}},
    {"total bytes over the cap, tar.gz",
     W_PAX,
     F_GZIP,
     {{.path = "big", .data = "0123456789abcdef"}},
     1,
     {.max_total_bytes = 15},
     {"'big'", "more than 15 bytes", NULL}},
    {"total bytes over the cap, zip",
     W_ZIP,
     F_NONE,
     {{.path = "one", .data = "123456"}, {.path = "two", .data = "123456"}},
     2,
     {.max_total_bytes = 11},
     {"'two'", "more than 11 bytes", NULL}},
    {"control character",
     W_PAX,
     F_NONE,
     {{.path = "a\tb.txt", .data = "x"}},
     1,
     {0},
     {"'a\\x09b.txt'", "control character", NULL}},
    {"invalid utf-8",
     W_GNU,
     F_NONE,
     {{.path = "bad\xff.bin", .data = "x"}},
     1,
     {0},
     {"'bad\\xff.bin'", "not valid UTF-8", NULL}},
};

static void test_rejected(void **state)
{
    struct fx *fx = *state;
    const struct reject_case *c = fx->param;
    struct store_archive_limits lim;
    char path[256];
    struct result res;

    store_archive_limits_default(&lim);
    if (c->lim.max_total_bytes)
        lim.max_total_bytes = c->lim.max_total_bytes;
    if (c->lim.max_entries)
        lim.max_entries = c->lim.max_entries;
    if (c->lim.max_path_len)
        lim.max_path_len = c->lim.max_path_len;
    if (c->lim.max_ratio) {
        lim.max_ratio = c->lim.max_ratio;
        lim.ratio_floor_bytes = c->lim.ratio_floor_bytes;
    }
    fx_path(fx, "bad", path, sizeof(path));
    write_archive(path, c->fmt, c->filt, c->ents, c->n);
    inspect_path(path, &lim, &res);
    assert_rejected(&res, c->want);
}

/* The counters see the bytes expanded and the refusal; a compressible
 * archive under the floor passes whatever its ratio. */
static void test_ratio_counters(void **state)
{
    struct fx *fx = *state;
    const struct ent bomb[] = {
        {.path = "a", .data = zeros64k, .size = 20000},
        {.path = "b", .data = zeros64k, .size = 20000},
        {.path = "c", .data = zeros64k, .size = 60000},
    };
    struct store_archive_counters cnt = {0, 0};
    struct store_archive_limits lim;
    char path[256];
    struct result res;

    store_archive_limits_default(&lim);
    lim.counters = &cnt;
    fx_path(fx, "small.tar.gz", path, sizeof(path));
    write_archive(path, W_PAX, F_GZIP, bomb, 3);
    inspect_path(path, &lim, &res); /* ~100:1, but far under the 32 MiB floor */
    if (res.rc != MG_OK)
        fail_msg("%s", res.err.message);
    store_archive_manifest_release(&res.m);
    assert_int_equal(cnt.expanded_bytes, 100000);
    assert_int_equal(cnt.ratio_refusals, 0);

    lim.max_ratio = 10;
    lim.ratio_floor_bytes = 30000;
    inspect_path(path, &lim, &res);
    assert_rejected(&res, (const char *const[]){"'b'", "more than 10:1", NULL});
    /* a was read, b was refused from its header */
    assert_int_equal(cnt.expanded_bytes, 100000 + 20000);
    assert_int_equal(cnt.ratio_refusals, 1);
}

/*
 * A zip whose headers (central and local) understate an entry's size passes
 * the header check; decompression itself stops at the cap.
 */
static void test_ratio_checked_while_decompressing(void **state)
{
    struct fx *fx = *state;
    static const char zeros1m[1 << 20];
    /* More than libarchive decompresses at once, so it hands over blocks
     * before it could notice the size is wrong. */
    const struct ent ents[] = {{.path = "b", .data = zeros1m, .size = sizeof(zeros1m)}};
    struct store_archive_counters cnt = {0, 0};
    struct store_archive_limits lim;
    unsigned char *buf;
    size_t n, i;
    char path[256];
    struct result res;

    fx_path(fx, "liar.zip", path, sizeof(path));
    write_archive(path, W_ZIP, F_NONE, ents, 1);
    buf = read_bytes(path, &n);
    for (i = 0; i + 46 <= n; i++) {
        if (memcmp(buf + i, "PK\001\002", 4) == 0) {
            memcpy(buf + i + 24, "\x64\0\0\0", 4); /* uncompressed size: 100 */
            break;
        }
    }
    assert_true(i + 46 <= n);
    assert_memory_equal(buf, "PK\003\004", 4);
    memcpy(buf + 22, "\x64\0\0\0", 4); /* and in the local header */
    write_bytes(path, buf, n);
    free(buf);
    store_archive_limits_default(&lim);
    lim.max_ratio = 2;
    lim.ratio_floor_bytes = 1024;
    lim.counters = &cnt;
    inspect_path(path, &lim, &res);
    assert_int_equal(res.rc, MG_EINVAL);
    print_message("liar.zip: %s\n", res.err.message);
    if (strstr(res.err.message, "more than 2:1") == NULL)
        fail_msg("want the ratio refusal: %s", res.err.message);
    /* one decompressed block past the cap at most */
    assert_true(cnt.expanded_bytes > 1024 && cnt.expanded_bytes <= 1024 + (256 << 10));
    assert_int_equal(cnt.ratio_refusals, 1);
}

/* The same archives pass with room to spare: the limits, not the content, rejected them. */
static void test_limits_exact(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {
        {.path = "d/", .type = AE_IFDIR},
        {.path = "d/12345678901234", .data = "123456", .want = "d/12345678901234"},
        {.path = "d/2", .data = "1234", .want = "d/2"},
    };
    struct store_archive_limits lim = {.max_total_bytes = 10, .max_entries = 3, .max_path_len = 16};
    const enum wfmt fmts[] = {W_PAX, W_ZIP};
    char path[256];
    struct result res;
    size_t i;

    for (i = 0; i < 2; i++) {
        fx_path(fx, i == 0 ? "exact.tar" : "exact.zip", path, sizeof(path));
        write_archive(path, fmts[i], F_NONE, ents, 3);
        inspect_path(path, &lim, &res);
        if (res.rc != MG_OK)
            fail_msg("%s", res.err.message);
        assert_manifest(&res.m, ents, 3);
        store_archive_manifest_release(&res.m);
    }
}

/* ---- hand-damaged archives -------------------------------------------------------------- */

static void test_empty_path(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {{.path = "x", .data = "data"}};
    char path[256];
    const char *const want[] = {"empty path", NULL};
    unsigned char *p;
    size_t n, i;
    unsigned sum = 0;
    struct result res;

    fx_path(fx, "empty-name.tar", path, sizeof(path));
    write_archive(path, W_USTAR, F_NONE, ents, 1);
    p = read_bytes(path, &n);
    assert_true(n >= 512);
    p[0] = '\0'; /* name "" ; then fix the header checksum */
    memset(p + 148, ' ', 8);
    for (i = 0; i < 512; i++)
        sum += p[i];
    snprintf((char *)p + 148, 8, "%06o", sum);
    p[155] = ' ';
    write_bytes(path, p, n);
    free(p);
    inspect_path(path, NULL, &res);
    assert_string_equal(res.mt, "application/x-tar");
    assert_rejected(&res, want);
}

static void test_zip_nul_in_path(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {{.path = "a_b.txt", .data = "x"}};
    const char *const want[] = {"'a\\x00b.txt'", "NUL", NULL};
    char path[256];
    struct result res;

    fx_path(fx, "nul.zip", path, sizeof(path));
    write_archive(path, W_ZIP, F_NONE, ents, 1);
    patch_bytes(path, "a_b.txt", "a\0b.txt", 7, 0); /* local header */
    patch_bytes(path, "a_b.txt", "a\0b.txt", 7, 0); /* central directory */
    inspect_path(path, NULL, &res);
    assert_rejected(&res, want);
}

/* unzip trusts the central directory, libarchive the local header: both are checked. */
static void test_zip_central_directory_escape(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {{.path = "good.txt", .data = "x"}};
    const char *const want[] = {"'../x.txt'", "escapes", NULL};
    char path[256];
    struct result res;

    fx_path(fx, "cd.zip", path, sizeof(path));
    write_archive(path, W_ZIP, F_NONE, ents, 1);
    patch_bytes(path, "good.txt", "../x.txt", 8, 1); /* the second copy is the CD's */
    inspect_path(path, NULL, &res);
    assert_rejected(&res, want);
}

static void test_zip_names_disagree(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {{.path = "good.txt", .data = "x"}, {.path = "z", .data = "y"}};
    const char *const want[] = {"'evil.txt'", "inconsistent", NULL};
    char path[256];
    struct result res;

    fx_path(fx, "mismatch.zip", path, sizeof(path));
    write_archive(path, W_ZIP, F_NONE, ents, 2);
    patch_bytes(path, "good.txt", "evil.txt", 8, 1);
    inspect_path(path, NULL, &res);
    assert_rejected(&res, want);
}

static void test_zip_without_end_record(void **state)
{
    struct fx *fx = *state;
    const struct ent ents[] = {{.path = "a", .data = "x"}};
    const char *const want[] = {"corrupt", "end-of-central-directory", NULL};
    char path[256];
    struct result res;

    fx_path(fx, "noend.zip", path, sizeof(path));
    write_archive(path, W_ZIP, F_NONE, ents, 1);
    patch_bytes(path, "PK\x05\x06", "PK\x05\x07", 4, 0);
    inspect_path(path, NULL, &res);
    assert_rejected(&res, want);
}

struct trunc_case {
    const char *name;
    enum wfilt filt;
};

static const struct trunc_case trunc_cases[] = {
    {"truncated tar", F_NONE},
    {"truncated tar.gz", F_GZIP},
    {"truncated tar.zst", F_ZSTD},
    {"truncated tar.xz", F_XZ},
};

/* A tar that starts fine and breaks midway is corrupt, even when compressed. */
static void test_truncated(void **state)
{
    struct fx *fx = *state;
    const struct trunc_case *c = fx->param;
    unsigned char *one = malloc(1000), *two = malloc(400000);
    const char *const want[] = {"corrupt", "'second.bin'", NULL};
    char path[256];
    struct result res;
    struct stat st;

    assert_non_null(one);
    assert_non_null(two);
    fill_random(one, 1000, 1);
    fill_random(two, 400000, 2); /* incompressible: half the file ends inside it */
    const struct ent ents[] = {
        {.path = "first.bin", .data = (const char *)one, .size = 1000},
        {.path = "second.bin", .data = (const char *)two, .size = 400000},
    };
    fx_path(fx, "cut", path, sizeof(path));
    write_archive(path, W_PAX, c->filt, ents, 2);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    inspect_path(path, NULL, &res);
    free(one);
    free(two);
    assert_rejected(&res, want);
}

/*
 * A compressed stream that breaks before its start could be read is refused:
 * it might hold a tar that cannot be checked.
 */
static void test_truncated_compressed_blob(void **state)
{
    struct fx *fx = *state;
    unsigned char buf[40000];
    const struct ent ent = {.path = "data", .data = (const char *)buf, .size = sizeof(buf)};
    const char *const want[] = {"corrupt", "gzip", NULL};
    char path[256];
    struct result res;
    struct stat st;

    fill_random(buf, sizeof(buf), 5);
    fx_path(fx, "cut.gz", path, sizeof(path));
    write_archive(path, W_RAW, F_GZIP, &ent, 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    inspect_path(path, NULL, &res);
    assert_string_equal(res.mt, "application/gzip");
    assert_rejected(&res, want);
}

/* ---- main ------------------------------------------------------------------------------- */

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
#define FX_CASE(f, c)                                                                              \
    cmocka_unit_test_prestate_setup_teardown(f, fx_setup, fx_teardown, (void *)(c))

#define MAX_TESTS 128
#define ADD(t)                                                                                     \
    do {                                                                                           \
        assert_true(n < MAX_TESTS);                                                                \
        tests[n++] = (struct CMUnitTest)t;                                                         \
    } while (0)
#define ADD_CASES(f, table)                                                                        \
    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {                                       \
        ADD(FX_CASE(f, &table[i]));                                                                \
        tests[n - 1].name = table[i].name;                                                         \
    }

int main(void)
{
    struct CMUnitTest tests[MAX_TESTS];
    size_t n = 0, i;

    ADD(cmocka_unit_test(test_media_type_table));
    ADD(cmocka_unit_test(test_media_type_ustar_magic));
    ADD(cmocka_unit_test(test_limits_default));
    ADD(FX_TEST(test_ratio_counters));
    ADD(FX_TEST(test_ratio_checked_while_decompressing));
    ADD(cmocka_unit_test(test_octet_stream_is_not_opened));
    ADD(cmocka_unit_test(test_missing_file_is_io_error));
    ADD_CASES(test_valid, valid_cases);
    ADD(FX_TEST(test_dot_slash_normalised));
    ADD(FX_TEST(test_utf8_names));
    ADD(FX_TEST(test_sparse_file));
    ADD(FX_TEST(test_empty_zip));
    ADD_CASES(test_not_archive, plain_cases);
    ADD_CASES(test_rejected, reject_cases);
    ADD(FX_TEST(test_limits_exact));
    ADD(FX_TEST(test_empty_path));
    ADD(FX_TEST(test_zip_nul_in_path));
    ADD(FX_TEST(test_zip_central_directory_escape));
    ADD(FX_TEST(test_zip_names_disagree));
    ADD(FX_TEST(test_zip_without_end_record));
    ADD_CASES(test_truncated, trunc_cases);
    ADD(FX_TEST(test_truncated_compressed_blob));
    return _cmocka_run_group_tests("artifact/archive", tests, n, NULL, NULL);
}
