/*
 * webhook_rx.h - a webhook receiver for the push tests: a real HTTP/1.1
 * listener on 127.0.0.1 in a thread of the test program that checks every
 * delivery the Standard Webhooks way (webhook-id, webhook-timestamp within
 * five minutes, webhook-signature "v1,<base64 HMAC-SHA256(key,
 * id.timestamp.body)>", the key being the base64-decoded part of a "whsec_" secret or a raw
 * secret's own bytes) and records it. Every delivery is verified twice: here, and by the
 * official Standard Webhooks library from npm (swh_verify.mjs, a Node co-process); a
 * delivery either one refuses is answered 401 and recorded with sig_ok false.
 *
 * It can be taken down (the port then refuses connections) and brought up
 * again on the same port, fail the next N deliveries with 500 and
 * Retry-After, answer with any status (302 with a Location, 410), or hold a
 * request without ever answering (a gateway that hangs).
 *
 * The thread only records; the test asserts on the main thread through
 * rx_snapshot() or rx_take(). Every function here is for the main thread.
 */
#ifndef MG_IT_WEBHOOK_RX_H
#define MG_IT_WEBHOOK_RX_H

#include "push_common.h"

#define RX_MAX_RECS 256

struct rx_rec {
    int64_t at_ms;  /* it_now_ms() when the request was read */
    char path[96];  /* request path */
    char id[192];   /* webhook-id */
    int64_t ts;     /* webhook-timestamp */
    bool sig_ok;    /* the signature verified with the secret (here and by the npm library) */
    bool lib_ok;    /* the npm standardwebhooks library verified it */
    bool ts_ok;     /* timestamp within five minutes of our clock */
    int status;     /* what we answered (0: held without an answer) */
    json_int_t gen; /* body.generation (-1 when the body did not parse) */
    char model[64]; /* body.model */
    char alias[40]; /* body.alias */
    char *body;     /* the raw body, malloc'd */
};

/* A receiver (opaque). */
struct rx;

/* Start a receiver for secret on a fresh loopback port, up (listening) or
 * down. Skips the test without node and the npm package (fails instead when
 * MG_REQUIRE_ALL=1). Free with rx_stop(). */
struct rx *rx_start(const char *secret, bool up);

/* Stop the thread and the verifier, free the records; sets *xp to NULL. */
void rx_stop(struct rx **xp);

/* Take the receiver down (connections are refused) or bring it up again on
 * the same port. */
void rx_set_up(struct rx *x, bool up);

/* Behaviour of the next requests: fail_next answered 500 (+ Retry-After when
 * retry_after_s > 0), then `status` (with Location when given). */
void rx_behave(struct rx *x, int fail_next, int retry_after_s, int status, const char *location);

/* Hold requests without answering (true), or answer again and drop the held
 * connections (false). */
void rx_set_hang(struct rx *x, bool hang);

/* How many requests were recorded so far. */
size_t rx_count(struct rx *x);

/* Copy up to max records into out; their bodies stay the receiver's (valid
 * until rx_stop or rx_take). Returns how many were copied. */
size_t rx_snapshot(struct rx *x, struct rx_rec *out, size_t max);

/* Move every record (at most RX_MAX_RECS) into out and forget them: the caller
 * now owns, and frees, each body. Returns how many were moved. */
size_t rx_take(struct rx *x, struct rx_rec out[RX_MAX_RECS]);

/* Wait until at least n requests were recorded (it_deadline(timeout_ms));
 * returns the count. */
size_t rx_wait_count(struct rx *x, size_t n, int64_t timeout_ms);

/* "http://127.0.0.1:PORT/hook/<tag>" into out; returns out. */
const char *rx_url(const struct rx *x, const char *tag, char *out, size_t n);

/* PUT a webhook gateway `name` that delivers to x's /hook/<name>, signed with
 * x's secret; filters: more JSON members (",\"models\":[...]") or "". */
void rx_gateway_put(struct mg_server *s, const char *name, const struct rx *x, const char *filters);

/* Does the webhook-signature header (space-separated "v1,..." entries) hold
 * the Standard Webhooks signature of id.ts.body with secret? */
bool rx_verify(const char *secret, const char *id, const char *ts, const char *body,
               size_t body_len, const char *header);

#endif
