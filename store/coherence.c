/*
 * coherence.c - keeping response caches current across replicas.
 *
 * Every committed change of a model moves the model's epoch (store_model_bump: each write
 * names the model it changed to its audit append, or bumps each of several models itself);
 * a cached answer built under epoch E is served while its model is still at E. With
 * SQLite one process writes, so its own commits are all there is. With PostgreSQL
 * other replicas write too, and a cached answer must never be older than a write that
 * returned on any replica before the read began. Asking the database on every read
 * would keep that promise at a round trip per read; instead a replica answers from
 * memory while it holds a cache lease:
 *
 *  - Epochs are the numbers of one database sequence (model_epochs.seq); each
 *    change's transaction NOTIFYs "c <seq> <writer> <model>". Writers hold one
 *    advisory lock, so sequence numbers, commits and notifications all come in one
 *    order.
 *  - A replica's listener applies those to its epoch slots. Once it has read the
 *    database after its LISTEN began (a baseline), every later change reaches it
 *    in order, so "every change up to N is applied" (ep_seen) is true; when another
 *    replica's change was among them it acknowledges N with a NOTIFY "a <id> <N>",
 *    and its heartbeat writes N to its replicas row (cache_seen).
 *  - At each heartbeat, while its listener is sound (a baseline taken, and the
 *    previous heartbeat's echo "e <id> <n>" came back), a replica renews its
 *    lease: replicas.cache_until_ms = the database's clock + STORE_CACHE_LEASE_MS,
 *    inside a write transaction, so under the writers' lock. Once that commits it
 *    reads the epochs again, and serves from memory until the time the renewal
 *    was sent plus the lease less a margin, by CLOCK_BOOTTIME (a stopped or
 *    suspended process finds its lease gone when it wakes).
 *  - A write that moved an epoch learns, under the writers' lock, whether any
 *    other replica holds a live lease. If one does, after its commit it waits
 *    until each such replica acknowledged its sequence number or its lease ran
 *    out (judged by the database's clock at a statement that began after the
 *    commit), and at most STORE_CACHE_LEASE_MS plus the margin after the commit
 *    (any lease alive then was renewed after the commit, and a renewal reads the
 *    epochs after it commits).
 *  - A replica whose listener fails, changes session or stops hearing its own
 *    echoes drops its lease at once and asks the database on every read (the
 *    shared refresh below) until it has a baseline and a renewed lease again.
 *
 * So a read that begins after a write returned finds either the write's epoch
 * already applied here, or no lease and a read of the database.
 */
#include "store_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/util.h"

/* What this file keeps for a store: the model epochs, their refresh, the cache lease and
 * what other replicas acknowledged, and the open write's touched slots. */
struct store_coherence {
    _Atomic uint64_t model_epochs[STORE_EPOCH_SLOTS];
    /* PostgreSQL: refreshes of model_epochs shared by concurrent readers (coherence.c). */
    pthread_mutex_t ep_lock;
    pthread_cond_t ep_cond;
    uint64_t ep_started, ep_done; /* refreshes begun, and finished */
    bool ep_running;
    enum mg_code ep_rc;      /* the last refresh's outcome */
    _Atomic int64_t ep_seen; /* every change up to this model_epochs.seq is applied here */
    /* PostgreSQL: the cache lease and the listener that keeps it (coherence.c). */
    _Atomic int64_t cache_lease_until;    /* CLOCK_BOOTTIME ms; before it, no read asks */
    _Atomic int64_t ep_acked;             /* the highest ep_seen written to replicas.cache_seen */
    _Atomic uint64_t sync_waits, sync_us; /* writes that waited for others, and how long */
    pthread_mutex_t coh_lock;             /* guards what follows */
    struct mg_wait ack_wait;              /* another replica acknowledged (acked) */
    struct {
        char id[STORE_REPLICA_ID_LEN + 1];
        int64_t seq; /* the newest sequence number it acknowledged */
        uint64_t at; /* acks_heard then */
    } acked[64];
    size_t nacked;
    uint64_t acks_heard;
    uint64_t coh_gen;                         /* moves whenever the lease is dropped */
    unsigned listen_session;                  /* notify_conn's session with a baseline */
    bool listen_ok;                           /* ... and nothing says it stopped hearing */
    bool listen_stale;                        /* the listener is to start a new session */
    bool cache_off;                           /* store_cache_off: no lease from now on */
    uint64_t echo_next, echo_want, echo_seen; /* heartbeat echoes: sent, committed, heard */
    /* The open write transaction (the writer's, under wlock). */
    unsigned touched[16]; /* epoch slots it moves */
    unsigned ntouched;
    bool touched_all;
    int64_t w_seq; /* PostgreSQL: its highest model_epochs.seq */
    bool w_others; /* ... and another replica held a cache lease then */
};

enum mg_code store_coherence_open(struct store *st, struct mg_error *err)
{
    struct store_coherence *coh = calloc(1, sizeof(*coh));

    if (coh == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&coh->ep_lock, NULL);
    pthread_cond_init(&coh->ep_cond, NULL);
    pthread_mutex_init(&coh->coh_lock, NULL);
    mg_wait_init(&coh->ack_wait);
    st->coh = coh;
    return MG_OK;
}

void store_coherence_close(struct store *st)
{
    struct store_coherence *coh = st->coh;

    if (coh == NULL)
        return;
    pthread_mutex_destroy(&coh->ep_lock);
    pthread_cond_destroy(&coh->ep_cond);
    pthread_mutex_destroy(&coh->coh_lock);
    mg_wait_release(&coh->ack_wait);
    free(coh);
    st->coh = NULL;
}

/* The margin a replica keeps from its lease's end, and a writer adds to it: clocks of
 * two hosts run at slightly different rates. */
#define CACHE_MARGIN_MS 300
/* How often a waiting writer asks again when no acknowledgement wakes it. */
#define CACHE_POLL_MS 50

/* Milliseconds on a clock that never goes back and counts time suspended. */
static int64_t boot_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void atomic_max(_Atomic int64_t *v, int64_t x)
{
    int64_t cur = atomic_load(v);

    while (cur < x && !atomic_compare_exchange_weak(v, &cur, x))
        ;
}

static void slot_max(_Atomic uint64_t *slot, uint64_t x)
{
    uint64_t cur = atomic_load(slot);

    while (cur < x && !atomic_compare_exchange_weak(slot, &cur, x))
        ;
}

static unsigned epoch_slot(const char *model)
{
    return mg_fnv1a(model) % STORE_EPOCH_SLOTS;
}

/* ---- writes ------------------------------------------------------------------ */

static void model_touched(struct store *st, const char *model)
{
    if (st->coh->ntouched < sizeof(st->coh->touched) / sizeof(st->coh->touched[0]))
        st->coh->touched[st->coh->ntouched++] = epoch_slot(model);
    else
        st->coh->touched_all = true;
}

enum mg_code store_model_bump(struct db_conn *c, const char *model, struct mg_error *err)
{
    static const char sql[] = "INSERT INTO model_epochs (model, epoch) VALUES (?, 1) "
                              "ON CONFLICT (model) DO UPDATE SET epoch = model_epochs.epoch + 1";
    /* The change's sequence number, its notification, and whether another replica
     * holds a cache lease now: leases are renewed under the writers' lock, which this
     * transaction holds, so none is renewed before it commits. */
    static const char sql_pg[] =
        "WITH b AS (INSERT INTO model_epochs (model, epoch, seq) "
        "VALUES (?1, 1, nextval('model_epoch_seq')) ON CONFLICT (model) DO UPDATE "
        "SET epoch = model_epochs.epoch + 1, seq = excluded.seq RETURNING seq) "
        "SELECT b.seq, pg_notify('mg_change', 'c ' || b.seq || ' ' || ?2 || ' ' || ?1), "
        "(SELECT count(*) FROM replicas WHERE id <> ?2 AND cache_until_ms > "
        "(extract(epoch FROM statement_timestamp()) * 1000)::bigint) FROM b";
    struct store *st = db_context(c);
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    if (st == NULL) /* only a store's writer changes models (its replicas wait for it) */
        return mg_fail(err, MG_EINVAL, NULL, "model '%s' changed outside a store", model);
    model_touched(st, model);
    if (db_dialect(c) == DB_SQLITE) {
        s = db_prepare(c, sql);
        db_bind_text(s, 1, model);
        return db_exec(s, err);
    }
    s = db_prepare(c, sql_pg);
    db_bind_text(s, 1, model);
    db_bind_text(s, 2, st->replica_id);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_EDB, NULL, "database error: no epoch for model '%s'", model);
    if (db_col_i64(s, 0) > st->coh->w_seq)
        st->coh->w_seq = db_col_i64(s, 0);
    if (db_col_i64(s, 2) > 0)
        st->coh->w_others = true;
    db_reset(s);
    return MG_OK;
}

int64_t store_epochs_commit(struct store *st, bool committed)
{
    int64_t wait = 0;
    uint64_t to;
    unsigned i;

    if (st->database) {
        /* Our own cache is stale at once; other replicas hear it from the database. */
        to = (uint64_t)st->coh->w_seq;
        if (committed && st->coh->w_seq > 0) {
            for (i = 0; i < (st->coh->touched_all ? STORE_EPOCH_SLOTS : st->coh->ntouched); i++)
                slot_max(&st->coh->model_epochs[st->coh->touched_all ? i : st->coh->touched[i]],
                         to);
            if (st->coh->w_others)
                wait = st->coh->w_seq;
        }
    } else if (committed && st->coh->touched_all) {
        for (i = 0; i < STORE_EPOCH_SLOTS; i++)
            atomic_fetch_add(&st->coh->model_epochs[i], 1);
    } else if (committed) {
        for (i = 0; i < st->coh->ntouched; i++)
            atomic_fetch_add(&st->coh->model_epochs[st->coh->touched[i]], 1);
    }
    st->coh->ntouched = 0;
    st->coh->touched_all = false;
    st->coh->w_seq = 0;
    st->coh->w_others = false;
    return wait;
}

/* Whether every replica in ids (n of them) acknowledged seq, by what the listener heard
 * (acks_heard). Under coh_lock. */
static bool all_acked(struct store *st, char (*ids)[STORE_REPLICA_ID_LEN + 1], size_t n,
                      int64_t seq)
{
    for (size_t i = 0; i < n; i++) {
        size_t k;

        for (k = 0; k < st->coh->nacked; k++) {
            if (strcmp(st->coh->acked[k].id, ids[i]) == 0)
                break;
        }
        if (k == st->coh->nacked || st->coh->acked[k].seq < seq)
            return false;
    }
    return true;
}

void store_cache_sync(struct store *st, int64_t seq)
{
    static const char sql[] =
        "SELECT id FROM replicas WHERE id <> ? AND cache_seen < ? AND cache_until_ms > "
        "(extract(epoch FROM statement_timestamp()) * 1000)::bigint LIMIT 64";
    int64_t start = boot_ms(), until = start + STORE_CACHE_LEASE_MS + CACHE_MARGIN_MS, now;
    char ids[64][STORE_REPLICA_ID_LEN + 1];

    for (;;) {
        struct mg_error err;
        struct db_conn *c;
        struct db_stmt *s;
        enum mg_code rc;
        size_t n = 0;
        bool row, done;

        /* Who holds a live lease and has not acknowledged seq, by the database's clock. */
        c = store_read_one(st);
        s = db_prepare(c, sql);
        db_bind_text(s, 1, st->replica_id);
        db_bind_i64(s, 2, seq);
        while ((rc = db_step(s, &row, &err)) == MG_OK && row)
            snprintf(ids[n++], sizeof(ids[0]), "%s", db_col_text(s, 0));
        store_read_end(st, c);
        if ((rc == MG_OK && n == 0) || (now = boot_ms()) >= until)
            break; /* at until, every lease alive was renewed after the commit */
        /* Their acknowledgements as the listener hears them; the database again after a
         * while (a lease may run out, a notification be lost). */
        pthread_mutex_lock(&st->coh->coh_lock);
        for (;;) {
            int64_t ms = until - now < CACHE_POLL_MS ? until - now : CACHE_POLL_MS;

            if ((done = rc == MG_OK && all_acked(st, ids, n, seq)))
                break;
            /* until and now are on CLOCK_BOOTTIME (a suspend counts); the wait itself is
             * at most CACHE_POLL_MS, which the monotonic clock measures well enough. */
            if (!mg_wait_until(&st->coh->ack_wait, &st->coh->coh_lock, mg_mono_ms() + ms))
                break;
            now = boot_ms();
        }
        pthread_mutex_unlock(&st->coh->coh_lock);
        if (done)
            break;
    }
    atomic_fetch_add(&st->coh->sync_waits, 1);
    atomic_fetch_add(&st->coh->sync_us, (uint64_t)((boot_ms() - start) * 1000));
}

/* ---- reads ------------------------------------------------------------------- */

/* One read of the epochs from the database (PostgreSQL): every model changed since
 * the last one moves its slot to the change's sequence number. Everything up to the
 * highest number read is then applied (numbers follow commit order). */
static enum mg_code refresh_epochs(struct store *st, struct mg_error *err)
{
    static const char sql[] = "SELECT model, seq FROM model_epochs WHERE seq > ? ORDER BY seq";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    int64_t top = 0;
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, atomic_load(&st->coh->ep_seen));
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        int64_t seq = db_col_i64(s, 1);

        slot_max(&st->coh->model_epochs[epoch_slot(db_col_text(s, 0))], (uint64_t)seq);
        if (seq > top)
            top = seq;
    }
    store_read_end(st, c);
    if (rc == MG_OK)
        atomic_max(&st->coh->ep_seen, top);
    return rc;
}

bool store_cache_leased(struct store *st)
{
    return st->database == NULL || boot_ms() < atomic_load(&st->coh->cache_lease_until);
}

enum mg_code store_model_epoch(struct store *st, const char *model, uint64_t *epoch,
                               struct mg_error *err)
{
    uint64_t want;
    enum mg_code rc = MG_OK;

    /* SQLite: one process writes the database, this one, so what it committed is all
     * there is. PostgreSQL under a cache lease: what returned anywhere is applied here.
     * Models that share a slot share an epoch (a spurious miss). */
    if (store_cache_leased(st)) {
        *epoch = atomic_load(&st->coh->model_epochs[epoch_slot(model)]);
        return MG_OK;
    }
    /*
     * No lease: the epoch must come from a read of the database that began after this
     * call did. Reads arriving together share one: the refresh that starts next serves
     * every caller waiting when it starts, and whoever finds none running starts it.
     */
    pthread_mutex_lock(&st->coh->ep_lock);
    want = st->coh->ep_started + 1;
    while (st->coh->ep_done < want) {
        if (!st->coh->ep_running) {
            st->coh->ep_running = true;
            st->coh->ep_started++;
            pthread_mutex_unlock(&st->coh->ep_lock);
            rc = refresh_epochs(st, err);
            pthread_mutex_lock(&st->coh->ep_lock);
            st->coh->ep_running = false;
            st->coh->ep_done = st->coh->ep_started;
            st->coh->ep_rc = rc;
            pthread_cond_broadcast(&st->coh->ep_cond);
            break;
        }
        pthread_cond_wait(&st->coh->ep_cond, &st->coh->ep_lock);
    }
    rc = st->coh->ep_rc;
    if (rc != MG_OK)
        mg_fail(err, rc, NULL, "the database is unavailable; retry shortly");
    pthread_mutex_unlock(&st->coh->ep_lock);
    *epoch = atomic_load(&st->coh->model_epochs[epoch_slot(model)]);
    return rc;
}

/* ---- the lease --------------------------------------------------------------- */

/* Stop answering from memory without asking (the listener is unsound); with
 * reconnect, the listener also starts a new session. Under coh_lock. */
static void lease_drop(struct store *st, bool reconnect)
{
    atomic_store(&st->coh->cache_lease_until, 0);
    st->coh->coh_gen++;
    st->coh->listen_ok = false;
    if (reconnect)
        st->coh->listen_stale = true;
}

/* Tell the other replicas (and the database) that every change up to ep_seen is
 * applied here, when that is news. On a read connection of the pool: the listener's
 * own may be the one that stopped answering. */
static void ack(struct store *st)
{
    /* A notification only: the replicas row's cache_seen follows at the next heartbeat,
     * for a writer that did not hear this. */
    static const char sql[] = "SELECT pg_notify('mg_change', 'a ' || ?1 || ' ' || ?2)";
    int64_t seen = atomic_load(&st->coh->ep_seen);
    struct mg_error err;
    struct db_stmt *s;

    struct db_conn *c;

    if (seen <= atomic_load(&st->coh->ep_acked))
        return;
    c = store_read_borrow(st);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, st->replica_id);
    db_bind_i64(s, 2, seen);
    if (db_exec(s, &err) == MG_OK)
        atomic_max(&st->coh->ep_acked, seen);
    store_read_return(st, c);
}

void store_cache_renew_begin(struct store *st, struct store_renewal *r)
{
    memset(r, 0, sizeof(*r));
    if (st->database == NULL)
        return;
    pthread_mutex_lock(&st->coh->coh_lock);
    if (st->coh->listen_ok && st->coh->echo_seen < st->coh->echo_want) {
        /* Our own notification of a second ago never came back: the listener hears
         * nothing, whatever its connection says. */
        fprintf(stderr, "modelgated: the database's notifications stopped reaching this "
                        "replica; reading every cached answer's epoch until they do again\n");
        lease_drop(st, true);
    }
    r->lease = st->coh->listen_ok && !st->coh->cache_off;
    r->gen = st->coh->coh_gen;
    r->echo = ++st->coh->echo_next;
    pthread_mutex_unlock(&st->coh->coh_lock);
    snprintf(r->echo_text, sizeof(r->echo_text), "e %s %" PRIu64, st->replica_id, r->echo);
    r->sent = boot_ms();
    r->seen = atomic_load(&st->coh->ep_seen);
}

void store_cache_renew_end(struct store *st, const struct store_renewal *r, bool committed)
{
    struct mg_error err;
    bool fresh;

    if (st->database == NULL || !committed)
        return;
    pthread_mutex_lock(&st->coh->coh_lock);
    if (r->echo > st->coh->echo_want)
        st->coh->echo_want = r->echo;
    pthread_mutex_unlock(&st->coh->coh_lock);
    /* Changes committed before the renewal are read here; later ones wait for us. */
    fresh = refresh_epochs(st, &err) == MG_OK;
    pthread_mutex_lock(&st->coh->coh_lock);
    if (fresh && r->lease && st->coh->listen_ok && st->coh->coh_gen == r->gen)
        atomic_store(&st->coh->cache_lease_until, r->sent + STORE_CACHE_LEASE_MS - CACHE_MARGIN_MS);
    pthread_mutex_unlock(&st->coh->coh_lock);
    ack(st);
}

/* ---- the listener ------------------------------------------------------------ */

/* Note "<replica> <seq>" in acked (the newest per replica; the oldest entry makes room). */
static void heard_ack(struct store *st, const char *p)
{
    size_t n = strcspn(p, " "), k, old = 0;
    int64_t seq;

    if (n == 0 || n > STORE_REPLICA_ID_LEN || p[n] != ' ' ||
        (seq = strtoll(p + n + 1, NULL, 10)) <= 0)
        return;
    pthread_mutex_lock(&st->coh->coh_lock);
    for (k = 0; k < st->coh->nacked; k++) {
        if (strncmp(st->coh->acked[k].id, p, n) == 0 && st->coh->acked[k].id[n] == '\0')
            break;
        if (st->coh->acked[k].at < st->coh->acked[old].at)
            old = k;
    }
    if (k == st->coh->nacked &&
        st->coh->nacked < sizeof(st->coh->acked) / sizeof(st->coh->acked[0]))
        st->coh->nacked++;
    else if (k == st->coh->nacked)
        k = old;
    if (strncmp(st->coh->acked[k].id, p, n) != 0 || st->coh->acked[k].id[n] != '\0') {
        memcpy(st->coh->acked[k].id, p, n);
        st->coh->acked[k].id[n] = '\0';
        st->coh->acked[k].seq = 0;
    }
    if (seq > st->coh->acked[k].seq)
        st->coh->acked[k].seq = seq;
    st->coh->acked[k].at = ++st->coh->acks_heard;
    pthread_mutex_unlock(&st->coh->coh_lock);
}

struct heard {
    struct store *st;
    struct store_wake *wake;
    unsigned session; /* the listener's session with a baseline, 0: none */
    bool acks;        /* another replica acknowledged */
    bool foreign;     /* another replica changed a model */
};

static void on_notify(void *arg, const char *p)
{
    struct heard *h = arg;
    struct store *st = h->st;
    char *end;

    if (p[0] == 'c' && p[1] == ' ') { /* "c <seq> <writer> <model>": a change */
        int64_t seq = strtoll(p + 2, &end, 10);
        size_t n = strlen(st->replica_id);

        if (seq <= 0 || *end != ' ' || strlen(end + 1) < n + 2 || end[1 + n] != ' ')
            return;
        slot_max(&st->coh->model_epochs[epoch_slot(end + 2 + n)], (uint64_t)seq);
        /* Another replica's write may wait for our acknowledgement; our own never does. */
        if (strncmp(end + 1, st->replica_id, n) != 0)
            h->foreign = true;
        /* Heard on the session the baseline was read on: nothing before it was missed
         * (a reconnection inside the wait starts another session). */
        if (h->session != 0 && db_session(st->notify_conn) == h->session)
            atomic_max(&st->coh->ep_seen, seq);
    } else if (p[0] == 'a' && p[1] == ' ') { /* "a <replica> <seq>": it applied up to seq */
        heard_ack(st, p + 2);
        h->acks = true;
    } else if (p[0] == 'e' && p[1] == ' ') { /* "e <replica> <n>": a heartbeat's echo */
        size_t n = strlen(st->replica_id);

        if (strncmp(p + 2, st->replica_id, n) == 0 && p[2 + n] == ' ') {
            uint64_t e = strtoull(p + 3 + n, NULL, 10);

            pthread_mutex_lock(&st->coh->coh_lock);
            if (e > st->coh->echo_seen)
                st->coh->echo_seen = e;
            pthread_mutex_unlock(&st->coh->coh_lock);
        }
    } else if (p[0] == 'k' && p[1] == '\0') { /* the cluster's signing key changed */
        h->wake->keys = true;
    } else { /* outbox rows and delivery outcomes */
        h->wake->outbox = true;
    }
}

/* The listener's session has no baseline yet: read the epochs (every change
 * committed before is applied; every later one will be heard on this session), then
 * acknowledge. False when the database could not be read. */
static bool baseline(struct store *st, unsigned session)
{
    struct mg_error err;
    bool ok = false;

    if (refresh_epochs(st, &err) != MG_OK)
        return false;
    pthread_mutex_lock(&st->coh->coh_lock);
    if (!st->coh->listen_stale) {
        st->coh->listen_session = session;
        st->coh->listen_ok = ok = true;
        if (st->coh->echo_seen < st->coh->echo_want) /* an echo sent to the old session is lost */
            st->coh->echo_seen = st->coh->echo_want;
    }
    pthread_mutex_unlock(&st->coh->coh_lock);
    ack(st);
    return ok;
}

enum mg_code store_wait_change(struct store *st, int timeout_ms, struct store_wake *wake,
                               struct mg_error *err)
{
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    struct heard h = {.st = st, .wake = wake};
    unsigned session;
    enum mg_code rc;
    bool stale;

    memset(wake, 0, sizeof(*wake));
    if (st->notify_conn == NULL) {
        nanosleep(&ts, NULL);
        return MG_OK;
    }
    pthread_mutex_lock(&st->coh->coh_lock);
    stale = st->coh->listen_stale;
    st->coh->listen_stale = false;
    pthread_mutex_unlock(&st->coh->coh_lock);
    if (stale)
        db_disconnect(st->notify_conn); /* the wait below listens on a new session */
    session = db_session(st->notify_conn);
    pthread_mutex_lock(&st->coh->coh_lock);
    if (st->coh->listen_ok && st->coh->listen_session == session)
        h.session = session;
    pthread_mutex_unlock(&st->coh->coh_lock);
    if (h.session == 0 && session != 0 && baseline(st, session))
        h.session = session;
    rc = db_wait_notify(st->notify_conn, "mg_change", timeout_ms, on_notify, &h, err);
    if (rc != MG_OK || db_session(st->notify_conn) != session) {
        /* Notifications may have been lost: no answer from memory until a new baseline. */
        pthread_mutex_lock(&st->coh->coh_lock);
        if (st->coh->listen_ok)
            lease_drop(st, false);
        pthread_mutex_unlock(&st->coh->coh_lock);
        return rc;
    }
    if (h.acks) {
        pthread_mutex_lock(&st->coh->coh_lock);
        pthread_cond_broadcast(&st->coh->ack_wait.cond);
        pthread_mutex_unlock(&st->coh->coh_lock);
    }
    if (h.session != 0 && h.foreign)
        ack(st);
    return MG_OK;
}

void store_cache_off(struct store *st)
{
    static const char sql[] = "UPDATE replicas SET cache_until_ms = 0 WHERE id = ?";
    struct mg_error err;
    struct db_conn *c;
    struct db_stmt *s;

    pthread_mutex_lock(&st->coh->coh_lock);
    st->coh->cache_off = true;
    lease_drop(st, false);
    pthread_mutex_unlock(&st->coh->coh_lock);
    if (st->database == NULL)
        return;
    c = store_read_borrow(st);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, st->replica_id);
    if (db_exec(s, &err) != MG_OK) {
        /* It runs out by itself within STORE_CACHE_LEASE_MS. */
    }
    store_read_return(st, c);
}

void store_cache_counts(struct store *st, bool *leased, uint64_t *waits, double *wait_s)
{
    *leased = st->database != NULL && store_cache_leased(st);
    *waits = atomic_load(&st->coh->sync_waits);
    *wait_s = (double)atomic_load(&st->coh->sync_us) / 1e6;
}
