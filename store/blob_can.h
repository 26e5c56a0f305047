/*
 * blob_can.h - the optional abilities of a blob backend: the bits of its vtable's
 * `supports` (blob_int.h's struct blob_ops), asked for with blob_can (blob.h) inside
 * store/ and store_blobs_can (store.h) above it. An ability one backend has is a bit
 * here, never an entry point named after that backend.
 */
#ifndef STORE_BLOB_CAN_H
#define STORE_BLOB_CAN_H

enum blob_can {
    /* blob_presign gives a URL anyone may GET the blob from for a while (s3: SigV4 query
     * presigning); without it blob_presign answers MG_EINVAL. */
    BLOB_CAN_PRESIGN = 1u << 0,
    /* A reader hands over a file descriptor to sendfile from (blob_reader_take_fd);
     * without it take_fd answers -1 and the bytes are read with blob_reader_read. */
    BLOB_CAN_SENDFILE = 1u << 1,
    /* Blobs, uploads in flight and the scratch directory are files in a local directory
     * (which other replicas may share): blob_local_path and blob_put_local_path name
     * them. Without it they answer false / NULL. */
    BLOB_CAN_LOCAL_FILES = 1u << 2,
};

#endif
