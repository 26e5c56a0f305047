/*
 * test_replicas.c - three modelgated replicas on one PostgreSQL database behind a
 * real HAProxy (roundrobin over the replicas' fixed ports, health checks on
 * /healthz every 200 ms, retries with redispatch), one shared blob backend (an S3
 * server: --blobs s3://…, scripts/blob-test.sh) and one --signing-key:
 *
 *   - 300 concurrent version creations through HAProxy: all 201, numbers 1..300,
 *     one signing key, and the list read on another replica (its response cache
 *     filled before the burst) shows them all;
 *   - 20 concurrent promotions of one protected alias spread over the replicas:
 *     one 201, nineteen 409, one active promotion;
 *   - ?wait=10 on any replica returns once the webhook gateway acknowledged,
 *     whichever replica delivered;
 *   - the leader killed mid-bake: the rollout still succeeds and one new leader
 *     takes over;
 *   - a token revoked on one replica is refused by the others within 2 s;
 *   - a delivery in flight on a replica is left to it when another replica restarts,
 *     and delivered by another once the holder is killed and taken for dead,
 *     generations never going backwards;
 *   - PostgreSQL restarted just after the leader's heartbeat: the replicas
 *     settle on one leader again, and rollouts still step;
 *   - chaos: bursts through HAProxy with a replica killed mid-burst every round
 *     and PostgreSQL restarted once; nothing acknowledged is lost, numbering
 *     stays dense, promotions stay consistent, the audit chain verifies, every
 *     alias's newest generation is delivered, and there is one leader.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_replicas); in the SQLite
 * pass every test skips. Requests from worker threads use their own libcurl
 * handles (the harness is main-thread only) and only record what they got; the
 * main thread asserts. The chaos is random: the seed is printed, MG_SEED=N
 * replays it.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "webhook_rx.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <libpq-fe.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#define NREP 3
#define SECRET "whsec-modelgate-replicas-0123456789abcdef"
#define MAX_THREADS 16

/* The cluster every test runs against. */
static struct {
    struct mg_server *r[NREP];
    int port[NREP];
    char dir[IT_PATH_MAX];   /* scratch: haproxy.cfg, its log, key.pem, blobs/ */
    char blobs[IT_PATH_MAX]; /* the S3 server's directory (scripts/blob-test.sh) */
    char blobs_url[IT_PATH_MAX];
    char key[IT_PATH_MAX]; /* the shared --signing-key */
    struct it_proc hap;
    int front_port, stats_port;
    char front[64]; /* http://127.0.0.1:FRONT */
    char art[IT_DIGEST_LEN + 1];
    struct rx *rx; /* the current test's webhook receiver, if any */
} cl;

/* ---- randomness (a seed printed, MG_SEED to replay) ------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static unsigned rnd_below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static void rng_seed(void)
{
    const char *env = getenv("MG_SEED");

    rng_state =
        env && *env ? strtoull(env, NULL, 0) : (uint64_t)it_wall_now_ms() ^ (uint64_t)getpid();
    if (rng_state == 0)
        rng_state = 88172645463325252ull;
    print_message("random seed %llu (MG_SEED=%llu replays it)\n", (unsigned long long)rng_state,
                  (unsigned long long)rng_state);
}

/* ---- requests from worker threads ------------------------------------------- */

enum job_kind { JOB_OTHER, JOB_VERSION, JOB_UPLOAD, JOB_ALIAS, JOB_PROMOTION };

/* One request and what came back. Worker threads fill in the outcome only. */
struct job {
    enum job_kind kind;
    int arg; /* which model or alias */
    char method[8];
    char url[320];
    const char *token;
    const char *content_type;
    char *body; /* malloc'd, or NULL */
    size_t len;
    char digest[IT_DIGEST_LEN + 1]; /* an upload's bytes */
    /* outcome */
    CURLcode rc;
    long status;
    char *resp;
    size_t resp_len;
    int64_t done_ms;
};

struct pool {
    struct job *jobs;
    size_t n;
    atomic_size_t next, done;
    pthread_barrier_t go; /* every thread starts at once */
    long timeout_ms;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct job *j = ud;
    size_t n = size * nmemb;
    char *nb = realloc(j->resp, j->resp_len + n + 1);

    if (nb == NULL)
        return 0;
    memcpy(nb + j->resp_len, p, n);
    j->resp = nb;
    j->resp_len += n;
    j->resp[j->resp_len] = '\0';
    return n;
}

static void job_run(CURL *c, struct job *j, long timeout_ms)
{
    struct curl_slist *hl = NULL;
    char auth[200], ct[120];

    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, j->url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, j->method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, j);
    if (j->token != NULL) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", j->token);
        hl = curl_slist_append(hl, auth);
    }
    if (j->content_type != NULL) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", j->content_type);
        hl = curl_slist_append(hl, ct);
    }
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    if (j->body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, j->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->len);
    }
    j->rc = curl_easy_perform(c);
    j->status = 0;
    if (j->rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &j->status);
    j->done_ms = it_now_ms();
    curl_slist_free_all(hl);
}

static void *pool_main(void *arg)
{
    struct pool *p = arg;
    CURL *c = curl_easy_init();

    pthread_barrier_wait(&p->go);
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);

        if (i >= p->n || c == NULL)
            break;
        job_run(c, &p->jobs[i], p->timeout_ms);
        atomic_fetch_add(&p->done, 1);
    }
    if (c != NULL)
        curl_easy_cleanup(c);
    return NULL;
}

/* The batch of jobs running now: nthreads threads, each with its own easy handle. One
 * at a time; the test teardown joins it after a failure. */
static struct {
    struct pool p;
    pthread_t th[MAX_THREADS];
    int nthreads;
    bool live;
} batch;

/* The jobs of the running test, freed by jobs_drop() or by the test teardown. */
static struct job *jobs_held;
static size_t njobs_held;

static void batch_start(struct job *jobs, size_t n, int nthreads)
{
    if (batch.live)
        fail_msg("a batch is running already");
    memset(&batch, 0, sizeof(batch));
    batch.p.jobs = jobs;
    batch.p.n = n;
    batch.p.timeout_ms = (long)it_scaled_ms(30000);
    atomic_init(&batch.p.next, 0);
    atomic_init(&batch.p.done, 0);
    batch.nthreads = nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
    pthread_barrier_init(&batch.p.go, NULL, (unsigned)batch.nthreads);
    for (int i = 0; i < batch.nthreads; i++) {
        if (pthread_create(&batch.th[i], NULL, pool_main, &batch.p) != 0) {
            print_error("pthread_create: %s\n", strerror(errno));
            abort(); /* the threads started wait at the barrier for ever */
        }
    }
    batch.live = true;
}

/* How many of the batch's requests are answered (or failed) so far. */
static size_t batch_done(void)
{
    return atomic_load(&batch.p.done);
}

static void batch_join(void)
{
    if (!batch.live)
        return;
    for (int i = 0; i < batch.nthreads; i++)
        pthread_join(batch.th[i], NULL);
    pthread_barrier_destroy(&batch.p.go);
    batch.live = false;
}

static void batch_run(struct job *jobs, size_t n, int nthreads)
{
    batch_start(jobs, n, nthreads);
    batch_join();
}

static void jobs_drop(void)
{
    batch_join();
    for (size_t i = 0; i < njobs_held; i++) {
        free(jobs_held[i].body);
        free(jobs_held[i].resp);
    }
    free(jobs_held);
    jobs_held = NULL;
    njobs_held = 0;
}

/* n fresh (zeroed) jobs, replacing the ones held before. */
static struct job *jobs_new(size_t n)
{
    jobs_drop();
    jobs_held = calloc(n, sizeof(*jobs_held));
    if (jobs_held == NULL)
        fail_msg("out of memory");
    njobs_held = n;
    return jobs_held;
}

static void job_set(struct job *j, enum job_kind kind, int arg, const char *method,
                    const char *base, const char *path, const char *token, const char *content_type,
                    const void *body, size_t len)
{
    memset(j, 0, sizeof(*j));
    j->kind = kind;
    j->arg = arg;
    snprintf(j->method, sizeof(j->method), "%s", method);
    it_fmt(j->url, sizeof(j->url), "%s%s", base, path);
    j->token = token;
    j->content_type = content_type;
    if (body != NULL) {
        j->body = malloc(len + 1);
        if (j->body == NULL)
            fail_msg("out of memory");
        memcpy(j->body, body, len);
        j->body[len] = '\0';
        j->len = len;
    }
}

static json_t *job_json(const struct job *j)
{
    return j->resp ? json_loads(j->resp, 0, NULL) : NULL;
}

static void job_show(const struct job *j)
{
    print_error("%s %s: %s, status %ld, body %.600s\n", j->method, j->url,
                j->rc == CURLE_OK ? "answered" : curl_easy_strerror(j->rc), j->status,
                j->resp ? j->resp : "");
}

/* ---- the cluster -------------------------------------------------------------- */

static void need_pg(void)
{
    if (!it_on_postgres()) {
        print_message("(skipped: replicas share a PostgreSQL database; this runs as "
                      "pg_integration_test_replicas)\n");
        skip();
    }
    if (cl.r[0] == NULL)
        fail_msg("the cluster did not start (see the group setup)");
}

/* A P-256 key in PEM PKCS#8, mode 0600: what --signing-key reads. */
static void write_signing_key(const char *path)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

    if (k == NULL || f == NULL)
        fail_msg("cannot make the signing key %s: %s", path, strerror(errno));
    if (PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) != 1 || fclose(f) != 0)
        fail_msg("cannot write the signing key %s", path);
    EVP_PKEY_free(k);
}

static void write_haproxy_config(void)
{
    char path[IT_PATH_MAX], cfg[4096];

    it_fmt(cfg, sizeof(cfg),
           "global\n"
           "    stats socket ipv4@127.0.0.1:%d level admin\n"
           "    maxconn 2000\n"
           "defaults\n"
           "    mode http\n"
           "    timeout connect 1s\n"
           "    timeout client 60s\n"
           "    timeout server 60s\n"
           "    retries 3\n"
           "    option redispatch\n"
           "    retry-on conn-failure empty-response\n"
           "frontend fe\n"
           "    bind 127.0.0.1:%d\n"
           "    default_backend replicas\n"
           "backend replicas\n"
           "    balance roundrobin\n"
           "    option httpchk GET /healthz\n"
           "    server r1 127.0.0.1:%d check inter 200ms fall 1 rise 1\n"
           "    server r2 127.0.0.1:%d check inter 200ms fall 1 rise 1\n"
           "    server r3 127.0.0.1:%d check inter 200ms fall 1 rise 1\n",
           cl.stats_port, cl.front_port, cl.port[0], cl.port[1], cl.port[2]);
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", cl.dir), cfg);
}

static void start_replica(int i)
{
    char listen[32], creds[IT_PATH_MAX + 16];
    const char *const args[] = {"--listen",
                                it_fmt(listen, sizeof(listen), "127.0.0.1:%d", cl.port[i]),
                                "--blobs",
                                cl.blobs_url,
                                "--blobs-credentials",
                                it_fmt(creds, sizeof(creds), "%s/credentials", cl.blobs),
                                "--signing-key",
                                cl.key,
                                "--push-backoff-base-ms",
                                "50",
                                "--push-backoff-max-ms",
                                "400",
                                NULL};

    cl.r[i] = i == 0 ? it_server_start(args) : it_server_join(cl.r[0], args);
    if (cl.r[i]->port != cl.port[i])
        fail_msg("replica %d listens on %d, not on its fixed port %d", i + 1, cl.r[i]->port,
                 cl.port[i]);
}

/* GET /api/v1/cluster on replica i (admin); the answer (new reference). */
static json_t *cluster_of(int i)
{
    struct mg_server *s = cl.r[i];
    struct it_resp *r = it_get(s, "/api/v1/cluster", s->admin_token);
    json_t *out;

    it_expect_status(s, r, 200);
    out = json_incref(r->json);
    it_resp_free(s, &r);
    return out;
}

/* The id replica i answers with, which its own list marks as self. */
static void replica_id(int i, char id[32])
{
    json_t *c = cluster_of(i), *e;
    bool found = false;
    size_t k;

    snprintf(id, 32, "%s", it_jstr(c, "replica"));
    json_array_foreach(it_jarr(c, "replicas"), k, e)
    {
        if (!json_is_true(json_object_get(e, "self")))
            continue;
        if (strcmp(it_jstr(e, "id"), id) != 0)
            fail_msg("replica %d: the self entry %s is not the replica %s", i + 1, it_jstr(e, "id"),
                     id);
        found = true;
    }
    if (!found)
        fail_msg("replica %d is not in its own /api/v1/cluster list", i + 1);
    json_decref(c);
}

/*
 * Poll /api/v1/cluster on every running replica until exactly one says it leads
 * (and, when not_id is not NULL, it is not the replica with that id), the same one
 * in every poll for stable_ms: a replica that only believes it leads shows as a
 * second leader sooner or later. Returns its index, or -1 at the deadline (what
 * each replica said last is printed then).
 */
static int settle_leader(int64_t timeout_ms, const char *not_id, int64_t stable_ms)
{
    int64_t deadline = it_deadline(timeout_ms), since = 0;
    int last = -1;

    for (;;) {
        char said[NREP][160];
        int n = 0, who = -1;

        for (int i = 0; i < NREP; i++) {
            json_t *c;
            bool leads;

            if (cl.r[i] == NULL || cl.r[i]->pid == 0) {
                snprintf(said[i], sizeof(said[i]), "replica %d: down", i + 1);
                continue;
            }
            c = cluster_of(i);
            leads = json_is_true(json_object_get(c, "leader"));
            snprintf(said[i], sizeof(said[i]), "replica %d (%s): leader %s, %zu listed", i + 1,
                     it_jstr(c, "replica"), leads ? "true" : "false",
                     json_array_size(it_jarr(c, "replicas")));
            if (leads && not_id != NULL && strcmp(it_jstr(c, "replica"), not_id) == 0)
                n += 2; /* the one that was to lose the leadership still has it */
            else if (leads) {
                n++;
                who = i;
            }
            json_decref(c);
        }
        if (n == 1 && who == last) {
            if (it_now_ms() - since >= stable_ms)
                return who;
        } else {
            last = n == 1 ? who : -1;
            since = it_now_ms();
        }
        if (it_now_ms() > deadline) {
            for (int i = 0; i < NREP; i++)
                print_error("%s\n", said[i]);
            return -1;
        }
        it_pause_ms(50);
    }
}

/* settle_leader, failing at the deadline. */
static int wait_one_leader(int64_t timeout_ms, const char *not_id)
{
    int who = settle_leader(timeout_ms, not_id, 1500);

    if (who < 0)
        fail_msg("want exactly one leader among the running replicas%s for 1.5 s; each said "
                 "the above last",
                 not_id ? " (not the killed one)" : "");
    return who;
}

/* Every running replica's /cluster marks one replica "leader": the one that leads (who). */
static void leader_listed_by_all(int who)
{
    char id[32], said[160] = "";
    int64_t deadline = it_deadline(10000);

    replica_id(who, id);
    for (int i = 0; i < NREP; i++) {
        while (cl.r[i] != NULL && cl.r[i]->pid != 0) {
            json_t *c = cluster_of(i), *e;
            int n = 0;
            bool right = false;
            size_t k;

            json_array_foreach(it_jarr(c, "replicas"), k, e)
            {
                if (json_is_true(json_object_get(e, "leader"))) {
                    n++;
                    right = strcmp(it_jstr(e, "id"), id) == 0;
                    snprintf(said, sizeof(said), "%s", it_jstr(e, "id"));
                }
            }
            json_decref(c);
            if (n == 1 && right)
                break;
            if (it_now_ms() > deadline)
                fail_msg("replica %d lists %d leaders (last %s), want only %s", i + 1, n, said, id);
            it_pause_ms(50);
        }
    }
}

static void restart_if_down(int i)
{
    if (cl.r[i] != NULL && cl.r[i]->pid == 0)
        it_server_restart(cl.r[i]);
}

/* HAProxy's view of its servers (`show stat`): sessions so far in stot, UP in up. */
static void haproxy_servers(long stot[NREP], bool up[NREP])
{
    char *stat = pc_haproxy_cmd(cl.stats_port, "show stat\n");
    char *save = NULL;

    for (int i = 0; i < NREP; i++) {
        stot[i] = -1;
        up[i] = false;
    }
    for (char *line = strtok_r(stat, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        /* pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,
         * wretr,wredis,status,... */
        char *f[20] = {0}, *p = line, *sv = NULL;
        int k = 0;

        while (k < 20 && p != NULL) {
            f[k++] = p;
            p = strchr(p, ',');
            if (p != NULL)
                *p++ = '\0';
        }
        if (k < 18 || strcmp(f[0], "replicas") != 0)
            continue;
        sv = f[1];
        if (sv[0] == 'r' && sv[1] >= '1' && sv[1] <= '3' && sv[2] == '\0') {
            stot[sv[1] - '1'] = atol(f[7]);
            up[sv[1] - '1'] = strncmp(f[17], "UP", 2) == 0;
        }
    }
    free(stat);
}

/* Wait until HAProxy's health checks see every replica up. */
static void wait_haproxy_all_up(void)
{
    int64_t deadline = it_deadline(10000);

    for (;;) {
        long stot[NREP];
        bool up[NREP];

        haproxy_servers(stot, up);
        if (up[0] && up[1] && up[2])
            return;
        if (it_now_ms() > deadline) {
            it_proc_dump_log(&cl.hap);
            fail_msg("HAProxy does not see every replica up: r1 %d, r2 %d, r3 %d", up[0], up[1],
                     up[2]);
        }
        it_pause_ms(50);
    }
}

static int group_setup(void **state)
{
    char cfg[IT_PATH_MAX], log[IT_PATH_MAX];

    *state = NULL;
    memset(&cl, 0, sizeof(cl));
    if (!it_on_postgres())
        return 0; /* every test skips */
    rng_seed();
    it_mkdtemp(cl.dir, "replicas");
    it_fmt(cl.blobs, sizeof(cl.blobs), "%s/s3", cl.dir);
    {
        char cmd[IT_PATH_MAX * 2 + 64];
        FILE *f;

        it_fmt(cmd, sizeof(cmd), "bash %s/scripts/blob-test.sh start s3 %s",
               getenv("MG_SOURCE_DIR"), cl.blobs);
        if ((f = popen(cmd, "r")) == NULL || fgets(cl.blobs_url, sizeof(cl.blobs_url), f) == NULL)
            fail_msg("%s: no S3 server", cmd);
        cl.blobs_url[strcspn(cl.blobs_url, "\n")] = '\0';
        if (pclose(f) != 0)
            fail_msg("%s failed", cmd);
    }
    it_fmt(cl.key, sizeof(cl.key), "%s/key.pem", cl.dir);
    write_signing_key(cl.key);
    for (int i = 0; i < NREP; i++)
        cl.port[i] = it_free_port();
    cl.front_port = it_free_port();
    cl.stats_port = it_free_port();
    for (int i = 0; i < NREP; i++)
        start_replica(i);

    write_haproxy_config();
    it_fmt(cfg, sizeof(cfg), "%s/haproxy.cfg", cl.dir);
    it_fmt(log, sizeof(log), "%s/haproxy.log", cl.dir);
    it_proc_spawn(&cl.hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", cfg, NULL},
                  log);
    it_proc_wait_port(&cl.hap, cl.stats_port);
    it_proc_wait_port(&cl.hap, cl.front_port);
    it_fmt(cl.front, sizeof(cl.front), "http://127.0.0.1:%d", cl.front_port);
    wait_haproxy_all_up();

    {
        struct it_resp *r = it_upload(cl.r[0], "replicated model bytes", 22, cl.art);

        it_resp_free(cl.r[0], &r);
    }
    /* One cluster: every replica lists all three, one of them leads. */
    for (int i = 0; i < NREP; i++) {
        json_t *c = cluster_of(i);

        assert_string_equal(it_jstr(c, "database"), "postgresql");
        assert_string_equal(it_jstr(c, "blobs"), "s3");
        if (json_array_size(it_jarr(c, "replicas")) != NREP)
            fail_msg("replica %d lists %zu replicas, want %d", i + 1,
                     json_array_size(it_jarr(c, "replicas")), NREP);
        json_decref(c);
    }
    leader_listed_by_all(wait_one_leader(10000, NULL));
    *state = cl.r[0];
    return 0;
}

static int group_teardown(void **state)
{
    *state = NULL;
    rx_stop(&cl.rx);
    it_proc_stop(&cl.hap);
    for (int i = NREP - 1; i >= 0; i--) {
        if (cl.r[i] == NULL)
            continue;
        if (cl.r[i]->pid != 0)
            it_server_stop(cl.r[i]);
    }
    /* The joined replicas first: the first one drops the database. */
    for (int i = NREP - 1; i >= 0; i--)
        it_server_free(&cl.r[i]);
    if (cl.blobs_url[0] != '\0') {
        char cmd[IT_PATH_MAX * 2 + 64];

        it_fmt(cmd, sizeof(cmd), "bash %s/scripts/blob-test.sh stop %s", getenv("MG_SOURCE_DIR"),
               cl.blobs);
        if (system(cmd) != 0)
            fprintf(stderr, "%s failed\n", cmd);
    }
    if (cl.dir[0] != '\0')
        it_rmtree(cl.dir);
    return 0;
}

static void ch_free(void);
static char *held_token;

/* Per test: the requests joined and freed, the receiver stopped, every replica running
 * again (whatever a test that failed half-way left behind). */
static int test_teardown(void **state)
{
    (void)state;
    jobs_drop();
    ch_free();
    free(held_token);
    held_token = NULL;
    rx_stop(&cl.rx);
    for (int i = 0; i < NREP; i++) {
        if (cl.r[i] != NULL)
            it_release(cl.r[i]);
    }
    for (int i = 0; i < NREP; i++)
        restart_if_down(i);
    return 0;
}

/* ---- small API helpers ------------------------------------------------------------ */

/* Every version number of model (all pages), read on replica i, into out (at most max). */
static size_t list_versions(int i, const char *model, json_int_t *out, size_t max, char *keyid,
                            size_t keyid_len)
{
    struct mg_server *s = cl.r[i];
    char path[512], token[300] = "";
    size_t n = 0;

    if (keyid != NULL)
        keyid[0] = '\0';
    for (;;) {
        struct it_resp *r;
        json_t *item, *next;
        size_t k;

        if (token[0] != '\0') {
            char *enc = it_urlencode(token);

            it_fmt(path, sizeof(path), "/api/v1/models/%s/versions?limit=1000&page_token=%s", model,
                   enc);
            free(enc);
        } else {
            it_fmt(path, sizeof(path), "/api/v1/models/%s/versions?limit=1000", model);
        }
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        json_array_foreach(it_jarr(r->json, "items"), k, item)
        {
            if (n < max)
                out[n] = it_jint(item, "version");
            n++;
            if (keyid != NULL) {
                const char *kid =
                    json_string_value(json_object_get(json_object_get(item, "signature"), "keyid"));

                if (kid == NULL)
                    fail_msg("version %lld of %s has no signature keyid: %.300s",
                             (long long)it_jint(item, "version"), model, r->body);
                if (keyid[0] == '\0')
                    snprintf(keyid, keyid_len, "%s", kid);
                else if (strcmp(keyid, kid) != 0)
                    fail_msg("versions of %s are signed with two keys, %s and %s: the replicas "
                             "do not share --signing-key",
                             model, keyid, kid);
            }
        }
        next = json_object_get(r->json, "next_page_token");
        if (!json_is_string(next) || json_string_length(next) == 0) {
            it_resp_free(s, &r);
            break;
        }
        snprintf(token, sizeof(token), "%s", json_string_value(next));
        it_resp_free(s, &r);
    }
    return n;
}

static int cmp_int(const void *a, const void *b)
{
    json_int_t x = *(const json_int_t *)a, y = *(const json_int_t *)b;

    return x < y ? -1 : x > y;
}

/* Assert nums (n of them, any order) are exactly 1..n; what names them in messages. */
static void expect_dense(json_int_t *nums, size_t n, const char *what)
{
    qsort(nums, n, sizeof(*nums), cmp_int);
    for (size_t i = 0; i < n; i++) {
        if (nums[i] != (json_int_t)(i + 1)) {
            if (i > 0 && nums[i] == nums[i - 1])
                fail_msg("%s: version %lld twice (numbers must be 1..%zu, each once)", what,
                         (long long)nums[i], n);
            fail_msg("%s: %zu versions, but number %zu is %lld (want 1..%zu without a gap)", what,
                     n, i + 1, (long long)nums[i], n);
        }
    }
}

static void put_policy_on(int i, const char *model, const char *alias, const char *policy)
{
    it_policy_put(cl.r[i], model, alias, policy);
}

/* The alias as replica i sees it (new reference). */
static json_t *alias_of(int i, const char *model, const char *alias)
{
    struct it_resp *r = it_alias_get(cl.r[i], cl.r[i]->admin_token, model, alias);
    json_t *out = json_incref(r->json);

    it_resp_free(cl.r[i], &r);
    return out;
}

/* ---- 1. concurrent version creations ---------------------------------------------- */

#define T1_VERSIONS 300

static void test_concurrent_versions_through_haproxy(void **state)
{
    struct job *jobs = jobs_new(T1_VERSIONS);
    json_int_t nums[T1_VERSIONS], listed[T1_VERSIONS + 8];
    char body[512], keyid[128];
    long stot0[NREP], stot1[NREP];
    bool up[NREP];
    size_t n;
    int64_t t0;

    (void)state;
    need_pg();
    it_model_create(cl.r[0], cl.r[0]->admin_token, "vmodel");
    assert_int_equal(list_versions(2, "vmodel", listed, T1_VERSIONS + 8, NULL, 0), 0);
    it_fmt(body, sizeof(body), "{\"artifact\":\"%s\",\"image\":\"%s\"}", cl.art, IT_IMAGE);
    for (size_t i = 0; i < T1_VERSIONS; i++)
        job_set(&jobs[i], JOB_VERSION, 0, "POST", cl.front, "/api/v1/models/vmodel/versions",
                cl.r[0]->admin_token, "application/json", body, strlen(body));
    haproxy_servers(stot0, up);
    t0 = it_now_ms();
    batch_run(jobs, T1_VERSIONS, 12);
    print_message("%d version creations through HAProxy in %lld ms\n", T1_VERSIONS,
                  (long long)(it_now_ms() - t0));
    haproxy_servers(stot1, up);
    for (size_t i = 0; i < T1_VERSIONS; i++) {
        json_t *j = job_json(&jobs[i]);

        if (jobs[i].status != 201 || !json_is_integer(json_object_get(j, "version"))) {
            job_show(&jobs[i]);
            fail_msg("version creation %zu of %d: want 201 with a version number", i + 1,
                     T1_VERSIONS);
        }
        nums[i] = json_integer_value(json_object_get(j, "version"));
        json_decref(j);
    }
    jobs_drop();
    expect_dense(nums, T1_VERSIONS, "the numbers the 201 answers gave");
    /* HAProxy spread them: every replica served a share. */
    for (int i = 0; i < NREP; i++) {
        print_message("replica %d served %ld of the requests\n", i + 1, stot1[i] - stot0[i]);
        if (stot1[i] - stot0[i] < T1_VERSIONS / 10)
            fail_msg("replica %d served %ld of %d requests: HAProxy did not spread them", i + 1,
                     stot1[i] - stot0[i], T1_VERSIONS);
    }
    /* Every replica reads all of them, one signing key across them. */
    for (int i = NREP - 1; i >= 0; i--) {
        n = list_versions(i, "vmodel", listed, T1_VERSIONS + 8, keyid, sizeof(keyid));
        if (n != T1_VERSIONS)
            fail_msg("replica %d lists %zu versions of vmodel, want %d", i + 1, n, T1_VERSIONS);
        expect_dense(listed, n, "the version list");
    }
    print_message("all %d versions are signed by key %s\n", T1_VERSIONS, keyid);

    /* Replica 3's response cache holds version 150; a change made on replica 1 shows there. */
    {
        const char *path = "/api/v1/models/vmodel/versions/150";
        struct it_resp *r = it_get(cl.r[2], path, cl.r[2]->admin_token);

        it_expect_status(cl.r[2], r, 200);
        it_resp_free(cl.r[2], &r);
        r = it_get(cl.r[2], path, cl.r[2]->admin_token);
        it_resp_free(cl.r[2], &r);
        r = it_jreq(cl.r[0], "PATCH", path, cl.r[0]->admin_token,
                    "{\"description\":\"changed on replica 1\"}");
        it_expect_status(cl.r[0], r, 200);
        it_resp_free(cl.r[0], &r);
        r = it_get(cl.r[2], path, cl.r[2]->admin_token);
        it_expect_status(cl.r[2], r, 200);
        if (strcmp(it_jstr(r->json, "description"), "changed on replica 1") != 0)
            fail_msg("replica 3 answers version 150 from its cache after replica 1 changed it: "
                     "%s",
                     r->body);
        it_resp_free(cl.r[2], &r);
    }
}

/* ---- 2. concurrent promotions ------------------------------------------------------- */

#define T2_POSTS 20

static void test_concurrent_promotions_one_wins(void **state)
{
    struct job *jobs;
    const char *body = "{\"model\":\"pmodel\",\"version\":2,\"alias\":\"prod\","
                       "\"reason\":\"race\"}";
    char id[64] = "", path[256];
    int created = 0, conflicts = 0;
    struct it_resp *r;
    json_t *p;
    size_t k, active = 0;

    (void)state;
    need_pg();
    it_model_create(cl.r[0], cl.r[0]->admin_token, "pmodel");
    it_version_create(cl.r[0], cl.r[0]->admin_token, "pmodel", cl.art, NULL);
    it_version_create(cl.r[1], cl.r[1]->admin_token, "pmodel", cl.art, NULL);
    it_alias_to(cl.r[2], cl.r[2]->admin_token, "pmodel", "prod", 1, 0);
    /* Protected, and the promotion waits for an approval: it stays active. */
    put_policy_on(1, "pmodel", "prod", "{\"approvals\":{\"required\":1}}");
    jobs = jobs_new(T2_POSTS);
    for (int i = 0; i < T2_POSTS; i++) {
        job_set(&jobs[i], JOB_PROMOTION, 0, "POST", cl.r[i % NREP]->base_url, "/api/v1/promotions",
                cl.r[0]->admin_token, "application/json", body, strlen(body));
    }
    batch_run(jobs, T2_POSTS, T2_POSTS);
    for (int i = 0; i < T2_POSTS; i++) {
        json_t *j = job_json(&jobs[i]);

        if (jobs[i].status == 201) {
            created++;
            snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
        } else if (jobs[i].status == 409) {
            const char *code =
                json_string_value(json_object_get(json_object_get(j, "error"), "code"));

            if (code == NULL || strcmp(code, "promotion_in_progress") != 0) {
                job_show(&jobs[i]);
                fail_msg("a losing promotion should be 409 promotion_in_progress");
            }
            conflicts++;
        } else {
            job_show(&jobs[i]);
            fail_msg("promotion %d of %d: want 201 or 409", i + 1, T2_POSTS);
        }
        json_decref(j);
    }
    jobs_drop();
    print_message("%d concurrent promotions over %d replicas: %d created, %d conflicts\n", T2_POSTS,
                  NREP, created, conflicts);
    assert_int_equal(created, 1);
    assert_int_equal(conflicts, T2_POSTS - 1);

    /* One active promotion of the alias, the one that won, on every replica. */
    r = it_get(cl.r[2], "/api/v1/promotions?model=pmodel&alias=prod&limit=1000",
               cl.r[2]->admin_token);
    it_expect_status(cl.r[2], r, 200);
    json_array_foreach(it_jarr(r->json, "items"), k, p)
    {
        if (!it_promotion_final(it_jstr(p, "state"))) {
            active++;
            assert_string_equal(it_jstr(p, "id"), id);
        }
    }
    if (active != 1 || json_array_size(it_jarr(r->json, "items")) != 1)
        fail_msg("want exactly one promotion of pmodel/prod, active: %s", r->body);
    for (int i = 0; i < NREP; i++) {
        json_t *a = alias_of(i, "pmodel", "prod");

        assert_string_equal(it_jstr(a, "promotion"), id);
        json_decref(a);
    }
    r = it_jreq(cl.r[1], "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", id),
                cl.r[1]->admin_token, "{\"reason\":\"the race is over\"}");
    it_expect_status(cl.r[1], r, 200);
}

/* ---- 3. ?wait across replicas ------------------------------------------------------ */

/* The receiver's records for (model, alias) of generation gen answered 200, counted. */
static size_t rx_acked(struct rx *x, const char *model, const char *alias, json_int_t gen)
{
    struct rx_rec recs[RX_MAX_RECS];
    size_t n = rx_snapshot(x, recs, RX_MAX_RECS), got = 0;

    for (size_t i = 0; i < n; i++) {
        if (strcmp(recs[i].model, model) == 0 && strcmp(recs[i].alias, alias) == 0 &&
            recs[i].gen == gen && recs[i].status == 200 && recs[i].sig_ok)
            got++;
    }
    return got;
}

static void test_wait_returns_once_acknowledged(void **state)
{
    (void)state;
    need_pg();
    cl.rx = rx_start(SECRET, true);
    it_model_create(cl.r[0], cl.r[0]->admin_token, "wmodel");
    for (int v = 1; v <= 3; v++)
        it_version_create(cl.r[v - 1], cl.r[v - 1]->admin_token, "wmodel", cl.art, NULL);
    rx_gateway_put(cl.r[0], "hook-wait", cl.rx, ",\"models\":[\"wmodel\"]");

    for (int round = 0; round < 6; round++) {
        /* Replica 2 first, then the others in turn; every other round the gateway
         * fails the first attempt, so the retry may go out from any replica. */
        int i = (round + 1) % NREP;
        struct mg_server *s = cl.r[i];
        char body[64];
        struct it_resp *r;
        json_int_t gen;
        int64_t t0;
        bool failing = round % 2 == 1;

        rx_behave(cl.rx, failing ? 1 : 0, 0, 200, NULL);
        t0 = it_now_ms();
        r = it_alias_put(s, s->admin_token, "wmodel", "live",
                         it_fmt(body, sizeof(body), "{\"version\":%d}", round % 3 + 1), 10);
        gen = it_jint(r->json, "generation");
        if (!pc_all_in_sync(r->json))
            fail_msg("round %d: ?wait=10 on replica %d returned (after %lld ms) before the "
                     "gateway acknowledged generation %lld: %s",
                     round, i + 1, (long long)(it_now_ms() - t0), (long long)gen, r->body);
        /* The acknowledgement came before the answer: the receiver has it already. */
        if (rx_acked(cl.rx, "wmodel", "live", gen) == 0)
            fail_msg("round %d: ?wait=10 on replica %d returned in_sync, but the receiver "
                     "never answered 200 to generation %lld",
                     round, i + 1, (long long)gen);
        print_message("round %d: ?wait on replica %d returned after %lld ms%s\n", round, i + 1,
                      (long long)(it_now_ms() - t0), failing ? " (first attempt failed)" : "");
        it_resp_free(s, &r);
    }
    pc_gateway_delete(cl.r[2], "hook-wait");
}

/* ---- 4. the leader killed mid-bake ------------------------------------------------- */

static void test_leader_killed_mid_bake(void **state)
{
    char id[64], old_id[32], new_id[32];
    struct it_resp *r;
    int leader, other, now_leader;
    int64_t t_kill, step_at, t_leader, t_done;
    struct mg_server *s;

    (void)state;
    need_pg();
    it_model_create(cl.r[0], cl.r[0]->admin_token, "rmodel");
    it_version_create(cl.r[0], cl.r[0]->admin_token, "rmodel", cl.art, NULL);
    it_version_create(cl.r[1], cl.r[1]->admin_token, "rmodel", cl.art, NULL);
    it_alias_to(cl.r[2], cl.r[2]->admin_token, "rmodel", "prod", 1, 0);
    put_policy_on(0, "rmodel", "prod", "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":4}}");

    leader = wait_one_leader(10000, NULL);
    other = (leader + 1) % NREP;
    replica_id(leader, old_id);
    s = cl.r[leader];
    r = it_promote(s, s->admin_token, "rmodel", 2, "prod", id);
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 50);
    step_at = it_wall_ms_of(it_jstr(it_jobj(r->json, "rollout"), "next_step_at"));
    it_resp_free(s, &r);
    /* Mid-bake: the step to 100 is due in about 4 s, and only the leader takes it. */
    it_server_kill9(s);
    t_kill = it_now_ms();
    print_message("killed the leader, replica %d (%s), %lld ms before the next step\n", leader + 1,
                  old_id, (long long)(step_at - it_wall_now_ms()));

    now_leader = wait_one_leader(15000, old_id);
    t_leader = it_now_ms();
    leader_listed_by_all(now_leader);
    replica_id(now_leader, new_id);
    print_message("replica %d (%s) leads %lld ms after the kill\n", now_leader + 1, new_id,
                  (long long)(t_leader - t_kill));
    assert_string_not_equal(new_id, old_id);

    r = it_promotion_wait(cl.r[other], cl.r[other]->admin_token, id, "succeeded", 30000);
    t_done = it_wall_now_ms();
    print_message("the promotion succeeded %lld ms after its step was due (read on replica %d)\n",
                  (long long)(t_done - step_at), other + 1);
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 100);
    {
        json_t *a = alias_of(other, "rmodel", "prod");
        json_t *routes = it_jarr(a, "routes");

        if (json_array_size(routes) != 1 ||
            json_integer_value(json_object_get(json_array_get(routes, 0), "version")) != 2 ||
            !json_is_null(json_object_get(a, "promotion")))
            fail_msg("after the promotion rmodel/prod should route all to v2 with no promotion");
        json_decref(a);
    }
    it_server_restart(cl.r[leader]);
    /* The restarted replica does not take the leadership back. */
    assert_int_equal(wait_one_leader(10000, NULL), now_leader);
}

/* ---- 5. token revocation ------------------------------------------------------------ */

static long whoami_status(int i, const char *token)
{
    struct it_resp *r = it_get(cl.r[i], "/api/v1/whoami", token);
    long st = r->status;

    it_resp_free(cl.r[i], &r);
    return st;
}

static void test_revocation_reaches_every_replica(void **state)
{
    char tid[64], path[128];
    const char *tok;
    struct it_resp *r;
    int64_t t0, refused[NREP] = {0}, deadline;

    (void)state;
    need_pg();
    tok = held_token = it_token_create(cl.r[0], "revokee", "reader", tid);
    /* In use on replicas 1 and 3 (so both have it cached). */
    assert_int_equal(whoami_status(0, tok), 200);
    assert_int_equal(whoami_status(2, tok), 200);
    assert_int_equal(whoami_status(0, tok), 200);
    assert_int_equal(whoami_status(2, tok), 200);
    r = it_request(cl.r[1], "DELETE", it_fmt(path, sizeof(path), "/api/v1/tokens/%s", tid),
                   cl.r[1]->admin_token, NULL, NULL, 0);
    it_expect_status(cl.r[1], r, 204);
    t0 = it_now_ms();
    it_resp_free(cl.r[1], &r);
    /* The replica that revoked it refuses it at once. */
    assert_int_equal(whoami_status(1, tok), 401);
    deadline = t0 + 5000;
    while (refused[0] == 0 || refused[2] == 0) {
        for (int i = 0; i < NREP; i += 2) {
            if (refused[i] == 0) {
                long st = whoami_status(i, tok);

                if (st == 401)
                    refused[i] = it_now_ms();
                else if (st != 200)
                    fail_msg("replica %d answered %ld to the revoked token, want 200 or 401", i + 1,
                             st);
            }
        }
        if (it_now_ms() > deadline)
            fail_msg("the revoked token still works after 5 s on replica %s",
                     refused[0] == 0 ? "1" : "3");
        it_pause_ms(10);
    }
    print_message("revoked on replica 2; refused by replica 1 after %lld ms, by replica 3 after "
                  "%lld ms\n",
                  (long long)(refused[0] - t0), (long long)(refused[2] - t0));
    if (refused[0] - t0 > 2000 || refused[2] - t0 > 2000)
        fail_msg("a revoked token must be refused everywhere within 2 s");
    /* And it stays refused. */
    for (int i = 0; i < NREP; i++)
        assert_int_equal(whoami_status(i, tok), 401);
}

/* ---- 6. a delivery in flight on a killed replica ------------------------------------ */

/* lease_owner of the outbox row, read with libpq ("" when NULL). */
static void lease_owner(const char *gateway, const char *model, const char *alias, char out[64])
{
    PGconn *pg = PQconnectdb(cl.r[0]->database);
    const char *params[3] = {gateway, model, alias};
    PGresult *res;

    if (PQstatus(pg) != CONNECTION_OK)
        fail_msg("libpq %s: %s", cl.r[0]->database, PQerrorMessage(pg));
    res = PQexecParams(pg,
                       "SELECT lease_owner FROM outbox WHERE gateway = $1 AND model = $2 AND "
                       "alias = $3",
                       3, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
        fail_msg("the outbox row of %s %s/%s: %s (%d rows)", gateway, model, alias,
                 PQerrorMessage(pg), PQntuples(res));
    snprintf(out, 64, "%s", PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(pg);
}

static void test_killed_holder_delivery_redelivered(void **state)
{
    struct rx_rec recs[RX_MAX_RECS];
    char owner[64] = "", body[64];
    int holder = -1, other;
    json_int_t g1, g2, g3;
    int64_t t_kill, deadline, t_redelivered = 0;
    size_t n;

    (void)state;
    need_pg();
    cl.rx = rx_start(SECRET, true);
    it_model_create(cl.r[0], cl.r[0]->admin_token, "dmodel");
    for (int v = 1; v <= 3; v++)
        it_version_create(cl.r[0], cl.r[0]->admin_token, "dmodel", cl.art, NULL);
    rx_gateway_put(cl.r[0], "hook-dead", cl.rx, ",\"models\":[\"dmodel\"]");
    {
        struct it_resp *r =
            it_alias_put(cl.r[0], cl.r[0]->admin_token, "dmodel", "live", "{\"version\":1}", 10);

        if (!pc_all_in_sync(r->json))
            fail_msg("generation 1 was not delivered: %s", r->body);
        g1 = it_jint(r->json, "generation");
        it_resp_free(cl.r[0], &r);
    }

    /* The gateway hangs: the next delivery stays in flight, its lease held. */
    rx_set_hang(cl.rx, true);
    n = rx_count(cl.rx);
    g2 = it_alias_set(cl.r[1], cl.r[1]->admin_token, "dmodel", "live", "{\"version\":2}");
    rx_wait_count(cl.rx, n + 1, 10000);
    lease_owner("hook-dead", "dmodel", "live", owner);
    if (owner[0] == '\0')
        fail_msg("generation %lld is in flight, but its outbox row has no lease_owner",
                 (long long)g2);
    for (int i = 0; i < NREP; i++) {
        char rid[32];

        replica_id(i, rid);
        if (strcmp(rid, owner) == 0)
            holder = i;
    }
    if (holder < 0)
        fail_msg("lease_owner %s is none of the replicas", owner);
    other = (holder + 1) % NREP;
    /* Another replica restarting frees what it held itself, never a live replica's lease:
     * the delivery stays in flight with its holder, and nothing goes out again. */
    {
        int third = (holder + 2) % NREP;
        char still[64];
        size_t before = rx_count(cl.rx);

        it_server_restart(cl.r[third]);
        lease_owner("hook-dead", "dmodel", "live", still);
        if (strcmp(still, owner) != 0)
            fail_msg("replica %d restarted and the delivery held by replica %d (%s) now belongs "
                     "to '%s'",
                     third + 1, holder + 1, owner, still);
        if (rx_count(cl.rx) != before)
            fail_msg("replica %d restarted and generation %lld went out again while replica %d "
                     "still held it",
                     third + 1, (long long)g2, holder + 1);
    }
    it_server_kill9(cl.r[holder]);
    t_kill = it_now_ms();
    print_message("replica %d (%s) held generation %lld in flight; killed it\n", holder + 1, owner,
                  (long long)g2);

    /* A newer generation meanwhile, written on a live replica: the row is still leased. */
    g3 = it_alias_set(cl.r[other], cl.r[other]->admin_token, "dmodel", "live",
                      it_fmt(body, sizeof(body), "{\"version\":3}"));
    rx_set_hang(cl.rx, false);

    deadline = it_deadline(30000);
    while (t_redelivered == 0) {
        n = rx_snapshot(cl.rx, recs, RX_MAX_RECS);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(recs[i].model, "dmodel") == 0 && recs[i].gen == g3 && recs[i].status == 200)
                t_redelivered = recs[i].at_ms;
        }
        if (t_redelivered == 0 && it_now_ms() > deadline)
            fail_msg("generation %lld was not delivered within 30 s of killing its holder",
                     (long long)g3);
        it_pause_ms(20);
    }
    print_message("redelivered %lld ms after the holder was killed\n",
                  (long long)(t_redelivered - t_kill));
    /* Not before the holder could be taken for dead (10 s after its last heartbeat,
     * which was at most a second before the kill): a live replica's lease holds. */
    if (t_redelivered - t_kill < 8000)
        fail_msg("redelivered %lld ms after the kill: the lease was taken before its holder "
                 "could be taken for dead",
                 (long long)(t_redelivered - t_kill));
    {
        struct it_resp *r =
            pc_wait_delivery(cl.r[other], "hook-dead", "dmodel", "live", g3, "in_sync", 10000);

        it_resp_free(cl.r[other], &r);
    }

    /* In order, ending with the newest. */
    n = rx_snapshot(cl.rx, recs, RX_MAX_RECS);
    {
        json_int_t prev = 0, last = 0;

        for (size_t i = 0; i < n; i++) {
            if (strcmp(recs[i].model, "dmodel") != 0)
                continue;
            print_message("  received generation %lld, answered %d\n", (long long)recs[i].gen,
                          recs[i].status);
            if (recs[i].gen < prev)
                fail_msg("the gateway got generation %lld after %lld", (long long)recs[i].gen,
                         (long long)prev);
            if (!recs[i].sig_ok)
                fail_msg("delivery of generation %lld is not signed right", (long long)recs[i].gen);
            prev = recs[i].gen;
            last = recs[i].gen;
        }
        assert_true(g1 < g2 && g2 < g3);
        assert_int_equal(last, g3);
    }
    it_server_restart(cl.r[holder]);
    pc_gateway_delete(cl.r[0], "hook-dead");
}

/* ---- 7. PostgreSQL restarted: one leader still --------------------------------- */

static void pg_restart(void)
{
    const char *src = getenv("MG_SOURCE_DIR"), *dir = getenv("MG_PG_DIR");
    char cmd[IT_PATH_MAX * 3];
    int rc;

    if (src == NULL || dir == NULL)
        fail_msg("MG_SOURCE_DIR and MG_PG_DIR are needed to restart PostgreSQL");
    rc = system(it_fmt(cmd, sizeof(cmd), "bash '%s/scripts/pg-test.sh' restart '%s'", src, dir));
    if (rc != 0)
        fail_msg("%s: exit status 0x%x", cmd, rc);
}

/* Milliseconds since replica id's last heartbeat, on the database's clock (-1: no row). */
static int64_t heartbeat_age(const char *id)
{
    PGconn *pg = PQconnectdb(cl.r[0]->database);
    const char *params[1] = {id};
    PGresult *res;
    int64_t age = -1;

    if (PQstatus(pg) != CONNECTION_OK)
        fail_msg("libpq %s: %s", cl.r[0]->database, PQerrorMessage(pg));
    res = PQexecParams(pg,
                       "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint - "
                       "last_seen_ms FROM replicas WHERE id = $1",
                       1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("reading replica %s's heartbeat: %s", id, PQerrorMessage(pg));
    if (PQntuples(res) == 1)
        age = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    PQfinish(pg);
    return age;
}

static void test_pg_restart_keeps_one_leader(void **state)
{
    char id[64];
    struct it_resp *r;

    (void)state;
    need_pg();
    for (int attempt = 0; attempt < 2; attempt++) {
        char lid[32];
        int leader = wait_one_leader(10000, NULL), now_leader;
        int64_t deadline = it_deadline(5000), t;

        replica_id(leader, lid);
        /* Just after the leader's heartbeat: PostgreSQL is back before its next one, so the
         * leader sees no outage, only a new session (one that holds no lock). */
        while (heartbeat_age(lid) > 100) {
            if (it_now_ms() > deadline)
                fail_msg("replica %s's heartbeat is more than 100 ms old all the time", lid);
            it_pause_ms(10);
        }
        t = it_now_ms();
        pg_restart();
        print_message("restarted PostgreSQL in %lld ms, just after leader %s's heartbeat\n",
                      (long long)(it_now_ms() - t), lid);
        now_leader = settle_leader(10000, NULL, 3000);
        if (now_leader < 0)
            fail_msg("after PostgreSQL restarted, the replicas do not settle on one leader (what "
                     "each says is above): a replica that led before the restart keeps saying "
                     "it leads though its new database session holds no leader lock, and "
                     "another one takes the lock");
        print_message("one leader after the restart: replica %d\n", now_leader + 1);
    }

    /* The cluster's rollout clock still runs. */
    it_model_create(cl.r[0], cl.r[0]->admin_token, "lmodel");
    it_version_create(cl.r[1], cl.r[1]->admin_token, "lmodel", cl.art, NULL);
    it_version_create(cl.r[2], cl.r[2]->admin_token, "lmodel", cl.art, NULL);
    it_alias_to(cl.r[0], cl.r[0]->admin_token, "lmodel", "prod", 1, 0);
    put_policy_on(1, "lmodel", "prod", "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":1}}");
    r = it_promote(cl.r[2], cl.r[2]->admin_token, "lmodel", 2, "prod", id);
    it_resp_free(cl.r[2], &r);
    r = it_promotion_wait(cl.r[0], cl.r[0]->admin_token, id, "succeeded", 20000);
    it_resp_free(cl.r[0], &r);
}

/* ---- 8. chaos --------------------------------------------------------------------- */

#define CH_MODELS 2   /* models that get versions */
#define CH_ALIASES 3  /* directly set aliases a0.. of "cz" */
#define CH_PALIASES 4 /* promoted aliases p0.. of "cz" */
#define CH_ALL (CH_ALIASES + CH_PALIASES)
#define CH_ZVERSIONS 3

struct acked_version {
    int model;
    json_int_t n;
};

struct chaos {
    struct acked_version *versions;
    size_t nversions, capv;
    char (*digests)[IT_DIGEST_LEN + 1];
    size_t ndigests, capd;
    char (*promos)[64];
    size_t npromos, capp;
    json_int_t alias_acked[CH_ALL]; /* highest generation a 2xx reported */
    json_int_t rx_max[CH_ALL];      /* highest generation the receiver answered 200 */
    size_t rx_total, rx_bad_sig;
    int kills[NREP];
    long failed; /* requests without a 2xx */
};

static const char *ch_alias(int k, char buf[16])
{
    snprintf(buf, 16, "%s%d", k < CH_ALIASES ? "a" : "p", k < CH_ALIASES ? k : k - CH_ALIASES);
    return buf;
}

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return p;
    *cap = *cap ? *cap * 2 : 256;
    p = realloc(p, *cap * size);
    if (p == NULL)
        fail_msg("out of memory");
    return p;
}

/* Move the receiver's records into the tallies. */
static void ch_drain(struct chaos *ch)
{
    static struct rx_rec recs[RX_MAX_RECS];
    size_t n = rx_take(cl.rx, recs);

    for (size_t i = 0; i < n; i++) {
        char a[16];

        ch->rx_total++;
        if (!recs[i].sig_ok)
            ch->rx_bad_sig++;
        for (int k = 0; k < CH_ALL; k++) {
            if (strcmp(recs[i].model, "cz") == 0 && strcmp(recs[i].alias, ch_alias(k, a)) == 0 &&
                recs[i].status == 200 && recs[i].gen > ch->rx_max[k])
                ch->rx_max[k] = recs[i].gen;
        }
        free(recs[i].body);
    }
}

/* One round's jobs, through HAProxy. */
static size_t ch_jobs(struct job *jobs)
{
    size_t n = 0;
    char path[256], body[512], a[16];

    for (int i = 0; i < 20; i++) {
        int m = i % CH_MODELS;

        it_fmt(body, sizeof(body), "{\"artifact\":\"%s\",\"image\":\"%s\"}", cl.art, IT_IMAGE);
        job_set(&jobs[n++], JOB_VERSION, m, "POST", cl.front,
                it_fmt(path, sizeof(path), "/api/v1/models/cm%d/versions", m + 1),
                cl.r[0]->admin_token, "application/json", body, strlen(body));
    }
    for (int i = 0; i < 10; i++) {
        unsigned char bytes[1024];
        size_t len = 256 + rnd_below(768);

        for (size_t b = 0; b < len; b++)
            bytes[b] = (unsigned char)rnd();
        job_set(&jobs[n], JOB_UPLOAD, 0, "POST", cl.front, "/api/v1/blobs", cl.r[0]->admin_token,
                "application/octet-stream", bytes, len);
        it_digest(bytes, len, jobs[n].digest);
        n++;
    }
    for (int i = 0; i < 14; i++) {
        int k = (int)rnd_below(CH_ALIASES);

        it_fmt(body, sizeof(body), "{\"version\":%u}", 1 + rnd_below(CH_ZVERSIONS));
        job_set(&jobs[n++], JOB_ALIAS, k, "PUT", cl.front,
                it_fmt(path, sizeof(path), "/api/v1/models/cz/aliases/%s?wait=0", ch_alias(k, a)),
                cl.r[0]->admin_token, "application/json", body, strlen(body));
    }
    for (int i = 0; i < 3; i++) {
        int k = CH_ALIASES + (int)rnd_below(CH_PALIASES);

        it_fmt(body, sizeof(body),
               "{\"model\":\"cz\",\"version\":%u,\"alias\":\"%s\",\"reason\":\"chaos\"}",
               1 + rnd_below(CH_ZVERSIONS), ch_alias(k, a));
        job_set(&jobs[n++], JOB_PROMOTION, k, "POST", cl.front, "/api/v1/promotions",
                cl.r[0]->admin_token, "application/json", body, strlen(body));
    }
    /* Shuffled, so every kind is in flight at any moment. */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd_below((unsigned)(i + 1));
        struct job t = jobs[i];

        jobs[i] = jobs[j];
        jobs[j] = t;
    }
    return n;
}

/* Record what a round's 2xx answers acknowledged. */
static void ch_record(struct chaos *ch, const struct job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct job *j = &jobs[i];
        json_t *js;

        if (j->status < 200 || j->status > 299) {
            ch->failed++;
            continue;
        }
        js = job_json(j);
        switch (j->kind) {
        case JOB_VERSION:
            if (!json_is_integer(json_object_get(js, "version"))) {
                job_show(j);
                fail_msg("a 2xx version creation without a number");
            }
            ch->versions = grow(ch->versions, &ch->capv, ch->nversions, sizeof(*ch->versions));
            ch->versions[ch->nversions].model = j->arg;
            ch->versions[ch->nversions++].n = json_integer_value(json_object_get(js, "version"));
            break;
        case JOB_UPLOAD: {
            const char *d = json_string_value(json_object_get(js, "digest"));

            if (d == NULL || strcmp(d, j->digest) != 0) {
                job_show(j);
                fail_msg("an upload answered 2xx with digest %s, want %s", d ? d : "(none)",
                         j->digest);
            }
            ch->digests = grow(ch->digests, &ch->capd, ch->ndigests, sizeof(*ch->digests));
            memcpy(ch->digests[ch->ndigests++], j->digest, IT_DIGEST_LEN + 1);
            break;
        }
        case JOB_ALIAS: {
            json_int_t g = json_integer_value(json_object_get(js, "generation"));

            if (g > ch->alias_acked[j->arg])
                ch->alias_acked[j->arg] = g;
            break;
        }
        case JOB_PROMOTION:
            ch->promos = grow(ch->promos, &ch->capp, ch->npromos, sizeof(*ch->promos));
            snprintf(ch->promos[ch->npromos++], 64, "%s",
                     json_string_value(json_object_get(js, "id")));
            break;
        default:
            break;
        }
        json_decref(js);
    }
}

/* ---- the checks after the chaos ---- */

static void ch_check_versions(struct chaos *ch)
{
    for (int m = 0; m < CH_MODELS; m++) {
        char model[16];
        size_t cap = ch->nversions + 64, n, acked = 0;
        json_int_t *listed = malloc(cap * sizeof(*listed));
        int i = (int)rnd_below(NREP);

        snprintf(model, sizeof(model), "cm%d", m + 1);
        n = list_versions(i, model, listed, cap, NULL, 0);
        if (n > cap)
            fail_msg("%s has %zu versions, more than were asked for", model, n);
        expect_dense(listed, n, model);
        /* Every acknowledged number is there, and was given once. */
        for (size_t k = 0; k < ch->nversions; k++) {
            if (ch->versions[k].model != m)
                continue;
            acked++;
            if (ch->versions[k].n < 1 || (size_t)ch->versions[k].n > n)
                fail_msg("%s: version %lld was acknowledged, but the list (replica %d) ends at %zu",
                         model, (long long)ch->versions[k].n, i + 1, n);
            for (size_t l = k + 1; l < ch->nversions; l++) {
                if (ch->versions[l].model == m && ch->versions[l].n == ch->versions[k].n)
                    fail_msg("%s: two creations were both answered with version %lld", model,
                             (long long)ch->versions[k].n);
            }
        }
        print_message("%s: %zu versions acknowledged, %zu exist, numbered 1..%zu\n", model, acked,
                      n, n);
        free(listed);
    }
}

static void ch_check_blobs(struct chaos *ch)
{
    for (size_t k = 0; k < ch->ndigests; k++) {
        int i = (int)(k % NREP);
        char path[128], got[IT_DIGEST_LEN + 1];
        struct it_resp *r =
            it_get(cl.r[i], it_fmt(path, sizeof(path), "/api/v1/blobs/%s", ch->digests[k]),
                   cl.r[i]->admin_token);

        if (r->status != 200)
            fail_msg("blob %s was acknowledged but replica %d answers %ld", ch->digests[k], i + 1,
                     r->status);
        it_digest(r->body, r->len, got);
        if (strcmp(got, ch->digests[k]) != 0)
            fail_msg("blob %s reads back as %s on replica %d", ch->digests[k], got, i + 1);
        it_resp_free(cl.r[i], &r);
    }
    print_message("%zu acknowledged uploads read back\n", ch->ndigests);
}

/* Promotions: all final by now (poll), none overlapping another of its alias, the
 * alias free of them, every acknowledged one present. */
static void ch_check_promotions(struct chaos *ch)
{
    int64_t deadline = it_deadline(60000);
    struct it_resp *r;
    json_t *items, *p;
    size_t k, finals[7] = {0};
    static const char *const states[] = {"evaluating", "awaiting_approval", "rolling_out",
                                         "succeeded",  "rejected",          "aborted",
                                         "rolled_back"};

    for (;;) {
        bool settled = true;

        r = it_get(cl.r[1], "/api/v1/promotions?model=cz&limit=1000", cl.r[1]->admin_token);
        it_expect_status(cl.r[1], r, 200);
        items = it_jarr(r->json, "items");
        json_array_foreach(items, k, p) settled =
            settled && it_promotion_final(it_jstr(p, "state"));
        if (settled)
            break;
        if (it_now_ms() > deadline)
            fail_msg("promotions still not final 60 s after the chaos: %.3000s", r->body);
        it_resp_free(cl.r[1], &r);
        it_pause_ms(100);
    }
    if (json_is_string(json_object_get(r->json, "next_page_token")))
        fail_msg("more than 1000 promotions of cz?");
    json_array_foreach(items, k, p)
    {
        const char *st = it_jstr(p, "state");
        size_t s;

        for (s = 0; s < 7 && strcmp(st, states[s]) != 0; s++)
            ;
        if (s == 7)
            fail_msg("promotion %s is in an unknown state %s", it_jstr(p, "id"), st);
        finals[s]++;
    }
    for (int a = CH_ALIASES; a < CH_ALL; a++) {
        char name[16];
        int64_t prev_end = 0;
        const char *prev_id = "";

        ch_alias(a, name);
        /* Newest first in the list: walk it backwards (oldest first). */
        for (size_t i = json_array_size(items); i-- > 0;) {
            int64_t start, end;

            p = json_array_get(items, i);
            if (strcmp(it_jstr(p, "alias"), name) != 0)
                continue;
            start = it_wall_ms_of(it_jstr(p, "created_at"));
            end = it_wall_ms_of(it_jstr(p, "updated_at"));
            if (start < prev_end)
                fail_msg("cz/%s: promotion %s was created at %s, before %s ended: two active "
                         "promotions of one alias",
                         name, it_jstr(p, "id"), it_jstr(p, "created_at"), prev_id);
            prev_end = end;
            prev_id = it_jstr(p, "id");
        }
        for (int i = 0; i < NREP; i++) {
            json_t *al = alias_of(i, "cz", name), *routes = it_jarr(al, "routes"), *rt;
            json_int_t sum = 0;
            size_t l;

            if (!json_is_null(json_object_get(al, "promotion")))
                fail_msg("cz/%s still names promotion %s though every promotion is final", name,
                         json_string_value(json_object_get(al, "promotion")));
            json_array_foreach(routes, l, rt) sum +=
                json_integer_value(json_object_get(rt, "weight"));
            if (sum != 100 || json_array_size(routes) != 1)
                fail_msg("cz/%s routes do not end at one version at 100%% (sum %lld, %zu routes)",
                         name, (long long)sum, json_array_size(routes));
            json_decref(al);
        }
    }
    for (size_t i = 0; i < ch->npromos; i++) {
        bool found = false;

        json_array_foreach(items, k, p) found =
            found || strcmp(it_jstr(p, "id"), ch->promos[i]) == 0;
        if (!found)
            fail_msg("promotion %s was acknowledged but is not listed", ch->promos[i]);
    }
    print_message("%zu promotions (%zu acknowledged): %zu succeeded, %zu rolled back, %zu "
                  "aborted, %zu rejected\n",
                  json_array_size(items), ch->npromos, finals[3], finals[6], finals[5], finals[4]);
    it_resp_free(cl.r[1], &r);
}

/* Every alias's newest generation: in sync on every replica, and the receiver has it. */
static void ch_check_deliveries(struct chaos *ch)
{
    int64_t deadline = it_deadline(60000);

    for (int k = 0; k < CH_ALL; k++) {
        char name[16];
        json_int_t gen;

        ch_alias(k, name);
        for (;;) {
            json_t *al = alias_of(k % NREP, "cz", name);
            bool ok = pc_all_in_sync(al);

            gen = it_jint(al, "generation");
            if (ok) {
                json_decref(al);
                break;
            }
            if (it_now_ms() > deadline) {
                char *dump = json_dumps(al, JSON_COMPACT);

                fail_msg("cz/%s generation %lld is not delivered 60 s after the chaos: %.2000s",
                         name, (long long)gen, dump ? dump : "?");
            }
            json_decref(al);
            it_pause_ms(100);
        }
        ch_drain(ch);
        if (gen < ch->alias_acked[k])
            fail_msg("cz/%s is at generation %lld, but %lld was acknowledged", name, (long long)gen,
                     (long long)ch->alias_acked[k]);
        if (ch->rx_max[k] != gen)
            fail_msg("cz/%s is at generation %lld and in sync, but the receiver's newest is %lld",
                     name, (long long)gen, (long long)ch->rx_max[k]);
    }
    if (ch->rx_bad_sig > 0)
        fail_msg("%zu of %zu deliveries did not verify", ch->rx_bad_sig, ch->rx_total);
    print_message("every alias's newest generation delivered (%zu deliveries received)\n",
                  ch->rx_total);
}

static void audit_ok(int i)
{
    struct it_resp *r = it_get(cl.r[i], "/api/v1/audit/verify", cl.r[i]->admin_token);

    it_expect_status(cl.r[i], r, 200);
    if (!json_is_true(json_object_get(r->json, "ok")))
        fail_msg("the audit chain does not verify: %s", r->body);
    print_message("audit chain verifies: %lld entries\n", (long long)it_jint(r->json, "entries"));
    it_resp_free(cl.r[i], &r);
}

/* The chaos test's tallies (freed by the test teardown, also after a failure). */
static struct chaos ch;

static void ch_free(void)
{
    free(ch.versions);
    free(ch.digests);
    free(ch.promos);
    memset(&ch, 0, sizeof(ch));
}

static void test_chaos(void **state)
{
    int rounds = 30, pg_round, leader_after_pg = -1;
    int64_t t0 = it_now_ms(), pg_ms = 0;
    char a[16], path[128];

    (void)state;
    need_pg();
    ch_free();
    pg_round = rounds / 2;
    cl.rx = rx_start(SECRET, true);
    for (int m = 0; m < CH_MODELS; m++)
        it_model_create(cl.r[0], cl.r[0]->admin_token, it_fmt(path, sizeof(path), "cm%d", m + 1));
    it_model_create(cl.r[0], cl.r[0]->admin_token, "cz");
    for (int v = 1; v <= CH_ZVERSIONS; v++)
        it_version_create(cl.r[0], cl.r[0]->admin_token, "cz", cl.art, NULL);
    rx_gateway_put(cl.r[0], "hook-chaos", cl.rx, ",\"models\":[\"cz\"]");
    for (int k = 0; k < CH_ALL; k++)
        ch.alias_acked[k] = it_alias_set(cl.r[k % NREP], cl.r[0]->admin_token, "cz", ch_alias(k, a),
                                         "{\"version\":1}");
    for (int k = CH_ALIASES; k < CH_ALL; k++)
        put_policy_on(0, "cz", ch_alias(k, a),
                      "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":1}}");

    for (int round = 0; round < rounds; round++) {
        struct job *jobs = jobs_new(64);
        size_t n = ch_jobs(jobs), at = 1 + rnd_below((unsigned)(n * 8 / 10));
        int victim = (int)rnd_below(NREP);
        int64_t deadline, t_round = it_now_ms(), t_burst, t_up;
        long failed_before = ch.failed;

        batch_start(jobs, n, 6);
        /* A random moment of the burst: once `at` of its requests are answered. */
        deadline = it_deadline(60000);
        while (batch_done() < at && it_now_ms() < deadline)
            it_pause_ms(1);
        if (round == pg_round) {
            int64_t t = it_now_ms();

            pg_restart();
            pg_ms = it_now_ms() - t;
        } else {
            it_server_kill9(cl.r[victim]);
            ch.kills[victim]++;
        }
        batch_join();
        t_burst = it_now_ms();
        ch_record(&ch, jobs, n);
        jobs_drop();
        restart_if_down(victim);
        t_up = it_now_ms();
        ch_drain(&ch);
        print_message("round %2d: %s%.0d killed after %zu of %zu answers; burst %lld ms, %ld "
                      "without a 2xx; restart %lld ms\n",
                      round, round == pg_round ? "PostgreSQL" : "replica ",
                      round == pg_round ? 0 : victim + 1, at, n, (long long)(t_burst - t_round),
                      ch.failed - failed_before, (long long)(t_up - t_burst));
        if (round == pg_round) {
            /* Every replica reconnects; the leadership (a session's lock) is held once. */
            leader_after_pg = settle_leader(10000, NULL, 3000);
            print_message("PostgreSQL restarted in round %d (%lld ms); one leader after it: %s\n",
                          round, (long long)pg_ms, leader_after_pg >= 0 ? "yes" : "NO");
        }
    }
    print_message("%d chaos rounds in %lld ms: replicas killed %d/%d/%d times; %ld requests "
                  "without a 2xx\n",
                  rounds, (long long)(it_now_ms() - t0), ch.kills[0], ch.kills[1], ch.kills[2],
                  ch.failed);

    /* All up, then the checks. */
    for (int i = 0; i < NREP; i++)
        assert_true(cl.r[i]->pid != 0);
    ch_check_versions(&ch);
    ch_check_blobs(&ch);
    ch_check_promotions(&ch);
    audit_ok((int)rnd_below(NREP));
    ch_check_deliveries(&ch);
    if (leader_after_pg < 0)
        fail_msg("after PostgreSQL restarted mid-burst, the replicas did not settle on one "
                 "leader (see what each said above)");
    wait_one_leader(10000, NULL);
    pc_gateway_delete(cl.r[0], "hook-chaos");
    ch_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_concurrent_versions_through_haproxy, test_teardown),
        cmocka_unit_test_teardown(test_concurrent_promotions_one_wins, test_teardown),
        cmocka_unit_test_teardown(test_wait_returns_once_acknowledged, test_teardown),
        cmocka_unit_test_teardown(test_leader_killed_mid_bake, test_teardown),
        cmocka_unit_test_teardown(test_revocation_reaches_every_replica, test_teardown),
        cmocka_unit_test_teardown(test_killed_holder_delivery_redelivered, test_teardown),
        cmocka_unit_test_teardown(test_pg_restart_keeps_one_leader, test_teardown),
        cmocka_unit_test_teardown(test_chaos, test_teardown),
    };

    if (it_on_postgres() && access(PC_HAPROXY, X_OK) != 0) {
        print_error("%s is missing: install the Debian package haproxy\n", PC_HAPROXY);
        return 1;
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
