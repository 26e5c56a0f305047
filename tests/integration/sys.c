/*
 * sys.c - see sys.h.
 */
#include "sys.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- time --------------------------------------------------------------- */

int64_t it_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t it_scaled_ms(int64_t ms)
{
    return it_sanitized() ? ms * 3 : ms;
}

int64_t it_deadline(int64_t ms)
{
    return it_now_ms() + it_scaled_ms(ms);
}

void it_pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

int64_t it_wall_ms_of(const char *t)
{
    struct tm tm;
    int ms = 0;

    memset(&tm, 0, sizeof(tm));
    if (t == NULL || sscanf(t, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                            &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
        fail_msg("not an RFC 3339 time: %s", t ? t : "(null)");
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

int64_t it_wall_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- text and files ----------------------------------------------------- */

const char *it_fmt(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    int k;

    va_start(ap, fmt);
    k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n)
        fail_msg("text too long for its buffer: %s", fmt);
    return buf;
}

void it_write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "we");

    if (f == NULL)
        fail_msg("cannot write %s: %s", path, strerror(errno));
    if ((len > 0 && fwrite(data, 1, len, f) != len) || fclose(f) != 0)
        fail_msg("cannot write %s: %s", path, strerror(errno));
}

void it_write_file(const char *path, const char *text)
{
    it_write_bytes(path, text, strlen(text));
}

char *it_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n = 0, cap = 0, r;

    if (f == NULL) {
        if (errno != ENOENT)
            fail_msg("cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    do {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap + 1);
            if (buf == NULL)
                fail_msg("out of memory");
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

bool it_exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

/* nftw has no user pointer: the search's part and result. */
static char it_find_part[128];
static char it_find_found[IT_PATH_MAX];

static int it_find_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    if (strstr(path + f->base, it_find_part) != NULL) {
        snprintf(it_find_found, sizeof(it_find_found), "%s", path);
        return 1;
    }
    return 0;
}

const char *it_find_name(const char *root, const char *part)
{
    snprintf(it_find_part, sizeof(it_find_part), "%s", part);
    it_find_found[0] = '\0';
    if (nftw(root, it_find_entry, 16, FTW_PHYS) == 1)
        return it_find_found;
    return NULL;
}

void it_marker(char *out, size_t n, const char *tag)
{
    unsigned r = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
        fail_msg("cannot read /dev/urandom");
    close(fd);
    it_fmt(out, n, "%s-%d-%08x", tag, (int)getpid(), r);
}

void it_mkdtemp(char out[IT_PATH_MAX], const char *tag)
{
    const char *tmp = getenv("TMPDIR");

    it_fmt(out, IT_PATH_MAX, "%s/mg-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (mkdtemp(out) == NULL)
        fail_msg("mkdtemp %s: %s", out, strerror(errno));
}

static int it_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void it_rmtree(const char *path)
{
    const char *keep = getenv("MG_KEEP_DATA");

    if (path == NULL || path[0] == '\0')
        return;
    if (keep != NULL && strcmp(keep, "1") == 0) {
        print_message("keeping %s (MG_KEEP_DATA=1)\n", path);
        return;
    }
    nftw(path, it_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- loopback ports ----------------------------------------------------- */

/* Can a socket bind 127.0.0.1:port right now? */
static bool it_port_bindable(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/*
 * M29: binding port 0, closing and handing the number on raced with every other process
 * (the kernel hands the same ephemeral ports out again, and tests run two at a time). A
 * port now comes from below the kernel's ephemeral range, which nothing binding port 0
 * gets, and is reserved by a lock on IT_PORT_DIR/<port> that this process holds until it
 * exits, so no other test program hands it out meanwhile. modelgated itself never needs
 * one: it binds port 0 and writes the port it got (--port-file, it_server_start).
 */
#define IT_PORT_DIR "/tmp/mg-it-ports"
#define IT_PORT_LOW 10000

int it_free_port(void)
{
    static unsigned seed;
    int lo = 32768, hi = 60999, top, span;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

    if (f != NULL) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    top = lo - 1; /* below the ephemeral range */
    if (top - IT_PORT_LOW < 1000)
        fail_msg("the ephemeral port range starts at %d: no room below it for test ports", lo);
    span = top - IT_PORT_LOW + 1;
    if (seed == 0)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)it_now_ms();
    if (mkdir(IT_PORT_DIR, 01777) == 0)
        chmod(IT_PORT_DIR, 01777); /* every user's tests share the reservations */
    for (int tries = 0; tries < 2000; tries++) {
        int port = IT_PORT_LOW + (int)(rand_r(&seed) % (unsigned)span);
        char path[64];
        int fd;

        snprintf(path, sizeof(path), IT_PORT_DIR "/%d", port);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0 || !it_port_bindable(port)) {
            close(fd);
            continue;
        }
        return port; /* fd stays open: the reservation lasts as long as this process */
    }
    fail_msg("no free loopback port in %d..%d after 2000 tries", IT_PORT_LOW, top);
    return -1;
}

int it_connect(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- child processes ---------------------------------------------------- */

void it_proc_dump_log(const struct it_proc *p)
{
    char *text = it_read_file(p->log, NULL);
    size_t n = text ? strlen(text) : 0;

    print_error("---- %s log (%s) ----\n%s\n---- end of log ----\n", p->name, p->log,
                text ? text + (n > 4000 ? n - 4000 : 0) : "(none)");
    free(text);
}

void it_proc_spawn(struct it_proc *p, const char *name, const char *const *argv, const char *log)
{
    pid_t pid;

    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->log, sizeof(p->log), "%s", log);
    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDONLY);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    p->pid = pid;
}

bool it_proc_exited(struct it_proc *p, int *status)
{
    if (p->pid == 0)
        return true;
    if (waitpid(p->pid, status, WNOHANG) == p->pid) {
        p->pid = 0;
        return true;
    }
    return false;
}

void it_proc_wait_port(struct it_proc *p, int port)
{
    int64_t deadline = it_deadline(15000);
    int status = 0;

    for (;;) {
        int fd = it_connect(port);

        if (fd >= 0) {
            close(fd);
            return;
        }
        if (it_proc_exited(p, &status)) {
            it_proc_dump_log(p);
            fail_msg("%s exited (status 0x%x) before listening on port %d", p->name, status, port);
        }
        if (it_now_ms() > deadline) {
            it_proc_dump_log(p);
            fail_msg("%s does not listen on port %d", p->name, port);
        }
        it_pause_ms(10);
    }
}

void it_proc_stop(struct it_proc *p)
{
    int64_t deadline = it_now_ms() + 10000;
    int status;

    if (p->pid == 0)
        return;
    kill(p->pid, SIGTERM);
    while (!it_proc_exited(p, &status)) {
        if (it_now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            p->pid = 0;
            break;
        }
        it_pause_ms(10);
    }
}

/* ---- processes found by their command line -------------------------------- */

size_t it_procs_with_arg(const char *marker, pid_t *pids, size_t max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        fail_msg("cannot list /proc: %s", strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[65536];
        ssize_t len;
        int fd;

        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* gone meanwhile */
        len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        for (char *a = buf; a < buf + len; a += strlen(a) + 1) {
            if (strcmp(a, marker) == 0) {
                if (n < max)
                    pids[n] = (pid_t)atoi(e->d_name);
                n++;
                break;
            }
        }
    }
    closedir(d);
    return n;
}

void it_kill_procs(const char *marker)
{
    pid_t pids[64];
    size_t n;

    if (marker == NULL || marker[0] == '\0')
        return;
    n = it_procs_with_arg(marker, pids, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        kill(pids[i], SIGKILL);
}

void it_wait_procs(const char *marker, size_t count)
{
    int64_t deadline = it_deadline(5000);
    pid_t pids[8];

    while (it_procs_with_arg(marker, pids, 8) < count) {
        if (it_now_ms() > deadline)
            fail_msg("the smoke command did not start its %zu processes", count);
        it_pause_ms(10);
    }
}

void it_expect_no_procs(const char *marker, int64_t timeout_ms)
{
    int64_t deadline = it_deadline(timeout_ms);
    pid_t pids[16];
    size_t n;

    while ((n = it_procs_with_arg(marker, pids, 16)) > 0) {
        if (it_now_ms() > deadline) {
            char list[256] = "";
            size_t k = 0;
            for (size_t i = 0; i < n && i < 16; i++)
                k += (size_t)snprintf(list + k, sizeof(list) - k, " %d", (int)pids[i]);
            fail_msg("%zu process(es) with '%s' still run:%s", n, marker, list);
        }
        it_pause_ms(20);
    }
}
