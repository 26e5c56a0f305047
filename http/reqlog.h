/*
 * reqlog.h - the request log: one line per request, written to a file descriptor (stderr)
 * in batches.
 *
 * A write(2) for each line cost a read with the response cache off about a sixth of its CPU
 * (an append to a file is an inode update on ext4, a message on journald's socket). Lines
 * are gathered in memory and written together: at the latest SRV_REQLOG_FLUSH_MS after the
 * first of a batch, as soon as SRV_REQLOG_CAP bytes are waiting, and when the log stops.
 * The order of the lines is kept. Other messages (errors, start and stop) are written at
 * once, so a request's line can come after a message written up to SRV_REQLOG_FLUSH_MS
 * later; each line carries its time. A crash loses at most the last batch.
 *
 * Thread-safe: any thread may add a line while the log runs.
 */
#ifndef MG_HTTP_REQLOG_H
#define MG_HTTP_REQLOG_H

#include <stddef.h>

#include "../base/mg.h"

#define SRV_REQLOG_FLUSH_MS 50
#define SRV_REQLOG_CAP (32u << 10)

struct srv_reqlog;

/* Start a log onto fd (its writer thread). */
enum mg_code srv_reqlog_start(struct srv_reqlog **out, int fd, struct mg_error *err);

/* Add one line of n bytes (its newline included). A NULL log writes it at once. */
void srv_reqlog_line(struct srv_reqlog *l, const char *line, size_t n);

/* Write what is waiting, stop the writer thread and free *l (NULL after; NULL is a no-op). */
void srv_reqlog_stop(struct srv_reqlog **l);

#endif
