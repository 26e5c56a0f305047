/*
 * api.c - see api.h.
 */
#include "api.h"

#include <stdio.h>
#include <string.h>

#include "sys.h"

/* ---- models and versions ------------------------------------------------ */

void it_model_create(struct mg_server *s, const char *token, const char *name)
{
    struct it_resp *r =
        it_jreq_v(s, "POST", "/api/v1/models", token, json_pack("{ss}", "name", name));

    it_expect_status(s, r, 201);
    it_resp_free(s, &r);
}

json_int_t it_version_create(struct mg_server *s, const char *token, const char *model,
                             const char *artifact, json_t *extra)
{
    char path[256];
    json_t *body = json_pack("{ss ss}", "artifact", artifact, "image", IT_IMAGE);
    struct it_resp *r;
    json_int_t n;

    if (body == NULL || (extra != NULL && json_object_update(body, extra) != 0))
        fail_msg("cannot build the body of a version of %s", model);
    json_decref(extra);
    r = it_jreq_v(s, "POST", it_fmt(path, sizeof(path), "/api/v1/models/%s/versions", model), token,
                  body);
    it_expect_status(s, r, 201);
    n = it_jint(r->json, "version");
    it_resp_free(s, &r);
    return n;
}

/* ---- aliases ------------------------------------------------------------ */

struct it_resp *it_alias_put(struct mg_server *s, const char *token, const char *model,
                             const char *alias, const char *body, int wait_s)
{
    char path[256];
    struct it_resp *r;

    if (wait_s > 0)
        it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s?wait=%d", model, alias, wait_s);
    else
        it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias);
    r = it_jreq(s, "PUT", path, token, body);
    it_expect_status(s, r, 200);
    return r;
}

json_int_t it_alias_set(struct mg_server *s, const char *token, const char *model,
                        const char *alias, const char *body)
{
    struct it_resp *r = it_alias_put(s, token, model, alias, body, 0);
    json_int_t gen = it_jint(r->json, "generation");

    it_resp_free(s, &r);
    return gen;
}

void it_alias_to(struct mg_server *s, const char *token, const char *model, const char *alias,
                 json_int_t version, int wait_s)
{
    char body[64];
    struct it_resp *r = it_alias_put(
        s, token, model, alias,
        it_fmt(body, sizeof(body), "{\"version\":%" JSON_INTEGER_FORMAT "}", version), wait_s);

    it_resp_free(s, &r);
}

struct it_resp *it_alias_get(struct mg_server *s, const char *token, const char *model,
                             const char *alias)
{
    char path[256];
    struct it_resp *r =
        it_get(s, it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias), token);

    it_expect_status(s, r, 200);
    return r;
}

void it_routes_text(const json_t *routes, char *out, size_t n)
{
    json_t *rt;
    size_t i, k = 0;

    out[0] = '\0';
    json_array_foreach(routes, i, rt) k +=
        (size_t)snprintf(out + k, n > k ? n - k : 0, "%sv%lld:%lld", i ? "," : "",
                         (long long)json_integer_value(json_object_get(rt, "version")),
                         (long long)json_integer_value(json_object_get(rt, "weight")));
}

/* ---- policies and promotions ---------------------------------------------- */

void it_policy_put(struct mg_server *s, const char *model, const char *alias, const char *policy)
{
    char path[256];
    struct it_resp *r =
        it_jreq(s, "PUT", it_fmt(path, sizeof(path), "/api/v1/models/%s/policies/%s", model, alias),
                s->admin_token, policy);

    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
}

struct it_resp *it_promotion_post(struct mg_server *s, const char *token, const char *model,
                                  json_int_t version, const char *alias)
{
    return it_jreq_v(s, "POST", "/api/v1/promotions", token,
                     json_pack("{ss sI ss ss}", "model", model, "version", version, "alias", alias,
                               "reason", "integration test"));
}

struct it_resp *it_promote(struct mg_server *s, const char *token, const char *model,
                           json_int_t version, const char *alias, char id[64])
{
    struct it_resp *r = it_promotion_post(s, token, model, version, alias);

    it_expect_status(s, r, 201);
    snprintf(id, 64, "%s", it_jstr(r->json, "id"));
    assert_true(id[0] != '\0');
    return r;
}

struct it_resp *it_promotion_get(struct mg_server *s, const char *token, const char *id)
{
    char path[256];
    struct it_resp *r = it_get(s, it_fmt(path, sizeof(path), "/api/v1/promotions/%s", id), token);

    it_expect_status(s, r, 200);
    return r;
}

bool it_promotion_final(const char *state)
{
    return strcmp(state, "succeeded") == 0 || strcmp(state, "rejected") == 0 ||
           strcmp(state, "aborted") == 0 || strcmp(state, "rolled_back") == 0;
}

struct it_resp *it_promotion_wait_at(struct mg_server *s, const char *token, const char *id,
                                     const char *state, int64_t timeout_ms, const char *file,
                                     int line)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = it_promotion_get(s, token, id);
        const char *got = it_jstr(r->json, "state");

        if (strcmp(got, state) == 0)
            return r;
        if (it_promotion_final(got) || it_now_ms() > deadline) {
            print_error("waiting for promotion %s to be %s: it is %s%s\nbody: %.4000s\n", id, state,
                        got, it_promotion_final(got) ? " (final)" : " at the deadline", r->body);
            it_server_dump_log(s, 3000);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
}

json_t *it_gate_find(const json_t *gates, const char *kind, const char *name_part)
{
    size_t i;
    json_t *g;

    json_array_foreach(gates, i, g)
    {
        const char *k = json_string_value(json_object_get(g, "kind"));
        const char *n = json_string_value(json_object_get(g, "name"));

        if (k == NULL || strcmp(k, kind) != 0)
            continue;
        if (name_part == NULL || (n != NULL && strstr(n, name_part) != NULL))
            return g;
    }
    return NULL;
}
