/*
 * vram.c - see vram.h.
 */
#include "vram.h"

#include <string.h>

/* Activations, KV cache and runtime overhead on top of the weights. */
#define VRAM_OVERHEAD 1.3

bool gate_precision_bytes(const char *precision, double *bytes)
{
    static const struct {
        const char *name;
        double bytes;
    } table[] = {{"fp32", 4}, {"fp16", 2}, {"bf16", 2}, {"int8", 1}, {"int4", 0.5}};
    size_t i;

    if (precision == NULL)
        return false;
    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(precision, table[i].name) == 0) {
            *bytes = table[i].bytes;
            return true;
        }
    }
    return false;
}

bool gate_estimated_vram_gib(int64_t parameters, const char *precision, double *gib)
{
    double b;

    if (parameters < 0 || !gate_precision_bytes(precision, &b))
        return false;
    *gib = (double)parameters * b * VRAM_OVERHEAD / (1024.0 * 1024.0 * 1024.0);
    return true;
}
