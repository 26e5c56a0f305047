/*
 * sys.h - the operating-system side of the integration tests: clocks and
 * deadlines, text and files, scratch directories, loopback ports, child
 * processes the test starts (HAProxy, nginx), and /proc scans for the ones a
 * server started.
 *
 * Every function asserts (cmocka) and says what went wrong, like harness.h.
 * Main thread only; it_now_ms() is safe from any thread.
 */
#ifndef MG_IT_SYS_H
#define MG_IT_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* ---- time --------------------------------------------------------------- */

/* The monotonic clock in ms. */
int64_t it_now_ms(void);

/* ms, three times longer under sanitizers (MG_SANITIZE=1). */
int64_t it_scaled_ms(int64_t ms);

/* A deadline it_scaled_ms(ms) from now, on the it_now_ms() clock. */
int64_t it_deadline(int64_t ms);

/* The pause between two polls; never used as synchronisation by itself. */
void it_pause_ms(long ms);

/* RFC 3339 UTC ("2026-11-21T10:00:00.123Z") -> ms since the epoch. */
int64_t it_wall_ms_of(const char *t);

/* The wall clock in ms since the epoch (what the server's timestamps are in). */
int64_t it_wall_now_ms(void);

/* ---- text and files ----------------------------------------------------- */

/* snprintf into buf, failing when it does not fit; returns buf. */
const char *it_fmt(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Write len bytes to path (created or truncated). */
void it_write_bytes(const char *path, const void *data, size_t len);

/* Write a NUL-terminated text to path (created or truncated). */
void it_write_file(const char *path, const char *text);

/* The whole file, NUL-terminated (*len, may be NULL, gets its size), or NULL
 * when it does not exist. Caller frees. */
char *it_read_file(const char *path, size_t *len);

/* Does path exist (not following a final symbolic link)? */
bool it_exists(const char *path);

/* The first path below root (links not followed) whose name contains part, or
 * NULL. Borrowed: valid until the next call. */
const char *it_find_name(const char *root, const char *part);

/* A word unlikely to occur anywhere else, "tag-pid-random", into out. */
void it_marker(char *out, size_t n, const char *tag);

/* A fresh scratch directory $TMPDIR/mg-<tag>.XXXXXX (or under /tmp) into out. */
void it_mkdtemp(char out[IT_PATH_MAX], const char *tag);

/* Remove a directory tree (kept, with a note, when MG_KEEP_DATA=1). */
void it_rmtree(const char *path);

/* ---- loopback ports ----------------------------------------------------- */

/* A TCP port on 127.0.0.1 for a child that must be told its port (nginx, HAProxy, the
 * webhook receiver): free now, below the kernel's ephemeral range (never handed to a
 * process binding port 0), and reserved for this process until it exits, so no other test
 * program gets it. modelgated binds port 0 and reports its port instead. */
int it_free_port(void);

/* A connected socket to 127.0.0.1:port (caller closes), or -1. */
int it_connect(int port);

/* ---- child processes ---------------------------------------------------- */

struct it_proc {
    pid_t pid; /* 0 when not running */
    char name[32];
    char log[IT_PATH_MAX];
};

/* Start argv[0] with stdout and stderr appended to log; it dies with us. */
void it_proc_spawn(struct it_proc *p, const char *name, const char *const *argv, const char *log);

/* Has the child exited? Reaps it (status gets its wait status) and clears pid. */
bool it_proc_exited(struct it_proc *p, int *status);

/* Wait until something accepts on 127.0.0.1:port; fails when the child exits
 * first or at the deadline. */
void it_proc_wait_port(struct it_proc *p, int port);

/* SIGTERM, wait (deadline, then SIGKILL); nothing when it is not running. */
void it_proc_stop(struct it_proc *p);

/* Print the end of the child's log to stderr. */
void it_proc_dump_log(const struct it_proc *p);

/* ---- processes found by their command line -------------------------------- */

/* How many processes have marker as one whole argument; the first max pids go
 * to pids. Zombies (empty command line) and this program do not count. */
size_t it_procs_with_arg(const char *marker, pid_t *pids, size_t max);

/* SIGKILL every process carrying marker (cleanup after a failed test). */
void it_kill_procs(const char *marker);

/* Wait until count processes carry marker. */
void it_wait_procs(const char *marker, size_t count);

/* Wait until no process carries marker; fails at the deadline naming them. */
void it_expect_no_procs(const char *marker, int64_t timeout_ms);

#endif
