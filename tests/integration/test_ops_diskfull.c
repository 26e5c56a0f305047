/*
 * test_ops_diskfull.c - milestone M8, faults: the disk fills up during an
 * upload. Two ways to run out of space:
 *   - the data directory on a small tmpfs (mounted here: directly as root, else in
 *     a user and mount namespace of this process's own, which needs no privilege;
 *     skipped only where neither works, and a failure under MG_REQUIRE_ALL=1):
 *     writes fail with ENOSPC;
 *   - RLIMIT_FSIZE on the daemon (inherited from this process, SIGXFSZ left
 *     at its default, as a service manager would): writes past the limit fail
 *     with EFBIG once the daemon ignores SIGXFSZ, and kill it if it does not.
 * Either way the upload gets a clean 507 insufficient_storage error in the
 * API's JSON shape (M29: a 500 no longer passes), no partial file is left in
 * blobs/tmp or blobs/sha256, HEAD of the digest is 404, and the server keeps
 * serving: /healthz, /readyz, a small upload once space is free again, and a
 * new version (a database write).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

struct big_upload {
    uint32_t seed;
    uint64_t size, off;
};

struct big_resp {
    CURLcode rc;
    long status;
    char *body;
    size_t len;
};

static size_t big_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    struct big_upload *u = ud;
    size_t n = size * nmemb;

    if (n > u->size - u->off)
        n = (size_t)(u->size - u->off);
    it_pattern(u->seed, u->off, buf, n);
    u->off += n;
    return n;
}

static size_t big_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct big_resp *r = ud;
    size_t n = size * nmemb;
    char *nb = realloc(r->body, r->len + n + 1);

    if (nb == NULL)
        return 0;
    memcpy(nb + r->len, p, n);
    r->body = nb;
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

/*
 * Stream `size` bytes of it_pattern(seed) to POST /api/v1/blobs. The server
 * may answer before the body is all sent and close the connection: the
 * transfer then ends with a send error but the answer is still read.
 */
static void upload_big(struct mg_server *s, uint64_t size, uint32_t seed, struct big_resp *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    struct big_upload u = {seed, size, 0};
    char url[128], auth[256];

    memset(out, 0, sizeof(*out));
    assert_non_null(c);
    it_fmt(url, sizeof(url), "%s/api/v1/blobs", s->base_url);
    it_fmt(auth, sizeof(auth), "Authorization: Bearer %s", s->admin_token);
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Content-Type: application/octet-stream");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, big_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &u);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, big_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    out->rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (out->body == NULL)
        out->body = calloc(1, 1);
}

/* The daemon must still be running; a death (SIGXFSZ above all) fails. */
static void expect_alive(struct mg_server *s, const char *when)
{
    int status;

    if (waitpid(s->pid, &status, WNOHANG) != s->pid)
        return;
    s->pid = 0;
    it_server_dump_log(s, 2000);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ)
        fail_msg("%s: modelgated was killed by SIGXFSZ (signal %d). A write past RLIMIT_FSIZE "
                 "must fail with EFBIG and be answered 507: modelgated must ignore SIGXFSZ "
                 "(signal(SIGXFSZ, SIG_IGN) at start-up)",
                 when, SIGXFSZ);
    if (WIFSIGNALED(status))
        fail_msg("%s: modelgated died of signal %d", when, WTERMSIG(status));
    fail_msg("%s: modelgated exited with status %d", when, WEXITSTATUS(status));
}

static size_t nfiles;
static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    (void)st;
    (void)ftw;
    if (flag == FTW_F)
        nfiles++;
    return 0;
}

/* Regular files under DATA/rel. */
static size_t count_files(const struct mg_server *s, const char *rel)
{
    char path[IT_PATH_MAX];

    it_data_path(s, rel, path);
    nfiles = 0;
    nftw(path, count_entry, 16, FTW_PHYS);
    return nfiles;
}

/* The checks after an upload that ran out of space. */
static void expect_clean_failure(struct mg_server *s, uint64_t size, uint32_t seed,
                                 size_t blobs_before, const char *how)
{
    struct big_resp r;
    char digest[IT_DIGEST_LEN + 1], path[128];
    json_t *j, *e;
    const char *code;
    struct it_resp *h;

    /* Its digest, for the HEAD below. */
    {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint8_t buf[65536], out[32];
        unsigned outlen = 0;

        assert_non_null(md);
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        for (uint64_t off = 0; off < size; off += sizeof(buf)) {
            size_t n = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);

            it_pattern(seed, off, buf, n);
            EVP_DigestUpdate(md, buf, n);
        }
        EVP_DigestFinal_ex(md, out, &outlen);
        EVP_MD_CTX_free(md);
        memcpy(digest, "sha256:", 7);
        for (int i = 0; i < 32; i++)
            sprintf(digest + 7 + 2 * i, "%02x", out[i]);
    }

    upload_big(s, size, seed, &r);
    {
        /* Failures below jump out: judge a static copy, free the answer now. */
        static char body[1024];
        bool shaped;

        snprintf(body, sizeof(body), "%s", r.body);
        j = json_loads(r.body, 0, NULL);
        free(r.body);
        e = json_object_get(j, "error");
        code = json_string_value(json_object_get(e, "code"));
        shaped = code != NULL && json_string_length(json_object_get(e, "message")) > 0 &&
                 strcmp(code, "insufficient_storage") == 0;
        json_decref(j);
        expect_alive(s, how);
        print_message("%s: %llu-byte upload answered %ld (transfer: %s): %s\n", how,
                      (unsigned long long)size, r.status, curl_easy_strerror(r.rc), body);
        if (r.status == 0)
            fail_msg("%s: no HTTP answer to an upload that ran out of space (%s)", how,
                     curl_easy_strerror(r.rc));
        if (r.status != 507)
            fail_msg("%s: status %ld, want 507%s: %s", how, r.status,
                     r.status == 100 ? "; 100 is only the interim 100 Continue: the final answer "
                                       "was lost, as when the server closes the connection while "
                                       "the client is still sending the body"
                                     : "",
                     body);
        if (!shaped)
            fail_msg("%s: the %ld answer is not {\"error\":{\"code\":\"insufficient_storage\","
                     "\"message\":...}}: %s",
                     how, r.status, body);
    }

    /* No partial file anywhere. */
    {
        int64_t deadline = it_deadline(10000);

        while (it_data_dir_count(s, "blobs/tmp") != 0) {
            if (it_now_ms() > deadline)
                fail_msg("%s: %zu files left in blobs/tmp after the failed upload", how,
                         it_data_dir_count(s, "blobs/tmp"));
            it_pause_ms(20);
        }
    }
    if (count_files(s, "blobs/sha256") != blobs_before)
        fail_msg("%s: blobs/sha256 holds %zu files after the failed upload, %zu before", how,
                 count_files(s, "blobs/sha256"), blobs_before);
    h = it_request(s, "HEAD", it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest),
                   s->admin_token, NULL, NULL, 0);
    it_expect_status(s, h, 404);
    it_resp_free(s, &h);
}

/* The server serves on: health, readiness, a small upload, a version.
 * want_free: wait first until the filesystem has this much free again (the
 * failed upload's space is given back), 0 to skip. */
static void expect_serving(struct mg_server *s, const char *model, uint64_t want_free)
{
    struct it_resp *r;
    char digest[IT_DIGEST_LEN + 1], path[128], body[64];
    int64_t deadline = it_deadline(10000);

    expect_alive(s, "after the failed upload");
    for (;;) {
        struct statvfs v;
        uint64_t got;

        if (statvfs(s->data_dir, &v) != 0)
            fail_msg("statvfs %s: %s", s->data_dir, strerror(errno));
        got = (uint64_t)v.f_bavail * v.f_frsize;
        if (got >= want_free)
            break;
        if (it_now_ms() > deadline)
            fail_msg("the failed upload's space was not given back: %llu bytes free, want %llu",
                     (unsigned long long)got, (unsigned long long)want_free);
        it_pause_ms(20);
    }
    r = it_get(s, "/healthz", NULL);
    it_expect_status(s, r, 200);
    /* Ready again once the failed upload's space is back. */
    for (;;) {
        r = it_get(s, "/readyz", NULL);
        if (r->status == 200)
            break;
        if (it_now_ms() > deadline)
            it_expect_status(s, r, 200);
        it_resp_free(s, &r);
        it_pause_ms(50);
    }
    snprintf(body, sizeof(body), "small model after a full disk (%s)", model);
    it_upload(s, body, strlen(body), digest);
    r = it_get(s, it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest), s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, strlen(body));
    assert_memory_equal(r->body, body, strlen(body));
    it_model_create(s, s->admin_token, model);
    it_version_create(s, s->admin_token, model, digest, NULL);
    it_release(s);
}

/* The test's server and tmpfs, for the teardown when an assertion jumps out. */
static struct mg_server *srv;
static char mnt[IT_PATH_MAX];
static bool mounted;

static int cleanup(void **state)
{
    (void)state;
    it_server_free(&srv);
    if (mounted) {
        if (umount2(mnt, MNT_DETACH) != 0)
            print_error("umount %s: %s\n", mnt, strerror(errno));
        mounted = false;
        rmdir(mnt);
    }
    return 0;
}

/* ---- a small tmpfs ------------------------------------------------------------ */

/* Write text to a /proc file of this process. */
static bool write_proc(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);

    if (fd >= 0)
        close(fd);
    return ok;
}

/*
 * Mount a 16 MiB tmpfs on dir: directly when this process may (root), else in a user and
 * mount namespace of its own, where an unprivileged process may mount a tmpfs (Debian 12
 * allows user namespaces); the daemon started afterwards inherits both namespaces. The uid
 * and gid map to themselves, so files and PostgreSQL's peer authentication see the same
 * user. Returns false, with why, when neither works.
 */
static bool mount_small_tmpfs(const char *dir, char *why, size_t whysz)
{
    const char *opts = "size=16m,mode=0700";
    char uid_map[64], gid_map[64];
    int direct;
    uid_t uid = getuid();
    gid_t gid = getgid();

    if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0)
        return true;
    direct = errno;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
        snprintf(why, whysz, "mount: %s; unshare(CLONE_NEWUSER | CLONE_NEWNS): %s",
                 strerror(direct), strerror(errno));
        return false;
    }
    snprintf(uid_map, sizeof(uid_map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    snprintf(gid_map, sizeof(gid_map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    if (!write_proc("/proc/self/setgroups", "deny\n") ||
        !write_proc("/proc/self/uid_map", uid_map) || !write_proc("/proc/self/gid_map", gid_map)) {
        snprintf(why, whysz, "mount: %s; the user namespace's id maps: %s", strerror(direct),
                 strerror(errno));
        return false;
    }
    /* Nothing mounted here may reach the mount namespace outside. */
    if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
        snprintf(why, whysz, "mount: %s; in a user namespace: %s", strerror(direct),
                 strerror(errno));
        return false;
    }
    print_message("mounted the tmpfs in a user namespace (a direct mount: %s)\n", strerror(direct));
    return true;
}

static void test_disk_full_on_a_small_tmpfs(void **state)
{
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    struct mg_server *s;
    struct statvfs vfs;
    uint64_t free_bytes;
    size_t before;

    char why[512];

    (void)state;
    it_mkdtemp(mnt, "ops-tmpfs");
    if (!mount_small_tmpfs(mnt, why, sizeof(why))) {
        rmdir(mnt);
        free(saved);
        it_skip("cannot mount a tmpfs here (%s)", why);
    }
    mounted = true;
    /* The harness makes its scratch space under $TMPDIR: on the tmpfs. */
    setenv("TMPDIR", mnt, 1);
    s = srv = it_server_start(NULL);
    if (saved != NULL)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);

    before = count_files(s, "blobs/sha256");
    if (statvfs(s->data_dir, &vfs) != 0)
        fail_msg("statvfs %s: %s", s->data_dir, strerror(errno));
    free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
    print_message("tmpfs data dir with %llu bytes free\n", (unsigned long long)free_bytes);
    expect_clean_failure(s, free_bytes + (4u << 20), 91, before, "tmpfs");
    expect_serving(s, "after-tmpfs-full", free_bytes - free_bytes / 8);
    /* A second time, after the first one's space came back: same answer. */
    before = count_files(s, "blobs/sha256");
    expect_clean_failure(s, free_bytes + (4u << 20), 92, before, "tmpfs, again");
    expect_serving(s, "after-tmpfs-full-again", free_bytes - free_bytes / 8);

    it_server_stop(s);
}

/* ---- RLIMIT_FSIZE ------------------------------------------------------------- */

static void test_disk_full_by_rlimit_fsize(void **state)
{
    const rlim_t limit = 8u << 20;
    struct rlimit saved, lim;
    struct mg_server *s;
    size_t before;

    (void)state;
    /* The daemon inherits the soft limit and SIGXFSZ's default action from
     * this process, as it would from a service manager's LimitFSIZE=. */
    signal(SIGXFSZ, SIG_DFL);
    if (getrlimit(RLIMIT_FSIZE, &saved) != 0)
        fail_msg("getrlimit: %s", strerror(errno));
    lim = saved;
    lim.rlim_cur = limit;
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
        fail_msg("setrlimit RLIMIT_FSIZE: %s", strerror(errno));
    s = srv = it_server_start(NULL);
    if (setrlimit(RLIMIT_FSIZE, &saved) != 0)
        fail_msg("restoring RLIMIT_FSIZE: %s", strerror(errno));

    before = count_files(s, "blobs/sha256");
    expect_clean_failure(s, 2 * (uint64_t)limit, 93, before, "RLIMIT_FSIZE");
    expect_serving(s, "after-fsize-limit", 0);
    /* A blob just under the limit still fits. */
    {
        struct big_resp r;

        upload_big(s, limit - 4096, 94, &r);
        free(r.body);
        expect_alive(s, "an upload just under RLIMIT_FSIZE");
        if (r.status != 201)
            fail_msg("an upload just under RLIMIT_FSIZE answered %ld", r.status);
    }
    it_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_disk_full_on_a_small_tmpfs, cleanup),
        cmocka_unit_test_teardown(test_disk_full_by_rlimit_fsize, cleanup),
    };

    return it_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
