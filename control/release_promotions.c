/*
 * release_promotions.c - release control, promotions: creating, deciding, advancing, aborting, the
 * gates dry run, and what workers report.
 */
#include "release.h"
#include "release_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/util.h"
#include "../gates/policy.h"
#include "../gates/rollout.h"
#include "../gates/vram.h"
#include "../artifact/sign.h"

/* ---- promotions ------------------------------------------------------- */

/* The promo struct of a stored promotion. */
enum mg_code rel_promo_of(const json_t *p, struct promo *out, struct gate_policy *pol,
                          struct mg_error *err)
{
    json_t *ro = json_object_get(p, "rollout"), *b = json_object_get(p, "baseline_version");

    if (gate_policy_parse(json_object_get(p, "policy"), pol, err) != MG_OK) {
        char why[MG_ERR_MSG_MAX]; /* mg_fail writes err: never format it into itself */
        snprintf(why, sizeof(why), "%s", err->message);
        return mg_fail(err, MG_EDB, NULL, "stored policy snapshot is invalid: %s", why);
    }
    promo_init(out, pol, json_integer_value(json_object_get(p, "version")),
               json_is_integer(b) ? json_integer_value(b) : 0);
    if (!promo_state_parse(json_string_value(json_object_get(p, "state")), &out->state))
        return mg_fail(err, MG_EDB, NULL, "stored promotion state is invalid");
    out->step_index = (int)json_integer_value(json_object_get(ro, "step_index"));
    out->weight = (int)json_integer_value(json_object_get(ro, "weight"));
    out->next_step_at = json_integer_value(json_object_get(p, "_next_step_at_ms"));
    if (!promo_phase_parse(json_string_value(json_object_get(ro, "phase")), &out->phase))
        return mg_fail(err, MG_EDB, NULL, "stored promotion phase is invalid");
    if (out->phase == PROMO_PHASE_NONE && out->step_index >= 0)
        out->phase = PROMO_PHASE_STEPS; /* stepping since before phases were recorded */
    return MG_OK;
}

/* The alias change of a promotion's actions: the whole generation (routes, and the phase's
 * match rule and shadow, none outside the phases), held in *r. */
static void alias_change_of(struct store_alias_change *a, const struct promo *next,
                            const struct promo_actions *acts, struct mg_routes *r)
{
    size_t i;

    memset(r, 0, sizeof(*r));
    for (i = 0; i < acts->nroutes && i < MG_ROUTES_MAX; i++) {
        r->routes[i].version = acts->routes[i].version;
        r->routes[i].weight = acts->routes[i].weight;
    }
    r->nroutes = i;
    if (acts->has_match) {
        snprintf(r->match[0].header, sizeof(r->match[0].header), "%s", acts->match_header);
        snprintf(r->match[0].value, sizeof(r->match[0].value), "%s", acts->match_value);
        r->match[0].version = acts->match_version;
        r->nmatch = 1;
    }
    if (acts->shadow != 0) {
        r->shadow.version = acts->shadow;
        r->shadow.percent = 100;
    }
    a->routes = r;
    a->kind = rel_alias_kind(next, acts);
}

/* Is the newest smoke test of the candidate still queued or running? (The shadow phase
 * waits for it.) */
static bool smoke_pending(struct ctl *ctl, const char *model, int64_t version)
{
    json_t *t = NULL;
    struct mg_error err;
    const char *st;
    bool pending = false;

    if (store_smoke_latest(ctl->store, model, version, 0, &t, &err) != MG_OK)
        return false;
    st = json_string_value(json_object_get(t, "state"));
    pending = st && (strcmp(st, "queued") == 0 || strcmp(st, "running") == 0);
    json_decref(t);
    return pending;
}

static const char *gpu_mode(const struct gate_policy *pol)
{
    return pol->gpu == GATE_GPU_REQUIRED    ? "required"
           : pol->gpu == GATE_GPU_PREFERRED ? "preferred"
                                            : "none";
}

/* Entering the shadow phase: the candidate is smoke-tested while it gets the copies (the
 * runner gateway queues the same test from the outbox; a queued one is not queued twice).
 * leader_epoch: the decision's (rel_decision), so the rollout clock queues under it. */
static void shadow_smoke(struct ctl *ctl, int64_t leader_epoch, const char *model,
                         const json_t *ver, const struct gate_policy *pol)
{
    struct mg_error err;

    if (pol->smoke_required ||
        json_is_string(json_object_get(json_object_get(ver, "smoke"), "profile")))
        ctl_runner_enqueue(ctl, leader_epoch, model,
                           json_integer_value(json_object_get(ver, "version")), "promotion",
                           gpu_mode(pol), NULL, &err);
}

/* Can the alias's gateways run the policy's phases for this candidate? (HAProxy has no
 * shadow; its header pinning needs a map.) Checked when the promotion is created. */
static enum mg_code phases_check(struct ctl *ctl, const char *model, const char *alias,
                                 int64_t version, int64_t baseline, const struct gate_policy *pol,
                                 struct mg_error *err)
{
    json_t *match = NULL, *shadow = NULL;
    enum mg_code rc;
    char why[MG_ERR_MSG_MAX];

    if (baseline == 0 || (pol->shadow_seconds == 0 && !pol->has_internal))
        return MG_OK; /* the phases are skipped without a baseline */
    if (pol->shadow_seconds > 0)
        shadow = json_pack("{s:I, s:i}", "version", (json_int_t)version, "percent", 100);
    if (pol->has_internal)
        match = json_pack("[{s:s, s:s, s:I}]", "header", pol->internal_header, "value",
                          pol->internal_value, "version", (json_int_t)version);
    rc = ctl_alias_check(ctl, model, alias, match, shadow, err);
    json_decref(match);
    json_decref(shadow);
    if (rc == MG_EINVAL) {
        snprintf(why, sizeof(why), "%s", err->message);
        rc = mg_fail(err, MG_EINVAL, "alias",
                     "the rollout policy of alias '%s' has a%s phase that a gateway cannot run: "
                     "%s",
                     alias, pol->shadow_seconds > 0 ? " shadow" : "n internal", why);
    }
    return rc;
}

const char *rel_alias_kind(const struct promo *next, const struct promo_actions *a)
{
    if (a->restore)
        return next->state == PROMO_ROLLED_BACK ? "rollback" : "abort";
    return next->state == PROMO_SUCCEEDED ? "promoted" : "step";
}

void rel_strip_internal(json_t *p)
{
    json_object_del(p, "_rev");
    json_object_del(p, "_next_step_at_ms");
    json_object_del(p, "_creator");
}

static void new_id(char out[24])
{
    uint8_t rnd[8];

    mg_random_bytes(rnd, sizeof(rnd));
    memcpy(out, "prm_", 4);
    mg_hex_encode(rnd, sizeof(rnd), out + 4);
}

enum mg_code rel_promotion_create(struct ctl *ctl, const struct store_principal *who,
                                  const char *model, int64_t version, const char *alias,
                                  const char *reason, json_t **out, struct mg_error *err)
{
    const char *actor = who->name;
    struct gate_policy pol;
    struct promo cur, next;
    struct promo_actions acts;
    struct promo_event ev = {0};
    struct store_alias_change a;
    struct mg_promotion_new rec = {0};
    json_t *ver = NULL, *facts = NULL, *snapshot = NULL, *report = NULL;
    struct mg_routes change;
    json_t *names = NULL;
    int64_t baseline;
    enum mg_code rc;

    if ((rc = store_version_get(ctl->store, model, version, &ver, err)) != MG_OK)
        goto out;
    if ((rc = rel_alias_facts(ctl, model, alias, &facts, err)) != MG_OK)
        goto out;
    if (!json_is_null(json_object_get(facts, "promotion"))) {
        rc = mg_fail(err, MG_EINPROGRESS, NULL,
                     "alias '%s' already has promotion %s in progress; wait for it or abort it",
                     alias, json_string_value(json_object_get(facts, "promotion")));
        goto out;
    }
    baseline = rel_facts_lkg(facts, 0, NULL);
    if (baseline == version) {
        rc = mg_fail(err, MG_ECONFLICT, "version",
                     "version %lld is already the last-known-good of alias '%s'",
                     (long long)version, alias);
        goto out;
    }
    if ((rc = rel_load_policy(ctl, model, alias, &pol, &snapshot, err)) != MG_OK)
        goto out;
    if ((rc = phases_check(ctl, model, alias, version, baseline, &pol, err)) != MG_OK)
        goto out;
    if ((rc = rel_evaluate(ctl, model, ver, baseline, &pol, NULL, false, store_clock_ms(ctl->store),
                           &report, err)) != MG_OK)
        goto out;
    promo_init(&cur, &pol, version, baseline);
    ev.kind = PROMO_EV_GATES;
    ev.gates_pending = json_is_true(json_object_get(report, "pending"));
    ev.gates_failed = !ev.gates_pending && !json_is_true(json_object_get(report, "passed"));
    if ((rc = promo_step(&cur, &ev, store_clock_ms(ctl->store), &next, &acts, err)) != MG_OK)
        goto out;
    new_id(rec.id);
    rec.model = model;
    rec.alias = alias;
    rec.version = version;
    rec.baseline_version = baseline;
    rec.state = promo_state_name(next.state);
    rec.phase = promo_phase_name(next.phase);
    rec.reason = reason;
    rec.policy = snapshot;
    rec.gates = json_object_get(report, "gates");
    rec.step_index = next.step_index;
    rec.weight = next.weight;
    rec.next_step_at_ms = next.next_step_at;
    if (rec.policy == NULL || rec.gates == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* The runner tests every candidate before its first step; the test is queued in the
     * promotion's own transaction. */
    if (who->issuer[0] && who->subject[0]) {
        rec.creator_issuer = who->issuer;
        rec.creator_subject = who->subject;
    }
    if (pol.smoke_required || json_object_get(json_object_get(ver, "smoke"), "profile"))
        rec.smoke_gpu = gpu_mode(&pol);
    if (acts.set_routes) {
        memset(&a, 0, sizeof(a));
        a.model = model;
        a.alias = alias;
        a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
        alias_change_of(&a, &next, &acts, &change);
        a.reason = reason;
        a.promotion = rec.id;
    }
    if (acts.set_routes &&
        (rc = rel_alias_names(ctl, model, alias, a.routes, &names, err)) != MG_OK)
        goto out;
    a.names = names;
    rc = store_promotion_create(ctl->store, actor, &rec, acts.event[0] ? acts.event : "created",
                                acts.detail, acts.set_routes ? &a : NULL, out, err);
    if (rc == MG_OK) {
        ctl_crash_point(ctl, "promotion-created");
        rel_strip_internal(*out);
        rel_timer_kick(ctl);
        ctl_gateways_kick(ctl);
        ctl_runner_kick(ctl);
    }
out:
    json_decref(ver);
    json_decref(facts);
    json_decref(snapshot);
    json_decref(report);
    json_decref(names);
    return rc;
}

/* d's reviewer decision against promotion p as stored now (version ver):
 * separation of duties, then the tally with this decision added. Done on
 * every attempt, so a decision that lost a race is counted against the
 * approvals that won it. */
static enum mg_code tally_decision(const json_t *p, const json_t *ver,
                                   const struct gate_policy *pol, struct rel_decision *d,
                                   struct mg_error *err)
{
    struct gate_approval all[65];
    struct rel_approval_teams all_teams[65];
    size_t n = rel_approvals_of(json_object_get(p, "approvals"), all, all_teams, 64), i, ncontrib;
    const json_t *history = json_object_get(ver, "metrics_history"); /* BORROWED */
    const char **contrib;
    int approved;
    enum mg_code rc;

    /* Whoever appended a metric could have made the version pass: no approving it. */
    ncontrib = json_array_size(history);
    contrib = calloc(ncontrib ? ncontrib : 1, sizeof(*contrib));
    if (contrib == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    for (i = 0; i < ncontrib; i++)
        contrib[i] = json_string_value(json_object_get(json_array_get(history, i), "by"));
    /* Separation of duties compares people: whoever published the version cannot approve
     * it through another credential (a second JWT, a token they created, an SSO session). */
    if (gate_same_person(
            d->approval_issuer, d->approval_subject,
            json_string_value(json_object_get(json_object_get(ver, "publisher"), "issuer")),
            json_string_value(json_object_get(json_object_get(ver, "publisher"), "subject")))) {
        free(contrib);
        return mg_fail(err, MG_ESELFAPPROVAL, NULL,
                       "'%s' is the person who published this version (through another "
                       "credential) and cannot approve its promotion; ask another reviewer",
                       d->approval_by);
    }
    /* ...nor whoever created the promotion. */
    if (gate_same_person(
            d->approval_issuer, d->approval_subject,
            json_string_value(json_object_get(json_object_get(p, "_creator"), "issuer")),
            json_string_value(json_object_get(json_object_get(p, "_creator"), "subject")))) {
        free(contrib);
        return mg_fail(err, MG_ESELFAPPROVAL, NULL,
                       "'%s' is the person who created this promotion (through another "
                       "credential) and cannot approve it; ask another reviewer",
                       d->approval_by);
    }
    /* ...and one person decides once, whichever credential they use. */
    {
        json_t *a;
        size_t k;
        json_array_foreach(json_object_get(p, "approvals"), k, a)
        {
            json_t *id = json_object_get(a, "identity");
            if (gate_same_person(d->approval_issuer, d->approval_subject,
                                 json_string_value(json_object_get(id, "issuer")),
                                 json_string_value(json_object_get(id, "subject")))) {
                free(contrib);
                return mg_fail(err, MG_ECONFLICT, NULL,
                               "the same person already decided on this promotion (as '%s')",
                               json_string_value(json_object_get(a, "by")));
            }
        }
    }
    rc = gate_approval_check(d->approval_by, json_string_value(json_object_get(ver, "created_by")),
                             contrib, ncontrib, json_string_value(json_object_get(p, "created_by")),
                             all, n, err);
    free(contrib);
    if (rc != MG_OK)
        return rc;
    all[n].by = d->approval_by;
    all[n].approve = strcmp(d->approval_decision, "approve") == 0;
    all[n].teams = all_teams[n].v;
    all[n].nteams = 0;
    for (i = 0; i < json_array_size(d->approval_teams) && i < STORE_MAX_SCOPES; i++)
        all_teams[n].v[all[n].nteams++] = json_string_value(json_array_get(d->approval_teams, i));
    gate_approval_tally(pol, all, n + 1, &d->ev.rejected, &d->ev.satisfied, &approved);
    return MG_OK;
}

enum mg_code rel_apply_event(struct ctl *ctl, const char *actor, const char *id,
                             struct rel_decision *d, json_t **out, struct mg_error *err)
{
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        struct gate_policy pol;
        struct promo cur, next;
        struct promo_actions acts;
        struct store_promotion_change pc;
        struct store_alias_change a;
        json_t *p = NULL, *facts = NULL, *report = NULL, *ver = NULL;
        struct mg_routes change;
        const char *model, *alias;

        if ((rc = store_promotion_get(ctl->store, id, &p, err)) != MG_OK)
            return rc;
        model = json_string_value(json_object_get(p, "model"));
        alias = json_string_value(json_object_get(p, "alias"));
        if ((rc = rel_promo_of(p, &cur, &pol, err)) != MG_OK)
            goto next;
        if (d->refresh_gates) {
            json_t *appr = json_deep_copy(json_object_get(p, "approvals"));
            int64_t since = 0;
            mg_time_parse(json_string_value(json_object_get(p, "created_at")), &since);
            if (d->approval_by)
                json_array_append_new(
                    appr,
                    json_pack("{s:s, s:s, s:o}", "by", d->approval_by, "decision",
                              d->approval_decision, "teams",
                              d->approval_teams ? json_incref(d->approval_teams) : json_array()));
            rc = store_version_get(ctl->store, model, cur.candidate, &ver, err);
            if (rc == MG_OK && d->approval_by)
                rc = tally_decision(p, ver, &pol, d, err);
            if (rc == MG_OK)
                rc = rel_evaluate(ctl, model, ver, cur.baseline, &pol, appr,
                                  cur.state != PROMO_EVALUATING, since, &report, err);
            json_decref(appr);
            if (rc != MG_OK)
                goto next;
            if (d->ev.kind == PROMO_EV_GATES) {
                d->ev.gates_pending = json_is_true(json_object_get(report, "pending"));
                d->ev.gates_failed =
                    !d->ev.gates_pending && !json_is_true(json_object_get(report, "passed"));
            }
        }
        if ((d->ev.kind == PROMO_EV_TICK || d->ev.kind == PROMO_EV_ADVANCE) &&
            cur.phase == PROMO_PHASE_SHADOW)
            d->ev.smoke_pending = smoke_pending(ctl, model, cur.candidate);
        if (d->ev.kind == PROMO_EV_TICK && pol.analysis.enabled)
            d->ev.analysis_wait =
                rel_analysis_wait(ctl, id, &pol, &cur, store_clock_ms(ctl->store));
        if ((rc = promo_step(&cur, &d->ev, store_clock_ms(ctl->store), &next, &acts, err)) != MG_OK)
            goto next;
        if ((d->ev.kind == PROMO_EV_TICK && !acts.set_routes && !acts.event[0]) ||
            (d->ev.kind == PROMO_EV_GATES && next.state == cur.state)) {
            rc = MG_OK; /* nothing due, or still waiting: no event to record */
            goto next;
        }
        memset(&pc, 0, sizeof(pc));
        pc.id = id;
        pc.expected_rev = json_integer_value(json_object_get(p, "_rev"));
        pc.state = promo_state_name(next.state);
        pc.phase = promo_phase_name(next.phase);
        pc.step_index = next.step_index;
        pc.weight = next.weight;
        pc.next_step_at = next.next_step_at;
        pc.gates = report ? json_object_get(report, "gates") : NULL;
        pc.event_type = acts.event[0] ? acts.event : NULL;
        pc.event_detail = acts.detail;
        if (pc.event_type == NULL && d->approval_by) {
            /* An approval that does not yet move the promotion is still news. */
            snprintf(acts.detail, sizeof(acts.detail), "%s %s%s%s", d->approval_by,
                     strcmp(d->approval_decision, "approve") == 0 ? "approved" : "rejected",
                     d->approval_comment ? ": " : "",
                     d->approval_comment ? d->approval_comment : "");
            pc.event_type = "approval";
        }
        pc.approval_by = d->approval_by;
        pc.approval_decision = d->approval_decision;
        pc.approval_comment = d->approval_comment;
        pc.approval_teams = d->approval_teams_text;
        pc.approval_issuer = d->approval_issuer;
        pc.approval_subject = d->approval_subject;
        pc.leader_epoch = d->leader_epoch;
        if (acts.set_routes) {
            if ((rc = rel_alias_facts(ctl, model, alias, &facts, err)) != MG_OK)
                goto next;
            memset(&a, 0, sizeof(a));
            a.model = model;
            a.alias = alias;
            a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
            alias_change_of(&a, &next, &acts, &change);
            a.reason = d->ev.reason;
            a.promotion = id;
            if (strncmp(acts.event, "analysis.", 9) == 0) { /* gateways hear why */
                a.event_type = acts.event;
                a.event_detail = acts.detail;
            }
            /* Restoring to nothing (no baseline): the alias goes back to empty. */
        }
        rc = rel_commit_change(ctl, actor, acts.set_routes ? &a : NULL, &pc, NULL, err);
        if (rc == MG_OK && next.phase == PROMO_PHASE_SHADOW && cur.phase != PROMO_PHASE_SHADOW) {
            struct mg_error ignore; /* the runner gateway queues the test from the outbox too */

            if (ver != NULL ||
                store_version_get(ctl->store, model, cur.candidate, &ver, &ignore) == MG_OK)
                shadow_smoke(ctl, d->leader_epoch, model, ver, &pol);
        }
    next:
        json_decref(p);
        json_decref(facts);
        json_decref(report);
        json_decref(ver);
    }
    if (rc == MG_OK && out) {
        rc = store_promotion_get(ctl->store, id, out, err);
        if (rc == MG_OK) {
            rel_strip_internal(*out);
            rel_analysis_add(ctl, *out);
        }
    }
    if (rc == MG_OK) {
        rel_timer_kick(ctl);
        ctl_gateways_kick(ctl);
    }
    return rc;
}

enum mg_code rel_promotion_decide(struct ctl *ctl, const struct store_principal *who,
                                  const char *id, bool approve, const char *comment, json_t **out,
                                  struct mg_error *err)
{
    struct rel_decision d;
    json_t *teams = json_array();
    char *text = NULL;
    enum mg_code rc;
    size_t i;

    for (i = 0; teams != NULL && i < who->nteams; i++)
        json_array_append_new(teams, json_string(who->teams[i]));
    if (teams == NULL || (text = json_dumps(teams, JSON_COMPACT)) == NULL) {
        json_decref(teams);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    /* Separation of duties, the tally and the state are all checked against
     * the promotion as rel_apply_event reads it, on every attempt. */
    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_APPROVALS;
    d.ev.reason = comment;
    d.approval_by = who->name;
    d.approval_issuer = who->issuer;
    d.approval_subject = who->subject;
    d.approval_decision = approve ? "approve" : "reject";
    d.approval_comment = comment;
    d.approval_teams = teams;
    d.approval_teams_text = text;
    d.refresh_gates = true;
    rc = rel_apply_event(ctl, who->name, id, &d, out, err);
    json_decref(teams);
    free(text);
    return rc;
}

enum mg_code rel_promotion_advance(struct ctl *ctl, const char *actor, const char *id, json_t **out,
                                   struct mg_error *err)
{
    struct rel_decision d;

    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_ADVANCE;
    d.ev.reason = "advanced by a deployer";
    return rel_apply_event(ctl, actor, id, &d, out, err);
}

enum mg_code rel_promotion_abort(struct ctl *ctl, const char *actor, const char *id,
                                 const char *reason, json_t **out, struct mg_error *err)
{
    struct rel_decision d;

    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_ABORT;
    d.ev.reason = reason;
    return rel_apply_event(ctl, actor, id, &d, out, err);
}

enum mg_code rel_promotion_get(struct ctl *ctl, const char *id, json_t **out, struct mg_error *err)
{
    enum mg_code rc = store_promotion_get(ctl->store, id, out, err);

    if (rc == MG_OK) {
        rel_strip_internal(*out);
        rel_analysis_add(ctl, *out);
    }
    return rc;
}

enum mg_code rel_gates_dry_run(struct ctl *ctl, const char *model, int64_t version,
                               const char *alias, json_t **out, struct mg_error *err)
{
    struct gate_policy pol;
    json_t *ver = NULL, *facts = NULL;
    enum mg_code rc;

    if ((rc = store_version_get(ctl->store, model, version, &ver, err)) != MG_OK ||
        (rc = rel_alias_facts(ctl, model, alias, &facts, err)) != MG_OK ||
        (rc = rel_load_policy(ctl, model, alias, &pol, NULL, err)) != MG_OK)
        goto out;
    rc =
        rel_evaluate(ctl, model, ver, rel_facts_lkg(facts, 0, NULL), &pol, NULL, true, 0, out, err);
out:
    json_decref(ver);
    json_decref(facts);
    return rc;
}

void rel_smoke_finished(struct ctl *ctl, const char *model, int64_t version, const char *state,
                        const char *reason)
{
    struct store_page page = {100, NULL};
    json_t *list = NULL, *p;
    struct mg_error err;
    size_t i;

    rel_timer_kick(ctl); /* evaluating promotions look at the result */
    if (state == NULL || strcmp(state, "failed") != 0)
        return;
    if (store_promotion_list(ctl->store, "rolling_out", model, NULL, &page, &list, &err) != MG_OK)
        return;
    json_array_foreach(json_object_get(list, "items"), i, p)
    {
        struct rel_decision d;
        char why[MG_ERR_MSG_MAX];
        if (json_integer_value(json_object_get(p, "version")) != version)
            continue;
        snprintf(why, sizeof(why), "smoke test of v%lld failed: %s", (long long)version,
                 reason ? reason : "no reason given");
        memset(&d, 0, sizeof(d));
        d.ev.kind = PROMO_EV_SMOKE_FAILED;
        d.ev.reason = why;
        if (rel_apply_event(ctl, "modelgated", json_string_value(json_object_get(p, "id")), &d,
                            NULL, &err) != MG_OK)
            fprintf(stderr, "modelgated: automatic rollback of %s failed: %s\n",
                    json_string_value(json_object_get(p, "id")), err.message);
    }
    json_decref(list);
}

void rel_delivery_failed(struct ctl *ctl, const char *id, const char *gateway, const char *error)
{
    struct rel_decision d;
    struct mg_error err;
    char why[MG_ERR_MSG_MAX];

    snprintf(why, sizeof(why), "gateway %s cannot apply the step: %.300s", gateway,
             error ? error : "delivery failed");
    memset(&d, 0, sizeof(d));
    d.ev.kind = PROMO_EV_DELIVERY_FAILED;
    d.ev.reason = why;
    /* Only a rolling-out promotion reacts; anything else is left alone. */
    {
        json_t *p = NULL;
        if (store_promotion_get(ctl->store, id, &p, &err) != MG_OK)
            return;
        if (strcmp(json_string_value(json_object_get(p, "state")), "rolling_out") != 0) {
            json_decref(p);
            return;
        }
        json_decref(p);
    }
    if (rel_apply_event(ctl, "modelgated", id, &d, NULL, &err) != MG_OK)
        fprintf(stderr, "modelgated: automatic rollback of %s failed: %s\n", id, err.message);
}
