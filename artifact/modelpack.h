/*
 * modelpack.h - a model version as an OCI artifact in the CNCF ModelPack layout (docs/contract.md
 * "OCI distribution (read-only)"): its image manifest, its config blob and, when it is
 * signed, the referrer manifest that attaches its Sigstore bundle.
 *
 * Pure: the documents are a function of the version's record, its file manifest and its
 * bundle, nothing else (no clock, no I/O), so the same version always gives the same bytes.
 * Only fields that never change after a version is created go in (not its description or
 * tags, which can be edited; metrics as signed at creation, not ones appended later).
 *
 * Layout (ModelPack docs/spec.md, docs/config.md, docs/annotations.md):
 *   - manifest: mediaType application/vnd.oci.image.manifest.v1+json, artifactType
 *     application/vnd.cncf.model.manifest.v1+json, config
 * application/vnd.cncf.model.config.v1+json;
 *   - layers: an archive's regular files, one raw layer each (digest = the file's sha256 from
 *     the file manifest, media type weight/weight.config/doc/code/dataset by file name,
 *     annotations org.cncf.model.filepath and org.opencontainers.image.title = the path), in
 *     model_signing's path order; a single-file artifact, an archive without files, or one
 *     with more than ART_MODELPACK_MAX_FILE_LAYERS files is one layer of the whole artifact;
 *   - config: ModelPack's descriptor (name, version, createdAt, authors, sourceURL, revision,
 *     datasetsURL), config (format, paramSize, precision) and modelfs (the layer digests),
 *     and nothing else (the schema is closed);
 *   - manifest annotations: org.opencontainers.image.{created,version,source,revision} and
 *     dev.modelgate.{model,version,artifact,image,run-id,created-by} plus
 *     dev.modelgate.metadata+json (the signed metadata with params and resources, as JSON);
 *   - referrer: artifactType application/vnd.dev.sigstore.bundle.v0.3+json, the empty config,
 *     one layer (the bundle's bytes), subject = the manifest (sigstore's cosign bundle layout).
 *
 * JSON is written compact with sorted keys. Thread-safe.
 */
#ifndef ART_MODELPACK_H
#define ART_MODELPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

#define ART_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define ART_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define ART_OCI_EMPTY "application/vnd.oci.empty.v1+json"
/* sha256 of the two bytes "{}" (image-spec "Guidance for an Empty Descriptor"). */
#define ART_OCI_EMPTY_DIGEST                                                                       \
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
#define ART_MODELPACK_ARTIFACT "application/vnd.cncf.model.manifest.v1+json"
#define ART_MODELPACK_CONFIG "application/vnd.cncf.model.config.v1+json"
#define ART_SIGSTORE_BUNDLE "application/vnd.dev.sigstore.bundle.v0.3+json"

/* More files than this and the artifact is one layer: OCI clients refuse manifests past a
 * few MiB (containers/image: 4 MiB), and a layer per file stops paying off long before. */
#define ART_MODELPACK_MAX_FILE_LAYERS 1000

/* One JSON document: its bytes and "sha256:<hex>" of them. */
struct art_oci_doc {
    char *text; /* malloc'd, NUL-terminated; NULL when absent */
    size_t len;
    char digest[72];
};

struct art_modelpack {
    struct art_oci_doc manifest;
    struct art_oci_doc config;
    struct art_oci_doc referrer; /* text NULL when the version has no bundle */
    char bundle_digest[72];      /* "" when unsigned */
};

/*
 * Build the documents of a version.
 *   version: the Version record (docs/contract.md shape; BORROWED): model, version, created_at,
 *            created_by, artifact {digest, size, media_type, files}, and optionally image,
 *            run_id, source, datasets, params, resources;
 *   files:   {"items":[{"path","size","digest"}]} of an archive (BORROWED), or NULL;
 *   bundle:  the version's model-signing bundle bytes, or NULL (unsigned).
 * MG_EINVAL when the record lacks what a manifest needs; MG_ENOMEM. *out is filled on
 * success (art_modelpack_release frees it) and zeroed on failure.
 */
enum mg_code art_modelpack_build(const json_t *version, const json_t *files, const char *bundle,
                                 size_t bundle_len, struct art_modelpack *out,
                                 struct mg_error *err);

void art_modelpack_release(struct art_modelpack *m);

/* The ModelPack raw layer media type of a file, by its path: weight, weight.config, doc,
 * code or dataset (a heuristic on the name, so layers carry
 * org.cncf.model.file.mediatype.untested = "true"). Static string. */
const char *art_modelpack_layer_type(const char *path);

/* ModelPack's paramSize for a parameter count: "<count><Q|T|B|M|K>" with at most one
 * decimal ("7B", "6.7B", "125M"); false (nothing written) below 100. out holds 32. */
bool art_modelpack_param_size(int64_t parameters, char out[32]);

/* The signed "modelgate" metadata of a bundle's statement (predicate.modelgate), NEW, or
 * NULL when the bundle cannot be read. The signature is not checked here: the bundle is
 * the one the server stored at creation. */
json_t *art_bundle_metadata(const char *bundle, size_t len);

#endif
