/*
 * control.c - see control.h: the calls through the registered workers' tables. An empty
 * slot (no such worker linked in) does the harmless thing.
 */
#include "control.h"

#include <string.h>
#include <unistd.h>

void ctl_crash_point(const struct ctl *c, const char *point)
{
    if (c->crash_at != NULL && strcmp(c->crash_at, point) == 0)
        _exit(86);
}

void ctl_gateways_kick(struct ctl *c)
{
    if (c->gw.kick)
        c->gw.kick(c);
}

void ctl_gateways_poke(struct ctl *c)
{
    if (c->gw.poke)
        c->gw.poke(c);
}

void ctl_gateways_wait(struct ctl *c, const char *model, const char *alias, int64_t gen,
                       int64_t deadline_ms, void (*wake)(void *arg), void *arg)
{
    if (c->gw.wait)
        c->gw.wait(c, model, alias, gen, deadline_ms, wake, arg);
    else
        wake(arg);
}

enum mg_code ctl_alias_names(struct ctl *c, const char *model, const char *alias,
                             const json_t *routes, const json_t *match, const json_t *shadow,
                             json_t **out, struct mg_error *err)
{
    if (c->gw.alias_names)
        return c->gw.alias_names(c, model, alias, routes, match, shadow, out, err);
    *out = json_array();
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code ctl_alias_check(struct ctl *c, const char *model, const char *alias,
                             const json_t *match, const json_t *shadow, struct mg_error *err)
{
    return c->gw.alias_check ? c->gw.alias_check(c, model, alias, match, shadow, err) : MG_OK;
}

enum mg_code ctl_gateway_check(struct ctl *c, const char *name, const char *kind,
                               const json_t *config, const json_t *models, const json_t *aliases,
                               struct mg_error *err)
{
    return c->gw.gateway_check ? c->gw.gateway_check(c, name, kind, config, models, aliases, err)
                               : MG_OK;
}

void ctl_version_names(struct ctl *c, const char *model, const char *alias, int64_t version,
                       struct ctl_version_names *out)
{
    memset(out, 0, sizeof(*out));
    if (c->gw.version_names)
        c->gw.version_names(c, model, alias, version, out);
}

enum mg_code ctl_gateway_config_validate(struct ctl *c, const char *kind, const json_t *body,
                                         json_t **config, char **secret, struct mg_error *err)
{
    if (c->gw.config_validate == NULL)
        return mg_fail(err, MG_EUNAVAIL, NULL, "no gateway pool runs in this process");
    return c->gw.config_validate(c, kind, body, config, secret, err);
}

enum mg_code ctl_runner_enqueue(struct ctl *c, int64_t leader_epoch, const char *model,
                                int64_t version, const char *trigger, const char *gpu_mode,
                                json_t **out, struct mg_error *err)
{
    if (c->rn.enqueue == NULL)
        return mg_fail(err, MG_EUNAVAIL, NULL, "no smoke-test runner runs in this process");
    return c->rn.enqueue(c, leader_epoch, model, version, trigger, gpu_mode, out, err);
}

enum mg_code ctl_runner_enqueue_routes(struct ctl *c, const char *model, const char *alias,
                                       const json_t *payload, struct mg_error *err)
{
    if (c->rn.enqueue_routes == NULL)
        return mg_fail(err, MG_EUNAVAIL, NULL, "no smoke-test runner runs in this process");
    return c->rn.enqueue_routes(c, model, alias, payload, err);
}

void ctl_runner_kick(struct ctl *c)
{
    if (c->rn.kick)
        c->rn.kick(c);
}

json_t *ctl_runner_info(struct ctl *c)
{
    return c->rn.info ? c->rn.info(c) : NULL;
}

double ctl_runner_largest_gpu_gib(struct ctl *c)
{
    return c->rn.largest_gpu_gib ? c->rn.largest_gpu_gib(c) : -1;
}

void ctl_runner_cache_stats(struct ctl *c, uint64_t *extractions, uint64_t *hits)
{
    *extractions = *hits = 0;
    if (c->rn.cache_stats)
        c->rn.cache_stats(c, extractions, hits);
}
