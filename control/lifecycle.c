/*
 * lifecycle.c - archive, unarchive, delete, retention and garbage collection:
 * facts from the store, decisions from gates/lifecycle.c, commits that hold
 * only while every alias of the model is where the decision saw it.
 */
#include "lifecycle.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../os/wait.h"
#include "../base/util.h"
#include "../store/store.h"
#include "../model/config.h"
#include "../os/metrics.h"
#include "release_int.h"

/* ---- facts into decisions ------------------------------------------------ */

/* Does a generation (an alias's facts or one history entry) route `version`: a weight > 0, a
 * match rule pinning it, or the shadow (docs/contract.md "Routing strategies")? */
static bool routes_name(const json_t *gen, int64_t version)
{
    json_t *r;
    size_t i;

    json_array_foreach(json_object_get(gen, "routes"), i, r)
    {
        if (json_integer_value(json_object_get(r, "version")) == version &&
            json_integer_value(json_object_get(r, "weight")) > 0)
            return true;
    }
    json_array_foreach(json_object_get(gen, "match"), i, r)
    {
        if (json_integer_value(json_object_get(r, "version")) == version)
            return true;
    }
    return json_integer_value(json_object_get(json_object_get(gen, "shadow"), "version")) ==
           version;
}

/* What a model's facts (store_lifecycle_facts) say of each version. f[i] borrow strings from
 * facts. *gens: {alias: generation} of every alias (NEW). Returns the number filled. */
struct life_view {
    struct life_facts *f;
    size_t n;
    json_t *gens;
};

static void life_view_release(struct life_view *v)
{
    free(v->f);
    json_decref(v->gens);
    memset(v, 0, sizeof(*v));
}

static bool life_view_init(struct life_view *v, const json_t *facts)
{
    json_t *versions = json_object_get(facts, "versions");
    json_t *aliases = json_object_get(facts, "aliases");
    json_t *promos = json_object_get(facts, "promotions");
    json_t *ver, *a, *p, *h;
    size_t i, j, k, na = json_array_size(aliases);
    /* Per alias: its last-known-good and the version a rollback would go to now (the LKG
     * other than the newest routed one); both must stay available. */
    int64_t *keep = calloc(2 * na + 1, sizeof(*keep));

    memset(v, 0, sizeof(*v));
    v->n = json_array_size(versions);
    v->f = calloc(v->n + 1, sizeof(*v->f));
    v->gens = json_object();
    if (keep == NULL || v->f == NULL || v->gens == NULL) {
        free(keep);
        life_view_release(v);
        return false;
    }
    json_array_foreach(aliases, j, a)
    {
        json_object_set_new(v->gens, json_string_value(json_object_get(a, "alias")),
                            json_integer(json_integer_value(json_object_get(a, "generation"))));
        if (json_is_true(json_object_get(a, "exists"))) {
            keep[2 * j] = rel_facts_lkg(a, 0, NULL);
            keep[2 * j + 1] = rel_facts_lkg(a, rel_facts_newest_routed(a), NULL);
        }
    }
    json_array_foreach(versions, i, ver)
    {
        struct life_facts *f = &v->f[i];
        const char *status = json_string_value(json_object_get(ver, "status"));
        int64_t t = 0;

        f->version = json_integer_value(json_object_get(ver, "version"));
        if (!life_status_parse(status, &f->status))
            f->status = LIFE_READY;
        if (mg_time_parse(json_string_value(json_object_get(ver, "created_at")), &t))
            f->created_ms = t;
        json_array_foreach(aliases, j, a)
        {
            const char *name = json_string_value(json_object_get(a, "alias"));
            bool live = json_is_true(json_object_get(a, "exists"));

            if (live && f->routed_by == NULL && routes_name(a, f->version))
                f->routed_by = name;
            if (live && f->lkg_of == NULL &&
                (keep[2 * j] == f->version || keep[2 * j + 1] == f->version))
                f->lkg_of = name;
            json_array_foreach(json_object_get(a, "history"), k, h)
            {
                if (routes_name(h, f->version)) {
                    f->ever_routed = true;
                    break;
                }
            }
        }
        json_array_foreach(promos, j, p)
        {
            if (json_integer_value(json_object_get(p, "version")) == f->version) {
                f->promotion = json_string_value(json_object_get(p, "id"));
                f->promo_alias = json_string_value(json_object_get(p, "alias"));
            }
        }
    }
    free(keep);
    return true;
}

static const struct life_facts *life_view_find(const struct life_view *v, int64_t version)
{
    size_t i;

    for (i = 0; i < v->n; i++) {
        if (v->f[i].version == version)
            return &v->f[i];
    }
    return NULL;
}

static const char *const op_status[] = {"archived", "ready", "deleted"};
static const char *const op_action[] = {"version.archive", "version.unarchive", "version.delete"};

enum mg_code ctl_life_apply(struct ctl *ctl, const char *actor, const char *model, int64_t version,
                            enum life_op op, const char *reason, json_t **out, struct mg_error *err)
{
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        json_t *facts = NULL;
        struct life_view v;
        const struct life_facts *f;
        bool noop = false;

        if ((rc = store_lifecycle_facts(ctl->store, model, &facts, err)) != MG_OK)
            return rc;
        if (!life_view_init(&v, facts)) {
            json_decref(facts);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        if ((f = life_view_find(&v, version)) == NULL) {
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of model '%s' does not exist",
                         (long long)version, model);
        } else if ((rc = life_check(op, f, &noop, err)) == MG_OK && !noop) {
            struct store_status_change ch = {
                .model = model,
                .versions = &version,
                .n = 1,
                .status = op_status[op],
                .reason = reason,
                .generations = v.gens,
                .action = op_action[op],
            };
            rc = store_version_set_status(ctl->store, actor, &ch, err);
        }
        life_view_release(&v);
        json_decref(facts);
    }
    if (rc != MG_OK)
        return rc;
    return store_version_get(ctl->store, model, version, out, err);
}

/* ---- retention -------------------------------------------------------------- */

enum mg_code ctl_retention_run(struct ctl *ctl, const char *actor, const char *model, bool dry_run,
                               json_t **out, struct mg_error *err)
{
    enum mg_code rc = MG_ESTALE;
    struct life_rule rule;
    json_t *rj = NULL, *list = NULL;
    int64_t bytes = 0, *pick = NULL;
    size_t n = 0, i;
    int attempt;

    if ((rc = store_retention_get(ctl->store, model, &rj, err)) != MG_OK)
        return rc;
    if (json_is_null(rj)) {
        json_decref(rj);
        return mg_fail(err, MG_ENOTFOUND, NULL,
                       "model '%s' has no retention rule; PUT one to "
                       "/api/v1/models/%s/retention first",
                       model, model);
    }
    rc = life_rule_parse(rj, &rule, err);
    json_decref(rj);
    if (rc != MG_OK)
        return rc;
    rc = MG_ESTALE;
    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        json_t *facts = NULL, *detail = NULL;
        struct life_view v;

        if ((rc = store_lifecycle_facts(ctl->store, model, &facts, err)) != MG_OK)
            break;
        if (!life_view_init(&v, facts)) {
            json_decref(facts);
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        free(pick);
        pick = calloc(v.n + 1, sizeof(*pick));
        n = pick ? life_retention_select(&rule, v.f, v.n, store_clock_ms(ctl->store), pick) : 0;
        bytes = 0;
        if (pick == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        else if (rule.action == LIFE_DELETE)
            rc = store_bytes_reclaimable(ctl->store, model, pick, n, &bytes, err);
        if (rc == MG_OK && !dry_run && n > 0) {
            struct store_status_change ch = {
                .model = model,
                .versions = pick,
                .n = n,
                .status = rule.action == LIFE_ARCHIVE ? "archived" : "deleted",
                .reason = "retention",
                .generations = v.gens,
                .action = "version.retention",
            };
            detail = json_pack("{s:o, s:I}", "rule", life_rule_to_json(&rule), "bytes_reclaimable",
                               (json_int_t)bytes);
            ch.audit_detail = detail;
            rc = store_version_set_status(ctl->store, actor, &ch, err);
        }
        json_decref(detail);
        life_view_release(&v);
        json_decref(facts);
    }
    if (rc == MG_OK) {
        list = json_array();
        for (i = 0; list && i < n; i++)
            json_array_append_new(list, json_integer(pick[i]));
        *out = json_pack("{s:o, s:s, s:I, s:b}", "versions", list, "action",
                         rule.action == LIFE_ARCHIVE ? "archive" : "delete", "bytes_reclaimable",
                         (json_int_t)bytes, "dry_run", dry_run);
        if (*out == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(pick);
    return rc;
}

/* ---- garbage collection ------------------------------------------------------- */

/* MODELGATED_TEST_CRASH_AT=gc-marked: die with blobs marked and their bytes not yet gone. */
static void gc_crash_point(void *arg)
{
    ctl_crash_point(arg, "gc-marked");
}

enum mg_code ctl_gc_run(struct ctl *ctl, const char *actor, bool dry_run, json_t **out,
                        struct mg_error *err)
{
    struct store_gc_report rep = {.after_mark = gc_crash_point, .arg = ctl};
    enum mg_code rc =
        store_gc(ctl->store, actor, (int64_t)ctl->cfg->gc_grace_s * 1000, dry_run, &rep, err);

    if (rc != MG_OK)
        return rc;
    if (!dry_run)
        srv_metrics_gc_reclaimed(ctl->metrics, (uint64_t)rep.bytes);
    *out = json_pack("{s:I, s:I, s:I, s:b}", "blobs", (json_int_t)rep.blobs, "bytes",
                     (json_int_t)rep.bytes, "leftovers", (json_int_t)rep.leftovers, "dry_run",
                     dry_run);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* ---- the periodic thread -------------------------------------------------------- */

#define LIFE_TICK_MS 1000

/*
 * The background rescan (docs/contract.md "Artifact safety scan"): blobs stored before the scanner
 * existed have no report, so the scan gate fails them and `modelgate pull` refuses them.
 * The leader scans them, a bounded batch per tick, in digest order from a cursor, and
 * records each report as POST /blobs/{digest}/rescan does. A blob whose scan fails (its
 * bytes unreadable) is passed over until the next pass, which starts after SCAN_RETRY_MS;
 * a pass that finds nothing looks again after SCAN_IDLE_MS (new uploads always get a
 * report: only a restored or upgraded database brings unscanned blobs).
 */
#define SCAN_BATCH 8
#define SCAN_IDLE_MS (60 * 1000)
#define SCAN_RETRY_MS (5 * 60 * 1000)

struct scan_backfill {
    char cursor[80];  /* the last digest of this pass; "" at its start */
    int64_t next_ms;  /* no pass starts before this */
    uint64_t scanned; /* reports recorded in this pass */
    uint64_t failed;  /* blobs passed over in this pass */
};

struct ctl_lifecycle {
    pthread_t thread;
    pthread_mutex_t lock;
    struct mg_wait wake;
    bool stop;
    struct scan_backfill scan;
};

/* One batch of the background rescan, as the leader at epoch. */
static void scan_backfill_tick(struct ctl *ctl, struct scan_backfill *b, int64_t epoch, int64_t now)
{
    json_t *batch = NULL, *report = NULL, *d;
    struct mg_error err;
    enum mg_code rc = MG_OK;
    size_t i;

    if (now < b->next_ms)
        return;
    if (store_scan_unscanned(ctl->store, b->cursor, SCAN_BATCH, &batch, &err) != MG_OK) {
        fprintf(stderr, "modelgated: background rescan: %s\n", err.message);
        b->next_ms = now + SCAN_RETRY_MS;
        return;
    }
    json_array_foreach(batch, i, d)
    {
        snprintf(b->cursor, sizeof(b->cursor), "%s", json_string_value(d));
        rc = store_blob_scan_backfill(ctl->store, epoch, "modelgated", b->cursor, &report, &err);
        if (rc == MG_EUNAVAIL) /* no longer the leader: the new one carries on */
            break;
        if (rc != MG_OK) {
            fprintf(stderr, "modelgated: background rescan of %s: %s\n", b->cursor, err.message);
            b->failed++;
        } else if (report != NULL) {
            b->scanned++;
        }
        json_decref(report);
        report = NULL;
    }
    if (json_array_size(batch) < SCAN_BATCH && rc != MG_EUNAVAIL) { /* the pass is over */
        if (b->scanned > 0)
            fprintf(stderr,
                    "modelgated: background rescan: %llu blobs stored before the scanner now "
                    "have a report\n",
                    (unsigned long long)b->scanned);
        if (b->failed > 0)
            fprintf(stderr,
                    "modelgated: background rescan: %llu blobs could not be scanned; retried "
                    "in %d minutes\n",
                    (unsigned long long)b->failed, SCAN_RETRY_MS / 60000);
        b->next_ms = now + (b->failed > 0 ? SCAN_RETRY_MS : SCAN_IDLE_MS);
        b->cursor[0] = '\0';
        b->scanned = b->failed = 0;
    }
    json_decref(batch);
}

static void life_tick(struct ctl *ctl, struct ctl_lifecycle *l)
{
    int64_t now = store_clock_ms(ctl->store);
    json_t *models = NULL, *m, *res = NULL;
    struct mg_error err;
    bool claimed = false;
    size_t i;
    /* The claims commit only while this replica still leads at this epoch (store.h): a
     * leader that lost the lease since claims nothing and stops quietly (MG_EUNAVAIL). */
    int64_t epoch = store_leader_epoch(ctl->store);

    if (epoch == 0)
        return;
    if (ctl->cfg->retention_interval_s > 0 &&
        store_retention_claim(ctl->store, epoch, now,
                              (int64_t)ctl->cfg->retention_interval_s * 1000, &models,
                              &err) == MG_OK) {
        json_array_foreach(models, i, m)
        {
            if (ctl_retention_run(ctl, "modelgated", json_string_value(m), false, &res, &err) !=
                MG_OK)
                fprintf(stderr, "modelgated: retention of model '%s': %s\n", json_string_value(m),
                        err.message);
            json_decref(res);
            res = NULL;
        }
        json_decref(models);
    }
    if (ctl->cfg->gc_interval_s > 0 &&
        store_job_claim(ctl->store, "gc", epoch, now, (int64_t)ctl->cfg->gc_interval_s * 1000,
                        &claimed, &err) == MG_OK &&
        claimed) {
        if (ctl_gc_run(ctl, "modelgated", false, &res, &err) != MG_OK)
            fprintf(stderr, "modelgated: garbage collection: %s\n", err.message);
        json_decref(res);
    }
    scan_backfill_tick(ctl, &l->scan, epoch, store_clock_ms(ctl->store));
}

static void *life_main(void *arg)
{
    struct ctl *ctl = arg;
    struct ctl_lifecycle *l = ctl->lifecycle;

    pthread_mutex_lock(&l->lock);
    while (mg_wait_sleep(&l->wake, &l->lock, LIFE_TICK_MS, &l->stop)) {
        pthread_mutex_unlock(&l->lock);
        life_tick(ctl, l);
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

enum mg_code ctl_lifecycle_start(struct ctl *ctl, struct mg_error *err)
{
    struct ctl_lifecycle *l = calloc(1, sizeof(*l));

    if (l == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&l->lock, NULL);
    mg_wait_init(&l->wake);
    ctl->lifecycle = l;
    if (pthread_create(&l->thread, NULL, life_main, ctl) != 0) {
        ctl->lifecycle = NULL;
        pthread_mutex_destroy(&l->lock);
        mg_wait_release(&l->wake);
        free(l);
        return mg_fail(err, MG_EIO, NULL, "cannot start the lifecycle thread");
    }
    return MG_OK;
}

void ctl_lifecycle_stop(struct ctl *ctl)
{
    struct ctl_lifecycle *l = ctl->lifecycle;

    if (l == NULL)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_broadcast(&l->wake.cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->lock);
    mg_wait_release(&l->wake);
    free(l);
    ctl->lifecycle = NULL;
}
