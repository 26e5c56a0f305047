/*
 * lifecycle.h - what may happen to a version's record and bytes (docs/contract.md
 * "Lifecycle"): archive, unarchive and delete guards, retention rules and
 * which versions a rule removes. Pure: every fact is an argument (the caller
 * reads them from the store, in one snapshot, and commits only if they still
 * hold), the time included. Thread-safe.
 */
#ifndef GATE_LIFECYCLE_H
#define GATE_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

enum life_status { LIFE_READY, LIFE_ARCHIVED, LIFE_DELETED };

enum life_op { LIFE_ARCHIVE, LIFE_UNARCHIVE, LIFE_DELETE };

/* What is known of one version when a decision is made. Strings are BORROWED. */
struct life_facts {
    int64_t version;
    enum life_status status;
    int64_t created_ms;      /* creation time, ms since the epoch */
    const char *routed_by;   /* an alias routing it now (weights, match or shadow), or NULL */
    const char *lkg_of;      /* an alias whose last-known-good or rollback target it is, or NULL */
    const char *promotion;   /* the id of an active promotion it is the candidate of, or NULL */
    const char *promo_alias; /* that promotion's alias */
    bool ever_routed;        /* it appears in any alias generation ever (so possibly ever LKG) */
};

/* "ready", "archived", "deleted"; and back (false for an unknown name). */
const char *life_status_name(enum life_status s);
bool life_status_parse(const char *name, enum life_status *out);

/*
 * May op be applied to the version now? MG_OK: yes, and *noop tells that the
 * version is already in the state op leads to (the caller answers without a
 * change). MG_ECONFLICT with a sentence naming the alias or promotion that holds
 * the version (routed, last-known-good, active candidate) or why the state
 * forbids it (a deleted version cannot be archived or unarchived).
 */
enum mg_code life_check(enum life_op op, const struct life_facts *f, bool *noop,
                        struct mg_error *err);

/* ---- retention ------------------------------------------------------------ */

#define LIFE_KEEP_LAST_MAX 100000
#define LIFE_KEEP_DAYS_MAX 36500

struct life_rule {
    int64_t keep_last; /* keep the newest N versions (0: none kept by count) */
    int64_t keep_days; /* keep versions younger than D days (0: none kept by age) */
    bool has_keep_last, has_keep_days;
    enum life_op action; /* LIFE_ARCHIVE or LIFE_DELETE */
};

/* Parse a retention rule body {"keep_last"?,"keep_days"?,"action"} (at least one of
 * keep_last and keep_days). MG_EINVAL naming the field. */
enum mg_code life_rule_parse(const json_t *j, struct life_rule *out, struct mg_error *err);

/* The rule's canonical JSON (absent limits are null). NEW reference. */
json_t *life_rule_to_json(const struct life_rule *r);

/*
 * The versions the rule acts on, newest first in `out` (room for n), returning
 * how many. A version is acted on when it is not among the newest keep_last
 * versions not yet deleted (with keep_last), is older than keep_days (with
 * keep_days), was never routed by any alias (so never last-known-good), is not
 * an active promotion's candidate, and the action would change it (archive:
 * ready versions; delete: ready and archived ones). facts may be in any order.
 */
size_t life_retention_select(const struct life_rule *r, const struct life_facts *facts, size_t n,
                             int64_t now_ms, int64_t *out);

#endif
