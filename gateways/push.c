/*
 * push.c - the delivery pool, backoff, the SSRF allowlist, and ?wait.
 */
#include "push.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../os/wait.h"
#include "../base/util.h"
#include "../control/control.h"
#include "../control/events.h"
#include "../os/metrics.h"

/* A worker holds a claimed row this long; deliveries time out well before. */
#define LEASE_MS 120000
/* Failed attempts at a rollout step before the promotion is rolled back. */
#define PUSH_ROLLBACK_ATTEMPTS 3
/* Waiters are checked at least this often (deadlines). */
#define WAIT_TICK_MS 100

/* ---- allowlist --------------------------------------------------------- */

enum mg_code push_allow_add(struct push_allow *a, const char *cidr, struct mg_error *err)
{
    char host[64];
    const char *slash = strchr(cidr, '/');
    size_t hl = slash ? (size_t)(slash - cidr) : strlen(cidr);
    struct push_net *n;
    int64_t prefix;

    if (a->n >= PUSH_ALLOW_MAX)
        return mg_fail(err, MG_EINVAL, "webhook-allow", "at most %d --webhook-allow networks",
                       PUSH_ALLOW_MAX);
    if (hl == 0 || hl >= sizeof(host))
        goto bad;
    memcpy(host, cidr, hl);
    host[hl] = '\0';
    n = &a->nets[a->n];
    memset(n, 0, sizeof(*n));
    if (inet_pton(AF_INET, host, n->addr) == 1) {
        n->family = AF_INET;
        prefix = 32;
    } else if (inet_pton(AF_INET6, host, n->addr) == 1) {
        n->family = AF_INET6;
        prefix = 128;
    } else {
        goto bad;
    }
    if (slash && !mg_parse_i64(slash + 1, 0, prefix, &prefix))
        goto bad;
    n->prefix = (unsigned)prefix;
    a->n++;
    return MG_OK;
bad:
    return mg_fail(err, MG_EINVAL, "webhook-allow",
                   "--webhook-allow wants a network such as 10.0.0.0/8 or fd00::/8, not '%s'",
                   cidr);
}

static bool in_net(const uint8_t *addr, const uint8_t *net, unsigned prefix)
{
    unsigned full = prefix / 8, rest = prefix % 8;

    if (memcmp(addr, net, full) != 0)
        return false;
    if (rest == 0)
        return true;
    return ((addr[full] ^ net[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool push_allow_check(const struct push_allow *a, const struct sockaddr *sa)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    uint8_t addr[16];
    int family = sa->sa_family;
    unsigned i;

    if (family == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (family == AF_INET6) {
        memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        if (memcmp(addr, v4mapped, 12) == 0) {
            memmove(addr, addr + 12, 4);
            family = AF_INET;
        }
    } else {
        return false;
    }
    if (family == AF_INET) {
        if (addr[0] == 169 && addr[1] == 254)
            return false; /* link-local: cloud metadata lives here */
        if (addr[0] == 0 || addr[0] >= 224)
            return false; /* unspecified, multicast, reserved */
    } else {
        if (addr[0] == 0xfe && (addr[1] & 0xc0) == 0x80)
            return false; /* fe80::/10 */
        if (addr[0] == 0xff)
            return false; /* multicast */
        static const uint8_t zero[16] = {0};
        if (memcmp(addr, zero, 16) == 0)
            return false;
    }
    for (i = 0; i < a->n; i++) {
        if (a->nets[i].family == family && in_net(addr, a->nets[i].addr, a->nets[i].prefix))
            return true;
    }
    return false;
}

/* ---- backoff ----------------------------------------------------------- */

int64_t push_backoff_ms(const struct push_options *o, int attempts, double rnd)
{
    double cap = (double)o->backoff_base_ms * pow(2.0, attempts > 1 ? attempts - 1 : 0);
    int64_t d;

    if (cap > (double)o->backoff_max_ms)
        cap = (double)o->backoff_max_ms;
    d = (int64_t)(cap * rnd);
    return d < 50 ? 50 : d;
}

static double random_unit(void)
{
    uint32_t r = 0;

    mg_random_bytes(&r, sizeof(r));
    return (double)r / 4294967296.0;
}

/* ---- the pool ---------------------------------------------------------- */

struct waiter {
    void (*wake)(void *arg);
    void *arg;
    char model[64];
    char alias[33];
    int64_t gen;
    int64_t deadline;
    struct waiter *next;
};

struct push {
    struct ctl *ctl;
    struct push_options opt;
    struct push_env env;
    pthread_t *threads;
    unsigned nthreads;
    pthread_t clock;
    bool clock_started;
    pthread_t reconciler;
    bool reconciler_started;
    struct mg_wait rwake; /* the reconciler's own: a kick must wake a worker */
    pthread_mutex_t lock;
    struct mg_wait wake;
    pthread_mutex_t nginx_lock;
    bool stop;
    unsigned kicks;
    struct waiter *waiters;
};

static void pool_kick(struct ctl *ctl);

/* Wake waiters whose alias is in sync or whose deadline passed. */
static void check_waiters(struct push *p, bool all)
{
    struct waiter **w, *done = NULL, *x;
    int64_t now = mg_now_ms();

    pthread_mutex_lock(&p->lock);
    w = &p->waiters;
    while (*w) {
        bool synced = false;
        struct mg_error err;

        x = *w;
        if (!all && now < x->deadline)
            store_outbox_synced(p->ctl->store, x->model, x->alias, x->gen, &synced, &err);
        if (all || synced || now >= x->deadline) {
            *w = x->next;
            x->next = done;
            done = x;
        } else {
            w = &x->next;
        }
    }
    pthread_mutex_unlock(&p->lock);
    while (done) {
        x = done;
        done = x->next;
        x->wake(x->arg);
        free(x);
    }
}

/* Leases this worker may hold without knowing it (their claim or outcome failed, perhaps
 * after committing): released once the database answers, else a live replica's lease
 * would hold the row until it expires. */
struct orphans {
    char token[8][17];
    unsigned n;
};

static void orphan_keep(struct orphans *o, const char *token)
{
    if (token[0] == '\0')
        return;
    if (o->n == sizeof(o->token) / sizeof(o->token[0])) /* full: the oldest waits for expiry */
        memmove(o->token[0], o->token[1], sizeof(o->token[0]) * --o->n);
    memcpy(o->token[o->n++], token, sizeof(o->token[0]));
}

static void orphans_release(struct push *p, struct orphans *o)
{
    struct mg_error err;

    while (o->n > 0 && store_outbox_release(p->ctl->store, o->token[o->n - 1], &err) == MG_OK)
        o->n--;
}

bool push_fence(const struct push_env *env, const struct store_delivery *d, struct push_result *res)
{
    struct mg_error err;
    bool held = false;

    if (d->lease_token[0] == '\0') {
        res->touched = true;
        return true;
    }
    if (store_outbox_fence(env->ctl->store, d, &held, &err) != MG_OK) {
        snprintf(res->error, sizeof(res->error),
                 "cannot check the delivery's lease (%.200s); nothing more was sent", err.message);
    } else if (!held) {
        snprintf(res->error, sizeof(res->error),
                 "this replica's lease on generation %lld ended (taken over, superseded or "
                 "expired); nothing more was sent",
                 (long long)d->generation);
    } else {
        res->touched = true;
        return true;
    }
    res->fenced = true;
    res->ok = false;
    return false;
}

/* Deliver a claimed row and record the outcome; false when the outcome could not be
 * recorded (the lease is then an orphan). */
static bool deliver(struct push *p, struct store_delivery *d)
{
    bool recorded = true;
    const struct push_adapter *ad;
    struct push_result res;
    struct mg_error err;
    int64_t next = 0;

    memset(&res, 0, sizeof(res));
    if ((ad = push_adapter_of(d->kind)) != NULL)
        ad->deliver(&p->env, d, &res);
    else
        snprintf(res.error, sizeof(res.error), "unknown gateway kind '%s'", d->kind);
    d->touched = res.touched;
    if (res.fenced) {
        /* A claim that lost its lease records nothing: whoever holds the row now does. */
        fprintf(stderr, "modelgated: push %s %s/%s generation %lld stopped: %s\n", d->gateway,
                d->model, d->alias, (long long)d->generation, res.error);
        srv_metrics_push_fenced(p->ctl->metrics);
        if (store_outbox_abort(p->ctl->store, d, &err) != MG_OK) {
            fprintf(stderr, "modelgated: push %s %s/%s: cannot let the lease go: %s\n", d->gateway,
                    d->model, d->alias, err.message);
            recorded = false;
        }
        check_waiters(p, false);
        return recorded;
    }
    if (!res.ok) {
        next = push_backoff_ms(&p->opt, d->attempts + 1, random_unit());
        if (res.retry_after_ms > next)
            next = res.retry_after_ms;
        next += store_clock_ms(p->ctl->store);
    }
    if (store_outbox_done(p->ctl->store, d, res.ok, res.error, next, &err) != MG_OK) {
        fprintf(stderr, "modelgated: push %s %s/%s: cannot record the outcome: %s\n", d->gateway,
                d->model, d->alias, err.message);
        recorded = false;
    }
    if (res.gone) {
        char reason[600];
        snprintf(reason, sizeof(reason), "disabled after the gateway answered 410 Gone: %s",
                 res.error);
        store_gateway_disable(p->ctl->store, d->gateway, reason, &err);
    }
    if (!res.ok) {
        const char *promo = json_string_value(json_object_get(d->payload, "promotion"));
        fprintf(stderr, "modelgated: push %s %s/%s generation %lld failed (attempt %d): %s\n",
                d->gateway, d->model, d->alias, (long long)d->generation, d->attempts + 1,
                res.error);
        /* A rollout step a gateway cannot apply, after retries, rolls the
         * promotion back (a no-op once the promotion is no longer rolling out). */
        if (promo && ad != NULL && ad->rollback_on_failure &&
            d->attempts + 1 >= PUSH_ROLLBACK_ATTEMPTS) {
            struct ctl_event ev = {.kind = CTL_EV_DELIVERY_FAILED,
                                   .promotion = promo,
                                   .gateway = d->gateway,
                                   .error = res.error};

            ctl_event_post(p->ctl, &ev);
        }
    }
    check_waiters(p, false);
    return recorded;
}

static void sleep_until(struct push *p, int64_t deadline_mono_ms)
{
    while (!p->stop && p->kicks == 0 && mg_wait_until(&p->wake, &p->lock, deadline_mono_ms))
        ;
}

static void *worker_main(void *arg)
{
    struct push *p = arg;
    struct orphans orphans = {.n = 0};

    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct store_delivery d;
        struct mg_error err;
        bool found = false;
        int64_t next = 0, now;

        if (p->kicks > 0)
            p->kicks--;
        pthread_mutex_unlock(&p->lock);
        now = store_clock_ms(p->ctl->store);
        orphans_release(p, &orphans);
        d.lease_token[0] = '\0';
        if (store_outbox_claim(p->ctl->store, now, LEASE_MS, &d, &found, &err) != MG_OK) {
            fprintf(stderr, "modelgated: push: cannot claim a delivery: %s\n", err.message);
            orphan_keep(&orphans, d.lease_token);
        } else if (found) {
            if (!deliver(p, &d))
                orphan_keep(&orphans, d.lease_token);
            store_delivery_release(&d);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        store_outbox_next_due(p->ctl->store, &next, &err);
        pthread_mutex_lock(&p->lock);
        if (p->stop || p->kicks > 0)
            continue;
        /* Until the next due row, a kick, or a second (rows written by other
         * replicas, expired leases). */
        if (next <= now || next > now + 1000)
            next = now + 1000;
        sleep_until(p, mg_mono_ms() + (next - now)); /* next is on the database's clock */
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *clock_main(void *arg)
{
    struct push *p = arg;

    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec ts = {0, WAIT_TICK_MS * 1000000L};
        bool any = p->waiters != NULL;

        pthread_mutex_unlock(&p->lock);
        if (any)
            check_waiters(p, false);
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* One pass of the reconciler: every in-sync row this replica answers for (push.h) is
 * compared with its gateway's live state; drift makes the row pending again (audited), and
 * the workers repair it. Host-less gateways are the leader's: their rows are marked only
 * under the leader epoch the pass started with (store_outbox_drift). */
static void reconcile(struct push *p)
{
    struct store_delivery *list = NULL;
    struct mg_error err;
    size_t n = 0, i;
    bool kicked = false;

    if (store_outbox_in_sync(p->ctl->store, store_leader_epoch(p->ctl->store), &list, &n, &err) !=
        MG_OK) {
        fprintf(stderr, "modelgated: reconcile: cannot list the deliveries: %s\n", err.message);
        return;
    }
    for (i = 0; i < n && !p->stop; i++) {
        const struct push_adapter *ad = push_adapter_of(list[i].kind);
        char why[400] = "";
        bool drift = false, marked = false;

        if (ad == NULL || ad->check == NULL)
            continue;
        if (strcmp(ad->kind, "nginx") == 0)
            pthread_mutex_lock(&p->nginx_lock); /* not while a delivery rewrites the file */
        if (!ad->check(&p->env, &list[i], &drift, why, sizeof(why)))
            drift = false; /* unreadable now: its next delivery or pass will tell */
        if (strcmp(ad->kind, "nginx") == 0)
            pthread_mutex_unlock(&p->nginx_lock);
        if (!drift)
            continue;
        if (store_outbox_drift(p->ctl->store, &list[i], why, &marked, &err) != MG_OK) {
            if (err.code == MG_EUNAVAIL)
                continue; /* no longer the leader: the new one's pass repairs it */
            fprintf(stderr, "modelgated: reconcile %s %s/%s: cannot record the drift: %s\n",
                    list[i].gateway, list[i].model, list[i].alias, err.message);
            continue;
        }
        if (!marked)
            continue;
        fprintf(stderr, "modelgated: reconcile %s %s/%s generation %lld: %s; delivering again\n",
                list[i].gateway, list[i].model, list[i].alias, (long long)list[i].generation, why);
        srv_metrics_gateway_drift(p->ctl->metrics);
        kicked = true;
    }
    for (i = 0; i < n; i++)
        store_delivery_release(&list[i]);
    free(list);
    if (kicked)
        pool_kick(p->ctl);
}

static void *reconciler_main(void *arg)
{
    struct push *p = arg;

    pthread_mutex_lock(&p->lock);
    while (mg_wait_sleep(&p->rwake, &p->lock, p->opt.reconcile_ms, &p->stop)) {
        pthread_mutex_unlock(&p->lock);
        reconcile(p);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static struct push *pool(struct ctl *ctl)
{
    return ctl->gw.impl;
}

static void pool_poke(struct ctl *ctl);
static void pool_wait(struct ctl *ctl, const char *model, const char *alias, int64_t gen,
                      int64_t deadline_ms, void (*wake)(void *arg), void *arg);
static enum mg_code pool_config_validate(struct ctl *ctl, const char *kind, const json_t *body,
                                         json_t **config, char **secret, struct mg_error *err);

enum mg_code push_register(struct ctl *ctl, const struct push_options *o, struct mg_error *err)
{
    struct push *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    p->ctl = ctl;
    p->opt = *o;
    p->env.allow = &p->opt.allow;
    p->env.nginx_lock = &p->nginx_lock;
    p->env.ctl = ctl;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->nginx_lock, NULL);
    mg_wait_init(&p->wake);
    mg_wait_init(&p->rwake);
    p->threads = calloc(o->workers ? o->workers : 1, sizeof(*p->threads));
    if (p->threads == NULL) {
        free(p);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    ctl->gw = (struct ctl_gateways){
        .impl = p,
        .kick = pool_kick,
        .poke = pool_poke,
        .wait = pool_wait,
        .alias_names = push_alias_names,
        .alias_check = push_alias_check,
        .gateway_check = push_gateway_check,
        .version_names = push_version_names,
        .config_validate = pool_config_validate,
    };
    return MG_OK;
}

enum mg_code push_start(struct ctl *ctl, struct mg_error *err)
{
    struct push *p = pool(ctl);
    unsigned i, workers;

    if (p == NULL)
        return mg_fail(err, MG_EINVAL, NULL, "push_start before push_register");
    workers = p->opt.workers ? p->opt.workers : 1;
    if (store_outbox_recover(ctl->store, 0, err) != MG_OK) {
        push_free(ctl);
        return err->code;
    }
    for (i = 0; i < workers; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0)
            break;
        p->nthreads++;
    }
    if (pthread_create(&p->clock, NULL, clock_main, p) == 0)
        p->clock_started = true;
    if (p->opt.reconcile_ms > 0 && pthread_create(&p->reconciler, NULL, reconciler_main, p) == 0)
        p->reconciler_started = true;
    if (p->nthreads == 0 || !p->clock_started) {
        push_free(ctl);
        return mg_fail(err, MG_EIO, NULL, "cannot start the push workers");
    }
    return MG_OK;
}

void push_stop(struct ctl *ctl)
{
    struct push *p = pool(ctl);
    unsigned i;

    if (p == NULL)
        return;
    check_waiters(p, true);
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->wake.cond);
    pthread_cond_broadcast(&p->rwake.cond);
    pthread_mutex_unlock(&p->lock);
    for (i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    if (p->clock_started)
        pthread_join(p->clock, NULL);
    if (p->reconciler_started)
        pthread_join(p->reconciler, NULL);
    p->nthreads = 0;
    p->clock_started = false;
    p->reconciler_started = false;
}

void push_free(struct ctl *ctl)
{
    struct push *p = pool(ctl);

    if (p == NULL)
        return;
    push_stop(ctl);
    check_waiters(p, true);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->nginx_lock);
    mg_wait_release(&p->wake);
    mg_wait_release(&p->rwake);
    free(p->threads);
    free(p);
    memset(&ctl->gw, 0, sizeof(ctl->gw));
}

static void pool_kick(struct ctl *ctl)
{
    struct push *p = pool(ctl);

    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->kicks++;
    pthread_cond_signal(&p->wake.cond);
    pthread_mutex_unlock(&p->lock);
}

static void pool_poke(struct ctl *ctl)
{
    if (pool(ctl) == NULL)
        return;
    pool_kick(ctl);
    check_waiters(pool(ctl), false);
}

static void pool_wait(struct ctl *ctl, const char *model, const char *alias, int64_t gen,
                      int64_t deadline_ms, void (*wake)(void *arg), void *arg)
{
    struct push *p = pool(ctl);
    struct waiter *w = calloc(1, sizeof(*w));

    if (p == NULL || w == NULL || p->stop) {
        free(w);
        wake(arg);
        return;
    }
    w->wake = wake;
    w->arg = arg;
    snprintf(w->model, sizeof(w->model), "%s", model);
    snprintf(w->alias, sizeof(w->alias), "%s", alias);
    w->gen = gen;
    w->deadline = deadline_ms;
    pthread_mutex_lock(&p->lock);
    w->next = p->waiters;
    p->waiters = w;
    pthread_mutex_unlock(&p->lock);
    check_waiters(p, false); /* maybe already in sync */
}

/* ---- configuration ----------------------------------------------------- */

static bool names_ok(const json_t *v, size_t max, bool (*ok)(const char *, size_t))
{
    json_t *x;
    size_t i;

    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > max)
        return false;
    json_array_foreach(v, i, x)
    {
        if (!json_is_string(x) || !ok(json_string_value(x), json_string_length(x)))
            return false;
    }
    return true;
}

static bool host_name_ok(const char *h, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
              (h[i] >= '0' && h[i] <= '9') || h[i] == '-' || h[i] == '.' || h[i] == '_'))
            return false;
    }
    return true;
}

/*
 * "host" (any kind): only the replica on that host (its --host-name) delivers to the
 * gateway. A gateway that writes on the delivering host itself (nginx's include file,
 * HAProxy's unix socket) needs one when replicas share the database: otherwise any
 * replica, on any host, could deliver it.
 */
static enum mg_code with_host(const struct push_env *env, const char *kind,
                              const struct push_adapter *ad, const json_t *body, json_t **config,
                              char **secret, struct mg_error *err)
{
    json_t *host = json_object_get(body, "host"), *rest;
    const char *addr = json_string_value(json_object_get(body, "address"));
    bool local = strcmp(kind, "nginx") == 0 ||
                 (strcmp(kind, "haproxy") == 0 && addr && strncmp(addr, "unix:", 5) == 0);
    enum mg_code rc;

    if (host &&
        (!json_is_string(host) || !host_name_ok(json_string_value(host), json_string_length(host))))
        return mg_fail(err, MG_EINVAL, "host",
                       "host is the host name of the replica that delivers this gateway "
                       "(its --host-name): letters, digits, '-', '.', '_'");
    if ((rest = json_deep_copy(body)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_object_del(rest, "host");
    rc = ad->validate(env, rest, config, secret, err);
    json_decref(rest);
    if (rc != MG_OK)
        return rc;
    if (local && host == NULL && env->ctl && env->ctl->cfg && env->ctl->cfg->database)
        rc = mg_fail(err, MG_EINVAL, "host",
                     "an %s gateway changes files or sockets on the host that delivers it, and "
                     "with --database postgresql any replica may deliver it: add \"host\": the "
                     "--host-name of the replica on the gateway's host",
                     kind);
    else if (host && json_object_set(*config, "host", host) != 0)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (rc != MG_OK) {
        json_decref(*config);
        *config = NULL;
        free(*secret);
        *secret = NULL;
    }
    return rc;
}

enum mg_code push_config_validate(const struct push_env *env, const char *kind, const json_t *body,
                                  json_t **config, char **secret, struct mg_error *err)
{
    const struct push_adapter *ad;
    json_t *v;

    *secret = NULL;
    /* The filters mean the same for every kind. */
    if ((v = json_object_get(body, "models")) && !names_ok(v, 256, mg_valid_model_name))
        return mg_fail(err, MG_EINVAL, "models",
                       "models must be a non-empty array of model names (or absent for all)");
    if ((v = json_object_get(body, "aliases")) && !names_ok(v, 64, mg_valid_alias_name))
        return mg_fail(err, MG_EINVAL, "aliases",
                       "aliases must be a non-empty array of alias names (or absent for all)");
    if ((ad = push_adapter_of(kind)) == NULL || ad->validate == NULL)
        return mg_fail(err, MG_EINVAL, "kind", "kind is webhook, haproxy or nginx");
    return with_host(env, kind, ad, body, config, secret, err);
}

static enum mg_code pool_config_validate(struct ctl *ctl, const char *kind, const json_t *body,
                                         json_t **config, char **secret, struct mg_error *err)
{
    return push_config_validate(&pool(ctl)->env, kind, body, config, secret, err);
}

/* The built-in "runner" kind: the tests the generation implies are queued with whoever
 * registered as the runner (control.h), never named here. */
static void runner_deliver(const struct push_env *env, const struct store_delivery *d,
                           struct push_result *res)
{
    struct mg_error err;

    res->ok = ctl_runner_enqueue_routes(env->ctl, d->model, d->alias, d->payload, &err) == MG_OK;
    if (!res->ok)
        snprintf(res->error, sizeof(res->error), "%s", err.message);
}

static const struct push_adapter adapters[] = {
    {"webhook", push_webhook_validate, push_webhook_deliver, true, NULL},
    {"haproxy", push_haproxy_validate, push_haproxy_deliver, true, push_haproxy_check},
    {"nginx", push_nginx_validate, push_nginx_deliver, true, push_nginx_check},
    /* built in, never PUT: acknowledged once the implied tests are queued (?wait does not
     * wait for a smoke test), and its trouble rolls nothing back */
    {"runner", NULL, runner_deliver, false, NULL},
};

const struct push_adapter *push_adapter_of(const char *kind)
{
    for (size_t i = 0; kind != NULL && i < sizeof(adapters) / sizeof(adapters[0]); i++)
        if (strcmp(adapters[i].kind, kind) == 0)
            return &adapters[i];
    return NULL;
}

bool push_expand(const char *tmpl, const char *model, const char *alias, int64_t version, char *out,
                 size_t outsz)
{
    struct mg_buf b;
    const char *p = tmpl;
    bool ok = true;

    mg_buf_init(&b, outsz - 1);
    while (*p && ok) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            char num[24];
            if (e == NULL)
                return mg_buf_release(&b), false;
            if ((size_t)(e - p) == 6 && strncmp(p, "{model", 6) == 0) {
                ok = mg_buf_puts(&b, model) == MG_OK;
            } else if ((size_t)(e - p) == 6 && strncmp(p, "{alias", 6) == 0) {
                ok = mg_buf_puts(&b, alias) == MG_OK;
            } else if ((size_t)(e - p) == 8 && strncmp(p, "{version", 8) == 0) {
                snprintf(num, sizeof(num), "%lld", (long long)version);
                ok = mg_buf_puts(&b, num) == MG_OK;
            } else {
                ok = false;
            }
            p = e + 1;
        } else {
            ok = mg_buf_append(&b, p++, 1) == MG_OK;
        }
    }
    if (ok)
        snprintf(out, outsz, "%s", b.data ? b.data : "");
    mg_buf_release(&b);
    return ok;
}
