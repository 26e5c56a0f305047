/*
 * proc.h - run a program (argv, no shell) in its own process group with a
 * timeout, keeping the tail of its combined output.
 */
#ifndef SRV_PROC_H
#define SRV_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct srv_proc_opts {
    int timeout_ms;                 /* the whole group is killed (SIGKILL) after this */
    const char *const *envp;        /* NULL: inherit the environment */
    const char *cwd;                /* NULL: inherit */
    void (*child_setup)(void *arg); /* runs in the child before exec (rlimits), may be NULL */
    void *child_arg;
    volatile int *cancel; /* when set non-zero, the group is killed at once (may be NULL) */
    void (*on_start)(pid_t pid, void *arg); /* after fork, with the group's id (may be NULL) */
};

struct srv_proc_result {
    int exit_code; /* exit status, or 128 + signal, or -1 if it could not start */
    bool timed_out;
    char tail[8192]; /* the last bytes of stdout+stderr, NUL-terminated */
    size_t tail_len;
};

/* Run argv[0] with argv (NULL-terminated). Returns false only when the
 * program could not be started at all (res->tail says why). */
bool srv_proc_run(const char *const *argv, const struct srv_proc_opts *o,
                  struct srv_proc_result *res);

#endif
