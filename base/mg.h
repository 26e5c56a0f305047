/*
 * mg.h - the project's one error enum and the error record that carries a
 * human message (and optionally the JSON path of the offending field) from
 * wherever a problem is found to the single place in server/ that turns it
 * into an HTTP status.
 *
 * Every fallible function returns an enum mg_code (MG_OK == 0) and, when it
 * is given a struct mg_error *, fills it on failure. Out-parameters are set
 * only on success (they are zeroed/NULL on failure).
 */
#ifndef MG_H
#define MG_H

#include <stdarg.h>
#include <stddef.h>

enum mg_code {
    MG_OK = 0,
    MG_EINVAL,        /* invalid_argument, 400 */
    MG_EDIGEST,       /* digest_mismatch, 400 */
    MG_EUNAUTH,       /* unauthenticated, 401 */
    MG_EFORBIDDEN,    /* forbidden, 403 */
    MG_ESELFAPPROVAL, /* self_approval, 403 */
    MG_ENOTFOUND,     /* not_found, 404 */
    MG_EMETHOD,       /* method_not_allowed, 405 */
    MG_ECONFLICT,     /* conflict, 409 */
    MG_ESTALE,        /* conflict, 409: a decision was made on state that changed (retry) */
    MG_EPROTECTED,    /* alias_protected, 409 */
    MG_EINPROGRESS,   /* promotion_in_progress, 409 */
    MG_ENOKNOWNGOOD,  /* no_known_good, 409: nowhere to roll back to */
    MG_ENOLKG,        /* no_known_good, 404: the LKG read found none */
    MG_EGONE,         /* gone, 410: a deleted version's artifact */
    MG_ETOOBIG,       /* payload_too_large, 413 */
    MG_ERANGE,        /* range_not_satisfiable, 416 */
    MG_EMEDIA,        /* unsupported_media_type, 415 */
    MG_ENOSPC,        /* insufficient_storage, 507 */
    MG_EQUOTA,        /* quota_exceeded, 507: a team's storage quota */
    MG_EIO,           /* internal, 500 */
    MG_EDB,           /* internal, 500 */
    MG_ENOMEM,        /* internal, 500 */
    MG_EUNAVAIL,      /* unavailable, 503 */
};

#define MG_ERR_MSG_MAX 512
#define MG_ERR_FIELD_MAX 128

struct mg_error {
    enum mg_code code;
    char message[MG_ERR_MSG_MAX];
    char field[MG_ERR_FIELD_MAX]; /* JSON path of the bad field, or "" */
};

/*
 * Record an error and return its code, so callers can write
 * `return mg_fail(err, MG_EINVAL, "name", "bad name '%s'", n);`.
 * err may be NULL (the code is still returned). field may be NULL.
 */
enum mg_code mg_fail(struct mg_error *err, enum mg_code code, const char *field, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

/* Clear an error record. */
void mg_error_clear(struct mg_error *err);

#endif
