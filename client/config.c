/*
 * config.c - where the CLI finds its server and token, and `modelgate login`.
 *
 * The config file is $XDG_CONFIG_HOME/modelgate/config.json (else
 * ~/.config/modelgate/config.json): {"url": "...", "token": "..."}, mode 0600
 * in a 0700 directory, written to a temp file and renamed. MODELGATE_URL and
 * MODELGATE_TOKEN override it. The token is never printed.
 */
#include "mgc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "../os/file.h"
#include "../base/util.h"

#define CONFIG_MAX ((size_t)64 << 10)
#define TOKEN_MAX 4096

/* The config directory and file paths. false with a message when no home is known. */
static bool config_paths(char dir[PATH_MAX], char file[PATH_MAX])
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;

    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(dir, PATH_MAX, "%s/modelgate", xdg);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(dir, PATH_MAX, "%s/.config/modelgate", home);
    else {
        mgc_fail("neither XDG_CONFIG_HOME nor HOME is set; set one, or use MODELGATE_URL and "
                 "MODELGATE_TOKEN");
        return false;
    }
    if (n < 0 || n >= PATH_MAX || snprintf(file, PATH_MAX, "%s/config.json", dir) >= PATH_MAX) {
        mgc_fail("the config path is too long");
        return false;
    }
    return true;
}

char *mgc_read_file(const char *path, size_t max, size_t *len)
{
    char *buf = NULL, *nb;
    size_t n = 0, cap = 0;
    ssize_t r;
    int fd;

    fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        mgc_fail("cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            cap = cap ? cap * 2 : 4096;
            if (cap > max + 2)
                cap = max + 2;
            if ((nb = realloc(buf, cap)) == NULL) {
                mgc_fail("out of memory");
                goto fail;
            }
            buf = nb;
        }
        r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            mgc_fail("cannot read '%s': %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max) {
            mgc_fail("'%s' is larger than %zu bytes", path, max);
            goto fail;
        }
    }
    if (buf == NULL && (buf = malloc(1)) == NULL) {
        mgc_fail("out of memory");
        goto fail;
    }
    buf[n] = '\0';
    if (fd != STDIN_FILENO)
        close(fd);
    if (len != NULL)
        *len = n;
    return buf;
fail:
    if (fd != STDIN_FILENO)
        close(fd);
    free(buf);
    return NULL;
}

char *mgc_url_clean(const char *url)
{
    size_t n = strlen(url), i, host;
    char *out;

    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        mgc_fail("the server URL must start with http:// or https://, not '%s'", url);
        return NULL;
    }
    host = url[4] == ':' ? 7 : 8;
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)url[i];
        if (ch <= 0x20 || ch == 0x7f || ch == '?' || ch == '#') {
            mgc_fail("the server URL must not hold spaces, control characters, '?' or '#'");
            return NULL;
        }
    }
    while (n > 0 && url[n - 1] == '/')
        n--;
    /* "http://" alone would become "http:" */
    if (n <= host || url[host] == '/') {
        mgc_fail("the server URL names no host: '%s'", url);
        return NULL;
    }
    if ((out = strndup(url, n)) == NULL)
        mgc_fail("out of memory");
    return out;
}

/* Trim surrounding whitespace in place and check what a token may hold. */
static bool token_clean(char *t)
{
    size_t n = strlen(t), s = 0, i;

    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' || t[n - 1] == '\t'))
        n--;
    while (s < n && (t[s] == ' ' || t[s] == '\t'))
        s++;
    memmove(t, t + s, n - s);
    t[n - s] = '\0';
    if (t[0] == '\0' || strlen(t) > TOKEN_MAX)
        return false;
    for (i = 0; t[i]; i++) {
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] == 0x7f)
            return false;
    }
    return true;
}

int mgc_config_load(struct mgc *c)
{
    const char *env_url = getenv("MODELGATE_URL"), *env_token = getenv("MODELGATE_TOKEN");
    char dir[PATH_MAX], file[PATH_MAX];
    json_t *cfg = NULL; /* NEW */
    json_error_t jerr;
    const char *s;
    struct stat st;
    char *text = NULL;
    int rc = MGC_ERR;

    if (env_url != NULL && env_url[0] != '\0' && env_token != NULL && env_token[0] != '\0')
        goto env;
    if (!config_paths(dir, file))
        return MGC_ERR;
    if (stat(file, &st) != 0) {
        if (errno != ENOENT)
            return mgc_fail("cannot read '%s': %s", file, strerror(errno));
        if (env_url == NULL || env_url[0] == '\0')
            return mgc_fail("no server configured: run `modelgate login --url URL --token-file "
                            "FILE`, or set MODELGATE_URL and MODELGATE_TOKEN");
        return mgc_fail("no token: set MODELGATE_TOKEN, or run `modelgate login`");
    }
    if ((st.st_mode & 077) != 0)
        fprintf(stderr, "modelgate: warning: '%s' is readable by others; chmod 600 it\n", file);
    if ((text = mgc_read_file(file, CONFIG_MAX, NULL)) == NULL)
        return MGC_ERR;
    cfg = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(cfg)) {
        mgc_fail("'%s' is not a JSON object; run `modelgate login` again", file);
        goto out;
    }
    if ((s = mgc_str(cfg, "url", NULL)) != NULL && (c->url = mgc_url_clean(s)) == NULL)
        goto out;
    if ((s = mgc_str(cfg, "token", NULL)) != NULL && (c->token = strdup(s)) == NULL) {
        mgc_fail("out of memory");
        goto out;
    }
env:
    if (env_url != NULL && env_url[0] != '\0') {
        free(c->url);
        if ((c->url = mgc_url_clean(env_url)) == NULL)
            goto out;
    }
    if (env_token != NULL && env_token[0] != '\0') {
        if (c->token != NULL)
            memset(c->token, 0, strlen(c->token));
        free(c->token);
        if ((c->token = strdup(env_token)) == NULL) {
            mgc_fail("out of memory");
            goto out;
        }
    }
    if (c->url == NULL || c->token == NULL) {
        mgc_fail("no %s configured: run `modelgate login`, or set %s", c->url ? "token" : "server",
                 c->url ? "MODELGATE_TOKEN" : "MODELGATE_URL");
        goto out;
    }
    if (!token_clean(c->token)) {
        mgc_fail("the token is empty or holds spaces or control characters");
        goto out;
    }
    rc = MGC_OK;
out:
    json_decref(cfg);
    if (text != NULL) {
        memset(text, 0, strlen(text));
        free(text);
    }
    return rc;
}

static size_t on_exchange_body(char *p, size_t size, size_t n, void *arg)
{
    struct mg_buf *b = arg;

    if (n && size > SIZE_MAX / n)
        return 0;
    return mg_buf_append(b, p, size * n) == MG_OK ? size * n : 0;
}

/*
 * Trusted publishing (docs/contract.md): exchange a CI system's OIDC token (MODELGATE_OIDC_TOKEN,
 * or the file MODELGATE_OIDC_TOKEN_FILE names) for a short-lived modelgate token at POST
 * /api/v1/tokens/exchange. Neither token is ever printed.
 */
static int oidc_exchange(struct mgc *c, const char *oidc)
{
    const char *env_url = getenv("MODELGATE_URL");
    json_t *req = NULL, *rep = NULL;
    char *body = NULL, *url = NULL;
    struct curl_slist *h = NULL;
    struct mg_buf out;
    CURL *curl = NULL;
    long status = 0;
    int rc = MGC_ERR;

    mg_buf_init(&out, 64 * 1024);
    if (env_url == NULL || env_url[0] == '\0')
        return mgc_fail("MODELGATE_OIDC_TOKEN needs MODELGATE_URL (the server to exchange it at)");
    if ((c->url = mgc_url_clean(env_url)) == NULL)
        return MGC_ERR;
    req = json_pack("{s:s, s:s, s:s}", "grant_type",
                    "urn:ietf:params:oauth:grant-type:token-exchange", "subject_token", oidc,
                    "subject_token_type", "urn:ietf:params:oauth:token-type:jwt");
    body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    if (body == NULL || asprintf(&url, "%s/api/v1/tokens/exchange", c->url) < 0) {
        url = NULL;
        mgc_fail("out of memory");
        goto out;
    }
    curl = curl_easy_init();
    h = curl_slist_append(NULL, "Content-Type: application/json");
    if (curl == NULL || h == NULL) {
        mgc_fail("cannot initialise libcurl");
        goto out;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_exchange_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 30000L);
    if (curl_easy_perform(curl) != CURLE_OK) {
        mgc_fail("cannot reach %s to exchange the OIDC token", c->url);
        goto out;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    rep = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
    if (status != 200 || !json_is_string(json_object_get(rep, "access_token"))) {
        const char *msg =
            json_string_value(json_object_get(json_object_get(rep, "error"), "message"));
        mgc_fail("the server refused the OIDC token exchange (HTTP %ld): %s", status,
                 msg ? msg : "no reason given");
        goto out;
    }
    if ((c->token = strdup(json_string_value(json_object_get(rep, "access_token")))) == NULL) {
        mgc_fail("out of memory");
        goto out;
    }
    rc = MGC_OK;
out:
    if (body)
        memset(body, 0, strlen(body));
    if (out.data)
        memset(out.data, 0, out.len);
    mg_buf_release(&out);
    curl_slist_free_all(h);
    if (curl)
        curl_easy_cleanup(curl);
    json_decref(req);
    json_decref(rep);
    free(body);
    free(url);
    return rc;
}

/* In the library rather than main.c: every command file calls it, and mg_client must link
 * without main.c (the unit tests). */
int mgc_connect(struct mgc *c)
{
    const char *oidc = getenv("MODELGATE_OIDC_TOKEN"), *file = getenv("MODELGATE_OIDC_TOKEN_FILE");
    const char *token = getenv("MODELGATE_TOKEN");
    char *text = NULL;
    int rc;

    /* A stored modelgate token wins; otherwise a CI token is exchanged by itself. */
    if ((token == NULL || token[0] == '\0') &&
        ((oidc != NULL && oidc[0] != '\0') || (file != NULL && file[0] != '\0'))) {
        if (oidc == NULL || oidc[0] == '\0') {
            if ((text = mgc_read_file(file, 16 * 1024, NULL)) == NULL)
                return MGC_ERR;
            text[strcspn(text, "\r\n")] = '\0';
            oidc = text;
        }
        rc = oidc_exchange(c, oidc);
        if (text) {
            memset(text, 0, strlen(text));
            free(text);
        }
        return rc == MGC_OK ? mgc_http_init(c) : rc;
    }
    rc = mgc_config_load(c);
    return rc == MGC_OK ? mgc_http_init(c) : rc;
}

/* Write the config atomically: temp file 0600 (O_EXCL), fsync, rename. */
static int config_save(const char *url, const char *token, char file_out[PATH_MAX])
{
    char dir[PATH_MAX];
    json_t *cfg = NULL; /* NEW */
    char *text = NULL;
    size_t len;
    int rc = MGC_ERR;

    if (!config_paths(dir, file_out))
        return MGC_ERR;
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        /* the parent (~/.config) may be missing too */
        char parent[PATH_MAX];
        char *slash;
        snprintf(parent, sizeof(parent), "%s", dir);
        slash = strrchr(parent, '/');
        if (slash != NULL && slash != parent)
            *slash = '\0';
        if (errno != ENOENT || (mkdir(parent, 0700) != 0 && errno != EEXIST) ||
            mkdir(dir, 0700) != 0)
            return mgc_fail("cannot create '%s': %s", dir, strerror(errno));
    }
    cfg = json_pack("{s:s, s:s}", "url", url, "token", token);
    text = cfg ? json_dumps(cfg, JSON_INDENT(2)) : NULL;
    if (text == NULL) {
        mgc_fail("out of memory");
        goto out;
    }
    len = strlen(text);
    {
        /* the file ends with a newline; written whole, 0600, or not at all (os/file.c) */
        char *withnl = malloc(len + 2);
        struct mg_error err;

        if (withnl == NULL) {
            mgc_fail("out of memory");
            goto out;
        }
        memcpy(withnl, text, len);
        memcpy(withnl + len, "\n", 2);
        if (mg_file_write_atomic(file_out, withnl, len + 1, 0600, &err) != MG_OK) {
            memset(withnl, 0, len + 1);
            free(withnl);
            mgc_fail("%s", err.message);
            goto out;
        }
        memset(withnl, 0, len + 1);
        free(withnl);
    }
    rc = MGC_OK;
out:
    json_decref(cfg);
    if (text != NULL) {
        memset(text, 0, strlen(text));
        free(text);
    }
    return rc;
}

int mgc_cmd_login(struct mgc *c, const struct mgc_args *a)
{
    const char *url = mgc_opt(a, "url"), *token_file = mgc_opt(a, "token-file");
    char file[PATH_MAX];
    json_t *who = NULL, *roles; /* NEW, BORROWED */
    size_t i;
    int rc;

    if (url == NULL || token_file == NULL)
        return mgc_usage(c, "login needs --url URL and --token-file FILE");
    if ((c->url = mgc_url_clean(url)) == NULL)
        return MGC_ERR;
    if ((c->token = mgc_read_file(token_file, TOKEN_MAX + 64, NULL)) == NULL)
        return MGC_ERR;
    if (!token_clean(c->token))
        return mgc_fail("'%s' does not hold a token (one line, no spaces)", token_file);
    if ((rc = mgc_http_init(c)) != MGC_OK)
        return rc;
    if ((rc = mgc_call(c, "GET", "/api/v1/whoami", NULL, &who)) != MGC_OK)
        return rc;
    if ((rc = config_save(c->url, c->token, file)) != MGC_OK)
        goto out;
    if (c->json) {
        rc = mgc_print_json(who);
        goto out;
    }
    printf("logged in to %s as %s (", c->url, mgc_str(who, "name", "?"));
    roles = json_object_get(who, "roles");
    for (i = 0; i < json_array_size(roles); i++)
        printf("%s%s", i ? ", " : "", json_string_value(json_array_get(roles, i)));
    printf("); saved in %s\n", file);
out:
    json_decref(who);
    return rc;
}
