/*
 * util.c - see util.h.
 */
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

void mg_buf_init(struct mg_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

enum mg_code mg_buf_append(struct mg_buf *b, const void *p, size_t n)
{
    size_t need;
    char *nd;

    if (n > b->max || b->len > b->max - n)
        return MG_ETOOBIG;
    need = b->len + n + 1;
    if (need > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < need)
            ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
        nd = realloc(b->data, ncap);
        if (nd == NULL)
            return MG_ENOMEM;
        b->data = nd;
        b->cap = ncap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return MG_OK;
}

enum mg_code mg_buf_puts(struct mg_buf *b, const char *s)
{
    return mg_buf_append(b, s, strlen(s));
}

void mg_buf_release(struct mg_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void mg_hex_encode(const uint8_t *in, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool mg_hex_decode(const char *hex, size_t n, uint8_t *out)
{
    size_t i;

    for (i = 0; i < n; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* SHA-256 fetched from the provider once: OpenSSL 3's SHA256() looks the algorithm up on
 * every call, which cost more than hashing a token (a lookup on every authenticated
 * request). */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void mg_sha256(const void *data, size_t n, uint8_t out[32])
{
    pthread_once(&sha256_once, sha256_fetch);
    if (sha256_md == NULL || !EVP_Digest(data, n, out, NULL, sha256_md, NULL))
        SHA256(data, n, out);
}

void mg_sha256_hex(const void *data, size_t n, char out[65])
{
    uint8_t md[SHA256_DIGEST_LENGTH];

    mg_sha256(data, n, md);
    mg_hex_encode(md, sizeof(md), out);
}

char *mg_base64_encode(const uint8_t *in, size_t n)
{
    size_t olen;
    char *out;

    if (n > (SIZE_MAX / 4) * 3 - 3)
        return NULL;
    olen = 4 * ((n + 2) / 3);
    out = malloc(olen + 1);
    if (out == NULL)
        return NULL;
    if (n > INT32_MAX) {
        free(out);
        return NULL;
    }
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    out[olen] = '\0';
    return out;
}

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

uint8_t *mg_base64_decode(const char *in, size_t in_len, size_t *out_len)
{
    uint8_t *out;
    int r;
    size_t pad = 0, i;

    if (in_len % 4 != 0 || in_len > INT32_MAX)
        return NULL;
    /* Only the alphabet, with '=' allowed as the last one or two characters. */
    for (i = 0; i < in_len; i++) {
        if (b64_char(in[i]))
            continue;
        if (in[i] == '=' && i >= in_len - 2 && i >= 2 && (i == in_len - 1 || in[in_len - 1] == '='))
            continue;
        return NULL;
    }
    out = malloc(in_len / 4 * 3 + 1);
    if (out == NULL)
        return NULL;
    r = EVP_DecodeBlock(out, (const unsigned char *)in, (int)in_len);
    if (r < 0) {
        free(out);
        return NULL;
    }
    if (in_len >= 1 && in[in_len - 1] == '=')
        pad++;
    if (in_len >= 2 && in[in_len - 2] == '=')
        pad++;
    *out_len = (size_t)r - pad;
    return out;
}

bool mg_random_bytes(void *out, size_t n)
{
    if (n > INT32_MAX)
        return false;
    return RAND_bytes(out, (int)n) == 1;
}

/* MODELGATED_TEST_CLOCK_SKEW_MS: a host whose clock is off by that much (the replica
 * tests' stand-in for a badly set clock; read once). */
static int64_t clock_skew_ms;
static pthread_once_t clock_skew_once = PTHREAD_ONCE_INIT;

static void clock_skew_read(void)
{
    const char *v = getenv("MODELGATED_TEST_CLOCK_SKEW_MS");

    if (v != NULL)
        clock_skew_ms = strtoll(v, NULL, 10);
}

int64_t mg_now_ms(void)
{
    struct timespec ts;

    pthread_once(&clock_skew_once, clock_skew_read);
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + clock_skew_ms;
}

int64_t mg_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static __thread time_t fmt_secs;
static __thread char fmt_head[26];
static __thread size_t fmt_len;

void mg_time_format(int64_t ms, char out[32])
{
    int64_t rem = ms % 1000;
    time_t secs;
    struct tm tm;
    size_t n;

    if (rem < 0)
        rem += 1000; /* floor, for times before the epoch */
    secs = (time_t)((ms - rem) / 1000);
    /* The seconds' text is kept per thread: every log line of a second formats the same. */
    if (secs != fmt_secs || fmt_len == 0) {
        gmtime_r(&secs, &tm);
        fmt_len = strftime(fmt_head, sizeof(fmt_head), "%Y-%m-%dT%H:%M:%S", &tm);
        fmt_secs = secs;
    }
    n = fmt_len;
    memcpy(out, fmt_head, n);
    out[n] = '.';
    out[n + 1] = (char)('0' + rem / 100);
    out[n + 2] = (char)('0' + rem / 10 % 10);
    out[n + 3] = (char)('0' + rem % 10);
    out[n + 4] = 'Z';
    out[n + 5] = '\0';
}

bool mg_time_parse(const char *s, int64_t *ms)
{
    struct tm tm;
    const char *p;
    int frac = 0, digits = 0;

    memset(&tm, 0, sizeof(tm));
    if (s == NULL || (p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
        return false;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (digits < 3) {
                frac = frac * 10 + (*p - '0');
                digits++;
            }
        }
        while (digits < 3) {
            frac *= 10;
            digits++;
        }
    }
    if (*p != 'Z' || p[1] != '\0')
        return false;
    *ms = (int64_t)timegm(&tm) * 1000 + frac;
    return true;
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* ^[a-z0-9][a-z0-9<extra>]{0,max_rest}$ */
static bool valid_name(const char *s, size_t n, const char *extra, size_t max_rest,
                       bool alpha_first)
{
    size_t i;

    if (s == NULL || n == 0 || n > max_rest + 1)
        return false;
    if (alpha_first ? !(s[0] >= 'a' && s[0] <= 'z') : !is_lower_alnum(s[0]))
        return false;
    for (i = 1; i < n; i++) {
        if (s[i] == '\0' || !(is_lower_alnum(s[i]) || strchr(extra, s[i]) != NULL))
            return false;
    }
    return true;
}

bool mg_valid_model_name(const char *s, size_t n)
{
    return valid_name(s, n, "._-", 62, false);
}

bool mg_valid_alias_name(const char *s, size_t n)
{
    return valid_name(s, n, "-", 31, true);
}

bool mg_valid_gateway_name(const char *s, size_t n)
{
    return valid_name(s, n, "_-", 62, false);
}

static bool is_lower_hex(const char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return true;
}

bool mg_valid_digest(const char *s, size_t n)
{
    return s != NULL && n == 71 && memcmp(s, "sha256:", 7) == 0 && is_lower_hex(s + 7, 64);
}

/* OCI reference grammar (distribution/reference), pieces. */
static bool ref_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* path-component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* over s[0..n) */
static bool ref_component(const char *s, size_t n)
{
    size_t i = 0;

    if (n == 0 || !ref_alnum(s[0]))
        return false;
    while (i < n) {
        while (i < n && ref_alnum(s[i]))
            i++;
        if (i == n)
            return true;
        if (s[i] == '.' || (s[i] == '_' && (i + 1 >= n || s[i + 1] != '_'))) {
            i++;
        } else if (s[i] == '_' && s[i + 1] == '_') {
            i += 2;
        } else if (s[i] == '-') {
            while (i < n && s[i] == '-')
                i++;
        } else {
            return false;
        }
        if (i >= n || !ref_alnum(s[i]))
            return false;
    }
    return true;
}

/* domain: labels of [a-zA-Z0-9] and inner '-', separated by '.', optional :port; or
 * localhost[:port]. Only used for the first path part when it looks like a host. */
static bool ref_domain(const char *s, size_t n)
{
    size_t i = 0, label = 0, colon = n;

    for (size_t k = 0; k < n; k++)
        if (s[k] == ':')
            colon = k;
    if (colon < n) {
        if (colon + 1 == n || n - colon - 1 > 5)
            return false;
        for (size_t k = colon + 1; k < n; k++)
            if (s[k] < '0' || s[k] > '9')
                return false;
        n = colon;
    }
    if (n == 0)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];

        if (c == '.') {
            if (label == 0 || s[i - 1] == '-')
                return false;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   (c == '-' && label > 0)) {
            label++;
        } else {
            return false;
        }
    }
    return label > 0 && s[n - 1] != '-';
}

bool mg_valid_image_ref(const char *s, size_t n)
{
    size_t at, name_end, start, i, tag_start = 0;
    bool first = true;

    /* <name>[:<tag>]@sha256:<64 hex> */
    if (s == NULL || n < 73 || n > 512)
        return false;
    at = n - 71;
    if (s[at - 1] != '@' || !mg_valid_digest(s + at, 71))
        return false;
    name_end = at - 1;
    /* a tag: the last ':' after the last '/' */
    for (i = name_end; i > 0; i--) {
        if (s[i - 1] == '/')
            break;
        if (s[i - 1] == ':') {
            tag_start = i;
            break;
        }
    }
    if (tag_start) {
        size_t tl = name_end - tag_start;

        if (tl == 0 || tl > 128)
            return false;
        for (i = tag_start; i < name_end; i++) {
            char c = s[i];

            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || (i > tag_start && (c == '.' || c == '-'))))
                return false;
        }
        name_end = tag_start - 1;
    }
    if (name_end == 0 || name_end > 255)
        return false;
    /* [domain/]component(/component)* */
    for (start = 0; start <= name_end;) {
        size_t end = start;

        while (end < name_end && s[end] != '/')
            end++;
        if (end == start)
            return false;
        if (first && end < name_end &&
            (memchr(s + start, '.', end - start) || memchr(s + start, ':', end - start) ||
             (end - start == 9 && memcmp(s + start, "localhost", 9) == 0))) {
            if (!ref_domain(s + start, end - start))
                return false;
        } else if (!ref_component(s + start, end - start)) {
            return false;
        }
        first = false;
        start = end + 1;
        if (end == name_end)
            break;
    }
    return true;
}

bool mg_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    long long v;

    const char *d = s;

    if (s == NULL || *s == '\0')
        return false;
    if (*d == '-')
        d++;
    if (!(*d >= '0' && *d <= '9'))
        return false; /* no whitespace, no '+' */
    if (d[0] == '0' && d[1] != '\0')
        return false; /* no leading zeros: "007" does not name version 7 */
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool mg_parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    unsigned shift = 0;

    if (s == NULL || !(*s >= '0' && *s <= '9'))
        return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return false;
    switch (*end) {
    case '\0':
        break;
    case 'K':
    case 'k':
        shift = 10;
        end++;
        break;
    case 'M':
    case 'm':
        shift = 20;
        end++;
        break;
    case 'G':
    case 'g':
        shift = 30;
        end++;
        break;
    case 'T':
    case 't':
        shift = 40;
        end++;
        break;
    default:
        return false;
    }
    if (*end == 'i' || *end == 'B')
        end++;
    if (*end == 'B')
        end++;
    if (*end != '\0')
        return false;
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

bool mg_ct_equal(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

uint32_t mg_fnv1a(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}
