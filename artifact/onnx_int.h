/*
 * onnx_int.h - what onnx_filter.c (the bounded walk over the protobuf framing) and onnx.c
 * (decoding the kept structure with libprotobuf-c) share.
 */
#ifndef ART_ONNX_INT_H
#define ART_ONNX_INT_H

#include "weights_int.h"

#include <onnx.pb-c.h> /* generated at build time by protoc-c from Debian's onnx.proto */

struct onnx_filter {
    struct art_src *s;
    const struct art_introspect_limits *lim;
    struct mg_error *err;
    uint8_t *out; /* the kept structure, re-framed; at most lim->max_onnx_structure bytes */
    size_t len, cap;
    uint64_t fields; /* fields seen (kept or skipped) */
    bool seen_graph; /* the walk entered ModelProto.graph: the bytes are an ONNX model */
};

/* Stream the whole model from f->s into f->out. The caller frees f->out. */
enum mg_code art_onnx_filter(struct onnx_filter *f);

#endif
