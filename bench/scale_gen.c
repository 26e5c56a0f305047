/*
 * scale_gen.c - fills a modelgate data directory with many models and
 * versions through the store API (store/store.h), not HTTP, for
 * bench/scale.sh. Not part of the server or the test suite.
 *
 * Every model "m<i>" gets two datasets, "raw-<i>" and "train-<i>" (derived
 * from raw-<i>), then --versions versions of one shared artifact, each
 * trained on train-<i> with a few metrics and a tag, and finally an alias
 * "production" set directly to its newest version (so it has a last-known-
 * good). Each model therefore looks the same whether there are 1 or 10,000
 * of them, and the queries bench/scale.sh times return the same amount of
 * data in the small and the big store; only the size of the tables differs.
 *
 * The store is opened with synchronous=NORMAL (a benchmark fixture needs no
 * durability) and the data directory's own signing key, generated here on
 * first use, so modelgated later serves the same keys. Versions are created
 * one store_version_create() at a time: the store has no batch API, and each
 * version is signed, audited and committed as it would be over HTTP.
 *
 * With --database URL the records go to that PostgreSQL database instead (the data
 * directory keeps the signing key), exactly as a modelgated on it would write them.
 *
 * --from N starts at model m<N> (bench/scale.sh makes the rest of a big PostgreSQL store
 * as copies, bench/scale_clone.sql).
 *
 * Usage: scale_gen --data-dir DIR [--database URL] [--models N] [--from N] [--versions N]
 *                  [--quiet]
 * Prints one JSON line of figures on stdout; progress goes to stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"
#include "store/store.h"

#define ACTOR "scale-gen"

struct gen {
    struct store *st;
    const char *artifact; /* "sha256:…" of the one blob every version uses */
    unsigned models, from, versions;
    bool quiet;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, const struct mg_error *err)
{
    fprintf(stderr, "scale_gen: %s: %s\n", what, err->message);
    return 1;
}

/* "sha256:" + hex(sha256(text)): a stable, valid digest per name. */
static void digest_of(const char *text, char out[72])
{
    char hex[65];

    mg_sha256_hex(text, strlen(text), hex);
    snprintf(out, 72, "sha256:%s", hex);
}

static int upload_blob(struct gen *g, char digest[72])
{
    static const char bytes[] = "modelgate scale benchmark artifact\n";
    struct store_blob_upload *up = NULL;
    struct mg_error err = {0};
    json_t *blob = NULL;
    bool created;

    if (store_blob_upload_begin(g->st, sizeof(bytes), &up, &err) != MG_OK ||
        store_blob_upload_write(up, bytes, sizeof(bytes) - 1, &err) != MG_OK)
        return store_blob_upload_abort(&up), fail("blob upload", &err);
    if (store_blob_upload_commit(&up, ACTOR, NULL, &blob, &created, &err) != MG_OK)
        return fail("blob commit", &err);
    snprintf(digest, 72, "%s", json_string_value(json_object_get(blob, "digest")));
    json_decref(blob);
    return 0;
}

static int dataset(struct gen *g, const char *name, const char *digest, const char *parent)
{
    struct mg_error err = {0};
    json_t *req, *out = NULL, *owners;
    bool created;
    enum mg_code rc;

    req = parent ? json_pack("{s:s, s:s, s:[s]}", "digest", digest, "name", name, "parents", parent)
                 : json_pack("{s:s, s:s}", "digest", digest, "name", name);
    if (req == NULL)
        return fprintf(stderr, "scale_gen: out of memory\n"), 1;
    owners = json_pack("[s]", ""); /* global records */
    rc = owners ? store_dataset_create(g->st, ACTOR, owners, req, &out, &created, &err)
                : mg_fail(&err, MG_ENOMEM, NULL, "out of memory");
    json_decref(owners);
    json_decref(req);
    json_decref(out);
    return rc == MG_OK ? 0 : fail("dataset", &err);
}

static int one_model(struct gen *g, unsigned i)
{
    char name[32], raw_name[32], train_name[32], raw[72], train[72];
    struct store_alias_change a;
    struct mg_error err = {0};
    struct mg_version_new rec;
    struct mg_routes routes;
    json_t *req, *out = NULL;
    unsigned v;
    enum mg_code rc;

    snprintf(name, sizeof(name), "m%05u", i);
    snprintf(raw_name, sizeof(raw_name), "raw-%05u", i);
    snprintf(train_name, sizeof(train_name), "train-%05u", i);
    digest_of(raw_name, raw);
    digest_of(train_name, train);
    if (dataset(g, raw_name, raw, NULL) != 0 || dataset(g, train_name, train, raw) != 0)
        return 1;

    req = json_pack("{s:s}", "name", name);
    rc = req ? store_model_create(g->st, ACTOR, req, &out, &err) : MG_ENOMEM;
    json_decref(req);
    json_decref(out);
    if (rc != MG_OK)
        return fail("model", &err);

    /* One request body per model; only the metrics change between versions. */
    req = json_pack("{s:s, s:s, s:[{s:s, s:s}], s:{s:s}, s:{s:f, s:f}}", "artifact", g->artifact,
                    "run_id", "scale", "datasets", "digest", train, "role", "train", "tags", "team",
                    "bench", "metrics", "auc", 0.0, "p95_latency_ms", 0.0);
    if (req == NULL)
        return fprintf(stderr, "scale_gen: out of memory\n"), 1;
    /* Its record: metrics[0] is auc, metrics[1] p95_latency_ms (the body's order). */
    rc = mg_version_new_init(&rec, req, &err);
    if (rc != MG_OK || rec.nmetrics != 2) {
        json_decref(req);
        mg_version_new_release(&rec);
        return fail("version", &err);
    }
    for (v = 1; v <= g->versions; v++) {
        rec.metrics[0].value = 0.8 + 0.1 * v / g->versions;
        rec.metrics[1].value = 20.0 + v % 17;
        out = NULL;
        if (store_version_create(g->st, ACTOR, name, &rec, &out, &err) != MG_OK) {
            json_decref(req);
            mg_version_new_release(&rec);
            return fail("version", &err);
        }
        json_decref(out);
    }
    mg_version_new_release(&rec);
    json_decref(req);

    memset(&routes, 0, sizeof(routes));
    routes.routes[0].version = (int64_t)g->versions;
    routes.routes[0].weight = 100;
    routes.nroutes = 1;
    memset(&a, 0, sizeof(a));
    a.model = name;
    a.alias = "production";
    a.expected_generation = 0; /* a new alias */
    a.routes = &routes;
    a.kind = "set";
    a.reason = "scale benchmark";
    a.require_unprotected = true;
    rc = store_release_commit(g->st, ACTOR, &a, NULL, NULL, &err);
    return rc == MG_OK ? 0 : fail("alias", &err);
}

static int usage(void)
{
    fprintf(stderr, "usage: scale_gen --data-dir DIR [--database URL] [--models N] [--from N] "
                    "[--versions N] [--quiet]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct store_options opt = {0};
    struct sign_keyring *keys = NULL;
    struct mg_error err = {0};
    struct gen g = {0};
    const char *dir = NULL, *database = NULL;
    char artifact[72];
    double t0, t_last, t;
    int64_t n;
    unsigned i;
    int rc = 1;

    g.models = 100;
    g.versions = 100;
    for (i = 1; i < (unsigned)argc; i++) {
        if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < (unsigned)argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--database") == 0 && i + 1 < (unsigned)argc)
            database = argv[++i];
        else if (strcmp(argv[i], "--models") == 0 && i + 1 < (unsigned)argc &&
                 mg_parse_i64(argv[i + 1], 1, 99999, &n))
            g.models = (unsigned)n, i++;
        else if (strcmp(argv[i], "--from") == 0 && i + 1 < (unsigned)argc &&
                 mg_parse_i64(argv[i + 1], 0, 99998, &n))
            g.from = (unsigned)n, i++;
        else if (strcmp(argv[i], "--versions") == 0 && i + 1 < (unsigned)argc &&
                 mg_parse_i64(argv[i + 1], 1, 1000000, &n))
            g.versions = (unsigned)n, i++;
        else if (strcmp(argv[i], "--quiet") == 0)
            g.quiet = true;
        else
            return usage();
    }
    if (dir == NULL)
        return usage();
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "scale_gen: mkdir %s: %s\n", dir, strerror(errno));
        return 1;
    }
    if (sign_keyring_load(dir, NULL, true, &keys, &err) != MG_OK)
        return fail("signing key", &err);
    opt.data_dir = dir;
    opt.database = database;
    opt.sync_normal = true;
    opt.read_conns = 1;
    opt.keys = keys;
    store_archive_limits_default(&opt.archive);
    if (store_open(&opt, &g.st, &err) != MG_OK) {
        sign_keyring_free(&keys);
        return fail("store_open", &err);
    }
    if (upload_blob(&g, artifact) != 0)
        goto out;
    g.artifact = artifact;

    t0 = t_last = now_s();
    for (i = 0; i < g.models; i++) {
        if (one_model(&g, g.from + i) != 0)
            goto out;
        t = now_s();
        if (!g.quiet && (t - t_last >= 10 || i + 1 == g.models)) {
            double done = (double)(i + 1) * g.versions, rate = done / (t - t0);
            fprintf(stderr,
                    "scale_gen: %u/%u models, %.0f versions, %.0f versions/s, %.0f s left\n", i + 1,
                    g.models, done, rate,
                    ((double)g.models * g.versions - done) / (rate > 0 ? rate : 1));
            t_last = t;
        }
    }
    t = now_s() - t0;
    printf("{\"models\":%u,\"versions_per_model\":%u,\"versions\":%llu,\"seconds\":%.1f,"
           "\"versions_per_s\":%.0f}\n",
           g.models, g.versions, (unsigned long long)g.models * g.versions, t,
           (double)g.models * g.versions / (t > 0 ? t : 1e-9));
    rc = 0;
out:
    store_close(&g.st);
    sign_keyring_free(&keys);
    return rc;
}
