/*
 * runner.h - the embedded smoke-test runner: a queue (in the store) and
 * worker threads that extract a version's artifact into a private
 * directory, pick a GPU through NVML, run an admin-configured profile
 * command in its own process group with a clean environment, rlimits and a
 * timeout, and record latencies and checks. Results feed the smoke gate; a
 * failure of a rolling-out candidate rolls the promotion back.
 */
#ifndef RUNNER_H
#define RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

struct ctl;

#define RUNNER_PROFILE_MAX 32
#define RUNNER_ARGV_MAX 64

/* A named command template: argv with {model_dir} and {output} placeholders. */
struct runner_profile {
    char name[64];
    char *argv[RUNNER_ARGV_MAX + 1];
    unsigned argc;
    bool has_cost;
    double cost_per_hour; /* of the machine it runs on (--smoke-profile-cost), any unit */
};

/* Parse "NAME=COMMAND": the command is split into words (single and double
 * quotes group, backslash escapes); no shell ever runs it. */
enum mg_code runner_profile_parse(const char *spec, struct runner_profile *out,
                                  struct mg_error *err);
void runner_profile_release(struct runner_profile *p);

/* Apply "NAME=COST" (--smoke-profile-cost: a finite number >= 0 per hour) to the profile
 * NAME among profiles[0..n); MG_EINVAL naming what to fix when it is malformed or no
 * profile has that name. */
enum mg_code runner_profile_cost(struct runner_profile *profiles, unsigned n, const char *spec,
                                 struct mg_error *err);

struct runner_options {
    unsigned workers;
    int64_t interval_s;        /* periodic re-test of routed versions; 0 disables */
    int64_t timeout_ms;        /* per test, kills the whole process group */
    uint64_t memory_limit_mib; /* RLIMIT_AS for CPU runs (GPU runtimes need more) */
    const char *nvml_library;  /* NULL: libnvidia-ml.so.1 */
    const char *work_dir;      /* tests run in fresh 0700 directories below it */
    struct runner_profile profiles[RUNNER_PROFILE_MAX];
    unsigned nprofiles;
};

/* Register the runner's calls with control (control.h: every slot of ctl->rn): tests can
 * be queued and read from here on, before and without runner_start. */
void runner_register(struct ctl *ctl);

/* Start (ctl->rn.impl is set); tests left running by a crash are requeued. */
enum mg_code runner_start(struct ctl *ctl, const struct runner_options *o, struct mg_error *err);
/* Stop the workers and the periodic thread; a kick after this is harmless (the cluster's
 * heartbeat kicks until ctl_cluster_stop). runner_free() then releases everything and
 * empties ctl->rn.impl. */
void runner_stop(struct ctl *ctl);
void runner_free(struct ctl *ctl);

/* Queue a test (trigger: route, promotion, periodic, manual). *out (may be
 * NULL) is the SmokeTest. leader_epoch > 0: queued by leader-only work, only while this
 * replica still leads at that epoch, else MG_EUNAVAIL (store_smoke_enqueue); 0: anyone's. */
enum mg_code runner_enqueue(struct ctl *ctl, int64_t leader_epoch, const char *model,
                            int64_t version, const char *trigger, const char *gpu_mode,
                            json_t **out, struct mg_error *err);

/* Wake the workers: a test was queued by someone else (a promotion's transaction). */
void runner_kick(struct ctl *ctl);

/* The runner gateway's delivery: queue tests of every version the generation routes
 * (payload {"routes","match","shadow"}: a weight above 0, a match rule, or the shadow;
 * store_generation_versions) that names a smoke profile. */
enum mg_code runner_enqueue_routes(struct ctl *ctl, const char *model, const char *alias,
                                   const json_t *payload, struct mg_error *err);

/* GET /api/v1/runner. NEW reference. */
json_t *runner_info(struct ctl *ctl);

/* Memory of the largest GPU in GiB, or -1 when none is reported. */
double runner_largest_gpu_gib(struct ctl *ctl);

/*
 * Whether `need` bytes fit in `avail` free bytes with room to spare (1% plus
 * 4 MiB for blocks and metadata). MG_ENOSPC with a message naming `dir`, the
 * need and the free space when they do not. Pure: the caller measures avail.
 */
enum mg_code runner_space_check(const char *dir, uint64_t need, uint64_t avail,
                                struct mg_error *err);

/* Artifact cache figures since start: extractions done (cache misses) and
 * tests that reused a verified extraction. */
void runner_cache_stats(struct ctl *ctl, uint64_t *extractions, uint64_t *hits);

/* Percentile (nearest rank) of n sorted values; p in (0, 100]. */
double runner_percentile(const double *sorted, size_t n, double p);

#endif
