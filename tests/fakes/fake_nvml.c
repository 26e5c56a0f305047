/*
 * fake_nvml.c - a stand-in for libnvidia-ml.so.1 on machines without a GPU,
 * so CI can drive the runner's GPU discovery and placement: modelgated
 * loads it with --nvml-library PATH.
 *
 * Only the entry points modelgated uses, with NVML's C signatures:
 * nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, nvmlDeviceGetUUID,
 * nvmlDeviceGetMemoryInfo, nvmlSystemGetDriverVersion.
 *
 * The GPUs come from a spec "NAME:TOTAL_MIB:FREE_MIB[,…]" (at most 8), e.g.
 * "A100:40960:10240,H100:81920:70000":
 *   FAKE_NVML_GPUS_FILE  a file holding the spec, read again on every query,
 *                        so a test (or a smoke command) can change free
 *                        memory while the server runs;
 *   FAKE_NVML_GPUS       the spec itself, when there is no file;
 *   neither              one GPU, "Fake GPU:16384:16384".
 * FAKE_NVML_FAIL_INIT=1 makes nvmlInit_v2 fail with "Driver Not Loaded".
 * FAKE_NVML_LEAK=1 makes nvmlInit_v2 leak a block: under LeakSanitizer the daemon that
 * loaded it then fails at exit (tests/integration/test_harness.c shows that fails the test).
 *
 * GPU i is named "NVIDIA <NAME>" and has the UUID
 * GPU-fa4e0000-0000-4000-8000-00000000000<i>. Memory is reported in bytes:
 * total, free, and used = total - free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_UNKNOWN = 999,
};

#define FAKE_MAX 8

struct fake_device {
    char name[64];
    unsigned long long total_mib;
    unsigned long long free_mib;
};

/* Handles stay valid for the life of the library: one slot per index. */
static struct fake_device devices[FAKE_MAX];
static int initialised;

/* Parse the current spec into devices[]; returns the count. */
static unsigned load(void)
{
    const char *file = getenv("FAKE_NVML_GPUS_FILE");
    const char *env = getenv("FAKE_NVML_GPUS");
    char spec[1024] = "Fake GPU:16384:16384", *save = NULL, *tok;
    unsigned n = 0;

    if (file != NULL && *file != '\0') {
        FILE *f = fopen(file, "re");
        size_t k = 0;

        if (f != NULL) {
            k = fread(spec, 1, sizeof(spec) - 1, f);
            fclose(f);
        }
        spec[k] = '\0';
    } else if (env != NULL) {
        snprintf(spec, sizeof(spec), "%s", env);
    }
    for (tok = strtok_r(spec, ",\n", &save); tok != NULL && n < FAKE_MAX;
         tok = strtok_r(NULL, ",\n", &save)) {
        char name[48];
        unsigned long long total, free_;

        if (sscanf(tok, " %47[^:]:%llu:%llu", name, &total, &free_) != 3)
            continue;
        snprintf(devices[n].name, sizeof(devices[n].name), "NVIDIA %s", name);
        devices[n].total_mib = total;
        devices[n].free_mib = free_ < total ? free_ : total;
        n++;
    }
    return n;
}

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t r);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);

/* The leaked block's only pointer, overwritten at once (volatile: neither is elided). */
static void *volatile leak_sink;

static __attribute__((noinline)) void leak(void)
{
    leak_sink = malloc(4096);
    leak_sink = NULL;
}

nvmlReturn_t nvmlInit_v2(void)
{
    const char *fail = getenv("FAKE_NVML_FAIL_INIT");
    const char *leaky = getenv("FAKE_NVML_LEAK");

    if (leaky != NULL && strcmp(leaky, "1") == 0)
        leak();
    if (fail != NULL && strcmp(fail, "1") == 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    initialised++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
    if (initialised == 0)
        return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    default:
        return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = load();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= load())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

static int index_of(nvmlDevice_t d)
{
    for (int i = 0; i < FAKE_MAX; i++) {
        if (d == &devices[i])
            return i;
    }
    return -1;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int i = index_of(device);

    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (i < 0 || name == NULL || (unsigned)i >= load())
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(devices[i].name) >= length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(name, devices[i].name, strlen(devices[i].name) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int i = index_of(device);
    char buf[80];

    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (i < 0 || uuid == NULL || (unsigned)i >= load())
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(buf, sizeof(buf), "GPU-fa4e0000-0000-4000-8000-%012d", i);
    if (strlen(buf) >= length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(uuid, buf, strlen(buf) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    int i = index_of(device);

    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (i < 0 || memory == NULL || (unsigned)i >= load())
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = devices[i].total_mib << 20;
    memory->free = devices[i].free_mib << 20;
    memory->used = memory->total - memory->free;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    static const char v[] = "550.54.15-fake";

    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (version == NULL || length < sizeof(v))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(version, v, sizeof(v));
    return NVML_SUCCESS;
}
