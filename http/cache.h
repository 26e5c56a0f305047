/*
 * cache.h - a small, bounded cache of whole JSON response bodies for the
 * hottest reads (a version, an alias's last-known-good), validated by the
 * model's epoch (store_model_epoch): an entry is served only while its model's
 * epoch is still the one it was built under, so a hit is always what the
 * database would answer now, and a write to one model leaves the others'
 * entries valid. Direct-mapped slots, one lock each; bodies over
 * SRV_CACHE_BODY_MAX are not kept. Thread-safe; a NULL cache caches nothing.
 */
#ifndef SRV_CACHE_H
#define SRV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_CACHE_SLOTS 512
#define SRV_CACHE_KEY_MAX 512
#define SRV_CACHE_BODY_MAX (16u << 10)
#define SRV_CACHE_NO_EPOCH UINT64_MAX /* an epoch that could not be read */

struct srv_cache;

struct srv_cache *srv_cache_new(void);
void srv_cache_free(struct srv_cache **c);

/* Call fn(body, len, arg) under the slot's lock when key is cached at epoch;
 * false (fn not called) otherwise. fn must copy what it keeps. */
bool srv_cache_use(struct srv_cache *c, const char *key, uint64_t epoch,
                   void (*fn)(const char *body, size_t len, void *arg), void *arg);

/* Keep body (copied) for key at epoch, replacing whatever had the slot. */
void srv_cache_put(struct srv_cache *c, const char *key, uint64_t epoch, const char *body,
                   size_t len);

/* Hits and misses so far (for /metrics). */
void srv_cache_counts(struct srv_cache *c, uint64_t *hits, uint64_t *misses);

#endif
