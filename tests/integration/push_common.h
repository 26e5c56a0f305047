/*
 * push_common.h - what the test_push_*.c programs (pushing alias changes to
 * gateways; milestone M4) share beyond sys.h and api.h: the HAProxy runtime
 * API, counting which backend answered N requests, gateways and their
 * deliveries.
 *
 * Every helper asserts (cmocka) and says what went wrong, like harness.h.
 * Main thread only.
 */
#ifndef MG_IT_PUSH_COMMON_H
#define MG_IT_PUSH_COMMON_H

#include "api.h"
#include "harness.h"
#include "sys.h"

#define PC_HAPROXY "/usr/sbin/haproxy"
#define PC_NGINX "/usr/sbin/nginx"

/* Fast retries: the tests watch several attempts within seconds. */
#define PC_SERVER_ARGS                                                                             \
    (const char *const[])                                                                          \
    {                                                                                              \
        "--push-backoff-base-ms", "50", "--push-backoff-max-ms", "400", NULL                       \
    }

/* ---- HAProxy runtime API ------------------------------------------------ */

/* One command on the runtime API at 127.0.0.1:port; the reply (caller frees). */
char *pc_haproxy_cmd(int port, const char *cmd);

/* `get weight be/srv`: the server's current weight. */
int pc_haproxy_weight(int port, const char *be, const char *srv);

/* ---- counting who answered ---------------------------------------------- */

/*
 * n GETs of url, each on a new connection (so every request is balanced
 * afresh, whatever the proxy does with kept-alive ones). counts[i] gets how
 * many bodies were exactly names[i]; any other answer fails.
 */
void pc_count(const char *url, int n, size_t k, const char *const *names, int *counts);

/* pc_count with one more request header ("X-Tenant: acme"), or none when header is NULL. */
void pc_count_h(const char *url, const char *header, int n, size_t k, const char *const *names,
                int *counts);

/*
 * Assert a split: n requests, counts[i] within +-5 percentage points of
 * want_pct[i] (an exact 0 or 100 must be exact).
 */
#define pc_expect_split(n, k, names, counts, ...)                                                  \
    pc_expect_split_at(n, k, names, counts, (const int[]){__VA_ARGS__}, __FILE__, __LINE__)
void pc_expect_split_at(int n, size_t k, const char *const *names, const int *counts,
                        const int *want_pct, const char *file, int line);

/* ---- gateways and deliveries ---------------------------------------------- */

/* PUT /gateways/{name} (JSON text) with the admin token; asserts 200 or 201. */
void pc_gateway_put(struct mg_server *s, const char *name, const char *config);

/* DELETE /gateways/{name}; asserts 204. */
void pc_gateway_delete(struct mg_server *s, const char *name);

/* GET /gateways/{name}; asserts 200. */
struct it_resp *pc_gateway_get(struct mg_server *s, const char *name);

/* The Gateway's delivery row for (model, alias), or NULL. Borrowed. */
json_t *pc_gw_delivery(const json_t *gw, const char *model, const char *alias);

/* The Alias's delivery to gateway, or NULL. Borrowed. */
json_t *pc_alias_delivery(const json_t *alias, const char *gateway);

/* Is every delivery of the Alias answer (there is at least one) in_sync at
 * the alias's generation? */
bool pc_all_in_sync(const json_t *alias);

/* Print the daemon's own notes (log lines starting "modelgated:", e.g. failed
 * pushes), the last max_lines of them; the access log around them says little. */
void pc_dump_server_notes(const struct mg_server *s, size_t max_lines);

/*
 * Poll GET /gateways/{gw} until its row for (model, alias) is at generation
 * gen (0: any) in `state`; fails at it_deadline(timeout_ms) with the last
 * answer. Returns that answer.
 */
#define pc_wait_delivery(s, gw, model, alias, gen, state, timeout_ms)                              \
    pc_wait_delivery_at(s, gw, model, alias, gen, state, timeout_ms, __FILE__, __LINE__)
struct it_resp *pc_wait_delivery_at(struct mg_server *s, const char *gw, const char *model,
                                    const char *alias, json_int_t gen, const char *state,
                                    int64_t timeout_ms, const char *file, int line);

/* ---- nginx reloads --------------------------------------------------------- */

#define PC_MAX_CHILDREN 16

/* The children of a process (an nginx master's workers): up to max pids into out. */
size_t pc_children(pid_t parent, pid_t *out, size_t max);

/* Wait until none of the children in old[] is left and a new one runs: a reload of the
 * nginx master `parent` has taken effect for new connections. */
void pc_wait_replaced(pid_t parent, const pid_t *old, size_t nold, int64_t timeout_ms);

#endif
