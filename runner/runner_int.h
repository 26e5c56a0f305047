/*
 * runner_int.h - what the runner's files (runner.c: profiles, jobs and threads; cache.c: the
 * verified extraction of each artifact, its free-space check and the per-test copies) share.
 */
#ifndef SRV_RUNNER_INT_H
#define SRV_RUNNER_INT_H

#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "../base/util.h"
#include "../os/wait.h"
#include "../gates/cost.h"
#include "../gates/policy.h"
#include "../gates/vram.h"
#include "../artifact/archive.h"
#include "../control/control.h"
#include "../store/store.h"
#include "../os/proc.h"
#include "../control/events.h"
#include "nvml.h"

#define OUTPUT_MAX (1u << 20)
#define LATENCIES_MAX 1000000
#define SAMPLE_MS 200

/* Idle extractions the cache keeps; beyond that the least recently used go.
 * Entries in use are never evicted: at most one per worker (16) on top. */
#define CACHE_KEEP 8
#define CACHE_SLOTS (CACHE_KEEP + 16 + 1)

struct cache_slot {
    char hex[65];
    unsigned users; /* tests copying from it now */
    uint64_t used;  /* rn->clock at its last use */
};

struct runner {
    struct ctl *ctl;
    struct runner_options opt;
    struct runner_nvml *nvml;
    pthread_t threads[16];
    unsigned nthreads;
    pthread_t periodic;
    bool periodic_started;
    pthread_mutex_t lock;
    struct mg_wait wake;
    bool stop;
    volatile int cancel; /* runner_stop: kill running tests */
    unsigned kicks;
    /* The artifact cache (extract_artifact): one verified extraction per
     * digest, filled under cache_lock. */
    pthread_mutex_t cache_lock;
    char cache_dir[PATH_MAX];         /* work_dir + "-cache": no test's business */
    uint64_t extractions, cache_hits; /* atomic */
    struct cache_slot slots[CACHE_SLOTS];
    size_t nslots;
    uint64_t clock; /* ticks at every use, for least-recently-used eviction */
};

void runner_rm_tree(const char *dir);

enum mg_code runner_extract_artifact(struct runner *rn, const json_t *job, const char *dir,
                                     struct mg_error *err);

/* cache.c: copy the tree below from_fd into to_fd (both directories, both consumed; depth 0
 * at the top, deeper than 4096 refused). Only what extraction makes may be there: regular
 * files (copied 0755 when owner-executable, else 0644) and directories; anything else fails
 * with MG_EIO naming it. MG_ENOSPC when the disk is full. */
enum mg_code runner_copy_tree(int from_fd, int to_fd, unsigned depth, struct mg_error *err);

/* cache.c: evict idle cache entries (users == 0), least recently used first, removing their
 * directories under rn->cache_dir, until at most `keep` remain; entries in use stay whatever
 * `keep` says. Under rn->cache_lock. */
void runner_cache_evict(struct runner *rn, size_t keep);

#endif
