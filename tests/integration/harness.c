/*
 * harness.c - see harness.h.
 */
#include "harness.h"

#include <dirent.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sqlite3.h>

#include "base/util.h"
#include "sys.h"
#include "tests/skip.h"

#define IT_BODY_MAX (256u << 20) /* responses we buffer; blobs in tests are small */
#define IT_WAIT_MS 20000         /* start-up and shutdown, before it_scaled_ms() */
#define IT_POLL_MS 5

/* curl_global_init/cleanup pairing across servers of one test program. */
static int it_curl_users;

/* ---- the program's verdict (M29; see harness.h) ----------------------- */

static bool it_failed;            /* a harness check failed outside a test */
static unsigned it_skipped;       /* tests that it_skip()ped */
static bool it_verdict_given;     /* it_main_result() ran */
static struct mg_server *it_live; /* servers not yet freed, newest first */
static bool it_atexit_registered;

void it_harness_fail(const char *fmt, ...)
{
    va_list ap;

    it_failed = true;
    fputs("harness: FAILED: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

bool it_harness_failed(void)
{
    return it_failed;
}

bool it_require_all(void)
{
    return mg_require_all();
}

void it_skip(const char *fmt, ...)
{
    char why[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (it_require_all())
        fail_msg("%s, and MG_REQUIRE_ALL=1 forbids skipping", why);
    it_skipped++;
    print_message("(skipped: %s)\n", why);
    skip();
}

void it_not_applicable(const char *fmt, ...)
{
    char why[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    print_message("(not applicable here: %s)\n", why);
    skip();
}

static void it_free_live(void)
{
    while (it_live != NULL) {
        struct mg_server *s = it_live;

        print_error("harness: a server (%s) was never freed; stopping it now\n", s->root);
        it_server_free(&s);
    }
}

int it_main_result(int cmocka_rc)
{
    it_verdict_given = true;
    it_free_live();
    if (cmocka_rc != 0 || it_failed) {
        if (cmocka_rc == 0)
            print_error("harness: the program FAILED (a check outside the tests failed; see "
                        "\"harness: FAILED\" above)\n");
        return 1;
    }
    if (it_skipped > 0) {
        print_message("harness: %u test(s) skipped; exit %d\n", it_skipped, MG_SKIP_EXIT);
        return MG_SKIP_EXIT;
    }
    return 0;
}

/* The safety net for a main that does not return it_main_result(): servers still running
 * are stopped and checked, and a harness failure turns the exit status into 1. */
static void it_at_exit(void)
{
    it_free_live();
    if (it_failed) {
        if (!it_verdict_given)
            print_error("harness: the program FAILED (see \"harness: FAILED\" above)\n");
        fflush(NULL);
        _exit(1);
    }
}

bool it_sanitized(void)
{
    const char *v = getenv("MG_SANITIZE");
    return v != NULL && strcmp(v, "1") == 0;
}

void it_server_allow_errors(struct mg_server *s, const char *part)
{
    if (s->nerrors_allowed >= sizeof(s->errors_allowed) / sizeof(s->errors_allowed[0]))
        fail_msg("it_server_allow_errors: too many patterns");
    s->errors_allowed[s->nerrors_allowed++] = strdup(part);
}

/* ---- daemon lifecycle ----------------------------------------------- */

static const char *it_binary(void)
{
    const char *b = getenv("MODELGATED");

    if (b == NULL || *b == '\0')
        fail_msg("MODELGATED is not set: run under ctest, or export "
                 "MODELGATED=/path/to/modelgated");
    if (access(b, X_OK) != 0)
        fail_msg("MODELGATED=%s is not an executable file: %s", b, strerror(errno));
    return b;
}

void it_server_dump_log(const struct mg_server *s, size_t max)
{
    char *buf;
    ssize_t n;
    off_t size;
    int fd = open(s->log_path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        print_error("(no server log at %s)\n", s->log_path);
        return;
    }
    size = lseek(fd, 0, SEEK_END);
    if (size > (off_t)max)
        lseek(fd, size - (off_t)max, SEEK_SET);
    else
        lseek(fd, 0, SEEK_SET);
    buf = malloc(max + 1);
    if (buf != NULL) {
        n = read(fd, buf, max);
        if (n > 0) {
            buf[n] = '\0';
            print_error("---- server log (%s, last %zd bytes) ----\n%s\n---- end of log ----\n",
                        s->log_path, n, buf);
        }
        free(buf);
    }
    close(fd);
}

/* Read a small file whole; NULL if missing. Strips one trailing newline. */
static char *it_read_small(const char *path, bool *complete)
{
    char buf[512];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *complete = false;
    if (fd < 0)
        return NULL;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    if (buf[n - 1] == '\n') {
        *complete = true;
        buf[n - 1] = '\0';
    }
    return strdup(buf);
}

static void it_spawn(struct mg_server *s)
{
    const char *bin = it_binary();
    const char *argv[8 + IT_MAX_ARGS];
    size_t argc = 0;
    int64_t deadline;
    pid_t pid;
    char *text;
    bool complete;

    argv[argc++] = bin;
    argv[argc++] = "--listen";
    argv[argc++] = "127.0.0.1:0";
    argv[argc++] = "--data-dir";
    argv[argc++] = s->data_dir;
    argv[argc++] = "--port-file";
    argv[argc++] = s->port_file;
    for (size_t i = 0; s->args[i] != NULL; i++)
        argv[argc++] = s->args[i];
    argv[argc] = NULL;

    if (unlink(s->port_file) != 0 && errno != ENOENT)
        fail_msg("unlink %s: %s", s->port_file, strerror(errno));

    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDONLY);

        /* A crashed test program must not leave daemons behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (log < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        dprintf(2, "harness: exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    s->pid = pid;

    /* The port file appears (atomically) once the server accepts connections. */
    deadline = it_deadline(IT_WAIT_MS);
    for (;;) {
        int status;
        pid_t w;

        text = it_read_small(s->port_file, &complete);
        if (text != NULL && complete)
            break;
        free(text);
        w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            s->pid = 0;
            it_server_dump_log(s, 8192);
            it_harness_fail("modelgated exited during start-up (status 0x%x)", status);
            fail_msg("modelgated exited during start-up (status 0x%x); see the log above", status);
        }
        if (it_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            s->pid = 0;
            it_server_dump_log(s, 8192);
            it_harness_fail("modelgated wrote no port file %s", s->port_file);
            fail_msg("modelgated wrote no port file %s within %lld ms", s->port_file,
                     (long long)it_scaled_ms(IT_WAIT_MS));
        }
        it_pause_ms(IT_POLL_MS);
    }
    {
        int64_t port;

        if (!mg_parse_i64(text, 1, 65535, &port))
            fail_msg("port file %s holds '%s', not a port number", s->port_file, text);
        s->port = (int)port;
    }
    free(text);
    snprintf(s->base_url, sizeof(s->base_url), "http://127.0.0.1:%d", s->port);

    /* The admin token is written on first start, before serving; poll anyway. */
    {
        char path[IT_PATH_MAX];

        it_data_path(s, "admin.token", path);
        for (;;) {
            text = it_read_small(path, &complete);
            if (text != NULL && complete)
                break;
            free(text);
            if (it_now_ms() > deadline) {
                it_server_dump_log(s, 8192);
                fail_msg("no complete admin token in %s", path);
            }
            it_pause_ms(IT_POLL_MS);
        }
        if (strlen(text) >= sizeof(s->admin_token))
            fail_msg("admin token in %s is %zu bytes long", path, strlen(text));
        snprintf(s->admin_token, sizeof(s->admin_token), "%s", text);
        free(text);
    }
}

bool it_on_postgres(void)
{
    const char *dir = getenv("MG_PG_DIR");

    return dir != NULL && *dir != '\0';
}

void it_sqlite_only(void)
{
    if (it_on_postgres())
        it_not_applicable("a test of the embedded SQLite database");
}

/* The user scripts/pg-test.sh runs PostgreSQL as (and trusts). */
static const char *pg_user(void)
{
    struct passwd *pw;

    if (getuid() == 0)
        return "nobody";
    pw = getpwuid(getuid());
    return pw ? pw->pw_name : "postgres";
}

/* Run one statement as the test cluster's superuser in its postgres database. */
static void pg_admin(const char *sql)
{
    char url[IT_PATH_MAX + 128];
    PGconn *c;
    PGresult *r;

    snprintf(url, sizeof(url), "postgresql:///postgres?host=%s&user=%s", getenv("MG_PG_DIR"),
             pg_user());
    c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("test PostgreSQL at %s: %s", url, PQerrorMessage(c));
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

void it_pg_admin(const char *sql)
{
    pg_admin(sql);
}

/* A fresh database for s, and --database naming it (unless the test gave one). */
static void pg_database_for(struct mg_server *s, size_t nargs)
{
    static unsigned seq;
    char name[64], sql[128];

    for (size_t i = 0; i < nargs; i++) {
        if (strcmp(s->args[i], "--database") == 0)
            return;
    }
    if (nargs + 2 >= IT_MAX_ARGS)
        fail_msg("too many extra arguments");
    snprintf(name, sizeof(name), "it_%d_%u", (int)getpid(), ++seq);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s OWNER " IT_PG_ROLE, name);
    pg_admin(sql);
    snprintf(s->database, sizeof(s->database), "postgresql:///%s?host=%s&user=" IT_PG_ROLE, name,
             getenv("MG_PG_DIR"));
    s->args[nargs] = strdup("--database");
    s->args[nargs + 1] = strdup(s->database);
    s->args[nargs + 2] = NULL;
}

const char *it_blob_kind(void)
{
    static char kind[8];
    char path[IT_PATH_MAX];
    const char *dir = getenv("MG_BLOB_DIR");
    FILE *f;

    if (dir == NULL || *dir == '\0')
        return "file";
    /* read each time: a test may switch servers */
    snprintf(path, sizeof(path), "%s/kind", dir);
    if ((f = fopen(path, "re")) == NULL || fscanf(f, "%7s", kind) != 1)
        fail_msg("MG_BLOB_DIR=%s holds no blob-test.sh server", dir);
    fclose(f);
    return kind;
}

/* A blob-test.sh server's port. */
static long blob_port(void)
{
    char path[IT_PATH_MAX];
    long port = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/port", getenv("MG_BLOB_DIR"));
    if ((f = fopen(path, "re")) == NULL || fscanf(f, "%ld", &port) != 1)
        fail_msg("cannot read %s", path);
    fclose(f);
    return port;
}

/* --blobs (a prefix or repository of the server's own) and --blobs-credentials. */
static size_t blobs_for(struct mg_server *s, size_t n, const struct mg_server *first)
{
    static unsigned seq;
    char prefix[64], creds[IT_PATH_MAX];
    struct stat st;

    for (size_t i = 0; i < n; i++) {
        if (strcmp(s->args[i], "--blobs") == 0)
            return n;
    }
    if (strcmp(it_blob_kind(), "file") == 0)
        return n;
    if (n + 4 >= IT_MAX_ARGS)
        fail_msg("too many extra arguments");
    snprintf(prefix, sizeof(prefix), "it%dx%u", (int)getpid(), ++seq);
    if (first != NULL && first->blobs[0]) /* replicas share one backend */
        snprintf(s->blobs, sizeof(s->blobs), "%s", first->blobs);
    else if (strcmp(it_blob_kind(), "s3") == 0)
        snprintf(s->blobs, sizeof(s->blobs),
                 "s3://mgtest/%s?endpoint=http://127.0.0.1:%ld&region=us-east-1&path_style=true",
                 prefix, blob_port());
    else
        snprintf(s->blobs, sizeof(s->blobs), "oci://127.0.0.1:%ld/mg/%s?insecure=true", blob_port(),
                 prefix);
    s->args[n++] = strdup("--blobs");
    s->args[n++] = strdup(s->blobs);
    snprintf(creds, sizeof(creds), "%s/credentials", getenv("MG_BLOB_DIR"));
    if (stat(creds, &st) == 0 && st.st_size > 0) {
        s->args[n++] = strdup("--blobs-credentials");
        s->args[n++] = strdup(creds);
    }
    s->args[n] = NULL;
    return n;
}

/* The credentials of the blob server ("user:secret"), or "" when none. */
static void blob_credentials(char *out, size_t outsz)
{
    char path[IT_PATH_MAX];
    FILE *f;
    size_t n = 0;

    out[0] = '\0';
    snprintf(path, sizeof(path), "%s/credentials", getenv("MG_BLOB_DIR"));
    if ((f = fopen(path, "re")) != NULL) {
        n = fread(out, 1, outsz - 1, f);
        fclose(f);
    }
    out[n] = '\0';
}

/* One request to the blob server: status, and the body into *body (malloc'd) if wanted. */
static long blob_server_request(const char *method, const char *url, char **body)
{
    char creds[256];
    CURL *c = curl_easy_init();
    long status = 0;
    FILE *mem = NULL;
    char *buf = NULL;
    size_t len = 0;

    if (c == NULL || (mem = open_memstream(&buf, &len)) == NULL)
        fail_msg("out of memory");
    blob_credentials(creds, sizeof(creds));
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, mem);
    if (creds[0] && strcmp(it_blob_kind(), "s3") == 0) {
        struct curl_slist *h = curl_slist_append(
            NULL, "x-amz-content-sha256: "
                  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:s3");
        curl_easy_setopt(c, CURLOPT_USERPWD, creds);
        if (curl_easy_perform(c) != CURLE_OK)
            fail_msg("%s %s failed", method, url);
        curl_slist_free_all(h);
    } else {
        if (creds[0]) {
            curl_easy_setopt(c, CURLOPT_USERPWD, creds);
            curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        }
        if (curl_easy_perform(c) != CURLE_OK)
            fail_msg("%s %s failed", method, url);
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    fclose(mem);
    if (body)
        *body = buf;
    else
        free(buf);
    return status;
}

/* The server's s3 prefix or oci repository (from its --blobs URL). */
static void blobs_prefix(const struct mg_server *s, char *out, size_t outsz)
{
    const char *p = strcmp(it_blob_kind(), "s3") == 0 ? strstr(s->blobs, "mgtest/") + 7
                                                      : strstr(s->blobs, "/mg/") + 4;

    snprintf(out, outsz, "%.*s", (int)strcspn(p, "?"), p);
}

bool it_blob_stored(struct mg_server *s, const char *digest)
{
    char url[IT_PATH_MAX + 256], prefix[128];

    if (s->blobs[0] == '\0') {
        char rel[128];
        snprintf(rel, sizeof(rel), "blobs/sha256/%.2s/%s", digest + 7, digest + 7);
        return it_data_exists(s, rel);
    }
    blobs_prefix(s, prefix, sizeof(prefix));
    if (strcmp(it_blob_kind(), "s3") == 0)
        snprintf(url, sizeof(url), "http://127.0.0.1:%ld/mgtest/%s/sha256/%s", blob_port(), prefix,
                 digest + 7);
    else
        snprintf(url, sizeof(url), "http://127.0.0.1:%ld/v2/mg/%s/blobs/%s", blob_port(), prefix,
                 digest);
    return blob_server_request("HEAD", url, NULL) == 200;
}

size_t it_blob_leftovers(struct mg_server *s)
{
    char url[IT_PATH_MAX + 256], prefix[128], *body = NULL, *p;
    size_t n = 0;

    if (s->blobs[0] == '\0')
        return it_data_dir_count(s, "blobs/tmp");
    blobs_prefix(s, prefix, sizeof(prefix));
    if (strcmp(it_blob_kind(), "oci") == 0) {
        /* The registry's API lists no upload sessions, but its storage (blob-test.sh: a
         * filesystem root in MG_BLOB_DIR) keeps one directory per session under the
         * repository's _uploads/ (M29). */
        char repo[IT_PATH_MAX], uploads[IT_PATH_MAX + 16];
        struct stat st;
        DIR *d;
        struct dirent *e;

        it_fmt(repo, sizeof(repo), "%s/data/docker/registry/v2/repositories/mg/%s",
               getenv("MG_BLOB_DIR"), prefix);
        it_fmt(uploads, sizeof(uploads), "%s/_uploads", repo);
        if ((d = opendir(uploads)) == NULL) {
            /* no session was ever opened: the repository itself may not exist either, but
             * its parent must, or this is looking in the wrong place */
            char parent[IT_PATH_MAX];

            it_fmt(parent, sizeof(parent), "%s/data/docker/registry/v2", getenv("MG_BLOB_DIR"));
            if (stat(parent, &st) != 0)
                fail_msg("it_blob_leftovers: no registry storage at %s: %s", parent,
                         strerror(errno));
            return 0;
        }
        /* A session the registry still holds has its startedat file (what its upload
         * purger reads); a cancelled one is gone but for a stray hashstates/ that
         * distribution 2.8 writes back after the cancel. */
        while ((e = readdir(d)) != NULL) {
            char started[IT_PATH_MAX * 2];

            if (e->d_name[0] == '.')
                continue;
            snprintf(started, sizeof(started), "%s/%s/startedat", uploads, e->d_name);
            if (stat(started, &st) == 0)
                n++;
        }
        closedir(d);
        return n;
    }
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/mgtest?prefix=%s%%2F&uploads=", blob_port(),
             prefix);
    if (blob_server_request("GET", url, &body) != 200)
        fail_msg("ListMultipartUploads: %s", body ? body : "");
    for (p = body; (p = strstr(p, "<Upload>")) != NULL; p++)
        n++;
    free(body);
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/mgtest?list-type=2&prefix=%s%%2Fuploads%%2F",
             blob_port(), prefix);
    if (blob_server_request("GET", url, &body) != 200)
        fail_msg("ListObjectsV2: %s", body ? body : "");
    for (p = body; (p = strstr(p, "<Contents>")) != NULL; p++)
        n++;
    free(body);
    return n;
}

/* A new server object with its scratch space; joins first's database when first is given;
 * admin_token: the admin secret a server on an existing database will not write. */
static struct mg_server *it_server_new(const char *const *extra_args, const struct mg_server *first,
                                       const char *admin_token)
{
    struct mg_server *s = calloc(1, sizeof(*s));
    const char *tmp = getenv("TMPDIR");
    size_t n = 0;

    it_binary(); /* fail before making anything to clean up */
    if (s == NULL)
        fail_msg("out of memory");
    if (first != NULL && first->database[0] == '\0')
        fail_msg("it_server_join: the first server runs on SQLite; replicas need PostgreSQL");
    if (extra_args != NULL) {
        for (; extra_args[n] != NULL; n++) {
            if (n + 1 >= IT_MAX_ARGS)
                fail_msg("too many extra arguments");
            s->args[n] = strdup(extra_args[n]);
        }
    }
    s->args[n] = NULL;
    if (first != NULL) {
        if (n + 2 >= IT_MAX_ARGS)
            fail_msg("too many extra arguments");
        snprintf(s->database, sizeof(s->database), "%s", first->database);
        s->database_joined = true;
        s->args[n++] = strdup("--database");
        s->args[n++] = strdup(first->database);
        s->args[n] = NULL;
    } else if (it_on_postgres()) {
        pg_database_for(s, n);
    }
    for (n = 0; s->args[n] != NULL; n++)
        ;
    n = blobs_for(s, n, first);

    snprintf(s->root, sizeof(s->root), "%s/mg-it.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(s->root) == NULL)
        fail_msg("mkdtemp %s: %s", s->root, strerror(errno));
    if (snprintf(s->data_dir, sizeof(s->data_dir), "%s/data", s->root) >= IT_PATH_MAX ||
        snprintf(s->port_file, sizeof(s->port_file), "%s/port", s->root) >= IT_PATH_MAX ||
        snprintf(s->log_path, sizeof(s->log_path), "%s/server.log", s->root) >= IT_PATH_MAX)
        fail_msg("TMPDIR is too long");
    if (mkdir(s->data_dir, 0700) != 0)
        fail_msg("mkdir %s: %s", s->data_dir, strerror(errno));
    if (first != NULL) {
        /* The database has its admin token already, so this daemon writes none: give it
         * the first one's (it_spawn reads it from here). */
        char path[IT_PATH_MAX], line[sizeof(first->admin_token) + 1];
        int fd, len = snprintf(line, sizeof(line), "%s\n", first->admin_token);

        it_data_path(s, "admin.token", path);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, line, (size_t)len) != len || close(fd) != 0)
            fail_msg("cannot write %s: %s", path, strerror(errno));
    }

    if (it_curl_users++ == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        fail_msg("curl_global_init failed");
    s->curl = curl_easy_init();
    if (s->curl == NULL)
        fail_msg("curl_easy_init failed");

    if (admin_token != NULL) {
        char path[IT_PATH_MAX], line[160];

        it_data_path(s, "admin.token", path);
        it_write_file(path, it_fmt(line, sizeof(line), "%s\n", admin_token));
    }
    if (!it_atexit_registered) {
        it_atexit_registered = true;
        atexit(it_at_exit);
    }
    s->live_next = it_live;
    it_live = s;
    it_spawn(s);
    return s;
}

struct mg_server *it_server_start(const char *const *extra_args)
{
    return it_server_new(extra_args, NULL, NULL);
}

struct mg_server *it_server_start_admin(const char *const *extra_args, const char *admin_token)
{
    return it_server_new(extra_args, NULL, admin_token);
}

struct mg_server *it_server_join(const struct mg_server *first, const char *const *extra_args)
{
    return it_server_new(extra_args, first, NULL);
}

/* How long a daemon may take to exit after SIGTERM: MG_IT_STOP_MS (the harness self-test's
 * hanging daemon) or IT_WAIT_MS, scaled for the sanitizers. */
static int64_t it_stop_deadline(void)
{
    const char *v = getenv("MG_IT_STOP_MS");
    int64_t ms;

    if (v != NULL && mg_parse_i64(v, 1, 600000, &ms))
        return it_now_ms() + ms;
    return it_deadline(IT_WAIT_MS);
}

/* SIGTERM, wait until the deadline (then SIGKILL). Returns true when the daemon exited 0 in
 * time; else why (into why) and false. Never jumps out. */
static bool it_stop_checked(struct mg_server *s, char *why, size_t whysz)
{
    int64_t deadline;
    int status = 0;
    pid_t pid = s->pid;

    why[0] = '\0';
    if (pid == 0)
        return true;
    /* Connections kept alive by curl would only delay a graceful shutdown. */
    if (s->curl != NULL)
        curl_easy_cleanup(s->curl);
    s->curl = curl_easy_init();

    if (kill(pid, SIGTERM) != 0) {
        snprintf(why, whysz, "kill(%d, SIGTERM): %s", (int)pid, strerror(errno));
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        s->pid = 0;
        return false;
    }
    deadline = it_stop_deadline();
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);

        if (w == pid)
            break;
        if (w < 0) {
            snprintf(why, whysz, "waitpid(%d): %s", (int)pid, strerror(errno));
            s->pid = 0;
            return false;
        }
        if (it_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            s->pid = 0;
            snprintf(why, whysz,
                     "modelgated did not exit within its shutdown deadline after "
                     "SIGTERM; killed");
            return false;
        }
        it_pause_ms(IT_POLL_MS);
    }
    s->pid = 0;
    if (WIFSIGNALED(status)) {
        snprintf(why, whysz, "modelgated died of signal %d after SIGTERM", WTERMSIG(status));
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, whysz, "modelgated exited with status %d after SIGTERM, want 0",
                 WEXITSTATUS(status));
        return false;
    }
    return true;
}

void it_server_stop(struct mg_server *s)
{
    char why[256];
    bool ok = it_stop_checked(s, why, sizeof(why));

    if (s->curl == NULL)
        fail_msg("curl_easy_init failed");
    if (ok)
        return;
    it_server_dump_log(s, 8192);
    it_harness_fail("%s (log %s)", why, s->log_path);
    fail_msg("%s", why);
}

void it_server_restart(struct mg_server *s)
{
    it_server_stop(s);
    it_spawn(s);
}

static void it_check_log(const struct mg_server *s);

void it_server_free(struct mg_server **sp)
{
    struct mg_server *s = *sp;

    if (s == NULL)
        return;
    for (struct mg_server **p = &it_live; *p != NULL; p = &(*p)->live_next) {
        if (*p == s) {
            *p = s->live_next;
            break;
        }
    }
    if (s->pid != 0) {
        /* Every daemon is stopped with a checked exit (M29): a leak, a crash or a hang at
         * shutdown fails the program even when it is freed from a teardown. */
        char why[256];

        if (!it_stop_checked(s, why, sizeof(why))) {
            it_server_dump_log(s, 8192);
            it_harness_fail("%s (log %s)", why, s->log_path);
        }
    }
    it_check_log(s);
    if (getenv("MG_IT_KEEP_ERRORS")) {
        /* Debugging aid: collect the server's "error:" lines (internal errors with details). */
        char cmd[IT_PATH_MAX * 2 + 64];

        snprintf(cmd, sizeof(cmd), "grep -h '^error:' '%s' >> '%s' 2>/dev/null", s->log_path,
                 getenv("MG_IT_KEEP_ERRORS"));
        if (system(cmd) < 0)
            print_error("harness: could not keep the error lines\n");
    }
    for (size_t i = 0; i < s->nsecrets; i++)
        free(s->secrets[i]);
    free(s->secrets);
    for (size_t i = 0; i < s->nerrors_allowed; i++)
        free(s->errors_allowed[i]);
    it_release(s);
    if (s->curl != NULL)
        curl_easy_cleanup(s->curl);
    if (--it_curl_users == 0)
        curl_global_cleanup();
    it_rmtree(s->root);
    if (s->database[0] != '\0' && !s->database_joined) {
        char sql[160];
        const char *name = s->database + strlen("postgresql:///");

        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %.*s WITH (FORCE)",
                 (int)strcspn(name, "?"), name);
        pg_admin(sql);
    }
    for (size_t i = 0; s->args[i] != NULL; i++)
        free(s->args[i]);
    free(s);
    *sp = NULL;
}

void it_server_kill9(struct mg_server *s)
{
    int status;

    if (s->pid == 0)
        fail_msg("the server is not running");
    if (kill(s->pid, SIGKILL) != 0)
        fail_msg("kill -9 %d: %s", (int)s->pid, strerror(errno));
    waitpid(s->pid, &status, 0);
    s->pid = 0;
}

long it_server_peak_rss_kib(const struct mg_server *s)
{
    char path[64];
    char line[256];
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)s->pid);
    f = fopen(path, "re");
    if (f == NULL)
        fail_msg("open %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    if (kib < 0)
        fail_msg("no VmHWM in %s", path);
    return kib;
}

/* ---- cmocka glue ---------------------------------------------------- */

int it_group_setup(void **state)
{
    *state = it_server_start(NULL);
    return 0;
}

int it_group_teardown(void **state)
{
    struct mg_server *s = *state;
    bool failed = it_failed;

    /* it_server_free stops the server with the checks of it_server_stop, without jumping out
     * (the log is checked and ROOT removed either way); a failure fails the program. */
    it_server_free(&s);
    *state = NULL;
    return !failed && it_failed ? -1 : 0;
}

int it_test_teardown(void **state)
{
    struct mg_server *s = *state;

    if (s != NULL)
        it_release(s);
    return 0;
}

/* ---- HTTP ----------------------------------------------------------- */

static size_t it_on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct it_resp *r = ud;
    size_t n = size * nmemb;
    char *nb;

    if (n > IT_BODY_MAX || r->len > IT_BODY_MAX - n)
        return 0;
    nb = realloc(r->body, r->len + n + 1);
    if (nb == NULL)
        return 0;
    memcpy(nb + r->len, p, n);
    r->body = nb;
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

static void it_headers_clear(struct it_resp *r)
{
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    r->n_headers = 0;
}

static size_t it_on_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct it_resp *r = ud;
    size_t n = size * nmemb;
    size_t end = n;
    const char *colon;
    size_t vstart;

    /* An interim response (100 Continue) precedes the final one. */
    if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        it_headers_clear(r);
        return n;
    }
    while (end > 0 && (p[end - 1] == '\r' || p[end - 1] == '\n'))
        end--;
    colon = memchr(p, ':', end);
    if (colon == NULL || r->n_headers >= IT_MAX_HEADERS)
        return n;
    vstart = (size_t)(colon - p) + 1;
    while (vstart < end && (p[vstart] == ' ' || p[vstart] == '\t'))
        vstart++;
    r->headers[r->n_headers].name = strndup(p, (size_t)(colon - p));
    r->headers[r->n_headers].value = strndup(p + vstart, end - vstart);
    r->n_headers++;
    return n;
}

const char *it_header(const struct it_resp *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (r->headers[i].name != NULL && strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

static struct it_resp *it_resp_new(struct mg_server *s, const char *method, const char *path)
{
    struct it_resp *r = calloc(1, sizeof(*r));

    if (r == NULL)
        fail_msg("out of memory");
    snprintf(r->desc, sizeof(r->desc), "%s %s", method, path);
    r->next = s->resps;
    s->resps = r;
    return r;
}

static void it_resp_destroy(struct it_resp *r)
{
    it_headers_clear(r);
    free(r->body);
    json_decref(r->json);
    free(r);
}

void it_resp_free(struct mg_server *s, struct it_resp **rp)
{
    struct it_resp **pp;

    if (*rp == NULL)
        return;
    for (pp = &s->resps; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == *rp) {
            *pp = (*rp)->next;
            break;
        }
    }
    it_resp_destroy(*rp);
    *rp = NULL;
}

void it_release(struct mg_server *s)
{
    while (s->resps != NULL) {
        struct it_resp *r = s->resps;

        s->resps = r->next;
        it_resp_destroy(r);
    }
}

static struct curl_slist *it_slist_add(struct curl_slist *l, const char *line)
{
    struct curl_slist *n = curl_slist_append(l, line);

    if (n == NULL)
        fail_msg("curl_slist_append failed");
    return n;
}

static void it_prepare(struct mg_server *s, CURL *c, struct it_resp *r, const char *path,
                       long timeout)
{
    char url[IT_PATH_MAX + 64];

    if (s->pid == 0)
        fail_msg("%s: the server is not running", r->desc);
    if (strlen(path) > IT_PATH_MAX)
        fail_msg("path too long for the harness");
    snprintf(url, sizeof(url), "%s%s", s->base_url, path);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, it_on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, it_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
}

/* Remember a secret the server issued, so that it_server_free can check the server never
 * wrote it to its output. */
static void it_note_secret(struct mg_server *s, const char *v)
{
    char **n;

    if (v == NULL || strlen(v) < 16)
        return;
    for (size_t i = 0; i < s->nsecrets; i++)
        if (strcmp(s->secrets[i], v) == 0)
            return;
    if ((n = realloc(s->secrets, (s->nsecrets + 1) * sizeof(*n))) == NULL ||
        (n[s->nsecrets] = strdup(v)) == NULL)
        fail_msg("out of memory");
    s->secrets = n;
    s->nsecrets++;
}

/* Secrets in a reply: "token" (API tokens), "secret" (webhook secrets), "csrf" (sessions). */
static void it_note_secrets(struct mg_server *s, const json_t *j)
{
    static const char *const keys[] = {"token", "secret", "csrf"};

    for (size_t k = 0; json_is_object(j) && k < sizeof(keys) / sizeof(keys[0]); k++)
        it_note_secret(s, json_string_value(json_object_get(j, keys[k])));
}

/* The server's whole output (its log) holds none of the secrets it issued. */
/* Is this "error:" line one the test expected (it_server_allow_errors)? */
static bool it_error_allowed(const struct mg_server *s, const char *line, size_t len)
{
    for (size_t i = 0; i < s->nerrors_allowed; i++) {
        if (memmem(line, len, s->errors_allowed[i], strlen(s->errors_allowed[i])) != NULL)
            return true;
    }
    return false;
}

/*
 * The server log, whole, after the daemon stopped (M29): no secret it issued, no sanitizer
 * report ("runtime error:", LeakSanitizer, AddressSanitizer), and no more "error:" lines
 * (internal errors, what a 500 logs) than the test expected. A finding fails the program.
 */
static void it_check_log(const struct mg_server *s)
{
    static const char *const reports[] = {"runtime error:", "LeakSanitizer", "AddressSanitizer",
                                          "ThreadSanitizer", "MemorySanitizer"};
    size_t len = 0, errors = 0;
    char *log = it_read_file(s->log_path, &len);
    const char *line, *end;

    if (log == NULL)
        return;
    if (s->admin_token[0] != '\0' && strstr(log, s->admin_token) != NULL)
        it_harness_fail("the server log holds the admin token (%s)", s->log_path);
    for (size_t i = 0; i < s->nsecrets; i++) {
        if (strstr(log, s->secrets[i]) != NULL)
            it_harness_fail("the server log holds a secret it issued (%.6s...) (%s)", s->secrets[i],
                            s->log_path);
    }
    for (line = log; line < log + len; line = end + 1) {
        end = memchr(line, '\n', (size_t)(log + len - line));
        if (end == NULL)
            end = log + len;
        for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
            if (memmem(line, (size_t)(end - line), reports[i], strlen(reports[i])) != NULL) {
                it_harness_fail("the server log has a sanitizer report (%s): %.*s", s->log_path,
                                (int)(end - line), line);
                break;
            }
        }
        if ((size_t)(end - line) >= 6 && memcmp(line, "error:", 6) == 0 &&
            !it_error_allowed(s, line, (size_t)(end - line)) && ++errors > s->errors_expected)
            it_harness_fail("an unexpected internal error in the server log (%s; the test "
                            "expected %zu): %.*s",
                            s->log_path, s->errors_expected, (int)(end - line), line);
    }
    free(log);
}

/* ---- every JSON reply checked against the OpenAPI document --------------------------- */

/*
 * M14, M22: the document (OpenAPI 3.1) must describe what the server really sends. Every JSON reply
 * the harness receives is checked against the schema documented for its route (path template and
 * method) and status: an undocumented route, method or status, a missing required property, a wrong
 * type, an enum value not listed, a null where none is allowed, or a property a closed object does
 * not list fails the test, naming the route, status and the JSON path. Replies to paths no route
 * matches (hostile paths, unknown endpoints) must still be the Error shape. Set MG_SKIP_SCHEMA=1 to
 * turn it off while debugging.
 */
static json_t *it_doc; /* the OpenAPI document, loaded once per process */

static const json_t *it_doc_load(void)
{
    const char *src = getenv("MG_SOURCE_DIR"), *version;
    char path[IT_PATH_MAX];
    json_error_t e;

    if (it_doc != NULL)
        return it_doc;
    /* Under MG_REQUIRE_ALL=1 the check stays on: MG_SKIP_SCHEMA is ignored (it_validate_reply)
     * and the document must be found. */
    if (src == NULL) {
        if (it_require_all())
            fail_msg("MG_SOURCE_DIR is not set: no OpenAPI document to check replies against, "
                     "and MG_REQUIRE_ALL=1 forbids skipping the check");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/schema/openapi.json", src);
    it_doc = json_load_file(path, 0, &e);
    if (it_doc == NULL)
        fail_msg("cannot load %s: %s", path, e.text);
    version = json_string_value(json_object_get(it_doc, "openapi"));
    if (version == NULL || strncmp(version, "3.1.", 4) != 0)
        fail_msg("%s is not OpenAPI 3.1: the replies are checked as 3.1 reads them", path);
    return it_doc;
}

static const json_t *it_deref(const json_t *node)
{
    const char *ref;
    int guard = 0;

    while (node && (ref = json_string_value(json_object_get(node, "$ref"))) != NULL &&
           guard++ < 16) {
        const json_t *cur = it_doc;
        char buf[256], *tok, *save = NULL;

        if (strncmp(ref, "#/", 2) != 0)
            return NULL;
        snprintf(buf, sizeof(buf), "%s", ref + 2);
        for (tok = strtok_r(buf, "/", &save); tok && cur; tok = strtok_r(NULL, "/", &save))
            cur = json_object_get(cur, tok);
        node = cur;
    }
    return node;
}

static bool it_type_name_ok(const char *type, const json_t *v)
{
    if (strcmp(type, "null") == 0)
        return json_is_null(v);
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    return false; /* not a JSON Schema type: the document is wrong */
}

/* "type" is one name or a list of names (OpenAPI 3.1: ["string", "null"]). */
static bool it_type_ok(const json_t *type, const json_t *v)
{
    const json_t *t;
    size_t i;

    if (json_is_string(type))
        return it_type_name_ok(json_string_value(type), v);
    json_array_foreach(type, i, t)
    {
        if (json_is_string(t) && it_type_name_ok(json_string_value(t), v))
            return true;
    }
    return false;
}

/*
 * Does v match schema, read literally as OpenAPI 3.1 (JSON Schema 2020-12) reads it? "type"
 * (a name or a list; null only where "null" is listed), "$ref" together with its siblings,
 * allOf (every one), anyOf (at least one), oneOf (exactly one), enum, const, required,
 * properties, additionalProperties (against this level's properties only) and items. A
 * schema still using OpenAPI 3.0's "nullable", which 3.1 dropped (and code generators read
 * as 3.1 does: not reaching into allOf or $ref), fails. On a mismatch, why (with the JSON
 * path) is written and false returned.
 */
static bool it_schema_ok(const json_t *schema, const json_t *v, const char *at, char *why,
                         size_t cap)
{
    const json_t *sub, *props, *addl, *en, *items, *type, *ref;
    const char *k;
    char p[512];
    size_t i, matched;
    json_t *x;

    if (!json_is_object(schema))
        return true; /* true or {} */
    if (json_object_get(schema, "nullable") != NULL) {
        snprintf(why, cap, "%s: the schema says \"nullable\", which OpenAPI 3.1 does not have", at);
        return false;
    }
    if ((ref = json_object_get(schema, "$ref")) != NULL) {
        const json_t *target = it_deref(schema);

        if (target == NULL) {
            snprintf(why, cap, "%s: $ref %s does not resolve", at, json_string_value(ref));
            return false;
        }
        if (!it_schema_ok(target, v, at, why, cap))
            return false;
    }
    json_array_foreach(json_object_get(schema, "allOf"), i, sub)
    {
        if (!it_schema_ok(sub, v, at, why, cap))
            return false;
    }
    if ((x = json_object_get(schema, "anyOf")) != NULL) {
        char ignore[256];

        matched = 0;
        json_array_foreach(x, i, sub) matched += it_schema_ok(sub, v, at, ignore, sizeof(ignore));
        if (matched == 0) {
            snprintf(why, cap, "%s: matches none of the documented alternatives (anyOf)", at);
            return false;
        }
    }
    if ((x = json_object_get(schema, "oneOf")) != NULL) {
        char ignore[256];

        matched = 0;
        json_array_foreach(x, i, sub) matched += it_schema_ok(sub, v, at, ignore, sizeof(ignore));
        if (matched != 1) {
            snprintf(why, cap, "%s: matches %zu of the documented alternatives; oneOf wants one",
                     at, matched);
            return false;
        }
    }
    if ((type = json_object_get(schema, "type")) != NULL && !it_type_ok(type, v)) {
        char *t = json_dumps(type, JSON_ENCODE_ANY | JSON_COMPACT);

        if (json_is_null(v))
            snprintf(why, cap, "%s: null, but the document does not allow null here (type %s)", at,
                     t ? t : "?");
        else
            snprintf(why, cap, "%s: not of type %s", at, t ? t : "?");
        free(t);
        return false;
    }
    if (((en = json_object_get(schema, "enum")) != NULL) ||
        (x = json_object_get(schema, "const")) != NULL) {
        bool listed = false;

        if (en != NULL) {
            json_array_foreach(en, i, x) listed = listed || json_equal(x, (json_t *)v);
        } else {
            listed = json_equal(x, (json_t *)v);
        }
        if (!listed) {
            char *t = json_dumps(v, JSON_ENCODE_ANY);

            snprintf(why, cap, "%s: %s is not one of the documented values", at, t ? t : "?");
            free(t);
            return false;
        }
    }
    if (json_is_object(v)) {
        props = json_object_get(schema, "properties");
        json_array_foreach(json_object_get(schema, "required"), i, x)
        {
            if (json_is_string(x) && json_object_get(v, json_string_value(x)) == NULL) {
                snprintf(why, cap, "%s: the required property '%s' is missing", at,
                         json_string_value(x));
                return false;
            }
        }
        addl = json_object_get(schema, "additionalProperties");
        json_object_foreach((json_t *)v, k, x)
        {
            snprintf(p, sizeof(p), "%s.%s", at, k);
            if ((sub = json_object_get(props, k)) != NULL) {
                if (!it_schema_ok(sub, x, p, why, cap))
                    return false;
            } else if (json_is_false(addl)) {
                snprintf(why, cap, "%s: a property the document does not list", p);
                return false;
            } else if (json_is_object(addl) && !it_schema_ok(addl, x, p, why, cap)) {
                return false;
            }
        }
    }
    if (json_is_array(v) && (items = json_object_get(schema, "items")) != NULL) {
        json_array_foreach((json_t *)v, i, x)
        {
            snprintf(p, sizeof(p), "%s[%zu]", at, i);
            if (!it_schema_ok(items, x, p, why, cap))
                return false;
        }
    }
    return true;
}

/* The documented path template for a request path (the one with the most literal
 * segments), or NULL. */
static const char *it_match_path(const json_t *paths, const char *path)
{
    const char *tmpl, *best = NULL;
    const json_t *ops;
    int best_lit = -1;

    json_object_foreach((json_t *)paths, tmpl, ops)
    {
        const char *a = tmpl, *b = path;
        int lit = 0;
        bool ok = true;

        (void)ops;
        while (ok && *a && *b) {
            size_t la = strcspn(a + 1, "/") + 1, lb = strcspn(b + 1, "/") + 1;

            if (a[1] == '{') {
                ok = lb > 1;
            } else {
                ok = la == lb && memcmp(a, b, la) == 0;
                lit++;
            }
            a += la;
            b += lb;
        }
        if (ok && *a == '\0' && *b == '\0' && lit > best_lit) {
            best = tmpl;
            best_lit = lit;
        }
    }
    return best;
}

static void it_validate_reply(const struct it_resp *r)
{
    const json_t *doc, *op = NULL, *resp, *schema;
    const char *tmpl;
    char method[16] = "", path[IT_PATH_MAX + 64], status[8], why[1024] = "";
    const char *env = getenv("MG_SKIP_SCHEMA");

    if ((env && strcmp(env, "1") == 0 && !it_require_all()) || r->json == NULL ||
        (doc = it_doc_load()) == NULL)
        return;
    if (sscanf(r->desc, "%15s %575s", method, path) != 2)
        return;
    path[strcspn(path, "?")] = '\0';
    for (char *m = method; *m; m++)
        *m = (char)tolower((unsigned char)*m);
    snprintf(status, sizeof(status), "%ld", r->status);
    tmpl = it_match_path(json_object_get(doc, "paths"), path);
    if (tmpl != NULL) {
        const json_t *ops = json_object_get(json_object_get(doc, "paths"), tmpl);

        op = json_object_get(ops, method);
        if (op == NULL && strcmp(method, "head") == 0)
            op = json_object_get(ops, "get");
    }
    if (op == NULL) {
        /* no documented operation: only an error may come back, in the Error shape */
        if (r->status < 400)
            fail_msg("%s: status %ld from an operation the OpenAPI document does not have", r->desc,
                     r->status);
        schema = json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                                 "Error");
    } else {
        resp = json_object_get(json_object_get(op, "responses"), status);
        if (resp == NULL)
            resp = json_object_get(json_object_get(op, "responses"), "default");
        if (resp == NULL)
            fail_msg("%s: status %ld is not documented for %s %s", r->desc, r->status, method,
                     tmpl);
        resp = it_deref(resp);
        schema = json_object_get(
            json_object_get(json_object_get(resp, "content"), "application/json"), "schema");
        if (schema == NULL)
            fail_msg("%s: status %ld answered a JSON body the document does not describe: %.300s",
                     r->desc, r->status, r->body);
    }
    if (!it_schema_ok(schema, r->json, "$", why, sizeof(why)))
        fail_msg("%s: status %ld does not match the OpenAPI document (%s %s): %s\nbody: %.600s",
                 r->desc, r->status, method, tmpl ? tmpl : "(no route)", why, r->body);
}

static void it_finish(struct mg_server *s, CURL *c, struct it_resp *r, CURLcode rc)
{
    const char *ct;

    if (rc != CURLE_OK) {
        it_server_dump_log(s, 4096);
        fail_msg("%s: transfer failed: %s", r->desc, curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->body == NULL) {
        r->body = calloc(1, 1);
        if (r->body == NULL)
            fail_msg("out of memory");
    }
    ct = it_header(r, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) == 0 && r->len > 0) {
        json_error_t jerr;

        r->json = json_loadb(r->body, r->len, JSON_DECODE_ANY, &jerr);
        if (r->json == NULL)
            fail_msg("%s: status %ld, Content-Type %s but the body is not JSON (%s): %.400s",
                     r->desc, r->status, ct, jerr.text, r->body);
        it_note_secrets(s, r->json);
        it_validate_reply(r);
    }
}

/* Headers, method and body of one request on handle c; returns the header
 * list, which the caller frees after the transfer. */
static struct curl_slist *it_setup(CURL *c, const struct it_spec *q, const char *const *headers)
{
    struct curl_slist *hl = NULL;
    char line[512];

    if (q->token != NULL) {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", q->token);
        hl = it_slist_add(hl, line);
    }
    if (q->content_type != NULL) {
        snprintf(line, sizeof(line), "Content-Type: %s", q->content_type);
        hl = it_slist_add(hl, line);
    } else {
        hl = it_slist_add(hl, "Content-Type:"); /* no curl default */
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        hl = it_slist_add(hl, headers[i]);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);

    if (strcmp(q->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(q->method, "GET") == 0 && q->body == NULL) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(q->method, "DELETE") == 0 && q->body == NULL) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    } else {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->len);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body != NULL ? q->body : "");
        if (strcmp(q->method, "POST") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
    }
    return hl;
}

struct it_resp *it_request_h(struct mg_server *s, const char *method, const char *path,
                             const char *token, const char *content_type, const void *body,
                             size_t len, const char *const *headers)
{
    const struct it_spec q = {method, path, token, content_type, body, len};
    struct it_resp *r = it_resp_new(s, method, path);
    struct curl_slist *hl;
    CURLcode rc;

    it_prepare(s, s->curl, r, path, 120);
    hl = it_setup(s->curl, &q, headers);
    rc = curl_easy_perform(s->curl);
    curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hl);
    it_finish(s, s->curl, r, rc);
    return r;
}

void it_request_parallel(struct mg_server *s, size_t n, const struct it_spec *specs,
                         struct it_resp **out)
{
    it_request_parallel_at(s, n, specs, NULL, out);
}

void it_request_parallel_at(struct mg_server *s, size_t n, const struct it_spec *specs,
                            const int *start_ms, struct it_resp **out)
{
    CURLM *m = curl_multi_init();
    CURL **handles = calloc(n, sizeof(*handles));
    struct curl_slist **lists = calloc(n, sizeof(*lists));
    int running = 1;
    size_t pending = 0;
    bool *added = calloc(n ? n : 1, sizeof(*added));
    int64_t t0 = it_now_ms();

    if (m == NULL || handles == NULL || lists == NULL || added == NULL)
        fail_msg("out of memory");
    for (size_t i = 0; i < n; i++) {
        handles[i] = curl_easy_init();
        if (handles[i] == NULL)
            fail_msg("curl_easy_init failed");
        out[i] = it_resp_new(s, specs[i].method, specs[i].path);
        it_prepare(s, handles[i], out[i], specs[i].path, 120);
        lists[i] = it_setup(handles[i], &specs[i], NULL);
        /* A connection each: the requests must really be in flight together. */
        curl_easy_setopt(handles[i], CURLOPT_FRESH_CONNECT, 1L);
        if (start_ms != NULL && start_ms[i] > 0) {
            pending++;
        } else {
            curl_multi_add_handle(m, handles[i]);
            added[i] = true;
        }
    }
    while (running > 0 || pending > 0) {
        int wait_ms = 1000;

        for (size_t i = 0; pending > 0 && i < n; i++) {
            int64_t due = t0 + start_ms[i] - it_now_ms();

            if (added[i])
                continue;
            if (due <= 0) {
                curl_multi_add_handle(m, handles[i]);
                added[i] = true;
                pending--;
                continue;
            }
            if (due < wait_ms)
                wait_ms = (int)due;
        }
        if (curl_multi_perform(m, &running) != CURLM_OK)
            fail_msg("curl_multi_perform failed");
        if ((running > 0 || pending > 0) && curl_multi_poll(m, NULL, 0, wait_ms, NULL) != CURLM_OK)
            fail_msg("curl_multi_poll failed");
    }
    for (;;) {
        int left;
        CURLMsg *msg = curl_multi_info_read(m, &left);

        if (msg == NULL)
            break;
        if (msg->msg != CURLMSG_DONE)
            continue;
        for (size_t i = 0; i < n; i++)
            if (handles[i] == msg->easy_handle)
                it_finish(s, handles[i], out[i], msg->data.result);
    }
    for (size_t i = 0; i < n; i++) {
        curl_multi_remove_handle(m, handles[i]);
        curl_easy_cleanup(handles[i]);
        curl_slist_free_all(lists[i]);
    }
    curl_multi_cleanup(m);
    free(handles);
    free(lists);
    free(added);
}

struct it_resp *it_request(struct mg_server *s, const char *method, const char *path,
                           const char *token, const char *content_type, const void *body,
                           size_t len)
{
    return it_request_h(s, method, path, token, content_type, body, len, NULL);
}

struct it_resp *it_jreq(struct mg_server *s, const char *method, const char *path,
                        const char *token, const char *json_text)
{
    return it_request(s, method, path, token, json_text ? "application/json" : NULL, json_text,
                      json_text ? strlen(json_text) : 0);
}

struct it_resp *it_treq(struct mg_server *s, const char *method, const char *path,
                        const char *token, const char *content_type, const char *text)
{
    return it_request(s, method, path, token, content_type, text, strlen(text));
}

struct it_resp *it_jreq_v(struct mg_server *s, const char *method, const char *path,
                          const char *token, json_t *body)
{
    char *text;
    struct it_resp *r;

    if (body == NULL)
        fail_msg("%s %s: the test built no JSON body (json_pack failed?)", method, path);
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (text == NULL)
        fail_msg("json_dumps failed");
    r = it_jreq(s, method, path, token, text);
    free(text);
    return r;
}

unsigned long long it_metric(struct mg_server *s, const char *name)
{
    struct it_resp *r = it_get(s, "/metrics", s->admin_token);
    char key[160];
    const char *p;
    unsigned long long v = 0;

    if (r->status != 200)
        fail_msg("GET /metrics: status %ld", r->status);
    snprintf(key, sizeof(key), "\n%s ", name);
    if ((p = strstr(r->body, key)) == NULL)
        fail_msg("/metrics has no %s", name);
    if (sscanf(p + strlen(key), "%llu", &v) != 1)
        fail_msg("/metrics: %s is not a count", name);
    it_resp_free(s, &r);
    return v;
}

struct it_resp *it_get(struct mg_server *s, const char *path, const char *token)
{
    return it_request(s, "GET", path, token, NULL, NULL, 0);
}

char *it_urlencode(const char *in)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(in);
    char *out = malloc(3 * n + 1);
    size_t o = 0;

    if (out == NULL)
        fail_msg("out of memory");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return out;
}

/* ---- blobs ---------------------------------------------------------- */

static uint64_t it_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void it_pattern(uint32_t seed, uint64_t offset, void *buf, size_t n)
{
    uint8_t *p = buf;

    while (n > 0) {
        uint64_t v = it_mix(((uint64_t)seed << 40) ^ (offset / 8));
        size_t k = offset % 8;
        size_t take = 8 - k < n ? 8 - k : n;
        uint8_t b[8];

        memcpy(b, &v, sizeof(b));
        memcpy(p, b + k, take);
        p += take;
        offset += take;
        n -= take;
    }
}

struct it_gen {
    uint32_t seed;
    uint64_t size;
    uint64_t off;
    uint64_t abort_at; /* fail the transfer once this many bytes were sent */
    EVP_MD_CTX *md;
};

static size_t it_on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    struct it_gen *g = ud;
    size_t n = size * nmemb;

    if (g->off >= g->abort_at)
        return CURL_READFUNC_ABORT;
    if (n > g->size - g->off)
        n = (size_t)(g->size - g->off);
    it_pattern(g->seed, g->off, buf, n);
    if (EVP_DigestUpdate(g->md, buf, n) != 1)
        return CURL_READFUNC_ABORT;
    g->off += n;
    return n;
}

static struct it_resp *it_stream(struct mg_server *s, const char *token, uint64_t size,
                                 uint32_t seed, bool chunked, const char *const *headers,
                                 char digest_out[IT_DIGEST_LEN + 1], uint64_t abort_at,
                                 CURLcode *rc)
{
    struct it_resp *r = it_resp_new(s, "POST", "/api/v1/blobs");
    struct it_gen g = {seed, size, 0, abort_at, EVP_MD_CTX_new()};
    const struct it_spec q = {"POST", "/api/v1/blobs", token, "application/octet-stream", NULL, 0};
    const char *extra[IT_MAX_HEADERS + 2];
    struct curl_slist *hl;
    size_t n = 0;

    if (g.md == NULL || EVP_DigestInit_ex(g.md, EVP_sha256(), NULL) != 1)
        fail_msg("EVP sha256 init failed");
    snprintf(r->desc, sizeof(r->desc), "POST /api/v1/blobs (%llu streamed bytes%s)",
             (unsigned long long)size, chunked ? ", chunked" : "");
    if (chunked)
        extra[n++] = "Transfer-Encoding: chunked";
    for (size_t i = 0; headers != NULL && headers[i] != NULL && n < IT_MAX_HEADERS; i++)
        extra[n++] = headers[i];
    extra[n] = NULL;
    it_prepare(s, s->curl, r, "/api/v1/blobs", 600);
    hl = it_setup(s->curl, &q, extra);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(s->curl, CURLOPT_READFUNCTION, it_on_read);
    curl_easy_setopt(s->curl, CURLOPT_READDATA, &g);
    curl_easy_setopt(s->curl, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
    curl_easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     chunked ? (curl_off_t)-1 : (curl_off_t)size);
    *rc = curl_easy_perform(s->curl);
    curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hl);

    if (digest_out != NULL) {
        uint8_t md[32];
        unsigned mdlen = 0;

        if (EVP_DigestFinal_ex(g.md, md, &mdlen) != 1 || mdlen != 32)
            fail_msg("EVP sha256 final failed");
        memcpy(digest_out, "sha256:", 7);
        mg_hex_encode(md, 32, digest_out + 7);
    }
    EVP_MD_CTX_free(g.md);
    return r;
}

struct it_resp *it_upload_stream(struct mg_server *s, const char *token, uint64_t size,
                                 uint32_t seed, bool chunked, const char *const *headers,
                                 char digest_out[IT_DIGEST_LEN + 1])
{
    CURLcode rc;
    struct it_resp *r =
        it_stream(s, token, size, seed, chunked, headers, digest_out, UINT64_MAX, &rc);

    it_finish(s, s->curl, r, rc);
    return r;
}

void it_upload_abort(struct mg_server *s, const char *token, uint64_t size, uint64_t abort_at)
{
    CURLcode rc;
    struct it_resp *r = it_stream(s, token, size, 5, false, NULL, NULL, abort_at, &rc);

    if (rc != CURLE_ABORTED_BY_CALLBACK)
        fail_msg("%s: the upload was to be cut off after %llu bytes, but the transfer ended "
                 "with: %s (status %ld)",
                 r->desc, (unsigned long long)abort_at, curl_easy_strerror(rc), r->status);
    it_resp_free(s, &r);
    /* The handle's connection is gone; start the next request on a fresh one. */
    curl_easy_cleanup(s->curl);
    s->curl = curl_easy_init();
    if (s->curl == NULL)
        fail_msg("curl_easy_init failed");
}

void it_digest(const void *data, size_t len, char out[IT_DIGEST_LEN + 1])
{
    memcpy(out, "sha256:", 7);
    mg_sha256_hex(data, len, out + 7);
}

struct it_resp *it_upload(struct mg_server *s, const void *data, size_t len,
                          char digest_out[IT_DIGEST_LEN + 1])
{
    char want[IT_DIGEST_LEN + 1];
    struct it_resp *r;
    const char *got;

    it_digest(data, len, want);
    r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", data,
                   len);
    if (r->status != 200 && r->status != 201)
        fail_msg("%s: %zu bytes: status %ld, want 201 or 200: %.400s", r->desc, len, r->status,
                 r->body);
    if (!json_is_object(r->json))
        fail_msg("%s: no JSON object in the answer: %.400s", r->desc, r->body);
    got = json_string_value(json_object_get(r->json, "digest"));
    if (got == NULL || strcmp(got, want) != 0)
        fail_msg("%s: digest %s, want %s", r->desc, got ? got : "(none)", want);
    if (digest_out != NULL)
        memcpy(digest_out, want, sizeof(want));
    return r;
}

/* ---- tokens --------------------------------------------------------- */

char *it_token_create(struct mg_server *s, const char *name, const char *roles, char *id_out)
{
    json_t *body = json_object();
    json_t *arr = json_array();
    char *copy = strdup(roles);
    char *save = NULL;
    struct it_resp *r;
    const char *secret;
    json_t *id;
    char *out;

    if (body == NULL || arr == NULL || copy == NULL)
        fail_msg("out of memory");
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
        json_array_append_new(arr, json_string(t));
    free(copy);
    json_object_set_new(body, "name", json_string(name));
    json_object_set_new(body, "roles", arr);
    r = it_jreq_v(s, "POST", "/api/v1/tokens", s->admin_token, body);
    if (r->status != 201 || !json_is_object(r->json))
        fail_msg("%s: creating token '%s' (%s): status %ld, want 201: %.400s", r->desc, name, roles,
                 r->status, r->body);
    secret = json_string_value(json_object_get(r->json, "token"));
    if (secret == NULL || *secret == '\0')
        fail_msg("%s: no \"token\" secret in %.400s", r->desc, r->body);
    out = strdup(secret);
    if (out == NULL)
        fail_msg("out of memory");
    id = json_object_get(r->json, "id");
    if (id_out != NULL) {
        if (json_is_string(id))
            snprintf(id_out, 64, "%s", json_string_value(id));
        else if (json_is_integer(id))
            snprintf(id_out, 64, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        else
            fail_msg("%s: token \"id\" is neither a string nor an integer: %.400s", r->desc,
                     r->body);
    }
    it_resp_free(s, &r);
    return out;
}

/* ---- assertions ----------------------------------------------------- */

static void it_show(const struct mg_server *s, const struct it_resp *r)
{
    print_error("request: %s\nstatus: %ld\nbody: %.2000s\n", r->desc, r->status,
                r->body ? r->body : "");
    if (s != NULL && r->status >= 500)
        it_server_dump_log(s, 4096);
}

/* A 500 the test asserted: the server logged an "error:" line for it, which is expected. */
static void it_expected_500(const struct mg_server *s, const struct it_resp *r)
{
    if (s != NULL && r->status == 500)
        ((struct mg_server *)s)->errors_expected++;
}

void it_expect_status_at(const struct mg_server *s, const struct it_resp *r, long status,
                         const char *file, int line)
{
    if (r->status == status) {
        it_expected_500(s, r);
        return;
    }
    print_error("expected status %ld, got %ld\n", status, r->status);
    it_show(s, r);
    _fail(file, line);
}

void it_expect_status_not_at(const struct it_resp *r, long bad1, long bad2, const char *file,
                             int line)
{
    if (r->status != bad1 && r->status != bad2)
        return;
    print_error("expected a status other than %ld and %ld\n", bad1, bad2);
    it_show(NULL, r);
    _fail(file, line);
}

static const char *it_error_member(const struct it_resp *r, const char *key)
{
    json_t *e = json_object_get(r->json, "error");

    return json_string_value(json_object_get(e, key));
}

void it_expect_error_at(const struct mg_server *s, const struct it_resp *r, long status,
                        const char *code, const char *file, int line)
{
    const char *ct = it_header(r, "Content-Type");
    json_t *e, *f;
    const char *why = NULL;

    if (r->status != status)
        why = "wrong status";
    else if (ct == NULL || strncasecmp(ct, "application/json", 16) != 0)
        why = "error body is not application/json";
    else if (!json_is_object(r->json) || !json_is_object(e = json_object_get(r->json, "error")))
        why = "body is not {\"error\":{...}}";
    else if (!json_is_string(json_object_get(e, "code")))
        why = "error.code is not a string";
    else if (strcmp(json_string_value(json_object_get(e, "code")), code) != 0)
        why = "wrong error.code";
    else if (!json_is_string(json_object_get(e, "message")) ||
             json_string_length(json_object_get(e, "message")) == 0)
        why = "error.message is not a non-empty string";
    else if ((f = json_object_get(e, "field")) != NULL && !json_is_string(f) && !json_is_null(f))
        why = "error.field is present but not a string";
    if (why == NULL) {
        it_expected_500(s, r);
        return;
    }
    print_error("%s: expected %ld {\"error\":{\"code\":\"%s\",...}}\n", why, status, code);
    it_show(s, r);
    _fail(file, line);
}

void it_expect_error_field_at(const struct mg_server *s, const struct it_resp *r, long status,
                              const char *code, const char *field_part, const char *file, int line)
{
    const char *field;

    it_expect_error_at(s, r, status, code, file, line);
    field = it_error_member(r, "field");
    if (field != NULL && strstr(field, field_part) != NULL)
        return;
    print_error("expected error.field naming '%s', got %s\n", field_part,
                field ? field : "(no field)");
    it_show(s, r);
    _fail(file, line);
}

const char *it_error_code(const struct it_resp *r)
{
    return it_error_member(r, "code");
}

static json_t *it_member(const json_t *obj, const char *key, const char *file, int line)
{
    json_t *v = json_object_get(obj, key);

    if (v == NULL) {
        char *dump = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

        print_error("no member \"%s\" in %.1500s\n", key, dump ? dump : "(not an object)");
        free(dump);
        _fail(file, line);
    }
    return v;
}

static void it_type_fail(const json_t *v, const char *key, const char *type, const char *file,
                         int line)
{
    char *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    print_error("member \"%s\" is not %s: %.500s\n", key, type, dump ? dump : "?");
    free(dump);
    _fail(file, line);
}

const char *it_jstr_at(const json_t *obj, const char *key, const char *file, int line)
{
    json_t *v = it_member(obj, key, file, line);

    if (!json_is_string(v))
        it_type_fail(v, key, "a string", file, line);
    return json_string_value(v);
}

json_int_t it_jint_at(const json_t *obj, const char *key, const char *file, int line)
{
    json_t *v = it_member(obj, key, file, line);

    if (!json_is_integer(v))
        it_type_fail(v, key, "an integer", file, line);
    return json_integer_value(v);
}

double it_jnum_at(const json_t *obj, const char *key, const char *file, int line)
{
    json_t *v = it_member(obj, key, file, line);

    if (!json_is_number(v))
        it_type_fail(v, key, "a number", file, line);
    return json_number_value(v);
}

json_t *it_jobj_at(const json_t *obj, const char *key, const char *file, int line)
{
    json_t *v = it_member(obj, key, file, line);

    if (!json_is_object(v))
        it_type_fail(v, key, "an object", file, line);
    return v;
}

json_t *it_jarr_at(const json_t *obj, const char *key, const char *file, int line)
{
    json_t *v = it_member(obj, key, file, line);

    if (!json_is_array(v))
        it_type_fail(v, key, "an array", file, line);
    return v;
}

void it_expect_rfc3339_at(const char *s, const char *file, int line)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    size_t n = s ? strlen(s) : 0;
    size_t i;
    bool ok = n >= sizeof(shape) && s[n - 1] == 'Z';

    for (i = 0; ok && i < sizeof(shape) - 1; i++)
        ok = shape[i] == 'd' ? (s[i] >= '0' && s[i] <= '9') : s[i] == shape[i];
    if (ok && i < n - 1) {
        ok = s[i] == '.' && n - 1 > i + 1;
        for (i++; ok && i < n - 1; i++)
            ok = s[i] >= '0' && s[i] <= '9';
    }
    if (ok)
        return;
    print_error("'%s' is not an RFC 3339 UTC time like 2026-11-21T10:00:00.123Z\n",
                s ? s : "(null)");
    _fail(file, line);
}

/* ---- files of the data directory -------------------------------------- */

void it_data_path(const struct mg_server *s, const char *rel, char out[IT_PATH_MAX])
{
    int n = snprintf(out, IT_PATH_MAX, "%s/%s", s->data_dir, rel);

    if (n < 0 || n >= IT_PATH_MAX)
        fail_msg("data path too long: %s/%s", s->data_dir, rel);
}

void it_blob_file(const struct mg_server *s, const char *digest, char out[IT_PATH_MAX])
{
    char rel[128];

    if (strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != IT_DIGEST_LEN)
        fail_msg("not a digest: %s", digest);
    snprintf(rel, sizeof(rel), "blobs/sha256/%.2s/%s", digest + 7, digest + 7);
    it_data_path(s, rel, out);
}

bool it_data_exists(const struct mg_server *s, const char *rel)
{
    char path[IT_PATH_MAX];
    struct stat st;

    it_data_path(s, rel, path);
    return lstat(path, &st) == 0;
}

size_t it_data_dir_count(const struct mg_server *s, const char *rel)
{
    char path[IT_PATH_MAX];
    struct dirent *de;
    size_t n = 0;
    DIR *d;

    it_data_path(s, rel, path);
    d = opendir(path);
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

int it_sql_exec(struct mg_server *s, const char *sql)
{
    char path[IT_PATH_MAX];
    sqlite3 *db = NULL;
    char *msg = NULL;
    int changes;

    if (s->pid != 0)
        fail_msg("it_sql_exec: stop the server first");
    if (s->database[0] != '\0') {
        PGconn *pg = PQconnectdb(s->database);
        PGresult *r;

        if (PQstatus(pg) != CONNECTION_OK)
            fail_msg("it_sql_exec: %s", PQerrorMessage(pg));
        r = PQexec(pg, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
            fail_msg("it_sql_exec '%s': %s", sql, PQerrorMessage(pg));
        changes = atoi(PQcmdTuples(r));
        PQclear(r);
        PQfinish(pg);
        return changes;
    }
    it_data_path(s, "modelgate.db", path);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        fail_msg("sqlite3_open_v2 %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        print_error("sqlite3_exec '%s': %s\n", sql, msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
        fail();
    }
    changes = sqlite3_changes(db);
    sqlite3_close(db);
    return changes;
}
