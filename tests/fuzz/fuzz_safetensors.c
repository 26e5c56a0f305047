/*
 * fuzz_safetensors.c - safetensors headers (artifact/safetensors.c): the 8-byte length, the JSON
 * header (jansson, after the size and value-count caps), the dtype/shape/data_offsets rules and the
 * tiling of the data.
 *
 * Input: the file's bytes. See fuzz_weights.h for what is checked.
 */
#include "fuzz_weights.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_weights_one(data, size, "safetensors");
    return 0;
}
