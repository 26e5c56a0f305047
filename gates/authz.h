/*
 * authz.h - the one authorisation decision (docs/contract.md Conventions and "Teams"): token facts
 * × model facts × action → allow, or deny with the status and a sentence saying why.
 *
 * Pure: no I/O, no clock, no allocation; every fact is an argument. Thread-safe. The server
 * calls gate_authorize() for every route (http/authz.c srv_authorize), and again inside the
 * handlers that learn the model or alias only from the body or a stored promotion.
 */
#ifndef GATE_AUTHZ_H
#define GATE_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>

#include "../model/roles.h"

#define GATE_MAX_SCOPES 16 /* teams or aliases one token may name */

/* What the token may do. teams/aliases: none means global / every alias. BORROWED. */
struct gate_token {
    const char *name;
    unsigned roles; /* MG_ROLE_* bits (model/roles.h) */
    const char *const *teams;
    size_t nteams;
    const char *const *aliases; /* names, or a prefix followed by a trailing '*' */
    size_t naliases;
};

/* The model a request acts on, when it names an existing one. BORROWED. */
struct gate_model {
    const char *name;
    const char *const *owners; /* owning teams; none: owned by no team */
    size_t nowners;
};

enum gate_read_scope { GATE_READ_ALL, GATE_READ_TEAM };

/* Stored bytes a request reads or cites (docs/contract.md "Tenancy"), and who holds them. BORROWED.
 */
struct gate_bytes {
    const char *digest;
    const char *const *uploaders; /* teams whose tokens uploaded them */
    size_t nuploaders;
    const struct gate_model *citers; /* models with a live (not deleted) version citing them */
    size_t nciters;
    bool released; /* no live version cites them since one was deleted; not uploaded since */
};

struct gate_request {
    unsigned need;                  /* MG_ROLE_* bits that may call it, or MG_NEED_* */
    const struct gate_model *model; /* NULL: the request is not about one existing model */
    const char *alias;              /* the alias a deployer action moves, or NULL */
    enum gate_read_scope read_scope;
    const struct gate_bytes *bytes; /* NULL: the request reads or cites no stored bytes */
    const char *team;               /* the team a route is about ({team} in its path), or NULL */
};

struct gate_decision {
    bool allow;
    unsigned status;  /* when denied: 403, or 404 for a model hidden by --read-scope team */
    char reason[320]; /* when denied: one sentence naming what is missing */
};

/*
 * Decide. In order: public routes and admin tokens pass; the token must hold one of the
 * roles the route needs, where every role includes reading (a route that only needs
 * reader admits any role); a token with teams may use publisher/deployer/reviewer only on
 * models owned by one of its teams (403 naming the owners), and with GATE_READ_TEAM sees
 * only those models (404 for every route on another, writes included); a token with
 * aliases moves, promotes into and rolls back only those aliases (403 naming the allowed
 * ones). Bytes: with GATE_READ_TEAM a token with teams reads or cites them only when one of
 * its teams uploaded them or owns a model citing them (404 otherwise, as if missing);
 * released bytes are gone (410) to every token but admin. A route about one team (its
 * quota): with GATE_READ_TEAM a token with teams reaches only its own teams (404 otherwise).
 */
void gate_authorize(const struct gate_token *t, const struct gate_request *q,
                    struct gate_decision *out);

/* The token's alias patterns admit alias (every alias when it names none). */
bool gate_alias_allowed(const struct gate_token *t, const char *alias);

/* The token is global (no teams), or one of its teams owns the model. */
bool gate_team_owns(const struct gate_token *t, const struct gate_model *m);

/* A valid alias pattern: an alias name, or a prefix of one followed by '*'. */
bool gate_alias_pattern_valid(const char *p);

#endif
