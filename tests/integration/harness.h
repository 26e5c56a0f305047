/*
 * harness.h - what the integration tests need to drive a real modelgated:
 * start it on an ephemeral port with a fresh data directory, stop and restart
 * it, talk HTTP to it with libcurl, and check answers against docs/contract.md.
 *
 * Layout of one server's scratch space (a mkdtemp directory):
 *   ROOT/data/         the --data-dir (modelgate.db, blobs/, admin.token)
 *   ROOT/server.log    the daemon's stdout and stderr, appended across restarts
 *   ROOT/port          the --port-file
 * ROOT is removed by it_server_free() unless MG_KEEP_DATA=1 is set.
 *
 * Responses are owned by the server object that made them: they stay valid
 * until it_resp_free(), it_release() or it_server_free(), whichever comes
 * first. That keeps tests short and leak-free even when an assertion jumps
 * out of a test half-way.
 *
 * Every function asserts (cmocka) instead of returning errors: a harness
 * failure is a test failure, with a message that says what went wrong.
 * Single-threaded use only.
 */
#ifndef MG_IT_HARNESS_H
#define MG_IT_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <sys/types.h>

#include <cmocka.h>
#include <jansson.h>

#define IT_PATH_MAX 512
#define IT_MAX_ARGS 16
#define IT_MAX_HEADERS 48
#define IT_DIGEST_LEN 71 /* "sha256:" + 64 hex */

struct it_header {
    char *name; /* as sent by the server */
    char *value;
};

struct it_resp {
    struct it_resp *next; /* the owning server's list */
    char desc[256];       /* "METHOD PATH", for messages */
    long status;
    char *body; /* NUL-terminated (the NUL is not counted in len) */
    size_t len;
    json_t *json; /* parsed body when Content-Type is application/json, else NULL */
    struct it_header headers[IT_MAX_HEADERS];
    size_t n_headers;
};

struct mg_server {
    pid_t pid; /* 0 when not running */
    int port;
    char root[IT_PATH_MAX];
    char data_dir[IT_PATH_MAX];
    char port_file[IT_PATH_MAX];
    char log_path[IT_PATH_MAX];
    char base_url[64];
    char admin_token[128];
    char *args[IT_MAX_ARGS]; /* extra command-line arguments, NULL-terminated */
    void *curl;              /* one easy handle, so connections are reused */
    struct it_resp *resps;   /* responses not yet freed */
    char **secrets;          /* every secret the server issued (tokens, whsec_, csrf) */
    size_t nsecrets;
    char database[IT_PATH_MAX]; /* its PostgreSQL URL, or "" when it runs on SQLite */
    bool database_joined;       /* database is another server's (it_server_join): not dropped */
    char blobs[IT_PATH_MAX];    /* its --blobs URL when the suite runs on a blob server, else "" */
    /* M29: the server log's "error:" lines (internal errors, 500) the test expected: one per
     * 500 that it_expect_status/it_expect_error asserted, plus it_server_allow_errors(). */
    size_t errors_expected;
    char *errors_allowed[8]; /* "error:" lines holding one of these are expected too */
    size_t nerrors_allowed;
    struct mg_server *live_next; /* the harness's list of servers not yet freed */
};

/* True when the suite runs on PostgreSQL ($MG_PG_DIR: the socket directory of a
 * server scripts/pg-test.sh started): every it_server_start gets a fresh
 * database of its own there, owned by IT_PG_ROLE and passed as --database. */
bool it_on_postgres(void);

/* The role modelgated connects as on the test PostgreSQL (scripts/pg-test.sh creates it):
 * an ordinary one, not a superuser, that owns its database. */
#define IT_PG_ROLE "modelgate"

/* Run one statement (no result rows) as the test PostgreSQL's superuser in its postgres
 * database; fails the test on an error. */
void it_pg_admin(const char *sql);

/* The blob backend the suite runs on: "file" (the data directory), or "s3" / "oci" when
 * $MG_BLOB_DIR names a server scripts/blob-test.sh started; then every it_server_start
 * gets --blobs with a key prefix (s3) or repository (oci) of its own, and
 * --blobs-credentials. */
const char *it_blob_kind(void);

/* Does the server's blob backend hold the blob (its file, object or registry blob)? */
bool it_blob_stored(struct mg_server *s, const char *digest);

/* Leftovers of uploads in the backend: temp files (file:), multipart uploads and temp
 * objects (s3), open upload sessions (oci: read from the registry's storage, since its
 * API lists none). */
size_t it_blob_leftovers(struct mg_server *s);

/* Skip the calling test (cmocka skip()) when the suite runs on PostgreSQL: for
 * tests of the embedded database itself (its file, backups, WAL). Not a skip that
 * it_main_result() reports: the SQLite run of the same program covers the test. */
void it_sqlite_only(void);

/* ---- the program's verdict (M29) -------------------------------------- */
/*
 * cmocka 1.1.5's cmocka_run_group_tests() returns 0 even when the group teardown fails, so
 * the harness keeps its own verdict: every check that runs outside a test (a daemon's exit
 * status, its shutdown deadline, secrets and "error:", "runtime error:", "LeakSanitizer"
 * lines in its log, all checked when a server is stopped or freed) sets a program-wide
 * failure flag. Every test program's main ends with
 *
 *     return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
 *
 * which returns 1 when cmocka or the harness saw a failure, 77 when a test skipped with
 * it_skip() (ctest's SKIP_RETURN_CODE: ctest lists it as skipped), else 0. A program that
 * does not call it_main_result() still exits 1 on a harness failure (an atexit handler),
 * and servers left running at exit are stopped and checked there.
 */
int it_main_result(int cmocka_rc);

/* Record a failure found outside a test (printed now, with "harness: "); the program fails. */
void it_harness_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Has the program failed so far (a harness failure)? */
bool it_harness_failed(void);

/* MG_REQUIRE_ALL=1: every tool is installed and nothing may skip. The one reader of the
 * variable in the C tests (tests/skip.h; shell tests: tests/skip.sh). */
bool it_require_all(void);

/* Skip the calling test because something it needs is missing here (a tool, a privilege):
 * prints why and calls cmocka's skip(); the program then exits 77. Under MG_REQUIRE_ALL=1
 * it fails the test instead. */
void it_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Skip the calling test because it does not apply to this configuration (a PostgreSQL-only
 * test on SQLite): another ctest variant of the same program runs it. Not reported as a skip. */
void it_not_applicable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The test expects the server to log internal errors ("error:" lines, what a 500 logs) that
 * hold `part`, e.g. a disk-full test: they do not fail the program. */
void it_server_allow_errors(struct mg_server *s, const char *part);

/* ---- daemon lifecycle ----------------------------------------------- */

/*
 * Start modelgated (path from $MODELGATED) on 127.0.0.1:0 with a fresh data
 * directory. extra_args: more arguments (NULL-terminated array), or NULL.
 * Returns once the port file exists and admin.token has been read.
 */
struct mg_server *it_server_start(const char *const *extra_args);

/* it_server_start on a database that already has an admin (another server's, or
 * a migrated one): that server writes no admin.token, so the test hands over the
 * admin secret it knows. */
struct mg_server *it_server_start_admin(const char *const *extra_args, const char *admin_token);

/*
 * Start another replica on first's PostgreSQL database (first must run on one):
 * like it_server_start, with --database first->database and first's admin
 * token (the database has it already, so the new daemon writes none). Its
 * database is first's: it_server_free leaves it to first. Free the joined
 * servers before first.
 */
struct mg_server *it_server_join(const struct mg_server *first, const char *const *extra_args);

/* SIGTERM, wait (deadline, then SIGKILL) and assert a clean exit 0; then check the log
 * (secrets, sanitizer reports, unexpected "error:" lines). A failure also fails the
 * program (it_main_result). The deadline is MG_IT_STOP_MS when set (the harness self-test). */
void it_server_stop(struct mg_server *s);

/* Stop if running, then start again on the same data directory and args. */
void it_server_restart(struct mg_server *s);

/* kill -9 the daemon (no clean shutdown); it_server_restart() then starts a
 * fresh process on the same data directory. */
void it_server_kill9(struct mg_server *s);

/* Stop if still running (SIGTERM, the checks of it_server_stop, but a failure only fails
 * the program, without jumping out of the caller), check the log, free responses, remove
 * ROOT; sets *s to NULL. */
void it_server_free(struct mg_server **s);

/* Peak resident set (VmHWM) of the running daemon in KiB. */
long it_server_peak_rss_kib(const struct mg_server *s);

/* Print the last `max` bytes of the server log to stderr. */
void it_server_dump_log(const struct mg_server *s, size_t max);

/* ---- cmocka glue ---------------------------------------------------- */

/* Group setup/teardown for a file whose tests share one default server. */
int it_group_setup(void **state);
int it_group_teardown(void **state);

/* Per-test teardown: frees the responses the test made. */
int it_test_teardown(void **state);

/* True when MG_SANITIZE=1 (sanitizer build: slower, RSS meaningless). */
bool it_sanitized(void);

/* ---- HTTP ----------------------------------------------------------- */

/* One request, for it_request_parallel(). */
struct it_spec {
    const char *method;
    const char *path;
    const char *token;        /* NULL: no Authorization */
    const char *content_type; /* NULL: no Content-Type */
    const void *body;         /* NULL when len is 0 */
    size_t len;
};

/*
 * One request. path is sent as is (no dot-segment removal). token: bearer
 * secret or NULL for none. content_type: NULL sends no Content-Type header.
 * body may be NULL when len is 0. headers: extra "Name: value" lines,
 * NULL-terminated, or NULL.
 */
struct it_resp *it_request_h(struct mg_server *s, const char *method, const char *path,
                             const char *token, const char *content_type, const void *body,
                             size_t len, const char *const *headers);

struct it_resp *it_request(struct mg_server *s, const char *method, const char *path,
                           const char *token, const char *content_type, const void *body,
                           size_t len);

/*
 * n requests at once, each on its own connection (curl multi); out[i] gets
 * the answer to specs[i]. For checking that concurrent calls stay consistent.
 */
void it_request_parallel(struct mg_server *s, size_t n, const struct it_spec *specs,
                         struct it_resp **out);

/* The same, with specs[i] sent start_ms[i] ms after the first ones (start_ms NULL: all at
 * once), so a test can move a race's window onto the moment it is about. */
void it_request_parallel_at(struct mg_server *s, size_t n, const struct it_spec *specs,
                            const int *start_ms, struct it_resp **out);

/* A JSON body given as text (NULL for none), Content-Type application/json. */
struct it_resp *it_jreq(struct mg_server *s, const char *method, const char *path,
                        const char *token, const char *json_text);

/* A text body (strlen) sent with the given Content-Type. */
struct it_resp *it_treq(struct mg_server *s, const char *method, const char *path,
                        const char *token, const char *content_type, const char *text);

/* A JSON body as a jansson value, which this STEALS (decref'd here). */
struct it_resp *it_jreq_v(struct mg_server *s, const char *method, const char *path,
                          const char *token, json_t *body);

/* The value of an unlabelled series on GET /metrics (admin token); fails when absent. */
unsigned long long it_metric(struct mg_server *s, const char *name);

/* GET with the given token. */
struct it_resp *it_get(struct mg_server *s, const char *path, const char *token);

/* Percent-encode everything but unreserved characters. Caller frees. */
char *it_urlencode(const char *s);

/* Free one response now (it is unlinked from its server). Sets *r to NULL. */
void it_resp_free(struct mg_server *s, struct it_resp **r);

/* Free every response of the server. */
void it_release(struct mg_server *s);

/* Value of a response header (case-insensitive name), or NULL. */
const char *it_header(const struct it_resp *r, const char *name);

/*
 * Streamed POST /api/v1/blobs of `size` bytes of it_pattern(seed) produced
 * by a read callback (nothing is buffered or written to disk). chunked:
 * Transfer-Encoding: chunked instead of Content-Length. digest_out (may be
 * NULL) receives "sha256:<hex>" of the bytes sent.
 */
struct it_resp *it_upload_stream(struct mg_server *s, const char *token, uint64_t size,
                                 uint32_t seed, bool chunked, const char *const *headers,
                                 char digest_out[IT_DIGEST_LEN + 1]);

/* Start a streamed upload of `size` bytes (with Content-Length) and drop the
 * connection after about `abort_at` bytes; asserts the transfer was cut. */
void it_upload_abort(struct mg_server *s, const char *token, uint64_t size, uint64_t abort_at);

/* Fill buf with the bytes at [offset, offset+n) of the pattern for seed. */
void it_pattern(uint32_t seed, uint64_t offset, void *buf, size_t n);

/* POST the bytes as a blob with the admin token; asserts 200/201 and that the
 * returned digest is the bytes' sha256. digest_out may be NULL. Returns the
 * response (its json is the blob record). */
struct it_resp *it_upload(struct mg_server *s, const void *data, size_t len,
                          char digest_out[IT_DIGEST_LEN + 1]);

/* "sha256:<hex>" of a buffer. */
void it_digest(const void *data, size_t len, char out[IT_DIGEST_LEN + 1]);

/* ---- tokens --------------------------------------------------------- */

/*
 * Create a token with the admin token. roles: comma-separated names
 * ("publisher,reader"), or "" for none. Returns the secret (malloc'd, caller
 * frees); id_out (may be NULL, 64 bytes) receives the token's id.
 */
char *it_token_create(struct mg_server *s, const char *name, const char *roles, char *id_out);

/* ---- assertions ----------------------------------------------------- */
/*
 * These report the caller's file and line. On failure they print the request,
 * the status and the body (and the server log's tail for a 5xx).
 */

/* Assert the status. */
#define it_expect_status(s, r, status) it_expect_status_at(s, r, status, __FILE__, __LINE__)

/* Assert the status is neither bad1 nor bad2 (e.g. 401 and 403). */
#define it_expect_status_not(r, bad1, bad2)                                                        \
    it_expect_status_not_at(r, bad1, bad2, __FILE__, __LINE__)

/*
 * Assert an docs/contract.md error: the status, Content-Type application/json and a
 * body {"error":{"code":code,"message":"<non-empty>","field"?:string}}.
 */
#define it_expect_error(s, r, status, code)                                                        \
    it_expect_error_at(s, r, status, code, __FILE__, __LINE__)

/* it_expect_error plus: "field" is present and contains `field_part`. */
#define it_expect_error_field(s, r, status, code, field_part)                                      \
    it_expect_error_field_at(s, r, status, code, field_part, __FILE__, __LINE__)

/* error.code of an error response, or NULL. Borrowed. */
const char *it_error_code(const struct it_resp *r);

/* Members of a JSON object, asserting presence and type; borrowed. */
#define it_jstr(obj, key) it_jstr_at(obj, key, __FILE__, __LINE__)
#define it_jint(obj, key) it_jint_at(obj, key, __FILE__, __LINE__)
#define it_jnum(obj, key) it_jnum_at(obj, key, __FILE__, __LINE__)
#define it_jobj(obj, key) it_jobj_at(obj, key, __FILE__, __LINE__)
#define it_jarr(obj, key) it_jarr_at(obj, key, __FILE__, __LINE__)

/* Assert s looks like RFC 3339 UTC: "YYYY-MM-DDTHH:MM:SS[.fff]Z". */
#define it_expect_rfc3339(str) it_expect_rfc3339_at(str, __FILE__, __LINE__)

void it_expect_status_at(const struct mg_server *s, const struct it_resp *r, long status,
                         const char *file, int line);
void it_expect_status_not_at(const struct it_resp *r, long bad1, long bad2, const char *file,
                             int line);
void it_expect_error_at(const struct mg_server *s, const struct it_resp *r, long status,
                        const char *code, const char *file, int line);
void it_expect_error_field_at(const struct mg_server *s, const struct it_resp *r, long status,
                              const char *code, const char *field_part, const char *file, int line);
const char *it_jstr_at(const json_t *obj, const char *key, const char *file, int line);
json_int_t it_jint_at(const json_t *obj, const char *key, const char *file, int line);
double it_jnum_at(const json_t *obj, const char *key, const char *file, int line);
json_t *it_jobj_at(const json_t *obj, const char *key, const char *file, int line);
json_t *it_jarr_at(const json_t *obj, const char *key, const char *file, int line);
void it_expect_rfc3339_at(const char *s, const char *file, int line);

/* ---- files of the data directory -------------------------------------- */

/* ROOT/data/<rel> into out. */
void it_data_path(const struct mg_server *s, const char *rel, char out[IT_PATH_MAX]);

/* The file below ROOT/data that holds the blob with digest ("sha256:<hex>"). */
void it_blob_file(const struct mg_server *s, const char *digest, char out[IT_PATH_MAX]);

/* Does ROOT/data/<rel> exist (not following a final symbolic link)? */
bool it_data_exists(const struct mg_server *s, const char *rel);

/* Entries (other than . and ..) of a data directory, 0 when it is missing. */
size_t it_data_dir_count(const struct mg_server *s, const char *rel);

/* Run SQL on the server's database (DIR/modelgate.db with the SQLite C API, or
 * its PostgreSQL database with libpq); the server must be stopped. Returns the
 * rows the (last) statement changed. */
int it_sql_exec(struct mg_server *s, const char *sql);

#endif
