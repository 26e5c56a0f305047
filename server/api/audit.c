/*
 * audit.c - GET /api/v1/audit and /api/v1/audit/verify (admin).
 */
#include "api.h"

#include "../../common/util.h"

static void list(struct srv_req *r)
{
    const char *after = srv_query(r, "after");
    struct store_page page;
    int64_t a = 0;
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!srv_page(r, &page))
        return;
    if (after && !mg_parse_i64(after, 0, INT64_MAX, &a)) {
        srv_fail(r, MG_EINVAL, "after", "after must be a sequence number (an integer >= 0)");
        return;
    }
    if (page.page_token && !mg_parse_i64(page.page_token, 0, INT64_MAX, &a)) {
        srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
        return;
    }
    rc = store_audit_list(r->srv->store, a, page.limit, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void verify(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_audit_verify(r->srv->store, &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route srv_routes_audit[] = {
    {"GET", "/api/v1/audit", STORE_ROLE_ADMIN, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/audit/verify", STORE_ROLE_ADMIN, SRV_BODY_NONE, verify, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
