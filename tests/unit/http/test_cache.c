/*
 * test_cache.c - the epoch-validated response cache (server/cache.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http/cache.h"

struct got {
    char body[64];
    size_t len;
    int calls;
};

static void take(const char *body, size_t len, void *arg)
{
    struct got *g = arg;

    g->calls++;
    g->len = len;
    snprintf(g->body, sizeof(g->body), "%.*s", (int)len, body);
}

static bool use(struct srv_cache *c, const char *key, uint64_t epoch, struct got *g)
{
    memset(g, 0, sizeof(*g));
    return srv_cache_use(c, key, epoch, take, g);
}

static void test_hit_only_at_the_same_epoch(void **state)
{
    struct srv_cache *c = srv_cache_new();
    struct got g;
    uint64_t hits, misses;

    (void)state;
    assert_non_null(c);
    assert_false(use(c, "version\nm\n1", 7, &g)); /* empty */
    assert_int_equal(g.calls, 0);
    srv_cache_put(c, "version\nm\n1", 7, "{\"v\":1}", 7);
    assert_true(use(c, "version\nm\n1", 7, &g));
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.len, 7);
    assert_string_equal(g.body, "{\"v\":1}");
    /* Anything written since: the body may be stale, never served. */
    assert_false(use(c, "version\nm\n1", 8, &g));
    assert_int_equal(g.calls, 0);
    /* Another key is another entry. */
    assert_false(use(c, "version\nm\n2", 7, &g));
    assert_false(use(c, "version\nm\n", 7, &g));
    srv_cache_counts(c, &hits, &misses);
    assert_int_equal(hits, 1);
    assert_int_equal(misses, 4);
    srv_cache_free(&c);
    assert_null(c);
}

static void test_newer_replaces_older_never_the_reverse(void **state)
{
    struct srv_cache *c = srv_cache_new();
    struct got g;

    (void)state;
    srv_cache_put(c, "lkg\nm\nprod", 3, "three", 5);
    srv_cache_put(c, "lkg\nm\nprod", 5, "five", 4);
    /* A request that began at epoch 4 finishes late: it must not win. */
    srv_cache_put(c, "lkg\nm\nprod", 4, "four", 4);
    assert_true(use(c, "lkg\nm\nprod", 5, &g));
    assert_string_equal(g.body, "five");
    assert_false(use(c, "lkg\nm\nprod", 4, &g));
    srv_cache_free(&c);
}

static void test_caps_and_null(void **state)
{
    struct srv_cache *c = srv_cache_new();
    char *big = calloc(1, SRV_CACHE_BODY_MAX + 2), key[SRV_CACHE_KEY_MAX + 8];
    struct got g;

    (void)state;
    assert_non_null(big);
    memset(big, 'x', SRV_CACHE_BODY_MAX + 1);
    srv_cache_put(c, "big", 1, big, SRV_CACHE_BODY_MAX + 1); /* over the cap: not kept */
    assert_false(use(c, "big", 1, &g));
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    srv_cache_put(c, key, 1, "x", 1); /* key too long: not kept */
    assert_false(use(c, key, 1, &g));
    srv_cache_put(c, "empty", 1, "", 0); /* an empty body is a body */
    assert_true(use(c, "empty", 1, &g));
    assert_int_equal(g.len, 0);
    free(big);
    srv_cache_free(&c);
    /* No cache: nothing is kept, nothing is served. */
    srv_cache_put(NULL, "k", 1, "x", 1);
    assert_false(use(NULL, "k", 1, &g));
    srv_cache_free(&c);
}

/* Many keys in few slots: whatever is served is the body of that key. */
static void test_collisions_never_mix_bodies(void **state)
{
    struct srv_cache *c = srv_cache_new();
    char key[32], want[32];
    struct got g;
    int i, served = 0;

    (void)state;
    for (i = 0; i < SRV_CACHE_SLOTS * 4; i++) {
        snprintf(key, sizeof(key), "version\nm\n%d", i);
        srv_cache_put(c, key, 1, key, strlen(key));
    }
    for (i = 0; i < SRV_CACHE_SLOTS * 4; i++) {
        snprintf(key, sizeof(key), "version\nm\n%d", i);
        snprintf(want, sizeof(want), "%s", key);
        if (use(c, key, 1, &g)) {
            assert_string_equal(g.body, want);
            served++;
        }
    }
    assert_true(served > 0 && served <= SRV_CACHE_SLOTS);
    srv_cache_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hit_only_at_the_same_epoch),
        cmocka_unit_test(test_newer_replaces_older_never_the_reverse),
        cmocka_unit_test(test_caps_and_null),
        cmocka_unit_test(test_collisions_never_mix_bodies),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
