/*
 * blobs_hash.h - an upload's SHA-256 computed on a thread of its own (blobs.c uses it past
 * the first HASH_THREAD_AFTER bytes), fed through a bounded ring of copied chunks: a slow
 * hasher holds the writer back rather than buffering. One writer per hasher.
 */
#ifndef STORE_BLOBS_HASH_H
#define STORE_BLOBS_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

struct store_hasher;

/*
 * Start a hasher updating md (BORROWED: it must outlive the hasher). nthreads: the store's
 * count of running hashers, raised while this one runs (at most 16 at once, a memory bound).
 * NULL (hash inline) when it cannot start.
 */
struct store_hasher *store_hasher_start(_Atomic int *nthreads, EVP_MD_CTX *md);

/* Copy p into the ring, waiting for a free chunk when all are full. */
void store_hasher_feed(struct store_hasher *h, const uint8_t *p, size_t n);

/* Hand over the last (partial) chunk, or give up (stop), and wait for the hasher to end;
 * frees it and sets *hp to NULL. True when everything fed was hashed. */
bool store_hasher_finish(struct store_hasher **hp, bool stop);

#endif
