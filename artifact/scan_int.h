/*
 * scan_int.h - what the scanner's files (scan.c, scan_zip.c, scan_pickle.c, scan_jinja.c,
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

/* A PyTorch zip checkpoint's tensor storage: "<dir>/data/<digits>". Never a pickle to
 * torch.load (it reads the bytes as numbers), so never read. */
bool art_torch_storage(const char *name);

/* ---- a zip inside an archive (scan_zip.c), read through its central directory ---------- */

struct archive;

/* Copy the rest of s into a scratch file from r->opts->spill: *fd, at offset 0. MG_EINVAL
 * when it could not be (reported in r as a finding: the zip stays unknown). */
enum mg_code art_zip_spill(struct art_report *r, struct art_src *s, int *fd, struct mg_error *err);

/* The rest of s (a zip inside a compressed archive), streamed: every local header, every
 * entry's data but a torch storage's, and the tail are kept (past a cap, in a scratch
 * file). MG_EINVAL: it could not be, reported in r. Free with art_zip_kept_free. */
struct art_zip_kept;
enum mg_code art_zip_keep(struct art_report *r, struct art_src *s, const char *name,
                          struct art_zip_kept **out, struct mg_error *err);
void art_zip_kept_free(struct art_zip_kept *k);
/* Open archive a over what was kept: a byte that was not kept fails the read (a central
 * directory pointing where no local header led); art_zip_kept_hole then says where. */
int art_zip_open_kept(struct archive *a, struct art_zip_kept *k);
bool art_zip_kept_hole(const struct art_zip_kept *k, uint64_t *at);

/* A zip lying at [off, off + size) of fd, read in place; free() it after the archive. */
struct art_zip_region;
struct art_zip_region *art_zip_region_new(int fd, uint64_t off, uint64_t size);
int art_zip_open_region(struct archive *a, struct art_zip_region *g);

#endif
