/*
 * metrics.h - in-process counters for GET /metrics (Prometheus text format):
 * requests and latency histograms by route pattern (bounded cardinality),
 * method and status, and blob bytes in/out. Thread-safe.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stdint.h>

#include "../base/util.h"

struct srv_metrics;

struct srv_metrics *srv_metrics_new(void);
void srv_metrics_free(struct srv_metrics **m);

/* One finished request; route is the matched pattern or NULL. */
void srv_metrics_request(struct srv_metrics *m, const char *method, const char *route,
                         unsigned status, double seconds);

void srv_metrics_blob_in(struct srv_metrics *m, uint64_t bytes);
void srv_metrics_blob_out(struct srv_metrics *m, uint64_t bytes);

/* Bytes a garbage collection run on this replica reclaimed. */
void srv_metrics_gc_reclaimed(struct srv_metrics *m, uint64_t bytes);

/* A live canary analysis interval was judged: verdict is enum gate_verdict (passed 0,
 * failed 1, inconclusive 2). */
void srv_metrics_analysis_interval(struct srv_metrics *m, int verdict);

/* A delivery that stopped because its claim lost its lease (push_fence). */
void srv_metrics_push_fenced(struct srv_metrics *m);

/* Gateway state found different from the newest generation, by a delivery's read-back or
 * the reconciler, and repaired. */
void srv_metrics_gateway_drift(struct srv_metrics *m);

/* Append the registry's series to b. */
void srv_metrics_render(struct srv_metrics *m, struct mg_buf *b);

#endif
