/*
 * scan.h - the artifact safety scan (docs/contract.md "Artifact safety scan"): prove that a model
 * file cannot run code when it is loaded, never executing or loading anything.
 *
 * Default-deny: a file is "clean" only when every part of it that a loader could turn into
 * code was read and found harmless. What the scanner recognises but cannot finish (a
 * malformed or truncated stream, an unknown opcode, a cap) is "unknown"; what imports or
 * calls anything outside the allowlist, or names a dunder in a template, is "unsafe".
 *
 * - Pickle streams, protocols 0-5 (scan_pickle.c): the stack and the memo are followed
 *   symbolically; every GLOBAL, STACK_GLOBAL and INST must resolve to constant strings on
 *   the allowlist (what torch.load(weights_only=True) accepts, plus opts->allow).
 * - Where pickles are: a blob or member that starts with PROTO, members named .pkl
 *   .pickle .pt .pth .bin .ckpt .joblib (protocols 0 and 1 too), PyTorch zip checkpoints
 *   (their <dir>/data.pkl; tensor storages are skipped, never read), NumPy .npy/.npz with an
 *   object dtype; inside tar/zip archives, nested up to ART_SCAN_MAX_DEPTH.
 * - GGUF tokenizer.chat_template* (scan_jinja.c): names, attributes, filters, tests and
 *   statements must be on the list of what chat templates use.
 * - Keras v3 config.json: Lambda layers and modules outside keras. are unsafe.
 * - ONNX external_data locations that are absolute or hold ".." are unsafe.
 *
 * Every buffer has a cap; every length is checked against the bytes left. Thread-safe: no
 * shared state.
 */
#ifndef ART_SCAN_H
#define ART_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "../base/mg.h"

#define ART_SCANNER "modelgate-scan/1"
#define ART_SCAN_MAX_DEPTH 4     /* archives inside archives */
#define ART_SCAN_MAX_FINDINGS 64 /* findings kept in one report (the verdict counts all) */

enum art_verdict { ART_CLEAN = 0, ART_UNKNOWN = 1, ART_UNSAFE = 2 };

struct art_scan_opts {
    const char *const *allow; /* BORROWED: extra "module.name" globals (--scan-allow) */
    size_t n_allow;
    uint64_t max_pickle_stack;   /* symbolic stack entries (default 1,000,000) */
    uint64_t max_pickle_memo;    /* memo keys (default 1,000,000) */
    uint64_t max_pickle_strings; /* bytes of short strings kept for STACK_GLOBAL (16 MiB) */
    uint64_t max_template;       /* bytes of one chat template (default 4 MiB) */
    uint64_t max_json;           /* bytes of a Keras config.json (default 16 MiB) */
    /*
     * A zip inside an archive (a torch checkpoint in a tarball) is read through its central
     * directory, as torch.load and numpy.load read it, not through the local headers a
     * stream shows (which a crafted zip can make disagree): it is copied to an empty
     * scratch file that spill(spill_ctx) opens (read-write, already unlinked; the scanner
     * closes it), or -1. NULL (the default): such zips are "unknown".
     */
    int (*spill)(void *spill_ctx);
    void *spill_ctx;
    /*
     * Where the zip's length is known (a tarball's member), the scratch file is not written:
     * the bytes its reader may need (local headers, every entry but a torch tensor storage,
     * the tail) are kept in memory as they stream by (past 16 MiB, in the scratch file), and
     * the zip is read through its central directory over them; one that names bytes not
     * kept is "unknown". spill_zips: copy such zips whole to the scratch file anyway (the
     * reference the tests check that read against).
     */
    bool spill_zips;
};

/* A spill function: an unlinked temporary file in directory ctx (a path; NULL: $TMPDIR or
 * /tmp), or -1. */
int art_scan_spill_tmp(void *ctx);

void art_scan_opts_default(struct art_scan_opts *o);

/* "clean", "unsafe" or "unknown". */
const char *art_verdict_name(enum art_verdict v);

/* The verdict a report object carries (ART_UNKNOWN when it carries none). */
enum art_verdict art_scan_verdict(const json_t *scan);

/*
 * Scan the file at `path` (a blob: plain file, tar, zip or a compressed tar). opts NULL =
 * the defaults. *scan: NEW object {"verdict","scanner","findings":[{"member","format",
 * "rule","severity","detail","offset"}]} ("member" null for the blob itself). Errors are
 * for the scanner itself: MG_EIO (cannot read the file), MG_ENOMEM; what the file holds
 * never fails the call, it becomes a finding.
 */
enum mg_code art_scan_file(const char *path, const struct art_scan_opts *opts, json_t **scan,
                           struct mg_error *err);

/* The same for bytes in memory, as a file named `name` (NULL: a blob without a name). */
enum mg_code art_scan_buffer(const void *data, size_t n, const char *name,
                             const struct art_scan_opts *opts, json_t **scan, struct mg_error *err);

/*
 * The scan of an archive fed by another walk over its entries (the upload's inspection,
 * store_archive_inspect_scan), so that a compressed tarball is decompressed once for both.
 *
 * art_scan_walks(head, n, size): would art_scan_file read a file that starts with these
 * bytes (at least 512 when there are) as an archive? Only then may a walk stand in for it.
 * art_scan_walk_new: a walk for an archive of `size` bytes (opts NULL = the defaults; *out
 * NEW). art_scan_walk_entry: the next regular file of the archive, in archive order
 * (struct art_scan_member); the scanner reads what it needs of it, the walker drains the
 * rest. A zip in it is read where it lies when region_fd says where (an uncompressed tar's
 * member), else from what is kept of it as it streams by (opts: spill_zips; through borrow
 * when given). Errors are
 * the scanner's own (MG_ENOMEM, MG_EIO: the scan failed); what the member holds, or a read
 * that failed, becomes a finding. art_scan_walk_finish: the report art_scan_file would have
 * given for an archive with those entries (*scan NEW), and frees the walk;
 * art_scan_walk_free: frees it without one. Not thread-safe: one walker per walk.
 */
struct art_scan_walk;
bool art_scan_walks(const void *head, size_t n, uint64_t size);
enum mg_code art_scan_walk_new(const struct art_scan_opts *opts, uint64_t size,
                               struct art_scan_walk **out, struct mg_error *err);
/* A regular file of the archive a walk is fed (art_scan_walk_entry). */
struct art_scan_member {
    const char *raw; /* the path its reader reports; NULL: it has none, and is not read */
    uint64_t size;   /* UINT64_MAX: unknown */
    /* as art_src's: the count, 0 at its end, -1 with err set */
    ssize_t (*read)(void *ctx, void *buf, size_t n, struct mg_error *err);
    /* optional: the same without a copy, *p valid until the next call */
    ssize_t (*borrow)(void *ctx, const void **p, size_t n, struct mg_error *err);
    void *ctx;
    int region_fd; /* >= 0: the same bytes lie there from region_off on */
    uint64_t region_off;
};
enum mg_code art_scan_walk_entry(struct art_scan_walk *w, const struct art_scan_member *m,
                                 struct mg_error *err);
enum mg_code art_scan_walk_finish(struct art_scan_walk **w, json_t **scan, struct mg_error *err);
void art_scan_walk_free(struct art_scan_walk **w);

/*
 * The analysers alone, for the tests and fuzz targets. Each returns the verdict of what it
 * read and appends its findings to `findings` (a BORROWED array; NULL: not kept).
 * art_scan_pickle: one pickle stream and any that follow it. art_scan_template: one Jinja
 * chat template.
 */
enum art_verdict art_scan_pickle(const void *data, size_t n, const struct art_scan_opts *opts,
                                 json_t *findings);
enum art_verdict art_scan_template(const char *tpl, size_t n, const struct art_scan_opts *opts,
                                   json_t *findings);

/* The rules findings name, for counters (/metrics): art_scan_rules[ART_SCAN_NRULES]. */
#define ART_SCAN_NRULES 31
extern const char *const art_scan_rules[ART_SCAN_NRULES];

/* The index of a rule in art_scan_rules, or -1. */
int art_scan_rule_index(const char *rule);

/* Could a plain blob starting with these bytes hold something the scanner reads (a pickle,
 * a NumPy array)? An uploader that keeps no local copy of a blob asks this, like
 * art_introspect_sniff(), before the rest arrives. */
bool art_scan_sniff(const void *head, size_t n);

/* Is "module.name" on the default allowlist or in opts->allow? */
bool art_scan_allowed(const char *global, const struct art_scan_opts *opts);

#endif
