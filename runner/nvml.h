/*
 * nvml.h - GPU discovery through NVML loaded at run time with
 * dlopen("libnvidia-ml.so.1"): no build-time dependency, and a machine
 * without the library (or without a GPU) simply has none.
 *
 * Thread-safe after runner_nvml_open(); NVML itself is thread-safe.
 */
#ifndef RUNNER_NVML_H
#define RUNNER_NVML_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#define RUNNER_GPU_MAX 16

struct runner_gpu {
    unsigned index;
    char name[96];
    char uuid[96];
    uint64_t memory_total_mib;
    uint64_t memory_free_mib;
};

struct runner_nvml;

/* Load and initialise NVML from `library` (NULL: "libnvidia-ml.so.1").
 * Never fails: when NVML is missing or init fails the handle says
 * unavailable and carries the error. */
struct runner_nvml *runner_nvml_open(const char *library);
void runner_nvml_close(struct runner_nvml **n);

bool runner_nvml_available(const struct runner_nvml *n);
const char *runner_nvml_error(const struct runner_nvml *n);

/* Current GPUs with their memory (fresh query). Returns the count. */
unsigned runner_nvml_gpus(struct runner_nvml *n, struct runner_gpu *out, unsigned max);

/* Memory used on one GPU now, in MiB; false if it cannot be read. */
bool runner_nvml_used_mib(struct runner_nvml *n, unsigned index, uint64_t *used);

/* {"nvml":"available|unavailable","nvml_error"?,"driver"?,"gpus":[…]} (NEW). */
json_t *runner_nvml_json(struct runner_nvml *n);

#endif
