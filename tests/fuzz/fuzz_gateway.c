/*
 * fuzz_gateway.c - GatewayConfig bodies (PUT /api/v1/gateways/{name}) through
 * push_config_validate() (server/push/push.h): the webhook, haproxy and nginx
 * validators, URL parsing with libcurl's URL API, the webhook allowlist check
 * and the name templates ({model}, {alias}, {version}).
 *
 * Input: a JSON document parsed as http.c does. A body with a string "kind"
 * is validated for that kind, as gateways.c does; any other body is tried
 * against all three kinds, so each validator sees every input. The allowlist
 * is the one modelgated builds when it listens on loopback (127.0.0.0/8, ::1).
 *
 * Checked besides memory safety (and leaks: ASan's leak checker runs at exit
 * and on -detect_leaks inputs):
 * - accepted: *config is an object without a "secret" member; a webhook gets
 *   its secret back separately and its stored config is {"url"}, with the body's
 *   "events" when it named any (the event types it also wants);
 * - refused: the code is MG_EINVAL with a message, *config stays NULL and
 *   *secret NULL.
 */
#include "fuzz.h"

#include "gateways/push.h"

static struct push_allow allow; /* harness context, set once */

static const char *const kinds[] = {"webhook", "haproxy", "nginx"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct mg_error err;

    (void)argc;
    (void)argv;
    memset(&allow, 0, sizeof(allow));
    if (push_allow_add(&allow, "127.0.0.0/8", &err) != MG_OK ||
        push_allow_add(&allow, "::1/128", &err) != MG_OK) {
        fprintf(stderr, "fuzz: push_allow_add: %s\n", err.message);
        abort();
    }
    return 0;
}

static void validate(const json_t *body, const char *kind)
{
    struct push_env env;
    struct mg_error err;
    json_t *config = NULL;
    char *secret = NULL, *text;
    enum mg_code rc;

    memset(&env, 0, sizeof(env)); /* validation needs only the allowlist */
    env.allow = &allow;
    memset(&err, 0, sizeof(err));
    rc = push_config_validate(&env, kind, body, &config, &secret, &err);
    if (rc != MG_OK) {
        FUZZ_CHECK(rc == MG_EINVAL && err.code == MG_EINVAL && err.message[0] != '\0',
                   "kind %s refused with code %d, message '%s'", kind, (int)rc, err.message);
        FUZZ_CHECK(config == NULL && secret == NULL, "kind %s: output set on failure", kind);
        return;
    }
    FUZZ_CHECK(json_is_object(config), "kind %s: config is not an object", kind);
    FUZZ_CHECK(json_object_get(config, "secret") == NULL, "kind %s: config keeps 'secret'", kind);
    FUZZ_CHECK((strcmp(kind, "webhook") == 0) == (secret != NULL), "kind %s: secret %s", kind,
               secret ? "returned" : "missing");
    /* A webhook's stored config is its URL and the events the body named, nothing else. */
    if (secret) {
        const json_t *events = json_object_get(body, "events");

        FUZZ_CHECK(json_object_size(config) == 1 + (events != NULL) &&
                       json_is_string(json_object_get(config, "url")) &&
                       json_equal(json_object_get(config, "events"), events) == (events != NULL),
                   "a webhook config holds more than its url and events");
    }
    text = json_dumps(config, JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "kind %s: config does not serialise", kind);
    free(text);
    free(secret);
    json_decref(config);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *body, *kind;
    json_error_t jerr;
    size_t i;

    body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (body == NULL)
        return 0;
    kind = json_object_get(body, "kind");
    /* gateways.c: the body is an object and kind a string of at most 16 bytes. */
    if (json_is_object(body) && json_is_string(kind) && json_string_length(kind) <= 16 &&
        strlen(json_string_value(kind)) == json_string_length(kind)) {
        validate(body, json_string_value(kind));
    } else if (json_is_object(body)) {
        for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
            validate(body, kinds[i]);
    }
    json_decref(body);
    return 0;
}
