/*
 * test_pg_role.c - modelgated on PostgreSQL as the role a DBA hands out: an ordinary
 * one (not a superuser, cannot create databases or roles) that owns its database.
 *
 *   - it starts, migrates and serves (a start that set a superuser-only parameter,
 *     lc_messages, failed with "permission denied to set parameter");
 *   - a role that must give a password, with none in the URL: libpq takes it from
 *     PGPASSWORD or from ~/.pgpass; without either, or with a wrong one in the URL, the
 *     start fails with one line naming the database and never the password.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_pg_role; scripts/pg-test.sh makes
 * members of mg_password give a password); on SQLite every test skips.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

static void need_pg(void)
{
    if (!it_on_postgres())
        it_not_applicable("a test of PostgreSQL roles; it runs as pg_integration_test_pg_role");
}

/* The first column of the first row of sql on url (libpq), into out. */
static void query1(const char *url, const char *sql, char *out, size_t n)
{
    PGconn *c = PQconnectdb(url);
    PGresult *r;

    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("libpq %s: %s", url, PQerrorMessage(c));
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
}

/* The server the harness starts connects as an ordinary role owning its database, and
 * works: migrations, a model, a version with metrics, the audit chain. */
static void test_ordinary_role_serves(void **state)
{
    struct mg_server *s;
    struct it_resp *r;
    char flags[64];

    (void)state;
    need_pg();
    s = it_server_start(NULL);
    query1(s->database,
           "SELECT current_user || ' ' || rolsuper || rolcreatedb || rolcreaterole || "
           "(SELECT pg_get_userbyid(datdba) = current_user FROM pg_database "
           "WHERE datname = current_database()) FROM pg_roles WHERE rolname = current_user",
           flags, sizeof(flags));
    assert_string_equal(flags, IT_PG_ROLE " falsefalsefalsetrue"); /* no superuser, createdb,
                                                      createrole; owns its database */
    it_model_create(s, s->admin_token, "fraud");
    r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    it_expect_status(s, r, 200);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
    it_resp_free(s, &r);
    it_server_stop(s);
    it_server_free(&s);
}

/* modelgated with --database url: it exits 1 within the deadline; its log (one line). */
static char *start_fails(const char *dir, const char *url)
{
    static int seq;
    char data[IT_PATH_MAX], log[IT_PATH_MAX];
    struct it_proc p;
    int status = 0;
    int64_t deadline = it_deadline(20000);
    char *text;

    seq++;
    it_fmt(data, sizeof(data), "%s/data-fail-%d", dir, seq);
    it_fmt(log, sizeof(log), "%s/fail-%d.log", dir, seq);
    it_proc_spawn(&p, "modelgated",
                  (const char *const[]){getenv("MODELGATED"), "--data-dir", data, "--listen",
                                        "127.0.0.1:0", "--database", url, NULL},
                  log);
    while (!it_proc_exited(&p, &status)) {
        if (it_now_ms() > deadline)
            fail_msg("modelgated kept running without its database's password");
        it_pause_ms(20);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    text = it_read_file(log, NULL);
    print_message("start-up says: %s", text);
    assert_int_equal(strchr(text, '\n') - text + 1, (long)strlen(text)); /* one line */
    return text;
}

/* Started with url, the server answers /readyz. */
static void start_serves(const char *url)
{
    struct mg_server *s = it_server_start((const char *const[]){"--database", url, NULL});
    struct it_resp *r = it_get(s, "/readyz", NULL);

    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
    it_server_stop(s);
    it_server_free(&s);
}

/* A role that must give a password, none in the URL: PGPASSWORD and ~/.pgpass work. */
static void test_password_from_environment(void **state)
{
    char dir[IT_PATH_MAX], role[48], db[48], secret[48], sql[256], url[IT_PATH_MAX + 128];
    char bad[IT_PATH_MAX + 160], path[IT_PATH_MAX + 16], line[256], *text;
    const char *home = getenv("HOME");
    char *saved_home;

    (void)state;
    need_pg();
    saved_home = home ? strdup(home) : NULL;
    unsetenv("PGPASSWORD");
    unsetenv("PGPASSFILE");
    it_mkdtemp(dir, "pg-role");
    it_fmt(role, sizeof(role), "it_pw_%d", (int)getpid());
    it_fmt(db, sizeof(db), "it_pwdb_%d", (int)getpid());
    it_fmt(secret, sizeof(secret), "s3cr3t-%d-pw", (int)getpid());
    it_pg_admin(it_fmt(sql, sizeof(sql),
                       "CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                       "PASSWORD '%s' IN ROLE mg_password",
                       role, secret));
    it_pg_admin(it_fmt(sql, sizeof(sql), "CREATE DATABASE %s OWNER %s", db, role));
    it_fmt(url, sizeof(url), "postgresql:///%s?host=%s&user=%s", db, getenv("MG_PG_DIR"), role);

    /* No password anywhere: refused, naming the database. */
    setenv("HOME", dir, 1); /* no ~/.pgpass there yet */
    text = start_fails(dir, url);
    assert_non_null(strstr(text, "cannot connect to the database"));
    assert_non_null(strstr(text, db));
    assert_non_null(strstr(text, "password"));
    free(text);

    /* A wrong one in the URL: refused, naming the database, never the password. */
    it_fmt(bad, sizeof(bad), "postgresql://%s:wrong-%s@/%s?host=%s", role, secret, db,
           getenv("MG_PG_DIR"));
    text = start_fails(dir, bad);
    assert_non_null(strstr(text, db));
    assert_null(strstr(text, secret));
    free(text);

    /* PGPASSWORD. */
    setenv("PGPASSWORD", secret, 1);
    start_serves(url);
    unsetenv("PGPASSWORD");

    /* ~/.pgpass (mode 0600, or libpq ignores it), on a fresh database (a server writes
     * admin.token only where it bootstrapped the database). */
    it_pg_admin(it_fmt(sql, sizeof(sql), "DROP DATABASE %s WITH (FORCE)", db));
    it_pg_admin(it_fmt(sql, sizeof(sql), "CREATE DATABASE %s OWNER %s", db, role));
    it_fmt(path, sizeof(path), "%s/.pgpass", dir);
    it_write_file(path, it_fmt(line, sizeof(line), "*:*:%s:%s:%s\n", db, role, secret));
    if (chmod(path, 0600) != 0)
        fail_msg("chmod %s", path);
    start_serves(url);

    if (saved_home)
        setenv("HOME", saved_home, 1);
    else
        unsetenv("HOME");
    free(saved_home);
    it_pg_admin(it_fmt(sql, sizeof(sql), "DROP DATABASE %s WITH (FORCE)", db));
    it_pg_admin(it_fmt(sql, sizeof(sql), "DROP ROLE %s", role));
    it_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordinary_role_serves),
        cmocka_unit_test(test_password_from_environment),
    };

    return it_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
