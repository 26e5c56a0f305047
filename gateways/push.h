/*
 * push.h - delivering alias changes from the outbox to gateways: a pool of
 * worker threads, retries with exponential backoff and full jitter, the
 * adapters (webhook, HAProxy runtime API, nginx include file, the built-in
 * runner kind, which hands its tests to whoever registered as the runner), and the
 * waiters of ?wait=SECONDS. It registers all of it with control (control.h).
 *
 * Workers never hold a database transaction while talking to a gateway: a
 * row is claimed with a lease, delivered, then settled for the generation
 * that was delivered (store/outbox.c).
 */
#ifndef PUSH_H
#define PUSH_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../store/store.h"
#include "../control/control.h"

struct ctl;

/* ---- destination allowlist (SSRF guard) -------------------------------- */

#define PUSH_ALLOW_MAX 32

struct push_net {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    unsigned prefix;
};

struct push_allow {
    struct push_net nets[PUSH_ALLOW_MAX];
    unsigned n;
};

/* Parse "10.0.0.0/8", "fd00::/8" or a single address; MG_EINVAL otherwise. */
enum mg_code push_allow_add(struct push_allow *a, const char *cidr, struct mg_error *err);

/* May a webhook connect to this address? Link-local (169.254.0.0/16,
 * fe80::/10), unspecified and multicast addresses never; IPv4-mapped IPv6 is
 * judged as IPv4. */
bool push_allow_check(const struct push_allow *a, const struct sockaddr *sa);

/* ---- adapters ---------------------------------------------------------- */

struct push_result {
    bool ok;
    bool fenced;            /* the claim lost its lease: the delivery stopped (push_fence) */
    bool touched;           /* something was sent to the gateway (a fence passed) */
    bool gone;              /* the gateway asked to be disabled (HTTP 410) */
    int64_t retry_after_ms; /* > 0 when the gateway said when to retry */
    char error[512];
};

struct push_env {
    const struct push_allow *allow;
    /* nginx deliveries run one at a time: a reload must never pick up
     * another delivery's untested file (write → test → reload is atomic). */
    pthread_mutex_t *nginx_lock;
    struct ctl *ctl; /* the store, the configuration, the registered runner */
};

/*
 * Call right before each thing an adapter sends to a gateway: true while d's claim still
 * holds its row (store_outbox_fence; res->touched is then set, as the caller is about to
 * send). false when it lost it (expired, taken by another replica, superseded by a newer
 * generation, or this replica was paused so long the others count it dead), or the
 * database cannot say: res->fenced and res->error are set and the adapter must send
 * nothing more and return. A delivery without a claim (no lease token) always holds.
 * Thread-safe.
 */
bool push_fence(const struct push_env *env, const struct store_delivery *d,
                struct push_result *res);

/* Validate a GatewayConfig body of each kind. On success *config receives
 * the stored config (NEW; secrets removed) and *secret the secret (NEW
 * malloc'd string or NULL). MG_EINVAL with a field otherwise. */
enum mg_code push_config_validate(const struct push_env *env, const char *kind, const json_t *body,
                                  json_t **config, char **secret, struct mg_error *err);

/*
 * A gateway kind: validate a GatewayConfig body (NULL: the kind cannot be PUT, it is built
 * in) and deliver one alias state to it. One table lists them (push.c, like curl's handler
 * tables); each kind's code lives in its own file (webhook.c, haproxy.c, nginx.c, and the
 * built-in runner kind in push.c, which hands its tests to the registered runner).
 */
struct push_adapter {
    const char *kind;
    enum mg_code (*validate)(const struct push_env *env, const json_t *body, json_t **config,
                             char **secret, struct mg_error *err);
    void (*deliver)(const struct push_env *env, const struct store_delivery *d,
                    struct push_result *res);
    bool rollback_on_failure; /* a step this gateway cannot apply rolls the promotion back */
    /* Read the gateway's live state back and compare it with d's generation (the
     * reconciler); NULL when the gateway cannot be read (a webhook). false (why set) when
     * it could not be read; else *drift, with what differs in why. Sends nothing. */
    bool (*check)(const struct push_env *env, const struct store_delivery *d, bool *drift,
                  char *why, size_t whylen);
};

/* The adapter of a kind, or NULL. */
const struct push_adapter *push_adapter_of(const char *kind);

enum mg_code push_webhook_validate(const struct push_env *env, const json_t *body, json_t **config,
                                   char **secret, struct mg_error *err);
enum mg_code push_haproxy_validate(const struct push_env *env, const json_t *body, json_t **config,
                                   char **secret, struct mg_error *err);
enum mg_code push_nginx_validate(const struct push_env *env, const json_t *body, json_t **config,
                                 char **secret, struct mg_error *err);
void push_webhook_deliver(const struct push_env *env, const struct store_delivery *d,
                          struct push_result *res);
void push_haproxy_deliver(const struct push_env *env, const struct store_delivery *d,
                          struct push_result *res);
void push_nginx_deliver(const struct push_env *env, const struct store_delivery *d,
                        struct push_result *res);
bool push_haproxy_check(const struct push_env *env, const struct store_delivery *d, bool *drift,
                        char *why, size_t whylen);
bool push_nginx_check(const struct push_env *env, const struct store_delivery *d, bool *drift,
                      char *why, size_t whylen);

/* The webhook body for a delivery at time now_ms (malloc'd JSON text). */
char *push_webhook_body(const struct store_delivery *d, int64_t now_ms);

/* Expand {model}, {alias}, {version} in a template into out. false when it
 * does not fit or names an unknown placeholder. */
bool push_expand(const char *tmpl, const char *model, const char *alias, int64_t version, char *out,
                 size_t outsz);

/* ---- the pool ---------------------------------------------------------- */

struct push_options {
    unsigned workers;
    int64_t backoff_base_ms;
    int64_t backoff_max_ms;
    int64_t reconcile_ms; /* how often gateways are read back and repaired; 0: never */
    struct push_allow allow;
};

/* Backoff before attempt n+1 after n failed attempts (n >= 1): full jitter
 * over min(max, base * 2^(n-1)), at least 50 ms; rnd in [0, 1). */
int64_t push_backoff_ms(const struct push_options *o, int attempts, double rnd);

/* Register the pool with control (control.h: every slot of ctl->gw filled; ?wait,
 * gateway names and checks work from here on), without starting a thread. */
enum mg_code push_register(struct ctl *ctl, const struct push_options *o, struct mg_error *err);

/* Start the workers and the waiter clock (after push_register). */
enum mg_code push_start(struct ctl *ctl, struct mg_error *err);

/* Wake every waiter and stop the threads (later waits wake at once); push_free() then
 * releases everything and empties ctl->gw. */
void push_stop(struct ctl *ctl);
void push_free(struct ctl *ctl);

/*
 * The HMAC key of a webhook secret into key (512 bytes): for a Standard Webhooks
 * "whsec_<base64>" secret the decoded bytes (24 to 64 of them, else false), for any other the
 * secret's own bytes. Thread-safe.
 */
bool push_webhook_key(const char *secret, uint8_t key[512], size_t *keylen);

/* names.c: the one-to-one encoding of a model or alias name for gateway object names
 * ('-' → "_0", '.' → "_1", '_' → "_2"); false when it does not fit in cap. */
bool push_name_encode(const char *in, char *out, size_t cap);

/* "modelgate_<enc(model)>_<enc(alias)>", the nginx variable of an alias (without '$'). */
bool push_nginx_variable(const char *model, const char *alias, char *out, size_t cap);

/* Every gateway object name a change of (model, alias) to `routes`, `match` and `shadow`
 * (either NULL: none) uses, for the store to claim (store_alias_change.names): *out NEW
 * [{"gateway","name","scope"}]. MG_EINVAL naming the gateway when a template makes a name
 * that does not fit. */
enum mg_code push_alias_names(struct ctl *ctl, const char *model, const char *alias,
                              const json_t *routes, const json_t *match, const json_t *shadow,
                              json_t **out, struct mg_error *err);

/* The names the gateways of (model, alias) give `version` (control.h). */
void push_version_names(struct ctl *ctl, const char *model, const char *alias, int64_t version,
                        struct ctl_version_names *out);

/*
 * Can every gateway that hears (model, alias) apply these match rules and shadow (either
 * NULL: none)? MG_EINVAL naming the gateway and the field otherwise: HAProxy copies no
 * requests (a shadow is refused, docs/contract.md "Routing strategies") and pins headers only
 * through a map (its config's "map"); nginx reads a header only by a name of a-z, 0-9 and '-'.
 */
enum mg_code push_alias_check(struct ctl *ctl, const char *model, const char *alias,
                              const json_t *match, const json_t *shadow, struct mg_error *err);

/* The same check the other way round, for a gateway being PUT: can gateway `name` (kind and
 * validated config; models and aliases its filters, NULL for all) apply the match rules and
 * shadow of every live alias it would hear? MG_EINVAL naming the gateway and the alias (field
 * "aliases") otherwise: an HAProxy gateway would hear an alias with a shadow. */
enum mg_code push_gateway_check(struct ctl *ctl, const char *name, const char *kind,
                                const json_t *config, const json_t *models, const json_t *aliases,
                                struct mg_error *err);

#endif
