/*
 * test_blob_backends.c - the remote blob backends' failures and guarantees, against a
 * real S3 server (s3rver, which verifies SigV4) and a real docker-registry, both
 * started here by scripts/blob-test.sh:
 *
 *   s3:  a wrong secret is a clean 503 naming the backend (and /readyz says so); a
 *        credentials file others may read is refused at start; a wrong digest on a
 *        multipart-sized upload is 400 and leaves nothing; a dropped upload's multipart
 *        upload is aborted; the backend down at upload time is 503 and nothing is
 *        committed, and the server heals when it is back; the backend killed in the
 *        middle of an upload leaves no blob; modelgated killed -9 in the middle of a
 *        multipart upload leaves no blob after a restart, and its multipart upload and
 *        its blob_uploads row stay findable for garbage collection; --blob-downloads
 *        redirect answers 307 to a presigned URL that the S3 server itself accepts (and
 *        refuses once altered), and `modelgate pull` follows it without its token.
 *   oci: the bearer-token flow (a token server the registry trusts); every blob is
 *        kept alive by a tagged manifest, so after the registry's own garbage-collect
 *        every blob still reads back whole; skopeo inspect sees each blob as the layer
 *        of its sha256-<hex> tag; a wrong password is a clean 503.
 *
 * Backend faults do not depend on the database: skipped on PostgreSQL.
 */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/util.h"
#include "sys.h"

#define MIB (1u << 20)

static char blob_dir[IT_PATH_MAX];

/* Run scripts/blob-test.sh with args; its first output line into out (may be NULL). */
static void blob_test(const char *args, char *out, size_t outsz)
{
    char cmd[IT_PATH_MAX * 3];
    char line[IT_PATH_MAX] = "";
    FILE *f;

    it_fmt(cmd, sizeof(cmd), "bash %s/scripts/blob-test.sh %s", getenv("MG_SOURCE_DIR"), args);
    if ((f = popen(cmd, "r")) == NULL)
        fail_msg("%s: %s", cmd, strerror(errno));
    if (fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
    while (fgetc(f) != EOF)
        ;
    if (pclose(f) != 0)
        fail_msg("%s failed", cmd);
    line[strcspn(line, "\n")] = '\0';
    if (out)
        snprintf(out, outsz, "%s", line);
}

static void backend_start(const char *kind, const char *auth)
{
    char args[IT_PATH_MAX * 2];

    it_mkdtemp(blob_dir, kind);
    blob_test(it_fmt(args, sizeof(args), "start %s %s %s", kind, blob_dir, auth), NULL, 0);
    setenv("MG_BLOB_DIR", blob_dir, 1);
}

static void backend_stop(void)
{
    char args[IT_PATH_MAX + 16];

    unsetenv("MG_BLOB_DIR");
    if (blob_dir[0])
        blob_test(it_fmt(args, sizeof(args), "stop %s", blob_dir), NULL, 0);
    blob_dir[0] = '\0';
}

static void backend_cmd(const char *verb)
{
    char args[IT_PATH_MAX + 16];

    blob_test(it_fmt(args, sizeof(args), "%s %s", verb, blob_dir), NULL, 0);
}

/* Write a credentials file (mode given) in the backend's directory; its path. */
static const char *creds_file(const char *name, const char *text, mode_t mode, char *path)
{
    it_fmt(path, IT_PATH_MAX, "%s/%s", blob_dir, name);
    it_write_file(path, text);
    if (chmod(path, mode) != 0)
        fail_msg("chmod %s: %s", path, strerror(errno));
    return path;
}

static void blob_path(char *out, size_t n, const char *digest)
{
    it_fmt(out, n, "/api/v1/blobs/%s", digest);
}

/* A part file of a multipart upload exists in s3rver's store (a part reached S3). */
static bool s3_part_arrived(void)
{
    char dir[IT_PATH_MAX];

    return it_find_name(it_fmt(dir, sizeof(dir), "%s/data/mgtest/._S3rver_uploads", blob_dir),
                        ".md5") != NULL;
}

/* A child that POSTs the file at path with curl (its outcome is not looked at: the
 * callers kill something under it). */
static pid_t curl_upload(struct mg_server *s, const char *file)
{
    char auth[200], url[128], data[IT_PATH_MAX + 1];
    pid_t pid;

    it_fmt(auth, sizeof(auth), "Authorization: Bearer %s", s->admin_token);
    it_fmt(url, sizeof(url), "%s/api/v1/blobs", s->base_url);
    it_fmt(data, sizeof(data), "@%s", file);
    if ((pid = fork()) < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        execlp("curl", "curl", "-s", "-o", "/dev/null", "-H", auth, "--data-binary", data, url,
               (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void big_file(char *path, size_t mib, uint32_t seed)
{
    static unsigned char buf[MIB];
    FILE *f;

    it_fmt(path, IT_PATH_MAX, "%s/big-%u", blob_dir, seed);
    if ((f = fopen(path, "we")) == NULL)
        fail_msg("%s: %s", path, strerror(errno));
    for (size_t i = 0; i < mib; i++) {
        it_pattern(seed, (uint64_t)i * MIB, buf, sizeof(buf));
        if (fwrite(buf, 1, sizeof(buf), f) != sizeof(buf))
            fail_msg("write %s", path);
    }
    fclose(f);
}

static void wait_for_part(pid_t child)
{
    int64_t deadline = it_deadline(30000);

    while (!s3_part_arrived()) {
        int st;
        if (waitpid(child, &st, WNOHANG) == child)
            fail_msg("the upload ended before a part reached S3");
        if (it_now_ms() > deadline)
            fail_msg("no part of the upload reached S3 within 30 s");
        it_pause_ms(20);
    }
}

static void test_s3_credentials(void **state)
{
    char url[IT_PATH_MAX], path[IT_PATH_MAX], log[IT_PATH_MAX], ddir[IT_PATH_MAX];
    struct mg_server *s;
    struct it_resp *r;
    struct it_proc p = {0};
    int status = 0;

    (void)state;
    it_sqlite_only();
    backend_start("s3", "");
    blob_test(it_fmt(path, sizeof(path), "url %s wrong", blob_dir), url, sizeof(url));

    /* A wrong secret: SigV4 checked by the server, a clean 503 naming the backend. */
    {
        const char *args[] = {"--blobs", url, "--blobs-credentials",
                              creds_file("wrong", "S3RVER:not-the-secret", 0600, path), NULL};
        s = it_server_start(args);
    }
    r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                   "some bytes", 10);
    it_expect_error(s, r, 503, "unavailable");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "s3 bucket"));
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "credentials"));
    r = it_get(s, "/readyz", NULL);
    it_expect_error(s, r, 503, "unavailable");
    it_server_free(&s);

    /* A credentials file others may read: refused at start, saying what to do. */
    it_mkdtemp(ddir, "creds");
    it_fmt(log, sizeof(log), "%s/log", ddir);
    {
        const char *argv[] = {getenv("MODELGATED"),
                              "--data-dir",
                              ddir,
                              "--listen",
                              "127.0.0.1:0",
                              "--blobs",
                              url,
                              "--blobs-credentials",
                              creds_file("open", "S3RVER:S3RVER", 0644, path),
                              NULL};
        int64_t deadline = it_deadline(20000);

        it_proc_spawn(&p, "modelgated", argv, log);
        while (!it_proc_exited(&p, &status)) {
            if (it_now_ms() > deadline)
                fail_msg("modelgated started with a world-readable credentials file");
            it_pause_ms(20);
        }
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    {
        char *text = it_read_file(log, NULL);
        assert_non_null(strstr(text, "chmod 600"));
        free(text);
    }
    it_rmtree(ddir);
    backend_stop();
}

static void test_s3_faults(void **state)
{
    char digest[IT_DIGEST_LEN + 1], wrong[IT_DIGEST_LEN + 1], header[128], path[160];
    char file[IT_PATH_MAX];
    const char *headers[] = {header, NULL};
    struct mg_server *s;
    struct it_resp *r;
    pid_t child;
    int st;

    (void)state;
    it_sqlite_only();
    backend_start("s3", "");
    s = it_server_start(NULL);
    r = it_get(s, "/readyz", NULL);
    it_expect_status(s, r, 200);

    /* A wrong digest on a multipart upload: 400, nothing stored, the upload aborted. */
    it_digest("other", 5, wrong);
    it_fmt(header, sizeof(header), "X-Content-Digest: %s", wrong);
    r = it_upload_stream(s, s->admin_token, 20 * MIB, 11, false, headers, digest);
    it_expect_error(s, r, 400, "digest_mismatch");
    assert_false(it_blob_stored(s, digest));
    assert_false(it_blob_stored(s, wrong));
    assert_int_equal(it_blob_leftovers(s), 0);

    /* A dropped upload, parts already sent: its multipart upload is aborted. */
    it_upload_abort(s, s->admin_token, 64 * MIB, 30 * MIB);
    {
        int64_t deadline = it_deadline(20000);
        while (it_blob_leftovers(s) != 0) {
            if (it_now_ms() > deadline)
                fail_msg("the dropped upload's multipart upload is still there after 20 s");
            it_pause_ms(50);
        }
    }

    /* The backend down at upload time: 503, nothing committed; heals when it is back. */
    backend_cmd("kill");
    r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                   "bytes while S3 is down", 22);
    it_expect_error(s, r, 503, "unavailable");
    it_digest("bytes while S3 is down", 22, digest);
    blob_path(path, sizeof(path), digest);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    r = it_get(s, "/readyz", NULL);
    it_expect_error(s, r, 503, "unavailable");
    backend_cmd("restart");
    r = it_upload(s, "bytes while S3 is down", 22, NULL);
    it_expect_status(s, r, 201);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 200);

    /* The backend killed in the middle of an upload: no blob. */
    big_file(file, 160, 21);
    child = curl_upload(s, file);
    wait_for_part(child);
    backend_cmd("kill");
    if (waitpid(child, &st, 0) != child)
        fail_msg("waitpid");
    {
        static unsigned char all[160 * MIB];
        it_pattern(21, 0, all, sizeof(all));
        it_digest(all, sizeof(all), digest);
    }
    blob_path(path, sizeof(path), digest);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    backend_cmd("restart");

    /* modelgated killed -9 in the middle of a multipart upload: after a restart no blob,
     * and the leftovers are findable for garbage collection (the multipart upload at the
     * backend, the blob_uploads row in the database). */
    child = curl_upload(s, file);
    wait_for_part(child);
    it_server_kill9(s);
    waitpid(child, &st, 0);
    it_server_restart(s);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    assert_true(it_blob_leftovers(s) >= 1);
    it_server_stop(s);
    assert_true(it_sql_exec(s, "UPDATE blob_uploads SET backend = backend WHERE backend = 's3'") >=
                1);
    it_server_restart(s);
    /* Garbage collection removes them: the upload's replica run is gone (its id outlives
     * the killed run, its start does not). */
    r = it_jreq(s, "POST", "/api/v1/admin/gc?dry_run=false", s->admin_token, NULL);
    it_expect_status(s, r, 200);
    assert_true(it_jint(r->json, "leftovers") >= 1);
    assert_int_equal(it_blob_leftovers(s), 0);
    it_server_stop(s);
    assert_int_equal(it_sql_exec(s, "DELETE FROM blob_uploads"), 0); /* the row went too */
    it_server_free(&s);
    unlink(file);
    backend_stop();
}

static void test_s3_redirect_downloads(void **state)
{
    static unsigned char data[3 * MIB];
    char digest[IT_DIGEST_LEN + 1], path[160], loc[4096], cmd[8192], out[IT_PATH_MAX];
    const char *const args[] = {"--blob-downloads", "redirect", NULL};
    struct mg_server *s;
    struct it_resp *r;
    char *text;
    size_t len;

    (void)state;
    it_sqlite_only();
    backend_start("s3", "");
    s = it_server_start(args);
    it_pattern(33, 0, data, sizeof(data));
    r = it_upload(s, data, sizeof(data), digest);
    blob_path(path, sizeof(path), digest);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 307);
    assert_non_null(it_header(r, "Location"));
    snprintf(loc, sizeof(loc), "%s", it_header(r, "Location"));
    assert_non_null(strstr(loc, "X-Amz-Signature="));
    assert_non_null(strstr(loc, "X-Amz-Expires=300"));

    /* The S3 server serves the presigned URL to anyone, and refuses it once altered. */
    it_fmt(out, sizeof(out), "%s/presigned", blob_dir);
    it_fmt(cmd, sizeof(cmd), "curl -s -f -o %s '%s'", out, loc);
    assert_int_equal(system(cmd), 0);
    text = it_read_file(out, &len);
    assert_int_equal(len, sizeof(data));
    assert_memory_equal(text, data, sizeof(data));
    free(text);
    loc[strlen(loc) - 1] = loc[strlen(loc) - 1] == '0' ? '1' : '0';
    it_fmt(cmd, sizeof(cmd), "curl -s -o /dev/null -w '%%{http_code}' '%s' | grep -qx 403", loc);
    assert_int_equal(system(cmd), 0);

    /* modelgate pull follows the 307 without its token (s3rver refuses a request that
     * carries an Authorization header besides the presigned query). */
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"redirected\"}");
    it_expect_status(s, r, 201);
    {
        char body[256];
        r = it_jreq(s, "POST", "/api/v1/models/redirected/versions", s->admin_token,
                    it_fmt(body, sizeof(body), "{\"artifact\":\"%s\"}", digest));
        it_expect_status(s, r, 201);
    }
    it_fmt(out, sizeof(out), "%s/pulled", blob_dir);
    it_fmt(cmd, sizeof(cmd),
           "MODELGATE_URL=%s MODELGATE_TOKEN=%s XDG_CONFIG_HOME=%s %s pull redirected 1 -o %s "
           ">/dev/null",
           s->base_url, s->admin_token, blob_dir, getenv("MODELGATE_CLI"), out);
    assert_int_equal(system(cmd), 0);
    text = it_read_file(it_fmt(cmd, sizeof(cmd), "%s/artifact", out), &len);
    assert_int_equal(len, sizeof(data));
    assert_memory_equal(text, data, sizeof(data));
    free(text);
    it_server_free(&s);
    backend_stop();
}

/* modelgated backup reads the blobs through the backend; restore writes them through
 * another (here: another prefix of the same S3 server) and checks each there. */
static void test_s3_backup_restore(void **state)
{
    static unsigned char data[12 * MIB];
    char digest[IT_DIGEST_LEN + 1], path[160], tar[IT_PATH_MAX], restored[IT_PATH_MAX];
    char url[IT_PATH_MAX], creds[IT_PATH_MAX], cmd[IT_PATH_MAX * 4];
    struct mg_server *s;
    struct it_resp *r;

    (void)state;
    it_sqlite_only();
    backend_start("s3", "");
    s = it_server_start(NULL);
    it_pattern(51, 0, data, sizeof(data));
    r = it_upload(s, data, sizeof(data), digest);
    it_fmt(creds, sizeof(creds), "%s/credentials", blob_dir);
    it_fmt(tar, sizeof(tar), "%s/backup.tar", blob_dir);
    it_fmt(cmd, sizeof(cmd), "%s backup --data-dir %s --blobs '%s' --blobs-credentials %s --out %s",
           getenv("MODELGATED"), s->data_dir, s->blobs, creds, tar);
    assert_int_equal(system(cmd), 0);
    it_server_free(&s);

    blob_test(it_fmt(cmd, sizeof(cmd), "url %s restored", blob_dir), url, sizeof(url));
    it_fmt(restored, sizeof(restored), "%s/restored", blob_dir);
    it_fmt(cmd, sizeof(cmd),
           "%s restore --data-dir %s --blobs '%s' --blobs-credentials %s --from %s >/dev/null",
           getenv("MODELGATED"), restored, url, creds, tar);
    assert_int_equal(system(cmd), 0);
    /* the restored directory keeps no local copy: the blobs live in the backend */
    it_fmt(cmd, sizeof(cmd), "%s/blobs/sha256", restored);
    assert_false(it_exists(cmd));
    /* restore checked every blob through the backend; the bytes are under the new prefix */
    {
        struct mg_server other = {0};

        snprintf(other.blobs, sizeof(other.blobs), "%s", url);
        assert_true(it_blob_stored(&other, digest));
    }
    backend_stop();
    (void)path;
    (void)r;
}

static void test_oci_token_gc_skopeo(void **state)
{
    char digests[3][IT_DIGEST_LEN + 1], path[IT_PATH_MAX], url[IT_PATH_MAX], cmd[8192];
    static unsigned char data[3][2 * MIB];
    struct mg_server *s;
    struct it_resp *r;
    char port[16], repo[64];
    int i;

    (void)state;
    it_sqlite_only();
    backend_start("oci", "token");
    s = it_server_start(NULL);
    r = it_get(s, "/readyz", NULL);
    it_expect_status(s, r, 200);
    for (i = 0; i < 3; i++) {
        it_pattern(40 + (uint32_t)i, 0, data[i], sizeof(data[i]));
        r = it_upload(s, data[i], sizeof(data[i]), digests[i]);
    }

    /* The registry's own garbage collector keeps every blob: each is referenced. */
    backend_cmd("gc");
    for (i = 0; i < 3; i++) {
        blob_path(path, sizeof(path), digests[i]);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        assert_int_equal(r->len, sizeof(data[i]));
        assert_memory_equal(r->body, data[i], sizeof(data[i]));
    }

    /* skopeo, through the registry's token flow, sees the blob as its tag's layer. */
    {
        char *text = it_read_file(it_fmt(path, sizeof(path), "%s/port", blob_dir), NULL);
        snprintf(port, sizeof(port), "%.15s", text);
        port[strcspn(port, "\n")] = '\0';
        free(text);
    }
    snprintf(url, sizeof(url), "%s", strstr(s->blobs, "/mg/") + 1);
    url[strcspn(url, "?")] = '\0';
    snprintf(repo, sizeof(repo), "%.63s", url);
    it_fmt(cmd, sizeof(cmd),
           "skopeo inspect --tls-verify=false --creds mg:test-password "
           "docker://127.0.0.1:%s/%s:sha256-%s | grep -q '%s'",
           port, repo, digests[0] + 7, digests[0]);
    assert_int_equal(system(cmd), 0);

    /* A wrong password: a clean 503 naming the registry. */
    {
        const char *args[] = {"--blobs", s->blobs, "--blobs-credentials",
                              creds_file("wrong", "mg:not-the-password", 0600, path), NULL};
        struct mg_server *w = it_server_start(args);

        r = it_request(w, "POST", "/api/v1/blobs", w->admin_token, "application/octet-stream", "x",
                       1);
        it_expect_error(w, r, 503, "unavailable");
        assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "OCI registry"));
        it_server_free(&w);
    }
    it_server_free(&s);
    backend_stop();
}

/* A test that failed half-way still stops its backend. */
static int teardown(void **state)
{
    (void)state;
    backend_stop();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_s3_credentials, teardown),
        cmocka_unit_test_teardown(test_s3_faults, teardown),
        cmocka_unit_test_teardown(test_s3_redirect_downloads, teardown),
        cmocka_unit_test_teardown(test_s3_backup_restore, teardown),
        cmocka_unit_test_teardown(test_oci_token_gc_skopeo, teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_blob_backends", tests, NULL, NULL));
}
