/*
 * main.c - modelgated: parse settings, open the store, create the first
 * admin token, serve until SIGTERM/SIGINT, then shut down gracefully.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "../os/file.h"
#include "../base/util.h"
#include "../http/cache.h"
#include "../control/cluster.h"
#include "../control/lifecycle.h"
#include "../model/config.h"
#include "options.h"
#include "../http/http.h"
#include "../os/metrics.h"
#include "../control/release.h"
#include "../api/api.h"
#include "../api/oci_cache.h"
#include "../runner/runner.h"
#include "../gateways/push.h"
#include "../control/control.h"

/* How long in-flight requests may take to finish after a stop signal. */
#define SHUTDOWN_GRACE_MS 10000

/* Write data to path atomically with mode (os/file.c). */
static int write_file_atomic(const char *path, const char *data, mode_t mode)
{
    struct mg_error err;

    if (mg_file_write_atomic(path, data, strlen(data), mode, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int bootstrap_admin(struct store *st, const char *data_dir)
{
    char secret[STORE_TOKEN_SECRET_LEN + 1], line[STORE_TOKEN_SECRET_LEN + 2], path[PATH_MAX];
    bool created = false;
    struct mg_error err;

    if (store_token_bootstrap(st, secret, &created, &err) != MG_OK) {
        fprintf(stderr, "modelgated: cannot create the admin token: %s\n", err.message);
        return -1;
    }
    if (!created)
        return 0;
    snprintf(path, sizeof(path), "%s/admin.token", data_dir);
    snprintf(line, sizeof(line), "%s\n", secret);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (write_file_atomic(path, line, 0600) != 0) {
        fprintf(stderr, "modelgated: cannot write %s: %s\n", path, strerror(errno));
        OPENSSL_cleanse(line, sizeof(line));
        return -1;
    }
    OPENSSL_cleanse(line, sizeof(line));
    fprintf(stderr, "modelgated: created the first admin token; it is in %s (mode 0600)\n", path);
    return 0;
}

/* A key just made in data_dir (the keyring's active one) becomes the cluster's: every
 * replica on the database signs with it within seconds. */
static int rotate_cluster_key(const struct srv_config *cfg, const char *keyid)
{
    struct sign_keyring *kr = NULL;
    struct mg_error err = {0};
    char *priv = NULL;
    int rc = 1;

    if (sign_keyring_load(cfg->data_dir, NULL, false, &kr, &err) != MG_OK ||
        sign_key_private_pem(cfg->data_dir, kr->active, &priv, &err) != MG_OK) {
        fprintf(stderr, "modelgated: the new signing key: %s\n", err.message);
        goto out;
    }
    if (strcmp(kr->active->keyid, keyid) != 0) {
        fprintf(stderr, "modelgated: %s/keys/active names %s, not the new key %s\n", cfg->data_dir,
                kr->active->keyid, keyid);
        goto out;
    }
    if (store_signing_key_rotate(cfg->database, keyid, kr->active->hint, kr->active->public_pem,
                                 priv, &err) != MG_OK) {
        fprintf(stderr, "modelgated: cannot make %s the cluster's signing key: %s\n", keyid,
                err.message);
        goto out;
    }
    rc = 0;
out:
    if (priv)
        OPENSSL_cleanse(priv, strlen(priv));
    free(priv);
    sign_keyring_free(&kr);
    return rc;
}

/* modelgated keys rotate --data-dir DIR [--database URL] */
static int keys_command(int argc, char **argv)
{
    struct srv_config cfg;
    struct mg_error err = {0};
    char keyid[65];
    int rc = 2;

    srv_config_init(&cfg);
    if (argc < 1 || strcmp(argv[0], "rotate") != 0) {
        fprintf(stderr, "usage: modelgated keys rotate --data-dir DIR [--database URL]\n");
        goto out;
    }
    if (srv_options_parse(&cfg, argc - 1, argv + 1, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (sign_keyring_rotate(cfg.data_dir, keyid, &err) != MG_OK) {
        fprintf(stderr, "modelgated: cannot rotate the signing key: %s\n", err.message);
        rc = 1;
        goto out;
    }
    if (cfg.database != NULL) {
        if ((rc = rotate_cluster_key(&cfg, keyid)) != 0)
            goto out;
        printf("%s\n", keyid);
        fprintf(stderr,
                "modelgated: new active signing key %s; the replicas on the database sign with "
                "it within seconds (those started with --signing-key keep theirs)\n",
                keyid);
        goto out;
    }
    printf("%s\n", keyid);
    fprintf(stderr, "modelgated: new active signing key %s; restart modelgated to sign with it\n",
            keyid);
    rc = 0;
out:
    srv_config_release(&cfg);
    return rc;
}

/*
 * Replicas on one database sign with one key. Without --signing-key, the first
 * replica's key is stored in the database and every replica signs with that:
 * written beside the data (0600) and loaded as the active key.
 */
static int share_signing_key(struct store *st, const struct srv_config *cfg,
                             struct sign_keyring **keys)
{
    const struct sign_key *mine = (*keys)->active;
    char path[PATH_MAX], *priv = NULL, *shared = NULL;
    struct sign_keyring *kr = NULL;
    struct mg_error err;
    int rc = 1;

    if (sign_key_private_pem(cfg->data_dir, mine, &priv, &err) != MG_OK) {
        fprintf(stderr, "modelgated: the signing key: %s\n", err.message);
        goto out;
    }
    if (store_signing_key_share(st, mine->keyid, mine->hint, mine->public_pem, priv, &shared,
                                &err) != MG_OK) {
        fprintf(stderr, "modelgated: cannot share the signing key: %s\n", err.message);
        goto out;
    }
    if (strcmp(shared, priv) != 0) {
        snprintf(path, sizeof(path), "%s/cluster-signing-key.pem", cfg->data_dir);
        if (mg_file_write_atomic(path, shared, strlen(shared), 0600, &err) != MG_OK ||
            sign_keyring_load(cfg->data_dir, path, false, &kr, &err) != MG_OK) {
            fprintf(stderr, "modelgated: the cluster's signing key: %s\n", err.message);
            goto out;
        }
        store_set_keys(st, kr);
        sign_keyring_free(keys);
        *keys = kr;
    }
    rc = 0;
out:
    if (priv)
        OPENSSL_cleanse(priv, strlen(priv));
    if (shared)
        OPENSSL_cleanse(shared, strlen(shared));
    free(priv);
    free(shared);
    return rc;
}

/* Push options from the config; webhooks may reach loopback when we listen
 * on loopback (a test or single-host setup), and --webhook-allow networks. */
static enum mg_code push_setup(const struct srv_config *cfg, struct push_options *o,
                               struct mg_error *err)
{
    struct push_allow *allow = &o->allow;
    unsigned i;

    memset(o, 0, sizeof(*o));
    memset(allow, 0, sizeof(*allow));
    o->workers = cfg->push_workers;
    o->backoff_base_ms = (int64_t)cfg->push_backoff_base_ms;
    o->backoff_max_ms = (int64_t)cfg->push_backoff_max_ms;
    o->reconcile_ms = (int64_t)cfg->reconcile_ms;
    if (strncmp(cfg->listen, "127.", 4) == 0 || strncmp(cfg->listen, "[::1]", 5) == 0 ||
        strncmp(cfg->listen, "localhost:", 10) == 0) {
        if (push_allow_add(allow, "127.0.0.0/8", err) != MG_OK ||
            push_allow_add(allow, "::1/128", err) != MG_OK)
            return err->code;
    }
    for (i = 0; i < cfg->nwebhook_allow; i++) {
        if (push_allow_add(allow, cfg->webhook_allow[i], err) != MG_OK)
            return err->code;
    }
    return MG_OK;
}

static enum mg_code runner_setup(const struct srv_config *cfg, struct runner_options *o, char *dir,
                                 size_t dirsz, struct mg_error *err)
{
    unsigned i;

    o->workers = cfg->runner_workers;
    o->interval_s = cfg->smoke_interval_s;
    o->timeout_ms = (int64_t)cfg->smoke_timeout_s * 1000;
    o->memory_limit_mib = cfg->smoke_memory_mib;
    o->nvml_library = cfg->nvml_library;
    snprintf(dir, dirsz, "%s/runner", cfg->data_dir);
    o->work_dir = dir;
    for (i = 0; i < cfg->nsmoke_profiles; i++) {
        if (runner_profile_parse(cfg->smoke_profiles[i], &o->profiles[o->nprofiles], err) != MG_OK)
            return err->code;
        o->nprofiles++;
    }
    for (i = 0; i < cfg->nsmoke_profile_costs; i++) {
        if (runner_profile_cost(o->profiles, o->nprofiles, cfg->smoke_profile_costs[i], err) !=
            MG_OK)
            return err->code;
    }
    return MG_OK;
}

/* The data directory as an absolute path, existing or not: the default blob location
 * (file:<data-dir>/blobs) must be absolute. 0, or 1 with a line said. */
static int absolute_data_dir(struct srv_config *cfg)
{
    char cwd[PATH_MAX], *abs;

    if (cfg->data_dir[0] == '/')
        return 0;
    if (getcwd(cwd, sizeof(cwd)) == NULL || asprintf(&abs, "%s/%s", cwd, cfg->data_dir) < 0) {
        fprintf(stderr, "modelgated: cannot resolve %s: %s\n", cfg->data_dir, strerror(errno));
        return 1;
    }
    free(cfg->data_dir);
    cfg->data_dir = abs;
    return 0;
}

/* modelgated backup --data-dir D --out FILE.tar
 * modelgated restore --data-dir NEW --from FILE.tar */
static int backup_command(bool restore, int argc, char **argv)
{
    struct store_blobs_location loc;
    struct srv_config cfg;
    struct mg_error err = {0};
    json_t *summary = NULL;
    const char *file = NULL;
    char *text;
    int i, rc = 2, n = 0;
    char **rest = calloc((size_t)argc + 1, sizeof(*rest));

    srv_config_init(&cfg);
    if (rest == NULL)
        goto out;
    /* --out / --from are this command's own; the rest are modelgated options. */
    for (i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "--from") == 0) && i + 1 < argc)
            file = argv[++i];
        else
            rest[n++] = argv[i];
    }
    if (file == NULL) {
        fprintf(stderr, "usage: modelgated %s --data-dir DIR %s FILE.tar\n",
                restore ? "restore" : "backup", restore ? "--from" : "--out");
        goto out;
    }
    if (srv_options_parse(&cfg, n, rest, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (absolute_data_dir(&cfg) != 0) {
        rc = 1;
        goto out;
    }
    loc.url = cfg.blobs;
    loc.credentials = cfg.blobs_credentials;
    if ((restore ? store_restore(file, cfg.data_dir, &loc, NULL, &summary, &err)
                 : store_backup(cfg.data_dir, &loc, file, &summary, &err)) != MG_OK) {
        fprintf(stderr, "modelgated: %s failed: %s\n", restore ? "restore" : "backup", err.message);
        rc = 1;
        goto out;
    }
    text = json_dumps(summary, JSON_COMPACT);
    printf("%s\n", text ? text : "{}");
    free(text);
    rc = 0;
out:
    json_decref(summary);
    free(rest);
    srv_config_release(&cfg);
    return rc;
}

/* modelgated migrate --data-dir D --to-database URL [--to-blobs file:DIR]: copy an embedded
 * installation to the backends replicas share. */
static int migrate_command(int argc, char **argv)
{
    struct srv_config cfg;
    struct mg_error err = {0};
    struct store_migrate_options o = {0};
    struct sign_keyring *keys = NULL;
    json_t *summary = NULL;
    const char *to_db = NULL, *to_blobs = NULL;
    char *text;
    int i, rc = 2, n = 0;
    char **rest = calloc((size_t)argc + 1, sizeof(*rest));

    srv_config_init(&cfg);
    if (rest == NULL)
        goto out;
    for (i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--to-database") == 0 && i + 1 < argc)
            to_db = argv[++i];
        else if (strcmp(argv[i], "--to-blobs") == 0 && i + 1 < argc)
            to_blobs = argv[++i];
        else
            rest[n++] = argv[i];
    }
    if (to_db == NULL ||
        (strncmp(to_db, "postgresql://", 13) != 0 && strncmp(to_db, "postgres://", 11) != 0)) {
        fprintf(stderr, "usage: modelgated migrate --data-dir DIR --to-database postgresql://... "
                        "[--to-blobs URL [--blobs-credentials FILE]]\n");
        goto out;
    }
    if (to_blobs && store_blobs_url_kind(to_blobs, &err) == NULL) {
        fprintf(stderr, "modelgated: --to-blobs: %s\n", err.message);
        goto out;
    }
    if (srv_options_parse(&cfg, n, rest, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (absolute_data_dir(&cfg) != 0) {
        rc = 1;
        goto out;
    }
    if (to_blobs && strncmp(to_blobs, "file:", 5) == 0 && mkdir(to_blobs + 5, 0700) != 0 &&
        errno != EEXIST) {
        fprintf(stderr, "modelgated: cannot create %s: %s\n", to_blobs + 5, strerror(errno));
        rc = 1;
        goto out;
    }
    if (sign_keyring_load(cfg.data_dir, NULL, false, &keys, &err) != MG_OK)
        keys = NULL; /* an installation that never signed anything */
    o.data_dir = cfg.data_dir;
    o.to_database = to_db;
    o.to_blobs = to_blobs;
    o.to_blobs_credentials = cfg.blobs_credentials;
    o.keys = keys;
    if (store_migrate(&o, &summary, &err) != MG_OK) {
        fprintf(stderr, "modelgated: migrate failed (run it again to resume): %s\n", err.message);
        rc = 1;
        goto out;
    }
    text = json_dumps(summary, JSON_COMPACT);
    printf("%s\n", text ? text : "{}");
    free(text);
    rc = 0;
out:
    json_decref(summary);
    sign_keyring_free(&keys);
    free(rest);
    srv_config_release(&cfg);
    return rc;
}

/* The data directory holds the database (webhook secrets), keys and the admin token: refuse
 * one that other users can read or write, unless the operator said otherwise. */
static int check_data_dir(const struct srv_config *cfg)
{
    struct stat sb;

    if (stat(cfg->data_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "modelgated: data directory %s is not a directory\n", cfg->data_dir);
        return -1;
    }
    if ((sb.st_mode & (S_IRWXO | S_IWGRP)) != 0 && !cfg->allow_shared_dir) {
        fprintf(stderr,
                "modelgated: data directory %s is open to other users (mode %04o) and holds "
                "secrets; run chmod 700 on it, or start with --allow-shared-dir\n",
                cfg->data_dir, (unsigned)(sb.st_mode & 07777));
        return -1;
    }
    return 0;
}

/* Where a browser finds the UI: --public-url, else the listening address and port (a
 * wildcard address as this host's name). */
static const char *ui_url(const struct srv_config *cfg, unsigned port, char *out, size_t n)
{
    const char *colon = strrchr(cfg->listen, ':');
    int hl = colon ? (int)(colon - cfg->listen) : (int)strlen(cfg->listen);
    char host[256];

    if (cfg->public_url != NULL) {
        size_t ul = strlen(cfg->public_url);

        snprintf(out, n, "%s%s", cfg->public_url, ul && cfg->public_url[ul - 1] == '/' ? "" : "/");
        return out;
    }
    snprintf(host, sizeof(host), "%.*s", hl, cfg->listen);
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0 || host[0] == '\0') {
        if (gethostname(host, sizeof(host)) != 0)
            snprintf(host, sizeof(host), "localhost");
        host[sizeof(host) - 1] = '\0';
    }
    snprintf(out, n, "%s://%s:%u/", cfg->tls_cert ? "https" : "http", host, port);
    return out;
}

int main(int argc, char **argv)
{
    struct srv_config cfg;
    struct store_options sopt = {0};
    struct store *st = NULL;
    struct sign_keyring *keys = NULL;
    struct srv srv = {0};
    struct ctl ctl = {0};
    struct push_options popt;
    struct runner_options ropt = {0};
    char runner_dir[PATH_MAX];
    struct mg_error err = {0};
    sigset_t sigs;
    int sig = 0, rc = 1, i;
    char portbuf[16], uibuf[512];

    /* Every file modelgated creates (database, WAL, blobs, keys, backups) is 0600 and every
     * directory 0700, whatever umask it was started with. */
    umask(077);
    if (argc > 1 && strcmp(argv[1], "keys") == 0)
        return keys_command(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "migrate") == 0)
        return migrate_command(argc - 2, argv + 2);
    if (argc > 1 && (strcmp(argv[1], "backup") == 0 || strcmp(argv[1], "restore") == 0))
        return backup_command(strcmp(argv[1], "restore") == 0, argc - 2, argv + 2);
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return srv_options_usage(stdout) == 0 ? 0 : 1;
        }
    }
    srv_config_init(&cfg);
    if (srv_options_parse(&cfg, argc - 1, argv + 1, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        srv_config_release(&cfg);
        return 2;
    }

    /* glibc gives the free top of a thread's heap back to the kernel once it passes
     * 128 KiB: a read whose SQLite statement builds temporary tables (a version's
     * withdrawn-lineage query allocates and frees ~250 KiB of page cache) then paid ~40
     * page faults to get the memory back, every time, and ran at a third of the speed.
     * Keep up to 1 MiB per heap; blocks of 1 MiB or more are still mapped and unmapped on
     * their own. */
#ifdef __GLIBC__
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif

    /* Signals are taken synchronously by this thread; workers never see them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file size limit must fail the write (EFBIG → 507), not kill us. */
    signal(SIGXFSZ, SIG_IGN);

    /* Check TLS material before anything is created on disk. */
    srv.cfg = &cfg;
    if (srv_tls_load(&srv, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "modelgated: cannot initialise libcurl\n");
        goto out;
    }
    if (push_setup(&cfg, &popt, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    sopt.sync_normal = cfg.sync_normal;
    sopt.read_conns = cfg.read_conns;
    store_archive_limits_default(&sopt.archive);
    sopt.archive.max_ratio = cfg.max_archive_ratio;
    art_scan_opts_default(&sopt.scan);
    sopt.scan.allow = (const char *const *)cfg.scan_allow;
    sopt.scan.n_allow = cfg.nscan_allow;
    /* bench/scan.sh's same-binary reference for uploads without the scan; fails closed */
    sopt.scan_skip =
        getenv("MODELGATED_TEST_SCAN") && strcmp(getenv("MODELGATED_TEST_SCAN"), "skip") == 0;
    if (mkdir(cfg.data_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "modelgated: cannot create data directory %s: %s\n", cfg.data_dir,
                strerror(errno));
        goto out;
    }
    {
        /* Absolute from here on: smoke commands run in other directories. */
        char *abs = realpath(cfg.data_dir, NULL);
        if (abs == NULL) {
            fprintf(stderr, "modelgated: cannot resolve %s: %s\n", cfg.data_dir, strerror(errno));
            goto out;
        }
        free(cfg.data_dir);
        cfg.data_dir = abs;
    }
    if (check_data_dir(&cfg) != 0)
        goto out;
    sopt.data_dir = cfg.data_dir;
    sopt.database = cfg.database;
    sopt.blobs = cfg.blobs;
    sopt.blobs_credentials = cfg.blobs_credentials;
    sopt.host_name = cfg.host_name;
    if (sign_keyring_load(cfg.data_dir, cfg.signing_key, true, &keys, &err) != MG_OK) {
        fprintf(stderr, "modelgated: signing key: %s\n", err.message);
        goto out;
    }
    sopt.keys = keys;
    if (store_open(&sopt, &st, &err) != MG_OK) {
        fprintf(stderr, "modelgated: cannot open the store (data directory %s): %s\n", cfg.data_dir,
                err.message);
        goto out;
    }
    if (cfg.blob_redirect && !store_blobs_can(st, BLOB_CAN_PRESIGN)) {
        fprintf(stderr,
                "modelgated: --blob-downloads redirect needs an s3:// blob backend "
                "(presigned URLs), not %s\n",
                store_blobs_kind(st));
        goto out;
    }
    if (bootstrap_admin(st, cfg.data_dir) != 0)
        goto out;
    if (cfg.database && cfg.signing_key == NULL && share_signing_key(st, &cfg, &keys) != 0)
        goto out;

    srv.cfg = &cfg;
    srv.metrics = srv_metrics_new();
    srv.cache = cfg.no_response_cache ? NULL : srv_cache_new();
    srv.store = st;
    srv.ctl = &ctl;
    srv.routes = api_routes;
    ctl.cfg = &cfg;
    ctl.store = st;
    ctl.keys = keys;
    ctl.metrics = srv.metrics;
    ctl.crash_at = getenv("MODELGATED_TEST_CRASH_AT");
    ctl.cache_on = srv.cache != NULL;
    /* The workers register with control before the first request can need them. */
    runner_register(&ctl);
    if (push_register(&ctl, &popt, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (srv_identity_setup(&srv, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (srv_oci_cache_open(cfg.data_dir, cfg.oci_layer_cache, &srv.oci_cache, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (srv_start(&srv, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    ctl.port = srv.port;
    ctl.tls = srv.tls;
    /* Registered as a replica before any worker takes a lease in its name. */
    if (ctl_cluster_start(&ctl, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (push_start(&ctl, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (runner_setup(&cfg, &ropt, runner_dir, sizeof(runner_dir), &err) != MG_OK ||
        runner_start(&ctl, &ropt, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    if (rel_timer_start(&ctl, &err) != MG_OK || ctl_lifecycle_start(&ctl, &err) != MG_OK ||
        rel_analysis_start(&ctl, &err) != MG_OK) {
        fprintf(stderr, "modelgated: %s\n", err.message);
        goto out;
    }
    fprintf(stderr, "modelgated: serving on %s (port %u), data in %s; the UI is at %s\n",
            cfg.listen, (unsigned)srv.port, cfg.data_dir,
            ui_url(&cfg, srv.port, uibuf, sizeof(uibuf)));
    if (cfg.port_file) {
        snprintf(portbuf, sizeof(portbuf), "%u\n", (unsigned)srv.port);
        if (write_file_atomic(cfg.port_file, portbuf, 0644) != 0) {
            fprintf(stderr, "modelgated: cannot write %s: %s\n", cfg.port_file, strerror(errno));
            goto out;
        }
    }

    while (sigwait(&sigs, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
        ;
    fprintf(stderr, "modelgated: %s received, finishing in-flight requests\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
    rc = 0;
out:
    push_stop(&ctl); /* resumes ?wait requests so they can finish */
    srv_stop(&srv, SHUTDOWN_GRACE_MS);
    rel_analysis_stop(&ctl);
    rel_timer_stop(&ctl);
    ctl_lifecycle_stop(&ctl);
    runner_stop(&ctl);
    ctl_cluster_stop(&ctl); /* its heartbeat kicks the runner and the pool: freed after it */
    runner_free(&ctl);
    push_free(&ctl);
    srv_metrics_free(&srv.metrics);
    srv_cache_free(&srv.cache);
    srv_oci_cache_close(&srv.oci_cache);
    srv_identity_release(&srv);
    srv_tls_release(&srv);
    for (i = 0; i < (int)ropt.nprofiles; i++)
        runner_profile_release(&ropt.profiles[i]);
    store_close(&st);
    sign_keyring_free(&keys);
    srv_config_release(&cfg);
    curl_global_cleanup();
    if (rc == 0)
        fprintf(stderr, "modelgated: stopped\n");
    return rc;
}
