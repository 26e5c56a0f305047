/*
 * config.c - the settings record's defaults and release. What a flag or config
 * file line may set, and how it is checked, is daemon/options.c's table.
 */
#include "config.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* One per CPU this process may run on, like nginx's worker_processes auto:
 * a pinned server does not thrash its core with a pool sized for a big
 * machine. On SQLite handlers never wait on the network or on a slow client
 * (upload commits and ?wait requests run off these threads); they wait only on
 * the local disk and SQLite's write lock, for milliseconds. On PostgreSQL every
 * statement is a round trip, during which a thread waits and its CPU would sit
 * idle: four per CPU there (srv_options_parse; one pinned CPU went from ~1 000 to
 * ~5 000 cache-missing reads a second). 1 to 32. */
unsigned srv_config_default_threads(void)
{
    cpu_set_t set;
    int n = 0;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
    if (n < 1)
        n = 4;
    return (unsigned)(n > 32 ? 32 : n);
}

void srv_config_init(struct srv_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen = strdup("127.0.0.1:8470");
    cfg->data_dir = strdup("./var");
    cfg->max_blob_bytes = 64ull << 30;
    cfg->max_json_bytes = 1u << 20;
    cfg->max_archive_ratio = 200; /* artifact/archive.h's STORE_ARCHIVE_MAX_RATIO */
    cfg->commit_workers = 4;
    cfg->threads = srv_config_default_threads();
    cfg->conn_limit = 1024;
    cfg->per_ip_limit = 256;
    cfg->timeout_s = 60;
    cfg->min_body_rate = 1024;
    cfg->conn_memory = 64u << 10;
    cfg->read_conns = 4;
    cfg->push_workers = 2;
    cfg->push_backoff_base_ms = 1000;
    cfg->push_backoff_max_ms = 300000;
    cfg->reconcile_ms = 60000;
    cfg->runner_workers = 1;
    cfg->smoke_interval_s = 300;
    cfg->smoke_timeout_s = 300;
    cfg->smoke_memory_mib = 16384;
    cfg->oci_layer_cache = 8ull << 30;
    cfg->retention_interval_s = 3600;
    cfg->gc_interval_s = 3600;
    cfg->gc_grace_s = 86400;
}

void srv_config_release(struct srv_config *cfg)
{
    free(cfg->listen);
    free(cfg->data_dir);
    free(cfg->port_file);
    free(cfg->signing_key);
    free(cfg->tls_cert);
    free(cfg->tls_key);
    while (cfg->nwebhook_allow > 0)
        free(cfg->webhook_allow[--cfg->nwebhook_allow]);
    while (cfg->nsmoke_profiles > 0)
        free(cfg->smoke_profiles[--cfg->nsmoke_profiles]);
    while (cfg->nsmoke_profile_costs > 0)
        free(cfg->smoke_profile_costs[--cfg->nsmoke_profile_costs]);
    while (cfg->nscan_allow > 0)
        free(cfg->scan_allow[--cfg->nscan_allow]);
    free(cfg->nvml_library);
    free(cfg->database);
    free(cfg->blobs);
    free(cfg->blobs_credentials);
    free(cfg->prometheus_url);
    free(cfg->prometheus_credentials);
    free(cfg->host_name);
    free(cfg->public_url);
    free(cfg->oidc_issuer);
    free(cfg->oidc_client_id);
    free(cfg->oidc_client_secret_file);
    free(cfg->oidc_groups_claim);
    free(cfg->oidc_audience);
    memset(cfg, 0, sizeof(*cfg));
}
