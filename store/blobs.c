/*
 * blobs.c - content-addressed blobs: rows here, bytes in the blob layer (blob.h:
 * a directory, S3 or an OCI registry).
 *
 * An upload streams into the backend (blob_put_*) while SHA-256 is computed.
 * Past the first HASH_THREAD_AFTER bytes the hash runs on a thread of the
 * upload's own, fed through a small ring of copied chunks, so hashing and the
 * copy overlap instead of adding up (each is about half of an upload's CPU
 * time); the ring is bounded, so a slow hasher holds the writer back rather than
 * buffering. Commit: check the digest, inspect what must be inspected (archives,
 * read from a local file: the backend's temp file, or for a remote backend a
 * spool kept beside the upload), have the backend make the bytes durable under
 * the digest, and only then insert the row. A crash at any point leaves either
 * no row, or a row whose bytes are complete; leftovers of a remote upload are
 * named by its blob_uploads row (written before the first byte) for GC.
 *
 * This file holds the upload side: sessions, pins, the row a commit writes. The hash
 * thread is in blobs_hash.c, lookups of what is stored in blobs_read.c.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "../os/file.h"
#include "../artifact/introspect.h"
#include "../base/util.h"
#include "blob.h"
#include "blobs_hash.h"
#include "blobs_int.h"

#define HASH_THREAD_AFTER (1u << 20) /* small uploads hash inline (blobs_hash.h) */

struct store_blob_upload {
    struct store *st;
    struct blob_put *put; /* NULL when discarding: the expected blob is stored already */
    char expected[72];    /* the digest declared at begin, or "" */
    char inflight[33];    /* our blob_uploads row, or "" */
    int spool_fd;         /* remote backends: a local copy to inspect, or -1 */
    char spool[PATH_MAX];
    bool decided; /* whether to spool was decided (once the head is in) */
    EVP_MD_CTX *md;
    struct store_hasher *h; /* NULL: hashing inline */
    bool inline_only;       /* the hasher could not start: never try again */
    uint64_t size;
    uint64_t max;
    uint8_t head[512]; /* first bytes, for media type detection */
    size_t head_len;
    char teams[STORE_MAX_SCOPES][STORE_TEAM_NAME_MAX + 1]; /* whose quotas it counts in */
    size_t nteams;
};

/* ---- uploads in flight (remote backends) ----------------------------------- */

/* Record the upload before its first byte reaches the backend. */
static enum mg_code inflight_add(struct store_blob_upload *up, struct mg_error *err)
{
    static const char sql[] = "INSERT INTO blob_uploads (id, backend, handle, replica, "
                              "started_at) VALUES (?, ?, ?, ?, ?)";
    struct store *st = up->st;
    struct db_conn *c;
    struct db_stmt *s;
    uint8_t id[16];
    char at[32];
    enum mg_code rc;

    if (!mg_random_bytes(id, sizeof(id)))
        return mg_fail(err, MG_EIO, NULL, "no randomness for an upload id");
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    mg_hex_encode(id, sizeof(id), up->inflight);
    store_now(at);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, up->inflight);
    db_bind_text(s, 2, blob_kind(st->blobs));
    db_bind_text(s, 3, blob_put_handle(up->put));
    db_bind_text(s, 4, st->replica_id);
    db_bind_text(s, 5, at);
    rc = store_write_end(st, c, db_exec(s, err), err);
    if (rc != MG_OK)
        up->inflight[0] = '\0';
    return rc;
}

static enum mg_code inflight_del_in(struct db_conn *c, const char *id, struct mg_error *err)
{
    struct db_stmt *s = db_prepare(c, "DELETE FROM blob_uploads WHERE id = ?");

    db_bind_text(s, 1, id);
    return db_exec(s, err);
}

/* Best effort: a row left behind only makes GC look at an upload that is gone. */
static void inflight_del(struct store_blob_upload *up)
{
    struct mg_error err;
    struct db_conn *c;

    if (up->inflight[0] == '\0' || (c = store_write_begin(up->st, &err)) == NULL)
        return;
    if (store_write_end(up->st, c, inflight_del_in(c, up->inflight, &err), &err) == MG_OK)
        up->inflight[0] = '\0';
}

/* ---- upload ----------------------------------------------------------------- */

enum mg_code store_blob_upload_begin(struct store *st, uint64_t max_bytes,
                                     struct store_blob_upload **out, struct mg_error *err)
{
    return store_blob_upload_begin_digest(st, max_bytes, NULL, out, err);
}

enum mg_code store_blob_upload_begin_digest(struct store *st, uint64_t max_bytes,
                                            const char *expected, struct store_blob_upload **out,
                                            struct mg_error *err)
{
    struct store_blob_upload *up = calloc(1, sizeof(*up));
    json_t *existing = NULL;
    enum mg_code rc;

    if (up == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    up->st = st;
    up->max = max_bytes;
    up->spool_fd = -1;
    if (expected)
        snprintf(up->expected, sizeof(up->expected), "%s", expected);
    up->md = EVP_MD_CTX_new();
    if (up->md == NULL || EVP_DigestInit_ex(up->md, EVP_sha256(), NULL) != 1) {
        store_blob_upload_abort(&up);
        return mg_fail(err, MG_ENOMEM, NULL, "cannot start SHA-256");
    }
    /* The declared blob is stored already: the bytes are only hashed (and checked). */
    if (expected && store_blob_get(st, expected, &existing, NULL) == MG_OK) {
        json_decref(existing);
        *out = up;
        return MG_OK;
    }
    if ((rc = blob_put_begin(st->blobs, expected, max_bytes, &up->put, err)) != MG_OK) {
        store_blob_upload_abort(&up);
        return rc;
    }
    if (blob_put_local_path(up->put) == NULL && (rc = inflight_add(up, err)) != MG_OK) {
        store_blob_upload_abort(&up);
        return rc;
    }
    *out = up;
    return MG_OK;
}

/*
 * What commit must read from a local file (remote backends keep a spool copy of
 * it while uploading): archives, for their manifest and weight members, and plain
 * weight files (safetensors, GGUF, ONNX), for their headers.
 */
static bool needs_local_copy(const char *media_type, const uint8_t *head, size_t n)
{
    return strcmp(media_type, "application/octet-stream") != 0 || art_introspect_sniff(head, n) ||
           art_scan_sniff(head, n);
}

static enum mg_code spool_write(struct store_blob_upload *up, const void *p, size_t n,
                                struct mg_error *err)
{
    return up->spool_fd < 0 ? MG_OK : mg_write_all(up->spool_fd, p, n, up->spool, err);
}

/* Once the first bytes are in: keep a local copy when commit will need one. */
static enum mg_code spool_decide(struct store_blob_upload *up, struct mg_error *err)
{
    up->decided = true;
    if (up->put == NULL || blob_put_local_path(up->put) != NULL ||
        !needs_local_copy(store_media_type_detect(up->head, up->head_len), up->head, up->head_len))
        return MG_OK;
    snprintf(up->spool, sizeof(up->spool), "%s/spool-XXXXXX", up->st->tmp_dir);
    up->spool_fd = mkostemp(up->spool, O_CLOEXEC);
    if (up->spool_fd < 0) {
        up->spool[0] = '\0';
        return mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL,
                       "cannot create a local copy of the upload for inspection: %s",
                       strerror(errno));
    }
    return spool_write(up, up->head, up->head_len, err);
}

enum mg_code store_blob_upload_write(struct store_blob_upload *up, const void *p, size_t n,
                                     struct mg_error *err)
{
    size_t k = 0;
    enum mg_code rc;

    if (n > up->max || up->size > up->max - n)
        return mg_fail(err, MG_ETOOBIG, NULL,
                       "the blob is larger than the server's limit of %llu bytes",
                       (unsigned long long)up->max);
    if (up->head_len < sizeof(up->head)) {
        k = sizeof(up->head) - up->head_len;
        if (k > n)
            k = n;
        memcpy(up->head + up->head_len, p, k);
        up->head_len += k;
        if (up->head_len == sizeof(up->head) && (rc = spool_decide(up, err)) != MG_OK)
            return rc;
    }
    if (k < n && (rc = spool_write(up, (const uint8_t *)p + k, n - k, err)) != MG_OK)
        return rc;
    if (up->put && (rc = blob_put_write(up->put, p, n, err)) != MG_OK)
        return rc;
    if (up->h == NULL && !up->inline_only && up->size + n > HASH_THREAD_AFTER)
        up->inline_only = (up->h = store_hasher_start(&up->st->hash_threads, up->md)) == NULL;
    if (up->h)
        store_hasher_feed(up->h, p, n);
    else if (EVP_DigestUpdate(up->md, p, n) != 1)
        return mg_fail(err, MG_EIO, NULL, "SHA-256 update failed");
    up->size += n;
    return MG_OK;
}

void store_blob_upload_abort(struct store_blob_upload **upp)
{
    struct store_blob_upload *up = *upp;

    if (up == NULL)
        return;
    if (up->h)
        store_hasher_finish(&up->h, true);
    /* The row stays when the backend could not be cleaned: it names the leftovers. */
    if (up->put && blob_put_abort(&up->put))
        inflight_del(up);
    if (up->spool_fd >= 0) {
        close(up->spool_fd);
        unlink(up->spool);
    }
    EVP_MD_CTX_free(up->md);
    free(up);
    *upp = NULL;
}

void store_blob_upload_teams(struct store_blob_upload *up, const char *const *teams, size_t nteams)
{
    size_t i;

    up->nteams = 0;
    for (i = 0; i < nteams && up->nteams < STORE_MAX_SCOPES; i++) {
        if (strlen(teams[i]) > STORE_TEAM_NAME_MAX)
            continue; /* not a team name: the token layer never hands one */
        memcpy(up->teams[up->nteams++], teams[i], strlen(teams[i]) + 1);
    }
}

/* ---- pins: bytes being put, which garbage collection leaves alone ----------------- */

/* The pin goes with the quota holds it carried. */
static enum mg_code pin_drop_in(struct db_conn *c, const char *token, struct mg_error *err)
{
    struct db_stmt *s = db_prepare(c, "DELETE FROM blob_pins WHERE token = ?");
    enum mg_code rc;

    db_bind_text(s, 1, token);
    if ((rc = db_exec(s, err)) != MG_OK)
        return rc;
    s = db_prepare(c, "DELETE FROM quota_holds WHERE pin = ?");
    db_bind_text(s, 1, token);
    return db_exec(s, err);
}

/* The upload's teams hold digest now (in the transaction that commits or touches its row). */
static enum mg_code claim_in(struct db_conn *c, const char *digest,
                             const struct store_blob_upload *up, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO blob_teams (digest, team) VALUES (?, ?) ON CONFLICT DO NOTHING";
    enum mg_code rc = MG_OK;
    size_t i;

    for (i = 0; up != NULL && i < up->nteams && rc == MG_OK; i++) {
        struct db_stmt *s = db_prepare(c, sql);

        db_bind_text(s, 1, digest);
        db_bind_text(s, 2, up->teams[i]);
        rc = db_exec(s, err);
    }
    return rc;
}

/* The upload's teams' alert levels after their use changed (store_quota_note). */
static enum mg_code note_in(struct db_conn *c, const struct store_blob_upload *up,
                            struct mg_error *err)
{
    const char *teams[STORE_MAX_SCOPES];
    size_t i;

    for (i = 0; up != NULL && i < up->nteams; i++)
        teams[i] = up->teams[i];
    return store_quota_note(c, teams, i, err);
}

/* Admit size new bytes of digest into each of the upload's teams' quotas (MG_EQUOTA) and,
 * with a pin, hold them there until the row commits or the pin goes. */
static enum mg_code admit_in(struct db_conn *c, const char *digest,
                             const struct store_blob_upload *up, const char *pin,
                             struct mg_error *err)
{
    static const char sql_hold[] =
        "INSERT INTO quota_holds (pin, team, digest, size) VALUES (?, ?, ?, ?)";
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    size_t i;

    for (i = 0; i < up->nteams && rc == MG_OK; i++) {
        if ((rc = store_quota_admit(c, up->teams[i], digest, (int64_t)up->size, err)) != MG_OK ||
            pin == NULL)
            continue;
        s = db_prepare(c, sql_hold);
        db_bind_text(s, 1, pin);
        db_bind_text(s, 2, up->teams[i]);
        db_bind_text(s, 3, digest);
        db_bind_i64(s, 4, (int64_t)up->size);
        rc = db_exec(s, err);
    }
    return rc;
}

/* Best effort: a pin left behind (the process died) is cleared by the next collection once
 * its replica run is gone. */
static void pin_drop(struct store *st, char token[33])
{
    struct mg_error err;
    struct db_conn *c;

    if (token[0] == '\0' || (c = store_write_begin(st, &err)) == NULL)
        return;
    if (store_write_end(st, c, pin_drop_in(c, token, &err), &err) == MG_OK)
        token[0] = '\0';
}

/*
 * Pin digest before its bytes are put: in one transaction (which garbage collection's
 * marking also needs), refuse when a collector is removing that blob's bytes right now
 * (MG_EUNAVAIL: upload again in a moment) or when they would take one of up's teams past
 * its quota (MG_EQUOTA), else record the pin, which keeps any collector from marking the
 * blob until the pin goes, and the quota holds. token (33 bytes) receives the pin's id.
 */
static enum mg_code pin_take(struct store *st, const char *digest,
                             const struct store_blob_upload *up, char token[33],
                             struct mg_error *err)
{
    static const char sql_state[] = "SELECT 1 FROM blobs WHERE digest = ? AND state = 'deleting'";
    static const char sql_pin[] =
        "INSERT INTO blob_pins (token, digest, replica, at_ms) VALUES (?, ?, ?, ?)";
    struct db_conn *c;
    struct db_stmt *s;
    uint8_t id[16];
    enum mg_code rc;
    bool collecting;

    if (!mg_random_bytes(id, sizeof(id)))
        return mg_fail(err, MG_EIO, NULL, "no randomness for a pin");
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    s = db_prepare(c, sql_state);
    db_bind_text(s, 1, digest);
    if ((rc = store_exists(s, &collecting, err)) == MG_OK && collecting)
        rc = mg_fail(err, MG_EUNAVAIL, NULL,
                     "blob %s is being garbage-collected right now; upload it again in a moment",
                     digest);
    if (rc == MG_OK) {
        mg_hex_encode(id, sizeof(id), token);
        s = db_prepare(c, sql_pin);
        db_bind_text(s, 1, token);
        db_bind_text(s, 2, digest);
        db_bind_text(s, 3, st->replica_id);
        db_bind_i64(s, 4, mg_now_ms());
        rc = db_exec(s, err);
    }
    /* Reserved before the bytes go under their digest: of uploads racing past a quota, on
     * any replica, the first to get here wins and the others leave nothing behind. */
    if (rc == MG_OK)
        rc = admit_in(c, digest, up, token, err);
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK)
        token[0] = '\0';
    return rc;
}

/*
 * The row of digest exists: decide what the bytes an upload just committed mean for it
 * (docs/contract.md "Lifecycle": garbage collection never loses an upload). live: nothing, but it
 * was sent again now (the grace period starts anew); reclaimed: it is live again (*created);
 * deleting (a collector removes its bytes right now, and may remove the ones just put):
 * MG_EUNAVAIL, upload again.
 */
static enum mg_code blob_revive(struct store *st, struct db_conn *c, const char *digest,
                                const json_t *formats, const json_t *intro, const char *scan,
                                bool *created, struct mg_error *err)
{
    static const char sql_touch[] =
        "UPDATE blobs SET last_used_ms = ?, released = 0 WHERE digest = ? AND state = 'live'";
    static const char sql_revive[] =
        "UPDATE blobs SET state = 'live', last_used_ms = ?1, gc_owner = NULL, gc_at_ms = NULL, "
        "released = 0, formats = ?3, introspection = ?4, scan = ?5 WHERE digest = ?2 AND "
        "state = 'reclaimed'";
    struct db_stmt *s;
    enum mg_code rc;

    *created = false;
    s = db_prepare(c, sql_touch);
    db_bind_i64(s, 1, store_clock_ms(st));
    db_bind_text(s, 2, digest);
    if ((rc = db_exec(s, err)) != MG_OK || db_changes(s) == 1)
        return rc;
    s = db_prepare(c, sql_revive);
    db_bind_i64(s, 1, store_clock_ms(st));
    db_bind_text(s, 2, digest);
    db_bind_text(s, 5, scan);
    if ((rc = store_bind_introspection(s, 3, formats, intro, err)) != MG_OK ||
        (rc = db_exec(s, err)) != MG_OK)
        return rc;
    if (db_changes(s) == 1) {
        *created = true;
        return MG_OK;
    }
    return mg_fail(err, MG_EUNAVAIL, NULL,
                   "blob %s is being garbage-collected right now; upload it again in a moment",
                   digest);
}

/* The bytes were sent again: the grace period starts anew, and bytes no version cites any
 * more may be cited again (uploading proves possession). With up, its teams hold them from
 * now, if their quotas admit them (else MG_EQUOTA and nothing changes). */
static enum mg_code blob_touch(struct store *st, const char *digest,
                               const struct store_blob_upload *up, bool *live, struct mg_error *err)
{
    static const char sql[] =
        "UPDATE blobs SET last_used_ms = ?, released = 0 WHERE digest = ? AND state = 'live'";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    *live = false;
    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, store_clock_ms(st));
    db_bind_text(s, 2, digest);
    if ((rc = db_exec(s, err)) == MG_OK)
        *live = db_changes(s) == 1;
    if (rc == MG_OK && *live && up != NULL && (rc = admit_in(c, digest, up, NULL, err)) == MG_OK &&
        (rc = claim_in(c, digest, up, err)) == MG_OK)
        rc = note_in(c, up, err);
    return store_write_end(st, c, rc, err);
}

json_t *store_blob_json(const char *digest, uint64_t size, const char *media, int64_t files,
                        json_t *formats, json_t *scan)
{
    return json_pack("{s:s, s:I, s:s, s:o, s:o, s:o*}", "digest", digest, "size", (json_int_t)size,
                     "media_type", media, "files", files >= 0 ? json_integer(files) : json_null(),
                     "formats", formats ? formats : json_array(), "scan", scan);
}

static enum mg_code blob_insert(struct store *st, const char *actor, const char *digest,
                                uint64_t size, const char *media,
                                const struct store_archive_manifest *m, bool is_archive,
                                const json_t *formats, const json_t *intro, const json_t *scan,
                                const char *inflight, const char *pin,
                                const struct store_blob_upload *up, bool *created,
                                struct mg_error *err)
{
    static const char sql_blob[] = "INSERT INTO blobs (digest, size, media_type, files, "
                                   "created_at, created_by, formats, introspection, last_used_ms, "
                                   "scan) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                                   "ON CONFLICT (digest) DO NOTHING";
    static const char sql_file[] =
        "INSERT INTO blob_files (digest, path, size, sha256) VALUES (?, ?, ?, ?)";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32], *scan_t = scan ? store_json_text(scan) : NULL;
    enum mg_code rc = MG_OK;
    size_t i;
    json_t *detail;

    if (c == NULL) {
        free(scan_t);
        return err->code;
    }
    if (scan != NULL && scan_t == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* The upload is no longer in flight once its row commits: one transaction. */
    if (inflight[0] && (rc = inflight_del_in(c, inflight, err)) != MG_OK)
        goto out;
    if (pin[0] && (rc = pin_drop_in(c, pin, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_blob);
    store_now(at);
    db_bind_text(s, 1, digest);
    db_bind_i64(s, 2, (int64_t)size);
    db_bind_text(s, 3, media);
    if (is_archive)
        db_bind_i64(s, 4, (int64_t)m->n);
    db_bind_text(s, 5, at);
    db_bind_text(s, 6, actor);
    db_bind_i64(s, 9, store_clock_ms(st));
    db_bind_text(s, 10, scan_t);
    if ((rc = store_bind_introspection(s, 7, formats, intro, err)) != MG_OK ||
        (rc = db_exec(s, err)) != MG_OK)
        goto out;
    *created = db_changes(s) > 0;
    /* The teams' holds become their bytes in this transaction (the pin's holds go above). */
    if ((rc = claim_in(c, digest, up, err)) != MG_OK || (rc = note_in(c, up, err)) != MG_OK)
        goto out;
    if (!*created) {
        /* Live: a concurrent upload of the same bytes won. Reclaimed by garbage collection:
         * the bytes just committed bring it back. Being collected: the bytes may go. */
        if ((rc = blob_revive(st, c, digest, formats, intro, scan_t, created, err)) != MG_OK ||
            !*created)
            goto out;
        is_archive = false; /* its file manifest stayed with the row */
    }
    for (i = 0; is_archive && i < m->n; i++) {
        s = db_prepare(c, sql_file);
        db_bind_text(s, 1, digest);
        db_bind_text(s, 2, m->files[i].path);
        db_bind_i64(s, 3, (int64_t)m->files[i].size);
        db_bind_text(s, 4, m->files[i].sha256);
        if ((rc = db_exec(s, err)) != MG_OK)
            goto out;
    }
    detail = json_pack("{s:I, s:s}", "size", (json_int_t)size, "media_type", media);
    rc = store_audit_append(c, actor, "blob.create", digest, STORE_NO_MODEL, detail, err);
    json_decref(detail);
out:
    free(scan_t);
    return store_write_end(st, c, rc, err);
}

/* Would the scanner read the file at path as an archive (art_scan_walks)? Its size into
 * *size. */
static bool scan_walks(const char *path, uint64_t *size)
{
    uint8_t head[512];
    struct stat sb;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool walks = false;

    if (fd < 0)
        return false;
    if (fstat(fd, &sb) == 0 && (n = pread(fd, head, sizeof(head), 0)) > 0) {
        *size = (uint64_t)sb.st_size;
        walks = art_scan_walks(head, (size_t)n, *size);
    }
    close(fd);
    return walks;
}

/*
 * Inspect the upload's bytes (a local file) before they become a blob. Archives
 * get their manifest (an unsafe archive fails the upload); the weight headers
 * (safetensors, GGUF, ONNX) of the blob or its archive members are read (a
 * malformed one fails it). Whatever reads the whole bytes goes here and in
 * needs_local_copy().
 *
 * The safety scan (artifact/scan.h) reads what could run code on load; what it finds is
 * recorded, never refused here: policies decide (the scan gate). An archive's members are
 * scanned as the inspection reads them (store_archive_inspect_scan): a compressed tarball is
 * decompressed once for both, not once each (bench/scan.sh).
 */
static enum mg_code inspect_upload(struct store *st, const char *path, const char *media,
                                   struct store_archive_manifest *m, bool *is_archive,
                                   json_t **formats, json_t **intro, json_t **scan,
                                   struct mg_error *err)
{
    struct art_scan_opts o = st->scan;
    struct art_scan_walk *walk = NULL;
    uint64_t size = 0;
    enum mg_code rc;

    if (path == NULL) /* nothing that needs the whole bytes, nothing the scanner reads */
        return (*scan = store_scan_plain_clean()) != NULL
                   ? MG_OK
                   : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* as store_scan_path(): zips inside archives are read from a scratch file */
    o.spill = art_scan_spill_tmp;
    o.spill_ctx = st->tmp_dir;
    if (!st->scan_skip && scan_walks(path, &size) &&
        (rc = art_scan_walk_new(&o, size, &walk, err)) != MG_OK)
        return rc;
    rc = walk ? store_archive_inspect_scan(path, media, &st->archive, walk, m, is_archive, err)
              : store_archive_inspect(path, media, &st->archive, m, is_archive, err);
    if (rc == MG_OK)
        rc = art_introspect(path, media, *is_archive ? m : NULL, NULL, formats, intro, err);
    if (rc == MG_OK && walk != NULL && *is_archive) {
        if ((rc = art_scan_walk_finish(&walk, scan, err)) == MG_OK)
            store_scan_count(st, *scan);
    } else if (rc == MG_OK && st->scan_skip) { /* bench/scan.sh's reference: never clean */
        if ((*scan = json_pack("{s:s, s:s, s:[]}", "verdict", "unknown", "scanner", ART_SCANNER,
                               "findings")) == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    } else if (rc == MG_OK) { /* not an archive to the scanner, or not a tar after all */
        rc = store_scan_path(st, path, scan, err);
    }
    art_scan_walk_free(&walk);
    return rc;
}

enum mg_code store_blob_upload_commit(struct store_blob_upload **upp, const char *actor,
                                      const char *expected, json_t **blob, bool *created,
                                      struct mg_error *err)
{
    struct store_blob_upload *up = *upp;
    struct store *st = up->st;
    struct store_archive_manifest m = {0};
    json_t *formats = NULL, *intro = NULL, *scan = NULL;
    char pin[33] = "";
    bool reused = false;
    unsigned char md[32];
    unsigned mdlen = 0;
    char digest[72];
    const char *media, *local = NULL;
    bool is_archive = false;
    enum mg_code rc;
    json_t *existing = NULL;

    memcpy(digest, "sha256:", 7);
    if ((up->h && !store_hasher_finish(&up->h, false)) ||
        EVP_DigestFinal_ex(up->md, md, &mdlen) != 1 || mdlen != 32) {
        rc = mg_fail(err, MG_EIO, NULL, "SHA-256 failed");
        goto out;
    }
    mg_hex_encode(md, 32, digest + 7);
    if (expected == NULL && up->expected[0])
        expected = up->expected;
    if ((expected && strcmp(expected, digest) != 0) ||
        (up->expected[0] && strcmp(up->expected, digest) != 0)) {
        rc = mg_fail(err, MG_EDIGEST, NULL,
                     "the body hashes to %s but X-Content-Digest says %s; nothing was stored",
                     digest, expected ? expected : up->expected);
        goto out;
    }
    /* Already stored: idempotent, the upload goes; sent again now, so the grace period of
     * garbage collection starts anew (unless a collector took it meanwhile). */
    if (store_blob_get(st, digest, &existing, NULL) == MG_OK) {
        bool live = false;

        if ((rc = blob_touch(st, digest, up, &live, err)) != MG_OK) {
            json_decref(existing);
            goto out;
        }
        if (live) {
            *blob = existing;
            *created = false;
            json_object_del(existing, "created_at");
            json_object_del(existing, "created_by");
            reused = true;
            goto out;
        }
        json_decref(existing);
        existing = NULL;
    }
    if (up->put == NULL) {
        rc =
            mg_fail(err, MG_EUNAVAIL, NULL,
                    "blob %s was deleted while it was uploaded again; upload it once more", digest);
        goto out;
    }
    if (!up->decided && (rc = spool_decide(up, err)) != MG_OK)
        goto out;
    media = store_media_type_detect(up->head, up->head_len);
    local = blob_put_local_path(up->put);
    if (local == NULL && up->spool_fd >= 0)
        local = up->spool;
    if ((rc = inspect_upload(st, local, media, &m, &is_archive, &formats, &intro, &scan, err)) !=
        MG_OK)
        goto out;
    /* Garbage collection leaves a pinned digest alone; one it is collecting now is not
     * put back under its feet (the bytes put could go with the old ones). */
    if ((rc = pin_take(st, digest, up, pin, err)) != MG_OK)
        goto out;
    /* The bytes become durable under the digest; only then does the row exist. */
    if ((rc = blob_put_commit(&up->put, digest, err)) != MG_OK)
        goto out;
    rc = blob_insert(st, actor, digest, up->size, media, &m, is_archive, formats, intro, scan,
                     up->inflight, pin, up, created, err);
    if (rc == MG_OK)
        pin[0] = '\0'; /* dropped with the row's commit */
    if (rc == MG_OK) {
        up->inflight[0] = '\0';
        *blob = store_blob_json(digest, up->size, media, is_archive ? (int64_t)m.n : -1,
                                json_incref(formats), json_incref(scan));
        if (*blob == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    /* On failure the committed bytes stay: same bytes under the same name, and a
     * retry of the upload simply commits the row. */
out:
    pin_drop(st, pin);
    store_archive_manifest_release(&m);
    json_decref(formats);
    json_decref(intro);
    json_decref(scan);
    store_blob_upload_abort(upp);
    if (rc == MG_OK && reused) {
        /* Dropping our copy can take a while (a remote upload session): the grace period
         * counts from the answer, not from before it. */
        bool live = false;

        if ((rc = blob_touch(st, digest, NULL, &live, err)) == MG_OK && !live)
            rc = mg_fail(err, MG_EUNAVAIL, NULL,
                         "blob %s was garbage-collected while this upload ended; upload it "
                         "again",
                         digest);
        if (rc != MG_OK) {
            json_decref(*blob);
            *blob = NULL;
        }
    }
    return rc;
}
