/*
 * runner_common.h - helpers shared by the test_runner*.c programs (the
 * embedded smoke-test runner): scratch directories and files, shell-script
 * profiles, tar archives built in memory, /proc scans for processes a test
 * started, and the REST calls around smoke tests and promotions.
 *
 * Header-only: static inline, so a program that uses only some of them still
 * builds with -Wall -Werror. Every helper asserts (cmocka) and says what went
 * wrong, like harness.h. Main thread only.
 */
#ifndef MG_IT_RUNNER_COMMON_H
#define MG_IT_RUNNER_COMMON_H

#include "harness.h"
#include "push_common.h" /* time, text, files, HAProxy, API helpers */

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#define RC_HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define RC_IMAGE "registry.example/serve@sha256:" RC_HEX64
#define RC_PATH "/usr/local/bin:/usr/bin:/bin"

/* ---- text and files ----------------------------------------------------- */

static inline void rc_write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "we");

    if (f == NULL)
        fail_msg("cannot write %s: %s", path, strerror(errno));
    if ((len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
        fail_msg("cannot write %s: %s", path, strerror(errno));
}

static inline bool rc_exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

/* Does any name below `root` (not following links) contain `part`? The
 * first such path goes to found. */
static char rc_find_part[128];
static char rc_find_found[IT_PATH_MAX];

static inline int rc_find_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    if (strstr(path + f->base, rc_find_part) != NULL) {
        snprintf(rc_find_found, sizeof(rc_find_found), "%s", path);
        return 1;
    }
    return 0;
}

static inline const char *rc_find_name(const char *root, const char *part)
{
    snprintf(rc_find_part, sizeof(rc_find_part), "%s", part);
    rc_find_found[0] = '\0';
    if (nftw(root, rc_find_entry, 16, FTW_PHYS) == 1)
        return rc_find_found;
    return NULL;
}

/* A token unlikely to occur anywhere else: tag-pid-random. */
static inline void rc_marker(char *out, size_t n, const char *tag)
{
    unsigned r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
        fail_msg("cannot read /dev/urandom");
    close(fd);
    pc_fmt(out, n, "%s-%d-%08x", tag, (int)getpid(), r);
}

/* ---- profiles ----------------------------------------------------------- */

/* A leader and a child that never end; both carry @MARK@ as an argument. */
#define RC_HANG_SH                                                                                 \
    "sh -c 'while :; do sleep 1; done' @MARK@ &\n"                                                 \
    "echo $! > @DIR@/hang.child\n"                                                                 \
    "echo $$ > @DIR@/hang.leader\n"                                                                \
    "echo 'hanging'\n"                                                                             \
    "exec sh -c 'while :; do sleep 1; done' @MARK@\n"

/* Write dir/name from text with every @DIR@ (dir) and @MARK@ (mark)
 * replaced. */
static inline void rc_write_script(const char *dir, const char *name, const char *text,
                                   const char *mark)
{
    char path[IT_PATH_MAX], out[8192];
    size_t k = 0;

    for (const char *p = text; *p;) {
        const char *rep = NULL;
        size_t skip = 1;

        if (strncmp(p, "@DIR@", 5) == 0) {
            rep = dir;
            skip = 5;
        } else if (strncmp(p, "@MARK@", 6) == 0) {
            rep = mark;
            skip = 6;
        }
        if (rep != NULL) {
            if (k + strlen(rep) >= sizeof(out))
                fail_msg("script %s too long", name);
            memcpy(out + k, rep, strlen(rep));
            k += strlen(rep);
        } else {
            if (k + 1 >= sizeof(out))
                fail_msg("script %s too long", name);
            out[k++] = *p;
        }
        p += skip;
    }
    out[k] = '\0';
    pc_write_file(pc_fmt(path, sizeof(path), "%s/%s", dir, name), out);
}

/* "--smoke-profile=NAME=/bin/sh DIR/NAME.sh {model_dir} {output}EXTRA" */
static inline void rc_profile_arg(char *out, size_t n, const char *dir, const char *name,
                                  const char *extra)
{
    pc_fmt(out, n, "--smoke-profile=%s=/bin/sh %s/%s.sh {model_dir} {output}%s", name, dir, name,
           extra);
}

/* ---- processes ---------------------------------------------------------- */

/*
 * Processes that have `marker` as one whole argument of their command line
 * (/proc/PID/cmdline); their pids go to pids (up to max). Zombies have an
 * empty command line and do not count. Our own process never matches: the
 * marker is not one of our arguments.
 */
static inline size_t rc_procs_with_arg(const char *marker, pid_t *pids, size_t max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        fail_msg("cannot list /proc: %s", strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[65536];
        ssize_t len;
        int fd;

        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* gone meanwhile */
        len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        for (char *a = buf; a < buf + len; a += strlen(a) + 1) {
            if (strcmp(a, marker) == 0) {
                if (n < max)
                    pids[n] = (pid_t)atoi(e->d_name);
                n++;
                break;
            }
        }
    }
    closedir(d);
    return n;
}

/* SIGKILL every process carrying `marker` (cleanup after a failed test, so
 * nothing it started outlives the program). */
static inline void rc_kill_procs(const char *marker)
{
    pid_t pids[64];
    size_t n;

    if (marker == NULL || marker[0] == '\0')
        return;
    n = rc_procs_with_arg(marker, pids, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        kill(pids[i], SIGKILL);
}

/* Wait until `count` processes carry the marker. */
static inline void rc_wait_procs(const char *marker, size_t count)
{
    int64_t deadline = pc_deadline(5000);
    pid_t pids[8];

    while (rc_procs_with_arg(marker, pids, 8) < count) {
        if (pc_now_ms() > deadline)
            fail_msg("the smoke command did not start its %zu processes", count);
        pc_pause_ms(10);
    }
}

/* Wait until no process carries `marker`; fails at the deadline naming them. */
static inline void rc_expect_no_procs(const char *marker, int64_t timeout_ms)
{
    int64_t deadline = pc_deadline(timeout_ms);
    pid_t pids[16];
    size_t n;

    while ((n = rc_procs_with_arg(marker, pids, 16)) > 0) {
        if (pc_now_ms() > deadline) {
            char list[256] = "";
            size_t k = 0;
            for (size_t i = 0; i < n && i < 16; i++)
                k += (size_t)snprintf(list + k, sizeof(list) - k, " %d", (int)pids[i]);
            fail_msg("%zu process(es) with '%s' still run:%s", n, marker, list);
        }
        pc_pause_ms(20);
    }
}

/* ---- archives ----------------------------------------------------------- */

struct rc_entry {
    const char *path;
    const char *content; /* NULL: a directory, or a link when link is set */
    const char *symlink; /* a symbolic link's target */
};

/* A tar (pax) of the entries, built in memory; *len gets its size. The
 * writer does not judge paths, so hostile entries can be made too. */
static inline void *rc_tar(const struct rc_entry *entries, size_t n, size_t *len)
{
    size_t cap = 1u << 20, used = 0;
    void *buf = malloc(cap);
    struct archive *a = archive_write_new();

    if (buf == NULL || a == NULL)
        fail_msg("out of memory");
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_open_memory(a, buf, cap, &used) != ARCHIVE_OK)
        fail_msg("libarchive: %s", archive_error_string(a));
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        size_t clen = entries[i].content ? strlen(entries[i].content) : 0;

        archive_entry_set_pathname(e, entries[i].path);
        if (entries[i].symlink != NULL) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, entries[i].symlink);
            archive_entry_set_perm(e, 0777);
        } else if (entries[i].content == NULL) {
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_perm(e, 0755);
        } else {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_perm(e, 0644);
            archive_entry_set_size(e, (la_int64_t)clen);
        }
        archive_entry_set_mtime(e, 1700000000, 0);
        if (archive_write_header(a, e) != ARCHIVE_OK)
            fail_msg("libarchive header %s: %s", entries[i].path, archive_error_string(a));
        if (clen > 0 && archive_write_data(a, entries[i].content, clen) != (la_ssize_t)clen)
            fail_msg("libarchive data %s: %s", entries[i].path, archive_error_string(a));
        archive_entry_free(e);
    }
    if (archive_write_close(a) != ARCHIVE_OK)
        fail_msg("libarchive close: %s", archive_error_string(a));
    archive_write_free(a);
    *len = used;
    return buf;
}

/* "sha256:<hex>" → the blob's file below the data directory. */
static inline void rc_blob_file(const struct mg_server *s, const char *digest,
                                char out[IT_PATH_MAX])
{
    char rel[128];

    if (strncmp(digest, "sha256:", 7) != 0 || strlen(digest) != IT_DIGEST_LEN)
        fail_msg("not a digest: %s", digest);
    it_data_path(s, pc_fmt(rel, sizeof(rel), "blobs/sha256/%.2s/%s", digest + 7, digest + 7), out);
}

/* ---- REST --------------------------------------------------------------- */

static inline void rc_model(struct mg_server *s, const char *name)
{
    struct it_resp *r =
        it_jreq_v(s, "POST", "/api/v1/models", s->admin_token, json_pack("{ss}", "name", name));

    it_expect_status(s, r, 201);
    it_resp_free(s, &r);
}

/*
 * A version of model with artifact art, smoke profile (NULL: none),
 * max_p95_ms (<= 0: none) and resources (parameters <= 0: none). Returns its
 * number.
 */
static inline json_int_t rc_version(struct mg_server *s, const char *model, const char *art,
                                    const char *profile, double max_p95_ms, json_int_t parameters,
                                    const char *precision)
{
    char path[256];
    json_t *body = json_pack("{ss ss}", "artifact", art, "image", RC_IMAGE);
    struct it_resp *r;
    json_int_t n;

    if (profile != NULL || max_p95_ms > 0) {
        json_t *smoke = json_object();
        if (profile != NULL)
            json_object_set_new(smoke, "profile", json_string(profile));
        if (max_p95_ms > 0)
            json_object_set_new(smoke, "max_p95_ms", json_real(max_p95_ms));
        json_object_set_new(body, "smoke", smoke);
    }
    if (parameters > 0)
        json_object_set_new(body, "resources",
                            json_pack("{sI ss}", "parameters", parameters, "precision",
                                      precision ? precision : "fp16"));
    r = it_jreq_v(s, "POST", pc_fmt(path, sizeof(path), "/api/v1/models/%s/versions", model),
                  s->admin_token, body);
    it_expect_status(s, r, 201);
    n = it_jint(r->json, "version");
    it_resp_free(s, &r);
    return n;
}

static inline void rc_policy(struct mg_server *s, const char *model, const char *alias,
                             const char *policy)
{
    char path[256];
    struct it_resp *r =
        it_jreq(s, "PUT", pc_fmt(path, sizeof(path), "/api/v1/models/%s/policies/%s", model, alias),
                s->admin_token, policy);

    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
}

/* PUT the alias to one version with ?wait=10. */
static inline void rc_alias_to(struct mg_server *s, const char *model, const char *alias,
                               json_int_t version)
{
    char path[256];
    struct it_resp *r = it_jreq_v(
        s, "PUT", pc_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s?wait=10", model, alias),
        s->admin_token, json_pack("{sI}", "version", version));

    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
}

static inline struct it_resp *rc_alias_get(struct mg_server *s, const char *model,
                                           const char *alias)
{
    char path[256];
    struct it_resp *r =
        it_get(s, pc_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias),
               s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

/* The alias routes as "v1:80,v2:20" (in the server's order). */
static inline void rc_routes_text(const json_t *alias, char *out, size_t n)
{
    json_t *rt;
    size_t i, k = 0;

    out[0] = '\0';
    json_array_foreach(json_object_get(alias, "routes"), i, rt) k +=
        (size_t)snprintf(out + k, n > k ? n - k : 0, "%sv%lld:%lld", i ? "," : "",
                         (long long)json_integer_value(json_object_get(rt, "version")),
                         (long long)json_integer_value(json_object_get(rt, "weight")));
}

/* Poll the alias until every gateway (the built-in runner among them) has
 * acknowledged its current generation. */
static inline void rc_alias_in_sync(struct mg_server *s, const char *model, const char *alias)
{
    int64_t deadline = pc_deadline(10000);

    for (;;) {
        struct it_resp *r = rc_alias_get(s, model, alias);
        json_int_t gen = it_jint(r->json, "generation");
        json_t *d;
        size_t i;
        bool ok = json_array_size(json_object_get(r->json, "deliveries")) > 0, runner = false;

        json_array_foreach(json_object_get(r->json, "deliveries"), i, d)
        {
            const char *st = json_string_value(json_object_get(d, "state"));
            const char *gw = json_string_value(json_object_get(d, "gateway"));
            runner = runner || (gw && strcmp(gw, "runner") == 0);
            ok = ok && st && strcmp(st, "in_sync") == 0 &&
                 json_integer_value(json_object_get(d, "generation")) == gen;
        }
        if (ok && runner) {
            it_resp_free(s, &r);
            return;
        }
        if (pc_now_ms() > deadline)
            fail_msg("%s/%s: not every gateway (runner included) is in sync: %s", model, alias,
                     r->body);
        it_resp_free(s, &r);
        pc_pause_ms(20);
    }
}

/* POST a promotion; the Promotion answer (201 asserted). */
static inline struct it_resp *rc_promote(struct mg_server *s, const char *token, const char *model,
                                         json_int_t version, const char *alias)
{
    struct it_resp *r = it_jreq_v(s, "POST", "/api/v1/promotions", token,
                                  json_pack("{ss sI ss ss}", "model", model, "version", version,
                                            "alias", alias, "reason", "runner test"));

    it_expect_status(s, r, 201);
    return r;
}

static inline struct it_resp *rc_promotion_get(struct mg_server *s, const char *id)
{
    char path[128];
    struct it_resp *r =
        it_get(s, pc_fmt(path, sizeof(path), "/api/v1/promotions/%s", id), s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

/* Poll the promotion until it is in `state`; fails when it ends in another
 * final state or at the deadline. Returns that answer. */
#define rc_promotion_wait(s, id, state, ms)                                                        \
    rc_promotion_wait_at(s, id, state, ms, __FILE__, __LINE__)

static inline struct it_resp *rc_promotion_wait_at(struct mg_server *s, const char *id,
                                                   const char *state, int64_t timeout_ms,
                                                   const char *file, int line)
{
    static const char *const final[] = {"succeeded", "rejected", "aborted", "rolled_back", NULL};
    int64_t deadline = pc_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = rc_promotion_get(s, id);
        const char *st = it_jstr(r->json, "state");
        bool is_final = false;

        if (strcmp(st, state) == 0)
            return r;
        for (size_t i = 0; final[i]; i++)
            is_final = is_final || strcmp(st, final[i]) == 0;
        if (is_final || pc_now_ms() > deadline) {
            print_error("promotion %s: want state %s; it is: %.4000s\n", id, state, r->body);
            it_server_dump_log(s, 3000);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        pc_pause_ms(20);
    }
}

/* The gate of `kind` in a gates array, or NULL. Borrowed. */
static inline json_t *rc_gate(const json_t *gates, const char *kind)
{
    json_t *g;
    size_t i;

    json_array_foreach(gates, i, g)
    {
        const char *k = json_string_value(json_object_get(g, "kind"));
        if (k && strcmp(k, kind) == 0)
            return g;
    }
    return NULL;
}

/* The newest event of `type` in a Promotion, or NULL. Borrowed. */
static inline json_t *rc_event(const json_t *promotion, const char *type)
{
    json_t *e, *found = NULL;
    size_t i;

    json_array_foreach(json_object_get(promotion, "events"), i, e)
    {
        const char *t = json_string_value(json_object_get(e, "type"));
        if (t && strcmp(t, type) == 0)
            found = e;
    }
    return found;
}

/* POST …/smoke-tests with body (JSON text, NULL for none) and token;
 * asserts 202 and copies the test's id. Returns the answer. */
static inline struct it_resp *rc_smoke_post(struct mg_server *s, const char *token,
                                            const char *model, json_int_t version, const char *body,
                                            char id[64])
{
    char path[256];
    struct it_resp *r =
        it_jreq(s, "POST",
                pc_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld/smoke-tests", model,
                       (long long)version),
                token, body);

    it_expect_status(s, r, 202);
    snprintf(id, 64, "%s", it_jstr(r->json, "id"));
    return r;
}

/* GET …/smoke-tests (200 asserted). */
static inline struct it_resp *rc_smoke_list(struct mg_server *s, const char *model,
                                            json_int_t version)
{
    char path[256];
    struct it_resp *r =
        it_get(s,
               pc_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld/smoke-tests", model,
                      (long long)version),
               s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

/* The item with `id` in a list answer, or NULL. Borrowed. */
static inline json_t *rc_smoke_find(const json_t *list, const char *id)
{
    json_t *t;
    size_t i;

    json_array_foreach(json_object_get(list, "items"), i, t)
    {
        const char *tid = json_string_value(json_object_get(t, "id"));
        if (tid && strcmp(tid, id) == 0)
            return t;
    }
    return NULL;
}

static inline bool rc_smoke_final(const char *state)
{
    return strcmp(state, "passed") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "error") == 0;
}

/* Poll until test `id` of the version has finished; returns it (borrowed
 * from an answer the server owns until it_release). */
#define rc_smoke_wait(s, model, version, id, ms)                                                   \
    rc_smoke_wait_at(s, model, version, id, ms, __FILE__, __LINE__)

static inline json_t *rc_smoke_wait_at(struct mg_server *s, const char *model, json_int_t version,
                                       const char *id, int64_t timeout_ms, const char *file,
                                       int line)
{
    int64_t deadline = pc_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = rc_smoke_list(s, model, version);
        json_t *t = rc_smoke_find(r->json, id);

        if (t != NULL && rc_smoke_final(it_jstr(t, "state")))
            return t;
        if (pc_now_ms() > deadline) {
            print_error("smoke test %s of %s v%lld did not finish: %.4000s\n", id, model,
                        (long long)version, r->body);
            it_server_dump_log(s, 3000);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        pc_pause_ms(20);
    }
}

/* The newest test of a version in `state` (polling until there is one). */
#define rc_smoke_wait_state(s, model, version, state, ms)                                          \
    rc_smoke_wait_state_at(s, model, version, state, ms, __FILE__, __LINE__)

static inline json_t *rc_smoke_wait_state_at(struct mg_server *s, const char *model,
                                             json_int_t version, const char *state,
                                             int64_t timeout_ms, const char *file, int line)
{
    int64_t deadline = pc_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = rc_smoke_list(s, model, version);
        json_t *t = json_array_get(json_object_get(r->json, "items"), 0);

        if (t != NULL && strcmp(it_jstr(t, "state"), state) == 0)
            return t;
        if (pc_now_ms() > deadline) {
            print_error("%s v%lld: no smoke test %s: %.4000s\n", model, (long long)version, state,
                        r->body);
            it_server_dump_log(s, 3000);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        pc_pause_ms(20);
    }
}

/* Wait until the runner has nothing queued or running. */
static inline void rc_runner_idle(struct mg_server *s, int64_t timeout_ms)
{
    int64_t deadline = pc_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = it_get(s, "/api/v1/runner", s->admin_token);

        it_expect_status(s, r, 200);
        if (it_jint(r->json, "queued") == 0 && it_jint(r->json, "running") == 0) {
            it_resp_free(s, &r);
            return;
        }
        if (pc_now_ms() > deadline)
            fail_msg("the runner is still busy: %s", r->body);
        it_resp_free(s, &r);
        pc_pause_ms(20);
    }
}

/*
 * Assert a finished SmokeTest has every API.md field with its type: id,
 * state, profile, gpu, started_at, finished_at, duration_ms, exit_code,
 * latency_ms, checks, log_tail, reason, trigger, peak_gpu_memory_mib.
 */
#define rc_expect_smoke_shape(t) rc_expect_smoke_shape_at(t, __FILE__, __LINE__)

static inline void rc_expect_smoke_shape_at(const json_t *t, const char *file, int line)
{
    static const char *const keys[] = {"id",          "state",
                                       "profile",     "gpu",
                                       "started_at",  "finished_at",
                                       "duration_ms", "exit_code",
                                       "latency_ms",  "checks",
                                       "log_tail",    "reason",
                                       "trigger",     "peak_gpu_memory_mib",
                                       NULL};
    json_t *v;
    char *text;

    for (size_t i = 0; keys[i]; i++) {
        if (json_object_get(t, keys[i]) == NULL) {
            text = json_dumps(t, JSON_COMPACT);
            print_error("SmokeTest lacks '%s': %s\n", keys[i], text);
            free(text);
            _fail(file, line);
        }
    }
    if (strncmp(it_jstr_at(t, "id", file, line), "smk_", 4) != 0)
        fail_msg("SmokeTest id %s", json_string_value(json_object_get(t, "id")));
    it_expect_rfc3339_at(it_jstr_at(t, "started_at", file, line), file, line);
    it_expect_rfc3339_at(it_jstr_at(t, "finished_at", file, line), file, line);
    if (strcmp(it_jstr_at(t, "started_at", file, line), it_jstr_at(t, "finished_at", file, line)) >
        0)
        fail_msg("started_at is after finished_at");
    if (it_jint_at(t, "duration_ms", file, line) < 0)
        fail_msg("negative duration_ms");
    v = json_object_get(t, "gpu");
    if (!json_is_null(v) && !json_is_object(v))
        fail_msg("gpu is neither null nor an object");
    v = json_object_get(t, "latency_ms");
    if (!json_is_null(v) && !json_is_object(v))
        fail_msg("latency_ms is neither null nor an object");
    it_jarr_at(t, "checks", file, line);
    it_jstr_at(t, "log_tail", file, line);
    it_jstr_at(t, "trigger", file, line);
    v = json_object_get(t, "reason");
    if (!json_is_null(v) && !json_is_string(v))
        fail_msg("reason is neither null nor a string");
}

/* Assert that `text` contains `part`, printing both when not. */
#define rc_expect_contains(text, part) rc_expect_contains_at(text, part, __FILE__, __LINE__)

static inline void rc_expect_contains_at(const char *text, const char *part, const char *file,
                                         int line)
{
    if (text != NULL && strstr(text, part) != NULL)
        return;
    print_error("'%s' should contain '%s'\n", text ? text : "(null)", part);
    _fail(file, line);
}

/* The reason of a finished test (asserting it is a string). */
static inline const char *rc_reason(const json_t *t)
{
    return it_jstr(t, "reason");
}

#endif
