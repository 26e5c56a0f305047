/*
 * runner_common.c - see runner_common.h.
 */
#include "runner_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "push_common.h"

/* ---- profiles ----------------------------------------------------------- */

void rc_write_script(const char *dir, const char *name, const char *text, const char *mark)
{
    char path[IT_PATH_MAX], out[8192];
    size_t k = 0;

    for (const char *p = text; *p;) {
        const char *rep = NULL;
        size_t skip = 1;

        if (strncmp(p, "@DIR@", 5) == 0) {
            rep = dir;
            skip = 5;
        } else if (strncmp(p, "@MARK@", 6) == 0) {
            rep = mark;
            skip = 6;
        }
        if (rep != NULL) {
            if (k + strlen(rep) >= sizeof(out))
                fail_msg("script %s too long", name);
            memcpy(out + k, rep, strlen(rep));
            k += strlen(rep);
        } else {
            if (k + 1 >= sizeof(out))
                fail_msg("script %s too long", name);
            out[k++] = *p;
        }
        p += skip;
    }
    out[k] = '\0';
    it_write_file(it_fmt(path, sizeof(path), "%s/%s", dir, name), out);
}

void rc_profile_arg(char *out, size_t n, const char *dir, const char *name, const char *extra)
{
    it_fmt(out, n, "--smoke-profile=%s=/bin/sh %s/%s.sh {model_dir} {output}%s", name, dir, name,
           extra);
}

/* ---- archives ----------------------------------------------------------- */

void *rc_tar(const struct rc_entry *entries, size_t n, size_t *len)
{
    size_t cap = 1u << 20, used = 0;
    void *buf = malloc(cap);
    struct archive *a = archive_write_new();

    if (buf == NULL || a == NULL)
        fail_msg("out of memory");
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_open_memory(a, buf, cap, &used) != ARCHIVE_OK)
        fail_msg("libarchive: %s", archive_error_string(a));
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        size_t clen = entries[i].content ? strlen(entries[i].content) : 0;

        archive_entry_set_pathname(e, entries[i].path);
        if (entries[i].symlink != NULL) {
            archive_entry_set_filetype(e, AE_IFLNK);
            archive_entry_set_symlink(e, entries[i].symlink);
            archive_entry_set_perm(e, 0777);
        } else if (entries[i].content == NULL) {
            archive_entry_set_filetype(e, AE_IFDIR);
            archive_entry_set_perm(e, 0755);
        } else {
            archive_entry_set_filetype(e, AE_IFREG);
            archive_entry_set_perm(e, 0644);
            archive_entry_set_size(e, (la_int64_t)clen);
        }
        archive_entry_set_mtime(e, 1700000000, 0);
        if (archive_write_header(a, e) != ARCHIVE_OK)
            fail_msg("libarchive header %s: %s", entries[i].path, archive_error_string(a));
        if (clen > 0 && archive_write_data(a, entries[i].content, clen) != (la_ssize_t)clen)
            fail_msg("libarchive data %s: %s", entries[i].path, archive_error_string(a));
        archive_entry_free(e);
    }
    if (archive_write_close(a) != ARCHIVE_OK)
        fail_msg("libarchive close: %s", archive_error_string(a));
    archive_write_free(a);
    *len = used;
    return buf;
}

/* ---- versions and aliases ----------------------------------------------- */

json_t *rc_smoke_spec(const char *profile, double max_p95_ms, json_int_t parameters,
                      const char *precision)
{
    json_t *extra = NULL;

    if (profile != NULL || max_p95_ms > 0) {
        json_t *smoke = json_object();
        if (profile != NULL)
            json_object_set_new(smoke, "profile", json_string(profile));
        if (max_p95_ms > 0)
            json_object_set_new(smoke, "max_p95_ms", json_real(max_p95_ms));
        extra = json_pack("{so}", "smoke", smoke);
    }
    if (parameters > 0) {
        if (extra == NULL)
            extra = json_object();
        json_object_set_new(extra, "resources",
                            json_pack("{sI ss}", "parameters", parameters, "precision",
                                      precision ? precision : "fp16"));
    }
    return extra;
}

void rc_alias_in_sync(struct mg_server *s, const char *model, const char *alias)
{
    int64_t deadline = it_deadline(10000);

    for (;;) {
        struct it_resp *r = it_alias_get(s, s->admin_token, model, alias);

        if (pc_all_in_sync(r->json) && pc_alias_delivery(r->json, "runner") != NULL) {
            it_resp_free(s, &r);
            return;
        }
        if (it_now_ms() > deadline)
            fail_msg("%s/%s: not every gateway (runner included) is in sync: %s", model, alias,
                     r->body);
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
}

json_t *rc_event(const json_t *promotion, const char *type)
{
    json_t *e, *found = NULL;
    size_t i;

    json_array_foreach(json_object_get(promotion, "events"), i, e)
    {
        const char *t = json_string_value(json_object_get(e, "type"));
        if (t && strcmp(t, type) == 0)
            found = e;
    }
    return found;
}

/* ---- smoke tests -------------------------------------------------------- */

struct it_resp *rc_smoke_post(struct mg_server *s, const char *token, const char *model,
                              json_int_t version, const char *body, char id[64])
{
    char path[256];
    struct it_resp *r =
        it_jreq(s, "POST",
                it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld/smoke-tests", model,
                       (long long)version),
                token, body);

    it_expect_status(s, r, 202);
    snprintf(id, 64, "%s", it_jstr(r->json, "id"));
    return r;
}

struct it_resp *rc_smoke_list(struct mg_server *s, const char *model, json_int_t version)
{
    char path[256];
    struct it_resp *r =
        it_get(s,
               it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld/smoke-tests", model,
                      (long long)version),
               s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

json_t *rc_smoke_find(const json_t *list, const char *id)
{
    json_t *t;
    size_t i;

    json_array_foreach(json_object_get(list, "items"), i, t)
    {
        const char *tid = json_string_value(json_object_get(t, "id"));
        if (tid && strcmp(tid, id) == 0)
            return t;
    }
    return NULL;
}

bool rc_smoke_final(const char *state)
{
    return strcmp(state, "passed") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "error") == 0;
}

json_t *rc_smoke_wait_at(struct mg_server *s, const char *model, json_int_t version, const char *id,
                         int64_t timeout_ms, const char *file, int line)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = rc_smoke_list(s, model, version);
        json_t *t = rc_smoke_find(r->json, id);

        if (t != NULL && rc_smoke_final(it_jstr(t, "state")))
            return t;
        if (it_now_ms() > deadline) {
            print_error("smoke test %s of %s v%lld did not finish: %.4000s\n", id, model,
                        (long long)version, r->body);
            it_server_dump_log(s, 3000);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
}

json_t *rc_smoke_wait_state_at(struct mg_server *s, const char *model, json_int_t version,
                               const char *state, int64_t timeout_ms, const char *file, int line)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = rc_smoke_list(s, model, version);
        json_t *t = json_array_get(json_object_get(r->json, "items"), 0);

        if (t != NULL && strcmp(it_jstr(t, "state"), state) == 0)
            return t;
        if (it_now_ms() > deadline) {
            print_error("%s v%lld: no smoke test %s: %.4000s\n", model, (long long)version, state,
                        r->body);
            it_server_dump_log(s, 3000);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
}

void rc_runner_idle(struct mg_server *s, int64_t timeout_ms)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = it_get(s, "/api/v1/runner", s->admin_token);

        it_expect_status(s, r, 200);
        if (it_jint(r->json, "queued") == 0 && it_jint(r->json, "running") == 0) {
            it_resp_free(s, &r);
            return;
        }
        if (it_now_ms() > deadline)
            fail_msg("the runner is still busy: %s", r->body);
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
}

void rc_expect_smoke_shape_at(const json_t *t, const char *file, int line)
{
    static const char *const keys[] = {"id",          "state",
                                       "profile",     "gpu",
                                       "started_at",  "finished_at",
                                       "duration_ms", "exit_code",
                                       "latency_ms",  "checks",
                                       "log_tail",    "reason",
                                       "trigger",     "peak_gpu_memory_mib",
                                       NULL};
    json_t *v;
    char *text;

    for (size_t i = 0; keys[i]; i++) {
        if (json_object_get(t, keys[i]) == NULL) {
            text = json_dumps(t, JSON_COMPACT);
            print_error("SmokeTest lacks '%s': %s\n", keys[i], text);
            free(text);
            _fail(file, line);
        }
    }
    if (strncmp(it_jstr_at(t, "id", file, line), "smk_", 4) != 0)
        fail_msg("SmokeTest id %s", json_string_value(json_object_get(t, "id")));
    it_expect_rfc3339_at(it_jstr_at(t, "started_at", file, line), file, line);
    it_expect_rfc3339_at(it_jstr_at(t, "finished_at", file, line), file, line);
    if (strcmp(it_jstr_at(t, "started_at", file, line), it_jstr_at(t, "finished_at", file, line)) >
        0)
        fail_msg("started_at is after finished_at");
    if (it_jint_at(t, "duration_ms", file, line) < 0)
        fail_msg("negative duration_ms");
    v = json_object_get(t, "gpu");
    if (!json_is_null(v) && !json_is_object(v))
        fail_msg("gpu is neither null nor an object");
    v = json_object_get(t, "latency_ms");
    if (!json_is_null(v) && !json_is_object(v))
        fail_msg("latency_ms is neither null nor an object");
    it_jarr_at(t, "checks", file, line);
    it_jstr_at(t, "log_tail", file, line);
    it_jstr_at(t, "trigger", file, line);
    v = json_object_get(t, "reason");
    if (!json_is_null(v) && !json_is_string(v))
        fail_msg("reason is neither null nor a string");
}

void rc_expect_contains_at(const char *text, const char *part, const char *file, int line)
{
    if (text != NULL && strstr(text, part) != NULL)
        return;
    print_error("'%s' should contain '%s'\n", text ? text : "(null)", part);
    _fail(file, line);
}

const char *rc_reason(const json_t *t)
{
    return it_jstr(t, "reason");
}
