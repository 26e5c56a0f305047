/*
 * blobs_hash.c - an upload's SHA-256 on a thread of its own (blobs_hash.h), fed through a
 * small ring of copied chunks so that hashing and the copy into the backend overlap.
 */
#include "blobs_hash.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HASH_CHUNK (256u << 10)
#define HASH_CHUNKS 4
#define HASH_THREADS_MAX 16 /* uploads hashed on a thread at once (memory bound) */

/* Chunks [tail, tail + count) of the ring are full and the hasher's (it
 * hashes the one at tail); the writer fills chunk (tail + count) % N. */
struct store_hasher {
    _Atomic int *nthreads; /* the store's count of running hashers */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* any change of count, done, stop */
    uint8_t *buf[HASH_CHUNKS];
    size_t len[HASH_CHUNKS];
    unsigned tail, count;
    bool done; /* the writer has handed over its last chunk */
    bool stop; /* abort: leave the rest unhashed */
    EVP_MD_CTX *md;
    bool failed;
};

static void *hasher_main(void *arg)
{
    struct store_hasher *h = arg;
    unsigned i;

    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->count == 0 && !h->done && !h->stop)
            pthread_cond_wait(&h->cond, &h->lock);
        if (h->stop || h->count == 0)
            break;
        i = h->tail;
        pthread_mutex_unlock(&h->lock);
        if (!h->failed && EVP_DigestUpdate(h->md, h->buf[i], h->len[i]) != 1)
            h->failed = true;
        pthread_mutex_lock(&h->lock);
        h->len[i] = 0;
        h->tail = (h->tail + 1) % HASH_CHUNKS;
        h->count--;
        pthread_cond_broadcast(&h->cond);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

static void hasher_free(struct store_hasher *h)
{
    unsigned i;

    for (i = 0; i < HASH_CHUNKS; i++)
        free(h->buf[i]);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->cond);
    atomic_fetch_sub(h->nthreads, 1);
    free(h);
}

/* blobs_hash.h */
struct store_hasher *store_hasher_start(_Atomic int *nthreads, EVP_MD_CTX *md)
{
    struct store_hasher *h;
    unsigned i;

    if (atomic_fetch_add(nthreads, 1) >= HASH_THREADS_MAX) {
        atomic_fetch_sub(nthreads, 1);
        return NULL;
    }
    h = calloc(1, sizeof(*h));
    if (h == NULL) {
        atomic_fetch_sub(nthreads, 1);
        return NULL;
    }
    h->nthreads = nthreads;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->cond, NULL);
    for (i = 0; i < HASH_CHUNKS; i++) {
        if ((h->buf[i] = malloc(HASH_CHUNK)) == NULL) {
            hasher_free(h);
            return NULL;
        }
    }
    h->md = md;
    if (pthread_create(&h->thread, NULL, hasher_main, h) != 0) {
        hasher_free(h);
        return NULL;
    }
    return h;
}

/* blobs_hash.h */
void store_hasher_feed(struct store_hasher *h, const uint8_t *p, size_t n)
{
    while (n > 0) {
        unsigned i;
        size_t k;

        pthread_mutex_lock(&h->lock);
        while (h->count == HASH_CHUNKS)
            pthread_cond_wait(&h->cond, &h->lock);
        i = (h->tail + h->count) % HASH_CHUNKS;
        pthread_mutex_unlock(&h->lock);
        /* Chunk i is the writer's alone until count covers it. */
        k = HASH_CHUNK - h->len[i];
        if (k > n)
            k = n;
        memcpy(h->buf[i] + h->len[i], p, k);
        h->len[i] += k;
        p += k;
        n -= k;
        if (h->len[i] == HASH_CHUNK) {
            pthread_mutex_lock(&h->lock);
            h->count++;
            pthread_cond_broadcast(&h->cond);
            pthread_mutex_unlock(&h->lock);
        }
    }
}

/* blobs_hash.h */
bool store_hasher_finish(struct store_hasher **hp, bool stop)
{
    struct store_hasher *h = *hp;
    bool ok;
    unsigned i;

    pthread_mutex_lock(&h->lock);
    if (!stop && h->count < HASH_CHUNKS) {
        i = (h->tail + h->count) % HASH_CHUNKS;
        if (h->len[i] > 0)
            h->count++;
    }
    h->done = true;
    h->stop = stop;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->lock);
    pthread_join(h->thread, NULL);
    ok = !stop && !h->failed && h->count == 0;
    hasher_free(h);
    *hp = NULL;
    return ok;
}
