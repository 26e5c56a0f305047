/*
 * fuzz_onnx.c - ONNX models (artifact/onnx_filter.c, onnx.c): the bounded walk over the protobuf
 * framing that drops tensor payloads, nodes and functions and re-frames nested messages under
 * a depth cap, then libprotobuf-c decoding under a memory cap, then the summary of inputs,
 * outputs and initializers.
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
    fuzz_weights_one(data, size, "onnx");
    return 0;
}
