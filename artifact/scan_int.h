/*
 * scan_int.h - what the scanner's files (scan.c, scan_pickle.c, scan_jinja.c,
 * scan_formats.c) share: the report being built and the analysers over a byte source.
 */
#ifndef ART_SCAN_INT_H
#define ART_SCAN_INT_H

#include "scan.h"
#include "weights_int.h"

/* The report being built. Findings past ART_SCAN_MAX_FINDINGS are counted, not kept. */
struct art_report {
    const struct art_scan_opts *opts;
    json_t *findings; /* BORROWED or owned by the caller; may be NULL */
    enum art_verdict verdict;
    uint64_t dropped;
    const char *member; /* the member being read (NULL: the blob) */
};

/* Add a finding; high = "unsafe", else "unknown" (severity medium). */
void art_report_add(struct art_report *r, const char *format, const char *rule, bool high,
                    uint64_t offset, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/*
 * One pickle stream (and the pickles that follow it) from s. probe: the bytes only might be
 * a pickle (a plain file whose first byte is a protocol 0/1 opcode): a malformed stream
 * with nothing unsafe in it is then not a pickle and adds no finding. Returns MG_OK or an
 * error of the source itself (MG_EIO, MG_ENOMEM).
 */
enum mg_code art_pickle_scan(struct art_src *s, struct art_report *r, bool probe,
                             struct mg_error *err);

/* One chat template (Jinja); `key` names it in findings ("tokenizer.chat_template"). */
void art_template_scan(const char *tpl, size_t n, const char *key, struct art_report *r);

/* GGUF: every tokenizer.chat_template* value goes through art_template_scan. */
enum mg_code art_gguf_templates_scan(struct art_src *s, struct art_report *r, struct mg_error *err);

/* Keras v3 config.json (whole member in s). */
enum mg_code art_keras_config_scan(struct art_src *s, struct art_report *r, struct mg_error *err);

/* ONNX ModelProto: external_data locations of the graph's initializers. */
enum mg_code art_onnx_external_scan(struct art_src *s, struct art_report *r, struct mg_error *err);

/* NumPy .npy: an object dtype sends the rest through art_pickle_scan. */
enum mg_code art_npy_scan(struct art_src *s, struct art_report *r, struct mg_error *err);

#endif
