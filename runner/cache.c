/*
 * cache.c - the runner's artifacts: each digest extracted once into a verified, read-only
 * cache entry (a marker written last), copied into each test's fresh directory; a free-space
 * check before any write; the least recently used idle entries evicted. See runner.h.
 */
#include "runner_int.h"

enum mg_code runner_space_check(const char *dir, uint64_t need, uint64_t avail,
                                struct mg_error *err)
{
    uint64_t margin = need / 100 + ((uint64_t)4 << 20);
    uint64_t want = need > UINT64_MAX - margin ? UINT64_MAX : need + margin;

    if (avail >= want)
        return MG_OK;
    return mg_fail(err, MG_ENOSPC, NULL,
                   "not enough disk space: the artifact expands to %llu bytes (%.1f MiB) and %s "
                   "has %llu bytes (%.1f MiB) free, short of that plus a 1%% + 4 MiB margin; "
                   "free space under the runner's work directory",
                   (unsigned long long)need, (double)need / 1048576.0, dir,
                   (unsigned long long)avail, (double)avail / 1048576.0);
}

static enum mg_code space_check(const char *dir, uint64_t need, struct mg_error *err)
{
    struct statvfs sv;

    if (statvfs(dir, &sv) != 0)
        return mg_fail(err, MG_EIO, NULL, "cannot check the free space of %s: %s", dir,
                       strerror(errno));
    return runner_space_check(dir, need, (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize, err);
}

void runner_cache_stats(struct ctl *ctl, uint64_t *extractions, uint64_t *hits)
{
    struct runner *rn = ctl->rn.impl;

    *extractions = rn ? __atomic_load_n(&rn->extractions, __ATOMIC_RELAXED) : 0;
    *hits = rn ? __atomic_load_n(&rn->cache_hits, __ATOMIC_RELAXED) : 0;
}

/* Copy one regular file (from_dir/name → to_dir/name), mode 0755 or 0644. */
static enum mg_code copy_file(int from_dir, int to_dir, const char *name, mode_t mode,
                              struct mg_error *err)
{
    int in = openat(from_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int out = openat(to_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                     (mode & 0100) ? 0755 : 0644);
    enum mg_code rc = MG_OK;
    char buf[65536];
    ssize_t n;

    if (in < 0 || out < 0) {
        rc = mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL, "cannot copy '%s': %s", name,
                     strerror(errno));
        goto out;
    }
    /* copy_file_range shares blocks where the file system can (reflinks). */
    for (;;) {
        n = copy_file_range(in, NULL, out, NULL, (size_t)1 << 30, 0);
        if (n > 0)
            continue;
        if (n == 0)
            break;
        if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP) {
            rc = mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL, "cannot copy '%s': %s",
                         name, strerror(errno));
            goto out;
        }
        while ((n = read(in, buf, sizeof(buf))) > 0) {
            if (write(out, buf, (size_t)n) != n) {
                rc = mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL,
                             "cannot copy '%s': %s", name, strerror(errno));
                goto out;
            }
        }
        if (n < 0)
            rc = mg_fail(err, MG_EIO, NULL, "cannot copy '%s': %s", name, strerror(errno));
        break;
    }
out:
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0 && rc == MG_OK)
        rc = mg_fail(err, MG_EIO, NULL, "cannot copy '%s': %s", name, strerror(errno));
    return rc;
}

/* Copy the tree below from_fd into to_fd (runner_int.h). */
enum mg_code runner_copy_tree(int from_fd, int to_fd, unsigned depth, struct mg_error *err)
{
    DIR *d = fdopendir(from_fd);
    struct dirent *de;
    struct stat sb;
    enum mg_code rc = MG_OK;
    int a, b;

    if (d == NULL) {
        close(from_fd);
        close(to_fd);
        return mg_fail(err, MG_EIO, NULL, "cannot read the artifact cache: %s", strerror(errno));
    }
    while (rc == MG_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot read the artifact cache: %s", strerror(errno));
        } else if (S_ISREG(sb.st_mode)) {
            rc = copy_file(dirfd(d), to_fd, de->d_name, sb.st_mode, err);
        } else if (S_ISDIR(sb.st_mode) && depth < 4096) {
            if (mkdirat(to_fd, de->d_name, 0755) != 0 ||
                (a = openat(dirfd(d), de->d_name,
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                rc = mg_fail(err, errno == ENOSPC ? MG_ENOSPC : MG_EIO, NULL,
                             "cannot copy '%s': %s", de->d_name, strerror(errno));
            } else if ((b = openat(to_fd, de->d_name,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                close(a);
                rc =
                    mg_fail(err, MG_EIO, NULL, "cannot copy '%s': %s", de->d_name, strerror(errno));
            } else {
                rc = runner_copy_tree(a, b, depth + 1, err);
            }
        } else {
            rc = mg_fail(err, MG_EIO, NULL, "the artifact cache holds an unexpected entry '%s'",
                         de->d_name);
        }
    }
    closedir(d);
    close(to_fd);
    return rc;
}

static int ro_entry(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
    (void)f;
    if (flag == FTW_F && S_ISREG(sb->st_mode))
        return chmod(path, sb->st_mode & 0555);
    return 0;
}

/*
 * Fill the cache for digest (under rn->cache_lock): extract into
 * cache/tree, make its files read-only, then write cache/.verified. A
 * directory without the marker is a failed or interrupted fill and is
 * started over.
 */
static enum mg_code cache_fill(struct runner *rn, const char *digest, const char *cache,
                               uint64_t need, struct mg_error *err)
{
    char tree[PATH_MAX], marker[PATH_MAX], top[PATH_MAX];
    enum mg_code rc;
    int fd;

    snprintf(top, sizeof(top), "%s", rn->cache_dir);
    snprintf(tree, sizeof(tree), "%.4000s/tree", cache);
    snprintf(marker, sizeof(marker), "%.4000s/.verified", cache);
    if (access(marker, F_OK) == 0) {
        __atomic_add_fetch(&rn->cache_hits, 1, __ATOMIC_RELAXED);
        return MG_OK;
    }
    runner_rm_tree(cache);
    if ((mkdir(top, 0700) != 0 && errno != EEXIST) || mkdir(cache, 0700) != 0 ||
        mkdir(tree, 0700) != 0)
        return mg_fail(err, MG_EIO, NULL, "cannot create the artifact cache %s: %s", cache,
                       strerror(errno));
    if ((rc = space_check(cache, need, err)) != MG_OK ||
        (rc = store_blob_materialize(rn->ctl->store, digest, tree, "artifact", err)) != MG_OK)
        goto fail;
    __atomic_add_fetch(&rn->extractions, 1, __ATOMIC_RELAXED);
    nftw(tree, ro_entry, 16, FTW_PHYS);
    fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
    if (fd < 0 || fsync(fd) != 0) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot mark the artifact cache: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        goto fail;
    }
    close(fd);
    fprintf(stderr, "modelgated: runner: extracted %s into the artifact cache (%llu bytes)\n",
            digest, (unsigned long long)need);
    return MG_OK;
fail:
    runner_rm_tree(cache);
    return rc;
}

static struct cache_slot *slot_find(struct runner *rn, const char *hex)
{
    for (size_t i = 0; i < rn->nslots; i++) {
        if (strcmp(rn->slots[i].hex, hex) == 0)
            return &rn->slots[i];
    }
    return NULL;
}

static void slot_drop(struct runner *rn, struct cache_slot *sl)
{
    char path[PATH_MAX];

    snprintf(path, sizeof(path), "%.3000s/%s", rn->cache_dir, sl->hex);
    runner_rm_tree(path);
    *sl = rn->slots[--rn->nslots];
}

/* Evict idle entries (runner_int.h). */
void runner_cache_evict(struct runner *rn, size_t keep)
{
    while (rn->nslots > keep) {
        struct cache_slot *lru = NULL;
        for (size_t i = 0; i < rn->nslots; i++) {
            if (rn->slots[i].users == 0 && (lru == NULL || rn->slots[i].used < lru->used))
                lru = &rn->slots[i];
        }
        if (lru == NULL)
            return;
        slot_drop(rn, lru);
    }
}

/* Take (and fill when needed) the cache entry of digest. Under cache_lock. */
static enum mg_code cache_take(struct runner *rn, const char *digest, const char *cache,
                               uint64_t need, struct mg_error *err)
{
    struct cache_slot *sl = slot_find(rn, digest + 7);
    enum mg_code rc;

    if (sl == NULL) {
        runner_cache_evict(rn, CACHE_KEEP - 1);
        if (rn->nslots == CACHE_SLOTS)
            return mg_fail(err, MG_EIO, NULL, "the artifact cache is full of running tests");
        sl = &rn->slots[rn->nslots++];
        memset(sl, 0, sizeof(*sl));
        snprintf(sl->hex, sizeof(sl->hex), "%s", digest + 7);
    }
    sl->users++;
    sl->used = ++rn->clock;
    rc = cache_fill(rn, digest, cache, need, err);
    if (rc == MG_ENOSPC) {
        /* Room may be held by idle extractions of other artifacts. */
        sl->users++; /* pinned while the others go */
        runner_cache_evict(rn, 0);
        sl = slot_find(rn, digest + 7);
        sl->users--;
        mg_error_clear(err);
        rc = cache_fill(rn, digest, cache, need, err);
    }
    if (rc != MG_OK && --sl->users == 0)
        slot_drop(rn, sl);
    return rc;
}

static void cache_release(struct runner *rn, const char *digest)
{
    struct cache_slot *sl;

    pthread_mutex_lock(&rn->cache_lock);
    if ((sl = slot_find(rn, digest + 7)) != NULL) {
        sl->users--;
        sl->used = ++rn->clock;
    }
    pthread_mutex_unlock(&rn->cache_lock);
}

/*
 * Put the artifact in dir (the test's own fresh 0700 directory).
 *
 * The blob is extracted and its bytes hashed once per digest, into
 * <work_dir>-cache/<hex>/tree, which no test ever sees; each test gets its own
 * copy of that tree. A copy rather than hard links: a test may chmod and
 * rewrite what it was given, and with links that would change the cache and
 * every later test of the digest. The cache keeps CACHE_KEEP idle extractions,
 * evicting the least recently used (and every idle one when the disk is too
 * full for a new one). Free space is checked against the expanded
 * size (from the upload's inspection) before the cache is filled and before
 * each copy.
 */
enum mg_code runner_extract_artifact(struct runner *rn, const json_t *job, const char *dir,
                                     struct mg_error *err)
{
    const char *digest =
        json_string_value(json_object_get(json_object_get(job, "artifact"), "digest"));
    char cache[PATH_MAX], tree[PATH_MAX];
    uint64_t need = 0;
    enum mg_code rc;
    int from, to;

    mg_error_clear(err);
    if (digest == NULL || !mg_valid_digest(digest, strlen(digest)))
        return mg_fail(err, MG_EINVAL, NULL, "the test names no valid artifact digest");
    if ((rc = store_blob_expanded_size(rn->ctl->store, digest, &need, err)) != MG_OK)
        return rc;
    snprintf(cache, sizeof(cache), "%.3000s/%s", rn->cache_dir, digest + 7);
    snprintf(tree, sizeof(tree), "%.4000s/tree", cache);
    pthread_mutex_lock(&rn->cache_lock);
    rc = cache_take(rn, digest, cache, need, err);
    pthread_mutex_unlock(&rn->cache_lock);
    if (rc != MG_OK)
        return rc;
    /* A filled entry never changes, and one in use is never evicted: copy
     * without the lock. */
    if (rc == MG_OK && (rc = space_check(dir, need, err)) == MG_OK) {
        from = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        to = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (from < 0 || to < 0) {
            rc = mg_fail(err, MG_EIO, NULL, "cannot open the artifact cache: %s", strerror(errno));
            if (from >= 0)
                close(from);
            if (to >= 0)
                close(to);
        } else {
            rc = runner_copy_tree(from, to, 0, err);
        }
    }
    cache_release(rn, digest);
    return rc;
}
