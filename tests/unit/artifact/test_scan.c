/*
 * test_scan.c - artifact/scan.c and scan_formats.c: whole files as the server scans them.
 *
 * - A corpus built by Debian's python3-torch / python3-numpy / python3-onnx
 *   (scan_corpus.py, run with /usr/bin/python3; built, never loaded): every file in
 *   clean/ must scan clean (0 false positives), every file in unsafe/ unsafe.
 * - Findings name the archive member (nested members as "outer!inner"), the rule and the
 *   offset; tensor storages of a torch zip are never read; damaged archives and
 *   truncated pickles are unknown.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include <cmocka.h>

#include "artifact/archive.h"
#include "artifact/scan.h"

#define PY "/usr/bin/python3"

static char corpus[] = "/tmp/mg-scan-corpus-XXXXXX";

static int setup(void **state)
{
    const char *src = getenv("MG_SOURCE_DIR");
    char cmd[8192];

    (void)state;
    if (mkdtemp(corpus) == NULL)
        return -1;
    snprintf(cmd, sizeof(cmd), PY " %s/tests/unit/artifact/scan_corpus.py %s", src ? src : ".",
             corpus);
    if (system(cmd) != 0) {
        fprintf(stderr, "scan_corpus.py failed (needs python3-torch, python3-numpy, "
                        "python3-onnx: scripts/install-deps.sh)\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    char cmd[4096];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", corpus);
    return system(cmd) == 0 ? 0 : -1;
}

/* The server's options: nested zips go through a scratch file. */
static json_t *scan_path(const char *path)
{
    struct art_scan_opts o;
    struct mg_error err = {0};
    json_t *out = NULL;

    art_scan_opts_default(&o);
    o.spill = art_scan_spill_tmp;
    if (art_scan_file(path, &o, &out, &err) != MG_OK)
        fail_msg("%s: scanner failed: %s", path, err.message);
    return out;
}

/* Scan every file of corpus/sub; each must have verdict v. Returns how many. */
static size_t scan_dir(const char *sub, enum art_verdict v)
{
    char dir[4096], path[8192];
    struct dirent *d;
    size_t n = 0, bad = 0;
    DIR *dp;
    json_t *s;

    snprintf(dir, sizeof(dir), "%s/%s", corpus, sub);
    dp = opendir(dir);
    assert_non_null(dp);
    while ((d = readdir(dp)) != NULL) {
        if (d->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
        s = scan_path(path);
        if (art_scan_verdict(s) != v) {
            char *dump = json_dumps(s, JSON_COMPACT);
            print_error("%s/%s: %s (wanted %s)\n", sub, d->d_name, dump ? dump : "?",
                        art_verdict_name(v));
            free(dump);
            bad++;
        }
        assert_string_equal(json_string_value(json_object_get(s, "scanner")), ART_SCANNER);
        json_decref(s);
        n++;
    }
    closedir(dp);
    if (bad)
        fail_msg("%zu of %zu files in %s/ did not scan %s", bad, n, sub, art_verdict_name(v));
    return n;
}

static void test_corpus_clean(void **state)
{
    (void)state;
    size_t n = scan_dir("clean", ART_CLEAN);
    assert_true(n >= 20);
    print_message("%zu benign files: 0 false positives\n", n);
}

static void test_corpus_unsafe(void **state)
{
    (void)state;
    size_t n = scan_dir("unsafe", ART_UNSAFE);
    assert_true(n >= 20);
    print_message("%zu malicious files: all unsafe\n", n);
}

/* The finding of rule `rule` in a scan (or fail). BORROWED. */
static json_t *finding(json_t *s, const char *rule)
{
    json_t *f;
    size_t i;

    json_array_foreach(json_object_get(s, "findings"), i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "rule")), rule) == 0)
            return f;
    }
    fail_msg("no %s finding in %s", rule, json_dumps(s, JSON_COMPACT));
    return NULL;
}

static json_t *scan_corpus_file(const char *rel)
{
    char path[8192];

    snprintf(path, sizeof(path), "%s/%s", corpus, rel);
    return scan_path(path);
}

static void test_findings_name_members(void **state)
{
    json_t *s, *f;

    (void)state;
    s = scan_corpus_file("unsafe/evil_nested.zip");
    f = finding(s, "pickle-import");
    assert_string_equal(json_string_value(json_object_get(f, "member")),
                        "a/b.tar.gz!pytorch_model.bin!archive/data.pkl");
    assert_string_equal(json_string_value(json_object_get(f, "severity")), "high");
    assert_non_null(strstr(json_string_value(json_object_get(f, "detail")), "subprocess.Popen"));
    assert_true(json_integer_value(json_object_get(f, "offset")) > 0);
    json_decref(s);

    s = scan_corpus_file("unsafe/evil_legacy.pt");
    f = finding(s, "pickle-import");
    assert_true(json_is_null(json_object_get(f, "member")));
    assert_non_null(strstr(json_string_value(json_object_get(f, "detail")), "posix.system"));
    json_decref(s);

    s = scan_corpus_file("unsafe/ssti.gguf");
    f = finding(s, "jinja-dunder");
    assert_string_equal(json_string_value(json_object_get(f, "format")), "jinja");
    assert_non_null(
        strstr(json_string_value(json_object_get(f, "detail")), "tokenizer.chat_template"));
    json_decref(s);

    s = scan_corpus_file("unsafe/escape.onnx");
    f = finding(s, "onnx-external-path");
    assert_non_null(strstr(json_string_value(json_object_get(f, "detail")), "../../etc/passwd"));
    json_decref(s);

    s = scan_corpus_file("unsafe/keras_lambda.zip");
    f = finding(s, "keras-lambda");
    assert_string_equal(json_string_value(json_object_get(f, "member")), "config.json");
    json_decref(s);
}

/* A tensor storage that happens to look like a malicious pickle is never read: torch.load
 * reads it as numbers. The same bytes as data.pkl are. */
static void test_torch_storages_skipped(void **state)
{
    static const char evil[] = "\x80\x02\x63os\nsystem\n.";
    char path[4096], raw[4096], cmd[16384];
    json_t *s;
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/storage.zip", corpus);
    snprintf(raw, sizeof(raw), "%s/storage.raw", corpus);
    f = fopen(raw, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(evil, 1, sizeof(evil) - 1, f), sizeof(evil) - 1);
    assert_int_equal(fclose(f), 0);
    snprintf(cmd, sizeof(cmd),
             PY " -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); "
                "z.writestr('archive/data.pkl', bytes([0x80, 2, 0x7d, 0x2e])); "
                "z.write(sys.argv[2], 'archive/data/0'); z.close()\" '%s' '%s'",
             path, raw);
    assert_int_equal(system(cmd), 0);
    s = scan_path(path);
    assert_int_equal(art_scan_verdict(s), ART_CLEAN);
    json_decref(s);
    assert_int_equal(art_scan_pickle(evil, sizeof(evil) - 1, NULL, NULL), ART_UNSAFE);
}

/* A small zip holding a tar.gz that inflates to 64 MiB of zeros: the outer archive passed
 * the upload's ratio cap, the inner one is held to the scanner's budget (32 MiB here). */
static void test_nested_bomb_is_unknown(void **state)
{
    char path[4096], cmd[8192];
    json_t *s, *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/bomb.zip", corpus);
    snprintf(cmd, sizeof(cmd),
             PY " -c \"import io, tarfile, zipfile, sys\n"
                "b = io.BytesIO()\n"
                "with tarfile.open(fileobj=b, mode='w:gz') as t:\n"
                "    i = tarfile.TarInfo('zeros.bin'); i.size = 64 << 20\n"
                "    t.addfile(i, io.BytesIO(bytes(i.size)))\n"
                "with zipfile.ZipFile(sys.argv[1], 'w') as z:\n"
                "    z.writestr('inner.tar.gz', b.getvalue())\n\" '%s'",
             path);
    assert_int_equal(system(cmd), 0);
    s = scan_path(path);
    assert_int_equal(art_scan_verdict(s), ART_UNKNOWN);
    f = finding(s, "archive-cap");
    assert_string_equal(json_string_value(json_object_get(f, "member")), "inner.tar.gz");
    json_decref(s);
}

/* A torch zip inside a tarball whose central directory names a data.pkl hidden inside
 * another entry's bytes: torch.load reads the hidden one (os.system), a stream of local
 * headers shows a harmless one. The scanner reads what torch.load reads; without a scratch
 * file it cannot, and says unknown. */
static void test_nested_zip_read_as_loaders_do(void **state)
{
    char path[4096], cmd[8192];
    struct art_scan_opts o;
    struct mg_error err = {0};
    json_t *s, *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/hidden.tar", corpus);
    snprintf(cmd, sizeof(cmd),
             PY " -c \"import io, struct, sys, tarfile, zlib\n"
                "def local(n, d):\n"
                "    return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0, "
                "zlib.crc32(d), len(d), len(d), len(n), 0) + n + d\n"
                "def central(n, d, off):\n"
                "    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 0, 0, 0, "
                "zlib.crc32(d), len(d), len(d), len(n), 0, 0, 0, 0, 0, off) + n\n"
                "evil = bytes([0x80, 2]) + b'cos\\nsystem\\n.'\n"
                "hidden = local(b'archive/data.pkl', evil)\n"
                "a = local(b'archive/data.pkl', bytes([0x80, 2, 0x7d, 0x2e]))\n"
                "b = local(b'archive/data/0', hidden)\n"
                "cd = central(b'archive/data.pkl', evil, len(a) + 30 + 14) + "
                "central(b'archive/data/0', hidden, len(a))\n"
                "z = a + b + cd + struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 2, 2, len(cd), "
                "len(a) + len(b), 0)\n"
                "with tarfile.open(sys.argv[1], 'w') as t:\n"
                "    i = tarfile.TarInfo('model/pytorch_model.bin'); i.size = len(z)\n"
                "    t.addfile(i, io.BytesIO(z))\n\" '%s'",
             path);
    assert_int_equal(system(cmd), 0);
    s = scan_path(path);
    f = finding(s, "pickle-import");
    assert_string_equal(json_string_value(json_object_get(f, "member")),
                        "model/pytorch_model.bin!archive/data.pkl");
    assert_non_null(strstr(json_string_value(json_object_get(f, "detail")), "os.system"));
    json_decref(s);
    art_scan_opts_default(&o); /* no scratch file */
    assert_int_equal(art_scan_file(path, &o, &s, &err), MG_OK);
    assert_int_equal(art_scan_verdict(s), ART_UNKNOWN);
    (void)finding(s, "archive-cap");
    json_decref(s);
}

static void test_buffers(void **state)
{
    struct mg_error err = {0};
    json_t *s;
    /* a truncated pickle is unknown; safetensors and plain text are clean */
    static const char trunc[] = "\x80\x02}q\x00(X\x01";
    static const char st[] = "\x0e\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{}}";

    (void)state;
    assert_int_equal(art_scan_buffer(trunc, sizeof(trunc) - 1, NULL, NULL, &s, &err), MG_OK);
    assert_int_equal(art_scan_verdict(s), ART_UNKNOWN);
    assert_string_equal(json_string_value(json_object_get(s, "verdict")), "unknown");
    json_decref(s);
    assert_int_equal(art_scan_buffer(st, sizeof(st) - 1, NULL, NULL, &s, &err), MG_OK);
    assert_int_equal(art_scan_verdict(s), ART_CLEAN);
    json_decref(s);
    assert_int_equal(art_scan_buffer("hello world\n", 12, "README.md", NULL, &s, &err), MG_OK);
    assert_int_equal(art_scan_verdict(s), ART_CLEAN);
    json_decref(s);
    /* a text file that is a protocol 0 pickle is read as one */
    assert_int_equal(art_scan_buffer("cos\nsystem\n(S'id'\ntR.", 22, "notes.txt", NULL, &s, &err),
                     MG_OK);
    assert_int_equal(art_scan_verdict(s), ART_UNSAFE);
    json_decref(s);
    /* a damaged archive is unknown */
    assert_int_equal(art_scan_buffer("PK\x03\x04garbage", 11, NULL, NULL, &s, &err), MG_OK);
    assert_int_equal(art_scan_verdict(s), ART_UNKNOWN);
    json_decref(s);
}

/* Compare the walk's report and manifest for path with art_scan_file's and the plain
 * inspection's. Returns false when the walk does not apply (not an archive to the scanner,
 * refused by the inspection, not a tar after all). */
static bool walk_matches(const char *path)
{
    struct store_archive_manifest m = {0}, plain = {0};
    struct art_scan_walk *w = NULL;
    struct art_scan_opts o;
    struct mg_error err = {0};
    uint8_t head[512];
    bool is_archive = false, plain_archive = false;
    json_t *walked = NULL, *filed;
    size_t n, i;
    FILE *f = fopen(path, "rb");

    assert_non_null(f);
    n = fread(head, 1, sizeof(head), f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    if (!art_scan_walks(head, n, (uint64_t)ftell(f))) {
        fclose(f);
        return false;
    }
    art_scan_opts_default(&o);
    o.spill = art_scan_spill_tmp;
    assert_int_equal(art_scan_walk_new(&o, (uint64_t)ftell(f), &w, &err), MG_OK);
    fclose(f);
    if (store_archive_inspect_scan(path, store_media_type_detect(head, n), NULL, w, &m, &is_archive,
                                   &err) != MG_OK ||
        !is_archive) {
        art_scan_walk_free(&w);
        assert_null(w);
        store_archive_manifest_release(&m);
        return false;
    }
    assert_int_equal(art_scan_walk_finish(&w, &walked, &err), MG_OK);
    assert_null(w);
    filed = scan_path(path);
    if (!json_equal(walked, filed)) {
        char *a = json_dumps(walked, JSON_COMPACT), *b = json_dumps(filed, JSON_COMPACT);
        fail_msg("%s: the walk says %s, art_scan_file %s", path, a ? a : "?", b ? b : "?");
    }
    /* the hashes of the tee are those of the plain inspection */
    assert_int_equal(store_archive_inspect(path, store_media_type_detect(head, n), NULL, &plain,
                                           &plain_archive, &err),
                     MG_OK);
    assert_true(plain_archive);
    assert_int_equal(plain.n, m.n);
    for (i = 0; i < m.n; i++) {
        assert_string_equal(plain.files[i].path, m.files[i].path);
        assert_int_equal(plain.files[i].size, m.files[i].size);
        assert_string_equal(plain.files[i].sha256, m.files[i].sha256);
    }
    store_archive_manifest_release(&m);
    store_archive_manifest_release(&plain);
    json_decref(walked);
    json_decref(filed);
    return true;
}

static int spills;

static int count_spill(void *ctx)
{
    spills++;
    return art_scan_spill_tmp(ctx);
}

static int no_spill(void *ctx)
{
    (void)ctx;
    errno = ENOSPC;
    return -1;
}

/* art_scan_file with a counted scratch file; spill_zips: every zip copied whole to it. */
static json_t *scan_spilled(const char *path, bool spill_zips)
{
    struct art_scan_opts o;
    struct mg_error err = {0};
    json_t *out = NULL;

    art_scan_opts_default(&o);
    o.spill = count_spill;
    o.spill_zips = spill_zips;
    if (art_scan_file(path, &o, &out, &err) != MG_OK)
        fail_msg("%s: scanner failed: %s", path, err.message);
    return out;
}

static const json_t *finding_with(const json_t *s, const char *rule, const char *text)
{
    size_t i;
    const json_t *f;

    json_array_foreach(json_object_get(s, "findings"), i, f)
    {
        const char *d = json_string_value(json_object_get(f, "detail"));
        if (strcmp(json_string_value(json_object_get(f, "rule")), rule) == 0 && d &&
            strstr(d, text) != NULL)
            return f;
    }
    return NULL;
}

/* A zip inside a tar.gz is read from the bytes kept as it streams by, never copied to the
 * scratch file, and says what the copy says: every corpus file in a tar.gz, and crafted
 * zips (duplicate names, a cut tail). A central directory that names bytes the local
 * headers do not lead to (a data.pkl hidden in a storage's data) is unknown, as is a
 * pickle over the 16 MiB kept. */
static void test_kept_zip_matches_spill(void **state)
{
    char dir[4096], path[8192], cmd[16384];
    struct dirent *d;
    size_t zips = 0, n = 0;
    DIR *dp;

    (void)state;
    snprintf(
        cmd, sizeof(cmd),
        "cd '%s' && mkdir -p gz && for f in clean/* unsafe/*; do "
        "tar -czf gz/$(dirname $f)_$(basename $f).tar.gz \"$f\"; done && "
        "gzip -c hidden.tar >gz/hidden.tar.gz && " PY
        " -c \"import io, struct, sys, tarfile, zipfile, zlib\n"
        "def local(n, d):\n"
        "    return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0, zlib.crc32(d), "
        "len(d), len(d), len(n), 0) + n + d\n"
        "def central(n, d, off):\n"
        "    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 0, 0, 0, "
        "zlib.crc32(d), len(d), len(d), len(n), 0, 0, 0, 0, 0, off) + n\n"
        "def end(cd, off, k):\n"
        "    return struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, k, k, len(cd), off, 0)\n"
        "def tgz(name, z):\n"
        "    with tarfile.open('gz/' + name + '.tar.gz', 'w:gz') as t:\n"
        "        i = tarfile.TarInfo('m/' + name + '.pt'); i.size = len(z)\n"
        "        t.addfile(i, io.BytesIO(z))\n"
        "evil = bytes([0x80, 2]) + b'cos\\nsystem\\n.'\n"
        "good = bytes([0x80, 2, 0x7d, 0x2e])\n"
        "st = bytes(range(256)) * 400\n"
        "a = local(b'archive/data.pkl', good); b = local(b'archive/data.pkl', evil)\n"
        "cd = central(b'archive/data.pkl', evil, len(a))\n"
        "tgz('dup_names', a + b + cd + end(cd, len(a) + len(b), 1))\n"
        "cd = central(b'archive/data.pkl', good, 0) + central(b'archive/data.pkl', evil, len(a))\n"
        "tgz('dup_names2', a + b + cd + end(cd, len(a) + len(b), 2))\n"
        "h = local(b'archive/data.pkl', evil); d0 = st[:50000] + h + st\n"
        "s = local(b'archive/data/0', d0)\n"
        "cd = central(b'archive/data/0', d0, len(a)) + "
        "central(b'archive/data.pkl', evil, len(a) + 30 + 14 + 50000)\n"
        "tgz('into_storage', a + s + cd + end(cd, len(a) + len(s), 2))\n"
        "s = local(b'archive/data/0', st)\n"
        "cd = central(b'archive/data.pkl', good, 0) + central(b'archive/data/0', st, len(a))\n"
        "tgz('cut_tail', (a + s + cd + end(cd, len(a) + len(s), 2))[:-10])\n"
        "tgz('cut_tail2', (a + s + cd + end(cd, len(a) + len(s), 2))[:-len(cd) - 12])\n"
        "z = io.BytesIO()\n"
        "with zipfile.ZipFile(z, 'w') as w:\n"
        "    w.writestr('archive/data.pkl', bytes([0x80, 4, 0x8e]) + struct.pack('<Q', 65 << 20) "
        "+ bytes(65 << 20) + b'.')\n"
        "    w.writestr('archive/data/0', st)\n"
        "tgz('big_pickle', z.getvalue())\n"
        "d = bytes(range(256)) * 800\n"
        "s = struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 8, 0, 0, 0, 0, 0, 0, 14, 0) + "
        "b'archive/data/0' + d[:1000] + h + d + struct.pack('<IIII', 0x08074b50, "
        "zlib.crc32(d[:1000] + h + d), len(h) + 1000 + len(d), len(h) + 1000 + len(d))\n"
        "cd = central(b'archive/data.pkl', good, 0) + central(b'archive/data/0', d[:1000] + h + "
        "d, len(a)) + central(b'archive/data.pkl', evil, len(a) + 44 + 1000)\n"
        "tgz('descriptor_hidden', a + s + cd + end(cd, len(a) + len(s), 3))\n\" && " PY
        " -c \"import io, sys, tarfile, torch\n"
        "b = io.BytesIO()\n"
        "torch.save({'a': torch.arange(100000.), 'b': torch.ones(70000), 'c': [torch.zeros(3)] * "
        "5, 'd': torch.ones(50000, dtype=torch.float64)}, b)\n"
        "with tarfile.open('gz/torch_big.tar.gz', 'w:gz') as t:\n"
        "    i = tarfile.TarInfo('model.pt'); i.size = len(b.getvalue())\n"
        "    t.addfile(i, io.BytesIO(b.getvalue()))\n\"",
        corpus);
    assert_int_equal(system(cmd), 0);
    snprintf(dir, sizeof(dir), "%s/gz", corpus);
    dp = opendir(dir);
    assert_non_null(dp);
    while ((d = readdir(dp)) != NULL) {
        json_t *kept, *copied;
        int kept_spills;

        if (d->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
        spills = 0;
        kept = scan_spilled(path, false);
        kept_spills = spills;
        spills = 0;
        copied = scan_spilled(path, true);
        /* only a zip with more than 16 MiB to keep goes to the scratch file */
        assert_int_equal(kept_spills, strcmp(d->d_name, "big_pickle.tar.gz") == 0);
        zips += spills > 0;
        n++;
        if (strcmp(d->d_name, "into_storage.tar.gz") == 0) {
            if (art_scan_verdict(copied) != ART_UNSAFE || art_scan_verdict(kept) != ART_UNKNOWN ||
                finding_with(kept, "archive-malformed", "local headers") == NULL) {
                char *x = json_dumps(kept, JSON_COMPACT), *y = json_dumps(copied, JSON_COMPACT);
                fail_msg("%s: kept %s, copied %s", path, x ? x : "?", y ? y : "?");
            }
        } else if (!json_equal(kept, copied)) {
            char *x = json_dumps(kept, JSON_COMPACT), *y = json_dumps(copied, JSON_COMPACT);
            fail_msg("%s: kept %s, copied %s", path, x ? x : "?", y ? y : "?");
        }
        json_decref(kept);
        json_decref(copied);
    }
    closedir(dp);
    print_message("%zu tar.gz files, %zu with zips: the kept bytes say what the copy says\n", n,
                  zips);
    assert_true(zips >= 10);
    {
        /* over the cap with no scratch file: unknown */
        struct art_scan_opts o;
        struct mg_error err = {0};
        json_t *out = NULL;

        snprintf(path, sizeof(path), "%s/gz/big_pickle.tar.gz", corpus);
        art_scan_opts_default(&o);
        o.spill = no_spill;
        assert_int_equal(art_scan_file(path, &o, &out, &err), MG_OK);
        assert_int_equal(art_scan_verdict(out), ART_UNKNOWN);
        assert_non_null(finding_with(out, "archive-cap", "no scratch file"));
        json_decref(out);
        snprintf(path, sizeof(path), "%s/gz/torch_big.tar.gz", corpus);
        assert_int_equal(art_scan_file(path, &o, &out, &err), MG_OK);
        assert_int_equal(art_scan_verdict(out), ART_CLEAN); /* read without one */
        json_decref(out);
    }
}

/* The upload's single pass (the inspection feeding the scan) says what art_scan_file says,
 * for every archive of the corpus and the files the tests above made, and hashes what the
 * inspection alone hashes; a sparse member's holes included. */
static void test_walk_matches_file(void **state)
{
    static const char *const subs[] = {"clean", "unsafe", ".", "gz"};
    char dir[4096], path[8192], cmd[16384];
    struct dirent *d;
    size_t walked = 0, k;
    DIR *dp;

    (void)state;
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && printf 'cos\\nsystem\\n(S.id.\\ntR.' >s.pkl && truncate -s 4M s.pkl && "
             "printf 'tail' >>s.pkl && tar --sparse -cf sparse.tar s.pkl && "
             "tar --sparse --format=posix -czf sparse.tar.gz s.pkl && rm s.pkl && "
             "gzip -c hidden.tar >hidden.tar.gz && tar -czf storage.tar.gz storage.zip",
             corpus);
    assert_int_equal(system(cmd), 0);
    for (k = 0; k < sizeof(subs) / sizeof(subs[0]); k++) {
        snprintf(dir, sizeof(dir), "%s/%s", corpus, subs[k]);
        dp = opendir(dir);
        assert_non_null(dp);
        while ((d = readdir(dp)) != NULL) {
            if (d->d_name[0] == '.' || d->d_type == DT_DIR)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
            walked += walk_matches(path);
        }
        closedir(dp);
    }
    print_message("%zu archives: the walk's reports and hashes equal the separate passes'\n",
                  walked);
    assert_true(walked >= 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_clean),
        cmocka_unit_test(test_corpus_unsafe),
        cmocka_unit_test(test_findings_name_members),
        cmocka_unit_test(test_torch_storages_skipped),
        cmocka_unit_test(test_nested_bomb_is_unknown),
        cmocka_unit_test(test_nested_zip_read_as_loaders_do),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_kept_zip_matches_spill),
        cmocka_unit_test(test_walk_matches_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
