/*
 * roles.h - the role bits a token or an identity holds, and what a route needs: one
 * definition for the store (which keeps them), gates/authz.c (which decides with them) and
 * the route tables (which name what each route needs).
 */
#ifndef MG_MODEL_ROLES_H
#define MG_MODEL_ROLES_H

enum mg_role {
    MG_ROLE_ADMIN = 1u << 0, /* passes every role check */
    MG_ROLE_PUBLISHER = 1u << 1,
    MG_ROLE_REVIEWER = 1u << 2,
    MG_ROLE_DEPLOYER = 1u << 3,
    MG_ROLE_READER = 1u << 4,
};

/* What a route needs, besides a set of role bits (any of them; admin always passes). */
#define MG_NEED_PUBLIC 0u  /* no token needed */
#define MG_NEED_ANY 0x100u /* any valid token */

#endif
