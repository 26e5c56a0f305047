/*
 * test_runner_nvml.c - the runner's GPU discovery and placement with a fake
 * NVML (tests/fakes/fake_nvml.c, a shared library whose path ctest passes
 * in MG_FAKE_NVML) loaded with --nvml-library, so it runs on machines
 * without a GPU.
 *
 * The fake reads its GPUs from DIR/gpus ("NAME:TOTAL_MIB:FREE_MIB,…") on
 * every query, so tests change free memory while the server runs, and the
 * smoke command itself can "use" GPU memory for the peak sampler to see.
 *
 * - GET /api/v1/runner lists both GPUs (name, uuid, memory) and the driver;
 * - a test runs on the GPU with the most free memory that fits the
 *   version's estimated_vram_gib, with CUDA_VISIBLE_DEVICES its UUID and no
 *   address-space limit, and records gpu {name, uuid, index} and the peak
 *   GPU memory it used;
 * - a version too big for every GPU's free memory fails with gpu "required"
 *   and runs on the CPU with "preferred";
 * - the fit gate (policy gpu "required") passes or fails against the
 *   largest GPU; a promotion that fits runs its smoke test on a GPU;
 * - NVML present but without devices, NVML whose init fails, and (where it
 *   is absent) the default libnvidia-ml.so.1: no GPU, never a crash.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "runner_common.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define UUID0 "GPU-fa4e0000-0000-4000-8000-000000000000"
#define UUID1 "GPU-fa4e0000-0000-4000-8000-000000000001"
#define IDLE_SPEC "A100:40960:10240,H100:81920:70000"

static struct mg_server *srv;
static struct mg_server *srv2; /* a server one test starts for itself */
static char dir[IT_PATH_MAX];
static char spec_path[IT_PATH_MAX];
static char dep[128];

/* Records its environment and address-space limit; when DIR/gpus.busy
 * exists it swaps it in for a second (the fake then reports that memory as
 * used), then puts DIR/gpus.idle back. Fails its check without a GPU when
 * DIR/need-gpu exists. */
static const char GPU_SH[] =
    "seen=\"@DIR@/seen.$MODELGATE_MODEL.$MODELGATE_VERSION\"\n"
    "tr '\\0' '\\n' < /proc/$$/environ > \"$seen.env\"\n"
    "ulimit -v > \"$seen.ulimit\"\n"
    "if [ -e @DIR@/gpus.busy ]; then\n"
    "  cp @DIR@/gpus.busy @DIR@/gpus.tmp && mv @DIR@/gpus.tmp @DIR@/gpus\n"
    "  sleep 1\n"
    "  cp @DIR@/gpus.idle @DIR@/gpus.tmp && mv @DIR@/gpus.tmp @DIR@/gpus\n"
    "fi\n"
    "echo \"gpu.sh: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\"\n"
    "printf '{\"latencies_ms\":[1,2,3],\"checks\":[{\"name\":\"cuda\",\"passed\":true,"
    "\"detail\":\"%s\"}]}' \"$CUDA_VISIBLE_DEVICES\" > \"$MODELGATE_OUTPUT\"\n";

/* Replace the GPUs the fake reports (atomically: write, then rename). */
static void set_gpus(const char *spec)
{
    char tmp[IT_PATH_MAX];

    it_write_file(it_fmt(tmp, sizeof(tmp), "%s/gpus.set", dir), spec);
    if (rename(tmp, spec_path) != 0)
        fail_msg("rename %s: %s", tmp, strerror(errno));
}

static const char *fake_nvml(void)
{
    const char *lib = getenv("MG_FAKE_NVML");

    if (lib == NULL || *lib == '\0')
        fail_msg("MG_FAKE_NVML is not set: run under ctest, or export "
                 "MG_FAKE_NVML=/path/to/libfake_nvml.so");
    if (access(lib, R_OK) != 0)
        fail_msg("MG_FAKE_NVML=%s: %s", lib, strerror(errno));
    return lib;
}

static int setup(void **state)
{
    char nvml[IT_PATH_MAX + 32], prof[IT_PATH_MAX + 128];
    char *secret;

    it_mkdtemp(dir, "runner-nvml");
    it_fmt(spec_path, sizeof(spec_path), "%s/gpus", dir);
    rc_write_script(dir, "gpu.sh", GPU_SH, NULL);
    set_gpus(IDLE_SPEC);
    setenv("FAKE_NVML_GPUS_FILE", spec_path, 1);
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_FAIL_INIT");
    it_fmt(nvml, sizeof(nvml), "--nvml-library=%s", fake_nvml());
    it_fmt(prof, sizeof(prof), "--smoke-profile=gpu=/bin/sh %s/gpu.sh {model_dir} {output}", dir);
    srv = it_server_start((const char *const[]){nvml, prof, "--smoke-interval=0",
                                                "--smoke-timeout=30", "--runner-workers=1",
                                                "--smoke-memory-mib=1024", NULL});
    secret = it_token_create(srv, "dep", "deployer,reader", NULL);
    snprintf(dep, sizeof(dep), "%s", secret);
    free(secret);
    it_release(srv);
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
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

/* Every test starts from the idle GPUs and no simulated load. */
static int test_setup(void **state)
{
    char path[IT_PATH_MAX];

    (void)state;
    set_gpus(IDLE_SPEC);
    unlink(it_fmt(path, sizeof(path), "%s/gpus.busy", dir));
    return 0;
}

static int test_teardown(void **state)
{
    if (srv2 != NULL) {
        it_server_stop(srv2);
        it_server_free(&srv2);
    }
    unsetenv("FAKE_NVML_FAIL_INIT");
    return it_test_teardown(state);
}

/* The value of NAME in what the smoke command was exec'd with (malloc'd),
 * or NULL when it was not set. */
static char *seen_env(const char *model, json_int_t version, const char *name)
{
    char path[IT_PATH_MAX], *text, *save = NULL, *line, *out = NULL;
    size_t n = strlen(name);

    text = it_read_file(
        it_fmt(path, sizeof(path), "%s/seen.%s.%lld.env", dir, model, (long long)version), NULL);
    if (text == NULL)
        fail_msg("the smoke command did not record its environment (%s)", path);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, name, n) == 0 && line[n] == '=') {
            out = strdup(line + n + 1);
            break;
        }
    }
    free(text);
    return out;
}

static char *seen_ulimit(const char *model, json_int_t version)
{
    char path[IT_PATH_MAX];
    char *text = it_read_file(
        it_fmt(path, sizeof(path), "%s/seen.%s.%lld.ulimit", dir, model, (long long)version), NULL);

    if (text == NULL)
        fail_msg("the smoke command did not record its limit (%s)", path);
    return text;
}

/* Run a test of the version with body (JSON text) and wait for it. */
static json_t *smoke_run(struct mg_server *s, const char *model, json_int_t v, const char *body)
{
    char id[64];

    rc_smoke_post(s, dep, model, v, body, id);
    return rc_smoke_wait(s, model, v, id, 15000);
}

#define expect_on_gpu(t, name, uuid, index)                                                        \
    expect_on_gpu_at(t, name, uuid, index, __FILE__, __LINE__)

static void expect_on_gpu_at(const json_t *t, const char *name, const char *uuid, int index,
                             const char *file, int line)
{
    json_t *gpu = json_object_get(t, "gpu");
    const char *gname = json_string_value(json_object_get(gpu, "name"));
    const char *guuid = json_string_value(json_object_get(gpu, "uuid"));
    char *text;

    if (json_is_object(gpu) && gname != NULL && strcmp(gname, name) == 0 && guuid != NULL &&
        strcmp(guuid, uuid) == 0 && json_integer_value(json_object_get(gpu, "index")) == index &&
        json_is_integer(json_object_get(gpu, "index")))
        return;
    text = json_dumps(t, JSON_COMPACT);
    print_error("want the test on GPU %d (%s, %s): %s\n", index, name, uuid, text);
    free(text);
    _fail(file, line);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_runner_lists_gpus(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r = it_get(s, "/api/v1/runner", s->admin_token);
    json_t *gpus, *g;

    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "nvml"), "available");
    assert_null(json_object_get(r->json, "nvml_error"));
    assert_string_equal(it_jstr(r->json, "driver"), "550.54.15-fake");
    gpus = it_jarr(r->json, "gpus");
    assert_int_equal(json_array_size(gpus), 2);
    g = json_array_get(gpus, 0);
    assert_int_equal(it_jint(g, "index"), 0);
    assert_string_equal(it_jstr(g, "name"), "NVIDIA A100");
    assert_string_equal(it_jstr(g, "uuid"), UUID0);
    assert_int_equal(it_jint(g, "memory_total_mib"), 40960);
    assert_int_equal(it_jint(g, "memory_free_mib"), 10240);
    g = json_array_get(gpus, 1);
    assert_int_equal(it_jint(g, "index"), 1);
    assert_string_equal(it_jstr(g, "name"), "NVIDIA H100");
    assert_string_equal(it_jstr(g, "uuid"), UUID1);
    assert_int_equal(it_jint(g, "memory_total_mib"), 81920);
    assert_int_equal(it_jint(g, "memory_free_mib"), 70000);
    assert_int_equal(json_array_size(it_jarr(r->json, "profiles")), 1);

    /* A fresh query every time: free memory follows the device. */
    set_gpus("A100:40960:20480,H100:81920:1024");
    r = it_get(s, "/api/v1/runner", s->admin_token);
    gpus = it_jarr(r->json, "gpus");
    assert_int_equal(it_jint(json_array_get(gpus, 0), "memory_free_mib"), 20480);
    assert_int_equal(it_jint(json_array_get(gpus, 1), "memory_free_mib"), 1024);
}

static void test_placement_by_free_memory(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1];
    json_int_t small, mid;
    json_t *t;
    char *cuda, *lim;

    it_upload(s, "gpu placement model", 19, art);
    it_model_create(s, s->admin_token, "place");
    /* 1e9 fp16: 2.42 GiB; 7e9 fp16: 16.95 GiB. */
    small = it_version_create(s, s->admin_token, "place", art,
                              rc_smoke_spec("gpu", 0, 1000000000, "fp16"));
    mid = it_version_create(s, s->admin_token, "place", art,
                            rc_smoke_spec("gpu", 0, 7000000000, "fp16"));

    /* H100 has the most free memory. */
    t = smoke_run(s, "place", small, "{\"gpu\":\"required\"}");
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "passed");
    expect_on_gpu(t, "NVIDIA H100", UUID1, 1);
    cuda = seen_env("place", small, "CUDA_VISIBLE_DEVICES");
    assert_non_null(cuda);
    assert_string_equal(cuda, UUID1);
    free(cuda);
    /* GPU runtimes map huge address ranges: no RLIMIT_AS on a GPU run. */
    lim = seen_ulimit("place", small);
    assert_string_equal(lim, "unlimited\n");
    free(lim);
    assert_string_equal(it_jstr(json_array_get(it_jarr(t, "checks"), 0), "detail"), UUID1);
    assert_true(json_is_integer(json_object_get(t, "peak_gpu_memory_mib")));

    /* Now the A100 has more free memory: the same version goes there. */
    set_gpus("A100:40960:40000,H100:81920:30000");
    t = smoke_run(s, "place", small, "{\"gpu\":\"required\"}");
    assert_string_equal(it_jstr(t, "state"), "passed");
    expect_on_gpu(t, "NVIDIA A100", UUID0, 0);
    cuda = seen_env("place", small, "CUDA_VISIBLE_DEVICES");
    assert_string_equal(cuda, UUID0);
    free(cuda);

    /* 16.95 GiB: fits only the H100's 20 GiB free, not the A100's 10 GiB,
     * whatever the order. */
    set_gpus("A100:40960:10240,H100:81920:20480");
    t = smoke_run(s, "place", mid, "{\"gpu\":\"required\"}");
    assert_string_equal(it_jstr(t, "state"), "passed");
    expect_on_gpu(t, "NVIDIA H100", UUID1, 1);
    set_gpus("H100:81920:10240,A100:40960:20480");
    t = smoke_run(s, "place", mid, "{\"gpu\":\"preferred\"}");
    assert_string_equal(it_jstr(t, "state"), "passed");
    expect_on_gpu(t, "NVIDIA A100", UUID1, 1);
}

static void test_peak_gpu_memory(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], path[IT_PATH_MAX];
    json_int_t v;
    json_t *t;

    it_upload(s, "gpu memory model", 16, art);
    it_model_create(s, s->admin_token, "peak");
    v = it_version_create(s, s->admin_token, "peak", art,
                          rc_smoke_spec("gpu", 0, 1000000000, "fp16"));
    /* While it runs the command takes 1536 MiB of the H100. */
    it_write_file(it_fmt(path, sizeof(path), "%s/gpus.idle", dir), IDLE_SPEC);
    it_write_file(it_fmt(path, sizeof(path), "%s/gpus.busy", dir),
                  "A100:40960:10240,H100:81920:68464");
    t = smoke_run(s, "peak", v, "{\"gpu\":\"required\"}");
    assert_string_equal(it_jstr(t, "state"), "passed");
    expect_on_gpu(t, "NVIDIA H100", UUID1, 1);
    assert_int_equal(it_jint(t, "peak_gpu_memory_mib"), 1536);
    unlink(path);
}

static void test_too_big_for_every_gpu(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1];
    json_int_t huge, tight;
    json_t *t;
    char *cuda;

    it_upload(s, "too big model", 13, art);
    it_model_create(s, s->admin_token, "huge");
    /* 70e9 fp16: 169.5 GiB, more than any GPU has at all. */
    huge = it_version_create(s, s->admin_token, "huge", art,
                             rc_smoke_spec("gpu", 0, 70000000000, "fp16"));
    t = smoke_run(s, "huge", huge, "{\"gpu\":\"required\"}");
    rc_expect_smoke_shape(t);
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "no GPU has 169.");
    assert_true(json_is_null(json_object_get(t, "gpu")));
    /* preferred: on the CPU, with every GPU hidden. */
    t = smoke_run(s, "huge", huge, "{\"gpu\":\"preferred\"}");
    assert_string_equal(it_jstr(t, "state"), "passed");
    assert_true(json_is_null(json_object_get(t, "gpu")));
    assert_true(json_is_null(json_object_get(t, "peak_gpu_memory_mib")));
    cuda = seen_env("huge", huge, "CUDA_VISIBLE_DEVICES");
    assert_non_null(cuda);
    assert_string_equal(cuda, "");
    free(cuda);
    /* gpu none: on the CPU even though a GPU would fit. */
    tight = it_version_create(s, s->admin_token, "huge", art,
                              rc_smoke_spec("gpu", 0, 1000000000, "int8"));
    t = smoke_run(s, "huge", tight, "{\"gpu\":\"none\"}");
    assert_string_equal(it_jstr(t, "state"), "passed");
    assert_true(json_is_null(json_object_get(t, "gpu")));

    /* 30e9 fp16: 72.6 GiB fits the H100's 80 GiB, but only 68.4 GiB are
     * free: placement goes by free memory. */
    tight = it_version_create(s, s->admin_token, "huge", art,
                              rc_smoke_spec("gpu", 0, 30000000000, "fp16"));
    t = smoke_run(s, "huge", tight, "{\"gpu\":\"required\"}");
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "no GPU has 72.");
}

static void test_fit_gate(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], pid[64];
    json_int_t fits, too_big, small;
    struct it_resp *r;
    json_t *gate, *t;

    it_upload(s, "fit gate model", 14, art);
    it_model_create(s, s->admin_token, "fit");
    fits = it_version_create(s, s->admin_token, "fit", art,
                             rc_smoke_spec("gpu", 0, 30000000000, "fp16")); /* 72.6 GiB */
    too_big = it_version_create(s, s->admin_token, "fit", art,
                                rc_smoke_spec("gpu", 0, 40000000000, "fp16")); /* 96.9 GiB */
    small = it_version_create(s, s->admin_token, "fit", art,
                              rc_smoke_spec("gpu", 0, 1000000000, "fp16"));
    it_policy_put(s, "fit", "production", "{\"smoke\":{\"required\":false,\"gpu\":\"required\"}}");

    /* Against the largest GPU (the H100's 80 GiB), not its free memory. */
    r = it_get(s, "/api/v1/models/fit/versions/1/gates?alias=production", s->admin_token);
    it_expect_status(s, r, 200);
    gate = it_gate_find(it_jarr(r->json, "gates"), "fit", NULL);
    assert_non_null(gate);
    assert_string_equal(it_jstr(gate, "status"), "passed");
    rc_expect_contains(it_jstr(gate, "expected"), "<= 80 GiB");
    assert_true(json_is_true(json_object_get(r->json, "passed")));
    r = it_get(s, "/api/v1/models/fit/versions/2/gates?alias=production", s->admin_token);
    it_expect_status(s, r, 200);
    gate = it_gate_find(it_jarr(r->json, "gates"), "fit", NULL);
    assert_string_equal(it_jstr(gate, "status"), "failed");
    assert_false(json_is_true(json_object_get(r->json, "passed")));

    /* A promotion of the one that does not fit is rejected. */
    r = it_promote(s, dep, "fit", too_big, "production", pid);
    r = it_promotion_wait(s, s->admin_token, pid, "rejected", 15000);
    assert_string_equal(it_jstr(it_gate_find(it_jarr(r->json, "gates"), "fit", NULL), "status"),
                        "failed");

    /* With a smoke test required, one that fits runs it on a GPU. */
    it_policy_put(s, "fit", "production", "{\"smoke\":{\"required\":true,\"gpu\":\"required\"}}");
    r = it_promote(s, dep, "fit", small, "production", pid);
    r = it_promotion_wait(s, s->admin_token, pid, "succeeded", 15000);
    assert_string_equal(it_jstr(it_gate_find(it_jarr(r->json, "gates"), "fit", NULL), "status"),
                        "passed");
    assert_string_equal(it_jstr(it_gate_find(it_jarr(r->json, "gates"), "smoke", NULL), "status"),
                        "passed");
    t = rc_smoke_wait_state(s, "fit", small, "passed", 5000);
    expect_on_gpu(t, "NVIDIA H100", UUID1, 1);
    (void)fits;
}

static void test_no_devices(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1];
    struct it_resp *r;
    json_int_t v;
    json_t *t, *gate;

    set_gpus("");
    r = it_get(s, "/api/v1/runner", s->admin_token);
    assert_string_equal(it_jstr(r->json, "nvml"), "available");
    assert_int_equal(json_array_size(it_jarr(r->json, "gpus")), 0);

    it_upload(s, "no devices model", 16, art);
    it_model_create(s, s->admin_token, "nodev");
    v = it_version_create(s, s->admin_token, "nodev", art,
                          rc_smoke_spec("gpu", 0, 1000000000, "fp16"));
    t = smoke_run(s, "nodev", v, "{\"gpu\":\"required\"}");
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "requires a GPU");
    rc_expect_contains(rc_reason(t), "no device");
    it_policy_put(s, "nodev", "production",
                  "{\"smoke\":{\"required\":false,\"gpu\":\"required\"}}");
    r = it_get(s, "/api/v1/models/nodev/versions/1/gates?alias=production", s->admin_token);
    it_expect_status(s, r, 200);
    gate = it_gate_find(it_jarr(r->json, "gates"), "fit", NULL);
    assert_string_equal(it_jstr(gate, "status"), "failed");
}

static void test_nvml_init_fails(void **state)
{
    char nvml[IT_PATH_MAX + 32];
    struct it_resp *r;

    (void)state;
    setenv("FAKE_NVML_FAIL_INIT", "1", 1);
    it_fmt(nvml, sizeof(nvml), "--nvml-library=%s", fake_nvml());
    srv2 = it_server_start((const char *const[]){nvml, "--smoke-interval=0", NULL});
    unsetenv("FAKE_NVML_FAIL_INIT");
    r = it_get(srv2, "/api/v1/runner", srv2->admin_token);
    it_expect_status(srv2, r, 200);
    assert_string_equal(it_jstr(r->json, "nvml"), "unavailable");
    rc_expect_contains(it_jstr(r->json, "nvml_error"), "nvmlInit_v2");
    rc_expect_contains(it_jstr(r->json, "nvml_error"), "Driver Not Loaded");
    assert_int_equal(json_array_size(it_jarr(r->json, "gpus")), 0);
    /* No profile configured: an empty list. */
    assert_int_equal(json_array_size(it_jarr(r->json, "profiles")), 0);
}

static void test_library_lacks_symbols(void **state)
{
    char nvml[IT_PATH_MAX + 32];
    struct it_resp *r;

    (void)state;
    /* A real shared library that is not NVML: the C library itself. */
    it_fmt(nvml, sizeof(nvml), "--nvml-library=libc.so.6");
    srv2 = it_server_start((const char *const[]){nvml, "--smoke-interval=0", NULL});
    r = it_get(srv2, "/api/v1/runner", srv2->admin_token);
    it_expect_status(srv2, r, 200);
    assert_string_equal(it_jstr(r->json, "nvml"), "unavailable");
    rc_expect_contains(it_jstr(r->json, "nvml_error"), "nvmlInit_v2");
}

static void test_default_library(void **state)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    struct it_resp *r;

    (void)state;
    if (h != NULL) {
        dlclose(h);
        skip(); /* a machine with NVML: nothing to check here */
    }
    srv2 = it_server_start((const char *const[]){"--smoke-interval=0", NULL});
    r = it_get(srv2, "/api/v1/runner", srv2->admin_token);
    it_expect_status(srv2, r, 200);
    assert_string_equal(it_jstr(r->json, "nvml"), "unavailable");
    rc_expect_contains(it_jstr(r->json, "nvml_error"), "libnvidia-ml.so.1");
    assert_int_equal(json_array_size(it_jarr(r->json, "gpus")), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runner_lists_gpus, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_placement_by_free_memory, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_peak_gpu_memory, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_too_big_for_every_gpu, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_fit_gate, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_no_devices, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_nvml_init_fails, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_library_lacks_symbols, test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_default_library, test_setup, test_teardown),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
