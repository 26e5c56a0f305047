/*
 * blob_int.h - what the blob backends (blob_file.c, blob_s3*.c, blob_oci.c) share
 * with the dispatcher (blob.c) and the HTTP helpers (blob_http.c). Only the blob
 * layer includes this.
 */
#ifndef STORE_BLOB_INT_H
#define STORE_BLOB_INT_H

#include <limits.h>
#include <pthread.h>

#include <curl/curl.h>

#include "../base/util.h"
#include "blob.h"

#define BLOB_PART_DEFAULT (8u << 20)
#define BLOB_PART_MIN (5u << 20) /* S3's smallest part but the last */
#define BLOB_MAX_PARTS 10000
#define BLOB_HANDLE_MAX 2600
#define BLOB_ERR_BODY_MAX (64u << 10)

/*
 * One backend's vtable: each backend file (blob_file.c, blob_s3.c, blob_oci.c) exports
 * one, const, with every slot filled; blob.c keeps the table of them (blob_backends) and
 * picks by scheme. A slot for an ability the backend lacks (its `supports` bit clear) is
 * filled with the answer documented here, never left NULL:
 *   presign         MG_EINVAL, field "blob-downloads" (blob_no_presign)
 *   local_path      false                              (blob_no_local_path)
 *   put_local_path  NULL                               (blob_no_put_local_path)
 * and a reader without a descriptor answers take_fd with -1 (struct blob_reader_ops).
 */
struct blob_ops {
    const char *kind;   /* "file", "s3", "oci": names in messages, metrics, blob_uploads */
    const char *scheme; /* the URL prefix that picks it: "file:", "s3://", "oci://" */
    const char *usage;  /* its URL's form, for the error listing every backend */
    unsigned supports;  /* blob_can.h bits */
    /* The URL's syntax (url starts with scheme), without opening anything: MG_EINVAL
     * with field "blobs" naming what is wrong. */
    enum mg_code (*check_url)(const char *url, struct mg_error *err);
    /* Fill b->impl and b->desc from a URL check_url accepted (no network call yet); may
     * replace b->tmp_dir with a scratch directory of its own. On failure b->impl may be
     * half made: close takes it. */
    enum mg_code (*open)(struct blob_backend *b, const char *url, const char *credentials,
                         struct mg_error *err);
    enum mg_code (*check)(struct blob_backend *b, struct mg_error *err);
    enum mg_code (*put_begin)(struct blob_backend *b, const char *expected, uint64_t max,
                              struct blob_put **out, struct mg_error *err);
    enum mg_code (*put_write)(struct blob_put *p, const void *data, size_t n, struct mg_error *err);
    const char *(*put_local_path)(const struct blob_put *p);
    enum mg_code (*put_commit)(struct blob_put *p, const char *digest, struct mg_error *err);
    bool (*put_abort)(struct blob_put *p); /* remove leftovers; the dispatcher frees */
    void (*put_free)(struct blob_put *p);
    enum mg_code (*stat)(struct blob_backend *b, const char *digest, uint64_t *size,
                         struct mg_error *err);
    bool (*local_path)(struct blob_backend *b, const char *digest, char *out, size_t outsz);
    enum mg_code (*read_open)(struct blob_backend *b, const char *digest, uint64_t off,
                              uint64_t len, struct blob_reader **out, struct mg_error *err);
    enum mg_code (*presign)(struct blob_backend *b, const char *digest, unsigned ttl_s, char **url,
                            struct mg_error *err);
    enum mg_code (*del)(struct blob_backend *b, const char *digest, struct mg_error *err);
    enum mg_code (*list)(struct blob_backend *b,
                         bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                         struct mg_error *err);
    enum mg_code (*orphans)(struct blob_backend *b,
                            bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                            struct mg_error *err);
    enum mg_code (*reclaim)(struct blob_backend *b, const char *handle, struct mg_error *err);
    void (*close)(struct blob_backend *b);
};

struct blob_backend {
    const struct blob_ops *ops;
    char desc[300];
    char *tmp_dir; /* malloc'd */
    uint64_t part_bytes;
    void *impl; /* the backend's own state */
};

/* Every backend's put starts with this. */
struct blob_put {
    struct blob_backend *b;
    char handle[BLOB_HANDLE_MAX];
};

/*
 * A reader's vtable, first in every reader's struct (like sqlite3_io_methods): a file
 * range (blob_file.c), a streamed download (blob_http.c) or an empty range
 * (blob_empty_reader). blob.c only dispatches through it.
 */
struct blob_reader_ops {
    /* As blob_reader_read; *got and *would_block are cleared by the caller. */
    enum mg_code (*read)(struct blob_reader *r, void *buf, size_t n, size_t *got, bool *would_block,
                         void (*wake)(void *arg), void *arg, struct mg_error *err);
    /* The descriptor and offset handed over, or -1 (a reader without one). */
    int (*take_fd)(struct blob_reader *r, uint64_t *offset);
    /* Stop (a streaming GET is cancelled) and free r. */
    void (*close)(struct blob_reader *r);
};
struct blob_reader {
    const struct blob_reader_ops *ops;
};

/* The backends, each exported by its own file, and blob.c's table of them (scheme
 * order; the first is the default when no URL is given). */
extern const struct blob_ops blob_file_ops;
extern const struct blob_ops blob_s3_ops;
extern const struct blob_ops blob_oci_ops;
extern const struct blob_ops *const blob_backends[];
extern const size_t blob_nbackends;

/* Slot fillers for a backend without the ability (see struct blob_ops). */
enum mg_code blob_no_presign(struct blob_backend *b, const char *digest, unsigned ttl_s, char **url,
                             struct mg_error *err);
bool blob_no_local_path(struct blob_backend *b, const char *digest, char *out, size_t outsz);
const char *blob_no_put_local_path(const struct blob_put *p);

/* A reader of no bytes (a range of length 0), with no descriptor. */
enum mg_code blob_empty_reader(struct blob_reader **out, struct mg_error *err);

/* Read "a:b" from a credentials file that only its owner may read (mode 0600 or
 * stricter); *first and *second malloc'd. */
enum mg_code blob_read_credentials(const char *path, const char *what, char **first, char **second,
                                   struct mg_error *err);

/* Value of key in a URL query ("a=1&b=2"), copied into out; false when absent. */
bool blob_query_param(const char *query, const char *key, char *out, size_t outsz);

/* ---- HTTP helpers (blob_http.c) ----------------------------------------- */

struct blob_http_resp {
    long status;
    struct mg_buf body;  /* capped at BLOB_ERR_BODY_MAX (small replies, error bodies) */
    char location[2048]; /* Location header */
    char www_auth[1024]; /* WWW-Authenticate header */
    char etag[256];      /* ETag header, quotes kept */
    char digest[80];     /* Docker-Content-Digest header */
    uint64_t length;     /* Content-Length header */
    int64_t last_modified_ms;
};

void blob_http_resp_init(struct blob_http_resp *r);
void blob_http_resp_release(struct blob_http_resp *r);

/* A new easy handle with what every backend request shares (timeouts, protocols,
 * no signals, header capture into r, body capture into r->body). NULL when out of
 * memory. */
CURL *blob_http_easy(struct blob_http_resp *r);

/* Perform; a transport failure becomes MG_EUNAVAIL naming desc. r->status is set. */
enum mg_code blob_http_perform(CURL *c, struct blob_http_resp *r, const char *desc,
                               struct mg_error *err);

/* The text between <tag> and </tag> in an XML body (first occurrence), or "". */
void blob_xml_value(const char *xml, size_t len, const char *tag, char *out, size_t outsz);

/*
 * A streamed GET: c is configured (URL, auth, Range) but not performed; the
 * stream runs it on a thread of its own and hands bytes over through a bounded
 * buffer. Expected statuses: 200 or 206. retry(c, arg) (may be NULL) is called
 * once after a 401 to refresh credentials on c; it returns false to give up.
 * Takes c (cleaned up at close). *out is a reader with its own vtable (no descriptor).
 */
enum mg_code blob_stream_start(CURL *c, struct curl_slist *headers, const char *desc,
                               bool (*retry)(CURL *c, struct curl_slist **headers, void *arg),
                               void *arg, struct blob_reader **out, struct mg_error *err);

/*
 * Parts: a put buffers part_bytes at a time; a full part is handed to a sender
 * thread while the next one fills (two buffers, so memory stays 2 x part size
 * whatever the upload's size). send(arg, data, len, index) performs one part.
 */
struct blob_parts;
typedef enum mg_code (*blob_part_send_fn)(void *arg, const uint8_t *data, size_t len,
                                          unsigned index, struct mg_error *err);

enum mg_code blob_parts_new(size_t part_bytes, blob_part_send_fn send, void *arg,
                            struct blob_parts **out, struct mg_error *err);
/* Append; sends full parts (waiting for the previous one to finish first). */
enum mg_code blob_parts_write(struct blob_parts *p, const void *data, size_t n,
                              struct mg_error *err);
/* Wait for the part in flight; then *tail (*tail_len bytes) is what is left unsent (the
 * last part, possibly empty) and *sent the number of parts sent. */
enum mg_code blob_parts_finish(struct blob_parts *p, const uint8_t **tail, size_t *tail_len,
                               unsigned *sent, struct mg_error *err);
void blob_parts_free(struct blob_parts **p);

/*
 * A streamed upload: one request (c configured: URL, method, headers) whose body is
 * what blob_pipe_write hands over, through a bounded buffer, sent with chunked
 * transfer encoding by a thread of its own. blob_pipe_finish ends the body and
 * waits for the reply (*resp stays the pipe's). Takes c and headers.
 */
struct blob_pipe;
enum mg_code blob_pipe_start(CURL *c, struct curl_slist *headers, const char *desc,
                             struct blob_pipe **out, struct mg_error *err);
enum mg_code blob_pipe_write(struct blob_pipe *p, const void *data, size_t n, struct mg_error *err);
enum mg_code blob_pipe_finish(struct blob_pipe *p, struct blob_http_resp **resp,
                              struct mg_error *err);
void blob_pipe_free(struct blob_pipe **p);

#endif
