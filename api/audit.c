/*
 * audit.c - GET /api/v1/audit and /api/v1/audit/verify (admin).
 */
#include "api.h"

#include <string.h>

#include "../base/util.h"

/* ?order=asc (oldest first, the default) or desc (newest first); ?after=SEQ either way;
 * the page token is where the next page starts in that order. */
static void list(struct srv_req *r)
{
    const char *after = srv_query(r, "after"), *order = srv_query(r, "order");
    struct store_page page;
    int64_t a = 0, token = 0;
    bool desc = order != NULL && strcmp(order, "desc") == 0;
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!srv_page(r, &page))
        return;
    if (order && !desc && strcmp(order, "asc") != 0) {
        srv_fail(r, MG_EINVAL, "order", "order is asc (oldest first) or desc (newest first)");
        return;
    }
    if (after && !mg_parse_i64(after, 0, INT64_MAX, &a)) {
        srv_fail(r, MG_EINVAL, "after", "after must be a sequence number (an integer >= 0)");
        return;
    }
    if (page.page_token && !mg_parse_i64(page.page_token, desc ? 1 : 0, INT64_MAX, &token)) {
        srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
        return;
    }
    if (desc)
        rc = store_audit_list_desc(r->srv->store, a, token, page.limit, &out, &err);
    else
        rc = store_audit_list(r->srv->store, page.page_token ? token : a, page.limit, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void verify(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_audit_verify(r->srv->store, &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route api_routes_audit[] = {
    {"GET", "/api/v1/audit", MG_ROLE_ADMIN, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/audit/verify", MG_ROLE_ADMIN, SRV_BODY_NONE, verify, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
