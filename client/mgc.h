/*
 * mgc.h - the modelgate CLI's internals, shared by its files: exit codes, the
 * command context, the option parser, the HTTP calls (http.c), config
 * (config.c), directory scanning and reproducible tar packing (tarpack.c)
 * and output helpers (output.c). One file per command group: push.c,
 * read.c (versions, show, gates), release.c (promote ... rollback),
 * pull.c (pull, verify) and admin.c (models, promotions, alias set, token create).
 *
 * The CLI talks only to the REST API (docs/contract.md). It is single-threaded; no
 * function keeps global state.
 */
#ifndef MGC_H
#define MGC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include "../base/mg.h"

/* Exit codes: the CLI's contract with scripts. */
enum mgc_exit {
    MGC_OK = 0,      /* done */
    MGC_ERR = 1,     /* an error; the message (from the server's error body) is on stderr */
    MGC_USAGE = 2,   /* bad command line */
    MGC_FAILED = 3,  /* a gate failed, a promotion was rejected, aborted or rolled back */
    MGC_TIMEOUT = 4, /* gave up waiting */
};

#define MGC_JSON_MAX ((size_t)64 << 20)  /* largest JSON body read into memory */
#define MGC_ERROR_MAX ((size_t)64 << 10) /* largest error body kept from a download */

/* ---- command line ----------------------------------------------------------------------- */

struct mgc_optdef {
    const char *name; /* long name without "--" */
    char short_name;  /* e.g. 'o' for -o, or 0 */
    bool has_arg;
};

struct mgc_given {
    const struct mgc_optdef *def;
    const char *val; /* the argument, or "" for a flag */
};

struct mgc_args {
    const char **pos; /* positional arguments */
    int npos;
    struct mgc_given *given; /* options in command-line order */
    int ngiven;
};

struct mgc;

struct mgc_cmd {
    const char *name;
    const char *synopsis; /* "MODEL N --alias A" */
    const char *help;     /* the rest of --help: what it does, options, output, exit codes */
    const struct mgc_optdef *opts;
    int min_pos, max_pos;
    int (*run)(struct mgc *c, const struct mgc_args *a);
};

/* Parse argv (after the command name) against cmd's options plus --json and
 * --help. Returns MGC_OK, or MGC_USAGE with a message on stderr. The arrays
 * point into argv; release them with mgc_args_release(). */
int mgc_args_parse(const struct mgc_cmd *cmd, int argc, char **argv, struct mgc_args *a);
void mgc_args_release(struct mgc_args *a);

/* The last value of option `name`, or NULL when not given. */
const char *mgc_opt(const struct mgc_args *a, const char *name);
/* The i-th value of a repeatable option (in order), or NULL past the end. */
const char *mgc_opt_nth(const struct mgc_args *a, const char *name, int i);
bool mgc_flag(const struct mgc_args *a, const char *name);

/* Print "modelgate: <message>" and "usage: modelgate <cmd> <synopsis>" to
 * stderr; returns MGC_USAGE. */
int mgc_usage(const struct mgc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "modelgate: <message>" to stderr and return MGC_ERR. */
int mgc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a whole-string integer in [min, max] for option `what`; prints a
 * usage error. */
bool mgc_parse_int(const struct mgc *c, const char *what, const char *s, int64_t min, int64_t max,
                   int64_t *out);

/* ---- context ---------------------------------------------------------------------------- */

struct mgc {
    const struct mgc_cmd *cmd;
    bool json;               /* --json: machine output on stdout */
    bool tty;                /* stderr is a terminal: progress bars */
    char *url;               /* server base URL, no trailing '/' */
    char *token;             /* bearer secret; never printed */
    CURL *curl;              /* one handle, reused (keep-alive) */
    struct curl_slist *auth; /* "Authorization: Bearer ..." */
};

/* ---- config.c --------------------------------------------------------------------------- */

/* Fill c->url and c->token from $MODELGATE_URL / $MODELGATE_TOKEN, else the
 * config file. MGC_ERR with a message saying how to log in when missing. */
int mgc_config_load(struct mgc *c);

/* Normalise and check a server URL (http or https, no query or fragment);
 * returns a malloc'd copy without trailing '/', or NULL with a message. */
char *mgc_url_clean(const char *url);

/* Read a whole file (at most max bytes; "-" reads stdin). NUL-terminated;
 * *len may be NULL. NULL with a message printed on failure. */
char *mgc_read_file(const char *path, size_t max, size_t *len);

int mgc_cmd_login(struct mgc *c, const struct mgc_args *a);

/* ---- http.c ----------------------------------------------------------------------------- */

/* A response's outcome. */
struct mgc_reply {
    long http;         /* status, 0 when no response arrived */
    char code[64];     /* the error body's "code" ("" on success) */
    char message[512]; /* the error body's "message", or the transport error */
    json_t *body;      /* NEW: the parsed body (NULL for none or not JSON) */
};

void mgc_reply_release(struct mgc_reply *r);

/* Set up c->curl and c->auth (after mgc_config_load). */
int mgc_http_init(struct mgc *c);
void mgc_http_release(struct mgc *c);

/*
 * A JSON call: method, path (below the base URL, already escaped), optional
 * body (BORROWED). Returns MGC_OK when a response arrived (any status;
 * rep->http says which) and MGC_ERR on a transport failure (rep->message).
 * The body is read into memory up to MGC_JSON_MAX.
 */
int mgc_http_json(struct mgc *c, const char *method, const char *path, const json_t *body,
                  struct mgc_reply *rep);

/*
 * The common case: a JSON call that must succeed (2xx). *out (may be NULL)
 * receives the parsed body (NEW). Otherwise the server's message is printed
 * and MGC_ERR returned.
 */
int mgc_call(struct mgc *c, const char *method, const char *path, const json_t *body, json_t **out);

/* Print "modelgate: <message> (HTTP <n> <code>)" for a failed reply; returns MGC_ERR. */
int mgc_reply_fail(const struct mgc_reply *r, const char *what);

/* Upload size bytes from fd (from its start) to POST /api/v1/blobs with
 * X-Content-Digest: digest. *out: the blob JSON (NEW). */
int mgc_http_upload(struct mgc *c, int fd, uint64_t size, const char *digest, const char *label,
                    json_t **out);

/* Stream GET path into fd, hashing: *sha256 gets the 64-hex digest, *size
 * the byte count. More than max bytes fails. */
int mgc_http_download(struct mgc *c, const char *path, int fd, uint64_t max, const char *label,
                      char sha256[65], uint64_t *size);

/* Percent-escape a query value; malloc'd. */
char *mgc_escape(struct mgc *c, const char *s);

/* ---- tarpack.c -------------------------------------------------------------------------- */

struct mgc_tree_entry {
    char *path; /* relative POSIX path, no leading "./" */
    bool dir;
    bool exec; /* owner-executable regular file */
    uint64_t size;
};

struct mgc_tree {
    struct mgc_tree_entry *v; /* sorted by path (strcmp) */
    size_t n;
};

/* List a directory tree (not following links). Symbolic links and special
 * files are refused with a message naming them. */
int mgc_tree_scan(const char *root, struct mgc_tree *out);
void mgc_tree_release(struct mgc_tree *t);

/*
 * Pack a directory as a reproducible tar (pax, sorted names, mtime 0, owner
 * 0:0 without names, modes 0755/0644) into fd, hashing as it goes:
 * *sha256 gets its digest, *size its length. The same tree gives the same
 * bytes.
 */
int mgc_tar_pack(const char *root, int fd, char sha256[65], uint64_t *size);

/* An unlinked temporary file in $TMPDIR (or /tmp), open read-write. */
int mgc_temp_fd(void);

/* ---- output.c --------------------------------------------------------------------------- */

/* Print JSON (pretty, one document) to stdout. Returns MGC_OK/MGC_ERR. */
int mgc_print_json(const json_t *v);

/* A simple text table: add rows of cells, then print with aligned columns. */
struct mgc_table {
    char **cells; /* row-major, ncols per row */
    size_t ncols, nrows, cap;
};

void mgc_table_init(struct mgc_table *t, size_t ncols);
/* Add a row of ncols strings (copied; NULL prints as "-"). */
void mgc_table_row(struct mgc_table *t, ...);
void mgc_table_print(const struct mgc_table *t);
void mgc_table_release(struct mgc_table *t);

/* A JSON value as short text ("-" for null/missing); malloc'd. */
char *mgc_text(const json_t *v);
/* A string member or fallback. */
const char *mgc_str(const json_t *obj, const char *key, const char *fallback);
/* "sha256:0123456789ab" (first 12 hex digits). */
void mgc_short_digest(const char *digest, char out[24]);
/* "1.5 MiB" */
void mgc_human_bytes(double n, char out[32]);
/* "auc=0.942 p95=41.5" from a metrics object; malloc'd. */
char *mgc_metrics_text(const json_t *metrics);
/* Print a GateReport's gates as a table (read.c); true when one failed. */
bool mgc_print_gates(const json_t *gates);

/* ---- commands --------------------------------------------------------------------------- */

int mgc_cmd_push(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_versions(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_show(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_gates(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_promote(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_status(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_approve(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_reject(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_abort(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_lkg(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_rollback(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_pull(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_verify(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_models(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_promotions(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_alias(struct mgc *c, const struct mgc_args *a);
int mgc_cmd_token(struct mgc *c, const struct mgc_args *a);

/* Connect: load config and set up HTTP (commands that need the server call this first). */
int mgc_connect(struct mgc *c);

/* Validate names before they go into a URL path (usage error otherwise). */
bool mgc_check_model(const struct mgc *c, const char *model);
bool mgc_check_alias(const struct mgc *c, const char *alias);
bool mgc_check_promotion_id(const struct mgc *c, const char *id);

/* Sleep for ms milliseconds. */
void mgc_sleep_ms(int64_t ms);

#endif
