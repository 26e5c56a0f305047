/*
 * metrics.c - GET /metrics (Prometheus text exposition) and GET /openapi.json.
 */
#include "api.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/embedded.h"
#include "../base/text.h"
#include "../http/cache.h"
#include "../os/metrics.h"
#include "../control/control.h"

extern const struct mg_embedded schema_files[];
extern const unsigned schema_files_count;

static void gauge_header(struct mg_buf *b, const char *name, const char *help)
{
    char tmp[256];

    snprintf(tmp, sizeof(tmp), "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    mg_buf_puts(b, tmp);
}

static void gauge(struct mg_buf *b, const char *name, const char *labels, double v)
{
    char tmp[512], num[32];

    snprintf(tmp, sizeof(tmp), "%s%s%s%s %s\n", name, labels[0] ? "{" : "", labels,
             labels[0] ? "}" : "", mg_fmt_double(v, num, sizeof(num)));
    mg_buf_puts(b, tmp);
}

/* Label values are escaped per the exposition format whatever their source: a name the API
 * validated today may not be tomorrow. */
static void by_key(struct mg_buf *b, const char *name, const char *label, json_t *obj)
{
    const char *k;
    json_t *v;
    char lbl[300], val[256];

    json_object_foreach(obj, k, v)
    {
        snprintf(lbl, sizeof(lbl), "%s=\"%s\"", label, mg_prom_label(k, val, sizeof(val)));
        gauge(b, name, lbl, json_number_value(v));
    }
}

static void metrics(struct srv_req *r)
{
    struct mg_buf b;
    json_t *st = NULL, *d;
    struct mg_error err;
    char lbl[200];
    long pages = 0, rss = 0;
    size_t i;
    FILE *f;

    mg_buf_init(&b, 16u << 20);
    srv_metrics_render(r->srv->metrics, &b);
    {
        struct store_archive_counters ac;
        char tmp[512];
        store_archive_totals(r->srv->store, &ac);
        snprintf(tmp, sizeof(tmp),
                 "# HELP modelgate_archive_expanded_bytes_total File bytes produced by archive "
                 "inspection and extraction (sparse holes included).\n"
                 "# TYPE modelgate_archive_expanded_bytes_total counter\n"
                 "modelgate_archive_expanded_bytes_total %llu\n"
                 "# HELP modelgate_archive_ratio_refusals_total Archives refused for expanding "
                 "past the ratio cap.\n"
                 "# TYPE modelgate_archive_ratio_refusals_total counter\n"
                 "modelgate_archive_ratio_refusals_total %llu\n",
                 (unsigned long long)ac.expanded_bytes, (unsigned long long)ac.ratio_refusals);
        mg_buf_puts(&b, tmp);
    }
    {
        uint64_t found[ART_SCAN_NRULES];
        int64_t unscanned;
        char tmp[256];
        int k;
        store_scan_totals(r->srv->store, found);
        mg_buf_puts(&b, "# HELP modelgate_scan_findings_total Findings of the artifact safety "
                        "scan, by rule.\n# TYPE modelgate_scan_findings_total counter\n");
        for (k = 0; k < ART_SCAN_NRULES; k++) {
            snprintf(tmp, sizeof(tmp), "modelgate_scan_findings_total{rule=\"%s\"} %llu\n",
                     art_scan_rules[k], (unsigned long long)found[k]);
            mg_buf_puts(&b, tmp);
        }
        /* The background rescan's progress: 0 once every blob has a report. */
        if (store_scan_unscanned_count(r->srv->store, &unscanned, &err) == MG_OK) {
            gauge_header(&b, "modelgate_scan_unscanned_blobs",
                         "Live blobs without a scan report (stored before the scanner; the "
                         "leader scans them in the background).");
            gauge(&b, "modelgate_scan_unscanned_blobs", "", (double)unscanned);
        }
    }
    {
        uint64_t extractions, hits;
        char tmp[512];
        ctl_runner_cache_stats(r->srv->ctl, &extractions, &hits);
        snprintf(tmp, sizeof(tmp),
                 "# HELP modelgate_runner_extractions_total Artifacts the smoke runner "
                 "extracted and hashed into its cache.\n"
                 "# TYPE modelgate_runner_extractions_total counter\n"
                 "modelgate_runner_extractions_total %llu\n"
                 "# HELP modelgate_runner_cache_hits_total Smoke tests given a copy of an "
                 "extraction verified earlier.\n"
                 "# TYPE modelgate_runner_cache_hits_total counter\n"
                 "modelgate_runner_cache_hits_total %llu\n",
                 (unsigned long long)extractions, (unsigned long long)hits);
        mg_buf_puts(&b, tmp);
    }
    {
        uint64_t waiting, waited;
        char tmp[512];
        srv_work_stats(r->srv, &waiting, &waited);
        snprintf(tmp, sizeof(tmp),
                 "# HELP modelgate_upload_commit_waiting Finished uploads waiting for a commit "
                 "worker (--commit-workers).\n"
                 "# TYPE modelgate_upload_commit_waiting gauge\n"
                 "modelgate_upload_commit_waiting %llu\n"
                 "# HELP modelgate_upload_commit_waited_total Finished uploads that found every "
                 "commit worker busy.\n"
                 "# TYPE modelgate_upload_commit_waited_total counter\n"
                 "modelgate_upload_commit_waited_total %llu\n",
                 (unsigned long long)waiting, (unsigned long long)waited);
        mg_buf_puts(&b, tmp);
    }
    if (store_stats(r->srv->store, &st, &err) == MG_OK) {
        gauge_header(&b, "modelgate_promotions", "Promotions by state.");
        by_key(&b, "modelgate_promotions", "state", json_object_get(st, "promotions"));
        gauge_header(&b, "modelgate_deliveries", "Outbox rows by gateway and state.");
        json_array_foreach(json_object_get(st, "deliveries"), i, d)
        {
            char gw[128], state[64];

            snprintf(
                lbl, sizeof(lbl), "gateway=\"%s\",state=\"%s\"",
                mg_prom_label(json_string_value(json_object_get(d, "gateway")), gw, sizeof(gw)),
                mg_prom_label(json_string_value(json_object_get(d, "state")), state,
                              sizeof(state)));
            gauge(&b, "modelgate_deliveries", lbl,
                  (double)json_integer_value(json_object_get(d, "count")));
        }
        gauge_header(&b, "modelgate_delivery_lag_seconds",
                     "Age of the oldest change a gateway has not acknowledged.");
        by_key(&b, "modelgate_delivery_lag_seconds", "gateway",
               json_object_get(st, "delivery_lag_seconds"));
        gauge_header(&b, "modelgate_smoke_tests", "Smoke tests by state.");
        by_key(&b, "modelgate_smoke_tests", "state", json_object_get(st, "smoke_tests"));
        if (strcmp(json_string_value(json_object_get(st, "database")), "sqlite") == 0) {
            gauge_header(&b, "modelgate_sqlite_wal_bytes", "Size of the SQLite write-ahead log.");
            gauge(&b, "modelgate_sqlite_wal_bytes", "",
                  (double)json_integer_value(json_object_get(st, "wal_bytes")));
            gauge_header(&b, "modelgate_sqlite_db_bytes", "Size of the SQLite database file.");
            gauge(&b, "modelgate_sqlite_db_bytes", "",
                  (double)json_integer_value(json_object_get(st, "db_bytes")));
        }
        {
            const json_t *pool = json_object_get(st, "pool"),
                         *l = json_object_get(st, "outbox_leases");

            gauge_header(&b, "modelgate_db_pool_connections",
                         "Read connections to the database this process keeps.");
            gauge(&b, "modelgate_db_pool_connections", "",
                  (double)json_integer_value(json_object_get(pool, "readers")));
            gauge_header(&b, "modelgate_db_pool_busy", "Read connections lent out now.");
            gauge(&b, "modelgate_db_pool_busy", "",
                  (double)json_integer_value(json_object_get(pool, "busy")));
            mg_buf_puts(&b, "# HELP modelgate_db_pool_waits_total Reads that found every "
                            "connection busy and waited.\n"
                            "# TYPE modelgate_db_pool_waits_total counter\n");
            gauge(&b, "modelgate_db_pool_waits_total", "",
                  (double)json_integer_value(json_object_get(pool, "waits")));
            gauge_header(&b, "modelgate_outbox_leases",
                         "Deliveries under a live lease, by holder (this replica or others).");
            gauge(&b, "modelgate_outbox_leases", "holder=\"self\"",
                  (double)json_integer_value(json_object_get(l, "self")));
            gauge(&b, "modelgate_outbox_leases", "holder=\"others\"",
                  (double)json_integer_value(json_object_get(l, "others")));
            gauge_header(&b, "modelgate_replicas",
                         "Replicas seen on the database in the last 10 s.");
            gauge(&b, "modelgate_replicas", "",
                  (double)json_integer_value(json_object_get(st, "replicas_live")));
            gauge_header(&b, "modelgate_leader",
                         "1 when this replica runs the cluster's timers (always with SQLite).");
            gauge(&b, "modelgate_leader", "",
                  json_is_true(json_object_get(st, "leader")) ? 1.0 : 0.0);
        }
    }
    json_decref(st);
    {
        int64_t bytes = 0, blobs = 0;

        if (store_storage_bytes(r->srv->store, &bytes, &blobs, &err) == MG_OK) {
            char lbl2[64];

            gauge_header(&b, "modelgate_storage_bytes",
                         "Bytes of the blobs stored (total, and in the blob backend).");
            gauge(&b, "modelgate_storage_bytes", "", (double)bytes);
            snprintf(lbl2, sizeof(lbl2), "backend=\"%s\"", store_blobs_kind(r->srv->store));
            gauge(&b, "modelgate_storage_bytes", lbl2, (double)bytes);
            gauge_header(&b, "modelgate_storage_blobs", "Blobs stored.");
            gauge(&b, "modelgate_storage_blobs", "", (double)blobs);
        }
    }
    {
        json_t *u = NULL, *item; /* item BORROWED */
        size_t i;

        /* Per team: the unique bytes it keeps and its quota (docs/contract.md "Quotas and cost").
         */
        if (store_usage(r->srv->store, false, &u, &err) == MG_OK) {
            char lbl[96];

            gauge_header(&b, "modelgate_team_storage_bytes",
                         "Unique bytes each team keeps (counted against its quota).");
            json_array_foreach(json_object_get(u, "items"), i, item)
            {
                snprintf(lbl, sizeof(lbl), "team=\"%s\"",
                         json_string_value(json_object_get(item, "team")));
                gauge(&b, "modelgate_team_storage_bytes", lbl,
                      (double)json_integer_value(json_object_get(item, "storage_bytes")));
            }
            gauge_header(&b, "modelgate_team_quota_bytes",
                         "Each team's storage quota (teams with one).");
            json_array_foreach(json_object_get(u, "items"), i, item)
            {
                if (!json_is_integer(json_object_get(item, "quota_bytes")))
                    continue;
                snprintf(lbl, sizeof(lbl), "team=\"%s\"",
                         json_string_value(json_object_get(item, "team")));
                gauge(&b, "modelgate_team_quota_bytes", lbl,
                      (double)json_integer_value(json_object_get(item, "quota_bytes")));
            }
        }
        json_decref(u);
    }
    {
        uint64_t hits, misses;

        srv_cache_counts(r->srv->cache, &hits, &misses);
        mg_buf_puts(&b, "# HELP modelgate_response_cache_lookups_total Cached reads "
                        "(a version, a last-known-good) by result.\n"
                        "# TYPE modelgate_response_cache_lookups_total counter\n");
        gauge(&b, "modelgate_response_cache_lookups_total", "result=\"hit\"", (double)hits);
        gauge(&b, "modelgate_response_cache_lookups_total", "result=\"miss\"", (double)misses);
    }
    {
        uint64_t waits;
        double wait_s;
        bool leased;

        store_cache_counts(r->srv->store, &leased, &waits, &wait_s);
        gauge_header(&b, "modelgate_cache_lease",
                     "1 while this replica holds a cache lease: cached reads need no round trip "
                     "to the database (PostgreSQL).");
        gauge(&b, "modelgate_cache_lease", "", leased ? 1.0 : 0.0);
        mg_buf_puts(&b, "# HELP modelgate_cache_sync_waits_total Writes that waited for other "
                        "replicas holding cache leases to apply them.\n"
                        "# TYPE modelgate_cache_sync_waits_total counter\n");
        gauge(&b, "modelgate_cache_sync_waits_total", "", (double)waits);
        mg_buf_puts(&b, "# HELP modelgate_cache_sync_seconds_total Time those writes waited "
                        "(a replica that does not answer costs up to its lease).\n"
                        "# TYPE modelgate_cache_sync_seconds_total counter\n");
        gauge(&b, "modelgate_cache_sync_seconds_total", "", wait_s);
    }
    f = fopen("/proc/self/statm", "re");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    gauge_header(&b, "modelgate_process_resident_memory_bytes", "Resident memory of modelgated.");
    gauge(&b, "modelgate_process_resident_memory_bytes", "",
          (double)rss * (double)sysconf(_SC_PAGESIZE));
    srv_reply_bytes(r, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "",
                    b.len);
    mg_buf_release(&b);
}

static void openapi(struct srv_req *r)
{
    unsigned i;

    for (i = 0; i < schema_files_count; i++) {
        if (strcmp(schema_files[i].name, "openapi.json") == 0) {
            srv_reply_bytes(r, 200, "application/json", schema_files[i].data, schema_files[i].len);
            return;
        }
    }
    srv_fail(r, MG_ENOTFOUND, NULL, "this build carries no openapi.json");
}

const struct srv_route api_routes_metrics[] = {
    {"GET", "/metrics", MG_ROLE_READER, SRV_BODY_NONE, metrics, NULL, NULL, NULL},
    {"GET", "/openapi.json", MG_NEED_PUBLIC, SRV_BODY_NONE, openapi, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
