/*
 * test_replicas_fence.c - a replica that lost its lease can never act (M27): two replicas
 * on one PostgreSQL deliver to a real HAProxy whose runtime API sits behind a small relay
 * in this test. The first connection of a delivery to reach the relay is held (HAProxy's
 * answers wait) and the replica that opened it is SIGSTOPped at once, by the relay, in
 * the middle of its delivery; the other replica writes a newer generation and, once the
 * paused one counts as dead, delivers it; then the paused one wakes (SIGCONT). HAProxy
 * must end at the newest generation, every time: the woken replica checks its lease
 * before it sends anything (its fence) and stops; had it got past its fence just before
 * the pause, what it sent late makes the newest generation go out again. Ten rounds.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_replicas_fence); on SQLite it skips.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ROUNDS 10
#define ARGS                                                                                       \
    (const char *const[])                                                                          \
    {                                                                                              \
        "--push-backoff-base-ms", "50", "--push-backoff-max-ms", "400", "--reconcile-interval-ms", \
            "0", NULL                                                                              \
    }

static char dir[IT_PATH_MAX];
static struct it_proc hap;
static int stats_port;
static struct mg_server *rep[2];

static void need_pg(void)
{
    if (!it_on_postgres())
        it_not_applicable("replicas share a PostgreSQL database; this runs as "
                          "pg_integration_test_replicas_fence");
}

/* ---- the relay ---------------------------------------------------------------------- */

/* Forwards the runtime API; once armed, holds HAProxy's answers on the next connection
 * until released, and notes that connection's client port (to find its process). */
static struct {
    pthread_mutex_t lock;
    int listen_fd, port;
    bool armed, holding, released, stop;
    int held_port; /* the held connection's client port, 0 while none */
    pid_t pids[2]; /* the replicas: the one that opens the held connection is paused */
    int paused;    /* its index, -1 while none */
    pthread_t thread;
} relay = {.lock = PTHREAD_MUTEX_INITIALIZER, .listen_fd = -1, .paused = -1};

static unsigned long socket_inode(int port);
static bool holds_inode(pid_t pid, unsigned long inode);

/* Relay thread: SIGSTOP the replica whose connection comes from port, at once (before it
 * can send or read anything more). */
static void pause_owner(int port)
{
    for (int tries = 0; tries < 2000; tries++) {
        unsigned long inode = socket_inode(port);

        for (int i = 0; inode && i < 2; i++) {
            if (relay.pids[i] > 0 && holds_inode(relay.pids[i], inode)) {
                kill(relay.pids[i], SIGSTOP);
                pthread_mutex_lock(&relay.lock);
                relay.paused = i;
                pthread_mutex_unlock(&relay.lock);
                return;
            }
        }
        usleep(500);
    }
}

struct pipe_conn {
    int c, s;
    bool held, c_done;
};

static bool relay_held_now(const struct pipe_conn *p)
{
    bool h;

    pthread_mutex_lock(&relay.lock);
    h = p->held && !relay.released && !relay.stop;
    pthread_mutex_unlock(&relay.lock);
    return h;
}

/* One connection: the client's bytes go through at once; the server's wait while held. */
static void *pump(void *arg)
{
    struct pipe_conn *p = arg;
    char buf[16384];

    for (;;) {
        bool held = relay_held_now(p);
        struct pollfd fds[2] = {{.fd = p->c_done ? -1 : p->c, .events = POLLIN},
                                {.fd = p->s, .events = held ? 0 : POLLIN}};
        int n = poll(fds, 2, 20);

        if (n < 0 && errno != EINTR)
            break;
        if (n <= 0)
            continue;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(p->c, buf, sizeof(buf), 0);
            if (r < 0)
                break;
            if (r == 0) {
                shutdown(p->s, SHUT_WR);
                p->c_done = true;
            } else if (send(p->s, buf, (size_t)r, MSG_NOSIGNAL) != r) {
                break;
            }
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(p->s, buf, sizeof(buf), 0);
            if (r <= 0 || send(p->c, buf, (size_t)r, MSG_NOSIGNAL) != r)
                break;
        }
    }
    close(p->c);
    close(p->s);
    free(p);
    return NULL;
}

static void *relay_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct sockaddr_in peer, to = {.sin_family = AF_INET};
        socklen_t pl = sizeof(peer);
        struct pollfd pfd = {.fd = relay.listen_fd, .events = POLLIN};
        struct pipe_conn *p;
        pthread_t t;
        int c, s;
        bool stop;

        pthread_mutex_lock(&relay.lock);
        stop = relay.stop;
        pthread_mutex_unlock(&relay.lock);
        if (stop)
            break;
        if (poll(&pfd, 1, 50) != 1)
            continue;
        if ((c = accept(relay.listen_fd, (struct sockaddr *)&peer, &pl)) < 0)
            continue;
        to.sin_port = htons((uint16_t)stats_port);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&to, sizeof(to)) != 0 ||
            (p = calloc(1, sizeof(*p))) == NULL) {
            close(c);
            if (s >= 0)
                close(s);
            continue;
        }
        p->c = c;
        p->s = s;
        pthread_mutex_lock(&relay.lock);
        if (relay.armed && !relay.holding) {
            relay.holding = true;
            relay.released = false;
            relay.held_port = ntohs(peer.sin_port);
            p->held = true;
        }
        pthread_mutex_unlock(&relay.lock);
        if (p->held)
            pause_owner(ntohs(peer.sin_port));
        if (pthread_create(&t, NULL, pump, p) != 0) {
            close(c);
            close(s);
            free(p);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

static void relay_start(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof(a);
    int one = 1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    relay.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(relay.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (relay.listen_fd < 0 || bind(relay.listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(relay.listen_fd, 64) != 0 ||
        getsockname(relay.listen_fd, (struct sockaddr *)&a, &al) != 0)
        fail_msg("relay: %s", strerror(errno));
    relay.port = ntohs(a.sin_port);
    relay.stop = false;
    if (pthread_create(&relay.thread, NULL, relay_main, NULL) != 0)
        fail_msg("relay thread");
}

static void relay_stop(void)
{
    if (relay.listen_fd < 0)
        return;
    pthread_mutex_lock(&relay.lock);
    relay.stop = true;
    pthread_mutex_unlock(&relay.lock);
    pthread_join(relay.thread, NULL);
    close(relay.listen_fd);
    relay.listen_fd = -1;
}

/* Arm: the next connection's answers are held. */
static void relay_arm(void)
{
    pthread_mutex_lock(&relay.lock);
    relay.armed = true;
    relay.holding = false;
    relay.released = false;
    relay.held_port = 0;
    relay.paused = -1;
    pthread_mutex_unlock(&relay.lock);
}

static int relay_held_port(void)
{
    int port;

    pthread_mutex_lock(&relay.lock);
    port = relay.held_port;
    pthread_mutex_unlock(&relay.lock);
    return port;
}

static void relay_release(void)
{
    pthread_mutex_lock(&relay.lock);
    relay.armed = false;
    relay.released = true;
    pthread_mutex_unlock(&relay.lock);
}

/* ---- which replica opened a connection ------------------------------------------------ */

/* The socket inode of the TCP connection from 127.0.0.1:port to the relay. */
static unsigned long socket_inode(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    unsigned long inode = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned lport, rport, st;
        unsigned long ino;
        char laddr[16], raddr[16];

        if (sscanf(line, " %*d: %8[0-9A-Fa-f]:%x %8[0-9A-Fa-f]:%x %x %*s %*s %*s %*s %*s %lu",
                   laddr, &lport, raddr, &rport, &st, &ino) == 6 &&
            (int)lport == port && (int)rport == relay.port) {
            inode = ino;
            break;
        }
    }
    fclose(f);
    return inode;
}

static bool holds_inode(pid_t pid, unsigned long inode)
{
    char path[64], target[64], want[64];
    struct dirent *e;
    DIR *d;
    bool found = false;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    if ((d = opendir(path)) == NULL)
        return false;
    while (!found && (e = readdir(d)) != NULL) {
        char link[384];
        ssize_t n;

        snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
        if ((n = readlink(link, target, sizeof(target) - 1)) > 0) {
            target[n] = '\0';
            found = strcmp(target, want) == 0;
        }
    }
    closedir(d);
    return found;
}

/* The index of the replica the relay paused (it opened the held connection). */
static int paused_replica(void)
{
    int64_t deadline = it_deadline(10000);

    for (;;) {
        int i;

        pthread_mutex_lock(&relay.lock);
        i = relay.paused;
        pthread_mutex_unlock(&relay.lock);
        if (i >= 0)
            return i;
        if (it_now_ms() > deadline)
            fail_msg("no replica opened a runtime API connection (held port %d)",
                     relay_held_port());
        it_pause_ms(2);
    }
}

/* ---- HAProxy ---------------------------------------------------------------------- */

static void haproxy_start(void)
{
    char cfg[2048], path[IT_PATH_MAX], log[IT_PATH_MAX];

    stats_port = it_free_port();
    it_fmt(cfg, sizeof(cfg),
           "global\n"
           "    stats socket ipv4@127.0.0.1:%d level admin\n"
           /* a paused replica's runtime API connection outlives its pause */
           "    stats timeout 2m\n"
           "    nbthread 1\n"
           "defaults\n"
           "    mode http\n"
           "    timeout connect 2s\n"
           "    timeout client 10s\n"
           "    timeout server 10s\n"
           "backend be_fraud_production\n"
           "    server v1 127.0.0.1:9 weight 1\n"
           "    server v2 127.0.0.1:9 weight 1\n"
           "    server v3 127.0.0.1:9 weight 1\n",
           stats_port);
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
    it_fmt(log, sizeof(log), "%s/haproxy.log", dir);
    it_proc_spawn(&hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", path, NULL}, log);
    it_proc_wait_port(&hap, stats_port);
}

/* Does HAProxy hold exactly version v at 100 and the others at 0? */
static bool at_version(int v, char *seen, size_t n)
{
    int w[3];

    for (int i = 0; i < 3; i++)
        w[i] = pc_haproxy_weight(stats_port, "be_fraud_production",
                                 i == 0   ? "v1"
                                 : i == 1 ? "v2"
                                          : "v3");
    snprintf(seen, n, "v1=%d v2=%d v3=%d", w[0], w[1], w[2]);
    for (int i = 0; i < 3; i++)
        if (w[i] != (i + 1 == v ? 100 : 0))
            return false;
    return true;
}

/* modelgate_push_fenced_total of a replica (0 when it has no such series). */
static unsigned long long fenced(struct mg_server *s)
{
    struct it_resp *r = it_get(s, "/metrics", s->admin_token);
    const char *p = strstr(r->body, "\nmodelgate_push_fenced_total ");
    unsigned long long v = 0;

    if (p)
        sscanf(p + strlen("\nmodelgate_push_fenced_total "), "%llu", &v);
    it_resp_free(s, &r);
    return v;
}

/* How many times s's log says a delivery it made after losing its lease was followed by the
 * newest generation, queued again (store_outbox_done: the repair of a stale write). */
static unsigned long long repairs(const struct mg_server *s)
{
    static const char note[] = "went out after this claim lost its lease";
    char *log = it_read_file(s->log_path, NULL);
    unsigned long long n = 0;

    for (const char *p = log; p && (p = strstr(p, note)) != NULL; p += sizeof(note) - 1)
        n++;
    free(log);
    return n;
}

/* A PUT on a socket of its own, its answer read later (raw_status): the relay may pause
 * the replica that serves it before it answers. */
static int raw_put(struct mg_server *s, const char *path, const char *body)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    char req[2048];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    size_t n;

    a.sin_port = htons((uint16_t)s->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("connect: %s", strerror(errno));
    it_fmt(req, sizeof(req),
           "PUT %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n"
           "\r\n%s",
           path, s->admin_token, strlen(body), body);
    n = strlen(req);
    if (send(fd, req, n, MSG_NOSIGNAL) != (ssize_t)n)
        fail_msg("send: %s", strerror(errno));
    return fd;
}

/* The HTTP status of the answer on fd, which is closed. */
static int raw_status(int fd)
{
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    int status = 0;

    while (len < sizeof(buf) - 1 && (r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        fail_msg("no HTTP answer: %.200s", buf);
    return status;
}

/* ---- the test ---------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    if (!it_on_postgres())
        return 0;
    it_mkdtemp(dir, "fence");
    haproxy_start();
    relay_start();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 1; i >= 0; i--) { /* the joined one first: the first drops the database */
        if (rep[i] && rep[i]->pid > 0)
            kill(rep[i]->pid, SIGCONT);
        it_server_free(&rep[i]);
    }
    relay_stop();
    it_proc_stop(&hap);
    if (dir[0])
        it_rmtree(dir);
    return 0;
}

static void test_paused_delivery_never_lands_after_a_newer_one(void **state)
{
    char art[IT_DIGEST_LEN + 1], body[512], seen[64];
    struct mg_server *s;

    (void)state;
    need_pg();
    /* No reconciler: every runtime API connection is a delivery's (test_push_reconcile
     * covers the reconciler). */
    rep[0] = it_server_start(ARGS);
    rep[1] = it_server_join(rep[0], ARGS);
    relay.pids[0] = rep[0]->pid;
    relay.pids[1] = rep[1]->pid;
    s = rep[0];
    it_upload(s, "fence test model bytes", 22, art);
    it_model_create(s, s->admin_token, "fraud");
    for (int i = 1; i <= 3; i++)
        assert_int_equal(it_version_create(s, s->admin_token, "fraud", art, NULL), i);
    pc_gateway_put(s, "hap",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"fraud\"],\"aliases\":[\"production\"]}",
                          relay.port));
    it_release(s);

    /* Each round's stale version differs from what HAProxy holds (so the paused delivery
     * has something to write) and from the newer one. */
    for (int round = 0, cur = 1; round < ROUNDS; round++) {
        int old_v = cur % 3 + 1, new_v = old_v % 3 + 1, paused, other;
        unsigned long long before, before0, before1, repaired0, repaired1, repaired;
        const char *outcome = NULL;
        bool stale = false;
        int fd;
        json_int_t gen;
        struct it_resp *r;
        int64_t deadline;

        /* The stale delivery: held on its first connection, its replica paused there. */
        relay_arm();
        it_fmt(body, sizeof(body), "{\"version\":%d}", old_v);
        before0 = fenced(rep[0]);
        before1 = fenced(rep[1]);
        repaired0 = repairs(rep[0]);
        repaired1 = repairs(rep[1]);
        fd = raw_put(rep[round % 2], "/api/v1/models/fraud/aliases/production", body);
        paused = paused_replica();
        other = 1 - paused;
        before = paused == 0 ? before0 : before1;
        repaired = paused == 0 ? repaired0 : repaired1;
        relay_release();

        /* The newer generation, delivered by the other replica once the paused one's
         * lease is free (it counts as dead). */
        it_fmt(body, sizeof(body), "{\"version\":%d}", new_v);
        gen = it_alias_set(rep[other], rep[0]->admin_token, "fraud", "production", body);
        r = pc_wait_delivery(rep[other], "hap", "fraud", "production", gen, "in_sync", 60000);
        it_resp_free(rep[other], &r);
        if (!at_version(new_v, seen, sizeof(seen)))
            fail_msg("round %d: generation %lld in sync, HAProxy holds %s", round, (long long)gen,
                     seen);

        /* Wake the paused replica: it must stop (its fence), not finish its old delivery.
         * Should it have got past its fence before the pause after all, what it sent is
         * delivered over again: HAProxy ends at the newest generation either way. */
        if (kill(rep[paused]->pid, SIGCONT) != 0)
            fail_msg("SIGCONT: %s", strerror(errno));
        /* The older write's own answer (a 200, or a 503 when its replica was paused in the
         * middle of answering): what counts below is what HAProxy holds. */
        (void)raw_status(fd);
        deadline = it_deadline(30000);
        while (outcome == NULL) {
            bool at = at_version(new_v, seen, sizeof(seen));

            stale = stale || !at;
            if (at && fenced(rep[paused]) > before)
                outcome = stale ? "stopped (after a stale write, repaired)" : "stopped";
            else if (at && stale)
                outcome = "wrote its stale generation, which was repaired";
            else if (at && repairs(rep[paused]) > repaired)
                outcome = "wrote its stale generation, repaired before it was seen";
            if (outcome == NULL && it_now_ms() > deadline) {
                pc_dump_server_notes(rep[paused], 20);
                pc_dump_server_notes(rep[other], 20);
                fail_msg("round %d: HAProxy holds %s, want v%d only%s", round, seen, new_v,
                         stale ? " (the woken replica's stale write was never repaired)"
                               : " (the woken replica neither stopped nor wrote)");
            }
            it_pause_ms(10);
        }
        r = pc_wait_delivery(rep[other], "hap", "fraud", "production", gen, "in_sync", 20000);
        it_resp_free(rep[other], &r);
        if (!at_version(new_v, seen, sizeof(seen)))
            fail_msg("round %d: HAProxy holds %s at the end, want v%d only", round, seen, new_v);
        print_message("round %d: replica %d paused mid-delivery of v%d, woke after v%d: %s; "
                      "HAProxy at v%d\n",
                      round, paused, old_v, new_v, outcome, new_v);
        it_release(rep[0]);
        it_release(rep[1]);
        cur = new_v;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paused_delivery_never_lands_after_a_newer_one),
    };

    signal(SIGPIPE, SIG_IGN);
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
