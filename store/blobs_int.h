/*
 * blobs_int.h - what blobs.c (uploads) and blobs_read.c (lookups) share. Only they
 * include this.
 */
#ifndef STORE_BLOBS_INT_H
#define STORE_BLOBS_INT_H

#include <stdint.h>

#include <jansson.h>

/* A blob's JSON (store.h's store_blob_get): formats and scan are STOLEN (formats NULL: [];
 * scan NULL: no "scan" member); files < 0: not an archive (null). NEW object, or NULL when
 * out of memory. */
json_t *store_blob_json(const char *digest, uint64_t size, const char *media, int64_t files,
                        json_t *formats, json_t *scan);

#endif
