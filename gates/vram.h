/*
 * vram.h - estimated inference memory of a model version (pure arithmetic).
 */
#ifndef GATE_VRAM_H
#define GATE_VRAM_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

/* Bytes per parameter for a precision name ("fp32" 4, "fp16"/"bf16" 2,
 * "int8" 1, "int4" 0.5). Returns false for an unknown name. */
bool gate_precision_bytes(const char *precision, double *bytes);

/* parameters × bytes per parameter × 1.3 / 2^30, in GiB. Returns false for
 * an unknown precision or a negative parameter count. */
bool gate_estimated_vram_gib(int64_t parameters, const char *precision, double *gib);

/* Runtime overhead on the weights when their size is read from the artifact. */
#define GATE_VRAM_WEIGHTS_OVERHEAD 1.2
/* Bytes per KV-cache element: llama.cpp and most servers keep the cache in f16. */
#define GATE_VRAM_KV_BYTES 2

/* The estimate from a version's resources as the members gate_vram_estimate's object holds,
 * in its order, for a writer of JSON text that builds no json_t (the version read). precision
 * points into resources. */
struct gate_vram_resources {
    int64_t parameters;
    const char *precision;
    double bytes_per_parameter, overhead, gib;
};
extern const char gate_vram_resources_formula[];

/* resources' estimate into out; false when they give none (gate_vram_estimate then goes on to
 * the introspection). */
bool gate_vram_from_resources(const json_t *resources, struct gate_vram_resources *out);

/*
 * A version's inference memory estimate (docs/contract.md "Artifact introspection"), from its
 * `resources` and `introspection` (either may be NULL):
 * - resources with parameters and precision override: parameters × bytes per parameter ×
 *   1.3 (gate_estimated_vram_gib);
 * - else weights_bytes × 1.2, plus for a decoder whose GGUF metadata gives layers
 *   (<arch>.block_count), KV heads (<arch>.attention.head_count_kv, else head_count), head
 *   size (<arch>.attention.key_length, else embedding_length / head_count) and context
 *   (<arch>.context_length) the KV cache 2 × layers × kv_heads × head_dim × context × 2.
 * Returns a NEW object {"source":"resources"|"introspection","formula","gib",…every input
 * by name…}, or NULL when neither source gives one.
 */
json_t *gate_vram_estimate(const json_t *resources, const json_t *introspection);

/* The GiB of gate_vram_estimate() for a Version object (its "resources" and
 * "introspection"); false when there is none. */
bool gate_version_vram_gib(const json_t *version, double *gib);

#endif
