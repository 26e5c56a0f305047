/*
 * archive_names.c - entry names: normalising them under the path rules (no absolute paths,
 * no '..', no control characters, valid UTF-8, length caps), refusing special file types,
 * and the lists the inspection keeps. See archive.h.
 */
#include "archive_int.h"

/* ---- names ---------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
size_t art_utf8_len(const unsigned char *p, size_t n)
{
    size_t len, i;
    uint32_t cp;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
        cp = p[0] & 0x1f;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        cp = p[0] & 0x0f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        cp = p[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    /* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/*
 * A printable rendering of n bytes for error messages: valid UTF-8 is kept,
 * other bytes become \xNN, and long names are cut with "...".
 */
void art_name_show(const char *s, size_t n, char out[SHOW_BUF])
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0;

    while (i < n) {
        size_t len = art_utf8_len(p + i, n - i);
        if (len == 1 && (p[i] < 0x20 || p[i] == 0x7f))
            len = 0;
        if (o + (len ? len : 4) > SHOW_MAX) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (len) {
            memcpy(out + o, p + i, len);
            o += len;
            i += len;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[p[i] >> 4];
            out[o++] = hex[p[i] & 15];
            i++;
        }
    }
    out[o] = '\0';
}

/* Why the entry name raw[0..n) cannot be accepted, or NULL when it can. */
const char *art_path_problem(const char *raw, size_t n)
{
    const unsigned char *p = (const unsigned char *)raw;
    size_t i, len, start;

    if (n == 0)
        return "has an empty path; remove it from the archive";
    for (i = 0; i < n; i += len) {
        len = art_utf8_len(p + i, n - i);
        if (len == 0)
            return "has a path that is not valid UTF-8; rename it";
        if (p[i] < 0x20 || p[i] == 0x7f)
            return "has a control character in its path; rename it";
        if (p[i] == '\\')
            return "has a backslash in its path; use '/' as the separator";
    }
    if (raw[0] == '/')
        return "has an absolute path; store paths relative to the archive root";
    for (i = 0; i < n; i++) {
        start = i;
        while (i < n && raw[i] != '/')
            i++;
        if (i - start == 2 && raw[start] == '.' && raw[start + 1] == '.')
            return "escapes the archive root; remove it from the archive";
    }
    return NULL;
}

/*
 * Check the entry name raw[0..n) and return its normalised form in *norm
 * (malloc'd; "" for the archive root itself). Leading "./", "//", "/./" and a
 * trailing "/" go away; anything that could land outside the extraction
 * directory, or could not be carried in JSON, is refused.
 */
enum mg_code art_path_normalise(const char *raw, size_t n, const struct store_archive_limits *lim,
                                char **norm, struct mg_error *err)
{
    char show[SHOW_BUF];
    const char *why = art_path_problem(raw, n);
    size_t i, len, start, o = 0;
    char *out;

    *norm = NULL;
    art_name_show(raw, n, show);
    if (why != NULL) {
        mg_fail(err, MG_EINVAL, NULL, "archive entry '%s' %s", show, why);
        return MG_EINVAL;
    }
    out = malloc(n + 1);
    if (out == NULL) {
        mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        return MG_ENOMEM;
    }
    for (i = 0; i <= n; i++) {
        start = i;
        while (i < n && raw[i] != '/')
            i++;
        len = i - start;
        if (len == 0 || (len == 1 && raw[start] == '.'))
            continue;
        if (o > 0)
            out[o++] = '/';
        memcpy(out + o, raw + start, len);
        o += len;
    }
    out[o] = '\0';
    if (o > lim->max_path_len) {
        free(out);
        mg_fail(err, MG_EINVAL, NULL,
                "archive entry '%s' has a path longer than %zu bytes; shorten it", show,
                lim->max_path_len);
        return MG_EINVAL;
    }
    *norm = out;
    return MG_OK;
}

/* What an entry of this AE_IFMT type is called, or NULL for a file or directory. */
const char *art_special_type_name(unsigned type)
{
    switch (type) {
    case AE_IFREG:
    case AE_IFDIR:
        return NULL;
    case AE_IFLNK:
        return "a symbolic link";
    case AE_IFCHR:
        return "a character device";
    case AE_IFBLK:
        return "a block device";
    case AE_IFIFO:
        return "a FIFO";
    case AE_IFSOCK:
        return "a socket";
    default:
        return "of an unsupported type";
    }
}

enum mg_code art_reject_type(const char *show, unsigned type, struct mg_error *err)
{
    if (type == AE_IFLNK)
        return mg_fail(err, MG_EINVAL, NULL,
                       "archive entry '%s' is a symbolic link; links are not allowed, store the "
                       "file it points to instead",
                       show);
    return mg_fail(err, MG_EINVAL, NULL,
                   "archive entry '%s' is %s; only regular files and directories are allowed, "
                   "remove it from the archive",
                   show, art_special_type_name(type));
}

void art_name_list_release(struct name_list *l)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* Append s (taking ownership; freed on failure). */
enum mg_code art_name_list_push(struct name_list *l, char *s, struct mg_error *err)
{
    char **nv;
    size_t ncap;

    if (l->n == l->cap) {
        ncap = l->cap ? l->cap * 2 : 64;
        if (ncap > SIZE_MAX / sizeof(*nv) || (nv = realloc(l->v, ncap * sizeof(*nv))) == NULL) {
            free(s);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = s;
    return MG_OK;
}

int art_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Files in the order the signing manifest lists them (sign_path_cmp). */
int art_cmp_file(const void *a, const void *b)
{
    return sign_path_cmp(((const struct store_archive_file *)a)->path,
                         ((const struct store_archive_file *)b)->path);
}
