/*
 * metrics.c - see metrics.h.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double buckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct series {
    const char *route; /* a static route pattern, or "unmatched" */
    char method[8];
    unsigned status;
    uint64_t count;
    double sum;
    uint64_t bucket[NBUCKETS];
};

struct srv_metrics {
    pthread_mutex_t lock;
    struct series *s;
    size_t n, cap;
    uint64_t blob_in, blob_out;
    uint64_t gc_reclaimed;
    uint64_t analysis[3]; /* intervals by verdict: passed, failed, inconclusive */
    uint64_t push_fenced;
    uint64_t gateway_drift;
};

struct srv_metrics *srv_metrics_new(void)
{
    struct srv_metrics *m = calloc(1, sizeof(*m));

    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void srv_metrics_free(struct srv_metrics **mp)
{
    struct srv_metrics *m = *mp;

    if (m == NULL)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->s);
    free(m);
    *mp = NULL;
}

void srv_metrics_request(struct srv_metrics *m, const char *method, const char *route,
                         unsigned status, double seconds)
{
    struct series *x = NULL;
    size_t i;

    if (m == NULL)
        return;
    if (route == NULL)
        route = "unmatched";
    pthread_mutex_lock(&m->lock);
    for (i = 0; i < m->n; i++) {
        if (m->s[i].route == route && m->s[i].status == status &&
            strcmp(m->s[i].method, method) == 0) {
            x = &m->s[i];
            break;
        }
    }
    /* Cardinality is bounded: route patterns × methods × statuses. */
    if (x == NULL && m->n < 4096) {
        if (m->n == m->cap) {
            size_t ncap = m->cap ? m->cap * 2 : 64;
            struct series *ns = realloc(m->s, ncap * sizeof(*ns));
            if (ns == NULL)
                goto out;
            m->s = ns;
            m->cap = ncap;
        }
        x = &m->s[m->n++];
        memset(x, 0, sizeof(*x));
        x->route = route;
        snprintf(x->method, sizeof(x->method), "%s", method);
        x->status = status;
    }
    if (x) {
        x->count++;
        x->sum += seconds;
        for (i = 0; i < NBUCKETS; i++) {
            if (seconds <= buckets[i])
                x->bucket[i]++;
        }
    }
out:
    pthread_mutex_unlock(&m->lock);
}

void srv_metrics_blob_in(struct srv_metrics *m, uint64_t bytes)
{
    if (m)
        __atomic_add_fetch(&m->blob_in, bytes, __ATOMIC_RELAXED);
}

void srv_metrics_blob_out(struct srv_metrics *m, uint64_t bytes)
{
    if (m)
        __atomic_add_fetch(&m->blob_out, bytes, __ATOMIC_RELAXED);
}

void srv_metrics_gc_reclaimed(struct srv_metrics *m, uint64_t bytes)
{
    if (m)
        __atomic_add_fetch(&m->gc_reclaimed, bytes, __ATOMIC_RELAXED);
}

void srv_metrics_analysis_interval(struct srv_metrics *m, int verdict)
{
    if (m && verdict >= 0 && verdict < 3)
        __atomic_add_fetch(&m->analysis[verdict], 1, __ATOMIC_RELAXED);
}

void srv_metrics_push_fenced(struct srv_metrics *m)
{
    if (m)
        __atomic_add_fetch(&m->push_fenced, 1, __ATOMIC_RELAXED);
}

void srv_metrics_gateway_drift(struct srv_metrics *m)
{
    if (m)
        __atomic_add_fetch(&m->gateway_drift, 1, __ATOMIC_RELAXED);
}

static void line(struct mg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line(struct mg_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        mg_buf_append(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void srv_metrics_render(struct srv_metrics *m, struct mg_buf *b)
{
    size_t i, k;

    pthread_mutex_lock(&m->lock);
    line(b, "# HELP modelgate_http_requests_total HTTP requests by route, method and status.\n"
            "# TYPE modelgate_http_requests_total counter\n");
    for (i = 0; i < m->n; i++)
        line(b, "modelgate_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} %llu\n",
             m->s[i].route, m->s[i].method, m->s[i].status, (unsigned long long)m->s[i].count);
    line(b, "# HELP modelgate_http_request_duration_seconds Time to answer a request.\n"
            "# TYPE modelgate_http_request_duration_seconds histogram\n");
    for (i = 0; i < m->n; i++) {
        const struct series *x = &m->s[i];
        for (k = 0; k < NBUCKETS; k++)
            line(b,
                 "modelgate_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\","
                 "status=\"%u\",le=\"%g\"} %llu\n",
                 x->route, x->method, x->status, buckets[k], (unsigned long long)x->bucket[k]);
        line(b,
             "modelgate_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\","
             "status=\"%u\",le=\"+Inf\"} %llu\n",
             x->route, x->method, x->status, (unsigned long long)x->count);
        line(b,
             "modelgate_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\","
             "status=\"%u\"} %.6f\n",
             x->route, x->method, x->status, x->sum);
        line(b,
             "modelgate_http_request_duration_seconds_count{route=\"%s\",method=\"%s\","
             "status=\"%u\"} %llu\n",
             x->route, x->method, x->status, (unsigned long long)x->count);
    }
    pthread_mutex_unlock(&m->lock);
    line(b,
         "# HELP modelgate_blob_bytes_in_total Bytes received in blob uploads.\n"
         "# TYPE modelgate_blob_bytes_in_total counter\n"
         "modelgate_blob_bytes_in_total %llu\n",
         (unsigned long long)__atomic_load_n(&m->blob_in, __ATOMIC_RELAXED));
    line(b,
         "# HELP modelgate_blob_bytes_out_total Bytes sent from blobs and artifacts.\n"
         "# TYPE modelgate_blob_bytes_out_total counter\n"
         "modelgate_blob_bytes_out_total %llu\n",
         (unsigned long long)__atomic_load_n(&m->blob_out, __ATOMIC_RELAXED));
    line(b,
         "# HELP modelgate_gc_reclaimed_bytes_total Blob bytes garbage collection on this "
         "replica removed.\n"
         "# TYPE modelgate_gc_reclaimed_bytes_total counter\n"
         "modelgate_gc_reclaimed_bytes_total %llu\n",
         (unsigned long long)__atomic_load_n(&m->gc_reclaimed, __ATOMIC_RELAXED));
    line(b,
         "# HELP modelgate_analysis_intervals_total Live canary analysis intervals this replica "
         "judged, by verdict.\n"
         "# TYPE modelgate_analysis_intervals_total counter\n"
         "modelgate_analysis_intervals_total{verdict=\"passed\"} %llu\n"
         "modelgate_analysis_intervals_total{verdict=\"failed\"} %llu\n"
         "modelgate_analysis_intervals_total{verdict=\"inconclusive\"} %llu\n",
         (unsigned long long)__atomic_load_n(&m->analysis[0], __ATOMIC_RELAXED),
         (unsigned long long)__atomic_load_n(&m->analysis[1], __ATOMIC_RELAXED),
         (unsigned long long)__atomic_load_n(&m->analysis[2], __ATOMIC_RELAXED));
    line(b,
         "# HELP modelgate_push_fenced_total Deliveries on this replica stopped because their "
         "lease had ended.\n"
         "# TYPE modelgate_push_fenced_total counter\n"
         "modelgate_push_fenced_total %llu\n",
         (unsigned long long)__atomic_load_n(&m->push_fenced, __ATOMIC_RELAXED));
    line(b,
         "# HELP modelgate_gateway_drift_total Times this replica found a gateway's live state "
         "off the newest generation and repaired it.\n"
         "# TYPE modelgate_gateway_drift_total counter\n"
         "modelgate_gateway_drift_total %llu\n",
         (unsigned long long)__atomic_load_n(&m->gateway_drift, __ATOMIC_RELAXED));
}
