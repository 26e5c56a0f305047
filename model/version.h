/*
 * version.h - a new model version as the layers pass it: what a VersionCreate body
 * (docs/contract.md "Versions") says, plus what the server read from the artifact.
 *
 * api/ validates the body and fills the record once (mg_version_new_init); the store reads
 * only the record. Strings and json_t members are BORROWED from the body (or from whoever
 * set them) and must outlive the record's use; the arrays are the record's own
 * (mg_version_new_release). Not thread-safe; one record per request.
 */
#ifndef MODEL_VERSION_H
#define MODEL_VERSION_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "../base/mg.h"

#define MG_VERSION_DATASETS_MAX 256 /* datasets one version names */
#define MG_VERSION_METRICS_MAX 1000 /* metrics one body carries */

/* A data set the version was trained or evaluated on. */
struct mg_dataset_use {
    char digest[72];  /* sha256:<64 lowercase hex> */
    char role[16];    /* train, validation, test or eval */
    const char *name; /* or NULL */
    const char *uri;  /* or NULL */
};

/* One metric: a finite number under a name of ^[A-Za-z0-9_.:/-]{1,128}$. */
struct mg_metric {
    const char *name;
    double value;
    bool integral; /* sent as an integer (|value| <= 2^53): records that echo it keep it one */
};

struct mg_version_new {
    char artifact[72];               /* the artifact blob's digest */
    const char *image;               /* pinned image reference, or NULL */
    const char *run_id;              /* or NULL */
    const char *description;         /* or NULL ("") */
    bool datasets_given;             /* "datasets" was sent (even []) */
    size_t ndatasets;                /* <= MG_VERSION_DATASETS_MAX */
    struct mg_dataset_use *datasets; /* OWNED, in the order sent */
    bool metrics_given;              /* "metrics" was sent (even {}) */
    size_t nmetrics;                 /* <= MG_VERSION_METRICS_MAX */
    struct mg_metric *metrics;       /* OWNED, in the order sent */
    /* Documents kept as JSON, each NULL when absent or null. Free-form by contract:
     * params (any object), tags ({string: string}). Kept as sent, byte for byte, and
     * echoed in every read, where a typed copy would lose null members or an integer's
     * spelling: source {"repo","commit"}, smoke {"profile","max_p95_ms"}, resources
     * {"parameters","precision"}. The server's own: introspection (what it read from the
     * artifact), scan (its safety scan), io_schema (normalised), publisher (who). */
    const json_t *source, *params, *tags, *smoke, *resources;
    const json_t *introspection, *scan, *io_schema, *publisher;
};

/*
 * Fill *v from body, a VersionCreate that already passed the API's checks (types, sizes,
 * digests; nothing is checked again here). The server's readings (introspection, scan,
 * io_schema, publisher) are left NULL for the caller to set. MG_ENOMEM (with *v released)
 * when the arrays cannot be allocated; MG_EINVAL when body is not an object.
 */
enum mg_code mg_version_new_init(struct mg_version_new *v, const json_t *body,
                                 struct mg_error *err);

/* Free the record's arrays and zero it; safe on a zeroed or released record. */
void mg_version_new_release(struct mg_version_new *v);

/*
 * The metrics of a validated {name: number} object into *out (NEW array, free() it; NULL
 * when n is 0), in the object's order. MG_ENOMEM, MG_EINVAL when obj is not an object.
 */
enum mg_code mg_metrics_from_json(const json_t *obj, struct mg_metric **out, size_t *n,
                                  struct mg_error *err);

/* {name: number} of metrics (NEW; NULL when out of memory): integral ones as integers. */
json_t *mg_metrics_json(const struct mg_metric *m, size_t n);

#endif
