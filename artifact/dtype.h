/*
 * dtype.h - tensor element type (dtype) names, shared by the weight-header readers
 * (weights_int.h) and the schema checks (introspect.h includes this header). Pure
 * functions over a constant table: thread-safe.
 */
#ifndef ART_DTYPE_H
#define ART_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The canonical dtype name for a name a user may write: safetensors' own ("F32", "BF16",
 * "I64", …), ONNX's ("FLOAT", "FLOAT16", "INT64", …), numpy's ("float32", "int64", …), any
 * case; and the compound forms "seq(T)", "optional(T)", "sparse(T)", "map(K,V)". Writes the
 * canonical form into out (cap bytes). False when the name is not known.
 */
bool art_dtype_canonical(const char *name, char *out, size_t cap);

/* The canonical dtype name for an ONNX TensorProto.DataType value, or NULL. */
const char *art_onnx_dtype_name(int32_t t);

/* Bits per element of a canonical dtype name (0: unknown or variable, as STRING). */
unsigned art_dtype_bits(const char *name);

#endif
