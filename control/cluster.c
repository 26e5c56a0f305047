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

#include <openssl/crypto.h>

#include "../os/wait.h"
#include "../artifact/sign.h"
#include "../os/file.h"
#include "release.h"

/* How many heartbeats apart a replica asks which key the cluster signs with, when no
 * notification of a rotation reached it. */
#define KEYS_POLL_BEATS 5
/* Keyrings a replica can take on in one run (rotations; the first is main's). */
#define KEYRINGS_MAX 64

struct ctl_cluster {
    pthread_t thread, listener;
    bool listening;
    pthread_mutex_t lock;
    struct mg_wait wake;
    bool stop, was_leader;
    unsigned beats;
    char address[300];
    /* Keyrings taken on from the cluster (ctl_keys_follow): readers may still hold any
     * of them, so they live until the cluster stops. */
    pthread_mutex_t keys_lock;
    const struct sign_keyring *first_keys; /* main's */
    struct sign_keyring *followed[KEYRINGS_MAX];
    unsigned nfollowed;
};

/* Every replica publishes the key it signs with: all of them list and verify it. */
static void publish_key(struct ctl *ctl)
{
    const struct sign_keyring *keys = ctl->keys;
    struct mg_error err;

    if (ctl->cfg->database && keys && keys->active &&
        store_signing_key_publish(ctl->store, keys->active->keyid, keys->active->hint,
                                  keys->active->public_pem, &err) != MG_OK)
        fprintf(stderr, "modelgated: publish the signing key: %s\n", err.message);
}

void ctl_keys_follow(struct ctl *ctl)
{
    struct ctl_cluster *cl = ctl->cluster;
    const struct sign_keyring *keys;
    struct sign_keyring *kr = NULL;
    char keyid[65], path[4096], *pem = NULL;
    struct mg_error err;

    if (cl == NULL || ctl->cfg->database == NULL || ctl->cfg->signing_key != NULL)
        return; /* one process, or a key the operator gives every replica */
    pthread_mutex_lock(&cl->keys_lock);
    if (store_signing_key_current(ctl->store, keyid, &pem, &err) != MG_OK) {
        if (err.code != MG_EUNAVAIL)
            fprintf(stderr, "modelgated: the cluster's signing key: %s\n", err.message);
        goto out;
    }
    keys = ctl->keys;
    if (keys && keys->active && strcmp(keys->active->keyid, keyid) == 0)
        goto out;
    if (cl->nfollowed == KEYRINGS_MAX) {
        fprintf(stderr,
                "modelgated: the cluster's signing key changed %u times since this "
                "replica started; restart it to sign with %s\n",
                KEYRINGS_MAX, keyid);
        goto out;
    }
    snprintf(path, sizeof(path), "%s/cluster-signing-key.pem", ctl->cfg->data_dir);
    if (mg_file_write_atomic(path, pem, strlen(pem), 0600, &err) != MG_OK ||
        sign_keyring_load(ctl->cfg->data_dir, path, false, &kr, &err) != MG_OK) {
        fprintf(stderr, "modelgated: the cluster's signing key %s: %s\n", keyid, err.message);
        goto out;
    }
    if (strcmp(kr->active->keyid, keyid) != 0) { /* the row's keyid is not its key's */
        fprintf(stderr, "modelgated: the cluster's signing key %s holds key %s; not used\n", keyid,
                kr->active->keyid);
        sign_keyring_free(&kr);
        goto out;
    }
    cl->followed[cl->nfollowed++] = kr;
    store_set_keys(ctl->store, kr); /* new versions are signed with it from here on */
    ctl->keys = kr;
    fprintf(stderr, "modelgated: signing with the cluster's key %s from now on\n", keyid);
    publish_key(ctl);
out:
    pthread_mutex_unlock(&cl->keys_lock);
    if (pem)
        OPENSSL_cleanse(pem, strlen(pem));
    free(pem);
}

static void beat(struct ctl *ctl, struct ctl_cluster *cl)
{
    struct mg_error err;

    if (store_replica_heartbeat(ctl->store, cl->address, PROJECT_VERSION_TEXT, &err) != MG_OK) {
        fprintf(stderr, "modelgated: heartbeat: %s\n", err.message);
        return;
    }
    if (++cl->beats % KEYS_POLL_BEATS == 0)
        ctl_keys_follow(ctl); /* a rotation whose notification was lost */
    publish_key(ctl);
    int64_t epoch = store_leader_epoch(ctl->store);

    if (epoch == 0) {
        cl->was_leader = false;
        return;
    }
    if (!cl->was_leader && ctl->cfg->database)
        fprintf(stderr, "modelgated: replica %s leads the cluster's timers now\n",
                store_replica_id(ctl->store));
    cl->was_leader = true;
    /* Work a dead replica held: its tests run again, its deliveries go out again. Each
     * sweep commits only while this replica still leads at this epoch; one that lost the
     * lease since (MG_EUNAVAIL) leaves the sweep to the new leader, quietly. */
    if (store_smoke_recover(ctl->store, epoch, &err) == MG_OK)
        ctl_runner_kick(ctl);
    else if (err.code != MG_EUNAVAIL)
        fprintf(stderr, "modelgated: requeue a dead replica's smoke tests: %s\n", err.message);
    if (store_outbox_recover(ctl->store, epoch, &err) == MG_OK)
        ctl_gateways_kick(ctl);
    else if (err.code != MG_EUNAVAIL)
        fprintf(stderr, "modelgated: release a dead replica's deliveries: %s\n", err.message);
}

static void *cluster_main(void *arg)
{
    struct ctl *ctl = arg;
    struct ctl_cluster *cl = ctl->cluster;

    pthread_mutex_lock(&cl->lock);
    while (mg_wait_sleep(&cl->wake, &cl->lock, SRV_HEARTBEAT_MS, &cl->stop)) {
        pthread_mutex_unlock(&cl->lock);
        beat(ctl, cl);
        pthread_mutex_lock(&cl->lock);
    }
    pthread_mutex_unlock(&cl->lock);
    return NULL;
}

/* PostgreSQL: other replicas' outbox changes wake this one's workers and waiters, a
 * rotation of the cluster's signing key is followed at once, and the response cache
 * hears other replicas' changes (store_wait_change). */
static void *listen_main(void *arg)
{
    struct ctl *ctl = arg;
    struct ctl_cluster *cl = ctl->cluster;

    for (;;) {
        struct store_wake wake;
        struct mg_error err;
        bool stop;

        pthread_mutex_lock(&cl->lock);
        stop = cl->stop;
        pthread_mutex_unlock(&cl->lock);
        if (stop)
            break;
        if (store_wait_change(ctl->store, 200, &wake, &err) != MG_OK) {
            struct timespec ts = {0, 200000000L}; /* the database is away: poll slowly */

            nanosleep(&ts, NULL);
            continue;
        }
        if (wake.outbox)
            ctl_gateways_poke(ctl);
        if (wake.keys)
            ctl_keys_follow(ctl);
    }
    return NULL;
}

enum mg_code ctl_cluster_start(struct ctl *ctl, struct mg_error *err)
{
    struct ctl_cluster *cl = calloc(1, sizeof(*cl));
    const char *listen = ctl->cfg->listen ? ctl->cfg->listen : "127.0.0.1";
    int host_len =
        (int)(strrchr(listen, ':') ? strrchr(listen, ':') - listen : (long)strlen(listen));

    if (cl == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (ctl->cfg->public_url)
        snprintf(cl->address, sizeof(cl->address), "%s", ctl->cfg->public_url);
    else
        snprintf(cl->address, sizeof(cl->address), "%s://%.*s:%u", ctl->tls ? "https" : "http",
                 host_len, listen, (unsigned)ctl->port);
    pthread_mutex_init(&cl->lock, NULL);
    mg_wait_init(&cl->wake);
    pthread_mutex_init(&cl->keys_lock, NULL);
    cl->first_keys = ctl->keys;
    ctl->cluster = cl;
    if (!ctl->cache_on)
        store_cache_off(ctl->store); /* nothing cached here: no lease to hold writes up */
    if (store_replica_heartbeat(ctl->store, cl->address, PROJECT_VERSION_TEXT, err) != MG_OK ||
        pthread_create(&cl->thread, NULL, cluster_main, ctl) != 0) {
        if (err->code == MG_OK)
            mg_fail(err, MG_EIO, NULL, "cannot start the heartbeat thread");
        pthread_mutex_destroy(&cl->lock);
        mg_wait_release(&cl->wake);
        pthread_mutex_destroy(&cl->keys_lock);
        free(cl);
        ctl->cluster = NULL;
        return err->code;
    }
    cl->was_leader = store_leader(ctl->store);
    if (ctl->cfg->database && pthread_create(&cl->listener, NULL, listen_main, ctl) == 0)
        cl->listening = true;
    return MG_OK;
}

void ctl_cluster_stop(struct ctl *ctl)
{
    struct ctl_cluster *cl = ctl->cluster;
    struct mg_error err;

    if (cl == NULL)
        return;
    pthread_mutex_lock(&cl->lock);
    cl->stop = true;
    pthread_cond_signal(&cl->wake.cond);
    pthread_mutex_unlock(&cl->lock);
    pthread_join(cl->thread, NULL);
    if (store_leader_resign(ctl->store, &err) != MG_OK)
        fprintf(stderr, "modelgated: give the leadership up: %s\n", err.message);
    /* No request is served any more: writes on the other replicas need not wait for this
     * one to hear them while it goes (its lease would run out by itself, holding them up). */
    store_cache_off(ctl->store);
    if (cl->listening)
        pthread_join(cl->listener, NULL);
    if (cl->nfollowed > 0) { /* main frees the keyring it gave */
        store_set_keys(ctl->store, cl->first_keys);
        ctl->keys = cl->first_keys;
    }
    for (unsigned i = 0; i < cl->nfollowed; i++)
        sign_keyring_free(&cl->followed[i]);
    pthread_mutex_destroy(&cl->lock);
    mg_wait_release(&cl->wake);
    pthread_mutex_destroy(&cl->keys_lock);
    free(cl);
    ctl->cluster = NULL;
}
