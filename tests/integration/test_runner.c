/*
 * test_runner.c - the embedded smoke-test runner against the real daemon,
 * with shell-script profiles written into this program's scratch directory
 * and no NVML (--nvml-library names a file that does not exist, so the
 * result is the same on a machine with a GPU).
 *
 * - a passing test: the clean environment (MODELGATE_*, CUDA_VISIBLE_DEVICES,
 *   PATH and nothing of the server's, such as HOME), argv with {model_dir}
 *   and {output} filled in whole words only, the extracted archive, a single
 *   file at {model_dir}/artifact, and p50/p95/max by nearest rank;
 * - failures: a failing check, an exit status, malformed output, p95 over
 *   smoke.max_p95_ms, an unknown profile (error; a promotion that requires a
 *   smoke test is rejected with that reason);
 * - a hung command and its child are killed with their process group at the
 *   timeout, and a child left behind by a command that exited is killed too;
 * - GPU "required" without NVML fails the smoke gate naming the missing GPU,
 *   "preferred" runs on the CPU;
 * - the smoke gate holds a promotion in evaluating while the test runs;
 * - a candidate whose re-run fails mid-rollout is rolled back, and a real
 *   HAProxy (runtime API) shows the baseline at 100 and the candidate at 0;
 * - an archive tampered with on disk ("../" entries, an absolute path, a
 *   symbolic link) is refused at extraction and nothing lands outside;
 * - a program that does not exist fails with 127; a --smoke-profile that
 *   cannot be parsed stops the server at start-up.
 *
 * test_runner_robust.c has the runner under adverse conditions (descriptors,
 * a FIFO as output, shutdown and crash during a test).
 *
 * Nearest rank: the 20 latencies of pass.sh tell it from interpolation
 * (p50 10 not 10.5, p95 30 not 30.5); the 5 of slow.sh tell ceil from
 * floor (p50 55 not 45, p95 120 not 60).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "runner_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define NPROFILES 8

/* "missing" runs no script: its program does not exist. */
static const char *const PROFILES[NPROFILES] = {"pass", "check-fail", "exit1", "badjson",
                                                "slow", "gated",      "flip",  "missing"};

static struct mg_server *srv;  /* the server most tests share */
static struct mg_server *srv2; /* a server of its own, started by one test */
static char dir[IT_PATH_MAX];  /* scripts, what they record, flag files */
static char straggler[64];     /* the marker of exit1.sh's background child */
static char hang_mark[64];     /* the marker of hang.sh's two processes */
static char dep[128];          /* a deployer token */
static struct it_proc hap;
static int hap_stats_port;

/* ---- the profiles --------------------------------------------------------- */

static void write_script(const char *name, const char *text, const char *mark)
{
    rc_write_script(dir, name, text, mark);
}

/* Records its environment (as exec'd: /proc/$$/environ), arguments, working
 * directory, address-space limit and the model directory's files, checks
 * them itself, and reports 20 known latencies. */
static const char PASS_SH[] =
    "seen=\"@DIR@/seen.$MODELGATE_MODEL.$MODELGATE_VERSION\"\n"
    "tr '\\0' '\\n' < /proc/$$/environ > \"$seen.env\"\n"
    "{ printf '%s\\n' \"$@\"; pwd; ulimit -v; } > \"$seen.args\"\n"
    "env_ok=true\n"
    "for v in \"$MODELGATE_MODEL_DIR\" \"$MODELGATE_OUTPUT\" \"$MODELGATE_MODEL\" "
    "\"$MODELGATE_VERSION\"; do\n"
    "  [ -n \"$v\" ] || env_ok=false\n"
    "done\n"
    "[ \"$1\" = \"$MODELGATE_MODEL_DIR\" ] && [ \"$2\" = \"$MODELGATE_OUTPUT\" ] || env_ok=false\n"
    "[ -z \"$HOME\" ] && [ -z \"$MG_RUNNER_CANARY\" ] || env_ok=false\n"
    "[ -d \"$MODELGATE_MODEL_DIR\" ] && [ ! -e \"$MODELGATE_OUTPUT\" ] || env_ok=false\n"
    "n=$(cd \"$MODELGATE_MODEL_DIR\" && find . -type f | wc -l)\n"
    "files_ok=true\n"
    "[ \"$n\" -gt 0 ] || files_ok=false\n"
    "(cd \"$MODELGATE_MODEL_DIR\" && find . -type f -exec sha256sum {} + | sort -k2) > "
    "\"$seen.files\"\n"
    "echo \"pass.sh: $n file(s) in $MODELGATE_MODEL_DIR\"\n"
    "printf '{\"latencies_ms\":[12,5,7,30,1,9,3,18,25,4,11,2.5,8,6,10,14,16,20,22,40],'\\\n"
    "'\"checks\":[{\"name\":\"environment\",\"passed\":%s,\"detail\":\"MODELGATE_* and "
    "argv\"},'\\\n"
    "'{\"name\":\"files\",\"passed\":%s,\"detail\":\"%s file(s)\"}]}\\n' \"$env_ok\" "
    "\"$files_ok\" \"$n\" > \"$MODELGATE_OUTPUT\"\n";

static const char CHECK_FAIL_SH[] =
    "i=0; while [ $i -lt 3000 ]; do echo \"filler line $i\"; i=$((i+1)); done\n"
    "echo 'evaluating 3 samples'\n"
    "printf '%s' '{\"latencies_ms\":[1,2,3],\"checks\":[{\"name\":\"warmup\",\"passed\":true,"
    "\"detail\":\"ok\"},{\"name\":\"accuracy\",\"passed\":false,\"detail\":\"0.41 < 0.90\"}]}' "
    "> \"$MODELGATE_OUTPUT\"\n";

/* Leaves a child behind (stdout closed, so the pipe ends with the leader),
 * writes a failing check, prints to stderr and exits 1. */
static const char EXIT1_SH[] =
    "sh -c 'while :; do sleep 1; done' @MARK@ </dev/null >/dev/null 2>&1 &\n"
    "echo $! > @DIR@/straggler.pid\n"
    "printf '%s' '{\"checks\":[{\"name\":\"load\",\"passed\":false,\"detail\":\"oom\"}]}' "
    "> \"$MODELGATE_OUTPUT\"\n"
    "echo 'loading weights'\n"
    "echo 'boom: CUDA out of memory (simulated)' >&2\n"
    "exit 1\n";

static const char BADJSON_SH[] = "printf '%s' '{\"latencies_ms\":[1,2,' > \"$MODELGATE_OUTPUT\"\n";

/* p50 55 and p95 120 by nearest rank. */
static const char SLOW_SH[] =
    "printf '%s' '{\"latencies_ms\":[40,60,120,45,55],\"checks\":[]}' > \"$MODELGATE_OUTPUT\"\n";

/* Runs until the test creates DIR/gated.release. */
static const char GATED_SH[] =
    "touch @DIR@/gated.started\n"
    "while [ ! -e @DIR@/gated.release ]; do sleep 0.02; done\n"
    "printf '%s' '{\"latencies_ms\":[3],\"checks\":[{\"name\":\"gate\",\"passed\":true}]}' "
    "> \"$MODELGATE_OUTPUT\"\n";

/* Passes while DIR/flip says "pass", fails when it says anything else. */
static const char FLIP_SH[] =
    "if [ \"$(cat @DIR@/flip)\" = pass ]; then ok=true; d='healthy'; else ok=false; "
    "d='error rate 12% over 1%'; fi\n"
    "printf '{\"latencies_ms\":[4,5,6],\"checks\":[{\"name\":\"canary-health\",\"passed\":%s,"
    "\"detail\":\"%s\"}]}' \"$ok\" \"$d\" > \"$MODELGATE_OUTPUT\"\n";

/* ---- HAProxy ---------------------------------------------------------------- */

static void haproxy_start(void)
{
    char cfg[2048], path[IT_PATH_MAX], log[IT_PATH_MAX];
    const char *argv[] = {PC_HAPROXY, "-db", "-f", path, NULL};

    hap_stats_port = it_free_port();
    it_fmt(cfg, sizeof(cfg),
           "global\n"
           "    stats socket ipv4@127.0.0.1:%d level admin\n"
           "    nbthread 1\n"
           "defaults\n"
           "    mode http\n"
           "    timeout connect 2s\n"
           "    timeout client 10s\n"
           "    timeout server 10s\n"
           "frontend fe\n"
           "    bind 127.0.0.1:%d\n"
           "    default_backend be_canary_production\n"
           "backend be_canary_production\n"
           "    server v1 127.0.0.1:9 weight 1\n"
           "    server v2 127.0.0.1:9 weight 1\n",
           hap_stats_port, it_free_port());
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
    it_proc_spawn(&hap, "haproxy", argv, it_fmt(log, sizeof(log), "%s/haproxy.log", dir));
    it_proc_wait_port(&hap, hap_stats_port);
}

/* `get weight be_canary_production/<server>` over the runtime API. */
static int haproxy_weight(const char *server)
{
    return pc_haproxy_weight(hap_stats_port, "be_canary_production", server);
}

/* Poll HAProxy until v1 and v2 have these weights. */
static void expect_haproxy(int w1, int w2)
{
    int64_t deadline = it_deadline(10000);
    int g1, g2;

    for (;;) {
        g1 = haproxy_weight("v1");
        g2 = haproxy_weight("v2");
        if (g1 == w1 && g2 == w2)
            return;
        if (it_now_ms() > deadline) {
            it_server_dump_log(srv, 3000);
            fail_msg("HAProxy weights v1=%d v2=%d, want %d and %d", g1, g2, w1, w2);
        }
        it_pause_ms(10);
    }
}

/* ---- setup -------------------------------------------------------------------- */

static void profile_arg(char *out, size_t n, const char *name, const char *extra)
{
    rc_profile_arg(out, n, dir, name, extra);
}

static int setup(void **state)
{
    char args[NPROFILES + 6][IT_PATH_MAX + 128];
    const char *argv[NPROFILES + 7];
    size_t n = 0;
    char flip[IT_PATH_MAX];
    char *secret;

    it_mkdtemp(dir, "runner");
    it_marker(straggler, sizeof(straggler), "mg-straggler");
    write_script("pass.sh", PASS_SH, NULL);
    write_script("check-fail.sh", CHECK_FAIL_SH, NULL);
    write_script("exit1.sh", EXIT1_SH, straggler);
    write_script("badjson.sh", BADJSON_SH, NULL);
    write_script("slow.sh", SLOW_SH, NULL);
    write_script("gated.sh", GATED_SH, NULL);
    write_script("flip.sh", FLIP_SH, NULL);
    it_write_file(it_fmt(flip, sizeof(flip), "%s/flip", dir), "pass\n");

    /* Something of the test's environment the server inherits; the smoke
     * command must not see it (nor HOME). */
    setenv("MG_RUNNER_CANARY", "leaked-from-the-server", 1);
    if (getenv("HOME") == NULL)
        setenv("HOME", "/root", 1);

    /* Quotes group words; "pre{output}" is not a whole word: left as is. */
    profile_arg(args[n], sizeof(args[n]), "pass", " \"two words\" pre{output}");
    n++;
    for (size_t i = 1; i < NPROFILES - 1; i++, n++)
        profile_arg(args[n], sizeof(args[n]), PROFILES[i], "");
    it_fmt(args[n++], sizeof(args[0]),
           "--smoke-profile=missing=/nonexistent/smoke-command {model_dir}");
    it_fmt(args[n++], sizeof(args[0]), "--nvml-library=%s/absent/libnvidia-ml.so.1", dir);
    it_fmt(args[n++], sizeof(args[0]), "--smoke-interval=0");
    it_fmt(args[n++], sizeof(args[0]), "--smoke-timeout=30");
    it_fmt(args[n++], sizeof(args[0]), "--runner-workers=2");
    it_fmt(args[n++], sizeof(args[0]), "--smoke-memory-mib=1024");
    for (size_t i = 0; i < n; i++)
        argv[i] = args[i];
    argv[n] = NULL;
    srv = it_server_start(argv);
    secret = it_token_create(srv, "dep", "deployer,reader", NULL);
    snprintf(dep, sizeof(dep), "%s", secret);
    free(secret);
    it_release(srv);
    haproxy_start();
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    if (srv2 != NULL) {
        it_server_stop(srv2);
        it_server_free(&srv2);
    }
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    it_proc_stop(&hap);
    it_kill_procs(straggler);
    it_kill_procs(hang_mark);
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

static int test_teardown(void **state)
{
    it_kill_procs(hang_mark);
    if (srv2 != NULL) {
        it_server_stop(srv2);
        it_server_free(&srv2);
    }
    return it_test_teardown(state);
}

/* ---- what the scripts recorded ------------------------------------------------ */

/* DIR/seen.<model>.<version>.<what>, malloc'd; fails when missing. */
static char *seen(const char *model, json_int_t version, const char *what)
{
    char path[IT_PATH_MAX];
    char *text = it_read_file(
        it_fmt(path, sizeof(path), "%s/seen.%s.%lld.%s", dir, model, (long long)version, what),
        NULL);

    if (text == NULL)
        fail_msg("the smoke command did not record %s (no %s)", what, path);
    return text;
}

/* Assert the environment the command was exec'd with is exactly `want`
 * (NAME=value lines, sorted by the caller). */
static void expect_env(const char *model, json_int_t version, const char *const *want)
{
    char *env = seen(model, version, "env"), *save = NULL, *line;
    const char *got[32];
    size_t n = 0, w = 0;

    for (line = strtok_r(env, "\n", &save); line && n < 32; line = strtok_r(NULL, "\n", &save))
        got[n++] = line;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(got[i], "HOME=", 5) == 0 || strncmp(got[i], "MG_RUNNER_CANARY=", 17) == 0)
            fail_msg("the server's %s reached the smoke command", got[i]);
    }
    while (want[w])
        w++;
    for (size_t i = 0; i < w; i++) {
        size_t j;
        for (j = 0; j < n && strcmp(got[j], want[i]) != 0; j++)
            ;
        if (j == n)
            fail_msg("the smoke command's environment lacks %s", want[i]);
    }
    for (size_t j = 0; j < n; j++) {
        size_t i;
        for (i = 0; i < w && strcmp(got[j], want[i]) != 0; i++)
            ;
        if (i == w)
            fail_msg("the smoke command's environment has %s, which it should not", got[j]);
    }
    free(env);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_runner_info_without_nvml(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r = it_get(s, "/api/v1/runner", s->admin_token);
    json_t *profiles;

    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "nvml"), "unavailable");
    rc_expect_contains(it_jstr(r->json, "nvml_error"), "libnvidia-ml.so.1");
    assert_int_equal(json_array_size(it_jarr(r->json, "gpus")), 0);
    profiles = it_jarr(r->json, "profiles");
    assert_int_equal(json_array_size(profiles), NPROFILES);
    for (size_t i = 0; i < NPROFILES; i++)
        assert_string_equal(json_string_value(json_array_get(profiles, i)), PROFILES[i]);
    assert_true(it_jint(r->json, "queued") >= 0);
    assert_true(it_jint(r->json, "running") >= 0);

    /* Readers may look, no token may not. */
    r = it_get(s, "/api/v1/runner", NULL);
    it_expect_error(s, r, 401, "unauthenticated");
}

/*
 * Tests of one artifact extract and hash it once: the second test of the
 * same digest is given a copy of the verified extraction (in its own fresh
 * directory) instead of decompressing it again.
 */
static void test_artifact_extracted_once(void **state)
{
    struct mg_server *s = *state;
    static const struct rc_entry entries[] = {
        {"config.json", "{\"layers\":3}\n", NULL},
        {"weights", NULL, NULL},
        {"weights/w0.bin", "weights, extracted once", NULL},
    };
    char art[IT_DIGEST_LEN + 1], id1[64], id2[64];
    unsigned long long ex0, hit0;
    size_t len;
    void *tar = rc_tar(entries, 3, &len);
    json_t *t;
    json_int_t v;
    char *files1, *files2;

    it_upload(s, tar, len, art);
    free(tar);
    it_model_create(s, s->admin_token, "reuse");
    v = it_version_create(s, s->admin_token, "reuse", art, rc_smoke_spec("pass", 100, 0, NULL));
    ex0 = it_metric(s, "modelgate_runner_extractions_total");
    hit0 = it_metric(s, "modelgate_runner_cache_hits_total");

    rc_smoke_post(s, dep, "reuse", v, "{}", id1);
    t = rc_smoke_wait(s, "reuse", v, id1, 15000);
    if (strcmp(it_jstr(t, "state"), "passed") != 0)
        fail_msg("want passed: %s", json_dumps(t, JSON_COMPACT));
    files1 = seen("reuse", v, "files");
    assert_int_equal(it_metric(s, "modelgate_runner_extractions_total"), ex0 + 1);
    assert_int_equal(it_metric(s, "modelgate_runner_cache_hits_total"), hit0);

    rc_smoke_post(s, dep, "reuse", v, "{}", id2);
    t = rc_smoke_wait(s, "reuse", v, id2, 15000);
    if (strcmp(it_jstr(t, "state"), "passed") != 0)
        fail_msg("want passed: %s", json_dumps(t, JSON_COMPACT));
    files2 = seen("reuse", v, "files");
    /* Not extracted again, and the test saw the same files. */
    assert_int_equal(it_metric(s, "modelgate_runner_extractions_total"), ex0 + 1);
    assert_int_equal(it_metric(s, "modelgate_runner_cache_hits_total"), hit0 + 1);
    assert_string_equal(files1, files2);
    free(files1);
    free(files2);
}

/* The cache keeps 8 idle extractions: a ninth artifact evicts the least
 * recently used, which is extracted again when next tested. */
static void test_artifact_cache_is_bounded(void **state)
{
    struct mg_server *s = *state;
    enum { N = 9 };
    char art[N][IT_DIGEST_LEN + 1], id[64], content[64];
    json_int_t v[N];
    unsigned long long ex0;
    json_t *t;

    it_model_create(s, s->admin_token, "evict");
    for (int i = 0; i < N; i++) {
        struct rc_entry e = {"model.bin", content, NULL};
        size_t len;
        void *tar;

        it_fmt(content, sizeof(content), "artifact number %d", i);
        tar = rc_tar(&e, 1, &len);
        it_upload(s, tar, len, art[i]);
        free(tar);
        v[i] = it_version_create(s, s->admin_token, "evict", art[i],
                                 rc_smoke_spec("pass", 100, 0, NULL));
    }
    ex0 = it_metric(s, "modelgate_runner_extractions_total");
    for (int i = 0; i < N; i++) {
        rc_smoke_post(s, dep, "evict", v[i], "{}", id);
        t = rc_smoke_wait(s, "evict", v[i], id, 15000);
        if (strcmp(it_jstr(t, "state"), "passed") != 0)
            fail_msg("want passed: %s", json_dumps(t, JSON_COMPACT));
    }
    assert_int_equal(it_metric(s, "modelgate_runner_extractions_total"), ex0 + N);
    assert_true(it_data_dir_count(s, "runner-cache") <= 8);
    /* The first was the least recently used: gone, so extracted again. */
    rc_smoke_post(s, dep, "evict", v[0], "{}", id);
    t = rc_smoke_wait(s, "evict", v[0], id, 15000);
    if (strcmp(it_jstr(t, "state"), "passed") != 0)
        fail_msg("want passed: %s", json_dumps(t, JSON_COMPACT));
    assert_int_equal(it_metric(s, "modelgate_runner_extractions_total"), ex0 + N + 1);
    assert_true(it_data_dir_count(s, "runner-cache") <= 8);
}

static void test_passing_archive(void **state)
{
    struct mg_server *s = *state;
    static const struct rc_entry entries[] = {
        {"config.json", "{\"layers\":2}\n", NULL},
        {"weights", NULL, NULL},
        {"weights/w0.bin", "weights of layer zero", NULL},
        {"weights/w1.bin", "weights of layer one!", NULL},
    };
    char art[IT_DIGEST_LEN + 1], id[64], want_files[1024], model_dir[IT_PATH_MAX];
    char output[IT_PATH_MAX], work[IT_PATH_MAX], rel[128], want_args[4096];
    char e_dir[IT_PATH_MAX + 32], e_out[IT_PATH_MAX + 32];
    char d0[IT_DIGEST_LEN + 1], d1[IT_DIGEST_LEN + 1], d2[IT_DIGEST_LEN + 1];
    size_t len;
    void *tar = rc_tar(entries, 4, &len);
    struct it_resp *r;
    json_t *t, *lat, *checks;
    json_int_t v;
    char *files, *args, *reader;

    r = it_upload(s, tar, len, art);
    assert_string_equal(it_jstr(r->json, "media_type"), "application/x-tar");
    free(tar);
    it_model_create(s, s->admin_token, "passing");
    v = it_version_create(s, s->admin_token, "passing", art, rc_smoke_spec("pass", 100, 0, NULL));

    /* Publishers and readers may not queue a test; deployers may. */
    reader = it_token_create(s, "rd-only", "reader", NULL);
    r = it_jreq(s, "POST", "/api/v1/models/passing/versions/1/smoke-tests", reader, "{}");
    free(reader);
    it_expect_error(s, r, 403, "forbidden");
    reader = it_token_create(s, "pub-only", "publisher,reader", NULL);
    r = it_jreq(s, "POST", "/api/v1/models/passing/versions/1/smoke-tests", reader, "{}");
    free(reader);
    it_expect_error(s, r, 403, "forbidden");
    r = it_jreq(s, "POST", "/api/v1/models/passing/versions/1/smoke-tests", s->admin_token,
                "{\"gpu\":\"none\",\"extra\":1}");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_jreq(s, "POST", "/api/v1/models/passing/versions/1/smoke-tests", s->admin_token,
                "{\"gpu\":\"sometimes\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "gpu");
    r = it_jreq(s, "POST", "/api/v1/models/passing/versions/9/smoke-tests", s->admin_token, "{}");
    it_expect_error(s, r, 404, "not_found");

    r = rc_smoke_post(s, dep, "passing", v, "{}", id);
    assert_string_equal(it_jstr(r->json, "profile"), "pass");
    assert_string_equal(it_jstr(r->json, "trigger"), "manual");
    assert_true(strcmp(it_jstr(r->json, "state"), "queued") == 0 ||
                strcmp(it_jstr(r->json, "state"), "running") == 0);
    t = rc_smoke_wait(s, "passing", v, id, 15000);
    rc_expect_smoke_shape(t);
    if (strcmp(it_jstr(t, "state"), "passed") != 0)
        fail_msg("want passed: %s", json_dumps(t, JSON_COMPACT));
    assert_true(json_is_null(json_object_get(t, "reason")));
    assert_true(json_is_null(json_object_get(t, "gpu")));
    assert_true(json_is_null(json_object_get(t, "peak_gpu_memory_mib")));
    assert_int_equal(it_jint(t, "exit_code"), 0);
    rc_expect_contains(it_jstr(t, "log_tail"), "pass.sh: 3 file(s) in ");

    /* Nearest rank over the 20 values: p50 is the 10th (10), p95 the 19th
     * (30); interpolation would give 10.5 and 30.5. */
    lat = it_jobj(t, "latency_ms");
    assert_true(it_jnum(lat, "p50") == 10.0);
    assert_true(it_jnum(lat, "p95") == 30.0);
    assert_true(it_jnum(lat, "max") == 40.0);
    assert_int_equal(it_jint(lat, "samples"), 20);
    checks = it_jarr(t, "checks");
    assert_int_equal(json_array_size(checks), 2);
    assert_string_equal(it_jstr(json_array_get(checks, 0), "name"), "environment");
    assert_true(json_is_true(json_object_get(json_array_get(checks, 0), "passed")));
    assert_string_equal(it_jstr(json_array_get(checks, 1), "detail"), "3 file(s)");

    /* The environment, exactly. */
    it_data_path(s, it_fmt(rel, sizeof(rel), "runner/%s", id), work);
    it_fmt(model_dir, sizeof(model_dir), "%s/model", work);
    it_fmt(output, sizeof(output), "%s/output.json", work);
    it_fmt(e_dir, sizeof(e_dir), "MODELGATE_MODEL_DIR=%s", model_dir);
    it_fmt(e_out, sizeof(e_out), "MODELGATE_OUTPUT=%s", output);
    expect_env("passing", v,
               (const char *const[]){e_dir, e_out, "MODELGATE_MODEL=passing", "MODELGATE_VERSION=1",
                                     "CUDA_VISIBLE_DEVICES=", "PATH=" RC_PATH, "LANG=C.UTF-8",
                                     NULL});

    /* argv: whole words replaced, quotes grouped, the rest verbatim; run in
     * the test's directory with the address-space limit (1024 MiB). */
    args = seen("passing", v, "args");
    it_fmt(want_args, sizeof(want_args), "%s\n%s\ntwo words\npre{output}\n%s\n%d\n", model_dir,
           output, work, 1024 * 1024);
    assert_string_equal(args, want_args);
    free(args);

    /* The archive was extracted, byte for byte. */
    it_digest(entries[0].content, strlen(entries[0].content), d0);
    it_digest(entries[2].content, strlen(entries[2].content), d1);
    it_digest(entries[3].content, strlen(entries[3].content), d2);
    it_fmt(want_files, sizeof(want_files),
           "%s  ./config.json\n%s  ./weights/w0.bin\n%s  ./weights/w1.bin\n", d0 + 7, d1 + 7,
           d2 + 7);
    files = seen("passing", v, "files");
    assert_string_equal(files, want_files);
    free(files);

    /* The test's private directory is gone. */
    assert_false(it_data_exists(s, rel));
}

static void test_single_file_artifact(void **state)
{
    struct mg_server *s = *state;
    static const char bytes[] = "a single-file model (onnx, say)";
    char art[IT_DIGEST_LEN + 1], id[64], want[256];
    json_int_t v;
    json_t *t;
    char *files;

    it_upload(s, bytes, sizeof(bytes) - 1, art);
    it_model_create(s, s->admin_token, "single");
    v = it_version_create(s, s->admin_token, "single", art, rc_smoke_spec("pass", 0, 0, NULL));
    rc_smoke_post(s, dep, "single", v, NULL, id);
    t = rc_smoke_wait(s, "single", v, id, 15000);
    assert_string_equal(it_jstr(t, "state"), "passed");
    files = seen("single", v, "files");
    assert_string_equal(files, it_fmt(want, sizeof(want), "%s  ./artifact\n", art + 7));
    free(files);
}

static void test_failing_check(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64];
    json_int_t v;
    json_t *t, *checks;
    const char *tail;
    size_t n;

    it_upload(s, "check-fail model", 16, art);
    it_model_create(s, s->admin_token, "checkfail");
    v = it_version_create(s, s->admin_token, "checkfail", art,
                          rc_smoke_spec("check-fail", 0, 0, NULL));
    rc_smoke_post(s, dep, "checkfail", v, "{\"gpu\":\"none\"}", id);
    t = rc_smoke_wait(s, "checkfail", v, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    assert_int_equal(it_jint(t, "exit_code"), 0);
    rc_expect_contains(rc_reason(t), "'accuracy'");
    rc_expect_contains(rc_reason(t), "0.41 < 0.90");
    if (strstr(rc_reason(t), "warmup") != NULL)
        fail_msg("the reason names the check that passed: %s", rc_reason(t));
    checks = it_jarr(t, "checks");
    assert_int_equal(json_array_size(checks), 2);
    assert_string_equal(it_jstr(json_array_get(checks, 1), "name"), "accuracy");
    assert_true(json_is_false(json_object_get(json_array_get(checks, 1), "passed")));
    /* Latencies are still reported for a failed test. */
    assert_int_equal(it_jint(it_jobj(t, "latency_ms"), "samples"), 3);
    /* 50 KB of output: the tail keeps the last 8 KiB, up to the last line. */
    tail = it_jstr(t, "log_tail");
    if (strlen(tail) > 8192 || strlen(tail) < 4096)
        fail_msg("log_tail is %zu bytes, want the last 8 KiB or so", strlen(tail));
    n = strlen(tail);
    if (n < 21 || strcmp(tail + n - 21, "evaluating 3 samples\n") != 0)
        fail_msg("log_tail does not end with the last line: ...%s", tail + (n > 80 ? n - 80 : 0));
    rc_expect_contains(tail, "filler line 2999\n");
    if (strstr(tail, "filler line 0\n") != NULL)
        fail_msg("log_tail kept the beginning of the output");
}

static void test_exit_status_and_straggler(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64], path[IT_PATH_MAX];
    json_int_t v;
    json_t *t, *checks;
    char *pid;

    it_upload(s, "exit-1 model", 12, art);
    it_model_create(s, s->admin_token, "exits");
    v = it_version_create(s, s->admin_token, "exits", art, rc_smoke_spec("exit1", 0, 0, NULL));
    rc_smoke_post(s, dep, "exits", v, NULL, id);
    t = rc_smoke_wait(s, "exits", v, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    assert_int_equal(it_jint(t, "exit_code"), 1);
    rc_expect_contains(rc_reason(t), "exited with status 1");
    /* stdout and stderr both end up in the tail. */
    rc_expect_contains(it_jstr(t, "log_tail"), "loading weights");
    rc_expect_contains(it_jstr(t, "log_tail"), "boom: CUDA out of memory (simulated)");
    /* The checks it wrote before failing are kept. */
    checks = it_jarr(t, "checks");
    assert_int_equal(json_array_size(checks), 1);
    assert_string_equal(it_jstr(json_array_get(checks, 0), "name"), "load");

    /* The child it left running went with its process group. */
    pid = it_read_file(it_fmt(path, sizeof(path), "%s/straggler.pid", dir), NULL);
    assert_non_null(pid);
    free(pid);
    it_expect_no_procs(straggler, 3000);
}

static void test_malformed_output(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64];
    json_int_t v;
    json_t *t;

    it_upload(s, "bad json model", 14, art);
    it_model_create(s, s->admin_token, "badjson");
    v = it_version_create(s, s->admin_token, "badjson", art, rc_smoke_spec("badjson", 0, 0, NULL));
    rc_smoke_post(s, dep, "badjson", v, NULL, id);
    t = rc_smoke_wait(s, "badjson", v, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    assert_int_equal(it_jint(t, "exit_code"), 0);
    rc_expect_contains(rc_reason(t), "not a JSON object");
    assert_true(json_is_null(json_object_get(t, "latency_ms")));
}

static void test_p95_over_budget(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64];
    json_int_t v1, v2;
    json_t *t, *lat;

    it_upload(s, "slow model", 10, art);
    it_model_create(s, s->admin_token, "slow");
    v1 = it_version_create(s, s->admin_token, "slow", art, rc_smoke_spec("slow", 50, 0, NULL));
    rc_smoke_post(s, dep, "slow", v1, NULL, id);
    t = rc_smoke_wait(s, "slow", v1, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    lat = it_jobj(t, "latency_ms");
    assert_true(it_jnum(lat, "p50") == 55.0);
    assert_true(it_jnum(lat, "p95") == 120.0);
    assert_true(it_jnum(lat, "max") == 120.0);
    rc_expect_contains(rc_reason(t), "p95");
    rc_expect_contains(rc_reason(t), "120");
    rc_expect_contains(rc_reason(t), "50");

    /* Within a budget of 120 (p95 equal to the budget passes). */
    v2 = it_version_create(s, s->admin_token, "slow", art, rc_smoke_spec("slow", 120, 0, NULL));
    rc_smoke_post(s, dep, "slow", v2, NULL, id);
    t = rc_smoke_wait(s, "slow", v2, id, 15000);
    assert_string_equal(it_jstr(t, "state"), "passed");
}

static void test_unknown_profile_rejects_promotion(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64], pid[64];
    json_int_t v1, v2;
    json_t *t, *gate;
    struct it_resp *r;

    it_upload(s, "unknown profile model", 21, art);
    it_model_create(s, s->admin_token, "noprof");
    v1 = it_version_create(s, s->admin_token, "noprof", art, rc_smoke_spec("nosuch", 0, 0, NULL));
    rc_smoke_post(s, dep, "noprof", v1, NULL, id);
    t = rc_smoke_wait(s, "noprof", v1, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "error");
    assert_string_equal(it_jstr(t, "profile"), "nosuch");
    rc_expect_contains(rc_reason(t), "nosuch");
    for (size_t i = 0; i < NPROFILES; i++)
        rc_expect_contains(rc_reason(t), PROFILES[i]);

    /* A policy that requires a smoke test: the promotion is rejected with
     * that reason. */
    it_policy_put(s, "noprof", "production", "{\"smoke\":{\"required\":true,\"gpu\":\"none\"}}");
    r = it_promote(s, dep, "noprof", v1, "production", pid);
    assert_string_equal(it_jstr(r->json, "state"), "evaluating");
    r = it_promotion_wait(s, s->admin_token, pid, "rejected", 15000);
    gate = it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "failed");
    rc_expect_contains(it_jstr(gate, "detail"), "unknown smoke profile 'nosuch'");
    assert_non_null(rc_event(r->json, "rejected"));
    r = it_get(s, "/api/v1/models/noprof/aliases/production", s->admin_token);
    if (r->status == 200 && json_array_size(json_object_get(r->json, "routes")) != 0)
        fail_msg("a rejected promotion routed traffic: %s", r->body);

    /* A version that names no profile at all. */
    v2 = it_version_create(s, s->admin_token, "noprof", art, rc_smoke_spec(NULL, 0, 0, NULL));
    r = it_promote(s, dep, "noprof", v2, "production", pid);
    r = it_promotion_wait(s, s->admin_token, pid, "rejected", 15000);
    gate = it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "failed");
    rc_expect_contains(it_jstr(gate, "detail"), "no smoke.profile");
}

static void test_gpu_required_without_nvml(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64], pid[64];
    json_int_t v1, v2;
    json_t *t, *gate;
    struct it_resp *r;

    it_upload(s, "needs a gpu", 11, art);
    it_model_create(s, s->admin_token, "needgpu");
    v1 = it_version_create(s, s->admin_token, "needgpu", art, rc_smoke_spec("pass", 0, 0, NULL));

    /* Asked for directly. */
    rc_smoke_post(s, dep, "needgpu", v1, "{\"gpu\":\"required\"}", id);
    t = rc_smoke_wait(s, "needgpu", v1, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "requires a GPU");
    rc_expect_contains(rc_reason(t), "libnvidia-ml.so.1");
    assert_true(json_is_null(json_object_get(t, "gpu")));

    /* Through a policy: the smoke gate fails naming the missing GPU. With no
     * resources declared the fit gate is skipped. */
    it_policy_put(s, "needgpu", "production",
                  "{\"smoke\":{\"required\":true,\"gpu\":\"required\"}}");
    r = it_promote(s, dep, "needgpu", v1, "production", pid);
    r = it_promotion_wait(s, s->admin_token, pid, "rejected", 15000);
    gate = it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "failed");
    rc_expect_contains(it_jstr(gate, "detail"), "requires a GPU");
    gate = it_gate_find(it_jarr(r->json, "gates"), "fit", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "skipped");
    t = rc_smoke_wait_state(s, "needgpu", v1, "failed", 5000);
    assert_string_equal(it_jstr(t, "trigger"), "promotion");

    /* With resources the fit gate fails too: the runner reports no GPU. */
    v2 = it_version_create(s, s->admin_token, "needgpu", art,
                           rc_smoke_spec("pass", 0, 1000000000, "fp16"));
    r = it_get(s, "/api/v1/models/needgpu/versions/2/gates?alias=production", s->admin_token);
    it_expect_status(s, r, 200);
    (void)v2;
    gate = it_gate_find(it_jarr(r->json, "gates"), "fit", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "failed");
    assert_false(json_is_true(json_object_get(r->json, "passed")));
}

static void test_gpu_preferred_runs_on_cpu(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], pid[64];
    json_int_t v;
    json_t *t;
    struct it_resp *r;
    char *env;

    it_upload(s, "cpu is fine", 11, art);
    it_model_create(s, s->admin_token, "cpuok");
    v = it_version_create(s, s->admin_token, "cpuok", art,
                          rc_smoke_spec("pass", 0, 1000000000, "fp16"));
    it_policy_put(s, "cpuok", "production",
                  "{\"smoke\":{\"required\":true,\"gpu\":\"preferred\"}}");
    r = it_promote(s, dep, "cpuok", v, "production", pid);
    r = it_promotion_wait(s, s->admin_token, pid, "succeeded", 15000);
    assert_string_equal(it_jstr(it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL), "status"),
                        "passed");
    /* gpu "preferred": no fit gate. */
    assert_null(it_gate_find(it_jarr(r->json, "gates"), "fit", NULL));
    t = rc_smoke_wait_state(s, "cpuok", v, "passed", 5000);
    assert_true(json_is_null(json_object_get(t, "gpu")));
    env = seen("cpuok", v, "env");
    if (strstr(env, "\nCUDA_VISIBLE_DEVICES=\n") == NULL &&
        strncmp(env, "CUDA_VISIBLE_DEVICES=\n", 22) != 0)
        fail_msg("CUDA_VISIBLE_DEVICES should be set and empty: %s", env);
    free(env);
}

static void test_smoke_gate_waits_while_running(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], pid[64], path[IT_PATH_MAX], routes[128];
    json_int_t v1, v2;
    json_t *t, *gate;
    struct it_resp *r;

    it_upload(s, "gated model", 11, art);
    it_model_create(s, s->admin_token, "gatewait");
    v1 = it_version_create(s, s->admin_token, "gatewait", art, rc_smoke_spec("pass", 0, 0, NULL));
    v2 = it_version_create(s, s->admin_token, "gatewait", art, rc_smoke_spec("gated", 0, 0, NULL));
    it_alias_to(s, s->admin_token, "gatewait", "production", v1, 10);
    it_policy_put(s, "gatewait", "production", "{\"smoke\":{\"required\":true,\"gpu\":\"none\"}}");

    r = it_promote(s, dep, "gatewait", v2, "production", pid);
    assert_string_equal(it_jstr(r->json, "state"), "evaluating");
    gate = it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "pending");

    /* The test runs and blocks on DIR/gated.release. */
    t = rc_smoke_wait_state(s, "gatewait", v2, "running", 10000);
    assert_string_equal(it_jstr(t, "trigger"), "promotion");
    it_expect_rfc3339(it_jstr(t, "started_at"));
    assert_true(json_is_null(json_object_get(t, "finished_at")));
    r = it_get(s, "/api/v1/runner", s->admin_token);
    assert_true(it_jint(r->json, "running") >= 1);
    r = it_get(s, "/api/v1/models/gatewait/versions/2/gates?alias=production", s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL), "status"),
                        "running");
    assert_true(json_is_true(json_object_get(r->json, "pending")));
    /* While it runs the promotion waits and the alias stays on v1. */
    r = it_promotion_get(s, s->admin_token, pid);
    assert_string_equal(it_jstr(r->json, "state"), "evaluating");
    r = it_alias_get(s, s->admin_token, "gatewait", "production");
    it_routes_text(json_object_get(r->json, "routes"), routes, sizeof(routes));
    assert_string_equal(routes, "v1:100");
    t = rc_smoke_wait_state(s, "gatewait", v2, "running", 1000);

    /* Release it: the promotion proceeds. */
    it_write_file(it_fmt(path, sizeof(path), "%s/gated.release", dir), "go\n");
    r = it_promotion_wait(s, s->admin_token, pid, "succeeded", 15000);
    assert_string_equal(it_jstr(it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL), "status"),
                        "passed");
    r = it_alias_get(s, s->admin_token, "gatewait", "production");
    it_routes_text(json_object_get(r->json, "routes"), routes, sizeof(routes));
    assert_string_equal(routes, "v2:100");
}

static void test_mid_rollout_failure_rolls_back(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], pid[64], id[64], path[IT_PATH_MAX], routes[128], gw[256];
    json_int_t v1, v2;
    json_t *t, *ev, *items, *h;
    struct it_resp *r;
    size_t i;

    it_upload(s, "canary model", 12, art);
    it_model_create(s, s->admin_token, "canary");
    v1 = it_version_create(s, s->admin_token, "canary", art, rc_smoke_spec("flip", 0, 0, NULL));
    v2 = it_version_create(s, s->admin_token, "canary", art, rc_smoke_spec("flip", 0, 0, NULL));
    r = it_jreq(s, "PUT", "/api/v1/gateways/hap", s->admin_token,
                it_fmt(gw, sizeof(gw),
                       "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                       "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                       "\"models\":[\"canary\"],\"aliases\":[\"production\"]}",
                       hap_stats_port));
    if (r->status != 200 && r->status != 201)
        it_expect_status(s, r, 201);
    it_alias_to(s, s->admin_token, "canary", "production", v1, 10);
    expect_haproxy(100, 0);

    it_policy_put(s, "canary", "production",
                  "{\"smoke\":{\"required\":true,\"gpu\":\"none\"},"
                  "\"rollout\":{\"steps\":[20,100],\"bake_seconds\":3600,\"auto_advance\":false}}");
    r = it_promote(s, dep, "canary", v2, "production", pid);
    assert_string_equal(it_jstr(r->json, "state"), "evaluating");
    r = it_promotion_wait(s, s->admin_token, pid, "rolling_out", 15000);
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 20);
    expect_haproxy(80, 20);
    /* The route change queued tests of both versions (the runner is a
     * gateway too); they ran and passed. */
    rc_alias_in_sync(s, "canary", "production");
    rc_runner_idle(s, 15000);
    r = rc_smoke_list(s, "canary", v2);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 2);
    assert_string_equal(it_jstr(json_array_get(it_jarr(r->json, "items"), 0), "trigger"), "route");
    assert_string_equal(it_jstr(json_array_get(it_jarr(r->json, "items"), 1), "trigger"),
                        "promotion");
    json_array_foreach(it_jarr(r->json, "items"), i, t)
        assert_string_equal(it_jstr(t, "state"), "passed");

    /* The candidate breaks; a deployer re-runs its test. */
    it_write_file(it_fmt(path, sizeof(path), "%s/flip", dir), "fail\n");
    r = rc_smoke_post(s, dep, "canary", v2, "{}", id);
    assert_string_equal(it_jstr(r->json, "trigger"), "manual");
    t = rc_smoke_wait(s, "canary", v2, id, 15000);
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "canary-health");

    /* Rolled back, with the reason, and the alias is on the baseline. */
    r = it_promotion_wait(s, s->admin_token, pid, "rolled_back", 15000);
    ev = rc_event(r->json, "rolled_back");
    assert_non_null(ev);
    rc_expect_contains(it_jstr(ev, "detail"), "smoke test of v2 failed");
    rc_expect_contains(it_jstr(ev, "detail"), "canary-health");
    rc_expect_contains(it_jstr(ev, "detail"), "error rate 12% over 1%");
    r = it_alias_get(s, s->admin_token, "canary", "production");
    it_routes_text(json_object_get(r->json, "routes"), routes, sizeof(routes));
    assert_string_equal(routes, "v1:100");
    r = it_get(s, "/api/v1/models/canary/aliases/production/history", s->admin_token);
    it_expect_status(s, r, 200);
    items = it_jarr(r->json, "items");
    h = json_array_get(items, 0);
    assert_non_null(h);
    it_routes_text(json_object_get(h, "routes"), routes, sizeof(routes));
    assert_string_equal(routes, "v1:100");
    assert_string_equal(it_jstr(h, "promotion"), pid);

    /* The real HAProxy agrees. */
    expect_haproxy(100, 0);
    it_write_file(path, "pass\n");
}

/* Replace the bytes of a stored blob (the server never rewrites them). */
static void overwrite_blob(struct mg_server *s, const char *digest, const void *data, size_t len)
{
    char path[IT_PATH_MAX];
    struct stat st;

    it_blob_file(s, digest, path);
    if (stat(path, &st) != 0)
        fail_msg("the blob of %s is not at %s: %s", digest, path, strerror(errno));
    if (chmod(path, 0600) != 0)
        fail_msg("chmod %s: %s", path, strerror(errno));
    it_write_bytes(path, data, len);
    chmod(path, st.st_mode & 07777);
}

static void test_archive_escape_refused(void **state)
{
    struct mg_server *s = *state;
    char mark[64], outside[IT_PATH_MAX], lname[128], p[IT_PATH_MAX];
    char up1[128], up5[128], abs_path[IT_PATH_MAX], planted[160];
    const char *tmp = getenv("TMPDIR"), *found;
    struct it_resp *r;
    json_t *t;

    it_marker(mark, sizeof(mark), "escape");
    it_fmt(outside, sizeof(outside), "%s/outside", dir);
    if (mkdir(outside, 0700) != 0)
        fail_msg("mkdir %s: %s", outside, strerror(errno));
    it_fmt(up1, sizeof(up1), "../%s-up1", mark);
    /* From ROOT/data/runner/<id>/model, five levels up is $TMPDIR. */
    it_fmt(up5, sizeof(up5), "../../../../../%s-up5", mark);
    it_fmt(abs_path, sizeof(abs_path), "%s/%s-abs", outside, mark);
    it_fmt(lname, sizeof(lname), "%s-link", mark);
    it_fmt(planted, sizeof(planted), "%s-link/planted", mark);
    {
        const struct {
            const char *what;
            struct rc_entry e[2];
        } cases[] = {
            {"'../' one level", {{"ok.txt", "fine", NULL}, {up1, "escaped", NULL}}},
            {"'../' up to TMPDIR", {{"ok.txt", "fine", NULL}, {up5, "escaped", NULL}}},
            {"an absolute path", {{"ok.txt", "fine", NULL}, {abs_path, "escaped", NULL}}},
            {"a symbolic link out", {{lname, NULL, outside}, {planted, "escaped", NULL}}},
        };

        it_model_create(s, s->admin_token, "escape");
        for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
            char vname[64], art[IT_DIGEST_LEN + 1], id[64], seen_path[IT_PATH_MAX];
            struct rc_entry valid = {vname, "a valid archive", NULL};
            size_t len, vlen;
            void *tar = rc_tar(cases[k].e, 2, &len), *vtar;
            json_int_t v;

            /* Uploads refuse such archives... */
            r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                           tar, len);
            it_expect_error(s, r, 400, "invalid_argument");

            /* ...so a valid one is stored and then replaced on disk. */
            it_fmt(vname, sizeof(vname), "valid-%zu.bin", k);
            vtar = rc_tar(&valid, 1, &vlen);
            r = it_upload(s, vtar, vlen, art);
            assert_int_equal(it_jint(r->json, "files"), 1);
            free(vtar);
            overwrite_blob(s, art, tar, len);
            free(tar);
            v = it_version_create(s, s->admin_token, "escape", art,
                                  rc_smoke_spec("pass", 0, 0, NULL));
            rc_smoke_post(s, dep, "escape", v, NULL, id);
            t = rc_smoke_wait(s, "escape", v, id, 15000);
            if (strcmp(it_jstr(t, "state"), "failed") != 0 ||
                strstr(rc_reason(t), "extract") == NULL)
                fail_msg("%s: want failed with an extraction reason: %s", cases[k].what,
                         json_dumps(t, JSON_COMPACT));
            /* The command never ran on it. */
            it_fmt(seen_path, sizeof(seen_path), "%s/seen.escape.%lld.env", dir, (long long)v);
            if (it_exists(seen_path))
                fail_msg("%s: the smoke command ran on a refused archive", cases[k].what);
        }
    }

    /* Nothing was written outside: not next to the model directory, not in
     * the server's scratch space or ours, not in TMPDIR. */
    rc_runner_idle(s, 10000);
    if ((found = it_find_name(s->root, mark)) != NULL)
        fail_msg("an archive entry escaped to %s", found);
    if ((found = it_find_name(dir, mark)) != NULL)
        fail_msg("an archive entry escaped to %s", found);
    it_fmt(p, sizeof(p), "%s/%s-up5", tmp && *tmp ? tmp : "/tmp", mark);
    if (it_exists(p)) {
        unlink(p);
        fail_msg("an archive entry escaped to %s", p);
    }
    assert_int_equal(it_data_dir_count(s, "runner"), 0);
}

/* A second server with a 2 s timeout: the hung command and its child are
 * killed with their process group. */
static void test_timeout_kills_group(void **state)
{
    char *mark = hang_mark, arg[IT_PATH_MAX + 128], nvml[IT_PATH_MAX + 64];
    char art[IT_DIGEST_LEN + 1];
    char id[64], path[IT_PATH_MAX];
    json_t *t;
    char *leader;
    int64_t started;

    (void)state;
    it_marker(hang_mark, sizeof(hang_mark), "mg-hang");
    write_script("hang.sh", RC_HANG_SH, mark);
    profile_arg(arg, sizeof(arg), "hang", "");
    it_fmt(nvml, sizeof(nvml), "--nvml-library=%s/absent/libnvidia-ml.so.1", dir);
    srv2 = it_server_start(
        (const char *const[]){arg, nvml, "--smoke-timeout=2", "--smoke-interval=0", NULL});
    it_upload(srv2, "hanging model", 13, art);
    it_model_create(srv2, srv2->admin_token, "hang");
    it_version_create(srv2, srv2->admin_token, "hang", art, rc_smoke_spec("hang", 0, 0, NULL));
    started = it_now_ms();
    rc_smoke_post(srv2, srv2->admin_token, "hang", 1, NULL, id);

    /* While it runs, both processes exist. */
    rc_smoke_wait_state(srv2, "hang", 1, "running", 10000);
    it_wait_procs(mark, 2);

    t = rc_smoke_wait(srv2, "hang", 1, id, 20000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "timed out after 2000 ms");
    assert_int_equal(it_jint(t, "exit_code"), 128 + SIGKILL);
    rc_expect_contains(it_jstr(t, "log_tail"), "hanging");
    if (it_jint(t, "duration_ms") < 2000 || it_jint(t, "duration_ms") > it_scaled_ms(8000))
        fail_msg("killed after %lld ms, want about 2000", (long long)it_jint(t, "duration_ms"));
    if (it_now_ms() - started < 2000)
        fail_msg("finished before the timeout");
    leader = it_read_file(it_fmt(path, sizeof(path), "%s/hang.leader", dir), NULL);
    assert_non_null(leader);
    free(leader);
    it_expect_no_procs(mark, 3000);
}

/* A command that cannot be started: exit 127 and why, in the log tail. */
static void test_missing_program(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], id[64];
    json_t *t;

    it_upload(s, "missing program model", 21, art);
    it_model_create(s, s->admin_token, "missing");
    it_version_create(s, s->admin_token, "missing", art, rc_smoke_spec("missing", 0, 0, NULL));
    rc_smoke_post(s, dep, "missing", 1, NULL, id);
    t = rc_smoke_wait(s, "missing", 1, id, 15000);
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    assert_int_equal(it_jint(t, "exit_code"), 127);
    rc_expect_contains(rc_reason(t), "status 127");
    rc_expect_contains(it_jstr(t, "log_tail"), "/nonexistent/smoke-command");
}

/* Run modelgated with one extra argument, expecting it to refuse to start:
 * its exit status (-1 when it still ran after 10 s); its output goes to
 * log. */
static int daemon_exit_status(const char *extra, const char *log)
{
    char data[IT_PATH_MAX], port[IT_PATH_MAX];
    const char *bin = getenv("MODELGATED");
    int64_t deadline = it_deadline(10000);
    int status;
    pid_t pid;

    if (bin == NULL)
        fail_msg("MODELGATED is not set");
    it_fmt(data, sizeof(data), "%s/refused-data", dir);
    it_fmt(port, sizeof(port), "%s/refused-port", dir);
    mkdir(data, 0700);
    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execl(bin, bin, "--listen", "127.0.0.1:0", "--data-dir", data, "--port-file", port,
              "--smoke-interval=0", extra, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (it_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        it_pause_ms(10);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A --smoke-profile that cannot be parsed: the server refuses to start and
 * names the option. */
static void test_bad_profiles_refused(void **state)
{
    static const char *const bad[] = {
        "--smoke-profile=no-equals-sign",
        "--smoke-profile=empty=",
        "--smoke-profile=Upper_Case=/bin/true",
        "--smoke-profile=quote=/bin/sh 'unclosed",
        NULL,
    };
    char log[IT_PATH_MAX];

    (void)state;
    it_fmt(log, sizeof(log), "%s/refused.log", dir);
    for (size_t i = 0; bad[i]; i++) {
        int st = daemon_exit_status(bad[i], log);
        char *text = it_read_file(log, NULL);

        if (st == 0 || st == -1)
            fail_msg("modelgated %s: %s, want a refusal at start-up; output: %s", bad[i],
                     st == 0 ? "exited 0" : "started", text ? text : "");
        if (text == NULL || strstr(text, "smoke-profile") == NULL)
            fail_msg("modelgated %s exited %d without naming --smoke-profile: %s", bad[i], st,
                     text ? text : "(no output)");
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_runner_info_without_nvml, test_teardown),
        cmocka_unit_test_teardown(test_passing_archive, test_teardown),
        cmocka_unit_test_teardown(test_single_file_artifact, test_teardown),
        cmocka_unit_test_teardown(test_failing_check, test_teardown),
        cmocka_unit_test_teardown(test_exit_status_and_straggler, test_teardown),
        cmocka_unit_test_teardown(test_malformed_output, test_teardown),
        cmocka_unit_test_teardown(test_p95_over_budget, test_teardown),
        cmocka_unit_test_teardown(test_unknown_profile_rejects_promotion, test_teardown),
        cmocka_unit_test_teardown(test_gpu_required_without_nvml, test_teardown),
        cmocka_unit_test_teardown(test_gpu_preferred_runs_on_cpu, test_teardown),
        cmocka_unit_test_teardown(test_smoke_gate_waits_while_running, test_teardown),
        cmocka_unit_test_teardown(test_mid_rollout_failure_rolls_back, test_teardown),
        cmocka_unit_test_teardown(test_archive_escape_refused, test_teardown),
        cmocka_unit_test_teardown(test_artifact_extracted_once, test_teardown),
        cmocka_unit_test_teardown(test_artifact_cache_is_bounded, test_teardown),
        cmocka_unit_test_teardown(test_timeout_kills_group, test_teardown),
        cmocka_unit_test_teardown(test_missing_program, test_teardown),
        cmocka_unit_test_teardown(test_bad_profiles_refused, test_teardown),
    };

    if (access(PC_HAPROXY, X_OK) != 0) {
        print_error("%s is missing: install the Debian package haproxy\n", PC_HAPROXY);
        return 1;
    }
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
