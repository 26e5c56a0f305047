/*
 * fuzz_weights.h - what the weight-header targets (fuzz_safetensors, fuzz_gguf, fuzz_onnx)
 * share: read the input as one format with art_introspect_buffer() under small caps, then
 * again sniffed, and check what came back.
 *
 * Checked besides memory safety:
 * - the reader accepts (MG_OK with a summary) or refuses as malformed (MG_EINVAL with a
 *   message naming the byte offset); nothing else, and no summary on refusal;
 * - an accepted summary is consistent: its format, and the parameters per dtype add up to
 *   "parameters" (so no tensor is counted twice or lost);
 * - sniffing never refuses bytes it does not recognise.
 */
#ifndef MG_FUZZ_WEIGHTS_H
#define MG_FUZZ_WEIGHTS_H

#include "fuzz.h"

#include "artifact/introspect.h"

static inline void fuzz_weights_check(const uint8_t *data, size_t size, const char *format,
                                      bool sniffed)
{
    struct art_introspect_limits lim;
    struct mg_error err;
    json_t *out = NULL, *v;
    const char *k;
    json_int_t sum = 0;
    enum mg_code rc;

    art_introspect_limits_default(&lim);
    lim.max_safetensors_header = 1 << 20;
    lim.max_json_values = 10000;
    lim.max_gguf_header = 1 << 20;
    lim.max_gguf_tensors = 10000;
    lim.max_onnx_structure = 1 << 20;
    lim.max_onnx_memory = 32 << 20;
    memset(&err, 0, sizeof(err));
    rc = art_introspect_buffer(data, size, format, &lim, &out, &err);
    FUZZ_CHECK(rc == MG_OK || rc == MG_EINVAL, "%s: returned %d: %s", format ? format : "sniff",
               (int)rc, err.message);
    if (rc != MG_OK) {
        FUZZ_CHECK(out == NULL, "refused but a summary came back");
        FUZZ_CHECK(strstr(err.message, "byte offset") != NULL, "no offset in '%s'", err.message);
        return;
    }
    if (out == NULL) {
        FUZZ_CHECK(sniffed, "a named format gave no summary");
        return;
    }
    FUZZ_CHECK(format == NULL ||
                   strcmp(json_string_value(json_object_get(out, "format")), format) == 0,
               "format %s", json_string_value(json_object_get(out, "format")));
    json_object_foreach(json_object_get(out, "dtypes"), k, v) sum += json_integer_value(v);
    FUZZ_CHECK(sum == json_integer_value(json_object_get(out, "parameters")),
               "dtypes add up to %lld, parameters %lld", (long long)sum,
               (long long)json_integer_value(json_object_get(out, "parameters")));
    json_decref(out);
}

static inline void fuzz_weights_one(const uint8_t *data, size_t size, const char *format)
{
    fuzz_weights_check(data, size, format, false);
    fuzz_weights_check(data, size, NULL, true);
}

#endif
