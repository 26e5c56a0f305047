/*
 * keys.c - the server's signing keys (see sign.h): <data-dir>/keys/<keyid>.pem (PKCS#8,
 * 0600) and "active". Every file is written whole or not at all (os/file.c), so a crash
 * leaves either the old state or the new one.
 */
#include "sign.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "../os/file.h"
#include "../base/util.h"

#define SIGN_MEDIA_TYPE "application/vnd.dev.sigstore.bundle.v0.3+json"
#define SIGN_PAYLOAD_TYPE "application/vnd.in-toto+json"
#define SIGN_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define SIGN_PREDICATE_TYPE "https://model_signing/signature/v1.0"
#define SIGN_ALGORITHM "ecdsa-p256-sha256"

#define SIGN_BUNDLE_MAX ((size_t)64 << 20) /* bigger is not a bundle we wrote */
#define SIGN_KEY_FILE_MAX ((size_t)64 << 10)
#define SIGN_ACTIVE_MAX 128
#define SIGN_MAX_KEYS 4096
#define SIGN_MAX_SIGNATURES 16

/* ---- small helpers ---------------------------------------------------- */

/* Never prompt on a terminal for an encrypted key: refuse it instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

static enum mg_code path_join(char out[PATH_MAX], const char *dir, const char *name,
                              struct mg_error *err)
{
    int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);

    if (n < 0 || n >= PATH_MAX)
        return mg_fail(err, MG_EINVAL, NULL, "path %s/%s is too long", dir, name);
    return MG_OK;
}

/* Write dir/name atomically, mode 0600 (os/file.c): the temp name starts with '.' and
 * does not end in ".pem", so a leftover is never loaded as a key. */
static enum mg_code write_file_atomic(const char *dir, const char *name, const void *data, size_t n,
                                      struct mg_error *err)
{
    char final[PATH_MAX];
    enum mg_code rc;

    if ((rc = path_join(final, dir, name, err)) != MG_OK)
        return rc;
    return mg_file_write_atomic(final, data, n, 0600, err);
}

/* Read a whole small file from an open descriptor (st from fstat). */
static enum mg_code read_fd(int fd, const struct stat *st, size_t max, const char *path, char **out,
                            size_t *out_len, struct mg_error *err)
{
    char *buf;
    size_t len = 0, cap;

    *out = NULL;
    *out_len = 0;
    if (st->st_size < 0 || (uint64_t)st->st_size > max)
        return mg_fail(err, MG_EINVAL, NULL, "%s is larger than %zu bytes; it is not a key file",
                       path, max);
    cap = (size_t)st->st_size + 1; /* +1 notices a file that grew since fstat */
    buf = malloc(cap + 1);
    if (buf == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    while (len < cap) {
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            OPENSSL_cleanse(buf, len);
            free(buf);
            return mg_fail(err, MG_EIO, NULL, "cannot read %s: %s", path, strerror(e));
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > max) {
        OPENSSL_cleanse(buf, len);
        free(buf);
        return mg_fail(err, MG_EINVAL, NULL, "%s is larger than %zu bytes; it is not a key file",
                       path, max);
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return MG_OK;
}

static enum mg_code check_curve(EVP_PKEY *pkey, const char *what, struct mg_error *err)
{
    char group[80];
    size_t glen = 0;
    const char *type;

    if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC) {
        type = EVP_PKEY_get0_type_name(pkey);
        return mg_fail(err, MG_EINVAL, NULL,
                       "%s holds a %s key; modelgate signs with ECDSA P-256 keys only "
                       "(openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)",
                       what, type ? type : "non-EC");
    }
    if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), &glen) != 1) {
        ERR_clear_error();
        return mg_fail(err, MG_EINVAL, NULL,
                       "%s holds an EC key without a named curve; use a P-256 (prime256v1) key",
                       what);
    }
    if (strcmp(group, "prime256v1") != 0)
        return mg_fail(err, MG_EINVAL, NULL,
                       "%s holds a key on curve %s; modelgate signs with P-256 (prime256v1) "
                       "keys only",
                       what, group);
    return MG_OK;
}

/* keyid, public_pem and hint from k->pkey. */
static enum mg_code key_fill_public(struct sign_key *k, const char *what, struct mg_error *err)
{
    unsigned char *der = NULL;
    BIO *bio = NULL;
    char *data = NULL;
    long n;
    int dlen;
    enum mg_code rc = MG_OK;

    dlen = i2d_PUBKEY(k->pkey, &der);
    if (dlen <= 0) {
        rc = mg_fail(err, MG_EINVAL, NULL, "cannot encode the public key of %s", what);
        goto out;
    }
    mg_sha256_hex(der, (size_t)dlen, k->keyid);
    bio = BIO_new(BIO_s_mem());
    if (bio == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (PEM_write_bio_PUBKEY(bio, k->pkey) != 1) {
        rc = mg_fail(err, MG_EINVAL, NULL, "cannot write the public key of %s as PEM", what);
        goto out;
    }
    n = BIO_get_mem_data(bio, &data);
    if (n <= 0 || data == NULL) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot write the public key of %s as PEM", what);
        goto out;
    }
    mg_sha256_hex(data, (size_t)n, k->hint);
    k->public_pem = malloc((size_t)n + 1);
    if (k->public_pem == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    memcpy(k->public_pem, data, (size_t)n);
    k->public_pem[n] = '\0';
out:
    if (rc != MG_OK)
        ERR_clear_error();
    OPENSSL_free(der);
    BIO_free(bio);
    return rc;
}

/* Load a PKCS#8 private key file, refusing loose permissions and other curves. */
static enum mg_code load_private_key(const char *path, struct sign_key *out, struct mg_error *err)
{
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    BIO *bio = NULL;
    EVP_PKEY *pkey = NULL;
    enum mg_code rc;
    int fd;

    memset(out, 0, sizeof(*out));
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        rc = mg_fail(err, errno == ENOENT ? MG_ENOTFOUND : MG_EIO, NULL,
                     "cannot open key file %s: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot stat key file %s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = mg_fail(err, MG_EINVAL, NULL, "key file %s is not a regular file", path);
        goto out;
    }
    if ((st.st_mode & 077) != 0) {
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "key file %s is readable by group or others; chmod 600 %s", path, path);
        goto out;
    }
    if ((rc = read_fd(fd, &st, SIGN_KEY_FILE_MAX, path, &buf, &len, err)) != MG_OK)
        goto out;
    bio = BIO_new_mem_buf(buf, (int)len);
    if (bio == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
    if (pkey == NULL) {
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "key file %s does not hold an unencrypted PEM private key (PKCS#8)", path);
        goto out;
    }
    if ((rc = check_curve(pkey, path, err)) != MG_OK)
        goto out;
    out->pkey = pkey;
    pkey = NULL;
    if ((rc = key_fill_public(out, path, err)) != MG_OK)
        goto out;
    out->created_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
out:
    if (rc != MG_OK) {
        sign_key_release(out);
        ERR_clear_error();
    }
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    if (buf != NULL) {
        OPENSSL_cleanse(buf, len);
        free(buf);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- keyring ---------------------------------------------------------- */

static enum mg_code ring_add(struct sign_keyring *kr, struct sign_key *k, struct mg_error *err)
{
    struct sign_key *nk;

    if (kr->n >= SIGN_MAX_KEYS)
        return mg_fail(err, MG_EINVAL, NULL, "more than %d signing keys; remove unused ones",
                       SIGN_MAX_KEYS);
    nk = realloc(kr->keys, (kr->n + 1) * sizeof(*nk));
    if (nk == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    kr->keys = nk;
    kr->keys[kr->n++] = *k;
    memset(k, 0, sizeof(*k));
    return MG_OK;
}

static struct sign_key *ring_find(struct sign_keyring *kr, const char *keyid)
{
    size_t i;

    for (i = 0; i < kr->n; i++) {
        if (strcmp(kr->keys[i].keyid, keyid) == 0)
            return &kr->keys[i];
    }
    return NULL;
}

/* Newest first; equal mtimes (same clock tick) put the active key first. */
static int key_order(const void *a, const void *b)
{
    const struct sign_key *x = a, *y = b;

    if (x->created_ms != y->created_ms)
        return x->created_ms > y->created_ms ? -1 : 1;
    if (x->active != y->active)
        return x->active ? -1 : 1;
    return strcmp(x->keyid, y->keyid);
}

/* The keys directory must not be open to others. Returns MG_ENOTFOUND when
 * it does not exist. */
static enum mg_code open_keys_dir(const char *dir, DIR **out, struct mg_error *err)
{
    struct stat st;
    enum mg_code rc = MG_OK;
    int fd;

    *out = NULL;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return MG_ENOTFOUND;
        return mg_fail(err, MG_EIO, NULL, "cannot open keys directory %s: %s", dir,
                       strerror(errno));
    }
    if (fstat(fd, &st) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot stat %s: %s", dir, strerror(errno));
        goto out;
    }
    if ((st.st_mode & 007) != 0) {
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "keys directory %s is open to others (mode %03o); chmod 700 %s", dir,
                     (unsigned)(st.st_mode & 0777), dir);
        goto out;
    }
    *out = fdopendir(fd);
    if (*out == NULL) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot read keys directory %s: %s", dir, strerror(errno));
        goto out;
    }
    fd = -1; /* owned by the DIR now */
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

static bool is_pem_name(const char *name)
{
    size_t n = strlen(name);

    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".pem") == 0;
}

/* Add every *.pem of dir to kr. MG_ENOTFOUND when dir does not exist. */
static enum mg_code scan_keys_dir(struct sign_keyring *kr, const char *dir, struct mg_error *err)
{
    DIR *d = NULL;
    struct dirent *de;
    struct sign_key k = {0};
    char path[PATH_MAX];
    enum mg_code rc;

    if ((rc = open_keys_dir(dir, &d, err)) != MG_OK || d == NULL)
        goto out;
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (de == NULL) {
            if (errno != 0)
                rc = mg_fail(err, MG_EIO, NULL, "cannot read keys directory %s: %s", dir,
                             strerror(errno));
            break;
        }
        if (!is_pem_name(de->d_name))
            continue;
        if ((rc = path_join(path, dir, de->d_name, err)) != MG_OK ||
            (rc = load_private_key(path, &k, err)) != MG_OK)
            break;
        if (ring_find(kr, k.keyid) != NULL) {
            sign_key_release(&k); /* the same key under two names */
            continue;
        }
        if ((rc = ring_add(kr, &k, err)) != MG_OK)
            break;
    }
out:
    sign_key_release(&k);
    if (d != NULL)
        closedir(d);
    return rc;
}

/* Read keys/active: a keyid and a newline. *found false when absent. */
static enum mg_code read_active(const char *dir, char keyid[65], bool *found, struct mg_error *err)
{
    char path[PATH_MAX], *buf = NULL;
    size_t len = 0, i;
    struct stat st;
    enum mg_code rc;
    int fd = -1;

    *found = false;
    if ((rc = path_join(path, dir, "active", err)) != MG_OK)
        goto out;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno != ENOENT)
            rc = mg_fail(err, MG_EIO, NULL, "cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &st) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot stat %s: %s", path, strerror(errno));
        goto out;
    }
    if ((rc = read_fd(fd, &st, SIGN_ACTIVE_MAX, path, &buf, &len, err)) != MG_OK)
        goto out;
    for (i = 64; i < len; i++) {
        if (buf[i] != '\n' && buf[i] != '\r' && buf[i] != ' ' && buf[i] != '\t')
            break;
    }
    if (len < 64 || i != len) {
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "%s does not hold a keyid (64 hex characters); write the active key's "
                     "keyid into it or run 'modelgated keys rotate'",
                     path);
        goto out;
    }
    for (i = 0; i < 64; i++) {
        char c = buf[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "%s does not hold a keyid (64 lowercase hex characters)", path);
            goto out;
        }
    }
    memcpy(keyid, buf, 64);
    keyid[64] = '\0';
    *found = true;
out:
    free(buf);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* mkdir keys (0700) if needed and check it is not open to others. */
static enum mg_code ensure_keys_dir(const char *dir, struct mg_error *err)
{
    DIR *d = NULL;
    enum mg_code rc;

    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return mg_fail(err, MG_EIO, NULL, "cannot create keys directory %s: %s", dir,
                       strerror(errno));
    rc = open_keys_dir(dir, &d, err);
    if (rc == MG_ENOTFOUND)
        rc = mg_fail(err, MG_EIO, NULL, "keys directory %s vanished", dir);
    if (d != NULL)
        closedir(d);
    return rc;
}

/* Generate a P-256 key into dir/<keyid>.pem and make it active. */
static enum mg_code key_generate(const char *dir, char keyid_out[65], struct mg_error *err)
{
    struct sign_key k = {0};
    BIO *bio = NULL;
    char *data = NULL, name[80], active[66];
    long n = 0;
    enum mg_code rc;

    k.pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (k.pkey == NULL) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot generate a P-256 key");
        goto out;
    }
    if ((rc = key_fill_public(&k, "the new key", err)) != MG_OK)
        goto out;
    bio = BIO_new(BIO_s_mem());
    if (bio == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (PEM_write_bio_PKCS8PrivateKey(bio, k.pkey, NULL, NULL, 0, NULL, NULL) != 1) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot encode the new key as PKCS#8 PEM");
        goto out;
    }
    n = BIO_get_mem_data(bio, &data);
    if (n <= 0 || data == NULL) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot encode the new key as PKCS#8 PEM");
        goto out;
    }
    snprintf(name, sizeof(name), "%s.pem", k.keyid);
    if ((rc = write_file_atomic(dir, name, data, (size_t)n, err)) != MG_OK)
        goto out;
    snprintf(active, sizeof(active), "%s\n", k.keyid);
    if ((rc = write_file_atomic(dir, "active", active, 65, err)) != MG_OK)
        goto out;
    memcpy(keyid_out, k.keyid, 65);
out:
    if (rc != MG_OK)
        ERR_clear_error();
    if (data != NULL && n > 0)
        OPENSSL_cleanse(data, (size_t)n);
    BIO_free(bio);
    sign_key_release(&k);
    return rc;
}

enum mg_code sign_keyring_load(const char *data_dir, const char *key_file, bool create,
                               struct sign_keyring **out, struct mg_error *err)
{
    struct sign_keyring *kr = NULL;
    struct sign_key k = {0};
    struct sign_key *found;
    char dir[PATH_MAX] = "", want[65] = "";
    bool have_active = false;
    enum mg_code rc = MG_OK;
    size_t i;

    *out = NULL;
    if (data_dir == NULL && key_file == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "no data directory and no key file given");
    kr = calloc(1, sizeof(*kr));
    if (kr == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (data_dir != NULL) {
        if ((rc = path_join(dir, data_dir, "keys", err)) != MG_OK)
            goto out;
        rc = scan_keys_dir(kr, dir, err);
        if (rc != MG_OK && rc != MG_ENOTFOUND)
            goto out;
        rc = MG_OK;
        if (kr->n == 0 && key_file == NULL) {
            if (!create) {
                rc = mg_fail(err, MG_ENOTFOUND, NULL,
                             "no signing key in %s; start modelgated once to generate one, or "
                             "give a key file",
                             dir);
                goto out;
            }
            if ((rc = ensure_keys_dir(dir, err)) != MG_OK ||
                (rc = key_generate(dir, want, err)) != MG_OK ||
                (rc = scan_keys_dir(kr, dir, err)) != MG_OK)
                goto out;
        }
        if (key_file == NULL && kr->n > 0 &&
            (rc = read_active(dir, want, &have_active, err)) != MG_OK)
            goto out;
    }
    if (key_file != NULL) {
        if ((rc = load_private_key(key_file, &k, err)) != MG_OK)
            goto out;
        memcpy(want, k.keyid, sizeof(want));
        have_active = true;
        if (ring_find(kr, k.keyid) == NULL && (rc = ring_add(kr, &k, err)) != MG_OK)
            goto out;
    }
    if (have_active) {
        found = ring_find(kr, want);
        if (found == NULL) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "%s/active names key %s but no %s/*.pem holds it; restore that key "
                         "file or run 'modelgated keys rotate'",
                         dir, want, dir);
            goto out;
        }
        found->active = true;
    }
    if (kr->n > 1)
        qsort(kr->keys, kr->n, sizeof(*kr->keys), key_order);
    if (!have_active && kr->n > 0)
        kr->keys[0].active = true; /* crash before "active" was first written: newest */
    for (i = 0; i < kr->n; i++) {
        if (kr->keys[i].active)
            kr->active = &kr->keys[i];
    }
    if (kr->active == NULL) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "no signing key found");
        goto out;
    }
    *out = kr;
    kr = NULL;
out:
    sign_key_release(&k);
    sign_keyring_free(&kr);
    return rc;
}

enum mg_code sign_keyring_rotate(const char *data_dir, char keyid_out[65], struct mg_error *err)
{
    char dir[PATH_MAX], keyid[65];
    enum mg_code rc;

    if (data_dir == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "no data directory given");
    if ((rc = path_join(dir, data_dir, "keys", err)) != MG_OK ||
        (rc = ensure_keys_dir(dir, err)) != MG_OK || (rc = key_generate(dir, keyid, err)) != MG_OK)
        return rc;
    if (keyid_out != NULL)
        memcpy(keyid_out, keyid, sizeof(keyid));
    return MG_OK;
}

enum mg_code sign_key_private_pem(const char *data_dir, const struct sign_key *k, char **pem,
                                  struct mg_error *err)
{
    char dir[PATH_MAX], name[80], path[PATH_MAX];
    struct stat st;
    size_t len;
    enum mg_code rc;
    int fd;

    *pem = NULL;
    snprintf(name, sizeof(name), "%s.pem", k->keyid);
    if ((rc = path_join(dir, data_dir, "keys", err)) != MG_OK ||
        (rc = path_join(path, dir, name, err)) != MG_OK)
        return rc;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        return mg_fail(err, MG_EIO, NULL, "cannot open %s: %s", path, strerror(errno));
    rc = fstat(fd, &st) == 0 ? read_fd(fd, &st, SIGN_KEY_FILE_MAX, path, pem, &len, err)
                             : mg_fail(err, MG_EIO, NULL, "cannot stat %s", path);
    close(fd);
    return rc;
}

void sign_keyring_free(struct sign_keyring **kr)
{
    size_t i;

    if (kr == NULL || *kr == NULL)
        return;
    for (i = 0; i < (*kr)->n; i++)
        sign_key_release(&(*kr)->keys[i]);
    free((*kr)->keys);
    free(*kr);
    *kr = NULL;
}

json_t *sign_keyring_json(const struct sign_keyring *kr)
{
    json_t *items = json_array(), *o = NULL; /* items: NEW */
    char at[32];
    size_t i;

    if (items == NULL)
        return NULL;
    for (i = 0; kr != NULL && i < kr->n; i++) {
        const struct sign_key *k = &kr->keys[i];
        mg_time_format(k->created_ms, at);
        if (json_array_append_new(items,
                                  json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "keyid", k->keyid,
                                            "hint", k->hint, "algorithm", SIGN_ALGORITHM,
                                            "public_key_pem", k->public_pem, "created_at", at,
                                            "active", k == kr->active ? 1 : 0)) != 0)
            goto out;
    }
    o = json_pack("{s:O}", "items", items);
out:
    json_decref(items);
    return o;
}

const struct sign_key *sign_keyring_by_hint(const struct sign_keyring *kr, const char *hint)
{
    size_t i;

    if (kr == NULL || hint == NULL)
        return NULL;
    for (i = 0; i < kr->n; i++) {
        if (strcmp(kr->keys[i].hint, hint) == 0)
            return &kr->keys[i];
    }
    return NULL;
}

enum mg_code sign_key_from_public_pem(const char *pem, size_t len, struct sign_key *out,
                                      struct mg_error *err)
{
    BIO *bio = NULL;
    enum mg_code rc;

    memset(out, 0, sizeof(*out));
    if (pem == NULL || len == 0 || len > SIGN_KEY_FILE_MAX) {
        rc = mg_fail(err, MG_EINVAL, NULL, "public key PEM is empty or too large");
        goto out;
    }
    bio = BIO_new_mem_buf(pem, (int)len);
    if (bio == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    out->pkey = PEM_read_bio_PUBKEY(bio, NULL, no_passphrase, NULL);
    if (out->pkey == NULL) {
        rc = mg_fail(err, MG_EINVAL, NULL, "not a PEM public key (-----BEGIN PUBLIC KEY-----)");
        goto out;
    }
    /* Re-encoded, so the hint is the same whatever line endings the PEM had. */
    if ((rc = check_curve(out->pkey, "the public key", err)) != MG_OK ||
        (rc = key_fill_public(out, "the public key", err)) != MG_OK)
        goto out;
out:
    if (rc != MG_OK) {
        sign_key_release(out);
        ERR_clear_error();
    }
    BIO_free(bio);
    return rc;
}

void sign_key_release(struct sign_key *k)
{
    if (k == NULL)
        return;
    EVP_PKEY_free(k->pkey);
    free(k->public_pem);
    memset(k, 0, sizeof(*k));
}
