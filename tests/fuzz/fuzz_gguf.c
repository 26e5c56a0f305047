/*
 * fuzz_gguf.c - GGUF v2/v3 headers (artifact/gguf.c): counts checked against the bytes left,
 * typed key/value pairs and nested arrays skipped while streaming, tensor infos with ggml
 * block sizes, alignment.
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
    fuzz_weights_one(data, size, "gguf");
    return 0;
}
