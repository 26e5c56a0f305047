/*
 * test_ops_crash.c - milestone M8, crash safety: kill -9 at random points
 * while four client threads upload blobs, create versions, run promotions
 * (a protected alias with automatic steps 25/50/100, another with manual
 * advances, aborts and rollbacks; no approvals, no gates) and set an
 * unprotected alias, with a webhook gateway receiving every alias change.
 *
 * Each iteration (>= 50): clients run, the server is SIGKILLed after a random
 * 20-300 ms, the clients pause, and then, with the server down:
 *   - PRAGMA integrity_check is ok and PRAGMA foreign_key_check finds nothing;
 *   - every version's artifact file exists and hashes to its digest; every
 *     blob row's file exists with its size; every version has its signature;
 *     version numbers are dense and latest_version agrees;
 *   - no promotion is half-created (evaluating or awaiting approval without
 *     gates or approvals), a rolling-out promotion is the alias's last change
 *     with its candidate at the promotion's weight, a succeeded promotion
 *     left the history entry that gave its candidate 100%, every promotion
 *     has its events; every alias's current routes are its newest history
 *     entry and the history has no gaps;
 * then it restarts on the same data directory and, over the API:
 *   - blobs/tmp was swept; /api/v1/audit/verify is ok and the chain still
 *     holds the head seen last time (nothing acknowledged was rewritten);
 *   - every write a client saw acknowledged before the kill is there;
 *   - every alias's newest generation is acknowledged by the receiver (whose
 *     signatures all verify) with the alias's routes, and the gateway shows
 *     it in_sync; no generation a receiver acknowledged is ever lost.
 * No 5xx answer is acceptable while the server runs.
 *
 * MG_CRASH_ITERATIONS and MG_CRASH_SEED override the count and the seed.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "webhook_rx.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#define SECRET "whsec-modelgate-crash-0123456789abcdef"
#define MA "crash-a" /* production (automatic steps), canary (manual), dev (direct) */
#define MB "crash-b" /* staging (direct, split routes) */
#define NWORKERS 4
#define MAX_KEYS 16

/* ---- shared between the main thread and the client threads ----------------- */

enum ack_kind { ACK_BLOB, ACK_VERSION, ACK_ALIAS, ACK_PROMOTION };

struct ack {
    enum ack_kind kind;
    char model[32];
    char key[80]; /* digest, alias or promotion id */
    long long n;  /* version or generation */
    char artifact[IT_DIGEST_LEN + 1];
};

struct shared {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char base_url[64];
    char token[128];
    bool run, quit;
    int paused;
    /* blobs the clients may use as artifacts */
    char (*digests)[IT_DIGEST_LEN + 1];
    size_t ndigests, cap;
    long long max_version_a, max_version_b;
    /* acknowledged writes of the current run */
    struct ack *acks;
    size_t nacks, acap;
    /* answers */
    unsigned long ok[4], conflicts, other4xx, errors5xx, transport;
    char first5xx[512];
};

static struct shared sh;
static struct mg_server *srv;
static struct rx *rx;

struct worker {
    int id;
    pthread_t thread;
    CURL *curl;
    uint64_t rng;
};

/* A JSON string's value, or "" when it is not a string. */
static const char *jstr0(const json_t *v)
{
    const char *s = json_string_value(v);

    return s != NULL ? s : "";
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t x = *s;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static unsigned rnd_in(uint64_t *s, unsigned lo, unsigned hi)
{
    return lo + (unsigned)(rnd(s) % (uint64_t)(hi - lo + 1));
}

static void ack_add(const struct ack *a)
{
    pthread_mutex_lock(&sh.lock);
    if (sh.nacks == sh.acap) {
        size_t ncap = sh.acap ? sh.acap * 2 : 256;
        struct ack *n = realloc(sh.acks, ncap * sizeof(*n));

        if (n == NULL) {
            pthread_mutex_unlock(&sh.lock);
            return;
        }
        sh.acks = n;
        sh.acap = ncap;
    }
    sh.acks[sh.nacks++] = *a;
    pthread_mutex_unlock(&sh.lock);
}

static void digest_add(const char *d)
{
    pthread_mutex_lock(&sh.lock);
    if (sh.ndigests == sh.cap) {
        size_t ncap = sh.cap ? sh.cap * 2 : 256;
        char(*n)[IT_DIGEST_LEN + 1] = realloc(sh.digests, ncap * sizeof(*n));

        if (n == NULL) {
            pthread_mutex_unlock(&sh.lock);
            return;
        }
        sh.digests = n;
        sh.cap = ncap;
    }
    snprintf(sh.digests[sh.ndigests++], IT_DIGEST_LEN + 1, "%s", d);
    pthread_mutex_unlock(&sh.lock);
}

/* ---- the client threads' HTTP ------------------------------------------------- */

struct wresp {
    long status;
    char *body;
    size_t len;
    json_t *json;
};

static size_t w_body(char *p, size_t size, size_t n, void *ud)
{
    struct wresp *r = ud;
    size_t k = size * n;
    char *nb = realloc(r->body, r->len + k + 1);

    if (nb == NULL)
        return 0;
    memcpy(nb + r->len, p, k);
    r->body = nb;
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

static void w_free(struct wresp *r)
{
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

/* One request; false when no HTTP answer came (the server died, most likely).
 * Counts the answer's class. */
static bool w_http(struct worker *w, const char *method, const char *path, const char *ctype,
                   const void *body, size_t len, struct wresp *out)
{
    char url[512], auth[200], ct[96];
    struct curl_slist *h = NULL;
    CURLcode rc;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&sh.lock);
    snprintf(url, sizeof(url), "%s%s", sh.base_url, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", sh.token);
    pthread_mutex_unlock(&sh.lock);
    curl_easy_reset(w->curl);
    curl_easy_setopt(w->curl, CURLOPT_URL, url);
    curl_easy_setopt(w->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(w->curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(w->curl, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(w->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(w->curl, CURLOPT_WRITEFUNCTION, w_body);
    curl_easy_setopt(w->curl, CURLOPT_WRITEDATA, out);
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Expect:");
    if (ctype != NULL) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
        h = curl_slist_append(h, ct);
    }
    if (body != NULL) {
        curl_easy_setopt(w->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(w->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(w->curl, CURLOPT_HTTPHEADER, h);
    rc = curl_easy_perform(w->curl);
    curl_slist_free_all(h);
    if (rc != CURLE_OK) {
        pthread_mutex_lock(&sh.lock);
        sh.transport++;
        pthread_mutex_unlock(&sh.lock);
        free(out->body);
        out->body = NULL;
        it_pause_ms(2); /* the server is down: do not spin until the pause */
        return false;
    }
    curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &out->status);
    if (out->body != NULL)
        out->json = json_loads(out->body, 0, NULL);
    pthread_mutex_lock(&sh.lock);
    if (out->status >= 500) {
        if (sh.errors5xx++ == 0)
            snprintf(sh.first5xx, sizeof(sh.first5xx), "%s %s: %ld %.400s", method, path,
                     out->status, out->body ? out->body : "");
    } else if (out->status == 409) {
        sh.conflicts++;
    } else if (out->status >= 400) {
        sh.other4xx++;
    }
    pthread_mutex_unlock(&sh.lock);
    return true;
}

static bool w_json(struct worker *w, const char *method, const char *path, json_t *body,
                   struct wresp *out)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    bool ok;

    json_decref(body);
    ok = w_http(w, method, path, text ? "application/json" : NULL, text, text ? strlen(text) : 0,
                out);
    free(text);
    return ok;
}

static void count_ok(int kind)
{
    pthread_mutex_lock(&sh.lock);
    sh.ok[kind]++;
    pthread_mutex_unlock(&sh.lock);
}

/* ---- what each client does -------------------------------------------------------- */

static void do_upload(struct worker *w)
{
    size_t n = rnd_in(&w->rng, 0, 3) == 0 ? rnd_in(&w->rng, 64 << 10, 512 << 10)
                                          : rnd_in(&w->rng, 1, 16 << 10);
    uint8_t *buf = malloc(n);
    char digest[IT_DIGEST_LEN + 1];
    struct wresp r;

    if (buf == NULL)
        return;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rnd(&w->rng);
        memcpy(buf + i, &v, n - i < 8 ? n - i : 8);
    }
    it_digest(buf, n, digest);
    if (w_http(w, "POST", "/api/v1/blobs", "application/octet-stream", buf, n, &r) &&
        (r.status == 201 || r.status == 200) &&
        strcmp(jstr0(json_object_get(r.json, "digest")), digest) == 0) {
        struct ack a = {.kind = ACK_BLOB};

        snprintf(a.key, sizeof(a.key), "%s", digest);
        ack_add(&a);
        digest_add(digest);
        count_ok(ACK_BLOB);
    }
    w_free(&r);
    free(buf);
}

static void do_version(struct worker *w)
{
    const char *model = rnd_in(&w->rng, 0, 3) == 0 ? MB : MA;
    char digest[IT_DIGEST_LEN + 1], path[128];
    struct wresp r;

    pthread_mutex_lock(&sh.lock);
    snprintf(digest, sizeof(digest), "%s", sh.digests[rnd(&w->rng) % sh.ndigests]);
    pthread_mutex_unlock(&sh.lock);
    snprintf(path, sizeof(path), "/api/v1/models/%s/versions", model);
    if (w_json(w, "POST", path,
               json_pack("{ss ss ss s{sf}}", "artifact", digest, "image", IT_IMAGE, "run_id",
                         "crash-loop", "metrics", "auc", 0.9 + (double)(rnd(&w->rng) % 90) / 1000),
               &r) &&
        r.status == 201) {
        struct ack a = {.kind = ACK_VERSION};
        long long n = (long long)json_integer_value(json_object_get(r.json, "version"));

        snprintf(a.model, sizeof(a.model), "%s", model);
        snprintf(a.artifact, sizeof(a.artifact), "%s", digest);
        a.n = n;
        ack_add(&a);
        pthread_mutex_lock(&sh.lock);
        if (strcmp(model, MA) == 0 && n > sh.max_version_a)
            sh.max_version_a = n;
        if (strcmp(model, MB) == 0 && n > sh.max_version_b)
            sh.max_version_b = n;
        pthread_mutex_unlock(&sh.lock);
        count_ok(ACK_VERSION);
    }
    w_free(&r);
}

static void promotion_acked(const struct wresp *r)
{
    struct ack a = {.kind = ACK_PROMOTION};

    snprintf(a.key, sizeof(a.key), "%s", jstr0(json_object_get(r->json, "id")));
    ack_add(&a);
    count_ok(ACK_PROMOTION);
}

static void do_promotion(struct worker *w)
{
    unsigned what = rnd_in(&w->rng, 0, 9);
    long long maxv;
    struct wresp r;
    char path[160];

    pthread_mutex_lock(&sh.lock);
    maxv = sh.max_version_a;
    pthread_mutex_unlock(&sh.lock);
    if (what < 4) {
        /* production: the newest version; the timer walks the steps. */
        if (w_json(w, "POST", "/api/v1/promotions",
                   json_pack("{ss sI ss ss}", "model", MA, "version", (json_int_t)maxv, "alias",
                             "production", "reason", "crash loop"),
                   &r) &&
            r.status == 201)
            promotion_acked(&r);
        w_free(&r);
    } else if (what < 9) {
        /* canary: advance or abort the running one, or start one. */
        if (!w_http(w, "GET", "/api/v1/promotions?model=" MA "&alias=canary&state=rolling_out",
                    NULL, NULL, 0, &r) ||
            r.status != 200) {
            w_free(&r);
            return;
        }
        {
            const char *id = json_string_value(
                json_object_get(json_array_get(json_object_get(r.json, "items"), 0), "id"));
            char idc[64];
            struct wresp a;

            if (id != NULL) {
                snprintf(idc, sizeof(idc), "%s", id);
                if (what == 8)
                    w_json(w, "POST",
                           it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", idc),
                           json_pack("{ss}", "reason", "crash loop abort"), &a);
                else
                    w_json(w, "POST",
                           it_fmt(path, sizeof(path), "/api/v1/promotions/%s/advance", idc),
                           json_object(), &a);
                w_free(&a);
            } else if (w_json(w, "POST", "/api/v1/promotions",
                              json_pack("{ss sI ss}", "model", MA, "version",
                                        (json_int_t)rnd_in(&w->rng, 1, (unsigned)maxv), "alias",
                                        "canary"),
                              &a) &&
                       a.status == 201) {
                promotion_acked(&a);
                w_free(&a);
            } else {
                w_free(&a);
            }
        }
        w_free(&r);
    } else {
        /* production: roll back (often there is nowhere to go: 409). */
        w_json(w, "POST", "/api/v1/models/" MA "/aliases/production/rollback",
               json_pack("{ss}", "reason", "crash loop rollback"), &r);
        w_free(&r);
    }
}

static void do_alias(struct worker *w)
{
    struct wresp r;
    const char *model, *alias;
    json_t *body;
    long long maxa, maxb;

    pthread_mutex_lock(&sh.lock);
    maxa = sh.max_version_a;
    maxb = sh.max_version_b;
    pthread_mutex_unlock(&sh.lock);
    if (rnd_in(&w->rng, 0, 1) == 0) {
        unsigned v1 = rnd_in(&w->rng, 1, (unsigned)maxb), v2 = rnd_in(&w->rng, 1, (unsigned)maxb);
        unsigned wt = rnd_in(&w->rng, 1, 99);

        model = MB;
        alias = "staging";
        if (v1 == v2)
            body = json_pack("{sI}", "version", (json_int_t)v1);
        else
            body = json_pack("{s[{sIsI}{sIsI}]}", "routes", "version", (json_int_t)v1, "weight",
                             (json_int_t)wt, "version", (json_int_t)v2, "weight",
                             (json_int_t)(100 - wt));
    } else {
        model = MA;
        alias = "dev";
        body = json_pack("{sI}", "version", (json_int_t)rnd_in(&w->rng, 1, (unsigned)maxa));
    }
    {
        char path[160];

        if (w_json(w, "PUT",
                   it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias), body,
                   &r) &&
            r.status == 200) {
            struct ack a = {.kind = ACK_ALIAS};

            snprintf(a.model, sizeof(a.model), "%s", model);
            snprintf(a.key, sizeof(a.key), "%s", alias);
            a.n = (long long)json_integer_value(json_object_get(r.json, "generation"));
            ack_add(&a);
            count_ok(ACK_ALIAS);
        }
    }
    w_free(&r);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (;;) {
        pthread_mutex_lock(&sh.lock);
        while (!sh.run && !sh.quit) {
            sh.paused++;
            pthread_cond_broadcast(&sh.cond);
            pthread_cond_wait(&sh.cond, &sh.lock);
            sh.paused--;
        }
        if (sh.quit) {
            pthread_mutex_unlock(&sh.lock);
            return NULL;
        }
        pthread_mutex_unlock(&sh.lock);
        switch (w->id) {
        case 0:
            do_upload(w);
            break;
        case 1:
            do_version(w);
            break;
        case 2:
            do_promotion(w);
            break;
        default:
            do_alias(w);
            break;
        }
    }
}

/* Let the clients go, or stop them and wait until all are idle. */
static void clients_run(bool run)
{
    int64_t deadline = it_deadline(30000);

    pthread_mutex_lock(&sh.lock);
    sh.run = run;
    if (run) {
        snprintf(sh.base_url, sizeof(sh.base_url), "%s", srv->base_url);
        pthread_cond_broadcast(&sh.cond);
    } else {
        while (sh.paused < NWORKERS) {
            struct timespec ts;

            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&sh.cond, &sh.lock, &ts);
            if (it_now_ms() > deadline) {
                pthread_mutex_unlock(&sh.lock);
                fail_msg("the client threads did not pause");
            }
        }
    }
    pthread_mutex_unlock(&sh.lock);
}

/* ---- the receiver's view ------------------------------------------------------------ */

struct seen {
    char key[80]; /* model/alias */
    long long gen;
    char *body; /* the body of the newest acknowledged generation */
    unsigned regressions;
};

static struct seen seen[MAX_KEYS];
static size_t nseen;
static unsigned long deliveries;

static struct seen *seen_of(const char *model, const char *alias)
{
    char key[80];

    snprintf(key, sizeof(key), "%s/%s", model, alias);
    for (size_t i = 0; i < nseen; i++)
        if (strcmp(seen[i].key, key) == 0)
            return &seen[i];
    if (nseen == MAX_KEYS)
        fail_msg("too many aliases");
    snprintf(seen[nseen].key, sizeof(seen[nseen].key), "%s", key);
    seen[nseen].gen = 0;
    return &seen[nseen++];
}

/* Take what the receiver recorded so far (it keeps at most RX_MAX_RECS). */
static void rx_drain(void)
{
    static struct rx_rec recs[RX_MAX_RECS];
    size_t n = rx_take(rx, recs);

    for (size_t i = 0; i < n; i++) {
        struct rx_rec *r = &recs[i];
        struct seen *s;

        deliveries++;
        if (!r->sig_ok || !r->ts_ok)
            fail_msg("a delivery did not verify (id '%s', signature %s, timestamp %s): %.300s",
                     r->id, r->sig_ok ? "ok" : "BAD", r->ts_ok ? "ok" : "BAD",
                     r->body ? r->body : "");
        if (r->status != 200 || r->gen < 0)
            continue;
        s = seen_of(r->model, r->alias);
        if (r->gen < s->gen) {
            s->regressions++;
            print_error("%s: generation %lld delivered after %lld had been acknowledged\n", s->key,
                        (long long)r->gen, s->gen);
        }
        if (r->gen >= s->gen) {
            s->gen = r->gen;
            free(s->body);
            s->body = r->body;
            r->body = NULL;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(recs[i].body);
}

/* ---- routes ---------------------------------------------------------------------------- */

/* "v1:30,v2:70" from a routes array (version/weight), sorted by version. */
static void routes_key(const json_t *routes, char *out, size_t n)
{
    long long v[8], wt[8];
    size_t k = 0, o = 0;
    const json_t *r;
    size_t i;

    json_array_foreach(routes, i, r)
    {
        if (k == 8)
            break;
        v[k] = (long long)json_integer_value(json_object_get(r, "version"));
        wt[k] = (long long)json_integer_value(json_object_get(r, "weight"));
        k++;
    }
    for (size_t a = 0; a < k; a++)
        for (size_t b = a + 1; b < k; b++)
            if (v[b] < v[a]) {
                long long t = v[a];
                v[a] = v[b];
                v[b] = t;
                t = wt[a];
                wt[a] = wt[b];
                wt[b] = t;
            }
    out[0] = '\0';
    for (size_t a = 0; a < k && o < n; a++)
        o += (size_t)snprintf(out + o, n - o, "%sv%lld:%lld", a ? "," : "", v[a], wt[a]);
}

static void routes_key_text(const char *text, char *out, size_t n)
{
    json_t *j = json_loads(text ? text : "[]", 0, NULL);

    routes_key(j, out, n);
    json_decref(j);
}

/* ---- checks with the server down ------------------------------------------------------- */

struct verified {
    char (*d)[IT_DIGEST_LEN + 1];
    size_t n, cap;
};

static struct verified verified;

static bool is_verified(const char *d)
{
    for (size_t i = 0; i < verified.n; i++)
        if (strcmp(verified.d[i], d) == 0)
            return true;
    return false;
}

static void check_blob_hash(const char *digest, const char *what)
{
    char path[IT_PATH_MAX], hex[65];
    uint8_t buf[65536], md[32];
    unsigned mdlen = 0;
    EVP_MD_CTX *ctx;
    ssize_t r;
    int fd;

    if (is_verified(digest))
        return;
    it_blob_file(srv, digest, path);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail_msg("%s: its artifact %s has no file (%s): %s", what, digest, path, strerror(errno));
    ctx = EVP_MD_CTX_new();
    assert_non_null(ctx);
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    while ((r = read(fd, buf, sizeof(buf))) > 0)
        EVP_DigestUpdate(ctx, buf, (size_t)r);
    close(fd);
    EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (strcmp(hex, digest + 7) != 0)
        fail_msg("%s: the file of %s hashes to %s", what, digest, hex);
    if (verified.n == verified.cap) {
        verified.cap = verified.cap ? verified.cap * 2 : 256;
        verified.d = realloc(verified.d, verified.cap * sizeof(*verified.d));
        assert_non_null(verified.d);
    }
    snprintf(verified.d[verified.n++], IT_DIGEST_LEN + 1, "%s", digest);
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;

    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
        fail_msg("prepare '%s': %s", sql, sqlite3_errmsg(db));
    return s;
}

static long long one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = prep(db, sql);
    long long v = -1;

    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

static const char *col(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    return t ? (const char *)t : NULL;
}

static void db_checks(int iter)
{
    char path[IT_PATH_MAX];
    sqlite3 *db = NULL;
    sqlite3_stmt *s;

    if (it_on_postgres())
        return; /* the file checks are SQLite's; the API checks around them still run */
    it_data_path(srv, "modelgate.db", path);
    /* Read-only: nothing here checkpoints or recovers on the server's behalf. */
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        fail_msg("iteration %d: open %s: %s", iter, path, db ? sqlite3_errmsg(db) : "?");
    sqlite3_busy_timeout(db, 5000);

    s = prep(db, "PRAGMA integrity_check");
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *t = col(s, 0);
        if (t == NULL || strcmp(t, "ok") != 0)
            fail_msg("iteration %d: PRAGMA integrity_check: %s", iter, t ? t : "(null)");
    }
    sqlite3_finalize(s);
    s = prep(db, "PRAGMA foreign_key_check");
    if (sqlite3_step(s) == SQLITE_ROW)
        fail_msg("iteration %d: PRAGMA foreign_key_check: table %s rowid %lld violates a "
                 "reference to %s",
                 iter, col(s, 0), (long long)sqlite3_column_int64(s, 1), col(s, 2));
    sqlite3_finalize(s);

    /* Versions: artifact present and intact, signed, densely numbered. */
    s = prep(db, "SELECT m.name, v.version, v.artifact FROM versions v JOIN models m ON m.id = "
                 "v.model_id");
    while (sqlite3_step(s) == SQLITE_ROW) {
        char what[128];

        snprintf(what, sizeof(what), "iteration %d: version %s/%lld", iter, col(s, 0),
                 (long long)sqlite3_column_int64(s, 1));
        check_blob_hash(col(s, 2), what);
    }
    sqlite3_finalize(s);
    if (one_int(db, "SELECT count(*) FROM versions v WHERE NOT EXISTS (SELECT 1 FROM "
                    "version_signatures g WHERE g.version_id = v.id)") != 0)
        fail_msg("iteration %d: a version without its signature", iter);
    s = prep(db, "SELECT m.name, m.latest_version, count(v.id), max(v.version) FROM models m "
                 "LEFT JOIN versions v ON v.model_id = m.id GROUP BY m.id");
    while (sqlite3_step(s) == SQLITE_ROW) {
        long long latest =
            sqlite3_column_type(s, 1) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, 1);
        long long count = sqlite3_column_int64(s, 2);
        long long max = sqlite3_column_type(s, 3) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, 3);

        if (latest != max || count != max)
            fail_msg("iteration %d: model %s: latest_version %lld, %lld versions, highest %lld",
                     iter, col(s, 0), latest, count, max);
    }
    sqlite3_finalize(s);

    /* Blob rows: their files exist with their sizes. */
    s = prep(db, "SELECT digest, size FROM blobs");
    while (sqlite3_step(s) == SQLITE_ROW) {
        struct stat st;
        char file[IT_PATH_MAX];

        it_blob_file(srv, col(s, 0), file);
        if (stat(file, &st) != 0 || st.st_size != sqlite3_column_int64(s, 1))
            fail_msg("iteration %d: blob %s: file %s %s (row says %lld bytes)", iter, col(s, 0),
                     file, errno == ENOENT ? "missing" : "of another size",
                     (long long)sqlite3_column_int64(s, 1));
    }
    sqlite3_finalize(s);

    /* Promotions against their aliases and the alias history. */
    s = prep(db, "SELECT p.id, m.name, p.alias, p.version, p.state, p.weight, a.id, "
                 "a.generation, a.routes, a.promotion, (SELECT count(*) FROM promotion_events e "
                 "WHERE e.promotion_id = p.id) FROM promotions p JOIN models m ON m.id = "
                 "p.model_id LEFT JOIN aliases a ON a.model_id = p.model_id AND a.name = "
                 "p.alias");
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *id = col(s, 0), *model = col(s, 1), *alias = col(s, 2), *state = col(s, 4);
        long long version = sqlite3_column_int64(s, 3), weight = sqlite3_column_int64(s, 5);
        long long alias_id = sqlite3_column_int64(s, 6), gen = sqlite3_column_int64(s, 7);
        const char *routes = col(s, 8), *last_by = col(s, 9);
        char have[128], want[64];

        if (sqlite3_column_int64(s, 10) < 1)
            fail_msg("iteration %d: promotion %s (%s) has no events", iter, id, state);
        if (strcmp(state, "evaluating") == 0 || strcmp(state, "awaiting_approval") == 0)
            fail_msg("iteration %d: promotion %s of %s/%s is %s, but its policy has no gates "
                     "and no approvals: half-created",
                     iter, id, model, alias, state);
        if (strcmp(state, "rolling_out") == 0) {
            json_t *rj = json_loads(routes ? routes : "null", 0, NULL);
            json_t *r;
            size_t i;
            bool found = false;
            sqlite3_stmt *h;

            if (sqlite3_column_type(s, 6) == SQLITE_NULL)
                fail_msg("iteration %d: promotion %s is rolling out on %s/%s, which has no "
                         "routes",
                         iter, id, model, alias);
            if (last_by == NULL || strcmp(last_by, id) != 0)
                fail_msg("iteration %d: promotion %s is rolling out on %s/%s, but the alias's "
                         "last change (generation %lld) was by %s",
                         iter, id, model, alias, gen, last_by ? last_by : "no promotion");
            json_array_foreach(rj, i, r)
            {
                if (json_integer_value(json_object_get(r, "version")) == version &&
                    json_integer_value(json_object_get(r, "weight")) == weight)
                    found = true;
            }
            json_decref(rj);
            if (!found)
                fail_msg("iteration %d: promotion %s is rolling out v%lld at %lld%% on %s/%s, "
                         "but the routes are %s",
                         iter, id, version, weight, model, alias, routes);
            h = prep(db, "SELECT promotion FROM alias_history WHERE alias_id = ? AND "
                         "generation = ?");
            sqlite3_bind_int64(h, 1, alias_id);
            sqlite3_bind_int64(h, 2, gen);
            if (sqlite3_step(h) != SQLITE_ROW || col(h, 0) == NULL || strcmp(col(h, 0), id) != 0)
                fail_msg("iteration %d: promotion %s rolls out on %s/%s, but history entry %lld "
                         "is not its step",
                         iter, id, model, alias, gen);
            sqlite3_finalize(h);
        } else if (strcmp(state, "succeeded") == 0) {
            sqlite3_stmt *h = prep(db, "SELECT routes FROM alias_history WHERE alias_id = ? AND "
                                       "promotion = ?");
            bool found = false;

            snprintf(want, sizeof(want), "v%lld:100", version);
            sqlite3_bind_int64(h, 1, alias_id);
            sqlite3_bind_text(h, 2, id, -1, SQLITE_TRANSIENT);
            while (sqlite3_step(h) == SQLITE_ROW) {
                routes_key_text(col(h, 0), have, sizeof(have));
                found = found || strcmp(have, want) == 0;
            }
            sqlite3_finalize(h);
            if (!found)
                fail_msg("iteration %d: promotion %s of v%lld on %s/%s succeeded, but no history "
                         "entry of it gave v%lld 100%%",
                         iter, id, version, model, alias, version);
        }
    }
    sqlite3_finalize(s);

    /* Aliases: current routes are the newest history entry; no gaps. */
    s = prep(db, "SELECT a.id, m.name, a.name, a.generation, a.routes, (SELECT routes FROM "
                 "alias_history h WHERE h.alias_id = a.id AND h.generation = a.generation), "
                 "(SELECT count(*) FROM alias_history h WHERE h.alias_id = a.id), (SELECT "
                 "max(generation) FROM alias_history h WHERE h.alias_id = a.id), (SELECT "
                 "min(generation) FROM alias_history h WHERE h.alias_id = a.id) FROM aliases a "
                 "JOIN models m ON m.id = a.model_id");
    while (sqlite3_step(s) == SQLITE_ROW) {
        char cur[128], hist[128];
        long long gen = sqlite3_column_int64(s, 3), n = sqlite3_column_int64(s, 6);
        long long max = sqlite3_column_int64(s, 7), min = sqlite3_column_int64(s, 8);

        if (col(s, 5) == NULL)
            fail_msg("iteration %d: alias %s/%s is at generation %lld, which its history lacks",
                     iter, col(s, 1), col(s, 2), gen);
        routes_key_text(col(s, 4), cur, sizeof(cur));
        routes_key_text(col(s, 5), hist, sizeof(hist));
        if (strcmp(cur, hist) != 0)
            fail_msg("iteration %d: alias %s/%s routes %s, its history at generation %lld says "
                     "%s",
                     iter, col(s, 1), col(s, 2), cur, gen, hist);
        if (max != gen || n != max - min + 1)
            fail_msg("iteration %d: alias %s/%s at generation %lld has %lld history entries "
                     "from %lld to %lld",
                     iter, col(s, 1), col(s, 2), gen, n, min, max);
    }
    sqlite3_finalize(s);

    /* The outbox never runs ahead of its alias. */
    s = prep(db, "SELECT o.model, o.alias, o.generation, a.generation FROM outbox o JOIN models "
                 "m ON m.name = o.model LEFT JOIN aliases a ON a.model_id = m.id AND a.name = "
                 "o.alias WHERE o.gateway = 'hook'");
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (sqlite3_column_type(s, 3) == SQLITE_NULL ||
            sqlite3_column_int64(s, 2) > sqlite3_column_int64(s, 3))
            fail_msg("iteration %d: outbox row %s/%s at generation %lld, the alias at %lld", iter,
                     col(s, 0), col(s, 1), (long long)sqlite3_column_int64(s, 2),
                     (long long)sqlite3_column_int64(s, 3));
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
}

/* ---- checks over the API after the restart ---------------------------------------------- */

static long long audit_entries;
static char audit_head[80];

static void check_audit(int iter)
{
    struct it_resp *r = it_get(srv, "/api/v1/audit/verify", srv->admin_token);
    long long n;

    it_expect_status(srv, r, 200);
    if (!json_is_true(json_object_get(r->json, "ok")))
        fail_msg("iteration %d: the audit log does not verify: %s", iter, r->body);
    n = (long long)it_jint(r->json, "entries");
    if (n < audit_entries)
        fail_msg("iteration %d: the audit log has %lld entries, %lld before the kill", iter, n,
                 audit_entries);
    if (audit_entries > 0) {
        char path[96];
        struct it_resp *a = it_get(
            srv, it_fmt(path, sizeof(path), "/api/v1/audit?after=%lld&limit=1", audit_entries - 1),
            srv->admin_token);
        json_t *e;

        it_expect_status(srv, a, 200);
        e = json_array_get(it_jarr(a->json, "items"), 0);
        if (json_integer_value(json_object_get(e, "seq")) != audit_entries ||
            strcmp(jstr0(json_object_get(e, "hash")), audit_head) != 0)
            fail_msg("iteration %d: audit entry %lld changed across the kill: %s (head was %s)",
                     iter, audit_entries, a->body, audit_head);
    }
    audit_entries = n;
    snprintf(audit_head, sizeof(audit_head), "%s", it_jstr(r->json, "head"));
    it_release(srv);
}

static void check_acks(int iter)
{
    char path[256];

    for (size_t i = 0; i < sh.nacks; i++) {
        const struct ack *a = &sh.acks[i];
        struct it_resp *r;

        switch (a->kind) {
        case ACK_BLOB:
            r = it_request(srv, "HEAD", it_fmt(path, sizeof(path), "/api/v1/blobs/%s", a->key),
                           srv->admin_token, NULL, NULL, 0);
            if (r->status != 200)
                fail_msg("iteration %d: blob %s was acknowledged before the kill, HEAD now "
                         "answers %ld",
                         iter, a->key, r->status);
            break;
        case ACK_VERSION:
            r = it_get(
                srv, it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld", a->model, a->n),
                srv->admin_token);
            if (r->status != 200 ||
                strcmp(jstr0(json_object_get(json_object_get(r->json, "artifact"), "digest")),
                       a->artifact) != 0)
                fail_msg("iteration %d: version %s/%lld (artifact %s) was acknowledged before "
                         "the kill; now: %ld %.300s",
                         iter, a->model, a->n, a->artifact, r->status, r->body);
            break;
        case ACK_ALIAS:
            r = it_alias_get(srv, srv->admin_token, a->model, a->key);
            if (it_jint(r->json, "generation") < a->n)
                fail_msg("iteration %d: alias %s/%s generation %lld was acknowledged before the "
                         "kill; now it is at %lld",
                         iter, a->model, a->key, a->n, (long long)it_jint(r->json, "generation"));
            break;
        default:
            r = it_get(srv, it_fmt(path, sizeof(path), "/api/v1/promotions/%s", a->key),
                       srv->admin_token);
            if (r->status != 200)
                fail_msg("iteration %d: promotion %s was acknowledged before the kill; now "
                         "%ld",
                         iter, a->key, r->status);
            break;
        }
        it_resp_free(srv, &r);
    }
    sh.nacks = 0;
}

/* Every alias's newest generation reaches the receiver and the gateway says so. */
static void check_delivered(int iter)
{
    static const char *const models[] = {MA, MB};
    int64_t deadline = it_deadline(20000);
    char why[512];

    for (;;) {
        struct it_resp *gw;
        bool all = true;

        rx_drain();
        gw = pc_gateway_get(srv, "hook");
        why[0] = '\0';
        for (size_t m = 0; m < 2 && all; m++) {
            char path[128];
            struct it_resp *r =
                it_get(srv, it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases", models[m]),
                       srv->admin_token);
            json_t *a;
            size_t i;

            it_expect_status(srv, r, 200);
            json_array_foreach(it_jarr(r->json, "items"), i, a)
            {
                const char *alias = it_jstr(a, "alias");
                long long gen = (long long)it_jint(a, "generation");
                json_t *d = pc_gw_delivery(gw->json, models[m], alias);
                struct seen *s = seen_of(models[m], alias);
                char want[128], got[128] = "";
                json_t *body;

                if (s->gen > gen)
                    fail_msg("iteration %d: the receiver acknowledged generation %lld of %s/%s, "
                             "but after the restart the alias is at %lld: a committed change "
                             "was lost",
                             iter, s->gen, models[m], alias, gen);
                routes_key(it_jarr(a, "routes"), want, sizeof(want));
                body = s->body ? json_loads(s->body, 0, NULL) : NULL;
                routes_key(json_object_get(body, "routes"), got, sizeof(got));
                json_decref(body);
                if (d == NULL || json_integer_value(json_object_get(d, "generation")) != gen ||
                    strcmp(jstr0(json_object_get(d, "state")), "in_sync") != 0 || s->gen != gen ||
                    strcmp(want, got) != 0) {
                    snprintf(why, sizeof(why),
                             "%s/%s at generation %lld (%s); receiver has %lld (%s); gateway row "
                             "%s at %lld",
                             models[m], alias, gen, want, s->gen, got,
                             d ? json_string_value(json_object_get(d, "state")) : "(none)",
                             d ? (long long)json_integer_value(json_object_get(d, "generation"))
                               : -1LL);
                    all = false;
                    break;
                }
            }
            it_resp_free(srv, &r);
        }
        it_resp_free(srv, &gw);
        if (all)
            return;
        if (it_now_ms() > deadline) {
            pc_dump_server_notes(srv, 12);
            fail_msg("iteration %d: deliveries did not catch up: %s", iter, why);
        }
        it_pause_ms(20);
    }
}

static void check_no_5xx(int iter)
{
    pthread_mutex_lock(&sh.lock);
    if (sh.errors5xx > 0) {
        char first[512];

        snprintf(first, sizeof(first), "%s", sh.first5xx);
        pthread_mutex_unlock(&sh.lock);
        it_server_dump_log(srv, 3000);
        fail_msg("iteration %d: the server answered 5xx to a client while running: %s", iter,
                 first);
    }
    pthread_mutex_unlock(&sh.lock);
}

/* ---- the test -------------------------------------------------------------------------- */

static struct worker workers[NWORKERS];

static int setup(void **state)
{
    char art[IT_DIGEST_LEN + 1];

    pthread_mutex_init(&sh.lock, NULL);
    pthread_cond_init(&sh.cond, NULL);
    rx = rx_start(SECRET, true);
    srv = it_server_start(PC_SERVER_ARGS);
    snprintf(sh.token, sizeof(sh.token), "%s", srv->admin_token);

    it_upload(srv, "crash loop base artifact", 24, art);
    digest_add(art);
    it_model_create(srv, srv->admin_token, MA);
    it_model_create(srv, srv->admin_token, MB);
    for (int i = 0; i < 2; i++) {
        it_version_create(srv, srv->admin_token, MA, art, NULL);
        it_version_create(srv, srv->admin_token, MB, art, NULL);
    }
    sh.max_version_a = sh.max_version_b = 2;
    {
        struct it_resp *r = it_jreq(
            srv, "PUT", "/api/v1/models/" MA "/policies/production", srv->admin_token,
            "{\"rollout\":{\"steps\":[25,50,100],\"bake_seconds\":0,\"auto_advance\":true}}");

        it_expect_status(srv, r, 200);
        r = it_jreq(srv, "PUT", "/api/v1/models/" MA "/policies/canary", srv->admin_token,
                    "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":0,\"auto_advance\":false}}");
        it_expect_status(srv, r, 200);
    }
    rx_gateway_put(srv, "hook", rx, "");
    it_alias_set(srv, srv->admin_token, MB, "staging", "{\"version\":1}");
    it_alias_set(srv, srv->admin_token, MA, "dev", "{\"version\":1}");
    it_release(srv);

    for (int i = 0; i < NWORKERS; i++) {
        workers[i].id = i;
        workers[i].curl = curl_easy_init();
        workers[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
        assert_non_null(workers[i].curl);
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0)
            fail_msg("cannot start a client thread");
    }
    clients_run(false);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    pthread_mutex_lock(&sh.lock);
    sh.quit = true;
    pthread_cond_broadcast(&sh.cond);
    pthread_mutex_unlock(&sh.lock);
    for (int i = 0; i < NWORKERS; i++) {
        if (workers[i].curl != NULL) {
            pthread_join(workers[i].thread, NULL);
            curl_easy_cleanup(workers[i].curl);
        }
    }
    if (srv != NULL) {
        if (srv->pid != 0)
            it_server_stop(srv);
        it_server_free(&srv);
    }
    rx_stop(&rx);
    for (size_t i = 0; i < nseen; i++)
        free(seen[i].body);
    free(sh.digests);
    free(sh.acks);
    free(verified.d);
    *state = NULL;
    return 0;
}

static void test_kill9_loop(void **state)
{
    struct mg_server *s = *state;
    const char *env_n = getenv("MG_CRASH_ITERATIONS"), *env_seed = getenv("MG_CRASH_SEED");
    int iterations = it_sanitized() ? 50 : 60;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    int64_t t0 = it_now_ms(), killed_total = 0;
    unsigned regressions = 0;

    if (env_n != NULL && atoi(env_n) > 0)
        iterations = atoi(env_n);
    if (env_seed != NULL)
        seed = strtoull(env_seed, NULL, 0);
    if (seed == 0)
        seed = 1;
    print_message("%d iterations, MG_CRASH_SEED=%llu\n", iterations, (unsigned long long)seed);
    for (int i = 0; i < NWORKERS; i++)
        workers[i].rng ^= seed * (uint64_t)(2 * i + 1);

    /* A first look before any kill. */
    check_audit(0);
    check_delivered(0);
    for (int iter = 1; iter <= iterations; iter++) {
        unsigned delay = rnd_in(&seed, 20, 300);

        clients_run(true);
        it_pause_ms(delay); /* the random point of the kill */
        it_server_kill9(s);
        killed_total += delay;
        clients_run(false);

        db_checks(iter);
        it_server_restart(s);
        if (it_data_dir_count(s, "blobs/tmp") != 0)
            fail_msg("iteration %d: %zu stray files in blobs/tmp after the restart", iter,
                     it_data_dir_count(s, "blobs/tmp"));
        check_no_5xx(iter);
        check_audit(iter);
        check_acks(iter);
        check_delivered(iter);
    }
    for (size_t i = 0; i < nseen; i++)
        regressions += seen[i].regressions;
    print_message("%d kills after %lld ms of load on average; %lu uploads, %lu versions, %lu "
                  "promotions, %lu alias changes acknowledged; %lu conflicts, %lu other 4xx, "
                  "%lu transport errors; %lu webhook deliveries; %zu artifacts hashed; audit "
                  "at %lld entries; %.1f s\n",
                  iterations, (long long)(killed_total / iterations), sh.ok[ACK_BLOB],
                  sh.ok[ACK_VERSION], sh.ok[ACK_PROMOTION], sh.ok[ACK_ALIAS], sh.conflicts,
                  sh.other4xx, sh.transport, deliveries, verified.n, audit_entries,
                  (double)(it_now_ms() - t0) / 1000.0);
    if (sh.ok[ACK_BLOB] == 0 || sh.ok[ACK_VERSION] == 0 || sh.ok[ACK_PROMOTION] == 0 ||
        sh.ok[ACK_ALIAS] == 0)
        fail_msg("some kind of client never got a write through; the loop tested little");
    if (regressions > 0)
        fail_msg("%u times an older generation was delivered after a newer one had been "
                 "acknowledged",
                 regressions);
    it_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_loop),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
