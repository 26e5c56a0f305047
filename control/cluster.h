/*
 * cluster.h - this process as one replica among those on a shared database:
 * a heartbeat thread that keeps it registered (and the clock and leadership
 * fresh, store_replica_heartbeat), and, while this replica leads, queues
 * again the work of replicas that died.
 */
#ifndef SRV_CLUSTER_H
#define SRV_CLUSTER_H

#include "control.h"

/* How often the heartbeat beats. */
#define SRV_HEARTBEAT_MS 1000

/* Beat once (so the replica is registered before any worker takes a lease),
 * then start the thread. */
enum mg_code ctl_cluster_start(struct ctl *ctl, struct mg_error *err);

/* Stop the thread (the replica's row ages out by itself). Safe when not started.
 * ctl->keys is the keyring it started with again. */
void ctl_cluster_stop(struct ctl *ctl);

/* PostgreSQL without --signing-key: sign with the cluster's current key (the
 * newest activated, store_signing_key_current) from now on if it is not the one
 * in use. Called when a rotation is announced, and every few heartbeats. */
void ctl_keys_follow(struct ctl *ctl);

#endif
