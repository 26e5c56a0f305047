/*
 * nvml.c - see nvml.h. Only the handful of NVML entry points we need are
 * declared here, with NVML's documented C signatures.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;   /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef void *nvml_device; /* nvmlDevice_t is an opaque pointer */

struct nvml_memory { /* nvmlMemory_t */
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};

struct runner_nvml {
    void *lib;
    bool ok;
    char error[256];
    char driver[81];
    pthread_mutex_t lock;
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    const char *(*error_string)(nvml_return);
    nvml_return (*count)(unsigned *);
    nvml_return (*handle)(unsigned, nvml_device *);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*memory)(nvml_device, struct nvml_memory *);
    nvml_return (*driver_version)(char *, unsigned);
};

static const char *errstr(struct runner_nvml *n, nvml_return r)
{
    static const char unknown[] = "NVML error";

    return n->error_string ? n->error_string(r) : unknown;
}

struct runner_nvml *runner_nvml_open(const char *library)
{
    struct runner_nvml *n = calloc(1, sizeof(*n));
    const char *lib = library ? library : "libnvidia-ml.so.1";
    nvml_return r;

    if (n == NULL)
        return NULL;
    pthread_mutex_init(&n->lock, NULL);
    n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (n->lib == NULL) {
        const char *e = dlerror();
        snprintf(n->error, sizeof(n->error), "cannot load %s: %s", lib, e ? e : "not found");
        return n;
    }
    /* POSIX lets a void * from dlsym become a function pointer this way. */
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)(&n->field) = dlsym(n->lib, name);                                               \
        if (n->field == NULL) {                                                                    \
            snprintf(n->error, sizeof(n->error), "%s lacks %s", lib, name);                        \
            return n;                                                                              \
        }                                                                                          \
    } while (0)
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(error_string, "nvmlErrorString");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(name, "nvmlDeviceGetName");
    SYM(uuid, "nvmlDeviceGetUUID");
    SYM(memory, "nvmlDeviceGetMemoryInfo");
    SYM(driver_version, "nvmlSystemGetDriverVersion");
#undef SYM
    r = n->init();
    if (r != 0) {
        snprintf(n->error, sizeof(n->error), "nvmlInit_v2 failed: %s", errstr(n, r));
        return n;
    }
    if (n->driver_version(n->driver, sizeof(n->driver)) != 0)
        n->driver[0] = '\0';
    n->ok = true;
    return n;
}

void runner_nvml_close(struct runner_nvml **np)
{
    struct runner_nvml *n = *np;

    if (n == NULL)
        return;
    if (n->ok && n->shutdown)
        n->shutdown();
    if (n->lib)
        dlclose(n->lib);
    pthread_mutex_destroy(&n->lock);
    free(n);
    *np = NULL;
}

bool runner_nvml_available(const struct runner_nvml *n)
{
    return n && n->ok;
}

const char *runner_nvml_error(const struct runner_nvml *n)
{
    return n ? n->error : "NVML not initialised";
}

unsigned runner_nvml_gpus(struct runner_nvml *n, struct runner_gpu *out, unsigned max)
{
    unsigned count = 0, i, k = 0;

    if (!runner_nvml_available(n))
        return 0;
    pthread_mutex_lock(&n->lock);
    if (n->count(&count) != 0)
        count = 0;
    for (i = 0; i < count && k < max; i++) {
        nvml_device d;
        struct nvml_memory m;

        if (n->handle(i, &d) != 0)
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        out[k].index = i;
        if (n->name(d, out[k].name, sizeof(out[k].name)) != 0)
            snprintf(out[k].name, sizeof(out[k].name), "GPU %u", i);
        if (n->uuid(d, out[k].uuid, sizeof(out[k].uuid)) != 0)
            out[k].uuid[0] = '\0';
        if (n->memory(d, &m) == 0) {
            out[k].memory_total_mib = m.total >> 20;
            out[k].memory_free_mib = m.free >> 20;
        }
        k++;
    }
    pthread_mutex_unlock(&n->lock);
    return k;
}

bool runner_nvml_used_mib(struct runner_nvml *n, unsigned index, uint64_t *used)
{
    nvml_device d;
    struct nvml_memory m;
    bool ok = false;

    if (!runner_nvml_available(n))
        return false;
    pthread_mutex_lock(&n->lock);
    if (n->handle(index, &d) == 0 && n->memory(d, &m) == 0) {
        *used = m.used >> 20;
        ok = true;
    }
    pthread_mutex_unlock(&n->lock);
    return ok;
}

json_t *runner_nvml_json(struct runner_nvml *n)
{
    struct runner_gpu g[RUNNER_GPU_MAX];
    unsigned k = runner_nvml_gpus(n, g, RUNNER_GPU_MAX), i;
    json_t *gpus = json_array(), *out;

    for (i = 0; i < k; i++)
        json_array_append_new(gpus, json_pack("{s:I, s:s, s:s, s:I, s:I}", "index",
                                              (json_int_t)g[i].index, "name", g[i].name, "uuid",
                                              g[i].uuid, "memory_total_mib",
                                              (json_int_t)g[i].memory_total_mib, "memory_free_mib",
                                              (json_int_t)g[i].memory_free_mib));
    out = json_pack("{s:s, s:o}", "nvml", runner_nvml_available(n) ? "available" : "unavailable",
                    "gpus", gpus);
    if (out && !runner_nvml_available(n))
        json_object_set_new(out, "nvml_error", json_string(runner_nvml_error(n)));
    if (out && runner_nvml_available(n) && n->driver[0])
        json_object_set_new(out, "driver", json_string(n->driver));
    return out;
}
