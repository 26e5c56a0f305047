/*
 * options.c - modelgated's option table: each row names an option, how its
 * value is checked and stored (a setter and the field's offset, as nginx's
 * ngx_command_t rows do) and its help line. Flags, config files and the usage
 * text all read the table, so an option cannot exist in one and not the others.
 *
 * A config file line is "key = value" (or "key value"), '#' starts a comment,
 * keys are the long flag names.
 */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"
#include "../identity/oidc.h"
#include "../store/store.h"

#define CONFIG_LINE_MAX 4096
#define CONFIG_DEPTH_MAX 4

/* The usage text's layout: help starts at column USAGE_HELP_COL and wraps
 * before USAGE_WIDTH. */
#define USAGE_HELP_COL 27
#define USAGE_WIDTH 80

/* One parse: the record being filled and how many config files are open
 * around the current line. */
struct parse {
    struct srv_config *cfg;
    int depth;
};

struct option;
typedef enum mg_code (*option_set_fn)(struct parse *p, const struct option *o, const char *v,
                                      struct mg_error *err);

struct option {
    const char *name;  /* the flag without "--", and the config file key */
    const char *arg;   /* what --help shows after the name; two-word choices "off|on" */
    option_set_fn set; /* checks v and stores it */
    size_t offset;     /* of the field set stores into (struct srv_config) */
    size_t count;      /* lists: offset of the unsigned count beside the array */
    int64_t min, max;  /* numbers: the range; sizes: the range if max > 0; lists: capacity */
    const char *on;    /* choices: the word that sets the bool */
    const char *bare;  /* the value a flag without one means ("--allow-shared-dir": "yes") */
    bool (*valid)(const char *v); /* strings and lists: refused unless valid(v) */
    const char *invalid;          /* the message when valid() or the range refuses v */
    const char *noun;             /* lists: "at most N --name NOUN" */
    const char *help;             /* one paragraph; the usage wraps it */
};

#define FIELD(f) offsetof(struct srv_config, f)
#define CAPACITY(f) ((int64_t)(sizeof(((struct srv_config *)0)->f) / sizeof(char *)))
#define LIST(f) .offset = FIELD(f), .count = FIELD(n##f), .max = CAPACITY(f)

/* ---- setters -------------------------------------------------------------------------- */

static void *field(const struct parse *p, const struct option *o)
{
    return (char *)p->cfg + o->offset;
}

static enum mg_code set_str(struct parse *p, const struct option *o, const char *v,
                            struct mg_error *err)
{
    char **dst = field(p, o), *s;

    if (o->valid != NULL && !o->valid(v))
        return mg_fail(err, MG_EINVAL, o->name, "%s", o->invalid);
    if ((s = strdup(v)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    free(*dst);
    *dst = s;
    return MG_OK;
}

/* Repeatable: each value is appended, up to the array's capacity. */
static enum mg_code set_list(struct parse *p, const struct option *o, const char *v,
                             struct mg_error *err)
{
    char **list = field(p, o);
    unsigned *n = (unsigned *)(void *)((char *)p->cfg + o->count);

    if (o->valid != NULL && !o->valid(v))
        return mg_fail(err, MG_EINVAL, o->name, "%s", o->invalid);
    if (*n >= (uint64_t)o->max)
        return mg_fail(err, MG_EINVAL, o->name, "at most %lld --%s %s", (long long)o->max, o->name,
                       o->noun);
    if ((list[*n] = strdup(v)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    (*n)++;
    return MG_OK;
}

static enum mg_code parse_int(const struct option *o, const char *v, int64_t *n,
                              struct mg_error *err)
{
    if (mg_parse_i64(v, o->min, o->max, n))
        return MG_OK;
    if (o->invalid != NULL)
        return mg_fail(err, MG_EINVAL, o->name, "%s", o->invalid);
    return mg_fail(err, MG_EINVAL, o->name, "--%s needs a number between %lld and %lld, not '%s'",
                   o->name, (long long)o->min, (long long)o->max, v);
}

static enum mg_code set_uint(struct parse *p, const struct option *o, const char *v,
                             struct mg_error *err)
{
    int64_t n;

    if (parse_int(o, v, &n, err) != MG_OK)
        return err->code;
    *(unsigned *)field(p, o) = (unsigned)n;
    return MG_OK;
}

static enum mg_code set_u64(struct parse *p, const struct option *o, const char *v,
                            struct mg_error *err)
{
    int64_t n;

    if (parse_int(o, v, &n, err) != MG_OK)
        return err->code;
    *(uint64_t *)field(p, o) = (uint64_t)n;
    return MG_OK;
}

/* Bytes, with an optional suffix (mg_parse_size): positive, and within min..max
 * when max is set. */
static enum mg_code set_size(struct parse *p, const struct option *o, const char *v,
                             struct mg_error *err)
{
    uint64_t n;

    if (!mg_parse_size(v, &n) || n == 0 ||
        (o->max > 0 && (n < (uint64_t)o->min || n > (uint64_t)o->max))) {
        if (o->invalid != NULL)
            return mg_fail(err, MG_EINVAL, o->name, "%s, not '%s'", o->invalid, v);
        return mg_fail(err, MG_EINVAL, o->name,
                       "--%s needs a positive size such as 1048576, 512K, 1M or 64G, not '%s'",
                       o->name, v);
    }
    *(uint64_t *)field(p, o) = n;
    return MG_OK;
}

/* A duration: a whole number and a unit, s, m, h or d ("0s", "15m", "24h"), at most 365d. */
static enum mg_code set_duration(struct parse *p, const struct option *o, const char *v,
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
                *(unsigned *)field(p, o) = (unsigned)(num * units[i].secs);
                return MG_OK;
            }
        }
    }
    return mg_fail(err, MG_EINVAL, o->name,
                   "--%s is a duration such as 0s, 90s, 15m, 24h or 7d (at most 365d), not '%s'",
                   o->name, v);
}

/* One of the two words of arg ("text|json"); the bool is whether it is o->on. */
static enum mg_code set_choice(struct parse *p, const struct option *o, const char *v,
                               struct mg_error *err)
{
    const char *bar = strchr(o->arg, '|');
    size_t first = (size_t)(bar - o->arg);

    if (!(strlen(v) == first && strncmp(v, o->arg, first) == 0) && strcmp(v, bar + 1) != 0)
        return mg_fail(err, MG_EINVAL, o->name, "--%s is %.*s or %s, not '%s'", o->name, (int)first,
                       o->arg, bar + 1, v);
    *(bool *)field(p, o) = strcmp(v, o->on) == 0;
    return MG_OK;
}

/* --threads: also remembered as given, so that PostgreSQL's default does not replace it. */
static enum mg_code set_threads(struct parse *p, const struct option *o, const char *v,
                                struct mg_error *err)
{
    p->cfg->threads_given = true;
    return set_uint(p, o, v, err);
}

static enum mg_code set_database(struct parse *p, const struct option *o, const char *v,
                                 struct mg_error *err)
{
    if (strcmp(v, "sqlite") == 0) {
        free(p->cfg->database);
        p->cfg->database = NULL;
        return MG_OK;
    }
    if (strncmp(v, "postgresql://", 13) != 0 && strncmp(v, "postgres://", 11) != 0)
        return mg_fail(err, MG_EINVAL, o->name, "--database is sqlite or a postgresql:// URL");
    return set_str(p, o, v, err);
}

/* The blob front end knows the backends' URLs and says what is wrong with one. */
static enum mg_code set_blobs(struct parse *p, const struct option *o, const char *v,
                              struct mg_error *err)
{
    if (store_blobs_url_kind(v, err) == NULL)
        return err->code;
    return set_str(p, o, v, err);
}

/* An origin: scheme://host[:port], nothing after it (a trailing '/' is dropped). */
static enum mg_code set_public_url(struct parse *p, const struct option *o, const char *v,
                                   struct mg_error *err)
{
    size_t n = strlen(v);
    const char *host = strncmp(v, "https://", 8) == 0  ? v + 8
                       : strncmp(v, "http://", 7) == 0 ? v + 7
                                                       : NULL;

    if (n > 0 && v[n - 1] == '/')
        n--;
    if (host == NULL || (size_t)(host - v) >= n || memchr(host, '/', n - (size_t)(host - v)) ||
        strpbrk(v, " \t\r\n\"'<>\\?#@") != NULL || n > 255)
        return mg_fail(err, MG_EINVAL, o->name,
                       "--public-url is an origin such as https://modelgate.example:8443, "
                       "not '%.100s'",
                       v);
    if (set_str(p, o, v, err) != MG_OK)
        return err->code;
    p->cfg->public_url[n] = '\0';
    return MG_OK;
}

static enum mg_code read_file(struct parse *p, const char *path, struct mg_error *err);

static enum mg_code set_config(struct parse *p, const struct option *o, const char *v,
                               struct mg_error *err)
{
    struct parse inner = {p->cfg, p->depth + 1};

    (void)o;
    return read_file(&inner, v, err);
}

/* ---- validators ----------------------------------------------------------------------- */

static bool host_name_valid(const char *v)
{
    size_t n = strlen(v);

    return n > 0 && n <= 253 &&
           strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789-._") == n;
}

static bool prometheus_url_valid(const char *v)
{
    size_t n = strlen(v);

    return (strncmp(v, "http://", 7) == 0 || strncmp(v, "https://", 8) == 0) && n >= 9 &&
           n <= 512 && strpbrk(v, " \t?#") == NULL;
}

/* A dotted Python name without dunders. */
static bool python_name_valid(const char *v)
{
    size_t i, n = strlen(v);

    for (i = 0; i < n && (v[i] == '.' || v[i] == '_' || (v[i] >= '0' && v[i] <= '9') ||
                          (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z'));
         i++)
        ;
    return n > 0 && i == n && n <= 256 && strchr(v, '.') != NULL && strstr(v, "__") == NULL;
}

static bool issuer_valid(const char *v)
{
    return id_url_allowed(v) && strlen(v) <= STORE_ISSUER_MAX;
}

/* ---- the table ------------------------------------------------------------------------ */

/* In the order --help lists them. clang-format would spread each row over a dozen lines. */
/* clang-format off */
static const struct option options[] = {
    {.name = "listen", .arg = "HOST:PORT", .set = set_str, .offset = FIELD(listen),
     .help = "address to serve on (default 127.0.0.1:8470; port 0 picks one)"},
    {.name = "data-dir", .arg = "DIR", .set = set_str, .offset = FIELD(data_dir),
     .help = "database, blobs and keys (default ./var)"},
    {.name = "config", .arg = "FILE", .set = set_config,
     .help = "read options from FILE (key = value, keys are these flag names)"},
    {.name = "max-blob-bytes", .arg = "SIZE", .set = set_size, .offset = FIELD(max_blob_bytes),
     .help = "largest upload (default 64G)"},
    {.name = "max-archive-ratio", .arg = "N", .set = set_uint, .offset = FIELD(max_archive_ratio),
     .min = 0, .max = 1000000,
     .help = "refuse archives expanding more than N:1 once past 32 MiB expanded; 0 = no cap "
             "(default 200)"},
    {.name = "commit-workers", .arg = "N", .set = set_uint, .offset = FIELD(commit_workers),
     .min = 1, .max = 64,
     .help = "uploads verified and committed at once (default 4)"},
    {.name = "max-json-bytes", .arg = "SIZE", .set = set_size, .offset = FIELD(max_json_bytes),
     .help = "largest JSON body (default 1M)"},
    {.name = "log-format", .arg = "text|json", .set = set_choice, .offset = FIELD(log_json),
     .on = "json",
     .help = "request log format on stderr (default text)"},
    {.name = "database", .arg = "sqlite|URL", .set = set_database, .offset = FIELD(database),
     .help = "where records live: sqlite (the file modelgate.db in the data directory; default) "
             "or a PostgreSQL URL (postgresql://user:pw@host:port/db or ?host=/socket/dir) that "
             "any number of modelgated replicas share"},
    {.name = "blobs", .arg = "URL", .set = set_blobs, .offset = FIELD(blobs),
     .help = "where artifact bytes live (default file:DATA_DIR/blobs): file:/DIR, "
             "s3://BUCKET/PREFIX?endpoint=http(s)://H:P &region=R&path_style=true, or "
             "oci://HOST:PORT/REPOSITORY?insecure=true (plain http); replicas on one database "
             "share one backend"},
    {.name = "blobs-credentials", .arg = "FILE", .set = set_str, .offset = FIELD(blobs_credentials),
     .help = "s3 ACCESS_KEY:SECRET_KEY or oci USER:PASSWORD (mode 0600); s3 also reads "
             "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN"},
    {.name = "blob-downloads", .arg = "proxy|redirect", .set = set_choice,
     .offset = FIELD(blob_redirect), .on = "redirect",
     .help = "serve blob bytes through modelgated (default) or answer 307 to a presigned URL "
             "valid 5 minutes (s3)"},
    {.name = "prometheus-url", .arg = "URL", .set = set_str, .offset = FIELD(prometheus_url),
     .valid = prometheus_url_valid,
     .invalid = "--prometheus-url is the http:// or https:// URL of the Prometheus HTTP API, "
                "e.g. http://127.0.0.1:9090",
     .help = "the Prometheus HTTP API live canary analysis queries when a policy's analysis "
             "names no provider.url"},
    {.name = "prometheus-credentials", .arg = "FILE", .set = set_str,
     .offset = FIELD(prometheus_credentials),
     .help = "'Bearer TOKEN' or 'USER:PASSWORD' (mode 0600), sent to --prometheus-url only"},
    {.name = "host-name", .arg = "NAME", .set = set_str, .offset = FIELD(host_name),
     .valid = host_name_valid,
     .invalid = "--host-name is a host name: letters, digits, '-', '.', '_'",
     .help = "this replica's host, as gateways' \"host\" names it: only the replica on a "
             "gateway's host delivers it (nginx and HAProxy over a unix socket need one); "
             "default hostname"},
    {.name = "sync", .arg = "full|normal", .set = set_choice, .offset = FIELD(sync_normal),
     .on = "normal",
     .help = "SQLite synchronous mode (default full)"},
    {.name = "response-cache", .arg = "on|off", .set = set_choice,
     .offset = FIELD(no_response_cache), .on = "off",
     .help = "answer repeated version and last-known-good reads from memory until the next write "
             "(default on)"},
    {.name = "threads", .arg = "N", .set = set_threads, .offset = FIELD(threads),
     .min = 1, .max = 256,
     .help = "HTTP worker threads (default 1 per available CPU; 4 per CPU, at most 32, with a "
             "PostgreSQL --database)"},
    {.name = "max-connections", .arg = "N", .set = set_uint, .offset = FIELD(conn_limit),
     .min = 1, .max = 65536,
     .help = "connection limit (default 1024)"},
    {.name = "connection-memory", .arg = "SIZE", .set = set_size, .offset = FIELD(conn_memory),
     .min = 16 << 10, .max = 16 << 20,
     /* Request headers and the read buffer live in it: below 16K, ordinary requests (long
      * bearer tokens, browsers' headers) stop fitting. */
     .invalid = "--connection-memory is between 16K and 16M",
     .help = "per-connection buffer for headers and body reads (default 64K)"},
    {.name = "max-connections-per-ip", .arg = "N", .set = set_uint, .offset = FIELD(per_ip_limit),
     .min = 1, .max = 65536,
     .help = "connections from one client address (default 256)"},
    {.name = "timeout", .arg = "SECONDS", .set = set_uint, .offset = FIELD(timeout_s),
     .min = 1, .max = 3600,
     .help = "idle timeout and the deadline for request headers (default 60)"},
    {.name = "min-body-rate", .arg = "BYTES", .set = set_uint, .offset = FIELD(min_body_rate),
     .min = 1, .max = 1 << 30,
     .help = "a request body slower than this (per second, averaged) past --timeout is cut off "
             "(default 1024)"},
    {.name = "read-connections", .arg = "N", .set = set_uint, .offset = FIELD(read_conns),
     .min = 1, .max = 64,
     .help = "database connections serving reads (default 4)"},
    {.name = "port-file", .arg = "FILE", .set = set_str, .offset = FIELD(port_file),
     .help = "write the bound port to FILE once listening"},
    {.name = "signing-key", .arg = "FILE", .set = set_str, .offset = FIELD(signing_key),
     .help = "sign with this P-256 key (PEM, PKCS#8, mode 0600)"},
    {.name = "tls-cert", .arg = "FILE", .set = set_str, .offset = FIELD(tls_cert),
     .help = "serve HTTPS with this PEM certificate (chain)"},
    {.name = "tls-key", .arg = "FILE", .set = set_str, .offset = FIELD(tls_key),
     .help = "and this PEM private key (mode 0600)"},
    {.name = "push-workers", .arg = "N", .set = set_uint, .offset = FIELD(push_workers),
     .min = 1, .max = 64,
     .help = "gateway delivery threads (default 2)"},
    {.name = "push-backoff-base-ms", .arg = "N", .set = set_u64,
     .offset = FIELD(push_backoff_base_ms), .min = 1, .max = 86400000,
     .invalid = "--push-backoff-base-ms needs milliseconds from 1 to 86400000",
     .help = "first retry delay bound (default 1000, doubling)"},
    {.name = "push-backoff-max-ms", .arg = "N", .set = set_u64,
     .offset = FIELD(push_backoff_max_ms), .min = 1, .max = 86400000,
     .invalid = "--push-backoff-max-ms needs milliseconds from 1 to 86400000",
     .help = "longest retry delay (default 300000)"},
    {.name = "reconcile-interval-ms", .arg = "N", .set = set_u64, .offset = FIELD(reconcile_ms),
     .min = 0, .max = 86400000,
     .invalid = "--reconcile-interval-ms needs milliseconds from 0 (off) to 86400000",
     .help = "read HAProxy and nginx gateways back this often and repair drift (default 60000, 0 "
             "off)"},
    {.name = "webhook-allow", .arg = "CIDR", .set = set_list, LIST(webhook_allow),
     .noun = "networks",
     .help = "a network webhooks may reach (repeatable; loopback is allowed when modelgated "
             "itself listens on loopback)"},
    {.name = "smoke-profile", .arg = "NAME=CMD", .set = set_list, LIST(smoke_profiles),
     .noun = "entries",
     .help = "a smoke-test command template with {model_dir} and {output} (repeatable; no shell "
             "runs it)"},
    {.name = "smoke-profile-cost", .arg = "NAME=COST", .set = set_list, LIST(smoke_profile_costs),
     .noun = "entries",
     .help = "cost per hour of the machine profile NAME runs on (any currency unit; repeatable): "
             "smoke tests then report cost_per_1k_requests"},
    {.name = "scan-allow", .arg = "MOD.NAME", .set = set_list, LIST(scan_allow), .noun = "entries",
     .valid = python_name_valid,
     .invalid = "--scan-allow takes a dotted Python name without dunders, such as "
                "mypkg.config.TrainConfig",
     .help = "a global pickles may import besides what torch.load(weights_only=True) accepts "
             "(repeatable)"},
    {.name = "runner-workers", .arg = "N", .set = set_uint, .offset = FIELD(runner_workers),
     .min = 1, .max = 16,
     .help = "smoke tests run at once (default 1)"},
    {.name = "smoke-interval", .arg = "S", .set = set_uint, .offset = FIELD(smoke_interval_s),
     .min = 0, .max = 86400,
     .help = "re-test routed versions every S seconds (default 300, 0 off)"},
    {.name = "smoke-timeout", .arg = "S", .set = set_uint, .offset = FIELD(smoke_timeout_s),
     .min = 1, .max = 86400,
     .help = "kill a test's process group after S seconds (default 300)"},
    {.name = "smoke-memory-mib", .arg = "N", .set = set_u64, .offset = FIELD(smoke_memory_mib),
     .min = 64, .max = 1 << 24,
     .invalid = "--smoke-memory-mib is 64 to 16777216",
     .help = "address-space limit of CPU test runs (default 16384)"},
    {.name = "nvml-library", .arg = "PATH", .set = set_str, .offset = FIELD(nvml_library),
     .help = "NVML to load (default libnvidia-ml.so.1)"},
    {.name = "public-url", .arg = "URL", .set = set_public_url, .offset = FIELD(public_url),
     .help = "the scheme://host[:port] browsers reach the UI at; set it behind a proxy: the UI's "
             "origin checks use it, not the Host header"},
    {.name = "read-scope", .arg = "all|team", .set = set_choice, .offset = FIELD(read_scope_team),
     .on = "team",
     .help = "with team, a token with teams sees only its teams' models (others answer 404); "
             "default all"},
    {.name = "oci-layer-cache", .arg = "SIZE", .set = set_size, .offset = FIELD(oci_layer_cache),
     .help = "unpacked archive files kept to serve OCI layers of one file each (/v2/; default "
             "8G; least recently served go)"},
    {.name = "retention-interval", .arg = "D", .set = set_duration,
     .offset = FIELD(retention_interval_s),
     .help = "run every model's retention rule this often (default 1h; 0s: only when asked); D "
             "is 30s, 15m, 24h, 7d"},
    {.name = "gc-interval", .arg = "D", .set = set_duration, .offset = FIELD(gc_interval_s),
     .help = "collect unreferenced blobs this often (default 1h; 0s: only when asked)"},
    {.name = "gc-grace", .arg = "D", .set = set_duration, .offset = FIELD(gc_grace_s),
     .help = "keep an unreferenced blob this long after it was last uploaded (default 24h)"},
    {.name = "oidc-issuer", .arg = "URL", .set = set_str, .offset = FIELD(oidc_issuer),
     .valid = issuer_valid,
     .invalid = "--oidc-issuer is an https:// URL (http:// only on loopback)",
     .help = "an OpenID provider (https://; http:// on loopback) whose JWTs are accepted as "
             "bearer tokens (docs/api.md)"},
    {.name = "oidc-client-id", .arg = "ID", .set = set_str, .offset = FIELD(oidc_client_id),
     .help = "this server's client id at the provider"},
    {.name = "oidc-client-secret-file", .arg = "FILE", .set = set_str,
     .offset = FIELD(oidc_client_secret_file),
     .help = "its client secret (mode 0600)"},
    {.name = "oidc-groups-claim", .arg = "NAME", .set = set_str, .offset = FIELD(oidc_groups_claim),
     .help = "the claim listing a user's groups (default groups)"},
    {.name = "oidc-audience", .arg = "AUD", .set = set_str, .offset = FIELD(oidc_audience),
     .help = "the audience API bearer JWTs must carry (default the client id)"},
    {.name = "allow-shared-dir", .arg = "yes|no", .set = set_choice,
     .offset = FIELD(allow_shared_dir), .on = "yes", .bare = "yes",
     .help = "serve from a data directory that others may read or write (refused by default: it "
             "holds secrets)"},
};
/* clang-format on */

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const struct option *find(const char *name)
{
    size_t i;

    for (i = 0; i < NOPTIONS; i++)
        if (strcmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

const char *srv_options_name(size_t i)
{
    return i < NOPTIONS ? options[i].name : NULL;
}

/* Apply one key/value. */
static enum mg_code apply(struct parse *p, const char *key, const char *v, struct mg_error *err)
{
    const struct option *o = find(key);

    if (o == NULL)
        return mg_fail(err, MG_EINVAL, key, "unknown option '%s'; see modelgated --help", key);
    return o->set(p, o, v, err);
}

/* ---- config files --------------------------------------------------------------------- */

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

static enum mg_code read_file(struct parse *p, const char *path, struct mg_error *err)
{
    FILE *f;
    char line[CONFIG_LINE_MAX];
    unsigned lineno = 0;
    enum mg_code rc = MG_OK;

    if (p->depth > CONFIG_DEPTH_MAX)
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
        if (apply(p, k, v, err) != MG_OK) {
            char msg[MG_ERR_MSG_MAX];
            snprintf(msg, sizeof(msg), "%s", err->message);
            rc = mg_fail(err, MG_EINVAL, "config", "%s:%u: %s", path, lineno, msg);
        }
    }
    fclose(f);
    return rc;
}

/* ---- flags ---------------------------------------------------------------------------- */

enum mg_code srv_options_parse(struct srv_config *cfg, int argc, char **argv, struct mg_error *err)
{
    struct parse p = {cfg, 0};
    int i;

    for (i = 0; i < argc; i++) {
        const char *a = argv[i], *eq, *v;
        const struct option *o;
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
        o = find(key);
        if (eq) {
            v = eq + 1;
        } else if (o != NULL && o->bare != NULL) {
            v = o->bare;
        } else {
            if (i + 1 >= argc)
                return mg_fail(err, MG_EINVAL, key, "--%s needs a value", key);
            v = argv[++i];
        }
        if (apply(&p, key, v, err) != MG_OK)
            return err->code;
    }
    if (!cfg->threads_given && cfg->database != NULL) {
        unsigned n = srv_config_default_threads() * 4;
        cfg->threads = n > 32 ? 32 : n;
    }
    return MG_OK;
}

/* ---- usage ---------------------------------------------------------------------------- */

/* After the table: the subcommands, which take some of the options above. */
static const char usage_commands[] =
    "usage: modelgated keys rotate --data-dir DIR [--database URL]\n"
    "         make a new active signing key; old public keys stay published. With\n"
    "         --database (PostgreSQL), the key every replica on it signs with:\n"
    "         running replicas follow within seconds\n"
    "       modelgated backup --data-dir DIR [--blobs URL] --out FILE.tar\n"
    "         (safe while serving)\n"
    "       modelgated restore --data-dir NEW [--blobs URL] --from FILE.tar\n"
    "       modelgated migrate --data-dir DIR --to-database postgresql://...\n"
    "           [--to-blobs URL]\n"
    "         copy an embedded installation to shared backends (resumable)\n";

/* "  --name ARG", then the help from column USAGE_HELP_COL (two spaces on when the name
 * reaches it), its words wrapped before USAGE_WIDTH; a word too long for a line gets one
 * of its own. */
static void usage_option(FILE *out, const struct option *o)
{
    const char *w = o->help;
    int col = 4 + (int)strlen(o->name) + (o->bare ? 0 : 1 + (int)strlen(o->arg));
    bool fresh = true; /* nothing written since the help column */

    fprintf(out, "  --%s%s%s", o->name, o->bare ? "" : " ", o->bare ? "" : o->arg);
    fprintf(out, "%*s", col < USAGE_HELP_COL ? USAGE_HELP_COL - col : 2, "");
    col = col < USAGE_HELP_COL ? USAGE_HELP_COL : col + 2;
    while (*w != '\0') {
        int len = (int)strcspn(w, " ");

        if (!fresh && col + 1 + len > USAGE_WIDTH) {
            fprintf(out, "\n%*s", USAGE_HELP_COL, "");
            col = USAGE_HELP_COL;
            fresh = true;
        }
        if (!fresh) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", len, w);
        col += len;
        fresh = false;
        w += len;
        w += strspn(w, " ");
    }
    fputc('\n', out);
}

int srv_options_usage(FILE *out)
{
    size_t i;

    fputs("usage: modelgated [options]\n", out);
    for (i = 0; i < NOPTIONS; i++)
        usage_option(out, &options[i]);
    fputs("\n", out);
    fputs(usage_commands, out);
    return ferror(out) ? EOF : 0;
}
