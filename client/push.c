/*
 * push.c - `modelgate push MODEL PATH ...`: pack or hash the artifact, stream
 * it to POST /api/v1/blobs with X-Content-Digest, then register the version
 * with POST /api/v1/models/{model}/versions.
 */
#include "mgc.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../os/file.h"
#include "../base/util.h"

#define META_MAX ((size_t)16 << 20)

/* Load a local JSON object file (capped). NEW reference, or NULL with a message. */
static json_t *load_object(const char *path, const char *what)
{
    json_error_t jerr;
    json_t *v;
    size_t len;
    char *text = mgc_read_file(path, META_MAX, &len);

    if (text == NULL)
        return NULL;
    v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (v == NULL) {
        mgc_fail("%s '%s' is not valid JSON: %s (line %d)", what, path, jerr.text, jerr.line);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        mgc_fail("%s '%s' must hold a JSON object", what, path);
        return NULL;
    }
    return v;
}

/* The object member `key` of body, created when missing. BORROWED, or NULL. */
static json_t *member_object(json_t *body, const char *key)
{
    json_t *o = json_object_get(body, key);

    if (json_is_object(o))
        return o;
    o = json_object();
    if (o == NULL || json_object_set_new(body, key, o) != 0)
        return NULL;
    return o;
}

/* --metrics FILE or --metric k=v ... into body.metrics. */
static int add_metrics(struct mgc *c, const struct mgc_args *a, json_t *body)
{
    const char *file = mgc_opt(a, "metrics"), *kv, *eq;
    json_t *m, *from, *v; /* BORROWED, NEW, BORROWED */
    const char *k;
    char *end, name[256];
    double d;
    int i;

    if (file != NULL && mgc_opt(a, "metric") != NULL)
        return mgc_usage(c, "give either --metrics FILE.json or --metric k=v, not both");
    if (file == NULL && mgc_opt(a, "metric") == NULL)
        return MGC_OK;
    if ((m = member_object(body, "metrics")) == NULL)
        return mgc_fail("out of memory");
    if (file != NULL) {
        if ((from = load_object(file, "metrics file")) == NULL)
            return MGC_ERR;
        json_object_foreach(from, k, v)
        {
            if (!json_is_number(v)) {
                json_decref(from);
                return mgc_fail("metric '%s' in '%s' is not a number", k, file);
            }
        }
        json_object_update(m, from);
        json_decref(from);
        return MGC_OK;
    }
    for (i = 0; (kv = mgc_opt_nth(a, "metric", i)) != NULL; i++) {
        eq = strchr(kv, '=');
        if (eq == NULL || eq == kv || (size_t)(eq - kv) >= sizeof(name))
            return mgc_usage(c, "--metric takes name=value, not '%s'", kv);
        memcpy(name, kv, (size_t)(eq - kv));
        name[eq - kv] = '\0';
        errno = 0;
        d = strtod(eq + 1, &end);
        if (eq[1] == '\0' || *end != '\0' || errno != 0 || !isfinite(d))
            return mgc_usage(c, "metric '%s' needs a finite number, not '%s'", name, eq + 1);
        if (json_object_set_new(m, name, json_real(d)) != 0)
            return mgc_fail("out of memory");
    }
    return MGC_OK;
}

/* --dataset sha256:HEX:NAME:ROLE ... appended to body.datasets. */
static int add_datasets(struct mgc *c, const struct mgc_args *a, json_t *body)
{
    static const char *const roles[] = {"train", "validation", "test", "eval", NULL};
    json_t *list = json_object_get(body, "datasets"), *d; /* BORROWED, NEW */
    const char *spec, *role, *name;
    size_t name_len;
    int i, r;

    if (mgc_opt(a, "dataset") == NULL)
        return MGC_OK;
    if (!json_is_array(list)) {
        list = json_array();
        if (list == NULL || json_object_set_new(body, "datasets", list) != 0)
            return mgc_fail("out of memory");
    }
    for (i = 0; (spec = mgc_opt_nth(a, "dataset", i)) != NULL; i++) {
        /* the digest itself holds a ':', so: 71 bytes of digest, ':', name, ':', role */
        if (strlen(spec) < 73 || !mg_valid_digest(spec, 71) || spec[71] != ':' ||
            (role = strrchr(spec + 72, ':')) == NULL)
            return mgc_usage(c, "--dataset takes sha256:HEX:NAME:ROLE, not '%s'", spec);
        name = spec + 72;
        name_len = (size_t)(role - name);
        role++;
        for (r = 0; roles[r] && strcmp(roles[r], role) != 0; r++)
            ;
        if (roles[r] == NULL)
            return mgc_usage(c, "dataset role '%s' is not train, validation, test or eval", role);
        d = json_pack("{s:s%, s:s}", "digest", spec, (size_t)71, "role", role);
        if (d != NULL && name_len > 0 &&
            json_object_set_new(d, "name", json_stringn(name, name_len)) != 0) {
            json_decref(d);
            d = NULL;
        }
        if (d == NULL || json_array_append_new(list, d) != 0)
            return mgc_fail("out of memory or invalid UTF-8 in '%s'", spec);
    }
    return MGC_OK;
}

/* The VersionCreate body (without the artifact), from --meta and the options. */
static int build_version(struct mgc *c, const struct mgc_args *a, json_t **out)
{
    const char *meta = mgc_opt(a, "meta"), *image = mgc_opt(a, "image");
    const char *run_id = mgc_opt(a, "run-id"), *commit = mgc_opt(a, "source-commit");
    json_t *body, *src; /* NEW, BORROWED */
    int rc = MGC_ERR;

    *out = NULL;
    if (image != NULL && !mg_valid_image_ref(image, strlen(image)))
        return mgc_usage(c,
                         "--image must be pinned by digest: REPOSITORY[:TAG]@sha256:HEX, not "
                         "'%s'",
                         image);
    body = meta ? load_object(meta, "--meta") : json_object();
    if (body == NULL)
        return meta ? MGC_ERR : mgc_fail("out of memory");
    if ((rc = add_metrics(c, a, body)) != MGC_OK || (rc = add_datasets(c, a, body)) != MGC_OK)
        goto out;
    rc = MGC_ERR;
    if (image != NULL && json_object_set_new(body, "image", json_string(image)) != 0)
        goto nomem;
    if (run_id != NULL && json_object_set_new(body, "run_id", json_string(run_id)) != 0)
        goto nomem;
    if (commit != NULL) {
        if ((src = member_object(body, "source")) == NULL ||
            json_object_set_new(src, "commit", json_string(commit)) != 0)
            goto nomem;
    }
    *out = body;
    return MGC_OK;
nomem:
    mgc_fail("out of memory, or an option value is not valid UTF-8");
out:
    json_decref(body);
    return rc;
}

/* POST /api/v1/models {"name"}; a model that already exists is fine. */
static int create_model(struct mgc *c, const char *model)
{
    struct mgc_reply rep;
    json_t *body = json_pack("{s:s}", "name", model);
    int rc;

    if (body == NULL)
        return mgc_fail("out of memory");
    rc = mgc_http_json(c, "POST", "/api/v1/models", body, &rep);
    json_decref(body);
    if (rc == MGC_OK && (rep.http == 201 || rep.http == 409))
        rc = MGC_OK;
    else
        rc = mgc_reply_fail(&rep, "cannot create the model");
    mgc_reply_release(&rep);
    return rc;
}

/* Pack or open PATH as an upload: *fd positioned anywhere, digest and size set. */
static int prepare_artifact(const char *path, bool tty, int *fd_out, char hex[65], uint64_t *size,
                            bool *packed)
{
    struct mg_error err;
    struct stat st;
    int fd, rc;

    *fd_out = -1;
    if (stat(path, &st) != 0)
        return mgc_fail("cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        *packed = true;
        if (tty)
            fprintf(stderr, "packing %s ...\n", path);
        if ((fd = mgc_temp_fd()) < 0)
            return MGC_ERR;
        rc = mgc_tar_pack(path, fd, hex, size);
    } else if (S_ISREG(st.st_mode)) {
        *packed = false;
        if (tty)
            fprintf(stderr, "hashing %s ...\n", path);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return mgc_fail("cannot open '%s': %s", path, strerror(errno));
        memset(&err, 0, sizeof(err));
        rc = mg_file_sha256(path, hex, size, &err) == MG_OK ? MGC_OK : mgc_fail("%s", err.message);
    } else {
        return mgc_fail("'%s' is neither a file nor a directory", path);
    }
    if (rc != MGC_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return MGC_OK;
}

int mgc_cmd_push(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[0], *path = a->pos[1];
    char hex[65], digest[72], vpath[256], sd[24], hb[32];
    json_t *body = NULL, *blob = NULL, *version = NULL; /* NEW */
    uint64_t size = 0;
    bool packed = false;
    int fd = -1, rc;

    if (!mgc_check_model(c, model))
        return MGC_USAGE;
    if ((rc = build_version(c, a, &body)) != MGC_OK)
        return rc;
    if ((rc = mgc_connect(c)) != MGC_OK)
        goto out;
    if (mgc_flag(a, "create-model") && (rc = create_model(c, model)) != MGC_OK)
        goto out;
    if ((rc = prepare_artifact(path, c->tty, &fd, hex, &size, &packed)) != MGC_OK)
        goto out;
    snprintf(digest, sizeof(digest), "sha256:%s", hex);
    if ((rc = mgc_http_upload(c, fd, size, digest, "uploading", &blob)) != MGC_OK)
        goto out;
    if (strcmp(mgc_str(blob, "digest", ""), digest) != 0) {
        rc = mgc_fail("the server stored %s, not %s; not registering a version",
                      mgc_str(blob, "digest", "?"), digest);
        goto out;
    }
    if (json_object_set_new(body, "artifact", json_string(digest)) != 0) {
        rc = mgc_fail("out of memory");
        goto out;
    }
    snprintf(vpath, sizeof(vpath), "/api/v1/models/%s/versions", model);
    if ((rc = mgc_call(c, "POST", vpath, body, &version)) != MGC_OK)
        goto out;
    if (c->json) {
        rc = mgc_print_json(version);
        goto out;
    }
    mgc_short_digest(digest, sd);
    mgc_human_bytes((double)size, hb);
    fprintf(stderr, "pushed %s v%lld: %s (%s%s)\n", model,
            (long long)json_integer_value(json_object_get(version, "version")), sd, hb,
            packed ? ", packed as tar" : "");
    printf("%lld\n", (long long)json_integer_value(json_object_get(version, "version")));
out:
    if (fd >= 0)
        close(fd);
    json_decref(body);
    json_decref(blob);
    json_decref(version);
    return rc;
}
