/*
 * vram.h - estimated inference memory of a model version (pure arithmetic).
 */
#ifndef GATE_VRAM_H
#define GATE_VRAM_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes per parameter for a precision name ("fp32" 4, "fp16"/"bf16" 2,
 * "int8" 1, "int4" 0.5). Returns false for an unknown name. */
bool gate_precision_bytes(const char *precision, double *bytes);

/* parameters × bytes per parameter × 1.3 / 2^30, in GiB. Returns false for
 * an unknown precision or a negative parameter count. */
bool gate_estimated_vram_gib(int64_t parameters, const char *precision, double *gib);

#endif
