/*
 * text.c - see text.h.
 */
#include "text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len, i;

    if (n == 0)
        return 0;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool mg_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k;

    while (i < n) {
        if ((k = utf8_seq(p + i, n - i)) == 0)
            return false;
        i += k;
    }
    return true;
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

static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

const char *mg_request_target_problem(const char *target)
{
    unsigned char dec[8192];
    size_t n = 0, i;
    int hi, lo;

    if (target == NULL)
        return "the request has no target";
    for (i = 0; target[i] != '\0' && target[i] != '?'; i++) {
        unsigned char c = (unsigned char)target[i];

        if (c == '%') {
            if ((hi = hexval(target[i + 1])) < 0 || (lo = hexval(target[i + 2])) < 0)
                return "the path holds a '%' that is not followed by two hex digits";
            c = (unsigned char)(hi * 16 + lo);
            i += 2;
            if (c == 0)
                return "the path holds an encoded NUL (%00)";
        }
        if (is_control(c))
            return "the path holds a control character";
        if (n == sizeof(dec))
            return "the path is too long";
        dec[n++] = c;
    }
    if (!mg_utf8_valid((const char *)dec, n))
        return "the path is not valid UTF-8 once percent-decoded";
    return NULL;
}

const char *mg_method_label(const char *method)
{
    static const char *const std[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    size_t i;

    for (i = 0; method != NULL && i < sizeof(std) / sizeof(std[0]); i++) {
        if (strcmp(method, std[i]) == 0)
            return std[i];
    }
    return "other";
}

bool mg_method_valid(const char *method)
{
    static const char tchar_extra[] = "!#$%&'*+-.^_`|~";
    size_t i;

    if (method == NULL || method[0] == '\0')
        return false;
    for (i = 0; method[i] != '\0'; i++) {
        unsigned char c = (unsigned char)method[i];

        if (i >= 32)
            return false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c != '\0' && strchr(tchar_extra, c) != NULL)))
            return false;
    }
    return true;
}

char *mg_log_escape(const char *s, char *out, size_t cap, bool for_json)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p), i = 0, o = 0, k;

    if (cap == 0)
        return out;
    /* Printable ASCII without '\\' (nearly every path and method): copied as it is. */
    while (i < n && p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
        i++;
    if (i == n) {
        o = n < cap ? n : cap - 1;
        memcpy(out, p, o);
        out[o] = '\0';
        return out;
    }
    i = 0;
    while (i < n) {
        k = utf8_seq(p + i, n - i);
        if (k == 0 || p[i] == '\\' || (!for_json && k == 1 && is_control(p[i]))) {
            if (o + 4 >= cap)
                break;
            snprintf(out + o, cap - o, "\\x%02x", p[i]);
            o += 4;
            i++;
            continue;
        }
        if (o + k >= cap)
            break;
        memcpy(out + o, p + i, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
    return out;
}

char *mg_prom_label(const char *value, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)(value ? value : "");
    size_t n = strlen((const char *)p), i = 0, o = 0, k;
    const char *rep;

    if (cap == 0)
        return out;
    while (i < n) {
        k = utf8_seq(p + i, n - i);
        rep = NULL;
        if (k == 0)
            rep = "?", k = 1;
        else if (p[i] == '\\')
            rep = "\\\\";
        else if (p[i] == '"')
            rep = "\\\"";
        else if (p[i] == '\n')
            rep = "\\n";
        if (rep == NULL) {
            if (o + k >= cap)
                break;
            memcpy(out + o, p + i, k);
            o += k;
        } else {
            if (o + strlen(rep) >= cap)
                break;
            memcpy(out + o, rep, strlen(rep));
            o += strlen(rep);
        }
        i += k;
    }
    out[o] = '\0';
    return out;
}

/*
 * mg_fmt_double's text without printf when v is a decimal of at most 15 significant digits
 * (metrics, parameters, prices: nearly every real a reply holds), 1e-4 <= |v| < 1e14:
 * v == m / 10^k for an integer m < 10^15 (m and 10^k exact doubles, the quotient correctly
 * rounded, so the decimal m·10^-k reads back as v). Then %.15g prints exactly that decimal:
 * v is within half an ulp (< |v|·1.2e-16) of it, and the 15-digit grid around v is at least
 * |v|·1e-15 wide, so rounding v to 15 digits lands on it; the exponent is in [-4, 15), so
 * %g writes it in fixed notation without trailing zeros, as here (the smallest k has none).
 * False when v is not such a decimal: the caller prints it.
 */
static bool fmt_short_decimal(double v, char *out, size_t cap)
{
    static const double p10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    double a = v < 0 ? -v : v;
    char dig[20];
    int k, n, i, o = 0;

    if (!(a >= 1e-4 && a < 1e14))
        return false; /* NaN, infinities and zeros too */
    for (k = 0; k < 16; k++) {
        double s = a * p10[k], m;
        uint64_t u;

        if (s >= 1e15)
            return false;
        m = (double)(int64_t)(s + 0.5);
        if (m / p10[k] != a)
            continue;
        for (u = (uint64_t)m, n = 0; n == 0 || u != 0; u /= 10)
            dig[n++] = (char)('0' + u % 10); /* reversed */
        if (cap < (size_t)(n + k + 4))
            return false;
        if (v < 0)
            out[o++] = '-';
        if (n <= k) {
            out[o++] = '0';
            out[o++] = '.';
            for (i = n; i < k; i++)
                out[o++] = '0';
        }
        for (i = n - 1; i >= 0; i--) {
            out[o++] = dig[i];
            if (i == k && k > 0 && n > k)
                out[o++] = '.';
        }
        out[o] = '\0';
        return true;
    }
    return false;
}

const char *mg_fmt_i64(int64_t v, char out[MG_FMT_INT_LEN], size_t *len)
{
    size_t k = MG_FMT_INT_LEN;
    uint64_t m = v < 0 ? 0ull - (uint64_t)v : (uint64_t)v;

    do {
        out[--k] = (char)('0' + m % 10);
        m /= 10;
    } while (m != 0);
    if (v < 0)
        out[--k] = '-';
    *len = MG_FMT_INT_LEN - k;
    return out + k;
}

char *mg_fmt_double(double v, char *out, size_t cap)
{
    if (fmt_short_decimal(v, out, cap))
        return out;
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return out;
}

/* Rewrite json's reals into out (when not NULL); the length of the result either way. */
static size_t short_reals(const char *json, char *out)
{
    const char *p = json;
    size_t n = 0;
    bool in_string = false;

    while (*p != '\0') {
        if (in_string) {
            if (*p == '\\' && p[1] != '\0') {
                if (out)
                    memcpy(out + n, p, 2);
                n += 2, p += 2;
                continue;
            }
            in_string = *p != '"';
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            size_t len = strspn(p, "0123456789+-.eE");
            char num[40];

            if (len < sizeof(num) && strcspn(p, ".eE") < len) {
                memcpy(num, p, len);
                num[len] = '\0';
                mg_fmt_double(strtod(num, NULL), num, sizeof(num));
                if (strpbrk(num, ".e") == NULL) /* "3" would read as an integer */
                    memcpy(num + strlen(num), ".0", 3);
                if (out)
                    memcpy(out + n, num, strlen(num));
                n += strlen(num);
            } else {
                if (out)
                    memcpy(out + n, p, len);
                n += len;
            }
            p += len;
            continue;
        }
        if (out)
            out[n] = *p;
        n++, p++;
    }
    if (out)
        out[n] = '\0';
    return n;
}

char *mg_json_short_reals(const char *json)
{
    char *out = malloc(short_reals(json, NULL) + 1);

    if (out != NULL)
        short_reals(json, out);
    return out;
}
