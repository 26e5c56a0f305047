/*
 * prom.h - a client of the Prometheus HTTP API for live canary analysis (docs/contract.md "Live
 * canary analysis"): one instant query (GET {url}/api/v1/query?query=…&time=…) over libcurl,
 * with a timeout and a cap on the answer's size, and the parser of its answer.
 *
 * Whatever goes wrong (no answer, a timeout, an error status, a body too large, JSON that
 * is not an instant-query answer, a value that is NaN, ±Inf or no number, a query that
 * returns several series) becomes a sample in state GATE_SAMPLE_ERROR with a one-sentence
 * detail a person can act on; an empty vector is GATE_SAMPLE_NODATA. Never a pass.
 *
 * Thread-safe: no state besides what the caller passes.
 */
#ifndef SRV_PROM_H
#define SRV_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "../base/mg.h"
#include "../gates/analysis.h"

#define PROM_ANSWER_MAX (1u << 20) /* bytes of one answer we read */
#define PROM_DETAIL_MAX 256

/* A sample with its own copy of the detail. */
struct prom_sample {
    enum gate_sample_state state;
    double value;
    char detail[PROM_DETAIL_MAX];
};

/* How to reach Prometheus. Strings BORROWED. */
struct prom_client {
    const char *url;     /* base URL, e.g. http://127.0.0.1:9090 (no trailing /) */
    const char *bearer;  /* token for "Authorization: Bearer …", or NULL */
    const char *userpwd; /* "USER:PASSWORD" for basic auth, or NULL */
    long timeout_ms;     /* whole request, connect included */
    size_t max_bytes;    /* cap on the answer (0: PROM_ANSWER_MAX) */
};

/*
 * Parse the body of an answer to /api/v1/query (len bytes, need not be NUL-terminated)
 * that came with HTTP status `status`. Pure: no I/O. *out is always filled.
 */
void prom_parse_answer(const char *body, size_t len, long status, struct prom_sample *out);

/* Run one instant query at at_ms (ms since the epoch). *out is always filled. */
void prom_query(const struct prom_client *c, const char *query, int64_t at_ms,
                struct prom_sample *out);

/*
 * Read --prometheus-credentials FILE (mode 0600, owner-only): its first line is either
 * "Bearer TOKEN" (→ *bearer) or "USER:PASSWORD" (→ *userpwd); the other is set to NULL.
 * Both NEW (free()). MG_EINVAL saying what is wrong with the file.
 */
enum mg_code prom_read_credentials(const char *path, char **bearer, char **userpwd,
                                   struct mg_error *err);

#endif
