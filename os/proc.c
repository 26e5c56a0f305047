/*
 * proc.c - see proc.h.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/close_range.h>

#include "../base/util.h"

/* Keep the last bytes: shift when the buffer is full. */
static void keep_tail(struct srv_proc_result *res, const char *p, size_t n)
{
    size_t cap = sizeof(res->tail) - 1;

    if (n > cap) {
        p += n - cap; /* only the end of this chunk can survive */
        n = cap;
    }
    if (res->tail_len + n > cap) {
        size_t drop = res->tail_len + n - cap;
        memmove(res->tail, res->tail + drop, res->tail_len - drop);
        res->tail_len -= drop;
    }
    memcpy(res->tail + res->tail_len, p, n);
    res->tail_len += n;
    res->tail[res->tail_len] = '\0';
}

bool srv_proc_run(const char *const *argv, const struct srv_proc_opts *o,
                  struct srv_proc_result *res)
{
    int pipefd[2], status = 0;
    pid_t pid;
    int64_t deadline = mg_mono_ms() + o->timeout_ms;
    char buf[4096];
    bool open_ = true;

    memset(res, 0, sizeof(*res));
    res->exit_code = -1;
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(res->tail, sizeof(res->tail), "pipe: %s", strerror(errno));
        return false;
    }
    pid = fork();
    if (pid < 0) {
        snprintf(res->tail, sizeof(res->tail), "fork: %s", strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        return false;
    }
    if (pid == 0) {
        /* Child: own process group (so a timeout kills its children too),
         * output to the pipe, nothing else inherited. */
        int devnull = open("/dev/null", O_RDONLY);
        setpgid(0, 0);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        signal(SIGPIPE, SIG_DFL);
        if (o->cwd && chdir(o->cwd) != 0)
            _exit(126);
        if (o->child_setup)
            o->child_setup(o->child_arg);
        /* Nothing but 0-2: not even what modelgated itself inherited. */
        close_range(3, ~0U, 0);
        if (o->envp)
            execve(argv[0], (char *const *)argv, (char *const *)o->envp);
        else
            execvp(argv[0], (char *const *)argv);
        {
            /* Plain write(2)s: child_setup may have capped the address space
             * (RLIMIT_AS) below what the parent already maps, so nothing here
             * may allocate (under ASan, printf's interceptors do, and abort). */
            const char *say[] = {"cannot run ", argv[0], ": ", strerror(errno), "\n"};

            for (size_t i = 0; i < sizeof(say) / sizeof(say[0]); i++) {
                if (write(2, say[i], strlen(say[i])) < 0)
                    break;
            }
        }
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, so there is no window */
    if (o->on_start)
        o->on_start(pid, o->child_arg);
    close(pipefd[1]);
    while (open_) {
        struct pollfd pfd = {pipefd[0], POLLIN, 0};
        int64_t left = deadline - mg_mono_ms();
        int pr;

        if (left <= 0 || (o->cancel && *o->cancel)) {
            res->timed_out = true;
            break;
        }
        pr = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (pr < 0 && errno != EINTR)
            break;
        if (pr > 0) {
            ssize_t r = read(pipefd[0], buf, sizeof(buf));
            if (r <= 0)
                open_ = false; /* every writer closed: the group is done writing */
            else
                keep_tail(res, buf, (size_t)r);
        }
    }
    if (res->timed_out)
        kill(-pid, SIGKILL);
    /* The leader exited (or was killed): also end any straggler in its group. */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    kill(-pid, SIGKILL);
    close(pipefd[0]);
    if (res->timed_out)
        res->exit_code = 128 + SIGKILL;
    else if (WIFEXITED(status))
        res->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        res->exit_code = 128 + WTERMSIG(status);
    return true;
}
