/*
 * config.h - modelgated's settings: the record every layer reads, with its
 * defaults. The daemon fills it from flags and config files (daemon/options.h);
 * nothing here parses.
 */
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

struct srv_config {
    char *listen;   /* "HOST:PORT" or "[V6]:PORT"; default 127.0.0.1:8470 */
    char *data_dir; /* default ./var */
    char *database; /* NULL (SQLite in data_dir) or a PostgreSQL URL */
    char *blobs;    /* --blobs URL (file:, s3://, oci://), or NULL for file:<data_dir>/blobs */
    char *blobs_credentials; /* --blobs-credentials FILE (0600), or NULL */
    bool blob_redirect;      /* --blob-downloads redirect: 307 to a presigned URL (s3) */
    char *host_name;         /* --host-name: delivers gateways with that "host"; NULL: hostname */
    char *port_file;         /* write the bound port here once listening */
    char *signing_key;       /* PEM (PKCS#8) of the active signing key, or NULL */
    char *tls_cert;          /* PEM certificate (chain) → serve HTTPS */
    char *tls_key;           /* its PEM private key */
    uint64_t max_blob_bytes;
    uint64_t max_json_bytes;
    unsigned max_archive_ratio; /* expansion cap N:1 (0 = none) */
    unsigned commit_workers;    /* threads committing finished uploads */
    bool log_json;
    bool sync_normal;
    bool no_response_cache; /* --response-cache off */
    unsigned threads;       /* libmicrohttpd thread pool */
    bool threads_given;     /* --threads was set (else srv_options_parse picks it) */
    unsigned conn_limit;    /* total connections */
    unsigned per_ip_limit;  /* connections per client address */
    unsigned timeout_s;     /* idle timeout, and the deadline for a request's headers */
    unsigned min_body_rate; /* bytes/s a body must average once past timeout_s */
    uint64_t conn_memory;   /* per-connection memory pool */
    unsigned read_conns;    /* database connections serving reads */
    unsigned push_workers;  /* delivery threads */
    uint64_t push_backoff_base_ms;
    uint64_t push_backoff_max_ms;
    uint64_t reconcile_ms;   /* --reconcile-interval-ms: gateways read back and repaired; 0 off */
    char *webhook_allow[32]; /* extra CIDRs webhooks may reach */
    unsigned nwebhook_allow;
    unsigned runner_workers;
    unsigned smoke_interval_s; /* 0 disables periodic re-tests */
    unsigned smoke_timeout_s;
    uint64_t smoke_memory_mib; /* RLIMIT_AS of CPU runs */
    char *nvml_library;
    char *smoke_profiles[32]; /* "NAME=COMMAND" */
    unsigned nsmoke_profiles;
    char *smoke_profile_costs[32]; /* "NAME=COST": cost per hour of a profile's machine */
    unsigned nsmoke_profile_costs;
    char *scan_allow[64]; /* --scan-allow module.name: extra globals pickles may import */
    unsigned nscan_allow;
    bool allow_shared_dir;    /* --allow-shared-dir: serve from a directory others can read */
    char *public_url;         /* --public-url: the origin browsers use, e.g. https://mg.example */
    bool read_scope_team;     /* --read-scope team: team tokens see only their teams' models */
    uint64_t oci_layer_cache; /* bytes of unpacked files kept for per-file OCI layers */
    unsigned retention_interval_s; /* run retention rules this often (0: only on request) */
    unsigned gc_interval_s;        /* collect garbage this often (0: only on request) */
    unsigned gc_grace_s;           /* a blob unreferenced and unsent for longer goes */
    /* The OpenID provider whose users sign in and whose JWTs are bearer tokens (NULL:
     * none; docs/api.md, "Sign in with your identity provider") */
    char *oidc_issuer;
    char *oidc_client_id;
    char *oidc_client_secret_file; /* 0600 */
    char *oidc_groups_claim;       /* default "groups" */
    char *oidc_audience;           /* of API bearer JWTs; default the client id */
    char *prometheus_url;          /* --prometheus-url: live canary analysis's default */
    char *prometheus_credentials;  /* --prometheus-credentials FILE (0600), or NULL */
};

/* The defaults (owned strings: release them with srv_config_release). */
void srv_config_init(struct srv_config *cfg);

/* Frees what cfg owns and zeroes it; init may follow. */
void srv_config_release(struct srv_config *cfg);

/* HTTP threads when --threads is not given: one per CPU this process may run on,
 * 1 to 32 (the database's kind may multiply it: daemon/options.c). */
unsigned srv_config_default_threads(void);

#endif
