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
 * model "fuzz" but no blob at all, so a valid body reaches the store, which
 * refuses it (the artifact does not exist) and nothing is ever written; the
 * database therefore stays the same size however long the fuzzer runs.
 *
 * Checked besides memory safety: every body gets exactly one reply, and it
 * is a 4xx: an unparsable, invalid or refused body must never become a 500.
 */
#include "fuzz.h"

#include "server/http.h"
#include "store/store.h"

static struct store *st; /* harness context: opened once per process */
static struct srv srv;
static const struct srv_route *create_route;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct store_options opt = {0};
    struct mg_error err = {0};
    json_t *req, *out = NULL;
    struct srv_req r;

    (void)argc;
    (void)argv;
    opt.data_dir = fuzz_scratch("version");
    opt.sync_normal = true;
    opt.read_conns = 1;
    store_archive_limits_default(&opt.archive);
    if (store_open(&opt, &st, &err) != MG_OK) {
        fprintf(stderr, "fuzz: store_open: %s\n", err.message);
        abort();
    }
    req = json_pack("{s:s}", "name", "fuzz");
    if (req == NULL || store_model_create(st, "fuzz", req, &out, &err) != MG_OK) {
        fprintf(stderr, "fuzz: store_model_create: %s\n", err.message);
        abort();
    }
    json_decref(req);
    json_decref(out);
    srv.store = st;

    memset(&r, 0, sizeof(r));
    if (srv_route_match(&r, "POST", "/api/v1/models/fuzz/versions") != MG_OK) {
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
    r.who.roles = STORE_ROLE_PUBLISHER;
    r.body = body;

    create_route->handle(&r);

    FUZZ_CHECK(r.resp != NULL, "no reply (status %u)", r.status);
    FUZZ_CHECK(r.status >= 400 && r.status < 500, "status %u: %s", r.status,
               r.err.message[0] ? r.err.message : "(no message)");
    MHD_destroy_response(r.resp);
    json_decref(body);
    return 0;
}
