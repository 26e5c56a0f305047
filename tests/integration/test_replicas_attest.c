/*
 * test_replicas_attest.c - release attestations (docs/contract.md "Signed releases") on three
 * replicas sharing one PostgreSQL database and one blob directory, each started without
 * --signing-key (they sign with the cluster's key, README "Several replicas"):
 *
 *   - an alias moved through one replica gives an attestation that every replica serves
 *     byte for byte, and that verifies with openssl and sigstore-js;
 *   - generations moved alternately through two replicas form one chain: each links to
 *     the previous generation's statement digest;
 *   - the three replicas moving the same alias at once: every move that returned has a
 *     generation of its own, the generations stay dense, each is signed once and the
 *     chain does not fork (each generation links to the one before, whichever replica
 *     wrote either), and each attestation routes what the alias's history says.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_replicas_attest); on SQLite the
 * test does not apply. Requests from worker threads use their own libcurl handles (the
 * harness is main-thread only) and only record what they got; the main thread asserts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "api.h"
#include "attest_common.h"
#include "harness.h"
#include "sys.h"

#define NREP 3
#define ALTERNATE 6  /* generations moved one at a time, through replicas 0 and 1 by turns */
#define PER_THREAD 6 /* moves each replica's thread makes in the concurrent part */
#define MOVES (NREP * PER_THREAD)

static struct mg_server *rep[NREP];
static char dir[IT_PATH_MAX]; /* scratch: the shared blobs, files handed to openssl and node */

static int test_teardown(void **state)
{
    (void)state;
    for (int i = NREP - 1; i >= 0; i--) /* the joined ones first: the first drops the database */
        it_server_free(&rep[i]);
    if (dir[0] != '\0')
        it_rmtree(dir);
    dir[0] = '\0';
    return 0;
}

/* ---- moves from worker threads ---------------------------------------------------------- */

/* One move and what came back; the worker fills in the outcome only. */
struct move {
    char url[IT_PATH_MAX];
    const char *token;
    char body[128];
    CURLcode rc;
    long status;
    json_int_t generation; /* from the answer's Alias, or 0 */
    char answer[256];      /* the start of the answer, for messages */
};

struct worker {
    struct move *moves;
    size_t n;
    pthread_barrier_t *go;
};

struct buf {
    char *p;
    size_t len;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct buf *b = ud;
    size_t n = size * nmemb;
    char *nb = realloc(b->p, b->len + n + 1);

    if (nb == NULL)
        return 0;
    memcpy(nb + b->len, p, n);
    b->len += n;
    nb[b->len] = '\0';
    b->p = nb;
    return n;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    CURL *c = curl_easy_init();

    pthread_barrier_wait(w->go);
    for (size_t i = 0; c != NULL && i < w->n; i++) {
        struct move *m = &w->moves[i];
        struct curl_slist *h = NULL;
        struct buf b = {NULL, 0};
        char auth[192];
        json_t *j;

        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", m->token);
        h = curl_slist_append(h, auth);
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, m->url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, m->body);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        m->rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &m->status);
        snprintf(m->answer, sizeof(m->answer), "%s", b.p ? b.p : "");
        if (b.p != NULL && (j = json_loads(b.p, 0, NULL)) != NULL) {
            m->generation = json_integer_value(json_object_get(j, "generation"));
            json_decref(j);
        }
        free(b.p);
        curl_slist_free_all(h);
    }
    curl_easy_cleanup(c);
    return NULL;
}

/* ---- the test ----------------------------------------------------------------------------- */

/* The alias's generation as replica i reads it. */
static json_int_t generation_on(int i)
{
    struct it_resp *r = it_alias_get(rep[i], rep[i]->admin_token, "fraud", "production");
    json_int_t g = it_jint(r->json, "generation");

    it_resp_free(rep[i], &r);
    return g;
}

/* The routes of generation g in the alias's history (read on replica i), as "v1:90,v2:10". */
static void history_routes(int i, json_int_t g, char *out, size_t n)
{
    struct it_resp *r =
        it_get(rep[i], "/api/v1/models/fraud/aliases/production/history", rep[i]->admin_token);
    json_t *e;
    size_t k;

    it_expect_status(rep[i], r, 200);
    json_array_foreach(it_jarr(r->json, "items"), k, e)
    {
        if (it_jint(e, "generation") == g) {
            it_routes_text(it_jarr(e, "routes"), out, n);
            it_resp_free(rep[i], &r);
            return;
        }
    }
    fail_msg("the alias's history has no generation %" JSON_INTEGER_FORMAT ": %.400s", g, r->body);
}

/* Generation g fetched from every replica: the same bytes everywhere, into a (from
 * replica `from`), verified, and routing what the history says. */
static void attestation_everywhere(json_int_t g, int from, struct it_attest *a)
{
    char want[128], got[128];

    it_attest_get(rep[from], rep[from]->admin_token, "fraud", "production", g, a);
    for (int i = 0; i < NREP; i++) {
        struct it_attest other;

        if (i == from)
            continue;
        it_attest_get(rep[i], rep[i]->admin_token, "fraud", "production", g, &other);
        if (other.bundle_len != a->bundle_len || strcmp(other.bundle, a->bundle) != 0)
            fail_msg("generation %" JSON_INTEGER_FORMAT
                     "'s attestation differs between replicas %d and %d:\n%s\n%s",
                     g, from, i, a->bundle, other.bundle);
        it_attest_release(&other);
    }
    it_attest_verify(rep[(from + 1) % NREP], a, dir);
    history_routes((from + 2) % NREP, g, want, sizeof(want));
    it_routes_text(json_object_get(json_object_get(a->stmt, "predicate"), "routes"), got,
                   sizeof(got));
    if (strcmp(want, got) != 0)
        fail_msg("generation %" JSON_INTEGER_FORMAT "'s attestation routes %s; the history says %s",
                 g, got, want);
}

/* The body of move k: a route set that differs from the one before. */
static const char *move_body(size_t k, char *out, size_t n)
{
    json_int_t v = (json_int_t)(k % 3) + 1;

    if (k % 2 == 0)
        return it_fmt(out, n, "{\"version\":%" JSON_INTEGER_FORMAT "}", v);
    return it_fmt(out, n,
                  "{\"routes\":[{\"version\":%" JSON_INTEGER_FORMAT ",\"weight\":80},"
                  "{\"version\":%" JSON_INTEGER_FORMAT ",\"weight\":20}]}",
                  v, v % 3 + 1);
}

static void test_attestations_on_replicas(void **state)
{
    char blobs[IT_PATH_MAX + 8], art[IT_DIGEST_LEN + 1], body[128], path[256];
    struct it_attest prev, cur;
    struct move moves[MOVES];
    struct worker workers[NREP];
    pthread_t threads[NREP];
    pthread_barrier_t go;
    json_int_t g, first, seen[MOVES];
    char hint0[65];
    struct it_resp *r;
    size_t ok = 0, k;

    (void)state;
    if (!it_on_postgres())
        it_not_applicable("replicas share a PostgreSQL database; this runs as "
                          "pg_integration_test_replicas_attest");
    it_attest_need_tools();
    it_mkdtemp(dir, "attest");
    it_fmt(blobs, sizeof(blobs), "file:%s/blobs", dir);
    {
        char b[IT_PATH_MAX];

        if (mkdir(it_fmt(b, sizeof(b), "%s/blobs", dir), 0700) != 0)
            fail_msg("mkdir %s: %s", b, strerror(errno));
    }
    rep[0] = it_server_start((const char *const[]){"--blobs", blobs, NULL});
    for (int i = 1; i < NREP; i++)
        rep[i] = it_server_join(rep[0], (const char *const[]){"--blobs", blobs, NULL});
    it_model_create(rep[0], rep[0]->admin_token, "fraud");
    for (int i = 1; i <= 3; i++) {
        char bytes[32];

        it_fmt(bytes, sizeof(bytes), "replica model bytes %d", i);
        r = it_upload(rep[i % NREP], bytes, strlen(bytes), art);
        it_resp_free(rep[i % NREP], &r);
        assert_int_equal(
            it_version_create(rep[i % NREP], rep[i % NREP]->admin_token, "fraud", art, NULL), i);
    }

    /* 1. One move at a time, through replicas 0 and 1 by turns. */
    memset(&prev, 0, sizeof(prev));
    for (k = 0; k < ALTERNATE; k++) {
        int via = (int)(k % 2);

        g = it_alias_set(rep[via], rep[via]->admin_token, "fraud", "production",
                         move_body(k, body, sizeof(body)));
        assert_int_equal(g, (json_int_t)k + 1);
        attestation_everywhere(g, 1 - via, &cur); /* read first where it was not written */
        if (k == 0)
            assert_true(
                json_is_null(json_object_get(json_object_get(cur.stmt, "predicate"), "previous")));
        else
            it_attest_expect_link(&prev, &cur);
        it_attest_release(&prev);
        prev = cur;
    }
    memcpy(hint0, prev.hint, sizeof(hint0));
    print_message("%d generations moved through replicas 0 and 1 by turns: one chain\n", ALTERNATE);

    /* 2. Every replica moves the alias at once, PER_THREAD times each. */
    first = generation_on(2) + 1;
    memset(moves, 0, sizeof(moves));
    for (k = 0; k < MOVES; k++) {
        int i = (int)(k / PER_THREAD);

        it_fmt(moves[k].url, sizeof(moves[k].url), "%s/api/v1/models/fraud/aliases/production",
               rep[i]->base_url);
        moves[k].token = rep[i]->admin_token;
        move_body(k, moves[k].body, sizeof(moves[k].body));
    }
    if (pthread_barrier_init(&go, NULL, NREP) != 0)
        fail_msg("pthread_barrier_init failed");
    for (int i = 0; i < NREP; i++) {
        workers[i] = (struct worker){&moves[i * PER_THREAD], PER_THREAD, &go};
        if (pthread_create(&threads[i], NULL, worker_run, &workers[i]) != 0)
            fail_msg("pthread_create failed");
    }
    for (int i = 0; i < NREP; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&go);
    /* Each move that returned 200 made a generation of its own; one the server gave up on
     * (409: the alias kept changing under it) made none. */
    for (k = 0; k < MOVES; k++) {
        if (moves[k].rc != CURLE_OK)
            fail_msg("PUT %s: %s", moves[k].url, curl_easy_strerror(moves[k].rc));
        if (moves[k].status == 409)
            continue;
        if (moves[k].status != 200 || moves[k].generation < first)
            fail_msg("PUT %s %s: status %ld, generation %" JSON_INTEGER_FORMAT ": %s", moves[k].url,
                     moves[k].body, moves[k].status, moves[k].generation, moves[k].answer);
        for (size_t j = 0; j < ok; j++)
            if (seen[j] == moves[k].generation)
                fail_msg("two moves both got generation %" JSON_INTEGER_FORMAT,
                         moves[k].generation);
        seen[ok++] = moves[k].generation;
    }
    print_message("%zu of %d concurrent moves over %d replicas committed\n", ok, MOVES, NREP);
    assert_true(ok > 0);
    for (int i = 0; i < NREP; i++) /* dense: as many generations as moves that committed */
        assert_int_equal(generation_on(i), first - 1 + (json_int_t)ok);
    for (size_t j = 0; j < ok; j++) /* ... and each one a move got */
        assert_true(seen[j] >= first && seen[j] < first + (json_int_t)ok);

    /* One chain through them all, each generation signed once, with the cluster's key. */
    for (g = first; g < first + (json_int_t)ok; g++) {
        attestation_everywhere(g, (int)(g % NREP), &cur);
        it_attest_expect_link(&prev, &cur);
        assert_string_equal(cur.hint, hint0);
        it_attest_release(&prev);
        prev = cur;
    }
    r = it_get(rep[1],
               it_fmt(path, sizeof(path),
                      "/api/v1/models/fraud/aliases/production/history/%" JSON_INTEGER_FORMAT
                      "/attestation",
                      first + (json_int_t)ok),
               rep[1]->admin_token);
    it_expect_status(rep[1], r, 404); /* nothing signed past the last generation */
    it_resp_free(rep[1], &r);
    it_attest_release(&prev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_attestations_on_replicas, test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
