/*
 * config.c - flags and config file. A config file line is "key = value"
 * (or "key value"), '#' starts a comment, keys are the long flag names.
 */
#include "../model/config.h"

#include <ctype.h>
#include <sched.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "../artifact/archive.h"
#include "../store/store.h"
#include "../identity/oidc.h"

#define CONFIG_LINE_MAX 4096
#define CONFIG_DEPTH_MAX 4

/* One per CPU this process may run on, like nginx's worker_processes auto:
 * a pinned server does not thrash its core with a pool sized for a big
 * machine. On SQLite handlers never wait on the network or on a slow client
 * (upload commits and ?wait requests run off these threads); they wait only on
 * the local disk and SQLite's write lock, for milliseconds. On PostgreSQL every
 * statement is a round trip, during which a thread waits and its CPU would sit
 * idle: four per CPU there (srv_config_parse; one pinned CPU went from ~1 000 to
 * ~5 000 cache-missing reads a second). 1 to 32. */
static unsigned default_threads(void)
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
    cfg->max_archive_ratio = STORE_ARCHIVE_MAX_RATIO;
    cfg->commit_workers = 4;
    cfg->threads = default_threads();
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

const char *srv_config_usage(void)
{
    return "usage: modelgated [options]\n"
           "  --listen HOST:PORT       address to serve on (default 127.0.0.1:8470; port 0 "
           "picks one)\n"
           "  --data-dir DIR           database, blobs and keys (default ./var)\n"
           "  --config FILE            read options from FILE (key = value, keys are these "
           "flag names)\n"
           "  --max-blob-bytes SIZE    largest upload (default 64G)\n"
           "  --max-archive-ratio N    refuse archives expanding more than N:1 once past\n"
           "                           32 MiB expanded; 0 = no cap (default 200)\n"
           "  --commit-workers N       uploads verified and committed at once (default 4)\n"
           "  --max-json-bytes SIZE    largest JSON body (default 1M)\n"
           "  --log-format text|json   request log format on stderr (default text)\n"
           "  --database sqlite|URL    where records live: sqlite (the file modelgate.db in the\n"
           "                           data directory; default) or a PostgreSQL URL\n"
           "                           (postgresql://user:pw@host:port/db or ?host=/socket/dir)\n"
           "                           that any number of modelgated replicas share\n"
           "  --blobs URL              where artifact bytes live (default file:DATA_DIR/blobs):\n"
           "                           file:/DIR, s3://BUCKET/PREFIX?endpoint=http(s)://H:P\n"
           "                           &region=R&path_style=true, or\n"
           "                           oci://HOST:PORT/REPOSITORY?insecure=true (plain http);\n"
           "                           replicas on one database share one backend\n"
           "  --blobs-credentials FILE s3 ACCESS_KEY:SECRET_KEY or oci USER:PASSWORD (mode\n"
           "                           0600); s3 also reads AWS_ACCESS_KEY_ID,\n"
           "                           AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN\n"
           "  --blob-downloads proxy|redirect  serve blob bytes through modelgated (default)\n"
           "                           or answer 307 to a presigned URL valid 5 minutes (s3)\n"
           "  --prometheus-url URL     the Prometheus HTTP API live canary analysis queries\n"
           "                           when a policy's analysis names no provider.url\n"
           "  --prometheus-credentials FILE  'Bearer TOKEN' or 'USER:PASSWORD' (mode 0600),\n"
           "                           sent to --prometheus-url only\n"
           "  --host-name NAME         this replica's host, as gateways' \"host\" names it: only\n"
           "                           the replica on a gateway's host delivers it (nginx and\n"
           "                           HAProxy over a unix socket need one); default hostname\n"
           "  --sync full|normal       SQLite synchronous mode (default full)\n"
           "  --response-cache on|off  answer repeated version and last-known-good reads\n"
           "                           from memory until the next write (default on)\n"
           "  --threads N              HTTP worker threads (default 1 per available CPU; 4 per\n"
           "                           CPU, at most 32, with a PostgreSQL --database)\n"
           "  --max-connections N      connection limit (default 1024)\n"
           "  --connection-memory SIZE per-connection buffer for headers and body reads\n"
           "                           (default 64K)\n"
           "  --max-connections-per-ip N  (default 256)\n"
           "  --timeout SECONDS        idle timeout and the deadline for request headers\n"
           "                           (default 60)\n"
           "  --min-body-rate BYTES    a request body slower than this (per second, averaged)\n"
           "                           past --timeout is cut off (default 1024)\n"
           "  --port-file FILE         write the bound port to FILE once listening\n"
           "  --signing-key FILE       sign with this P-256 key (PEM, PKCS#8, mode 0600)\n"
           "  --tls-cert FILE          serve HTTPS with this PEM certificate (chain)\n"
           "  --tls-key FILE           and this PEM private key (mode 0600)\n"
           "  --push-workers N         gateway delivery threads (default 2)\n"
           "  --push-backoff-base-ms N first retry delay bound (default 1000, doubling)\n"
           "  --push-backoff-max-ms N  longest retry delay (default 300000)\n"
           "  --reconcile-interval-ms N read HAProxy and nginx gateways back this often and\n"
           "                           repair drift (default 60000, 0 off)\n"
           "  --webhook-allow CIDR     a network webhooks may reach (repeatable; loopback is\n"
           "                           allowed when modelgated itself listens on loopback)\n"
           "  --smoke-profile NAME=CMD a smoke-test command template with {model_dir} and\n"
           "                           {output} (repeatable; no shell runs it)\n"
           "  --smoke-profile-cost NAME=COST  cost per hour of the machine profile NAME runs\n"
           "                           on (any currency unit; repeatable): smoke tests then\n"
           "                           report cost_per_1k_requests\n"
           "  --scan-allow MOD.NAME    a global pickles may import besides what\n"
           "                           torch.load(weights_only=True) accepts (repeatable)\n"
           "  --runner-workers N       smoke tests run at once (default 1)\n"
           "  --smoke-interval S       re-test routed versions every S seconds (default 300, 0 "
           "off)\n"
           "  --smoke-timeout S        kill a test's process group after S seconds (default 300)\n"
           "  --smoke-memory-mib N     address-space limit of CPU test runs (default 16384)\n"
           "  --nvml-library PATH      NVML to load (default libnvidia-ml.so.1)\n"
           "  --public-url URL         the scheme://host[:port] browsers reach the UI at; set\n"
           "                           it behind a proxy: the UI's origin checks use it, not\n"
           "                           the Host header\n"
           "  --read-scope all|team    with team, a token with teams sees only its teams'\n"
           "                           models (others answer 404); default all\n"
           "  --oci-layer-cache SIZE   unpacked archive files kept to serve OCI layers of one\n"
           "                           file each (/v2/; default 8G; least recently served go)\n"
           "  --retention-interval D   run every model's retention rule this often (default\n"
           "                           1h; 0s: only when asked); D is 30s, 15m, 24h, 7d\n"
           "  --gc-interval D          collect unreferenced blobs this often (default 1h; 0s:\n"
           "                           only when asked)\n"
           "  --gc-grace D             keep an unreferenced blob this long after it was last\n"
           "                           uploaded (default 24h)\n"
           "  --oidc-issuer URL        an OpenID provider (https://; http:// on loopback) whose\n"
           "                           JWTs are accepted as bearer tokens (API.md \"Identity\")\n"
           "  --oidc-client-id ID      this server's client id at the provider\n"
           "  --oidc-client-secret-file FILE  its client secret (mode 0600)\n"
           "  --oidc-groups-claim NAME the claim listing a user's groups (default groups)\n"
           "  --oidc-audience AUD      the audience API bearer JWTs must carry (default the\n"
           "                           client id)\n"
           "  --allow-shared-dir       serve from a data directory that others may read or\n"
           "                           write (refused by default: it holds secrets)\n"
           "\n"
           "usage: modelgated keys rotate --data-dir DIR [--database URL]\n"
           "         make a new active signing key; old public keys stay published. With\n"
           "         --database (PostgreSQL), the key every replica on it signs with: running\n"
           "         replicas follow within seconds\n"
           "       modelgated backup --data-dir DIR [--blobs URL] --out FILE.tar   (safe while "
           "serving)\n"
           "       modelgated restore --data-dir NEW [--blobs URL] --from FILE.tar\n"
           "       modelgated migrate --data-dir DIR --to-database postgresql://... "
           "[--to-blobs URL]\n"
           "         copy an embedded installation to shared backends (resumable)\n";
}

static enum mg_code set_uint(unsigned *dst, const char *key, const char *v, int64_t min,
                             int64_t max, struct mg_error *err)
{
    int64_t n;

    if (!mg_parse_i64(v, min, max, &n))
        return mg_fail(err, MG_EINVAL, key, "--%s needs a number between %lld and %lld, not '%s'",
                       key, (long long)min, (long long)max, v);
    *dst = (unsigned)n;
    return MG_OK;
}

/* A duration: a whole number and a unit, s, m, h or d ("0s", "15m", "24h"), at most 365d. */
static enum mg_code set_duration(unsigned *dst, const char *key, const char *v,
                                 struct mg_error *err)
{
    static const struct {
        char unit;
        unsigned secs;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
    size_t n = strlen(v), i;
    int64_t num;
    char digits[16];

    if (n >= 2 && n < sizeof(digits)) {
        memcpy(digits, v, n - 1);
        digits[n - 1] = '\0';
        for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            if (v[n - 1] == units[i].unit && mg_parse_i64(digits, 0, 365LL * 86400, &num) &&
                num * units[i].secs <= 365LL * 86400) {
                *dst = (unsigned)(num * units[i].secs);
                return MG_OK;
            }
        }
    }
    return mg_fail(err, MG_EINVAL, key,
                   "--%s is a duration such as 0s, 90s, 15m, 24h or 7d (at most 365d), not '%s'",
                   key, v);
}

static enum mg_code set_size(uint64_t *dst, const char *key, const char *v, struct mg_error *err)
{
    uint64_t n;

    if (!mg_parse_size(v, &n) || n == 0)
        return mg_fail(err, MG_EINVAL, key,
                       "--%s needs a positive size such as 1048576, 512K, 1M or 64G, not '%s'", key,
                       v);
    *dst = n;
    return MG_OK;
}

static enum mg_code set_str(char **dst, const char *v, struct mg_error *err)
{
    char *s = strdup(v);

    if (s == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    free(*dst);
    *dst = s;
    return MG_OK;
}

static enum mg_code read_file(struct srv_config *cfg, const char *path, int depth,
                              struct mg_error *err);

/* Apply one key/value. */
static enum mg_code apply(struct srv_config *cfg, const char *key, const char *v, int depth,
                          struct mg_error *err)
{
    if (strcmp(key, "listen") == 0)
        return set_str(&cfg->listen, v, err);
    if (strcmp(key, "data-dir") == 0)
        return set_str(&cfg->data_dir, v, err);
    if (strcmp(key, "port-file") == 0)
        return set_str(&cfg->port_file, v, err);
    if (strcmp(key, "signing-key") == 0)
        return set_str(&cfg->signing_key, v, err);
    if (strcmp(key, "tls-cert") == 0)
        return set_str(&cfg->tls_cert, v, err);
    if (strcmp(key, "tls-key") == 0)
        return set_str(&cfg->tls_key, v, err);
    if (strcmp(key, "config") == 0)
        return read_file(cfg, v, depth + 1, err);
    if (strcmp(key, "max-blob-bytes") == 0)
        return set_size(&cfg->max_blob_bytes, key, v, err);
    if (strcmp(key, "max-json-bytes") == 0)
        return set_size(&cfg->max_json_bytes, key, v, err);
    if (strcmp(key, "oci-layer-cache") == 0)
        return set_size(&cfg->oci_layer_cache, key, v, err);
    if (strcmp(key, "connection-memory") == 0) {
        uint64_t n = 0;

        /* Request headers and the read buffer live in it: below 16K, ordinary
         * requests (long bearer tokens, browsers' headers) stop fitting. */
        if (set_size(&n, key, v, err) != MG_OK || n < (16u << 10) || n > (16u << 20))
            return mg_fail(err, MG_EINVAL, key,
                           "--connection-memory is between 16K and 16M, not '%s'", v);
        cfg->conn_memory = n;
        return MG_OK;
    }
    if (strcmp(key, "log-format") == 0) {
        if (strcmp(v, "text") != 0 && strcmp(v, "json") != 0)
            return mg_fail(err, MG_EINVAL, key, "--log-format is text or json, not '%s'", v);
        cfg->log_json = strcmp(v, "json") == 0;
        return MG_OK;
    }
    if (strcmp(key, "response-cache") == 0) {
        if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
            return mg_fail(err, MG_EINVAL, key, "--response-cache is on or off, not '%s'", v);
        cfg->no_response_cache = strcmp(v, "off") == 0;
        return MG_OK;
    }
    if (strcmp(key, "sync") == 0) {
        if (strcmp(v, "full") != 0 && strcmp(v, "normal") != 0)
            return mg_fail(err, MG_EINVAL, key, "--sync is full or normal, not '%s'", v);
        cfg->sync_normal = strcmp(v, "normal") == 0;
        return MG_OK;
    }
    if (strcmp(key, "threads") == 0) {
        cfg->threads_given = true;
        return set_uint(&cfg->threads, key, v, 1, 256, err);
    }
    if (strcmp(key, "max-connections") == 0)
        return set_uint(&cfg->conn_limit, key, v, 1, 65536, err);
    if (strcmp(key, "max-connections-per-ip") == 0)
        return set_uint(&cfg->per_ip_limit, key, v, 1, 65536, err);
    if (strcmp(key, "timeout") == 0)
        return set_uint(&cfg->timeout_s, key, v, 1, 3600, err);
    if (strcmp(key, "min-body-rate") == 0)
        return set_uint(&cfg->min_body_rate, key, v, 1, 1u << 30, err);
    if (strcmp(key, "push-workers") == 0)
        return set_uint(&cfg->push_workers, key, v, 1, 64, err);
    if (strcmp(key, "push-backoff-base-ms") == 0 || strcmp(key, "push-backoff-max-ms") == 0) {
        int64_t n;
        if (!mg_parse_i64(v, 1, 86400000, &n))
            return mg_fail(err, MG_EINVAL, key, "--%s needs milliseconds from 1 to 86400000", key);
        if (strcmp(key, "push-backoff-base-ms") == 0)
            cfg->push_backoff_base_ms = (uint64_t)n;
        else
            cfg->push_backoff_max_ms = (uint64_t)n;
        return MG_OK;
    }
    if (strcmp(key, "reconcile-interval-ms") == 0) {
        int64_t n;
        if (!mg_parse_i64(v, 0, 86400000, &n))
            return mg_fail(err, MG_EINVAL, key, "--%s needs milliseconds from 0 (off) to 86400000",
                           key);
        cfg->reconcile_ms = (uint64_t)n;
        return MG_OK;
    }
    if (strcmp(key, "webhook-allow") == 0) {
        char *s;
        if (cfg->nwebhook_allow >= sizeof(cfg->webhook_allow) / sizeof(cfg->webhook_allow[0]))
            return mg_fail(err, MG_EINVAL, key, "at most 32 --webhook-allow networks");
        if ((s = strdup(v)) == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        cfg->webhook_allow[cfg->nwebhook_allow++] = s;
        return MG_OK;
    }
    if (strcmp(key, "max-archive-ratio") == 0)
        return set_uint(&cfg->max_archive_ratio, key, v, 0, 1000000, err);
    if (strcmp(key, "commit-workers") == 0)
        return set_uint(&cfg->commit_workers, key, v, 1, 64, err);
    if (strcmp(key, "runner-workers") == 0)
        return set_uint(&cfg->runner_workers, key, v, 1, 16, err);
    if (strcmp(key, "smoke-interval") == 0)
        return set_uint(&cfg->smoke_interval_s, key, v, 0, 86400, err);
    if (strcmp(key, "retention-interval") == 0)
        return set_duration(&cfg->retention_interval_s, key, v, err);
    if (strcmp(key, "gc-interval") == 0)
        return set_duration(&cfg->gc_interval_s, key, v, err);
    if (strcmp(key, "gc-grace") == 0)
        return set_duration(&cfg->gc_grace_s, key, v, err);
    if (strcmp(key, "smoke-timeout") == 0)
        return set_uint(&cfg->smoke_timeout_s, key, v, 1, 86400, err);
    if (strcmp(key, "smoke-memory-mib") == 0) {
        int64_t n;
        if (!mg_parse_i64(v, 64, 1 << 24, &n))
            return mg_fail(err, MG_EINVAL, key, "--smoke-memory-mib is 64 to 16777216");
        cfg->smoke_memory_mib = (uint64_t)n;
        return MG_OK;
    }
    if (strcmp(key, "nvml-library") == 0)
        return set_str(&cfg->nvml_library, v, err);
    if (strcmp(key, "host-name") == 0) {
        size_t n = strlen(v);

        if (n == 0 || n > 253 ||
            strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789-._") != n)
            return mg_fail(err, MG_EINVAL, key,
                           "--host-name is a host name: letters, digits, '-', '.', '_'");
        return set_str(&cfg->host_name, v, err);
    }
    if (strcmp(key, "blobs") == 0) {
        if (store_blobs_url_kind(v, err) == NULL)
            return err->code;
        return set_str(&cfg->blobs, v, err);
    }
    if (strcmp(key, "blobs-credentials") == 0)
        return set_str(&cfg->blobs_credentials, v, err);
    if (strcmp(key, "prometheus-url") == 0) {
        size_t n = strlen(v);

        if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) || n < 9 || n > 512 ||
            strpbrk(v, " \t?#") != NULL)
            return mg_fail(err, MG_EINVAL, key,
                           "--prometheus-url is the http:// or https:// URL of the Prometheus "
                           "HTTP API, e.g. http://127.0.0.1:9090");
        return set_str(&cfg->prometheus_url, v, err);
    }
    if (strcmp(key, "prometheus-credentials") == 0)
        return set_str(&cfg->prometheus_credentials, v, err);
    if (strcmp(key, "blob-downloads") == 0) {
        if (strcmp(v, "proxy") != 0 && strcmp(v, "redirect") != 0)
            return mg_fail(err, MG_EINVAL, key, "--blob-downloads is proxy or redirect, not '%s'",
                           v);
        cfg->blob_redirect = strcmp(v, "redirect") == 0;
        return MG_OK;
    }
    if (strcmp(key, "database") == 0) {
        if (strcmp(v, "sqlite") == 0) {
            free(cfg->database);
            cfg->database = NULL;
            return MG_OK;
        }
        if (strncmp(v, "postgresql://", 13) != 0 && strncmp(v, "postgres://", 11) != 0)
            return mg_fail(err, MG_EINVAL, key, "--database is sqlite or a postgresql:// URL");
        return set_str(&cfg->database, v, err);
    }
    if (strcmp(key, "read-scope") == 0) {
        if (strcmp(v, "all") != 0 && strcmp(v, "team") != 0)
            return mg_fail(err, MG_EINVAL, key, "--read-scope is all or team, not '%s'", v);
        cfg->read_scope_team = strcmp(v, "team") == 0;
        return MG_OK;
    }
    if (strcmp(key, "allow-shared-dir") == 0) {
        if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0)
            return mg_fail(err, MG_EINVAL, key, "--allow-shared-dir is yes or no, not '%s'", v);
        cfg->allow_shared_dir = strcmp(v, "yes") == 0;
        return MG_OK;
    }
    if (strcmp(key, "public-url") == 0) {
        size_t n = strlen(v);
        const char *host = strncmp(v, "https://", 8) == 0  ? v + 8
                           : strncmp(v, "http://", 7) == 0 ? v + 7
                                                           : NULL;

        /* An origin: scheme://host[:port], nothing after it (a trailing '/' is dropped). */
        if (n > 0 && v[n - 1] == '/')
            n--;
        if (host == NULL || (size_t)(host - v) >= n || memchr(host, '/', n - (size_t)(host - v)) ||
            strpbrk(v, " \t\r\n\"'<>\\?#@") != NULL || n > 255)
            return mg_fail(err, MG_EINVAL, key,
                           "--public-url is an origin such as https://modelgate.example:8443, "
                           "not '%.100s'",
                           v);
        if (set_str(&cfg->public_url, v, err) != MG_OK)
            return err->code;
        cfg->public_url[n] = '\0';
        return MG_OK;
    }
    if (strcmp(key, "smoke-profile") == 0) {
        char *s;
        if (cfg->nsmoke_profiles >= sizeof(cfg->smoke_profiles) / sizeof(cfg->smoke_profiles[0]))
            return mg_fail(err, MG_EINVAL, key, "at most 32 --smoke-profile entries");
        if ((s = strdup(v)) == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        cfg->smoke_profiles[cfg->nsmoke_profiles++] = s;
        return MG_OK;
    }
    if (strcmp(key, "scan-allow") == 0) {
        char *s;
        size_t i, n = strlen(v);
        for (i = 0; i < n && (v[i] == '.' || v[i] == '_' || (v[i] >= '0' && v[i] <= '9') ||
                              (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z'));
             i++)
            ;
        if (n == 0 || i < n || n > 256 || strchr(v, '.') == NULL || strstr(v, "__") != NULL)
            return mg_fail(err, MG_EINVAL, key,
                           "--scan-allow takes a dotted Python name without dunders, such as "
                           "mypkg.config.TrainConfig");
        if (cfg->nscan_allow >= sizeof(cfg->scan_allow) / sizeof(cfg->scan_allow[0]))
            return mg_fail(err, MG_EINVAL, key, "at most 64 --scan-allow entries");
        if ((s = strdup(v)) == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        cfg->scan_allow[cfg->nscan_allow++] = s;
        return MG_OK;
    }
    if (strcmp(key, "oidc-issuer") == 0) {
        if (!id_url_allowed(v) || strlen(v) > STORE_ISSUER_MAX)
            return mg_fail(err, MG_EINVAL, key,
                           "--oidc-issuer is an https:// URL (http:// only on loopback)");
        return set_str(&cfg->oidc_issuer, v, err);
    }
    if (strcmp(key, "oidc-client-id") == 0)
        return set_str(&cfg->oidc_client_id, v, err);
    if (strcmp(key, "oidc-client-secret-file") == 0)
        return set_str(&cfg->oidc_client_secret_file, v, err);
    if (strcmp(key, "oidc-groups-claim") == 0)
        return set_str(&cfg->oidc_groups_claim, v, err);
    if (strcmp(key, "oidc-audience") == 0)
        return set_str(&cfg->oidc_audience, v, err);
    if (strcmp(key, "smoke-profile-cost") == 0) {
        char *s;
        if (cfg->nsmoke_profile_costs >=
            sizeof(cfg->smoke_profile_costs) / sizeof(cfg->smoke_profile_costs[0]))
            return mg_fail(err, MG_EINVAL, key, "at most 32 --smoke-profile-cost entries");
        if ((s = strdup(v)) == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        cfg->smoke_profile_costs[cfg->nsmoke_profile_costs++] = s;
        return MG_OK;
    }
    if (strcmp(key, "read-connections") == 0)
        return set_uint(&cfg->read_conns, key, v, 1, 64, err);
    return mg_fail(err, MG_EINVAL, key, "unknown option '%s'; see modelgated --help", key);
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static enum mg_code read_file(struct srv_config *cfg, const char *path, int depth,
                              struct mg_error *err)
{
    FILE *f;
    char line[CONFIG_LINE_MAX];
    unsigned lineno = 0;
    enum mg_code rc = MG_OK;

    if (depth > CONFIG_DEPTH_MAX)
        return mg_fail(err, MG_EINVAL, "config", "config files include each other too deeply");
    f = fopen(path, "re");
    if (f == NULL)
        return mg_fail(err, MG_EINVAL, "config", "cannot read config file %s: %s", path,
                       strerror(errno));
    while (rc == MG_OK && fgets(line, sizeof(line), f) != NULL) {
        char *k, *v, *sep;

        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            rc = mg_fail(err, MG_EINVAL, "config", "%s:%u: line too long", path, lineno);
            break;
        }
        if ((sep = strchr(line, '#')) != NULL)
            *sep = '\0';
        k = trim(line);
        if (*k == '\0')
            continue;
        sep = k + strcspn(k, "= \t");
        if (*sep == '\0') {
            rc = mg_fail(err, MG_EINVAL, "config", "%s:%u: expected 'key = value'", path, lineno);
            break;
        }
        *sep = '\0';
        v = trim(sep + 1);
        if (*v == '=')
            v = trim(v + 1);
        if (apply(cfg, k, v, depth, err) != MG_OK) {
            char msg[MG_ERR_MSG_MAX];
            snprintf(msg, sizeof(msg), "%s", err->message);
            rc = mg_fail(err, MG_EINVAL, "config", "%s:%u: %s", path, lineno, msg);
        }
    }
    fclose(f);
    return rc;
}

enum mg_code srv_config_parse(struct srv_config *cfg, int argc, char **argv, struct mg_error *err)
{
    int i;

    for (i = 0; i < argc; i++) {
        const char *a = argv[i], *eq, *v;
        char key[64];
        size_t klen;

        if (strncmp(a, "--", 2) != 0)
            return mg_fail(err, MG_EINVAL, NULL, "unexpected argument '%s'; see --help", a);
        a += 2;
        eq = strchr(a, '=');
        klen = eq ? (size_t)(eq - a) : strlen(a);
        if (klen >= sizeof(key))
            return mg_fail(err, MG_EINVAL, NULL, "unknown option '--%s'", a);
        memcpy(key, a, klen);
        key[klen] = '\0';
        if (eq) {
            v = eq + 1;
        } else if (strcmp(key, "allow-shared-dir") == 0) {
            v = "yes"; /* a bare switch */
        } else {
            if (i + 1 >= argc)
                return mg_fail(err, MG_EINVAL, key, "--%s needs a value", key);
            v = argv[++i];
        }
        if (apply(cfg, key, v, 0, err) != MG_OK)
            return err->code;
    }
    if (!cfg->threads_given && cfg->database != NULL) {
        unsigned n = default_threads() * 4;
        cfg->threads = n > 32 ? 32 : n;
    }
    return MG_OK;
}
