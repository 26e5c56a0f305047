/*
 * control.h - the context release control shares with its leader jobs and with the workers
 * that register with it. No HTTP: nothing here names libmicrohttpd, a request or a route, so
 * release control is unit-tested with a store and two function tables (tests/unit/control/).
 *
 * The workers register themselves, as nginx modules register their handlers: the gateway
 * pool (gateways/) hands over a struct ctl_gateways and the smoke-test runner (runner/) a
 * struct ctl_runner at start. Control calls them only through these tables and they report
 * back through control/events.h; control never names a worker and no worker names another.
 * A table left empty (a worker not linked in, as in the unit tests) does nothing: a wait
 * wakes at once, checks pass, queueing reports MG_EUNAVAIL.
 *
 * Ownership: everything a struct ctl points at is the daemon's (daemon/main.c); control's
 * own threads (timer, analysis, lifecycle, cluster) hang off it while they run.
 */
#ifndef CTL_CONTROL_H
#define CTL_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../model/config.h"

struct ctl;
struct store;
struct sign_keyring;
struct srv_metrics;

/* The names the gateways of (model, alias) give a version (docs/contract.md "Live canary analysis"
 * placeholders): the first HAProxy gateway's backend and server, the first nginx gateway's
 * upstream; has_* false when the alias has no such gateway. */
struct ctl_version_names {
    bool has_haproxy, has_nginx;
    char backend[256], server[256], upstream[256];
};

/* What the gateway pool registers (gateways/push.c): push_register() fills every slot at
 * start-up, push_start() sets impl (its own state; NULL while its threads do not run). */
struct ctl_gateways {
    void *impl;
    /* The outbox was written: wake a worker. */
    void (*kick)(struct ctl *c);
    /* Another replica changed the outbox: kick the workers and look at the waiters again. */
    void (*poke)(struct ctl *c);
    /* Call wake(arg) once, on any thread, when every gateway of (model, alias) acknowledged
     * generation gen, at deadline_ms (wall clock), or when the pool stops: whichever comes
     * first. Thread-safe. */
    void (*wait)(struct ctl *c, const char *model, const char *alias, int64_t gen,
                 int64_t deadline_ms, void (*wake)(void *arg), void *arg);
    /* Every gateway object name a change of (model, alias) to routes, match and shadow uses,
     * for the store to claim: *out NEW [{"gateway","name","scope"}]. MG_EINVAL naming the
     * gateway when a template makes a name that does not fit. */
    enum mg_code (*alias_names)(struct ctl *c, const char *model, const char *alias,
                                const json_t *routes, const json_t *match, const json_t *shadow,
                                json_t **out, struct mg_error *err);
    /* Can every gateway hearing (model, alias) apply these match rules and shadow? MG_EINVAL
     * naming the gateway and the field otherwise. */
    enum mg_code (*alias_check)(struct ctl *c, const char *model, const char *alias,
                                const json_t *match, const json_t *shadow, struct mg_error *err);
    /* The same check for a gateway being PUT, against every live alias it would hear. */
    enum mg_code (*gateway_check)(struct ctl *c, const char *name, const char *kind,
                                  const json_t *config, const json_t *models, const json_t *aliases,
                                  struct mg_error *err);
    void (*version_names)(struct ctl *c, const char *model, const char *alias, int64_t version,
                          struct ctl_version_names *out);
    /* Validate a GatewayConfig body of a kind: *config NEW (secrets removed), *secret NEW or
     * NULL. MG_EINVAL with a field otherwise. */
    enum mg_code (*config_validate)(struct ctl *c, const char *kind, const json_t *body,
                                    json_t **config, char **secret, struct mg_error *err);
};

/* What the smoke-test runner registers (runner/runner.c): runner_register() fills every
 * slot at start-up (a test can be queued and read with no runner thread), runner_start()
 * sets impl (its own state; NULL while it does not run). */
struct ctl_runner {
    void *impl;
    /* Queue a test (trigger: route, promotion, periodic, manual); *out (may be NULL) the
     * SmokeTest. leader_epoch > 0: only while this replica still leads at that epoch. */
    enum mg_code (*enqueue)(struct ctl *c, int64_t leader_epoch, const char *model, int64_t version,
                            const char *trigger, const char *gpu_mode, json_t **out,
                            struct mg_error *err);
    /* Queue tests of every version a delivered generation routes (the "runner" gateway). */
    enum mg_code (*enqueue_routes)(struct ctl *c, const char *model, const char *alias,
                                   const json_t *payload, struct mg_error *err);
    /* Wake the workers: a test was queued by someone else. */
    void (*kick)(struct ctl *c);
    /* GET /api/v1/runner: NEW reference. */
    json_t *(*info)(struct ctl *c);
    /* Memory of the largest GPU in GiB, or -1 when none is reported. */
    double (*largest_gpu_gib)(struct ctl *c);
    /* Artifact cache figures since start. */
    void (*cache_stats)(struct ctl *c, uint64_t *extractions, uint64_t *hits);
};

struct rel_timer;
struct rel_analysis;
struct ctl_cluster;
struct ctl_lifecycle;

struct ctl {
    const struct srv_config *cfg;
    struct store *store;
    /* What new versions are signed with and old ones verified against; replaced at once
     * when the cluster's key rotates (cluster.c keeps every one it replaced alive until it
     * stops), so load it once per use. */
    const struct sign_keyring *_Atomic keys;
    struct srv_metrics *metrics; /* counters (os/metrics.c); may be NULL */
    const char *crash_at;        /* MODELGATED_TEST_CRASH_AT: a named point to die at (tests) */
    /* This replica's address for the others (cluster.c): set before ctl_cluster_start. */
    uint16_t port;
    bool tls;
    bool cache_on; /* the HTTP layer caches read bodies (coherence leases are needed) */

    struct ctl_gateways gw; /* registered by the gateway pool; zeroed: none */
    struct ctl_runner rn;   /* registered by the runner; zeroed: none */

    struct rel_timer *timer;         /* the promotion clock (release_timer.c) */
    struct rel_analysis *analysis;   /* live canary analysis (release_analysis.c) */
    struct ctl_cluster *cluster;     /* heartbeat and leader duties (cluster.c) */
    struct ctl_lifecycle *lifecycle; /* periodic retention and GC (lifecycle.c) */
};

/*
 * Fault injection for crash tests: when MODELGATED_TEST_CRASH_AT names this point, the
 * process dies there at once (_exit(86)), like a power cut: no reply, no cleanup. Named
 * points: "promotion-created" (just after a promotion's transaction commits), "gc-marked"
 * (garbage collection marked blobs, their bytes not yet removed). One string compare when
 * unset.
 */
void ctl_crash_point(const struct ctl *c, const char *point);

/* ---- the registered workers, called through their tables -------------------------- */

void ctl_gateways_kick(struct ctl *c);
void ctl_gateways_poke(struct ctl *c);
/* wake(arg) at once when no gateway pool runs. */
void ctl_gateways_wait(struct ctl *c, const char *model, const char *alias, int64_t gen,
                       int64_t deadline_ms, void (*wake)(void *arg), void *arg);
enum mg_code ctl_alias_names(struct ctl *c, const char *model, const char *alias,
                             const json_t *routes, const json_t *match, const json_t *shadow,
                             json_t **out, struct mg_error *err);
enum mg_code ctl_alias_check(struct ctl *c, const char *model, const char *alias,
                             const json_t *match, const json_t *shadow, struct mg_error *err);
enum mg_code ctl_gateway_check(struct ctl *c, const char *name, const char *kind,
                               const json_t *config, const json_t *models, const json_t *aliases,
                               struct mg_error *err);
void ctl_version_names(struct ctl *c, const char *model, const char *alias, int64_t version,
                       struct ctl_version_names *out);
enum mg_code ctl_gateway_config_validate(struct ctl *c, const char *kind, const json_t *body,
                                         json_t **config, char **secret, struct mg_error *err);

enum mg_code ctl_runner_enqueue(struct ctl *c, int64_t leader_epoch, const char *model,
                                int64_t version, const char *trigger, const char *gpu_mode,
                                json_t **out, struct mg_error *err);
enum mg_code ctl_runner_enqueue_routes(struct ctl *c, const char *model, const char *alias,
                                       const json_t *payload, struct mg_error *err);
void ctl_runner_kick(struct ctl *c);
/* NULL when no runner runs. */
json_t *ctl_runner_info(struct ctl *c);
double ctl_runner_largest_gpu_gib(struct ctl *c);
void ctl_runner_cache_stats(struct ctl *c, uint64_t *extractions, uint64_t *hits);

#endif
