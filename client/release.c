/*
 * release.c - release control: `promote`, `status`, `approve`, `reject`,
 * `abort`, `lkg` and `rollback`.
 *
 * Waiting polls GET /api/v1/promotions/{id} (every 250 ms at first, backing
 * off to 5 s) and rides out a few transient failures (no answer, 5xx), so a
 * CI job survives a server restart in the middle of a long rollout.
 */
#include "mgc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

#define DEFAULT_WAIT_S 3600
#define POLL_FIRST_MS 250
#define POLL_MAX_MS 5000
#define POLL_TRANSIENT_MAX 10 /* consecutive failed polls before giving up */
#define SERVER_WAIT_MAX_S 60  /* the server's ?wait= cap */

/* The promotion names one of docs/contract.md's states (anything else is a reply we cannot trust).
 */
static bool promo_state_known(const json_t *p)
{
    static const char *const states[] = {"evaluating", "awaiting_approval", "rolling_out",
                                         "succeeded",  "rejected",          "aborted",
                                         "rolled_back"};
    const char *s = json_string_value(json_object_get(p, "state"));

    for (size_t i = 0; s != NULL && i < sizeof(states) / sizeof(states[0]); i++)
        if (strcmp(s, states[i]) == 0)
            return json_is_string(json_object_get(p, "id"));
    return false;
}

/* MGC_OK for succeeded, MGC_FAILED for rejected/aborted/rolled_back, -1 while it runs. */
static int promo_outcome(const json_t *p)
{
    const char *s = mgc_str(p, "state", "");

    if (strcmp(s, "succeeded") == 0)
        return MGC_OK;
    if (strcmp(s, "rejected") == 0 || strcmp(s, "aborted") == 0 || strcmp(s, "rolled_back") == 0)
        return MGC_FAILED;
    return -1;
}

/* "awaiting_approval (1 of 2 approvals)", "rolling_out (step 2 of 3, 50%)", ... */
static void promo_state_text(const json_t *p, char *out, size_t n)
{
    const char *s = mgc_str(p, "state", "?");
    json_t *ro = json_object_get(p, "rollout");
    json_t *req =
        json_object_get(json_object_get(json_object_get(p, "policy"), "approvals"), "required");
    size_t approved = 0, i;
    json_t *ap;

    if (strcmp(s, "awaiting_approval") == 0) {
        json_array_foreach(json_object_get(p, "approvals"), i, ap)
        {
            if (strcmp(mgc_str(ap, "decision", ""), "approve") == 0)
                approved++;
        }
        snprintf(out, n, "%s (%zu of %lld approvals)", s, approved,
                 (long long)json_integer_value(req));
    } else if (strcmp(s, "rolling_out") == 0) {
        snprintf(out, n, "%s (step %lld of %zu, %lld%%)", s,
                 (long long)json_integer_value(json_object_get(ro, "step_index")) + 1,
                 json_array_size(json_object_get(ro, "steps")),
                 (long long)json_integer_value(json_object_get(ro, "weight")));
    } else {
        snprintf(out, n, "%s", s);
    }
}

/* Why a promotion ended badly: failed gates, rejections, the last event. To stderr. */
static void promo_explain(const json_t *p)
{
    json_t *g, *ap, *events = json_object_get(p, "events"), *last;
    size_t i;

    json_array_foreach(json_object_get(p, "gates"), i, g)
    {
        if (strcmp(mgc_str(g, "status", ""), "failed") == 0) {
            char *obs = mgc_text(json_object_get(g, "observed"));
            char *exp = mgc_text(json_object_get(g, "expected"));
            fprintf(stderr, "  gate %s failed: observed %s, expected %s%s%s\n",
                    mgc_str(g, "name", "?"), obs ? obs : "-", exp ? exp : "-",
                    mgc_str(g, "detail", NULL) ? "; " : "", mgc_str(g, "detail", ""));
            free(obs);
            free(exp);
        }
    }
    json_array_foreach(json_object_get(p, "approvals"), i, ap)
    {
        if (strcmp(mgc_str(ap, "decision", ""), "reject") == 0)
            fprintf(stderr, "  rejected by %s: %s\n", mgc_str(ap, "by", "?"),
                    mgc_str(ap, "comment", "-"));
    }
    last = json_array_get(events, json_array_size(events) - 1);
    if (last != NULL)
        fprintf(stderr, "  last event: %s %s\n", mgc_str(last, "type", "?"),
                mgc_str(last, "detail", ""));
}

/* GET the promotion; transient failures (no answer, 5xx) return 1 with *p NULL. */
/* GET a promotion. *transient (may be NULL) says why nothing came back:
 * true for no answer or a 5xx (worth asking again), false for an answer
 * that will not change (404, 403: its message is on stderr). */
static int promo_get(struct mgc *c, const char *id, json_t **p, bool *transient)
{
    struct mgc_reply rep;
    char path[128];
    int rc;

    *p = NULL;
    if (transient)
        *transient = false;
    snprintf(path, sizeof(path), "/api/v1/promotions/%s", id);
    rc = mgc_http_json(c, "GET", path, NULL, &rep);
    if (rc != MGC_OK && rep.http >= 200 && rep.http < 300) {
        rc = mgc_reply_fail(&rep, NULL); /* a reply we cannot read: no retry, no guess */
        mgc_reply_release(&rep);
        return rc;
    }
    if (rc != MGC_OK || rep.http >= 500) {
        mgc_reply_release(&rep);
        if (transient)
            *transient = true;
        return MGC_ERR;
    }
    if (rep.http != 200) {
        rc = mgc_reply_fail(&rep, NULL);
        mgc_reply_release(&rep);
        return rc;
    }
    if (!promo_state_known(rep.body)) {
        mgc_reply_release(&rep);
        return mgc_fail("the server's reply for promotion %s names no known state; refusing to "
                        "guess",
                        id);
    }
    *p = rep.body;
    rep.body = NULL;
    mgc_reply_release(&rep);
    return MGC_OK;
}

/*
 * Follow promotion `id` until it ends or timeout_s passes; *p (NEW) is its last
 * state (may start as the caller's copy, which is then consumed). Progress
 * lines go to stderr. Returns MGC_OK/MGC_FAILED by outcome, MGC_TIMEOUT, or
 * MGC_ERR.
 */
static int promo_wait(struct mgc *c, const char *id, int64_t timeout_s, json_t **p)
{
    int64_t deadline = mg_mono_ms() + timeout_s * 1000, interval = POLL_FIRST_MS, left;
    char shown[256] = "", now[256];
    json_t *next;
    int transient = 0, rc;
    bool again;

    for (;;) {
        if (*p != NULL) {
            promo_state_text(*p, now, sizeof(now));
            if (strcmp(now, shown) != 0 && !c->json)
                fprintf(stderr, "promotion %s: %s\n", id, now);
            snprintf(shown, sizeof(shown), "%s", now);
            if ((rc = promo_outcome(*p)) >= 0)
                return rc;
        }
        left = deadline - mg_mono_ms();
        if (left <= 0) {
            mgc_fail("timed out after %lld s waiting for promotion %s (state: %s)",
                     (long long)timeout_s, id, *p ? mgc_str(*p, "state", "?") : "unknown");
            return MGC_TIMEOUT;
        }
        mgc_sleep_ms(interval < left ? interval : left);
        interval = interval * 3 / 2 > POLL_MAX_MS ? POLL_MAX_MS : interval * 3 / 2;
        rc = promo_get(c, id, &next, &again);
        if (rc != MGC_OK && again) {
            if (++transient >= POLL_TRANSIENT_MAX)
                return mgc_fail("lost the server while waiting for promotion %s", id);
            continue;
        }
        if (rc != MGC_OK)
            return rc;
        transient = 0;
        json_decref(*p);
        *p = next;
    }
}

/* Live canary analysis: the streaks and the last interval, metric by metric. */
static void analysis_print(const json_t *a)
{
    const json_t *ivs = json_object_get(a, "intervals"), *last, *m;
    size_t i;

    if (!json_is_object(a) || json_array_size(ivs) == 0)
        return;
    last = json_array_get(ivs, json_array_size(ivs) - 1);
    printf("\nanalysis   last interval %s at %s (%s, %lld%%); %lld failed, %lld inconclusive in "
           "a row\n",
           mgc_str(last, "verdict", "?"), mgc_str(last, "at", "?"), mgc_str(last, "phase", "?"),
           (long long)json_integer_value(json_object_get(last, "weight")),
           (long long)json_integer_value(json_object_get(a, "consecutive_failures")),
           (long long)json_integer_value(json_object_get(a, "consecutive_inconclusive")));
    json_array_foreach(json_object_get(last, "metrics"), i, m)
    {
        char cand[32] = "-", base[32] = "-";
        const json_t *cv = json_object_get(m, "candidate"), *bv = json_object_get(m, "baseline");

        if (json_is_number(cv))
            snprintf(cand, sizeof(cand), "%.6g", json_number_value(cv));
        if (json_is_number(bv))
            snprintf(base, sizeof(base), "%.6g", json_number_value(bv));
        printf("  %-22s %-12s candidate %s, baseline %s: %s\n", mgc_str(m, "name", "?"),
               mgc_str(m, "verdict", "?"), cand, base, mgc_str(m, "detail", ""));
    }
}

/* Finish a promotion command: print, explain a bad end, pick the exit code. */
static int promo_report(struct mgc *c, const json_t *p, int outcome, bool id_only)
{
    char state[256];
    int rc = MGC_OK;

    if (!promo_state_known(p))
        return mgc_fail("the server's reply names no known promotion state; refusing to guess");

    if (c->json)
        rc = mgc_print_json(p);
    else if (id_only)
        printf("%s\n", mgc_str(p, "id", "?"));
    if (!c->json) {
        promo_state_text(p, state, sizeof(state));
        fprintf(stderr, "promotion %s of %s v%lld to %s: %s\n", mgc_str(p, "id", "?"),
                mgc_str(p, "model", "?"),
                (long long)json_integer_value(json_object_get(p, "version")),
                mgc_str(p, "alias", "?"), state);
    }
    if (outcome == MGC_FAILED)
        promo_explain(p);
    return rc != MGC_OK ? rc : outcome;
}

static bool wait_timeout(struct mgc *c, const struct mgc_args *a, int64_t *secs)
{
    *secs = DEFAULT_WAIT_S;
    if (mgc_opt(a, "timeout") == NULL)
        return true;
    if (!mgc_flag(a, "wait")) {
        mgc_usage(c, "--timeout goes with --wait");
        return false;
    }
    return mgc_parse_int(c, "--timeout", mgc_opt(a, "timeout"), 1, 7 * 24 * 3600, secs);
}

int mgc_cmd_promote(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0], *alias = mgc_opt(a, "alias"), *reason = mgc_opt(a, "reason");
    json_t *body = NULL, *p = NULL; /* NEW */
    char id[80];
    int64_t n, timeout;
    int rc, outcome;

    if (!mgc_check_model(c, model) ||
        !mgc_parse_int(c, "the version", a->pos[1], 1, INT64_MAX, &n) ||
        !mgc_check_alias(c, alias) || !wait_timeout(c, a, &timeout))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    body = json_pack("{s:s, s:I, s:s}", "model", model, "version", (json_int_t)n, "alias", alias);
    if (body == NULL || (reason && json_object_set_new(body, "reason", json_string(reason)) != 0)) {
        json_decref(body);
        return mgc_fail("out of memory, or --reason is not valid UTF-8");
    }
    rc = mgc_call(c, "POST", "/api/v1/promotions", body, &p);
    json_decref(body);
    if (rc != MGC_OK)
        return rc;
    outcome = promo_outcome(p);
    if (mgc_flag(a, "wait")) {
        /* a copy: promo_wait replaces p, and the id string with it */
        snprintf(id, sizeof(id), "%s", mgc_str(p, "id", ""));
        if (!mgc_check_promotion_id(c, id)) {
            json_decref(p);
            return mgc_fail("the server returned a promotion without a usable id");
        }
        outcome = promo_wait(c, id, timeout, &p);
        if (outcome == MGC_ERR || outcome == MGC_TIMEOUT) {
            if (c->json)
                mgc_print_json(p);
            json_decref(p);
            return outcome;
        }
    }
    rc = promo_report(c, p, outcome < 0 ? MGC_OK : outcome, true);
    json_decref(p);
    return rc;
}

static void status_print(const json_t *p)
{
    json_t *ro = json_object_get(p, "rollout"), *ap, *ev, *events = json_object_get(p, "events");
    char state[256];
    size_t i, n;

    promo_state_text(p, state, sizeof(state));
    printf("promotion  %s\n", mgc_str(p, "id", "?"));
    printf("target     %s v%lld -> %s", mgc_str(p, "model", "?"),
           (long long)json_integer_value(json_object_get(p, "version")), mgc_str(p, "alias", "?"));
    if (json_is_integer(json_object_get(p, "baseline_version")))
        printf(" (baseline v%lld)",
               (long long)json_integer_value(json_object_get(p, "baseline_version")));
    printf("\nstate      %s\n", state);
    printf("created    %s by %s\n", mgc_str(p, "created_at", "?"), mgc_str(p, "created_by", "?"));
    if (mgc_str(p, "reason", NULL))
        printf("reason     %s\n", mgc_str(p, "reason", ""));
    if (json_object_get(ro, "weight") != NULL)
        printf("rollout    %lld%% now%s%s\n",
               (long long)json_integer_value(json_object_get(ro, "weight")),
               mgc_str(ro, "next_step_at", NULL) ? "; next step at " : "",
               mgc_str(ro, "next_step_at", ""));
    json_array_foreach(json_object_get(p, "approvals"), i, ap)
    {
        printf("%-10s %s by %s at %s: %s\n", i == 0 ? "approvals" : "",
               mgc_str(ap, "decision", "?"), mgc_str(ap, "by", "?"), mgc_str(ap, "at", "?"),
               mgc_str(ap, "comment", "-"));
    }
    if (json_array_size(json_object_get(p, "gates")) > 0) {
        putchar('\n');
        mgc_print_gates(json_object_get(p, "gates"));
    }
    analysis_print(json_object_get(p, "analysis"));
    n = json_array_size(events);
    if (n > 0)
        printf("\nevents (latest %zu):\n", n < 5 ? n : (size_t)5);
    for (i = n > 5 ? n - 5 : 0; i < n; i++) {
        ev = json_array_get(events, i);
        printf("  %s  %s  %s\n", mgc_str(ev, "at", "?"), mgc_str(ev, "type", "?"),
               mgc_str(ev, "detail", ""));
    }
}

int mgc_cmd_status(struct mgc *c, const struct mgc_args *a)
{
    const char *id = a->pos[0];
    json_t *p = NULL; /* NEW */
    int64_t timeout;
    int rc, outcome;
    bool again;

    if (!mgc_check_promotion_id(c, id) || !wait_timeout(c, a, &timeout))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    rc = promo_get(c, id, &p, &again);
    if (rc != MGC_OK && again)
        return mgc_fail("cannot reach %s, or it failed to answer", c->url);
    if (rc != MGC_OK)
        return rc;
    outcome = promo_outcome(p);
    if (mgc_flag(a, "wait")) {
        outcome = promo_wait(c, id, timeout, &p);
        if (outcome == MGC_ERR || outcome == MGC_TIMEOUT) {
            json_decref(p);
            return outcome;
        }
    }
    if (c->json)
        rc = mgc_print_json(p);
    else
        status_print(p);
    if (outcome == MGC_FAILED && !c->json)
        promo_explain(p);
    json_decref(p);
    return rc != MGC_OK ? rc : outcome < 0 ? MGC_OK : outcome;
}

/* POST /promotions/{id}/<what> with body; print the resulting promotion. */
static int promo_action(struct mgc *c, const char *id, const char *what, json_t *body,
                        const char *verb)
{
    json_t *p = NULL; /* NEW */
    char path[160], state[256];
    int rc;

    if (body == NULL)
        return mgc_fail("out of memory, or the text is not valid UTF-8");
    if ((rc = mgc_connect(c)) != MGC_OK) {
        json_decref(body);
        return rc;
    }
    snprintf(path, sizeof(path), "/api/v1/promotions/%s/%s", id, what);
    rc = mgc_call(c, "POST", path, body, &p);
    json_decref(body);
    if (rc != MGC_OK)
        return rc;
    if (c->json) {
        rc = mgc_print_json(p);
    } else {
        promo_state_text(p, state, sizeof(state));
        printf("%s %s: now %s\n", verb, id, state);
    }
    json_decref(p);
    return rc;
}

int mgc_cmd_approve(struct mgc *c, const struct mgc_args *a)
{
    const char *comment = mgc_opt(a, "comment");

    if (!mgc_check_promotion_id(c, a->pos[0]))
        return MGC_USAGE;
    return promo_action(c, a->pos[0], "approvals",
                        comment ? json_pack("{s:s, s:s}", "decision", "approve", "comment", comment)
                                : json_pack("{s:s}", "decision", "approve"),
                        "approved");
}

int mgc_cmd_reject(struct mgc *c, const struct mgc_args *a)
{
    const char *comment = mgc_opt(a, "comment");

    if (!mgc_check_promotion_id(c, a->pos[0]))
        return MGC_USAGE;
    if (comment == NULL || comment[0] == '\0')
        return mgc_usage(c, "a rejection needs --comment saying why");
    return promo_action(c, a->pos[0], "approvals",
                        json_pack("{s:s, s:s}", "decision", "reject", "comment", comment),
                        "rejected");
}

int mgc_cmd_abort(struct mgc *c, const struct mgc_args *a)
{
    const char *reason = mgc_opt(a, "reason");

    if (!mgc_check_promotion_id(c, a->pos[0]))
        return MGC_USAGE;
    return promo_action(c, a->pos[0], "abort",
                        reason ? json_pack("{s:s}", "reason", reason) : json_object(), "aborted");
}

/* ---- last-known-good and rollback --------------------------------------------------------- */

/* Print NAME='value' with the value single-quoted for sh. */
static void env_line(const char *name, const char *value)
{
    const char *p;

    printf("%s='", name);
    for (p = value ? value : ""; *p; p++) {
        if (*p == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*p);
    }
    fputs("'\n", stdout);
}

int mgc_cmd_lkg(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0], *alias = mgc_opt(a, "alias");
    const char *format = mgc_opt(a, "format");
    json_t *l = NULL; /* NEW */
    char path[256], ver[32];
    int rc;

    if (!mgc_check_model(c, model) || !mgc_check_alias(c, alias))
        return MGC_USAGE;
    if (format == NULL)
        format = c->json ? "json" : "text";
    else if (strcmp(format, "json") != 0 && strcmp(format, "env") != 0 &&
             strcmp(format, "version") != 0)
        return mgc_usage(c, "--format is json, env or version, not '%s'", format);
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    snprintf(path, sizeof(path), "/api/v1/models/%s/aliases/%s/last-known-good", model, alias);
    if ((rc = mgc_call(c, "GET", path, NULL, &l)) != MGC_OK)
        return rc;
    snprintf(ver, sizeof(ver), "%lld",
             (long long)json_integer_value(json_object_get(l, "version")));
    if (strcmp(format, "json") == 0) {
        rc = mgc_print_json(l);
    } else if (strcmp(format, "env") == 0) {
        env_line("MODEL_VERSION", ver);
        env_line("MODEL_ARTIFACT", mgc_str(l, "artifact", ""));
        env_line("MODEL_IMAGE", mgc_str(l, "image", ""));
    } else if (strcmp(format, "version") == 0) {
        printf("%s\n", ver);
    } else {
        printf("%s/%s last-known-good: v%s since %s\n  artifact %s\n  image    %s\n", model, alias,
               ver, mgc_str(l, "since", "?"), mgc_str(l, "artifact", "-"),
               mgc_str(l, "image", "-"));
    }
    json_decref(l);
    return rc;
}

/* Gateways that have not applied the alias's generation; prints them when `say`. */
static size_t pending_deliveries(const json_t *alias, bool say)
{
    json_t *d; /* BORROWED */
    size_t i, n = 0;

    json_array_foreach(json_object_get(alias, "deliveries"), i, d)
    {
        if (strcmp(mgc_str(d, "state", ""), "in_sync") == 0)
            continue;
        n++;
        if (say)
            fprintf(stderr, "  gateway %s: %s%s%s\n", mgc_str(d, "gateway", "?"),
                    mgc_str(d, "state", "?"), mgc_str(d, "last_error", NULL) ? ", " : "",
                    mgc_str(d, "last_error", ""));
    }
    return n;
}

int mgc_cmd_rollback(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0], *alias = mgc_opt(a, "alias"), *reason = mgc_opt(a, "reason");
    json_t *body, *al = NULL, *next; /* NEW */
    char path[256], apath[200];
    int64_t wait = 0, deadline, left;
    int rc;

    if (!mgc_check_model(c, model) || !mgc_check_alias(c, alias))
        return MGC_USAGE;
    if (reason == NULL || reason[0] == '\0')
        return mgc_usage(c, "a rollback needs --reason TEXT");
    if (mgc_opt(a, "wait") && !mgc_parse_int(c, "--wait", mgc_opt(a, "wait"), 0, 24 * 3600, &wait))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    deadline = mg_mono_ms() + wait * 1000;
    snprintf(apath, sizeof(apath), "/api/v1/models/%s/aliases/%s", model, alias);
    snprintf(path, sizeof(path), "%s/rollback?wait=%lld", apath,
             (long long)(wait < SERVER_WAIT_MAX_S ? wait : SERVER_WAIT_MAX_S));
    if ((body = json_pack("{s:s}", "reason", reason)) == NULL)
        return mgc_fail("--reason is not valid UTF-8");
    rc = mgc_call(c, "POST", path, body, &al);
    json_decref(body);
    if (rc != MGC_OK)
        return rc;
    /* The server waits at most 60 s; keep reading the alias until the deadline. */
    while (wait > 0 && pending_deliveries(al, false) > 0 && (left = deadline - mg_mono_ms()) > 0) {
        mgc_sleep_ms(left < 1000 ? left : 1000);
        if (mgc_call(c, "GET", apath, NULL, &next) != MGC_OK)
            break;
        json_decref(al);
        al = next;
    }
    if (c->json) {
        rc = mgc_print_json(al);
    } else {
        json_t *r0 = json_array_get(json_object_get(al, "routes"), 0);
        printf("%s/%s rolled back to v%lld (generation %lld)\n", model, alias,
               (long long)json_integer_value(json_object_get(r0, "version")),
               (long long)json_integer_value(json_object_get(al, "generation")));
    }
    if (rc == MGC_OK && wait > 0 && pending_deliveries(al, false) > 0) {
        mgc_fail("timed out after %lld s: not every gateway applied the rollback", (long long)wait);
        pending_deliveries(al, true);
        rc = MGC_TIMEOUT;
    }
    json_decref(al);
    return rc;
}
