/*
 * release_analysis.c - release control, live canary analysis (docs/contract.md "Live canary
 * analysis"): on the leader replica, every interval_seconds of a rolling-out promotion
 * whose policy has "analysis", each metric is queried for the candidate and for the
 * baseline at the same instant (control/prom.c), judged (gates/analysis.c), recorded
 * (store_interval_record), and the streaks decide: go on, say the analysis is
 * inconclusive, or roll back through the same path as a failed smoke test.
 *
 * A stage (a phase or a step) ends on the clock's tick only when gates/ says it may
 * (rel_analysis_wait): its time, a passed interval of its own, and no open failure streak.
 *
 * The thread of its own keeps slow queries off the rollout clock; it sleeps while this
 * replica is not the leader.
 */
#include "release.h"
#include "release_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "../os/wait.h"
#include "../base/util.h"
#include "../gates/analysis.h"
#include "../os/metrics.h"
#include "prom.h"

struct rel_analysis {
    pthread_t thread;
    pthread_mutex_t lock;
    struct mg_wait wake;
    bool stop;
    char *bearer, *userpwd; /* --prometheus-credentials, for --prometheus-url only */
};

/* ---- one interval ------------------------------------------------------ */

/* What one interval measured: its verdict, the metrics' JSON (NEW), and the first failed
 * (else first inconclusive) metric's description for an event. */
struct interval {
    enum gate_verdict verdict;
    json_t *metrics;
    char why[512];
};

static json_t *num_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Query one template for one version into *s. */
static void sample(struct ctl *ctl, const struct gate_analysis *a, const char *tmpl,
                   const struct gate_placeholders *ph, int64_t at_ms, struct prom_sample *s)
{
    struct rel_analysis *ra = ctl->analysis;
    const char *url = a->url[0] ? a->url : ctl->cfg->prometheus_url;
    struct prom_client c = {0};
    struct mg_error err = {0};
    char q[GATE_ANALYSIS_QUERY_MAX * 2 + 1];
    long timeout = (long)(a->interval_seconds * 1000 / 2);

    if (url == NULL || url[0] == '\0') {
        s->state = GATE_SAMPLE_ERROR;
        snprintf(s->detail, sizeof(s->detail),
                 "no Prometheus to ask: set analysis.provider.url or start modelgated with "
                 "--prometheus-url");
        return;
    }
    if (gate_analysis_expand(tmpl, ph, q, sizeof(q), &err) != MG_OK) {
        s->state = GATE_SAMPLE_ERROR;
        snprintf(s->detail, sizeof(s->detail), "%.250s", err.message);
        return;
    }
    c.url = url;
    /* credentials go only where the operator pointed them */
    if (ra && ctl->cfg->prometheus_url && strcmp(url, ctl->cfg->prometheus_url) == 0) {
        c.bearer = ra->bearer;
        c.userpwd = ra->userpwd;
    }
    c.timeout_ms = timeout < 500 ? 500 : timeout > 5000 ? 5000 : timeout;
    prom_query(&c, q, at_ms, s);
}

static struct gate_sample view(const struct prom_sample *s)
{
    struct gate_sample g = {s->state, s->value, s->detail};
    return g;
}

static void placeholders(struct ctl *ctl, const char *model, const char *alias, int64_t version,
                         const char *interval, char vbuf[24], struct ctl_version_names *names,
                         struct gate_placeholders *ph)
{
    snprintf(vbuf, 24, "%lld", (long long)version);
    ctl_version_names(ctl, model, alias, version, names);
    memset(ph, 0, sizeof(*ph));
    ph->model = model;
    ph->alias = alias;
    ph->version = vbuf;
    ph->interval = interval;
    ph->haproxy_backend = names->has_haproxy ? names->backend : NULL;
    ph->haproxy_server = names->has_haproxy ? names->server : NULL;
    ph->nginx_upstream = names->has_nginx ? names->upstream : NULL;
}

/* Measure every metric for candidate and baseline (0: none) at at_ms. */
static enum mg_code measure(struct ctl *ctl, const char *model, const char *alias,
                            const struct gate_analysis *a, int64_t candidate, int64_t baseline,
                            int64_t at_ms, struct interval *out)
{
    enum gate_verdict verdicts[GATE_ANALYSIS_MAX_METRICS];
    struct ctl_version_names cn, bn;
    struct gate_placeholders cph, bph;
    char cv[24], bv[24], interval[24], d1[40], d2[40];
    bool has_base = baseline != 0;
    size_t i;

    memset(out, 0, sizeof(*out));
    if ((out->metrics = json_array()) == NULL)
        return MG_ENOMEM;
    snprintf(interval, sizeof(interval), "%llds", (long long)a->interval_seconds);
    placeholders(ctl, model, alias, candidate, interval, cv, &cn, &cph);
    placeholders(ctl, model, alias, baseline, interval, bv, &bn, &bph);
    for (i = 0; i < a->nmetrics; i++) {
        const struct gate_analysis_metric *m = &a->metrics[i];
        struct prom_sample c0, c1, b0 = {.state = GATE_SAMPLE_NODATA},
                                   b1 = {.state = GATE_SAMPLE_NODATA};
        struct gate_sample gc0, gc1, gb0, gb1;
        struct gate_metric_result r;

        sample(ctl, a, m->q[0], &cph, at_ms, &c0);
        if (has_base)
            sample(ctl, a, m->q[0], &bph, at_ms, &b0);
        gc0 = view(&c0);
        gb0 = view(&b0);
        if (m->kind == GATE_METRIC_VALUE) {
            gate_analysis_judge_value(m, &gc0, has_base, &gb0, &r);
        } else {
            sample(ctl, a, m->q[1], &cph, at_ms, &c1);
            if (has_base)
                sample(ctl, a, m->q[1], &bph, at_ms, &b1);
            gc1 = view(&c1);
            gb1 = view(&b1);
            gate_analysis_judge_ratio(m, &gc0, &gc1, has_base, &gb0, &gb1, &r);
        }
        verdicts[i] = r.verdict;
        json_array_append_new(
            out->metrics, json_pack("{s:s, s:o, s:o, s:s, s:s}", "name", m->name, "candidate",
                                    num_or_null(r.candidate), "baseline", num_or_null(r.baseline),
                                    "verdict", gate_verdict_name(r.verdict), "detail", r.detail));
        if (r.verdict != GATE_VERDICT_PASSED &&
            (out->why[0] == '\0' || (r.verdict == GATE_VERDICT_FAILED &&
                                     gate_interval_verdict(verdicts, i) != GATE_VERDICT_FAILED))) {
            snprintf(d1, sizeof(d1), isfinite(r.candidate) ? "%.6g" : "none", r.candidate);
            snprintf(d2, sizeof(d2), isfinite(r.baseline) ? "%.6g" : "none", r.baseline);
            snprintf(out->why, sizeof(out->why),
                     "metric %s of v%lld: %.250s (candidate %.30s, baseline v%lld %.30s)", m->name,
                     (long long)candidate, r.detail, d1, (long long)baseline, d2);
        }
    }
    out->verdict = gate_interval_verdict(verdicts, a->nmetrics);
    return MG_OK;
}

/* ---- streaks ----------------------------------------------------------- */

/* The streaks of promotion id for the stage the promotion is in (list: newest first). */
static void streaks_of(const json_t *list, const struct promo *cur, struct gate_streaks *s)
{
    struct gate_interval h[STORE_INTERVALS_KEPT];
    size_t n = 0, i;
    json_t *it;

    json_array_foreach(list, i, it)
    {
        enum gate_verdict v;
        enum promo_phase ph;

        if (n == STORE_INTERVALS_KEPT ||
            !gate_verdict_parse(json_string_value(json_object_get(it, "verdict")), &v) ||
            !promo_phase_parse(json_string_value(json_object_get(it, "phase")), &ph))
            continue;
        h[n].verdict = v;
        h[n].phase = (int)ph;
        h[n].step_index = (int)json_integer_value(json_object_get(it, "step_index"));
        n++;
    }
    gate_analysis_streaks(h, n, (int)cur->phase,
                          cur->phase == PROMO_PHASE_STEPS ? cur->step_index : -1, s);
}

bool rel_analysis_wait(struct ctl *ctl, const char *id, const struct gate_policy *pol,
                       const struct promo *cur, int64_t now_ms)
{
    struct gate_streaks s;
    struct mg_error err;
    json_t *list = NULL;

    if (!pol->analysis.enabled || cur->state != PROMO_ROLLING_OUT)
        return false;
    if (store_intervals_list(ctl->store, id, STORE_INTERVALS_KEPT, &list, &err) != MG_OK)
        return true; /* cannot tell: missing data never advances */
    streaks_of(list, cur, &s);
    json_decref(list);
    return !gate_analysis_may_end(&pol->analysis, &s, now_ms, cur->next_step_at);
}

void rel_analysis_add(struct ctl *ctl, json_t *p)
{
    struct gate_policy *pol = malloc(sizeof(*pol));
    struct promo cur;
    struct gate_streaks s;
    struct mg_error err;
    json_t *list = NULL, *chrono, *it;
    size_t i;

    if (pol == NULL)
        return;
    if (rel_promo_of(p, &cur, pol, &err) != MG_OK || !pol->analysis.enabled) {
        json_object_set_new(p, "analysis", json_null());
        goto out;
    }
    if (store_intervals_list(ctl->store, json_string_value(json_object_get(p, "id")),
                             STORE_INTERVALS_KEPT, &list, &err) != MG_OK)
        goto out;
    streaks_of(list, &cur, &s);
    chrono = json_array();
    for (i = json_array_size(list); chrono && i-- > 0;) {
        it = json_array_get(list, i);
        json_object_del(it, "_at_ms");
        json_object_del(it, "seq");
        json_array_append(chrono, it);
    }
    json_object_set_new(p, "analysis",
                        json_pack("{s:i, s:i, s:i, s:o*}", "consecutive_failures",
                                  s.consecutive_failures, "consecutive_inconclusive",
                                  s.consecutive_inconclusive, "passed_in_stage", s.passed_in_stage,
                                  "intervals", chrono));
out:
    json_decref(list);
    free(pol);
}

/* ---- the pass ---------------------------------------------------------- */

/* When the promotion's current stage began: its newest shadow, internal or step event. */
static int64_t stage_started(const json_t *p)
{
    const json_t *events = json_object_get(p, "events");
    int64_t at = 0;
    size_t i;

    for (i = json_array_size(events); i-- > 0;) {
        const json_t *e = json_array_get(events, i);
        const char *t = json_string_value(json_object_get(e, "type"));

        if (t &&
            (strcmp(t, "step") == 0 || strcmp(t, "shadow") == 0 || strcmp(t, "internal") == 0)) {
            mg_time_parse(json_string_value(json_object_get(e, "at")), &at);
            break;
        }
    }
    return at;
}

static void act(struct ctl *ctl, int64_t epoch, const char *id, bool rollback, const char *event,
                const char *why)
{
    struct rel_decision d;
    struct mg_error err;

    memset(&d, 0, sizeof(d));
    d.leader_epoch = epoch; /* decided as the leader: commits only while still at this epoch */
    d.ev.kind = PROMO_EV_ANALYSIS;
    d.ev.analysis_rollback = rollback;
    d.ev.analysis_event = event;
    d.ev.reason = why;
    if (rel_apply_event(ctl, "modelgated", id, &d, NULL, &err) != MG_OK &&
        err.code != MG_ECONFLICT && err.code != MG_EUNAVAIL)
        fprintf(stderr, "modelgated: promotion %s: %s: %s\n", id, event, err.message);
}

/* One promotion: measure when an interval is due. Returns when the next one is due (ms),
 * or 0. */
static int64_t promotion_pass(struct ctl *ctl, int64_t epoch, const json_t *p,
                              struct gate_policy *pol, int64_t now)
{
    const char *id = json_string_value(json_object_get(p, "id"));
    const char *model = json_string_value(json_object_get(p, "model"));
    const char *alias = json_string_value(json_object_get(p, "alias"));
    struct promo cur;
    struct interval iv = {0};
    struct store_interval rec;
    struct gate_streaks s;
    struct mg_error err;
    json_t *list = NULL;
    int64_t interval_ms, last = 0, due;
    bool recorded = false;
    char why[512];

    if (rel_promo_of(p, &cur, pol, &err) != MG_OK || !pol->analysis.enabled ||
        cur.state != PROMO_ROLLING_OUT)
        return 0;
    interval_ms = pol->analysis.interval_seconds * 1000;
    if (store_intervals_list(ctl->store, id, 1, &list, &err) != MG_OK)
        return now + interval_ms;
    if (json_array_size(list) > 0)
        last = json_integer_value(json_object_get(json_array_get(list, 0), "_at_ms"));
    json_decref(list);
    list = NULL;
    due = (last > stage_started(p) ? last : stage_started(p)) + interval_ms;
    if (now < due)
        return due;
    if (measure(ctl, model, alias, &pol->analysis, cur.candidate, cur.baseline, now, &iv) != MG_OK)
        return now + interval_ms;
    memset(&rec, 0, sizeof(rec));
    rec.promotion = id;
    rec.at_ms = now;
    rec.not_before_ms = now - interval_ms / 2;
    rec.phase = promo_phase_name(cur.phase);
    rec.step_index = cur.phase == PROMO_PHASE_STEPS ? cur.step_index : -1;
    rec.weight = cur.weight;
    rec.verdict = gate_verdict_name(iv.verdict);
    rec.metrics = iv.metrics;
    rec.leader_epoch = epoch;
    if (rec.phase == NULL || store_interval_record(ctl->store, &rec, &recorded, &err) != MG_OK ||
        !recorded)
        goto out;
    srv_metrics_analysis_interval(ctl->metrics, (int)iv.verdict);
    if (store_intervals_list(ctl->store, id, STORE_INTERVALS_KEPT, &list, &err) != MG_OK)
        goto out;
    streaks_of(list, &cur, &s);
    switch (gate_analysis_decide(&pol->analysis, &s)) {
    case GATE_ANALYSIS_ROLLBACK_FAILED:
        snprintf(why, sizeof(why), "%d failed intervals in a row (failure_limit %d); %.300s",
                 s.consecutive_failures, pol->analysis.failure_limit, iv.why);
        act(ctl, epoch, id, true, "analysis.failed", why);
        break;
    case GATE_ANALYSIS_ROLLBACK_INCONCLUSIVE:
        snprintf(why, sizeof(why),
                 "%d inconclusive intervals in a row (inconclusive_limit %d, on_inconclusive "
                 "rollback); %.300s",
                 s.consecutive_inconclusive, pol->analysis.inconclusive_limit, iv.why);
        act(ctl, epoch, id, true, "analysis.inconclusive", why);
        break;
    case GATE_ANALYSIS_INCONCLUSIVE_HOLD:
        snprintf(why, sizeof(why),
                 "%d inconclusive intervals in a row: holding at this stage until an interval "
                 "passes (a deployer may advance or abort); %.300s",
                 s.consecutive_inconclusive, iv.why);
        act(ctl, epoch, id, false, "analysis.inconclusive", why);
        break;
    case GATE_ANALYSIS_CONTINUE:
        if (gate_analysis_may_end(&pol->analysis, &s, now, cur.next_step_at))
            rel_timer_kick(ctl); /* the stage may end now: the clock takes it */
        break;
    }
out:
    json_decref(list);
    json_decref(iv.metrics);
    return now + interval_ms;
}

/* One pass over the rolling-out promotions. Returns when to look again (ms). */
static int64_t analysis_pass(struct ctl *ctl, int64_t epoch, int64_t now)
{
    struct store_page page = {1000, NULL};
    struct gate_policy *pol = malloc(sizeof(*pol));
    json_t *list = NULL, *p;
    struct mg_error err;
    int64_t next = now + 1000;
    size_t i;

    if (pol == NULL)
        return next;
    if (store_promotion_list(ctl->store, "rolling_out", NULL, NULL, &page, &list, &err) != MG_OK) {
        free(pol);
        return next;
    }
    json_array_foreach(json_object_get(list, "items"), i, p)
    {
        json_t *full = NULL;
        int64_t due;

        /* the list's items may be summaries: the whole promotion has the events */
        if (store_promotion_get(ctl->store, json_string_value(json_object_get(p, "id")), &full,
                                &err) != MG_OK)
            continue;
        due = promotion_pass(ctl, epoch, full, pol, store_clock_ms(ctl->store));
        if (due > 0 && due < next)
            next = due;
        json_decref(full);
    }
    json_decref(list);
    free(pol);
    return next;
}

static void *analysis_main(void *arg)
{
    struct ctl *ctl = arg;
    struct rel_analysis *ra = ctl->analysis;

    pthread_mutex_lock(&ra->lock);
    while (!ra->stop) {
        int64_t now, next, wait_ms, epoch, deadline;

        pthread_mutex_unlock(&ra->lock);
        now = store_clock_ms(ctl->store);
        /* Queries run on the leader only; the others look again each second. */
        epoch = store_leader_epoch(ctl->store);
        next = epoch != 0 ? analysis_pass(ctl, epoch, now) : now + 1000;
        pthread_mutex_lock(&ra->lock);
        if (ra->stop)
            break;
        now = store_clock_ms(ctl->store);
        wait_ms = next > now ? next - now : 50;
        if (wait_ms > 1000)
            wait_ms = 1000;
        deadline = mg_mono_ms() + wait_ms;
        while (!ra->stop && mg_wait_until(&ra->wake, &ra->lock, deadline))
            ;
    }
    pthread_mutex_unlock(&ra->lock);
    return NULL;
}

enum mg_code rel_analysis_start(struct ctl *ctl, struct mg_error *err)
{
    struct rel_analysis *ra = calloc(1, sizeof(*ra));
    enum mg_code rc;

    if (ra == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (ctl->cfg->prometheus_credentials &&
        (rc = prom_read_credentials(ctl->cfg->prometheus_credentials, &ra->bearer, &ra->userpwd,
                                    err)) != MG_OK) {
        free(ra);
        return rc;
    }
    pthread_mutex_init(&ra->lock, NULL);
    mg_wait_init(&ra->wake);
    ctl->analysis = ra;
    if (pthread_create(&ra->thread, NULL, analysis_main, ctl) != 0) {
        ctl->analysis = NULL;
        pthread_mutex_destroy(&ra->lock);
        mg_wait_release(&ra->wake);
        free(ra->bearer);
        free(ra->userpwd);
        free(ra);
        return mg_fail(err, MG_EIO, NULL, "cannot start the analysis thread");
    }
    return MG_OK;
}

void rel_analysis_stop(struct ctl *ctl)
{
    struct rel_analysis *ra = ctl->analysis;

    if (ra == NULL)
        return;
    pthread_mutex_lock(&ra->lock);
    ra->stop = true;
    pthread_cond_signal(&ra->wake.cond);
    pthread_mutex_unlock(&ra->lock);
    pthread_join(ra->thread, NULL);
    pthread_mutex_destroy(&ra->lock);
    mg_wait_release(&ra->wake);
    if (ra->bearer)
        OPENSSL_cleanse(ra->bearer, strlen(ra->bearer));
    if (ra->userpwd)
        OPENSSL_cleanse(ra->userpwd, strlen(ra->userpwd));
    free(ra->bearer);
    free(ra->userpwd);
    free(ra);
    ctl->analysis = NULL;
}

/* ---- the dry run ------------------------------------------------------- */

enum mg_code rel_analysis_dry_run(struct ctl *ctl, const char *model, const char *alias,
                                  int64_t version, json_t **out, struct mg_error *err)
{
    struct gate_policy *pol = malloc(sizeof(*pol));
    json_t *ver = NULL, *facts = NULL;
    struct interval iv = {0};
    int64_t baseline, now = store_clock_ms(ctl->store);
    char at[32];
    enum mg_code rc;

    *out = NULL;
    if (pol == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = store_version_get(ctl->store, model, version, &ver, err)) != MG_OK ||
        (rc = rel_alias_facts(ctl, model, alias, &facts, err)) != MG_OK ||
        (rc = rel_load_policy(ctl, model, alias, pol, NULL, err)) != MG_OK)
        goto out;
    if (!pol->analysis.enabled) {
        rc = mg_fail(err, MG_EINVAL, "analysis",
                     "the policy of alias '%s' has no analysis; PUT one with an \"analysis\" "
                     "block first",
                     alias);
        goto out;
    }
    baseline = rel_facts_lkg(facts, 0, NULL);
    if (baseline == version)
        baseline = 0;
    if ((rc = measure(ctl, model, alias, &pol->analysis, version, baseline, now, &iv)) != MG_OK) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    mg_time_format(now, at);
    *out = json_pack("{s:s, s:I, s:o, s:n, s:n, s:s, s:O, s:s*}", "at", at, "version",
                     (json_int_t)version, "baseline_version",
                     baseline ? json_integer(baseline) : json_null(), "phase", "weight", "verdict",
                     gate_verdict_name(iv.verdict), "metrics", iv.metrics, "detail",
                     iv.why[0] ? iv.why : NULL);
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(iv.metrics);
    json_decref(ver);
    json_decref(facts);
    free(pol);
    return rc;
}
