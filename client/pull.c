/*
 * pull.c - `modelgate pull` (download, verify, extract) and `modelgate
 * verify` (offline), both through artifact/sign.c and artifact/archive.c, the same
 * code the server signs and inspects with.
 *
 * pull works in a private staging directory next to DIR (".DIR.pull-XXXXXX",
 * mode 0700): the artifact is streamed there while hashed, its digest must be
 * the version's, the bundle must verify (key, signature, statement naming
 * this model, version and artifact, every file digest), the archive is
 * extracted safely and what was written is verified against the bundle once
 * more. Only then is the tree renamed to DIR. Any mismatch removes the
 * staging directory and leaves DIR as it was.
 */
#include "mgc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../os/file.h"
#include "../base/util.h"
#include "../artifact/archive.h"
#include "../artifact/sign.h"

#define BUNDLE_MAX ((size_t)64 << 20)
#define KEY_MAX ((size_t)64 << 10)
#define SINGLE_FILE_NAME "artifact"

/* ---- resources ---------------------------------------------------------------------------- */

struct resources {
    struct sign_resource *v;
    size_t n;
    char **names; /* owned copies of v[i].name */
};

static void resources_release(struct resources *r)
{
    size_t i;

    for (i = 0; r->names && i < r->n; i++)
        free(r->names[i]);
    free(r->names);
    free(r->v);
    memset(r, 0, sizeof(*r));
}

/* One entry per manifest file (already sorted), or "." for a single file. */
static int resources_from_manifest(const struct store_archive_manifest *m, struct resources *r)
{
    size_t i;

    memset(r, 0, sizeof(*r));
    r->v = calloc(m->n ? m->n : 1, sizeof(*r->v));
    r->names = calloc(m->n ? m->n : 1, sizeof(*r->names));
    if (r->v == NULL || r->names == NULL)
        return mgc_fail("out of memory");
    for (i = 0; i < m->n; i++) {
        if ((r->names[i] = strdup(m->files[i].path)) == NULL)
            return mgc_fail("out of memory");
        r->n = i + 1;
        r->v[i].name = r->names[i];
        if (!mg_hex_decode(m->files[i].sha256, 32, r->v[i].digest))
            return mgc_fail("bad digest in the manifest");
    }
    return MGC_OK;
}

static int resources_single(const char *hex, struct resources *r)
{
    memset(r, 0, sizeof(*r));
    r->v = calloc(1, sizeof(*r->v));
    r->names = calloc(1, sizeof(*r->names));
    if (r->v == NULL || r->names == NULL || (r->names[0] = strdup(".")) == NULL)
        return mgc_fail("out of memory");
    r->n = 1;
    r->v[0].name = r->names[0];
    if (!mg_hex_decode(hex, 32, r->v[0].digest))
        return mgc_fail("bad digest");
    return MGC_OK;
}

/* The media type of a file from its first bytes. */
static const char *detect_fd(int fd)
{
    uint8_t head[512];
    ssize_t n = pread(fd, head, sizeof(head), 0);

    return store_media_type_detect(head, n > 0 ? (size_t)n : 0);
}

/*
 * What a file artifact signs: its archive manifest, or "." and its digest.
 * *is_archive says which; media_type is set for archives.
 */
static int resources_of_file(const char *path, int fd, uint32_t max_ratio, struct resources *r,
                             bool *is_archive, const char **media_type)
{
    struct store_archive_manifest m;
    struct store_archive_limits lim;
    struct mg_error err;
    char hex[65];
    uint64_t size;
    int rc;

    *media_type = detect_fd(fd);
    memset(&err, 0, sizeof(err));
    store_archive_limits_default(&lim);
    lim.max_ratio = max_ratio;
    if (store_archive_inspect(path, *media_type, &lim, &m, is_archive, &err) != MG_OK)
        return mgc_fail("'%s': %s", path, err.message);
    if (*is_archive) {
        rc = resources_from_manifest(&m, r);
        store_archive_manifest_release(&m);
        return rc;
    }
    memset(&err, 0, sizeof(err));
    if (mg_file_sha256(path, hex, &size, &err) != MG_OK)
        return mgc_fail("%s", err.message);
    return resources_single(hex, r);
}

/* What an extracted directory holds: every regular file, sorted, hashed. */
static int resources_of_dir(const char *root, struct resources *r)
{
    struct mgc_tree t;
    struct mg_error err;
    char path[PATH_MAX], hex[65];
    uint64_t size;
    size_t i, k = 0;
    int rc;

    memset(r, 0, sizeof(*r));
    if ((rc = mgc_tree_scan(root, &t)) != MGC_OK)
        return rc;
    r->v = calloc(t.n ? t.n : 1, sizeof(*r->v));
    r->names = calloc(t.n ? t.n : 1, sizeof(*r->names));
    if (r->v == NULL || r->names == NULL) {
        rc = mgc_fail("out of memory");
        goto out;
    }
    for (i = 0; i < t.n; i++) {
        if (t.v[i].dir)
            continue;
        snprintf(path, sizeof(path), "%s/%s", root, t.v[i].path);
        memset(&err, 0, sizeof(err));
        if (mg_file_sha256(path, hex, &size, &err) != MG_OK) {
            rc = mgc_fail("%s", err.message);
            goto out;
        }
        r->names[k] = t.v[i].path;
        t.v[i].path = NULL; /* moved */
        r->v[k].name = r->names[k];
        mg_hex_decode(hex, 32, r->v[k].digest);
        r->n = ++k;
    }
    rc = MGC_OK;
out:
    mgc_tree_release(&t);
    return rc;
}

/* ---- keys and bundles --------------------------------------------------------------------- */

static int load_key_file(const char *path, struct sign_key *key)
{
    struct mg_error err;
    size_t len;
    char *pem = mgc_read_file(path, KEY_MAX, &len);
    enum mg_code rc;

    if (pem == NULL)
        return MGC_ERR;
    memset(&err, 0, sizeof(err));
    rc = sign_key_from_public_pem(pem, len, key, &err);
    free(pem);
    if (rc != MG_OK)
        return mgc_fail("'%s': %s", path, err.message);
    return MGC_OK;
}

/* The hint the bundle names (malloc'd), for picking the server's key. */
static char *bundle_hint(const char *bundle, size_t len)
{
    json_t *b = json_loadb(bundle, len, 0, NULL); /* NEW */
    const char *h = mgc_str(
        json_object_get(json_object_get(b, "verificationMaterial"), "publicKey"), "hint", NULL);
    char *out = h ? strdup(h) : NULL;

    json_decref(b);
    return out;
}

/* The server's published key whose hint the bundle names. */
static int fetch_key(struct mgc *c, const char *hint, struct sign_key *key)
{
    json_t *keys = NULL, *k; /* NEW, BORROWED */
    struct mg_error err;
    const char *pem;
    size_t i;
    int rc;

    if ((rc = mgc_call(c, "GET", "/api/v1/signing-keys", NULL, &keys)) != MGC_OK)
        return rc;
    rc = MGC_ERR;
    json_array_foreach(json_object_get(keys, "items"), i, k)
    {
        pem = mgc_str(k, "public_key_pem", NULL);
        if (pem == NULL || sign_key_from_public_pem(pem, strlen(pem), key, &err) != MG_OK)
            continue;
        if (hint != NULL && strcmp(key->hint, hint) == 0) {
            rc = MGC_OK;
            break;
        }
        sign_key_release(key);
    }
    json_decref(keys);
    if (rc != MGC_OK)
        return mgc_fail("the server publishes no key with hint %s; the bundle was not signed by "
                        "this server",
                        hint ? hint : "(none)");
    return MGC_OK;
}

/* Verify and, when want_* are given, check the statement names what was asked for. */
static int verify_bundle(const char *bundle, size_t len, const struct sign_key *key,
                         const struct resources *r, const char *want_model, int64_t want_version,
                         const char *want_artifact, json_t **statement)
{
    struct mg_error err;
    json_t *st = NULL, *meta; /* NEW, BORROWED */
    char subject[128];
    const char *s;

    memset(&err, 0, sizeof(err));
    if (sign_bundle_verify(bundle, len, key, r->v, r->n, &st, &err) != MG_OK)
        return mgc_fail("signature verification failed: %s", err.message);
    if (want_model != NULL) {
        meta = json_object_get(json_object_get(st, "predicate"), "modelgate");
        snprintf(subject, sizeof(subject), "%s-v%lld", want_model, (long long)want_version);
        s = mgc_str(json_array_get(json_object_get(st, "subject"), 0), "name", "");
        if (strcmp(s, subject) != 0 || strcmp(mgc_str(meta, "model", ""), want_model) != 0 ||
            json_integer_value(json_object_get(meta, "version")) != want_version ||
            strcmp(mgc_str(meta, "artifact", ""), want_artifact) != 0) {
            json_decref(st);
            return mgc_fail("signature verification failed: the bundle is for '%s' (artifact "
                            "%s), not %s v%lld (%s)",
                            s, mgc_str(meta, "artifact", "?"), want_model, (long long)want_version,
                            want_artifact);
        }
    }
    if (statement != NULL)
        *statement = st;
    else
        json_decref(st);
    return MGC_OK;
}

/* ---- pull --------------------------------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void remove_tree(const char *path)
{
    (void)nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* DIR must not exist, or be a directory (rename replaces an empty one; a full one must
 * already hold the version: *full says so). */
static int check_target(const char *dir, bool *full)
{
    struct stat st;
    struct dirent *d;
    DIR *dh;
    bool empty = true;

    *full = false;
    if (lstat(dir, &st) != 0)
        return errno == ENOENT ? MGC_OK : mgc_fail("cannot use '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return mgc_fail("'%s' exists and is not a directory; choose another -o", dir);
    if ((dh = opendir(dir)) == NULL)
        return mgc_fail("cannot read '%s': %s", dir, strerror(errno));
    while (empty && (d = readdir(dh)) != NULL)
        empty = strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0;
    closedir(dh);
    *full = !empty;
    return MGC_OK;
}

/* Which version N|@alias names: @alias → the route with the most weight (newest on a tie). */
static int resolve_version(struct mgc *c, const char *model, const char *spec, int64_t *n)
{
    json_t *al = NULL, *r; /* NEW, BORROWED */
    int64_t best = 0, best_w = -1, v, w;
    char path[200];
    size_t i;
    int rc;

    if (spec[0] != '@') {
        if (!mgc_parse_int(c, "the version", spec, 1, INT64_MAX, n))
            return MGC_USAGE;
        return MGC_OK;
    }
    if (!mgc_check_alias(c, spec + 1))
        return MGC_USAGE;
    snprintf(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, spec + 1);
    if ((rc = mgc_call(c, "GET", path, NULL, &al)) != MGC_OK)
        return rc;
    json_array_foreach(json_object_get(al, "routes"), i, r)
    {
        v = json_integer_value(json_object_get(r, "version"));
        w = json_integer_value(json_object_get(r, "weight"));
        if (w > best_w || (w == best_w && v > best)) {
            best = v;
            best_w = w;
        }
    }
    json_decref(al);
    if (best < 1)
        return mgc_fail("alias %s of %s routes to no version", spec + 1, model);
    *n = best;
    return MGC_OK;
}

/* Make the staging directory next to dir: "<parent>/.<base>.pull-XXXXXX". */
/* Create path's missing directories, each 0755 (less the umask), like mkdir -p. */
static int make_parents(const char *path)
{
    char p[PATH_MAX];
    size_t i;

    if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p))
        return mgc_fail("'%s' is too long", path);
    for (i = 1; p[i] != '\0'; i++) {
        if (p[i] != '/')
            continue;
        p[i] = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return mgc_fail("cannot create '%s': %s", p, strerror(errno));
        p[i] = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return mgc_fail("cannot create '%s': %s", p, strerror(errno));
    return MGC_OK;
}

static int make_staging(const char *dir, char out[PATH_MAX])
{
    char a[PATH_MAX], b[PATH_MAX];
    const char *parent, *base;

    snprintf(a, sizeof(a), "%s", dir);
    snprintf(b, sizeof(b), "%s", dir);
    parent = dirname(a);
    base = basename(b);
    if (strcmp(base, "/") == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return mgc_fail("'%s' cannot be the output directory; name a new one", dir);
    if (snprintf(out, PATH_MAX, "%s/.%s.pull-XXXXXX", parent, base) >= PATH_MAX)
        return mgc_fail("'%s' is too long", dir);
    if (make_parents(parent) != MGC_OK) /* -o /srv/models/fraud-v3 on a fresh host */
        return MGC_ERR;
    if (mkdtemp(out) == NULL)
        return mgc_fail("cannot create a staging directory next to '%s': %s", dir, strerror(errno));
    return MGC_OK;
}

struct pull {
    const char *model;
    int64_t n;
    const char *dir;
    char stage[PATH_MAX]; /* staging directory, "" until made */
    char blob[PATH_MAX + 16], tree[PATH_MAX + 16];
    json_t *version; /* NEW */
    char *bundle;    /* malloc'd bundle text */
    size_t bundle_len;
    struct sign_key key;
    size_t files;
    uint32_t max_ratio; /* --max-archive-ratio */
};

/* --max-archive-ratio N (default STORE_ARCHIVE_MAX_RATIO); false when malformed. */
static bool parse_ratio(const struct mgc_args *a, uint32_t *out)
{
    const char *s = mgc_opt(a, "max-archive-ratio");
    int64_t v = STORE_ARCHIVE_MAX_RATIO;

    if (s != NULL && !mg_parse_i64(s, 0, 1000000, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

/* Room left for slack: file system blocks, directories, metadata. */
#define FREE_MARGIN(n) ((n) / 100 + ((uint64_t)4 << 20))

/* Refuse before writing `need` bytes under `dir` when its file system has
 * less free space (for unprivileged users) than that plus a margin. */
static int check_free_space(const char *dir, uint64_t need, const char *what)
{
    struct statvfs sv;
    uint64_t avail, want;

    if (statvfs(dir, &sv) != 0)
        return mgc_fail("cannot check the free space of '%s': %s", dir, strerror(errno));
    avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    want = need > UINT64_MAX - FREE_MARGIN(need) ? UINT64_MAX : need + FREE_MARGIN(need);
    if (avail < want)
        return mgc_fail("not enough free space to %s: it needs %llu bytes (%.1f MiB) plus a "
                        "margin, and the file system of '%s' has %llu bytes (%.1f MiB) free; "
                        "free some space or pull elsewhere",
                        what, (unsigned long long)need, (double)need / 1048576.0, dir,
                        (unsigned long long)avail, (double)avail / 1048576.0);
    return MGC_OK;
}

/* Download the bundle (capped) into p->bundle. */
static int fetch_bundle(struct mgc *c, struct pull *p)
{
    struct mgc_reply rep;
    char path[200];
    int rc;

    snprintf(path, sizeof(path), "/api/v1/models/%s/versions/%lld/signature", p->model,
             (long long)p->n);
    rc = mgc_http_json(c, "GET", path, NULL, &rep);
    if (rc != MGC_OK || rep.http != 200 || rep.body == NULL) {
        rc = mgc_reply_fail(&rep, "cannot fetch the signature");
        mgc_reply_release(&rep);
        return rc;
    }
    /* Re-encoding is fine: only the payload's bytes are signed, and it is a string. */
    p->bundle = json_dumps(rep.body, JSON_COMPACT);
    mgc_reply_release(&rep);
    if (p->bundle == NULL)
        return mgc_fail("out of memory");
    p->bundle_len = strlen(p->bundle);
    return MGC_OK;
}

/* Stream the artifact into the staging directory and check its digest and size. */
static int fetch_artifact(struct mgc *c, struct pull *p, int *fd_out)
{
    json_t *art = json_object_get(p->version, "artifact"); /* BORROWED */
    const char *digest = mgc_str(art, "digest", "");
    json_int_t size = json_integer_value(json_object_get(art, "size"));
    char path[200], hex[65], got[72];
    uint64_t n = 0;
    int fd, rc;

    if (!mg_valid_digest(digest, strlen(digest)) || size < 0)
        return mgc_fail("the server's version record has no valid artifact digest");
    if ((rc = check_free_space(p->stage, (uint64_t)size, "download the artifact")) != MGC_OK)
        return rc;
    fd = open(p->blob, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return mgc_fail("cannot create '%s': %s", p->blob, strerror(errno));
    snprintf(path, sizeof(path), "/api/v1/models/%s/versions/%lld/artifact", p->model,
             (long long)p->n);
    rc = mgc_http_download(c, path, fd, (uint64_t)size, "downloading", hex, &n);
    if (rc == MGC_OK) {
        snprintf(got, sizeof(got), "sha256:%s", hex);
        if (strcmp(got, digest) != 0 || n != (uint64_t)size)
            rc = mgc_fail("the artifact does not match its digest: got %s (%llu bytes), the "
                          "version records %s (%lld bytes); refusing it",
                          got, (unsigned long long)n, digest, (long long)size);
    }
    if (rc != MGC_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return MGC_OK;
}

/*
 * Unpack the verified-digest blob under p->tree and verify the bundle against
 * what was written: for an archive (the version lists files) the manifest of
 * the bytes extraction wrote; for a single file "." and the digest the
 * download computed.
 */
static int verify_and_unpack(struct pull *p, int fd)
{
    json_t *art = json_object_get(p->version, "artifact"); /* BORROWED */
    const char *digest = mgc_str(art, "digest", "");
    struct resources r = {0};
    struct store_archive_manifest m = {NULL, 0};
    struct store_archive_limits lim;
    struct mg_error err;
    char file[PATH_MAX + 32];
    bool is_archive = false;
    int rc;

    if (mkdir(p->tree, 0755) != 0)
        return mgc_fail("cannot create '%s': %s", p->tree, strerror(errno));
    if (json_is_null(json_object_get(art, "files")) || json_object_get(art, "files") == NULL) {
        if ((rc = resources_single(digest + 7, &r)) != MGC_OK ||
            (rc = verify_bundle(p->bundle, p->bundle_len, &p->key, &r, p->model, p->n, digest,
                                NULL)) != MGC_OK)
            goto out;
        snprintf(file, sizeof(file), "%s/" SINGLE_FILE_NAME, p->tree);
        if (fchmod(fd, 0644) != 0 || rename(p->blob, file) != 0) {
            rc = mgc_fail("cannot move the artifact into place: %s", strerror(errno));
            goto out;
        }
        p->files = 1;
        goto out;
    }
    /* Read the archive and check the bundle against what it holds before
     * anything is written, then write no more bytes than were signed: a
     * server that lies cannot fill the disk. The tree written is checked
     * against the bundle once more below. */
    memset(&err, 0, sizeof(err));
    store_archive_limits_default(&lim);
    lim.max_ratio = p->max_ratio;
    if (store_archive_inspect(p->blob, detect_fd(fd), &lim, &m, &is_archive, &err) != MG_OK ||
        !is_archive) {
        rc = mgc_fail("cannot read the artifact as an archive: %s",
                      err.message[0] ? err.message : "not an archive");
        goto out;
    }
    if ((rc = resources_from_manifest(&m, &r)) != MGC_OK ||
        (rc = verify_bundle(p->bundle, p->bundle_len, &p->key, &r, p->model, p->n, digest, NULL)) !=
            MGC_OK)
        goto out;
    lim.max_total_bytes = 0;
    for (size_t i = 0; i < m.n; i++)
        lim.max_total_bytes += m.files[i].size;
    store_archive_manifest_release(&m);
    resources_release(&r);
    if ((rc = check_free_space(p->tree, lim.max_total_bytes, "extract the artifact")) != MGC_OK)
        goto out;
    if (store_archive_extract(p->blob, detect_fd(fd), p->tree, &lim, &m, &err) != MG_OK) {
        rc = mgc_fail("cannot extract the artifact: %s", err.message);
        goto out;
    }
    if ((rc = resources_from_manifest(&m, &r)) != MGC_OK ||
        (rc = verify_bundle(p->bundle, p->bundle_len, &p->key, &r, p->model, p->n, digest, NULL)) !=
            MGC_OK)
        goto out;
    p->files = m.n;
out:
    store_archive_manifest_release(&m);
    resources_release(&r);
    return rc;
}

/* The server's safety scan (docs/contract.md "Artifact safety scan"): only "clean" is pulled
 * without
 * --allow-unsafe; before anything is downloaded. */
static int check_scan(const struct pull *p, bool allow_unsafe)
{
    const json_t *scan = json_object_get(p->version, "scan");
    const char *v = json_string_value(json_object_get(scan, "verdict"));
    const json_t *f = json_array_get(json_object_get(scan, "findings"), 0);
    const char *member = json_string_value(json_object_get(f, "member"));
    const char *detail = json_string_value(json_object_get(f, "detail"));

    if (v != NULL && strcmp(v, "clean") == 0)
        return MGC_OK;
    if (allow_unsafe) {
        fprintf(stderr,
                "modelgate: warning: %s v%lld is not clean (%s); pulling it because of "
                "--allow-unsafe\n",
                p->model, (long long)p->n, v ? v : "never scanned");
        return MGC_OK;
    }
    if (v == NULL)
        return mgc_fail("%s v%lld was never scanned by the server's safety scan; ask an admin "
                        "to rescan its artifact, or pass --allow-unsafe",
                        p->model, (long long)p->n);
    return mgc_fail("%s v%lld's artifact scanned %s%s%s%s%s; loading it could run code. Pass "
                    "--allow-unsafe to pull it anyway",
                    p->model, (long long)p->n, v, detail ? ": " : "", member ? member : "",
                    member ? ": " : "", detail ? detail : "");
}

/*
 * Does DIR (not empty) already hold exactly the version: every regular file and nothing
 * more, as the bundle signs them (a single-file artifact as DIR/artifact)? Checked with the
 * same key and statement as a download, and quietly: false means "not this version".
 */
static bool holds_version(const struct pull *p, const char *digest)
{
    struct resources r = {0};
    struct mg_error err;
    json_t *st = NULL, *meta; /* NEW, BORROWED */
    char subject[128], path[PATH_MAX + 16], hex[65];
    uint64_t size;
    bool ok = false;

    if (resources_of_dir(p->dir, &r) != MGC_OK)
        return false;
    /* A single-file artifact signs "." (its bytes), written as DIR/artifact. */
    if (r.n == 1 && strcmp(r.v[0].name, SINGLE_FILE_NAME) == 0) {
        resources_release(&r);
        snprintf(path, sizeof(path), "%s/" SINGLE_FILE_NAME, p->dir);
        memset(&err, 0, sizeof(err));
        if (mg_file_sha256(path, hex, &size, &err) != MG_OK || resources_single(hex, &r) != MGC_OK)
            goto out;
    }
    memset(&err, 0, sizeof(err));
    if (sign_bundle_verify(p->bundle, p->bundle_len, &p->key, r.v, r.n, &st, &err) != MG_OK)
        goto out;
    meta = json_object_get(json_object_get(st, "predicate"), "modelgate");
    snprintf(subject, sizeof(subject), "%s-v%lld", p->model, (long long)p->n);
    ok = strcmp(mgc_str(json_array_get(json_object_get(st, "subject"), 0), "name", ""), subject) ==
             0 &&
         strcmp(mgc_str(meta, "model", ""), p->model) == 0 &&
         json_integer_value(json_object_get(meta, "version")) == p->n &&
         strcmp(mgc_str(meta, "artifact", ""), digest) == 0;
out:
    json_decref(st);
    resources_release(&r);
    return ok;
}

int mgc_cmd_pull(struct mgc *c, const struct mgc_args *a)
{
    struct pull p;
    const char *keyfile = mgc_opt(a, "key");
    char vpath[200], *hint = NULL;
    bool full;
    int fd = -1, rc;

    memset(&p, 0, sizeof(p));
    p.model = a->pos[0];
    p.dir = mgc_opt(a, "output");
    if (!parse_ratio(a, &p.max_ratio))
        return mgc_usage(c, "--max-archive-ratio is an integer from 0 (no cap) to 1000000");
    if (!mgc_check_model(c, p.model))
        return MGC_USAGE;
    if (p.dir == NULL || p.dir[0] == '\0')
        return mgc_usage(c, "give the output directory with -o DIR");
    if ((rc = check_target(p.dir, &full)) != MGC_OK)
        return rc;
    if (keyfile != NULL && (rc = load_key_file(keyfile, &p.key)) != MGC_OK)
        return rc;
    if ((rc = mgc_connect(c)) != MGC_OK ||
        (rc = resolve_version(c, p.model, a->pos[1], &p.n)) != MGC_OK)
        goto out;
    snprintf(vpath, sizeof(vpath), "/api/v1/models/%s/versions/%lld", p.model, (long long)p.n);
    if ((rc = mgc_call(c, "GET", vpath, NULL, &p.version)) != MGC_OK ||
        (rc = check_scan(&p, mgc_flag(a, "allow-unsafe"))) != MGC_OK ||
        (rc = fetch_bundle(c, &p)) != MGC_OK)
        goto out;
    if (keyfile == NULL) {
        hint = bundle_hint(p.bundle, p.bundle_len);
        if ((rc = fetch_key(c, hint, &p.key)) != MGC_OK)
            goto out;
    }
    if (full) {
        /* Pulled before (a re-run job): fine when DIR holds exactly this version, verified. */
        const char *digest = mgc_str(json_object_get(p.version, "artifact"), "digest", "");

        if (!holds_version(&p, digest)) {
            rc = mgc_fail("'%s' is not empty and does not hold %s v%lld as signed; pull into a "
                          "new or empty directory",
                          p.dir, p.model, (long long)p.n);
            goto out;
        }
        if (c->json) {
            json_t *o = json_pack("{s:s, s:I, s:s, s:O, s:b, s:s}", "model", p.model, "version",
                                  (json_int_t)p.n, "dir", p.dir, "artifact",
                                  json_object_get(p.version, "artifact"), "unchanged", 1, "keyid",
                                  p.key.keyid);
            rc = o ? mgc_print_json(o) : mgc_fail("out of memory");
            json_decref(o);
        } else {
            printf("%s already holds %s v%lld, verified (key %.16s...); nothing downloaded\n",
                   p.dir, p.model, (long long)p.n, p.key.keyid);
        }
        goto out;
    }
    if ((rc = make_staging(p.dir, p.stage)) != MGC_OK) {
        p.stage[0] = '\0';
        goto out;
    }
    snprintf(p.blob, sizeof(p.blob), "%s/blob", p.stage);
    snprintf(p.tree, sizeof(p.tree), "%s/tree", p.stage);
    if ((rc = fetch_artifact(c, &p, &fd)) != MGC_OK || (rc = verify_and_unpack(&p, fd)) != MGC_OK)
        goto out;
    if (rename(p.tree, p.dir) != 0) {
        rc = mgc_fail("cannot move the verified model to '%s': %s", p.dir, strerror(errno));
        goto out;
    }
    if (c->json) {
        json_t *o = json_pack("{s:s, s:I, s:s, s:O, s:I, s:s}", "model", p.model, "version",
                              (json_int_t)p.n, "dir", p.dir, "artifact",
                              json_object_get(p.version, "artifact"), "files", (json_int_t)p.files,
                              "keyid", p.key.keyid);
        rc = o ? mgc_print_json(o) : mgc_fail("out of memory");
        json_decref(o);
    } else {
        printf("pulled %s v%lld into %s: %zu file%s verified (key %.16s...)\n", p.model,
               (long long)p.n, p.dir, p.files, p.files == 1 ? "" : "s", p.key.keyid);
    }
out:
    if (fd >= 0)
        close(fd);
    if (p.stage[0] != '\0')
        remove_tree(p.stage);
    free(hint);
    free(p.bundle);
    json_decref(p.version);
    sign_key_release(&p.key);
    return rc;
}

/* ---- verify -------------------------------------------------------------------------------
 */

int mgc_cmd_verify(struct mgc *c, const struct mgc_args *a)
{
    const char *bundle_path = a->pos[0], *target = a->npos > 1 ? a->pos[1] : NULL;
    const char *keyfile = mgc_opt(a, "key"), *media;
    struct sign_key key;
    struct resources r = {0};
    json_t *st = NULL, *meta; /* NEW, BORROWED */
    struct stat sb;
    size_t len;
    char *bundle = NULL;
    bool is_archive;
    uint32_t max_ratio;
    int fd, rc;

    memset(&key, 0, sizeof(key));
    if (!parse_ratio(a, &max_ratio))
        return mgc_usage(c, "--max-archive-ratio is an integer from 0 (no cap) to 1000000");
    if (keyfile == NULL)
        return mgc_usage(c, "verify needs --key pub.pem (it never asks a server)");
    if (target == NULL)
        return mgc_usage(c, "give the model PATH to check the bundle against");
    if ((rc = load_key_file(keyfile, &key)) != MGC_OK)
        return rc;
    if ((bundle = mgc_read_file(bundle_path, BUNDLE_MAX, &len)) == NULL) {
        rc = MGC_ERR;
        goto out;
    }
    if (stat(target, &sb) != 0) {
        rc = mgc_fail("cannot read '%s': %s", target, strerror(errno));
        goto out;
    }
    if (S_ISDIR(sb.st_mode)) {
        rc = resources_of_dir(target, &r);
    } else {
        fd = open(target, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = mgc_fail("cannot open '%s': %s", target, strerror(errno));
            goto out;
        }
        rc = resources_of_file(target, fd, max_ratio, &r, &is_archive, &media);
        close(fd);
    }
    if (rc != MGC_OK || (rc = verify_bundle(bundle, len, &key, &r, NULL, 0, NULL, &st)) != MGC_OK)
        goto out;
    meta = json_object_get(json_object_get(st, "predicate"), "modelgate");
    if (c->json) {
        json_t *o = json_pack("{s:b, s:O, s:s, s:I, s:O}", "verified", 1, "subject",
                              json_object_get(st, "subject"), "keyid", key.keyid, "files",
                              (json_int_t)r.n, "modelgate", meta ? meta : json_null());
        rc = o ? mgc_print_json(o) : mgc_fail("out of memory");
        json_decref(o);
    } else {
        printf("verified %s: %zu file%s signed by key %.16s... (%s v%lld, artifact %s)\n",
               mgc_str(json_array_get(json_object_get(st, "subject"), 0), "name", "?"), r.n,
               r.n == 1 ? "" : "s", key.keyid, mgc_str(meta, "model", "?"),
               (long long)json_integer_value(json_object_get(meta, "version")),
               mgc_str(meta, "artifact", "?"));
    }
out:
    json_decref(st);
    resources_release(&r);
    free(bundle);
    sign_key_release(&key);
    return rc;
}
