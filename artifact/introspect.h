/*
 * introspect.h - what is inside an uploaded artifact: the headers of known weight formats,
 * read without loading a single weight (docs/contract.md "Artifact introspection and schema
 * compatibility").
 *
 * - safetensors: the 8-byte length and the JSON header (dtype, shape and data offsets of
 *   every tensor, __metadata__); the offsets must tile the data exactly.
 * - GGUF v2 and v3 (little-endian): the metadata key/value pairs and the tensor infos
 *   (name, shape, ggml type, offset); general.* and the architecture's context length,
 *   block count, head counts and embedding length are kept.
 * - ONNX: the ModelProto's graph inputs, outputs and initializer shapes and dtypes, the
 *   opset imports and the producer, decoded by libprotobuf-c from onnx.proto. Tensor
 *   payloads (raw_data and the typed data arrays), node lists and functions are skipped
 *   while the bytes stream past: only the graph's structure is kept, up to
 *   max_onnx_structure bytes, and protobuf-c may allocate at most max_onnx_memory bytes
 *   decoding it. A model whose structure alone is larger is refused naming the cap.
 *
 * Where: a plain blob is sniffed by content (the GGUF magic, a safetensors length followed
 * by '{', a ModelProto's first field); inside a tar or zip archive, members named
 * *.safetensors, *.gguf and *.onnx are read, streamed through libarchive, and only as far
 * as their headers go (archives inside archives are not opened). A named member that does
 * not read is malformed; a plain blob that only looked like ONNX is simply not ONNX.
 *
 * Every length is checked against what is left of the file before it is used, and every
 * count before anything is allocated for it. Thread-safe: no shared state.
 */
#ifndef ART_INTROSPECT_H
#define ART_INTROSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "archive.h"
#include "dtype.h" /* art_dtype_canonical(), for the schema checks */

struct art_introspect_limits {
    uint64_t max_safetensors_header; /* bytes of one JSON header (default 16 MiB) */
    uint64_t max_json_values;        /* values in it (default 1,000,000) */
    uint64_t max_gguf_header;        /* bytes of metadata and tensor infos (default 256 MiB) */
    uint64_t max_gguf_tensors;       /* tensor infos (default 1,000,000) */
    uint64_t max_onnx_structure;     /* graph structure bytes decoded (default 16 MiB) */
    uint64_t max_onnx_memory;        /* protobuf-c's allocations for them (default 256 MiB) */
    uint32_t max_members;            /* weight files read in one archive (default 1024) */
    uint32_t max_io;                 /* graph inputs + outputs listed (default 4096) */
};

void art_introspect_limits_default(struct art_introspect_limits *lim);

/*
 * Read the weight headers of the blob at `path` (media type as store_media_type_detect()
 * gave it; `manifest` is the archive's manifest from store_archive_inspect(), or NULL when
 * the blob is not an archive). lim NULL = the defaults.
 *
 * *formats: NEW array of the formats found, sorted, each once (empty when none).
 * *introspection: NEW object (docs/contract.md's Version "introspection", plus "members" for an
 * archive: [{"path","format","tensors","parameters","weights_bytes","data_complete"}]) or
 * NULL when no format was found. With several formats in one archive, "format" and the
 * totals are those of the format holding the most weight bytes; "inputs"/"outputs" come
 * from the first ONNX member in path order.
 *
 * MG_EINVAL for a malformed header, with a message naming the member and the byte offset;
 * MG_EIO, MG_ENOMEM. On failure both outputs are NULL.
 */
enum mg_code art_introspect(const char *path, const char *media_type,
                            const struct store_archive_manifest *manifest,
                            const struct art_introspect_limits *lim, json_t **formats,
                            json_t **introspection, struct mg_error *err);

/*
 * Read one file held in memory as `format` ("safetensors", "gguf" or "onnx"; NULL =
 * sniff as for a plain blob). *out: NEW introspection object for that file, or NULL when
 * format is NULL and nothing was recognised. Errors as art_introspect(). For the tests and
 * the fuzz targets; the server reads files.
 */
enum mg_code art_introspect_buffer(const void *data, size_t n, const char *format,
                                   const struct art_introspect_limits *lim, json_t **out,
                                   struct mg_error *err);

/* Do a plain blob's first n bytes look like a weight format art_introspect() reads (the
 * GGUF magic, a safetensors length and '{', an ONNX ModelProto)? A caller that must keep a
 * local copy of the bytes for art_introspect() asks this before the rest arrives. */
bool art_introspect_sniff(const void *head, size_t n);

#endif
