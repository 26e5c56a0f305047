/*
 * cache.c - epoch-validated response bodies (see cache.h).
 */
#include "cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct slot {
    pthread_mutex_t lock;
    char *key; /* NULL: empty */
    char *body;
    size_t len;
    uint64_t epoch;
};

struct srv_cache {
    struct slot slots[SRV_CACHE_SLOTS];
    _Atomic uint64_t hits, misses;
};

/* FNV-1a: keys are short, and a collision only costs a miss. */
static struct slot *slot_of(struct srv_cache *c, const char *key)
{
    uint64_t h = 1469598103934665603ull;

    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 1099511628211ull;
    return &c->slots[h % SRV_CACHE_SLOTS];
}

struct srv_cache *srv_cache_new(void)
{
    struct srv_cache *c = calloc(1, sizeof(*c));
    size_t i;

    for (i = 0; c && i < SRV_CACHE_SLOTS; i++)
        pthread_mutex_init(&c->slots[i].lock, NULL);
    return c;
}

void srv_cache_free(struct srv_cache **cp)
{
    struct srv_cache *c = *cp;
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < SRV_CACHE_SLOTS; i++) {
        pthread_mutex_destroy(&c->slots[i].lock);
        free(c->slots[i].key);
        free(c->slots[i].body);
    }
    free(c);
    *cp = NULL;
}

bool srv_cache_use(struct srv_cache *c, const char *key, uint64_t epoch,
                   void (*fn)(const char *body, size_t len, void *arg), void *arg)
{
    struct slot *s;
    bool hit;

    if (c == NULL)
        return false;
    s = slot_of(c, key);
    pthread_mutex_lock(&s->lock);
    hit = s->key && s->epoch == epoch && strcmp(s->key, key) == 0;
    if (hit)
        fn(s->body, s->len, arg);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(hit ? &c->hits : &c->misses, 1);
    return hit;
}

void srv_cache_put(struct srv_cache *c, const char *key, uint64_t epoch, const char *body,
                   size_t len)
{
    struct slot *s;
    size_t klen;
    char *k, *b;

    if (c == NULL || len > SRV_CACHE_BODY_MAX || (klen = strlen(key)) >= SRV_CACHE_KEY_MAX)
        return;
    k = malloc(klen + 1);
    b = malloc(len ? len : 1);
    if (k == NULL || b == NULL) { /* not caching is always correct */
        free(k);
        free(b);
        return;
    }
    memcpy(k, key, klen + 1);
    memcpy(b, body, len);
    s = slot_of(c, key);
    pthread_mutex_lock(&s->lock);
    /* Never replace a newer body with an older one built concurrently. */
    if (s->key && s->epoch > epoch && strcmp(s->key, key) == 0) {
        pthread_mutex_unlock(&s->lock);
        free(k);
        free(b);
        return;
    }
    free(s->key);
    free(s->body);
    s->key = k;
    s->body = b;
    s->len = len;
    s->epoch = epoch;
    pthread_mutex_unlock(&s->lock);
}

void srv_cache_counts(struct srv_cache *c, uint64_t *hits, uint64_t *misses)
{
    *hits = c ? atomic_load(&c->hits) : 0;
    *misses = c ? atomic_load(&c->misses) : 0;
}
