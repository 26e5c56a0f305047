/*
 * json.c - compact JSON text with shortest reals, written in one pass (json.h).
 */
#include "json.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

#define JSON_TEXT_MAX ((size_t)1 << 30)
#define JSON_DEPTH_MAX 2048 /* jansson's own parse limit, so nothing we hold is deeper */

static bool grow(struct mg_jw *o, size_t more)
{
    size_t cap;
    char *p;

    if (o->failed)
        return false;
    if (more <= o->cap - o->n)
        return true;
    if (more > JSON_TEXT_MAX - o->n) {
        o->failed = true;
        return false;
    }
    cap = o->cap ? o->cap : 512;
    while (cap - o->n < more)
        cap = cap > JSON_TEXT_MAX / 2 ? JSON_TEXT_MAX + 1 : cap * 2;
    if ((p = realloc(o->p, cap)) == NULL) {
        o->failed = true;
        return false;
    }
    o->p = p;
    o->cap = cap;
    return true;
}

static void put(struct mg_jw *o, const char *s, size_t n)
{
    if (n > 0 && grow(o, n)) {
        memcpy(o->p + o->n, s, n);
        o->n += n;
    }
}

static void put_c(struct mg_jw *o, char c)
{
    if (grow(o, 1))
        o->p[o->n++] = c;
}

/* The escape of byte c, which put_string found needs one. Out of its loop: the compiler
 * would otherwise build the escape's bytes for every byte of the string. */
static void put_escape(struct mg_jw *o, unsigned char c, const char *hex)
{
    char esc[6] = {'\\', 0, '0', '0', 0, 0};
    size_t k = 2;

    switch (c) {
    case '"':
        esc[1] = '"';
        break;
    case '\\':
        esc[1] = '\\';
        break;
    case '\b':
        esc[1] = 'b';
        break;
    case '\f':
        esc[1] = 'f';
        break;
    case '\n':
        esc[1] = 'n';
        break;
    case '\r':
        esc[1] = 'r';
        break;
    case '\t':
        esc[1] = 't';
        break;
    default:
        esc[1] = 'u';
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 0xf];
        k = 6;
    }
    put(o, esc, k);
}

/* Whether the 8 bytes at p are all plain (put_string's table): none below 0x20, none >= 0x80,
 * no '"' and no '\\'. Bytewise on one word: (v - k * 0x01..) & ~v has a byte's top bit set
 * for some byte below k (k <= 0x80) whenever there is one, and never when there is none; a
 * byte equal to c is a zero byte of x ^ (c * 0x01..). */
static bool plain8(const unsigned char *p)
{
    const uint64_t ones = 0x0101010101010101ull, tops = 0x8080808080808080ull;
    uint64_t x, q, b;

    memcpy(&x, p, 8);
    q = x ^ (ones * '"');
    b = x ^ (ones * '\\');
    return ((((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b) | x) & tops) == 0;
}

/* As jansson escapes: '"', '\\', the C escapes, other controls as \u00XX; UTF-8 as is. One
 * pass over the bytes; only a string with a byte >= 0x80 is checked as UTF-8 as well. */
static void put_string(struct mg_jw *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    /* 1: ASCII written as it is; 0: a control, '"' or '\\' (escaped) or a byte >= 0x80. */
    static const unsigned char plain[256] = {
        [32] = 1,  [33] = 1,  [35] = 1,  [36] = 1,  [37] = 1,  [38] = 1,  [39] = 1,  [40] = 1,
        [41] = 1,  [42] = 1,  [43] = 1,  [44] = 1,  [45] = 1,  [46] = 1,  [47] = 1,  [48] = 1,
        [49] = 1,  [50] = 1,  [51] = 1,  [52] = 1,  [53] = 1,  [54] = 1,  [55] = 1,  [56] = 1,
        [57] = 1,  [58] = 1,  [59] = 1,  [60] = 1,  [61] = 1,  [62] = 1,  [63] = 1,  [64] = 1,
        [65] = 1,  [66] = 1,  [67] = 1,  [68] = 1,  [69] = 1,  [70] = 1,  [71] = 1,  [72] = 1,
        [73] = 1,  [74] = 1,  [75] = 1,  [76] = 1,  [77] = 1,  [78] = 1,  [79] = 1,  [80] = 1,
        [81] = 1,  [82] = 1,  [83] = 1,  [84] = 1,  [85] = 1,  [86] = 1,  [87] = 1,  [88] = 1,
        [89] = 1,  [90] = 1,  [91] = 1,  [93] = 1,  [94] = 1,  [95] = 1,  [96] = 1,  [97] = 1,
        [98] = 1,  [99] = 1,  [100] = 1, [101] = 1, [102] = 1, [103] = 1, [104] = 1, [105] = 1,
        [106] = 1, [107] = 1, [108] = 1, [109] = 1, [110] = 1, [111] = 1, [112] = 1, [113] = 1,
        [114] = 1, [115] = 1, [116] = 1, [117] = 1, [118] = 1, [119] = 1, [120] = 1, [121] = 1,
        [122] = 1, [123] = 1, [124] = 1, [125] = 1, [126] = 1, [127] = 1};
    const unsigned char *u = (const unsigned char *)s;
    size_t i, run = 0;
    unsigned char high = 0;

    if (!grow(o, n + 2))
        return;
    o->p[o->n++] = '"';
    for (i = 0; i < n; i++) {
        /* Whole words of plain bytes, then byte by byte to the next byte to escape. */
        while (n - i >= 8 && plain8(u + i))
            i += 8;
        for (; i < n; i++) {
            if (plain[u[i]]) /* one load and one branch for nearly every other byte */
                continue;
            if (u[i] < 0x80)
                break;
            high = 1;
        }
        if (i == n)
            break;
        put(o, s + run, i - run);
        run = i + 1;
        put_escape(o, u[i], hex);
    }
    put(o, s + run, n - run);
    put_c(o, '"');
    if (high && !mg_utf8_valid(s, n))
        o->failed = true; /* json_dumps refuses such a string too */
}

static void put_integer(struct mg_jw *o, json_int_t v)
{
    char num[MG_FMT_INT_LEN];
    size_t n;
    const char *d = mg_fmt_i64(v, num, &n);

    put(o, d, n);
}

/* The shortest text that reads back as v (mg_fmt_double), with ".0" when it has neither
 * '.' nor an exponent: mg_json_short_reals' rule. */
static void put_real(struct mg_jw *o, double v)
{
    char num[40];

    mg_fmt_double(v, num, sizeof(num));
    if (strpbrk(num, ".e") == NULL)
        memcpy(num + strlen(num), ".0", 3);
    put(o, num, strlen(num));
}

static void put_value(struct mg_jw *o, const json_t *v, int depth)
{
    if (depth > JSON_DEPTH_MAX) {
        o->failed = true;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        void *it = json_object_iter((json_t *)v);
        bool first = true;

        put_c(o, '{');
        for (; it != NULL && !o->failed; it = json_object_iter_next((json_t *)v, it)) {
            const char *key = json_object_iter_key(it);
#if JANSSON_VERSION_HEX >= 0x020e00
            size_t klen = json_object_iter_key_len(it);
#else
            size_t klen = strlen(key);
#endif
            if (!first)
                put_c(o, ',');
            first = false;
            put_string(o, key, klen);
            put_c(o, ':');
            put_value(o, json_object_iter_value(it), depth + 1);
        }
        put_c(o, '}');
        break;
    }
    case JSON_ARRAY: {
        size_t i, n = json_array_size(v);

        put_c(o, '[');
        for (i = 0; i < n && !o->failed; i++) {
            if (i > 0)
                put_c(o, ',');
            put_value(o, json_array_get(v, i), depth + 1);
        }
        put_c(o, ']');
        break;
    }
    case JSON_STRING:
        put_string(o, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        put_integer(o, json_integer_value(v));
        break;
    case JSON_REAL:
        put_real(o, json_real_value(v));
        break;
    case JSON_TRUE:
        put(o, "true", 4);
        break;
    case JSON_FALSE:
        put(o, "false", 5);
        break;
    case JSON_NULL:
        put(o, "null", 4);
        break;
    }
}

/* --- mg_jw: a document written member by member (json.h) ------------------------------- */

/* A comma when a value was already written at this depth; none right after a key. */
static void jw_pre(struct mg_jw *w)
{
    uint64_t bit = (uint64_t)1 << w->depth;

    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->more & bit)
        put_c(w, ',');
    w->more |= bit;
}

static void jw_open(struct mg_jw *w, char c)
{
    jw_pre(w);
    put_c(w, c);
    if (w->depth + 1 >= 64) {
        w->failed = true;
        return;
    }
    w->depth++;
    w->more &= ~((uint64_t)1 << w->depth);
}

static void jw_close(struct mg_jw *w, char c)
{
    if (w->depth > 0)
        w->depth--;
    put_c(w, c);
}

void mg_jw_obj(struct mg_jw *w)
{
    jw_open(w, '{');
}

void mg_jw_obj_end(struct mg_jw *w)
{
    jw_close(w, '}');
}

void mg_jw_arr(struct mg_jw *w)
{
    jw_open(w, '[');
}

void mg_jw_arr_end(struct mg_jw *w)
{
    jw_close(w, ']');
}

void mg_jw_key(struct mg_jw *w, const char *key)
{
    jw_pre(w);
    put_string(w, key, strlen(key));
    put_c(w, ':');
    w->after_key = true;
}

void mg_jw_str(struct mg_jw *w, const char *s, size_t n)
{
    jw_pre(w);
    if (s == NULL)
        put(w, "null", 4);
    else
        put_string(w, s, n);
}

void mg_jw_int(struct mg_jw *w, int64_t v)
{
    jw_pre(w);
    put_integer(w, (json_int_t)v);
}

void mg_jw_real(struct mg_jw *w, double v)
{
    jw_pre(w);
    put_real(w, v);
}

void mg_jw_null(struct mg_jw *w)
{
    jw_pre(w);
    put(w, "null", 4);
}

void mg_jw_value(struct mg_jw *w, const json_t *v)
{
    jw_pre(w);
    if (v == NULL)
        put(w, "null", 4);
    else
        put_value(w, v, 0);
}

/* json's reals shortened as put_real writes them, the rest copied: mg_json_short_reals'
 * rule, streamed. */
void mg_jw_raw(struct mg_jw *w, const char *json, size_t n)
{
    struct mg_jw *o = w;
    size_t i = 0, run = 0;
    bool in_string = false;

    jw_pre(w);
    while (i < n) {
        char c = json[i];

        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            i++;
        } else if (c == '"') {
            in_string = true;
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t len = 0;
            bool real = false;
            char num[40];

            while (i + len < n && strchr("0123456789+-.eE", json[i + len]) != NULL &&
                   json[i + len] != '\0') {
                real = real || json[i + len] == '.' || json[i + len] == 'e' || json[i + len] == 'E';
                len++;
            }
            if (real && len < sizeof(num)) {
                put(o, json + run, i - run);
                memcpy(num, json + i, len);
                num[len] = '\0';
                put_real(o, strtod(num, NULL));
                run = i + len;
            }
            i += len;
        } else {
            i++;
        }
    }
    put(o, json + run, n - run);
}

void mg_jw_reopen(struct mg_jw *w, const char *text, size_t n)
{
    size_t k = n;

    while (k > 0 && text[k - 1] != '}')
        k--;
    if (k == 0 || text[0] != '{') {
        w->failed = true;
        return;
    }
    put(w, text, k - 1);
    w->depth = 1;
    w->after_key = false;
    w->more = k > 2 ? (uint64_t)1 << 1 : 0;
}

void mg_jw_bytes(struct mg_jw *w, const char *bytes, size_t n)
{
    if (n > 0)
        put(w, bytes, n);
}

char *mg_jw_done(struct mg_jw *w, size_t *len)
{
    char *text;

    put_c(w, '\0');
    if (w->failed) {
        free(w->p);
        *w = (struct mg_jw){0};
        return NULL;
    }
    text = w->p;
    if (len)
        *len = w->n - 1;
    *w = (struct mg_jw){0};
    return text;
}

void mg_jw_free(struct mg_jw *w)
{
    free(w->p);
    *w = (struct mg_jw){0};
}

char *mg_json_text(const json_t *v, size_t *len)
{
    struct mg_jw o = {0};

    if (len)
        *len = 0;
    if (v == NULL)
        return NULL;
    put_value(&o, v, 0);
    put_c(&o, '\0');
    if (o.failed) {
        free(o.p);
        return NULL;
    }
    if (len)
        *len = o.n - 1;
    return o.p;
}
