/*
 * runner_common.h - what the test_runner*.c programs (the embedded smoke-test
 * runner) share beyond sys.h and api.h: shell-script profiles, tar archives
 * built in memory, and the REST calls around smoke tests.
 *
 * Every helper asserts (cmocka) and says what went wrong, like harness.h.
 * Main thread only.
 */
#ifndef MG_IT_RUNNER_COMMON_H
#define MG_IT_RUNNER_COMMON_H

#include "api.h"
#include "harness.h"
#include "sys.h"

#define RC_PATH "/usr/local/bin:/usr/bin:/bin"

/* ---- profiles ----------------------------------------------------------- */

/* A leader and a child that never end; both carry @MARK@ as an argument. */
#define RC_HANG_SH                                                                                 \
    "sh -c 'while :; do sleep 1; done' @MARK@ &\n"                                                 \
    "echo $! > @DIR@/hang.child\n"                                                                 \
    "echo $$ > @DIR@/hang.leader\n"                                                                \
    "echo 'hanging'\n"                                                                             \
    "exec sh -c 'while :; do sleep 1; done' @MARK@\n"

/* Write dir/name from text with every @DIR@ replaced by dir and every @MARK@
 * by mark (which may be NULL when text has none). */
void rc_write_script(const char *dir, const char *name, const char *text, const char *mark);

/* "--smoke-profile=NAME=/bin/sh DIR/NAME.sh {model_dir} {output}EXTRA" into out. */
void rc_profile_arg(char *out, size_t n, const char *dir, const char *name, const char *extra);

/* ---- archives ----------------------------------------------------------- */

struct rc_entry {
    const char *path;
    const char *content; /* NULL: a directory, or a link when symlink is set */
    const char *symlink; /* a symbolic link's target */
};

/* A tar (pax) of the entries, built in memory (caller frees); *len gets its
 * size. The writer does not judge paths, so hostile entries can be made too. */
void *rc_tar(const struct rc_entry *entries, size_t n, size_t *len);

/* ---- versions and aliases ----------------------------------------------- */

/* The "smoke" (profile, NULL: none; max_p95_ms, <= 0: none) and "resources"
 * (parameters, <= 0: none; precision, NULL: fp16) members of a new version,
 * for it_version_create (new reference), or NULL when there are none. */
json_t *rc_smoke_spec(const char *profile, double max_p95_ms, json_int_t parameters,
                      const char *precision);

/* Poll the alias until every gateway, the built-in runner among them, has
 * acknowledged its current generation. */
void rc_alias_in_sync(struct mg_server *s, const char *model, const char *alias);

/* The newest event of `type` in a Promotion, or NULL. Borrowed. */
json_t *rc_event(const json_t *promotion, const char *type);

/* ---- smoke tests -------------------------------------------------------- */

/* POST .../smoke-tests with body (JSON text, NULL for none) and token; asserts
 * 202 and copies the test's id. Returns the answer. */
struct it_resp *rc_smoke_post(struct mg_server *s, const char *token, const char *model,
                              json_int_t version, const char *body, char id[64]);

/* GET .../smoke-tests with the admin token; asserts 200. */
struct it_resp *rc_smoke_list(struct mg_server *s, const char *model, json_int_t version);

/* The item with `id` in a list answer, or NULL. Borrowed. */
json_t *rc_smoke_find(const json_t *list, const char *id);

/* Is a smoke test state final (passed, failed, error)? */
bool rc_smoke_final(const char *state);

/* Poll until test `id` of the version has finished; returns it (borrowed from
 * an answer the server owns until it_release). */
#define rc_smoke_wait(s, model, version, id, ms)                                                   \
    rc_smoke_wait_at(s, model, version, id, ms, __FILE__, __LINE__)
json_t *rc_smoke_wait_at(struct mg_server *s, const char *model, json_int_t version, const char *id,
                         int64_t timeout_ms, const char *file, int line);

/* Poll until the newest test of the version is in `state`; returns it
 * (borrowed, like rc_smoke_wait). */
#define rc_smoke_wait_state(s, model, version, state, ms)                                          \
    rc_smoke_wait_state_at(s, model, version, state, ms, __FILE__, __LINE__)
json_t *rc_smoke_wait_state_at(struct mg_server *s, const char *model, json_int_t version,
                               const char *state, int64_t timeout_ms, const char *file, int line);

/* Wait until the runner has nothing queued or running. */
void rc_runner_idle(struct mg_server *s, int64_t timeout_ms);

/*
 * Assert a finished SmokeTest has every docs/contract.md field with its type: id,
 * state, profile, gpu, started_at, finished_at, duration_ms, exit_code,
 * latency_ms, checks, log_tail, reason, trigger, peak_gpu_memory_mib.
 */
#define rc_expect_smoke_shape(t) rc_expect_smoke_shape_at(t, __FILE__, __LINE__)
void rc_expect_smoke_shape_at(const json_t *t, const char *file, int line);

/* Assert that `text` contains `part`, printing both when not. */
#define rc_expect_contains(text, part) rc_expect_contains_at(text, part, __FILE__, __LINE__)
void rc_expect_contains_at(const char *text, const char *part, const char *file, int line);

/* The reason of a finished test (asserted to be a string). Borrowed. */
const char *rc_reason(const json_t *t);

#endif
