/*
 * cluster.c - the heartbeat thread (see cluster.h).
 */
#include "cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../artifact/sign.h"
#include "push/push.h"
#include "release.h"
#include "runner/runner.h"

struct srv_cluster {
    pthread_t thread, listener;
    bool listening;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop, was_leader;
    char address[300];
};

static void beat(struct srv *srv, struct srv_cluster *cl)
{
    struct mg_error err;

    if (store_replica_heartbeat(srv->store, cl->address, PROJECT_VERSION_TEXT, &err) != MG_OK) {
        fprintf(stderr, "modelgated: heartbeat: %s\n", err.message);
        return;
    }
    /* Every replica publishes the key it signs with: all of them list and verify it. */
    if (srv->cfg->database && srv->keys && srv->keys->active &&
        store_signing_key_publish(srv->store, srv->keys->active->keyid, srv->keys->active->hint,
                                  srv->keys->active->public_pem, &err) != MG_OK)
        fprintf(stderr, "modelgated: publish the signing key: %s\n", err.message);
    if (!store_leader(srv->store)) {
        cl->was_leader = false;
        return;
    }
    if (!cl->was_leader && srv->cfg->database)
        fprintf(stderr, "modelgated: replica %s leads the cluster's timers now\n",
                store_replica_id(srv->store));
    cl->was_leader = true;
    /* Work a dead replica held: its tests run again, its deliveries go out again. */
    if (store_smoke_recover(srv->store, &err) != MG_OK)
        fprintf(stderr, "modelgated: requeue a dead replica's smoke tests: %s\n", err.message);
    else
        runner_kick(srv);
    if (store_outbox_recover(srv->store, &err) != MG_OK)
        fprintf(stderr, "modelgated: release a dead replica's deliveries: %s\n", err.message);
    else
        push_kick(srv);
}

static void *cluster_main(void *arg)
{
    struct srv *srv = arg;
    struct srv_cluster *cl = srv->cluster;

    pthread_mutex_lock(&cl->lock);
    while (!cl->stop) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)SRV_HEARTBEAT_MS % 1000 * 1000000L;
        ts.tv_sec += SRV_HEARTBEAT_MS / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        while (!cl->stop && pthread_cond_timedwait(&cl->cond, &cl->lock, &ts) != ETIMEDOUT)
            ;
        if (cl->stop)
            break;
        pthread_mutex_unlock(&cl->lock);
        beat(srv, cl);
        pthread_mutex_lock(&cl->lock);
    }
    pthread_mutex_unlock(&cl->lock);
    return NULL;
}

/* PostgreSQL: other replicas' outbox changes wake this one's workers and waiters, and
 * the response cache hears other replicas' changes (store_wait_change). */
static void *listen_main(void *arg)
{
    struct srv *srv = arg;
    struct srv_cluster *cl = srv->cluster;

    for (;;) {
        struct store_wake wake;
        struct mg_error err;
        bool stop;

        pthread_mutex_lock(&cl->lock);
        stop = cl->stop;
        pthread_mutex_unlock(&cl->lock);
        if (stop)
            break;
        if (store_wait_change(srv->store, 200, &wake, &err) != MG_OK) {
            struct timespec ts = {0, 200000000L}; /* the database is away: poll slowly */

            nanosleep(&ts, NULL);
            continue;
        }
        if (wake.outbox)
            push_poke(srv);
    }
    return NULL;
}

enum mg_code srv_cluster_start(struct srv *srv, struct mg_error *err)
{
    struct srv_cluster *cl = calloc(1, sizeof(*cl));
    const char *listen = srv->cfg->listen ? srv->cfg->listen : "127.0.0.1";
    int host_len =
        (int)(strrchr(listen, ':') ? strrchr(listen, ':') - listen : (long)strlen(listen));

    if (cl == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (srv->cfg->public_url)
        snprintf(cl->address, sizeof(cl->address), "%s", srv->cfg->public_url);
    else
        snprintf(cl->address, sizeof(cl->address), "%s://%.*s:%u", srv->tls ? "https" : "http",
                 host_len, listen, (unsigned)srv->port);
    pthread_mutex_init(&cl->lock, NULL);
    pthread_cond_init(&cl->cond, NULL);
    srv->cluster = cl;
    if (srv->cache == NULL)
        store_cache_off(srv->store); /* nothing cached here: no lease to hold writes up */
    if (store_replica_heartbeat(srv->store, cl->address, PROJECT_VERSION_TEXT, err) != MG_OK ||
        pthread_create(&cl->thread, NULL, cluster_main, srv) != 0) {
        if (err->code == MG_OK)
            mg_fail(err, MG_EIO, NULL, "cannot start the heartbeat thread");
        pthread_mutex_destroy(&cl->lock);
        pthread_cond_destroy(&cl->cond);
        free(cl);
        srv->cluster = NULL;
        return err->code;
    }
    cl->was_leader = store_leader(srv->store);
    if (srv->cfg->database && pthread_create(&cl->listener, NULL, listen_main, srv) == 0)
        cl->listening = true;
    return MG_OK;
}

void srv_cluster_stop(struct srv *srv)
{
    struct srv_cluster *cl = srv->cluster;

    if (cl == NULL)
        return;
    pthread_mutex_lock(&cl->lock);
    cl->stop = true;
    pthread_cond_signal(&cl->cond);
    pthread_mutex_unlock(&cl->lock);
    pthread_join(cl->thread, NULL);
    /* No request is served any more: writes on the other replicas need not wait for this
     * one to hear them while it goes (its lease would run out by itself, holding them up). */
    store_cache_off(srv->store);
    if (cl->listening)
        pthread_join(cl->listener, NULL);
    pthread_mutex_destroy(&cl->lock);
    pthread_cond_destroy(&cl->cond);
    free(cl);
    srv->cluster = NULL;
}
