/*
 * fuzz.h - helpers shared by the libFuzzer targets in tests/fuzz/: a private
 * scratch directory per fuzzing process, removed at exit, and a checked
 * abort that says which invariant broke.
 *
 * libFuzzer calls LLVMFuzzerTestOneInput() millions of times in one process,
 * so state that must outlive one input (a scratch directory, an open store)
 * lives in file-scope statics set up once by LLVMFuzzerInitialize(). That is
 * the fuzzing harness's context, not the server's: the code under test still
 * gets everything through its arguments.
 */
#ifndef MG_FUZZ_H
#define MG_FUZZ_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of the code under test does not hold: report and abort, which
 * libFuzzer records as a crash with this input. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz: %s:%d: invariant '%s' broken: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static inline int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    /* FTW_DEPTH: a directory is reported (FTW_DP) after everything in it. */
    if (flag == FTW_DP || flag == FTW_DNR)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* rm -rf PATH, never following symbolic links. */
static inline void fuzz_rmtree(const char *path)
{
    nftw(path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char fuzz_scratch_path[PATH_MAX];

static inline void fuzz_scratch_cleanup(void)
{
    if (fuzz_scratch_path[0])
        fuzz_rmtree(fuzz_scratch_path);
}

/* A fresh directory "$TMPDIR/mg-fuzz-<tag>.XXXXXX", removed at normal exit
 * (libFuzzer exits normally at -max_total_time/-runs; after a crash the
 * directory stays for inspection). Aborts when it cannot be made. */
static inline const char *fuzz_scratch(const char *tag)
{
    const char *tmp = getenv("TMPDIR");

    if (fuzz_scratch_path[0])
        return fuzz_scratch_path;
    snprintf(fuzz_scratch_path, sizeof(fuzz_scratch_path), "%s/mg-fuzz-%s.XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp", tag);
    if (mkdtemp(fuzz_scratch_path) == NULL) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(fuzz_scratch_cleanup);
    return fuzz_scratch_path;
}

/* A NUL-terminated copy of the input (malloc'd; aborts on OOM). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s == NULL)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
