/*
 * fuzz_version_body.c - VersionCreate bodies (POST /api/v1/models/{model}/versions)
 * through the server's own path: json_loadb() with the flags http.c uses,
 * srv_route_match(), then the route's handler, which validates the body
 * (check_create() and the api_* helpers in server/api/api.c) and hands a
 * valid one to store_version_create().
 *
 * The handler needs no connection: it reads only r->body, r->who and the
 * path parameters, and its reply is built with MHD_create_response_*, which
 * is destroyed here. The store is a real one in a scratch directory, with
 * model "fuzz" and one blob, the 4 bytes "test" (FUZZ_ARTIFACT, which the seed
 * corpus cites), so a valid body gets past the artifact check and creates a
 * version (M29: before, no blob existed and every valid body stopped at
 * "artifact does not exist"). The store is made afresh every FUZZ_RESET_AFTER
 * versions, so the database stays small however long the fuzzer runs.
 *
 * Checked besides memory safety: every body gets exactly one reply, and it
 * is a 201 (a version was created) or a 4xx: an unparsable, invalid or
 * refused body must never become a 500.
 */
#include <microhttpd.h>

#include "fuzz.h"

#include "model/config.h"
#include "http/http.h"
#include "store/store.h"
#include "api/api.h"

/* sha256("test"): the blob every valid seed cites as its artifact. */
#define FUZZ_ARTIFACT "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define FUZZ_RESET_AFTER 512

static struct store *st; /* harness context: opened once per process (and per reset) */
static struct srv srv;
static struct srv_config cfg; /* the daemon's defaults: handlers read settings from it */
static const struct srv_route *create_route;
static char store_dir[PATH_MAX];
static unsigned generation, created;
static unsigned long created_total; /* versions created over the whole run */

static void fuzz_die(const char *what, const struct mg_error *err)
{
    fprintf(stderr, "fuzz: %s: %s\n", what, err->message);
    abort();
}

/* A fresh store in a directory of its own, with model "fuzz" and the blob "test". */
static void store_fresh(void)
{
    struct store_options opt = {0};
    struct mg_error err = {0};
    struct store_blob_upload *up = NULL;
    json_t *req, *out = NULL;
    bool made;

    if (st != NULL) {
        store_close(&st);
        fuzz_rmtree(store_dir);
    }
    if (snprintf(store_dir, sizeof(store_dir), "%s/%u", fuzz_scratch("version"), generation++) >=
            (int)sizeof(store_dir) ||
        mkdir(store_dir, 0700) != 0) {
        perror("fuzz: mkdir");
        abort();
    }
    opt.data_dir = store_dir;
    opt.sync_normal = true;
    opt.read_conns = 1;
    store_archive_limits_default(&opt.archive);
    if (store_open(&opt, &st, &err) != MG_OK)
        fuzz_die("store_open", &err);
    req = json_pack("{s:s}", "name", "fuzz");
    if (req == NULL || store_model_create(st, "fuzz", req, &out, &err) != MG_OK)
        fuzz_die("store_model_create", &err);
    json_decref(req);
    json_decref(out);
    out = NULL;
    if (store_blob_upload_begin(st, 1024, &up, &err) != MG_OK ||
        store_blob_upload_write(up, "test", 4, &err) != MG_OK ||
        store_blob_upload_commit(&up, "fuzzer", FUZZ_ARTIFACT, &out, &made, &err) != MG_OK)
        fuzz_die("storing the artifact", &err);
    json_decref(out);
    srv.store = st;
    created = 0;
}

/* At exit. FUZZ_EXPECT_CREATED=1 (the corpus replay, fuzz_replay_version_body): the seeds
 * must have created a version, or the target never got past the artifact check. */
static void store_done(void)
{
    if (st != NULL)
        store_close(&st);
    srv_config_release(&cfg);
    if (getenv("FUZZ_EXPECT_CREATED") != NULL && created_total == 0) {
        fprintf(stderr, "fuzz: no input created a version: the seeds never get past the "
                        "checks to the store\n");
        _exit(1);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct srv_req r;

    (void)argc;
    (void)argv;
    srv_config_init(&cfg);
    srv.cfg = &cfg;
    srv.routes = api_routes;
    store_fresh();
    atexit(store_done);

    memset(&r, 0, sizeof(r));
    if (srv_route_match(&r, api_routes, "POST", "/api/v1/models/fuzz/versions") != MG_OK) {
        fprintf(stderr, "fuzz: no POST /api/v1/models/{model}/versions route\n");
        abort();
    }
    create_route = r.route;
    free(r.params[0].value);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct srv_req r;
    json_error_t jerr;
    json_t *body;

    /* http.c: an empty body is NULL, anything else must parse. */
    body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL)
        return 0; /* answered 400 by http.c before any handler runs */

    memset(&r, 0, sizeof(r));
    r.srv = &srv;
    r.method = "POST";
    r.path = (char *)"/api/v1/models/fuzz/versions";
    r.route = create_route;
    r.params[0].name = "model";
    r.params[0].value = (char *)"fuzz";
    r.nparams = 1;
    r.authenticated = true;
    snprintf(r.who.name, sizeof(r.who.name), "fuzzer");
    r.who.roles = MG_ROLE_PUBLISHER;
    r.body = body;

    create_route->handle(&r);

    FUZZ_CHECK(r.resp != NULL, "no reply (status %u)", r.status);
    FUZZ_CHECK(r.status == 201 || (r.status >= 400 && r.status < 500), "status %u: %s", r.status,
               r.err.message[0] ? r.err.message : "(no message)");
    MHD_destroy_response(r.resp);
    json_decref(body);
    if (getenv("FUZZ_VERBOSE") != NULL)
        fprintf(stderr, "fuzz: version body answered %u\n", r.status);
    if (r.status == 201)
        created_total++;
    if (r.status == 201 && ++created >= FUZZ_RESET_AFTER)
        store_fresh();
    return 0;
}
